/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <time.h>

#include "tend/base.h"

static usec_t timespec_load(const struct timespec *ts) {
        return (usec_t) ts->tv_sec * USEC_PER_SEC + (usec_t) ts->tv_nsec / NSEC_PER_USEC;
}

usec_t now_monotonic(void) {
        struct timespec ts;
        /* Cannot fail for a valid clock id. */
        (void) clock_gettime(CLOCK_MONOTONIC, &ts);
        return timespec_load(&ts);
}

usec_t now_realtime(void) {
        struct timespec ts;
        (void) clock_gettime(CLOCK_REALTIME, &ts);
        return timespec_load(&ts);
}

char *format_timestamp(char buf[static TIMESTAMP_MAX], usec_t t) {
        time_t sec = (time_t) (t / USEC_PER_SEC);
        unsigned frac = (unsigned) (t % USEC_PER_SEC);
        struct tm tm;
        size_t n;

        if (!gmtime_r(&sec, &tm)) {
                snprintf(buf, TIMESTAMP_MAX, "invalid");
                return buf;
        }
        n = strftime(buf, TIMESTAMP_MAX, "%Y-%m-%dT%H:%M:%S", &tm);
        if (frac)
                snprintf(buf + n, TIMESTAMP_MAX - n, ".%06uZ", frac);
        else
                snprintf(buf + n, TIMESTAMP_MAX - n, "Z");
        return buf;
}

static int parse_digits(const char **p, int n, int *ret) {
        int v = 0;
        for (int i = 0; i < n; i++) {
                if (!isdigit((unsigned char) (*p)[i]))
                        return -EINVAL;
                v = v * 10 + ((*p)[i] - '0');
        }
        *p += n;
        *ret = v;
        return 0;
}

static int expect_char(const char **p, char c) {
        if (**p != c)
                return -EINVAL;
        (*p)++;
        return 0;
}

int parse_timestamp(const char *s, usec_t *ret) {
        const char *p = s;
        int y, mo, d, h, mi, sec, oh = 0, om = 0, sign = 0;
        uint64_t frac = 0;
        struct tm tm = {};
        time_t t;

        if (!s) /* a field left out (a Node without its creationTimestamp) */
                return -EINVAL;
        if (parse_digits(&p, 4, &y) < 0 || expect_char(&p, '-') < 0 ||
            parse_digits(&p, 2, &mo) < 0 || expect_char(&p, '-') < 0 || parse_digits(&p, 2, &d) < 0)
                return -EINVAL;
        if (*p != 'T' && *p != 't' && *p != ' ')
                return -EINVAL;
        p++;
        if (parse_digits(&p, 2, &h) < 0 || expect_char(&p, ':') < 0 ||
            parse_digits(&p, 2, &mi) < 0 || expect_char(&p, ':') < 0 ||
            parse_digits(&p, 2, &sec) < 0)
                return -EINVAL;
        if (*p == '.') {
                int digits = 0;
                p++;
                if (!isdigit((unsigned char) *p))
                        return -EINVAL;
                for (; isdigit((unsigned char) *p); p++, digits++)
                        if (digits < 6)
                                frac = frac * 10 + (uint64_t) (*p - '0');
                for (; digits < 6; digits++)
                        frac *= 10;
        }
        if (*p == 'Z' || *p == 'z')
                p++;
        else if (*p == '+' || *p == '-') {
                sign = *p == '-' ? -1 : 1;
                p++;
                if (parse_digits(&p, 2, &oh) < 0 || expect_char(&p, ':') < 0 ||
                    parse_digits(&p, 2, &om) < 0)
                        return -EINVAL;
        } else
                return -EINVAL;
        if (*p)
                return -EINVAL;
        if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60 || oh > 23 ||
            om > 59 || y < 1970)
                return -EINVAL;

        tm.tm_year = y - 1900;
        tm.tm_mon = mo - 1;
        tm.tm_mday = d;
        tm.tm_hour = h;
        tm.tm_min = mi;
        tm.tm_sec = sec;
        t = timegm(&tm);
        if (t == (time_t) -1)
                return -EINVAL;
        t -= (time_t) sign * (oh * 3600 + om * 60);
        if (t < 0)
                return -EINVAL;
        *ret = (usec_t) t * USEC_PER_SEC + frac;
        return 0;
}

char *format_duration(char buf[static DURATION_MAX], usec_t d) {
        if (d == USEC_INFINITY)
                snprintf(buf, DURATION_MAX, "infinity");
        else if (d < USEC_PER_MSEC)
                snprintf(buf, DURATION_MAX, "%" PRIu64 "us", d);
        else if (d < USEC_PER_SEC)
                snprintf(buf, DURATION_MAX, "%" PRIu64 "ms", d / USEC_PER_MSEC);
        else if (d < 60 * USEC_PER_SEC) {
                uint64_t ms = (d % USEC_PER_SEC) / USEC_PER_MSEC;
                if (ms)
                        snprintf(buf, DURATION_MAX, "%" PRIu64 ".%03" PRIu64 "s", d / USEC_PER_SEC,
                                 ms);
                else
                        snprintf(buf, DURATION_MAX, "%" PRIu64 "s", d / USEC_PER_SEC);
        } else if (d < 3600 * USEC_PER_SEC)
                snprintf(buf, DURATION_MAX, "%" PRIu64 "m%" PRIu64 "s", d / (60 * USEC_PER_SEC),
                         (d / USEC_PER_SEC) % 60);
        else
                snprintf(buf, DURATION_MAX, "%" PRIu64 "h%" PRIu64 "m", d / (3600 * USEC_PER_SEC),
                         (d / (60 * USEC_PER_SEC)) % 60);
        return buf;
}

int parse_duration(const char *s, usec_t *ret) {
        static const struct {
                const char *suffix;
                usec_t mult;
        } units[] = {
                /* longest suffixes first so "ms" is not read as "m" */
                { "us", 1 },
                { "ms", USEC_PER_MSEC },
                { "s", USEC_PER_SEC },
                { "m", 60 * USEC_PER_SEC },
                { "h", 3600 * USEC_PER_SEC },
        };
        const char *p = s;
        usec_t total = 0;
        bool any = false;

        if (!s || !*s)
                return -EINVAL;
        while (*p) {
                uint64_t ip = 0, fp = 0, fdiv = 1;
                usec_t mult = 0;
                bool digits = false;

                for (; isdigit((unsigned char) *p); p++, digits = true) {
                        if (ip > (UINT64_MAX - 9) / 10)
                                return -ERANGE;
                        ip = ip * 10 + (uint64_t) (*p - '0');
                }
                if (*p == '.') {
                        p++;
                        for (; isdigit((unsigned char) *p); p++, digits = true)
                                if (fdiv < 1000000000ULL) {
                                        fp = fp * 10 + (uint64_t) (*p - '0');
                                        fdiv *= 10;
                                }
                }
                if (!digits)
                        return -EINVAL;
                if (!*p && !any)
                        mult = USEC_PER_SEC; /* bare number: seconds */
                else
                        for (size_t i = 0; i < ELEMENTSOF(units); i++)
                                if (startswith(p, units[i].suffix)) {
                                        mult = units[i].mult;
                                        p += strlen(units[i].suffix);
                                        break;
                                }
                if (!mult)
                        return -EINVAL;
                if (ip > (USEC_INFINITY - 1) / mult)
                        return -ERANGE;
                total += ip * mult + fp * mult / fdiv;
                any = true;
        }
        *ret = total;
        return 0;
}
