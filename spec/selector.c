/* SPDX-License-Identifier: MIT */

/* Label selectors: matching, the overlap test, and kubectl's -l syntax. */

#include <ctype.h>

#include "spec-internal.h"

static bool strv_has(char *const *l, const char *s) {
        return strv_contains(l, s);
}

static bool requirement_matches(const spec_requirement *r, const spec_map *labels) {
        const char *v;

        if (!r->key)
                return false; /* not valid: matches nothing (validation refuses it) */
        v = spec_map_get(labels, r->key);

        switch (r->op) {
        case SPEC_OP_IN:
                return v && strv_has(r->values, v);
        case SPEC_OP_NOT_IN:
                return !v || !strv_has(r->values, v);
        case SPEC_OP_EXISTS:
                return v;
        case SPEC_OP_DOES_NOT_EXIST:
                return !v;
        default:
                return false;
        }
}

bool spec_selector_matches(const spec_selector *s, const spec_map *labels) {
        if (!s)
                return false;
        for (size_t i = 0; i < s->match_labels.n; i++)
                if (!streq_ptr(spec_map_get(labels, s->match_labels.items[i].key),
                               s->match_labels.items[i].value))
                        return false;
        for (size_t i = 0; i < s->n_match_expressions; i++)
                if (!requirement_matches(&s->match_expressions[i], labels))
                        return false;
        return true;
}

bool spec_selector_is_empty(const spec_selector *s) {
        return !s || (s->match_labels.n == 0 && s->n_match_expressions == 0);
}

void spec_selector_done(spec_selector *s) {
        spec_done(&spec_type_selector, s);
}

/* ---- overlap ----------------------------------------------------------------------- */

/*
 * Two selectors overlap iff one label set can satisfy both. Keys are
 * independent, so it is decided key by key. Each selector is first brought
 * to a normal form, once: per key (sorted), whether a value is required or
 * forbidden, the values an In still allows (sorted, the intersection of its
 * In sets without its NotIn values) and its NotIn values (sorted). A pair is
 * then a merge of two sorted key lists, and two In sets meet by walking the
 * smaller one and searching the larger: no step is quadratic in a list.
 *
 * Many selectors (a manifest directory, an apply against the store) are
 * also indexed by (key, In value): a selector with an In on key k overlaps
 * only those that have no In on k or share one of its values, and those are
 * found without looking at the others' values.
 */

typedef struct nkey {
        const char *key;
        bool require, forbid, has_in;
        const char **in; /* has_in: what the In sets leave, sorted */
        size_t n_in;
        const char **not_in; /* sorted, unique */
        size_t n_not_in;
} nkey;

typedef struct nsel {
        nkey *keys; /* sorted by key */
        size_t n;
        bool none;     /* selects nothing (nil, or a key no value satisfies) */
        ssize_t pivot; /* the key with the smallest In set, or -1 */
} nsel;

typedef struct constraint {
        const char *key;
        int op;
        const char *const *values; /* n values */
        size_t n;
} constraint;

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(const char *const *) a, *(const char *const *) b);
}

static int cmp_constraint(const void *a, const void *b) {
        return strcmp(((const constraint *) a)->key, ((const constraint *) b)->key);
}

static bool sorted_has(const char *const *l, size_t n, const char *v) {
        return l && n && bsearch(&v, l, n, sizeof *l, cmp_str);
}

/* A sorted, unique copy of n values (pointers borrowed). */
static const char **sorted_set(const char *const *v, size_t n, size_t *ret_n) {
        const char **out = new0(const char *, n + 1);
        size_t k = 0;

        if (!out)
                return NULL;
        if (n)
                memcpy(out, v, n * sizeof *v);
        qsort(out, n, sizeof *out, cmp_str);
        for (size_t i = 0; i < n; i++)
                if (k == 0 || !streq(out[k - 1], out[i]))
                        out[k++] = out[i];
        *ret_n = k;
        return out;
}

static void nsel_done(nsel *s) {
        for (size_t i = 0; i < s->n; i++) {
                free(s->keys[i].in);
                free(s->keys[i].not_in);
        }
        free(s->keys);
        *s = (nsel){};
}

