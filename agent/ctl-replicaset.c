/* SPDX-License-Identifier: MIT */

/*
 * The ReplicaSet controller (docs/deployments.md §7): compares the active pods it
 * owns with spec.replicas, creates or deletes the difference (deletion order
 * from plan_deletion_order), replaces dead pods (which then go, their log
 * kept as their replacement's previous log), applies the crash-loop
 * back-off to replacements, and writes status.
 *
 * Replacements carry their lineage: a pod that replaces a Failed one gets
 * its restartCount + 1 and its last termination as lastState, so `get pods`
 * shows RESTARTS and describe shows the last exit, as for a restarting
 * container in Kubernetes.
 */

#include <inttypes.h>
#include <stdio.h>
#include <sys/random.h>

#include "agent-internal.h"

#define BURST 500 /* creations or deletions per sync (burstReplicas) */

typedef struct owned {
        const spec_pod **active, **terminating, **failed;
        size_t n_active, n_terminating, n_failed;
} owned;

static void owned_done(owned *o) {
        free(o->active);
        free(o->terminating);
        free(o->failed);
}

static int collect(agent *a, const spec_replica_set *rs, owned *o) {
        const void *const *items;
        size_t n = store_list(a->store, STORE_POD, &items);

        o->active = new0(const spec_pod *, n);
        o->terminating = new0(const spec_pod *, n);
        o->failed = new0(const spec_pod *, n);
        if (!o->active || !o->terminating || !o->failed)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                if (!streq_ptr(p->metadata.namespace, rs->metadata.namespace) ||
                    !spec_meta_owned_by(&p->metadata, rs->metadata.uid))
                        continue;
                if (spec_pod_terminal(p))
                        o->failed[o->n_failed++] = p;
                else if (p->metadata.deletion_timestamp)
                        o->terminating[o->n_terminating++] = p;
                else
                        o->active[o->n_active++] = p;
        }
        return 0;
}

/* Most recent failure first. */
static void sort_failed(const spec_pod **f, size_t n) {
        for (size_t i = 1; i < n; i++)
                for (size_t k = i;
                     k > 0 && agent__pod_finished_at(f[k - 1]) < agent__pod_finished_at(f[k]);
                     k--) {
                        const spec_pod *t = f[k];
                        f[k] = f[k - 1];
                        f[k - 1] = t;
                }
}

/* <rs-name>-<5 chars>, chars from Kubernetes' alphabet. */
static char *pod_name(agent *a, const spec_replica_set *rs) {
        static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";

        for (int attempt = 0; attempt < 100; attempt++) {
                uint8_t r[5];
                char suffix[6];
                if (getrandom(r, sizeof r, 0) != sizeof r)
                        for (int i = 0; i < 5; i++)
                                r[i] = (uint8_t) rand();
                for (int i = 0; i < 5; i++)
                        suffix[i] = alphabet[r[i] % 27];
                suffix[5] = 0;
                char *name = strprintf("%s-%s", rs->metadata.name, suffix);
                if (!name || !store_get(a->store, STORE_POD, rs->metadata.namespace, name))
                        return name;
                free(name);
        }
        return NULL;
}

/* The replacement of a predecessor whose replica keeps dying young waits out
 * its back-off: it is created at once (so that it holds the replica's place
 * and its lineage, and the rollout arithmetic counts it), but starts at
 * tend.io/start-after, shown as CrashLoopBackOff with the last exit. */
static int set_backoff(agent *a, spec_pod *p, spec_container_status *cs, usec_t delay, usec_t until,
                       unsigned streak) {
        char when[TIMESTAMP_MAX], d[DURATION_MAX];
        _cleanup_free_ char *msg = NULL;
        const spec_state_terminated *last = cs->last_state.terminated;
        int r;

        r = spec_map_set(&p->metadata.annotations, AGENT_ANN_START_AFTER,
                         format_timestamp(when, until));
        if (r < 0)
                return r;
        format_duration(d, delay);
        if (last && last->signal)
                msg = strprintf("back-off %s restarting failed container=%s pod=%s: last exit: "
                                "killed by signal %d%s (young death %u in a row)",
                                d, cs->name, p->metadata.name, last->signal,
                                streq_ptr(last->reason, "OOMKilled") ? " (OOMKilled)" : "", streak);
        else if (last)
                msg = strprintf("back-off %s restarting failed container=%s pod=%s: last exit: "
                                "code %d (%s) (young death %u in a row)",
                                d, cs->name, p->metadata.name, last->exit_code, strna(last->reason),
                                streak);
        else
                msg = strprintf("back-off %s restarting failed container=%s pod=%s", d, cs->name,
                                p->metadata.name);
        if (!msg)
                return -ENOMEM;
        a->metrics.backoffs++;
        return agent__set_waiting(cs, "CrashLoopBackOff", msg);
}

