/* SPDX-License-Identifier: MIT */

/*
 * The pod worker (the kubelet's part): makes the runtime match each pod
 * object — start it, reflect what the runtime says (started, ready, exited),
 * stop it gracefully when it is deleted or fails its liveness probe — and
 * writes the pod's status. A process that exits or is killed makes its pod
 * Failed: a lost pod, which its ReplicaSet replaces.
 */

#include <inttypes.h>
#include <stdio.h>

#include "agent-internal.h"

/* Ready and ContainersReady follow the container's readiness; the
 * transition time drives minReadySeconds and the deletion order. */
static int set_ready(agent *a, spec_pod *n, bool ready) {
        usec_t now = agent_wall(a);
        const char *st = ready ? "True" : "False";
        const char *reason = ready ? NULL : "ContainersNotReady";
        int r = 0;

        RET_GATHER(r, plan_set_condition(&n->status.conditions, &n->status.n_conditions,
                                         "ContainersReady", st, reason, NULL, now));
        RET_GATHER(r, plan_set_condition(&n->status.conditions, &n->status.n_conditions, "Ready",
                                         st, reason, NULL, now));
        if (n->status.n_container_statuses)
                n->status.container_statuses[0].ready = ready;
        return r;
}

/* ---- crash-loop bookkeeping -------------------------------------------------------------- */

/* A replica died (pod p, its status to be written as n): its streak after
 * the death, and when its replacement may start, go on the dead pod for the
 * ReplicaSet controller to carry on. */
static int note_death(agent *a, const spec_pod *p, spec_pod *n, bool was_ready, usec_t started_wall,
                      usec_t finished_wall) {
        const spec_owner_ref *o = spec_meta_controller(&p->metadata);
        const spec_replica_set *rs = o ? agent__replica_set_by_uid(a, p->metadata.namespace, o->uid)
                                       : NULL;
        spec_backoff policy = rs ? agent__backoff_policy(a, rs) : spec_backoff_default;
        usec_t ran = finished_wall > started_wall && started_wall ? finished_wall - started_wall
                                                                  : 0;
        plan_death d = plan_crash_death(&policy, agent__pod_streak(p), was_ready, ran);
        char when[TIMESTAMP_MAX];

        int r = agent__set_pod_streak(n, d.streak);
        if (r >= 0 && d.delay)
                r = spec_map_set(&n->metadata.annotations, AGENT_ANN_REPLACE_AFTER,
                                 format_timestamp(when, finished_wall + d.delay));
        return r;
}

/* ---- starting ------------------------------------------------------------------------------ */

static int fail_start(agent *a, const spec_pod *p, const char *error) {
        _cleanup_(spec_pod_freep) spec_pod *n = spec_pod_copy(p);
        spec_container_status *cs;
        usec_t now = agent_wall(a);
        int r = 0;

        if (!n)
                return -ENOMEM;
        log_warning("pod/%s: cannot start: %s", p->metadata.name, error);
        a->metrics.pod_start_errors++;
        (void) agent__event(a, STORE_POD, &p->metadata, "Warning", "Failed", "Error: %s", error);
        n->status.phase = SPEC_POD_FAILED;
        RET_GATHER(r, free_and_strdup(&n->status.reason, "StartError"));
        RET_GATHER(r, free_and_strdup(&n->status.message, error));
        cs = agent__container_status(n);
        RET_GATHER_PTR(r, cs);
        if (cs)
                /* 128: the container runtime's "could not run" code */
                RET_GATHER(r, agent__set_terminated(cs, 128, 0, "StartError", error, 0, now));
        RET_GATHER(r, set_ready(a, n, false));
        RET_GATHER(r, note_death(a, p, n, false, now, now));
        if (r < 0)
                return r;
        (void) store_delete_record(a->store, p->metadata.uid);
        return store_put(a->store, STORE_POD, TAKE_PTR(n), NULL);
}

/* The ports the pod got, for people (`get pods -o wide`, describe). */
static int set_ports_annotation(spec_pod *n, const rt_record *rec) {
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(1024);
        int r = 0;

        for (size_t i = 0; rec && i < rec->n_ports; i++)
                RET_GATHER(r, tend_buf_addf(&b, "%s%s%s%u", i ? "," : "", rec->ports[i].name,
                                            rec->ports[i].name[0] ? "=" : "", rec->ports[i].port));
        if (r >= 0 && b.len)
                r = spec_map_set(&n->metadata.annotations, AGENT_ANN_PORTS, tend_buf_str(&b));
        return r;
}

/* Where the pod runs and under which handle: node, addresses, ports,
 * container id. Written at its start, and again by reflect() if that write
 * was lost (out of memory between the spawn and the write). */
