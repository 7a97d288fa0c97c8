/* SPDX-License-Identifier: MIT */

/* The HTTP API (tend/api.h): watch streams and the change ring. */

#include <inttypes.h>

#include "api-internal.h"

/* ---- watch ----------------------------------------------------------------------------------- */

struct watch {
        watch *prev, *next;
        api_server *s;
        slot *slot;
        struct MHD_Connection *conn;
        const resource *res;
        filter f;
        tend_buf out;
        size_t sent;
        bool suspended;
        bool closed;
        int table; /* 0: objects; else Table rows, 2: with the whole object (kubectl -w) */
        usec_t last_write;
        usec_t ends_at; /* timeoutSeconds, or USEC_INFINITY */
};

static void watch_resume(watch *w) {
        if (w->suspended) {
                w->suspended = false;
                MHD_resume_connection(w->conn);
                api__kick(w->slot);
        }
}

static void watch_close(watch *w) {
        w->closed = true;
        watch_resume(w);
}

void api__watches_end(api_server *s) {
        for (watch *w = s->watches; w; w = w->next)
                watch_close(w);
}

static void watch_append(watch *w, const char *line) {
        if (w->closed)
                return;
        if (tend_buf_adds(&w->out, line) < 0) {
                log_warning("A watch of %s is too slow; closing it", w->res->plural);
                watch_close(w);
                return;
        }
        w->last_write = now_monotonic();
        watch_resume(w);
}

static ssize_t watch_reader(void *cls, uint64_t pos, char *buf, size_t max) {
        watch *w = cls;
        size_t n;

        if (w->sent < w->out.len) {
                n = MIN(max, w->out.len - w->sent);
                memcpy(buf, w->out.data + w->sent, n);
                w->sent += n;
                if (w->sent == w->out.len) {
                        tend_buf_reset(&w->out);
                        w->sent = 0;
                }
                return (ssize_t) n;
        }
        if (w->closed || w->s->closing ||
            (w->ends_at != USEC_INFINITY && now_monotonic() >= w->ends_at))
                return MHD_CONTENT_READER_END_OF_STREAM;
        MHD_suspend_connection(w->conn);
        w->suspended = true;
        return 0;
}

static void watch_free(void *cls) {
        watch *w = cls;
        api_server *s = w->s;

        if (w->prev)
                w->prev->next = w->next;
        else if (s->watches == w)
                s->watches = w->next;
        if (w->next)
                w->next->prev = w->prev;
        api__filter_done(&w->f);
        tend_buf_free(&w->out);
        free(w);
}

static char *event_line(const char *type, json_t *obj) {
        json_t *ev = json_pack("{s:s, s:O}", "type", type, "object", obj);
        char *s = ev ? json_dumps(ev, JSON_COMPACT) : NULL, *line;
        json_decref(ev);
        if (!s)
                return NULL;
        line = strprintf("%s\n", s);
        free(s);
        return line;
}

/* An event as this watcher takes it: the object, or a Table of its one
 * row — from obj where the caller has it, else decoded from its encoding j. */
static void watch_add_event(watch *w, const char *type, const void *obj, json_t *j,
                            const char *line) {
        _cleanup_free_ char *own = NULL;

        if (w->table) {
                json_t *t = api__table_of_one(w->s, w->res, obj, j, w->table == 2);
                own = t ? event_line(type, t) : NULL;
                json_decref(t);
                if (!own)
                        return; /* a row that cannot be made is left out, as the filter does */
                line = own;
        } else if (!line)
                line = own = event_line(type, j);
        if (line)
                watch_append(w, line);
}

enum MHD_Result api__start_watch(req *r, const resource *res, filter *f) {
        api_server *s = r->s;
        const char *rvs = api__arg(r, "resourceVersion"), *ts = api__arg(r, "timeoutSeconds");
        struct MHD_Response *resp;
        enum MHD_Result ret;
        uint64_t since = 0;
        int64_t timeout = 0;
        watch *w;

