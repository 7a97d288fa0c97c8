/* SPDX-License-Identifier: MIT */

/*
 * Port leases: a `ports` entry without containerPort gets a free TCP port
 * from the agent's range, unique among live pods and checked free with a
 * bind. The lease is part of the pod's record, so an adopted pod keeps it.
 * Leasing walks the range from a cursor, so a released port is not handed
 * out again at once (a restarting server may still hold it in TIME_WAIT).
 * A port some live pod declares as its fixed containerPort is not leased
 * either, even before that pod binds it.
 */

#include <netinet/in.h>
#include <sys/socket.h>

#include "rt-internal.h"

static bool bit(const rt_manager *m, uint16_t port) {
        return m->port_leased[port / 8] & (1u << (port % 8));
}

static void set_bit(rt_manager *m, uint16_t port, bool on) {
        if (on)
                m->port_leased[port / 8] |= (uint8_t) (1u << (port % 8));
        else
                m->port_leased[port / 8] &= (uint8_t) ~(1u << (port % 8));
}

/* Could a server bind it now, with SO_REUSEADDR as servers set it (so
 * leftover TIME_WAIT connections do not count, a listener does)? A host
 * without the address family has nothing bound in it. */
static bool can_bind(int family, int type, uint16_t port) {
        struct sockaddr_in sa4 = { .sin_family = AF_INET, .sin_port = htons(port) };
        struct sockaddr_in6 sa6 = { .sin6_family = AF_INET6, .sin6_port = htons(port) };
        int one = 1, fd;
        bool ok;

        fd = socket(family, type | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return errno == EAFNOSUPPORT;
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (family == AF_INET6)
                (void) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
        ok = family == AF_INET6 ? bind(fd, (struct sockaddr *) &sa6, sizeof sa6) == 0
                                : bind(fd, (struct sockaddr *) &sa4, sizeof sa4) == 0;
        safe_close(fd);
        return ok;
}

/* Free for a server of either family and either protocol: the lease does
 * not know which the program binds. */
static bool port_is_free(uint16_t port) {
        return can_bind(AF_INET, SOCK_STREAM, port) && can_bind(AF_INET6, SOCK_STREAM, port) &&
               can_bind(AF_INET, SOCK_DGRAM, port) && can_bind(AF_INET6, SOCK_DGRAM, port);
}

static bool fixed_in_use(const rt_manager *m, uint16_t port) {
        for (const rt_pod *p = m->pods; p; p = p->next)
                if (p->state != RT_POD_EXITED)
                        for (size_t i = 0; i < p->record.n_ports; i++)
                                if (!p->record.ports[i].leased && p->record.ports[i].port == port)
                                        return true;
        return false;
}

int rt__port_lease(rt_manager *m, uint16_t *ret) {
        unsigned span = (unsigned) m->port_hi - m->port_lo + 1;

        for (unsigned i = 0; i < span; i++) {
                uint16_t port = m->port_cursor;
                m->port_cursor = port >= m->port_hi ? m->port_lo : (uint16_t) (port + 1);
                if (bit(m, port) || fixed_in_use(m, port) || !port_is_free(port))
                        continue;
                set_bit(m, port, true);
                *ret = port;
                return 0;
        }
        return -EADDRINUSE;
}

void rt__port_release(rt_manager *m, uint16_t port) {
        set_bit(m, port, false);
}

void rt__port_mark(rt_manager *m, uint16_t port) {
        set_bit(m, port, true);
}