static int set_placement(agent *a, spec_pod *n, void *handle) {
        spec_container_status *cs = agent__container_status(n);
        int r = 0;

        if (!cs)
                return -ENOMEM;
        RET_GATHER(r, set_ports_annotation(n, a->backend->record(handle)));
        RET_GATHER(r, free_and_strdup(&n->spec.node_name, a->node_name));
        RET_GATHER(r, free_and_strdup(&n->status.host_ip, "127.0.0.1"));
        RET_GATHER(r, free_and_strdup(&n->status.pod_ip, "127.0.0.1"));
        RET_GATHER(r, free_and_strdup(&cs->container_id, a->backend->container_id(handle)));
        RET_GATHER(r, agent__set_image(cs, a->backend->record(handle)));
        return r;
}

/* What a start hands the runtime beside the pod: its environment and its
 * volumes' files, references resolved. */
typedef struct pod_inputs {
        agent_env env;
        agent_volumes volumes;
} pod_inputs;

static void pod_inputs_done(pod_inputs *in) {
        agent__pod_env_done(&in->env);
        agent__pod_volumes_done(&in->volumes);
}

static int start_pod(agent *a, const spec_pod *p, pod_rt *pr, pod_inputs *made);

/* The container cannot be made: a reference of its environment is missing
 * (a ConfigMap, a Secret, a key of one: reason CreateContainerConfigError,
 * event "Failed"), or of a volume (ContainerCreating, "FailedMount"). The
 * pod waits, not started and not failed, saying why, as the kubelet has it;
 * a change of a ConfigMap or a Secret of its namespace looks at it again
 * (pass.c). */
static int config_error(agent *a, const spec_pod *p, const char *reason, const char *event,
                        const char *why) {
        const spec_container_status *cur = p->status.n_container_statuses
                                                   ? &p->status.container_statuses[0]
                                                   : NULL;
        spec_container_status *cs;
        int r = 0;

        if (cur && cur->state.waiting && streq_ptr(cur->state.waiting->reason, reason) &&
            streq_ptr(cur->state.waiting->message, why))
                return 0; /* said already */
        _cleanup_(spec_pod_freep) spec_pod *n = spec_pod_copy(p);
        if (!n)
                return -ENOMEM;
        log_warning("pod/%s: cannot start: %s", p->metadata.name, why);
        if (streq(event, "Failed"))
                (void) agent__event(a, STORE_POD, &p->metadata, "Warning", event, "Error: %s", why);
        else
                (void) agent__event(a, STORE_POD, &p->metadata, "Warning", event, "%s", why);
        cs = agent__container_status(n);
        RET_GATHER_PTR(r, cs);
        if (cs)
                RET_GATHER(r, agent__set_waiting(cs, reason, why));
        RET_GATHER(r, set_ready(a, n, false));
        if (r < 0)
                return r;
        return store_put(a->store, STORE_POD, TAKE_PTR(n), NULL);
}

/* p's start waits for the host (the runtime's -RT_ESHORT: tendd's own
 * descriptors or processes ran short, not the pod's fault): said once, as the kubelet
 * says a container it cannot make, and tried again AGENT_SHORT_RETRY from
 * now. Not a death: its crash-loop streak and back-off stay as they are.
 * Until then other starts wait too, without trying (ctl_pod_sync()): a
 * host out of descriptors is not asked again for each of a thousand pods. */
static int wait_for_host(agent *a, const spec_pod *p, const char *why) {
        usec_t now = agent_now(a);

        if (why && !streq_ptr(why, a->short_why)) {
                char *w = strdup(why);
                if (!w)
                        return -ENOMEM;
                free(a->short_why);
                a->short_why = w;
        }
        if (a->short_until <= now)
                a->short_until = now + AGENT_SHORT_RETRY;
        agent__enqueue_at(a, STORE_POD, p->metadata.namespace, p->metadata.name, a->short_until);
        return config_error(a, p, AGENT_CREATE_ERROR, "Failed",
                            a->short_why ?: "tendd is short of resources");
}

/* Whether p's volumes and environment can be made now (else, said:
 * config_error()). 1: they can (made into *ret, if given); 0: it waits;
 * -ENOMEM. */
static int inputs_ready(agent *a, const spec_pod *p, pod_inputs *ret) {
        /* (ret: the start itself, which says what it skipped) */
        _cleanup_free_ char *why = NULL;
        pod_inputs in = {};
        int r;

        /* volumes first, as the kubelet mounts them before it makes the
         * container */
        r = agent__pod_volumes(a, p, &in.volumes, &why);
        if (r == -ENOENT) {
                r = config_error(a, p, AGENT_VOLUME_WAIT, "FailedMount", strna(why));
                return r < 0 ? r : 0;
        }
        if (r >= 0 && agent__pod_env_refers(p)) {
                r = agent__pod_env(a, p, ret != NULL, &in.env, &why);
                if (r == -ENOENT) {
                        agent__pod_volumes_done(&in.volumes);
                        r = config_error(a, p, AGENT_CONFIG_ERROR, "Failed", strna(why));
                        return r < 0 ? r : 0;
                }
        } /* (else as written: env stays empty, the runtime reads the spec's) */
        if (r < 0) {
                pod_inputs_done(&in);
                return r;
        }
        if (ret)
                *ret = in;
        else
                pod_inputs_done(&in);
        return 1;
}

