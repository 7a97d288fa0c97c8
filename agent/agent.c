/* SPDX-License-Identifier: MIT */

/*
 * The agent core: the work queue, the processing pass, the backend's
 * up-calls, adoption after a restart, and helpers the controllers share.
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

/* ---- the work queue ------------------------------------------------------------------ */

int workq_add(workq *q, const char *key) {
        if (tend_hashmap_get(q->set, key))
                return 0;
        if (q->head + q->n == q->alloc) {
                if (q->head > 0) {
                        memmove(q->keys, q->keys + q->head, sizeof(char *) * q->n);
                        q->head = 0;
                }
                if (TEND_GROW(q->keys, q->alloc, q->n + 1) < 0)
                        return -ENOMEM;
        }
        char *k = strdup(key);
        if (!k || tend_hashmap_put(q->set, key, (void *) 1, NULL) < 0) {
                free(k);
                return -ENOMEM;
        }
        q->keys[q->head + q->n++] = k;
        return 0;
}

char *workq_pop(workq *q) {
        char *k;

        if (q->n == 0)
                return NULL;
        k = q->keys[q->head++];
        q->n--;
        if (q->n == 0)
                q->head = 0;
        (void) tend_hashmap_remove(q->set, k);
        return k;
}

bool workq_empty(const workq *q) {
        return q->n == 0;
}

void workq_done(workq *q) {
        for (size_t i = 0; i < q->n; i++)
                free(q->keys[q->head + i]);
        free(q->keys);
        tend_hashmap_free(q->set);
        *q = (workq){};
}

static int split_key(const char *key, char **ret_ns, const char **ret_name) {
        const char *slash = strchr(key, '/');
        if (!slash)
                return -EINVAL;
        *ret_ns = strndup(key, (size_t) (slash - key));
        *ret_name = slash + 1;
        return *ret_ns ? 0 : -ENOMEM;
}

void agent__enqueue(agent *a, store_kind kind, const char *ns, const char *name) {
        char key[512];

        snprintf(key, sizeof key, "%s/%s", ns, name);
        if (workq_add(&a->queues[kind], key) < 0)
                return; /* OOM: the periodic resync brings it back */
        if (!a->processing && a->wakeup)
                a->wakeup(a->wakeup_userdata);
}

void agent__enqueue_at(agent *a, store_kind kind, const char *ns, const char *name, usec_t at) {
        char key[512];
        delayed *d;

        snprintf(key, sizeof key, "%s/%s", ns, name);
        d = tend_hashmap_get(a->delayed[kind], key);
        if (d) {
                d->at = MIN(d->at, at);
                return;
        }
        d = new0(delayed, 1);
        if (!d)
                return;
        d->at = at;
        d->kind = kind;
        if (tend_hashmap_put(a->delayed[kind], key, d, NULL) < 0)
                free(d);
}

void agent__enqueue_at_wall(agent *a, store_kind kind, const char *ns, const char *name,
                            usec_t wall) {
        usec_t now_wall = agent_wall(a), now = agent_now(a);
        agent__enqueue_at(a, kind, ns, name, wall > now_wall ? now + (wall - now_wall) : now);
}

/* Moves due delayed keys into their queues; returns the next deadline. */
static usec_t promote_delayed(agent *a) {
        usec_t now = agent_now(a), next = USEC_INFINITY;

        for (int k = 0; k < _STORE_KIND_MAX; k++) {
                _cleanup_strv_free_ char **due = NULL;
                const char *key;
                delayed *d;

                for (size_t i = 0; tend_hashmap_next(a->delayed[k], &i, &key, (void **) &d);) {
                        if (d->at <= now)
                                (void) strv_extend(&due, key);
                        else
                                next = MIN(next, d->at);
                }
                for (char **p = due; p && *p; p++) {
                        free(tend_hashmap_remove(a->delayed[k], *p));
                        (void) workq_add(&a->queues[k], *p);
                }
        }
        return next;
}

/* ---- store notifications ---------------------------------------------------------------- */

