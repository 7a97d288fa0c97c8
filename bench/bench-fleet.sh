#!/bin/sh
# bench-fleet: fleet membership on a real 3-member etcd and three tendd on
# this machine (fleet.md §5), each tendd in its own PID namespace where we
# are root. Figures, from outside, as a user sees them through the API of
# a surviving node (polled every 20 ms: the figures include up to one poll):
#
#   node loss      kill -9 of a node's machine → NotReady on the others
#   leader loss    kill -9 of the leader's machine → a new leader
#   join           tendd started → Ready on the other nodes
#   cordon         the PATCH of a cordon, answered once etcd has it (one txn)
#   idle           etcd revisions and requests per node per second, nothing
#                  happening (the keepalives: they create no revision)
#
#   bench-fleet.sh BIN_DIR [--quick]
set -u
bin=$(cd "$1" && pwd) || exit 1
quick=0
[ "${2:-}" = --quick ] && quick=1
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/tests/fleet/etcd.sh"

ttl=3
trials=$([ "$quick" = 1 ] && echo 3 || echo 10)
idle=$([ "$quick" = 1 ] && echo 10 || echo 30)
dir=$(mktemp -d /tmp/tend-bench-fleet-XXXXXX) || exit 1
isolate=
if [ "$(id -u)" = 0 ] && unshare --pid --fork --kill-child --mount-proc true 2>/dev/null; then
    isolate="unshare --pid --fork --kill-child --mount-proc"
fi

cleanup() {
    for n in 1 2 3; do
        eval "m=\${machine_$n:-}"
        [ -n "$m" ] && kill -KILL "$m" 2>/dev/null
    done
    etcd_cluster_stop
    wait 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

rc=0
etcd_cluster_start "$dir" >/dev/null || rc=$?
[ "$rc" = 0 ] || { echo "skipped: no etcd (make deps)"; exit 0; }

now_ms() { echo $(($(date +%s%N) / 1000000)); }
node_json() { curl -s -m 1 --unix-socket "$dir/n$1.sock" "http://localhost/api/v1/nodes$2"; }
# status OBSERVER NODE: True, Unknown, or nothing
ready_of() {
    node_json "$1" "/n$2" | jq -r '.status.conditions[0].status // empty' 2>/dev/null
}
leader_seen_by() {
    node_json "$1" "" | jq -r '.items[] | select(.metadata.labels["node-role.kubernetes.io/leader"] != null) | .metadata.name' 2>/dev/null
}
# start N: its machine; returns once the API answers
start() {
    # shellcheck disable=SC2086 # $isolate: a command and its options, or nothing
    $isolate "$bin/tendd" --state-dir "$dir/n$1" --socket "$dir/n$1.sock" \
        --port-range "4${1}000-4${1}999" --fleet "$ETCD_ENDPOINTS" --node-name "n$1" \
        --lease-ttl "${ttl}s" >>"$dir/n$1.log" 2>&1 &
    eval "machine_$1=$!"
    for _ in $(seq 200); do
        curl -s -m 1 --unix-socket "$dir/n$1.sock" http://localhost/healthz >/dev/null 2>&1 &&
            return 0
        sleep 0.02
    done
    echo "tendd n$1 did not start:"; tail -3 "$dir/n$1.log"; exit 1
}
kill_machine() {
    eval "m=\$machine_$1"
    kill -KILL "$m" 2>/dev/null
    wait "$m" 2>/dev/null
    eval "machine_$1="
}
# until COMMAND succeeds, polling every 20 ms, for at most S seconds
poll() {
    s=$1
    shift
    end=$(($(now_ms) + s * 1000))
    while [ "$(now_ms)" -lt "$end" ]; do
        "$@" && return 0
        sleep 0.02
    done
    return 1
}
# stats: min / median / p95 of the numbers on stdin
stats() {
    sort -n | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "no data"; exit }
        p = int(NR * 0.95 + 0.999); if (p > NR) p = NR
        printf "min %d  median %d  p95 %d  (n=%d)\n", v[1], v[int((NR + 1) / 2)], v[p], NR }'
}

