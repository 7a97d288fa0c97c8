/* SPDX-License-Identifier: MIT */

/*
 * Fleet membership (see tend/fleet.h): the join, the session, the mirror of the
 * nodes, leaving. Everything goes through tend_etcd on the loop: the join
 * is a chain of calls (schema → session → claim → Node → list → watch),
 * each answer starting the next; after it, the session keeps the lease
 * alive and the watch keeps the mirror. The election is elect.c, the
 * nodes as the API shows them nodes.c, the objects mirror.c.
 */

#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fleet-internal.h"

static void join_failed(fleet *f, int error, const char *fmt, ...) _printf_(3, 4);

/* ---- small things ---------------------------------------------------------------------------- */

static void on_later(uv_timer_t *t) {
        later *l = t->data;
        void (*fn)(fleet *) = l->fn;

        l->fn = NULL;
        if (fn && !l->f->closing)
                fn(l->f);
}

static void later_in(later *l, void (*fn)(fleet *f), uint64_t msec) {
        l->fn = fn;
        uv_timer_start(&l->timer, on_later, msec, 0);
}

/* The join's next step (schema, session, claim, Node), again. */
static void retry_in(fleet *f, void (*fn)(fleet *f), uint64_t msec) {
        later_in(&f->retry, fn, msec);
}

/* The mirror's (list, watch), again. */
static void remirror_in(fleet *f, void (*fn)(fleet *f), uint64_t msec) {
        later_in(&f->remirror, fn, msec);
}

static char *lease_hex(int64_t lease) {
        return strprintf("%" PRIx64, (uint64_t) lease);
}

/* The last run's lease, if it was this node's in this fleet. */
static int64_t load_lease(fleet *f) {
        _cleanup_free_ char *data = NULL;
        _cleanup_(json_decrefp) json_t *j = NULL;
        size_t n;
        uint64_t lease = 0;

        if (read_full_file(f->state_file, 4096, &data, &n) < 0 ||
            !(j = json_loadb(data, n, 0, NULL)))
                return 0;
        if (!streq_ptr(json_string_value(json_object_get(j, "node")), f->node_name) ||
            !streq_ptr(json_string_value(json_object_get(j, "prefix")), f->prefix))
                return 0;
        if (sscanf(strempty(json_string_value(json_object_get(j, "lease"))), "%" SCNx64, &lease) !=
            1)
                return 0;
        return (int64_t) lease;
}

/* Written whole or not at all (a rename), so a crash leaves the old or the new. */
static void save_lease(fleet *f) {
        _cleanup_free_ char *hex = lease_hex(f->lease), *tmp = strprintf("%s.tmp", f->state_file);
        _cleanup_(json_decrefp) json_t *j = json_pack("{s:s, s:s, s:s?}", "node", f->node_name,
                                                      "prefix", f->prefix, "lease", hex);
        FILE *out;
        bool ok;

        if (!j || !tmp || !(out = fopen(tmp, "we"))) {
                log_warning("fleet: cannot write %s: %m (a restart will take a new lease)",
                            f->state_file);
                return;
        }
        ok = json_dumpf(j, out, JSON_COMPACT) == 0 && fflush(out) == 0 && fsync(fileno(out)) == 0;
        ok = fclose(out) == 0 && ok;
        if (!ok || rename(tmp, f->state_file) < 0) {
                log_warning("fleet: cannot write %s: %m (a restart will take a new lease)",
                            f->state_file);
                (void) unlink(tmp);
        }
}

/* ---- the mirror of the nodes ------------------------------------------------------------------
 */

/* Applies one key of P/v1/ (value NULL: deleted). */
void fleet__mirror_apply(fleet *f, const etcd_kv *kv, bool deleted) {
        if (streq(kv->key, f->el.key)) {
                fleet__leader_seen(f, deleted ? NULL : kv);
                return;
        }
        if (f->m.objs && (fleet__objects_key(f, kv, deleted) || fleet__events_key(f, kv, deleted)))
                return;
        (void) fleet__nodes_key(f, kv, deleted);
}

