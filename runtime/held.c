/* SPDX-License-Identifier: MIT */

/*
 * Held sockets (tend.io/listen): tendd binds and listens once per owner (a
 * deployment) and address, and hands the same socket to every pod of every
 * revision, as systemd's socket activation does (fd 3 onward, LISTEN_FDS,
 * LISTEN_PID, LISTEN_FDNAMES). Old and new pods accept from one queue: a
 * connection waiting in the backlog is taken by whichever pod accepts next,
 * and no pod's exit refuses or resets it.
 *
 * The socket must outlive tendd too, without a second bind (which would
 * fail, or with SO_REUSEPORT split the queue). After a restart it comes
 * back, in this order:
 *   1. from systemd's file-descriptor store, when tendd runs under systemd
 *      (FDSTORE=1 at bind; handed back as LISTEN_FDS at start,
 *      rt_manager_add_held_socket()): it needs no rights over the pods and
 *      works even if every pod died while tendd was down;
 *   2. from a running pod that holds it (pidfd_getfd(2) of its fd 3+i, as
 *      the record says): needs ptrace rights over the pod — tendd as root,
 *      or as the pod's own user where Yama's ptrace_scope is 0 (the new
 *      tendd is not the pods' ancestor) — and a pod still running;
 *   3. else it is bound anew — which, if some pod still holds the old one,
 *      fails with EADDRINUSE, and the error says why.
 *
 * A socket no pod uses any more lingers RT_HELD_LINGER (a crash-looping
 * single replica keeps its queue between deaths), then is closed.
 */

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <systemd/sd-daemon.h>

#include "rt-internal.h"

#define RT_HELD_LINGER (10 * USEC_PER_SEC)
#define FDNAME_PREFIX "tend-held-"

struct rt_held {
        rt_held *next;
        char *owner; /* NULL: from the fd store, not claimed yet */
        rt_held_addr addr;
        int fd;
        unsigned users;
        usec_t idle_since; /* monotonic; while users == 0 */
        bool stored;       /* in systemd's fd store */
};

static void format_addr(const rt_held_addr *a, char *buf, size_t size) {
        if (!a->address[0])
                snprintf(buf, size, "*:%u", a->port);
        else if (strchr(a->address, ':'))
                snprintf(buf, size, "[%s]:%u", a->address, a->port);
        else
                snprintf(buf, size, "%s:%u", a->address, a->port);
}

/* The fd store's name: printable ASCII without ':' (systemd's rule). */
static void fdname(const rt_held_addr *a, char buf[static 80]) {
        char *p;

        snprintf(buf, 80, FDNAME_PREFIX "%u-%s", a->port, a->address[0] ? a->address : "any");
        for (p = buf; *p; p++)
                if (*p == ':')
                        *p = '_';
}

/* What a socket is bound to; "" as the address for the wildcard. */
static int socket_addr(int fd, rt_held_addr *ret) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int accepting = 0, type = 0;
        socklen_t ilen = sizeof(int);

        if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &ilen) < 0 ||
            getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &ilen) < 0)
                return -errno;
        if (type != SOCK_STREAM || !accepting)
                return -ENOTSOCK;
        if (getsockname(fd, (struct sockaddr *) &ss, &len) < 0)
                return -errno;
        *ret = (rt_held_addr){};
        if (ss.ss_family == AF_INET) {
                struct sockaddr_in *in = (struct sockaddr_in *) &ss;
                ret->port = ntohs(in->sin_port);
                if (in->sin_addr.s_addr != htonl(INADDR_ANY))
                        inet_ntop(AF_INET, &in->sin_addr, ret->address, sizeof ret->address);
        } else if (ss.ss_family == AF_INET6) {
                struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &ss;
                ret->port = ntohs(in6->sin6_port);
                if (!IN6_IS_ADDR_UNSPECIFIED(&in6->sin6_addr))
                        inet_ntop(AF_INET6, &in6->sin6_addr, ret->address, sizeof ret->address);
        } else
                return -EAFNOSUPPORT;
        return 0;
}

static bool addr_equal(const rt_held_addr *a, const rt_held_addr *b) {
        struct in6_addr x, y;

        if (a->port != b->port)
                return false;
        if (streq(a->address, b->address))
                return true;
        /* the same address written two ways (::1 and 0:0::1) */
        return inet_pton(AF_INET6, a->address, &x) == 1 &&
               inet_pton(AF_INET6, b->address, &y) == 1 && memcmp(&x, &y, sizeof x) == 0;
}

static rt_held *find(rt_manager *m, const rt_held_addr *a) {
        for (rt_held *h = m->held; h; h = h->next)
                if (addr_equal(&h->addr, a))
                        return h;
        return NULL;
}

/* Another held socket on the same port that a bind to a would collide
 * with (one of the two on every address). */
