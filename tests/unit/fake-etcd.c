/* SPDX-License-Identifier: MIT */

/* The fake etcd (see fake-etcd.h). */

#include <string.h>

#include "fake-etcd.h"

typedef struct fkv {
        char *key, *value;
        size_t len;
        int64_t create, mod, version, lease;
} fkv;

typedef struct fevent {
        bool deleted;
        fkv kv;
} fevent;

typedef enum call_type {
        CALL_TXN,
        CALL_RANGE,
        CALL_PUT,
        CALL_DELETE,
        CALL_COMPACT,
        CALL_GRANT,
        CALL_KEEPALIVE,
        CALL_REVOKE,
        CALL_SESSION,
} call_type;

typedef struct call call;
struct call {
        call *next;
        call_type type;
        json_t *req; /* TXN: {compare, success, failure}; others: the op's fields */
        etcd_cb cb;
        void *userdata;
        etcd_session *session;
        struct answer *answer; /* evaluated, its answer held back (fake_etcd_late) */
};

struct etcd_watch {
        etcd *e;
        etcd_watch *next;
        char *key, *end;
        int64_t next_rev;
        etcd_watch_events on_events;
        etcd_watch_end on_end;
        void *userdata;
        bool canceled;
};

struct etcd_session {
        etcd *e;
        etcd_session_config c;
        int64_t lease;
        bool ready, lost, stopped;
};

typedef struct flease {
        int64_t id, ttl;
        bool alive;
} flease;

struct etcd {
        uv_loop_t *loop;
        uv_idle_t *idle;
        fkv *kvs; /* sorted by key */
        size_t n_kvs;
        fevent *log; /* every change, in revision order */
        size_t n_log;
        int64_t revision, compacted, next_lease;
        flease *leases;
        size_t n_leases;
        call *calls;
        etcd_watch *watches;
        etcd_session *sessions[8];
        size_t n_sessions;
        bool hold, late, retried;
        call *answered; /* evaluated txns whose answers wait (late) */
        unsigned txns, txns_ok;
};

static etcd *current;

etcd *fake_etcd(void) {
        return current;
}

/* ---- the store --------------------------------------------------------------------------------
 */

static fkv *find(const etcd *e, const char *key) {
        for (size_t i = 0; i < e->n_kvs; i++)
                if (streq(e->kvs[i].key, key))
                        return &e->kvs[i];
        return NULL;
}

static bool in_range(const char *k, const char *key, const char *end) {
        return end ? strcmp(k, key) >= 0 && strcmp(k, end) < 0 : streq(k, key);
}

static fkv kv_copy(const fkv *kv) {
        fkv c = *kv;

        c.key = strdup(kv->key);
        c.value = kv->value ? malloc(kv->len + 1) : NULL;
        if (c.value) {
                memcpy(c.value, kv->value, kv->len);
                c.value[kv->len] = 0;
        }
        return c;
}

static void log_add(etcd *e, bool deleted, const fkv *kv) {
        e->log = realloc(e->log, (e->n_log + 1) * sizeof *e->log);
        e->log[e->n_log++] = (fevent){ .deleted = deleted, .kv = kv_copy(kv) };
}

/* At revision rev (the caller's: one per txn). */
static void do_put(etcd *e, const char *key, const char *value, size_t len, int64_t lease,
                   int64_t rev) {
        fkv *kv = find(e, key);
        size_t i;

        if (!kv) {
                for (i = 0; i < e->n_kvs && strcmp(e->kvs[i].key, key) < 0; i++)
                        ;
                e->kvs = realloc(e->kvs, (e->n_kvs + 1) * sizeof *e->kvs);
                memmove(&e->kvs[i + 1], &e->kvs[i], (e->n_kvs - i) * sizeof *e->kvs);
                e->n_kvs++;
                kv = &e->kvs[i];
                *kv = (fkv){ .key = strdup(key), .create = rev };
        }
        free(kv->value);
        kv->value = malloc(len + 1);
        memcpy(kv->value, value, len);
        kv->value[len] = 0;
        kv->len = len;
        kv->mod = rev;
        kv->version++;
        kv->lease = lease;
        log_add(e, false, kv);
}

static int64_t do_delete(etcd *e, const char *key, const char *end, int64_t rev) {
        int64_t n = 0;

        for (size_t i = 0; i < e->n_kvs;) {
                fkv *kv = &e->kvs[i];
                if (!in_range(kv->key, key, end)) {
                        i++;
                        continue;
                }
                kv->mod = rev;
                log_add(e, true, &(fkv){ .key = kv->key, .mod = rev });
                free(kv->key);
                free(kv->value);
                memmove(kv, kv + 1, (e->n_kvs - i - 1) * sizeof *kv);
                e->n_kvs--;
                n++;
        }
        return n;
}