static void watch_start(fleet *f);
static void list(fleet *f);

static void on_watch_events(const etcd_event *ev, size_t n, int64_t revision, void *userdata) {
        fleet *f = userdata;

        for (size_t i = 0; i < n; i++)
                fleet__mirror_apply(f, &ev[i].kv, ev[i].deleted);
        f->revision = MAX(f->revision, revision);
        fleet__objects_settle(f);
}

static void on_watch_end(int error, const char *message, int64_t compact_revision, void *userdata) {
        fleet *f = userdata;

        f->watch = NULL;
        if (f->closing)
                return;
        log_warning("fleet: the watch of %s ended (%s); listing again", f->p_all, strna(message));
        remirror_in(f, list, error == -ERANGE ? 0 : 1000);
}

static void watch_start(fleet *f) {
        _cleanup_free_ char *end = etcd_prefix_end(f->p_all);

        etcd_watch_cancel(f->watch); /* one at a time (two lists may cross) */
        f->watch = NULL;
        int r = end ? etcd_watch_start(f->e, f->p_all, end, f->revision + 1, on_watch_events,
                                       on_watch_end, f, &f->watch)
                    : -ENOMEM;
        if (r < 0) {
                log_warning_errno(r, "fleet: cannot watch %s: %m; trying again", f->p_all);
                remirror_in(f, watch_start, 1000);
        }
}

/* A relist is a whole snapshot: what the mirror has and it lacks went
 * while the watch was down, and is told as a deletion (so a node's
 * "since", and the log, change only for what did change). */
static void mirror_forget_missing(fleet *f, const etcd_result *r) {
        _cleanup_(tend_hashmap_freep) tend_hashmap *present = tend_hashmap_new();
        size_t n = tend_hashmap_size(f->nd.map), k = 0;
        _cleanup_strv_free_ char **names = new0(char *, n + 1);
        const char *key;
        void *v;

        if (!present || !names) {
                fleet__nodes_clear(f); /* out of memory: start over */
                return;
        }
        for (size_t i = 0; i < r->n_kvs; i++)
                (void) tend_hashmap_put(present, r->kvs[i].key, (void *) 1, NULL);
        for (size_t i = 0; tend_hashmap_next(f->nd.map, &i, &key, &v);)
                if (k < n && (names[k] = strdup(key)))
                        k++;
        for (size_t i = 0; i < k; i++) {
                _cleanup_free_ char *kn = strprintf("%s%s", f->p_nodes, names[i]),
                                    *kl = strprintf("%s%s", f->p_leases, names[i]);
                fnode *fn = fleet__node(f, names[i], false);
                if (fn && fn->node && kn && !tend_hashmap_get(present, kn))
                        fleet__mirror_apply(f, &(etcd_kv){ .key = kn }, true);
                fn = fleet__node(f, names[i], false);
                if (fn && fn->holder && kl && !tend_hashmap_get(present, kl))
                        fleet__mirror_apply(f, &(etcd_kv){ .key = kl }, true);
        }
}

static void on_list(const etcd_result *r, void *userdata) {
        fleet *f = userdata;

        if (f->failed) /* the join gave up meanwhile: main is closing it */
                return;
        if (r->error < 0) {
                if (!f->joined && now_monotonic() > f->join_started + JOIN_PATIENCE) {
                        join_failed(f, r->error, "listing %s in etcd: %s", f->p_all,
                                    strna(r->message));
                        return;
                }
                log_warning("fleet: listing %s: %s; trying again", f->p_all, strna(r->message));
                remirror_in(f, list, 1000);
                return;
        }
        mirror_forget_missing(f, r);
        if (f->m.objs)
                fleet__objects_relisted(f, r);
        bool has_leader = false;
        for (size_t i = 0; i < r->n_kvs; i++) {
                fleet__mirror_apply(f, &r->kvs[i], false);
                has_leader = has_leader || streq(r->kvs[i].key, f->el.key);
        }
        f->revision = r->revision;
        f->listed_lease = f->lease;
        watch_start(f);
        if (!f->joined) {
                fnode *me = fleet__node(f, f->node_name, false);
                f->joined = f->ever_joined = true;
                log_info("fleet: joined as node/%s (lease %" PRIx64 "); %zu node%s in the fleet",
                         f->node_name, (uint64_t) f->lease, tend_hashmap_size(f->nd.map),
                         tend_hashmap_size(f->nd.map) == 1 ? "" : "s");
                if (me)
                        me->since = now_realtime();
                f->on_joined(0, NULL, f->userdata);
        }
        if (!has_leader)
                fleet__leader_seen(f, NULL); /* nobody leads: a fleet__campaign */
        fleet__objects_settle(f);
}

