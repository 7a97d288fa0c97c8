#!/bin/sh
# The loop-stall budget (issue 27): while each hostile request runs (a
# large create, replace, List applied, rollback, scale, strategic merge
# patch with each directive, JSON patch, server-side apply against many
# managers, a watch resumed from the oldest change kept, a --manifests file
# written, changed and touched), /healthz on the local socket answers without a gap
# over 200 ms. Lists of STALL_ITEMS (300): the sanitizer build at the
# manifest limits is far over any budget; bench/bench-stall.sh prints the
# figures there, on the release build.
. "$(dirname "$0")/lib.sh"

mkdir -p "$tmp/manifests"
start_tendd --manifests "$tmp/manifests"
/usr/bin/python3 "$(dirname "$0")/stall.py" "$TEND_SOCKET" "$testprog" \
    --items "${STALL_ITEMS:-300}" --budget 200 --manifests "$tmp/manifests" ||
    fail "a case stalled the loop (above)"
finish
