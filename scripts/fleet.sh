#!/bin/sh
# make fleet: a fleet on this one machine to try by hand — a 3-member etcd
# on free loopback ports and three tendd (n1, n2, n3), each with its own
# state dir, API socket, pod port range and node name. As root each tendd
# runs in its own PID namespace, so `kill -9` of its "machine" takes its
# pods with it, as a host dying would. Ctrl-C stops everything.
#
#   scripts/fleet.sh [BUILD_DIR]           interactive (make fleet)
#   scripts/fleet.sh --check [BUILD_DIR]   start, check every node is Ready,
#                                          stop (the test suite runs this)
set -u
check=0
[ "${1:-}" = --check ] && { check=1; shift; }
build=$(cd "${1:-build}" && pwd) || exit 1
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/fleet/etcd.sh"

dir=$(mktemp -d /tmp/tend-fleet-XXXXXX) || exit 1
machines=
stop() {
    # tendd first (inside its machine, if it has one): it stops cleanly
    # and leaves its pods; then the machines, which takes the pods.
    for m in $machines; do
        kill -TERM "$m" $(pgrep -P "$m") 2>/dev/null
    done
    sleep 0.5
    # shellcheck disable=SC2086 # a list of pids
    [ -n "$machines" ] && kill -KILL $machines 2>/dev/null
    etcd_cluster_stop
    wait 2>/dev/null
    "$root/scripts/remove-cgroups.sh" "$dir"/*.log
    rm -rf "$dir"
}
trap stop EXIT
trap 'exit 130' INT TERM

rc=0
etcd_cluster_start "$dir" || rc=$?
[ "$rc" = 0 ] || exit "$rc"

# A machine of its own where we can have one (root, util-linux's unshare).
isolate=
if [ "$(id -u)" = 0 ] && unshare --pid --fork --kill-child --mount-proc true 2>/dev/null; then
    isolate="unshare --pid --fork --kill-child --mount-proc"
fi
for n in 1 2 3; do
    # shellcheck disable=SC2086 # $isolate: a command and its options, or nothing
    $isolate "$build/bin/tendd" --state-dir "$dir/n$n" --socket "$dir/n$n.sock" \
        --port-range "4${n}000-4${n}999" --fleet "$ETCD_ENDPOINTS" --node-name "n$n" \
        --node-labels "zone=z$n" --lease-ttl 3s >"$dir/n$n.log" 2>&1 &
    machines="$machines $!"
    eval "machine_$n=$!"
done
for _ in $(seq 100); do
    ready=$(TEND_SOCKET="$dir/n1.sock" "$build/bin/tend" get nodes 2>/dev/null |
        awk 'NR > 1 && $2 == "Ready"' | wc -l)
    [ "$ready" = 3 ] && break
    sleep 0.1
done
if [ "$ready" != 3 ]; then
    echo "the fleet did not come up:"; tail -5 "$dir"/n*.log
    exit 1
fi
if [ "$check" = 1 ]; then
    echo "ok: 3 etcd members and 3 tendd, every node Ready"
    exit 0
fi
# shellcheck disable=SC2154 # set by the loop above
cat <<MSG
A fleet of three nodes on this machine (in $dir):

  etcd      $ETCD_ENDPOINTS
  node n1   socket $dir/n1.sock, log $dir/n1.log, machine pid $machine_1
  node n2   socket $dir/n2.sock, log $dir/n2.log, machine pid $machine_2
  node n3   socket $dir/n3.sock, log $dir/n3.log, machine pid $machine_3

In another terminal:

  export PATH=$build/bin:\$PATH TEND_SOCKET=$dir/n1.sock
  tend get nodes
  tend cordon n2; tend get nodes
  kill -9 $machine_3        # n3's machine dies: NotReady once its 3 s lease runs out

So far the nodes share their membership (names, labels, Ready, cordon);
each node still runs only the deployments applied to it.
Ctrl-C stops the fleet and removes it.
MSG
while :; do sleep 3600; done