static rt_held *find_overlap(rt_manager *m, const rt_held_addr *a) {
        for (rt_held *h = m->held; h; h = h->next)
                if (h->addr.port == a->port && (!h->addr.address[0] || !a->address[0]))
                        return h;
        return NULL;
}

/*
 * A pod's spawn copies the agent's descriptor table up to the highest held
 * socket it gets (spawn.c): with a thousand pods that table holds some two
 * thousand pidfds and logs, and a socket bound late would sit above them.
 * So the manager reserves RT_HELD_SLOTS low descriptors at its start
 * (/dev/null), and a held socket takes one of them over (dup3 replaces
 * atomically); a socket beyond them stays where it is, at a cost.
 */
void rt__held_reserve(rt_manager *m) {
        for (size_t i = 0; i < RT_HELD_SLOTS; i++)
                m->held_slots[i] = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static int to_slot(rt_manager *m, int fd) {
        for (size_t i = 0; i < RT_HELD_SLOTS; i++)
                if (m->held_slots[i] >= 0 && !m->held_slot_used[i] &&
                    dup3(fd, m->held_slots[i], O_CLOEXEC) >= 0) {
                        m->held_slot_used[i] = true;
                        safe_close(fd);
                        return m->held_slots[i];
                }
        return fd;
}

static void close_held_fd(rt_manager *m, int fd) {
        for (size_t i = 0; i < RT_HELD_SLOTS; i++)
                if (m->held_slot_used[i] && m->held_slots[i] == fd) {
                        _cleanup_close_ int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
                        /* back to a placeholder; if that fails, the slot is lost */
                        if (null < 0 || dup3(null, fd, O_CLOEXEC) < 0) {
                                m->held_slots[i] = -EBADF;
                                safe_close(fd);
                        }
                        m->held_slot_used[i] = false;
                        return;
                }
        safe_close(fd);
}

void rt__held_unreserve(rt_manager *m) {
        for (size_t i = 0; i < RT_HELD_SLOTS; i++)
                if (!m->held_slot_used[i])
                        m->held_slots[i] = safe_close(m->held_slots[i]);
}

static rt_held *held_new(rt_manager *m, const rt_held_addr *a, int fd) {
        rt_held *h = new0(rt_held, 1);

        if (!h)
                return NULL;
        fd = to_slot(m, fd);
        h->addr = *a;
        h->fd = fd;
        h->idle_since = now_monotonic();
        h->next = m->held;
        m->held = h;
        return h;
}

static void store(rt_manager *m, rt_held *h) {
        char name[80], msg[128];

        if (!m->fdstore || h->stored)
                return;
        fdname(&h->addr, name);
        snprintf(msg, sizeof msg, "FDSTORE=1\nFDNAME=%s", name);
        h->stored = sd_pid_notify_with_fds(0, 0, msg, &h->fd, 1) > 0;
}

static int bind_new(const rt_held_addr *a, int *ret_fd) {
        int family = !a->address[0] || strchr(a->address, ':') ? AF_INET6 : AF_INET, one = 1,
            zero = 0;
        struct sockaddr_storage ss = {};
        socklen_t len;
        int r;

        for (;;) {
                _cleanup_close_ int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);

                if (fd < 0 && errno == EAFNOSUPPORT && !a->address[0] && family == AF_INET6) {
                        family = AF_INET; /* no IPv6 here: the IPv4 wildcard */
                        continue;
                }
                if (fd < 0)
                        return -errno;
                if (family == AF_INET6) {
                        struct sockaddr_in6 *in6 = (struct sockaddr_in6 *) &ss;
                        in6->sin6_family = AF_INET6;
                        in6->sin6_port = htons(a->port);
                        if (a->address[0])
                                (void) inet_pton(AF_INET6, a->address, &in6->sin6_addr);
                        else
                                /* both families, as systemd's ListenStream=PORT */
                                (void) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero,
                                                  sizeof zero);
                        len = sizeof *in6;
                } else {
                        struct sockaddr_in *in = (struct sockaddr_in *) &ss;
                        in->sin_family = AF_INET;
                        in->sin_port = htons(a->port);
                        if (a->address[0])
                                (void) inet_pton(AF_INET, a->address, &in->sin_addr);
                        len = sizeof *in;
                }
                /* connections of pods gone may be in TIME_WAIT */
                (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
                r = RET_NERRNO(bind(fd, (struct sockaddr *) &ss, len));
                if (r >= 0)
                        r = RET_NERRNO(listen(fd, SOMAXCONN));
                if (r < 0)
                        return r;
                *ret_fd = TAKE_FD(fd);
                return 0;
        }
}

/* A held socket from a running pod: its fd 3+index, if that is still a
 * listening socket on the address. */
