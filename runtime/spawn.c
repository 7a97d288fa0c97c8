/* SPDX-License-Identifier: MIT */

/*
 * Spawning with vfork semantics.
 *
 * Why not uv_spawn: libuv 1.44 forks, so each spawn copies the agent's page
 * tables with the loop blocked throughout: 19.8 ms a spawn at 211 MB RSS,
 * against 0.17 ms for what follows (bench/bench-runtime.c, `make bench`). Why not
 * posix_spawn: it cannot change uid/gid (runAsUser) and gives no pidfd.
 *
 * So we do what glibc's posix_spawn does internally: clone(CLONE_VM |
 * CLONE_VFORK) on a separate stack, with CLONE_PIDFD so the pidfd comes
 * atomically with the pid (no window for pid reuse). On cgroup v2 the
 * child is made in its pod's cgroup (clone3(CLONE_INTO_CGROUP), Linux 5.7:
 * no migration, which takes the kernel's cgroup_threadgroup_rwsem for
 * writing); glibc has no clone3() wrapper that runs a function on a stack
 * of ours, so clone3_vfork() below is that, for x86-64. Elsewhere, and on
 * v1, the child joins its cgroups itself before exec. The parent is
 * suspended until the child execs or exits, then reads the child's error, if
 * any, from the memory they share: an exec failure is a start error with
 * the path and errno, never a pod that "ran and exited 127".
 *
 * The child shares our memory, so it must not allocate, lock, or run
 * instrumented code: it uses raw system calls only, with every argument
 * prepared beforehand by the parent, and is exempt from the sanitizers.
 * All signals are blocked around clone() so no handler of ours ever runs in
 * the child; the child resets every disposition to default and unblocks
 * before exec.
 */

#include <fcntl.h>
#include <linux/close_range.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "rt-internal.h"

typedef enum spawn_step {
        STEP_NONE,
        STEP_CGROUP,
        STEP_SIGNALS,
        STEP_SETSID,
        STEP_JOIN_NS,
        STEP_MOUNT_NS,
        STEP_MOUNT,
        STEP_MOUNT_RO,
        STEP_FDTABLE,
        STEP_STDIO,
        STEP_OUTPUT,
        STEP_CHDIR,
        STEP_SETGROUPS,
        STEP_SETGID,
        STEP_SETUID,
        STEP_RLIMIT,
        STEP_EXEC,
} spawn_step;

typedef struct child_ctx {
        const rt_spawn *s;
        int moved[SPEC_LISTEN_MAX]; /* where the held sockets wait for their places */
        struct rlimit nofile;
        /* written by the child, read by the parent after clone() returns */
        volatile int err;
        volatile int step;
        volatile size_t mount; /* STEP_MOUNT*: which */
        bool in_cgroup;        /* made in it (clone3): no join */
} child_ctx;

/* The kernel's struct sigaction for rt_sigaction(2). */
struct ksigaction {
        void *handler;
        unsigned long flags;
        void *restorer;
        unsigned long mask;
};

#define NO_SANITIZE __attribute__((no_sanitize("address", "undefined"), noinline))

NO_SANITIZE static _noreturn_ void child_fail(child_ctx *c, int step) {
        c->err = errno;
        c->step = step;
        syscall(SYS_exit_group, 127);
        __builtin_unreachable();
}

