#!/usr/bin/env bash
# Call 1 of session 12: the fit GPU tests on 4af5456, then tiny sweeps interleaved over three
# builds of 4af5456 that differ only in the host reference's table (README: "The three builds").
# Run beside the binaries (bundle/: gpu-test, metaprep-l2, metaprep-8m, metaprep-64m):
#   OUT=/tmp/out bundle/run.sh
set -u
START=$(date +%s); B=$(cd "$(dirname "$0")" && pwd); W=/root/w; rm -rf $W; mkdir -p $W
nvidia-smi --query-gpu=name,driver_version --format=csv > $OUT/rc.txt
( timeout 200 $B/gpu-test --ignored --test-threads 1 validate_fit > $OUT/gpu-fit.log 2>&1; echo "gpu-test validate_fit rc $? wall $(( $(date +%s) - START ))" >> $OUT/rc.txt )
i=0
while [ $(( $(date +%s) - START )) -lt 480 ]; do
  i=$((i+1))
  for v in l2 8m 64m; do
    s=$(date +%s)
    $B/metaprep-$v sweep --families dsa_decode --arms eager-pinned,fused --batch-sizes 8 --block-sizes 5 --processes 6 --out $W/r$i-$v > $W/r$i-$v.log 2>&1
    echo "r$i $v rc $? wall $(( $(date +%s) - s ))" >> $OUT/rc.txt
  done
done
cd $W && tar czf $OUT/probe.tgz */rounds.csv */env.json *.log
