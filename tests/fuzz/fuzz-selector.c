/* SPDX-License-Identifier: MIT */

/*
 * fuzz-selector: label selectors, as `tend get -l` parses them and as the
 * deployment controller and manifest checks compare them.
 *
 * Input: up to three lines, selector A, selector B, a label set
 * ("k=v,k2=v2"). A selector line that starts with '{' is a LabelSelector
 * in JSON or YAML flow style ({matchLabels: {a: b}, matchExpressions:
 * [...]}), through spec_parse() and the strict decoder; any other line is
 * kubectl's -l syntax (spec_selector_parse()). A line that does not parse
 * stands for no selector (NULL, which selects nothing).
 *
 * Properties (a violation aborts):
 *  - overlaps(a, b) == overlaps(b, a);
 *  - a label set that both match means overlaps(a, b), for the input's
 *    label set and for a witness built here independently of selector.c:
 *    per key, some value among those the two selectors name, one they do
 *    not name, or none, that every requirement on the key accepts; so
 *    overlaps(a, b) must also be exactly "the witness matches both";
 *  - decode(encode(s)) == s, for a selector of UTF-8 strings;
 *  - every decode error is UTF-8;
 *  - and, from the sanitizers, no leak, no memory error, no UB.
 */

#include "fuzz.h"
#include "tend/spec.h"

static void selector_freep(spec_selector **s) {
        *s = spec_free(&spec_type_selector, *s);
}

/* What the decoder accepts but validation refuses before any selector
 * reaches matches()/overlaps() (the manifest and the API validate first):
 * a requirement with no key or no operator. */
static bool selector_usable(const spec_selector *s) {
        for (size_t i = 0; i < s->n_match_expressions; i++)
                if (!s->match_expressions[i].key || s->match_expressions[i].op < 0 ||
                    s->match_expressions[i].op >= _SPEC_OP_MAX)
                        return false;
        return true;
}

static spec_selector *selector_decode(const char *line) {
        spec_selector *s = NULL;
        spec_errors errs = {};
        spec_docs docs = {};

        if (spec_parse("selector", line, strlen(line), &errs, &docs) >= 0 && docs.n == 1)
                (void) spec_decode_new(&spec_type_selector, docs.items[0].root, &errs,
                                       (void **) &s);
        for (size_t i = 0; i < errs.n; i++) {
                _cleanup_free_ char *m = spec_error_format(&errs.items[i]);
                fuzz_check(m && fuzz_utf8_valid(m), "error is not UTF-8: %s", strna(m));
        }
        spec_errors_done(&errs);
        spec_docs_done(&docs);
        if (s && !selector_usable(s))
                selector_freep(&s);
        return s;
}

static spec_selector *selector_from_line(const char *line) {
        spec_selector *s;

        if (line[0] == '{')
                return selector_decode(line);
        s = spec_new(&spec_type_selector);
        fuzz_check(s, "out of memory");
        if (spec_selector_parse(line, s) < 0)
                selector_freep(&s);
        return s;
}

/* JSON holds UTF-8 only, and the encoder replaces what is not (a byte of
 * a -l value, which never matches a label anyway); so the round trip can
 * only be asked of a selector of UTF-8 strings. */
static bool selector_is_utf8(const spec_selector *s) {
        for (size_t i = 0; i < s->match_labels.n; i++)
                if (!fuzz_utf8_valid(s->match_labels.items[i].key) ||
                    !fuzz_utf8_valid(s->match_labels.items[i].value))
                        return false;
        for (size_t i = 0; i < s->n_match_expressions; i++) {
                if (!fuzz_utf8_valid(s->match_expressions[i].key))
                        return false;
                for (char **v = s->match_expressions[i].values; v && *v; v++)
                        if (!fuzz_utf8_valid(*v))
                                return false;
        }
        return true;
}

static void check_round_trip(const spec_selector *s) {
        _cleanup_(json_decrefp) json_t *j = NULL;
        _cleanup_(selector_freep) spec_selector *back = NULL;
        spec_errors errs = {};

        if (!selector_is_utf8(s))
                return;
        j = spec_encode(&spec_type_selector, s);
        fuzz_check(j, "spec_encode() returned NULL");
        fuzz_check(spec_decode_new(&spec_type_selector, j, &errs, (void **) &back) == 0 &&
                           spec_equal(&spec_type_selector, s, back),
                   "decode(encode(s)) != s");
        spec_errors_done(&errs);
}

/* "k=v,k2,k3=v3": a label set (a key without '=' has the value ""). */
static void labels_from_line(const char *line, spec_map *ret) {
        while (*line) {
                size_t n = strcspn(line, ",");
                _cleanup_free_ char *item = strndup(line, n);
                char *eq;

                fuzz_check(item, "out of memory");
                eq = strchr(item, '=');
                if (eq)
                        *eq = 0;
                fuzz_check(spec_map_set(ret, item, eq ? eq + 1 : "") == 0, "out of memory");
                line += n + (line[n] == ',');
        }
}

/* ---- the witness ----------------------------------------------------------------------- */

/* One requirement on one key; a matchLabels entry is In with one value. */
typedef struct req {
        const char *key;
        int op;
        const char *single;
        char *const *values;
} req;