NO_SANITIZE static int child_main(void *arg) {
        child_ctx *c = arg;
        const rt_spawn *s = c->s;
        struct ksigaction dfl = { .handler = SIG_DFL };
        unsigned long empty = 0;

        for (int sig = 1; sig < 65; sig++) {
                if (sig == SIGKILL || sig == SIGSTOP)
                        continue;
                /* EINVAL for the few the kernel refuses is fine. */
                (void) syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(unsigned long));
        }
        if (syscall(SYS_setsid) < 0)
                child_fail(c, STEP_SETSID);
        /* (before the descriptor table is emptied: the namespace's is in it) */
        if (s->join_mnt_ns && syscall(SYS_setns, s->mnt_ns, CLONE_NEWNS) < 0)
                child_fail(c, STEP_JOIN_NS);
        if (s->n_mounts > 0) {
                /* A namespace of its own, everything in it a slave of the
                 * host's: the host's later mounts reach the pod, and the
                 * pod's never reach the host. */
                if (syscall(SYS_unshare, CLONE_NEWNS) < 0 ||
                    syscall(SYS_mount, NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
                        child_fail(c, STEP_MOUNT_NS);
                for (size_t i = 0; i < s->n_mounts; i++) {
                        const rt_mount *mt = &s->mounts[i];
                        c->mount = i;
                        if (syscall(SYS_mount, mt->src, mt->dst, NULL, MS_BIND | MS_REC, NULL) < 0)
                                child_fail(c, STEP_MOUNT);
                        if (mt->read_only &&
                            syscall(SYS_mount, NULL, mt->dst, NULL,
                                    MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
                                    NULL) < 0)
                                child_fail(c, STEP_MOUNT_RO);
                }
        }
        if (s->n_fds > 0) {
                /* Held sockets go to fd 3 onward. Only the table below the
                 * highest of them is copied (close_range() copies no more
                 * than it keeps: held.c keeps them low), they are moved
                 * above what stdio and their own places need, and all the
                 * rest is closed. */
                int hi = 0, base;
                for (size_t i = 0; i < s->n_fds; i++)
                        if (s->fds[i] >= hi)
                                hi = s->fds[i] + 1;
                base = hi > 3 + (int) s->n_fds ? hi : 3 + (int) s->n_fds;
                if (syscall(SYS_close_range, hi, ~0U, CLOSE_RANGE_UNSHARE) < 0) {
                        if (syscall(SYS_unshare, CLONE_FILES) < 0)
                                child_fail(c, STEP_FDTABLE);
                        for (int fd = hi; fd < 65536; fd++)
                                (void) syscall(SYS_close, fd);
                }
                for (size_t i = 0; i < s->n_fds; i++)
                        if (syscall(SYS_fcntl, s->fds[i], F_DUPFD, base) != base + (long) i)
                                child_fail(c, STEP_FDTABLE);
                if (syscall(SYS_close_range, 0, base - 1, 0) < 0)
                        child_fail(c, STEP_FDTABLE);
                for (size_t i = 0; i < s->n_fds; i++)
                        c->moved[i] = base + (int) i;
        } else if (syscall(SYS_close_range, 0, ~0U, CLOSE_RANGE_UNSHARE) < 0) {
                /* A descriptor table of its own, empty: nothing of the agent's goes
                 * with it, CLOEXEC or not (libraries such as libcurl do not all set
                 * it, and a pod must not hold the agent's sockets). We share the
                 * agent's table (CLONE_FILES), so its thousands of descriptors — a
                 * pidfd and a log per pod — are neither copied at clone() nor
                 * closed here one by one: at a thousand pods that copy and close
                 * cost more than the rest of a spawn. */
                /* before Linux 5.9: a copy, then empty it */
                if (syscall(SYS_unshare, CLONE_FILES) < 0)
                        child_fail(c, STEP_FDTABLE);
                for (int fd = 0; fd < 65536; fd++)
                        (void) syscall(SYS_close, fd);
        }
        /* stdin /dev/null; stdout and stderr the pod's log (or /dev/null).
         * The table is empty: each open takes the lowest number. */
        if (syscall(SYS_openat, AT_FDCWD, "/dev/null", O_RDWR | O_NOCTTY) != 0)
                child_fail(c, STEP_STDIO);
        if (s->output) {
                if (syscall(SYS_openat, AT_FDCWD, s->output,
                            O_WRONLY | O_APPEND | O_CREAT | O_NOCTTY, 0640) != 1)
                        child_fail(c, STEP_OUTPUT);
        } else if (syscall(SYS_dup, 0) != 1)
                child_fail(c, STEP_STDIO);
        if (syscall(SYS_dup, 1) != 2)
                child_fail(c, STEP_STDIO);
        if (s->n_fds > 0) {
                for (size_t i = 0; i < s->n_fds; i++)
                        if (syscall(SYS_dup2, c->moved[i], 3 + (int) i) != 3 + (long) i)
                                child_fail(c, STEP_FDTABLE);
                (void) syscall(SYS_close_range, 3 + s->n_fds, ~0U, 0);
        }
        /* LISTEN_PID=, WATCHDOG_PID=: the child's own pid, known only now */
        for (size_t k = 0; k < ELEMENTSOF(s->pid_slots); k++)
                if (s->pid_slots[k]) {
                        char digits[16];
                        long pid = syscall(SYS_getpid);
                        int n = 0;
                        do
                                digits[n++] = (char) ('0' + pid % 10);
                        while ((pid /= 10) > 0);
                        for (int i = 0; i < n; i++)
                                s->pid_slots[k][i] = digits[n - 1 - i];
                        s->pid_slots[k][n] = 0;
                }
        if (s->cwd && syscall(SYS_chdir, s->cwd) < 0)
                child_fail(c, STEP_CHDIR);
        /* Into the pod's cgroups ("0": the writer itself), late: what the
         * child does before, while tendd waits (vfork), is not held to the
         * pod's CPU quota; still before its ids change (the files are
         * root's) and before exec, so the limits hold from the program's
         * first instruction, and whatever it forks stays inside. */
        for (size_t i = 0; !c->in_cgroup && i < s->n_cg_procs; i++) {
                long fd = syscall(SYS_openat, AT_FDCWD, s->cg_procs[i], O_WRONLY | O_CLOEXEC);
                if (fd < 0)
                        child_fail(c, STEP_CGROUP);
                if (syscall(SYS_write, fd, "0", 1) != 1)
                        child_fail(c, STEP_CGROUP);
                (void) syscall(SYS_close, fd);
        }
        if (s->set_ids) {
                if (syscall(SYS_setgroups, 0, NULL) < 0)
                        child_fail(c, STEP_SETGROUPS);
                if (syscall(SYS_setresgid, s->gid, s->gid, s->gid) < 0)
                        child_fail(c, STEP_SETGID);
                if (syscall(SYS_setresuid, s->uid, s->uid, s->uid) < 0)
                        child_fail(c, STEP_SETUID);
        }
        /* The agent raises its own fd limit; pods get the one it started with. */
        if (syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, &c->nofile, NULL) < 0)
                child_fail(c, STEP_RLIMIT);
        if (syscall(SYS_rt_sigprocmask, SIG_SETMASK, &empty, NULL, sizeof empty) < 0)
                child_fail(c, STEP_SIGNALS);
        syscall(SYS_execve, s->path, s->argv, s->envp);
        child_fail(c, STEP_EXEC);
}

