/* SPDX-License-Identifier: MIT */

/* Value types with arithmetic: quantities, int-or-percent, fenceposts and the
 * pod-template hash. */

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>

#include "spec-internal.h"

/* ---- quantities ------------------------------------------------------------------ */

typedef unsigned __int128 u128;
#define U128_CAP ((u128) INT64_MAX)

static int mul_capped(u128 *v, u128 m) {
        if (*v != 0 && m > U128_CAP * 1000 / *v)
                return -ERANGE;
        *v *= m;
        return 0;
}

int spec_quantity_parse(const char *s, int64_t *ret_milli, int64_t *ret_value) {
        static const struct {
                const char *suffix;
                int p2, p10;
        } suffixes[] = {
                { "Ki", 10, 0 }, { "Mi", 20, 0 }, { "Gi", 30, 0 }, { "Ti", 40, 0 },
                { "Pi", 50, 0 }, { "Ei", 60, 0 }, { "n", 0, -9 },  { "u", 0, -6 },
                { "m", 0, -3 },  { "k", 0, 3 },   { "M", 0, 6 },   { "G", 0, 9 },
                { "T", 0, 12 },  { "P", 0, 15 },  { "E", 0, 18 },  { "", 0, 0 },
        };
        const char *p = s;
        bool negative = false;
        u128 mant = 0, v;
        int digits = 0, frac = 0, p2 = 0, p10 = 0, exp10;
        bool seen_digit = false, found = false;

        if (*p == '+' || *p == '-')
                negative = *p++ == '-';
        /* [0-9]+ ( "." [0-9]* )? | "." [0-9]+ */
        for (int part = 0; part < 2; part++) {
                for (; isdigit((unsigned char) *p); p++) {
                        seen_digit = true;
                        if (part == 1)
                                frac++;
                        if (mant == 0 && *p == '0')
                                continue; /* leading zeros carry nothing */
                        if (++digits > 30)
                                return -ERANGE;
                        mant = mant * 10 + (u128) (*p - '0');
                }
                if (part == 0 && *p == '.')
                        p++;
                else
                        break;
        }
        if (!seen_digit)
                return -EINVAL;

        if ((*p == 'e' || *p == 'E') &&
            (isdigit((unsigned char) p[1]) ||
             ((p[1] == '+' || p[1] == '-') && isdigit((unsigned char) p[2])))) {
                int64_t e;
                if (safe_atoi64(p + 1 + (p[1] == '+'), &e) < 0)
                        return -EINVAL;
                if (e > 40)
                        return -ERANGE;
                p10 = (int) MAX(e, -60);
                found = true;
        } else
                for (size_t i = 0; i < ELEMENTSOF(suffixes); i++)
                        if (streq(p, suffixes[i].suffix)) {
                                p2 = suffixes[i].p2;
                                p10 = suffixes[i].p10;
                                found = true;
                                break;
                        }
        if (!found)
                return -EINVAL;

        /* milli = mant × 2^p2 × 10^(p10 + 3 − frac), rounded up. */
        v = mant;
        exp10 = p10 + 3 - frac;
        for (int i = 0; i < p2; i++)
                if (mul_capped(&v, 2) < 0)
                        return -ERANGE;
        if (exp10 >= 0) {
                for (int i = 0; i < exp10; i++)
                        if (mul_capped(&v, 10) < 0)
                                return -ERANGE;
        } else {
                u128 div = 1;
                bool tiny = false;
                for (int i = 0; i < -exp10; i++) {
                        if (div > (u128) 1 << 100) {
                                tiny = true;
                                break;
                        }
                        div *= 10;
                }
                v = tiny ? (v > 0) : (v + div - 1) / div;
        }
        if (v > U128_CAP)
                return -ERANGE;
        *ret_milli = negative ? -(int64_t) v : (int64_t) v;
        *ret_value = negative ? -(int64_t) ((v + 999) / 1000) : (int64_t) ((v + 999) / 1000);
        return 0;
}

