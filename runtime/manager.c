/* SPDX-License-Identifier: MIT */

/*
 * The manager and the backend-independent half of a pod: argv and
 * environment, ports, log files, probes, callbacks, and lifetimes.
 */

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <systemd/sd-daemon.h>

#include "rt-internal.h"

/* ---- lifetimes ------------------------------------------------------------------------- */

void rt__manager_ref(rt_manager *m) {
        m->refs++;
}

static void manager_free(rt_manager *m) {
        rt__curl_close(m);
        if (m->spawn_stack)
                munmap(m->spawn_stack, m->spawn_stack_size);
        free(m->known_pids);
        tend_hashmap_free(m->detached);
        if (m->escapees) {
                const char *k;
                void *v;
                for (size_t i = 0; tend_hashmap_next(m->escapees, &i, &k, &v);)
                        free(v);
                tend_hashmap_free(m->escapees);
        }
        rt__log_spares_free(m);
        free(m->state_dir);
        free(m);
}

void rt__manager_unref(rt_manager *m) {
        if (--m->refs == 0)
                manager_free(m);
}

static void manager_handle_closed(uv_handle_t *h) {
        rt__manager_unref(h->data);
}

rt_pod *rt__pod_ref(rt_pod *p) {
        p->refs++;
        return p;
}

static void pod_free_now(rt_pod *p) {
        rt_manager *m = p->manager;

        safe_close(p->pidfd); /* normally closed with the poll handle already */
        safe_close(p->log_fd);
        free(p->namespace);
        free(p->name);
        free(p->uid);
        free(p->container);
        free(p->container_id);
        free(p->path);
        strv_free(p->argv);
        strv_free(p->envp);
        free(p->working_dir);
        free(p->description);
        free(p->sd_path);
        free(p->sd_job);
        free(p->sd_active_state);
        free(p->sd_result);
        rt_record_done(&p->record);
        free(p);
        rt__manager_unref(m);
}

void rt__pod_unref(rt_pod *p) {
        if (--p->refs == 0)
                pod_free_now(p);
}

/* ---- the pid set ------------------------------------------------------------------------- */

/* Open addressing with linear probing; 0 = empty, -1 = tombstone. Pids are
 * added at spawn and removed when reaped, so the set stays as small as the
 * number of live pods and probes. */
#define TOMBSTONE ((pid_t) -1)

static size_t pid_slot(pid_t pid, size_t alloc) {
        return ((size_t) pid * 2654435761u) & (alloc - 1);
}

static int pid_rehash(rt_manager *m, size_t alloc) {
        pid_t *n = new0(pid_t, alloc), *old = m->known_pids;
        size_t old_alloc = m->known_alloc;

        if (!n)
                return -ENOMEM;
        m->known_pids = n;
        m->known_alloc = alloc;
        m->known_n = m->known_tombstones = 0;
        for (size_t i = 0; i < old_alloc; i++)
                if (old[i] > 0) {
                        size_t k = pid_slot(old[i], alloc);
                        while (n[k])
                                k = (k + 1) & (alloc - 1);
                        n[k] = old[i];
                        m->known_n++;
                }
        free(old);
        return 0;
}

static ssize_t pid_find(rt_manager *m, pid_t pid);

int rt__pid_add(rt_manager *m, pid_t pid) {
        size_t k;

        if (pid_find(m, pid) >= 0)
                return 0;
        if ((m->known_n + m->known_tombstones + 1) * 2 > m->known_alloc) {
                int r = pid_rehash(m,
                                   MAX(m->known_alloc * (m->known_n * 4 > m->known_alloc ? 2 : 1),
                                       (size_t) 64));
                if (r < 0)
                        return r;
        }
        k = pid_slot(pid, m->known_alloc);
        while (m->known_pids[k] > 0)
                k = (k + 1) & (m->known_alloc - 1);
        if (m->known_pids[k] == TOMBSTONE)
                m->known_tombstones--;
        m->known_pids[k] = pid;
        m->known_n++;
        return 0;
}

static ssize_t pid_find(rt_manager *m, pid_t pid) {
        if (m->known_alloc == 0)
                return -1;
        for (size_t k = pid_slot(pid, m->known_alloc), i = 0; i < m->known_alloc;
             k = (k + 1) & (m->known_alloc - 1), i++) {
                if (m->known_pids[k] == 0)
                        return -1;
                if (m->known_pids[k] == pid)
                        return (ssize_t) k;
        }
        return -1;
}

bool rt__pid_known(rt_manager *m, pid_t pid) {
        return pid_find(m, pid) >= 0;
}

void rt__pid_remove(rt_manager *m, pid_t pid) {
        ssize_t k = pid_find(m, pid);
        if (k < 0)
                return;
        m->known_pids[k] = TOMBSTONE;
        m->known_n--;
        m->known_tombstones++;
}

/* ---- orphans ------------------------------------------------------------------------------ */

