/* SPDX-License-Identifier: MIT */

/*
 * Process pods in cgroups of their own (docs/cgroups.md).
 *
 * At start the manager finds the layout once: cgroup v2 (one hierarchy at
 * /sys/fs/cgroup) or v1 (a hierarchy per controller; the hybrid layout too,
 * where v2 holds no controller). Under each hierarchy it keeps a directory
 * of its own, named by its state directory (two tendd on a host keep apart),
 * and each pod gets <that>/<pod uid>: made and limited before the program
 * runs (v2: the child is made in it, clone3; else it joins it between
 * clone() and exec()), searched at the
 * pod's end for what is left of it (a daemon that double-forked out of its
 * session), read for the OOM killer's count, removed when empty.
 *
 * A pod that declares limits where they cannot be enforced (no cgroups,
 * or the controller missing) is refused at apply, with the reason: never
 * started unlimited.
 */

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "rt-internal.h"

#define CG_ROOT "/sys/fs/cgroup"

/* v1: the controllers tend uses, each in whichever hierarchy has it. A pod
 * joins memory's always (its limit, its OOM kills, its usage, and the list
 * of its processes), cpu's only for a limit: each hierarchy joined costs
 * the child a migration between clone() and exec() (30–60 µs here), and a
 * directory made and removed. No freezer (its tree is killed in rounds,
 * docs/cgroups.md). */
static const char *const v1_controllers[] = { "memory", "cpu" };

/* Empty cgroups made ahead on v1 (take_spare()). */
#define CG_SPARES 8

static int write_file(const char *dir, const char *file, const char *value) {
        _cleanup_free_ char *path = strprintf("%s/%s", dir, file);
        _cleanup_close_ int fd = -EBADF;
        size_t len = strlen(value);

        if (!path)
                return -ENOMEM;
        fd = open(path, O_WRONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        ssize_t n = write(fd, value, len);
        if (n < 0)
                return -errno;
        return n == (ssize_t) len ? 0 : -EIO;
}

/* "key N" in a flat keyed file (memory.events, memory.oom_control). */
static uint64_t read_key(const char *dir, const char *file, const char *key) {
        _cleanup_free_ char *path = strprintf("%s/%s", dir, file), *text = NULL;
        size_t klen = strlen(key);

        if (!path || read_full_file(path, 64 * 1024, &text, NULL) < 0)
                return 0;
        for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
                if (strncmp(l, key, klen) == 0 && l[klen] == ' ')
                        return strtoull(l + klen + 1, NULL, 10);
        return 0;
}

/* In a /proc/PID/cgroup text ("ID:controllers:/path" a line), the path of
 * the hierarchy that has controller ("name=systemd" for systemd's own;
 * "" for v2's, whose list is empty): new, NULL if none. */
static char *cgroup_path(const char *text, const char *controller) {
        for (const char *l = text; l && *l;) {
                const char *nl = strchr(l, '\n');
                size_t len = nl ? (size_t) (nl - l) : strlen(l);
                _cleanup_free_ char *line = strndup(l, len);
                char *ctl, *path;
                if (!line)
                        return NULL;
                l = nl ? nl + 1 : NULL;
                if (!(ctl = strchr(line, ':')) || !(path = strchr(ctl + 1, ':')))
                        continue;
                *path++ = 0;
                ctl++;
                if (*controller ? rt__has_word(ctl, controller, ',') : !*ctl)
                        return strdup(path);
        }
        return NULL;
}

/* Whether the host's cgroups are v2 (one hierarchy at /sys/fs/cgroup). */
bool rt__cgroup_v2_host(void) {
        struct statfs sf;

        return statfs(CG_ROOT, &sf) >= 0 && sf.f_type == CGROUP2_SUPER_MAGIC;
}

/* The name of tendd's own directory in each hierarchy: "tend" and a hash
 * of the state directory's path, so that each tendd sweeps only its own. */
static char *base_name(const char *state_dir) {
        _cleanup_free_ char *real = realpath(state_dir, NULL); /* ("/x/" is "/x") */
        uint32_t h = 2166136261u;

        for (const char *s = real ?: state_dir; *s; s++)
                h = (h ^ (uint8_t) *s) * 16777619u;
        return strprintf("tend-%08" PRIx32, h);
}

static int add_base(rt_manager *m, const char *controller, char *dir) {
        if (!dir)
                return -ENOMEM;
        if (m->cg_n >= RT_CG_MAX) {
                free(dir);
                return 0;
        }
        if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
                int r = -errno;
                free(m->cg_why);
                m->cg_why = strprintf("cannot make %s: %s (tendd runs as uid %u: run it as root, "
                                      "or in a cgroup delegated to it)",
                                      dir, strerror(-r), (unsigned) geteuid());
                free(dir);
                return r;
        }
        snprintf(m->cg_ctl[m->cg_n], sizeof m->cg_ctl[0], "%s", controller);
        m->cg_base[m->cg_n++] = dir;
        return 0;
}

