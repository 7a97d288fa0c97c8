/* SPDX-License-Identifier: MIT */

/*
 * Readiness and liveness by notify (tend.io/notify), for the process
 * backend: each pod gets a NOTIFY_SOCKET of its own, and speaks
 * sd_notify(3)'s protocol, so a program written for systemd's Type=notify
 * runs unchanged.
 *
 *   READY=1      the pod is ready (with a readiness probe: once both say so)
 *   STATUS=...   shown in the pod's tend.io/status annotation
 *   WATCHDOG=1   liveness: with a watchdog declared, a pod that sends none
 *                for an interval is stopped and replaced, with the reason
 *   WATCHDOG=trigger  the same at once
 *
 * The socket is <notify dir>/<pod uid>, in a directory that only tendd's
 * user may write in (rt__notify_dir: /run/tend/notify as root, as systemd
 * has /run/systemd/notify), and that pods running as other users can reach
 * without a path through tendd's state directory. (It was an abstract
 * name, "@tend-notify/<pod uid>", listed to all in /proc/net/unix: while
 * no tendd ran, anyone could bind a pod's, and the next tendd could not.)
 * The socket is the pod's user's, 0600: only that user and root may send
 * to it (it was 0666, and a stranger's flood of datagrams took a core of
 * tendd's). Of those, every message's sender is checked by the kernel's
 * credentials (SO_PASSCRED): only the pod's main process or a process of
 * its session (every process it starts, unless one leaves with setsid)
 * speaks for it. After a tendd restart the path is bound again:
 * sd_notify() sends to it each time. What a pod says while no tendd runs
 * would be lost (a READY=1 is said once): under systemd the socket is kept
 * in the service's file-descriptor store too (FDNAME tend-notify-<uid>),
 * where it stays bound and queues what pods say, and the next tendd takes
 * it back. A pod that an older tendd started, with the abstract name in
 * its environment, keeps that name.
 */

#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>

#include "rt-internal.h"

#define STATUS_MAX 256

char *rt__notify_dir(const char *state_dir) {
        const char *rt = getenv("XDG_RUNTIME_DIR");

        if (geteuid() == 0)
                return strdup("/run/tend/notify");
        if (rt && rt[0] == '/')
                return strprintf("%s/tend/notify", rt);
        return strprintf("%s/notify", state_dir);
}

char *rt__notify_name(rt_manager *m, const char *pod_uid) {
        return strprintf("%s/%s", m->notify_dir, pod_uid);
}

/* The notify directory, made where missing: tendd's own, and writable by
 * nobody else (else a stranger could put a name there first). */
static int notify_dir_check(rt_manager *m) {
        struct stat st;
        _cleanup_free_ char *inside = NULL;
        int r;

        if (m->notify_dir_made)
                return 0;
        inside = strprintf("%s/x", m->notify_dir);
        if (!inside)
                return -ENOMEM;
        r = rt__mkdir_parents(inside, geteuid() == 0 ? 0755 : 0700);
        if (r < 0) {
                log_error("cannot make %s for the pods' notify sockets: %s", m->notify_dir,
                          strerror(-r));
                return r;
        }
        if (lstat(m->notify_dir, &st) < 0)
                return -errno;
        if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0022)) {
                log_error("%s (for the pods' notify sockets) is not tendd's own (owner uid %u, "
                          "mode %04o): others could bind a pod's socket there; remove it, and "
                          "tendd makes it again",
                          m->notify_dir, (unsigned) st.st_uid, (unsigned) (st.st_mode & 07777));
                return -EPERM;
        }
        m->notify_dir_made = true;
        return 0;
}

/* What an adopted pod has for NOTIFY_SOCKET, if an older tendd gave it the
 * abstract name: that name (NULL otherwise). */
static char *legacy_name(pid_t pid, const char *uid) {
        _cleanup_free_ char *has = rt__process_getenv(pid, "NOTIFY_SOCKET"),
                            *want = strprintf("@tend-notify/%s", uid);

        return has && want && streq(has, want) ? TAKE_PTR(has) : NULL;
}

#define NOTIFY_FDNAME_PREFIX "tend-notify-"

bool rt_notify_fdname(const char *name) {
        return name && startswith(name, NOTIFY_FDNAME_PREFIX);
}

int rt_manager_add_notify_socket(rt_manager *m, int fd, const char *name) {
        int type = 0;
        socklen_t len = sizeof type;

        if (!rt_notify_fdname(name))
                return -EINVAL;
        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) < 0)
                return -errno;
        if (type != SOCK_DGRAM)
                return -ENOTSOCK;
        if (!m->notify_stored && !(m->notify_stored = tend_hashmap_new()))
                return -ENOMEM;
        /* the value: fd + 1 (a NULL value is "none") */
        return tend_hashmap_put(m->notify_stored, name + strlen(NOTIFY_FDNAME_PREFIX),
                                (void *) (intptr_t) (fd + 1), NULL);
}