static size_t reqs_collect(const spec_selector *s, req *out, size_t n) {
        for (size_t i = 0; s && i < s->match_labels.n; i++)
                out[n++] = (req){ .key = s->match_labels.items[i].key,
                                  .op = SPEC_OP_IN,
                                  .single = s->match_labels.items[i].value };
        for (size_t i = 0; s && i < s->n_match_expressions; i++)
                out[n++] = (req){ .key = s->match_expressions[i].key,
                                  .op = s->match_expressions[i].op,
                                  .values = s->match_expressions[i].values };
        return n;
}

static bool req_names(const req *r, const char *v) {
        return r->single ? streq(r->single, v) : strv_contains(r->values, v);
}

/* v == NULL: the key is absent. Kubernetes' meaning of each operator. */
static bool req_holds(const req *r, const char *v) {
        switch (r->op) {
        case SPEC_OP_IN:
                return v && req_names(r, v);
        case SPEC_OP_NOT_IN:
                return !v || !req_names(r, v);
        case SPEC_OP_EXISTS:
                return v;
        case SPEC_OP_DOES_NOT_EXIST:
                return !v;
        default:
                abort(); /* selector_usable() let it through */
        }
}

static bool key_accepts(const req *r, size_t n, const char *key, const char *v) {
        for (size_t i = 0; i < n; i++)
                if (streq(r[i].key, key) && !req_holds(&r[i], v))
                        return false;
        return true;
}

/* A value no requirement on key names: "~", "~~", ... (of n+1 distinct
 * strings, one is not among n named values). New string. */
static char *unnamed_value(const req *r, size_t n, const char *key) {
        for (size_t len = 1;; len++) {
                char *v = malloc(len + 1);
                bool named = false;

                fuzz_check(v, "out of memory");
                memset(v, '~', len);
                v[len] = 0;
                for (size_t i = 0; i < n && !named; i++)
                        named = streq(r[i].key, key) && (r[i].single || r[i].values) &&
                                req_names(&r[i], v);
                if (!named)
                        return v;
                free(v);
        }
}

/* Requirements only tell values apart by whether they name them, so if any
 * value satisfies every requirement on a key, one of: no value, a value
 * they name, a value they do not name, does. */
static void witness_key(const req *r, size_t n, const char *key, spec_map *w) {
        _cleanup_free_ char *unnamed = NULL;

        if (spec_map_get(w, key) || key_accepts(r, n, key, NULL))
                return;
        for (size_t i = 0; i < n; i++) {
                if (!streq(r[i].key, key))
                        continue;
                if (r[i].single && key_accepts(r, n, key, r[i].single)) {
                        fuzz_check(spec_map_set(w, key, r[i].single) == 0, "out of memory");
                        return;
                }
                for (char *const *v = r[i].single ? NULL : r[i].values; v && *v; v++)
                        if (key_accepts(r, n, key, *v)) {
                                fuzz_check(spec_map_set(w, key, *v) == 0, "out of memory");
                                return;
                        }
        }
        unnamed = unnamed_value(r, n, key);
        if (key_accepts(r, n, key, unnamed))
                fuzz_check(spec_map_set(w, key, unnamed) == 0, "out of memory");
        /* else nothing satisfies the key: the witness matches neither. */
}

static void witness_build(const spec_selector *a, const spec_selector *b, spec_map *ret) {
        size_t total = 0, n = 0;
        _cleanup_free_ req *r = NULL;

        if (a)
                total += a->match_labels.n + a->n_match_expressions;
        if (b)
                total += b->match_labels.n + b->n_match_expressions;
        r = new0(req, total);
        fuzz_check(r, "out of memory");
        n = reqs_collect(a, r, n);
        n = reqs_collect(b, r, n);
        for (size_t i = 0; i < n; i++)
                witness_key(r, n, r[i].key, ret);
}

/* ---- properties ------------------------------------------------------------------------ */

static void check_pair(const spec_selector *a, const spec_selector *b, const spec_map *labels) {
        bool ab = spec_selector_overlaps(a, b), ba = spec_selector_overlaps(b, a), both;
        spec_map w = {};

        fuzz_check(ab == ba, "overlaps(a, b) = %d but overlaps(b, a) = %d", ab, ba);
        fuzz_check(!(spec_selector_matches(a, labels) && spec_selector_matches(b, labels)) || ab,
                   "the input's labels match both, yet overlaps(a, b) is false");

        witness_build(a, b, &w);
        both = spec_selector_matches(a, &w) && spec_selector_matches(b, &w);
        if (both != ab)
                for (size_t i = 0; i < w.n; i++)
                        fprintf(stderr, "fuzz: witness %s=%s\n", w.items[i].key, w.items[i].value);
        fuzz_check(both == ab, "overlaps(a, b) = %d, but the witness matches %s", ab,
                   both ? "both" : "not both");
        spec_map_done(&w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = fuzz_strndup(data, size);
        _cleanup_(selector_freep) spec_selector *a = NULL, *b = NULL;
        char *line[3] = { text, NULL, NULL };
        spec_map labels = {};

        /* NUL ends the input (a C string is what the parsers take). */
        for (size_t i = 1; i < ELEMENTSOF(line); i++) {
                line[i] = line[i - 1] ? strchr(line[i - 1], '\n') : NULL;
                if (line[i])
                        *line[i]++ = 0;
        }
        a = selector_from_line(line[0]);
        b = selector_from_line(strempty(line[1]));
        labels_from_line(strempty(line[2]), &labels);

        if (a)
                check_round_trip(a);
        if (b)
                check_round_trip(b);
        check_pair(a, b, &labels);
        check_pair(a, a, &labels);
        spec_map_done(&labels);
        return 0;
}
