/* SPDX-License-Identifier: MIT */

#include <stdio.h>

#include "patch.h"
#include "tend/base.h"
#include "tend/spec.h"

/* The most values one JSON patch may add in all (add and replace values,
 * copies): it bounds the work of a patch whatever its ops, as the result is
 * bounded by the manifest limits. */
#define PATCH_MAX_ADDED SPEC_MAX_NODES

/* The result of a patch must be what a manifest may be. */
static json_t *within_limits(json_t *result, char **ret_error) {
        _cleanup_free_ char *problem = NULL;

        if (!result)
                return NULL;
        if (spec_json_check_limits(result, &problem) < 0) {
                json_decref(result);
                *ret_error = problem ? strprintf("the patched object is too large: %s", problem)
                                     : NULL;
                return NULL;
        }
        return result;
}

static json_t *merge(json_t *target, json_t *patch) {
        const char *key;
        json_t *v, *result;

        if (!json_is_object(patch))
                return json_incref(patch);
        result = json_is_object(target) ? json_copy(target) : json_object();
        if (!result)
                return NULL;
        json_object_foreach (patch, key, v) {
                if (json_is_null(v))
                        json_object_del(result, key);
                else {
                        json_t *merged = merge(json_object_get(result, key), v);
                        if (!merged || json_object_set_new(result, key, merged) < 0) {
                                json_decref(result);
                                return NULL;
                        }
                }
        }
        return result;
}

/* The patches below copy each level they change, not the levels under it
 * (a deep copy at each level was the depth times the object): their result
 * shares what it did not change with the target, until it is made its
 * own here, once. */
static json_t *own(json_t *shared) {
        json_t *out = shared ? json_deep_copy(shared) : NULL;

        json_decref(shared);
        return out;
}

json_t *patch_merge(json_t *target, json_t *patch, char **ret_error) {
        *ret_error = NULL;
        return within_limits(own(merge(target, patch)), ret_error);
}

/* ---- RFC 6901 pointers ---------------------------------------------------------------------- */

/* A pointer split into its parent and last token (unescaped). */
typedef struct pointer {
        json_t *parent;
        char *token;
        unsigned depth; /* tokens in the pointer */
} pointer;

/* One reference token, unescaped: ~0 is '~', ~1 is '/', any other '~' is
 * an error (RFC 6901 §3). NULL with *ret_r set. */
static char *unescape(const char *s, size_t n, int *ret_r) {
        char *out = malloc(n + 1), *o = out;

        *ret_r = -ENOMEM;
        if (!out)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                if (s[i] != '~')
                        *o++ = s[i];
                else if (i + 1 < n && (s[i + 1] == '0' || s[i + 1] == '1'))
                        *o++ = s[++i] == '0' ? '~' : '/';
                else {
                        free(out);
                        *ret_r = -EINVAL;
                        return NULL;
                }
        }
        *o = 0;
        return out;
}

/* An array index as RFC 6901 writes it: "0" or digits without a leading
 * zero; -1 otherwise ("-", "01", "-0", "+1", " 1"). */
static int64_t array_index(const char *token) {
        int64_t i;

        if (!*token || (token[0] == '0' && token[1]) ||
            strspn(token, "0123456789") != strlen(token))
                return -1;
        if (safe_atoi64(token, &i) < 0)
                return -1;
        return i;
}

