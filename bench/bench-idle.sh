#!/bin/sh
# bench-idle: what a real tendd costs while nothing happens (issue 35).
# N replicas of /bin/sleep (10,000; --quick 1,000) applied to a tendd of
# the release build, every one Running as the API says; 10 s to settle;
# then, over S seconds (60; --quick 15), as the kernel counts them:
#
#   CPU          the time all its threads ran (/proc/PID/task/*/schedstat,
#                in ns: stat's clock ticks are 10 ms), in % of one core
#   wakeups      times its loop's thread went to a CPU (/proc/PID/task/
#                PID/schedstat, third field), a second
#   RSS, PSS     its own (smaps_rollup), and per pod above its idle size
#                with no pods
#
# pid_max and the descriptor limit are the machine's: 10,000 sleeps and
# a tendd holding one descriptor each fit in this one's 32,768 and 20,000.
#
#   bench-idle.sh BIN_DIR [--quick] [--pods=N] [--seconds=S]
set -u
bin=$(cd "$1" && pwd) || exit 1
shift
n=10000
secs=60
for a in "$@"; do
    case $a in
    --quick) n=1000 secs=15 ;;
    --pods=*) n=${a#--pods=} ;;
    --seconds=*) secs=${a#--seconds=} ;;
    esac
done
dir=$(mktemp -d /tmp/tend-bench-idle-XXXXXX) || exit 1
sock="$dir/tend.sock"
pid=
cleanup() {
    [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null
    pkill -KILL -f "^/bin/sleep 86401$" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT INT TERM

"$bin/tendd" --state-dir "$dir/state" --socket "$sock" --cgroups off >"$dir/tendd.log" 2>&1 &
pid=$!
for _ in $(seq 200); do
    curl -s -m 1 --unix-socket "$sock" http://localhost/healthz >/dev/null 2>&1 && break
    sleep 0.05
done
kb() { awk -v k="$2" '$1 == k ":" { print $2 }' "/proc/$1/smaps_rollup"; }
sleep 2
rss0=$(kb "$pid" Rss)
pss0=$(kb "$pid" Pss)
cat <<YAML | TEND_SOCKET="$sock" "$bin/tend" apply -f - >/dev/null || exit 1
apiVersion: apps/v1
kind: Deployment
metadata: {name: idle}
spec:
  replicas: $n
  selector: {matchLabels: {app: idle}}
  template:
    metadata: {labels: {app: idle}}
    spec:
      containers:
      - name: main
        command: [/bin/sleep, "86401"]
YAML
running() {
    curl -s -m 60 --unix-socket "$sock" \
        "http://localhost/api/v1/namespaces/default/pods?labelSelector=app%3Didle" |
        jq '[.items[] | select(.status.phase == "Running")] | length'
}
t0=$(date +%s)
while [ "$(running)" != "$n" ]; do
    [ $(($(date +%s) - t0)) -gt 600 ] && { echo "bench-idle: not all $n running after 600 s"; exit 1; }
    sleep 1
done
sleep 10
cpu_ns() { cat /proc/"$pid"/task/*/schedstat | awk '{ t += $1 } END { printf "%.0f", t }'; }
runs() { awk '{ print $3 }' "/proc/$pid/task/$pid/schedstat"; }
c0=$(cpu_ns)
w0=$(runs)
sleep "$secs"
c1=$(cpu_ns)
w1=$(runs)
rss1=$(kb "$pid" Rss)
pss1=$(kb "$pid" Pss)
echo "tendd idle with $n pods, over $secs s (release build, from /proc)"
printf "%-44s %s\n" "  CPU (% of a core)" \
    "$(awk -v t=$((c1 - c0)) -v s="$secs" 'BEGIN { printf "%.4f", 100 * t / 1e9 / s }') (goal <= 0.02 at 10,000)"
printf "%-44s %s\n" "  wakeups of its loop (a second)" \
    "$(awk -v w=$((w1 - w0)) -v s="$secs" 'BEGIN { printf "%.2f", w / s }')"
printf "%-44s %s\n" "  RSS, PSS idle with no pods (MiB)" \
    "$(awk -v r="$rss0" -v p="$pss0" 'BEGIN { printf "%.1f, %.1f", r / 1024, p / 1024 }')"
printf "%-44s %s\n" "  RSS, PSS per pod above that (KiB)" \
    "$(awk -v r=$((rss1 - rss0)) -v p=$((pss1 - pss0)) -v n="$n" 'BEGIN { printf "%.1f, %.1f (goal PSS <= 8)", r / n, p / n }')"
