/* SPDX-License-Identifier: MIT */

/*
 * What users do: apply, delete, scale, pause, restart, roll back. Each
 * checks everything first and writes nothing on error; what it writes is
 * committed durably before it returns (docs/architecture.md §4.5, §4.6).
 */

#include <inttypes.h>
#include <stdio.h>

#include <unistd.h>

#include "agent-internal.h"

/* Copies into `to` (an object's metadata) the annotations that `from` (the
 * stored object's metadata) has, `to` has not, and an apply keeps (the
 * registry's kept_on_apply, in spec/annotations.c: the controller's
 * revisions and tendd --manifests' source on a Deployment, `rollout
 * restart`'s restartedAt on its template; kubectl's three-way merge keeps
 * them too). where: a Deployment's or its template's. */
static void keep_annotations(json_t *to, json_t *from, spec_ann_where where) {
        json_t *ann = json_object_get(to, "annotations");
        size_t n;
        const spec_annotation *rows = spec_annotations(&n);

        for (size_t i = 0; i < n; i++) {
                const char *k = rows[i].key;
                json_t *v = json_object_get(json_object_get(from, "annotations"), k);
                if (!rows[i].kept_on_apply || !(rows[i].where & where) || !v ||
                    json_object_get(ann ?: json_null(), k))
                        continue;
                if (!ann) {
                        ann = json_object();
                        json_object_set_new(to, "annotations", ann);
                }
                json_object_set(ann, k, v);
        }
}

/* Whether a's spec or annotations differ from b's, as encoded, without
 * encoding them: each one's are shared into a blank object, and those
 * compared. A large deployment's two encodings were most of an unchanged
 * apply's cost (tendd --manifests reads each file again at each resync),
 * and of a rollback's. */
static bool spec_or_annotations_differ(const spec_deployment *a, const spec_deployment *b) {
        spec_deployment x = { .spec = a->spec }, y = { .spec = b->spec };

        x.metadata.annotations = a->metadata.annotations;
        y.metadata.annotations = b->metadata.annotations;
        return !spec_equal_encoded(&spec_type_deployment, &x, &y);
}

/* Every user action ends here: r is what its write returned. The change is
 * committed durably before the caller acknowledges it (docs/architecture.md §4.5); if the
 * write or the commit failed, the batch is rolled back, so nothing half-done
 * stays in memory. -ENOENT (nothing to change) wrote nothing. */
static int acknowledge(agent *a, int r) {
        if (r == -ENOENT)
                return r;
        if (r >= 0)
                r = store_commit(a->store, true);
        if (r < 0)
                store_rollback(a->store);
        return r;
}

/* Each of ds checked (validated, unless validated says it was already;
 * also as an update of what is stored, unless update_validated says that
 * was too), and the selector contract (docs/architecture.md §4.1) against
 * what is stored and what else is in this apply (pairs within it reported
 * once). */
