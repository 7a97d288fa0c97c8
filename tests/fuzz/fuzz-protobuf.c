/* SPDX-License-Identifier: MIT */

/*
 * fuzz-protobuf: protobuf request bodies (api/protobuf.c), as kubectl's
 * typed clients send them: "k8s\0", a runtime.Unknown, a ConfigMap or a
 * Secret, read by protobuf-c into JSON.
 *
 * Input: the body.
 *
 * Properties (a violation aborts):
 *  - exactly one of an object or an error, and an error's code is 400 or
 *    415;
 *  - an error is UTF-8 (it goes into a JSON Status);
 *  - an object is a ConfigMap or a Secret of v1, its metadata an object;
 *    every value of its byte maps (binaryData, a Secret's data) is
 *    base64 that decodes;
 *  - and, from the sanitizers, no leak, no memory error, no UB.
 */

#include "api-internal.h"
#include "fuzz.h"

static void check_bytes(json_t *map, const char *what) {
        const char *k;
        json_t *v;

        json_object_foreach (map, k, v) {
                _cleanup_free_ void *bytes = NULL;
                size_t n;
                fuzz_check(json_is_string(v), "%s[%s] is not a string", what, k);
                fuzz_check(tend_base64_decode(json_string_value(v), json_string_length(v), &bytes,
                                              &n) >= 0,
                           "%s[%s] is not base64", what, k);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *err = NULL;
        unsigned code = 0;
        json_t *j = api__protobuf_object(data, size, &code, &err);

        fuzz_check(!j != !err, "an object and an error, or neither");
        if (!j) {
                fuzz_check(code == 400 || code == 415, "error code %u", code);
                fuzz_check(fuzz_utf8_valid(err), "the error is not UTF-8");
                return 0;
        }
        const char *kind = json_string_value(json_object_get(j, "kind"));
        fuzz_check(streq_ptr(json_string_value(json_object_get(j, "apiVersion")), "v1"),
                   "apiVersion");
        fuzz_check(streq_ptr(kind, "ConfigMap") || streq_ptr(kind, "Secret"), "kind %s",
                   strna(kind));
        fuzz_check(json_is_object(json_object_get(j, "metadata")), "metadata");
        check_bytes(json_object_get(j, streq(kind, "ConfigMap") ? "binaryData" : "data"), "bytes");
        json_decref(j);
        return 0;
}
