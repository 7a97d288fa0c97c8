/* SPDX-License-Identifier: MIT */

/*
 * tend's annotations: what tend adds to Kubernetes' shapes is written as
 * annotations under tend.io/, so that manifests stay valid Kubernetes; each
 * is parsed here, as strictly as a field.
 */

#include <arpa/inet.h>
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>

#include "spec-internal.h"

const spec_backoff spec_backoff_default = {
        .after = 2,
        .initial = 1 * USEC_PER_SEC,
        .max = 300 * USEC_PER_SEC,
};

#define BACKOFF_AFTER_MAX 1000
#define BACKOFF_MAX_MAX (24 * 3600 * USEC_PER_SEC)
#define BACKOFF_FORMAT                                                                 \
        "\"off\", or key=value pairs separated by commas: after=N, initial=DURATION, " \
        "max=DURATION (as \"after=2,initial=1s,max=5m\")"

static int problem(char **ret, const char *fmt, ...) _printf_(2, 3);
static int problem(char **ret, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(ret, fmt, ap) < 0)
                *ret = NULL;
        va_end(ap);
        return *ret ? -EINVAL : -ENOMEM;
}

int spec_backoff_parse(const char *s, spec_backoff *ret, char **ret_problem) {
        spec_backoff b = spec_backoff_default;
        bool seen[3] = {};
        const char *p = s;

        *ret_problem = NULL;
        if (!s) {
                *ret = b;
                return 0;
        }
        if (streq(s, "off")) {
                b.off = true;
                *ret = b;
                return 0;
        }
        if (!*s)
                return problem(ret_problem, "must be " BACKOFF_FORMAT);
        while (*p) {
                size_t klen = strcspn(p, "=,"), vlen;
                _cleanup_free_ char *key = strndup(p, klen), *value = NULL;
                int which;

                if (!key)
                        return -ENOMEM;
                if (klen == 0)
                        return problem(ret_problem, "has an empty item: must be " BACKOFF_FORMAT);
                if (p[klen] != '=')
                        return problem(ret_problem, "\"%s\" has no value: must be " BACKOFF_FORMAT,
                                       key);
                p += klen + 1;
                vlen = strcspn(p, ",");
                value = strndup(p, vlen);
                if (!value)
                        return -ENOMEM;
                p += vlen;
                bool trailing = *p == ',' && !p[1];
                if (*p == ',')
                        p++;

                if (streq(key, "after"))
                        which = 0;
                else if (streq(key, "initial"))
                        which = 1;
                else if (streq(key, "max"))
                        which = 2;
                else
                        return problem(ret_problem,
                                       "unknown key \"%s\": must be one of after, initial, max",
                                       key);
                if (seen[which])
                        return problem(ret_problem, "%s is given twice", key);
                seen[which] = true;

                if (which == 0) {
                        int64_t n;
                        if (!*value || !isdigit((unsigned char) value[0]) ||
                            safe_atoi64(value, &n) < 0 || n > BACKOFF_AFTER_MAX)
                                return problem(ret_problem,
                                               "after=%s: must be a whole number from 0 to %d "
                                               "(young deaths in a row replaced at once)",
                                               value, BACKOFF_AFTER_MAX);
                        b.after = (uint32_t) n;
                } else {
                        usec_t d;
                        if (parse_duration(value, &d) < 0 || d > BACKOFF_MAX_MAX)
                                return problem(ret_problem,
                                               "%s=%s: must be a duration from 1ms to 24h, as "
                                               "\"500ms\", \"1s\" or \"5m\"",
                                               key, value);
                        if (d < USEC_PER_MSEC)
                                return problem(ret_problem,
                                               "%s=%s: must be at least 1ms (to switch the "
                                               "back-off off, write \"off\")",
                                               key, value);
                        if (which == 1)
                                b.initial = d;
                        else
                                b.max = d;
                }
                if (trailing)
                        return problem(ret_problem, "ends with a comma");
        }
        if (b.initial > b.max) {
                char i[DURATION_MAX], m[DURATION_MAX];
                return problem(ret_problem, "initial (%s) must not be longer than max (%s)",
                               format_duration(i, b.initial), format_duration(m, b.max));
        }
        *ret = b;
        return 0;
}

