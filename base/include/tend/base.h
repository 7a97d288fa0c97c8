/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * tend_base: the small things every module uses.
 *
 *  - cleanup macros in the systemd manner (_cleanup_free_, TAKE_PTR, ...);
 *  - the -errno convention: a fallible function returns 0 on success and a
 *    negative errno on failure (">0 only where its comment says so");
 *  - logging with levels, <N> priority prefixes when stderr is the journal;
 *  - usec_t time: monotonic for logic, wall clock only for what people read;
 *  - a bounded dynamic buffer (every buffer input can grow has a maximum);
 *  - string and string-vector helpers.
 *
 * Nothing here logs except the log functions themselves, and nothing exits.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- attributes and macros ------------------------------------------------ */

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _pure_ __attribute__((pure))
#define _const_ __attribute__((const))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _sentinel_ __attribute__((sentinel))
#define _warn_unused_result_ __attribute__((warn_unused_result))
#define _noreturn_ __attribute__((noreturn))
#define _likely_(x) (__builtin_expect(!!(x), 1))
#define _unlikely_(x) (__builtin_expect(!!(x), 0))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#undef MIN
#undef MAX
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define CLAMP(x, lo, hi) MIN(MAX((x), (lo)), (hi))

/* Take the value out of a variable and leave a "nothing" behind, so a
 * _cleanup_ handler on the old variable does nothing. */
#define TAKE_GENERIC(var, type, nullvalue)    \
        ({                                    \
                type *_pvar_ = &(var);        \
                type _var_ = *_pvar_;         \
                type _nullvalue_ = nullvalue; \
                *_pvar_ = _nullvalue_;        \
                _var_;                        \
        })
#define TAKE_PTR(ptr) TAKE_GENERIC(ptr, typeof(ptr), NULL)
#define TAKE_FD(fd) TAKE_GENERIC(fd, int, -EBADF)

/* Wrap a libc call that returns -1 and sets errno: returns -errno instead. */
#define RET_NERRNO(expr)                   \
        ({                                 \
                typeof(expr) _r_ = (expr); \
                _r_ < 0 ? -errno : _r_;    \
        })

/* Keeps the first failure of a series of calls: RET_GATHER(r, f()) sets r
 * to f()'s -errno unless r already holds one (as systemd's). For building an
 * object field by field and giving up once, at the end, if any failed. */
#define RET_GATHER(r, expr)              \
        ({                               \
                int _e_ = (expr);        \
                if (_e_ < 0 && (r) >= 0) \
                        (r) = _e_;       \
                _e_;                     \
        })
/* The same for a pointer that must not be NULL (strdup, strprintf). */
#define RET_GATHER_PTR(r, expr) RET_GATHER(r, (expr) ? 0 : -ENOMEM)

/* errno values are positive; make sure we have a negative one even when a
 * broken library left errno at 0. */
static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