static int check_all(agent *a, spec_deployment *const *ds, size_t n, bool validated,
                     bool update_validated, spec_errors *errs) {
        _cleanup_(spec_overlaps_freep) spec_overlaps *ov = spec_overlaps_new();
        const void *const *items;
        size_t m = store_list(a->store, STORE_DEPLOYMENT, &items);
        _cleanup_free_ const spec_deployment **all = new0(const spec_deployment *, m + n + 1);
        const char *saved = errs->object;

        if (!ov || !all)
                return -ENOMEM;
        for (size_t k = 0; k < m + n; k++) {
                all[k] = k < m ? items[k] : ds[k - m];
                if (spec_overlaps_add(ov, all[k]->spec.selector, NULL) < 0)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                const spec_deployment *d = ds[i];
                const spec_deployment *old = store_get(a->store, STORE_DEPLOYMENT,
                                                       d->metadata.namespace, d->metadata.name);
                _cleanup_free_ char *label = spec_object_label("Deployment", d->metadata.name, 0);

                errs->object = label;
                if (!validated)
                        (void) spec_deployment_validate(d, errs);
                if (old && !update_validated)
                        (void) spec_deployment_validate_update(old, d, errs);
                if (d->spec.template.spec.node_selector.n && !agent__fleet(a))
                        (void) spec_errors_add(errs, "spec.template.spec.nodeSelector",
                                               "Forbidden: this tendd is the only node (no "
                                               "--fleet): every pod runs here; remove it, or run "
                                               "tendd --fleet to place pods by node labels");
                if (d->spec.template.spec.n_containers &&
                    d->spec.template.spec.containers[0].n_volume_mounts &&
                    a->backend->mount_problem && a->backend->mount_problem())
                        (void) spec_errors_add(errs,
                                               "spec.template.spec.containers[0].volumeMounts",
                                               "Forbidden: %s (it runs as uid %u): run tendd as "
                                               "root, or remove the volumeMounts",
                                               a->backend->mount_problem(), (unsigned) geteuid());
                if (d->spec.template.spec.n_containers) {
                        _cleanup_free_ char *why = NULL;
                        if (a->backend->limits_problem &&
                            a->backend->limits_problem(a->backend_data, &d->spec.template.spec,
                                                       &why))
                                (void) spec_errors_add(
                                        errs, "spec.template.spec.containers[0].resources.limits",
                                        "Forbidden: %s: run tendd as root (or with a cgroup "
                                        "delegated to it), or remove the limit",
                                        why);
                }
                if (old && old->metadata.deletion_timestamp)
                        (void) spec_errors_add(errs, "metadata.deletionTimestamp",
                                               "Forbidden: the deployment is being deleted (it "
                                               "goes when its pods have stopped); apply it "
                                               "again then");
                if (spec_overlaps_report(ov, all, m + i, errs, NULL, NULL) < 0) {
                        errs->object = saved;
                        return -ENOMEM;
                }
                errs->object = saved;
        }
        return 0;
}

/* The object to store for an apply of d over old (NULL: a create): the
 * user's metadata and spec, defaulted; the agent's identity and status.
 * Through JSON, which keeps the ownership of every field simple. */
static spec_deployment *prepare(const spec_deployment *d, const spec_deployment *old,
                                bool replace) {
        json_t *j = spec_encode(&spec_type_deployment, d), *meta;
        spec_errors errs = {};
        spec_deployment *n = NULL;

        if (!j)
                return NULL;
        json_object_del(j, "status");
        meta = json_object_get(j, "metadata");
        json_object_del(meta, "uid");
        json_object_del(meta, "creationTimestamp");
        json_object_del(meta, "resourceVersion");
        json_object_del(meta, "generation");
        json_object_del(meta, "ownerReferences");
        json_object_del(meta, "deletionTimestamp");
        if (old) {
                json_t *oj = spec_encode(&spec_type_deployment, old);
                json_t *om = json_object_get(oj, "metadata");
                if (!oj) {
                        json_decref(j);
                        return NULL;
                }
                json_t *st = json_object_get(oj, "status");
                json_object_set_new(j, "status", st ? json_incref(st) : json_object());
                json_object_set(meta, "uid", json_object_get(om, "uid"));
                /* (the store sets the next one when it is written) */
                json_object_set(meta, "resourceVersion", json_object_get(om, "resourceVersion"));
                json_object_set(meta, "creationTimestamp",
                                json_object_get(om, "creationTimestamp"));
                keep_annotations(meta, om, SPEC_ANN_ON_DEPLOYMENT);
                json_t *tm = json_object_get(
                               json_object_get(json_object_get(j, "spec"), "template"), "metadata"),
                       *otm = json_object_get(
                               json_object_get(json_object_get(oj, "spec"), "template"),
                               "metadata");
                if (tm && otm && !replace)
                        keep_annotations(tm, otm, SPEC_ANN_ON_TEMPLATE);
                json_decref(oj);
        }
        if (spec_decode_new(&spec_type_deployment, j, &errs, (void **) &n) < 0)
                n = NULL;
        spec_errors_done(&errs);
        json_decref(j);
        if (n)
                spec_deployment_default(n);
        return n;
}