/* Decides to start p. A process starts at once, in the middle of the pass
 * that decided it and before that pass is committed: the commit is not on a
 * replacement's way, and of a thousand replacements the first does not wait
 * for the thousandth to be decided. If the agent dies before the commit,
 * the next one kills the process (the backend's sweep_orphans) and the pod
 * is replaced again. A unit's start waits for the commit, with the intent
 * written: a crash after the start finds the unit by its name. */
static int begin_start(agent *a, const spec_pod *p) {
        bool early = a->backend->early_start && a->backend->early_start(&p->spec);
        _cleanup_(pod_inputs_done) pod_inputs in = {};
        json_t *intent;
        pod_rt *pr;
        int r;

        /* (made once where the start follows at once; a queued start makes
         * it again when it runs, the references may have changed) */
        r = inputs_ready(a, p, early ? &in : NULL);
        if (r <= 0)
                return r;
        if (!early) {
                intent = json_pack("{s:b}", "intent", 1);
                if (!intent)
                        return -ENOMEM;
                r = store_put_record(a->store, p->metadata.uid, intent);
                json_decref(intent);
                if (r < 0)
                        return r;
        }
        pr = agent__pod_rt_new(a, p);
        if (!pr)
                return -ENOMEM;
        r = early ? agent__note_early(a, p->metadata.uid) : agent__queue_start(a, p->metadata.uid);
        if (r < 0) {
                agent__pod_rt_drop(a, p->metadata.uid);
                return r;
        }
        if (!early) {
                pr->start_queued = true;
                return 0;
        }
        return start_pod(a, p, pr, &in);
}

/* A replacement that was not kept waiting by a back-off, its predecessor's
 * exit noticed just before this pass: where its time went. */
static void observe_respawn(agent *a, const spec_pod *p, usec_t spawn_begin, usec_t spawned) {
        const spec_container_status *cs = p->status.n_container_statuses
                                                  ? &p->status.container_statuses[0]
                                                  : NULL;
        const pass_clock *c = &a->clock_pass;
        usec_t noticed;

        if (!cs || !cs->last_state.terminated ||
            spec_map_get(&p->metadata.annotations, AGENT_ANN_START_AFTER))
                return;
        noticed = cs->last_state.terminated->finished_at;
        if (noticed > c->start_wall || c->start_wall - noticed > 10 * USEC_PER_SEC)
                return; /* not this pass's: the agent was busy or down */
        tend_histogram_observe(&a->metrics.respawn[AGENT_RESPAWN_QUEUE], c->start_wall - noticed);
        tend_histogram_observe(&a->metrics.respawn[AGENT_RESPAWN_PASS], spawn_begin - c->start);
        tend_histogram_observe(&a->metrics.respawn[AGENT_RESPAWN_SPAWN], spawned - spawn_begin);
}

/* made: p's environment and volumes, made by begin_start() (NULL: made
 * here). */
static int start_pod(agent *a, const spec_pod *p, pod_rt *pr, pod_inputs *made) {
        char owner[AGENT_OWNER_MAX];
        rt_pod_params params = agent__pod_params(p, owner);
        _cleanup_free_ char *err = NULL;
        _cleanup_(pod_inputs_done) pod_inputs own = {};
        pod_inputs *in = made ?: &own;
        json_t *rec;
        void *handle = NULL;
        int r;

        usec_t spawn_begin = now_monotonic();

        pr->start_queued = false;
        /* (a queued start: a reference gone since it was decided, it waits) */
        r = made ? 1 : inputs_ready(a, p, &own);
        if (r <= 0) {
                agent__pod_rt_drop(a, p->metadata.uid);
                (void) store_delete_record(a->store, p->metadata.uid);
                return r;
        }
        if (agent__pod_env_refers(p)) {
                static const rt_env_var none[1];
                params.env = in->env.vars ?: none; /* (all of it optional and missing) */
                params.n_env = in->env.n;
        }
        params.volumes = in->volumes.vols;
        r = a->backend->start(a->backend_data, &params, pr, &handle, &err);
        if (r < 0) {
                agent__pod_rt_drop(a, p->metadata.uid);
                if (r == -RT_ESHORT) {
                        (void) store_delete_record(a->store, p->metadata.uid);
                        return wait_for_host(a, p, err ?: strerror(-r));
                }
                return fail_start(a, p, err ?: strerror(-r));
        }
        pr->handle = handle;
        if (agent__pod_has_files(p))
                pr->volumes_key = agent__volumes_key(a, p); /* (NULL: looked at again) */
        a->metrics.pod_starts++;
        observe_respawn(a, p, spawn_begin, now_monotonic());
        /* The first process of a pass may still be finishing its exec on
         * our core: let it, before the bookkeeping (backend's after_starts). */
        if (!a->yielded && a->backend->after_starts) {
                a->backend->after_starts(a->backend_data);
                a->yielded = true;
        }

        /* The process runs and is watched (pr->handle). Out of memory from
         * here is an error of the pass, and nothing half-built is written:
         * the next sync reflects the process as running; without its
         * record, an agent restart in between would find it lost. */
        rec = rt_record_to_json(a->backend->record(handle));
        r = rec ? store_put_record(a->store, p->metadata.uid, rec) : -ENOMEM;
        json_decref(rec);
        if (r < 0)
                return r;

        _cleanup_(spec_pod_freep) spec_pod *n = spec_pod_copy(p);
        if (!n)
                return -ENOMEM;
        RET_GATHER(r, set_placement(a, n, handle));
        spec_container_status *cs = agent__container_status(n);
        if (!cs)
                return -ENOMEM;
        RET_GATHER(r, agent__set_waiting(cs, "ContainerCreating", NULL));
        if (r < 0)
                return r;
        log_debug("pod/%s: started %s", p->metadata.name, strna(a->backend->container_id(handle)));
        return store_put(a->store, STORE_POD, TAKE_PTR(n), NULL);
}