static void fdstore_remove(const char *uid) {
        char msg[128];

        snprintf(msg, sizeof msg, "FDSTOREREMOVE=1\nFDNAME=" NOTIFY_FDNAME_PREFIX "%s", uid);
        (void) sd_notify(0, msg);
}

void rt__notify_sweep_stored(rt_manager *m) {
        const char *uid;
        void *v;

        if (!m->notify_stored)
                return;
        for (size_t i = 0; tend_hashmap_next(m->notify_stored, &i, &uid, &v);) {
                _cleanup_free_ char *name = rt__notify_name(m, uid);
                safe_close((int) (intptr_t) v - 1);
                fdstore_remove(uid);
                if (name)
                        (void) unlink(name);
        }
        m->notify_stored = tend_hashmap_free(m->notify_stored);
}

char *rt__notify_ready_mark(const char *log_path) {
        const char *slash = log_path ? strrchr(log_path, '/') : NULL;

        return slash ? strprintf("%.*s/notify-ready", (int) (slash - log_path), log_path) : NULL;
}

static void on_watchdog(uv_timer_t *t);

static void watchdog_arm(rt_pod *p) {
        if (p->notify_watchdog && p->watchdog_timer) {
                p->watchdog_due = now_monotonic() + p->notify_watchdog;
                uv_timer_start(p->watchdog_timer, on_watchdog,
                               (p->notify_watchdog + USEC_PER_MSEC - 1) / USEC_PER_MSEC, 0);
        }
}

static void liveness_failed(rt_pod *p, const char *why) {
        rt_manager *m = p->manager;

        if (p->freed || p->state != RT_POD_RUNNING)
                return;
        p->notify_failed = true;
        if (p->watchdog_timer) /* none without watchdog=: WATCHDOG=trigger still counts */
                uv_timer_stop(p->watchdog_timer);
        if (m->cb.probe)
                m->cb.probe(p, RT_PROBE_LIVENESS, false, why, m->userdata);
}

static bool heard_line(const char *line, size_t len, void *userdata);

/* Whatever waits on p's notify socket, all of it (a WATCHDOG=1 among it
 * arms the watchdog again). */
static void drain(rt_pod *p) {
        for (unsigned k = 0; k < 64 && !p->freed && p->notify_fd >= 0; k++)
                if (rt__notify_receive(p->notify_fd, p->record.pid, heard_line, p,
                                       &p->notify_refused) < NOTIFY_BATCH)
                        break;
}

static void on_watchdog(uv_timer_t *t) {
        rt_pod *p = t->data;
        char d[DURATION_MAX];

        /* A timer runs before the loop reads its sockets: what the pod
         * sent while tendd was busy or stopped is heard first. */
        drain(p);
        if (p->freed || p->notify_failed || uv_is_active((uv_handle_t *) t) ||
            rt__not_yet(t, on_watchdog, p->watchdog_due))
                return; /* (what came: WATCHDOG=1 armed it again, or =trigger failed it) */
        /* Let go once: a tendd late at every expiry (starved for good)
         * must still fail a pod that sends nothing. */
        if (!p->watchdog_excused && rt__late(p->manager, p->watchdog_due, now_monotonic())) {
                watchdog_arm(p); /* an interval of tendd's own time, from now */
                p->watchdog_excused = true;
                return;
        }
        _cleanup_free_ char *why = strprintf("watchdog: no WATCHDOG=1 within %s",
                                             format_duration(d, p->notify_watchdog));
        liveness_failed(p, why ?: "watchdog");
}

static void handle_line(rt_pod *p, const char *line, size_t len) {
        rt_manager *m = p->manager;

        if (len == 7 && memcmp(line, "READY=1", 7) == 0) {
                if (!p->notify_ready) {
                        _cleanup_free_ char *mark = rt__notify_ready_mark(p->record.log_path);
                        p->notify_ready = true;
                        /* it will not say so again: a tendd after a restart
                         * reads it here (created once, no data, no fsync: a
                         * crash of the machine ends the pod too) */
                        if (mark)
                                safe_close(open(mark, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY,
                                                0600));
                        rt__readiness_update(p, NULL);
                }
        } else if (len >= 7 && memcmp(line, "STATUS=", 7) == 0) {
                _cleanup_free_ char *text = strndup(line + 7, MIN(len - 7, (size_t) STATUS_MAX));
                if (text && !streq_ptr(text, p->notify_status)) {
                        free(p->notify_status);
                        p->notify_status = TAKE_PTR(text);
                        if (!p->freed && m->cb.status)
                                m->cb.status(p, p->notify_status, m->userdata);
                }
        } else if (len == 10 && memcmp(line, "WATCHDOG=1", 10) == 0) {
                if (p->state == RT_POD_RUNNING || p->state == RT_POD_STARTING) {
                        watchdog_arm(p);
                        p->watchdog_excused = false;
                }
        } else if (len == 16 && memcmp(line, "WATCHDOG=trigger", 16) == 0)
                liveness_failed(p, "watchdog: the pod sent WATCHDOG=trigger");
        /* others (STOPPING=1, RELOADING=1, MAINPID=, ...) say nothing tend uses */
}

