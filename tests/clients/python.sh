#!/bin/sh
# The official Kubernetes Python client (Debian's python3-kubernetes, 22.6)
# against a real tendd, as its users drive it: load_kube_config() on what
# `tend kubeconfig` writes, the typed APIs with their client-side validation
# on, Watch, logs, server-side apply, dry runs. The cases are in
# python_suite.py, one line each (ok:/FAIL:). Skipped (exit 77, never
# failed) where the client is not installed.
# Needs TEND_BIN_DIR=<build>/bin.
# shellcheck source-path=SCRIPTDIR source=../cli/lib.sh
. "$(dirname "$0")/../cli/lib.sh"

py=/usr/bin/python3
suite="$(cd "$(dirname "$0")" && pwd)/python_suite.py"

if ! err=$("$py" -c 'import kubernetes' 2>&1); then
    echo "the official Python client (Debian: python3-kubernetes) is not installed: $err"
    exit 77
fi

[ -x "$testprog" ] || { echo "no $testprog: build the tests first (make build)"; exit 1; }

port=29630 # outside the leased range and the ephemeral one (kubectl.sh); the JS clients have 29640
start_tendd --listen "127.0.0.1:$port"
tend kubeconfig >"$tmp/kubeconfig" || { fail "tend kubeconfig"; finish; }

# TEST_MARKER: every pod the suite makes carries it, so that lib.sh's
# cleanup finds and stops them (tendd leaves pods running when it stops).
# The timeout is only a backstop against a hung request: every wait in the
# suite has its own deadline.
KUBECONFIG="$tmp/kubeconfig" TESTPROG="$testprog" TEST_MARKER="$tmp" \
    timeout -k 10 900 "$py" -u "$suite"
rc=$?
[ "$rc" -eq 0 ] || fail "python_suite.py: exit $rc"
finish