static int from_pod(rt_pod *pod, size_t index, const rt_held_addr *a, int *ret_fd) {
        _cleanup_close_ int pidfd = -EBADF, fd = -EBADF;
        rt_held_addr got;
        int r;

        if (!pod->record.pid)
                return -ESRCH;
        pidfd = (int) syscall(SYS_pidfd_open, pod->record.pid, 0);
        if (pidfd < 0)
                return -errno;
        fd = (int) syscall(SYS_pidfd_getfd, pidfd, (int) (3 + index), 0);
        if (fd < 0)
                return -errno;
        r = socket_addr(fd, &got);
        if (r < 0)
                return r;
        if (!addr_equal(&got, a))
                return -ENOTSOCK;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int rt__held_acquire(rt_pod *pod, const char *owner, const rt_held_addr *a, bool adopt,
                     size_t index, char **ret_error) {
        rt_manager *m = pod->manager;
        rt_held *h = find(m, a);
        char where[80];
        int fd = -EBADF, r;

        format_addr(a, where, sizeof where);
        if (!h && !adopt) {
                rt_held *o = find_overlap(m, a);
                char theirs[80];
                if (o && o->owner && !streq(o->owner, owner)) {
                        format_addr(&o->addr, theirs, sizeof theirs);
                        *ret_error = strprintf("%s overlaps %s, held for %s: two deployments "
                                               "cannot hold one port",
                                               where, theirs, o->owner);
                        return -EADDRINUSE;
                }
        }
        if (h && h->owner && !streq(h->owner, owner)) {
                *ret_error = strprintf("%s is held for %s: two deployments cannot hold one port",
                                       where, h->owner);
                return -EADDRINUSE;
        }
        if (!h && adopt) {
                r = from_pod(pod, index, a, &fd);
                if (r < 0) {
                        /* Kept for the error of the next bind, which will
                         * fail while this pod holds the socket. */
                        free(m->held_lost);
                        m->held_lost = strprintf("could not get it back from pod %s (pid %d): "
                                                 "pidfd_getfd: %s",
                                                 pod->name, (int) pod->record.pid, strerror(-r));
                        pod->held[pod->n_held++] = NULL; /* it runs on with its own copy */
                        return 0;
                }
        }
        if (!h && !adopt) {
                r = bind_new(a, &fd);
                if (r < 0) {
                        if (r == -EACCES)
                                *ret_error = strprintf(
                                        "binding %s for %s: %s (a port below 1024 needs tendd "
                                        "as root, or with CAP_NET_BIND_SERVICE)",
                                        where, owner, strerror(-r));
                        else if (r == -EADDRINUSE && m->held_lost)
                                *ret_error = strprintf(
                                        "binding %s for %s: %s (pods still hold the socket tendd "
                                        "held before it restarted; %s; run tendd as root, or "
                                        "under systemd with FileDescriptorStoreMax=, to keep it)",
                                        where, owner, strerror(-r), m->held_lost);
                        else
                                *ret_error = strprintf("binding %s for %s: %s", where, owner,
                                                       strerror(-r));
                        return r;
                }
        }
        if (!h) {
                h = held_new(m, a, fd);
                if (!h) {
                        safe_close(fd);
                        return -ENOMEM;
                }
                store(m, h);
        }
        if (!h->owner && !(h->owner = strdup(owner)))
                return -ENOMEM;
        h->users++;
        pod->held[pod->n_held++] = h;
        return 0;
}

void rt__held_release(rt_pod *pod) {
        for (size_t i = 0; i < pod->n_held; i++)
                if (pod->held[i] && --pod->held[i]->users == 0)
                        pod->held[i]->idle_since = now_monotonic();
        pod->n_held = 0;
}

int rt__held_fd(const rt_pod *pod, size_t i) {
        return pod->held[i] ? pod->held[i]->fd : -EBADF;
}

void rt__held_sweep(rt_manager *m, bool all) {
        usec_t now = now_monotonic();

        for (rt_held **hp = &m->held; *hp;) {
                rt_held *h = *hp;
                if (!all && (h->users > 0 || now < h->idle_since + RT_HELD_LINGER)) {
                        hp = &h->next;
                        continue;
                }
                if (h->stored && !all) {
                        char name[80], msg[128];
                        fdname(&h->addr, name);
                        snprintf(msg, sizeof msg, "FDSTOREREMOVE=1\nFDNAME=%s", name);
                        (void) sd_notify(0, msg);
                }
                *hp = h->next;
                close_held_fd(m, h->fd);
                free(h->owner);
                free(h);
        }
}

int rt_manager_add_held_socket(rt_manager *m, int fd) {
        rt_held_addr a;
        rt_held *h;
        int r = socket_addr(fd, &a);

        if (r < 0)
                return r;
        if (find(m, &a))
                return -EEXIST;
        h = held_new(m, &a, fd);
        if (!h)
                return -ENOMEM;
        h->stored = true;
        return 0;
}

void rt_manager_set_fdstore(rt_manager *m, bool on) {
        m->fdstore = on;
}

bool rt_held_fdname(const char *name) {
        return name && startswith(name, FDNAME_PREFIX);
}
