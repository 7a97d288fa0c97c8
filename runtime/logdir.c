/* SPDX-License-Identifier: MIT */

/*
 * Pod log directories, recycled.
 *
 * Each pod writes to <state>/pods/<namespace>_<pod>/<container>.log. When a
 * pod is removed its directory is not deleted but emptied and kept in
 * <state>/pods/.spare/, and the next pod's directory is a spare renamed.
 *
 * Why: ext4 does not give out an inode freed in the last minute or more
 * (ialloc.c, recently_deleted()): every allocation scans past them, reading
 * each one's inode. Pods come and go in bursts — a mass kill replaces a
 * thousand, and a thousand old ones are removed — so each new directory and
 * log file scanned past a thousand freed inodes: 20 % of tendd's time in a
 * mass respawn was mkdir(). A rename allocates nothing, and the log file
 * is kept (emptied) with its directory.
 */

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt-internal.h"

#define SPARES_MAX 2048
#define SPARE_LOG "log" /* the one file a spare keeps, emptied */

static char *spare_root(rt_manager *m) {
        return strprintf("%s/pods/.spare", m->state_dir);
}

static int push_spare(rt_manager *m, char *name) {
        if (TEND_GROW(m->spares, m->alloc_spares, m->n_spares + 1) < 0)
                return -ENOMEM;
        m->spares[m->n_spares++] = name;
        return 0;
}

/* The spares a previous agent left (once, on first use). */
static void load_spares(rt_manager *m) {
        _cleanup_free_ char *root = NULL;
        DIR *d;
        struct dirent *de;

        if (m->spares_loaded)
                return;
        m->spares_loaded = true;
        root = spare_root(m);
        d = root ? opendir(root) : NULL;
        if (!d)
                return;
        while ((de = readdir(d)) && m->n_spares < SPARES_MAX) {
                int64_t n;
                char *name;
                if (safe_atoi64(de->d_name, &n) < 0 || n < 0)
                        continue;
                name = strdup(de->d_name);
                if (!name || push_spare(m, name) < 0) {
                        free(name);
                        break;
                }
                m->spare_seq = MAX(m->spare_seq, (uint64_t) n + 1);
        }
        closedir(d);
}

/* Creates the directories that will hold path. Usually only the last level
 * is missing, so that is tried first: on some filesystems (overlayfs) each
 * mkdir() costs ~0.1 ms even when it fails with EEXIST. */
int rt__mkdir_parents(const char *path, mode_t mode) {
        _cleanup_free_ char *p = strdup(path);
        char *slash;

        if (!p)
                return -ENOMEM;
        slash = strrchr(p, '/');
        if (!slash || slash == p)
                return 0;
        *slash = 0;
        if (mkdir(p, mode) == 0 || errno == EEXIST)
                return 0;
        if (errno != ENOENT)
                return -errno;
        for (char *s = p + 1; *s; s++)
                if (*s == '/') {
                        *s = 0;
                        if (mkdir(p, mode) < 0 && errno != EEXIST)
                                return -errno;
                        *s = '/';
                }
        return mkdir(p, mode) < 0 && errno != EEXIST ? -errno : 0;
}

int rt__log_dir_make(rt_manager *m, const char *log_path) {
        load_spares(m);
        while (m->n_spares > 0) {
                _cleanup_free_ char *name = m->spares[--m->n_spares], *root = spare_root(m),
                                    *dir = strdup(log_path), *from = NULL, *kept = NULL;
                char *slash = dir ? strrchr(dir, '/') : NULL;

                if (!root || !slash)
                        return -ENOMEM;
                *slash = 0;
                from = strprintf("%s/%s", root, name);
                kept = strprintf("%s/" SPARE_LOG, dir);
                if (!from || !kept)
                        return -ENOMEM;
                if (rename(from, dir) < 0)
                        continue; /* gone, or the name is taken: the next one */
                /* Its emptied log becomes this pod's. */
                (void) rename(kept, log_path);
                return 0;
        }
        return rt__mkdir_parents(log_path, 0750);
}

/* Empties dir, keeping one regular file (emptied, renamed SPARE_LOG) to be
 * the next pod's log. Returns 0 if dir is fit to be a spare. */
static int empty_dir(const char *dir) {
        DIR *d = opendir(dir);
        struct dirent *de;
        bool kept = false;
        int r = 0;

        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                struct stat st;
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (!kept && fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    S_ISREG(st.st_mode)) {
                        int fd = openat(dirfd(d), de->d_name, O_WRONLY | O_CLOEXEC | O_NOCTTY);
                        if (fd >= 0 && ftruncate(fd, 0) == 0 &&
                            renameat(dirfd(d), de->d_name, dirfd(d), SPARE_LOG) == 0)
                                kept = true;
                        safe_close(fd);
                        if (kept)
                                continue;
                }
                if (unlinkat(dirfd(d), de->d_name, 0) < 0 &&
                    unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) < 0)
                        r = -errno; /* not empty after all: not a spare */
        }
        closedir(d);
        return r;
}

static void remove_dir(const char *dir) {
        DIR *d = opendir(dir);
        struct dirent *de;

        if (!d)
                return;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        (void) unlinkat(dirfd(d), de->d_name, 0);
        closedir(d);
        (void) rmdir(dir);
}

void rt_manager_remove_pod_logs(rt_manager *m, const char *namespace, const char *pod) {
        _cleanup_free_ char *dir = strprintf("%s/pods/%s_%s", m->state_dir, namespace, pod),
                            *root = spare_root(m), *to = NULL, *name = NULL;

        if (!dir || !root)
                return;
        load_spares(m);
        if (m->n_spares >= SPARES_MAX || empty_dir(dir) < 0) {
                remove_dir(dir);
                return;
        }
        name = strprintf("%" PRIu64, m->spare_seq++);
        to = name ? strprintf("%s/%s", root, name) : NULL;
        if (!to || (mkdir(root, 0750) < 0 && errno != EEXIST) || rename(dir, to) < 0) {
                remove_dir(dir);
                return;
        }
        if (push_spare(m, name) < 0) {
                remove_dir(to);
                return;
        }
        TAKE_PTR(name);
}

void rt__log_spares_free(rt_manager *m) {
        for (size_t i = 0; i < m->n_spares; i++)
                free(m->spares[i]);
        free(m->spares);
        m->spares = NULL;
        m->n_spares = m->alloc_spares = 0;
}
