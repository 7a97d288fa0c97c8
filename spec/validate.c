/* SPDX-License-Identifier: MIT */

/*
 * Defaults and validation of Deployments, with Kubernetes' messages where
 * Kubernetes has one (docs/deployments.md §1) and tend's where tend is stricter.
 * Every error of an object is reported, never only the first.
 */

#include <ctype.h>
#include <inttypes.h>

#include "spec-internal.h"

/* ---- defaults ------------------------------------------------------------------------ */

static void set_default_intstr(spec_intstr *v, const char *s) {
        if (!spec_intstr_is_set(v))
                v->str = strdup(s); /* OOM leaves it unset: validation reports it */
}

#define DEFAULT_INT(field, value)          \
        do {                               \
                if ((field) == SPEC_UNSET) \
                        (field) = (value); \
        } while (0)

static void default_probe(spec_probe *p) {
        if (!p)
                return;
        DEFAULT_INT(p->initial_delay_seconds, 0);
        DEFAULT_INT(p->timeout_seconds, 1);
        DEFAULT_INT(p->period_seconds, 10);
        DEFAULT_INT(p->success_threshold, 1);
        DEFAULT_INT(p->failure_threshold, 3);
        if (p->http_get) {
                if (!p->http_get->path)
                        p->http_get->path = strdup("/");
                if (!p->http_get->scheme)
                        p->http_get->scheme = strdup("HTTP");
        }
}

static void default_pod_spec(spec_pod_spec *s) {
        if (s->termination_grace_period_seconds == SPEC_UNSET64)
                s->termination_grace_period_seconds = 30;
        if (s->restart_policy < 0)
                s->restart_policy = SPEC_RESTART_ALWAYS;
        if (s->runtime_class_name < 0)
                s->runtime_class_name = SPEC_RUNTIME_PROCESS;
        for (size_t i = 0; i < s->n_containers; i++) {
                spec_container *c = &s->containers[i];
                for (size_t k = 0; k < c->n_ports; k++) {
                        if (!c->ports[k].protocol)
                                c->ports[k].protocol = strdup("TCP");
                }
                default_probe(c->readiness_probe);
                default_probe(c->liveness_probe);
        }
        for (size_t i = 0; i < s->n_volumes; i++) {
                spec_object_volume *o = s->volumes[i].config_map ?: s->volumes[i].secret;
                if (o)
                        DEFAULT_INT(o->default_mode, SPEC_VOLUME_DEFAULT_MODE);
        }
}

void spec_deployment_default(spec_deployment *d) {
        spec_deployment_spec *s = &d->spec;

        if (!d->metadata.namespace)
                d->metadata.namespace = strdup("default");
        DEFAULT_INT(s->replicas, 1);
        DEFAULT_INT(s->min_ready_seconds, 0);
        DEFAULT_INT(s->revision_history_limit, 10);
        DEFAULT_INT(s->progress_deadline_seconds, 600);
        if (s->strategy.type < 0)
                s->strategy.type = SPEC_STRATEGY_ROLLING_UPDATE;
        if (s->strategy.type == SPEC_STRATEGY_ROLLING_UPDATE) {
                if (!s->strategy.rolling_update) {
                        spec_rolling_update *ru = calloc(1, sizeof *ru);
                        if (ru) {
                                ru->max_surge.num = ru->max_unavailable.num = SPEC_UNSET;
                                s->strategy.rolling_update = ru;
                        }
                }
                if (s->strategy.rolling_update) {
                        set_default_intstr(&s->strategy.rolling_update->max_unavailable, "25%");
                        set_default_intstr(&s->strategy.rolling_update->max_surge, "25%");
                }
        }
        default_pod_spec(&s->template.spec);
}

/* ---- syntax checks (Kubernetes' wording) ----------------------------------------------- */

#define DNS1123_LABEL_MSG                                                                        \
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', " \
        "and must start and end with an alphanumeric character (e.g. 'my-name',  or "            \
        "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
#define DNS1123_SUBDOMAIN_MSG                                                                 \
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, " \
        "'-' or '.', and must start and end with an alphanumeric character (e.g. "            \
        "'example.com', regex used for validation is "                                        \
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
#define QUALIFIED_NAME_MSG                                                                    \
        "name part must consist of alphanumeric characters, '-', '_' or '.', and must start " \
        "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "          \
        "'123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
#define LABEL_VALUE_MSG                                                                        \
        "a valid label must be an empty string or consist of alphanumeric characters, '-', "   \
        "'_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  " \
        "or 'my_value',  or '12345', regex used for validation is "                            \
        "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
#define ENV_NAME_MSG                                                                        \
        "a valid environment variable name must consist of alphabetic characters, digits, " \
        "'_', '-', or '.', and must not start with a digit (e.g. 'my.env-name',  or "       \
        "'MY_ENV.NAME',  or 'MyEnvName1', regex used for validation is "                    \
        "'[-._a-zA-Z][-._a-zA-Z0-9]*')"

static bool is_dns1123_label(const char *s) {
        size_t n = strlen(s);
        if (n == 0 || n > SPEC_DNS_LABEL_MAX)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
                if (!alnum && !(c == '-' && i > 0 && i < n - 1))
                        return false;
        }
        return true;
}

static bool is_dns1123_subdomain(const char *s, size_t n) {
        if (n == 0 || n > 253)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
                bool edge = i == 0 || i == n - 1 || s[i - 1] == '.' || s[i + 1] == '.';
                if (alnum)
                        continue;
                if ((c == '-' || c == '.') && !edge)
                        continue;
                return false;
        }
        return true;
}

/* ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9] */
static bool is_qualified_name_part(const char *s, size_t n) {
        if (n == 0)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                if (isalnum((unsigned char) c))
                        continue;
                if ((c == '-' || c == '_' || c == '.') && i > 0 && i < n - 1)
                        continue;
                return false;
        }
        return true;
}

/* The messages (joined by "; ") for an invalid label key, or NULL if valid. */
static char *label_key_problems(const char *key) {
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(4096);
        const char *slash = strchr(key, '/'), *name = key;

        if (slash) {
                if (strchr(slash + 1, '/'))
                        return strdup("a qualified name must consist of alphanumeric "
                                      "characters, '-', '_' or '.', and must start and end with "
                                      "an alphanumeric character (e.g. 'MyName',  or 'my.name', "
                                      " or '123-abc', regex used for validation is "
                                      "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an "
                                      "optional DNS subdomain prefix and '/' (e.g. "
                                      "'example.com/MyName')");
                if (slash == key)
                        (void) tend_buf_adds(&b, "prefix part must be non-empty");
                else if (!is_dns1123_subdomain(key, (size_t) (slash - key)))
                        (void) tend_buf_adds(&b, "prefix part " DNS1123_SUBDOMAIN_MSG);
                name = slash + 1;
        }
        if (!*name)
                (void) tend_buf_addf(&b, "%sname part must be non-empty", b.len ? "; " : "");
        else if (strlen(name) > 63)
                (void) tend_buf_addf(&b, "%sname part must be no more than 63 characters",
                                     b.len ? "; " : "");
        else if (!is_qualified_name_part(name, strlen(name)))
                (void) tend_buf_addf(&b, "%s" QUALIFIED_NAME_MSG, b.len ? "; " : "");
        return b.len ? tend_buf_take(&b) : NULL;
}

static const char *label_value_problem(const char *v) {
        size_t n = strlen(v);
        if (n > 63)
                return "must be no more than 63 characters";
        if (n > 0 && !is_qualified_name_part(v, n))
                return LABEL_VALUE_MSG;
        return NULL;
}

/* ---- error helpers ---------------------------------------------------------------------- */

typedef struct vctx {
        spec_errors *errs;
        spec_path path;
        bool oom;
        /* the pod template's leased ports (tend.io/lease-ports), which
         * probes may name as a container's ports */
        spec_port_name leased[SPEC_LEASE_PORTS_MAX];
        size_t n_leased;
} vctx;

static bool is_leased(const vctx *v, const char *name) {
        for (size_t i = 0; i < v->n_leased; i++)
                if (streq(v->leased[i].name, name))
                        return true;
        return false;
}

/* Whether a list had this key before (and note it): its duplicates found
 * in one pass (a list of SPEC_MAX_ITEMS compared pairwise is fifty million
 * comparisons, seconds on the loop). */
