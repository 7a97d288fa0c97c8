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
refused() { grep -q "tendd is out of file descriptors (.* its limit 256; .*): raise its limit (LimitNOFILE=" "$tmp/tendd.log"; }
wait_for 30 refused && ok "starts past the limit refused, with the limit and how to raise it" ||
    fail "no refusal in tendd's log: $(grep -i 'descriptor\|too many' "$tmp/tendd.log" | tail -3)"
said() { tend get pods -l app=many -o json | grep -q "tendd is out of file descriptors"; }
wait_for 20 said && ok "a refused pod's status says why" ||
    fail "no pod's status says it: $(tend get pods -l app=many | grep -v Running | head -3)"
sleep 2
n=$(running_n)
[ -n "$n" ] && [ "$n" -ge 50 ] && [ "$n" -lt 250 ] && ok "$n pods run, as many as fit" ||
    fail "running: '$n'"
pid=$tendd_pid
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
# and the user can scale down
expect_exit 0 "scale down to 5" tend scale deploy many --replicas=5
five() { [ "$(running_n)" = 5 ] && [ "$(pgrep -f 'sleep 4270' | wc -l)" = 5 ]; }
wait_for 60 five && ok "scaled down: 5 pods, 5 processes" ||
    fail "after the scale-down: $(running_n) running, $(pgrep -f 'sleep 4270' | wc -l) processes"
expect_exit 0 "delete" tend delete deploy many
finish
