/* SPDX-License-Identifier: MIT */

/*
 * fuzz-patch: the PATCH request bodies of the API, on the document they
 * patch (api/patch.c).
 *
 * Input: the target document on the first line, the patch after it, both
 * JSON parsed as the API parses a body (jansson, duplicate keys refused).
 * The patch is applied every way the API can: as an RFC 7386 merge patch, as
 * Kubernetes' strategic merge patch (lists merged by key, kubectl's
 * directives) and as an RFC 6902 JSON Patch (which refuses anything but a
 * list of ops).
 * Inputs whose target or patch already exceed the spec limits are skipped:
 * the property is about what patching adds.
 *
 * Properties (a violation aborts):
 *  - a patched document stays within the spec limits (SPEC_MAX_DEPTH,
 *    SPEC_MAX_ITEMS, SPEC_MAX_NODES) after every operation: a JSON Patch is
 *    also applied one op at a time, so that a document that doubles with
 *    each copy is caught at twice the limit, not at 2^ops times it;
 *  - the whole JSON Patch, when it applies, gives what its ops give one at
 *    a time;
 *  - a merge patch is idempotent (RFC 7386): patching the result again
 *    changes nothing; so is a strategic merge patch (kubectl sends one
 *    again at each apply that finds nothing to change);
 *  - every error string is UTF-8 (it goes into a JSON Status);
 *  - and, from the sanitizers, no leak, no memory error, no UB.
 */

#include "fuzz.h"
#include "patch.h"
#include "tend/spec.h"

typedef struct limits_walk {
        size_t nodes;
        unsigned depth;      /* of the deepest collection */
        const char *problem; /* static string */
} limits_walk;

/* The limits spec_parse() puts on input, counted as it counts them: every
 * value is a node, and collections nest at most SPEC_MAX_DEPTH deep. */
static void walk_limits(json_t *j, unsigned depth, limits_walk *w) {
        const char *key;
        json_t *v;
        size_t i;

        if (w->problem)
                return;
        if (++w->nodes > SPEC_MAX_NODES) {
                w->problem = "more than SPEC_MAX_NODES values";
                return;
        }
        if (!json_is_object(j) && !json_is_array(j))
                return;
        w->depth = MAX(w->depth, depth + 1);
        if (depth + 1 > SPEC_MAX_DEPTH) {
                w->problem = "nested deeper than SPEC_MAX_DEPTH";
                return;
        }
        if ((json_is_object(j) ? json_object_size(j) : json_array_size(j)) > SPEC_MAX_ITEMS) {
                w->problem = "a collection of more than SPEC_MAX_ITEMS entries";
                return;
        }
        if (json_is_object(j)) {
                json_object_foreach (j, key, v)
                        walk_limits(v, depth + 1, w);
        } else
                json_array_foreach (j, i, v)
                        walk_limits(v, depth + 1, w);
}

/* NULL when j is within the spec limits, else which one it passes. */
static const char *spec_limits_problem(json_t *j, limits_walk *ret) {
        limits_walk w = {};

        walk_limits(j, 0, &w);
        if (ret)
                *ret = w;
        return w.problem;
}

/* Coverage gives libFuzzer no reason to keep an input that only makes the
 * document bigger, so on its own it stumbles on the limits by luck, if
 * ever. These counters (libFuzzer reads the section as extra coverage, on
 * Linux) are a feature per power of two of a patched document's values and
 * per depth it reaches: an input that grows the document is kept, and the
 * next mutation starts from it. */
#ifdef __clang__
__attribute__((section("__libfuzzer_extra_counters"), used))
#endif
static volatile uint8_t growth_counters[2 * 64];

static void note_growth(const limits_walk *w) {
        unsigned log2_nodes = w->nodes ? 63u - (unsigned) __builtin_clzll(w->nodes) : 0;

        growth_counters[MIN(log2_nodes, 63u)] = 1;
        growth_counters[64 + MIN(w->depth, 63u)] = 1;
}

/*
 * The bound property: whatever the ops, a patched document is within the
 * limits of a manifest. It once failed within seconds: JSON Patch "copy"
 * (and "add" of a deep value at a deep path) was not bounded, so
 * {"op":"copy","from":"","path":"/a"} repeated doubled the document each
 * time; its reproducers are in crashes/fuzz-patch/.
 */
static void check_patch_result_within_spec_limits(json_t *result, const char *what) {
        limits_walk w;
        const char *problem = spec_limits_problem(result, &w);

        note_growth(&w);

        fuzz_check(!problem, "%s: the patched document exceeds the spec limits: %s", what, problem);
}

