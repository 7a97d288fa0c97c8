/* SPDX-License-Identifier: MIT */

/* What the verbs share: resource names, paths, ages, tables, pod status. */

#include <stdarg.h>
#include <time.h>

#include "cli.h"

bool cli_is_nodes(const char *word) {
        return streq(word, "nodes") || streq(word, "node") || streq(word, "no") ||
               startswith(word, "node/") || startswith(word, "nodes/");
}

int cli_parse_ref(const char *ref, const spec_kind **ret_res, const char **ret_name) {
        const char *slash = strchr(ref, '/');
        _cleanup_free_ char *type = NULL;

        if (!slash || !slash[1]) {
                fprintf(stderr, "error: expected TYPE/NAME (e.g. deploy/web), got \"%s\"\n", ref);
                return -EINVAL;
        }
        type = strndup(ref, (size_t) (slash - ref));
        if (!type)
                return -ENOMEM;
        *ret_res = spec_kind_named(type);
        if (!*ret_res) {
                fprintf(stderr,
                        "error: the server doesn't have a resource type \"%s\" (tend "
                        "knows deployments, replicasets, pods, events)\n",
                        type);
                return -EINVAL;
        }
        *ret_name = slash + 1;
        return 0;
}

int cli_parse_refs(char **words, size_t n, bool nodes, cli_ref *ret, size_t max, size_t *ret_n) {
        size_t k = 0;

        *ret_n = 0;
        /* TYPE NAME...: one type, then its names (kubectl's other form) */
        if (n > 0 && !strchr(words[0], '/')) {
                const spec_kind *r = spec_kind_named(words[0]);
                bool is_node = nodes && cli_is_nodes(words[0]);
                if (!r && !is_node) {
                        fprintf(stderr,
                                "error: the server doesn't have a resource type \"%s\" (tend "
                                "knows deployments, replicasets, pods, events%s)\n",
                                words[0], nodes ? ", nodes" : "");
                        return -EINVAL;
                }
                if (n == 1) {
                        fprintf(stderr, "error: which %s? TYPE NAME or TYPE/NAME (e.g. %s web)\n",
                                r ? r->singular : "node", words[0]);
                        return -EINVAL;
                }
                for (size_t i = 1; i < n; i++) {
                        if (!*words[i] || strchr(words[i], '/')) {
                                fprintf(stderr,
                                        "error: \"%s\": after a type (%s) come names; TYPE/NAME "
                                        "is the other form\n",
                                        words[i], words[0]);
                                return -EINVAL;
                        }
                        if (k == max) {
                                fprintf(stderr, "error: at most %zu names at once\n", max);
                                return -E2BIG;
                        }
                        ret[k++] = (cli_ref){ r, words[i] };
                }
                *ret_n = k;
                return 0;
        }
        for (size_t i = 0; i < n; i++) {
                const spec_kind *r = NULL;
                const char *name;
                if (k == max) {
                        fprintf(stderr, "error: at most %zu names at once\n", max);
                        return -E2BIG;
                }
                if (nodes && (startswith(words[i], "node/") || startswith(words[i], "nodes/") ||
                              startswith(words[i], "no/"))) {
                        name = strchr(words[i], '/') + 1;
                        if (!*name) {
                                fprintf(stderr, "error: which node? node/NAME\n");
                                return -EINVAL;
                        }
                } else if (cli_parse_ref(words[i], &r, &name) < 0)
                        return -EINVAL;
                ret[k++] = (cli_ref){ r, name };
        }
        *ret_n = k;
        return 0;
}

char *cli_path(const spec_kind *r, const char *ns, const char *name) {
        _cleanup_free_ char *ens = ns ? client_escape(ns) : NULL,
                            *ename = name ? client_escape(name) : NULL, *prefix = spec_kind_path(r);

        if (!prefix || (ns && !ens) || (name && !ename))
                return NULL;
        if (!ns)
                return strprintf("%s/%s", prefix, r->plural);
        if (!name)
                return strprintf("%s/namespaces/%s/%s", prefix, ens, r->plural);
        return strprintf("%s/namespaces/%s/%s/%s", prefix, ens, r->plural, ename);
}

