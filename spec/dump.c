/* SPDX-License-Identifier: MIT */

/* JSON trees → text: compact JSON, in the tree's order or canonical (keys
 * sorted as jansson sorts them), through yajl's generator; YAML through
 * libyaml's emitter. */

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <yajl/yajl_gen.h>
#include <yaml.h>

#include "spec-internal.h"

typedef struct key_len {
        const char *key;
        size_t len;
} key_len;

/* A status that is not yajl_gen_status_ok, for a failure of ours (out of
 * memory): the text is then jansson's (dump()). */
#define GEN_FAILED yajl_gen_generation_complete

typedef struct opts {
        bool sorted; /* keys as jansson sorts them */
        bool shared; /* shared trees' text from the cache */
} opts;

/* The text of shared trees (a reference besides the one being written:
 * the codec's SK_JSON values, a deployment's managedFields, never changed),
 * per thread, the least used going first (spec_json_dump_shared()). */
#define SHARED_CACHE_N 8
#define SHARED_MIN_TEXT 4096

typedef struct shared_text {
        json_t *tree;
        char *text;
        size_t len;
        uint64_t used;
} shared_text;

static _Thread_local shared_text shared_cache[SHARED_CACHE_N];
static _Thread_local uint64_t shared_clock;
static _Thread_local void (*shared_release)(json_t *tree, void *userdata);
static _Thread_local void *shared_release_userdata;

static void release(json_t *tree) {
        if (tree && shared_release)
                shared_release(tree, shared_release_userdata);
        else
                json_decref(tree);
}

void spec_json_dump_shared_release_with(void (*fn)(json_t *tree, void *userdata), void *userdata) {
        shared_release = fn;
        shared_release_userdata = userdata;
}

/* jansson's order of keys (JSON_SORT_KEYS): bytes, then length. */
static int compare_keys(const void *a, const void *b) {
        const key_len *x = a, *y = b;
        int c = memcmp(x->key, y->key, MIN(x->len, y->len));

        return c ? c : x->len < y->len ? -1 : x->len > y->len;
}

static yajl_gen_status gen(yajl_gen g, json_t *j, const opts *o);

static yajl_gen_status gen_member(yajl_gen g, json_t *j, const char *k, size_t n, const opts *o) {
        yajl_gen_status st = yajl_gen_string(g, (const unsigned char *) k, n);

        return st == yajl_gen_status_ok ? gen(g, json_object_getn(j, k, n), o) : st;
}

static yajl_gen_status gen_object(yajl_gen g, json_t *j, const opts *o) {
        _cleanup_free_ key_len *keys = NULL;
        yajl_gen_status st;
        size_t n = 0, len;
        const char *k;
        json_t *v;

        if ((st = yajl_gen_map_open(g)) != yajl_gen_status_ok)
                return st;
        if (o->sorted && json_object_size(j) > 1) {
                keys = new0(key_len, json_object_size(j));
                if (!keys)
                        return GEN_FAILED;
                json_object_keylen_foreach(j, k, len, v) keys[n++] = (key_len){ k, len };
                qsort(keys, n, sizeof *keys, compare_keys);
                for (size_t i = 0; i < n; i++)
                        if ((st = gen_member(g, j, keys[i].key, keys[i].len, o)) !=
                            yajl_gen_status_ok)
                                return st;
        } else
                json_object_keylen_foreach(
                        j, k, len, v) if ((st = yajl_gen_string(g, (const unsigned char *) k,
                                                                len)) != yajl_gen_status_ok ||
                                          (st = gen(g, v, o)) != yajl_gen_status_ok) return st;
        return yajl_gen_map_close(g);
}

static char *dump(json_t *j, const opts *o, size_t *ret_len);

/* A shared tree's text, from the cache or written and kept (see
 * spec_json_dump_shared()): into g as it is (yajl_gen_number() writes an
 * atom's text verbatim). */
