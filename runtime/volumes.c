/* SPDX-License-Identifier: MIT */

/*
 * A pod's volumes (docs/volumes.md): configMap, secret and emptyDir, each a
 * directory of tendd's, <state>/volumes/<pod uid>/<volume>, that the pod's
 * process sees at its mountPath — a bind mount in a mount namespace of its
 * own (the process backend, spawn.c), or systemd's BindPaths= (a unit).
 *
 * A secret's directory, and an emptyDir of medium Memory, is a tmpfs of its
 * own: a secret's bytes never reach a disk. A configMap's or a secret's
 * files are written as the kubelet's atomic writer does, so that an edit
 * reaches a running process in one step, never half:
 *
 *   <volume>/..2026_12_06_02_00_00.123456789/<path>   the files, one version
 *   <volume>/..data -> ..2026_12_06_02_00_00.123456789
 *   <volume>/<name> -> ..data/<name>                  what the process opens
 *
 * A new version is a new timestamped directory; the rename of a new ..data
 * link over the old one is the switch; then the old directory goes.
 *
 * Everything here runs in tendd as root (mounts need it), on paths under
 * its own state directory, which no pod can write.
 */

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "rt-internal.h"

#define DATA_LINK "..data"
#define DATA_TMP "..data_tmp"

const char *rt_mount_problem(void) {
        return geteuid() == 0 ? NULL
                              : "a pod's volumes are mounted in a mount namespace of its own, "
                                "which needs tendd to run as root";
}

char *rt__volume_dir(rt_manager *m, const char *uid, const char *volume) {
        return volume ? strprintf("%s/volumes/%s/%s", m->state_dir, uid, volume)
                      : strprintf("%s/volumes/%s", m->state_dir, uid);
}

/* ---- removing trees ----------------------------------------------------------------- */

/* Removes name (under at) and all below it, never following a link nor
 * leaving its filesystem (dev). */
static int remove_tree_at(int at, const char *name, dev_t dev, unsigned depth) {
        struct stat st;
        int fd, r = 0;
        DIR *d;
        struct dirent *de;

        if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISDIR(st.st_mode))
                return unlinkat(at, name, 0) < 0 && errno != ENOENT ? -errno : 0;
        if (st.st_dev != dev || depth > 64)
                return -EBUSY;
        fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return -ENOMEM;
        }
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        RET_GATHER(r, remove_tree_at(dirfd(d), de->d_name, dev, depth + 1));
        closedir(d);
        if (unlinkat(at, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                RET_GATHER(r, -errno);
        return r;
}

/* A volume's directory: its tmpfs (if it is one) unmounted, then all of
 * it removed. */
static int remove_volume(const char *path) {
        struct stat st;

        (void) umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW); /* EINVAL: not a mount */
        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        return remove_tree_at(AT_FDCWD, path, st.st_dev, 0);
}

static void remove_uid_dir(const char *dir) {
        DIR *d = opendir(dir);
        struct dirent *de;

        if (!d)
                return;
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, "..")) {
                        _cleanup_free_ char *p = strprintf("%s/%s", dir, de->d_name);
                        int r = p ? remove_volume(p) : -ENOMEM;
                        if (r < 0)
                                log_warning_errno(r, "removing %s: %m", strna(p));
                }
        closedir(d);
        if (rmdir(dir) < 0 && errno != ENOENT)
                log_warning_errno(-errno, "removing %s: %m", dir);
}

void rt_manager_remove_pod_volumes(rt_manager *m, const char *uid) {
        _cleanup_free_ char *dir = rt__volume_dir(m, uid, NULL);

        if (dir && access(dir, F_OK) == 0)
                remove_uid_dir(dir);
}

void rt_manager_sweep_volumes(rt_manager *m, bool (*keep)(const char *uid, void *userdata),
                              void *userdata) {
        _cleanup_free_ char *root = strprintf("%s/volumes", m->state_dir);
        DIR *d = root ? opendir(root) : NULL;
        struct dirent *de;

        if (!d)
                return;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.' || keep(de->d_name, userdata))
                        continue;
                _cleanup_free_ char *dir = strprintf("%s/%s", root, de->d_name);
                if (dir) {
                        log_info("volumes of pod uid %s: no pod has them: removed", de->d_name);
                        remove_uid_dir(dir);
                }
        }
        closedir(d);
}

/* ---- the atomic writer ----------------------------------------------------------------- */

