/* SPDX-License-Identifier: MIT */

/*
 * Text → JSON trees. YAML goes through libyaml's event parser, JSON through
 * jansson; both end as jansson trees, so everything after this file sees one
 * representation.
 *
 * Hostile input is bounded here, before anything else looks at it: size,
 * nesting depth, entries per collection and values per document are capped,
 * and YAML aliases are refused outright (the "billion laughs" expansion needs
 * them, and Kubernetes manifests have no use for them).
 */

#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <yaml.h>

#include "spec-internal.h"

void spec_docs_done(spec_docs *d) {
        for (size_t i = 0; i < d->n; i++) {
                json_decref(d->items[i].root);
                tend_hashmap_free(d->items[i].positions);
        }
        free(d->items);
        *d = (spec_docs){};
}

static int docs_push(spec_docs *d, json_t *root, unsigned line, tend_hashmap *positions) {
        spec_doc *n = realloc(d->items, sizeof(spec_doc) * (d->n + 1));
        if (!n) {
                tend_hashmap_free(positions);
                json_decref(root);
                return -ENOMEM;
        }
        d->items = n;
        d->items[d->n] = (spec_doc){
                .root = root, .line = line, .index = (unsigned) d->n + 1, .positions = positions
        };
        d->n++;
        return 0;
}

/* Positions are kept packed in the map's values. */
#define POS_PACK(line, col) ((void *) (((uintptr_t) (line) << 20) | ((uintptr_t) (col) &0xfffff)))
#define POS_LINE(v) ((unsigned) ((uintptr_t) (v) >> 20))
#define POS_COL(v) ((unsigned) ((uintptr_t) (v) &0xfffff))

/* A List's positions split by item, in one pass: "items[i].rest" goes to
 * maps[i] as "rest", "items[i]" itself to lines[i]. NULLs where there are
 * none (or no memory: positions are a help, not a need). */
static void positions_split(tend_hashmap *pos, size_t n, tend_hashmap **maps, unsigned *lines) {
        const char *k;
        void *v;

        for (size_t i = 0; pos && tend_hashmap_next(pos, &i, &k, &v);) {
                const char *p = startswith(k, "items[");
                char *end;
                unsigned long idx;

                if (!p || !isdigit((unsigned char) *p))
                        continue;
                idx = strtoul(p, &end, 10);
                if (*end != ']' || idx >= n)
                        continue;
                if (end[1] == 0) {
                        lines[idx] = POS_LINE(v);
                        continue;
                }
                if (end[1] != '.')
                        continue;
                if (!maps[idx] && !(maps[idx] = tend_hashmap_new()))
                        continue;
                (void) tend_hashmap_put(maps[idx], end + 2, v, NULL);
        }
}

#define LIST_TOO_LONG "more than %d documents (the items of a List count as documents)"

/* A document that is a List ({"kind":"List","items":[...]}, what
 * `kubectl get -o yaml` prints) stands for its items. */
static int docs_push_expanded(spec_docs *d, json_t *root, unsigned line, tend_hashmap *positions) {
        json_t *items = json_object_get(root, "items");
        const char *kind = json_string_value(json_object_get(root, "kind"));
        size_t i;
        json_t *e;

        if (!kind || !streq(kind, "List") || !json_is_array(items))
                return docs_push(d, root, line, positions);
        size_t n = json_array_size(items);
        if (d->n + n > SPEC_MAX_DOCUMENTS) {
                /* the items of a List are documents, and count as such */
                tend_hashmap_free(positions);
                json_decref(root);
                return -E2BIG;
        }
        _cleanup_free_ tend_hashmap **maps = new0(tend_hashmap *, n ?: 1);
        _cleanup_free_ unsigned *lines = new0(unsigned, n ?: 1);
        int r = 0;
        if (maps && lines)
                positions_split(positions, n, maps, lines);
        tend_hashmap_free(positions);
        json_array_foreach (items, i, e) {
                tend_hashmap *pm = maps ? TAKE_PTR(maps[i]) : NULL;
                r = docs_push(d, json_incref(e), lines && lines[i] ? lines[i] : line, pm);
                if (r < 0)
                        break;
        }
        for (size_t k = 0; maps && k < n; k++)
                tend_hashmap_free(maps[k]);
        json_decref(root);
        return r;
}

