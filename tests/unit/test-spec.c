/* SPDX-License-Identifier: MIT */

/* Unit tests of tend_spec: the manifest corpus, round trips, defaults,
 * pinned template hashes, selectors, quantities and hostile input. */

#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>

#include <cmocka.h>
#include <malloc.h>
#if defined(__SANITIZE_ADDRESS__)
size_t __sanitizer_get_current_allocated_bytes(void); /* ASan's, as mallinfo2 is malloc's */
#endif

#include "tend/spec.h"

#ifndef PIN_BASE
#define PIN_BASE "7578b8d5f4"
#define PIN_BASE_CC1 "757679dc95"
#define PIN_ARGS "7cc448f58c"
#endif

static const char *source_dir(void) {
        const char *s = getenv("TEND_SOURCE_DIR");
        return s ?: ".";
}

static char *path_join(const char *a, const char *b) {
        char *p = strprintf("%s/%s", a, b);
        assert_non_null(p);
        return p;
}

static int strcmp_p(const char *const *a, const char *const *b) {
        return strcmp(*a, *b);
}

static char **list_dir(const char *dir, const char *const *exts) {
        char **names = NULL;
        DIR *d = opendir(dir);
        struct dirent *de;

        assert_non_null(d);
        while ((de = readdir(d)))
                for (const char *const *e = exts; *e; e++)
                        if (endswith(de->d_name, *e) && de->d_name[0] != '.')
                                assert_int_equal(strv_extend(&names, de->d_name), 0);
        closedir(d);
        if (names)
                qsort(names, strv_length(names), sizeof(char *),
                      (int (*)(const void *, const void *)) strcmp_p);
        return names;
}

/* Loads a buffer as `tend validate` does and returns its error output. */
static char *validate_output(spec_manifest *m, const char *file) {
        spec_errors errs = {};
        tend_buf out = TEND_BUF_INIT(1 << 20);
        int r;

        r = spec_manifest_add_path(m, file, &errs);
        assert_true(r == 0 || r == -EINVAL);
        if (errs.n == 0)
                assert_int_not_equal(spec_manifest_check(m, &errs), -ENOMEM);
        for (size_t i = 0; i < errs.n; i++) {
                char *s = spec_error_format(&errs.items[i]);
                assert_non_null(s);
                assert_int_equal(tend_buf_addf(&out, "%s\n", s), 0);
                free(s);
        }
        spec_errors_done(&errs);
        return tend_buf_take(&out);
}

/* ---- corpus ------------------------------------------------------------------------ */

/* Where a field path is written in its YAML document. */
static void test_positions(void **state) {
        static const char yaml[] = "kind: List\n"
                                   "items:\n"
                                   "- metadata:\n"
                                   "    labels:\n"
                                   "      app.kubernetes.io/name: web\n"
                                   "      1abc: x\n"
                                   "  spec:\n"
                                   "    containers:\n"
                                   "    - name: a\n"
                                   "    - name: b\n"
                                   "      args: [x, y]\n";
        spec_errors errs = {};
        spec_docs docs = {};
        unsigned line = 0, col = 0;

        assert_int_equal(spec_parse("t.yaml", yaml, strlen(yaml), &errs, &docs), 0);
        assert_int_equal(docs.n, 1);
        const spec_doc *d = &docs.items[0];
        assert_int_equal(d->line, 3); /* the List's item, not the List */
        assert_true(spec_doc_position(d, "metadata.labels[app.kubernetes.io/name]", &line, &col));
        assert_int_equal(line, 5);
        assert_int_equal(col, 7);
        assert_true(spec_doc_position(d, "metadata.labels[1abc]", &line, &col));
        assert_int_equal(line, 6); /* a key that starts with a digit is a key */
        assert_true(spec_doc_position(d, "spec.containers[1].args[1]", &line, &col));
        assert_int_equal(line, 11);
        /* Not written: the nearest enclosing field that is. */
        assert_true(spec_doc_position(d, "spec.containers[0].workingDir", &line, &col));
        assert_int_equal(line, 9);
        assert_int_equal(col, 7);
        assert_false(spec_doc_position(d, "apiVersion", &line, &col));
        spec_docs_done(&docs);

        /* JSON has none. */
        static const char json[] = "{\"kind\": \"x\"}";
        assert_int_equal(spec_parse("t.json", json, strlen(json), &errs, &docs), 0);
        assert_false(spec_doc_position(&docs.items[0], "kind", &line, &col));
        spec_docs_done(&docs);
        spec_errors_done(&errs);
}

static void test_invalid_corpus(void **state) {
        static const char *const exts[] = { ".yaml", ".json", NULL };
        char *dir = path_join(source_dir(), "tests/spec/invalid");
        char cwd[4096];
        char **names;
        size_t n = 0;

        assert_non_null(getcwd(cwd, sizeof cwd));
        assert_int_equal(chdir(dir), 0);
        names = list_dir(".", exts);
        assert_non_null(names);
        for (char **f = names; *f; f++, n++) {
                spec_manifest m = {};
                char *expect_name = strprintf("%.*s.expect", (int) (strrchr(*f, '.') - *f), *f);
                char *expected = NULL, *got;
                int r;

                r = read_full_file(expect_name, 1 << 20, &expected, NULL);
                if (r < 0)
                        fail_msg("%s: missing %s", *f, expect_name);
                got = validate_output(&m, *f);
                if (!streq(expected, got))
                        fail_msg("%s:\nexpected:\n%sgot:\n%s", *f, expected, got);
                assert_true(strlen(got) > 0); /* an invalid case must produce an error */
                spec_manifest_done(&m);
                free(expect_name);
                free(expected);
                free(got);
        }
        assert_true(n >= 40);
        strv_free(names);
        assert_int_equal(chdir(cwd), 0);
        free(dir);
}

/* decode(encode(x)) == x through JSON text and through YAML text. */
static void assert_round_trips(const spec_deployment *d) {
        json_t *j = spec_deployment_encode(d);
        char *text = spec_json_dump_canonical(j), *yaml = spec_yaml_dump(j);
        spec_errors errs = {};
        spec_docs docs = {};
        spec_deployment *back = NULL;

        assert_non_null(text);
        assert_non_null(yaml);

        assert_int_equal(spec_parse("json", text, strlen(text), &errs, &docs), 0);
        assert_int_equal(docs.n, 1);
        assert_int_equal(
                spec_decode_new(&spec_type_deployment, docs.items[0].root, &errs, (void **) &back),
                0);
        assert_true(spec_deployment_equal(d, back));
        spec_deployment_free(back);
        spec_docs_done(&docs);

        assert_int_equal(spec_parse("yaml", yaml, strlen(yaml), &errs, &docs), 0);
        assert_int_equal(docs.n, 1);
        if (spec_decode_new(&spec_type_deployment, docs.items[0].root, &errs, (void **) &back) <
            0) {
                spec_errors_print(&errs, stderr);
                fail_msg("YAML round trip failed:\n%s", yaml);
        }
        if (!spec_deployment_equal(d, back))
                fail_msg("YAML round trip differs:\n%s", yaml);
        spec_deployment_free(back);
        spec_docs_done(&docs);

        assert_int_equal(errs.n, 0);
        json_decref(j);
        free(text);
        free(yaml);
}

static void check_valid_dir(const char *rel) {
        static const char *const exts[] = { ".yaml", ".yml", ".json", NULL };
        char *dir = path_join(source_dir(), rel);
        char **names = list_dir(dir, exts);
        size_t objects = 0;

        assert_non_null(names);
        for (char **f = names; *f; f++) {
                char *p = path_join(dir, *f);
                spec_manifest m = {};
                char *out = validate_output(&m, p);

                if (*out)
                        fail_msg("%s should be valid:\n%s", p, out);
                assert_true(m.n > 0);
                for (size_t i = 0; i < m.n; i++) {
                        spec_deployment *d = m.items[i].deployment, *c;

                        if (!d) { /* a ConfigMap, a Secret: decode(encode(x)) == x */
                                const spec_type *t = m.items[i].kind->type;
                                _cleanup_(json_decrefp)
                                        json_t *j = spec_encode(t, m.items[i].object);
                                spec_errors errs = {};
                                void *back = NULL;
                                assert_non_null(j);
                                assert_int_equal(spec_decode_new(t, j, &errs, &back), 0);
                                assert_true(spec_equal(t, m.items[i].object, back));
                                spec_free(t, back);
                                objects++;
                                continue;
                        }
                        assert_round_trips(d);
                        c = spec_deployment_copy(d);
                        assert_non_null(c);
                        assert_true(spec_deployment_equal(d, c));
                        spec_deployment_default(c); /* idempotent */
                        assert_true(spec_deployment_equal(d, c));
                        spec_deployment_free(c);
                        objects++;
                }
                spec_manifest_done(&m);
                free(out);
                free(p);
        }
        assert_true(objects > 0);
        strv_free(names);
        free(dir);
}

static void test_valid_corpus(void **state) {
        check_valid_dir("tests/spec/valid");
}

static void test_examples_valid(void **state) {
        check_valid_dir("examples");
        check_valid_dir("examples/run");
}

/* ---- helpers for inline manifests ----------------------------------------------------- */

