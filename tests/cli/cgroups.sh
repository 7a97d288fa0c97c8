#!/bin/sh
# Process pods in cgroups of their own (issue 30), as root on this host's
# layout: limits.memory enforced, and a pod past it OOMKilled (status,
# describe, events) and replaced; limits.cpu holding a busy loop to its
# share, measured from /proc; a daemon that double-forked out of the pod's
# session stopped with the pod; after kill -9 of tendd, the adopted pod
# keeps its cgroup and its limit, and an empty cgroup of no pod is swept;
# with --cgroups off, limits are refused at apply with the reason, and
# nothing is stored.
if [ "$(id -u)" -ne 0 ]; then
    echo "cgroups need root here (tendd makes them); skipped"
    exit 77
fi
. "$(dirname "$0")/lib.sh"
command -v jq >/dev/null || { echo "jq missing (make deps)"; exit 77; }
command -v python3 >/dev/null || { echo "python3 missing"; exit 77; }

start_tendd
if grep -q "cgroups: none" "$tmp/tendd.log"; then
    echo "tendd has no cgroups here:"; grep "cgroups:" "$tmp/tendd.log"
    exit 77
fi
expect_grep "cgroups: v[12]; pods' cgroups under" "$tmp/tendd.log" "the layout, logged once"
bases=$(sed -n "s/.*pods' cgroups under \([^(]*\).*/\1/p" "$tmp/tendd.log" | tr ',' ' ')

. "$(dirname "$0")/cgroups-lib.sh"
d() { deploy "$@" >/dev/null || fail "apply $1"; } # (an apply that must pass)
# a v1 hierarchy's or v2's directory of the pod: DIR/UID with FILE in it
cg_file() { # UID FILE
    for b in $bases; do [ -f "$b/$1/$2" ] && { echo "$b/$1/$2"; return 0; }; done
    return 1
}
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# 1. limits.memory: past it, OOMKilled as on a cluster, and replaced
# (its first run goes past the limit; its replacements stay within it and
# keep running, so that a loaded machine cannot miss them between two
# looks, as it did the ones that died again within a second)
d hog "memory: 40Mi" "[ -e $tmp/hogged ] && exec sleep 4263; touch $tmp/hogged; sleep 0.5; python3 -c 'a = bytearray(200 << 20); import time; time.sleep(60)'"
oom_seen() {
    pod_json hog | jq -e '[.items[].status.containerStatuses[0].lastState.terminated
        | select(.reason == "OOMKilled" and .exitCode == 137)] | length > 0' >/dev/null
}
if wait_for 30 oom_seen; then
    ok "a pod past limits.memory: lastState OOMKilled, exit code 137"
else
    fail "no OOMKilled"; pod_json hog | jq -c '.items[].status.containerStatuses'
fi
hog=$(pod_json hog | jq -r '.items[0].metadata.name')
tend describe pod "$hog" >"$tmp/describe" 2>&1
expect_grep "OOMKilled" "$tmp/describe" "describe shows OOMKilled"
api GET "/api/v1/namespaces/default/events" >/dev/null
jq -r '.items[].message' "$tmp/body" >"$tmp/events"
expect_grep "OOM killer.*OOMKilled" "$tmp/events" "an event says so"
# replaced: it keeps being started (a crash-loop back-off), and while it
# runs its cgroup holds the limit
if wait_for 30 running hog && u=$(uid_of hog) && [ -n "$u" ]; then
    f=$(cg_file "$u" memory.limit_in_bytes || cg_file "$u" memory.max)
    [ "$(cat "$f" 2>/dev/null)" = $((40 << 20)) ] && ok "replaced, in a cgroup limited to 40Mi ($f)" ||
        fail "the replacement's limit: $(cat "$f" 2>/dev/null) in '$f'"
else
    fail "the OOMKilled pod was not replaced"
fi
tend delete deploy hog >/dev/null

# 2. limits.cpu: a busy loop held to 200m, measured from /proc over 3 s
d spin "cpu: 200m" "while :; do :; done"
wait_for 20 running spin || fail "spin not running"
spid=$(pid_of spin) # (not $p: lib.sh's api() sets it)
a=$(cpu_ticks "$spid"); sleep 3; b=$(cpu_ticks "$spid")
share=$(( (b - a) * 100 / (3 * $(getconf CLK_TCK)) ))
[ "$share" -le 25 ] && ok "a busy loop under limits.cpu 200m: $share % of a core" ||
    fail "a busy loop under limits.cpu 200m used $share % of a core"

