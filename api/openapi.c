/* SPDX-License-Identifier: MIT */

/*
 * /openapi/v3: what kubectl reads to validate (it then asks the server to,
 * with fieldValidation), to explain, and to compute apply and diff patches.
 * Two group-version documents, apps/v1 and v1, with the paths tend serves
 * and the schemas of its objects, made once from the decoder's own tables
 * (spec_openapi_schema). Each is served under a hash of its content, which
 * kubectl caches by.
 */

#include "api-internal.h"

static const char *const write_verbs[] = { "post", "put", "patch" };

static json_t *gvk(const resource *res) {
        const char *group = streq(res->prefix, "api/v1") ? "" : "apps";
        return json_pack("{s:s, s:s, s:s}", "group", group, "version", "v1", "kind",
                         store_kind_to_string(res->kind));
}

/* One operation of a path: its action, the kind it is about, and for
 * writes the body and the fieldValidation parameter kubectl looks for. */
static json_t *operation(const resource *res, const char *verb, const char *action,
                         const char *schema_ref, bool list) {
        bool write = false;
        json_t *op, *params, *content;

        for (size_t i = 0; i < ELEMENTSOF(write_verbs); i++)
                write = write || streq(verb, write_verbs[i]);
        char id[64];

        (void) snprintf(id, sizeof id, "%s%s%s", verb, store_kind_to_string(res->kind),
                        list ? "List" : "");
        op = json_pack("{s:s, s:s, s:o, s:[], s:{s:{s:s}}}", "operationId", id,
                       "x-kubernetes-action", action, "x-kubernetes-group-version-kind", gvk(res),
                       "parameters", "responses", "200", "description", "OK");
        if (!op)
                return NULL;
        params = json_object_get(op, "parameters");
        if (write &&
            json_array_append_new(params,
                                  json_pack("{s:s, s:s, s:s, s:{s:s}, s:b}", "name",
                                            "fieldValidation", "in", "query", "description",
                                            "Strict: unknown or duplicate fields are refused; "
                                            "Warn and Ignore: left out, with a warning for Warn",
                                            "schema", "type", "string", "uniqueItems", true)) < 0)
                return json_decref(op), NULL;
        if (write &&
            json_array_append_new(params, json_pack("{s:s, s:s, s:{s:s}}", "name", "dryRun", "in",
                                                    "query", "schema", "type", "string")) < 0)
                return json_decref(op), NULL;
        if (!write)
                return op;
        content = streq(verb, "patch")
                          ? json_pack("{s:{s:{}}, s:{s:{}}, s:{s:{}}}",
                                      "application/json-patch+json", "schema",
                                      "application/merge-patch+json", "schema",
                                      "application/strategic-merge-patch+json", "schema")
                          : json_pack("{s:{s:{s:s}}}", "application/json", "schema", "$ref",
                                      schema_ref);
        if (!content ||
            json_object_set_new(op, "requestBody", json_pack("{s:o}", "content", content)) < 0)
                return json_decref(op), NULL;
        return op;
}

static int add_paths(json_t *paths, const resource *res, const char *schema_ref) {
        _cleanup_free_ char *coll = strprintf("/%s/namespaces/{namespace}/%s", res->prefix,
                                              res->plural),
                            *item = strprintf("%s/{name}", coll);
        bool deployment = res->kind == STORE_DEPLOYMENT;
        json_t *c, *i;

        if (!coll || !item)
                return -ENOMEM;
        c = json_pack("{s:o}", "get", operation(res, "get", "list", schema_ref, true));
        i = json_pack("{s:o, s:o}", "get", operation(res, "get", "get", schema_ref, false),
                      "delete", operation(res, "delete", "delete", schema_ref, false));
        if (c && deployment &&
            json_object_set_new(c, "post", operation(res, "post", "post", schema_ref, false)) < 0)
                c = (json_decref(c), NULL);
        if (i && deployment &&
            (json_object_set_new(i, "put", operation(res, "put", "put", schema_ref, false)) < 0 ||
             json_object_set_new(i, "patch", operation(res, "patch", "patch", schema_ref, false)) <
                     0))
                i = (json_decref(i), NULL);
        if (!c || !i || json_object_set_new(paths, coll, c) < 0 ||
            json_object_set_new(paths, item, i) < 0) {
                json_decref(c);
                json_decref(i);
                return -ENOMEM;
        }
        return 0;
}