void agent_apply_keep(spec_deployment *d, const spec_deployment *old, unsigned flags) {
        if (!old)
                return;
        if (flags & AGENT_APPLY_KEEP_REPLICAS)
                d->spec.replicas = old->spec.replicas;
        if (flags & AGENT_APPLY_KEEP_PAUSED)
                d->spec.paused = old->spec.paused;
}

spec_deployment *agent_stored_form(const spec_deployment *d, const spec_deployment *old,
                                   unsigned flags) {
        spec_deployment *n = prepare(d, old, flags & AGENT_APPLY_REPLACE);

        if (n)
                agent_apply_keep(n, old, flags);
        return n;
}

/* A user's new template (an apply, an edit, an undo) is a new intent: an
 * automatic rollback before it is history, and `rollout status` follows
 * the new rollout (the controller's own rollback keeps the condition: it
 * writes no template through here). */
static void forget_rolled_back(const spec_deployment *old, spec_deployment *n) {
        if (old && !spec_template_equal(&old->spec.template, &n->spec.template))
                plan_remove_condition(&n->status.conditions, &n->status.n_conditions, "RolledBack");
}

agent_apply_result agent_stored_generation(const spec_deployment *old, spec_deployment *n) {
        if (!old) {
                n->metadata.generation = 1;
                return AGENT_CREATED;
        }
        forget_rolled_back(old, n);
        n->metadata.generation = old->metadata.generation;
        if (spec_or_annotations_differ(old, n)) {
                n->metadata.generation++;
                return AGENT_CONFIGURED;
        }
        /* Labels and who set what are not the spec: no new generation (as
         * Kubernetes), but they are written. */
        if (!spec_map_equal(&old->metadata.labels, &n->metadata.labels) ||
            !spec_meta_managed_fields_equal(&old->metadata, &n->metadata))
                return AGENT_CONFIGURED;
        return AGENT_UNCHANGED;
}

/* The object an apply of d would store, and whether that is a change. */
static spec_deployment *to_store(agent *a, const spec_deployment *d, unsigned flags,
                                 agent_apply_result *ret) {
        const spec_deployment *old = store_get(a->store, STORE_DEPLOYMENT, d->metadata.namespace,
                                               d->metadata.name);
        spec_deployment *n = prepare(d, old, flags & AGENT_APPLY_REPLACE);

        if (!n)
                return NULL;
        *ret = agent_stored_generation(old, n);
        if (*ret == AGENT_CREATED)
                n->metadata.creation_timestamp = agent_wall(a);
        return n;
}

/* AGENT_APPLY_KEEP_ROLLBACK: a copy of d with the stored template, when d
 * declares again the template that failed and was rolled back
 * automatically (the stored deployment has RolledBack and a ReplicaSet of
 * d's template is marked failed); NULL otherwise (or out of memory: then
 * d is applied as it is, and the controller's mark still keeps it from
 * rolling back twice). */
static spec_deployment *keep_rollback(agent *a, const spec_deployment *d) {
        const spec_deployment *cur = store_get(
                a->store, STORE_DEPLOYMENT, d->metadata.namespace ?: "default", d->metadata.name);
        const spec_condition *rb;
        const void *const *items;
        size_t n;

        if (!cur)
                return NULL;
        _cleanup_(spec_pod_template_freep) spec_pod_template *config = NULL;

        rb = spec_get_condition(cur->status.conditions, cur->status.n_conditions, "RolledBack");
        if (!rb || !streq_ptr(rb->status, "True") ||
            spec_template_equal(&cur->spec.template, &d->spec.template))
                return NULL;
        /* (tend.io/config-rollout: the template with the configuration it
         * would run with now) */
        if (agent__config_template(a, d, false, &config) < 0)
                return NULL;
        n = store_list(a->store, STORE_REPLICA_SET, &items);
        for (size_t i = 0; i < n; i++) {
                const spec_replica_set *rs = items[i];
                if (!spec_meta_owned_by(&rs->metadata, cur->metadata.uid) ||
                    !spec_map_get(&rs->metadata.annotations, AGENT_ANN_ROLLOUT_FAILED) ||
                    !spec_template_equal(&rs->spec.template, config ?: &d->spec.template))
                        continue;
                spec_deployment *k = spec_deployment_copy(d);
                spec_pod_template *t = k ? spec_pod_template_copy(&cur->spec.template) : NULL;
                if (!t)
                        return spec_deployment_free(k);
                spec_done(&spec_type_pod_template, &k->spec.template);
                k->spec.template = *t;
                free(t);
                log_debug("deployment/%s: its declaration asks again for the template of "
                          "replica set %s, which failed and was rolled back: kept rolled back",
                          d->metadata.name, rs->metadata.name);
                return k;
        }
        return NULL;
}

