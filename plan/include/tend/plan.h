/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * Planners: every decision of the controllers as a pure function (docs/architecture.md §5,
 * docs/conventions.md "Functional core"). Inputs in, actions out, time passed in as a
 * number; no I/O, no clock, no globals. Table-tested in tests/unit/test-plan.c
 * against the worked examples of docs/deployments.md §3. A bare section
 * number below (§3.2) is docs/deployments.md's.
 *
 * Times are usec_t in one clock, whichever the caller uses consistently (the
 * controllers pass wall-clock times from the objects, since those survive an
 * agent restart).
 */

#include "tend/spec.h"

/* ---- ReplicaSets as the rollout sees them ------------------------------------------ */

typedef struct plan_rs {
        const char *name;
        usec_t created;           /* creationTimestamp: oldest first */
        int32_t spec_replicas;    /* spec.replicas */
        int32_t active;           /* pods not terminal and not being deleted */
        int32_t available;        /* status.availableReplicas */
        int32_t terminating;      /* pods being deleted whose process still runs */
        int32_t max_replicas_ann; /* deployment.kubernetes.io/max-replicas, -1 absent */
        int32_t desired_ann;      /* deployment.kubernetes.io/desired-replicas, -1 absent */
        bool is_new;              /* the ReplicaSet of the current template */
} plan_rs;

/* What one RS occupies towards replicas + maxSurge. Stricter than
 * Kubernetes (issues #95498, #107920): pods still terminating count, so the
 * processes of a deployment never exceed the bound by the agent's doing. */
int32_t plan_rs_occupancy(const plan_rs *rs);

/* §3.2 step 2, reconcileNewReplicaSet: the new RS's next spec.replicas. */
int32_t plan_new_rs_replicas(int32_t replicas, int32_t max_surge, const plan_rs *rss, size_t n,
                             size_t new_index);

/* §3.2 step 3, reconcileOldReplicaSets: cleanup of unhealthy old replicas
 * first, then scale-down bounded by availability. targets[i] is set for
 * every RS (unchanged ones keep their spec). Returns true if any changed. */
bool plan_scale_down_old(int32_t replicas, int32_t max_unavailable, const plan_rs *rss, size_t n,
                         int32_t *targets);

/* §3.4 sync()/scale(): proportional scaling when replicas changed mid-
 * rollout or the deployment is paused. deployment_status_replicas stands in
 * for a missing max-replicas annotation. Returns true if any changed. */
bool plan_proportional(int32_t replicas, int32_t max_surge, bool rolling,
                       int32_t deployment_status_replicas, const plan_rs *rss, size_t n,
                       int32_t *targets);

/* IsScalingEvent: some active RS was sized for another replica count. */
bool plan_is_scaling_event(int32_t replicas, const plan_rs *rss, size_t n);

/* ---- pods -------------------------------------------------------------------------------- */

/* §3.3: ready and ready for minReadySeconds. When ready but not yet
 * available, *ret_next is when it will be (else USEC_INFINITY). */
bool plan_pod_available(bool ready, usec_t ready_since, int32_t min_ready_seconds, usec_t now,
                        usec_t *ret_next);

typedef struct plan_pod {
        const char *uid; /* last tie-break */
        bool started;    /* has run (Kubernetes: scheduled to a node) */
        int phase;       /* spec_pod_phase */
        bool ready;
        usec_t ready_since;
        int32_t deletion_cost; /* controller.kubernetes.io/pod-deletion-cost */
        int32_t restarts;
        usec_t created;
        /* fleet mode: the pod's node is lost (its pod counts as Unknown), and
         * how many pods of the same ReplicaSet its node runs (more: deleted
         * first, Kubernetes' co-location rank). 0 on one host. */
        bool node_lost;
        int32_t node_siblings;
} plan_pod;

/* §7.2 ActivePodsWithRanks: not started < Pending < Unknown (or on a lost
 * node) < Running < not ready < lower deletion cost < more siblings on its
 * node < ready for less time < more restarts < newer < uid. Fills order[]
 * with indices, deleted first. */