static const void *find_by_uid(agent *a, store_kind kind, const char *ns, const char *uid) {
        const void *const *items;
        size_t n = store_list(a->store, kind, &items);

        if (!uid)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                const spec_meta *m = &((const spec_deployment *) items[i])->metadata;
                if (streq_ptr(m->uid, uid) && streq_ptr(m->namespace, ns))
                        return items[i];
        }
        return NULL;
}

const spec_deployment *agent__deployment_by_uid(agent *a, const char *ns, const char *uid) {
        return find_by_uid(a, STORE_DEPLOYMENT, ns, uid);
}

const spec_replica_set *agent__replica_set_by_uid(agent *a, const char *ns, const char *uid) {
        return find_by_uid(a, STORE_REPLICA_SET, ns, uid);
}

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
                if (split_key(key, &ns, &name) < 0)
                        continue;
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

store *agent_get_store(const agent *a) {
        return a->store;
}

/* ---- starts and events, after the commit -------------------------------------------------- */

static int push_uid(char ***v, size_t *n, size_t *alloc, const char *uid) {
        char *u;

        if (TEND_GROW(*v, *alloc, *n + 1) < 0 || !(u = strdup(uid)))
                return -ENOMEM;
        (*v)[(*n)++] = u;
        return 0;
}

int agent__queue_start(agent *a, const char *uid) {
        return push_uid(&a->starts, &a->n_starts, &a->alloc_starts, uid);
}

int agent__note_early(agent *a, const char *uid) {
        return push_uid(&a->early, &a->n_early, &a->alloc_early, uid);
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

static void pending_event_done(pending_event *e) {
        free(e->meta.namespace);
        free(e->meta.name);
        free(e->meta.uid);
        free(e->type);
        free(e->reason);
        free(e->message);
}

static void flush_events(agent *a) {
        for (size_t i = 0; i < a->n_events; i++) {
                pending_event *e = &a->events[i];
                (void) store_record_event(a->store, e->kind, &e->meta, e->type, e->reason,
                                          e->message, e->at);
                pending_event_done(e);
        }
        a->n_events = 0;
}

static void drop_events(agent *a) {
        for (size_t i = 0; i < a->n_events; i++)
                pending_event_done(&a->events[i]);
        a->n_events = 0;
}

static void remove_doomed_dirs(agent *a);

/* A commit failed: the round is rolled back, and everything is looked at
 * again in a second (level-triggered, so redoing is safe). */
static usec_t recover_from_commit(agent *a, int r) {
        log_error_errno(r, "Failed to commit to the store: %m");
        ctl_pod_undo_early(a);
        forget_starts(a);
        drop_events(a);
        agent_resync(a);
        for (int k = 0; k < _STORE_KIND_MAX; k++)
                while (!workq_empty(&a->queues[k])) {
                        _cleanup_free_ char *key = workq_pop(&a->queues[k]), *ns = NULL;
                        const char *name;
                        if (key && split_key(key, &ns, &name) >= 0)
                                agent__enqueue_at(a, (store_kind) k, ns, name,
                                                  agent_now(a) + USEC_PER_SEC);
                }
        return agent_now(a) + USEC_PER_SEC;
}

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

        a->processing = true;
        a->clock_pass = (pass_clock){ .start_wall = agent_wall(a), .start = t0 };
        a->yielded = false;
        for (unsigned round = 0; round < 10000; round++) {
                next = promote_delayed(a);
                if (agent_has_work(a)) {
                        worked = true;
                        drain(a, STORE_DEPLOYMENT, ctl_deployment_sync);
                        drain(a, STORE_REPLICA_SET, ctl_replica_set_sync);
                        drain(a, STORE_POD, ctl_pod_sync);
                        /* Units to start: commit now rather than after the
                         * statuses that follow from them. */
                        if (a->n_starts == 0)
                                continue;
                }
                r = store_commit(a->store, false);
                if (r < 0) {
                        usec_t retry = recover_from_commit(a, r);
                        next = MIN(next, retry);
                        break;
                }
                ctl_pod_forget_early(a);
                if (a->n_starts == 0 && a->n_events == 0)
                        break; /* nothing left: the commit was the pass's last */
                ctl_pod_run_starts(a);
                flush_events(a);
        }
        remove_doomed_dirs(a);
        /* Still busy after many rounds: come back at once, not at a timer. */
        if (agent_has_work(a) || a->n_starts)
                next = agent_now(a);
        a->processing = false;
        if (worked)
                tend_histogram_observe(&a->metrics.pass_duration, now_monotonic() - t0);
        return next;
}

