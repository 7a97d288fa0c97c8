/* SPDX-License-Identifier: MIT */

/*
 * The deployment controller (docs/deployments.md §2-§6): finds or creates the new
 * ReplicaSet, steps the rollout (RollingUpdate or Recreate) or scales
 * proportionally, prunes history, and writes status and conditions. One
 * kind of mutation per pass, as Kubernetes; progress comes from the next
 * pass, triggered by the ReplicaSets' status changes.
 */

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>

#include "ctl-sync.h"

static void selector_freep(spec_selector **p) {
        if (*p)
                spec_free(&spec_type_selector, *p);
}

/* A Deployment's annotation its ReplicaSets do not get (the registry's
 * to_replica_set: the revisions, last-applied, a promote request, ...). */
static bool skipped(const char *key) {
        return !spec_annotation_to_replica_set(key);
}

static int cmp_rs(const spec_replica_set *x, const spec_replica_set *y) {
        if (x->metadata.creation_timestamp != y->metadata.creation_timestamp)
                return x->metadata.creation_timestamp < y->metadata.creation_timestamp ? -1 : 1;
        return strcmp(x->metadata.name, y->metadata.name);
}

static void dctx_done(dctx *c) {
        free(c->rss);
        free(c->in);
        free(c->canary_wait);
        spec_deployment_free(c->nd);
        spec_pod_template_free(c->own_tmpl);
}

/* The RSs this deployment controls (by uid), oldest first, with their pod
 * counts. Re-run after writes: borrowed objects stay valid until the
 * commit, but the numbers must be fresh. */
static int gather(dctx *c) {
        agent *a = c->a;
        const void *const *items;
        size_t n = store_list(a->store, STORE_REPLICA_SET, &items), np;

        free(c->rss);
        free(c->in);
        c->n = 0;
        c->new_index = -1;
        c->new_crashlooping = 0;
        c->rss = new0(const spec_replica_set *, n);
        c->in = new0(plan_rs, n);
        if (!c->rss || !c->in)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const spec_replica_set *rs = items[i];
                if (streq_ptr(rs->metadata.namespace, c->d->metadata.namespace) &&
                    spec_meta_owned_by(&rs->metadata, c->d->metadata.uid))
                        c->rss[c->n++] = rs;
        }
        for (size_t i = 1; i < c->n; i++)
                for (size_t k = i; k > 0 && cmp_rs(c->rss[k - 1], c->rss[k]) > 0; k--) {
                        const spec_replica_set *t = c->rss[k];
                        c->rss[k] = c->rss[k - 1];
                        c->rss[k - 1] = t;
                }
        for (size_t i = 0; i < c->n; i++) {
                const spec_replica_set *rs = c->rss[i];
                const char *max = spec_map_get(&rs->metadata.annotations, SPEC_ANN_MAX_REPLICAS);
                const char *des = spec_map_get(&rs->metadata.annotations,
                                               SPEC_ANN_DESIRED_REPLICAS);
                int64_t v;

                c->in[i] = (plan_rs){
                        .name = rs->metadata.name,
                        .created = rs->metadata.creation_timestamp,
                        .spec_replicas = rs->spec.replicas,
                        .available = rs->status.available_replicas,
                        .max_replicas_ann = max && safe_atoi64(max, &v) >= 0 ? (int32_t) v : -1,
                        .desired_ann = des && safe_atoi64(des, &v) >= 0 ? (int32_t) v : -1,
                };
                if (spec_template_equal(&rs->spec.template, c->tmpl) && c->new_index < 0) {
                        c->new_index = (ssize_t) i;
                        c->in[i].is_new = true;
                }
        }
        /* Pods: active and terminating per RS (terminating pods occupy room
         * under replicas + maxSurge, see plan_rs_occupancy()); those evicted
         * from a lost node neither (they would never go: issue 29). */
        np = store_list(a->store, STORE_POD, &items);
        for (size_t i = 0; i < np; i++) {
                const spec_pod *p = items[i];
                const spec_owner_ref *o = spec_meta_controller(&p->metadata);
                if (!o || spec_pod_terminal(p) ||
                    !streq_ptr(p->metadata.namespace, c->d->metadata.namespace) ||
                    agent__pod_evicted_unknown(a, p))
                        continue;
                for (size_t k = 0; k < c->n; k++)
                        if (streq_ptr(c->rss[k]->metadata.uid, o->uid)) {
                                const spec_container_status *cs =
                                        p->status.n_container_statuses
                                                ? &p->status.container_statuses[0]
                                                : NULL;
                                if (p->metadata.deletion_timestamp)
                                        c->in[k].terminating++;
                                else
                                        c->in[k].active++;
                                if ((ssize_t) k == c->new_index && cs && cs->state.waiting &&
                                    streq_ptr(cs->state.waiting->reason, "CrashLoopBackOff"))
                                        c->new_crashlooping++;
                                break;
                        }
        }
        return 0;
}