/* d (taken, also on failure) into the store, as an apply's result said. */
static int put_applied(agent *a, spec_deployment *d, agent_apply_result res) {
        log_info("deployment/%s: %s", d->metadata.name,
                 res == AGENT_CREATED ? "created" : "configured");
        return store_put(a->store, STORE_DEPLOYMENT, d, NULL);
}

int agent_apply_ex(agent *a, spec_deployment *const *ds, size_t n, spec_errors *errs,
                   agent_apply_result *results, unsigned flags) {
        bool dry_run = flags & AGENT_APPLY_DRY_RUN;
        size_t before = errs->n;
        int r;

        if (check_all(a, ds, n, flags & AGENT_APPLY_VALIDATED, false, errs) < 0)
                return -ENOMEM;
        if (errs->n > before || errs->dropped)
                return -EINVAL;

        for (size_t i = 0; i < n; i++) {
                agent_apply_result res;
                _cleanup_(spec_deployment_freep)
                        spec_deployment *kept = flags & AGENT_APPLY_KEEP_ROLLBACK
                                                        ? keep_rollback(a, ds[i])
                                                        : NULL;
                spec_deployment *d = to_store(a, kept ?: ds[i], flags, &res);

                if (!d) {
                        store_rollback(a->store);
                        return -ENOMEM;
                }
                if (results)
                        results[i] = res;
                if (res == AGENT_UNCHANGED || dry_run) {
                        spec_deployment_free(d);
                        continue;
                }
                r = put_applied(a, d, res);
                if (r < 0) {
                        store_rollback(a->store);
                        return r;
                }
        }
        if (dry_run)
                return 0;
        return acknowledge(a, 0);
}

/* ---- objects of any kind a user writes ---- */

void *agent_object_stored_form(store_kind kind, const void *obj, const void *old, unsigned flags) {
        const spec_type *t = store_kind_type(kind);
        spec_meta *m;
        void *n;

        if (kind == STORE_DEPLOYMENT)
                return agent_stored_form(obj, old, flags);
        /* stored as written: the user's object, with the identity the
         * store gave it (its version: the store's next) */
        n = spec_copy(t, obj);
        if (!n)
                return NULL;
        m = spec_object_meta(n);
        m->resource_version = 0;
        m->generation = 0;
        m->deletion_timestamp = 0;
        m->creation_timestamp = old ? spec_object_meta(old)->creation_timestamp : 0;
        free(m->uid);
        m->uid = NULL;
        if (old && spec_object_meta(old)->uid && !(m->uid = strdup(spec_object_meta(old)->uid)))
                return spec_free(t, n);
        return n;
}

agent_apply_result agent_object_generation(store_kind kind, const void *old, void *n) {
        spec_meta *m = spec_object_meta(n);
        uint64_t rv = m->resource_version;
        bool same;

        if (kind == STORE_DEPLOYMENT)
                return agent_stored_generation(old, n);
        if (!old)
                return AGENT_CREATED;
        m->resource_version = spec_object_meta(old)->resource_version;
        same = spec_equal(store_kind_type(kind), old, n);
        m->resource_version = rv;
        return same ? AGENT_UNCHANGED : AGENT_CONFIGURED;
}

