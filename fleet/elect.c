/* SPDX-License-Identifier: MIT */

/*
 * The election (docs/fleet.md §3.5): the leader key, created on a node's session
 * lease; one node leads at a time, and only while its lease is certainly
 * alive.
 */

#include <inttypes.h>
#include <unistd.h>

#include "fleet-internal.h"

/* Leading begins and ends here: said at info, and at debug with the
 * monotonic time (one clock for every tendd of a machine: the tests check
 * that no two lead at once). */
static void start_leading(fleet *f, int64_t fence) {
        if (!f->el.leading) {
                f->el.since = now_monotonic();
                log_info("fleet: this node leads the fleet (fencing revision %" PRId64 ")", fence);
                log_debug("fleet: leading from monotonic %" PRIu64, (uint64_t) now_monotonic());
        }
        f->el.leading = true;
        f->el.fence = fence;
}

void fleet__stop_leading(fleet *f, const char *why) {
        if (!f->el.leading)
                return;
        f->el.leading = false;
        f->el.fence = 0;
        log_warning("fleet: this node no longer leads the fleet: %s", why);
        log_debug("fleet: leading until monotonic %" PRIu64, (uint64_t) now_monotonic());
}

static void on_elect(uv_timer_t *t) {
        fleet__campaign(t->data);
}

/* The leader key changed (value NULL: gone): who leads; a fleet__campaign when
 * nobody does, soon (0-100 ms: not all at once). */
void fleet__leader_seen(fleet *f, const etcd_kv *kv) {
        _cleanup_(json_decrefp) json_t *j = kv ? etcd_kv_json(kv) : NULL;
        const char *name = json_string_value(json_object_get(j, "node"));

        /* on this node's live lease: it leads (a restart that resumed its lease) */
        if (kv && !f->c.no_leader && f->session && etcd_session_lease(f->session) &&
            kv->lease == etcd_session_lease(f->session))
                start_leading(f, kv->create_revision);
        if (!streq_ptr(name, f->el.leader)) {
                free(f->el.leader);
                f->el.leader = name ? strdup(name) : NULL;
                if (!streq_ptr(name, f->node_name))
                        fleet__stop_leading(f,
                                            name ? "another node does" : "its leader key is gone");
                if (name && !streq(name, f->node_name))
                        log_info("fleet: node/%s leads the fleet", name);
        }
        if (!name && f->joined && !f->c.no_leader && !f->closing)
                uv_timer_start(&f->el.timer, on_elect, (uint64_t) (now_monotonic() % 100), 0);
}

/* ---- campaigning ------------------------------------------------------------------------------
 */

static void on_campaign(const etcd_result *r, void *userdata) {
        fleet *f = userdata;

        f->el.campaigning = false;
        if (r->error < 0) {
                f->el.again = false;
                log_warning("fleet: campaigning to lead: %s; trying again", strna(r->message));
                uv_timer_start(&f->el.timer, on_elect, 1000, 0);
                return;
        }
        bool ours = f->session && etcd_session_lease(f->session) == f->lease && f->lease;
        if (ours && (r->succeeded || (r->n_kvs > 0 && r->kvs[0].lease == f->lease))) {
                /* won, or ours already: a restart that resumed the lease */
                start_leading(f, r->succeeded ? r->revision : r->kvs[0].create_revision);
                free(f->el.leader);
                f->el.leader = strdup(f->node_name);
                return;
        }
        /* Who holds it, unless the watch has told of a later state already
         * (a DELETE after this answer was made: then fleet__campaign again). */
        if (r->n_kvs > 0 && r->revision >= f->revision)
                fleet__leader_seen(f, &r->kvs[0]);
        else if (!f->el.leader || r->n_kvs == 0)
                f->el.again = true;
        if (f->el.again) {
                f->el.again = false;
                if (!f->el.leader)
                        uv_timer_start(&f->el.timer, on_elect, 0, 0);
        }
}

/* Leads if nobody does: the leader key, created on this node's lease
 * (docs/fleet.md §3.5). Every leader write will carry compare
 * CREATE(leader) == fence: a deposed leader's writes are refused. */
void fleet__campaign(fleet *f) {
        _cleanup_(json_decrefp) json_t *v = NULL;
        _cleanup_free_ char *value = NULL;
        char now[TIMESTAMP_MAX];

        if (f->el.campaigning) {
                f->el.again = true;
                return;
        }
        if (f->c.no_leader || f->closing || !fleet__session_live(f))
                return;
        format_timestamp(now, now_realtime());
        v = json_pack("{s:s, s:I, s:s}", "node", f->node_name, "pid", (json_int_t) getpid(),
                      "since", now);
        value = v ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        if (value &&
            etcd_txn(f->e, json_pack("[o]", etcd_cmp_revision(f->el.key, "create", "EQUAL", 0)),
                     json_pack("[o]", etcd_op_put(f->el.key, value, strlen(value), f->lease)),
                     json_pack("[o]", etcd_op_range(f->el.key, NULL)), on_campaign, f) >= 0)
                f->el.campaigning = true;
        else
                uv_timer_start(&f->el.timer, on_elect, 1000, 0);
}

bool fleet__agent_leads(fleet *f) {
        int64_t fence;
        return fleet_leading(f, &fence) && f->revision >= fence;
}

bool fleet_leading(const fleet *f, int64_t *ret_fence) {
        /* only while the lease is certainly alive: past that, another node
         * may lead already */
        bool leading = f->el.leading && f->session &&
                       now_monotonic() < etcd_session_safe_until(f->session);

        if (ret_fence)
                *ret_fence = leading ? f->el.fence : 0;
        return leading;
}
