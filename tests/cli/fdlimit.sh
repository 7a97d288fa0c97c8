#!/bin/sh
# tendd at its file descriptor limit (issues 33 and 35): each pod holds a
# pidfd (and, within a quarter of the limit, its log open), so a host of
# many pods runs into the limit. Under a hard limit of 256: the pods that
# fit run; the rest are refused with the reason (the limit, and how to
# raise it) rather than take the descriptors the API needs; the API keeps
# answering throughout, so that the user can scale down, which works.
if [ -z "${TEND_FDLIMIT:-}" ]; then
    command -v prlimit >/dev/null || { echo "prlimit missing (util-linux)"; exit 77; }
    TEND_FDLIMIT=256 exec prlimit --nofile=256:256 "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || { echo "jq missing (make deps)"; exit 77; }

start_tendd --cgroups off
cat >"$tmp/many.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: many}
spec:
  replicas: 250
  selector: {matchLabels: {app: many}}
  template:
    metadata: {labels: {app: many}}
    spec:
      containers:
      - name: many
        command: [/bin/sleep, "4270"]
        env: [{name: TEST_MARKER, value: "$tmp"}]
YAML
expect_exit 0 "apply 250 replicas under a limit of 256 descriptors" tend apply -f "$tmp/many.yaml"
running_n() { tend get pods -l app=many -o json | jq '[.items[] | select(.status.phase == "Running")] | length'; }
refused() { grep -q "tendd is out of file descriptors (its limit 256; .*): raise its limit (LimitNOFILE=" "$tmp/tendd.log"; }
wait_for 30 refused && ok "starts past the limit refused, with the limit and how to raise it" ||
    fail "no refusal in tendd's log: $(grep -i 'descriptor\|too many' "$tmp/tendd.log" | tail -3)"
said() { tend get pods -l app=many -o json | grep -q "tendd is out of file descriptors"; }
wait_for 20 said && ok "a refused pod's status says why" ||
    fail "no pod's status says it: $(tend get pods -l app=many | grep -v Running | head -3)"
sleep 2
n=$(running_n)
[ -n "$n" ] && [ "$n" -ge 50 ] && [ "$n" -lt 250 ] && ok "$n pods run, as many as fit" ||
    fail "running: '$n'"
# A refused start is tendd's trouble, not the pod's: the pod waits (the
# kubelet's CreateContainerError), is not failed and not replaced, and
# keeps no crash-loop streak.
pods_json() { tend get pods -l app=many -o json; }
waiting=$(pods_json | jq '[.items[] | select(.status.phase == "Pending" and .status.containerStatuses[0].state.waiting.reason == "CreateContainerError")] | length')
[ "$waiting" -ge 1 ] && [ $((waiting + $(running_n))) = 250 ] &&
    ok "the $waiting refused pods wait, with reason CreateContainerError" ||
    fail "waiting: $waiting, running $(running_n): $(tend get pods -l app=many | grep -v Running | head -3)"
bad=$(pods_json | jq '[.items[] | select(.status.phase == "Failed" or .metadata.annotations["tend.io/crash-streak"] != null or .metadata.annotations["tend.io/start-after"] != null)] | length')
total=$(pods_json | jq '.items | length')
[ "$bad" = 0 ] && [ "$total" = 250 ] && ok "none failed, none replaced, no crash-loop streak" ||
    fail "failed or with a streak: $bad, pods: $total"
pid=$tendd_pid
# Retries are paced: tendd's CPU, as the kernel counts it, over 4 s
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
c0=$(cpu_ticks)
sleep 4
c1=$(cpu_ticks)
hz=$(getconf CLK_TCK)
[ $(((c1 - c0) * 100 / hz)) -le 60 ] && ok "while they wait, tendd used $(((c1 - c0) * 1000 / hz)) ms of CPU in 4 s" ||
    fail "tendd used $(((c1 - c0) * 1000 / hz)) ms of CPU in 4 s while pods waited: it spins"
# and says it once a pod, not at each retry
said_n=$(grep -c "cannot start: tendd is out of file descriptors" "$tmp/tendd.log")
[ "$said_n" -le $((waiting + 10)) ] && ok "said $said_n times for $waiting pods" ||
    fail "said $said_n times for $waiting waiting pods"
fds=$(ls "/proc/$pid/fd" | wc -l)
[ "$fds" -le $((256 - 32)) ] && ok "tendd holds $fds descriptors: the API's kept free" ||
    fail "tendd holds $fds of 256 descriptors"
# the API answers, again and again, while the refused pods are retried
slow=0
for _ in $(seq 20); do
    curl -s -m 2 --unix-socket "$TEND_SOCKET" http://tend/healthz >/dev/null || slow=$((slow + 1))
done
[ "$slow" = 0 ] && ok "/healthz answered 20 times of 20" || fail "/healthz failed $slow times of 20"
expect_exit 0 "get pods" tend get pods -l app=many
# A restart at the limit keeps every running pod: each was recorded with
# its start time (issue 33: a record without it made the next tendd kill
# a healthy pod).
pgrep -f 'sleep 4270' | sort >"$tmp/before"
stop_tendd KILL
start_tendd --cgroups off
sleep 2
missing=$(pgrep -f 'sleep 4270' | sort | comm -23 "$tmp/before" - | wc -l)
[ "$missing" = 0 ] && ok "a kill -9 restart kept all $(wc -l <"$tmp/before") running pods" ||
    fail "$missing of $(wc -l <"$tmp/before") pods were killed by the restart"
# Room made (a scale-down within what fits): the waiting pods start
expect_exit 0 "scale down to 120" tend scale deploy many --replicas=120
fits() { [ "$(running_n)" = 120 ]; }
wait_for 30 fits && ok "the pods that waited started once there was room: 120 running" ||
    fail "after the scale-down to 120: $(running_n) running"
# and the user can scale down
expect_exit 0 "scale down to 5" tend scale deploy many --replicas=5
five() { [ "$(running_n)" = 5 ] && [ "$(pgrep -f 'sleep 4270' | wc -l)" = 5 ]; }
wait_for 60 five && ok "scaled down: 5 pods, 5 processes" ||
    fail "after the scale-down: $(running_n) running, $(pgrep -f 'sleep 4270' | wc -l) processes"
expect_exit 0 "delete" tend delete deploy many
finish
