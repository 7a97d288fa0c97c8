/* SPDX-License-Identifier: MIT */
#pragma once

/* Private to the agent core. */

#include "tend/agent.h"
#include "tend/plan.h"

/* A set of "namespace/name" keys with FIFO order: adding a key that is
 * already queued does nothing (the queue coalesces). */
typedef struct workq {
        tend_hashmap *set;
        char **keys;
        size_t head, n, alloc;
} workq;

int workq_add(workq *q, const char *key);
char *workq_pop(workq *q); /* new string or NULL */
bool workq_empty(const workq *q);
void workq_done(workq *q);

/* What the pod worker knows of a pod's process beyond the pod object. */
typedef struct pod_rt {
        agent *agent;
        char *uid;
        char *key;         /* "namespace/name" */
        void *handle;      /* backend handle; NULL once freed */
        bool started;      /* the backend said so */
        bool ready;        /* published readiness */
        bool stopping;     /* stop requested */
        usec_t stop_grace; /* ... with this grace period */
        bool start_queued; /* a unit's start, decided this pass: after its commit */
        bool exited;       /* exit seen, not yet written to the pod */
        rt_exit exit;
        char *exit_message; /* exit.message points here */
        bool liveness_failed;
        char *liveness_message;
        char *probe_message; /* last readiness failure, for events */
        bool probe_dirty;    /* readiness changed: write the pod */
        bool probe_failed;   /* a readiness failure to tell (an event) */
        char *notify_status; /* its last STATUS= (tend.io/notify), NULL: none */
        char *volumes_key;   /* what its volumes' files were made from (volumes.c) */
        usec_t started_wall;
} pod_rt;

/* An event decided during a pass: written at the end of a cycle, after the
 * starts, so that a replacement is not kept waiting for the story of its
 * predecessor. */
typedef struct pending_event {
        store_kind kind;
        spec_meta meta; /* namespace, name, uid: copies */
        char *type, *reason, *message;
        usec_t at; /* wall clock */
} pending_event;

/* When a pass began (for the respawn histograms). */
typedef struct pass_clock {
        usec_t start_wall; /* wall clock, as exits are stamped */
        usec_t start;      /* monotonic */
} pass_clock;

typedef struct delayed {
        usec_t at; /* monotonic */
        store_kind kind;
} delayed;

struct agent {
        store *store;
        const agent_backend *backend;
        void *backend_data;
        agent_clock clock;
        char *node_name;
        agent_fleet fleet; /* .leading NULL: a single host */
        void (*wakeup)(void *);
        void *wakeup_userdata;
        bool processing;
        bool started;
        bool draining; /* stopping every pod before exit: create and start none */
        /* A key could not be queued (out of memory): everything is queued
         * again (agent_resync) at this time, not at the driver's periodic
         * resync. 0: none. */
        usec_t resync_at;

        workq queues[_STORE_KIND_MAX];
        tend_hashmap *delayed[_STORE_KIND_MAX]; /* key → delayed* */
        tend_hashmap *pods;                     /* pod uid → pod_rt* */
        char **starts;                          /* units to start after the commit */
        size_t n_starts, alloc_starts;
        char **early; /* pod uids started before the commit */
        size_t n_early, alloc_early;
        bool yielded; /* after this pass's first process start */
        /* The host refused a start for want of tendd's own resources
         * (descriptors, processes): until short_until (monotonic) starts
         * wait without trying, said in short_why (ctl-pod.c). */
        usec_t short_until;
        char *short_why;
        /* "Failed to commit" said at most once a minute while it lasts
         * (a full disk fails every pass, a second apart): when, the error,
         * and how many since */
        usec_t commit_said;
        int commit_said_error;
        unsigned commit_unsaid;
        pending_event *events;
        size_t n_events, alloc_events;
        pass_clock clock_pass;
        char **doomed_dirs;    /* "ns/name" of removed pods: their logs go after the pass */
        char **doomed_volumes; /* uids of removed pods with volumes: theirs go too */
        agent_metrics metrics;
};

