/* SPDX-License-Identifier: MIT */

/*
 * The session lease (docs/fleet.md §3.2): resume or grant, then a keepalive
 * every TTL/3, one at a time. Keepalives create no revision in etcd, so a
 * node's heartbeat costs no write. The client already tries the next
 * endpoint when one does not answer; here a failed keepalive is tried
 * again at the next tick, until a whole TTL has passed since the last
 * acknowledged one was sent.
 */

#include <stdio.h>

#include "tend/etcd.h"

struct etcd_session {
        etcd *e;
        etcd_session_config c;
        int64_t lease;
        bool ready, stopped, ended;
        bool in_flight; /* a call is out: freed only after it answers */
        unsigned timers_open;
        uv_timer_t tick;
        uv_timer_t deadline; /* at last_ok + TTL: the lease may be gone */
        usec_t sent_at;      /* of the keepalive in flight */
        usec_t last_ok;      /* send time of the last acknowledged keepalive */
};

static void maybe_free(etcd_session *s) {
        if (s->stopped && !s->in_flight && s->timers_open == 0)
                free(s);
}

static void on_timer_closed(uv_handle_t *h) {
        etcd_session *s = h->data;
        s->timers_open--;
        maybe_free(s);
}

void etcd_session_stop(etcd_session *s) {
        if (!s || s->stopped)
                return;
        s->stopped = true;
        etcd_cancel_calls(s->e, s);
        s->in_flight = false;
        uv_timer_stop(&s->tick);
        uv_timer_stop(&s->deadline);
        uv_close((uv_handle_t *) &s->tick, on_timer_closed);
        uv_close((uv_handle_t *) &s->deadline, on_timer_closed);
}

static void lost(etcd_session *s, int error, const char *why) {
        if (s->ended || s->stopped)
                return;
        s->ended = true;
        uv_timer_stop(&s->tick);
        uv_timer_stop(&s->deadline);
        if (s->c.lost)
                s->c.lost(error, why, s->c.userdata);
}

static void keepalive(etcd_session *s);
static void on_deadline(uv_timer_t *t);

/* A new acknowledgement: the lease is certainly alive until last_ok + TTL;
 * the deadline moves there (the ticks alone would see it up to TTL/3 late). */
static void acknowledged(etcd_session *s) {
        usec_t until = s->last_ok + (usec_t) s->c.ttl * USEC_PER_SEC, now = now_monotonic();

        uv_timer_start(&s->deadline, on_deadline,
                       until > now ? (until - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC : 0, 0);
}

static void on_keepalive(const etcd_result *r, void *userdata) {
        etcd_session *s = userdata;
        usec_t now = now_monotonic();
        char why[256];

        s->in_flight = false;
        if (s->stopped) {
                maybe_free(s);
                return;
        }
        if (r->error == 0 && r->ttl > 0 && !s->ready && r->ttl != s->c.ttl) {
                /* a lease of another TTL (a restart with another --lease-ttl):
                 * its deadlines would be wrong; a new one */
                s->lease = 0;
                keepalive(s);
                return;
        }
        if (r->error == 0 && r->ttl > 0) {
                s->last_ok = s->sent_at;
                acknowledged(s);
                if (!s->ready) {
                        s->ready = true;
                        if (s->c.ready)
                                s->c.ready(s->lease, true, s->c.userdata);
                }
                return;
        }
        if (r->error == 0 || r->error == -ENOENT) {
                if (!s->ready) {
                        /* the lease to resume is gone: a new one */
                        s->lease = 0;
                        keepalive(s);
                        return;
                }
                snprintf(why, sizeof why, "lease %llx expired (etcd no longer knows it)",
                         (unsigned long long) s->lease);
                lost(s, -ENOENT, why);
                return;
        }
        if (s->ready && now >= s->last_ok + (usec_t) s->c.ttl * USEC_PER_SEC) {
                snprintf(why, sizeof why,
                         "no keepalive of lease %llx acknowledged for %llds (last error: %s)",
                         (unsigned long long) s->lease, (long long) s->c.ttl, strna(r->message));
                lost(s, -ETIMEDOUT, why);
        }
        /* else: again at the next tick */
}

static void on_grant(const etcd_result *r, void *userdata) {
        etcd_session *s = userdata;

        s->in_flight = false;
        if (s->stopped) {
                maybe_free(s);
                return;
        }
        if (r->error < 0 || r->lease_id == 0)
                return; /* tried again at the next tick */
        s->lease = r->lease_id;
        s->last_ok = s->sent_at;
        s->ready = true;
        acknowledged(s);
        if (s->c.ready)
                s->c.ready(s->lease, false, s->c.userdata);
}

static void keepalive(etcd_session *s) {
        int r;

        if (s->in_flight || s->ended || s->stopped)
                return;
        s->sent_at = now_monotonic();
        if (s->lease)
                r = etcd_lease_keepalive(s->e, s->lease, on_keepalive, s);
        else
                r = etcd_lease_grant(s->e, s->c.ttl, on_grant, s);
        s->in_flight = r >= 0;
}

/* A keepalive stuck on a dead connection answers only when its request
 * times out (per endpoint): the session is lost a TTL after the last
 * acknowledgement all the same, to the millisecond. */
static bool expired(etcd_session *s) {
        char why[256];

        if (!s->ready || s->ended ||
            now_monotonic() < s->last_ok + (usec_t) s->c.ttl * USEC_PER_SEC)
                return false;
        snprintf(why, sizeof why, "no keepalive of lease %llx acknowledged for %llds",
                 (unsigned long long) s->lease, (long long) s->c.ttl);
        etcd_cancel_calls(s->e, s);
        s->in_flight = false;
        lost(s, -ETIMEDOUT, why);
        return true;
}

static void on_deadline(uv_timer_t *t) {
        etcd_session *s = t->data;

        /* libuv counts from its cached, whole-millisecond time: the timer
         * may fire a moment early; then again for what is left */
        if (!expired(s) && s->ready && !s->ended)
                acknowledged(s);
}

static void on_tick(uv_timer_t *t) {
        etcd_session *s = t->data;

        if (!expired(s))
                keepalive(s);
}

int etcd_session_start(etcd *e, const etcd_session_config *c, etcd_session **ret) {
        etcd_session *s;
        uint64_t every;

        if (c->ttl < 2)
                return -EINVAL;
        s = new0(etcd_session, 1);
        if (!s)
                return -ENOMEM;
        s->e = e;
        s->c = *c;
        s->lease = c->resume_lease;
        uv_timer_init(etcd_loop(e), &s->tick);
        uv_timer_init(etcd_loop(e), &s->deadline);
        s->tick.data = s->deadline.data = s;
        s->timers_open = 2;
        every = (uint64_t) c->ttl * 1000 / 3;
        uv_timer_start(&s->tick, on_tick, every, every);
        keepalive(s);
        *ret = s;
        return 0;
}

int64_t etcd_session_lease(const etcd_session *s) {
        return s->ready ? s->lease : 0;
}

usec_t etcd_session_safe_until(const etcd_session *s) {
        return s->ready && !s->ended ? s->last_ok + (usec_t) s->c.ttl * USEC_PER_SEC : 0;
}
