#!/bin/sh
# A node cut off from etcd (issue 17, docs/fleet.md §3.9–3.10), through a real
# 3-member etcd and three real tendd, each behind a TCP gate that SIGSTOP
# turns into a blackhole. Two deployments, one pod per node each:
#   replace (the default): the cut-off node keeps its pod running, the
#     leader replaces it elsewhere once the node is lost; when the cut
#     heals, the node stops it, and within a grace period and a few seconds
#     the deployment is back to its replicas;
#   fence: the cut-off node stops its pod before its lease can expire (it
#     is dead before the others see the node NotReady), the leader replaces
#     it only after the lease expired and its grace period, so the live
#     processes never exceed replicas + maxSurge — sampled throughout.
# The cut-off node also restarts a crash in place, on its own. And two
# nodes changing one object at once: one is refused, never merged blindly.
. "$(dirname "$0")/../cli/lib.sh"
. "$(dirname "$0")/etcd.sh"
. "$(dirname "$0")/lib.sh"

fleet_etcd

ttl=3
pids=
node() { # K: tendd nK behind gate K
    eval "g=\$gate_$1"
    fleet_node "$1" "$g" --node-lost-after 0s
}
trap fleet_cleanup EXIT


start_gates
for k in 1 2 3; do node "$k"; done
wait_for 10 one_leads 1 || fail "nobody leads"
lead=$(leader_of 1)
bounded_deployment rep replace | on 1 apply -f - >/dev/null || fail "apply rep"
bounded_deployment fen fence | on 1 apply -f - >/dev/null || fail "apply fen"
wait_for 20 running_not_on 1 rep none 3 && wait_for 10 running_not_on 1 fen none 3 ||
    { fail "not 3 + 3 running"; pods_on 1 rep; pods_on 1 fen; }
for a in rep fen; do
    [ "$(pods_on 1 $a | awk '{ print $2 }' | sort -u | wc -l)" = 3 ] || fail "$a is not one pod per node"
done

