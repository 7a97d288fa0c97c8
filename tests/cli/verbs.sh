#!/bin/sh
# Every verb and flag of tend, and the HTTP API under it, through the real
# binaries — with the bad input a user can give and what it must answer.
. "$(dirname "$0")/lib.sh"

command -v jq >/dev/null || { echo "jq missing (make deps)"; exit 77; }

# deploy NAME REPLICAS COMMAND... : a Deployment manifest on stdout.
deploy() {
    name=$1 replicas=$2
    shift 2
    args=
    for a in "$@"; do args="$args\"$a\", "; done
    cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata:
  name: $name
  labels: {tier: test}
spec:
  replicas: $replicas
  selector:
    matchLabels: {app: $name}
  template:
    metadata:
      labels: {app: $name}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: main
        command: [${args%, }]
        env: [{name: TEST_MARKER, value: "$tmp"}]
YAML
}

jq_body() { jq -r "$1" "$tmp/body"; }
pod_count() { tend get pods -l "app=$1" | awk 'NR > 1 && $3 == "Running"' | wc -l; }
has_pods() { [ "$(pod_count "$1")" -eq "$2" ]; }

echo "== tendd: startup errors name the problem"
: >"$tmp/not-a-dir"
expect_exit 1 "state dir is a file" "$bin/tendd" --state-dir "$tmp/not-a-dir" --socket "$tmp/x.sock"
expect_grep "$tmp/not-a-dir" "$tmp/err" "state dir error names the path"
expect_exit 2 "unknown option" "$bin/tendd" --frobnicate
expect_grep "frobnicate" "$tmp/err" "unknown option named"
expect_exit 0 "tendd --help" "$bin/tendd" --help && expect_grep "--state-dir" "$tmp/out" "tendd help"
printf 'short\n' >"$tmp/short-token"
chmod 600 "$tmp/short-token"
expect_exit 1 "a short token" "$bin/tendd" --state-dir "$tmp/s2" --socket "$tmp/s2.sock" \
    --listen 127.0.0.1:29321 --token-file "$tmp/short-token"
expect_grep "$tmp/short-token: it must hold at least 16 characters" "$tmp/err" "short token"
printf 'a-token-of-32-characters-or-so.\n' >"$tmp/open-token"
chmod 644 "$tmp/open-token"
expect_exit 1 "a token every user can read" "$bin/tendd" --state-dir "$tmp/s2" --socket "$tmp/s2.sock" \
    --listen 127.0.0.1:29321 --token-file "$tmp/open-token"
expect_grep "$tmp/open-token can be read by every user (mode 0644): chmod o-r" "$tmp/err" "world-readable token"
chmod 600 "$tmp/open-token"
printf '\000-and-then-a-token-of-32-characters.\n' >"$tmp/nul-token"
chmod 600 "$tmp/nul-token"
expect_exit 1 "a token file that begins with a NUL" "$bin/tendd" --state-dir "$tmp/s2" \
    --socket "$tmp/s2.sock" --listen 127.0.0.1:29321 --token-file "$tmp/nul-token"
expect_grep "nul-token: byte 0 is a control character (0x00): a secret is printable text" "$tmp/err" \
    "a NUL in the token is refused (it made the empty token valid)"
expect_exit 1 "--listen on a network address" "$bin/tendd" --state-dir "$tmp/s2" --socket "$tmp/s2.sock" \
    --listen 0.0.0.0:29321 --token-file "$tmp/open-token"
expect_grep "only loopback addresses (127.0.0.0/8) are served with the certificate tendd makes; to serve 0.0.0.0, give --tls-cert and --tls-key" \
    "$tmp/err" "a non-loopback --listen wants the user's certificate"
expect_exit 1 "--tls-cert without --tls-key" "$bin/tendd" --state-dir "$tmp/s2" --socket "$tmp/s2.sock" \
    --listen 127.0.0.1:29321 --tls-cert "$tmp/open-token"
expect_grep "go together" "$tmp/err" "the pair is asked for"
expect_exit 1 "--tls-cert that is no certificate" "$bin/tendd" --state-dir "$tmp/s2" --socket "$tmp/s2.sock" \
    --listen 127.0.0.1:29321 --tls-cert "$tmp/open-token" --tls-key "$tmp/open-token"
expect_grep "tls-cert $tmp/open-token and --tls-key $tmp/open-token: .*PEM files" "$tmp/err" \
    "a bad certificate is named at start"

# Listener ports are 45xxx: the pods of the tests running meanwhile lease
# 44000-44999 (lib.sh).
echo "== idle connections are cut, and TCP cannot use up the local socket"
"$bin/tendd" --state-dir "$tmp/s3" --socket "$tmp/s3.sock" --listen 127.0.0.1:29322 \
    --token-file "$tmp/open-token" --idle-timeout 2s >"$tmp/s3.log" 2>&1 &
s3_pid=$!
for _ in $(seq 100); do [ -S "$tmp/s3.sock" ] && break; sleep 0.05; done
# shellcheck disable=SC2016 # the script is bash's
bash -c '
    exec 5<>/dev/tcp/127.0.0.1/29322 || exit 3
    sleep 3
    read -r -t 3 -u 5 _; rc=$?
    [ $rc -gt 128 ] && exit 1   # still open after 3 s of a 2 s idle timeout
    exit 0' && ok "an idle TCP connection is closed after --idle-timeout" ||
    fail "an idle connection stayed open past --idle-timeout"
# 300 idle TCP connections, more than TCP may hold: the local socket answers.
# shellcheck disable=SC2016
bash -c '
    for i in $(seq 300); do exec {fd}<>/dev/tcp/127.0.0.1/29322 || break; done
    curl -s -f --max-time 5 --unix-socket "$1/s3.sock" http://localhost/healthz >/dev/null' \
    _ "$tmp" && ok "with TCP flooded, the local socket answers" ||
    fail "TCP flooded: the local socket does not answer"
# Each pool filled past its limit and emptied at once, again and again
# (closed or reset): the listener accepts afterwards (MHD takes a full
# pool's listening socket out of its poll set, and puts it back only on a
# later run, which tendd must make).
cat >"$tmp/fill.py" <<'PY'
import socket, struct, sys, time
kind, where, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for rnd in range(6):
    ss = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX) if kind == "unix" else socket.socket()
        s.settimeout(5)
        if kind != "unix":  # from ten addresses: one may hold 32 (TCP_PER_ADDRESS_MAX)
            s.bind(("127.0.0.%d" % (2 + len(ss) % 10), 0))
        s.connect(where if kind == "unix" else ("127.0.0.1", int(where)))
        ss.append(s)
    time.sleep(0.5)
    for s in ss:
        if rnd % 2:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    time.sleep(0.2)
PY
/usr/bin/python3 "$tmp/fill.py" tcp 29322 270 2>&1 | tail -2
curl -s -k -f --max-time 5 -H "Authorization: Bearer $(cat "$tmp/open-token")"     https://127.0.0.1:29322/healthz >/dev/null && ok "TCP's pool filled and emptied six times: it accepts" ||
    fail "TCP's listener no longer accepts after its pool emptied"
/usr/bin/python3 "$tmp/fill.py" unix "$tmp/s3.sock" 1010 2>&1 | tail -2
curl -s -f --max-time 5 --unix-socket "$tmp/s3.sock" http://localhost/healthz >/dev/null &&
    ok "the local socket's pool filled and emptied six times: it accepts" ||
    fail "the local socket no longer accepts after its pool emptied"
# Slowloris: 256 connections from 8 addresses, each through its TLS
# handshake and then sending a byte of its request's headers every 0.3 s,
# hold no connection past the request's deadline (here the 2 s idle
# timeout; MHD's own restarts with each byte): a client is served
# meanwhile. And one address holds at most 32.
cat >"$tmp/slow.py" <<'PY'
import socket, ssl, sys, threading, time
port, token = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context()
ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"s" * 200
ss, sent, last = [], {}, time.monotonic()
def trickle():  # a byte more on each, every 0.3 s, from the start
    global last
    for s in ss:
        try:
            s.send(head[sent[s]:sent[s] + 1])
            sent[s] += 1
        except OSError:
            pass
    last = time.monotonic()
for i in range(256):
    s = socket.socket()
    s.bind(("127.0.0.%d" % (20 + i % 8), 0))
    s.connect(("127.0.0.1", port))
    ss.append(ctx.wrap_socket(s))
    sent[ss[-1]] = 0
    if time.monotonic() - last > 0.3:
        trickle()
def client():
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=3) as raw:
            with ctx.wrap_socket(raw) as t:
                t.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " +
                          token.encode() + b"\r\nConnection: close\r\n\r\n")
                return t.recv(100).split(b"\r\n")[0].decode()
    except OSError as e:
        return "no answer: %s" % e
# the client waits in a thread: the bytes go on meanwhile
start, served, waiter = time.monotonic(), [], None
while time.monotonic() - start < 4.5 or waiter.is_alive():
    trickle()
    time.sleep(0.3)
    if waiter is None and time.monotonic() - start > 1:
        waiter = threading.Thread(target=lambda: served.append(client()))
        waiter.start()
served = served[0]
def still_open(socks):
    """How many of socks tendd has not closed (nothing to read, no EOF)."""
    n = 0
    for s in socks:
        s.settimeout(0.01)
        try:
            n += s.recv(1) != b""
        except socket.timeout:
            n += 1
        except OSError:
            pass
    return n