int safe_close(int fd);
static inline void closep(int *fd) {
        safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

/* Define a NULL-tolerant "xxx_freep" for use with _cleanup_() from a
 * destructor "xxx_free" that accepts NULL and returns NULL. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func) \
        static inline void func##p(type *p) {   \
                if (*p)                         \
                        *p = func(*p);          \
        }

/* Allocation failure is not a condition we recover from gracefully in the
 * middle of a parse: the helpers below return NULL and callers map it to
 * -ENOMEM. */
#define new0(t, n) ((t *) calloc((n) ?: 1, sizeof(t)))

/* ---- strings -------------------------------------------------------------- */

static inline bool streq(const char *a, const char *b) {
        return strcmp(a, b) == 0;
}
static inline bool streq_ptr(const char *a, const char *b) {
        if (!a || !b)
                return a == b;
        return strcmp(a, b) == 0;
}
static inline bool isempty(const char *s) {
        return !s || !*s;
}
static inline const char *strempty(const char *s) {
        return s ?: "";
}
static inline const char *strna(const char *s) {
        return s ?: "n/a";
}
/* Returns a pointer just past the prefix, or NULL. */
const char *startswith(const char *s, const char *prefix) _pure_;
const char *endswith(const char *s, const char *suffix) _pure_;

/* UTF-8 (RFC 3629: no overlongs, surrogates or code points over U+10FFFF).
 * The length of the character that starts s (at most n bytes), or 0 if no
 * valid character starts there. */
size_t utf8_char_len(const char *s, size_t n) _pure_;
/* s with each byte of an invalid sequence written as "\xNN", so that it is
 * valid UTF-8 whatever it held (new string, NULL on failure). */
char *utf8_escape_invalid(const char *s);
/* Whether all of s is valid UTF-8. */
bool utf8_is_valid(const char *s) _pure_;

/* Base64, RFC 4648's standard alphabet with padding (etcd's JSON gateway).
 * Encode: a new string, NULL on failure. Decode: len characters of s (no
 * whitespace) into *ret (new, NUL-terminated beyond *ret_n bytes); -EINVAL
 * on anything that is not canonical base64, -ENOMEM. */
char *tend_base64_encode(const void *data, size_t n);
int tend_base64_decode(const char *s, size_t len, void **ret, size_t *ret_n);
/* How many bytes of s (length n) to keep so as to cut at most max bytes
 * without splitting a character. */
size_t utf8_cut(const char *s, size_t n, size_t max) _pure_;

/* printf into a new string; NULL on failure. */
char *strprintf(const char *fmt, ...) _printf_(1, 2);
/* Replace *p with a copy of s (NULL allowed). Returns 0 or -ENOMEM. */
int free_and_strdup(char **p, const char *s);

/* NULL-terminated string vectors. */
char **strv_free(char **l);
DEFINE_TRIVIAL_CLEANUP_FUNC(char **, strv_free);
#define _cleanup_strv_free_ _cleanup_(strv_freep)
size_t strv_length(char *const *l) _pure_;
char **strv_copy(char *const *l);
/* Append a copy of s. Returns 0 or -ENOMEM (the vector is unchanged then). */
int strv_extend(char ***l, const char *s);
/* Append s itself (takes ownership on success only). */
int strv_push(char ***l, char *s);

/* Room for `need` elements of `size` bytes in *p, whose room is *alloc
 * elements: grown by doubling (from 16), so that pushing n elements one by
 * one costs O(n). 0, or -ENOMEM with *p unchanged. */
int tend_grow(void **p, size_t *alloc, size_t need, size_t size);
#define TEND_GROW(p, alloc, need) tend_grow((void **) &(p), &(alloc), (need), sizeof *(p))
bool strv_equal(char *const *a, char *const *b) _pure_;
bool strv_contains(char *const *l, const char *s) _pure_;

/* Parse a whole decimal integer (no trailing garbage, no whitespace).
 * Returns 0, -EINVAL or -ERANGE. */
int safe_atoi64(const char *s, int64_t *ret);
int safe_atou64(const char *s, uint64_t *ret);

/* Levenshtein distance, for "did you mean" hints. Bounded by the caller
 * passing short strings; returns SIZE_MAX on allocation failure. */
size_t string_distance(const char *a, const char *b);

/* ---- errors --------------------------------------------------------------- */

/* Like strerror() for a negative (or positive) errno; thread-unsafe buffer
 * not used: returns a static description string. */
const char *errno_name(int err);

/* ---- time ----------------------------------------------------------------- */

typedef uint64_t usec_t;
#define USEC_INFINITY ((usec_t) UINT64_MAX)
#define USEC_PER_SEC ((usec_t) 1000000ULL)
#define USEC_PER_MSEC ((usec_t) 1000ULL)
#define NSEC_PER_USEC ((uint64_t) 1000ULL)

/* Seconds from a manifest (an int64 there, as in Kubernetes) as usec_t:
 * negative is 0, and a value too large to add to a clock saturates at
 * ~34,000 years rather than wrapping to a short time. */
static inline usec_t usec_from_sec(int64_t s) {
        if (s <= 0)
                return 0;
        return (uint64_t) s >= (1ULL << 40) ? (usec_t) (1ULL << 40) * USEC_PER_SEC
                                            : (usec_t) s * USEC_PER_SEC;
}

/* Monotonic time: for every decision (timeouts, back-off, probe periods). */
usec_t now_monotonic(void);
/* Wall clock: only for timestamps shown to people and stored in objects. */
usec_t now_realtime(void);

/* RFC 3339 in UTC, "2026-12-02T15:06:49Z", with ".uuuuuuZ" when the time has
 * a fraction of a second. buf must hold TIMESTAMP_MAX bytes. */
#define TIMESTAMP_MAX 32
char *format_timestamp(char buf[static TIMESTAMP_MAX], usec_t t);
/* Parses what format_timestamp() prints, plus numeric offsets ("+02:00") and
 * any number of fraction digits (truncated to microseconds). Returns 0 or
 * -EINVAL (for NULL too). */
int parse_timestamp(const char *s, usec_t *ret);

/* "1.5s", "250ms", "3m0s": a short human duration. */
#define DURATION_MAX 32
char *format_duration(char buf[static DURATION_MAX], usec_t d);
/* Parses "30s", "1m30s", "500ms", "2h", "1.5s", or a bare number of seconds.
 * Returns 0 or -EINVAL / -ERANGE. */
int parse_duration(const char *s, usec_t *ret);

/* ---- logging -------------------------------------------------------------- */

enum {
        LOG_LEVEL_ERR = 3,
        LOG_LEVEL_WARNING = 4,
        LOG_LEVEL_NOTICE = 5,
        LOG_LEVEL_INFO = 6,
        LOG_LEVEL_DEBUG = 7,
};

/* ident: program name for the plain (non-journal) format. Reads
 * JOURNAL_STREAM to decide whether stderr is the journal (then lines carry
 * "<N>" priority prefixes and no timestamp of our own). */
void log_open(const char *ident);
void log_set_max_level(int level);
int log_get_max_level(void);
/* "err", "warning", "notice", "info", "debug" (or a number 3..7). */
int log_level_from_string(const char *s);

/* Logs and returns error (negative errno, passed through), so that
 * "return log_error_errno(r, ...)" works. %m in fmt prints strerror(-error). */
int log_internal(int level, int error, const char *file, int line, const char *func,
                 const char *fmt, ...) _printf_(6, 7);

#define log_full_errno(level, error, ...)                                                   \
        ({                                                                                  \
                int _l_ = (level), _e_ = (error);                                           \
                (log_get_max_level() >= _l_)                                                \
                        ? log_internal(_l_, _e_, __FILE__, __LINE__, __func__, __VA_ARGS__) \
                        : -abs(_e_);                                                        \
        })
#define log_full(level, ...) (void) log_full_errno(level, 0, __VA_ARGS__)

#define log_debug(...) log_full(LOG_LEVEL_DEBUG, __VA_ARGS__)
#define log_info(...) log_full(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_notice(...) log_full(LOG_LEVEL_NOTICE, __VA_ARGS__)
#define log_warning(...) log_full(LOG_LEVEL_WARNING, __VA_ARGS__)
#define log_error(...) log_full(LOG_LEVEL_ERR, __VA_ARGS__)

#define log_debug_errno(e, ...) log_full_errno(LOG_LEVEL_DEBUG, e, __VA_ARGS__)
#define log_info_errno(e, ...) log_full_errno(LOG_LEVEL_INFO, e, __VA_ARGS__)
#define log_notice_errno(e, ...) log_full_errno(LOG_LEVEL_NOTICE, e, __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_LEVEL_WARNING, e, __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_LEVEL_ERR, e, __VA_ARGS__)
#define log_oom() log_error_errno(-ENOMEM, "Out of memory.")

/* ---- bounded dynamic buffer ----------------------------------------------- */

/* A growable byte buffer with a hard maximum (curl's dynbuf idea): appending
 * beyond max fails with -E2BIG and leaves the buffer as it was. The content
 * is always NUL-terminated (the NUL is not counted in len). */
typedef struct tend_buf {
        char *data;
        size_t len;
        size_t alloc;
        size_t max;
} tend_buf;

#define TEND_BUF_INIT(m) ((tend_buf){ .max = (m) })

void tend_buf_init(tend_buf *b, size_t max);
void tend_buf_free(tend_buf *b);
void tend_buf_reset(tend_buf *b); /* length 0, keeps the allocation */
int tend_buf_add(tend_buf *b, const void *p, size_t n);
int tend_buf_adds(tend_buf *b, const char *s);
int tend_buf_addf(tend_buf *b, const char *fmt, ...) _printf_(2, 3);
int tend_buf_vaddf(tend_buf *b, const char *fmt, va_list ap) _printf_(2, 0);
/* Hands the data over (NUL-terminated, never NULL on success) and resets b.
 * Returns NULL on allocation failure. */
char *tend_buf_take(tend_buf *b);
static inline const char *tend_buf_str(const tend_buf *b) {
        return b->data ?: "";
}
static inline void tend_buf_freep(tend_buf *b) {
        tend_buf_free(b);
}
#define _cleanup_buf_ _cleanup_(tend_buf_freep)

/* ---- files ---------------------------------------------------------------- */

/* Read a whole file (or stdin for "-") up to max bytes. More than max is
 * -EFBIG (nothing returned). Returns 0 and a NUL-terminated buffer. */
int read_full_file(const char *path, size_t max, char **ret, size_t *ret_size);
/* The host's /proc readings: memory (kB) and seconds since boot (0: unknown). */
int host_meminfo(uint64_t *ret_total_kb, uint64_t *ret_available_kb);
double host_uptime(void);
/* Fields first..last (proc(5) numbering, from 4 on) of /proc/PID/stat into
 * ret[0..last-first]. -ESRCH for a pid that is gone or a zombie. */
int proc_stat_fields(pid_t pid, int first, int last, unsigned long long *ret);
/* Clock ticks (/proc's CPU times) in nanoseconds. */
uint64_t clock_ticks_ns(uint64_t ticks);
/* The lowest descriptor number free now, -errno if none is: descriptors
 * are given lowest first, so all below it are open (a hole a closed one
 * left is taken by the next open). How many are open, about. */
int fd_lowest_free(void);

/* ---- string-keyed hash map --------------------------------------------------- */

/* Open addressing with linear probing and backward-shift deletion (no
 * tombstones). Keys are copied; values are borrowed pointers the caller
 * owns. */
typedef struct tend_hashmap tend_hashmap;

tend_hashmap *tend_hashmap_new(void);
tend_hashmap *tend_hashmap_free(tend_hashmap *h);
DEFINE_TRIVIAL_CLEANUP_FUNC(tend_hashmap *, tend_hashmap_free);
size_t tend_hashmap_size(const tend_hashmap *h);
void *tend_hashmap_get(const tend_hashmap *h, const char *key);
/* Inserts or replaces; *ret_old (may be NULL) gets the replaced value.
 * Returns 0 or -ENOMEM. */
int tend_hashmap_put(tend_hashmap *h, const char *key, void *value, void **ret_old);
/* Removes and returns the value, NULL if absent. */
void *tend_hashmap_remove(tend_hashmap *h, const char *key);
/* Iteration: for (size_t i = 0; tend_hashmap_next(h, &i, &k, &v);) — do not
 * modify the map while iterating. */
bool tend_hashmap_next(const tend_hashmap *h, size_t *i, const char **ret_key, void **ret_value);

/* ---- histograms (for /metrics) -------------------------------------------------- */

/* Prometheus-style cumulative buckets, in seconds. */
#define TEND_HISTOGRAM_BUCKETS 12
extern const double tend_histogram_bounds[TEND_HISTOGRAM_BUCKETS];

typedef struct tend_histogram {
        uint64_t buckets[TEND_HISTOGRAM_BUCKETS]; /* count of observations <= bound */
        uint64_t count;
        double sum; /* seconds */
} tend_histogram;

void tend_histogram_observe(tend_histogram *h, usec_t d);

/* ---- default locations (tendd and tend agree on them) --------------------------- */

/* root: /var/lib/tend; others: $XDG_STATE_HOME/tend or ~/.local/state/tend. */
char *tend_default_state_dir(void);
/* root: /run/tend/tend.sock; others: $XDG_RUNTIME_DIR/tend/tend.sock, or
 * /tmp/tend-<uid>/tend.sock without XDG_RUNTIME_DIR. */
char *tend_default_socket(void);
