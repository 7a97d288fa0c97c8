#!/bin/sh
# Fleet membership under chaos (issue 17): a 3-member etcd and three tendd,
# each tendd behind a TCP gate of its own, and a seeded run of random
# faults — a tendd killed (-9) or stopped (TERM) and started again, a
# tendd cut off from etcd (its gate stopped) and healed, an etcd member
# killed and started again — with the invariants checked:
#   - never two terms of leadership overlapping (every tendd logs, at
#     debug, the monotonic times it starts and stops leading);
#   - once the faults stop: every node Ready, one leader, and every node
#     sees the same fleet (the same leader, the same Ready set);
#   - no tendd crashes (a sanitizer report, or an exit that is not ours).
#
#   FLEET_CHAOS_STEPS=N (default 12), FLEET_CHAOS_SEED=S (default: random,
#   printed so that a failure can be replayed)
. "$(dirname "$0")/../cli/lib.sh"
. "$(dirname "$0")/etcd.sh"
. "$(dirname "$0")/lib.sh"

steps=${FLEET_CHAOS_STEPS:-12}
seed=${FLEET_CHAOS_SEED:-$(shuf -i 1-1000000 -n 1)}
echo "seed $seed, $steps steps (FLEET_CHAOS_SEED=$seed to replay)"
fleet_etcd
ttl=2

# A seeded draw: the I-th number of the run, 0..MAX-1 (awk's rand; each
# draw names its index, as $(...) runs in a subshell that keeps no count).
draw() { # I MAX
    awk -v s="$seed" -v i="$1" -v m="$2" 'BEGIN { srand(s * 7919 + i * 104729); rand(); print int(rand() * m) }'
}

start_gates

start() { # K
    eval "g=\$gate_$1"
    "$bin/tendd" --state-dir "$tmp/n$1" --socket "$tmp/n$1.sock" --port-range "4${1}000-4${1}999" \
        --fleet "$g" --node-name "n$1" --lease-ttl "${ttl}s" --log-level debug \
        >>"$tmp/n$1.log" 2>&1 &
    eval "pid_$1=$!"
}
# A tendd that is not running when the test did not stop it crashed.
alive_or_fail() {
    for k in 1 2 3; do
        eval "p=\${pid_$k:-}"
        [ -n "$p" ] || continue
        if ! kill -0 "$p" 2>/dev/null; then
            wait "$p"
            fail "tendd n$k exited by itself ($?)"; tail -5 "$tmp/n$k.log"
            eval "pid_$k="
        fi
    done
}
cleanup_chaos() {
    for k in 1 2 3; do
        eval "p=\${pid_$k:-}"
        [ -n "$p" ] && { kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; }
    done
    stop_gates
    etcd_cluster_stop
    cleanup
}
trap cleanup_chaos EXIT

for k in 1 2 3; do start "$k"; done
sleep 2

# shellcheck disable=SC2154 # etcd_pid_N: set by etcd_cluster_start
for step in $(seq "$steps"); do
    k=$(($(draw $((step * 8)) 3) + 1))
    what=$(draw $((step * 8 + 1)) 5)
    case $what in
    0)
        echo "step $step: kill -9 n$k, start it again"
        eval "p=\$pid_$k"
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
        killed_at=$("$testprog" now)
        echo "n$k $killed_at" >>"$tmp/killed"
        sleep "0.$(draw $((step * 8 + 2)) 9)"
        start "$k"
        ;;
    1)
        echo "step $step: SIGTERM n$k, start it again"
        eval "p=\$pid_$k"
        kill -TERM "$p"
        wait "$p" || fail "n$k exited non-zero on SIGTERM"
        start "$k"
        ;;
    2)
        d=$(($(draw $((step * 8 + 3)) 4) + 1))
        echo "step $step: cut n$k off from etcd for ${d} s"
        eval "kill -STOP \$gate_pid_$k"
        sleep "$d"
        eval "kill -CONT \$gate_pid_$k"
        ;;
    3)
        m=$(draw $((step * 8 + 4)) 3)
        echo "step $step: kill -9 etcd member e$m, start it again"
        eval "p=\$etcd_pid_$m"
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
        sleep 1
        client=http://127.0.0.1:$((etcd_base + m))
        peer=http://127.0.0.1:$((etcd_base + 3 + m))
        etcd --name "e$m" --data-dir "$tmp/e$m" --listen-client-urls "$client" \
            --advertise-client-urls "$client" --listen-peer-urls "$peer" \
            --initial-advertise-peer-urls "$peer" --initial-cluster "$cluster" \
            --initial-cluster-state existing >>"$tmp/e$m.log" 2>&1 &
        eval "etcd_pid_$m=$!"
        etcd_pids="$etcd_pids $!"
        ;;
    4)
        echo "step $step: quiet"
        ;;
    esac
    sleep "1.$(draw $((step * 8 + 5)) 9)"
    alive_or_fail
done

# Quiet: the fleet must come together.
together() {
    for k in 1 2 3; do
        on "$k" get nodes >"$tmp/view$k" 2>/dev/null || return 1
        [ "$(awk '$1 ~ /^n[123]$/ && $2 ~ /^Ready/' "$tmp/view$k" | wc -l)" = 3 ] || return 1
        [ "$(awk '$3 == "leader"' "$tmp/view$k" | wc -l)" = 1 ] || return 1
    done
    [ "$(awk '$3 == "leader" { print $1 }' "$tmp/view1")" = \
        "$(awk '$3 == "leader" { print $1 }' "$tmp/view2")" ] &&
        [ "$(awk '$3 == "leader" { print $1 }' "$tmp/view2")" = \
            "$(awk '$3 == "leader" { print $1 }' "$tmp/view3")" ]
}
if wait_for 20 together; then
    ok "after the faults: every node Ready, one leader ($(awk '$3 == "leader" { print $1 }' "$tmp/view1")), the same view on every node"
else
    fail "the fleet did not come together:"
    for k in 1 2 3; do echo "n$k sees:"; cat "$tmp/view$k"; tail -4 "$tmp/n$k.log"; done
fi
alive_or_fail

# No two terms of leadership overlap (a term cut by a kill -9 ends at the kill).
touch "$tmp/killed"
leadership_terms "$tmp/killed"
if terms_apart; then
    ok "$(wc -l <"$tmp/terms") terms of leadership, none overlapping another"
else
    fail "leadership terms overlap (seed $seed):"; cat "$tmp/terms"
fi

stop_tendds "$pid_1" "$pid_2" "$pid_3"
pid_1= pid_2= pid_3=
fleet_verdict "FLEET_CHAOS_SEED=$seed"
