#!/bin/bash
# Device call 10: what the L2 policy changes in DRAM traffic. Nsight Compute reads DRAM bytes
# and the L2 hit rate of the fused kernel in a batch-1024 sweep (sweep lengths, graph replay),
# without flushing caches between kernels (--cache-control none), so each profiled launch sees
# the L2 the previous replays left, as the sweep's steps do. Before (8bd23de) and after.
set -u
B=/tmp/b; R=/tmp/r10; mkdir -p $B $R
tar xJf bundle-call/b.tar.xz -C $B
NCU=$(ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
metrics=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,lts__t_sectors_op_write.sum
for fam in dsa_target_verify dsa_decode; do
  for b in before after; do
    bin=$B/metaprep; [ $b = before ] && bin=$B/metaprep-before
    $NCU --kernel-name dsa_fused --launch-skip 200 --launch-count 5 --cache-control none \
      --metrics $metrics --csv --page raw \
      $bin sweep --families $fam --batch-sizes 1024 --block-sizes 5 --arms fused --time-cap-ms 200 \
      --out $R/sweep-$fam-$b > $R/ncu-$fam-$b.csv 2> $R/ncu-$fam-$b.log
    echo "$fam $b rc=$?" >> $R/rc.txt
    tar czf $OUT/r.tgz -C $R .
  done
done