/* Whether pod p belongs to the group rs places its pods in: its
 * deployment's pods (every ReplicaSet of it), else rs's own. */
static bool same_group(agent *a, const spec_replica_set *rs, const spec_pod *p) {
        const spec_owner_ref *o = spec_meta_controller(&p->metadata), *d, *pd;
        const spec_replica_set *prs;

        if (!o || !streq_ptr(p->metadata.namespace, rs->metadata.namespace))
                return false;
        if (streq_ptr(o->uid, rs->metadata.uid))
                return true;
        d = spec_meta_controller(&rs->metadata);
        prs = d ? agent__replica_set_by_uid(a, rs->metadata.namespace, o->uid) : NULL;
        pd = prs ? spec_meta_controller(&prs->metadata) : NULL;
        return pd && streq_ptr(pd->uid, d->uid);
}

#define POD_PORTS_MAX 32

/* The fixed ports pod p takes on its node (its containerPorts; pods run on
 * the host network), each with whether its tend.io/listen holds it (one
 * socket of tendd's per deployment, which its pods on a node share). Up to
 * POD_PORTS_MAX; how many. */
static size_t fixed_ports(const spec_pod *p, uint16_t ret[static POD_PORTS_MAX],
                          bool held[static POD_PORTS_MAX]) {
        const char *listen = spec_map_get(&p->metadata.annotations, SPEC_ANN_LISTEN);
        spec_listen l[SPEC_LISTEN_MAX];
        _cleanup_free_ char *problem = NULL;
        size_t n_l = 0, n = 0;

        if (listen && spec_listen_parse(listen, l, &n_l, &problem) < 0)
                n_l = 0;
        for (size_t c = 0; c < p->spec.n_containers; c++)
                for (size_t i = 0; i < p->spec.containers[c].n_ports && n < POD_PORTS_MAX; i++) {
                        const spec_container_port *cp = &p->spec.containers[c].ports[i];
                        if (cp->container_port <= 0 || cp->container_port > UINT16_MAX)
                                continue;
                        held[n] = false;
                        for (size_t k = 0; k < n_l && !held[n]; k++)
                                held[n] = streq_ptr(cp->name, l[k].port);
                        ret[n++] = (uint16_t) cp->container_port;
                }
        return n;
}

static bool memchr_u16(const uint16_t *a, size_t n, uint16_t v) {
        for (size_t i = 0; i < n; i++)
                if (a[i] == v)
                        return true;
        return false;
}

/*
 * Where one sync's new pods go (fleet mode): the nodes with their pods
 * counted once, at the sync's first placement, then kept up to date as it
 * places more, rather than every pod walked again for each (issue 29: the
 * leader placed about 140 pods a second, each placement a walk of the
 * fleet's pods). A ReplicaSet's new pods share their template: the fixed
 * ports they want are the first's.
 */
typedef struct placer {
        bool ready;
        plan_node *nodes;
        size_t n;
        uint16_t *taken; /* per node, which of want its pods take */
        uint16_t want[POD_PORTS_MAX];
        bool want_held[POD_PORTS_MAX];
        size_t n_want;
} placer;

static void placer_done(placer *pl) {
        free(pl->nodes);
        free(pl->taken);
        *pl = (placer){};
}