void ctl_pod_run_starts(agent *a) {
        /* Taken first: a start's writes may queue more (for the next cycle). */
        char **uids = a->starts;
        size_t n = a->n_starts;

        a->starts = NULL;
        a->n_starts = a->alloc_starts = 0;
        for (size_t i = 0; i < n; i++) {
                pod_rt *pr = agent__pod_rt(a, uids[i]);
                _cleanup_free_ char *ns = NULL;
                const char *slash = pr ? strchr(pr->key, '/') : NULL;
                const spec_pod *p = NULL;
                int r;

                if (slash && !(ns = strndup(pr->key, (size_t) (slash - pr->key)))) {
                        /* cannot tell: try again later, from the top */
                        agent__pod_rt_drop(a, uids[i]);
                        agent__lost_key(a);
                        pr = NULL;
                } else if (slash)
                        p = store_get(a->store, STORE_POD, ns, slash + 1);
                if (!pr || !pr->start_queued)
                        ; /* dropped meanwhile (the pod went) */
                else if (!p || !streq_ptr(p->metadata.uid, uids[i]) || spec_pod_terminal(p) ||
                         p->metadata.deletion_timestamp || a->draining)
                        /* Deleted in the same pass: never started. */
                        agent__pod_rt_drop(a, uids[i]);
                else if (a->short_until > agent_now(a)) {
                        /* the host said it is short: not asked again */
                        agent__pod_rt_drop(a, uids[i]);
                        (void) store_delete_record(a->store, uids[i]);
                        if (wait_for_host(a, p, NULL) < 0)
                                agent__enqueue(a, STORE_POD, p->metadata.namespace,
                                               p->metadata.name);
                } else if ((r = start_pod(a, p, pr, NULL)) < 0) {
                        log_warning_errno(r, "pod/%s: failed to record its start: %m",
                                          p->metadata.name);
                        agent__enqueue(a, STORE_POD, p->metadata.namespace, p->metadata.name);
                }
                free(uids[i]);
        }
        free(uids);
}

void ctl_pod_forget_early(agent *a) {
        for (size_t i = 0; i < a->n_early; i++)
                free(a->early[i]);
        a->n_early = 0;
}

void ctl_pod_undo_early(agent *a) {
        for (size_t i = 0; i < a->n_early; i++) {
                pod_rt *pr = agent__pod_rt(a, a->early[i]);
                if (pr && pr->handle) {
                        log_warning("pod/%s: its start could not be committed; killing it",
                                    pr->key);
                        (void) a->backend->signal(pr->handle, SIGKILL);
                }
                agent__pod_rt_drop(a, a->early[i]);
        }
        ctl_pod_forget_early(a);
}

/* ---- exits ------------------------------------------------------------------------------- */

static int restart_in_place(agent *a, spec_pod *n, spec_container_status *cs);