static void lease_gone(etcd *e, int64_t id) {
        bool any = false;

        for (size_t i = 0; i < e->n_kvs; i++)
                any |= e->kvs[i].lease == id;
        if (any) {
                int64_t rev = ++e->revision;
                for (size_t i = 0; i < e->n_kvs;)
                        if (e->kvs[i].lease == id) {
                                /* (a copy: the delete frees the key) */
                                _cleanup_free_ char *key = strdup(e->kvs[i].key);
                                do_delete(e, key, NULL, rev);
                        } else
                                i++;
        }
        for (size_t i = 0; i < e->n_leases; i++)
                if (e->leases[i].id == id)
                        e->leases[i].alive = false;
}

static flease *lease_find(etcd *e, int64_t id) {
        for (size_t i = 0; i < e->n_leases; i++)
                if (e->leases[i].id == id && e->leases[i].alive)
                        return &e->leases[i];
        return NULL;
}

static int64_t lease_grant(etcd *e, int64_t ttl) {
        e->leases = realloc(e->leases, (e->n_leases + 1) * sizeof *e->leases);
        e->leases[e->n_leases++] = (flease){ .id = ++e->next_lease + 0x7e57000,
                                             .ttl = ttl,
                                             .alive = true };
        return e->leases[e->n_leases - 1].id;
}

/* ---- answers ----------------------------------------------------------------------------------
 */

typedef struct answer {
        etcd_result r;
        etcd_kv *kvs;
        size_t n;
} answer;

static void answer_kv(answer *a, const fkv *kv) {
        a->kvs = realloc(a->kvs, (a->n + 1) * sizeof *a->kvs);
        fkv c = kv_copy(kv);
        a->kvs[a->n++] = (etcd_kv){ .key = c.key,
                                    .value = c.value,
                                    .value_len = c.len,
                                    .create_revision = c.create,
                                    .mod_revision = c.mod,
                                    .version = c.version,
                                    .lease = c.lease };
}

static int cmp_newest(const void *a, const void *b) {
        const fkv *x = *(const fkv *const *) a, *y = *(const fkv *const *) b;
        return x->mod < y->mod ? 1 : x->mod > y->mod ? -1 : 0;
}

static void range(etcd *e, answer *a, json_t *op) {
        const char *key = json_string_value(json_object_get(op, "key")),
                   *end = json_string_value(json_object_get(op, "end"));
        int64_t limit = json_integer_value(json_object_get(op, "limit"));
        const fkv **v = calloc(e->n_kvs + 1, sizeof *v);
        size_t n = 0;

        for (size_t i = 0; i < e->n_kvs; i++)
                if (in_range(e->kvs[i].key, key, end))
                        v[n++] = &e->kvs[i];
        if (limit > 0) {
                qsort(v, n, sizeof *v, cmp_newest);
                if ((size_t) limit < n)
                        n = (size_t) limit;
        }
        for (size_t i = 0; i < n; i++)
                answer_kv(a, v[i]);
        a->r.count += (int64_t) n;
        free(v);
}

static bool compare(etcd *e, json_t *c) {
        const fkv *kv = find(e, json_string_value(json_object_get(c, "key")));
        const char *target = json_string_value(json_object_get(c, "target")),
                   *result = json_string_value(json_object_get(c, "result"));
        int64_t want = json_integer_value(json_object_get(c, "rev")), have;

        have = !kv                       ? 0
               : streq(target, "create") ? kv->create
               : streq(target, "mod")    ? kv->mod
                                         : kv->version;
        return streq(result, "EQUAL")       ? have == want
               : streq(result, "NOT_EQUAL") ? have != want
               : streq(result, "LESS")      ? have < want
                                            : have > want;
}

