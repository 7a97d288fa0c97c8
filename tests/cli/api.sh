#!/bin/sh
# The API as a client library reads it (issue 26), over the local socket
# with curl: a dry run of every write route changes nothing (the store's
# resourceVersion, the pods and their processes stay), query parameters
# are read as Kubernetes reads them and a bad one is a 400 naming it,
# lists page, field selectors say which fields they cannot select by, a
# collection is deleted in one request, events.k8s.io/v1, the reviews of
# auth can-i and whoami, namespaces, the kinds tend has none of, a watch
# wakes for a write sent with Connection: close, and a write whose object
# changes while it is made is made again (again.py).
. "$(dirname "$0")/lib.sh"

command -v jq >/dev/null || { echo "jq missing (make deps)"; exit 77; }
start_tendd

deploy() { # NAME REPLICAS [LABEL]
    cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1, labels: {group: ${3:-none}}}
spec:
  replicas: $2
  selector: {matchLabels: {app: $1}}
  template:
    metadata: {labels: {app: $1}, annotations: {tend.io/lease-ports: http}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        command: ["$testprog", "sleep"]
        env: [{name: TEST_MARKER, value: "$tmp"}]
        ports: [{name: metrics, containerPort: 45990}]
YAML
}

body() { jq -r "$1" "$tmp/body"; }
D=/apis/apps/v1/namespaces/default

deploy keep 2 dry >"$tmp/keep.yaml"
deploy also 1 dry >"$tmp/also.yaml"
tend apply -f "$tmp/keep.yaml" -f "$tmp/also.yaml" >/dev/null || fail "apply"
tend rollout status deploy/keep >/dev/null
# a second revision, for a rollback to go back to
sed 's/env: \[/env: [{name: V, value: "2"}, /' "$tmp/keep.yaml" >"$tmp/keep-v2.yaml"
grep -q 'name: V' "$tmp/keep-v2.yaml" || fail "keep-v2.yaml has no V"
tend apply -f "$tmp/keep-v2.yaml" >/dev/null || fail "apply keep v2"
settled() { [ "$(tend get pods -l 'app in (keep,also)' | awk 'NR > 1 && $2 == "1/1" && $3 == "Running"' | wc -l)" -eq 3 ]; }
wait_for 20 settled || fail "pods: $(tend get pods)"
tend rollout status deploy/keep >/dev/null
tend rollout status deploy/also >/dev/null

echo "== a dry run of every write route changes nothing"
# The store's resourceVersion (objects and events alike) and every pod's
# name and pid: what a write would change.
snapshot() {
    curl -s --unix-socket "$TEND_SOCKET" "http://localhost/api/v1/namespaces/default/pods" |
        jq -c '[.metadata.resourceVersion, ([.items[] | .metadata.name + "=" +
            .status.containerStatuses[0].containerID] | sort)]'
}
quiet() { a=$(snapshot); sleep 1; [ "$a" = "$(snapshot)" ]; }
wait_for 20 quiet || fail "the store does not settle: $(snapshot)"
before=$(snapshot)
pod=$(tend get pods -l app=keep -o name | head -1 | cut -d/ -f2)
rs=$(tend get rs -l app=keep -o name | head -1 | cut -d/ -f2)
rv=$(curl -s --unix-socket "$TEND_SOCKET" "http://localhost$D/deployments/keep" | jq -r .metadata.resourceVersion)
deploy fresh 1 >"$tmp/fresh.yaml"
sed 's/replicas: 2/replicas: 4/' "$tmp/keep-v2.yaml" >"$tmp/keep4.yaml"
J='-H Content-Type:application/json'
dry() { # DESCRIPTION CODE METHOD PATH [curl args...]
    what=$1 code=$2
    shift 2
    expect_api "$code" "dry run: $what" "$@" && ok "dry run: $what ($code)"
}
dry "create" 201 POST "$D/deployments?dryRun=All" -H 'Content-Type: application/yaml' \
    --data-binary @"$tmp/fresh.yaml"
curl -s --unix-socket "$TEND_SOCKET" "http://localhost$D/deployments/keep" |
    jq '.spec.replicas = 4 | .spec.template.spec.containers[0].env += [{"name": "X", "value": "1"}]' >"$tmp/put.json"
dry "replace" 200 PUT "$D/deployments/keep?dryRun=All" $J --data-binary @"$tmp/put.json"
[ "$(body .spec.replicas)" = 4 ] && ok "the replace answers the object as it would be" || fail "$(head -c 300 "$tmp/body")"
dry "merge patch" 200 PATCH "$D/deployments/keep?dryRun=All" -H 'Content-Type: application/merge-patch+json' \
    --data-binary '{"spec":{"replicas":5}}'
