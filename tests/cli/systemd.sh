#!/bin/sh
# The systemd runtime through the real binaries, under
# tests/systemd/harness.sh: a rolling update from processes to units, an
# exec failure, units killed from outside, a graceful stop within the grace
# period, an orphan unit, a bus that goes away and comes back (with tendd
# running, and with tendd starting meanwhile), and a bus that is not there.
. "$(dirname "$0")/lib.sh"

[ -n "${TEND_SYSTEMD_HARNESS:-}" ] || { echo "run me under tests/systemd/harness.sh"; exit 77; }
TENDD_ARGS="--systemd-bus user"

# deploy NAME RUNTIME GRACE COMMAND...: `move` with crash back-off off,
# since this test kills its young replicas, of one lineage, again and again
# on purpose (back-off has its own tests: respawn.sh, test-controllers).
deploy() {
    name=$1 rt=$2 grace=$3
    shift 3
    args=
    for a in "$@"; do args="$args\"$a\", "; done
    cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: $name$([ "$name" = move ] && echo ', annotations: {tend.io/crash-backoff: "off"}')}
spec:
  replicas: 2
  selector: {matchLabels: {app: $name}}
  strategy: {rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}
  template:
    metadata: {labels: {app: $name}}
    spec:
      runtimeClassName: $rt
      terminationGracePeriodSeconds: $grace
      containers:
      - name: main
        command: [${args%, }]
        env: [{name: TEST_MARKER, value: "$tmp"}]
YAML
}

running() { tend get pods -l "app=$1" -o wide | awk 'NR > 1 && $3 == "Running" { print $1, $6 }'; }
count_running() { [ "$(running "$1" | wc -l)" -eq "$2" ]; }
# replaced_by_now APP POD: APP has two running pods, POD not among them (one
# listing: two would race with the death being seen in between).
replaced_by_now() {
    set -- "$(running "$1")" "$2"
    [ "$(printf '%s\n' "$1" | grep -c .)" -eq 2 ] && ! printf '%s\n' "$1" | grep -q "^$2 "
}
all_units() { running "$1" | awk '$2 !~ /\.service$/ { bad=1 } END { exit bad }'; }
main_pid() { systemctl --user show -P MainPID "$1"; }
# kill_main UNIT: SIGKILL to the unit's main process. Only to a pid: a
# MainPID of 0 (the unit between two states, systemd re-executing) would
# make `kill -9 0` kill this test's whole process group, ctest with it.
kill_main() {
    for _ in $(seq 50); do
        mp=$(main_pid "$1" 2>/dev/null)
        case $mp in '' | 0 | 1 | *[!0-9]*) sleep 0.1 ;; *) kill -9 "$mp"; return ;; esac
    done
    fail "$1 has no main process to kill (MainPID \"$mp\")"
}
# two_units: pod_a/unit_a, pod_b/unit_b (the first and the last of move's
# running pods by name) and pid_b, unit_b's MainPID.
two_units() {
    set -- $(running move | sort | head -1)
    pod_a=$1 unit_a=$2
    set -- $(running move | sort | tail -1)
    pod_b=$1 unit_b=$2
    pid_b=$(main_pid "$unit_b")
}

start_tendd

echo "== a rolling update from processes to units"
deploy move process 5 "$testprog" sleep >"$tmp/move.yaml"
tend apply -f "$tmp/move.yaml" >/dev/null
expect_exit 0 "rollout (process)" tend rollout status deploy/move --timeout=30s
old_pids=$(running move | awk '{ print $2 }')
[ "$(echo "$old_pids" | wc -w)" -eq 2 ] || fail "not 2 process pods: $old_pids"
deploy move systemd 5 "$testprog" argv from-a-unit >"$tmp/move.yaml"
tend apply -f "$tmp/move.yaml" >/dev/null
expect_exit 0 "rollout (systemd)" tend rollout status deploy/move --timeout=60s
count_running move 2 && all_units move && ok "both pods are units now" ||
    fail "pods: $(tend get pods -l app=move -o wide)"
