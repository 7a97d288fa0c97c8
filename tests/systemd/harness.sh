#!/bin/sh
# harness.sh COMMAND [ARGS...]: runs COMMAND against a real systemd user
# manager of its own, on a machine whose PID 1 need not be systemd.
#
# The steps, and why each exists: a private mount namespace; a per-run temp
# dir; a private copy of /run/systemd with system/ in it (so the manager
# believes it was booted with systemd); a per-run cgroup that the manager
# takes as its root (without it a manager started from the machine's root
# cgroup moves other processes of the machine around); the manager's own
# D-Bus (dbus-user-session); its log in a file bound over /dev/kmsg.
# Teardown is by pid and by cgroup, never by name.
#
# Exit status: COMMAND's; 77 (skipped) where the machine cannot do this
# (not root, no unshare, no systemd or dbus-user-session), with the reason.

set -u

skip() { echo "skipped: $*"; exit 77; }

# 1. A private mount namespace (no --fork: the pid stays, signals reach us).
if [ -z "${TEND_HARNESS_INNER:-}" ]; then
    [ "$(id -u)" -eq 0 ] || skip "the systemd tests need root (a private mount namespace)"
    command -v unshare >/dev/null || skip "no unshare (util-linux)"
    [ -x /usr/lib/systemd/systemd ] || skip "no /usr/lib/systemd/systemd (make deps installs systemd)"
    [ -f /usr/lib/systemd/user/dbus.socket ] ||
        skip "no dbus-user-session: systemd registers on a bus it runs itself (make deps)"
    command -v busctl >/dev/null && command -v systemctl >/dev/null || skip "no busctl/systemctl"
    unshare -m --propagation private true 2>/dev/null || skip "unshare -m is not permitted here"
    TEND_HARNESS_INNER=1 exec unshare -m --propagation private "$0" "$@"
fi

# 2. A per-run temp dir, locked for the run's lifetime.
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d /tmp/tend-systemd-XXXXXX) || exit 1
chmod 700 "$tmp"
exec 9>"$tmp/lock"
flock 9
run=$(basename "$tmp")
mgr=
test_pid=
cg_dirs=
orig_systemd=
orig_unified=

teardown() {
    [ -n "$test_pid" ] && kill -TERM "$test_pid" 2>/dev/null
    if [ -n "$mgr" ]; then
        kill -TERM "$mgr" 2>/dev/null
        for _ in $(seq 100); do kill -0 "$mgr" 2>/dev/null || break; sleep 0.05; done
        kill -KILL "$mgr" 2>/dev/null
        wait "$mgr" 2>/dev/null
    fi
    # Back to where we came from, then nothing may be left in the run's
    # cgroups: kill what is, remove them depth-first.
    [ -n "$orig_systemd" ] && echo $$ >"$orig_systemd/cgroup.procs" 2>/dev/null
    [ -n "$orig_unified" ] && echo $$ >"$orig_unified/cgroup.procs" 2>/dev/null
    for d in $cg_dirs; do
        for _ in 1 2 3 4 5; do
            pids=$(find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null)
            [ -z "$pids" ] && break
            kill -KILL $pids 2>/dev/null
            sleep 0.05
        done
        find "$d" -depth -type d -exec rmdir {} \; 2>/dev/null
    done
    # the cgroups of pods of a tendd that ran as a unit here (its state
    # dir names them): docs/cgroups.md
    # shellcheck disable=SC2046 # (paths without spaces: mktemp's)
    "$here/../../scripts/remove-cgroups.sh" $(find "$tmp" -path "*/tend/cgroups" 2>/dev/null)
    mountpoint -q /dev/kmsg && umount /dev/kmsg
    mountpoint -q /run/systemd && umount -l /run/systemd
    rm -rf "$tmp"
}
trap teardown EXIT
trap 'exit 143' TERM INT

# 3. sd_booted(): /run/systemd/system must exist. A private copy of
# /run/systemd with it, bound over the original (in our namespace only).
private_run=
if [ ! -d /run/systemd/system ]; then
    mkdir "$tmp/run-systemd"
    [ -d /run/systemd ] && cp -a /run/systemd/. "$tmp/run-systemd/" 2>/dev/null
    mkdir -p "$tmp/run-systemd/system"
    mkdir -p /run/systemd
    mount --bind "$tmp/run-systemd" /run/systemd || { echo "cannot bind /run/systemd"; exit 1; }
    private_run=1
