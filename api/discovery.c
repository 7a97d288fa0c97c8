/* SPDX-License-Identifier: MIT */

/*
 * The HTTP API (tend/api.h): discovery (/api, /apis, each group version's
 * resources) from the kinds' registry (spec/kinds.c), and the answers for
 * the kinds it has none of.
 *
 * Besides the kinds tend runs, discovery lists kinds tend has none of, by
 * design or not yet (Services, ConfigMaps, Jobs...): kubectl resolves
 * every kind of its default prune list (apply --prune) and lists Services
 * for cluster-info before it does anything, and fails on a kind discovery
 * lacks. Such a kind answers what is true: its lists are empty, an object
 * of it is not found, and a write is refused with the reason (docs/api.md).
 */

#include <inttypes.h>
#include <pwd.h>

#include "api-internal.h"

static json_t *words(const char *list) {
        json_t *a = json_array();
        _cleanup_free_ char *copy = list ? strdup(list) : NULL;
        char *save = NULL;

        if (!a || (list && !copy))
                return json_decref(a), NULL;
        for (char *t = copy ? strtok_r(copy, " ", &save) : NULL; t; t = strtok_r(NULL, " ", &save))
                if (json_array_append_new(a, json_string(t)) < 0)
                        return json_decref(a), NULL;
        return a;
}

json_t *api__resource_list(const char *group, const char *version) {
        json_t *a = json_array();
        bool any = false;

        size_t n;
        const spec_kind *kinds = spec_kinds(&n);

        for (size_t i = 0; a && i < n; i++) {
                const spec_kind *k = &kinds[i];
                json_t *e;
                if (!streq(k->group, group) || !streq(k->version, version))
                        continue;
                any = true;
                e = json_pack("{s:s, s:s, s:b, s:s, s:o}", "name", k->plural, "singularName",
                              k->singular, "namespaced", k->namespaced, "kind", k->kind, "verbs",
                              words(k->verbs));
                /* the Scale of a subresource is autoscaling/v1's */
                if (e && streq(k->kind, "Scale") &&
                    (json_object_set_new(e, "group", json_string("autoscaling")) < 0 ||
                     json_object_set_new(e, "version", json_string("v1")) < 0))
                        e = (json_decref(e), NULL);
                if (e && k->short_names &&
                    json_object_set_new(e, "shortNames", words(k->short_names)) < 0)
                        e = (json_decref(e), NULL);
                if (e && k->in_all &&
                    json_object_set_new(e, "categories", json_pack("[s]", "all")) < 0)
                        e = (json_decref(e), NULL);
                if (!e || json_array_append_new(a, e) < 0)
                        a = (json_decref(a), NULL);
        }
        if (!any) {
                json_decref(a);
                return NULL;
        }
        _cleanup_free_ char *gv = *group ? strprintf("%s/%s", group, version) : strdup(version);
        return a && gv ? json_pack("{s:s, s:s, s:s, s:o}", "kind", "APIResourceList", "apiVersion",
                                   "v1", "groupVersion", gv, "resources", a)
                       : (json_decref(a), NULL);
}

json_t *api__group_list(void) {
        json_t *groups = json_array();

        size_t n;
        const spec_kind *kinds = spec_kinds(&n);

        for (size_t i = 0; groups && i < n; i++) {
                const spec_kind *k = &kinds[i];
                bool seen = false;
                if (!*k->group)
                        continue;
                for (size_t j = 0; j < i; j++)
                        seen = seen || streq(kinds[j].group, k->group);
                if (seen)
                        continue;
                _cleanup_free_ char *gv = strprintf("%s/%s", k->group, k->version);
                if (!gv ||
                    json_array_append_new(groups,
                                          json_pack("{s:s, s:[{s:s, s:s}], s:{s:s, s:s}}", "name",
                                                    k->group, "versions", "groupVersion", gv,
                                                    "version", k->version, "preferredVersion",
                                                    "groupVersion", gv, "version", k->version)) < 0)
                        groups = (json_decref(groups), NULL);
        }
        /* kubectl top's (usage.c) */
        if (groups &&
            json_array_append_new(groups,
                                  json_pack("{s:s, s:[{s:s, s:s}], s:{s:s, s:s}}", "name",
                                            "metrics.k8s.io", "versions", "groupVersion",
                                            "metrics.k8s.io/v1beta1", "version", "v1beta1",
                                            "preferredVersion", "groupVersion",
                                            "metrics.k8s.io/v1beta1", "version", "v1beta1")) < 0)
                groups = (json_decref(groups), NULL);
        return groups ? json_pack("{s:s, s:s, s:o}", "kind", "APIGroupList", "apiVersion", "v1",
                                  "groups", groups)
                      : NULL;
}