/* A SIGKILL already pending (its group was killed a moment ago, and it is
 * still on its way out): nothing to do, nothing to say. */
static bool being_killed(pid_t pid) {
        _cleanup_free_ char *status = NULL;
        char path[64];

        snprintf(path, sizeof path, "/proc/%d/status", (int) pid);
        if (read_full_file(path, 16 * 1024, &status, NULL) < 0)
                return true; /* gone */
        /* pending for the whole process (a group kill), or for its thread */
        static const char *const keys[] = { "\nShdPnd:", "\nSigPnd:" };
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                const char *v = strstr(status, keys[i]);
                unsigned long long mask;
                if (v && sscanf(v + strlen(keys[i]), "%llx", &mask) == 1 &&
                    (mask & (1ULL << (SIGKILL - 1))))
                        return true;
        }
        return false;
}

static bool pod_lives(rt_manager *m, const char *uid) {
        /* Detached (rt_pod_free() of a running pod): left to run, for the
         * next agent to adopt, with whatever belongs to it. */
        if (m->closing || (m->detached && tend_hashmap_get(m->detached, uid)))
                return true;
        for (rt_pod *p = m->pods; p; p = p->next)
                if (p->state != RT_POD_EXITED && streq_ptr(p->uid, uid))
                        return true;
        return false;
}

/* A live child we did not spawn is a pod's escapee: it left the pod's
 * session (setsid(), a daemon's double fork) and, its parent dead, came to
 * us. While its pod lives it may; once its pod is gone it goes too, as
 * everything in a container goes with it. It is our child and not reaped,
 * so its pid (and the group it may lead) cannot be anyone else's. */
static void kill_escapee(rt_manager *m, pid_t pid, bool pods_ended) {
        char key[24], path[64];
        const char *uid;
        _cleanup_free_ char *comm = NULL;

        /* Its POD_UID is read once (it is our child and unreaped: the pid
         * is its own until we reap it); then only a pod's end can change
         * the verdict. */
        snprintf(key, sizeof key, "%d", (int) pid);
        uid = m->escapees ? tend_hashmap_get(m->escapees, key) : NULL;
        if (uid && !pods_ended)
                return;
        if (!uid) {
                char *u = rt__process_getenv(pid, "POD_UID");
                if (!m->escapees && !(m->escapees = tend_hashmap_new())) {
                        free(u);
                        return;
                }
                if (tend_hashmap_put(m->escapees, key, u ?: strdup(""), NULL) < 0) {
                        free(u);
                        return;
                }
                uid = tend_hashmap_get(m->escapees, key);
        }
        if (isempty(uid) || pod_lives(m, uid) || being_killed(pid))
                return;
        snprintf(path, sizeof path, "/proc/%d/comm", (int) pid);
        (void) read_full_file(path, 64, &comm, NULL);
        if (comm)
                comm[strcspn(comm, "\n")] = 0;
        log_info("pid %d (%s) outlived its pod (POD_UID=%s), outside the pod's process group; "
                 "killing it",
                 (int) pid, strna(comm), uid);
        (void) kill(-pid, SIGKILL); /* its own group, if it leads one */
        (void) kill(pid, SIGKILL);
}

/*
 * As a child subreaper, processes orphaned inside pods (a daemonizing
 * grandchild) are re-parented to us and become our zombies when they die.
 * libuv reaps only what uv_spawn() started, and a waitpid(-1) would steal the
 * exit status of our own pods, so we list our children and reap only those
 * we did not spawn. Children of the agent are few (its pods and probes), so
 * this stays cheap even for a burst of SIGCHLDs. Those that still run are
 * escapees (kill_escapee()).
 */
static void reap_orphans(rt_manager *m) {
        _cleanup_free_ char *buf = NULL;
        size_t n = 0;
        char path[320];
        DIR *d;
        struct dirent *de;
        bool pods_ended = m->pods_ended;

        m->pods_ended = false;
        d = opendir("/proc/self/task");
        if (!d)
                return;
        while ((de = readdir(d))) {
                _cleanup_free_ char *children = NULL;
                if (de->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof path, "/proc/self/task/%s/children", de->d_name);
                if (read_full_file(path, 4 * 1024 * 1024, &children, &n) < 0)
                        continue;
                for (char *p = children, *save = NULL, *tok; (tok = strtok_r(p, " \n", &save));
                     p = NULL) {
                        int64_t v;
                        siginfo_t si = {};
                        if (safe_atoi64(tok, &v) < 0 || v <= 0 || rt__pid_known(m, (pid_t) v))
                                continue;
                        /* WNOHANG: a live orphan stays; a zombie is reaped. */
                        if (waitid(P_PID, (id_t) v, &si, WEXITED | WNOHANG) < 0)
                                continue;
                        if (si.si_pid == 0)
                                kill_escapee(m, (pid_t) v, pods_ended);
                        else if (m->escapees)
                                free(tend_hashmap_remove(m->escapees, tok));
                }
        }
        closedir(d);
}