static void check_error(const char *err, const char *what) {
        fuzz_check(err, "%s failed without saying why", what);
        fuzz_check(fuzz_utf8_valid(err), "%s: error is not UTF-8: %s", what, err);
}

static void fuzz_merge_patch(json_t *target, json_t *patch) {
        _cleanup_free_ char *err = NULL, *err2 = NULL;
        _cleanup_(json_decrefp) json_t *once = patch_merge(target, patch, &err);
        _cleanup_(json_decrefp) json_t *twice = NULL;

        if (!once) {
                check_error(err, "merge patch");
                return;
        }
        fuzz_check(!err, "merge patch succeeded with an error: %s", err);
        check_patch_result_within_spec_limits(once, "merge patch");
        twice = patch_merge(once, patch, &err2);
        fuzz_check(twice && json_equal(once, twice), "merge patch is not idempotent");
}

static void fuzz_strategic_patch(json_t *target, json_t *patch) {
        _cleanup_free_ char *err = NULL, *err2 = NULL;
        _cleanup_(json_decrefp) json_t *once = patch_strategic(target, patch, &err);
        _cleanup_(json_decrefp) json_t *twice = NULL;

        if (!once) {
                check_error(err, "strategic merge patch");
                return;
        }
        fuzz_check(!err, "strategic merge patch succeeded with an error: %s", err);
        check_patch_result_within_spec_limits(once, "strategic merge patch");
        twice = patch_strategic(once, patch, &err2);
        fuzz_check(twice, "strategic merge patch applies once, not twice: %s", strna(err2));
        fuzz_check(json_equal(once, twice), "strategic merge patch is not idempotent");
}

/* Applies ops one at a time, checking the limits after each; returns the
 * result, or NULL where an op failed. */
static json_t *json_patch_stepwise(json_t *target, json_t *ops) {
        _cleanup_(json_decrefp) json_t *doc = json_incref(target);
        json_t *op;
        size_t i;

        json_array_foreach (ops, i, op) {
                _cleanup_(json_decrefp) json_t *one = json_array();
                _cleanup_free_ char *err = NULL, *what = NULL;
                json_t *next;

                fuzz_check(one && json_array_append(one, op) == 0, "out of memory");
                next = patch_json(doc, one, &err);
                what = strprintf("JSON patch operation %zu alone", i);
                fuzz_check(what, "out of memory");
                if (!next) {
                        check_error(err, what);
                        return NULL;
                }
                fuzz_check(!err, "%s succeeded with an error: %s", what, err);
                json_decref(doc);
                doc = next;
                check_patch_result_within_spec_limits(doc, what);
        }
        return TAKE_PTR(doc);
}

static void fuzz_json_patch(json_t *target, json_t *ops) {
        _cleanup_(json_decrefp) json_t *stepwise = NULL, *whole = NULL;
        _cleanup_free_ char *err = NULL;

        if (json_is_array(ops))
                stepwise = json_patch_stepwise(target, ops);
        whole = patch_json(target, ops, &err);
        if (!whole) {
                check_error(err, "JSON patch");
                return;
        }
        fuzz_check(!err, "JSON patch succeeded with an error: %s", err);
        check_patch_result_within_spec_limits(whole, "JSON patch");
        fuzz_check(stepwise && json_equal(whole, stepwise),
                   "JSON patch applies whole but not op by op, or to another document");
}

#ifdef TEND_LIBFUZZER
/* ---- a mutator that knows what a JSON Patch is ---------------------------------------- */

/*
 * Byte mutations rarely turn one op of a patch into two, or a pointer into
 * another that exists: the JSON has to stay valid for the patch to be read
 * at all. So every other mutation (libFuzzer's structure-aware fuzzing)
 * parses the input, changes it as a list of ops - an op doubled, dropped,
 * moved, renamed, a "path" or "from" pointed at something in the target -
 * and writes it back; the others are libFuzzer's own, on the bytes.
 */

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);

/* "" or "/a/0/b~1c", a pointer to something in j, or one past the end of
 * an array ("/-"). New string. */