static bool seen_before(vctx *v, tend_hashmap *seen, const char *key) {
        if (!seen) {
                v->oom = true;
                return false;
        }
        if (tend_hashmap_get(seen, key))
                return true;
        if (tend_hashmap_put(seen, key, (void *) 1, NULL) < 0)
                v->oom = true;
        return false;
}

static void verr(vctx *v, const char *fmt, ...) _printf_(2, 3);
static void verr(vctx *v, const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        if (!msg || spec_errors_add(v->errs, spec__path_str(&v->path), "%s", msg) == -ENOMEM)
                v->oom = true;
}

/* Errors on a child path without disturbing the current one. */
#define VERR_AT(v, field, ...)                                       \
        do {                                                         \
                size_t _old = spec__path_field(&(v)->path, (field)); \
                verr((v), __VA_ARGS__);                              \
                spec__path_pop(&(v)->path, _old);                    \
        } while (0)

static void verr_invalid_str(vctx *v, const char *value, const char *detail) {
        _cleanup_free_ char *repr = spec__repr_str(value);
        verr(v, "Invalid value: %s: %s", strna(repr), detail);
}

static void check_min(vctx *v, const char *field, int64_t value, int64_t min) {
        if (value != SPEC_UNSET && value != SPEC_UNSET64 && value < min)
                VERR_AT(v, field,
                        "Invalid value: %" PRId64 ": must be greater than or equal to %" PRId64,
                        value, min);
}

static void check_dns_label(vctx *v, const char *field, const char *value, size_t max,
                            const char *why) {
        size_t old = spec__path_field(&v->path, field);

        if (!value)
                verr(v, "Required value");
        else if (!is_dns1123_label(value) && (strlen(value) <= SPEC_DNS_LABEL_MAX || !*value))
                verr_invalid_str(v, value, DNS1123_LABEL_MSG);
        else if (strlen(value) > max) {
                _cleanup_free_ char *detail = strprintf("must be no more than %zu characters%s",
                                                        max, why ?: "");
                verr_invalid_str(v, value, detail ?: "too long");
        }
        spec__path_pop(&v->path, old);
}

static void check_labels(vctx *v, const char *field, const spec_map *m) {
        size_t old = spec__path_field(&v->path, field);

        for (size_t i = 0; i < m->n; i++) {
                _cleanup_free_ char *kp = label_key_problems(m->items[i].key);
                const char *vp = label_value_problem(m->items[i].value);
                if (kp)
                        verr_invalid_str(v, m->items[i].key, kp);
                if (vp)
                        verr_invalid_str(v, m->items[i].value, vp);
        }
        spec__path_pop(&v->path, old);
}

#define ANNOTATIONS_MAX (256 * 1024)

/* on_template: the pod template's annotations, not the Deployment's (tend's
 * own annotations each belong on one of the two). */
static void check_annotations(vctx *v, const char *field, const spec_map *m, spec_ann_where where) {
        size_t old = spec__path_field(&v->path, field), total = 0;

        for (size_t i = 0; i < m->n; i++) {
                _cleanup_free_ char *kp = label_key_problems(m->items[i].key), *tp = NULL;
                if (kp)
                        verr_invalid_str(v, m->items[i].key, kp);
                else if (spec_tend_annotation_problem(m->items[i].key, m->items[i].value, where,
                                                      &tp) < 0) {
                        size_t o = spec__path_key(&v->path, m->items[i].key);
                        if (tp)
                                verr(v, "%s", tp);
                        else
                                v->oom = true;
                        spec__path_pop(&v->path, o);
                }
                total += strlen(m->items[i].key) + strlen(m->items[i].value);
        }
        if (total > ANNOTATIONS_MAX)
                verr(v, "Too long: must have at most %d bytes", ANNOTATIONS_MAX);
        spec__path_pop(&v->path, old);
}

/* ---- selectors -------------------------------------------------------------------------- */

static void check_selector(vctx *v, const spec_selector *s) {
        size_t old;

        check_labels(v, "matchLabels", &s->match_labels);
        old = spec__path_field(&v->path, "matchExpressions");
        for (size_t i = 0; i < s->n_match_expressions; i++) {
                const spec_requirement *r = &s->match_expressions[i];
                size_t o2 = spec__path_index(&v->path, i);
                bool has_values = strv_length(r->values) > 0;

                if (!r->key)
                        VERR_AT(v, "key", "Required value");
                else {
                        _cleanup_free_ char *kp = label_key_problems(r->key);
                        if (kp) {
                                size_t o3 = spec__path_field(&v->path, "key");
                                verr_invalid_str(v, r->key, kp);
                                spec__path_pop(&v->path, o3);
                        }
                }
                if (r->op < 0)
                        VERR_AT(v, "operator", "Required value");
                else if ((r->op == SPEC_OP_IN || r->op == SPEC_OP_NOT_IN) && !has_values)
                        VERR_AT(v, "values",
                                "Required value: must be specified when `operator` is 'In' or "
                                "'NotIn'");
                else if ((r->op == SPEC_OP_EXISTS || r->op == SPEC_OP_DOES_NOT_EXIST) && has_values)
                        VERR_AT(v, "values",
                                "Forbidden: may not be specified when `operator` is 'Exists' or "
                                "'DoesNotExist'");
                for (size_t k = 0; r->values && r->values[k]; k++) {
                        const char *vp = label_value_problem(r->values[k]);
                        if (vp) {
                                size_t o3 = spec__path_field(&v->path, "values");
                                size_t o4 = spec__path_index(&v->path, k);
                                verr_invalid_str(v, r->values[k], vp);
                                spec__path_pop(&v->path, o4);
                                spec__path_pop(&v->path, o3);
                        }
                }
                spec__path_pop(&v->path, o2);
        }
        spec__path_pop(&v->path, old);
}

int spec__validate_selector(const spec_selector *s, spec_path *p, spec_errors *errs) {
        vctx v = { .errs = errs, .path = *p };
        size_t before = errs->n;

        check_selector(&v, s);
        if (v.oom)
                return -ENOMEM;
        return errs->n > before ? -EINVAL : 0;
}

char *spec__selector_repr(const spec_selector *s) {
        json_t *j = spec_encode(&spec_type_selector, s);
        char *r = j ? spec_json_dump_canonical(j) : NULL;
        json_decref(j);
        return r;
}

/* Go's %#v of a map[string]string, as Kubernetes prints template labels. */
static char *go_map_repr(const spec_map *m) {
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(16 * 1024);

        (void) tend_buf_adds(&b, "map[string]string{");
        for (size_t i = 0; i < m->n; i++) {
                _cleanup_free_ char *k = spec__repr_str(m->items[i].key);
                _cleanup_free_ char *val = spec__repr_str(m->items[i].value);
                (void) tend_buf_addf(&b, "%s%s:%s", i ? ", " : "", strna(k), strna(val));
        }
        (void) tend_buf_adds(&b, "}");
        return tend_buf_take(&b);
}

/* ---- pod template ----------------------------------------------------------------------- */

static bool is_env_name(const char *s) {
        if (!*s || isdigit((unsigned char) s[0]))
                return false;
        for (const char *c = s; *c; c++)
                if (!isalnum((unsigned char) *c) && !strchr("-._", *c))
                        return false;
        return true;
}

/* RFC 7230 token characters. */
static bool is_http_header_name(const char *s) {
        if (!*s)
                return false;
        for (const char *c = s; *c; c++)
                if (!isalnum((unsigned char) *c) && !strchr("!#$%&'*+-.^_`|~", *c))
                        return false;
        return true;
}

static void check_port_ref(vctx *v, const spec_intstr *port, const spec_container *c) {
        size_t old = spec__path_field(&v->path, "port");

        if (!spec_intstr_is_set(port))
                verr(v, "Required value");
        else if (!port->str) {
                if (port->num < 1 || port->num > 65535)
                        verr(v, "Invalid value: %d: must be between 1 and 65535, inclusive",
                             port->num);
        } else {
                const char *p = spec__port_name_problem(port->str);
                bool found = is_leased(v, port->str);
                for (size_t i = 0; i < c->n_ports; i++)
                        if (streq_ptr(c->ports[i].name, port->str))
                                found = true;
                if (p)
                        verr_invalid_str(v, port->str, p);
                else if (!found)
                        verr_invalid_str(v, port->str,
                                         "must be the name of one of the container's ports "
                                         "(or of a port in tend.io/lease-ports)");
        }
        spec__path_pop(&v->path, old);
}

