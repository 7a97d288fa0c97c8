#!/bin/sh
# Rollouts beyond Kubernetes, through the real tendd, real processes and
# the example server: a held socket (tend.io/listen) that every replica of
# every revision accepts from — no request fails across rolling updates,
# nor across a tendd restart in the middle of one — and readiness and
# liveness by notify (tend.io/notify).
. "$(dirname "$0")/lib.sh"

command -v jq >/dev/null || { echo "jq missing (make deps)"; exit 77; }
command -v curl >/dev/null || { echo "curl missing (make deps)"; exit 77; }
command -v ss >/dev/null || { echo "ss missing (iproute2; make deps)"; exit 77; }
web="$bin/tend-example-web"
port=$((17000 + $$ % 1000)) # below the ephemeral ports (32768-) and the fleet tests' etcd (20000-)

# web NAME VERSION [ANNOTATIONS] [ARGS]: a deployment of the example server,
# 3 replicas, a held socket on 127.0.0.1:$port unless ANNOTATIONS say else.
web() {
    cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata:
  name: $1
spec:
  replicas: ${REPLICAS:-3}
  selector:
    matchLabels: {app: $1}
  strategy:
    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}
  template:
    metadata:
      labels: {app: $1}
      annotations: {${LEASED:+"tend.io/lease-ports": "http", }${3:-"tend.io/listen": "http@127.0.0.1", "tend.io/notify": "ready"}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: web
        command: ["$web", "--version=$2", "--ready-after=0.5", "--drain=1" ${4:-}]
        # a LISTEN_FDS of its own: tend's must win (it has one fd, not 7)
        env: [{name: TEST_MARKER, value: "$tmp"}, {name: LISTEN_FDS, value: "7"}]
        ${LEASED:+#}ports: [{name: http, containerPort: $port}]
YAML
}

api() { curl -s --unix-socket "$TEND_SOCKET" "http://localhost$1"; }
pods_json() { api "/api/v1/namespaces/default/pods?labelSelector=app%3D$1"; }
# pids APP: the pids of the running pods of APP (not those terminating)
pids() {
    pods_json "$1" | jq -r '.items[] | select(.status.phase == "Running" and
        .metadata.deletionTimestamp == null) |
        .status.containerStatuses[0].containerID | sub("process://"; "")'
}
# socket_of PID FD: the socket inode behind a descriptor
socket_of() { readlink "/proc/$1/fd/$2" 2>/dev/null; }

# load: requests one after another to the held port until $tmp/stop
# exists; then "ok failed" in $tmp/load.
load() {
    good=0 bad=0
    while [ ! -e "$tmp/stop" ]; do
        if curl -s -f -m 5 -o /dev/null "http://127.0.0.1:$port/"; then
            good=$((good + 1))
        else
            bad=$((bad + 1))
        fi
    done
    echo "$good $bad" >"$tmp/load"
}
load_start() { rm -f "$tmp/stop" "$tmp/load"; load & loader=$!; }
load_stop() { touch "$tmp/stop"; wait "$loader"; read -r good bad <"$tmp/load"; }
# pod_of APP: the name of its first pod
pod_of() { pods_json "$1" | jq -r '.items[0].metadata.name'; }
# notify_socket_of APP: the NOTIFY_SOCKET its first running pod was given
notify_socket_of() {
    tr '\0' '\n' <"/proc/$(pids "$1" | head -1)/environ" | sed -n 's/^NOTIFY_SOCKET=//p'
}

start_tendd