/* ---- backend up-calls ---------------------------------------------------------------------- */

static void poke(agent *a, pod_rt *pr) {
        char *ns = NULL;
        const char *name;

        if (split_key(pr->key, &ns, &name) < 0)
                return;
        agent__enqueue(a, STORE_POD, ns, name);
        free(ns);
}

void agent_pod_started(agent *a, void *pod_userdata) {
        pod_rt *pr = pod_userdata;

        pr->started = true;
        if (!pr->started_wall)
                pr->started_wall = agent_wall(a);
        poke(a, pr);
}

void agent_pod_exited(agent *a, void *pod_userdata, const rt_exit *e) {
        pod_rt *pr = pod_userdata;

        pr->exited = true;
        pr->exit = *e;
        free(pr->exit_message);
        pr->exit_message = e->message ? strdup(e->message) : NULL;
        pr->exit.message = pr->exit_message;
        poke(a, pr);
}

void agent_pod_probe(agent *a, void *pod_userdata, rt_probe_type type, bool ok,
                     const char *message) {
        pod_rt *pr = pod_userdata;

        if (type == RT_PROBE_READINESS) {
                pr->ready = ok;
                pr->probe_dirty = true;
                pr->probe_failed = !ok;
                free(pr->probe_message);
                pr->probe_message = message ? strdup(message) : NULL;
        } else if (!ok) {
                pr->liveness_failed = true;
                free(pr->liveness_message);
                pr->liveness_message = message ? strdup(message) : NULL;
        }
        poke(a, pr);
}

/* ---- pods' runtime state ------------------------------------------------------------------- */

pod_rt *agent__pod_rt(agent *a, const char *uid) {
        return uid ? tend_hashmap_get(a->pods, uid) : NULL;
}

static void pod_rt_free(agent *a, pod_rt *pr) {
        if (!pr)
                return;
        if (pr->handle)
                a->backend->free(pr->handle);
        free(pr->uid);
        free(pr->key);
        free(pr->liveness_message);
        free(pr->probe_message);
        free(pr->exit_message);
        free(pr);
}

void agent__pod_rt_drop(agent *a, const char *uid) {
        pod_rt_free(a, tend_hashmap_remove(a->pods, uid));
}

/* ---- shared facts ------------------------------------------------------------------------------
 */

unsigned agent__pod_streak(const spec_pod *p) {
        const char *v = spec_map_get(&p->metadata.annotations, AGENT_ANN_CRASH_STREAK);
        int64_t n;

        if (!v || safe_atoi64(v, &n) < 0 || n < 0)
                return 0;
        return (unsigned) MIN(n, (int64_t) PLAN_STREAK_MAX);
}

void agent__set_pod_streak(spec_pod *p, unsigned streak) {
        char buf[16];

        if (streak == 0) {
                (void) spec_map_remove(&p->metadata.annotations, AGENT_ANN_CRASH_STREAK);
                return;
        }
        snprintf(buf, sizeof buf, "%u", streak);
        (void) spec_map_set(&p->metadata.annotations, AGENT_ANN_CRASH_STREAK, buf);
}

spec_backoff agent__backoff_policy(const spec_replica_set *rs) {
        const char *v = spec_map_get(&rs->metadata.annotations, SPEC_ANN_CRASH_BACKOFF);
        _cleanup_free_ char *problem = NULL;
        spec_backoff b;

        /* Validated at apply; a value that does not parse (an older tendd
         * wrote it) counts as the default. */
        if (spec_backoff_parse(v, &b, &problem) < 0) {
                log_warning("replicaset/%s: %s: %s; using the default", rs->metadata.name,
                            SPEC_ANN_CRASH_BACKOFF, strna(problem));
                b = spec_backoff_default;
        }
        return b;
}

