#!/bin/sh
# One leader at a time (issue 17, docs/fleet.md §3.5), through a real 3-member
# etcd and three real tendd, each behind a TCP gate of its own that SIGSTOP
# turns into a blackhole: the leader cut off for less than its TTL keeps
# leading; cut off for longer, another node leads and the old one knows it
# no longer does — before the other begins: every tendd logs (at debug) the
# monotonic times at which it starts and stops leading, one clock for the
# whole machine, and no two intervals may overlap; a killed leader is
# replaced; /metrics says who leads.
. "$(dirname "$0")/../cli/lib.sh"
. "$(dirname "$0")/etcd.sh"
. "$(dirname "$0")/lib.sh"

fleet_etcd

ttl=3
pids=
# (wait_for uses $n: these use other names)
node() { # K: tendd nK behind gate K
    eval "g=\$gate_$1"
    fleet_node "$1" "$g" --log-level debug
}
leading_metric() {
    curl -s --unix-socket "$tmp/n$1.sock" http://localhost/metrics |
        awk '$1 == "tend_fleet_leading" { print $2 }'
}
trap fleet_cleanup EXIT

start_gates
for k in 1 2 3; do node "$k"; done
wait_for 5 one_leads 2 || fail "nobody leads"
lead=$(leader_of 2)
l=${lead#n}
if [ "$(leading_metric "$l")" = 1 ] &&
    [ "$(($(leading_metric 1) + $(leading_metric 2) + $(leading_metric 3)))" = 1 ]; then
    ok "$lead leads; /metrics says so on it (tend_fleet_leading 1), and 0 on the others"
else
    fail "tend_fleet_leading: $(leading_metric 1) $(leading_metric 2) $(leading_metric 3)"
fi

# a leader cut off for less than its TTL keeps leading
eval "kill -STOP \$gate_pid_$l"
sleep 1
eval "kill -CONT \$gate_pid_$l"
sleep $((ttl + 1))
if [ "$(leader_of 1)" = "$lead" ] && [ "$(leader_of 3)" = "$lead" ] && [ "$(leading_metric "$l")" = 1 ]; then
    ok "$lead cut off from etcd for 1 s (< TTL): it still leads, nobody took over"
else
    fail "after a 1 s cut of the leader: $(leader_of 1) / $(leader_of 3)"
fi

# cut off for longer: another leads; the old one knows it does not
other=$((l % 3 + 1))
eval "kill -STOP \$gate_pid_$l"
cut=$(date +%s%N)
moved() { x=$(leader_of "$other"); [ -n "$x" ] && [ "$x" != "$lead" ]; }
if wait_for $((ttl + 4)) moved; then
    new=$(leader_of "$other")
    ok "$lead cut off: $new leads $((($(date +%s%N) - cut) / 1000000)) ms later"
else
    fail "$lead cut off: nobody else leads: $(leader_of "$other")"
fi
if [ "$(leading_metric "$l")" = 0 ]; then
    ok "the cut-off $lead says it does not lead (its API still answers)"
else
    fail "the cut-off $lead still says it leads"
fi
sleep 2
eval "kill -CONT \$gate_pid_$l"
sleep $((ttl + 1))
if [ "$(leader_of "$l")" = "$new" ] && [ "$(leading_metric "$l")" = 0 ] &&
    [ "$(($(leading_metric 1) + $(leading_metric 2) + $(leading_metric 3)))" = 1 ]; then
    ok "healed: $lead back as a follower, $new still leads, one leader"
else
    fail "after the heal: $lead sees $(leader_of "$l"); metrics $(leading_metric 1) $(leading_metric 2) $(leading_metric 3)"
fi

# the leader killed
nk=${new#n}
eval "p=\$n${nk}_pid"
kill -KILL "$p"
wait "$p" 2>/dev/null
killed_at=$("$testprog" now) # its leading ended with it (tendd's clock)
killed_node=$new
pids=$(echo "$pids" | tr ' ' '\n' | grep -vx "$p" | tr '\n' ' ')
survivor=$((nk % 3 + 1))
moved2() { x=$(leader_of "$survivor"); [ -n "$x" ] && [ "$x" != "$new" ]; }
if wait_for $((ttl + 4)) moved2; then
    ok "$new killed: $(leader_of "$survivor") leads"
else
    fail "$new killed: no new leader"
fi

# Every term of leadership, from the logs (one closed by the kill -9 ends
# there): no two overlap.
echo "$killed_node $killed_at" >"$tmp/killed"
leadership_terms "$tmp/killed"
if [ "$(wc -l <"$tmp/terms")" -ge 3 ] && terms_apart; then
    ok "$(wc -l <"$tmp/terms") terms of leadership, none overlapping another (monotonic clock)"
else
    fail "leadership terms:"; cat "$tmp/terms"
fi

# A write that waits for etcd when tendd stops: answered 503, tendd exits 0.
eval "wp=\$n${survivor}_pid; wg=\$gate_pid_$survivor"
kill -STOP "$wg"
curl -s -o "$tmp/late" -w '%{http_code}' --unix-socket "$tmp/n$survivor.sock" -X PATCH \
    -H 'Content-Type: application/merge-patch+json' -d '{"spec":{"unschedulable":true}}' \
    "http://localhost/api/v1/nodes/n$survivor" >"$tmp/late-code" &
curl_pid=$!
sleep 0.5
kill -TERM "$wp"
wait "$wp" && stopped=0 || stopped=$?
wait "$curl_pid"
kill -CONT "$wg"
pids=$(echo "$pids" | tr ' ' '\n' | grep -vx "$wp" | tr '\n' ' ')
if [ "$stopped" = 0 ] && [ "$(cat "$tmp/late-code")" = 503 ] && grep -q "tendd is stopping" "$tmp/late"; then
    ok "a cordon waiting for etcd when tendd stops: answered 503 (tendd is stopping), exit 0"
else
    fail "a waiting cordon at the stop: exit $stopped, $(cat "$tmp/late-code") $(cat "$tmp/late")"
fi

# shellcheck disable=SC2086 # a list of pids
stop_tendds $pids
pids=
fleet_verdict
