#!/bin/sh
# A 3-member etcd on loopback for fleet tests and `make fleet`: free ports
# (never 2379: a system etcd may have it), data under a directory of the
# caller's. Source it, then:
#
#   etcd_cluster_start DIR   members e0..e2; sets ETCD_ENDPOINTS (the client
#                            URLs, comma-separated), etcd_pids, etcd_base
#   etcd_cluster_stop        kills them
#
# Returns 77 where etcd is not installed (make deps installs etcd-server).

etcd_pids=
ETCD_ENDPOINTS=

# A port nothing listens on (TCP, loopback).
etcd_port_free() {
    ! ss -Htln "sport = :$1" 2>/dev/null | grep -q .
}

etcd_cluster_start() {
    dir=$1
    command -v etcd >/dev/null 2>&1 || { echo "etcd is not installed (make deps)"; return 77; }
    # below the kernel's ephemeral ports (32768-), where no connection of
    # another test can be holding one, and below tendd's default port leases
    # (30000-32767, RT_PORT_RANGE_LO), where another test's tendd binds its
    # pods' ports: a free port there could be taken before etcd binds it
    # (fleet-chaos's etcd found all three taken once under ctest -j2)
    for _ in $(seq 50); do
        etcd_base=$(shuf -i 20000-29990 -n 1)
        free=1
        for i in 0 1 2 3 4 5; do
            etcd_port_free $((etcd_base + i)) || free=0
        done
        [ "$free" = 1 ] && break
    done
    cluster=
    for i in 0 1 2; do
        cluster="${cluster:+$cluster,}e$i=http://127.0.0.1:$((etcd_base + 3 + i))"
    done
    ETCD_ENDPOINTS=
    for i in 0 1 2; do
        client=http://127.0.0.1:$((etcd_base + i))
        peer=http://127.0.0.1:$((etcd_base + 3 + i))
        etcd --name "e$i" --data-dir "$dir/e$i" --listen-client-urls "$client" \
            --advertise-client-urls "$client" --listen-peer-urls "$peer" \
            --initial-advertise-peer-urls "$peer" --initial-cluster "$cluster" \
            --initial-cluster-state new --initial-cluster-token "tend-$$" \
            >"$dir/e$i.log" 2>&1 &
        etcd_pids="$etcd_pids $!"
        eval "etcd_pid_$i=$!"
        ETCD_ENDPOINTS="${ETCD_ENDPOINTS:+$ETCD_ENDPOINTS,}$client"
    done
    export ETCD_ENDPOINTS
    for _ in $(seq 200); do
        healthy=0
        for i in 0 1 2; do
            curl -s -m 1 "http://127.0.0.1:$((etcd_base + i))/health" 2>/dev/null |
                grep -q '"health":"true"' && healthy=$((healthy + 1))
        done
        [ "$healthy" = 3 ] && return 0
        sleep 0.1
    done
    echo "etcd did not come up in 20 s:"; tail -n 5 "$dir"/e*.log
    return 1
}

etcd_cluster_stop() {
    # shellcheck disable=SC2086 # a list of pids
    [ -n "$etcd_pids" ] && kill -KILL $etcd_pids 2>/dev/null
    etcd_pids=
}
