/* SPDX-License-Identifier: MIT */

/*
 * The fleet's nodes as the API shows them (tend/fleet.h): core/v1 Nodes
 * with their Ready condition derived from their leases, cordon and node
 * removal as etcd txns answered later, /metrics, and whether this node is
 * cut off from etcd (writes refused, reads said to be stale).
 */

#include <inttypes.h>

#include "fleet-internal.h"

/* ---- the mirror of the nodes ------------------------------------------------------------------
 */

void fleet__node_free(fnode *n) {
        if (!n)
                return;
        free(n->name);
        json_decref(n->node);
        json_decref(n->holder);
        free(n);
}

fnode *fleet__node(fleet *f, const char *name, bool create) {
        fnode *n = tend_hashmap_get(f->nd.map, name);

        if (n || !create)
                return n;
        n = new0(fnode, 1);
        if (!n || !(n->name = strdup(name)) || tend_hashmap_put(f->nd.map, name, n, NULL) < 0) {
                fleet__node_free(n);
                return NULL;
        }
        return n;
}

void fleet__nodes_clear(fleet *f) {
        const char *k;
        void *v;

        for (size_t i = 0; tend_hashmap_next(f->nd.map, &i, &k, &v);)
                fleet__node_free(v);
        tend_hashmap_free(f->nd.map);
        f->nd.map = tend_hashmap_new();
}

/* What a Node's value must be for the API and the scheduler to read it:
 * an object, its parts of the kinds a Node has. NULL, or what is not. */
static const char *node_problem(json_t *j) {
        json_t *m = json_object_get(j, "metadata"), *sp = json_object_get(j, "spec"),
               *st = json_object_get(j, "status"), *v;
        const char *k;
        size_t i;

        if (!json_is_object(j))
                return "not a JSON object";
        if (m && !json_is_object(m))
                return "metadata is not an object";
        if (json_object_get(m, "name") && !json_is_string(json_object_get(m, "name")))
                return "metadata.name is not a string";
        if (json_object_get(m, "creationTimestamp") &&
            !json_is_string(json_object_get(m, "creationTimestamp")))
                return "metadata.creationTimestamp is not a string";
        if ((v = json_object_get(m, "labels"))) {
                if (!json_is_object(v))
                        return "metadata.labels is not an object";
                json_t *l;
                json_object_foreach (v, k, l)
                        if (!json_is_string(l))
                                return "a label's value is not a string";
        }
        if (sp && !json_is_object(sp))
                return "spec is not an object";
        if (json_object_get(sp, "unschedulable") &&
            !json_is_boolean(json_object_get(sp, "unschedulable")))
                return "spec.unschedulable is not a boolean";
        if (st && !json_is_object(st))
                return "status is not an object";
        for (i = 0; i < 3; i++) {
                static const char *const objs[] = { "nodeInfo", "capacity", "allocatable" };
                if ((v = json_object_get(st, objs[i])) && !json_is_object(v))
                        return "a part of status (nodeInfo, capacity, allocatable) is not an "
                               "object";
        }
        for (i = 0; i < 2; i++) {
                static const char *const arrs[] = { "addresses", "conditions" };
                json_t *e;
                size_t x;
                if (!(v = json_object_get(st, arrs[i])))
                        continue;
                if (!json_is_array(v))
                        return "status.addresses or status.conditions is not a list";
                json_array_foreach (v, x, e)
                        if (!json_is_object(e))
                                return "an item of status.addresses or status.conditions is not "
                                       "an object";
        }
        return NULL;
}

/* A key of P/v1/nodes/ or P/v1/nodeleases/ into the mirror (false: not
 * one). */
