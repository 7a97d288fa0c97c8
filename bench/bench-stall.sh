#!/bin/sh
# How long one hostile request holds tendd's loop, at the manifest limits
# (lists of 10000, SPEC_MAX_ITEMS): tests/cli/stall.py against a tendd of
# its own, each case's longest gap between two /healthz answers on the
# local socket while it runs. Figures, not a pass/fail: the issue 27 budget
# is 50 ms. bench-stall.sh BIN_DIR [--items N]
set -u
bin=$1
shift
tmp=$(mktemp -d /tmp/tend-bench-stall-XXXXXX) || exit 1
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$tmp"' EXIT
"$bin/tendd" --state-dir "$tmp/state" --socket "$tmp/tend.sock" >"$tmp/tendd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do [ -S "$tmp/tend.sock" ] && break; sleep 0.05; done
/usr/bin/python3 "$(dirname "$0")/../tests/cli/stall.py" "$tmp/tend.sock" /bin/true --budget 0 "$@" |
    sed 's/^ok: /  /'
