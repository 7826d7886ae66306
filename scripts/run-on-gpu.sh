#!/usr/bin/env bash
# Run from inside a bundle (scripts/bundle.sh) on a GPU host: device info, the correctness
# check, the GPU tests, then the default sweep. Logs and results go to ${OUT:-out}/.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-$here/out}
mkdir -p "$out"
status=0
"$here/metaprep" info 2>&1 | tee "$out/info.txt" || status=1
"$here/metaprep" check 2>&1 | tee "$out/check.txt" || status=1
for t in "$here"/tests/*; do
    "$t" --ignored --test-threads=1 2>&1 | tee -a "$out/gpu-tests.txt" || status=1
done
exit $status
