/* SPDX-License-Identifier: MIT */

/* The fence keeper (tend/fleet.h, docs/fleet.md §3.10): the keeper's own
 * loop, and tendd's side of its socket. */

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>

#include "tend/fleet.h"
#include "tend/base.h"

#define KEEP_BATCH 64 /* processes (pidfds) per message */
#define KEEP_SOCKET "fence.sock"

enum {
        KEEP_BEGIN = 1, /* a new set of processes begins, these its first */
        KEEP_ADD,       /* more of it */
        KEEP_END,       /* it is whole: it replaces the one kept */
        KEEP_TIME,      /* only the fence time moves */
};

/* One message; its processes' pidfds ride along (SCM_RIGHTS), in order. */
typedef struct keep_msg {
        uint32_t type, n;
        uint64_t fence_at; /* CLOCK_MONOTONIC µs; 0: the time told before stays */
        uint64_t grace[KEEP_BATCH];
} keep_msg;

static int pidfd_signal(int pidfd, int sig) {
        return (int) syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

/* ---- the keeper ---------------------------------------------------------------------------- */

typedef struct kept {
        int pidfd;
        usec_t grace, kill_at;
} kept;

typedef struct keeper {
        uv_loop_t *loop;
        int listen_fd, conn_fd;
        uv_poll_t listen_poll, conn_poll;
        bool conn_polling;
        uv_timer_t timer;
        kept *set, *next, *dying; /* kept; being told; sent SIGTERM, SIGKILL at kill_at */
        size_t n_set, n_next, n_dying;
        usec_t fence_at; /* 0: none (none told, or it fired) */
} keeper;

static void kept_close(kept **v, size_t *n) {
        for (size_t i = 0; i < *n; i++)
                safe_close((*v)[i].pidfd);
        free(*v);
        *v = NULL;
        *n = 0;
}

static int kept_add(kept **v, size_t *n, kept x) {
        kept *g = reallocarray(*v, *n + 1, sizeof **v);
        if (!g)
                return -ENOMEM;
        *v = g;
        g[(*n)++] = x;
        return 0;
}

static void keeper_arm(keeper *k);

static void keeper_maybe_exit(keeper *k) {
        if (k->conn_fd >= 0 || k->n_set || k->n_dying)
                return;
        /* nothing to keep, nobody to tell it: done (a tendd that wants one
         * again starts another) */
        uv_stop(k->loop);
}

static void conn_close(keeper *k) {
        if (k->conn_polling)
                uv_poll_stop(&k->conn_poll), uv_close((uv_handle_t *) &k->conn_poll, NULL);
        k->conn_polling = false;
        k->conn_fd = safe_close(k->conn_fd);
        kept_close(&k->next, &k->n_next); /* a set half told is not kept */
}

static void on_message(keeper *k, const keep_msg *m, const int *fds, size_t n_fds) {
        size_t i = 0;

        if (m->type == KEEP_BEGIN)
                kept_close(&k->next, &k->n_next);
        if (m->type == KEEP_BEGIN || m->type == KEEP_ADD)
                for (; i < MIN((size_t) m->n, n_fds); i++)
                        if (kept_add(&k->next, &k->n_next,
                                     (kept){ .pidfd = fds[i], .grace = (usec_t) m->grace[i] }) < 0)
                                break;
        for (; i < n_fds; i++) /* not taken */
                safe_close(fds[i]);
        if (m->type == KEEP_END) {
                kept_close(&k->set, &k->n_set);
                k->set = TAKE_PTR(k->next);
                k->n_set = k->n_next;
                k->n_next = 0;
        }
        if (m->fence_at)
                k->fence_at = m->fence_at;
        keeper_arm(k);
}

static void on_conn(uv_poll_t *h, int status, int events) {
        keeper *k = h->data;
        keep_msg m = {};
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int) * KEEP_BATCH)];
        } control = {};
        struct iovec iov = { .iov_base = &m, .iov_len = sizeof m };
        struct msghdr mh = { .msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = &control,
                             .msg_controllen = sizeof control };
        int fds[KEEP_BATCH];
        size_t n_fds = 0;
        ssize_t got = recvmsg(k->conn_fd, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);

        if (got < 0 && (errno == EAGAIN || errno == EINTR))
                return;
        for (struct cmsghdr *c = got > 0 ? CMSG_FIRSTHDR(&mh) : NULL; c; c = CMSG_NXTHDR(&mh, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
                        for (size_t i = 0;
                             i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int) && n_fds < KEEP_BATCH;
                             i++)
                                memcpy(&fds[n_fds++], CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (got <= 0 || (size_t) got < offsetof(keep_msg, grace) || m.n > KEEP_BATCH) {
                for (size_t i = 0; i < n_fds; i++)
                        safe_close(fds[i]);
                if (got <= 0) { /* tendd went: what it told last is kept */
                        log_debug("the tendd connected to it went; keeping what it said");
                        conn_close(k);
                        keeper_maybe_exit(k);
                }
                return;
        }
        on_message(k, &m, fds, n_fds);
}

static void on_listen(uv_poll_t *h, int status, int events) {
        keeper *k = h->data;
        struct ucred cred = {};
        socklen_t len = sizeof cred;
        int fd = accept4(k->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

        if (fd < 0)
                return;
        /* (the state directory is tendd's own; the user is checked too) */
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != getuid()) {
                safe_close(fd);
                return;
        }
        conn_close(k); /* a new tendd takes over from the last */
        k->conn_fd = fd;
        if (uv_poll_init(k->loop, &k->conn_poll, fd) < 0) {
                k->conn_fd = safe_close(fd);
                return;
        }
        k->conn_poll.data = k;
        k->conn_polling = true;
        uv_poll_start(&k->conn_poll, UV_READABLE | UV_DISCONNECT, on_conn);
        log_info("a tendd connected (pid %d): it tells the fence now", (int) cred.pid);
}

static void on_timer(uv_timer_t *t) {
        keeper *k = t->data;
        usec_t now = now_monotonic();

        if (k->fence_at && now >= k->fence_at && k->n_set) {
                log_warning("tendd has not renewed the node's lease in time: stopping its %zu "
                            "fenced pod process%s before the lease can expire",
                            k->n_set, k->n_set == 1 ? "" : "es");
                for (size_t i = 0; i < k->n_set; i++) {
                        (void) pidfd_signal(k->set[i].pidfd, SIGTERM);
                        k->set[i].kill_at = now + k->set[i].grace;
                        if (kept_add(&k->dying, &k->n_dying, k->set[i]) < 0) {
                                (void) pidfd_signal(k->set[i].pidfd, SIGKILL);
                                safe_close(k->set[i].pidfd);
                        }
                }
                free(k->set);
                k->set = NULL;
                k->n_set = 0;
                k->fence_at = 0;
        }
        for (size_t i = 0; i < k->n_dying;)
                if (now >= k->dying[i].kill_at) {
                        (void) pidfd_signal(k->dying[i].pidfd, SIGKILL);
                        safe_close(k->dying[i].pidfd);
                        k->dying[i] = k->dying[--k->n_dying];
                } else
                        i++;
        keeper_arm(k);
        keeper_maybe_exit(k);
}

static void keeper_arm(keeper *k) {
        usec_t next = k->fence_at && k->n_set ? k->fence_at : USEC_INFINITY, now = now_monotonic();

        for (size_t i = 0; i < k->n_dying; i++)
                next = MIN(next, k->dying[i].kill_at);
        if (next == USEC_INFINITY) {
                uv_timer_stop(&k->timer);
                return;
        }
        uv_timer_start(&k->timer, on_timer,
                       next > now ? (next - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC : 0, 0);
}

int fence_keeper_main(const char *state_dir) {
        keeper k = { .listen_fd = 3, .conn_fd = -EBADF };
        uv_loop_t loop;

        log_open("tendd fence keeper");
        if (fcntl(k.listen_fd, F_SETFD, FD_CLOEXEC) < 0 || uv_loop_init(&loop) < 0) {
                log_error("--fence-keeper is tendd's own (fd 3: its socket in %s)",
                          strna(state_dir));
                return 2;
        }
        k.loop = &loop;
        uv_timer_init(&loop, &k.timer);
        k.timer.data = &k;
        uv_poll_init(&loop, &k.listen_poll, k.listen_fd);
        k.listen_poll.data = &k;
        uv_poll_start(&k.listen_poll, UV_READABLE, on_listen);
        log_debug("keeping the fence of %s", strna(state_dir));
        uv_run(&loop, UV_RUN_DEFAULT);
        conn_close(&k);
        kept_close(&k.set, &k.n_set);
        kept_close(&k.dying, &k.n_dying);
        uv_close((uv_handle_t *) &k.listen_poll, NULL);
        uv_close((uv_handle_t *) &k.timer, NULL);
        uv_run(&loop, UV_RUN_DEFAULT);
        (void) uv_loop_close(&loop);
        safe_close(k.listen_fd);
        return 0;
}

/* ---- tendd's side -------------------------------------------------------------------------- */

struct fence_client {
        char *state_dir;
        struct sockaddr_un addr;
        int fd;
        agent_fenced *sent; /* the set the keeper has */
        size_t n_sent;
        bool sent_any;
        usec_t sent_at;  /* the fence time it has */
        bool none_found; /* no keeper answered, and none is needed yet */
};

int fence_client_new(const char *state_dir, fence_client **ret) {
        _cleanup_free_ fence_client *c = new0(fence_client, 1);

        if (!c || !(c->state_dir = strdup(state_dir)))
                return free(c ? c->state_dir : NULL), -ENOMEM;
        c->addr.sun_family = AF_UNIX;
        if ((size_t) snprintf(c->addr.sun_path, sizeof c->addr.sun_path, "%s/%s", state_dir,
                              KEEP_SOCKET) >= sizeof c->addr.sun_path) {
                free(c->state_dir);
                return -ENAMETOOLONG;
        }
        c->fd = -EBADF;
        *ret = TAKE_PTR(c);
        return 0;
}

static void disconnect(fence_client *c) {
        c->fd = safe_close(c->fd);
        free(c->sent);
        c->sent = NULL;
        c->n_sent = 0;
        c->sent_any = false;
        c->sent_at = 0;
}

static int connect_keeper(fence_client *c) {
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &c->addr, sizeof c->addr) < 0) {
                int r = -errno;
                safe_close(fd);
                return r;
        }
        c->fd = fd;
        return 0;
}