usec_t agent__pod_finished_at(const spec_pod *p) {
        const spec_container_status *cs = p->status.n_container_statuses
                                                  ? &p->status.container_statuses[0]
                                                  : NULL;
        if (cs && cs->state.terminated)
                return cs->state.terminated->finished_at;
        return p->metadata.creation_timestamp;
}

int agent__event(agent *a, store_kind kind, const spec_meta *m, const char *type,
                 const char *reason, const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL;
        pending_event *e;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        log_debug("%s/%s: %s: %s", store_kind_to_string(kind), m->name, reason, msg);
        if (!a->processing)
                return store_record_event(a->store, kind, m, type, reason, msg, agent_wall(a));
        /* In a pass: written after its spawns (agent_process()). */
        if (TEND_GROW(a->events, a->alloc_events, a->n_events + 1) < 0)
                return -ENOMEM;
        e = &a->events[a->n_events];
        *e = (pending_event){
                .kind = kind,
                .meta = { .namespace = strdup(strempty(m->namespace)),
                          .name = strdup(strempty(m->name)),
                          .uid = m->uid ? strdup(m->uid) : NULL },
                .type = strdup(type),
                .reason = strdup(reason),
                .message = TAKE_PTR(msg),
                .at = agent_wall(a),
        };
        if (!e->meta.namespace || !e->meta.name || (m->uid && !e->meta.uid) || !e->type ||
            !e->reason) {
                pending_event_done(e);
                return -ENOMEM;
        }
        a->n_events++;
        return 0;
}

static void remove_logs(agent *a, const char *key) {
        const char *slash = strchr(key, '/');
        _cleanup_free_ char *ns = slash ? strndup(key, (size_t) (slash - key)) : NULL;

        if (ns && a->backend->remove_logs)
                a->backend->remove_logs(a->backend_data, ns, slash + 1);
}

/* The logs of removed pods go after the pass's spawns, as its events do:
 * they are no reason to keep a replacement waiting. */
static void remove_log_dir(agent *a, const spec_pod *p) {
        char *key;

        if (!a->backend->remove_logs)
                return;
        key = strprintf("%s/%s", p->metadata.namespace, p->metadata.name);
        if (!key)
                return;
        if (!a->processing || strv_push(&a->doomed_dirs, key) < 0) {
                remove_logs(a, key);
                free(key);
        }
}

static void remove_doomed_dirs(agent *a) {
        for (char **d = a->doomed_dirs; d && *d; d++)
                remove_logs(a, *d);
        a->doomed_dirs = strv_free(a->doomed_dirs);
}

int agent__remove_pod(agent *a, const spec_pod *p) {
        _cleanup_free_ char *uid = strdup(strempty(p->metadata.uid));
        int r;

        if (!uid)
                return -ENOMEM;
        remove_log_dir(a, p);
        (void) store_delete_record(a->store, uid);
        r = store_delete(a->store, STORE_POD, p->metadata.namespace, p->metadata.name);
        agent__pod_rt_drop(a, uid);
        return r == -ENOENT ? 0 : r;
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
                        pod_rt_free(a, v); /* detaches: processes keep running */
        tend_hashmap_free(a->pods);
        for (size_t i = 0; i < a->n_starts; i++)
                free(a->starts[i]);
        free(a->starts);
        ctl_pod_forget_early(a);
        free(a->early);
        drop_events(a);
        free(a->events);
        remove_doomed_dirs(a);
        for (int k = 0; k < _STORE_KIND_MAX; k++) {
                workq_done(&a->queues[k]);
                if (a->delayed[k])
                        for (size_t i = 0; tend_hashmap_next(a->delayed[k], &i, &key, &v);)
                                free(v);
                tend_hashmap_free(a->delayed[k]);
        }
        free(a->node_name);
        free(a);
        return NULL;
}