static void txn(etcd *e, answer *a, json_t *req) {
        json_t *c, *op, *ops;
        size_t i;
        bool ok = true, writes = false;

        json_array_foreach (json_object_get(req, "compare"), i, c)
                ok &= compare(e, c);
        ops = json_object_get(req, ok ? "success" : "failure");
        json_array_foreach (ops, i, op)
                writes |= !streq(json_string_value(json_object_get(op, "op")), "range");
        int64_t rev = writes ? ++e->revision : e->revision;
        json_array_foreach (ops, i, op) {
                const char *kind = json_string_value(json_object_get(op, "op")),
                           *key = json_string_value(json_object_get(op, "key"));
                json_t *value = json_object_get(op, "value");
                if (streq(kind, "put"))
                        do_put(e, key, json_string_value(value), json_string_length(value),
                               json_integer_value(json_object_get(op, "lease")), rev);
                else if (streq(kind, "delete"))
                        a->r.deleted += do_delete(
                                e, key, json_string_value(json_object_get(op, "end")), rev);
                else
                        range(e, a, op);
        }
        a->r.succeeded = ok;
        e->txns++;
        e->txns_ok += ok;
}

static void session_ready(etcd *e, etcd_session *s) {
        bool resumed = s->c.resume_lease && lease_find(e, s->c.resume_lease);

        s->lease = resumed ? s->c.resume_lease : lease_grant(e, s->c.ttl);
        s->ready = true;
        s->c.ready(s->lease, resumed, s->c.userdata);
}

static void answer_free(answer *a) {
        for (size_t i = 0; i < a->n; i++) {
                free(a->kvs[i].key);
                free(a->kvs[i].value);
        }
        free(a->kvs);
        free(a);
}

static void deliver(call *c) {
        c->cb(&c->answer->r, c->userdata);
        answer_free(c->answer);
        c->answer = NULL;
}

/* Evaluates c; its answer in c->answer (NULL: none to give). */
static void evaluate(etcd *e, call *c) {
        answer *ap = calloc(1, sizeof *ap), a = {};
        json_t *q = c->req;
        const char *key = json_string_value(json_object_get(q, "key"));
        int64_t rev;

        switch (c->type) {
        case CALL_SESSION:
                if (!c->session->stopped)
                        session_ready(e, c->session);
                free(ap);
                return;
        case CALL_TXN:
                if (e->retried) {
                        /* the first try applied, its answer lost; the one
                         * sent again compares against it */
                        answer first = {};
                        txn(e, &first, q);
                        for (size_t i = 0; i < first.n; i++) {
                                free(first.kvs[i].key);
                                free(first.kvs[i].value);
                        }
                        free(first.kvs);
                        txn(e, &a, q);
                        a.r.unknown = true;
                } else
                        txn(e, &a, q);
                break;
        case CALL_RANGE:
                range(e, &a, q);
                break;
        case CALL_PUT: {
                json_t *v = json_object_get(q, "value");
                do_put(e, key, json_string_value(v), json_string_length(v),
                       json_integer_value(json_object_get(q, "lease")), ++e->revision);
                break;
        }
        case CALL_DELETE:
                rev = e->revision + 1;
                a.r.deleted = do_delete(e, key, json_string_value(json_object_get(q, "end")), rev);
                if (a.r.deleted)
                        e->revision = rev;
                break;
        case CALL_COMPACT:
                e->compacted = json_integer_value(json_object_get(q, "rev"));
                break;
        case CALL_GRANT:
                a.r.lease_id = lease_grant(e, json_integer_value(json_object_get(q, "ttl")));
                a.r.ttl = json_integer_value(json_object_get(q, "ttl"));
                break;
        case CALL_KEEPALIVE: {
                flease *l = lease_find(e, json_integer_value(json_object_get(q, "id")));
                a.r.lease_id = json_integer_value(json_object_get(q, "id"));
                a.r.ttl = l ? l->ttl : 0;
                break;
        }
        case CALL_REVOKE:
                lease_gone(e, json_integer_value(json_object_get(q, "id")));
                break;
        }
        a.r.revision = e->revision;
        a.r.kvs = a.kvs;
        a.r.n_kvs = a.n;
        a.r.body = q;
        *ap = a;
        c->answer = ap;
}