int agent_write_prepared(agent *a, agent_write *w, size_t n, unsigned flags, spec_errors *errs) {
        bool dry_run = flags & AGENT_APPLY_DRY_RUN, wrote = false;
        _cleanup_free_ spec_deployment **ds = new0(spec_deployment *, n + 1);
        size_t nd = 0;
        int r;

        if (!ds)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (w[i].kind == STORE_DEPLOYMENT)
                        ds[nd++] = w[i].obj;
        if (check_all(a, ds, nd, true, true, errs) < 0)
                return -ENOMEM;
        if (errs->n || errs->dropped)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                spec_meta *m = spec_object_meta(w[i].obj);
                char uid[37];

                if (w[i].result == AGENT_CREATED)
                        m->creation_timestamp = agent_wall(a);
                /* What a dry run would create gets a uid, as the store
                 * would give it. */
                if (dry_run) {
                        if (!m->uid && !(m->uid = strdup(store_new_uid(uid))))
                                return -ENOMEM;
                        continue;
                }
                if (w[i].result == AGENT_UNCHANGED)
                        continue;
                log_info("%s/%s: %s", spec_kind_of(store_kind_type(w[i].kind))->singular, m->name,
                         w[i].result == AGENT_CREATED ? "created" : "configured");
                r = store_put(a->store, w[i].kind, TAKE_PTR(w[i].obj), NULL);
                if (r < 0) {
                        store_rollback(a->store);
                        return r;
                }
                wrote = true;
        }
        /* (nothing written, nothing to make durable) */
        return wrote ? acknowledge(a, 0) : 0;
}

int agent_apply_prepared(agent *a, spec_deployment **stored, const agent_apply_result *results,
                         size_t n, unsigned flags, spec_errors *errs) {
        _cleanup_free_ agent_write *w = new0(agent_write, n + 1);
        int r;

        if (!w)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                w[i] = (agent_write){ .kind = STORE_DEPLOYMENT,
                                      .obj = stored[i],
                                      .result = results[i] };
        r = agent_write_prepared(a, w, n, flags, errs);
        for (size_t i = 0; i < n; i++)
                stored[i] = w[i].obj; /* (NULL: taken) */
        return r;
}

int agent_delete_object(agent *a, store_kind kind, const char *ns, const char *name) {
        int r = store_delete(a->store, kind, ns, name);

        if (r >= 0)
                log_info("%s/%s: deleted", spec_kind_of(store_kind_type(kind))->singular, name);
        return acknowledge(a, r);
}

int agent_apply(agent *a, spec_deployment *const *ds, size_t n, spec_errors *errs,
                agent_apply_result *results) {
        return agent_apply_ex(a, ds, n, errs, results, 0);
}

/* Applies fn to a copy of the stored deployment and writes it durably. */
static int update_deployment(agent *a, const char *ns, const char *name,
                             int (*fn)(agent *a, spec_deployment *d, void *arg), void *arg) {
        const spec_deployment *d = store_get(a->store, STORE_DEPLOYMENT, ns, name);
        spec_deployment *n;
        int r;

        if (!d)
                return -ENOENT;
        n = spec_deployment_copy(d);
        if (!n)
                return -ENOMEM;
        r = fn(a, n, arg);
        if (r <= 0) { /* error, or nothing to change */
                spec_deployment_free(n);
                return r;
        }
        forget_rolled_back(d, n);
        if (spec_or_annotations_differ(d, n))
                n->metadata.generation++;
        return acknowledge(a, store_put(a->store, STORE_DEPLOYMENT, n, NULL));
}

struct scale {
        int32_t replicas;
        json_t *managed;
};

static int do_scale(agent *a, spec_deployment *d, void *arg) {
        struct scale *sc = arg;
        int r;

        if (d->spec.replicas == sc->replicas)
                return 0;
        d->spec.replicas = sc->replicas;
        if (sc->managed && (r = spec_meta_set_managed_fields(&d->metadata, sc->managed, NULL)) < 0)
                return r;
        return 1;
}

