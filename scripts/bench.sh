#!/bin/sh
# make bench: run every benchmark program under <build>/bench and print its
# table. Benchmarks print figures (median, p95); they are not pass/fail tests.
set -eu
build=${1:-build}
found=0
for b in "$build"/bench/*; do
    [ -x "$b" ] && [ -f "$b" ] || continue
    found=1
    echo "== $(basename "$b")"
    "$b"
done
[ "$found" -eq 1 ] || echo "no benchmarks built yet (the first arrives with the runtime, issue #3)"
