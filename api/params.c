/* SPDX-License-Identifier: MIT */

/*
 * The HTTP API (tend/api.h): query parameters, each read as kube-apiserver
 * reads it, and checked once, before the request is routed: a value the
 * API cannot read is a 400 that names the parameter, never a default taken
 * in silence. Parameters the API does not know are left alone, as
 * kube-apiserver leaves them.
 *
 * Booleans are Go's strconv.ParseBool (1 t T TRUE true True, 0 f F FALSE
 * false False), which is what the clients send: Python's sends "True".
 * An empty value ("?watch") is true, as apimachinery reads it. Why tend is
 * stricter than kube-apiserver here: docs/api.md.
 */

#include <inttypes.h>

#include "api-internal.h"

/* In a key, value, ..., NULL list: the first value of key (headers: any
 * case). */
static const char *lookup(const char *const *kv, const char *key, bool any_case) {
        for (; kv && kv[0] && kv[1]; kv += 2)
                if (any_case ? strcasecmp(kv[0], key) == 0 : streq(kv[0], key))
                        return kv[1];
        return NULL;
}

/* In the pool's copy of a request (prep.c): n name, value pairs, a value
 * NULL where MHD gave none. */
static const char *copied(char *const *kv, size_t n, const char *key, bool any_case) {
        for (size_t i = 0; i < n; i++)
                if (any_case ? strcasecmp(kv[2 * i], key) == 0 : streq(kv[2 * i], key))
                        return kv[2 * i + 1];
        return NULL;
}

