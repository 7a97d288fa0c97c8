#!/bin/sh
# make bench: every benchmark under <build>/bench, each printing its table,
# then the systemd one under tests/systemd/harness.sh where the machine
# allows it. Figures (min, median, p95), not pass/fail tests.
#   BENCH_QUICK=1 make bench   fewer trials, a shorter idle window
# runit is installed (scripts/deps.sh --bench), to be timed beside tendd.
set -u
build=${1:-build}
quick=${BENCH_QUICK:+--quick}
cd "$(dirname "$0")/.." || exit 1

echo "machine: $(nproc) cores, $(awk '/model name/ { sub(/.*: /, ""); print; exit }' /proc/cpuinfo)," \
    "$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), Linux $(uname -r)," \
    "$(df -T "${TMPDIR:-/tmp}" | awk 'NR == 2 { print $2 }') /tmp"
echo
echo "== bench-runtime: spawning and watching processes"
"$build/bench/bench-runtime" || exit 1
echo
echo "== bench-respawn: killed replicas, a tendd of its own, timed by the kernel"
if [ "$(id -u)" -ne 0 ]; then
    echo "skipped: the kernel's process connector needs root (sudo make bench)"
else
    # shellcheck disable=SC2086
    "$build/bench/bench-respawn" $quick || exit 1
fi
echo
echo "== bench-agent: the agent at work (runtimeClassName: process)"
# shellcheck disable=SC2086
"$build/bench/bench-agent" $quick || exit 1
echo
echo "== bench-agent under a real systemd user manager (runtimeClassName: systemd)"
# shellcheck disable=SC2086
tests/systemd/harness.sh "$PWD/$build/bench/bench-agent" --runtime systemd $quick 2>&1 | grep -v '^<'
echo
echo "== bench-rollout: zero-downtime rolling updates"
# shellcheck disable=SC2086
"$build/bench/bench-rollout" $quick || exit 1
echo "-- beside: the same program as a socket-activated systemd service, systemctl restart"
# shellcheck disable=SC2086
tests/systemd/harness.sh "$PWD/$build/bench/bench-rollout" --only systemd $quick 2>&1 | grep -v '^<'
echo
echo "== bench-idle: a real tendd with 10,000 (--quick 1,000) idle pods"
# shellcheck disable=SC2086
bench/bench-idle.sh "$build/bin" $quick || exit 1
echo
echo "== bench-stall: how long one hostile request holds the loop, at the manifest limits"
bench/bench-stall.sh "$build/bin" || exit 1
echo
echo "== bench-fleet: fleet membership on a 3-member etcd and three tendd"
# shellcheck disable=SC2086
bench/bench-fleet.sh "$build/bin" $quick || exit 1
