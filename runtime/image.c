/* SPDX-License-Identifier: MIT */

/*
 * What a pod runs, for its container status: the program (its "image") and
 * a digest of the file (its "imageID", sha256:<hex> as a registry's), so
 * that a binary replaced in place shows as a new one.
 *
 * The digest is read on the loop, once per file version: it is kept by
 * (device, inode, size, mtime), so a thousand replicas of one program, or
 * a respawn, cost a stat and a lookup. Only the first start of a new
 * binary reads it (a 50 MB binary: about 0.1 s).
 */

#include <fcntl.h>
#include <gnutls/crypto.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt-internal.h"

#define IMAGE_CACHE_MAX 256

static char *hex(const unsigned char *d, size_t n) {
        char *s = malloc(n * 2 + 1);

        for (size_t i = 0; s && i < n; i++)
                snprintf(s + i * 2, 3, "%02x", d[i]);
        return s;
}

/* sha256:<hex> of what fd reads. */
static int digest_fd(int fd, char **ret) {
        gnutls_hash_hd_t h;
        unsigned char out[32];
        _cleanup_free_ char *text = NULL, *buf = malloc(1 << 16);
        ssize_t k;

        if (!buf)
                return -ENOMEM;
        if (gnutls_hash_init(&h, GNUTLS_DIG_SHA256) < 0)
                return -EIO;
        while ((k = read(fd, buf, 1 << 16)) != 0) {
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        gnutls_hash_deinit(h, NULL);
                        return -errno;
                }
                (void) gnutls_hash(h, buf, (size_t) k);
        }
        gnutls_hash_deinit(h, out);
        text = hex(out, sizeof out);
        if (!text)
                return -ENOMEM;
        *ret = strprintf("sha256:%s", text);
        return *ret ? 0 : -ENOMEM;
}

static void version_key(const struct stat *st, char key[static 128]) {
        snprintf(key, 128, "%" PRIu64 ":%" PRIu64 ":%" PRIu64 ":%" PRIi64 ".%09ld",
                 (uint64_t) st->st_dev, (uint64_t) st->st_ino, (uint64_t) st->st_size,
                 (int64_t) st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
}

int rt__image_id(rt_manager *m, const char *path, char **ret) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        char key[128];
        const char *have;
        char *id = NULL;
        int r;

        /* known: one stat (a respawn's whole cost) */
        if (stat(path, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        version_key(&st, key);
        if (!m->images && !(m->images = tend_hashmap_new()))
                return -ENOMEM;
        have = tend_hashmap_get(m->images, key);
        if (have) {
                *ret = strdup(have);
                return *ret ? 0 : -ENOMEM;
        }
        /* new: read it, as the version it is when opened */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        version_key(&st, key);
        r = digest_fd(fd, &id);
        if (r < 0)
                return r;
        /* bounded: past the limit it starts over (files of old versions) */
        if (tend_hashmap_size(m->images) >= IMAGE_CACHE_MAX)
                rt__images_free(m);
        if ((m->images || (m->images = tend_hashmap_new())) && (*ret = strdup(id)) &&
            tend_hashmap_put(m->images, key, id, NULL) >= 0)
                return 0;
        free(id);
        return *ret ? 0 : -ENOMEM;
}

void rt__images_free(rt_manager *m) {
        const char *k;
        void *v;

        if (!m->images)
                return;
        for (size_t i = 0; tend_hashmap_next(m->images, &i, &k, &v);)
                free(v);
        m->images = tend_hashmap_free(m->images);
}
