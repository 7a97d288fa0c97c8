/* SPDX-License-Identifier: MIT */

/*
 * Port leases: a `ports` entry without containerPort gets a free TCP port
 * from the agent's range, unique among live pods and checked free with a
 * bind. The lease is part of the pod's record, so an adopted pod keeps it.
 * Leasing walks the range from a cursor, so a released port is not handed
 * out again at once (a restarting server may still hold it in TIME_WAIT).
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

/* Free means a server could bind it now: SO_REUSEADDR as servers set it, so
 * leftover TIME_WAIT connections do not count, a listener does. */
static bool port_is_free(uint16_t port) {
        struct sockaddr_in sa = {
                .sin_family = AF_INET,
                .sin_port = htons(port),
                .sin_addr.s_addr = htonl(INADDR_ANY),
        };
        int one = 1, fd;
        bool ok;

        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return false;
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        ok = bind(fd, (struct sockaddr *) &sa, sizeof sa) == 0;
        safe_close(fd);
        return ok;
}

int rt__port_lease(rt_manager *m, uint16_t *ret) {
        unsigned span = (unsigned) m->port_hi - m->port_lo + 1;

        for (unsigned i = 0; i < span; i++) {
                uint16_t port = m->port_cursor;
                m->port_cursor = port >= m->port_hi ? m->port_lo : (uint16_t) (port + 1);
                if (bit(m, port) || !port_is_free(port))
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