/* The items of a comma-separated value, one at a time: *ret_item is a new
 * string; 0 at the end; -EINVAL with a problem for an empty item. */
static int next_item(const char **p, char **ret_item, char **ret_problem, const char *format) {
        size_t len;

        *ret_item = NULL;
        if (!**p)
                return 0;
        len = strcspn(*p, ",");
        if (len == 0)
                return problem(ret_problem, "has an empty item: must be %s", format);
        *ret_item = strndup(*p, len);
        if (!*ret_item)
                return -ENOMEM;
        *p += len;
        if (**p == ',') {
                (*p)++;
                if (!**p) {
                        free(*ret_item);
                        *ret_item = NULL;
                        return problem(ret_problem, "ends with a comma");
                }
        }
        return 1;
}

/* A duration from 10ms to 24h. */
static int duration_item(const char *key, const char *value, usec_t *ret, char **ret_problem) {
        usec_t d;

        if (parse_duration(value, &d) < 0 || d > BACKOFF_MAX_MAX || d < 10 * USEC_PER_MSEC)
                return problem(ret_problem,
                               "%s=%s: must be a duration from 10ms to 24h, as \"500ms\", "
                               "\"10s\" or \"5m\"",
                               key, value);
        *ret = d;
        return 0;
}

#define LISTEN_FORMAT                                                                   \
        "container port names separated by commas, each with \"@ADDRESS\" to bind one " \
        "address only (as \"http\" or \"http@127.0.0.1,admin@::1\")"

int spec_listen_parse(const char *s, spec_listen ret[static SPEC_LISTEN_MAX], size_t *ret_n,
                      char **ret_problem) {
        const char *p = s;
        size_t n = 0;
        int r;

        *ret_problem = NULL;
        *ret_n = 0;
        if (!s || !*s)
                return problem(ret_problem, "must be " LISTEN_FORMAT);
        for (;;) {
                _cleanup_free_ char *item = NULL;
                const char *at, *addr = "";
                size_t nlen;

                r = next_item(&p, &item, ret_problem, LISTEN_FORMAT);
                if (r <= 0)
                        break;
                at = strchr(item, '@');
                nlen = at ? (size_t) (at - item) : strlen(item);
                if (at)
                        addr = at + 1;
                if (nlen == 0 || nlen >= sizeof ret[0].port)
                        return problem(ret_problem,
                                       "\"%s\": a port name must have 1 to 15 characters "
                                       "(the name of one of the container's ports)",
                                       item);
                if (at) {
                        unsigned char buf[sizeof(struct in6_addr)];
                        if (inet_pton(AF_INET, addr, buf) != 1 &&
                            inet_pton(AF_INET6, addr, buf) != 1)
                                return problem(ret_problem,
                                               "\"%s\": \"%s\" is not a numeric IPv4 or IPv6 "
                                               "address (as 127.0.0.1 or ::1)",
                                               item, addr);
                }
                if (n == SPEC_LISTEN_MAX)
                        return problem(ret_problem, "names more than %d ports", SPEC_LISTEN_MAX);
                memcpy(ret[n].port, item, nlen);
                ret[n].port[nlen] = 0;
                snprintf(ret[n].address, sizeof ret[n].address, "%s", addr);
                for (size_t i = 0; i < n; i++)
                        if (streq(ret[i].port, ret[n].port))
                                return problem(ret_problem, "port \"%s\" is named twice",
                                               ret[n].port);
                n++;
        }
        if (r < 0)
                return r;
        *ret_n = n;
        return 0;
}

