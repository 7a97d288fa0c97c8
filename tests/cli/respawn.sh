#!/bin/sh
# Killed replicas come back, through the real tendd and real processes:
# all of them at once, again 3 s later, each replica backing off only for
# its own crash loop — and a process left behind by an agent that died
# before recording it does not survive the next agent.
. "$(dirname "$0")/lib.sh"

command -v jq >/dev/null || { echo "jq missing (make deps)"; exit 77; }

# deploy NAME REPLICAS MODE [ANNOTATION]: a Deployment of tend-testprog MODE.
deploy() {
    cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata:
  name: $1
${4:+  annotations: {$4\}}
spec:
  replicas: $2
  selector:
    matchLabels: {app: $1}
  template:
    metadata:
      labels: {app: $1}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        command: ["$testprog", "$3"]
        env: [{name: TEST_MARKER, value: "$tmp"}]
YAML
}

# pods APP: "name pid restarts waiting-reason" per pod that is not Failed.
pods() {
    curl -s --unix-socket "$TEND_SOCKET" \
        "http://localhost/api/v1/namespaces/default/pods?labelSelector=app%3D$1" |
        jq -r '.items[] | select(.status.phase != "Failed") | .status.containerStatuses[0] as $c |
            [.metadata.name, ($c.containerID // "-" | sub("process://"; "")),
             ($c.restartCount | tostring), ($c.state.waiting.reason // "-")] | join(" ")'
}

# live PIDS...: how many of these pids run.
live() {
    n=0
    for p in "$@"; do kill -0 "$p" 2>/dev/null && n=$((n + 1)); done
    echo "$n"
}

# replaced APP N OLD...: N pods of APP have a process, none of them an OLD one,
# and every one of them runs.
replaced() {
    app=$1 n=$2
    shift 2
    pods "$app" | awk '{ print $2 }' >"$tmp/new"
    [ "$(grep -c '^[0-9]' "$tmp/new")" -eq "$n" ] || return 1
    for p in "$@"; do grep -qx "$p" "$tmp/new" && return 1; done
    # shellcheck disable=SC2046
    [ "$(live $(cat "$tmp/new"))" -eq "$n" ]
}

all_running() { # APP N: N pods Running, with a pid each
    [ "$(tend get pods -l "app=$1" | awk '$3 == "Running"' | wc -l)" -eq "$2" ]
}

start_tendd

echo "== twenty replicas, all killed at once, twice, 3 s apart"
deploy many 20 sleep | tend apply -f - >/dev/null
wait_for 30 all_running many 20 || fail "20 replicas did not start"
for round in 1 2; do
    old=$(pods many | awk 'NF { print $2 }')
    t0=$(date +%s%N)
    # shellcheck disable=SC2086
    kill -9 $old
    # shellcheck disable=SC2086
    wait_for 10 replaced many 20 $old || fail "round $round: not all 20 replaced"
    # When they started, as tendd recorded it (not when this loop, slow on
    # a loaded machine, got round to looking): the last of the 20.
    last=$(curl -s --unix-socket "$TEND_SOCKET" \
        "http://localhost/api/v1/namespaces/default/pods?labelSelector=app%3Dmany" |
        jq -r '.items[] | select(.status.phase == "Running") |
            .status.containerStatuses[0].state.running.startedAt' |
        while read -r ts; do date -d "$ts" +%s%N; done | sort -n | tail -1)
    back=$(((${last:-0} - t0) / 1000000))
    # Nobody waited for anybody else's death: no replacement was given a
    # back-off (tend.io/start-after; a replica's third young death in a row
    # would wait 1 s). Asked of the pods, not of the clock: a loaded machine
    # (two suites at once) took 1026 ms for round 2, 200-300 ms alone. How
    # fast is bench-respawn's to say.
    delayed=$(curl -s --unix-socket "$TEND_SOCKET" \
        "http://localhost/api/v1/namespaces/default/pods?labelSelector=app%3Dmany" |
        jq '[.items[] | select(.metadata.annotations["tend.io/start-after"] != null)] | length')
    if [ "$back" -ge 0 ] && [ "$delayed" = 0 ]; then
        ok "round $round: all 20 back in $back ms, none kept waiting"
    else
        fail "round $round: $delayed of 20 kept waiting by a back-off ($back ms)"
    fi
    wait_for 10 all_running many 20 || fail "round $round: the API does not show 20 running"
    pods many >"$tmp/pods"
    grep -q CrashLoopBackOff "$tmp/pods" &&
        fail "round $round: a replica backs off for the others' deaths: $(cat "$tmp/pods")"
    [ "$(awk -v r="$round" 'NF && $3 == r' "$tmp/pods" | wc -l)" -eq 20 ] &&
        ok "round $round: each replacement carries its own line (restarts $round)" ||
        fail "round $round: restart counts: $(cat "$tmp/pods")"
    sleep 3
done
tend delete deploy/many >/dev/null

echo "== a crash-looping deployment backs off, and does not spin"
deploy crashy 1 exit | sed 's/"exit"\]/"exit", "1"]/' | tend apply -f - >/dev/null
crashing() { tend get pods -l app=crashy | grep -q CrashLoopBackOff; }
wait_for 10 crashing && ok "CrashLoopBackOff" || fail "no CrashLoopBackOff: $(pods crashy)"
sleep 6
restarts=$(pods crashy | awk 'NF { print $3 }' | sort -n | tail -1)
# 0, +0, +0, then waits of 1, 2, 4, 8 s: about seven starts in 8 s
[ "${restarts:-99}" -le 8 ] && ok "backing off: $restarts restarts in about 8 s" ||
    fail "spinning: $restarts restarts in about 8 s"
tend get pods -l app=crashy -o json | jq -e '.items[] | select(.status.phase != "Failed") |
    .metadata.annotations["tend.io/crash-streak"] | tonumber >= 3' >/dev/null &&
    ok "the replica's streak is on the pod" || fail "no crash streak on the pod"

echo "== tend.io/crash-backoff: off, and back on"
deploy crashy 1 exit 'tend.io/crash-backoff: "off"' | sed 's/"exit"\]/"exit", "1"]/' |
    tend apply -f - >/dev/null
no_backoff() { ! tend get pods -l app=crashy | grep -q CrashLoopBackOff; }
wait_for 10 no_backoff && ok "switched off: the waiting replica starts at once" ||
    fail "still backing off: $(pods crashy)"
before=$(pods crashy | awk 'NF { print $3 }' | sort -n | tail -1)
sleep 2
after=$(pods crashy | awk 'NF { print $3 }' | sort -n | tail -1)
[ "$((after - before))" -ge 4 ] && ok "off: replaced at once ($((after - before)) in 2 s)" ||
    fail "off: only $((after - before)) restarts in 2 s"
deploy crashy 1 exit 'tend.io/crash-backoff: "sometimes"' | sed 's/"exit"\]/"exit", "1"]/' \
    >"$tmp/bad.yaml"
expect_exit 1 "a bad tend.io/crash-backoff is refused" tend apply -f "$tmp/bad.yaml"
expect_grep 'metadata.annotations\[tend.io/crash-backoff\]: Invalid value: "sometimes"' \
    "$tmp/err" "the error names the annotation"
tend delete deploy/crashy >/dev/null

echo "== off, and the program cannot even be started: tendd stays itself"
# Each start fails at once and is replaced at once: a chain of passes with
# no end. tendd must still commit, answer, stay small, and stop on SIGTERM
# (it did none of that: nothing was committed, 10 GB in 40 s, and only
# kill -9 stopped it).
deploy noexec 2 sleep 'tend.io/crash-backoff: "off"' |
    sed "s|\"$testprog\", \"sleep\"|\"$tmp/no-such-program\"|" | tend apply -f - >/dev/null
sleep 3
expect_exit 0 "the API answers while it spins" timeout 5 "$bin/tend" get rs -l app=noexec
expect_grep "noexec-" "$tmp/out" "its ReplicaSet is written"
spins=$(tend get pods -l app=noexec -o json | jq '[.items[].status.containerStatuses[0].restartCount] | max')
[ "${spins:-0}" -ge 10 ] && ok "replaced at once, as asked ($spins restarts)" ||
    fail "only ${spins:-0} restarts with back-off off"
kept=$(tend get pods -l app=noexec -o name | wc -l)
[ "$kept" -le 12 ] && ok "nothing piles up: $kept pods (2 replicas and the last failed ones)" ||
    fail "$kept pods kept"
expect_exit 0 "it is deleted" timeout 10 "$bin/tend" delete deploy/noexec
tend apply -f - >/dev/null <<YAML
$(deploy noexec 2 sleep 'tend.io/crash-backoff: "off"' | sed "s|\"$testprog\", \"sleep\"|\"$tmp/no-such-program\"|")
YAML
sleep 1
kill -TERM "$tendd_pid"
exited() { ! kill -0 "$tendd_pid" 2>/dev/null || grep -q '^State:.*Z' "/proc/$tendd_pid/status"; }
wait_for 10 exited && ok "SIGTERM stops it while it spins" || { fail "SIGTERM ignored"; kill -9 "$tendd_pid"; }
stop_tendd KILL
start_tendd
tend delete deploy/noexec >/dev/null

echo "== a process that an agent died before recording is killed by the next"
deploy kept 1 sleep | tend apply -f - >/dev/null
wait_for 10 all_running kept 1 || fail "kept did not start"
kept=$(pods kept | awk 'NF { print $2 }')
stop_tendd TERM
# What a tendd killed between a spawn and its commit leaves: a process of
# ours (a pod log of this state dir, a POD_UID) that no record names.
mkdir -p "$state/pods/default_ghost-7d9f8c6b5-x2c4d"
setsid env POD_UID=0ddba11-0000-4000-8000-000000000000 TEST_MARKER="$tmp" \
    "$testprog" sleep >"$state/pods/default_ghost-7d9f8c6b5-x2c4d/main.log" 2>&1 &
ghost=$!
sleep 0.2
kill -0 "$ghost" 2>/dev/null || fail "the ghost did not start"
start_tendd
gone() { ! kill -0 "$ghost" 2>/dev/null || grep -q '^State:.*Z' "/proc/$ghost/status"; }
wait_for 5 gone && ok "the unrecorded process is killed at start-up" ||
    fail "pid $ghost still runs"
wait "$ghost" 2>/dev/null
expect_grep "pid $ghost (tend-testprog) runs for no pod" "$tmp/tendd.log" "the log says why"
[ "$(live "$kept")" -eq 1 ] && [ "$(pods kept | awk 'NF { print $2 }')" = "$kept" ] &&
    ok "the recorded pod is adopted, not killed (pid $kept)" || fail "pod kept lost its process"
tend delete deploy/kept >/dev/null

finish
