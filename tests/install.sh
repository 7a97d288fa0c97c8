#!/bin/sh
# cmake --install, staged with DESTDIR under a prefix given at install time:
# the units name the installed tendd, the tour is executable, and the
# installed tour runs with the installed binaries.
set -u
[ -n "${TEND_BUILD_DIR:-}" ] || { echo "TEND_BUILD_DIR is not set"; exit 2; }
tmp=$(mktemp -d /tmp/tend-install-XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }

DESTDIR="$tmp/stage" cmake --install "$TEND_BUILD_DIR" --prefix /opt/tend-test >"$tmp/log" 2>&1 ||
    fail "cmake --install: $(cat "$tmp/log")"
root="$tmp/stage/opt/tend-test"
for kind in system user; do
    unit="$root/lib/systemd/$kind/tendd.service"
    grep -q "^ExecStart=/opt/tend-test/sbin/tendd " "$unit" ||
        fail "$kind unit: $(grep ExecStart= "$unit")"
done
ok "both units run the tendd of the install prefix"
[ -x "$root/sbin/tendd" ] && [ -x "$root/bin/tend" ] && [ -x "$root/share/tend/examples/tour.sh" ] ||
    fail "installed files: $(find "$root" -type f | sed "s|$root||")"
ok "tendd, tend and the tour are installed executable"
env -u TEND_BIN_DIR "$root/share/tend/examples/tour.sh" >"$tmp/tour" 2>&1 ||
    fail "the installed tour: $(tail -20 "$tmp/tour")"
grep -q "The tour is over" "$tmp/tour" || fail "the tour did not finish"
ok "the installed tour runs with the installed binaries"
