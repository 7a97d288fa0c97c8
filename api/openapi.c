/* SPDX-License-Identifier: MIT */

/*
 * /openapi/v3 (and the same as Swagger 2.0 JSON at /openapi/v2): what kubectl reads to validate (it
 * then asks the server to, with fieldValidation), to explain, and to compute apply and diff
 * patches. Two group-version documents, apps/v1 and v1, with the paths tend serves and the schemas
 * of its objects, made once from the decoder's own tables (spec_openapi_schema). Each is served
 * under a hash of its content, which kubectl caches by.
 */

#include "api-internal.h"

static const char *const write_verbs[] = { "post", "put", "patch" };

static json_t *gvk(const resource *res) {
        return json_pack("{s:s, s:s, s:s}", "group", res->row->group, "version", res->row->version,
                         "kind", res->row->kind);
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
                          ? json_pack("{s:{s:{}}, s:{s:{}}, s:{s:{}}, s:{s:{}}}",
                                      "application/json-patch+json", "schema",
                                      "application/merge-patch+json", "schema",
                                      "application/strategic-merge-patch+json", "schema",
                                      "application/apply-patch+yaml", "schema")
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
        bool written = res->row->writes != SPEC_WRITES_NONE; /* (by a user) */
        json_t *c, *i;

        if (!coll || !item)
                return -ENOMEM;
        c = json_pack("{s:o}", "get", operation(res, "get", "list", schema_ref, true));
        i = json_pack("{s:o, s:o}", "get", operation(res, "get", "get", schema_ref, false),
                      "delete", operation(res, "delete", "delete", schema_ref, false));
        if (c && written &&
            json_object_set_new(c, "post", operation(res, "post", "post", schema_ref, false)) < 0)
                c = (json_decref(c), NULL);
        if (i && written &&
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

/* ---- /openapi/v2: the same, as Swagger 2.0 JSON ---- */

/* Every "#/components/schemas/X" reference becomes "#/definitions/X". */
static void v2_refs(json_t *j) {
        const char *k;
        json_t *v;
        size_t i;

        if (json_is_array(j))
                json_array_foreach (j, i, v)
                        v2_refs(v);
        if (!json_is_object(j))
                return;
        json_object_foreach (j, k, v) {
                const char *ref = streq(k, "$ref") ? json_string_value(v) : NULL;
                const char *name = ref ? startswith(ref, "#/components/schemas/") : NULL;
                if (name) {
                        _cleanup_free_ char *r2 = strprintf("#/definitions/%s", name);
                        if (r2)
                                (void) json_string_set(v, r2);
                } else
                        v2_refs(v);
        }
}

/* An operation's requestBody becomes a body parameter; query parameters
 * carry their type directly. */
static int v2_operation(json_t *op) {
        json_t *params = json_object_get(op, "parameters"), *p, *body;
        size_t i;

        json_array_foreach (params, i, p) {
                json_t *schema = json_object_get(p, "schema");
                if (schema && json_object_update(p, schema) < 0)
                        return -ENOMEM;
                json_object_del(p, "schema");
        }
        body = json_object_get(op, "requestBody");
        if (!body)
                return 0;
        json_t *content = json_object_get(body, "content"), *schema = NULL, *types = json_array();
        const char *type;
        json_t *c;
        if (!types)
                return -ENOMEM;
        json_object_foreach (content, type, c) {
                if (!schema && json_object_size(json_object_get(c, "schema")) > 0)
                        schema = json_object_get(c, "schema");
                if (json_array_append_new(types, json_string(type)) < 0)
                        return json_decref(types), -ENOMEM;
        }
        if (json_object_set_new(op, "consumes", types) < 0 ||
            json_array_append_new(params, json_pack("{s:s, s:s, s:b, s:o}", "name", "body", "in",
                                                    "body", "required", true, "schema",
                                                    schema ? json_incref(schema) : json_object())) <
                    0)
                return -ENOMEM;
        json_object_del(op, "requestBody");
        return 0;
}

/* Both group-versions in one Swagger 2.0 document, from the v3 ones. */
static char *v2_document(const char *core, const char *apps) {
        _cleanup_(json_decrefp) json_t *doc = json_pack(
                "{s:s, s:{s:s, s:s}, s:{}, s:{}}", "swagger", "2.0", "info", "title", "tend",
                "version", TEND_VERSION, "paths", "definitions");
        const char *const v3[] = { core, apps };

        if (!doc)
                return NULL;
        for (size_t d = 0; d < ELEMENTSOF(v3); d++) {
                _cleanup_(json_decrefp) json_t *j = json_loads(v3[d], 0, NULL);
                json_t *paths = json_object_get(j, "paths"), *item, *op;
                const char *path, *verb;
                if (!j)
                        return NULL;
                v2_refs(j);
                json_object_foreach (paths, path, item)
                        json_object_foreach (item, verb, op)
                                if (v2_operation(op) < 0)
                                        return NULL;
                if (json_object_update(json_object_get(doc, "paths"), paths) < 0 ||
                    json_object_update(
                            json_object_get(doc, "definitions"),
                            json_object_get(json_object_get(j, "components"), "schemas")) < 0)
                        return NULL;
        }
        return json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
}

int api__openapi_init(api_server *s) {
        _cleanup_free_ char *h1 = NULL, *h2 = NULL;

        s->openapi_core = group_document("api/v1");
        s->openapi_apps = group_document("apis/apps/v1");
        if (!s->openapi_core || !s->openapi_apps)
                return -ENOMEM;
        s->openapi_v2 = v2_document(s->openapi_core, s->openapi_apps);
        if (!s->openapi_v2)
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
        free(s->openapi_v2);
}

/* GET /openapi/v3[/api/v1|/apis/apps/v1]; seg: the path's segments after
 * "openapi". */
enum MHD_Result api__handle_openapi(req *r, char **seg, size_t n) {
        const char *doc = NULL;

        if (n == 1 && streq(seg[0], "v2")) {
                /* JSON only: kubectl asks for protobuf first, then reads v3 */
                const char *accept = api__header(r, MHD_HTTP_HEADER_ACCEPT);
                if (accept && strstr(accept, "protobuf") && !strstr(accept, "json"))
                        return api__send_status(r, 406, "NotAcceptable",
                                                "/openapi/v2 is served as JSON "
                                                "(application/json), not protobuf; "
                                                "/openapi/v3 has the same schemas");
                doc = r->s->openapi_v2;
        } else if (n == 1 && streq(seg[0], "v3"))
                doc = r->s->openapi_root;
        else if (n == 3 && streq(seg[0], "v3") && streq(seg[1], "api") && streq(seg[2], "v1"))
                doc = r->s->openapi_core;
        else if (n == 4 && streq(seg[0], "v3") && streq(seg[1], "apis") && streq(seg[2], "apps") &&
                 streq(seg[3], "v1"))
                doc = r->s->openapi_apps;
        if (!doc)
                return api__send_status(r, 404, "NotFound",
                                        "tendd serves /openapi/v2 (JSON), /openapi/v3, "
                                        "/openapi/v3/api/v1 and /openapi/v3/apis/apps/v1");
        return api__queue(r, 200, "application/json", strdup(doc));
}