int agent_scale_deployment_managed(agent *a, const char *ns, const char *name, int32_t replicas,
                                   json_t *managed) {
        struct scale sc = { replicas, managed };

        if (replicas < 0)
                return -EINVAL;
        return update_deployment(a, ns, name, do_scale, &sc);
}

int agent_scale_deployment(agent *a, const char *ns, const char *name, int32_t replicas) {
        return agent_scale_deployment_managed(a, ns, name, replicas, NULL);
}

static int do_pause(agent *a, spec_deployment *d, void *arg) {
        bool paused = *(bool *) arg;
        if (d->spec.paused == paused)
                return 0;
        d->spec.paused = paused;
        return 1;
}

int agent_pause(agent *a, const char *ns, const char *name, bool paused) {
        return update_deployment(a, ns, name, do_pause, &paused);
}

static int do_restart(agent *a, spec_deployment *d, void *arg) {
        char buf[TIMESTAMP_MAX];
        /* Seconds, as kubectl's RFC 3339; a second restart within the same
         * second would be a no-op, so take microseconds then. */
        usec_t now = agent_wall(a);
        const char *cur = spec_map_get(&d->spec.template.metadata.annotations,
                                       SPEC_ANN_RESTARTED_AT);
        format_timestamp(buf, now / USEC_PER_SEC * USEC_PER_SEC);
        if (streq_ptr(cur, buf))
                format_timestamp(buf, now);
        return spec_map_set(&d->spec.template.metadata.annotations, SPEC_ANN_RESTARTED_AT, buf) < 0
                       ? -ENOMEM
                       : 1;
}

int agent_restart_rollout(agent *a, const char *ns, const char *name) {
        const spec_deployment *d = store_get(a->store, STORE_DEPLOYMENT, ns, name);
        if (d && d->spec.paused)
                return -EBUSY; /* kubectl: "can't restart paused deployment (run rollout resume
                                  first)" */
        return update_deployment(a, ns, name, do_restart, NULL);
}

int agent_delete_deployment(agent *a, const char *ns, const char *name) {
        int r = store_delete(a->store, STORE_DEPLOYMENT, ns, name);

        if (r < 0)
                return r;
        log_info("deployment/%s: deleted; its replica sets and pods follow", name);
        return acknowledge(a, r);
}

int agent_delete_deployment_foreground(agent *a, const char *ns, const char *name) {
        const spec_deployment *d = store_get(a->store, STORE_DEPLOYMENT, ns, name);
        spec_deployment *n;

        if (!d)
                return -ENOENT;
        if (d->metadata.deletion_timestamp)
                return 0; /* on its way already */
        n = spec_deployment_copy(d);
        if (!n)
                return -ENOMEM;
        n->metadata.deletion_timestamp = agent_wall(a);
        log_info("deployment/%s: deleting; it goes when its pods have stopped (foreground)", name);
        return acknowledge(a, store_put(a->store, STORE_DEPLOYMENT, n, NULL));
}

int agent_scale_replica_set(agent *a, const char *ns, const char *name, int32_t replicas) {
        const spec_replica_set *rs = store_get(a->store, STORE_REPLICA_SET, ns, name);
        spec_replica_set *n;

        if (!rs)
                return -ENOENT;
        if (replicas < 0)
                return -EINVAL;
        n = spec_replica_set_copy(rs);
        if (!n)
                return -ENOMEM;
        n->spec.replicas = replicas;
        return acknowledge(a, store_put(a->store, STORE_REPLICA_SET, n, NULL));
}

int agent_delete_replica_set(agent *a, const char *ns, const char *name) {
        return acknowledge(a, store_delete(a->store, STORE_REPLICA_SET, ns, name));
}

