#!/bin/sh
# How long one hostile request holds tendd's loop, at the manifest limits
# (lists of 10000, SPEC_MAX_ITEMS): tests/cli/stall.py against a tendd of
# its own, each case's longest gap between two /healthz answers on the
# local socket while it runs. Then, where etcd is installed, in a fleet of
# two tendd on a 3-member etcd: the requests to one node, the gaps of the
# node written to and of the other one, which has each object from etcd.
# Figures, not a pass/fail: the issue 27 budget is 50 ms.
#   bench-stall.sh BIN_DIR [--items N]
set -u
bin=$(cd "$1" && pwd) || exit 1
shift
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/fleet/etcd.sh"
tmp=$(mktemp -d /tmp/tend-bench-stall-XXXXXX) || exit 1
pids=
trap 'for p in $pids; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; etcd_cluster_stop; rm -rf "$tmp"' EXIT

# tendd NAME [ARGS...]: a tendd with its state and socket under $tmp/NAME,
# once it answers
tendd() {
    name=$1
    shift
    "$bin/tendd" --state-dir "$tmp/$name" --socket "$tmp/$name.sock" "$@" >"$tmp/$name.log" 2>&1 &
    pids="$pids $!"
    for _ in $(seq 300); do
        curl -sf --unix-socket "$tmp/$name.sock" http://localhost/healthz >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    echo "tendd $name did not come up:"; tail -n 5 "$tmp/$name.log"; exit 1
}
# stall SOCKET [ARGS...]: the cases, their figures
stall() {
    s=$1
    shift
    /usr/bin/python3 "$root/tests/cli/stall.py" "$s" /bin/true --budget 0 "$@" |
        sed 's/^[a-zA-Z]*: /  /'
}

mkdir -p "$tmp/manifests"
tendd one --manifests "$tmp/manifests"
stall "$tmp/one.sock" --manifests "$tmp/manifests" "$@"

rc=0
mkdir -p "$tmp/etcd" && etcd_cluster_start "$tmp/etcd" >/dev/null 2>&1 || rc=$?
if [ "$rc" != 0 ]; then
    echo "  (fleet: skipped, no etcd: make deps)"
    exit 0
fi
tendd n1 --fleet "$ETCD_ENDPOINTS" --node-name n1 --port-range 41000-41999
tendd n2 --fleet "$ETCD_ENDPOINTS" --node-name n2 --port-range 42000-42999
echo "  in a fleet: the requests to n1; n1's loop, and n2's (its objects from etcd):"
stall "$tmp/n1.sock" --sample "$tmp/n1.sock" --sample "$tmp/n2.sock" "$@"