static yajl_gen_status gen_shared(yajl_gen g, json_t *j) {
        static const opts plain = {};
        shared_text *c = NULL, *lru = &shared_cache[0];
        yajl_gen_status st;
        size_t len;
        char *text;

        for (size_t i = 0; i < SHARED_CACHE_N; i++) {
                shared_text *e = &shared_cache[i];
                /* (a tree only the cache holds: its object is gone) */
                if (e->tree && __atomic_load_n(&e->tree->refcount, __ATOMIC_RELAXED) == 1) {
                        release(e->tree);
                        free(e->text);
                        *e = (shared_text){};
                }
                if (e->tree == j)
                        c = e;
                else if (e->used < lru->used)
                        lru = e;
        }
        if (c) {
                c->used = ++shared_clock;
                return yajl_gen_number(g, c->text, c->len);
        }
        text = dump(j, &plain, &len);
        if (!text)
                return GEN_FAILED;
        st = yajl_gen_number(g, text, len);
        if (len < SHARED_MIN_TEXT) {
                free(text);
                return st;
        }
        release(lru->tree);
        free(lru->text);
        /* (the reference keeps the tree, and so its address, for the text) */
        *lru = (shared_text){ json_incref(j), text, len, ++shared_clock };
        return st;
}

/* The tree into yajl's generator, in its order or jansson's sorted one. A
 * real is written as jansson writes it (yajl has no such format), as a
 * number. */
static yajl_gen_status gen(yajl_gen g, json_t *j, const opts *o) {
        yajl_gen_status st;
        json_t *v;
        size_t i;

        if (o->shared && (json_is_object(j) || json_is_array(j)) &&
            __atomic_load_n(&j->refcount, __ATOMIC_RELAXED) > 1)
                return gen_shared(g, j);
        switch (json_typeof(j)) {
        case JSON_OBJECT:
                return gen_object(g, j, o);
        case JSON_ARRAY:
                if ((st = yajl_gen_array_open(g)) != yajl_gen_status_ok)
                        return st;
                json_array_foreach (j, i, v)
                        if ((st = gen(g, v, o)) != yajl_gen_status_ok)
                                return st;
                return yajl_gen_array_close(g);
        case JSON_STRING:
                return yajl_gen_string(g, (const unsigned char *) json_string_value(j),
                                       json_string_length(j));
        case JSON_INTEGER:
                return yajl_gen_integer(g, json_integer_value(j));
        case JSON_REAL: {
                _cleanup_free_ char *text = json_dumps(j, JSON_ENCODE_ANY);
                return text ? yajl_gen_number(g, text, strlen(text)) : GEN_FAILED;
        }
        case JSON_TRUE:
        case JSON_FALSE:
                return yajl_gen_bool(g, json_is_true(j));
        case JSON_NULL:
                return yajl_gen_null(g);
        }
        return GEN_FAILED; /* (not reached) */
}

/* The text g generated, if st says it was all generated (new string; NULL
 * otherwise); g is freed. */
static char *gen_text(yajl_gen g, yajl_gen_status st, size_t *ret_len) {
        const unsigned char *buf;
        size_t len = 0;
        char *out = NULL;

        if (st == yajl_gen_status_ok && yajl_gen_get_buf(g, &buf, &len) == yajl_gen_status_ok)
                out = strndup((const char *) buf, len);
        yajl_gen_free(g);
        if (ret_len)
                *ret_len = out ? len : 0;
        return out;
}

static char *dump(json_t *j, const opts *o, size_t *ret_len) {
        yajl_gen g = yajl_gen_alloc(NULL);
        char *out = g ? gen_text(g, gen(g, j, o), ret_len) : NULL;

        /* (a tree deeper than yajl goes, 128: as jansson writes it) */
        if (!out &&
            (out = json_dumps(j,
                              JSON_COMPACT | JSON_ENCODE_ANY | (o->sorted ? JSON_SORT_KEYS : 0))) &&
            ret_len)
                *ret_len = strlen(out);
        return out;
}

char *spec_json_dump(json_t *j) {
        return dump(j, &(opts){}, NULL);
}

char *spec_json_dump_canonical(json_t *j) {
        return dump(j, &(opts){ .sorted = true }, NULL);
}

char *spec_json_dump_shared(json_t *j) {
        return dump(j, &(opts){ .shared = true }, NULL);
}

