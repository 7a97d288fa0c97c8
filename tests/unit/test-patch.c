/* SPDX-License-Identifier: MIT */

/* Unit tests of the PATCH bodies (api/patch.c): RFC 6902 and 7386 as
 * written, strict RFC 6901 pointers, and bounded work and results. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "patch.h"
#include "tend/base.h"
#include "tend/spec.h"

static json_t *parse(const char *text) {
        json_error_t e;
        json_t *j = json_loads(text, 0, &e);
        if (!j)
                fail_msg("%s: %s", text, e.text);
        return j;
}

/* Applies a JSON patch; returns the result as canonical text, or the error
 * prefixed by "error: ". */
static char *run(const char *doc, const char *ops) {
        _cleanup_(json_decrefp) json_t *d = parse(doc), *o = parse(ops), *r = NULL;
        _cleanup_free_ char *err = NULL;

        r = patch_json(d, o, &err);
        if (!r) {
                assert_non_null(err);
                return strprintf("error: %s", err);
        }
        assert_null(err);
        return json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}

#define assert_patch(doc, ops, want)                       \
        do {                                               \
                _cleanup_free_ char *_got = run(doc, ops); \
                assert_string_equal(_got, want);           \
        } while (0)

#define assert_patch_error(doc, ops, substring)                                         \
        do {                                                                            \
                _cleanup_free_ char *_got = run(doc, ops);                              \
                if (!startswith(_got, "error: ") || !strstr(_got, substring))           \
                        fail_msg("want an error with \"%s\", got %s", substring, _got); \
        } while (0)

static void test_operations(void **state) {
        assert_patch("{\"a\":{\"b\":1}}", "[{\"op\":\"add\",\"path\":\"/a/c\",\"value\":2}]",
                     "{\"a\":{\"b\":1,\"c\":2}}");
        assert_patch("{\"a\":[1,2]}", "[{\"op\":\"add\",\"path\":\"/a/-\",\"value\":3}]",
                     "{\"a\":[1,2,3]}");
        assert_patch("{\"a\":[1,2]}", "[{\"op\":\"add\",\"path\":\"/a/0\",\"value\":0}]",
                     "{\"a\":[0,1,2]}");
        assert_patch("{\"a\":[1,2]}", "[{\"op\":\"remove\",\"path\":\"/a/1\"}]", "{\"a\":[1]}");
        assert_patch("{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"/a\",\"value\":[true]}]",
                     "{\"a\":[true]}");
        assert_patch("{\"a\":{\"x\":1},\"b\":{}}",
                     "[{\"op\":\"move\",\"from\":\"/a/x\",\"path\":\"/b/y\"}]",
                     "{\"a\":{},\"b\":{\"y\":1}}");
        assert_patch("{\"a\":{\"x\":1}}", "[{\"op\":\"copy\",\"from\":\"/a\",\"path\":\"/b\"}]",
                     "{\"a\":{\"x\":1},\"b\":{\"x\":1}}");
        assert_patch("{\"a/b\":{\"m~n\":1}}",
                     "[{\"op\":\"test\",\"path\":\"/a~1b/m~0n\",\"value\":1},"
                     "{\"op\":\"remove\",\"path\":\"/a~1b/m~0n\"}]",
                     "{\"a/b\":{}}");
        /* An object key may be any string, "01" included. */
        assert_patch("{\"01\":1}", "[{\"op\":\"remove\",\"path\":\"/01\"}]", "{}");
        assert_patch("{\"a\":1}", "[{\"op\":\"replace\",\"path\":\"\",\"value\":{\"b\":2}}]",
                     "{\"b\":2}");
        /* All or nothing: the test fails, so the add before it is undone. */
        assert_patch_error("{\"a\":1}",
                           "[{\"op\":\"add\",\"path\":\"/b\",\"value\":2},"
                           "{\"op\":\"test\",\"path\":\"/a\",\"value\":3}]",
                           "operation 1 (test): test failed at /a");
        assert_patch_error("{}", "[{\"op\":\"copy\",\"path\":\"/b\"}]", "copy needs \"from\"");
        assert_patch_error("{}", "[{\"op\":\"frob\",\"path\":\"/b\"}]", "unknown op \"frob\"");
        assert_patch_error("{}", "[{\"op\":\"remove\",\"path\":\"/b\"}]", "no value at /b");
}

/* RFC 6901: an array index is "0" or digits without a leading zero, "-" is
 * only the end of an array in "add", and '~' is only ~0 or ~1. */