/* The normal form of one key's constraints c[0..n). */
static int normalize_key(const constraint *c, size_t n, nkey *k) {
        size_t n_not = 0;

        *k = (nkey){ .key = c[0].key };
        for (size_t i = 0; i < n; i++)
                if (c[i].op == SPEC_OP_NOT_IN)
                        n_not += c[i].n;
        if (n_not) {
                _cleanup_free_ const char **all = new0(const char *, n_not);
                size_t o = 0;
                if (!all)
                        return -ENOMEM;
                for (size_t i = 0; i < n; i++)
                        if (c[i].op == SPEC_OP_NOT_IN) {
                                memcpy(all + o, c[i].values, c[i].n * sizeof *all);
                                o += c[i].n;
                        }
                k->not_in = sorted_set(all, n_not, &k->n_not_in);
                if (!k->not_in)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                switch (c[i].op) {
                case SPEC_OP_IN: {
                        size_t m;
                        const char **set = sorted_set(c[i].values, c[i].n, &m);
                        if (!set)
                                return -ENOMEM;
                        k->require = true;
                        if (!k->has_in) {
                                /* the first In: drop what NotIn forbids */
                                size_t o = 0;
                                for (size_t j = 0; j < m; j++)
                                        if (!sorted_has(k->not_in, k->n_not_in, set[j]))
                                                set[o++] = set[j];
                                k->in = set;
                                k->n_in = o;
                                k->has_in = true;
                        } else {
                                /* later ones: keep what both allow */
                                size_t o = 0;
                                for (size_t j = 0; j < k->n_in; j++)
                                        if (sorted_has(set, m, k->in[j]))
                                                k->in[o++] = k->in[j];
                                k->n_in = o;
                                free(set);
                        }
                        break;
                }
                case SPEC_OP_EXISTS:
                        k->require = true;
                        break;
                case SPEC_OP_DOES_NOT_EXIST:
                        k->forbid = true;
                        break;
                default:
                        break;
                }
        }
        return 0;
}

static bool key_alone_satisfiable(const nkey *k) {
        return !(k->require && k->forbid) && !(k->has_in && k->n_in == 0);
}

static int normalize(const spec_selector *sel, nsel *ret) {
        _cleanup_free_ constraint *c = NULL;
        size_t n = 0, total;
        nsel s = { .pivot = -1 };

        if (!sel) {
                *ret = (nsel){ .none = true, .pivot = -1 };
                return 0;
        }
        total = sel->match_labels.n + sel->n_match_expressions;
        c = new0(constraint, total + 1);
        if (!c)
                return -ENOMEM;
        for (size_t i = 0; i < sel->match_labels.n; i++)
                c[n++] = (constraint){
                        .key = sel->match_labels.items[i].key,
                        .op = SPEC_OP_IN,
                        .values = (const char *const *) &sel->match_labels.items[i].value,
                        .n = 1
                };
        for (size_t i = 0; i < sel->n_match_expressions; i++)
                if (!sel->match_expressions[i].key || sel->match_expressions[i].op < 0 ||
                    sel->match_expressions[i].op >= _SPEC_OP_MAX) {
                        /* not valid: selects nothing, as spec_selector_matches() says */
                        *ret = (nsel){ .none = true, .pivot = -1 };
                        return 0;
                }
        for (size_t i = 0; i < sel->n_match_expressions; i++)
                c[n++] = (constraint){
                        .key = sel->match_expressions[i].key,
                        .op = sel->match_expressions[i].op,
                        .values = (const char *const *) sel->match_expressions[i].values,
                        .n = strv_length(sel->match_expressions[i].values)
                };
        qsort(c, n, sizeof *c, cmp_constraint);
        s.keys = new0(nkey, n + 1);
        if (!s.keys)
                return -ENOMEM;
        for (size_t i = 0; i < n;) {
                size_t j = i;
                while (j < n && streq(c[j].key, c[i].key))
                        j++;
                nkey *k = &s.keys[s.n++];
                if (normalize_key(c + i, j - i, k) < 0) {
                        nsel_done(&s);
                        return -ENOMEM;
                }
                if (!key_alone_satisfiable(k))
                        s.none = true;
                if (k->has_in && (s.pivot < 0 || k->n_in < s.keys[s.pivot].n_in))
                        s.pivot = (ssize_t) (s.n - 1);
                i = j;
        }
        *ret = s;
        return 0;
}

