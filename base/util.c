/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>

#include "tend/base.h"

int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                /* close() is never retried on EINTR on Linux: the fd is gone. */
                (void) close(fd);
                errno = saved;
        }
        return -EBADF;
}

const char *startswith(const char *s, const char *prefix) {
        size_t n = strlen(prefix);
        return strncmp(s, prefix, n) == 0 ? s + n : NULL;
}

const char *endswith(const char *s, const char *suffix) {
        size_t sl = strlen(s), xl = strlen(suffix);
        if (xl > sl)
                return NULL;
        return memcmp(s + sl - xl, suffix, xl) == 0 ? s + sl - xl : NULL;
}

char *strprintf(const char *fmt, ...) {
        va_list ap;
        char *s;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&s, fmt, ap);
        va_end(ap);
        return r < 0 ? NULL : s;
}

int free_and_strdup(char **p, const char *s) {
        char *c = NULL;

        if (s) {
                c = strdup(s);
                if (!c)
                        return -ENOMEM;
        }
        free(*p);
        *p = c;
        return 0;
}

char **strv_free(char **l) {
        if (!l)
                return NULL;
        for (char **i = l; *i; i++)
                free(*i);
        free(l);
        return NULL;
}

size_t strv_length(char *const *l) {
        size_t n = 0;
        if (l)
                while (l[n])
                        n++;
        return n;
}

char **strv_copy(char *const *l) {
        size_t n = strv_length(l);
        _cleanup_strv_free_ char **c = new0(char *, n + 1);
        if (!c)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                c[i] = strdup(l[i]);
                if (!c[i])
                        return NULL;
        }
        return TAKE_PTR(c);
}

int tend_grow(void **p, size_t *alloc, size_t need, size_t size) {
        size_t na = *alloc ?: 16;
        void *n;

        if (need <= *alloc)
                return 0;
        while (na < need) {
                if (na > SIZE_MAX / 2)
                        return -ENOMEM;
                na *= 2;
        }
        if (na > SIZE_MAX / size)
                return -ENOMEM;
        n = realloc(*p, na * size);
        if (!n)
                return -ENOMEM;
        *p = n;
        *alloc = na;
        return 0;
}

size_t utf8_char_len(const char *s, size_t n) {
        const unsigned char *c = (const unsigned char *) s;
        size_t len;
        uint32_t cp;

        if (n == 0)
                return 0;
        if (c[0] < 0x80)
                return 1;
        if (c[0] >= 0xC2 && c[0] <= 0xDF) {
                len = 2;
                cp = c[0] & 0x1Fu;
        } else if ((c[0] & 0xF0) == 0xE0) {
                len = 3;
                cp = c[0] & 0x0Fu;
        } else if (c[0] >= 0xF0 && c[0] <= 0xF4) {
                len = 4;
                cp = c[0] & 0x07u;
        } else
                return 0;
        if (n < len)
                return 0;
        for (size_t k = 1; k < len; k++) {
                if ((c[k] & 0xC0) != 0x80)
                        return 0;
                cp = (cp << 6) | (c[k] & 0x3Fu);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
                return 0;
        return len;
}

bool utf8_is_valid(const char *s) {
        size_t n = strlen(s);

        for (size_t i = 0, l; i < n; i += l)
                if (!(l = utf8_char_len(s + i, n - i)))
                        return false;
        return true;
}

char *utf8_escape_invalid(const char *s) {
        size_t n = strlen(s), bad = 0, o = 0;
        char *out;

        for (size_t i = 0; i < n;) {
                size_t len = utf8_char_len(s + i, n - i);
                bad += len == 0;
                i += len ?: 1;
        }
        out = malloc(n + bad * 3 + 1);
        if (!out)
                return NULL;
        for (size_t i = 0; i < n;) {
                size_t len = utf8_char_len(s + i, n - i);
                if (len == 0) {
                        snprintf(out + o, 5, "\\x%02x", (unsigned char) s[i]);
                        o += 4;
                        i++;
                } else {
                        memcpy(out + o, s + i, len);
                        o += len;
                        i += len;
                }
        }
        out[o] = 0;
        return out;
}

size_t utf8_cut(const char *s, size_t n, size_t max) {
        const unsigned char *c = (const unsigned char *) s;

        if (n <= max)
                return n;
        /* back off the continuation bytes of a character split at max */
        while (max > 0 && (c[max] & 0xC0) == 0x80)
                max--;
        return max;
}

int strv_push(char ***l, char *s) {
        size_t n = strv_length(*l);
        char **c = realloc(*l, sizeof(char *) * (n + 2));
        if (!c)
                return -ENOMEM;
        c[n] = s;
        c[n + 1] = NULL;
        *l = c;
        return 0;
}

int strv_extend(char ***l, const char *s) {
        char *c = strdup(s);
        if (!c)
                return -ENOMEM;
        int r = strv_push(l, c);
        if (r < 0)
                free(c);
        return r;
}

bool strv_equal(char *const *a, char *const *b) {
        size_t na = strv_length(a), nb = strv_length(b);
        if (na != nb)
                return false;
        for (size_t i = 0; i < na; i++)
                if (!streq(a[i], b[i]))
                        return false;
        return true;
}

bool strv_contains(char *const *l, const char *s) {
        if (l)
                for (char *const *i = l; *i; i++)
                        if (streq(*i, s))
                                return true;
        return false;
}

int safe_atou64(const char *s, uint64_t *ret) {
        char *end;
        unsigned long long v;

        if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
                return -EINVAL;
        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno == ERANGE)
                return -ERANGE;
        if (*end)
                return -EINVAL;
        *ret = v;
        return 0;
}

