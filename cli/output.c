/* SPDX-License-Identifier: MIT */

/* What the verbs share: resource names, paths, ages, tables, pod status. */

#include <stdarg.h>
#include <time.h>

#include "cli.h"

static const cli_resource resources[] = {
        { "deployments", "deployment", "deploy", "apps", "/apis/apps/v1", &spec_type_deployment },
        { "replicasets", "replicaset", "rs", "apps", "/apis/apps/v1", &spec_type_replica_set },
        { "pods", "pod", "po", "", "/api/v1", &spec_type_pod },
        { "events", "event", "ev", "", "/api/v1", &spec_type_event },
};

/* "deployments", "deployment", "deploy", and with the group too
 * ("deployment.apps", what -o name prints), as kubectl. */
const cli_resource *cli_resource_find(const char *word) {
        for (size_t i = 0; i < ELEMENTSOF(resources); i++) {
                const cli_resource *r = &resources[i];
                const char *rest;
                size_t n = strcspn(word, ".");
                _cleanup_free_ char *base = strndup(word, n);

                if (!base)
                        return NULL;
                rest = word[n] ? word + n + 1 : NULL;
                if (rest && !streq(rest, r->group))
                        continue;
                if (streq(base, r->plural) || streq(base, r->singular) || streq(base, r->shortname))
                        return r;
        }
        return NULL;
}

int cli_parse_ref(const char *ref, const cli_resource **ret_res, const char **ret_name) {
        const char *slash = strchr(ref, '/');
        _cleanup_free_ char *type = NULL;

        if (!slash || !slash[1]) {
                fprintf(stderr, "error: expected TYPE/NAME (e.g. deploy/web), got \"%s\"\n", ref);
                return -EINVAL;
        }
        type = strndup(ref, (size_t) (slash - ref));
        if (!type)
                return -ENOMEM;
        *ret_res = cli_resource_find(type);
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

char *cli_path(const cli_resource *r, const char *ns, const char *name) {
        _cleanup_free_ char *ens = ns ? client_escape(ns) : NULL,
                            *ename = name ? client_escape(name) : NULL;

        if (!ns)
                return strprintf("%s/%s", r->prefix, r->plural);
        if (!name)
                return strprintf("%s/namespaces/%s/%s", r->prefix, ens, r->plural);
        return strprintf("%s/namespaces/%s/%s/%s", r->prefix, ens, r->plural, ename);
}

char *cli_object_ref(const cli_resource *r, const char *name) {
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
        uint64_t s = d / USEC_PER_SEC, m = s / 60, h = s / 3600, days = s / 86400;

        if (s < 120)
                snprintf(buf, 32, "%llus", (unsigned long long) s);
        else if (m < 10) {
                if (s % 60)
                        snprintf(buf, 32, "%llum%llus", (unsigned long long) m,
                                 (unsigned long long) (s % 60));
                else
                        snprintf(buf, 32, "%llum", (unsigned long long) m);
        } else if (h < 3)
                snprintf(buf, 32, "%llum", (unsigned long long) m);
        else if (h < 8) {
                if (m % 60)
                        snprintf(buf, 32, "%lluh%llum", (unsigned long long) h,
                                 (unsigned long long) (m % 60));
                else
                        snprintf(buf, 32, "%lluh", (unsigned long long) h);
        } else if (h < 48)
                snprintf(buf, 32, "%lluh", (unsigned long long) h);
        else if (days < 8) {
                if (h % 24)
                        snprintf(buf, 32, "%llud%lluh", (unsigned long long) days,
                                 (unsigned long long) (h % 24));
                else
                        snprintf(buf, 32, "%llud", (unsigned long long) days);
        } else if (days < 365 * 2)
                snprintf(buf, 32, "%llud", (unsigned long long) days);
        else
                snprintf(buf, 32, "%lluy", (unsigned long long) (days / 365));
        return buf;
}

char *cli_age(char buf[static 40], usec_t since) {
        usec_t now = now_realtime();
        char ts[TIMESTAMP_MAX];

        if (!since) {
                snprintf(buf, 40, "<unknown>");
                return buf;
        }
        if (cli.tty)
                return cli_human_duration(buf, now > since ? now - since : 0);
        snprintf(buf, 40, "%s", format_timestamp(ts, since / USEC_PER_SEC * USEC_PER_SEC));
        return buf;
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

static void print_rows(const table *t, FILE *f, size_t first, const char *indent, size_t gap) {
        size_t widths[32] = {};

        for (size_t r = 0; r < t->rows; r++)
                for (size_t c = 0; c < t->cols && c < 32; c++)
                        widths[c] = MAX(widths[c], strlen(strempty(t->cells[r * t->cols + c])));
        for (size_t r = first; r < t->rows; r++) {
                fputs(indent, f);
                for (size_t c = 0; c < t->cols; c++) {
                        const char *v = strempty(t->cells[r * t->cols + c]);
                        if (c + 1 == t->cols)
                                fputs(v, f);
                        else
                                fprintf(f, "%-*s%*s", (int) widths[MIN(c, (size_t) 31)], v,
                                        (int) gap, "");
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
        const spec_condition *c = spec_get_condition(p->status.conditions, p->status.n_conditions,
                                                     "Ready");
        return c && streq_ptr(c->status, "True");
}

/* kubectl's STATUS column: Terminating, a waiting or terminated reason, the
 * pod's own reason, or the phase. */
const char *cli_pod_status(const spec_pod *p) {
        const spec_container_status *cs = p->status.n_container_statuses
                                                  ? &p->status.container_statuses[0]
                                                  : NULL;

        if (p->metadata.deletion_timestamp && p->status.phase != SPEC_POD_FAILED)
                return "Terminating";
        if (!isempty(p->status.reason))
                return p->status.reason;
        if (cs && cs->state.waiting && !isempty(cs->state.waiting->reason))
                return cs->state.waiting->reason;
        if (cs && cs->state.terminated) {
                if (cs->state.terminated->signal)
                        return "Killed";
                if (!isempty(cs->state.terminated->reason))
                        return cs->state.terminated->reason;
                return cs->state.terminated->exit_code ? "Error" : "Completed";
        }
        return strna(spec_pod_phase_to_string(p->status.phase));
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
