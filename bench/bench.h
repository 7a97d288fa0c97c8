/* SPDX-License-Identifier: MIT */
#pragma once

/* What the benchmarks share: sorting figures and reading our own RSS. */

#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline int bench_cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

/* VmRSS of process pid (0: this one), in kB; -1 if unknown. */
static inline long bench_rss_kb_of(pid_t pid) {
        char path[64], line[256];
        long kb = -1;
        FILE *f;

        if (pid > 0)
                snprintf(path, sizeof path, "/proc/%d/status", (int) pid);
        else
                snprintf(path, sizeof path, "/proc/self/status");
        f = fopen(path, "r");

        while (f && fgets(line, sizeof line, f))
                if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
                        break;
        if (f)
                fclose(f);
        return kb;
}

static inline long bench_rss_kb(void) {
        return bench_rss_kb_of(0);
}

/* CLOCK_MONOTONIC in ns. */
static inline uint64_t bench_now_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

/* <build>/bin of the build this benchmark (<build>/bench/NAME) belongs to:
 * the tendd, tend and example server it runs. 0, or -1 if unknown. */
static inline int bench_find_bindir(char *buf, size_t size) {
        char exe[PATH_MAX - 16];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);

        if (n <= 0)
                return -1;
        exe[n] = 0;
        for (int up = 0; up < 2; up++) { /* <build>/bench, then <build> */
                char *slash = strrchr(exe, '/');
                if (!slash)
                        return -1;
                *slash = 0;
        }
        snprintf(buf, size, "%s/bin", exe);
        return 0;
}

/* Starts BINDIR/tendd on DIR/state and the API socket sock, its output
 * appended to DIR/tendd.log: its pid (-1: fork failed). It does not wait
 * for the API: the caller polls it with its own client. */
/* tendd on DIR/state and SOCK; extra: one more option ("--cgroups=off"),
 * or NULL. */
static inline pid_t bench_spawn_tendd(const char *bindir, const char *dir, const char *sock,
                                      const char *extra) {
        char state[PATH_MAX + 16], log[PATH_MAX + 16], exe[PATH_MAX + 16];
        pid_t pid;

        snprintf(state, sizeof state, "%s/state", dir);
        snprintf(log, sizeof log, "%s/tendd.log", dir);
        snprintf(exe, sizeof exe, "%s/tendd", bindir);
        pid = fork();
        if (pid == 0) {
                int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                dup2(fd, 1);
                dup2(fd, 2);
                execl(exe, exe, "--state-dir", state, "--socket", sock, "--log-level", "warning",
                      extra, (char *) NULL);
                _exit(127);
        }
        return pid;
}
