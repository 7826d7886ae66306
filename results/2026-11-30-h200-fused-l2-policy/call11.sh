#!/bin/bash
# Device call 11: small_probe.cu for verify and decode. Logs to $OUT.
set -u
here=results/2026-11-30-h200-fused-l2-policy
for f in dsa_target_verify dsa_decode; do
  /usr/local/cuda-13.0/bin/nvcc -O3 -arch=sm_90 -std=c++17 -DFAMILY_PATH="\"../../kernels/$f.cu\"" -o /tmp/small_$f $here/small_probe.cu > $OUT/build-$f.log 2>&1 &
done
wait
for f in dsa_target_verify dsa_decode; do /tmp/small_$f > $OUT/small-$f.txt 2>&1; echo "$f rc=$?" >> $OUT/rc.txt; done