void spec_json_dump_shared_forget(void) {
        for (size_t i = 0; i < SHARED_CACHE_N; i++) {
                release(shared_cache[i].tree);
                free(shared_cache[i].text);
                shared_cache[i] = (shared_text){};
        }
}

/* ---- objects straight from the codec's tables ----------------------------------- */

/* The text spec_encode() then dump() would write, without the tree: the
 * codec's walk (encode_into()) with the same rule of what is left out
 * (spec__field_written()), into yajl's generator. The store writes every row so, and a large
 * object's tree cost as much to make and free as its text to write. */

/* A string as spec__json_string() makes it: bytes that are not UTF-8
 * written \xNN. */
static yajl_gen_status gen_cstring(yajl_gen g, const char *s) {
        _cleanup_free_ char *copy = NULL;

        if (!utf8_is_valid(s) && !(s = copy = utf8_escape_invalid(s)))
                return GEN_FAILED;
        return yajl_gen_string(g, (const unsigned char *) s, strlen(s));
}

static yajl_gen_status gen_struct(yajl_gen g, const spec_type *t, const void *p, const opts *o);

static yajl_gen_status gen_field(yajl_gen g, const spec_field *f, const void *p, const opts *o) {
        const void *v = FIELD_CPTR(p, f);
        yajl_gen_status st = yajl_gen_string(g, (const unsigned char *) f->name, strlen(f->name));
        char buf[MAX(TIMESTAMP_MAX, 32)];

        if (st != yajl_gen_status_ok)
                return st;
        switch (f->kind) {
        case SK_STRING:
                return gen_cstring(g, *(char *const *) v ?: "");
        case SK_INT32:
                return yajl_gen_integer(g, *(const int32_t *) v);
        case SK_INT64:
                return yajl_gen_integer(g, *(const int64_t *) v);
        case SK_BOOL:
                return yajl_gen_bool(g, *(const bool *) v);
        case SK_TIME:
                format_timestamp(buf, *(const usec_t *) v);
                return yajl_gen_string(g, (const unsigned char *) buf, strlen(buf));
        case SK_RV:
                snprintf(buf, sizeof buf, "%" PRIu64, *(const uint64_t *) v);
                return yajl_gen_string(g, (const unsigned char *) buf, strlen(buf));
        case SK_INTSTR: {
                const spec_intstr *is = v;
                return is->str ? gen_cstring(g, is->str) : yajl_gen_integer(g, is->num);
        }
        case SK_QUANTITY:
                return gen_cstring(g, ((const spec_quantity *) v)->text);
        case SK_STRV:
                if ((st = yajl_gen_array_open(g)) != yajl_gen_status_ok)
                        return st;
                for (char *const *l = *(char **const *) v; *l; l++)
                        if ((st = gen_cstring(g, *l)) != yajl_gen_status_ok)
                                return st;
                return yajl_gen_array_close(g);
        case SK_MAP: {
                /* (kept sorted, as jansson sorts: the same text either way) */
                const spec_map *m = v;
                if ((st = yajl_gen_map_open(g)) != yajl_gen_status_ok)
                        return st;
                for (size_t i = 0; i < m->n; i++) {
                        /* (jansson refuses such a key, and so spec_encode()) */
                        const char *k = m->items[i].key;
                        if (!utf8_is_valid(k))
                                return GEN_FAILED;
                        if ((st = yajl_gen_string(g, (const unsigned char *) k, strlen(k))) !=
                                    yajl_gen_status_ok ||
                            (st = gen_cstring(g, m->items[i].value)) != yajl_gen_status_ok)
                                return st;
                }
                return yajl_gen_map_close(g);
        }
        case SK_ENUM: {
                const char *e = f->enum_names[*(const int *) v];
                return yajl_gen_string(g, (const unsigned char *) e, strlen(e));
        }
        case SK_STRUCT:
                return gen_struct(g, f->type, v, o);
        case SK_PTR:
                return gen_struct(g, f->type, *(void *const *) v, o);
        case SK_JSON: {
                /* (the struct's own tree, shared by its copies, never changed) */
                json_t *j = *(json_t *const *) v;
                return o->shared && (json_is_object(j) || json_is_array(j)) ? gen_shared(g, j)
                                                                            : gen(g, j, o);
        }
        case SK_ARRAY: {
                size_t n = *FIELD_CCOUNT(p, f), sz = f->type->size;
                const char *items = *(char *const *) v;
                if ((st = yajl_gen_array_open(g)) != yajl_gen_status_ok)
                        return st;
                for (size_t i = 0; i < n; i++)
                        if ((st = gen_struct(g, f->type, items + i * sz, o)) != yajl_gen_status_ok)
                                return st;
                return yajl_gen_array_close(g);
        }
        case SK_UNSUPPORTED:
                break;
        }
        return GEN_FAILED; /* (not reached: spec__field_written() said no) */
}

