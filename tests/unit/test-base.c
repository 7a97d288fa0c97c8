/* SPDX-License-Identifier: MIT */

/* Unit tests of tend_base: buffers, time, strings. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>

#include <cmocka.h>

#include "tend/base.h"

static void test_buf_bounded(void **state) {
        tend_buf b = TEND_BUF_INIT(10);

        assert_int_equal(tend_buf_adds(&b, "hello"), 0);
        assert_int_equal(tend_buf_addf(&b, "%d", 1234), 0);
        assert_string_equal(tend_buf_str(&b), "hello1234");
        /* One byte left; two do not fit and change nothing. */
        assert_int_equal(tend_buf_adds(&b, "ab"), -E2BIG);
        assert_string_equal(tend_buf_str(&b), "hello1234");
        assert_int_equal(tend_buf_addf(&b, "%s", "xy"), -E2BIG);
        assert_int_equal(b.len, 9);
        assert_int_equal(tend_buf_adds(&b, "!"), 0);
        assert_int_equal(b.len, 10);
        tend_buf_reset(&b);
        assert_string_equal(tend_buf_str(&b), "");

        char *s = tend_buf_take(&b);
        assert_string_equal(s, "");
        free(s);
        tend_buf_free(&b);

        tend_buf big = TEND_BUF_INIT(1 << 20);
        for (int i = 0; i < 10000; i++)
                assert_int_equal(tend_buf_adds(&big, "0123456789"), 0);
        assert_int_equal(big.len, 100000);
        tend_buf_free(&big);
}

static void test_timestamps(void **state) {
        char buf[TIMESTAMP_MAX];
        usec_t t;

        assert_string_equal(format_timestamp(buf, 1764688009ULL * USEC_PER_SEC),
                            "2025-12-02T15:06:49Z");
        assert_string_equal(format_timestamp(buf, 1764688009ULL * USEC_PER_SEC + 5),
                            "2025-12-02T15:06:49.000005Z");
        assert_int_equal(parse_timestamp(NULL, &t), -EINVAL); /* a field left out */
        assert_int_equal(parse_timestamp("2025-12-02T15:06:49Z", &t), 0);
        assert_int_equal(t, 1764688009ULL * USEC_PER_SEC);
        assert_int_equal(parse_timestamp("2025-12-02T17:06:49.5+02:00", &t), 0);
        assert_int_equal(t, 1764688009ULL * USEC_PER_SEC + 500000);
        assert_int_equal(parse_timestamp("2025-12-02T15:06:49.123456789Z", &t), 0);
        assert_int_equal(t % USEC_PER_SEC, 123456);
        assert_int_equal(parse_timestamp("2025-12-02 15:06:49Z", &t), 0);

        static const char *const bad[] = { "",
                                           "2025-12-02",
                                           "2025-13-02T00:00:00Z",
                                           "2025-12-02T15:06:49",
                                           "2025-12-02T15:06:49Zx",
                                           "2025-12-02T25:00:00Z",
                                           "yesterday" };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                assert_int_equal(parse_timestamp(bad[i], &t), -EINVAL);

        /* Round trip of "now". */
        usec_t now = now_realtime();
        assert_int_equal(parse_timestamp(format_timestamp(buf, now), &t), 0);
        assert_int_equal(t, now);
}

static void test_durations(void **state) {
        static const struct {
                const char *s;
                int r;
                usec_t v;
        } cases[] = {
                { "30s", 0, 30 * USEC_PER_SEC },
                { "30", 0, 30 * USEC_PER_SEC },
                { "1m30s", 0, 90 * USEC_PER_SEC },
                { "500ms", 0, 500 * USEC_PER_MSEC },
                { "1.5s", 0, 1500 * USEC_PER_MSEC },
                { "2h", 0, 7200 * USEC_PER_SEC },
                { "10us", 0, 10 },
                { "", -EINVAL, 0 },
                { "s", -EINVAL, 0 },
                { "5x", -EINVAL, 0 },
                { "-1s", -EINVAL, 0 },
                { "1m30", -EINVAL, 0 },
        };
        char buf[DURATION_MAX];

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                usec_t v = 0;
                int r = parse_duration(cases[i].s, &v);
                if (r != cases[i].r || (r == 0 && v != cases[i].v))
                        fail_msg("\"%s\": r=%d v=%llu", cases[i].s, r, (unsigned long long) v);
        }
        assert_string_equal(format_duration(buf, 90 * USEC_PER_SEC), "1m30s");
        assert_string_equal(format_duration(buf, 1500 * USEC_PER_MSEC), "1.500s");
        assert_string_equal(format_duration(buf, 250 * USEC_PER_MSEC), "250ms");
        assert_string_equal(format_duration(buf, 3 * 3600 * USEC_PER_SEC), "3h0m");
        assert_true(now_monotonic() > 0);
}