bool spec_doc_position(const spec_doc *doc, const char *field, unsigned *ret_line,
                       unsigned *ret_column) {
        char path[1024];
        size_t n = 0;

        if (!doc->positions || !field)
                return false;
        /* "[key]" of a map as ".key"; "[0]" of a list stays. */
        for (const char *f = field; *f && n < sizeof path - 2; f++) {
                const char *end = *f == '[' ? strchr(f, ']') : NULL;
                if (end && strspn(f + 1, "0123456789") != (size_t) (end - f - 1)) {
                        size_t k = MIN((size_t) (end - f - 1), sizeof path - 2 - n);
                        path[n++] = '.';
                        memcpy(path + n, f + 1, k);
                        n += k;
                        f = end;
                        continue;
                }
                path[n++] = *f;
        }
        path[n] = 0;
        /* The field itself, or the nearest enclosing one written. */
        for (;;) {
                void *v = tend_hashmap_get(doc->positions, path);
                char *cut;
                if (v) {
                        *ret_line = POS_LINE(v);
                        *ret_column = POS_COL(v);
                        return true;
                }
                cut = strrchr(path, '.');
                char *br = strrchr(path, '[');
                if (br && (!cut || br > cut))
                        cut = br;
                if (!cut)
                        return false;
                *cut = 0;
        }
}

/* ---- YAML 1.2 core schema ---------------------------------------------------------- */

static bool match_all(const char *s, size_t n, int (*pred)(int)) {
        if (n == 0)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!pred((unsigned char) s[i]))
                        return false;
        return true;
}

static int is_octal(int c) {
        return c >= '0' && c <= '7';
}

static bool in_list(const char *s, size_t n, const char *const *list) {
        for (; *list; list++)
                if (strlen(*list) == n && memcmp(*list, s, n) == 0)
                        return true;
        return false;
}

/* [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )? */
static bool is_float(const char *s, size_t n) {
        size_t i = 0, d1 = 0, d2 = 0;

        if (i < n && (s[i] == '-' || s[i] == '+'))
                i++;
        for (; i < n && isdigit((unsigned char) s[i]); i++)
                d1++;
        if (i < n && s[i] == '.') {
                i++;
                for (; i < n && isdigit((unsigned char) s[i]); i++)
                        d2++;
        }
        if (d1 + d2 == 0)
                return false;
        if (i < n && (s[i] == 'e' || s[i] == 'E')) {
                size_t d3 = 0;
                i++;
                if (i < n && (s[i] == '-' || s[i] == '+'))
                        i++;
                for (; i < n && isdigit((unsigned char) s[i]); i++)
                        d3++;
                if (d3 == 0)
                        return false;
        }
        return i == n;
}

