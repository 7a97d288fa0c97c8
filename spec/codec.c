/* SPDX-License-Identifier: MIT */

/*
 * The table-driven codec: decode, encode, copy, equality and free for every
 * API type, from the field tables in types.c. One walker per operation, so
 * adding a field is one table line and all five operations agree.
 */

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>

#include "spec-internal.h"

/* ---- errors ------------------------------------------------------------------- */

void spec_errors_done(spec_errors *e) {
        for (size_t i = 0; i < e->n; i++) {
                free(e->items[i].file);
                free(e->items[i].object);
                free(e->items[i].field);
                free(e->items[i].message);
        }
        free(e->items);
        e->items = NULL;
        e->n = e->dropped = 0;
}

_printf_(5, 0) static int errors_addv(spec_errors *e, unsigned line, unsigned column,
                                      const char *field, const char *fmt, va_list ap) {
        spec_error *n, *item;
        char *msg, *clean;

        if (e->n >= SPEC_MAX_ERRORS) {
                e->dropped++;
                return -EINVAL;
        }
        if (vasprintf(&msg, fmt, ap) < 0)
                return -ENOMEM;
        /* It may quote the input (a parser's message, a value): shown to
         * people and sent in JSON, it must be UTF-8 whatever that held. */
        clean = utf8_escape_invalid(msg);
        free(msg);
        if (!clean)
                return -ENOMEM;
        msg = clean;
        n = realloc(e->items, sizeof(spec_error) * (e->n + 1));
        if (!n) {
                free(msg);
                return -ENOMEM;
        }
        e->items = n;
        item = &e->items[e->n++];
        *item = (spec_error){
                .file = e->file ? utf8_escape_invalid(e->file) : NULL,
                .line = line,
                .column = column,
                .object = e->object ? utf8_escape_invalid(e->object) : NULL,
                .field = field && *field ? utf8_escape_invalid(field) : NULL,
                .message = msg,
        };
        return -EINVAL;
}

int spec_errors_add(spec_errors *e, const char *field, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = errors_addv(e, 0, 0, field, fmt, ap);
        va_end(ap);
        return r;
}

int spec_errors_add_at(spec_errors *e, unsigned line, unsigned column, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = errors_addv(e, line, column, NULL, fmt, ap);
        va_end(ap);
        return r;
}

char *spec_error_format(const spec_error *e) {
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(64 * 1024);

        if (e->file) {
                (void) tend_buf_adds(&b, e->file);
                if (e->line > 0)
                        (void) tend_buf_addf(&b, ":%u:%u", e->line, e->column);
                (void) tend_buf_adds(&b, ": ");
        }
        if (e->object)
                (void) tend_buf_addf(&b, "%s: ", e->object);
        if (e->field)
                (void) tend_buf_addf(&b, "%s: ", e->field);
        (void) tend_buf_adds(&b, e->message);
        return tend_buf_take(&b);
}

void spec_errors_print(const spec_errors *e, FILE *f) {
        for (size_t i = 0; i < e->n; i++) {
                _cleanup_free_ char *s = spec_error_format(&e->items[i]);
                fprintf(f, "%s\n", s ?: e->items[i].message);
        }
        if (e->dropped > 0)
                fprintf(f, "... and %zu more errors\n", e->dropped);
}

/* ---- paths -------------------------------------------------------------------- */

static size_t path_appendf(spec_path *p, const char *fmt, ...) _printf_(2, 3);
static size_t path_appendf(spec_path *p, const char *fmt, ...) {
        size_t old = p->len;
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(p->buf + p->len, sizeof p->buf - p->len, fmt, ap);
        va_end(ap);
        if (n > 0)
                p->len = MIN(p->len + (size_t) n, sizeof p->buf - 1);
        return old;
}

size_t spec__path_field(spec_path *p, const char *name) {
        return p->len == 0 ? path_appendf(p, "%s", name) : path_appendf(p, ".%s", name);
}

size_t spec__path_index(spec_path *p, size_t i) {
        return path_appendf(p, "[%zu]", i);
}

size_t spec__path_key(spec_path *p, const char *key) {
        return path_appendf(p, "[%s]", key);
}

void spec__path_pop(spec_path *p, size_t len) {
        p->len = len;
        p->buf[len] = 0;
}

/* ---- reprs -------------------------------------------------------------------- */

char *spec__repr_json(json_t *j) {
        char *s = json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS);
        size_t n = s ? strlen(s) : 0;

        if (n > 200)
                strcpy(s + utf8_cut(s, n, 196), "...");
        return s;
}

char *spec__repr_str(const char *s) {
        json_t *j = spec__json_string(s ?: "");
        char *r;

        if (!j)
                return NULL;
        r = spec__repr_json(j);
        json_decref(j);
        return r;
}

json_t *spec__json_string(const char *s) {
        _cleanup_free_ char *copy = NULL;
        json_t *j = json_string(s);

        if (j)
                return j;
        /* Not UTF-8: each byte of an invalid sequence is written \xNN. Rare
         * (a stray byte in an error text). */
        copy = utf8_escape_invalid(s);
        return copy ? json_string(copy) : NULL;
}

/* ---- maps --------------------------------------------------------------------- */

