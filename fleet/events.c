/* SPDX-License-Identifier: MIT */

/*
 * The fleet's events (docs/fleet.md §3.3): P/v1/events/NS/NAME, so that
 * `kubectl describe` on any node shows what the leader decided (scaling,
 * scheduling, node loss) and what each node did to its pods (started,
 * killed, back-off), each event naming the node it came from.
 *
 * Events are not declared state. A node folds a repeat of its own into one
 * event (the store counts it; the fold key has the node in it, so a node
 * writes only its own events) and writes them without compares, on a lease
 * of an hour that it takes anew every EV_LEASE_TURN, so that etcd forgets
 * them as the store does. Rate-limited: at most one txn of FLEET_EV_BATCH
 * per EV_INTERVAL_MS, within a budget of EV_RATE a second (EV_BURST at
 * once); a repeat meanwhile is written once; what waits is bounded
 * (EV_PENDING), and an event older than the store keeps, or larger than
 * EV_SIZE_MAX, is not written.
 * Nothing waits for them and nothing is undone when a write fails: it is
 * tried again. The deletions of the store's pruning are not sent (the
 * lease does that).
 *
 * Every node mirrors them into its store — an older copy never over a
 * newer one; a burst (a relist, a fleet's rollout) applied at once, and of
 * it the newest only — and prunes them there as its own; a (re)list reads
 * the newest FLEET_EVENTS_LISTED only.
 */

#include "fleet-internal.h"

#define EV_INTERVAL_MS 500
#define EV_RETRY_MS 5000 /* after a write etcd refused */
#define EV_RATE 20       /* events written a second, sustained ... */
#define EV_BURST 200     /* ... and at once */
#define EV_PENDING 1000  /* this node's events waiting to be written: as many as a store keeps */
/* An event larger is not written (a list reads the newest
 * FLEET_EVENTS_LISTED: under 11 MB in all) */
#define EV_SIZE_MAX (8 * 1024)
#define EV_LEASE_TTL (STORE_EVENTS_MAX_AGE / USEC_PER_SEC)
#define EV_LEASE_TURN (10 * 60 * USEC_PER_SEC)
#define EV_APPLY_MS 100                  /* etcd's events wait that long to be applied ... */
#define EV_IN_MAX (4 * STORE_EVENTS_MAX) /* ... unless that many do */

static void schedule_in(fleet *f, uint64_t msec) {
        if (!f->closing && !uv_is_active((uv_handle_t *) &f->ev.timer) &&
            tend_hashmap_size(f->ev.out) > 0)
                uv_timer_start(&f->ev.timer, fleet__events_flush_cb, msec, 0);
}

