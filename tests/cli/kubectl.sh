#!/bin/sh
# Stock kubectl against a real tendd, as a user points it there: HTTPS on
# --listen, a kubeconfig from `tend kubeconfig`, and kubectl's daily verbs,
# with their output asserted. Skipped (never failed) where kubectl is not
# on the PATH.
. "$(dirname "$0")/lib.sh"

command -v kubectl >/dev/null || {
    echo "kubectl is not on the PATH: install kubectl (1.30 or later) to run this test"
    exit 77
}
command -v jq >/dev/null || { echo "jq missing (make deps)"; exit 77; }

port=29610 # outside the leased range (lib.sh: 44000-44999), which other tests use meanwhile, and
# below the ephemeral range (32768-60999), where a connection of a test running meanwhile may
# hold the port (python.sh and js.sh once found theirs taken)
start_tendd --listen "127.0.0.1:$port"
tend kubeconfig >"$tmp/kubeconfig" || { fail "tend kubeconfig"; finish; }
export KUBECONFIG="$tmp/kubeconfig"
k() { kubectl --request-timeout=20s "$@"; }

cat >"$tmp/stub.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: stub}
spec:
  replicas: 2
  selector: {matchLabels: {app: stub}}
  template:
    metadata: {labels: {app: stub}}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: main
        command: ["$testprog", "ignore-term"]
        env: [{name: TEST_MARKER, value: "$tmp"}, {name: KEEP, value: "me"}]