static void check_probe(vctx *v, const char *field, const spec_probe *p, const spec_container *c,
                        bool liveness) {
        size_t old;
        int handlers;

        if (!p)
                return;
        old = spec__path_field(&v->path, field);
        handlers = !!p->exec + !!p->http_get + !!p->tcp_socket;
        if (handlers == 0)
                verr(v, "Required value: must specify a handler type (exec, httpGet or "
                        "tcpSocket)");
        else if (handlers > 1)
                verr(v, "Forbidden: may not specify more than 1 handler type");

        if (p->exec && strv_length(p->exec->command) == 0)
                VERR_AT(v, "exec.command", "Required value");
        if (p->http_get) {
                const spec_http_get *h = p->http_get;
                size_t o2 = spec__path_field(&v->path, "httpGet");

                check_port_ref(v, &h->port, c);
                if (h->path && h->path[0] != '/') {
                        size_t o3 = spec__path_field(&v->path, "path");
                        verr_invalid_str(v, h->path, "must start with \"/\"");
                        spec__path_pop(&v->path, o3);
                }
                if (h->scheme && !streq(h->scheme, "HTTP") && !streq(h->scheme, "HTTPS")) {
                        _cleanup_free_ char *repr = spec__repr_str(h->scheme);
                        VERR_AT(v, "scheme",
                                "Unsupported value: %s: supported values: \"HTTP\", \"HTTPS\"",
                                strna(repr));
                }
                for (size_t i = 0; i < h->n_http_headers; i++) {
                        const spec_http_header *hh = &h->http_headers[i];
                        size_t o3 = spec__path_field(&v->path, "httpHeaders");
                        size_t o4 = spec__path_index(&v->path, i);
                        if (!hh->name)
                                VERR_AT(v, "name", "Required value");
                        else if (!is_http_header_name(hh->name)) {
                                size_t o5 = spec__path_field(&v->path, "name");
                                verr_invalid_str(v, hh->name,
                                                 "a valid HTTP header must consist "
                                                 "of alphanumeric characters or "
                                                 "'-' (and the other RFC 7230 "
                                                 "token characters)");
                                spec__path_pop(&v->path, o5);
                        }
                        if (hh->value && strpbrk(hh->value, "\r\n")) {
                                size_t o5 = spec__path_field(&v->path, "value");
                                verr_invalid_str(v, hh->value, "must not contain line breaks");
                                spec__path_pop(&v->path, o5);
                        }
                        spec__path_pop(&v->path, o4);
                        spec__path_pop(&v->path, o3);
                }
                spec__path_pop(&v->path, o2);
        }
        if (p->tcp_socket) {
                size_t o2 = spec__path_field(&v->path, "tcpSocket");
                check_port_ref(v, &p->tcp_socket->port, c);
                spec__path_pop(&v->path, o2);
        }

        check_min(v, "initialDelaySeconds", p->initial_delay_seconds, 0);
        check_min(v, "timeoutSeconds", p->timeout_seconds, 1);
        check_min(v, "periodSeconds", p->period_seconds, 1);
        check_min(v, "successThreshold", p->success_threshold, 1);
        check_min(v, "failureThreshold", p->failure_threshold, 1);
        if (liveness && p->success_threshold != SPEC_UNSET && p->success_threshold != 1 &&
            p->success_threshold >= 1)
                VERR_AT(v, "successThreshold", "Invalid value: %d: must be 1",
                        p->success_threshold);
        check_min(v, "terminationGracePeriodSeconds", p->termination_grace_period_seconds, 1);
        spec__path_pop(&v->path, old);
}

static void check_security_context(vctx *v, const spec_security_context *sc) {
        static const char *const names[] = { "runAsUser", "runAsGroup" };
        const int64_t vals[] = { sc->run_as_user, sc->run_as_group };

        for (size_t i = 0; i < 2; i++)
                if (vals[i] != SPEC_UNSET64 && (vals[i] < 0 || vals[i] > INT32_MAX)) {
                        size_t o = spec__path_field(&v->path, "securityContext");
                        VERR_AT(v, names[i],
                                "Invalid value: %" PRId64 ": must be between 0 and 2147483647, "
                                "inclusive",
                                vals[i]);
                        spec__path_pop(&v->path, o);
                }
}

static void check_quantity(vctx *v, const char *name, const spec_quantity *q) {
        if (!q->text)
                return;
        if (q->milli <= 0) {
                size_t o = spec__path_key(&v->path, name);
                _cleanup_free_ char *repr = spec__repr_str(q->text);
                verr(v, "Invalid value: %s: must be greater than 0", strna(repr));
                spec__path_pop(&v->path, o);
        }
}

static const char *const reserved_env[] = { "POD_NAME", "POD_NAMESPACE", "POD_UID", NULL };

bool spec_is_env_name(const char *s) {
        return s && is_env_name(s);
}

bool spec_env_reserved(const char *name) {
        return strv_contains((char **) reserved_env, name);
}

static const char *config_key_problem(const char *k);

/* A ConfigMap's or a Secret's name and key (configMapKeyRef,
 * secretKeyRef; key NULL: envFrom's, by name only). */
static void check_object_ref(vctx *v, const char *field, const char *name, const char *key,
                             bool has_key) {
        size_t o = spec__path_field(&v->path, field);

        if (isempty(name))
                VERR_AT(v, "name", "Required value");
        else if (!spec_is_dns_subdomain(name)) {
                size_t o2 = spec__path_field(&v->path, "name");
                verr_invalid_str(v, name, DNS1123_SUBDOMAIN_MSG);
                spec__path_pop(&v->path, o2);
        }
        if (has_key && isempty(key))
                VERR_AT(v, "key", "Required value");
        else if (has_key && config_key_problem(key)) {
                size_t o2 = spec__path_field(&v->path, "key");
                verr_invalid_str(v, key, config_key_problem(key));
                spec__path_pop(&v->path, o2);
        }
        spec__path_pop(&v->path, o);
}

/* fieldRef: the pod's fields a process may be given (Kubernetes' list,
 * but spec.serviceAccountName: tend has no service accounts). */
static void check_field_ref(vctx *v, const spec_field_ref *f) {
        static const char *const paths[] = { "metadata.name", "metadata.namespace",
                                             "metadata.uid",  "spec.nodeName",
                                             "status.hostIP", "status.hostIPs",
                                             "status.podIP",  "status.podIPs" };
        const char *p = f->field_path;
        size_t o = spec__path_field(&v->path, "fieldRef");
        bool ok = false;

        if (f->api_version && !streq(f->api_version, "v1")) {
                _cleanup_free_ char *repr = spec__repr_str(f->api_version);
                VERR_AT(v, "apiVersion", "Unsupported value: %s: supported values: \"v1\"",
                        strna(repr));
        }
        for (size_t i = 0; p && i < ELEMENTSOF(paths); i++)
                ok = ok || streq(p, paths[i]);
        /* metadata.labels['KEY'], metadata.annotations['KEY'] */
        const char *rest = p ? startswith(p, "metadata.labels['")
                                           ?: startswith(p, "metadata.annotations['")
                             : NULL;
        if (rest) {
                size_t n = strlen(rest);
                _cleanup_free_ char *key = n >= 2 && streq(rest + n - 2, "']")
                                                   ? strndup(rest, n - 2)
                                                   : NULL;
                _cleanup_free_ char *kp = key ? label_key_problems(key) : NULL;
                ok = key && !kp;
        }
        if (isempty(p))
                VERR_AT(v, "fieldPath", "Required value");
        else if (!ok) {
                _cleanup_free_ char *repr = spec__repr_str(p);
                VERR_AT(v, "fieldPath",
                        "Unsupported value: %s: supported values: \"metadata.annotations['KEY']\", "
                        "\"metadata.labels['KEY']\", \"metadata.name\", \"metadata.namespace\", "
                        "\"metadata.uid\", \"spec.nodeName\", \"status.hostIP\", "
                        "\"status.hostIPs\", \"status.podIP\", \"status.podIPs\"%s",
                        strna(repr),
                        streq(p, "spec.serviceAccountName") ? " (tend has no service accounts)"
                                                            : "");
        }
        spec__path_pop(&v->path, o);
}

/* resourceFieldRef: the container's limits (tend has no requests), in
 * units of divisor (cpu: 1 or 1m; memory: a power of 1000 or 1024). */
