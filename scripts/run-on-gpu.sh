#!/usr/bin/env bash
# Run from inside a bundle (scripts/bundle.sh) on a GPU host with no Rust toolchain.
#
#   ./run-on-gpu.sh [STAGE...]     stages: info check tests sweep bench calibrate steps timers nvtx ranks
#                                  (default: all but timers, nvtx and ranks)
#
# nvtx measures what the NVTX ranges cost: a one-cell sweep three ways, twice in turn, with
# `--nvtx off`, with the ranges on and no tool attached, and with the test double
# (libnvtx_recorder.so, counting calls) attached as a tool; it prints each run's harness
# `overhead_us` row (the empty graph through the arms' harness, one range a step, minus the
# bare empty graph).
#
# calibrate needs python3 with torch (CUDA): it measures PyTorch's host costs into
# out/calibration/host_profile.json (with torch_read_paths.py's pinned read cost, which
# eager-pinned needs), runs the PyTorch reference step loop, runs `steps` with
# that profile at forward 100/1000/5000 µs and once per grid cell with that cell's own in-loop
# op costs (calibration/cells/), and writes out/validation.md (model against loop);
# the steps stage then uses that profile instead of the built-in one.
#
# timers runs one steps grid (TIMERS_FLAGS, default tp1 x bs 1,8,64 x block 5 planned for
# 1000 GiB, which moe-large needs at tp1) with --timer events and --timer cupti, each with
# traces, reports both and writes out/timers/timers.md (scripts/compare_timers.py).
#
# ranks needs NCCL (libnccl.so.2: found in LD_LIBRARY_PATH, the python's nvidia/nccl/lib, or
# $METAPREP_NCCL): `metaprep collectives` (NCCL latency and bandwidth, α/β fit), then steps
# over tp1 (and tp2, dep2 on 2 GPUs or more) with --ranks real, --ranks emulated and (2 GPUs
# or more) emulated with the measured all-reduce α, β, on a small grid, traced, each reported,
# and compare each emulation → real. About 4-5 minutes on 2 H200s.
#
# Logs and result folders go to ${OUT:-./out}/. Extra flags for the sweep and steps stages
# come from SWEEP_FLAGS and STEPS_FLAGS.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(info check tests sweep bench calibrate steps)
profile=pytorch
status=0
run() { local name=$1; shift; echo "== $name: $*"; "$@" 2>&1 | tee "$out/$name.log"; local rc=${PIPESTATUS[0]}; echo "== $name exit $rc"; [ "$rc" -eq 0 ] || status=1; }
for stage in "${stages[@]}"; do
    case $stage in
        info) run info "$here/metaprep" info ;;
        check) run check "$here/metaprep" check ;;
        tests) export METAPREP_NVTX_RECORDER=$here/libnvtx_recorder.so
              for t in "$here"/tests/*; do run "tests-$(basename "$t")" "$t" --ignored --test-threads=1; done ;;
        # shellcheck disable=SC2086
        sweep) run sweep "$here/metaprep" sweep --out "$out/sweep" ${SWEEP_FLAGS:-} ;;
        bench) (cd "$here" && for b in benches/*; do run bench "$b" --bench; done) ;;
        calibrate)
            run calibrate python3 "$here/calibrate_torch.py" --out "$out/calibration"
            if [ -f "$out/calibration/host_profile.json" ]; then
                profile=$out/calibration/host_profile.json
                # PyTorch's pinned read beside .tolist(), so eager-pinned can run with it.
                run torch-read-paths python3 "$here/torch_read_paths.py" --profile "$profile" --out "$profile"
                for f in 100 1000 5000; do
                    run "validate-f$f" "$here/metaprep" steps --host-profile "$profile" --forward-us $f \
                        --tp tp1 --batch-sizes 1,8,64 --block-sizes 5 \
                        --arms eager-sync,eager-device,graph,graph-upload --out "$out/validate-f$f"
                done
                # Each grid cell again, with that cell's own in-loop op costs (see compare_reference.py).
                for cell in "$out"/calibration/cells/*.json; do
                    name=$(basename "$cell" .json); f=${name%-bs*}; f=${f#f}; bs=${name#*-bs}
                    run "validate-$name" "$here/metaprep" steps --host-profile "$cell" --forward-us "$f" \
                        --tp tp1 --batch-sizes "$bs" --block-sizes 5 \
                        --arms eager-sync,eager-device,graph,graph-upload --out "$out/validate-cells/$name"
                done
                python3 "$here/compare_reference.py" "$out" > "$out/validation.md" || status=1
            fi ;;
        # shellcheck disable=SC2086
        ranks)
            gpus=$("$here/metaprep" info 2>/dev/null | awk '/devices visible/ {print $3}')
            layouts=tp1; [ "${gpus:-1}" -ge 2 ] && layouts=tp1,tp2,dep2
            run collectives "$here/metaprep" collectives --out "$out/collectives"
            # The emulation re-based on the all-reduce's measured α and β (two GPUs or more).
            rebased=$(sed -n 's/^all-reduce fit: .*(steps: \(.*\))$/\1/p' "$out/collectives.log")
            modes="real emulated"; [ -n "$rebased" ] && modes="$modes rebased"
            for mode in $modes; do
                ranks=$mode; extra=${RANKS_FLAGS:-}
                [ "$mode" = rebased ] && ranks=emulated && extra="$extra $rebased"
                # shellcheck disable=SC2086
                run "ranks-$mode" "$here/metaprep" steps --ranks "$ranks" --tp "$layouts" \
                    --host-profile "$profile" --gpu-memory-gib 1000 --batch-sizes 1,8 --block-sizes 5 \
                    --arms eager-sync,graph --cell-time-cap-ms 6000 --out "$out/ranks-$mode" \
                    --trace "$out/ranks-$mode/trace.json" $extra
                run "ranks-$mode-report" "$here/metaprep" report "$out/ranks-$mode"
            done
            # compare exits 1 when something got slower: here that is a finding, not a failure.
            for mode in $modes; do
                [ "$mode" = real ] && continue
                run "ranks-compare-$mode" sh -c '"$0" compare "$1" "$2" --allow-mismatch > "$3"; [ $? -le 1 ]' \
                    "$here/metaprep" "$out/ranks-$mode" "$out/ranks-real" "$out/ranks-compare-$mode.md"
                cat "$out/ranks-compare-$mode.md"
            done ;;
        steps) run steps "$here/metaprep" steps --host-profile "$profile" --out "$out/steps" --trace "$out/steps/trace.json" ${STEPS_FLAGS:-} ;;
        timers)
            grid=${TIMERS_FLAGS:---tp tp1 --batch-sizes 1,8,64 --block-sizes 5 --gpu-memory-gib 1000}
            for timer in events cupti; do
                # shellcheck disable=SC2086
                run "timers-$timer" "$here/metaprep" steps --host-profile "$profile" $grid --timer $timer \
                    --out "$out/timers/$timer" --trace "$out/timers/$timer/trace.json"
                run "timers-$timer-report" "$here/metaprep" report "$out/timers/$timer"
            done
            python3 "$here/compare_timers.py" "$out/timers/events" "$out/timers/cupti" --out "$out/timers/timers.md" \
                && cat "$out/timers/timers.md" || status=1 ;;
        nvtx)
            cell=(--families dsa_decode --arms graph --batch-sizes 1 --block-sizes 5 --forward-us 0)
            for pass in 1 2; do
                run "nvtx-off-$pass" "$here/metaprep" sweep "${cell[@]}" --nvtx off --out "$out/nvtx/off-$pass"
                run "nvtx-on-$pass" "$here/metaprep" sweep "${cell[@]}" --out "$out/nvtx/on-$pass"
                NVTX_INJECTION64_PATH=$here/libnvtx_recorder.so \
                    run "nvtx-tool-$pass" "$here/metaprep" sweep "${cell[@]}" --out "$out/nvtx/tool-$pass"
            done
            echo "== harness overhead_us (median, ci_lo, ci_hi) per run"
            for csv in "$out"/nvtx/*/metaprep.csv; do
                printf '%s: ' "$(basename "$(dirname "$csv")")"
                awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
                    $col["arm"] == "harness" && $col["metric"] == "overhead_us" {
                        print $col["median"], $col["ci_lo"], $col["ci_hi"] }' "$csv"
            done | tee "$out/nvtx/overhead.txt" ;;
        *) echo "unknown stage $stage: use info check tests sweep bench calibrate steps timers nvtx ranks"; exit 2 ;;
    esac
done
exit $status
