#!/bin/sh
# One declared state for the fleet (issue 17, docs/fleet.md §3.3–3.9), through a
# real 3-member etcd and three real tendd: a Deployment applied on one node
# is the fleet's; the leader alone makes its ReplicaSet and pods, each pod
# bound to a node at creation, spread over the nodes; each node runs the
# pods bound to it (its own children) and only those; every node shows
# every pod with its NODE; the apply is answered once etcd has it; a killed
# replica is restarted in place; scale and delete reach every node (and
# stop the processes where they run); a cordoned node gets no new pods; a
# rolling update across the nodes keeps its bounds; a node lost has its
# pods replaced on the others, and stops them when it comes back.
. "$(dirname "$0")/../cli/lib.sh"
. "$(dirname "$0")/etcd.sh"
. "$(dirname "$0")/lib.sh"

fleet_etcd

ttl=3
pids=
kport=$((16000 + $$ % 1000)) # n2's HTTPS listener, for kubectl (below the ephemeral ports)
node() { # K: tendd nK (n2 also on HTTPS, for kubectl)
    fleet_node "$1" "$ETCD_ENDPOINTS" --node-labels "zone=z$1" --node-lost-after 1s --resync 5s \
        --etcd-compaction-interval 5s \
        $([ "$1" = 2 ] && echo "--listen 127.0.0.1:$kport")
}
trap fleet_cleanup EXIT

deploy() { # NAME REPLICAS [VERSION]
    cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1}
spec:
  replicas: $2
  strategy: {rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}
  selector: {matchLabels: {app: $1}}
  template:
    metadata: {labels: {app: $1}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        command: ["$testprog", "sleep"]
        env: [{name: TEST_MARKER, value: "$tmp"}, {name: VERSION, value: "${3:-v1}"}]
        readinessProbe: {exec: {command: [/bin/true]}, periodSeconds: 1}
YAML
}

