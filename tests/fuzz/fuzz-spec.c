/* SPDX-License-Identifier: MIT */

/*
 * fuzz-spec: the manifest decoder, on bytes as `tend apply -f` and tendd's
 * manifest directory read them.
 *
 * spec_parse() (YAML or JSON, many documents, kind: List), then for every
 * document a strict decode as a Deployment, Kubernetes' defaults and
 * validation; then the same bytes through spec_manifest_add_buffer() and
 * spec_manifest_check(), the path that puts file:line:col on errors.
 *
 * Properties (a violation aborts):
 *  - decode(encode(x)) == x for every deployment that decodes, before and
 *    after defaulting; for a valid one also through canonical JSON text and
 *    YAML text (what the store and `tend get -o yaml` write), which must
 *    parse back as exactly one document;
 *  - every error, as spec_error_format() puts it for people, is UTF-8 (it
 *    goes into API responses as JSON, and to terminals);
 *  - spec_json_dump() and spec_json_dump_canonical() (yajl) write every
 *    parsed document as jansson's json_dumps(JSON_COMPACT), and with
 *    JSON_SORT_KEYS, does, byte for byte;
 *  - spec_dump_object(), which writes an object without the tree, writes
 *    what spec_json_dump() and its _canonical and _shared kin write of
 *    spec_encode()'s tree, byte for byte, for every deployment that
 *    decodes, and spec_template_text() the canonical tree's text (the
 *    store's rows and the template hash are made so);
 *  - spec_template_equal(), which compares without encoding, says what
 *    comparing the canonical encodings says, for every pair of the input's
 *    templates, each as decoded and once defaulted;
 *  - spec_decode_shared() decodes what spec_decode_new() decodes, to an
 *    equal object, and refuses what it refuses;
 *  - spec_equal_encoded() of two blank deployments given each one's spec
 *    and annotations (the agent's generation test, agent/actions.c) says
 *    what comparing those two parts' encodings says, for each deployment
 *    as decoded and once defaulted;
 *  - and, from the sanitizers, no leak, no memory error, no UB.
 *
 * The input is passed as (data, size) without a NUL after it: spec_parse()
 * promises to read no further than size.
 */

#include "fuzz.h"
#include "tend/spec.h"

#define FUZZ_FILE "fuzz.yaml"

static void check_errors(const spec_errors *errs) {
        for (size_t i = 0; i < errs->n; i++) {
                _cleanup_free_ char *s = spec_error_format(&errs->items[i]);

                fuzz_check(s, "spec_error_format() returned NULL");
                fuzz_check(fuzz_utf8_valid(s), "error message is not UTF-8: %s", s);
        }
}

static _noreturn_ void fail_round_trip(const char *what, json_t *j, const spec_errors *errs) {
        _cleanup_free_ char *text = json_dumps(j, JSON_SORT_KEYS | JSON_ENCODE_ANY);

        for (size_t i = 0; errs && i < errs->n; i++)
                fprintf(stderr, "fuzz: decode error: %s: %s\n", strna(errs->items[i].field),
                        errs->items[i].message);
        fuzz_check(false, "%s; encoding: %s", what, strna(text));
        abort(); /* not reached */
}

/* The object's text written straight from it, as from its tree. */
static void check_dump_object(const spec_deployment *d, json_t *j, const char *when) {
        static const struct {
                spec_dump_flags flags;
                char *(*dump)(json_t *j);
        } ways[] = {
                { 0, spec_json_dump },
                { SPEC_DUMP_SORTED, spec_json_dump_canonical },
                { SPEC_DUMP_SHARED, spec_json_dump_shared },
        };

        for (size_t i = 0; i < ELEMENTSOF(ways); i++) {
                _cleanup_free_ char *want = ways[i].dump(j),
                                    *got = spec_dump_object(&spec_type_deployment, d,
                                                            ways[i].flags);
                fuzz_check(want && got, "%s: a dump returned NULL", when);
                fuzz_check(streq(want, got), "%s: spec_dump_object(%d) wrote %s, the tree %s", when,
                           ways[i].flags, got, want);
        }
        spec_json_dump_shared_forget();
}

/* decode(encode(d)) == d, on the tree. */
static void check_round_trip(const spec_deployment *d, const char *when) {
        _cleanup_(json_decrefp) json_t *j = spec_deployment_encode(d);
        _cleanup_(spec_deployment_freep) spec_deployment *back = NULL;
        spec_errors errs = {};

        fuzz_check(j, "%s: spec_encode() returned NULL", when);
        check_dump_object(d, j, when);
        if (spec_decode_new(&spec_type_deployment, j, &errs, (void **) &back) < 0)
                fail_round_trip(when, j, &errs);
        if (!spec_deployment_equal(d, back))
                fail_round_trip(when, j, NULL);
        spec_errors_done(&errs);
}

