/* SPDX-License-Identifier: MIT */

/* Pure decisions; see plan.h. References are to docs/deployments.md. */

#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "tend/plan.h"

/* ---- rollout ------------------------------------------------------------------------- */

int32_t plan_rs_occupancy(const plan_rs *rs) {
        return MAX(rs->spec_replicas, rs->active) + rs->terminating;
}

int32_t plan_new_rs_replicas(int32_t replicas, int32_t max_surge, const plan_rs *rss, size_t n,
                             size_t new_index) {
        const plan_rs *nrs = &rss[new_index];
        int64_t total = 0, max_total = (int64_t) replicas + max_surge, up;

        if (nrs->spec_replicas >= replicas)
                return replicas; /* equal: nothing; larger: scale down to D */
        for (size_t i = 0; i < n; i++)
                total += plan_rs_occupancy(&rss[i]);
        if (total >= max_total)
                return nrs->spec_replicas;
        up = MIN(max_total - total, (int64_t) replicas - nrs->spec_replicas);
        return nrs->spec_replicas + (int32_t) up;
}

/* Old RSs oldest first (ties by name), as the controller sorts them. */
static int cmp_created(const plan_rs *a, const plan_rs *b) {
        if (a->created != b->created)
                return a->created < b->created ? -1 : 1;
        return strcmp(strempty(a->name), strempty(b->name));
}

static void sort_indices(const plan_rs *rss, size_t n, size_t *idx,
                         int (*cmp)(const plan_rs *, const plan_rs *)) {
        for (size_t i = 0; i < n; i++)
                idx[i] = i;
        /* insertion sort: n is the number of revisions, small */
        for (size_t i = 1; i < n; i++)
                for (size_t k = i; k > 0 && cmp(&rss[idx[k - 1]], &rss[idx[k]]) > 0; k--) {
                        size_t t = idx[k];
                        idx[k] = idx[k - 1];
                        idx[k - 1] = t;
                }
}

bool plan_scale_down_old(int32_t replicas, int32_t max_unavailable, const plan_rs *rss, size_t n,
                         int32_t *targets) {
        int64_t old_total = 0, all_total = 0, available = 0, new_unavailable = 0;
        int64_t min_available = (int64_t) replicas - max_unavailable, budget, done = 0;
        size_t idx[n ?: 1];
        bool changed = false;

        for (size_t i = 0; i < n; i++) {
                targets[i] = rss[i].spec_replicas;
                all_total += rss[i].spec_replicas;
                /* Kubernetes counts the new RS and the active old ones: an old
                 * RS already at 0 may still report pods that are going. */
                if (rss[i].is_new || rss[i].spec_replicas > 0)
                        available += rss[i].available;
                if (rss[i].is_new)
                        new_unavailable = rss[i].spec_replicas - rss[i].available;
                else
                        old_total += rss[i].spec_replicas;
        }
        if (old_total == 0)
                return false;
        budget = all_total - min_available - new_unavailable;
        if (budget <= 0)
                return false;
        sort_indices(rss, n, idx, cmp_created);

        /* (a) cleanupUnhealthyReplicas: old pods that are not available go
         * first; that costs no availability (the RS controller deletes
         * not-ready pods first). */
        for (size_t k = 0; k < n && done < budget; k++) {
                const plan_rs *rs = &rss[idx[k]];
                int64_t down;
                if (rs->is_new || rs->spec_replicas == 0 || rs->spec_replicas == rs->available)
                        continue;
                down = MIN(budget - done, (int64_t) rs->spec_replicas - rs->available);
                if (down <= 0)
                        continue;
                targets[idx[k]] = rs->spec_replicas - (int32_t) down;
                done += down;
                changed = true;
        }

        /* (b) scaleDownOldReplicaSetsForRollingUpdate: as far as
         * availability over all RSs allows. */
        if (available > min_available) {
                int64_t allowed = available - min_available, done2 = 0;
                for (size_t k = 0; k < n && done2 < allowed; k++) {
                        size_t i = idx[k];
                        int64_t down;
                        if (rss[i].is_new || targets[i] == 0)
                                continue;
                        down = MIN((int64_t) targets[i], allowed - done2);
                        targets[i] -= (int32_t) down;
                        done2 += down;
                        changed = changed || down > 0;
                }
        }
        return changed;
}

