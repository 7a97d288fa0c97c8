/* SPDX-License-Identifier: MIT */

/*
 * Base64 (RFC 4648 §4, the standard alphabet, with padding): etcd's JSON
 * gateway carries every key and value this way (fleet mode). None of
 * tend's libraries exports an encoder that fits (GnuTLS's works on its own
 * datum type, for PEM); this is the whole of it.
 */

#include "tend/base.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *tend_base64_encode(const void *data, size_t n) {
        const unsigned char *p = data;
        char *out, *o;

        if (n > (SIZE_MAX - 1) / 4 * 3)
                return NULL;
        out = o = malloc((n + 2) / 3 * 4 + 1);
        if (!out)
                return NULL;
        for (size_t i = 0; i < n; i += 3) {
                uint32_t v = (uint32_t) p[i] << 16;
                if (i + 1 < n)
                        v |= (uint32_t) p[i + 1] << 8;
                if (i + 2 < n)
                        v |= p[i + 2];
                *o++ = alphabet[v >> 18 & 63];
                *o++ = alphabet[v >> 12 & 63];
                *o++ = i + 1 < n ? alphabet[v >> 6 & 63] : '=';
                *o++ = i + 2 < n ? alphabet[v & 63] : '=';
        }
        *o = 0;
        return out;
}

static int value_of(char c) {
        const char *p = c ? strchr(alphabet, c) : NULL;
        return p ? (int) (p - alphabet) : -1;
}

int tend_base64_decode(const char *s, size_t len, void **ret, size_t *ret_n) {
        unsigned char *out;
        size_t n = 0;

        /* whole quads only, '=' only as the last one or two characters */
        if (len % 4 != 0)
                return -EINVAL;
        out = malloc(len / 4 * 3 + 1);
        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < len; i += 4) {
                int v[4];
                bool last = i + 4 == len;
                for (int k = 0; k < 4; k++)
                        v[k] = value_of(s[i + k]);
                if (v[0] < 0 || v[1] < 0 ||
                    (v[2] < 0 && !(last && s[i + 2] == '=' && s[i + 3] == '=')) ||
                    (v[3] < 0 && !(last && s[i + 3] == '='))) {
                        free(out);
                        return -EINVAL;
                }
                out[n++] = (unsigned char) (v[0] << 2 | v[1] >> 4);
                if (v[2] >= 0)
                        out[n++] = (unsigned char) ((v[1] & 15) << 4 | v[2] >> 2);
                if (v[3] >= 0)
                        out[n++] = (unsigned char) ((v[2] & 3) << 6 | v[3]);
        }
        out[n] = 0; /* a NUL after the data, for text */
        *ret = out;
        *ret_n = n;
        return 0;
}
