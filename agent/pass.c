/* SPDX-License-Identifier: MIT */

/*
 * The pass: the agent's life (new, start-up with adoption, free), the store's
 * notifications turned into queued keys, and agent_process(). It is the top
 * of the core: it calls the controllers (ctl-*.c), which call down into the
 * work queue and events (queue.c) and the pods' runtime state (pods.c).
 *
 * A pass runs the three controllers over whatever is queued — deployments,
 * then ReplicaSets, then pods — commits the store, and repeats while the
 * commit's notifications queued more. Level-triggered: each sync recomputes
 * from the store, so a lost notification costs latency, never correctness
 * (the periodic resync queues everything).
 */

#include <stdio.h>
#include <unistd.h>

#include "agent-internal.h"

/* ---- store notifications ---------------------------------------------------------------- */

/* Queues the objects a given owner controls (garbage collection when the
 * owner goes). */
static void enqueue_owned(agent *a, store_kind kind, const char *ns, const char *owner_uid) {
        const void *const *items;
        size_t n = store_list(a->store, kind, &items);

        for (size_t i = 0; i < n; i++) {
                const spec_meta *m = &((const spec_deployment *) items[i])->metadata;
                if (streq_ptr(m->namespace, ns) && spec_meta_owned_by(m, owner_uid))
                        agent__enqueue(a, kind, m->namespace, m->name);
        }
}

/* The pods of ns that wait for a ConfigMap or a Secret (env.c,
 * volumes.c), and those whose files come from the one that changed. */
static void enqueue_config_users(agent *a, store_kind kind, const char *ns, const char *name) {
        const void *const *items;
        size_t n = store_list(a->store, STORE_POD, &items);

        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                const spec_container_status *cs = p->status.n_container_statuses
                                                          ? &p->status.container_statuses[0]
                                                          : NULL;
                const spec_state_waiting *w = cs ? cs->state.waiting : NULL;
                if (!streq_ptr(p->metadata.namespace, ns))
                        continue;
                /* (ContainerCreating with a message: waiting for a volume) */
                if ((w && (streq_ptr(w->reason, AGENT_CONFIG_ERROR) ||
                           (streq_ptr(w->reason, AGENT_VOLUME_WAIT) && w->message))) ||
                    (p->spec.n_volumes && agent__pod_refers_to(p, kind, name)))
                        agent__enqueue(a, STORE_POD, ns, p->metadata.name);
        }
}

/* The deployments of ns with tend.io/config-rollout whose template refers
 * to the ConfigMap or the Secret name (config.c). */
static void enqueue_config_rollouts(agent *a, store_kind kind, const char *ns, const char *name) {
        const void *const *items;
        size_t n = store_list(a->store, STORE_DEPLOYMENT, &items);

        for (size_t i = 0; i < n; i++) {
                const spec_deployment *d = items[i];
                const spec_tend *t;
                if (!streq_ptr(d->metadata.namespace, ns))
                        continue;
                t = store_tend(a->store, STORE_DEPLOYMENT, ns, d->metadata.name);
                if (t && t->config_rollout &&
                    agent__template_refers_to(&d->spec.template, kind, name))
                        agent__enqueue(a, STORE_DEPLOYMENT, ns, d->metadata.name);
        }
}

static bool pod_uid_known(const char *uid, void *userdata) {
        return tend_hashmap_get(userdata, uid);
}

/* At start-up: the volumes of pods that are no more (removed while tendd
 * was down, or before their removal's volumes went). */
static void sweep_volumes(agent *a) {
        _cleanup_(tend_hashmap_freep) tend_hashmap *uids = tend_hashmap_new();
        const void *const *items;
        size_t n = store_list(a->store, STORE_POD, &items);

        if (!uids)
                return;
        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                if (p->metadata.uid &&
                    tend_hashmap_put(uids, p->metadata.uid, (void *) 1, NULL) < 0)
                        return; /* (not knowing them all, none goes) */
        }
        a->backend->sweep_volumes(a->backend_data, pod_uid_known, uids);
}