for p in $old_pids; do kill -0 "$p" 2>/dev/null && fail "old process $p still runs"; done
for u in $(running move | awk '{ print $2 }'); do
    [ "$(systemctl --user is-active "$u")" = active ] || fail "$u is not active"
done
tend rollout history deploy/move | grep -q "^2 " && ok "revision 2" || fail "no revision 2"
pod=$(running move | awk '{ print $1; exit }')
logged() { tend logs "$pod" | grep -qx from-a-unit; }
wait_for 5 logged && ok "tend logs shows the unit's output" || fail "logs: $(tend logs "$pod")"

echo "== killed from outside: systemctl kill, kill -9 of MainPID"
set -- $(running move | head -1)
pod=$1 unit=$2
systemctl --user kill -s KILL "$unit"
replaced() { replaced_by_now move "$pod"; }
wait_for 10 replaced && ok "systemctl kill: $pod replaced" || fail "$pod not replaced"
tend get pod "$pod" -o json | jq -e '.status.containerStatuses[0].state.terminated.signal == 9' \
    >/dev/null && ok "$pod shows signal 9" || fail "$pod: $(tend get pod "$pod" -o json | jq -c .status)"
set -- $(running move | head -1)
pod=$1 unit=$2
kill_main "$unit"
wait_for 10 replaced && ok "kill -9 MainPID: $pod replaced" || fail "$pod not replaced"
[ -z "$(systemctl --user list-units --state=failed --plain --no-legend 'tend-*')" ] &&
    ok "no failed units left behind" || fail "failed units: $(systemctl --user list-units --state=failed)"

echo "== an exec failure is a start error, not a crash"
: >"$tmp/not-executable"
deploy broken systemd 5 "$tmp/not-executable" >"$tmp/broken.yaml"
tend apply -f "$tmp/broken.yaml" >/dev/null
# The dead pod goes once replaced; its replacement carries the reason.
start_error() { tend get pods -l app=broken -o json |
    jq -e '[.items[].status.containerStatuses[0].lastState.terminated.reason] | index("StartError")' >/dev/null; }
wait_for 10 start_error && ok "a start error, carried on as the replacement's last state" ||
    fail "$(tend get pods -l app=broken -o yaml)"
tend get events >"$tmp/events"
expect_grep "203" "$tmp/events" "the event gives systemd's exit status"
expect_grep "$tmp/not-executable" "$tmp/events" "the event names the program"
tend delete deploy/broken >/dev/null

echo "== a graceful stop: TERM, then KILL after the grace period"
deploy stubborn systemd 2 "$testprog" ignore-term >"$tmp/stubborn.yaml"
tend apply -f "$tmp/stubborn.yaml" >/dev/null
expect_exit 0 "rollout stubborn" tend rollout status deploy/stubborn --timeout=30s
set -- $(running stubborn | head -1)
pod=$1 unit=$2
sleep 0.3
t0=$(date +%s%N)
tend delete "pod/$pod" >/dev/null
unit_gone() { [ "$(systemctl --user is-active "$unit" 2>/dev/null)" != active ] &&
    [ "$(systemctl --user is-active "$unit" 2>/dev/null)" != deactivating ]; }
wait_for 10 unit_gone
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$ms" -ge 1800 ] && [ "$ms" -lt 6000 ] && ok "ignored TERM, killed after the 2 s grace ($ms ms)" ||
    fail "stopped after $ms ms"
set -- $(running move | head -1)
t0=$(date +%s%N)
tend delete "pod/$1" >/dev/null
unit=$2
wait_for 10 unit_gone
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$ms" -lt 1500 ] && ok "a TERM-abiding unit stops at once ($ms ms)" || fail "took $ms ms"
tend delete deploy/stubborn >/dev/null

