/* SPDX-License-Identifier: MIT */

/*
 * What tend adds to the deployment controller's rolling update (issue 16),
 * each declared by an annotation and called from ctl-deployment.c's pass:
 * automatic rollback (tend.io/auto-rollback) and canaries
 * (tend.io/canary, tend.io/canary-promote-after, tend.io/promote). The
 * ReplicaSet annotations the controller keeps for itself for them
 * (AGENT_ANN_COMPLETE, ...) are written here.
 */

#include <inttypes.h>
#include <stdio.h>

#include "ctl-sync.h"

/* ---- automatic rollback ------------------------------------------------------------------ */

/* A revision whose rollout completed is one an automatic rollback may go
 * back to (and a canary gate never holds again). */
/* tend's annotations of the deployment, as the store parsed them (none:
 * nothing of them asked for). */
static const spec_tend *tend_of(const dctx *c) {
        static const spec_tend none;
        const spec_tend *t = store_tend(c->a->store, STORE_DEPLOYMENT, c->d->metadata.namespace,
                                        c->d->metadata.name);

        return t ?: &none;
}

int ctl__mark_complete(dctx *c) {
        const spec_condition *cond = spec_get_condition(c->nd->status.conditions,
                                                        c->nd->status.n_conditions, "Progressing");
        char buf[32];

        if (c->new_index < 0 || !plan_deployment_complete(c->nd) ||
            (c->has_deadline && (!cond || !streq_ptr(cond->reason, "NewReplicaSetAvailable"))) ||
            spec_map_get(&c->rss[c->new_index]->metadata.annotations, AGENT_ANN_COMPLETE))
                return 0;
        snprintf(buf, sizeof buf, "%" PRIu64, (uint64_t) c->now); /* when (wall, µs) */
        return ctl__set_rs_annotation(c, (size_t) c->new_index, AGENT_ANN_COMPLETE, buf);
}

/*
 * tend.io/auto-rollback (issue 16; plan_auto_rollback() decides): the
 * failed ReplicaSet is marked, and a marked one is not rolled back from
 * again until it is tried anew (an apply or undo that makes it the new
 * one again clears the mark, new_rs()).
 */
