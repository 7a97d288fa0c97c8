#!/bin/sh
# remove-cgroups.sh FILE...: the pods' cgroups that the tendd of these
# logs made ("cgroups: ...; pods' cgroups under A, B, ..."), or of these
# STATE_DIR/cgroups files (one directory a line), once their pods are
# gone: what is still in them is killed, then they are removed, and the
# tendd's own directories with them. For tests and scripts that leave pods
# running when they stop tendd, then kill them (a tendd started again on
# the same state directory would sweep them itself). docs/cgroups.md.
[ $# -gt 0 ] || exit 0
for base in $(cat "$@" 2>/dev/null | sed -n -e "s/.*pods' cgroups under \([^(]*\).*/\1/p" \
    -e 's|^\(/sys/fs/cgroup/[^ ]*\)$|\1|p' | tr ',' ' ' | sort -u); do
    [ -d "$base" ] || continue
    for _ in $(seq 150); do
        for d in "$base"/*/; do
            [ -d "$d" ] || continue
            # shellcheck disable=SC2046 # one pid a word
            kill -KILL $(cat "$d/cgroup.procs" 2>/dev/null) 2>/dev/null
            rmdir "$d" 2>/dev/null
        done
        rmdir "$base" 2>/dev/null && break
        sleep 0.1
    done
done
exit 0