static char *random_pointer(json_t *j, unsigned *rnd) {
        _cleanup_buf_ tend_buf p = TEND_BUF_INIT(4096);

        while ((json_is_object(j) || json_is_array(j)) && rand_r(rnd) % 4 != 0) {
                size_t n = json_is_object(j) ? json_object_size(j) : json_array_size(j);
                size_t pick = rand_r(rnd) % (n + 1);

                if (json_is_array(j)) {
                        if (pick == n) {
                                (void) tend_buf_adds(&p, "/-");
                                break;
                        }
                        (void) tend_buf_addf(&p, "/%zu", pick);
                        j = json_array_get(j, pick);
                } else {
                        const char *key;
                        json_t *v;
                        size_t i = 0;

                        if (pick == n)
                                break;
                        json_object_foreach (j, key, v)
                                if (i++ == pick)
                                        break;
                        (void) tend_buf_adds(&p, "/");
                        for (const char *c = key; *c; c++)
                                (void) tend_buf_adds(&p, *c == '~'   ? "~0"
                                                         : *c == '/' ? "~1"
                                                                     : (char[]){ *c, 0 });
                        j = v;
                }
        }
        return tend_buf_take(&p);
}

static void mutate_ops(json_t *target, json_t *ops, unsigned *rnd) {
        static const char *const names[] = { "add", "remove", "replace", "move", "copy", "test" };
        size_t n = json_array_size(ops);
        json_t *op;

        if (n == 0) {
                (void) json_array_append_new(
                        ops, json_pack("{s:s, s:s, s:s}", "op", "copy", "from", "", "path", "/-"));
                return;
        }
        op = json_array_get(ops, rand_r(rnd) % n);
        switch (rand_r(rnd) % 6) {
        case 0: /* double an op, next to itself or elsewhere */
                (void) json_array_insert_new(ops, rand_r(rnd) % (n + 1), json_deep_copy(op));
                break;
        case 1:
                (void) json_array_remove(ops, rand_r(rnd) % n);
                break;
        case 2: { /* move an op elsewhere */
                json_t *o = json_incref(op);
                size_t from = rand_r(rnd) % n;

                (void) json_array_remove(ops, from);
                (void) json_array_insert_new(ops, rand_r(rnd) % n, o);
                break;
        }
        case 3:
        case 4: {
                _cleanup_free_ char *ptr = random_pointer(target, rnd);
                if (ptr && json_is_object(op))
                        (void) json_object_set_new(op, rand_r(rnd) % 2 ? "path" : "from",
                                                   json_string(ptr));
                break;
        }
        default:
                if (json_is_object(op))
                        (void) json_object_set_new(
                                op, "op", json_string(names[rand_r(rnd) % ELEMENTSOF(names)]));
        }
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed) {
        const char *nl = memchr(data, '\n', size);
        _cleanup_(json_decrefp) json_t *target = NULL, *ops = NULL;
        _cleanup_free_ char *t = NULL, *o = NULL;
        unsigned rnd = seed;
        size_t tn, on;

        if (seed % 2 == 0 || !nl)
                return LLVMFuzzerMutate(data, size, max_size);
        target = json_loadb((const char *) data, (size_t) (nl - (const char *) data), 0, NULL);
        ops = json_loadb(nl + 1, size - (size_t) (nl - (const char *) data) - 1, 0, NULL);
        if (!target || !json_is_array(ops))
                return LLVMFuzzerMutate(data, size, max_size);

        mutate_ops(target, ops, &rnd);
        t = json_dumps(target, JSON_COMPACT);
        o = json_dumps(ops, JSON_COMPACT);
        if (!t || !o)
                return LLVMFuzzerMutate(data, size, max_size);
        tn = strlen(t);
        on = strlen(o);
        if (tn + 1 + on > max_size)
                return LLVMFuzzerMutate(data, size, max_size);
        memcpy(data, t, tn);
        data[tn] = '\n';
        memcpy(data + tn + 1, o, on);
        return tn + 1 + on;
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *text = (const char *) data;
        const char *nl = memchr(text, '\n', size);
        _cleanup_(json_decrefp) json_t *target = NULL, *patch = NULL;
        json_error_t e;

        if (!nl)
                return 0;
        target = json_loadb(text, (size_t) (nl - text), JSON_REJECT_DUPLICATES, &e);
        patch = json_loadb(nl + 1, size - (size_t) (nl - text) - 1, JSON_REJECT_DUPLICATES, &e);
        if (!target || !patch || spec_limits_problem(target, NULL) ||
            spec_limits_problem(patch, NULL))
                return 0;

        fuzz_merge_patch(target, patch);
        fuzz_strategic_patch(target, patch);
        fuzz_json_patch(target, patch);
        return 0;
}
