/* SPDX-License-Identifier: MIT */

/* Field managers and server-side apply: every write of a deployment records
 * who set which fields (metadata.managedFields, as Kubernetes keeps it), and
 * PATCH application/apply-patch+yaml applies a manager's whole intent with
 * conflicts against the others (spec/fields.c holds the algebra). */

#include <inttypes.h>

#include "api-internal.h"
#include "tend/fields.h"

#define MANAGER_MAX 128

static void now_string(char buf[static TIMESTAMP_MAX]) {
        format_timestamp(buf, now_realtime() / USEC_PER_SEC * USEC_PER_SEC);
}

char *api__field_manager(req *r, bool apply, enum MHD_Result *ret) {
        const char *fm = api__arg(r, "fieldManager"), *ua;

        if (fm) {
                bool printable = true;
                for (const char *p = fm; *p; p++)
                        if ((unsigned char) *p < 0x20 || *p == 0x7f)
                                printable = false;
                if (!*fm || strlen(fm) > MANAGER_MAX || !printable || !utf8_is_valid(fm)) {
                        *ret = api__send_status(
                                r, 422, "Invalid",
                                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Invalid "
                                "value: must be 1 to %d printable characters",
                                MANAGER_MAX);
                        return NULL;
                }
                return strdup(fm) ?: (*ret = api__send_oom(r), NULL);
        }
        if (apply) {
                *ret = api__send_status(r, 422, "Invalid",
                                        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: "
                                        "Required value: is required for apply patch (kubectl "
                                        "apply --server-side sends it; add ?fieldManager=NAME)");
                return NULL;
        }
        /* As the API server: the product of the User-Agent (kubectl/v1.32.0
         * (linux/amd64) … → kubectl), at most 128 bytes. */
        ua = api__header(r, "User-Agent");
        size_t n = ua ? strcspn(ua, "/ ") : 0;
        if (n > MANAGER_MAX)
                n = MANAGER_MAX;
        char *m = n ? strndup(ua, n) : strdup("unknown");
        if (m && !utf8_is_valid(m)) {
                free(m);
                m = strdup("unknown");
        }
        return m ?: (*ret = api__send_oom(r), NULL);
}

/* A single entry with nothing in it: "clear them all", as Kubernetes. */
static bool is_reset(json_t *given) {
        json_t *e = json_array_get(given, 0);
        return json_array_size(given) == 1 && json_object_size(e) == 0;
}

int api__track_update(req *r, const resource *res, void *obj, const void *stored, unsigned flags,
                      enum MHD_Result *ret) {
        _cleanup_(json_decrefp) json_t *old = NULL, *new = NULL, *given = NULL, *base = NULL,
                                       *ov = NULL, *nv = NULL, *managed = NULL;
        _cleanup_free_ char *manager = NULL, *err = NULL;
        char now[TIMESTAMP_MAX];
        spec_errors errs = {};

        if (r->fields_tracked)
                return 0;
        manager = api__field_manager(r, false, ret);
        if (!manager)
                return -1;
        old = stored ? api__encode_obj(res->kind, stored) : NULL;
        /* Compared as it will be stored: annotations the agent keeps
         * (revision, a restart) are no change. */
        void *will = agent_object_stored_form(res->kind, obj, stored, flags);
        new = will ? api__encode_obj(res->kind, will) : NULL;
        spec_free(res->row->type, will);
        if ((stored && !old) || !new)
                goto oom;
        /* What the request says of managedFields: nothing (or the stored
         * ones, as any patch of the stored object has): the stored ones;
         * [{}]: none; others: those, checked. */
        given = json_incref(json_object_get(json_object_get(new, "metadata"), "managedFields"));
        base = json_incref(json_object_get(json_object_get(old, "metadata"), "managedFields"));
        if (given && is_reset(given)) {
                json_decref(base);
                base = json_array();
        } else if (given && !json_equal(given, base)) {
                if (fields_check(given, &err) < 0) {
                        if (!err)
                                goto oom;
                        *ret = api__send_status(r, 422, "Invalid", "%s \"%s\" is invalid: %s",
                                                res->kind_qualified, spec_object_meta(obj)->name,
                                                err);
                        return -1;
                }
                json_decref(base);
                base = json_incref(given);
        }
        now_string(now);
        ov = old ? fields_view(old) : NULL;
        nv = fields_view(new);
        if ((old && !ov) || !nv)
                goto oom;
        managed = fields_update(base, ov, nv, manager, res->api_version, NULL, now);
        if (!managed || spec_meta_set_managed_fields(spec_object_meta(obj), managed, &errs) < 0) {
                spec_errors_done(&errs);
                goto oom;
        }
        return 0;
oom:
        *ret = api__send_oom(r);
        return -1;
}