/* A keeper of its own session (no signal to tendd's group reaches it; not
 * a pod, so the reaper leaves it be), its socket made here first so that
 * the connect after the fork cannot miss it. */
static int spawn_keeper(fence_client *c) {
        int lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
        pid_t pid;

        if (lfd < 0)
                return -errno;
        (void) unlink(c->addr.sun_path); /* a dead keeper's */
        if (bind(lfd, (struct sockaddr *) &c->addr, sizeof c->addr) < 0 || listen(lfd, 4) < 0) {
                int r = -errno;
                safe_close(lfd);
                return r;
        }
        pid = fork();
        if (pid == 0) {
                int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
                (void) setsid();
                if (nul >= 0)
                        (void) dup2(nul, 0);
                if (lfd == 3 ? fcntl(3, F_SETFD, 0) < 0 : dup2(lfd, 3) < 0)
                        _exit(127);
                execl("/proc/self/exe", "tendd", "--fence-keeper", c->state_dir, (char *) NULL);
                _exit(127);
        }
        safe_close(lfd);
        if (pid < 0)
                return -errno;
        log_info("fleet: fence keeper started (pid %d): it stops this node's fenced pods should "
                 "tendd not renew the lease in time",
                 (int) pid);
        return connect_keeper(c);
}

static bool same_set(const fence_client *c, const agent_fenced *pods, size_t n) {
        if (!c->sent_any || n != c->n_sent)
                return false;
        for (size_t i = 0; i < n; i++)
                if (pods[i].pid != c->sent[i].pid || pods[i].start_time != c->sent[i].start_time ||
                    pods[i].grace != c->sent[i].grace)
                        return false;
        return true;
}

