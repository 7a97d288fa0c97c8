#!/bin/sh
# Process pods on cgroup v2 (issue 30): a cgroup2 hierarchy mounted at
# /sys/fs/cgroup in a mount namespace of the test's own, so that tendd sees
# the v2 layout whatever the host runs (here v1/hybrid: the memory and cpu
# controllers are v1's, and v2 has none to give). Pods run in
# /sys/fs/cgroup/tend-…/<uid>; a daemon that left the pod's session is
# stopped with it (cgroup.kill); a limit is enforced where v2 has the
# controller, and refused at apply with the reason where it has not.
ns_why="cgroups need root here (tendd makes them)"
. "$(dirname "$0")/mount-ns.sh"
if ! mount -t cgroup2 none /sys/fs/cgroup 2>/dev/null; then
    echo "the kernel does not let a cgroup2 hierarchy be mounted here; skipped"
    exit 77
fi
. "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || { echo "jq missing (make deps)"; exit 77; }

start_tendd
expect_grep "cgroups: v2; pods' cgroups under /sys/fs/cgroup/tend-" "$tmp/tendd.log" \
    "tendd finds the v2 layout"
base=$(sed -n "s/.*pods' cgroups under \([^ ]*\) .*/\1/p" "$tmp/tendd.log" | head -1)

. "$(dirname "$0")/cgroups-lib.sh"

daemon_in() { # CGROUP: a pod with a daemon; its cgroup must be CGROUP/<uid>
    deploy daemon "" "setsid -f sleep 4247.1; exec sleep 4247.2" >/dev/null || fail "apply daemon"
    wait_for 20 running daemon || fail "daemon not running"
    u=$(uid_of daemon)
    wait_for 10 pgrep -f "sleep 4247.1" || fail "the daemon did not start"
    d=$(pgrep -f "sleep 4247.1" | head -1)
    grep -qx "0::${1#/sys/fs/cgroup}/$u" "/proc/$d/cgroup" &&
        ok "the daemon is in the pod's cgroup $1/$u" ||
        fail "the daemon's cgroups: $(cat "/proc/$d/cgroup"), not $1/$u"
}
gone() { ! pgrep -f "sleep 4247" >/dev/null; }
refused() { # PATTERN DESCRIPTION: a limit refused at apply with PATTERN, nothing stored
    if deploy limited "memory: 48Mi" "exec sleep 4246" >"$tmp/out" 2>&1; then
        fail "limits.memory accepted ($2)"
    else
        expect_grep "$1" "$tmp/out" "$2"
    fi
    expect_api 404 "nothing stored" GET /apis/apps/v1/namespaces/default/deployments/limited
}

# a pod, and a daemon it leaves behind in a session of its own
daemon_in "$base"
# made in it, not moved there (clone3's CLONE_INTO_CGROUP, Linux 5.7)
kv=$(uname -r | awk -F. '{ print $1 * 1000 + $2 }')
if [ "$kv" -ge 5007 ]; then
    expect_grep "cgroups: pods are made in their cgroups (clone3 CLONE_INTO_CGROUP)" "$tmp/tendd.log" \
        "the pod made in its cgroup by clone3" && ok "made in its cgroup (clone3 CLONE_INTO_CGROUP)"
else
    expect_grep "pods join theirs before exec" "$tmp/tendd.log" "before Linux 5.7: a join"
fi
# an exec that fails in a child made so is a start error with its cause
cat >"$tmp/nobin.yaml" <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: nobin}
spec:
  selector: {matchLabels: {app: nobin}}
  template:
    metadata: {labels: {app: nobin}}
    spec:
      containers: [{name: nobin, command: [/nonexistent/tend-nobin]}]
YAML
tend apply -f "$tmp/nobin.yaml" >/dev/null || fail "apply nobin"
nobin_said() { tend get pods -l app=nobin -o json | grep -q "exec /nonexistent/tend-nobin: No such file"; }
wait_for 15 nobin_said && ok "a failed exec in its cgroup: a start error naming the path" ||
    fail "nobin: $(tend get pods -l app=nobin -o json | jq -c '[.items[].status.containerStatuses]')"
tend delete deploy nobin >/dev/null
expect_exit 0 "delete deploy daemon" tend delete deploy daemon
wait_for 15 gone && ok "deleted: nothing of the pod left, the daemon neither" ||
    fail "left behind: $(pgrep -af 'sleep 4247')"
cg_gone() { [ ! -d "$base/$u" ]; }
wait_for 10 cg_gone && ok "its cgroup removed" || fail "$base/$u is left"

# a limit: enforced where v2 has the controller, else refused with the reason
if grep -qw memory "$base/cgroup.subtree_control" 2>/dev/null; then
    deploy limited "memory: 48Mi" "exec sleep 4246" >/dev/null ||
        fail "apply limited"
    wait_for 20 running limited || fail "limited not running"
    [ "$(cat "$base/$(uid_of limited)/memory.max")" = $((48 << 20)) ] &&
        ok "limits.memory is memory.max" || fail "memory.max: $(cat "$base/$(uid_of limited)/memory.max")"
    tend delete deploy limited >/dev/null