static inline usec_t agent_now(const agent *a) {
        return a->clock.now(a->clock.userdata);
}
static inline usec_t agent_wall(const agent *a) {
        return a->clock.wall(a->clock.userdata);
}

/* Fleet mode (agent_fleet): whether this agent runs the deployment and
 * ReplicaSet controllers (always on a single host), and whether pod p is
 * its to run. */
static inline bool agent__fleet(const agent *a) {
        return a->fleet.leading != NULL;
}
static inline bool agent__leads(const agent *a) {
        return !agent__fleet(a) || a->fleet.leading(a->fleet.userdata);
}
static inline bool agent__pod_mine(const agent *a, const spec_pod *p) {
        return !agent__fleet(a) || streq_ptr(p->spec.node_name, a->node_name);
}
/* Whether p's process was ever started (Kubernetes: scheduled). On a single
 * host the start writes spec.nodeName; in a fleet that is the binding, made
 * at creation, and the start is its container id or start time. */
static inline bool agent__pod_started(const agent *a, const spec_pod *p) {
        if (!agent__fleet(a))
                return p->spec.node_name != NULL;
        return p->status.start_time ||
               (p->status.n_container_statuses && p->status.container_statuses[0].container_id);
}

/* ---- queue.c: the work queue, delayed keys, lookups, events and starts ---- */

/* "ns/name" → ns (new) and name (inside key). */
int agent__split_key(const char *key, char **ret_ns, const char **ret_name);
void agent__enqueue(agent *a, store_kind kind, const char *ns, const char *name);
/* A key could not be queued (out of memory): everything is queued again a
 * second from now (agent_process()), a lost notification costs a second. */
void agent__lost_key(agent *a);
/* Run the key again at `at` (monotonic), unless it runs earlier anyway. */
void agent__enqueue_at(agent *a, store_kind kind, const char *ns, const char *name, usec_t at);
/* The same, from a wall-clock time. */
void agent__enqueue_at_wall(agent *a, store_kind kind, const char *ns, const char *name,
                            usec_t wall);

/* Moves due delayed keys into their queues; returns the next deadline. */
usec_t agent__promote_delayed(agent *a);

/* env.c: a container's environment as its process starts, references
 * resolved (rt_pod_params.env). -ENOENT: a reference is missing and not
 * optional, *ret_problem (new) says which in the kubelet's words
 * ("configmap \"x\" not found"); -ENOMEM. */
/* The reason of a container that cannot be made (the kubelet's). */
#define AGENT_CONFIG_ERROR "CreateContainerConfigError"
/* A start the host refused for want of tendd's own resources: the pod
 * waits with this reason (the kubelet's for a runtime that cannot make the
 * container), retried every AGENT_SHORT_RETRY, not a death. */
#define AGENT_CREATE_ERROR "CreateContainerError"
#define AGENT_SHORT_RETRY (2 * USEC_PER_SEC)
typedef struct agent_env {
        rt_env_var *vars;
        size_t n;
        char **owned; /* each variable's name and value */
} agent_env;
/* say: the start itself, which says (an event) what of envFrom it skipped
 * (the check before it does not). */
int agent__pod_env(agent *a, const spec_pod *p, bool say, agent_env *ret, char **ret_problem);
/* Whether p's environment refers to anything (else it is as written: the
 * runtime takes the container's env, nothing resolved). */
bool agent__pod_env_refers(const spec_pod *p);
void agent__pod_env_done(agent_env *e);

/* A missing reference, said in *ret (new): returns -ENOENT (-ENOMEM). */
int agent__problem(char **ret, const char *fmt, ...) _printf_(2, 3);

/* volumes.c: the files of a pod's configMap and secret volumes as its
 * process starts (rt_pod_params.volumes). -ENOENT: one is missing and not
 * optional, *ret_problem (new) says which in the kubelet's words; -ENOMEM. */
