/* SPDX-License-Identifier: MIT */

/*
 * What the agent asks of the fleet (agent_fleet: who leads, the nodes, what
 * etcd has), and the leader's node lifecycle: lost nodes, their pods
 * evicted, the fence, and etcd's compaction (docs/fleet.md §3.7).
 */

#include "mirror.h"

/* ---- the agent's view of the fleet (agent_fleet) ------------------------------------------- */

void fleet__sched_free(fleet *f) {
        for (size_t i = 0; f->life.sched_labels && i < f->life.n_sched_labels; i++)
                spec_map_done(&f->life.sched_labels[i]);
        free(f->life.sched_labels);
        free(f->life.sched);
        f->life.sched_labels = NULL;
        f->life.sched = NULL;
}

bool fleet_agent_leading(void *userdata) {
        fleet *f = *(fleet **) userdata;
        bool leads = f && f->joined && fleet__agent_leads(f);

        if (f && leads != f->life.agent_leading)
                fleet__schedule_flush(f, 0); /* its settle tells the agent: a resync */
        return leads;
}

size_t fleet_agent_nodes(void *userdata, const plan_node **ret) {
        fleet *f = *(fleet **) userdata;
        const char *key;
        void *v;
        size_t n = 0;

        *ret = NULL;
        if (!f)
                return 0;
        fleet__sched_free(f);
        f->life.sched = new0(plan_node, tend_hashmap_size(f->nd.map) + 1);
        f->life.sched_labels = new0(spec_map, tend_hashmap_size(f->nd.map) + 1);
        f->life.n_sched_labels = f->life.sched_labels ? tend_hashmap_size(f->nd.map) + 1 : 0;
        if (!f->life.sched || !f->life.sched_labels)
                return 0;
        for (size_t i = 0; tend_hashmap_next(f->nd.map, &i, &key, &v);) {
                const fnode *fn = v;
                const char *cap = json_string_value(json_object_get(
                        json_object_get(json_object_get(fn->node, "status"), "capacity"), "pods"));
                int64_t c = 0;
                if (!fn->node)
                        continue;
                if (cap && safe_atoi64(cap, &c) < 0)
                        c = 0;
                json_t *labels = json_object_get(json_object_get(fn->node, "metadata"), "labels");
                const char *lk;
                json_t *lv;
                json_object_foreach (labels, lk, lv)
                        if (json_is_string(lv) &&
                            spec_map_set(&f->life.sched_labels[n], lk, json_string_value(lv)) < 0)
                                return 0; /* out of memory: no node fits, for now */
                f->life.sched[n] = (plan_node){
                        .name = fn->name,
                        .ready = fn->holder != NULL,
                        .unschedulable = json_is_true(json_object_get(
                                json_object_get(fn->node, "spec"), "unschedulable")),
                        .capacity = (int32_t) MIN(MAX(c, 0), INT32_MAX),
                        .labels = &f->life.sched_labels[n],
                };
                n++;
        }
        *ret = f->life.sched;
        return n;
}

bool fleet_agent_in_etcd(void *userdata, const spec_pod *p) {
        fleet *f = *(fleet **) userdata;
        fobj *o = f && f->m.objs ? fleet__fobj_get(f, STORE_POD, p->metadata.namespace,
                                                   p->metadata.name, false)
                                 : NULL;
        if (o && o->main)
                return true;
        if (f && f->listed_lease)
                return false; /* the mirror is listed: etcd has it not */
        /* not mirrored yet (etcd away since this tendd started): a pod that
         * ran here was bound here by etcd, and restarts in place (§3.9) */
        return p->status.start_time ||
               (p->status.n_container_statuses && p->status.container_statuses[0].container_id);
}

bool fleet_agent_node_lost(void *userdata, const char *node) {
        fleet *f = *(fleet **) userdata;
        const fnode *n = f ? tend_hashmap_get(f->nd.map, node) : NULL;
        return n && !n->holder;
}

/* ---- the leader's node lifecycle (docs/fleet.md §3.7)
 * -------------------------------------------- */

/* Cut off from etcd long enough that pods under fence stop (docs/fleet.md
 * §3.10): the lease could expire a margin from now (a TTL after the last
 * acknowledged keepalive was sent), or it is a new one and the mirror has
 * not caught up with it yet (what the leader did meanwhile is not known).
 * At start, before the first join, a TTL less the margin after it began. */
static bool is_fenced(fleet *f) {
        usec_t now = now_monotonic(), ttl = (usec_t) f->c.ttl * USEC_PER_SEC;

        if (!f->ever_joined)
                return plan_fence(PLAN_LOST_FENCE, f->join_started, ttl, now);
        /* a new lease: what the leader did meanwhile is known once the
         * mirror has caught up with the claim of the name on it */
        if (!f->session || (f->listed_lease != f->lease &&
                            (f->claimed_lease != f->lease || f->revision < f->claim_revision)))
                return true;
        return plan_fence(PLAN_LOST_FENCE,
                          etcd_session_safe_until(f->session) -
                                  MIN(ttl, etcd_session_safe_until(f->session)),
                          ttl, now);
}