static void check_resource_field_ref(vctx *v, const spec_resource_field_ref *r,
                                     const spec_container *c) {
        size_t o = spec__path_field(&v->path, "resourceFieldRef");
        bool cpu = streq_ptr(r->resource, "limits.cpu"),
             memory = streq_ptr(r->resource, "limits.memory");

        if (r->container_name && !streq_ptr(r->container_name, c->name)) {
                _cleanup_free_ char *repr = spec__repr_str(r->container_name);
                VERR_AT(v, "containerName",
                        "Invalid value: %s: must be the container's name (a pod has one)",
                        strna(repr));
        }
        if (isempty(r->resource))
                VERR_AT(v, "resource", "Required value");
        else if (!cpu && !memory) {
                _cleanup_free_ char *repr = spec__repr_str(r->resource);
                VERR_AT(v, "resource",
                        "Unsupported value: %s: supported values: \"limits.cpu\", "
                        "\"limits.memory\" (tend has no requests, nor ephemeral storage)",
                        strna(repr));
        }
        if (r->divisor.text) {
                static const char *const cpu_ok[] = { "1", "1m", NULL }, *const mem_ok[] = {
                        "1",   "1k",  "1M",  "1G",  "1T",  "1P",  "1E",
                        "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei", NULL
                };
                if ((cpu && !strv_contains((char **) cpu_ok, r->divisor.text)) ||
                    (memory && !strv_contains((char **) mem_ok, r->divisor.text))) {
                        _cleanup_free_ char *repr = spec__repr_str(r->divisor.text);
                        VERR_AT(v, "divisor",
                                "Invalid value: %s: only divisor's values %s are supported with "
                                "the %s resource",
                                strna(repr),
                                cpu ? "1m and 1"
                                    : "1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, "
                                      "1Pi and 1Ei",
                                cpu ? "cpu" : "memory");
                }
        }
        spec__path_pop(&v->path, o);
}

static void check_env_source(vctx *v, const spec_env_var *e, const spec_container *c) {
        const spec_env_source *s = e->value_from;
        size_t o = spec__path_field(&v->path, "valueFrom");
        int n = !!s->config_map_key_ref + !!s->secret_key_ref + !!s->field_ref +
                !!s->resource_field_ref;

        if (!isempty(e->value))
                verr(v, "Invalid value: \"\": may not be specified when `value` is not empty");
        if (n == 0)
                verr(v, "Invalid value: \"\": must specify one of: `fieldRef`, "
                        "`resourceFieldRef`, `configMapKeyRef` or `secretKeyRef`");
        else if (n > 1)
                verr(v,
                     "Invalid value: \"\": may not have more than one field specified at a time");
        if (s->config_map_key_ref)
                check_object_ref(v, "configMapKeyRef", s->config_map_key_ref->name,
                                 s->config_map_key_ref->key, true);
        if (s->secret_key_ref)
                check_object_ref(v, "secretKeyRef", s->secret_key_ref->name, s->secret_key_ref->key,
                                 true);
        if (s->field_ref)
                check_field_ref(v, s->field_ref);
        if (s->resource_field_ref)
                check_resource_field_ref(v, s->resource_field_ref, c);
        spec__path_pop(&v->path, o);
}

static void check_env_from(vctx *v, const spec_container *c) {
        size_t old = spec__path_field(&v->path, "envFrom");

        for (size_t i = 0; i < c->n_env_from; i++) {
                const spec_env_from *f = &c->env_from[i];
                size_t o = spec__path_index(&v->path, i);
                int n = !!f->config_map_ref + !!f->secret_ref;
                if (n == 0)
                        verr(v, "Invalid value: \"\": must specify one of: `configMapRef` or "
                                "`secretRef`");
                else if (n > 1)
                        verr(v, "Invalid value: \"\": may not have more than one field specified "
                                "at a time");
                if (f->config_map_ref)
                        check_object_ref(v, "configMapRef", f->config_map_ref->name, NULL, false);
                if (f->secret_ref)
                        check_object_ref(v, "secretRef", f->secret_ref->name, NULL, false);
                if (!isempty(f->prefix) && !is_env_name(f->prefix)) {
                        size_t o2 = spec__path_field(&v->path, "prefix");
                        verr_invalid_str(v, f->prefix, ENV_NAME_MSG);
                        spec__path_pop(&v->path, o2);
                }
                spec__path_pop(&v->path, o);
        }
        spec__path_pop(&v->path, old);
}

static void check_container(vctx *v, const spec_container *c) {
        _cleanup_(tend_hashmap_freep) tend_hashmap *env_names = tend_hashmap_new();
        _cleanup_(tend_hashmap_freep) tend_hashmap *port_names = tend_hashmap_new();
        _cleanup_(tend_hashmap_freep) tend_hashmap *port_numbers = tend_hashmap_new();
        size_t old;

        check_dns_label(v, "name", c->name, SPEC_DNS_LABEL_MAX, NULL);

        if (strv_length(c->command) == 0)
                VERR_AT(v, "command",
                        "Required value: tend runs this argv directly (no image, no shell), "
                        "e.g. command: [\"/usr/bin/python3\", \"-m\", \"http.server\"]");
        else if (isempty(c->command[0])) {
                size_t o = spec__path_field(&v->path, "command");
                size_t o2 = spec__path_index(&v->path, 0);
                verr(v, "Invalid value: \"\": must be the path of a program");
                spec__path_pop(&v->path, o2);
                spec__path_pop(&v->path, o);
        }

        old = spec__path_field(&v->path, "env");
        for (size_t i = 0; i < c->n_env; i++) {
                const char *name = c->env[i].name;
                size_t o = spec__path_index(&v->path, i);
                size_t o2 = spec__path_field(&v->path, "name");

                if (!name)
                        verr(v, "Required value");
                else if (!is_env_name(name))
                        verr_invalid_str(v, name, ENV_NAME_MSG);
                else if (strv_contains((char **) reserved_env, name))
                        verr(v, "Forbidden: %s is set by tend for every pod", name);
                else if (seen_before(v, env_names, name)) {
                        _cleanup_free_ char *repr = spec__repr_str(name);
                        verr(v, "Duplicate value: %s", strna(repr));
                }
                spec__path_pop(&v->path, o2);
                if (c->env[i].value_from)
                        check_env_source(v, &c->env[i], c);
                spec__path_pop(&v->path, o);
        }
        spec__path_pop(&v->path, old);
        check_env_from(v, c);

        if (c->working_dir && c->working_dir[0] != '/') {
                size_t o = spec__path_field(&v->path, "workingDir");
                verr_invalid_str(v, c->working_dir, "must be an absolute path");
                spec__path_pop(&v->path, o);
        }

        old = spec__path_field(&v->path, "ports");
        for (size_t i = 0; i < c->n_ports; i++) {
                const spec_container_port *p = &c->ports[i];
                size_t o = spec__path_index(&v->path, i);

                if (p->name) {
                        const char *prob = spec__port_name_problem(p->name);
                        size_t o2 = spec__path_field(&v->path, "name");
                        if (prob)
                                verr_invalid_str(v, p->name, prob);
                        else if (seen_before(v, port_names, p->name)) {
                                _cleanup_free_ char *repr = spec__repr_str(p->name);
                                verr(v, "Duplicate value: %s", strna(repr));
                        }
                        spec__path_pop(&v->path, o2);
                }
                if (p->container_port == SPEC_UNSET)
                        VERR_AT(v, "containerPort",
                                "Required value: a port tendd leases is named in the pod "
                                "template's tend.io/lease-ports annotation instead");
                else if (p->container_port < 1 || p->container_port > 65535)
                        VERR_AT(v, "containerPort",
                                "Invalid value: %d: must be between 1 and 65535, inclusive (or "
                                "name the port in the pod template's tend.io/lease-ports "
                                "annotation to have tend lease a free one)",
                                p->container_port);
                else {
                        /* (an unset protocol is not TCP here: as the pairwise
                         * check was) */
                        _cleanup_free_ char *key = strprintf("%d/%s", p->container_port,
                                                             strempty(p->protocol));
                        if (!key)
                                v->oom = true;
                        else if (seen_before(v, port_numbers, key))
                                VERR_AT(v, "containerPort", "Duplicate value: %d/%s",
                                        p->container_port, strna(p->protocol));
                }
                if (p->protocol && !streq(p->protocol, "TCP") && !streq(p->protocol, "UDP")) {
                        _cleanup_free_ char *repr = spec__repr_str(p->protocol);
                        VERR_AT(v, "protocol",
                                "Unsupported value: %s: supported values: \"TCP\", \"UDP\"",
                                strna(repr));
                }
                if (p->name && is_leased(v, p->name))
                        VERR_AT(v, "name",
                                "Duplicate value: \"%s\": the pod template's tend.io/lease-ports "
                                "leases a port of that name: a port is leased or fixed, not both",
                                p->name);
                spec__path_pop(&v->path, o);
        }
        spec__path_pop(&v->path, old);

        check_probe(v, "readinessProbe", c->readiness_probe, c, false);
        check_probe(v, "livenessProbe", c->liveness_probe, c, true);

        old = spec__path_field(&v->path, "resources");
        {
                size_t o = spec__path_field(&v->path, "limits");
                check_quantity(v, "cpu", &c->resources.limits.cpu);
                check_quantity(v, "memory", &c->resources.limits.memory);
                spec__path_pop(&v->path, o);
        }
        spec__path_pop(&v->path, old);

        check_security_context(v, &c->security_context);
}