bool fleet__nodes_key(fleet *f, const etcd_kv *kv, bool deleted) {
        const char *name;
        bool is_node;
        fnode *n;

        if (startswith(kv->key, f->p_nodes))
                name = kv->key + strlen(f->p_nodes), is_node = true;
        else if (startswith(kv->key, f->p_leases))
                name = kv->key + strlen(f->p_leases), is_node = false;
        else
                return false;
        /* a key no node could have is no node's (a name that no Node may
         * have would be listed as given, control characters and all) */
        if (!spec_is_dns_subdomain(name)) {
                if (!deleted)
                        log_warning("fleet: %s: no node may have that name; skipped", kv->key);
                return true;
        }
        n = fleet__node(f, name, !deleted);
        if (!n)
                return true;
        f->nd.changed = true;
        if (!n->holder && !n->lost_mono)
                n->lost_mono = now_monotonic(); /* a node seen without its lease */
        if (is_node) {
                if (!deleted && kv->mod_revision <= n->node_mod)
                        return true; /* our own write, applied already */
                json_decref(n->node);
                n->node = deleted ? NULL : etcd_kv_json(kv);
                n->node_mod = deleted ? 0 : kv->mod_revision;
                /* a value of the wrong shape goes no further than here */
                const char *why = deleted ? NULL : n->node ? node_problem(n->node) : "not JSON";
                const char *says = json_string_value(
                        json_object_get(json_object_get(n->node, "metadata"), "name"));
                if (!why && says && !streq(says, name))
                        why = "it names another node";
                if (why) {
                        log_warning("fleet: %s in etcd is not a Node (%s); taken as absent",
                                    kv->key, why);
                        json_decref(n->node);
                        n->node = NULL;
                }
        } else {
                bool was = n->holder != NULL;
                json_decref(n->holder);
                n->holder = deleted ? NULL : etcd_kv_json(kv);
                /* the key is the lease: held whatever its value says, which
                 * is read only as an object */
                if (!deleted && !json_is_object(n->holder)) {
                        log_warning("fleet: %s in etcd is not a lease holder's object; taken "
                                    "as held, by someone unknown",
                                    kv->key);
                        json_decref(n->holder);
                        n->holder = json_object();
                }
                if (!n->holder && (was || !n->lost_mono))
                        n->lost_mono = now_monotonic();
                else if (n->holder)
                        n->lost_mono = 0;
                if (was != (n->holder != NULL) || !n->since) {
                        n->since = now_realtime();
                        if (f->joined)
                                log_info("fleet: node/%s %s", name,
                                         n->holder ? "joined (holds its lease)"
                                                   : "lost its lease: NotReady");
                }
        }
        if (!n->node && !n->holder) {
                tend_hashmap_remove(f->nd.map, name);
                fleet__node_free(n);
        }
        return true;
}

/* ---- what the API asks --------------------------------------------------------------------------
 */

/* Whether this node is cut off from etcd (its lease not renewed in time,
 * or not joined yet), and for how many seconds (0: not joined). */
static bool cut_off(fleet *f, long *ret_secs) {
        usec_t until = f->session ? etcd_session_safe_until(f->session) : 0, now = now_monotonic();
        usec_t since = until ?: f->cut_since; /* (a session lost, or a new one not ready) */

        *ret_secs = since && now > since ? (long) ((now - since) / USEC_PER_SEC) : 0;
        return !until || now >= until;
}

/* A Node as the API shows it: the stored one, with its Ready condition
 * derived from its lease (nothing of it is stored: only the holder writes
 * its lease key, and etcd deletes it when the holder is gone a TTL). Cut
 * off from etcd, this node cannot tell: every node is Unknown, itself
 * included, and none is shown leading (issue 29: a frozen view that looked
 * current, a cut ex-leader still leading in its own). */