/* Reaping waits a few milliseconds: SIGCHLD comes with every pod's death,
 * and the death's replacement must not wait for a walk of our children (a
 * mass death is one walk). */
#define REAP_DELAY_MS 5

static void on_reap_timer(uv_timer_t *t) {
        reap_orphans(t->data);
}

void rt__manager_reap_soon(rt_manager *m) {
        if (m->closing || uv_is_active((uv_handle_t *) &m->reap_timer))
                return;
        uv_timer_start(&m->reap_timer, on_reap_timer, REAP_DELAY_MS, 0);
}

static void on_sigchld(uv_signal_t *h, int sig) {
        rt__manager_reap_soon(h->data);
}

/* Start-up, after adoption: a process of ours — its output goes to a pod log
 * under our state dir, it carries a POD_UID — that no watched pod accounts
 * for was started by an agent that died before it recorded it (process
 * pods are spawned before their pass is committed: agent.c). Its pod was
 * never written, or was written but not as running: either way, if it
 * runs on, the pod's replacement (or its start) runs beside it. So it goes.
 * Processes of systemd units are the unit sweep's. Scans /proc once. */
void rt_manager_sweep_orphan_processes(rt_manager *m) {
        _cleanup_free_ char *base = NULL, *prefix = NULL;
        DIR *d;
        struct dirent *de;

        base = realpath(m->state_dir, NULL);
        prefix = base ? strprintf("%s/pods/", base) : NULL;
        if (!prefix)
                return;
        d = opendir("/proc");
        if (!d)
                return;
        while ((de = readdir(d))) {
                _cleanup_free_ char *uid = NULL, *cgroup = NULL, *comm = NULL;
                char path[64], target[PATH_MAX];
                ssize_t n = -1;
                int64_t pid;
                bool ours = false;

                if (safe_atoi64(de->d_name, &pid) < 0 || pid <= 1 || pid == getpid())
                        continue;
                for (int fd = 1; fd <= 2 && !ours; fd++) {
                        snprintf(path, sizeof path, "/proc/%d/fd/%d", (int) pid, fd);
                        n = readlink(path, target, sizeof target - 1);
                        if (n > 0) {
                                target[n] = 0;
                                ours = startswith(target, prefix) != NULL;
                        }
                }
                if (!ours || !(uid = rt__process_getenv((pid_t) pid, "POD_UID")) ||
                    pod_lives(m, uid))
                        continue;
                snprintf(path, sizeof path, "/proc/%d/cgroup", (int) pid);
                if (read_full_file(path, 64 * 1024, &cgroup, NULL) >= 0 &&
                    strstr(cgroup, "/tend-") && strstr(cgroup, ".service"))
                        continue;
                snprintf(path, sizeof path, "/proc/%d/comm", (int) pid);
                (void) read_full_file(path, 64, &comm, NULL);
                if (comm)
                        comm[strcspn(comm, "\n")] = 0;
                log_warning("pid %d (%s) runs for no pod (POD_UID=%s; an agent died before it "
                            "recorded it): killing it",
                            (int) pid, strna(comm), uid);
                (void) kill(-(pid_t) pid, SIGKILL); /* its group, if it leads one */
                (void) kill((pid_t) pid, SIGKILL);
        }
        closedir(d);
}

/* ---- deferred `started` ------------------------------------------------------------------- */

/* `started`, then — for a pod without a readiness probe, which is ready
 * as soon as it runs — the readiness transition. */
static void report_started(rt_pod *p) {
        rt_manager *m = p->manager;

        if (p->freed)
                return;
        if (m->cb.started)
                m->cb.started(p, m->userdata);
        if (!p->freed && !p->probes[RT_PROBE_READINESS] && !p->ready) {
                p->ready = true;
                if (m->cb.probe)
                        m->cb.probe(p, RT_PROBE_READINESS, true, NULL, m->userdata);
        }
}

static void on_deferred(uv_idle_t *h) {
        rt_manager *m = h->data;

        /* Callbacks may queue more; the loop takes those too. */
        while (m->deferred) {
                rt_pod *p = m->deferred;
                bool due = p->started_queued;

                m->deferred = p->deferred_next;
                if (!m->deferred)
                        m->deferred_tail = NULL;
                p->deferred_next = NULL;
                p->started_queued = false;
                if (due && p->state != RT_POD_EXITED)
                        report_started(p);
                rt__pod_unref(p);
        }
        uv_idle_stop(h);
}

void rt__pod_started(rt_pod *p) {
        rt_manager *m = p->manager;

        if (p->state == RT_POD_STARTING)
                p->state = RT_POD_RUNNING;
        if (p->started_queued)
                return;
        p->started_queued = true;
        rt__pod_ref(p);
        /* FIFO: append at the tail (kept: a thousand starts in a row must
         * not walk the queue each). */
        if (m->deferred_tail)
                m->deferred_tail->deferred_next = p;
        else
                m->deferred = p;
        m->deferred_tail = p;
        uv_idle_start(&m->deferred_idle, on_deferred);
}