int ctl__auto_rollback(dctx *c) {
        const spec_deployment *d = c->d;
        const spec_condition *cond = spec_get_condition(c->nd->status.conditions,
                                                        c->nd->status.n_conditions, "Progressing");
        const spec_replica_set *failed = c->new_index >= 0 ? c->rss[c->new_index] : NULL,
                               *target = NULL;
        _cleanup_free_ char *why = NULL, *msg = NULL;
        _cleanup_free_ int64_t *revs = NULL;
        _cleanup_free_ bool *complete = NULL;
        const char *done = failed ? spec_map_get(&failed->metadata.annotations, AGENT_ANN_COMPLETE)
                                  : NULL;
        const char *reason;
        uint64_t done_at = 0;
        int64_t failed_rev, target_rev = 0;
        ssize_t t;
        int r;

        if (done && safe_atou64(done, &done_at) < 0)
                done_at = 0;
        switch (plan_auto_rollback(&(plan_rollback_view){
                .enabled = tend_of(c)->auto_rollback,
                .paused = d->spec.paused,
                .has_new = failed,
                .failed_before = failed && spec_map_get(&failed->metadata.annotations,
                                                        AGENT_ANN_ROLLOUT_FAILED),
                .complete = done,
                .complete_at = done_at,
                .deadline_exceeded = cond && streq_ptr(cond->reason, "ProgressDeadlineExceeded"),
                .crashlooping = c->new_crashlooping,
                .now = c->now })) {
        case PLAN_ROLLBACK_NONE:
                return 0;
        case PLAN_ROLLBACK_DEADLINE:
                reason = "ProgressDeadlineExceeded";
                why = strdup(strna(cond->message));
                break;
        case PLAN_ROLLBACK_CRASHLOOP:
                reason = "CrashLoopBackOff";
                why = strprintf("%d replica%s of replica set \"%s\" in CrashLoopBackOff",
                                c->new_crashlooping, c->new_crashlooping == 1 ? "" : "s",
                                failed->metadata.name);
                break;
        }
        revs = new0(int64_t, c->n + 1);
        complete = new0(bool, c->n + 1);
        if (!why || !revs || !complete)
                return -ENOMEM;
        failed_rev = spec_meta_revision(&failed->metadata);
        for (size_t i = 0; i < c->n; i++) {
                revs[i] = spec_meta_revision(&c->rss[i]->metadata);
                complete[i] = spec_map_get(&c->rss[i]->metadata.annotations, AGENT_ANN_COMPLETE);
        }
        t = plan_rollback_target(revs, complete, c->n, c->new_index);
        if (t >= 0) {
                target = c->rss[t];
                target_rev = revs[t];
        }
        r = ctl__set_rs_annotation(c, (size_t) c->new_index, AGENT_ANN_ROLLOUT_FAILED, reason);
        if (r < 0)
                return r;
        if (!target) {
                (void) agent__event(c->a, STORE_DEPLOYMENT, &d->metadata, "Warning",
                                    "AutoRollbackImpossible",
                                    "Revision %" PRId64 " failed (%s: %s); no earlier revision "
                                    "completed, so there is none to roll back to",
                                    failed_rev, reason, why);
                log_warning("deployment/%s: revision %" PRId64 " failed (%s); no completed "
                            "revision to roll back to",
                            d->metadata.name, failed_rev, reason);
                return 0;
        }
        /* the template of target_rev comes back as the newest revision */
        msg = strprintf("Revision %" PRId64 " failed (%s: %s); rolled back to revision %" PRId64
                        " (now revision %" PRId64 ")",
                        failed_rev, reason, why, target_rev,
                        MAX(failed_rev, ctl__max_old_revision(c)) + 1);
        if (!msg)
                return -ENOMEM;
        r = agent__rollback_to(c->nd, target);
        if (r < 0)
                return r;
        /* the deployment's tend.io/ settings stay as they are now (the
         * target's may predate auto-rollback itself) */
        for (size_t i = c->nd->metadata.annotations.n; i > 0; i--) {
                const char *k = c->nd->metadata.annotations.items[i - 1].key;
                if (startswith(k, SPEC_ANN_PREFIX) && !spec_map_get(&d->metadata.annotations, k))
                        spec_map_remove(&c->nd->metadata.annotations, k);
        }
        for (size_t i = 0; i < d->metadata.annotations.n; i++)
                if (startswith(d->metadata.annotations.items[i].key, SPEC_ANN_PREFIX) &&
                    !streq(d->metadata.annotations.items[i].key, SPEC_ANN_PROMOTE))
                        RET_GATHER(c->error, spec_map_set(&c->nd->metadata.annotations,
                                                          d->metadata.annotations.items[i].key,
                                                          d->metadata.annotations.items[i].value));
        c->nd->metadata.generation++;
        RET_GATHER(c->error,
                   plan_set_condition(&c->nd->status.conditions, &c->nd->status.n_conditions,
                                      "RolledBack", "True", reason, msg, c->now));
        (void) agent__event(c->a, STORE_DEPLOYMENT, &d->metadata, "Warning", "RolledBack", "%s",
                            msg);
        log_warning("deployment/%s: %s", d->metadata.name, msg);
        agent__enqueue(c->a, STORE_DEPLOYMENT, d->metadata.namespace, d->metadata.name);
        return 0;
}

/* ---- canaries ------------------------------------------------------------------------------ */

