/* SPDX-License-Identifier: MIT */

/*
 * What a write sends (tend/api.h): its body (JSON or YAML, one object or a
 * List), a patch applied to what is stored, the object decoded, defaulted
 * and validated (and the answer when it is not: 422 with its causes), field
 * validation (strict, warn, ignore), and its preconditions (uid,
 * resourceVersion: 409). The handlers (objects.c, prep.c, ssa.c, delete.c)
 * call these; the answers are http.c's.
 */

#include <inttypes.h>

#include "api-internal.h"
#include "patch.h"

/* ---- bodies -------------------------------------------------------------------------------- */

/* kubectl's typed clients send protobuf (create configmap, for one). */
static bool is_protobuf(req *r) {
        const char *type = api__header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
        return type && startswith(type, "application/vnd.kubernetes.protobuf");
}

/* ... which a patch never is (kubectl sends patches as JSON): say so,
 * rather than fail to parse it as text. */
static bool refuse_protobuf(req *r, enum MHD_Result *ret) {
        if (!is_protobuf(r))
                return false;
        *ret = api__send_status(r, 415, "UnsupportedMediaType",
                                "tendd reads a patch as JSON, not %s",
                                api__header(r, MHD_HTTP_HEADER_CONTENT_TYPE));
        return true;
}

/* The body's documents; a List is expanded into its items. */
int api__body_docs(req *r, enum MHD_Result *ret, spec_docs *docs) {
        spec_errors errs = {};

        if (r->body.len == 0) {
                *ret = api__send_status(r, 400, "BadRequest", "the request needs a body");
                return -1;
        }
        /* (kubectl's typed clients: read as the JSON it says, or refused) */
        if (is_protobuf(r)) {
                _cleanup_free_ char *err = NULL;
                unsigned code;
                json_t *j = api__protobuf_object(r->body.data, r->body.len, &code, &err);
                if (!j) {
                        *ret = api__send_status(r, code,
                                                code == 415 ? "UnsupportedMediaType" : "BadRequest",
                                                "%s", strna(err));
                        return -1;
                }
                *docs = (spec_docs){ .items = new0(spec_doc, 1) };
                if (!docs->items) {
                        json_decref(j);
                        *ret = api__send_oom(r);
                        return -1;
                }
                docs->items[docs->n++] = (spec_doc){ .root = j, .line = 1, .index = 1 };
                return 0;
        }
        if (spec_parse_max("request", tend_buf_str(&r->body), r->body.len, API_BODY_MAX, &errs,
                           docs) < 0) {
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

/* 422 with every field error as a cause; kind: "Deployment.apps",
 * "ConfigMap" (the message's, and the details' kind and group, as
 * kube-apiserver's: kubectl prints "The Deployment \"web\" is invalid"). */
enum MHD_Result api__send_invalid(req *r, const char *kind, const char *name,
                                  const spec_errors *errs) {
        _cleanup_buf_ tend_buf msg = TEND_BUF_INIT(1 << 20);
        _cleanup_free_ char *bare = strndup(kind, strcspn(kind, "."));
        const char *group = kind[strcspn(kind, ".")] ? kind + strcspn(kind, ".") + 1 : "";
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
        details = json_pack("{s:s, s:s, s:s, s:o}", "name", strempty(name), "group", group, "kind",
                            strna(bare), "causes", causes);
        return api__send_json(r, 422,
                              spec_status_json(422, "Invalid", tend_buf_str(&msg), details));
}

/* fieldValidation (kubectl sends Strict, or Ignore for --validate=false):
 * Strict, the default, leaves unknown fields for the decoder to refuse;
 * Warn and Ignore take them out of j, Warn saying which. -1: answered. */
int api__field_validation(req *r, const spec_type *t, json_t *j, enum MHD_Result *ret) {
        const char *fv = api__arg(r, "fieldValidation");

        if (fv && !streq(fv, "Strict") && !streq(fv, "Warn") && !streq(fv, "Ignore")) {
                *ret = api__send_status(r, 400, "BadRequest",
                                        "fieldValidation must be Strict, Warn or Ignore, not %s",
                                        fv);
                return -1;
        }
        if (fv && !streq(fv, "Strict")) {
                _cleanup_(json_decrefp) json_t *dropped = json_array();
                if (!dropped || spec_drop_unknown(t, j, dropped) < 0) {
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

/* Decodes, defaults and validates an object of res from JSON (its kind's
 * row says how). */
void *api__decode_object(req *r, const resource *res, json_t *j, const char *ns, const char *name,
                         enum MHD_Result *ret) {
        const spec_kind *row = res->row;
        const spec_type *t = row->type;
        spec_errors errs = {};
        void *obj = NULL;
        spec_meta *m;
        const char *kind = json_string_value(json_object_get(j, "kind"));
        const char *jname = api__json_field(j, "metadata.name");
        const char *jns = api__json_field(j, "metadata.namespace");

        if (!json_is_object(j)) {
                *ret = api__send_status(r, 400, "BadRequest", "the object is %s, not a %s",
                                        json_is_array(j) ? "a list" : "no object", row->kind);
                return NULL;
        }
        /* a body without them is of the URL's kind, as the API server
         * takes it (the official Python client leaves them out where the
         * model's are not set) */
        if (!json_object_get(j, "kind") &&
            json_object_set_new(j, "kind", json_string(kind = row->kind)) < 0)
                return *ret = api__send_oom(r), NULL;
        if (!json_object_get(j, "apiVersion") &&
            json_object_set_new(j, "apiVersion", json_string(res->api_version)) < 0)
                return *ret = api__send_oom(r), NULL;
        if (!streq_ptr(kind, row->kind)) {
                *ret = api__send_status(r, 400, "BadRequest", "the object is a %s, not a %s",
                                        kind ? kind : "thing without a kind", row->kind);
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
        if (api__field_validation(r, t, j, ret) < 0)
                return NULL;
        if (res->kind == STORE_DEPLOYMENT) {
                _cleanup_free_ char *legacy = spec_legacy_leased_ports(j);
                if (legacy && !r->warning)
                        r->warning = strprintf(
                                "299 - \"spec.template.spec.containers[].ports: a port without "
                                "containerPort is not valid Kubernetes: tendd took it as the pod "
                                "template's annotation tend.io/lease-ports: %s (write it so)\"",
                                legacy);
        }
        if (spec_decode_new(t, j, &errs, &obj) < 0) {
                *ret = api__send_invalid(r, res->kind_qualified, jname ?: name, &errs);
                spec_errors_done(&errs);
                return NULL;
        }
        m = spec_object_meta(obj);
        if (!m->namespace && ns)
                m->namespace = strdup(ns);
        if (!m->name && name)
                m->name = strdup(name);
        if (row->defaults)
                row->defaults(obj);
        if (row->validate && row->validate(obj, &errs) < 0) {
                *ret = api__send_invalid(r, res->kind_qualified, m->name, &errs);
                spec_errors_done(&errs);
                spec_free(t, obj);
                return NULL;
        }
        return obj;
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