const char *api__arg(req *r, const char *name) {
        if (r->pooled)
                return copied(r->copied_args, r->n_copied_args, name, false);
        if (r->direct)
                return lookup(r->direct->args, name, false);
        return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

const char *api__header(req *r, const char *name) {
        if (r->pooled)
                return copied(r->copied_headers, r->n_copied_headers, name, true);
        if (r->direct)
                return lookup(r->direct->headers, name, true);
        return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

typedef enum param_kind {
        P_BOOL,
        P_INT,     /* a whole number (the handler checks its range) */
        P_VERSION, /* a resourceVersion: empty, or a whole number */
        P_ENUM,
} param_kind;

static const char *const dry_run_values[] = { "All", NULL };
static const char *const field_validation_values[] = { "Ignore", "Warn", "Strict", NULL };
static const char *const propagation_values[] = { "Orphan", "Background", "Foreground", NULL };
static const char *const rv_match_values[] = { "NotOlderThan", "Exact", NULL };
static const char *const include_object_values[] = { "None", "Metadata", "Object", NULL };

static const struct param {
        const char *name;
        param_kind kind;
        const char *const *values; /* P_ENUM */
        unsigned code;             /* its refusal's, if not 400 */
} params[] = {
        { "watch", P_BOOL, NULL, 0 },
        { "allowWatchBookmarks", P_BOOL, NULL, 0 },
        { "sendInitialEvents", P_BOOL, NULL, 0 },
        { "follow", P_BOOL, NULL, 0 },
        { "previous", P_BOOL, NULL, 0 },
        { "timestamps", P_BOOL, NULL, 0 },
        { "force", P_BOOL, NULL, 0 },
        { "pretty", P_BOOL, NULL, 0 },
        { "insecureSkipTLSVerifyBackend", P_BOOL, NULL, 0 },
        { "orphanDependents", P_BOOL, NULL, 0 },
        { "timeoutSeconds", P_INT, NULL, 0 },
        { "limit", P_INT, NULL, 0 },
        { "tailLines", P_INT, NULL, 0 },
        { "limitBytes", P_INT, NULL, 0 },
        { "sinceSeconds", P_INT, NULL, 0 },
        { "gracePeriodSeconds", P_INT, NULL, 0 },
        { "resourceVersion", P_VERSION, NULL, 0 },
        /* options kube-apiserver validates after decoding them: 422 */
        { "dryRun", P_ENUM, dry_run_values, 422 },
        { "fieldValidation", P_ENUM, field_validation_values, 0 },
        { "propagationPolicy", P_ENUM, propagation_values, 422 },
        { "resourceVersionMatch", P_ENUM, rv_match_values, 422 },
        { "includeObject", P_ENUM, include_object_values, 0 },
};

int api__parse_bool(const char *v, bool *ret) {
        static const char *const yes[] = { "", "1", "t", "T", "TRUE", "true", "True" },
                                 *const no[] = { "0", "f", "F", "FALSE", "false", "False" };

        for (size_t i = 0; i < ELEMENTSOF(yes); i++)
                if (streq(v, yes[i])) {
                        *ret = true;
                        return 0;
                }
        for (size_t i = 0; i < ELEMENTSOF(no); i++)
                if (streq(v, no[i])) {
                        *ret = false;
                        return 0;
                }
        return -EINVAL;
}

bool api__arg_true(req *r, const char *name) {
        const char *v = api__arg(r, name);
        bool b = false;

        /* checked before routing (api__check_params): never nonsense here */
        return v && api__parse_bool(v, &b) >= 0 && b;
}

/* The problem with one parameter's value (new string), or NULL. */
static char *param_problem(const struct param *p, const char *value) {
        _cleanup_free_ char *repr = utf8_escape_invalid(value);
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(1024);
        int64_t i;
        uint64_t u;
        bool x;

        if (!repr)
                return strdup("out of memory");
        switch (p->kind) {
        case P_BOOL:
                if (api__parse_bool(value, &x) >= 0)
                        return NULL;
                return strprintf("%s: Invalid value: \"%s\": must be a boolean: true or false "
                                 "(or 1, t, T, TRUE, True; 0, f, F, FALSE, False)",
                                 p->name, repr);
        case P_INT:
                if (safe_atoi64(value, &i) >= 0)
                        return NULL;
                return strprintf("%s: Invalid value: \"%s\": must be a whole number", p->name,
                                 repr);
        case P_VERSION:
                if (!*value || safe_atou64(value, &u) >= 0)
                        return NULL;
                return strprintf("%s: Invalid value: \"%s\": must be a resourceVersion tendd "
                                 "gave (a whole number), or empty",
                                 p->name, repr);
        case P_ENUM:
                for (size_t k = 0; p->values[k]; k++)
                        if (streq(value, p->values[k]))
                                return NULL;
                for (size_t k = 0; p->values[k]; k++)
                        (void) tend_buf_addf(&b, "%s\"%s\"", k ? ", " : "", p->values[k]);
                return strprintf("%s: Unsupported value: \"%s\": supported values: %s", p->name,
                                 repr, strna(tend_buf_str(&b)));
        }
        return NULL;
}

typedef struct check {
        char *problem;
        unsigned code;
} check;

static void check_one(check *c, const char *key, const char *value) {
        if (c->problem || !key)
                return;
        for (size_t i = 0; i < ELEMENTSOF(params); i++)
                if (streq(key, params[i].name)) {
                        c->problem = param_problem(&params[i], value ?: "");
                        c->code = params[i].code ?: 400;
                        return;
                }
}

static enum MHD_Result check_iter(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value) {
        check *c = cls;

        (void) kind;
        check_one(c, key, value);
        return c->problem ? MHD_NO : MHD_YES;
}

int api__params_problem(req *r, unsigned *ret_code, char **ret_problem) {
        check c = {};

        if (r->direct)
                for (const char *const *kv = r->direct->args; kv && kv[0] && kv[1]; kv += 2)
                        check_one(&c, kv[0], kv[1]);
        else
                (void) MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, check_iter, &c);
        if (!c.problem)
                return 0;
        *ret_code = c.code;
        *ret_problem = c.problem;
        return -EINVAL;
}

int api__dry_run_of(req *r, json_t *options, char **ret_problem) {
        json_t *d = json_object_get(options, "dryRun"), *v;
        size_t i;
        bool dry = streq_ptr(api__arg(r, "dryRun"), "All"); /* checked: All or absent */

        *ret_problem = NULL;
        if (d && !json_is_array(d) && !json_is_null(d)) {
                *ret_problem = strdup("dryRun: Invalid value: must be a list: [\"All\"] or []");
                return -EINVAL;
        }
        json_array_foreach (d, i, v) {
                if (!streq_ptr(json_string_value(v), "All")) {
                        _cleanup_free_ char *given = json_dumps(v, JSON_ENCODE_ANY);
                        *ret_problem = strprintf("dryRun: Unsupported value: %s: supported "
                                                 "values: \"All\"",
                                                 strna(given));
                        return -EINVAL;
                }
                dry = true;
        }
        return dry;
}
