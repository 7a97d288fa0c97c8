#!/bin/sh
# The official JavaScript client, @kubernetes/client-node, against a real
# tendd over HTTPS, as its users point it there (a kubeconfig from
# `tend kubeconfig`): tests/clients/js/suite.mjs runs its cases, then
# tests/clients/js/validate.mjs checks every object tendd then returns
# (deployments, replicasets, pods, nodes, events) against the Kubernetes
# schema of the npm package kubernetes-models. Skipped (never failed) where
# node or the packages are missing (make deps: npm ci in tests/clients/js).

# What is missing is said before lib.sh makes its temporary directory.
js=$(cd "$(dirname "$0")/js" && pwd)
command -v node >/dev/null || {
    echo "node is not on the PATH: @kubernetes/client-node needs node 20 or later (make deps)"
    exit 77
}
node -e 'process.exit(Number(process.versions.node.split(".")[0]) < 20 ? 1 : 0)' || {
    echo "node $(node --version) is too old: @kubernetes/client-node 1.x needs node 20 or later"
    exit 77
}
[ -d "$js/node_modules/@kubernetes/client-node" ] || {
    echo "@kubernetes/client-node is not installed: run make deps (npm ci in tests/clients/js)"
    exit 77
}
[ -d "$js/node_modules/kubernetes-models" ] || {
    echo "kubernetes-models is not installed: run make deps (npm ci in tests/clients/js)"
    exit 77
}

. "$(dirname "$0")/../cli/lib.sh"

port=29640 # outside the leased range and the ephemeral one (kubectl.sh); python.sh has 29630
start_tendd --listen "127.0.0.1:$port"
tend kubeconfig >"$tmp/kubeconfig" || { fail "tend kubeconfig"; finish; }

echo "== @kubernetes/client-node: suite.mjs"
if KUBECONFIG="$tmp/kubeconfig" TESTPROG="$testprog" TEST_MARKER="$tmp" \
    node "$js/suite.mjs"; then
    ok "client-node suite"
else
    fail "client-node suite (its FAIL lines above)"
fi

echo "== kubernetes-models: examples/ and the README's manifests, against the schema"
src=${TEND_SOURCE_DIR:-$(cd "$(dirname "$0")/../.." && pwd)}
if node "$js/validate.mjs" "$src/examples" --markdown "$src/README.md"; then
    ok "the manifests tend documents are valid Kubernetes"
else
    fail "a manifest of examples/ or the README against the Kubernetes schema (the INVALID lines above)"
fi

echo "== kubernetes-models: the objects tendd returns, against the schema"
if node "$js/validate.mjs" --live "$tmp/kubeconfig"; then
    ok "live objects valid"
else
    fail "live objects against the Kubernetes schema (the INVALID lines above)"
fi

finish