static void set_deployment_revision(dctx *c, int64_t rev) {
        char buf[32];
        snprintf(buf, sizeof buf, "%" PRId64, rev);
        RET_GATHER(c->error, spec_map_set(&c->nd->metadata.annotations, SPEC_ANN_REVISION, buf));
}

static int set_replicas_annotations(dctx *c, spec_replica_set *rs) {
        char buf[32];
        int r = 0;

        snprintf(buf, sizeof buf, "%d", c->d->spec.replicas);
        RET_GATHER(r, spec_map_set(&rs->metadata.annotations, SPEC_ANN_DESIRED_REPLICAS, buf));
        snprintf(buf, sizeof buf, "%d", c->d->spec.replicas + c->surge);
        RET_GATHER(r, spec_map_set(&rs->metadata.annotations, SPEC_ANN_MAX_REPLICAS, buf));
        return r;
}

/* scaleReplicaSet: size and the desired/max annotations; an event when the
 * size changes. */
static int scale_rs(dctx *c, size_t i, int32_t replicas) {
        const spec_replica_set *rs = c->rss[i];
        _cleanup_(spec_replica_set_freep) spec_replica_set *n = spec_replica_set_copy(rs);
        int32_t from = rs->spec.replicas;

        if (!n)
                return -ENOMEM;
        n->spec.replicas = replicas;
        if (set_replicas_annotations(c, n) < 0)
                return -ENOMEM;
        if (spec_replica_set_equal(rs, n))
                return 0;
        if (from != replicas) {
                (void) agent__event(c->a, STORE_DEPLOYMENT, &c->d->metadata, "Normal",
                                    "ScalingReplicaSet", "Scaled %s replica set %s from %d to %d",
                                    replicas > from ? "up" : "down", rs->metadata.name, from,
                                    replicas);
                log_info("deployment/%s: scaled %s replica set %s from %d to %d",
                         c->d->metadata.name, replicas > from ? "up" : "down", rs->metadata.name,
                         from, replicas);
        }
        return store_put(c->a->store, STORE_REPLICA_SET, TAKE_PTR(n), NULL);
}

/* getNewReplicaSet (§2.4): the RS of the current template, its revision
 * brought up to date — or a new one when create is set. Returns its index,
 * -1 when there is none (and none was to be created), or -errno. */