static char *step_message(const rt_spawn *s, int step, size_t mount, int err) {
        const char *e = strerror(err);

        switch (step) {
        case STEP_EXEC:
                return strprintf("exec %s: %s", s->path, e);
        case STEP_CHDIR:
                return strprintf("workingDir %s: %s", s->cwd, e);
        case STEP_SETGROUPS:
                return strprintf("dropping supplementary groups: %s", e);
        case STEP_SETGID:
                return strprintf("runAsGroup %u: %s", (unsigned) s->gid, e);
        case STEP_SETUID:
                return strprintf("runAsUser %u: %s", (unsigned) s->uid, e);
        case STEP_SETSID:
                return strprintf("setsid: %s", e);
        case STEP_JOIN_NS:
                return strprintf("joining the pod's mount namespace: %s", e);
        case STEP_MOUNT_NS:
                return strprintf("a mount namespace of its own: %s", e);
        case STEP_MOUNT:
                return strprintf("mounting %s at %s: %s", s->mounts[mount].src,
                                 s->mounts[mount].dst, e);
        case STEP_MOUNT_RO:
                return strprintf("making %s read-only: %s", s->mounts[mount].dst, e);
        case STEP_STDIO:
                return strprintf("setting up stdin/stdout/stderr: %s", e);
        case STEP_OUTPUT:
                return strprintf("opening %s: %s", s->output, e);
        case STEP_FDTABLE:
                return strprintf("a file descriptor table of its own: %s", e);
        case STEP_CGROUP:
                return strprintf("joining the pod's cgroup: %s", e);
        case STEP_RLIMIT:
                return strprintf("resetting the file descriptor limit: %s", e);
        default:
                return strprintf("resetting signals: %s", e);
        }
}

#define SPAWN_STACK_SIZE (64 * 1024)

#ifndef CLONE_INTO_CGROUP
#define CLONE_INTO_CGROUP 0x200000000ULL
#endif

#if defined(__x86_64__) && defined(SYS_clone3)
/* struct clone_args of <linux/sched.h> (which clashes with <sched.h>). */
struct clone3_args {
        uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls, set_tid,
                set_tid_size, cgroup;
};

/* clone3() that runs fn(arg) in the child, on the stack args names, and
 * exits with what it returns (child_main never returns): the parent gets
 * the pid or -errno. The syscall returns in the child on the new stack, so
 * the child's side cannot be C: it calls fn with the frame pointer cleared
 * and the stack aligned as at any call (its top is page-aligned). fn and
 * arg stay in registers a syscall keeps (rcx, r11 and rax it does not). */
NO_SANITIZE static long clone3_vfork(struct clone3_args *args, int (*fn)(void *), void *arg) {
        long ret;
        register int (*r12)(void *) __asm__("r12") = fn;
        register void *r13 __asm__("r13") = arg;

        __asm__ volatile("syscall\n\t"
                         "test %%rax, %%rax\n\t"
                         "jnz 1f\n\t"
                         "xor %%ebp, %%ebp\n\t"
                         "mov %%r13, %%rdi\n\t"
                         "call *%%r12\n\t"
                         "mov %%eax, %%edi\n\t"
                         "mov %[exit], %%eax\n\t"
                         "syscall\n\t"
                         "hlt\n"
                         "1:"
                         : "=a"(ret)
                         : "0"((long) SYS_clone3), "D"(args), "S"(sizeof *args), "r"(r12),
                           "r"(r13), [exit] "i"(SYS_exit)
                         : "rcx", "r11", "memory");
        return ret;
}

