#!/bin/sh
# A restart of tendd (kill -9) forgets nothing it saw (issue 33 item 2):
# pods that were ready stay ready, their Ready condition keeps its time, and
# the deployment stays Available with all its replicas available: its
# minReadySeconds window does not start over. Their probes still judge
# them: a pod that then fails its probe goes unready as it would have.
. "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || { echo "jq missing (make deps)"; exit 77; }

start_tendd
cat >"$tmp/avail.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: avail}
spec:
  replicas: 4
  minReadySeconds: 6
  selector: {matchLabels: {app: avail}}
  template:
    metadata: {labels: {app: avail}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        command: [/bin/sleep, "4291"]
        env: [{name: TEST_MARKER, value: "$tmp"}]
        readinessProbe:
          exec: {command: [/bin/sh, -c, "! test -e $tmp/sick"]}
          periodSeconds: 1
          failureThreshold: 2
YAML
tend apply -f "$tmp/avail.yaml" >/dev/null || fail "apply avail"
dep() { tend get deploy avail -o json; }
available() { dep | jq -r '"\(.status.availableReplicas // 0) \([.status.conditions[]? | select(.type == "Available") | .status] | join(""))"'; }
all_available() { [ "$(available)" = "4 True" ]; }
wait_for 30 all_available || fail "avail never available: $(available)"
readies() { tend get pods -l app=avail -o json | jq -r '[.items[] | .metadata.name + "=" + ([.status.conditions[]? | select(.type == "Ready") | .status + "@" + .lastTransitionTime] | join(""))] | sort | join(" ")'; }
before=$(readies)
pids_before=$(pgrep -f "sleep 4291" | sort | tr '\n' ' ')

stop_tendd KILL
start_tendd
# sampled for longer than minReadySeconds: never fewer available
: >"$tmp/samples"
for _ in $(seq 24); do
    available >>"$tmp/samples"
    sleep 0.3
done
bad=$(grep -cv "^4 True$" "$tmp/samples")
[ "$bad" = 0 ] && ok "after a kill -9 restart, 4 available and Available=True in all $(wc -l <"$tmp/samples") samples over 7 s" ||
    fail "after the restart, $bad samples of $(wc -l <"$tmp/samples") were not '4 True': $(sort "$tmp/samples" | uniq -c | tr '\n' ';')"
[ "$(readies)" = "$before" ] && ok "each pod's Ready condition kept its status and time" ||
    fail "Ready conditions changed: $before -> $(readies)"
[ "$(pgrep -f "sleep 4291" | sort | tr '\n' ' ')" = "$pids_before" ] && ok "the same processes" ||
    fail "processes changed: $pids_before -> $(pgrep -f "sleep 4291" | sort | tr '\n' ' ')"

# their probes still judge them
touch "$tmp/sick"
none_ready() { [ "$(dep | jq -r '.status.readyReplicas // 0')" = 0 ]; }
wait_for 15 none_ready && ok "a failing probe after the restart makes them unready" ||
    fail "still ready with a failing probe: $(dep | jq -c .status)"
tend delete deploy avail >/dev/null
finish