/* The same through text: dumped, parsed back, decoded. */
static void check_text_round_trip(const spec_deployment *d, bool yaml) {
        _cleanup_(json_decrefp) json_t *j = spec_deployment_encode(d);
        _cleanup_(spec_deployment_freep) spec_deployment *back = NULL;
        _cleanup_free_ char *text = NULL;
        spec_errors errs = {};
        spec_docs docs = {};
        const char *what = yaml ? "YAML round trip" : "JSON round trip";

        fuzz_check(j, "spec_encode() returned NULL");
        text = yaml ? spec_yaml_dump(j) : spec_json_dump_canonical(j);
        fuzz_check(text, "%s: the dump returned NULL", what);
        if (spec_parse(yaml ? "back.yaml" : "back.json", text, strlen(text), &errs, &docs) < 0 ||
            docs.n != 1) {
                fprintf(stderr, "fuzz: %s: %zu documents from:\n%s\n", what, docs.n, text);
                fail_round_trip(what, j, &errs);
        }
        if (spec_decode_new(&spec_type_deployment, docs.items[0].root, &errs, (void **) &back) <
            0) {
                fprintf(stderr, "fuzz: %s: text:\n%s\n", what, text);
                fail_round_trip(what, j, &errs);
        }
        if (!spec_deployment_equal(d, back)) {
                fprintf(stderr, "fuzz: %s: text:\n%s\n", what, text);
                fail_round_trip(what, j, NULL);
        }
        spec_docs_done(&docs);
        spec_errors_done(&errs);
}

/* The canonical encoding spec_template_equal() stands for: the template's,
 * without the pod-template-hash label (and labels, and metadata, if that
 * empties them). */
static json_t *canonical(const spec_pod_template *t) {
        json_t *j = spec_encode(&spec_type_pod_template, t), *meta, *labels;

        fuzz_check(j, "spec_encode() returned NULL");
        meta = json_object_get(j, "metadata");
        labels = json_object_get(meta, "labels");
        if (labels) {
                json_object_del(labels, SPEC_LABEL_POD_TEMPLATE_HASH);
                if (json_object_size(labels) == 0)
                        json_object_del(meta, "labels");
                if (json_object_size(meta) == 0)
                        json_object_del(j, "metadata");
        }
        return j;
}

#define MAX_TEMPLATES 16

typedef struct templates {
        spec_pod_template *t[MAX_TEMPLATES];
        size_t n;
} templates;

static void keep_template(templates *ts, const spec_pod_template *t) {
        if (ts->n < MAX_TEMPLATES) {
                ts->t[ts->n] = spec_copy(&spec_type_pod_template, t);
                fuzz_check(ts->t[ts->n], "spec_copy() returned NULL");
                ts->n++;
        }
}

static void check_templates(templates *ts) {
        for (size_t i = 0; i < ts->n; i++) {
                _cleanup_(json_decrefp) json_t *c = canonical(ts->t[i]);
                _cleanup_free_ char *want = spec_json_dump_canonical(c),
                                    *got = spec_template_text(ts->t[i]);
                fuzz_check(want && got, "a template's text is NULL");
                fuzz_check(streq(want, got), "spec_template_text() wrote %s, the tree %s", got,
                           want);
        }
        for (size_t i = 0; i < ts->n; i++)
                for (size_t k = 0; k < ts->n; k++) {
                        _cleanup_(json_decrefp) json_t *a = canonical(ts->t[i]),
                                                       *b = canonical(ts->t[k]);
                        bool eq = json_equal(a, b);
                        if (spec_template_equal(ts->t[i], ts->t[k]) != eq) {
                                _cleanup_free_ char *ta = json_dumps(a, JSON_SORT_KEYS),
                                                    *tb = json_dumps(b, JSON_SORT_KEYS);
                                fuzz_check(false,
                                           "spec_template_equal() says %s, the encodings %s: "
                                           "%s and %s",
                                           eq ? "differ" : "equal", eq ? "equal" : "differ",
                                           strna(ta), strna(tb));
                        }
                }
        for (size_t i = 0; i < ts->n; i++)
                spec_free(&spec_type_pod_template, ts->t[i]);
        ts->n = 0;
}

/* The document as yajl writes it, and as jansson does: in its order, and
 * canonical (the template hash is made of that text: it must not move). */
static void check_dump(json_t *root) {
        _cleanup_free_ char *want = json_dumps(root, JSON_COMPACT | JSON_ENCODE_ANY),
                            *got = spec_json_dump(root),
                            *want_sorted = json_dumps(root, JSON_COMPACT | JSON_ENCODE_ANY |
                                                                    JSON_SORT_KEYS),
                            *got_sorted = spec_json_dump_canonical(root);

        fuzz_check(got && got_sorted, "spec_json_dump() returned NULL");
        fuzz_check(!want || streq(want, got), "spec_json_dump() wrote %s, jansson %s", got, want);
        fuzz_check(!want_sorted || streq(want_sorted, got_sorted),
                   "spec_json_dump_canonical() wrote %s, jansson %s", got_sorted, want_sorted);
}