#define BASE_YAML                                                        \
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n" \
        "spec:\n  selector: {matchLabels: {app: web}}\n"                 \
        "  template:\n    metadata: {labels: {app: web}}\n"              \
        "    spec:\n      containers:\n      - name: web\n        command: [/bin/sleep, \"60\"]\n"

static spec_deployment *load_one(const char *yaml) {
        spec_manifest m = {};
        spec_errors errs = {};
        spec_deployment *d;

        if (spec_manifest_add_buffer(&m, "test.yaml", yaml, strlen(yaml), &errs) < 0) {
                spec_errors_print(&errs, stderr);
                fail_msg("manifest did not load");
        }
        assert_int_equal(m.n, 1);
        d = m.items[0].deployment;
        m.items[0].object = m.items[0].deployment = NULL;
        spec_manifest_done(&m);
        spec_errors_done(&errs);
        return d;
}

static void test_defaults(void **state) {
        spec_deployment *d = load_one(BASE_YAML);
        const spec_container *c = &d->spec.template.spec.containers[0];

        assert_string_equal(d->metadata.namespace, "default");
        assert_int_equal(d->spec.replicas, 1);
        assert_int_equal(d->spec.min_ready_seconds, 0);
        assert_int_equal(d->spec.revision_history_limit, 10);
        assert_int_equal(d->spec.progress_deadline_seconds, 600);
        assert_false(d->spec.paused);
        assert_int_equal(d->spec.strategy.type, SPEC_STRATEGY_ROLLING_UPDATE);
        assert_non_null(d->spec.strategy.rolling_update);
        assert_string_equal(d->spec.strategy.rolling_update->max_surge.str, "25%");
        assert_string_equal(d->spec.strategy.rolling_update->max_unavailable.str, "25%");
        assert_int_equal(d->spec.template.spec.termination_grace_period_seconds, 30);
        assert_int_equal(d->spec.template.spec.restart_policy, SPEC_RESTART_ALWAYS);
        assert_int_equal(d->spec.template.spec.runtime_class_name, SPEC_RUNTIME_PROCESS);
        assert_null(c->readiness_probe);
        spec_deployment_free(d);

        d = load_one(BASE_YAML "        ports: [{name: http}]\n"
                               "        readinessProbe: {httpGet: {port: http}}\n"
                               "        livenessProbe: {tcpSocket: {port: http}}\n");
        c = &d->spec.template.spec.containers[0];
        /* the old form of a leased port is lifted into tend.io/lease-ports */
        assert_int_equal(c->n_ports, 0);
        assert_string_equal(
                spec_map_get(&d->spec.template.metadata.annotations, SPEC_ANN_LEASE_PORTS), "http");
        for (int i = 0; i < 2; i++) {
                const spec_probe *p = i ? c->liveness_probe : c->readiness_probe;
                assert_int_equal(p->initial_delay_seconds, 0);
                assert_int_equal(p->timeout_seconds, 1);
                assert_int_equal(p->period_seconds, 10);
                assert_int_equal(p->success_threshold, 1);
                assert_int_equal(p->failure_threshold, 3);
                assert_int_equal(p->termination_grace_period_seconds, SPEC_UNSET64);
        }
        assert_string_equal(c->readiness_probe->http_get->path, "/");
        assert_string_equal(c->readiness_probe->http_get->scheme, "HTTP");
        assert_string_equal(c->readiness_probe->http_get->port.str, "http");
        spec_deployment_free(d);

        /* Recreate gets no rollingUpdate; explicit values are kept. */
        d = load_one(BASE_YAML "  strategy: {type: Recreate}\n  replicas: 0\n"
                               "  revisionHistoryLimit: 0\n");
        assert_int_equal(d->spec.strategy.type, SPEC_STRATEGY_RECREATE);
        assert_null(d->spec.strategy.rolling_update);
        assert_int_equal(d->spec.replicas, 0);
        assert_int_equal(d->spec.revision_history_limit, 0);
        spec_deployment_free(d);

        /* Volumes: a configMap's and a secret's defaultMode is 0644 unless
         * given; a leading zero is octal, as kubectl reads YAML (1.1), and
         * 0o400 too; an item's mode stays unset (its volume's applies). */
        d = load_one(BASE_YAML
                     "        volumeMounts: [{name: a, mountPath: /a}]\n"
                     "      volumes:\n"
                     "      - {name: a, configMap: {name: a, items: [{key: k, path: p}]}}\n"
                     "      - {name: b, secret: {secretName: b, defaultMode: 0400}}\n"
                     "      - {name: c, secret: {secretName: c, defaultMode: 0o440}}\n"
                     "      - {name: d, emptyDir: {}}\n");
        assert_int_equal(d->spec.template.spec.n_volumes, 4);
        assert_int_equal(d->spec.template.spec.volumes[0].config_map->default_mode, 0644);
        assert_int_equal(d->spec.template.spec.volumes[0].config_map->items[0].mode, SPEC_UNSET);
        assert_int_equal(d->spec.template.spec.volumes[1].secret->default_mode, 0400);
        assert_int_equal(d->spec.template.spec.volumes[2].secret->default_mode, 0440);
        assert_non_null(d->spec.template.spec.volumes[3].empty_dir);
        assert_null(d->spec.template.spec.volumes[3].empty_dir->medium);
        assert_string_equal(d->spec.template.spec.containers[0].volume_mounts[0].mount_path, "/a");
        spec_deployment_free(d);
}

/* ---- template hash --------------------------------------------------------------------- */

static void test_template_hash(void **state) {
        spec_deployment *d = load_one(BASE_YAML);
        spec_deployment *e = load_one(BASE_YAML "        args: [x]\n");
        char h1[SPEC_HASH_MAX], h2[SPEC_HASH_MAX], h3[SPEC_HASH_MAX], h4[SPEC_HASH_MAX];

        /* Pinned: a changed value re-rolls every deployment after an upgrade.
         * Change these only with a migration plan. */
        assert_string_equal(spec_template_hash(&d->spec.template, -1, h1), PIN_BASE);
        assert_string_equal(spec_template_hash(&d->spec.template, 1, h2), PIN_BASE_CC1);
        assert_string_equal(spec_template_hash(&e->spec.template, -1, h3), PIN_ARGS);
        for (const char *c = h1; *c; c++)
                assert_non_null(strchr("456789bcdf", *c));
        assert_true(strlen(h1) >= 1 && strlen(h1) <= 10);

        /* The pod-template-hash label itself is ignored. */
        assert_int_equal(
                spec_map_set(&d->spec.template.metadata.labels, SPEC_LABEL_POD_TEMPLATE_HASH, h1),
                0);
        assert_string_equal(spec_template_hash(&d->spec.template, -1, h4), h1);
        spec_deployment_free(d);
        spec_deployment_free(e);
}

static void test_template_equal(void **state) {
        spec_deployment *a = load_one(BASE_YAML), *b = load_one(BASE_YAML);
        spec_deployment *c = load_one(BASE_YAML "        env: [{name: X, value: \"1\"}]\n");

        assert_true(spec_template_equal(&a->spec.template, &b->spec.template));
        assert_int_equal(spec_map_set(&b->spec.template.metadata.labels,
                                      SPEC_LABEL_POD_TEMPLATE_HASH, "abc"),
                         0);
        assert_true(spec_template_equal(&a->spec.template, &b->spec.template));
        assert_false(spec_deployment_equal(a, b));
        assert_false(spec_template_equal(&a->spec.template, &c->spec.template));
        spec_deployment_free(a);
        spec_deployment_free(b);
        spec_deployment_free(c);
}

/* spec_json_dump_shared() writes what spec_json_dump() writes: a shared
 * tree's text kept is its text for as long as the tree is alive, and a
 * tree made anew (another, even at the address of one freed) is written
 * anew. */
static void test_json_dump_shared(void **state) {
        json_t *big = json_object(), *row, *other;
        char key[32];

        for (int i = 0; i < 2000; i++) {
                snprintf(key, sizeof key, "k:%05d", i);
                assert_int_equal(json_object_set_new(big, key, json_pack("{s:{}}", ".")), 0);
        }
        for (int round = 0; round < 3; round++) {
                row = json_pack("{s:s, s:[{s:s, s:O}]}", "name", "web", "managedFields", "manager",
                                "kubectl", "fieldsV1", big);
                _cleanup_free_ char *want = spec_json_dump(row), *got = spec_json_dump_shared(row);
                assert_non_null(got);
                assert_string_equal(got, want);
                json_decref(row);
        }
        /* another tree in its place: its own text */
        other = json_deep_copy(big);
        assert_int_equal(json_object_set_new(other, "k:new", json_object()), 0);
        json_decref(big);
        row = json_pack("{s:[{s:o}]}", "managedFields", "fieldsV1", other);
        json_incref(other); /* shared, as the codec's are */
        _cleanup_free_ char *want = spec_json_dump(row), *got = spec_json_dump_shared(row);
        assert_string_equal(got, want);
        assert_non_null(strstr(got, "k:new"));
        json_decref(row);
        json_decref(other);
        spec_json_dump_shared_forget();
}

/* An object written straight from its struct is the text of its tree, each
 * way: what the codec leaves out (an empty struct, an unset int, an absent
 * string) left out, what it keeps ("" for a required string, 0 for
 * restartCount, {} for a present pointer) kept, and a string that is not
 * UTF-8 escaped as spec_encode() escapes it. */
static void check_dump_object(const spec_type *t, const void *p) {
        _cleanup_(json_decrefp) json_t *j = spec_encode(t, p);
        char *(*const ways[])(json_t * j) = { spec_json_dump, spec_json_dump_canonical,
                                              spec_json_dump_shared };
        const spec_dump_flags flags[] = { 0, SPEC_DUMP_SORTED, SPEC_DUMP_SHARED };

        assert_non_null(j);
        for (size_t i = 0; i < ELEMENTSOF(ways); i++) {
                _cleanup_free_ char *want = ways[i](j), *got = spec_dump_object(t, p, flags[i]);
                assert_non_null(got);
                assert_string_equal(got, want);
        }
        spec_json_dump_shared_forget();
}

/* spec_decode_shared(): a managedFields entry's fieldsV1 whose keys are
 * sorted is the input's own subtree; one that is not is a sorted copy, as
 * spec_decode_new() makes; either way the object is the same. */
#define SHARED_FMT                                                                     \
        "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{"           \
        "\"name\":\"web\",\"managedFields\":[{\"manager\":\"m\",\"operation\":"        \
        "\"Apply\",\"fieldsV1\":%s}]},\"spec\":{\"selector\":{\"matchLabels\":{"       \
        "\"app\":\"web\"}},\"template\":{\"metadata\":{\"labels\":{\"app\":\"web\"}}," \
        "\"spec\":{\"containers\":[{\"name\":\"web\",\"command\":[\"/bin/sleep\"]}]}}}}"

static void test_decode_shared(void **state) {
        static const char *const fields[] = {
                "{\"f:metadata\":{\"f:name\":{}},\"f:spec\":{\"f:a\":[{\"a\":1,\"b\":2}]}}",
                "{\"f:spec\":{\"f:a\":[{\"b\":2,\"a\":1}]},\"f:metadata\":{\"f:name\":{}}}",
        };

        (void) state;
        for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
                _cleanup_free_ char *text = strprintf(SHARED_FMT, fields[i]);
                json_t *j = json_loads(text, 0, NULL);
                json_t *given = json_object_get(
                        json_array_get(
                                json_object_get(json_object_get(j, "metadata"), "managedFields"),
                                0),
                        "fieldsV1");
                spec_errors errs = {};
                spec_deployment *shared = NULL, *copied = NULL;

                assert_non_null(given);
                assert_int_equal(
                        spec_decode_shared(&spec_type_deployment, j, &errs, (void **) &shared), 0);
                assert_int_equal(
                        spec_decode_new(&spec_type_deployment, j, &errs, (void **) &copied), 0);
                json_t *kept = shared->metadata.managed_fields[0].fields_v1;
                if (i == 0)
                        assert_ptr_equal(kept, given); /* sorted: shared */
                else {
                        assert_ptr_not_equal(kept, given);
                        _cleanup_free_ char *out = json_dumps(kept, JSON_COMPACT);
                        assert_string_equal(out, fields[0]); /* sorted, every level */
                }
                assert_ptr_not_equal(copied->metadata.managed_fields[0].fields_v1, given);
                assert_true(spec_equal(&spec_type_deployment, shared, copied));
                json_decref(j); /* what the object shares outlives the tree */
                _cleanup_free_ char *a = spec_json_dump(kept);
                assert_non_null(a);
                spec_deployment_free(shared);
                spec_deployment_free(copied);
        }
}