static ssize_t new_rs(dctx *c, bool create) {
        const spec_deployment *d = c->d;
        int64_t want = ctl__max_old_revision(c) + 1;
        char hash[SPEC_HASH_MAX], buf[32];
        int r;

        if (c->new_index >= 0) {
                const spec_replica_set *rs = c->rss[c->new_index];
                _cleanup_(spec_replica_set_freep) spec_replica_set *n = spec_replica_set_copy(rs);
                int64_t cur = spec_meta_revision(&rs->metadata);

                r = 0;
                if (!n)
                        return -ENOMEM;
                if (cur < want) {
                        /* Revived by a rollback: renumbered to max + 1, the old
                         * number kept in revision-history (§4.2). */
                        if (cur > 0) {
                                _cleanup_free_ char *h = plan_revision_history_append(
                                        spec_map_get(&n->metadata.annotations,
                                                     SPEC_ANN_REVISION_HISTORY),
                                        cur);
                                RET_GATHER_PTR(r, h);
                                if (h)
                                        RET_GATHER(r, spec_map_set(&n->metadata.annotations,
                                                                   SPEC_ANN_REVISION_HISTORY, h));
                        }
                        snprintf(buf, sizeof buf, "%" PRId64, want);
                        RET_GATHER(r,
                                   spec_map_set(&n->metadata.annotations, SPEC_ANN_REVISION, buf));
                        /* Tried again (undo, apply): a failure now is a new
                         * one, with its own automatic rollback. */
                        spec_map_remove(&n->metadata.annotations, AGENT_ANN_ROLLOUT_FAILED);
                        spec_map_remove(&n->metadata.annotations, AGENT_ANN_CANARY_SINCE);
                        /* a revision that never completed tried again: an
                         * automatic rollback before is history (going back
                         * to one that completed may be that rollback) */
                        if (!spec_map_get(&n->metadata.annotations, AGENT_ANN_COMPLETE)) {
                                plan_remove_condition(&c->nd->status.conditions,
                                                      &c->nd->status.n_conditions, "RolledBack");
                                /* its canaries were abandoned: they come first again */
                                spec_map_remove(&n->metadata.annotations, AGENT_ANN_PROMOTED);
                        }
                }
                for (size_t i = 0; i < d->metadata.annotations.n; i++)
                        if (!skipped(d->metadata.annotations.items[i].key))
                                RET_GATHER(r, spec_map_set(&n->metadata.annotations,
                                                           d->metadata.annotations.items[i].key,
                                                           d->metadata.annotations.items[i].value));
                if (r < 0)
                        return r;
                /* Kubernetes never removes a copied annotation; tend's own
                 * are settings the ReplicaSet controller reads (the crash-loop
                 * back-off), so one removed from the deployment goes. */
                for (size_t i = n->metadata.annotations.n; i > 0; i--) {
                        const char *k = n->metadata.annotations.items[i - 1].key;
                        if (startswith(k, SPEC_ANN_PREFIX) && !agent__rs_own_annotation(k) &&
                            !spec_map_get(&d->metadata.annotations, k))
                                spec_map_remove(&n->metadata.annotations, k);
                }
                n->spec.min_ready_seconds = d->spec.min_ready_seconds;
                set_deployment_revision(c, spec_meta_revision(&n->metadata));
                if (c->has_deadline &&
                    !spec_get_condition(c->nd->status.conditions, c->nd->status.n_conditions,
                                        "Progressing"))
                        ctl__set_progressing(c, "True", "FoundNewReplicaSet",
                                             "Found new replica set \"%s\"", rs->metadata.name);
                if (!spec_replica_set_equal(rs, n)) {
                        const void *stored;
                        r = store_put(c->a->store, STORE_REPLICA_SET, TAKE_PTR(n), &stored);
                        if (r < 0)
                                return r;
                        /* Later writes this pass start from this version. */
                        c->rss[c->new_index] = stored;
                }
                return c->new_index;
        }
        if (!create)
                return -1;

        /* A new revision: built whole, or not at all. */
        _cleanup_(spec_replica_set_freep) spec_replica_set *n = spec_replica_set_new();
        _cleanup_(spec_pod_template_freep) spec_pod_template *t = spec_pod_template_copy(c->tmpl);
        /* freed here only while its fields are empty; then n owns it */
        _cleanup_free_ spec_owner_ref *ref = calloc(1, sizeof *ref);
        _cleanup_(selector_freep)
                spec_selector *sel = spec_copy(&spec_type_selector, d->spec.selector);
        if (!n || !t || !ref || !sel || !spec_template_hash(t, d->status.collision_count, hash))
                return -ENOMEM;
        n->metadata.name = strprintf("%s-%s", d->metadata.name, hash);
        n->metadata.namespace = strdup(d->metadata.namespace);
        if (!n->metadata.name || !n->metadata.namespace)
                return -ENOMEM;
        if (store_get(c->a->store, STORE_REPLICA_SET, d->metadata.namespace, n->metadata.name)) {
                /* A hash collision with an RS that is not this template's:
                 * count it and try again with a new hash (§2.4). */
                c->nd->status.collision_count = c->nd->status.collision_count == SPEC_UNSET
                                                        ? 1
                                                        : c->nd->status.collision_count + 1;
                agent__enqueue(c->a, STORE_DEPLOYMENT, d->metadata.namespace, d->metadata.name);
                return -1;
        }
        r = 0;
        RET_GATHER(r, spec_map_set(&t->metadata.labels, SPEC_LABEL_POD_TEMPLATE_HASH, hash));
        RET_GATHER(r, spec_map_set(&sel->match_labels, SPEC_LABEL_POD_TEMPLATE_HASH, hash));
        for (size_t i = 0; i < t->metadata.labels.n; i++)
                RET_GATHER(r, spec_map_set(&n->metadata.labels, t->metadata.labels.items[i].key,
                                           t->metadata.labels.items[i].value));
        for (size_t i = 0; i < d->metadata.annotations.n; i++)
                if (!skipped(d->metadata.annotations.items[i].key))
                        RET_GATHER(r, spec_map_set(&n->metadata.annotations,
                                                   d->metadata.annotations.items[i].key,
                                                   d->metadata.annotations.items[i].value));
        snprintf(buf, sizeof buf, "%" PRId64, want);
        RET_GATHER(r, spec_map_set(&n->metadata.annotations, SPEC_ANN_REVISION, buf));
        RET_GATHER(r, set_replicas_annotations(c, n));
        if (c->own_tmpl) {
                /* tend.io/config-rollout: what this revision runs with */
                _cleanup_free_ char *names = agent__config_names(c->a, d->metadata.namespace, t);
                RET_GATHER_PTR(r, names);
                if (names && *names)
                        RET_GATHER(r,
                                   spec_map_set(&n->metadata.annotations, SPEC_ANN_CONFIG, names));
        }
        RET_GATHER_PTR(r, ref->api_version = strdup("apps/v1"));
        RET_GATHER_PTR(r, ref->kind = strdup("Deployment"));
        RET_GATHER_PTR(r, ref->name = strdup(d->metadata.name));
        RET_GATHER_PTR(r, ref->uid = strdup(d->metadata.uid));
        ref->controller = ref->block_owner_deletion = true;
        n->metadata.owner_references = TAKE_PTR(ref);
        n->metadata.n_owner_references = 1;
        n->metadata.generation = 1;
        n->metadata.creation_timestamp = c->now;
        n->spec.selector = TAKE_PTR(sel);
        n->spec.template = *t;
        free(TAKE_PTR(t)); /* its fields moved into n */
        if (r < 0)
                return r;
        n->spec.min_ready_seconds = d->spec.min_ready_seconds;

        /* The size it starts with: D for Recreate, else what the rolling
         * bound allows next to the old RSs (the new one at 0). */
        if (d->spec.strategy.type == SPEC_STRATEGY_RECREATE)
                n->spec.replicas = d->spec.replicas;
        else {
                _cleanup_free_ plan_rs *in = new0(plan_rs, c->n + 1);
                if (!in)
                        return -ENOMEM;
                memcpy(in, c->in, sizeof(plan_rs) * c->n);
                in[c->n] = (plan_rs){ .name = n->metadata.name, .is_new = true };
                n->spec.replicas = plan_new_rs_replicas(d->spec.replicas, c->surge, in, c->n + 1,
                                                        c->n);
                int32_t cap = ctl__canary_cap(c, NULL, -1);
                if (cap >= 0 && n->spec.replicas > cap)
                        n->spec.replicas = cap; /* tend.io/canary */
        }
        int32_t size = n->spec.replicas;
        _cleanup_free_ char *rs_name = strdup(n->metadata.name);
        if (!rs_name)
                return -ENOMEM;
        r = store_put(c->a->store, STORE_REPLICA_SET, TAKE_PTR(n), NULL);
        if (r < 0)
                return r;
        c->a->metrics.rollouts_started++;
        /* a new rollout: an automatic rollback before it is history */
        plan_remove_condition(&c->nd->status.conditions, &c->nd->status.n_conditions, "RolledBack");
        log_info("deployment/%s: created replica set %s (revision %" PRId64 ")", d->metadata.name,
                 rs_name, want);
        if (size > 0)
                (void) agent__event(c->a, STORE_DEPLOYMENT, &d->metadata, "Normal",
                                    "ScalingReplicaSet", "Scaled up replica set %s from 0 to %d",
                                    rs_name, size);
        set_deployment_revision(c, want);
        if (c->has_deadline)
                ctl__set_progressing(c, "True", "NewReplicaSetCreated",
                                     "Created new replica set \"%s\"", rs_name);
        r = gather(c);
        if (r < 0)
                return r;
        return c->new_index;
}

