#!/usr/bin/env bash
# Call 2 of session 12: does the launch mode hold over one process's rounds, or change with time
# inside it? Run beside metaprep-l2 (4af5456 as committed): OUT=/tmp/out bundle/run.sh
set -u
START=$(date +%s); B=$(cd "$(dirname "$0")" && pwd); W=/root/w2; rm -rf $W; mkdir -p $W
i=0
while [ $(( $(date +%s) - START )) -lt 230 ]; do
  i=$((i+1))
  for p in 1 12; do
    s=$(date +%s)
    $B/metaprep-l2 sweep --families dsa_decode --arms eager-pinned,fused --batch-sizes 8 --block-sizes 5 --processes $p --min-rounds 12 --max-rounds 12 --precision-pct 0.01 --out $W/r$i-p$p > $W/r$i-p$p.log 2>&1
    echo "r$i p$p rc $? wall $(( $(date +%s) - s )) at $(( s - START ))" >> $OUT/rc.txt
  done
done
cd $W && tar czf $OUT/probe2.tgz */rounds.csv */env.json *.log
