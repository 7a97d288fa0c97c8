/* SPDX-License-Identifier: MIT */

/* The HTTP API (tend/api.h): requests and answers: query and headers, bodies, patches, Status and
 * causes. */

#include <inttypes.h>

#include "api-internal.h"
#include "patch.h"

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

/* ---- bodies -------------------------------------------------------------------------------- */

/* The request body as one JSON/YAML object; errors answered. */
/* The body's documents; a List is expanded into its items. */
/* kubectl's typed clients send protobuf (create deployment, for one): say
 * so, rather than fail to parse it as text. */
static bool refuse_protobuf(req *r, enum MHD_Result *ret) {
        const char *type = api__header(r, MHD_HTTP_HEADER_CONTENT_TYPE);

        if (!type || !startswith(type, "application/vnd.kubernetes.protobuf"))
                return false;
        *ret = api__send_status(r, 415, "UnsupportedMediaType",
                                "tendd reads JSON and YAML bodies, not %s", type);
        return true;
}

int api__body_docs(req *r, enum MHD_Result *ret, spec_docs *docs) {
        spec_errors errs = {};

        if (refuse_protobuf(r, ret))
                return -1;
        if (r->body.len == 0) {
                *ret = api__send_status(r, 400, "BadRequest", "the request needs a body");
                return -1;
        }
        if (spec_parse("request", tend_buf_str(&r->body), r->body.len, &errs, docs) < 0) {
                _cleanup_free_ char *msg = errs.n ? spec_error_format(&errs.items[0]) : NULL;
                *ret = api__send_status(r, 400, "BadRequest", "%s", msg ?: "cannot parse the body");
                spec_errors_done(&errs);
                return -1;
        }
        return 0;
}

json_t *api__body_object(req *r, enum MHD_Result *ret) {
        spec_docs docs = {};
        json_t *j;

        if (api__body_docs(r, ret, &docs) < 0)
                return NULL;
        if (docs.n != 1) {
                *ret = api__send_status(r, 400, "BadRequest",
                                        "the body must hold exactly one object");
                spec_docs_done(&docs);
                return NULL;
        }
        j = json_incref(docs.items[0].root);
        spec_docs_done(&docs);
        return j;
}

/* A JSON body as it is (a JSON patch is an array, not an object; DeleteOptions),
 * within the limits of a manifest. */
json_t *api__body_json(req *r, enum MHD_Result *ret) {
        _cleanup_free_ char *problem = NULL;
        json_error_t e;
        json_t *j;

        if (refuse_protobuf(r, ret))
                return NULL;
        if (r->body.len == 0) {
                *ret = api__send_status(r, 400, "BadRequest", "the request needs a body");
                return NULL;
        }
        j = json_loadb(tend_buf_str(&r->body), r->body.len, JSON_REJECT_DUPLICATES, &e);
        if (!j) {
                *ret = api__send_status(r, 400, "BadRequest", "request:%d:%d: %s", e.line, e.column,
                                        e.text);
                return NULL;
        }
        if (spec_json_check_limits(j, &problem) < 0) {
                json_decref(j);
                *ret = problem ? api__send_status(r, 400, "BadRequest", "request: %s", problem)
                               : api__send_oom(r);
                return NULL;
        }
        return j;
}

/* The PATCH body applied to a copy of cur, as its Content-Type says:
 * the patched document, or NULL with the error answered. */
json_t *api__apply_patch(req *r, json_t *cur, enum MHD_Result *ret) {
        const char *type = api__header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
        _cleanup_(json_decrefp) json_t *body = NULL;
        _cleanup_free_ char *err = NULL;
        json_t *patched;

        if (!type || (!startswith(type, "application/json-patch+json") &&
                      !startswith(type, "application/merge-patch+json") &&
                      !startswith(type, "application/strategic-merge-patch+json"))) {
                *ret = api__send_status(r, 415, NULL,
                                        "the PATCH body must be application/merge-patch+json, "
                                        "application/strategic-merge-patch+json or "
                                        "application/json-patch+json (or, for a deployment, "
                                        "application/apply-patch+yaml)");
                return NULL;
        }
        body = api__body_json(r, ret);
        if (!body)
                return NULL;
        /* Whether the patch is conditional on a resourceVersion: it names
         * one (a JSON patch may, in many ways: taken as if it did). */
        r->conditional = startswith(type, "application/json-patch+json") ||
                         json_object_get(json_object_get(body, "metadata"), "resourceVersion");
        if (startswith(type, "application/json-patch+json"))
                patched = patch_json(cur, body, &err);
        else if (!json_is_object(body)) {
                *ret = api__send_status(
                        r, 400, "BadRequest",
                        "a merge patch must be a JSON object (the fields to change); "
                        "a list of operations is application/json-patch+json");
                return NULL;
        } else if (startswith(type, "application/strategic-merge-patch+json"))
                patched = patch_strategic(cur, body, &err);
        else
                patched = patch_merge(cur, body, &err);
        if (!patched)
                *ret = err ? api__send_status(r, 422, "Invalid", "%s", err) : api__send_oom(r);
        return patched;
}

