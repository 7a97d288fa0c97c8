#!/bin/sh
# tendd --manifests DIR: the files are the declaration. And tendd
# --stop-pods-on-exit, the other lifecycle.
. "$(dirname "$0")/lib.sh"

mdir="$tmp/manifests"
mkdir "$mdir"

# deployment NAME REPLICAS [ARG]: one document.
deployment() {
    cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1}
spec:
  replicas: $2
  selector: {matchLabels: {app: $1}}
  template:
    metadata: {labels: {app: $1}}
    spec:
      terminationGracePeriodSeconds: 3
      containers:
      - name: main
        command: ["$testprog", "argv", "${3:-v1}"]
        env: [{name: TEST_MARKER, value: "$tmp"}]
YAML
}

replicas() { tend get deploy "$1" -o json 2>/dev/null | jq -r .spec.replicas; }
running() { tend get pods -l "app=$1" | awk 'NR > 1 && $3 == "Running"' | wc -l; }
has_running() { [ "$(running "$1")" -eq "$2" ]; }
gone() { ! tend get deploy "$1" >/dev/null 2>&1; }
pids() { tend get pods -l "app=$1" -o wide | awk 'NR > 1 && $3 == "Running" { print $6 }' | sort; }
hup() { kill -HUP "$tendd_pid"; }

echo "== errors at start"
expect_exit 1 "a missing directory" "$bin/tendd" --state-dir "$tmp/s2" --socket "$tmp/s2.sock" \
    --manifests "$tmp/nope"
expect_grep "manifests $tmp/nope: No such file or directory" "$tmp/err" "names the directory"

echo "== applied at start, with their source"
{ deployment web 2; echo ---; deployment worker 1; } >"$mdir/app.yaml"
echo "not a manifest" >"$mdir/README.txt"
echo "garbage: [" >"$mdir/.app.yaml.swp"
start_tendd --manifests "$mdir" --resync 60s
wait_for 10 has_running web 2 && wait_for 10 has_running worker 1 && ok "both deployments run" ||
    fail "$(tend get pods)"
[ "$(tend get deploy web -o json | jq -r '.metadata.annotations["tend.io/source"]')" = "$mdir/app.yaml" ] &&
    ok "tend.io/source names the file" || fail "no source annotation"

echo "== a leased port written the old way: applied, and the log says how to write it"
deployment old 1 | sed 's/^        env:/        ports: [{name: http}]\n        env:/' >"$mdir/old.yaml"
hup
wait_for 10 has_running old 1 && ok "the old form runs" || fail "$(tend get pods -l app=old)"
[ "$(tend get deploy old -o json | jq -r '.spec.template.metadata.annotations["tend.io/lease-ports"]')" = http ] &&
    ok "as tend.io/lease-ports" || fail "$(tend get deploy old -o json | jq -c .spec.template)"
logged() { grep -q "deployment/old: $mdir/old.yaml:1: a port without containerPort is not valid Kubernetes: write the pod template's annotation tend.io/lease-ports: http instead" "$tmp/tendd.log"; }
wait_for 5 logged && ok "the log names the file and the fix" || fail "no warning: $(tail -5 "$tmp/tendd.log")"
rm "$mdir/old.yaml"
hup
wait_for 10 gone old || fail "old not deleted with its file"

echo "== a change by hand is reverted at the next sync, and tend says so"
expect_exit 0 "scale a file's deployment" tend scale deploy/web --replicas=4
expect_grep "Warning: deployment web comes from $mdir/app.yaml" "$tmp/err" "tend warns"
hup
back() { [ "$(replicas web)" = 2 ]; }
wait_for 10 back && ok "replicas back to 2 (the file)" || fail "replicas $(replicas web)"

echo "== an invalid file changes nothing and says where"
before=$(pids web)
{ deployment web 2 v2 | sed 's/replicas: 2/replicas: [2/'; echo ---; deployment worker 1; } >"$mdir/app.yaml"
warned() { tend get events | grep -q "InvalidManifest.*app.yaml:[0-9]*:[0-9]*:"; }
wait_for 10 warned && ok "a Warning event with file:line:col" || fail "$(tend get events)"
grep -q "manifests: $mdir/app.yaml:[0-9]*:[0-9]*:" "$tmp/tendd.log" && ok "and a log line" ||
    fail "no log line"
sleep 0.5
[ "$(pids web)" = "$before" ] && ok "the last good version keeps running" || fail "pods changed"
has_running worker 1 || fail "worker stopped"

