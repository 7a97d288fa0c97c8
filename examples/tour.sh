#!/bin/sh
# The tour: tend's whole story in a terminal, each command shown before it
# runs. It starts an agent of its own (a temporary state dir and socket),
# so it does not touch one you run. Exits non-zero as soon as a step does
# not do what it says.
#
#   examples/tour.sh            after `make build` (or make run)
#   TOUR_PAUSE=2 examples/tour.sh   to read along: seconds between steps
#
# TEND_BIN_DIR chooses the binaries (default: build/bin, or where an
# installed copy finds them).
set -u
cd "$(dirname "$0")/.." || exit 1
repo=$PWD
# In a source tree, build/bin; installed (PREFIX/share/tend/examples),
# PREFIX/bin with tendd in PREFIX/sbin.
default_bin=build/bin
[ ! -d build/bin ] && [ -x ../../bin/tend ] && default_bin=../../bin
bin=$(cd "${TEND_BIN_DIR:-$default_bin}" 2>/dev/null && pwd) || {
    echo "tour: no ${TEND_BIN_DIR:-$default_bin}: run make build first"
    exit 1
}
tendd_bin=$bin/tendd
[ -x "$tendd_bin" ] || tendd_bin=$bin/../sbin/tendd
for b in "$tendd_bin" "$bin/tend" "$bin/tend-example-web"; do
    [ -x "$b" ] || { echo "tour: no $b: run make build first"; exit 1; }
done

tmp=$(mktemp -d /tmp/tend-tour-XXXXXX) || exit 1
export TEND_SOCKET="$tmp/tend.sock"
tendd_pid=
bold=$(printf '\033[1m') plain=$(printf '\033[0m')
[ -t 1 ] || bold= plain=