/* v1: each controller's hierarchy, from /proc/self/mountinfo (where it is
 * mounted, and the mount's root) and /proc/self/cgroup (tendd's own path
 * in it). */
static int init_v1(rt_manager *m, const char *name) {
        _cleanup_free_ char *cgroups = NULL, *mounts = NULL;
        int r;

        r = read_full_file("/proc/self/cgroup", 64 * 1024, &cgroups, NULL);
        if (r >= 0)
                r = read_full_file("/proc/self/mountinfo", 16 * 1024 * 1024, &mounts, NULL);
        if (r < 0)
                return r;
        for (size_t c = 0; c < ELEMENTSOF(v1_controllers); c++) {
                const char *ctl = v1_controllers[c];
                _cleanup_free_ char *own = NULL, *point = NULL, *root = NULL;

                own = cgroup_path(cgroups, ctl);
                /* "ID PARENT MAJ:MIN ROOT POINT OPTS ... - cgroup SRC SUPEROPTS" */
                for (char *l = mounts; l && *l && own && !point;) {
                        char *nl = strchr(l, '\n');
                        size_t len = nl ? (size_t) (nl - l) : strlen(l);
                        _cleanup_free_ char *line = strndup(l, len);
                        char *f[6] = {}, *save = NULL, *dash;
                        if (!line)
                                return -ENOMEM;
                        dash = strstr(line, " - cgroup ");
                        l = nl ? nl + 1 : NULL;
                        if (!dash)
                                continue;
                        *dash = 0;
                        char *super = strrchr(dash + 1, ' ');
                        if (!super || !rt__has_word(super + 1, ctl, ','))
                                continue;
                        f[0] = strtok_r(line, " ", &save);
                        for (int i = 1; i < 6 && f[i - 1]; i++)
                                f[i] = strtok_r(NULL, " ", &save);
                        /* the mount that shows tendd's own cgroup: its root
                         * is own or above it (a bind mount of a part of the
                         * hierarchy elsewhere is not) */
                        size_t rl = f[3] ? strlen(f[3]) : 0;
                        if (!f[4] || !(streq(f[3], "/") || (strncmp(own, f[3], rl) == 0 &&
                                                            (own[rl] == '/' || !own[rl]))))
                                continue;
                        if (!(point = strdup(f[4])) || !(root = strdup(f[3])))
                                return -ENOMEM;
                }
                if (!own || !point)
                        continue; /* not mounted: without it */
                bool dup = false;
                for (size_t i = 0; i < m->cg_n; i++)
                        dup |= strncmp(m->cg_base[i], point, strlen(point)) == 0 &&
                               m->cg_base[i][strlen(point)] == '/';
                if (dup)
                        continue; /* (cpu,cpuacct mounted together) */
                const char *rel = streq(root, "/") ? own : own + strlen(root);
                char *dir = strprintf("%s%s/%s", point, streq(rel, "/") ? "" : rel, name);
                if (!dir)
                        return -ENOMEM;
                r = add_base(m, ctl, dir);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* A cgroup v2 directory systemd delegated (Delegate=yes): it marks it with
 * the trusted.delegate attribute (user.delegate in a user's manager). */
static bool delegated(const char *dir) {
        char v[8] = {};

        return (getxattr(dir, "trusted.delegate", v, sizeof v - 1) > 0 ||
                getxattr(dir, "user.delegate", v, sizeof v - 1) > 0) &&
               (v[0] == '1' || v[0] == 'y' || v[0] == 't');
}

/* v2: a cgroup that holds processes cannot give controllers to children
 * (a container's namespace root holds tendd too). So pods' cgroups go
 *  - at the root of the hierarchy (tendd started by hand as root), with
 *    the controllers given down;
 *  - beside tendd's own, in the parent that systemd delegated to it and
 *    put tendd below (DelegateSubgroup=, systemd 254), controllers too;
 *  - below tendd's own where that is the delegated one (Delegate=yes alone,
 *    an older systemd): without controllers, which would make it inner
 *    and the next tendd then cannot be started in it; the pods are held
 *    and killed as a tree, and limits are refused with the reason.
 * Anywhere else (a cgroup of systemd's own, such as a login's scope) is
 * not tendd's to write in: none. */
static int init_v2(rt_manager *m, const char *name) {
        _cleanup_free_ char *cgroups = NULL, *available = NULL, *want = NULL, *own = NULL,
                            *parent = NULL;
        const char *top;
        int r;

        r = read_full_file("/proc/self/cgroup", 64 * 1024, &cgroups, NULL);
        if (r < 0)
                return r;
        _cleanup_free_ char *rel = cgroup_path(cgroups, "");
        if (!rel)
                return -ENOENT;
        own = strprintf(CG_ROOT "%s", rel);
        if (!own)
                return -ENOMEM;
        if (!(parent = strdup(own)))
                return -ENOMEM;
        *strrchr(parent, '/') = 0; /* (CG_ROOT for the root, and its children) */
        if (streq(own, CG_ROOT "/")) {
                top = parent;
        } else if (!streq(parent, CG_ROOT) && delegated(parent)) {
                top = parent;
        } else if (delegated(own)) {
                top = own;
                m->cg_limits_why = strprintf(
                        "tendd runs in %s, the cgroup delegated to it, which cannot give "
                        "controllers to pods' cgroups while tendd is in it: put tendd in a "
                        "subgroup (its unit's DelegateSubgroup=supervisor, systemd 254 and "
                        "later)",
                        own);
                if (!m->cg_limits_why)
                        return -ENOMEM;
        } else {
                m->cg_why = strprintf("tendd runs in the cgroup %s, which is not delegated to "
                                      "it: start it at the root of cgroup v2, or as a systemd "
                                      "service with Delegate=yes and DelegateSubgroup=",
                                      own);
                return -EOPNOTSUPP;
        }
        r = add_base(m, "", strprintf("%s/%s", top, name));
        if (r < 0)
                return r;
        if (m->cg_limits_why)
                return 0;
        /* the controllers the pods need, given down to them */
        _cleanup_free_ char *controllers = strprintf("%s/cgroup.controllers", top);
        if (controllers && read_full_file(controllers, 4096, &available, NULL) >= 0)
                available[strcspn(available, "\n")] = 0;
        want = strprintf("%s%s", rt__has_word(available, "memory", ' ') ? "+memory " : "",
                         rt__has_word(available, "cpu", ' ') ? "+cpu" : "");
        if (!want)
                return -ENOMEM;
        if (*want) {
                (void) write_file(top, "cgroup.subtree_control", want);
                (void) write_file(m->cg_base[0], "cgroup.subtree_control", want);
        }
        return 0;
}

static bool v2_has(rt_manager *m, const char *controller) {
        _cleanup_free_ char *path = strprintf("%s/cgroup.subtree_control", m->cg_base[0]),
                            *text = NULL;
        if (!path || read_full_file(path, 4096, &text, NULL) < 0)
                return false;
        text[strcspn(text, "\n")] = 0;
        return rt__has_word(text, controller, ' ');
}

static int v1_index(const rt_manager *m, const char *controller) {
        for (size_t i = 0; i < m->cg_n; i++)
                if (streq(m->cg_ctl[i], controller))
                        return (int) i;
        return -1;
}

/* <state>/cgroups: the bases, one a line, for whoever cleans up after
 * pods killed once tendd is gone (scripts/remove-cgroups.sh). */
static void write_bases(rt_manager *m) {
        _cleanup_free_ char *path = strprintf("%s/cgroups", m->state_dir);
        FILE *f = path ? fopen(path, "we") : NULL;

        if (!f)
                return;
        for (size_t i = 0; i < m->cg_n; i++)
                fprintf(f, "%s\n", m->cg_base[i]);
        fclose(f);
}

static void drop_bases(rt_manager *m) {
        for (size_t i = 0; i < m->cg_n; i++) {
                free(m->cg_base[i]);
                m->cg_base[i] = NULL;
        }
        m->cg_n = 0;
}

void rt__cgroup_init(rt_manager *m, const rt_config *c) {
        struct statfs sf;
        int r;

        m->cg_memory = m->cg_cpu = -1;
        if (c->cgroups == RT_CGROUPS_OFF) {
                m->cg_why = strdup("tendd was started with --cgroups off");
                log_info("cgroups: off (--cgroups off): pods that declare resources.limits are "
                         "refused");
                return;
        }
        m->cg_name = base_name(m->state_dir);
        if (!m->cg_name)
                return;
        if (statfs(CG_ROOT, &sf) < 0) {
                r = -errno;
                m->cg_why = strprintf("%s: %s", CG_ROOT, strerror(-r));
        } else if (sf.f_type == CGROUP2_SUPER_MAGIC) {
                m->cg_layout = RT_CG_V2;
                r = init_v2(m, m->cg_name);
        } else {
                m->cg_layout = RT_CG_V1;
                r = init_v1(m, m->cg_name);
                if (r >= 0 && m->cg_n == 0) {
                        m->cg_why = strdup("no cgroup v1 hierarchy of memory or cpu is mounted");
                        r = -ENOENT;
                }
        }
        if (r < 0) {
                drop_bases(m);
                m->cg_layout = RT_CG_NONE;
                if (!m->cg_why)
                        m->cg_why = strprintf("finding the cgroup layout: %s", strerror(-r));
                log_warning("cgroups: none: %s; pods run without a cgroup of their own, and pods "
                            "that declare resources.limits are refused",
                            m->cg_why);
                return;
        }
        if (m->cg_layout == RT_CG_V2) {
                m->cg_memory = v2_has(m, "memory") ? 0 : -1;
                m->cg_cpu = v2_has(m, "cpu") ? 0 : -1;
                write_bases(m);
                if (m->cg_limits_why)
                        log_info("cgroups: v2; pods' cgroups under %s (no controllers: %s)",
                                 m->cg_base[0], m->cg_limits_why);
                else
                        log_info("cgroups: v2; pods' cgroups under %s (controllers:%s%s%s)",
                                 m->cg_base[0], m->cg_memory >= 0 ? " memory" : "",
                                 m->cg_cpu >= 0 ? " cpu" : "",
                                 m->cg_memory < 0 && m->cg_cpu < 0 ? " none" : "");
                return;
        }
        m->cg_memory = v1_index(m, "memory");
        m->cg_cpu = v1_index(m, "cpu");
        write_bases(m);
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(256);
        for (size_t i = 0; i < m->cg_n; i++)
                (void) tend_buf_addf(&b, "%s%s", i ? ", " : "", m->cg_base[i]);
        log_info("cgroups: v1; pods' cgroups under %s", tend_buf_str(&b));
}

void rt__cgroup_close(rt_manager *m) {
        /* the empty ones, and tendd's own if no pod runs on in it */
        rt__cgroup_sweep(m);
        for (size_t i = 0; i < m->cg_n; i++)
                (void) rmdir(m->cg_base[i]);
        drop_bases(m);
        free(m->cg_why);
        m->cg_why = NULL;
        free(m->cg_limits_why);
        m->cg_limits_why = NULL;
        free(m->cg_name);
        m->cg_name = NULL;
        strv_free(m->cg_trash);
        m->cg_trash = NULL;
}

const char *rt__cgroup_limits_problem(rt_manager *m, bool memory, bool cpu, char **ret) {
        const char *what = memory && m->cg_memory < 0 ? "memory"
                           : cpu && m->cg_cpu < 0     ? "cpu"
                                                      : NULL;

        *ret = NULL;
        if (!what)
                return NULL;
        if (m->cg_layout == RT_CG_NONE)
                *ret = strprintf("limits.%s cannot be enforced: tendd has no cgroups (%s)", what,
                                 strna(m->cg_why));
        else if (m->cg_limits_why)
                *ret = strprintf("limits.%s cannot be enforced: %s", what, m->cg_limits_why);
        else
                *ret = strprintf("limits.%s cannot be enforced: the %s controller is not "
                                 "available to tendd in this host's cgroup %s layout",
                                 what, what, m->cg_layout == RT_CG_V2 ? "v2" : "v1");
        return *ret;
}

/* The hierarchy every pod joins (v1: memory's where it is mounted). */
static size_t primary(const rt_manager *m) {
        return m->cg_memory >= 0 ? (size_t) m->cg_memory : 0;
}

/* The hierarchies a pod of these limits joins: a bit each. */
static unsigned pod_mask(const rt_manager *m, uint64_t cpu_milli) {
        unsigned mask = 1u << primary(m);

        if (cpu_milli > 0 && m->cg_cpu >= 0)
                mask |= 1u << m->cg_cpu;
        return mask;
}

static char *pod_dir(const rt_manager *m, size_t i, const char *uid) {
        return strprintf("%s/%s", m->cg_base[i], uid);
}

/* v1: a spare cgroup made ahead (rt__cgroup_tidy()), renamed to the pod's:
 * a rename is ~10 µs here, the mkdir of a memory cgroup ~50 µs, on the way
 * from a pod's death to its replacement. */
static bool take_spare(rt_manager *m, size_t i, const char *dir) {
        char spare[PATH_MAX];

        if (m->cg_layout != RT_CG_V1 || i != primary(m) || m->cg_spare_lo == m->cg_spare_hi)
                return false;
        snprintf(spare, sizeof spare, "%s/spare-%u", m->cg_base[i], m->cg_spare_lo++);
        if (rename(spare, dir) == 0)
                return true;
        if (errno == EEXIST || errno == ENOTEMPTY)
                m->cg_spare_lo--; /* (the pod's is there: kept for the next) */
        return false;             /* (else that one is gone: the next spare's next) */
}

static uint64_t oom_count(rt_pod *p) {
        rt_manager *m = p->manager;
        _cleanup_free_ char *dir = NULL;

        if (!p->cg || m->cg_memory < 0 || !(p->cg_mask & (1u << m->cg_memory)) ||
            !(dir = pod_dir(m, (size_t) m->cg_memory, p->uid)))
                return 0;
        return m->cg_layout == RT_CG_V2 ? read_key(dir, "memory.events", "oom_kill")
                                        : read_key(dir, "memory.oom_control", "oom_kill");
}

static int set_limits(rt_pod *p, char **ret_error) {
        rt_manager *m = p->manager;
        char v[64];
        int r;

        if ((p->memory_max > 0 && m->cg_memory < 0) || (p->cpu_milli > 0 && m->cg_cpu < 0)) {
                *ret_error = strdup("its limits cannot be enforced here (no such controller)");
                return -EOPNOTSUPP;
        }
        if (p->memory_max > 0) {
                _cleanup_free_ char *dir = pod_dir(m, (size_t) m->cg_memory, p->uid);
                if (!dir)
                        return -ENOMEM;
                snprintf(v, sizeof v, "%" PRIu64, p->memory_max);
                if (m->cg_layout == RT_CG_V2) {
                        r = write_file(dir, "memory.max", v);
                        /* swap included, as Kubernetes does */
                        if (r >= 0)
                                (void) write_file(dir, "memory.swap.max", "0");
                } else {
                        /* memsw (memory + swap) after memory: never below it */
                        (void) write_file(dir, "memory.memsw.limit_in_bytes", "-1");
                        r = write_file(dir, "memory.limit_in_bytes", v);
                        if (r >= 0)
                                (void) write_file(dir, "memory.memsw.limit_in_bytes", v);
                }
                if (r < 0) {
                        *ret_error = strprintf("setting limits.memory (%s bytes) in %s: %s", v, dir,
                                               strerror(-r));
                        return r;
                }
        }
        if (p->cpu_milli > 0) {
                _cleanup_free_ char *dir = pod_dir(m, (size_t) m->cg_cpu, p->uid);
                /* a 100 ms period; the kernel's least quota is 1 ms (10m) */
                uint64_t quota = MAX(p->cpu_milli * 100, (uint64_t) 1000);
                if (!dir)
                        return -ENOMEM;
                if (m->cg_layout == RT_CG_V2) {
                        snprintf(v, sizeof v, "%" PRIu64 " 100000", quota);
                        r = write_file(dir, "cpu.max", v);
                } else {
                        r = write_file(dir, "cpu.cfs_period_us", "100000");
                        snprintf(v, sizeof v, "%" PRIu64, quota);
                        if (r >= 0)
                                r = write_file(dir, "cpu.cfs_quota_us", v);
                }
                if (r < 0) {
                        *ret_error = strprintf("setting limits.cpu (%" PRIu64 "m) in %s: %s",
                                               p->cpu_milli, dir, strerror(-r));
                        return r;
                }
        }
        return 0;
}

int rt__cgroup_prepare(rt_pod *p, char ***ret_procs, char **ret_v2_dir, char **ret_error) {
        rt_manager *m = p->manager;
        _cleanup_strv_free_ char **procs = NULL;
        bool existed = false;
        int r;

        *ret_procs = NULL;
        *ret_v2_dir = NULL;
        if (m->cg_layout == RT_CG_NONE)
                return 0;
        /* (a restart in place: the same uid, its cgroup kept, not removed
         * under it) */
        for (size_t i = 0; m->cg_trash && m->cg_trash[i]; i++)
                if (streq(m->cg_trash[i], p->uid)) {
                        free(m->cg_trash[i]);
                        memmove(m->cg_trash + i, m->cg_trash + i + 1,
                                (strv_length(m->cg_trash + i + 1) + 1) * sizeof(char *));
                        break;
                }
        p->cg = true; /* (what a failure below made is removed) */
        p->cg_mask = pod_mask(m, p->cpu_milli);
        for (size_t i = 0; i < m->cg_n; i++) {
                if (!(p->cg_mask & (1u << i)))
                        continue;
                _cleanup_free_ char *dir = pod_dir(m, i, p->uid), *path = NULL;
                if (!dir || !(path = strprintf("%s/cgroup.procs", dir)) ||
                    strv_extend(&procs, path) < 0) {
                        r = -ENOMEM;
                        goto fail;
                }
                if (take_spare(m, i, dir) || mkdir(dir, 0755) == 0)
                        continue;
                if (errno != EEXIST) {
                        r = -errno;
                        *ret_error = strprintf("making the pod's cgroup %s: %s", dir, strerror(-r));
                        goto fail;
                }
                existed = true;
        }
        r = set_limits(p, ret_error);
        if (r < 0)
                goto fail;
        /* (a cgroup made now has killed nothing: no read on the way) */
        p->cg_oom = existed ? oom_count(p) : 0;
        if (m->cg_layout == RT_CG_V2 && !(*ret_v2_dir = pod_dir(m, 0, p->uid))) {
                r = -ENOMEM;
                goto fail;
        }
        *ret_procs = TAKE_PTR(procs);
        return 0;
fail:
        rt__cgroup_remove(p);
        return r;
}

static int read_number(const char *dir, const char *file, uint64_t *ret) {
        _cleanup_free_ char *path = strprintf("%s/%s", dir, file), *text = NULL;
        int r;

        if (!path)
                return -ENOMEM;
        r = read_full_file(path, 4096, &text, NULL);
        if (r < 0)
                return r;
        *ret = strtoull(text, NULL, 10);
        return 0;
}

/* The pids a cgroup.procs file lists now; *ret_n of them (*ret: new). */
static int read_pids(const char *procs, pid_t **ret, size_t *ret_n) {
        _cleanup_free_ char *text = NULL;
        _cleanup_free_ pid_t *v = NULL;
        size_t n = 0, alloc = 0;
        int r;

        r = read_full_file(procs, 4 * 1024 * 1024, &text, NULL);
        if (r < 0)
                return r;
        for (char *l = text, *end; *l; l = end) {
                long pid = strtol(l, &end, 10);
                if (end == l || pid <= 0)
                        break;
                if (TEND_GROW(v, alloc, n + 1) < 0)
                        return -ENOMEM;
                v[n++] = (pid_t) pid;
        }
        *ret = TAKE_PTR(v);
        *ret_n = n;
        return 0;
}

/* memory: the working set, as the kubelet counts it (what is in use less
 * the page cache that could be dropped) */
static int working_set(const char *dir, bool v2, uint64_t *ret) {
        uint64_t used, inactive;
        int r;

        r = read_number(dir, v2 ? "memory.current" : "memory.usage_in_bytes", &used);
        if (r < 0)
                return r;
        inactive = v2 ? read_key(dir, "memory.stat", "inactive_file")
                      : read_key(dir, "memory.stat", "total_inactive_file");
        *ret = used > inactive ? used - inactive : 0;
        return 0;
}

/* The CPU time (and resident memory) of every process a cgroup.procs
 * lists now: where no controller counts them. */
static int procs_usage(const char *procs, uint64_t *ret_cpu_ns, uint64_t *ret_rss) {
        _cleanup_free_ pid_t *pids = NULL;
        long page = sysconf(_SC_PAGESIZE);
        uint64_t ticks = 0, pages = 0;
        size_t n;
        int r;

        r = read_pids(procs, &pids, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                unsigned long long f[11]; /* utime stime cutime cstime ... rss */
                if (proc_stat_fields(pids[i], 14, 24, f) >= 0) {
                        ticks += f[0] + f[1] + f[2] + f[3];
                        pages += f[10];
                }
        }
        *ret_cpu_ns = clock_ticks_ns(ticks);
        if (ret_rss)
                *ret_rss = pages * (uint64_t) (page > 0 ? page : 4096);
        return 0;
}

/* What no controller counted (have_cpu, have_mem false), from the
 * processes a cgroup.procs lists. */
static int fill_from_procs(const char *procs, bool have_cpu, bool have_mem, uint64_t *ret_cpu_ns,
                           uint64_t *ret_memory) {
        uint64_t cpu_ns, rss;
        int r;

        if (have_cpu && have_mem)
                return 0;
        if (!procs)
                return -ENOMEM;
        r = procs_usage(procs, &cpu_ns, &rss);
        if (r < 0)
                return r;
        if (!have_cpu)
                *ret_cpu_ns = cpu_ns;
        if (!have_mem)
                *ret_memory = rss;
        return 0;
}

/* A systemd pod's: its unit's cgroup, where systemd made one (the unit's
 * path below tend.slice, from its main process's /proc/PID/cgroup), read
 * as a process pod's; a controller systemd does not run for the unit (a
 * user manager on cgroup v1 has none) is summed over its processes. */
static int unit_usage(pid_t pid, uint64_t *ret_cpu_ns, uint64_t *ret_memory) {
        _cleanup_free_ char *path = strprintf("/proc/%d/cgroup", (int) pid), *text = NULL,
                            *unit = NULL, *mem = NULL, *acct = NULL, *dir = NULL, *procs = NULL;
        bool in_v2 = false, have_cpu = false, have_mem = false;
        int r;

        if (pid <= 0)
                return -ENOENT;
        if (!path)
                return -ENOMEM;
        r = read_full_file(path, 64 * 1024, &text, NULL);
        if (r < 0)
                return r;
        /* the unit's path: systemd's hierarchy's, else v2's */
        unit = cgroup_path(text, "name=systemd");
        if (!unit) {
                unit = cgroup_path(text, "");
                in_v2 = true;
        }
        if (!unit || !strstr(unit, "/tend.slice/") || !endswith(unit, ".service"))
                return -ENOENT; /* (not a systemd pod's) */
        if (rt__cgroup_v2_host()) {
                if (!(dir = strprintf(CG_ROOT "%s", unit)))
                        return -ENOMEM;
                have_mem = working_set(dir, true, ret_memory) >= 0;
                *ret_cpu_ns = read_key(dir, "cpu.stat", "usage_usec") * 1000;
                have_cpu = true;
                procs = strprintf("%s/cgroup.procs", dir);
        } else {
                /* the controllers that have the unit's own cgroup */
                _cleanup_free_ char *in_mem = cgroup_path(text, "memory"),
                                    *in_acct = cgroup_path(text, "cpuacct");
                if (streq_ptr(in_mem, unit) && !(mem = strprintf(CG_ROOT "/memory%s", unit)))
                        return -ENOMEM;
                if (streq_ptr(in_acct, unit) && !(acct = strprintf(CG_ROOT "/cpuacct%s", unit)))
                        return -ENOMEM;
                have_mem = mem && working_set(mem, false, ret_memory) >= 0;
                have_cpu = acct && read_number(acct, "cpuacct.usage", ret_cpu_ns) >= 0;
                procs = strprintf(CG_ROOT "/%s%s/cgroup.procs", in_v2 ? "unified" : "systemd",
                                  unit);
        }
        return fill_from_procs(procs, have_cpu, have_mem, ret_cpu_ns, ret_memory);
}

int rt__cgroup_usage(rt_manager *m, const char *uid, pid_t pid, uint64_t *ret_cpu_ns,
                     uint64_t *ret_memory) {
        _cleanup_free_ char *dir = NULL, *procs = NULL, *cpu = NULL;
        bool v2 = m->cg_layout == RT_CG_V2, have_cpu = false, have_mem;

        if (m->cg_layout == RT_CG_NONE || !uid)
                return unit_usage(pid, ret_cpu_ns, ret_memory);
        dir = pod_dir(m, primary(m), uid);
        procs = dir ? strprintf("%s/cgroup.procs", dir) : NULL;
        if (!procs)
                return -ENOMEM;
        if (access(procs, F_OK) < 0)
                return unit_usage(pid, ret_cpu_ns, ret_memory); /* (not a process pod's) */
        /* memory: the working set, where the controller counts it. CPU:
         * v2's cpu.stat (there without the controller too); v1's
         * cpuacct.usage where the pod is in cpu's hierarchy and cpuacct
         * shares it. Else what its processes say now. */
        have_mem = m->cg_memory >= 0 && working_set(dir, v2, ret_memory) >= 0;
        if (v2) {
                *ret_cpu_ns = read_key(dir, "cpu.stat", "usage_usec") * 1000;
                have_cpu = true;
        } else if (m->cg_cpu >= 0 && m->cg_cpu != m->cg_memory &&
                   (cpu = pod_dir(m, (size_t) m->cg_cpu, uid)))
                have_cpu = read_number(cpu, "cpuacct.usage", ret_cpu_ns) >= 0;
        return fill_from_procs(procs, have_cpu, have_mem, ret_cpu_ns, ret_memory);
}

void rt__cgroup_adopt(rt_pod *p) {
        rt_manager *m = p->manager;
        _cleanup_free_ char *path = NULL, *text = NULL, *tail = NULL;

        if (m->cg_layout == RT_CG_NONE || p->record.pid <= 0)
                return;
        path = strprintf("/proc/%d/cgroup", (int) p->record.pid);
        tail = strprintf("/%s\n", p->uid);
        if (!path || !tail || read_full_file(path, 64 * 1024, &text, NULL) < 0)
                return;
        /* in its own cgroup if any of its lines ends in its uid, and that
         * is under this tendd's bases (as it was started) */
        p->cg = strstr(text, tail) != NULL;
        p->cg_mask = 0;
        for (size_t i = 0; p->cg && i < m->cg_n; i++) {
                _cleanup_free_ char *dir = pod_dir(m, i, p->uid);
                if (dir && access(dir, F_OK) == 0)
                        p->cg_mask |= 1u << i;
        }
        p->cg = p->cg && (p->cg_mask & (1u << primary(m)));
        if (p->cg)
                p->cg_oom = oom_count(p); /* (earlier kills were before this tendd) */
}

char *rt__cgroup_uid_of(rt_manager *m, pid_t pid) {
        _cleanup_free_ char *path = strprintf("/proc/%d/cgroup", (int) pid), *text = NULL,
                            *mid = m->cg_name ? strprintf("/%s/", m->cg_name) : NULL;

        if (m->cg_layout == RT_CG_NONE || !path || !mid ||
            read_full_file(path, 64 * 1024, &text, NULL) < 0)
                return NULL;
        /* a line ".../tend-<hash>/<uid>": a pod's of this tendd */
        for (char *at = strstr(text, mid); at; at = strstr(at + 1, mid)) {
                const char *uid = at + strlen(mid);
                size_t len = strcspn(uid, "/\n");
                if (len > 0 && (uid[len] == '\n' || !uid[len]))
                        return strndup(uid, len);
        }
        return NULL;
}

bool rt__cgroup_oom_killed(rt_pod *p) {
        return p->cg && oom_count(p) > p->cg_oom;
}

/* Kills every process left in the pod's cgroup: v2 with cgroup.kill
 * (Linux 5.14); else in rounds, until none is left. A process forked
 * between a round's read and its kills is in the next round's read. */
void rt__cgroup_kill(rt_pod *p) {
        rt_manager *m = p->manager;
        _cleanup_free_ char *dir = NULL, *procs = NULL;

        if (!p->cg || !(dir = pod_dir(m, primary(m), p->uid)) ||
            !(procs = strprintf("%s/cgroup.procs", dir)))
                return;
        if (m->cg_layout == RT_CG_V2 && write_file(dir, "cgroup.kill", "1") >= 0)
                return;
        for (int round = 0; round < 16; round++) {
                _cleanup_free_ pid_t *pids = NULL;
                size_t n, killed = 0;
                if (read_pids(procs, &pids, &n) < 0)
                        break;
                for (size_t i = 0; i < n; i++)
                        killed += kill(pids[i], SIGKILL) == 0;
                if (killed == 0)
                        break; /* (mostly at once: nothing is left) */
        }
}

static bool remove_dirs(rt_manager *m, const char *uid) {
        bool all = true;

        for (size_t i = 0; i < m->cg_n; i++) {
                _cleanup_free_ char *dir = pod_dir(m, i, uid);
                if (dir && rmdir(dir) < 0 && errno != ENOENT)
                        all = false;
        }
        return all;
}

/* Removed at the next reap (the caller asks for one soon: 5 ms after a
 * death), or log check: not on the way of the pass that replaces the pod,
 * and its killed processes reaped by then. */
void rt__cgroup_remove(rt_pod *p) {
        rt_manager *m = p->manager;

        if (!p->cg)
                return;
        p->cg = false;
        if (!strv_contains(m->cg_trash, p->uid))
                (void) strv_extend(&m->cg_trash, p->uid);
}

void rt__cgroup_tidy(rt_manager *m) {
        size_t k = 0;

        /* spares for the next pods, out of their way (v1: a cgroup can be
         * renamed there, not on v2) */
        while (m->cg_layout == RT_CG_V1 && m->cg_spare_hi - m->cg_spare_lo < CG_SPARES) {
                char dir[PATH_MAX];
                snprintf(dir, sizeof dir, "%s/spare-%u", m->cg_base[primary(m)], m->cg_spare_hi);
                if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                        break;
                m->cg_spare_hi++;
        }

        for (size_t i = 0; m->cg_trash && m->cg_trash[i]; i++) {
                if (remove_dirs(m, m->cg_trash[i]))
                        free(m->cg_trash[i]);
                else
                        m->cg_trash[k++] = m->cg_trash[i];
        }
        if (m->cg_trash)
                m->cg_trash[k] = NULL;
}

void rt__cgroup_sweep(rt_manager *m) {
        _cleanup_(tend_hashmap_freep) tend_hashmap *live = tend_hashmap_new();

        if (!live)
                return;
        for (rt_pod *p = m->pods; p; p = p->next)
                if (p->cg && tend_hashmap_put(live, p->uid, p, NULL) < 0)
                        return;
        for (size_t i = 0; i < m->cg_n; i++) {
                DIR *d = opendir(m->cg_base[i]);
                struct dirent *de;
                if (!d)
                        continue;
                /* an empty one is removed; one with processes is not
                 * (rmdir refuses), nor anything of a live pod */
                while ((de = readdir(d)))
                        if (de->d_type == DT_DIR && de->d_name[0] != '.' &&
                            !tend_hashmap_get(live, de->d_name))
                                (void) unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
                closedir(d);
        }
        m->cg_spare_lo = m->cg_spare_hi; /* (the spares too) */
}