json_t *api__track_scale(req *r, const spec_deployment *d, int32_t replicas, enum MHD_Result *ret) {
        _cleanup_(json_decrefp) json_t *old = api__encode_obj(STORE_DEPLOYMENT, d), *ov = NULL,
                                       *nv = NULL;
        _cleanup_free_ char *manager = api__field_manager(r, false, ret);
        char now[TIMESTAMP_MAX];
        json_t *m;

        if (!manager)
                return NULL;
        /* the view with another spec.replicas: copies of the two objects
         * on the way, the rest shared */
        ov = old ? fields_view(old) : NULL;
        nv = ov ? json_copy(ov) : NULL;
        json_t *spec = nv ? json_copy(json_object_get(ov, "spec")) : NULL;
        if (!spec || json_object_set_new(nv, "spec", spec) < 0 ||
            json_object_set_new(spec, "replicas", json_integer(replicas)) < 0) {
                *ret = api__send_oom(r);
                return NULL;
        }
        now_string(now);
        m = fields_update(json_object_get(json_object_get(old, "metadata"), "managedFields"), ov,
                          nv, manager, "apps/v1", "scale", now);
        if (!m)
                *ret = api__send_oom(r);
        return m;
}

/* 409 as the API server words an apply conflict; kubectl adds its advice
 * (--force-conflicts) when it sees one. */
static enum MHD_Result send_conflicts(req *r, json_t *conflicts) {
        _cleanup_buf_ tend_buf msg = TEND_BUF_INIT(1 << 20);
        json_t *causes = json_array(), *c;
        size_t i, n = json_array_size(conflicts);

        if (!causes)
                return api__send_oom(r);
        json_array_foreach (conflicts, i, c) {
                const char *who = json_string_value(json_object_get(c, "manager")),
                           *field = json_string_value(json_object_get(c, "field"));
                _cleanup_free_ char *m = strprintf("conflict with %s", strna(who));
                json_array_append_new(causes, json_pack("{s:s, s:s?, s:s}", "reason",
                                                        "FieldManagerConflict", "message", m,
                                                        "field", strna(field)));
                if (n == 1)
                        (void) tend_buf_addf(&msg,
                                             "Apply failed with 1 conflict: conflict with %s: %s",
                                             strna(who), strna(field));
                else {
                        const char *prev = i ? json_string_value(json_object_get(
                                                       json_array_get(conflicts, i - 1), "manager"))
                                             : NULL;
                        if (i == 0)
                                (void) tend_buf_addf(&msg, "Apply failed with %zu conflicts: ", n);
                        if (!streq_ptr(prev, who))
                                (void) tend_buf_addf(&msg, "%sconflicts with %s:", i ? "\n" : "",
                                                     strna(who));
                        (void) tend_buf_addf(&msg, "\n- %s", strna(field));
                }
        }
        return api__send_json(r, 409,
                              spec_status_json(409, "Conflict", tend_buf_str(&msg),
                                               json_pack("{s:o}", "causes", causes)));
}

/* What an apply body may say of itself: an object of res's kind and
 * apiVersion, named as the URL, without managedFields. -1: answered. */
static int check_config(req *r, const resource *res, json_t *config, const char *ns,
                        const char *name, enum MHD_Result *ret) {
        const char *kind = json_string_value(json_object_get(config, "kind")),
                   *av = json_string_value(json_object_get(config, "apiVersion")),
                   *jname = api__json_field(config, "metadata.name"),
                   *jns = api__json_field(config, "metadata.namespace");

        if (!streq_ptr(kind, res->row->kind) || !streq_ptr(av, res->api_version)) {
                *ret = api__send_status(r, 400, "BadRequest",
                                        "an apply to %s must be a %s of apiVersion %s, not %s %s",
                                        res->qualified, res->row->kind, res->api_version,
                                        av ?: "(no apiVersion)", kind ?: "(no kind)");
                return -1;
        }
        if (jname && !streq(jname, name)) {
                *ret = api__send_status(r, 400, "BadRequest",
                                        "the name of the object (%s) does not match the name on "
                                        "the URL (%s)",
                                        jname, name);
                return -1;
        }
        if (jns && !streq(jns, ns)) {
                *ret = api__send_status(r, 400, "BadRequest",
                                        "the namespace of the object (%s) does not match the "
                                        "namespace on the request (%s)",
                                        jns, ns);
                return -1;
        }
        if (json_object_get(json_object_get(config, "metadata"), "managedFields")) {
                *ret = api__send_status(r, 400, "BadRequest",
                                        "metadata.managedFields must be nil in an apply: the "
                                        "server keeps it");
                return -1;
        }
        return 0;
}

/*
 * kubectl's move from client-side to server-side apply, as kube-apiserver
 * makes it (for the manager "kubectl" only, kubectl apply --server-side's):
 * a field that the client-side apply set and nobody changed since (the
 * live value is still the last-applied one) is taken over without a
 * conflict; and the last-applied annotation, where there is one, follows
 * each such apply, so that a later client-side apply still diffs against
 * what was applied last.
 */
