#!/usr/bin/env bash
# Tiny sweeps pinned to different CPUs, interleaved: does the launch mode follow the CPU?
# Run beside the metaprep binary (a bundle/ folder), OUT the folder for what comes back:
#   OUT=/tmp/out bundle/cpus.sh
# Session 11 ran it with a 150 s cap on starting another sweep; all 12 ran, in 107 s.
set -u
START=${START:-$(date +%s)}
B=$(dirname "$0"); W=/root/cpus; rm -rf $W; mkdir -p $W
nproc > $OUT/rc.txt; lscpu | grep -i "numa\|socket\|model name" >> $OUT/rc.txt
i=0
for c in 15 1 9 5 15 1 9 5 15 1 9 5; do
  i=$((i+1)); s=$(date +%s)
  $B/metaprep sweep --families dsa_decode --arms eager-pinned,fused --batch-sizes 8 --block-sizes 5 --cpu $c --processes 6 --out $W/r$i-cpu$c > $W/r$i.log 2>&1
  echo "r$i cpu $c rc $? wall $(( $(date +%s) - s ))" >> $OUT/rc.txt
  [ $(( $(date +%s) - START )) -gt 150 ] && break
done
cd $W && tar czf $OUT/cpus.tgz */rounds.csv */env.json *.log