/* ---- int or percent ------------------------------------------------------------- */

int spec_intstr_scaled(const spec_intstr *v, int32_t total, bool round_up, int32_t *ret) {
        const char *s = v->str;
        size_t n;
        int64_t pct, x;
        _cleanup_free_ char *digits = NULL;

        if (!s) {
                *ret = v->num == SPEC_UNSET ? 0 : v->num;
                return 0;
        }
        n = strlen(s);
        if (n < 2 || s[n - 1] != '%')
                return -EINVAL;
        digits = strndup(s, n - 1);
        if (!digits)
                return -ENOMEM;
        for (const char *c = digits; *c; c++)
                if (!isdigit((unsigned char) *c))
                        return -EINVAL;
        if (safe_atoi64(digits, &pct) < 0 || pct > INT32_MAX)
                return -EINVAL;
        x = pct * (int64_t) total;
        x = round_up ? (x + 99) / 100 : x / 100;
        *ret = (int32_t) MIN(x, (int64_t) INT32_MAX);
        return 0;
}

void spec_deployment_fenceposts(const spec_deployment *d, int32_t replicas, int32_t *ret_surge,
                                int32_t *ret_unavailable) {
        const spec_strategy *st = &d->spec.strategy;
        int32_t surge = 0, unav = 0;

        if (st->type != SPEC_STRATEGY_ROLLING_UPDATE || !st->rolling_update) {
                *ret_surge = *ret_unavailable = 0;
                return;
        }
        /* Validation guarantees well-formed values; a malformed one counts
         * as 0 here rather than failing a pure computation. */
        if (spec_intstr_scaled(&st->rolling_update->max_surge, replicas, true, &surge) < 0)
                surge = 0;
        if (spec_intstr_scaled(&st->rolling_update->max_unavailable, replicas, false, &unav) < 0)
                unav = 0;
        if (surge == 0 && unav == 0)
                unav = 1; /* else a rollout could never make progress */
        if (replicas == 0)
                unav = 0;
        *ret_surge = surge;
        *ret_unavailable = MIN(unav, replicas);
}

/* ---- the pod-template hash -------------------------------------------------------- */

/* Kubernetes' alphabet for names made of hashes (rand.SafeEncodeString):
 * no vowels, no digits that look like letters. */
static const char safe_alphabet[] = "bcdfghjklmnpqrstvwxz2456789";

#define FNV32_OFFSET 2166136261U
#define FNV32_PRIME 16777619U

static uint32_t fnv1a32(uint32_t h, const void *p, size_t n) {
        const unsigned char *c = p;
        for (size_t i = 0; i < n; i++) {
                h ^= c[i];
                h *= FNV32_PRIME;
        }
        return h;
}

char *spec_template_text(const spec_pod_template *t) {
        spec_pod_template view = *t; /* shallow: only read */
        const spec_map *labels = &t->metadata.labels;
        _cleanup_free_ spec_kv *kept = NULL;
        size_t n = 0;

        /* Written without the label: as if it were not there (and labels,
         * and metadata, left out if that empties them, as the codec does). */
        if (spec_map_get(labels, SPEC_LABEL_POD_TEMPLATE_HASH)) {
                kept = new0(spec_kv, MAX(labels->n, 1u));
                if (!kept)
                        return NULL;
                for (size_t i = 0; i < labels->n; i++)
                        if (!streq(labels->items[i].key, SPEC_LABEL_POD_TEMPLATE_HASH))
                                kept[n++] = labels->items[i];
                view.metadata.labels = (spec_map){ .items = kept, .n = n };
        }
        return spec_dump_object(&spec_type_pod_template, &view, SPEC_DUMP_SORTED);
}

/*
 * Stability matters more than anything here: the hash names ReplicaSets,
 * and a tend upgrade that changed it would re-roll every deployment. The
 * input is the canonical JSON encoding of the defaulted template, so adding
 * a field to the codec changes no hash as long as the field is left out of
 * the encoding while unset. The unit tests pin a few values.
 */
