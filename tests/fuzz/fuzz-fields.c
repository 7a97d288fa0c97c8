/* SPDX-License-Identifier: MIT */

/*
 * fuzz-fields: field ownership (spec/fields.c), server-side apply's algebra,
 * as the API drives it (api/ssa.c).
 *
 * Input: three JSON objects, one a line: the live Deployment, then two
 * apply configurations, A and B. The live object is created by the manager
 * "before" (fields_update from nothing); A is applied by "a" over it, B by
 * "b" over the result.
 *
 * Properties (a violation aborts):
 *  - every managedFields a step returns passes the fields check (what a
 *    client could send back: fields_check) and has one entry per manager;
 *  - apply is idempotent: A applied again by "a" over its own result is no
 *    conflict, and changes neither the object nor its managedFields;
 *  - a forced apply never conflicts; a refused one names, for each
 *    conflict, another manager and a field;
 *  - an apply with a conflict changes nothing it returns (no view, no
 *    managedFields);
 *  - every error is UTF-8;
 *  - and, from the sanitizers, no leak, no memory error, no UB.
 * Inputs past the spec limits are skipped, as the API refuses them before.
 */

#include "tend/fields.h"
#include "fuzz.h"
#include "tend/spec.h"

#define NOW "2026-01-01T00:00:00Z"

static bool within_limits(json_t *j, unsigned depth, size_t *nodes) {
        const char *key;
        json_t *v;
        size_t i;

        if (++*nodes > SPEC_MAX_NODES || depth > SPEC_MAX_DEPTH)
                return false;
        if (json_is_object(j)) {
                if (json_object_size(j) > SPEC_MAX_ITEMS)
                        return false;
                json_object_foreach (j, key, v)
                        if (!within_limits(v, depth + 1, nodes))
                                return false;
        } else if (json_is_array(j)) {
                if (json_array_size(j) > SPEC_MAX_ITEMS)
                        return false;
                json_array_foreach (j, i, v)
                        if (!within_limits(v, depth + 1, nodes))
                                return false;
        }
        return true;
}

static void check_managed(json_t *managed, const char *what) {
        _cleanup_free_ char *err = NULL;
        _cleanup_(json_decrefp) json_t *seen = json_object();
        json_t *e;
        size_t i;

        fuzz_check(json_is_array(managed), "%s: managedFields is not a list", what);
        fuzz_check(fields_check(managed, &err) == 0, "%s: managedFields fail the check: %s", what,
                   strna(err));
        json_array_foreach (managed, i, e) {
                const char *m = json_string_value(json_object_get(e, "manager"));
                const char *op = json_string_value(json_object_get(e, "operation"));
                _cleanup_free_ char *k = strprintf("%s/%s", strna(m), strna(op));

                fuzz_check(k, "out of memory");
                fuzz_check(!json_object_get(seen, k), "%s: two entries for %s", what, k);
                fuzz_check(json_object_set_new(seen, k, json_true()) == 0, "out of memory");
        }
}

typedef struct applied {
        int rc;
        json_t *view, *managed, *conflicts;
        char *err;
} applied;

static void applied_done(applied *a) {
        json_decref(a->view);
        json_decref(a->managed);
        json_decref(a->conflicts);
        free(a->err);
}

static applied apply(json_t *managed, json_t *live_view, json_t *config_view, const char *manager,
                     bool force, const char *what) {
        applied a = {};
        _cleanup_free_ char *quoted = strprintf("\"%s\"", manager);

        fuzz_check(quoted, "out of memory");
        a.rc = fields_apply(managed, live_view, config_view, manager, "apps/v1", force, NULL, NOW,
                            &a.view, &a.managed, &a.conflicts, &a.err);
        fuzz_check(a.rc == 0 || a.rc == 1 || a.rc == -EINVAL || a.rc == -ENOMEM, "%s: returned %d",
                   what, a.rc);
        if (a.rc == -EINVAL) {
                fuzz_check(a.err && fuzz_utf8_valid(a.err), "%s: an error that is not UTF-8", what);
                fuzz_check(!a.view && !a.managed, "%s: refused, yet returned an object", what);
        } else if (a.rc == 1) {
                json_t *c;
                size_t i;

                fuzz_check(force == false, "%s: a forced apply had conflicts", what);
                fuzz_check(json_array_size(a.conflicts) > 0, "%s: a conflict without one", what);
                fuzz_check(!a.view && !a.managed, "%s: conflicts, yet returned an object", what);
                json_array_foreach (a.conflicts, i, c) {
                        const char *m = json_string_value(json_object_get(c, "manager"));
                        const char *f = json_string_value(json_object_get(c, "field"));
                        fuzz_check(m && f && *f, "%s: a conflict without manager or field", what);
                        fuzz_check(!streq(m, manager), "%s: %s conflicts with itself on %s", what,
                                   m, f);
                        fuzz_check(fuzz_utf8_valid(f), "%s: a field that is not UTF-8", what);
                }
        } else if (a.rc == 0) {
                fuzz_check(json_is_object(a.view), "%s: no object", what);
                check_managed(a.managed, what);
        }
        return a;
}