void rt__grace_arm(rt_pod *p, usec_t grace, uv_timer_cb cb) {
        usec_t at = now_monotonic() + grace;

        if (uv_is_active((uv_handle_t *) &p->grace_timer) && at >= p->kill_at)
                return;
        p->kill_at = at;
        /* the loop's clock may lag: the grace is never cut short */
        uv_update_time(p->manager->loop);
        uv_timer_start(&p->grace_timer, cb, (grace + USEC_PER_MSEC - 1) / USEC_PER_MSEC, 0);
}

bool rt__grace_not_yet(rt_pod *p, uv_timer_cb cb) {
        usec_t now = now_monotonic();

        if (now >= p->kill_at)
                return false;
        uv_timer_start(&p->grace_timer, cb,
                       (p->kill_at - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC + 1, 0);
        return true;
}

void rt__pod_exited(rt_pod *p, const rt_exit *e) {
        rt_manager *m = p->manager;

        if (p->state == RT_POD_EXITED)
                return;
        /* A pod that dies before its `started` went out still reports it
         * first: the agent sees started → exited, in that order. */
        if (p->started_queued) {
                p->started_queued = false; /* it stays queued, as a no-op */
                report_started(p);
        }
        p->state = RT_POD_EXITED;
        p->ready = false;
        m->pods_ended = true; /* escapees of it may have to go */
        rt__probes_stop(p);
        if (!p->freed && m->cb.exited)
                m->cb.exited(p, e, m->userdata);
}

/* ---- logs ------------------------------------------------------------------------------------ */

typedef struct rotation {
        uv_fs_t req;
        rt_manager *m;
        rt_pod *pod;
        char *path;
} rotation;

/*
 * Rotation is copy-then-truncate: the process keeps its O_APPEND fd (we
 * cannot reopen a file behind a running process), so the log is copied
 * by libuv's thread pool to <log>.1.tmp, renamed over <log>.1 (a reader
 * sees a whole copy, never one being written) and then truncated; the
 * process's next
 * write lands at offset 0. Lines written between the copy and the truncate
 * are lost, and a log can overshoot the limit by what is written between
 * two checks. Both are the price of never blocking the loop.
 *
 * How often: each log is checked again when, at the rate it grew since
 * its last check, it would reach the limit — every check interval (5 s)
 * for a quiet pod, down to LOG_CHECK_MIN for one that spews, so a log
 * that fills at hundreds of MB/s overshoots by a few MB, not by five
 * seconds' worth.
 */
#define LOG_CHECK_MIN (10 * USEC_PER_MSEC)
/* A new log (or one just rotated) is looked at again soon: learn its rate. */
#define LOG_CHECK_FIRST (100 * USEC_PER_MSEC)
static void on_rotated(uv_fs_t *req) {
        rotation *rot = req->data;

        _cleanup_free_ char *tmp = strprintf("%s.1.tmp", rot->path),
                            *one = strprintf("%s.1", rot->path);

        /* A freed pod's path may already belong to its replacement (names
         * repeat): leave that log alone. */
        if (tmp && one && req->result >= 0 && !rot->pod->freed && rename(tmp, one) == 0)
                (void) !truncate(rot->path, 0);
        else if (tmp)
                (void) unlink(tmp);
        uv_fs_req_cleanup(req);
        rot->pod->rotating = false;
        rt__pod_unref(rot->pod);
        free(rot->path);
        free(rot);
}

/* When to look at this log again, from how fast it grew. */
static void plan_next_check(rt_manager *m, rt_pod *p, uint64_t size, usec_t now) {
        usec_t next = p->log_checked ? m->log_check_interval : LOG_CHECK_FIRST;

        if (p->log_checked && size > p->log_size && now > p->log_checked) {
                double rate = (double) (size - p->log_size) / (double) (now - p->log_checked);
                double left = size < m->log_max_bytes ? (double) (m->log_max_bytes - size) : 0;
                double until = left / rate;
                if (until < (double) next)
                        next = MAX((usec_t) until, LOG_CHECK_MIN);
        }
        p->log_size = size;
        p->log_checked = now;
        p->log_next_check = now + next;
}

static void check_log(rt_manager *m, rt_pod *p, usec_t now) {
        _cleanup_free_ char *dst = NULL;
        struct stat st;
        rotation *rot;

        if (p->rotating) {
                p->log_next_check = now + LOG_CHECK_MIN;
                return;
        }
        if (!p->record.log_path) {
                p->log_next_check = USEC_INFINITY;
                return;
        }
        /* A descriptor of the file, kept: with a thousand pods, a stat() of
         * each path every few seconds was most of an idle agent's work.
         * Copy-then-truncate keeps the inode, so the descriptor stays right. */
        if (p->log_fd < 0)
                p->log_fd = open(p->record.log_path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if ((p->log_fd >= 0 ? fstat(p->log_fd, &st) : stat(p->record.log_path, &st)) < 0) {
                p->log_next_check = now + m->log_check_interval;
                return;
        }
        plan_next_check(m, p, (uint64_t) st.st_size, now);
        if ((uint64_t) st.st_size <= m->log_max_bytes)
                return;
        /* After the truncate it starts again from 0: no rate across it. */
        p->log_checked = 0;
        dst = strprintf("%s.1.tmp", p->record.log_path);
        rot = new0(rotation, 1);
        if (!dst || !rot || !(rot->path = strdup(p->record.log_path))) {
                free(rot);
                return;
        }
        rot->m = m;
        rot->pod = rt__pod_ref(p);
        rot->req.data = rot;
        p->rotating = true;
        if (uv_fs_copyfile(m->loop, &rot->req, p->record.log_path, dst, 0, on_rotated) < 0) {
                p->rotating = false;
                rt__pod_unref(p);
                free(rot->path);
                free(rot);
        }
}

/* One timer for every log, set for the earliest next check. */
static void on_log_timer(uv_timer_t *t) {
        rt_manager *m = t->data;
        usec_t now = now_monotonic(), next = now + m->log_check_interval;

        for (rt_pod *p = m->pods; p; p = p->next) {
                if (p->freed || p->state == RT_POD_EXITED)
                        continue;
                if (p->log_next_check <= now)
                        check_log(m, p, now);
                next = MIN(next, p->log_next_check);
        }
        uv_timer_start(&m->log_timer, on_log_timer,
                       (MAX(next, now + LOG_CHECK_MIN) - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC,
                       0);
}

/* ---- the manager ------------------------------------------------------------------------------
 */

int rt_manager_new(const rt_config *c, rt_manager **ret) {
        rt_manager *m;
        struct rlimit rl;
        int r;

        m = new0(rt_manager, 1);
        if (!m)
                return -ENOMEM;
        m->refs = 1;
        m->loop = c->loop;
        m->cb = *c->callbacks;
        m->userdata = c->userdata;
        m->port_lo = c->port_lo ?: RT_PORT_RANGE_LO;
        m->port_hi = c->port_hi ?: RT_PORT_RANGE_HI;
        m->port_cursor = m->port_lo;
        m->log_max_bytes = c->log_max_bytes ?: RT_LOG_MAX_BYTES;
        m->log_check_interval = c->log_check_interval ?: 5 * USEC_PER_SEC;
        m->state_dir = strdup(c->state_dir);
        if (!m->state_dir || m->port_lo > m->port_hi) {
                r = m->state_dir ? -EINVAL : -ENOMEM;
                goto fail;
        }

        /* Children must never inherit the agent's descriptors; and the
         * agent keeps 0-2 open so that no descriptor of ours lands there. */
        for (int fd = 0; fd < 3; fd++)
                if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) < 0) {
                        r = -errno;
                        goto fail;
                }

        /* 1000 pods need more than the usual 1024 descriptors (a pidfd each,
         * plus probes); children get the original limit back. */
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                m->nofile_orig = rl;
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }

        r = rt__curl_init(m);
        if (r < 0)
                goto fail;

        uv_idle_init(m->loop, &m->deferred_idle);
        m->deferred_idle.data = m;
        rt__manager_ref(m);

        uv_timer_init(m->loop, &m->log_timer);
        m->log_timer.data = m;
        rt__manager_ref(m);
        uv_timer_start(&m->log_timer, on_log_timer, m->log_check_interval / USEC_PER_MSEC, 0);
        uv_unref((uv_handle_t *) &m->log_timer);

        /* SIGCHLD is watched in any case: detached pods that were our
         * children, and orphans when we are a subreaper, are reaped there. */
        /* The bus is chosen now and connected on first use: an agent that
         * runs no systemd pods never needs one. */
        m->bus_kind = c->systemd_bus;
        if (m->bus_kind == RT_BUS_AUTO)
                m->bus_kind = geteuid() == 0 && sd_booted() > 0 ? RT_BUS_SYSTEM : RT_BUS_USER;

        m->subreaper = c->subreaper;
        uv_timer_init(m->loop, &m->reap_timer);
        m->reap_timer.data = m;
        rt__manager_ref(m);
        uv_unref((uv_handle_t *) &m->reap_timer);
        uv_signal_init(m->loop, &m->sigchld);
        m->sigchld.data = m;
        rt__manager_ref(m);
        uv_signal_start(&m->sigchld, on_sigchld, SIGCHLD);
        uv_unref((uv_handle_t *) &m->sigchld);
        if (c->subreaper && prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
                r = -errno;
                rt_manager_close(m);
                return r;
        }

        *ret = m;
        return 0;

fail:
        manager_free(m);
        return r;
}