/* Whether the version in directory ts (under at) holds exactly files. */
static bool same_file(int tsfd, const rt_file *f) {
        struct stat st;
        char buf[8192];
        size_t off = 0;
        bool same;
        int fd = openat(tsfd, f->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

        if (fd < 0)
                return false;
        same = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t) st.st_size == f->size &&
               (st.st_mode & 07777) == f->mode;
        while (same && off < f->size) {
                ssize_t n = read(fd, buf, MIN(sizeof buf, f->size - off));
                same = n > 0 && memcmp(buf, (const char *) f->data + off, (size_t) n) == 0;
                off += n > 0 ? (size_t) n : 0;
        }
        safe_close(fd);
        return same;
}

/* Regular files below fd, counted (a version holds files and directories). */
static ssize_t count_files(int fd, unsigned depth) {
        DIR *d;
        struct dirent *de;
        ssize_t n = 0;

        if (depth > 64)
                return -ELOOP;
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return -ENOMEM;
        }
        while ((de = readdir(d)) && n >= 0) {
                struct stat st;
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        n = -errno;
                else if (S_ISREG(st.st_mode))
                        n++;
                else if (S_ISDIR(st.st_mode)) {
                        int sub = openat(dirfd(d), de->d_name,
                                         O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        ssize_t k = sub < 0 ? -errno : count_files(sub, depth + 1);
                        n = k < 0 ? k : n + k;
                }
        }
        closedir(d);
        return n;
}

static bool unchanged(int at, const char *ts, const rt_file *files, size_t n) {
        int tsfd = openat(at, ts, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), fd;
        bool same;

        if (tsfd < 0)
                return false;
        same = true;
        for (size_t i = 0; i < n && same; i++)
                same = same_file(tsfd, &files[i]);
        fd = same ? fcntl(tsfd, F_DUPFD_CLOEXEC, 3) : -1;
        same = same && fd >= 0 && count_files(fd, 0) == (ssize_t) n;
        safe_close(tsfd);
        return same;
}

/* The directories that hold path (relative, under fd). */
static int make_parents_at(int fd, const char *path) {
        _cleanup_free_ char *p = strdup(path);

        if (!p)
                return -ENOMEM;
        for (char *s = strchr(p, '/'); s; s = strchr(s + 1, '/')) {
                *s = 0;
                if (mkdirat(fd, p, 0755) == 0) {
                        if (fchmodat(fd, p, 0755, 0) < 0) /* (not the umask's) */
                                return -errno;
                } else if (errno != EEXIST)
                        return -errno;
                *s = '/';
        }
        return 0;
}

static int write_file_at(int fd, const rt_file *f) {
        size_t off = 0;
        int r = make_parents_at(fd, f->path), out;

        if (r < 0)
                return r;
        out = openat(fd, f->path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out < 0)
                return -errno;
        while (off < f->size && r >= 0) {
                ssize_t n = write(out, (const char *) f->data + off, f->size - off);
                if (n < 0 && errno != EINTR)
                        r = -errno;
                off += n > 0 ? (size_t) n : 0;
        }
        if (r >= 0 && fchmod(out, f->mode) < 0) /* (not the umask's) */
                r = -errno;
        safe_close(out);
        return r;
}

/* The first component of a path (into buf). */
static const char *top_of(const char *path, char *buf, size_t size) {
        size_t n = strcspn(path, "/");

        snprintf(buf, size, "%.*s", (int) n, path);
        return buf;
}

/* Writes files into the volume at `at` as a new version, unless the
 * current one holds exactly them. 1: written; 0: unchanged. */
