#!/bin/sh
# Shared by the fleet tests, sourced after tests/cli/lib.sh and etcd.sh:
# tend against a node and what it shows, a TCP gate per node, the terms of
# leadership the tendd logged, and the verdict.
# (wait_for uses $n: the functions here use other names.)

# fleet_etcd: what the tests need (jq, etcd: else skipped, 77), then a
# 3-member etcd under $tmp.
fleet_etcd() {
    command -v jq >/dev/null || { echo "jq missing (make deps)"; exit 77; }
    fe_rc=0
    etcd_cluster_start "$tmp" || fe_rc=$?
    [ "$fe_rc" = 0 ] || exit "$fe_rc"
}

# on K ARGS...: tend against node nK.
on() { o=$1; shift; TEND_SOCKET="$tmp/n$o.sock" "$bin/tend" "$@"; }
# status ON NODE: NODE's STATUS column as node ON sees it.
status() { on "$1" get nodes | awk -v x="$2" '$1 == x { print $2 }'; }
is_status() { [ "$(status "$1" "$2")" = "$3" ]; }
# leader_of ON: the node that leads, as node ON sees it.
leader_of() { on "$1" get nodes | awk '$3 == "leader" { print $1 }'; }

# fleet_node K URLS [TENDD-ARGS...]: tendd nK on the fleet at URLS, its
# state, socket and pod port range its own, its lease ${ttl}s, logging to
# $tmp/nK.log; nK_pid is its pid, added to $pids. Returns once it answers.
fleet_node() {
    fk=$1 furls=$2
    shift 2
    "$bin/tendd" --state-dir "$tmp/n$fk" --socket "$tmp/n$fk.sock" --port-range "4${fk}000-4${fk}999" \
        --fleet "$furls" --node-name "n$fk" --lease-ttl "${ttl}s" "$@" >>"$tmp/n$fk.log" 2>&1 &
    eval "n${fk}_pid=$!"
    pids="$pids $!"
    wait_for 15 sh -c "TEND_SOCKET=$tmp/n$fk.sock $bin/tend version" ||
        { echo "tendd n$fk did not come up:"; tail -n 5 "$tmp/n$fk.log"; exit 1; }
}
# fleet_cleanup (an EXIT trap): the tendd of $pids stopped, the gates and
# etcd too; on a failure, the end of each tendd's log.
fleet_cleanup() {
    for p in $pids; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    stop_gates
    etcd_cluster_stop
    if [ "$failures" -ne 0 ]; then
        for f in "$tmp"/n*.log; do echo "---- $(basename "$f" .log) ----"; tail -n 25 "$f"; done
    fi
    cleanup
}

# start_gates: a tend-tcp-gate for each of nodes 1..3 to the etcd members
# (SIGSTOP cuts the node off, SIGCONT heals it): gate_K is the --fleet URLs
# through it, gate_pid_K its pid.
start_gates() {
    # shellcheck disable=SC2154 # etcd_base: set by etcd_cluster_start
    for g in 1 2 3; do
        "$bin/../tests/tend-tcp-gate" "$etcd_base" $((etcd_base + 1)) $((etcd_base + 2)) \
            >"$tmp/gate$g" &
        eval "gate_pid_$g=$!"
        wait_for 5 grep -q ready "$tmp/gate$g" || { echo "gate $g did not start"; exit 1; }
        eval "gate_$g=$(head -3 "$tmp/gate$g" | sed 's,^,http://127.0.0.1:,' | paste -sd, -)"
    done
}
stop_gates() {
    for g in 1 2 3; do
        eval "gp=\${gate_pid_$g:-}"
        [ -n "$gp" ] && { kill -CONT "$gp" 2>/dev/null; kill -KILL "$gp" 2>/dev/null; }
    done
}