        if (!r->conn) {
                api__filter_done(f);
                return api__send_status(r, 400, "BadRequest", "a watch needs a connection");
        }
        if (api__arg_true(r, "sendInitialEvents")) {
                api__filter_done(f);
                /* WatchList is not implemented: say so, and clients fall back
                 * to list + watch (docs/deployments.md §10.4). */
                return api__send_status(r, 400, "BadRequest",
                                        "sendInitialEvents is not supported; "
                                        "list, then watch from its resourceVersion");
        }
        if ((rvs && *rvs && safe_atou64(rvs, &since) < 0) ||
            (ts && (safe_atoi64(ts, &timeout) < 0 || timeout < 0))) {
                api__filter_done(f);
                return api__send_status(r, 400, "BadRequest",
                                        "invalid resourceVersion or timeoutSeconds");
        }
        /* a version this tendd has not reached (another node's, in a
         * fleet: each counts its own): as a list answers */
        if (since > store_resource_version(s->store)) {
                api__filter_done(f);
                return api__send_rv_too_large(r, since, store_resource_version(s->store));
        }
        w = new0(watch, 1);
        if (!w) {
                api__filter_done(f);
                return MHD_NO;
        }
        w->s = s;
        w->slot = r->slot;
        w->conn = r->conn;
        w->res = res;
        w->f = *f;
        w->out = TEND_BUF_INIT(MAX_WATCH_BUFFER);
        w->table = api__wants_table(r) ? 1 + streq_ptr(api__arg(r, "includeObject"), "Object") : 0;
        /* saturating: a timeout past what usec_t holds is no timeout */
        w->ends_at = timeout > 0 && (uint64_t) timeout <
                                             (USEC_INFINITY - now_monotonic()) / USEC_PER_SEC
                             ? now_monotonic() + (usec_t) timeout * USEC_PER_SEC
                             : USEC_INFINITY;
        w->last_write = now_monotonic();

        if (since == 0) {
                /* No version: the current state as ADDED events first. */
                size_t n = 0;
                _cleanup_free_ list_ref *refs = api__sorted_refs(s, res, &n);
                for (size_t i = 0; refs && i < n; i++) {
                        json_t *item = api__encode(res, refs[i].obj);
                        if (item && api__filter_match(&w->f, item))
                                watch_add_event(w, "ADDED", refs[i].obj, item, NULL);
                        json_decref(item);
                }
        } else {
                /* From the ring: every change after `since`, or 410 if the
                 * ring no longer reaches back that far. */
                uint64_t oldest = s->ring_n ? s->ring[s->ring_head].rv
                                            : store_resource_version(s->store) + 1;
                if (since + 1 < oldest && since < store_resource_version(s->store)) {
                        _cleanup_free_ char *msg = strprintf("too old resource version: %" PRIu64
                                                             " (%" PRIu64 ")",
                                                             since, oldest - 1);
                        json_t *st = spec_status_json(410, "Expired", msg, NULL);
                        _cleanup_free_ char *line = event_line("ERROR", st);
                        json_decref(st);
                        if (line)
                                (void) tend_buf_adds(&w->out, line);
                        w->closed = true;
                } else
                        for (size_t k = 0; k < s->ring_n; k++) {
                                change *c = &s->ring[(s->ring_head + k) % CHANGE_RING];
                                json_t *ev;
                                if (c->rv <= since || c->kind != res->kind)
                                        continue;
                                ev = json_loads(c->line, 0, NULL);
                                json_t *o = json_incref(json_object_get(ev, "object"));
                                if (o && res->convert)
                                        o = res->convert(o);
                                if (o && api__filter_match(&w->f, o))
                                        watch_add_event(
                                                w, json_string_value(json_object_get(ev, "type")),
                                                NULL, o, res->convert ? NULL : c->line);
                                json_decref(o);
                                json_decref(ev);
                        }
        }

        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, watch_reader, w,
                                                 watch_free);
        if (!resp) {
                watch_free(w);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        w->next = s->watches;
        if (s->watches)
                s->watches->prev = w;
        s->watches = w;
        if (!uv_is_active((uv_handle_t *) &s->heartbeat)) /* (stopped while none is open) */
                uv_timer_start(&s->heartbeat, api__on_heartbeat, 1000, 1000);
        api__count_code(s, 200);
        ret = MHD_queue_response(r->conn, 200, resp);
        MHD_destroy_response(resp);
        return ret;
}

