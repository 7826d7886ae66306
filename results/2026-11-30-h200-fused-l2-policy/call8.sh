#!/bin/bash
# Device call 8: the one-kernel graph floor probe, batch <= 64 (graph and fused) alternating
# the builds before and after twice, and Nsight Compute (Speed of Light) of both builds'
# DSA and DSpark kernels at batch 1, 64 and 1024, block 5. Packed into $OUT/r.tgz each step.
set -u
B=/tmp/b; R=/tmp/r8; mkdir -p $B $R
tar xJf bundle-call/b.tar.xz -C $B
pack() { tar czf $OUT/r.tgz -C $R .; }
step() { local name=$1; shift; "$@" > $R/$name.log 2>&1; echo "$name rc=$?" >> $R/rc.txt; pack; }
here=results/2026-11-30-h200-fused-l2-policy
step chain-build /usr/local/cuda-13.0/bin/nvcc -O3 -arch=sm_90 -o /tmp/chain_probe $here/chain_probe.cu
step chain /tmp/chain_probe
dsa=dsa_decode,dsa_target_verify,dsa_draft_extend_v2
for k in 1 2; do
  for b in before after; do
    bin=$B/metaprep; [ $b = before ] && bin=$B/metaprep-before
    step small-$b-$k $bin sweep --families $dsa --batch-sizes 1,8,64 --block-sizes 5,8 --arms graph,fused --out $R/small-$b-$k
  done
done
export NCU=$(ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for b in after before; do
  bin=$B/metaprep; [ $b = before ] && bin=$B/metaprep-before
  step ncu-$b bash scripts/ncu_prep.sh $bin $R/ncu-$b sol --batch-sizes 1,64,1024 --block-sizes 5 --arms graph,fused --steps 1
  rm -f $R/ncu-$b/*.ncu-rep; pack
done
