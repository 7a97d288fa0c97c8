#!/bin/sh
# The loop-stall budget in a fleet (issue 27): the hostile writes of
# tests/cli/stall.py sent to one node of two; the loop of the node written
# to, and of the other one, which has each object from etcd, answer
# /healthz without a gap over 200 ms. Lists of STALL_ITEMS (300): the
# sanitizer build at the manifest limits is far over any budget;
# bench/bench-stall.sh prints the figures there, on the release build.
. "$(dirname "$0")/../cli/lib.sh"
. "$(dirname "$0")/etcd.sh"
. "$(dirname "$0")/lib.sh"

fleet_etcd
ttl=3
pids=
trap fleet_cleanup EXIT
for k in 1 2; do fleet_node "$k" "$ETCD_ENDPOINTS"; done
wait_for 10 one_leads 1 || fail "nobody leads"
/usr/bin/python3 "$(dirname "$0")/../cli/stall.py" "$tmp/n1.sock" "$testprog" \
    --items "${STALL_ITEMS:-300}" --budget 200 --sample "$tmp/n1.sock" --sample "$tmp/n2.sock" ||
    fail "a case stalled a node's loop (above)"
fleet_verdict
