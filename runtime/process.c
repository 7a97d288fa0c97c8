/* SPDX-License-Identifier: MIT */

/*
 * The process backend: a pod is a child process in its own session, its
 * stdout and stderr appended to the pod's log file, watched through a pidfd
 * on the loop — the same way whether we spawned it or adopted it after a
 * restart.
 */

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "rt-internal.h"

/* A process pod's own state (rt_pod.backend). */
typedef struct rt_proc {
        int pidfd;
        bool is_child; /* our child: waitid() gives the exact status */
        bool watching;
        uv_poll_t poll; /* on the pidfd; closed before the pod is freed */
} rt_proc;

static rt_proc *proc_of(rt_pod *p) {
        return p->backend;
}

static void proc_init(rt_pod *p) {
        proc_of(p)->pidfd = -EBADF;
}

static void proc_done(rt_pod *p) {
        safe_close(((rt_proc *) p->backend)->pidfd); /* normally closed with its poll handle */
}

static int pidfd_signal(int pidfd, int sig) {
        return RET_NERRNO((int) syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0));
}

/* The whole group. Safe while the leader's pid still pins the group id:
 * for our child until we reap it; for an adopted process (someone else
 * reaps it) only while it is alive, which the pidfd tells without a race on
 * the pid. */
static int signal_group(rt_pod *p, int sig) {
        int r;

        if (!proc_of(p)->is_child &&
            (proc_of(p)->pidfd < 0 || pidfd_signal(proc_of(p)->pidfd, 0) < 0))
                return 0; /* gone: the pid may already belong to someone else */
        r = RET_NERRNO(kill(-p->record.pid, sig));
        if (r == -ESRCH && proc_of(p)->pidfd >= 0)
                r = pidfd_signal(proc_of(p)->pidfd, sig); /* not a group leader (odd adoptee) */
        return r == -ESRCH ? 0 : r;
}

/* After a failure between spawn and watching: no pod may be left running
 * unwatched, nor unreaped. Blocks for as long as SIGKILL takes. */
static void abandon_child(rt_pod *p) {
        siginfo_t si;

        if (proc_of(p)->pidfd < 0 || !proc_of(p)->is_child)
                return;
        (void) kill(-p->record.pid, SIGKILL);
        (void) waitid(P_PIDFD, (id_t) proc_of(p)->pidfd, &si, WEXITED);
        rt__pid_remove(p->manager, p->record.pid);
        proc_of(p)->is_child = false;
}

static void on_poll_closed(uv_handle_t *h) {
        rt_pod *p = h->data;
        safe_close(proc_of(p)->pidfd);
        proc_of(p)->pidfd = -EBADF;
        rt__pod_unref(p);
}

static void on_timer_closed(uv_handle_t *h) {
        rt__pod_unref(h->data);
}

static void stop_watching(rt_pod *p) {
        if (proc_of(p)->watching) {
                proc_of(p)->watching = false;
                uv_poll_stop(&proc_of(p)->poll);
                /* The pidfd is closed after the poll handle (libuv rule). */
                uv_close((uv_handle_t *) &proc_of(p)->poll, on_poll_closed);
        }
        if (p->grace_timer_init) {
                p->grace_timer_init = false;
                uv_close((uv_handle_t *) &p->grace_timer, on_timer_closed);
        }
}

static void on_pidfd(uv_poll_t *h, int status, int events) {
        rt_pod *p = h->data;
        rt_exit e = { .kind = RT_EXIT_UNKNOWN, .reason = "Unknown" };
        siginfo_t si = {};
        int r = -ECHILD;

        if (proc_of(p)->is_child) {
                /* WNOWAIT: learn the status but keep the zombie, so that the
                 * group id stays pinned for the kill below. */
                r = RET_NERRNO(waitid(P_PIDFD, (id_t) proc_of(p)->pidfd, &si,
                                      WEXITED | WNOHANG | WNOWAIT));
                if (r == 0 && si.si_pid == 0)
                        return; /* spurious wake-up: still running */
                /* The leader is gone. Whatever else runs in its group, or
                 * in its cgroup, goes too, as in a container whose init died. */
                (void) kill(-p->record.pid, SIGKILL);
                rt__cgroup_kill(p);
                (void) waitid(P_PIDFD, (id_t) proc_of(p)->pidfd, &(siginfo_t){}, WEXITED | WNOHANG);
                rt__pid_remove(p->manager, p->record.pid);
        } else {
                /* Adopted: not our child, its status went to its real
                 * parent (ECHILD above), which may have reaped it already.
                 * The group id stays taken while any member lives, and
                 * once none does, it could only be reused after the pid
                 * counter wraps (pid_max: 32768 in the kernel's default,
                 * 4194304 as systemd sets it) — not in the moment since
                 * the leader died. */
                (void) kill(-p->record.pid, SIGKILL);
                rt__cgroup_kill(p);
        }
        e.finished_at = now_realtime();
        e.finished_mono = now_monotonic();
        if (r == 0 && si.si_code == CLD_EXITED) {
                e.kind = RT_EXIT_CODE;
                e.code = si.si_status;
                e.reason = si.si_status == 0 ? "Completed" : "Error";
        } else if (r == 0 && (si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED)) {
                e.kind = RT_EXIT_SIGNAL;
                e.signal = si.si_status;
                e.reason = "Killed";
        }
        /* The kernel's OOM killer struck in its cgroup (the process, or a
         * child it then died of): said as a cluster says it. */
        if (rt__cgroup_oom_killed(p)) {
                if (e.kind == RT_EXIT_UNKNOWN) {
                        e.kind = RT_EXIT_SIGNAL;
                        e.signal = SIGKILL;
                }
                e.reason = "OOMKilled";
        }

        stop_watching(p);
        rt__pod_exited(p, &e);
        /* Its escapees, once they are ours (kill_escapee()). */
        rt__manager_reap_soon(p->manager);
}

