#!/bin/sh
# `tend validate` as a user runs it: exit codes and the exact text printed.
set -u
tend="$TEND_BIN_DIR/tend"
src="$TEND_SOURCE_DIR"
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

check() { # name expected-exit command...
    name=$1 want=$2
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    got=$?
    if [ "$got" -ne "$want" ]; then
        echo "FAIL $name: exit $got, expected $want"; cat "$tmp/out" "$tmp/err"; fail=1
    fi
}

# Every invalid corpus file: exit 1 and exactly the expected lines on stderr.
cd "$src/tests/spec/invalid" || exit 1
n=0
for f in *.yaml *.json; do
    check "$f" 1 "$tend" validate -f "$f"
    if ! cmp -s "$tmp/err" "${f%.*}.expect"; then
        echo "FAIL $f: output differs"; diff "${f%.*}.expect" "$tmp/err"; fail=1
    fi
    [ -s "$tmp/out" ] && { echo "FAIL $f: printed to stdout"; fail=1; }
    n=$((n + 1))
done
[ "$n" -ge 40 ] || { echo "FAIL: only $n invalid cases"; fail=1; }

# Valid input: one line per object, exit 0.
cd "$src/tests/spec/valid" || exit 1
check multi 0 "$tend" validate -f multi.yaml
printf 'deployment "api" is valid\ndeployment "worker" is valid\n' | cmp -s - "$tmp/out" ||
    { echo "FAIL multi: unexpected output"; cat "$tmp/out"; fail=1; }
check dir 0 "$tend" validate -f .
[ "$(wc -l <"$tmp/out")" -eq 13 ] && grep -qx 'secret "web-db" is valid' "$tmp/out" ||
    { echo "FAIL dir: expected 12 objects, a Secret among them"; cat "$tmp/out"; fail=1; }
check stdin 0 sh -c "\"$tend\" validate -f - < minimal.yaml"
grep -qx 'deployment "hello" is valid' "$tmp/out" || { echo "FAIL stdin"; fail=1; }
# Each example on its own (web-v1 and web-v2 are two versions of one
# deployment: together they are refused, as an apply of both would be).
for f in "$src"/examples/*.yaml "$src"/examples/run/*.yaml; do
    check "$(basename "$f")" 0 "$tend" validate -f "$f"
done
check examples-together 1 "$tend" validate -f "$src/examples"
grep -q 'Duplicate value: "web"' "$tmp/err" || { echo "FAIL: examples-together"; fail=1; }

# The old form of a leased port: valid, and a warning says how to write it.
cat >"$tmp/legacy.yaml" <<'YAML'
apiVersion: apps/v1
kind: Deployment
metadata: {name: old}
spec:
  selector: {matchLabels: {app: old}}
  template:
    metadata: {labels: {app: old}}
    spec:
      containers:
      - name: main
        command: [/bin/sleep, "100"]
        ports: [{name: http}]
YAML
check legacy 0 "$tend" validate -f "$tmp/legacy.yaml"
grep -qx 'deployment "old" is valid' "$tmp/out" &&
    grep -qx "warning: $tmp/legacy.yaml:1: deployment \"old\": a port without containerPort is not valid Kubernetes: write the pod template's annotation tend.io/lease-ports: http instead (taken so meanwhile)" "$tmp/err" ||
    { echo "FAIL legacy: no warning"; cat "$tmp/out" "$tmp/err"; fail=1; }

# A bad file among good ones fails the whole input, naming the bad one.
check mixed 1 "$tend" validate -f minimal.yaml -f "$src/tests/spec/invalid/replicas-negative.yaml"
grep -q 'replicas-negative.yaml:6:3: deployment "web": spec.replicas' "$tmp/err" || { echo "FAIL mixed"; fail=1; }
[ -s "$tmp/out" ] && { echo "FAIL mixed: printed valid objects of an invalid input"; fail=1; }

# The same name twice across files.
check twice 1 "$tend" validate -f minimal.yaml -f minimal.yaml
grep -q 'Duplicate value: "hello"' "$tmp/err" || { echo "FAIL twice"; cat "$tmp/err"; fail=1; }

# Usage and I/O errors.
check noargs 2 "$tend" validate
check extra 2 "$tend" validate minimal.yaml
check missing 1 "$tend" validate -f /nonexistent/x.yaml
grep -qx '/nonexistent/x.yaml: cannot read: No such file or directory' "$tmp/err" ||
    { echo "FAIL missing: message"; cat "$tmp/err"; fail=1; }
mkdir "$tmp/empty"
check emptydir 1 "$tend" validate -f "$tmp/empty"
check help 0 "$tend" validate --help
grep -q 'Usage: tend validate' "$tmp/out" || { echo "FAIL help"; fail=1; }
check unknown-verb 2 "$tend" frobnicate
check version 0 "$tend" version --client

[ "$fail" -eq 0 ] && echo "all tend validate checks passed"
exit "$fail"