int safe_atoi64(const char *s, int64_t *ret) {
        char *end;
        long long v;

        if (!s || !*s || *s == ' ' || *s == '+')
                return -EINVAL;
        errno = 0;
        v = strtoll(s, &end, 10);
        if (errno == ERANGE)
                return -ERANGE;
        if (*end || end == s)
                return -EINVAL;
        *ret = v;
        return 0;
}

size_t string_distance(const char *a, const char *b) {
        size_t la = strlen(a), lb = strlen(b);
        _cleanup_free_ size_t *row = new0(size_t, lb + 1);
        if (!row)
                return SIZE_MAX;
        for (size_t j = 0; j <= lb; j++)
                row[j] = j;
        for (size_t i = 1; i <= la; i++) {
                size_t diag = row[0];
                row[0] = i;
                for (size_t j = 1; j <= lb; j++) {
                        size_t up = row[j];
                        size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
                        row[j] = MIN(MIN(row[j] + 1, row[j - 1] + 1), diag + cost);
                        diag = up;
                }
        }
        return row[lb];
}

const char *errno_name(int err) {
        return strerror(abs(err));
}

int read_full_file(const char *path, size_t max, char **ret, size_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(max);
        int r;

        if (streq(path, "-"))
                fd = RET_NERRNO(fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3));
        else
                fd = RET_NERRNO(open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY));
        if (fd < 0)
                return fd;

        for (;;) {
                char chunk[65536];
                ssize_t n = read(fd, chunk, sizeof chunk);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        break;
                r = tend_buf_add(&b, chunk, (size_t) n);
                if (r == -E2BIG)
                        return -EFBIG;
                if (r < 0)
                        return r;
        }

        if (ret_size)
                *ret_size = b.len;
        *ret = tend_buf_take(&b);
        return *ret ? 0 : -ENOMEM;
}

uint64_t clock_ticks_ns(uint64_t ticks) {
        long hz = sysconf(_SC_CLK_TCK);

        return ticks * (1000000000ULL / (uint64_t) (hz > 0 ? hz : 100));
}

int fd_lowest_free(void) {
        int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 0);

        if (fd < 0)
                return -errno;
        safe_close(fd);
        return fd;
}

int proc_stat_fields(pid_t pid, int first, int last, unsigned long long *ret) {
        char path[64], buf[1024];
        _cleanup_close_ int fd = -EBADF;
        const char *p;
        ssize_t n;

        assert(first >= 4 && first <= last);
        snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
        fd = RET_NERRNO(open(path, O_RDONLY | O_CLOEXEC));
        if (fd < 0)
                return fd == -ENOENT ? -ESRCH : fd;
        n = read(fd, buf, sizeof buf - 1);
        if (n < 0)
                return errno == ESRCH ? -ESRCH : -errno;
        buf[n] = 0;
        /* after the command name, which may hold spaces and parentheses */
        p = strrchr(buf, ')');
        if (!p)
                return -EIO;
        p++;
        /* A zombie has exited: its pid is only waiting to be reaped. */
        if (p[0] == ' ' && (p[1] == 'Z' || p[1] == 'X'))
                return -ESRCH;
        for (int field = 3; field <= last; field++) {
                char *end;
                while (*p == ' ')
                        p++;
                if (!*p)
                        return -EIO;
                if (field >= first) {
                        /* signed fields (priority, nice) wrap; none is asked for as a number */
                        ret[field - first] = strtoull(p, &end, 10);
                        if (end == p)
                                return -EIO;
                }
                while (*p && *p != ' ')
                        p++;
        }
        return 0;
}

const double tend_histogram_bounds[TEND_HISTOGRAM_BUCKETS] = {
        0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0,
};

void tend_histogram_observe(tend_histogram *h, usec_t d) {
        double s = (double) d / (double) USEC_PER_SEC;
        for (size_t i = 0; i < TEND_HISTOGRAM_BUCKETS; i++)
                if (s <= tend_histogram_bounds[i])
                        h->buckets[i]++;
        h->count++;
        h->sum += s;
}

char *tend_default_state_dir(void) {
        const char *x = getenv("XDG_STATE_HOME"), *home = getenv("HOME");

        if (geteuid() == 0)
                return strdup("/var/lib/tend");
        if (!isempty(x))
                return strprintf("%s/tend", x);
        if (!isempty(home))
                return strprintf("%s/.local/state/tend", home);
        return strprintf("/tmp/tend-state-%u", (unsigned) geteuid());
}

char *tend_default_socket(void) {
        const char *x = getenv("XDG_RUNTIME_DIR");

        if (geteuid() == 0)
                return strdup("/run/tend/tend.sock");
        if (!isempty(x))
                return strprintf("%s/tend/tend.sock", x);
        return strprintf("/tmp/tend-%u/tend.sock", (unsigned) geteuid());
}

int host_meminfo(uint64_t *ret_total_kb, uint64_t *ret_available_kb) {
        _cleanup_free_ char *data = NULL;
        unsigned long long total = 0, avail = 0;
        const char *line;
        size_t n;
        int r = read_full_file("/proc/meminfo", 1 << 20, &data, &n);

        if (r < 0)
                return r;
        if ((line = strstr(data, "MemTotal:")))
                (void) sscanf(line, "MemTotal: %llu", &total);
        if ((line = strstr(data, "MemAvailable:")))
                (void) sscanf(line, "MemAvailable: %llu", &avail);
        *ret_total_kb = total;
        *ret_available_kb = avail;
        return 0;
}

double host_uptime(void) {
        _cleanup_free_ char *data = NULL;
        double up = 0;
        size_t n;

        if (read_full_file("/proc/uptime", 256, &data, &n) >= 0)
                (void) sscanf(data, "%lf", &up);
        return up;
}
