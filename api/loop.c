/* SPDX-License-Identifier: MIT */

/* The HTTP API (tend/api.h): libmicrohttpd on the libuv loop. Each listener
 * (slot) is an MHD daemon run by external polling: a uv_poll on its epoll fd
 * and a timer for MHD's own timeouts. Streams resume a suspended connection
 * and kick its slot. */

#include <sys/socket.h>

#include "api-internal.h"

/* ---- the MHD glue -------------------------------------------------------------------- */

static void run_slot(slot *sl);

static void on_slot_timer(uv_timer_t *t) {
        run_slot(t->data);
}

/* A kick during the run (a write that resumed a watch on this slot) must
 * outlive the arming after it: MHD's timeout knows nothing of the resumed
 * connection (with Connection: close, it has none left to time), and
 * would put off the watcher's news until some other request came. */
static unsigned connections(slot *sl) {
        const union MHD_DaemonInfo *i = MHD_get_daemon_info(sl->d,
                                                            MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
        return i ? i->num_connections : 0;
}

/* One more run when connections went during this one: at its connection
 * limit MHD takes the listening socket out of its epoll set, and puts it
 * back only at the start of a later run. After the last connection of a
 * full pool has gone, nothing else would make that run (no descriptor is
 * left in the set, no timeout armed): the listener would never accept
 * again. A run that closes nothing ends the chain. */
static void run_slot(slot *sl) {
        unsigned before;

        if (!sl->d)
                return;
        sl->kicked = false;
        before = connections(sl);
        MHD_run(sl->d);
        if (connections(sl) < before)
                sl->kicked = true;
        if (sl->kicked && !sl->s->closing)
                uv_timer_start(&sl->timer, on_slot_timer, 0, 0);
        else
                api__arm(sl);
}

void api__on_slot_poll(uv_poll_t *h, int status, int events) {
        run_slot(h->data);
}

/* After every run: MHD's next timeout (connection timeouts, resumed
 * connections). */
void api__arm(slot *sl) {
        MHD_UNSIGNED_LONG_LONG ms;

        if (!sl->d || sl->s->closing)
                return;
        if (MHD_get_timeout(sl->d, &ms) == MHD_YES)
                uv_timer_start(&sl->timer, on_slot_timer, ms, 0);
        else
                uv_timer_stop(&sl->timer);
}

/* Resumed connections are served on the next MHD_run(). */
void api__kick(slot *sl) {
        if (sl->d && !sl->s->closing) {
                sl->kicked = true;
                uv_timer_start(&sl->timer, on_slot_timer, 0, 0);
        }
}

/* A suspended stream (a watch, a follower) writes only when there is news:
 * a client that hung up on a quiet one would go unnoticed, and keep its
 * descriptor, until the next write. Peek at the socket instead. */
bool api__client_gone(struct MHD_Connection *c) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
                c, MHD_CONNECTION_INFO_CONNECTION_FD);
        char byte;
        ssize_t n;

        if (!ci)
                return false;
        n = recv(ci->connect_fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}
