#!/bin/sh
# tend.io/node-lost-policy: fence keeps its bound when tendd itself fails
# (issue 29, docs/fleet.md §3.10): a node's tendd stopped (SIGSTOP: hung)
# or killed (-9) while its pods run on. The fence keeper, a process of
# tendd's own, stops the node's fenced pod before the lease can expire, so
# the leader's replacement never runs beside it: live processes stay within
# replicas + maxSurge, sampled throughout. A tendd started again connects to
# the same keeper.
. "$(dirname "$0")/../cli/lib.sh"
. "$(dirname "$0")/etcd.sh"
. "$(dirname "$0")/lib.sh"

fleet_etcd
ttl=3
pids=
trap fleet_cleanup EXIT
for k in 1 2 3; do fleet_node "$k" "$ETCD_ENDPOINTS" --node-lost-after 0s --log-level debug; done
wait_for 10 one_leads 1 || fail "nobody leads"
lead=$(leader_of 1)

bounded_deployment fen fence | on 1 apply -f - >/dev/null || fail "apply"
alive() { # PID: running (a zombie is not: its parent, hung, has not reaped it)
    [ -r "/proc/$1/stat" ] && [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" != Z ]
}
pid_on() { # ON NODE: the pid of fen's running pod bound to NODE, as ON sees it
    pods_on "$1" fen | awk -v n="$2" '$2 == n && $3 == "Running" && $4 == "-" { print $5; exit }'
}
running() { # ON N [NODE]: N of fen's pods Running, not deleting (not on NODE)
    running_not_on "$1" fen "${3:-none}" "$2"
}
wait_for 20 running 1 3 || fail "fen: not 3 running"

# fail K HOW: tendd nK stopped (STOP) or killed (KILL) while the node's
# fenced pod runs on; sampled until it is replaced elsewhere
trial() {
    k=$1 how=$2
    obs=${lead#n}
    victim=$(pid_on "$obs" "n$k")
    [ -n "$victim" ] || { fail "$how: no pod of fen on n$k"; return; }
    eval "tp=\$n${k}_pid"
    kill -"$how" "$tp"
    t0=$(date +%s%N)
    dead_at= max=0
    for _ in $(seq 200); do # 20 s at most
        l=$(live fen)
        [ "$l" -gt "$max" ] && max=$l
        [ -z "$dead_at" ] && ! alive "$victim" && dead_at=$((($(date +%s%N) - t0) / 1000000))
        [ -n "$dead_at" ] && running "$obs" 3 "n$k" && break
        sleep 0.1
    done
    replaced_at=$((($(date +%s%N) - t0) / 1000000))
    # told to stop before the lease can expire (TTL - 1 s after the last
    # keepalive acknowledged), killed at most its grace (1 s) later
    if [ -n "$dead_at" ] && [ "$dead_at" -lt $(((ttl + 1) * 1000)) ]; then
        ok "$how of tendd n$k: its fenced pod (pid $victim) stopped at $dead_at ms, within the lease's TTL (${ttl} s) and its grace"
    else
        fail "$how of tendd n$k: its fenced pod (pid $victim) ${dead_at:+stopped at $dead_at ms}${dead_at:-still runs}"
    fi
    running "$obs" 3 "n$k" && ok "... replaced elsewhere by $replaced_at ms" ||
        fail "$how: not replaced in 20 s"
    [ "$max" -le 3 ] && ok "... never more than 3 live processes (max $max)" ||
        fail "$how of tendd n$k: $max live processes at once (replicas 3, maxSurge 0)"
}

keepers_of() { pgrep -f -- "--fence-keepe[r] $tmp/n$1\$" | wc -l; }
follower_with_pod() { # a follower that runs a pod of fen now
    for j in 1 2 3; do
        [ "n$j" != "$lead" ] && [ -n "$(pid_on "${lead#n}" "n$j")" ] && { echo "$j"; return; }
    done
}
a=1
[ "$lead" = n1 ] && a=2
b=$((6 - a - ${lead#n}))
obs=${lead#n}

# A tendd killed and started again at once connects to the keeper it had
# (which has kept the time since): no second keeper. Whether its pod
# outlives the restart is the restart's speed against the TTL: said, not
# tested.
victim=$(pid_on "$obs" "n$a")
eval "kill -KILL \$n${a}_pid; wait \$n${a}_pid" 2>/dev/null
pids=$(for p in $pids; do eval "[ \"$p\" != \"\$n${a}_pid\" ]" && echo "$p"; done | paste -sd' ' -)
before=$(keepers_of "$a")
fleet_node "$a" "$ETCD_ENDPOINTS" --node-lost-after 0s --log-level debug
wait_for 5 sh -c "[ \$(grep -c 'a tendd connected' $tmp/n$a.log) -ge 2 ]" || true
n_started=$(grep -c "fence keeper started" "$tmp/n$a.log")
if [ "$before" = 1 ] && [ "$n_started" = 1 ] && [ "$(keepers_of "$a")" = 1 ] &&
    [ "$(grep -c "a tendd connected" "$tmp/n$a.log")" -ge 2 ]; then
    ok "tendd n$a killed and started again: it connected to the keeper it had (one started, one running)"
else
    fail "keepers of n$a: $before before, $n_started started, $(keepers_of "$a") running"
fi
if alive "${victim:-0}"; then
    echo "   (its pod, pid $victim, outlived the restart)"
else
    echo "   (its pod, pid ${victim:-?}, was stopped: the restart took longer than the TTL allows)"
fi
wait_for 15 is_status "$obs" "n$a" Ready || fail "n$a is not Ready after its restart"
wait_for 20 running "$obs" 3 || fail "fen: not 3 running after n$a's restart"

trial "$b" STOP
grep -q "tendd has not renewed the node's lease in time" "$tmp/n$b.log" &&
    ok "the keeper said so in n$b's log" || fail "no word of the keeper in n$b's log"
eval "kill -CONT \$n${b}_pid"
wait_for 15 is_status "$obs" "n$b" Ready || fail "n$b is not Ready after SIGCONT"

k=$(follower_with_pod)
[ -n "$k" ] || fail "no follower runs a pod of fen"
if [ -n "$k" ]; then
    trial "$k" KILL
    eval "wait \$n${k}_pid" 2>/dev/null
    pids=$(for p in $pids; do eval "[ \"$p\" != \"\$n${k}_pid\" ]" && echo "$p"; done | paste -sd' ' -)
fi

# Every tendd stopped (SIGTERM: the pods keep running) and none back: the
# leases will expire and the pods be replaced, so the keepers stop the
# fenced pods first, then go (nothing left to keep, nobody to tell them).
stop_tendds $pids
pids=
if wait_for $((ttl + 5)) sh -c "[ \$(pgrep -f -- '--fence-keepe[r] $tmp/' | wc -l) = 0 ]" && [ "$(live fen)" = 0 ]; then
    ok "every tendd stopped: the keepers stopped the fenced pods within the TTL, and went"
else
    fail "after every tendd stopped: $(live fen) fenced pods live, keepers: $(pgrep -af -- "--fence-keepe[r] $tmp/")"
    grep -lzx "TEST_MARKER=$tmp" /proc/[0-9]*/environ 2>/dev/null | xargs -r grep -lzx "APP=fen" |
        while read -r e; do tr '\0' '\n' <"$e" | grep -E "^(POD_NAME|NODE_NAME)="; done
    grep -h "keeper" "$tmp"/n*.log | tail -n 20
fi
fleet_verdict