/* ---- volumes ----------------------------------------------------------------------- */

/* A file's mode (defaultMode, items[].mode), as Kubernetes bounds it. */
static void check_file_mode(vctx *v, const char *field, int32_t mode) {
        if (mode != SPEC_UNSET && (mode < 0 || mode > 0777))
                VERR_AT(v, field,
                        "Invalid value: %" PRId32 ": must be a number between 0 and 0777 "
                        "(octal), both inclusive",
                        mode);
}

/* A path inside a volume (items[].path, subPath): relative, and never
 * out of it. NULL: fine. */
static const char *local_path_problem(const char *p) {
        if (p[0] == '/')
                return "must be a relative path";
        for (const char *s = p; *s;) {
                size_t n = strcspn(s, "/");
                if (n == 2 && s[0] == '.' && s[1] == '.')
                        return "must not contain '..'";
                s += n;
                s += *s == '/';
        }
        return NULL;
}

static void check_object_volume(vctx *v, const char *field, const char *name_field,
                                const spec_object_volume *o) {
        size_t old = spec__path_field(&v->path, field);
        _cleanup_(tend_hashmap_freep) tend_hashmap *paths = tend_hashmap_new();

        if (isempty(o->name))
                VERR_AT(v, name_field, "Required value");
        else if (!spec_is_dns_subdomain(o->name)) {
                size_t o2 = spec__path_field(&v->path, name_field);
                verr_invalid_str(v, o->name, DNS1123_SUBDOMAIN_MSG);
                spec__path_pop(&v->path, o2);
        }
        check_file_mode(v, "defaultMode", o->default_mode);
        for (size_t i = 0; i < o->n_items; i++) {
                const spec_key_to_path *k = &o->items[i];
                size_t o1 = spec__path_field(&v->path, "items");
                size_t o2 = spec__path_index(&v->path, i);
                const char *prob;

                if (isempty(k->key))
                        VERR_AT(v, "key", "Required value");
                else if ((prob = config_key_problem(k->key))) {
                        size_t o3 = spec__path_field(&v->path, "key");
                        verr_invalid_str(v, k->key, prob);
                        spec__path_pop(&v->path, o3);
                }
                if (isempty(k->path))
                        VERR_AT(v, "path", "Required value");
                else {
                        size_t o3 = spec__path_field(&v->path, "path");
                        if ((prob = local_path_problem(k->path)))
                                verr_invalid_str(v, k->path, prob);
                        else if (startswith(k->path, ".."))
                                verr_invalid_str(v, k->path, "must not start with '..'");
                        else if (seen_before(v, paths, k->path)) {
                                _cleanup_free_ char *repr = spec__repr_str(k->path);
                                verr(v, "Duplicate value: %s", strna(repr));
                        }
                        spec__path_pop(&v->path, o3);
                }
                check_file_mode(v, "mode", k->mode);
                spec__path_pop(&v->path, o2);
                spec__path_pop(&v->path, o1);
        }
        spec__path_pop(&v->path, old);
}

static void check_empty_dir(vctx *v, const spec_empty_dir *e) {
        size_t old = spec__path_field(&v->path, "emptyDir");
        bool memory = streq_ptr(e->medium, "Memory");

        if (!isempty(e->medium) && !memory) {
                _cleanup_free_ char *repr = spec__repr_str(e->medium);
                VERR_AT(v, "medium", "Unsupported value: %s: supported values: \"\", \"Memory\"",
                        strna(repr));
        }
        if (e->size_limit.text) {
                _cleanup_free_ char *repr = spec__repr_str(e->size_limit.text);
                if (e->size_limit.value <= 0)
                        VERR_AT(v, "sizeLimit", "Invalid value: %s: must be greater than 0",
                                strna(repr));
                else if (!memory)
                        VERR_AT(v, "sizeLimit",
                                "Forbidden: tend holds an emptyDir to its size only on medium: "
                                "Memory (a tmpfs of that size); set medium: Memory, or remove "
                                "sizeLimit");
        }
        spec__path_pop(&v->path, old);
}

static void check_volumes(vctx *v, const spec_pod_spec *s) {
        _cleanup_(tend_hashmap_freep) tend_hashmap *names = tend_hashmap_new();
        size_t old = spec__path_field(&v->path, "volumes");

        for (size_t i = 0; i < s->n_volumes; i++) {
                const spec_volume *vol = &s->volumes[i];
                size_t o = spec__path_index(&v->path, i);
                int n = !!vol->config_map + !!vol->secret + !!vol->empty_dir;

                check_dns_label(v, "name", vol->name, SPEC_DNS_LABEL_MAX, NULL);
                if (vol->name && seen_before(v, names, vol->name)) {
                        _cleanup_free_ char *repr = spec__repr_str(vol->name);
                        VERR_AT(v, "name", "Duplicate value: %s", strna(repr));
                }
                if (n == 0)
                        verr(v, "Required value: must specify a volume type (configMap, secret "
                                "or emptyDir)");
                else if (n > 1)
                        verr(v, "Forbidden: may not specify more than 1 volume type");
                if (vol->config_map)
                        check_object_volume(v, "configMap", "name", vol->config_map);
                if (vol->secret)
                        check_object_volume(v, "secret", "secretName", vol->secret);
                if (vol->empty_dir)
                        check_empty_dir(v, vol->empty_dir);
                spec__path_pop(&v->path, o);
        }
        spec__path_pop(&v->path, old);
}

/* A mount point: absolute, not the root, nothing that climbs. */
static const char *mount_path_problem(const char *p) {
        if (p[0] != '/')
                return "must be an absolute path (a pod sees the host's filesystem)";
        if (p[strspn(p, "/")] == 0)
                return "must not be the root directory";
        return local_path_problem(p + 1);
}

/* The path is the container's. */
static void check_volume_mounts(vctx *v, const spec_container *c, const spec_pod_spec *s) {
        _cleanup_(tend_hashmap_freep) tend_hashmap *paths = tend_hashmap_new();
        size_t old = spec__path_field(&v->path, "volumeMounts");

        for (size_t i = 0; i < c->n_volume_mounts; i++) {
                const spec_volume_mount *m = &c->volume_mounts[i];
                size_t o = spec__path_index(&v->path, i);
                bool found = false;
                const char *prob;

                for (size_t k = 0; m->name && k < s->n_volumes; k++)
                        found = found || streq_ptr(s->volumes[k].name, m->name);
                if (isempty(m->name))
                        VERR_AT(v, "name", "Required value");
                else if (!found) {
                        _cleanup_free_ char *repr = spec__repr_str(m->name);
                        VERR_AT(v, "name", "Not found: %s", strna(repr));
                }
                if (isempty(m->mount_path))
                        VERR_AT(v, "mountPath", "Required value");
                else {
                        size_t o2 = spec__path_field(&v->path, "mountPath");
                        _cleanup_free_ char *norm = strdup(m->mount_path);
                        size_t n = norm ? strlen(norm) : 0;
                        while (n > 1 && norm[n - 1] == '/')
                                norm[--n] = 0; /* "/etc/app/" is "/etc/app" */
                        if ((prob = mount_path_problem(m->mount_path)))
                                verr_invalid_str(v, m->mount_path, prob);
                        else if (!norm)
                                v->oom = true;
                        else if (seen_before(v, paths, norm))
                                verr_invalid_str(v, m->mount_path, "must be unique");
                        spec__path_pop(&v->path, o2);
                }
                if (m->sub_path && (prob = local_path_problem(m->sub_path))) {
                        size_t o2 = spec__path_field(&v->path, "subPath");
                        verr_invalid_str(v, m->sub_path, prob);
                        spec__path_pop(&v->path, o2);
                }
                spec__path_pop(&v->path, o);
        }
        spec__path_pop(&v->path, old);
}

