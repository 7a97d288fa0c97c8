/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * The agent core: the three control loops (deployment, ReplicaSet, pod
 * worker) over the store, driven by a coalesced work queue. It has no event
 * loop of its own: a driver calls agent_process() when there is work and at
 * the deadline it returns. tendd/agent-loop.c drives it from libuv with the
 * real runtime; the controller tests drive it in virtual time with a fake
 * backend. Every decision is made by the planners of tend/plan.h.
 *
 * Only the core's entry points commit the store: a pass (agent_process), the
 * user actions below, start-up (agent_start), drain (agent_drain) and
 * shutdown. Whoever else writes (the API, the manifest directory) goes
 * through them; the fleet's mirror, which puts other nodes' writes into the
 * store, is the one other committer (tend/store.h says how).
 */

#include "tend/plan.h"
#include "tend/store.h"
#include "tend/runtime.h"

typedef struct agent agent;

/* The runtime as the pod worker sees it (the real one wraps rt_pod_*). A
 * handle is whatever the backend returns for a pod; the backend reports
 * through agent_pod_started/exited/probe with the pod_userdata it was given. */
typedef struct agent_backend {
        int (*start)(void *b, const rt_pod_params *p, void *pod_userdata, void **ret_handle,
                     char **ret_error);
        int (*adopt)(void *b, const rt_pod_params *p, const rt_record *r, void *pod_userdata,
                     void **ret_handle, char **ret_error);
        /* Finds a process (or unit) that a crash interrupted between
         * spawn and record; fills a record. NULL: not supported. */
        int (*find)(void *b, const rt_pod_params *p, rt_record *ret);
        /* At the end of start-up: stops what runs without a pod (systemd
         * units no record names), each told through agent_orphan_stopped()
         * as it happens. NULL: none. */
        void (*sweep_orphans)(void *b);
        /* Whether a pod may be started before the pass that decided it is
         * committed (the sooner, the better): only where sweep_orphans
         * stops what an agent that died before its commit left running.
         * NULL: never. */
        bool (*early_start)(const spec_pod_spec *s);
        /* Called after the first process a pass starts, before anything
         * else. NULL: nothing. */
        void (*after_starts)(void *b);
        /* The log files of a pod that is gone. NULL: no logs to remove. */
        void (*remove_logs)(void *b, const char *ns, const char *pod);
        /* Volumes (rt_pod_update_volumes() and the rest of runtime.h's
         * volume calls); NULL: the backend has none. update_volumes
         * rewrites a running pod's files where they changed: how many
         * volumes did, or -errno (*ret_error). mount_problem: why pods
         * with volumeMounts cannot run here, NULL if they can. */
        int (*update_volumes)(void *handle, const rt_pod_params *p, char **ret_error);
        void (*remove_volumes)(void *b, const char *uid);
        void (*sweep_volumes)(void *b, bool (*keep)(const char *uid, void *userdata),
                              void *userdata);
        const char *(*mount_problem)(void);
        /* Why the resources.limits of s cannot be enforced here (*ret, a
         * new string), NULL if they can. NULL: no limits are. */
        const char *(*limits_problem)(void *b, const spec_pod_spec *s, char **ret);
        /* What the pod of uid (its main process pid) uses, children
         * included (its cgroup): CPU time (ns) and memory (working set,
         * bytes); -ENOENT: not known so. NULL: never. */
        int (*usage)(void *b, const char *uid, pid_t pid, uint64_t *ret_cpu_ns,
                     uint64_t *ret_memory);
        int (*stop)(void *handle, usec_t grace);
        int (*signal)(void *handle, int sig);
        void (*free)(void *handle);
        const rt_record *(*record)(void *handle);
        const char *(*container_id)(void *handle);
} agent_backend;

typedef struct agent_clock {
        usec_t (*now)(void *userdata);  /* monotonic */
        usec_t (*wall)(void *userdata); /* realtime */
        void *userdata;
} agent_clock;