/* ---- status ------------------------------------------------------------------------------- */

/* calculateStatus (§5.1) from the ReplicaSets as they are now. */
static void compute_status(dctx *c) {
        spec_deployment_status *st = &c->nd->status;
        int32_t total_spec = 0, min_available;
        const char *avail_status, *avail_reason, *avail_msg;

        st->replicas = st->updated_replicas = st->ready_replicas = st->available_replicas = 0;
        st->terminating_replicas = 0;
        for (size_t i = 0; i < c->n; i++) {
                const spec_replica_set *rs = store_get(c->a->store, STORE_REPLICA_SET,
                                                       c->rss[i]->metadata.namespace,
                                                       c->rss[i]->metadata.name);
                if (!rs)
                        continue;
                st->replicas += rs->status.replicas;
                st->ready_replicas += rs->status.ready_replicas;
                st->available_replicas += rs->status.available_replicas;
                st->terminating_replicas += rs->status.terminating_replicas;
                total_spec += rs->spec.replicas;
                if ((ssize_t) i == c->new_index)
                        st->updated_replicas = rs->status.replicas;
        }
        st->unavailable_replicas = MAX(0, total_spec - st->available_replicas);
        st->observed_generation = c->d->metadata.generation;

        min_available = c->d->spec.replicas - c->unav;
        if (st->available_replicas >= min_available) {
                avail_status = "True";
                avail_reason = "MinimumReplicasAvailable";
                avail_msg = "Deployment has minimum availability.";
        } else {
                avail_status = "False";
                avail_reason = "MinimumReplicasUnavailable";
                avail_msg = "Deployment does not have minimum availability.";
        }
        RET_GATHER(c->error, plan_set_condition(&st->conditions, &st->n_conditions, "Available",
                                                avail_status, avail_reason, avail_msg, c->now));
}