/* The watchers are told what they have not seen, one revision per call. */
static void tell_watchers(etcd *e) {
        for (etcd_watch *w = e->watches; w; w = w->next) {
                size_t i = 0;
                while (!w->canceled) {
                        while (i < e->n_log && e->log[i].kv.mod < w->next_rev)
                                i++;
                        if (i >= e->n_log)
                                break;
                        int64_t rev = e->log[i].kv.mod;
                        etcd_event ev[64];
                        size_t n = 0;
                        for (; i < e->n_log && e->log[i].kv.mod == rev; i++) {
                                const fkv *kv = &e->log[i].kv;
                                if (!in_range(kv->key, w->key, w->end) || n >= 64)
                                        continue;
                                ev[n].deleted = e->log[i].deleted;
                                ev[n].kv = (etcd_kv){ .key = kv->key,
                                                      .value = kv->value,
                                                      .value_len = kv->len,
                                                      .create_revision = kv->create,
                                                      .mod_revision = kv->mod,
                                                      .version = kv->version,
                                                      .lease = kv->lease };
                                ev[n].kv.json = kv->value ? json_loadb(kv->value, kv->len, 0, NULL)
                                                          : NULL;
                                n++;
                        }
                        w->next_rev = rev + 1;
                        if (n)
                                w->on_events(ev, n, rev, w->userdata);
                        for (size_t k = 0; k < n; k++)
                                json_decref(ev[k].kv.json);
                }
        }
        for (etcd_watch **p = &e->watches; *p;) {
                etcd_watch *w = *p;
                if (!w->canceled) {
                        p = &w->next;
                        continue;
                }
                *p = w->next;
                free(w->key);
                free(w->end);
                free(w);
        }
}

static void on_idle(uv_idle_t *h) {
        etcd *e = h->data;

        for (;;) {
                call **p = &e->calls, *c;
                while (*p && (*p)->type == CALL_TXN && e->hold)
                        p = &(*p)->next;
                if (!(c = *p))
                        break;
                *p = c->next;
                evaluate(e, c);
                if (c->answer && c->type == CALL_TXN && e->late) {
                        call **q;
                        for (q = &e->answered; *q; q = &(*q)->next)
                                ;
                        c->next = NULL;
                        *q = c;
                        continue;
                }
                if (c->answer)
                        deliver(c);
                json_decref(c->req);
                free(c);
                tell_watchers(e);
        }
        tell_watchers(e);
        while (!e->late && e->answered) {
                call *c = e->answered;
                e->answered = c->next;
                deliver(c);
                json_decref(c->req);
                free(c);
        }
        /* nothing more to do until a call or the test says: the loop may
         * sleep (the fleet's flush waits for a loop with nothing due) */
        bool more = !e->late && e->answered;
        for (const call *c = e->calls; c && !more; c = c->next)
                more = !(c->type == CALL_TXN && e->hold);
        if (!more)
                uv_idle_stop(h);
}

/* Something to answer or to tell: on the loop's next turn. */
static void kick(etcd *e) {
        if (e && e->idle)
                uv_idle_start(e->idle, on_idle);
}

static int queue(etcd *e, call_type type, json_t *req, etcd_cb cb, void *userdata) {
        call *c = calloc(1, sizeof *c), **p;

        if (!c || !req) {
                free(c);
                json_decref(req);
                return -ENOMEM;
        }
        *c = (call){ .type = type, .req = req, .cb = cb, .userdata = userdata };
        for (p = &e->calls; *p; p = &(*p)->next)
                ;
        *p = c;
        kick(e);
        return 0;
}

/* ---- tend/etcd.h -------------------------------------------------------------------------- */

static void on_idle_closed(uv_handle_t *h) {
        free(h);
}

int etcd_new(const etcd_config *c, etcd **ret) {
        etcd *e = calloc(1, sizeof *e);

        if (!e || !(e->idle = calloc(1, sizeof *e->idle))) {
                free(e);
                return -ENOMEM;
        }
        e->loop = c->loop;
        e->revision = 1;
        uv_idle_init(c->loop, e->idle);
        e->idle->data = e;
        uv_idle_start(e->idle, on_idle);
        *ret = current = e;
        return 0;
}

uv_loop_t *etcd_loop(const etcd *e) {
        return e->loop;
}

void etcd_close(etcd *e) {
        if (!e)
                return;
        if (current == e)
                current = NULL;
        while (e->calls) {
                call *c = e->calls;
                e->calls = c->next;
                json_decref(c->req);
                free(c);
        }
        while (e->answered) {
                call *c = e->answered;
                e->answered = c->next;
                answer_free(c->answer);
                json_decref(c->req);
                free(c);
        }
        while (e->watches) {
                etcd_watch *w = e->watches;
                e->watches = w->next;
                free(w->key);
                free(w->end);
                free(w);
        }
        for (size_t i = 0; i < e->n_kvs; i++)
                free(e->kvs[i].key), free(e->kvs[i].value);
        for (size_t i = 0; i < e->n_log; i++)
                free(e->log[i].kv.key), free(e->log[i].kv.value);
        for (size_t i = 0; i < e->n_sessions; i++)
                e->sessions[i]->e = NULL;
        free(e->kvs);
        free(e->log);
        free(e->leases);
        uv_close((uv_handle_t *) e->idle, on_idle_closed);
        free(e);
}

