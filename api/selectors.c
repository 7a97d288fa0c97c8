/* SPDX-License-Identifier: MIT */

/* The HTTP API (tend/api.h): label and field selectors. */

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