/* ---- kinds tend has none of ------------------------------------------------------------- */

enum MHD_Result api__handle_absent(req *r, const spec_kind *k, const char *ns, const char *name,
                                   const char *method) {
        const char *group = *k->group ? k->group : "";
        _cleanup_free_ char *qualified = *k->group ? strprintf("%s.%s", k->plural, k->group)
                                                   : strdup(k->plural);

        if (!qualified)
                return api__send_oom(r);
        if (!streq(method, "GET"))
                return api__send_status(r, 405, "MethodNotAllowed", "%s", k->absent);
        if (api__arg_true(r, "watch"))
                return api__send_status(r, 405, "MethodNotAllowed", "%s; there is nothing to watch",
                                        k->absent);
        if (name) {
                _cleanup_free_ char *msg = strprintf("%s \"%s\" not found: %s", qualified, name,
                                                     k->absent);
                return api__send_json(
                        r, 404,
                        spec_status_json(404, "NotFound", msg,
                                         json_pack("{s:s, s:s, s:s}", "name", name, "group", group,
                                                   "kind", k->plural)));
        }
        (void) ns;
        _cleanup_free_ char *list_kind = strprintf("%sList", k->kind),
                            *av = *k->group ? strprintf("%s/%s", k->group, k->version)
                                            : strdup(k->version);
        char rv[32];

        snprintf(rv, sizeof rv, "%" PRIu64, store_resource_version(r->s->store));
        return list_kind && av ? api__send_json(r, 200,
                                                json_pack("{s:s, s:s, s:{s:s}, s:[]}", "kind",
                                                          list_kind, "apiVersion", av, "metadata",
                                                          "resourceVersion", rv, "items"))
                               : api__send_oom(r);
}

/* ---- namespaces ------------------------------------------------------------------------- */

/* A namespace is made by using it, and has no object of its own: those
 * listed are default and every one that holds an object. */
static json_t *namespace_json(const char *name, usec_t created) {
        char ts[TIMESTAMP_MAX];
        json_t *j = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:[s]}, s:{s:s}}", "apiVersion",
                              "v1", "kind", "Namespace", "metadata", "name", name, "labels",
                              "kubernetes.io/metadata.name", name, "spec", "finalizers",
                              "kubernetes", "status", "phase", "Active");

        if (j && created &&
            json_object_set_new(json_object_get(j, "metadata"), "creationTimestamp",
                                json_string(format_timestamp(ts, created))) < 0)
                j = (json_decref(j), NULL);
        return j;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/* Every namespace in use, sorted, each with its oldest object's time. */
static json_t *namespaces(api_server *s) {
        _cleanup_(json_decrefp) json_t *seen = json_object();
        json_t *list = json_array(), *v;
        const char **names = NULL;
        const char *k;
        size_t n = 0, i = 0;

        if (!seen || !list)
                goto oom;
        if (json_object_set_new(seen, "default", json_integer(0)) < 0)
                goto oom;
        for (int kind = 0; kind < _STORE_KIND_MAX; kind++) {
                const void *const *items;
                size_t m = store_list(s->store, (store_kind) kind, &items);
                for (size_t j = 0; j < m; j++) {
                        const spec_meta *meta = spec_object_meta(items[j]);
                        json_t *had;
                        if (!meta->namespace)
                                continue;
                        had = json_object_get(seen, meta->namespace);
                        if (!had ||
                            (meta->creation_timestamp &&
                             (json_integer_value(had) == 0 ||
                              (json_int_t) meta->creation_timestamp < json_integer_value(had))))
                                if (json_object_set_new(
                                            seen, meta->namespace,
                                            json_integer((json_int_t) meta->creation_timestamp)) <
                                    0)
                                        goto oom;
                }
        }
        names = new0(const char *, json_object_size(seen) + 1);
        if (!names)
                goto oom;
        json_object_foreach (seen, k, v)
                names[n++] = k;
        qsort(names, n, sizeof *names, cmp_str);
        for (i = 0; i < n; i++) {
                json_t *one = namespace_json(
                        names[i], (usec_t) json_integer_value(json_object_get(seen, names[i])));
                if (!one || json_array_append_new(list, one) < 0)
                        goto oom;
        }
        free(names);
        return list;
oom:
        free(names);
        json_decref(list);
        return NULL;
}