print("served: %s; still open: %d" % (served, still_open(ss)))
# one address: 40 connections, 32 kept
mine = []
for _ in range(40):
    s = socket.socket(); s.bind(("127.0.0.40", 0)); s.connect(("127.0.0.1", port)); mine.append(s)
time.sleep(0.5)
print("one address kept: %d of 40; another is served: %s" % (still_open(mine), client()))
PY
/usr/bin/python3 "$tmp/slow.py" 29322 "$(cat "$tmp/open-token")" >"$tmp/slow.out" 2>&1
grep -q "served: HTTP/1.1 200 OK; still open: 0$" "$tmp/slow.out" &&
    ok "slowloris: 256 connections a byte at a time are closed at their deadline, a client is served" ||
    fail "slowloris: $(cat "$tmp/slow.out")"
grep -q "one address kept: 32 of 40; another is served: HTTP/1.1 200 OK" "$tmp/slow.out" &&
    ok "one address holds at most 32 connections" || fail "per address: $(cat "$tmp/slow.out")"
curl -s --unix-socket "$tmp/s3.sock" http://localhost/metrics | grep -Eq '^tend_api_connections_cut_total [1-9]' &&
    ok "/metrics counts the connections cut" || fail "tend_api_connections_cut_total"
kill "$s3_pid" && wait "$s3_pid" || { fail "tendd with --idle-timeout: exit $?"; cat "$tmp/s3.log"; }
expect_exit 2 "a bad --idle-timeout" "$bin/tendd" --state-dir "$tmp/s4" --socket "$tmp/s4.sock" \
    --idle-timeout 0s
expect_grep "idle-timeout 0s: expected a duration from 1s to 1h" "$tmp/err" "--idle-timeout checked"

echo "== --help tells the options"
for v in "rollout status" "rollout history" "rollout undo" version events get logs scale delete apply \
    describe; do
    # shellcheck disable=SC2086
    expect_exit 0 "tend $v --help" "$bin/tend" $v --help && expect_grep "^Usage: tend" "$tmp/out" "$v usage"
done
"$bin/tend" rollout status --help | grep -q -- "--timeout" || fail "rollout status --help lacks --timeout"
"$bin/tend" rollout undo --help | grep -q -- "--to-revision" || fail "rollout undo --help lacks --to-revision"

echo "== tend without tendd"
TEND_SOCKET="$tmp/nobody.sock" expect_exit 1 "no tendd" "$bin/tend" get pods
expect_grep "cannot reach tendd at $tmp/nobody.sock: .*(is tendd running?)" "$tmp/err" \
    "unreachable message"
expect_exit 1 "--socket wins over TEND_SOCKET" "$bin/tend" --socket "$tmp/other.sock" get pods
expect_grep "$tmp/other.sock" "$tmp/err" "--socket used"

start_tendd

echo "== a second tendd is refused"
expect_exit 1 "same state dir" "$bin/tendd" --state-dir "$state" --socket "$tmp/second.sock"
expect_grep "pid $tendd_pid" "$tmp/err" "lock error names the holder's pid"
expect_exit 1 "same socket" "$bin/tendd" --state-dir "$tmp/state2" --socket "$TEND_SOCKET"
expect_grep "$TEND_SOCKET" "$tmp/err" "socket error names the socket"
expect_grep "in use by tendd (pid $tendd_pid)" "$tmp/err" "and the pid that holds it"
expect_exit 0 "first tendd still serves" tend get pods

echo "== version, health, discovery"
expect_exit 0 "version" tend version && expect_grep "Client Version" "$tmp/out" "client version" &&
    expect_grep "Server Version" "$tmp/out" "server version"
expect_api 200 "healthz" GET /healthz && expect_grep "ok" "$tmp/body" "healthz body"
expect_api 200 "readyz" GET /readyz
expect_api 200 "version" GET /version && [ -n "$(jq_body .gitVersion)" ] || fail "/version has no gitVersion"
expect_api 404 "unknown path" GET /nothing/here && [ "$(jq_body .kind)" = Status ] ||
    fail "unknown path: not a Status"

echo "== apply: created, unchanged, configured; all or nothing"
deploy echo 2 "$testprog" argv hello world >"$tmp/echo.yaml"
expect_exit 0 "apply" tend apply -f "$tmp/echo.yaml" &&
    expect_grep "^deployment.apps/echo created$" "$tmp/out" "created"
expect_exit 0 "apply again" tend apply -f "$tmp/echo.yaml" &&
    expect_grep "^deployment.apps/echo unchanged$" "$tmp/out" "unchanged"
wait_for 10 has_pods echo 2 && ok "2 echo pods" || fail "no 2 echo pods"
deploy echo 2 "$testprog" argv hello there >"$tmp/echo2.yaml"
expect_exit 0 "apply from stdin" sh -c "'$bin/tend' apply -f - <'$tmp/echo2.yaml'" &&
    expect_grep "^deployment.apps/echo configured$" "$tmp/out" "configured"
mkdir "$tmp/dir"
deploy good 1 "$testprog" sleep >"$tmp/dir/a.yaml"
cat >"$tmp/dir/b.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: bad}
spec:
  replicas: -1
  selector: {matchLabels: {app: bad}}
  template:
    metadata: {labels: {app: other}}
    spec:
      containers: [{name: c}]
YAML
expect_exit 1 "apply a directory with a bad file" tend apply -f "$tmp/dir"
expect_grep "b.yaml:[0-9]*:[0-9]*: deployment \"bad\": spec.replicas: Invalid value: -1" "$tmp/err" \
    "error names the file, the object and the field"
expect_grep "spec.template.metadata.labels" "$tmp/err" "second error listed too"
expect_grep "nothing was applied" "$tmp/err" "nothing applied"
expect_exit 1 "good was not created" tend get deploy good
rm "$tmp/dir/b.yaml"
expect_exit 0 "apply a directory" tend apply -f "$tmp/dir" &&
    expect_grep "deployment.apps/good created" "$tmp/out" "directory applied"
expect_exit 0 "apply --dry-run" tend apply --dry-run -f "$tmp/echo.yaml"
tend get deploy echo -o json | jq -e '.spec.template.spec.containers[0].command[-1] == "there"' \
    >/dev/null && ok "dry run changed nothing" || fail "dry run changed the deployment"

# A directory larger than a single manifest may be (1 MiB): files are
# capped one by one, the request as a whole only by the 3 MiB body cap (as kube-apiserver's).
mkdir "$tmp/bigdir"
head -c 150000 /dev/zero | tr '\0' x >"$tmp/filler"
for i in 1 2 3 4 5 6 7 8; do
    deploy "big$i" 0 "$testprog" sleep | awk -v f="$tmp/filler" '
        /^  labels: \{tier: test\}/ { print "  labels: {tier: big}"; getline x < f; print "  annotations: {filler: " x "}"; next }
        { print }' >"$tmp/bigdir/$i.yaml"
done
expect_exit 0 "apply 1.2 MB of manifests" tend apply -f "$tmp/bigdir" &&
    [ "$(grep -c created "$tmp/out")" -eq 8 ] || fail "big dir: $(head -c 300 "$tmp/err")"
for i in 1 2 3 4 5 6 7 8; do tend delete "deploy/big$i" >/dev/null; done

echo "== API: invalid object is 422 with every cause, and changes nothing"
rv_before=$(tend get deploy -o json | jq -r .metadata.resourceVersion)
cat >"$tmp/invalid.json" <<'JSON'
{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "Bad_Name"},
 "spec": {"replicas": -2, "selector": {"matchLabels": {"app": "x"}},
          "template": {"metadata": {"labels": {"app": "y"}},
                       "spec": {"containers": [{"name": "c", "command": ["/bin/true"]}]}}}}
JSON
expect_api 422 "invalid create" POST /apis/apps/v1/namespaces/default/deployments \
    -H 'Content-Type: application/json' --data-binary @"$tmp/invalid.json"
[ "$(jq_body .reason)" = Invalid ] && ok "reason Invalid" || fail "reason $(jq_body .reason)"
n=$(jq_body '.details.causes | length')
[ "$n" -ge 3 ] && ok "$n causes listed" || fail "only $n causes: $(cat "$tmp/body")"
jq -e '[.details.causes[].field] | index("spec.replicas")' "$tmp/body" >/dev/null ||
    fail "no spec.replicas cause"
rv_after=$(tend get deploy -o json | jq -r .metadata.resourceVersion)
[ "$rv_before" = "$rv_after" ] && ok "resourceVersion unchanged" || fail "store changed: $rv_before → $rv_after"
expect_api 400 "not JSON" POST /apis/apps/v1/namespaces/default/deployments \
    -H 'Content-Type: application/json' --data-binary '{"apiVersion": '
expect_api 409 "create existing" POST /apis/apps/v1/namespaces/default/deployments \
    -H 'Content-Type: application/json' --data-binary @"$tmp/echo.yaml" &&
    [ "$(jq_body .reason)" = AlreadyExists ] || fail "not AlreadyExists"

echo "== API: not found, conflict, patches, body cap"
expect_api 404 "unknown pod" GET /api/v1/namespaces/default/pods/nosuch
[ "$(jq_body .reason)" = NotFound ] && [ "$(jq_body .details.name)" = nosuch ] &&
    ok "NotFound names the pod" || fail "bad NotFound: $(cat "$tmp/body")"