echo "== a held socket: one listening socket, tendd's, passed to every replica as fd 3"
web front v1 | tend apply -f - >/dev/null || fail "apply"
tend rollout status deploy/front --timeout=30s >/dev/null || fail "rollout of v1"
ss -ltnp "sport = :$port" >"$tmp/ss"
expect_grep "tendd" "$tmp/ss" "tendd holds the listening socket on :$port"
n=0 first=
for p in $(pids front); do
    s=$(socket_of "$p" 3)
    [ -n "$first" ] || first=$s
    [ "$s" = "$first" ] && case $s in socket:*) n=$((n + 1)) ;; esac
    tr '\0' '\n' <"/proc/$p/environ" >"$tmp/env"
    grep -qx "LISTEN_PID=$p" "$tmp/env" || fail "pid $p: LISTEN_PID is not its own pid"
    grep -qx "LISTEN_FDS=1" "$tmp/env" || fail "pid $p: no LISTEN_FDS=1"
    [ "$(grep -c '^LISTEN_FDS=' "$tmp/env")" -eq 1 ] || fail "pid $p: the container's LISTEN_FDS=7 is there too"
    grep -qx "LISTEN_FDNAMES=http" "$tmp/env" || fail "pid $p: no LISTEN_FDNAMES=http"
done
[ "$n" -eq 3 ] && ok "the 3 replicas have one socket as fd 3 ($first), with LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES" ||
    fail "replicas with the same socket as fd 3: $n of 3"
held_socket=$first
curl -s "http://127.0.0.1:$port/" | grep -q "tend-example-web v1" && ok "the socket serves v1" ||
    fail "no answer of v1 on :$port"

echo "== three rolling updates under load: no request fails"
load_start
for v in v2 v3 v4; do
    web front $v | tend apply -f - >/dev/null || fail "apply $v"
    tend rollout status deploy/front --timeout=60s >/dev/null || fail "rollout of $v"
done
load_stop
[ "$bad" -eq 0 ] && [ "$good" -gt 50 ] && ok "three rolling updates under load: $good requests, none failed" ||
    fail "three rolling updates under load: $bad of $((good + bad)) requests failed"
curl -s "http://127.0.0.1:$port/" | grep -q "v4" || fail "v4 does not answer after the rollouts"

echo "== a tendd restart in the middle of a rolling update: no request fails, the socket comes back"
load_start
# The new pods say READY=1 4 s after they start, after tendd is back: one
# said while no tendd runs is lost without systemd's fd store (README,
# notify; issue 33), and with 0.5 s a loaded machine sometimes put it in
# that window, the rollout then waiting for good.
web front v7 '' ', "--ready-after=4"' | tend apply -f - >/dev/null || fail "apply v7"
sleep 0.7
stop_tendd TERM
start_tendd
tend rollout status deploy/front --timeout=60s >/dev/null || fail "the rollout to v7 across a restart"
load_stop
[ "$bad" -eq 0 ] && [ "$good" -gt 50 ] && ok "rollout across a tendd restart: $good requests, none failed" ||
    fail "rollout across a tendd restart: $bad of $((good + bad)) requests failed"
curl -s "http://127.0.0.1:$port/" | grep -q "v7" || fail "v7 does not answer after the restart"
ss -ltnp "sport = :$port" >"$tmp/ss"
expect_grep "tendd" "$tmp/ss" "the new tendd holds the socket again"
[ "$(grep -c LISTEN "$tmp/ss")" -eq 1 ] && ok "one listening socket on :$port, never a second" ||
    fail "listening sockets on :$port: $(cat "$tmp/ss")"
n=0
for p in $(pids front); do
    [ "$(socket_of "$p" 3)" = "$held_socket" ] && n=$((n + 1))
done
[ "$n" -eq 3 ] && ok "the replicas started by the new tendd have the socket of the first ($held_socket)" ||
    fail "replicas with the first socket after the restart: $n of 3"

echo "== another deployment cannot have the port"
web other v1 | tend apply -f - >/dev/null || fail "apply other"
wait_for 10 sh -c "$bin/tend get events 2>/dev/null | grep -q 'is held for default/front'" &&
    ok "a pod of another deployment is refused the port, with who holds it" ||
    { fail "no 'held for default/front' in the events"; tend get events | tail -5; }
tend delete deploy/other >/dev/null