static int write_version(int at, const rt_file *files, size_t n, char **ret_error) {
        char old[256] = "", ts[64], top[NAME_MAX + 1];
        struct timespec now;
        struct tm tm;
        ssize_t len = readlinkat(at, DATA_LINK, old, sizeof old - 1);
        int tsfd, r = 0;
        DIR *d;
        struct dirent *de;

        if (len > 0) {
                old[len] = 0;
                if (unchanged(at, old, files, n))
                        return 0;
        } else
                old[0] = 0;

        (void) clock_gettime(CLOCK_REALTIME, &now);
        (void) gmtime_r(&now.tv_sec, &tm);
        for (unsigned k = 0;; k++) {
                int w = snprintf(ts, sizeof ts, "..%04d_%02d_%02d_%02d_%02d_%02d.%09ld",
                                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                                 tm.tm_min, tm.tm_sec, now.tv_nsec + (long) k);
                if (w < 0 || (size_t) w >= sizeof ts)
                        return -EINVAL;
                if (mkdirat(at, ts, 0755) == 0)
                        break;
                if (errno != EEXIST || k > 1000) {
                        *ret_error = strprintf("making %s: %s", ts, strerror(errno));
                        return -errno;
                }
        }
        tsfd = openat(at, ts, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (tsfd < 0 || fchmod(tsfd, 0755) < 0) {
                r = -errno;
                *ret_error = strprintf("opening %s: %s", ts, strerror(-r));
        }
        for (size_t i = 0; i < n && r >= 0; i++) {
                r = write_file_at(tsfd, &files[i]);
                if (r < 0)
                        *ret_error = strprintf("writing %s: %s", files[i].path, strerror(-r));
        }
        safe_close(tsfd);
        /* the switch: one rename */
        if (r >= 0 &&
            ((unlinkat(at, DATA_TMP, 0) < 0 && errno != ENOENT) ||
             symlinkat(ts, at, DATA_TMP) < 0 || renameat(at, DATA_TMP, at, DATA_LINK) < 0)) {
                r = -errno;
                *ret_error = strprintf("switching %s to %s: %s", DATA_LINK, ts, strerror(-r));
        }
        if (r < 0) {
                struct stat st;
                if (fstat(at, &st) == 0)
                        (void) remove_tree_at(at, ts, st.st_dev, 0);
                return r;
        }
        /* what the process opens: <name> -> ..data/<name>, for each name
         * of this version (a link that names what the version lacks goes) */
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *target = NULL;
                struct stat st;
                top_of(files[i].path, top, sizeof top);
                if (fstatat(at, top, &st, AT_SYMLINK_NOFOLLOW) == 0)
                        continue;
                target = strprintf(DATA_LINK "/%s", top);
                if (!target)
                        return -ENOMEM;
                if (symlinkat(target, at, top) < 0 && errno != EEXIST) {
                        r = -errno;
                        *ret_error = strprintf("linking %s: %s", top, strerror(-r));
                        return r;
                }
        }
        d = fdopendir(fcntl(at, F_DUPFD_CLOEXEC, 3));
        while (d && (de = readdir(d))) {
                bool wanted = false;
                if (startswith(de->d_name, ".."))
                        continue;
                for (size_t i = 0; i < n && !wanted; i++)
                        wanted = streq(top_of(files[i].path, top, sizeof top), de->d_name);
                if (!wanted)
                        (void) unlinkat(at, de->d_name, 0);
        }
        if (d)
                closedir(d);
        if (old[0] && !streq(old, ts) && startswith(old, "..")) {
                struct stat st;
                if (fstat(at, &st) == 0)
                        (void) remove_tree_at(at, old, st.st_dev, 0);
        }
        return 1;
}

int rt__volume_write(const char *dir, const rt_file *files, size_t n, char **ret_error) {
        int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), r;

        if (fd < 0) {
                r = -errno;
                *ret_error = strprintf("opening %s: %s", dir, strerror(-r));
                return r;
        }
        r = write_version(fd, files, n, ret_error);
        safe_close(fd);
        return r;
}

/* ---- at a start --------------------------------------------------------------------- */

static bool is_mount_point(const char *path) {
        _cleanup_free_ char *parent = strprintf("%s/..", path);
        struct stat a, b;

        return parent && stat(path, &a) == 0 && stat(parent, &b) == 0 && a.st_dev != b.st_dev;
}

/* Makes a volume's directory: a tmpfs of its own for memory ones. */
static int make_volume_dir(const char *dir, const spec_volume *v, char **ret_error) {
        bool memory = v->secret || (v->empty_dir && streq_ptr(v->empty_dir->medium, "Memory"));
        mode_t mode = v->empty_dir ? 0777 : 0755;
        int r = rt__mkdir_parents(dir, 0700);

        if (r >= 0 && mkdir(dir, mode) < 0 && errno != EEXIST)
                r = -errno;
        if (r < 0) {
                *ret_error = strprintf("volume %s: making %s: %s", v->name, dir, strerror(-r));
                return r;
        }
        if (memory && !is_mount_point(dir)) {
                char opts[64];
                if (v->empty_dir && v->empty_dir->size_limit.text)
                        snprintf(opts, sizeof opts, "mode=%o,size=%lld", (unsigned) mode,
                                 (long long) v->empty_dir->size_limit.value);
                else
                        snprintf(opts, sizeof opts, "mode=%o", (unsigned) mode);
                if (mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0) {
                        r = -errno;
                        *ret_error = strprintf("volume %s: mounting a tmpfs at %s: %s", v->name,
                                               dir, strerror(-r));
                        return r;
                }
        } else if (chmod(dir, mode) < 0) /* (not the umask's) */
                return -errno;
        return 0;
}

