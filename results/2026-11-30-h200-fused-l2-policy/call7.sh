#!/bin/bash
# Device call 7: check and the GPU tests of the cache-hint build, then batch 1024 (four
# families, graph and fused) alternating the build before (HEAD 8bd23de) and after, twice,
# then a default sweep of each. Everything is packed into $OUT/r.tgz after each step.
set -u
B=/tmp/b; R=/tmp/r; mkdir -p $B $R
tar xJf bundle-call/b.tar.xz -C $B
pack() { tar czf $OUT/r.tgz -C $R .; }
step() { local name=$1; shift; "$@" > $R/$name.log 2>&1; echo "$name rc=$?" >> $R/rc.txt; pack; }
nvidia-smi -q -d CLOCK,PERFORMANCE > $R/nvidia-smi.txt 2>&1
step check $B/metaprep check
step gpu-tests $B/gpu-tests --ignored --test-threads=1
fams=dsa_target_verify,dsa_draft_extend_v2,dsa_decode,dspark_draft_block
for k in 1 2; do
  for b in before after; do
    bin=$B/metaprep; [ $b = before ] && bin=$B/metaprep-before
    step bs1024-$b-$k $bin sweep --families $fams --batch-sizes 1024 --block-sizes 5 --arms graph,fused --out $R/bs1024-$b-$k
  done
done
step sweep-before $B/metaprep-before sweep --out $R/before
step sweep-after $B/metaprep sweep --out $R/after