static json_t *node_view(fleet *f, const fnode *n) {
        char since[TIMESTAMP_MAX], now[TIMESTAMP_MAX];
        _cleanup_free_ char *msg = NULL;
        json_t *node, *status;
        long secs;
        bool cut = cut_off(f, &secs), ready = n->holder && !cut;

        node = n->node ? json_deep_copy(n->node)
                       : json_pack("{s:s, s:s, s:{s:s}, s:{}, s:{}}", "kind", "Node", "apiVersion",
                                   "v1", "metadata", "name", n->name, "spec", "status");
        if (!node)
                return NULL;
        /* what it is and its name are the key's, whatever the value says */
        json_t *meta = json_object_get(node, "metadata");
        if (!json_is_object(meta) &&
            json_object_set_new(node, "metadata", meta = json_object()) < 0)
                return json_decref(node), NULL;
        if (json_object_set_new(node, "kind", json_string("Node")) < 0 ||
            json_object_set_new(node, "apiVersion", json_string("v1")) < 0 ||
            json_object_set_new(meta, "name", json_string(n->name)) < 0)
                return json_decref(node), NULL;
        format_timestamp(since, n->since ?: now_realtime());
        format_timestamp(now, now_realtime());
        if (cut)
                msg = streq_ptr(n->name, f->node_name)
                              ? strprintf("this node is cut off from the fleet's etcd (its lease "
                                          "not renewed for %ld s): it cannot tell whether it is "
                                          "still in the fleet",
                                          secs)
                              : strprintf("seen from node/%s, cut off from the fleet's etcd for "
                                          "%ld s: this node's state is unknown there",
                                          f->node_name, secs);
        else if (n->holder)
                msg = strprintf("tendd (pid %" PRId64 " on %s) holds the node's lease",
                                (int64_t) json_integer_value(json_object_get(n->holder, "pid")),
                                strna(json_string_value(json_object_get(n->holder, "host"))));
        else
                msg = strdup("tendd holds no lease for this node: it stopped, or cannot reach "
                             "etcd (its lease expired)");
        if (!cut && streq_ptr(n->name, f->el.leader)) { /* kubectl's ROLES column */
                json_t *m = json_object_get(node, "metadata"), *l = json_object_get(m, "labels");
                if (!json_is_object(l))
                        json_object_set_new(m, "labels", l = json_object());
                json_object_set_new(l, "node-role.kubernetes.io/leader", json_string(""));
        }
        status = json_object_get(node, "status");
        if (!json_is_object(status))
                json_object_set_new(node, "status", status = json_object());
        if (!msg ||
            json_object_set_new(status, "conditions",
                                json_pack("[{s:s, s:s, s:s, s:s, s:s, s:s}]", "type", "Ready",
                                          "status", ready ? "True" : "Unknown", "reason",
                                          ready ? "TenddReady" : "NodeStatusUnknown", "message",
                                          msg, "lastHeartbeatTime", ready ? now : since,
                                          "lastTransitionTime", since)) < 0)
                return json_decref(node), NULL;
        return node;
}

static int cmp_names(const void *a, const void *b) {
        return strcmp(((const fnode *const *) a)[0]->name, ((const fnode *const *) b)[0]->name);
}

json_t *fleet_nodes(fleet *f) {
        size_t n = tend_hashmap_size(f->nd.map), k = 0;
        _cleanup_free_ fnode **v = new0(fnode *, n + 1);
        json_t *a = json_array();
        const char *key;
        void *val;

        if (!v || !a)
                return json_decref(a), NULL;
        for (size_t i = 0; tend_hashmap_next(f->nd.map, &i, &key, &val);)
                v[k++] = val;
        qsort(v, k, sizeof(fnode *), cmp_names);
        for (size_t i = 0; i < k; i++)
                if (json_array_append_new(a, node_view(f, v[i])) < 0)
                        return json_decref(a), NULL;
        return a;
}

static void op_free(op *o) {
        fleet *f = o->f;

        for (op **p = &f->nd.ops; *p; p = &(*p)->next)
                if (*p == o) {
                        *p = o->next;
                        break;
                }
        etcd_cancel_calls(f->e, o);
        free(o->name);
        free(o);
}

static void op_done(op *o, unsigned code, json_t *answer) {
        void (*done)(unsigned, json_t *, void *) = o->done;
        void *req = o->req;

        op_free(o);
        done(code, answer, req);
}

static int op_write(op *o, const fnode *n);

