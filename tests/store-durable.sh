#!/bin/sh
# A durable commit (an acknowledged write) reaches the disk: every one of
# them fsyncs the WAL. Counted with strace.
command -v strace >/dev/null 2>&1 || { echo "strace not installed: skipped"; exit 77; }
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
prog="$TEND_BIN_DIR/../tests/tend-store-sync"
ASAN_OPTIONS=detect_leaks=0 strace -f -qq -e trace=fdatasync,fsync -o "$dir/trace" "$prog" "$dir/tend.db" 5 || {
    echo "FAIL: tend-store-sync failed"; exit 1; }
n=$(grep -c -E '^[0-9]+ +f(data)?sync\(' "$dir/trace")
echo "5 durable commits: $n fsync calls"
[ "$n" -ge 5 ] || { echo "FAIL: acknowledged writes were not synced"; cat "$dir/trace"; exit 1; }