/* syncRolloutStatus (§5.3): the Progressing condition and the deadline. */
static void progress(dctx *c) {
        const spec_deployment_status *old = &c->d->status;
        spec_deployment_status *st = &c->nd->status;
        const spec_condition *cond;
        const char *new_name = c->new_index >= 0 ? c->rss[c->new_index]->metadata.name : "";
        bool complete, progressing, timed_out = false;

        if (!c->has_deadline) {
                plan_remove_condition(&st->conditions, &st->n_conditions, "Progressing");
                return;
        }
        cond = spec_get_condition(st->conditions, st->n_conditions, "Progressing");
        if (st->replicas == st->updated_replicas && cond &&
            streq_ptr(cond->reason, "NewReplicaSetAvailable"))
                return; /* complete already */
        complete = plan_deployment_complete(c->nd);
        progressing = st->updated_replicas > old->updated_replicas ||
                      (st->replicas - st->updated_replicas) <
                              (old->replicas - old->updated_replicas) ||
                      st->ready_replicas > old->ready_replicas ||
                      st->available_replicas > old->available_replicas;
        if (cond && !complete && !progressing) {
                if (streq_ptr(cond->reason, "ProgressDeadlineExceeded"))
                        timed_out = true;
                else if (!streq_ptr(cond->reason, "NewReplicaSetAvailable") &&
                         !streq_ptr(cond->reason, "WaitingForPromotion"))
                        timed_out = cond->last_update_time +
                                            (usec_t) c->d->spec.progress_deadline_seconds *
                                                    USEC_PER_SEC <
                                    c->now;
        }
        if (complete) {
                if (!cond || !streq_ptr(cond->reason, "NewReplicaSetAvailable")) {
                        c->a->metrics.rollouts_completed++;
                        log_info("deployment/%s: replica set %s has successfully progressed",
                                 c->d->metadata.name, new_name);
                }
                ctl__set_progressing(c, "True", "NewReplicaSetAvailable",
                                     "ReplicaSet \"%s\" has successfully progressed.", new_name);
        } else if (progressing) {
                _cleanup_free_ char *msg = strprintf("ReplicaSet \"%s\" is progressing.", new_name);
                /* Progress refreshes lastUpdateTime even with the same reason;
                 * the transition time stays while the status stays True. */
                RET_GATHER_PTR(c->error, msg);
                RET_GATHER(c->error,
                           plan_refresh_condition(&st->conditions, &st->n_conditions, "Progressing",
                                                  "True", "ReplicaSetUpdated", msg, c->now));
        } else if (timed_out) {
                const spec_condition *cur = spec_get_condition(st->conditions, st->n_conditions,
                                                               "Progressing");
                if (!cur || !streq_ptr(cur->reason, "ProgressDeadlineExceeded")) {
                        c->a->metrics.rollouts_failed++;
                        log_warning("deployment/%s: replica set %s has timed out progressing",
                                    c->d->metadata.name, new_name);
                        (void) agent__event(c->a, STORE_DEPLOYMENT, &c->d->metadata, "Warning",
                                            "ProgressDeadlineExceeded",
                                            "ReplicaSet \"%s\" has timed out progressing.",
                                            new_name);
                }
                ctl__set_progressing(c, "False", "ProgressDeadlineExceeded",
                                     "ReplicaSet \"%s\" has timed out progressing.", new_name);
        }
        /* Check again when the deadline passes, if nothing else happens. */
        cond = spec_get_condition(st->conditions, st->n_conditions, "Progressing");
        if (!complete && cond && !streq_ptr(cond->reason, "ProgressDeadlineExceeded"))
                agent__enqueue_at_wall(
                        c->a, STORE_DEPLOYMENT, c->d->metadata.namespace, c->d->metadata.name,
                        cond->last_update_time +
                                (usec_t) c->d->spec.progress_deadline_seconds * USEC_PER_SEC +
                                USEC_PER_SEC);
}