fi

# 4. The per-run cgroup, in the named systemd hierarchy and the unified
# one (or in the only one, on a pure cgroup2 host).
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    cur=$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
    orig_unified="/sys/fs/cgroup${cur%/}"
    d="$orig_unified/$run"
    mkdir "$d" && echo $$ >"$d/cgroup.procs" || { echo "cannot create cgroup $d"; exit 1; }
    cg_dirs="$d"
else
    cur=$(awk -F: '$2 == "name=systemd" { print $3 }' /proc/self/cgroup)
    [ -d /sys/fs/cgroup/systemd ] || skip "no name=systemd cgroup hierarchy"
    orig_systemd="/sys/fs/cgroup/systemd${cur%/}"
    d="$orig_systemd/$run"
    mkdir "$d" && echo $$ >"$d/cgroup.procs" || { echo "cannot create cgroup $d"; exit 1; }
    cg_dirs="$d"
    if [ -d /sys/fs/cgroup/unified ]; then
        cur=$(awk -F: '$1 == "0" { print $3 }' /proc/self/cgroup)
        orig_unified="/sys/fs/cgroup/unified${cur%/}"
        d="$orig_unified/$run"
        mkdir "$d" && echo $$ >"$d/cgroup.procs" || { echo "cannot create cgroup $d"; exit 1; }
        cg_dirs="$cg_dirs $d"
    fi
fi

# 5. Runtime, config and data dirs of our own; noisy stock sockets masked.
export XDG_RUNTIME_DIR="$tmp/xdg"
export XDG_CONFIG_HOME="$tmp/config"
export XDG_DATA_HOME="$tmp/data"
mkdir -p "$XDG_RUNTIME_DIR/systemd/user.control" "$XDG_CONFIG_HOME" "$XDG_DATA_HOME"
chmod 700 "$XDG_RUNTIME_DIR"
for u in gpg-agent.socket gpg-agent-browser.socket gpg-agent-extra.socket gpg-agent-ssh.socket \
    dirmngr.socket pk-debconf-helper.socket; do
    ln -s /dev/null "$XDG_RUNTIME_DIR/systemd/user.control/$u"
done

# 6. The manager's own bus (dbus.socket of dbus-user-session).
export DBUS_SESSION_BUS_ADDRESS="unix:path=$XDG_RUNTIME_DIR/bus"

# 7. Its log: a file bound over /dev/kmsg, LogTarget=kmsg.
log="$tmp/manager.log"
: >"$log"
mount --bind "$log" /dev/kmsg || { echo "cannot bind /dev/kmsg"; exit 1; }
if [ -n "$private_run" ]; then
    mkdir -p /run/systemd/user.conf.d
    printf '[Manager]\nLogTarget=kmsg\nLogLevel=info\n' >/run/systemd/user.conf.d/50-test.conf
fi

# 8. Start it (with a clean environment: units inherit the manager's) and
# wait until it runs.
env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME="$tmp" \
    USER=root LOGNAME=root XDG_RUNTIME_DIR="$XDG_RUNTIME_DIR" XDG_CONFIG_HOME="$XDG_CONFIG_HOME" \
    XDG_DATA_HOME="$XDG_DATA_HOME" DBUS_SESSION_BUS_ADDRESS="$DBUS_SESSION_BUS_ADDRESS" \
    /usr/lib/systemd/systemd --user </dev/null >>"$tmp/manager.out" 2>&1 &
mgr=$!
ready=
for _ in $(seq 600); do
    if [ -S "$XDG_RUNTIME_DIR/systemd/private" ] &&
        busctl --user call org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus \
            NameHasOwner s org.freedesktop.systemd1 2>/dev/null | grep -q true; then
        case $(systemctl --user is-system-running 2>/dev/null) in
        running | degraded) ready=1; break ;;
        esac
    fi
    kill -0 "$mgr" 2>/dev/null || break
    sleep 0.05
done
if [ -z "$ready" ]; then
    echo "the systemd user manager did not come up; its log:"
    cat "$log" "$tmp/manager.out"
    exit 1
fi

# 9. The test, with the variables above.
export TEND_SYSTEMD_HARNESS=1 TEND_SYSTEMD_LOG="$log"
"$@" &
test_pid=$!
wait "$test_pid"
rc=$?
test_pid=
if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
    echo "---- systemd user manager log (last 40 lines) ----"
    tail -40 "$log"
fi
exit "$rc"