static void test_pointers_strict(void **state) {
        assert_patch_error("{\"a\":[1,2]}", "[{\"op\":\"remove\",\"path\":\"/a/01\"}]",
                           "no value at /a/01");
        assert_patch_error("{\"a\":[1,2]}", "[{\"op\":\"remove\",\"path\":\"/a/-0\"}]",
                           "no value at /a/-0");
        assert_patch_error("{\"a\":[1,2]}", "[{\"op\":\"remove\",\"path\":\"/a/+1\"}]",
                           "no value at /a/+1");
        assert_patch_error("{\"a\":[1,2]}", "[{\"op\":\"add\",\"path\":\"/a/01\",\"value\":0}]",
                           "no value at /a/01");
        assert_patch_error("{\"a\":[1,2]}", "[{\"op\":\"remove\",\"path\":\"/a/-\"}]",
                           "no value at /a/-");
        assert_patch_error("{\"a~2\":1}", "[{\"op\":\"remove\",\"path\":\"/a~2\"}]",
                           "/a~2 is not a JSON pointer");
        assert_patch_error("{\"a~\":1}", "[{\"op\":\"remove\",\"path\":\"/a~\"}]",
                           "/a~ is not a JSON pointer");
        assert_patch_error("{\"a\":1}", "[{\"op\":\"remove\",\"path\":\"a\"}]",
                           "a is not a JSON pointer");
        assert_patch_error("{\"a\":{\"b\":{}}}",
                           "[{\"op\":\"move\",\"from\":\"/a\",\"path\":\"/a/b/c\"}]",
                           "cannot move /a into itself");
}

/* Each copy of /spec into itself doubles the document: 25 of them once
 * took tendd to 24 GB. The work is bounded and the patch refused. */
static void test_doubling_bounded(void **state) {
        _cleanup_(tend_buf_free) tend_buf ops = TEND_BUF_INIT(1 << 20);

        assert_int_equal(tend_buf_adds(&ops, "["), 0);
        for (int i = 0; i < 40; i++)
                assert_int_equal(tend_buf_addf(&ops,
                                               "%s{\"op\":\"copy\",\"from\":\"/spec\",\"path\":"
                                               "\"/spec/template/x%d\"}",
                                               i ? "," : "", i),
                                 0);
        assert_int_equal(tend_buf_adds(&ops, "]"), 0);
        assert_patch_error("{\"spec\":{\"template\":{\"a\":[1,2,3,4,5,6,7,8]}}}",
                           tend_buf_str(&ops), "the patch adds more than 200000 values in all");

        /* Side by side, not nested. */
        tend_buf_reset(&ops);
        assert_int_equal(tend_buf_adds(&ops, "["), 0);
        for (int i = 0; i < 40; i++)
                assert_int_equal(tend_buf_addf(&ops,
                                               "%s{\"op\":\"copy\",\"from\":\"/a\",\"path\":"
                                               "\"/a/%d\"}",
                                               i ? "," : "", i),
                                 0);
        assert_int_equal(tend_buf_adds(&ops, "]"), 0);
        assert_patch_error("{\"a\":[1,2,3,4,5,6,7,8,9,10]}", tend_buf_str(&ops),
                           "the patch adds more than 200000 values in all");
}

/* Nesting is bounded at each step, not only in the result (the copies
 * would nest past any stack before the end). */
static void test_depth_bounded(void **state) {
        _cleanup_(tend_buf_free) tend_buf ops = TEND_BUF_INIT(1 << 20);

        assert_int_equal(tend_buf_adds(&ops, "[{\"op\":\"add\",\"path\":\"/x\",\"value\":"), 0);
        for (int i = 0; i < 64; i++)
                assert_int_equal(tend_buf_adds(&ops, "["), 0);
        for (int i = 0; i < 64; i++)
                assert_int_equal(tend_buf_adds(&ops, "]"), 0);
        assert_int_equal(tend_buf_adds(&ops, "}]"), 0);
        assert_patch_error("{}", tend_buf_str(&ops), "would nest deeper than 64 levels");

        /* A chain copied into itself, deeper each time. */
        tend_buf_reset(&ops);
        assert_int_equal(tend_buf_adds(&ops, "["), 0);
        for (int i = 0; i < 100; i++)
                assert_int_equal(tend_buf_addf(&ops,
                                               "%s{\"op\":\"copy\",\"from\":\"/a\",\"path\":"
                                               "\"/a/b\"}",
                                               i ? "," : ""),
                                 0);
        assert_int_equal(tend_buf_adds(&ops, "]"), 0);
        assert_patch_error("{\"a\":{\"b\":1}}", tend_buf_str(&ops),
                           "would nest deeper than 64 levels");
}

