#!/bin/sh
# A fleet on an etcd that wants TLS with client certificates and a user's
# password (issue 17): two tendd join with --etcd-cacert/--etcd-cert/
# --etcd-key/--etcd-user/--etcd-password-file; what does not do (a wrong
# password, no CA, a client certificate with a CommonName, which etcd's
# gateway refuses) is an error at start that says so; and an etcd restart
# (which forgets every token) costs a node nothing: it asks again.
. "$(dirname "$0")/../cli/lib.sh"

command -v etcd >/dev/null 2>&1 || { echo "etcd is not installed (make deps)"; exit 77; }
command -v etcdctl >/dev/null 2>&1 || { echo "etcdctl is not installed (make deps)"; exit 77; }
command -v openssl >/dev/null 2>&1 || { echo "openssl is not installed (make deps)"; exit 77; }
. "$(dirname "$0")/etcd.sh"
. "$(dirname "$0")/lib.sh"

cd "$tmp" || exit 1
# A CA, etcd's certificate for 127.0.0.1, and two client certificates:
# one without a CommonName (what the gateway wants), one with.
cat >ext.cnf <<'CNF'
[srv]
subjectAltName = IP:127.0.0.1
extendedKeyUsage = serverAuth, clientAuth
[cli]
extendedKeyUsage = clientAuth
CNF
key() { openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$1.key" \
    -out "$1.csr" -subj "$2" 2>/dev/null; }
sign() { openssl x509 -req -in "$1.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -out "$1.pem" \
    -days 2 -extfile ext.cnf -extensions "$2" 2>/dev/null; }
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout ca.key \
    -out ca.pem -days 2 -subj /CN=tend-test-ca 2>/dev/null
key srv /CN=etcd && sign srv srv
key cli /O=tend && sign cli cli
key cn /CN=tendd && sign cn cli
[ -s cli.pem ] && [ -s srv.pem ] && [ -s cn.pem ] || { echo "openssl made no certificates"; exit 1; }

for _ in $(seq 50); do
    port=$(shuf -i 20000-29990 -n 1)
    etcd_port_free "$port" && etcd_port_free $((port + 1)) && break
done
url=https://127.0.0.1:$port
start_etcd() {
    etcd --data-dir "$tmp/etcd" --listen-client-urls "$url" --advertise-client-urls "$url" \
        --listen-peer-urls "http://127.0.0.1:$((port + 1))" \
        --initial-advertise-peer-urls "http://127.0.0.1:$((port + 1))" \
        --initial-cluster "default=http://127.0.0.1:$((port + 1))" \
        --cert-file srv.pem --key-file srv.key --trusted-ca-file ca.pem --client-cert-auth \
        >>"$tmp/etcd.log" 2>&1 &
    etcd_pid=$!
    for _ in $(seq 100); do
        curl -s -m 1 --cacert ca.pem --cert cli.pem --key cli.key "$url/health" |
            grep -q '"health":"true"' && return 0
        sleep 0.1
    done
    echo "etcd did not come up:"; tail -5 "$tmp/etcd.log"; exit 1
}
start_etcd
ctl() { etcdctl --endpoints "$url" --cacert ca.pem --cert cli.pem --key cli.key "$@"; }
ctl user add root:s3cret-pw >/dev/null && ctl role add root >/dev/null &&
    ctl user grant-role root root >/dev/null && ctl auth enable >/dev/null ||
    { echo "etcd's authentication could not be set up"; exit 1; }
printf 's3cret-pw\n' >pw
printf 'wrong\n' >bad
chmod 600 pw bad

pids=
node() { # N [ARGS...]: a tendd in the fleet, with TLS and the user
    n=$1
    shift
    "$bin/tendd" --state-dir "$tmp/n$n" --socket "$tmp/n$n.sock" --port-range "4${n}000-4${n}999" \
        --fleet "$url" --node-name "n$n" --lease-ttl 3s --etcd-cacert ca.pem "$@" \
        >>"$tmp/n$n.log" 2>&1 &
    pids="$pids $!"
    eval "n${n}_pid=$!"
    wait_for 10 sh -c "TEND_SOCKET=$tmp/n$n.sock $bin/tend version" ||
        { echo "tendd n$n did not come up:"; cat "$tmp/n$n.log"; exit 1; }
}
cleanup_secure() {
    for p in $pids; do kill -TERM "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    kill -KILL "$etcd_pid" 2>/dev/null
    cleanup
}
trap cleanup_secure EXIT

creds="--etcd-cert cli.pem --etcd-key cli.key --etcd-user root --etcd-password-file"
# shellcheck disable=SC2086 # $creds: options
node 1 $creds pw
# shellcheck disable=SC2086
node 2 $creds pw
if wait_for 5 is_status 1 n2 Ready && is_status 2 n1 Ready; then
    ok "two tendd joined over TLS with a client certificate and a user's password"
else
    fail "nodes over TLS:"; on 1 get nodes; cat "$tmp"/n*.log
fi

# at_once: the last command took less than 5 s (not the 15 s wait for an
# etcd that does not answer)
at_once() { [ $((($(date +%s%N) - t0) / 1000000)) -lt 5000 ] || { fail "$1: not at once"; false; }; }
t0=$(date +%s%N)
# shellcheck disable=SC2086
expect_exit 1 "a wrong password" "$bin/tendd" --state-dir "$tmp/x" --socket "$tmp/x.sock" \
    --fleet "$url" --node-name x --etcd-cacert ca.pem $creds bad &&
    expect_grep "etcd refused user root: .*invalid user ID or password" "$tmp/err" \
        "a wrong password" && at_once "a wrong password" &&
    ok "a wrong password: refused at once, with etcd's reason"
t0=$(date +%s%N)
expect_exit 1 "no CA" "$bin/tendd" --state-dir "$tmp/x" --socket "$tmp/x.sock" --fleet "$url" \
    --node-name x --etcd-cert cli.pem --etcd-key cli.key --etcd-user root \
    --etcd-password-file pw &&
    expect_grep "etcd-cacert: the CA that signed etcd's certificate" "$tmp/err" "no CA" &&
    at_once "no CA" &&
    ok "without --etcd-cacert: an error that names the flag"
t0=$(date +%s%N)
expect_exit 1 "a certificate with a CommonName" "$bin/tendd" --state-dir "$tmp/x" \
    --socket "$tmp/x.sock" --fleet "$url" --node-name x --etcd-cacert ca.pem --etcd-cert cn.pem \
    --etcd-key cn.key --etcd-user root --etcd-password-file pw &&
    expect_grep "CommonName of client" "$tmp/err" "a certificate with a CommonName" &&
    at_once "a certificate with a CommonName" &&
    ok "a client certificate with a CommonName: etcd's reason, said at once"
chmod 644 bad
expect_exit 1 "a password file others can read" "$bin/tendd" --state-dir "$tmp/x" \
    --socket "$tmp/x.sock" --fleet "$url" --node-name x --etcd-user root \
    --etcd-password-file bad &&
    expect_grep "can be read by every user" "$tmp/err" "a readable password file" &&
    ok "a password file others can read is refused"

# etcd restarts: every token it gave is forgotten; the nodes ask again.
# (a node that does not lead writes through it: the leader's writes are
# fenced on a term it loses when etcd is away longer than its lease)
wk=1
[ "$(leader_of 1)" = n1 ] && wk=2
kill -KILL "$etcd_pid"
wait "$etcd_pid" 2>/dev/null
none_running() { # NAME: a Deployment of no replicas
    cat <<YAML
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1}
spec:
  replicas: 0
  selector: {matchLabels: {app: $1}}
  template:
    metadata: {labels: {app: $1}}
    spec:
      containers: [{name: main, command: [/bin/true]}]
YAML
}
# A write made while etcd is away waits, tried again once a second (not in
# a loop as fast as connections are refused).
tries() { grep -c "writing [0-9]* objects\{0,1\} to etcd: .*trying again" "$tmp/n$wk.log"; }
before=$(tries)
none_running held | on "$wk" apply -f - >"$tmp/held.out" 2>&1 &
applying=$!
# ... and one on the leader, which loses its term before etcd is back:
# refused, saying so (not a conflict: nobody else wrote it)
lk=$((3 - wk))
none_running lead | on "$lk" apply -f - >"$tmp/lead.out" 2>&1 &
leading=$!
sleep 3
n_tries=$(($(tries) - before))
[ "$n_tries" -ge 1 ] && [ "$n_tries" -le 5 ] &&
    ok "etcd away: a write is tried again once a second ($n_tries tries in 3 s)" ||
    fail "etcd away: $n_tries tries of a write in 3 s (want 1 to 5)"
wait_for 5 grep -q "this node no longer leads the fleet" "$tmp/n$lk.log" ||
    fail "n$lk still leads with etcd away for more than its lease"
start_etcd
wait "$applying" && grep -q "deployment.apps/held created" "$tmp/held.out" &&
    ok "... and answered once etcd is back" || fail "the apply made while etcd was away: $(cat "$tmp/held.out")"
! wait "$leading" && grep -q "stopped leading the fleet before etcd took the write" "$tmp/lead.out" &&
    ok "an apply on the leader that lost its term meanwhile: refused, saying so" ||
    fail "the apply on the leader while etcd was away: $(cat "$tmp/lead.out")"
if expect_exit 0 "cordon after etcd's restart" on 1 cordon n2 &&
    wait_for 10 is_status 2 n2 Ready,SchedulingDisabled &&
    wait_for 10 is_status 1 n1 Ready && is_status 2 n1 Ready; then
    ok "etcd restarted (tokens forgotten): the nodes authenticate again, a cordon goes through and is seen"
else
    fail "after etcd's restart:"; on 2 get nodes; tail -n 5 "$tmp"/n*.log
fi

# A write etcd does not take within 10 s is withdrawn: its 504 means that
# nothing of it is applied later (a client may try again elsewhere), even
# once etcd is back (issue 29: it was applied minutes later).
kill -KILL "$etcd_pid"
wait "$etcd_pid" 2>/dev/null
if ! none_running late | on "$wk" apply -f - >"$tmp/late.out" 2>&1 &&
    grep -q "withdrawn, nothing of it is applied" "$tmp/late.out"; then
    ok "etcd away for 10 s: the apply is answered 504, withdrawn"
else
    fail "the apply while etcd is away for 10 s: $(cat "$tmp/late.out")"
fi
on "$wk" get deployment late >/dev/null 2>&1 && fail "n$wk still shows the withdrawn deployment"
start_etcd
# once the node writes again, what it had queued would have gone too
none_running after >"$tmp/after.yaml"
wait_for 30 sh -c "TEND_SOCKET=$tmp/n$wk.sock $bin/tend apply -f $tmp/after.yaml >/dev/null 2>&1" ||
    fail "n$wk does not take writes after etcd's return"
late=0
for k in 1 2; do on "$k" get deployment late >/dev/null 2>&1 && late=$((late + 1)); done
[ "$late" = 0 ] && ok "... and not applied after etcd's return (a write through n$wk since was)" ||
    fail "the withdrawn deployment was applied after etcd's return ($late nodes show it)"

# shellcheck disable=SC2086 # a list of pids
stop_tendds $pids
pids=
fleet_verdict