# pods_seen ON APP: "name node phase ready pid deleting" per pod of APP that node ON shows.
pods_seen() {
    curl -s --unix-socket "$tmp/n$1.sock" \
        "http://localhost/api/v1/namespaces/default/pods?labelSelector=app%3D$2" |
        jq -r '.items[] | .status.containerStatuses[0] as $c |
            [.metadata.name, (.spec.nodeName // "-"), .status.phase,
             ([.status.conditions[]? | select(.type == "Ready") | .status][0] // "-"),
             ($c.containerID // "-" | sub("process://"; "")),
             (if .metadata.deletionTimestamp then "deleting" else "-" end)] | join(" ")' | sort
}
# running ON APP N: node ON shows N pods of APP, each Running and Ready.
running() {
    [ "$(pods_seen "$1" "$2" | awk '$3 == "Running" && $4 == "True"' | wc -l)" -eq "$3" ] &&
        [ "$(pods_seen "$1" "$2" | wc -l)" -eq "$3" ]
}
# spread APP: "n1 n2 n3" counts of APP's pods per node, as n1 sees them.
spread() {
    pods_seen 1 "$1" >"$tmp/spread"
    for k in 1 2 3; do awk -v x="n$k" '$2 == x' "$tmp/spread" | wc -l; done | paste -sd' ' -
}
# children K APP: how many of APP's pods bound to nK have a process whose
# parent is nK's tendd.
children() {
    eval "cp=\$n${1}_pid"
    pods_seen 1 "$2" | awk -v x="n$1" '$2 == x { print $5 }' | while read -r pid; do
        [ "$(awk '{ print $4 }' "/proc/$pid/stat" 2>/dev/null)" = "$cp" ] && echo "$pid"
    done | wc -l
}

for k in 1 2 3; do node "$k"; done
wait_for 10 one_leads 1 || fail "nobody leads"
lead=$(leader_of 1)
echo "$lead leads"

# ---- apply on a node that does not lead: the fleet's ----
k_apply=1
[ "$lead" = n1 ] && k_apply=2
deploy web 6 | on "$k_apply" apply -f - >"$tmp/apply.out" 2>&1 || fail "apply on n$k_apply: $(cat "$tmp/apply.out")"
# answered once etcd has it: every node has the Deployment at once
for k in 1 2 3; do
    on "$k" get deployment web >/dev/null 2>&1 || wait_for 1 sh -c "TEND_SOCKET=$tmp/n$k.sock $bin/tend get deployment web" ||
        fail "n$k does not have deployment/web a second after the apply answered"
done
etcdctl_fleet() { ETCDCTL_API=3 etcdctl --endpoints="$ETCD_ENDPOINTS" "$@"; }
if [ "$(etcdctl_fleet get --keys-only /tend/v1/deployments/default/web | head -1)" = /tend/v1/deployments/default/web ]; then
    ok "the apply on n$k_apply was answered once etcd had the Deployment (its key is there)"
else
    fail "no key /tend/v1/deployments/default/web in etcd after the apply"
fi
# a create (POST) on a node that does not lead: answered once etcd has it,
# with the object as stored (the store's own text, held until then)
printf '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"solo"},"spec":{"replicas":0,"selector":{"matchLabels":{"app":"solo"}},"template":{"metadata":{"labels":{"app":"solo"}},"spec":{"containers":[{"name":"main","command":["%s","sleep"]}]}}}}' "$testprog" |
    curl -s -o "$tmp/solo.json" -w '%{http_code}' --unix-socket "$tmp/n$k_apply.sock" -H 'Content-Type: application/json' \
        --data-binary @- http://localhost/apis/apps/v1/namespaces/default/deployments >"$tmp/solo.code"
got=$(curl -s --unix-socket "$tmp/n$k_apply.sock" http://localhost/apis/apps/v1/namespaces/default/deployments/solo)
if [ "$(cat "$tmp/solo.code")" = 201 ] &&
    [ "$(jq -r '.metadata.uid + " " + .metadata.creationTimestamp + " " + .spec.template.spec.containers[0].name' "$tmp/solo.json")" = \
        "$(echo "$got" | jq -r '.metadata.uid + " " + .metadata.creationTimestamp + " " + .spec.template.spec.containers[0].name')" ] &&
    [ -n "$(jq -r '.metadata.uid // empty' "$tmp/solo.json")" ] &&
    # (the leader's controller may have written it since: a later version)
    [ "$(jq -r '.metadata.resourceVersion' "$tmp/solo.json")" -le "$(echo "$got" | jq -r '.metadata.resourceVersion')" ] &&
    [ "$(etcdctl_fleet get --keys-only /tend/v1/deployments/default/solo | head -1)" = /tend/v1/deployments/default/solo ]; then
    ok "a create on n$k_apply answered 201 with the object as stored, once etcd had it"
else
    fail "create on n$k_apply: $(cat "$tmp/solo.code") $(head -c 300 "$tmp/solo.json"); GET: $(echo "$got" | head -c 300)"
fi
on "$k_apply" delete deployment solo >/dev/null 2>&1 || fail "delete deployment/solo"

if wait_for 20 running 1 web 6 && wait_for 5 running 2 web 6 && wait_for 5 running 3 web 6; then
    ok "6 pods Running and Ready, the same on every node"
else
    fail "not 6 running pods everywhere: n1 $(pods_seen 1 web | wc -l), n2 $(pods_seen 2 web | wc -l), n3 $(pods_seen 3 web | wc -l)"
    pods_seen 1 web
fi
s=$(spread web)
[ "$s" = "2 2 2" ] && ok "spread over the nodes: $s" || fail "spread: $s (want 2 2 2)"
c1=$(children 1 web) c2=$(children 2 web) c3=$(children 3 web)
if [ "$c1" = 2 ] && [ "$c2" = 2 ] && [ "$c3" = 2 ]; then
    ok "each node runs the pods bound to it, as its own children ($c1 $c2 $c3)"
else
    fail "children of each tendd: $c1 $c2 $c3 (want 2 2 2)"
fi
on 3 get pods -o wide >"$tmp/wide"
if [ "$(awk 'NR > 1 && $1 ~ /^web-/ { print $9 }' "$tmp/wide" | sort | uniq -c | awk '{ print $1 }' | paste -sd' ' -)" = "2 2 2" ]; then
    ok "tend get pods -o wide on n3 shows every pod with its NODE"
else
    fail "get pods -o wide on n3:"; cat "$tmp/wide"
fi
rs=$(etcdctl_fleet get --prefix --keys-only /tend/v1/replicasets/ | grep -c web)
st=$(etcdctl_fleet get --prefix --keys-only /tend/v1/status/pods/ | grep -c web)
[ "$rs" = 1 ] && [ "$st" = 6 ] && ok "etcd: one ReplicaSet, a status key per pod" ||
    fail "etcd keys: $rs replicasets, $st pod statuses"

# ---- a killed replica is restarted in place, by its node ----
victim_line=$(pods_seen 1 web | awk -v x="$lead" '$2 != x { print; exit }')
victim=$(echo "$victim_line" | awk '{ print $5 }')
victim_pod=$(echo "$victim_line" | awk '{ print $1 }')
kill -KILL "$victim"
restarted() {
    curl -s --unix-socket "$tmp/n1.sock" "http://localhost/api/v1/namespaces/default/pods/$victim_pod" |
        jq -e --arg v "$victim" '.status.phase == "Running" and .status.containerStatuses[0].restartCount == 1 and
            (.status.containerStatuses[0].containerID | endswith("//" + $v) | not) and
            .status.containerStatuses[0].lastState.terminated.signal == 9' >/dev/null
}
if wait_for 10 restarted && wait_for 5 running 1 web 6; then
    ok "a killed replica (pid $victim) is restarted in place: pod $victim_pod, RESTARTS 1, lastState signal 9; 6 running"
else
    fail "after kill -9 of $victim:"; pods_seen 1 web
    curl -s --unix-socket "$tmp/n1.sock" "http://localhost/api/v1/namespaces/default/pods/$victim_pod" | jq .status
fi

# ---- events are the fleet's: each node shows what the leader and the others did ----
vnode=$(echo "$victim_line" | awk '{ print $2 }')
obs=$(for k in 1 2 3; do [ "n$k" != "$lead" ] && [ "n$k" != "$vnode" ] && echo "$k"; done | head -1)
# events OBSERVER NAME: "reason host count" of the events of object NAME that node OBSERVER shows.
events() {
    curl -s --unix-socket "$tmp/n$1.sock" "http://localhost/api/v1/namespaces/default/events" |
        jq -r --arg o "$2" '.items[] | select(.involvedObject.name == $o) |
            "\(.reason) \(.source.host) \(.count)"'
}
seen_events() {
    events "$obs" "$victim_pod" | grep -q "^Started $vnode [2-9]" &&
        events "$obs" "$victim_pod" | grep -q "^Scheduled $lead 1" &&
        events "$obs" web | grep -q "^ScalingReplicaSet $lead "
}
if wait_for 5 seen_events; then
    ok "n$obs shows the fleet's events: $victim_pod Scheduled by $lead, Started twice on $vnode (folded), web scaled by $lead"
else
    fail "events on n$obs: pod $victim_pod: $(events "$obs" "$victim_pod" | paste -sd, -); web: $(events "$obs" web | paste -sd, -)"
fi
on "$obs" describe "pod/$victim_pod" >"$tmp/describe" 2>&1
grep -q "Started.*tendd, $vnode .*(x2)" "$tmp/describe" && ok "describe on n$obs names the node an event came from" ||
    fail "describe pod/$victim_pod on n$obs: $(tail -5 "$tmp/describe")"
# in etcd on a lease of an hour, which forgets them as a store does
# (the lease ids as etcdctl prints them: jq's doubles would round them)
ETCDCTL_API=3 etcdctl --endpoints="$ETCD_ENDPOINTS" get --prefix /tend/v1/events/ -w json |
    grep -o '"lease":[0-9]*' | cut -d: -f2 | grep -v '^0$' >"$tmp/ev_leases"
ev_lease="$(wc -l <"$tmp/ev_leases") $(head -1 "$tmp/ev_leases")"
ev_ttl=$(ETCDCTL_API=3 etcdctl --endpoints="$ETCD_ENDPOINTS" lease timetolive \
    "$(printf '%x' "${ev_lease#* }")" -w json 2>/dev/null | grep -o '"granted-ttl":[0-9]*' | cut -d: -f2)
[ "${ev_lease% *}" -gt 0 ] && [ "$ev_ttl" = 3600 ] && ok "etcd holds ${ev_lease% *} events, on a lease of ${ev_ttl}s" ||
    fail "events in etcd: ${ev_lease% *} on a lease; its granted TTL $ev_ttl (want 3600)"

# ---- scale down, seen everywhere; the processes of the pods that went are gone ----
before_pids=$(pods_seen 1 web | awk '{ print $5 }')
on "$k_apply" scale deploy/web --replicas=3 >/dev/null || fail "scale to 3"
wait_for 15 running 3 web 3 && ok "scaled to 3: n3 shows 3" || { fail "scale to 3: n3 shows"; pods_seen 3 web; }
# shellcheck disable=SC2086
wait_for 5 sh -c "[ \$(for p in $(echo $before_pids); do kill -0 \$p 2>/dev/null && echo \$p; done | wc -l) = 3 ]" &&
    ok "3 of the 6 processes stopped, on whichever node they ran" ||
    fail "processes of web still live after the scale-down: $(for p in $before_pids; do kill -0 "$p" 2>/dev/null && echo "$p"; done | wc -l)"

# ---- a cordoned node gets no new pods ----
on 1 cordon n3 >/dev/null || fail "cordon n3"
wait_for 5 sh -c "TEND_SOCKET=$tmp/n$k_apply.sock $bin/tend get nodes | grep -q 'n3 .*SchedulingDisabled'" ||
    fail "n3 is not SchedulingDisabled"
before=$(pods_seen 1 web | awk '$2 == "n3"' | wc -l)
on 2 scale deploy/web --replicas=7 >/dev/null || fail "scale to 7"
wait_for 20 running 1 web 7 || { fail "scale to 7"; pods_seen 1 web; }
after=$(pods_seen 1 web | awk '$2 == "n3"' | wc -l)
[ "$after" = "$before" ] && ok "scaled to 7 with n3 cordoned: n3 still has $after, no new one" ||
    fail "n3 got new pods while cordoned: $before → $after"
on 1 uncordon n3 >/dev/null || fail "uncordon n3"

# ---- nodeSelector: only the nodes with those labels ----
deploy sel 3 | sed 's/^    spec:$/    spec:\n      nodeSelector: {zone: z3}/' | on 1 apply -f - >"$tmp/sel.out" 2>&1 ||
    fail "apply with a nodeSelector: $(cat "$tmp/sel.out")"
if wait_for 15 running 2 sel 3 && [ "$(pods_seen 2 sel | awk '$2 == "n3"' | wc -l)" = 3 ]; then
    ok "nodeSelector zone=z3: the 3 pods run on n3 alone"
else
    fail "nodeSelector zone=z3:"; pods_seen 2 sel
fi
on 1 delete deploy/sel >/dev/null || fail "delete sel"

# ---- a fixed containerPort is the node's: one such pod per node ----
deploy fixed 4 | sed 's/^        command:/        ports: [{name: http, containerPort: 18080}]\n        command:/' |
    on 2 apply -f - >"$tmp/fixed.out" 2>&1 || fail "apply with a fixed port: $(cat "$tmp/fixed.out")"
unschedulable() {
    curl -s --unix-socket "$tmp/n3.sock" "http://localhost/api/v1/namespaces/default/pods?labelSelector=app%3Dfixed" |
        jq -e '[.items[] | select(.spec.nodeName == null and .status.phase == "Pending" and
            ([.status.conditions[]? | select(.type == "PodScheduled" and .status == "False" and
              .reason == "Unschedulable" and (.message | contains("containerPort")))] | length) == 1)] | length == 1' >/dev/null
}
fixed_running() { [ "$(pods_seen 3 fixed | awk '$3 == "Running" && $4 == "True"' | wc -l)" = 3 ]; }
wait_for 15 fixed_running && wait_for 5 unschedulable
if [ "$(spread fixed)" = "1 1 1" ] && unschedulable; then
    ok "4 replicas on a fixed containerPort: one per node, the 4th Pending, Unschedulable, saying why"
else
    fail "fixed port: spread $(spread fixed); pods:"; pods_seen 3 fixed
fi
on 1 delete deploy/fixed >/dev/null || fail "delete fixed"

# ---- a rolling update across the nodes keeps its bounds (maxSurge 1, maxUnavailable 0) ----
etcd_leader_index() {
    ETCDCTL_API=3 etcdctl --endpoints="$ETCD_ENDPOINTS" endpoint status -w json 2>/dev/null |
        jq -r 'to_entries[] | select(.value.Status.leader == .value.Status.header.member_id) | .key' | head -1
}
# the etcd member that leads etcd goes as the rollout begins
ei=$(etcd_leader_index)
# shellcheck disable=SC2086
set -- $etcd_pids
eval "etcd_killed=\${$((ei + 1))}"
kill -KILL "$etcd_killed" 2>/dev/null
deploy web 7 v2 | on 3 apply -f - >/dev/null || fail "apply v2"
max_live=0 min_ready=99 round=0
for _ in $(seq 300); do
    round=$((round + 1))
    pods_seen 1 web >"$tmp/now"
    live=$(awk '$3 != "Failed" && $3 != "Succeeded"' "$tmp/now" | wc -l)
    ready=$(awk '$4 == "True"' "$tmp/now" | wc -l)
    [ "$live" -gt "$max_live" ] && max_live=$live
    [ "$ready" -lt "$min_ready" ] && min_ready=$ready
    on 1 rollout status deploy/web --timeout=1s >/dev/null 2>&1 && break
    sleep 0.1
done
if on 1 rollout status deploy/web --timeout=1s >/dev/null 2>&1; then
    ok "the rollout to v2 completed"
else
    fail "the rollout to v2 did not complete"; on 1 get rs
fi
[ "$max_live" -le 8 ] && ok "live pods stayed <= replicas + maxSurge (max seen $max_live)" ||
    fail "live pods reached $max_live > 8"
[ "$min_ready" -ge 7 ] && ok "ready pods stayed >= replicas - maxUnavailable (min seen $min_ready)" ||
    fail "ready pods fell to $min_ready < 7"
v2=$(curl -s --unix-socket "$tmp/n2.sock" "http://localhost/api/v1/namespaces/default/pods?labelSelector=app%3Dweb" |
    jq '[.items[] | select(.spec.containers[0].env[1].value == "v2" and .status.phase == "Running")] | length')
[ "$v2" = 7 ] && ok "n2 shows 7 v2 pods running" || fail "n2 shows $v2 v2 pods running"
[ -n "$etcd_killed" ] && ! kill -0 "$etcd_killed" 2>/dev/null &&
    ok "etcd's leading member was killed as the rollout began (pid $etcd_killed), and the rollout went on" ||
    fail "no etcd member was killed during the rollout"
restarts=$(curl -s --unix-socket "$tmp/n2.sock" "http://localhost/api/v1/namespaces/default/pods?labelSelector=app%3Dweb" |
    jq '[.items[].status.containerStatuses[0].restartCount] | add')
[ "$restarts" = 0 ] && ok "no pod restarted" || fail "$restarts restarts among the v2 pods"
on 1 rollout history deploy/web 2>&1 | grep -q '^2 ' && ok "history has revision 2" ||
    fail "rollout history: $(on 1 rollout history deploy/web 2>&1)"

# ---- kubectl, unchanged, against a node of the fleet ----
if command -v kubectl >/dev/null; then
    on 2 kubeconfig --server "https://127.0.0.1:$kport" >"$tmp/kubeconfig" || fail "tend kubeconfig"
    k() { KUBECONFIG="$tmp/kubeconfig" kubectl "$@"; }
    [ "$(k get pods -l app=web -o wide --no-headers | awk '{ print $9 }' | sort -u | wc -l)" = 3 ] &&
        ok "kubectl get pods -o wide on n2: the fleet's pods, on 3 nodes" ||
        fail "kubectl get pods -o wide: $(k get pods -l app=web -o wide 2>&1)"
    k rollout undo deploy/web >"$tmp/undo" 2>&1 && k rollout status deploy/web --timeout=60s >/dev/null &&
        [ "$(curl -s --unix-socket "$tmp/n3.sock" "http://localhost/api/v1/namespaces/default/pods?labelSelector=app%3Dweb" |
            jq '[.items[] | select(.spec.containers[0].env[1].value == "v1" and .status.phase == "Running" and .metadata.deletionTimestamp == null)] | length')" = 7 ] &&
        ok "kubectl rollout undo on n2: back to v1, 7 running, as n3 sees it" ||
        fail "kubectl rollout undo: $(cat "$tmp/undo")"
    # a ConfigMap is the fleet's too: made on n2, seen, changed and deleted
    # on the others, each change answered once etcd has it
    cm_on() { curl -s --unix-socket "$tmp/n$1.sock" "http://localhost/api/v1/namespaces/default/configmaps/$2"; }
    k create configmap fleet-config --from-literal=mode=blue >/dev/null 2>&1 &&
        [ "$(cm_on 1 fleet-config | jq -r .data.mode)" = blue ] && [ "$(cm_on 3 fleet-config | jq -r .data.mode)" = blue ] &&
        ok "a ConfigMap made on n2 (kubectl create configmap) is on n1 and n3 when kubectl has its answer" ||
        fail "fleet-config: n1 $(cm_on 1 fleet-config), n3 $(cm_on 3 fleet-config)"
    printf 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fleet-config}\ndata: {mode: green}\n' |
        on 3 apply -f - >/dev/null &&
        [ "$(cm_on 2 fleet-config | jq -r .data.mode)" = green ] &&
        ok "changed on n3 (tend apply), n2 has it when tend has its answer" ||
        fail "fleet-config on n2: $(cm_on 2 fleet-config)"
    on 1 delete cm fleet-config >/dev/null && ! k get cm fleet-config >/dev/null 2>&1 &&
        [ "$(cm_on 3 fleet-config | jq -r .code)" = 404 ] &&
        ok "deleted on n1: gone on n2 and n3" || fail "fleet-config after delete: $(cm_on 3 fleet-config)"
    # a Secret made on n2 is used by a pod that n1's apply places on n3
    k create secret generic fleet-db --from-literal=password=fleet-pw-31 >/dev/null 2>&1 ||
        fail "create secret on n2"
    cat <<YAML | on 1 apply -f - >/dev/null || fail "apply secret-user on n1"
apiVersion: apps/v1
kind: Deployment
metadata: {name: secret-user}
spec:
  replicas: 1
  selector: {matchLabels: {app: secret-user}}
  template:
    metadata: {labels: {app: secret-user}}
    spec:
      nodeSelector: {zone: z3}
      containers:
      - name: main
        command: ["$testprog", "sleep"]
        env:
        - {name: TEST_MARKER, value: "$tmp"}
        - {name: DB_PASSWORD, valueFrom: {secretKeyRef: {name: fleet-db, key: password}}}
YAML
    wait_for 20 running 3 secret-user 1
    spid=$(pods_seen 3 secret-user | awk '$2 == "n3" { print $5 }')
    [ -n "$spid" ] && tr '\0' '\n' <"/proc/$spid/environ" 2>/dev/null | grep -qx DB_PASSWORD=fleet-pw-31 &&
        ok "a Secret made on n2 is in the environment of a pod on n3" ||
        fail "secret-user: $(pods_seen 3 secret-user)"
    on 1 delete deploy secret-user >/dev/null
else
    echo "kubectl missing: its part skipped"
fi

# ---- a node lost: its pods replaced elsewhere; back, it stops them (replace) ----
# the node lost is the one that leads: another takes over, then evicts
lost=$(leader_of 1)
kl=${lost#n}
k_lead=$((kl % 3 + 1)) # a survivor, the observer
lost_pids=$(pods_seen "$k_lead" web | awk -v x="$lost" '$2 == x { print $5 }')
n_lost=$(echo "$lost_pids" | wc -w)
eval "old_pid=\$n${kl}_pid"
kill -KILL "$old_pid"
wait "$old_pid" 2>/dev/null
pids=$(for p in $pids; do [ "$p" != "$old_pid" ] && echo "$p"; done | paste -sd' ' -)
t0=$(date +%s.%N)
new_leader() { x=$(leader_of "$k_lead"); [ -n "$x" ] && [ "$x" != "$lost" ]; }
if wait_for $((ttl + 3)) new_leader; then
    ok "the leader $lost killed: $(leader_of "$k_lead") leads in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
else
    fail "nobody took over from $lost"
fi
# not on the lost node, not deleting, Running: 7 again
replaced() {
    [ "$(pods_seen "$k_lead" web | awk -v x="$lost" '$2 != x && $3 == "Running" && $6 == "-"' | wc -l)" -eq 7 ]
}
if wait_for 20 replaced; then
    ok "its $n_lost pod(s) replaced on the others in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s (TTL ${ttl}s, a new leader waits a TTL, lostAfter 1s)"
else
    fail "$lost's pods were not replaced:"; pods_seen "$k_lead" web
fi
# shellcheck disable=SC2086
[ "$(for p in $lost_pids; do kill -0 "$p" 2>/dev/null && echo "$p"; done | wc -l)" = "$n_lost" ] &&
    ok "cut off, $lost's processes still run (replace: duplicates until it is back)" ||
    fail "$lost's processes died with its tendd"
pods_seen "$k_lead" web | awk -v x="$lost" '$2 == x && $6 != "deleting"' | grep -q . &&
    fail "a pod of $lost is not marked deleted" || ok "the pods of $lost are marked deleted"
node "$kl"
# shellcheck disable=SC2086
if wait_for 15 sh -c "[ \$(for p in $(echo $lost_pids); do kill -0 \$p 2>/dev/null && echo \$p; done | wc -l) = 0 ]"; then
    ok "$lost back: it stopped the pods etcd no longer binds to it"
else
    fail "$lost back: its evicted processes still run"
fi
wait_for 10 sh -c "[ \$(curl -s --unix-socket $tmp/n$k_lead.sock 'http://localhost/api/v1/namespaces/default/pods?labelSelector=app%3Dweb' | jq '.items | length') = 7 ]" &&
    ok "and removed their keys: 7 pods in the fleet" || { fail "pods after $lost came back:"; pods_seen "$k_lead" web; }
running 1 web 7 && running 3 web 7 && ok "7 running, seen on every node" || fail "not 7 running everywhere"

# ---- every tendd restarted: the same processes everywhere ----
pods_seen 1 web | awk '{ print $1, $5 }' >"$tmp/before"
for k in 1 2 3; do
    eval "sp=\$n${k}_pid"
    kill -TERM "$sp"
    wait "$sp" || fail "tendd n$k exited non-zero on SIGTERM"
    pids=$(for p in $pids; do [ "$p" != "$sp" ] && echo "$p"; done | paste -sd' ' -)
done
for k in 1 2 3; do node "$k"; done
sleep 2
for k in 1 2 3; do pods_seen "$k" web | awk '{ print $1, $5 }' >"$tmp/after$k"; done
if cmp -s "$tmp/before" "$tmp/after1" && cmp -s "$tmp/before" "$tmp/after2" &&
    cmp -s "$tmp/before" "$tmp/after3" && running 1 web 7; then
    ok "every tendd restarted: the same 7 pods and pids on every node, all running"
else
    fail "after restarting every tendd:"; cat "$tmp/before"; echo "--"; cat "$tmp/after1"
fi

# ---- a flood of events: each node keeps as many as one host does, and a
# tendd still joins (a list reads the newest events only) ----
# (through a member that is up: one was killed during the rollout)
for ep in $(echo "$ETCD_ENDPOINTS" | tr , ' '); do curl -s -f -m 2 "$ep/health" >/dev/null && break; done
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
for b in $(seq 0 34); do # 2,100 events of 6 KB: 18 MB in a list, more than one answer may be
    jq -nc --argjson b "$b" --arg now "$now" '{success: [range($b * 60; $b * 60 + 60) | tostring as $i |
        {request_put: {key: ("/tend/v1/events/default/flood." + $i | @base64),
         value: ({apiVersion: "v1", kind: "Event", type: "Normal", reason: "Flood",
                  metadata: {namespace: "default", name: ("flood." + $i), creationTimestamp: $now},
                  involvedObject: {kind: "Pod", apiVersion: "v1", namespace: "default", name: "flood", uid: "u"},
                  message: ("x" * 6000), count: 1, firstTimestamp: $now, lastTimestamp: $now,
                  source: {component: "test", host: "elsewhere"}} | tojson | @base64)}}]}' |
        curl -s -f -o /dev/null -X POST --data-binary @- "$ep/v3/kv/txn" || { fail "writing the flood of events"; break; }
done
events_kept() { # K: the events node K keeps, if at most a store's 1000 and some of the flood
    curl -s --unix-socket "$tmp/n$1.sock" "http://localhost/api/v1/events" |
        jq -e '(.items | length) <= 1000 and ([.items[] | select(.reason == "Flood")] | length) > 0' >/dev/null
}
for k in 1 2 3; do
    wait_for 10 events_kept "$k" && ok "n$k watched 2,100 large events come and keeps at most 1000" ||
        fail "n$k keeps $(curl -s --unix-socket "$tmp/n$k.sock" http://localhost/api/v1/events | jq '.items | length') events"
done

joined=$(grep -c "joined as node/n2" "$tmp/n2.log")
eval "sp=\$n2_pid"
kill -TERM "$sp"
wait "$sp" || fail "tendd n2 exited non-zero on SIGTERM"
pids=$(for p in $pids; do [ "$p" != "$sp" ] && echo "$p"; done | paste -sd' ' -)
node 2
wait_for 10 sh -c "[ \$(grep -c 'joined as node/n2' $tmp/n2.log) -gt $joined ]" && events_kept 2 &&
    ok "n2 restarted while etcd holds 18 MB of events: it joins, having listed the newest only" ||
    fail "n2 after its restart: $(on 1 get nodes 2>&1 | grep n2); $(curl -s --unix-socket "$tmp/n2.sock" http://localhost/api/v1/events | jq '.items | length') events"

# ---- the leader compacts etcd's history (here every 5 s) ----
ETCDCTL_API=3 etcdctl --endpoints="$ETCD_ENDPOINTS" get /tend/v1/schema --rev=2 >"$tmp/old-rev" 2>&1
grep -q "required revision has been compacted" "$tmp/old-rev" &&
    ok "the leader compacted etcd's history: revision 2 is gone ($(ETCDCTL_API=3 etcdctl --endpoints="$ETCD_ENDPOINTS" endpoint status -w json 2>/dev/null | jq -r '.[0].Status.header.revision') now)" ||
    fail "etcd's history was not compacted: $(cat "$tmp/old-rev")"

# ---- delete: gone everywhere, processes stopped ----
on 2 delete deploy/web >/dev/null || fail "delete"
if wait_for 15 sh -c "[ \$(curl -s --unix-socket $tmp/n3.sock http://localhost/api/v1/namespaces/default/pods | jq '.items | length') = 0 ]"; then
    ok "deleted: no pod left on n3"
else
    fail "pods left after delete:"; pods_seen 3 web
fi
wait_for 5 sh -c "[ -z \"\$(etcdctl_fleet() { ETCDCTL_API=3 etcdctl --endpoints=$ETCD_ENDPOINTS \"\$@\"; }; etcdctl_fleet get --prefix --keys-only /tend/v1/pods/)\" ]" &&
    ok "no pod key left in etcd" || fail "pod keys left in etcd: $(etcdctl_fleet get --prefix --keys-only /tend/v1/pods/ | head -3)"

# a tendd's stop leaves no report
stop_tendds $pids
pids=
fleet_verdict