static void check_pod_spec(vctx *v, const spec_pod_spec *s) {
        size_t old = spec__path_field(&v->path, "containers");

        if (s->n_containers == 0)
                verr(v, "Required value: a pod runs exactly one container (one process)");
        else if (s->n_containers > 1)
                verr(v,
                     "Too many: %zu: must have at most 1 items (tend runs one process per "
                     "pod; make a deployment per program)",
                     s->n_containers);
        for (size_t i = 0; i < s->n_containers; i++) {
                size_t o = spec__path_index(&v->path, i);
                check_container(v, &s->containers[i]);
                check_volume_mounts(v, &s->containers[i], s);
                spec__path_pop(&v->path, o);
        }
        spec__path_pop(&v->path, old);

        check_min(v, "terminationGracePeriodSeconds", s->termination_grace_period_seconds, 0);
        if (s->restart_policy >= 0 && s->restart_policy != SPEC_RESTART_ALWAYS)
                VERR_AT(v, "restartPolicy",
                        "Unsupported value: \"%s\": supported values: \"Always\"",
                        spec_restart_policy_to_string(s->restart_policy));
        if (s->node_name)
                VERR_AT(v, "nodeName", "Forbidden: set by tend when it runs the pod; remove it");
        check_labels(v, "nodeSelector", &s->node_selector);
        check_security_context(v, &s->security_context);
        check_volumes(v, s);
}

/* tend.io/lease-ports (its own form is checked with the other
 * annotations): noted for the probes that name its ports; no more ports
 * than a pod may have. The path is the template's metadata. */
static void leased_ports(vctx *v, const spec_pod_template *t) {
        const char *value = spec_map_get(&t->metadata.annotations, SPEC_ANN_LEASE_PORTS);
        _cleanup_free_ char *problem = NULL;
        size_t fixed = 0, old;

        v->n_leased = 0;
        if (!value || spec_lease_ports_parse(value, v->leased, &v->n_leased, &problem) < 0) {
                v->n_leased = 0;
                return;
        }
        for (size_t i = 0; i < t->spec.n_containers; i++)
                fixed += t->spec.containers[i].n_ports;
        if (fixed + v->n_leased > SPEC_LEASE_PORTS_MAX) {
                old = spec__path_field(&v->path, "annotations");
                spec__path_key(&v->path, SPEC_ANN_LEASE_PORTS);
                verr(v, "Too many: %zu: a pod has at most %d ports, leased and fixed together",
                     fixed + v->n_leased, SPEC_LEASE_PORTS_MAX);
                spec__path_pop(&v->path, old);
        }
}

/* tend.io/listen against the ports it names (its own form is checked with
 * the other annotations). The path is the annotation's. */
static void check_listen(vctx *v, const spec_pod_template *t) {
        const char *value = spec_map_get(&t->metadata.annotations, SPEC_ANN_LISTEN);
        const spec_container *c = t->spec.n_containers == 1 ? &t->spec.containers[0] : NULL;
        _cleanup_free_ char *problem = NULL, *repr = NULL;
        spec_listen l[SPEC_LISTEN_MAX];
        size_t n, old;

        if (!value || !c || spec_listen_parse(value, l, &n, &problem) < 0)
                return;
        repr = spec__repr_str(value);
        if (!repr) {
                v->oom = true;
                return;
        }
        old = spec__path_field(&v->path, "annotations");
        spec__path_key(&v->path, SPEC_ANN_LISTEN);
        if (t->spec.runtime_class_name == SPEC_RUNTIME_SYSTEMD)
                verr(v,
                     "Forbidden: held sockets need runtimeClassName \"process\": a transient "
                     "systemd unit cannot be given a socket on this systemd (ExtraFileDescriptors "
                     "came in systemd 254)");
        for (size_t i = 0; i < n; i++) {
                const spec_container_port *port = NULL;
                for (size_t k = 0; k < c->n_ports; k++)
                        if (streq_ptr(c->ports[k].name, l[i].port))
                                port = &c->ports[k];
                if (!port && is_leased(v, l[i].port))
                        verr(v,
                             "Invalid value: %s: port \"%s\" is leased (tend.io/lease-ports): "
                             "a held socket listens on a fixed port (leased ports are per pod)",
                             repr, l[i].port);
                else if (!port)
                        verr(v,
                             "Invalid value: %s: port \"%s\" is not among "
                             "spec.template.spec.containers[0].ports (name it there, with its "
                             "containerPort)",
                             repr, l[i].port);
                else if (port->protocol && !streq(port->protocol, "TCP"))
                        verr(v, "Invalid value: %s: port \"%s\" is %s: a held socket is TCP", repr,
                             l[i].port, port->protocol);
        }
        spec__path_pop(&v->path, old);
}

/* ---- Deployment ---------------------------------------------------------------------- */

static void check_intstr(vctx *v, const char *field, const spec_intstr *is, bool percent_cap) {
        size_t old = spec__path_field(&v->path, field);

        if (is->str) {
                size_t n = strlen(is->str);
                bool ok = n >= 2 && is->str[n - 1] == '%';
                for (size_t i = 0; ok && i < n - 1; i++)
                        ok = isdigit((unsigned char) is->str[i]);
                if (!ok)
                        verr_invalid_str(v, is->str,
                                         "a valid percent string must be a numeric string "
                                         "followed by an ending '%' (e.g. '1%',  or '93%', regex "
                                         "used for validation is '[0-9]+%')");
                else if (percent_cap && (n > 4 || atoi(is->str) > 100))
                        verr_invalid_str(v, is->str, "must not be greater than 100%");
        } else if (is->num != SPEC_UNSET && is->num < 0)
                verr(v, "Invalid value: %d: must be greater than or equal to 0", is->num);
        spec__path_pop(&v->path, old);
}

static bool intstr_is_zero(const spec_intstr *is) {
        if (!is->str)
                return is->num == 0;
        return atoi(is->str) == 0 && isdigit((unsigned char) is->str[0]);
}