/* IANA_SVC_NAME: ≤15 chars, [a-z0-9-], a letter, no "--", no edge '-'. */
const char *spec__port_name_problem(const char *s) {
        size_t n = strlen(s);
        bool letter = false;

        if (n > 15)
                return "must be no more than 15 characters";
        for (size_t i = 0; i < n; i++) {
                if (!(islower((unsigned char) s[i]) || isdigit((unsigned char) s[i]) ||
                      s[i] == '-'))
                        return "must contain only alpha-numeric characters (a-z, 0-9), and "
                               "hyphens (-)";
                if (islower((unsigned char) s[i]))
                        letter = true;
        }
        if (strstr(s, "--"))
                return "must not contain consecutive hyphens";
        if (!letter)
                return "must contain at least one letter (a-z)";
        if (n == 0 || s[0] == '-' || s[n - 1] == '-')
                return "must not begin or end with a hyphen";
        return NULL;
}

#define LEASE_FORMAT                                                                         \
        "port names separated by commas (as \"http\" or \"http,metrics\"), each of 1 to 15 " \
        "characters a-z, 0-9 and '-'"

int spec_lease_ports_parse(const char *s, spec_port_name ret[static SPEC_LEASE_PORTS_MAX],
                           size_t *ret_n, char **ret_problem) {
        const char *p = s;
        size_t n = 0;
        int r;

        *ret_problem = NULL;
        *ret_n = 0;
        if (!s || !*s)
                return problem(ret_problem, "must be " LEASE_FORMAT);
        for (;;) {
                _cleanup_free_ char *item = NULL;
                const char *why;

                r = next_item(&p, &item, ret_problem, LEASE_FORMAT);
                if (r <= 0)
                        break;
                why = spec__port_name_problem(item);
                if (why)
                        return problem(ret_problem, "\"%s\": a port name %s", item, why);
                if (n == SPEC_LEASE_PORTS_MAX)
                        return problem(ret_problem, "names more than %d ports",
                                       SPEC_LEASE_PORTS_MAX);
                for (size_t i = 0; i < n; i++)
                        if (streq(ret[i].name, item))
                                return problem(ret_problem, "port \"%s\" is named twice", item);
                snprintf(ret[n].name, sizeof ret[n].name, "%s", item);
                n++;
        }
        if (r < 0)
                return r;
        *ret_n = n;
        return 0;
}

char *spec_legacy_leased_ports(json_t *deployment) {
        json_t *cs = json_object_get(
                json_object_get(json_object_get(json_object_get(deployment, "spec"), "template"),
                                "spec"),
                "containers");
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(1024);
        json_t *c, *p;
        size_t i, k;

        json_array_foreach (cs, i, c)
                json_array_foreach (json_object_get(c, "ports"), k, p) {
                        json_t *cp = json_object_get(p, "containerPort");
                        const char *name = json_string_value(json_object_get(p, "name"));
                        if (json_is_object(p) &&
                            (!cp || (json_is_integer(cp) && json_integer_value(cp) == 0)))
                                (void) tend_buf_addf(&b, "%s%s", b.len ? "," : "", name ?: "port");
                }
        return b.len ? tend_buf_take(&b) : NULL;
}

int spec_lift_leased_ports(spec_map *annotations, spec_pod_spec *spec) {
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(1024);
        const char *had = spec_map_get(annotations, SPEC_ANN_LEASE_PORTS);
        bool lifted = false;

        if (had)
                (void) tend_buf_adds(&b, had);
        for (size_t c = 0; c < spec->n_containers; c++) {
                spec_container *ct = &spec->containers[c];
                size_t k = 0;
                for (size_t i = 0; i < ct->n_ports; i++) {
                        spec_container_port *p = &ct->ports[i];
                        if (p->container_port != SPEC_UNSET && p->container_port != 0) {
                                ct->ports[k++] = *p;
                                continue;
                        }
                        /* the old form: a name, or none for the first ($PORT) */
                        (void) tend_buf_addf(&b, "%s%s", b.len ? "," : "",
                                             p->name ? p->name : "port");
                        free(p->name);
                        free(p->protocol);
                        lifted = true;
                }
                ct->n_ports = k;
                if (k == 0) {
                        free(ct->ports);
                        ct->ports = NULL;
                }
        }
        if (!lifted)
                return 0;
        if (!tend_buf_str(&b) ||
            spec_map_set(annotations, SPEC_ANN_LEASE_PORTS, tend_buf_str(&b)) < 0)
                return -ENOMEM;
        return 1;
}