json_t *spec__yaml_resolve_plain(const char *s, size_t n, int *ret_err) {
        static const char *const nulls[] = { "", "~", "null", "Null", "NULL", NULL };
        static const char *const trues[] = { "true", "True", "TRUE", NULL };
        static const char *const falses[] = { "false", "False", "FALSE", NULL };
        static const char *const infs[] = {
                ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", NULL
        };
        static const char *const ninfs[] = { "-.inf", "-.Inf", "-.INF", NULL };
        static const char *const nans[] = { ".nan", ".NaN", ".NAN", NULL };
        char buf[64];
        const char *digits = s;
        size_t nd = n;
        int base = 10;

        *ret_err = 0;
        if (in_list(s, n, nulls))
                return json_null();
        if (in_list(s, n, trues))
                return json_true();
        if (in_list(s, n, falses))
                return json_false();
        if (in_list(s, n, infs))
                return json_real(INFINITY);
        if (in_list(s, n, ninfs))
                return json_real(-INFINITY);
        if (in_list(s, n, nans))
                return json_real(NAN);
        if (n > 2 && s[0] == '0' && s[1] == 'o' && match_all(s + 2, n - 2, is_octal)) {
                digits = s + 2, nd = n - 2, base = 8;
        } else if (n > 2 && s[0] == '0' && s[1] == 'x' && match_all(s + 2, n - 2, isxdigit)) {
                digits = s + 2, nd = n - 2, base = 16;
        } else {
                size_t off = (n > 0 && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
                if (!match_all(s + off, n - off, isdigit)) {
                        if (is_float(s, n) && n < sizeof buf) {
                                memcpy(buf, s, n);
                                buf[n] = 0;
                                return json_real(strtod(buf, NULL));
                        }
                        return NULL; /* a string */
                }
                /* 0644: octal in YAML 1.1, which kubectl reads, so a
                 * manifest's defaultMode: 0400 means 256 wherever it is
                 * applied, and here too. 09 is no octal number: YAML 1.1
                 * readers disagree on it, so it is refused. */
                if (n - off > 1 && s[off] == '0') {
                        if (!match_all(s + off, n - off, is_octal)) {
                                *ret_err = -EDOM;
                                return NULL;
                        }
                        base = 8;
                }
        }
        if (nd >= sizeof buf) {
                *ret_err = -ERANGE;
                return NULL;
        }
        memcpy(buf, digits, nd);
        buf[nd] = 0;
        errno = 0;
        long long v = strtoll(buf, NULL, base);
        if (errno == ERANGE) {
                *ret_err = -ERANGE;
                return NULL;
        }
        return json_integer(v);
}

/* ---- YAML reader ---------------------------------------------------------------------- */

typedef struct yreader {
        yaml_parser_t parser;
        spec_errors *errs;
        const char *data;
        size_t size;
        size_t nodes;
        bool failed;
        bool oom;
        spec_path path;          /* of the node being read */
        tend_hashmap *positions; /* the document's: path → where it is */
        size_t positions_bytes;  /* what the positions of every document hold */
} yreader;

/* What the positions of one input may hold: a few times the input, whatever
 * its shape (each value's entry holds its whole path, so long keys over
 * many values would otherwise take hundreds of times the input). Past it,
 * errors point at the nearest enclosing field that has a position. */
#define POSITIONS_MAX_BYTES(size) (8 * (size) + 64 * 1024)
#define POSITION_ENTRY_OVERHEAD 48 /* the map's slot and the key's allocation */

/* Where the node at the current path is written: the key that introduces
 * it, or for a list item its entry. */
static void note_position(yreader *y, const yaml_mark_t *m) {
        size_t cost = y->path.len + 1 + POSITION_ENTRY_OVERHEAD;

        if (!y->positions || y->path.len == 0 ||
            y->positions_bytes + cost > POSITIONS_MAX_BYTES(y->size))
                return;
        if (tend_hashmap_put(y->positions, spec__path_str(&y->path),
                             POS_PACK(m->line + 1, m->column + 1), NULL) < 0)
                y->oom = true;
        y->positions_bytes += cost;
}

static void yerror(yreader *y, const yaml_mark_t *m, const char *fmt, ...) _printf_(3, 4);
static void yerror(yreader *y, const yaml_mark_t *m, const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL;
        va_list ap;

        y->failed = true;
        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        if (!msg || spec_errors_add_at(y->errs, (unsigned) m->line + 1, (unsigned) m->column + 1,
                                       "%s", msg) == -ENOMEM)
                y->oom = true;
}

/* Reader errors (bad UTF-8, control characters) come with a byte offset,
 * not a mark: count lines up to it. */
static yaml_mark_t mark_at_offset(const yreader *y, size_t off) {
        yaml_mark_t m = {};
        for (size_t i = 0; i < off && i < y->size; i++) {
                if (y->data[i] == '\n') {
                        m.line++;
                        m.column = 0;
                } else
                        m.column++;
        }
        return m;
}

static int ynext(yreader *y, yaml_event_t *ev) {
        if (yaml_parser_parse(&y->parser, ev))
                return 0;

        if (y->parser.error == YAML_MEMORY_ERROR) {
                y->oom = true;
                return -ENOMEM;
        }
        if (y->parser.error == YAML_READER_ERROR) {
                yaml_mark_t m = mark_at_offset(y, y->parser.problem_offset);
                if (y->parser.problem_value != -1)
                        yerror(y, &m, "%s (byte 0x%02x): the input must be UTF-8 text",
                               y->parser.problem, (unsigned) y->parser.problem_value);
                else
                        yerror(y, &m, "%s", y->parser.problem);
        } else if (y->parser.problem_mark.index < y->size &&
                   y->data[y->parser.problem_mark.index] == '\t')
                yerror(y, &y->parser.problem_mark, "%s: a tab; YAML indentation must use spaces",
                       y->parser.problem);
        else if (y->parser.context)
                yerror(y, &y->parser.problem_mark, "%s (%s that started at line %zu, column %zu)",
                       y->parser.problem, y->parser.context, y->parser.context_mark.line + 1,
                       y->parser.context_mark.column + 1);
        else
                yerror(y, &y->parser.problem_mark, "%s", y->parser.problem ?: "syntax error");
        return -EINVAL;
}

#define TAG_PREFIX "tag:yaml.org,2002:"

static json_t *scalar_to_json(yreader *y, yaml_event_t *ev) {
        const char *v = (const char *) ev->data.scalar.value;
        size_t n = ev->data.scalar.length;
        const char *tag = (const char *) ev->data.scalar.tag;
        json_t *j;
        int err;

        if (memchr(v, 0, n)) {
                yerror(y, &ev->start_mark, "strings may not contain NUL characters");
                return NULL;
        }
        if (tag && !streq(tag, "!")) {
                const char *t = startswith(tag, TAG_PREFIX);
                if (!t || !(streq(t, "str") || streq(t, "int") || streq(t, "float") ||
                            streq(t, "bool") || streq(t, "null"))) {
                        yerror(y, &ev->start_mark,
                               "unsupported YAML tag \"%s%s\": use plain values (strings, "
                               "numbers, true/false, null)",
                               t ? "!!" : "", t ?: tag);
                        return NULL;
                }
                if (streq(t, "str"))
                        return json_stringn(v, n);
                j = spec__yaml_resolve_plain(v, n, &err);
                if (!j || (streq(t, "int") && !json_is_integer(j)) ||
                    (streq(t, "float") && !json_is_number(j)) ||
                    (streq(t, "bool") && !json_is_boolean(j)) ||
                    (streq(t, "null") && !json_is_null(j))) {
                        json_decref(j);
                        yerror(y, &ev->start_mark, "value does not match its tag !!%s", t);
                        return NULL;
                }
                if (streq(t, "float") && json_is_integer(j)) {
                        json_t *r = json_real((double) json_integer_value(j));
                        json_decref(j);
                        return r;
                }
                return j;
        }
        /* Quoted, literal and folded scalars, and the "!" tag, are strings. */
        if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE || tag)
                return json_stringn(v, n);
        j = spec__yaml_resolve_plain(v, n, &err);
        if (err == -ERANGE) {
                yerror(y, &ev->start_mark,
                       "integer out of range: %.*s (quote it if it is meant as a string)",
                       (int) MIN(n, 40), v);
                return NULL;
        }
        if (err == -EDOM) {
                yerror(y, &ev->start_mark,
                       "%.*s: a leading zero makes a number octal (YAML 1.1, as kubectl reads "
                       "it), and 8 and 9 are no octal digits; write the number without the "
                       "zero, or quote it for a string",
                       (int) MIN(n, 40), v);
                return NULL;
        }
        return j ?: json_stringn(v, n);
}

