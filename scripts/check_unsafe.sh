#!/usr/bin/env bash
# `cudarc` and `unsafe` belong in src/gpu/ alone (ARCHITECTURE.md): every other layer uses the
# safe wrappers there. Fails naming each line of code elsewhere in src/ that holds either word;
# comment lines are not code, and benches/ and tests/ are outside the rule. (The compiler
# enforces `unsafe` too: src/lib.rs denies `unsafe_code` outside `gpu`.)
set -euo pipefail
cd "$(dirname "$0")/.."

found=$(grep -rnwE 'cudarc|unsafe' src --include='*.rs' \
    | grep -v '^src/gpu/' \
    | grep -vE '^[^:]+:[0-9]+:[[:space:]]*//' || true)
if [ -n "$found" ]; then
    echo "cudarc or unsafe outside src/gpu/ (put the FFI behind a safe wrapper in src/gpu/):"
    echo "$found"
    exit 1
fi
echo "check_unsafe: cudarc and unsafe only under src/gpu/"
