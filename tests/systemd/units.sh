#!/bin/sh
# The units of units/, under tests/systemd/harness.sh: systemd-analyze
# verify passes on both; tendd as a user unit is active only once it said
# READY (its API answers the moment `systemctl start` returns), keeps the
# watchdog fed, applies its manifest directory, and a restart of the unit
# keeps the pods' pids.
. "$(dirname "$0")/../cli/lib.sh"

[ -n "${TEND_SYSTEMD_HARNESS:-}" ] || { echo "run me under tests/systemd/harness.sh"; exit 77; }
units="$TEND_SOURCE_DIR/units"
: >"$tmp/tendd.log" # tendd logs to the manager here, not to a file of ours

echo "== systemd-analyze verify"
sed "s|@TENDD@|$bin/tendd|" "$units/tendd.service.in" >"$tmp/tendd.service"
expect_exit 0 "verify the system unit" systemd-analyze verify "$tmp/tendd.service"
# Pods are tendd's children and inherit its sandbox: none of it may be set.
sandbox=$(grep -hE '^(Protect|Private|NoNewPrivileges|LockPersonality|Restrict|SystemCall|MemoryDeny|DeviceAllow|CapabilityBoundingSet)' \
    "$units/tendd.service.in" "$units/tendd-user.service.in")
[ -z "$sandbox" ] && ok "no sandboxing that every pod would inherit" || fail "inherited by the pods: $sandbox"
mkdir -p "$XDG_CONFIG_HOME/systemd/user/tendd.service.d"
sed "s|@TENDD@|$bin/tendd|" "$units/tendd-user.service.in" >"$XDG_CONFIG_HOME/systemd/user/tendd.service"
expect_exit 0 "verify the user unit" systemd-analyze --user verify \
    "$XDG_CONFIG_HOME/systemd/user/tendd.service"
# A short watchdog, to see it fed; the sanitizer build's leak report has
# nowhere to go under systemd.
cat >"$XDG_CONFIG_HOME/systemd/user/tendd.service.d/test.conf" <<EOF
[Service]
WatchdogSec=2s
# long enough for a pod to speak while no tendd runs (the fd store test)
RestartSec=3s
Environment=ASAN_OPTIONS=detect_leaks=0 TEST_MARKER=$tmp
EOF
systemctl --user daemon-reload

echo "== start: active only after READY"
export TEND_SOCKET="$XDG_RUNTIME_DIR/tend/tend.sock"
mdir="$XDG_CONFIG_HOME/tend/manifests"
mkdir -p "$mdir"
cat >"$mdir/web.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: main
        command: ["$testprog", "sleep"]
        env: [{name: TEST_MARKER, value: "$tmp"}]
YAML
expect_exit 0 "systemctl --user start tendd" systemctl --user start tendd
expect_exit 0 "the API answers at once" tend version
[ "$(systemctl --user is-active tendd)" = active ] && ok "active" || fail "not active"
running() { [ "$(tend get pods | awk 'NR > 1 && $3 == "Running"' | wc -l)" -eq 2 ]; }
wait_for 10 running && ok "the manifest directory's pods run" || fail "$(tend get pods)"
systemctl --user show -P StatusText tendd | grep -q "pods* running" && ok "STATUS= with pod counts" ||
    fail "status: $(systemctl --user show -P StatusText tendd)"

echo "== the watchdog is fed from the loop"
sleep 5
[ "$(systemctl --user is-active tendd)" = active ] &&
    [ "$(systemctl --user show -P NRestarts tendd)" = 0 ] && ok "still active after 5 s of WatchdogSec=2s" ||
    fail "$(systemctl --user status tendd 2>&1 | head -5)"

echo "== a restart of the unit keeps the pods"
pids() { tend get pods -o wide | awk 'NR > 1 && $3 == "Running" { print $6 }' | sort; }
before=$(pids)
# tendd's main pid, never 0 (a kill of 0 would hit this test's whole
# process group, ctest with it): waits for the unit to have one.
tendd_main() {
    for _ in $(seq 50); do
        m=$(systemctl --user show -P MainPID tendd)
        case $m in '' | 0 | 1 | *[!0-9]*) sleep 0.1 ;; *) echo "$m"; return ;; esac
    done
    echo "tendd has no main process" >&2
    echo 999999999
}
old_main=$(tendd_main)
expect_exit 0 "systemctl --user restart tendd" systemctl --user restart tendd
expect_exit 0 "the API answers at once" tend get pods
[ "$(systemctl --user show -P MainPID tendd)" != "$old_main" ] && ok "a new tendd" || fail "same tendd"
wait_for 10 running
[ "$(pids)" = "$before" ] && ok "same pids: $(echo $before)" || fail "before: $before, after: $(pids)"

