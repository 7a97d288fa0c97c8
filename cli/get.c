/* SPDX-License-Identifier: MIT */

/* tend get TYPE [NAME] [-l SELECTOR] [-o wide|json|yaml|name] [-w] [-A] */

#include <assert.h>
#include <getopt.h>
#include <inttypes.h>

#include "cli.h"

typedef enum output {
        OUT_TABLE,
        OUT_WIDE,
        OUT_JSON,
        OUT_YAML,
        OUT_NAME,
} output;

typedef struct get_ctx {
        const cli_resource *res;
        output out;
        bool all_namespaces;
        table t;
        char **ns; /* -A: each row's namespace */
        size_t n_ns;
        tend_hashmap *revisions; /* pods -o wide: "ns/rs" → revision (owned) */
        bool header_printed;
        bool show_managed_fields;
} get_ctx;

/* As kubectl: metadata.managedFields is left out of -o json|yaml unless
 * asked for (--show-managed-fields); j is an object or a List. */
static void hide_managed_fields(const get_ctx *g, json_t *j) {
        json_t *items = json_object_get(j, "items"), *item;
        size_t i;

        if (g->show_managed_fields)
                return;
        json_object_del(json_object_get(j, "metadata"), "managedFields");
        json_array_foreach (items, i, item)
                json_object_del(json_object_get(item, "metadata"), "managedFields");
}

static void header(get_ctx *g) {
        const spec_column *c;
        size_t n = spec_table_columns(g->res->type, &c);

        table_init_columns(&g->t, c, n, g->out == OUT_WIDE);
}

static const char *revision_of(const char *ns, const char *rs, void *userdata) {
        get_ctx *g = userdata;
        _cleanup_free_ char *key = strprintf("%s/%s", ns, rs);

        return key && g->revisions ? tend_hashmap_get(g->revisions, key) : NULL;
}

/* One row for an object (a decoded struct of the resource's type). */
static void row(get_ctx *g, const void *obj) {
        const spec_column *c;
        size_t n = spec_table_columns(g->res->type, &c);
        char *cells[16] = {};
        spec_table_ctx ctx = {
                .now = now_realtime(), .human = cli.tty, .revision_of = revision_of, .userdata = g
        };

        assert(n <= ELEMENTSOF(cells));
        (void) spec_table_row(g->res->type, obj, &ctx, cells);
        table_row_cells(&g->t, cells, c, n, g->out == OUT_WIDE);
}

static const char *name_of(json_t *j) {
        return json_string_value(json_object_get(json_object_get(j, "metadata"), "name"));
}

static int print_one(get_ctx *g, json_t *j) {
        void *obj;

        if (g->out == OUT_JSON || g->out == OUT_YAML)
                hide_managed_fields(g, j);
        switch (g->out) {
        case OUT_JSON:
                cli_print_json(j);
                return 0;
        case OUT_YAML:
                if (g->header_printed)
                        printf("---\n");
                g->header_printed = true;
                cli_print_yaml(j);
                return 0;
        case OUT_NAME: {
                _cleanup_free_ char *ref = cli_object_ref(g->res, strna(name_of(j)));
                printf("%s\n", strna(ref));
                return 0;
        }
        default:
                obj = cli_decode(g->res->type, j);
                if (!obj)
                        return -EINVAL;
                if (g->all_namespaces) {
                        const char *ns = json_string_value(
                                json_object_get(json_object_get(j, "metadata"), "namespace"));
                        char **n = reallocarray(g->ns, g->n_ns + 1, sizeof(char *));
                        if (!n) {
                                spec_free(g->res->type, obj);
                                return -ENOMEM;
                        }
                        g->ns = n;
                        g->ns[g->n_ns++] = strdup(ns ?: "");
                }
                row(g, obj);
                spec_free(g->res->type, obj);
                return 0;
        }
}

static void drop_ns(get_ctx *g) {
        for (size_t i = 0; i < g->n_ns; i++)
                free(g->ns[i]);
        g->n_ns = 0;
}