/*
 * tend.io/canary (issue 16): a new template first gets N pods, within the
 * rolling bounds as ever — the old ReplicaSets keep the rest, D - N — and
 * once they are all available (minReadySeconds), the rollout waits,
 * Progressing Unknown/WaitingForPromotion, with no deadline. Promotion —
 * tend.io/promote on the deployment (`tend rollout promote`, or
 * `kubectl annotate`), or tend.io/canary-promote-after of healthy
 * canaries — marks the ReplicaSet, and the rollout goes on. A revision
 * that completed once, or the first (nothing to replace), has no canary
 * gate; `rollout undo` abandons the canaries as any rollback does.
 */
static int promote(dctx *c, size_t ni, const char *how) {
        const spec_replica_set *rs = c->rss[ni];
        int64_t rev = spec_meta_revision(&rs->metadata);
        int r = ctl__set_rs_annotation(c, ni, AGENT_ANN_PROMOTED, "true");

        if (r < 0)
                return r;
        (void) agent__event(c->a, STORE_DEPLOYMENT, &c->d->metadata, "Normal", "Promoted",
                            "Canaries of revision %" PRId64 " (replica set %s) promoted %s", rev,
                            rs->metadata.name, how);
        log_info("deployment/%s: canaries of revision %" PRId64 " promoted %s", c->d->metadata.name,
                 rev, how);
        /* the deadline counts from now, not from when the wait began */
        ctl__set_progressing(c, "True", "ReplicaSetUpdated", "ReplicaSet \"%s\" is progressing.",
                             rs->metadata.name);
        return 0;
}

/* tend.io/promote: consumed (removed from the deployment) whatever it says. */
int ctl__promote_request(dctx *c, ssize_t ni) {
        const char *v = spec_map_get(&c->d->metadata.annotations, SPEC_ANN_PROMOTE);
        const spec_replica_set *rs;
        int64_t want = 0, rev;

        if (!v)
                return 0;
        if (!streq(v, "true"))
                (void) safe_atoi64(v, &want);
        spec_map_remove(&c->nd->metadata.annotations, SPEC_ANN_PROMOTE);
        if (ni < 0)
                return 0;
        rs = c->rss[ni];
        rev = spec_meta_revision(&rs->metadata);
        if (spec_map_get(&rs->metadata.annotations, AGENT_ANN_PROMOTED) ||
            spec_map_get(&rs->metadata.annotations, AGENT_ANN_COMPLETE)) {
                (void) agent__event(c->a, STORE_DEPLOYMENT, &c->d->metadata, "Normal",
                                    "PromoteIgnored",
                                    "Nothing to promote: revision %" PRId64 " has no canaries "
                                    "waiting",
                                    rev);
                return 0;
        }
        if (want == 0 && !spec_map_get(&rs->metadata.annotations, AGENT_ANN_CANARY_SINCE)) {
                /* "true" is for canaries that wait now, not for a revision
                 * made since the request was written */
                (void) agent__event(c->a, STORE_DEPLOYMENT, &c->d->metadata, "Warning",
                                    "PromoteIgnored",
                                    "No canaries wait for promotion now (revision %" PRId64
                                    "'s are not all available); to promote them anyway: "
                                    "%s: \"%" PRId64 "\"",
                                    rev, SPEC_ANN_PROMOTE, rev);
                return 0;
        }
        if (want > 0 && want != rev) {
                (void) agent__event(c->a, STORE_DEPLOYMENT, &c->d->metadata, "Warning",
                                    "PromoteIgnored",
                                    "%s asks for revision %" PRId64 ", but the canaries are of "
                                    "revision %" PRId64 ": not promoted",
                                    SPEC_ANN_PROMOTE, want, rev);
                return 0;
        }
        return promote(c, (size_t) ni, "on request");
}

/* The canaries a new ReplicaSet is held to, or -1: none. rs: the new
 * ReplicaSet, index ni among c->rss — or NULL (and ni -1) for one about to
 * be made. */