/*
 * Fleet mode (tendd --fleet, docs/fleet.md §3): the store is the fleet's (a
 * mirror of etcd), and this agent is one node of the fleet. The deployment
 * and ReplicaSet controllers run only while this node leads; the
 * ReplicaSet controller binds each pod it creates to a node
 * (plan_schedule(); spec.nodeName is then the binding, not "started"); the
 * pod worker runs only the pods bound to this node, and leaves the others
 * alone (their nodes run them).
 */
typedef struct agent_fleet {
        /* Whether this node runs the deployment and ReplicaSet controllers. */
        bool (*leading)(void *userdata);
        /* The nodes a new pod may go to: name, ready, unschedulable, labels
         * and capacity (the agent counts their pods); *ret is borrowed until
         * the next call. */
        size_t (*nodes)(void *userdata, const plan_node **ret);
        /* Whether etcd has pod p (bound here): only then is it started
         * (docs/fleet.md §3.9 rule 1); agent_touch() when it comes to. NULL: yes. */
        bool (*in_etcd)(void *userdata, const spec_pod *p);
        /* Whether node (a pod's spec.nodeName) has lost its lease: its pods
         * are unknown, not counted in a deployment's live bound. NULL: no. */
        bool (*node_lost)(void *userdata, const char *node);
        /* Whether this node is cut off from etcd long enough that its pods
         * under tend.io/node-lost-policy: fence must stop (and none start):
         * agent_fleet_changed() when it changes. NULL: never. */
        bool (*fenced)(void *userdata);
        void *userdata;
} agent_fleet;

typedef struct agent_config {
        store *store;                 /* borrowed; the agent subscribes to it */
        const agent_backend *backend; /* borrowed */
        void *backend_data;
        const agent_clock *clock; /* NULL: the real clocks */
        const char *node_name;    /* NULL: the host name */
        const agent_fleet *fleet; /* borrowed; NULL: a single host */
        /* Called when new work arrived outside agent_process() (a pod
         * exited): the driver should call agent_process() soon. */
        void (*wakeup)(void *userdata);
        void *wakeup_userdata;
} agent_config;

int agent_new(const agent_config *c, agent **ret);
/* Before an orderly exit: commits what is pending, durably. */
int agent_shutdown(agent *a);
/* Detaches every pod (processes keep running) and frees the agent. Commits
 * nothing: what agent_shutdown() did not commit is lost, as in a crash. */
agent *agent_free(agent *a);

/* Adopts the pods of the store (after a restart): live processes are
 * watched again, gone ones become Failed pods ("lost while the agent was
 * down"). Call once, before the first agent_process(). */
int agent_start(agent *a);

/* Runs the controllers until there is nothing left to do now, committing
 * the store. Returns the monotonic time of the next deadline
 * (USEC_INFINITY: none). */
usec_t agent_process(agent *a);
bool agent_has_work(const agent *a);
/* Asks the driver to run agent_process() soon (after a user action):
 * calls the config's wakeup. */
void agent_kick(agent *a);
/* Queues every object (the periodic resync). */
void agent_resync(agent *a);

/* Backend up-calls (pod_userdata as given to start/adopt). */
void agent_pod_started(agent *a, void *pod_userdata);
void agent_pod_exited(agent *a, void *pod_userdata, const rt_exit *e);
/* A pod's STATUS= (tend.io/notify): shown as its tend.io/status annotation. */
void agent_pod_status(agent *a, void *pod_userdata, const char *text);
void agent_pod_probe(agent *a, void *pod_userdata, rt_probe_type type, bool ok,
                     const char *message);
/* The runtime stopped a unit that had no pod (an event says so). */
void agent_orphan_stopped(agent *a, const char *unit);

typedef enum agent_respawn_phase {
        AGENT_RESPAWN_QUEUE, /* the exit noticed → the pass begins */
        AGENT_RESPAWN_PASS,  /* the controllers decide: the exit, the replacement, its start
                              * (and, for a unit, the commit that must come first) */
        AGENT_RESPAWN_SPAWN, /* the process is prepared, cloned, and has exec'd */
        _AGENT_RESPAWN_PHASE_MAX,
} agent_respawn_phase;

extern const char *const agent_respawn_phase_names[_AGENT_RESPAWN_PHASE_MAX];