pod_rt *agent__pod_rt_new(agent *a, const spec_pod *p) {
        pod_rt *pr = new0(pod_rt, 1);

        if (!pr)
                return NULL;
        pr->agent = a;
        pr->uid = strdup(strempty(p->metadata.uid));
        pr->key = strprintf("%s/%s", p->metadata.namespace, p->metadata.name);
        if (!pr->uid || !pr->key || tend_hashmap_put(a->pods, pr->uid, pr, NULL) < 0) {
                pod_rt_free(a, pr);
                return NULL;
        }
        return pr;
}

/* Marks a pod whose process cannot be found as lost. */
int agent__mark_lost(agent *a, const spec_pod *p, const char *why) {
        spec_pod *n = spec_pod_copy(p);
        spec_container_status *cs;
        _cleanup_free_ char *msg = strprintf("lost while the agent was down: %s", why);
        usec_t started = 0;

        if (!n || !msg) {
                spec_pod_free(n);
                return -ENOMEM;
        }
        n->status.phase = SPEC_POD_FAILED;
        (void) free_and_strdup(&n->status.reason, "Lost");
        (void) free_and_strdup(&n->status.message, msg);
        cs = agent__container_status(n);
        if (cs) {
                if (cs->state.running)
                        started = cs->state.running->started_at;
                /* Kubernetes' word for a container that cannot be found. */
                agent__set_terminated(cs, 137, 0, "ContainerStatusUnknown", msg, started,
                                      agent_wall(a));
        }
        plan_set_condition(&n->status.conditions, &n->status.n_conditions, "ContainersReady",
                           "False", "PodFailed", NULL, agent_wall(a));
        plan_set_condition(&n->status.conditions, &n->status.n_conditions, "Ready", "False",
                           "PodFailed", NULL, agent_wall(a));
        if (cs)
                cs->ready = false;
        (void) store_delete_record(a->store, p->metadata.uid);
        log_warning("pod/%s: %s", p->metadata.name, msg);
        a->metrics.lost_unknown++;
        (void) agent__event(a, STORE_POD, &p->metadata, "Warning", "Lost", "%s", msg);
        return store_put(a->store, STORE_POD, n, NULL);
}

/* A unit that ran with no pod to answer for it (its record was lost, or
 * the pod deleted while tendd was down) was stopped: a Warning says so. */
void agent_orphan_stopped(agent *a, const char *unit) {
        _cleanup_free_ char *ns = NULL, *pod = NULL;
        spec_meta meta = {};

        if (rt_unit_parse(unit, &ns, &pod) < 0)
                return;
        meta.namespace = ns;
        meta.name = pod;
        (void) agent__event(a, STORE_POD, &meta, "Warning", "OrphanStopped",
                            "Unit %s ran with no pod record: stopped", unit);
        /* From the runtime's bus, not a controller pass: nothing else
         * commits it. */
        if (!a->processing)
                (void) store_commit(a->store, false);
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
                rt_pod_params params = { .namespace = p->metadata.namespace,
                                         .name = p->metadata.name,
                                         .uid = p->metadata.uid,
                                         .spec = &p->spec,
                                         .labels = &p->metadata.labels };
                _cleanup_free_ char *err = NULL;
                pod_rt *pr;
                void *handle = NULL;

                if (spec_pod_terminal(p))
                        continue;
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
                        log_info("pod/%s: adopted %s", p->metadata.name,
                                 strna(a->backend->container_id(handle)));
                        json_t *nj = rt_record_to_json(a->backend->record(handle));
                        if (nj)
                                (void) store_put_record(a->store, p->metadata.uid, nj);
                        json_decref(nj);
                }
                rt_record_done(&rec);
        }
        if (a->backend->sweep_orphans)
                a->backend->sweep_orphans(a->backend_data);
        r = store_commit(a->store, true);
        if (r < 0)
                return r;
        a->started = true;
        agent_resync(a);
        return 0;
}