bool plan_is_scaling_event(int32_t replicas, const plan_rs *rss, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (rss[i].spec_replicas > 0 && rss[i].desired_ann >= 0 &&
                    rss[i].desired_ann != replicas)
                        return true;
        return false;
}

/* Round half away from zero, as Go's math.Round. */
static int64_t round_away(double x) {
        return (int64_t) (x < 0 ? -floor(-x + 0.5) : floor(x + 0.5));
}

static int cmp_size_newer(const plan_rs *a, const plan_rs *b) {
        if (a->spec_replicas != b->spec_replicas)
                return a->spec_replicas > b->spec_replicas ? -1 : 1;
        return -cmp_created(a, b);
}

static int cmp_size_older(const plan_rs *a, const plan_rs *b) {
        if (a->spec_replicas != b->spec_replicas)
                return a->spec_replicas > b->spec_replicas ? -1 : 1;
        return cmp_created(a, b);
}

bool plan_proportional(int32_t replicas, int32_t max_surge, bool rolling,
                       int32_t deployment_status_replicas, const plan_rs *rss, size_t n,
                       int32_t *targets) {
        size_t active = 0, the_one = SIZE_MAX, new_index = SIZE_MAX;
        size_t idx[n ?: 1];
        bool changed = false;

        for (size_t i = 0; i < n; i++) {
                targets[i] = rss[i].spec_replicas;
                if (rss[i].spec_replicas > 0) {
                        active++;
                        the_one = i;
                }
                if (rss[i].is_new)
                        new_index = i;
        }

        /* 1. At most one active RS: that one (or the new one, else the
         * newest old one) gets all the replicas. */
        if (active <= 1) {
                if (active == 0) {
                        if (new_index != SIZE_MAX)
                                the_one = new_index;
                        else {
                                sort_indices(rss, n, idx, cmp_created);
                                the_one = n > 0 ? idx[n - 1] : SIZE_MAX;
                        }
                }
                if (the_one == SIZE_MAX || targets[the_one] == replicas)
                        return false;
                targets[the_one] = replicas;
                return true;
        }

        /* 2. The new RS is saturated: the old ones go. */
        if (new_index != SIZE_MAX) {
                const plan_rs *nrs = &rss[new_index];
                if (nrs->spec_replicas == replicas && nrs->desired_ann == replicas &&
                    nrs->available == replicas) {
                        for (size_t i = 0; i < n; i++)
                                if (i != new_index && targets[i] != 0) {
                                        targets[i] = 0;
                                        changed = true;
                                }
                        return changed;
                }
        }
        if (!rolling)
                return false;

        /* 3. Share the difference in proportion to each RS's size. */
        {
                int64_t allowed = replicas > 0 ? (int64_t) replicas + max_surge : 0;
                int64_t total = 0, to_add, added = 0;
                size_t k = 0;

                for (size_t i = 0; i < n; i++)
                        if (rss[i].spec_replicas > 0)
                                idx[k++] = i, total += rss[i].spec_replicas;
                to_add = allowed - total;
                /* Tend's bound: pods still terminating hold back a scale-up
                 * until they are gone (a scale-down is not affected). */
                if (to_add > 0) {
                        int64_t occupied = 0;
                        for (size_t i = 0; i < n; i++)
                                occupied += plan_rs_occupancy(&rss[i]);
                        to_add = MIN(to_add, MAX(allowed - occupied, 0));
                }
                if (to_add == 0)
                        return false;
                /* sort the active ones */
                for (size_t a = 1; a < k; a++)
                        for (size_t b = a; b > 0; b--) {
                                int c = to_add > 0 ? cmp_size_newer(&rss[idx[b - 1]], &rss[idx[b]])
                                                   : cmp_size_older(&rss[idx[b - 1]], &rss[idx[b]]);
                                if (c <= 0)
                                        break;
                                size_t t = idx[b];
                                idx[b] = idx[b - 1];
                                idx[b - 1] = t;
                        }
                for (size_t a = 0; a < k; a++) {
                        const plan_rs *rs = &rss[idx[a]];
                        int64_t fraction, proportion, left = to_add - added;
                        int64_t annotated = rs->max_replicas_ann > 0 ? rs->max_replicas_ann
                                                                     : deployment_status_replicas;

                        if (left == 0)
                                continue;
                        if (replicas == 0)
                                fraction = -rs->spec_replicas;
                        else if (annotated <= 0)
                                fraction = 0;
                        else
                                fraction = round_away((double) rs->spec_replicas *
                                                      (double) ((int64_t) replicas + max_surge) /
                                                      (double) annotated) -
                                           rs->spec_replicas;
                        proportion = to_add > 0 ? MIN(fraction, left) : MAX(fraction, left);
                        targets[idx[a]] = (int32_t) (rs->spec_replicas + proportion);
                        added += proportion;
                }
                /* What rounding left over goes to the first (largest). */
                if (k > 0) {
                        int64_t t = (int64_t) targets[idx[0]] + (to_add - added);
                        targets[idx[0]] = (int32_t) MAX(t, 0);
                }
        }
        for (size_t i = 0; i < n; i++)
                if (targets[i] != rss[i].spec_replicas)
                        changed = true;
        return changed;
}