echo "== bad annotations are refused with the field path, and change nothing"
gen=$(api /apis/apps/v1/namespaces/default/deployments/front | jq .metadata.generation)
web front v8 '"tend.io/listen": "http@localhost"' | tend apply -f - >/dev/null 2>"$tmp/err"
expect_grep 'spec.template.metadata.annotations\[tend.io/listen\]: Invalid value: "http@localhost"' \
    "$tmp/err" "a bad tend.io/listen names its field"
web front v8 '"tend.io/listen": "nope"' | tend apply -f - >/dev/null 2>"$tmp/err"
expect_grep 'port "nope" is not among spec.template.spec.containers\[0\].ports' "$tmp/err" \
    "tend.io/listen naming no port says so"
web front v8 '"tend.io/listen": "http", "tend.io/notify": "ready,watchdog=forever"' |
    tend apply -f - >/dev/null 2>"$tmp/err"
expect_grep 'tend.io/notify\]: Invalid value: "ready,watchdog=forever": watchdog=forever' "$tmp/err" \
    "a bad tend.io/notify names its field"
[ "$(api /apis/apps/v1/namespaces/default/deployments/front | jq .metadata.generation)" = "$gen" ] &&
    ok "the refused applies changed nothing (generation $gen)" || fail "a refused apply changed the deployment"
tend delete deploy/front >/dev/null

echo "== readiness by notify: ready only once the pod says READY=1"
LEASED=" " REPLICAS=1 web late v1 '"tend.io/notify": "ready"' | sed 's/--ready-after=0.5/--ready-after=2.5/' |
    tend apply -f - >/dev/null || fail "apply late"
wait_for 10 sh -c "$bin/tend get pods -l app=late | grep -q Running" || fail "late does not run"
started=$(date +%s.%N)
tend get pods -l app=late | grep -q "0/1" && ok "running, not ready before READY=1" ||
    fail "ready before READY=1: $(tend get pods -l app=late)"
# someone else speaking for it is not heard (the kernel's credentials)
NOTIFY_SOCKET=$(notify_socket_of late) systemd-notify --ready 2>/dev/null
sleep 0.5
tend get pods -l app=late | grep -q "0/1" && ok "READY=1 from a process not of the pod is not heard" ||
    fail "a stranger's READY=1 made the pod ready"
wait_for 10 sh -c "$bin/tend get pods -l app=late | grep -q 1/1" || fail "late never became ready"
took=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
echo "  ready after ${took}s more"
pods_json late | jq -r '.items[0].metadata.annotations["tend.io/status"]' >"$tmp/status"
expect_grep "^serving v1$" "$tmp/status" "STATUS= shows as the pod's tend.io/status annotation"
tend describe "pod/$(pod_of late)" >"$tmp/describe"
expect_grep "tend.io/status" "$tmp/describe" "describe shows the STATUS="

echo "== READY=1 is remembered across a tendd restart, whatever the probe said then"
cat >"$tmp/both.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: both}
spec:
  replicas: 1
  selector: {matchLabels: {app: both}}
  template:
    metadata:
      labels: {app: both}
      annotations: {tend.io/notify: "ready", tend.io/lease-ports: http}
    spec:
      terminationGracePeriodSeconds: 2
      containers:
      - name: web
        command: ["$web", "--ready-after=0.3"]
        env: [{name: TEST_MARKER, value: "$tmp"}]
        readinessProbe: {exec: {command: [test, -f, "$tmp/ok"]}, periodSeconds: 1}