static void detach_pod(rt_pod *p);

void rt_manager_close(rt_manager *m) {
        if (m->closing)
                return;
        m->closing = true;
        while (m->pods)
                rt_pod_free(m->pods);
        /* Pods still waiting for their `started` hold a reference each. */
        while (m->deferred) {
                rt_pod *p = m->deferred;
                m->deferred = p->deferred_next;
                if (!m->deferred)
                        m->deferred_tail = NULL;
                p->deferred_next = NULL;
                p->started_queued = false;
                rt__pod_unref(p);
        }
        reap_orphans(m);
        rt__systemd_close(m);
        uv_close((uv_handle_t *) &m->deferred_idle, manager_handle_closed);
        uv_close((uv_handle_t *) &m->log_timer, manager_handle_closed);
        uv_close((uv_handle_t *) &m->sigchld, manager_handle_closed);
        uv_close((uv_handle_t *) &m->reap_timer, manager_handle_closed);
        if (m->curlm)
                uv_close((uv_handle_t *) &m->curl_timer, manager_handle_closed);
        rt__manager_unref(m);
}

void rt_manager_set_userdata(rt_manager *m, void *userdata) {
        m->userdata = userdata;
}

uv_loop_t *rt_manager_loop(rt_manager *m) {
        return m->loop;
}