static int flush_table(get_ctx *g) {
        if (g->out == OUT_TABLE || g->out == OUT_WIDE) {
                if (g->all_namespaces && g->n_ns + 1 == g->t.rows)
                        table_print_lead(&g->t, stdout, !g->header_printed, "NAMESPACE", g->ns);
                else
                        table_print(&g->t, stdout, !g->header_printed);
                drop_ns(g);
                g->header_printed = true;
                /* keep the header for widths, drop printed rows */
                for (size_t i = g->t.cols; i < g->t.rows * g->t.cols; i++)
                        free(g->t.cells[i]);
                g->t.rows = 1;
        }
        fflush(stdout);
        return 0;
}

static int on_watch_line(const char *line, size_t n, void *userdata) {
        get_ctx *g = userdata;
        json_error_t je;
        json_t *ev, *obj;
        const char *type;

        if (n == 0)
                return 0; /* heartbeat */
        ev = json_loadb(line, n, 0, &je);
        if (!ev)
                return 0;
        type = json_string_value(json_object_get(ev, "type"));
        obj = json_object_get(ev, "object");
        if (streq_ptr(type, "ERROR")) {
                fprintf(stderr, "error: %s\n",
                        strna(json_string_value(json_object_get(obj, "message"))));
                json_decref(ev);
                return -EIO;
        }
        /* The objects, as the list before them (kubectl -w -o json). */
        (void) print_one(g, obj);
        json_decref(ev);
        flush_table(g);
        return 0;
}

/* The revision of each ReplicaSet, for the REVISION column of pods. */
static tend_hashmap *load_revisions(client *c, bool all_namespaces) {
        _cleanup_free_ char *path = cli_path(cli_resource_find("replicasets"),
                                             all_namespaces ? NULL : cli.namespace, NULL);
        tend_hashmap *h = tend_hashmap_new();
        json_t *resp = NULL, *item;
        long code = 0;
        size_t i;

        if (!h || !path || client_request(c, "GET", path, NULL, NULL, &code, &resp) < 0 ||
            code != 200) {
                json_decref(resp);
                return h;
        }
        json_array_foreach (json_object_get(resp, "items"), i, item) {
                json_t *m = json_object_get(item, "metadata");
                const char *rev = json_string_value(
                        json_object_get(json_object_get(m, "annotations"), SPEC_ANN_REVISION));
                _cleanup_free_ char *key = strprintf(
                        "%s/%s", strna(json_string_value(json_object_get(m, "namespace"))),
                        strna(json_string_value(json_object_get(m, "name"))));
                char *v = rev ? strdup(rev) : NULL;
                if (!key || !v || tend_hashmap_put(h, key, v, NULL) < 0)
                        free(v);
        }
        json_decref(resp);
        return h;
}

static void free_revisions(tend_hashmap *h) {
        const char *k;
        void *v;

        for (size_t i = 0; h && tend_hashmap_next(h, &i, &k, &v);)
                free(v);
        tend_hashmap_free(h);
}

