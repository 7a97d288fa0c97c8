/* SPDX-License-Identifier: MIT */

/*
 * Table answers (meta.k8s.io/v1): what kubectl asks for with
 * `Accept: application/json;as=Table;g=meta.k8s.io;v=v1`, so that `get`
 * prints real columns. The columns and cells are spec's (table.c), the ones
 * the tend CLI prints. Each row carries the object's metadata
 * (PartialObjectMetadata), or the whole object with includeObject=Object.
 */

#include <inttypes.h>

#include "api-internal.h"

bool api__wants_table(req *r) {
        const char *accept = api__header(r, MHD_HTTP_HEADER_ACCEPT);

        return accept && strstr(accept, "as=Table") && strstr(accept, "g=meta.k8s.io");
}

static const char *revision_of(const char *ns, const char *rs, void *userdata) {
        const spec_replica_set *r = store_get(userdata, STORE_REPLICA_SET, ns, rs);

        return r ? spec_map_get(&r->metadata.annotations, SPEC_ANN_REVISION) : NULL;
}

static json_t *columns(const resource *res) {
        const spec_column *c;
        size_t n = spec_table_columns(store_kind_type(res->kind), &c);
        json_t *a = json_array();

        for (size_t i = 0; a && i < n; i++)
                if (json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:s, s:i}", "name",
                                                       c[i].name, "type", c[i].type, "format",
                                                       c[i].format, "description", c[i].description,
                                                       "priority", c[i].priority)) < 0)
                        return json_decref(a), NULL;
        return a;
}

/* One row of obj; its encoding j (borrowed) gives the row's object. */
static json_t *row(api_server *s, const resource *res, const void *obj, json_t *j, bool whole) {
        const spec_type *t = store_kind_type(res->kind);
        const spec_column *c;
        size_t n = spec_table_columns(t, &c);
        char *cells[16] = {};
        spec_table_ctx ctx = { .now = now_realtime(),
                               .human = true,
                               .restarts_ago = true,
                               .revision_of = revision_of,
                               .userdata = s->store };
        json_t *a = json_array(), *o;

        if (n > ELEMENTSOF(cells) || spec_table_row(t, obj, &ctx, cells) < 0)
                return json_decref(a), NULL;
        for (size_t i = 0; i < n; i++) {
                if (a && json_array_append_new(a, json_string(cells[i] ?: "<none>")) < 0)
                        a = (json_decref(a), NULL);
                free(cells[i]);
        }
        o = whole ? json_incref(j)
                  : json_pack("{s:s, s:s, s:O}", "kind", "PartialObjectMetadata", "apiVersion",
                              "meta.k8s.io/v1", "metadata", json_object_get(j, "metadata"));
        return a && o ? json_pack("{s:o, s:o}", "cells", a, "object", o)
                      : (json_decref(a), json_decref(o), NULL);
}

static json_t *table(api_server *s, const resource *res) {
        char rv[32];

        snprintf(rv, sizeof rv, "%" PRIu64, store_resource_version(s->store));
        return json_pack("{s:s, s:s, s:{s:s}, s:o, s:[]}", "kind", "Table", "apiVersion",
                         "meta.k8s.io/v1", "metadata", "resourceVersion", rv, "columnDefinitions",
                         columns(res), "rows");
}

static bool whole_object(req *r) {
        return streq_ptr(api__arg(r, "includeObject"), "Object");
}

typedef struct table_rows {
        api_server *s;
        const resource *res;
        json_t *rows;
        bool whole;
} table_rows;

static int add_row(void *u, const void *obj, json_t *j) {
        table_rows *t = u;
        json_t *rw = row(t->s, t->res, obj, j, t->whole);

        return rw && json_array_append_new(t->rows, rw) >= 0 ? 0 : -ENOMEM;
}

char *api__table_body(req *r, const resource *res, const filter *f, const page *pg) {
        _cleanup_(json_decrefp) json_t *t = table(r->s, res);
        table_rows tr = { r->s, res, json_object_get(t, "rows"), whole_object(r) };

        if (!t ||
            api__list_walk(r->s, res, f, pg, add_row, &tr, json_object_get(t, "metadata")) < 0)
                return NULL;
        _cleanup_free_ char *text = json_dumps(t, JSON_COMPACT);
        return text ? strprintf("%s\n", text) : NULL;
}

/* A Table of one object (obj; NULL: decoded from its encoding j). */
json_t *api__table_of_one(api_server *s, const resource *res, const void *obj, json_t *j,
                          bool whole) {
        const spec_type *t = store_kind_type(res->kind);
        spec_errors errs = {};
        void *decoded = NULL;
        json_t *tb = NULL, *rw;

        if (!obj && spec_decode_new(t, j, &errs, &decoded) >= 0)
                obj = decoded;
        if (obj) {
                tb = table(s, res);
                rw = tb ? row(s, res, obj, j, whole) : NULL;
                if (!rw || json_array_append_new(json_object_get(tb, "rows"), rw) < 0)
                        tb = (json_decref(tb), NULL);
        }
        spec_free(t, decoded);
        spec_errors_done(&errs);
        return tb;
}

json_t *api__table_of(req *r, const resource *res, const void *obj) {
        json_t *j = api__encode(res, obj),
               *t = j ? api__table_of_one(r->s, res, obj, j, whole_object(r)) : NULL;

        json_decref(j);
        return t;
}