/* ---- pods ------------------------------------------------------------------------------ */

bool plan_pod_available(bool ready, usec_t ready_since, int32_t min_ready_seconds, usec_t now,
                        usec_t *ret_next) {
        usec_t at;

        if (ret_next)
                *ret_next = USEC_INFINITY;
        if (!ready)
                return false;
        if (min_ready_seconds <= 0)
                return true;
        at = ready_since + (usec_t) min_ready_seconds * USEC_PER_SEC;
        /* Kubernetes: lastTransitionTime + minReadySeconds < now */
        if (at < now)
                return true;
        if (ret_next)
                *ret_next = at + 1;
        return false;
}

static int phase_rank(int phase) {
        switch (phase) {
        case SPEC_POD_PENDING:
                return 0;
        case SPEC_POD_UNKNOWN:
                return 1;
        case SPEC_POD_RUNNING:
                return 2;
        default:
                return 3;
        }
}

/* <0: a is deleted before b. */
static int cmp_deletion(const plan_pod *a, const plan_pod *b) {
        if (a->started != b->started)
                return a->started ? 1 : -1;
        int ra = a->node_lost ? phase_rank(SPEC_POD_UNKNOWN) : phase_rank(a->phase),
            rb = b->node_lost ? phase_rank(SPEC_POD_UNKNOWN) : phase_rank(b->phase);
        if (ra != rb)
                return ra < rb ? -1 : 1;
        if (a->ready != b->ready)
                return a->ready ? 1 : -1;
        if (a->deletion_cost != b->deletion_cost)
                return a->deletion_cost < b->deletion_cost ? -1 : 1;
        if (a->node_siblings != b->node_siblings)
                return a->node_siblings > b->node_siblings ? -1 : 1; /* doubled up first */
        if (a->ready && b->ready && a->ready_since != b->ready_since)
                return a->ready_since > b->ready_since ? -1 : 1; /* ready for less time */
        if (a->restarts != b->restarts)
                return a->restarts > b->restarts ? -1 : 1;
        if (a->created != b->created)
                return a->created > b->created ? -1 : 1; /* newer first */
        return strcmp(strempty(a->uid), strempty(b->uid));
}

void plan_deletion_order(const plan_pod *pods, size_t n, size_t *order) {
        for (size_t i = 0; i < n; i++)
                order[i] = i;
        for (size_t i = 1; i < n; i++)
                for (size_t k = i; k > 0 && cmp_deletion(&pods[order[k - 1]], &pods[order[k]]) > 0;
                     k--) {
                        size_t t = order[k];
                        order[k] = order[k - 1];
                        order[k - 1] = t;
                }
}

plan_death plan_crash_death(const spec_backoff *b, unsigned streak, bool was_ready,
                            usec_t ran_for) {
        if (!was_ready || ran_for < PLAN_YOUNG) {
                streak = MIN(streak + 1, (unsigned) PLAN_STREAK_MAX);
                return (plan_death){ .streak = streak, .delay = plan_backoff_delay(b, streak) };
        }
        /* Not young: replaced at once. Up a minute: forgiven; between the
         * two, neither counted nor forgiven. */
        return (plan_death){ .streak = ran_for >= PLAN_BACKOFF_RESET ? 0 : streak };
}