static json_t *read_node(yreader *y, yaml_event_t *ev, unsigned depth);

static json_t *read_sequence(yreader *y, yaml_event_t *start, unsigned depth) {
        json_t *a = json_array();
        size_t count = 0;

        if (!a) {
                y->oom = true;
                return NULL;
        }
        for (;;) {
                yaml_event_t ev;
                json_t *item;

                if (ynext(y, &ev) < 0)
                        break;
                if (ev.type == YAML_SEQUENCE_END_EVENT) {
                        yaml_event_delete(&ev);
                        return a;
                }
                if (++count > SPEC_MAX_ITEMS) {
                        yerror(y, &ev.start_mark, "list has more than %d entries", SPEC_MAX_ITEMS);
                        yaml_event_delete(&ev);
                        break;
                }
                size_t old = spec__path_index(&y->path, count - 1);
                note_position(y, &ev.start_mark);
                item = read_node(y, &ev, depth);
                spec__path_pop(&y->path, old);
                yaml_event_delete(&ev);
                if (!item)
                        break;
                if (json_array_append_new(a, item) < 0) {
                        y->oom = true;
                        break;
                }
        }
        (void) start;
        json_decref(a);
        return NULL;
}

static json_t *read_mapping(yreader *y, yaml_event_t *start, unsigned depth) {
        json_t *o = json_object();
        size_t count = 0;

        if (!o) {
                y->oom = true;
                return NULL;
        }
        for (;;) {
                yaml_event_t kev, vev;
                _cleanup_free_ char *key = NULL;
                yaml_mark_t kmark;
                json_t *val;

                if (ynext(y, &kev) < 0)
                        break;
                if (kev.type == YAML_MAPPING_END_EVENT) {
                        yaml_event_delete(&kev);
                        return o;
                }
                kmark = kev.start_mark;
                if (kev.type == YAML_ALIAS_EVENT) {
                        yerror(y, &kmark,
                               "YAML aliases (*%s) are not supported: write the "
                               "value out",
                               kev.data.alias.anchor);
                        yaml_event_delete(&kev);
                        break;
                }
                if (kev.type != YAML_SCALAR_EVENT) {
                        yerror(y, &kmark,
                               "mapping keys must be plain strings, not lists or "
                               "mappings");
                        yaml_event_delete(&kev);
                        break;
                }
                if (memchr(kev.data.scalar.value, 0, kev.data.scalar.length)) {
                        yerror(y, &kmark, "keys may not contain NUL characters");
                        yaml_event_delete(&kev);
                        break;
                }
                key = strndup((const char *) kev.data.scalar.value, kev.data.scalar.length);
                yaml_event_delete(&kev);
                if (!key) {
                        y->oom = true;
                        break;
                }
                if (streq(key, "<<")) {
                        yerror(y, &kmark,
                               "YAML merge keys (<<) are not supported: write the "
                               "fields out");
                        break;
                }
                if (json_object_get(o, key)) {
                        yerror(y, &kmark, "duplicate key \"%s\"", key);
                        break;
                }
                if (++count > SPEC_MAX_ITEMS) {
                        yerror(y, &kmark, "mapping has more than %d keys", SPEC_MAX_ITEMS);
                        break;
                }
                if (ynext(y, &vev) < 0)
                        break;
                size_t old = spec__path_field(&y->path, key);
                note_position(y, &kmark);
                val = read_node(y, &vev, depth);
                spec__path_pop(&y->path, old);
                yaml_event_delete(&vev);
                if (!val)
                        break;
                if (json_object_set_new(o, key, val) < 0) {
                        y->oom = true;
                        break;
                }
        }
        (void) start;
        json_decref(o);
        return NULL;
}