/* Counters for /metrics. */
typedef struct agent_metrics {
        uint64_t pod_starts;
        uint64_t pod_start_errors;
        uint64_t lost_exit;     /* exited by itself */
        uint64_t lost_signal;   /* killed by a signal */
        uint64_t lost_liveness; /* stopped after a failed liveness probe */
        uint64_t lost_unknown;  /* gone while adopted, or while the agent was down */
        uint64_t backoffs;      /* replacements delayed by the crash-loop back-off */
        uint64_t rollouts_started;
        uint64_t rollouts_completed;
        uint64_t rollouts_failed;
        tend_histogram pass_duration;
        /* A replacement's way from its predecessor's exit to its spawn. */
        tend_histogram respawn[_AGENT_RESPAWN_PHASE_MAX];
} agent_metrics;

const agent_metrics *agent_get_metrics(const agent *a);
store *agent_get_store(const agent *a);
/* Fleet mode: this node began (or ceased) to lead, or the nodes changed:
 * every object is looked at again. */
void agent_fleet_changed(agent *a);
/* An object is looked at again (what the store does not tell: etcd
 * acknowledged it). */
void agent_touch(agent *a, store_kind kind, const char *ns, const char *name);
/* The leader evicts the pods of a node lost for lostAfter (docs/fleet.md §3.7),
 * its lease gone for lost_for: each gets its deletionTimestamp, and its
 * ReplicaSet replaces it on another node; the node stops them when it
 * comes back. A pod under tend.io/node-lost-policy: fence waits until its
 * node has stopped it (the lease gone for its grace period + 2 s). gone: the node
 * itself was deleted (`tend delete node`): its pods are removed at once
 * (as Kubernetes' pod garbage collector). Returns how many, or -errno. */
int agent_evict_node(agent *a, const char *node, bool gone, usec_t lost_for);
/* The node this agent runs its pods on (their spec.nodeName). */
const char *agent_node_name(const agent *a);
/* The backend's reading of a pod's use (agent_backend.usage), -ENOENT if
 * it has none. */
int agent_pod_usage(agent *a, const char *uid, pid_t pid, uint64_t *ret_cpu_ns,
                    uint64_t *ret_memory);

/* ---- user actions (what the API and the CLI do); errs gets field errors ---- */

typedef enum agent_apply_result {
        AGENT_CREATED,
        AGENT_CONFIGURED,
        AGENT_UNCHANGED,
} agent_apply_result;

/* Creates or updates deployments, all or nothing: every object is checked
 * (selector contract, immutable selector, overlap with other deployments)
 * before any is written; then one durable commit. results[i] per object
 * (may be NULL). Takes nothing: the objects are copied. */
int agent_apply(agent *a, spec_deployment *const *ds, size_t n, spec_errors *errs,
                agent_apply_result *results);
/* The same, with flags: */
enum {
        AGENT_APPLY_DRY_RUN = 1 << 0, /* check everything, write nothing */
        /* A replace (PUT, PATCH), not an apply: the template's restartedAt
         * (of `tend rollout restart`) goes if the object leaves it out. */
        AGENT_APPLY_REPLACE = 1 << 1,
        /* The same declaration again (tendd --manifests' sync): a template
         * that was rolled back automatically (tend.io/auto-rollback) stays
         * rolled back; only a changed template is tried. */
        AGENT_APPLY_KEEP_ROLLBACK = 1 << 2,
        /* Each deployment was validated already (spec_deployment_validate(),
         * as a manifest is when it is read, off the loop): only the checks
         * against what is stored are left. */
        AGENT_APPLY_VALIDATED = 1 << 3,
        /* What the apply left out stays as stored (a List that tend apply
         * sends without them, its manifests not declaring them):
         * spec.replicas (a `tend scale` survives the apply), spec.paused. */
        AGENT_APPLY_KEEP_REPLICAS = 1 << 4,
        AGENT_APPLY_KEEP_PAUSED = 1 << 5,
};
/* What an apply with flags means by the fields it left out, on d (the
 * object as decoded, defaults and all) over old (what is stored; NULL:
 * nothing): AGENT_APPLY_KEEP_* take old's. Pure, as agent_stored_form(),
 * which does it too; a caller that looks at d before (the API's field
 * tracking) calls it first. */