# usage (kubectl top's API) from the cgroup: the busy loop's CPU, as a
# rate between two reads
metric() { # POD FIELD: the pod's usage.FIELD, in m (cpu) or Ki (memory)
    api GET "/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/$1" >/dev/null
    jq -r ".containers[0].usage.$2" "$tmp/body" | awk '/n$/ { printf "%d", $1 / 1000000; next }
        /Ki$/ { printf "%d", $1 + 0; next } { print $1 }'
}
spin=$(pod_json spin | jq -r '.items[0].metadata.name')
metric "$spin" cpu >/dev/null
sleep 2
m=$(metric "$spin" cpu)
[ "$m" -ge 120 ] && [ "$m" -le 280 ] && ok "top: the busy loop uses ${m}m (its limit 200m)" ||
    fail "top: the busy loop's cpu is ${m}m, not about 200m"
cpu_total() { # POD: its container_cpu_usage_seconds_total, in ms
    api GET /metrics >/dev/null
    awk -v p="pod=\"$1\"" 'index($0, "container_cpu_usage_seconds_total{") == 1 && index($0, p) { print int($2 * 1000) }' "$tmp/body"
}
c1=$(cpu_total "$spin"); sleep 2; c2=$(cpu_total "$spin")
[ -n "$c1" ] && [ -n "$c2" ] && [ $((c2 - c1)) -ge 240 ] && [ $((c2 - c1)) -le 560 ] &&
    ok "/metrics: container_cpu_usage_seconds_total grew $((c2 - c1)) ms in 2 s" ||
    fail "/metrics: the busy loop's CPU went from '$c1' to '$c2' ms in 2 s"

# 3. kill -9 of tendd: adopted, the same cgroup and limit; an empty
# cgroup of no pod swept at the start
u=$(uid_of spin)
for b in $bases; do mkdir "$b/00000000-dead-4000-8000-000000000000"; done
stop_tendd KILL
start_tendd
wait_for 20 running spin || fail "spin not adopted"
[ "$(pid_of spin)" = "$spid" ] && ok "kill -9 of tendd: the pod adopted (pid $spid)" ||
    fail "after kill -9 of tendd: pid $(pid_of spin), was $spid"
grep -q "/$u\$" "/proc/$spid/cgroup" && ok "it is still in its cgroup" ||
    fail "not in its cgroup: $(cat "/proc/$spid/cgroup")"
a=$(cpu_ticks "$spid"); sleep 2; b=$(cpu_ticks "$spid")
share=$(( (b - a) * 100 / (2 * $(getconf CLK_TCK)) ))
[ "$share" -le 25 ] && ok "still held to 200m: $share %" || fail "after the restart: $share %"
c3=$(cpu_total "$spin")
[ -n "$c3" ] && [ "$c3" -gt "$c2" ] && ok "its CPU counter kept across the restart ($c2 → $c3 ms)" ||
    fail "its CPU counter after the restart: '$c3' ms, before it $c2 ms"
left=0
for b in $bases; do [ -d "$b/00000000-dead-4000-8000-000000000000" ] && left=$((left + 1)); done
[ "$left" = 0 ] && ok "an empty cgroup of no pod: swept at the start" ||
    fail "$left empty cgroups of no pod left"
tend delete deploy spin >/dev/null

# 3b. v1: spare cgroups made ahead, each renamed to a pod's when it starts
# (a rename is cheaper than a mkdir on the way from a death to its
# replacement)
mbase=$(printf '%s\n' $bases | grep '/memory/' | head -1)
if grep -q "cgroups: v1" "$tmp/tendd.log" && [ -n "$mbase" ]; then
    spares() { ls -d "$mbase"/spare-* 2>/dev/null | sed 's/.*spare-//' | sort -n; }
    d sp "" "exec sleep 4261"
    wait_for 20 running sp || fail "sp not running"
    eight() { [ "$(spares | wc -l)" -eq 8 ]; }
    wait_for 10 eight && ok "8 spare cgroups made ahead: $(spares | tr '\n' ' ')" ||
        fail "spares: $(spares | tr '\n' ' ')"
    first=$(spares | head -1)
    old=$(pid_of sp)
    kill -9 "$old"
    replaced() { [ -n "$(pid_of sp)" ] && [ "$(pid_of sp)" != "$old" ]; }
    wait_for 10 replaced || fail "sp not replaced"
    wait_for 10 eight
    [ "$(spares | head -1)" -gt "$first" ] && [ ! -d "$mbase/spare-$first" ] &&
        ok "the replacement took spare-$first (now $(spares | tr '\n' ' '))" ||
        fail "spare-$first not taken: $(spares | tr '\n' ' ')"
    grep -q "/$(uid_of sp)\$" "/proc/$(pid_of sp)/cgroup" && ok "the replacement is in its cgroup" ||
        fail "the replacement's cgroups: $(cat "/proc/$(pid_of sp)/cgroup")"
    tend delete deploy sp >/dev/null
