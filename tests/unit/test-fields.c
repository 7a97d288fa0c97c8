/* SPDX-License-Identifier: MIT */

/* Unit tests of field ownership (spec/fields.c): what an update takes, what
 * an apply merges, prunes and conflicts on, as Kubernetes' server-side
 * apply does for the same objects. The same behaviour through kubectl is in
 * tests/cli/kubectl.sh. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "tend/fields.h"
#include "tend/base.h"

#define NOW "2026-12-04T08:00:00Z"

static json_t *parse(const char *text) {
        json_error_t e;
        json_t *j = json_loads(text, 0, &e);
        if (!j)
                fail_msg("%s: %s", text, e.text);
        return j;
}

static char *dump(json_t *j) {
        return json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}

#define assert_json(j, want)                                       \
        do {                                                       \
                _cleanup_free_ char *_got = dump(j);               \
                _cleanup_(json_decrefp) json_t *_w = parse(want);  \
                _cleanup_free_ char *_want = dump(_w);             \
                if (!streq(_got, _want))                           \
                        fail_msg("got  %s\nwant %s", _got, _want); \
        } while (0)

static const char *const base_view =
        "{\"metadata\":{\"labels\":{\"app\":\"web\"}},"
        "\"spec\":{\"replicas\":2,\"selector\":{\"matchLabels\":{\"app\":\"web\"}},"
        "\"template\":{\"spec\":{\"containers\":[{\"name\":\"web\",\"command\":[\"/bin/web\"],"
        "\"env\":[{\"name\":\"A\",\"value\":\"1\"}]}]}}}}";

/* The env list of a view's first container. */
static json_t *env_of(json_t *view) {
        json_t *spec = json_object_get(json_object_get(json_object_get(view, "spec"), "template"),
                                       "spec");
        return json_object_get(json_array_get(json_object_get(spec, "containers"), 0), "env");
}

/* The fieldsV1 of entry (manager, op), or NULL. */
static json_t *fields_of(json_t *managed, const char *manager, const char *op) {
        size_t i;
        json_t *e;

        json_array_foreach (managed, i, e)
                if (streq(json_string_value(json_object_get(e, "manager")), manager) &&
                    streq(json_string_value(json_object_get(e, "operation")), op))
                        return json_object_get(e, "fieldsV1");
        return NULL;
}

static void test_update_owns_what_it_set(void **state) {
        _cleanup_(json_decrefp) json_t *v = parse(base_view), *m = NULL, *v2 = NULL, *m2 = NULL;

        (void) state;
        m = fields_update(NULL, NULL, v, "kubectl-create", "apps/v1", NULL, NOW);
        assert_non_null(m);
        assert_int_equal(json_array_size(m), 1);
        assert_json(fields_of(m, "kubectl-create", "Update"),
                    "{\"f:metadata\":{\"f:labels\":{\"f:app\":{}}},"
                    "\"f:spec\":{\"f:replicas\":{},\"f:selector\":{},\"f:template\":{\"f:spec\":"
                    "{\"f:containers\":{\"k:{\\\"name\\\":\\\"web\\\"}\":{\".\":{},"
                    "\"f:command\":{},\"f:env\":{\"k:{\\\"name\\\":\\\"A\\\"}\":{\".\":{},"
                    "\"f:name\":{},\"f:value\":{}}},\"f:name\":{}}}}}}}");
        assert_string_equal(json_string_value(json_object_get(json_array_get(m, 0), "time")), NOW);

        /* A scale by another manager takes spec.replicas, and only that. */
        v2 = json_deep_copy(v);
        json_object_set_new(json_object_get(v2, "spec"), "replicas", json_integer(5));
        m2 = fields_update(m, v, v2, "kubectl", "apps/v1", "scale", "2026-12-04T09:00:00Z");
        assert_non_null(m2);
        assert_int_equal(json_array_size(m2), 2);
        assert_json(fields_of(m2, "kubectl", "Update"), "{\"f:spec\":{\"f:replicas\":{}}}");
        assert_null(json_object_get(
                json_object_get(fields_of(m2, "kubectl-create", "Update"), "f:spec"),
                "f:replicas"));
        assert_string_equal(
                json_string_value(json_object_get(json_array_get(m2, 1), "subresource")), "scale");
        /* The time is that of the manager's own last change. */
        assert_string_equal(json_string_value(json_object_get(json_array_get(m2, 0), "time")), NOW);

        /* No change: the same entries, times included. */
        _cleanup_(json_decrefp) json_t *m3 = fields_update(m2, v2, v2, "kubectl", "apps/v1",
                                                           "scale", "2026-12-05T00:00:00Z");
        assert_true(json_equal(m3, m2));
}