static const spec_volume *volume_named(const spec_pod_spec *s, const char *name, size_t *ret_i) {
        for (size_t i = 0; i < s->n_volumes; i++)
                if (streq_ptr(s->volumes[i].name, name)) {
                        *ret_i = i;
                        return &s->volumes[i];
                }
        return NULL;
}

/* The volume's files (what the agent resolved; none for an emptyDir, and
 * for a configMap or a secret that is optional and missing). */
static rt_volume_files files_of(const rt_pod_params *p, size_t i) {
        return p->volumes ? p->volumes[i] : (rt_volume_files){};
}

/* Where the process will see mount m: the mount point made on the host if
 * it is missing (a directory, or an empty file for a file), as systemd's
 * BindPaths= does. */
static int make_mount_point(const char *dst, bool file, char **ret_error) {
        struct stat st;
        int r, fd;

        if (stat(dst, &st) == 0) {
                if (file == !S_ISDIR(st.st_mode))
                        return 0;
                *ret_error = strprintf("mountPath %s is a %s on the host, and what is mounted "
                                       "there a %s",
                                       dst, file ? "directory" : "file",
                                       file ? "file" : "directory");
                return -EEXIST;
        }
        r = rt__mkdir_parents(dst, 0755);
        if (r >= 0 && !file && mkdir(dst, 0755) < 0 && errno != EEXIST)
                r = -errno;
        if (r >= 0 && file) {
                fd = open(dst, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
                if (fd < 0)
                        r = -errno;
                safe_close(fd);
        }
        if (r < 0)
                *ret_error = strprintf("making the mount point %s: %s", dst, strerror(-r));
        return r;
}

/* The source of mount m: the volume, or its subPath, which must stay in
 * it (an emptyDir's is made). */
static int mount_source(const char *dir, const spec_volume *v, const spec_volume_mount *vm,
                        char **ret_src, bool *ret_file, char **ret_error) {
        _cleanup_free_ char *src = NULL, *real = NULL, *real_dir = NULL;
        struct stat st;
        int r;

        if (!vm->sub_path || !*vm->sub_path) {
                *ret_src = strdup(dir);
                *ret_file = false;
                return *ret_src ? 0 : -ENOMEM;
        }
        src = strprintf("%s/%s", dir, vm->sub_path);
        if (!src)
                return -ENOMEM;
        if (v->empty_dir && stat(src, &st) < 0) {
                r = rt__mkdir_parents(src, 0777);
                if ((r >= 0 && mkdir(src, 0777) < 0 && errno != EEXIST) ||
                    (r >= 0 && chmod(src, 0777) < 0))
                        r = -errno;
                if (r < 0) {
                        *ret_error = strprintf("volume %s: making subPath %s: %s", v->name,
                                               vm->sub_path, strerror(-r));
                        return r;
                }
        }
        real = realpath(src, NULL);
        real_dir = realpath(dir, NULL);
        if (!real || !real_dir) {
                r = -errno;
                *ret_error = strprintf("volume %s has no subPath %s", v->name, vm->sub_path);
                return r;
        }
        if (!startswith(real, real_dir) || real[strlen(real_dir)] != '/') {
                *ret_error = strprintf("volume %s: subPath %s leads out of the volume", v->name,
                                       vm->sub_path);
                return -EPERM;
        }
        if (stat(real, &st) < 0) {
                r = -errno;
                *ret_error = strprintf("volume %s: subPath %s: %s", v->name, vm->sub_path,
                                       strerror(-r));
                return r;
        }
        *ret_file = !S_ISDIR(st.st_mode);
        *ret_src = TAKE_PTR(real);
        return 0;
}

void rt__mounts_free(rt_pod *pod) {
        for (size_t i = 0; i < pod->n_mounts; i++) {
                free(pod->mounts[i].src);
                free(pod->mounts[i].dst);
        }
        free(pod->mounts);
        pod->mounts = NULL;
        pod->n_mounts = 0;
}

static size_t depth_of(const char *path) {
        size_t n = 0;
        for (const char *s = path; *s; s++)
                n += s[0] == '/' && s[1] && s[1] != '/';
        return n;
}

/* A mount over another's path comes after it (/etc/app, then
 * /etc/app/tls), as container runtimes order them; else as written. */
static void order_mounts(rt_mount *m, size_t n) {
        for (size_t i = 1; i < n; i++)
                for (size_t k = i; k > 0 && depth_of(m[k - 1].dst) > depth_of(m[k].dst); k--) {
                        rt_mount t = m[k];
                        m[k] = m[k - 1];
                        m[k - 1] = t;
                }
}

int rt__volumes_prepare(rt_pod *pod, const rt_pod_params *p, char **ret_error) {
        const spec_pod_spec *s = p->spec;
        const spec_container *c = &s->containers[0];
        const char *problem;
        int r;

        if (c->n_volume_mounts == 0)
                return 0;
        if ((problem = rt_mount_problem())) {
                *ret_error = strprintf("%s (it runs as uid %u)", problem, (unsigned) geteuid());
                return -EPERM;
        }
        /* each mounted volume, made and written */
        for (size_t i = 0; i < s->n_volumes; i++) {
                const spec_volume *v = &s->volumes[i];
                rt_volume_files f = files_of(p, i);
                _cleanup_free_ char *dir = NULL;

                if (!spec_volume_mounted(s, v->name))
                        continue;
                dir = rt__volume_dir(pod->manager, pod->uid, v->name);
                if (!dir)
                        return -ENOMEM;
                r = make_volume_dir(dir, v, ret_error);
                if (r >= 0 && !v->empty_dir) {
                        _cleanup_free_ char *err = NULL;
                        r = rt__volume_write(dir, f.files, f.n, &err);
                        if (r < 0)
                                *ret_error = strprintf("volume %s: %s", v->name, strna(err));
                }
                if (r < 0)
                        return r;
        }
        pod->mounts = new0(rt_mount, c->n_volume_mounts);
        if (!pod->mounts)
                return -ENOMEM;
        for (size_t i = 0; i < c->n_volume_mounts; i++) {
                const spec_volume_mount *vm = &c->volume_mounts[i];
                size_t vi = 0;
                const spec_volume *v = volume_named(s, vm->name, &vi);
                _cleanup_free_ char *dir = NULL;
                rt_mount *mt = &pod->mounts[pod->n_mounts];
                bool file = false;

                if (!v) {
                        *ret_error = strprintf("volumeMounts[%zu]: no volume %s", i, vm->name);
                        return -EINVAL;
                }
                dir = rt__volume_dir(pod->manager, pod->uid, v->name);
                if (!dir)
                        return -ENOMEM;
                r = mount_source(dir, v, vm, &mt->src, &file, ret_error);
                if (r >= 0 && !(mt->dst = strdup(vm->mount_path)))
                        r = -ENOMEM;
                pod->n_mounts++;
                if (r >= 0)
                        r = make_mount_point(mt->dst, file, ret_error);
                if (r < 0)
                        return r;
                /* a configMap's and a secret's files are read-only always */
                mt->read_only = vm->read_only || !v->empty_dir;
        }
        order_mounts(pod->mounts, pod->n_mounts);
        return 0;
}

int rt_pod_update_volumes(rt_pod *pod, const rt_pod_params *p, char **ret_error) {
        const spec_pod_spec *s = p->spec;
        int changed = 0;

        *ret_error = NULL;
        for (size_t i = 0; i < s->n_volumes; i++) {
                const spec_volume *v = &s->volumes[i];
                rt_volume_files f = files_of(p, i);
                _cleanup_free_ char *dir = NULL, *err = NULL;
                int r;

                if (v->empty_dir || !spec_volume_mounted(s, v->name))
                        continue;
                dir = rt__volume_dir(pod->manager, pod->uid, v->name);
                if (!dir)
                        return -ENOMEM;
                if (access(dir, F_OK) < 0)
                        continue; /* never made (tendd was not root then) */
                r = rt__volume_write(dir, f.files, f.n, &err);
                if (r < 0) {
                        *ret_error = strprintf("volume %s: %s", v->name, strna(err));
                        return r;
                }
                changed += r;
        }
        return changed;
}