size_t rt_manager_n_pods(rt_manager *m) {
        return m->n_pods;
}

/* ---- pods ---------------------------------------------------------------------------------------
 */

static const rt_ops *backend_for(const spec_pod_spec *s) {
        switch (s->runtime_class_name) {
        case SPEC_RUNTIME_PROCESS:
        case _SPEC_RUNTIME_INVALID:
                return &rt_process_ops;
        case SPEC_RUNTIME_SYSTEMD:
                return &rt_systemd_ops;
        default:
                return NULL;
        }
}

static rt_pod *pod_new(rt_manager *m, const rt_pod_params *p, void *userdata) {
        rt_pod *pod = new0(rt_pod, 1);
        const char *container;

        if (!pod)
                return NULL;
        pod->manager = m;
        rt__manager_ref(m);
        pod->refs = 1;
        pod->pidfd = -EBADF;
        pod->log_fd = -EBADF;
        pod->userdata = userdata;
        container = p->spec->n_containers > 0 ? p->spec->containers[0].name : "main";
        pod->namespace = strdup(p->namespace);
        pod->name = strdup(p->name);
        pod->uid = strdup(strempty(p->uid));
        pod->container = strdup(container ?: "main");
        if (!pod->namespace || !pod->name || !pod->uid || !pod->container) {
                rt__pod_unref(pod);
                return NULL;
        }
        return pod;
}

static void on_log_timer(uv_timer_t *t);

static void pod_link(rt_pod *pod) {
        rt_manager *m = pod->manager;

        /* Its log's first check, soon: a pod may spew from its start. */
        pod->log_next_check = now_monotonic() + LOG_CHECK_FIRST;
        if (uv_timer_get_due_in(&m->log_timer) > LOG_CHECK_FIRST / USEC_PER_MSEC)
                uv_timer_start(&m->log_timer, on_log_timer, LOG_CHECK_FIRST / USEC_PER_MSEC, 0);
        pod->next = m->pods;
        if (m->pods)
                m->pods->prev = pod;
        m->pods = pod;
        m->n_pods++;
}

static void pod_unlink(rt_pod *pod) {
        rt_manager *m = pod->manager;
        if (pod->prev)
                pod->prev->next = pod->next;
        else if (m->pods == pod)
                m->pods = pod->next;
        if (pod->next)
                pod->next->prev = pod->prev;
        pod->prev = pod->next = NULL;
        m->n_pods--;
}

/* uid/gid from runAsUser/runAsGroup (container over pod). */
static int resolve_ids(rt_pod *pod, const spec_pod_spec *s, char **ret_error) {
        const spec_container *c = &s->containers[0];
        int64_t uid = c->security_context.run_as_user != SPEC_UNSET64
                              ? c->security_context.run_as_user
                              : s->security_context.run_as_user;
        int64_t gid = c->security_context.run_as_group != SPEC_UNSET64
                              ? c->security_context.run_as_group
                              : s->security_context.run_as_group;

        if (uid == SPEC_UNSET64 && gid == SPEC_UNSET64)
                return 0;
        if (uid == SPEC_UNSET64)
                uid = geteuid();
        if (gid == SPEC_UNSET64) {
                struct passwd pw, *res = NULL;
                char buf[4096];
                /* The user's primary group; a uid with no entry needs an
                 * explicit group, rather than silently running as gid 0. */
                if (getpwuid_r((uid_t) uid, &pw, buf, sizeof buf, &res) != 0 || !res) {
                        *ret_error = strprintf("runAsUser %lld has no entry in the user "
                                               "database: set runAsGroup too",
                                               (long long) uid);
                        return -ESRCH;
                }
                gid = res->pw_gid;
        }
        if (geteuid() != 0 && ((uid_t) uid != geteuid() || (gid_t) gid != getegid())) {
                *ret_error = strprintf("runAsUser %lld/runAsGroup %lld need tendd to run as "
                                       "root (it runs as uid %u)",
                                       (long long) uid, (long long) gid, (unsigned) geteuid());
                return -EPERM;
        }
        pod->set_ids = geteuid() == 0;
        pod->uid_n = (uid_t) uid;
        pod->gid_n = (gid_t) gid;
        return 0;
}