static void on_store_change(store_kind kind, store_change change, const void *obj, void *u) {
        agent *a = u;
        const spec_meta *m = &((const spec_deployment *) obj)->metadata;
        const spec_owner_ref *o = spec_meta_controller(m);

        switch (kind) {
        case STORE_DEPLOYMENT:
                agent__enqueue(a, kind, m->namespace, m->name);
                if (change == STORE_DELETED)
                        enqueue_owned(a, STORE_REPLICA_SET, m->namespace, m->uid);
                break;
        case STORE_REPLICA_SET:
                agent__enqueue(a, kind, m->namespace, m->name);
                if (o) {
                        const spec_deployment *d = agent__deployment_by_uid(a, m->namespace,
                                                                            o->uid);
                        if (d)
                                agent__enqueue(a, STORE_DEPLOYMENT, m->namespace, d->metadata.name);
                }
                if (change == STORE_DELETED)
                        enqueue_owned(a, STORE_POD, m->namespace, m->uid);
                break;
        case STORE_POD:
                agent__enqueue(a, kind, m->namespace, m->name);
                if (o) {
                        const spec_replica_set *rs = agent__replica_set_by_uid(a, m->namespace,
                                                                               o->uid);
                        const spec_owner_ref *ro = rs ? spec_meta_controller(&rs->metadata) : NULL;
                        if (rs)
                                agent__enqueue(a, STORE_REPLICA_SET, m->namespace,
                                               rs->metadata.name);
                        /* A pod gone or dead leaves room under its deployment's
                         * live bound: every ReplicaSet of it may be waiting for
                         * that room (ctl-replicaset.c). */
                        if (ro && streq_ptr(ro->kind, "Deployment") &&
                            (change == STORE_DELETED || spec_pod_terminal(obj)))
                                enqueue_owned(a, STORE_REPLICA_SET, m->namespace, ro->uid);
                }
                break;
        case STORE_CONFIG_MAP:
        case STORE_SECRET:
                /* a pod waiting for it (its environment refers to it), or
                 * whose files come from it; a deployment that rolls it out */
                enqueue_config_users(a, kind, m->namespace, m->name);
                enqueue_config_rollouts(a, kind, m->namespace, m->name);
                break;
        default:
                break;
        }
}

void agent_resync(agent *a) {
        for (int k = 0; k < STORE_EVENT; k++) {
                const void *const *items;
                size_t n = store_list(a->store, (store_kind) k, &items);
                for (size_t i = 0; i < n; i++) {
                        const spec_meta *m = &((const spec_deployment *) items[i])->metadata;
                        agent__enqueue(a, (store_kind) k, m->namespace, m->name);
                }
        }
}

/* ---- processing ---------------------------------------------------------------------------- */

void agent_kick(agent *a) {
        if (a->wakeup)
                a->wakeup(a->wakeup_userdata);
}

bool agent_has_work(const agent *a) {
        for (int k = 0; k < _STORE_KIND_MAX; k++)
                if (!workq_empty(&a->queues[k]))
                        return true;
        return false;
}

typedef int (*sync_fn)(agent *a, const char *ns, const char *name);

static void drain(agent *a, store_kind kind, sync_fn fn) {
        /* Only what is queued now: keys queued during this drain wait for
         * the next round, after the commit, in kind order again. */
        size_t n = a->queues[kind].n;

        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *key = workq_pop(&a->queues[kind]), *ns = NULL;
                const char *name;
                int r;

                if (!key)
                        break;
                if (agent__split_key(key, &ns, &name) < 0) {
                        agent__lost_key(a);
                        continue;
                }
                r = fn(a, ns, name);
                if (r < 0) {
                        log_warning_errno(r, "Failed to sync %s/%s: %m", store_kind_to_string(kind),
                                          key);
                        /* retry after a pause rather than spinning */
                        agent__enqueue_at(a, kind, ns, name, agent_now(a) + USEC_PER_SEC);
                }
        }
}

const char *const agent_respawn_phase_names[_AGENT_RESPAWN_PHASE_MAX] = {
        [AGENT_RESPAWN_QUEUE] = "queue",
        [AGENT_RESPAWN_PASS] = "pass",
        [AGENT_RESPAWN_SPAWN] = "spawn",
};

