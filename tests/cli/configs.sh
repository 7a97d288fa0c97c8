#!/bin/sh
# ConfigMaps and Secrets (issue 31) as on a cluster, through stock kubectl
# over HTTPS and through tend: created (kubectl create configmap|secret
# sends protobuf), read (tables, describe), applied client- and
# server-side, patched, edited, replaced, watched and deleted; refused with
# the API server's reasons, and then nothing changed, nor by a dry run;
# immutable ones kept so; a `tend apply` of a Deployment and a ConfigMap
# all or nothing; kept across a restart of tendd. A Secret's values are
# never in tendd's log, its events or an error, and the store that holds
# them is its owner's only.
. "$(dirname "$0")/lib.sh"

command -v kubectl >/dev/null || {
    echo "kubectl is not on the PATH: install kubectl (1.30 or later) to run this test"
    exit 77
}
command -v jq >/dev/null || { echo "jq missing (make deps)"; exit 77; }

port=29650 # outside the leased range and the ephemeral one (kubectl.sh); the clients have 29630-29640
start_tendd --listen "127.0.0.1:$port"
tend kubeconfig >"$tmp/kubeconfig" || { fail "tend kubeconfig"; finish; }
export KUBECONFIG="$tmp/kubeconfig"
k() { kubectl --request-timeout=20s "$@"; }
rv() { k get cm "$1" -o jsonpath='{.metadata.resourceVersion}'; }
value() { k get cm "$1" -o json | jq -r --arg k "$2" '.data[$k] // "<none>"'; }

cat >"$tmp/cm.yaml" <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
  labels: {app: web}
data:
  mode: blue
  app.conf: |
    port=8080
    greeting=hello world
binaryData:
  logo.bin: AAEC
YAML

echo "== kubectl create -f, get, describe"
expect_exit 0 "create -f" k create -f "$tmp/cm.yaml"
expect_grep "configmap/app-config created" "$tmp/out" "created"
expect_exit 0 "get cm" k get cm
expect_grep "^app-config  *3  *[0-9]" "$tmp/out" "NAME DATA AGE, DATA counting binaryData"
k get cm app-config -o json >"$tmp/got.json"
[ "$(jq -r '.data["app.conf"]' "$tmp/got.json")" = "$(printf 'port=8080\ngreeting=hello world')" ] &&
    [ "$(jq -r '.binaryData["logo.bin"]' "$tmp/got.json")" = AAEC ] &&
    [ -n "$(jq -r .metadata.uid "$tmp/got.json")" ] && [ "$(jq -r .metadata.labels.app "$tmp/got.json")" = web ] &&
    ok "get -o json: the data as written, a uid" || fail "$(cat "$tmp/got.json")"
uid=$(jq -r .metadata.uid "$tmp/got.json")
expect_exit 0 "describe" k describe cm app-config
expect_grep "logo.bin: 3 bytes" "$tmp/out" "describe shows binaryData's sizes" &&
    expect_grep "greeting=hello world" "$tmp/out" "describe shows data" && ok "describe"
expect_exit 1 "create it again" k create -f "$tmp/cm.yaml"
expect_grep 'configmaps "app-config" already exists' "$tmp/err" "AlreadyExists"

echo "== kubectl create configmap (kubectl sends it as protobuf)"
printf 'LEVEL=debug\n# a comment\nNAME=tend web\n' >"$tmp/app.env"
printf 'line one\nline two\n' >"$tmp/notes.txt"
printf '\000\001\377binary' >"$tmp/blob.bin"
expect_exit 0 "create configmap --from-literal --from-file" \
    k create configmap literal --from-literal=x=1 --from-literal=greeting='hello world' \
    --from-file="$tmp/notes.txt" --from-file="$tmp/blob.bin"
