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

/*
 * The fields a field selector may name, per resource, as kube-apiserver
 * has them (each type's GetAttrs / field label conversion), and where each
 * is in the object. A field the object leaves out reads as its default.
 */
static const struct field_label {
        const char *resource, *label, *path, *absent; /* resource: as qualified ("pods") */
} field_labels[] = {
        { "*", "metadata.name", "metadata.name", "" },
        { "*", "metadata.namespace", "metadata.namespace", "" },
        { "pods", "spec.nodeName", "spec.nodeName", "" },
        { "pods", "spec.host", "spec.nodeName", "" },
        { "pods", "spec.restartPolicy", "spec.restartPolicy", "Always" },
        { "pods", "spec.schedulerName", "spec.schedulerName", "default-scheduler" },
        { "pods", "spec.serviceAccountName", "spec.serviceAccountName", "" },
        { "pods", "spec.hostNetwork", "spec.hostNetwork", "false" },
        { "pods", "status.phase", "status.phase", "" },
        { "pods", "status.podIP", "status.podIP", "" },
        { "pods", "status.podIPs", "status.podIP", "" },
        { "pods", "status.nominatedNodeName", "status.nominatedNodeName", "" },
        { "events", "involvedObject.kind", "involvedObject.kind", "" },
        { "events", "involvedObject.namespace", "involvedObject.namespace", "" },
        { "events", "involvedObject.name", "involvedObject.name", "" },
        { "events", "involvedObject.uid", "involvedObject.uid", "" },
        { "events", "involvedObject.apiVersion", "involvedObject.apiVersion", "" },
        { "events", "involvedObject.resourceVersion", "involvedObject.resourceVersion", "" },
        { "events", "involvedObject.fieldPath", "involvedObject.fieldPath", "" },
        { "events", "reason", "reason", "" },
        { "events", "reportingComponent", "reportingComponent", "" },
        { "events", "source", "source.component", "" },
        { "events", "type", "type", "" },
        /* events.k8s.io/v1's names for the same (its objects are converted first) */
        { "events.events.k8s.io", "regarding.kind", "regarding.kind", "" },
        { "events.events.k8s.io", "regarding.namespace", "regarding.namespace", "" },
        { "events.events.k8s.io", "regarding.name", "regarding.name", "" },
        { "events.events.k8s.io", "regarding.uid", "regarding.uid", "" },
        { "events.events.k8s.io", "regarding.apiVersion", "regarding.apiVersion", "" },
        { "events.events.k8s.io", "regarding.resourceVersion", "regarding.resourceVersion", "" },
        { "events.events.k8s.io", "regarding.fieldPath", "regarding.fieldPath", "" },
        { "events.events.k8s.io", "reason", "reason", "" },
        { "events.events.k8s.io", "reportingController", "reportingController", "" },
        { "events.events.k8s.io", "source", "deprecatedSource.component", "" },
        { "events.events.k8s.io", "type", "type", "" },
        { "nodes", "spec.unschedulable", "spec.unschedulable", "false" },
};

static const struct field_label *field_label(const char *of, const char *label) {
        for (size_t i = 0; i < ELEMENTSOF(field_labels); i++)
                if ((streq(field_labels[i].resource, "*") || streq(field_labels[i].resource, of)) &&
                    streq(field_labels[i].label, label))
                        return &field_labels[i];
        return NULL;
}

/* labelSelector and fieldSelector from the query; *ret_error on nonsense,
 * and on a field the resource cannot be selected by (as kube-apiserver:
 * "field label not supported"). */
int api__filter_parse(req *r, const char *ns, const char *of, filter *f, char **ret_error) {
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
                        const struct field_label *fl;
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
                        *op = 0;
                        fl = field_label(of, t);
                        if (!fl) {
                                _cleanup_free_ char *clean = utf8_escape_invalid(t);
                                /* kube-apiserver's two wordings: the core
                                 * kinds', and apps/v1's (no conversion of
                                 * their own) */
                                *ret_error =
                                        endswith(of, ".apps")
                                                ? strprintf("\"%s\" is not a known field selector: "
                                                            "only \"metadata.name\", "
                                                            "\"metadata.namespace\"",
                                                            strna(clean))
                                                : strprintf("field label not supported: %s",
                                                            strna(clean));
                                return -EINVAL;
                        }
                        f->fields[f->n_fields].path = strdup(fl->path);
                        f->fields[f->n_fields].absent = fl->absent;
                        f->fields[f->n_fields].value = strdup(op + skip);
                        f->fields[f->n_fields].negate = neg;
                        f->n_fields++;
                }
        }
        return 0;
}

/* A field's value as a field selector compares it: text, a number or a
 * boolean written out; absent, its default. */