const agent_metrics *agent_get_metrics(const agent *a) {
        return &a->metrics;
}

const char *agent_node_name(const agent *a) {
        return a->node_name;
}

int agent_pod_usage(agent *a, const char *uid, pid_t pid, uint64_t *ret_cpu_ns,
                    uint64_t *ret_memory) {
        if (!a->backend->usage)
                return -ENOENT;
        return a->backend->usage(a->backend_data, uid, pid, ret_cpu_ns, ret_memory);
}

store *agent_get_store(const agent *a) {
        return a->store;
}

void agent_fleet_changed(agent *a) {
        agent_resync(a);
        agent_kick(a);
}

void agent_touch(agent *a, store_kind kind, const char *ns, const char *name) {
        agent__enqueue(a, kind, ns, name);
        agent_kick(a);
}

/* The commit failed: the starts it held were rolled back with it. */
static void forget_starts(agent *a) {
        for (size_t i = 0; i < a->n_starts; i++) {
                pod_rt *pr = agent__pod_rt(a, a->starts[i]);
                if (pr && pr->start_queued && !pr->handle)
                        agent__pod_rt_drop(a, a->starts[i]);
                free(a->starts[i]);
        }
        a->n_starts = 0;
}

/* A commit failed: the round is rolled back, and everything is looked at
 * again in a second (level-triggered, so redoing is safe). */
static usec_t recover_from_commit(agent *a, int r) {
        usec_t now = agent_now(a);

        if (r != a->commit_said_error || !a->commit_said ||
            now - a->commit_said >= 60 * USEC_PER_SEC) {
                if (a->commit_unsaid)
                        log_error_errno(r,
                                        "Failed to commit to the store: %m (and %u times "
                                        "more since it was last said)",
                                        a->commit_unsaid);
                else
                        log_error_errno(r, "Failed to commit to the store: %m");
                a->commit_said = now;
                a->commit_said_error = r;
                a->commit_unsaid = 0;
        } else
                a->commit_unsaid++;
        ctl_pod_undo_early(a);
        forget_starts(a);
        agent__drop_events(a);
        agent_resync(a);
        for (int k = 0; k < _STORE_KIND_MAX; k++)
                while (!workq_empty(&a->queues[k])) {
                        _cleanup_free_ char *key = workq_pop(&a->queues[k]), *ns = NULL;
                        const char *name;
                        if (key && agent__split_key(key, &ns, &name) >= 0)
                                agent__enqueue_at(a, (store_kind) k, ns, name,
                                                  agent_now(a) + USEC_PER_SEC);
                        else
                                agent__lost_key(a);
                }
        return agent_now(a) + USEC_PER_SEC;
}

/* A pass's rounds: a killed replica takes three (exit, replacement, start),
 * a rollout step a few more. */
#define AGENT_PASS_ROUNDS 64

/*
 * A pass decides everything that is due in one batch, and commits it once.
 * A process is started as soon as the pod worker decides to (begin_start()):
 * a killed replica's path is its exit written (pod worker), its replacement
 * created (ReplicaSet controller), its process spawned (pod worker), in two
 * rounds, before any commit. The commit is not an fsync (store.h): nothing
 * here was acknowledged to a user, and after a power loss every process is
 * gone anyway. A unit is started after the commit. Events are written
 * after the starts.
 */
