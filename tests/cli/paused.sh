#!/bin/sh
# tendd stopped (SIGSTOP) for 4 s, then continued (issue 33 item 3): the
# pods are judged for their own time, not for tendd's. A watchdog pod that
# sent WATCHDOG=1 throughout lives on (what it sent waits in its socket);
# an exec liveness probe in flight when tendd stopped is not counted as
# timed out; and a pod that really stops sending is still replaced after.
. "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || { echo "jq missing (make deps)"; exit 77; }

start_tendd
# pinger NAME: WATCHDOG=1 every 0.2 s, with a 1 s watchdog, until
# $tmp/NAME.hang exists
pinger() {
    cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1}
spec:
  replicas: 2
  selector: {matchLabels: {app: $1}}
  template:
    metadata:
      labels: {app: $1}
      annotations: {tend.io/notify: "ready,watchdog=1s"}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        command:
        - /usr/bin/python3
        - -c
        - |
          import os, socket, time
          s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
          s.sendto(b"READY=1", os.environ["NOTIFY_SOCKET"])
          while not os.path.exists("$tmp/$1.hang"):
              s.sendto(b"WATCHDOG=1", os.environ["NOTIFY_SOCKET"])
              time.sleep(0.2)
          time.sleep(1000)
        env: [{name: TEST_MARKER, value: "$tmp"}]
YAML
}
pinger dog | tend apply -f - >/dev/null || fail "apply dog"
pinger hung | tend apply -f - >/dev/null || fail "apply hung"
# an exec liveness probe that takes 1.5 s of its 2 s, failing once is enough
cat >"$tmp/probed.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: probed}
spec:
  replicas: 1
  selector: {matchLabels: {app: probed}}
  template:
    metadata: {labels: {app: probed}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        command: [/bin/sleep, "4281"]
        env: [{name: TEST_MARKER, value: "$tmp"}]
        livenessProbe:
          exec: {command: [/bin/sh, -c, "touch $tmp/probing; sleep 1.5"]}
          periodSeconds: 3
          timeoutSeconds: 2
          failureThreshold: 1
YAML
tend apply -f "$tmp/probed.yaml" >/dev/null || fail "apply probed"

pods_json() { tend get pods -l "app=$1" -o json; }
ready_n() { pods_json "$1" | jq '[.items[] | select(.status.conditions[]? | select(.type == "Ready" and .status == "True"))] | length'; }
all_ready() { [ "$(ready_n dog)" = 2 ] && [ "$(ready_n hung)" = 2 ] && [ "$(ready_n probed)" = 1 ]; }
wait_for 30 all_ready || fail "not all ready: dog $(ready_n dog), hung $(ready_n hung), probed $(ready_n probed)"
ids() { pods_json "$1" | jq -r '[.items[] | select(.metadata.deletionTimestamp == null) | .status.containerStatuses[0].containerID] | sort | join(" ")'; }
dogs=$(ids dog)
probed=$(ids probed)

# stop tendd while a probe runs
rm -f "$tmp/probing"
wait_for 10 test -e "$tmp/probing" || fail "the probe never ran"
kill -STOP "$tendd_pid"
touch "$tmp/hung.hang" # the hung pods stop sending while tendd is stopped
sleep 4
kill -CONT "$tendd_pid"
sleep 3

[ "$(ids dog)" = "$dogs" ] && ok "the watchdog pods that kept sending live on: $dogs" ||
    fail "watchdog pods replaced after the stop: $dogs -> $(ids dog)"
[ "$(ids probed)" = "$probed" ] && ok "the probe in flight was not counted against its pod" ||
    fail "the probed pod was replaced after the stop: $probed -> $(ids probed)"
tend get events -o json | jq -r '.items[] | select(.reason == "Unhealthy") | .involvedObject.name + ": " + .message' >"$tmp/unhealthy"
grep -q "^dog-\|^probed-" "$tmp/unhealthy" && fail "an Unhealthy event for a healthy pod: $(grep '^dog-\|^probed-' "$tmp/unhealthy")" ||
    ok "no Unhealthy event for them"
expect_grep "tendd met a deadline .* late: it was stopped, suspended or short of CPU" "$tmp/tendd.log" \
    "tendd says it was away" && ok "tendd says it was away, and for how long"

# the pods that stopped sending are still judged, on tendd's time
restarted() { [ "$(pods_json hung | jq '[.items[] | select(.status.containerStatuses[0].restartCount >= 1)] | length')" = 2 ]; }
wait_for 20 restarted && ok "the pods that stopped sending were replaced" ||
    fail "hung pods not replaced: $(tend get pods -l app=hung)"
grep -q "^hung-.*no WATCHDOG=1 within 1s" "$tmp/unhealthy" || tend get events -o json |
    jq -r '.items[] | select(.reason == "Unhealthy") | .involvedObject.name + ": " + .message' |
    grep -q "^hung-.*no WATCHDOG=1 within 1s" && ok "with the reason" || fail "no watchdog event for hung"

tend delete deploy dog hung probed >/dev/null
finish
