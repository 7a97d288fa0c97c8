/* SPDX-License-Identifier: MIT */

/*
 * The fleet's events (fleet.md §3.3): P/v1/events/NS/NAME, so that
 * `kubectl describe` on any node shows what the leader decided (scaling,
 * scheduling, node loss) and what each node did to its pods (started,
 * killed, back-off), each event naming the node it came from.
 *
 * Events are not declared state: they are folded on the node that records
 * them (the store counts a repeat), written without compares (each node
 * writes its own; a fold of another node's event by a new leader is a
 * later count of the same thing), rate-limited (one txn of at most
 * FLEET_EV_BATCH events per EV_INTERVAL_MS per node, a repeat within it
 * written once), on a lease of an hour that the node takes anew every
 * EV_LEASE_TURN, so that etcd forgets them as the store does. Nothing
 * waits for them and nothing is undone when a write fails: it is tried
 * again. The deletions of the store's pruning are not sent (the lease
 * does that); etcd's deletions (the lease ran out) are applied here.
 */

#include "fleet-internal.h"

#define EV_INTERVAL_MS 500
#define EV_PENDING 1000 /* this node's events waiting to be written: as many as a store keeps */
#define EV_LEASE_TTL (STORE_EVENTS_MAX_AGE / USEC_PER_SEC)
#define EV_LEASE_TURN (10 * 60 * USEC_PER_SEC)

/* The key's "ns/name" (new), or NULL for a key that is not an event's. */
static char *event_name(fleet *f, const char *key) {
        const char *rest = startswith(key, f->p_events), *slash;

        if (!rest || !(slash = strchr(rest, '/')) || slash == rest || !slash[1])
                return NULL;
        return strdup(rest);
}

static void schedule(fleet *f) {
        usec_t now = now_monotonic(), next = f->ev_last + EV_INTERVAL_MS * USEC_PER_MSEC;

        if (f->closing || uv_is_active((uv_handle_t *) &f->ev_timer) ||
            tend_hashmap_size(f->ev_out) == 0)
                return;
        uv_timer_start(&f->ev_timer, fleet__events_flush_cb,
                       next > now ? (next - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC : 0, 0);
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
                json_decref(tend_hashmap_remove(f->ev_out, key));
                return;
        }
        if (tend_hashmap_size(f->ev_out) >= EV_PENDING && !tend_hashmap_get(f->ev_out, key)) {
                if (!f->ev_dropping)
                        log_warning("fleet: more than %d events wait for etcd; the newest stay on "
                                    "this node",
                                    EV_PENDING);
                f->ev_dropping = true;
                return;
        }
        f->ev_dropping = false;
        j = store_note_json(f->store) ? json_loads(store_note_json(f->store), 0, NULL) : NULL;
        if (j)
                (void) json_object_del(json_object_get(j, "metadata"), "resourceVersion");
        if (!j || tend_hashmap_put(f->ev_out, key, j, (void **) &old) < 0) {
                json_decref(j);
                log_oom();
                return;
        }
        json_decref(old);
        schedule(f);
}

static void on_granted(const etcd_result *r, void *userdata) {
        fleet *f = userdata;

        f->ev_granting = false;
        if (r->error < 0 || !r->lease_id) {
                log_warning("fleet: a lease for events: %s; trying again",
                            strna(r->message ?: "no lease in the answer"));
                f->ev_last = now_monotonic();
        } else {
                f->ev_lease = r->lease_id;
                f->ev_lease_at = now_monotonic();
                f->ev_last = 0;
        }
        schedule(f);
}

static void on_written(const etcd_result *r, void *userdata) {
        fleet *f = userdata;

        f->ev_txn_out = false;
        if (r->error < 0) {
                /* a lease etcd lost (its data went) is taken anew */
                if (r->message && strstr(r->message, "lease not found"))
                        f->ev_lease = 0;
                log_debug("fleet: writing %zu events: %s; trying again", f->n_ev_sent,
                          strna(r->message));
                /* back, unless the event changed meanwhile */
                for (size_t i = 0; i < f->n_ev_sent; i++) {
                        json_t *cur = tend_hashmap_get(f->ev_out, f->ev_sent_keys[i]);
                        if (!cur && f->ev_sent[i] &&
                            tend_hashmap_put(f->ev_out, f->ev_sent_keys[i], f->ev_sent[i], NULL) >=
                                    0)
                                f->ev_sent[i] = NULL;
                }
        }
        for (size_t i = 0; i < f->n_ev_sent; i++) {
                free(f->ev_sent_keys[i]);
                json_decref(f->ev_sent[i]);
        }
        f->n_ev_sent = 0;
        schedule(f);
}