static const nkey *nsel_key(const nsel *s, const char *key) {
        size_t lo = 0, hi = s->n;
        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                int c = strcmp(key, s->keys[mid].key);
                if (c == 0)
                        return &s->keys[mid];
                if (c < 0)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        return NULL;
}

/* Can one value (or its absence) satisfy both? */
static bool keys_satisfiable(const nkey *a, const nkey *b) {
        if ((a->require || b->require) && (a->forbid || b->forbid))
                return false;
        if (!a->require && !b->require)
                return true; /* leave the key out */
        if (!a->has_in && !b->has_in)
                return true; /* Exists and NotIn leave infinitely many values */
        if (a->has_in && b->has_in) {
                const nkey *small = a->n_in <= b->n_in ? a : b, *large = small == a ? b : a;
                for (size_t i = 0; i < small->n_in; i++)
                        if (sorted_has(large->in, large->n_in, small->in[i]) &&
                            !sorted_has(large->not_in, large->n_not_in, small->in[i]))
                                return true;
                return false;
        }
        const nkey *in = a->has_in ? a : b, *other = in == a ? b : a;
        for (size_t i = 0; i < in->n_in; i++)
                if (!sorted_has(other->not_in, other->n_not_in, in->in[i]))
                        return true;
        return false;
}

static bool nsel_overlap(const nsel *a, const nsel *b) {
        size_t i = 0, j = 0;

        if (a->none || b->none)
                return false;
        while (i < a->n && j < b->n) {
                int c = strcmp(a->keys[i].key, b->keys[j].key);
                if (c < 0)
                        i++;
                else if (c > 0)
                        j++;
                else if (!keys_satisfiable(&a->keys[i++], &b->keys[j++]))
                        return false;
        }
        return true; /* keys of one side alone are satisfiable by themselves */
}

bool spec_selector_overlaps(const spec_selector *a, const spec_selector *b) {
        nsel na, nb;
        bool r;

        if (normalize(a, &na) < 0)
                return true; /* cannot tell: err on the side of refusing */
        if (normalize(b, &nb) < 0) {
                nsel_done(&na);
                return true;
        }
        r = nsel_overlap(&na, &nb);
        nsel_done(&na);
        nsel_done(&nb);
        return r;
}

/* ---- many selectors -------------------------------------------------------------------- */

typedef struct id_list {
        size_t *ids;
        size_t n, alloc;
} id_list;

struct spec_overlaps {
        nsel *sels;
        size_t n, alloc;
        tend_hashmap *index; /* key → tend_hashmap (In value → id_list) */
        unsigned *mark;      /* per id: the query that found it sharing a value */
        size_t mark_alloc;
        unsigned stamp;
};

spec_overlaps *spec_overlaps_new(void) {
        spec_overlaps *o = new0(spec_overlaps, 1);
        if (o && !(o->index = tend_hashmap_new())) {
                free(o);
                return NULL;
        }
        return o;
}

spec_overlaps *spec_overlaps_free(spec_overlaps *o) {
        const char *k;
        void *v;

        if (!o)
                return NULL;
        for (size_t i = 0; tend_hashmap_next(o->index, &i, &k, &v);) {
                tend_hashmap *values = v;
                void *l;
                for (size_t j = 0; tend_hashmap_next(values, &j, &k, &l);) {
                        free(((id_list *) l)->ids);
                        free(l);
                }
                tend_hashmap_free(values);
        }
        tend_hashmap_free(o->index);
        for (size_t i = 0; i < o->n; i++)
                nsel_done(&o->sels[i]);
        free(o->sels);
        free(o->mark);
        free(o);
        return NULL;
}