static void on_op(const etcd_result *r, void *userdata) {
        op *o = userdata;
        fleet *f = o->f;
        fnode *n;

        if (r->error < 0) {
                _cleanup_free_ char *msg = strprintf("writing node %s to etcd: %s", o->name,
                                                     strna(r->message));
                op_done(o, 503, spec_status_json(503, "ServiceUnavailable", strna(msg), NULL));
                return;
        }
        n = fleet__node(f, o->name, false);
        if (!r->succeeded) {
                /* Changed meanwhile (its tendd restarted): again from the latest. */
                if (r->n_kvs > 0 && n) {
                        (void) fleet__nodes_key(f, &r->kvs[0], false);
                        n = fleet__node(f, o->name, false); /* may be gone */
                }
                if (n && n->node && r->n_kvs > 0 && ++o->tries < 5 && op_write(o, n) >= 0)
                        return;
                _cleanup_free_ char *msg = strprintf(
                        "node %s changed while it was written: try again", o->name);
                op_done(o, 409, spec_status_json(409, "Conflict", strna(msg), NULL));
                return;
        }
        if (!n || !n->node) {
                _cleanup_free_ char *msg = strprintf("node %s was removed from the fleet meanwhile",
                                                     o->name);
                op_done(o, 404, spec_status_json(404, "NotFound", strna(msg), NULL));
                return;
        }
        if (r->revision > n->node_mod) {
                /* Read your writes: the mirror has it before the watch says so
                 * (unless the watch told of a later write already). */
                json_object_set_new(json_object_get(n->node, "spec"), "unschedulable",
                                    o->value ? json_true() : json_false());
                if (!o->value)
                        json_object_del(json_object_get(n->node, "spec"), "unschedulable");
                n->node_mod = r->revision;
        }
        op_done(o, 200, node_view(f, n));
}

static void on_delete_node(const etcd_result *r, void *userdata) {
        op *o = userdata;
        fleet *f = o->f;

        if (r->error < 0) {
                _cleanup_free_ char *msg = strprintf("removing node %s from etcd: %s", o->name,
                                                     strna(r->message));
                op_done(o, 503, spec_status_json(503, "ServiceUnavailable", strna(msg), NULL));
                return;
        }
        if (!r->succeeded) {
                _cleanup_(json_decrefp)
                        json_t *h = r->n_kvs ? json_loadb(r->kvs[0].value, r->kvs[0].value_len, 0,
                                                          NULL)
                                             : NULL;
                _cleanup_free_ char *msg = strprintf(
                        "node %s is alive: tendd (pid %" PRId64 " on %s) holds its lease; "
                        "stop that tendd (with --stop-pods-on-exit it leaves the fleet), then "
                        "delete the node",
                        o->name, (int64_t) json_integer_value(json_object_get(h, "pid")),
                        strna(json_string_value(json_object_get(h, "host"))));
                op_done(o, 409, spec_status_json(409, "Conflict", strna(msg), NULL));
                return;
        }
        fnode *n = fleet__node(f, o->name, false);
        if (n && n->node && n->node_mod <= r->revision) { /* not a Node written after it */
                json_decref(n->node);
                n->node = NULL;
                n->node_mod = 0;
                if (!n->holder) {
                        tend_hashmap_remove(f->nd.map, n->name);
                        fleet__node_free(n);
                }
        }
        op_done(o, 200,
                json_pack("{s:s, s:s, s:{}, s:s, s:{s:s, s:s}}", "kind", "Status", "apiVersion",
                          "v1", "metadata", "status", "Success", "details", "name", o->name, "kind",
                          "nodes"));
}

/* A node nobody holds: its Node key goes, unless a tendd holds the name
 * (then the failure branch says who). */
static int op_delete(op *o) {
        _cleanup_free_ char *node = strprintf("%s%s", o->f->p_nodes, o->name),
                            *lease = strprintf("%s%s", o->f->p_leases, o->name);

        if (!node || !lease)
                return -ENOMEM;
        return etcd_txn(o->f->e, json_pack("[o]", etcd_cmp_revision(lease, "create", "EQUAL", 0)),
                        json_pack("[o]", etcd_op_delete(node, NULL)),
                        json_pack("[o]", etcd_op_range(lease, NULL)), on_delete_node, o);
}