# cut off a node that does not lead
cut=1
[ "$lead" = n1 ] && cut=2
obs=$((cut % 3 + 1))
[ "n$obs" = "$lead" ] || obs=${lead#n}
rep_pid=$(pods_on "$obs" rep | awk -v x="n$cut" '$2 == x { print $5 }')
fen_pid=$(pods_on "$obs" fen | awk -v x="n$cut" '$2 == x { print $5 }')
eval "kill -STOP \$gate_pid_$cut"
t0=$(date +%s%N)
# two quick watchers: when the fence pod dies, when the node is seen lost
( while kill -0 "$fen_pid" 2>/dev/null; do sleep 0.02; done
  echo $((($(date +%s%N) - t0) / 1000000)) >"$tmp/fen_dead" ) &
( until curl -s --unix-socket "$tmp/n$obs.sock" "http://localhost/api/v1/nodes/n$cut" |
        jq -e '.status.conditions[0].status == "Unknown"' >/dev/null; do sleep 0.02; done
  echo $((($(date +%s%N) - t0) / 1000000)) >"$tmp/notready" ) &
for a in rep fen; do
    ( until running_not_on "$obs" "$a" "n$cut" 3; do sleep 0.02; done
      echo $((($(date +%s%N) - t0) / 1000000)) >"$tmp/${a}_replaced" ) &
done
max_fen=0
for _ in $(seq 150); do # 15 s at most
    t=$((($(date +%s%N) - t0) / 1000000))
    lf=$(live fen)
    [ "$lf" -gt "$max_fen" ] && max_fen=$lf
    [ -s "$tmp/rep_replaced" ] && [ -s "$tmp/fen_replaced" ] && [ "$t" -gt 9000 ] && break
    sleep 0.1
done
wait_for 5 test -s "$tmp/fen_dead"
wait_for 5 test -s "$tmp/notready"
fen_dead_at=$(cat "$tmp/fen_dead" 2>/dev/null)
rep_replaced_at=$(cat "$tmp/rep_replaced" 2>/dev/null)
fen_replaced_at=$(cat "$tmp/fen_replaced" 2>/dev/null)
notready_at=$(cat "$tmp/notready" 2>/dev/null)
echo "cut off n$cut at 0: fence pod dead at ${fen_dead_at:-never} ms, NotReady seen at ${notready_at:-never} ms," \
    "replace pod replaced at ${rep_replaced_at:-never} ms, fence pod at ${fen_replaced_at:-never} ms"
if [ -n "$fen_dead_at" ] && [ -n "$notready_at" ] && [ "$fen_dead_at" -lt "$notready_at" ]; then
    ok "fence: the cut-off node stopped its pod (at $fen_dead_at ms) before it was seen lost ($notready_at ms)"
else
    fail "fence: the pod on n$cut was not stopped before the node was seen lost"
fi
[ "$max_fen" -le 3 ] && ok "fence: never more than 3 live processes throughout (max $max_fen)" ||
    fail "fence: $max_fen live processes at once (replicas 3, maxSurge 0)"
# Each is seen through the API by a poll (curl and jq, every 20 ms), which
# on a loaded machine sees NotReady late: a CI run saw it 105 ms and more
# after the leader had it (replaced 2895 ms after NotReady was seen, where
# the leader waits 3000 ms). Half a second of slack here; the exact bound,
# in virtual time, is test-fleet's test_node_lost.
[ -n "$fen_replaced_at" ] && [ -n "$notready_at" ] && [ "$fen_replaced_at" -ge $((notready_at + 1000 + 2000 - 500)) ] &&
    ok "fence: replaced elsewhere only once the lease was gone for grace + 2 s ($fen_replaced_at ms)" ||
    fail "fence: replaced at ${fen_replaced_at:-never} ms, the node lost at ${notready_at:-?} ms"
[ -n "$rep_replaced_at" ] && ok "replace: replaced elsewhere at $rep_replaced_at ms" ||
    fail "replace: never replaced"
kill -0 "$rep_pid" 2>/dev/null && ok "replace: the cut-off node still runs its pod (pid $rep_pid)" ||
    fail "replace: the cut-off node's pod died"
# a crash on the cut-off node restarts in place, without etcd
kill -KILL "$rep_pid"
wait_for 5 live_at_least rep 4 &&
    ok "replace: a crash on the cut-off node is restarted there, without etcd" ||
    fail "replace: the cut-off node did not restart its crashed pod ($(live rep) live)"
on "$cut" get pods >/dev/null 2>&1 && ok "the cut-off node still answers reads" ||
    fail "the cut-off node does not answer reads"
# ... and says they may be stale: a Warning on every read; in its view no
# node is Ready and none leads (it cannot tell), itself included
if on "$cut" get pods 2>&1 >/dev/null | grep -q "Warning: node/n$cut is cut off from the fleet's etcd"; then
    ok "its reads carry a Warning: $(on "$cut" get pods 2>&1 >/dev/null | head -c 80)..."
else
    fail "a read on the cut-off node has no Warning: $(on "$cut" get pods 2>&1 >/dev/null)"
fi
view=$(curl -s --unix-socket "$tmp/n$cut.sock" http://localhost/api/v1/nodes |
    jq -r '.items[] | [.metadata.name, .status.conditions[0].status,
        (.metadata.labels // {} | has("node-role.kubernetes.io/leader"))] | join(" ")' | paste -sd, -)
[ "$view" = "n1 Unknown false,n2 Unknown false,n3 Unknown false" ] &&
    ok "in its own view every node is Unknown and none leads: $view" ||
    fail "the cut-off node's view of the nodes: $view"

# heal: the node comes back, stops what etcd no longer binds to it
eval "kill -CONT \$gate_pid_$cut"
th=$(date +%s%N)
if wait_for 10 live_is rep 3; then
    ok "replace: healed, back to 3 live processes in $((($(date +%s%N) - th) / 1000000)) ms (grace 1 s)"
else
    fail "replace: $(live rep) live processes 10 s after the heal"
fi
[ "$(live fen)" = 3 ] && ok "fence: 3 live after the heal, nothing to undo" || fail "fence: $(live fen) live after the heal"
wait_for 10 sh -c "[ \$(curl -s --unix-socket $tmp/n$obs.sock 'http://localhost/api/v1/namespaces/default/pods' | jq '.items | length') = 6 ]" &&
    ok "6 pods in the fleet again (the evicted ones removed by their node)" ||
    { fail "pods after the heal:"; pods_on "$obs" rep; pods_on "$obs" fen; }

# ---- two nodes change the same object at once: etcd takes one, the other
# is refused (409) and changes nothing; the next write goes through ----
replicas_on() { on "$1" get deployment rep -o json | jq '.spec.replicas'; }
eval "kill -STOP \$gate_pid_$cut"
on "$cut" scale deploy/rep --replicas=5 >"$tmp/conflict" 2>&1 &
loser=$!
sleep 0.5
on "$obs" scale deploy/rep --replicas=4 >/dev/null || fail "scale to 4 on n$obs"
eval "kill -CONT \$gate_pid_$cut"
if ! wait "$loser" && grep -q "changed on another node first" "$tmp/conflict"; then
    ok "n$cut's write, behind the other's, is refused: $(head -c 90 "$tmp/conflict")..."
else
    fail "n$cut's conflicting write: $(cat "$tmp/conflict")"
fi
agree() { [ "$(replicas_on 1)" = "$1" ] && [ "$(replicas_on 2)" = "$1" ] && [ "$(replicas_on 3)" = "$1" ]; }
wait_for 5 agree 4 && ok "every node has the write etcd took (replicas 4)" ||
    fail "replicas after the conflict: $(replicas_on 1) $(replicas_on 2) $(replicas_on 3)"
on "$cut" scale deploy/rep --replicas=2 >"$tmp/after" 2>&1 && wait_for 5 agree 2 &&
    ok "n$cut's next write goes through (replicas 2 everywhere)" ||
    fail "n$cut's next write: $(cat "$tmp/after"); $(replicas_on 1) $(replicas_on 2) $(replicas_on 3)"

# ---- a node gone for good: `tend delete node` and the leader removes its pods ----
on 1 scale deploy/fen --replicas=6 >/dev/null || fail "scale fen to 6"
wait_for 10 running_not_on 1 fen none 6 || { fail "fen: not 6 running"; pods_on 1 fen; grep -hE "fence|cut off|back in" "$tmp"/n*.log | tail -n 5; }
before=$(pods_on "$obs" fen | awk -v x="n$cut" '$2 == x' | wc -l)
[ "$before" -ge 1 ] || fail "no pod of fen on n$cut to begin with"
eval "gp=\$n${cut}_pid"
kill -KILL "$gp"
wait "$gp" 2>/dev/null
pids=$(for p in $pids; do [ "$p" != "$gp" ] && echo "$p"; done | paste -sd' ' -)
wait_for $((ttl + 3)) is_status "$obs" "n$cut" NotReady || fail "n$cut is not NotReady after its kill"
on "$obs" delete "node/n$cut" >"$tmp/delnode" 2>&1 || fail "delete node/n$cut: $(cat "$tmp/delnode")"
bound_to_gone() {
    curl -s --unix-socket "$tmp/n$obs.sock" http://localhost/api/v1/namespaces/default/pods |
        jq --arg n "n$cut" '[.items[] | select(.spec.nodeName == $n)] | length'
}
if wait_for 5 sh -c "[ \$(curl -s --unix-socket $tmp/n$obs.sock http://localhost/api/v1/namespaces/default/pods | jq '[.items[] | select(.spec.nodeName == \"n$cut\")] | length') = 0 ]"; then
    ok "node/n$cut deleted: its $before pod(s) removed, none bound to it any more"
else
    fail "pods still bound to the deleted node/n$cut: $(bound_to_gone)"
fi
etcdctl_get() { ETCDCTL_API=3 etcdctl --endpoints="$ETCD_ENDPOINTS" get --prefix --print-value-only "$1"; }
[ "$(etcdctl_get /tend/v1/pods/ | jq -s --arg n "n$cut" '[.[] | select(.spec.nodeName == $n)] | length')" = 0 ] &&
    ok "nor in etcd" || fail "etcd still has pods bound to n$cut"

stop_tendds $pids
pids=
fleet_verdict