usec_t plan_backoff_delay(const spec_backoff *b, unsigned streak) {
        usec_t d;

        if (b->off || streak <= b->after)
                return 0;
        d = b->initial;
        for (unsigned i = b->after + 1; i < streak && d < b->max; i++)
                d *= 2;
        return MIN(d, b->max);
}

/* ---- history and rollback ----------------------------------------------------------------- */

size_t plan_history_prune(const plan_old_rs *old, size_t n, int32_t limit, bool *ret_delete) {
        size_t idx[n ?: 1], candidates = 0, count = 0;
        int64_t diff;

        for (size_t i = 0; i < n; i++) {
                ret_delete[i] = false;
                if (!old[i].deleting)
                        idx[candidates++] = i;
        }
        if (limit < 0)
                return 0;
        diff = (int64_t) candidates - limit;
        if (diff <= 0)
                return 0;
        for (size_t a = 1; a < candidates; a++)
                for (size_t b = a; b > 0; b--) {
                        const plan_old_rs *x = &old[idx[b - 1]], *y = &old[idx[b]];
                        int64_t rx = MAX(x->revision, (int64_t) 0),
                                ry = MAX(y->revision, (int64_t) 0);
                        if (rx < ry ||
                            (rx == ry && (x->created < y->created ||
                                          (x->created == y->created &&
                                           strcmp(strempty(x->name), strempty(y->name)) <= 0))))
                                break;
                        size_t t = idx[b];
                        idx[b] = idx[b - 1];
                        idx[b - 1] = t;
                }
        for (int64_t k = 0; k < diff; k++) {
                const plan_old_rs *rs = &old[idx[k]];
                /* Skipped ones are not replaced by younger candidates. */
                if (rs->status_replicas != 0 || rs->spec_replicas != 0 || !rs->settled)
                        continue;
                ret_delete[idx[k]] = true;
                count++;
        }
        return count;
}

int64_t plan_max_revision(const int64_t *revisions, size_t n) {
        int64_t max = 0;
        for (size_t i = 0; i < n; i++)
                max = MAX(max, revisions[i]);
        return max;
}

int plan_undo_target(const int64_t *revisions, size_t n, int64_t to_revision, size_t *ret_index) {
        if (to_revision < 0)
                return -EINVAL;
        if (to_revision == 0) {
                /* The second-highest revision. */
                int64_t max = -1, second = -1;
                size_t imax = SIZE_MAX, isecond = SIZE_MAX;
                for (size_t i = 0; i < n; i++) {
                        if (revisions[i] < 0)
                                continue;
                        if (revisions[i] > max) {
                                second = max, isecond = imax;
                                max = revisions[i], imax = i;
                        } else if (revisions[i] > second && revisions[i] != max) {
                                second = revisions[i], isecond = i;
                        }
                }
                if (isecond == SIZE_MAX)
                        return -ENOENT;
                *ret_index = isecond;
                return 0;
        }
        for (size_t i = 0; i < n; i++)
                if (revisions[i] == to_revision) {
                        *ret_index = i;
                        return 0;
                }
        return -ENOENT;
}

#define REVISION_HISTORY_MAX 2000

char *plan_revision_history_append(const char *history, int64_t rev) {
        char *s = isempty(history) ? strprintf("%" PRId64, rev)
                                   : strprintf("%s,%" PRId64, history, rev);
        char *p = s;

        if (!s)
                return NULL;
        /* Drop the oldest entries until it fits. */
        while (strlen(p) > REVISION_HISTORY_MAX) {
                char *comma = strchr(p, ',');
                if (!comma)
                        break;
                p = comma + 1;
        }
        if (p != s)
                memmove(s, p, strlen(p) + 1);
        return s;
}

/* ---- a replica's lifecycle ------------------------------------------------------------ */