/* argv and environment, expanded; ports leased (or taken from a record). */
static int pod_prepare(rt_pod *pod, const rt_pod_params *p, const rt_record *rec,
                       char **ret_error) {
        rt_manager *m = pod->manager;
        const spec_container *c;
        int r;

        if (p->spec->n_containers != 1 || strv_length(p->spec->containers[0].command) == 0) {
                *ret_error = strdup("the pod spec has no container with a command");
                return -EINVAL;
        }
        c = &p->spec->containers[0];
        if (c->n_ports > RT_MAX_PORTS) {
                *ret_error = strprintf("more than %d ports", RT_MAX_PORTS);
                return -E2BIG;
        }

        if (rec) {
                memcpy(pod->record.ports, rec->ports, sizeof rec->ports);
                pod->record.n_ports = rec->n_ports;
                for (size_t i = 0; i < rec->n_ports; i++) {
                        rt_port *port = &pod->record.ports[i];
                        /* A fixed containerPort was never leased, whatever a
                         * reconstructed record says. */
                        for (size_t k = 0; k < c->n_ports; k++)
                                if (streq_ptr(c->ports[k].name, port->name) &&
                                    c->ports[k].container_port != SPEC_UNSET)
                                        port->leased = false;
                        if (port->leased)
                                rt__port_mark(m, port->port);
                }
        } else
                for (size_t i = 0; i < c->n_ports; i++) {
                        rt_port *port = &pod->record.ports[pod->record.n_ports];
                        snprintf(port->name, sizeof port->name, "%s", strempty(c->ports[i].name));
                        if (c->ports[i].container_port != SPEC_UNSET)
                                port->port = (uint16_t) c->ports[i].container_port;
                        else {
                                r = rt__port_lease(m, &port->port);
                                if (r < 0) {
                                        *ret_error = strprintf("no free port left in %u-%u",
                                                               m->port_lo, m->port_hi);
                                        return r;
                                }
                                port->leased = true;
                        }
                        pod->record.n_ports++;
                }

        r = rt_build_env(p, pod->record.ports, pod->record.n_ports, &pod->envp);
        if (r < 0)
                return r;
        for (int part = 0; part < 2; part++) {
                char **list = part == 0 ? c->command : c->args;
                for (size_t i = 0; list && list[i]; i++) {
                        _cleanup_free_ char *e = rt_expand(list[i], pod->envp);
                        if (!e) {
                                /* rt_expand() is bounded: not the machine's memory. */
                                *ret_error = strprintf("%s[%zu]: with $(VAR) expanded it is "
                                                       "longer than 1 MiB",
                                                       part == 0 ? "command" : "args", i);
                                return -E2BIG;
                        }
                        if (strv_push(&pod->argv, e) < 0)
                                return -ENOMEM;
                        e = NULL;
                }
        }
        r = rt__resolve_path(pod->argv[0], pod->envp, &pod->path);
        if (r == -ENOENT) {
                *ret_error = strprintf("exec %s: not found in PATH", pod->argv[0]);
                return r;
        }
        if (r < 0)
                return r;
        if (c->working_dir && !(pod->working_dir = strdup(c->working_dir)))
                return -ENOMEM;
        r = resolve_ids(pod, p->spec, ret_error);
        if (r < 0)
                return r;
        pod->grace = usec_from_sec(p->spec->termination_grace_period_seconds);
        if (c->resources.limits.memory.text)
                pod->memory_max = (uint64_t) MAX(c->resources.limits.memory.value, (int64_t) 0);
        if (c->resources.limits.cpu.text)
                pod->cpu_milli = (uint64_t) MAX(c->resources.limits.cpu.milli, (int64_t) 0);
        {
                _cleanup_buf_ tend_buf b = TEND_BUF_INIT(4096);
                (void) tend_buf_addf(&b, "tend pod %s/%s", pod->namespace, pod->name);
                for (size_t i = 0; p->labels && i < p->labels->n; i++)
                        (void) tend_buf_addf(&b, "%s%s=%s", i ? "," : " (", p->labels->items[i].key,
                                             p->labels->items[i].value);
                if (p->labels && p->labels->n)
                        (void) tend_buf_adds(&b, ")");
                pod->description = tend_buf_take(&b);
                if (!pod->description)
                        return -ENOMEM;
        }

        if (!rec || !rec->log_path) {
                pod->record.log_path = rt_log_path(m->state_dir, pod->namespace, pod->name,
                                                   pod->container);
                if (!pod->record.log_path)
                        return -ENOMEM;
                r = rt__log_dir_make(m, pod->record.log_path);
                if (r < 0) {
                        *ret_error = strprintf("creating the log directory for %s: %s",
                                               pod->record.log_path, strerror(-r));
                        return r;
                }
        } else if (!(pod->record.log_path = strdup(rec->log_path)))
                return -ENOMEM;
        return 0;
}

