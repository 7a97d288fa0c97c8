/* SPDX-License-Identifier: MIT */

/*
 * A container's environment as its process starts (agent-internal.h,
 * agent__pod_env()): envFrom's ConfigMaps and Secrets, then env's values
 * and references (configMapKeyRef, secretKeyRef, fieldRef,
 * resourceFieldRef), as the kubelet makes it at each start. A reference
 * that is missing and not optional keeps the process from starting
 * (CreateContainerConfigError, in the kubelet's words); the pod is looked
 * at again when a ConfigMap or a Secret of its namespace changes.
 *
 * A Secret's values are handed to the runtime, and written nowhere else:
 * not in a log, an event or a message, which name keys and objects only.
 */

#include <inttypes.h>
#include <unistd.h>

#include "agent-internal.h"

static int push(agent_env *e, const char *name, const char *value, size_t len, bool expand) {
        char *n = strdup(name), *v = strndup(value, len), **owned = NULL;
        rt_env_var *vars = n && v ? reallocarray(e->vars, e->n + 1, sizeof *vars) : NULL;

        if (vars) {
                e->vars = vars;
                owned = reallocarray(e->owned, 2 * e->n + 2, sizeof *owned);
        }
        if (!owned) {
                free(n);
                free(v);
                return -ENOMEM;
        }
        e->owned = owned;
        e->owned[2 * e->n] = n;
        e->owned[2 * e->n + 1] = v;
        e->vars[e->n++] = (rt_env_var){ .name = n, .value = v, .expand = expand };
        return 0;
}

void agent__pod_env_done(agent_env *e) {
        for (size_t i = 0; i < 2 * e->n; i++)
                free(e->owned[i]);
        free(e->owned);
        free(e->vars);
        *e = (agent_env){};
}

/* A Secret's value, its bytes (up to a NUL: an environment holds C
 * strings). */
static int push_secret(agent_env *e, const char *name, const char *b64) {
        _cleanup_free_ void *bytes = NULL;
        size_t n = 0;
        int r = tend_base64_decode(b64, strlen(b64), &bytes, &n);

        if (r < 0)
                return r == -ENOMEM ? r : 0; /* (checked when stored) */
        return push(e, name, bytes, strnlen(bytes, n), false);
}

int agent__problem(char **ret, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(ret, fmt, ap);
        va_end(ap);
        if (r < 0) {
                *ret = NULL;
                return -ENOMEM;
        }
        return -ENOENT;
}

/* envFrom: every key, prefixed; those that cannot be a variable's name
 * (or are tend's own) are skipped, and an event says which. */
static int cmp_str(const void *x, const void *y) {
        return strcmp(*(char *const *) x, *(char *const *) y);
}

static int env_from(agent *a, const spec_pod *p, const spec_env_from *f, bool say, agent_env *e,
                    char **ret_problem) {
        bool secret = f->secret_ref;
        const spec_local_ref *ref = secret ? f->secret_ref : f->config_map_ref;
        const void *obj = store_get(a->store, secret ? STORE_SECRET : STORE_CONFIG_MAP,
                                    p->metadata.namespace, ref->name);
        const spec_map *data = !obj     ? NULL
                               : secret ? &((const spec_secret *) obj)->data
                                        : &((const spec_config_map *) obj)->data;
        _cleanup_strv_free_ char **skipped = NULL;
        int r = 0;

        if (!obj)
                return ref->optional ? 0
                                     : agent__problem(ret_problem, "%s \"%s\" not found",
                                                      secret ? "secret" : "configmap", ref->name);
        for (size_t i = 0; i < data->n && r >= 0; i++) {
                _cleanup_free_ char *name = strprintf("%s%s", strempty(f->prefix),
                                                      data->items[i].key);
                if (!name)
                        return -ENOMEM;
                if (!spec_is_env_name(name) || spec_env_reserved(name)) {
                        if (say && strv_extend(&skipped, name) < 0)
                                return -ENOMEM;
                        continue;
                }
                r = secret ? push_secret(e, name, data->items[i].value)
                           : push(e, name, data->items[i].value, strlen(data->items[i].value),
                                  false);
        }
        if (r >= 0 && skipped) {
                /* as the kubelet says it: sorted, comma-separated */
                _cleanup_buf_ tend_buf keys = TEND_BUF_INIT(4096);
                qsort(skipped, strv_length(skipped), sizeof *skipped, cmp_str);
                for (char **k = skipped; *k; k++)
                        (void) tend_buf_addf(&keys, "%s%s", k == skipped ? "" : ", ", *k);
                (void) agent__event(a, STORE_POD, &p->metadata, "Warning",
                                    "InvalidEnvironmentVariableNames",
                                    "Keys [%s] from the EnvFrom %s %s/%s were skipped since they "
                                    "are considered invalid environment variable names (or are "
                                    "set by tend for every pod).",
                                    tend_buf_str(&keys), secret ? "secret" : "configMap",
                                    p->metadata.namespace, ref->name);
        }
        return r;
}