expect_exit 1 "tend get unknown pod" tend get pod nosuch
expect_grep 'pods "nosuch" not found' "$tmp/err" "CLI says not found"
[ ! -s "$tmp/out" ] && ok "and prints no table header over nothing" || fail "stdout: $(cat "$tmp/out")"
api GET /apis/apps/v1/namespaces/default/deployments/echo >/dev/null
cp "$tmp/body" "$tmp/echo.json"
jq '.spec.replicas = 3' "$tmp/echo.json" >"$tmp/echo3.json"
expect_api 200 "PUT current" PUT /apis/apps/v1/namespaces/default/deployments/echo \
    -H 'Content-Type: application/json' --data-binary @"$tmp/echo3.json"
expect_api 409 "PUT stale" PUT /apis/apps/v1/namespaces/default/deployments/echo \
    -H 'Content-Type: application/json' --data-binary @"$tmp/echo3.json" &&
    [ "$(jq_body .reason)" = Conflict ] && ok "stale resourceVersion is a Conflict" ||
    fail "not Conflict"
expect_api 200 "merge patch" PATCH /apis/apps/v1/namespaces/default/deployments/echo \
    -H 'Content-Type: application/merge-patch+json' --data-binary '{"spec": {"replicas": 1}}' &&
    [ "$(jq_body .spec.replicas)" = 1 ] || fail "merge patch not applied"
expect_api 200 "json patch" PATCH /apis/apps/v1/namespaces/default/deployments/echo \
    -H 'Content-Type: application/json-patch+json' \
    --data-binary '[{"op": "replace", "path": "/spec/replicas", "value": 2}]' &&
    [ "$(jq_body .spec.replicas)" = 2 ] || fail "json patch not applied"
expect_api 422 "json patch test fails" PATCH /apis/apps/v1/namespaces/default/deployments/echo \
    -H 'Content-Type: application/json-patch+json' \
    --data-binary '[{"op": "test", "path": "/spec/replicas", "value": 7}]'
expect_api 422 "patch to an invalid object" PATCH /apis/apps/v1/namespaces/default/deployments/echo \
    -H 'Content-Type: application/merge-patch+json' --data-binary '{"spec": {"replicas": -1}}'
tend get deploy echo -o json | jq -e '.spec.replicas == 2' >/dev/null ||
    fail "a rejected patch changed the deployment"
stale_rv=$(jq -r .metadata.resourceVersion "$tmp/echo.json")
expect_api 409 "merge patch on a stale resourceVersion" PATCH \
    /apis/apps/v1/namespaces/default/deployments/echo -H 'Content-Type: application/merge-patch+json' \
    --data-binary "{\"metadata\": {\"resourceVersion\": \"$stale_rv\"}, \"spec\": {\"replicas\": 5}}" &&
    [ "$(jq_body .reason)" = Conflict ] || fail "stale patch not a Conflict"
expect_api 409 "merge patch naming another uid" PATCH \
    /apis/apps/v1/namespaces/default/deployments/echo -H 'Content-Type: application/merge-patch+json' \
    --data-binary '{"metadata": {"uid": "00000000-0000-0000-0000-000000000000"}, "spec": {"replicas": 5}}' &&
    jq_body .message | grep -q "UID in precondition: 00000000-0000-0000-0000-000000000000" &&
    ok "a write naming another object's uid is a Conflict" || fail "uid: $(cat "$tmp/body")"
expect_api 400 "a merge patch that is not an object" PATCH \
    /apis/apps/v1/namespaces/default/deployments/echo -H 'Content-Type: application/merge-patch+json' \
    --data-binary '[1, 2]' && jq_body .message | grep -q "must be a JSON object" &&
    ok "a list as merge patch: told what a merge patch is" || fail "list patch: $(cat "$tmp/body")"
expect_api 415 "an unknown patch type" PATCH /apis/apps/v1/namespaces/default/deployments/echo \
    -H 'Content-Type: text/plain' --data-binary '{}' &&
    jq_body .message | grep -q "strategic-merge-patch" && ok "415 names every patch type taken" ||
    fail "415: $(cat "$tmp/body")"
tend get deploy echo -o json | jq -e '.spec.replicas == 2' >/dev/null || fail "a refused patch changed replicas"
live=$(tend get deploy echo -o json)
expect_api 200 "a dry-run patch" PATCH '/apis/apps/v1/namespaces/default/deployments/echo?dryRun=All' \
    -H 'Content-Type: application/merge-patch+json' --data-binary '{"spec": {"replicas": 7}}' &&
    [ "$(jq_body .spec.replicas)" = 7 ] &&
    [ "$(jq_body .metadata.uid)" = "$(echo "$live" | jq -r .metadata.uid)" ] &&
    [ "$(jq_body .metadata.generation)" = "$(( $(echo "$live" | jq .metadata.generation) + 1 ))" ] &&
    [ "$(jq_body .metadata.resourceVersion)" = "$(echo "$live" | jq -r .metadata.resourceVersion)" ] &&
    tend get deploy echo -o json | jq -e '.spec.replicas == 2' >/dev/null &&
    ok "dryRun=All answers what would be stored (uid, next generation) and stores nothing" ||
    fail "dry run: $(head -c 300 "$tmp/body")"
expect_api 422 "a dry-run patch to an invalid object" PATCH \
    '/apis/apps/v1/namespaces/default/deployments/echo?dryRun=All' \
    -H 'Content-Type: application/merge-patch+json' --data-binary '{"spec": {"replicas": -3}}' &&
    ok "a dry run is validated as a real one"
deploy drycreate 1 "$testprog" sleep >"$tmp/drycreate.yaml"
expect_api 201 "a dry-run create" POST '/apis/apps/v1/namespaces/default/deployments?dryRun=All' \
    -H 'Content-Type: application/yaml' --data-binary @"$tmp/drycreate.yaml" &&
    [ -n "$(jq_body '.metadata.uid // empty')" ] && ! tend get deploy drycreate >/dev/null 2>&1 &&
    ok "a dry-run create answers with a uid, and creates nothing" || fail "dry create: $(head -c 300 "$tmp/body")"
# The old form of a leased port (containerPort 0 or none): taken as the
# pod template's tend.io/lease-ports, said in a warning, and stored so.
expect_api 200 "containerPort 0: the old form of a leased port" PATCH \
    /apis/apps/v1/namespaces/default/deployments/echo \
    -H 'Content-Type: application/json-patch+json' --data-binary \
    '[{"op": "add", "path": "/spec/template/spec/containers/0/ports", "value": [{"name": "http", "containerPort": 0}]}]' &&
    [ "$(jq -c '[.spec.template.spec.containers[0].ports, .spec.template.metadata.annotations["tend.io/lease-ports"]]' "$tmp/body")" = '[null,"http"]' ] &&
    grep -qi '^Warning: 299 - "spec.template.spec.containers\[\].ports: a port without containerPort is not valid Kubernetes: tendd took it as the pod template.s annotation tend.io/lease-ports: http' "$tmp/headers" &&
    ok "the old form is stored as tend.io/lease-ports, with a warning" ||
    fail "containerPort 0: $(jq -c '[.spec.template.spec.containers[0].ports, .spec.template.metadata.annotations]' "$tmp/body") $(grep -i warning "$tmp/headers")"
expect_api 200 "and back" PATCH /apis/apps/v1/namespaces/default/deployments/echo \
    -H 'Content-Type: application/json-patch+json' --data-binary \
    '[{"op": "remove", "path": "/spec/template/metadata/annotations/tend.io~1lease-ports"}]'
expect_api 422 "DELETE with propagationPolicy Orphan" DELETE \
    /apis/apps/v1/namespaces/default/deployments/echo -H 'Content-Type: application/json' \
    --data-binary '{"propagationPolicy": "Orphan"}' && expect_grep "Orphan" "$tmp/body" "Orphan named"
expect_api 409 "DELETE with a wrong uid precondition" DELETE \
    /apis/apps/v1/namespaces/default/deployments/echo -H 'Content-Type: application/json' \
    --data-binary '{"preconditions": {"uid": "not-its-uid"}}'
expect_exit 0 "still there after refused deletes" tend get deploy echo
# Deleting a ReplicaSet through the API (the core's agent_delete_replica_set):
# gone at once, its deployment makes it again (a new uid), pods follow.
wait_for 10 has_pods echo 2
expect_api 200 "list echo's replica sets" GET \
    '/apis/apps/v1/namespaces/default/replicasets?labelSelector=app%3Decho'
rs=$(jq_body '[.items[] | select(.spec.replicas > 0)][0].metadata.name')
rs_uid=$(jq_body '[.items[] | select(.spec.replicas > 0)][0].metadata.uid')
expect_api 200 "DELETE a replica set" DELETE "/apis/apps/v1/namespaces/default/replicasets/$rs"
rs_again() {
    [ "$(api GET "/apis/apps/v1/namespaces/default/replicasets/$rs")" = 200 ] &&
        [ "$(jq_body .metadata.uid)" != "$rs_uid" ]
}
wait_for 10 rs_again && ok "the deployment made replicaset/$rs again" ||
    fail "replicaset/$rs was not made again: $(head -c 300 "$tmp/body")"
wait_for 10 has_pods echo 2 && ok "2 echo pods after the replica set's delete" ||
    fail "echo pods after the replica set's delete: $(pod_count echo)"
expect_api 404 "DELETE a replica set that is not there" DELETE \
    /apis/apps/v1/namespaces/default/replicasets/no-such-rs
head -c $((3 * 1024 * 1024 + 1)) /dev/zero | tr '\0' ' ' >"$tmp/big"
expect_api 413 "a body over 3 MiB" POST /apis/apps/v1/namespaces/default/deployments \
    -H 'Content-Type: application/json' --data-binary @"$tmp/big" &&
    [ "$(jq_body .reason)" = RequestEntityTooLarge ] || fail "not RequestEntityTooLarge"