static void release_ports(rt_pod *pod) {
        for (size_t i = 0; i < pod->record.n_ports; i++)
                if (pod->record.ports[i].leased) {
                        rt__port_release(pod->manager, pod->record.ports[i].port);
                        pod->record.ports[i].leased = false;
                }
}

static int pod_begin(rt_manager *m, const rt_pod_params *p, const rt_record *rec, void *userdata,
                     rt_pod **ret, char **ret_error) {
        _cleanup_free_ char *err = NULL;
        const rt_ops *ops;
        rt_pod *pod;
        int r;

        *ret_error = NULL;
        if (m->closing)
                return -ESHUTDOWN;
        ops = backend_for(p->spec);
        if (!ops || (rec && rec->backend && !streq(rec->backend, ops->name))) {
                *ret_error = strprintf(
                        "runtimeClassName \"%s\" is not available in this agent",
                        strna(spec_runtime_class_to_string(p->spec->runtime_class_name)));
                return -EOPNOTSUPP;
        }
        pod = pod_new(m, p, userdata);
        if (!pod)
                return -ENOMEM;
        pod->ops = ops;
        pod->record.backend = strdup(ops->name);
        if (!pod->record.backend) {
                rt__pod_unref(pod);
                return -ENOMEM;
        }
        if (rec) {
                pod->record.pid = rec->pid;
                pod->record.start_time = rec->start_time;
                pod->record.started_at = rec->started_at;
                if (rec->unit && !(pod->record.unit = strdup(rec->unit))) {
                        rt__pod_unref(pod);
                        return -ENOMEM;
                }
        }

        r = pod_prepare(pod, p, rec, &err);
        if (r >= 0)
                r = rec ? ops->adopt(pod, &err) : ops->start(pod, &err);
        if (r < 0) {
                release_ports(pod);
                rt__pod_unref(pod);
                *ret_error = TAKE_PTR(err) ?: strdup(strerror(-r));
                return r;
        }
        pod_link(pod);
        r = rt__probes_start(pod, &p->spec->containers[0]);
        if (r < 0) {
                /* Without its probes the pod cannot be judged; give it up. */
                *ret_error = strprintf("starting probes: %s", strerror(-r));
                if (!rec)
                        (void) ops->signal(pod, SIGKILL);
                rt_pod_free(pod);
                return r;
        }
        *ret = pod;
        return 0;
}

int rt_pod_start(rt_manager *m, const rt_pod_params *p, void *pod_userdata, rt_pod **ret,
                 char **ret_error) {
        return pod_begin(m, p, NULL, pod_userdata, ret, ret_error);
}

int rt_pod_adopt(rt_manager *m, const rt_pod_params *p, const rt_record *r, void *pod_userdata,
                 rt_pod **ret, char **ret_error) {
        return pod_begin(m, p, r, pod_userdata, ret, ret_error);
}

int rt_pod_stop(rt_pod *pod, usec_t grace) {
        if (pod->state == RT_POD_EXITED)
                return 0;
        pod->state = RT_POD_STOPPING;
        /* As the kubelet: no liveness verdict on a pod being stopped. */
        rt__probes_stop_one(pod, RT_PROBE_LIVENESS);
        return pod->ops->stop(pod, grace);
}

int rt_pod_signal(rt_pod *pod, int sig) {
        if (pod->state == RT_POD_EXITED)
                return -ESRCH;
        return pod->ops->signal(pod, sig);
}

static void detach_pod(rt_pod *p) {
        rt__probes_stop(p);
        p->ops->detach(p);
}

void rt_pod_free(rt_pod *pod) {
        if (!pod || pod->freed)
                return;
        pod->freed = true;
        if (pod->state != RT_POD_EXITED && pod->uid && !pod->manager->closing &&
            (pod->manager->detached || (pod->manager->detached = tend_hashmap_new())))
                (void) tend_hashmap_put(pod->manager->detached, pod->uid, (void *) 1, NULL);
        detach_pod(pod);
        release_ports(pod);
        pod_unlink(pod);
        rt__pod_unref(pod);
}

const rt_record *rt_pod_record(const rt_pod *pod) {
        return &pod->record;
}

void *rt_pod_userdata(const rt_pod *pod) {
        return pod->userdata;
}

const char *rt_pod_name(const rt_pod *pod) {
        return pod->name;
}

const char *rt_pod_container_id(const rt_pod *pod) {
        return pod->container_id;
}

bool rt_pod_is_running(const rt_pod *pod) {
        return pod->state == RT_POD_RUNNING || pod->state == RT_POD_STOPPING;
}

bool rt_pod_ready(const rt_pod *pod) {
        return pod->ready;
}