void agent_apply_keep(spec_deployment *d, const spec_deployment *old, unsigned flags);
int agent_apply_ex(agent *a, spec_deployment *const *ds, size_t n, spec_errors *errs,
                   agent_apply_result *results, unsigned flags);
/* d as an apply with flags would store it over old (what is stored, NULL:
 * nothing), the agent's annotations kept (new; NULL: out of memory).
 * Nothing is checked, read or written: it may run off the loop, on a copy
 * of what is stored (api/prep.c). */
spec_deployment *agent_stored_form(const spec_deployment *d, const spec_deployment *old,
                                   unsigned flags);
/* n's generation as stored over old (NULL: nothing stored), and what
 * storing it is: a create, a change, or none. Pure, as agent_stored_form(). */
agent_apply_result agent_stored_generation(const spec_deployment *old, spec_deployment *n);
/* The rest of an apply of n deployments, all or nothing, whose pure part
 * was made off the loop (api/prep.c) against what is stored now (the
 * caller made sure: the same resourceVersions): each stored[i] is
 * agent_stored_form() of one, given its generation by
 * agent_stored_generation(), which said results[i]; each was validated,
 * also as an update of what is stored, and errs holds what that found.
 * What is left: the selector contract and the checks against this agent,
 * then the writes and their one durable commit. Each stored[i] written is
 * taken (set to NULL). flags: AGENT_APPLY_DRY_RUN (then stored[] is what
 * would be stored). -EINVAL: errs says why; nothing is written. */
int agent_apply_prepared(agent *a, spec_deployment **stored, const agent_apply_result *results,
                         size_t n, unsigned flags, spec_errors *errs);
/* A write of any kind a user writes (spec_kind.writes), made in two parts
 * as agent_apply_prepared(): */
typedef struct agent_write {
        store_kind kind;
        void *obj;                 /* agent_object_stored_form()'s; taken when written */
        agent_apply_result result; /* agent_object_generation()'s */
} agent_write;
/* obj as a write would store it over old (NULL: a create): a Deployment as
 * agent_stored_form() with flags; an object of a kind stored as written
 * (a ConfigMap) as it is, with old's identity (uid, creationTimestamp).
 * Pure: it may run off the loop. New; NULL: out of memory. */
void *agent_object_stored_form(store_kind kind, const void *obj, const void *old, unsigned flags);
/* What storing n over old (NULL: nothing) is; a Deployment's generation
 * set as agent_stored_generation() sets it. Pure. */
agent_apply_result agent_object_generation(store_kind kind, const void *old, void *n);
/* The rest of such writes, all or nothing, whatever their kinds (a List
 * of `tend apply`): the Deployments' checks against what is stored (as
 * agent_apply_prepared()), then the writes and their one durable commit.
 * Each was validated by its kind's row, also as an update of what is
 * stored, and errs holds what that found. Each w[i].obj written is taken
 * (set to NULL). flags: AGENT_APPLY_DRY_RUN. -EINVAL: errs says why;
 * nothing is written. */
int agent_write_prepared(agent *a, agent_write *w, size_t n, unsigned flags, spec_errors *errs);
/* Deletes an object of a kind stored as written (a ConfigMap); -ENOENT if
 * there is none. */
int agent_delete_object(agent *a, store_kind kind, const char *ns, const char *name);
/* Deletes a deployment; its ReplicaSets and pods follow (background
 * cascade, graceful stops). -ENOENT if there is none. */
int agent_delete_deployment(agent *a, const char *ns, const char *name);
/* propagationPolicy=Foreground: the deployment is kept, with its
 * deletionTimestamp, until no pod of it runs; then it goes. */
int agent_delete_deployment_foreground(agent *a, const char *ns, const char *name);
int agent_scale_deployment(agent *a, const char *ns, const char *name, int32_t replicas);
/* The same, its metadata.managedFields replaced by managed (a JSON array)
 * in the same write, when the count changes. */
int agent_scale_deployment_managed(agent *a, const char *ns, const char *name, int32_t replicas,
                                   json_t *managed);
