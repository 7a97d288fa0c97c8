/* SPDX-License-Identifier: MIT */

#include <stdio.h>

#include "patch.h"
#include "tend/base.h"

json_t *patch_merge(json_t *target, json_t *patch) {
        const char *key;
        json_t *v, *result;

        if (!json_is_object(patch))
                return json_incref(patch);
        result = json_is_object(target) ? json_deep_copy(target) : json_object();
        if (!result)
                return NULL;
        json_object_foreach (patch, key, v) {
                if (json_is_null(v))
                        json_object_del(result, key);
                else {
                        json_t *merged = patch_merge(json_object_get(result, key), v);
                        if (!merged || json_object_set_new(result, key, merged) < 0) {
                                json_decref(result);
                                return NULL;
                        }
                }
        }
        return result;
}

/* Splits a JSON pointer into its parent and last token (unescaped). */
typedef struct pointer {
        json_t *parent;
        char *token;
} pointer;

static char *unescape(const char *s, size_t n) {
        char *out = malloc(n + 1), *o = out;
        if (!out)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                if (s[i] == '~' && i + 1 < n && (s[i + 1] == '0' || s[i + 1] == '1')) {
                        *o++ = s[i + 1] == '0' ? '~' : '/';
                        i++;
                } else
                        *o++ = s[i];
        }
        *o = 0;
        return out;
}

static json_t *child(json_t *node, const char *token) {
        if (json_is_object(node))
                return json_object_get(node, token);
        if (json_is_array(node)) {
                int64_t i;
                if (safe_atoi64(token, &i) < 0 || i < 0 || (size_t) i >= json_array_size(node))
                        return NULL;
                return json_array_get(node, (size_t) i);
        }
        return NULL;
}

/* Resolves everything but the last token. "" is the whole document (no
 * parent). */
static int resolve(json_t *doc, const char *path, pointer *ret) {
        const char *p = path, *last;
        json_t *node = doc;

        if (*path == 0) {
                *ret = (pointer){};
                return 0;
        }
        if (*p != '/')
                return -EINVAL;
        last = strrchr(path, '/');
        while (p < last) {
                const char *next = strchr(p + 1, '/');
                _cleanup_free_ char *tok = unescape(p + 1, (size_t) (next - p - 1));
                if (!tok)
                        return -ENOMEM;
                node = child(node, tok);
                if (!node)
                        return -ENOENT;
                p = next;
        }
        ret->parent = node;
        ret->token = unescape(last + 1, strlen(last + 1));
        return ret->token ? 0 : -ENOMEM;
}

static json_t *get_path(json_t *doc, const char *path) {
        pointer ptr = {};
        json_t *v;
        if (resolve(doc, path, &ptr) < 0)
                return NULL;
        if (!ptr.token)
                return doc;
        v = child(ptr.parent, ptr.token);
        free(ptr.token);
        return v;
}

/* add: value takes ownership. */
static int op_add(json_t **doc, const char *path, json_t *value) {
        pointer ptr = {};
        int r = resolve(*doc, path, &ptr);

        if (r < 0) {
                json_decref(value);
                return r;
        }
        if (!ptr.token) {
                json_decref(*doc);
                *doc = value;
                return 0;
        }
        if (json_is_object(ptr.parent))
                r = json_object_set_new(ptr.parent, ptr.token, value) < 0 ? -ENOMEM : 0;
        else if (json_is_array(ptr.parent)) {
                int64_t i;
                size_t n = json_array_size(ptr.parent);
                if (streq(ptr.token, "-"))
                        r = json_array_append_new(ptr.parent, value) < 0 ? -ENOMEM : 0;
                else if (safe_atoi64(ptr.token, &i) < 0 || i < 0 || (size_t) i > n) {
                        json_decref(value);
                        r = -ENOENT;
                } else
                        r = json_array_insert_new(ptr.parent, (size_t) i, value) < 0 ? -ENOMEM : 0;
        } else {
                json_decref(value);
                r = -ENOENT;
        }
        free(ptr.token);
        return r;
}

static int op_remove(json_t *doc, const char *path, json_t **ret_removed) {
        pointer ptr = {};
        int r = resolve(doc, path, &ptr);
        json_t *v;

        if (r < 0)
                return r;
        if (!ptr.token)
                return -EINVAL; /* the whole document cannot be removed */
        v = child(ptr.parent, ptr.token);
        if (!v) {
                free(ptr.token);
                return -ENOENT;
        }
        if (ret_removed)
                *ret_removed = json_incref(v);
        if (json_is_object(ptr.parent))
                json_object_del(ptr.parent, ptr.token);
        else {
                int64_t i;
                (void) safe_atoi64(ptr.token, &i);
                json_array_remove(ptr.parent, (size_t) i);
        }
        free(ptr.token);
        return 0;
}

json_t *patch_json(json_t *target, json_t *ops, char **ret_error) {
        json_t *doc = json_deep_copy(target), *op;
        size_t i;

        *ret_error = NULL;
        if (!doc)
                return NULL;
        if (!json_is_array(ops)) {
                json_decref(doc);
                *ret_error = strdup("a JSON patch must be a list of operations");
                return NULL;
        }
        json_array_foreach (ops, i, op) {
                const char *name = json_string_value(json_object_get(op, "op"));
                const char *path = json_string_value(json_object_get(op, "path"));
                const char *from = json_string_value(json_object_get(op, "from"));
                json_t *value = json_object_get(op, "value");
                int r;

                if (!name || !path) {
                        *ret_error = strprintf("operation %zu: needs \"op\" and \"path\"", i);
                        goto fail;
                }
                if (streq(name, "add") || streq(name, "replace")) {
                        if (!value) {
                                *ret_error = strprintf("operation %zu: %s needs a value", i, name);
                                goto fail;
                        }
                        if (streq(name, "replace") && !get_path(doc, path)) {
                                *ret_error = strprintf("operation %zu: replace: no value at %s", i,
                                                       path);
                                goto fail;
                        }
                        if (streq(name, "replace") && *path)
                                (void) op_remove(doc, path, NULL);
                        r = op_add(&doc, path, json_deep_copy(value));
                } else if (streq(name, "remove"))
                        r = op_remove(doc, path, NULL);
                else if (streq(name, "move") || streq(name, "copy")) {
                        json_t *v = from ? get_path(doc, from) : NULL;
                        if (!v) {
                                *ret_error = strprintf("operation %zu: %s: no value at %s", i, name,
                                                       strna(from));
                                goto fail;
                        }
                        v = json_deep_copy(v);
                        if (streq(name, "move") && (r = op_remove(doc, from, NULL)) < 0) {
                                json_decref(v);
                                goto bad;
                        }
                        r = op_add(&doc, path, v);
                } else if (streq(name, "test")) {
                        json_t *v = get_path(doc, path);
                        if (!v || !value || !json_equal(v, value)) {
                                *ret_error = strprintf("operation %zu: test failed at %s", i, path);
                                goto fail;
                        }
                        r = 0;
                } else {
                        *ret_error = strprintf("operation %zu: unknown op \"%s\"", i, name);
                        goto fail;
                }
bad:
                if (r < 0) {
                        *ret_error = strprintf("operation %zu: %s %s: %s", i, name, path,
                                               r == -ENOENT   ? "no such location"
                                               : r == -EINVAL ? "invalid path"
                                                              : strerror(-r));
                        goto fail;
                }
        }
        return doc;
fail:
        json_decref(doc);
        return NULL;
}