static void test_dump_object(void **state) {
        static const char *const pod_json =
                "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web-5d8f-abcde\","
                "\"resourceVersion\":\"42\",\"labels\":{\"b\":\"2\",\"a\":\"1\"},"
                "\"creationTimestamp\":\"2026-12-02T15:06:49.5Z\",\"managedFields\":[{"
                "\"manager\":\"m\",\"operation\":\"Apply\",\"fieldsV1\":{\"f:spec\":{}}}]},"
                "\"spec\":{\"containers\":[{\"name\":\"web\",\"command\":[\"/bin/sleep\"],"
                "\"env\":[{\"name\":\"E\",\"value\":\"\"}],\"resources\":{\"limits\":{"
                "\"memory\":\"1Mi\"}},\"ports\":[{\"containerPort\":80}]}],"
                "\"securityContext\":{}},\"status\":{\"phase\":\"Running\",\"containerStatuses\":"
                "[{\"name\":\"web\",\"ready\":true,\"restartCount\":0,\"state\":{\"running\":{}},"
                "\"lastState\":{}}]}}";
        spec_errors errs = {};
        spec_docs docs = {};
        spec_pod *pod = NULL;
        spec_deployment *d = spec_deployment_new();

        (void) state;
        assert_int_equal(spec_parse("pod.json", pod_json, strlen(pod_json), &errs, &docs), 0);
        assert_int_equal(spec_decode_new(&spec_type_pod, docs.items[0].root, &errs, (void **) &pod),
                         0);
        check_dump_object(&spec_type_pod, pod);
        /* not UTF-8, in a string, a list and a map's value */
        free(pod->spec.containers[0].command[0]);
        pod->spec.containers[0].command[0] = strdup("/bin/\xff\xc3");
        assert_int_equal(spec_map_set(&pod->metadata.annotations, "note", "\xe2\x82"), 0);
        free(pod->status.container_statuses[0].name);
        pod->status.container_statuses[0].name = NULL; /* SF_ZERO: written "" */
        check_dump_object(&spec_type_pod, pod);
        /* a map key jansson refuses: no text either way */
        assert_int_equal(spec_map_set(&pod->metadata.labels, "\xff", "x"), 0);
        assert_null(spec_encode(&spec_type_pod, pod));
        assert_null(spec_dump_object(&spec_type_pod, pod, 0));
        /* nothing set but what a new object has */
        check_dump_object(&spec_type_deployment, d);
        spec_deployment_free(d);
        spec_pod_free(pod);
        spec_docs_done(&docs);
        spec_errors_done(&errs);
}

/* ---- selectors ------------------------------------------------------------------------- */

static spec_selector *selector(const char *s) {
        spec_selector *sel = spec_new(&spec_type_selector);
        assert_non_null(sel);
        if (spec_selector_parse(s, sel) < 0)
                fail_msg("cannot parse selector \"%s\"", s);
        return sel;
}

