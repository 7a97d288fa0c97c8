#!/bin/sh
# Shared by the CLI tests: a private tendd on a temporary state dir and
# socket, and small assertions. Source it; call start_tendd.

set -u
bin="$TEND_BIN_DIR"
lib_root=$(cd "$(dirname "$0")/../.." && pwd) # the tests' scripts are two levels down
testprog="$TEND_BIN_DIR/../tests/tend-testprog"
tmp=$(mktemp -d /tmp/tend-cli-XXXXXX) || exit 1
export TEND_SOCKET="$tmp/tend.sock"
state="$tmp/state"
tendd_pid=
failures=0
# Sanitizer reports of the binaries under test go to the test output.
export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=1"

tend() { "$bin/tend" "$@"; }

start_tendd() {
    # shellcheck disable=SC2086 # TENDD_ARGS: extra options, split on spaces
    "$bin/tendd" --state-dir "$state" --socket "$TEND_SOCKET" --port-range 44000-44999 \
        --resync 5s ${TENDD_ARGS:-} "$@" >>"$tmp/tendd.log" 2>&1 &
    tendd_pid=$!
    for _ in $(seq 100); do
        [ -S "$TEND_SOCKET" ] && tend version >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    echo "tendd did not come up:"; cat "$tmp/tendd.log"; exit 1
}

# stop_tendd [SIGNAL]: TERM (the default) must give exit 0 — with the
# sanitizer build that also means no leak at exit.
stop_tendd() {
    [ -n "$tendd_pid" ] || return 0
    kill -"${1:-TERM}" "$tendd_pid" 2>/dev/null
    wait "$tendd_pid" 2>/dev/null
    rc=$?
    tendd_pid=
    if [ "${1:-TERM}" = TERM ] && [ "$rc" -ne 0 ]; then
        fail "tendd exited $rc on SIGTERM"
    fi
    return 0
}

# The pods of this test carry TEST_MARKER=$tmp in their environment (see
# the manifests), or write to a pod log of a state directory under $tmp
# (a manifest that replaces the env, or a test's own): that is how they are
# found and stopped at the end, as tendd leaves pods running when it stops
# (on purpose), and other tests may be running pods of their own at the
# same time.
kill_marked() {
    for e in /proc/[0-9]*/environ; do
        p=${e#/proc/}
        p=${p%/environ}
        out=$(readlink "/proc/$p/fd/1" 2>/dev/null)
        case "$out" in
        "$tmp"/*/pods/*) kill -KILL "$p" 2>/dev/null; continue ;;
        esac
        if { tr "\0" "\n" <"$e"; } 2>/dev/null | grep -qx "TEST_MARKER=$tmp"; then
            kill -KILL "$p" 2>/dev/null
        fi
    done
}

# The cgroups of this test's tendd (its logs name them), once their
# processes are gone: the pods' (killed above), then tendd's own.
remove_cgroups() {
    "$lib_root/scripts/remove-cgroups.sh" "$tmp"/*.log "$tmp"/*/*.log
}

cleanup() {
    exit_rc=$?
    stop_tendd TERM
    kill_marked
    remove_cgroups
    if [ "$failures" -ne 0 ] || [ "$exit_rc" -ne 0 ]; then
        echo "---- tendd log ----"; tail -80 "$tmp/tendd.log"
        # a sanitizer's report may be further up than the tail
        grep -q -E "Sanitizer|runtime error" "$tmp/tendd.log" &&
            { echo "---- sanitizer ----"; grep -A40 -m1 -E "Sanitizer|runtime error" "$tmp/tendd.log"; }
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ok() { echo "ok: $*"; }

# expect_exit CODE DESCRIPTION COMMAND...: the command's stdout/stderr are
# kept in $tmp/out and $tmp/err.
expect_exit() {
    want=$1 what=$2
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    got=$?
    if [ "$got" -ne "$want" ]; then
        fail "$what: exit $got, expected $want"
        sed 's/^/  out: /' "$tmp/out" | head -20
        sed 's/^/  err: /' "$tmp/err" | head -20
        return 1
    fi
    return 0
}

expect_grep() { # PATTERN FILE DESCRIPTION
    grep -q -e "$1" "$2" || { fail "$3: no \"$1\" in:"; sed 's/^/  /' "$2" | head -20; return 1; }
    return 0
}

# wait_for SECONDS COMMAND...: until the command succeeds.
wait_for() {
    n=$(($1 * 10))
    shift
    for _ in $(seq "$n"); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    return 1
}

# api METHOD PATH [curl args...]: the answer's body in $tmp/body, its
# headers in $tmp/headers, the status code on stdout.
api() {
    m=$1 p=$2
    shift 2
    curl -s -S --unix-socket "$TEND_SOCKET" -X "$m" -o "$tmp/body" -D "$tmp/headers" \
        -w '%{http_code}' "$@" "http://localhost$p"
}

# expect_api CODE DESCRIPTION METHOD PATH [curl args...]
expect_api() {
    want=$1 what=$2
    shift 2
    got=$(api "$@")
    if [ "$got" != "$want" ]; then
        fail "$what: HTTP $got, expected $want"
        head -c 600 "$tmp/body" | sed 's/^/  /'
        echo
        return 1
    fi
    return 0
}

# finish: stops tendd (which must exit cleanly), then the verdict.
finish() {
    stop_tendd TERM
    if grep -q -E "Sanitizer|runtime error" "$tmp/tendd.log"; then
        fail "sanitizer report in tendd's log"
    fi
    if [ "$failures" -eq 0 ]; then
        echo "all passed"
        exit 0
    fi
    echo "$failures failure(s)"
    exit 1
}