/* Converts the node that starts with ev (owned by the caller). */
static json_t *read_node(yreader *y, yaml_event_t *ev, unsigned depth) {
        json_t *j;

        if (++y->nodes > SPEC_MAX_NODES) {
                yerror(y, &ev->start_mark, "document has more than %d values", SPEC_MAX_NODES);
                return NULL;
        }
        switch (ev->type) {
        case YAML_ALIAS_EVENT:
                yerror(y, &ev->start_mark,
                       "YAML aliases (*%s) are not supported: write the value out",
                       ev->data.alias.anchor);
                return NULL;
        case YAML_SCALAR_EVENT:
                j = scalar_to_json(y, ev);
                if (!j && !y->failed)
                        y->oom = true;
                return j;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
                if (depth + 1 > SPEC_MAX_DEPTH) {
                        yerror(y, &ev->start_mark, "nesting deeper than %d levels", SPEC_MAX_DEPTH);
                        return NULL;
                }
                return ev->type == YAML_SEQUENCE_START_EVENT ? read_sequence(y, ev, depth + 1)
                                                             : read_mapping(y, ev, depth + 1);
        default:
                yerror(y, &ev->start_mark, "unexpected YAML event");
                return NULL;
        }
}

static int parse_yaml(const char *data, size_t size, spec_errors *errs, spec_docs *ret) {
        yreader y = { .errs = errs, .data = data, .size = size };
        spec_docs docs = {};
        int r = 0;

        if (!yaml_parser_initialize(&y.parser))
                return -ENOMEM;
        yaml_parser_set_input_string(&y.parser, (const unsigned char *) data, size);

        for (bool done = false; !done && r >= 0;) {
                yaml_event_t ev;

                if (ynext(&y, &ev) < 0) {
                        r = -EINVAL;
                        break;
                }
                switch (ev.type) {
                case YAML_STREAM_START_EVENT:
                case YAML_DOCUMENT_END_EVENT:
                        break;
                case YAML_STREAM_END_EVENT:
                        done = true;
                        break;
                case YAML_DOCUMENT_START_EVENT: {
                        yaml_event_t node;
                        unsigned line = (unsigned) ev.start_mark.line + 1;
                        json_t *root;

                        y.nodes = 0;
                        y.path = (spec_path){};
                        y.positions = tend_hashmap_free(y.positions);
                        if (docs.n >= SPEC_MAX_DOCUMENTS) {
                                yerror(&y, &ev.start_mark, "more than %d documents",
                                       SPEC_MAX_DOCUMENTS);
                                r = -EINVAL;
                                break;
                        }
                        if (ynext(&y, &node) < 0) {
                                r = -EINVAL;
                                break;
                        }
                        /* The line of the first content, not of "---". */
                        line = (unsigned) node.start_mark.line + 1;
                        y.positions = tend_hashmap_new();
                        if (!y.positions) {
                                yaml_event_delete(&node);
                                r = -ENOMEM;
                                break;
                        }
                        root = read_node(&y, &node, 0);
                        if (root && !json_is_object(root) && !json_is_null(root)) {
                                yerror(&y, &node.start_mark,
                                       "a manifest document must be a mapping (apiVersion, "
                                       "kind, metadata, spec), not %s",
                                       json_is_array(root) ? "a list" : "a scalar");
                                json_decref(root);
                                root = NULL;
                        }
                        yaml_event_delete(&node);
                        if (!root) {
                                r = y.oom ? -ENOMEM : -EINVAL;
                                break;
                        }
                        if (json_is_null(root))
                                json_decref(root); /* an empty document */
                        else {
                                r = docs_push_expanded(&docs, root, line, y.positions);
                                y.positions = NULL;
                                if (r == -E2BIG)
                                        r = spec_errors_add_at(errs, line, 1, LIST_TOO_LONG,
                                                               SPEC_MAX_DOCUMENTS);
                        }
                        break;
                }
                default:
                        yerror(&y, &ev.start_mark, "unexpected YAML event");
                        r = -EINVAL;
                }
                yaml_event_delete(&ev);
        }
        yaml_parser_delete(&y.parser);
        tend_hashmap_free(y.positions);
        if (y.oom)
                r = -ENOMEM;
        if (r < 0) {
                spec_docs_done(&docs);
                return r;
        }
        *ret = docs;
        return 0;
}