/* Hand-scaling a ReplicaSet is allowed (and the deployment puts it back). */
int agent_scale_replica_set(agent *a, const char *ns, const char *name, int32_t replicas);
/* Deletes a ReplicaSet (its pods follow; its deployment, if any, makes a new
 * one). -ENOENT if there is none. */
int agent_delete_replica_set(agent *a, const char *ns, const char *name);
/* Records an event about an object that is not the core's doing (the
 * manifest directory's warnings), committed at once. */
int agent_record_event(agent *a, store_kind kind, const spec_meta *m, const char *type,
                       const char *reason, const char *message);
/* Deletes a pod gracefully; its ReplicaSet replaces it. */
/* grace_seconds < 0: the pod's terminationGracePeriodSeconds. Deleting a
 * pod that is being deleted may shorten its grace period. */
/* tendd --stop-pods-on-exit: stops every pod gracefully (its grace
 * period) and replaces none; agent_live_pods() counts down to 0. */
int agent_drain(agent *a, usec_t *ret_max_grace);
size_t agent_live_pods(agent *a);
/* A process this node must stop when it is cut off from etcd (its pod's
 * tend.io/node-lost-policy: fence): for the fence keeper, which stops it
 * should tendd itself not (hung, or gone: docs/fleet.md §3.10). */
typedef struct agent_fenced {
        pid_t pid;
        uint64_t start_time; /* field 22 of /proc/PID/stat: the same process */
        usec_t grace;
} agent_fenced;
/* The running process pods of this node under fence, a new array (*ret_n
 * of them; none on one host). */
int agent_fenced_pods(agent *a, agent_fenced **ret, size_t *ret_n);
/* Pods by phase, for sd_notify STATUS=. */
void agent_pod_counts(agent *a, size_t *ret_running, size_t *ret_total);
int agent_delete_pod(agent *a, const char *ns, const char *name, int64_t grace_seconds);
int agent_pause(agent *a, const char *ns, const char *name, bool paused);
int agent_restart_rollout(agent *a, const char *ns, const char *name);
/* Rolls back to revision to_revision (0: the previous one). On failure
 * *ret_error says why in kubectl's words. *ret_revision: the revision
 * rolled back to. dry_run: every check, and nothing written. */
int agent_rollback(agent *a, const char *ns, const char *name, int64_t to_revision, bool dry_run,
                   int64_t *ret_revision, char **ret_error);

/* Annotations tend adds (spec.h: the registry says where, and who writes
 * them). */
#define AGENT_ANN_START_AFTER SPEC_ANN_START_AFTER
/* The manifest file a deployment comes from (tendd --manifests): the file
 * is its declaration, and a change made through the API is reverted at
 * the next sync of the directory. */
#define AGENT_ANN_SOURCE SPEC_ANN_SOURCE
#define AGENT_ANN_REPLACED SPEC_ANN_REPLACED
#define AGENT_ANN_PREDECESSOR SPEC_ANN_PREDECESSOR   /* the Failed pod a pod replaces */
#define AGENT_ANN_CRASH_STREAK SPEC_ANN_CRASH_STREAK /* see agent__pod_streak() */
/* On a dead pod: its replacement waits until then (the crash-loop back-off). */
#define AGENT_ANN_REPLACE_AFTER SPEC_ANN_REPLACE_AFTER
#define AGENT_ANN_PORTS SPEC_ANN_PORTS   /* "http=30001,metrics=9100": what the pod got */
#define AGENT_ANN_STATUS SPEC_ANN_STATUS /* its last STATUS= (tend.io/notify) */
/* On a ReplicaSet, kept by the deployment controller (never copied to or
 * from the deployment): its rollout completed once; why its rollout
 * failed (auto-rollback: rolled back once, not again); its canaries were
 * promoted; since when its canaries are all available. */
#define AGENT_ANN_COMPLETE SPEC_ANN_COMPLETE
#define AGENT_ANN_ROLLOUT_FAILED SPEC_ANN_ROLLOUT_FAILED
#define AGENT_ANN_PROMOTED SPEC_ANN_PROMOTED
#define AGENT_ANN_CANARY_SINCE SPEC_ANN_CANARY_SINCE
#define AGENT_ANN_DELETION_COST SPEC_ANN_DELETION_COST