int agent_record_event(agent *a, store_kind kind, const spec_meta *m, const char *type,
                       const char *reason, const char *message) {
        int r = agent__event(a, kind, m, type, reason, "%s", message);

        if (r >= 0 && !a->processing)
                r = store_commit(a->store, false);
        return r;
}

int agent_delete_pod(agent *a, const char *ns, const char *name, int64_t grace_seconds) {
        const spec_pod *p = store_get(a->store, STORE_POD, ns, name);
        int64_t grace;
        spec_pod *n;

        if (!p)
                return -ENOENT;
        grace = grace_seconds >= 0 ? grace_seconds : p->spec.termination_grace_period_seconds;
        if (p->metadata.deletion_timestamp &&
            grace >= (p->metadata.deletion_grace_period_seconds != SPEC_UNSET64
                              ? p->metadata.deletion_grace_period_seconds
                              : p->spec.termination_grace_period_seconds))
                return 0;
        n = spec_pod_copy(p);
        if (!n)
                return -ENOMEM;
        if (!n->metadata.deletion_timestamp)
                n->metadata.deletion_timestamp = agent_wall(a);
        n->metadata.deletion_grace_period_seconds = grace;
        return acknowledge(a, store_put(a->store, STORE_POD, n, NULL));
}

int agent_evict_node(agent *a, const char *node, bool gone, usec_t lost_for) {
        const void *const *items;
        size_t n = store_list(a->store, STORE_POD, &items), k = 0;
        _cleanup_free_ const spec_pod **pods = new0(const spec_pod *, n + 1);
        int r = 0;

        if (!pods)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) { /* a copy: the writes below change the list */
                const spec_pod *p = items[i];
                if (!streq_ptr(p->spec.node_name, node) ||
                    (!gone && p->metadata.deletion_timestamp))
                        continue;
                /* fence: the node stops it first; replaced after that */
                if (!gone && agent__lost_policy(a, p) == PLAN_LOST_FENCE &&
                    lost_for < plan_fence_replace_at(0, agent__grace(p)))
                        continue;
                pods[k++] = p;
        }
        for (size_t i = 0; i < k && r >= 0; i++) {
                const spec_pod *p = pods[i];
                spec_pod *c;
                if (gone) {
                        log_info("pod/%s: its node/%s was deleted; removed", p->metadata.name,
                                 node);
                        r = agent__remove_pod(a, p);
                        continue;
                }
                (void) agent__event(a, STORE_POD, &p->metadata, "Warning", "NodeLost",
                                    "node/%s lost its lease: the pod is deleted and replaced on "
                                    "another node; node/%s stops it if it comes back",
                                    node, node);
                c = spec_pod_copy(p);
                if (!c)
                        return -ENOMEM;
                c->metadata.deletion_timestamp = agent_wall(a);
                c->metadata.deletion_grace_period_seconds =
                        c->spec.termination_grace_period_seconds;
                log_info("pod/%s: node/%s is lost; evicted", p->metadata.name, node);
                r = store_put(a->store, STORE_POD, c, NULL);
        }
        if (r >= 0 && !a->processing)
                r = store_commit(a->store, false);
        if (r < 0) {
                store_rollback(a->store);
                agent__drop_events(a);
                return r;
        }
        agent__flush_events(a);
        if (k)
                agent_kick(a);
        return (int) MIN(k, (size_t) INT_MAX);
}

/* ---- rollback (docs/deployments.md §4) ------------------------------------------------------ */

typedef struct rollback_arg {
        const spec_replica_set *target;
} rollback_arg;

static int do_rollback(agent *a, spec_deployment *d, void *arg) {
        return agent__rollback_to(d, ((rollback_arg *) arg)->target);
}