/* The result must be within a manifest's limits, whichever patch made it. */
static void test_results_bounded(void **state) {
        _cleanup_(tend_buf_free) tend_buf b = TEND_BUF_INIT(1 << 20);
        _cleanup_(json_decrefp) json_t *target = parse("{\"a\":{}}"), *patch = NULL, *r = NULL;
        _cleanup_free_ char *err = NULL;

        assert_int_equal(tend_buf_adds(&b, "{\"a\":{"), 0);
        for (int i = 0; i <= SPEC_MAX_ITEMS; i++)
                assert_int_equal(tend_buf_addf(&b, "%s\"k%d\":1", i ? "," : "", i), 0);
        assert_int_equal(tend_buf_adds(&b, "}}"), 0);
        patch = parse(tend_buf_str(&b));
        r = patch_merge(target, patch, &err);
        assert_null(r);
        assert_non_null(err);
        assert_non_null(strstr(err, "the patched object is too large: object has more than "
                                    "10000 entries"));
        free(err);
        err = NULL;

        /* A list that outgrows the limit one add at a time. */
        tend_buf_reset(&b);
        assert_int_equal(tend_buf_adds(&b, "{\"a\":["), 0);
        for (int i = 0; i < SPEC_MAX_ITEMS; i++)
                assert_int_equal(tend_buf_addf(&b, "%s%d", i ? "," : "", i), 0);
        assert_int_equal(tend_buf_adds(&b, "]}"), 0);
        assert_patch_error(tend_buf_str(&b), "[{\"op\":\"add\",\"path\":\"/a/-\",\"value\":0}]",
                           "a list of more than 10000 entries");
}

/* Strategic merge patch, with cases from Kubernetes' documented behaviour
 * (the "Update API objects in place using kubectl patch" task and the
 * strategic-merge-patch design document), on tend's lists. */
static char *smp_run(const char *doc, const char *patch) {
        _cleanup_(json_decrefp) json_t *d = parse(doc), *p = parse(patch), *r = NULL;
        _cleanup_free_ char *err = NULL;

        r = patch_strategic(d, p, &err);
        if (!r) {
                assert_non_null(err);
                return strprintf("error: %s", err);
        }
        return json_dumps(r, JSON_COMPACT | JSON_SORT_KEYS);
}

#define assert_smp(doc, patch, want)                             \
        do {                                                     \
                _cleanup_free_ char *_got = smp_run(doc, patch); \
                assert_string_equal(_got, want);                 \
        } while (0)

