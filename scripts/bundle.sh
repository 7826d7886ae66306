#!/usr/bin/env bash
# Build the CLI, the test executables and the bench executables in release mode and gather
# them into one folder, so a GPU host with a CUDA driver but no Rust toolchain can run them.
#
#   scripts/bundle.sh [DIR]          (default: bundle/)
#   scp -r bundle gpu-host: && ssh gpu-host 'cd bundle && ./run-on-gpu.sh'
#
# The bundle runs only on hosts of the architecture it was built on (`uname -m` here). For a
# GB300 (Grace, aarch64) host, build on an aarch64 machine, e.g. the Grace host itself, which
# needs no CUDA to build (libcuda, NVRTC and NVML are loaded at run time):
#   curl --proto '=https' -sSf https://sh.rustup.rs | sh -s -- -y   # Rust (rust-version 1.88+)
#   sudo apt-get install -y build-essential   # cc: build scripts (nvtx, criterion's alloca)
#                                             # compile C
#   scripts/bundle.sh && cd bundle && ./run-on-gpu.sh
# Point LD_LIBRARY_PATH at an NVRTC for aarch64 that knows sm_103 (12.9 or newer: the CUDA
# toolkit's lib64, or `pip install nvidia-cuda-nvrtc-cu12==12.9.*` / `nvidia-cuda-nvrtc`
# 13.x and its nvidia/cuda_nvrtc/lib). `cargo check --target aarch64-unknown-linux-gnu
# --all-targets` (.ci/run) checks the crate for Grace from an x86-64 machine, but does not
# link: a cross-built bundle would need an aarch64 linker and C compiler, so build on aarch64.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bundle}
rm -rf "$out" && mkdir -p "$out/tests" "$out/benches"

# Executables by the paths cargo reports, so CARGO_TARGET_DIR (or a configured target-dir)
# is honoured.
executables() { grep -o '"executable":"[^"]*"' | cut -d'"' -f4; }
cli=$(cargo build --release --bins --message-format=json | executables | grep '/metaprep$')
cp "$cli" "$out/"
cargo test --release --no-run --message-format=json 2>/dev/null | executables | while read -r exe; do
    cp "$exe" "$out/tests/"
done
cargo bench --no-run --message-format=json 2>/dev/null | grep -F '"kind":["bench"]' | executables | while read -r exe; do
    cp "$exe" "$out/benches/"
done
# Only the executables travel: strip their debug info (the bundle must stay small enough to
# copy around), and drop the test build of the CLI binary itself, which holds no tests.
rm -f "$out"/tests/metaprep
strip --strip-debug "$out"/metaprep "$out"/tests/* "$out"/benches/* 2>/dev/null || true
# The NVTX test double (a tool NVTX loads through NVTX_INJECTION64_PATH), for tests/nvtx-*
# and the nvtx stage: GPU hosts may have no C compiler.
cc -shared -fPIC -O2 -o "$out/libnvtx_recorder.so" tests/fixtures/nvtx_recorder.c
cp scripts/run-on-gpu.sh scripts/calibrate_torch.py scripts/metaprep_host.py scripts/reference_loop.py scripts/compare_timers.py \
    scripts/crosscheck_sglang.py scripts/count_sglang_ops.py scripts/sglang_standins.py "$out/"
# scripts/torch_read_paths.py adds PyTorch's pinned read cost to a profile: it needs one to start from.
cp scripts/torch_read_paths.py scripts/ab_battery.py scripts/gaps_check.py "$out/"
mkdir -p "$out/host-profiles" && cp host-profiles/*.json "$out/host-profiles/"
echo "bundle in $out/:"
ls -l "$out" "$out/tests" "$out/benches"
