/* SPDX-License-Identifier: MIT */

/* tend delete, tend scale. */

#include <getopt.h>

#include "cli.h"

void *cli_fetch(client *c, const spec_kind *r, const char *name) {
        _cleanup_free_ char *path = cli_path(r, cli.namespace, name);
        json_t *resp = NULL;
        void *obj;
        long code;

        if (!path || client_request(c, "GET", path, NULL, NULL, &code, &resp) < 0)
                return NULL;
        if (code != 200) {
                client_print_error(code, resp);
                json_decref(resp);
                return NULL;
        }
        obj = cli_decode(r->type, resp);
        json_decref(resp);
        return obj;
}

/* DELETE path; then kubectl's words: deployment.apps "web" deleted. */
static int delete_path(client *c, const char *path, const char *what, const char *name) {
        json_t *resp = NULL;
        long code;

        if (!path || client_request(c, "DELETE", path, NULL, NULL, &code, &resp) < 0)
                return -EIO;
        if (code != 200) {
                client_print_error(code, resp);
                json_decref(resp);
                return -EIO;
        }
        json_decref(resp);
        printf("%s \"%s\" deleted\n", what, name);
        return 0;
}

static int delete_one(client *c, const spec_kind *r, const char *ns, const char *name) {
        _cleanup_free_ char *path = cli_path(r, ns, name),
                            *what = isempty(r->group) ? strdup(r->singular)
                                                      : strprintf("%s.%s", r->singular, r->group);

        return what ? delete_path(c, path, what, name) : -ENOMEM;
}

/* A node of the fleet that is gone: its Node goes too. */
static int delete_node(client *c, const char *name) {
        _cleanup_free_ char *esc = client_escape(name),
                            *path = esc ? strprintf("/api/v1/nodes/%s", esc) : NULL;

        return delete_path(c, path, "node", name);
}

