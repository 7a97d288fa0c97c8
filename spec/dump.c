/* SPDX-License-Identifier: MIT */

/* JSON trees → text: canonical JSON (jansson), compact JSON (yajl's
 * generator) and YAML (libyaml's emitter). */

#include <math.h>
#include <stdio.h>
#include <yajl/yajl_gen.h>
#include <yaml.h>

#include "spec-internal.h"

char *spec_json_dump_canonical(json_t *j) {
        return json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}

/* The tree into yajl's generator, in its order. A real is written as
 * jansson writes it (yajl has no such format), as a number. */
static yajl_gen_status gen(yajl_gen g, json_t *j) {
        yajl_gen_status st;
        const char *k;
        json_t *v;
        size_t i;

        switch (json_typeof(j)) {
        case JSON_OBJECT:
                if ((st = yajl_gen_map_open(g)) != yajl_gen_status_ok)
                        return st;
                json_object_foreach (j, k, v)
                        if ((st = yajl_gen_string(g, (const unsigned char *) k, strlen(k))) !=
                                    yajl_gen_status_ok ||
                            (st = gen(g, v)) != yajl_gen_status_ok)
                                return st;
                return yajl_gen_map_close(g);
        case JSON_ARRAY:
                if ((st = yajl_gen_array_open(g)) != yajl_gen_status_ok)
                        return st;
                json_array_foreach (j, i, v)
                        if ((st = gen(g, v)) != yajl_gen_status_ok)
                                return st;
                return yajl_gen_array_close(g);
        case JSON_STRING:
                return yajl_gen_string(g, (const unsigned char *) json_string_value(j),
                                       json_string_length(j));
        case JSON_INTEGER:
                return yajl_gen_integer(g, json_integer_value(j));
        case JSON_REAL: {
                _cleanup_free_ char *text = json_dumps(j, JSON_ENCODE_ANY);
                return text ? yajl_gen_number(g, text, strlen(text)) : yajl_gen_generation_complete;
        }
        case JSON_TRUE:
        case JSON_FALSE:
                return yajl_gen_bool(g, json_is_true(j));
        case JSON_NULL:
                return yajl_gen_null(g);
        }
        return yajl_gen_generation_complete; /* (not reached) */
}

char *spec_json_dump(json_t *j) {
        yajl_gen g = yajl_gen_alloc(NULL);
        const unsigned char *buf;
        size_t len;
        char *out = NULL;

        if (g && gen(g, j) == yajl_gen_status_ok &&
            yajl_gen_get_buf(g, &buf, &len) == yajl_gen_status_ok)
                out = strndup((const char *) buf, len);
        if (g)
                yajl_gen_free(g);
        /* (a tree deeper than yajl goes, 128: as jansson writes it) */
        return out ?: json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
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