for n in 1 2 3; do start "$n"; done
all_ready() { [ "$(node_json 1 "" | jq '[.items[] | select(.status.conditions[0].status == "True")] | length')" = 3 ]; }
poll 10 all_ready || { echo "the fleet did not come up"; exit 1; }
echo "3 etcd members, 3 tendd, lease TTL ${ttl}s, ${isolate:+each tendd in its own PID namespace, }$trials trials"
echo

# node loss, and join: n3 dies and comes back, observed from n1
: >"$dir/loss"
: >"$dir/join"
for _ in $(seq "$trials"); do
    t0=$(now_ms)
    kill_machine 3
    gone() { [ "$(ready_of 1 3)" = Unknown ]; }
    poll $((ttl + 5)) gone && echo $(($(now_ms) - t0)) >>"$dir/loss"
    t0=$(now_ms)
    start 3
    back() { [ "$(ready_of 1 3)" = True ]; }
    poll 10 back && echo $(($(now_ms) - t0)) >>"$dir/join"
done
printf "%-44s %s\n" "node loss: kill -9 → NotReady elsewhere (ms)" "$(stats <"$dir/loss")"
printf "%-44s %s\n" "join: tendd started → Ready elsewhere (ms)" "$(stats <"$dir/join")"

# leader loss: the leader's machine dies; a survivor reports the new one
: >"$dir/failover"
for _ in $(seq "$trials"); do
    lead=$(leader_seen_by 1)
    [ -n "$lead" ] || { sleep 1; continue; }
    l=${lead#n}
    obs=$((l % 3 + 1))
    t0=$(now_ms)
    kill_machine "$l"
    moved() { x=$(leader_seen_by "$obs"); [ -n "$x" ] && [ "$x" != "$lead" ]; }
    poll $((ttl + 5)) moved && echo $(($(now_ms) - t0)) >>"$dir/failover"
    start "$l"
    poll 10 all_ready
done
printf "%-44s %s\n" "leader loss: kill -9 → new leader (ms)" "$(stats <"$dir/failover")"

# cordon: the PATCH kubectl and tend send, answered once etcd has the
# write, timed by curl (the request alone: a process start here costs ~20 ms)
: >"$dir/cordon"
for i in $(seq $((trials * 3))); do
    v=$([ $((i % 2)) = 1 ] && echo true || echo null)
    curl -s -o /dev/null -w '%{time_total}\n' --unix-socket "$dir/n1.sock" -X PATCH \
        -H 'Content-Type: application/strategic-merge-patch+json' \
        -d "{\"spec\":{\"unschedulable\":$v}}" http://localhost/api/v1/nodes/n2 |
        awk '{ printf "%d\n", $1 * 1000000 }' >>"$dir/cordon"
done
printf "%-44s %s\n" "cordon: PATCH answered, etcd has it (us)" "$(stats <"$dir/cordon")"

# idle: nothing happens for a while; what does etcd see?
rev() {
    curl -s -X POST "http://127.0.0.1:$etcd_base/v3/kv/range" -d '{"key":"eA=="}' |
        jq -r '.header.revision'
}
reqs() {
    total=0
    for i in 0 1 2; do
        v=$(curl -s "http://127.0.0.1:$((etcd_base + i))/metrics" |
            awk '/^grpc_server_msg_received_total/ { s += $2 } END { print s + 0 }')
        total=$((total + v))
    done
    echo "$total"
}
r0=$(rev)
q0=$(reqs)
sleep "$idle"
r1=$(rev)
q1=$(reqs)
# the two reads of the revision are requests too: 2 range calls
echo "idle for ${idle}s: $((r1 - r0)) etcd revisions (writes), $(awk -v q=$((q1 - q0 - 2)) -v s="$idle" \
    'BEGIN { printf "%.2f", q / s / 3 }') etcd requests/s per node (keepalive every TTL/3 = $((ttl * 1000 / 3)) ms)"