static void test_strategic(void **state) {
        const char *live =
                "{\"containers\":[{\"name\":\"a\",\"command\":[\"x\"],"
                "\"env\":[{\"name\":\"A\",\"value\":\"1\"},{\"name\":\"B\",\"value\":\"2\"}],"
                "\"ports\":[{\"containerPort\":80,\"name\":\"http\"}]}]}";

        /* a container merges by name: what the patch leaves out stays (the data kubectl
         * patch lost when it was a merge patch) */
        assert_smp(
                live, "{\"containers\":[{\"name\":\"a\",\"command\":[\"y\"]}]}",
                "{\"containers\":[{\"command\":[\"y\"],\"env\":[{\"name\":\"A\",\"value\":\"1\"},"
                "{\"name\":\"B\",\"value\":\"2\"}],\"name\":\"a\",\"ports\":[{\"containerPort\":80,"
                "\"name\":\"http\"}]}]"
                "}");
        /* env by name: one changed, one added (kubectl set env) */
        assert_smp(
                live,
                "{\"$setElementOrder/"
                "containers\":[{\"name\":\"a\"}],\"containers\":[{\"name\":\"a\","
                "\"env\":[{\"name\":\"B\",\"value\":\"3\"},{\"name\":\"C\",\"value\":\"4\"}]}]}",
                "{\"containers\":[{\"command\":[\"x\"],\"env\":[{\"name\":\"A\",\"value\":\"1\"},"
                "{\"name\":\"B\",\"value\":\"3\"},{\"name\":\"C\",\"value\":\"4\"}],\"name\":\"a\","
                "\"ports\":[{\"containerPort\":80,\"name\":\"http\"}]}]}");
        /* $patch: delete of an element; $setElementOrder puts the listed first */
        assert_smp(
                live,
                "{\"containers\":[{\"name\":\"a\",\"$setElementOrder/env\":[{\"name\":\"B\"}],"
                "\"env\":[{\"$patch\":\"delete\",\"name\":\"A\"}]}]}",
                "{\"containers\":[{\"command\":[\"x\"],\"env\":[{\"name\":\"B\",\"value\":\"2\"}],"
                "\"name\":\"a\",\"ports\":[{\"containerPort\":80,\"name\":\"http\"}]}]}");
        assert_smp("{\"env\":[{\"name\":\"A\"},{\"name\":\"B\"}]}",
                   "{\"$setElementOrder/env\":[{\"name\":\"B\"},{\"name\":\"A\"}]}",
                   "{\"env\":[{\"name\":\"B\"},{\"name\":\"A\"}]}");
        /* $patch: replace as an element replaces the list */
        assert_smp("{\"env\":[{\"name\":\"A\"},{\"name\":\"B\"}]}",
                   "{\"env\":[{\"name\":\"C\"},{\"$patch\":\"replace\"}]}",
                   "{\"env\":[{\"name\":\"C\"}]}");
        /* ports merge by containerPort, as Kubernetes' */
        assert_smp(
                live,
                "{\"containers\":[{\"name\":\"a\",\"ports\":[{\"containerPort\":81,"
                "\"name\":\"admin\"}]}]}",
                "{\"containers\":[{\"command\":[\"x\"],\"env\":[{\"name\":\"A\",\"value\":\"1\"},"
                "{\"name\":\"B\",\"value\":\"2\"}],\"name\":\"a\",\"ports\":[{\"containerPort\":80,"
                "\"name\":\"http\"},{\"containerPort\":81,\"name\":\"admin\"}]}]}");
        /* a merge key that names nothing is an error, not an item appended at each apply */
        assert_smp(live, "{\"containers\":[{\"name\":null,\"command\":[\"z\"]}]}",
                   "error: containers: an element's merge key is not a string or a number");
        assert_smp(live, "{\"containers\":[{\"name\":[\"a\"],\"command\":[\"z\"]}]}",
                   "error: containers: an element's merge key is not a string or a number");
        /* an item without its merge key is an error */
        assert_smp(live, "{\"containers\":[{\"name\":\"a\",\"ports\":[{\"name\":\"admin\"}]}]}",
                   "error: ports: an element has no merge key");
        /* primitive lists: replaced, or values taken out */
        assert_smp("{\"args\":[\"-a\",\"-b\",\"-a\"]}",
                   "{\"$deleteFromPrimitiveList/args\":[\"-a\"]}", "{\"args\":[\"-b\"]}");
        /* maps: $patch replace and delete, null deletes, $retainKeys */
        assert_smp("{\"s\":{\"a\":1,\"b\":2}}", "{\"s\":{\"$patch\":\"replace\",\"c\":3}}",
                   "{\"s\":{\"c\":3}}");
        assert_smp("{\"s\":{\"a\":1},\"t\":1}", "{\"s\":{\"$patch\":\"delete\"}}", "{\"t\":1}");
        assert_smp("{\"s\":{\"a\":1},\"t\":1}", "{\"s\":null}", "{\"t\":1}");
        assert_smp("{\"strategy\":{\"type\":\"RollingUpdate\",\"rollingUpdate\":{\"maxSurge\":1}}}",
                   "{\"strategy\":{\"$retainKeys\":[\"type\"],\"type\":\"Recreate\"}}",
                   "{\"strategy\":{\"type\":\"Recreate\"}}");
        /* refused: an unknown directive, an element without its key, a bad $patch */
        _cleanup_free_ char *e1 = smp_run(live, "{\"$frobnicate\":1}");
        assert_non_null(strstr(e1, "error: $frobnicate: not a strategic merge patch directive"));
        _cleanup_free_ char *e2 = smp_run(live, "{\"containers\":[{\"command\":[\"y\"]}]}");
        assert_non_null(strstr(e2, "error: containers: an element has no merge key"));
        _cleanup_free_ char *e3 = smp_run(live, "{\"$patch\":\"sideways\"}");
        assert_non_null(strstr(e3, "error: $patch:"));
        /* linear: 5000 elements, a patch of 5000 more (half of them new)
         * and a delete, element by element, looked up by key (a scan was
         * 25 million comparisons) */
        _cleanup_(json_decrefp) json_t *big = json_pack("{s:[]}", "env"),
                                       *bigp = json_pack("{s:[{s:s, s:s}]}", "env", "name", "V0",
                                                         "$patch", "delete");
        for (int i = 0; i < 7500; i++) {
                char name[16];
                snprintf(name, sizeof name, "V%d", i);
                if (i < 5000)
                        json_array_append_new(json_object_get(big, "env"),
                                              json_pack("{s:s}", "name", name));
                if (i >= 2500)
                        json_array_append_new(json_object_get(bigp, "env"),
                                              json_pack("{s:s, s:s}", "name", name, "value", "x"));
        }
        _cleanup_free_ char *err = NULL;
        _cleanup_(json_decrefp) json_t *merged = patch_strategic(big, bigp, &err);
        assert_non_null(merged);
        json_t *env = json_object_get(merged, "env");
        assert_int_equal(json_array_size(env), 7499);
        assert_string_equal(json_string_value(json_object_get(json_array_get(env, 0), "name")),
                            "V1");
        assert_null(json_object_get(json_array_get(env, 0), "value"));
        assert_string_equal(json_string_value(json_object_get(json_array_get(env, 2499), "value")),
                            "x");
        assert_string_equal(json_string_value(json_object_get(json_array_get(env, 7498), "name")),
                            "V7499");
}

