/* SPDX-License-Identifier: MIT */
#include "tend/base.h"

typedef struct entry {
        char *key; /* NULL: empty slot */
        void *value;
        uint32_t hash;
} entry;

struct tend_hashmap {
        entry *slots;
        size_t alloc; /* a power of two, or 0 */
        size_t n;
};

/* FNV-1a: keys are short names ("namespace/name"). */
static uint32_t hash_key(const char *s) {
        uint32_t h = 2166136261u;
        for (; *s; s++) {
                h ^= (unsigned char) *s;
                h *= 16777619u;
        }
        return h;
}

tend_hashmap *tend_hashmap_new(void) {
        return new0(tend_hashmap, 1);
}

tend_hashmap *tend_hashmap_free(tend_hashmap *h) {
        if (!h)
                return NULL;
        for (size_t i = 0; i < h->alloc; i++)
                free(h->slots[i].key);
        free(h->slots);
        free(h);
        return NULL;
}

size_t tend_hashmap_size(const tend_hashmap *h) {
        return h->n;
}

static ssize_t find(const tend_hashmap *h, const char *key, uint32_t hash) {
        if (h->alloc == 0)
                return -1;
        for (size_t i = hash & (h->alloc - 1);; i = (i + 1) & (h->alloc - 1)) {
                const entry *e = &h->slots[i];
                if (!e->key)
                        return -1;
                if (e->hash == hash && streq(e->key, key))
                        return (ssize_t) i;
        }
}

static int grow(tend_hashmap *h) {
        size_t na = h->alloc ? h->alloc * 2 : 16;
        entry *ns = new0(entry, na);

        if (!ns)
                return -ENOMEM;
        for (size_t i = 0; i < h->alloc; i++) {
                entry *e = &h->slots[i];
                if (!e->key)
                        continue;
                size_t k = e->hash & (na - 1);
                while (ns[k].key)
                        k = (k + 1) & (na - 1);
                ns[k] = *e;
        }
        free(h->slots);
        h->slots = ns;
        h->alloc = na;
        return 0;
}

void *tend_hashmap_get(const tend_hashmap *h, const char *key) {
        ssize_t i = find(h, key, hash_key(key));
        return i < 0 ? NULL : h->slots[i].value;
}

int tend_hashmap_put(tend_hashmap *h, const char *key, void *value, void **ret_old) {
        uint32_t hash = hash_key(key);
        ssize_t i = find(h, key, hash);
        char *k;

        if (i >= 0) {
                if (ret_old)
                        *ret_old = h->slots[i].value;
                h->slots[i].value = value;
                return 0;
        }
        if (ret_old)
                *ret_old = NULL;
        if ((h->n + 1) * 4 > h->alloc * 3) { /* load ≤ 0.75 */
                int r = grow(h);
                if (r < 0)
                        return r;
        }
        k = strdup(key);
        if (!k)
                return -ENOMEM;
        size_t s = hash & (h->alloc - 1);
        while (h->slots[s].key)
                s = (s + 1) & (h->alloc - 1);
        h->slots[s] = (entry){ k, value, hash };
        h->n++;
        return 0;
}

void *tend_hashmap_remove(tend_hashmap *h, const char *key) {
        ssize_t i = find(h, key, hash_key(key));
        void *v;
        size_t hole, j;

        if (i < 0)
                return NULL;
        v = h->slots[i].value;
        free(h->slots[i].key);
        h->slots[i].key = NULL;
        h->n--;
        /* Backward-shift: move later entries of the probe run into the hole
         * when their home slot is at or before it. */
        hole = (size_t) i;
        for (j = (hole + 1) & (h->alloc - 1); h->slots[j].key; j = (j + 1) & (h->alloc - 1)) {
                size_t home = h->slots[j].hash & (h->alloc - 1);
                bool movable = hole <= j ? (home <= hole || home > j) : (home <= hole && home > j);
                if (movable) {
                        h->slots[hole] = h->slots[j];
                        h->slots[j].key = NULL;
                        hole = j;
                }
        }
        return v;
}

bool tend_hashmap_next(const tend_hashmap *h, size_t *i, const char **ret_key, void **ret_value) {
        for (; *i < h->alloc; (*i)++)
                if (h->slots[*i].key) {
                        if (ret_key)
                                *ret_key = h->slots[*i].key;
                        if (ret_value)
                                *ret_value = h->slots[*i].value;
                        (*i)++;
                        return true;
                }
        return false;
}