void plan_deletion_order(const plan_pod *pods, size_t n, size_t *order);

/* Crash-loop back-off (docs/architecture.md §5). It belongs to one replica: a pod and the
 * replacements that carry its lineage on, never to the ReplicaSet, so that
 * deaths of different replicas never delay each other. A death is young
 * when the process ran under PLAN_YOUNG or never became ready; the
 * replica's streak counts its young deaths in a row, and is cleared by a
 * run of PLAN_BACKOFF_RESET that was ready at its end. */
#define PLAN_YOUNG (10 * USEC_PER_SEC)
#define PLAN_BACKOFF_RESET (60 * USEC_PER_SEC)
#define PLAN_STREAK_MAX 1000000 /* saturates: the delay is long capped by then */

/* A replica died: its streak after the death, and how long its replacement
 * waits from the moment of the death. Young deaths count; a run of
 * PLAN_BACKOFF_RESET, ready at its end, clears the streak; a death that is
 * not young is replaced at once. The first b->after young deaths in a row
 * are replaced at once, the next waits b->initial, doubling each time up
 * to b->max; with the back-off off, every death is replaced at once. */
typedef struct plan_death {
        unsigned streak;
        usec_t delay;
} plan_death;

plan_death plan_crash_death(const spec_backoff *b, unsigned streak, bool was_ready, usec_t ran_for);
/* The delay part alone: for a replica whose last (young) death left it at
 * `streak`. */
usec_t plan_backoff_delay(const spec_backoff *b, unsigned streak);

/* ---- a replica's lifecycle: the pod worker's one step ------------------------------------- */

/* What the pod worker sees of one pod: the object, and the runtime's view
 * of its process (the agent's pod_rt), as plain facts. */
typedef struct plan_pod_view {
        bool orphaned;      /* its ReplicaSet is gone, and it is not being deleted yet */
        bool terminal;      /* Failed or Succeeded */
        bool deleting;      /* deletionTimestamp set */
        bool pending;       /* phase Pending (never reported running) */
        usec_t grace;       /* its deletion's grace period (or the pod's) */
        usec_t probe_grace; /* for a liveness failure: the probe's grace, else grace */
        usec_t start_after; /* tend.io/start-after (wall); 0: none */
        usec_t now;         /* wall */
        bool agent_started; /* start-up (adoption) is over */
        bool draining;      /* tendd stops every pod to exit: start none */
        /* the runtime's view; all false without one */
        bool watched;     /* the agent has runtime state for it */
        bool has_process; /* ... with a live handle */
        bool exited;      /* its exit is seen, not yet written */
        bool stopping;    /* a stop was asked, with stop_grace */
        usec_t stop_grace;
        bool liveness_failed;
        /* tend.io/node-lost-policy: fence, and this node is cut off from
         * etcd: the pod stops before the lease can expire, and starts
         * again only once the node is back (docs/fleet.md §3.10) */
        bool fenced;
} plan_pod_view;

typedef enum plan_pod_action {
        PLAN_POD_NOTHING,       /* all is as it should be */
        PLAN_POD_REFLECT,       /* write what the runtime sees (running, ready) */
        PLAN_POD_START,         /* start its process */
        PLAN_POD_WAIT_UNTIL,    /* come back at .at (wall): a start-after annotation */
        PLAN_POD_STOP,          /* stop it with .grace: deleted (.first: the first stop asked) */
        PLAN_POD_STOP_LIVENESS, /* stop it with .grace: its liveness probe failed */
        PLAN_POD_WRITE_EXIT,    /* write its exit: the pod becomes Failed or Succeeded */
        PLAN_POD_FORGET,        /* drop the runtime state of a terminal pod */
        PLAN_POD_REMOVE,        /* delete the object (its record, logs, runtime state) */
        PLAN_POD_MARK_DELETED,  /* garbage collection: start its graceful deletion */
        PLAN_POD_MARK_LOST,     /* running, but nothing watches its process: Failed, Lost */
        PLAN_POD_FENCE,         /* stop it with .grace: fenced (the node is cut off) */
        _PLAN_POD_ACTION_MAX,
} plan_pod_action;