static void on_grace_timeout(uv_timer_t *t) {
        rt_pod *p = t->data;
        if (rt__grace_not_yet(p, on_grace_timeout))
                return;
        (void) signal_group(p, SIGKILL);
        rt__cgroup_kill(p);
}

/* On failure the caller cleans up with stop_watching(). */
static int watch(rt_pod *p) {
        int r;

        p->container_id = strprintf("process://%d", (int) p->record.pid);
        if (!p->container_id)
                return -ENOMEM;
        r = uv_poll_init(p->manager->loop, &proc_of(p)->poll, proc_of(p)->pidfd);
        if (r < 0)
                return r;
        proc_of(p)->poll.data = rt__pod_ref(p);
        proc_of(p)->watching = true;
        uv_timer_init(p->manager->loop, &p->grace_timer);
        p->grace_timer.data = rt__pod_ref(p);
        p->grace_timer_init = true;
        return uv_poll_start(&proc_of(p)->poll, UV_READABLE, on_pidfd);
}

static int process_start(rt_pod *p, char **ret_error) {
        rt_manager *m = p->manager;
        int fds[SPEC_LISTEN_MAX];
        _cleanup_strv_free_ char **cg_procs = NULL;
        _cleanup_free_ char *cg_dir = NULL;
        rt_spawn s;
        int r;

        /* The API, the store and probes need descriptors too: a pod may
         * not take the last ones (with none left, the API can accept no
         * connection, and nobody could even scale down). */
        int in_use = fd_lowest_free();
        if (in_use < 0 ||
            (m->nofile != UINT64_MAX && (uint64_t) in_use + RT_FD_RESERVE >= m->nofile)) {
                r = -RT_ESHORT;
                /* (the same words each time: the agent says them once) */
                *ret_error = strprintf("tendd is out of file descriptors (its limit %" PRIu64
                                       "; each pod holds one or more, and %d are kept for its "
                                       "API): raise its limit (LimitNOFILE= of its unit, "
                                       "ulimit -n)",
                                       m->nofile, RT_FD_RESERVE);
                return r;
        }

        for (size_t i = 0; i < p->n_held; i++)
                fds[i] = rt__held_fd(p, i);
        r = rt__cgroup_prepare(p, &cg_procs, &cg_dir, ret_error);
        if (r < 0)
                return r;
        s = (rt_spawn){
                .path = p->path,
                .argv = p->argv,
                .envp = p->envp,
                .cwd = p->working_dir,
                .output = p->record.log_path,
                .set_ids = p->set_ids,
                .uid = p->uid_n,
                .gid = p->gid_n,
                .fds = fds,
                .n_fds = p->n_held,
                .pid_slots = { p->pid_slots[0], p->pid_slots[1] },
                .mounts = p->mounts,
                .n_mounts = p->n_mounts,
                .cg_procs = cg_procs,
                .n_cg_procs = strv_length(cg_procs),
                .cg_dir = cg_dir,
        };
        r = rt__spawn(m, &s, &p->record.pid, &proc_of(p)->pidfd, ret_error);
        if (r < 0) {
                rt__cgroup_remove(p);
                return r;
        }
        proc_of(p)->is_child = true;
        p->started_mono = now_monotonic();
        p->record.started_at = now_realtime();
        /* Identity for adoption later: (pid, start time). The process exists
         * (it is our unreaped child), so this fails only for /proc, or for
         * want of a descriptor; a record without it would make the next
         * tendd take the pod for another process and replace it. */
        r = rt_process_start_time(p->record.pid, &p->record.start_time);
        if (r == -ESRCH)
                r = 0; /* exited already (a zombie, ours to reap): its exit is
                        * watched for like any, and a record of no start time
                        * adopts nothing */
        if (r < 0)
                *ret_error = strprintf("reading pid %d's start time: %s", (int) p->record.pid,
                                       strerror(-r));
        else {
                r = watch(p);
                if (r < 0)
                        *ret_error = strprintf("watching pid %d: %s", (int) p->record.pid,
                                               strerror(-r));
        }
        if (r < 0) {
                bool polled = proc_of(p)->watching; /* (then its close closes the pidfd) */
                r = rt__fd_short(r);                /* (UV_EMFILE is -EMFILE here) */
                abandon_child(p);
                rt__cgroup_kill(p);
                rt__cgroup_remove(p);
                stop_watching(p);
                if (!polled)
                        proc_of(p)->pidfd = safe_close(proc_of(p)->pidfd);
                return r;
        }
        rt__pod_started(p);
        return 0;
}

