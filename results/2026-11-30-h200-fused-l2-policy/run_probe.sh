#!/bin/bash
# On the GPU host: build the probe for the three DSA families and run it; logs to $1.
set -u
out=$1; mkdir -p "$out"
cd "$(dirname "$0")"
NVCC=${NVCC:-/usr/local/cuda-13.0/bin/nvcc}
for f in ${FAMILIES:-dsa_target_verify dsa_draft_extend_v2 dsa_decode}; do
  $NVCC -O3 -arch=sm_90 -std=c++17 -DFAMILY_PATH="\"../../kernels/$f.cu\"" -o /tmp/probe_$f probe_fused.cu > "$out/build-$f.log" 2>&1 &
done
wait
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw --format=csv > "$out/gpu.txt" 2>&1
for f in ${FAMILIES:-dsa_target_verify dsa_draft_extend_v2 dsa_decode}; do
  /tmp/probe_$f "${BATCHES:-1,8,64,256,1024,4096}" "${ROUNDS:-7}" > "$out/probe-$f.txt" 2>&1
  echo "$f rc=$?" >> "$out/rc.txt"
done
