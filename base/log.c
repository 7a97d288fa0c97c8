/* SPDX-License-Identifier: MIT */
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

#include "tend/base.h"

static int max_level = LOG_LEVEL_INFO;
static bool to_journal = false;
static const char *log_ident = "tend";

/* stderr is the journal when JOURNAL_STREAM names the device:inode of our
 * stderr (systemd sets it for StandardError=journal); a mere inherited
 * variable with a redirected stderr does not count. */
static bool stderr_is_journal(void) {
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;

        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
                return false;
        if (fstat(STDERR_FILENO, &st) < 0)
                return false;
        return (unsigned long long) st.st_dev == dev && (unsigned long long) st.st_ino == ino;
}

void log_open(const char *ident) {
        if (ident)
                log_ident = ident;
        to_journal = stderr_is_journal();
}

void log_set_max_level(int level) {
        max_level = level;
}

int log_get_max_level(void) {
        return max_level;
}

int log_level_from_string(const char *s) {
        static const char *const names[] = {
                [LOG_LEVEL_ERR] = "err",       [LOG_LEVEL_WARNING] = "warning",
                [LOG_LEVEL_NOTICE] = "notice", [LOG_LEVEL_INFO] = "info",
                [LOG_LEVEL_DEBUG] = "debug",
        };
        int64_t v;

        if (!s)
                return -EINVAL;
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (names[i] && streq(names[i], s))
                        return (int) i;
        if (streq(s, "error"))
                return LOG_LEVEL_ERR;
        if (streq(s, "warn"))
                return LOG_LEVEL_WARNING;
        if (safe_atoi64(s, &v) == 0 && v >= LOG_LEVEL_ERR && v <= LOG_LEVEL_DEBUG)
                return (int) v;
        return -EINVAL;
}

int log_internal(int level, int error, const char *file, int line, const char *func,
                 const char *fmt, ...) {
        char msg[4096];
        va_list ap;
        int saved = errno;

        /* %m means strerror of the error we were given, not of whatever errno
         * happens to hold. */
        errno = abs(error);
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);

        if (to_journal)
                fprintf(stderr, "<%d>%s\n", level, msg);
        else {
                static const char *const tag[] = { "",          "", "", "error: ",
                                                   "warning: ", "", "", "debug: " };
                if (max_level >= LOG_LEVEL_DEBUG)
                        fprintf(stderr, "%s: %s%s (%s:%d)\n", log_ident, tag[level & 7], msg, file,
                                line);
                else
                        fprintf(stderr, "%s: %s%s\n", log_ident, tag[level & 7], msg);
        }
        (void) func;
        errno = saved;
        return -abs(error);
}