static int compare_fields(const void *a, const void *b) {
        return strcmp((*(const spec_field *const *) a)->name,
                      (*(const spec_field *const *) b)->name);
}

/* The largest number of fields of a type (spec_pod_spec's is about 40). */
#define STRUCT_FIELDS_MAX 128

static yajl_gen_status gen_struct(yajl_gen g, const spec_type *t, const void *p, const opts *o) {
        yajl_gen_status st = yajl_gen_map_open(g);

        if (st != yajl_gen_status_ok)
                return st;
        if (o->sorted) {
                const spec_field *fields[STRUCT_FIELDS_MAX];
                size_t n = 0;
                for (const spec_field *f = t->fields; f->name; f++)
                        if (spec__field_written(f, p)) {
                                if (n == STRUCT_FIELDS_MAX)
                                        return GEN_FAILED;
                                fields[n++] = f;
                        }
                qsort(fields, n, sizeof *fields, compare_fields);
                for (size_t i = 0; i < n; i++)
                        if ((st = gen_field(g, fields[i], p, o)) != yajl_gen_status_ok)
                                return st;
        } else
                for (const spec_field *f = t->fields; f->name; f++)
                        if (spec__field_written(f, p) &&
                            (st = gen_field(g, f, p, o)) != yajl_gen_status_ok)
                                return st;
        return yajl_gen_map_close(g);
}

char *spec_dump_object(const spec_type *t, const void *p, spec_dump_flags flags) {
        opts o = { .sorted = flags & SPEC_DUMP_SORTED, .shared = flags & SPEC_DUMP_SHARED };
        yajl_gen g = yajl_gen_alloc(NULL);
        char *out = g ? gen_text(g, gen_struct(g, t, p, &o), NULL) : NULL;
        json_t *j;

        if (out)
                return out;
        /* (out of memory, a tree deeper than yajl goes, a map key jansson
         * refuses: whatever the tree's way gives) */
        j = spec_encode(t, p);
        out = j ? dump(j, &o, NULL) : NULL;
        json_decref(j);
        return out;
}

static int write_handler(void *data, unsigned char *buffer, size_t size) {
        return tend_buf_add(data, buffer, size) == 0;
}

static int emit_scalar(yaml_emitter_t *e, const char *v, yaml_scalar_style_t style) {
        yaml_event_t ev;

        if (!yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *) v, (int) strlen(v), 1, 1,
                                          style))
                return -ENOMEM;
        return yaml_emitter_emit(e, &ev) ? 0 : -EIO;
}

/* A string is written plain only if reading it back plain gives a string;
 * "8080", "true", "null", "1e3" and "" are quoted. */
static yaml_scalar_style_t string_style(const char *s) {
        int err;
        json_t *j = spec__yaml_resolve_plain(s, strlen(s), &err);

        if (j || err) {
                json_decref(j);
                return YAML_DOUBLE_QUOTED_SCALAR_STYLE;
        }
        return YAML_ANY_SCALAR_STYLE;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(const char *const *) a, *(const char *const *) b);
}