else
    refused "limits.memory cannot be enforced: the memory controller is not available" \
        "refused at apply: v2 here has no memory controller"
fi

# tendd as a systemd service: the unit's cgroup delegated to it, marked as
# systemd marks it (trusted.delegate), as the hierarchy's other cgroups are
# not. This shell, and what it starts, moves as systemd would move tendd.
stop_tendd TERM
svc=/sys/fs/cgroup/tend-test-$$.service
leave_svc() {
    echo $$ >/sys/fs/cgroup/cgroup.procs 2>/dev/null
    rmdir "$svc/supervisor" "$svc" /sys/fs/cgroup/tend-test-$$.scope 2>/dev/null
}
trap 'cleanup; leave_svc' EXIT
mkdir -p "$svc/supervisor" || fail "mkdir $svc"
python3 -c 'import os, sys; os.setxattr(sys.argv[1], "trusted.delegate", b"1")' "$svc" ||
    fail "cannot mark $svc delegated"
restart_keeps() { # CGROUP: kill -9 of tendd, started again: the pod is adopted
    pid=$(pid_of daemon)
    stop_tendd KILL
    start_tendd
    [ "$(pid_of daemon)" = "$pid" ] && ok "tendd restarted: the pod (pid $pid) adopted" ||
        fail "pod pid $pid became $(pid_of daemon)"
    expect_exit 0 "delete deploy daemon" tend delete deploy daemon
    wait_for 15 gone && ok "deleted: the daemon went with the pod, after a restart" ||
        fail "left behind: $(pgrep -af 'sleep 4247')"
    cg_gone() { [ ! -d "$1/$u" ]; }
    wait_for 10 cg_gone "$1" && ok "its cgroup removed" || fail "$1/$u is left"
}

echo "== DelegateSubgroup=: tendd in $svc/supervisor"
echo $$ >"$svc/supervisor/cgroup.procs" || fail "cannot move into $svc/supervisor"
: >"$tmp/tendd.log"
start_tendd
expect_grep "cgroups: v2; pods' cgroups under $svc/tend-[0-9a-f]* (controllers:" "$tmp/tendd.log" \
    "pods' cgroups beside tendd's, in the unit's delegated cgroup"
sbase=$(sed -n "s/.*pods' cgroups under \([^ ]*\) .*/\1/p" "$tmp/tendd.log" | head -1)
daemon_in "$sbase"
restart_keeps "$sbase"
stop_tendd TERM
[ ! -d "$sbase" ] && ok "tendd's directory removed at its stop, no pod left in it" ||
    fail "$sbase is left"

echo "== Delegate=yes alone (systemd before 254): tendd in $svc itself"
echo $$ >"$svc/cgroup.procs" || fail "cannot move into $svc"
rmdir "$svc/supervisor"
: >"$tmp/tendd.log"
start_tendd
expect_grep "cgroups: v2; pods' cgroups under $svc/tend-[0-9a-f]* (no controllers: tendd runs in $svc, the cgroup delegated to it" \
    "$tmp/tendd.log" "pods' cgroups below tendd's, without controllers"
sbase=$(sed -n "s/.*pods' cgroups under \([^ ]*\) .*/\1/p" "$tmp/tendd.log" | head -1)
daemon_in "$sbase"
[ -z "$(cat "$svc/cgroup.subtree_control")" ] &&
    ok "no controller given down: the unit's cgroup may still hold the next tendd" ||
    fail "$svc/cgroup.subtree_control: $(cat "$svc/cgroup.subtree_control")"
restart_keeps "$sbase"
refused "limits.memory cannot be enforced: tendd runs in $svc.*DelegateSubgroup=supervisor" \
    "refused at apply, naming the unit setting that would allow it"
stop_tendd TERM

echo "== a cgroup not delegated (a login's scope): none"
scope=/sys/fs/cgroup/tend-test-$$.scope
mkdir "$scope" && echo $$ >"$scope/cgroup.procs" || fail "cannot move into $scope"
: >"$tmp/tendd.log"
start_tendd
expect_grep "cgroups: none: tendd runs in the cgroup $scope, which is not delegated to it" \
    "$tmp/tendd.log" "no cgroups where none is delegated, with the reason"
deploy daemon "" "exec sleep 4248" >/dev/null || fail "apply daemon"
wait_for 20 running daemon && ok "pods still run, without cgroups" || fail "daemon not running"
[ -z "$(find "$scope" -mindepth 1 -type d)" ] && ok "nothing made in $scope" ||
    fail "made in $scope: $(find "$scope" -mindepth 1 -type d)"
tend delete deploy daemon >/dev/null

finish
