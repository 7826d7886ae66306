#!/bin/bash
# Device call 12: "after3" (after2 with the scans loading each request's length once a pass
# and one two-value block scan): check, the GPU tests, batch <= 64 alternating with after2
# twice, batch 1024, and a default sweep. Packed into $OUT/r.tgz after each step.
set -u
B=/tmp/b; R=/tmp/r12; mkdir -p $B $R
tar xJf bundle-call/b.tar.xz -C $B
pack() { tar czf $OUT/r.tgz -C $R .; }
step() { local name=$1; shift; "$@" > $R/$name.log 2>&1; echo "$name rc=$?" >> $R/rc.txt; pack; }
step check $B/metaprep check
step gpu-tests $B/gpu-tests --ignored --test-threads=1
dsa=dsa_decode,dsa_target_verify,dsa_draft_extend_v2
for k in 1 2; do
  for b in after2 after3; do
    bin=$B/metaprep; [ $b = after2 ] && bin=$B/metaprep-after2
    step small-$b-$k $bin sweep --families $dsa --batch-sizes 1,8,64 --block-sizes 5,8 --arms graph,fused --out $R/small-$b-$k
  done
done
step bs1024-after3 $B/metaprep sweep --families dsa_target_verify,dsa_draft_extend_v2,dsa_decode,dspark_draft_block --batch-sizes 1024 --block-sizes 5 --arms graph,fused --out $R/bs1024-after3
step sweep-after3 $B/metaprep sweep --out $R/after3