/* configMapKeyRef, secretKeyRef. */
static int key_ref(agent *a, const spec_pod *p, const char *name, const spec_key_ref *ref,
                   bool secret, agent_env *e, char **ret_problem) {
        const void *obj = store_get(a->store, secret ? STORE_SECRET : STORE_CONFIG_MAP,
                                    p->metadata.namespace, ref->name);
        const char *v;

        if (!obj)
                return ref->optional ? 0
                                     : agent__problem(ret_problem, "%s \"%s\" not found",
                                                      secret ? "secret" : "configmap", ref->name);
        v = spec_map_get(secret ? &((const spec_secret *) obj)->data
                                : &((const spec_config_map *) obj)->data,
                         ref->key);
        if (!v)
                return ref->optional
                               ? 0
                               : agent__problem(ret_problem, "couldn't find key %s in %s %s/%s",
                                                ref->key, secret ? "Secret" : "ConfigMap",
                                                p->metadata.namespace, ref->name);
        return secret ? push_secret(e, name, v) : push(e, name, v, strlen(v), false);
}

/* fieldRef: the pod's own fields (the addresses are the host's: pods run
 * on it). */
static int field_ref(agent *a, const spec_pod *p, const char *name, const spec_field_ref *f,
                     agent_env *e) {
        const char *path = f->field_path, *v = NULL, *rest;
        _cleanup_free_ char *key = NULL;

        if (streq(path, "metadata.name"))
                v = p->metadata.name;
        else if (streq(path, "metadata.namespace"))
                v = p->metadata.namespace;
        else if (streq(path, "metadata.uid"))
                v = p->metadata.uid;
        else if (streq(path, "spec.nodeName"))
                v = p->spec.node_name ?: a->node_name;
        else if (startswith(path, "status.") && strstr(path, "IP"))
                v = "127.0.0.1";
        else if ((rest = startswith(path, "metadata.labels['")) ||
                 (rest = startswith(path, "metadata.annotations['"))) {
                key = strndup(rest, strlen(rest) >= 2 ? strlen(rest) - 2 : 0);
                if (!key)
                        return -ENOMEM;
                v = spec_map_get(startswith(path, "metadata.labels") ? &p->metadata.labels
                                                                     : &p->metadata.annotations,
                                 key);
        }
        v = strempty(v);
        return push(e, name, v, strlen(v), false);
}

/* resourceFieldRef: the limit, else what the host has, in units of the
 * divisor, rounded up (as the kubelet). */
static int resource_ref(const spec_pod *p, const char *name, const spec_resource_field_ref *rf,
                        agent_env *e) {
        const spec_container *c = &p->spec.containers[0];
        bool cpu = streq_ptr(rf->resource, "limits.cpu");
        int64_t have, unit;
        char buf[32];

        if (cpu) {
                long n = sysconf(_SC_NPROCESSORS_ONLN);
                have = c->resources.limits.cpu.text ? c->resources.limits.cpu.milli
                                                    : 1000 * (int64_t) MAX(n, 1L);
                unit = rf->divisor.text ? MAX(rf->divisor.milli, (int64_t) 1) : 1000;
        } else {
                uint64_t total_kb = 0, avail_kb = 0;
                if (!c->resources.limits.memory.text)
                        (void) host_meminfo(&total_kb, &avail_kb);
                have = c->resources.limits.memory.text ? c->resources.limits.memory.value
                                                       : (int64_t) (total_kb * 1024);
                unit = rf->divisor.text ? MAX(rf->divisor.value, (int64_t) 1) : 1;
        }
        snprintf(buf, sizeof buf, "%" PRId64, have / unit + (have % unit != 0));
        return push(e, name, buf, strlen(buf), false);
}

bool agent__pod_env_refers(const spec_pod *p) {
        const spec_container *c = p->spec.n_containers ? &p->spec.containers[0] : NULL;

        if (!c || c->n_env_from)
                return c;
        for (size_t i = 0; i < c->n_env; i++)
                if (c->env[i].value_from)
                        return true;
        return false;
}

int agent__pod_env(agent *a, const spec_pod *p, bool say, agent_env *ret, char **ret_problem) {
        const spec_container *c = p->spec.n_containers ? &p->spec.containers[0] : NULL;
        agent_env e = {};
        int r = 0;

        *ret_problem = NULL;
        for (size_t i = 0; c && i < c->n_env_from && r >= 0; i++)
                r = env_from(a, p, &c->env_from[i], say, &e, ret_problem);
        for (size_t i = 0; c && i < c->n_env && r >= 0; i++) {
                const spec_env_var *v = &c->env[i];
                const spec_env_source *s = v->value_from;
                if (!s)
                        r = push(&e, v->name, strempty(v->value), strlen(strempty(v->value)), true);
                else if (s->config_map_key_ref || s->secret_key_ref)
                        r = key_ref(a, p, v->name, s->secret_key_ref ?: s->config_map_key_ref,
                                    s->secret_key_ref, &e, ret_problem);
                else if (s->field_ref)
                        r = field_ref(a, p, v->name, s->field_ref, &e);
                else if (s->resource_field_ref)
                        r = resource_ref(p, v->name, s->resource_field_ref, &e);
        }
        if (r < 0) {
                agent__pod_env_done(&e);
                return r;
        }
        *ret = e;
        return 0;
}