fi

# a counter never goes down: a child that burns CPU, then exits (on v1
# without a CPU limit the pod's CPU is its processes' summed, and the
# child's time goes with it)
# (a fixed amount of work, not a time: a loaded machine gives a child of a
# 1.5 s timeout too little CPU to see, as it did once with two busy loops)
d burst "" "(sh -c 'i=0; while [ \$i -lt 1500000 ]; do i=\$((i + 1)); done; echo burnt' &); exec sleep 4262"
wait_for 20 running burst || fail "burst not running"
burst=$(pod_json burst | jq -r '.items[] | select(.status.phase == "Running") | .metadata.name' | head -1)
burning() { pgrep -f "i -lt 1500000" >/dev/null; }
b1=0
counted() { b1=$(cpu_total "$burst"); [ -n "$b1" ] && [ "$b1" -ge 200 ]; }
wait_for 30 counted || fail "the burning child's CPU never counted: '$b1' ms"
burning || fail "the child had ended before its CPU was read: make it burn longer"
ended() { ! burning; }
wait_for 60 ended || fail "the burning child never ended"
b2=$(cpu_total "$burst")
[ -n "$b2" ] && [ "$b2" -ge "$b1" ] &&
    ok "/metrics: the CPU counter kept its child's time after it exited ($b1 → $b2 ms)" ||
    fail "/metrics: the CPU counter went from '$b1' to '$b2' ms"
tend delete deploy burst >/dev/null

# 4. a daemon that left the pod's session goes with the pod
# (with no environment of the pod's: no POD_UID to know it by, only its
# cgroup)
d daemon "memory: 64Mi" "env -i TEST_MARKER=$tmp setsid -f sleep 4243.1; exec sleep 4243.2"
wait_for 20 running daemon || fail "daemon not running"
u=$(uid_of daemon)
wait_for 10 pgrep -f "sleep 4243.1" || fail "the daemon did not start"
d=$(pgrep -f "sleep 4243.1" | head -1)
[ "$(awk '{ print $6 }' "/proc/$d/stat")" != "$(pid_of daemon)" ] && grep -q "/$u\$" "/proc/$d/cgroup" &&
    ok "a daemon in a session of its own, in the pod's cgroup" ||
    fail "the daemon (pid $d): session $(awk '{ print $6 }' "/proc/$d/stat"), $(cat "/proc/$d/cgroup")"
# `delete pod`: its daemon goes with it, its replacement's starts anew
dpod=$(pod_json daemon | jq -r '.items[] | select(.status.phase == "Running") | .metadata.name' | head -1)
expect_exit 0 "delete pod $dpod" tend delete pod "$dpod"
old_gone() { ! kill -0 "$d" 2>/dev/null; }
wait_for 15 old_gone && ok "delete pod: its daemon (pid $d) went with it" ||
    fail "delete pod left its daemon $d: $(ps -o pid,args -p "$d")"
new_daemon() { [ -n "$(pgrep -f "sleep 4243.1")" ]; }
wait_for 20 new_daemon && wait_for 20 running daemon && ok "its replacement runs, with a daemon of its own" ||
    fail "no replacement: $(pod_json daemon | jq -c '[.items[].status.phase]')"
d=$(pgrep -f "sleep 4243.1" | head -1)
u=$(uid_of daemon)
expect_exit 0 "delete deploy daemon" tend delete deploy daemon
gone() { ! pgrep -f "sleep 4243" >/dev/null; }
wait_for 15 gone && ok "deleted: no process of the pod is left, the daemon neither" ||
    fail "left behind: $(pgrep -af 'sleep 4243')"
! grep -q "pid $d (sleep) outlived its pod" "$tmp/tendd.log" &&
    ok "killed with the pod's cgroup at its end, not found later as an escapee" ||
    fail "the daemon outlived its pod: $(grep "pid $d" "$tmp/tendd.log")"
cg_gone() { ! cg_file "$u" cgroup.procs >/dev/null; }
wait_for 10 cg_gone && ok "its cgroup removed" || fail "its cgroup is left: $(cg_file "$u" cgroup.procs)"