static int write_exit(agent *a, const spec_pod *p, pod_rt *pr) {
        _cleanup_(spec_pod_freep) spec_pod *n = NULL;
        const rt_exit *e = &pr->exit;
        spec_container_status *cs;
        const char *reason = e->reason;
        _cleanup_free_ char *what = NULL;
        int32_t code = 0, sig = 0;
        bool was_ready;
        int r = 0;

        /* It never ran (a systemd start job that failed). */
        if (e->kind == RT_EXIT_START_ERROR)
                return fail_start(a, p, e->message ?: "the start failed");
        n = spec_pod_copy(p);
        if (!n)
                return -ENOMEM;
        switch (e->kind) {
        case RT_EXIT_CODE:
                code = e->code;
                what = strprintf("exited with code %d", code);
                break;
        case RT_EXIT_SIGNAL:
                sig = e->signal;
                code = 128 + sig;
                what = strprintf("was killed by signal %d (%s)", sig, strsignal(sig));
                break;
        default:
                code = 137;
                reason = "ContainerStatusUnknown";
                what = strdup("exited; its status is unknown (adopted after an agent restart)");
                break;
        }
        if (streq_ptr(reason, "OOMKilled")) {
                free(what);
                what = strprintf("%s after the kernel's OOM killer struck in its cgroup: it "
                                 "used all of its limits.memory (OOMKilled)",
                                 sig ? "was killed" : "exited");
        }
        if (pr->liveness_failed)
                reason = "Unhealthy";

        n->status.phase = SPEC_POD_FAILED;
        /* A process that exits at once may never have been written as
         * Running: it did start, and when. */
        if (!n->status.start_time && pr->started)
                n->status.start_time = pr->started_wall;
        if (pr->liveness_failed) {
                RET_GATHER(r, free_and_strdup(&n->status.reason, "Unhealthy"));
                RET_GATHER(r, free_and_strdup(&n->status.message, pr->liveness_message));
        }
        cs = agent__container_status(n);
        if (!cs)
                return -ENOMEM;
        was_ready = cs->ready;
        RET_GATHER(r, agent__set_terminated(cs, code, sig, reason,
                                            pr->liveness_failed ? pr->liveness_message : NULL,
                                            pr->started_wall, e->finished_at));
        RET_GATHER(r, set_ready(a, n, false));
        if (r < 0)
                return r; /* nothing half-written; the exit stays noted for the retry */
        if (!p->metadata.deletion_timestamp) {
                /* A lost pod: say so where the user looks. */
                log_info("pod/%s: process %s %s", p->metadata.name,
                         strna(pr->handle ? a->backend->container_id(pr->handle) : NULL),
                         strna(what));
                (void) agent__event(a, STORE_POD, &p->metadata, "Warning", "ProcessExited",
                                    "Container %s %s", agent__container_name(p), strna(what));
                r = note_death(a, p, n, was_ready || pr->ready, pr->started_wall, e->finished_at);
                if (r >= 0 && agent__fleet(a))
                        r = restart_in_place(a, n, cs);
                if (r < 0)
                        return r;
                if (pr->liveness_failed)
                        a->metrics.lost_liveness++;
                else if (e->kind == RT_EXIT_SIGNAL)
                        a->metrics.lost_signal++;
                else if (e->kind == RT_EXIT_CODE)
                        a->metrics.lost_exit++;
                else
                        a->metrics.lost_unknown++;
        }
        (void) store_delete_record(a->store, p->metadata.uid);
        return store_put(a->store, STORE_POD, TAKE_PTR(n), NULL);
}

/* In a fleet, a process that dies is restarted in place (docs/fleet.md §3.7,
 * as the kubelet does): the pod stays, its container's last state is the
 * death, restartCount + 1, and it starts again after its crash-loop
 * back-off — on this node, needing neither the leader nor etcd (a node cut
 * off keeps its pods going). n: the pod with its death written (note_death). */
static int restart_in_place(agent *a, spec_pod *n, spec_container_status *cs) {
        const char *after = spec_map_get(&n->metadata.annotations, AGENT_ANN_REPLACE_AFTER);
        usec_t until = 0, now = agent_wall(a);
        char when[TIMESTAMP_MAX], d[DURATION_MAX];
        int r = 0;

        if (after && parse_timestamp(after, &until) < 0)
                until = 0;
        (void) spec_map_remove(&n->metadata.annotations, AGENT_ANN_REPLACE_AFTER);
        n->status.phase = SPEC_POD_PENDING;
        spec_done(&spec_type_container_state, &cs->last_state);
        cs->last_state = cs->state;
        cs->state = (spec_container_state){};
        cs->restart_count++;
        if (until > now) {
                _cleanup_free_ char *msg = strprintf(
                        "back-off %s restarting failed container=%s pod=%s",
                        format_duration(d, until - now), cs->name, n->metadata.name);
                RET_GATHER(r, spec_map_set(&n->metadata.annotations, AGENT_ANN_START_AFTER,
                                           format_timestamp(when, until)));
                RET_GATHER_PTR(r, msg);
                RET_GATHER(r, agent__set_waiting(cs, "CrashLoopBackOff", msg));
                a->metrics.backoffs++;
        } else {
                (void) spec_map_remove(&n->metadata.annotations, AGENT_ANN_START_AFTER);
                RET_GATHER(r, agent__set_waiting(cs, "ContainerCreating", NULL));
        }
        return r;
}

/* ---- the sync ------------------------------------------------------------------------------ */

