/* SPDX-License-Identifier: MIT */

#include <string.h>

#include "fuzz.h"

bool fuzz_utf8_valid(const char *s) {
        const unsigned char *p = (const unsigned char *) s;

        while (*p) {
                uint32_t c;
                size_t len;

                if (*p < 0x80) {
                        p++;
                        continue;
                }
                if (*p >= 0xC2 && *p <= 0xDF) {
                        len = 2;
                        c = *p & 0x1F;
                } else if (*p >= 0xE0 && *p <= 0xEF) {
                        len = 3;
                        c = *p & 0x0F;
                } else if (*p >= 0xF0 && *p <= 0xF4) {
                        len = 4;
                        c = *p & 0x07;
                } else
                        return false; /* a continuation byte, C0/C1, or F5..FF */
                for (size_t i = 1; i < len; i++) {
                        if ((p[i] & 0xC0) != 0x80)
                                return false; /* includes the NUL of a cut sequence */
                        c = (c << 6) | (p[i] & 0x3F);
                }
                if ((len == 3 && c < 0x800) || (len == 4 && c < 0x10000))
                        return false; /* overlong */
                if ((c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF)
                        return false;
                p += len;
        }
        return true;
}

char *fuzz_strndup(const uint8_t *data, size_t size) {
        char *s = malloc(size + 1);

        if (!s)
                abort();
        memcpy(s, data, size);
        s[size] = 0;
        return s;
}
