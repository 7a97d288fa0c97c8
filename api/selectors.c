/* SPDX-License-Identifier: MIT */

/* The HTTP API (tend/api.h): label and field selectors. */

#include <inttypes.h>

#include "api-internal.h"

/* ---- selectors --------------------------------------------------------------------------- */

void api__filter_done(filter *f) {
        free(f->ns);
        spec_free(&spec_type_selector, f->labels);
        for (size_t i = 0; i < f->n_fields; i++) {
                free(f->fields[i].path);
                free(f->fields[i].value);
        }
        *f = (filter){};
}

/* labelSelector and fieldSelector from the query; *ret_error on nonsense. */
int api__filter_parse(req *r, const char *ns, filter *f, char **ret_error) {
        const char *ls = api__arg(r, "labelSelector"), *fs = api__arg(r, "fieldSelector");

        *f = (filter){};
        if (ns && !(f->ns = strdup(ns)))
                return -ENOMEM;
        if (!isempty(ls)) {
                f->labels = spec_new(&spec_type_selector);
                if (!f->labels || spec_selector_parse(ls, f->labels) < 0) {
                        *ret_error = strprintf("unable to parse requirement: labelSelector \"%s\"",
                                               ls);
                        return -EINVAL;
                }
        }
        if (!isempty(fs)) {
                _cleanup_free_ char *copy = strdup(fs);
                char *save = NULL;
                if (!copy)
                        return -ENOMEM;
                for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                        char *op = strstr(t, "!=");
                        bool neg = op != NULL;
                        size_t skip = 2;
                        if (!op) {
                                op = strstr(t, "==");
                                if (!op) {
                                        op = strchr(t, '=');
                                        skip = 1;
                                }
                        }
                        if (!op || f->n_fields >= ELEMENTSOF(f->fields)) {
                                *ret_error = strprintf("invalid field selector: \"%s\"", fs);
                                return -EINVAL;
                        }
                        f->fields[f->n_fields].path = strndup(t, (size_t) (op - t));
                        f->fields[f->n_fields].value = strdup(op + skip);
                        f->fields[f->n_fields].negate = neg;
                        f->n_fields++;
                }
        }
        return 0;
}

bool api__filter_match(const filter *f, json_t *obj) {
        json_t *meta = json_object_get(obj, "metadata");

        if (f->ns && !streq_ptr(json_string_value(json_object_get(meta, "namespace")), f->ns))
                return false;
        if (f->labels) {
                spec_map labels = {};
                const char *k;
                json_t *v;
                bool ok;
                json_object_foreach (json_object_get(meta, "labels"), k, v)
                        (void) spec_map_set(&labels, k, json_string_value(v) ?: "");
                ok = spec_selector_matches(f->labels, &labels);
                spec_map_done(&labels);
                if (!ok)
                        return false;
        }
        for (size_t i = 0; i < f->n_fields; i++) {
                bool eq = streq_ptr(api__json_field(obj, f->fields[i].path), f->fields[i].value);
                if (eq == f->fields[i].negate)
                        return false;
        }
        return true;
}

/* ---- lists --------------------------------------------------------------------------------- */

const spec_meta *api__meta_of(store_kind kind, const void *obj) {
        switch (kind) {
        case STORE_DEPLOYMENT:
                return &((const spec_deployment *) obj)->metadata;
        case STORE_REPLICA_SET:
                return &((const spec_replica_set *) obj)->metadata;
        case STORE_POD:
                return &((const spec_pod *) obj)->metadata;
        default:
                return &((const spec_event *) obj)->metadata;
        }
}

static int cmp_refs(const void *a, const void *b) {
        const list_ref *x = a, *y = b;
        int c = strcmp(strempty(x->ns), strempty(y->ns));
        return c ? c : strcmp(strempty(x->name), strempty(y->name));
}

/* The stored objects of a kind, by namespace and name (new array). */
list_ref *api__sorted_refs(api_server *s, const resource *res, size_t *ret_n) {
        const void *const *items;
        size_t n = store_list(s->store, res->kind, &items);
        list_ref *refs = new0(list_ref, n ?: 1);

        if (!refs)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                const spec_meta *m = api__meta_of(res->kind, items[i]);
                refs[i] = (list_ref){ m->namespace, m->name, items[i] };
        }
        qsort(refs, n, sizeof *refs, cmp_refs);
        *ret_n = n;
        return refs;
}

/*
 * A list's body, item by item: each object is encoded, dumped and freed
 * before the next, so a list of a thousand pods never exists as one tree
 * (building and freeing that tree was most of the time a list took, in
 * malloc's consolidation). The items' texts go between the brackets of
 * the "items" of the list's own encoding: jansson writes every value.
 */
char *api__list_body(api_server *s, const resource *res, const filter *f) {
        size_t n = 0, k = 0;
        _cleanup_free_ list_ref *refs = api__sorted_refs(s, res, &n);
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT((size_t) 1 << 30);
        _cleanup_free_ char *head = NULL;
        json_t *list;
        char rv[32];
        size_t cut;

        if (!refs)
                return NULL;
        snprintf(rv, sizeof rv, "%" PRIu64, store_resource_version(s->store));
        list = json_pack("{s:s, s:s, s:{s:s}, s:[]}", "kind", res->list_kind, "apiVersion",
                         res->api_version, "metadata", "resourceVersion", rv, "items");
        head = list ? json_dumps(list, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(list);
        /* ...,"items":[]} — the items go before its last two characters. */
        if (!head || (cut = strlen(head)) < 3 || !streq(head + cut - 3, "[]}"))
                return NULL;
        if (tend_buf_add(&b, head, cut - 2) < 0)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                json_t *j = api__encode_obj(res->kind, refs[i].obj);
                char *text = j && api__filter_match(f, j) ? json_dumps(j, JSON_COMPACT) : NULL;
                json_decref(j);
                if (text &&
                    (tend_buf_adds(&b, k++ ? "," : "") < 0 || tend_buf_adds(&b, text) < 0)) {
                        free(text);
                        return NULL;
                }
                free(text);
        }
        if (tend_buf_adds(&b, "]}\n") < 0)
                return NULL;
        return tend_buf_take(&b);
}