static int mark_deleted(agent *a, const spec_pod *p) {
        spec_pod *n = spec_pod_copy(p);

        if (!n)
                return -ENOMEM;
        n->metadata.deletion_timestamp = agent_wall(a);
        n->metadata.deletion_grace_period_seconds = n->spec.termination_grace_period_seconds;
        return store_put(a->store, STORE_POD, n, NULL);
}

/* Brings the pod's status in line with the runtime's view. */
static int reflect(agent *a, const spec_pod *p, pod_rt *pr) {
        _cleanup_(spec_pod_freep) spec_pod *n = NULL;
        spec_container_status *cs;
        bool changed = false;
        usec_t since;
        int r = 0;

        if (!pr->started)
                return 0;
        if (pr->probe_failed && pr->probe_message)
                (void) agent__event(a, STORE_POD, &p->metadata, "Warning", "Unhealthy",
                                    "Readiness probe failed: %s", pr->probe_message);
        pr->probe_failed = false;
        if (p->status.phase == SPEC_POD_RUNNING &&
            spec_get_condition(p->status.conditions, p->status.n_conditions, "Ready") &&
            spec_pod_ready(p, &since) == pr->ready &&
            (!pr->notify_status ||
             streq_ptr(spec_map_get(&p->metadata.annotations, AGENT_ANN_STATUS),
                       pr->notify_status))) {
                pr->probe_dirty = false;
                return 0; /* nothing new: no copy, no write */
        }
        n = spec_pod_copy(p);
        if (!n)
                return -ENOMEM;
        cs = agent__container_status(n);
        if (!cs)
                return -ENOMEM;
        if (pr->started && n->status.phase != SPEC_POD_RUNNING) {
                n->status.phase = SPEC_POD_RUNNING;
                if (!n->status.start_time)
                        n->status.start_time = pr->started_wall;
                if (!n->spec.node_name)
                        RET_GATHER(r, set_placement(a, n, pr->handle));
                RET_GATHER(r, agent__set_running(cs, pr->started_wall));
                cs->started = true;
                RET_GATHER(r, free_and_strdup(&cs->container_id,
                                              a->backend->container_id(pr->handle)));
                RET_GATHER(r, agent__set_image(cs, a->backend->record(pr->handle)));
                RET_GATHER(r, plan_set_condition(&n->status.conditions, &n->status.n_conditions,
                                                 "PodScheduled", "True", NULL, NULL,
                                                 pr->started_wall));
                RET_GATHER(r,
                           plan_set_condition(&n->status.conditions, &n->status.n_conditions,
                                              "Initialized", "True", NULL, NULL, pr->started_wall));
                (void) agent__event(a, STORE_POD, &p->metadata, "Normal", "Started",
                                    "Started container %s", agent__container_name(p));
                changed = true;
        }
        if (pr->started && spec_pod_ready(n, &since) != pr->ready) {
                RET_GATHER(r, set_ready(a, n, pr->ready));
                changed = true;
        } else if (pr->started &&
                   !spec_get_condition(n->status.conditions, n->status.n_conditions, "Ready")) {
                RET_GATHER(r, set_ready(a, n, pr->ready));
                changed = true;
        }
        /* after a restart, the last STATUS= stays until a new one comes */
        if (pr->notify_status &&
            !streq_ptr(spec_map_get(&n->metadata.annotations, AGENT_ANN_STATUS),
                       pr->notify_status)) {
                RET_GATHER(r, spec_map_set(&n->metadata.annotations, AGENT_ANN_STATUS,
                                           pr->notify_status));
                changed = true;
        }
        if (r < 0)
                return r; /* written at the retry: probe_dirty stays */
        pr->probe_dirty = false;
        if (!changed)
                return 0;
        return store_put(a->store, STORE_POD, TAKE_PTR(n), NULL);
}

/* What the planner needs to know of pod p and its process. */
static plan_pod_view pod_view(agent *a, const spec_pod *p, const pod_rt *pr) {
        const spec_owner_ref *o = spec_meta_controller(&p->metadata);
        const spec_probe *lp = p->spec.n_containers ? p->spec.containers[0].liveness_probe : NULL;
        const char *after = spec_map_get(&p->metadata.annotations, AGENT_ANN_START_AFTER);
        usec_t t;

        return (plan_pod_view){
                .orphaned = o && streq_ptr(o->kind, "ReplicaSet") &&
                            !p->metadata.deletion_timestamp &&
                            !agent__replica_set_by_uid(a, p->metadata.namespace, o->uid),
                .terminal = spec_pod_terminal(p),
                .deleting = p->metadata.deletion_timestamp != 0,
                .pending = p->status.phase == SPEC_POD_PENDING,
                .grace = agent__grace(p),
                .probe_grace = lp && lp->termination_grace_period_seconds != SPEC_UNSET64
                                       ? (usec_t) lp->termination_grace_period_seconds *
                                                 USEC_PER_SEC
                                       : agent__grace(p),
                .start_after = after && parse_timestamp(after, &t) >= 0 ? t : 0,
                .now = agent_wall(a),
                .agent_started = a->started,
                .draining = a->draining,
                .watched = pr != NULL,
                .has_process = pr && pr->handle,
                .exited = pr && pr->exited,
                .stopping = pr && pr->stopping,
                .stop_grace = pr ? pr->stop_grace : 0,
                .liveness_failed = pr && pr->liveness_failed,
                .fenced = a->fleet.fenced && a->fleet.fenced(a->fleet.userdata) &&
                          agent__lost_policy(a, p) == PLAN_LOST_FENCE,
        };
}