#define AGENT_VOLUME_WAIT "ContainerCreating" /* the kubelet's, with a FailedMount event */
typedef struct agent_volumes {
        rt_volume_files *vols; /* one per spec.volumes entry */
        size_t n_vols;
        void **owned; /* decoded values */
        size_t n_owned, alloc_owned;
} agent_volumes;
int agent__pod_volumes(agent *a, const spec_pod *p, agent_volumes *ret, char **ret_problem);
void agent__pod_volumes_done(agent_volumes *v);
/* Whether a configMap or a secret volume of p is mounted (its files made). */
bool agent__pod_has_files(const spec_pod *p);
/* What p's mounted configMap and secret volumes are made from, each
 * object's resourceVersion: when it changes, their files are rewritten. */
char *agent__volumes_key(agent *a, const spec_pod *p);
/* Whether a volume of p comes from the ConfigMap or the Secret name. */
bool agent__pod_refers_to(const spec_pod *p, store_kind kind, const char *name);

/* config.c: tend.io/config-rollout. d's template with each reference to a
 * ConfigMap or a Secret that exists replaced by its snapshot's name (made,
 * if make): 1 and *ret (new); 0 and NULL when d does not have the
 * annotation (its template is what it runs); -ENOMEM. */
int agent__config_template(agent *a, const spec_deployment *d, bool make, spec_pod_template **ret);
/* The snapshots t names, for a ReplicaSet's tend.io/config
 * ("configmap/NAME,secret/NAME"; "" none); NULL: out of memory. */
char *agent__config_names(agent *a, const char *ns, const spec_pod_template *t);
/* Whether t refers to the ConfigMap or the Secret name. */
bool agent__template_refers_to(const spec_pod_template *t, store_kind kind, const char *name);
/* The snapshots owned by deployment owner_uid that neither keep (NULL:
 * none) nor a ReplicaSet of it names: deleted. */
int agent__config_prune(agent *a, const char *ns, const char *owner_uid,
                        const spec_pod_template *keep);

int agent__event(agent *a, store_kind kind, const spec_meta *m, const char *type,
                 const char *reason, const char *fmt, ...) _printf_(6, 7);

/* The pod worker decided to start pod uid, a unit: run after the pass's
 * commit, so that the pod and the intent to start it are on disk before
 * the unit exists (an agent killed right after finds it by its name). */
int agent__queue_start(agent *a, const char *uid);
/* A pod started before its pass is committed (ctl-pod.c begin_start()). */
int agent__note_early(agent *a, const char *uid);

/* Writes the pass's events (after its starts), or drops them (its commit
 * failed). */
void agent__flush_events(agent *a);
void agent__drop_events(agent *a);

const spec_deployment *agent__deployment_by_uid(agent *a, const char *ns, const char *uid);
const spec_replica_set *agent__replica_set_by_uid(agent *a, const char *ns, const char *uid);

/* A pod evicted from a lost node (marked deleted; its node cannot say
 * whether it still runs): unknown, neither live nor terminating, so that a
 * dead node holds back no rollout (docs/fleet.md §3.7). Both controllers
 * count pods with it: the ReplicaSet's room and the Deployment's rollout. */
static inline bool agent__pod_evicted_unknown(agent *a, const spec_pod *p) {
        return p->metadata.deletion_timestamp && p->spec.node_name && a->fleet.node_lost &&
               a->fleet.node_lost(a->fleet.userdata, p->spec.node_name);
}

/* A ReplicaSet annotation the deployment controller keeps for itself
 * (AGENT_ANN_COMPLETE, ...): a ReplicaSet's alone in the registry. */
static inline bool agent__rs_own_annotation(const char *key) {
        const spec_annotation *a = spec_annotation_find(key);
        return a && (a->where & SPEC_ANN_ON_REPLICA_SET) && !(a->where & SPEC_ANN_ON_DEPLOYMENT);
}

/* A Deployment's annotation that its controllers or kubectl keep, not
 * copied to or from its ReplicaSets (the revisions, last-applied, ...):
 * a rollback leaves it where it is, as Kubernetes' does. */
static inline bool agent__controller_key(const char *key) {
        const spec_annotation *a = spec_annotation_find(key);
        return a && !a->to_replica_set && a->writer != SPEC_ANN_BY_USER &&
               (a->where & (SPEC_ANN_ON_DEPLOYMENT | SPEC_ANN_ON_REPLICA_SET));
}