expect_grep "configmap/literal created" "$tmp/out" "created from literals and files"
k get cm literal -o json --show-managed-fields >"$tmp/lit.json"
[ "$(jq -r .data.x "$tmp/lit.json")" = 1 ] && [ "$(jq -r .data.greeting "$tmp/lit.json")" = "hello world" ] &&
    [ "$(jq -r '.data["notes.txt"]' "$tmp/lit.json")" = "$(cat "$tmp/notes.txt")" ] &&
    [ "$(jq -r '.binaryData["blob.bin"]' "$tmp/lit.json")" = "$(base64 -w0 "$tmp/blob.bin")" ] &&
    [ "$(jq -r '.metadata.managedFields[0].manager' "$tmp/lit.json")" = kubectl-create ] &&
    ok "literals, a text file as data, a binary one as binaryData, byte for byte; managed by kubectl-create" ||
    fail "$(cat "$tmp/lit.json")"
expect_exit 0 "create configmap --from-env-file" k create configmap envs --from-env-file="$tmp/app.env"
[ "$(k get cm envs -o jsonpath='{.data.LEVEL}/{.data.NAME}')" = "debug/tend web" ] &&
    ok "--from-env-file: its variables, the comment left out" || fail "$(k get cm envs -o json)"
expect_exit 1 "create configmap, a bad name" k create configmap Bad_Name --from-literal=a=1
expect_grep 'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value' "$tmp/err" \
    "the server refuses a protobuf body's bad name in its words"
expect_exit 0 "create configmap --dry-run=server" k create configmap dry --from-literal=a=1 --dry-run=server
expect_exit 1 "so there is none" k get cm dry
expect_exit 1 "create deployment (protobuf)" k create deployment x --image=nginx -- /bin/sleep 1
expect_grep "tendd reads protobuf bodies of ConfigMaps and Secrets (v1), not of apps/v1 Deployment" "$tmp/err" \
    "a protobuf body of another kind: 415, saying so"
# a field k8s.proto leaves out (finalizers) is refused, never dropped: the
# body made by hand, as the protobuf wire format has it
python3 - "$tmp/finalizers.pb" <<'PY'
import sys
def varint(n):
    out = b""
    while True:
        b = n & 0x7f
        n >>= 7
        out += bytes([b | (0x80 if n else 0)])
        if not n:
            return out
def field(num, payload):
    return varint(num << 3 | 2) + varint(len(payload)) + payload