#define NOTIFY_FORMAT                                                                      \
        "\"ready\", \"watchdog=DURATION\", or both separated by a comma (as \"ready\" or " \
        "\"ready,watchdog=10s\")"

int spec_notify_parse(const char *s, spec_notify *ret, char **ret_problem) {
        spec_notify n = {};
        bool seen_watchdog = false;
        const char *p = s;
        int r;

        *ret_problem = NULL;
        if (!s || !*s)
                return problem(ret_problem, "must be " NOTIFY_FORMAT);
        for (;;) {
                _cleanup_free_ char *item = NULL;
                const char *value;

                r = next_item(&p, &item, ret_problem, NOTIFY_FORMAT);
                if (r <= 0)
                        break;
                if (streq(item, "ready")) {
                        if (n.ready)
                                return problem(ret_problem, "ready is given twice");
                        n.ready = true;
                } else if ((value = startswith(item, "watchdog="))) {
                        if (seen_watchdog)
                                return problem(ret_problem, "watchdog is given twice");
                        seen_watchdog = true;
                        r = duration_item("watchdog", value, &n.watchdog, ret_problem);
                        if (r < 0)
                                return r;
                } else
                        return problem(ret_problem, "unknown item \"%s\": must be %s", item,
                                       NOTIFY_FORMAT);
        }
        if (r < 0)
                return r;
        *ret = n;
        return 0;
}

int spec_canary_parse(const char *s, spec_canary *ret, char **ret_problem) {
        size_t len = s ? strlen(s) : 0;
        bool percent = len > 0 && s[len - 1] == '%';
        _cleanup_free_ char *digits = s ? strndup(s, len - percent) : NULL;
        int64_t n;

        *ret_problem = NULL;
        if (s && !digits)
                return -ENOMEM;
        if (!digits || !*digits || !isdigit((unsigned char) digits[0]) ||
            safe_atoi64(digits, &n) < 0 || n < 1 || n > (percent ? 100 : 100000))
                return problem(ret_problem,
                               "must be a number of pods from 1 to 100000 (as \"2\") or a "
                               "percentage of replicas from 1%% to 100%% (as \"10%%\")");
        *ret = percent ? (spec_canary){ .percent = (int32_t) n }
                       : (spec_canary){ .count = (int32_t) n };
        return 0;
}

int32_t spec_canary_count(const spec_canary *c, int32_t replicas) {
        int64_t n = c->percent ? ((int64_t) replicas * c->percent + 99) / 100 : c->count;

        return (int32_t) MAX(MIN(n, (int64_t) replicas), (int64_t) 1);
}

/* ---- the registry ---- */

static int check_backoff(const char *value, char **ret_detail) {
        spec_backoff b;
        return spec_backoff_parse(value, &b, ret_detail);
}

static int check_listen(const char *value, char **ret_detail) {
        spec_listen l[SPEC_LISTEN_MAX];
        size_t n;
        return spec_listen_parse(value, l, &n, ret_detail);
}

static int check_lease_ports(const char *value, char **ret_detail) {
        spec_port_name l[SPEC_LEASE_PORTS_MAX];
        size_t n;
        return spec_lease_ports_parse(value, l, &n, ret_detail);
}

static int check_notify(const char *value, char **ret_detail) {
        spec_notify n;
        return spec_notify_parse(value, &n, ret_detail);
}

static int check_canary(const char *value, char **ret_detail) {
        spec_canary c;
        return spec_canary_parse(value, &c, ret_detail);
}

