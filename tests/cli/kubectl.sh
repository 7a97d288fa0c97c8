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

port=44610
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

echo "== explain"
expect_exit 0 "explain deployment.spec.replicas" k explain deployment.spec.replicas
expect_grep "FIELD: replicas <integer>" "$tmp/out" "explain names the field and its type"
expect_exit 0 "explain pod.spec.containers" k explain pods.spec.containers
expect_grep "command.*<\[\]string>" "$tmp/out" "explain lists a container's fields"
! grep -q "^  image\b" "$tmp/out" && ok "what tend refuses is not offered" || fail "image is listed"

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
expect_exit 0 "delete web" k delete deploy web

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
expect_grep "tendd reads JSON and YAML bodies, not application/vnd.kubernetes.protobuf" "$tmp/err" \
    "a protobuf body is named as such"

echo "== delete deploy --now"
expect_exit 0 "kubectl delete deploy --now" k delete deploy stub --now
expect_grep "gracePeriodSeconds applies to pods" "$tmp/err" "a warning says what --now does"
expect_exit 1 "it is gone" k get deploy stub
expect_grep "NotFound" "$tmp/err" "NotFound after"

finish
