/* SPDX-License-Identifier: MIT */

/*
 * Field ownership for server-side apply (tend/fields.h): the object
 * format's, beside the codec, as Kubernetes keeps it beside its types
 * (structured-merge-diff); the API's server-side apply calls it.
 *
 * A set of fields is a tree of JSON objects keyed as fieldsV1 keys them:
 * "f:<field>", "k:<key as JSON>" for an item of a list with a merge key,
 * "v:<value>" and "i:<index>" (read, never made: tend has no such lists).
 * Inside this file a node is a member of the set when it holds ".": {}; in
 * fieldsV1 a leaf member is written {} and "." is kept only beside
 * children. set_import() and set_export() convert.
 */

#include <pthread.h>
#include <stdio.h>

#include "tend/base.h"
#include "tend/fields.h"
#include "tend/spec.h"

/* ---- the schema: how each field merges ---- */

/* spec.selector is atomic in Kubernetes (a LabelSelector is one value). */
static bool atomic_object(const char *field) {
        return streq_ptr(field, "selector");
}

static const char *list_key(const char *field) {
        return field ? spec_list_merge_key(field) : NULL;
}

static bool granular_object(json_t *v, const char *field) {
        return json_is_object(v) && !atomic_object(field);
}

static bool keyed_list(json_t *v, const char *field) {
        return json_is_array(v) && list_key(field);
}

/* "k:{"name":"web"}" for an item of a keyed list; NULL if it has no key.
 * A container's ports are keyed by containerPort and protocol, as
 * Kubernetes keys them, the protocol TCP where an item leaves it out (its
 * default): k:{"containerPort":80,"protocol":"TCP"}, whoever wrote it.
 * (Written out as jansson writes the object compact with sorted keys, for
 * a key value at a time: this is made for every item of every list
 * compared.) */
static char *item_key(json_t *item, const char *key) {
        json_t *kv = json_object_get(item, key), *proto;
        _cleanup_free_ char *v = NULL, *p = NULL;

        if (!kv || json_is_null(kv) || json_is_object(kv) || json_is_array(kv))
                return NULL;
        v = json_dumps(kv, JSON_ENCODE_ANY | JSON_COMPACT);
        if (!v)
                return NULL;
        if (!streq(key, "containerPort"))
                return strprintf("k:{\"%s\":%s}", key, v);
        proto = json_object_get(item, "protocol");
        p = json_is_string(proto) ? json_dumps(proto, JSON_ENCODE_ANY | JSON_COMPACT)
                                  : strdup("\"TCP\"");
        return p ? strprintf("k:{\"containerPort\":%s,\"protocol\":%s}", v, p) : NULL;
}

/* ---- sets ---- */

/* The "." of a member: one shared {}, never changed (a set has one per
 * field, and an allocation each was most of a large object's cost). Made
 * once, whichever thread comes first (the pool's too: api/prep.c). */
static json_t *shared_dot;

static void make_dot(void) {
        shared_dot = json_object();
}

static json_t *dot(void) {
        static pthread_once_t once = PTHREAD_ONCE_INIT;

        (void) pthread_once(&once, make_dot);
        return json_incref(shared_dot);
}

static int set_dot(json_t *n) {
        json_t *d = dot();
        return d && json_object_set_new(n, ".", d) >= 0 ? 0 : -ENOMEM;
}

static bool is_member(json_t *n) {
        return json_object_get(n, ".") != NULL;
}

static bool set_is_empty(json_t *n) {
        return !n || json_object_size(n) == 0;
}

/* The child node for key, made if absent. */
static json_t *child(json_t *n, const char *key) {
        json_t *c = json_object_get(n, key);

        if (!c && (!(c = json_object()) || json_object_set_new(n, key, c) < 0))
                return NULL;
        return c;
}

/* Children that ended up empty are dropped (bottom up). */
static void set_clean(json_t *n) {
        const char *k;
        json_t *c;
        void *tmp;

        json_object_foreach_safe(n, tmp, k, c) {
                if (streq(k, "."))
                        continue;
                set_clean(c);
                if (set_is_empty(c))
                        json_object_del(n, k);
        }
}