static json_t *child(json_t *node, const char *token) {
        if (json_is_object(node))
                return json_object_get(node, token);
        if (json_is_array(node)) {
                int64_t i = array_index(token);
                if (i < 0 || (size_t) i >= json_array_size(node))
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
        unsigned depth = 1;
        int r;

        if (*path == 0) {
                *ret = (pointer){};
                return 0;
        }
        if (*p != '/')
                return -EINVAL;
        last = strrchr(path, '/');
        while (p < last) {
                const char *next = strchr(p + 1, '/');
                _cleanup_free_ char *tok = unescape(p + 1, (size_t) (next - p - 1), &r);
                if (!tok)
                        return r;
                node = child(node, tok);
                if (!node)
                        return -ENOENT;
                p = next;
                depth++;
        }
        ret->parent = node;
        ret->depth = depth;
        ret->token = unescape(last + 1, strlen(last + 1), &r);
        return ret->token ? 0 : r;
}

static int get_path(json_t *doc, const char *path, json_t **ret) {
        pointer ptr = {};
        int r = resolve(doc, path, &ptr);

        if (r < 0)
                return r;
        *ret = ptr.token ? child(ptr.parent, ptr.token) : doc;
        free(ptr.token);
        return *ret ? 0 : -ENOENT;
}

/* ---- RFC 6902 operations --------------------------------------------------------------------- */

/* Values in j, counting no further than limit + 1; its nesting in *depth. */
static size_t count_values(json_t *j, size_t limit, unsigned level, unsigned *depth) {
        const char *key;
        size_t n = 1, i;
        json_t *v;

        if (level > *depth)
                *depth = level;
        if (json_is_object(j)) {
                json_object_foreach (j, key, v) {
                        if (n > limit || level > SPEC_MAX_DEPTH)
                                break;
                        n += count_values(v, limit - n, level + 1, depth);
                }
        } else if (json_is_array(j))
                json_array_foreach (j, i, v) {
                        if (n > limit || level > SPEC_MAX_DEPTH)
                                break;
                        n += count_values(v, limit - n, level + 1, depth);
                }
        return n;
}

typedef struct patch_state {
        json_t *doc;
        size_t added; /* values added so far */
        char *error;  /* what went wrong, when it is not the location */
} patch_state;

/* Whether value may go at ptr: the nesting and the work stay bounded. */
static int admit(patch_state *st, const pointer *ptr, json_t *value) {
        unsigned depth = 0;
        size_t n = count_values(value, PATCH_MAX_ADDED - st->added, 1, &depth);

        if (st->added + n > PATCH_MAX_ADDED) {
                st->error = strprintf("the patch adds more than %d values in all", PATCH_MAX_ADDED);
                return -E2BIG;
        }
        if (ptr->depth + depth > SPEC_MAX_DEPTH) {
                st->error = strprintf("the patched object would nest deeper than %d levels",
                                      SPEC_MAX_DEPTH);
                return -E2BIG;
        }
        st->added += n;
        return 0;
}

/* add: value takes ownership; counted against the bounds when counted. */
static int op_add(patch_state *st, const char *path, json_t *value, bool counted) {
        pointer ptr = {};
        int r = resolve(st->doc, path, &ptr);

        if (r >= 0 && counted)
                r = admit(st, &ptr, value);
        if (r < 0) {
                free(ptr.token);
                json_decref(value);
                return r;
        }
        if (!ptr.token) {
                json_decref(st->doc);
                st->doc = value;
                return 0;
        }
        if (json_is_object(ptr.parent)) {
                if (!json_object_get(ptr.parent, ptr.token) &&
                    json_object_size(ptr.parent) >= SPEC_MAX_ITEMS) {
                        st->error = strprintf("the patched object would have a mapping of more "
                                              "than %d keys",
                                              SPEC_MAX_ITEMS);
                        json_decref(value);
                        r = -E2BIG;
                } else
                        r = json_object_set_new(ptr.parent, ptr.token, value) < 0 ? -ENOMEM : 0;
        } else if (json_is_array(ptr.parent)) {
                size_t n = json_array_size(ptr.parent);
                int64_t i = streq(ptr.token, "-") ? (int64_t) n : array_index(ptr.token);
                if (i < 0 || (size_t) i > n) {
                        json_decref(value);
                        r = -ENOENT;
                } else if (n >= SPEC_MAX_ITEMS) {
                        st->error = strprintf("the patched object would have a list of more "
                                              "than %d entries",
                                              SPEC_MAX_ITEMS);
                        json_decref(value);
                        r = -E2BIG;
                } else
                        r = json_array_insert_new(ptr.parent, (size_t) i, value) < 0 ? -ENOMEM : 0;
        } else {
                json_decref(value);
                r = -ENOENT;
        }
        free(ptr.token);
        return r;
}

/* remove: the value removed in *ret_removed (a reference), if asked. */
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
        else
                json_array_remove(ptr.parent, (size_t) array_index(ptr.token));
        free(ptr.token);
        return 0;
}