/* A running pod's configMap and secret volumes, rewritten when what they
 * come from changed (an edit reaches the files, as the kubelet's sync
 * does; subPath mounts keep theirs). One that is gone, not optional, keeps
 * its files. */
static int refresh_volumes(agent *a, const spec_pod *p, pod_rt *pr) {
        _cleanup_free_ char *key = agent__volumes_key(a, p), *why = NULL, *err = NULL;
        _cleanup_(agent__pod_volumes_done) agent_volumes v = {};
        char owner[AGENT_OWNER_MAX];
        rt_pod_params params;
        int r;

        if (!key)
                return -ENOMEM;
        if (streq_ptr(key, pr->volumes_key))
                return 0;
        r = agent__pod_volumes(a, p, &v, &why);
        if (r == -ENOENT) {
                log_warning("pod/%s: its files are left as they were: %s", p->metadata.name,
                            strna(why));
                (void) agent__event(a, STORE_POD, &p->metadata, "Warning", "FailedMount", "%s",
                                    strna(why));
        } else if (r < 0)
                return r;
        else {
                params = agent__pod_params(p, owner);
                params.volumes = v.vols;
                r = a->backend->update_volumes(pr->handle, &params, &err);
                if (r < 0) {
                        log_warning("pod/%s: updating its files: %s", p->metadata.name,
                                    err ?: strerror(-r));
                        (void) agent__event(a, STORE_POD, &p->metadata, "Warning", "FailedMount",
                                            "updating its files: %s", err ?: strerror(-r));
                } else if (r > 0)
                        log_info("pod/%s: %d volume%s updated", p->metadata.name, r,
                                 r == 1 ? "" : "s");
        }
        free(pr->volumes_key);
        pr->volumes_key = TAKE_PTR(key);
        return 0;
}

/* The pod worker: the planner decides the one next step (plan_pod_next());
 * this carries it out. */
int ctl_pod_sync(agent *a, const char *ns, const char *name) {
        const spec_pod *p = store_get(a->store, STORE_POD, ns, name);
        pod_rt *pr;
        plan_pod_view view;
        plan_pod_step step;
        int r;

        if (!p)
                return 0;
        if (!agent__pod_mine(a, p)) {
                /* Another node's (it runs it), or bound to none: the
                 * leader, which made it, removes it when it goes. */
                if (!p->spec.node_name && agent__leads(a) &&
                    (p->metadata.deletion_timestamp || pod_view(a, p, NULL).orphaned))
                        return agent__remove_pod(a, p);
                return 0;
        }
        pr = agent__pod_rt(a, p->metadata.uid);
        if (pr && pr->handle && pr->started && !pr->exited && !pr->stopping &&
            a->backend->update_volumes && agent__pod_has_files(p)) {
                r = refresh_volumes(a, p, pr);
                if (r < 0)
                        return r;
        }
        view = pod_view(a, p, pr);
        step = plan_pod_next(&view);
        switch (step.action) {
        case PLAN_POD_NOTHING:
                return 0;
        case PLAN_POD_REFLECT:
                return reflect(a, p, pr);
        case PLAN_POD_START:
                if (a->fleet.in_etcd && !a->fleet.in_etcd(a->fleet.userdata, p))
                        return 0; /* agent_touch() once etcd has it */
                if (a->short_until > agent_now(a))
                        return wait_for_host(a, p, NULL);
                return begin_start(a, p);
        case PLAN_POD_WAIT_UNTIL:
                agent__enqueue_at_wall(a, STORE_POD, ns, name, step.at);
                return 0;
        case PLAN_POD_STOP:
                r = a->backend->stop(pr->handle, step.grace);
                if (r < 0)
                        return r; /* retried */
                if (step.first)
                        (void) agent__event(a, STORE_POD, &p->metadata, "Normal", "Killing",
                                            "Stopping container %s", agent__container_name(p));
                pr->stopping = true;
                pr->stop_grace = step.grace;
                return 0;
        case PLAN_POD_STOP_LIVENESS:
                r = a->backend->stop(pr->handle, step.grace);
                if (r < 0)
                        return r; /* retried */
                pr->stopping = true;
                (void) agent__event(a, STORE_POD, &p->metadata, "Warning", "Unhealthy",
                                    "Liveness probe failed: %s", strna(pr->liveness_message));
                (void) agent__event(a, STORE_POD, &p->metadata, "Normal", "Killing",
                                    "Container %s failed liveness probe, will be replaced",
                                    agent__container_name(p));
                log_info("pod/%s: liveness probe failed (%s); stopping it", p->metadata.name,
                         strna(pr->liveness_message));
                return 0;
        case PLAN_POD_WRITE_EXIT:
                r = write_exit(a, p, pr);
                /* Forget the process only once its exit is written: if the
                 * write fails, the retry writes it again. */
                if (r >= 0)
                        agent__pod_rt_drop(a, p->metadata.uid);
                return r;
        case PLAN_POD_FORGET:
                agent__pod_rt_drop(a, p->metadata.uid);
                return 0;
        case PLAN_POD_REMOVE:
                return agent__remove_pod(a, p);
        case PLAN_POD_MARK_DELETED:
                return mark_deleted(a, p);
        case PLAN_POD_MARK_LOST:
                return agent__mark_lost(a, p, "its process is not watched");
        case PLAN_POD_FENCE:
                r = a->backend->stop(pr->handle, step.grace);
                if (r < 0)
                        return r;
                pr->stopping = true;
                pr->stop_grace = step.grace;
                log_warning("pod/%s: this node is cut off from etcd: stopping it before its "
                            "lease can expire (%s: fence)",
                            p->metadata.name, SPEC_ANN_NODE_LOST_POLICY);
                (void) agent__event(a, STORE_POD, &p->metadata, "Warning", "Fenced",
                                    "Stopping container %s: the node is cut off from etcd (%s: "
                                    "fence)",
                                    agent__container_name(p), SPEC_ANN_NODE_LOST_POLICY);
                return 0;
        default:
                return -EINVAL; /* a step the planner does not make */
        }
}

