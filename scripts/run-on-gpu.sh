#!/usr/bin/env bash
# Run from inside a bundle (scripts/bundle.sh) on a GPU host with no Rust toolchain.
#
#   ./run-on-gpu.sh [STAGE...]     stages: info check tests sweep bench calibrate steps timers nvtx ranks
#                                  soak eagle ab ab-steps gaps (default: all but timers, nvtx, ranks, soak, eagle,
#                                  ab, ab-steps, gaps)
#
# soak runs `check --soak 1000000` of graph and eager-sync for every family at bs 8 block 5
# (about 3 minutes on an H200). eagle runs `steps --drafter eagle` on the default grid, then
# both drafters on tp1 and tp8 at bs 1, 8 and block 3, 5 planned for 1000 GiB a GPU (the
# drafters side by side), each reported.
#
# nvtx measures what the NVTX ranges cost: a one-cell sweep three ways, twice in turn, with
# `--nvtx off`, with the ranges on and no tool attached, and with the test double
# (libnvtx_recorder.so, counting calls) attached as a tool; it prints each run's harness
# `overhead_us` row (the empty graph through the arms' harness, one range a step, minus the
# bare empty graph).
#
# calibrate needs python3 with torch (CUDA): it runs both reference loops
# (calibrate_torch.py, reference_loop.py), calibrates a profile from each one's traces as the
# README's recipe says, and validates it against that loop's untraced grid (validate/ in
# out/calibrate_torch/ and out/reference_loop/); calibrate_torch.py's directly measured
# host_profile.json (with torch_read_paths.py's pinned read cost, which eager-pinned needs) is
# what the steps stage then uses instead of the built-in one. Each loop's grid times every
# step with metaprep_host.StepSampler (a host-speed probe every 12 steps, the verify forward
# timed on the device, the SM clock read through NVML), and validate predicts each chunk of
# steps at its own host speed: 1-3 steps runs per cell (the profile's own speed, and the
# cell's slowest and fastest chunk speed where they differ by more than 3%).
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
            # Both reference loops, each calibrated from its own traces exactly as the README's
            # recipe says (one trace per arm at bs 1, forward 1000 us, each in a fresh process
            # with its probe file; graph-arm traces at bs 8 and 64 for the preps' GPU time),
            # then validated against its own untraced grid in this same call.
            for loop in calibrate_torch reference_loop; do
                dir=$out/$loop
                case $loop in
                    calibrate_torch) flags="--forward-us 100,1000,3000"; shape="" ;;
                    reference_loop) flags=""; shape="--seq-lens 1500-6000 --max-context 16384" ;;
                esac
                # shellcheck disable=SC2086
                run "$loop" python3 "$here/$loop.py" --out "$dir" $flags
                [ -f "$dir/reference.csv" ] || { status=1; continue; }
                traces=(); for arm in eager-sync eager-device graph graph-upload; do traces+=("$dir/trace-$arm.json"); done
                run "$loop-calibrate" "$here/metaprep" calibrate "${traces[@]}" \
                    --gpu-trace "8:$dir/trace-graph-bs8.json" --gpu-trace "64:$dir/trace-graph-bs64.json" \
                    --out "$dir/profile.json"
                # shellcheck disable=SC2086
                run "$loop-validate" "$here/metaprep" validate "$dir/reference.csv" \
                    --host-profile "$dir/profile.json" --out "$dir/validate" $shape ${VALIDATE_FLAGS:-}
            done
            if [ -f "$out/calibrate_torch/host_profile.json" ]; then
                profile=$out/calibrate_torch/host_profile.json
                # PyTorch's pinned read beside .tolist(), so eager-pinned can run with it.
                run torch-read-paths python3 "$here/torch_read_paths.py" --profile "$profile" --out "$profile"
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
        # The ab gate held to this host: A/A, a planted +20% host slowdown and 1 us more
        # forward, interleaved, AB_RUNS of each (20), new runs stopping after AB_BUDGET_S.
        # The battery keeps the runs an OUT/ab/battery.csv already holds (another sitting's).
        ab) run ab python3 "$here/ab_battery.py" "$here/metaprep" "$out/ab" --runs "${AB_RUNS:-20}" --budget-s "${AB_BUDGET_S:-1500}" ;;
        # An A/A over the steps grid: exit 0, no row called, few pairs redone.
        ab-steps) run ab-steps "$here/metaprep" ab --steps --out "$out/ab-steps" ;;
        # gaps held to reference_loop.py: its eager-sync arm traced plainly, against its
        # untraced eager-sync and eager-device steps (needs python3 with torch on CUDA).
        gaps) run gaps python3 "$here/gaps_check.py" "$here/metaprep" "$out/gaps" ;;
        soak) run soak "$here/metaprep" check --soak 1000000 --arms graph,eager-sync --batch-sizes 8 --block-sizes 5 ;;
        eagle)
            run eagle "$here/metaprep" steps --drafter eagle --host-profile "$profile" --out "$out/eagle" --trace "$out/eagle/trace.json"
            run eagle-report "$here/metaprep" report "$out/eagle"
            for drafter in eagle dspark; do
                run "drafters-$drafter" "$here/metaprep" steps --drafter "$drafter" --host-profile "$profile" \
                    --gpu-memory-gib 1000 --tp tp1,tp8 --batch-sizes 1,8 --block-sizes 3,5 --out "$out/drafters-$drafter"
                run "drafters-$drafter-report" "$here/metaprep" report "$out/drafters-$drafter"
            done ;;
        *) echo "unknown stage $stage: use info check tests sweep bench calibrate steps timers nvtx ranks soak eagle ab ab-steps gaps"; exit 2 ;;
    esac
done
exit $status