static int set_union_into(json_t *dst, json_t *src) {
        const char *k;
        json_t *c, *d;

        json_object_foreach (src, k, c) {
                if (streq(k, ".")) {
                        if (set_dot(dst) < 0)
                                return -ENOMEM;
                        continue;
                }
                if (!(d = child(dst, k)) || set_union_into(d, c) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* dst ∪= src, src's subtrees that dst lacks taken as they are, not copied:
 * src must not be used after (but to be freed). */
static int set_union_move(json_t *dst, json_t *src) {
        const char *k;
        json_t *c, *d;

        json_object_foreach (src, k, c) {
                d = json_object_get(dst, k);
                if (streq(k, ".") || !d) {
                        if (json_object_set(dst, k, c) < 0)
                                return -ENOMEM;
                } else if (set_union_move(d, c) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* a − b, or a ∩ b (a new set; NULL: out of memory). */
static json_t *set_op(json_t *a, json_t *b, bool intersect) {
        json_t *out = json_object(), *c, *bc;
        const char *k;

        if (!out)
                return NULL;
        json_object_foreach (a, k, c) {
                json_t *r;
                if (streq(k, ".")) {
                        if (intersect == is_member(b) && set_dot(out) < 0)
                                goto oom;
                        continue;
                }
                bc = json_object_get(b, k);
                if (!bc && intersect)
                        continue;
                r = bc ? set_op(c, bc, intersect) : json_deep_copy(c);
                if (!r)
                        goto oom;
                if (set_is_empty(r)) {
                        json_decref(r);
                        continue;
                }
                if (json_object_set_new(out, k, r) < 0)
                        goto oom;
        }
        return out;
oom:
        json_decref(out);
        return NULL;
}

static json_t *set_minus(json_t *a, json_t *b) {
        return set_op(a, b, false);
}

static json_t *set_intersect(json_t *a, json_t *b) {
        return set_op(a, b, true);
}

/* fieldsV1 → a set: a leaf {} is a member. */
static json_t *set_import(json_t *f) {
        json_t *out = json_object(), *c;
        const char *k;

        if (!out)
                return NULL;
        if (json_object_size(f) == 0)
                return set_dot(out) < 0 ? json_decref(out), NULL : out;
        json_object_foreach (f, k, c) {
                json_t *r = streq(k, ".") ? dot() : set_import(c);
                if (!r || json_object_set_new(out, k, r) < 0)
                        return json_decref(out), NULL;
        }
        return out;
}

/* A set → fieldsV1: a member without children is {}. */
static json_t *set_export(json_t *n) {
        json_t *out = json_object(), *c;
        const char *k;

        if (!out)
                return NULL;
        if (json_object_size(n) == 1 && is_member(n))
                return out;
        json_object_foreach (n, k, c) {
                json_t *r = streq(k, ".") ? json_object() : set_export(c);
                if (!r || json_object_set_new(out, k, r) < 0)
                        return json_decref(out), NULL;
        }
        return out;
}

/* ---- the set of a value ---- */

static int set_of_object(json_t *v, json_t *n, char **ret_error);

/* The fields of value v (named field) into node n. */
static int set_of(json_t *v, const char *field, json_t *n, char **ret_error) {
        const char *key = list_key(field);
        size_t i;
        json_t *item;

        if (granular_object(v, field) && json_object_size(v) > 0)
                return set_of_object(v, n, ret_error);
        if (keyed_list(v, field) && json_array_size(v) > 0) {
                json_array_foreach (v, i, item) {
                        _cleanup_free_ char *k = item_key(item, key);
                        json_t *c;
                        if (!k) {
                                *ret_error = strprintf("%s[%zu]: an element of a list merged by "
                                                       "%s must have its %s",
                                                       field, i, key, key);
                                return -EINVAL;
                        }
                        if (json_object_get(n, k)) {
                                *ret_error = strprintf("%s[%zu]: a duplicate %s: %s", field, i, key,
                                                       k + 2);
                                return -EINVAL;
                        }
                        if (!(c = child(n, k)) || set_dot(c) < 0)
                                return -ENOMEM;
                        int r = set_of_object(item, c, ret_error);
                        if (r < 0)
                                return r;
                }
                return 0;
        }
        return set_dot(n);
}

static int set_of_object(json_t *v, json_t *n, char **ret_error) {
        const char *k;
        json_t *c;

        json_object_foreach (v, k, c) {
                _cleanup_free_ char *fk = strprintf("f:%s", k);
                json_t *cn;
                int r;
                if (!fk || !(cn = child(n, fk)))
                        return -ENOMEM;
                r = set_of(c, k, cn, ret_error);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- comparing two values ---- */

typedef struct comparison {
        /* sets */
        json_t *added, *modified, *removed;
} comparison;

/* A node of an output set made only when something is put in it: unchanged
 * parts of two values cost no allocation. */
typedef struct lazy {
        struct lazy *up;
        const char *key;
        json_t *node; /* borrowed from its parent */
} lazy;

static json_t *lazy_node(lazy *l) {
        json_t *p;

        if (!l->node && l->up && (p = lazy_node(l->up)))
                l->node = child(p, l->key);
        return l->node;
}

/* The output slots of one path: added, modified, removed. */
typedef struct slots {
        lazy added, modified, removed;
} slots;

static void slots_child(slots *parent, const char *key, slots *out) {
        *out = (slots){ { &parent->added, key, NULL },
                        { &parent->modified, key, NULL },
                        { &parent->removed, key, NULL } };
}

static int compare(json_t *a, json_t *b, const char *field, slots *sl);

/* A field or item in one value only: its whole set goes to out. */
static int one_side(json_t *v, const char *field, lazy *out) {
        _cleanup_free_ char *err = NULL;
        json_t *c = lazy_node(out);

        if (!c)
                return -ENOMEM;
        /* Both values were checked before, so a keyless item cannot be. */
        return set_of(v, field, c, &err) == -ENOMEM ? -ENOMEM : 0;
}

/* A list item in one value only: the item (".") and its fields. */
static int one_item(json_t *item, lazy *out) {
        _cleanup_free_ char *err = NULL;
        json_t *c = lazy_node(out);

        if (!c || set_dot(c) < 0)
                return -ENOMEM;
        return set_of_object(item, c, &err) == -ENOMEM ? -ENOMEM : 0;
}

static int compare_objects(json_t *a, json_t *b, slots *sl) {
        const char *k;
        json_t *ca, *cb;
        int r = 0;

        json_object_foreach (a, k, ca) {
                _cleanup_free_ char *fk = NULL;
                slots sub;
                cb = json_object_get(b, k);
                if (cb && json_equal(ca, cb))
                        continue;
                if (!(fk = strprintf("f:%s", k)))
                        return -ENOMEM;
                slots_child(sl, fk, &sub);
                r = cb ? compare(ca, cb, k, &sub) : one_side(ca, k, &sub.removed);
                if (r < 0)
                        return r;
        }
        json_object_foreach (b, k, cb) {
                _cleanup_free_ char *fk = NULL;
                slots sub;
                if (json_object_get(a, k))
                        continue;
                if (!(fk = strprintf("f:%s", k)))
                        return -ENOMEM;
                slots_child(sl, fk, &sub);
                if ((r = one_side(cb, k, &sub.added)) < 0)
                        return r;
        }
        return 0;
}

/* A keyed list's items by key: {"k:...": position}, so that matching two
 * lists is linear (a merge key lookup per item, not a scan). NULL: out of
 * memory. Items without a key are left out. */
static json_t *list_index(json_t *list, const char *key) {
        json_t *idx = json_object(), *item;
        size_t i;

        json_array_foreach (list, i, item) {
                _cleanup_free_ char *k = item_key(item, key);
                if (idx && k && json_object_set_new(idx, k, json_integer((json_int_t) i)) < 0)
                        return json_decref(idx), NULL;
        }
        return idx;
}

static json_t *find_item(json_t *list, json_t *idx, const char *k, size_t *ret_i) {
        json_t *pos = json_object_get(idx, k);

        if (!pos)
                return NULL;
        if (ret_i)
                *ret_i = (size_t) json_integer_value(pos);
        return json_array_get(list, (size_t) json_integer_value(pos));
}

static int compare(json_t *a, json_t *b, const char *field, slots *sl) {
        const char *key = list_key(field);
        size_t i;
        json_t *item;
        int r;

        if (json_equal(a, b))
                return 0;
        if (granular_object(a, field) && granular_object(b, field))
                return compare_objects(a, b, sl);
        if (keyed_list(a, field) && keyed_list(b, field)) {
                _cleanup_(json_decrefp) json_t *ia = list_index(a, key), *ib = list_index(b, key);
                if (!ia || !ib)
                        return -ENOMEM;
                json_array_foreach (a, i, item) {
                        _cleanup_free_ char *k = item_key(item, key);
                        json_t *other = k ? find_item(b, ib, k, NULL) : NULL;
                        slots sub;
                        if (!k || (other && json_equal(item, other)))
                                continue;
                        slots_child(sl, k, &sub);
                        r = other ? compare_objects(item, other, &sub)
                                  : one_item(item, &sub.removed);
                        if (r < 0)
                                return r;
                }
                json_array_foreach (b, i, item) {
                        _cleanup_free_ char *k = item_key(item, key);
                        slots sub;
                        if (!k || find_item(a, ia, k, NULL))
                                continue;
                        slots_child(sl, k, &sub);
                        if (one_item(item, &sub.added) < 0)
                                return -ENOMEM;
                }
                return 0;
        }
        json_t *m = lazy_node(&sl->modified);
        return m && set_dot(m) >= 0 ? 0 : -ENOMEM;
}

static int compare_views(json_t *a, json_t *b, comparison *c) {
        slots root;

        *c = (comparison){ json_object(), json_object(), json_object() };
        if (!c->added || !c->modified || !c->removed)
                return -ENOMEM;
        root = (slots){ { NULL, NULL, c->added },
                        { NULL, NULL, c->modified },
                        { NULL, NULL, c->removed } };
        if (compare_objects(a, b, &root) < 0)
                return -ENOMEM;
        return 0;
}

static void comparison_done(comparison *c) {
        json_decref(c->added);
        json_decref(c->modified);
        json_decref(c->removed);
}

/* ---- merging and pruning ---- */

/* A deep copy of config without its objects' null members: a null says
 * "remove", and there is nothing to remove below a field live lacks (kept,
 * it was removed only by the next apply: an apply was not idempotent). */
static json_t *copy_set(json_t *config) {
        const char *k;
        json_t *out, *c;
        size_t i;

        if (json_is_object(config)) {
                out = json_object();
                json_object_foreach (config, k, c)
                        if (!json_is_null(c) &&
                            (!out || json_object_set_new(out, k, copy_set(c)) < 0))
                                return json_decref(out), NULL;
                return out;
        }
        if (json_is_array(config)) {
                out = json_array();
                json_array_foreach (config, i, c)
                        if (!out || json_array_append_new(out, copy_set(c)) < 0)
                                return json_decref(out), NULL;
                return out;
        }
        return json_copy(config);
}

/* config merged into live (a new value; NULL: out of memory). A null in the
 * config removes the field. */
static json_t *merge(json_t *live, json_t *config, const char *field) {
        const char *key = list_key(field), *k;
        json_t *out, *c;
        size_t i;

        if (granular_object(live, field) && granular_object(config, field)) {
                out = json_deep_copy(live);
                json_object_foreach (config, k, c) {
                        json_t *m;
                        if (!out)
                                return NULL;
                        if (json_is_null(c)) {
                                json_object_del(out, k);
                                continue;
                        }
                        m = merge(json_object_get(live, k), c, k);
                        if (!m || json_object_set_new(out, k, m) < 0)
                                return json_decref(out), NULL;
                }
                return out;
        }
        if (keyed_list(live, field) && keyed_list(config, field)) {
                _cleanup_(json_decrefp) json_t *il = list_index(live, key),
                                               *ic = list_index(config, key);
                out = il && ic ? json_array() : NULL;
                json_array_foreach (live, i, c) {
                        _cleanup_free_ char *ik = item_key(c, key);
                        json_t *cc = ik ? find_item(config, ic, ik, NULL) : NULL;
                        json_t *m = cc ? merge(c, cc, NULL) : json_deep_copy(c);
                        if (!out || !m || json_array_append_new(out, m) < 0)
                                return json_decref(out), NULL;
                }
                json_array_foreach (config, i, c) {
                        _cleanup_free_ char *ik = item_key(c, key);
                        if (ik && find_item(live, il, ik, NULL))
                                continue;
                        if (!out || json_array_append_new(out, copy_set(c)) < 0)
                                return json_decref(out), NULL;
                }
                return out;
        }
        return copy_set(config);
}

/* Removes from v what rm holds, except where keep (what any manager still
 * owns) holds something below: then only rm's children go. A kept list
 * item keeps its key (item_key: the key field's name, or NULL). */
static int prune(json_t *v, json_t *rm, json_t *keep, const char *field,
                 const char *item_key_field) {
        const char *key = list_key(field), *k;
        _cleanup_(json_decrefp) json_t *idx = NULL;
        _cleanup_free_ bool *drop = NULL;
        bool dropping = false;
        json_t *c;
        int r;

        if (keyed_list(v, field)) {
                idx = list_index(v, key);
                drop = new0(bool, json_array_size(v) + 1);
                if (!idx || !drop)
                        return -ENOMEM;
        }
        json_object_foreach (rm, k, c) {
                json_t *kc = json_object_get(keep, k);
                bool gone = is_member(c) && (!kc || json_object_size(kc) == 0);

                if (streq(k, ".") ||
                    (item_key_field && startswith(k, "f:") && streq(k + 2, item_key_field)))
                        continue;
                if (startswith(k, "f:") && granular_object(v, field)) {
                        const char *name = k + 2;
                        json_t *fv = json_object_get(v, name);
                        if (!fv)
                                continue;
                        if (gone)
                                json_object_del(v, name);
                        else {
                                if ((r = prune(fv, c, kc, name, NULL)) < 0)
                                        return r;
                                /* (a map emptied by the prune goes too) */
                                if (json_is_object(fv) && json_object_size(fv) == 0)
                                        json_object_del(v, name);
                        }
                } else if (startswith(k, "k:") && idx) {
                        size_t i;
                        json_t *item = find_item(v, idx, k, &i);
                        if (!item)
                                continue;
                        if (gone)
                                drop[i] = dropping = true;
                        else if ((r = prune(item, c, kc, NULL, key)) < 0)
                                return r;
                }
        }
        /* The dropped items go in one pass (removing each would move the
         * rest every time). */
        if (dropping) {
                _cleanup_(json_decrefp) json_t *kept = json_array();
                size_t i;
                json_array_foreach (v, i, c)
                        if (!drop[i] && (!kept || json_array_append(kept, c) < 0))
                                return -ENOMEM;
                if (!kept || json_array_clear(v) < 0 || json_array_extend(v, kept) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* ---- views ---- */

/* What an object has besides its metadata that is not the server's: its
 * spec (a Deployment), its data (a ConfigMap)... */
static bool owned_top(const char *key) {
        return !streq(key, "apiVersion") && !streq(key, "kind") && !streq(key, "metadata") &&
               !streq(key, "status");
}

json_t *fields_view(json_t *obj) {
        json_t *meta = json_object_get(obj, "metadata"), *v = json_object(), *m = json_object();
        const char *key;
        json_t *x;

        if (!v || !m || json_object_set_new(v, "metadata", m) < 0) {
                json_decref(v);
                return NULL;
        }
        if ((x = json_object_get(meta, "labels")) && json_object_set(m, "labels", x) < 0)
                return json_decref(v), NULL;
        if ((x = json_object_get(meta, "annotations")) && json_object_set(m, "annotations", x) < 0)
                return json_decref(v), NULL;
        json_object_foreach (obj, key, x)
                if (owned_top(key) && json_object_set(v, key, x) < 0)
                        return json_decref(v), NULL;
        if (json_object_size(m) == 0)
                json_object_del(v, "metadata");
        return v;
}

int fields_set_view(json_t *obj, json_t *view) {
        json_t *meta = json_object_get(obj, "metadata"), *vm = json_object_get(view, "metadata");
        static const char *const keys[] = { "labels", "annotations" };

        if (!meta) {
                if (!(meta = json_object()) || json_object_set_new(obj, "metadata", meta) < 0)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                json_t *x = json_object_get(vm, keys[i]);
                if (!x)
                        json_object_del(meta, keys[i]);
                else if (json_object_set(meta, keys[i], x) < 0)
                        return -ENOMEM;
        }
        /* the owned top-level fields: the view's, and none other */
        _cleanup_(json_decrefp) json_t *gone = json_array();
        const char *key;
        json_t *x;
        if (!gone)
                return -ENOMEM;
        json_object_foreach (obj, key, x)
                if (owned_top(key) && !json_object_get(view, key) &&
                    json_array_append_new(gone, json_string(key)) < 0)
                        return -ENOMEM;
        for (size_t i = 0; i < json_array_size(gone); i++)
                json_object_del(obj, json_string_value(json_array_get(gone, i)));
        json_object_foreach (view, key, x)
                if (owned_top(key) && json_object_set(obj, key, x) < 0)
                        return -ENOMEM;
        return 0;
}

/* ---- checking a given managedFields ---- */

static int check_keys(json_t *n, int depth, char **ret_error) {
        const char *k;
        json_t *c;

        if (depth > 64) {
                *ret_error = strdup("fieldsV1 is nested too deeply");
                return -EINVAL;
        }
        json_object_foreach (n, k, c) {
                if (!streq(k, ".") && !startswith(k, "f:") && !startswith(k, "k:") &&
                    !startswith(k, "v:") && !startswith(k, "i:")) {
                        _cleanup_free_ char *clean = utf8_escape_invalid(k);
                        *ret_error = strprintf("fieldsV1: key \"%s\" must start with f:, k:, v: or "
                                               "i:, or be \".\"",
                                               strna(clean));
                        return -EINVAL;
                }
                if (!json_is_object(c)) {
                        *ret_error = strdup("fieldsV1: every value must be an object");
                        return -EINVAL;
                }
                if (check_keys(c, depth + 1, ret_error) < 0)
                        return -EINVAL;
        }
        return 0;
}

int fields_check(json_t *managed, char **ret_error) {
        size_t i;
        json_t *e;

        *ret_error = NULL;
        json_array_foreach (managed, i, e) {
                const char *mgr = json_string_value(json_object_get(e, "manager"));
                json_t *f = json_object_get(e, "fieldsV1");
                _cleanup_free_ char *why = NULL;

                if (isempty(mgr))
                        why = strdup("manager: Required value");
                else if (strlen(mgr) > 128)
                        why = strdup("manager: Too long: must have at most 128 bytes");
                else if (!json_object_get(e, "operation"))
                        why = strdup("operation: Required value: Apply or Update");
                else if (!f)
                        why = strdup("fieldsV1: Required value");
                else if (!json_is_object(f)) /* (its keys are checked below, not a string's) */
                        why = strdup("fieldsV1: Invalid value: must be an object");
                else if (check_keys(f, 0, &why) < 0 && !why)
                        return -ENOMEM;
                if (why) {
                        *ret_error = strprintf("metadata.managedFields[%zu].%s", i, why);
                        return *ret_error ? -EINVAL : -ENOMEM;
                }
        }
        return 0;
}

/* ---- entries ---- */

static bool entry_is(json_t *e, const char *manager, const char *op, const char *sub) {
        return streq_ptr(json_string_value(json_object_get(e, "manager")), manager) &&
               streq_ptr(json_string_value(json_object_get(e, "operation")), op) &&
               streq_ptr(json_string_value(json_object_get(e, "subresource")), sub);
}

/* The set an entry holds (imported), or an empty one. */
static json_t *entry_set(json_t *e) {
        json_t *f = json_object_get(e, "fieldsV1");
        return f ? set_import(f) : json_object();
}

/* Entry i of managed (or a new one at the end, i = -1) made to hold set for
 * (manager, op, sub); an empty set drops it. The time changes only when the
 * fields do. */
static int put_entry(json_t *managed, ssize_t i, json_t *set, const char *manager,
                     const char *api_version, const char *op, const char *sub, const char *now) {
        json_t *old = i >= 0 ? json_array_get(managed, (size_t) i) : NULL, *e, *f;

        if (set_is_empty(set)) {
                if (old)
                        json_array_remove(managed, (size_t) i);
                return 0;
        }
        f = set_export(set);
        if (!f)
                return -ENOMEM;
        if (old && json_equal(json_object_get(old, "fieldsV1"), f)) {
                json_decref(f);
                return 0;
        }
        e = json_pack("{s:s, s:s, s:s, s:s, s:s, s:o}", "manager", manager, "operation", op,
                      "apiVersion", api_version, "time", now, "fieldsType", "FieldsV1", "fieldsV1",
                      f);
        if (e && sub && json_object_set_new(e, "subresource", json_string(sub)) < 0)
                json_decref(e), e = NULL;
        if (!e)
                return -ENOMEM;
        if (old)
                return json_array_set_new(managed, (size_t) i, e) < 0 ? -ENOMEM : 0;
        return json_array_append_new(managed, e) < 0 ? -ENOMEM : 0;
}

static ssize_t find_entry(json_t *managed, const char *manager, const char *op, const char *sub) {
        size_t i;
        json_t *e;

        json_array_foreach (managed, i, e)
                if (entry_is(e, manager, op, sub))
                        return (ssize_t) i;
        return -1;
}

/* Whether fieldsV1 f holds a member of set (walking set only: a small
 * change to a large object costs its own size). */
static bool v1_member(json_t *f) {
        return f && (json_object_size(f) == 0 || json_object_get(f, "."));
}

/* Each level walks the smaller of the two and looks up in the other: an
 * entry's test costs at most its own size, so testing every entry of
 * managedFields against a large change costs what managedFields is, not
 * entries × change. */
static bool v1_has_any(json_t *f, json_t *set) {
        const char *k;
        json_t *c;
        bool by_f;

        if (!f)
                return false;
        if (json_object_get(set, ".") && v1_member(f))
                return true;
        by_f = json_object_size(f) < json_object_size(set);
        json_object_foreach (by_f ? f : set, k, c) {
                json_t *o = streq(k, ".") ? NULL : json_object_get(by_f ? set : f, k);
                if (o && (by_f ? v1_has_any(c, o) : v1_has_any(o, c)))
                        return true;
        }
        return false;
}

/* Whether fieldsV1 f holds every member of set. */
static bool v1_has_all(json_t *f, json_t *set) {
        const char *k;
        json_t *c;

        json_object_foreach (set, k, c)
                if (!(streq(k, ".") ? v1_member(f) : f && v1_has_all(json_object_get(f, k), c)))
                        return false;
        return true;
}

/* managed with each entry copied, their fieldsV1 shared: fieldsV1 trees are
 * never changed in place, only replaced (NULL: out of memory). */
static json_t *copy_entries(json_t *managed) {
        json_t *out = json_array(), *e;
        size_t i;

        json_array_foreach (managed, i, e)
                if (!out || json_array_append_new(out, json_copy(e)) < 0)
                        return json_decref(out), NULL;
        return out;
}

/* Every entry but skip loses the fields of the n sets in lose (and goes if
 * then empty). The sets are taken apart, not made one: their union would
 * be a copy of a large change. */
static int others_lose(json_t *managed, ssize_t skip, json_t *const *lose, size_t n) {
        for (size_t i = json_array_size(managed); i-- > 0;) {
                json_t *e = json_array_get(managed, i), *f = json_object_get(e, "fieldsV1");
                _cleanup_(json_decrefp) json_t *s = NULL, *left = NULL, *out = NULL;
                bool any = false;

                for (size_t k = 0; k < n && !any; k++)
                        any = v1_has_any(f, lose[k]);
                if ((ssize_t) i == skip || !any)
                        continue;
                s = entry_set(e);
                left = json_incref(s);
                for (size_t k = 0; left && k < n; k++) {
                        json_t *l = set_minus(left, lose[k]);
                        json_decref(left);
                        left = l;
                }
                if (!left)
                        return -ENOMEM;
                if (json_equal(left, s))
                        continue;
                if (set_is_empty(left)) {
                        json_array_remove(managed, i);
                        continue;
                }
                out = set_export(left);
                if (!out || json_object_set(e, "fieldsV1", out) < 0)
                        return -ENOMEM;
        }
        return 0;
}

json_t *fields_update(json_t *managed, json_t *old_view, json_t *new_view, const char *manager,
                      const char *api_version, const char *subresource, const char *now) {
        _cleanup_(json_decrefp) json_t *out = copy_entries(managed);
        _cleanup_(json_decrefp) json_t *empty = json_object(), *mine = NULL;
        comparison c = {};
        ssize_t i;
        int r;

        if (!out || !empty)
                return NULL;
        r = compare_views(old_view ?: empty, new_view, &c);
        i = find_entry(out, manager, "Update", subresource);
        if (r >= 0)
                r = others_lose(out, i, (json_t *[]){ c.added, c.modified, c.removed }, 3);
        /* (others_lose may have removed entries before it: found again) */
        i = find_entry(out, manager, "Update", subresource);
        /* Unchanged when it owned all that changed and none of what went. */
        json_t *had_f = i >= 0 ? json_object_get(json_array_get(out, (size_t) i), "fieldsV1")
                               : NULL;
        if (r >= 0 && had_f && !v1_has_any(had_f, c.removed) && v1_has_all(had_f, c.modified) &&
            v1_has_all(had_f, c.added)) {
                comparison_done(&c);
                return TAKE_PTR(out);
        }
        if (r >= 0) {
                json_t *had = i >= 0 ? entry_set(json_array_get(out, (size_t) i)) : json_object();
                mine = had ? set_minus(had, c.removed) : NULL;
                json_decref(had);
                if (!mine || set_union_move(mine, c.modified) < 0 ||
                    set_union_move(mine, c.added) < 0)
                        r = -ENOMEM;
                else {
                        set_clean(mine);
                        r = put_entry(out, i, mine, manager, api_version, "Update", subresource,
                                      now);
                }
        }
        comparison_done(&c);
        return r < 0 ? NULL : TAKE_PTR(out);
}

/* ---- conflicts ---- */

/* The paths of set n's members, as Kubernetes prints them, appended to out
 * as {manager, field}. */
static int list_paths(json_t *n, char *path, size_t len, size_t cap, const char *manager,
                      json_t *out) {
        const char *k;
        json_t *c;

        if (is_member(n) && json_array_append_new(out, json_pack("{s:s, s:s}", "manager", manager,
                                                                 "field", path)) < 0)
                return -ENOMEM;
        json_object_foreach (n, k, c) {
                int w;
                if (streq(k, "."))
                        continue;
                if (startswith(k, "f:"))
                        w = snprintf(path + len, cap - len, ".%s", k + 2);
                else if (startswith(k, "k:")) {
                        /* k:{"name":"web"} → [name="web"] */
                        _cleanup_(json_decrefp) json_t *kj = json_loads(k + 2, 0, NULL);
                        const char *kk = NULL;
                        json_t *kv = NULL;
                        _cleanup_free_ char *vs = NULL;
                        void *it = kj ? json_object_iter(kj) : NULL;
                        if (it) {
                                kk = json_object_iter_key(it);
                                kv = json_object_iter_value(it);
                                vs = json_dumps(kv, JSON_ENCODE_ANY | JSON_COMPACT);
                        }
                        w = snprintf(path + len, cap - len, "[%s=%s]", strna(kk), strna(vs));
                } else
                        w = snprintf(path + len, cap - len, "[%s]", k);
                if (w < 0 || (size_t) w >= cap - len)
                        w = (int) (cap - len - 1);
                if (list_paths(c, path, len + (size_t) w, cap, manager, out) < 0)
                        return -ENOMEM;
                path[len] = 0;
        }
        return 0;
}

/* A manager as Kubernetes names it in a conflict: "kubectl-edit" using
 * apps/v1 at 2026-12-04T08:00:00Z (an update), "ci" (an apply). */
static char *print_manager(json_t *e) {
        const char *m = json_string_value(json_object_get(e, "manager")),
                   *sub = json_string_value(json_object_get(e, "subresource")),
                   *av = json_string_value(json_object_get(e, "apiVersion")),
                   *t = json_string_value(json_object_get(e, "time"));
        _cleanup_free_ char *who = NULL;

        who = sub ? strprintf("\"%s\" with subresource \"%s\"", strna(m), sub)
                  : strprintf("\"%s\"", strna(m));
        if (!who || !streq_ptr(json_string_value(json_object_get(e, "operation")), "Update"))
                return TAKE_PTR(who);
        return t ? strprintf("%s using %s at %s", who, strna(av), t)
                 : strprintf("%s using %s", who, strna(av));
}

/* Where live_view still holds what last_view (a client-side apply's
 * last-applied configuration) says: the fields of last_view that neither
 * changed since nor went (a new set; NULL: out of memory). */
static json_t *unchanged_since(json_t *last_view, json_t *live_view) {
        _cleanup_(json_decrefp) json_t *all = json_object(), *a = NULL;
        _cleanup_free_ char *err = NULL;
        comparison c = {};
        json_t *out;

        if (!all || set_of_object(last_view, all, &err) < 0 ||
            compare_views(last_view, live_view, &c) < 0) {
                comparison_done(&c);
                return NULL;
        }
        a = set_minus(all, c.modified);
        json_t *b = a ? set_minus(a, c.removed) : NULL;
        out = b ? set_minus(b, c.added) : NULL;
        json_decref(b);
        comparison_done(&c);
        return out;
}

int fields_apply(json_t *managed, json_t *live_view, json_t *config, const char *manager,
                 const char *api_version, bool force, json_t *forgiven, const char *now,
                 json_t **ret_view, json_t **ret_managed, json_t **ret_conflicts,
                 char **ret_error) {
        _cleanup_(json_decrefp) json_t *out = copy_entries(managed);
        _cleanup_(json_decrefp) json_t *empty = json_object(), *cfg = json_object(),
                                       *keep = json_object(), *last = NULL, *rm = NULL,
                                       *merged = NULL, *changed = json_object(),
                                       *conflicts = json_array(), *allowed = NULL;
        comparison c = {};
        ssize_t mine;
        size_t i;
        json_t *e;
        int r;

        *ret_error = NULL;
        if (!out || !empty || !cfg || !keep || !changed || !conflicts)
                return -ENOMEM;
        live_view = live_view ?: empty;
        r = set_of_object(config, cfg, ret_error);
        if (r < 0)
                return r;
        set_clean(cfg);

        /* Merge, then remove what this manager applied last time and no
         * longer does, unless another manager owns it. */
        merged = merge(live_view, config, NULL);
        mine = find_entry(out, manager, "Apply", NULL);
        last = mine >= 0 ? entry_set(json_array_get(out, (size_t) mine)) : json_object();
        if (!merged || !last || set_union_into(keep, cfg) < 0)
                return -ENOMEM;
        json_array_foreach (out, i, e) {
                _cleanup_(json_decrefp) json_t *s = NULL;
                if ((ssize_t) i == mine)
                        continue;
                if (!(s = entry_set(e)) || set_union_into(keep, s) < 0)
                        return -ENOMEM;
        }
        rm = set_minus(last, keep);
        if (!rm)
                return -ENOMEM;
        if (prune(merged, rm, keep, NULL, NULL) < 0)
                return -ENOMEM;

        /* What changes, against what others own (less what is forgiven). */
        if (forgiven && !(allowed = unchanged_since(forgiven, live_view)))
                return -ENOMEM;
        if (compare_views(live_view, merged, &c) < 0 || set_union_into(changed, c.added) < 0 ||
            set_union_into(changed, c.modified) < 0) {
                comparison_done(&c);
                return -ENOMEM;
        }
        json_array_foreach (out, i, e) {
                _cleanup_(json_decrefp) json_t *s = NULL, *x = NULL;
                char path[1024] = "";
                if ((ssize_t) i == mine || !v1_has_any(json_object_get(e, "fieldsV1"), changed))
                        continue;
                _cleanup_free_ char *who = print_manager(e);
                s = entry_set(e);
                x = s && who ? set_intersect(s, changed) : NULL;
                if (x && allowed) {
                        /* a conflict forgiven is no conflict: taken as forced */
                        json_t *y = set_minus(x, allowed);
                        json_decref(x);
                        x = y;
                }
                if (!x ||
                    (!set_is_empty(x) && list_paths(x, path, 0, sizeof path, who, conflicts) < 0)) {
                        comparison_done(&c);
                        return -ENOMEM;
                }
        }
        if (json_array_size(conflicts) > 0 && !force) {
                comparison_done(&c);
                *ret_conflicts = TAKE_PTR(conflicts);
                return 1;
        }

        /* Others lose what changed (forced) and what went. */
        r = others_lose(out, mine, (json_t *[]){ changed, c.removed }, 2);
        comparison_done(&c);
        if (r < 0)
                return r;
        mine = find_entry(out, manager, "Apply", NULL);
        r = put_entry(out, mine, cfg, manager, api_version, "Apply", NULL, now);
        if (r < 0)
                return r;
        *ret_view = TAKE_PTR(merged);
        *ret_managed = TAKE_PTR(out);
        return 0;
}