/* The child made in its cgroup: its pid, or -errno; -ENOSYS where this
 * kernel (before 5.7) cannot, and then the caller makes it as on v1. */
static long spawn_into_cgroup(rt_manager *m, child_ctx *c, int cg_fd, int *pidfd) {
        struct clone3_args args = {
                .flags = CLONE_VM | CLONE_VFORK | CLONE_FILES | CLONE_PIDFD | CLONE_INTO_CGROUP,
                .pidfd = (uint64_t) (uintptr_t) pidfd,
                .exit_signal = SIGCHLD,
                .stack = (uint64_t) (uintptr_t) m->spawn_stack,
                .stack_size = m->spawn_stack_size,
                .cgroup = (uint64_t) cg_fd,
        };
        long r;

        c->in_cgroup = true;
        r = clone3_vfork(&args, child_main, c);
        if (r >= 0)
                return r;
        c->in_cgroup = false;
        /* no clone3 (before 5.3), no CLONE_INTO_CGROUP (before 5.7), or a
         * seccomp filter that refuses a system call it does not know
         * (EPERM: some container runtimes' default profiles): made as on
         * v1, the join reports what is wrong with the cgroup itself */
        return r == -ENOSYS || r == -E2BIG || r == -EINVAL || r == -EPERM ? -ENOSYS : r;
}
#else
static long spawn_into_cgroup(rt_manager *m, child_ctx *c, int cg_fd, int *pidfd) {
        return -ENOSYS;
}
#endif

int rt__spawn(rt_manager *m, const rt_spawn *s, pid_t *ret_pid, int *ret_pidfd, char **ret_error) {
        child_ctx c = { .s = s, .nofile = m->nofile_orig };
        /* (where it cannot be opened, the child's join says why) */
        _cleanup_close_ int cg_fd = s->cg_dir && m->clone3_state >= 0
                                            ? open(s->cg_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                                            : -EBADF;
        bool tried3 = false;
        sigset_t all, old;
        int pidfd = -1, r;
        pid_t pid;

        if (!m->spawn_stack) {
                void *st = mmap(NULL, SPAWN_STACK_SIZE, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
                if (st == MAP_FAILED)
                        return -errno;
                m->spawn_stack = st;
                m->spawn_stack_size = SPAWN_STACK_SIZE;
        }
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &old);
        r = -ENOSYS;
        if (cg_fd >= 0) {
                long v = spawn_into_cgroup(m, &c, cg_fd, &pidfd);
                pid = v >= 0 ? (pid_t) v : -1;
                r = v >= 0 ? 0 : (int) v;
                tried3 = r != -ENOSYS;
        }
        if (r == -ENOSYS) {
                pid = clone(child_main, (char *) m->spawn_stack + m->spawn_stack_size,
                            CLONE_VM | CLONE_VFORK | CLONE_FILES | CLONE_PIDFD | SIGCHLD, &c,
                            &pidfd);
                r = pid < 0 ? -errno : 0;
        }
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (cg_fd >= 0 && m->clone3_state == 0 && (c.in_cgroup || !tried3)) {
                m->clone3_state = c.in_cgroup ? 1 : -1;
                if (c.in_cgroup)
                        log_info("cgroups: pods are made in their cgroups (clone3 "
                                 "CLONE_INTO_CGROUP)");
                else
                        log_info("cgroups: a process cannot be made in its cgroup here (clone3 "
                                 "CLONE_INTO_CGROUP: Linux 5.7, and allowed by any seccomp "
                                 "filter); pods join theirs before exec");
        }
        if (r < 0) {
                *ret_error = tried3 ? strprintf("clone3 into the pod's cgroup: %s", strerror(-r))
                                    : strprintf("clone: %s", strerror(-r));
                /* the kernel's processes or tendd's descriptors ran out */
                return r == -EAGAIN ? -RT_ESHORT : rt__fd_short(r);
        }

        if (c.step != STEP_NONE) {
                siginfo_t si;
                /* The child has exited already (vfork returned): reap it. */
                (void) waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED);
                safe_close(pidfd);
                *ret_error = step_message(s, c.step, c.mount, c.err);
                /* Until it execs, the child shares tendd's descriptor table:
                 * out of descriptors there is tendd's trouble. Anything else
                 * is the pod's (an EAGAIN of its user's process limit too). */
                return rt__fd_short(-(c.err ?: EIO));
        }

        r = rt__pid_add(m, pid);
        if (r < 0) {
                /* Cannot track it: do not leave it running unwatched. */
                siginfo_t si;
                (void) syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
                (void) waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED);
                safe_close(pidfd);
                return r;
        }
        *ret_pid = pid;
        *ret_pidfd = pidfd;
        return 0;
}