/* actions.c: d's template and annotations become the ReplicaSet rs's, as
 * `rollout undo` does (the pod-template-hash label removed; the
 * deployment's own controller keys kept). Returns 1 (changed) or -errno. */
int agent__rollback_to(spec_deployment *d, const spec_replica_set *rs);

/* ---- pods.c: the pods' runtime state, container status, replica facts ---- */

/* What the backend is told of pod p (borrowed from it; owner is the
 * room for its socket_owner: "ns/deployment"). */
#define AGENT_OWNER_MAX 160
rt_pod_params agent__pod_params(const spec_pod *p, char owner[static AGENT_OWNER_MAX]);

pod_rt *agent__pod_rt(agent *a, const char *uid);
/* Frees it, detaching its process (which keeps running). */
void agent__pod_rt_free(agent *a, pod_rt *pr);
pod_rt *agent__pod_rt_new(agent *a, const spec_pod *p);
void agent__pod_rt_drop(agent *a, const char *uid);

/* A replica's crash-loop streak (plan_streak_after_death()): on a live pod
 * what it inherited, on a dead one the streak after its death. Kept on the
 * pod, so that it survives an agent restart and goes on with the lineage. */
unsigned agent__pod_streak(const spec_pod *p);
int agent__set_pod_streak(spec_pod *p, unsigned streak);
/* The crash-loop back-off of a ReplicaSet's replicas: its deployment's
 * tend.io/crash-backoff, which the deployment controller keeps on the new
 * ReplicaSet. */
spec_backoff agent__backoff_policy(agent *a, const spec_replica_set *rs);
/* Its deployment's tend.io/node-lost-policy, which the deployment
 * controller keeps on its ReplicaSets (replace when unset). */
plan_lost_policy agent__lost_policy(agent *a, const spec_pod *p);
/* How long a pod gets to stop (its deletion's grace, else its own). */
usec_t agent__grace(const spec_pod *p);
/* When its process ended (containerStatuses[0].state.terminated), else its
 * creation time. */
usec_t agent__pod_finished_at(const spec_pod *p);
const char *agent__container_name(const spec_pod *p);

/* Marks a pod whose process cannot be found Failed ("Lost"). */
int agent__mark_lost(agent *a, const spec_pod *p, const char *why);

/* Deletes a pod object with its record and log directory. */
int agent__remove_pod(agent *a, const spec_pod *p);
/* The same for a dead pod whose replacement carries its lineage: its log
 * stays, the replacement's `logs --previous`. p is freed. */
int agent__remove_replaced_pod(agent *a, const spec_pod *p);
/* The log directories of the pods a pass removed (after its spawns). */
void agent__remove_doomed_dirs(agent *a);

/* containerStatuses[0], created (named after the container) if missing. */
/* What the pod runs (its image and imageID), as the runtime found it at
 * the start ("" where it has none). */
int agent__set_image(spec_container_status *cs, const rt_record *rec);
spec_container_status *agent__container_status(spec_pod *p);
/* The container's state, replaced; -ENOMEM (a half-set state: do not write
 * the pod). */
int agent__set_waiting(spec_container_status *cs, const char *reason, const char *message);
int agent__set_running(spec_container_status *cs, usec_t started_at);
int agent__set_terminated(spec_container_status *cs, int32_t exit_code, int32_t sig,
                          const char *reason, const char *message, usec_t started_at,
                          usec_t finished_at);

/* ---- the controllers (ctl-*.c), called by the pass (pass.c) ---- */

/* One sync of one key each. */
int ctl_deployment_sync(agent *a, const char *ns, const char *name);
int ctl_replica_set_sync(agent *a, const char *ns, const char *name);
int ctl_pod_sync(agent *a, const char *ns, const char *name);
/* Runs the starts queued for after the commit; their writes go into the
 * next batch. */
void ctl_pod_run_starts(agent *a);
/* The commit after early starts succeeded: nothing to undo. */
void ctl_pod_forget_early(agent *a);
/* It failed: the pods were rolled back, so their processes are killed. */
void ctl_pod_undo_early(agent *a);
