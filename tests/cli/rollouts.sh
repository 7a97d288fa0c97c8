#!/bin/sh
# Rollouts beyond Kubernetes, through the real tendd, real processes and
# the example server: a held socket (tend.io/listen) that every replica of
# every revision accepts from — no request fails across rolling updates,
# nor across a tendd restart in the middle of one — and readiness and
# liveness by notify (tend.io/notify).
. "$(dirname "$0")/lib.sh"

command -v jq >/dev/null || { echo "jq missing (make deps)"; exit 77; }
command -v curl >/dev/null || { echo "curl missing (make deps)"; exit 77; }
web="$bin/tend-example-web"
port=$((45000 + $$ % 1000))

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
      annotations: {${3:-"tend.io/listen": "http@127.0.0.1", "tend.io/notify": "ready"}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: web
        command: ["$web", "--version=$2", "--ready-after=0.5", "--drain=1" ${4:-}]
        env: [{name: TEST_MARKER, value: "$tmp"}]
        ports: [{name: http${LEASED:-, containerPort: $port}}]
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
# one_pod_name APP
pod_of() { pods_json "$1" | jq -r '.items[0].metadata.name'; }

start_tendd

echo "== a held socket: one listening socket, tendd's, passed to every replica as fd 3"
web front v1 | tend apply -f - >/dev/null || fail "apply"
tend rollout status deploy/front --timeout=30s >/dev/null || fail "rollout of v1"
ss -ltnp "sport = :$port" >"$tmp/ss"
n=0 first=
for p in $(pids front); do
    s=$(socket_of "$p" 3)
    [ -n "$first" ] || first=$s
    [ "$s" = "$first" ] && case $s in socket:*) n=$((n + 1)) ;; esac
    tr '\0' '\n' <"/proc/$p/environ" >"$tmp/env"
    grep -qx "LISTEN_PID=$p" "$tmp/env" || fail "pid $p: LISTEN_PID is not its own pid"
    grep -qx "LISTEN_FDS=1" "$tmp/env" || fail "pid $p: no LISTEN_FDS=1"
    grep -qx "LISTEN_FDNAMES=http" "$tmp/env" || fail "pid $p: no LISTEN_FDNAMES=http"
done
[ "$n" -eq 3 ] && ok "the 3 replicas have one socket as fd 3 ($first), with LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES" ||
    fail "replicas with the same socket as fd 3: $n of 3"
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
web front v7 | tend apply -f - >/dev/null || fail "apply v7"
sleep 0.7
stop_tendd TERM
start_tendd
tend rollout status deploy/front --timeout=60s >/dev/null || fail "the rollout to v7 across a restart"
load_stop
[ "$bad" -eq 0 ] && [ "$good" -gt 50 ] && ok "rollout across a tendd restart: $good requests, none failed" ||
    fail "rollout across a tendd restart: $bad of $((good + bad)) requests failed"
curl -s "http://127.0.0.1:$port/" | grep -q "v7" || fail "v7 does not answer after the restart"
ss -ltnp "sport = :$port" >"$tmp/ss"
expect_grep "tendd" "$tmp/ss" "the new tendd holds the socket again" &&
    [ "$(grep -c LISTEN "$tmp/ss")" -eq 1 ] && ok "one listening socket on :$port, never a second"
first= n=0
for p in $(pids front); do
    s=$(socket_of "$p" 3)
    [ -n "$first" ] || first=$s
    [ "$s" = "$first" ] && n=$((n + 1))
done
[ "$n" -eq 3 ] && ok "the replicas started by the new tendd have the same socket" ||
    fail "replicas with one socket after the restart: $n of 3"

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
uid=$(pods_json late | jq -r '.items[0].metadata.uid')
NOTIFY_SOCKET="@tend-notify/$uid" systemd-notify --ready 2>/dev/null
sleep 0.5
tend get pods -l app=late | grep -q "0/1" && ok "READY=1 from a process not of the pod is not heard" ||
    fail "a stranger's READY=1 made the pod ready"
wait_for 10 sh -c "$bin/tend get pods -l app=late | grep -q 1/1" || fail "late never became ready"
took=$(echo "$(date +%s.%N) - $started" | bc)
echo "  ready after ${took}s more"
pods_json late | jq -r '.items[0].metadata.annotations["tend.io/status"]' >"$tmp/status"
expect_grep "^serving v1$" "$tmp/status" "STATUS= shows as the pod's tend.io/status annotation"
tend describe "pod/$(pod_of late)" >"$tmp/describe"
expect_grep "tend.io/status" "$tmp/describe" "describe shows the STATUS="

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

finish