/* Applies config by manager; returns the result code, the view and managed
 * in *view and *managed, conflicts in *conflicts. */
static int apply(json_t *managed, json_t *live, const char *config, const char *manager, bool force,
                 json_t **view, json_t **out, json_t **conflicts) {
        _cleanup_(json_decrefp) json_t *c = parse(config);
        _cleanup_free_ char *err = NULL;
        int r;

        *view = *out = *conflicts = NULL;
        r = fields_apply(managed, live, c, manager, "apps/v1", force, NULL, NOW, view, out,
                         conflicts, &err);
        if (r < 0 && err)
                print_message("error: %s\n", err);
        return r;
}

static const char *const applied_config =
        "{\"metadata\":{\"labels\":{\"app\":\"web\"}},"
        "\"spec\":{\"replicas\":2,\"template\":{\"spec\":{\"containers\":[{\"name\":\"web\","
        "\"command\":[\"/bin/web\"],\"env\":[{\"name\":\"A\",\"value\":\"1\"},"
        "{\"name\":\"B\",\"value\":\"2\"}]}]}}}}";

static void test_apply_merges_and_prunes(void **state) {
        _cleanup_(json_decrefp) json_t *live = parse(base_view), *v1 = NULL, *m1 = NULL, *c = NULL,
                                       *v2 = NULL, *m2 = NULL;

        (void) state;
        /* The first apply adds B, keeps what it does not name (selector). */
        assert_int_equal(apply(NULL, live, applied_config, "kubectl", false, &v1, &m1, &c), 0);
        assert_json(json_object_get(v1, "spec"),
                    "{\"replicas\":2,\"selector\":{\"matchLabels\":{\"app\":\"web\"}},"
                    "\"template\":{\"spec\":{\"containers\":[{\"name\":\"web\","
                    "\"command\":[\"/bin/web\"],\"env\":[{\"name\":\"A\",\"value\":\"1\"},"
                    "{\"name\":\"B\",\"value\":\"2\"}]}]}}}");
        assert_non_null(fields_of(m1, "kubectl", "Apply"));
        assert_null(json_object_get(fields_of(m1, "kubectl", "Apply"), "f:selector"));

        /* Applied again without B, the label and replicas: they go (nobody
         * else owns them; a default then fills replicas, as in Kubernetes). */
        assert_int_equal(apply(m1, v1,
                               "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":"
                               "\"web\",\"command\":[\"/bin/web\"],\"env\":[{\"name\":\"A\","
                               "\"value\":\"1\"}]}]}}}}",
                               "kubectl", false, &v2, &m2, &c),
                         0);
        _cleanup_free_ char *s2 = dump(v2);
        assert_null(strstr(s2, "\"B\""));
        assert_null(strstr(s2, "\"labels\""));
        assert_null(strstr(s2, "\"replicas\""));
        assert_non_null(strstr(s2, "\"name\":\"A\""));
}

/* A null in the configuration removes its field, and below a field the
 * object lacks there is nothing to remove: the null is not kept (it was,
 * and the next apply of the same configuration then removed it; found by
 * fuzz-fields). Applied twice, the same configuration gives the same. */