char *cli_object_ref(const spec_kind *r, const char *name) {
        if (isempty(r->group))
                return strprintf("%s/%s", r->singular, name);
        return strprintf("%s.%s/%s", r->singular, r->group, name);
}

client *cli_connect(void) {
        client *c = NULL;
        if (client_open(cli.socket, &c) < 0) {
                fprintf(stderr, "error: out of memory\n");
                return NULL;
        }
        return c;
}

/* ---- durations ---------------------------------------------------------------------------- */

char *cli_human_duration(char buf[static 32], usec_t d) {
        return spec_human_duration(buf, d);
}

char *cli_age(char buf[static 40], usec_t since) {
        usec_t now = now_realtime();

        if (!since) {
                snprintf(buf, 40, "<unknown>");
                return buf;
        }
        return cli_human_duration(buf, now > since ? now - since : 0);
}

/* ---- tables --------------------------------------------------------------------------------- */

void table_init(table *t, size_t cols, ...) {
        va_list ap;

        *t = (table){ .cols = cols };
        t->cells = new0(char *, cols);
        va_start(ap, cols);
        for (size_t i = 0; i < cols && t->cells; i++)
                t->cells[i] = strdup(va_arg(ap, const char *));
        va_end(ap);
        t->rows = 1;
}

void table_row(table *t, ...) {
        char **n = realloc(t->cells, sizeof(char *) * t->cols * (t->rows + 1));
        va_list ap;

        if (!n)
                return;
        t->cells = n;
        va_start(ap, t);
        for (size_t i = 0; i < t->cols; i++) {
                const char *v = va_arg(ap, const char *);
                t->cells[t->rows * t->cols + i] = strdup(v ?: "<none>");
        }
        va_end(ap);
        t->rows++;
}

void table_init_columns(table *t, const spec_column *c, size_t n, bool wide) {
        *t = (table){};
        t->cells = new0(char *, n);
        for (size_t i = 0; i < n && t->cells; i++)
                if (wide || c[i].priority == 0)
                        t->cells[t->cols++] = strdup(c[i].name);
        t->rows = 1;
}

void table_row_cells(table *t, char **cells, const spec_column *c, size_t n, bool wide) {
        char **grown = realloc(t->cells, sizeof(char *) * t->cols * (t->rows + 1));
        size_t k = 0;

        if (grown)
                t->cells = grown;
        for (size_t i = 0; i < n; i++) {
                if (grown && (wide || c[i].priority == 0))
                        t->cells[t->rows * t->cols + k++] = cells[i] ?: strdup("<none>");
                else
                        free(cells[i]);
                cells[i] = NULL;
        }
        if (grown)
                t->rows++;
}

void table_add_column(table *t, char *name) {
        char **n = t->rows == 1 ? realloc(t->cells, sizeof(char *) * (t->cols + 1)) : NULL;

        if (!n) {
                free(name);
                return;
        }
        t->cells = n;
        t->cells[t->cols++] = name;
}

void table_row_take(table *t, char **cells, size_t n) {
        char **grown = realloc(t->cells, sizeof(char *) * t->cols * (t->rows + 1));

        for (size_t i = 0; i < n; i++) {
                if (grown && i < t->cols)
                        grown[t->rows * t->cols + i] = cells[i];
                else
                        free(cells[i]);
                cells[i] = NULL;
        }
        if (!grown)
                return;
        t->cells = grown;
        for (size_t i = n; i < t->cols; i++)
                t->cells[t->rows * t->cols + i] = strdup("");
        t->rows++;
}