/* What went wrong at pointer p, when the operation did not say. */
static int located(patch_state *st, int r, const char *p) {
        if (r < 0 && !st->error)
                st->error = r == -ENOENT   ? strprintf("no value at %s", p)
                            : r == -EINVAL ? strprintf("%s is not a JSON pointer (RFC 6901: "
                                                       "\"/a/0/b~1c\", ~0 for '~', ~1 for '/')",
                                                       p)
                                           : NULL;
        return r;
}

static int apply_op(patch_state *st, const char *name, const char *path, const char *from,
                    json_t *value) {
        json_t *v;
        int r;

        if (streq(name, "add"))
                return located(st, op_add(st, path, json_deep_copy(value), true), path);
        if (streq(name, "replace")) {
                if ((r = get_path(st->doc, path, &v)) < 0 ||
                    (*path && (r = op_remove(st->doc, path, NULL)) < 0))
                        return located(st, r, path);
                return located(st, op_add(st, path, json_deep_copy(value), true), path);
        }
        if (streq(name, "remove"))
                return located(st, op_remove(st->doc, path, NULL), path);
        if (streq(name, "move")) {
                if (!streq(from, path) && strncmp(from, path, strlen(from)) == 0 &&
                    path[strlen(from)] == '/') {
                        st->error = strprintf("cannot move %s into itself (%s)", from, path);
                        return -EINVAL;
                }
                if ((r = op_remove(st->doc, from, &v)) < 0)
                        return located(st, r, from);
                return located(st, op_add(st, path, v, false), path);
        }
        if (streq(name, "copy")) {
                if ((r = get_path(st->doc, from, &v)) < 0)
                        return located(st, r, from);
                return located(st, op_add(st, path, json_deep_copy(v), true), path);
        }
        /* test */
        if ((r = get_path(st->doc, path, &v)) < 0)
                return located(st, r, path);
        if (!json_equal(v, value)) {
                st->error = strprintf("test failed at %s", path);
                return -EINVAL;
        }
        return 0;
}

static bool one_of(const char *s, const char *const *set) {
        for (; *set; set++)
                if (streq(s, *set))
                        return true;
        return false;
}

json_t *patch_json(json_t *target, json_t *ops, char **ret_error) {
        patch_state st = { .doc = json_deep_copy(target) };
        json_t *op;
        size_t i;

        *ret_error = NULL;
        if (!st.doc)
                return NULL;
        if (!json_is_array(ops)) {
                json_decref(st.doc);
                *ret_error = strdup("a JSON patch must be a list of operations");
                return NULL;
        }
        json_array_foreach (ops, i, op) {
                const char *name = json_string_value(json_object_get(op, "op"));
                const char *path = json_string_value(json_object_get(op, "path"));
                const char *from = json_string_value(json_object_get(op, "from"));
                json_t *value = json_object_get(op, "value");
                bool move = name && (streq(name, "move") || streq(name, "copy"));
                int r;

                if (!name || !path) {
                        *ret_error = strprintf("operation %zu: needs \"op\" and \"path\"", i);
                        goto fail;
                }
                if (!one_of(name, (const char *const[]){ "add", "replace", "remove", "move", "copy",
                                                         "test", NULL })) {
                        *ret_error = strprintf("operation %zu: unknown op \"%s\"", i, name);
                        goto fail;
                }
                if (one_of(name, (const char *const[]){ "add", "replace", "test", NULL }) &&
                    !value) {
                        *ret_error = strprintf("operation %zu: %s needs a value", i, name);
                        goto fail;
                }
                if (move && !from) {
                        *ret_error = strprintf("operation %zu: %s needs \"from\"", i, name);
                        goto fail;
                }
                r = apply_op(&st, name, path, from, value);
                if (r < 0) {
                        *ret_error = strprintf("operation %zu (%s): %s", i, name,
                                               st.error ?: strerror(-r));
                        free(st.error);
                        goto fail;
                }
        }
        return within_limits(st.doc, ret_error);
fail:
        json_decref(st.doc);
        return NULL;
}

/* ---- strategic merge patch ----------------------------------------------------------------- */