YAML
touch "$tmp/ok"
tend apply -f "$tmp/both.yaml" >/dev/null || fail "apply both"
both_ready() { tend get pods -l app=both | grep -q "1/1"; }
both_unready() { tend get pods -l app=both | grep -q "0/1"; }
wait_for 10 both_ready && ok "ready: the probe and READY=1 both say so" || fail "both never ready"
rm "$tmp/ok"
wait_for 10 both_unready && ok "the probe failing makes it unready" || fail "still ready without the file"
both_pid=$(pids both)
# A descriptor sent to a pod's notify socket (by anyone: a local user, a
# pod) is refused by the kernel where it can (SO_PASSRIGHTS), and else
# closed without waiting: here a TCP socket with unsent data and a 20 s
# linger, whose plain close() would hold the loop for 20 s.
cat >"$tmp/linger.py" <<'PY'
import array, os, signal, socket, struct, subprocess, sys, time
name, sock, tendd = sys.argv[1], sys.argv[2], int(sys.argv[3])
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
c = socket.create_connection(srv.getsockname())
c.setblocking(False)
try:
    while True:
        c.send(b"x" * 65536)
except BlockingIOError:
    pass
c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 20))
u = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
# tendd stopped meanwhile: the datagram's reference is the last when it reads it
os.kill(tendd, signal.SIGSTOP)
try:
    u.sendmsg([b"STATUS=fd"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [c.fileno()]))],
              0, name)
    print("sent")
except PermissionError:
    print("refused by the kernel")
c.close()
os.kill(tendd, signal.SIGCONT)
worst = 0.0
for _ in range(20):
    t = time.monotonic()
    subprocess.run(["curl", "-s", "-o", "/dev/null", "--max-time", "30", "--unix-socket", sock,
                    "http://localhost/healthz"])
    worst = max(worst, time.monotonic() - t)
    time.sleep(0.1)
print("worst %.3f" % worst)
PY
/usr/bin/python3 "$tmp/linger.py" "$(notify_socket_of both)" "$TEND_SOCKET" "$tendd_pid" \
    >"$tmp/linger.out" 2>&1
worst=$(awk '/^worst/ { print $2 }' "$tmp/linger.out")
awk -v w="$worst" 'BEGIN { exit !(w != "" && w < 0.5) }' &&
    ok "a lingering socket sent to a notify socket ($(head -1 "$tmp/linger.out")): the API answers throughout (worst ${worst} s)" ||
    fail "the loop stalled on a received descriptor: $(cat "$tmp/linger.out")"
# While no tendd runs, a local user cannot take a pod's notify socket (an
# abstract name could be bound by anyone, and the next tendd then could
# not): it is a path in a directory only root writes in.
ns=$(notify_socket_of both)
stop_tendd TERM
cat >"$tmp/squat.py" <<'PY'
import os, socket, sys, time
name = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
try:
    if not name.startswith("@"):
        try:
            os.unlink(name)  # a squatter takes the name away first
        except FileNotFoundError:
            pass
    s.bind("\0" + name[1:] if name.startswith("@") else name)
except OSError as e:
    print("refused: %s" % e.strerror, flush=True)
    sys.exit(0)
print("bound", flush=True)
time.sleep(4)
PY
setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 - "$ns" \
    <"$tmp/squat.py" >"$tmp/squat.out" 2>&1 &
squatter=$!
sleep 0.5
start_tendd
wait "$squatter"
grep -q "^refused: Permission denied" "$tmp/squat.out" &&
    ok "while tendd was down, a local user could not bind the pod's notify socket ($ns)" ||
    fail "a local user bound $ns while tendd was down: $(cat "$tmp/squat.out")"
[ "$(stat -c '%u %a' "$(dirname "$ns")")" = "0 755" ] && [ "$(stat -c '%u %a %F' "$ns")" = "0 600 socket" ] &&
    ok "$(dirname "$ns"): root's, 0755; the socket: the pod's user's, 0600" ||
    fail "$(stat -c '%n %u %a %F' "$(dirname "$ns")" "$ns" 2>&1)"
# A user who is not the pod's cannot send to it at all: the kernel refuses,
# and a flood costs tendd nothing (with 0666, one took a core of tendd's).
cat >"$tmp/stranger.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
try:
    s.sendto(b"READY=1", sys.argv[1])
    print("sent")
except OSError as e:
    print("refused: %s" % e.strerror)