echo "== an agent restart adopts units; a unit with no record is stopped"
before=$(running move | awk '{ print $2 }' | while read -r u; do main_pid "$u"; done | sort)
stop_tendd TERM
systemd-run --user --unit tend-default-orphan-x1.service -p Type=exec "$testprog" sleep >/dev/null 2>&1 ||
    fail "cannot start an orphan unit"
systemd-run --user --unit tend-default-failed-x3.service -p Type=exec /bin/false >/dev/null 2>&1
failed_x3() { systemctl --user is-failed --quiet tend-default-failed-x3.service; }
wait_for 5 failed_x3 || fail "the unit meant to fail did not"
start_tendd
wait_for 10 count_running move 2
after=$(running move | awk '{ print $2 }' | while read -r u; do main_pid "$u"; done | sort)
[ "$before" = "$after" ] && ok "same MainPIDs after the restart" || fail "before: $before after: $after"
orphan_gone() { [ "$(systemctl --user is-active tend-default-orphan-x1.service)" != active ]; }
wait_for 10 orphan_gone && ok "the orphan unit was stopped" || fail "the orphan unit runs"
tend get events >"$tmp/events"
expect_grep "OrphanStopped" "$tmp/events" "a Warning event for it"
reset_x3() { ! failed_x3; }
wait_for 10 reset_x3 && ok "a failed unit with no pod is reset" || fail "tend-default-failed-x3 still failed"

echo "== the bus goes away and comes back: nothing missed, nothing doubled"
two_units
systemctl --user stop dbus.socket dbus.service
bus_gone() { grep -q "lost the user bus" "$tmp/tendd.log"; }
wait_for 5 bus_gone && ok "tendd sees the bus go" || fail "tendd did not notice"
kill_main "$unit_a"
systemctl --user start dbus.socket
replaced_a() { replaced_by_now move "$pod_a"; }
wait_for 15 replaced_a && ok "a unit killed while the bus was away: its pod is replaced" ||
    fail "pods: $(tend get pods -l app=move -o wide)"
tend get pod "$pod_a" -o json | jq -e '.status.containerStatuses[0].state.terminated.signal == 9' \
    >/dev/null && ok "$pod_a shows signal 9" || fail "$pod_a: $(tend get pod "$pod_a" -o json | jq -c .status)"
[ "$(main_pid "$unit_b")" = "$pid_b" ] && ok "the other unit kept its process" || fail "$unit_b changed"
set -- $(running move | grep -v "^$pod_b " | head -1)
pod=$1
kill_main "$2"
wait_for 10 replaced && ok "signals flow again: a kill after the bus came back is seen" ||
    fail "$pod not replaced"

echo "== systemd re-executes itself (a package upgrade): tendd keeps seeing its units"
set -- $(running move | sort | head -1)
pod=$1
systemctl --user daemon-reexec
kill_main "$2"
wait_for 15 replaced && ok "a kill right after daemon-reexec is seen" || fail "$pod not replaced"

echo "== tendd starts while the bus is away: pods kept, checked once it is back"
two_units
stop_tendd TERM
systemd-run --user --unit tend-default-orphan-x2.service -p Type=exec "$testprog" sleep >/dev/null 2>&1 ||
    fail "cannot start an orphan unit"
systemctl --user stop dbus.socket dbus.service
kill_main "$unit_a"
start_tendd
sleep 1
live_pods() { tend get pods -l app=move -o json |
    jq '[.items[] | select(.status.phase == "Running" or .status.phase == "Pending")] | length'; }
[ "$(live_pods)" -eq 2 ] && count_running move 2 &&
    ok "both pods kept, none started beside them, while nothing can be checked" ||
    fail "pods: $(tend get pods -l app=move -o wide)"
orphan2_runs() { [ "$(systemctl --user is-active tend-default-orphan-x2.service)" = active ]; }
orphan2_runs && ok "the orphan unit is left alone while its pod cannot be known" || fail "orphan stopped blind"
systemctl --user start dbus.socket
wait_for 15 replaced_a && ok "the unit that died meanwhile: its pod is replaced once the bus is back" ||
    fail "pods: $(tend get pods -l app=move -o wide)"