/*
 * Descriptors are not asked for (there is no FDSTORE here). Where the
 * kernel can (Linux 6.16: SO_PASSRIGHTS off), a sender is refused them
 * (EPERM). Elsewhere they arrive, and are closed without waiting: a TCP
 * socket sent with SO_LINGER and unsent data would hold close() for its
 * linger time, on the loop, so a socket is reset (linger 0) first. The
 * control buffer holds as many as one message can carry (SCM_MAX_FD), so
 * the kernel never drops, and closes in our name, any it could not give.
 */
#ifndef SO_PASSRIGHTS
#define SO_PASSRIGHTS 83
#endif
#define NOTIFY_FDS_MAX 253 /* the kernel's SCM_MAX_FD */

static void refuse_fds(int fd) {
        int zero = 0;

        (void) setsockopt(fd, SOL_SOCKET, SO_PASSRIGHTS, &zero, sizeof zero);
}

void rt__close_received(int fd) {
        struct linger now = { .l_onoff = 1, .l_linger = 0 };
        struct stat st;

        if (fstat(fd, &st) >= 0 && S_ISSOCK(st.st_mode))
                (void) setsockopt(fd, SOL_SOCKET, SO_LINGER, &now, sizeof now);
        safe_close(fd);
}

/*
 * What waits on a notify socket, a few datagrams at a time (a pod flooding
 * it must not hold the loop): a message is heard only with the kernel's
 * credentials of its sender, when that is pid or a process of its session,
 * and then line by line. Descriptors that came with a message, heard or
 * not, are closed without waiting; a truncated message is dropped. Returns
 * the datagrams read; stops early when on_line returns false.
 */
unsigned rt__notify_receive(int fd, pid_t pid, rt__notify_line_fn on_line, void *userdata,
                            unsigned *refused) {
        char buf[NOTIFY_MESSAGE_MAX];
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(struct ucred)) +
                         CMSG_SPACE(sizeof(int) * NOTIFY_FDS_MAX)];
        } control;
        unsigned k;

        for (k = 0; k < NOTIFY_BATCH; k++) {
                struct iovec iov = { buf, sizeof buf };
                struct msghdr msg = {
                        .msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = &control,
                        .msg_controllen = sizeof control,
                };
                struct ucred *cred = NULL;
                ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC | MSG_TRUNC);
                bool stop = false;

                if (n < 0)
                        break;
                for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
                        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
                            c->cmsg_len == CMSG_LEN(sizeof(struct ucred)))
                                cred = (struct ucred *) CMSG_DATA(c);
                        else if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
                                int *fds = (int *) CMSG_DATA(c);
                                size_t nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                                for (size_t i = 0; i < nfd; i++)
                                        rt__close_received(fds[i]);
                        }
                if (!cred || (size_t) n > sizeof buf)
                        continue;
                /* getsid(2), not /proc/PID/stat: a stranger's flood of
                 * datagrams costs a system call each, no file read */
                if (cred->pid != pid && getsid(cred->pid) != pid) {
                        if (refused)
                                (*refused)++;
                        continue;
                }
                for (size_t at = 0; at < (size_t) n && !stop;) {
                        const char *nl = memchr(buf + at, '\n', (size_t) n - at);
                        size_t len = nl ? (size_t) (nl - (buf + at)) : (size_t) n - at;
                        stop = !on_line(buf + at, len, userdata);
                        at += len + 1;
                }
                if (stop)
                        return k + 1;
        }
        return k;
}

static bool heard_line(const char *line, size_t len, void *userdata) {
        rt_pod *p = userdata;

        if (p->state != RT_POD_EXITED)
                handle_line(p, line, len);
        return !p->freed;
}

static void on_notify(uv_poll_t *h, int status, int events) {
        rt_pod *p = h->data;

        (void) rt__notify_receive(p->notify_fd, p->record.pid, heard_line, p, &p->notify_refused);
}

static void on_handle_closed(uv_handle_t *h) {
        rt_pod *p = h->data;
        free(h);
        rt__pod_unref(p);
}

/* The poll handle and the socket it watches, which is closed after it
 * (libuv's rule) and only then. */
typedef struct notify_poll {
        uv_poll_t poll; /* first: the handle is the struct */
        int fd;
} notify_poll;

