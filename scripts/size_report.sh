#!/usr/bin/env bash
# The size bar: no file in src/ over 600 lines and no function over 100 (a function runs
# from its `fn` line to its closing brace; test functions count too). Lists every file and
# function past the bar and exits 1 if there is any.
#
# A function's end is found the way rustfmt lays code out: the first later line holding only
# `}` at the `fn` line's own indentation. A signature that ends in `;` before any `{` (a trait
# method without a body) is no function here. Run from anywhere; reads src/ beside this script.
set -euo pipefail
cd "$(dirname "$0")/.."

max_file_lines=600
max_fn_lines=100
failed=0
report() { # kind, what
    echo "over the bar: $1 $2"
    failed=1
}

while IFS= read -r file; do
    lines=$(wc -l <"$file")
    if ((lines > max_file_lines)); then
        report file "$file: $lines lines (bar $max_file_lines)"
    fi
    while IFS= read -r row; do
        report fn "$row"
    done < <(awk -v max="$max_fn_lines" -v file="$file" '
        function indent_of(s) { match(s, /^[ \t]*/); return RLENGTH }
        {
            line = $0
            if (depth > 0 && !in_body) {
                # Still in a multi-line signature: its body opens with a line ending in `{`,
                # a `;` first means a declaration without a body.
                if (line ~ /\{[ \t]*$/) in_body = 1
                else if (line ~ /;[ \t]*$/) depth = 0
            }
            if (depth > 0 && in_body && NR > start && indent_of(line) == fn_indent && line ~ /^[ \t]*\}[ \t]*$/) {
                len = NR - start + 1
                if (len > max) printf "%s:%d fn %s: %d lines (bar %d)\n", file, start, name, len, max
                depth = 0
            }
            if (depth == 0 && line ~ /^[ \t]*((pub(\([^)]*\))?|const|async|unsafe|extern( "[^"]*")?|default)[ \t]+)*fn[ \t]+[A-Za-z_][A-Za-z0-9_]*/) {
                name = line
                sub(/^.*fn[ \t]+/, "", name)
                sub(/[^A-Za-z0-9_].*$/, "", name)
                start = NR
                fn_indent = indent_of(line)
                depth = 1
                in_body = 0
                if (line ~ /\{[ \t]*\}?[ \t]*$/ || line ~ /\{.*\}[ \t]*$/) {
                    # A body on the signature line: a one-line function, or one opening here.
                    if (line ~ /\}[ \t]*$/) depth = 0
                    else in_body = 1
                } else if (line ~ /;[ \t]*$/) depth = 0
            }
        }' "$file")
done < <(find src -name '*.rs' | sort)

if ((failed)); then
    echo "size bar: files or functions over it (see above)" >&2
    exit 1
fi
echo "size bar: held"
