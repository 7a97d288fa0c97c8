#!/bin/sh
# The user's whole story through the real binaries: apply 3 replicas of an
# HTTP server with a readiness probe, kill one and watch it come back, roll
# out a new version within the bounds, roll back, hand-scale the
# ReplicaSet and watch it put back, kill tendd and start it again.
#
# TEND_RUNTIME=systemd tells the same story with the pods as transient
# units (run under tests/systemd/harness.sh).
. "$(dirname "$0")/lib.sh"

runtime=${TEND_RUNTIME:-process}
if [ "$runtime" = systemd ]; then
    TENDD_ARGS="--systemd-bus user"
fi
# The PID column of `get pods -o wide` holds the pid, or the unit.
pid_of() {
    case $1 in
    "<none>") echo 0 ;;
    *.service) systemctl --user show -P MainPID "$1" 2>/dev/null || echo 0 ;;
    *) echo "$1" ;;
    esac
}

manifest() { # VERSION
    cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 3
  minReadySeconds: 1
  selector:
    matchLabels: {app: web}
  strategy:
    rollingUpdate: {maxSurge: 1, maxUnavailable: 1}
  template:
    metadata:
      labels: {app: web}
      annotations: {tend.io/lease-ports: http}
    spec:
      runtimeClassName: $runtime
      terminationGracePeriodSeconds: 5
      containers:
      - name: web
        command: ["$tmp/web-$1", "http", "\$(PORT)", "200"]
        env:
        - {name: VERSION, value: "$1"}
        - {name: TEST_MARKER, value: "$tmp"}
        readinessProbe:
          httpGet: {port: http, path: /healthz}
          periodSeconds: 1
YAML
}

# pid of each live pod, from the wide table (PID column).
pids() {
    tend get pods -o wide | awk 'NR > 1 && $3 == "Running" { print $6 }' |
        while read -r c; do pid_of "$c"; done | sort
}
ready_count() { tend get pods | awk 'NR > 1 && $2 == "1/1" && $3 == "Running"' | wc -l; }

# Two "versions" of the server: two copies of one binary, told apart by
# /proc/PID/exe.
cp "$testprog" "$tmp/web-1" && cp "$testprog" "$tmp/web-2" || exit 1
# exe_of NAME: the binary the pod's process runs.
exe_of() {
    p=$(pid_of "$(tend get pod "$1" -o wide | awk 'NR == 2 { print $6 }')")
    readlink "/proc/$p/exe"
}
running() { tend get pods | awk 'NR > 1 && $3 == "Running" { print $1 }'; }

start_tendd

echo "== apply 3 replicas"
manifest 1 >"$tmp/v1.yaml"
expect_exit 0 "apply" tend apply -f "$tmp/v1.yaml" && expect_grep "deployment.apps/web created" "$tmp/out" "apply"
expect_exit 0 "rollout status" tend rollout status deploy/web --timeout=30s &&
    expect_grep 'deployment "web" successfully rolled out' "$tmp/out" "rollout status"
[ "$(ready_count)" -eq 3 ] && ok "3 pods ready" || fail "not 3 ready pods"

echo "== kill -9 one replica"
victim=$(tend get pods | awk 'NR > 1 && $3 == "Running" { print $1; exit }')
victim_pid=$(pid_of "$(tend get pod "$victim" -o wide | awk 'NR == 2 { print $6 }')")
[ "$runtime" = systemd ] && case $(tend get pod "$victim" -o wide) in
    *systemd-default-*|*tend-default-*) ok "$victim runs as a unit" ;;
    *) fail "$victim is not a unit" ;;
esac
kill -9 "$victim_pid"
start=$(date +%s%N)
replaced() { [ "$(ready_count)" -eq 3 ] && ! pids | grep -qx "$victim_pid"; }
# The issue asks for "within a second"; the bound here is looser so that
# a loaded machine running the sanitizer build does not flake it (the
# figure itself is measured in bench/).
if wait_for 5 replaced; then
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    [ "$ms" -le 2000 ] && ok "replaced and Ready in $ms ms (polling every 100 ms)" ||
        fail "replacement took $ms ms"
else
    fail "the killed replica was not replaced"
fi
# As a container restarted in place: the replacement carries the killed
# pod on (RESTARTS 1, its end as Last State, its output as logs --previous),
# and the killed pod is no longer listed.
succ=$(tend get pods -o json | jq -r --arg v "$victim" \
    '.items[] | select(.metadata.annotations["tend.io/predecessor"] == $v) | .metadata.name')
[ -n "$succ" ] && ok "$succ carries $victim on" || fail "no pod names $victim its predecessor"
tend get pod "$succ" -o json >"$tmp/succ.json"
[ "$(jq '.status.containerStatuses[0].lastState.terminated.signal' "$tmp/succ.json")" = 9 ] &&
    ok "its last state: killed by signal 9" || fail "$(jq -c .status "$tmp/succ.json")"
expect_exit 0 "get the replacement" tend get pod "$succ"
[ "$(awk 'NR == 2 { print $4 }' "$tmp/out")" = 1 ] && ok "RESTARTS 1" || fail "$(cat "$tmp/out")"
expect_exit 1 "get the killed pod" tend get pod "$victim"
expect_grep "not found" "$tmp/err" "the killed pod is gone"