/* The whole of P/v1/ at one revision, but of the events only the newest
 * FLEET_EVENTS_LISTED: they are not declared state, and a fleet's hour of
 * them would make the answer too large to take. */
static void list(fleet *f) {
        _cleanup_free_ char *end = etcd_prefix_end(f->p_all),
                            *ev_end = etcd_prefix_end(f->p_events);

        if (f->watch) {
                etcd_watch_cancel(f->watch);
                f->watch = NULL;
        }
        if (!end || !ev_end ||
            etcd_txn(f->e, json_array(),
                     json_pack("[o, o, o]", etcd_op_range(f->p_all, f->p_events),
                               etcd_op_range_newest(f->p_events, ev_end, FLEET_EVENTS_LISTED),
                               etcd_op_range(ev_end, end)),
                     json_array(), on_list, f) < 0)
                remirror_in(f, list, 1000);
}

/* ---- joining ----------------------------------------------------------------------------------
 */

static void join_failed(fleet *f, int error, const char *fmt, ...) {
        _cleanup_free_ char *why = NULL;
        va_list ap;

        if (f->joined || f->failed)
                return;
        f->failed = true;
        va_start(ap, fmt);
        if (vasprintf(&why, fmt, ap) < 0)
                why = NULL;
        va_end(ap);
        f->on_joined(error, why ?: "out of memory", f->userdata);
}

/* An https:// etcd that wants a client certificate, given none, drops the
 * connection ("Failed sending data to the peer"): say what may be missing. */
static const char *client_cert_hint(const fleet *f) {
        return !f->c.cert_file && startswith(f->endpoints[0], "https://")
                       ? " (an etcd with --client-cert-auth wants --etcd-cert and --etcd-key)"
                       : "";
}

/* A call of the join that etcd did not answer: again in a second, for a
 * while (etcd may be starting); then the join fails with why. */
static bool join_patience(fleet *f, const etcd_result *r, void (*again)(fleet *f),
                          const char *what) {
        if (r->error >= 0)
                return false;
        if (f->joined) {
                log_warning("fleet: %s: %s; trying again", what, strna(r->message));
                retry_in(f, again, 1000);
                return true;
        }
        if (r->error == -EACCES) { /* a certificate, a password: waiting will not help */
                join_failed(f, r->error, "%s: %s%s", what, strna(r->message),
                            strstr(strempty(r->message), "certificate")
                                    ? " (--etcd-cacert: the CA that signed etcd's certificate; "
                                      "--etcd-cert: one without a CommonName, which etcd's "
                                      "gateway refuses)"
                            : strstr(strempty(r->message), "permission denied")
                                    ? " (--etcd-user needs a role with readwrite on the "
                                      "fleet's prefix, e.g. etcdctl role grant-permission ROLE "
                                      "--prefix=true readwrite /tend/)"
                                    : "");
                return true;
        }
        if (now_monotonic() > f->join_started + JOIN_PATIENCE) {
                _cleanup_buf_ tend_buf eps = TEND_BUF_INIT(4096);
                for (char **e = f->endpoints; *e; e++)
                        (void) tend_buf_addf(&eps, "%s%s", eps.len ? ", " : "", *e);
                join_failed(f, r->error,
                            "%s: etcd (%s) did not answer for %llds: %s; is etcd running, and "
                            "are the --fleet URLs right?%s",
                            what, strna(tend_buf_str(&eps)),
                            (long long) (JOIN_PATIENCE / USEC_PER_SEC), strna(r->message),
                            client_cert_hint(f));
                return true;
        }
        log_info("fleet: %s: %s; trying again", what, strna(r->message));
        retry_in(f, again, 1000);
        return true;
}