static int placer_init(agent *a, const spec_replica_set *rs, const spec_pod *p, placer *pl) {
        const plan_node *given = NULL;
        size_t n = a->fleet.nodes(a->fleet.userdata, &given), n_pods;
        const void *const *pods;
        uint16_t qp[POD_PORTS_MAX];
        bool q_held[POD_PORTS_MAX];

        *pl = (placer){ .n = n };
        pl->n_want = fixed_ports(p, pl->want, pl->want_held);
        pl->nodes = new0(plan_node, n + 1);
        pl->taken = new0(uint16_t, n * pl->n_want + 1);
        if (!pl->nodes || !pl->taken) {
                placer_done(pl);
                return -ENOMEM;
        }
        if (n)
                memcpy(pl->nodes, given, sizeof *pl->nodes * n);
        for (size_t k = 0; k < n; k++) {
                pl->nodes[k].ports = &pl->taken[k * pl->n_want];
                pl->nodes[k].n_ports = 0;
        }
        n_pods = store_list(a->store, STORE_POD, &pods);
        for (size_t i = 0; i < n_pods; i++) {
                const spec_pod *q = pods[i];
                if (!q->spec.node_name || spec_pod_terminal(q))
                        continue;
                for (size_t k = 0; k < n; k++) {
                        plan_node *nd = &pl->nodes[k];
                        if (!streq(nd->name, q->spec.node_name))
                                continue;
                        bool group = same_group(a, rs, q);
                        /* a terminating pod is going: not counted in the
                         * spread, else the leader's node looks emptier
                         * (its own go from its store at their exit,
                         * others' an etcd round trip later: issue 29) */
                        if (!q->metadata.deletion_timestamp) {
                                nd->pods++;
                                nd->group_pods += group;
                        }
                        /* a terminating pod holds its ports until it exits; a
                         * socket tendd holds for the deployment is shared by
                         * its pods that hold it too */
                        for (size_t j = 0, m = pl->n_want ? fixed_ports(q, qp, q_held) : 0; j < m;
                             j++)
                                for (size_t w = 0; w < pl->n_want; w++)
                                        if (qp[j] == pl->want[w] &&
                                            !(group && q_held[j] && pl->want_held[w]) &&
                                            nd->n_ports < pl->n_want &&
                                            !memchr_u16(nd->ports, nd->n_ports, pl->want[w]))
                                                pl->taken[k * pl->n_want + nd->n_ports++] =
                                                        pl->want[w];
                        break;
                }
        }
        pl->ready = true;
        return 0;
}

/* Fleet mode (docs/fleet.md §3.6): binds pod p, of rs, to a node (plan_schedule():
 * spread over the deployment's pods, then the least loaded, on a node where
 * its fixed ports are free), written in the same put as the rest of p. No
 * node fits: p stays unbound, Pending with
 * PodScheduled=False (Unschedulable), and is placed when nodes change. pl:
 * the sync's (placer_init() at its first pod). */
static int place(agent *a, const spec_replica_set *rs, spec_pod *p, placer *pl) {
        int at = -1, r;
        char uid[37];

        /* its events need its uid, which its put would give it */
        if (!p->metadata.uid && !(p->metadata.uid = strdup(store_new_uid(uid))))
                return -ENOMEM;
        if (!pl->ready && (r = placer_init(a, rs, p, pl)) < 0)
                return r;
        plan_node *nodes = pl->nodes;
        size_t n = pl->n, n_want = pl->n_want;
        const uint16_t *want = pl->want;
        (void) plan_schedule(nodes, n,
                             &(plan_new_pod){ .name = p->metadata.name,
                                              .node_selector = p->spec.node_selector.n
                                                                       ? &p->spec.node_selector
                                                                       : NULL,
                                              .ports = want,
                                              .n_ports = n_want },
                             1, &at);
        if (at < 0) {
                _cleanup_free_ char *why = strprintf(
                        "none is ready, uncordoned, below its capacity%s%s",
                        p->spec.node_selector.n ? ", matching its nodeSelector" : "",
                        n_want ? " and with its fixed ports (containerPort) free" : "");
                if (!why)
                        return -ENOMEM;
                (void) agent__event(a, STORE_POD, &p->metadata, "Warning", "FailedScheduling",
                                    "0/%zu nodes are available: %s", n, why);
                return plan_set_condition(&p->status.conditions, &p->status.n_conditions,
                                          "PodScheduled", "False", "Unschedulable", why,
                                          agent_wall(a));
        }
        /* (plan_schedule() counted it there) its fixed ports are taken
         * there now, but for a socket tendd holds, which its group shares */
        for (size_t w = 0; w < n_want; w++)
                if (!pl->want_held[w] && nodes[at].n_ports < n_want &&
                    !memchr_u16(nodes[at].ports, nodes[at].n_ports, want[w]))
                        pl->taken[(size_t) at * n_want + nodes[at].n_ports++] = want[w];
        r = free_and_strdup(&p->spec.node_name, nodes[at].name);
        if (r < 0)
                return r;
        (void) agent__event(a, STORE_POD, &p->metadata, "Normal", "Scheduled",
                            "Successfully assigned %s/%s to %s", p->metadata.namespace,
                            p->metadata.name, nodes[at].name);
        return plan_set_condition(&p->status.conditions, &p->status.n_conditions, "PodScheduled",
                                  "True", NULL, NULL, agent_wall(a));
}