char *cli_printable(const char *s) {
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(1 << 20);

        for (const unsigned char *p = (const unsigned char *) strempty(s); *p; p++)
                if (*p < 0x20 || *p == 0x7f)
                        (void) tend_buf_addf(&b, "\\x%02x", *p);
                else
                        (void) tend_buf_add(&b, (const char *) p, 1);
        return b.len ? tend_buf_take(&b) : strdup("");
}

void cli_fputs_printable(const char *s, FILE *f) {
        _cleanup_free_ char *clean = cli_printable(s);
        fputs(clean ?: "", f);
}

int cmp_strp(const void *a, const void *b) {
        return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/* strlen(cli_printable(s)) */
static size_t printable_len(const char *s) {
        size_t n = 0;

        for (const unsigned char *p = (const unsigned char *) strempty(s); *p; p++)
                n += *p < 0x20 || *p == 0x7f ? 4 : 1;
        return n;
}

static void print_rows(const table *t, FILE *f, size_t first, const char *indent, size_t gap) {
        size_t widths[32] = {};

        for (size_t r = 0; r < t->rows; r++)
                for (size_t c = 0; c < t->cols && c < 32; c++)
                        widths[c] = MAX(widths[c], printable_len(t->cells[r * t->cols + c]));
        for (size_t r = first; r < t->rows; r++) {
                fputs(indent, f);
                for (size_t c = 0; c < t->cols; c++) {
                        _cleanup_free_ char *v = cli_printable(t->cells[r * t->cols + c]);
                        if (c + 1 == t->cols)
                                fputs(strempty(v), f);
                        else
                                fprintf(f, "%-*s%*s", (int) widths[MIN(c, (size_t) 31)],
                                        strempty(v), (int) gap, "");
                }
                fputc('\n', f);
        }
}

void table_print(const table *t, FILE *f, bool header) {
        print_rows(t, f, header ? 0 : 1, "", 3);
}

void table_print_lead(const table *t, FILE *f, bool header, const char *lead_header,
                      char *const *lead) {
        table l = { .cols = t->cols + 1, .rows = t->rows };

        l.cells = new0(char *, l.cols *l.rows);
        if (!l.cells)
                return;
        for (size_t r = 0; r < t->rows; r++) {
                l.cells[r * l.cols] = (char *) (r == 0 ? lead_header : lead[r - 1]);
                for (size_t c = 0; c < t->cols; c++)
                        l.cells[r * l.cols + c + 1] = t->cells[r * t->cols + c];
        }
        table_print(&l, f, header);
        free(l.cells); /* the strings are borrowed */
}

void table_print_indented(const table *t, FILE *f, const char *indent, size_t gap) {
        print_rows(t, f, 0, indent, gap);
}

void table_done(table *t) {
        for (size_t i = 0; i < t->rows * t->cols; i++)
                free(t->cells[i]);
        free(t->cells);
        *t = (table){};
}

/* ---- pods ----------------------------------------------------------------------------------- */

bool cli_pod_ready(const spec_pod *p) {
        return spec_pod_ready(p, NULL);
}

const char *cli_pod_status(const spec_pod *p) {
        return spec_pod_status_text(p);
}

void *cli_decode(const spec_type *t, json_t *j) {
        spec_errors errs = {};
        void *obj = NULL;

        if (spec_decode_new(t, j, &errs, &obj) < 0) {
                fprintf(stderr, "error: cannot read a %s from tendd:\n", spec_type_name(t));
                spec_errors_print(&errs, stderr);
                obj = NULL;
        }
        spec_errors_done(&errs);
        return obj;
}

void cli_print_json(json_t *j) {
        char *s = json_dumps(j, JSON_INDENT(4) | JSON_PRESERVE_ORDER);
        if (s)
                printf("%s\n", s);
        free(s);
}

void cli_print_yaml(json_t *j) {
        char *s = spec_yaml_dump(j);
        if (s)
                fputs(s, stdout);
        free(s);
}