dry "strategic merge patch" 200 PATCH "$D/deployments/keep?dryRun=All" \
    -H 'Content-Type: application/strategic-merge-patch+json' \
    --data-binary '{"spec":{"template":{"spec":{"containers":[{"name":"main","env":[{"name":"Y","value":"2"}]}]}}}}'
dry "JSON patch" 200 PATCH "$D/deployments/keep?dryRun=All" -H 'Content-Type: application/json-patch+json' \
    --data-binary '[{"op":"replace","path":"/spec/replicas","value":6}]'
dry "server-side apply" 200 PATCH "$D/deployments/keep?dryRun=All&fieldManager=t&force=true" \
    -H 'Content-Type: application/apply-patch+yaml' --data-binary @"$tmp/keep4.yaml"
dry "server-side apply of a new one" 201 PATCH "$D/deployments/fresh?dryRun=All&fieldManager=t" \
    -H 'Content-Type: application/apply-patch+yaml' --data-binary @"$tmp/fresh.yaml"
dry "scale (merge patch)" 200 PATCH "$D/deployments/keep/scale?dryRun=All" \
    -H 'Content-Type: application/merge-patch+json' --data-binary '{"spec":{"replicas":7}}'
[ "$(body .spec.replicas)" = 7 ] && ok "the scale answers the count it would set" || fail "$(cat "$tmp/body")"
dry "scale (replace)" 200 PUT "$D/deployments/keep/scale?dryRun=All" $J \
    --data-binary "{\"apiVersion\":\"autoscaling/v1\",\"kind\":\"Scale\",\"metadata\":{\"name\":\"keep\",\"namespace\":\"default\",\"resourceVersion\":\"$rv\"},\"spec\":{\"replicas\":8}}"
dry "scale a ReplicaSet" 200 PATCH "$D/replicasets/$rs/scale?dryRun=All" \
    -H 'Content-Type: application/merge-patch+json' --data-binary '{"spec":{"replicas":9}}'
dry "rollback" 200 POST "$D/deployments/keep/rollback?dryRun=All" $J --data-binary '{}'
[ "$(body .details.revision)" = 1 ] && ok "the rollback answers the revision it would go to" ||
    fail "$(cat "$tmp/body")"
dry "delete (query)" 200 DELETE "$D/deployments/keep?dryRun=All"
dry "delete (DeleteOptions)" 200 DELETE "$D/deployments/keep" $J --data-binary '{"dryRun":["All"]}'
dry "delete in the foreground" 200 DELETE "$D/deployments/keep" $J \
    --data-binary '{"dryRun":["All"],"propagationPolicy":"Foreground"}'
[ -n "$(body '.metadata.deletionTimestamp // empty')" ] &&
    ok "a foreground delete answers the object with its deletionTimestamp" || fail "$(head -c 300 "$tmp/body")"
dry "delete a pod" 200 DELETE "/api/v1/namespaces/default/pods/$pod?dryRun=All"
[ "$(body .metadata.deletionGracePeriodSeconds)" = 1 ] &&
    ok "a pod's delete answers it as it would stop (its grace period)" || fail "$(head -c 300 "$tmp/body")"
dry "delete a ReplicaSet" 200 DELETE "$D/replicasets/$rs?dryRun=All"
dry "delete a collection of deployments" 200 DELETE "$D/deployments?labelSelector=group%3Ddry&dryRun=All"
[ "$(body '[.items[].metadata.name] | sort | join(",")')" = also,keep ] &&
    ok "it answers what it would delete" || fail "$(head -c 300 "$tmp/body")"
dry "delete a collection of pods" 200 DELETE "/api/v1/namespaces/default/pods?labelSelector=app%3Dkeep" \
    $J --data-binary '{"dryRun":["All"]}'
dry "delete a collection of ReplicaSets" 200 DELETE "$D/replicasets?dryRun=All"
dry "apply (tend's)" 200 POST "/apis/tend.io/v1/apply?dryRun=All" -H 'Content-Type: application/yaml' \
    --data-binary @"$tmp/keep4.yaml"
sleep 1
[ "$(snapshot)" = "$before" ] &&
    ok "after all of them: the same resourceVersion, the same pods and processes" ||
    fail "changed: $before -> $(snapshot)"
for p in $(echo "$before" | jq -r '.[1][]' | sed 's|.*process://||'); do
    kill -0 "$p" 2>/dev/null || fail "process $p is gone"