json_t *etcd_kv_json(const etcd_kv *kv) {
        return kv->json ? json_incref(kv->json) : json_loadb(kv->value, kv->value_len, 0, NULL);
}

static void cancel_in(call **list, void *userdata) {
        for (call **p = list; *p;) {
                call *c = *p;
                if (c->userdata != userdata) {
                        p = &c->next;
                        continue;
                }
                *p = c->next;
                if (c->answer)
                        answer_free(c->answer);
                json_decref(c->req);
                free(c);
        }
}

void etcd_cancel_calls(etcd *e, void *userdata) {
        cancel_in(&e->calls, userdata);
        cancel_in(&e->answered, userdata);
}

int etcd_put(etcd *e, const char *key, const void *value, size_t len, int64_t lease, etcd_cb cb,
             void *userdata) {
        return queue(e, CALL_PUT,
                     json_pack("{s:s, s:s%, s:I}", "key", key, "value", value, len, "lease",
                               (json_int_t) lease),
                     cb, userdata);
}

int etcd_range(etcd *e, const char *key, const char *range_end, etcd_cb cb, void *userdata) {
        return queue(e, CALL_RANGE, etcd_op_range(key, range_end), cb, userdata);
}

int etcd_delete(etcd *e, const char *key, const char *range_end, etcd_cb cb, void *userdata) {
        return queue(e, CALL_DELETE, etcd_op_delete(key, range_end), cb, userdata);
}

char *etcd_prefix_end(const char *prefix) {
        char *end = strdup(prefix);
        size_t n = end ? strlen(end) : 0;

        if (n == 0) {
                free(end);
                return NULL;
        }
        end[n - 1]++;
        return end;
}

int etcd_txn(etcd *e, json_t *compare, json_t *success, json_t *failure, etcd_cb cb,
             void *userdata) {
        json_t *req = compare && success && failure
                              ? json_pack("{s:o, s:o, s:o}", "compare", compare, "success", success,
                                          "failure", failure)
                              : NULL;
        if (!req) {
                json_decref(compare), json_decref(success), json_decref(failure);
                return -ENOMEM;
        }
        return queue(e, CALL_TXN, req, cb, userdata);
}

json_t *etcd_cmp_revision(const char *key, const char *target, const char *result, int64_t rev) {
        return json_pack("{s:s, s:s, s:s, s:I}", "key", key, "target", target, "result", result,
                         "rev", (json_int_t) rev);
}

json_t *etcd_op_put(const char *key, const void *value, size_t len, int64_t lease) {
        return json_pack("{s:s, s:s, s:s%, s:I}", "op", "put", "key", key, "value", value, len,
                         "lease", (json_int_t) lease);
}

json_t *etcd_op_range(const char *key, const char *range_end) {
        return json_pack("{s:s, s:s, s:s?}", "op", "range", "key", key, "end", range_end);
}

json_t *etcd_op_range_newest(const char *key, const char *range_end, int64_t limit) {
        return json_pack("{s:s, s:s, s:s?, s:I}", "op", "range", "key", key, "end", range_end,
                         "limit", (json_int_t) limit);
}

json_t *etcd_op_delete(const char *key, const char *range_end) {
        return json_pack("{s:s, s:s, s:s?}", "op", "delete", "key", key, "end", range_end);
}

int etcd_compact(etcd *e, int64_t revision, etcd_cb cb, void *userdata) {
        return queue(e, CALL_COMPACT, json_pack("{s:I}", "rev", (json_int_t) revision), cb,
                     userdata);
}

int etcd_lease_grant(etcd *e, int64_t ttl_seconds, etcd_cb cb, void *userdata) {
        return queue(e, CALL_GRANT, json_pack("{s:I}", "ttl", (json_int_t) ttl_seconds), cb,
                     userdata);
}

int etcd_lease_keepalive(etcd *e, int64_t id, etcd_cb cb, void *userdata) {
        return queue(e, CALL_KEEPALIVE, json_pack("{s:I}", "id", (json_int_t) id), cb, userdata);
}

int etcd_lease_revoke(etcd *e, int64_t id, etcd_cb cb, void *userdata) {
        return queue(e, CALL_REVOKE, json_pack("{s:I}", "id", (json_int_t) id), cb, userdata);
}