static ssize_t map_find(const spec_map *m, const char *key, bool *found) {
        size_t lo = 0, hi = m->n;

        while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                int c = strcmp(m->items[mid].key, key);
                if (c == 0) {
                        *found = true;
                        return (ssize_t) mid;
                }
                if (c < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        *found = false;
        return (ssize_t) lo;
}

const char *spec_map_get(const spec_map *m, const char *key) {
        bool found;
        ssize_t i = map_find(m, key, &found);
        return found ? m->items[i].value : NULL;
}

int spec_map_set(spec_map *m, const char *key, const char *value) {
        bool found;
        ssize_t i = map_find(m, key, &found);
        _cleanup_free_ char *k = NULL, *v = strdup(value);
        spec_kv *n;

        if (!v)
                return -ENOMEM;
        if (found) {
                free(m->items[i].value);
                m->items[i].value = TAKE_PTR(v);
                return 0;
        }
        k = strdup(key);
        if (!k)
                return -ENOMEM;
        n = realloc(m->items, sizeof(spec_kv) * (m->n + 1));
        if (!n)
                return -ENOMEM;
        m->items = n;
        memmove(&m->items[i + 1], &m->items[i], sizeof(spec_kv) * (m->n - (size_t) i));
        m->items[i] = (spec_kv){ TAKE_PTR(k), TAKE_PTR(v) };
        m->n++;
        return 0;
}

bool spec_map_remove(spec_map *m, const char *key) {
        bool found;
        ssize_t i = map_find(m, key, &found);

        if (!found)
                return false;
        free(m->items[i].key);
        free(m->items[i].value);
        memmove(&m->items[i], &m->items[i + 1], sizeof(spec_kv) * (m->n - (size_t) i - 1));
        m->n--;
        if (m->n == 0) {
                free(m->items);
                m->items = NULL;
        }
        return true;
}

void spec_map_done(spec_map *m) {
        for (size_t i = 0; i < m->n; i++) {
                free(m->items[i].key);
                free(m->items[i].value);
        }
        free(m->items);
        *m = (spec_map){};
}

bool spec_map_equal(const spec_map *a, const spec_map *b) {
        if (a->n != b->n)
                return false;
        for (size_t i = 0; i < a->n; i++)
                if (!streq(a->items[i].key, b->items[i].key) ||
                    !streq(a->items[i].value, b->items[i].value))
                        return false;
        return true;
}

static int map_copy(spec_map *dst, const spec_map *src) {
        *dst = (spec_map){};
        if (src->n == 0)
                return 0;
        dst->items = new0(spec_kv, src->n);
        if (!dst->items)
                return -ENOMEM;
        for (size_t i = 0; i < src->n; i++) {
                dst->items[i].key = strdup(src->items[i].key);
                dst->items[i].value = strdup(src->items[i].value);
                dst->n = i + 1;
                if (!dst->items[i].key || !dst->items[i].value)
                        return -ENOMEM;
        }
        return 0;
}

static int kv_compare(const void *a, const void *b) {
        return strcmp(((const spec_kv *) a)->key, ((const spec_kv *) b)->key);
}

const spec_owner_ref *spec_meta_controller(const spec_meta *m) {
        for (size_t i = 0; i < m->n_owner_references; i++)
                if (m->owner_references[i].controller)
                        return &m->owner_references[i];
        return NULL;
}

bool spec_meta_owned_by(const spec_meta *m, const char *owner_uid) {
        const spec_owner_ref *o = spec_meta_controller(m);
        return o && owner_uid && streq_ptr(o->uid, owner_uid);
}

int64_t spec_meta_revision(const spec_meta *m) {
        const char *v = spec_map_get(&m->annotations, SPEC_ANN_REVISION);
        int64_t r;

        if (!v)
                return 0;
        return safe_atoi64(v, &r) < 0 ? -1 : r;
}

/* ---- init / done ------------------------------------------------------------------ */

void spec__init(const spec_type *t, void *p) {
        memset(p, 0, t->size);
        for (const spec_field *f = t->fields; f->name; f++) {
                void *v = FIELD_PTR(p, f);
                bool zero = f->flags & (SF_OMITEMPTY | SF_ZERO);

                switch (f->kind) {
                case SK_INT32:
                        if (!zero)
                                *(int32_t *) v = SPEC_UNSET;
                        break;
                case SK_INT64:
                        if (!zero)
                                *(int64_t *) v = SPEC_UNSET64;
                        break;
                case SK_ENUM:
                        *(int *) v = -EINVAL;
                        break;
                case SK_INTSTR:
                        ((spec_intstr *) v)->num = SPEC_UNSET;
                        break;
                case SK_STRUCT:
                        spec__init(f->type, v);
                        break;
                default:
                        break;
                }
        }
}

static void free_fields(const spec_type *t, void *p) {
        for (const spec_field *f = t->fields; f->name; f++) {
                void *v = FIELD_PTR(p, f);

                switch (f->kind) {
                case SK_STRING:
                        free(*(char **) v);
                        break;
                case SK_INTSTR:
                        free(((spec_intstr *) v)->str);
                        break;
                case SK_QUANTITY:
                        free(((spec_quantity *) v)->text);
                        break;
                case SK_STRV:
                        strv_free(*(char ***) v);
                        break;
                case SK_MAP:
                        spec_map_done(v);
                        break;
                case SK_STRUCT:
                        free_fields(f->type, v);
                        break;
                case SK_PTR:
                        spec_free(f->type, *(void **) v);
                        break;
                case SK_JSON:
                        json_decref(*(json_t **) v);
                        break;
                case SK_ARRAY: {
                        char *items = *(char **) v;
                        size_t n = *FIELD_COUNT(p, f);
                        for (size_t i = 0; i < n; i++)
                                free_fields(f->type, items + i * f->type->size);
                        free(items);
                        break;
                }
                default:
                        break;
                }
        }
}

void spec_done(const spec_type *t, void *p) {
        if (!p)
                return;
        free_fields(t, p);
        spec__init(t, p);
}

void *spec_new(const spec_type *t) {
        void *p = malloc(t->size);
        if (p)
                spec__init(t, p);
        return p;
}

void *spec_free(const spec_type *t, void *p) {
        if (p) {
                free_fields(t, p);
                free(p);
        }
        return NULL;
}

const char *spec_type_name(const spec_type *t) {
        return t->name;
}

/* ---- copy ----------------------------------------------------------------------- */

/* Every pointer p owns set to NULL (and every array to none), scalars kept:
 * after a memcpy from another object, p owns nothing yet. */
static void clear_owned(const spec_type *t, void *p) {
        for (const spec_field *f = t->fields; f->name; f++) {
                void *v = FIELD_PTR(p, f);

                switch (f->kind) {
                case SK_STRING:
                case SK_STRV:
                case SK_PTR:
                case SK_JSON:
                        *(void **) v = NULL;
                        break;
                case SK_INTSTR:
                        ((spec_intstr *) v)->str = NULL;
                        break;
                case SK_QUANTITY:
                        ((spec_quantity *) v)->text = NULL;
                        break;
                case SK_MAP:
                        *(spec_map *) v = (spec_map){};
                        break;
                case SK_STRUCT:
                        clear_owned(f->type, v);
                        break;
                case SK_ARRAY:
                        *(void **) v = NULL;
                        *FIELD_COUNT(p, f) = 0;
                        break;
                default:
                        break;
                }
        }
}

int spec__copy_into(const spec_type *t, void *dst, const void *src) {
        int r;

        /* Scalars come along with the memcpy; then dst owns nothing (every
         * pointer NULL), and every owned pointer is copied in turn. On
         * failure dst holds what was copied so far and NULLs for the rest,
         * so freeing it is safe (before, the rest were src's pointers: a
         * failure freed src's strings — found by test_out_of_memory). */
        memcpy(dst, src, t->size);
        clear_owned(t, dst);
        for (const spec_field *f = t->fields; f->name; f++) {
                void *d = FIELD_PTR(dst, f);
                const void *s = FIELD_CPTR(src, f);

                switch (f->kind) {
                case SK_STRING:
                case SK_INTSTR:
                case SK_QUANTITY:
                case SK_STRV:
                case SK_MAP:
                case SK_PTR:
                case SK_ARRAY:
                case SK_JSON:
                        break;
                case SK_STRUCT:
                        r = spec__copy_into(f->type, d, s);
                        if (r < 0)
                                return r;
                        continue;
                default:
                        continue;
                }

                switch (f->kind) {
                case SK_STRING: {
                        const char *str = *(char *const *) s;
                        *(char **) d = NULL;
                        if (str && !(*(char **) d = strdup(str)))
                                return -ENOMEM;
                        break;
                }
                case SK_INTSTR: {
                        const char *str = ((const spec_intstr *) s)->str;
                        ((spec_intstr *) d)->str = NULL;
                        if (str && !(((spec_intstr *) d)->str = strdup(str)))
                                return -ENOMEM;
                        break;
                }
                case SK_QUANTITY: {
                        const char *str = ((const spec_quantity *) s)->text;
                        ((spec_quantity *) d)->text = NULL;
                        if (str && !(((spec_quantity *) d)->text = strdup(str)))
                                return -ENOMEM;
                        break;
                }
                case SK_STRV: {
                        char *const *l = *(char **const *) s;
                        *(char ***) d = NULL;
                        if (l && !(*(char ***) d = strv_copy(l)))
                                return -ENOMEM;
                        break;
                }
                case SK_MAP:
                        r = map_copy(d, s);
                        if (r < 0)
                                return r;
                        break;
                case SK_PTR: {
                        const void *sp = *(void *const *) s;
                        *(void **) d = NULL;
                        if (sp && !(*(void **) d = spec_copy(f->type, sp)))
                                return -ENOMEM;
                        break;
                }
                case SK_JSON: /* shared: it is never changed */
                        *(json_t **) d = json_incref(*(json_t *const *) s);
                        break;
                case SK_ARRAY: {
                        const char *items = *(char *const *) s;
                        size_t n = *FIELD_CCOUNT(src, f), sz = f->type->size;
                        char *copy;

                        *(char **) d = NULL;
                        *FIELD_COUNT(dst, f) = 0;
                        if (n == 0)
                                break;
                        copy = calloc(n, sz);
                        if (!copy)
                                return -ENOMEM;
                        *(char **) d = copy;
                        for (size_t i = 0; i < n; i++) {
                                r = spec__copy_into(f->type, copy + i * sz, items + i * sz);
                                *FIELD_COUNT(dst, f) = i + 1;
                                if (r < 0)
                                        return r;
                        }
                        break;
                }
                default:
                        break;
                }
        }
        return 0;
}

void *spec_copy(const spec_type *t, const void *p) {
        void *c;

        if (!p)
                return NULL;
        c = malloc(t->size);
        if (!c)
                return NULL;
        if (spec__copy_into(t, c, p) < 0)
                return spec_free(t, c);
        return c;
}

/* ---- equality -------------------------------------------------------------------- */

/* as_encoded: whether the two encode alike (spec_encode() then
 * json_equal()): an SF_ZERO string absent or "", an enum out of range
 * either way, times by what is written. No allocation: the template
 * comparison of every ReplicaSet sync (spec_template_equal). */
static bool equal(const spec_type *t, const void *a, const void *b, bool as_encoded) {
        if (!a || !b)
                return a == b;
        for (const spec_field *f = t->fields; f->name; f++) {
                const void *x = FIELD_CPTR(a, f), *y = FIELD_CPTR(b, f);

                switch (f->kind) {
                case SK_STRING: {
                        const char *p = *(char *const *) x, *q = *(char *const *) y;
                        if (as_encoded && (f->flags & SF_ZERO))
                                p = p ?: "", q = q ?: "";
                        if (!streq_ptr(p, q))
                                return false;
                        break;
                }
                case SK_INT32:
                        if (*(const int32_t *) x != *(const int32_t *) y)
                                return false;
                        break;
                case SK_INT64:
                        if (*(const int64_t *) x != *(const int64_t *) y)
                                return false;
                        break;
                case SK_BOOL:
                        if (*(const bool *) x != *(const bool *) y)
                                return false;
                        break;
                case SK_TIME: {
                        char p[TIMESTAMP_MAX], q[TIMESTAMP_MAX];
                        usec_t u = *(const usec_t *) x, v = *(const usec_t *) y;
                        if (u != v && (!as_encoded || !u || !v ||
                                       !streq(format_timestamp(p, u), format_timestamp(q, v))))
                                return false;
                        break;
                }
                case SK_RV:
                        if (*(const uint64_t *) x != *(const uint64_t *) y)
                                return false;
                        break;
                case SK_ENUM: {
                        int p = *(const int *) x, q = *(const int *) y;
                        if (as_encoded && (p < 0 || p >= f->n_enum))
                                p = -1;
                        if (as_encoded && (q < 0 || q >= f->n_enum))
                                q = -1;
                        if (p != q)
                                return false;
                        break;
                }
                case SK_INTSTR: {
                        const spec_intstr *p = x, *q = y;
                        if (!streq_ptr(p->str, q->str) || (!p->str && p->num != q->num))
                                return false;
                        break;
                }
                case SK_QUANTITY:
                        if (!streq_ptr(((const spec_quantity *) x)->text,
                                       ((const spec_quantity *) y)->text))
                                return false;
                        break;
                case SK_STRV: {
                        char *const *p = *(char **const *) x, *const *q = *(char **const *) y;
                        /* (absent is no field, and empty is [], when encoded) */
                        if (!strv_equal(p, q) || (as_encoded && !p != !q))
                                return false;
                        break;
                }
                case SK_MAP:
                        if (!spec_map_equal(x, y))
                                return false;
                        break;
                case SK_STRUCT:
                        if (!equal(f->type, x, y, as_encoded))
                                return false;
                        break;
                case SK_PTR:
                        if (!equal(f->type, *(void *const *) x, *(void *const *) y, as_encoded))
                                return false;
                        break;
                case SK_ARRAY: {
                        size_t n = *FIELD_CCOUNT(a, f), sz = f->type->size;
                        const char *ia = *(char *const *) x, *ib = *(char *const *) y;
                        if (n != *FIELD_CCOUNT(b, f))
                                return false;
                        for (size_t i = 0; i < n; i++)
                                if (!equal(f->type, ia + i * sz, ib + i * sz, as_encoded))
                                        return false;
                        break;
                }
                case SK_JSON: {
                        json_t *jx = *(json_t *const *) x, *jy = *(json_t *const *) y;
                        if (jx != jy && (!jx || !jy || !json_equal(jx, jy)))
                                return false;
                        break;
                }
                case SK_UNSUPPORTED:
                        break;
                }
        }
        return true;
}

bool spec_equal(const spec_type *t, const void *a, const void *b) {
        return equal(t, a, b, false);
}

bool spec_equal_encoded(const spec_type *t, const void *a, const void *b) {
        return equal(t, a, b, true);
}

/* ---- encode ---------------------------------------------------------------------- */

static bool struct_empty(const spec_type *t, const void *p);

bool spec__field_written(const spec_field *f, const void *p) {
        const void *v = FIELD_CPTR(p, f);
        bool omitempty = f->flags & SF_OMITEMPTY, zero = f->flags & SF_ZERO;

        switch (f->kind) {
        case SK_STRING:
                return *(char *const *) v || zero;
        case SK_INT32: {
                int32_t i = *(const int32_t *) v;
                return !(omitempty && i == 0) && (omitempty || zero || i != SPEC_UNSET);
        }
        case SK_INT64: {
                int64_t i = *(const int64_t *) v;
                return !(omitempty && i == 0) && (omitempty || zero || i != SPEC_UNSET64);
        }
        case SK_BOOL:
                return !omitempty || *(const bool *) v;
        case SK_TIME:
                return *(const usec_t *) v != 0;
        case SK_RV:
                return *(const uint64_t *) v != 0;
        case SK_INTSTR: {
                const spec_intstr *is = v;
                return is->str || is->num != SPEC_UNSET;
        }
        case SK_QUANTITY:
                return ((const spec_quantity *) v)->text;
        case SK_STRV:
        case SK_PTR:
        case SK_JSON:
                return *(void *const *) v;
        case SK_MAP:
                return ((const spec_map *) v)->n > 0;
        case SK_ENUM: {
                int e = *(const int *) v;
                return e >= 0 && e < f->n_enum;
        }
        case SK_STRUCT:
                return !struct_empty(f->type, v);
        case SK_ARRAY:
                return *FIELD_CCOUNT(p, f) > 0;
        case SK_UNSUPPORTED:
                return false;
        }
        return false;
}

static bool struct_empty(const spec_type *t, const void *p) {
        for (const spec_field *f = t->fields; f->name; f++)
                if (spec__field_written(f, p))
                        return false;
        return true;
}

static int set_new(json_t *o, const char *key, json_t *v) {
        if (!v)
                return -ENOMEM;
        return json_object_set_new(o, key, v) < 0 ? -ENOMEM : 0;
}

static int encode_into(const spec_type *t, const void *p, json_t *o);

static json_t *encode_struct(const spec_type *t, const void *p) {
        json_t *o = json_object();
        if (!o)
                return NULL;
        if (encode_into(t, p, o) < 0) {
                json_decref(o);
                return NULL;
        }
        return o;
}

static int encode_into(const spec_type *t, const void *p, json_t *o) {
        int r = 0;

        for (const spec_field *f = t->fields; f->name && r >= 0; f++) {
                const void *v = FIELD_CPTR(p, f);

                if (!spec__field_written(f, p))
                        continue;
                switch (f->kind) {
                case SK_STRING:
                        r = set_new(o, f->name, spec__json_string(*(char *const *) v ?: ""));
                        break;
                case SK_INT32:
                        r = set_new(o, f->name, json_integer(*(const int32_t *) v));
                        break;
                case SK_INT64:
                        r = set_new(o, f->name, json_integer(*(const int64_t *) v));
                        break;
                case SK_BOOL:
                        r = set_new(o, f->name, json_boolean(*(const bool *) v));
                        break;
                case SK_TIME: {
                        char buf[TIMESTAMP_MAX];
                        r = set_new(o, f->name,
                                    json_string(format_timestamp(buf, *(const usec_t *) v)));
                        break;
                }
                case SK_RV: {
                        char buf[32];
                        snprintf(buf, sizeof buf, "%" PRIu64, *(const uint64_t *) v);
                        r = set_new(o, f->name, json_string(buf));
                        break;
                }
                case SK_INTSTR: {
                        const spec_intstr *is = v;
                        r = set_new(o, f->name,
                                    is->str ? spec__json_string(is->str) : json_integer(is->num));
                        break;
                }
                case SK_QUANTITY:
                        r = set_new(o, f->name,
                                    spec__json_string(((const spec_quantity *) v)->text));
                        break;
                case SK_STRV: {
                        json_t *a = json_array();
                        if (!a)
                                return -ENOMEM;
                        for (char *const *l = *(char **const *) v; *l && r >= 0; l++)
                                r = json_array_append_new(a, spec__json_string(*l)) < 0 ? -ENOMEM
                                                                                        : 0;
                        if (r < 0) {
                                json_decref(a);
                                break;
                        }
                        r = set_new(o, f->name, a);
                        break;
                }
                case SK_MAP: {
                        const spec_map *m = v;
                        json_t *mo = json_object();
                        if (!mo)
                                return -ENOMEM;
                        for (size_t i = 0; i < m->n && r >= 0; i++)
                                r = set_new(mo, m->items[i].key,
                                            spec__json_string(m->items[i].value));
                        if (r < 0) {
                                json_decref(mo);
                                break;
                        }
                        r = set_new(o, f->name, mo);
                        break;
                }
                case SK_ENUM:
                        r = set_new(o, f->name, json_string(f->enum_names[*(const int *) v]));
                        break;
                case SK_STRUCT:
                        r = set_new(o, f->name, encode_struct(f->type, v));
                        break;
                case SK_PTR:
                        r = set_new(o, f->name, encode_struct(f->type, *(void *const *) v));
                        break;
                case SK_JSON: /* the struct's own tree, shared (never changed) */
                        r = set_new(o, f->name, json_incref(*(json_t *const *) v));
                        break;
                case SK_ARRAY: {
                        size_t n = *FIELD_CCOUNT(p, f), sz = f->type->size;
                        const char *items = *(char *const *) v;
                        json_t *a = json_array();
                        if (!a)
                                return -ENOMEM;
                        for (size_t i = 0; i < n && r >= 0; i++) {
                                json_t *e = encode_struct(f->type, items + i * sz);
                                r = e && json_array_append_new(a, e) == 0 ? 0 : -ENOMEM;
                        }
                        if (r < 0) {
                                json_decref(a);
                                break;
                        }
                        r = set_new(o, f->name, a);
                        break;
                }
                case SK_UNSUPPORTED:
                        break;
                }
        }
        return r;
}

json_t *spec_encode(const spec_type *t, const void *p) {
        return encode_struct(t, p);
}

/* ---- decode ---------------------------------------------------------------------- */

typedef struct decoder {
        spec_errors *errs;
        spec_path path;
        bool failed;
        bool oom;
        bool share; /* spec_decode_shared() */
} decoder;

static void dec_error(decoder *d, const char *fmt, ...) _printf_(2, 3);
static void dec_error(decoder *d, const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL;
        va_list ap;

        d->failed = true;
        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        if (!msg || spec_errors_add(d->errs, spec__path_str(&d->path), "%s", msg) == -ENOMEM)
                d->oom = true;
}

static const char *json_type_word(json_t *j) {
        switch (json_typeof(j)) {
        case JSON_OBJECT:
                return "an object";
        case JSON_ARRAY:
                return "a list";
        case JSON_STRING:
                return "a string";
        case JSON_INTEGER:
                return "an integer";
        case JSON_REAL:
                return "a number";
        case JSON_TRUE:
        case JSON_FALSE:
                return "a boolean";
        default:
                return "null";
        }
}

/* "Invalid value: 8080: must be a string (quote it: "8080")" — the classic
 * YAML surprise of a number or boolean where a string belongs. */
static void dec_type_error(decoder *d, json_t *j, const char *want) {
        _cleanup_free_ char *repr = spec__repr_json(j);

        if (streq(want, "a string") && (json_is_number(j) || json_is_boolean(j))) {
                dec_error(d, "Invalid value: %s: must be a string (quote it: \"%s\")", strna(repr),
                          strna(repr));
                return;
        }
        dec_error(d, "Invalid value: %s: must be %s, not %s", strna(repr), want, json_type_word(j));
}

static void decode_struct(decoder *d, const spec_type *t, json_t *j, void *p);

static char *dec_strdup(decoder *d, const char *s) {
        char *c = strdup(s);
        if (!c)
                d->oom = true;
        return c;
}

static void decode_string(decoder *d, json_t *j, char **out) {
        if (!json_is_string(j)) {
                dec_type_error(d, j, "a string");
                return;
        }
        *out = dec_strdup(d, json_string_value(j));
}

static bool dec_int(decoder *d, json_t *j, int64_t lo, int64_t hi, int64_t *ret) {
        json_int_t v;

        if (json_is_real(j)) {
                double x = json_real_value(j);
                _cleanup_free_ char *repr = spec__repr_json(j);
                if (x == (double) (int64_t) x)
                        dec_error(d, "Invalid value: %s: must be an integer (write %" PRId64 ")",
                                  strna(repr), (int64_t) x);
                else
                        dec_error(d, "Invalid value: %s: must be an integer", strna(repr));
                return false;
        }
        if (!json_is_integer(j)) {
                dec_type_error(d, j, "an integer");
                return false;
        }
        v = json_integer_value(j);
        if (v > hi) {
                dec_error(d, "Invalid value: %lld: must be at most %" PRId64, (long long) v, hi);
                return false;
        }
        if (v < lo) {
                dec_error(d, "Invalid value: %lld: must be at least %" PRId64, (long long) v, lo);
                return false;
        }
        *ret = v;
        return true;
}

static int cmp_key(const void *a, const void *b) {
        return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/* A deep copy of j with each object's keys in sorted order (as an SK_JSON
 * value is kept and written). NULL: out of memory. */
static json_t *sorted_copy(json_t *j) {
        _cleanup_free_ const char **keys = NULL;
        const char *k;
        json_t *out, *x;
        size_t i = 0;

        if (json_is_array(j)) {
                out = json_array();
                json_array_foreach (j, i, x)
                        if (!out || json_array_append_new(out, sorted_copy(x)) < 0)
                                return json_decref(out), NULL;
                return out;
        }
        if (!json_is_object(j))
                return json_deep_copy(j);
        out = json_object();
        keys = new0(const char *, json_object_size(j) + 1);
        if (!out || !keys)
                return json_decref(out), NULL;
        json_object_foreach (j, k, x)
                keys[i++] = k;
        qsort(keys, i, sizeof *keys, cmp_key);
        for (size_t n = 0; n < i; n++)
                if (json_object_set_new(out, keys[n], sorted_copy(json_object_get(j, keys[n]))) < 0)
                        return json_decref(out), NULL;
        return out;
}

/* Whether each object in j has its keys in sorted order already (etcd's
 * values and the store's rows are written so). */
static bool is_sorted(json_t *j) {
        const char *k, *prev = NULL;
        json_t *x;
        size_t i;

        if (json_is_array(j)) {
                json_array_foreach (j, i, x)
                        if (!is_sorted(x))
                                return false;
                return true;
        }
        if (!json_is_object(j))
                return true;
        json_object_foreach (j, k, x) {
                if ((prev && strcmp(prev, k) >= 0) || !is_sorted(x))
                        return false;
                prev = k;
        }
        return true;
}

static void decode_field(decoder *d, const spec_field *f, json_t *j, void *base) {
        void *v = FIELD_PTR(base, f);
        int64_t i;

        switch (f->kind) {
        case SK_STRING:
                decode_string(d, j, v);
                /* "" is how an absent SF_ZERO string is written: absent */
                if ((f->flags & SF_ZERO) && *(char **) v && !**(char **) v) {
                        free(*(char **) v);
                        *(char **) v = NULL;
                }
                break;
        case SK_INT32:
                /* INT32_MIN is our "absent" marker, so it is out of range. */
                if (dec_int(d, j, INT32_MIN + 1, INT32_MAX, &i))
                        *(int32_t *) v = (int32_t) i;
                break;
        case SK_INT64:
                if (dec_int(d, j, INT64_MIN + 1, INT64_MAX, &i))
                        *(int64_t *) v = i;
                break;
        case SK_BOOL:
                if (!json_is_boolean(j))
                        dec_type_error(d, j, "a boolean (true or false)");
                else
                        *(bool *) v = json_is_true(j);
                break;
        case SK_TIME: {
                usec_t u;
                if (!json_is_string(j)) {
                        dec_type_error(d, j, "an RFC 3339 time string");
                        break;
                }
                if (parse_timestamp(json_string_value(j), &u) < 0 || u == 0) {
                        _cleanup_free_ char *repr = spec__repr_json(j);
                        dec_error(d,
                                  "Invalid value: %s: must be an RFC 3339 time, e.g. "
                                  "\"2026-01-02T15:04:05Z\"",
                                  strna(repr));
                        break;
                }
                *(usec_t *) v = u;
                break;
        }
        case SK_RV: {
                uint64_t u;
                if (!json_is_string(j)) {
                        dec_type_error(d, j, "a string");
                        break;
                }
                if (isempty(json_string_value(j)))
                        break;
                if (safe_atou64(json_string_value(j), &u) < 0) {
                        _cleanup_free_ char *repr = spec__repr_json(j);
                        dec_error(d,
                                  "Invalid value: %s: must be a resourceVersion this agent "
                                  "handed out (a decimal number)",
                                  strna(repr));
                        break;
                }
                *(uint64_t *) v = u;
                break;
        }
        case SK_INTSTR: {
                spec_intstr *is = v;
                if (json_is_string(j))
                        is->str = dec_strdup(d, json_string_value(j));
                else if (json_is_integer(j) || json_is_real(j)) {
                        if (dec_int(d, j, INT32_MIN + 1, INT32_MAX, &i))
                                is->num = (int32_t) i;
                } else
                        dec_type_error(d, j, "an integer or a string");
                break;
        }
        case SK_QUANTITY: {
                spec_quantity *q = v;
                _cleanup_free_ char *text = NULL;
                int r;

                if (json_is_string(j))
                        text = dec_strdup(d, json_string_value(j));
                else if (json_is_integer(j))
                        text = strprintf("%lld", (long long) json_integer_value(j));
                else if (json_is_real(j))
                        text = strprintf("%.15g", json_real_value(j));
                else {
                        dec_type_error(d, j, "a quantity such as \"500m\" or \"128Mi\"");
                        break;
                }
                if (!text) {
                        d->oom = true;
                        break;
                }
                r = spec_quantity_parse(text, &q->milli, &q->value);
                if (r == -ERANGE) {
                        dec_error(d, "Invalid value: \"%s\": quantity is too large", text);
                        break;
                }
                if (r < 0) {
                        _cleanup_free_ char *repr = spec__repr_str(text);
                        dec_error(d,
                                  "Invalid value: %s: quantities must match the regular "
                                  "expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                                  strna(repr));
                        break;
                }
                q->text = TAKE_PTR(text);
                break;
        }
        case SK_STRV: {
                size_t n, k;
                json_t *e;
                char **l;

                if (!json_is_array(j)) {
                        dec_type_error(d, j, "a list of strings");
                        break;
                }
                n = json_array_size(j);
                if (n == 0)
                        break;
                l = new0(char *, n + 1);
                if (!l) {
                        d->oom = true;
                        break;
                }
                *(char ***) v = l;
                k = 0;
                json_array_foreach (j, n, e) {
                        size_t old = spec__path_index(&d->path, n);
                        if (json_is_string(e))
                                l[k++] = dec_strdup(d, json_string_value(e));
                        else
                                dec_type_error(d, e, "a string");
                        spec__path_pop(&d->path, old);
                        if (d->oom)
                                break;
                }
                break;
        }
        case SK_MAP: {
                spec_map *m = v;
                const char *key;
                json_t *e;

                if (!json_is_object(j)) {
                        if (f->flags & SF_SECRET)
                                dec_error(d,
                                          "Invalid value: <secret contents redacted>: must be "
                                          "an object of strings, not %s",
                                          json_type_word(j));
                        else
                                dec_type_error(d, j, "an object of strings");
                        break;
                }
                if (json_object_size(j) == 0)
                        break;
                m->items = new0(spec_kv, json_object_size(j));
                if (!m->items) {
                        d->oom = true;
                        break;
                }
                json_object_foreach (j, key, e) {
                        size_t old = spec__path_key(&d->path, key);
                        if (json_is_string(e)) {
                                m->items[m->n].key = dec_strdup(d, key);
                                m->items[m->n].value = dec_strdup(d, json_string_value(e));
                                m->n++;
                        } else if (!json_is_null(e) && (f->flags & SF_SECRET))
                                dec_error(d,
                                          "Invalid value: <secret contents redacted>: must be "
                                          "a string, not %s",
                                          json_type_word(e));
                        else if (!json_is_null(e))
                                dec_type_error(d, e, "a string");
                        spec__path_pop(&d->path, old);
                        if (d->oom)
                                break;
                }
                if (!d->oom)
                        qsort(m->items, m->n, sizeof(spec_kv), kv_compare);
                break;
        }
        case SK_ENUM: {
                const char *s;
                if (!json_is_string(j)) {
                        dec_type_error(d, j, "a string");
                        break;
                }
                s = json_string_value(j);
                for (int k = 0; k < f->n_enum; k++)
                        if (streq(s, f->enum_names[k])) {
                                *(int *) v = k;
                                return;
                        }
                {
                        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(4096);
                        _cleanup_free_ char *repr = spec__repr_str(s);
                        for (int k = 0; k < f->n_enum; k++)
                                (void) tend_buf_addf(&b, "%s\"%s\"", k ? ", " : "",
                                                     f->enum_names[k]);
                        dec_error(d, "Unsupported value: %s: supported values: %s", strna(repr),
                                  tend_buf_str(&b));
                }
                break;
        }
        case SK_STRUCT:
                decode_struct(d, f->type, j, v);
                break;
        case SK_PTR: {
                void *sub;
                if (!json_is_object(j)) {
                        dec_type_error(d, j, "an object");
                        break;
                }
                sub = spec_new(f->type);
                if (!sub) {
                        d->oom = true;
                        break;
                }
                *(void **) v = sub;
                decode_struct(d, f->type, j, sub);
                break;
        }
        case SK_ARRAY: {
                size_t n, sz = f->type->size;
                json_t *e;
                char *items;

                if (!json_is_array(j)) {
                        dec_type_error(d, j, "a list");
                        break;
                }
                if (json_array_size(j) == 0)
                        break;
                items = calloc(json_array_size(j), sz);
                if (!items) {
                        d->oom = true;
                        break;
                }
                *(char **) v = items;
                json_array_foreach (j, n, e) {
                        size_t old = spec__path_index(&d->path, n);
                        spec__init(f->type, items + n * sz);
                        *FIELD_COUNT(base, f) = n + 1;
                        decode_struct(d, f->type, e, items + n * sz);
                        spec__path_pop(&d->path, old);
                        if (d->oom)
                                break;
                }
                break;
        }
        case SK_JSON:
                if (!json_is_object(j))
                        dec_type_error(d, j, "an object");
                else if (d->share && is_sorted(j))
                        *(json_t **) v = json_incref(j);
                else if (!(*(json_t **) v = sorted_copy(j)))
                        d->oom = true;
                break;
        case SK_UNSUPPORTED:
                if (f->note)
                        dec_error(d, "Forbidden: not supported by tend: %s", f->note);
                else
                        dec_error(d, "Forbidden: not supported by tend");
                break;
        }
}

static const spec_field *find_field(const spec_type *t, const char *name) {
        for (const spec_field *f = t->fields; f->name; f++)
                if (streq(f->name, name))
                        return f;
        return NULL;
}

/* The closest supported field name, if it is close enough to be a typo. */
static const char *suggest_field(const spec_type *t, const char *name) {
        const char *best = NULL;
        size_t best_d = SIZE_MAX, len = strlen(name);

        if (len > 64)
                return NULL;
        for (const spec_field *f = t->fields; f->name; f++) {
                size_t dist;
                if (f->kind == SK_UNSUPPORTED)
                        continue;
                dist = string_distance(name, f->name);
                if (dist < best_d) {
                        best_d = dist;
                        best = f->name;
                }
        }
        if (best && (best_d <= 2 || best_d * 3 <= len) && best_d < strlen(best))
                return best;
        /* Case only ("Replicas" for "replicas") is always worth a hint. */
        for (const spec_field *f = t->fields; f->name; f++)
                if (f->kind != SK_UNSUPPORTED && strcasecmp(f->name, name) == 0)
                        return f->name;
        return NULL;
}

static void decode_struct(decoder *d, const spec_type *t, json_t *j, void *p) {
        const char *key;
        json_t *v;

        if (!json_is_object(j)) {
                dec_type_error(d, j, "an object");
                return;
        }
        json_object_foreach (j, key, v) {
                const spec_field *f = find_field(t, key);
                size_t old = t->map_like ? spec__path_key(&d->path, key)
                                         : spec__path_field(&d->path, key);

                if (!f) {
                        const char *hint = suggest_field(t, key);
                        if (t->unknown_message)
                                dec_error(d, "%s", t->unknown_message);
                        else if (hint)
                                dec_error(d, "Unknown field (did you mean \"%s\"?)", hint);
                        else
                                dec_error(d, "Unknown field: %s has no field \"%s\"", t->name, key);
                } else if (!json_is_null(v))
                        decode_field(d, f, v, p);
                spec__path_pop(&d->path, old);
                if (d->oom)
                        return;
        }
        if (t->after_decode && t->after_decode(p) == -ENOMEM)
                d->oom = true;
}

static int decode(const spec_type *t, json_t *j, void *out, spec_errors *errs, bool share) {
        decoder d = { .errs = errs, .share = share };

        decode_struct(&d, t, j, out);
        if (d.oom)
                return -ENOMEM;
        return d.failed ? -EINVAL : 0;
}

int spec_decode(const spec_type *t, json_t *j, void *out, spec_errors *errs) {
        return decode(t, j, out, errs, false);
}

static int decode_new(const spec_type *t, json_t *j, spec_errors *errs, void **ret, bool share) {
        void *p = spec_new(t);
        int r;

        if (!p)
                return -ENOMEM;
        r = decode(t, j, p, errs, share);
        if (r < 0) {
                spec_free(t, p);
                return r;
        }
        *ret = p;
        return 0;
}

int spec_decode_new(const spec_type *t, json_t *j, spec_errors *errs, void **ret) {
        return decode_new(t, j, errs, ret, false);
}

int spec_decode_shared(const spec_type *t, json_t *j, spec_errors *errs, void **ret) {
        return decode_new(t, j, errs, ret, true);
}

/* ---- fieldValidation=Ignore|Warn --------------------------------------------------------- */

static const spec_field *field_named(const spec_type *t, const char *name) {
        for (const spec_field *f = t->fields; f && f->name; f++)
                if (streq(f->name, name))
                        return f;
        return NULL;
}

static int drop_unknown(const spec_type *t, json_t *j, const char *path, json_t *paths) {
        const char *k;
        json_t *v;
        void *tmp;

        if (!json_is_object(j) || t->map_like)
                return 0;
        json_object_foreach_safe(j, tmp, k, v) {
                const spec_field *f = field_named(t, k);
                _cleanup_free_ char *p = strprintf("%s%s%s", path, *path ? "." : "", k);
                int r = 0;

                if (!p)
                        return -ENOMEM;
                if (!f) {
                        if (json_array_append_new(paths, json_string(p)) < 0)
                                return -ENOMEM;
                        json_object_del(j, k);
                        continue;
                }
                if (f->kind == SK_STRUCT || f->kind == SK_PTR)
                        r = drop_unknown(f->type, v, p, paths);
                else if (f->kind == SK_ARRAY && json_is_array(v)) {
                        size_t i;
                        json_t *e;
                        json_array_foreach (v, i, e) {
                                _cleanup_free_ char *pi = strprintf("%s[%zu]", p, i);
                                r = pi ? drop_unknown(f->type, e, pi, paths) : -ENOMEM;
                                if (r < 0)
                                        break;
                        }
                }
                if (r < 0)
                        return r;
        }
        return 0;
}

int spec_drop_unknown(const spec_type *t, json_t *j, json_t *paths) {
        return drop_unknown(t, j, "", paths);
}