static int write_back(dctx *c) {
        spec_deployment *n;

        if (c->error < 0)
                return c->error; /* half-built: not written; the sync is retried */
        if (spec_deployment_equal(c->d, c->nd))
                return 0;
        n = TAKE_PTR(c->nd);
        return store_put(c->a->store, STORE_DEPLOYMENT, n, NULL);
}

/* ---- history ------------------------------------------------------------------------------ */

/* tend.io/config-rollout: the snapshots no revision names any more. */
static int prune_snapshots(dctx *c) {
        return c->own_tmpl ? agent__config_prune(c->a, c->d->metadata.namespace, c->d->metadata.uid,
                                                 c->tmpl)
                           : 0;
}

static int cleanup_history(dctx *c) {
        int32_t limit = c->d->spec.revision_history_limit;
        _cleanup_free_ plan_old_rs *old = NULL;
        _cleanup_free_ bool *del = NULL;
        _cleanup_free_ size_t *idx = NULL;
        size_t k = 0;
        int r;

        if (limit == SPEC_UNSET || limit == INT32_MAX)
                return prune_snapshots(c);
        old = new0(plan_old_rs, c->n);
        del = new0(bool, c->n);
        idx = new0(size_t, c->n);
        if (!old || !del || !idx)
                return -ENOMEM;
        for (size_t i = 0; i < c->n; i++) {
                const spec_replica_set *rs = c->rss[i];
                if ((ssize_t) i == c->new_index)
                        continue;
                idx[k] = i;
                old[k++] = (plan_old_rs){
                        .name = rs->metadata.name,
                        .created = rs->metadata.creation_timestamp,
                        .spec_replicas = rs->spec.replicas,
                        .status_replicas = rs->status.replicas,
                        .settled = rs->metadata.generation <= rs->status.observed_generation,
                        .revision = spec_meta_revision(&rs->metadata),
                };
        }
        if (plan_history_prune(old, k, limit, del) == 0)
                return prune_snapshots(c);
        for (size_t i = 0; i < k; i++)
                if (del[i]) {
                        const spec_replica_set *rs = c->rss[idx[i]];
                        log_debug("deployment/%s: pruning old replica set %s", c->d->metadata.name,
                                  rs->metadata.name);
                        r = store_delete(c->a->store, STORE_REPLICA_SET, rs->metadata.namespace,
                                         rs->metadata.name);
                        if (r < 0 && r != -ENOENT)
                                return r;
                }
        return prune_snapshots(c);
}

/* ---- strategies ------------------------------------------------------------------------------ */

static int rollout_rolling(dctx *c) {
        _cleanup_free_ int32_t *targets = NULL;
        bool was_complete = plan_deployment_complete(c->d);
        ssize_t ni;
        int32_t want, cap;
        int r;

        ni = new_rs(c, true);
        if (ni < 0)
                return ni == -1 ? 0 : (int) ni; /* -1: a collision, retried */
        r = ctl__promote_request(c, ni);
        if (r < 0)
                return r;
        cap = ctl__canary_cap(c, c->rss[ni], ni);
        want = plan_new_rs_replicas(c->d->spec.replicas, c->surge, c->in, c->n, (size_t) ni);
        if (cap >= 0 && want > MAX(cap, c->rss[ni]->spec.replicas))
                want = MAX(cap, c->rss[ni]->spec.replicas);
        if (want != c->rss[ni]->spec.replicas)
                return scale_rs(c, (size_t) ni, want);

        targets = new0(int32_t, c->n);
        if (!targets)
                return -ENOMEM;
        if (cap >= 0) {
                r = ctl__canary_check(c, (size_t) ni, cap);
                if (r < 0)
                        return r;
        }
        if (plan_scale_down_old(c->d->spec.replicas, c->unav, c->in, c->n, targets)) {
                if (cap >= 0)
                        ctl__canary_keep_old(c, (size_t) ni, cap, targets);
                for (size_t i = 0; i < c->n; i++)
                        if (targets[i] != c->rss[i]->spec.replicas) {
                                r = scale_rs(c, i, targets[i]);
                                if (r < 0)
                                        return r;
                        }
                return 0;
        }
        /* History is pruned only after a complete rollout (§6). */
        if (was_complete)
                return cleanup_history(c);
        return 0;
}