typedef struct plan_pod_step {
        plan_pod_action action;
        usec_t at;    /* PLAN_POD_WAIT_UNTIL */
        usec_t grace; /* PLAN_POD_STOP, PLAN_POD_STOP_LIVENESS, PLAN_POD_FENCE */
        bool first;   /* PLAN_POD_STOP: no stop was asked before (an event says so) */
} plan_pod_step;

const char *plan_pod_action_to_string(plan_pod_action a);
/* The one thing to do next for a pod (docs/architecture.md §5, the pod worker). */
plan_pod_step plan_pod_next(const plan_pod_view *v);

/* ---- history and rollback -------------------------------------------------------------------- */

typedef struct plan_old_rs {
        const char *name;
        usec_t created;
        int32_t spec_replicas;
        int32_t status_replicas;
        bool settled; /* generation <= observedGeneration */
        bool deleting;
        int64_t revision; /* deployment.kubernetes.io/revision; absent or unreadable: 0 */
} plan_old_rs;

/* §6: which old RSs history cleanup deletes (lowest revision first, then
 * oldest, as Kubernetes' ReplicaSetsByRevision: a ReplicaSet a rollback
 * revived is recent, however old; only empty and settled ones, skipped
 * ones not replaced). limit < 0: keep all. */
size_t plan_history_prune(const plan_old_rs *old, size_t n, int32_t limit, bool *ret_delete);

/* §4.1: the RS `rollout undo` returns to. revisions[i] is RS i's revision
 * (-1 when unparsable: skipped). to_revision 0 means the previous one.
 * Returns 0 and the index, -EINVAL for a negative revision, -ENOENT when
 * there is no such revision (or no history). */
int plan_undo_target(const int64_t *revisions, size_t n, int64_t to_revision, size_t *ret_index);

/* The highest revision among the RSs, 0 if none. */
int64_t plan_max_revision(const int64_t *revisions, size_t n);

/* Appends rev to a revision-history annotation value, dropping the oldest
 * entries to stay within 2000 characters. New string. */
char *plan_revision_history_append(const char *history, int64_t rev);

/* ---- status and conditions ----------------------------------------------------------------------
 */

/* Kubernetes' condition update rule (§5.2): same status and reason leaves
 * the condition alone; same status, new reason keeps lastTransitionTime;
 * otherwise replaced. Returns 1 if anything changed, 0 if not, -ENOMEM (the
 * conditions as they were). now is wall clock. */
int plan_set_condition(spec_condition **conds, size_t *n, const char *type, const char *status,
                       const char *reason, const char *message, usec_t now);
/* The Progressing special case (§5.3): everything but lastTransitionTime
 * is rewritten even when status and reason are the same. */
int plan_refresh_condition(spec_condition **conds, size_t *n, const char *type, const char *status,
                           const char *reason, const char *message, usec_t now);
void plan_remove_condition(spec_condition **conds, size_t *n, const char *type);

/* DeploymentComplete (§5.2). */
bool plan_deployment_complete(const spec_deployment *d);

/* ---- tend's rollout extensions (plan/rollout.c) ---------------------------------------------- */

/* tend.io/auto-rollback: a rollout fails when its progress deadline
 * passed, or when replicas of the new revision crash-loop; it goes back to
 * the last revision that completed, once. A revision that completed more
 * than PLAN_AUTO_ROLLBACK_SETTLE ago is not rolled back from: a crash then
 * is the crash-loop back-off's business. */
#define PLAN_AUTO_ROLLBACK_SETTLE (60 * USEC_PER_SEC)

typedef struct plan_rollback_view {
        bool enabled;           /* tend.io/auto-rollback: "true" */
        bool paused;            /* the deployment */
        bool has_new;           /* there is a new ReplicaSet (of the current template) */
        bool failed_before;     /* ... already marked failed (rolled back from once) */
        bool complete;          /* ... its rollout completed once */
        usec_t complete_at;     /* ... when (wall; 0: not known) */
        bool deadline_exceeded; /* Progressing: ProgressDeadlineExceeded */
        int32_t crashlooping;   /* the new ReplicaSet's pods in CrashLoopBackOff */
        usec_t now;             /* wall */
} plan_rollback_view;