meta = field(1, b"fin") + field(14, b"example.com/keep")
cm = field(1, meta) + field(2, field(1, b"a") + field(2, b"1"))
unknown = field(1, field(1, b"v1") + field(2, b"ConfigMap")) + field(2, cm)
open(sys.argv[1], "wb").write(b"k8s\0" + unknown)
# selfLink: a field the proto has, which the decoder refuses as it refuses it in JSON
meta = field(1, b"sl") + field(4, b"/api/v1/x")
unknown = field(1, field(1, b"v1") + field(2, b"ConfigMap")) + field(2, field(1, meta))
open(sys.argv[1] + ".selflink", "wb").write(b"k8s\0" + unknown)
PY
code=$(curl -s -o "$tmp/body" -w '%{http_code}' --unix-socket "$TEND_SOCKET" -X POST \
    -H 'Content-Type: application/vnd.kubernetes.protobuf' --data-binary @"$tmp/finalizers.pb" \
    http://localhost/api/v1/namespaces/default/configmaps)
[ "$code" = 400 ] && grep -q "ObjectMeta.finalizers is not read by tendd" "$tmp/body" &&
    ok "a protobuf body with finalizers: 400, naming the field" || fail "$code: $(cat "$tmp/body")"
expect_exit 1 "so there is none" k get cm fin
code=$(curl -s -o "$tmp/body" -w '%{http_code}' --unix-socket "$TEND_SOCKET" -X POST \
    -H 'Content-Type: application/vnd.kubernetes.protobuf' --data-binary @"$tmp/finalizers.pb.selflink" \
    http://localhost/api/v1/namespaces/default/configmaps)
[ "$code" = 422 ] && grep -q "metadata.selfLink" "$tmp/body" &&
    ok "a protobuf body with selfLink: refused as its JSON would be, never dropped" || fail "$code: $(cat "$tmp/body")"
k delete cm literal envs >/dev/null

echo "== apply (client- and server-side), patch, edit, replace"
sed 's/mode: blue/mode: green/' "$tmp/cm.yaml" >"$tmp/cm2.yaml"
expect_exit 0 "apply a change" k apply -f "$tmp/cm2.yaml"
expect_grep "configmap/app-config configured" "$tmp/out" "apply: configured" &&
    { [ "$(value app-config mode)" = green ] && ok "apply changed mode to green" || fail "mode: $(value app-config mode)"; }
expect_exit 0 "apply again" k apply -f "$tmp/cm2.yaml"
expect_grep "configmap/app-config unchanged" "$tmp/out" "apply again: unchanged"
sed 's/mode: blue/mode: teal/' "$tmp/cm.yaml" >"$tmp/cm3.yaml"
expect_exit 0 "apply --server-side" k apply --server-side -f "$tmp/cm3.yaml"
expect_grep "serverside-applied" "$tmp/out" "server-side apply" &&
    { [ "$(value app-config mode)" = teal ] && ok "server-side apply changed mode to teal" || fail "mode: $(value app-config mode)"; }
expect_exit 0 "patch (strategic)" k patch cm app-config -p '{"data":{"extra":"1"}}'
[ "$(value app-config extra)" = 1 ] && [ "$(value app-config mode)" = teal ] && ok "a strategic patch adds a key, keeps the rest" ||
    fail "after the patch: $(k get cm app-config -o jsonpath='{.data}')"
expect_exit 0 "patch (json)" k patch cm app-config --type json -p '[{"op":"remove","path":"/data/extra"}]'
[ "$(value app-config extra)" = "<none>" ] && ok "a JSON patch removes it" || fail "extra: $(value app-config extra)"
KUBE_EDITOR="sed -i s/mode:\ teal/mode:\ red/" expect_exit 0 "edit" k edit cm app-config
expect_grep "configmap/app-config edited" "$tmp/out" "edit" &&
    { [ "$(value app-config mode)" = red ] && ok "edited to red" || fail "mode: $(value app-config mode)"; }
k get cm app-config -o json >"$tmp/stale.json"
k patch cm app-config -p '{"data":{"mode":"violet"}}' >/dev/null
expect_exit 1 "replace a stale copy" k replace -f "$tmp/stale.json"
expect_grep "the object has been modified" "$tmp/err" "a stale replace: Conflict"
[ "$(value app-config mode)" = violet ] && ok "the stale copy changed nothing" || fail "mode: $(value app-config mode)"
[ "$(k get cm app-config -o jsonpath='{.metadata.uid}')" = "$uid" ] && ok "the same object throughout (uid)" ||
    fail "another uid"

echo "== refused, or only tried: nothing changes"
before=$(rv app-config)
cat >"$tmp/badkey.yaml" <<'YAML'
apiVersion: v1
kind: ConfigMap
metadata: {name: app-config}
data: {"bad key": x}
YAML
expect_exit 1 "a bad key" k apply -f "$tmp/badkey.yaml"
expect_grep 'data\[bad key\]: Invalid value: "bad key": a valid config key must consist of alphanumeric characters' "$tmp/err" \
    "the key is refused in the API server's words"
{ printf 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata:\n  a: "'
  head -c 1048577 /dev/zero | tr '\0' x; printf '"\n'; } >"$tmp/big.yaml"
expect_exit 1 "1 MiB and a byte" k create -f "$tmp/big.yaml"
expect_grep "Too long: must have at most 1048576 bytes" "$tmp/err" "over 1 MiB is refused"
expect_exit 1 "so there is none" k get cm big
sed 's/mode: blue/mode: dry/' "$tmp/cm.yaml" >"$tmp/dry.yaml"
expect_exit 0 "apply --dry-run=server" k apply --dry-run=server -f "$tmp/dry.yaml"
expect_grep "(server dry run)" "$tmp/out" "a server dry run"
expect_exit 0 "delete --dry-run=server" k delete cm app-config --dry-run=server
[ "$(rv app-config)" = "$before" ] && [ "$(value app-config mode)" = violet ] &&
    ok "a refused write, a dry-run apply and a dry-run delete changed nothing (resourceVersion $before)" ||
    fail "changed: resourceVersion $(rv app-config), mode $(value app-config mode)"

echo "== immutable"
expect_exit 0 "made immutable" k patch cm app-config --type merge -p '{"immutable":true}'
expect_exit 1 "its data then" k patch cm app-config -p '{"data":{"mode":"x"}}'
expect_grep 'data: Forbidden: field is immutable when `immutable` is set' "$tmp/err" "immutable data"
expect_exit 1 "and back" k patch cm app-config --type merge -p '{"immutable":false}'
expect_grep 'immutable: Forbidden: field is immutable when `immutable` is set' "$tmp/err" "immutable stays"
expect_exit 0 "its labels may change" k label cm app-config tier=front
[ "$(value app-config mode)" = violet ] && ok "an immutable ConfigMap kept its data" || fail "mode: $(value app-config mode)"

echo "== watch"
k get cm -w --output-watch-events -o json >"$tmp/watch" 2>&1 &
watcher=$!
sleep 1
printf 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: seen}\ndata: {a: "1"}\n' | k create -f - >/dev/null
k delete cm seen >/dev/null
seen() { jq -r 'select(.object.metadata.name == "seen") | .type' "$tmp/watch" 2>/dev/null | tr '\n' ' '; }
wait_for 5 sh -c "jq -r .type '$tmp/watch' 2>/dev/null | grep -q DELETED"
kill "$watcher" 2>/dev/null
[ "$(seen)" = "ADDED DELETED " ] && ok "a watch sees it added and deleted" || fail "watch: $(seen): $(head -c 300 "$tmp/watch")"

echo "== tend: a Deployment and its ConfigMap, all or nothing"
cat >"$tmp/both.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: main
        command: ["$testprog", "sleep"]
        env: [{name: TEST_MARKER, value: "$tmp"}]
---
apiVersion: v1
kind: ConfigMap
metadata: {name: web-config}
data: {"listen addr": ":8080"}
YAML
expect_exit 1 "tend apply with a bad ConfigMap" tend apply -f "$tmp/both.yaml"
expect_grep 'configmap "web-config": data\[listen addr\]: Invalid value' "$tmp/err" "tend names the bad key, file:line" &&
    expect_grep "nothing was applied" "$tmp/err" "nothing applied"
expect_exit 1 "so no deployment" tend get deploy web
sed -i 's/"listen addr"/listen_addr/' "$tmp/both.yaml"
expect_exit 0 "tend validate" tend validate -f "$tmp/both.yaml"
expect_grep 'configmap "web-config" is valid' "$tmp/out" "validate names the ConfigMap"
expect_exit 0 "tend apply" tend apply -f "$tmp/both.yaml"
expect_grep "deployment.apps/web created" "$tmp/out" "the deployment" &&
    expect_grep "configmap/web-config created" "$tmp/out" "and the ConfigMap, in one apply"
expect_exit 0 "tend apply again" tend apply -f "$tmp/both.yaml"
expect_grep "configmap/web-config unchanged" "$tmp/out" "unchanged"
expect_exit 0 "tend get cm" tend get cm
expect_grep "^web-config  *1 " "$tmp/out" "tend get cm: NAME DATA AGE"

echo "== Secrets"
expect_exit 0 "create secret generic" k create secret generic db --from-literal=password=Pa55-w0rd-9f3e \
    --from-literal=user=admin
expect_grep "secret/db created" "$tmp/out" "created (protobuf)"
[ "$(k get secret db -o jsonpath='{.data.password}' | base64 -d)" = Pa55-w0rd-9f3e ] &&
    [ "$(k get secret db -o jsonpath='{.type}')" = Opaque ] &&
    ok "data as given, base64; type defaulted to Opaque" || fail "$(k get secret db -o json)"
expect_exit 0 "get secrets" k get secrets
expect_grep "^db  *Opaque  *2 " "$tmp/out" "NAME TYPE DATA AGE"
expect_exit 0 "describe secret" k describe secret db
expect_grep "password:  14 bytes" "$tmp/out" "describe shows sizes" &&
    ! grep -q "Pa55-w0rd-9f3e" "$tmp/out" && ok "describe shows no value"
cat >"$tmp/api-key.yaml" <<'YAML'
apiVersion: v1
kind: Secret
metadata: {name: api-key}
stringData: {token: tok-7d1c-stringdata}
YAML
expect_exit 0 "apply a Secret with stringData" k apply -f "$tmp/api-key.yaml"
k get secret api-key -o json >"$tmp/sec.json"
[ "$(jq -r .data.token "$tmp/sec.json" | base64 -d)" = tok-7d1c-stringdata ] &&
    [ "$(jq 'has("stringData")' "$tmp/sec.json")" = false ] &&
    ok "stringData is merged into data, and never read back" || fail "$(cat "$tmp/sec.json")"
expect_exit 0 "create secret tls" k create secret tls web-tls --cert="$state/tls/server.crt" --key="$state/tls/server.key"
[ "$(k get secret web-tls -o jsonpath='{.type}')" = kubernetes.io/tls ] && ok "a TLS secret" || fail "web-tls"
printf 'apiVersion: v1\nkind: Secret\nmetadata: {name: half-tls}\ntype: kubernetes.io/tls\ndata: {tls.crt: AAEC, x: "s3cr3t-not-base64!"}\n' >"$tmp/half.yaml"
expect_exit 1 "a TLS secret without its key, a value not base64" k apply -f "$tmp/half.yaml"
expect_grep 'data\[tls.key\]: Required value' "$tmp/err" "what its type requires" &&
    expect_grep 'data\[x\]: Invalid value: "<secret contents redacted>": not base64' "$tmp/err" "not base64, redacted" &&
    ! grep -q "s3cr3t-not-base64" "$tmp/err" && ok "the refused value is not in the error"
printf 'apiVersion: v1\nkind: Secret\nmetadata: {name: num}\nstringData: {pin: 8675309}\n' >"$tmp/num.yaml"
expect_exit 1 "a value that is not a string" k apply -f "$tmp/num.yaml"
expect_grep "<secret contents redacted>" "$tmp/err" "a wrong type, redacted" &&
    ! grep -q 8675309 "$tmp/err" && ok "the number is not in the error"
expect_exit 1 "its type" k patch secret db --type merge -p '{"type":"kubernetes.io/basic-auth"}'
expect_grep 'type: Invalid value: "kubernetes.io/basic-auth": field is immutable' "$tmp/err" "type is immutable"
expect_exit 1 "a service account token" k create secret generic sat --type=kubernetes.io/service-account-token --from-literal=a=b
expect_grep "tend has no service accounts" "$tmp/err" "service account tokens refused, saying why"
! grep -q -e Pa55-w0rd-9f3e -e tok-7d1c-stringdata "$tmp/tendd.log" &&
    ! k get events -A -o json | grep -q -e Pa55-w0rd-9f3e -e tok-7d1c-stringdata &&
    ok "no Secret value in tendd's log or in an event" || fail "a Secret's value leaked"
perms=$(stat -c '%a' "$state/tend.db" "$state"/tend.db-* 2>/dev/null | sort -u | tr '\n' ' ')
[ "$perms" = "600 " ] && ok "the store holding them is its owner's only (mode 600)" || fail "store modes: $perms"
expect_exit 0 "tend get secrets" tend get secrets
expect_grep "^api-key  *Opaque  *1 " "$tmp/out" "tend lists them as kubectl"

echo "== into the pod: envFrom and valueFrom"
cat >"$tmp/uses.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: uses}
spec:
  replicas: 1
  selector: {matchLabels: {app: uses}}
  template:
    metadata: {labels: {app: uses}, annotations: {note: from-the-template}}
    spec:
      containers:
      - name: main
        command: ["$testprog", "sleep"]
        resources: {limits: {memory: 64Mi, cpu: 1500m}}
        envFrom:
        - configMapRef: {name: uses-env}
          prefix: CFG_
        - secretRef: {name: uses-missing, optional: true}
        env:
        - {name: TEST_MARKER, value: "$tmp"}
        - {name: DB_PASSWORD, valueFrom: {secretKeyRef: {name: uses-db, key: password}}}
        - {name: MODE, valueFrom: {configMapKeyRef: {name: uses-env, key: mode}}}
        - {name: OPT, valueFrom: {configMapKeyRef: {name: uses-nope, key: x, optional: true}}}
        - {name: MY_POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        - {name: MY_NOTE, valueFrom: {fieldRef: {fieldPath: "metadata.annotations['note']"}}}
        - {name: MEM_MI, valueFrom: {resourceFieldRef: {resource: limits.memory, divisor: 1Mi}}}
        - {name: CPUS, valueFrom: {resourceFieldRef: {resource: limits.cpu}}}
        - {name: GREETING, value: "mode is \$(MODE)"}
YAML
expect_exit 0 "apply a deployment whose env refers to what is not there yet" k apply -f "$tmp/uses.yaml"
waiting_for() { # REASON-MESSAGE part
    k get pods -l app=uses -o json | jq -e --arg m "$1" \
        '.items[0].status.containerStatuses[0].state.waiting | .reason == "CreateContainerConfigError" and (.message | contains($m))' >/dev/null
}
wait_for 10 waiting_for 'configmap "uses-env" not found' &&
    ok "no ConfigMap: CreateContainerConfigError, configmap \"uses-env\" not found" ||
    fail "$(k get pods -l app=uses -o json | jq -c '.items[0].status')"
k get pods -l app=uses >"$tmp/out" 2>&1
expect_grep "CreateContainerConfigError" "$tmp/out" "kubectl get pods shows it"
k get events --field-selector reason=Failed -o json | jq -r '.items[].message' >"$tmp/ev"
expect_grep 'Error: configmap "uses-env" not found' "$tmp/ev" "a Failed event says why"
expect_exit 0 "the ConfigMap comes" k create configmap uses-env --from-literal=mode=blue --from-literal=level=3
wait_for 10 waiting_for 'secret "uses-db" not found' &&
    ok "then the Secret is what it waits for" || fail "$(k get pods -l app=uses -o json | jq -c '.items[0].status')"
expect_exit 0 "the Secret comes" k create secret generic uses-db --from-literal=password=Hush-7788-uses
uses_running() { [ "$(k get pods -l app=uses -o jsonpath='{.items[0].status.phase}')" = Running ]; }
wait_for 10 uses_running && ok "then the pod starts, without a restart of anything" ||
    fail "$(k get pods -l app=uses -o json | jq -c '.items[0].status')"
upid=$(k get pods -l app=uses -o jsonpath='{.items[0].status.containerStatuses[0].containerID}' | sed 's|process://||')
tr '\0' '\n' <"/proc/$upid/environ" >"$tmp/uenv" 2>/dev/null
upod=$(k get pods -l app=uses -o jsonpath='{.items[0].metadata.name}')
for want in CFG_mode=blue CFG_level=3 DB_PASSWORD=Hush-7788-uses MODE=blue "MY_POD=$upod" \
    MY_NOTE=from-the-template MEM_MI=64 CPUS=2 "GREETING=mode is blue"; do
    grep -qx "$want" "$tmp/uenv" || fail "the process's environment lacks $want: $(tr '\n' ' ' <"$tmp/uenv")"
done
! grep -q "^OPT=" "$tmp/uenv" && ok "the process sees envFrom (prefixed), secretKeyRef, configMapKeyRef, fieldRef, resourceFieldRef (rounded up), \$(MODE) expanded; an optional missing one unset"
! grep -q Hush-7788-uses "$tmp/tendd.log" && ! k get events -o json | grep -q Hush-7788-uses &&
    ok "the Secret's value is in the process's environment, not in tendd's log or events" ||
    fail "the Secret's value leaked"
k delete deploy uses >/dev/null
# every reference optional and missing: nothing of them set, not even empty
sed -e 's/{name: uses}/{name: bare}/' -e 's/app: uses/app: bare/g' "$tmp/uses.yaml" |
    awk '/^        - \{name: (TEST_MARKER|DB_PASSWORD|MODE|MY_|MEM_|CPUS|GREETING)/ { next }
         /configMapRef: \{name: uses-env\}/ { print "        - configMapRef: {name: bare-none, optional: true}"; next }
         /prefix: CFG_/ { next } { print }' >"$tmp/bare.yaml"
expect_exit 0 "apply one whose references are all optional and missing" k apply -f "$tmp/bare.yaml"
bare_running() { [ "$(k get pods -l app=bare -o jsonpath='{.items[0].status.phase}')" = Running ]; }
wait_for 10 bare_running || fail "bare: $(k get pods -l app=bare -o json | jq -c '.items[0].status')"
bpid=$(k get pods -l app=bare -o jsonpath='{.items[0].status.containerStatuses[0].containerID}' | sed 's|process://||')
tr '\0' '\n' <"/proc/$bpid/environ" >"$tmp/benv" 2>/dev/null
# (its process has no TEST_MARKER: kill_marked finds it by its log)
grep -q "^POD_NAME=bare-" "$tmp/benv" && ! grep -q "^OPT=" "$tmp/benv" &&
    ok "all optional and missing: it starts, without them" || fail "bare env: $(tr '\n' ' ' <"$tmp/benv")"
k delete deploy bare >/dev/null
# a key that cannot be a variable's name: skipped, and said once per start
k create configmap skips-env --from-literal=1st=x --from-literal=ok=yes >/dev/null
sed -e 's/{name: bare}/{name: skips}/' -e 's/app: bare/app: skips/g' \
    -e 's/configMapRef: {name: bare-none, optional: true}/configMapRef: {name: skips-env}/' "$tmp/bare.yaml" >"$tmp/skips.yaml"
expect_exit 0 "apply one whose envFrom has a key that is no variable's name" k apply -f "$tmp/skips.yaml"
skips_running() { [ "$(k get pods -l app=skips -o jsonpath='{.items[0].status.phase}')" = Running ]; }
wait_for 10 skips_running || fail "skips: $(k get pods -l app=skips -o json | jq -c '.items[0].status')"
spid=$(k get pods -l app=skips -o jsonpath='{.items[0].status.containerStatuses[0].containerID}' | sed 's|process://||')
tr '\0' '\n' <"/proc/$spid/environ" >"$tmp/senv" 2>/dev/null
k get events --field-selector reason=InvalidEnvironmentVariableNames -o json >"$tmp/sev"
grep -qx ok=yes "$tmp/senv" && ! grep -q "^1st=" "$tmp/senv" &&
    [ "$(jq '[.items[] | select(.message | startswith("Keys [1st] from the EnvFrom configMap default/skips-env were skipped"))] | length' "$tmp/sev")" = 1 ] &&
    [ "$(jq '[.items[].count] | add' "$tmp/sev")" = 1 ] &&
    ok "a key that is no variable's name is skipped, one event said once" ||
    fail "skips: env $(tr '\n' ' ' <"$tmp/senv"); events $(jq -c '[.items[] | {message, count}]' "$tmp/sev")"
k delete deploy skips >/dev/null
k delete cm skips-env >/dev/null
k delete cm uses-env >/dev/null

echo "== kept across a restart"
stop_tendd TERM
start_tendd --listen "127.0.0.1:$port"
[ "$(k get cm app-config -o jsonpath='{.metadata.uid}')" = "$uid" ] && [ "$(value app-config mode)" = violet ] &&
    [ "$(k get cm app-config -o jsonpath='{.immutable}')" = true ] &&
    ok "after a restart: the same ConfigMap, immutable, its data" || fail "lost across the restart"

echo "== delete"
expect_exit 0 "tend delete -f" tend delete -f "$tmp/both.yaml"
expect_exit 1 "the ConfigMap is gone" k get cm web-config
expect_exit 0 "kubectl delete" k delete cm app-config
expect_grep 'configmap "app-config" deleted' "$tmp/out" "deleted"
expect_exit 0 "none left" k get cm
expect_grep "No resources found" "$tmp/err" "none left"
finish
