/* SPDX-License-Identifier: MIT */

/*
 * OpenAPI v3 schemas of tend's objects, from the same field tables the
 * codec decodes with: what the schema says is accepted is exactly what the
 * decoder accepts. Fields tend refuses are left out (the server's strict
 * decoding names them, with the reason). containers and env merge by name
 * (spec_list_merge_key, what the server's strategic merge patch does);
 * other lists are atomic, so kubectl sends them whole — ports among them, as
 * a leased port has no containerPort to merge on.
 */

#include "spec-internal.h"

#include <jansson.h>

/* The Kubernetes definition name of a type: the API group it belongs to,
 * then its Go name. ObjectMeta comes in two cuts (an object's, a pod
 * template's): the second is named for what it is. */
static char *definition_name(const spec_type *t, json_t *schemas) {
        static const char *const apps[] = {
                "Deployment",         "DeploymentSpec",          "DeploymentStatus",
                "DeploymentStrategy", "RollingUpdateDeployment", "ReplicaSet",
                "ReplicaSetSpec",     "ReplicaSetStatus"
        };
        static const char *const meta[] = { "ObjectMeta", "LabelSelector",
                                            "LabelSelectorRequirement", "OwnerReference",
                                            "Condition" };
        const char *group = "io.k8s.api.core.v1";

        for (size_t i = 0; i < ELEMENTSOF(apps); i++)
                if (streq(t->name, apps[i]))
                        group = "io.k8s.api.apps.v1";
        for (size_t i = 0; i < ELEMENTSOF(meta); i++)
                if (streq(t->name, meta[i]))
                        group = "io.k8s.apimachinery.pkg.apis.meta.v1";
        for (unsigned n = 1;; n++) {
                char *name = n == 1 ? strprintf("%s.%s", group, t->name)
                                    : strprintf("%s.%s%u", group, t->name, n);
                json_t *have;
                if (!name)
                        return NULL;
                have = json_object_get(schemas, name);
                /* the type's own entry carries its address, to tell cuts apart */
                if (!have || json_integer_value(json_object_get(have, "x-tend-type")) ==
                                     (json_int_t) (uintptr_t) t)
                        return name;
                free(name);
        }
}

static int add_type(const spec_type *t, json_t *schemas, char **ret_name);

const char *spec_list_merge_key(const char *field) {
        return streq(field, "containers") || streq(field, "env") ? "name" : NULL;
}

static json_t *ref(const char *name) {
        char *r = strprintf("#/components/schemas/%s", name);
        json_t *j = r ? json_pack("{s:[{s:s}]}", "allOf", "$ref", r) : NULL;
        free(r);
        return j;
}

static json_t *field_schema(const spec_field *f, json_t *schemas) {
        _cleanup_free_ char *name = NULL;
        json_t *j = NULL, *e;

        switch (f->kind) {
        case SK_STRING:
        case SK_RV:
                return json_pack("{s:s}", "type", "string");
        case SK_INT32:
                return json_pack("{s:s, s:s}", "type", "integer", "format", "int32");
        case SK_INT64:
                return json_pack("{s:s, s:s}", "type", "integer", "format", "int64");
        case SK_BOOL:
                return json_pack("{s:s}", "type", "boolean");
        case SK_TIME:
                return json_pack("{s:s, s:s}", "type", "string", "format", "date-time");
        case SK_INTSTR:
        case SK_QUANTITY:
                return json_pack("{s:b}", "x-kubernetes-int-or-string", true);
        case SK_STRV:
                return json_pack("{s:s, s:{s:s}, s:s}", "type", "array", "items", "type", "string",
                                 "x-kubernetes-list-type", "atomic");
        case SK_MAP:
                return json_pack("{s:s, s:{s:s}}", "type", "object", "additionalProperties", "type",
                                 "string");
        case SK_ENUM:
                j = json_pack("{s:s, s:[]}", "type", "string", "enum");
                e = json_object_get(j, "enum");
                for (int i = 0; e && i < f->n_enum; i++)
                        if (json_array_append_new(e, json_string(f->enum_names[i])) < 0)
                                return json_decref(j), NULL;
                return j;
        case SK_STRUCT:
        case SK_PTR:
                return add_type(f->type, schemas, &name) < 0 ? NULL : ref(name);
        case SK_ARRAY:
                if (add_type(f->type, schemas, &name) < 0)
                        return NULL;
                if (spec_list_merge_key(f->name))
                        return json_pack("{s:s, s:o, s:s, s:[s], s:s, s:s}", "type", "array",
                                         "items", ref(name), "x-kubernetes-list-type", "map",
                                         "x-kubernetes-list-map-keys", spec_list_merge_key(f->name),
                                         "x-kubernetes-patch-strategy", "merge",
                                         "x-kubernetes-patch-merge-key",
                                         spec_list_merge_key(f->name));
                return json_pack("{s:s, s:o, s:s}", "type", "array", "items", ref(name),
                                 "x-kubernetes-list-type", "atomic");
        case SK_UNSUPPORTED:
                break;
        }
        return NULL;
}

static int add_type(const spec_type *t, json_t *schemas, char **ret_name) {
        _cleanup_free_ char *name = definition_name(t, schemas);
        json_t *s, *props;

        if (!name)
                return -ENOMEM;
        if (!json_object_get(schemas, name)) {
                s = json_pack("{s:s, s:{}, s:I}", "type", "object", "properties", "x-tend-type",
                              (json_int_t) (uintptr_t) t);
                /* in place before the fields: a type that contains itself ends */
                if (!s || json_object_set_new(schemas, name, s) < 0)
                        return -ENOMEM;
                props = json_object_get(s, "properties");
                if (t->map_like) {
                        json_object_del(s, "properties");
                        if (json_object_set_new(
                                    s, "additionalProperties",
                                    json_pack("{s:b}", "x-kubernetes-int-or-string", true)) < 0)
                                return -ENOMEM;
                } else
                        for (const spec_field *f = t->fields; f->name; f++) {
                                json_t *fs;
                                if (f->kind == SK_UNSUPPORTED)
                                        continue;
                                fs = field_schema(f, schemas);
                                if (!fs || json_object_set_new(props, f->name, fs) < 0)
                                        return -ENOMEM;
                        }
        }
        *ret_name = TAKE_PTR(name);
        return 0;
}

int spec_openapi_schema(const spec_type *t, json_t *schemas, char **ret_name) {
        return add_type(t, schemas, ret_name);
}

void spec_openapi_strip(json_t *schemas) {
        const char *k;
        json_t *v;

        json_object_foreach (schemas, k, v)
                json_object_del(v, "x-tend-type");
}