static int process_adopt(rt_pod *p, char **ret_error) {
        uint64_t st;
        int r;

        if (p->record.pid <= 0) {
                *ret_error = strdup("the record has no pid");
                return -EINVAL;
        }
        /* Check identity, open the pidfd, check again: after the second
         * check the pidfd provably refers to the process we ran, and every
         * signal through it reaches that process and no other. */
        r = rt_process_start_time(p->record.pid, &st);
        if (r == 0 && st == p->record.start_time) {
                proc_of(p)->pidfd = (int) syscall(SYS_pidfd_open, p->record.pid, 0);
                if (proc_of(p)->pidfd < 0)
                        r = -errno;
                else
                        r = rt_process_start_time(p->record.pid, &st);
        }
        if (r < 0 || st != p->record.start_time)
                proc_of(p)->pidfd = safe_close(proc_of(p)->pidfd);
        if (r == -ESRCH) {
                *ret_error = strprintf("pid %d is gone", (int) p->record.pid);
                return -ESRCH;
        }
        if (r < 0) {
                *ret_error = strprintf("checking pid %d: %s", (int) p->record.pid, strerror(-r));
                return r;
        }
        if (st != p->record.start_time) {
                *ret_error = strprintf("pid %d now belongs to another process (started at "
                                       "tick %llu, not %llu)",
                                       (int) p->record.pid, (unsigned long long) st,
                                       (unsigned long long) p->record.start_time);
                return -ESTALE;
        }
        /* If we happen to be its parent still (same agent, no restart),
         * waitid() will give the real status; otherwise it is unknown. */
        rt__cgroup_adopt(p);
        proc_of(p)->is_child = rt__process_ppid(p->record.pid) == getpid();
        if (proc_of(p)->is_child)
                (void) rt__pid_add(p->manager, p->record.pid);
        {
                /* How long it has run, from the wall clock of the record. */
                usec_t now = now_realtime(), mono = now_monotonic();
                usec_t age = p->record.started_at && now > p->record.started_at
                                     ? now - p->record.started_at
                                     : 0;
                p->started_mono = mono > age ? mono - age : 0;
        }
        r = watch(p);
        if (r < 0) {
                *ret_error = strprintf("watching pid %d: %s", (int) p->record.pid, strerror(-r));
                if (proc_of(p)->is_child)
                        rt__pid_remove(p->manager, p->record.pid);
                stop_watching(p);
                return r;
        }
        rt__pod_started(p);
        return 0;
}

static int process_stop(rt_pod *p, usec_t grace) {
        int r;

        if (!proc_of(p)->watching)
                return 0;
        r = signal_group(p, SIGTERM);
        /* A stopped process would never see SIGTERM. */
        (void) signal_group(p, SIGCONT);
        if (grace == 0) {
                rt__cgroup_kill(p);
                return signal_group(p, SIGKILL);
        }
        /* A second stop may shorten the grace period, never lengthen it. */
        if (p->grace_timer_init)
                rt__grace_arm(p, grace, on_grace_timeout);
        return r;
}

static int process_signal(rt_pod *p, int sig) {
        if (!proc_of(p)->watching)
                return -ESRCH;
        return signal_group(p, sig);
}

static void process_detach(rt_pod *p) {
        if (proc_of(p)->watching && proc_of(p)->is_child) {
                /* Still our child: if it exits now, the SIGCHLD handler reaps
                 * it as any other unknown child; if it already has, do it
                 * soon (its SIGCHLD may have come while it was still ours). */
                rt__pid_remove(p->manager, p->record.pid);
                rt__manager_reap_soon(p->manager);
        }
        stop_watching(p);
}

static int process_find(rt_manager *m, const rt_pod_params *p, rt_record *ret) {
        (void) m;
        return rt__find_pod_process(p->uid, ret);
}

static void process_sweep_orphans(rt_manager *m) {
        rt__sweep_orphan_processes(m);
        rt__cgroup_sweep(m);
}

const rt_ops rt_process_ops = {
        .name = "process",
        .pod_size = sizeof(rt_proc),
        .pod_init = proc_init,
        .pod_done = proc_done,
        .manager_init = rt__cgroup_init,
        .manager_close = rt__cgroup_close,
        .start = process_start,
        .stop = process_stop,
        .signal = process_signal,
        .adopt = process_adopt,
        .detach = process_detach,
        .find = process_find,
        .sweep_orphans = process_sweep_orphans,
        .limits_problem = rt__cgroup_limits_problem,
        .caps = RT_CAP_START_BEFORE_COMMIT,
};
