/* SPDX-License-Identifier: MIT */
#pragma once

/* Private to tend_agent: one sync of one deployment (dctx) and what writes
 * its results (ctl-sync.c), shared by the deployment controller's pass
 * (ctl-deployment.c) and tend's additions to its rolling update
 * (ctl-rollout.c). */

#include "agent-internal.h"

/* One sync of one deployment. */
typedef struct dctx {
        agent *a;
        const spec_deployment *d;
        /* the template it runs: d's, or with tend.io/config-rollout d's
         * with its configuration's snapshots named (own_tmpl) */
        const spec_pod_template *tmpl;
        spec_pod_template *own_tmpl;
        spec_deployment *nd;          /* metadata and status to write back */
        const spec_replica_set **rss; /* owned, oldest first */
        size_t n;
        plan_rs *in;
        ssize_t new_index;
        int32_t new_crashlooping; /* pods of the new RS in CrashLoopBackOff */
        int32_t surge, unav;
        bool has_deadline;
        char *canary_wait; /* tend.io/canary: the rollout waits for promotion (why) */
        usec_t now;
        int error; /* a setter on nd failed (-ENOMEM): nd is not written, the sync is retried */
} dctx;

/* ---- ctl-sync.c ---- */

/* The highest revision among the ReplicaSets other than the new one. */
int64_t ctl__max_old_revision(const dctx *c);
/* The Progressing condition of the deployment to write back. */
void ctl__set_progressing(dctx *c, const char *status, const char *reason, const char *fmt, ...)
        _printf_(4, 5);
/* Sets (value) or removes (NULL) an annotation the controller keeps on
 * ReplicaSet i. */
int ctl__set_rs_annotation(dctx *c, size_t i, const char *key, const char *value);

/* ---- ctl-rollout.c ---- */
/* The new ReplicaSet's rollout completed: marked, with when. */
int ctl__mark_complete(dctx *c);
/* tend.io/auto-rollback: a failed rollout goes back, once. */
int ctl__auto_rollback(dctx *c);
/* tend.io/promote on the deployment: taken (and removed). */
int ctl__promote_request(dctx *c, ssize_t ni);
/* The canaries the new ReplicaSet (rs, index ni; NULL and -1 for one
 * about to be made) is held to, or -1: none. */
int32_t ctl__canary_cap(dctx *c, const spec_replica_set *rs, ssize_t ni);
/* The old ReplicaSets keep room for D - the canaries. */
void ctl__canary_keep_old(dctx *c, size_t ni, int32_t cap, int32_t *targets);
/* All available: wait for promotion (c->canary_wait), or promote by time. */
int ctl__canary_check(dctx *c, size_t ni, int32_t cap);
