#!/usr/bin/env bash
# Run from inside a bundle (scripts/bundle.sh) on a GPU host with no Rust toolchain.
#
#   ./run-on-gpu.sh [STAGE...]     stages: info check tests sweep bench steps (default: all)
#
# Logs and result folders go to ${OUT:-./out}/. Extra flags for the sweep and steps stages
# come from SWEEP_FLAGS and STEPS_FLAGS.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(info check tests sweep bench steps)
status=0
run() { local name=$1; shift; echo "== $name: $*"; "$@" 2>&1 | tee "$out/$name.log"; local rc=${PIPESTATUS[0]}; echo "== $name exit $rc"; [ "$rc" -eq 0 ] || status=1; }
for stage in "${stages[@]}"; do
    case $stage in
        info) run info "$here/metaprep" info ;;
        check) run check "$here/metaprep" check ;;
        tests) for t in "$here"/tests/*; do run "tests-$(basename "$t")" "$t" --ignored --test-threads=1; done ;;
        # shellcheck disable=SC2086
        sweep) run sweep "$here/metaprep" sweep --out "$out/sweep" ${SWEEP_FLAGS:-} ;;
        bench) (cd "$here" && for b in benches/*; do run bench "$b" --bench; done) ;;
        # shellcheck disable=SC2086
        steps) run steps "$here/metaprep" steps --out "$out/steps" --trace "$out/steps/trace.json" ${STEPS_FLAGS:-} ;;
        *) echo "unknown stage $stage: use info check tests sweep bench steps"; exit 2 ;;
    esac
done
exit $status