static void labels_from(spec_map *m, const char *s) {
        /* "a=b,c=d" */
        char *copy = strdup(s), *save = NULL;
        for (char *kv = strtok_r(copy, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
                char *eq = strchr(kv, '=');
                assert_non_null(eq);
                *eq = 0;
                assert_int_equal(spec_map_set(m, kv, eq + 1), 0);
        }
        free(copy);
}

static void test_selector_match(void **state) {
        static const struct {
                const char *selector, *labels;
                bool match;
        } cases[] = {
                { "app=web", "app=web", true },
                { "app=web", "app=web,tier=front", true },
                { "app=web", "app=api", false },
                { "app=web", "", false },
                { "app!=web", "", true },
                { "app!=web", "app=api", true },
                { "app!=web", "app=web", false },
                { "app in (web,api)", "app=api", true },
                { "app in (web,api)", "app=db", false },
                { "app notin (web,api)", "app=db", true },
                { "app notin (web,api)", "tier=x", true },
                { "app notin (web,api)", "app=web", false },
                { "app", "app=", true },
                { "app", "tier=x", false },
                { "!app", "tier=x", true },
                { "!app", "app=x", false },
                { "app=web,tier in (front),!legacy", "app=web,tier=front", true },
                { "app=web,tier in (front),!legacy", "app=web,tier=front,legacy=1", false },
                { "", "anything=here", true },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                spec_selector *s = selector(cases[i].selector);
                spec_map m = {};
                labels_from(&m, cases[i].labels);
                if (spec_selector_matches(s, &m) != cases[i].match)
                        fail_msg("selector \"%s\" on {%s}: expected %s", cases[i].selector,
                                 cases[i].labels, cases[i].match ? "match" : "no match");
                spec_map_done(&m);
                spec_free(&spec_type_selector, s);
        }
        assert_false(spec_selector_matches(NULL, &(spec_map){}));
}

static void test_selector_overlap(void **state) {
        static const struct {
                const char *a, *b;
                bool overlap;
        } cases[] = {
                { "app=web", "app=web", true },
                { "app=web", "app=api", false },
                { "app=web", "app=web,tier=front", true },
                { "app=web", "tier=front", true },
                { "app=web,tier=a", "app=web,tier=b", false },
                { "app in (web,api)", "app=api", true },
                { "app in (web,api)", "app in (db,cache)", false },
                { "app in (web,api)", "app notin (web)", true },
                { "app in (web)", "app notin (web)", false },
                { "app=web", "!app", false },
                { "app", "!app", false },
                { "!app", "tier=x", true },
                { "app notin (a)", "app notin (b)", true },
                { "app=web", "app", true },
                { "app=web,!canary", "app=web,canary=true", false },
                { "app=web,track in (stable,canary)", "app=web,track notin (stable,canary)",
                  false },
                { "app=web,track in (stable,canary)", "app=web,track notin (stable)", true },
                { "app in (a,b),app in (b,c)", "app=b", true },
                { "app in (a,b),app in (b,c)", "app=a", false },
                { "app in (a,b),app notin (a)", "app in (a,c)", false },
                { "app in (a,b),app notin (a)", "app notin (c)", true },
                { "app in (a,b),app in (c)", "tier=x", false },
                { "", "app=web", true },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                spec_selector *a = selector(cases[i].a), *b = selector(cases[i].b);
                if (spec_selector_overlaps(a, b) != cases[i].overlap ||
                    spec_selector_overlaps(b, a) != cases[i].overlap)
                        fail_msg("\"%s\" vs \"%s\": expected %s", cases[i].a, cases[i].b,
                                 cases[i].overlap ? "overlap" : "disjoint");
                spec_free(&spec_type_selector, a);
                spec_free(&spec_type_selector, b);
        }
        assert_false(spec_selector_overlaps(NULL, NULL));

        /* A requirement without a key (a decoded selector that validation
         * would refuse) selects nothing, and crashes nothing. */
        spec_selector *bad = selector(""), *good = selector("app=web");
        spec_requirement *req = calloc(1, sizeof *req);
        spec_map labels = {};
        assert_non_null(req);
        req->op = SPEC_OP_EXISTS;
        bad->match_expressions = req;
        bad->n_match_expressions = 1;
        assert_int_equal(spec_map_set(&labels, "app", "web"), 0);
        assert_false(spec_selector_matches(bad, &labels));
        assert_false(spec_selector_overlaps(bad, good));
        assert_false(spec_selector_overlaps(good, bad));
        spec_map_done(&labels);
        spec_free(&spec_type_selector, bad);
        spec_free(&spec_type_selector, good);
}

/* The overlap rule against its definition: two selectors overlap iff one
 * label set matches both. With values drawn from {a,b,c}, label sets over
 * three keys each absent, a, b, c or another value (d) are every case: the
 * label sets a selector matches are a mask of 125 bits. */
static uint64_t oracle_masks(const spec_selector *x, uint64_t ret[2]) {
        static const char *const keys[] = { "k0", "k1", "k2" };
        static const char *const vals[] = { NULL, "a", "b", "c", "d" };

        ret[0] = ret[1] = 0;
        for (int code = 0; code < 125; code++) {
                spec_map labels = {};
                for (int k = 0, c = code; k < 3; k++, c /= 5)
                        if (vals[c % 5])
                                assert_int_equal(spec_map_set(&labels, keys[k], vals[c % 5]), 0);
                if (spec_selector_matches(x, &labels))
                        ret[code / 64] |= UINT64_C(1) << (code % 64);
                spec_map_done(&labels);
        }
        return ret[0] | ret[1];
}

static char *random_selector(uint32_t *seed) {
        static const char *const ops[] = { "=", "!=", " in ", " notin ", "", "!" };
        char buf[256] = "";
        size_t n;

        *seed = *seed * 1103515245 + 12345;
        n = (*seed >> 16) % 4;
        for (size_t i = 0; i < n; i++) {
                char term[64], set[16] = "";
                unsigned r, op, key;
                *seed = *seed * 1103515245 + 12345;
                r = *seed >> 8;
                op = r % 6;
                key = (r >> 3) % 3;
                for (unsigned v = 0, bits = ((r >> 5) % 7) + 1; v < 3; v++)
                        if (bits & (1u << v))
                                snprintf(set + strlen(set), sizeof set - strlen(set), "%s%c",
                                         set[0] ? "," : "", 'a' + v);
                if (op <= 1)
                        snprintf(term, sizeof term, "k%u%s%c", key, ops[op], 'a' + (r >> 9) % 3);
                else if (op <= 3)
                        snprintf(term, sizeof term, "k%u%s(%s)", key, ops[op], set);
                else
                        snprintf(term, sizeof term, "%sk%u", ops[op], key);
                snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s", i ? "," : "", term);
        }
        return strdup(buf);
}

typedef struct found {
        bool *hit;
} found;

static bool note_found(size_t other, void *userdata) {
        ((found *) userdata)->hit[other] = true;
        return true;
}

static void test_selector_overlap_oracle(void **state) {
        enum { N = 300 };
        uint64_t masks[N][2];
        spec_selector *sels[N];
        char *texts[N];
        uint32_t seed = 4242;
        spec_overlaps *ov = spec_overlaps_new();

        assert_non_null(ov);
        for (size_t i = 0; i < N; i++) {
                texts[i] = random_selector(&seed);
                sels[i] = selector(texts[i]);
                (void) oracle_masks(sels[i], masks[i]);
                assert_int_equal(spec_overlaps_add(ov, sels[i], NULL), 0);
        }
        for (size_t i = 0; i < N; i++) {
                bool hit[N] = {};
                found f = { hit };
                spec_overlaps_each(ov, i, N, note_found, &f);
                for (size_t j = 0; j < N; j++) {
                        bool meet = (masks[i][0] & masks[j][0]) || (masks[i][1] & masks[j][1]);
                        bool want = i != j && meet;
                        if (hit[j] != want ||
                            (i != j && spec_selector_overlaps(sels[i], sels[j]) != meet))
                                fail_msg("\"%s\" vs \"%s\": expected %s", texts[i], texts[j],
                                         want ? "overlap" : "disjoint");
                }
        }
        for (size_t i = 0; i < N; i++) {
                spec_free(&spec_type_selector, sels[i]);
                free(texts[i]);
        }
        spec_overlaps_free(ov);
}

/* 900 small selectors and one with In lists of 10,000 values once took over
 * two minutes; the index finds the pairs that meet without comparing the
 * rest value by value. */
static void test_selector_overlap_many(void **state) {
        tend_buf b = TEND_BUF_INIT(1 << 20);
        spec_selector *sels[901];
        spec_overlaps *ov = spec_overlaps_new();
        bool hit[901] = {};
        found f = { hit };

        assert_non_null(ov);
        for (size_t i = 0; i < 900; i++) {
                char text[32];
                snprintf(text, sizeof text, "app=a%zu", i);
                sels[i] = selector(text);
                assert_int_equal(spec_overlaps_add(ov, sels[i], NULL), 0);
        }
        for (int k = 0; k < 3; k++) {
                assert_int_equal(tend_buf_addf(&b, "%sapp in (", k ? ")," : ""), 0);
                for (int v = 0; v < 10000; v++)
                        assert_int_equal(tend_buf_addf(&b, "%sv%d", v ? "," : "",
                                                       v == 9999 && k < 2 ? 7 : v * 3 + k),
                                         0);
        }
        assert_int_equal(tend_buf_adds(&b, "),app in (a7,v7,a1)"), 0);
        sels[900] = selector(tend_buf_str(&b));
        assert_int_equal(spec_overlaps_add(ov, sels[900], NULL), 0);
        spec_overlaps_each(ov, 900, 900, note_found, &f);
        /* only the value "v7"... is in every In list; no small one has it */
        for (size_t i = 0; i < 900; i++)
                assert_false(hit[i]);
        for (size_t i = 0; i < 900; i++)
                spec_overlaps_each(ov, i, 901, note_found, &f);
        assert_false(hit[900]);
        for (size_t i = 0; i < 901; i++)
                spec_free(&spec_type_selector, sels[i]);
        spec_overlaps_free(ov);
        tend_buf_free(&b);
}

static void test_selector_parse_errors(void **state) {
        static const char *const bad[] = { "app in web", "app in (web", "=web", "a=b,,", "a b" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                spec_selector s;
                if (spec_selector_parse(bad[i], &s) != -EINVAL)
                        fail_msg("\"%s\" should not parse", bad[i]);
        }
}

/* ---- values ------------------------------------------------------------------------------ */

static void test_quantities(void **state) {
        static const struct {
                const char *s;
                int r;
                int64_t milli, value;
        } cases[] = {
                { "500m", 0, 500, 1 },
                { "2", 0, 2000, 2 },
                { "0.5", 0, 500, 1 },
                { ".5", 0, 500, 1 },
                { "1.", 0, 1000, 1 },
                { "0.0005", 0, 1, 1 },
                { "128Mi", 0, 134217728000LL, 134217728 },
                { "1G", 0, 1000000000000LL, 1000000000 },
                { "1.5Gi", 0, 1610612736000LL, 1610612736 },
                { "1Ki", 0, 1024000, 1024 },
                { "1e3", 0, 1000000, 1000 },
                { "1E3", 0, 1000000, 1000 },
                { "5e-3", 0, 5, 1 },
                { "100u", 0, 1, 1 },
                { "0", 0, 0, 0 },
                { "-1", 0, -1000, -1 },
                { "+3k", 0, 3000000, 3000 },
                { "8Ei", -ERANGE, 0, 0 },
                { "half", -EINVAL, 0, 0 },
                { "1.5Gb", -EINVAL, 0, 0 },
                { "", -EINVAL, 0, 0 },
                { ".", -EINVAL, 0, 0 },
                { "1..2", -EINVAL, 0, 0 },
                { "Mi", -EINVAL, 0, 0 },
                { "1 Mi", -EINVAL, 0, 0 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                int64_t milli = -42, value = -42;
                int r = spec_quantity_parse(cases[i].s, &milli, &value);
                if (r != cases[i].r)
                        fail_msg("\"%s\": r=%d, expected %d", cases[i].s, r, cases[i].r);
                if (r == 0 && (milli != cases[i].milli || value != cases[i].value))
                        fail_msg("\"%s\": milli=%lld value=%lld, expected %lld %lld", cases[i].s,
                                 (long long) milli, (long long) value, (long long) cases[i].milli,
                                 (long long) cases[i].value);
        }
}

static void test_backoff_parse(void **state) {
        static const struct {
                const char *in;
                bool off;
                uint32_t after;
                usec_t initial, max;
        } good[] = {
                { "off", true, 2, USEC_PER_SEC, 300 * USEC_PER_SEC },
                { "after=0", false, 0, USEC_PER_SEC, 300 * USEC_PER_SEC },
                { "max=10m", false, 2, USEC_PER_SEC, 600 * USEC_PER_SEC },
                { "initial=250ms,after=5", false, 5, 250 * USEC_PER_MSEC, 300 * USEC_PER_SEC },
                { "max=2s,initial=2s,after=1000", false, 1000, 2 * USEC_PER_SEC, 2 * USEC_PER_SEC },
                { "initial=1ms,max=24h", false, 2, USEC_PER_MSEC, 24 * 3600 * USEC_PER_SEC },
        };
        static const struct {
                const char *in, *problem;
        } bad[] = {
                { "", "must be \"off\", or key=value" },
                { "Off", "has no value" },
                { "on", "has no value" },
                { "after=-1", "whole number from 0 to 1000" },
                { "after=1001", "whole number from 0 to 1000" },
                { "after=", "whole number" },
                { "after=1.5", "whole number" },
                { "initial=0", "at least 1ms" },
                { "initial=soon", "must be a duration" },
                { "max=25h", "from 1ms to 24h" },
                { "max=1s,initial=2s", "initial (2s) must not be longer than max (1s)" },
                { "after=1,", "ends with a comma" },
                { ",after=1", "has an empty item" },
                { "after=1,,max=1m", "has an empty item" },
                { "max=1m,max=2m", "max is given twice" },
                { "speed=3", "unknown key \"speed\": must be one of after, initial, max" },
        };
        spec_backoff b;
        char *problem;

        assert_int_equal(spec_backoff_parse(NULL, &b, &problem), 0);
        assert_false(b.off);
        assert_int_equal(b.after, 2);
        assert_int_equal(b.initial, USEC_PER_SEC);
        assert_int_equal(b.max, 300 * USEC_PER_SEC);
        for (size_t i = 0; i < ELEMENTSOF(good); i++) {
                if (spec_backoff_parse(good[i].in, &b, &problem) < 0)
                        fail_msg("%s: %s", good[i].in, problem);
                assert_int_equal(b.off, good[i].off);
                assert_int_equal(b.after, good[i].after);
                assert_int_equal(b.initial, good[i].initial);
                assert_int_equal(b.max, good[i].max);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                if (spec_backoff_parse(bad[i].in, &b, &problem) != -EINVAL)
                        fail_msg("%s: accepted", bad[i].in);
                if (!strstr(problem, bad[i].problem))
                        fail_msg("%s: \"%s\" does not say \"%s\"", bad[i].in, problem,
                                 bad[i].problem);
                free(problem);
        }
}

/* tend.io/listen, tend.io/notify and tend.io/canary read what they say. */
/* The name checks a fleet member applies to etcd's keys. */
static void test_dns_names(void **state) {
        char long_label[65];

        (void) state;
        memset(long_label, 'a', 64);
        long_label[64] = 0;
        assert_true(spec_is_dns_label("default"));
        assert_true(spec_is_dns_label("kube-system"));
        assert_false(spec_is_dns_label("a.b"));
        assert_false(spec_is_dns_label("-a"));
        assert_false(spec_is_dns_label("Default"));
        assert_false(spec_is_dns_label(""));
        assert_false(spec_is_dns_label(NULL));
        assert_false(spec_is_dns_label(long_label));
        long_label[63] = 0;
        assert_true(spec_is_dns_label(long_label));
        assert_true(spec_is_dns_subdomain("a.b"));
        assert_false(spec_is_dns_subdomain("n\x11"));
}

/* The registry of annotations (spec/annotations.c): one row a key, and the
 * predicates the controllers, the API and the fleet read give what their
 * lists gave. */
static void test_annotation_registry(void **state) {
        size_t n;
        const spec_annotation *rows = spec_annotations(&n);
        char *problem = NULL;

        (void) state;
        for (size_t i = 0; i < n; i++) {
                for (size_t j = i + 1; j < n; j++)
                        if (streq(rows[i].key, rows[j].key))
                                fail_msg("%s has two rows", rows[i].key);
                /* what a user writes under tend.io/ is checked */
                if (rows[i].writer == SPEC_ANN_BY_USER && startswith(rows[i].key, SPEC_ANN_PREFIX))
                        assert_non_null(rows[i].check);
                /* what tendd writes under tend.io/ a user cannot */
                if ((rows[i].writer == SPEC_ANN_BY_CONTROLLER ||
                     rows[i].writer == SPEC_ANN_BY_NODE) &&
                    startswith(rows[i].key, SPEC_ANN_PREFIX)) {
                        assert_int_equal(spec_tend_annotation_problem(rows[i].key, "1",
                                                                      SPEC_ANN_ON_DEPLOYMENT,
                                                                      &problem),
                                         -EINVAL);
                        assert_non_null(strstr(problem, "Unsupported value"));
                        free(problem);
                }
        }
        /* the Deployment → ReplicaSet copy leaves out what it always did */
        static const char *const not_copied[] = {
                SPEC_ANN_LAST_APPLIED,     SPEC_ANN_REVISION,     SPEC_ANN_REVISION_HISTORY,
                SPEC_ANN_DESIRED_REPLICAS, SPEC_ANN_MAX_REPLICAS, SPEC_ANN_ROLLBACK_TO,
                SPEC_ANN_PROMOTE,          SPEC_ANN_COMPLETE,     SPEC_ANN_ROLLOUT_FAILED,
                SPEC_ANN_PROMOTED,         SPEC_ANN_CANARY_SINCE,
        };
        for (size_t i = 0; i < ELEMENTSOF(not_copied); i++)
                assert_false(spec_annotation_to_replica_set(not_copied[i]));
        assert_true(spec_annotation_to_replica_set(SPEC_ANN_CHANGE_CAUSE));
        assert_true(spec_annotation_to_replica_set(SPEC_ANN_CRASH_BACKOFF));
        assert_true(spec_annotation_to_replica_set(SPEC_ANN_CANARY));
        assert_true(spec_annotation_to_replica_set("example.com/anything"));
        /* an apply keeps the revisions and the source, and restartedAt on
         * the template; nothing else */
        assert_true(spec_annotation_kept_on_apply(SPEC_ANN_REVISION, SPEC_ANN_ON_DEPLOYMENT));
        assert_true(
                spec_annotation_kept_on_apply(SPEC_ANN_REVISION_HISTORY, SPEC_ANN_ON_DEPLOYMENT));
        assert_true(spec_annotation_kept_on_apply(SPEC_ANN_SOURCE, SPEC_ANN_ON_DEPLOYMENT));
        assert_true(spec_annotation_kept_on_apply(SPEC_ANN_RESTARTED_AT, SPEC_ANN_ON_TEMPLATE));
        assert_false(spec_annotation_kept_on_apply(SPEC_ANN_RESTARTED_AT, SPEC_ANN_ON_DEPLOYMENT));
        assert_false(spec_annotation_kept_on_apply(SPEC_ANN_CANARY, SPEC_ANN_ON_DEPLOYMENT));
        assert_false(spec_annotation_kept_on_apply(SPEC_ANN_LAST_APPLIED, SPEC_ANN_ON_DEPLOYMENT));
        /* a pod's node writes five (the fleet sends them in its status key) */
        size_t by_node = 0;
        for (size_t i = 0; i < n; i++)
                by_node += rows[i].writer == SPEC_ANN_BY_NODE;
        assert_int_equal(by_node, 5);
        assert_int_equal(spec_annotation_find(SPEC_ANN_START_AFTER)->writer, SPEC_ANN_BY_NODE);
        assert_null(spec_annotation_find("tend.io/nope"));
}

static void test_rollout_annotations(void **state) {
        spec_listen l[SPEC_LISTEN_MAX];
        spec_notify no;
        spec_canary c;
        char *problem;
        size_t n;

        assert_int_equal(spec_listen_parse("http,admin@127.0.0.1,v6@::1", l, &n, &problem), 0);
        assert_int_equal(n, 3);
        assert_string_equal(l[0].port, "http");
        assert_string_equal(l[0].address, "");
        assert_string_equal(l[1].port, "admin");
        assert_string_equal(l[1].address, "127.0.0.1");
        assert_string_equal(l[2].address, "::1");
        assert_int_equal(spec_listen_parse("a,b,c,d,e,f,g,h,i", l, &n, &problem), -EINVAL);
        assert_non_null(strstr(problem, "more than 8 ports"));
        free(problem);
        assert_int_equal(spec_listen_parse("@127.0.0.1", l, &n, &problem), -EINVAL);
        free(problem);

        assert_int_equal(spec_notify_parse("ready", &no, &problem), 0);
        assert_true(no.ready);
        assert_int_equal(no.watchdog, 0);
        assert_int_equal(spec_notify_parse("watchdog=2s", &no, &problem), 0);
        assert_false(no.ready);
        assert_int_equal(no.watchdog, 2 * USEC_PER_SEC);
        assert_int_equal(spec_notify_parse("watchdog=2s,ready", &no, &problem), 0);
        assert_true(no.ready);
        assert_int_equal(spec_notify_parse("", &no, &problem), -EINVAL);
        free(problem);

        assert_int_equal(spec_canary_parse("2", &c, &problem), 0);
        assert_int_equal(spec_canary_count(&c, 10), 2);
        assert_int_equal(spec_canary_count(&c, 1), 1); /* at most replicas */
        assert_int_equal(spec_canary_parse("10%", &c, &problem), 0);
        assert_int_equal(spec_canary_count(&c, 10), 1);
        assert_int_equal(spec_canary_count(&c, 11), 2); /* rounds up */
        assert_int_equal(spec_canary_count(&c, 3), 1);
        assert_int_equal(spec_canary_count(&c, 0), 1);
        assert_int_equal(spec_canary_parse("%", &c, &problem), -EINVAL);
        free(problem);
        assert_int_equal(spec_canary_parse("-1", &c, &problem), -EINVAL);
        free(problem);
}

static void test_fenceposts(void **state) {
        /* docs/deployments.md §3.1 with the 25%/25% default, and the forced 1. */
        static const struct {
                const char *surge, *unav;
                int32_t replicas, want_surge, want_unav;
        } cases[] = {
                { "25%", "25%", 1, 1, 0 },     { "25%", "25%", 2, 1, 0 },
                { "25%", "25%", 3, 1, 0 },     { "25%", "25%", 4, 1, 1 },
                { "25%", "25%", 10, 3, 2 },    { "25%", "25%", 15, 4, 3 },
                { "25%", "25%", 100, 25, 25 }, { "0%", "1%", 2, 0, 1 },
                { "3", "0", 10, 3, 0 },        { "0", "20", 10, 0, 10 },
                { "25%", "25%", 0, 0, 0 },     { "100%", "100%", 4, 4, 4 },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char *yaml = strprintf(BASE_YAML "  strategy: {rollingUpdate: {maxSurge: %s%s%s, "
                                                 "maxUnavailable: %s%s%s}}\n",
                                       strchr(cases[i].surge, '%') ? "\"" : "", cases[i].surge,
                                       strchr(cases[i].surge, '%') ? "\"" : "",
                                       strchr(cases[i].unav, '%') ? "\"" : "", cases[i].unav,
                                       strchr(cases[i].unav, '%') ? "\"" : "");
                spec_deployment *d = load_one(yaml);
                int32_t s, u;

                spec_deployment_fenceposts(d, cases[i].replicas, &s, &u);
                if (s != cases[i].want_surge || u != cases[i].want_unav)
                        fail_msg("surge %s unav %s D=%d: got %d/%d, expected %d/%d", cases[i].surge,
                                 cases[i].unav, cases[i].replicas, s, u, cases[i].want_surge,
                                 cases[i].want_unav);
                spec_deployment_free(d);
                free(yaml);
        }

        spec_deployment *r = load_one(BASE_YAML "  strategy: {type: Recreate}\n");
        int32_t s, u;
        spec_deployment_fenceposts(r, 10, &s, &u);
        assert_int_equal(s, 0);
        assert_int_equal(u, 0);
        spec_deployment_free(r);
}

/* ---- updates ----------------------------------------------------------------------------- */

static void test_validate_update(void **state) {
        spec_deployment *a = load_one(BASE_YAML);
        spec_deployment *b = load_one(BASE_YAML "        args: [x]\n");
        spec_deployment *c = load_one(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
                "spec:\n  selector: {matchLabels: {app: web2}}\n"
                "  template:\n    metadata: {labels: {app: web2}}\n"
                "    spec:\n      containers:\n      - name: web\n"
                "        command: [/bin/true]\n");
        spec_errors errs = {};

        assert_int_equal(spec_deployment_validate_update(a, b, &errs), 0);
        assert_int_equal(errs.n, 0);
        assert_int_equal(spec_deployment_validate_update(a, c, &errs), -EINVAL);
        assert_int_equal(errs.n, 1);
        assert_string_equal(errs.items[0].field, "spec.selector");
        assert_non_null(strstr(errs.items[0].message, "field is immutable"));
        assert_non_null(strstr(errs.items[0].message, "create a deployment with a new name"));
        spec_errors_done(&errs);
        spec_deployment_free(a);
        spec_deployment_free(b);
        spec_deployment_free(c);
}

/* ---- codec details ------------------------------------------------------------------------- */

static void test_other_kinds_round_trip(void **state) {
        static const char *const pod_json =
                "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web-5d8f-abcde\","
                "\"namespace\":\"default\",\"uid\":\"u1\",\"resourceVersion\":\"42\",\"labels\":"
                "{\"app\":\"web\",\"pod-template-hash\":\"5d8f\"},\"ownerReferences\":[{"
                "\"apiVersion\":"
                "\"apps/v1\",\"kind\":\"ReplicaSet\",\"name\":\"web-5d8f\",\"uid\":\"rs1\","
                "\"controller\":true,\"blockOwnerDeletion\":true}],\"creationTimestamp\":"
                "\"2026-12-02T15:06:49Z\"},\"spec\":{\"containers\":[{\"name\":\"web\",\"command\":"
                "[\"/bin/sleep\",\"60\"]}],\"nodeName\":\"box\"},\"status\":{\"phase\":\"Failed\","
                "\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\",\"lastTransitionTime\":"
                "\"2026-12-02T15:06:50.123456Z\"}],\"containerStatuses\":[{\"name\":\"web\","
                "\"ready\":false,\"started\":false,\"restartCount\":0,\"containerID\":"
                "\"process://1234\",\"state\":{\"terminated\":{\"exitCode\":0,\"signal\":9,"
                "\"reason\":\"Killed\",\"startedAt\":\"2026-12-02T15:06:49Z\",\"finishedAt\":"
                "\"2026-12-02T15:07:00Z\"}},\"lastState\":{}}]}}";
        spec_errors errs = {};
        spec_docs docs = {};
        spec_pod *pod = NULL, *back = NULL;
        json_t *j;
        char *text;

        assert_int_equal(spec_parse("pod.json", pod_json, strlen(pod_json), &errs, &docs), 0);
        assert_int_equal(spec_decode_new(&spec_type_pod, docs.items[0].root, &errs, (void **) &pod),
                         0);
        assert_int_equal(pod->metadata.resource_version, 42);
        assert_int_equal(pod->status.phase, SPEC_POD_FAILED);
        assert_int_equal(pod->status.container_statuses[0].state.terminated->signal, 9);
        assert_int_equal(pod->status.container_statuses[0].state.terminated->exit_code, 0);
        assert_int_equal(pod->status.conditions[0].last_transition_time % USEC_PER_SEC, 123456);
        assert_true(spec_meta_controller(&pod->metadata) != NULL);

        j = spec_pod_encode(pod);
        text = spec_json_dump_canonical(j);
        /* exitCode 0 and restartCount 0 are kept; the empty lastState is not. */
        assert_non_null(strstr(text, "\"exitCode\":0"));
        assert_non_null(strstr(text, "\"restartCount\":0"));
        assert_null(strstr(text, "lastState"));
        assert_int_equal(spec_decode_new(&spec_type_pod, j, &errs, (void **) &back), 0);
        assert_true(spec_pod_equal(pod, back));
        json_decref(j);
        free(text);
        spec_pod_free(back);
        spec_pod_free(pod);
        spec_docs_done(&docs);

        /* An event and a ReplicaSet encode and decode to themselves. */
        spec_event *ev = spec_event_new();
        ev->reason = strdup("ScalingReplicaSet");
        ev->message = strdup("Scaled up replica set web-5d8f to 3");
        ev->type = strdup("Normal");
        ev->count = 7;
        ev->first_timestamp = 1764688009000000ULL;
        ev->last_timestamp = ev->first_timestamp + 5 * USEC_PER_SEC;
        ev->involved_object.kind = strdup("Deployment");
        ev->involved_object.name = strdup("web");
        j = spec_event_encode(ev);
        spec_event *ev2 = NULL;
        assert_int_equal(spec_decode_new(&spec_type_event, j, &errs, (void **) &ev2), 0);
        assert_true(spec_event_equal(ev, ev2));
        json_decref(j);
        spec_event_free(ev);
        spec_event_free(ev2);

        spec_replica_set *rs = spec_replica_set_new();
        rs->spec.replicas = 3;
        rs->status.replicas = 0;
        rs->metadata.name = strdup("web-5d8f");
        j = spec_replica_set_encode(rs);
        text = spec_json_dump_canonical(j);
        /* status.replicas is always shown, even at 0 (kubectl reads it). */
        assert_non_null(strstr(text, "\"status\":{\"replicas\":0}"));
        spec_replica_set *rs2 = NULL;
        assert_int_equal(spec_decode_new(&spec_type_replica_set, j, &errs, (void **) &rs2), 0);
        assert_true(spec_replica_set_equal(rs, rs2));
        json_decref(j);
        free(text);
        spec_replica_set_free(rs);
        spec_replica_set_free(rs2);
        assert_int_equal(errs.n, 0);
}

/* A string that is not UTF-8 (a namespace taken from a URL) encodes with its
 * bad bytes escaped, and nothing leaks (ASan's leak check is on). */
static void test_encode_not_utf8(void **state) {
        spec_replica_set *rs = spec_replica_set_new();
        _cleanup_free_ char *ns = malloc(1 + 2 * 3000 + 1), *text = NULL;
        json_t *j;

        ns[0] = (char) 0xff;
        for (size_t i = 0; i < 3000; i++)
                memcpy(ns + 1 + 2 * i, "\xc3\xa9", 2);
        ns[1 + 2 * 3000] = 0;
        rs->metadata.namespace = strdup(ns);
        j = spec_replica_set_encode(rs);
        assert_non_null(j);
        text = strdup(
                json_string_value(json_object_get(json_object_get(j, "metadata"), "namespace")));
        assert_true(startswith(text, "\\xff\xc3\xa9\xc3\xa9"));
        assert_int_equal(strlen(text), 4 + 2 * 3000);
        json_decref(j);
        spec_replica_set_free(rs);

        /* A long value quoted in an error is cut between characters: byte 196
         * of the quoted name falls inside an é, and the message must still be
         * UTF-8. */
        _cleanup_free_ char *doc = malloc(4096);
        spec_errors errs = {};
        spec_docs docs = {};
        spec_deployment *d = NULL;
        int n = snprintf(doc, 4096,
                         "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\","
                         "\"metadata\":{\"name\":\"aa%.300s\"}}",
                         ns + 1);
        assert_true(n > 0 && n < 4096);
        assert_int_equal(spec_parse("cut.json", doc, strlen(doc), &errs, &docs), 0);
        (void) spec_decode_new(&spec_type_deployment, docs.items[0].root, &errs, (void **) &d);
        if (d)
                (void) spec_deployment_validate(d, &errs);
        assert_true(errs.n > 0);
        for (size_t e = 0; e < errs.n; e++) {
                _cleanup_free_ char *msg = spec_error_format(&errs.items[e]);
                assert_non_null(msg);
                json_t *js = json_string(msg); /* jansson takes only UTF-8 */
                assert_non_null(js);
                json_decref(js);
        }
        spec_deployment_free(d);
        spec_docs_done(&docs);
        spec_errors_done(&errs);
}

static void test_yaml_dump_quoting(void **state) {
        json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:i, s:b, s:n, s:f}", "a", "8080", "b",
                              "true", "c", "", "d", "null", "e", "plain text", "f", 7, "g", 1, "h",
                              "i", 1.0);
        char *yaml = spec_yaml_dump(j);
        spec_errors errs = {};
        spec_docs docs = {};

        assert_non_null(yaml);
        assert_int_equal(spec_parse("y", yaml, strlen(yaml), &errs, &docs), 0);
        assert_true(json_equal(j, docs.items[0].root));
        assert_true(json_is_real(json_object_get(docs.items[0].root, "i")));
        spec_docs_done(&docs);
        json_decref(j);
        free(yaml);
}