echo "== roll out version 2, sampling the bounds"
manifest 2 >"$tmp/v2.yaml"
: >"$tmp/samples"
# One sample: one `get pods` and, for units, one systemctl for all of them
# (a systemctl per pod made a sample so slow on a loaded machine that a
# rollout went by in three).
( while :; do
      tend get pods -o wide 2>/dev/null | awk 'NR > 1' >"$tmp/sample" || continue
      awk '$6 ~ /^[0-9]+$/ { print $6 }' "$tmp/sample" >"$tmp/sample-pids"
      units=$(awk '$6 ~ /\.service$/ { print $6 }' "$tmp/sample")
      # shellcheck disable=SC2086
      [ -n "$units" ] && systemctl --user show -P MainPID $units >>"$tmp/sample-pids" 2>/dev/null
      live=0
      while read -r p; do
          [ "${p:-0}" -gt 0 ] && kill -0 "$p" 2>/dev/null && live=$((live + 1))
      done <"$tmp/sample-pids"
      ready=$(awk '$2 == "1/1" && $3 == "Running"' "$tmp/sample" | wc -l)
      revisions=$(awk '{ print $8 }' "$tmp/sample" | sort -u | wc -l)
      echo "$live $ready $revisions" >>"$tmp/samples"
      sleep 0.05
  done ) &
sampler=$!
expect_exit 0 "apply v2" tend apply -f "$tmp/v2.yaml" && expect_grep "configured" "$tmp/out" "apply v2"
expect_exit 0 "rollout status v2" tend rollout status deploy/web --timeout=60s
kill "$sampler"; wait "$sampler" 2>/dev/null
max_live=$(awk 'BEGIN{m=0} $1>m{m=$1} END{print m}' "$tmp/samples")
min_ready=$(awk 'BEGIN{m=99} $2<m{m=$2} END{print m}' "$tmp/samples")
n=$(wc -l <"$tmp/samples")
mid=$(awk '$3 >= 2' "$tmp/samples" | wc -l)
echo "   $n samples ($mid mid-rollout): at most $max_live live, at least $min_ready ready"
# The bounds were sampled while both revisions ran, however fast or slow
# the sampling was next to the rollout.
[ "$mid" -ge 1 ] || fail "no sample caught the rollout in progress ($n samples)"
[ "$max_live" -le 4 ] && ok "never more than replicas + maxSurge (4) live" || fail "$max_live live > 4"
[ "$min_ready" -ge 2 ] && ok "never fewer than replicas - maxUnavailable (2) ready" || fail "$min_ready ready < 2"
tend get deploy web -o json | grep -q '"deployment.kubernetes.io/revision": "2"' && ok "revision 2" || fail "not revision 2"
for p in $(running); do
    [ "$(exe_of "$p")" = "$tmp/web-2" ] || fail "pod $p does not run version 2: $(exe_of "$p")"
done
[ "$(running | wc -l)" -eq 3 ] && ok "every pod runs $tmp/web-2" || fail "not 3 running pods"

echo "== rollout history and undo"
expect_exit 0 "history" tend rollout history deploy/web && expect_grep "REVISION" "$tmp/out" "history"
expect_exit 0 "undo" tend rollout undo deploy/web && expect_grep "deployment.apps/web rolled back" "$tmp/out" "undo"
expect_exit 0 "rollout status after undo" tend rollout status deploy/web --timeout=60s
tend get deploy web -o json | grep -q '"deployment.kubernetes.io/revision": "3"' && ok "revision 3" || fail "not revision 3"
tend rollout history deploy/web >"$tmp/hist"
expect_grep "^3 " "$tmp/hist" "revision 3 listed"
grep -q "^1 " "$tmp/hist" && fail "revision 1 still listed after renumbering"
for p in $(running); do
    [ "$(exe_of "$p")" = "$tmp/web-1" ] || fail "pod $p does not run version 1 after undo"
done
[ "$(running | wc -l)" -eq 3 ] && ok "every pod runs $tmp/web-1 again" || fail "not 3 running pods"

echo "== hand-scale the ReplicaSet"
rs=$(tend get rs | awk 'NR > 1 && $2 == 3 { print $1 }')
expect_exit 0 "scale rs" tend scale "rs/$rs" --replicas=5
back_to_3() { tend get rs "$rs" | awk 'NR == 2 { exit !($2 == 3) }'; }
wait_for 10 back_to_3 && ok "ReplicaSet put back to 3" || fail "ReplicaSet not put back"
tend scale "rs/$rs" --replicas=5 >/dev/null && wait_for 10 back_to_3
tend get events >"$tmp/events"
grep "Scaled down replica set $rs from 5 to 3" "$tmp/events" | awk '{ if ($5 >= 2) found=1 } END { exit !found }' &&
    ok "one folded event, counted" || { fail "no folded event"; cat "$tmp/events"; }

echo "== kill -9 tendd and start it again"
pids >"$tmp/pids.before"
stop_tendd KILL
start_tendd
wait_for 10 sh -c "[ \"\$($bin/tend get pods | awk 'NR > 1 && \$3 == \"Running\"' | wc -l)\" -eq 3 ]"
pids >"$tmp/pids.after"
cmp -s "$tmp/pids.before" "$tmp/pids.after" && ok "same pids after the restart" ||
    { fail "pids changed"; diff "$tmp/pids.before" "$tmp/pids.after"; }
expect_exit 0 "deployment still there" tend get deploy web
expect_exit 0 "rollout status after restart" tend rollout status deploy/web --timeout=20s

finish
