#!/bin/sh
# Install what building and testing tend needs, and nothing when it is all
# there already. Debian/Ubuntu only (apt-get); elsewhere it says what to get.
#   scripts/deps.sh --bench   also what `make bench` compares tend with (runit)
#   scripts/deps.sh --fuzz    also what `make fuzz` builds with (clang, libFuzzer)
set -eu

pkgs="libuv1-dev libyaml-dev libsystemd-dev libcmocka-dev libjansson-dev libyajl-dev \
libmicrohttpd-dev libgnutls28-dev libcurl4-openssl-dev libsqlite3-dev pkg-config cmake \
make gcc curl openssl strace jq systemd dbus dbus-user-session util-linux iproute2 etcd-server etcd-client \
python3 python3-kubernetes clang-format protobuf-c-compiler libprotobuf-c-dev"
# The JavaScript client's suite runs on node (20 or later for
# @kubernetes/client-node 1.x): Debian's, where there is none yet.
command -v node >/dev/null 2>&1 || pkgs="$pkgs nodejs npm"
bench=false
fuzz=false
for arg in "$@"; do
    case $arg in
    --bench) bench=true && pkgs="$pkgs runit" ;;
    --fuzz) fuzz=true && pkgs="$pkgs clang libclang-rt-14-dev" ;;
    *) echo "deps: unknown option $arg" >&2 && exit 2 ;;
    esac
done
modules="libuv yaml-0.1 libsystemd cmocka jansson yajl libmicrohttpd gnutls libcurl sqlite3 libprotobuf-c"

# clang, and its libFuzzer runtime: a fuzz target links.
have_libfuzzer() {
    command -v clang >/dev/null 2>&1 || return 1
    echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' |
        clang -x c -fsanitize=fuzzer -o /dev/null - >/dev/null 2>&1
}

have_all() {
    if $bench; then command -v runsvdir >/dev/null 2>&1 || return 1; fi
    if $fuzz; then have_libfuzzer || return 1; fi
    command -v cmake >/dev/null 2>&1 || return 1
    command -v curl >/dev/null 2>&1 || return 1
    command -v openssl >/dev/null 2>&1 || return 1
    command -v strace >/dev/null 2>&1 || return 1
    command -v jq >/dev/null 2>&1 || return 1
    command -v ss >/dev/null 2>&1 || return 1 # held sockets: who listens (tests, tour)
    command -v systemd-notify >/dev/null 2>&1 || return 1
    # the format test (tests/check-format.sh) skips without it
    command -v clang-format >/dev/null 2>&1 || return 1
    # fleet mode's tests and benchmarks run a real etcd (3 members on loopback)
    command -v etcd >/dev/null 2>&1 || return 1
    command -v etcdctl >/dev/null 2>&1 || return 1
    # the systemd tests: a user manager with its own bus
    [ -x /usr/lib/systemd/systemd ] || return 1
    [ -f /usr/lib/systemd/user/dbus.socket ] || return 1
    command -v unshare >/dev/null 2>&1 || return 1
    command -v cc >/dev/null 2>&1 || return 1
    command -v pkg-config >/dev/null 2>&1 || return 1
    # kubectl's typed clients send protobuf bodies (create configmap): read
    # through protobuf-c, its code made from api/k8s.proto at build time
    command -v protoc-c >/dev/null 2>&1 || return 1
    pkg-config --exists $modules || return 1
    # the client suites (tests/clients/): the official Python client, node
    /usr/bin/python3 -c 'import kubernetes' >/dev/null 2>&1 || return 1
    command -v node >/dev/null 2>&1 || return 1
    command -v npm >/dev/null 2>&1 || return 1
}

# tests/clients/js: the JavaScript client and the schema check, from the
# npm registry at the versions package-lock.json pins (npm ci), again only
# when the lock file changed since.
js_deps() {
    js="$(dirname "$0")/../tests/clients/js"
    if ! node -e 'process.exit(Number(process.versions.node.split(".")[0]) < 20 ? 1 : 0)'; then
        echo "deps: node $(node --version) is older than 20: the JavaScript client's tests will be skipped" >&2
        return 0
    fi
    if [ -f "$js/node_modules/.package-lock.json" ] &&
        [ "$js/node_modules/.package-lock.json" -nt "$js/package-lock.json" ]; then
        return 0
    fi
    echo "deps: npm ci in tests/clients/js"
    (cd "$js" && npm ci --no-audit --no-fund --loglevel=error) ||
        { echo "deps: npm ci in tests/clients/js failed" >&2; exit 1; }
}

if have_all; then
    js_deps
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "deps: missing build dependencies and no apt-get here." >&2
    echo "deps: install the equivalents of: $pkgs" >&2
    exit 1
fi

sudo=
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        sudo=sudo
    else
        echo "deps: need root (or sudo) to install: $pkgs" >&2
        exit 1
    fi
fi

echo "deps: installing $pkgs"
$sudo apt-get update -q
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends $pkgs

have_all || { echo "deps: still missing after install: check pkg-config $modules" >&2; exit 1; }
js_deps
