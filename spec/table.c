/* SPDX-License-Identifier: MIT */

/*
 * The columns of `get`: one implementation for the API's Table answers
 * (what kubectl prints) and for the tend CLI. kubectl's own columns, where
 * tend has them; -o wide adds tend's (the PID or unit, the ports, the
 * revision) as priority-1 columns.
 */

#include <inttypes.h>

#include "spec-internal.h"

static const spec_column deployment_columns[] = {
        { "NAME", "string", "name", "The deployment's name.", 0 },
        { "READY", "string", "", "Ready replicas out of the desired count.", 0 },
        { "UP-TO-DATE", "integer", "", "Replicas of the current template.", 0 },
        { "AVAILABLE", "integer", "", "Replicas ready for at least minReadySeconds.", 0 },
        { "AGE", "string", "", "Time since the deployment was created.", 0 },
        { "CONTAINERS", "string", "", "The container's name.", 1 },
        { "COMMAND", "string", "", "The program the pods run.", 1 },
        { "SELECTOR", "string", "", "The label selector of the deployment's pods.", 1 },
};

static const spec_column replica_set_columns[] = {
        { "NAME", "string", "name", "The ReplicaSet's name.", 0 },
        { "DESIRED", "integer", "", "The replicas it should have.", 0 },
        { "CURRENT", "integer", "", "The replicas it has.", 0 },
        { "READY", "integer", "", "Its ready replicas.", 0 },
        { "AGE", "string", "", "Time since it was created.", 0 },
        { "CONTAINERS", "string", "", "The container's name.", 1 },
        { "COMMAND", "string", "", "The program its pods run.", 1 },
        { "SELECTOR", "string", "", "The label selector of its pods.", 1 },
        { "REVISION", "string", "", "The deployment revision it holds.", 1 },
};

static const spec_column pod_columns[] = {
        { "NAME", "string", "name", "The pod's name.", 0 },
        { "READY", "string", "", "Ready containers out of all.", 0 },
        { "STATUS", "string", "", "Terminating, a waiting or terminated reason, or the phase.", 0 },
        { "RESTARTS", "string", "", "Deaths of this replica, carried across replacements.", 0 },
        { "AGE", "string", "", "Time since the pod was created.", 0 },
        { "PID", "string", "", "The process id, or the systemd unit.", 1 },
        { "PORTS", "string", "", "The ports the pod got, leased ones included.", 1 },
        { "REVISION", "string", "", "The deployment revision of its ReplicaSet.", 1 },
        { "NODE", "string", "", "The host that runs it.", 1 },
};

static const spec_column config_map_columns[] = {
        { "NAME", "string", "name", "The ConfigMap's name.", 0 },
        { "DATA", "integer", "", "Its keys, in data and binaryData.", 0 },
        { "AGE", "string", "", "Time since it was created.", 0 },
};

static const spec_column secret_columns[] = {
        { "NAME", "string", "name", "The Secret's name.", 0 },
        { "TYPE", "string", "", "Its type (Opaque, kubernetes.io/tls, ...).", 0 },
        { "DATA", "integer", "", "Its keys.", 0 },
        { "AGE", "string", "", "Time since it was created.", 0 },
};

static const spec_column event_columns[] = {
        { "LAST SEEN", "string", "", "Time since the event was last seen.", 0 },
        { "TYPE", "string", "", "Normal or Warning.", 0 },
        { "REASON", "string", "", "Why it happened, in one word.", 0 },
        { "OBJECT", "string", "", "The object it is about.", 0 },
        { "COUNT", "integer", "", "How often it happened.", 0 },
        { "MESSAGE", "string", "", "What happened.", 0 },
};

