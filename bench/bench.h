/* SPDX-License-Identifier: MIT */
#pragma once

/* What the benchmarks share: sorting figures and reading our own RSS. */

#include <stdio.h>
#include <stdlib.h>

static inline int bench_cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

/* VmRSS of this process, in kB; -1 if unknown. */
static inline long bench_rss_kb(void) {
        FILE *f = fopen("/proc/self/status", "r");
        char line[256];
        long kb = -1;

        while (f && fgets(line, sizeof line, f))
                if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
                        break;
        if (f)
                fclose(f);
        return kb;
}