/* An unbound pod (no node fitted when it was made) placed now. */
static int place_again(agent *a, const spec_replica_set *rs, const spec_pod *p, placer *pl) {
        _cleanup_(spec_pod_freep) spec_pod *n = NULL;
        int r;

        if (p->spec.node_name || p->metadata.deletion_timestamp)
                return 0;
        n = spec_pod_copy(p);
        if (!n)
                return -ENOMEM;
        r = place(a, rs, n, pl);
        if (r < 0 || !n->spec.node_name)
                return r;
        return store_put(a->store, STORE_POD, TAKE_PTR(n), NULL);
}

static int create_pod(agent *a, const spec_replica_set *rs, const spec_pod *predecessor,
                      const spec_backoff *policy, placer *pl) {
        _cleanup_(spec_pod_template_freep)
                spec_pod_template *t = spec_pod_template_copy(&rs->spec.template);
        _cleanup_(spec_pod_freep) spec_pod *p = spec_pod_new();
        spec_container_status *cs;
        usec_t now = agent_wall(a), delay = 0, until = 0;
        unsigned streak = 0;
        _cleanup_free_ char *name = pod_name(a, rs);
        const spec_pod *stored;
        spec_owner_ref *ref;
        int r;

        if (!t || !p || !name)
                return -ENOMEM;
        p->metadata.name = TAKE_PTR(name);
        p->metadata.namespace = strdup(rs->metadata.namespace);
        p->metadata.creation_timestamp = now;
        p->metadata.labels = t->metadata.labels;
        p->metadata.annotations = t->metadata.annotations;
        t->metadata.labels = (spec_map){};
        t->metadata.annotations = (spec_map){};
        p->spec = t->spec;
        memset(&t->spec, 0, sizeof t->spec); /* moved: nothing left to free */

        ref = calloc(1, sizeof *ref);
        if (!ref || !p->metadata.namespace) {
                free(ref);
                return -ENOMEM;
        }
        r = 0;
        RET_GATHER_PTR(r, ref->api_version = strdup("apps/v1"));
        RET_GATHER_PTR(r, ref->kind = strdup("ReplicaSet"));
        RET_GATHER_PTR(r, ref->name = strdup(rs->metadata.name));
        RET_GATHER_PTR(r, ref->uid = strdup(rs->metadata.uid));
        ref->controller = ref->block_owner_deletion = true;
        p->metadata.owner_references = ref;
        p->metadata.n_owner_references = 1;

        p->status.phase = SPEC_POD_PENDING;
        cs = agent__container_status(p);
        if (!cs)
                return -ENOMEM;
        if (predecessor && predecessor->status.n_container_statuses) {
                const spec_container_status *pcs = &predecessor->status.container_statuses[0];
                spec_container_state *copy = spec_copy(&spec_type_container_state, &pcs->state);
                RET_GATHER_PTR(r, copy);
                if (copy) {
                        /* lastState = the predecessor's last state */
                        cs->last_state = *copy;
                        free(copy);
                }
                cs->restart_count = pcs->restart_count + 1;
                /* `logs --previous` finds the previous instance through it. */
                RET_GATHER(r, spec_map_set(&p->metadata.annotations, AGENT_ANN_PREDECESSOR,
                                           predecessor->metadata.name));
        }
        if (predecessor) {
                /* The replica's crash-loop state goes on with it; the pod
                 * worker decided at the death how long this one waits. */
                const char *after = spec_map_get(&predecessor->metadata.annotations,
                                                 AGENT_ANN_REPLACE_AFTER);
                streak = agent__pod_streak(predecessor);
                RET_GATHER(r, agent__set_pod_streak(p, streak));
                if (after && parse_timestamp(after, &until) >= 0) {
                        /* shortened if the policy was since */
                        until = MIN(until, agent__pod_finished_at(predecessor) +
                                                   plan_backoff_delay(policy, streak));
                        delay = until - MIN(until, agent__pod_finished_at(predecessor));
                } else
                        until = 0;
        }
        if (until > now)
                RET_GATHER(r, set_backoff(a, p, cs, delay, until, streak));
        else
                RET_GATHER(r, agent__set_waiting(cs, "ContainerCreating", NULL));
        if (r >= 0 && agent__fleet(a))
                r = place(a, rs, p, pl);
        if (r < 0)
                return r; /* half-built: not written; the sync is retried */

        (void) agent__event(a, STORE_REPLICA_SET, &rs->metadata, "Normal", "SuccessfulCreate",
                            "Created pod: %s", p->metadata.name);
        r = store_put(a->store, STORE_POD, TAKE_PTR(p), (const void **) &stored);
        if (r < 0)
                return r;
        if (until > now) {
                char d[DURATION_MAX];
                (void) agent__event(a, STORE_POD, &stored->metadata, "Warning", "BackOff",
                                    "Back-off restarting failed container %s: next start in %s "
                                    "(young death %u in a row)",
                                    agent__container_name(stored), format_duration(d, delay),
                                    streak);
        }
        if (!predecessor)
                return 0;
        /* The replacement carries the dead pod on (restartCount, lastState,
         * its log as `logs --previous`), as a container restarted in place
         * in Kubernetes: the dead pod goes, so that a selector finds only
         * live ones (kubectl wait --for=condition=Ready -l). */
        return agent__remove_replaced_pod(a, predecessor);
}