int32_t ctl__canary_cap(dctx *c, const spec_replica_set *rs, ssize_t ni) {
        const spec_tend *t = tend_of(c);
        bool old = false;

        for (size_t i = 0; i < c->n; i++)
                if ((ssize_t) i != ni && (c->rss[i]->spec.replicas > 0 || c->in[i].active > 0))
                        old = true;
        return plan_canary_cap(t->has_canary ? spec_canary_count(&t->canary, c->d->spec.replicas)
                                             : -1,
                               c->d->spec.strategy.type == SPEC_STRATEGY_ROLLING_UPDATE,
                               rs && (spec_map_get(&rs->metadata.annotations, AGENT_ANN_PROMOTED) ||
                                      spec_map_get(&rs->metadata.annotations, AGENT_ANN_COMPLETE)),
                               old);
}

/* With canaries held: the old ReplicaSets keep D - (the canaries), the
 * newest first, never above what they have (plan_scale_down_old()
 * gave the most it may take). */
void ctl__canary_keep_old(dctx *c, size_t ni, int32_t cap, int32_t *targets) {
        _cleanup_free_ int32_t *have = new0(int32_t, c->n + 1);

        if (!have) {
                RET_GATHER(c->error, -ENOMEM);
                return;
        }
        for (size_t i = 0; i < c->n; i++)
                have[i] = c->rss[i]->spec.replicas;
        plan_canary_keep_old(c->d->spec.replicas, cap, have, c->n, ni, targets);
}

/* Are the canaries all available? Then the rollout waits — or promotes
 * them, once they have been for tend.io/canary-promote-after. */
int ctl__canary_check(dctx *c, size_t ni, int32_t cap) {
        const spec_replica_set *rs = c->rss[ni];
        const char *since_s = spec_map_get(&rs->metadata.annotations, AGENT_ANN_CANARY_SINCE);
        usec_t since = 0, after = tend_of(c)->canary_promote_after;
        char buf[32], d[DURATION_MAX];
        plan_canary_step step;
        int r;

        if (since_s && safe_atou64(since_s, &since) < 0)
                since = 0;
        step = plan_canary_next(cap, rs->spec.replicas, rs->status.available_replicas, since, after,
                                c->now);
        if (step.action == PLAN_CANARY_GROWING) {
                const spec_condition *p = spec_get_condition(
                        c->nd->status.conditions, c->nd->status.n_conditions, "Progressing");
                /* not (or no longer) all available: no more waiting, and the
                 * progress deadline runs again from now */
                if (p && streq_ptr(p->reason, "WaitingForPromotion"))
                        ctl__set_progressing(c, "True", "ReplicaSetUpdated",
                                             "ReplicaSet \"%s\" is progressing.",
                                             rs->metadata.name);
                return since_s ? ctl__set_rs_annotation(c, ni, AGENT_ANN_CANARY_SINCE, NULL) : 0;
        }
        if (step.since != since) {
                snprintf(buf, sizeof buf, "%" PRIu64, (uint64_t) step.since);
                r = ctl__set_rs_annotation(c, ni, AGENT_ANN_CANARY_SINCE, buf);
                if (r < 0)
                        return r;
        }
        if (step.action == PLAN_CANARY_PROMOTE) {
                _cleanup_free_ char *how = strprintf("automatically, healthy for %s (%s)",
                                                     format_duration(d, after),
                                                     SPEC_ANN_CANARY_PROMOTE_AFTER);
                return promote(c, ni, how ?: "automatically");
        }
        if (step.at)
                agent__enqueue_at_wall(c->a, STORE_DEPLOYMENT, c->d->metadata.namespace,
                                       c->d->metadata.name, step.at);
        c->canary_wait = strprintf(
                "%d of %d canaries of replica set \"%s\" (revision %" PRId64 ") ready; waiting "
                "for promotion (tend rollout promote deploy/%s)%s%s",
                rs->status.available_replicas, cap, rs->metadata.name,
                spec_meta_revision(&rs->metadata), c->d->metadata.name,
                after ? ", or automatically after " : "", after ? format_duration(d, after) : "");
        return c->canary_wait ? 0 : -ENOMEM;
}