char *spec_human_duration(char buf[static 32], usec_t d) {
        unsigned long long s = d / USEC_PER_SEC, m = s / 60, h = s / 3600, days = s / 86400;

        if (s < 120)
                snprintf(buf, 32, "%llus", s);
        else if (m < 10 && s % 60)
                snprintf(buf, 32, "%llum%llus", m, s % 60);
        else if (h < 3)
                snprintf(buf, 32, "%llum", m);
        else if (h < 8 && m % 60)
                snprintf(buf, 32, "%lluh%llum", h, m % 60);
        else if (h < 48)
                snprintf(buf, 32, "%lluh", h);
        else if (days < 8 && h % 24)
                snprintf(buf, 32, "%llud%lluh", days, h % 24);
        else if (days < 365 * 2)
                snprintf(buf, 32, "%llud", days);
        else
                snprintf(buf, 32, "%lluy", days / 365);
        return buf;
}

static char *age(const spec_table_ctx *c, usec_t since) {
        char buf[TIMESTAMP_MAX + 32];

        if (!since)
                return strdup("<unknown>");
        if (c->human)
                return strdup(spec_human_duration(buf, c->now > since ? c->now - since : 0));
        return strdup(format_timestamp(buf, since / USEC_PER_SEC * USEC_PER_SEC));
}