static void test_apply_null_is_idempotent(void **state) {
        static const char *const config =
                "{\"metadata\":{\"labels\":null},\"spec\":{\"strategy\":{\"type\":\"Recreate\","
                "\"rollingUpdate\":null},\"template\":{\"spec\":{\"containers\":[{\"name\":\"w\","
                "\"args\":null}]}}}}";
        _cleanup_(json_decrefp) json_t *live = parse("{}"), *v1 = NULL, *m1 = NULL, *c = NULL,
                                       *v2 = NULL, *m2 = NULL;

        (void) state;
        assert_int_equal(apply(NULL, live, config, "kubectl", false, &v1, &m1, &c), 0);
        assert_json(v1, "{\"metadata\":{},\"spec\":{\"strategy\":{\"type\":\"Recreate\"},"
                        "\"template\":{\"spec\":{\"containers\":[{\"name\":\"w\"}]}}}}");
        assert_int_equal(apply(m1, v1, config, "kubectl", false, &v2, &m2, &c), 0);
        assert_true(json_equal(v1, v2));
        assert_true(json_equal(m1, m2));
}

static void test_apply_conflicts(void **state) {
        _cleanup_(json_decrefp) json_t *live = parse(base_view), *m0 = NULL, *v = NULL, *m = NULL,
                                       *c = NULL;

        (void) state;
        m0 = fields_update(NULL, NULL, live, "kubectl-edit", "apps/v1", NULL, NOW);

        /* The same values: no conflict, shared. */
        assert_int_equal(apply(m0, live, "{\"spec\":{\"replicas\":2}}", "ci", false, &v, &m, &c),
                         0);
        assert_non_null(json_object_get(json_object_get(fields_of(m, "ci", "Apply"), "f:spec"),
                                        "f:replicas"));
        assert_non_null(json_object_get(
                json_object_get(fields_of(m, "kubectl-edit", "Update"), "f:spec"), "f:replicas"));
        json_decref(v), v = NULL;
        json_decref(m), m = NULL;

        /* Other values: a conflict per field, naming its manager. */
        assert_int_equal(apply(m0, live,
                               "{\"spec\":{\"replicas\":3,\"template\":{\"spec\":{\"containers\":"
                               "[{\"name\":\"web\",\"command\":[\"/bin/other\"]}]}}}}",
                               "ci", false, &v, &m, &c),
                         1);
        assert_null(v);
        assert_json(c, "[{\"manager\":\"\\\"kubectl-edit\\\" using apps/v1 at " NOW "\","
                       "\"field\":\".spec.replicas\"},"
                       "{\"manager\":\"\\\"kubectl-edit\\\" using apps/v1 at " NOW "\","
                       "\"field\":"
                       "\".spec.template.spec.containers[name=\\\"web\\\"].command\"}]");
        json_decref(c), c = NULL;

        /* Forced: the fields change owner. */
        assert_int_equal(apply(m0, live,
                               "{\"spec\":{\"replicas\":3,\"template\":{\"spec\":{\"containers\":"
                               "[{\"name\":\"web\",\"command\":[\"/bin/other\"]}]}}}}",
                               "ci", true, &v, &m, &c),
                         0);
        json_t *edit = json_object_get(fields_of(m, "kubectl-edit", "Update"), "f:spec");
        assert_null(json_object_get(edit, "f:replicas"));
        assert_non_null(json_object_get(edit, "f:selector"));
        assert_int_equal(
                json_integer_value(json_object_get(json_object_get(v, "spec"), "replicas")), 3);
        json_decref(v), v = NULL;
        json_decref(m), m = NULL;
}

static void test_apply_keeps_what_others_own(void **state) {
        _cleanup_(json_decrefp) json_t *live = parse(base_view), *v1 = NULL, *m1 = NULL, *v2 = NULL,
                                       *m2 = NULL, *v3 = NULL, *m3 = NULL, *c = NULL;

        (void) state;
        assert_int_equal(apply(NULL, live, applied_config, "kubectl", false, &v1, &m1, &c), 0);
        /* kubectl set env changes B: B's value is now kubectl-set's. */
        v2 = json_deep_copy(v1);
        json_t *env = env_of(v2);
        json_object_set_new(json_array_get(env, 1), "value", json_string("3"));
        m2 = fields_update(m1, v1, v2, "kubectl-set", "apps/v1", NULL, NOW);
        /* An apply without B: B's item goes from the applier's set, but its
         * value is kubectl-set's, so B stays. */
        assert_int_equal(apply(m2, v2,
                               "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"name\":"
                               "\"web\",\"env\":[{\"name\":\"A\",\"value\":\"1\"}]}]}}}}",
                               "kubectl", false, &v3, &m3, &c),
                         0);
        _cleanup_free_ char *s3 = dump(v3);
        assert_non_null(strstr(s3, "{\"name\":\"B\",\"value\":\"3\"}"));
}