/* ---- draining (tendd --stop-pods-on-exit) ---------------------------------------------------- */

int agent_drain(agent *a, usec_t *ret_max_grace) {
        const void *const *items;
        size_t n = store_list(a->store, STORE_POD, &items);
        int ret = 0;

        a->draining = true;
        *ret_max_grace = 0;
        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                pod_rt *pr = agent__pod_rt(a, p->metadata.uid);
                int r;

                if (!pr || !pr->handle || pr->stopping || pr->exited)
                        continue;
                r = a->backend->stop(pr->handle, agent__grace(p));
                if (r < 0) {
                        ret = r;
                        continue;
                }
                pr->stopping = true;
                pr->stop_grace = agent__grace(p);
                *ret_max_grace = MAX(*ret_max_grace, pr->stop_grace);
                (void) agent__event(a, STORE_POD, &p->metadata, "Normal", "Killing",
                                    "Stopping container %s: tendd stops its pods to exit",
                                    agent__container_name(p));
        }
        (void) store_commit(a->store, false);
        return ret;
}

size_t agent_live_pods(agent *a) {
        const char *k;
        void *v;
        size_t n = 0;

        for (size_t i = 0; tend_hashmap_next(a->pods, &i, &k, &v);) {
                const pod_rt *pr = v;
                if (pr->handle && !pr->exited)
                        n++;
        }
        return n;
}

void agent_pod_counts(agent *a, size_t *ret_running, size_t *ret_total) {
        const void *const *items;
        size_t n = store_list(a->store, STORE_POD, &items), running = 0, total = 0;

        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                if (!agent__pod_mine(a, p))
                        continue; /* another node's */
                total++;
                running += p->status.phase == SPEC_POD_RUNNING;
        }
        *ret_running = running;
        *ret_total = total;
}

int agent_fenced_pods(agent *a, agent_fenced **ret, size_t *ret_n) {
        const void *const *items;
        size_t n = store_list(a->store, STORE_POD, &items), k = 0;
        _cleanup_free_ agent_fenced *v = NULL;

        *ret = NULL;
        *ret_n = 0;
        if (!agent__fleet(a))
                return 0;
        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                const pod_rt *pr;
                const rt_record *rec;
                if (!agent__pod_mine(a, p) || agent__lost_policy(a, p) != PLAN_LOST_FENCE)
                        continue;
                pr = agent__pod_rt(a, p->metadata.uid);
                rec = pr && pr->handle && !pr->exited && a->backend->record
                              ? a->backend->record(pr->handle)
                              : NULL;
                if (!rec || rec->pid <= 0)
                        continue; /* not running, or a unit (systemd stops its own) */
                if (!v && !(v = new0(agent_fenced, n)))
                        return -ENOMEM;
                v[k++] = (agent_fenced){ .pid = rec->pid,
                                         .start_time = rec->start_time,
                                         .grace = agent__grace(p) };
        }
        *ret = TAKE_PTR(v);
        *ret_n = k;
        return 0;
}