static int index_value(spec_overlaps *o, const char *key, const char *value, size_t id) {
        tend_hashmap *values = tend_hashmap_get(o->index, key);
        id_list *l;

        if (!values) {
                values = tend_hashmap_new();
                if (!values || tend_hashmap_put(o->index, key, values, NULL) < 0) {
                        tend_hashmap_free(values);
                        return -ENOMEM;
                }
        }
        l = tend_hashmap_get(values, value);
        if (!l) {
                l = new0(id_list, 1);
                if (!l || tend_hashmap_put(values, value, l, NULL) < 0) {
                        free(l);
                        return -ENOMEM;
                }
        }
        if (TEND_GROW(l->ids, l->alloc, l->n + 1) < 0)
                return -ENOMEM;
        l->ids[l->n++] = id;
        return 0;
}

int spec_overlaps_add(spec_overlaps *o, const spec_selector *s, size_t *ret_id) {
        nsel n;
        size_t id = o->n;

        if (TEND_GROW(o->sels, o->alloc, o->n + 1) < 0 ||
            TEND_GROW(o->mark, o->mark_alloc, o->n + 1) < 0)
                return -ENOMEM;
        if (normalize(s, &n) < 0)
                return -ENOMEM;
        for (size_t k = 0; !n.none && k < n.n; k++)
                for (size_t v = 0; n.keys[k].has_in && v < n.keys[k].n_in; v++)
                        if (index_value(o, n.keys[k].key, n.keys[k].in[v], id) < 0) {
                                nsel_done(&n);
                                return -ENOMEM;
                        }
        o->sels[o->n] = n;
        o->mark[o->n] = 0;
        o->n++;
        if (ret_id)
                *ret_id = id;
        return 0;
}

typedef struct report {
        const spec_deployment *const *ds;
        size_t i;
        spec_errors *errs;
        char *(*where)(size_t j, void *userdata);
        void *userdata;
        char *repr; /* of ds[i]'s selector, made at its first overlap */
        int ret;
} report;

static bool report_one(size_t j, void *userdata) {
        report *o = userdata;
        const spec_deployment *a = o->ds[o->i], *b = o->ds[j];
        _cleanup_free_ char *where = NULL;

        if (!streq_ptr(a->metadata.namespace, b->metadata.namespace) ||
            streq_ptr(a->metadata.name, b->metadata.name))
                return true; /* other namespaces never meet; the same name is replaced */
        if (!o->repr && !(o->repr = spec__selector_repr(a->spec.selector))) {
                o->ret = -ENOMEM;
                return false;
        }
        where = o->where ? o->where(j, o->userdata) : NULL;
        o->ret = spec_errors_add(
                o->errs, "spec.selector",
                "Invalid value: %s: overlaps the selector of deployment \"%s\"%s%s%s: "
                "a pod could belong to both; add a label that tells them apart",
                o->repr, b->metadata.name, !isempty(where) ? " (" : "", strempty(where),
                !isempty(where) ? ")" : "");
        /* past the error cap, more pairs would only be counted */
        return o->ret != -ENOMEM && o->errs->n < SPEC_MAX_ERRORS;
}

int spec_overlaps_report(spec_overlaps *o, const spec_deployment *const *ds, size_t i,
                         spec_errors *errs, char *(*where)(size_t j, void *userdata),
                         void *userdata) {
        report r = { .ds = ds, .i = i, .errs = errs, .where = where, .userdata = userdata };

        spec_overlaps_each(o, i, i, report_one, &r);
        free(r.repr);
        return r.ret == -ENOMEM ? -ENOMEM : 0;
}

void spec_overlaps_each(spec_overlaps *o, size_t id, size_t before,
                        bool (*fn)(size_t other, void *userdata), void *userdata) {
        const nsel *s = &o->sels[id];
        const nkey *pivot;
        tend_hashmap *values;

        if (s->none)
                return;
        before = MIN(before, o->n);
        if (++o->stamp == 0) { /* wrapped: start the marks over */
                memset(o->mark, 0, o->n * sizeof *o->mark);
                o->stamp = 1;
        }
        pivot = s->pivot >= 0 ? &s->keys[s->pivot] : NULL;
        values = pivot ? tend_hashmap_get(o->index, pivot->key) : NULL;
        for (size_t v = 0; values && v < pivot->n_in; v++) {
                const id_list *l = tend_hashmap_get(values, pivot->in[v]);
                for (size_t i = 0; l && i < l->n; i++)
                        o->mark[l->ids[i]] = o->stamp;
        }
        for (size_t j = 0; j < before; j++) {
                const nkey *k;
                if (j == id)
                        continue;
                /* An In on the pivot's key that shares none of its values:
                 * disjoint, without looking further. */
                if (pivot && o->mark[j] != o->stamp && (k = nsel_key(&o->sels[j], pivot->key)) &&
                    k->has_in)
                        continue;
                if (nsel_overlap(s, &o->sels[j]) && !fn(j, userdata))
                        return;
        }
}

