#!/usr/bin/env bash
# Profile the prep kernels with Nsight Compute, driven by `metaprep check` (a handful of
# launches per cell, every arm's kernels exactly as the sweep launches them, graph arms as
# graph nodes). One report per family, exported to CSV beside it.
#
#   scripts/ncu_prep.sh METAPREP OUTDIR [SECTIONS] [check flags...]
#
# SECTIONS: "sol" (default: Speed of Light, launch statistics and occupancy, a few replay
# passes a kernel) or "full" (--set full: add memory and warp-stall detail, slower).
# Extra flags go to `metaprep check`, e.g. --batch-sizes 1,256,1024 --block-sizes 5
# --arms graph,fused --steps 3. NCU names the ncu binary (default: ncu on the PATH, then
# /usr/local/cuda/bin/ncu).
set -euo pipefail
metaprep=$1 out=$2 sections=${3:-sol}
shift 2; [ $# -gt 0 ] && shift
ncu=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
[ -x "$ncu" ] || { echo "ncu_prep.sh: no ncu at $ncu (set NCU=/path/to/ncu)" >&2; exit 3; }
case $sections in
    sol) set_args=(--section SpeedOfLight --section LaunchStats --section Occupancy) ;;
    full) set_args=(--set full) ;;
    *) echo "ncu_prep.sh: SECTIONS is sol or full, not '$sections'" >&2; exit 2 ;;
esac
mkdir -p "$out"
kernels='regex:^(dsa_(fused|page_table|lengths)|dspark_draft_block_(fused|page_table|lengths|swa))$'
for family in dspark_draft_block dsa_decode dsa_target_verify dsa_draft_extend_v2; do
    rep=$out/$family-$sections
    "$ncu" --kernel-name "$kernels" "${set_args[@]}" --graph-profiling node -f -o "$rep" \
        "$metaprep" check --families "$family" "$@" > "$rep.log" 2>&1
    "$ncu" --import "$rep.ncu-rep" --csv --page details > "$rep.csv"
    echo "$family: $(grep -c '"Duration"' "$rep.csv") kernels profiled → $rep.csv"
done