/* A StatusCause: the reason from the message's kind, as Kubernetes'
 * field.ErrorType names them. */
json_t *api__cause_json(const spec_error *e) {
        static const struct {
                const char *prefix, *reason;
        } kinds[] = {
                { "Required value", "FieldValueRequired" },
                { "Forbidden", "FieldValueForbidden" },
                { "Unsupported value", "FieldValueNotSupported" },
                { "Duplicate value", "FieldValueDuplicate" },
                { "Too long", "FieldValueTooLong" },
                { "Too many", "FieldValueTooMany" },
        };
        const char *reason = "FieldValueInvalid";

        for (size_t i = 0; i < ELEMENTSOF(kinds); i++)
                if (startswith(e->message, kinds[i].prefix))
                        reason = kinds[i].reason;
        return json_pack("{s:s, s:s, s:s}", "reason", reason, "message", e->message, "field",
                         strempty(e->field));
}

/* 422 with every field error as a cause. */
enum MHD_Result api__send_invalid(req *r, const char *qualified, const char *kind, const char *name,
                                  const spec_errors *errs) {
        _cleanup_buf_ tend_buf msg = TEND_BUF_INIT(1 << 20);
        json_t *causes = json_array(), *details;

        (void) tend_buf_addf(&msg, "%s \"%s\" is invalid: ", kind, strempty(name));
        for (size_t i = 0; i < errs->n; i++) {
                const spec_error *e = &errs->items[i];
                char *one = e->field ? strprintf("%s: %s", e->field, e->message)
                                     : strdup(e->message);
                (void) tend_buf_addf(&msg, "%s%s", i ? ", " : "", strna(one));
                free(one);
                json_array_append_new(causes, api__cause_json(e));
        }
        details = json_pack("{s:s, s:s, s:o}", "name", strempty(name), "kind", qualified, "causes",
                            causes);
        return api__send_json(r, 422,
                              spec_status_json(422, "Invalid", tend_buf_str(&msg), details));
}

/* fieldValidation (kubectl sends Strict, or Ignore for --validate=false):
 * Strict, the default, leaves unknown fields for the decoder to refuse;
 * Warn and Ignore take them out of j, Warn saying which. -1: answered. */
int api__field_validation(req *r, json_t *j, enum MHD_Result *ret) {
        const char *fv = api__arg(r, "fieldValidation");

        if (fv && !streq(fv, "Strict") && !streq(fv, "Warn") && !streq(fv, "Ignore")) {
                *ret = api__send_status(r, 400, "BadRequest",
                                        "fieldValidation must be Strict, Warn or Ignore, not %s",
                                        fv);
                return -1;
        }
        if (fv && !streq(fv, "Strict")) {
                _cleanup_(json_decrefp) json_t *dropped = json_array();
                if (!dropped || spec_drop_unknown(&spec_type_deployment, j, dropped) < 0) {
                        *ret = api__send_oom(r);
                        return -1;
                }
                if (streq(fv, "Warn") && json_array_size(dropped) > 0 && !r->warning) {
                        _cleanup_buf_ tend_buf w = TEND_BUF_INIT(4096);
                        size_t i;
                        json_t *p;
                        json_array_foreach (dropped, i, p)
                                (void) tend_buf_addf(&w, "%sunknown field \\\"%s\\\"",
                                                     i ? ", " : "299 - \"", json_string_value(p));
                        (void) tend_buf_adds(&w, "\"");
                        r->warning = tend_buf_take(&w);
                }
        }
        return 0;
}