int spec_deployment_validate(const spec_deployment *d, spec_errors *errs) {
        const spec_deployment_spec *s = &d->spec;
        size_t before = errs->n, old, selector_errors;
        bool selector_ok;
        vctx v = { .errs = errs };

        if (!d->api_version)
                VERR_AT(&v, "apiVersion", "Required value: must be \"apps/v1\"");
        else if (!streq(d->api_version, "apps/v1")) {
                _cleanup_free_ char *repr = spec__repr_str(d->api_version);
                VERR_AT(&v, "apiVersion", "Unsupported value: %s: supported values: \"apps/v1\"",
                        strna(repr));
        }
        if (!streq_ptr(d->kind, "Deployment")) {
                _cleanup_free_ char *repr = spec__repr_str(d->kind);
                VERR_AT(&v, "kind", "Unsupported value: %s: supported values: \"Deployment\"",
                        strna(repr));
        }

        /* metadata */
        old = spec__path_field(&v.path, "metadata");
        check_dns_label(&v, "name", d->metadata.name, SPEC_DEPLOYMENT_NAME_MAX,
                        " (pod names are <name>-<hash>-<5 chars> and must fit in 63)");
        if (d->metadata.namespace)
                check_dns_label(&v, "namespace", d->metadata.namespace, SPEC_DNS_LABEL_MAX, NULL);
        check_labels(&v, "labels", &d->metadata.labels);
        check_annotations(&v, "annotations", &d->metadata.annotations, SPEC_ANN_ON_DEPLOYMENT);
        spec__path_pop(&v.path, old);

        /* tend's rollout annotations that need one another (their own form
         * is checked with the other annotations) */
        {
                const spec_map *ann = &d->metadata.annotations;
                size_t o = spec__path_field(&v.path, "metadata");
                spec__path_field(&v.path, "annotations");
                if (spec_map_get(ann, SPEC_ANN_CANARY) &&
                    s->strategy.type == SPEC_STRATEGY_RECREATE) {
                        spec__path_key(&v.path, SPEC_ANN_CANARY);
                        verr(&v, "Forbidden: canaries are a step of a rolling update; with "
                                 "strategy Recreate every pod is replaced at once");
                } else if (spec_map_get(ann, SPEC_ANN_CANARY_PROMOTE_AFTER) &&
                           !spec_map_get(ann, SPEC_ANN_CANARY)) {
                        spec__path_key(&v.path, SPEC_ANN_CANARY_PROMOTE_AFTER);
                        verr(&v, "Forbidden: promotes canaries, and there are none: set %s too",
                             SPEC_ANN_CANARY);
                }
                spec__path_pop(&v.path, o);
        }

        /* spec */
        old = spec__path_field(&v.path, "spec");
        check_min(&v, "replicas", s->replicas, 0);
        check_min(&v, "minReadySeconds", s->min_ready_seconds, 0);
        check_min(&v, "revisionHistoryLimit", s->revision_history_limit, 0);
        check_min(&v, "progressDeadlineSeconds", s->progress_deadline_seconds, 0);
        if (s->progress_deadline_seconds != SPEC_UNSET && s->min_ready_seconds != SPEC_UNSET &&
            s->progress_deadline_seconds >= 0 &&
            s->progress_deadline_seconds <= s->min_ready_seconds)
                VERR_AT(&v, "progressDeadlineSeconds",
                        "Invalid value: %d: must be greater than minReadySeconds",
                        s->progress_deadline_seconds);

        {
                size_t o = spec__path_field(&v.path, "selector");
                selector_errors = errs->n;
                if (!s->selector)
                        verr(&v, "Required value");
                else if (spec_selector_is_empty(s->selector))
                        verr(&v, "Invalid value: {}: empty selector is invalid for deployment");
                else
                        check_selector(&v, s->selector);
                selector_ok = errs->n == selector_errors;
                spec__path_pop(&v.path, o);
        }

        old = spec__path_field(&v.path, "template");
        {
                size_t o = spec__path_field(&v.path, "metadata");
                size_t errs_before = errs->n;
                check_labels(&v, "labels", &s->template.metadata.labels);
                check_annotations(&v, "annotations", &s->template.metadata.annotations,
                                  SPEC_ANN_ON_TEMPLATE);
                leased_ports(&v, &s->template);
                check_listen(&v, &s->template);
                if (errs->n == errs_before && selector_ok &&
                    !spec_selector_matches(s->selector, &s->template.metadata.labels)) {
                        _cleanup_free_ char *repr = go_map_repr(&s->template.metadata.labels);
                        VERR_AT(&v, "labels",
                                "Invalid value: %s: `selector` does not match template `labels`",
                                strna(repr));
                }
                spec__path_pop(&v.path, o);
        }
        {
                size_t o = spec__path_field(&v.path, "spec");
                check_pod_spec(&v, &s->template.spec);
                spec__path_pop(&v.path, o);
        }
        spec__path_pop(&v.path, old);

        old = spec__path_field(&v.path, "strategy");
        if (s->strategy.type == SPEC_STRATEGY_RECREATE && s->strategy.rolling_update)
                VERR_AT(&v, "rollingUpdate",
                        "Forbidden: may not be specified when strategy `type` is 'Recreate'");
        else if (s->strategy.type == SPEC_STRATEGY_ROLLING_UPDATE && s->strategy.rolling_update) {
                const spec_rolling_update *ru = s->strategy.rolling_update;
                size_t o = spec__path_field(&v.path, "rollingUpdate");
                size_t errs_before = errs->n;

                check_intstr(&v, "maxUnavailable", &ru->max_unavailable, true);
                check_intstr(&v, "maxSurge", &ru->max_surge, false);
                if (errs->n == errs_before && intstr_is_zero(&ru->max_unavailable) &&
                    intstr_is_zero(&ru->max_surge)) {
                        _cleanup_free_ char *repr = ru->max_unavailable.str
                                                            ? spec__repr_str(
                                                                      ru->max_unavailable.str)
                                                            : strdup("0");
                        VERR_AT(&v, "maxUnavailable",
                                "Invalid value: %s: may not be 0 when `maxSurge` is 0",
                                strna(repr));
                }
                spec__path_pop(&v.path, o);
        }
        spec__path_pop(&v.path, old);
        spec__path_pop(&v.path, 0);

        if (v.oom)
                return -ENOMEM;
        return errs->n > before || errs->dropped ? -EINVAL : 0;
}

int spec_deployment_validate_update(const spec_deployment *old_d, const spec_deployment *new_d,
                                    spec_errors *errs) {
        _cleanup_free_ char *repr = NULL;

        if (spec_equal(&spec_type_selector, old_d->spec.selector, new_d->spec.selector))
                return 0;
        repr = spec__selector_repr(new_d->spec.selector);
        return spec_errors_add(errs, "spec.selector",
                               "Invalid value: %s: field is immutable (the selector decides "
                               "which pods the deployment owns; to change it, create a "
                               "deployment with a new name and delete this one)",
                               strna(repr));
}

/* ---- ConfigMap ------------------------------------------------------------------------ */

/* A key of a ConfigMap's (or a Secret's): what the API server's
 * IsConfigMapKey takes. NULL: valid; else a static text. */