int agent__rollback_to(spec_deployment *d, const spec_replica_set *rs) {
        spec_pod_template *t = spec_pod_template_copy(&rs->spec.template);
        spec_map ann = {};
        int r = 0;

        if (!t)
                return -ENOMEM;
        spec_map_remove(&t->metadata.labels, SPEC_LABEL_POD_TEMPLATE_HASH);
        spec_done(&spec_type_pod_template, &d->spec.template);
        d->spec.template = *t;
        free(t);
        /* Annotations: the deployment's own controller keys, then the
         * target's other annotations (change-cause comes back with it). */
        for (size_t i = 0; i < d->metadata.annotations.n; i++) {
                const char *k = d->metadata.annotations.items[i].key;
                if (agent__controller_key(k))
                        RET_GATHER(r,
                                   spec_map_set(&ann, k, d->metadata.annotations.items[i].value));
        }
        for (size_t i = 0; i < rs->metadata.annotations.n; i++) {
                const char *k = rs->metadata.annotations.items[i].key;
                if (spec_annotation_to_replica_set(k))
                        RET_GATHER(r,
                                   spec_map_set(&ann, k, rs->metadata.annotations.items[i].value));
        }
        if (r < 0) {
                spec_map_done(&ann);
                return r; /* d is the caller's copy: it is dropped, nothing is written */
        }
        spec_map_done(&d->metadata.annotations);
        d->metadata.annotations = ann;
        return 1;
}

int agent_rollback(agent *a, const char *ns, const char *name, int64_t to_revision, bool dry_run,
                   int64_t *ret_revision, char **ret_error) {
        const spec_deployment *d = store_get(a->store, STORE_DEPLOYMENT, ns, name);
        const void *const *items;
        _cleanup_free_ const spec_replica_set **rss = NULL;
        _cleanup_free_ int64_t *revs = NULL;
        size_t n = store_list(a->store, STORE_REPLICA_SET, &items), k = 0, idx;
        rollback_arg arg;
        int r;

        *ret_error = NULL;
        if (!d) {
                *ret_error = strprintf("deployments.apps \"%s\" not found", name);
                return -ENOENT;
        }
        rss = new0(const spec_replica_set *, n);
        revs = new0(int64_t, n);
        if ((!rss || !revs) && n)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const spec_replica_set *rs = items[i];
                if (streq_ptr(rs->metadata.namespace, ns) &&
                    spec_meta_owned_by(&rs->metadata, d->metadata.uid)) {
                        rss[k] = rs;
                        revs[k++] = spec_meta_revision(&rs->metadata);
                }
        }
        r = plan_undo_target(revs, k, to_revision, &idx);
        if (r == -EINVAL) {
                *ret_error = strprintf("unable to find specified revision %" PRId64 " in history",
                                       to_revision);
                return r;
        }
        if (r == -ENOENT) {
                *ret_error = to_revision == 0
                                     ? strprintf("no rollout history found for deployment \"%s\"",
                                                 name)
                                     : strprintf("unable to find specified revision %" PRId64
                                                 " in history",
                                                 to_revision);
                return r;
        }
        if (d->spec.paused) {
                *ret_error = strdup("you cannot rollback a paused deployment; resume it first with "
                                    "'tend rollout resume' and try again");
                return -EBUSY;
        }
        if (ret_revision)
                *ret_revision = revs[idx];
        _cleanup_(spec_pod_template_freep) spec_pod_template *config = NULL;
        if (agent__config_template(a, d, false, &config) < 0)
                return -ENOMEM;
        if (spec_template_equal(&rss[idx]->spec.template, config ?: &d->spec.template)) {
                *ret_error = strprintf("skipped rollback (current template already matches "
                                       "revision %" PRId64 ")",
                                       revs[idx]);
                return -EALREADY;
        }
        if (dry_run)
                return 0;
        arg.target = rss[idx];
        int64_t rev = revs[idx];
        /* The event goes into the same durable commit as the rollback. */
        (void) agent__event(a, STORE_DEPLOYMENT, &d->metadata, "Normal", "DeploymentRollback",
                            "Rolled back deployment \"%s\" to revision %" PRId64, name, rev);
        r = update_deployment(a, ns, name, do_rollback, &arg);
        if (r >= 0)
                log_info("deployment/%s: rolled back to revision %" PRId64, name, rev);
        else
                store_rollback(a->store); /* the event too */
        return r;
}