/* The value is one of what (a NULL-terminated list), else detail. */
static int check_one_of(const char *value, const char *const *what, const char *detail,
                        char **ret_detail) {
        if (strv_contains((char **) what, value))
                return 0;
        return (*ret_detail = strdup(detail)) ? -EINVAL : -ENOMEM;
}

static int check_promote_after(const char *value, char **ret_detail) {
        usec_t d;
        int r = duration_item("value", value, &d, ret_detail);

        if (r != -EINVAL)
                return r;
        free(*ret_detail);
        *ret_detail = strdup("must be a duration from 10ms to 24h, as \"30s\" or \"10m\"");
        return *ret_detail ? -EINVAL : -ENOMEM;
}

static int check_node_lost_policy(const char *value, char **ret_detail) {
        return check_one_of(value, (const char *const[]){ "replace", "fence", NULL },
                            "must be \"replace\" (replaced elsewhere; the default) or \"fence\" "
                            "(stopped by a node cut off before it is replaced)",
                            ret_detail);
}

static int check_bool(const char *value, char **ret_detail) {
        return check_one_of(value, (const char *const[]){ "true", "false", NULL },
                            "must be \"true\" or \"false\"", ret_detail);
}

static int check_promote(const char *value, char **ret_detail) {
        int64_t rev;

        if (streq(value, "true") ||
            (isdigit((unsigned char) value[0]) && safe_atoi64(value, &rev) == 0 && rev > 0))
                return 0;
        *ret_detail = strdup("must be \"true\" (the canaries waiting now) or the revision of "
                             "the canaries to promote");
        return *ret_detail ? -EINVAL : -ENOMEM;
}

#define DEP SPEC_ANN_ON_DEPLOYMENT
#define TPL SPEC_ANN_ON_TEMPLATE
#define RS SPEC_ANN_ON_REPLICA_SET
#define POD SPEC_ANN_ON_POD
#define CONFIG SPEC_ANN_ON_CONFIG

/* What a user may write under tend.io/ comes first, in the order errors
 * list them. */