int cli_delete(int argc, char **argv) {
        static const struct option options[] = {
                { "filename", required_argument, NULL, 'f' },
                { "namespace", required_argument, NULL, 'n' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        _cleanup_(client_freep) client *c = NULL;
        _cleanup_strv_free_ char **files = NULL;
        int opt, ret = 0;

        optind = 1;
        while ((opt = getopt_long(argc, argv, "f:n:h", options, NULL)) >= 0)
                switch (opt) {
                case 'f':
                        (void) strv_extend(&files, optarg);
                        break;
                case 'n':
                        cli.namespace = optarg;
                        break;
                case 'h':
                        printf("Usage: tend delete deploy/NAME|rs/NAME|pod/NAME|node/NAME ... | "
                               "TYPE "
                               "NAME ... | -f FILE|DIR|-\n\n"
                               "Deleting a deployment deletes its ReplicaSets and pods (each "
                               "process\n"
                               "stopped gracefully). A deleted pod is replaced by its ReplicaSet; "
                               "a\n"
                               "deleted ReplicaSet by its deployment. A node of a fleet can be "
                               "deleted\nonce it is gone (no tendd holds its name).\n");
                        return 0;
                default:
                        return 2;
                }
        if (optind >= argc && !files) {
                fprintf(stderr, "error: what to delete? e.g. tend delete deploy/web, or -f FILE\n");
                return 2;
        }
        c = cli_connect();
        if (!c)
                return 1;
        if (files) {
                spec_manifest m = {};
                spec_errors errs = {};
                for (char **f = files; *f; f++)
                        (void) spec_manifest_add_path(&m, *f, &errs);
                if (errs.n > 0) {
                        spec_errors_print(&errs, stderr);
                        ret = 1;
                } else
                        for (size_t i = 0; i < m.n; i++) {
                                const spec_meta *o = spec_object_meta(m.items[i].object);
                                const char *ns = m.items[i].namespace_defaulted ? cli.namespace
                                                                                : o->namespace;
                                if (delete_one(c, m.items[i].kind, ns, o->name) < 0)
                                        ret = 1;
                        }
                spec_manifest_done(&m);
                spec_errors_done(&errs);
        }
        cli_ref refs[64];
        size_t n_refs;
        if (optind < argc && cli_parse_refs(argv + optind, (size_t) (argc - optind), true, refs,
                                            ELEMENTSOF(refs), &n_refs) < 0)
                return 1;
        for (size_t i = 0; optind < argc && i < n_refs; i++)
                if (refs[i].res ? delete_one(c, refs[i].res, cli.namespace, refs[i].name) < 0
                                : delete_node(c, refs[i].name) < 0)
                        ret = 1;
        return ret;
}

int cli_scale(int argc, char **argv) {
        static const struct option options[] = {
                { "replicas", required_argument, NULL, 'r' },
                { "namespace", required_argument, NULL, 'n' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        _cleanup_(client_freep) client *c = NULL;
        _cleanup_free_ char *path = NULL, *body = NULL, *ref = NULL, *base = NULL;
        const spec_kind *r;
        const char *name;
        int64_t replicas = -1;
        json_t *resp = NULL;
        long code;
        int opt;

        optind = 1;
        while ((opt = getopt_long(argc, argv, "n:h", options, NULL)) >= 0)
                switch (opt) {
                case 'r':
                        if (safe_atoi64(optarg, &replicas) < 0 || replicas < 0 ||
                            replicas > INT32_MAX) {
                                fprintf(stderr, "error: --replicas %s: expected a number >= 0\n",
                                        optarg);
                                return 2;
                        }
                        break;
                case 'n':
                        cli.namespace = optarg;
                        break;
                case 'h':
                        printf("Usage: tend scale deploy/NAME|rs/NAME --replicas=N\n\n"
                               "Scaling a deployment changes its declaration. Scaling one of its\n"
                               "ReplicaSets by hand is allowed, and the deployment puts it back "
                               "on\n"
                               "its next pass (with an event): change the deployment instead.\n");
                        return 0;
                default:
                        return 2;
                }
        cli_ref target;
        size_t n_refs = 0;
        if (optind >= argc || argc - optind > 2 || replicas < 0) {
                fprintf(stderr, "error: expected tend scale deploy/NAME (or deploy NAME) "
                                "--replicas=N\n");
                return 2;
        }
        if (cli_parse_refs(argv + optind, (size_t) (argc - optind), false, &target, 1, &n_refs) < 0)
                return 1;
        r = target.res;
        name = target.name;
        if (r->type != &spec_type_deployment && r->type != &spec_type_replica_set) {
                fprintf(stderr, "error: only deployments and replicasets can be scaled\n");
                return 1;
        }
        c = cli_connect();
        base = cli_path(r, cli.namespace, name);
        path = base ? strprintf("%s/scale", base) : NULL;
        body = strprintf("{\"spec\":{\"replicas\":%lld}}", (long long) replicas);
        if (!c || !path || !body ||
            client_request(c, "PATCH", path, "application/merge-patch+json", body, &code, &resp) <
                    0)
                return 1;
        if (code != 200) {
                client_print_error(code, resp);
                json_decref(resp);
                return 1;
        }
        json_decref(resp);
        ref = cli_object_ref(r, name);
        printf("%s scaled\n", strna(ref));
        return 0;
}

int cli_version(int argc, char **argv) {
        _cleanup_(client_freep) client *c = NULL;
        json_t *resp = NULL;
        long code;

        for (int i = 1; i < argc; i++) {
                if (streq(argv[i], "--help") || streq(argv[i], "-h")) {
                        printf("Usage: tend version [--client]\n\n"
                               "Prints tend's version and, unless --client, tendd's.\n");
                        return 0;
                }
                if (!streq(argv[i], "--client")) {
                        fprintf(stderr, "error: unknown option \"%s\" (tend version --help)\n",
                                argv[i]);
                        return 2;
                }
        }
        printf("Client Version: v%s\n", TEND_VERSION);
        for (int i = 1; i < argc; i++)
                if (streq(argv[i], "--client"))
                        return 0;
        c = cli_connect();
        if (!c || client_request(c, "GET", "/version", NULL, NULL, &code, &resp) < 0)
                return 1;
        printf("Server Version: v%s (Kubernetes API %s.%s)\n",
               strna(json_string_value(json_object_get(resp, "tendVersion"))),
               strna(json_string_value(json_object_get(resp, "major"))),
               strna(json_string_value(json_object_get(resp, "minor"))));
        json_decref(resp);
        return 0;
}

int cli_kubeconfig(int argc, char **argv) {
        _cleanup_(client_freep) client *c = NULL;
        const char *server = NULL;
        json_t *resp = NULL;
        long code;

        for (int i = 1; i < argc; i++) {
                if (streq(argv[i], "--help") || streq(argv[i], "-h")) {
                        printf("Usage: tend kubeconfig [--server URL]\n\n"
                               "Prints a kubeconfig for tendd's HTTPS listener (tendd --listen):\n"
                               "its address, the CA that signed its certificate, and the bearer\n"
                               "token. Asked over the local socket, so only who may use tendd may\n"
                               "have it. For example:\n\n"
                               "  tend kubeconfig > ~/.kube/tend && export "
                               "KUBECONFIG=~/.kube/tend\n"
                               "  kubectl --kubeconfig <(tend kubeconfig) get pods\n\n"
                               "Options:\n"
                               "  --server URL   the address clients reach tendd at, where it is\n"
                               "                 not the one tendd listens on (a tunnel, a "
                               "name)\n");
                        return 0;
                }
                if (streq(argv[i], "--server") && i + 1 < argc)
                        server = argv[++i];
                else if (startswith(argv[i], "--server="))
                        server = argv[i] + strlen("--server=");
                else {
                        fprintf(stderr, "error: unknown option \"%s\" (tend kubeconfig --help)\n",
                                argv[i]);
                        return 2;
                }
        }
        if (server && !startswith(server, "https://")) {
                fprintf(stderr,
                        "error: --server %s: an https:// URL is expected (kubectl sends "
                        "the token only over https)\n",
                        server);
                return 2;
        }
        c = cli_connect();
        if (!c ||
            client_request(c, "GET", "/apis/tend.io/v1/kubeconfig", NULL, NULL, &code, &resp) < 0)
                return 1;
        if (code != 200) {
                client_print_error(code, resp);
                json_decref(resp);
                return 1;
        }
        if (server)
                json_object_set_new(
                        json_object_get(json_array_get(json_object_get(resp, "clusters"), 0),
                                        "cluster"),
                        "server", json_string(server));
        cli_print_yaml(resp);
        json_decref(resp);
        return 0;
}