static const char *const pod_action_names[_PLAN_POD_ACTION_MAX] = {
        [PLAN_POD_NOTHING] = "nothing",
        [PLAN_POD_REFLECT] = "reflect",
        [PLAN_POD_START] = "start",
        [PLAN_POD_WAIT_UNTIL] = "wait-until",
        [PLAN_POD_STOP] = "stop",
        [PLAN_POD_STOP_LIVENESS] = "stop-liveness",
        [PLAN_POD_WRITE_EXIT] = "write-exit",
        [PLAN_POD_FORGET] = "forget",
        [PLAN_POD_REMOVE] = "remove",
        [PLAN_POD_MARK_DELETED] = "mark-deleted",
        [PLAN_POD_MARK_LOST] = "mark-lost",
        [PLAN_POD_FENCE] = "fence",
};

const char *plan_pod_action_to_string(plan_pod_action a) {
        return a >= 0 && a < _PLAN_POD_ACTION_MAX ? pod_action_names[a] : NULL;
}

static plan_pod_step next_step(const plan_pod_view *v) {
        /* Garbage collection: a pod whose ReplicaSet is gone goes too. */
        if (v->orphaned)
                return (plan_pod_step){ .action = v->terminal ? PLAN_POD_REMOVE
                                                              : PLAN_POD_MARK_DELETED };
        /* A terminal pod's process is gone for good: forget it; the object
         * stays (the ReplicaSet controller keeps a few) until it is deleted. */
        if (v->terminal) {
                if (v->deleting)
                        return (plan_pod_step){ .action = PLAN_POD_REMOVE };
                return (plan_pod_step){ .action = v->watched ? PLAN_POD_FORGET : PLAN_POD_NOTHING };
        }
        /* An exit: deleted pods simply go once their process has; others
         * become Failed or Succeeded, for the ReplicaSet to replace. */
        if (v->watched && v->exited)
                return (plan_pod_step){ .action = v->deleting ? PLAN_POD_REMOVE
                                                              : PLAN_POD_WRITE_EXIT };
        if (v->deleting) {
                if (!v->watched || !v->has_process)
                        return (plan_pod_step){ .action = PLAN_POD_REMOVE };
                /* A second deletion may shorten the grace, never lengthen
                 * it (the runtime keeps the earlier end). */
                if (!v->stopping || v->grace < v->stop_grace)
                        return (plan_pod_step){ .action = PLAN_POD_STOP,
                                                .grace = v->grace,
                                                .first = !v->stopping };
                return (plan_pod_step){ .action = PLAN_POD_NOTHING };
        }
        if (!v->watched) {
                /* Running, but nothing watches its process (a write that
                 * failed, a start that was rolled back): lost. Not during
                 * start-up, which adopts what it can first. */
                if (!v->pending)
                        return (plan_pod_step){ .action = v->agent_started ? PLAN_POD_MARK_LOST
                                                                           : PLAN_POD_NOTHING };
                if (v->start_after > v->now)
                        return (plan_pod_step){ .action = PLAN_POD_WAIT_UNTIL,
                                                .at = v->start_after };
                return (plan_pod_step){ .action = v->draining ? PLAN_POD_NOTHING : PLAN_POD_START };
        }
        if (v->liveness_failed && !v->stopping)
                return (plan_pod_step){ .action = PLAN_POD_STOP_LIVENESS, .grace = v->probe_grace };
        return (plan_pod_step){ .action = PLAN_POD_REFLECT };
}

plan_pod_step plan_pod_next(const plan_pod_view *v) {
        plan_pod_step s = next_step(v);

        /* Fenced: what ends a pod (its removal, its exit written, its
         * process forgotten) goes on; anything else waits for the node to
         * be back, and a live process is stopped first. */
        if (!v->fenced || s.action == PLAN_POD_REMOVE || s.action == PLAN_POD_WRITE_EXIT ||
            s.action == PLAN_POD_FORGET)
                return s;
        if (!v->watched || !v->has_process || v->stopping || v->exited)
                return (plan_pod_step){ .action = PLAN_POD_NOTHING };
        return (plan_pod_step){ .action = PLAN_POD_FENCE, .grace = v->grace };
}

/* ---- conditions ------------------------------------------------------------------------- */

static void condition_done(spec_condition *c) {
        free(c->type);
        free(c->status);
        free(c->reason);
        free(c->message);
        *c = (spec_condition){};
}