char *spec_template_hash(const spec_pod_template *t, int32_t collision_count,
                         char buf[static SPEC_HASH_MAX]) {
        _cleanup_free_ char *s = spec_template_text(t);
        uint32_t h = FNV32_OFFSET;
        char dec[16];

        if (!s)
                return NULL;
        h = fnv1a32(h, s, strlen(s));
        if (collision_count >= 0) {
                unsigned char cc[8] = {
                        (unsigned char) (collision_count & 0xff),
                        (unsigned char) ((collision_count >> 8) & 0xff),
                        (unsigned char) ((collision_count >> 16) & 0xff),
                        (unsigned char) ((collision_count >> 24) & 0xff),
                };
                h = fnv1a32(h, cc, sizeof cc);
        }
        snprintf(dec, sizeof dec, "%" PRIu32, h);
        for (size_t i = 0; dec[i]; i++)
                buf[i] = safe_alphabet[(unsigned char) dec[i] % 27];
        buf[strlen(dec)] = 0;
        return buf;
}

#define FNV64_OFFSET 14695981039346656037ULL
#define FNV64_PRIME 1099511628211ULL

/* A ConfigMap's content (data, binaryData) or a Secret's (type, data), as
 * its canonical JSON, sorted; metadata and immutable left out. */
char *spec_config_hash(const spec_type *t, const void *obj,
                       char buf[static SPEC_CONFIG_HASH_LEN + 1]) {
        _cleanup_free_ char *s = NULL;
        uint64_t h = FNV64_OFFSET;

        if (t == &spec_type_secret) {
                const spec_secret *x = obj;
                spec_secret view = { .data = x->data, .type = x->type };
                s = spec_dump_object(t, &view, SPEC_DUMP_SORTED);
        } else {
                const spec_config_map *x = obj;
                spec_config_map view = { .data = x->data, .binary_data = x->binary_data };
                s = spec_dump_object(t, &view, SPEC_DUMP_SORTED);
        }
        if (!s)
                return NULL;
        for (const unsigned char *c = (const unsigned char *) s; *c; c++) {
                h ^= *c;
                h *= FNV64_PRIME;
        }
        for (size_t i = 0; i < SPEC_CONFIG_HASH_LEN; i++, h /= 27)
                buf[i] = safe_alphabet[h % 27];
        buf[SPEC_CONFIG_HASH_LEN] = 0;
        return buf;
}

/* The labels, the pod-template-hash label left out. */
static bool labels_equal_but_hash(const spec_map *a, const spec_map *b) {
        size_t i = 0, k = 0;

        for (;;) {
                while (i < a->n && streq(a->items[i].key, SPEC_LABEL_POD_TEMPLATE_HASH))
                        i++;
                while (k < b->n && streq(b->items[k].key, SPEC_LABEL_POD_TEMPLATE_HASH))
                        k++;
                if (i == a->n || k == b->n)
                        return i == a->n && k == b->n;
                if (!streq(a->items[i].key, b->items[k].key) ||
                    !streq(a->items[i].value, b->items[k].value))
                        return false;
                i++, k++;
        }
}

/* As their canonical encodings compare (spec_template_text(), json_equal()),
 * without making them: this runs for every ReplicaSet of a deployment at
 * each sync, and a template at the manifest limits encodes in tens of
 * milliseconds. (Labels are kept sorted, so an item at a time.) */
bool spec_template_equal(const spec_pod_template *a, const spec_pod_template *b) {
        spec_pod_template ta = *a, tb = *b; /* shallow: only read */

        if (!labels_equal_but_hash(&a->metadata.labels, &b->metadata.labels))
                return false;
        ta.metadata.labels = tb.metadata.labels = (spec_map){};
        return spec_equal_encoded(&spec_type_pod_template, &ta, &tb);
}