/*
 * Kubernetes' strategic merge patch for tend's objects: a merge patch in
 * which the lists that have a merge key (spec_list_merge_key: containers and
 * env, by name) merge element by element, and the directives kubectl sends
 * are honoured — $patch (replace, delete, merge) on a map or a list
 * element, $setElementOrder/LIST, $deleteFromPrimitiveList/LIST and
 * $retainKeys. Any other "$" key is refused. Other lists are replaced.
 */

/* Every list operation below looks elements up by a hash of their key (or
 * value), never by scanning: a patch at the manifest limits (lists of
 * SPEC_MAX_ITEMS) stays linear. */

/* A value as a hash key: equal values (json_equal) give equal keys. NULL:
 * out of memory. */
static char *string_key(const char *s) {
        return strprintf("s%s", s);
}

static char *value_key(json_t *v) {
        _cleanup_free_ char *js = NULL;

        if (json_is_string(v))
                return string_key(json_string_value(v));
        if (json_is_integer(v))
                return strprintf("i%" JSON_INTEGER_FORMAT, json_integer_value(v));
        js = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        return js ? strprintf("j%s", js) : NULL;
}

/* The values of a list (the values themselves, or their key field), each
 * to its place (position + 1; the last of duplicates, as a scan from the
 * start found it): a set, and an index. Elements without the key are left
 * out. NULL: out of memory. */
static tend_hashmap *value_set(json_t *list, const char *key) {
        tend_hashmap *h = tend_hashmap_new();
        json_t *x;
        size_t i;

        json_array_foreach (list, i, x) {
                json_t *v = key ? json_object_get(x, key) : x;
                _cleanup_free_ char *k = v ? value_key(v) : NULL;
                if (!h || (v && (!k || tend_hashmap_put(h, k, (void *) (i + 1), NULL) < 0)))
                        return tend_hashmap_free(h);
        }
        return h;
}

static bool in_set(tend_hashmap *h, json_t *v, bool *oom) {
        _cleanup_free_ char *k = v ? value_key(v) : NULL;

        if (v && !k)
                *oom = true;
        return k && tend_hashmap_get(h, k);
}

typedef struct smp {
        char *error;
        bool oom;
} smp;

static json_t *smp_fail(smp *c, const char *where, const char *what) {
        if (!c->error && !c->oom) {
                c->error = strprintf("%s: %s", where, what);
                c->oom = !c->error;
        }
        return NULL;
}

/* A copy of a patch value with its directives taken out (what a new list
 * element or a replaced map becomes). */
static json_t *strip_directives(json_t *v) {
        const char *k;
        json_t *x, *out;
        size_t i;

        if (json_is_array(v)) {
                out = json_array();
                json_array_foreach (v, i, x)
                        if (!out || json_array_append_new(out, strip_directives(x)) < 0)
                                return json_decref(out), NULL;
                return out;
        }
        if (!json_is_object(v))
                return json_incref(v);
        out = json_object();
        json_object_foreach (v, k, x)
                if (out && k[0] != '$' && json_object_set_new(out, k, strip_directives(x)) < 0)
                        return json_decref(out), NULL;
        return out;
}

static json_t *smp_map(smp *c, json_t *target, json_t *patch, bool *ret_delete);

/* The list without the elements marked gone. */
static json_t *without(json_t *list, json_t *gone) {
        json_t *out = json_array(), *x;
        size_t i;

        json_array_foreach (list, i, x)
                if (out && x != gone && json_array_append(out, x) < 0)
                        out = (json_decref(out), NULL);
        json_decref(list);
        return out;
}