void fleet__events_flush_cb(uv_timer_t *t) {
        fleet *f = t->data;
        _cleanup_(json_decrefp) json_t *ops = json_array();
        const char *key;
        void *v;
        size_t n = 0;

        if (f->ev_txn_out || f->ev_granting || f->closing || !ops)
                return;
        if (!f->joined || !f->e) { /* (re)joining: later */
                uv_timer_start(&f->ev_timer, fleet__events_flush_cb, 1000, 0);
                return;
        }
        f->ev_last = now_monotonic();
        if (!f->ev_lease || f->ev_last - f->ev_lease_at >= EV_LEASE_TURN) {
                if (etcd_lease_grant(f->e, EV_LEASE_TTL, on_granted, f) >= 0)
                        f->ev_granting = true;
                else
                        schedule(f);
                return;
        }
        for (size_t i = 0; n < FLEET_EV_BATCH && tend_hashmap_next(f->ev_out, &i, &key, &v);) {
                _cleanup_free_ char *k = strprintf("%s%s", f->p_events, key), *text = NULL;
                text = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
                if (!k || !text ||
                    json_array_append_new(ops, etcd_op_put(k, text, strlen(text), f->ev_lease)) < 0)
                        break;
                f->ev_sent_keys[n] = strdup(key);
                f->ev_sent[n] = json_incref(v);
                if (!f->ev_sent_keys[n]) {
                        json_decref(f->ev_sent[n]);
                        break;
                }
                n++;
        }
        /* out of the queue: a fold from now on is a write of its own */
        for (size_t i = 0; i < n; i++)
                json_decref(tend_hashmap_remove(f->ev_out, f->ev_sent_keys[i]));
        f->n_ev_sent = n;
        if (n == 0) {
                schedule(f);
                return;
        }
        if (etcd_txn(f->e, json_array(), TAKE_PTR(ops), json_array(), on_written, f) < 0) {
                on_written(&(etcd_result){ .error = -ENOMEM }, f);
                return;
        }
        f->ev_txn_out = true;
}

bool fleet__events_key(fleet *f, const etcd_kv *kv, bool deleted) {
        _cleanup_free_ char *key = NULL;
        json_t *old = NULL, *v = NULL;

        if (!startswith(kv->key, f->p_events))
                return false;
        if (!f->ev_in || !(key = event_name(f, kv->key)))
                return true;
        if (!deleted && !(v = json_loadb(kv->value, kv->value_len, 0, NULL))) {
                log_debug("fleet: %s is not JSON; skipped", kv->key);
                return true;
        }
        /* NULL value: a deletion */
        if (tend_hashmap_put(f->ev_in, key, v ?: json_null(), (void **) &old) < 0) {
                json_decref(v);
                return true;
        }
        json_decref(old);
        f->objs_dirty = true;
        return true;
}

void fleet__events_apply(fleet *f) {
        const spec_type *t = store_kind_type(STORE_EVENT);
        const char *key;
        void *v;

        for (size_t i = 0; f->ev_in && tend_hashmap_next(f->ev_in, &i, &key, &v);) {
                const char *slash = strchr(key, '/');
                _cleanup_free_ char *ns = strndup(key, (size_t) (slash - key));
                const spec_event *cur = ns ? store_get(f->store, STORE_EVENT, ns, slash + 1) : NULL;
                spec_errors errs = {};
                spec_event *e = NULL;

                if (!ns || tend_hashmap_get(f->ev_out, key))
                        continue; /* this node's fold of it is newer */
                if (json_is_null((json_t *) v)) {
                        if (cur)
                                (void) store_delete(f->store, STORE_EVENT, ns, slash + 1);
                        continue;
                }
                if (spec_decode_new(t, (json_t *) v, &errs, (void **) &e) < 0) {
                        spec_errors_done(&errs);
                        continue;
                }
                spec_errors_done(&errs);
                if (cur) { /* this node's own, back from etcd: no write */
                        e->metadata.resource_version = cur->metadata.resource_version;
                        if (spec_equal(t, e, cur)) {
                                spec_free(t, e);
                                continue;
                        }
                }
                (void) store_put(f->store, STORE_EVENT, e, NULL);
        }
        for (size_t i = 0; tend_hashmap_next(f->ev_in, &i, &key, &v);)
                json_decref(v);
        tend_hashmap_free(f->ev_in);
        f->ev_in = tend_hashmap_new(); /* NULL: etcd's events are not mirrored until a relist */
}

int fleet__events_init(fleet *f) {
        f->p_events = strprintf("%sevents/", f->p_all);
        f->ev_out = tend_hashmap_new();
        f->ev_in = tend_hashmap_new();
        if (!f->p_events || !f->ev_out || !f->ev_in)
                return -ENOMEM;
        /* in a fleet an event says which node it came from */
        return store_set_host(f->store, f->node_name);
}

void fleet__events_free(fleet *f) {
        const char *key;
        void *v;

        for (size_t i = 0; f->ev_out && tend_hashmap_next(f->ev_out, &i, &key, &v);)
                json_decref(v);
        for (size_t i = 0; f->ev_in && tend_hashmap_next(f->ev_in, &i, &key, &v);)
                json_decref(v);
        tend_hashmap_free(f->ev_out);
        tend_hashmap_free(f->ev_in);
        for (size_t i = 0; i < f->n_ev_sent; i++) {
                free(f->ev_sent_keys[i]);
                json_decref(f->ev_sent[i]);
        }
        free(f->p_events);
}