void plan_remove_condition(spec_condition **conds, size_t *n, const char *type) {
        for (size_t i = 0; i < *n; i++)
                if (streq_ptr((*conds)[i].type, type)) {
                        condition_done(&(*conds)[i]);
                        memmove(&(*conds)[i], &(*conds)[i + 1],
                                sizeof(spec_condition) * (*n - i - 1));
                        (*n)--;
                        return;
                }
}

static int set_condition(spec_condition **conds, size_t *n, const char *type, const char *status,
                         const char *reason, const char *message, usec_t now, bool refresh) {
        spec_condition *c = (spec_condition *) spec_get_condition(*conds, *n, type);
        spec_condition nc = {};

        if (c && streq_ptr(c->status, status) && streq_ptr(c->reason, reason) && !refresh)
                return 0;
        nc.type = strdup(type);
        nc.status = strdup(status);
        nc.reason = reason ? strdup(reason) : NULL;
        nc.message = message ? strdup(message) : NULL;
        if (!nc.type || !nc.status || (reason && !nc.reason) || (message && !nc.message)) {
                condition_done(&nc);
                return -ENOMEM; /* the old condition stays as it was */
        }
        nc.last_update_time = now;
        nc.last_transition_time = c && streq_ptr(c->status, status) ? c->last_transition_time : now;
        if (c) {
                condition_done(c);
                *c = nc;
                return 1;
        }
        spec_condition *grown = realloc(*conds, sizeof(spec_condition) * (*n + 1));
        if (!grown) {
                condition_done(&nc);
                return -ENOMEM;
        }
        *conds = grown;
        (*conds)[(*n)++] = nc;
        return 1;
}

int plan_set_condition(spec_condition **conds, size_t *n, const char *type, const char *status,
                       const char *reason, const char *message, usec_t now) {
        return set_condition(conds, n, type, status, reason, message, now, false);
}

int plan_refresh_condition(spec_condition **conds, size_t *n, const char *type, const char *status,
                           const char *reason, const char *message, usec_t now) {
        return set_condition(conds, n, type, status, reason, message, now, true);
}

/* ---- status ----------------------------------------------------------------------------- */

bool plan_deployment_complete(const spec_deployment *d) {
        const spec_deployment_status *st = &d->status;
        int32_t r = d->spec.replicas;
        return st->updated_replicas == r && st->replicas == r && st->available_replicas == r &&
               st->observed_generation >= d->metadata.generation;
}

/* ---- fleet mode ----------------------------------------------------------------------------- */

/* FNV-1a of "pod\0node": a tie-break that is stable across leaders. */
static uint64_t place_hash(const char *pod, const char *node) {
        uint64_t h = 1469598103934665603ULL;

        for (const char *p = strempty(pod);; p++) {
                h = (h ^ (unsigned char) *p) * 1099511628211ULL;
                if (!*p)
                        break;
        }
        for (const char *p = strempty(node); *p; p++)
                h = (h ^ (unsigned char) *p) * 1099511628211ULL;
        return h;
}

static bool ports_clash(const plan_node *n, const plan_new_pod *p) {
        for (size_t i = 0; i < p->n_ports; i++)
                for (size_t k = 0; k < n->n_ports; k++)
                        if (p->ports[i] == n->ports[k])
                                return true;
        return false;
}

/* A fixed port of pods[i] taken by a pod placed on node k in this call. */
static bool placed_ports_clash(const plan_new_pod *pods, size_t i, const int *ret_node, int k) {
        for (size_t j = 0; j < i; j++)
                if (ret_node[j] == k)
                        for (size_t a = 0; a < pods[i].n_ports; a++)
                                for (size_t b = 0; b < pods[j].n_ports; b++)
                                        if (pods[i].ports[a] == pods[j].ports[b])
                                                return true;
        return false;
}

static bool feasible(const plan_node *n, const plan_new_pod *p) {
        if (!n->ready || n->unschedulable)
                return false;
        if (n->capacity > 0 && n->pods >= n->capacity)
                return false;
        for (size_t i = 0; p->node_selector && i < p->node_selector->n; i++)
                if (!n->labels ||
                    !streq_ptr(spec_map_get(n->labels, p->node_selector->items[i].key),
                               p->node_selector->items[i].value))
                        return false;
        return !ports_clash(n, p);
}