static int delete_pod(agent *a, const spec_replica_set *rs, const spec_pod *p) {
        spec_pod *n = spec_pod_copy(p);

        if (!n)
                return -ENOMEM;
        n->metadata.deletion_timestamp = agent_wall(a);
        n->metadata.deletion_grace_period_seconds = n->spec.termination_grace_period_seconds;
        (void) agent__event(a, STORE_REPLICA_SET, &rs->metadata, "Normal", "SuccessfulDelete",
                            "Deleted pod: %s", p->metadata.name);
        return store_put(a->store, STORE_POD, n, NULL);
}

/* per_node (fleet mode; else NULL): how many of the ReplicaSet's active
 * pods each node runs. */
static plan_pod to_plan_pod(agent *a, const spec_pod *p, const tend_hashmap *per_node) {
        const char *node = p->spec.node_name;
        const char *cost = spec_map_get(&p->metadata.annotations, AGENT_ANN_DELETION_COST);
        int64_t c = 0;
        usec_t since = 0;
        bool ready = spec_pod_ready(p, &since);

        if (cost && (safe_atoi64(cost, &c) < 0 || c < INT32_MIN || c > INT32_MAX))
                c = 0;
        return (plan_pod){
                .uid = p->metadata.uid,
                .started = agent__pod_started(a, p),
                .phase = p->status.phase,
                .ready = ready,
                .ready_since = since,
                .deletion_cost = (int32_t) c,
                .restarts = p->status.n_container_statuses
                                    ? p->status.container_statuses[0].restart_count
                                    : 0,
                .created = p->metadata.creation_timestamp,
                .node_lost = node && a->fleet.node_lost &&
                             a->fleet.node_lost(a->fleet.userdata, node),
                .node_siblings = node && per_node
                                         ? (int32_t) (uintptr_t) tend_hashmap_get(per_node, node)
                                         : 0,
        };
}

/* A replacement waiting out its back-off starts sooner when the policy now
 * says so (the deployment's tend.io/crash-backoff was shortened or switched
 * off): its start-after is brought forward. A longer policy applies from
 * the next death on. */
static int refresh_backoff(agent *a, const spec_pod *p, const spec_backoff *policy) {
        const char *after = spec_map_get(&p->metadata.annotations, AGENT_ANN_START_AFTER);
        const spec_container_status *cs = p->status.n_container_statuses
                                                  ? &p->status.container_statuses[0]
                                                  : NULL;
        char when[TIMESTAMP_MAX];
        usec_t t, due;
        spec_pod *n;

        if (!after || agent__pod_started(a, p) || parse_timestamp(after, &t) < 0 ||
            t <= agent_wall(a) || !cs || !cs->last_state.terminated)
                return 0;
        due = cs->last_state.terminated->finished_at +
              plan_backoff_delay(policy, agent__pod_streak(p));
        if (due >= t)
                return 0;
        n = spec_pod_copy(p);
        if (!n)
                return -ENOMEM;
        if (spec_map_set(&n->metadata.annotations, AGENT_ANN_START_AFTER,
                         format_timestamp(when, MAX(due, agent_wall(a)))) < 0) {
                spec_pod_free(n);
                return -ENOMEM;
        }
        log_info("pod/%s: the back-off policy changed: starts at %s", p->metadata.name, when);
        return store_put(a->store, STORE_POD, n, NULL);
}

