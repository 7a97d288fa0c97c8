/* SPDX-License-Identifier: MIT */

/*
 * The pods' runtime state: what the pod worker knows of each pod's process
 * beyond the pod object (pod_rt), the backend's up-calls that fill it in,
 * the container status a pod shows, and the facts about a replica the
 * controllers share (its crash-loop streak, when it finished, how a pod is
 * removed or marked lost). It calls no controller.
 */

#include <stdio.h>

#include "agent-internal.h"

/* ---- container status ----------------------------------------------------------------- */

spec_container_status *agent__container_status(spec_pod *p) {
        if (p->status.n_container_statuses == 0) {
                spec_container_status *cs = calloc(1, sizeof *cs);
                const char *name = p->spec.n_containers ? p->spec.containers[0].name : "main";
                if (!cs)
                        return NULL;
                cs->name = strdup(strempty(name));
                if (!cs->name) {
                        free(cs);
                        return NULL;
                }
                p->status.container_statuses = cs;
                p->status.n_container_statuses = 1;
        }
        return &p->status.container_statuses[0];
}

int agent__set_image(spec_container_status *cs, const rt_record *rec) {
        int r = 0;

        RET_GATHER(r, free_and_strdup(&cs->image, strempty(rec ? rec->image : NULL)));
        RET_GATHER(r, free_and_strdup(&cs->image_id, strempty(rec ? rec->image_id : NULL)));
        return r;
}

static void clear_state(spec_container_state *s) {
        spec_done(&spec_type_container_state, s);
}

int agent__set_waiting(spec_container_status *cs, const char *reason, const char *message) {
        clear_state(&cs->state);
        cs->state.waiting = calloc(1, sizeof *cs->state.waiting);
        if (!cs->state.waiting)
                return -ENOMEM;
        cs->state.waiting->reason = reason ? strdup(reason) : NULL;
        cs->state.waiting->message = message ? strdup(message) : NULL;
        if ((reason && !cs->state.waiting->reason) || (message && !cs->state.waiting->message))
                return -ENOMEM;
        return 0;
}

int agent__set_running(spec_container_status *cs, usec_t started_at) {
        clear_state(&cs->state);
        cs->state.running = calloc(1, sizeof *cs->state.running);
        if (!cs->state.running)
                return -ENOMEM;
        cs->state.running->started_at = started_at;
        return 0;
}

int agent__set_terminated(spec_container_status *cs, int32_t exit_code, int32_t sig,
                          const char *reason, const char *message, usec_t started_at,
                          usec_t finished_at) {
        spec_state_terminated *t;

        clear_state(&cs->state);
        t = calloc(1, sizeof *t);
        if (!t)
                return -ENOMEM;
        t->exit_code = exit_code;
        t->signal = sig;
        t->reason = reason ? strdup(reason) : NULL;
        t->message = message ? strdup(message) : NULL;
        t->started_at = started_at;
        t->finished_at = finished_at;
        t->container_id = cs->container_id ? strdup(cs->container_id) : NULL;
        cs->state.terminated = t;
        cs->ready = false;
        cs->started = false;
        if ((reason && !t->reason) || (message && !t->message) ||
            (cs->container_id && !t->container_id))
                return -ENOMEM;
        return 0;
}

const char *agent__container_name(const spec_pod *p) {
        return p->spec.n_containers ? strempty(p->spec.containers[0].name) : "main";
}

/* ---- backend up-calls ---------------------------------------------------------------------- */

