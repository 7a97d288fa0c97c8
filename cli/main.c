/* SPDX-License-Identifier: MIT */

/* tend: the command-line client. For now it validates manifests offline;
 * the verbs that talk to tendd arrive with the agent's API. */

#include <stdio.h>

#include "cli.h"
#include "tend/base.h"

static const struct verb {
        const char *name;
        int (*run)(int argc, char **argv);
        const char *help;
} verbs[] = {
        { "validate", cli_validate, "check manifests offline: tend validate -f FILE|DIR|-" },
};

static void usage(FILE *f) {
        fprintf(f, "Usage: tend COMMAND [OPTIONS]\n\n"
                   "tend drives tendd, an agent that keeps local processes running as declared\n"
                   "in Kubernetes-style Deployment manifests.\n\n"
                   "Commands:\n");
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                fprintf(f, "  %-10s %s\n", verbs[i].name, verbs[i].help);
        fprintf(f, "  %-10s %s\n", "version", "print the version");
        fprintf(f, "\nRun 'tend COMMAND --help' for a command's options.\n");
}

int main(int argc, char **argv) {
        log_open("tend");

        if (argc < 2) {
                usage(stderr);
                return 2;
        }
        if (streq(argv[1], "--help") || streq(argv[1], "-h") || streq(argv[1], "help")) {
                usage(stdout);
                return 0;
        }
        if (streq(argv[1], "version") || streq(argv[1], "--version")) {
                printf("tend %s\n", TEND_VERSION);
                return 0;
        }
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                if (streq(argv[1], verbs[i].name))
                        return verbs[i].run(argc - 1, argv + 1);

        fprintf(stderr, "tend: unknown command \"%s\"\n\n", argv[1]);
        usage(stderr);
        return 2;
}
