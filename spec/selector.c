/* SPDX-License-Identifier: MIT */

/* Label selectors: matching, the overlap test, and kubectl's -l syntax. */

#include <ctype.h>

#include "spec-internal.h"

static bool strv_has(char *const *l, const char *s) {
        return strv_contains(l, s);
}

static bool requirement_matches(const spec_requirement *r, const spec_map *labels) {
        const char *v = spec_map_get(labels, r->key);

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

/* One constraint on one key: matchLabels entries become In with one value. */
typedef struct constraint {
        const char *key;
        int op;
        const char *single;  /* matchLabels value */
        char *const *values; /* matchExpressions values */
} constraint;

static bool constraint_allows(const constraint *c, const char *v) {
        if (c->single)
                return streq(c->single, v);
        return strv_has(c->values, v);
}

static size_t collect(const spec_selector *s, constraint *out, size_t n) {
        for (size_t i = 0; i < s->match_labels.n; i++)
                out[n++] = (constraint){ .key = s->match_labels.items[i].key,
                                         .op = SPEC_OP_IN,
                                         .single = s->match_labels.items[i].value };
        for (size_t i = 0; i < s->n_match_expressions; i++)
                out[n++] = (constraint){ .key = s->match_expressions[i].key,
                                         .op = s->match_expressions[i].op,
                                         .values = s->match_expressions[i].values };
        return n;
}

/* Can a label set satisfy every constraint on key k? Keys are independent,
 * so the selectors overlap iff this holds for every key. */
static bool key_satisfiable(const constraint *c, size_t n, const char *k) {
        bool require = false, forbid = false;
        const constraint *in = NULL;

        for (size_t i = 0; i < n; i++) {
                if (!streq(c[i].key, k))
                        continue;
                switch (c[i].op) {
                case SPEC_OP_IN:
                        require = true;
                        if (!in)
                                in = &c[i];
                        break;
                case SPEC_OP_EXISTS:
                        require = true;
                        break;
                case SPEC_OP_DOES_NOT_EXIST:
                        forbid = true;
                        break;
                default:
                        break;
                }
        }
        if (require && forbid)
                return false;
        if (!require)
                return true; /* leave the key out: NotIn and DoesNotExist hold */
        if (!in)
                return true; /* only Exists/NotIn: infinitely many values remain */

        /* Some value of the first In set must pass every other In and avoid
         * every NotIn. */
        for (size_t vi = 0;; vi++) {
                const char *v = in->single ? (vi == 0 ? in->single : NULL)
                                           : (in->values ? in->values[vi] : NULL);
                bool ok = true;

                if (!v)
                        return false;
                for (size_t i = 0; i < n && ok; i++) {
                        if (!streq(c[i].key, k))
                                continue;
                        if (c[i].op == SPEC_OP_IN)
                                ok = constraint_allows(&c[i], v);
                        else if (c[i].op == SPEC_OP_NOT_IN)
                                ok = !constraint_allows(&c[i], v);
                }
                if (ok)
                        return true;
        }
}

bool spec_selector_overlaps(const spec_selector *a, const spec_selector *b) {
        size_t n = 0, total;
        _cleanup_free_ constraint *c = NULL;

        if (!a || !b)
                return false; /* a nil selector selects nothing */
        total = a->match_labels.n + a->n_match_expressions + b->match_labels.n +
                b->n_match_expressions;
        c = new0(constraint, total);
        if (!c)
                return true; /* cannot tell: err on the side of refusing */
        n = collect(a, c, n);
        n = collect(b, c, n);
        for (size_t i = 0; i < n; i++)
                if (!key_satisfiable(c, n, c[i].key))
                        return false;
        return true;
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

int spec_selector_parse(const char *str, spec_selector *ret) {
        const char *p = str;
        spec_selector s;
        int r;

        spec__init(&spec_type_selector, &s);
        skip_ws(&p);
        while (*p) {
                _cleanup_free_ char *key = NULL;
                _cleanup_strv_free_ char **values = NULL;
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
                        _cleanup_free_ char *v = NULL;
                        op = *p == '!' ? SPEC_OP_NOT_IN : SPEC_OP_IN;
                        p += *p == '!' ? 2 : (p[1] == '=' ? 2 : 1);
                        v = read_token(&p);
                        if (!v || strv_extend(&values, v) < 0)
                                goto oom;
                } else if (startswith(p, "in") || startswith(p, "notin")) {
                        op = startswith(p, "in") ? SPEC_OP_IN : SPEC_OP_NOT_IN;
                        p += op == SPEC_OP_IN ? 2 : 5;
                        skip_ws(&p);
                        if (*p++ != '(')
                                goto invalid;
                        for (;;) {
                                _cleanup_free_ char *v = read_token(&p);
                                if (!v)
                                        goto oom;
                                if (strv_extend(&values, v) < 0)
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