static json_t *forgiven_view(const resource *res, const char *manager, json_t *live) {
        json_t *ann = json_object_get(json_object_get(live, "metadata"), "annotations");
        const char *la = json_string_value(json_object_get(ann, SPEC_ANN_LAST_APPLIED));
        _cleanup_(json_decrefp) json_t *last = NULL;

        if (!streq(manager, "kubectl") || isempty(la))
                return NULL;
        last = json_loads(la, 0, NULL);
        if (!json_is_object(last) ||
            !streq_ptr(json_string_value(json_object_get(last, "apiVersion")), res->api_version))
                return NULL;
        return fields_view(last);
}

static int update_last_applied(const char *manager, json_t *doc, json_t *config) {
        json_t *ann = json_object_get(json_object_get(doc, "metadata"), "annotations");
        _cleanup_(json_decrefp) json_t *applied = NULL;
        _cleanup_free_ char *text = NULL, *line = NULL;

        if (!streq(manager, "kubectl") ||
            isempty(json_string_value(json_object_get(ann, SPEC_ANN_LAST_APPLIED))))
                return 0;
        applied = json_deep_copy(config);
        if (!applied)
                return -ENOMEM;
        json_object_del(json_object_get(json_object_get(applied, "metadata"), "annotations"),
                        SPEC_ANN_LAST_APPLIED);
        text = json_dumps(applied, JSON_COMPACT | JSON_SORT_KEYS);
        line = text ? strprintf("%s\n", text) : NULL;
        return line && json_object_set_new(ann, SPEC_ANN_LAST_APPLIED, json_string(line)) >= 0
                       ? 0
                       : -ENOMEM;
}

void *api__server_side_apply(req *r, const resource *res, const void *obj, const char *ns,
                             const char *name, unsigned *ok_code, enum MHD_Result *ret) {
        _cleanup_(json_decrefp) json_t *config = NULL, *live = NULL, *cv = NULL, *lv = NULL,
                                       *view = NULL, *managed = NULL, *conflicts = NULL,
                                       *doc = NULL, *forgiven = NULL;
        _cleanup_free_ char *manager = NULL, *err = NULL;
        bool force = api__arg_true(r, "force");
        const char *rv;
        char now[TIMESTAMP_MAX], have_rv[32];
        void *d;
        int rc;

        manager = api__field_manager(r, true, ret);
        if (!manager)
                return NULL;
        config = api__body_object(r, ret); /* YAML or JSON */
        if (!config)
                return NULL;
        if (!json_is_object(config)) {
                *ret = api__send_status(r, 400, "BadRequest", "an apply body is an object");
                return NULL;
        }
        if (check_config(r, res, config, ns, name, ret) < 0 ||
            api__field_validation(r, res->row->type, config, ret) < 0)
                return NULL;
        /* A resourceVersion in the configuration is a precondition. */
        rv = api__json_field(config, "metadata.resourceVersion");
        if (rv && *rv)
                r->conditional = true;
        if (rv && obj) {
                snprintf(have_rv, sizeof have_rv, "%" PRIu64,
                         spec_object_meta(obj)->resource_version);
                if (!streq(rv, have_rv)) {
                        *ret = api__send_status(r, 409, "Conflict",
                                                "Operation cannot be fulfilled on %s \"%s\": the "
                                                "object has been modified; please apply your "
                                                "changes to the latest version and try again",
                                                res->qualified, name);
                        return NULL;
                }
        }
        json_object_del(config, "status"); /* the controllers' */
        live = obj ? api__encode_obj(res->kind, obj) : NULL;
        cv = fields_view(config);
        lv = live ? fields_view(live) : NULL;
        if ((obj && (!live || !lv)) || !cv) {
                *ret = api__send_oom(r);
                return NULL;
        }
        now_string(now);
        forgiven = live ? forgiven_view(res, manager, live) : NULL;
        rc = fields_apply(json_object_get(json_object_get(live, "metadata"), "managedFields"), lv,
                          cv, manager, res->api_version, force, forgiven, now, &view, &managed,
                          &conflicts, &err);
        if (rc != 0) {
                *ret = rc == 1 ? send_conflicts(r, conflicts)
                       : rc == -EINVAL
                               ? api__send_status(r, 422, "Invalid", "%s \"%s\" is invalid: %s",
                                                  res->kind_qualified, name, strna(err))
                               : api__send_oom(r);
                return NULL;
        }

        /* (a new one's name and namespace come from the URL, checked as
         * any: api__decode_object) */
        doc = live ? json_incref(live)
                   : json_pack("{s:s, s:s, s:{}}", "apiVersion", res->api_version, "kind",
                               res->row->kind, "metadata");
        if (!doc || fields_set_view(doc, view) < 0 ||
            json_object_set(json_object_get(doc, "metadata"), "managedFields", managed) < 0 ||
            update_last_applied(manager, doc, config) < 0) {
                *ret = api__send_oom(r);
                return NULL;
        }
        d = api__decode_object(r, res, doc, ns, name, ret);
        if (d) {
                r->fields_tracked = true;
                *ok_code = obj ? 200 : 201;
        }
        return d;
}