# usage of every process of a pod: a child that holds 32 MiB, its parent
# next to nothing
d parent "memory: 128Mi" "python3 -c 'a = bytes(range(256)) * (128 << 10); open(\\\"$tmp/parent-held\\\", \\\"w\\\").close(); import time; time.sleep(600)' & exec sleep 4247"
wait_for 20 running parent || fail "parent not running"
u=$(uid_of parent)
name=$(pod_json parent | jq -r '.items[] | select(.status.phase == "Running") | .metadata.name' | head -1)
# (read once the child holds all it will: read while it grew, the two
# reads a moment apart differed by more than the check allows)
big() { [ -e "$tmp/parent-held" ] && [ "$(metric "$name" memory)" -ge $((30 * 1024)) ]; }
if wait_for 20 big; then
    mem=$(metric "$name" memory)
    f=$(cg_file "$u" memory.usage_in_bytes || cg_file "$u" memory.current)
    used=$(( $(cat "$f") / 1024 ))
    rss=$(( $(awk '{ print $2 }' "/proc/$(pid_of parent)/statm") * $(getconf PAGESIZE) / 1024 ))
    # (the two are read a moment apart: a page or so either way)
    [ "$mem" -le $((used + 1024)) ] && [ $((used - mem)) -le 8192 ] &&
        ok "top: the pod's memory ${mem}Ki, its child's included (the cgroup's ${used}Ki; the main process ${rss}Ki)" ||
        fail "top: ${mem}Ki against the cgroup's ${used}Ki"
else
    fail "top: the pod's memory is $(metric "$name" memory)Ki, its child's 32 MiB not counted"
fi
# /metrics too, under cAdvisor's names
api GET /metrics >/dev/null
pm=$(awk -v p="pod=\"$name\"" 'index($0, "container_memory_working_set_bytes{") == 1 && index($0, p) { print int($2 / 1024) }' "$tmp/body")
pc=$(awk -v p="pod=\"$name\"" 'index($0, "container_cpu_usage_seconds_total{") == 1 && index($0, p) { print $2 }' "$tmp/body")
[ -n "$pm" ] && [ "$pm" -ge $((30 * 1024)) ] && [ "$pm" -le "$used" ] &&
    ok "/metrics: container_memory_working_set_bytes ${pm}Ki, the child's included" ||
    fail "/metrics: container_memory_working_set_bytes '${pm}'Ki (the cgroup's ${used}Ki)"
[ -n "$pc" ] && ok "/metrics: container_cpu_usage_seconds_total $pc s" ||
    fail "/metrics: no container_cpu_usage_seconds_total for $name"
tend delete deploy parent >/dev/null

# 5. --cgroups off: limits refused at apply, with the reason; nothing stored
stop_tendd
start_tendd --cgroups off
expect_grep "cgroups: off" "$tmp/tendd.log" "--cgroups off is logged"
cat >"$tmp/limited.yaml" <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata: {name: limited}
spec:
  selector: {matchLabels: {app: limited}}
  template:
    metadata: {labels: {app: limited}}
    spec:
      containers:
      - name: limited
        command: [/bin/sleep, "4244"]
        resources: {limits: {memory: 64Mi}}
YAML
if expect_exit 1 "apply with limits and --cgroups off" tend apply -f "$tmp/limited.yaml"; then
    expect_grep "resources.limits: Forbidden: limits.memory cannot be enforced" "$tmp/err" \
        "the refusal names the field"
    expect_grep "cgroups off" "$tmp/err" "and the reason"
fi
expect_exit 1 "dry run too" tend apply --dry-run -f "$tmp/limited.yaml"
expect_api 404 "nothing stored" GET /apis/apps/v1/namespaces/default/deployments/limited
pgrep -f "sleep 4244" >/dev/null && fail "a refused pod runs"

# 6. tendd as a user no cgroup is delegated to (nobody): none, with the
# reason, and limits refused at apply
stop_tendd
if command -v setpriv >/dev/null; then
    mkdir -m 0777 "$tmp/user"
    chmod 0711 "$tmp"
    setpriv --reuid=65534 --regid=65534 --clear-groups "$bin/tendd" --state-dir "$tmp/user/state" \
        --socket "$tmp/user/tend.sock" --port-range 44000-44999 >"$tmp/user/tendd.log" 2>&1 &
    upid=$!
    wait_for 10 sh -c "TEND_SOCKET=$tmp/user/tend.sock $bin/tend version" || fail "tendd as nobody did not come up"
    expect_grep "cgroups: none: cannot make .*Permission denied (tendd runs as uid 65534" \
        "$tmp/user/tendd.log" "as nobody: no cgroups, and why"
    if TEND_SOCKET="$tmp/user/tend.sock" tend apply -f "$tmp/limited.yaml" >"$tmp/out" 2>&1; then
        fail "limits accepted by a tendd that cannot make cgroups"
    else
        expect_grep "limits.memory cannot be enforced: tendd has no cgroups (cannot make" "$tmp/out" \
            "refused at apply as nobody, with the reason"
    fi
    kill "$upid"; wait "$upid"
    chmod 0700 "$tmp"
    grep -q -E "Sanitizer|runtime error" "$tmp/user/tendd.log" && fail "sanitizer report in its log"
fi

finish