/* ---- JSON reader ------------------------------------------------------------------------ */

int spec__check_limits(json_t *j, unsigned depth, size_t *nodes, char **ret_problem) {
        const char *key;
        json_t *v;
        size_t i;

        if (++*nodes > SPEC_MAX_NODES) {
                *ret_problem = strprintf("document has more than %d values", SPEC_MAX_NODES);
                return -EINVAL;
        }
        if (!json_is_object(j) && !json_is_array(j)) {
                if (json_is_string(j) && memchr(json_string_value(j), 0, json_string_length(j))) {
                        *ret_problem = strdup("strings may not contain NUL characters");
                        return -EINVAL;
                }
                return 0;
        }
        if (depth + 1 > SPEC_MAX_DEPTH) {
                *ret_problem = strprintf("nesting deeper than %d levels", SPEC_MAX_DEPTH);
                return -EINVAL;
        }
        if ((json_is_object(j) ? json_object_size(j) : json_array_size(j)) > SPEC_MAX_ITEMS) {
                *ret_problem = strprintf("%s has more than %d entries",
                                         json_is_object(j) ? "object" : "list", SPEC_MAX_ITEMS);
                return -EINVAL;
        }
        if (json_is_object(j)) {
                json_object_foreach (j, key, v)
                        if (spec__check_limits(v, depth + 1, nodes, ret_problem) < 0)
                                return -EINVAL;
        } else
                json_array_foreach (j, i, v)
                        if (spec__check_limits(v, depth + 1, nodes, ret_problem) < 0)
                                return -EINVAL;
        return 0;
}