int etcd_watch_start(etcd *e, const char *key, const char *range_end, int64_t start_revision,
                     etcd_watch_events on_events, etcd_watch_end on_end, void *userdata,
                     etcd_watch **ret) {
        etcd_watch *w = calloc(1, sizeof *w);

        if (!w)
                return -ENOMEM;
        *w = (etcd_watch){ .e = e,
                           .key = strdup(key),
                           .end = range_end ? strdup(range_end) : NULL,
                           .next_rev = start_revision ?: e->revision + 1,
                           .on_events = on_events,
                           .on_end = on_end,
                           .userdata = userdata,
                           .next = e->watches };
        e->watches = w;
        *ret = w;
        kick(e);
        return 0;
}

void etcd_watch_cancel(etcd_watch *w) {
        if (w) {
                w->canceled = true; /* freed by the loop (it may be in its callback) */
                kick(w->e);
        }
}

int etcd_session_start(etcd *e, const etcd_session_config *c, etcd_session **ret) {
        etcd_session *s = calloc(1, sizeof *s);
        int r;

        if (!s || e->n_sessions >= ELEMENTSOF(e->sessions)) {
                free(s);
                return -ENOMEM;
        }
        *s = (etcd_session){ .e = e, .c = *c };
        r = queue(e, CALL_SESSION, json_object(), NULL, s);
        if (r < 0) {
                free(s);
                return r;
        }
        for (call *k = e->calls; k; k = k->next)
                if (k->userdata == s)
                        k->session = s;
        e->sessions[e->n_sessions++] = s;
        *ret = s;
        return 0;
}

int64_t etcd_session_lease(const etcd_session *s) {
        return s && s->ready && !s->lost ? s->lease : 0;
}

usec_t etcd_session_safe_until(const etcd_session *s) {
        /* kept alive by the fake as long as the lease is */
        return s && s->ready && !s->lost ? now_monotonic() + (usec_t) s->c.ttl * USEC_PER_SEC : 0;
}

void etcd_session_stop(etcd_session *s) {
        if (!s)
                return;
        s->stopped = true;
        if (s->e) {
                etcd *e = s->e;
                etcd_cancel_calls(e, s);
                for (size_t i = 0; i < e->n_sessions; i++)
                        if (e->sessions[i] == s) {
                                e->sessions[i] = e->sessions[--e->n_sessions];
                                break;
                        }
        }
        free(s);
}

/* ---- what the test does --------------------------------------------------------------------- */

void fake_etcd_hold(etcd *e, bool hold) {
        e->hold = hold;
        kick(e);
}

void fake_etcd_retried(etcd *e, bool retried) {
        e->retried = retried;
}

void fake_etcd_late(etcd *e, bool late) {
        e->late = late;
        kick(e);
}

size_t fake_etcd_held(const etcd *e) {
        size_t n = 0;

        for (const call *c = e->calls; c; c = c->next)
                n += c->type == CALL_TXN;
        return n;
}

unsigned fake_etcd_txns(const etcd *e, unsigned *ret_succeeded) {
        if (ret_succeeded)
                *ret_succeeded = e->txns_ok;
        return e->txns;
}

int64_t fake_etcd_put(etcd *e, const char *key, const char *value, int64_t lease) {
        do_put(e, key, value, strlen(value), lease, ++e->revision);
        kick(e);
        return e->revision;
}

int64_t fake_etcd_delete(etcd *e, const char *key) {
        if (do_delete(e, key, NULL, e->revision + 1))
                e->revision++;
        kick(e);
        return e->revision;
}

const char *fake_etcd_get(const etcd *e, const char *key, int64_t *ret_mod) {
        const fkv *kv = find(e, key);

        if (ret_mod)
                *ret_mod = kv ? kv->mod : 0;
        return kv ? kv->value : NULL;
}

bool fake_etcd_next(const etcd *e, const char *prefix, size_t *i, const char **ret_key,
                    const char **ret_value) {
        for (; *i < e->n_kvs; (*i)++)
                if (startswith(e->kvs[*i].key, prefix)) {
                        *ret_key = e->kvs[*i].key;
                        *ret_value = e->kvs[*i].value;
                        (*i)++;
                        return true;
                }
        return false;
}

void fake_etcd_expire(etcd *e, int64_t lease) {
        lease_gone(e, lease);
        kick(e);
        for (size_t i = 0; i < e->n_sessions; i++) {
                etcd_session *s = e->sessions[i];
                if (s->lease == lease && s->ready && !s->lost) {
                        s->lost = true;
                        s->c.lost(-ENOENT, "the session's lease is gone (fake etcd)",
                                  s->c.userdata);
                        return; /* (the callback may stop it: the array changed) */
                }
        }
}