/*
 * The live bound (docs/architecture.md §4.3): starting a pod never brings a deployment's
 * live pods (every pod not terminal: running, starting, waiting out a
 * back-off, terminating) above replicas + maxSurge (Recreate: replicas).
 * Pods that a scale-down or a delete left terminating may stay above it
 * for their grace period; their number only falls. So a pod that was asked
 * for (a scale-up, the replacement of a deleted pod) waits for room. The
 * replacement of a pod that died does not wait (availability first): if
 * terminating pods hold the room, as many of them as it needs are stopped
 * at once (SIGKILL), the soonest due first, and it starts when they are
 * gone, a moment later.
 */
typedef struct room {
        int64_t free;                 /* bound - live; INT64_MAX: no bound */
        int64_t hurried;              /* terminating with no grace left: room coming */
        const spec_pod **terminating; /* the others, soonest due first */
        size_t n_terminating;
} room;

static usec_t due_at(const spec_pod *p) {
        int64_t g = p->metadata.deletion_grace_period_seconds;
        return p->metadata.deletion_timestamp + (g > 0 ? usec_from_sec(g) : 0);
}

static int deployment_room(agent *a, const spec_replica_set *rs, room *ret) {
        const spec_owner_ref *o = spec_meta_controller(&rs->metadata);
        const spec_deployment *d = o && streq_ptr(o->kind, "Deployment")
                                           ? agent__deployment_by_uid(a, rs->metadata.namespace,
                                                                      o->uid)
                                           : NULL;
        const void *const *rss, *const *pods;
        size_t n_rs, n_pods, k = 0;
        _cleanup_free_ const char **uids = NULL;
        int32_t surge, unavailable;
        int64_t live = 0;

        *ret = (room){ .free = INT64_MAX };
        if (!d)
                return 0;
        n_rs = store_list(a->store, STORE_REPLICA_SET, &rss);
        uids = new0(const char *, n_rs + 1);
        if (!uids)
                return -ENOMEM;
        for (size_t i = 0; i < n_rs; i++) {
                const spec_replica_set *r = rss[i];
                if (streq_ptr(r->metadata.namespace, d->metadata.namespace) &&
                    spec_meta_owned_by(&r->metadata, d->metadata.uid))
                        uids[k++] = r->metadata.uid;
        }
        n_pods = store_list(a->store, STORE_POD, &pods);
        ret->terminating = new0(const spec_pod *, n_pods + 1);
        if (!ret->terminating)
                return -ENOMEM;
        for (size_t i = 0; i < n_pods; i++) {
                const spec_pod *p = pods[i];
                const spec_owner_ref *po = spec_meta_controller(&p->metadata);
                bool ours = false;
                if (!po || !streq_ptr(p->metadata.namespace, d->metadata.namespace) ||
                    spec_pod_terminal(p))
                        continue;
                if (agent__pod_evicted_unknown(a, p))
                        continue;
                for (size_t j = 0; j < k && !ours; j++)
                        ours = streq_ptr(po->uid, uids[j]);
                if (!ours)
                        continue;
                live++;
                if (!p->metadata.deletion_timestamp)
                        continue;
                if (p->metadata.deletion_grace_period_seconds == 0)
                        ret->hurried++;
                else
                        ret->terminating[ret->n_terminating++] = p;
        }
        for (size_t i = 1; i < ret->n_terminating; i++)
                for (size_t j = i;
                     j > 0 && due_at(ret->terminating[j]) < due_at(ret->terminating[j - 1]); j--) {
                        const spec_pod *t = ret->terminating[j];
                        ret->terminating[j] = ret->terminating[j - 1];
                        ret->terminating[j - 1] = t;
                }
        spec_deployment_fenceposts(d, d->spec.replicas, &surge, &unavailable);
        ret->free = (int64_t) d->spec.replicas + surge - live;
        return 0;
}

