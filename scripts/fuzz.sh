#!/bin/sh
# make fuzz: runs every libFuzzer target of <build>/fuzz/ (or those named)
# for SECONDS each, one after the other, then says what each did and found.
#   scripts/fuzz.sh BUILD [SECONDS [TARGET...]]
#   FUZZ_FLAGS='-fork=2 -ignore_crashes=1'   more libFuzzer flags: here, two
#                                           processes that go on after a finding
#
# The committed corpus (tests/fuzz/corpus/NAME/) and crashes
# (tests/fuzz/crashes/NAME/) are seeds only: libFuzzer writes what it finds
# to the first directory it is given, BUILD/fuzz-work/NAME/corpus/, kept
# from run to run so that a run starts where the last one stopped. Crash
# artifacts go to BUILD/fuzz-work/NAME/artifacts/, emptied before each run.
# Exits 1 if a target found something.
set -u
build=${1:-build/fuzz}
seconds=${2:-60}
[ $# -gt 2 ] && shift 2 || set --
cd "$(dirname "$0")/.." || exit 1

if [ $# -eq 0 ]; then
    for exe in "$build"/fuzz/fuzz-*; do
        [ -x "$exe" ] && set -- "$@" "$(basename "$exe")"
    done
fi
[ $# -gt 0 ] || { echo "fuzz: no fuzz targets in $build/fuzz/ (configure with -DTEND_FUZZ=ON)" >&2; exit 1; }

summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
found=0
for name in "$@"; do
    exe=$build/fuzz/$name
    work=$build/fuzz-work/$name
    [ -x "$exe" ] || { echo "fuzz: no $exe" >&2; exit 1; }
    mkdir -p "$work/corpus"
    rm -rf "$work/artifacts"
    mkdir -p "$work/artifacts"
    seeds=
    for d in tests/fuzz/corpus/$name tests/fuzz/crashes/$name; do
        [ -d "$d" ] && seeds="$seeds $d"
    done
    dict=
    [ -f "tests/fuzz/$name.dict" ] && dict=-dict=tests/fuzz/$name.dict

    echo "== $name: $seconds s (log: $work/log)"
    start=$(date +%s)
    # shellcheck disable=SC2086
    "$exe" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$work/artifacts/" $dict ${FUZZ_FLAGS:-} "$work/corpus" $seeds \
        >"$work/log" 2>&1
    rc=$?
    took=$(($(date +%s) - start))

    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n 1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -n 1)
    cov=$(grep -a -o 'cov: [0-9]*' "$work/log" | tail -n 1 | cut -d' ' -f2)
    ft=$(grep -a -o 'ft: [0-9]*' "$work/log" | tail -n 1 | cut -d' ' -f2)
    corp=$(grep -a -o 'corp: [0-9]*' "$work/log" | tail -n 1 | cut -d' ' -f2)
    artifacts=$(find "$work/artifacts" -type f | sort)
    if [ $rc -eq 0 ] && [ -z "$artifacts" ]; then
        result=nothing
    else
        result="FOUND after ${took} s"
        found=1
    fi
    printf '%-16s %10s runs %7s/s  cov %-5s ft %-6s corpus %-5s %s\n' "$name" "${runs:-?}" \
        "${speed:-?}" "${cov:-?}" "${ft:-?}" "${corp:-?}" "$result" >>"$summary"
    [ "$result" = nothing ] && continue
    what=$(grep -a -m 1 -E 'property failed|^SUMMARY: |ERROR: libFuzzer|==ERROR' "$work/log" | cut -c 1-300)
    {
        echo "  ${what:-exit status $rc, see $work/log}"
        for a in $artifacts; do
            echo "  reproducer: $a"
            echo "    replay it:      $exe $a"
        done
        echo "  keep it as a regression, once it is fixed (make test replays the directory):"
        echo "    cp ${artifacts%%[[:space:]]*} tests/fuzz/crashes/$name/<what-it-is>"
    } >>"$summary"
done

echo
echo "== fuzz: $seconds s per target (FUZZ_TIME=N for longer)"
cat "$summary"
exit $found