PY
setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 - "$ns" \
    <"$tmp/stranger.py" >"$tmp/stranger.out" 2>&1
grep -q "^refused: Permission denied" "$tmp/stranger.out" &&
    ok "another user's datagram to the pod's notify socket: refused by the kernel" ||
    fail "another user could send to $ns: $(cat "$tmp/stranger.out")"
grep -q "binding its NOTIFY_SOCKET" "$tmp/tendd.log" && fail "tendd could not bind a pod's notify socket"
touch "$tmp/ok"
wait_for 10 both_ready && [ "$(pids both)" = "$both_pid" ] &&
    ok "after the restart the probe passes again: ready, READY=1 not needed again (same pid)" ||
    fail "not ready after the restart: $(tend get pods -l app=both)"
tend delete deploy/both >/dev/null
wait_for 15 sh -c "[ ! -e '$ns' ]" && ok "the pod gone, its notify socket is too" ||
    fail "$ns outlived its pod"

echo "== a pod running as another user says READY=1 through its own socket"
cat >"$tmp/asnobody.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: asnobody}
spec:
  replicas: 1
  selector: {matchLabels: {app: asnobody}}
  template:
    metadata: {labels: {app: asnobody}, annotations: {"tend.io/notify": "ready"}}
    spec:
      securityContext: {runAsUser: 65534, runAsGroup: 65534}
      containers:
      - name: main
        # the main process says it: a helper such as systemd-notify exits
        # at once, and may be gone when tendd reads its message, which is
        # then not heard (its sender cannot be placed in the pod; README)
        command:
        - /usr/bin/python3
        - -c
        - |
          import os, socket, time
          time.sleep(0.5)
          socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"READY=1", os.environ["NOTIFY_SOCKET"])
          time.sleep(1000)
YAML
tend apply -f "$tmp/asnobody.yaml" >/dev/null || fail "apply asnobody"
wait_for 10 sh -c "$bin/tend get pods -l app=asnobody | grep -q 1/1" &&
    [ "$(stat -c '%u %a' "$(notify_socket_of asnobody)")" = "65534 600" ] &&
    ok "runAsUser 65534: its socket is 65534's (0600), and its READY=1 is heard" ||
    fail "asnobody: $(tend get pods -l app=asnobody) $(stat -c '%u %a' "$(notify_socket_of asnobody)" 2>&1)"
tend delete deploy/asnobody >/dev/null

echo "== liveness by notify: a pod whose watchdog stops is replaced, with the reason"
LEASED=" " REPLICAS=1 web hang v1 '"tend.io/notify": "ready,watchdog=1s"' ', "--watchdog-stop-after=2"' |
    tend apply -f - >/dev/null || fail "apply hang"
wait_for 15 sh -c "$bin/tend get events 2>/dev/null | grep -q 'no WATCHDOG=1 within 1s'" &&
    ok "a missed watchdog stops the pod: 'Liveness probe failed: watchdog: no WATCHDOG=1 within 1s'" ||
    { fail "no watchdog event"; tend get events | tail; }
replaced_hang() {
    pods_json hang | jq -e '.items[] | select(.status.phase == "Running" and
        .status.containerStatuses[0].restartCount >= 1)' >/dev/null
}
n=0
while [ $n -lt 100 ] && ! replaced_hang; do sleep 0.1; n=$((n + 1)); done
replaced_hang && ok "and it is replaced (restartCount 1, running)" || fail "the hung pod was not replaced"
tend delete deploy/hang >/dev/null

echo "== WATCHDOG=trigger from a pod with no watchdog declared: replaced, and tendd lives on"
# the pod's main process speaks for it (--pid: as root, the shell's pid);
# \$\$\$\$: tend's \$(VAR) expansion makes it \$\$ for sh
cat >"$tmp/trigger.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: trigger}
spec:
  replicas: 1
  selector: {matchLabels: {app: trigger}}
  template:
    metadata:
      labels: {app: trigger}
      annotations: {tend.io/notify: "ready"}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        command: [/bin/sh, -c, "systemd-notify --pid=\$\$\$\$ READY=1; sleep 1; systemd-notify --pid=\$\$\$\$ WATCHDOG=trigger; exec sleep 100"]
        env: [{name: TEST_MARKER, value: "$tmp"}]