static bool field_equals(json_t *obj, const char *path, const char *absent, const char *want) {
        _cleanup_free_ char *copy = strdup(path);
        char *save = NULL, num[32];
        json_t *v = obj;

        if (!copy)
                return false;
        for (char *t = strtok_r(copy, ".", &save); t && v; t = strtok_r(NULL, ".", &save))
                v = json_object_get(v, t);
        if (json_is_string(v))
                return streq(json_string_value(v), want);
        if (json_is_integer(v)) {
                snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
                return streq(num, want);
        }
        if (json_is_boolean(v))
                return streq(json_is_true(v) ? "true" : "false", want);
        return streq(absent, want);
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
                bool eq = field_equals(obj, f->fields[i].path, f->fields[i].absent,
                                       f->fields[i].value);
                if (eq == f->fields[i].negate)
                        return false;
        }
        return true;
}

/* ---- lists --------------------------------------------------------------------------------- */

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
                const spec_meta *m = spec_object_meta(items[i]);
                refs[i] = (list_ref){ m->namespace, m->name, items[i] };
        }
        qsort(refs, n, sizeof *refs, cmp_refs);
        *ret_n = n;
        return refs;
}

/* ---- pages: limit and continue ----------------------------------------------------------- */

/*
 * A continue token is what kube-apiserver's is: base64 of
 * {"v":"meta.k8s.io/v1","rv":N,"start":"NS/NAME\u0000"}, where rv is the
 * first page's resourceVersion and start is past the last key given.
 *
 * Later pages are read from the store as it is then, not as it was at rv
 * (tendd keeps no snapshots): an object that exists throughout the paging
 * comes exactly once, in key order, and one created or deleted meanwhile
 * may or may not. Every page says the first page's resourceVersion, so
 * that a watch from it replays whatever changed while the client paged.
 */

void api__page_done(page *p) {
        free(p->after_ns);
        free(p->after_name);
        *p = (page){};
}

int api__page_parse(req *r, page *p, char **ret_error) {
        const char *limit = api__arg(r, "limit"), *cont = api__arg(r, "continue"),
                   *rv = api__arg(r, "resourceVersion");
        _cleanup_(json_decrefp) json_t *j = NULL;
        _cleanup_free_ void *raw = NULL;
        const char *start, *slash;
        size_t n = 0, len;
        json_t *jrv;

        const char *match = api__arg(r, "resourceVersionMatch");
        uint64_t want = 0;

        *p = (page){ .rv = store_resource_version(r->s->store) };
        /* checked before routing: a whole number; 0 or less is no limit */
        if (limit && safe_atoi64(limit, &p->limit) >= 0 && p->limit < 0)
                p->limit = 0;
        /* A list is served at the newest version: that is what "not older
         * than" asks (and "0", any), and "exact" only when it is the newest. */
        if (match && isempty(rv)) {
                *ret_error = strdup("resourceVersionMatch is forbidden unless resourceVersion is "
                                    "provided");
                return -EINVAL;
        }
        if (!isempty(rv) && safe_atou64(rv, &want) >= 0 && want > p->rv) {
                *ret_error = strprintf("Too large resource version: %" PRIu64 ", current: %" PRIu64,
                                       want, p->rv);
                p->too_large = want;
                return -EAGAIN;
        }
        if (streq_ptr(match, "Exact") && want != p->rv) {
                *ret_error = strprintf("too old resource version: %" PRIu64 " (%" PRIu64 "): "
                                       "tendd serves lists at the newest version only",
                                       want, p->rv);
                return -ERANGE;
        }
        if (isempty(cont))
                return 0;
        if (!isempty(rv)) {
                *ret_error = strdup("specifying resource version is not allowed when using "
                                    "continue");
                return -EINVAL;
        }
        /* base64url without padding, as Go's RawURLEncoding */
        size_t clen = strlen(cont);
        _cleanup_free_ char *std = clen < 4096 ? malloc(clen + 4) : NULL;
        if (std) {
                for (size_t i = 0; i <= clen; i++)
                        std[i] = cont[i] == '-' ? '+' : cont[i] == '_' ? '/' : cont[i];
                while (clen % 4)
                        std[clen++] = '=';
                std[clen] = 0;
        }
        if (!std || tend_base64_decode(std, clen, &raw, &n) < 0 ||
            !(j = json_loadb(raw, n, JSON_ALLOW_NUL, NULL)) ||
            !streq_ptr(json_string_value(json_object_get(j, "v")), "meta.k8s.io/v1") ||
            !json_is_integer(jrv = json_object_get(j, "rv")) || json_integer_value(jrv) < 0 ||
            !(start = json_string_value(json_object_get(j, "start"))) ||
            (len = json_string_length(json_object_get(j, "start"))) < 2 || start[len - 1] != 0 ||
            !(slash = memchr(start, '/', len))) {
                *ret_error = strdup("continue key is not valid: pass the continue of the list "
                                    "before, as it came");
                return -EINVAL;
        }
        p->rv = (uint64_t) json_integer_value(jrv);
        p->after_ns = strndup(start, (size_t) (slash - start));
        p->after_name = strndup(slash + 1, len - 1 - (size_t) (slash - start) - 1);
        return p->after_ns && p->after_name ? 0 : -ENOMEM;
}

