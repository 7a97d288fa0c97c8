/* SPDX-License-Identifier: MIT */

/* tend validate -f FILE|DIR|- ...: the whole input checked as one apply
 * would check it, printing every error, or one line per valid object. */

#include <getopt.h>
#include <stdio.h>

#include "cli.h"
#include "tend/spec.h"

static void usage(FILE *f) {
        fprintf(f, "Usage: tend validate -f FILE|DIR|- [-f ...]\n\n"
                   "Check Deployment manifests without an agent: YAML or JSON, one or many\n"
                   "documents per file; a directory means its *.yaml, *.yml and *.json files.\n"
                   "Every error is printed (FILE:LINE:COL for syntax, the field path for\n"
                   "the rest); the input is valid only as a whole.\n\n"
                   "Options:\n"
                   "  -f, --filename PATH   file, directory, or - for stdin (repeatable)\n"
                   "  -h, --help            show this help\n\n"
                   "Exit status: 0 all valid, 1 errors found, 2 usage error.\n");
}

int cli_validate(int argc, char **argv) {
        static const struct option options[] = {
                { "filename", required_argument, NULL, 'f' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        _cleanup_strv_free_ char **paths = NULL;
        spec_manifest m = {};
        spec_errors errs = {};
        int c, r;

        optind = 1;
        while ((c = getopt_long(argc, argv, "f:h", options, NULL)) >= 0)
                switch (c) {
                case 'f':
                        if (strv_extend(&paths, optarg) < 0) {
                                log_oom();
                                return 1;
                        }
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return 2;
                }
        if (optind < argc) {
                fprintf(stderr, "tend validate: unexpected argument \"%s\" (use -f PATH)\n",
                        argv[optind]);
                return 2;
        }
        if (!paths) {
                fprintf(stderr, "tend validate: no input: give -f FILE, -f DIR or -f -\n");
                return 2;
        }

        r = 0;
        for (char **p = paths; *p; p++) {
                int k = spec_manifest_add_path(&m, *p, &errs);
                if (k == -ENOMEM) {
                        r = log_oom();
                        goto out;
                }
        }
        if (errs.n == 0)
                r = spec_manifest_check(&m, &errs);
        if (r == -ENOMEM) {
                log_oom();
                goto out;
        }

        if (errs.n > 0 || errs.dropped > 0) {
                spec_errors_print(&errs, stderr);
                r = -EINVAL;
        } else if (m.n == 0) {
                fprintf(stderr, "tend validate: no objects found in the input\n");
                r = -EINVAL;
        } else
                for (size_t i = 0; i < m.n; i++) {
                        const spec_manifest_item *it = &m.items[i];
                        _cleanup_free_ char *label = spec_object_label(
                                it->kind->kind, spec_object_meta(it->object)->name, 0);
                        printf("%s is valid\n", strna(label));
                        if (it->legacy_lease_ports)
                                fprintf(stderr,
                                        "warning: %s:%u: deployment \"%s\": a port without "
                                        "containerPort is not valid Kubernetes: write the pod "
                                        "template's annotation tend.io/lease-ports: %s instead "
                                        "(taken so meanwhile)\n",
                                        it->file, it->line, it->deployment->metadata.name,
                                        it->legacy_lease_ports);
                }
out:
        spec_manifest_done(&m);
        spec_errors_done(&errs);
        return r < 0 ? 1 : 0;
}