static int emit_node(yaml_emitter_t *e, json_t *j) {
        yaml_event_t ev;
        char buf[64];
        int r;

        switch (json_typeof(j)) {
        case JSON_OBJECT: {
                const char **keys;
                size_t n = json_object_size(j), i = 0;
                const char *key;
                json_t *v;

                if (!yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1,
                                                         YAML_BLOCK_MAPPING_STYLE))
                        return -ENOMEM;
                if (!yaml_emitter_emit(e, &ev))
                        return -EIO;
                keys = new0(const char *, n);
                if (!keys)
                        return -ENOMEM;
                json_object_foreach (j, key, v)
                        keys[i++] = key;
                qsort(keys, n, sizeof(char *), cmp_str);
                r = 0;
                for (i = 0; i < n && r >= 0; i++) {
                        r = emit_scalar(e, keys[i], string_style(keys[i]));
                        if (r >= 0)
                                r = emit_node(e, json_object_get(j, keys[i]));
                }
                free(keys);
                if (r < 0)
                        return r;
                if (!yaml_mapping_end_event_initialize(&ev))
                        return -ENOMEM;
                return yaml_emitter_emit(e, &ev) ? 0 : -EIO;
        }
        case JSON_ARRAY: {
                size_t i;
                json_t *v;

                if (!yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1,
                                                          YAML_BLOCK_SEQUENCE_STYLE))
                        return -ENOMEM;
                if (!yaml_emitter_emit(e, &ev))
                        return -EIO;
                json_array_foreach (j, i, v) {
                        r = emit_node(e, v);
                        if (r < 0)
                                return r;
                }
                if (!yaml_sequence_end_event_initialize(&ev))
                        return -ENOMEM;
                return yaml_emitter_emit(e, &ev) ? 0 : -EIO;
        }
        case JSON_STRING:
                return emit_scalar(e, json_string_value(j), string_style(json_string_value(j)));
        case JSON_INTEGER:
                snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(j));
                return emit_scalar(e, buf, YAML_PLAIN_SCALAR_STYLE);
        case JSON_REAL: {
                double d = json_real_value(j);
                if (isnan(d))
                        snprintf(buf, sizeof buf, ".nan");
                else if (isinf(d))
                        snprintf(buf, sizeof buf, d > 0 ? ".inf" : "-.inf");
                else {
                        snprintf(buf, sizeof buf, "%.17g", d);
                        /* Keep it a float when read back: 1.0, not 1. */
                        if (!strpbrk(buf, ".eE"))
                                strcat(buf, ".0");
                }
                return emit_scalar(e, buf, YAML_PLAIN_SCALAR_STYLE);
        }
        case JSON_TRUE:
                return emit_scalar(e, "true", YAML_PLAIN_SCALAR_STYLE);
        case JSON_FALSE:
                return emit_scalar(e, "false", YAML_PLAIN_SCALAR_STYLE);
        case JSON_NULL:
        default:
                return emit_scalar(e, "null", YAML_PLAIN_SCALAR_STYLE);
        }
}

char *spec_yaml_dump(json_t *j) {
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(64 * 1024 * 1024);
        yaml_emitter_t e;
        yaml_event_t ev;
        int r = -ENOMEM;

        if (!yaml_emitter_initialize(&e))
                return NULL;
        yaml_emitter_set_output(&e, write_handler, &b);
        yaml_emitter_set_unicode(&e, 1);
        yaml_emitter_set_width(&e, -1);
        yaml_emitter_set_indent(&e, 2);

        if (!yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) ||
            !yaml_emitter_emit(&e, &ev))
                goto out;
        if (!yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) ||
            !yaml_emitter_emit(&e, &ev))
                goto out;
        r = emit_node(&e, j);
        if (r < 0)
                goto out;
        r = -EIO;
        if (!yaml_document_end_event_initialize(&ev, 1) || !yaml_emitter_emit(&e, &ev))
                goto out;
        if (!yaml_stream_end_event_initialize(&ev) || !yaml_emitter_emit(&e, &ev))
                goto out;
        r = yaml_emitter_flush(&e) ? 0 : -EIO;
        /* libyaml leaves the last line open after an implicit document end. */
        if (r == 0 && b.len > 0 && tend_buf_str(&b)[b.len - 1] != '\n')
                r = tend_buf_addf(&b, "\n");
out:
        yaml_emitter_delete(&e);
        return r < 0 ? NULL : tend_buf_take(&b);
}