usec_t agent_process(agent *a) {
        usec_t next = USEC_INFINITY, t0 = now_monotonic();
        bool worked = false;
        int r;

        if (a->resync_at && agent_now(a) >= a->resync_at) {
                a->resync_at = 0;
                agent_resync(a);
        }
        a->processing = true;
        a->clock_pass = (pass_clock){ .start_wall = agent_wall(a), .start = t0 };
        a->yielded = false;
        for (unsigned round = 0;; round++) {
                next = agent__promote_delayed(a);
                /* Out of rounds (a chain that does not end: a start error
                 * replaced at once, again and again, with back-off off),
                 * what was decided is committed and started, and the rest
                 * waits for the next pass, after the loop's I/O. */
                if (round < AGENT_PASS_ROUNDS && agent_has_work(a)) {
                        worked = true;
                        drain(a, STORE_DEPLOYMENT, ctl_deployment_sync);
                        drain(a, STORE_REPLICA_SET, ctl_replica_set_sync);
                        drain(a, STORE_POD, ctl_pod_sync);
                        /* Units to start: commit now rather than after the
                         * statuses that follow from them. */
                        if (a->n_starts == 0)
                                continue;
                }
                bool wrote = store_dirty(a->store);
                r = store_commit(a->store, false);
                if (r < 0) {
                        usec_t retry = recover_from_commit(a, r);
                        next = MIN(next, retry);
                        break;
                }
                if (a->commit_said && wrote) {
                        log_info("The store takes commits again%s.",
                                 a->commit_unsaid ? " (the failures since were not all said)" : "");
                        a->commit_said = 0;
                        a->commit_unsaid = 0;
                }
                ctl_pod_forget_early(a);
                if (a->n_starts == 0 && a->n_events == 0)
                        break; /* nothing left: the commit was the pass's last */
                ctl_pod_run_starts(a);
                agent__flush_events(a);
        }
        agent__remove_doomed_dirs(a);
        /* Still busy after many rounds: come back at once, not at a timer. */
        if (agent_has_work(a) || a->n_starts)
                next = agent_now(a);
        if (a->resync_at)
                next = MIN(next, a->resync_at);
        a->processing = false;
        if (worked)
                tend_histogram_observe(&a->metrics.pass_duration, now_monotonic() - t0);
        return next;
}

/* ---- life
 * ------------------------------------------------------------------------------------------- */

static usec_t real_now(void *u) {
        return now_monotonic();
}

static usec_t real_wall(void *u) {
        return now_realtime();
}

static const agent_clock real_clock = { .now = real_now, .wall = real_wall };

int agent_new(const agent_config *c, agent **ret) {
        agent *a = new0(agent, 1);
        char host[256] = "localhost";
        int r;

        if (!a)
                return -ENOMEM;
        a->store = c->store;
        a->backend = c->backend;
        a->backend_data = c->backend_data;
        a->clock = c->clock ? *c->clock : real_clock;
        a->wakeup = c->wakeup;
        a->wakeup_userdata = c->wakeup_userdata;
        if (c->fleet)
                a->fleet = *c->fleet;
        if (!c->node_name)
                (void) gethostname(host, sizeof host - 1);
        a->node_name = strdup(c->node_name ?: host);
        a->pods = tend_hashmap_new();
        if (!a->node_name || !a->pods)
                goto oom;
        for (int k = 0; k < _STORE_KIND_MAX; k++)
                if (!(a->queues[k].set = tend_hashmap_new()) ||
                    !(a->delayed[k] = tend_hashmap_new()))
                        goto oom;
        r = store_subscribe_writes(a->store, on_store_change, a);
        if (r < 0)
                goto fail;
        *ret = a;
        return 0;
oom:
        r = -ENOMEM;
fail:
        agent_free(a);
        return r;
}

int agent_shutdown(agent *a) {
        return store_commit(a->store, true);
}

agent *agent_free(agent *a) {
        const char *key;
        void *v;

        if (!a)
                return NULL;
        store_unsubscribe(a->store, on_store_change, a);
        if (a->pods)
                for (size_t i = 0; tend_hashmap_next(a->pods, &i, &key, &v);)
                        agent__pod_rt_free(a, v); /* detaches: processes keep running */
        tend_hashmap_free(a->pods);
        for (size_t i = 0; i < a->n_starts; i++)
                free(a->starts[i]);
        free(a->starts);
        ctl_pod_forget_early(a);
        free(a->early);
        agent__drop_events(a);
        free(a->events);
        agent__remove_doomed_dirs(a);
        for (int k = 0; k < _STORE_KIND_MAX; k++) {
                workq_done(&a->queues[k]);
                if (a->delayed[k])
                        for (size_t i = 0; tend_hashmap_next(a->delayed[k], &i, &key, &v);)
                                free(v);
                tend_hashmap_free(a->delayed[k]);
        }
        free(a->short_why);
        free(a->node_name);
        free(a);
        return NULL;
}