/* ---- kubectl -l syntax ----------------------------------------------------------------- */

static void skip_ws(const char **p) {
        while (isspace((unsigned char) **p))
                (*p)++;
}

static bool is_token_char(char c) {
        return c && !isspace((unsigned char) c) && !strchr(",=!()", c);
}

static char *read_token(const char **p) {
        const char *s;

        skip_ws(p);
        s = *p;
        while (is_token_char(**p))
                (*p)++;
        return strndup(s, (size_t) (*p - s));
}

static int add_requirement(spec_selector *s, char *key, int op, char **values) {
        spec_requirement *n = realloc(s->match_expressions,
                                      sizeof(spec_requirement) * (s->n_match_expressions + 1));
        if (!n)
                return -ENOMEM;
        s->match_expressions = n;
        n[s->n_match_expressions++] = (spec_requirement){ .key = key, .op = op, .values = values };
        return 0;
}

/* Appends v (taken) to the NULL-terminated list l of n entries, growing it
 * geometrically: a list of many values is not quadratic to read. */
static int values_push(char ***l, size_t *n, size_t *alloc, char *v) {
        if (!v || TEND_GROW(*l, *alloc, *n + 2) < 0) {
                free(v);
                return -ENOMEM;
        }
        (*l)[(*n)++] = v;
        (*l)[*n] = NULL;
        return 0;
}

int spec_selector_parse(const char *str, spec_selector *ret) {
        const char *p = str;
        spec_selector s;
        int r;

        spec__init(&spec_type_selector, &s);
        skip_ws(&p);
        while (*p) {
                _cleanup_free_ char *key = NULL;
                _cleanup_strv_free_ char **values = NULL;
                size_t n_values = 0, alloc = 0;
                bool negate = false;
                int op;

                skip_ws(&p);
                if (*p == '!') {
                        negate = true;
                        p++;
                }
                key = read_token(&p);
                if (!key)
                        goto oom;
                if (isempty(key))
                        goto invalid;
                skip_ws(&p);
                if (negate) {
                        op = SPEC_OP_DOES_NOT_EXIST;
                } else if (*p == '=' || (*p == '!' && p[1] == '=')) {
                        op = *p == '!' ? SPEC_OP_NOT_IN : SPEC_OP_IN;
                        p += *p == '!' ? 2 : (p[1] == '=' ? 2 : 1);
                        if (values_push(&values, &n_values, &alloc, read_token(&p)) < 0)
                                goto oom;
                } else if (startswith(p, "in") || startswith(p, "notin")) {
                        op = startswith(p, "in") ? SPEC_OP_IN : SPEC_OP_NOT_IN;
                        p += op == SPEC_OP_IN ? 2 : 5;
                        skip_ws(&p);
                        if (*p++ != '(')
                                goto invalid;
                        for (;;) {
                                if (values_push(&values, &n_values, &alloc, read_token(&p)) < 0)
                                        goto oom;
                                skip_ws(&p);
                                if (*p == ',') {
                                        p++;
                                        continue;
                                }
                                if (*p++ != ')')
                                        goto invalid;
                                break;
                        }
                } else
                        op = SPEC_OP_EXISTS;

                r = add_requirement(&s, key, op, values);
                if (r < 0)
                        goto oom;
                key = NULL;
                values = NULL;
                skip_ws(&p);
                if (*p == ',')
                        p++;
                else if (*p)
                        goto invalid;
        }
        *ret = s;
        return 0;

invalid:
        spec_selector_done(&s);
        return -EINVAL;
oom:
        spec_selector_done(&s);
        return -ENOMEM;
}