[ "$(main_pid "$unit_b")" = "$pid_b" ] && ok "the live unit kept its process" || fail "$unit_b changed"
orphan2_gone() { ! orphan2_runs; }
wait_for 10 orphan2_gone && ok "the orphan unit is stopped once the bus is back" || fail "the orphan runs"
orphan2_event() { tend get events | grep -q "orphan-x2"; }
wait_for 5 orphan2_event && ok "a Warning event for it" || fail "no event: $(tend get events)"

echo "== tend.io/notify in a unit: Type=notify, ready once READY=1, STATUS=, the watchdog"
# notify_web NAME ARGS...: one unit of the example server, notify ready and a 1 s watchdog
notify_web() {
    name=$1
    shift
    cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: $name}
spec:
  replicas: 1
  selector: {matchLabels: {app: $name}}
  template:
    metadata:
      labels: {app: $name}
      annotations: {tend.io/notify: "ready,watchdog=1s", tend.io/lease-ports: http}
    spec:
      runtimeClassName: systemd
      terminationGracePeriodSeconds: 2
      containers:
      - name: main
        command: ["$bin/tend-example-web", "--version=u1", "--ready-after=2" $*]
        env: [{name: TEST_MARKER, value: "$tmp"}]
YAML
}
notify_web nweb | tend apply -f - >/dev/null || fail "apply nweb"
nweb_unit() { tend get pods -l app=nweb -o json | jq -r '.items[0].status.containerStatuses[0].containerID // ""' | sed 's|systemd://||'; }
sleep 1
tend get pods -l app=nweb | grep -q "0/1" && ok "the unit's pod is not ready before READY=1" ||
    fail "ready before READY=1: $(tend get pods -l app=nweb)"
nweb_ready() { tend get pods -l app=nweb | grep -q "1/1"; }
wait_for 10 nweb_ready && ok "ready once the program said READY=1" || fail "nweb never ready"
unit=$(tend get pods -l app=nweb -o wide | awk 'NR == 2 { print $6 }')
[ "$(systemctl --user show -P Type "$unit")" = notify ] && ok "$unit is Type=notify" ||
    fail "$unit: Type=$(systemctl --user show -P Type "$unit")"
[ "$(systemctl --user show -P WatchdogUSec "$unit")" = 1s ] && ok "with WatchdogUSec=1s" ||
    fail "$unit: WatchdogUSec=$(systemctl --user show -P WatchdogUSec "$unit")"
nweb_status() { tend get pods -l app=nweb -o json | jq -e '.items[0].metadata.annotations["tend.io/status"] == "serving u1"' >/dev/null; }
wait_for 5 nweb_status && ok "its STATUS= is the pod's tend.io/status" ||
    fail "no tend.io/status: $(tend get pods -l app=nweb -o json | jq -c '.items[0].metadata.annotations')"
tend delete deploy/nweb >/dev/null
notify_web nhang ', "--watchdog-stop-after=3"' | tend apply -f - >/dev/null || fail "apply nhang"
nhang_replaced() { tend get pods -l app=nhang -o json | jq -e '.items[] | select(.status.phase == "Running" and
    .status.containerStatuses[0].restartCount >= 1)' >/dev/null; }
wait_for 20 nhang_replaced && ok "a unit whose watchdog stops is stopped by systemd and replaced" ||
    fail "nhang not replaced: $(tend get pods -l app=nhang -o wide)"
tend delete deploy/nhang >/dev/null

