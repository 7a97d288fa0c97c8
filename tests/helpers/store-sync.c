/* SPDX-License-Identifier: MIT */

/* tend-store-sync DB N: N writes acknowledged with a durable commit each,
 * then exit without closing (no checkpoint). Run under strace by
 * tests/store-durable.sh: each durable commit must reach the disk. */

#include <stdio.h>
#include <unistd.h>

#include "tend/store.h"

int main(int argc, char **argv) {
        store *s;
        char *err = NULL;
        int n = argc > 2 ? atoi(argv[2]) : 3;

        if (argc < 2 || store_open(argv[1], &s, &err) < 0) {
                fprintf(stderr, "store-sync: %s\n", err ? err : "usage: tend-store-sync DB N");
                return 1;
        }
        for (int i = 0; i < n; i++) {
                spec_pod *p = spec_pod_new();
                p->metadata.name = strprintf("p%d", i);
                p->metadata.namespace = strdup("default");
                if (store_put(s, STORE_POD, p, NULL) < 0 || store_commit(s, true) < 0)
                        return 1;
        }
        fflush(stdout);
        _exit(0);
}