static void put_node(fleet *f);

static void join_timeout(fleet *f) {
        _cleanup_buf_ tend_buf eps = TEND_BUF_INIT(4096);

        if (f->joined || f->failed)
                return;
        if (f->refusal) { /* refused, and the revoke did not answer in time */
                join_failed(f, -EADDRINUSE, "%s", f->refusal);
                return;
        }
        for (char **e = f->endpoints; *e; e++)
                (void) tend_buf_addf(&eps, "%s%s", eps.len ? ", " : "", *e);
        join_failed(f, -ETIMEDOUT,
                    "joining took longer than %llds: etcd (%s) does not answer%s; is etcd "
                    "running, and are the --fleet URLs right?%s",
                    (long long) ((JOIN_PATIENCE + (usec_t) f->c.ttl * USEC_PER_SEC) / USEC_PER_SEC),
                    tend_buf_str(&eps), f->session ? " (last step: the session lease)" : "",
                    client_cert_hint(f));
}

/* The Node as this tendd says it is: the host's facts, its --node-labels,
 * and what the fleet set (uid, creation time, spec.unschedulable). */
static json_t *my_node(fleet *f, json_t *stored) {
        json_t *node = spec_host_node(f->node_name, f->labels), *m, *sm;
        char uid[37];

        if (!node)
                return NULL;
        m = json_object_get(node, "metadata");
        sm = json_object_get(stored, "metadata");
        json_t *old_uid = json_object_get(sm, "uid"),
               *created = json_object_get(sm, "creationTimestamp");
        char now[TIMESTAMP_MAX];

        /* The first join's uid and time stay; so does a cordon. */
        format_timestamp(now, now_realtime());
        if (json_object_set_new(m, "uid",
                                old_uid ? json_incref(old_uid) : json_string(store_new_uid(uid))) <
                    0 ||
            json_object_set_new(m, "creationTimestamp",
                                created ? json_incref(created) : json_string(now)) < 0)
                return json_decref(node), NULL;
        if (json_is_true(json_object_get(json_object_get(stored, "spec"), "unschedulable")))
                json_object_set_new(json_object_get(node, "spec"), "unschedulable", json_true());
        return node;
}

static void on_put_node(const etcd_result *r, void *userdata) {
        fleet *f = userdata;

        if (join_patience(f, r, put_node, "writing the Node"))
                return;
        if (!r->succeeded) { /* changed meanwhile (a cordon): again, from it */
                put_node(f);
                return;
        }
        if (!f->joined)
                list(f);
        else
                fleet__campaign(f); /* joined again after a lost session */
}