/* spec_decode_shared() against spec_decode_new()'s d (NULL: refused). */
static void check_decode_shared(json_t *root, const spec_deployment *d) {
        _cleanup_(spec_deployment_freep) spec_deployment *shared = NULL;
        spec_errors errs = {};
        int r = spec_decode_shared(&spec_type_deployment, root, &errs, (void **) &shared);

        fuzz_check(r != -ENOMEM, "spec_decode_shared() ran out of memory");
        fuzz_check((r >= 0) == (d != NULL), "spec_decode_shared() %s what spec_decode_new() %s",
                   r >= 0 ? "took" : "refused", d ? "took" : "refused");
        fuzz_check(!d || spec_deployment_equal(d, shared),
                   "spec_decode_shared() decoded another object");
        spec_errors_done(&errs);
}

static bool json_same(json_t *a, json_t *b) {
        return a == b || (a && b && json_equal(a, b));
}

/* The agent's generation test (agent/actions.c): a's and b's spec and
 * annotations, each shared into a blank deployment, compared as encoded,
 * against the two parts' encodings compared. */
static void check_spec_differ(const spec_deployment *a, const spec_deployment *b) {
        _cleanup_(json_decrefp) json_t *ja = spec_deployment_encode(a),
                                       *jb = spec_deployment_encode(b);
        spec_deployment x = { .spec = a->spec }, y = { .spec = b->spec };
        bool encoded, fast;

        fuzz_check(ja && jb, "spec_encode() returned NULL");
        x.metadata.annotations = a->metadata.annotations;
        y.metadata.annotations = b->metadata.annotations;
        encoded = !json_same(json_object_get(ja, "spec"), json_object_get(jb, "spec")) ||
                  !json_same(json_object_get(json_object_get(ja, "metadata"), "annotations"),
                             json_object_get(json_object_get(jb, "metadata"), "annotations"));
        fast = !spec_equal_encoded(&spec_type_deployment, &x, &y);
        fuzz_check(encoded == fast, "the spec and annotations differ by encoding: %d, without: %d",
                   encoded, fast);
}

static void decode_document(const spec_doc *doc, spec_errors *errs, templates *ts) {
        json_t *meta = json_object_get(doc->root, "metadata");
        const char *kind = json_string_value(json_object_get(doc->root, "kind"));
        const char *name = json_string_value(json_object_get(meta, "name"));
        _cleanup_free_ char *label = spec_object_label(kind, name, doc->index);
        _cleanup_(spec_deployment_freep) spec_deployment *d = NULL, *as_decoded = NULL;

        fuzz_check(label, "spec_object_label() returned NULL");
        check_dump(doc->root);
        errs->object = label;
        if (spec_decode_new(&spec_type_deployment, doc->root, errs, (void **) &d) < 0) {
                check_decode_shared(doc->root, NULL);
                goto out;
        }
        check_decode_shared(doc->root, d);
        check_round_trip(d, "decode(encode(x)) as decoded");
        keep_template(ts, &d->spec.template);
        as_decoded = spec_deployment_copy(d);
        fuzz_check(as_decoded, "spec_copy() returned NULL");
        spec_deployment_default(d);
        check_spec_differ(as_decoded, d);
        check_spec_differ(d, d);
        check_round_trip(d, "decode(encode(x)) once defaulted");
        keep_template(ts, &d->spec.template);
        if (spec_deployment_validate(d, errs) < 0 || !streq_ptr(d->kind, "Deployment"))
                goto out;
        check_text_round_trip(d, false);
        check_text_round_trip(d, true);
out:
        errs->object = NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *text = (const char *) data;
        spec_errors errs = { .file = FUZZ_FILE };
        spec_docs docs = {};
        spec_manifest m = {};
        templates ts = {};

        if (spec_parse(FUZZ_FILE, text, size, &errs, &docs) >= 0)
                for (size_t i = 0; i < docs.n; i++)
                        decode_document(&docs.items[i], &errs, &ts);
        check_templates(&ts);
        check_errors(&errs);
        spec_docs_done(&docs);
        spec_errors_done(&errs);

        errs = (spec_errors){};
        if (spec_manifest_add_buffer(&m, FUZZ_FILE, text, size, &errs) >= 0)
                (void) spec_manifest_check(&m, &errs);
        check_errors(&errs);
        spec_manifest_done(&m);
        spec_errors_done(&errs);
        return 0;
}
