#!/usr/bin/env bash
# Build the CLI, the test executables and the bench executables in release mode and gather
# them into one folder, so a GPU host with a CUDA driver but no Rust toolchain can run them.
#
#   scripts/bundle.sh [DIR]          (default: bundle/)
#   scp -r bundle gpu-host: && ssh gpu-host 'cd bundle && ./run-on-gpu.sh'
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bundle}
rm -rf "$out" && mkdir -p "$out/tests" "$out/benches"

cargo build --release --bins
cp target/release/metaprep "$out/"

executables() { grep -o '"executable":"[^"]*"' | cut -d'"' -f4; }
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
cp scripts/run-on-gpu.sh scripts/calibrate_torch.py scripts/compare_reference.py \
    scripts/crosscheck_sglang.py "$out/"
echo "bundle in $out/:"
ls -l "$out" "$out/tests" "$out/benches"