static void test_error_cap(void **state) {
        spec_errors errs = {};
        for (int i = 0; i < SPEC_MAX_ERRORS + 50; i++)
                assert_int_equal(spec_errors_add(&errs, "spec", "error %d", i), -EINVAL);
        assert_int_equal(errs.n, SPEC_MAX_ERRORS);
        assert_int_equal(errs.dropped, 50);
        spec_errors_done(&errs);
}

/* ---- hostile input --------------------------------------------------------------------------- */

static int parse_buffer(const char *data, size_t n, char **first_error) {
        spec_manifest m = {};
        spec_errors errs = {};
        int r = spec_manifest_add_buffer(&m, "hostile", data, n, &errs);

        if (first_error)
                *first_error = errs.n ? spec_error_format(&errs.items[0]) : NULL;
        spec_manifest_done(&m);
        spec_errors_done(&errs);
        return r;
}

static void test_hostile_huge(void **state) {
        size_t n = SPEC_MAX_INPUT_SIZE + 1;
        char *big = malloc(n), *err = NULL;

        memset(big, 'a', n);
        assert_int_equal(parse_buffer(big, n, &err), -EINVAL);
        assert_non_null(strstr(err, "larger than"));
        free(err);
        free(big);
}

static void test_hostile_deep(void **state) {
        tend_buf b = TEND_BUF_INIT(1 << 20);
        char *err = NULL;

        /* YAML flow and block, and JSON, 200 levels deep. */
        for (int i = 0; i < 200; i++)
                tend_buf_adds(&b, "[");
        for (int i = 0; i < 200; i++)
                tend_buf_adds(&b, "]");
        assert_int_equal(parse_buffer(b.data, b.len, &err), -EINVAL);
        assert_non_null(strstr(err, "nesting deeper than 64"));
        free(err);

        tend_buf_reset(&b);
        tend_buf_adds(&b, "a: ");
        for (int i = 0; i < 200; i++)
                tend_buf_adds(&b, "[");
        assert_int_equal(parse_buffer(b.data, b.len, &err), -EINVAL);
        assert_non_null(strstr(err, "nesting deeper than 64"));
        free(err);

        tend_buf_reset(&b);
        for (int i = 0; i < 100; i++)
                tend_buf_addf(&b, "%*sk:\n", i * 2, "");
        assert_int_equal(parse_buffer(b.data, b.len, &err), -EINVAL);
        assert_non_null(strstr(err, "nesting deeper than 64"));
        free(err);

        tend_buf_reset(&b);
        for (int i = 0; i < 100; i++)
                tend_buf_adds(&b, "{\"a\":");
        tend_buf_adds(&b, "1");
        for (int i = 0; i < 100; i++)
                tend_buf_adds(&b, "}");
        assert_int_equal(parse_buffer(b.data, b.len, &err), -EINVAL);
        assert_non_null(strstr(err, "nesting deeper than 64"));
        free(err);
        tend_buf_free(&b);
}