echo "== a held socket survives tendd and all its pods dying at once (the fd store)"
hport=$((18000 + $$ % 1000)) # below the ephemeral ports (32768-) and the fleet tests' etcd (20000-)
# web NAME REPLICAS ANNOTATION ARG PORT: the example server, one manifest
web() {
    cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1}
spec:
  replicas: $2
  selector: {matchLabels: {app: $1}}
  template:
    metadata:
      labels: {app: $1}
      annotations: {$3}
    spec:
      containers:
      - name: main
        command: ["$bin/tend-example-web", "$4"]
        env: [{name: TEST_MARKER, value: "$tmp"}]
        ${5:+ports: [{name: http$5\}]}
YAML
}
web held 2 'tend.io/listen: "http@127.0.0.1"' --version=h1 ", containerPort: $hport" >"$mdir/held.yaml"
expect_exit 0 "reload with held.yaml" systemctl --user reload tendd
held_pids() { tend get pods -l app=held -o wide | awk 'NR > 1 && $3 == "Running" { print $6 }' | sed 's|process://||'; }
two_held() { [ "$(held_pids | wc -l)" -eq 2 ] && curl -s "http://127.0.0.1:$hport/" | grep -q h1; }
wait_for 10 two_held || fail "held pods: $(tend get pods -l app=held)"
inode=$(readlink "/proc/$(held_pids | head -1)/fd/3")
old_main=$(tendd_main)
# tendd dies (restarted by systemd: Restart=on-failure), and so does every pod
kill -KILL "$old_main" $(held_pids)
new_main() { m=$(systemctl --user show -P MainPID tendd); [ "$m" != 0 ] && [ "$m" != "$old_main" ]; }
wait_for 15 new_main || fail "tendd was not restarted"
wait_for 15 two_held && ok "the held pods are back and answer" || fail "held pods: $(tend get pods -l app=held)"
[ "$(readlink "/proc/$(held_pids | head -1)/fd/3")" = "$inode" ] &&
    ok "with the same socket ($inode): from the fd store, not bound again" ||
    fail "socket $inode became $(readlink "/proc/$(held_pids | head -1)/fd/3")"
rm "$mdir/held.yaml"
expect_exit 0 "reload without held.yaml" systemctl --user reload tendd
tend delete deploy/held >/dev/null 2>&1

echo "== READY=1 said while tendd is down is not lost (the notify socket waits in the fd store)"
web late 1 'tend.io/notify: "ready", tend.io/lease-ports: http' --ready-after=1.5 "" >"$mdir/late.yaml"
expect_exit 0 "reload with late.yaml" systemctl --user reload tendd
late_running() { tend get pods -l app=late | grep -q "0/1 *Running"; }
wait_for 10 late_running || fail "late: $(tend get pods -l app=late)"
late_pid=$(tend get pods -l app=late -o wide | awk 'NR == 2 { print $6 }')
old_main=$(tendd_main)
kill -KILL "$old_main" # the pod says READY=1 1.5 s after it started; tendd is back 3 s after this
wait_for 15 new_main || fail "tendd was not restarted"
late_ready() { tend get pods -l app=late | grep -q "1/1"; }
wait_for 10 late_ready &&
    [ "$(tend get pods -l app=late -o wide | awk 'NR == 2 { print $6 }')" = "$late_pid" ] &&
    ok "the pod is ready: its READY=1 waited for the new tendd (same pid $late_pid)" ||
    fail "late not ready: $(tend get pods -l app=late -o wide)"
rm "$mdir/late.yaml"
expect_exit 0 "reload without late.yaml" systemctl --user reload tendd

echo "== reload re-reads the manifests"
sed -i 's/replicas: 2/replicas: 3/' "$mdir/web.yaml"
expect_exit 0 "systemctl --user reload tendd" systemctl --user reload tendd
three() { [ "$(tend get deploy web -o json | jq .spec.replicas)" = 3 ]; }
wait_for 10 three && ok "3 replicas after the reload" || fail "replicas: $(tend get deploy web)"

echo "== stop leaves the pods running (KillMode=process)"
p=$(pids | head -1)
expect_exit 0 "systemctl --user stop tendd" systemctl --user stop tendd
kill -0 "$p" 2>/dev/null && ok "pid $p runs on" || fail "pid $p was stopped"

finish