done
expect_api 200 "fresh was not created" GET "$D/deployments?fieldSelector=metadata.name%3Dfresh" &&
    [ "$(body '.items | length')" = 0 ] && ok "nothing was created" || fail "$(head -c 300 "$tmp/body")"
expect_api 422 "dryRun=Foo" DELETE "$D/deployments/keep?dryRun=Foo" &&
    grep -q 'dryRun: Unsupported value: \\"Foo\\": supported values: \\"All\\"' "$tmp/body" &&
    ok "dryRun=Foo: 422, naming it" || fail "$(cat "$tmp/body")"
expect_api 400 "dryRun in DeleteOptions not a list" DELETE "$D/deployments/keep" $J --data-binary '{"dryRun":"All"}' &&
    ok "DeleteOptions.dryRun must be a list: 400"
tend get deploy keep >/dev/null || fail "keep is gone after the refusals"

echo "== query parameters: booleans as Go's ParseBool, a bad value is a 400 naming it"
for v in true True TRUE t T 1; do
    api GET "/api/v1/namespaces/default/pods?watch=$v&timeoutSeconds=1" >"$tmp/code"
    grep -q '"type":"ADDED"' "$tmp/body" || fail "watch=$v is not a watch: $(head -c 200 "$tmp/body")"
done
ok "watch=true|True|TRUE|t|T|1 is a watch"
for v in false False FALSE f F 0; do
    api GET "/api/v1/namespaces/default/pods?watch=$v" >/dev/null
    [ "$(body .kind)" = PodList ] || fail "watch=$v: $(head -c 200 "$tmp/body")"
done
ok "watch=false|False|FALSE|f|F|0 is a list"
for q in watch=maybe follow=yes timestamps=on force=2 pretty=x; do
    name=${q%%=*}
    expect_api 400 "$q" GET "/api/v1/namespaces/default/pods?$q" &&
        body .message | grep -q "^$name: Invalid value" && ok "$q: 400 naming $name" ||
        fail "$q: $(cat "$tmp/body")"
done
for q in limit=abc timeoutSeconds=x tailLines=1.5 gracePeriodSeconds=soon resourceVersion=v1; do
    name=${q%%=*}
    expect_api 400 "$q" GET "/api/v1/namespaces/default/pods?$q" &&
        body .message | grep -q "^$name: Invalid value" && ok "$q: 400 naming $name" ||
        fail "$q: $(cat "$tmp/body")"
done
expect_api 422 "propagationPolicy=Sideways" DELETE "$D/deployments/keep?propagationPolicy=Sideways" &&
    ok "propagationPolicy=Sideways: 422"
expect_api 422 "orphanDependents=true" DELETE "$D/deployments/keep?orphanDependents=true" &&
    body .message | grep -q "Orphan is not supported" && ok "orphanDependents=true: refused as Orphan"
expect_api 200 "pretty=true" GET "$D/deployments/keep?pretty=true" &&
    [ "$(sed -n 2p "$tmp/body" | cut -c1-3)" = '  "' ] && ok "pretty=true indents" || fail "$(head -3 "$tmp/body")"

echo "== lists: limit and continue, field selectors, resourceVersionMatch"
expect_api 200 "limit=1" GET "$D/deployments?limit=1"
[ "$(body '.items | length')" = 1 ] && [ -n "$(body '.metadata.continue // empty')" ] &&
    [ "$(body .metadata.remainingItemCount)" = 1 ] && ok "limit=1: one item, a continue token, 1 left" ||
    fail "$(head -c 400 "$tmp/body")"
first=$(body '.items[0].metadata.name') first_rv=$(body .metadata.resourceVersion) token=$(body .metadata.continue)
expect_api 200 "continue" GET "$D/deployments?limit=1&continue=$token"
[ "$(body '.items[0].metadata.name')" != "$first" ] && [ -z "$(body '.metadata.continue // empty')" ] &&
    [ "$(body .metadata.resourceVersion)" = "$first_rv" ] &&
    ok "the next page: the other one, the first page's resourceVersion, no more" || fail "$(head -c 400 "$tmp/body")"
expect_api 400 "a continue token of nonsense" GET "$D/deployments?limit=1&continue=bm9uc2Vuc2U" &&
    ok "a bad continue token: 400"
expect_api 400 "a field selector on a field pods cannot be selected by" \
    GET "/api/v1/namespaces/default/pods?fieldSelector=spec.foo%3Dbar" &&
    [ "$(body .message)" = "field label not supported: spec.foo" ] && ok "pods: field label not supported" ||
    fail "$(cat "$tmp/body")"