int cli_get(int argc, char **argv) {
        static const struct option options[] = {
                { "selector", required_argument, NULL, 'l' },
                { "output", required_argument, NULL, 'o' },
                { "watch", no_argument, NULL, 'w' },
                { "all-namespaces", no_argument, NULL, 'A' },
                { "namespace", required_argument, NULL, 'n' },
                { "show-managed-fields", no_argument, NULL, 'M' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        _cleanup_(client_freep) client *c = NULL;
        _cleanup_free_ char *path = NULL, *query = NULL, *esc = NULL, *wpath = NULL;
        _cleanup_buf_ tend_buf q = TEND_BUF_INIT(4096);
        const char *selector = NULL, *name = NULL, *names[64];
        size_t n_names = 0;
        get_ctx g = {};
        bool watch = false;
        json_t *resp = NULL, *item;
        long code = 0;
        int opt, ret = 1;
        size_t i;

        optind = 1;
        while ((opt = getopt_long(argc, argv, "l:o:wAn:h", options, NULL)) >= 0)
                switch (opt) {
                case 'l':
                        selector = optarg;
                        break;
                case 'o':
                        if (streq(optarg, "wide"))
                                g.out = OUT_WIDE;
                        else if (streq(optarg, "json"))
                                g.out = OUT_JSON;
                        else if (streq(optarg, "yaml"))
                                g.out = OUT_YAML;
                        else if (streq(optarg, "name"))
                                g.out = OUT_NAME;
                        else {
                                fprintf(stderr, "error: -o %s: expected wide, json, yaml or name\n",
                                        optarg);
                                return 2;
                        }
                        break;
                case 'w':
                        watch = true;
                        break;
                case 'M':
                        g.show_managed_fields = true;
                        break;
                case 'A':
                        g.all_namespaces = true;
                        break;
                case 'n':
                        cli.namespace = optarg;
                        break;
                case 'h':
                        printf("Usage: tend get TYPE [NAME] [-l SELECTOR] [-o wide|json|yaml|name] "
                               "[-w] [-A] [--show-managed-fields]\n\n"
                               "TYPE: deployments (deploy), replicasets (rs), pods (po), events "
                               "(ev), nodes (no).\n\n"
                               "  -l, --selector SEL     only objects whose labels match "
                               "(a=b,c!=d,e in (x,y))\n"
                               "  -o, --output FORMAT    wide, json, yaml or name\n"
                               "  -w, --watch            after the list, print changes as they "
                               "happen\n"
                               "  -A, --all-namespaces   every namespace\n"
                               "  -n, --namespace NS     the namespace (default: default)\n"
                               "      --show-managed-fields  keep metadata.managedFields (who "
                               "set which fields) in -o json|yaml\n");
                        return 0;
                default:
                        return 2;
                }
        if (optind >= argc) {
                fprintf(stderr, "error: what to get? tend get deployments|replicasets|pods|events "
                                "[NAME]\n");
                return 2;
        }
        if (cli_is_nodes(argv[optind])) {
                static const char *const outs[] = { [OUT_TABLE] = "",
                                                    [OUT_WIDE] = "wide",
                                                    [OUT_JSON] = "json",
                                                    [OUT_YAML] = "yaml",
                                                    [OUT_NAME] = "name" };
                if (watch || selector || g.all_namespaces) {
                        fprintf(stderr, "error: nodes are listed whole: no -w, -l or -A\n");
                        return 2;
                }
                return cli_get_nodes(argv + optind, (size_t) (argc - optind), outs[g.out]);
        }
        /* "get deploy/web" works too, and several names at once (of one
         * type: "get deploy a b" or "get deploy/a deploy/b"). */
        if (strchr(argv[optind], '/')) {
                for (int k = optind; k < argc; k++) {
                        const cli_resource *r;
                        const char *n;
                        if (cli_parse_ref(argv[k], &r, &n) < 0)
                                return 1;
                        if (g.res && r != g.res) {
                                fprintf(stderr, "error: one type at a time: %s\n", argv[k]);
                                return 1;
                        }
                        g.res = r;
                        names[n_names++] = n;
                        if (n_names == ELEMENTSOF(names))
                                break;
                }
        } else {
                g.res = cli_resource_find(argv[optind]);
                if (!g.res) {
                        fprintf(stderr,
                                "error: the server doesn't have a resource type \"%s\" (tend "
                                "knows deployments, replicasets, pods, events, nodes)\n",
                                argv[optind]);
                        return 1;
                }
                for (int k = optind + 1; k < argc && n_names < ELEMENTSOF(names); k++)
                        names[n_names++] = argv[k];
        }
        for (size_t k = 0; k < n_names; k++)
                if (!*names[k]) {
                        fprintf(stderr, "error: resource name may not be empty\n");
                        return 1;
                }
        name = n_names ? names[0] : NULL;
        if (n_names > 1 && watch) {
                fprintf(stderr, "error: -w watches one object or a list, not several names\n");
                return 2;
        }

        c = cli_connect();
        if (!c)
                return 1;
        if (g.res->type == &spec_type_pod && g.out == OUT_WIDE)
                g.revisions = load_revisions(c, g.all_namespaces);
        if (name && !watch) {
                json_t *list = json_array();
                ret = 0;
                header(&g);
                for (size_t k = 0; k < n_names; k++) {
                        _cleanup_free_ char *p = cli_path(g.res, cli.namespace, names[k]);
                        if (!p || client_request(c, "GET", p, NULL, NULL, &code, &resp) < 0) {
                                ret = 1;
                                break;
                        }
                        if (code != 200) {
                                client_print_error(code, resp);
                                json_decref(resp);
                                ret = 1;
                                continue;
                        }
                        if (n_names > 1 && (g.out == OUT_JSON || g.out == OUT_YAML))
                                json_array_append_new(list, resp);
                        else {
                                if (print_one(&g, resp) < 0)
                                        ret = 1;
                                json_decref(resp);
                        }
                }
                if (n_names > 1 && (g.out == OUT_JSON || g.out == OUT_YAML)) {
                        json_t *l = json_pack("{s:s, s:s, s:o, s:{}}", "apiVersion", "v1", "kind",
                                              "List", "items", list, "metadata");
                        hide_managed_fields(&g, l);
                        if (g.out == OUT_JSON)
                                cli_print_json(l);
                        else
                                cli_print_yaml(l);
                        json_decref(l);
                } else
                        json_decref(list);
                /* No header over nothing: every name was an error. */
                if (g.t.rows > 1)
                        flush_table(&g);
                table_done(&g.t);
                drop_ns(&g);
                free(g.ns);
                free_revisions(g.revisions);
                return ret;
        }

        path = cli_path(g.res, g.all_namespaces ? NULL : cli.namespace, NULL);
        if (selector) {
                esc = client_escape(selector);
                (void) tend_buf_addf(&q, "%slabelSelector=%s", q.len ? "&" : "?", strempty(esc));
        }
        if (name) {
                _cleanup_free_ char *fs = strprintf("metadata.name=%s", name),
                                    *efs = fs ? client_escape(fs) : NULL;
                (void) tend_buf_addf(&q, "%sfieldSelector=%s", q.len ? "&" : "?", strempty(efs));
        }
        query = strprintf("%s%s", path, tend_buf_str(&q));
        if (!query || client_request(c, "GET", query, NULL, NULL, &code, &resp) < 0)
                return 1;
        if (code != 200) {
                client_print_error(code, resp);
                json_decref(resp);
                return 1;
        }
        header(&g);
        if (g.out == OUT_JSON || g.out == OUT_YAML)
                hide_managed_fields(&g, resp);
        if (g.out == OUT_JSON && !watch)
                cli_print_json(resp);
        else if (g.out == OUT_YAML && !watch)
                cli_print_yaml(resp); /* the List, as kubectl */
        else {
                json_array_foreach (json_object_get(resp, "items"), i, item)
                        if (print_one(&g, item) < 0)
                                goto out;
                if ((g.out == OUT_TABLE || g.out == OUT_WIDE) && g.t.rows == 1 && !watch) {
                        if (g.all_namespaces)
                                fprintf(stderr, "No resources found\n");
                        else
                                fprintf(stderr, "No resources found in %s namespace.\n",
                                        cli.namespace);
                } else
                        flush_table(&g);
        }
        ret = 0;
        if (watch) {
                const char *rv = json_string_value(
                        json_object_get(json_object_get(resp, "metadata"), "resourceVersion"));
                g.header_printed = g.header_printed || g.t.rows > 1;
                wpath = strprintf("%s%swatch=true&resourceVersion=%s", query, q.len ? "&" : "?",
                                  strempty(rv));
                if (!wpath || client_stream(c, wpath, on_watch_line, &g, &code) < 0)
                        ret = 1;
        }
out:
        table_done(&g.t);
        drop_ns(&g);
        free(g.ns);
        free_revisions(g.revisions);
        json_decref(resp);
        return ret;
}

int cli_events(int argc, char **argv) {
        char *args[64] = { "get", "events" };
        int n = 2;
        for (int i = 1; i < argc; i++)
                if (streq(argv[i], "--help") || streq(argv[i], "-h")) {
                        printf("Usage: tend events [-l SELECTOR] [-o wide|json|yaml|name] [-w] "
                               "[-A]\n\n"
                               "Lists events, as `tend get events` (tend get --help for the "
                               "options).\n");
                        return 0;
                }
        for (int i = 1; i < argc && n < 63; i++)
                args[n++] = argv[i];
        args[n] = NULL;
        return cli_get(n, args);
}