static const spec_annotation registry[] = {
        /* key                          where     writer                  to RS  kept   check */
        { SPEC_ANN_CRASH_BACKOFF, DEP, SPEC_ANN_BY_USER, true, false, check_backoff },
        { SPEC_ANN_AUTO_ROLLBACK, DEP, SPEC_ANN_BY_USER, true, false, check_bool },
        { SPEC_ANN_CONFIG_ROLLOUT, DEP, SPEC_ANN_BY_USER, true, false, check_bool },
        { SPEC_ANN_CANARY, DEP, SPEC_ANN_BY_USER, true, false, check_canary },
        { SPEC_ANN_CANARY_PROMOTE_AFTER, DEP, SPEC_ANN_BY_USER, true, false, check_promote_after },
        /* a request to the deployment controller, not a setting: tendd
         * removes it once done */
        { SPEC_ANN_PROMOTE, DEP, SPEC_ANN_BY_USER, false, false, check_promote },
        { SPEC_ANN_NODE_LOST_POLICY, DEP, SPEC_ANN_BY_USER, true, false, check_node_lost_policy },
        { SPEC_ANN_LISTEN, TPL, SPEC_ANN_BY_USER, false, false, check_listen },
        { SPEC_ANN_LEASE_PORTS, TPL, SPEC_ANN_BY_USER, false, false, check_lease_ports },
        { SPEC_ANN_NOTIFY, TPL, SPEC_ANN_BY_USER, false, false, check_notify },
        /* set by tendd --manifests; a user may carry it over from `get -o
         * yaml`; an apply by hand does not take a file's object over */
        { SPEC_ANN_SOURCE, DEP, SPEC_ANN_BY_MANIFESTS, true, true, NULL },

        /* Kubernetes' and kubectl's */
        { SPEC_ANN_CHANGE_CAUSE, DEP | RS, SPEC_ANN_BY_USER, true, false, NULL },
        { SPEC_ANN_LAST_APPLIED, DEP, SPEC_ANN_BY_KUBECTL, false, false, NULL },
        /* `rollout restart`: an apply of the manifest as it was must not
         * take it away (that would be a change of template, a second
         * rollout; kubectl's merge keeps it too) */
        { SPEC_ANN_RESTARTED_AT, TPL, SPEC_ANN_BY_KUBECTL, false, true, NULL },
        { SPEC_ANN_ROLLBACK_TO, DEP, SPEC_ANN_BY_KUBECTL, false, false, NULL },
        { SPEC_ANN_REVISION, DEP | RS, SPEC_ANN_BY_CONTROLLER, false, true, NULL },
        { SPEC_ANN_REVISION_HISTORY, DEP | RS, SPEC_ANN_BY_CONTROLLER, false, true, NULL },
        { SPEC_ANN_DESIRED_REPLICAS, RS, SPEC_ANN_BY_CONTROLLER, false, false, NULL },
        { SPEC_ANN_MAX_REPLICAS, RS, SPEC_ANN_BY_CONTROLLER, false, false, NULL },

        /* a ReplicaSet's, kept by the deployment controller (never copied
         * to or from the deployment) */
        { SPEC_ANN_COMPLETE, RS, SPEC_ANN_BY_CONTROLLER, false, false, NULL },
        { SPEC_ANN_ROLLOUT_FAILED, RS, SPEC_ANN_BY_CONTROLLER, false, false, NULL },
        { SPEC_ANN_PROMOTED, RS, SPEC_ANN_BY_CONTROLLER, false, false, NULL },
        { SPEC_ANN_CANARY_SINCE, RS, SPEC_ANN_BY_CONTROLLER, false, false, NULL },
        { SPEC_ANN_CONFIG, RS, SPEC_ANN_BY_CONTROLLER, false, false, NULL },
        /* a revision's snapshot of a ConfigMap or a Secret (tend.io/config-rollout) */
        { SPEC_ANN_SNAPSHOT_OF, CONFIG, SPEC_ANN_BY_CONTROLLER, false, false, NULL },

        /* a pod's: the ReplicaSet controller's, and its node's (in a fleet
         * the node writes them in the pod's status key) */
        { SPEC_ANN_PREDECESSOR, POD, SPEC_ANN_BY_CONTROLLER, false, false, NULL },
        { SPEC_ANN_REPLACED, POD, SPEC_ANN_BY_CONTROLLER, false, false, NULL },
        { SPEC_ANN_DELETION_COST, POD, SPEC_ANN_BY_CONTROLLER, false, false, NULL },
        { SPEC_ANN_PORTS, POD, SPEC_ANN_BY_NODE, false, false, NULL },
        { SPEC_ANN_STATUS, POD, SPEC_ANN_BY_NODE, false, false, NULL },
        { SPEC_ANN_CRASH_STREAK, POD, SPEC_ANN_BY_NODE, false, false, NULL },
        { SPEC_ANN_REPLACE_AFTER, POD, SPEC_ANN_BY_NODE, false, false, NULL },
        { SPEC_ANN_START_AFTER, POD, SPEC_ANN_BY_NODE, false, false, NULL },
};

#undef DEP
#undef TPL
#undef RS
#undef POD
#undef CONFIG

const spec_annotation *spec_annotations(size_t *ret_n) {
        *ret_n = ELEMENTSOF(registry);
        return registry;
}

const spec_annotation *spec_annotation_find(const char *key) {
        for (size_t i = 0; key && i < ELEMENTSOF(registry); i++)
                if (streq(registry[i].key, key))
                        return &registry[i];
        return NULL;
}

bool spec_annotation_kept_on_apply(const char *key, spec_ann_where where) {
        const spec_annotation *a = spec_annotation_find(key);
        return a && a->kept_on_apply && (a->where & where);
}

bool spec_annotation_to_replica_set(const char *key) {
        const spec_annotation *a = spec_annotation_find(key);
        return !a || a->to_replica_set;
}

/* What a user may write, where: a row of theirs (or one tendd
 * --manifests writes, which they may carry over). */