static int send_msg(fence_client *c, keep_msg *m, const int *fds, size_t n_fds) {
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int) * KEEP_BATCH)];
        } control = {};
        struct iovec iov = { .iov_base = m, .iov_len = sizeof *m };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

        if (n_fds) {
                mh.msg_control = &control;
                mh.msg_controllen = CMSG_SPACE(sizeof(int) * n_fds);
                struct cmsghdr *ch = CMSG_FIRSTHDR(&mh);
                ch->cmsg_level = SOL_SOCKET;
                ch->cmsg_type = SCM_RIGHTS;
                ch->cmsg_len = CMSG_LEN(sizeof(int) * n_fds);
                memcpy(CMSG_DATA(ch), fds, sizeof(int) * n_fds);
        }
        return sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 ? -errno : 0;
}

/* The set, in batches, each process as a pidfd (one that is no longer the
 * pod's process is left out). */
static int send_set(fence_client *c, usec_t fence_at, const agent_fenced *pods, size_t n) {
        size_t i = 0;
        bool first = true;
        int r = 0;

        do {
                keep_msg m = { .type = first ? KEEP_BEGIN : KEEP_ADD, .fence_at = fence_at };
                int fds[KEEP_BATCH];
                size_t k = 0;
                for (; i < n && k < KEEP_BATCH; i++) {
                        unsigned long long st = 0;
                        int fd = (int) syscall(SYS_pidfd_open, pods[i].pid, 0);
                        if (fd < 0)
                                continue;
                        if (proc_stat_fields(pods[i].pid, 22, 22, &st) < 0 ||
                            st != pods[i].start_time) {
                                safe_close(fd);
                                continue;
                        }
                        m.grace[k] = pods[i].grace;
                        fds[k++] = fd;
                }
                m.n = (uint32_t) k;
                r = send_msg(c, &m, fds, k);
                for (size_t j = 0; j < k; j++)
                        safe_close(fds[j]);
                first = false;
        } while (r >= 0 && i < n);
        if (r >= 0)
                r = send_msg(c, &(keep_msg){ .type = KEEP_END, .fence_at = fence_at }, NULL, 0);
        return r;
}

