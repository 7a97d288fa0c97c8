/* SPDX-License-Identifier: MIT */

/* tend get TYPE [NAME] [-l SELECTOR] [-o wide|json|yaml|name] [-w] [-A] */

#include <assert.h>
#include <ctype.h>
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
        const spec_kind *res;
        output out;
        bool all_namespaces;
        table t;
        char **ns; /* -A: each row's namespace */
        size_t n_ns;
        tend_hashmap *revisions; /* pods -o wide: "ns/rs" → revision (owned) */
        bool header_printed;
        bool show_managed_fields;
        bool no_headers;
        bool show_labels;
        char **label_columns; /* -L: label keys, each a column */
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

/* -L app.kubernetes.io/name: the column NAME, as kubectl heads it. */
static char *label_header(const char *key) {
        const char *slash = strrchr(key, '/');
        char *h = strdup(slash ? slash + 1 : key);

        for (char *p = h; p && *p; p++)
                *p = (char) toupper((unsigned char) *p);
        return h;
}

static void header(get_ctx *g) {
        const spec_column *c;
        size_t n = spec_table_columns(g->res->type, &c);

        table_init_columns(&g->t, c, n, g->out == OUT_WIDE);
        for (char **k = g->label_columns; k && *k; k++)
                table_add_column(&g->t, label_header(*k));
        if (g->show_labels)
                table_add_column(&g->t, strdup("LABELS"));
}

/* The cells -L and --show-labels add to a row, from its labels. */
static void label_cells(get_ctx *g, json_t *j, char **cells, size_t *n) {
        json_t *labels = json_object_get(json_object_get(j, "metadata"), "labels");

        for (char **k = g->label_columns; k && *k; k++)
                cells[(*n)++] = strdup(strempty(json_string_value(json_object_get(labels, *k))));
        if (g->show_labels) {
                _cleanup_buf_ tend_buf b = TEND_BUF_INIT(1 << 16);
                const char *keys[256];
                size_t nk = 0;
                const char *key;
                json_t *v;
                json_object_foreach (labels, key, v)
                        if (nk < ELEMENTSOF(keys))
                                keys[nk++] = key;
                qsort(keys, nk, sizeof *keys, cmp_strp);
                for (size_t i = 0; i < nk; i++)
                        (void) tend_buf_addf(
                                &b, "%s%s=%s", i ? "," : "", keys[i],
                                strempty(json_string_value(json_object_get(labels, keys[i]))));
                cells[(*n)++] = strdup(b.len ? tend_buf_str(&b) : "<none>");
        }
}

static const char *revision_of(const char *ns, const char *rs, void *userdata) {
        get_ctx *g = userdata;
        _cleanup_free_ char *key = strprintf("%s/%s", ns, rs);

        return key && g->revisions ? tend_hashmap_get(g->revisions, key) : NULL;
}

/* One row for an object (a decoded struct of the resource's type, and
 * its JSON j). */