YAML
tend apply -f "$tmp/trigger.yaml" >/dev/null || fail "apply trigger"
triggered() { tend get events 2>/dev/null | grep -q "the pod sent WATCHDOG=trigger"; }
wait_for 15 triggered && ok "WATCHDOG=trigger stops the pod, with the reason" ||
    fail "no trigger event: $(tend get events | tail -3)"
kill -0 "$tendd_pid" 2>/dev/null && tend version >/dev/null 2>&1 && ok "tendd still answers" ||
    fail "tendd died on WATCHDOG=trigger"
tend delete deploy/trigger >/dev/null

echo "== automatic rollback: a crash-looping revision goes back to the last that completed, once"
# prog NAME ANNOTATIONS REPLICAS DEADLINE V ARGS...: tend-testprog ARGS
prog() {
    name=$1 ann=$2 replicas=$3 deadline=$4 v=$5
    shift 5
    args=
    for a in "$@"; do args="$args\"$a\", "; done
    cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata:
  name: $name
  annotations: {$ann}
spec:
  replicas: $replicas
  minReadySeconds: 1
  progressDeadlineSeconds: $deadline
  selector: {matchLabels: {app: $name}}
  template:
    metadata: {labels: {app: $name}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        command: ["$testprog", ${args%, }]
        env: [{name: TEST_MARKER, value: "$tmp"}, {name: V, value: "$v"}]
YAML
}
command_of() { api "/apis/apps/v1/namespaces/default/deployments/$1" | jq -c '.spec.template.spec.containers[0].command[1:]'; }
prog ar '"tend.io/auto-rollback": "true"' 2 600 v1 sleep | tend apply -f - >/dev/null
tend rollout status deploy/ar --timeout=30s >/dev/null || fail "ar v1"
prog ar '"tend.io/auto-rollback": "true"' 2 600 v2 exit 1 | tend apply -f - >/dev/null
expect_exit 1 "rollout status of a rolled-back rollout fails" tend rollout status deploy/ar --timeout=60s
expect_grep 'deployment "ar" was rolled back automatically: Revision 2 failed (CrashLoopBackOff: 1 replica of replica set "ar-[a-z0-9]*" in CrashLoopBackOff); rolled back to revision 1 (now revision 3)' \
    "$tmp/err" "rollout status says which revision failed, why, and where it went"
[ "$(command_of ar)" = '["sleep"]' ] && ok "the template is revision 1's again" || fail "template: $(command_of ar)"
tend get events >"$tmp/events"
expect_grep "Warning *RolledBack *deployment/ar .*Revision 2 failed (CrashLoopBackOff" "$tmp/events" \
    "a Warning event RolledBack"
api /apis/apps/v1/namespaces/default/deployments/ar |
    jq -e '.status.conditions[] | select(.type == "RolledBack" and .status == "True" and .reason == "CrashLoopBackOff")' \
    >/dev/null && ok "a RolledBack condition with the reason" || fail "no RolledBack condition"
tend describe deploy/ar >"$tmp/describe"
expect_grep "Rolled back: *Revision 2 failed" "$tmp/describe" "describe shows the rollback"
tend rollout status deploy/ar --timeout=30s --watch=false >/dev/null 2>&1
sleep 3
[ "$(tend get events | grep -c 'RolledBack *deployment/ar')" -eq 1 ] && [ "$(command_of ar)" = '["sleep"]' ] &&
    ok "no loop: one rollback, and the failed template is not tried again" ||
    fail "more than one rollback: $(tend get events | grep RolledBack)"
running_ar() { [ "$(pods_json ar | jq '[.items[] | select(.status.phase == "Running" and .metadata.deletionTimestamp == null)] | length')" -eq 2 ]; }
wait_for 10 running_ar && ok "2 replicas of revision 1's template run" || fail "ar: $(tend get pods -l app=ar)"
# Applied again, the failed template is a new try: a new failure, a new rollback.
prog ar '"tend.io/auto-rollback": "true"' 2 600 v2 exit 1 | tend apply -f - >/dev/null
expect_exit 1 "applied again, it fails again" tend rollout status deploy/ar --timeout=60s
[ "$(tend get events | grep -c 'RolledBack *deployment/ar')" -eq 2 ] && ok "and is rolled back again, once" ||
    fail "rollbacks: $(tend get events | grep -c 'RolledBack *deployment/ar')"

echo "== automatic rollback on the progress deadline; none without the annotation"
prog dl '"tend.io/auto-rollback": "true"' 1 3 v1 sleep | tend apply -f - >/dev/null
tend rollout status deploy/dl --timeout=30s >/dev/null || fail "dl v1"
# pods that never become ready: a readiness probe that always fails
prog dl '"tend.io/auto-rollback": "true"' 1 3 v2 sleep |
    sed 's/^      - name: main$/      - name: main\n        readinessProbe: {exec: {command: [\/bin\/false]}, periodSeconds: 1}/' |
    tend apply -f - >/dev/null
expect_exit 1 "a rollout past its deadline" tend rollout status deploy/dl --timeout=60s
expect_grep "Revision 2 failed (ProgressDeadlineExceeded: ReplicaSet .* has timed out progressing.); rolled back to revision 1" \
    "$tmp/err" "rolled back when its progress deadline passed"
prog nar '' 1 600 v1 sleep | tend apply -f - >/dev/null
tend rollout status deploy/nar --timeout=30s >/dev/null || fail "nar v1"
prog nar '' 1 600 v2 exit 1 | tend apply -f - >/dev/null
sleep 4
[ "$(command_of nar)" = '["exit","1"]' ] && ! tend get events | grep -q "RolledBack *deployment/nar" &&
    ok "without tend.io/auto-rollback, a failing rollout stays" || fail "nar was rolled back"
tend delete deploy/ar deploy/dl deploy/nar >/dev/null

echo "== canaries: N new pods, then the rollout waits for promotion, within the bounds"
canary='"tend.io/canary": "1"'
prog can "$canary" 4 2 v1 sleep | tend apply -f - >/dev/null
tend rollout status deploy/can --timeout=30s >/dev/null || fail "can v1"
# bounds, sampled throughout: at most 4 + 1 pods (terminating ones too), at
# least 4 - 1 available
sample() {
    while [ ! -e "$tmp/stop-sample" ]; do
        pods_json can | jq -r '[.items[] | select(.status.phase != "Failed" and .status.phase != "Succeeded")] |
            "\(length) \([.[] | select(.status.conditions // [] | any(.type == "Ready" and .status == "True"))] | length)"'
        sleep 0.1
    done >"$tmp/samples"
}
rm -f "$tmp/stop-sample"
sample &
sampler=$!
prog can "$canary" 4 2 v2 sleep | tend apply -f - >/dev/null
waiting() { tend rollout status deploy/can --watch=false 2>/dev/null | grep -q "1 of 1 canaries .* ready; waiting for promotion"; }
wait_for 20 waiting && ok "rollout status: 1 of 1 canaries ready, waiting for promotion" ||
    fail "status: $(tend rollout status deploy/can --watch=false 2>&1)"
sleep 3 # more than progressDeadlineSeconds (2): waiting is not failing
tend rollout status deploy/can --watch=false >"$tmp/out" 2>&1 && grep -q "waiting for promotion" "$tmp/out" &&
    ok "still waiting past the progress deadline, not failed" || fail "after the deadline: $(cat "$tmp/out")"
tend get rs -l app=can -o json | jq -r '.items[] | "\(.spec.template.spec.containers[0].env[1].value) \(.spec.replicas)"' |
    sort >"$tmp/rs"
printf 'v1 3\nv2 1\n' | cmp -s - "$tmp/rs" && ok "1 canary of v2 beside 3 of v1" || fail "replica sets: $(cat "$tmp/rs")"
tend describe deploy/can >"$tmp/describe"
expect_grep "Canaries: *1 of 1 canaries .* waiting for promotion" "$tmp/describe" "describe says so"
expect_exit 0 "tend rollout promote" tend rollout promote deploy/can
tend rollout status deploy/can --timeout=60s >/dev/null && ok "promoted, the rollout completes" ||
    fail "after promote: $(tend rollout status deploy/can --watch=false 2>&1)"
touch "$tmp/stop-sample"
wait "$sampler"
awk '$1 > 5 || $2 < 3 { bad = bad " " $0 } END { if (bad) { print "out of bounds:" bad; exit 1 } }' \
    "$tmp/samples" && ok "bounds held throughout ($(wc -l <"$tmp/samples") samples: pods <= 5, ready >= 3)" ||
    fail "$(awk '$1 > 5 || $2 < 3' "$tmp/samples" | head -3)"
api /apis/apps/v1/namespaces/default/deployments/can | jq -e '.metadata.annotations["tend.io/promote"] == null' \
    >/dev/null && ok "the promote request is taken off the deployment" || fail "tend.io/promote left behind"

echo "== promote as kubectl would (an annotation), undo abandons canaries, automatic promotion"
prog can "$canary" 4 600 v3 sleep | tend apply -f - >/dev/null
waiting3() { tend rollout status deploy/can --watch=false 2>/dev/null | grep -q "revision 3) ready; waiting"; }
wait_for 20 waiting3 || fail "v3 canary not waiting"
curl -s --unix-socket "$TEND_SOCKET" -X PATCH -H "Content-Type: application/merge-patch+json" \
    -d '{"metadata":{"annotations":{"tend.io/promote":"3"}}}' \
    http://localhost/apis/apps/v1/namespaces/default/deployments/can >/dev/null
tend rollout status deploy/can --timeout=60s >/dev/null && ok "tend.io/promote=3 (kubectl annotate) promotes revision 3" ||
    fail "annotation did not promote"
prog can "$canary" 4 600 v4 sleep | tend apply -f - >/dev/null
waiting4() { tend rollout status deploy/can --watch=false 2>/dev/null | grep -q "revision 4) ready; waiting"; }
wait_for 20 waiting4 || fail "v4 canary not waiting"
expect_exit 0 "rollout undo" tend rollout undo deploy/can
tend rollout status deploy/can --timeout=60s >/dev/null || fail "undo did not complete"
[ "$(tend get rs -l app=can -o json | jq -r '.items[] | select(.spec.template.spec.containers[0].env[1].value == "v4") | .spec.replicas')" = 0 ] &&
    [ "$(api /apis/apps/v1/namespaces/default/deployments/can | jq -r '.spec.template.spec.containers[0].env[1].value')" = v3 ] &&
    ok "undo abandons the canaries: v4 at 0, v3 whole, no canary gate on the way back" ||
    fail "after undo: $(tend get rs -l app=can)"
prog can "$canary, \"tend.io/canary-promote-after\": \"2s\"" 4 600 v5 sleep | tend apply -f - >/dev/null
tend rollout status deploy/can --timeout=60s >/dev/null && tend get events | grep -q "promoted automatically, healthy for 2s" &&
    ok "canaries healthy for tend.io/canary-promote-after are promoted by themselves" ||
    fail "no automatic promotion: $(tend rollout status deploy/can --watch=false 2>&1)"
expect_exit 1 "promote without canaries is refused" tend rollout promote deploy/late
expect_grep "has no canaries to promote" "$tmp/err" "and says why"

finish