void fence_client_update(fence_client *c, usec_t fence_at, const agent_fenced *pods, size_t n) {
        int r;

        if (c->fd < 0) {
                /* a keeper of an earlier run is told the set too (none, if
                 * none is fenced now: looked for once, not at every tick);
                 * one is started only for something to keep, with a time */
                if (n == 0 && c->none_found)
                        return;
                r = connect_keeper(c);
                if (r < 0 && (n == 0 || fence_at == 0)) {
                        c->none_found = n == 0;
                        return;
                }
                if (r < 0 && (r = spawn_keeper(c)) < 0) {
                        log_warning_errno(r, "fleet: cannot start the fence keeper in %s: %m",
                                          c->state_dir);
                        return;
                }
        }
        if (!same_set(c, pods, n)) {
                agent_fenced *copy = n ? malloc(n * sizeof *pods) : NULL;
                if (copy)
                        memcpy(copy, pods, n * sizeof *pods);
                r = n && !copy ? -ENOMEM : send_set(c, fence_at, pods, n);
                if (r < 0) {
                        free(copy);
                        disconnect(c); /* told again, whole, next time */
                        return;
                }
                free(c->sent);
                c->sent = copy;
                c->n_sent = n;
                c->sent_any = true;
        } else if (fence_at && fence_at != c->sent_at) {
                r = send_msg(c, &(keep_msg){ .type = KEEP_TIME, .fence_at = fence_at }, NULL, 0);
                if (r < 0) {
                        disconnect(c);
                        return;
                }
        }
        if (fence_at)
                c->sent_at = fence_at;
}

void fence_client_free(fence_client *c) {
        if (!c)
                return;
        disconnect(c);
        free(c->state_dir);
        free(c);
}