static void test_usec_from_sec(void **state) {
        assert_int_equal(usec_from_sec(-5), 0);
        assert_int_equal(usec_from_sec(0), 0);
        assert_int_equal(usec_from_sec(30), 30 * USEC_PER_SEC);
        /* terminationGracePeriodSeconds: 9223372036854775807 must not wrap
         * to a short grace, nor overflow a deadline added to the clock. */
        usec_t huge = usec_from_sec(INT64_MAX);
        assert_true(huge >= usec_from_sec(1LL << 39));
        assert_true(huge + now_monotonic() > huge);
}

static void test_strings(void **state) {
        char **l = NULL;
        int64_t i;
        uint64_t u;

        assert_string_equal(startswith("deployment/web", "deployment/"), "web");
        assert_null(startswith("pod/x", "deployment/"));
        assert_string_equal(endswith("web.yaml", ".yaml"), ".yaml");
        assert_null(endswith("a", ".yaml"));

        assert_int_equal(strv_extend(&l, "a"), 0);
        assert_int_equal(strv_extend(&l, "b"), 0);
        assert_int_equal(strv_length(l), 2);
        assert_true(strv_contains(l, "b"));
        char **c = strv_copy(l);
        assert_true(strv_equal(l, c));
        strv_free(c);
        strv_free(l);

        assert_int_equal(safe_atoi64("-42", &i), 0);
        assert_int_equal(i, -42);
        assert_int_equal(safe_atoi64("42x", &i), -EINVAL);
        assert_int_equal(safe_atoi64("", &i), -EINVAL);
        assert_int_equal(safe_atoi64("99999999999999999999", &i), -ERANGE);
        assert_int_equal(safe_atou64("-1", &u), -EINVAL);
        assert_int_equal(safe_atou64("18446744073709551615", &u), 0);

        assert_int_equal(string_distance("replicas", "replcas"), 1);
        assert_int_equal(string_distance("", "abc"), 3);
        assert_int_equal(string_distance("kitten", "sitting"), 3);

        char *p = NULL;
        assert_int_equal(free_and_strdup(&p, "x"), 0);
        assert_int_equal(free_and_strdup(&p, NULL), 0);
        assert_null(p);
}

static void test_log_levels(void **state) {
        assert_int_equal(log_level_from_string("debug"), LOG_LEVEL_DEBUG);
        assert_int_equal(log_level_from_string("warning"), LOG_LEVEL_WARNING);
        assert_int_equal(log_level_from_string("4"), LOG_LEVEL_WARNING);
        assert_int_equal(log_level_from_string("loud"), -EINVAL);
        /* log_error_errno returns the error it was given, negative. */
        log_set_max_level(LOG_LEVEL_ERR - 1);
        assert_int_equal(log_error_errno(-ENOENT, "quiet %s", "test"), -ENOENT);
        assert_int_equal(log_error_errno(ENOENT, "quiet"), -ENOENT);
        log_set_max_level(LOG_LEVEL_INFO);
}

static void test_read_full_file(void **state) {
        char path[] = "/tmp/tend-test-XXXXXX";
        int fd = mkstemp(path);
        char *data = NULL;
        size_t n;

        assert_true(fd >= 0);
        assert_int_equal(write(fd, "hello", 5), 5);
        close(fd);
        assert_int_equal(read_full_file(path, 100, &data, &n), 0);
        assert_int_equal(n, 5);
        assert_string_equal(data, "hello");
        free(data);
        assert_int_equal(read_full_file(path, 4, &data, &n), -EFBIG);
        unlink(path);
        assert_int_equal(read_full_file(path, 4, &data, &n), -ENOENT);
}

