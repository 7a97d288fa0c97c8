/* SPDX-License-Identifier: MIT */

/* The HTTP API (tend/api.h): libmicrohttpd on the libuv loop. Each listener
 * (slot) is an MHD daemon run by external polling: a uv_poll on its epoll fd
 * and a timer for MHD's own timeouts. Streams resume a suspended connection
 * and kick its slot. */

#include <malloc.h>
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

/* ---- request deadlines ----------------------------------------------------------------------- */

/* MHD's idle timeout starts again with each byte: a client that sends a
 * ClientHello, or a request's headers, one byte at a time holds its
 * connection for as long as it goes on, and 256 such hold all of TCP.
 * What a connection must do, bytes trickling in or not:
 * - its first request (the TLS handshake, then the request's headers)
 *   arrives within FIRST_REQUEST_DEADLINE of its accept, and a later one
 *   within the idle timeout of the answer before it;
 * - a request's body arrives within the idle timeout of its headers.
 * An answer (a watch, a log followed) has no deadline: MHD's own timeout
 * ends one the client stops reading. A connection past its deadline is
 * shut down, and MHD closes it on its next run. */
#define FIRST_REQUEST_DEADLINE_MS 10000

struct api_conn {
        api_conn *prev, *next;
        slot *sl;
        struct MHD_Connection *c;
        uint64_t deadline; /* uv_now() ms; 0: answering */
};

static uint64_t idle_ms(api_server *s) {
        return MAX(s->idle_timeout / USEC_PER_MSEC, 1);
}

static void arm_deadlines(api_server *s, uint64_t due) {
        uint64_t now = uv_now(s->loop);
        uint64_t in = due > now ? due - now : 0;

        if (s->closing)
                return;
        if (!uv_is_active((uv_handle_t *) &s->deadlines) || uv_timer_get_due_in(&s->deadlines) > in)
                uv_timer_start(&s->deadlines, api__on_deadlines, in, 0);
}

static void set_deadline(api_conn *k, uint64_t deadline) {
        k->deadline = deadline;
        if (deadline)
                arm_deadlines(k->sl->s, deadline);
}

void api__on_deadlines(uv_timer_t *t) {
        api_server *s = t->data;
        uint64_t now = uv_now(s->loop), next = 0;

        for (api_conn *k = s->conns; k; k = k->next) {
                if (!k->deadline)
                        continue;
                if (k->deadline > now) {
                        next = next ? MIN(next, k->deadline) : k->deadline;
                        continue;
                }
                const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
                        k->c, MHD_CONNECTION_INFO_CONNECTION_FD);
                log_debug("http: a connection (%s) sent no whole request in time: closed",
                          k->sl->tcp ? "TCP" : "local socket");
                k->deadline = 0;
                s->connections_cut++;
                if (ci)
                        (void) shutdown(ci->connect_fd, SHUT_RDWR);
                api__kick(k->sl);
        }
        if (next)
                arm_deadlines(s, next);
}

void api__on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                        enum MHD_ConnectionNotificationCode code) {
        slot *sl = cls;
        api_server *s = sl->s;
        api_conn *k = *socket_context;

        if (code == MHD_CONNECTION_NOTIFY_STARTED) {
                k = new0(api_conn, 1);
                if (!k)
                        return; /* no deadline for it: MHD's timeout still holds */
                k->sl = sl;
                k->c = c;
                k->next = s->conns;
                if (s->conns)
                        s->conns->prev = k;
                s->conns = k;
                *socket_context = k;
                set_deadline(k, uv_now(s->loop) + MIN(FIRST_REQUEST_DEADLINE_MS, idle_ms(s)));
                return;
        }
        if (!k)
                return;
        if (k->prev)
                k->prev->next = k->next;
        else
                s->conns = k->next;
        if (k->next)
                k->next->prev = k->prev;
        free(k);
        *socket_context = NULL;
}

static api_conn *conn_of(struct MHD_Connection *c) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
                c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        return ci ? ci->socket_context : NULL;
}

void api__conn_phase(struct MHD_Connection *c, api_conn_phase phase) {
        api_conn *k = c ? conn_of(c) : NULL;

        if (!k)
                return;
        set_deadline(k,
                     phase == API_CONN_ANSWERING ? 0 : uv_now(k->sl->s->loop) + idle_ms(k->sl->s));
}

/* ---- memory back to the system ------------------------------------------------------- */

static void on_trim(uv_timer_t *t) {
        (void) t;
        (void) malloc_trim(0);
}

/* A large body leaves freed memory in malloc's heaps (its trees are many
 * small blocks): it goes back to the system once no large body came for
 * TRIM_DELAY_MS. Not at once: the next large request would fault it all
 * in again, on the loop, and a page fault costs (issue 27). */
void api__trim_soon(api_server *s) {
        if (!s->closing)
                (void) uv_timer_start(&s->trim, on_trim, TRIM_DELAY_MS, 0);
}

/* ---- work off the loop -------------------------------------------------------------- */

typedef struct pool_job {
        uv_work_t work;
        void (*fn)(void *arg);
        void *arg;
} pool_job;

static void on_pool_job(uv_work_t *w) {
        pool_job *j = (pool_job *) w;
        j->fn(j->arg);
}

static void on_pool_job_done(uv_work_t *w, int status) {
        (void) status;
        free(w);
}

void api__in_pool(uv_loop_t *loop, void (*fn)(void *arg), void *arg) {
        pool_job *j = loop ? new0(pool_job, 1) : NULL;

        if (j) {
                *j = (pool_job){ .fn = fn, .arg = arg };
                if (uv_queue_work(loop, &j->work, on_pool_job, on_pool_job_done) == 0)
                        return;
                free(j);
        }
        fn(arg);
}

static void decref(void *tree) {
        json_decref(tree);
}

void api__release_in_pool(json_t *tree, void *loop) {
        api__in_pool(loop, decref, tree);
}