usec_t fleet_fence_at(fleet *f) {
        usec_t until = f && f->session ? etcd_session_safe_until(f->session) : 0;

        /* (a new lease not yet caught up with: the time told before stays) */
        if (!until || until <= PLAN_FENCE_MARGIN || is_fenced(f))
                return 0;
        return until - PLAN_FENCE_MARGIN;
}

bool fleet_agent_fenced(void *userdata) {
        fleet *f = *(fleet **) userdata;
        return f && is_fenced(f);
}

static void on_compacted(const etcd_result *r, void *userdata) {
        if (r->error < 0 && !(r->message && strstr(r->message, "compacted")))
                log_warning("fleet: compacting etcd: %s", strna(r->message));
}

/* The leader compacts etcd's history (kube-apiserver does it every 5
 * minutes), or every write would be kept until etcd's space runs out: to
 * the revision the mirror had an interval ago, so that a watch lagging
 * less than that goes on without a relist. */
static void compact(fleet *f, usec_t now) {
        if (!f->c.compaction || !fleet__agent_leads(f) || !f->e) {
                f->life.compact_at = 0;
                return;
        }
        if (f->life.compact_at && now < f->life.compact_at)
                return;
        if (f->life.compact_at && f->life.compact_rev > 0)
                (void) etcd_compact(f->e, f->life.compact_rev, on_compacted, f);
        f->life.compact_rev = f->revision;
        f->life.compact_at = now + f->c.compaction;
}

static void on_lifecycle(uv_timer_t *t) {
        fleet *f = t->data;
        bool fenced = is_fenced(f);

        if (f->acks.waiters) /* their deadlines, whatever etcd does */
                fleet__check_waiters(f);

        if (fenced != f->life.fenced && f->c.agent) {
                f->life.fenced = fenced;
                log_info("fleet: %s",
                         fenced ? "cut off from etcd: pods under tend.io/node-lost-policy: "
                                  "fence stop"
                                : "back in touch with etcd: pods under fence may run");
                agent_fleet_changed(f->c.agent);
        }
        usec_t now = now_monotonic();
        size_t n = tend_hashmap_size(f->nd.map), k = 0, held = 0, n_pods;
        _cleanup_free_ plan_node_state *st = new0(plan_node_state, n + 1);
        _cleanup_free_ plan_node_verdict *v = new0(plan_node_verdict, n + 1);
        _cleanup_strv_free_ char **unknown = NULL;
        const void *const *pods;
        const char *key;
        void *val;
        plan_fleet_view view;

        compact(f, now);
        if (!f->c.agent || !f->joined || !fleet__agent_leads(f) || !st || !v)
                return;
        for (size_t i = 0; tend_hashmap_next(f->nd.map, &i, &key, &val) && k < n;) {
                const fnode *fn = val;
                /* a new leader starts the clocks at its takeover */
                st[k++] = (plan_node_state){ .name = fn->name,
                                             .live = fn->holder != NULL,
                                             .lost_since = MAX(fn->lost_mono, f->el.since) };
        }
        view = plan_node_lifecycle(st, k, now, f->c.lost_after, PLAN_FLEET_DISRUPTION, f->el.since,
                                   (usec_t) f->c.ttl * USEC_PER_SEC, v);
        for (size_t i = 0; i < k; i++)
                if (v[i] == PLAN_NODE_EVICT)
                        (void) agent_evict_node(f->c.agent, st[i].name, false,
                                                now - MIN(st[i].lost_since, now));
                else if (v[i] == PLAN_NODE_HOLD)
                        held++;
        if (view.disrupted && held && !f->life.disrupted)
                log_warning("fleet: %zu of %zu nodes lost their leases together (or this node "
                            "leads since less than a TTL): evicting nothing until they come back "
                            "(FleetDisruption)",
                            held, k);
        f->life.disrupted = view.disrupted && held;
        /* pods of a node that was deleted (no Node, no lease): removed */
        n_pods = store_list(f->m.store, STORE_POD, &pods);
        for (size_t i = 0; i < n_pods; i++) {
                const char *node = ((const spec_pod *) pods[i])->spec.node_name;
                if (node && !tend_hashmap_get(f->nd.map, node) && !strv_contains(unknown, node))
                        (void) strv_extend(&unknown, node);
        }
        for (size_t i = 0; unknown && unknown[i]; i++)
                (void) agent_evict_node(f->c.agent, unknown[i], true, 0);
}

void fleet__lifecycle_start(fleet *f) {
        uv_timer_start(&f->life.timer, on_lifecycle, 500, 500);
}