/* Against a plain array as the reference, with many removals so that the
 * backward-shift deletion is exercised across wrap-around. */
static void test_grow(void **state) {
        int *v = NULL;
        size_t alloc = 0, reallocs = 0;

        for (size_t n = 0; n < 10000; n++) {
                size_t before = alloc;
                assert_int_equal(TEND_GROW(v, alloc, n + 1), 0);
                assert_true(alloc >= n + 1);
                reallocs += alloc != before;
                v[n] = (int) n;
        }
        assert_true(reallocs <= 11); /* 16, 32, ... 16384: doubling */
        for (size_t n = 0; n < 10000; n++)
                assert_int_equal(v[n], (int) n);
        assert_int_equal(TEND_GROW(v, alloc, 5), 0); /* enough room: nothing */
        assert_int_equal(TEND_GROW(v, alloc, SIZE_MAX / 2), -ENOMEM);
        assert_true(alloc >= 10000 && v[9999] == 9999); /* unchanged */
        free(v);
}

static void test_hashmap(void **state) {
        tend_hashmap *h = tend_hashmap_new();
        enum { N = 3000 };
        static bool present[N];
        uint32_t seed = 7;

        assert_non_null(h);
        for (int round = 0; round < 20000; round++) {
                char key[32];
                void *old;
                seed = seed * 1103515245 + 12345;
                int k = (int) ((seed >> 8) % N);
                snprintf(key, sizeof key, "ns/pod-%d", k);
                if ((seed >> 4) % 3 == 0) {
                        void *v = tend_hashmap_remove(h, key);
                        assert_true(present[k] ? v == (void *) (intptr_t) (k + 1) : v == NULL);
                        present[k] = false;
                } else {
                        assert_int_equal(
                                tend_hashmap_put(h, key, (void *) (intptr_t) (k + 1), &old), 0);
                        assert_true(present[k] ? old == (void *) (intptr_t) (k + 1) : old == NULL);
                        present[k] = true;
                }
        }
        size_t count = 0;
        for (int k = 0; k < N; k++) {
                char key[32];
                snprintf(key, sizeof key, "ns/pod-%d", k);
                assert_true(present[k] ? tend_hashmap_get(h, key) == (void *) (intptr_t) (k + 1)
                                       : tend_hashmap_get(h, key) == NULL);
                count += present[k];
        }
        assert_int_equal(tend_hashmap_size(h), count);
        size_t iterated = 0;
        const char *key;
        void *v;
        for (size_t i = 0; tend_hashmap_next(h, &i, &key, &v);)
                iterated++;
        assert_int_equal(iterated, count);
        tend_hashmap_free(h);
}

/* RFC 4648 §10's vectors both ways; what is not canonical base64 is refused. */
static void test_base64(void **state) {
        static const char *const vectors[][2] = {
                { "", "" },
                { "f", "Zg==" },
                { "fo", "Zm8=" },
                { "foo", "Zm9v" },
                { "foob", "Zm9vYg==" },
                { "fooba", "Zm9vYmE=" },
                { "foobar", "Zm9vYmFy" },
        };
        static const char *const bad[] = { "Zg=",      "Zg",       "Z===", "=Zg=",
                                           "Zm9v!A==", "Zg==Zg==", "Zm 9v" };
        unsigned char all[256];
        void *out;
        size_t n;

        for (size_t i = 0; i < ELEMENTSOF(vectors); i++) {
                char *e = tend_base64_encode(vectors[i][0], strlen(vectors[i][0]));
                assert_string_equal(e, vectors[i][1]);
                free(e);
                assert_int_equal(tend_base64_decode(vectors[i][1], strlen(vectors[i][1]), &out, &n),
                                 0);
                assert_int_equal(n, strlen(vectors[i][0]));
                assert_string_equal(out, vectors[i][0]);
                free(out);
        }
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                if (tend_base64_decode(bad[i], strlen(bad[i]), &out, &n) != -EINVAL)
                        fail_msg("\"%s\" decoded", bad[i]);
        /* every byte value, through and back */
        for (size_t i = 0; i < sizeof all; i++)
                all[i] = (unsigned char) i;
        char *e = tend_base64_encode(all, sizeof all);
        assert_non_null(e);
        assert_int_equal(tend_base64_decode(e, strlen(e), &out, &n), 0);
        assert_int_equal(n, sizeof all);
        assert_memory_equal(out, all, sizeof all);
        free(out);
        free(e);
}