int spec_json_check_limits(json_t *j, char **ret_problem) {
        size_t nodes = 0;

        *ret_problem = NULL;
        return spec__check_limits(j, 0, &nodes, ret_problem);
}

static void line_col_at(const char *data, size_t off, unsigned *line, unsigned *col) {
        *line = 1;
        *col = 1;
        for (size_t i = 0; i < off; i++) {
                if (data[i] == '\n') {
                        (*line)++;
                        *col = 1;
                } else
                        (*col)++;
        }
}

static int parse_json(const char *data, size_t size, spec_errors *errs, spec_docs *ret) {
        spec_docs docs = {};
        size_t off = 0;
        int r;

        for (;;) {
                json_error_t err;
                json_t *root;
                unsigned line, col;
                size_t nodes = 0;
                _cleanup_free_ char *problem = NULL;

                while (off < size && isspace((unsigned char) data[off]))
                        off++;
                if (off >= size)
                        break;
                line_col_at(data, off, &line, &col);
                if (docs.n >= SPEC_MAX_DOCUMENTS) {
                        spec_errors_add_at(errs, line, col, "more than %d documents",
                                           SPEC_MAX_DOCUMENTS);
                        spec_docs_done(&docs);
                        return -EINVAL;
                }
                root = json_loadb(data + off, size - off,
                                  JSON_REJECT_DUPLICATES | JSON_DISABLE_EOF_CHECK, &err);
                if (!root) {
                        unsigned el, ec;
                        line_col_at(data, off + (size_t) MAX(err.position, 0), &el, &ec);
                        /* jansson's own line/column count from where we started it. */
                        if (err.line > 0) {
                                el = line + (unsigned) err.line - 1;
                                ec = err.line == 1 ? col + (unsigned) MAX(err.column, 1) - 1
                                                   : (unsigned) MAX(err.column, 1);
                        }
                        /* jansson names its own flag here; say what it means. */
                        r = spec_errors_add_at(errs, el, ec, "%s",
                                               strstr(err.text, "JSON_ALLOW_NUL")
                                                       ? "strings may not contain NUL characters"
                                                       : err.text);
                        spec_docs_done(&docs);
                        return r;
                }
                if (spec__check_limits(root, 0, &nodes, &problem) < 0) {
                        json_decref(root);
                        r = spec_errors_add_at(errs, line, col, "%s", strna(problem));
                        spec_docs_done(&docs);
                        return r;
                }
                if (!json_is_object(root)) {
                        json_decref(root);
                        r = spec_errors_add_at(errs, line, col,
                                               "a manifest document must be an object "
                                               "(apiVersion, kind, metadata, spec)");
                        spec_docs_done(&docs);
                        return r;
                }
                r = docs_push_expanded(&docs, root, line, NULL);
                if (r == -E2BIG)
                        r = spec_errors_add_at(errs, line, col, LIST_TOO_LONG, SPEC_MAX_DOCUMENTS);
                if (r < 0) {
                        spec_docs_done(&docs);
                        return r;
                }
                off += (size_t) err.position;
        }
        *ret = docs;
        return 0;
}

int spec_parse(const char *file, const char *data, size_t size, spec_errors *errs, spec_docs *ret) {
        return spec_parse_max(file, data, size, SPEC_MAX_INPUT_SIZE, errs, ret);
}

int spec_parse_max(const char *file, const char *data, size_t size, size_t max, spec_errors *errs,
                   spec_docs *ret) {
        const char *saved_file = errs->file, *saved_object = errs->object;
        size_t i = 0;
        int r;

        errs->file = file;
        errs->object = NULL;
        *ret = (spec_docs){};
        if (size > max) {
                r = spec_errors_add(errs, NULL,
                                    "input is larger than %zu bytes (%zu bytes): split it into "
                                    "several files",
                                    max, size);
                goto out;
        }
        /* JSON when the first thing in the input opens an object or a list;
         * YAML (which also reads most JSON) otherwise. */
        while (i < size && isspace((unsigned char) data[i]))
                i++;
        if (i < size && (data[i] == '{' || data[i] == '['))
                r = parse_json(data, size, errs, ret);
        else
                r = parse_yaml(data, size, errs, ret);
out:
        errs->file = saved_file;
        errs->object = saved_object;
        return r;
}