const char *spec_pod_status_text(const spec_pod *p) {
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

char *spec_selector_text(const spec_selector *s) {
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(4096);

        if (!s)
                return strdup("<none>");
        for (size_t i = 0; i < s->match_labels.n; i++)
                (void) tend_buf_addf(&b, "%s%s=%s", b.len ? "," : "", s->match_labels.items[i].key,
                                     s->match_labels.items[i].value);
        for (size_t i = 0; i < s->n_match_expressions; i++) {
                const spec_requirement *r = &s->match_expressions[i];
                (void) tend_buf_addf(&b, "%s%s %s", b.len ? "," : "", r->key,
                                     strna(spec_selector_op_to_string(r->op)));
                if (r->values) {
                        (void) tend_buf_adds(&b, " (");
                        for (char **v = r->values; *v; v++)
                                (void) tend_buf_addf(&b, "%s%s", v == r->values ? "" : ",", *v);
                        (void) tend_buf_adds(&b, ")");
                }
        }
        return tend_buf_take(&b);
}

static char *dupn(const char *s) {
        return s ? strdup(s) : NULL;
}

static const char *container_of(const spec_pod_template *t) {
        return t->spec.n_containers ? t->spec.containers[0].name : NULL;
}

static const char *command_of(const spec_pod_template *t) {
        return t->spec.n_containers && t->spec.containers[0].command
                       ? t->spec.containers[0].command[0]
                       : NULL;
}

static void pod_row(const void *obj, const spec_table_ctx *c, char **cells) {
        const spec_pod *p = obj;
        const spec_container_status *cs = p->status.n_container_statuses
                                                  ? &p->status.container_statuses[0]
                                                  : NULL;
        const char *cid = cs ? cs->container_id : NULL;
        const spec_owner_ref *o = spec_meta_controller(&p->metadata);
        char buf[32];

        cells[0] = dupn(p->metadata.name);
        cells[1] = strprintf("%d/1", spec_pod_ready(p, NULL) ? 1 : 0);
        cells[2] = dupn(spec_pod_status_text(p));
        if (c->restarts_ago && cs && cs->restart_count > 0 && cs->last_state.terminated &&
            cs->last_state.terminated->finished_at) {
                usec_t f = cs->last_state.terminated->finished_at;
                cells[3] = strprintf("%d (%s ago)", cs->restart_count,
                                     spec_human_duration(buf, c->now > f ? c->now - f : 0));
        } else
                cells[3] = strprintf("%d", cs ? cs->restart_count : 0);
        cells[4] = age(c, p->metadata.creation_timestamp);
        cells[5] = dupn(cid ? (startswith(cid, "process://") ?: startswith(cid, "systemd://") ?: cid)
                            : NULL);
        cells[6] = dupn(spec_map_get(&p->metadata.annotations, SPEC_ANN_PORTS));
        cells[7] = o && c->revision_of
                           ? dupn(c->revision_of(p->metadata.namespace, o->name, c->userdata))
                           : NULL;
        cells[8] = dupn(p->spec.node_name);
}

static const char *object_kind(const char *k) {
        return !k                       ? "?"
               : streq(k, "Deployment") ? "deployment"
               : streq(k, "ReplicaSet") ? "replicaset"
               : streq(k, "Pod")        ? "pod"
                                        : k;
}

static void deployment_row(const void *obj, const spec_table_ctx *c, char **cells) {
        const spec_deployment *d = obj;

        cells[0] = dupn(d->metadata.name);
        cells[1] = strprintf("%d/%d", d->status.ready_replicas, d->spec.replicas);
        cells[2] = strprintf("%d", d->status.updated_replicas);
        cells[3] = strprintf("%d", d->status.available_replicas);
        cells[4] = age(c, d->metadata.creation_timestamp);
        cells[5] = dupn(container_of(&d->spec.template));
        cells[6] = dupn(command_of(&d->spec.template));
        cells[7] = spec_selector_text(d->spec.selector);
}

static void replica_set_row(const void *obj, const spec_table_ctx *c, char **cells) {
        const spec_replica_set *rs = obj;

        cells[0] = dupn(rs->metadata.name);
        cells[1] = strprintf("%d", rs->spec.replicas);
        cells[2] = strprintf("%d", rs->status.replicas);
        cells[3] = strprintf("%d", rs->status.ready_replicas);
        cells[4] = age(c, rs->metadata.creation_timestamp);
        cells[5] = dupn(container_of(&rs->spec.template));
        cells[6] = dupn(command_of(&rs->spec.template));
        cells[7] = spec_selector_text(rs->spec.selector);
        cells[8] = dupn(spec_map_get(&rs->metadata.annotations, SPEC_ANN_REVISION));
}

static void event_row(const void *obj, const spec_table_ctx *c, char **cells) {
        const spec_event *e = obj;

        cells[0] = age(c, e->last_timestamp);
        cells[1] = dupn(e->type);
        cells[2] = dupn(e->reason);
        cells[3] = strprintf("%s/%s", object_kind(e->involved_object.kind),
                             strna(e->involved_object.name));
        cells[4] = strprintf("%d", MAX(e->count, 1));
        cells[5] = dupn(e->message);
}

static void config_map_row(const void *obj, const spec_table_ctx *c, char **cells) {
        const spec_config_map *m = obj;

        cells[0] = dupn(m->metadata.name);
        cells[1] = strprintf("%zu", m->data.n + m->binary_data.n);
        cells[2] = age(c, m->metadata.creation_timestamp);
}

static void secret_row(const void *obj, const spec_table_ctx *c, char **cells) {
        const spec_secret *s = obj;

        cells[0] = dupn(s->metadata.name);
        cells[1] = dupn(s->type);
        cells[2] = strprintf("%zu", s->data.n);
        cells[3] = age(c, s->metadata.creation_timestamp);
}

#define TABLE(name, cols, fn) \
        const spec_table name = { .columns = (cols), .n_columns = ELEMENTSOF(cols), .row = (fn) }
TABLE(spec__table_deployment, deployment_columns, deployment_row);
TABLE(spec__table_replica_set, replica_set_columns, replica_set_row);
TABLE(spec__table_pod, pod_columns, pod_row);
TABLE(spec__table_event, event_columns, event_row);
TABLE(spec__table_config_map, config_map_columns, config_map_row);
TABLE(spec__table_secret, secret_columns, secret_row);

size_t spec_table_columns(const spec_type *t, const spec_column **ret) {
        const spec_kind *k = spec_kind_of(t);

        *ret = k && k->table ? k->table->columns : NULL;
        return k && k->table ? k->table->n_columns : 0;
}

int spec_table_row(const spec_type *t, const void *obj, const spec_table_ctx *c, char **cells) {
        const spec_kind *k = spec_kind_of(t);

        if (!k || !k->table)
                return -EINVAL;
        k->table->row(obj, c, cells);
        return 0;
}
