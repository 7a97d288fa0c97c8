# Sourced first (before lib.sh) by a test that mounts: as root it runs
# again in a mount namespace of its own (unshare), so that nothing it
# mounts can outlive it on the machine; otherwise it is skipped, saying
# $ns_why (what needs root).
if [ "$(id -u)" -ne 0 ]; then
    echo "$ns_why; skipped"
    exit 77
fi
if [ -z "${TEND_MOUNT_NS:-}" ]; then
    command -v unshare >/dev/null || { echo "unshare missing (util-linux)"; exit 77; }
    TEND_MOUNT_NS=1 exec unshare --mount --propagation private "$0" "$@"
fi
