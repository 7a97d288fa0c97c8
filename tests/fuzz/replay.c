/* SPDX-License-Identifier: MIT */

/*
 * The main() of a fuzz target outside libFuzzer: runs the target once on
 * every file named on the command line, and on every file under every
 * directory named (recursively, in name order), printing each as it goes.
 * Built with the compiler and sanitizers of the normal build, so that `make
 * test` replays the corpus and every crash ever found, without clang.
 *
 * A finding aborts (the target's fuzz_check(), or a sanitizer) with the
 * file's name the last line printed. Dot files and READMEs are skipped: a
 * directory is kept in git with one of them.
 */

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "fuzz.h"

static size_t n_run;

static int strcmp_p(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

static bool skipped(const char *name) {
        return name[0] == '.' || startswith(name, "README");
}

static int run_file(const char *path) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ uint8_t *data = NULL;
        struct stat st;
        size_t size = 0;

        fd = RET_NERRNO(open(path, O_RDONLY | O_CLOEXEC));
        if (fd < 0 || fstat(fd, &st) < 0) {
                fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
                return -errno;
        }
        /* Exactly the file's size, no slack: ASan sees a read past the end. */
        data = malloc(st.st_size > 0 ? (size_t) st.st_size : 1);
        if (!data)
                return -ENOMEM;
        while (size < (size_t) st.st_size) {
                ssize_t n = read(fd, data + size, (size_t) st.st_size - size);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        fprintf(stderr, "replay: %s: %s\n", path,
                                n < 0 ? strerror(errno) : "file shrank while read");
                        return n < 0 ? -errno : -EIO;
                }
                size += (size_t) n;
        }
        printf("replay: %s (%zu bytes)\n", path, size);
        fflush(stdout); /* the last name printed is the culprit of an abort */
        (void) LLVMFuzzerTestOneInput(data, size);
        n_run++;
        return 0;
}

static int run_path(const char *path) {
        _cleanup_strv_free_ char **names = NULL;
        struct stat st;
        struct dirent *de;
        DIR *d;
        int r = 0;

        if (stat(path, &st) < 0) {
                fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
                return -errno;
        }
        if (!S_ISDIR(st.st_mode))
                return run_file(path);

        d = opendir(path);
        if (!d) {
                fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
                return -errno;
        }
        while ((de = readdir(d)))
                if (!skipped(de->d_name) && strv_extend(&names, de->d_name) < 0) {
                        closedir(d);
                        return -ENOMEM;
                }
        closedir(d);
        if (!names)
                return 0;
        qsort(names, strv_length(names), sizeof(char *), strcmp_p);
        for (char **n = names; *n; n++) {
                _cleanup_free_ char *p = strprintf("%s/%s", path, *n);
                if (!p)
                        return -ENOMEM;
                int k = run_path(p);
                if (k < 0 && r == 0)
                        r = k;
        }
        return r;
}

int main(int argc, char *argv[]) {
        int r = 0;

        if (argc < 2) {
                fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
                return 2;
        }
        for (int i = 1; i < argc; i++) {
                int k = run_path(argv[i]);
                if (k < 0 && r == 0)
                        r = k;
        }
        printf("replay: %zu inputs, no finding%s\n", n_run, r < 0 ? ", but unreadable paths" : "");
        return r < 0 ? 1 : 0;
}