echo "== a fixed file rolls out; what leaves the file goes"
deployment web 2 v2 >"$mdir/app.yaml"
rolled() { tend get deploy web -o json | jq -e '.metadata.annotations["deployment.kubernetes.io/revision"] == "2"' >/dev/null; }
wait_for 10 rolled && ok "web at revision 2" || fail "no rollout"
wait_for 10 gone worker && ok "worker, no longer in the file, deleted" || fail "worker still there"
expect_exit 0 "rollout status" tend rollout status deploy/web --timeout=20s

echo "== a new file, then the file removed"
deployment extra 1 >"$mdir/extra.json.tmp"
mv "$mdir/extra.json.tmp" "$mdir/extra.yaml"
wait_for 10 has_running extra 1 && ok "a new file is applied" || fail "extra not running"
rm "$mdir/app.yaml"
wait_for 10 gone web && ok "a removed file takes its deployment" || fail "web still there"
tend get deploy extra >/dev/null || fail "extra went too"
tend get events >"$tmp/events"
grep -q "app.yaml" "$tmp/events" || true

echo "== an empty file, and a deployment two files declare: neither changes anything"
p=$(pids extra)
: >"$mdir/extra.yaml"
said() { tend get events | grep -q "$1"; }
wait_for 10 said "declares no deployment" && ok "an empty file is not applied, and tend says why" ||
    fail "$(tend get events)"
[ "$(pids extra)" = "$p" ] && tend get deploy extra >/dev/null && ok "extra keeps running" ||
    fail "extra changed: $(tend get pods -l app=extra)"
deployment extra 1 >"$mdir/extra.yaml"
deployment extra 1 other >"$mdir/zz-extra.yaml"
wait_for 10 said "zz-extra.yaml.*extra.yaml already" && ok "the second file is refused, naming the first" ||
    fail "$(tend get events)"
gen=$(tend get deploy extra -o json | jq .metadata.generation)
hup
sleep 1
[ "$(tend get deploy extra -o json | jq .metadata.generation)" = "$gen" ] && [ "$(pids extra)" = "$p" ] &&
    ok "nothing flips between the two" || fail "extra changed: generation $gen → $(tend get deploy extra -o json | jq .metadata.generation)"
# The first file emptied (being written) or broken: the second does not
# take over meanwhile.
src() { tend get deploy extra -o json | jq -r '.metadata.annotations["tend.io/source"]'; }
# refusals of extra.yaml so far, in tendd's log: a sync that saw the file
refused() { grep -c "manifests: $mdir/extra.yaml is not applied" "$tmp/tendd.log"; }
more_refused() { [ "$(refused)" -gt "$1" ]; }
n=$(refused)
: >"$mdir/extra.yaml"
hup
wait_for 10 more_refused "$n" || fail "the emptied file was not looked at"
[ "$(src)" = "$mdir/extra.yaml" ] && [ "$(tend get deploy extra -o json | jq .metadata.generation)" = "$gen" ] &&
    [ "$(pids extra)" = "$p" ] && ok "the first file emptied: the second still does not take over" ||
    fail "extra: source $(src), generation $(tend get deploy extra -o json | jq .metadata.generation)"
n=$(refused)
echo "garbage: [" >"$mdir/extra.yaml"
hup
wait_for 10 more_refused "$n" || fail "the broken file was not looked at"
[ "$(src)" = "$mdir/extra.yaml" ] && [ "$(pids extra)" = "$p" ] &&
    ok "the first file broken: nor then" || fail "extra: source $(src)"
deployment extra 1 >"$mdir/extra.yaml"
rm "$mdir/zz-extra.yaml"

echo "== the directory goes away: nothing is deleted; it comes back: it is watched again"
mv "$mdir" "$tmp/moved"
hup
unreadable() { grep -q "cannot read $mdir: No such file or directory" "$tmp/tendd.log"; }
wait_for 5 unreadable && ok "tendd says it cannot read it" || fail "no log line"
sleep 0.5
[ "$(pids extra)" = "$p" ] && ok "its deployments keep running" || fail "extra: $(tend get pods -l app=extra)"
cp -a "$tmp/moved" "$tmp/copy" # a new directory (inode) in its place
mv "$tmp/copy" "$mdir"
sleep 0.5
deployment late 1 >"$mdir/late.yaml"
wait_for 10 has_running late 1 && ok "a file added to the directory back in place is applied" ||
    fail "late not running"