/* A pod adopted from a tendd that did not say what it runs: say it now. */
static int show_image(agent *a, const spec_pod *p, const rt_record *rec) {
        const spec_container_status *cs = p->status.n_container_statuses
                                                  ? &p->status.container_statuses[0]
                                                  : NULL;
        spec_pod *n;
        int r;

        if (!cs || !rec || !rec->image || (cs->image && *cs->image))
                return 0;
        n = spec_pod_copy(p);
        if (!n)
                return -ENOMEM;
        r = agent__set_image(&n->status.container_statuses[0], rec);
        if (r < 0) {
                spec_pod_free(n);
                return r;
        }
        return store_put(a->store, STORE_POD, n, NULL);
}

int agent_start(agent *a) {
        const void *const *items;
        _cleanup_free_ const spec_pod **pods = NULL;
        size_t n = store_list(a->store, STORE_POD, &items);
        int r;

        /* Copy the list: marking pods lost writes to the store. */
        pods = new0(const spec_pod *, n);
        if (!pods && n)
                return -ENOMEM;
        if (n)
                memcpy(pods, items, sizeof(void *) * n);

        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = pods[i];
                json_t *j = store_get_record(a->store, p->metadata.uid);
                rt_record rec = {};
                char owner[AGENT_OWNER_MAX];
                rt_pod_params params = agent__pod_params(p, owner);
                _cleanup_free_ char *err = NULL;
                pod_rt *pr;
                void *handle = NULL;

                if (spec_pod_terminal(p) || !agent__pod_mine(a, p))
                        continue; /* another node's: that node adopts it */
                if (!j) {
                        if (p->status.phase != SPEC_POD_PENDING)
                                (void) agent__mark_lost(a, p, "it has no runtime record");
                        continue;
                }
                if (rt_record_from_json(j, &rec) < 0) {
                        (void) agent__mark_lost(a, p, "its runtime record cannot be read");
                        continue;
                }
                if (rec.pid <= 0 && !rec.unit) {
                        /* Only the intent: the agent went down between
                         * writing it and recording the process. Did the
                         * process start? Look for it by its POD_UID. */
                        rt_record_done(&rec);
                        if (!a->backend->find ||
                            a->backend->find(a->backend_data, &params, &rec) < 0) {
                                (void) store_delete_record(a->store, p->metadata.uid);
                                continue; /* never started: the pod worker starts it */
                        }
                }
                pr = agent__pod_rt_new(a, p);
                if (!pr) {
                        rt_record_done(&rec);
                        return -ENOMEM;
                }
                r = a->backend->adopt(a->backend_data, &params, &rec, pr, &handle, &err);
                if (r < 0) {
                        agent__pod_rt_drop(a, p->metadata.uid);
                        (void) agent__mark_lost(a, p, err ?: strerror(-r));
                } else {
                        pr->handle = handle;
                        pr->started_wall = rec.started_at;
                        /* (ready as it was, until its probe says otherwise:
                         * the runtime's too, rt_pod_params.was_ready) */
                        pr->ready = params.was_ready;
                        log_info("pod/%s: adopted %s", p->metadata.name,
                                 strna(a->backend->container_id(handle)));
                        /* Out of memory here keeps the record as it was:
                         * it named this process, so it still adopts it. */
                        json_t *nj = rt_record_to_json(a->backend->record(handle));
                        if (nj)
                                (void) store_put_record(a->store, p->metadata.uid, nj);
                        json_decref(nj);
                        (void) show_image(a, p, a->backend->record(handle));
                }
                rt_record_done(&rec);
        }
        if (a->backend->sweep_orphans)
                a->backend->sweep_orphans(a->backend_data);
        if (a->backend->sweep_volumes)
                sweep_volumes(a);
        r = store_commit(a->store, true);
        if (r < 0)
                return r;
        a->started = true;
        agent_resync(a);
        return 0;
}
