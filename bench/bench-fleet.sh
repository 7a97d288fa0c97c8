#!/bin/sh
# bench-fleet: fleet membership on a real 3-member etcd and three tendd on
# this machine (docs/fleet.md §5), each tendd in its own PID namespace where we
# are root. Figures, from outside, as a user sees them through the API of
# a surviving node (polled every 20 ms: the figures include up to one poll):
#
#   node loss      kill -9 of a node's machine → NotReady on the others
#   leader loss    kill -9 of the leader's machine → a new leader
#   join           tendd started → Ready on the other nodes
#   cordon         the PATCH of a cordon, answered once etcd has it (one txn)
#   apply          `tend apply` of 30 replicas on one node → all 30 Running and
#                  Ready across the 3 nodes; etcd txns and key writes per pod
#                  (and, apart, the event writes a second after)
#   rollout        a new template for the 30 → all 30 new ones available
#   reschedule     kill -9 of a node's machine (its pods die with it) → its
#                  pods running on the others: detection (NotReady seen),
#                  decision (its pods evicted, --node-lost-after 0s), start
#                  (their replacements Running and Ready)
#   idle           etcd revisions and requests per node per second, nothing
#                  happening (the keepalives: they create no revision)
#   scale          issue 29's goals: N replicas (3,000; --quick 600) applied
#                  on one node → all Running across the 3, against N/3 on
#                  one tendd alone (no fleet); placement (all bound) in pods
#                  a second; the leader's longest loop gap meanwhile (its
#                  /healthz on the local socket, polled every 10 ms); etcd
#                  key writes per pod; each tendd's CPU, etcd's, and the
#                  machine's idle share meanwhile (none left: the figures
#                  are the machine's limits); the nodes' skew from an even
#                  share. The pods are /bin/sleep.
#
#   bench-fleet.sh BIN_DIR [--quick] [--scale=N] [--scale-only]
set -u
bin=$(cd "$1" && pwd) || exit 1
quick=0
[ "${2:-}" = --quick ] && quick=1
scale=$([ "$quick" = 1 ] && echo 600 || echo 3000)
scale_only=0
for a in "$@"; do
    case $a in
    --scale=*) scale=${a#--scale=} ;;
    --scale-only) scale_only=1 ;;
    esac
