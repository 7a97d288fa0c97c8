#!/bin/sh
# No acknowledged write is lost across the fleet (issue 29): clients
# through different nodes do read-modify-write on one Deployment (GET, +1,
# PUT with the resourceVersion read, again on 409), and the counter that
# etcd and every node end with equals the number of PUTs answered 200.
# Then unconditional writes (PUT without resourceVersion, forced
# server-side apply), of annotations and of the pod template: each answer
# says what etcd did (200: etcd held the value; 409: it never did).
# TEND_RMW_ROUNDS (default 40 per client) makes it longer: make fleet-rmw.
. "$(dirname "$0")/../cli/lib.sh"
. "$(dirname "$0")/etcd.sh"
. "$(dirname "$0")/lib.sh"

fleet_etcd
ttl=3
pids=
trap fleet_cleanup EXIT
for k in 1 2 3; do fleet_node "$k" "$ETCD_ENDPOINTS"; done
wait_for 10 one_leads 1 || fail "nobody leads"

cat >"$tmp/counter.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata:
  name: counter
  annotations:
    example.com/count: "0"
spec:
  replicas: 0
  selector:
    matchLabels: {app: counter}
  template:
    metadata:
      labels: {app: counter}
    spec:
      containers:
        - name: main
          command: ["$testprog", "sleep"]
YAML
on 1 apply -f "$tmp/counter.yaml" >/dev/null || fail "apply of the counter"
count_on() { on "$1" get deployment counter -o json | jq -r '.metadata.annotations["example.com/count"]'; }
wait_for 10 sh -c "[ \"\$(TEND_SOCKET=$tmp/n3.sock $bin/tend get deployment counter -o json 2>/dev/null | jq -r '.metadata.annotations[\"example.com/count\"]')\" = 0 ]" ||
    fail "the counter did not reach n3"

rounds=${TEND_RMW_ROUNDS:-40}
# one client through each node: the leader and both followers
/usr/bin/python3 "$(dirname "$0")/rmw.py" "$tmp/n1.sock" "$tmp/n2.sock" "$tmp/n3.sock" \
    --name counter --rounds "$rounds" >"$tmp/rmw.out" 2>&1
cat "$tmp/rmw.out"
acked=$(awk '$1 == "acked" { print $2 }' "$tmp/rmw.out")
in_etcd() {
    ETCDCTL_API=3 etcdctl --endpoints "$ETCD_ENDPOINTS" get --print-value-only \
        /tend/v1/deployments/default/counter | jq -r '.metadata.annotations["example.com/count"]'
}
settled() { [ "$(count_on 1)" = "$(count_on 2)" ] && [ "$(count_on 2)" = "$(count_on 3)" ]; }
wait_for 10 settled || fail "the nodes do not agree: $(count_on 1) $(count_on 2) $(count_on 3)"
final=$(count_on 1)
if [ -n "$acked" ] && [ "$acked" -gt 0 ] && [ "$final" = "$acked" ]; then
    ok "$acked increments acknowledged through three nodes; the counter is $final on every node"
else
    fail "$acked increments acknowledged, but the counter is $final (n1), $(count_on 2) (n2), $(count_on 3) (n3)"
fi
e=$(in_etcd)
[ "$e" = "$final" ] || fail "etcd's counter is $e, the nodes' $final"

# blind NODES WHAT WHY ARGS...: rmw.py's unconditional writes through
# nodes 1..NODES (--blind: each answer is checked against etcd's history),
# ok with its tally and WHAT, or fail WHY
url=${ETCD_ENDPOINTS%%,*}
blind() {
    nodes=$1 what=$2 why=$3
    shift 3
    set -- "$@" --name counter --rounds "$rounds" --blind "$url" /tend
    for j in $(seq "$nodes" -1 1); do set -- "$tmp/n$j.sock" "$@"; done
    if /usr/bin/python3 "$(dirname "$0")/rmw.py" "$@" >"$tmp/blind.out" 2>&1; then
        ok "$(tail -n 1 "$tmp/blind.out")${what:+ ($what)}"
    else
        cat "$tmp/blind.out"
        fail "$why"
    fi
}
# PUT without resourceVersion, forced server-side apply
blind 3 "" "an unconditional write's answer is not what etcd did" --tag a
# two clients per node writing the same value at once: the second changes
# nothing there, and is answered as the first (not 200 while the first's
# write is refused)
blind 3 "two clients per node, the same values" \
    "a write that changed nothing on its node was answered unlike the write it matched" \
    --same --tag s
# a List of two Deployments applied through one node (all or nothing)
# while another node writes one of them: a 409 means neither was written
blind 2 "a List through one node against writes through another" \
    "a List's answer is not what etcd did" --list --tag l
# ... and into the pod template: each write a rollout, the leader's
# controller writing the same Deployment meanwhile
blind 3 template "an unconditional write's answer (of the template) is not what etcd did" \
    --template --tag t

fleet_verdict