static void test_errors(void **state) {
        _cleanup_(json_decrefp) json_t *v = NULL, *m = NULL, *c = NULL, *bad = NULL;
        _cleanup_free_ char *err = NULL, *err2 = NULL;
        _cleanup_(json_decrefp) json_t *cfg = parse(
                "{\"spec\":{\"template\":{\"spec\":{\"containers\":[{\"command\":[]}]}}}}");

        (void) state;
        assert_int_equal(
                fields_apply(NULL, NULL, cfg, "m", "apps/v1", false, NULL, NOW, &v, &m, &c, &err),
                -EINVAL);
        assert_non_null(strstr(err, "containers[0]: an element of a list merged by name must "
                                    "have its name"));

        bad = parse("[{\"manager\":\"x\",\"operation\":\"Update\",\"fieldsV1\":{\"spec\":{}}}]");
        assert_int_equal(fields_check(bad, &err2), -EINVAL);
        assert_non_null(
                strstr(err2, "metadata.managedFields[0].fieldsV1: key \"spec\" must start"));
        free(err2);
        err2 = NULL;
        json_decref(bad);
        /* a fieldsV1 that is not an object is not stored as given */
        bad = parse("[{\"manager\":\"x\",\"operation\":\"Update\",\"fieldsV1\":\"f:spec\"}]");
        assert_int_equal(fields_check(bad, &err2), -EINVAL);
        assert_non_null(strstr(err2, "metadata.managedFields[0].fieldsV1: Invalid value: must be "
                                     "an object"));
        free(err2);
        err2 = NULL;
        json_decref(bad);
        bad = parse("[{\"manager\":\"x\",\"operation\":\"Update\",\"fieldsV1\":[]}]");
        assert_int_equal(fields_check(bad, &err2), -EINVAL);
}

/* Matching list items is linear: 20,000 env vars applied over 20,000 (by
 * scanning, 4·10^8 key encodings: minutes, and the test's timeout). */
static void test_big_lists_are_linear(void **state) {
        _cleanup_(json_decrefp)
                json_t *live = json_pack("{s:{s:{s:{s:[{s:s, s:[]}]}}}}", "spec", "template",
                                         "spec", "containers", "name", "c", "env"),
                       *cfg = NULL, *v = NULL, *m = NULL, *c = NULL, *m0 = NULL;
        _cleanup_free_ char *err = NULL;
        json_t *env;

        (void) state;
        env = env_of(live);
        for (int i = 0; i < 20000; i++) {
                char name[16];
                snprintf(name, sizeof name, "V%d", i);
                json_array_append_new(env, json_pack("{s:s, s:s}", "name", name, "value", "a"));
        }
        m0 = fields_update(NULL, NULL, live, "one", "apps/v1", NULL, NOW);
        assert_non_null(m0);
        cfg = json_deep_copy(live);
        /* every other one dropped, the rest changed */
        env = env_of(cfg);
        for (size_t i = json_array_size(env); i-- > 0;)
                if (i % 2)
                        json_array_remove(env, i);
                else
                        json_object_set_new(json_array_get(env, i), "value", json_string("b"));
        assert_int_equal(
                fields_apply(m0, live, cfg, "two", "apps/v1", true, NULL, NOW, &v, &m, &c, &err),
                0);
        _cleanup_free_ char *s = dump(v);
        assert_non_null(strstr(s, "{\"name\":\"V19998\",\"value\":\"b\"}"));
        /* "one" still owns the odd ones (their items), so they stay */
        assert_non_null(strstr(s, "{\"name\":\"V19999\",\"value\":\"a\"}"));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_update_owns_what_it_set),
                cmocka_unit_test(test_apply_merges_and_prunes),
                cmocka_unit_test(test_apply_null_is_idempotent),
                cmocka_unit_test(test_apply_conflicts),
                cmocka_unit_test(test_apply_keeps_what_others_own),
                cmocka_unit_test(test_errors),
                cmocka_unit_test(test_big_lists_are_linear),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
