/* SPDX-License-Identifier: MIT */

/* The HTTP API (tend/api.h): requests and answers (later ones too, held for
 * the fleet), Status, and the resources of the store's kinds. What a write
 * sends is write.c's. */

#include <inttypes.h>

#include "api-internal.h"

/* ---- requests ------------------------------------------------------------------------------ */

/* ---- answers that come later ---------------------------------------------------------------- */

static void waiting_unlink(req *r) {
        for (req **p = &r->s->waiting; *p; p = &(*p)->next_waiting)
                if (*p == r) {
                        *p = r->next_waiting;
                        break;
                }
        r->next_waiting = NULL;
        r->waiting = false;
}

enum MHD_Result api__wait(req *r, void (*cancel)(void *userdata, void *req), void *userdata) {
        r->waiting = true;
        r->cancel = cancel;
        r->cancel_userdata = userdata;
        r->next_waiting = r->s->waiting;
        r->s->waiting = r;
        MHD_suspend_connection(r->conn);
        return MHD_YES;
}

/* The answer (JSON, or text: both taken) of a request that waits. */
static void resume_with(req *r, unsigned code, json_t *answer, char *text) {
        if (!r->waiting) {
                json_decref(answer);
                free(text);
                return;
        }
        waiting_unlink(r);
        r->later_code = code;
        if (text) {
                json_decref(answer);
                r->later_text = text;
        } else
                r->later = answer ?: spec_status_json(500, "InternalError", "out of memory", NULL);
        MHD_resume_connection(r->conn);
        api__kick(r->slot);
}

void api__later(unsigned code, json_t *answer, void *userdata) {
        resume_with(userdata, code, answer, NULL);
}

void api__resume(req *r) {
        if (!r->waiting)
                return;
        waiting_unlink(r);
        MHD_resume_connection(r->conn);
        api__kick(r->slot);
}

void api__waiting_forget(req *r) {
        if (!r->waiting)
                return;
        r->cancel(r->cancel_userdata, r);
        waiting_unlink(r);
}

void api__waiting_end(api_server *s) {
        while (s->waiting) {
                req *r = s->waiting;
                r->cancel(r->cancel_userdata, r);
                api__later(503,
                           spec_status_json(503, "ServiceUnavailable", "tendd is stopping", NULL),
                           r);
        }
}

/* ---- requests ------------------------------------------------------------------------------- */

void api__req_free(req *r) {
        if (!r)
                return;
        json_decref(r->held);
        free(r->held_text);
        free(r->later_text);
        tend_buf_free(&r->body);
        free(r->direct_body);
        free(r->deny_message);
        free(r->warning);
        json_decref(r->later);
        free(r);
}

int api__dry_run(req *r, json_t *options, enum MHD_Result *ret) {
        _cleanup_free_ char *problem = NULL;
        int k = api__dry_run_of(r, options, &problem);

        if (k < 0)
                *ret = problem ? api__send_status(r, 400, "BadRequest", "%s", problem)
                               : api__send_oom(r);
        return k;
}

int api__check_params(req *r, enum MHD_Result *ret) {
        _cleanup_free_ char *problem = NULL;
        unsigned code = 400;

        if (api__params_problem(r, &code, &problem) == 0)
                return 0;
        *ret = problem ? api__send_status(r, code, NULL, "%s", problem) : api__send_oom(r);
        return -1;
}

/* ---- responses ------------------------------------------------------------------------------ */

enum MHD_Result api__queue(req *r, unsigned code, const char *type, char *body /* takes */) {
        /* ?pretty=true: indented, as kube-apiserver gives it (a body is
         * read back only then) */
        if (body && streq(type, "application/json") && api__arg_true(r, "pretty")) {
                json_t *j = json_loads(body, 0, NULL);
                char *indented = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
                json_decref(j);
                if (indented) {
                        free(body);
                        body = strprintf("%s\n", indented);
                        free(indented);
                        if (!body)
                                return MHD_NO;
                }
        }
        return api__queue_kept(r, code, type, body);
}

enum MHD_Result api__queue_kept(req *r, unsigned code, const char *type, char *body /* takes */) {
        struct MHD_Response *resp;
        enum MHD_Result ret;
        size_t n = body ? strlen(body) : 0;