static void on_read_node(const etcd_result *r, void *userdata) {
        fleet *f = userdata;
        _cleanup_(json_decrefp) json_t *stored = NULL, *node = NULL;
        _cleanup_free_ char *value = NULL;
        int64_t mod = 0;

        if (join_patience(f, r, put_node, "reading the Node"))
                return;
        if (r->n_kvs > 0) {
                stored = json_loadb(r->kvs[0].value, r->kvs[0].value_len, 0, NULL);
                mod = r->kvs[0].mod_revision;
        }
        node = my_node(f, stored);
        value = node ? json_dumps(node, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        if (!value ||
            etcd_txn(f->e, json_pack("[o]", etcd_cmp_revision(f->k_node, "mod", "EQUAL", mod)),
                     json_pack("[o]", etcd_op_put(f->k_node, value, strlen(value), 0)),
                     json_array(), on_put_node, f) < 0)
                join_failed(f, -ENOMEM, "writing the Node: out of memory");
}

static void put_node(fleet *f) {
        if (etcd_range(f->e, f->k_node, NULL, on_read_node, f) < 0)
                join_failed(f, -ENOMEM, "reading the Node: out of memory");
}

static void claim(fleet *f);

/* The value of the name's key: who holds it (new string; NULL: no memory). */
static char *holder_value(fleet *f) {
        _cleanup_free_ char *hex = lease_hex(f->lease);
        _cleanup_(json_decrefp) json_t *v = NULL;
        char now[TIMESTAMP_MAX];

        format_timestamp(now, now_realtime());
        v = json_pack("{s:s, s:s?, s:I, s:s, s:s, s:s}", "node", f->node_name, "leaseID", hex,
                      "pid", (json_int_t) getpid(), "host", f->hostname, "bootID", f->boot_id,
                      "startedAt", now);
        return v ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
}

/* Whether the holder of the name is this host's earlier tendd, gone. */
static bool holder_is_gone(fleet *f, json_t *holder) {
        int64_t pid = json_integer_value(json_object_get(holder, "pid"));

        return streq_ptr(json_string_value(json_object_get(holder, "host")), f->hostname) &&
               streq_ptr(json_string_value(json_object_get(holder, "bootID")), f->boot_id) &&
               pid > 0 && kill((pid_t) pid, 0) < 0 && errno == ESRCH;
}

static void on_reclaimed(const etcd_result *r, void *userdata) {
        fleet *f = userdata;

        if (!join_patience(f, r, claim, "claiming the node name") && fleet__session_live(f))
                put_node(f);
}

static void on_refused_revoked(const etcd_result *r, void *userdata) {
        fleet *f = userdata;

        join_failed(f, -EADDRINUSE, "%s", strna(f->refusal));
}

static void on_claim(const etcd_result *r, void *userdata) {
        fleet *f = userdata;
        _cleanup_(json_decrefp) json_t *holder = NULL;

        if (join_patience(f, r, claim, "claiming the node name"))
                return;
        if (r->succeeded) {
                /* the mirror knows what happened meanwhile once it has seen this */
                f->claim_revision = r->revision;
                f->claimed_lease = f->lease;
                put_node(f);
                return;
        }
        if (r->n_kvs == 0) { /* gone between the compare and the read */
                claim(f);
                return;
        }
        holder = json_loadb(r->kvs[0].value, r->kvs[0].value_len, 0, NULL);
        if (r->kvs[0].lease == f->lease) {
                /* Ours: a restart that resumed the lease. Say who we are now. */
                _cleanup_free_ char *value = holder_value(f);
                if (!value ||
                    etcd_put(f->e, f->k_lease, value, strlen(value), f->lease, on_reclaimed, f) < 0)
                        join_failed(f, -ENOMEM, "claiming the node name: out of memory");
                return;
        }
        if (holder_is_gone(f, holder)) {
                log_info("fleet: node name %s is still held by this host's earlier tendd (pid "
                         "%" PRId64 "), which is gone; waiting for its lease to expire",
                         f->node_name,
                         (int64_t) json_integer_value(json_object_get(holder, "pid")));
                retry_in(f, claim, 1000);
                return;
        }
        if (f->joined) {
                log_error("fleet: node name %s was taken by another tendd (pid %" PRId64
                          " on %s) while this one was cut off: stop one of them",
                          f->node_name,
                          (int64_t) json_integer_value(json_object_get(holder, "pid")),
                          strna(json_string_value(json_object_get(holder, "host"))));
                retry_in(f, claim, (uint64_t) f->c.ttl * 1000);
                return;
        }
        /* Refused: the lease this run took holds nothing; it goes now rather
         * than linger a TTL (and with it what a restart would resume). */
        f->refusal = strprintf(
                "node name %s is held by another tendd: pid %" PRId64
                " on host %s, since %s (lease %s). Two tendds on one name would run the "
                "same pods twice: stop that tendd, or give this one another --node-name "
                "(a tendd that died loses its name within its lease's TTL)",
                f->node_name, (int64_t) json_integer_value(json_object_get(holder, "pid")),
                strna(json_string_value(json_object_get(holder, "host"))),
                strna(json_string_value(json_object_get(holder, "startedAt"))),
                strna(json_string_value(json_object_get(holder, "leaseID"))));
        etcd_session_stop(f->session);
        f->session = NULL;
        (void) unlink(f->state_file);
        if (etcd_lease_revoke(f->e, f->lease, on_refused_revoked, f) < 0)
                on_refused_revoked(&(etcd_result){}, f);
}

/* The name, on the session lease: create-if-absent, else learn who holds it. */
static void claim(fleet *f) {
        _cleanup_free_ char *value = NULL;

        /* Only on the live session's lease: a step of an earlier session
         * (its retry, its late answer) would claim the name on a lease that
         * is gone, or on none — a key that never expires. */
        if (!fleet__session_live(f))
                return;
        value = holder_value(f);
        if (!value ||
            etcd_txn(f->e, json_pack("[o]", etcd_cmp_revision(f->k_lease, "create", "EQUAL", 0)),
                     json_pack("[o]", etcd_op_put(f->k_lease, value, strlen(value), f->lease)),
                     json_pack("[o]", etcd_op_range(f->k_lease, NULL)), on_claim, f) < 0)
                join_failed(f, -ENOMEM, "claiming the node name: out of memory");
}

static void session_start(fleet *f);

static void on_session_ready(int64_t lease, bool resumed, void *userdata) {
        fleet *f = userdata;

        log_info("fleet: %s lease %" PRIx64 " (TTL %llds)", resumed ? "resumed" : "granted",
                 (uint64_t) lease, (long long) f->c.ttl);
        f->lease = lease;
        save_lease(f);
        claim(f);
}

static void on_session_lost(int error, const char *why, void *userdata) {
        fleet *f = userdata;

        log_warning("fleet: %s; joining again", why);
        f->cut_since = now_monotonic();
        fleet__stop_leading(f, "its lease may be gone");
        etcd_session_stop(f->session);
        f->session = NULL;
        if (error == -ENOENT)
                f->lease = 0; /* gone: a new one */
        retry_in(f, session_start, 0);
}

static void session_start(fleet *f) {
        int r = etcd_session_start(f->e,
                                   &(etcd_session_config){ .ttl = f->c.ttl,
                                                           .resume_lease = f->lease,
                                                           .ready = on_session_ready,
                                                           .lost = on_session_lost,
                                                           .userdata = f },
                                   &f->session);
        if (r < 0)
                join_failed(f, r, "starting the session: %s", strerror(-r));
}

static void schema(fleet *f);

static void on_schema(const etcd_result *r, void *userdata) {
        fleet *f = userdata;
        _cleanup_(json_decrefp) json_t *j = NULL;
        int64_t version;

        if (join_patience(f, r, schema, "reading the fleet's schema"))
                return;
        if (!r->succeeded) {
                j = r->n_kvs ? json_loadb(r->kvs[0].value, r->kvs[0].value_len, 0, NULL) : NULL;
                version = json_integer_value(json_object_get(j, "version"));
                if (version != SCHEMA_VERSION) {
                        join_failed(f, -EPROTO,
                                    "%s holds a fleet of key layout version %" PRId64
                                    ", not %d: a tendd of another version made it; use that "
                                    "version, or another --etcd-prefix",
                                    f->k_schema, version, SCHEMA_VERSION);
                        return;
                }
        }
        session_start(f);
}

static void schema(fleet *f) {
        char v[32];

        snprintf(v, sizeof v, "{\"version\":%d}", SCHEMA_VERSION);

        if (etcd_txn(f->e, json_pack("[o]", etcd_cmp_revision(f->k_schema, "create", "EQUAL", 0)),
                     json_pack("[o]", etcd_op_put(f->k_schema, v, strlen(v), 0)),
                     json_pack("[o]", etcd_op_range(f->k_schema, NULL)), on_schema, f) < 0)
                join_failed(f, -ENOMEM, "out of memory");
}

/* ---- life
 * ---------------------------------------------------------------------------------------- */

static void read_boot_id(char buf[static 40]) {
        _cleanup_free_ char *data = NULL;
        size_t n;

        buf[0] = 0;
        if (read_full_file("/proc/sys/kernel/random/boot_id", 64, &data, &n) >= 0)
                snprintf(buf, 40, "%.*s", (int) strcspn(data, "\n"), data);
}

static void on_handle_closed(uv_handle_t *h) {
        fleet *f = h->data;
        const char *k;
        void *v;

        if (--f->open_handles > 0)
                return;
        for (size_t i = 0; f->nd.map && tend_hashmap_next(f->nd.map, &i, &k, &v);)
                fleet__node_free(v);
        fleet__objects_free(f);
        fleet__sched_free(f);
        tend_hashmap_free(f->nd.map);
        strv_free(f->endpoints);
        json_decref(f->labels);
        free(f->prefix);
        free(f->node_name);
        free(f->state_file);
        free(f->k_schema);
        free(f->k_node);
        free(f->k_lease);
        free(f->p_all);
        free(f->p_events);
        free(f->p_nodes);
        free(f->p_leases);
        free(f->el.key);
        free(f->el.leader);
        free(f->refusal);
        free(f);
}

static void on_revoked(const etcd_result *r, void *userdata) {
        fleet *f = userdata;

        if (r->error < 0)
                log_warning("fleet: revoking the lease: %s (the fleet sees this node go when "
                            "it expires)",
                            strna(r->message));
        else
                log_info("fleet: left the fleet (lease revoked)");
        f->leave_done(f->leave_userdata);
}

void fleet_leave(fleet *f, void (*done)(void *userdata), void *userdata) {
        int64_t lease = f->lease;

        fleet__stop_leading(f, "it leaves the fleet");
        etcd_session_stop(f->session);
        f->session = NULL;
        (void) unlink(f->state_file); /* nothing to resume */
        f->leave_done = done;
        f->leave_userdata = userdata;
        if (!lease || etcd_lease_revoke(f->e, lease, on_revoked, f) < 0)
                done(userdata);
}

void fleet_close(fleet *f) {
        if (!f || f->closing)
                return;
        f->closing = true;
        fleet__stop_leading(f, "tendd stops");
        fleet__ops_close(f); /* what the API asked that is still out */
        fleet__objects_close(f);
        etcd_watch_cancel(f->watch);
        f->watch = NULL;
        etcd_session_stop(f->session);
        f->session = NULL;
        etcd_close(f->e);
        f->e = NULL;
        uv_timer_stop(&f->retry.timer);
        uv_timer_stop(&f->remirror.timer);
        uv_timer_stop(&f->deadline.timer);
        uv_timer_stop(&f->el.timer);
        f->retry.timer.data = f->remirror.timer.data = f->deadline.timer.data = f;
        uv_close((uv_handle_t *) &f->deadline.timer, on_handle_closed);
        uv_close((uv_handle_t *) &f->retry.timer, on_handle_closed);
        uv_close((uv_handle_t *) &f->remirror.timer, on_handle_closed);
        uv_close((uv_handle_t *) &f->el.timer, on_handle_closed);
        uv_timer_stop(&f->m.flush);
        uv_close((uv_handle_t *) &f->m.flush, on_handle_closed);
        uv_prepare_stop(&f->m.flush_idle);
        uv_close((uv_handle_t *) &f->m.flush_idle, on_handle_closed);
        uv_idle_stop(&f->m.flush_turn);
        uv_close((uv_handle_t *) &f->m.flush_turn, on_handle_closed);
        uv_timer_stop(&f->ev.timer);
        uv_close((uv_handle_t *) &f->ev.timer, on_handle_closed);
        uv_timer_stop(&f->ev.apply);
        uv_close((uv_handle_t *) &f->ev.apply, on_handle_closed);
        uv_timer_stop(&f->life.timer);
        uv_close((uv_handle_t *) &f->life.timer, on_handle_closed);
}

int fleet_join(const fleet_config *c, void (*joined)(int error, const char *why, void *userdata),
               void *userdata, fleet **ret) {
        fleet *f = new0(fleet, 1);
        size_t n = 0;
        int r;

        if (!f)
                return -ENOMEM;
        f->c = *c;
        f->c.ttl = c->ttl ?: 10;
        f->on_joined = joined;
        f->userdata = userdata;
        f->join_started = now_monotonic();
        while (c->endpoints[n])
                n++;
        f->endpoints = new0(char *, n + 1);
        for (size_t i = 0; f->endpoints && i < n; i++)
                f->endpoints[i] = strdup(c->endpoints[i]);
        f->prefix = strdup(c->prefix ?: "/tend");
        f->node_name = strdup(c->node_name);
        f->labels = c->labels ? json_incref(c->labels) : json_object();
        f->state_file = strprintf("%s/fleet.json", c->state_dir);
        f->nd.map = tend_hashmap_new();
        if (f->prefix) {
                f->k_schema = strprintf("%s/v1/schema", f->prefix);
                f->k_node = strprintf("%s/v1/nodes/%s", f->prefix, strempty(f->node_name));
                f->k_lease = strprintf("%s/v1/nodeleases/%s", f->prefix, strempty(f->node_name));
                f->p_all = strprintf("%s/v1/", f->prefix);
                f->p_events = strprintf("%s/v1/events/", f->prefix);
                f->p_nodes = strprintf("%s/v1/nodes/", f->prefix);
                f->p_leases = strprintf("%s/v1/nodeleases/", f->prefix);
                f->el.key = strprintf("%s/v1/leader", f->prefix);
        }
        uv_timer_init(c->loop, &f->retry.timer);
        uv_timer_init(c->loop, &f->remirror.timer);
        uv_timer_init(c->loop, &f->deadline.timer);
        f->retry.f = f->remirror.f = f->deadline.f = f;
        f->deadline.timer.data = &f->deadline;
        f->retry.timer.data = &f->retry;
        f->remirror.timer.data = &f->remirror;
        uv_timer_init(c->loop, &f->el.timer);
        f->el.timer.data = f;
        uv_timer_init(c->loop, &f->m.flush);
        f->m.flush.data = f;
        uv_prepare_init(c->loop, &f->m.flush_idle);
        f->m.flush_idle.data = f;
        uv_idle_init(c->loop, &f->m.flush_turn);
        f->m.flush_turn.data = f;
        uv_timer_init(c->loop, &f->ev.timer);
        f->ev.timer.data = f;
        uv_timer_init(c->loop, &f->ev.apply);
        f->ev.apply.data = f;
        uv_timer_init(c->loop, &f->life.timer);
        f->life.timer.data = f;
        f->open_handles = 10;
        if (gethostname(f->hostname, sizeof f->hostname - 1) < 0)
                strcpy(f->hostname, "localhost");
        read_boot_id(f->boot_id);
        if (!f->endpoints || !f->prefix || !f->node_name || !f->labels || !f->state_file ||
            !f->nd.map || !f->k_schema || !f->k_node || !f->k_lease || !f->p_all || !f->p_events ||
            !f->p_nodes || !f->p_leases || !f->el.key) {
                fleet_close(f);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++)
                if (!f->endpoints[i]) {
                        fleet_close(f);
                        return -ENOMEM;
                }
        r = fleet__objects_init(f);
        if (r < 0) {
                fleet_close(f);
                return r;
        }
        if (c->agent)
                fleet__lifecycle_start(f);
        r = etcd_new(&(etcd_config){ .loop = c->loop,
                                     .endpoints = f->endpoints,
                                     .ca_file = c->ca_file,
                                     .cert_file = c->cert_file,
                                     .key_file = c->key_file,
                                     .user = c->user,
                                     .password = c->password },
                     &f->e);
        if (r < 0) {
                fleet_close(f);
                return r;
        }
        f->lease = load_lease(f);
        /* Each step waits for etcd a while; the whole join, a while and a
         * TTL (a dead tendd's claim on the name may take that to go). */
        later_in(&f->deadline, join_timeout,
                 (JOIN_PATIENCE + (usec_t) f->c.ttl * USEC_PER_SEC) / USEC_PER_MSEC);
        schema(f);
        *ret = f;
        return 0;
}
