/* SPDX-License-Identifier: MIT */

/*
 * The reaper: the set of pids we spawned, and, as the child subreaper, the
 * orphans and escapees of our pods (processes a pod left behind, or that
 * left their pod's group): reaped on SIGCHLD, stopped when their pod is gone.
 */

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/wait.h>

#include "rt-internal.h"

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
 * everything in a container goes with it. A pod in a cgroup has it killed
 * with the cgroup at its end (rt__cgroup_kill(), whatever its session or
 * environment): this is then only the check that nothing of it is left;
 * a pod without one is known by the POD_UID it passed on. It is our child
 * and not reaped, so its pid (and the group it may lead) cannot be anyone
 * else's. */
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
                /* its pod's cgroup, which it cannot leave; else the
                 * POD_UID it inherited (a pod without a cgroup) */
                char *u = rt__cgroup_uid_of(m, pid) ?: rt__process_getenv(pid, "POD_UID");
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
        log_info("pid %d (%s) outlived its pod (uid %s), outside the pod's process group; "
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
void rt__reap_orphans(rt_manager *m) {
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
        rt__cgroup_tidy(m); /* (their last processes may be reaped now) */
}

/* Reaping waits a few milliseconds: SIGCHLD comes with every pod's death,
 * and the death's replacement must not wait for a walk of our children (a
 * mass death is one walk). */
#define REAP_DELAY_MS 5

static void on_reap_timer(uv_timer_t *t) {
        rt__reap_orphans(t->data);
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
void rt__sweep_orphan_processes(rt_manager *m) {
        _cleanup_free_ char *base = NULL, *prefix = NULL;
        DIR *d;
        struct dirent *de;

        rt__notify_sweep_stored(m);

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

/* SIGCHLD is watched in any case: detached pods that were our children,
 * and orphans when we are a subreaper, are reaped there. */
void rt__reaper_start(rt_manager *m) {
        uv_timer_init(m->loop, &m->reap_timer);
        m->reap_timer.data = m;
        rt__manager_ref(m);
        uv_unref((uv_handle_t *) &m->reap_timer);
        uv_signal_init(m->loop, &m->sigchld);
        m->sigchld.data = m;
        rt__manager_ref(m);
        uv_signal_start(&m->sigchld, on_sigchld, SIGCHLD);
        uv_unref((uv_handle_t *) &m->sigchld);
}