cp -a "$mdir" "$tmp/save"
rm -rf "$mdir" && mkdir "$mdir" && cp "$tmp/save"/*.yaml "$mdir"/ # (ext4 may give it the same inode)
sleep 0.5
deployment later 1 >"$mdir/later.yaml"
wait_for 10 has_running later 1 && ok "removed and made again in place: still watched" ||
    fail "later not running"
[ "$(pids extra)" = "$p" ] || fail "extra changed when its directory was made again"

echo "== an automatic rollback stays through the syncs, until the file changes"
auto() { deployment auto 1 "$1" | sed "s/metadata: {name: auto}/metadata: {name: auto, annotations: {tend.io\/auto-rollback: \"true\"}}/" |
    sed "s/\"argv\", \"$1\"/$2/"; }
auto v1 '"argv", "v1"' >"$mdir/auto.yaml"
wait_for 10 has_running auto 1 || fail "auto v1 not running"
wait_for 10 tend rollout status deploy/auto --watch=false || fail "auto v1 not rolled out"
auto v2 '"exit", "1"' >"$mdir/auto.yaml.tmp" && mv "$mdir/auto.yaml.tmp" "$mdir/auto.yaml"
rolled_back() { tend get events | grep -q "RolledBack *deployment/auto"; }
wait_for 30 rolled_back && ok "the crashing template in the file is rolled back" || fail "no rollback"
hup
sleep 2
hup
sleep 2
[ "$(tend get events | grep -c 'RolledBack *deployment/auto')" -eq 1 ] &&
    tend get deploy auto -o json | jq -e '.spec.template.spec.containers[0].command[1] == "argv"' >/dev/null &&
    ok "two syncs later: still rolled back, once" ||
    fail "rollbacks: $(tend get events | grep -c 'RolledBack *deployment/auto'), command: $(tend get deploy auto -o json | jq -c '.spec.template.spec.containers[0].command')"
auto v3 '"argv", "v3"' >"$mdir/auto.yaml.tmp" && mv "$mdir/auto.yaml.tmp" "$mdir/auto.yaml"
v3() { tend get deploy auto -o json | jq -e '.spec.template.spec.containers[0].command[2] == "v3"' >/dev/null &&
    tend rollout status deploy/auto --watch=false >/dev/null 2>&1; }
wait_for 20 v3 && ok "a changed file rolls out again" || fail "v3: $(tend rollout status deploy/auto --watch=false 2>&1)"
rm "$mdir/auto.yaml"

echo "== --stop-pods-on-exit: every pod stopped, gracefully, before tendd exits"
stop_tendd TERM
start_tendd --manifests "$mdir" --stop-pods-on-exit
wait_for 10 has_running extra 1
p=$(pids extra)
[ -n "$p" ] || fail "no pid for extra"
t0=$(date +%s%N)
kill -TERM "$tendd_pid"
wait "$tendd_pid"
rc=$?
tendd_pid=
ms=$(( ($(date +%s%N) - t0) / 1000000 ))
[ "$rc" -eq 0 ] && ok "tendd exited 0 after $ms ms" || fail "tendd exited $rc"
# (a zombie counts as gone: its parent was the previous tendd, and what
# reaps orphans here is up to the machine's init)
alive() { [ -r "/proc/$1/stat" ] && [ "$(awk '{ print $3 }' "/proc/$1/stat")" != Z ]; }
alive "$p" && fail "pid $p still runs" || ok "its pod's process is gone"
grep -q "every pod stopped" "$tmp/tendd.log" && ok "it says so" || fail "no log line"
start_tendd --manifests "$mdir"
wait_for 10 has_running extra 1 && ok "the next tendd starts them again" || fail "not started again"
[ "$(pids extra)" != "$p" ] || fail "same pid as before?"

echo "== a symlink swapped to a new checkout (as git-sync does) is followed"
stop_tendd TERM
mkdir "$tmp/rev1" "$tmp/rev2"
deployment sym 1 v1 >"$tmp/rev1/sym.yaml"
deployment sym 1 v2 >"$tmp/rev2/sym.yaml"
ln -s rev1 "$tmp/current"
start_tendd --manifests "$tmp/current" --resync 60s
wait_for 10 has_running sym 1 && ok "applied through the symlink" || fail "sym not running"
[ "$(tend get deploy sym -o json | jq -r '.metadata.annotations["tend.io/source"]')" = "$tmp/current/sym.yaml" ] &&
    ok "the source names the path given, not its target" || fail "source: $(tend get deploy sym -o json | jq .metadata.annotations)"
ln -s rev2 "$tmp/current.new"
mv -T "$tmp/current.new" "$tmp/current"
rm -rf "$tmp/rev1"
sym_v2() { tend get deploy sym -o json | jq -e '.metadata.annotations["deployment.kubernetes.io/revision"] == "2"' >/dev/null; }
wait_for 10 sym_v2 && ok "the swap rolls out the new checkout" || fail "sym: $(tend get deploy sym -o json | jq -c .metadata)"
deployment sym2 1 >"$tmp/rev2/sym2.yaml"
wait_for 10 has_running sym2 1 && ok "and the new checkout is watched" || fail "sym2 not running"

finish