/* Decodes, defaults and validates a Deployment from JSON. */
spec_deployment *api__decode_deployment(req *r, json_t *j, const char *ns, const char *name,
                                        enum MHD_Result *ret) {
        spec_errors errs = {};
        spec_deployment *d = NULL;
        const char *kind = json_string_value(json_object_get(j, "kind"));
        const char *jname = api__json_field(j, "metadata.name");
        const char *jns = api__json_field(j, "metadata.namespace");

        if (!streq_ptr(kind, "Deployment")) {
                *ret = api__send_status(r, 400, "BadRequest",
                                        "the object is a %s, not a Deployment",
                                        kind ? kind : "thing without a kind");
                return NULL;
        }
        if (jns && ns && !streq(jns, ns)) {
                *ret = api__send_status(
                        r, 400, "BadRequest",
                        "the namespace of the object (%s) does not match the namespace "
                        "on the request (%s)",
                        jns, ns);
                return NULL;
        }
        if (name && jname && !streq(name, jname)) {
                *ret = api__send_status(
                        r, 400, "BadRequest",
                        "the name of the object (%s) does not match the name on the URL "
                        "(%s)",
                        jname, name);
                return NULL;
        }
        if (api__field_validation(r, j, ret) < 0)
                return NULL;
        _cleanup_free_ char *legacy = spec_legacy_leased_ports(j);
        if (legacy && !r->warning)
                r->warning = strprintf(
                        "299 - \"spec.template.spec.containers[].ports: a port without "
                        "containerPort is not valid Kubernetes: tendd took it as the pod "
                        "template's annotation tend.io/lease-ports: %s (write it so)\"",
                        legacy);
        if (spec_decode_new(&spec_type_deployment, j, &errs, (void **) &d) < 0) {
                *ret = api__send_invalid(r, "deployments.apps", "Deployment", jname ?: name, &errs);
                spec_errors_done(&errs);
                return NULL;
        }
        if (!d->metadata.namespace && ns)
                d->metadata.namespace = strdup(ns);
        if (!d->metadata.name && name)
                d->metadata.name = strdup(name);
        spec_deployment_default(d);
        if (spec_deployment_validate(d, &errs) < 0) {
                *ret = api__send_invalid(r, "deployments.apps", "Deployment", d->metadata.name,
                                         &errs);
                spec_errors_done(&errs);
                spec_deployment_free(d);
                return NULL;
        }
        return d;
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
                     *api_version = *k->group ? strprintf("%s/%s", k->group, k->version)
                                              : strdup(k->version);
                if (!prefix || !qualified || !list_kind || !api_version) {
                        free(prefix), free(qualified), free(list_kind), free(api_version);
                        return -ENOMEM;
                }
                *res = (resource){ .prefix = prefix,
                                   .plural = k->plural,
                                   .qualified = qualified,
                                   .kind = sk,
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

/* ---- preconditions
 * ------------------------------------------------------------------------ */

static enum MHD_Result send_conflict(req *r, const resource *res, const char *name) {
        return api__send_status(r, 409, "Conflict",
                                "Operation cannot be fulfilled on %s \"%s\": the object has been "
                                "modified; please apply your changes to the latest version and try "
                                "again",
                                res->qualified, name);
}

/* A uid and a resourceVersion a request is conditional on: the uid, on
 * being about the same object (not one deleted and created again under
 * its name); the version, on nothing having changed since (optimistic
 * concurrency). Stated ones (DeleteOptions.preconditions) are reported as
 * such; those of an object written back, as Kubernetes does, as the
 * object having been modified. false: answered. */
bool api__preconditions_hold(req *r, const resource *res, const void *obj, const char *uid,
                             const char *rv, bool stated, enum MHD_Result *ret) {
        const spec_meta *m = spec_object_meta(obj);
        char now_rv[32];

        snprintf(now_rv, sizeof now_rv, "%" PRIu64, m->resource_version);
        if (uid && *uid && !streq_ptr(uid, m->uid)) {
                *ret = api__send_status(r, 409, "Conflict",
                                        "Operation cannot be fulfilled on %s \"%s\": Precondition "
                                        "failed: UID in precondition: %s, UID in object meta: %s",
                                        res->qualified, m->name, uid, strempty(m->uid));
                return false;
        }
        if (rv && *rv && !streq(rv, now_rv)) {
                *ret = stated ? api__send_status(
                                        r, 409, "Conflict",
                                        "Operation cannot be fulfilled on %s \"%s\": "
                                        "Precondition failed: ResourceVersion in "
                                        "precondition: %s, ResourceVersion in object meta: "
                                        "%s",
                                        res->qualified, m->name, rv, now_rv)
                              : send_conflict(r, res, m->name);
                return false;
        }
        return true;
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