        /* (the pool's copy of a request keeps it for the loop to send: it
         * counts it then) */
        if (r->direct || r->pooled) {
                if (!r->pooled)
                        api__count_code(r->s, code);
                r->direct_code = code;
                r->direct_type = type;
                free(r->direct_body);
                r->direct_body = body;
                return MHD_YES;
        }
        resp = MHD_create_response_from_buffer(
                n, body ?: (char *) "", body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        if (!resp) {
                free(body);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        if (r->warning && code < 300)
                MHD_add_response_header(resp, "Warning", r->warning);
        api__count_code(r->s, code);
        ret = MHD_queue_response(r->conn, code, resp);
        MHD_destroy_response(resp);
        return ret;
}

static void on_synced(unsigned code, json_t *answer, void *userdata) {
        req *r = userdata;
        json_t *held = TAKE_PTR(r->held);
        char *text = TAKE_PTR(r->held_text);

        if (code == 0) {
                json_decref(answer);
                resume_with(r, r->held_code, held, text);
                return;
        }
        json_decref(held);
        free(text);
        resume_with(r, code, answer, NULL);
}

/* In a fleet, a write is acknowledged once etcd has it (tend/api.h's
 * sync): the answer waits. true: it waits (r took j, or text). */
static bool hold_for_fleet(req *r, unsigned code, json_t *j, char *text) {
        const api_fleet *fl = r->conn ? r->s->fleet : NULL;
        int k;

        if (!r->conn || r->synced || code >= 300 || !fl || !fl->sync || !r->method ||
            streq(r->method, "GET") || streq(r->method, "HEAD") || streq(r->method, "OPTIONS"))
                return false;
        k = fl->sync(fl->userdata, r->fleet_mark, on_synced, r);
        if (k != 0)
                return false; /* etcd has it (or cannot tell: as on one host) */
        r->held_code = code;
        r->held = j;
        r->held_text = text;
        return true;
}

enum MHD_Result api__send_text(req *r, unsigned code, char *body) {
        if (hold_for_fleet(r, code, NULL, body))
                return api__wait(r, r->s->fleet->cancel, r->s->fleet->userdata);
        return api__queue(r, code, "application/json", body);
}

enum MHD_Result api__send_json(req *r, unsigned code, json_t *j) {
        if (hold_for_fleet(r, code, j, NULL))
                return api__wait(r, r->s->fleet->cancel, r->s->fleet->userdata);
        char *body = j ? spec_json_dump(j) : NULL;
        json_decref(j);
        if (!body)
                return api__queue(r, 500, "text/plain", strdup("out of memory\n"));
        /* a newline, like kube-apiserver, so `curl` output ends cleanly */
        char *nl = api__line(body);
        return nl ? api__queue(r, code, "application/json", nl) : api__send_oom(r);
}

char *api__line(char *s) {
        size_t n = strlen(s);
        char *l = realloc(s, n + 2);

        if (!l) {
                free(s);
                return NULL;
        }
        l[n] = '\n';
        l[n + 1] = 0;
        return l;
}

/* A list or watch from a resourceVersion this tendd has not reached: 504
 * with the cause client-go looks for (IsTooLargeResourceVersion: its
 * reflector then lists again), as kube-apiserver answers. */
enum MHD_Result api__send_rv_too_large(req *r, uint64_t want, uint64_t current) {
        _cleanup_free_ char *msg = strprintf(
                "Too large resource version: %" PRIu64 ", current: %" PRIu64, want, current);
        json_t *details = json_pack("{s:[{s:s, s:s}], s:i}", "causes", "reason",
                                    "ResourceVersionTooLarge", "message",
                                    "Too large resource version", "retryAfterSeconds", 1);

        if (!msg || !details) {
                json_decref(details);
                return api__send_oom(r);
        }
        return api__send_json(r, 504, spec_status_json(504, "Timeout", msg, details));
}

enum MHD_Result api__send_status(req *r, unsigned code, const char *reason, const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        return api__send_json(r, code, spec_status_json(code, reason, msg, NULL));
}

/* ---- answers about resources ------------------------------------------------------------ */

/* By store kind, from the kinds' registry (spec/kinds.c): every kind the
 * store holds is served, in its first group's shape; then the same kinds
 * in other groups' shapes (events.k8s.io's events). Made once, before the
 * first server answers (api__resources_init()); only read after. */
static resource resources[2 * _STORE_KIND_MAX];
static size_t n_resources;

static store_kind stored_as(const spec_type *t) {
        for (int k = 0; k < _STORE_KIND_MAX; k++)
                if (store_kind_type((store_kind) k) == t)
                        return (store_kind) k;
        return _STORE_KIND_INVALID;
}

int api__resources_init(void) {
        size_t n, extra = _STORE_KIND_MAX;
        const spec_kind *kinds = spec_kinds(&n);

        if (n_resources)
                return 0;
        for (size_t i = 0; i < n; i++) {
                const spec_kind *k = &kinds[i];
                store_kind sk = stored_as(k->type);
                bool first = spec_kind_of(k->type) == k;
                if (!k->type || sk < 0 || (!first && extra >= ELEMENTSOF(resources)))
                        continue;
                resource *res = &resources[first ? (size_t) sk : extra++];
                char *prefix = *k->group ? strprintf("apis/%s/%s", k->group, k->version)
                                         : strprintf("api/%s", k->version),
                     *qualified = *k->group ? strprintf("%s.%s", k->plural, k->group)
                                            : strdup(k->plural),
                     *list_kind = strprintf("%sList", k->kind),
                     *kind_qualified = *k->group ? strprintf("%s.%s", k->kind, k->group)
                                                 : strdup(k->kind),
                     *api_version = spec_kind_api_version(k);
                if (!prefix || !qualified || !list_kind || !api_version || !kind_qualified) {
                        free(prefix), free(qualified), free(list_kind), free(api_version);
                        free(kind_qualified);
                        return -ENOMEM;
                }
                *res = (resource){ .prefix = prefix,
                                   .plural = k->plural,
                                   .qualified = qualified,
                                   .kind = sk,
                                   .row = k,
                                   .kind_qualified = kind_qualified,
                                   .list_kind = list_kind,
                                   .api_version = api_version,
                                   /* the one other shape there is */
                                   .convert = streq(k->group, "events.k8s.io") ? api__event_v1
                                                                               : NULL };
        }
        n_resources = extra;
        return 0;
}

const resource *api__resource(store_kind kind) {
        return kind >= 0 && kind < _STORE_KIND_MAX ? &resources[kind] : NULL;
}

const resource *api__resource_at(const char *prefix, const char *plural) {
        for (size_t i = 0; i < n_resources; i++)
                if (resources[i].prefix && streq(resources[i].prefix, prefix) &&
                    streq(resources[i].plural, plural))
                        return &resources[i];
        return NULL;
}

const resource *api__resource_written(const char *api_version, const char *kind) {
        for (size_t i = 0; i < n_resources; i++) {
                const resource *res = &resources[i];
                if (res->row && res->row->writes != SPEC_WRITES_NONE &&
                    streq_ptr(res->api_version, api_version) && streq_ptr(res->row->kind, kind))
                        return res;
        }
        return NULL;
}

char *api__resources_written(void) {
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(256);

        for (size_t i = 0; i < n_resources; i++)
                if (resources[i].row && resources[i].row->writes != SPEC_WRITES_NONE)
                        (void) tend_buf_addf(&b, "%s%s (%s)", b.len ? ", " : "",
                                             resources[i].row->kind, resources[i].api_version);
        return tend_buf_take(&b);
}

json_t *api__encode(const resource *res, const void *obj) {
        json_t *j = api__encode_obj(res->kind, obj);

        return j && res->convert ? res->convert(j) : j;
}

json_t *api__encode_obj(store_kind k, const void *obj) {
        return spec_encode(store_kind_type(k), obj);
}

enum MHD_Result api__send_oom(req *r) {
        return api__send_status(r, 500, NULL, "out of memory");
}

enum MHD_Result api__not_found(req *r, const resource *res, const char *name) {
        _cleanup_free_ char *clean = utf8_escape_invalid(name);
        json_t *details = clean ? json_pack("{s:s, s:s}", "name", clean, "kind", res->plural)
                                : NULL;
        _cleanup_free_ char *msg = strprintf("%s \"%s\" not found", res->qualified, name);
        return api__send_json(r, 404, spec_status_json(404, "NotFound", msg, details));
}

/* ---- helpers
 * ------------------------------------------------------------------------------ */

void api__count_code(api_server *s, unsigned code) {
        for (size_t i = 0; i < ELEMENTSOF(s->codes); i++) {
                if (s->codes[i] == code || s->codes[i] == 0) {
                        s->codes[i] = code;
                        s->code_counts[i]++;
                        return;
                }
        }
}

/* A field of a JSON object by dotted path ("metadata.name"). */
const char *api__json_field(json_t *j, const char *path) {
        _cleanup_free_ char *copy = strdup(path);
        char *save = NULL;
        json_t *v = j;

        if (!copy)
                return NULL;
        for (char *t = strtok_r(copy, ".", &save); t && v; t = strtok_r(NULL, ".", &save))
                v = json_object_get(v, t);
        return json_string_value(v);
}
