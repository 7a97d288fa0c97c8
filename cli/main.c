/* SPDX-License-Identifier: MIT */

/* tend: the command-line client of tendd (kubectl's verbs, tend's agent). */

#include <stdio.h>
#include <unistd.h>

#include "cli.h"

cli_globals cli;

static const struct verb {
        const char *name;
        int (*run)(int argc, char **argv);
        const char *help;
} verbs[] = {
        { "apply", cli_apply, "create or update deployments from files: apply -f FILE|DIR|-" },
        { "get", cli_get, "list or show objects: get deployments|replicasets|pods|events [NAME]" },
        { "describe", cli_describe, "show an object in detail: describe deploy/NAME" },
        { "delete", cli_delete, "delete objects: delete deploy/NAME, delete -f FILE" },
        { "scale", cli_scale, "set the replicas: scale deploy/NAME --replicas=N" },
        { "rollout", cli_rollout, "status, history, undo, pause, resume, restart of a deployment" },
        { "logs", cli_logs, "print a pod's output: logs POD [-f] [--previous] [--tail=N]" },
        { "events", cli_events, "list events (get events)" },
        { "cordon", cli_cordon, "mark a node of the fleet unschedulable: cordon NODE" },
        { "uncordon", cli_uncordon, "mark a node schedulable again: uncordon NODE" },
        { "validate", cli_validate, "check manifests offline: validate -f FILE|DIR|-" },
        { "version", cli_version, "print the client and server versions" },
        { "kubeconfig", cli_kubeconfig,
          "print a kubeconfig for kubectl: kubeconfig [--server URL]" },
};

static void usage(FILE *f) {
        fprintf(f, "Usage: tend [--socket PATH] [-n NAMESPACE] COMMAND [ARGS]\n\n"
                   "tend drives tendd, an agent that keeps local processes running as declared\n"
                   "in Kubernetes-style Deployment manifests.\n\n"
                   "Commands:\n");
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                fprintf(f, "  %-10s %s\n", verbs[i].name, verbs[i].help);
        fprintf(f, "\nOptions:\n"
                   "  --socket PATH      tendd's API socket (default: $TEND_SOCKET, else\n"
                   "                     /run/tend/tend.sock as root, "
                   "$XDG_RUNTIME_DIR/tend/tend.sock\n"
                   "                     otherwise)\n"
                   "  -n, --namespace NS the namespace (default: default)\n"
                   "  -h, --help         this help\n"
                   "\nRun 'tend COMMAND --help' for a command's options.\n");
}

int main(int argc, char **argv) {
        _cleanup_free_ char *def = NULL;
        int i = 1;

        log_open("tend");
        cli.namespace = "default";
        cli.tty = isatty(STDOUT_FILENO);
        cli.socket = getenv("TEND_SOCKET");

        /* Global options come before the verb. */
        for (; i < argc && argv[i][0] == '-'; i++) {
                const char *a = argv[i], *v;
                if (streq(a, "--help") || streq(a, "-h")) {
                        usage(stdout);
                        return 0;
                }
                if (streq(a, "--version")) {
                        printf("tend %s\n", TEND_VERSION);
                        return 0;
                }
                if ((v = startswith(a, "--socket="))) {
                        cli.socket = v;
                        continue;
                }
                if ((v = startswith(a, "--namespace="))) {
                        cli.namespace = v;
                        continue;
                }
                if ((streq(a, "--socket") || streq(a, "-n") || streq(a, "--namespace")) &&
                    i + 1 < argc) {
                        if (streq(a, "--socket"))
                                cli.socket = argv[++i];
                        else
                                cli.namespace = argv[++i];
                        continue;
                }
                fprintf(stderr, "tend: unknown option %s\n\n", a);
                usage(stderr);
                return 2;
        }
        if (i >= argc) {
                usage(stderr);
                return 2;
        }
        if (isempty(cli.socket)) {
                def = tend_default_socket();
                cli.socket = def;
        }
        if (streq(argv[i], "help")) {
                usage(stdout);
                return 0;
        }
        for (size_t k = 0; k < ELEMENTSOF(verbs); k++)
                if (streq(argv[i], verbs[k].name))
                        return verbs[k].run(argc - i, argv + i);

        fprintf(stderr, "tend: unknown command \"%s\"\n\n", argv[i]);
        usage(stderr);
        return 2;
}