static char *continue_token(uint64_t rv, const list_ref *last) {
        _cleanup_free_ char *key = strprintf("%s/%s", strempty(last->ns), strempty(last->name));
        _cleanup_(json_decrefp)
                json_t *j = key ? json_pack("{s:s, s:I, s:s%}", "v", "meta.k8s.io/v1", "rv",
                                            (json_int_t) rv, "start", key, strlen(key) + 1)
                                : NULL;
        _cleanup_free_ char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        char *b = text ? tend_base64_encode(text, strlen(text)) : NULL;

        /* base64url without padding, as Go's RawURLEncoding (kube-apiserver's) */
        for (char *c = b; c && *c; c++)
                if (*c == '+')
                        *c = '-';
                else if (*c == '/')
                        *c = '_';
                else if (*c == '=')
                        *c = 0;
        return b;
}

int api__list_walk(api_server *s, const resource *res, const filter *f, const page *pg,
                   int (*each)(void *u, const void *obj, json_t *j), void *u, json_t *meta) {
        size_t n = 0, i = 0, k = 0;
        _cleanup_free_ list_ref *refs = api__sorted_refs(s, res, &n);
        const list_ref *last = NULL;
        char rv[32];
        int r;

        if (!refs)
                return -ENOMEM;
        if (pg->after_ns) {
                list_ref after = { pg->after_ns, pg->after_name, NULL };
                while (i < n && cmp_refs(&refs[i], &after) <= 0)
                        i++;
        }
        for (; i < n; i++) {
                json_t *j;
                if (f->ns && !streq_ptr(refs[i].ns, f->ns))
                        continue;
                j = api__encode(res, refs[i].obj);
                if (!j)
                        return -ENOMEM;
                if (!api__filter_match(f, j)) {
                        json_decref(j);
                        continue;
                }
                if (pg->limit > 0 && k == (size_t) pg->limit) {
                        /* one more: the page ends before it */
                        json_decref(j);
                        break;
                }
                r = each(u, refs[i].obj, j);
                json_decref(j);
                if (r < 0)
                        return r;
                last = &refs[i];
                k++;
        }
        snprintf(rv, sizeof rv, "%" PRIu64, pg->rv);
        if (json_object_set_new(meta, "resourceVersion", json_string(rv)) < 0)
                return -ENOMEM;
        if (i < n && last) {
                _cleanup_free_ char *token = continue_token(pg->rv, last);
                if (!token || json_object_set_new(meta, "continue", json_string(token)) < 0)
                        return -ENOMEM;
                /* as kube-apiserver: a count only where no selector makes it a guess */
                if (!f->labels && f->n_fields == 0) {
                        size_t left = 0;
                        for (; i < n; i++)
                                left += !f->ns || streq_ptr(refs[i].ns, f->ns);
                        if (json_object_set_new(meta, "remainingItemCount",
                                                json_integer((json_int_t) left)) < 0)
                                return -ENOMEM;
                }
        }
        return 0;
}

typedef struct list_text {
        tend_buf *b;
        size_t k;
} list_text;

static int add_item_text(void *u, const void *obj, json_t *j) {
        list_text *t = u;
        _cleanup_free_ char *text = json_dumps(j, JSON_COMPACT);

        (void) obj;
        if (!text || tend_buf_adds(t->b, t->k++ ? "," : "") < 0 || tend_buf_adds(t->b, text) < 0)
                return -ENOMEM;
        return 0;
}

/*
 * A list's body, item by item: each object is encoded, dumped and freed
 * before the next, so a list of a thousand pods never exists as one tree
 * (building and freeing that tree was most of the time a list took, in
 * malloc's consolidation). The items' texts go between the brackets of
 * the "items" of the list's own encoding: jansson writes every value.
 */
char *api__list_body(api_server *s, const resource *res, const filter *f, const page *pg) {
        _cleanup_buf_ tend_buf items = TEND_BUF_INIT((size_t) 1 << 30),
                               b = TEND_BUF_INIT((size_t) 1 << 30);
        _cleanup_free_ char *head = NULL;
        _cleanup_(json_decrefp) json_t *meta = json_object();
        list_text t = { &items, 0 };
        json_t *list;
        size_t cut;

        if (!meta || api__list_walk(s, res, f, pg, add_item_text, &t, meta) < 0)
                return NULL;
        list = json_pack("{s:s, s:s, s:O, s:[]}", "kind", res->list_kind, "apiVersion",
                         res->api_version, "metadata", meta, "items");
        head = list ? json_dumps(list, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(list);
        /* ...,"items":[]} — the items go before its last two characters. */
        if (!head || (cut = strlen(head)) < 3 || !streq(head + cut - 3, "[]}"))
                return NULL;
        if (tend_buf_add(&b, head, cut - 2) < 0 ||
            tend_buf_add(&b, items.data ?: "", items.len) < 0 || tend_buf_adds(&b, "]}\n") < 0)
                return NULL;
        return tend_buf_take(&b);
}