echo "== a unit's volumes: BindReadOnlyPaths=, and an edit reaches its files"
# uvol V: a ConfigMap (app.conf: v=V), and a unit that prints its file
uvol() {
    cat <<YAML
apiVersion: v1
kind: ConfigMap
metadata: {name: ucfg}
data: {app.conf: "v=$1"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: uvol}
spec:
  replicas: 1
  selector: {matchLabels: {app: uvol}}
  template:
    metadata: {labels: {app: uvol}}
    spec:
      runtimeClassName: systemd
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        command: ["/bin/sh", "-c", "while :; do echo \"read \$(cat $tmp/umnt/cfg/app.conf)\"; sleep 0.2; done"]
        env: [{name: TEST_MARKER, value: "$tmp"}]
        volumeMounts: [{name: cfg, mountPath: $tmp/umnt/cfg}]
      volumes: [{name: cfg, configMap: {name: ucfg}}]
YAML
}
uvol 1 | tend apply -f - >/dev/null || fail "apply uvol"
uvol_read() { tend logs deploy/uvol 2>/dev/null | grep -q "read v=$1\$"; }
wait_for 20 uvol_read 1 && ok "the unit reads its ConfigMap's file at mountPath" ||
    fail "uvol: $(tend get pods -l app=uvol -o wide; tend logs deploy/uvol | tail -3)"
unit=$(tend get pods -l app=uvol -o wide | awk 'NR == 2 { print $6 }')
systemctl --user show -P BindReadOnlyPaths "$unit" | grep -q "$tmp/umnt/cfg" &&
    ok "through BindReadOnlyPaths=" || fail "$unit: BindReadOnlyPaths=$(systemctl --user show -P BindReadOnlyPaths "$unit")"
mp=$(main_pid "$unit")
uvol 2 | tend apply -f - >/dev/null || fail "apply uvol 2"
wait_for 10 uvol_read 2 && ok "an edit reaches the unit's file" || fail "uvol: $(tend logs deploy/uvol | tail -3)"
[ "$(main_pid "$unit")" = "$mp" ] && ok "in the same process" || fail "restarted: $(main_pid "$unit") != $mp"
[ -z "$(ls -A "$tmp/umnt/cfg")" ] && ok "the host's mount point stays empty" || fail "$(ls -A "$tmp/umnt/cfg")"
tend delete deploy/uvol >/dev/null

echo "== limits a user manager cannot enforce on cgroup v1: refused at apply"
# (this harness: a user manager on the v1/hybrid layout, which systemd
# gives no v1 controller; MemoryMax= would be taken and ignored)
ulimited() {
    cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: ulimited}
spec:
  selector: {matchLabels: {app: ulimited}}
  template:
    metadata: {labels: {app: ulimited}}
    spec:
      runtimeClassName: systemd
      containers:
      - name: main
        command: ["$testprog", "sleep"]
        env: [{name: TEST_MARKER, value: "$tmp"}]
        resources: {limits: {$1}}
YAML
}
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    echo "(cgroup v2 host: what the user manager was given decides; not this case)"
else
    for l in "memory: 64Mi" "cpu: 200m"; do
        ulimited "$l" >"$tmp/ulimited.yaml"
        if tend apply -f "$tmp/ulimited.yaml" >"$tmp/out" 2>&1; then
            fail "a systemd pod with $l accepted where the user manager cannot enforce it"
        else
            expect_grep "limits.${l%%:*} cannot be enforced by systemd's user manager on this host's cgroup v1 layout" \
                "$tmp/out" "$l refused at apply, with the reason" &&
                ok "$l refused: $(head -c 160 "$tmp/out")..."
        fi
        expect_exit 2 "--dry-run=server refuses it too" tend apply --dry-run=server -f "$tmp/ulimited.yaml"
    done
    expect_api 404 "nothing stored" GET /apis/apps/v1/namespaces/default/deployments/ulimited
    systemctl --user list-units --all --plain --no-legend 'tend-default-ulimited*' | grep -q . &&
        fail "a unit was made" || ok "no unit made"
fi