static void test_hostile_alias_bomb(void **state) {
        static const char bomb[] = "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
                                   "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
                                   "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n"
                                   "d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n";
        char *err = NULL;

        assert_int_equal(parse_buffer(bomb, strlen(bomb), &err), -EINVAL);
        assert_non_null(strstr(err, "hostile:2:"));
        assert_non_null(strstr(err, "aliases"));
        free(err);
}

static void test_hostile_many_items(void **state) {
        tend_buf b = TEND_BUF_INIT(1 << 20);
        char *err = NULL;

        tend_buf_adds(&b, "a: [");
        for (int i = 0; i < SPEC_MAX_ITEMS + 1; i++)
                tend_buf_adds(&b, "1,");
        tend_buf_adds(&b, "1]\n");
        assert_int_equal(parse_buffer(b.data, b.len, &err), -EINVAL);
        assert_non_null(strstr(err, "more than 10000 entries"));
        free(err);

        tend_buf_reset(&b);
        for (int i = 0; i < SPEC_MAX_DOCUMENTS + 1; i++)
                tend_buf_adds(&b, "---\na: 1\n");
        assert_int_equal(parse_buffer(b.data, b.len, &err), -EINVAL);
        assert_non_null(strstr(err, "more than 1000 documents"));
        free(err);

        /* The items of a List count as documents: one file of 1001 items,
         * or two Lists of 600, in YAML and in JSON. */
        for (int json = 0; json < 2; json++)
                for (int lists = 1; lists <= 2; lists++) {
                        int items = lists == 1 ? SPEC_MAX_DOCUMENTS + 1 : 600;
                        tend_buf_reset(&b);
                        for (int l = 0; l < lists; l++) {
                                tend_buf_adds(&b, json ? "{\"kind\":\"List\",\"items\":["
                                                       : "---\nkind: List\nitems: [");
                                for (int i = 0; i < items; i++)
                                        tend_buf_adds(&b, i ? ",{\"a\":1}" : "{\"a\":1}");
                                tend_buf_adds(&b, json ? "]}\n" : "]\n");
                        }
                        assert_int_equal(parse_buffer(b.data, b.len, &err), -EINVAL);
                        if (!strstr(err, "more than 1000 documents (the items of a List count"))
                                fail_msg("%s, %d lists: %s", json ? "JSON" : "YAML", lists, err);
                        free(err);
                }
        tend_buf_free(&b);
}

static size_t allocated_bytes(void) {
#if defined(__SANITIZE_ADDRESS__)
        return __sanitizer_get_current_allocated_bytes();
#else
        return mallinfo2().uordblks;
#endif
}

/* Each value's source position is kept under its whole field path: long
 * keys over many values once took 466 MiB for 843 KB of YAML. What a parse
 * keeps is bounded by a small multiple of its input. */
static void test_hostile_positions(void **state) {
        tend_buf b = TEND_BUF_INIT(1 << 20);
        spec_errors errs = {};
        spec_docs docs = {};
        size_t before, held;

        /* ten levels of 90-character keys, then 20 lists of 9000 values */
        for (int level = 0; level < 10; level++) {
                tend_buf_addf(&b, "%*s", level * 2, "");
                for (int c = 0; c < 89; c++)
                        tend_buf_adds(&b, "k");
                tend_buf_addf(&b, "%d:\n", level);
        }
        for (int l = 0; l < 20; l++) {
                tend_buf_addf(&b, "%*sl%d: [", 20, "", l);
                for (int i = 0; i < 9000; i++)
                        tend_buf_adds(&b, i ? ",1" : "1");
                tend_buf_adds(&b, "]\n");
        }
        assert_true(b.len < SPEC_MAX_INPUT_SIZE);
        before = allocated_bytes();
        assert_int_equal(spec_parse("deep.yaml", b.data, b.len, &errs, &docs), 0);
        held = allocated_bytes() - before;
        /* the values themselves (180,000 JSON integers) are most of it */
        if (held > 40 * b.len)
                fail_msg("%zu bytes of YAML hold %zu bytes after parsing (%zu times)", b.len, held,
                         held / b.len);
        /* the positions of the fields written first are still known */
        unsigned line = 0, col = 0;
        char top[128];
        snprintf(top, sizeof top, "%.*s0", 89,
                 "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk"
                 "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk");
        assert_true(spec_doc_position(&docs.items[0], top, &line, &col));
        spec_docs_done(&docs);
        spec_errors_done(&errs);
        tend_buf_free(&b);
}

/* Random bytes, random mutations of a valid manifest: never a crash, never
 * a hang, always either a result or an error. */
static void test_hostile_garbage(void **state) {
        static const char valid[] = BASE_YAML "        ports: [{name: http}]\n";
        uint32_t seed = 12345;
        char buf[4096];

        for (int round = 0; round < 3000; round++) {
                size_t n;
                int r;

                if (round % 2 == 0) {
                        n = (size_t) (seed % sizeof buf);
                        for (size_t i = 0; i < n; i++) {
                                seed = seed * 1103515245 + 12345;
                                buf[i] = (char) (seed >> 16);
                        }
                } else {
                        n = sizeof valid - 1;
                        memcpy(buf, valid, n);
                        for (int k = 0; k < 4; k++) {
                                seed = seed * 1103515245 + 12345;
                                buf[(seed >> 8) % n] =
                                        "{}[]:,-&*!|>'\"#%@`\t\n \x01\xff"[(seed >> 20) % 24];
                        }
                }
                seed = seed * 1103515245 + 12345;
                r = parse_buffer(buf, n, NULL);
                assert_true(r == 0 || r == -EINVAL);
        }
}

/* The OpenAPI schema comes from the decoder's tables: what it accepts, no
 * more (image is refused, so not offered), lists atomic for kubectl apply. */