expect_api 405 "PUT a pod" PUT /api/v1/namespaces/default/pods/x \
    -H 'Content-Type: application/json' --data-binary '{}'
expect_api 405 "write status" PUT /apis/apps/v1/namespaces/default/deployments/echo/status \
    -H 'Content-Type: application/json' --data-binary '{}'

echo "== API: hostile requests get a clear 4xx, in UTF-8, and change nothing"
# A 1.5 KB JSON patch whose copies double the object each time once took
# tendd to 24 GB.
ops=$(i=0; while [ $i -lt 40 ]; do
    printf '%s{"op":"copy","from":"/spec","path":"/spec/template/x%d"}' "$([ $i = 0 ] || echo ,)" $i
    i=$((i + 1))
done)
expect_api 422 "a doubling JSON patch" PATCH /apis/apps/v1/namespaces/default/deployments/echo \
    -H 'Content-Type: application/json-patch+json' --data-binary "[$ops]" &&
    jq_body .message | grep -q "adds more than 200000 values" &&
    ok "a doubling JSON patch is refused, saying which limit" ||
    fail "doubling patch: $(head -c 300 "$tmp/body")"
expect_api 422 "an RFC 6901 pointer with ~2" PATCH /apis/apps/v1/namespaces/default/deployments/echo \
    -H 'Content-Type: application/json-patch+json' \
    --data-binary '[{"op":"remove","path":"/metadata/labels/a~2b"}]' &&
    jq_body .message | grep -q "not a JSON pointer" && ok "~2 is not a pointer" ||
    fail "~2: $(head -c 300 "$tmp/body")"
utf8_status() { # CODE DESCRIPTION METHOD PATH [curl args...]: the answer is a Status in UTF-8
    expect_api "$@" || return 1
    iconv -f UTF-8 -t UTF-8 "$tmp/body" >/dev/null 2>&1 && jq -e '.kind == "Status"' "$tmp/body" >/dev/null &&
        ok "$2: $1, a Status in UTF-8" || fail "$2: not a UTF-8 Status: $(head -c 300 "$tmp/body")"
}
utf8_status 404 "a name that is not UTF-8" GET /apis/apps/v1/namespaces/default/deployments/%ff
jq_body .message | grep -qF '\xff' || fail "the bad byte is not shown: $(jq_body .message)"
utf8_status 400 "a selector that is not UTF-8" GET '/api/v1/pods?labelSelector=%ff%3D%3D%3D'
printf '{"a":"\\u1\303\251"}' >"$tmp/halfchar.json"
utf8_status 400 "a parse error quoting half a character" POST \
    /apis/apps/v1/namespaces/default/deployments -H 'Content-Type: application/json' \
    --data-binary @"$tmp/halfchar.json"
e3000=$(i=0; while [ $i -lt 300 ]; do printf '%%C3%%A9%%C3%%A9%%C3%%A9%%C3%%A9%%C3%%A9%%C3%%A9%%C3%%A9%%C3%%A9%%C3%%A9%%C3%%A9'; i=$((i + 1)); done)
code=$(api POST "/apis/apps/v1/namespaces/%ff$e3000/deployments" -H 'Content-Type: application/json' \
    --data-binary @"$tmp/echo.json")
case $code in 4??) iconv -f UTF-8 -t UTF-8 "$tmp/body" >/dev/null 2>&1 &&
    ok "a namespace of a stray byte and 3000 é: $code in UTF-8" ||
    fail "bad namespace: not UTF-8" ;;
*) fail "a namespace of a stray byte and 3000 é: HTTP $code" ;; esac
expect_api 200 "tendd still answers" GET /healthz
tend get deploy echo -o json | jq -e '.spec.template | has("x0") | not' >/dev/null &&
    ok "the refused patches changed nothing" || fail "a refused patch changed echo"

# A client that hangs up on a quiet watch is let go within a second or two,
# not at the next heartbeat or change.
curl -s -N --unix-socket "$TEND_SOCKET" \
    "http://localhost/apis/apps/v1/namespaces/default/deployments?watch=1&resourceVersion=$(
        tend get deploy echo -o json | jq -r .metadata.resourceVersion)" >/dev/null &
watcher=$!
sleep 1
fds_watching=$(ls /proc/"$tendd_pid"/fd | wc -l)
kill "$watcher"; wait "$watcher" 2>/dev/null
sleep 2
fds_after=$(ls /proc/"$tendd_pid"/fd | wc -l)
[ "$fds_after" -lt "$fds_watching" ] && ok "a dropped watch frees its descriptor within 2 s" ||
    fail "a dropped watch kept its descriptor ($fds_watching, then $fds_after)"
# timeoutSeconds too large for microseconds is no timeout, not an instant end
curl -s -N --max-time 2 --unix-socket "$TEND_SOCKET" \
    "http://localhost/apis/apps/v1/namespaces/default/deployments?watch=1&timeoutSeconds=18446744073709" \
    >"$tmp/watch-long" 2>/dev/null
[ $? = 28 ] && ok "a huge timeoutSeconds keeps the watch open" ||
    fail "a huge timeoutSeconds ended the watch at once: $(head -c 200 "$tmp/watch-long")"

echo "== API: lists and selectors"
expect_api 200 "list all namespaces" GET /api/v1/pods && [ "$(jq_body .kind)" = PodList ] ||
    fail "not a PodList"
expect_api 200 "labelSelector" GET '/api/v1/namespaces/default/pods?labelSelector=app%3Dgood'
[ "$(jq_body '.items | length')" = 1 ] && ok "labelSelector filters" ||
    fail "labelSelector: $(jq_body '.items | length') items"
expect_api 200 "fieldSelector" \
    GET '/apis/apps/v1/namespaces/default/deployments?fieldSelector=metadata.name%3Decho'
[ "$(jq_body '.items[].metadata.name')" = echo ] && ok "fieldSelector filters" ||
    fail "fieldSelector: $(jq_body '.items[].metadata.name')"
expect_api 400 "bad selector" GET '/api/v1/pods?labelSelector=%3D%3D%3D'

echo "== get: tables, -o, -l, -A"
wait_for 10 has_pods echo 2
expect_exit 0 "get deployments" tend get deployments &&
    expect_grep "^NAME *READY *UP-TO-DATE *AVAILABLE *AGE$" "$tmp/out" "deployment columns" &&
    expect_grep "^echo *2/2 *2 *2 " "$tmp/out" "echo row"
expect_exit 0 "get rs" tend get rs &&
    expect_grep "^NAME *DESIRED *CURRENT *READY *AGE$" "$tmp/out" "rs columns"
expect_exit 0 "get po" tend get po &&
    expect_grep "^NAME *READY *STATUS *RESTARTS *AGE$" "$tmp/out" "pod columns"
expect_exit 0 "get po -o wide" tend get po -o wide &&
    expect_grep "PID *PORTS *REVISION" "$tmp/out" "wide columns"