/* The next write: EV_INTERVAL_MS after the last, and once the budget has an event. */
static void schedule(fleet *f) {
        usec_t now = now_monotonic(), next = f->ev.last + EV_INTERVAL_MS * USEC_PER_MSEC;

        if (f->ev.tokens < 1)
                next = MAX(next,
                           f->ev.refilled + (usec_t) ((1 - f->ev.tokens) * USEC_PER_SEC / EV_RATE));
        schedule_in(f, next > now ? (next - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC : 0);
}

static void refill(fleet *f, usec_t now) {
        if (f->ev.refilled)
                f->ev.tokens = MIN((double) EV_BURST,
                                   f->ev.tokens + (double) (now - f->ev.refilled) * EV_RATE /
                                                          USEC_PER_SEC);
        else
                f->ev.tokens = EV_BURST;
        f->ev.refilled = now;
}

/* An event's lastTimestamp (JSON); 0: none. */
static usec_t last_seen(const json_t *ev) {
        const char *t = json_string_value(json_object_get(ev, "lastTimestamp"));
        usec_t u = 0;

        return t && parse_timestamp(t, &u) >= 0 ? u : 0;
}

static bool in_flight(fleet *f, const char *key) {
        for (size_t i = 0; i < f->ev.n_sent; i++)
                if (streq(f->ev.sent_keys[i], key))
                        return true;
        return false;
}

void fleet__events_local(fleet *f, store_change change, const spec_event *e) {
        _cleanup_free_ char *key = strprintf("%s/%s", strempty(e->metadata.namespace),
                                             strempty(e->metadata.name));
        json_t *old = NULL, *j;

        if (!key) {
                log_oom();
                return;
        }
        if (change == STORE_DELETED) { /* pruned here: etcd's lease prunes it there */
                json_decref(tend_hashmap_remove(f->ev.out, key));
                return;
        }
        if (tend_hashmap_size(f->ev.out) >= EV_PENDING && !tend_hashmap_get(f->ev.out, key)) {
                if (!f->ev.dropping)
                        log_warning("fleet: more than %d events wait for etcd; the newest stay on "
                                    "this node",
                                    EV_PENDING);
                f->ev.dropping = true;
                return;
        }
        f->ev.dropping = false;
        j = store_note_json(f->m.store) ? json_loads(store_note_json(f->m.store), 0, NULL) : NULL;
        if (j)
                (void) json_object_del(json_object_get(j, "metadata"), "resourceVersion");
        if (!j || tend_hashmap_put(f->ev.out, key, j, (void **) &old) < 0) {
                json_decref(j);
                log_oom();
                return;
        }
        json_decref(old);
        schedule(f);
}

static void on_granted(const etcd_result *r, void *userdata) {
        fleet *f = userdata;

        f->ev.granting = false;
        if (r->error < 0 || !r->lease_id) {
                log_warning("fleet: a lease for events: %s; trying again",
                            strna(r->message ?: "no lease in the answer"));
                schedule_in(f, EV_RETRY_MS);
                return;
        }
        f->ev.lease = r->lease_id;
        f->ev.lease_at = now_monotonic();
        schedule(f);
}

static void on_written(const etcd_result *r, void *userdata) {
        fleet *f = userdata;

        f->ev.txn_out = false;
        if (r->error < 0) {
                /* a lease etcd no longer has (its data went, or revoked) is taken anew */
                if (r->message && strstr(r->message, "lease not found"))
                        f->ev.lease = 0;
                else if (!f->ev.failing) /* said once until a write goes through */
                        log_warning("fleet: writing %zu event%s to etcd: %s; trying again every "
                                    "%d s",
                                    f->ev.n_sent, f->ev.n_sent == 1 ? "" : "s", strna(r->message),
                                    EV_RETRY_MS / 1000);
                f->ev.failing = f->ev.lease != 0;
                /* back, unless the event changed meanwhile (past EV_PENDING
                 * if need be: by one batch at most); not those left out */
                for (size_t i = 0; i < f->ev.n_sent; i++)
                        if (f->ev.sent[i] && !tend_hashmap_get(f->ev.out, f->ev.sent_keys[i]) &&
                            tend_hashmap_put(f->ev.out, f->ev.sent_keys[i], f->ev.sent[i], NULL) >=
                                    0)
                                f->ev.sent[i] = NULL;
        } else
                f->ev.failing = false;
        for (size_t i = 0; i < f->ev.n_sent; i++) {
                free(f->ev.sent_keys[i]);
                json_decref(f->ev.sent[i]);
        }
        f->ev.n_sent = 0;
        if (f->ev.failing && !f->closing) /* not sooner, whatever came meanwhile */
                uv_timer_start(&f->ev.timer, fleet__events_flush_cb, EV_RETRY_MS, 0);
        else
                schedule(f);
}

void fleet__events_flush_cb(uv_timer_t *t) {
        fleet *f = t->data;
        _cleanup_(json_decrefp) json_t *ops = json_array();
        usec_t now = now_monotonic(), wall = now_realtime();
        const char *key;
        void *v;
        size_t n = 0, budget, skipped = 0;

        if (f->ev.txn_out || f->ev.granting || f->closing || !ops)
                return;
        if (!f->joined || !f->e) { /* (re)joining: later */
                schedule_in(f, 1000);
                return;
        }
        f->ev.last = now;
        if (!f->ev.lease || now - f->ev.lease_at >= EV_LEASE_TURN) {
                if (etcd_lease_grant(f->e, EV_LEASE_TTL, on_granted, f) >= 0)
                        f->ev.granting = true;
                else
                        schedule_in(f, EV_RETRY_MS);
                return;
        }
        refill(f, now);
        budget = (size_t) MIN((double) FLEET_EV_BATCH, f->ev.tokens);
        for (size_t i = 0; n < budget && tend_hashmap_next(f->ev.out, &i, &key, &v);) {
                usec_t seen = last_seen(v);
                /* older than a store keeps (a node cut off for long): not written */
                if (seen && seen + STORE_EVENTS_MAX_AGE < wall) {
                        if ((f->ev.sent_keys[n] = strdup(key)))
                                f->ev.sent[n++] = NULL, skipped++;
                        continue;
                }
                _cleanup_free_ char *k = strprintf("%s%s", f->p_events, key), *text = NULL;
                text = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
                if (text && strlen(text) > EV_SIZE_MAX) { /* stays on this node */
                        log_debug("fleet: event %s is larger than %d bytes; not written", key,
                                  EV_SIZE_MAX);
                        if ((f->ev.sent_keys[n] = strdup(key)))
                                f->ev.sent[n++] = NULL, skipped++;
                        continue;
                }
                if (!k || !text ||
                    json_array_append_new(ops, etcd_op_put(k, text, strlen(text), f->ev.lease)) < 0)
                        break;
                f->ev.sent_keys[n] = strdup(key);
                f->ev.sent[n] = json_incref(v);
                if (!f->ev.sent_keys[n]) {
                        json_decref(f->ev.sent[n]);
                        break;
                }
                n++;
        }
        /* out of the queue: a fold from now on is a write of its own */
        for (size_t i = 0; i < n; i++)
                json_decref(tend_hashmap_remove(f->ev.out, f->ev.sent_keys[i]));
        f->ev.tokens -= (double) (n - skipped);
        if (n == skipped) { /* nothing to write */
                for (size_t i = 0; i < n; i++)
                        free(f->ev.sent_keys[i]);
                schedule(f);
                return;
        }
        f->ev.n_sent = n;
        if (etcd_txn(f->e, json_array(), TAKE_PTR(ops), json_array(), on_written, f) < 0) {
                on_written(&(etcd_result){ .error = -ENOMEM, .message = "out of memory" }, f);
                return;
        }
        f->ev.txn_out = true;
}

static void apply(fleet *f);

bool fleet__events_key(fleet *f, const etcd_kv *kv, bool deleted) {
        const char *rest = startswith(kv->key, f->p_events), *slash;
        json_t *old = NULL, *v = NULL;

        if (!rest)
                return false;
        if (!(slash = strchr(rest, '/')) || slash == rest || !slash[1])
                return true; /* not an event's key */
        if (!f->ev.in && !(f->ev.in = tend_hashmap_new()))
                return true; /* out of memory: skipped */
        if (!deleted && !(v = etcd_kv_json(kv))) {
                log_debug("fleet: %s is not JSON; skipped", kv->key);
                return true;
        }
        /* null: a deletion */
        if (tend_hashmap_put(f->ev.in, rest, v ?: json_null(), (void **) &old) < 0) {
                json_decref(v);
                return true;
        }
        json_decref(old);
        /* A moment later, so that a burst (a relist, a fleet's rollout) is
         * applied once, its newest only; at once when that many wait. */
        if (tend_hashmap_size(f->ev.in) >= EV_IN_MAX)
                apply(f);
        else if (!f->closing && !uv_is_active((uv_handle_t *) &f->ev.apply))
                uv_timer_start(&f->ev.apply, fleet__events_apply_cb, EV_APPLY_MS, 0);
        return true;
}

/* Whether the event e of etcd's is older than cur, the local one: the
 * same event (one node writes it), counted fewer times — its count only
 * grows, where its node's clock may step back — or as many, seen before. */
static bool older(const spec_event *e, const spec_event *cur) {
        return e->count < cur->count ||
               (e->count == cur->count && e->last_timestamp < cur->last_timestamp);
}

typedef struct incoming {
        const char *key;
        json_t *v;
        usec_t seen; /* lastTimestamp; 0: a deletion (or none) */
} incoming;

static int newest_first(const void *a, const void *b) {
        usec_t x = ((const incoming *) a)->seen, y = ((const incoming *) b)->seen;
        return x > y ? -1 : x < y;
}

static void apply_one(fleet *f, const char *key, json_t *v) {
        const spec_type *t = store_kind_type(STORE_EVENT);
        const char *slash = strchr(key, '/');
        _cleanup_free_ char *ns = strndup(key, (size_t) (slash - key));
        const spec_event *cur = ns ? store_get(f->m.store, STORE_EVENT, ns, slash + 1) : NULL;
        spec_errors errs = {};
        spec_event *e = NULL;

        /* this node's write of it is newer */
        if (!ns || tend_hashmap_get(f->ev.out, key) || in_flight(f, key))
                return;
        if (json_is_null(v)) {
                if (cur)
                        (void) store_delete(f->m.store, STORE_EVENT, ns, slash + 1);
                return;
        }
        if (spec_decode_new(t, v, &errs, (void **) &e) < 0) {
                spec_errors_done(&errs);
                return;
        }
        spec_errors_done(&errs);
        if (cur) {
                /* this node's own, back; or an older copy (a relist) */
                e->metadata.resource_version = cur->metadata.resource_version;
                if (older(e, cur) || spec_equal(t, e, cur)) {
                        spec_free(t, e);
                        return;
                }
        }
        (void) store_put(f->m.store, STORE_EVENT, e, NULL);
}

/* What etcd brought into the local store, in one commit: the deletions, and
 * of the puts the newest STORE_EVENTS_MAX (the store would prune the
 * others at once); then the store prunes as it would its own. */
static void apply(fleet *f) {
        size_t n = f->ev.in ? tend_hashmap_size(f->ev.in) : 0, k = 0, puts = 0;
        _cleanup_free_ incoming *in = NULL;
        const char *key;
        void *v;
        int r;

        uv_timer_stop(&f->ev.apply);
        if (n == 0 || !f->m.store)
                return;
        in = new0(incoming, n);
        if (!in)
                return; /* out of memory: kept for the next */
        for (size_t i = 0; tend_hashmap_next(f->ev.in, &i, &key, &v) && k < n;) {
                in[k++] = (incoming){ .key = key, .v = v, .seen = last_seen(v) };
        }
        qsort(in, k, sizeof *in, newest_first);
        (void) store_commit(f->m.store, false); /* a pass's, should one be open */
        f->m.applying = true;
        for (size_t i = 0; i < k; i++)
                if (json_is_null(in[i].v) || puts++ < STORE_EVENTS_MAX)
                        apply_one(f, in[i].key, in[i].v);
        r = store_commit(f->m.store, false);
        if (r < 0)
                log_warning_errno(r, "fleet: cannot write events to the store: %m");
        f->m.applying = false;
        /* (not applying: this node's own that go are no longer to be written) */
        r = store_prune_events(f->m.store, now_realtime());
        if (r >= 0)
                r = store_commit(f->m.store, false);
        if (r < 0)
                log_warning_errno(r, "fleet: pruning events: %m");
        for (size_t i = 0; i < k; i++)
                json_decref(in[i].v);
        tend_hashmap_free(f->ev.in);
        f->ev.in = tend_hashmap_new(); /* NULL: made again by the next key */
}

void fleet__events_apply_cb(uv_timer_t *t) {
        apply(t->data);
}

void fleet__events_relisted(fleet *f, const etcd_result *r) {
        _cleanup_(tend_hashmap_freep) tend_hashmap *present = tend_hashmap_new();
        _cleanup_strv_free_ char **gone = NULL;
        const void *const *items;
        size_t n;

        if (!present || !f->m.store)
                return;
        for (size_t i = 0; i < r->n_kvs; i++) {
                const char *rest = startswith(r->kvs[i].key, f->p_events);
                if (rest)
                        (void) tend_hashmap_put(present, rest, (void *) 1, NULL);
        }
        /* Another node's that the list lacks: its lease ran out while the
         * watch was down, or it is older than the newest the list reads.
         * This node's own stay (pruned by age, as on one host). */
        n = store_list(f->m.store, STORE_EVENT, &items);
        for (size_t i = 0; i < n; i++) {
                const spec_event *e = items[i];
                _cleanup_free_ char *key = strprintf("%s/%s", strempty(e->metadata.namespace),
                                                     strempty(e->metadata.name));
                if (key && !streq_ptr(e->source.host, f->node_name) &&
                    !tend_hashmap_get(present, key) && strv_extend(&gone, key) < 0)
                        return;
        }
        for (size_t i = 0; gone && gone[i]; i++) {
                _cleanup_free_ char *k = strprintf("%s%s", f->p_events, gone[i]);
                if (k)
                        (void) fleet__events_key(f, &(etcd_kv){ .key = k }, true);
        }
}

int fleet__events_init(fleet *f) {
        f->ev.out = tend_hashmap_new();
        f->ev.in = tend_hashmap_new();
        if (!f->ev.out || !f->ev.in)
                return -ENOMEM;
        /* in a fleet an event says which node it came from */
        return store_set_host(f->m.store, f->node_name);
}

void fleet__events_free(fleet *f) {
        const char *key;
        void *v;

        for (size_t i = 0; f->ev.out && tend_hashmap_next(f->ev.out, &i, &key, &v);)
                json_decref(v);
        for (size_t i = 0; f->ev.in && tend_hashmap_next(f->ev.in, &i, &key, &v);)
                json_decref(v);
        tend_hashmap_free(f->ev.out);
        tend_hashmap_free(f->ev.in);
        for (size_t i = 0; i < f->ev.n_sent; i++) {
                free(f->ev.sent_keys[i]);
                json_decref(f->ev.sent[i]);
        }
}