static void test_openapi_schema(void **state) {
        json_t *schemas = json_object();
        char *name = NULL;

        assert_int_equal(spec_openapi_schema(&spec_type_deployment, schemas, &name), 0);
        assert_string_equal(name, "io.k8s.api.apps.v1.Deployment");
        spec_openapi_strip(schemas);
        json_t *spec = json_object_get(schemas, "io.k8s.api.apps.v1.DeploymentSpec");
        assert_string_equal(
                json_string_value(json_object_get(
                        json_object_get(json_object_get(spec, "properties"), "replicas"), "type")),
                "integer");
        json_t *c = json_object_get(json_object_get(schemas, "io.k8s.api.core.v1.Container"),
                                    "properties");
        assert_non_null(json_object_get(c, "command"));
        assert_null(json_object_get(c, "image"));
        assert_string_equal(json_string_value(json_object_get(json_object_get(c, "env"),
                                                              "x-kubernetes-patch-merge-key")),
                            "name");
        /* ports: keyed by containerPort and protocol, merged by containerPort */
        assert_string_equal(json_string_value(json_object_get(json_object_get(c, "ports"),
                                                              "x-kubernetes-list-type")),
                            "map");
        assert_int_equal(json_array_size(json_object_get(json_object_get(c, "ports"),
                                                         "x-kubernetes-list-map-keys")),
                         2);
        assert_string_equal(json_string_value(json_object_get(json_object_get(c, "ports"),
                                                              "x-kubernetes-patch-merge-key")),
                            "containerPort");
        /* two cuts of ObjectMeta, two names; no bookkeeping left */
        assert_non_null(
                json_object_get(schemas, "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        assert_non_null(
                json_object_get(schemas, "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta2"));
        const char *k;
        json_t *v;
        json_object_foreach (schemas, k, v)
                assert_null(json_object_get(v, "x-tend-type"));
        free(name);
        json_decref(schemas);
}

/* fieldValidation=Ignore|Warn: unknown keys out, with their paths; fields
 * tend refuses stay (to be refused); maps keep every key. */
static void test_drop_unknown(void **state) {
        json_error_t e;
        json_t *j = json_loads(
                "{\"kind\":\"Deployment\",\"spec\":{\"replcas\":2,\"template\":{"
                "\"metadata\":{\"labels\":{\"any\":\"x\"}},\"spec\":{\"containers\":["
                "{\"name\":\"a\",\"image\":\"i\",\"colour\":1}]}}}}",
                0, &e);
        json_t *paths = json_array();

        assert_non_null(j);
        assert_int_equal(spec_drop_unknown(&spec_type_deployment, j, paths), 0);
        assert_int_equal(json_array_size(paths), 2);
        assert_string_equal(json_string_value(json_array_get(paths, 0)), "spec.replcas");
        assert_string_equal(json_string_value(json_array_get(paths, 1)),
                            "spec.template.spec.containers[0].colour");
        json_t *c = json_array_get(
                json_object_get(
                        json_object_get(json_object_get(json_object_get(j, "spec"), "template"),
                                        "spec"),
                        "containers"),
                0);
        assert_non_null(json_object_get(c, "image"));
        assert_null(json_object_get(c, "colour"));
        json_decref(paths);
        json_decref(j);
}

/* metadata.managedFields: typed entries with fieldsV1 kept as given, through
 * decode, copy, equality and encode (what the store keeps); bad entries are
 * refused with their path. */
static void test_managed_fields(void **state) {
        static const char *const text =
                "{\"metadata\":{\"name\":\"w\",\"managedFields\":[{\"manager\":\"kubectl\","
                "\"operation\":\"Apply\",\"apiVersion\":\"apps/v1\",\"time\":"
                "\"2026-12-04T08:00:00Z\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{"
                "\"f:spec\":{\"f:replicas\":{}}}}]}}";
        json_error_t e;
        _cleanup_(json_decrefp) json_t *j = json_loads(text, 0, &e), *back = NULL, *arr = NULL;
        spec_errors errs = {};
        spec_deployment *d = NULL, *c;

        (void) state;
        assert_int_equal(spec_decode_new(&spec_type_deployment, j, &errs, (void **) &d), 0);
        assert_int_equal(d->metadata.n_managed_fields, 1);
        assert_int_equal(d->metadata.managed_fields[0].operation, SPEC_MANAGE_APPLY);
        c = spec_deployment_copy(d);
        assert_true(spec_equal(&spec_type_deployment, c, d));
        assert_true(spec_meta_managed_fields_equal(&c->metadata, &d->metadata));
        back = spec_encode(&spec_type_deployment, c);
        assert_true(json_equal(json_object_get(json_object_get(back, "metadata"), "managedFields"),
                               json_object_get(json_object_get(j, "metadata"), "managedFields")));
        /* replaced from JSON */
        arr = json_loads("[{\"manager\":\"b\",\"operation\":\"Update\",\"fieldsV1\":{}}]", 0, &e);
        assert_int_equal(spec_meta_set_managed_fields(&c->metadata, arr, NULL), 0);
        assert_string_equal(c->metadata.managed_fields[0].manager, "b");
        assert_false(spec_equal(&spec_type_deployment, c, d));
        assert_false(spec_meta_managed_fields_equal(&c->metadata, &d->metadata));
        spec_deployment_free(c);
        spec_deployment_free(d);

        json_t *bad = json_loads("{\"metadata\":{\"managedFields\":[{\"operation\":\"Merge\"},"
                                 "{\"fieldsV1\":[]}]}}",
                                 0, &e);
        d = NULL;
        assert_int_equal(spec_decode_new(&spec_type_deployment, bad, &errs, (void **) &d), -EINVAL);
        assert_null(d);
        _cleanup_free_ char *e0 = spec_error_format(&errs.items[0]),
                            *e1 = spec_error_format(&errs.items[1]);
        assert_non_null(strstr(e0, "metadata.managedFields[0].operation: Unsupported value"));
        assert_non_null(strstr(e1, "metadata.managedFields[1].fieldsV1: Invalid value: []: must be "
                                   "an object"));
        spec_errors_done(&errs);
        json_decref(bad);
}

/* The kinds' registry: every row well formed, and the names kubectl takes. */
static void test_kind_registry(void **state) {
        size_t n;
        const spec_kind *kinds = spec_kinds(&n);
        _cleanup_free_ char *apps = NULL, *core = NULL;

        (void) state;
        assert_true(n > 10);
        for (size_t i = 0; i < n; i++) {
                const spec_kind *k = &kinds[i];
                assert_non_null(k->plural);
                assert_non_null(k->kind);
                assert_non_null(k->verbs);
                /* served or said why not, never both */
                assert_false(k->type && k->absent);
                /* a mirrored kind is one tend stores */
                assert_true(!k->mirrored || k->type);
                assert_ptr_equal(spec_kind_find(k->group, k->version, k->plural), k);
                /* one row per group, version and plural */
                for (size_t j = 0; j < i; j++)
                        assert_false(streq(kinds[j].group, k->group) &&
                                     streq(kinds[j].version, k->version) &&
                                     streq(kinds[j].plural, k->plural));
        }
        assert_ptr_equal(spec_kind_of(&spec_type_deployment), spec_kind_named("deployments"));
        assert_ptr_equal(spec_kind_named("deploy"), spec_kind_named("deployment.apps"));
        assert_ptr_equal(spec_kind_named("rs"), spec_kind_of(&spec_type_replica_set));
        assert_ptr_equal(spec_kind_named("po"), spec_kind_of(&spec_type_pod));
        /* events: the core group's, the first of their type */
        assert_string_equal(spec_kind_of(&spec_type_event)->group, "");
        assert_null(spec_kind_named("pods.apps")); /* not that group */
        assert_null(spec_kind_named("services"));  /* one tend has none of */
        assert_null(spec_kind_named("deploymentsx"));
        assert_null(spec_kind_named("deploy.apps.x"));
        assert_non_null(spec_kind_find("", "v1", "pods/log")); /* a subresource */
        assert_non_null(spec_kind_find("batch", "v1", "jobs")->absent);
        apps = spec_kind_path(spec_kind_named("rs"));
        core = spec_kind_path(spec_kind_named("ev"));
        assert_string_equal(apps, "/apis/apps/v1");
        assert_string_equal(core, "/api/v1");
        /* the kinds the fleet keeps in etcd: deployments, replica sets, pods,
         * config maps */
        assert_true(spec_kind_named("deploy")->mirrored && spec_kind_named("rs")->mirrored &&
                    spec_kind_named("po")->mirrored && spec_kind_named("cm")->mirrored &&
                    !spec_kind_named("ev")->mirrored);
        for (size_t i = 0; i < n; i++) {
                const spec_kind *k = &kinds[i];
                const spec_column *c;
                /* what users write has a codec, checks and write verbs */
                if (k->writes != SPEC_WRITES_NONE) {
                        assert_non_null(k->type);
                        assert_non_null(k->validate);
                        assert_non_null(strstr(k->verbs, "create"));
                        assert_non_null(strstr(k->verbs, "patch"));
                        assert_ptr_equal(spec_kind_written(NULL, k->kind), k);
                }
                /* a stored kind's table (its first group's) begins with
                 * what kubectl expects */
                if (k->type && spec_kind_of(k->type) == k && k->type != &spec_type_event) {
                        assert_true(spec_table_columns(k->type, &c) >= 2);
                        assert_string_equal(c[0].name, "NAME");
                }
        }
        assert_ptr_equal(spec_kind_written("v1", "ConfigMap"), spec_kind_named("configmaps"));
        assert_ptr_equal(spec_kind_written("apps/v1", "Deployment"), spec_kind_named("deploy"));
        assert_null(spec_kind_written("apps/v1", "ConfigMap")); /* not that version */
        assert_null(spec_kind_written(NULL, "ReplicaSet"));     /* tendd makes them */
        assert_ptr_equal(spec_kind_written("v1", "Secret"), spec_kind_named("secrets"));
        assert_null(spec_kind_written(NULL, "Job")); /* not yet */
        _cleanup_free_ char *cm = spec_kind_printed(spec_kind_named("cm")),
                            *deploy = spec_kind_printed(spec_kind_named("deploy"));
        assert_string_equal(cm, "configmap");
        assert_string_equal(deploy, "deployment.apps");
}

/* A ConfigMap as the API server checks one (ValidateConfigMap): its name,
 * its keys, base64 binaryData, 1 MiB in all, tend.io/ annotations; and its
 * update, when it is immutable. */
static spec_config_map *config_map(const char *json) {
        _cleanup_(json_decrefp) json_t *j = json_loads(json, 0, NULL);
        spec_errors errs = {};
        spec_config_map *c = NULL;

        assert_non_null(j);
        assert_int_equal(spec_decode_new(&spec_type_config_map, j, &errs, (void **) &c), 0);
        spec_errors_done(&errs);
        return c;
}

static char *config_map_problems(const char *json) {
        spec_config_map *c = config_map(json);
        spec_errors errs = {};
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(1024);

        (void) spec_config_map_validate(c, &errs);
        for (size_t i = 0; i < errs.n; i++) {
                _cleanup_free_ char *line = spec_error_format(&errs.items[i]);
                (void) tend_buf_addf(&b, "%s\n", line);
        }
        spec_errors_done(&errs);
        spec_free(&spec_type_config_map, c);
        return tend_buf_take(&b);
}

#define CM(rest) \
        "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\"}" rest "}"

static void test_config_map(void **state) {
        static const struct {
                const char *json, *problem; /* NULL: valid */
        } cases[] = {
                { CM(""), NULL },
                { CM(",\"data\":{\"app.conf\":\"a=1\\n\",\"KEY_NAME\":\"\",\"key-name\":\"x\"}"),
                  NULL },
                { CM(",\"binaryData\":{\"bin\":\"AAEC\"},\"immutable\":true"), NULL },
                { CM(",\"data\":{\"a b\":\"x\"}"),
                  "data[a b]: Invalid value: \"a b\": a valid config key must consist of "
                  "alphanumeric characters" },
                { CM(",\"data\":{\"..x\":\"x\"}"), "data[..x]: Invalid value: \"..x\": must not "
                                                   "start with '..'" },
                { CM(",\"data\":{\".\":\"x\"}"), "must not be '.'" },
                { CM(",\"data\":{\"k\":\"x\"},\"binaryData\":{\"k\":\"AAEC\"}"),
                  "binaryData[k]: Invalid value: \"k\": duplicate of key present in data" },
                { CM(",\"binaryData\":{\"k\":\"AAE\"}"),
                  "binaryData[k]: Invalid value: not base64" },
                { "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"Bad_"
                  "Name\"}}",
                  "metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain" },
                { "{\"apiVersion\":\"apps/"
                  "v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\"}}",
                  "apiVersion: Unsupported value: \"apps/v1\": supported values: \"v1\"" },
                { "{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"c\","
                  "\"annotations\":{\"tend.io/canary\":\"1\"}}}",
                  "metadata.annotations[tend.io/canary]: Forbidden: tend.io/canary belongs on a "
                  "Deployment's metadata.annotations" },
        };

        (void) state;
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *got = config_map_problems(cases[i].json);
                if (!cases[i].problem) {
                        if (!isempty(got))
                                fail_msg("case %zu: %s", i, got);
                } else if (!strstr(strempty(got), cases[i].problem))
                        fail_msg("case %zu: want %s\ngot %s", i, cases[i].problem, strna(got));
        }

        /* 1 MiB of data and binaryData (decoded) together, and no more */
        size_t big = SPEC_CONFIG_MAP_MAX - 3;
        _cleanup_free_ char *fill = malloc(big + 1), *at = NULL, *over = NULL, *p1 = NULL,
                            *p2 = NULL;
        assert_non_null(fill);
        memset(fill, 'x', big);
        fill[big] = 0;
        at = strprintf(CM(",\"data\":{\"a\":\"%s\"},\"binaryData\":{\"b\":\"AAEC\"}"), fill);
        over = strprintf(CM(",\"data\":{\"a\":\"%sx\"},\"binaryData\":{\"b\":\"AAEC\"}"), fill);
        p1 = config_map_problems(at);
        p2 = config_map_problems(over);
        assert_string_equal(p1, "");
        assert_non_null(strstr(p2, "Too long: must have at most 1048576 bytes"));

        /* immutable: its data stays, and so does immutable */
        spec_config_map *a = config_map(CM(",\"data\":{\"k\":\"1\"},\"immutable\":true")),
                        *same = config_map(
                                CM(",\"data\":{\"k\":\"1\"},\"immutable\":true,"
                                   "\"metadata\":{\"name\":\"c\",\"labels\":{\"x\":\"y\"}}")),
                        *changed = config_map(CM(",\"data\":{\"k\":\"2\"},\"immutable\":true")),
                        *thawed = config_map(CM(",\"data\":{\"k\":\"1\"}")),
                        *mutable = config_map(CM(",\"data\":{\"k\":\"1\"}"));
        spec_errors errs = {};
        assert_int_equal(spec_config_map_validate_update(a, same, &errs), 0); /* labels may */
        assert_int_equal(spec_config_map_validate_update(a, changed, &errs), -EINVAL);
        assert_string_equal(errs.items[0].field, "data");
        assert_non_null(
                strstr(errs.items[0].message, "field is immutable when `immutable` is set"));
        spec_errors_done(&errs);
        assert_int_equal(spec_config_map_validate_update(a, thawed, &errs), -EINVAL);
        assert_string_equal(errs.items[0].field, "immutable");
        spec_errors_done(&errs);
        assert_int_equal(spec_config_map_validate_update(mutable, changed, &errs), 0);
        spec_free(&spec_type_config_map, a);
        spec_free(&spec_type_config_map, same);
        spec_free(&spec_type_config_map, changed);
        spec_free(&spec_type_config_map, thawed);
        spec_free(&spec_type_config_map, mutable);

        /* its table: NAME DATA AGE, DATA counting both maps */
        spec_config_map *t = config_map(
                CM(",\"data\":{\"a\":\"1\",\"b\":\"2\"},\"binaryData\":{\"c\":\"AAEC\"}"));
        const spec_column *cols;
        char *cells[3] = {};
        spec_table_ctx ctx = { .now = 0, .human = true };
        assert_int_equal(spec_table_columns(&spec_type_config_map, &cols), 3);
        assert_string_equal(cols[1].name, "DATA");
        assert_int_equal(spec_table_row(&spec_type_config_map, t, &ctx, cells), 0);
        assert_string_equal(cells[0], "c");
        assert_string_equal(cells[1], "3");
        for (size_t i = 0; i < 3; i++)
                free(cells[i]);
        spec_free(&spec_type_config_map, t);
}