# leadership_terms KILLS: every term of leadership the tendd logged (at
# debug: "leading from/until monotonic T", one clock for the machine), a
# line "node start end" each, sorted by start, into $tmp/terms. KILLS holds
# "nK T" lines: a tendd killed -9 at T, which ends a term it had open then.
leadership_terms() {
    for f in "$tmp"/n*.log; do
        awk -v node="$(basename "$f" .log)" -v killfile="$1" '
            BEGIN { while ((getline l < killfile) > 0) { split(l, a, " "); if (a[1] == node) kills[++nk] = a[2] } }
            function t() { for (i = 1; i < NF; i++) if ($i == "monotonic") return $(i + 1) }
            function close_before(x) {  # the first kill after the open term began
                    for (j = 1; j <= nk; j++) if (kills[j] > start) return kills[j]
                    return x }
            /leading from monotonic/ { if (open) print node, start, close_before(t()); start = t(); open = 1 }
            /leading until monotonic/ { if (open) print node, start, t(); open = 0 }
            END { if (open) print node, start, close_before("9223372036854775807") }' "$f"
    done | sort -k2,2n >"$tmp/terms"
}
# terms_apart: no two terms of $tmp/terms overlap (says which do).
terms_apart() {
    awk 'NR > 1 && $2 < maxend { bad = 1; print "overlap:", last, "and", $0 }
         { if ($3 > maxend) { maxend = $3; last = $0 } } END { exit bad }' "$tmp/terms"
}

# stop_tendds PID...: SIGTERM, and each must exit 0 (no leak at exit either).
stop_tendds() {
    for sp in "$@"; do
        kill -TERM "$sp"
        wait "$sp" || fail "a tendd exited non-zero on SIGTERM"
    done
}

# fleet_verdict: no sanitizer report in a tendd's log, then the verdict.
fleet_verdict() {
    if grep -q -E "Sanitizer|runtime error" "$tmp"/n*.log; then
        fail "sanitizer report in a tendd log"
        grep -E -A5 "Sanitizer|runtime error" "$tmp"/n*.log | head -30
    fi
    [ "$failures" -eq 0 ] && { echo "all passed"; exit 0; }
    echo "$failures failure(s)${1:+ ($1)}"
    exit 1
}

# bounded_deployment NAME POLICY: a Deployment of 3 replicas, maxSurge 0,
# under tend.io/node-lost-policy POLICY, its pods marked with $tmp (and
# APP=NAME) for live
bounded_deployment() {
    cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata:
  name: $1
  annotations: {tend.io/node-lost-policy: $2}
spec:
  replicas: 3
  strategy: {rollingUpdate: {maxSurge: 0, maxUnavailable: 1}}
  selector: {matchLabels: {app: $1}}
  template:
    metadata: {labels: {app: $1}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        command: ["$testprog", "sleep"]
        env: [{name: TEST_MARKER, value: "$tmp"}, {name: APP, value: "$1"}]
YAML
}
# live APP: the processes of APP's pods alive on this machine, every
# node's (a zombie has no environment: it is not counted)
live() {
    grep -lzx "TEST_MARKER=$tmp" /proc/[0-9]*/environ 2>/dev/null |
        xargs -r grep -lzx "APP=$1" 2>/dev/null | wc -l
}
live_is() { [ "$(live "$1")" -eq "$2" ]; }       # APP N
live_at_least() { [ "$(live "$1")" -ge "$2" ]; } # APP N
# pods_on ON APP: "name node phase deleting pid", one line a pod
pods_on() {
    curl -s --unix-socket "$tmp/n$1.sock" \
        "http://localhost/api/v1/namespaces/default/pods?labelSelector=app%3D$2" |
        jq -r '.items[] | [.metadata.name, (.spec.nodeName // "-"), .status.phase,
            (if .metadata.deletionTimestamp then "deleting" else "-" end),
            (.status.containerStatuses[0].containerID // "-" | sub("process://"; ""))] | join(" ")' | sort
}
# running_not_on ON APP NODE N: N of APP's pods Running, not deleting, not on NODE
running_not_on() {
    [ "$(pods_on "$1" "$2" | awk -v x="$3" '$2 != x && $3 == "Running" && $4 == "-"' | wc -l)" -eq "$4" ]
}
# one_leads ON: node ON sees one leader
one_leads() { [ "$(leader_of "$1" | wc -l)" = 1 ]; }