/* kubectl's columns for namespaces: NAME, STATUS, AGE. */
static json_t *namespace_table(json_t *list, const char *rv) {
        json_t *rows = json_array(), *ns;
        size_t i;

        json_array_foreach (list, i, ns) {
                json_t *m = json_object_get(ns, "metadata");
                char age[32] = "<unknown>";
                usec_t created;
                if (parse_timestamp(json_string_value(json_object_get(m, "creationTimestamp")),
                                    &created) >= 0)
                        spec_human_duration(age, now_realtime() - MIN(created, now_realtime()));
                if (!rows || json_array_append_new(
                                     rows, json_pack("{s:[s, s, s], s:{s:s, s:s, s:O}}", "cells",
                                                     strempty(api__json_field(ns, "metadata.name")),
                                                     "Active", age, "object", "kind",
                                                     "PartialObjectMetadata", "apiVersion",
                                                     "meta.k8s.io/v1", "metadata", m)) < 0) {
                        json_decref(rows);
                        return NULL;
                }
        }
        return rows ? json_pack("{s:s, s:s, s:{s:s}, s:[{s:s, s:s, s:s, s:i}, {s:s, s:s, s:s, "
                                "s:i}, {s:s, s:s, s:s, s:i}], s:o}",
                                "kind", "Table", "apiVersion", "meta.k8s.io/v1", "metadata",
                                "resourceVersion", rv, "columnDefinitions", "name", "NAME", "type",
                                "string", "format", "name", "priority", 0, "name", "STATUS", "type",
                                "string", "format", "", "priority", 0, "name", "AGE", "type",
                                "string", "format", "", "priority", 0, "rows", rows)
                    : NULL;
}

enum MHD_Result api__handle_namespaces(req *r, const char *name, const char *method) {
        _cleanup_(json_decrefp) json_t *list = NULL;
        json_t *ns;
        size_t i;
        char rv[32];

        if (!streq(method, "GET"))
                return api__send_status(r, 405, "MethodNotAllowed",
                                        "a namespace is made by using it (apply an object with "
                                        "metadata.namespace) and goes with its last object");
        if (api__arg_true(r, "watch"))
                return api__send_status(r, 405, "MethodNotAllowed",
                                        "namespaces cannot be watched: list them");
        list = namespaces(r->s);
        if (!list)
                return api__send_oom(r);
        snprintf(rv, sizeof rv, "%" PRIu64, store_resource_version(r->s->store));
        if (name) {
                json_array_foreach (list, i, ns)
                        if (streq_ptr(api__json_field(ns, "metadata.name"), name)) {
                                _cleanup_(json_decrefp) json_t *one = json_pack("[O]", ns);
                                return api__send_json(r, 200,
                                                      api__wants_table(r) ? namespace_table(one, rv)
                                                                          : json_incref(ns));
                        }
                _cleanup_free_ char *msg = strprintf("namespaces \"%s\" not found: no object "
                                                     "of tend's is in it",
                                                     name);
                return api__send_json(r, 404,
                                      spec_status_json(404, "NotFound", msg,
                                                       json_pack("{s:s, s:s}", "name", name, "kind",
                                                                 "namespaces")));
        }
        if (api__wants_table(r))
                return api__send_json(r, 200, namespace_table(list, rv));
        return api__send_json(r, 200,
                              json_pack("{s:s, s:s, s:{s:s}, s:O}", "kind", "NamespaceList",
                                        "apiVersion", "v1", "metadata", "resourceVersion", rv,
                                        "items", list));
}