static json_t *smp_list(smp *c, const char *field, const char *key, json_t *target, json_t *patch) {
        _cleanup_(tend_hashmap_freep) tend_hashmap *at = NULL; /* where each key is */
        _cleanup_(json_decrefp) json_t *gone = json_object();  /* a deleted element's place */
        json_t *out = json_is_array(target) ? json_copy(target) : json_array(), *e;
        bool deleted = false;
        size_t i;

        if (!out || !gone || !(at = value_set(out, key)))
                return json_decref(out), NULL;
        json_array_foreach (patch, i, e) {
                const char *directive = json_string_value(json_object_get(e, "$patch"));
                json_t *k = json_object_get(e, key), *merged;
                _cleanup_free_ char *vk = NULL;
                size_t pos;
                bool del = false;

                if (!json_is_object(e))
                        return json_decref(out),
                               smp_fail(c, field, "the elements of this list are objects");
                if (streq_ptr(directive, "replace")) {
                        /* the whole list is what the patch lists */
                        json_t *rest = json_array();
                        json_t *x;
                        size_t j;
                        json_decref(out);
                        json_array_foreach (patch, j, x)
                                if (rest && x != e &&
                                    json_array_append_new(rest, strip_directives(x)) < 0)
                                        rest = (json_decref(rest), NULL);
                        return rest;
                }
                if (!k)
                        return json_decref(out), smp_fail(c, field, "an element has no merge key");
                /* a key that is null, a list or an object names nothing: it
                 * would be appended again at every patch */
                if (!json_is_string(k) && !json_is_integer(k))
                        return json_decref(out),
                               smp_fail(c, field,
                                        "an element's merge key is not a string or a number");
                if (!(vk = value_key(k)))
                        return json_decref(out), NULL;
                pos = (size_t) tend_hashmap_get(at, vk); /* 0: none */
                if (streq_ptr(directive, "delete")) {
                        if (pos) {
                                (void) tend_hashmap_remove(at, vk);
                                if (json_array_set(out, pos - 1, gone) < 0)
                                        return json_decref(out), NULL;
                                deleted = true;
                        }
                        continue;
                }
                merged = smp_map(c, pos ? json_array_get(out, pos - 1) : NULL, e, &del);
                if (!merged)
                        return json_decref(out), NULL;
                if (pos ? json_array_set_new(out, pos - 1, merged) < 0
                        : json_array_append_new(out, merged) < 0 ||
                                    tend_hashmap_put(at, vk, (void *) json_array_size(out), NULL) <
                                            0)
                        return json_decref(out), NULL;
        }
        return deleted ? without(out, gone) : out;
}

/* $setElementOrder/LIST: the listed elements first, in that order (each
 * takes the first of its equals not yet taken), then the others as they
 * were. */
static int smp_order(json_t *list, json_t *order, const char *key) {
        _cleanup_(tend_hashmap_freep) tend_hashmap *first = tend_hashmap_new();
        _cleanup_free_ size_t *next = NULL;
        _cleanup_free_ bool *taken = NULL;
        _cleanup_(json_decrefp) json_t *sorted = json_array();
        size_t n = json_array_size(list), i;
        json_t *o;

        if (!json_is_array(list) || !json_is_array(order))
                return 0;
        next = new0(size_t, n + 1);
        taken = new0(bool, n + 1);
        if (!first || !next || !taken || !sorted)
                return -ENOMEM;
        /* first[key]: the first element of that key (position + 1), and
         * next[i] the one after element i of the same key */
        for (i = n; i-- > 0;) {
                json_t *x = json_array_get(list, i), *v = key ? json_object_get(x, key) : x;
                _cleanup_free_ char *vk = v ? value_key(v) : NULL;
                void *old = NULL;
                if (!v)
                        continue;
                if (!vk || tend_hashmap_put(first, vk, (void *) (i + 1), &old) < 0)
                        return -ENOMEM;
                next[i] = (size_t) old;
        }
        json_array_foreach (order, i, o) {
                json_t *want = key ? json_object_get(o, key) : o;
                _cleanup_free_ char *vk = want ? value_key(want) : NULL;
                size_t pos;
                if (want && !vk)
                        return -ENOMEM;
                if (!want || !(pos = (size_t) tend_hashmap_get(first, vk)))
                        continue;
                if (next[pos - 1])
                        (void) tend_hashmap_put(first, vk, (void *) next[pos - 1], NULL);
                else
                        (void) tend_hashmap_remove(first, vk);
                taken[pos - 1] = true;
                if (json_array_append(sorted, json_array_get(list, pos - 1)) < 0)
                        return -ENOMEM;
        }
        for (i = 0; i < n; i++)
                if (!taken[i] && json_array_append(sorted, json_array_get(list, i)) < 0)
                        return -ENOMEM;
        if (json_array_clear(list) < 0 || json_array_extend(list, sorted) < 0)
                return -ENOMEM;
        return 0;
}