YAML
running() { [ "$(k get pods -l app=stub -o json |
    jq '[.items[] | select(.status.phase == "Running")] | length')" -eq "$1" ]; }

echo "== getting in: the kubeconfig, the version"
expect_exit 0 "kubectl version" k version
expect_grep "Server Version: v1.32" "$tmp/out" "the Kubernetes API level tend follows"
! grep -q "version difference" "$tmp/err" && ok "no version skew warning" || fail "$(cat "$tmp/err")"
expect_exit 0 "kubectl get pods" k get pods
expect_grep "No resources found" "$tmp/err" "an empty namespace"
expect_exit 1 "a wrong token" k --token=not-the-token-of-this-tendd get pods
expect_grep "You must be logged in" "$tmp/err" "refused without the token"

echo "== create, apply, diff: validated by the server, no --validate=false"
sed 's/replicas: 2/replcas: 2/' "$tmp/stub.yaml" >"$tmp/typo.yaml"
expect_exit 1 "a typo" k create -f "$tmp/typo.yaml"
expect_grep 'spec.replcas: Unknown field (did you mean "replicas"?)' "$tmp/err" "the server names the typo"
! grep -q "failed to download openapi" "$tmp/err" && ok "kubectl validates through the server" ||
    fail "$(cat "$tmp/err")"
sed 's/name: stub}/name: typo}/; s/app: stub/app: typo/g' "$tmp/typo.yaml" >"$tmp/typo2.yaml"
expect_exit 0 "create --validate=warn" k create --validate=warn -f "$tmp/typo2.yaml"
expect_grep 'Warning: unknown field "spec.replcas"' "$tmp/err" "Warn: the unknown field is named"
expect_exit 0 "delete it" k delete deploy typo --wait=false
expect_exit 0 "create --validate=false" k create --validate=false -f "$tmp/typo2.yaml"
! grep -q "Warning" "$tmp/err" && ok "Ignore: left out without a word" || fail "$(cat "$tmp/err")"
expect_exit 0 "delete it" k delete deploy typo --wait=false
sed 's/command: \[/image: nginx\n        command: [/' "$tmp/typo2.yaml" >"$tmp/image.yaml"
expect_exit 1 "--validate=false and an image" k create --validate=false -f "$tmp/image.yaml"
expect_grep "image: Forbidden: not supported by tend" "$tmp/err" "a field tend refuses is refused whatever the validation"
expect_exit 0 "kubectl create" k create -f "$tmp/stub.yaml"
wait_for 10 running 2 && ok "2 pods run" || fail "pods: $(k get pods 2>&1)"
sed 's/value: "me"/value: "you"/' "$tmp/stub.yaml" >"$tmp/stub2.yaml"
expect_exit 1 "kubectl diff" k diff -f "$tmp/stub2.yaml"
expect_grep '^+ *value: you' "$tmp/out" "diff shows the changed env value"
expect_exit 0 "kubectl apply of a container change" k apply -f "$tmp/stub2.yaml"
env_now() { k get deploy stub -o jsonpath='{.spec.template.spec.containers[0].env[1].value}'; }
[ "$(env_now)" = you ] && ok "apply changed the container's env" || fail "env: $(env_now)"
expect_exit 0 "kubectl diff, nothing to change" k diff -f "$tmp/stub2.yaml"
expect_exit 0 "rollout status" k rollout status deploy/stub --timeout=60s

echo "== strategic merge: patch, set env, apply, edit change what they say"
envs() { k get deploy stub -o json | jq -c '[.spec.template.spec.containers[0].env[] | [.name, .value]]'; }
expect_exit 0 "patch (strategic) of the command" k patch deploy stub -p \
    "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":\"main\",\"command\":[\"$testprog\",\"sleep\"]}]}}}}"
[ "$(envs)" = '[["TEST_MARKER","'"$tmp"'"],["KEEP","you"]]' ] &&
    ok "a strategic patch of the command keeps env" || fail "env after the patch: $(envs)"
expect_exit 0 "set env" k set env deploy/stub COLOR=purple KEEP=again
[ "$(envs)" = '[["TEST_MARKER","'"$tmp"'"],["KEEP","again"],["COLOR","purple"]]' ] &&
    ok "set env changes one, adds one, keeps the rest" || fail "env after set env: $(envs)"
expect_exit 0 "set env NAME-" k set env deploy/stub COLOR-
[ "$(envs)" = '[["TEST_MARKER","'"$tmp"'"],["KEEP","again"]]' ] && ok "set env COLOR- takes it out" ||
    fail "env after COLOR-: $(envs)"
# apply of a file without KEEP: kubectl's three-way patch deletes it by name
sed 's/, {name: KEEP, value: "you"}//' "$tmp/stub2.yaml" >"$tmp/stub3.yaml"
expect_exit 0 "apply without KEEP" k apply -f "$tmp/stub3.yaml"
[ "$(envs)" = '[["TEST_MARKER","'"$tmp"'"]]' ] && ok "apply took out the env var the file dropped" ||
    fail "env after apply: $(envs)"
printf '#!/bin/sh\nsed -i "s/^\\( *\\)- ignore-term$/\\1- sleep/" "$1"\n' >"$tmp/editor"
chmod +x "$tmp/editor"
cmd1() { k get deploy stub -o jsonpath='{.spec.template.spec.containers[0].command[1]}'; }
[ "$(cmd1)" = ignore-term ] || fail "the command before edit: $(cmd1)"
expect_exit 0 "edit of the command" env EDITOR="$tmp/editor" kubectl edit deploy/stub
[ "$(cmd1)" = sleep ] && ok "kubectl edit changed the container's command" ||
    fail "command after edit: $(cmd1); $(cat "$tmp/err")"
[ "$(envs)" = '[["TEST_MARKER","'"$tmp"'"]]' ] && ok "and kept its env" || fail "env after edit: $(envs)"
expect_exit 0 "apply back (pods that ignore SIGTERM, for delete below)" k apply -f "$tmp/stub3.yaml"
expect_exit 0 "rollout status" k rollout status deploy/stub --timeout=60s

echo "== tables: kubectl's columns, the same as tend's"
expect_exit 0 "get deploy" k get deploy stub
expect_grep "^NAME  *READY  *UP-TO-DATE  *AVAILABLE  *AGE" "$tmp/out" "deployment columns"
expect_grep "^stub  *2/2  *2  *2  *[0-9]" "$tmp/out" "the deployment's row"
expect_exit 0 "get pods -o wide" k get pods -l app=stub -o wide
expect_grep "^NAME  *READY  *STATUS  *RESTARTS  *AGE  *PID  *PORTS  *REVISION  *NODE" "$tmp/out" \
    "pod columns, wide ones included"
expect_grep "^stub-[a-z0-9-]*  *1/1  *Running  *0  *[0-9a-z]*  *[0-9][0-9]*  *<none>  *[0-9][0-9]*  *[a-z]" "$tmp/out" \
    "a pod's row: ready, running, its pid and revision"
[ "$(k get pods -o wide | head -1 | tr -s ' ')" = "$(tend get pods -o wide | head -1 | tr -s ' ')" ] &&
    ok "kubectl and tend print the same columns" || fail "columns differ"
expect_exit 0 "get rs -A" k get rs -A
expect_grep "^NAMESPACE  *NAME  *DESIRED  *CURRENT  *READY  *AGE" "$tmp/out" "-A adds NAMESPACE"
k get pods -l app=stub -w >"$tmp/watch" 2>&1 &
watcher=$!
sleep 1
k delete "$(k get pods -l app=stub -o name | head -1)" --wait=false >/dev/null
wait_for 10 grep -q Terminating "$tmp/watch" && ok "get -w shows the pod terminating" ||
    fail "watch: $(cat "$tmp/watch")"
kill "$watcher" 2>/dev/null
wait "$watcher" 2>/dev/null

echo "== top: metrics.k8s.io from the pod's cgroup, or /proc"
# (the pod deleted above stops within its 2 s grace, then its replacement
# starts: two pods again, both running)
two_running() { k get pods -l app=stub -o json | jq -e '(.items | length) == 2 and
    ([.items[] | select(.status.phase == "Running" and .metadata.deletionTimestamp == null)] | length) == 2' >/dev/null; }
wait_for 15 two_running || fail "not two running pods: $(k get pods -l app=stub)"
expect_exit 0 "top pods" k top pods -l app=stub
expect_grep "^NAME  *CPU(cores)  *MEMORY(bytes)" "$tmp/out" "kubectl top's columns"
[ "$(grep -c '^stub-.*  *[0-9][0-9]*m  *[0-9][0-9]*Mi' "$tmp/out")" -eq 2 ] &&
    ok "CPU and memory of both pods" || fail "top: $(cat "$tmp/out")"
pod=$(awk '/^stub-/ { print $1; exit }' "$tmp/out")
rss=$(k get --raw "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/$pod" |
    jq -r '.containers[0].usage.memory' | sed 's/Ki$//')
pid=$(k get pod "$pod" -o jsonpath='{.status.containerStatuses[0].containerID}' | sed 's|process://||')
uid=$(k get pod "$pod" -o jsonpath='{.metadata.uid}')
# In a cgroup of its own (tendd as root, docs/cgroups.md): its working set,
# as the kubelet counts it (pages a library's other users brought in are
# theirs); else the process's resident set.
cg=$(awk -F: -v u="$uid" '($2 == "memory" || $1 == "0") && $3 ~ "/" u "$" { print $3; exit }' "/proc/$pid/cgroup")
if [ -n "$cg" ] && [ -f "/sys/fs/cgroup/memory$cg/memory.usage_in_bytes" ]; then
    d="/sys/fs/cgroup/memory$cg"
    want=$((($(cat "$d/memory.usage_in_bytes") - $(awk '$1 == "total_inactive_file" { print $2 }' "$d/memory.stat")) / 1024))
    what="its cgroup's working set"
elif [ -n "$cg" ] && [ -f "/sys/fs/cgroup$cg/memory.current" ]; then
    d="/sys/fs/cgroup$cg"
    want=$((($(cat "$d/memory.current") - $(awk '$1 == "inactive_file" { print $2 }' "$d/memory.stat")) / 1024))
    what="its cgroup's working set"
else
    want=$(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status")
    what="the process's resident set"
fi
[ "$rss" -gt 0 ] && [ "$rss" -le $((want * 2)) ] && [ "$rss" -ge $((want / 2)) ] &&
    ok "the memory is $what ($rss Ki; $want kB read there)" ||
    fail "memory $rss Ki, $what $want kB"

expect_exit 0 "get nodes" k get nodes
host=$(hostname)
expect_grep "^$host  *Ready  *<none>  *[0-9a-z]*  *v" "$tmp/out" "this host is the one Node, Ready"
expect_exit 0 "top node" k top node
expect_grep "^$host  *[0-9][0-9]*m  *[0-9][0-9]*%  *[0-9][0-9]*Mi  *[0-9][0-9]*%" "$tmp/out" \
    "the host's CPU and memory, with percentages of its capacity"
expect_exit 0 "describe node" k describe node "$host"
expect_grep "^  cpu: *$(nproc)$" "$tmp/out" "its capacity: the CPUs"
expect_grep "^  HolderIdentity: *$host$" "$tmp/out" "its Lease, held by itself"
! grep -qi "failed to get lease" "$tmp/out" && ok "no lease lookup error" || fail "$(grep -i lease "$tmp/out")"
expect_exit 1 "another node" k get node not-this-host
expect_grep "this tendd's node is its host" "$tmp/err" "another name is NotFound, with the reason"

echo "== /openapi/v2: the same schemas as Swagger 2.0 JSON"
expect_exit 0 "get --raw /openapi/v2" k get --raw /openapi/v2
jq -e '.swagger == "2.0" and (.definitions | length) > 10 and
    ([.. | .["$ref"]? | select(. != null) | select(startswith("#/definitions/") | not)] | length) == 0 and
    (.paths["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"].patch.consumes |
        index("application/apply-patch+yaml")) != null and
    ([.paths[][] | .parameters[]? | select(.in == "body")] | length) > 0' "$tmp/out" >/dev/null &&
    ok "definitions, references to them, body parameters, apply among the patch types" ||
    fail "$(head -c 600 "$tmp/out")"
[ "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$state/tls/ca.crt" \
    -H "Authorization: Bearer $(cat "$state/tls/token")" \
    -H 'Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf' \
    "https://127.0.0.1:$port/openapi/v2")" = 406 ] && ok "protobuf asked for: 406, not JSON in its place" ||
    fail "protobuf accept not refused"

echo "== explain"
expect_exit 0 "explain deployment.spec.replicas" k explain deployment.spec.replicas
expect_grep "FIELD: replicas <integer>" "$tmp/out" "explain names the field and its type"
expect_exit 0 "explain pod.spec.containers" k explain pods.spec.containers
expect_grep "command.*<\[\]string>" "$tmp/out" "explain lists a container's fields"
! grep -q "^  image\b" "$tmp/out" && ok "what tend refuses is not offered" || fail "image is listed"
expect_exit 0 "explain a container's command" k explain deployment.spec.template.spec.containers.command
expect_grep "run directly: no image" "$tmp/out" "explain says what tend does with it"

echo "== a leased port, v1 then v2 by kubectl apply"
web="$TEND_SOURCE_DIR/examples"
for v in 1 2; do
    sed "s|build/bin/tend-example-web|$bin/tend-example-web|" "$web/web-v$v.yaml" >"$tmp/web-v$v.yaml"
done
expect_exit 0 "apply web-v1" k apply -f "$tmp/web-v1.yaml"
expect_exit 0 "web-v1 rolls out" k rollout status deploy/web --timeout=60s
expect_exit 0 "apply web-v2 over it" k apply -f "$tmp/web-v2.yaml"
expect_exit 0 "web-v2 rolls out" k rollout status deploy/web --timeout=60s
k get pods -l app=web -o json | jq -e '[.items[] | select(.status.phase == "Running" and .metadata.deletionTimestamp == null) |
    .metadata.annotations["tend.io/ports"] | test("^http=[0-9]+$")] | length == 3 and all' \
    >/dev/null && ok "3 pods of v2, each with its leased port" || fail "$(k get pods -l app=web -o wide)"
# A leased port is tend.io/lease-ports on the template: the manifest is
# valid Kubernetes, and kubectl edit (which merges ports by containerPort
# in its compiled-in types) works on it.
k get deploy web -o json | jq -e '.spec.template.metadata.annotations["tend.io/lease-ports"] == "http" and
    (.spec.template.spec.containers[0].ports // [] | all(has("containerPort")))' >/dev/null &&
    ok "the leased port is an annotation; every port has its containerPort" ||
    fail "$(k get deploy web -o json | jq -c '.spec.template')"
printf '#!/bin/sh\nsed -i "s/--drain=1/--drain=2/" "$1"\n' >"$tmp/edit-drain"
chmod +x "$tmp/edit-drain"
expect_exit 0 "kubectl edit of a deployment with a leased port" env EDITOR="$tmp/edit-drain" kubectl edit deploy/web
k get deploy web -o jsonpath='{.spec.template.spec.containers[0].command}' | grep -q -- '--drain=2' &&
    ok "edit changed its command" || fail "after edit: $(k get deploy web -o jsonpath='{.spec.template.spec.containers[0].command}') $(cat "$tmp/err")"
expect_exit 0 "the edit rolls out" k rollout status deploy/web --timeout=60s
printf '#!/bin/sh\nsed -i "s/--drain=2/--drain=1/" "$1"\n' >"$tmp/edit-drain"
expect_exit 0 "and back" env EDITOR="$tmp/edit-drain" kubectl edit deploy/web
expect_exit 0 "which rolls out" k rollout status deploy/web --timeout=60s
# both rollouts completed: each ReplicaSet carries the controller's own
# annotations, which kubectl's undo copies onto the Deployment
expect_exit 0 "rollout undo after completed rollouts" k rollout undo deploy/web --to-revision=1
expect_exit 0 "the undo rolls out" k rollout status deploy/web --timeout=60s
k get deploy web -o json | jq -e '(.spec.template.spec.containers[0].command | index("--version=v1")) and
    .metadata.annotations["deployment.kubernetes.io/revision"] == "5" and
    (.metadata.annotations | has("tend.io/complete") | not)' >/dev/null &&
    ok "undo: back to v1 as revision 5, no ReplicaSet-only annotation on the Deployment" ||
    fail "after undo: $(k get deploy web -o json | jq -c '.metadata.annotations')"
expect_exit 0 "delete web" k delete deploy web

echo "== server-side apply: managers, conflicts, --force-conflicts, pruning"
cat >"$tmp/ssa.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: ssa, labels: {team: a}}
spec:
  replicas: 2
  selector: {matchLabels: {app: ssa}}
  template:
    metadata: {labels: {app: ssa}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        command: ["$testprog", "sleep"]
        env:
        - {name: TEST_MARKER, value: "$tmp"}
        - {name: B, value: "2"}
YAML
mf() { k get deploy ssa -o json --show-managed-fields | jq -c "$1"; }
expect_exit 0 "apply --server-side creates" k apply --server-side -f "$tmp/ssa.yaml"
expect_grep "deployment.apps/ssa serverside-applied" "$tmp/out" "kubectl says serverside-applied"
[ "$(mf '[.metadata.managedFields[] | [.manager, .operation]]')" = '[["kubectl","Apply"]]' ] &&
    ok "managedFields: kubectl, Apply" || fail "$(mf .metadata.managedFields)"
[ "$(mf '.metadata.managedFields[0].fieldsV1["f:spec"]["f:template"]["f:spec"]["f:containers"]["k:{\"name\":\"main\"}"]["f:env"] | keys')" = \
    '["k:{\"name\":\"B\"}","k:{\"name\":\"TEST_MARKER\"}"]' ] &&
    ok "fieldsV1 keys containers and env by name" || fail "$(mf .metadata.managedFields)"
# tend get hides them as kubectl does (kubectl does it on its own side)
tend get deploy ssa -o yaml >"$tmp/ssa-plain.yaml"
! grep -q managedFields "$tmp/ssa-plain.yaml" && ok "tend get -o yaml hides managedFields" ||
    fail "managedFields shown without --show-managed-fields"
tend get deploy ssa -o json --show-managed-fields >"$tmp/ssa-shown.json"
[ "$(jq -r '.metadata.managedFields[0].manager' "$tmp/ssa-shown.json")" = kubectl ] &&
    ok "tend get --show-managed-fields shows them" || fail "$(head -c 400 "$tmp/ssa-shown.json")"
expect_exit 0 "kubectl scale" k scale deploy ssa --replicas=3
[ "$(mf '[.metadata.managedFields[] | select(.subresource == "scale") | .fieldsV1]')" = '[{"f:spec":{"f:replicas":{}}}]' ] &&
    ok "the scale owns spec.replicas now" || fail "$(mf .metadata.managedFields)"
expect_exit 1 "apply --server-side of another replicas" k apply --server-side -f "$tmp/ssa.yaml"
expect_grep 'Apply failed with 1 conflict: conflict with "kubectl" with subresource "scale" using apps/v1 at .*: .spec.replicas' \
    "$tmp/err" "a conflict names the field and its manager"
expect_grep "force-conflicts" "$tmp/err" "kubectl's advice follows (a 409 Conflict)"
[ "$(k get deploy ssa -o jsonpath='{.spec.replicas}')" = 3 ] && ok "a conflict changes nothing" ||
    fail "replicas changed"
expect_exit 0 "apply --server-side --force-conflicts" k apply --server-side --force-conflicts -f "$tmp/ssa.yaml"
[ "$(k get deploy ssa -o jsonpath='{.spec.replicas}')" = 2 ] && ok "forced: replicas 2" || fail "replicas not 2"
[ "$(mf '[.metadata.managedFields[] | select(.subresource == "scale")] | length')" = 0 ] &&
    ok "and the scale's entry is gone (it owned nothing else)" || fail "$(mf .metadata.managedFields)"
expect_exit 0 "kubectl set env (another manager)" k set env deploy/ssa C=3
sed '/name: B, value/d' "$tmp/ssa.yaml" >"$tmp/ssa2.yaml"
expect_exit 1 "diff --server-side of a dropped env var" k diff --server-side -f "$tmp/ssa2.yaml"
expect_grep '^-  *value: "2"' "$tmp/out" "diff shows B going"
expect_exit 0 "apply --server-side without B" k apply --server-side -f "$tmp/ssa2.yaml"
envs_ssa() { k get deploy ssa -o json | jq -c '[.spec.template.spec.containers[0].env[].name]'; }
[ "$(envs_ssa)" = '["TEST_MARKER","C"]' ] &&
    ok "B, applied before and not now, is removed; C, set by another manager, stays" ||
    fail "env: $(envs_ssa)"
expect_exit 0 "a second manager applies the same value" k apply --server-side --field-manager=ci -f "$tmp/ssa2.yaml"
[ "$(mf '[.metadata.managedFields[] | select(.operation == "Apply") | .manager] | sort')" = '["ci","kubectl"]' ] &&
    ok "same values: shared, no conflict" || fail "$(mf .metadata.managedFields)"
sed 's/"sleep"\]/"sleep", "x"]/' "$tmp/ssa2.yaml" >"$tmp/ssa3.yaml"
expect_exit 1 "ci changes the command kubectl applied" k apply --server-side --field-manager=ci -f "$tmp/ssa3.yaml"
expect_grep 'conflict with "kubectl": .spec.template.spec.containers\[name="main"\].command' "$tmp/err" \
    "a conflict inside a container is named by its key"
sed 's/name: ssa,/name: other,/' "$tmp/ssa.yaml" >"$tmp/ssa-wrong.yaml"
curl -s -o "$tmp/body" -w '%{http_code}' --cacert "$state/tls/ca.crt" \
    -H "Authorization: Bearer $(cat "$state/tls/token")" -X PATCH \
    -H 'Content-Type: application/apply-patch+yaml' --data-binary @"$tmp/ssa.yaml" \
    "https://127.0.0.1:$port/apis/apps/v1/namespaces/default/deployments/ssa" >"$tmp/code"
[ "$(cat "$tmp/code")" = 422 ] && grep -q "fieldManager: Required value" "$tmp/body" &&
    ok "an apply without fieldManager: 422 naming it" || fail "$(cat "$tmp/code") $(cat "$tmp/body")"
expect_exit 1 "a managedFields patch with a bad key" k patch deploy ssa --type=json \
    -p '[{"op":"replace","path":"/metadata/managedFields","value":[{"manager":"x","operation":"Update","fieldsV1":{"spec":{}}}]}]'
expect_grep 'managedFields\[0\].fieldsV1: key "spec" must start with f:' "$tmp/err" "refused, naming the key"
expect_exit 0 "managedFields set to [{}]" k patch deploy ssa --type=json \
    -p '[{"op":"replace","path":"/metadata/managedFields","value":[{}]}]'
[ "$(mf '.metadata.managedFields // [] | length')" = 0 ] && ok "[{}] clears them, as on a cluster" ||
    fail "$(mf .metadata.managedFields)"
expect_exit 0 "delete ssa" k delete deploy ssa --wait=false
# A deployment made by client-side apply moves to server-side apply as on a
# cluster: kubectl rewrites its managedFields (a JSON patch) after the apply.
sed 's/name: ssa,/name: csa,/; s/app: ssa/app: csa/g' "$tmp/ssa.yaml" >"$tmp/csa.yaml"
expect_exit 0 "kubectl apply (client-side)" k apply -f "$tmp/csa.yaml"
mfc() { k get deploy csa -o json --show-managed-fields | jq -c "$1"; }
[ "$(mfc '[.metadata.managedFields[] | [.manager, .operation]]')" = '[["kubectl-client-side-apply","Update"]]' ] &&
    ok "client-side apply: an Update by kubectl-client-side-apply" || fail "$(mfc .metadata.managedFields)"
# ...after a change to a field the client-side apply set (and nobody
# changed since): taken over without a conflict, as kube-apiserver does
sed 's/value: "2"/value: "3"/' "$tmp/csa.yaml" >"$tmp/csa2.yaml"
expect_exit 0 "then apply --server-side of a change" k apply --server-side -f "$tmp/csa2.yaml"
[ "$(k get deploy csa -o json | jq -c '[.spec.template.spec.containers[0].env[] | select(.name == "B") | .value]')" = '["3"]' ] &&
    ok "the changed value is applied, without a conflict" || fail "$(k get deploy csa -o json | jq -c .spec.template.spec.containers[0].env)"
k get deploy csa -o json | jq -e '.metadata.annotations["kubectl.kubernetes.io/last-applied-configuration"] |
    fromjson | .spec.template.spec.containers[0].env[1].value == "3"' >/dev/null &&
    ok "its last-applied-configuration follows the server-side apply" ||
    fail "$(k get deploy csa -o json | jq -c '.metadata.annotations')"
[ "$(mfc '[.metadata.managedFields[] | select(.manager == "kubectl-client-side-apply")] | length')" = 0 ] &&
    [ "$(mfc '[.metadata.managedFields[] | select(.manager == "kubectl") | .operation]')" = '["Apply"]' ] &&
    ok "migrated: kubectl owns the fields by Apply" || fail "$(mfc .metadata.managedFields)"
expect_exit 0 "delete csa" k delete deploy csa --wait=false

echo "== logs"
pod=$(k get pods -l app=stub -o json | jq -r '[.items[] | select(.status.phase == "Running" and
    .metadata.deletionTimestamp == null)][0].metadata.name')
said() { k logs "$pod" | grep -q "ignoring SIGTERM"; }
wait_for 5 said && ok "kubectl logs" || fail "logs of $pod: $(k logs "$pod" 2>&1)"
expect_exit 0 "logs --limit-bytes" k logs "$pod" --limit-bytes=8
[ "$(cat "$tmp/out")" = ignoring ] && ok "--limit-bytes=8 gives 8 bytes" || fail "got: $(cat "$tmp/out")"
# Times: a pod that writes a, then b 2 s later, then c 2 s after that.
cat >"$tmp/ts.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: ts}
spec:
  replicas: 1
  selector: {matchLabels: {app: ts}}
  template:
    metadata: {labels: {app: ts}}
    spec:
      containers:
      - name: main
        command: ["/bin/sh", "-c", "echo a; sleep 2; echo b; sleep 2; echo c; exec sleep 1000"]
        env: [{name: TEST_MARKER, value: "$tmp"}]
YAML
expect_exit 0 "apply ts" k apply -f "$tmp/ts.yaml"
tspod() { k get pods -l app=ts -o jsonpath='{.items[0].metadata.name}'; }
wrote() { k logs "$(tspod)" 2>/dev/null | grep -qx "$1"; }
wait_for 10 wrote a || fail "ts did not write a: $(k logs "$(tspod)" 2>&1)"
# a follower that begins before c is written stamps c when it comes
k logs -f "$(tspod)" --timestamps >"$tmp/follow-live" 2>&1 &
follower=$!
wait_for 20 wrote c || fail "ts did not write c: $(k logs "$(tspod)" 2>&1)"
wait_for 5 grep -q " c$" "$tmp/follow-live" || fail "the follower did not get c"
kill "$follower" 2>/dev/null
wait "$follower" 2>/dev/null
expect_exit 0 "logs --timestamps" k logs "$(tspod)" --timestamps
cp "$tmp/out" "$tmp/stamped"
awk 'NF == 2 && $1 ~ /^20[0-9][0-9]-[01][0-9]-[0-3][0-9]T[0-9:.]*Z$/' "$tmp/out" | wc -l >"$tmp/n"
[ "$(cat "$tmp/n")" = 3 ] && ok "each line starts with its RFC 3339 time" || fail "$(cat "$tmp/out")"
secs() { date -d "$1" +%s.%N; }
ta=$(awk '$2 == "a" { print $1 }' "$tmp/out") tb=$(awk '$2 == "b" { print $1 }' "$tmp/out")
gap=$(awk -v a="$(secs "$ta")" -v b="$(secs "$tb")" 'BEGIN { printf "%.3f", b - a }')
awk -v g="$gap" 'BEGIN { exit !(g >= 1.0 && g <= 3.5) }' && ok "b came 2 s after a (${gap} s)" ||
    fail "a at $ta, b at $tb"
tc=$(awk '$2 == "c" { print $1 }' "$tmp/stamped") tcf=$(awk '$2 == "c" { print $1 }' "$tmp/follow-live")
awk -v a="$(secs "$tc")" -v b="$(secs "$tcf")" 'BEGIN { d = b - a; exit !(d > -1 && d < 1) }' &&
    ok "a follower stamps a new line with its time (${tcf} vs ${tc})" || fail "c at $tc, followed at $tcf"
expect_exit 0 "logs --since-time (b's)" k logs "$(tspod)" --since-time="$tb"
[ "$(tr '\n' ' ' <"$tmp/out")" = "b c " ] && ok "--since-time: from b on" || fail "got: $(cat "$tmp/out")"
expect_exit 0 "logs --since=1h" k logs "$(tspod)" --since=1h
[ "$(tr '\n' ' ' <"$tmp/out")" = "a b c " ] && ok "--since=1h: all of it" || fail "got: $(cat "$tmp/out")"
timeout 3 kubectl logs -f "$(tspod)" --timestamps --tail=1 >"$tmp/follow" 2>&1
[ "$(cat "$tmp/follow")" = "$(awk '$2 == "c"' "$tmp/stamped")" ] && ok "logs -f --timestamps --tail=1" ||
    fail "follow: $(cat "$tmp/follow")"
expect_exit 1 "sinceSeconds and sinceTime together" \
    k get --raw "/api/v1/namespaces/default/pods/$(tspod)/log?sinceSeconds=5&sinceTime=2026-01-01T00:00:00Z"
expect_grep "at most one of sinceTime or sinceSeconds" "$tmp/err" "both at once: 422, saying so"
expect_exit 0 "delete ts" k delete deploy ts --wait=false

echo "== kubectl wait --for=condition=Ready -l after a crash"
pid=$(k get pods -l app=stub -o json | jq -r '[.items[] | select(.status.phase == "Running")][0].status.containerStatuses[0].containerID' | sed 's|process://||')
kill -9 "$pid"
expect_exit 0 "kubectl wait Ready -l, the replica killed" \
    k wait --for=condition=Ready pod -l app=stub --timeout=30s
[ "$(k get pods -l app=stub -o json | jq '[.items[] | select(.status.phase == "Failed")] | length')" = 0 ] &&
    ok "the killed pod is not kept to match the selector" || fail "$(k get pods -l app=stub)"
restarted=$(k get pods -l app=stub -o json | jq -r '.items[] | select(.status.containerStatuses[0].restartCount == 1) | .metadata.name')
[ -n "$restarted" ] && ok "its replacement counts the restart ($restarted)" || fail "$(k get pods -l app=stub)"
expect_exit 0 "kubectl logs --previous of it" k logs "$restarted" --previous
expect_grep "ignoring SIGTERM" "$tmp/out" "the killed instance's output"

echo "== delete pod waits until the process is gone"
pod=$(k get pods -l app=stub -o name | head -1)
pid=$(k get "$pod" -o jsonpath='{.status.containerStatuses[0].containerID}' | sed 's|process://||')
t0=$(date +%s%N)
expect_exit 0 "kubectl delete $pod" k delete "$pod"
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
gone() { ! kill -0 "$1" 2>/dev/null || grep -q '^State:.*Z' "/proc/$1/status"; }
gone "$pid" && ok "the process was gone when kubectl returned (${ms} ms, grace 2 s)" ||
    fail "pid $pid still runs after kubectl delete returned (${ms} ms)"
[ "$ms" -ge 1500 ] && ok "kubectl waited out the grace period" || fail "returned after $ms ms"

echo "== what a host process cannot do says why"
pod=$(k get pods -l app=stub -o name | head -1)
expect_exit 1 "exec" k exec "${pod#pod/}" -- echo hi
expect_grep "exec is not supported: a tend pod is a host process" "$tmp/err" "exec says why"
expect_exit 1 "attach" k attach "${pod#pod/}"
expect_grep "attach is not supported" "$tmp/err" "attach says why"
expect_exit 1 "port-forward" k port-forward "$pod" 18999:80
expect_grep "port-forward is not needed" "$tmp/err" "port-forward says why"
expect_exit 1 "cp" k cp "${pod#pod/}:/etc/hostname" "$tmp/hostname"
expect_grep "exec is not supported" "$tmp/err" "cp (exec and tar) says why"
expect_exit 1 "debug" k debug "${pod#pod/}" --image=busybox
expect_grep "ephemeral containers are not supported" "$tmp/err" "debug says why"
! grep -q panic "$tmp/err" && ok "kubectl debug does not crash" || fail "kubectl panicked"
expect_exit 1 "create deployment (protobuf)" k create deployment x --image=nginx -- /bin/sleep 1
expect_grep "tendd reads protobuf bodies of ConfigMaps and Secrets (v1), not of apps/v1 Deployment" "$tmp/err" \
    "a protobuf body of a kind tendd reads no protobuf of is refused, saying so"

echo "== delete --cascade=foreground waits for the pods"
pids=$(k get pods -l app=stub -o json | jq -r '.items[] | select(.status.phase == "Running") |
    .status.containerStatuses[0].containerID' | sed 's|process://||')
t0=$(date +%s%N)
k delete deploy stub --cascade=foreground --wait=false >/dev/null &&
    k get deploy stub -o jsonpath='{.metadata.deletionTimestamp}' >"$tmp/dts" 2>/dev/null
[ -s "$tmp/dts" ] && ok "the deployment stays, with its deletionTimestamp" ||
    fail "no deletionTimestamp: $(k get deploy stub -o yaml 2>&1 | head -20)"
expect_exit 1 "apply (a change) while it is being deleted" k apply -f "$tmp/stub2.yaml"
expect_grep "being deleted" "$tmp/err" "a write to it is refused, saying why"
expect_exit 0 "kubectl wait --for=delete" k wait --for=delete deploy/stub --timeout=30s
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
alive=0
for p in $pids; do gone "$p" || alive=$((alive + 1)); done
[ "$alive" -eq 0 ] && ok "gone only when its processes were (${ms} ms, grace 2 s)" ||
    fail "$alive process(es) still run when the deployment went (${ms} ms)"
[ "$ms" -ge 1500 ] && ok "it waited out the grace period" || fail "gone after $ms ms"
expect_exit 0 "create it again" k create -f "$tmp/stub3.yaml"

echo "== canaries promoted by kubectl annotate; an automatic rollback fails kubectl rollout status"
sed -e 's/name: stub}/name: can, annotations: {tend.io\/canary: "1", tend.io\/auto-rollback: "true"}}/' \
    -e 's/app: stub/app: can/g' -e 's/replicas: 2/replicas: 3/' "$tmp/stub.yaml" >"$tmp/can.yaml"
expect_exit 0 "create the canary deployment" k apply -f "$tmp/can.yaml"
expect_exit 0 "rollout status" k rollout status deploy/can --timeout=60s
sed 's/value: "me"/value: "canary"/' "$tmp/can.yaml" >"$tmp/can2.yaml"
expect_exit 0 "apply a new template" k apply -f "$tmp/can2.yaml"
can_waits() { k get deploy can -o jsonpath='{.status.conditions[?(@.type=="Progressing")].reason}' | grep -qx WaitingForPromotion; }
wait_for 20 can_waits && ok "the rollout waits for promotion (Progressing: WaitingForPromotion)" ||
    fail "conditions: $(k get deploy can -o jsonpath='{.status.conditions}')"
[ "$(k get deploy can -o jsonpath='{.status.updatedReplicas}')" = 1 ] && ok "with 1 updated replica of 3" ||
    fail "updated: $(k get deploy can -o jsonpath='{.status.updatedReplicas}')"
expect_exit 0 "kubectl annotate tend.io/promote=true" k annotate deploy/can tend.io/promote=true
expect_exit 0 "rollout status after promotion" k rollout status deploy/can --timeout=60s
[ "$(k get deploy can -o jsonpath='{.status.updatedReplicas}')" = 3 ] && ok "promoted: all 3 updated" ||
    fail "updated after promote: $(k get deploy can -o jsonpath='{.status.updatedReplicas}')"
expect_exit 1 "a bad annotation through kubectl" k annotate deploy/can tend.io/canary=lots --overwrite
expect_grep 'tend.io/canary\]: Invalid value: "lots"' "$tmp/err" "refused with its field path"
sed 's/"ignore-term"/"exit", "3"/' "$tmp/can.yaml" >"$tmp/can3.yaml"
expect_exit 0 "apply a crashing template" k apply -f "$tmp/can3.yaml"
# the crashing canary: promote it so that the rollout goes on and crash-loops
k annotate deploy/can tend.io/promote=true >/dev/null 2>&1
rolled_back() { k get deploy can -o jsonpath='{.status.conditions[?(@.type=="RolledBack")].status}' | grep -qx True; }
wait_for 30 rolled_back && ok "the crashing revision was rolled back (condition RolledBack)" ||
    fail "conditions: $(k get deploy can -o jsonpath='{.status.conditions}')"
k get deploy can -o jsonpath='{.spec.template.spec.containers[0].command[1]}' >"$tmp/cmd"
expect_grep "^ignore-term$" "$tmp/cmd" "the template is the last that completed"
expect_exit 0 "delete it" k delete deploy can --wait=false

echo "== dry runs on the server change nothing: delete, scale, apply --prune"
stub_state() { k get deploy stub -o json | jq -c '[.metadata.resourceVersion, .spec.replicas]'
    k get pods -l app=stub -o json | jq -c '[.items[] | .metadata.name + "=" + .status.containerStatuses[0].containerID] | sort'; }
k rollout status deploy/stub --timeout=60s >/dev/null 2>&1
stub_state >"$tmp/state-before"
expect_exit 0 "delete deploy --dry-run=server" k delete deploy stub --dry-run=server
expect_grep 'deployment.apps "stub" deleted (server dry run)' "$tmp/out" "kubectl reports the dry run"
expect_exit 0 "delete pod --dry-run=server" k delete "$(k get pods -l app=stub -o name | head -1)" --dry-run=server
expect_exit 0 "scale --dry-run=server" k scale deploy stub --replicas=5 --dry-run=server
expect_grep 'scaled (server dry run)' "$tmp/out" "kubectl reports the scale's dry run"
expect_exit 0 "delete pods -l --dry-run=server" k delete pods -l app=stub --dry-run=server
stub_state >"$tmp/state-after"
diff "$tmp/state-before" "$tmp/state-after" >/dev/null &&
    ok "the deployment, its replicas, its pods and their processes are as they were" ||
    fail "changed: $(diff "$tmp/state-before" "$tmp/state-after")"
for n in a b; do
    sed "s/name: stub}/name: prune-$n, labels: {group: prune}}/; s/app: stub/app: prune-$n/g; s/replicas: 2/replicas: 1/" \
        "$tmp/stub.yaml" >"$tmp/prune-$n.yaml"
done
expect_exit 0 "apply two labelled deployments" k apply -f "$tmp/prune-a.yaml" -f "$tmp/prune-b.yaml"
expect_exit 0 "apply --prune -l of one, --dry-run=server (no --prune-allowlist)" \
    k apply --prune -l group=prune -f "$tmp/prune-a.yaml" --dry-run=server
expect_grep 'deployment.apps/prune-b pruned (server dry run)' "$tmp/out" "kubectl would prune prune-b"
expect_exit 0 "prune-b is still there" k get deploy prune-b
expect_exit 0 "apply --prune -l for real" k apply --prune -l group=prune -f "$tmp/prune-a.yaml"
expect_grep 'deployment.apps/prune-b pruned' "$tmp/out" "prune-b pruned"
expect_exit 1 "prune-b is gone" k get deploy prune-b
expect_exit 0 "prune-a stays" k get deploy prune-a
expect_exit 0 "delete prune-a" k delete deploy prune-a --wait=false

echo "== auth, cluster-info, namespaces, kinds tend has none of"
expect_exit 0 "auth can-i create deployments" k auth can-i create deployments
[ "$(cat "$tmp/out")" = yes ] && ok "can-i: yes" || fail "can-i: $(cat "$tmp/out" "$tmp/err")"
expect_exit 0 "auth can-i --list" k auth can-i --list
expect_grep '^\*\.\*  *\[\]  *\[\]  *\[\*\]' "$tmp/out" "can-i --list: everything"
expect_exit 0 "auth whoami" k auth whoami
expect_grep '^Username  *tend:token$' "$tmp/out" "whoami: the token's user"
expect_exit 0 "cluster-info" k cluster-info
expect_grep "Kubernetes control plane is running at https://127.0.0.1:$port" "$tmp/out" "cluster-info names the server"
expect_exit 0 "get ns" k get ns
expect_grep '^default  *Active' "$tmp/out" "the default namespace, Active"
expect_exit 0 "get svc" k get svc
expect_grep "No resources found" "$tmp/err" "no Services: an empty list"
cat >"$tmp/svc.yaml" <<YAML
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {ports: [{port: 80}]}
YAML
expect_exit 1 "create a Service" k create --validate=false -f "$tmp/svc.yaml"
expect_grep "tend has no Services: a pod listens on the host itself" "$tmp/err" "refused, saying why"
expect_exit 1 "autoscale" k autoscale deploy stub --max=3
expect_grep "tend has no autoscaler" "$tmp/err" "autoscale: refused, saying why"
expect_exit 0 "get events.events.k8s.io" k get events.v1.events.k8s.io
expect_grep "Started" "$tmp/out" "events.k8s.io/v1 lists the events"
expect_exit 1 "an unsupported field selector" k get pods --field-selector spec.foo=bar
expect_grep "field label not supported: spec.foo" "$tmp/err" "a field selector tend cannot read: 400"
expect_exit 0 "get pods --chunk-size=1" k get pods -l app=stub --chunk-size=1 -o name
[ "$(wc -l <"$tmp/out")" = 2 ] && ok "pages of one: both pods" || fail "$(cat "$tmp/out")"
pids=$(k get pods -l app=stub -o json | jq -r '.items[].status.containerStatuses[0].containerID' | sed 's|process://||')
expect_exit 0 "delete --raw a collection (deletecollection)" \
    k delete --raw '/api/v1/namespaces/default/pods?labelSelector=app%3Dstub'
for p in $pids; do wait_for 10 gone "$p" || fail "pod process $p still runs"; done
ok "deletecollection stopped the selected pods"
wait_for 20 two_running && ok "and the ReplicaSet replaced them" || fail "$(k get pods -l app=stub)"

echo "== delete deploy --now"
expect_exit 0 "kubectl delete deploy --now" k delete deploy stub --now
expect_grep "gracePeriodSeconds applies to pods" "$tmp/err" "a warning says what --now does"
expect_exit 1 "it is gone" k get deploy stub
expect_grep "NotFound" "$tmp/err" "NotFound after"

finish