static void row(get_ctx *g, const void *obj, json_t *j) {
        const spec_column *c;
        size_t n = spec_table_columns(g->res->type, &c), k = 0;
        char *cells[16] = {}, *row_cells[16 + 64] = {};
        spec_table_ctx ctx = { .now = now_realtime(),
                               .human = true,
                               .restarts_ago = cli.tty, /* piped: one word per column, for awk */
                               .revision_of = revision_of,
                               .userdata = g };

        assert(n <= ELEMENTSOF(cells));
        (void) spec_table_row(g->res->type, obj, &ctx, cells);
        for (size_t i = 0; i < n; i++)
                if (g->out == OUT_WIDE || c[i].priority == 0)
                        row_cells[k++] = cells[i] ?: strdup("<none>");
                else
                        free(cells[i]);
        label_cells(g, j, row_cells, &k);
        table_row_take(&g->t, row_cells, k);
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
                row(g, obj, j);
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
                bool head = !g->header_printed && !g->no_headers;
                if (g->all_namespaces && g->n_ns + 1 == g->t.rows)
                        table_print_lead(&g->t, stdout, head, "NAMESPACE", g->ns);
                else
                        table_print(&g->t, stdout, head);
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

/* --sort-by: a field's path as kubectl takes it ("{.metadata.name}",
 * ".status.containerStatuses[0].restartCount"); the value there, or NULL. */
static json_t *field_at(json_t *j, const char *path) {
        _cleanup_free_ char *copy = NULL;
        char *save = NULL;
        size_t n;

        if (*path == '{')
                path++;
        copy = strdup(path);
        if (!copy)
                return NULL;
        n = strlen(copy);
        if (n && copy[n - 1] == '}')
                copy[n - 1] = 0;
        for (char *t = strtok_r(copy, ".", &save); t && j; t = strtok_r(NULL, ".", &save)) {
                char *br = strchr(t, '[');
                int64_t idx;
                if (br)
                        *br = 0;
                if (*t)
                        j = json_object_get(j, t);
                while (br && j) {
                        char *end = strchr(br + 1, ']');
                        if (!end)
                                return NULL;
                        *end = 0;
                        if (safe_atoi64(br + 1, &idx) < 0 || idx < 0)
                                return NULL;
                        j = json_array_get(j, (size_t) idx);
                        br = end[1] == '[' ? end + 1 : NULL;
                }
        }
        return j;
}

typedef struct sort_item {
        json_t *item, *key;
} sort_item;

/* Numbers as numbers, the rest as text; absent first (as kubectl). */
static int cmp_sort_items(const void *a, const void *b) {
        json_t *x = ((const sort_item *) a)->key, *y = ((const sort_item *) b)->key;

        if (!x || !y)
                return (!x - !y) ? (!x ? -1 : 1) : 0;
        if (json_is_number(x) && json_is_number(y)) {
                double dx = json_number_value(x), dy = json_number_value(y);
                return dx < dy ? -1 : dx > dy;
        }
        if (json_is_string(x) && json_is_string(y))
                return strcmp(json_string_value(x), json_string_value(y));
        _cleanup_free_ char *sx = json_dumps(x, JSON_ENCODE_ANY | JSON_COMPACT),
                            *sy = json_dumps(y, JSON_ENCODE_ANY | JSON_COMPACT);
        return strcmp(strempty(sx), strempty(sy));
}

static int sort_items(json_t *items, const char *path) {
        size_t n = json_array_size(items), i;
        _cleanup_free_ sort_item *v = new0(sort_item, n + 1);
        json_t *item;

        if (!v)
                return -ENOMEM;
        json_array_foreach (items, i, item)
                v[i] = (sort_item){ json_incref(item), field_at(item, path) };
        /* stable for equal keys: kubectl keeps the list's order */
        for (i = 1; i < n; i++)
                for (size_t k = i; k > 0 && cmp_sort_items(&v[k - 1], &v[k]) > 0; k--) {
                        sort_item t = v[k];
                        v[k] = v[k - 1];
                        v[k - 1] = t;
                }
        json_array_clear(items);
        for (i = 0; i < n; i++)
                if (json_array_append_new(items, v[i].item) < 0)
                        return -ENOMEM;
        return 0;
}

/* The revision of each ReplicaSet, for the REVISION column of pods. */
static tend_hashmap *load_revisions(client *c, bool all_namespaces) {
        _cleanup_free_ char *path = cli_path(spec_kind_named("replicasets"),
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
                { "no-headers", no_argument, NULL, 'H' },
                { "show-labels", no_argument, NULL, 'S' },
                { "label-columns", required_argument, NULL, 'L' },
                { "sort-by", required_argument, NULL, 'B' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        _cleanup_strv_free_ char **label_columns = NULL;
        const char *sort_by = NULL;
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
        while ((opt = getopt_long(argc, argv, "l:o:wAn:L:h", options, NULL)) >= 0)
                switch (opt) {
                case 'H':
                        g.no_headers = true;
                        break;
                case 'S':
                        g.show_labels = true;
                        break;
                case 'L': {
                        _cleanup_free_ char *copy = strdup(optarg);
                        char *save = NULL;
                        for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t;
                             t = strtok_r(NULL, ",", &save))
                                if (strv_extend(&label_columns, t) < 0)
                                        return 1;
                        if (strv_length(label_columns) > 32) {
                                fprintf(stderr, "error: -L: at most 32 label columns\n");
                                return 2;
                        }
                        break;
                }
                case 'B':
                        sort_by = optarg;
                        break;
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
                        printf("Usage: tend get TYPE [NAME...] [-l SELECTOR] "
                               "[-o wide|json|yaml|name] [-w] [-A]\n"
                               "                [--no-headers] [--show-labels] [-L KEY,...] "
                               "[--sort-by PATH] [--show-managed-fields]\n\n"
                               "TYPE: deployments (deploy), replicasets (rs), pods (po), events "
                               "(ev), nodes (no).\n\n"
                               "  -l, --selector SEL     only objects whose labels match "
                               "(a=b,c!=d,e in (x,y))\n"
                               "  -o, --output FORMAT    wide, json, yaml or name\n"
                               "  -w, --watch            after the list, print changes as they "
                               "happen\n"
                               "  -A, --all-namespaces   every namespace\n"
                               "  -n, --namespace NS     the namespace (default: default)\n"
                               "      --no-headers       tables without their header line\n"
                               "      --show-labels      a LABELS column\n"
                               "  -L, --label-columns KEY,...  a column per label key (its value)\n"
                               "      --sort-by PATH     in the order of a field, as "
                               "{.metadata.name} or\n"
                               "                         "
                               ".status.containerStatuses[0].restartCount\n"
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
        g.label_columns = label_columns;
        if (cli_is_nodes(argv[optind])) {
                if (g.no_headers || g.show_labels || label_columns || sort_by) {
                        fprintf(stderr, "error: nodes are listed as they are: no --no-headers, "
                                        "--show-labels, -L or --sort-by\n");
                        return 2;
                }
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
                        const spec_kind *r;
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
                g.res = spec_kind_named(argv[optind]);
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
        if (sort_by && sort_items(json_object_get(resp, "items"), sort_by) < 0)
                goto out;
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