static void on_poll_closed(uv_handle_t *h) {
        safe_close(((notify_poll *) h)->fd);
        on_handle_closed(h);
}

int rt__notify_open(rt_pod *p, pid_t adopted) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *name = adopted > 0 ? legacy_name(adopted, p->uid) : NULL;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        bool abstract = name;
        notify_poll *np;
        void *stored;
        int one = 1, r;
        size_t len;

        if (!name && !(name = rt__notify_name(p->manager, p->uid)))
                return -ENOMEM;
        len = strlen(name);
        if (len >= sizeof sa.sun_path) {
                log_error("pod/%s: its notify socket %s is longer than a socket's path may be "
                          "(%zu bytes); give tendd a shorter XDG_RUNTIME_DIR or --state-dir",
                          p->name, name, sizeof sa.sun_path - 1);
                return -ENAMETOOLONG;
        }
        memcpy(sa.sun_path, name, len);
        if (abstract)
                sa.sun_path[0] = 0;
        stored = p->manager->notify_stored ? tend_hashmap_remove(p->manager->notify_stored, p->uid)
                                           : NULL;
        if (stored) {
                /* the one the previous tendd bound, from the fd store: what
                 * the pod said meanwhile waits in it */
                fd = (int) (intptr_t) stored - 1;
                p->notify_in_store = true;
                (void) fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
                refuse_fds(fd);
        } else {
                fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                if (fd < 0)
                        return -errno;
                r = RET_NERRNO(setsockopt(fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof one));
                refuse_fds(fd);
                if (r >= 0 && !abstract) {
                        /* the previous tendd's, or one of a pod that is gone */
                        r = notify_dir_check(p->manager);
                        if (r >= 0 && unlink(name) < 0 && errno != ENOENT)
                                r = -errno;
                }
                if (r >= 0)
                        r = RET_NERRNO(bind(fd, (struct sockaddr *) &sa,
                                            offsetof(struct sockaddr_un, sun_path) + len));
                /* the pod's user's alone (and root's): a stranger of another
                 * user is refused by the kernel, at no cost to the loop; of
                 * those who may send, the credentials say who speaks */
                if (r >= 0 && !abstract && p->set_ids)
                        r = RET_NERRNO(chown(name, p->uid_n, p->gid_n));
                if (r >= 0 && !abstract)
                        r = RET_NERRNO(chmod(name, 0600));
                if (r < 0)
                        return r;
                if (p->manager->fdstore) {
                        char msg[128];
                        snprintf(msg, sizeof msg, "FDSTORE=1\nFDNAME=" NOTIFY_FDNAME_PREFIX "%s",
                                 p->uid);
                        p->notify_in_store = sd_pid_notify_with_fds(0, 0, msg, &fd, 1) > 0;
                }
        }

        np = new0(notify_poll, 1);
        if (!np)
                return -ENOMEM;
        r = uv_poll_init(p->manager->loop, &np->poll, fd);
        if (r < 0) {
                free(np);
                return r;
        }
        np->poll.data = rt__pod_ref(p);
        np->fd = p->notify_fd = TAKE_FD(fd);
        p->notify_poll = &np->poll;
        (void) uv_poll_start(p->notify_poll, UV_READABLE, on_notify);
        if (p->notify_watchdog) {
                p->watchdog_timer = new0(uv_timer_t, 1);
                if (!p->watchdog_timer)
                        return -ENOMEM;
                uv_timer_init(p->manager->loop, p->watchdog_timer);
                p->watchdog_timer->data = rt__pod_ref(p);
        }
        return 0;
}

/* The watchdog runs from the pod's start (as systemd's does): a program
 * that takes longer than the interval to start sends WATCHDOG=1 while it
 * starts. */
void rt__notify_started(rt_pod *p) {
        watchdog_arm(p);
}

void rt__notify_close(rt_pod *p) {
        /* gone from the store once the pod is, not when tendd stops (the
         * next tendd takes it back) */
        if (p->notify_in_store && (p->state == RT_POD_EXITED || !p->manager->closing)) {
                fdstore_remove(p->uid);
                p->notify_in_store = false;
        }
        if (p->notify_poll && (p->state == RT_POD_EXITED || !p->manager->closing)) {
                _cleanup_free_ char *name = rt__notify_name(p->manager, p->uid);
                if (name)
                        (void) unlink(name);
        }
        if (p->notify_poll) {
                /* the socket goes with its handle (on_poll_closed) */
                uv_poll_stop(p->notify_poll);
                uv_close((uv_handle_t *) p->notify_poll, on_poll_closed);
                p->notify_poll = NULL;
                p->notify_fd = -EBADF;
        }
        if (p->watchdog_timer) {
                uv_timer_stop(p->watchdog_timer);
                uv_close((uv_handle_t *) p->watchdog_timer, on_handle_closed);
                p->watchdog_timer = NULL;
        }
}