expect_api 400 "deployments: status.replicas" GET "$D/deployments?fieldSelector=status.replicas%3D2" &&
    body .message | grep -q 'only "metadata.name", "metadata.namespace"' && ok "deployments: only name and namespace"
expect_api 200 "pods by status.phase" GET "/api/v1/namespaces/default/pods?fieldSelector=status.phase%3DRunning,metadata.namespace%3Ddefault" &&
    [ "$(body '.items | length')" = 3 ] && ok "status.phase=Running: the 3 pods" || fail "$(body '[.items[].metadata.name]')"
expect_api 200 "pods by spec.hostNetwork (a boolean)" GET "/api/v1/namespaces/default/pods?fieldSelector=spec.hostNetwork%3Dfalse" &&
    [ "$(body '.items | length')" = 3 ] && ok "a boolean field compares as its text"
now_rv=$(curl -s --unix-socket "$TEND_SOCKET" "http://localhost$D/deployments" | jq -r .metadata.resourceVersion)
expect_api 410 "resourceVersionMatch=Exact, an old version" \
    GET "$D/deployments?resourceVersion=1&resourceVersionMatch=Exact" && ok "Exact on an old version: 410"
expect_api 200 "resourceVersionMatch=Exact, the newest" \
    GET "$D/deployments?resourceVersion=$now_rv&resourceVersionMatch=Exact" && ok "Exact on the newest: 200"

expect_api 405 "server-side apply of a pod" PATCH "/api/v1/namespaces/default/pods/$pod?fieldManager=t" \
    -H 'Content-Type: application/apply-patch+yaml' --data-binary '{"apiVersion":"v1","kind":"Pod"}' &&
    body .message | grep -q "server-side apply of pods is refused: tendd makes them from Deployments" &&
    ok "server-side apply of a pod or a ReplicaSet: refused, saying why"

echo "== deletecollection"
deploy gone 2 coll >"$tmp/gone.yaml"
tend apply -f "$tmp/gone.yaml" >/dev/null
two_gone() { [ "$(tend get pods -l app=gone | awk 'NR > 1 && $3 == "Running"' | wc -l)" -eq 2 ]; }
wait_for 20 two_gone || fail "gone's pods: $(tend get pods -l app=gone)"
expect_api 200 "DELETE a collection of deployments" DELETE "$D/deployments?labelSelector=group%3Dcoll" &&
    [ "$(body .kind)" = DeploymentList ] && [ "$(body '[.items[].metadata.name] | join(",")')" = gone ] &&
    ok "the DeploymentList of what went" || fail "$(head -c 300 "$tmp/body")"
nothing_of_gone() { ! tend get deploy gone >/dev/null 2>&1 && [ "$(tend get pods -l app=gone | wc -l)" -le 1 ]; }
wait_for 20 nothing_of_gone && ok "gone and its pods are gone; keep and also stay" || fail "$(tend get pods)"
tend get deploy keep >/dev/null && tend get deploy also >/dev/null || fail "others went too"
expect_api 405 "DELETE events" DELETE "/api/v1/namespaces/default/events" && ok "events are not deleted by hand"

echo "== events.k8s.io/v1, reviews, namespaces, kinds tend has none of"
expect_api 200 "events.k8s.io/v1 events" GET "/apis/events.k8s.io/v1/namespaces/default/events"
body '.items[0] | [.apiVersion, (.eventTime | test("^20[0-9-]*T[0-9:]*\\.[0-9]{6}Z$")), (.regarding.kind != null), (.note != null)] | @csv' |
    grep -qx '"events.k8s.io/v1",true,true,true' && ok "events in that group's shape, with a MicroTime eventTime" ||
    fail "$(body '.items[0]')"
expect_api 200 "events.k8s.io by regarding.name" \
    GET "/apis/events.k8s.io/v1/namespaces/default/events?fieldSelector=regarding.name%3Dkeep" &&
    [ "$(body '[.items[].regarding.name] | unique | join(",")')" = keep ] && ok "selected by regarding.name"
expect_api 201 "SelfSubjectAccessReview" POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews $J \
    --data-binary '{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","spec":{"resourceAttributes":{"verb":"create","resource":"deployments","group":"apps"}}}' &&
    [ "$(body .status.allowed)" = true ] && [ "$(body .spec.resourceAttributes.verb)" = create ] &&
    ok "can-i: allowed, the question answered back" || fail "$(cat "$tmp/body")"