/* A Secret: stringData merged into data, type defaulted; its checks by
 * type; and never one of its values in an error, decoding included. */
static char *secret_problems(const char *json, spec_secret **ret) {
        _cleanup_(json_decrefp) json_t *j = json_loads(json, 0, NULL);
        spec_errors errs = {};
        spec_secret *sec = NULL;
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(1024);

        assert_non_null(j);
        if (spec_decode_new(&spec_type_secret, j, &errs, (void **) &sec) >= 0) {
                assert_int_equal(spec_secret_default(sec), 0);
                (void) spec_secret_validate(sec, &errs);
        }
        for (size_t i = 0; i < errs.n; i++) {
                _cleanup_free_ char *line = spec_error_format(&errs.items[i]);
                (void) tend_buf_addf(&b, "%s\n", line);
        }
        spec_errors_done(&errs);
        if (ret)
                *ret = sec;
        else
                spec_free(&spec_type_secret, sec);
        return tend_buf_take(&b);
}

#define SEC(rest) \
        "{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"s\"}" rest "}"

static void test_secret(void **state) {
        static const struct {
                const char *json, *problem; /* NULL: valid */
        } cases[] = {
                { SEC(""), NULL },
                { SEC(",\"type\":\"kubernetes.io/"
                      "tls\",\"data\":{\"tls.crt\":\"AAEC\",\"tls.key\":\"AAEC\"}"),
                  NULL },
                { SEC(",\"type\":\"kubernetes.io/tls\",\"data\":{\"tls.crt\":\"AAEC\"}"),
                  "data[tls.key]: Required value" },
                { SEC(",\"type\":\"kubernetes.io/basic-auth\",\"stringData\":{\"password\":\"p\"}"),
                  NULL },
                { SEC(",\"type\":\"kubernetes.io/basic-auth\""), "data[username]: Required value" },
                { SEC(",\"type\":\"kubernetes.io/ssh-auth\""),
                  "data[ssh-privatekey]: Required value" },
                { SEC(",\"type\":\"kubernetes.io/"
                      "dockerconfigjson\",\"stringData\":{\".dockerconfigjson\":"
                      "\"{\\\"auths\\\":{}}\"}"),
                  NULL },
                { SEC(",\"type\":\"kubernetes.io/"
                      "dockerconfigjson\",\"stringData\":{\".dockerconfigjson\":"
                      "\"hunter2\"}"),
                  "data[.dockerconfigjson]: Invalid value: \"<secret contents redacted>\": not "
                  "JSON" },
                { SEC(",\"type\":\"kubernetes.io/service-account-token\""),
                  "tend has no service accounts" },
                { SEC(",\"type\":\"example.com/custom\",\"stringData\":{\"a\":\"b\"}"), NULL },
                { SEC(",\"data\":{\"a b\":\"AAEC\"}"), "data[a b]: Invalid value: \"a b\"" },
                { SEC(",\"data\":{\"k\":\"hunter2\"}"),
                  "data[k]: Invalid value: \"<secret contents redacted>\": not base64" },
                { SEC(",\"stringData\":{\"pin\":8675309}"),
                  "stringData[pin]: Invalid value: <secret contents redacted>: must be a string" },
                { SEC(",\"data\":\"hunter2\""), "data: Invalid value: <secret contents redacted>" },
        };

        (void) state;
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *got = secret_problems(cases[i].json, NULL);
                if (!cases[i].problem) {
                        if (!isempty(got))
                                fail_msg("case %zu: %s", i, got);
                        continue;
                }
                if (!strstr(strempty(got), cases[i].problem))
                        fail_msg("case %zu: want %s\ngot %s", i, cases[i].problem, strna(got));
                /* no value of the Secret in what is said */
                assert_null(strstr(got, "hunt")); /* (not even a part of it) */
                assert_null(strstr(got, "8675309"));
        }

        /* stringData merged over data's key of the same name, then gone;
         * the type defaulted */
        spec_secret *sec = NULL;
        _cleanup_free_ char *none = secret_problems(
                SEC(",\"data\":{\"a\":\"AAEC\",\"b\":\"AAEC\"},\"stringData\":{\"b\":\"hi\"}"),
                &sec);
        assert_string_equal(none, "");
        assert_int_equal(sec->data.n, 2);
        assert_string_equal(spec_map_get(&sec->data, "b"), "aGk=");
        assert_int_equal(sec->string_data.n, 0);
        assert_string_equal(sec->type, "Opaque");
        _cleanup_(json_decrefp) json_t *back = spec_encode(&spec_type_secret, sec);
        assert_null(json_object_get(back, "stringData"));

        /* its update: the type stays */
        spec_secret *tls = NULL;
        _cleanup_free_ char *p2 = secret_problems(
                SEC(",\"type\":\"kubernetes.io/"
                    "tls\",\"data\":{\"tls.crt\":\"AAEC\",\"tls.key\":\"AAEC\"}"),
                &tls);
        spec_errors errs = {};
        assert_int_equal(spec_secret_validate_update(sec, tls, &errs), -EINVAL);
        assert_string_equal(errs.items[0].field, "type");
        spec_errors_done(&errs);
        assert_int_equal(spec_secret_validate_update(sec, sec, &errs), 0);
        spec_free(&spec_type_secret, sec);
        spec_free(&spec_type_secret, tls);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_positions),
                cmocka_unit_test(test_selector_overlap_oracle),
                cmocka_unit_test(test_selector_overlap_many),
                cmocka_unit_test(test_encode_not_utf8),
                cmocka_unit_test(test_invalid_corpus),
                cmocka_unit_test(test_valid_corpus),
                cmocka_unit_test(test_examples_valid),
                cmocka_unit_test(test_defaults),
                cmocka_unit_test(test_template_hash),
                cmocka_unit_test(test_template_equal),
                cmocka_unit_test(test_json_dump_shared),
                cmocka_unit_test(test_dump_object),
                cmocka_unit_test(test_decode_shared),
                cmocka_unit_test(test_selector_match),
                cmocka_unit_test(test_selector_overlap),
                cmocka_unit_test(test_selector_parse_errors),
                cmocka_unit_test(test_quantities),
                cmocka_unit_test(test_backoff_parse),
                cmocka_unit_test(test_fenceposts),
                cmocka_unit_test(test_validate_update),
                cmocka_unit_test(test_other_kinds_round_trip),
                cmocka_unit_test(test_yaml_dump_quoting),
                cmocka_unit_test(test_error_cap),
                cmocka_unit_test(test_hostile_huge),
                cmocka_unit_test(test_hostile_deep),
                cmocka_unit_test(test_hostile_alias_bomb),
                cmocka_unit_test(test_hostile_many_items),
                cmocka_unit_test(test_hostile_positions),
                cmocka_unit_test(test_hostile_garbage),
                cmocka_unit_test(test_openapi_schema),
                cmocka_unit_test(test_drop_unknown),
                cmocka_unit_test(test_managed_fields),
                cmocka_unit_test(test_dns_names),
                cmocka_unit_test(test_annotation_registry),
                cmocka_unit_test(test_rollout_annotations),
                cmocka_unit_test(test_kind_registry),
                cmocka_unit_test(test_config_map),
                cmocka_unit_test(test_secret),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