static void test_utf8(void **state) {
        _cleanup_free_ char *a = NULL, *b = NULL, *c = NULL;

        assert_int_equal(utf8_char_len("a", 1), 1);
        assert_int_equal(utf8_char_len("\xc3\xa9", 2), 2);         /* é */
        assert_int_equal(utf8_char_len("\xc3\xa9", 1), 0);         /* cut */
        assert_int_equal(utf8_char_len("\xe2\x82\xac", 3), 3);     /* € */
        assert_int_equal(utf8_char_len("\xf0\x9f\x98\x80", 4), 4); /* U+1F600 */
        assert_int_equal(utf8_char_len("\xc0\xaf", 2), 0);         /* overlong '/' */
        assert_int_equal(utf8_char_len("\xe0\x80\xaf", 3), 0);     /* overlong */
        assert_int_equal(utf8_char_len("\xed\xa0\x80", 3), 0);     /* surrogate */
        assert_int_equal(utf8_char_len("\xf4\x90\x80\x80", 4), 0); /* over U+10FFFF */
        assert_true(utf8_is_valid(""));
        assert_true(utf8_is_valid("kubectl-é€😀"));
        assert_false(utf8_is_valid("kube\xff"
                                   "ctl"));
        assert_false(utf8_is_valid("cut \xc3"));
        assert_int_equal(utf8_char_len("\xff", 1), 0);
        assert_int_equal(utf8_char_len("\x80", 1), 0);

        a = utf8_escape_invalid("ok \xc3\xa9");
        assert_string_equal(a, "ok \xc3\xa9");
        b = utf8_escape_invalid("\xff\xc3\xa9\xc3");
        assert_string_equal(b, "\\xff\xc3\xa9\\xc3");
        c = utf8_escape_invalid("");
        assert_string_equal(c, "");

        /* "aé" cut to 2 bytes keeps "a", not half of é */
        assert_int_equal(utf8_cut("a\xc3\xa9", 3, 2), 1);
        assert_int_equal(utf8_cut("a\xc3\xa9", 3, 3), 3);
        assert_int_equal(utf8_cut("abc", 3, 2), 2);
        assert_int_equal(utf8_cut("\xe2\x82\xac!", 4, 2), 0);
}

/* /proc/PID/stat by field number: ppid and pgrp of this process, a
 * start time, and -ESRCH for a pid that is not there. */
static void test_proc_stat_fields(void **state) {
        unsigned long long f[2] = {}, start = 0;

        assert_int_equal(proc_stat_fields(getpid(), 4, 5, f), 0);
        assert_int_equal(f[0], (unsigned long long) getppid());
        assert_int_equal(f[1], (unsigned long long) getpgrp());
        assert_int_equal(proc_stat_fields(getpid(), 22, 22, &start), 0);
        assert_true(start > 0);
        assert_int_equal(proc_stat_fields(INT32_MAX, 4, 4, f), -ESRCH);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_buf_bounded), cmocka_unit_test(test_timestamps),
                cmocka_unit_test(test_durations),   cmocka_unit_test(test_strings),
                cmocka_unit_test(test_log_levels),  cmocka_unit_test(test_read_full_file),
                cmocka_unit_test(test_hashmap),     cmocka_unit_test(test_usec_from_sec),
                cmocka_unit_test(test_grow),        cmocka_unit_test(test_utf8),
                cmocka_unit_test(test_base64),      cmocka_unit_test(test_proc_stat_fields),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
