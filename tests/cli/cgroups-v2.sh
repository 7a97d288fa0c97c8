#!/bin/sh
# Process pods on cgroup v2 (issue 30): a cgroup2 hierarchy mounted at
# /sys/fs/cgroup in a mount namespace of the test's own, so that tendd sees
# the v2 layout whatever the host runs (here v1/hybrid: the memory and cpu
# controllers are v1's, and v2 has none to give). Pods run in
# /sys/fs/cgroup/tend-…/<uid>; a daemon that left the pod's session is
# stopped with it (cgroup.kill); a limit is enforced where v2 has the
# controller, and refused at apply with the reason where it has not.
if [ "$(id -u)" -ne 0 ]; then
    echo "cgroups need root here (tendd makes them); skipped"
    exit 77
fi
if [ -z "${TEND_CGROUP2_NS:-}" ]; then
    command -v unshare >/dev/null || { echo "unshare missing (util-linux)"; exit 77; }
    TEND_CGROUP2_NS=1 exec unshare --mount --propagation private "$0" "$@"
fi
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

# a pod, and a daemon it leaves behind in a session of its own
deploy daemon "" "setsid -f sleep 4245.1; exec sleep 4245.2" >/dev/null || fail "apply daemon"
wait_for 20 running daemon || fail "daemon not running"
u=$(uid_of daemon)
wait_for 10 pgrep -f "sleep 4245.1" || fail "the daemon did not start"
d=$(pgrep -f "sleep 4245.1" | head -1)
grep -qx "0::/${base#/sys/fs/cgroup/}/$u" "/proc/$d/cgroup" &&
    ok "the daemon is in the pod's v2 cgroup ($base/$u)" ||
    fail "the daemon's cgroups: $(cat "/proc/$d/cgroup")"
expect_exit 0 "delete deploy daemon" tend delete deploy daemon
gone() { ! pgrep -f "sleep 4245" >/dev/null; }
wait_for 15 gone && ok "deleted: nothing of the pod left, the daemon neither" ||
    fail "left behind: $(pgrep -af 'sleep 4245')"
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
    if deploy limited "memory: 48Mi" "exec sleep 4246" >"$tmp/out" 2>&1; then
        fail "limits.memory accepted where v2 has no memory controller"
    else
        expect_grep "limits.memory cannot be enforced: the memory controller is not available" \
            "$tmp/out" "refused at apply: v2 here has no memory controller"
    fi
    expect_api 404 "nothing stored" GET /apis/apps/v1/namespaces/default/deployments/limited
fi

finish