static const char *config_key_problem(const char *k) {
        size_t n = strlen(k);

        if (n > 253)
                return "must be no more than 253 characters";
        if (!n ||
            strspn(k, "-._abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != n)
                return "a valid config key must consist of alphanumeric characters, '-', '_' or "
                       "'.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for "
                       "validation is '[-._a-zA-Z0-9]+')";
        if (streq(k, "."))
                return "must not be '.'";
        if (streq(k, ".."))
                return "must not be '..'";
        if (startswith(k, ".."))
                return "must not start with '..'";
        return NULL;
}

/* What a ConfigMap and a Secret begin with: v1, their kind, a DNS-subdomain
 * name, labels, and no tend.io/ annotation (tend reads none there). */
static void check_config_head(vctx *v, const spec_object_head *h, const char *kind) {
        const spec_meta *m = &h->metadata;
        size_t old;

        if (!streq_ptr(h->api_version, "v1")) {
                _cleanup_free_ char *repr = spec__repr_str(h->api_version);
                VERR_AT(v, "apiVersion", "Unsupported value: %s: supported values: \"v1\"",
                        strna(repr));
        }
        if (!streq_ptr(h->kind, kind)) {
                _cleanup_free_ char *repr = spec__repr_str(h->kind);
                VERR_AT(v, "kind", "Unsupported value: %s: supported values: \"%s\"", strna(repr),
                        kind);
        }
        old = spec__path_field(&v->path, "metadata");
        if (!m->name)
                VERR_AT(v, "name", "Required value: name or generateName is required");
        else if (!spec_is_dns_subdomain(m->name)) {
                size_t o = spec__path_field(&v->path, "name");
                verr_invalid_str(v, m->name, DNS1123_SUBDOMAIN_MSG);
                spec__path_pop(&v->path, o);
        }
        if (m->namespace)
                check_dns_label(v, "namespace", m->namespace, SPEC_DNS_LABEL_MAX, NULL);
        check_labels(v, "labels", &m->labels);
        check_annotations(v, "annotations", &m->annotations, SPEC_ANN_ON_CONFIG);
        spec__path_pop(&v->path, old);
}

int spec_config_map_validate(const spec_config_map *c, spec_errors *errs) {
        size_t before = errs->n, old, total = 0;
        vctx v = { .errs = errs };

        check_config_head(&v, (const spec_object_head *) c, "ConfigMap");

        old = spec__path_field(&v.path, "data");
        for (size_t i = 0; i < c->data.n; i++) {
                const char *k = c->data.items[i].key, *why = config_key_problem(k);
                if (why) {
                        size_t o = spec__path_key(&v.path, k);
                        verr_invalid_str(&v, k, why);
                        spec__path_pop(&v.path, o);
                }
                total += strlen(c->data.items[i].value);
        }
        spec__path_pop(&v.path, old);
        old = spec__path_field(&v.path, "binaryData");
        for (size_t i = 0; i < c->binary_data.n; i++) {
                const char *k = c->binary_data.items[i].key, *val = c->binary_data.items[i].value,
                           *why = config_key_problem(k);
                _cleanup_free_ void *bytes = NULL;
                size_t n = 0;
                int r;
                if (why) {
                        size_t o = spec__path_key(&v.path, k);
                        verr_invalid_str(&v, k, why);
                        spec__path_pop(&v.path, o);
                } else if (spec_map_get(&c->data, k)) {
                        size_t o = spec__path_key(&v.path, k);
                        verr_invalid_str(&v, k, "duplicate of key present in data");
                        spec__path_pop(&v.path, o);
                }
                r = tend_base64_decode(val, strlen(val), &bytes, &n);
                if (r == -ENOMEM)
                        v.oom = true;
                else if (r < 0) {
                        size_t o = spec__path_key(&v.path, k);
                        verr(&v, "Invalid value: not base64: binaryData carries bytes as "
                                 "standard base64 (RFC 4648, with padding)");
                        spec__path_pop(&v.path, o);
                }
                total += n;
        }
        spec__path_pop(&v.path, old);
        if (total > SPEC_CONFIG_MAP_MAX)
                verr(&v,
                     "Too long: must have at most %d bytes (data and binaryData together: "
                     "%zu)",
                     SPEC_CONFIG_MAP_MAX, total);
        if (v.oom)
                return -ENOMEM;
        return errs->n > before || errs->dropped ? -EINVAL : 0;
}

int spec_config_map_validate_update(const spec_config_map *old_c, const spec_config_map *new_c,
                                    spec_errors *errs) {
        size_t before = errs->n;
        int r = 0;

        if (!old_c->immutable)
                return 0;
        if (!new_c->immutable)
                r = spec_errors_add(errs, "immutable",
                                    "Forbidden: field is immutable when `immutable` is set");
        if (r >= 0 && !spec_map_equal(&old_c->data, &new_c->data))
                r = spec_errors_add(errs, "data",
                                    "Forbidden: field is immutable when `immutable` is set");
        if (r >= 0 && !spec_map_equal(&old_c->binary_data, &new_c->binary_data))
                r = spec_errors_add(errs, "binaryData",
                                    "Forbidden: field is immutable when `immutable` is set");
        return r < 0 ? r : errs->n > before ? -EINVAL : 0;
}

/* ---- Secret ---------------------------------------------------------------------------- */

int spec_secret_default(spec_secret *s) {
        for (size_t i = 0; i < s->string_data.n; i++) {
                const char *v = s->string_data.items[i].value;
                _cleanup_free_ char *b64 = tend_base64_encode(v, strlen(v));
                if (!b64 || spec_map_set(&s->data, s->string_data.items[i].key, b64) < 0)
                        return -ENOMEM;
        }
        spec_map_done(&s->string_data);
        if (isempty(s->type) && free_and_strdup(&s->type, "Opaque") < 0)
                return -ENOMEM;
        return 0;
}

/* What a type of Secret must hold (the API server's checks by type). */
static void check_secret_type(vctx *v, const spec_secret *s) {
        static const struct {
                const char *type;
                const char *keys[2]; /* required; any: one of them will do */
                bool any, json;
        } types[] = {
                { .type = "kubernetes.io/tls", .keys = { "tls.crt", "tls.key" } },
                { .type = "kubernetes.io/ssh-auth", .keys = { "ssh-privatekey" } },
                { .type = "kubernetes.io/basic-auth",
                  .keys = { "username", "password" },
                  .any = true },
                { .type = "kubernetes.io/dockercfg", .keys = { ".dockercfg" }, .json = true },
                { .type = "kubernetes.io/dockerconfigjson",
                  .keys = { ".dockerconfigjson" },
                  .json = true },
        };
        size_t old;

        if (streq_ptr(s->type, "kubernetes.io/service-account-token")) {
                VERR_AT(v, "type",
                        "Unsupported value: \"kubernetes.io/service-account-token\": tend has no "
                        "service accounts (a pod is a host process, with the host's identity)");
                return;
        }
        for (size_t i = 0; i < ELEMENTSOF(types); i++) {
                bool have_any = false;
                if (!streq_ptr(s->type, types[i].type))
                        continue;
                for (size_t k = 0; k < ELEMENTSOF(types[i].keys) && types[i].keys[k]; k++)
                        have_any = have_any || spec_map_get(&s->data, types[i].keys[k]);
                old = spec__path_field(&v->path, "data");
                for (size_t k = 0; k < ELEMENTSOF(types[i].keys) && types[i].keys[k]; k++) {
                        const char *key = types[i].keys[k], *val = spec_map_get(&s->data, key);
                        size_t o = spec__path_key(&v->path, key);
                        _cleanup_free_ void *bytes = NULL;
                        size_t n = 0;
                        if (!val && !(types[i].any && have_any))
                                verr(v, "Required value");
                        else if (val && types[i].json &&
                                 tend_base64_decode(val, strlen(val), &bytes, &n) >= 0) {
                                json_error_t e;
                                json_t *j = json_loadb(bytes, n, 0, &e);
                                /* (where, never what: jansson's text quotes the
                                 * input) */
                                if (!j)
                                        verr(v,
                                             "Invalid value: \"<secret contents redacted>\": not "
                                             "JSON (at line %d, column %d)",
                                             e.line, e.column);
                                json_decref(j);
                        }
                        spec__path_pop(&v->path, o);
                }
                spec__path_pop(&v->path, old);
        }
}

int spec_secret_validate(const spec_secret *s, spec_errors *errs) {
        size_t before = errs->n, old, total = 0;
        vctx v = { .errs = errs };

        /* its defaults ran out of memory (stringData is merged, the type
         * set): nothing of it is stored */
        if (s->string_data.n || !s->type)
                return -ENOMEM;

        check_config_head(&v, (const spec_object_head *) s, "Secret");

        /* (its values are never written into an error: the keys are) */
        old = spec__path_field(&v.path, "data");
        for (size_t i = 0; i < s->data.n; i++) {
                const char *k = s->data.items[i].key, *val = s->data.items[i].value,
                           *why = config_key_problem(k);
                _cleanup_free_ void *bytes = NULL;
                size_t n = 0, o = spec__path_key(&v.path, k);
                int r;
                if (why)
                        verr_invalid_str(&v, k, why);
                r = tend_base64_decode(val, strlen(val), &bytes, &n);
                if (r == -ENOMEM)
                        v.oom = true;
                else if (r < 0)
                        verr(&v, "Invalid value: \"<secret contents redacted>\": not base64: data "
                                 "carries bytes as standard base64 (RFC 4648, with padding); "
                                 "text goes in stringData");
                spec__path_pop(&v.path, o);
                total += n;
        }
        if (total > SPEC_CONFIG_MAP_MAX)
                verr(&v, "Too long: must have at most %d bytes (%zu)", SPEC_CONFIG_MAP_MAX, total);
        spec__path_pop(&v.path, old);
        check_secret_type(&v, s);
        if (v.oom)
                return -ENOMEM;
        return errs->n > before || errs->dropped ? -EINVAL : 0;
}

int spec_secret_validate_update(const spec_secret *old_s, const spec_secret *new_s,
                                spec_errors *errs) {
        size_t before = errs->n;
        int r = 0;

        if (!streq_ptr(old_s->type, new_s->type)) {
                _cleanup_free_ char *repr = spec__repr_str(new_s->type);
                r = spec_errors_add(errs, "type", "Invalid value: %s: field is immutable",
                                    strna(repr));
        }
        if (r >= 0 && old_s->immutable && !new_s->immutable)
                r = spec_errors_add(errs, "immutable",
                                    "Forbidden: field is immutable when `immutable` is set");
        if (r >= 0 && old_s->immutable && !spec_map_equal(&old_s->data, &new_s->data))
                r = spec_errors_add(errs, "data",
                                    "Forbidden: field is immutable when `immutable` is set");
        return r < 0 ? r : errs->n > before ? -EINVAL : 0;
}

char *spec_object_label(const char *kind, const char *name, unsigned doc_index) {
        _cleanup_free_ char *lower = kind ? strdup(kind) : NULL;

        if (lower)
                for (char *c = lower; *c; c++)
                        *c = (char) tolower((unsigned char) *c);
        if (lower && name)
                return strprintf("%s \"%s\"", lower, name);
        if (lower)
                return strprintf("%s (document %u)", lower, doc_index);
        return strprintf("document %u", doc_index);
}

bool spec_is_dns_subdomain(const char *s) {
        return s && is_dns1123_subdomain(s, strlen(s));
}

bool spec_is_dns_label(const char *s) {
        return s && is_dns1123_label(s);
}

char *spec_label_problem(const char *key, const char *value) {
        _cleanup_free_ char *kp = label_key_problems(key);
        const char *vp = label_value_problem(value);

        if (kp)
                return strprintf("label key \"%s\": %s", key, kp);
        if (vp)
                return strprintf("label value \"%s\": %s", value, vp);
        return NULL;
}