/* The directives by hash, as they were by scan: duplicates, order, kinds. */
static void test_strategic_lookups(void **state) {
        (void) state;
        /* a delete takes the last element of a duplicated key (as a scan
         * from the start found it); a merge after it finds none left */
        assert_smp("{\"env\":[{\"name\":\"A\",\"value\":\"1\"},{\"name\":\"A\",\"value\":\"2\"},"
                   "{\"name\":\"B\"}]}",
                   "{\"env\":[{\"name\":\"A\",\"$patch\":\"delete\"},{\"name\":\"B\",\"value\":"
                   "\"b\"}]}",
                   "{\"env\":[{\"name\":\"A\",\"value\":\"1\"},{\"name\":\"B\",\"value\":\"b\"}]}");
        /* a new element merged twice in one patch is one element */
        assert_smp("{\"env\":[]}",
                   "{\"env\":[{\"name\":\"N\",\"value\":\"1\"},{\"name\":\"N\",\"valueFrom\":{}}]}",
                   "{\"env\":[{\"name\":\"N\",\"value\":\"1\",\"valueFrom\":{}}]}");
        /* $setElementOrder: each listed key takes the first of its equals
         * not yet taken; the unlisted keep their order, after */
        assert_smp("{\"env\":[{\"name\":\"A\"},{\"name\":\"B\",\"value\":\"1\"},{\"name\":\"C\"},"
                   "{\"name\":\"B\",\"value\":\"2\"}]}",
                   "{\"$setElementOrder/env\":[{\"name\":\"B\"},{\"name\":\"C\"},{\"name\":\"B\"},"
                   "{\"name\":\"Z\"}]}",
                   "{\"env\":[{\"name\":\"B\",\"value\":\"1\"},{\"name\":\"C\"},"
                   "{\"name\":\"B\",\"value\":\"2\"},{\"name\":\"A\"}]}");
        /* a primitive list's order: values, an integer is not a string */
        assert_smp("{\"args\":[\"x\",\"1\",1,\"y\"]}", "{\"$setElementOrder/args\":[1,\"y\"]}",
                   "{\"args\":[1,\"y\",\"x\",\"1\"]}");
        /* $deleteFromPrimitiveList: every equal value, by kind */
        assert_smp("{\"args\":[\"a\",\"1\",1,\"a\",{\"k\":[1,2]},true]}",
                   "{\"$deleteFromPrimitiveList/args\":[\"a\",1,{\"k\":[1,2]},\"zz\"]}",
                   "{\"args\":[\"1\",true]}");
        /* $retainKeys: string entries name keys; others name nothing */
        assert_smp("{\"strategy\":{\"type\":\"Recreate\",\"rollingUpdate\":{},\"1\":2}}",
                   "{\"strategy\":{\"$retainKeys\":[\"type\",1],\"type\":\"RollingUpdate\"}}",
                   "{\"strategy\":{\"type\":\"RollingUpdate\"}}");
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_operations),        cmocka_unit_test(test_pointers_strict),
                cmocka_unit_test(test_doubling_bounded),  cmocka_unit_test(test_depth_bounded),
                cmocka_unit_test(test_results_bounded),   cmocka_unit_test(test_strategic),
                cmocka_unit_test(test_strategic_lookups),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