echo "== top: a unit's usage is its cgroup's, every process of it"
# The main process (sleep, ~1 MiB) starts a child that holds 48 MiB: the
# pod's memory counts the child too.
cat >"$tmp/uhog.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: uhog}
spec:
  selector: {matchLabels: {app: uhog}}
  template:
    metadata: {labels: {app: uhog}}
    spec:
      runtimeClassName: systemd
      terminationGracePeriodSeconds: 1
      containers:
      - name: main
        command: ["/bin/sh", "-c", "/usr/bin/python3 -c 'import time; b = bytearray(48 << 20); open(\\"$tmp/uhog-held\\", \\"w\\").close(); time.sleep(600)' & exec sleep 4251"]
        env: [{name: TEST_MARKER, value: "$tmp"}]
YAML
tend apply -f "$tmp/uhog.yaml" >/dev/null || fail "apply uhog"
upod=
hog_up() { upod=$(tend get pods -l app=uhog -o json | jq -r '.items[] | select(.status.phase == "Running") | .metadata.name' | head -1)
    [ -n "$upod" ] && pgrep -f "bytearray\(48" >/dev/null; }
wait_for 20 hog_up || fail "uhog not running"
unit=$(tend get pods -l app=uhog -o wide | awk 'NR == 2 { print $6 }')
# the child's 48 MiB are all there (it says so once bytearray() has filled
# them), as /proc says: read before that, its RSS is still growing
touched() {
    hp=$(pgrep -f "bytearray\(48" | head -1)
    [ -e "$tmp/uhog-held" ] && [ -n "$hp" ] &&
        [ "$(awk '/^VmRSS/ { print $2 }' "/proc/$hp/status")" -ge $((48 * 1024)) ]
}
wait_for 10 touched || fail "uhog's child never held its 48 MiB"
expect_api 200 "metrics of a systemd pod" GET "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/$upod"
umem=$(jq -r '.containers[0].usage.memory' "$tmp/body" | sed 's/Ki$//')
# what the unit's processes hold, as /proc says
sum=0
for q in $(cat "/sys/fs/cgroup/systemd$(systemctl --user show -P ControlGroup "$unit")/cgroup.procs"); do
    sum=$((sum + $(awk '/^VmRSS/ { print $2 }' "/proc/$q/status")))
done
[ "$umem" -ge $((48 * 1024)) ] && ok "the unit's memory counts its child: ${umem}Ki" ||
    fail "uhog's memory ${umem}Ki, not its child's 48 MiB and more"
[ $((umem - sum)) -le 2048 ] && [ $((sum - umem)) -le 2048 ] &&
    ok "and agrees with its processes' RSS (${sum}Ki)" || fail "metrics ${umem}Ki, /proc ${sum}Ki"
tend delete deploy/uhog >/dev/null

echo "== no bus: systemd pods fail with the reason, process pods run"
tend delete deploy/move >/dev/null
no_units() { [ -z "$(systemctl --user list-units --plain --no-legend 'tend-*' | grep -v inactive)" ]; }
wait_for 15 no_units && ok "deleting the deployment stopped its units" ||
    fail "units left: $(systemctl --user list-units 'tend-*')"
stop_tendd TERM
TENDD_ARGS="--systemd-bus system"
start_tendd
deploy nobus systemd 5 "$testprog" sleep >"$tmp/nobus.yaml"
deploy proc process 5 "$testprog" sleep >"$tmp/proc.yaml"
tend apply -f "$tmp/nobus.yaml" >/dev/null
tend apply -f "$tmp/proc.yaml" >/dev/null
nobus_failed() { tend get pods -l app=nobus -o json |
    jq -e '[.items[].status.containerStatuses[0].lastState.terminated.message // ""] |
        map(select(test("system bus"))) | length > 0' >/dev/null; }
wait_for 10 nobus_failed && ok "the pod says the system bus is unreachable" ||
    fail "$(tend get pods -l app=nobus -o json | jq -c '[.items[].status]')"
wait_for 10 count_running proc 2 && ok "process pods run meanwhile" || fail "process pods did not run"
grep -q "cannot reach systemd on the system bus" "$tmp/tendd.log" && ok "tendd logs it" ||
    fail "nothing in tendd's log"
tend delete deploy/nobus >/dev/null
tend delete deploy/proc >/dev/null

finish