/* A terminating pod stopped now, to make room for a replacement. */
static int hurry(agent *a, const spec_replica_set *rs, const spec_pod *p) {
        spec_pod *n = spec_pod_copy(p);

        if (!n)
                return -ENOMEM;
        n->metadata.deletion_grace_period_seconds = 0;
        log_info("pod/%s: stopped at once: its deployment is at replicas + maxSurge and a "
                 "replacement of a dead pod of replicaset/%s needs its room",
                 p->metadata.name, rs->metadata.name);
        (void) agent__event(a, STORE_POD, &n->metadata, "Normal", "Preempting",
                            "Stopping container %s at once: a replacement of a dead pod needs "
                            "its room within replicas + maxSurge",
                            agent__container_name(p));
        return store_put(a->store, STORE_POD, n, NULL);
}

static int manage(agent *a, const spec_replica_set *rs, owned *o) {
        int64_t diff = (int64_t) o->n_active - rs->spec.replicas;
        spec_backoff policy = agent__backoff_policy(a, rs);
        _cleanup_free_ bool *used = new0(bool, o->n_failed + 1);
        _cleanup_(placer_done) placer pl = {};
        size_t created = 0;
        int r;

        if (!used)
                return -ENOMEM;
        sort_failed(o->failed, o->n_failed);
        if (diff < 0 && !a->draining) { /* draining: tendd stops its pods to exit */
                size_t want = (size_t) MIN(-diff, BURST), k = 0, deaths = 0, allowed;
                _cleanup_free_ const spec_pod **preds = new0(const spec_pod *, want);
                _cleanup_free_ size_t *pred_index = new0(size_t, want);
                room rm;

                if (!preds || !pred_index)
                        return -ENOMEM;
                /* Each replacement of a dead pod carries on its replica's
                 * lineage: its restartCount, lastState and crash-loop streak. */
                while (deaths < want && k < o->n_failed) {
                        const spec_pod *f = o->failed[k++];
                        if (!spec_map_get(&f->metadata.annotations, AGENT_ANN_REPLACED)) {
                                pred_index[deaths] = k - 1;
                                preds[deaths++] = f;
                        }
                }
                r = deployment_room(a, rs, &rm);
                if (r < 0) {
                        free(rm.terminating);
                        return r;
                }
                allowed = (size_t) MIN((int64_t) want, MAX(rm.free, 0));
                if (allowed < deaths) {
                        /* replacements of dead pods make room: the soonest
                         * due terminating pods go now */
                        int64_t need = (int64_t) (deaths - allowed) - rm.hurried;
                        for (size_t i = 0; (int64_t) i < need && i < rm.n_terminating; i++) {
                                r = hurry(a, rs, rm.terminating[i]);
                                if (r < 0) {
                                        free(rm.terminating);
                                        return r;
                                }
                        }
                }
                free(rm.terminating);
                for (; created < allowed; created++) {
                        if (created < deaths)
                                used[pred_index[created]] = true;
                        r = create_pod(a, rs, created < deaths ? preds[created] : NULL, &policy,
                                       &pl);
                        if (r < 0)
                                return r;
                }
        } else if (diff > 0) {
                size_t n = o->n_active, want = (size_t) MIN(diff, BURST);
                _cleanup_free_ plan_pod *pp = new0(plan_pod, n);
                _cleanup_free_ size_t *order = new0(size_t, n);
                _cleanup_(tend_hashmap_freep)
                        tend_hashmap *per_node = agent__fleet(a) ? tend_hashmap_new() : NULL;

                if (!pp || !order || (agent__fleet(a) && !per_node))
                        return -ENOMEM;
                for (size_t i = 0; per_node && i < n; i++) {
                        const char *node = o->active[i]->spec.node_name;
                        uintptr_t k = node ? (uintptr_t) tend_hashmap_get(per_node, node) : 0;
                        if (node && tend_hashmap_put(per_node, node, (void *) (k + 1), NULL) < 0)
                                return -ENOMEM;
                }
                for (size_t i = 0; i < n; i++)
                        pp[i] = to_plan_pod(a, o->active[i], per_node);
                plan_deletion_order(pp, n, order);
                for (size_t i = 0; i < want; i++) {
                        r = delete_pod(a, rs, o->active[order[i]]);
                        if (r < 0)
                                return r;
                }
        }
        for (size_t i = 0; i < o->n_active; i++) {
                r = refresh_backoff(a, o->active[i], &policy);
                if (r >= 0 && agent__fleet(a))
                        r = place_again(a, rs, o->active[i], &pl);
                if (r < 0)
                        return r;
        }

        /* A dead pod stays only while it waits for its replacement (more
         * than a burst died at once, or no room yet, or tendd is draining):
         * it lends its lineage to a later sync's replacement. Replaced ones
         * went as their replacements were made (used: freed); one marked
         * replaced by an older tendd goes now; one that will not be replaced
         * (the ReplicaSet wants no more pods) goes with its log. */
        bool short_still = (diff < 0 && (int64_t) created < -diff) || a->draining;
        for (size_t i = 0; i < o->n_failed; i++) {
                const spec_pod *f = o->failed[i];
                bool replaced;
                if (used[i])
                        continue;
                replaced = spec_map_get(&f->metadata.annotations, AGENT_ANN_REPLACED);
                if (!replaced && short_still)
                        continue;
                r = replaced ? agent__remove_replaced_pod(a, f) : agent__remove_pod(a, f);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Status from the pods seen at the start of the sync (as Kubernetes). */
static int write_status(agent *a, const spec_replica_set *rs, const owned *o) {
        spec_replica_set_status st = {};
        usec_t now = agent_wall(a), next = USEC_INFINITY;
        spec_replica_set *n;

        st.replicas = (int32_t) o->n_active;
        st.terminating_replicas = (int32_t) o->n_terminating;
        st.observed_generation = rs->metadata.generation;
        for (size_t i = 0; i < o->n_active; i++) {
                const spec_pod *p = o->active[i];
                usec_t since, when;
                bool ready = spec_pod_ready(p, &since);
                bool labeled = true;

                for (size_t k = 0; k < rs->spec.template.metadata.labels.n; k++)
                        if (!streq_ptr(spec_map_get(&p->metadata.labels,
                                                    rs->spec.template.metadata.labels.items[k].key),
                                       rs->spec.template.metadata.labels.items[k].value))
                                labeled = false;
                st.fully_labeled_replicas += labeled;
                st.ready_replicas += ready;
                if (plan_pod_available(ready, since, rs->spec.min_ready_seconds, now, &when))
                        st.available_replicas++;
                else
                        next = MIN(next, when);
        }
        /* minReadySeconds needs a timer, not just events. */
        if (next != USEC_INFINITY)
                agent__enqueue_at_wall(a, STORE_REPLICA_SET, rs->metadata.namespace,
                                       rs->metadata.name, next);

        if (st.replicas == rs->status.replicas &&
            st.fully_labeled_replicas == rs->status.fully_labeled_replicas &&
            st.ready_replicas == rs->status.ready_replicas &&
            st.available_replicas == rs->status.available_replicas &&
            st.terminating_replicas == rs->status.terminating_replicas &&
            st.observed_generation == rs->status.observed_generation)
                return 0;
        n = spec_replica_set_copy(rs);
        if (!n)
                return -ENOMEM;
        n->status.replicas = st.replicas;
        n->status.fully_labeled_replicas = st.fully_labeled_replicas;
        n->status.ready_replicas = st.ready_replicas;
        n->status.available_replicas = st.available_replicas;
        n->status.terminating_replicas = st.terminating_replicas;
        n->status.observed_generation = st.observed_generation;
        return store_put(a->store, STORE_REPLICA_SET, n, NULL);
}

int ctl_replica_set_sync(agent *a, const char *ns, const char *name) {
        const spec_replica_set *rs = store_get(a->store, STORE_REPLICA_SET, ns, name);
        const spec_owner_ref *o;
        owned pods = {};
        int r;

        if (!rs || !agent__leads(a))
                return 0; /* in a fleet, the leader's (agent_fleet) */
        /* Garbage collection: its deployment is gone, so is it (its pods
         * follow, see ctl_pod_sync()). */
        o = spec_meta_controller(&rs->metadata);
        if (o && streq_ptr(o->kind, "Deployment") && !agent__deployment_by_uid(a, ns, o->uid)) {
                log_debug("replicaset/%s: owner deployment/%s is gone", name, strna(o->name));
                r = store_delete(a->store, STORE_REPLICA_SET, ns, name);
                /* its configuration's snapshots too (tend.io/config-rollout) */
                return r < 0 ? r : agent__config_prune(a, ns, o->uid, NULL);
        }

        r = collect(a, rs, &pods);
        if (r >= 0)
                r = manage(a, rs, &pods);
        if (r >= 0)
                r = write_status(a, rs, &pods);
        owned_done(&pods);
        return r;
}
