/* SPDX-License-Identifier: MIT */
#include <stdio.h>

#include "tend/base.h"

void tend_buf_init(tend_buf *b, size_t max) {
        *b = TEND_BUF_INIT(max);
}

void tend_buf_free(tend_buf *b) {
        free(b->data);
        b->data = NULL;
        b->len = b->alloc = 0;
}

void tend_buf_reset(tend_buf *b) {
        b->len = 0;
        if (b->data)
                b->data[0] = 0;
}

/* Make room for n more bytes plus the NUL. Growth doubles, so appends are
 * amortised O(1); the cap is checked before any allocation. */
static int buf_reserve(tend_buf *b, size_t n) {
        size_t need, na;
        char *d;

        if (n > b->max || b->len > b->max - n)
                return -E2BIG;
        need = b->len + n + 1;
        if (need <= b->alloc)
                return 0;
        na = b->alloc ? b->alloc : 64;
        while (na < need)
                na *= 2;
        if (na > b->max + 1)
                na = b->max + 1;
        d = realloc(b->data, na);
        if (!d)
                return -ENOMEM;
        b->data = d;
        b->alloc = na;
        return 0;
}

int tend_buf_add(tend_buf *b, const void *p, size_t n) {
        int r = buf_reserve(b, n);
        if (r < 0)
                return r;
        if (n)
                memcpy(b->data + b->len, p, n);
        b->len += n;
        b->data[b->len] = 0;
        return 0;
}

int tend_buf_adds(tend_buf *b, const char *s) {
        return tend_buf_add(b, s, strlen(s));
}

int tend_buf_vaddf(tend_buf *b, const char *fmt, va_list ap) {
        va_list aq;
        int n, r;

        va_copy(aq, ap);
        n = vsnprintf(NULL, 0, fmt, aq);
        va_end(aq);
        if (n < 0)
                return -EINVAL;
        r = buf_reserve(b, (size_t) n);
        if (r < 0)
                return r;
        vsnprintf(b->data + b->len, (size_t) n + 1, fmt, ap);
        b->len += (size_t) n;
        return 0;
}

int tend_buf_addf(tend_buf *b, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = tend_buf_vaddf(b, fmt, ap);
        va_end(ap);
        return r;
}

char *tend_buf_take(tend_buf *b) {
        char *d;

        if (!b->data) {
                d = strdup("");
                return d;
        }
        d = b->data;
        b->data = NULL;
        b->len = b->alloc = 0;
        return d;
}