cleanup() {
    [ -n "$tendd_pid" ] && kill "$tendd_pid" 2>/dev/null && wait "$tendd_pid" 2>/dev/null
    # The tour's pods carry TOUR=$tmp (see web-v*.yaml below): stop them.
    for e in /proc/[0-9]*/environ; do
        if { tr '\0' '\n' <"$e"; } 2>/dev/null | grep -qx "TOUR=$tmp"; then
            p=${e#/proc/}
            kill -TERM "${p%/environ}" 2>/dev/null
        fi
    done
    # and the cgroups tendd made for them (its log names them), once empty
    for base in $(sed -n "s/.*pods' cgroups under \([^(]*\).*/\1/p" "$tmp/tendd.log" 2>/dev/null |
        tr ',' ' '); do
        for _ in $(seq 50); do
            for d in "$base"/*/; do [ -d "$d" ] && rmdir "$d" 2>/dev/null; done
            rmdir "$base" 2>/dev/null && break
            sleep 0.1
        done
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; sleep "${TOUR_PAUSE:-0}"; }
say() { printf '%s\n' "$*"; }
# show COMMAND...: prints it as typed, then runs it.
show() { printf '%s$ %s%s\n' "$bold" "$*" "$plain"; "$@"; }
die() { printf 'tour: FAILED: %s\n' "$*"; exit 1; }
tend() { "$bin/tend" "$@"; }
# until SECONDS COMMAND...: polls every 0.1 s
until_ok() {
    n=$(($1 * 10))
    shift
    for _ in $(seq "$n"); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
    return 1
}
ready_pods() { tend get pods | awk 'NR > 1 && $2 == "1/1" && $3 == "Running"' | wc -l; }
three_ready() { [ "$(ready_pods)" -eq 3 ]; }
# What one of the pods serves: its leased port from -o wide, then curl.
served() {
    port=$(tend get pods -o wide | awk 'NR > 1 && $3 == "Running" { split($7, a, "="); print a[2]; exit }')
    curl -s "http://127.0.0.1:$port/"
}

# The examples run build/bin/tend-example-web relative to tendd's working
# directory; the tour's tendd works in a directory where that is $bin.
mkdir -p "$tmp/root/build"
ln -s "$bin" "$tmp/root/build/bin"
# Mark the tour's pods, so that they can be stopped at the end.
for v in v1 v2 held; do
    sed "s|^      - name: web$|      - name: web\n        env: [{name: TOUR, value: \"$tmp\"}]|" \
        "$repo/examples/web-$v.yaml" >"$tmp/web-$v.yaml"
done
# web-held listens on 8080; the tour takes a port of its own
hport=$((19000 + $$ % 1000)) # below the ephemeral ports (32768-): no connection holds it
sed -i "s/containerPort: 8080/containerPort: $hport/" "$tmp/web-held.yaml"
# held VERSION [ANNOTATIONS]: web-held at VERSION, with deployment annotations
held() {
    sed -e "s/--version=v1/--version=$1/" -e "${3:-}" \
        -e "s|^  labels:$|  annotations: {${2:-}}\n  labels:|" "$tmp/web-held.yaml"
}

step "Start an agent"
say "tendd keeps its state (a SQLite file, the pods' logs) in a directory and"
say "serves its API on a unix socket. Here, a temporary one:"
printf '%s$ tendd --state-dir %s/state --socket %s &%s\n' "$bold" "$tmp" "$TEND_SOCKET" "$plain"
(cd "$tmp/root" && exec "$tendd_bin" --state-dir "$tmp/state" --socket "$TEND_SOCKET" \
    >"$tmp/tendd.log" 2>&1) &
tendd_pid=$!
until_ok 5 tend version || die "tendd did not start: $(cat "$tmp/tendd.log")"
show tend version

step "Apply web v1: three replicas of a small HTTP server"
say "A Deployment in Kubernetes' own shape (examples/web-v1.yaml): each"
say "replica gets a leased port, and counts as ready once /healthz answers."
show tend apply -f "$tmp/web-v1.yaml" || die "apply"
show tend rollout status deploy/web --timeout=60s || die "the rollout did not finish"
show tend get pods -o wide
three_ready || die "not 3 ready pods"
say "One of them answers:"
served | grep -q "tend-example-web v1" || die "no v1 answer"
served

step "kill -9 one replica, and watch it come back"
victim=$(tend get pods | awk 'NR > 1 && $3 == "Running" { print $1; exit }')
pid=$(tend get pod "$victim" -o wide | awk 'NR == 2 { print $6 }')
show kill -9 "$pid"
say "(tend get pods -w: every change as it happens; 3 seconds of it)"
printf '%s$ tend get pods -w%s\n' "$bold" "$plain"
timeout 3 "$bin/tend" get pods -w
until_ok 10 three_ready || die "the killed replica was not replaced"
succ=$(tend get pods | awk 'NR > 1 && $4 == 1 { print $1; exit }')
[ -n "$succ" ] || die "no pod counts a restart"
show tend describe "pod/$succ"
tend describe "pod/$succ" | grep -q "Signal: *9" || die "$succ does not carry signal 9 as its last state"
say "A new pod took its place, as a container restarted in place: RESTARTS 1, the"
say "killed one's end as its Last State, its output as tend logs $succ --previous."

step "Roll out web v2, one replica at a time"
show tend apply -f "$tmp/web-v2.yaml" || die "apply v2"
show tend rollout status deploy/web --timeout=60s || die "the v2 rollout did not finish"
served | grep -q "tend-example-web v2" || die "no v2 answer"
served
show tend rollout history deploy/web
tend rollout history deploy/web | grep -q "^2 " || die "no revision 2"

step "Roll back"
show tend rollout undo deploy/web || die "undo"
show tend rollout status deploy/web --timeout=60s || die "the rollback did not finish"
served | grep -q "tend-example-web v1" || die "not v1 after the rollback"
served
say "Revision 1's template is back, renumbered as revision 3 (as Kubernetes does):"
show tend rollout history deploy/web
tend rollout history deploy/web | grep -q "^3 " || die "no revision 3"
show tend get events

step "Scale the ReplicaSet by hand, and watch the deployment put it back"
rs=$(tend get rs | awk 'NR > 1 && $2 == 3 { print $1 }')
[ -n "$rs" ] || die "no ReplicaSet with 3 replicas"
show tend scale "rs/$rs" --replicas=5
back() { tend get rs "$rs" | awk 'NR == 2 { exit !($2 == 3) }'; }
until_ok 10 back || die "the ReplicaSet was not put back"
show tend get rs
tend get events | grep -q "Scaled down replica set $rs from 5 to 3" || die "no event for it"
show tend describe "deploy/web"

step "Zero downtime: tendd holds the listening socket"
say "examples/web-held.yaml asks tendd to hold 127.0.0.1:$hport (tend.io/listen) and"
say "to count a replica ready once it says READY=1 on its NOTIFY_SOCKET"
say "(tend.io/notify), as a systemd Type=notify service would. Every replica of"
say "every revision gets the same listening socket as fd 3 (LISTEN_FDS):"
held v1 >"$tmp/held.yaml"
show tend apply -f "$tmp/held.yaml" || die "apply web-held"
show tend rollout status deploy/web-held --timeout=60s || die "web-held did not roll out"
show ss -ltnp "sport = :$hport"
ss -ltnp "sport = :$hport" | grep -q tendd || die "tendd does not hold :$hport"
say "Now requests, one after another, while a new version rolls out:"
rm -f "$tmp/stop"
(ok=0 bad=0; while [ ! -e "$tmp/stop" ]; do
    if curl -s -f -m 5 -o /dev/null "http://127.0.0.1:$hport/"; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
done; echo "$ok $bad" >"$tmp/load") &
loader=$!
held v2 >"$tmp/held.yaml"
show tend apply -f "$tmp/held.yaml" || die "apply web-held v2"
show tend rollout status deploy/web-held --timeout=60s || die "web-held v2 did not roll out"
touch "$tmp/stop"
wait "$loader"
read -r good bad <"$tmp/load"
say "$good requests during the rollout, $bad failed: old and new replicas accept"
say "from one queue, and a replica that stops leaves what waits to the others."
[ "$bad" -eq 0 ] || die "$bad requests failed"
curl -s "http://127.0.0.1:$hport/" | grep -q v2 || die "no v2 answer on :$hport"

step "Canaries: one new pod first, then promote"
say "With tend.io/canary: \"1\", a new template gets one pod, and the rollout"
say "waits until someone promotes it:"
held v3 '"tend.io/canary": "1"' >"$tmp/held.yaml"
show tend apply -f "$tmp/held.yaml" || die "apply the canary"
canary_waits() { tend rollout status deploy/web-held --watch=false | grep -q "waiting for promotion"; }
until_ok 30 canary_waits || die "the canary is not waiting"
show tend rollout status deploy/web-held --watch=false
show tend get pods -l app=web-held
show tend rollout promote deploy/web-held || die "promote"
show tend rollout status deploy/web-held --timeout=60s || die "the promoted rollout did not finish"

step "Automatic rollback: a version that crashes goes back by itself"
say "With tend.io/auto-rollback: \"true\", a rollout whose new pods crash-loop (or"
say "that passes its progress deadline) goes back to the last revision that"
say "completed. v4 here is given --drain=oops, which it refuses: it exits at once."
held v4 '"tend.io/auto-rollback": "true"' 's/--drain=1/--drain=oops/' >"$tmp/held.yaml"
show tend apply -f "$tmp/held.yaml" || die "apply the bad version"
printf '%s$ tend rollout status deploy/web-held%s\n' "$bold" "$plain"
if tend rollout status deploy/web-held --timeout=60s; then die "the bad rollout succeeded"; fi
tend get events | grep -q "RolledBack" || die "no RolledBack event"
say "The event it left (tend get events | grep RolledBack):"
tend get events | grep RolledBack
curl -s "http://127.0.0.1:$hport/" | grep -q v3 || die "v3 does not answer after the rollback"
say "v3 answers again; the failed revision is not tried again until you apply it anew."
show tend delete deploy/web-held

step "Configuration rolls out too, and rolls back"
say "examples/web-config.yaml takes its version and its drain time from the"
say "ConfigMap web-config. With tend.io/config-rollout: \"true\", a change of it is"
say "a new revision, rolled out like a new binary; each revision keeps a snapshot"
say "of the configuration it ran with."
sed "s|^        env:$|        env:\n        - {name: TOUR, value: \"$tmp\"}|" \
    "$repo/examples/web-config.yaml" >"$tmp/web-config.yaml"
# config VERSION DRAIN: the ConfigMap alone
config() { printf 'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web-config}\ndata: {version: %s, drain: "%s"}\n' "$1" "$2"; }
served_by() {
    port=$(tend get pods -l "app=$1" -o wide | awk 'NR > 1 && $3 == "Running" { split($7, a, "="); print a[2]; exit }')
    curl -s "http://127.0.0.1:$port/version"
}
show tend apply -f "$tmp/web-config.yaml" || die "apply web-config"
show tend rollout status deploy/web-config --timeout=60s || die "web-config did not roll out"
[ "$(served_by web-config)" = c1 ] || die "web-config does not serve c1: $(served_by web-config)"
say "It serves $(served_by web-config). Now the ConfigMap says c2:"
config c2 1 >"$tmp/c2.yaml"
show tend apply -f "$tmp/c2.yaml" || die "apply c2"
show tend rollout status deploy/web-config --timeout=60s || die "c2 did not roll out"
[ "$(served_by web-config)" = c2 ] || die "web-config does not serve c2: $(served_by web-config)"
say "It serves $(served_by web-config), and it is revision 2:"
show tend rollout history deploy/web-config
say "A configuration the server refuses (drain: oops) is rolled back by itself:"
config c3 oops >"$tmp/c3.yaml"
show tend apply -f "$tmp/c3.yaml" || die "apply c3"
printf '%s$ tend rollout status deploy/web-config%s\n' "$bold" "$plain"
if tend rollout status deploy/web-config --timeout=60s; then die "the bad configuration rolled out"; fi
until_ok 20 sh -c "[ \"\$(curl -s http://127.0.0.1:\$(\"$bin/tend\" get pods -l app=web-config -o wide | awk 'NR == 2 { split(\$7, a, \"=\"); print a[2] }')/version)\" = c2 ]" ||
    die "c2 does not answer after the rollback"
say "c2 answers again. Undo to revision 1 brings the first configuration back,"
say "though web-config says c3: revision 1 ran with a snapshot of it."
show tend rollout undo deploy/web-config --to-revision=1 || die "undo"
show tend rollout status deploy/web-config --timeout=60s || die "the undo did not roll out"
[ "$(served_by web-config)" = c1 ] || die "web-config does not serve c1 after undo: $(served_by web-config)"
say "It serves $(served_by web-config); the deployment now names the snapshot:"
show tend rollout history deploy/web-config --revision=1 | grep "name: web-config-"
say "(Apply examples/web-config.yaml again to follow web-config again.)"
show tend delete deploy/web-config

step "Stop"
say "tendd stops and leaves the pods running: the next tendd adopts them."
say "(The tour stops them too, on its way out.)"
show kill "$tendd_pid"
wait "$tendd_pid"
tendd_pid=
say "The tour is over."