pid=$(awk 'NR > 1 && $1 ~ /^echo-/ { print $6; exit }' "$tmp/out")
[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && ok "wide PID is a live process" || fail "PID $pid"
rev=$(awk 'NR > 1 && $1 ~ /^echo-/ { print $8; exit }' "$tmp/out")
[ "$rev" = "$(tend get deploy echo -o json | jq -r '.metadata.annotations["deployment.kubernetes.io/revision"]')" ] &&
    ok "REVISION is the deployment's revision ($rev)" || fail "REVISION column: $rev"
expect_exit 0 "get two by name" tend get deploy echo good -o name
[ "$(cat "$tmp/out")" = "$(printf 'deployment.apps/echo\ndeployment.apps/good')" ] &&
    ok "both listed" || fail "two names: $(cat "$tmp/out")"
expect_exit 1 "get a known and an unknown" tend get deploy echo nosuch
expect_grep "^echo " "$tmp/out" "the known one printed" && expect_grep '"nosuch" not found' "$tmp/err" \
    "the unknown one named"
expect_exit 0 "-o name fed back" tend get "$(tend get deploy echo -o name)"
expect_exit 0 "-o yaml of a list" tend get deploy -o yaml && expect_grep "^kind: DeploymentList$" \
    "$tmp/out" "a list in YAML is one List"
expect_exit 0 "-o json" tend get deploy -o json && [ "$(jq -r .kind "$tmp/out")" = DeploymentList ] ||
    fail "not a DeploymentList"
expect_exit 0 "-o yaml" tend get deploy echo -o yaml && expect_grep "^kind: Deployment$" "$tmp/out" "yaml"
[ "$(tail -c 1 "$tmp/out" | od -An -c | tr -d ' ')" = '\n' ] || fail "yaml does not end with a newline"
expect_exit 0 "-o name" tend get deploy -o name && expect_grep "^deployment.apps/echo$" "$tmp/out" "name"
expect_exit 0 "-l" tend get deploy -l app!=nothing,tier=test -o name
[ "$(wc -l <"$tmp/out")" -eq 2 ] || fail "-l: $(cat "$tmp/out")"
expect_exit 0 "-A" tend get pods -A && expect_grep "^NAMESPACE *NAME" "$tmp/out" "-A has NAMESPACE" &&
    expect_grep "^default *good-" "$tmp/out" "-A rows start with the namespace"
expect_exit 0 "get events" tend get events && expect_grep "ScalingReplicaSet" "$tmp/out" "events"
expect_exit 0 "events alias" tend events && expect_grep "ScalingReplicaSet" "$tmp/out" "events alias"
expect_exit 1 "unknown type" tend get widgets && expect_grep "widgets" "$tmp/err" "type named"
expect_exit 2 "bad -o" tend get pods -o xml
grep -q "$(printf '\033')" "$tmp/out" && fail "escape codes without a TTY"
script -qec "$bin/tend get deploy echo" /dev/null >"$tmp/tty" 2>&1
grep -E -q "^echo .* [0-9]+s" "$tmp/tty" && ok "relative ages on a TTY" || fail "TTY: $(cat "$tmp/tty")"
expect_exit 0 "get pods, not on a terminal" tend get pods -l app=echo
awk 'NR > 1 { print $NF }' "$tmp/out" | grep -E -v -q '^[0-9]+(s|m[0-9]*s?|h[0-9]*m?|d[0-9]*h?|y[0-9]*d?)$' &&
    fail "AGE is not an age: $(cat "$tmp/out")" || ok "AGE is an age, piped too ($(awk 'NR == 2 { print $NF }' "$tmp/out"))"
expect_exit 0 "--no-headers" tend get pods -l app=echo --no-headers
! grep -q '^NAME' "$tmp/out" && [ "$(wc -l <"$tmp/out")" -eq 2 ] && ok "--no-headers: the rows only" ||
    fail "$(cat "$tmp/out")"
expect_exit 0 "-L app --show-labels" tend get pods -l app=echo -L app,tier --show-labels
expect_grep '^NAME  *READY  *STATUS  *RESTARTS  *AGE  *APP  *TIER  *LABELS$' "$tmp/out" \
    "a column per label key, then LABELS"
expect_grep '^echo-[a-z0-9-]*  *1/1  *Running  *[0-9]*  *[0-9a-z]*  *echo  *app=echo,pod-template-hash=[a-z0-9]*$' \
    "$tmp/out" "each row: the label's value, nothing for a missing one, and every label sorted"
expect_exit 0 "--sort-by" tend get deploy --sort-by '{.metadata.name}' -o name
[ "$(cat "$tmp/out")" = "$(sort "$tmp/out")" ] && ok "--sort-by {.metadata.name}" || fail "$(cat "$tmp/out")"
expect_exit 0 "--sort-by a number" tend get deploy --sort-by .spec.replicas --no-headers
awk '{ split($2, a, "/"); print a[2] }' "$tmp/out" >"$tmp/counts"
[ "$(cat "$tmp/counts")" = "$(sort -n "$tmp/counts")" ] && ok "--sort-by .spec.replicas, as numbers" ||
    fail "$(cat "$tmp/out")"

echo "== get -w streams changes"
tend get pods -l app=good -w >"$tmp/watch" 2>&1 &
watcher=$!
sleep 0.5
expect_exit 0 "scale good" tend scale deploy/good --replicas=2 &&
    expect_grep "deployment.apps/good scaled" "$tmp/out" "scaled"
wait_for 10 has_pods good 2 && sleep 0.3
kill "$watcher"; wait "$watcher" 2>/dev/null
[ "$(grep -c '^good-' "$tmp/watch")" -ge 2 ] && ok "watch saw the new pod" ||
    fail "watch output: $(cat "$tmp/watch")"

echo "== API watch: resume from a resourceVersion"
rv=$(tend get deploy -o json | jq -r .metadata.resourceVersion)
curl -s -N --max-time 5 --unix-socket "$TEND_SOCKET" \
    "http://localhost/apis/apps/v1/namespaces/default/deployments?watch=true&resourceVersion=$rv" \
    >"$tmp/stream" &
curler=$!
sleep 0.3
tend scale deploy/good --replicas=1 >/dev/null
wait_for 10 has_pods good 1
sleep 0.3
kill "$curler" 2>/dev/null; wait "$curler" 2>/dev/null
jq -e -s 'map(select(.type == "MODIFIED" and .object.metadata.name == "good")) | length > 0' \
    "$tmp/stream" >/dev/null && ok "MODIFIED event after the version" ||
    fail "stream: $(head -c 400 "$tmp/stream")"
jq -e -s 'map(select(.type == "ADDED")) | length == 0' "$tmp/stream" >/dev/null ||
    fail "a resumed watch replayed ADDED objects"

echo "== describe"
expect_exit 0 "describe deploy NAME (kubectl's other form)" tend describe deploy echo &&
    expect_grep "Name: *echo" "$tmp/out" "describe TYPE NAME"
expect_exit 0 "rollout status deploy NAME" tend rollout status deploy echo
expect_exit 0 "scale deploy NAME" tend scale deploy echo --replicas=2 &&
    expect_grep "deployment.apps/echo scaled" "$tmp/out" "scale TYPE NAME"
expect_exit 1 "describe deploy without a name" tend describe deploy
expect_grep "which deployment? TYPE NAME or TYPE/NAME" "$tmp/err" "a type without a name says so"
expect_exit 0 "describe deploy" tend describe deploy/echo
for s in "Name: *echo" "Replicas:" "Conditions:" "NewReplicaSet:" "Events:"; do
    expect_grep "$s" "$tmp/out" "describe deploy: $s"
done
rs=$(tend get rs -l app=echo | awk 'NR > 1 && $2 > 0 { print $1 }')
expect_exit 0 "describe rs" tend describe "rs/$rs" && expect_grep "Controlled By: *Deployment/echo" \
    "$tmp/out" "rs owner"
pod=$(tend get pods -l app=echo | awk 'NR == 2 { print $1 }')
expect_exit 0 "describe pod" tend describe "pod/$pod" && expect_grep "Controlled By: *ReplicaSet/$rs" \
    "$tmp/out" "pod owner"
expect_exit 1 "describe unknown" tend describe deploy/nosuch
# what a pod or a client put in a text (a STATUS=, an annotation) reaches
# a terminal without its control characters
expect_api 200 "an annotation with an escape sequence" PATCH /apis/apps/v1/namespaces/default/deployments/echo \
    -H 'Content-Type: application/merge-patch+json' \
    --data-binary '{"metadata":{"annotations":{"note":"\u001b[2Jcleared\u0007"}}}'
expect_exit 0 "describe it" tend describe deploy echo
! grep -q "$(printf '\033')" "$tmp/out" && grep -q 'note=\\x1b\[2Jcleared\\x07' "$tmp/out" &&
    ok "describe writes control characters as \\xNN" || fail "describe: $(grep note "$tmp/out" | od -c | head -3)"
expect_api 200 "and off again" PATCH /apis/apps/v1/namespaces/default/deployments/echo \
    -H 'Content-Type: application/merge-patch+json' --data-binary '{"metadata":{"annotations":{"note":null}}}'

echo "== logs"
wait_for 5 sh -c "'$bin/tend' logs '$pod' | grep -q there"
expect_exit 0 "logs" tend logs "$pod" && expect_grep "^there$" "$tmp/out" "pod output"
expect_exit 0 "logs --tail=1" tend logs "$pod" --tail=1
[ "$(cat "$tmp/out")" = there ] || fail "--tail=1 gave: $(cat "$tmp/out")"
expect_exit 0 "logs deploy/echo" tend logs deploy/echo && expect_grep "^\[echo-[a-z0-9-]*\] hello$" \
    "$tmp/out" "prefixed lines"
timeout 1 "$bin/tend" logs -f "$pod" >"$tmp/follow" 2>&1
[ $? -eq 124 ] && ok "logs -f keeps following" || fail "logs -f returned"
grep -q "^there$" "$tmp/follow" || fail "logs -f printed: $(cat "$tmp/follow")"
expect_exit 1 "logs of an unknown pod" tend logs nosuch && expect_grep "not found" "$tmp/err" "logs NotFound"
expect_exit 0 "logs --tail=0" tend logs "$pod" --tail=0
[ -s "$tmp/out" ] && fail "--tail=0 printed: $(cat "$tmp/out")"
expect_exit 1 "logs pod/NAME of an unknown pod" tend logs pod/nosuch &&
    expect_grep 'pods "nosuch" not found' "$tmp/err" "the server's Status is printed"
expect_exit 1 "logs --previous with no previous instance" tend logs "$pod" --previous &&
    expect_grep "previous terminated container" "$tmp/err" "says there is no previous one"
# A follower whose client hangs up on a quiet pod is let go (its
# descriptors with it).
fds() { ls "/proc/$tendd_pid/fd" | wc -l; }
fd_before=$(fds)
followers=
for _ in 1 2 3 4 5 6 7 8 9 10; do
    timeout 0.3 "$bin/tend" logs -f "$pod" >/dev/null 2>&1 &
    followers="$followers $!"
done
# shellcheck disable=SC2086 # not a bare wait: tendd is a job of ours too
wait $followers
fds_back() { [ "$(fds)" -le $((fd_before + 2)) ]; }
wait_for 5 fds_back && ok "interrupted logs -f release their descriptors" ||
    fail "descriptors: $fd_before before, $(fds) after"
cat >"$tmp/odd.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: odd}
spec:
  replicas: 1
  selector: {matchLabels: {app: odd}}
  template:
    metadata: {labels: {app: odd}}
    spec:
      containers:
      - name: main
        command: ["/bin/sh", "-c", "sleep 1; printf 'late\\\\n'; printf 'a\\\\000b\\\\n'; seq 1 200000; sleep 1000"]
        env: [{name: TEST_MARKER, value: "$tmp"}]
YAML
tend apply -f "$tmp/odd.yaml" >/dev/null
odd_pod() { tend get pods -l app=odd | awk 'NR == 2 { print $1 }'; }
wait_for 5 sh -c "[ -n \"\$('$bin/tend' get pods -l app=odd | awk 'NR == 2')\" ]"
opod=$(odd_pod)
timeout 4 "$bin/tend" logs -f "$opod" >"$tmp/late" 2>&1
grep -qx late "$tmp/late" && ok "logs -f before the first line waits for it" ||
    fail "logs -f of a pod that had not written: $(head -3 "$tmp/late")"
expect_exit 0 "logs with a NUL byte" tend logs "$opod"
[ "$(sed -n 2p "$tmp/out" | od -An -c | tr -s ' ')" = " a \\0 b \\n" ] && ok "the NUL and what follows it" ||
    fail "line 2: $(sed -n 2p "$tmp/out" | od -An -c)"
expect_exit 0 "tail of a long log" tend logs "$opod" --tail=2
[ "$(cat "$tmp/out")" = "$(printf '199999\n200000')" ] && ok "--tail=2 of 200000 lines" ||
    fail "--tail=2: $(cat "$tmp/out")"
tend delete deploy/odd >/dev/null
cat >"$tmp/crash.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: crash}
spec:
  replicas: 1
  progressDeadlineSeconds: 2
  selector: {matchLabels: {app: crash}}
  template:
    metadata: {labels: {app: crash}}
    spec:
      containers:
      - name: main
        command: ["/bin/sh", "-c", "echo run \$\$\$\$; exit 3"]
        env: [{name: TEST_MARKER, value: "$tmp"}]
YAML
tend apply -f "$tmp/crash.yaml" >/dev/null
restarted() { tend get pods -l app=crash | awk 'NR > 1 && $4 >= 2 { f=1 } END { exit !f }'; }
wait_for 15 restarted && ok "crashing pod restarted" || fail "no restarts: $(tend get pods -l app=crash)"
# (the pod listed may be the dead one, replaced and gone a moment later:
# then the next listing's)
prev_logs() {
    cur=$(tend get pods -l app=crash | awk 'NR > 1 { r[$1]=$4 } END { m=-1; for (p in r) if (r[p] > m) { m=r[p]; n=p } print n }')
    tend logs "$cur" --previous >"$tmp/out" 2>"$tmp/err"
}
if wait_for 10 prev_logs; then
    expect_grep "^run [0-9]*$" "$tmp/out" "the previous instance's output"
else
    fail "logs --previous: $(cat "$tmp/err")"
fi
crashing() { tend get pods -l app=crash | grep -q CrashLoopBackOff; }
wait_for 15 crashing && ok "STATUS CrashLoopBackOff" || fail "no CrashLoopBackOff"
# A pod seen waiting may have started by the time describe runs (the first
# waits are 1 s and 2 s): describe one that is still waiting.
described_waiting() {
    w=$(tend get pods -l app=crash | awk '$3 == "CrashLoopBackOff" { print $1; exit }')
    [ -n "$w" ] && tend describe "pod/$w" >"$tmp/out" 2>&1 &&
        grep -q "State: *Waiting" "$tmp/out" && grep -q "Next Start: *in [0-9]*s (" "$tmp/out"
}
wait_for 20 described_waiting && ok "describe says how long the back-off has left" ||
    fail "no pod described while waiting out its back-off: $(cat "$tmp/out")"
expect_exit 0 "logs deploy/crash --previous in back-off" tend logs deploy/crash --previous &&
    expect_grep "run [0-9]*$" "$tmp/out" "a deployment waiting out its back-off: the last run's output"
waiting_said() {
    w=$(tend get pods -l app=crash | awk '$3 == "CrashLoopBackOff" { print $1; exit }')
    [ -n "$w" ] && ! tend logs "$w" >/dev/null 2>"$tmp/err" &&
        grep -q "container \"main\" in pod \"$w\" is waiting to start: CrashLoopBackOff" "$tmp/err"
}
wait_for 10 waiting_said && ok "logs of a pod that has not run yet: what it waits for" ||
    fail "logs of a waiting pod: $(cat "$tmp/err")"
# As a container restarted in place: one pod, RESTARTS counting, no dead
# pods left to match the selector (kubectl wait -l works after a crash).
tend get pods -l app=crash -o json >"$tmp/crash.json"
[ "$(jq '.items | length' "$tmp/crash.json")" = 1 ] &&
    [ "$(jq '[.items[] | select(.status.phase == "Failed")] | length' "$tmp/crash.json")" = 0 ] &&
    ok "a crashing replica is one pod, no dead ones kept" ||
    fail "pods: $(tend get pods -l app=crash)"
# The replica's pod is replaced at each crash (a new name): the one listed
# may be gone when describe asks for it (seen on a loaded machine), so
# list and describe again until one answers.
described_last() {
    p=$(tend get pods -l app=crash -o name | head -1)
    [ -n "$p" ] && tend describe "$p" >"$tmp/out" 2>&1 &&
        grep -q "Last State: *Terminated" "$tmp/out" && grep -q "Exit Code: *3" "$tmp/out"
}
wait_for 10 described_last && ok "describe shows the last run's end, with its exit code" ||
    fail "describe of the crashing pod: $(cat "$tmp/out")"

echo "== logs --timestamps and --since, across a tendd restart"
deploy tick 1 /bin/sh -c "echo x; sleep 3; echo y; exec sleep 1000" >"$tmp/tick.yaml"
tend apply -f "$tmp/tick.yaml" >/dev/null
tick=$(tend get pods -l app=tick -o name | head -1)
tick=${tick#pod/}
wrote() { tend logs "$tick" 2>/dev/null | grep -qx "$1"; }
wait_for 10 wrote x || fail "tick wrote no x"
# y is written while tendd is down: its time comes from the log's mtime
# when tendd is back.
stop_tendd TERM
sleep 4
t_down_end=$(date +%s)
start_tendd
wait_for 10 wrote y || fail "tick wrote no y"
expect_exit 0 "tend logs --timestamps" tend logs "$tick" --timestamps
xs=$(date -d "$(awk '$2 == "x" { print $1 }' "$tmp/out")" +%s)
ys=$(date -d "$(awk '$2 == "y" { print $1 }' "$tmp/out")" +%s)
[ $((ys - xs)) -ge 2 ] && [ $((ys - xs)) -le 4 ] && [ "$ys" -le "$t_down_end" ] &&
    ok "y, written while tendd was down, has its own time, 3 s after x" ||
    fail "x at $xs, y at $ys, tendd back at $t_down_end: $(cat "$tmp/out")"
expect_exit 0 "tend logs --since=1h" tend logs "$tick" --since=1h
[ "$(tr '\n' ' ' <"$tmp/out")" = "x y " ] && ok "--since=1h: both lines" || fail "$(cat "$tmp/out")"
expect_exit 0 "tend logs --since-time (y's)" tend logs "$tick" \
    --since-time="$(tend logs "$tick" --timestamps | awk '$2 == "y" { print $1 }')"
[ "$(cat "$tmp/out")" = y ] && ok "--since-time: y only" || fail "$(cat "$tmp/out")"
expect_exit 2 "tend logs --since=soon" tend logs "$tick" --since=soon
expect_grep "expected a duration" "$tmp/err" "a bad --since is named"
tend delete deploy/tick >/dev/null

echo "== rollout status: timeout and progress deadline"
cat >"$tmp/unready.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: unready}
spec:
  replicas: 1
  progressDeadlineSeconds: 4
  selector: {matchLabels: {app: unready}}
  template:
    metadata: {labels: {app: unready}}
    spec:
      containers:
      - name: main
        command: ["$testprog", "sleep"]
        env: [{name: TEST_MARKER, value: "$tmp"}]
        readinessProbe:
          exec: {command: ["/bin/false"]}
          periodSeconds: 1
YAML
tend apply -f "$tmp/unready.yaml" >/dev/null
expect_exit 0 "--watch=false" tend rollout status deploy/unready --watch=false &&
    expect_grep "Waiting for" "$tmp/out" "--watch=false prints the state once"
expect_exit 1 "status --timeout" tend rollout status deploy/unready --timeout=1s
expect_grep "timed out waiting for the condition" "$tmp/err" "timeout message"
expect_exit 1 "status past the deadline" tend rollout status deploy/unready --timeout=30s
expect_grep 'deployment "unready" exceeded its progress deadline' "$tmp/err" "deadline message"
expect_exit 1 "--watch=false of a failed rollout" tend rollout status deploy/unready --watch=false
unhealthy() { tend get events | grep -q "Unhealthy.*Readiness probe failed: command exited with status 1"; }
wait_for 5 unhealthy && ok "a pod that never becomes ready says why (Unhealthy event)" ||
    fail "$(tend get events)"
expect_exit 0 "status of a rolled-out deployment" tend rollout status deploy/good
expect_grep 'deployment "good" successfully rolled out' "$tmp/out" "rolled out message"

echo "== rollout pause, resume, restart, history, undo"
expect_exit 0 "pause" tend rollout pause deploy/good && expect_grep "deployment.apps/good paused" "$tmp/out" "paused"
expect_exit 1 "pause twice" tend rollout pause deploy/good && expect_grep "already paused" "$tmp/err" "already paused"
deploy good 1 "$testprog" sleep v2 >"$tmp/good2.yaml"
tend apply -f "$tmp/good2.yaml" >/dev/null
sleep 1
[ "$(tend get rs -l app=good | awk 'NR > 1' | wc -l)" -eq 1 ] && ok "paused: no new ReplicaSet" ||
    fail "a paused deployment rolled out"
expect_exit 0 "resume" tend rollout resume deploy/good && expect_grep "resumed" "$tmp/out" "resumed"
expect_exit 0 "status after resume" tend rollout status deploy/good --timeout=30s
expect_exit 0 "restart" tend rollout restart deploy/good && expect_grep "restarted" "$tmp/out" "restarted"
expect_exit 0 "status after restart" tend rollout status deploy/good --timeout=30s
expect_exit 0 "apply the same manifest after a restart" tend apply -f "$tmp/good2.yaml" &&
    expect_grep "deployment.apps/good unchanged" "$tmp/out" "the restart is kept: unchanged, no new rollout"
expect_exit 0 "history" tend rollout history deploy/good
for r in 1 2 3; do expect_grep "^$r " "$tmp/out" "revision $r in history"; done
expect_exit 0 "history --revision=2" tend rollout history deploy/good --revision=2 &&
    expect_grep "v2" "$tmp/out" "revision 2 shows its template"
expect_exit 1 "history --revision=9" tend rollout history deploy/good --revision=9
expect_exit 0 "undo --to-revision=1" tend rollout undo deploy/good --to-revision=1 &&
    expect_grep "rolled back" "$tmp/out" "undo message"
expect_exit 0 "status after undo" tend rollout status deploy/good --timeout=30s
tend get deploy good -o json | jq -e '.spec.template.spec.containers[0].command | index("v2") == null' \
    >/dev/null && ok "template of revision 1" || fail "not revision 1's template"
expect_exit 1 "undo to a missing revision" tend rollout undo deploy/good --to-revision=42 &&
    expect_grep "42" "$tmp/err" "missing revision named"
expect_exit 1 "undo of an unknown deployment" tend rollout undo deploy/nosuch &&
    expect_grep '^Error from server (NotFound): deployments.apps "nosuch" not found' "$tmp/err" \
    "undo NotFound as kubectl"
expect_api 200 "rollback subresource" POST /apis/apps/v1/namespaces/default/deployments/good/rollback \
    -H 'Content-Type: application/json' --data-binary '{"toRevision": 3}'
expect_exit 0 "status after the rollback" tend rollout status deploy/good --timeout=30s
expect_api 200 "a JSON patch removing restartedAt" PATCH /apis/apps/v1/namespaces/default/deployments/good \
    -H 'Content-Type: application/json-patch+json' --data-binary \
    '[{"op": "remove", "path": "/spec/template/metadata/annotations/kubectl.kubernetes.io~1restartedAt"}]' &&
    tend get deploy good -o json |
    jq -e '.spec.template.metadata.annotations["kubectl.kubernetes.io/restartedAt"] == null' >/dev/null &&
    ok "a patch (not an apply) that removes restartedAt removes it" ||
    fail "restartedAt: $(tend get deploy good -o json | jq -c .spec.template.metadata)"
expect_exit 0 "status after the patch" tend rollout status deploy/good --timeout=30s

echo "== scale and delete"
expect_exit 0 "scale echo" tend scale deploy/echo --replicas=3
wait_for 10 has_pods echo 3 && ok "3 echo pods" || fail "not 3 echo pods"
expect_exit 2 "scale without --replicas" tend scale deploy/echo
expect_exit 2 "scale to -1" tend scale deploy/echo --replicas=-1
# The /scale subresource: a Scale with the object's uid and version; a PUT
# conditional on it; every cause of a 422.
S=/apis/apps/v1/namespaces/default/deployments/echo/scale
expect_api 200 "GET scale" GET $S &&
    [ "$(jq_body .metadata.uid)" = "$(tend get deploy echo -o json | jq -r .metadata.uid)" ] &&
    [ "$(jq_body .metadata.resourceVersion)" = "$(tend get deploy echo -o json | jq -r .metadata.resourceVersion)" ] &&
    ok "a Scale carries the object's uid and resourceVersion" || fail "scale: $(cat "$tmp/body")"
jq '.spec.replicas = 2' "$tmp/body" >"$tmp/scale.json"
expect_api 200 "PUT scale at its version" PUT $S -H 'Content-Type: application/json' \
    --data-binary @"$tmp/scale.json" &&
    [ "$(jq_body .metadata.resourceVersion)" != "$(jq -r .metadata.resourceVersion "$tmp/scale.json")" ] &&
    ok "the answer has the new resourceVersion" || fail "after PUT: $(cat "$tmp/body")"
jq '.spec.replicas = 3' "$tmp/scale.json" >"$tmp/scale3.json"
expect_api 409 "PUT scale at a stale version" PUT $S -H 'Content-Type: application/json' \
    --data-binary @"$tmp/scale3.json" && [ "$(tend get deploy echo -o json | jq .spec.replicas)" = 2 ] &&
    ok "a stale Scale is a Conflict, and changes nothing"
expect_api 200 "scale back to 3" PATCH $S -H 'Content-Type: application/merge-patch+json' \
    --data-binary '{"spec": {"replicas": 3}}'
expect_api 422 "scale to -5" PATCH $S -H 'Content-Type: application/merge-patch+json' \
    --data-binary '{"spec": {"replicas": -5}}' &&
    [ "$(jq_body '.details.causes[0].field')" = spec.replicas ] &&
    jq_body '.details.causes[0].message' | grep -q -- "-5" && ok "422 names the field and the value" ||
    fail "422: $(cat "$tmp/body")"
# A manifest without spec.replicas leaves a hand-set count alone (as
# kubectl apply); one that names it sets it.
deploy echo 1 "$testprog" argv hello there | sed '/^  replicas:/d' >"$tmp/echo-norep.yaml"
expect_exit 0 "apply without replicas" tend apply -f "$tmp/echo-norep.yaml"
tend get deploy echo -o json | jq -e '.spec.replicas == 3' >/dev/null &&
    ok "replicas kept at 3" || fail "apply without replicas changed them"
victim=$(tend get pods -l app=echo | awk 'NR == 2 { print $1 }')
vpid=$(tend get pod "$victim" -o wide | awk 'NR == 2 { print $6 }')
expect_exit 0 "delete pod" tend delete "pod/$victim" &&
    expect_grep "^pod \"$victim\" deleted$" "$tmp/out" "delete message"
gone() { ! kill -0 "$vpid" 2>/dev/null; }
wait_for 10 gone && ok "deleted pod's process stopped" || fail "pid $vpid still alive"
wait_for 10 has_pods echo 3 && ok "and replaced" || fail "deleted pod not replaced"
pids=$(tend get pods -l app=echo -o wide | awk 'NR > 1 && $3 == "Running" { print $6 }')
expect_exit 0 "delete deploy" tend delete deploy/echo
all_gone() { for p in $pids; do kill -0 "$p" 2>/dev/null && return 1; done; return 0; }
wait_for 10 all_gone && ok "cascade stopped the processes" || fail "processes left: $pids"
gone_rs() { [ -z "$(tend get rs -l app=echo 2>/dev/null | awk 'NR > 1')" ]; }
wait_for 10 gone_rs && ok "its ReplicaSets went too" || fail "ReplicaSets left"
expect_exit 1 "delete it again" tend delete deploy/echo && expect_grep "not found" "$tmp/err" "NotFound"
expect_exit 0 "delete -f" tend delete -f "$tmp/crash.yaml" && expect_grep "deployment.apps \"crash\" deleted" \
    "$tmp/out" "delete -f message"

echo "== metrics"
expect_api 200 "metrics" GET /metrics
for m in 'tend_pods{phase="Running"}' tend_pod_starts_total 'tend_pods_lost_total{reason="signal"}' \
    tend_crashloop_backoffs_total 'tend_rollouts_total{event="completed"}' \
    tend_reconcile_pass_duration_seconds_bucket tend_store_commit_duration_seconds_bucket \
    tend_api_requests_total; do
    grep -q -F "$m" "$tmp/body" || fail "no $m in /metrics"
done
grep -q '^tend_api_requests_total{code="422"} [1-9]' "$tmp/body" && ok "metrics count 422s" ||
    fail "no 422 count: $(grep api_requests "$tmp/body")"

echo "== watch after a restart: 410 Expired for a version too old"
old_rv=$rv
stop_tendd TERM
start_tendd
api GET "/apis/apps/v1/namespaces/default/deployments?watch=true&resourceVersion=1&timeoutSeconds=1" >/dev/null
jq -e 'select(.type == "ERROR") | .object.code == 410' "$tmp/body" >/dev/null &&
    ok "ERROR 410 Expired for version 1" || fail "stream: $(head -c 300 "$tmp/body")"
: "$old_rv"

echo "== a version tendd has not reached: 504 with client-go's cause, list and watch alike"
expect_api 200 "list" GET "/apis/apps/v1/namespaces/default/deployments"
future=$(($(jq -r .metadata.resourceVersion "$tmp/body") + 1000))
for q in "" "watch=true&timeoutSeconds=1&"; do
    what=list
    [ -n "$q" ] && what=watch
    if expect_api 504 "$what from $future" GET \
        "/apis/apps/v1/namespaces/default/deployments?${q}resourceVersion=$future" &&
        jq -e '.reason == "Timeout" and .details.causes[0].reason == "ResourceVersionTooLarge"
               and (.message | startswith("Too large resource version: '"$future"'"))' \
            "$tmp/body" >/dev/null; then
        ok "$what from a future version: 504 Timeout, ResourceVersionTooLarge"
    else
        fail "$what from a future version: $(head -c 300 "$tmp/body")"
    fi
done

echo "== rollout status outlives a tendd restart"
sed 's/unready/never-ready/g; s/progressDeadlineSeconds: 4/progressDeadlineSeconds: 600/' \
    "$tmp/unready.yaml" >"$tmp/never.yaml"
tend apply -f "$tmp/never.yaml" >/dev/null
tend rollout status deploy/never-ready >"$tmp/rs.out" 2>&1 &
waiter=$!
sleep 0.5
stop_tendd TERM
start_tendd
sleep 1.5
kill -0 "$waiter" 2>/dev/null && ok "still waiting after the restart" ||
    fail "rollout status ended: $(cat "$tmp/rs.out")"
kill "$waiter" 2>/dev/null; wait "$waiter" 2>/dev/null
grep -q "timed out" "$tmp/rs.out" && fail "said timed out without --timeout"
# Away for longer than --timeout: it waits for tendd, then times out.
tend rollout status deploy/never-ready --timeout=3s >"$tmp/rs.out" 2>&1 &
waiter=$!
sleep 0.5
stop_tendd TERM
sleep 1
kill -0 "$waiter" 2>/dev/null && ok "waits while tendd is away" ||
    fail "rollout status ended while tendd was away: $(cat "$tmp/rs.out")"
wait "$waiter"
rc=$?
[ "$rc" -eq 1 ] && grep -q "timed out waiting for the condition" "$tmp/rs.out" &&
    grep -q "cannot be reached; waiting for it" "$tmp/rs.out" &&
    ok "--timeout ends the wait for a tendd that stays away" ||
    fail "rollout status --timeout with tendd away: exit $rc: $(cat "$tmp/rs.out")"
start_tendd
tend delete deploy/never-ready >/dev/null

echo "== the socket: peers other than root and the agent's uid are Forbidden"
# A copy of tend that uid 65534 can run whatever the build tree's modes.
chmod 755 "$tmp"
cp "$bin/tend" "$tmp/tend-any" && chmod 755 "$tmp/tend-any"
setpriv --reuid=65534 --regid=65534 --clear-groups "$tmp/tend-any" get pods >"$tmp/nb" 2>&1
expect_grep "cannot reach tendd at $TEND_SOCKET: permission denied" "$tmp/nb" \
    "a 0660 socket: permission denied, not connection refused"
# As if the socket's mode had been opened up by hand: the peer check still
# refuses.
chmod 755 "$tmp"
chmod 666 "$TEND_SOCKET"
nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
nobody curl -s --unix-socket "$TEND_SOCKET" -w '\n%{http_code}' http://localhost/api/v1/pods >"$tmp/nb"
[ "$(tail -1 "$tmp/nb")" = 403 ] && head -1 "$tmp/nb" | jq -e '.reason == "Forbidden"' >/dev/null &&
    ok "uid 65534 is Forbidden" || fail "uid 65534 got: $(cat "$tmp/nb")"
nobody "$tmp/tend-any" get pods >"$tmp/nb" 2>&1
rc=$?
[ "$rc" -eq 1 ] || fail "tend as uid 65534 exited $rc: $(cat "$tmp/nb")"
expect_grep "Forbidden" "$tmp/nb" "tend says Forbidden"
stop_tendd TERM
start_tendd --socket-group nogroup
[ "$(stat -c '%a %G' "$TEND_SOCKET")" = "660 nogroup" ] && ok "socket 0660, group nogroup" ||
    fail "socket is $(stat -c '%a %G' "$TEND_SOCKET")"
code=$(setpriv --reuid=65534 --regid=65534 --groups=65534 \
    curl -s --unix-socket "$TEND_SOCKET" -o /dev/null -w '%{http_code}' http://localhost/api/v1/pods)
[ "$code" = 200 ] && ok "a member of --socket-group may" || fail "group member got $code"

echo "== the TCP listener: HTTPS with the token; tend kubeconfig"
stop_tendd TERM
printf 'a-token-of-32-characters-or-so.\n' >"$tmp/token"
chmod 600 "$tmp/token"
start_tendd --listen 127.0.0.1:29399 --token-file "$tmp/token"
ca="$state/tls/ca.crt"
[ -f "$ca" ] && [ "$(stat -c %a "$state/tls/ca.key")" = 600 ] && [ "$(stat -c %a "$state/tls")" = 700 ] &&
    ok "a CA made in the state dir, its key 0600" || fail "tls: $(ls -l "$state/tls" 2>&1)"
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$ca" https://127.0.0.1:29399/api/v1/pods)
[ "$code" = 401 ] && ok "no token: 401" || fail "no token: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$ca" -H 'Authorization: Bearer wrong' \
    https://127.0.0.1:29399/api/v1/pods)
[ "$code" = 401 ] && ok "wrong token: 401" || fail "wrong token: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$ca" \
    -H 'Authorization: Bearer a-token-of-32-characters-or-so.' https://localhost:29399/api/v1/pods)
[ "$code" = 200 ] && ok "token: 200, the certificate good for localhost" || fail "token: $code"
code=$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:29399/api/v1/pods)
[ "$code" != 200 ] && ok "plain http is not served ($code)" || fail "plain http: 200"
# TLS 1.2 and 1.3 with AEAD only: an old version or CBC with SHA-1 gets no
# handshake (openssl allowed everything it can: SECLEVEL 0)
hs() { echo | timeout 5 openssl s_client -connect 127.0.0.1:29399 -CAfile "$ca" "$@" 2>&1 |
    grep 'Cipher is ' | grep -q -v 'Cipher is (NONE)'; }
hs -tls1_3 && hs -tls1_2 && ok "TLS 1.3 and 1.2 are served" || fail "no TLS 1.2/1.3 handshake"
! hs -tls1 -cipher 'DEFAULT:@SECLEVEL=0' && ! hs -tls1_1 -cipher 'DEFAULT:@SECLEVEL=0' &&
    ! hs -tls1_2 -cipher 'ECDHE-ECDSA-AES128-SHA:@SECLEVEL=0' &&
    ok "TLS 1.0, 1.1 and CBC with SHA-1 are refused" || fail "an old TLS version or cipher is served"
expect_exit 0 "tend kubeconfig" tend kubeconfig && cp "$tmp/out" "$tmp/kubeconfig"
expect_grep "server: https://127.0.0.1:29399" "$tmp/kubeconfig" "the kubeconfig names the listener"
expect_grep "token: a-token-of-32-characters-or-so." "$tmp/kubeconfig" "and the token"
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$ca" \
    -H 'Authorization: Bearer a-token-of-32-characters-or-so.' https://127.0.0.1:29399/apis/tend.io/v1/kubeconfig)
[ "$code" = 403 ] && ok "the kubeconfig is not given over TCP" || fail "over TCP: $code"
expect_exit 0 "tend kubeconfig --server" tend kubeconfig --server https://tend.example:443
expect_grep "server: https://tend.example:443" "$tmp/out" "--server replaces the address"
expect_exit 2 "tend kubeconfig --server http://" tend kubeconfig --server http://x:1
if command -v kubectl >/dev/null; then
    expect_exit 0 "kubectl with the kubeconfig" kubectl --kubeconfig "$tmp/kubeconfig" get pods
    expect_exit 0 "kubectl version" kubectl --kubeconfig "$tmp/kubeconfig" version
    ! grep -q "version difference" "$tmp/err" && ok "kubectl sees no version skew" ||
        fail "kubectl: $(cat "$tmp/err")"
fi
# A restart keeps the CA (kubeconfigs made before stay good), and makes a
# serving certificate for a new address; no --token-file makes a token in
# the state dir.
cp "$ca" "$tmp/ca-before"
stop_tendd TERM
start_tendd --listen 127.0.0.2:29399
cmp -s "$ca" "$tmp/ca-before" && ok "the CA is kept across restarts" || fail "a new CA"
[ "$(stat -c %a "$state/tls/token")" = 600 ] && ok "a token made in the state dir, 0600" ||
    fail "no token file"
code=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$ca" \
    -H "Authorization: Bearer $(cat "$state/tls/token")" https://127.0.0.2:29399/api/v1/pods)
[ "$code" = 200 ] && ok "the made token is accepted; a new address, a certificate for it" ||
    fail "made token, 127.0.0.2: $code"
tend kubeconfig | grep -q "token: $(cat "$state/tls/token")" && ok "tend kubeconfig gives it" ||
    fail "tend kubeconfig does not give the made token"
# The user's certificate (here the one tendd made, as any PEM pair): served
# as given, and the kubeconfig carries no CA of tendd's (the system's then).
cp "$state/tls/server.crt" "$tmp/user.crt"
cp "$state/tls/server.key" "$tmp/user.key"
stop_tendd TERM
start_tendd --listen 127.0.0.2:29399 --tls-cert "$tmp/user.crt" --tls-key "$tmp/user.key"
served=$(echo | openssl s_client -connect 127.0.0.2:29399 2>/dev/null | openssl x509 -noout -fingerprint)
[ -n "$served" ] && [ "$served" = "$(openssl x509 -in "$tmp/user.crt" -noout -fingerprint)" ] &&
    ok "--tls-cert: that certificate is served" || fail "served: $served"
tend kubeconfig >"$tmp/kc-user"
! grep -q certificate-authority-data "$tmp/kc-user" && ok "and the kubeconfig names no CA of tendd's" ||
    fail "$(cat "$tmp/kc-user")"
stop_tendd TERM
start_tendd
expect_exit 1 "tend kubeconfig with no listener" tend kubeconfig
expect_grep "serves no HTTPS listener: start it with --listen" "$tmp/err" "says how to get one"

finish
