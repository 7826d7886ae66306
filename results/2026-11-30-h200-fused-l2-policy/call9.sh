#!/bin/bash
# Device call 9: the build with the evict-last policy computed once per thread ("after2", the
# committed kernels): check, the GPU tests, batch <= 64 alternating with call 7's "after"
# build twice, batch 1024 once each, then Nsight Compute (Speed of Light) of after2 and of
# the build before (8bd23de). Packed into $OUT/r.tgz after each step.
set -u
B=/tmp/b; R=/tmp/r9; mkdir -p $B $R
tar xJf bundle-call/b.tar.xz -C $B
pack() { tar czf $OUT/r.tgz -C $R .; }
step() { local name=$1; shift; "$@" > $R/$name.log 2>&1; echo "$name rc=$?" >> $R/rc.txt; pack; }
step check $B/metaprep check
step gpu-tests $B/gpu-tests --ignored --test-threads=1
dsa=dsa_decode,dsa_target_verify,dsa_draft_extend_v2
for k in 1 2; do
  for b in after after2; do
    bin=$B/metaprep; [ $b = after ] && bin=$B/metaprep-after
    step small-$b-$k $bin sweep --families $dsa --batch-sizes 1,8,64 --block-sizes 5,8 --arms graph,fused --out $R/small-$b-$k
  done
done
fams=dsa_target_verify,dsa_draft_extend_v2,dsa_decode,dspark_draft_block
for b in after after2; do
  bin=$B/metaprep; [ $b = after ] && bin=$B/metaprep-after
  step bs1024-$b $bin sweep --families $fams --batch-sizes 1024 --block-sizes 5 --arms graph,fused --out $R/bs1024-$b
done
export NCU=$(ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for b in after2 before; do
  bin=$B/metaprep; [ $b = before ] && bin=$B/metaprep-before
  step ncu-$b bash scripts/ncu_prep.sh $bin $R/ncu-$b sol --batch-sizes 1,64,1024 --block-sizes 5 --arms graph,fused --steps 3
  rm -f $R/ncu-$b/*.ncu-rep; pack
done