static int rollout_recreate(dctx *c) {
        bool was_complete = plan_deployment_complete(c->d), changed = false;
        ssize_t ni = new_rs(c, false);
        int r;

        if (ni < -1)
                return (int) ni;
        /* 1. Every old RS to 0. */
        for (size_t i = 0; i < c->n; i++)
                if ((ssize_t) i != ni && c->rss[i]->spec.replicas != 0) {
                        r = scale_rs(c, i, 0);
                        if (r < 0)
                                return r;
                        changed = true;
                }
        if (changed)
                return 0;
        /* 2. Wait until no old pod runs (terminating ones included). */
        for (size_t i = 0; i < c->n; i++)
                if ((ssize_t) i != ni && (c->rss[i]->status.replicas > 0 || c->in[i].active > 0 ||
                                          c->in[i].terminating > 0))
                        return 0;
        /* 3. The new RS, at full size. */
        if (ni < 0) {
                ni = new_rs(c, true);
                if (ni < 0)
                        return ni == -1 ? 0 : (int) ni;
        }
        if (c->rss[ni]->spec.replicas != c->d->spec.replicas)
                return scale_rs(c, (size_t) ni, c->d->spec.replicas);
        if (was_complete)
                return cleanup_history(c);
        return 0;
}

/* sync(): paused deployments and scaling events — proportional scaling,
 * no rollout. */
static int sync_scale(dctx *c) {
        _cleanup_free_ int32_t *targets = new0(int32_t, c->n ?: 1);
        ssize_t ni;
        int r;

        if (!targets)
                return -ENOMEM;
        ni = new_rs(c, false);
        if (ni < -1)
                return (int) ni;
        (void) plan_proportional(c->d->spec.replicas, c->surge,
                                 c->d->spec.strategy.type == SPEC_STRATEGY_ROLLING_UPDATE,
                                 c->d->status.replicas, c->in, c->n, targets);
        /* Every active RS is written, resized or not: its desired-replicas
         * annotation now says D, which ends the scaling event (as
         * Kubernetes' scale() does). */
        for (size_t i = 0; i < c->n; i++)
                if (targets[i] != c->rss[i]->spec.replicas || c->rss[i]->spec.replicas > 0) {
                        r = scale_rs(c, i, targets[i]);
                        if (r < 0)
                                return r;
                }
        if (c->d->spec.paused)
                return cleanup_history(c);
        return 0;
}

/* How often a deployment deleted in the foreground looks at its pods. */
#define FOREGROUND_POLL (200 * USEC_PER_MSEC)

/* Foreground deletion: the ReplicaSets go (their pods stop, each with its
 * grace period); the deployment itself goes once no pod it selects still
 * runs. Until then it is kept, with its deletionTimestamp, and does
 * nothing else. */