/* ---- who may do what -------------------------------------------------------------------- */

/*
 * There are no roles in tend: whoever reaches the API (the token's holder
 * over TCP; root, tendd's own uid and --socket-group on the local socket)
 * may do everything the API does, so every review answers yes. What tend
 * refuses to do (create a pod, an Orphan delete) it refuses for everyone,
 * with the reason, as a cluster's RBAC does not speak to it either.
 *
 * kubectl 1.32 sends these bodies as protobuf: they are not read (what they
 * ask does not change the answer); a JSON body's spec is answered back.
 */
static json_t *request_spec(req *r) {
        json_t *body, *spec;

        if (r->body.len == 0 || startswith(strempty(api__header(r, MHD_HTTP_HEADER_CONTENT_TYPE)),
                                           "application/vnd.kubernetes.protobuf"))
                return json_object();
        body = json_loadb(tend_buf_str(&r->body), r->body.len, 0, NULL);
        spec = json_incref(json_object_get(body, "spec"));
        json_decref(body);
        return json_is_object(spec) ? spec : (json_decref(spec), json_object());
}

/* A user's name (new string); NULL: none known. Read from the system's
 * user database, on the loop: asked only by whoami. */
static char *uid_to_name(uid_t uid) {
        struct passwd pw, *res = NULL;
        char buf[4096];

        if (getpwuid_r(uid, &pw, buf, sizeof buf, &res) != 0 || !res)
                return NULL;
        return strdup(res->pw_name);
}

/* The user the request comes as (new object): its name, uid, groups. */
static json_t *user_info(req *r) {
        const char *groups[] = { "system:masters", "system:authenticated" };

        if (r->slot && r->slot->tcp)
                return json_pack("{s:s, s:[s, s]}", "username", "tend:token", "groups", groups[0],
                                 groups[1]);
        if (r->peer_known) {
                char uid[32];
                _cleanup_free_ char *name = uid_to_name(r->peer_uid);
                snprintf(uid, sizeof uid, "%u", (unsigned) r->peer_uid);
                return json_pack("{s:s, s:s, s:[s, s], s:{s:[s]}}", "username", name ?: uid, "uid",
                                 uid, "groups", groups[0], groups[1], "extra", "tend.io/socket",
                                 strempty(r->s->socket_path));
        }
        return json_pack("{s:s, s:[s, s]}", "username", "tend:local", "groups", groups[0],
                         groups[1]);
}

enum MHD_Result api__handle_review(req *r, const spec_kind *k, const char *method) {
        const char *av = streq(k->group, "authentication.k8s.io") ? "authentication.k8s.io/v1"
                                                                  : "authorization.k8s.io/v1";

        if (!streq(method, "POST"))
                return api__send_status(r, 405, "MethodNotAllowed", "POST a %s to ask", k->kind);
        if (streq(k->kind, "SelfSubjectReview"))
                return api__send_json(r, 201,
                                      json_pack("{s:s, s:s, s:{}, s:{s:o}}", "kind", k->kind,
                                                "apiVersion", av, "metadata", "status", "userInfo",
                                                user_info(r)));
        if (streq(k->kind, "SelfSubjectRulesReview"))
                return api__send_json(
                        r, 201,
                        json_pack("{s:s, s:s, s:{}, s:o, s:{s:[{s:[s], s:[s], s:[s]}], "
                                  "s:[{s:[s], s:[s]}], s:b}}",
                                  "kind", k->kind, "apiVersion", av, "metadata", "spec",
                                  request_spec(r), "status", "resourceRules", "verbs", "*",
                                  "apiGroups", "*", "resources", "*", "nonResourceRules", "verbs",
                                  "*", "nonResourceURLs", "*", "incomplete", 0));
        return api__send_json(r, 201,
                              json_pack("{s:s, s:s, s:{}, s:o, s:{s:b, s:s}}", "kind", k->kind,
                                        "apiVersion", av, "metadata", "spec", request_spec(r),
                                        "status", "allowed", 1, "reason",
                                        "tend has no roles: whoever reaches its API may use all "
                                        "of it"));
}