typedef enum plan_rollback_reason {
        PLAN_ROLLBACK_NONE,
        PLAN_ROLLBACK_DEADLINE,  /* ProgressDeadlineExceeded */
        PLAN_ROLLBACK_CRASHLOOP, /* CrashLoopBackOff */
} plan_rollback_reason;

/* Whether the new ReplicaSet's rollout failed now, and why. */
plan_rollback_reason plan_auto_rollback(const plan_rollback_view *v);
/* What a failed rollout goes back to: the ReplicaSet of the highest
 * revision that completed, other than new_index; -1: none did. */
ssize_t plan_rollback_target(const int64_t *revisions, const bool *complete, size_t n,
                             ssize_t new_index);

/* tend.io/canary: a new template first gets cap pods within the rolling
 * bounds (the old ReplicaSets keep the rest), and once they are all
 * available the rollout waits for promotion. The cap for the new
 * ReplicaSet, or -1: none. count: the annotation's for the replicas
 * (spec_canary_count(); -1: no annotation); rolling: the strategy is
 * RollingUpdate; released: the new ReplicaSet was promoted, or completed
 * once; has_old: another ReplicaSet has replicas or live pods (the first
 * revision has nothing to replace). */
int32_t plan_canary_cap(int32_t count, bool rolling, bool released, bool has_old);
/* With the canaries held at cap: the old ReplicaSets keep replicas -
 * max(cap, the new one's) between them, the newest first (the highest
 * index), each never above what it has (have[i]); targets[] as
 * plan_scale_down_old() left them (the most it may take), raised. */
void plan_canary_keep_old(int32_t replicas, int32_t cap, const int32_t *have, size_t n,
                          size_t new_index, int32_t *targets);

typedef enum plan_canary_action {
        PLAN_CANARY_GROWING, /* not all available: no wait (a since is dropped) */
        PLAN_CANARY_WAIT,    /* all available: the rollout waits for promotion */
        PLAN_CANARY_PROMOTE, /* ... for tend.io/canary-promote-after: promoted */
} plan_canary_action;

typedef struct plan_canary_step {
        plan_canary_action action;
        usec_t since; /* WAIT, PROMOTE: all available since (now, if not known) */
        usec_t at;    /* WAIT: come back then to promote (0: only on request) */
} plan_canary_step;

/* The canaries' next step: cap of them, the new ReplicaSet's replicas and
 * available ones, all available since (wall; 0: not known), promoted
 * after that long (0: only on request). */
plan_canary_step plan_canary_next(int32_t cap, int32_t replicas, int32_t available, usec_t since,
                                  usec_t after, usec_t now);

/* ---- fleet mode (docs/fleet.md §3.6–3.11)
 * -------------------------------------------------------- */

/* A node as the scheduler sees it. The counts are updated in place as
 * plan_schedule() places pods, so that each placement counts for the next. */
typedef struct plan_node {
        const char *name;
        bool ready;             /* its tendd holds its lease */
        bool unschedulable;     /* cordoned */
        const spec_map *labels; /* for nodeSelector */
        int32_t capacity;       /* pods it takes; <= 0: no limit */
        int32_t pods;           /* active pods bound to it, every deployment's */
        int32_t group_pods;     /* of them, the pods of the deployment being placed */
        const uint16_t *ports;  /* fixed ports its pods take */
        size_t n_ports;
} plan_node;

typedef struct plan_new_pod {
        const char *name;              /* the last tie-break: a stable hash of (pod, node) */
        const spec_map *node_selector; /* every label must match; NULL: any node */
        const uint16_t *ports;         /* fixed ports it needs (not leased ones) */
        size_t n_ports;
} plan_new_pod;

/* Places the pods of one deployment, one after the other: a feasible node
 * is ready, not cordoned, matches the pod's nodeSelector, is below its
 * capacity and has none of the pod's fixed ports taken (by its pods, or by
 * a pod placed on it earlier in this call); of those, the one
 * with the fewest pods of this deployment (spread), then the fewest pods,
 * then the lowest hash of (pod, node). ret_node[i]: the node's index, or -1
 * when none is feasible (Unschedulable). Returns how many were placed. */