static void poke(agent *a, pod_rt *pr) {
        char *ns = NULL;
        const char *name;

        if (agent__split_key(pr->key, &ns, &name) < 0) {
                agent__lost_key(a);
                return;
        }
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

void agent_pod_status(agent *a, void *pod_userdata, const char *text) {
        pod_rt *pr = pod_userdata;

        if (streq_ptr(pr->notify_status, text))
                return;
        free(pr->notify_status);
        pr->notify_status = text ? strdup(text) : NULL;
        pr->probe_dirty = true;
        poke(a, pr);
}

rt_pod_params agent__pod_params(const spec_pod *p, char owner[static AGENT_OWNER_MAX]) {
        const spec_owner_ref *o = spec_meta_controller(&p->metadata);
        const char *hash = spec_map_get(&p->metadata.labels, SPEC_LABEL_POD_TEMPLATE_HASH);
        size_t n = o && o->name ? strlen(o->name) : 0;

        /* The deployment: its ReplicaSet's name without "-<pod-template-hash>". */
        if (n && hash && n > strlen(hash) + 1 && endswith(o->name, hash) &&
            o->name[n - strlen(hash) - 1] == '-')
                n -= strlen(hash) + 1;
        snprintf(owner, AGENT_OWNER_MAX, "%s/%.*s", p->metadata.namespace, (int) n,
                 n ? o->name : p->metadata.name);
        return (rt_pod_params){ .namespace = p->metadata.namespace,
                                .name = p->metadata.name,
                                .uid = p->metadata.uid,
                                .spec = &p->spec,
                                .labels = &p->metadata.labels,
                                .annotations = &p->metadata.annotations,
                                .socket_owner = owner,
                                .was_ready = spec_pod_ready(p, NULL) };
}

/* ---- pods' runtime state ------------------------------------------------------------------- */

pod_rt *agent__pod_rt(agent *a, const char *uid) {
        return uid ? tend_hashmap_get(a->pods, uid) : NULL;
}

void agent__pod_rt_free(agent *a, pod_rt *pr) {
        if (!pr)
                return;
        if (pr->handle)
                a->backend->free(pr->handle);
        free(pr->uid);
        free(pr->key);
        free(pr->liveness_message);
        free(pr->probe_message);
        free(pr->exit_message);
        free(pr->notify_status);
        free(pr->volumes_key);
        free(pr);
}

void agent__pod_rt_drop(agent *a, const char *uid) {
        agent__pod_rt_free(a, tend_hashmap_remove(a->pods, uid));
}

pod_rt *agent__pod_rt_new(agent *a, const spec_pod *p) {
        pod_rt *pr = new0(pod_rt, 1);

        if (!pr)
                return NULL;
        pr->agent = a;
        pr->uid = strdup(strempty(p->metadata.uid));
        pr->key = strprintf("%s/%s", p->metadata.namespace, p->metadata.name);
        if (!pr->uid || !pr->key || tend_hashmap_put(a->pods, pr->uid, pr, NULL) < 0) {
                agent__pod_rt_free(a, pr);
                return NULL;
        }
        return pr;
}

unsigned agent__pod_streak(const spec_pod *p) {
        const char *v = spec_map_get(&p->metadata.annotations, AGENT_ANN_CRASH_STREAK);
        int64_t n;

        if (!v || safe_atoi64(v, &n) < 0 || n < 0)
                return 0;
        return (unsigned) MIN(n, (int64_t) PLAN_STREAK_MAX);
}

int agent__set_pod_streak(spec_pod *p, unsigned streak) {
        char buf[16];

        if (streak == 0) {
                spec_map_remove(&p->metadata.annotations, AGENT_ANN_CRASH_STREAK);
                return 0;
        }
        snprintf(buf, sizeof buf, "%u", streak);
        return spec_map_set(&p->metadata.annotations, AGENT_ANN_CRASH_STREAK, buf);
}

spec_backoff agent__backoff_policy(agent *a, const spec_replica_set *rs) {
        const spec_tend *t = store_tend(a->store, STORE_REPLICA_SET, rs->metadata.namespace,
                                        rs->metadata.name);

        return t ? t->backoff : spec_backoff_default;
}

plan_lost_policy agent__lost_policy(agent *a, const spec_pod *p) {
        const spec_owner_ref *o = spec_meta_controller(&p->metadata);
        const spec_replica_set *rs = o ? agent__replica_set_by_uid(a, p->metadata.namespace, o->uid)
                                       : NULL;
        const spec_tend *t = rs ? store_tend(a->store, STORE_REPLICA_SET, rs->metadata.namespace,
                                             rs->metadata.name)
                                : NULL;

        return t && t->fence ? PLAN_LOST_FENCE : PLAN_LOST_REPLACE;
}

usec_t agent__grace(const spec_pod *p) {
        int64_t s = p->metadata.deletion_grace_period_seconds != SPEC_UNSET64
                            ? p->metadata.deletion_grace_period_seconds
                            : p->spec.termination_grace_period_seconds;
        return s == SPEC_UNSET64 || s < 0 ? 30 * USEC_PER_SEC : usec_from_sec(s);
}

usec_t agent__pod_finished_at(const spec_pod *p) {
        const spec_container_status *cs = p->status.n_container_statuses
                                                  ? &p->status.container_statuses[0]
                                                  : NULL;
        if (cs && cs->state.terminated)
                return cs->state.terminated->finished_at;
        return p->metadata.creation_timestamp;
}

static void remove_logs(agent *a, const char *key) {
        const char *slash = strchr(key, '/');
        _cleanup_free_ char *ns = slash ? strndup(key, (size_t) (slash - key)) : NULL;

        if (ns && a->backend->remove_logs)
                a->backend->remove_logs(a->backend_data, ns, slash + 1);
}

/* The logs of removed pods go after the pass's spawns, as its events do:
 * they are no reason to keep a replacement waiting. */
static void remove_log_dir(agent *a, const char *ns, const char *name) {
        char *key;

        if (!a->backend->remove_logs)
                return;
        key = strprintf("%s/%s", ns, name);
        if (!key)
                return;
        if (!a->processing || strv_push(&a->doomed_dirs, key) < 0) {
                remove_logs(a, key);
                free(key);
        }
}

/* A pod's volumes (files, a tmpfs) go after the pass too. */
static void remove_volumes(agent *a, const char *uid) {
        char *u;

        if (!a->backend->remove_volumes)
                return;
        u = strdup(uid);
        if (!u)
                return; /* (swept at the next start) */
        if (!a->processing || strv_push(&a->doomed_volumes, u) < 0) {
                a->backend->remove_volumes(a->backend_data, u);
                free(u);
        }
}

void agent__remove_doomed_dirs(agent *a) {
        for (char **d = a->doomed_dirs; d && *d; d++)
                remove_logs(a, *d);
        a->doomed_dirs = strv_free(a->doomed_dirs);
        for (char **u = a->doomed_volumes; u && *u; u++)
                a->backend->remove_volumes(a->backend_data, *u);
        a->doomed_volumes = strv_free(a->doomed_volumes);
}

/* A pod goes from the store and its runtime record. Its predecessor's log,
 * kept for its `logs --previous`, goes with it; its own log goes too unless
 * it was replaced (then it is its successor's previous log). */
static int remove_pod(agent *a, const spec_pod *p, bool keep_log) {
        _cleanup_free_ char *uid = strdup(strempty(p->metadata.uid));
        const char *pred = spec_map_get(&p->metadata.annotations, AGENT_ANN_PREDECESSOR);
        int r;

        if (!uid)
                return -ENOMEM;
        if (!keep_log)
                remove_log_dir(a, p->metadata.namespace, p->metadata.name);
        if (pred && !store_get(a->store, STORE_POD, p->metadata.namespace, pred))
                remove_log_dir(a, p->metadata.namespace, pred);
        if (p->spec.n_volumes && agent__pod_mine(a, p))
                remove_volumes(a, uid);
        (void) store_delete_record(a->store, uid);
        r = store_delete(a->store, STORE_POD, p->metadata.namespace, p->metadata.name);
        agent__pod_rt_drop(a, uid);
        return r == -ENOENT ? 0 : r;
}

int agent__remove_pod(agent *a, const spec_pod *p) {
        return remove_pod(a, p, false);
}

int agent__remove_replaced_pod(agent *a, const spec_pod *p) {
        return remove_pod(a, p, true);
}

/* Marks a pod whose process cannot be found as lost. */
int agent__mark_lost(agent *a, const spec_pod *p, const char *why) {
        _cleanup_(spec_pod_freep) spec_pod *n = spec_pod_copy(p);
        spec_container_status *cs;
        _cleanup_free_ char *msg = strprintf("lost while the agent was down: %s", why);
        usec_t started = 0;
        int r = 0;

        if (!n || !msg)
                return -ENOMEM;
        n->status.phase = SPEC_POD_FAILED;
        RET_GATHER(r, free_and_strdup(&n->status.reason, "Lost"));
        RET_GATHER(r, free_and_strdup(&n->status.message, msg));
        cs = agent__container_status(n);
        if (!cs)
                return -ENOMEM;
        if (cs->state.running)
                started = cs->state.running->started_at;
        /* Kubernetes' word for a container that cannot be found. */
        RET_GATHER(r, agent__set_terminated(cs, 137, 0, "ContainerStatusUnknown", msg, started,
                                            agent_wall(a)));
        RET_GATHER(r, plan_set_condition(&n->status.conditions, &n->status.n_conditions,
                                         "ContainersReady", "False", "PodFailed", NULL,
                                         agent_wall(a)));
        RET_GATHER(r, plan_set_condition(&n->status.conditions, &n->status.n_conditions, "Ready",
                                         "False", "PodFailed", NULL, agent_wall(a)));
        cs->ready = false;
        if (r < 0)
                return r;
        (void) store_delete_record(a->store, p->metadata.uid);
        /* (while the store cannot commit, each pass is undone and made
         * again a second later: said the first time, not every second) */
        if (!a->commit_said)
                log_warning("pod/%s: %s", p->metadata.name, msg);
        a->metrics.lost_unknown++;
        (void) agent__event(a, STORE_POD, &p->metadata, "Warning", "Lost", "%s", msg);
        return store_put(a->store, STORE_POD, TAKE_PTR(n), NULL);
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