expect_api 201 "SelfSubjectReview" POST /apis/authentication.k8s.io/v1/selfsubjectreviews $J --data-binary '{}' &&
    [ "$(body .status.userInfo.uid)" = "$(id -u)" ] && ok "whoami: the socket's peer ($(body .status.userInfo.username))" ||
    fail "$(cat "$tmp/body")"
expect_api 200 "namespaces" GET /api/v1/namespaces && [ "$(body '[.items[].metadata.name] | join(",")')" = default ] &&
    ok "namespaces: default" || fail "$(body '[.items[].metadata.name]')"
expect_api 404 "a namespace with nothing in it" GET /api/v1/namespaces/nothing-here && ok "an empty namespace: 404"
expect_api 200 "services" GET /api/v1/namespaces/default/services && [ "$(body .kind)" = ServiceList ] &&
    [ "$(body '.items | length')" = 0 ] && ok "services: an empty ServiceList"
expect_api 405 "create a Job" POST /apis/batch/v1/namespaces/default/jobs $J --data-binary '{}' &&
    body .message | grep -q "tend has no Jobs yet" && ok "a Job: refused, saying why"
expect_api 200 "discovery: batch/v1" GET /apis/batch/v1 && [ "$(body '[.resources[].name] | join(",")')" = jobs,cronjobs ] &&
    ok "discovery lists Jobs and CronJobs (empty, for kubectl apply --prune)"

echo "== a watch wakes for a write sent with Connection: close"
rv=$(curl -s --unix-socket "$TEND_SOCKET" "http://localhost$D/deployments" | jq -r .metadata.resourceVersion)
curl -s -N --unix-socket "$TEND_SOCKET" "http://localhost$D/deployments?watch=true&resourceVersion=$rv&timeoutSeconds=10" \
    >"$tmp/watch" &
watcher=$!
sleep 0.5
curl -s --unix-socket "$TEND_SOCKET" -H 'Connection: close' -X PATCH \
    -H 'Content-Type: application/merge-patch+json' --data-binary '{"metadata":{"labels":{"touched":"yes"}}}' \
    "http://localhost$D/deployments/also" >/dev/null
seen() { grep -q '"touched":"yes"' "$tmp/watch"; }
wait_for 3 seen && ok "the watch saw it at once" || fail "the watch saw: $(cat "$tmp/watch")"
kill "$watcher" 2>/dev/null
wait "$watcher" 2>/dev/null

echo "== the watch history is bounded by bytes, not only by count"
# Fifty changes of a deployment that carries a 200 KB annotation are
# 10 MB; the API keeps at most 8 MiB of them, and a watch that resumes
# from before what it kept is told 410 Gone.
rv=$(curl -s --unix-socket "$TEND_SOCKET" "http://localhost$D/deployments" | jq -r .metadata.resourceVersion)
big=$(head -c 150000 /dev/urandom | base64 -w0 | head -c 200000)
for i in $(seq 1 50); do
    printf '{"metadata":{"annotations":{"example.com/big":"%s-%s"}}}' "$i" "$big" >"$tmp/big.json"
    code=$(curl -s -o /dev/null -w '%{http_code}' --unix-socket "$TEND_SOCKET" -X PATCH \
        -H 'Content-Type: application/merge-patch+json' --data-binary @"$tmp/big.json" \
        "http://localhost$D/deployments/also")
    [ "$code" = 200 ] || fail "PATCH $i: $code"
done
metric() { curl -s --unix-socket "$TEND_SOCKET" http://localhost/metrics | awk -v m="$1" '$1 == m { print $2 }'; }
bytes=$(metric tend_api_watch_history_bytes)
changes=$(metric tend_api_watch_history_changes)
[ -n "$bytes" ] && [ "$bytes" -le 8388608 ] && [ "$bytes" -gt 4000000 ] &&
    ok "history: $bytes bytes in $changes changes" || fail "history: '$bytes' bytes in '$changes' changes"
[ "$changes" -lt 50 ] || fail "history kept all $changes changes"
curl -s -N --max-time 5 --unix-socket "$TEND_SOCKET" \
    "http://localhost$D/deployments?watch=true&resourceVersion=$rv&timeoutSeconds=2" >"$tmp/watch"
jq -e 'select(.type == "ERROR") | .object.code == 410' "$tmp/watch" >/dev/null &&
    ok "a watch from before it: 410" || fail "a watch from rv $rv: $(head -c 300 "$tmp/watch")"

# A write is made off the loop against a copy of the object (api/prep.c):
# one whose object changed meanwhile is made again, or given the new status.
/usr/bin/python3 "$(dirname "$0")/again.py" "$TEND_SOCKET" "$testprog" ||
    fail "a write whose object changed while it was made (above)"

finish