static int finish_foreground(agent *a, const spec_deployment *d) {
        const void *const *items;
        size_t n = store_list(a->store, STORE_REPLICA_SET, &items);
        bool waiting = false;
        int r = 0;

        /* names first: a delete changes the store's list */
        _cleanup_strv_free_ char **doomed = NULL;
        size_t k = 0;
        if (n > 0 && !(doomed = new0(char *, n + 1)))
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const spec_replica_set *rs = items[i];
                if (streq_ptr(rs->metadata.namespace, d->metadata.namespace) &&
                    spec_meta_owned_by(&rs->metadata, d->metadata.uid) &&
                    !(doomed[k++] = strdup(rs->metadata.name)))
                        return -ENOMEM;
        }
        for (size_t i = 0; i < k; i++) {
                waiting = true;
                RET_GATHER(r, store_delete(a->store, STORE_REPLICA_SET, d->metadata.namespace,
                                           doomed[i]));
        }
        n = store_list(a->store, STORE_POD, &items);
        for (size_t i = 0; i < n && !waiting; i++) {
                const spec_pod *p = items[i];
                waiting = streq_ptr(p->metadata.namespace, d->metadata.namespace) &&
                          !spec_pod_terminal(p) &&
                          spec_selector_matches(d->spec.selector, &p->metadata.labels);
        }
        if (r < 0)
                return r;
        if (waiting) {
                agent__enqueue_at(a, STORE_DEPLOYMENT, d->metadata.namespace, d->metadata.name,
                                  agent_now(a) + FOREGROUND_POLL);
                return 0;
        }
        log_info("deployment/%s: deleted, its pods gone (foreground)", d->metadata.name);
        return store_delete(a->store, STORE_DEPLOYMENT, d->metadata.namespace, d->metadata.name);
}

int ctl_deployment_sync(agent *a, const char *ns, const char *name) {
        const spec_deployment *d = store_get(a->store, STORE_DEPLOYMENT, ns, name);
        dctx c = { .a = a, .d = d };
        const spec_condition *cond;
        bool scaling_only;
        int r;

        if (!d || !agent__leads(a))
                return 0; /* gone: its RSs follow through garbage collection; in a
                           * fleet, the leader's (agent_fleet) */
        if (d->metadata.deletion_timestamp)
                return finish_foreground(a, d);
        c.now = agent_wall(a);
        c.nd = spec_deployment_copy(d);
        if (!c.nd)
                return -ENOMEM;
        /* tend.io/config-rollout: its configuration's snapshots are made
         * as it is (not while paused: nothing new is rolled out then) */
        r = agent__config_template(a, d, !d->spec.paused, &c.own_tmpl);
        if (r < 0)
                goto out;
        c.tmpl = c.own_tmpl ?: &d->spec.template;
        spec_deployment_fenceposts(d, d->spec.replicas, &c.surge, &c.unav);
        c.has_deadline = d->spec.progress_deadline_seconds != SPEC_UNSET &&
                         d->spec.progress_deadline_seconds != INT32_MAX;
        r = gather(&c);
        if (r < 0)
                goto out;

        if (spec_selector_is_empty(d->spec.selector)) {
                (void) agent__event(a, STORE_DEPLOYMENT, &d->metadata, "Warning", "SelectingAll",
                                    "This deployment is selecting all pods. A non-empty selector "
                                    "is required.");
                c.nd->status.observed_generation = d->metadata.generation;
                r = write_back(&c);
                goto out;
        }

        /* Paused / resumed bookkeeping (§5.3). */
        cond = spec_get_condition(c.nd->status.conditions, c.nd->status.n_conditions,
                                  "Progressing");
        /* A timed-out rollout stays timed out: pausing does not hide it. */
        if (c.has_deadline && cond && streq_ptr(cond->reason, "ProgressDeadlineExceeded"))
                ;
        else if (c.has_deadline && d->spec.paused &&
                 (!cond || !streq_ptr(cond->reason, "DeploymentPaused")))
                ctl__set_progressing(&c, "Unknown", "DeploymentPaused", "Deployment is paused");
        else if (c.has_deadline && !d->spec.paused && cond &&
                 streq_ptr(cond->reason, "DeploymentPaused"))
                ctl__set_progressing(&c, "Unknown", "DeploymentResumed", "Deployment is resumed");

        scaling_only = d->spec.paused || plan_is_scaling_event(d->spec.replicas, c.in, c.n);
        if (scaling_only)
                r = sync_scale(&c);
        else if (d->spec.strategy.type == SPEC_STRATEGY_RECREATE)
                r = rollout_recreate(&c);
        else
                r = rollout_rolling(&c);
        if (r < 0)
                goto out;
        r = gather(&c);
        if (r < 0)
                goto out;
        compute_status(&c);
        if (c.canary_wait)
                /* no deadline while it waits (as while paused) */
                ctl__set_progressing(&c, "Unknown", "WaitingForPromotion", "%s", c.canary_wait);
        else if (!scaling_only)
                progress(&c);
        r = ctl__mark_complete(&c);
        if (r >= 0 && !scaling_only)
                r = ctl__auto_rollback(&c);
        if (r < 0)
                goto out;
        r = write_back(&c);
out:
        dctx_done(&c);
        return r;
}