done
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
    "$root/scripts/remove-cgroups.sh" "$dir"/*.log
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
        --lease-ttl "${ttl}s" --node-lost-after 0s >>"$dir/n$1.log" 2>&1 &
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
# poll_every INTERVAL S COMMAND...: until it succeeds, for at most S seconds
poll_every() {
    iv=$1 s=$2
    shift 2
    end=$(($(now_ms) + s * 1000))
    while [ "$(now_ms)" -lt "$end" ]; do
        "$@" && return 0
        sleep "$iv"
    done
    return 1
}
# until COMMAND succeeds, polling every 20 ms, for at most S seconds
poll() { poll_every 0.02 "$@"; }
# stats: min / median / p95 of the numbers on stdin
stats() {
    sort -n | awk '{ v[NR] = $1 } END {
        if (NR == 0) { print "no data"; exit }
        p = int(NR * 0.95 + 0.999); if (p > NR) p = NR
        printf "min %d  median %d  p95 %d  (n=%d)\n", v[1], v[int((NR + 1) / 2)], v[p], NR }'
}

# ---- scale (issue 29's goals) ----------------------------------------------------------------
key_writes() { # the writes of the pods' keys since they were made: sum of versions
    ETCDCTL_API=3 etcdctl --endpoints="$ETCD_ENDPOINTS" get --prefix "$1" -w json |
        jq '[.kvs[]?.version | tonumber] | add // 0'
}
# cpu_ticks: utime + stime of each node's tendd (n1 n2 n3), in clock ticks
cpu_ticks() {
    for n in 1 2 3; do
        p=$(pgrep -f "^$bin/tendd --state-dir $dir/n$n " | head -1)
        if [ -n "$p" ]; then awk '{ printf "%d ", $14 + $15 }' "/proc/$p/stat"; else printf "0 "; fi
    done
}
# etcd_ticks: utime + stime of this run's etcd members together, in clock ticks
etcd_ticks() {
    t=0
    for p in $(pgrep -f "^etcd --name e[0-9] --data-dir $dir/"); do
        t=$((t + $(awk '{ print $14 + $15 }' "/proc/$p/stat")))
    done
    echo "$t"
}
# idle_ticks: the machine's idle time, all CPUs, in clock ticks
idle_ticks() { awk '/^cpu / { print $5 + $6 }' /proc/stat; }
# bigdeploy NAME N: N replicas of /bin/sleep, no probe (Ready when started).
# The small process of a host of many (issue 35's too): tend-testprog links
# GnuTLS, and its dynamic loading (10 ms of a core here) was most of what the
# reference and the fleet measured, not tend's work.
bigdeploy() {
    cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1}
spec:
  replicas: $2
  selector: {matchLabels: {app: $1}}
  template:
    metadata: {labels: {app: $1}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        command: ["/bin/sleep", "infinity"]
YAML
}
# count SOCKET APP FILTER: pods of APP that pass a jq filter
count() {
    curl -s -m 30 --unix-socket "$1" "http://localhost/api/v1/namespaces/default/pods?labelSelector=app%3D$2" |
        jq "[.items[] | select($3)] | length" 2>/dev/null
}
running_n() { [ "$(count "$1" "$2" '.status.phase == "Running" and .metadata.deletionTimestamp == null')" = "$3" ]; }
bound_n() { [ "$(count "$1" "$2" '.spec.nodeName != null')" = "$3" ]; }
gone_all() { [ "$(count "$1" "$2" 'true')" = 0 ]; }
# poll_slow S COMMAND...: every 250 ms (a list of thousands is not free)
poll_slow() { poll_every 0.25 "$@"; }

scale_run() {
    echo
    echo "scale: $scale replicas"
    # one tendd alone, a third of them: the reference
    "$bin/tendd" --state-dir "$dir/solo" --socket "$dir/solo.sock" --port-range 45000-45999 \
        >>"$dir/solo.log" 2>&1 &
    solo=$!
    for _ in $(seq 200); do
        curl -s -m 1 --unix-socket "$dir/solo.sock" http://localhost/healthz >/dev/null 2>&1 && break
        sleep 0.02
    done
    third=$((scale / 3))
    t0=$(now_ms)
    bigdeploy solo "$third" | TEND_SOCKET="$dir/solo.sock" "$bin/tend" apply -f - >/dev/null
    poll_slow 600 running_n "$dir/solo.sock" solo "$third" && solo_ms=$(($(now_ms) - t0)) || solo_ms=-1
    TEND_SOCKET="$dir/solo.sock" "$bin/tend" delete deploy/solo >/dev/null
    poll_slow 300 gone_all "$dir/solo.sock" solo
    kill "$solo"
    wait "$solo" 2>/dev/null
    printf "%-44s %s\n" "one tendd alone: $third replicas → Running (ms)" "$solo_ms"

    # the fleet: applied on n1; the leader's loop sampled meanwhile, and
    # the pods counted through another node (a list of thousands is work
    # for the node that answers it: not the leader's to do here)
    lead=$(leader_seen_by 1)
    obs=1
    [ "$lead" = n1 ] && obs=2
    w0=$(($(key_writes /tend/v1/pods/) + $(key_writes /tend/v1/status/pods/)))
    c0=$(cpu_ticks)
    e0=$(etcd_ticks)
    i0=$(idle_ticks)
    ti0=$(now_ms)
    : >"$dir/gap"
    /usr/bin/python3 - "$dir/${lead}.sock" "$dir/gap" "$dir/gap.stop" <<'PY' &
import os, socket, sys, time
path, out, stop = sys.argv[1:4]
worst = 0.0
last = time.monotonic()
while not os.path.exists(stop):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(30)
        s.connect(path)
        s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")
        while s.recv(4096):
            pass
        s.close()
    except OSError:
        pass
    now = time.monotonic()
    worst = max(worst, now - last)
    last = now
    time.sleep(0.01)
open(out, "w").write("%d\n" % (worst * 1000))
PY
    sampler=$!
    t0=$(now_ms)
    bigdeploy big "$scale" | TEND_SOCKET="$dir/n1.sock" "$bin/tend" apply -f - >/dev/null
    poll_slow 900 bound_n "$dir/n$obs.sock" big "$scale" && bound_ms=$(($(now_ms) - t0)) || bound_ms=-1
    poll_slow 900 running_n "$dir/n$obs.sock" big "$scale" && big_ms=$(($(now_ms) - t0)) || big_ms=-1
    touch "$dir/gap.stop"
    wait "$sampler"
    w1=$(($(key_writes /tend/v1/pods/) + $(key_writes /tend/v1/status/pods/)))
    c1=$(cpu_ticks)
    e1=$(etcd_ticks)
    i1=$(idle_ticks)
    ti1=$(now_ms)
    per_node=$(curl -s -m 30 --unix-socket "$dir/n1.sock" \
        "http://localhost/api/v1/namespaces/default/pods?labelSelector=app%3Dbig" |
        jq -r '[.items[].spec.nodeName] | group_by(.) | map(length) | @tsv')
    skew=$(echo "$per_node" | awk -v n="$scale" '{ m = 0; for (i = 1; i <= NF; i++) if ($i > m) m = $i;
        printf "%d", (m * NF / n - 1) * 100 + 0.5 }')
    printf "%-44s %s\n" "the fleet: $scale replicas → Running (ms)" \
        "$big_ms ($(awk -v b="$big_ms" -v s="$solo_ms" 'BEGIN { printf "%.1f", b / s }')x the one tendd alone; goal <= 2x)"
    printf "%-44s %s\n" "  placement: all bound (pods/s)" \
        "$(awk -v n="$scale" -v t="$bound_ms" 'BEGIN { printf "%d", n * 1000 / t }') (goal >= 500)"
    printf "%-44s %s\n" "  the leader's ($lead) longest loop gap (ms)" "$(cat "$dir/gap") (goal <= 100)"
    printf "%-44s %s\n" "  etcd key writes per pod (x100)" "$(((w1 - w0) * 100 / scale)) (goal <= 300)"
    printf "%-44s %s\n" "  each tendd's CPU until all Running (s)" \
        "$(echo "$c0 $c1" | awk -v hz="$(getconf CLK_TCK)" '{ n = NF / 2; for (i = 1; i <= n; i++)
            printf "n%d %.1f  ", i, ($(i + n) - $i) / hz }')"
    hz=$(getconf CLK_TCK)
    printf "%-44s %s\n" "  etcd's CPU, 3 members (s)" "$(awk -v t=$((e1 - e0)) -v hz="$hz" 'BEGIN { printf "%.1f", t / hz }')"
    # (a machine with no idle left: the figures above are its limits, not
    # the fleet's latency)
    printf "%-44s %s\n" "  the machine idle meanwhile (% of its CPUs)" \
        "$(awk -v i=$((i1 - i0)) -v hz="$hz" -v ms=$((ti1 - ti0)) -v n="$(nproc)" \
            'BEGIN { printf "%.0f", 100 * i / hz / (ms / 1000) / n }')"
    printf "%-44s %s\n" "  pods per node; the fullest over an even share" "$(echo "$per_node" | tr '\t' ' '): +$skew % (goal <= 5 %)"
    TEND_SOCKET="$dir/n1.sock" "$bin/tend" delete deploy/big >/dev/null
    poll_slow 900 gone_all "$dir/n1.sock" big
}

for n in 1 2 3; do start "$n"; done
all_ready() { [ "$(node_json 1 "" | jq '[.items[] | select(.status.conditions[0].status == "True")] | length')" = 3 ]; }
poll 10 all_ready || { echo "the fleet did not come up"; exit 1; }
echo "3 etcd members, 3 tendd, lease TTL ${ttl}s, ${isolate:+each tendd in its own PID namespace, }$trials trials"
echo
if [ "$scale_only" = 1 ]; then
    scale_run
    exit 0
fi

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

rev() {
    curl -s -X POST "http://127.0.0.1:$etcd_base/v3/kv/range" -d '{"key":"eA=="}' |
        jq -r '.header.revision'
}
# the fleet's deployments: 30 replicas of a sleeper, ready when started
deployment() { # VERSION
    cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: bench}
spec:
  replicas: 30
  selector: {matchLabels: {app: bench}}
  template:
    metadata: {labels: {app: bench}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        command: ["$bin/../tests/tend-testprog", "sleep"]
        env: [{name: VERSION, value: "$1"}]
YAML
}
pods_json() { curl -s -m 2 --unix-socket "$dir/n$1.sock" "http://localhost/api/v1/namespaces/default/pods?labelSelector=app%3Dbench"; }
# running OBSERVER N [NOT-ON]: N pods Running, Ready, not deleting (and not on NOT-ON)
running() {
    [ "$(pods_json "$1" | jq --arg x "${3:-}" '[.items[] | select(.status.phase == "Running" and
        .metadata.deletionTimestamp == null and .spec.nodeName != $x and
        ([.status.conditions[]? | select(.type == "Ready" and .status == "True")] | length) == 1)] | length')" = "$2" ]
}
none_left() { [ "$(pods_json 1 | jq '.items | length')" = 0 ]; }

# apply: 30 replicas over 3 nodes, and what etcd wrote for them
: >"$dir/apply"
: >"$dir/txns"
: >"$dir/writes"
: >"$dir/events"
: >"$dir/rollout"
for i in $(seq $((quick ? 2 : 5))); do
    r0=$(rev)
    e0=$(key_writes /tend/v1/events/)
    t0=$(now_ms)
    deployment v1 | TEND_SOCKET="$dir/n1.sock" "$bin/tend" apply -f - >/dev/null
    poll 60 running 1 30 && echo $(($(now_ms) - t0)) >>"$dir/apply"
    r1=$(rev)
    w=$(($(key_writes /tend/v1/pods/) + $(key_writes /tend/v1/status/pods/)))
    echo "$(((r1 - r0) * 100 / 30))" >>"$dir/txns"
    echo "$((w * 100 / 30))" >>"$dir/writes"
    sleep 1 # the events of the last starts (written every 500 ms at most)
    echo "$((($(key_writes /tend/v1/events/) - e0) * 100 / 30))" >>"$dir/events"
    # a rolling update of the 30 (maxSurge 25 %, maxUnavailable 25 %)
    t0=$(now_ms)
    deployment v2 | TEND_SOCKET="$dir/n1.sock" "$bin/tend" apply -f - >/dev/null
    TEND_SOCKET="$dir/n1.sock" "$bin/tend" rollout status deploy/bench --timeout=120s >/dev/null &&
        echo $(($(now_ms) - t0)) >>"$dir/rollout"
    TEND_SOCKET="$dir/n1.sock" "$bin/tend" delete deploy/bench >/dev/null
    poll 30 none_left
done
printf "%-44s %s\n" "apply: 30 replicas → all running on 3 (ms)" "$(stats <"$dir/apply")"
printf "%-44s %s\n" "  etcd txns per pod started (x100)" "$(stats <"$dir/txns")"
printf "%-44s %s\n" "  etcd key writes per pod started (x100)" "$(stats <"$dir/writes")"
printf "%-44s %s\n" "  etcd event writes per pod, within 1 s (x100)" "$(stats <"$dir/events")"
printf "%-44s %s\n" "rollout: 30 replicas on 3 → all new (ms)" "$(stats <"$dir/rollout")"

# reschedule: a node's machine dies with its pods; they run again elsewhere
: >"$dir/detect"
: >"$dir/decide"
: >"$dir/restart"
: >"$dir/resched"
deployment v1 | TEND_SOCKET="$dir/n1.sock" "$bin/tend" apply -f - >/dev/null
poll 60 running 1 30
for _ in $(seq $((quick ? 2 : 5))); do
    lead=$(leader_seen_by 1)
    victim=3
    [ "$lead" = n3 ] && victim=2
    obs=1
    [ "$lead" = n1 ] || obs=${lead#n}
    t0=$(now_ms)
    kill_machine "$victim"
    lost() { [ "$(ready_of "$obs" "$victim")" = Unknown ]; }
    poll $((ttl + 5)) lost && t1=$(now_ms)
    evicted() {
        [ "$(pods_json "$obs" | jq --arg x "n$victim" '[.items[] | select(.spec.nodeName == $x and
            .metadata.deletionTimestamp == null)] | length')" = 0 ]
    }
    poll 10 evicted && t2=$(now_ms)
    poll 30 running "$obs" 30 "n$victim" && t3=$(now_ms)
    echo $((t1 - t0)) >>"$dir/detect"
    echo $((t2 - t1)) >>"$dir/decide"
    echo $((t3 - t2)) >>"$dir/restart"
    echo $((t3 - t0)) >>"$dir/resched"
    start "$victim"
    poll 10 all_ready
    poll 30 running 1 30
done
TEND_SOCKET="$dir/n1.sock" "$bin/tend" delete deploy/bench >/dev/null
poll 30 none_left
printf "%-44s %s\n" "reschedule: node dies → pods run elsewhere (ms)" "$(stats <"$dir/resched")"
printf "%-44s %s\n" "  detection: → NotReady seen (ms)" "$(stats <"$dir/detect")"
printf "%-44s %s\n" "  decision: → its pods evicted (ms)" "$(stats <"$dir/decide")"
printf "%-44s %s\n" "  start: → replacements Running, Ready (ms)" "$(stats <"$dir/restart")"

# idle: nothing happens for a while; what does etcd see?
reqs() {
    total=0
    for i in 0 1 2; do
        v=$(curl -s "http://127.0.0.1:$((etcd_base + i))/metrics" |
            awk '/^grpc_server_msg_received_total/ { s += $2 } END { print s + 0 }')
        total=$((total + v))
    done
    echo "$total"
}
# first the events of the runs above, written within each node's budget
# (20 a second, 200 at once), reach etcd: until its revision stays put 3 s
t0=$(now_ms)
last=$(rev)
still=0
while [ "$still" -lt 3 ] && [ $(($(now_ms) - t0)) -lt 300000 ]; do
    sleep 1
    r=$(rev)
    if [ "$r" = "$last" ]; then still=$((still + 1)); else still=0; last=$r; fi
done
echo "the events of the runs above were all in etcd after $((($(now_ms) - t0) / 1000 - 3)) s"
r0=$(rev)
q0=$(reqs)
sleep "$idle"
r1=$(rev)
q1=$(reqs)
# the two reads of the revision are requests too: 2 range calls
echo "idle for ${idle}s: $((r1 - r0)) etcd revisions (writes), $(awk -v q=$((q1 - q0 - 2)) -v s="$idle" \
    'BEGIN { printf "%.2f", q / s / 3 }') etcd requests/s per node (keepalive every TTL/3 = $((ttl * 1000 / 3)) ms)"

scale_run