/* A applied again by "a" over its result: nothing moves. */
static void check_idempotent(applied *once, json_t *config_view) {
        applied again = apply(once->managed, once->view, config_view, "a", false, "A again");

        if (again.rc != -ENOMEM) {
                fuzz_check(again.rc == 0, "A applied again over its own result: %d (%s)", again.rc,
                           strna(again.err));
                fuzz_check(json_equal(again.view, once->view),
                           "A applied again changed the object");
                fuzz_check(json_equal(again.managed, once->managed),
                           "A applied again changed managedFields");
        }
        applied_done(&again);
}

/* B forced over A's result, then A again: what B took is B's, what it did
 * not stays A's, so A may conflict with B and no one else. */
static void check_after_forced_b(applied *base, json_t *av, json_t *bv) {
        applied b = apply(base->managed, base->view, bv, "b", true, "B forced"), again = {};
        json_t *c;
        size_t i;

        if (b.rc == 0) {
                again = apply(b.managed, b.view, av, "a", false, "A after B");
                if (again.rc == 1)
                        json_array_foreach (again.conflicts, i, c) {
                                const char *m = json_string_value(json_object_get(c, "manager"));
                                fuzz_check(startswith(strempty(m), "\"b\""),
                                           "A after B conflicts with %s", m);
                        }
        }
        applied_done(&again);
        applied_done(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = fuzz_strndup(data, size);
        json_t *docs[3] = {};
        _cleanup_(json_decrefp) json_t *lv = NULL, *empty = NULL, *managed0 = NULL, *av = NULL,
                                       *bv = NULL;
        char *line = text, *nl;
        applied a = {}, fa = {};

        for (size_t i = 0; i < 3; i++) {
                size_t nodes = 0;

                nl = line ? strchr(line, '\n') : NULL;
                if (nl)
                        *nl = 0;
                docs[i] = line ? json_loads(line, JSON_REJECT_DUPLICATES, NULL) : NULL;
                line = nl ? nl + 1 : NULL;
                if (!json_is_object(docs[i]) || !within_limits(docs[i], 0, &nodes))
                        goto done;
        }
        lv = fields_view(docs[0]);
        av = fields_view(docs[1]);
        bv = fields_view(docs[2]);
        empty = fields_view(NULL);
        fuzz_check(lv && av && bv && empty, "out of memory");

        /* created by "before" */
        managed0 = fields_update(NULL, empty, lv, "before", "apps/v1", NULL, NOW);
        if (!managed0) /* a keyed list's item without its key: the API refuses it before */
                goto done;
        check_managed(managed0, "the create");

        a = apply(managed0, lv, av, "a", false, "A");
        if (a.rc == 0)
                check_idempotent(&a, av);
        if (a.rc == 1) {
                /* forced, it goes through; then it is A's, and again is no conflict */
                fa = apply(managed0, lv, av, "a", true, "A forced");
                if (fa.rc == 0)
                        check_idempotent(&fa, av);
        }
        if (a.rc == 0 || fa.rc == 0)
                check_after_forced_b(a.rc == 0 ? &a : &fa, av, bv);
done:
        applied_done(&a);
        applied_done(&fa);
        for (size_t i = 0; i < 3; i++)
                json_decref(docs[i]);
        return 0;
}