size_t plan_schedule(plan_node *nodes, size_t n_nodes, const plan_new_pod *pods, size_t n_pods,
                     int *ret_node);

/* The default share of lost nodes at which the leader stops evicting. */
#define PLAN_FLEET_DISRUPTION 0.55

typedef struct plan_node_state {
        const char *name;
        bool live;         /* its lease key exists */
        usec_t lost_since; /* when the leader saw the lease go (its own clock); when !live */
} plan_node_state;

typedef enum plan_node_verdict {
        PLAN_NODE_READY,   /* live */
        PLAN_NODE_UNKNOWN, /* lost, for less than lost_after: its pods are unknown */
        PLAN_NODE_EVICT,   /* lost for lost_after: its pods go, replaced elsewhere */
        PLAN_NODE_HOLD,    /* lost for lost_after, but the guard holds evictions */
} plan_node_verdict;

typedef struct plan_fleet_view {
        bool disrupted; /* the guard holds: evict nothing */
        usec_t next;    /* when a verdict changes by time alone; USEC_INFINITY: never */
} plan_fleet_view;

/* Node lifecycle (the leader's): each node's verdict at now. The guard
 * evicts nothing while a share >= disruption of the nodes (at least 2) is
 * lost together — an etcd stall expires every lease at once — or while the
 * leader has led for less than a TTL (it has not watched long enough to
 * know who is gone). */
plan_fleet_view plan_node_lifecycle(const plan_node_state *nodes, size_t n, usec_t now,
                                    usec_t lost_after, double disruption, usec_t leader_since,
                                    usec_t ttl, plan_node_verdict *ret);

typedef enum plan_lost_policy {
        PLAN_LOST_REPLACE, /* tend.io/node-lost-policy: replace (the default) */
        PLAN_LOST_FENCE,   /* fence */
} plan_lost_policy;

/* How long before its lease could expire a fenced node stops its pods. */
#define PLAN_FENCE_MARGIN (1 * USEC_PER_SEC)
/* What the leader waits beyond a fenced node's lease expiry and the pod's
 * grace period before it replaces the pod. */
#define PLAN_FENCE_SLACK (2 * USEC_PER_SEC)

/* A node cut off from etcd: stop this pod now? Under fence, from the last
 * acknowledged keepalive's send time + TTL − PLAN_FENCE_MARGIN (etcd cannot
 * expire the lease sooner); under replace, never. last_ok_send 0: never
 * acknowledged (stop). */
bool plan_fence(plan_lost_policy policy, usec_t last_ok_send, usec_t ttl, usec_t now);
/* The leader: when a fenced pod of a lost node may be replaced. */
usec_t plan_fence_replace_at(usec_t lease_gone, usec_t grace);

typedef struct plan_local_pod {
        const char *uid; /* a pod this node runs (or has in its SQLite copy) */
} plan_local_pod;

typedef struct plan_bound_pod {
        const char *uid;  /* a pod in etcd */
        const char *node; /* spec.nodeName; NULL: not bound */
        bool deleting;    /* metadata.deletionTimestamp */
} plan_bound_pod;

typedef enum plan_local_action {
        PLAN_LOCAL_KEEP,         /* still bound here, not deleting: adopt, no restart */
        PLAN_LOCAL_STOP,         /* gone from etcd, or bound elsewhere: stop it */
        PLAN_LOCAL_STOP_CONFIRM, /* bound here and deleting: stop it, then remove its keys */
} plan_local_action;

/* A node (re)connected to etcd (docs/fleet.md §3.9 rule 4): what becomes of each
 * local pod, by identity (uid), and which pods of etcd it starts
 * (ret_start[i]: bound here, not deleting, not running here). Nothing
 * else is started. */
void plan_local_reconcile(const plan_local_pod *local, size_t n_local, const plan_bound_pod *etcd,
                          size_t n_etcd, const char *self, plan_local_action *ret_local,
                          bool *ret_start);