static json_t *smp_map(smp *c, json_t *target, json_t *patch, bool *ret_delete) {
        const char *directive = json_string_value(json_object_get(patch, "$patch")), *k;
        json_t *out, *v, *retain = json_object_get(patch, "$retainKeys");

        *ret_delete = false;
        if (directive && !streq(directive, "replace") && !streq(directive, "delete") &&
            !streq(directive, "merge"))
                return smp_fail(c, "$patch", "expected replace, delete or merge");
        if (streq_ptr(directive, "delete")) {
                *ret_delete = true;
                return json_null();
        }
        if (streq_ptr(directive, "replace"))
                return strip_directives(patch);
        out = json_is_object(target) ? json_copy(target) : json_object();
        if (!out)
                return NULL;
        json_object_foreach (patch, k, v) {
                const char *field;
                bool del = false;
                json_t *merged;

                if (streq(k, "$patch") || streq(k, "$retainKeys") ||
                    startswith(k, "$setElementOrder/"))
                        continue;
                if ((field = startswith(k, "$deleteFromPrimitiveList/"))) {
                        json_t *list = json_object_get(out, field), *kept, *x;
                        _cleanup_(tend_hashmap_freep) tend_hashmap *drop = NULL;
                        bool oom = false;
                        size_t i;
                        if (!json_is_array(v))
                                return json_decref(out), smp_fail(c, k, "a list is expected");
                        if (!json_is_array(list))
                                continue;
                        if (!(drop = value_set(v, NULL)) || !(kept = json_array()))
                                return json_decref(out), NULL;
                        json_array_foreach (list, i, x)
                                if (!in_set(drop, x, &oom) && json_array_append(kept, x) < 0)
                                        oom = true;
                        if (oom || json_object_set_new(out, field, kept) < 0)
                                return json_decref(out), NULL;
                        continue;
                }
                if (k[0] == '$')
                        return json_decref(out),
                               smp_fail(c, k, "not a strategic merge patch directive");
                if (json_is_null(v)) {
                        json_object_del(out, k);
                        continue;
                }
                if (json_is_object(v))
                        merged = smp_map(c, json_object_get(out, k), v, &del);
                else if (json_is_array(v) && spec_list_merge_key(k))
                        merged = smp_list(c, k, spec_list_merge_key(k), json_object_get(out, k), v);
                else
                        merged = strip_directives(v); /* atomic */
                if (!merged)
                        return json_decref(out), NULL;
                if (del) {
                        json_object_del(out, k);
                        continue;
                }
                if (json_object_set_new(out, k, merged) < 0)
                        return json_decref(out), NULL;
        }
        json_object_foreach (patch, k, v) {
                const char *field = startswith(k, "$setElementOrder/");
                json_t *list = field ? json_object_get(out, field) : NULL;
                if (!json_is_array(list))
                        continue;
                /* reordered in a copy: the list may be the target's */
                if (!(list = json_copy(list)) || json_object_set_new(out, field, list) < 0 ||
                    smp_order(list, v, spec_list_merge_key(field)) < 0)
                        return json_decref(out), NULL;
        }
        if (retain) {
                _cleanup_(tend_hashmap_freep) tend_hashmap *keep = NULL;
                _cleanup_free_ char *sk = NULL;
                void *tmp;
                if (!json_is_array(retain))
                        return json_decref(out), smp_fail(c, "$retainKeys", "a list is expected");
                if (!(keep = value_set(retain, NULL)))
                        return json_decref(out), NULL;
                json_object_foreach_safe(out, tmp, k, v) {
                        free(sk);
                        if (!(sk = string_key(k)))
                                return json_decref(out), NULL;
                        if (!tend_hashmap_get(keep, sk))
                                json_object_del(out, k);
                }
        }
        return out;
}

json_t *patch_strategic(json_t *target, json_t *patch, char **ret_error) {
        smp c = {};
        bool del = false;
        json_t *out;

        *ret_error = NULL;
        out = smp_map(&c, target, patch, &del);
        if (out && del) {
                json_decref(out);
                out = smp_fail(&c, "$patch", "delete of the whole object: use DELETE");
        }
        if (!out) {
                *ret_error = c.error;
                return NULL;
        }
        return within_limits(own(out), ret_error);
}