static int op_write(op *o, const fnode *n) {
        _cleanup_(json_decrefp) json_t *node = json_deep_copy(n->node);
        _cleanup_free_ char *key = strprintf("%s%s", o->f->p_nodes, o->name), *value = NULL;
        json_t *spec;

        if (!node || !key)
                return -ENOMEM;
        spec = json_object_get(node, "spec");
        if (!json_is_object(spec))
                json_object_set_new(node, "spec", spec = json_object());
        if (o->value)
                json_object_set_new(spec, "unschedulable", json_true());
        else
                json_object_del(spec, "unschedulable");
        value = json_dumps(node, JSON_COMPACT | JSON_SORT_KEYS);
        if (!value)
                return -ENOMEM;
        return etcd_txn(o->f->e,
                        json_pack("[o]", etcd_cmp_revision(key, "mod", "EQUAL", n->node_mod)),
                        json_pack("[o]", etcd_op_put(key, value, strlen(value), 0)),
                        json_pack("[o]", etcd_op_range(key, NULL)), on_op, o);
}

static op *op_new(fleet *f, const char *name, void (*done)(unsigned, json_t *, void *), void *req) {
        op *o = new0(op, 1);

        if (!o || !(o->name = strdup(name))) {
                free(o);
                return NULL;
        }
        o->f = f;
        o->done = done;
        o->req = req;
        o->next = f->nd.ops;
        f->nd.ops = o;
        return o;
}

int fleet_node_delete(fleet *f, const char *name, fleet_done done, void *req) {
        op *o = op_new(f, name, done, req);
        int r;

        if (!o)
                return -ENOMEM;
        r = op_delete(o);
        if (r < 0)
                op_free(o);
        return r;
}

int fleet_node_cordon(fleet *f, const char *name, bool value, fleet_done done, void *req) {
        fnode *n = fleet__node(f, name, false);
        op *o;
        int r;

        if (!n || !n->node)
                return -ENOENT;
        o = op_new(f, name, done, req);
        if (!o)
                return -ENOMEM;
        o->value = value;
        r = op_write(o, n);
        if (r < 0) {
                o->done = NULL;
                op_free(o);
        }
        return r;
}

void fleet_cancel(fleet *f, void *req) {

        fleet__writes_cancel(f, req);
        for (op *o = f->nd.ops; o; o = o->next)
                if (o->req == req) {
                        op_free(o);
                        return;
                }
}

void fleet_metrics(fleet *f, tend_buf *b) {
        size_t ready = 0, all = tend_hashmap_size(f->nd.map);
        usec_t until = f->session ? etcd_session_safe_until(f->session) : 0, now = now_monotonic();
        const char *k;
        void *v;

        for (size_t i = 0; tend_hashmap_next(f->nd.map, &i, &k, &v);)
                ready += ((fnode *) v)->holder != NULL;
        (void) tend_buf_addf(
                b,
                "# HELP tend_fleet_nodes Nodes of the fleet, by whether their tendd holds "
                "its lease.\n# TYPE tend_fleet_nodes gauge\n"
                "tend_fleet_nodes{ready=\"true\"} %zu\ntend_fleet_nodes{ready=\"false\"} %zu\n"
                "# HELP tend_fleet_leading Whether this node leads the fleet now.\n"
                "# TYPE tend_fleet_leading gauge\ntend_fleet_leading %d\n"
                "# HELP tend_fleet_lease_seconds How long this node's lease is certainly "
                "alive (0: lost, or not yet).\n# TYPE tend_fleet_lease_seconds gauge\n"
                "tend_fleet_lease_seconds %.3f\n",
                ready, all - ready, fleet_leading(f, NULL) ? 1 : 0,
                until > now ? (double) (until - now) / USEC_PER_SEC : 0.0);
}

/* docs/fleet.md §3.9 rule 2: cut off from etcd, a node answers reads from its
 * copy and refuses writes (they could not be acknowledged). */
char *fleet_refuses_writes(fleet *f) {
        long secs;

        if (!cut_off(f, &secs))
                return NULL;
        return strdup("this node is cut off from the fleet's etcd (its lease is not renewed): it "
                      "keeps running its pods, and takes writes again once etcd answers; write "
                      "through another node meanwhile");
}

/* ... and says, on every read, that what it shows may be stale. */
char *fleet_stale(fleet *f) {
        long secs;

        if (!cut_off(f, &secs))
                return NULL;
        return strprintf("node/%s is cut off from the fleet's etcd (for %ld s): what it shows may "
                         "be stale; read through another node",
                         f->node_name, secs);
}

void fleet__ops_close(fleet *f) {
        while (f->nd.ops)
                op_free(f->nd.ops);
}
