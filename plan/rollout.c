/* SPDX-License-Identifier: MIT */

/*
 * tend's additions to the rolling update (see plan.h): automatic rollback
 * and canaries, decided here; the deployment controller
 * (agent/ctl-rollout.c) writes what they decide, with its events and
 * conditions.
 */

#include "tend/plan.h"

plan_rollback_reason plan_auto_rollback(const plan_rollback_view *v) {
        if (!v->enabled || v->paused || !v->has_new || v->failed_before)
                return PLAN_ROLLBACK_NONE;
        /* Completed. A program that dies a moment after it starts, with no
         * readiness probe, completes a rollout (as in Kubernetes): a crash
         * loop within PLAN_AUTO_ROLLBACK_SETTLE of completing still counts
         * as the rollout's failure. */
        if (v->complete && (v->crashlooping == 0 || !v->complete_at ||
                            v->now >= v->complete_at + PLAN_AUTO_ROLLBACK_SETTLE))
                return PLAN_ROLLBACK_NONE;
        if (v->deadline_exceeded)
                return PLAN_ROLLBACK_DEADLINE;
        if (v->crashlooping > 0)
                return PLAN_ROLLBACK_CRASHLOOP;
        return PLAN_ROLLBACK_NONE;
}

ssize_t plan_rollback_target(const int64_t *revisions, const bool *complete, size_t n,
                             ssize_t new_index) {
        ssize_t target = -1;

        for (size_t i = 0; i < n; i++)
                if ((ssize_t) i != new_index && complete[i] &&
                    (target < 0 || revisions[i] > revisions[target]))
                        target = (ssize_t) i;
        return target;
}

int32_t plan_canary_cap(int32_t count, bool rolling, bool released, bool has_old) {
        if (count < 0 || !rolling || released || !has_old)
                return -1; /* (no old: nothing to compare the canaries with) */
        return count;
}

void plan_canary_keep_old(int32_t replicas, int32_t cap, const int32_t *have, size_t n,
                          size_t new_index, int32_t *targets) {
        /* room for all the canaries: with maxSurge 0 the new ReplicaSet
         * grows only as the old ones shrink */
        int32_t keep = replicas - MAX(cap, have[new_index]), sum = 0;

        for (size_t i = 0; i < n; i++)
                if (i != new_index)
                        sum += targets[i];
        for (size_t i = n; i > 0 && sum < keep; i--) {
                size_t k = i - 1;
                int32_t more;
                if (k == new_index || targets[k] >= have[k])
                        continue;
                more = MIN(keep - sum, have[k] - targets[k]);
                targets[k] += more;
                sum += more;
        }
}

plan_canary_step plan_canary_next(int32_t cap, int32_t replicas, int32_t available, usec_t since,
                                  usec_t after, usec_t now) {
        if (replicas < cap || available < cap)
                return (plan_canary_step){ .action = PLAN_CANARY_GROWING };
        if (!since)
                since = now;
        if (after && now >= since + after)
                return (plan_canary_step){ .action = PLAN_CANARY_PROMOTE, .since = since };
        return (plan_canary_step){ .action = PLAN_CANARY_WAIT,
                                   .since = since,
                                   .at = after ? since + after : 0 };
}
