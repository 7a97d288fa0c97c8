/* SPDX-License-Identifier: MIT */
#pragma once

/* The verbs of the `tend` command line. Each returns the process exit code
 * (0 success, 1 failure, 2 usage error) and prints its own messages. */

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>

#include "tend/base.h"
#include "tend/spec.h"

/* ---- global options ------------------------------------------------------------------ */

typedef struct cli_globals {
        const char *socket;    /* --socket, TEND_SOCKET, or the default */
        const char *namespace; /* -n; "default" */
        bool tty;              /* stdout is a terminal: colour, relative ages */
} cli_globals;

extern cli_globals cli;

/* ---- the client ------------------------------------------------------------------------ */

typedef struct client client;

int client_open(const char *socket, client **ret);
client *client_free(client *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(client *, client_free);
const char *client_socket(const client *c);
/* Quiet: a failure to reach tendd (or a transfer it cut off) returns
 * -ECONNREFUSED without a word, for a caller that waits for it to come
 * back. */
void client_set_quiet(client *c, bool quiet);

/* A request with a JSON answer (*ret_json: a new reference). Connection
 * failures are printed ("cannot reach tendd at ...") and returned < 0. */
int client_request(client *c, const char *method, const char *path, const char *content_type,
                   const char *body, long *ret_code, json_t **ret_json);
int client_request_text(client *c, const char *path, long *ret_code, char **ret_text);
/* A streamed GET, one call per line; return < 0 from the callback to stop. */
typedef int (*client_line_fn)(const char *line, size_t n, void *userdata);
int client_stream(client *c, const char *path, client_line_fn on_line, void *userdata,
                  long *ret_code);
/* Prints a Status answer as kubectl does; returns -EIO. */
int client_print_error(long code, json_t *j);
/* A transfer that failed before any answer: "cannot reach tendd at PATH:
 * connection refused (is tendd running?)", permission denied, ... */
void client_report_failure(const char *socket, CURL *easy, CURLcode code, const char *errbuf);
char *client_escape(const char *s);

/* Opens the client for cli.socket, or prints why not. */
client *cli_connect(void);

/* ---- resources --------------------------------------------------------------------------- */

/* "deploy/web" → resource and name; prints an error if not valid. */
int cli_parse_ref(const char *ref, const spec_kind **ret_res, const char **ret_name);
/* The objects a verb's words name, as kubectl takes them: TYPE/NAME ...
 * (each of its own type) or TYPE NAME ... (one type). With nodes, node/NAME
 * and "node NAME" too (their res is NULL). At most max; prints what is
 * wrong and returns < 0. */
typedef struct cli_ref {
        const spec_kind *res; /* NULL: a node */
        const char *name;     /* borrowed from words */
} cli_ref;
int cli_parse_refs(char **words, size_t n, bool nodes, cli_ref *ret, size_t max, size_t *ret_n);
/* "/apis/apps/v1/namespaces/NS/deployments[/NAME]"; new string. */
char *cli_path(const spec_kind *r, const char *ns, const char *name);
/* "deployment.apps/web" */
char *cli_object_ref(const spec_kind *r, const char *name);

/* ---- output ------------------------------------------------------------------------------- */

/* kubectl's HumanDuration: 45s, 3m12s, 15m, 5h30m, 2d, ... */
char *cli_human_duration(char buf[static 32], usec_t d);
/* An age for a table, as kubectl prints one: 45s, 3m12s, 2d. */
char *cli_age(char buf[static 40], usec_t since);

typedef struct table {
        size_t cols;
        char **cells; /* rows × cols, row 0 is the header */
        size_t rows;
} table;

void table_init(table *t, size_t cols, ...); /* header names, NULL-terminated */
void table_row(table *t, ...);               /* cols strings */
/* spec's columns (table.c), the wide ones with wide; a row takes the cells. */
void table_init_columns(table *t, const spec_column *c, size_t n, bool wide);
void table_row_cells(table *t, char **cells, const spec_column *c, size_t n, bool wide);
/* A column after the others, while the table has its header only (takes
 * name). */
void table_add_column(table *t, char *name);
/* A row of n cells (taken; missing ones are empty). */
void table_row_take(table *t, char **cells, size_t n);
void table_print(const table *t, FILE *f, bool header);
/* With a first column (NAMESPACE for -A): lead[i] is row i+1's cell. */
void table_print_lead(const table *t, FILE *f, bool header, const char *lead_header,
                      char *const *lead);
void table_print_indented(const table *t, FILE *f, const char *indent, size_t gap);
void table_done(table *t);

/* s as it may go to a terminal (new string): a control character (an
 * escape sequence a pod put in its STATUS=, say) written as \xNN. */
char *cli_printable(const char *s);
void cli_fputs_printable(const char *s, FILE *f);
/* qsort() of strings (char *). */
int cmp_strp(const void *a, const void *b);

/* Pod facts for tables and describe. */
const char *cli_pod_status(const spec_pod *p);
bool cli_pod_ready(const spec_pod *p);

/* Decodes JSON from tendd into a struct (NULL on error, printed). */
void *cli_decode(const spec_type *t, json_t *j);

/* The ReplicaSets a deployment controls (by uid); *ret_n of them, each to
 * be freed. */
spec_replica_set **cli_owned_replica_sets(client *c, const spec_deployment *d, size_t *ret_n);
/* GET one object and decode it; prints the error and returns NULL. */
void *cli_fetch(client *c, const spec_kind *r, const char *name);

/* JSON or YAML to stdout. */
void cli_print_json(json_t *j);
void cli_print_yaml(json_t *j);

/* ---- verbs ---------------------------------------------------------------------------------- */

int cli_validate(int argc, char **argv);
int cli_apply(int argc, char **argv);
int cli_get(int argc, char **argv);
int cli_describe(int argc, char **argv);
int cli_delete(int argc, char **argv);
int cli_scale(int argc, char **argv);
int cli_rollout(int argc, char **argv);
int cli_logs(int argc, char **argv);
int cli_events(int argc, char **argv);
int cli_cordon(int argc, char **argv);
int cli_uncordon(int argc, char **argv);
/* "nodes", "node/n1", ...: get's nodes, which are not a spec type (output.c). */
bool cli_is_nodes(const char *word);
/* words: get's words from the type on; out: "", "wide", "json", "yaml", "name". */
int cli_get_nodes(char **words, size_t n_words, const char *out);
int cli_version(int argc, char **argv);
int cli_kubeconfig(int argc, char **argv);