/* <0: a is the better node for p. */
static int cmp_place(const plan_node *a, const plan_node *b, const plan_new_pod *p) {
        uint64_t ha, hb;

        if (a->group_pods != b->group_pods)
                return a->group_pods < b->group_pods ? -1 : 1;
        if (a->pods != b->pods)
                return a->pods < b->pods ? -1 : 1;
        ha = place_hash(p->name, a->name);
        hb = place_hash(p->name, b->name);
        if (ha != hb)
                return ha < hb ? -1 : 1;
        return strcmp(strempty(a->name), strempty(b->name));
}

size_t plan_schedule(plan_node *nodes, size_t n_nodes, const plan_new_pod *pods, size_t n_pods,
                     int *ret_node) {
        size_t placed = 0;

        for (size_t i = 0; i < n_pods; i++) {
                int best = -1;
                for (size_t k = 0; k < n_nodes; k++)
                        if (feasible(&nodes[k], &pods[i]) &&
                            !placed_ports_clash(pods, i, ret_node, (int) k) &&
                            (best < 0 || cmp_place(&nodes[k], &nodes[best], &pods[i]) < 0))
                                best = (int) k;
                ret_node[i] = best;
                if (best < 0)
                        continue;
                nodes[best].pods++;
                nodes[best].group_pods++;
                placed++;
        }
        return placed;
}

plan_fleet_view plan_node_lifecycle(const plan_node_state *nodes, size_t n, usec_t now,
                                    usec_t lost_after, double disruption, usec_t leader_since,
                                    usec_t ttl, plan_node_verdict *ret) {
        plan_fleet_view v = { .next = USEC_INFINITY };
        size_t lost = 0;

        for (size_t i = 0; i < n; i++)
                lost += !nodes[i].live;
        v.disrupted = (lost >= 2 && (double) lost >= disruption * (double) n) ||
                      now < leader_since + ttl;
        if (now < leader_since + ttl && lost > 0)
                v.next = leader_since + ttl;
        for (size_t i = 0; i < n; i++) {
                usec_t due = nodes[i].lost_since + lost_after;
                if (nodes[i].live)
                        ret[i] = PLAN_NODE_READY;
                else if (now < due) {
                        ret[i] = PLAN_NODE_UNKNOWN;
                        v.next = MIN(v.next, due);
                } else
                        ret[i] = v.disrupted ? PLAN_NODE_HOLD : PLAN_NODE_EVICT;
        }
        return v;
}

bool plan_fence(plan_lost_policy policy, usec_t last_ok_send, usec_t ttl, usec_t now) {
        if (policy != PLAN_LOST_FENCE)
                return false;
        if (last_ok_send == 0 || ttl <= PLAN_FENCE_MARGIN)
                return true;
        return now >= last_ok_send + ttl - PLAN_FENCE_MARGIN;
}

usec_t plan_fence_replace_at(usec_t lease_gone, usec_t grace) {
        return lease_gone + grace + PLAN_FENCE_SLACK;
}

void plan_local_reconcile(const plan_local_pod *local, size_t n_local, const plan_bound_pod *etcd,
                          size_t n_etcd, const char *self, plan_local_action *ret_local,
                          bool *ret_start) {
        for (size_t i = 0; i < n_local; i++) {
                const plan_bound_pod *b = NULL;
                for (size_t k = 0; k < n_etcd && !b; k++)
                        if (streq_ptr(etcd[k].uid, local[i].uid))
                                b = &etcd[k];
                if (!b || !streq_ptr(b->node, self))
                        ret_local[i] = PLAN_LOCAL_STOP;
                else
                        ret_local[i] = b->deleting ? PLAN_LOCAL_STOP_CONFIRM : PLAN_LOCAL_KEEP;
        }
        for (size_t k = 0; k < n_etcd; k++) {
                bool here = false;
                for (size_t i = 0; i < n_local && !here; i++)
                        here = streq_ptr(etcd[k].uid, local[i].uid);
                ret_start[k] = !here && !etcd[k].deleting && streq_ptr(etcd[k].node, self);
        }
}