void api__on_store_change(store_kind kind, store_change change_type, const void *obj, void *u) {
        api_server *s = u;
        static const char *const types[] = { "ADDED", "MODIFIED", "DELETED" };
        const char *written = store_note_json(s->store);
        json_t *j = NULL;
        char *line;
        change *c;

        /* The commit encoded the object already: that text makes the line.
         * It is parsed again only where a watcher filters this kind. */
        if (written) {
                /* (one allocation: a large object's text is copied once) */
                size_t n = strlen(written);
                line = malloc(n + 64);
                if (line) {
                        int k = snprintf(line, 64,
                                         "{\"type\":\"%s\",\"object\":", types[change_type]);
                        memcpy(line + k, written, n);
                        memcpy(line + k + n, "}\n", 3);
                }
        } else {
                j = api__encode_obj(kind, obj);
                line = j ? event_line(types[change_type], j) : NULL;
        }
        if (!line) {
                json_decref(j);
                return;
        }
        /* (the object a write answers with, as written: api/prep.c) */
        const spec_meta *m = spec_object_meta(obj);
        if (s->written.want && written && kind == STORE_DEPLOYMENT &&
            change_type != STORE_DELETED && streq_ptr(m->namespace, s->written.ns) &&
            streq_ptr(m->name, s->written.name)) {
                free(s->written.json);
                s->written.json = strdup(written);
        }
        /* Into the ring: the oldest go while it is full, by count or by
         * bytes (a change is a whole object: a thousand of a large
         * deployment's were most of a gigabyte). */
        size_t len = strlen(line);
        while (s->ring_n > 0 &&
               (s->ring_n == CHANGE_RING || s->ring_bytes + len > CHANGE_RING_BYTES)) {
                c = &s->ring[s->ring_head];
                s->ring_bytes -= strlen(c->line);
                free(c->line);
                s->ring_head = (s->ring_head + 1) % CHANGE_RING;
                s->ring_n--;
        }
        c = &s->ring[(s->ring_head + s->ring_n++) % CHANGE_RING];
        *c = (change){ .rv = ((const spec_deployment *) obj)->metadata.resource_version,
                       .kind = kind,
                       .line = line };
        s->ring_bytes += len;
        for (watch *w = s->watches; w; w = w->next) {
                if (w->res->kind != kind)
                        continue;
                if (!j && !(j = api__encode_obj(kind, obj)))
                        break;
                if (w->res->convert) {
                        /* another group's shape: its own line */
                        json_t *o = w->res->convert(json_incref(j));
                        if (o && api__filter_match(&w->f, o))
                                watch_add_event(w, types[change_type], obj, o, NULL);
                        json_decref(o);
                } else if (api__filter_match(&w->f, j))
                        watch_add_event(w, types[change_type], obj, j, line);
        }
        json_decref(j);
}

void api__on_heartbeat(uv_timer_t *t) {
        api_server *s = t->data;
        usec_t now = now_monotonic();

        if (!s->watches) { /* an idle tendd wakes for nothing (issue 35) */
                uv_timer_stop(t);
                return;
        }
        for (watch *w = s->watches; w; w = w->next) {
                if ((w->ends_at != USEC_INFINITY && now >= w->ends_at) ||
                    (w->suspended && api__client_gone(w->conn)))
                        watch_close(w);
                else if (now - w->last_write >= s->heartbeat_interval)
                        watch_append(w, "\n");
        }
}