static char *hash_of(const char *s) {
        uint64_t h = 1469598103934665603ULL; /* FNV-1a */
        for (; *s; s++)
                h = (h ^ (unsigned char) *s) * 1099511628211ULL;
        return strprintf("%016llX", (unsigned long long) h);
}

/* The document of one group-version ("api/v1", "apis/apps/v1"). */
static char *group_document(const char *prefix) {
        _cleanup_(json_decrefp) json_t *doc = json_pack(
                "{s:s, s:{s:s, s:s}, s:{}, s:{s:{}}}", "openapi", "3.0.0", "info", "title", "tend",
                "version", TEND_VERSION, "paths", "components", "schemas");
        json_t *paths = json_object_get(doc, "paths"),
               *schemas = json_object_get(json_object_get(doc, "components"), "schemas");

        if (!doc)
                return NULL;
        for (int k = 0; k < _STORE_KIND_MAX; k++) {
                const resource *res = api__resource((store_kind) k);
                _cleanup_free_ char *name = NULL, *schema_ref = NULL;
                json_t *s;
                if (!streq(res->prefix, prefix))
                        continue;
                if (spec_openapi_schema(store_kind_type(res->kind), schemas, &name) < 0)
                        return NULL;
                s = json_object_get(schemas, name);
                schema_ref = strprintf("#/components/schemas/%s", name);
                if (!schema_ref ||
                    json_object_set_new(s, "x-kubernetes-group-version-kind",
                                        json_pack("[o]", gvk(res))) < 0 ||
                    add_paths(paths, res, schema_ref) < 0)
                        return NULL;
        }
        spec_openapi_strip(schemas);
        return json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
}

int api__openapi_init(api_server *s) {
        _cleanup_free_ char *h1 = NULL, *h2 = NULL;

        s->openapi_core = group_document("api/v1");
        s->openapi_apps = group_document("apis/apps/v1");
        if (!s->openapi_core || !s->openapi_apps)
                return -ENOMEM;
        h1 = hash_of(s->openapi_core);
        h2 = hash_of(s->openapi_apps);
        if (!h1 || !h2)
                return -ENOMEM;
        s->openapi_root = strprintf(
                "{\"paths\":{\"api/v1\":{\"serverRelativeURL\":"
                "\"/openapi/v3/api/v1?hash=%s\"},\"apis/apps/v1\":{"
                "\"serverRelativeURL\":\"/openapi/v3/apis/apps/v1?hash=%s\"}}}\n",
                h1, h2);
        return s->openapi_root ? 0 : -ENOMEM;
}

void api__openapi_done(api_server *s) {
        free(s->openapi_root);
        free(s->openapi_core);
        free(s->openapi_apps);
}

/* GET /openapi/v3[/api/v1|/apis/apps/v1]; seg: the path's segments after
 * "openapi". */
enum MHD_Result api__handle_openapi(req *r, char **seg, size_t n) {
        const char *doc = NULL;

        if (n == 1 && streq(seg[0], "v3"))
                doc = r->s->openapi_root;
        else if (n == 3 && streq(seg[0], "v3") && streq(seg[1], "api") && streq(seg[2], "v1"))
                doc = r->s->openapi_core;
        else if (n == 4 && streq(seg[0], "v3") && streq(seg[1], "apis") && streq(seg[2], "apps") &&
                 streq(seg[3], "v1"))
                doc = r->s->openapi_apps;
        if (!doc)
                return api__send_status(r, 404, "NotFound",
                                        "tendd serves OpenAPI v3 only: /openapi/v3, "
                                        "/openapi/v3/api/v1, /openapi/v3/apis/apps/v1");
        return api__queue(r, 200, "application/json", strdup(doc));
}