static bool user_may(const spec_annotation *a, spec_ann_where where) {
        return (a->writer == SPEC_ANN_BY_USER || a->writer == SPEC_ANN_BY_MANIFESTS) &&
               (a->where & where);
}

int spec_tend_annotation_problem(const char *key, const char *value, spec_ann_where where,
                                 char **ret_problem) {
        _cleanup_free_ char *krepr = NULL, *vrepr = NULL, *detail = NULL;
        const spec_annotation *a = spec_annotation_find(key);
        int r;

        *ret_problem = NULL;
        if (!startswith(key, SPEC_ANN_PREFIX))
                return 0;
        krepr = spec__repr_str(key);
        vrepr = spec__repr_str(value);
        if (!krepr || !vrepr)
                return -ENOMEM;
        if (a && (a->writer == SPEC_ANN_BY_USER || a->writer == SPEC_ANN_BY_MANIFESTS) &&
            !user_may(a, where)) {
                if (where == SPEC_ANN_ON_TEMPLATE)
                        return problem(ret_problem,
                                       "Forbidden: %s belongs on the Deployment's "
                                       "metadata.annotations, not on the pod template",
                                       key);
                if (where == SPEC_ANN_ON_DEPLOYMENT)
                        return problem(ret_problem,
                                       "Forbidden: %s belongs on spec.template.metadata."
                                       "annotations, not on the Deployment",
                                       key);
                return problem(ret_problem, "Forbidden: %s belongs on a Deployment's %s", key,
                               user_may(a, SPEC_ANN_ON_DEPLOYMENT)
                                       ? "metadata.annotations"
                                       : "spec.template.metadata.annotations");
        }
        if (!a || !user_may(a, where)) {
                _cleanup_buf_ tend_buf b = TEND_BUF_INIT(1024);
                for (size_t i = 0; i < ELEMENTSOF(registry); i++)
                        if (user_may(&registry[i], where) &&
                            startswith(registry[i].key, SPEC_ANN_PREFIX))
                                (void) tend_buf_addf(&b, "%s\"%s\"", b.len ? ", " : "",
                                                     registry[i].key);
                if (!b.len)
                        return problem(ret_problem,
                                       "Unsupported value: %s: tend reads no annotation under "
                                       "tend.io/ here",
                                       krepr);
                return problem(ret_problem, "Unsupported value: %s: supported values: %s", krepr,
                               tend_buf_str(&b));
        }
        if (!a->check)
                return 0;
        r = a->check(value, &detail);
        if (r == -EINVAL)
                return problem(ret_problem, "Invalid value: %s: %s", vrepr, detail);
        return r;
}

void spec_tend_parse(const spec_map *annotations, spec_tend *ret) {
        const char *v;
        _cleanup_free_ char *problem = NULL;

        *ret = (spec_tend){ .backoff = spec_backoff_default };
        ret->auto_rollback = streq_ptr(spec_map_get(annotations, SPEC_ANN_AUTO_ROLLBACK), "true");
        ret->config_rollout = streq_ptr(spec_map_get(annotations, SPEC_ANN_CONFIG_ROLLOUT), "true");
        ret->fence = streq_ptr(spec_map_get(annotations, SPEC_ANN_NODE_LOST_POLICY), "fence");
        if ((v = spec_map_get(annotations, SPEC_ANN_CANARY)))
                ret->has_canary = spec_canary_parse(v, &ret->canary, &problem) >= 0;
        free(problem);
        problem = NULL;
        if ((v = spec_map_get(annotations, SPEC_ANN_CANARY_PROMOTE_AFTER)) &&
            parse_duration(v, &ret->canary_promote_after) < 0)
                ret->canary_promote_after = 0;
        if ((v = spec_map_get(annotations, SPEC_ANN_CRASH_BACKOFF)) &&
            spec_backoff_parse(v, &ret->backoff, &problem) < 0)
                ret->backoff = spec_backoff_default;
}
