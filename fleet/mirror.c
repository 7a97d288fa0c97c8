/* SPDX-License-Identifier: MIT */

/*
 * The fleet's objects (docs/fleet.md §3.3–3.4). Deployments, ReplicaSets and
 * Pods live in etcd, each as two keys: the object without its status,
 * P/v1/<kind>/NS/NAME, and its status, P/v1/status/<kind>/NS/NAME (for a
 * pod, with the annotations its node writes: ports, STATUS=, crash-loop
 * facts), so that the leader and the node a pod is bound to never write the
 * same key.
 *
 * Every tendd mirrors them into its own store, where the agent and the API
 * read them as on one host, and sends what its own passes and API requests
 * wrote there back to etcd, in one txn per batch: each key compared on the
 * revision it was read at (CREATE == 0 for a new one), the leader's writes
 * fenced on its leader key. A batch refused (another wrote one of its keys
 * first, or this node no longer leads) is undone here: its objects go back
 * to what etcd has, and the next batch waits until the mirror has reached
 * the refusal's revision, so the agent decides again on what etcd holds.
 * What another node wrote wins over what this node has not sent yet.
 *
 * The local store stays this node's copy (SQLite): a tendd restarted while
 * etcd is away runs its own pods from it, and a relist corrects it.
 */

#include <inttypes.h>

#include "fleet-internal.h"

#define BATCH_MAX 60 /* objects per txn: 2 puts each, under etcd's 128 operations */
/* bytes of keys and values per txn: base64 makes them a third larger, under
 * etcd's 1.5 MiB request limit */
#define BATCH_BYTES (1024 * 1024)
#define WAIT_MAX (10 * USEC_PER_SEC)
#define FLUSH_HOLD (20 * USEC_PER_MSEC)    /* the longest a write waits for more to go with it */
#define UNSTAGE_SLICE (20 * USEC_PER_MSEC) /* local changes split in one turn of the loop */
/* the longest a write's flush is put off for a poll first (by later writes) */
#define FLUSH_POLL_MAX (100 * USEC_PER_MSEC)
/* A waiter's failure: its write was withdrawn after WAIT_MAX, but an
 * answer of etcd's to it was lost before, so etcd may have it (a 504 that
 * says so). */
#define UNSURE 599

static const char *const kind_names[] = {
        [STORE_DEPLOYMENT] = "deployments",
        [STORE_REPLICA_SET] = "replicasets",
        [STORE_POD] = "pods",
};

/* A value's canonical text, made ahead (in unstage()'s slice, not the
 * flush's) and kept with a reference to the value it is of. */
typedef struct ftext {
        json_t *of;
        char *text;
} ftext;

struct fobj {
        store_kind kind;
        char *ns, *name;
        json_t *main, *status; /* as etcd has them; NULL: no key */
        int64_t main_mod, main_create, status_mod;
        bool apply;                    /* etcd changed it: the local object follows */
        bool gone;                     /* etcd deleted it while its process stops here */
        bool dirty;                    /* written here, not acknowledged */
        bool dirty_main, dirty_status; /* ... which of its keys */
        bool in_flight;                /* in the txn that is out */
        /* While a write was out: etcd changed its main key, its status key
         * (another's write, not the echo of this one: rebase()); the watch
         * brought this write's own value back. */
        bool remote_main, remote_status, echoed;
        bool unsure;         /* a write of it was sent and its answer lost: it may be in etcd */
        json_t *want_main;   /* what to send; NULL with dirty: a delete */
        json_t *want_status; /* NULL: no status */
        json_t *sent_main, *sent_status;
        bool sent_delete;
        bool sent_put_main, sent_put_status; /* which keys the write that is out puts */
        int64_t sent_main_mod, sent_status_mod, sent_main_create; /* ... and what it compared */
        uint64_t seq, sent_seq, pending_from; /* local changes: the last, the sent, the
                                               * first not acknowledged (0: none) */
        int64_t fence_at;                     /* the leader's fence when written; 0: not leading */
        ftext main_text, status_text;         /* of want_main, want_status (when made) */
        /* Changed here, and not yet split into its keys' values (stage()):
         * dirty and seq as for a write already, so that a request waits
         * for it; the rest once unstage() has made the values. */
        bool staged;
        bool staged_deleted;   /* ... by a deletion (its last change) */
        bool staged_was_dirty; /* dirty before it was staged */
        int64_t staged_term;   /* the leader's fence over its staged changes; 0: none */
        fobj *next_staged;
};

struct fwaiter {
        fwaiter *next;
        uint64_t from, seq; /* the request's own writes: (from, seq] */
        char **keys;        /* ... of these objects ("kind/ns/name") */
        unsigned failed;    /* 0, or the code of the answer (409, 413, 504, UNSURE) */
        usec_t deadline;
        void (*done)(unsigned code, json_t *answer, void *req);
        void *req;
};

static char *obj_key(store_kind k, const char *ns, const char *name) {
        return strprintf("%s/%s/%s", kind_names[k], strempty(ns), strempty(name));
}

static char *etcd_key(fleet *f, const fobj *o, bool status) {
        return strprintf("%s%s%s/%s/%s", f->p_all, status ? "status/" : "", kind_names[o->kind],
                         o->ns, o->name);
}

static void ftext_forget(ftext *t) {
        json_decref(t->of);
        free(t->text);
        *t = (ftext){};
}

/* Makes v's text ahead (false: out of memory; build() tries again). */
static bool ftext_make(ftext *t, json_t *v) {
        if (v && t->of == v)
                return true;
        ftext_forget(t);
        if (!v || !(t->text = spec_json_dump_canonical(v)))
                return false;
        t->of = json_incref(v);
        return true;
}

/* v's text, as made ahead if it was (borrowed); NULL: out of memory. */
static const char *ftext_get(ftext *t, json_t *v) {
        return ftext_make(t, v) ? t->text : NULL;
}

static void fobj_free(fobj *o) {
        if (!o)
                return;
        ftext_forget(&o->main_text);
        ftext_forget(&o->status_text);
        free(o->ns);
        free(o->name);
        json_decref(o->main);
        json_decref(o->status);
        json_decref(o->want_main);
        json_decref(o->want_status);
        json_decref(o->sent_main);
        json_decref(o->sent_status);
        free(o);
}

static fobj *fobj_get(fleet *f, store_kind k, const char *ns, const char *name, bool create) {
        _cleanup_free_ char *key = obj_key(k, ns, name);
        fobj *o = key ? tend_hashmap_get(f->objs, key) : NULL;

        if (o || !create || !key)
                return o;
        o = new0(fobj, 1);
        if (!o)
                return NULL;
        o->kind = k;
        o->ns = strdup(strempty(ns));
        o->name = strdup(strempty(name));
        if (!o->ns || !o->name || tend_hashmap_put(f->objs, key, o, NULL) < 0) {
                fobj_free(o);
                return NULL;
        }
        return o;
}

/* Forgets an entry that holds nothing (no key in etcd, nothing to send). */
static void fobj_maybe_forget(fleet *f, fobj *o) {
        _cleanup_free_ char *key = NULL;

        if (o->main || o->status || o->dirty || o->in_flight || o->apply || o->gone)
                return;
        key = obj_key(o->kind, o->ns, o->name);
        if (key && tend_hashmap_remove(f->objs, key) == o)
                fobj_free(o);
}

/* ---- splitting and joining ------------------------------------------------------------------ */

/* An object of the store → its two keys' values. Encoded, not its row's
 * text parsed again: the codec shares what it keeps as JSON (a large
 * deployment's managedFields) rather than make it anew. */
static int split(store_kind k, const void *obj, json_t **ret_main, json_t **ret_status) {
        _cleanup_(json_decrefp) json_t *j = spec_encode(store_kind_type(k), obj), *st = NULL;
        json_t *meta, *ann;

        if (!j)
                return -ENOMEM;
        meta = json_object_get(j, "metadata");
        (void) json_object_del(meta, "resourceVersion"); /* each store's own */
        st = json_pack("{s:O?}", "status", json_object_get(j, "status"));
        if (!st)
                return -ENOMEM;
        (void) json_object_del(j, "status");
        ann = json_object_get(meta, "annotations");
        if (k == STORE_POD && ann) {
                json_t *mine = json_object();
                if (!mine)
                        return -ENOMEM;
                /* the annotations a pod's node writes (the registry's, in
                 * spec/annotations.c): in its status key */
                size_t n;
                const spec_annotation *rows = spec_annotations(&n);
                for (size_t i = 0; i < n; i++) {
                        json_t *v = rows[i].writer == SPEC_ANN_BY_NODE
                                            ? json_object_get(ann, rows[i].key)
                                            : NULL;
                        if (v) {
                                (void) json_object_set(mine, rows[i].key, v);
                                (void) json_object_del(ann, rows[i].key);
                        }
                }
                if (json_object_size(ann) == 0)
                        (void) json_object_del(meta, "annotations");
                if (json_object_size(mine))
                        (void) json_object_set_new(st, "annotations", mine);
                else
                        json_decref(mine);
        }
        *ret_main = TAKE_PTR(j);
        *ret_status = TAKE_PTR(st);
        return 0;
}

/* The two keys' values → the object (new). Shallow: what it does not
 * change is main's, shared (the mirror's trees are never changed, and the
 * codec keeps what it shares, SK_JSON, as it is): a deep copy of a large
 * object cost the loop as much as decoding it. */
static json_t *join(const json_t *main, const json_t *status) {
        json_t *j = json_copy((json_t *) main), *meta, *ann, *mine, *v;
        const char *k;

        if (!j || !status)
                return j;
        if ((v = json_object_get(status, "status")))
                (void) json_object_set(j, "status", v);
        ann = json_object_get(status, "annotations");
        meta = json_object_get(j, "metadata");
        if (ann && json_is_object(meta)) {
                mine = json_object_get(meta, "annotations");
                mine = mine ? json_copy(mine) : json_object();
                meta = json_copy(meta);
                if (!mine || !meta) {
                        json_decref(mine);
                        json_decref(meta);
                        json_decref(j);
                        return NULL;
                }
                json_object_foreach (ann, k, v)
                        (void) json_object_set(mine, k, v);
                (void) json_object_set_new(meta, "annotations", mine);
                (void) json_object_set_new(j, "metadata", meta);
        }
        return j;
}

/* ---- etcd → the local store ----------------------------------------------------------------- */

static void flush(fleet *f);
static void schedule_flush(fleet *f, uint64_t msec);
static bool unstage(fleet *f, usec_t budget);
static void check_waiters(fleet *f);

static const char *meta_node(store_kind k, const void *obj) {
        return k == STORE_POD ? ((const spec_pod *) obj)->spec.node_name : NULL;
}

/* etcd no longer has a pod whose process runs here: it is stopped (its
 * grace period) before it goes, as for a deletion (docs/fleet.md §3.9 rule 4);
 * nothing of that is sent to etcd. */
static int stop_gone_pod(fleet *f, fobj *o, const spec_pod *p) {
        spec_pod *n;

        if (p->metadata.deletion_timestamp) {
                o->gone = true;
                return 0;
        }
        n = spec_pod_copy(p);
        if (!n)
                return -ENOMEM;
        n->metadata.deletion_timestamp = now_realtime();
        n->metadata.deletion_grace_period_seconds = n->spec.termination_grace_period_seconds;
        o->gone = true;
        log_info("fleet: pod/%s is gone from etcd; stopping it here", p->metadata.name);
        return store_put(f->store, STORE_POD, n, NULL);
}

/* The local object becomes what etcd has. */
static int apply_local(fleet *f, fobj *o) {
        const void *cur = store_get(f->store, o->kind, o->ns, o->name);
        const spec_type *t = store_kind_type(o->kind);
        _cleanup_(json_decrefp) json_t *j = NULL;
        spec_errors errs = {};
        void *obj = NULL;
        int r;

        o->apply = false;
        log_debug("fleet: %s/%s/%s: the local copy follows etcd", kind_names[o->kind], o->ns,
                  o->name);
        if (o->dirty && o->dirty_main && !o->want_main)
                return 0; /* this node deleted it: that goes to etcd */
        if (!o->main) {
                if (!cur)
                        return 0;
                /* bound here: its process (if any) stops first; the pod
                 * worker removes one that has none at once */
                if (o->kind == STORE_POD && streq_ptr(meta_node(o->kind, cur), f->node_name) &&
                    !spec_pod_terminal(cur))
                        return stop_gone_pod(f, o, cur);
                return store_delete(f->store, o->kind, o->ns, o->name);
        }
        o->gone = false;
        /* what this node has not sent yet stays, over etcd's */
        j = join(o->dirty && o->dirty_main && o->want_main ? o->want_main : o->main,
                 o->dirty && o->dirty_status ? o->want_status : o->status);
        if (!j)
                return -ENOMEM;
        r = spec_decode_shared(t, j, &errs, &obj);
        if (r < 0) {
                if (r != -ENOMEM)
                        log_warning("fleet: %s/%s/%s in etcd cannot be read; skipped",
                                    kind_names[o->kind], o->ns, o->name);
                spec_errors_done(&errs);
                return r == -ENOMEM ? r : 0;
        }
        spec_errors_done(&errs);
        /* stored under the name its key says, or not at all: under another
         * (its JSON's), it would be an object no deletion of the key reaches */
        if (!streq_ptr(spec_object_meta(obj)->namespace, o->ns) ||
            !streq_ptr(spec_object_meta(obj)->name, o->name)) {
                log_warning("fleet: %s/%s/%s in etcd names itself %s/%s; skipped",
                            kind_names[o->kind], o->ns, o->name,
                            strna(spec_object_meta(obj)->namespace),
                            strna(spec_object_meta(obj)->name));
                spec_free(t, obj);
                return 0;
        }
        if (cur) {
                /* the same but for the store's own resourceVersion: no write */
                spec_object_meta(obj)->resource_version = spec_object_meta(cur)->resource_version;
                if (spec_equal(t, obj, cur)) {
                        spec_free(t, obj);
                        return 0;
                }
        }
        return store_put(f->store, o->kind, obj, NULL);
}

/* A key of the objects: etcd's value (deleted: gone). Applied to the
 * local store by fleet__objects_settle(), once per batch. */
static void remote(fleet *f, fobj *o, bool status, const etcd_kv *kv, bool deleted) {
        json_t **slot = status ? &o->status : &o->main;
        int64_t *mod = status ? &o->status_mod : &o->main_mod;
        json_t *sent = status ? o->sent_status : o->sent_main;
        json_t *v = NULL;
        bool echo;

        if (kv->mod_revision && kv->mod_revision <= *mod)
                return; /* this node's write, applied when etcd answered it; or stale */
        /* a watch's value comes read (off the loop); a relist's is read here */
        if (!deleted && !(v = etcd_kv_json(kv))) {
                log_warning("fleet: %s is not JSON; skipped", kv->key);
                return;
        }
        echo = o->in_flight &&
               (deleted ? o->sent_delete
                        : (status ? o->sent_put_status : o->sent_put_main) && json_equal(v, sent));
        log_debug("fleet: %s %s at %" PRId64 "%s%s%s%s", kv->key, deleted ? "deleted" : "put",
                  kv->mod_revision, echo ? " (echo)" : "", o->in_flight ? " (in flight)" : "",
                  o->dirty ? " (dirty)" : "", o->dirty_main ? " (main dirty)" : "");
        if (echo && !status && !deleted && !o->main && o->kind == STORE_POD && f->c.agent)
                agent_touch(f->c.agent, o->kind, o->ns, o->name); /* etcd has it: may start */
        json_decref(*slot);
        *slot = v;
        *mod = deleted ? 0 : kv->mod_revision;
        if (!status)
                o->main_create = deleted ? 0 : kv->create_revision;
        if (echo) {
                o->echoed = true;
                return; /* the write that is out: its answer settles it */
        }
        if (o->in_flight) {
                /* that write is refused, or goes on; what this node writes
                 * after it is rebased on etcd's change once it is answered */
                if (status)
                        o->remote_status = true;
                else
                        o->remote_main = true;
                return;
        }
        /* this node's own value (its answer was lost): acknowledged. Only
         * then: the same value from another node is another's write, made
         * without this one (two clients that both read 5 and wrote 6; both
         * acknowledged, one increment would be lost) */
        if (o->unsure && o->dirty && !deleted && (status ? o->dirty_status : o->dirty_main) &&
            json_equal(v, status ? o->want_status : o->want_main)) {
                if (status)
                        o->dirty_status = false;
                else
                        o->dirty_main = false;
                if (!o->dirty_main && !o->dirty_status) {
                        o->dirty = false;
                        o->pending_from = 0;
                }
                return;
        }
        /* Another's write of a key this node meant to write: it wins (the
         * agent decides again on it). Of the other key: this node's write
         * of it goes on, and what it sends of this one is etcd's. */
        if (o->dirty && (status ? o->dirty_status : o->dirty_main)) {
                fleet__objects_failed(f, o, 409);
                o->dirty = o->dirty_main = o->dirty_status = false;
                o->pending_from = 0;
        } else if (o->dirty) {
                json_t **want = status ? &o->want_status : &o->want_main;
                json_decref(*want);
                *want = json_incref(v);
        }
        /* (objs_dirty too: from a refused txn's refresh(), the settle that
         * follows applies it at once, and a request meanwhile is not judged
         * on the old copy) */
        o->apply = f->objs_dirty = true;
}

bool fleet__objects_key(fleet *f, const etcd_kv *kv, bool deleted) {
        const char *rest = startswith(kv->key, f->p_all), *ns, *slash;
        bool status = false;
        int k = -1;

        unstage(f, 0);

        if (!rest)
                return false;
        if (startswith(rest, "status/"))
                rest += strlen("status/"), status = true;
        for (int i = 0; i < (int) ELEMENTSOF(kind_names); i++)
                if (kind_names[i] && startswith(rest, kind_names[i]) &&
                    rest[strlen(kind_names[i])] == '/') {
                        k = i;
                        break;
                }
        if (k < 0)
                return status; /* another kind of status: not ours to read */
        ns = rest + strlen(kind_names[k]) + 1;
        slash = strchr(ns, '/');
        if (!slash || slash == ns || !slash[1])
                return true;
        _cleanup_free_ char *nsd = strndup(ns, (size_t) (slash - ns));
        /* a key no object could have (a name longer than any, a namespace
         * that is no DNS label) is no object's: it would be one that
         * nothing deletes */
        if (nsd && (!spec_is_dns_label(nsd) || !spec_is_dns_subdomain(slash + 1))) {
                if (!deleted)
                        log_warning("fleet: %s: no %s may have that namespace and name; skipped",
                                    kv->key, kind_names[k]);
                return true;
        }
        fobj *o = nsd ? fobj_get(f, (store_kind) k, nsd, slash + 1, !deleted) : NULL;
        if (o) {
                remote(f, o, status, kv, deleted);
                f->objs_dirty = true;
        }
        return true;
}

/* A relist is a whole snapshot: what the mirror has and the list lacks
 * went while the watch was down; what the local store has and etcd never
 * had (a copy from an earlier run) goes too. */
void fleet__objects_relisted(fleet *f, const etcd_result *r) {
        _cleanup_(tend_hashmap_freep) tend_hashmap *present = tend_hashmap_new();
        const char *key;
        void *v;

        unstage(f, 0);
        if (!present)
                return;
        for (size_t i = 0; i < r->n_kvs; i++)
                (void) tend_hashmap_put(present, r->kvs[i].key, (void *) 1, NULL);
        for (size_t i = 0; tend_hashmap_next(f->objs, &i, &key, &v);) {
                fobj *o = v;
                for (int s = 0; s < 2; s++) {
                        _cleanup_free_ char *ek = etcd_key(f, o, s);
                        if (ek && (s ? o->status : o->main) && !tend_hashmap_get(present, ek))
                                remote(f, o, s, &(etcd_kv){ .key = ek }, true);
                }
        }
        for (int k = 0; k < (int) ELEMENTSOF(kind_names); k++) {
                const void *const *items;
                size_t n = store_list(f->store, (store_kind) k, &items);
                for (size_t i = 0; i < n; i++) {
                        const spec_meta *m = spec_object_meta(items[i]);
                        fobj *o = fobj_get(f, (store_kind) k, m->namespace, m->name, true);
                        if (o && !o->main && !o->dirty && !o->in_flight)
                                o->apply = true;
                }
        }
        fleet__events_relisted(f, r);
        f->objs_dirty = true;
        schedule_flush(f, 0); /* what was written here before (re)joining */
}

/* ---- the local store → etcd ----------------------------------------------------------------- */

/* A write goes once the loop has nothing more to do at once (what the
 * agent's pass, a runtime's report and the next pass write go together:
 * a pod's start and its Running are one write, not two), held at most
 * FLUSH_HOLD while the loop stays busy; msec > 0: a retry, that late. */
static void schedule_flush(fleet *f, uint64_t msec) {
        if (f->closing)
                return;
        if (msec) {
                if (!uv_is_active((uv_handle_t *) &f->flush))
                        uv_timer_start(&f->flush, fleet__objects_flush_cb, msec, 0);
                return;
        }
        usec_t now = now_monotonic();
        if (!uv_is_active((uv_handle_t *) &f->flush_idle)) {
                f->flush_asked = now;
                uv_prepare_start(&f->flush_idle, fleet__objects_flush_idle_cb);
        }
        /* a poll between this write and the flush (a write in the turn
         * that was to flush puts it off), unless it waited FLUSH_POLL_MAX */
        if (now - f->flush_asked < FLUSH_POLL_MAX) {
                f->flush_turns = 0;
                uv_idle_start(&f->flush_turn, fleet__objects_flush_turn_cb);
        }
}

/* (while it runs, the loop's poll does not block) */
void fleet__objects_flush_turn_cb(uv_idle_t *h) {
        fleet *f = h->data;

        if (++f->flush_turns >= 2)
                uv_idle_stop(h); /* a poll has come between */
}

void fleet__objects_flush_idle_cb(uv_prepare_t *h) {
        fleet *f = h->data;

        if (uv_is_active((uv_handle_t *) &f->flush_turn))
                return;
        /* more work queued for this turn of the loop (an idle handle, a
         * timer due): it may write more */
        if (uv_backend_timeout(h->loop) == 0) {
                usec_t now = now_monotonic();
                if (!f->flush_wanted)
                        f->flush_wanted = now;
                if (now - f->flush_wanted < FLUSH_HOLD)
                        return;
        }
        f->flush_wanted = 0;
        if (f->staged) {
                /* the staged changes first, in this turn; the flush in one
                 * after it (and after a poll) */
                bool more = unstage(f, UNSTAGE_SLICE);
                f->flush_turns = 0;
                uv_idle_start(&f->flush_turn, fleet__objects_flush_turn_cb);
                if (!more)
                        check_waiters(f); /* (a change that etcd has already) */
                return;
        }
        uv_prepare_stop(h);
        flush(f);
}

/* A local change's values for etcd: its two keys' values made from the
 * object as the store has it now, and whether (and under which fence)
 * they are to be written. false: out of memory (the change is sent at
 * the next resync). */
static bool unstage_one(fleet *f, fobj *o) {
        const void *obj = o->staged_deleted ? NULL : store_get(f->store, o->kind, o->ns, o->name);
        json_t *main = NULL, *status = NULL;
        bool was_dirty = o->staged_was_dirty, node_write, deleted = !obj, same_main, same_status;
        int64_t term;

        o->staged = false;
        if (obj && split(o->kind, obj, &main, &status) < 0) {
                log_warning("fleet: %s/%s/%s: out of memory; it is sent at the next resync",
                            kind_names[o->kind], o->ns, o->name);
                o->dirty = was_dirty;
                if (!was_dirty)
                        o->pending_from = 0;
                return false;
        }
        json_decref(o->want_main);
        json_decref(o->want_status);
        o->want_main = main;
        o->want_status = status;
        /* (each a large object's whole tree: compared once) */
        same_main = json_equal(main, o->main);
        same_status = json_equal(status, o->status);
        if (!o->in_flight && same_main && same_status && !(deleted && o->main)) {
                /* what etcd has already (put back by a refusal, or unchanged) */
                o->dirty = o->dirty_main = o->dirty_status = false;
                o->pending_from = 0;
                if (deleted)
                        fobj_maybe_forget(f, o);
                return true;
        }
        if (!was_dirty && !o->in_flight)
                o->unsure = false; /* a write of its own, after the unsure one settled */
        o->dirty = true;
        o->dirty_main = deleted || !same_main;
        o->dirty_status = !deleted && !same_status;
        /* The leader's writes are fenced on its term (even if its lease ran
         * out during the pass: etcd then refuses them), and stay fenced
         * while they wait; a node's status of its own pod is not the
         * leader's (it would be undone with the leadership). */
        node_write = o->kind == STORE_POD && !o->dirty_main &&
                     streq_ptr(((const spec_pod *) obj)->spec.node_name, f->node_name);
        term = node_write ? 0 : o->staged_term;
        o->fence_at = was_dirty ? MAX(o->fence_at, term) : term;
        /* the texts the flush sends, made here: a large object's is a
         * slice's worth of its own */
        if (o->dirty_main && main)
                (void) ftext_make(&o->main_text, main);
        if (o->dirty_status && status)
                (void) ftext_make(&o->status_text, status);
        return true;
}

/* The staged changes split into their values, the oldest first; with
 * budget, only as many as fit in it (the rest wait for the next turn).
 * Whatever reads or writes the mirror's state unstages every change
 * first: only the flush does it a slice at a time, in a turn of its own.
 * Returns whether any is left. */
static bool unstage(fleet *f, usec_t budget) {
        usec_t start = budget ? now_monotonic() : 0;

        while (f->staged) {
                fobj *o = f->staged;
                f->staged = o->next_staged;
                o->next_staged = NULL;
                if (!f->staged)
                        f->staged_tail = &f->staged;
                (void) unstage_one(f, o);
                if (budget && f->staged && now_monotonic() - start >= budget)
                        return true;
        }
        return false;
}

/* A change of the local store: staged (split into etcd's values in a
 * turn of its own, not in the commit that made it: a large object's
 * encoding is a slice's worth). */
static void on_local_change(store_kind kind, store_change change, const void *obj, void *u) {
        fleet *f = u;
        const spec_meta *m = spec_object_meta(obj);
        int64_t term;
        fobj *o;

        if (f->applying)
                return;
        if (kind == STORE_EVENT) {
                fleet__events_local(f, change, obj);
                return;
        }
        if (kind >= (store_kind) ELEMENTSOF(kind_names))
                return;
        o = fobj_get(f, kind, m->namespace, m->name, true);
        if (!o) {
                log_oom();
                return;
        }
        if (o->gone) { /* etcd deleted it: nothing of it goes back */
                if (change == STORE_DELETED)
                        o->gone = false, fobj_maybe_forget(f, o);
                return;
        }
        if (f->recording) { /* a write of the API request being answered */
                _cleanup_free_ char *key = obj_key(kind, o->ns, o->name);
                if (!key ||
                    (!strv_contains(f->req_keys, key) && strv_extend(&f->req_keys, key) < 0))
                        log_oom(); /* its answer does not wait for this one */
        }
        term = f->leading ? f->fence : 0;
        if (!o->staged) {
                o->staged = true;
                o->staged_was_dirty = o->dirty;
                o->staged_term = term;
                *f->staged_tail = o;
                f->staged_tail = &o->next_staged;
        } else
                o->staged_term = MAX(o->staged_term, term);
        o->staged_deleted = change == STORE_DELETED;
        o->dirty = true;
        o->seq = ++f->seq;
        if (!o->pending_from)
                o->pending_from = o->seq;
        schedule_flush(f, 0);
}

/* Takes o out of what is to be sent, and puts the local object back to
 * what etcd has. */
static void undo(fleet *f, fobj *o, unsigned code) {
        if (o->dirty)
                fleet__objects_failed(f, o, code);
        o->dirty = o->dirty_main = o->dirty_status = false;
        o->pending_from = 0;
        o->apply = true;
        f->objs_dirty = true;
}

/* The compares and operations of o's write, and in fail what etcd has of
 * its keys should it be refused. 0: nothing to send; 1: added; -E2BIG:
 * larger than a txn may be; -ENOSPC: not within *room bytes (left for the
 * next txn). */
static int build(fleet *f, fobj *o, json_t *cmp, json_t *ops, json_t *fail, size_t *room) {
        _cleanup_free_ char *km = etcd_key(f, o, false), *ks = etcd_key(f, o, true);
        bool del = !o->want_main;
        bool put_main = !del && o->dirty_main && !json_equal(o->want_main, o->main);
        bool put_status = !del && o->dirty_status && o->want_status &&
                          !json_equal(o->want_status, o->status);
        const char *tm = NULL, *ts = NULL;
        size_t bytes;

        if (!km || !ks)
                return -ENOMEM;
        if (del && !o->main)
                return 0; /* not in etcd */
        if (!del && !put_main && !put_status)
                return 0;
        /* (canonical, as json_dumps(JSON_COMPACT | JSON_SORT_KEYS) writes
         * it, three times as fast; made by unstage() already) */
        if (put_main && !(tm = ftext_get(&o->main_text, o->want_main)))
                return -ENOMEM;
        if (put_status && !(ts = ftext_get(&o->status_text, o->want_status)))
                return -ENOMEM;
        bytes = strlen(km) + strlen(ks) + (tm ? strlen(tm) : 0) + (ts ? strlen(ts) : 0);
        if (bytes > BATCH_BYTES)
                return -E2BIG;
        if (bytes > *room)
                return -ENOSPC;
        _cleanup_(json_decrefp) json_t *c = json_array(), *o_ops = json_array(), *fl = json_array();
        if (!c || !o_ops || !fl)
                return -ENOMEM;
        if ((del || put_main
                     ? json_array_append_new(
                               c, o->main ? etcd_cmp_revision(km, "mod", "EQUAL", o->main_mod)
                                          : etcd_cmp_revision(km, "create", "EQUAL", 0))
                     /* the status of the object etcd has, not of a namesake made since */
                     : json_array_append_new(
                               c, etcd_cmp_revision(km, "create", "EQUAL", o->main_create))) < 0 ||
            json_array_append_new(fl, etcd_op_range(km, NULL)) < 0 ||
            json_array_append_new(fl, etcd_op_range(ks, NULL)) < 0)
                return -ENOMEM;
        if (del && (json_array_append_new(o_ops, etcd_op_delete(km, NULL)) < 0 ||
                    json_array_append_new(o_ops, etcd_op_delete(ks, NULL)) < 0))
                return -ENOMEM;
        if (put_main && json_array_append_new(o_ops, etcd_op_put(km, tm, strlen(tm), 0)) < 0)
                return -ENOMEM;
        if (put_status &&
            (json_array_append_new(c, etcd_cmp_revision(ks, "mod", "EQUAL", o->status_mod)) < 0 ||
             json_array_append_new(o_ops, etcd_op_put(ks, ts, strlen(ts), 0)) < 0))
                return -ENOMEM;
        /* all of it or nothing: a compare left out would write blindly */
        if (json_array_extend(cmp, c) < 0 || json_array_extend(ops, o_ops) < 0 ||
            json_array_extend(fail, fl) < 0)
                return -ENOMEM;
        *room -= bytes;
        ftext_forget(&o->main_text); /* (in the txn now, as base64) */
        ftext_forget(&o->status_text);
        o->sent_put_main = put_main;
        o->sent_put_status = put_status;
        o->sent_main_mod = o->main ? o->main_mod : 0;
        o->sent_status_mod = o->status_mod;
        o->sent_main_create = o->main_create;
        return 1;
}

static void on_txn(const etcd_result *r, void *userdata);
static bool rebase(fleet *f, fobj *o, bool sent);

/* o's write is in etcd: acknowledged, and what this node wrote after it
 * rebased on what etcd changed meanwhile (changed). */
static void settle_sent(fleet *f, fobj *o, bool changed) {
        if (o->seq == o->sent_seq) {
                o->dirty = o->dirty_main = o->dirty_status = false;
                o->pending_from = 0;
        } else
                o->pending_from = o->sent_seq + 1;
        if (changed)
                (void) rebase(f, o, false);
        o->remote_main = o->remote_status = false;
}

static void flush(fleet *f) {
        _cleanup_(json_decrefp) json_t *cmp = NULL, *ops = NULL, *fail = NULL;
        int64_t term = f->leading ? f->fence : 0, batch_fence = -1;
        size_t room = BATCH_BYTES;
        const char *key;
        void *v;
        int rr;

        unstage(f, 0);
        if (f->txn_out || !f->joined || f->closing || !f->e)
                return;
        cmp = json_array();
        ops = json_array();
        fail = json_array();
        if (!cmp || !ops || !fail) {
                schedule_flush(f, 1000);
                return;
        }
        f->n_sent = 0;
        /* A batch is the leader's (fenced) or a node's own, never both: a
         * fence that fails must not take a node's own writes with it. They
         * take turns, so that neither waits for good. */
        for (size_t i = 0; tend_hashmap_next(f->objs, &i, &key, &v);) {
                const fobj *o = v;
                if (o->dirty && !o->in_flight && (!o->fence_at || o->fence_at == term) &&
                    (o->fence_at != 0) != f->last_fenced) {
                        batch_fence = o->fence_at;
                        break;
                }
        }
        /* deployments, then ReplicaSets, then pods: a node never sees a pod
         * before its ReplicaSet (it would take it for an orphan), so once
         * something of a kind is left for the next batch of this kind, so is
         * every later kind (both are the leader's: the same kind of batch) */
        bool left = false;
        for (int k = 0; k < (int) ELEMENTSOF(kind_names) && f->n_sent < BATCH_MAX && !left; k++)
                for (size_t i = 0; tend_hashmap_next(f->objs, &i, &key, &v);) {
                        fobj *o = v;
                        if (f->n_sent >= BATCH_MAX || room == 0) {
                                left = true;
                                break;
                        }
                        if (o->kind != (store_kind) k || !o->dirty || o->in_flight)
                                continue;
                        if (o->fence_at && o->fence_at != term) {
                                /* decided as a leader that this node no longer is
                                 * (not a conflict: an API request among its
                                 * writers is answered 503) */
                                undo(f, o, 503);
                                continue;
                        }
                        if (batch_fence >= 0 && o->fence_at != batch_fence)
                                continue; /* the other kind of batch's */
                        rr = build(f, o, cmp, ops, fail, &room);
                        if (rr == -ENOSPC) {
                                left = true;
                                continue;
                        }
                        if (rr == -E2BIG) {
                                log_warning("fleet: %s/%s/%s is larger than etcd takes in one "
                                            "write (%d KiB); not written",
                                            kind_names[o->kind], o->ns, o->name,
                                            BATCH_BYTES / 1024);
                                undo(f, o, 413);
                                continue;
                        }
                        if (rr < 0) {
                                schedule_flush(f, 1000); /* out of memory: later */
                                left = true;
                                continue;
                        }
                        if (rr == 0) { /* etcd has it already (or never had what goes) */
                                o->dirty = o->dirty_main = o->dirty_status = false;
                                o->pending_from = 0;
                                continue;
                        }
                        batch_fence = o->fence_at;
                        o->in_flight = true;
                        o->sent_seq = o->seq;
                        o->sent_delete = !o->want_main;
                        json_decref(o->sent_main);
                        json_decref(o->sent_status);
                        o->sent_main = json_incref(o->want_main);
                        o->sent_status = json_incref(o->want_status);
                        f->sent[f->n_sent++] = o;
                }
        if (f->n_sent == 0) {
                fleet__objects_settle(f);
                return;
        }
        f->last_fenced = batch_fence > 0;
        if (f->last_fenced)
                (void) json_array_append_new(
                        cmp, etcd_cmp_revision(f->k_leader, "create", "EQUAL", batch_fence));
        rr = etcd_txn(f->e, TAKE_PTR(cmp), TAKE_PTR(ops), TAKE_PTR(fail), on_txn, f);
        if (rr < 0) {
                for (size_t i = 0; i < f->n_sent; i++)
                        f->sent[i]->in_flight = false;
                f->n_sent = 0;
                schedule_flush(f, 1000);
                return;
        }
        f->txn_out = true;
}

void fleet__objects_flush_cb(uv_timer_t *t) {
        flush(t->data);
}

/* A refused write: what etcd has now of o's keys (the txn's failure
 * branch), into the mirror as another node's writes. Returns whether o's
 * keys are not at the revisions its write compared (it was a conflict). */
static bool refresh(fleet *f, fobj *o, const etcd_result *r) {

        for (int half = 0; half < 2; half++) {
                _cleanup_free_ char *k = etcd_key(f, o, half);
                const etcd_kv *kv = NULL;
                for (size_t i = 0; k && i < r->n_kvs && !kv; i++)
                        if (streq(r->kvs[i].key, k))
                                kv = &r->kvs[i];
                if (kv)
                        remote(f, o, half, kv, false);
                else if (k && (half ? o->status : o->main)) /* gone, as of the answer */
                        remote(f, o, half, &(etcd_kv){ .key = k, .mod_revision = r->revision },
                               true);
        }
        /* (the watch may have brought the other's write already) */
        if (o->sent_put_status && o->status_mod != o->sent_status_mod)
                return true;
        return o->sent_put_main || o->sent_delete ? o->main_mod != o->sent_main_mod
                                                  : o->main_create != o->sent_main_create;
}

static bool same(const json_t *a, const json_t *b) {
        return a == b || (a && b && json_equal(a, b));
}

/*
 * etcd changed o's keys while its write was out (remote_main, _status):
 * what this node still has to send of o (written here since that write was
 * sent) was decided on a copy without that change, which the copy follows
 * only now. sent: the write that was out is among it (its answer was lost,
 * and the watch did not bring it back: it is not in etcd before the
 * change). A write that changed such a key loses, as a write compared on a
 * revision that is no longer etcd's: 409 to the requests it answers, and
 * the agent decides again on what etcd has. Else what goes of such a key
 * is etcd's value, not the copy's old one: sent as it is, the write would
 * put the old value back over the change, compared on the change's own
 * revision (issue 29: a lost update). Returns whether o's writes lost.
 */
static bool rebase(fleet *f, fobj *o, bool sent) {
        bool main_changed = (sent && (o->sent_put_main || o->sent_delete)) ||
                            !same(o->want_main, o->sent_main);
        bool status_changed = (sent && (o->sent_put_status || o->sent_delete)) ||
                              !same(o->want_status, o->sent_status);
        bool hit = (o->remote_main && (main_changed || !o->main)) || /* !main: etcd deleted it */
                   (o->remote_status && status_changed);

        if (hit) {
                if (o->dirty)
                        undo(f, o, 409);
        } else if (o->dirty) {
                if (o->remote_main) {
                        json_decref(o->want_main);
                        o->want_main = json_incref(o->main);
                        o->dirty_main = false;
                }
                if (o->remote_status) {
                        json_decref(o->want_status);
                        o->want_status = json_incref(o->status);
                        o->dirty_status = false;
                }
                if (!o->dirty_main && !o->dirty_status) {
                        o->dirty = false;
                        o->pending_from = 0;
                }
        }
        o->apply = f->objs_dirty = true;
        return hit;
}

static void on_txn(const etcd_result *r, void *userdata) {
        fleet *f = userdata;
        size_t n = f->n_sent, conflicts = 0;
        bool refused = r->error >= 0 && !r->succeeded;

        unstage(f, 0);
        f->txn_out = false;
        f->n_sent = 0;
        for (size_t i = 0; i < n; i++) {
                fobj *o = f->sent[i];
                bool changed = o->remote_main || o->remote_status, echoed = o->echoed;
                o->in_flight = false;
                o->echoed = false;
                if (r->error < 0 && echoed) {
                        /* the answer was lost, but the watch brought the
                         * write back: etcd has it (and what it put is in the
                         * mirror already) */
                        settle_sent(f, o, changed);
                        continue;
                }
                /* an answer settles it; a try refused at connect (or by
                 * etcd) leaves it as an earlier try made it */
                if (r->error >= 0)
                        o->unsure = false;
                else if (r->unknown)
                        o->unsure = true;
                if (changed && r->error < 0)
                        (void) rebase(f, o, true); /* before it is sent again */
                else if (changed && refused)
                        o->apply = f->objs_dirty = true;
                if (r->error < 0 || refused)
                        o->remote_main = o->remote_status = false;
                if (r->error < 0)
                        continue; /* sent again */
                if (refused) {
                        /* the objects another wrote first are etcd's again (and
                         * the agent decides again); the others go again */
                        if (refresh(f, o, r)) {
                                conflicts++;
                                if (o->dirty)
                                        undo(f, o, 409);
                        }
                        continue;
                }
                if (o->sent_delete) {
                        /* gone, unless the watch brought a later one */
                        if (o->main_mod < r->revision) {
                                json_decref(o->main);
                                o->main = NULL;
                                o->main_mod = o->main_create = 0;
                        }
                        if (o->status_mod < r->revision) {
                                json_decref(o->status);
                                o->status = NULL;
                                o->status_mod = 0;
                        }
                } else {
                        /* what this write put, unless the watch brought a later
                         * one (etcd's change while it was out: after it) */
                        if (o->sent_put_main && o->main_mod < r->revision) {
                                if (!o->main) {
                                        o->main_create = r->revision;
                                        if (o->kind == STORE_POD && f->c.agent) /* may start */
                                                agent_touch(f->c.agent, o->kind, o->ns, o->name);
                                }
                                json_decref(o->main);
                                o->main = json_incref(o->sent_main);
                                o->main_mod = r->revision;
                        }
                        if (o->sent_put_status && o->status_mod < r->revision) {
                                json_decref(o->status);
                                o->status = json_incref(o->sent_status);
                                o->status_mod = r->revision;
                        }
                }
                settle_sent(f, o, changed);
        }
        log_debug("fleet: a write of %zu object%s: %s", n, n == 1 ? "" : "s",
                  r->error < 0 ? "failed"
                  : refused    ? "refused"
                               : "done");
        if (r->error < 0) {
                log_warning("fleet: writing %zu object%s to etcd: %s; trying again", n,
                            n == 1 ? "" : "s", strna(r->message));
                schedule_flush(f, 1000);
        } else if (refused) {
                log_info("fleet: a write of %zu object%s was refused (%s); deciding again", n,
                         n == 1 ? "" : "s",
                         conflicts ? "another node wrote one first" : "this node no longer leads");
                /* no key changed: the fence (or a compare that cannot hold) —
                 * what was decided here is undone, not sent again */
                if (!conflicts)
                        for (size_t i = 0; i < n; i++)
                                if (f->sent[i]->dirty)
                                        undo(f, f->sent[i], f->last_fenced ? 503 : 409);
        }
        for (size_t i = 0; i < n; i++)
                fobj_maybe_forget(f, f->sent[i]);
        fleet__objects_settle(f);
        if (r->error >= 0) /* else the retry, a second later */
                schedule_flush(f, 0);
}

/* ---- waiting for etcd (an API write is answered once etcd has it) ------------------------- */

/* Whether o has a write of a request's (up to seq) not acknowledged. */
static bool unacknowledged(const fobj *o, uint64_t seq) {
        return (o->dirty || o->in_flight) && o->pending_from && o->pending_from <= seq;
}

void fleet__objects_failed(fleet *f, const fobj *o, unsigned code) {
        _cleanup_free_ char *key = obj_key(o->kind, o->ns, o->name);

        for (fwaiter *w = f->waiters; w; w = w->next)
                if (key && !w->failed && unacknowledged(o, w->seq) && strv_contains(w->keys, key))
                        w->failed = code;
}

/* Whether one of a request's writes (of keys, up to seq) is not
 * acknowledged (out_only: and out to etcd). */
static bool pending_for(fleet *f, char *const *keys, uint64_t seq, bool out_only) {
        for (size_t i = 0; keys && keys[i]; i++) {
                const fobj *o = tend_hashmap_get(f->objs, keys[i]);
                if (o && (!out_only || o->in_flight) && unacknowledged(o, seq))
                        return true;
        }
        return false;
}

/* Withdraws w's writes not yet out to etcd (undone: the local copies go
 * back to etcd's), failing the requests among them with code, or UNSURE
 * where an answer of etcd's was lost before. Returns whether any was. */
static bool withdraw(fleet *f, const fwaiter *w, unsigned code) {
        bool any = false;

        for (size_t i = 0; w->keys && w->keys[i]; i++) {
                fobj *o = tend_hashmap_get(f->objs, w->keys[i]);
                if (!o || o->in_flight || !unacknowledged(o, w->seq))
                        continue;
                log_warning("fleet: %s/%s/%s: %s; withdrawn", kind_names[o->kind], o->ns, o->name,
                            code == 504 ? "etcd has not taken it in time"
                                        : "another write of its request lost");
                undo(f, o, o->unsure ? UNSURE : code);
                o->unsure = false;
                any = true;
        }
        return any;
}

/*
 * A request etcd has not acknowledged within WAIT_MAX: what of it is still
 * queued here is withdrawn (undone: the local copy goes back to etcd's),
 * so that its 504 means nothing of it is applied later, and a client may
 * try again elsewhere (issue 29: a 504 applied minutes later, a retry
 * elsewhere applied too). A write that is out to etcd then is waited for
 * (etcd's client gives up on it in seconds): its answer says. One whose
 * answer was lost earlier may be in etcd: its 504 says that instead.
 * Returns whether anything was withdrawn.
 */
static bool withdraw_late(fleet *f, usec_t now) {
        bool any = false;

        for (fwaiter *w = f->waiters; w; w = w->next)
                if (now >= w->deadline && pending_for(f, w->keys, w->seq, false) &&
                    !pending_for(f, w->keys, w->seq, true))
                        any |= withdraw(f, w, 504);
        return any;
}

/* A request is all or nothing: once one of its writes lost (a conflict,
 * the leader's term), the others not yet out to etcd are withdrawn too
 * (issue 29: a List applied through a node, answered 409 while the objects
 * that did not conflict were written after all). Returns whether any was. */
static bool withdraw_failed(fleet *f) {
        bool any = false;

        for (fwaiter *w = f->waiters; w; w = w->next)
                if (w->failed)
                        any |= withdraw(f, w, w->failed);
        return any;
}

static bool apply_marked(fleet *f);

/* Why a waiter's writes failed, as its answer says. */
static const char *waiter_failure(unsigned failed) {
        switch (failed) {
        case 504:
                return "etcd has not taken the write within 10 s: it was withdrawn, nothing of it "
                       "is applied; try again";
        case UNSURE:
                return "etcd has not acknowledged the write within 10 s, and an answer of etcd's "
                       "to it was lost: it may have been applied; read the object to see whether "
                       "it was";
        case 503:
                return "this node stopped leading the fleet before etcd took the write (it lost "
                       "touch with etcd): nothing was applied; try again";
        case 413:
                return "the object is larger than etcd takes in one write; it was not written";
        default:
                return "the object was changed on another node first; read it again and retry";
        }
}

static void check_waiters(fleet *f) {
        usec_t now;
        bool late, failed = false;

        unstage(f, 0);
        now = now_monotonic();
        late = withdraw_late(f, now);

        while (withdraw_failed(f)) /* (a withdrawal may fail other requests) */
                failed = true;

        if ((late || failed) && apply_marked(f) && f->c.agent)
                agent_kick(f->c.agent); /* it decides again on what etcd has */
        for (fwaiter **p = &f->waiters; *p;) {
                fwaiter *w = *p;
                if (pending_for(f, w->keys, w->seq, false)) { /* (out to etcd: its answer says) */
                        p = &w->next;
                        continue;
                }
                *p = w->next;
                if (w->failed) {
                        unsigned code = w->failed == UNSURE ? 504 : w->failed;
                        w->done(code, spec_status_json(code, NULL, waiter_failure(w->failed), NULL),
                                w->req);
                } else
                        w->done(0, NULL, w->req);
                strv_free(w->keys);
                free(w);
        }
}

uint64_t fleet__objects_mark(fleet *f) {
        /* a request begins: the objects it writes are noted (on_local_change) */
        strv_free(f->req_keys);
        f->req_keys = NULL;
        f->recording = true;
        return f->seq;
}

void fleet__objects_touch(fleet *f, store_kind kind, const char *ns, const char *name) {
        _cleanup_free_ char *key = NULL;

        /* its writes not yet in etcd, this request's or earlier ones, are
         * waited for: a write that changed nothing here was decided on them
         * (issue 29: an apply answered 0 whose state never reached etcd,
         * the earlier write it matched being refused) */
        if (!f->recording || kind >= (store_kind) ELEMENTSOF(kind_names))
                return;
        key = obj_key(kind, ns, name);
        if (!key || (!strv_contains(f->req_keys, key) && strv_extend(&f->req_keys, key) < 0))
                log_oom();
}

void fleet__objects_mark_end(fleet *f) {
        /* (sync() took them, when the answer waits for etcd) */
        strv_free(f->req_keys);
        f->req_keys = NULL;
        f->recording = false;
}

int fleet__objects_sync(fleet *f, uint64_t since,
                        void (*done)(unsigned code, json_t *answer, void *req), void *req) {
        _cleanup_strv_free_ char **keys = TAKE_PTR(f->req_keys);
        fwaiter *w;

        f->recording = false;
        if (!pending_for(f, keys, f->seq, false))
                return 1; /* etcd has every write of the request */
        w = new0(fwaiter, 1);
        if (!w)
                return -ENOMEM;
        *w = (fwaiter){ .next = f->waiters,
                        .keys = TAKE_PTR(keys),
                        .from = since,
                        .seq = f->seq,
                        .deadline = now_monotonic() + WAIT_MAX,
                        .done = done,
                        .req = req };
        f->waiters = w;
        return 0;
}

void fleet__objects_cancel(fleet *f, void *req) {
        for (fwaiter **p = &f->waiters; *p;) {
                fwaiter *w = *p;
                if (w->req != req) {
                        p = &w->next;
                        continue;
                }
                *p = w->next;
                strv_free(w->keys);
                free(w);
        }
}

/* ---- the agent's view of the fleet (agent_fleet) ------------------------------------------- */

/* Leading, and the mirror has caught up with the win (docs/fleet.md §3.5). */
static bool agent_leads(fleet *f) {
        int64_t fence;
        return fleet_leading(f, &fence) && f->revision >= fence;
}

static void sched_free(fleet *f) {
        for (size_t i = 0; f->sched_labels && i < f->n_sched_labels; i++)
                spec_map_done(&f->sched_labels[i]);
        free(f->sched_labels);
        free(f->sched);
        f->sched_labels = NULL;
        f->sched = NULL;
}

bool fleet_agent_leading(void *userdata) {
        fleet *f = *(fleet **) userdata;
        bool leads = f && f->joined && agent_leads(f);

        if (f && leads != f->agent_leading)
                schedule_flush(f, 0); /* its settle tells the agent: a resync */
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
        sched_free(f);
        f->sched = new0(plan_node, tend_hashmap_size(f->nodes) + 1);
        f->sched_labels = new0(spec_map, tend_hashmap_size(f->nodes) + 1);
        f->n_sched_labels = f->sched_labels ? tend_hashmap_size(f->nodes) + 1 : 0;
        if (!f->sched || !f->sched_labels)
                return 0;
        for (size_t i = 0; tend_hashmap_next(f->nodes, &i, &key, &v);) {
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
                            spec_map_set(&f->sched_labels[n], lk, json_string_value(lv)) < 0)
                                return 0; /* out of memory: no node fits, for now */
                f->sched[n] = (plan_node){
                        .name = fn->name,
                        .ready = fn->holder != NULL,
                        .unschedulable = json_is_true(json_object_get(
                                json_object_get(fn->node, "spec"), "unschedulable")),
                        .capacity = (int32_t) MIN(MAX(c, 0), INT32_MAX),
                        .labels = &f->sched_labels[n],
                };
                n++;
        }
        *ret = f->sched;
        return n;
}

bool fleet_agent_in_etcd(void *userdata, const spec_pod *p) {
        fleet *f = *(fleet **) userdata;
        fobj *o = f && f->objs
                          ? fobj_get(f, STORE_POD, p->metadata.namespace, p->metadata.name, false)
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
        const fnode *n = f ? tend_hashmap_get(f->nodes, node) : NULL;
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
        if (!f->c.compaction || !agent_leads(f) || !f->e) {
                f->compact_at = 0;
                return;
        }
        if (f->compact_at && now < f->compact_at)
                return;
        if (f->compact_at && f->compact_rev > 0)
                (void) etcd_compact(f->e, f->compact_rev, on_compacted, f);
        f->compact_rev = f->revision;
        f->compact_at = now + f->c.compaction;
}

static void on_lifecycle(uv_timer_t *t) {
        fleet *f = t->data;
        bool fenced = is_fenced(f);

        if (f->waiters) /* their deadlines, whatever etcd does */
                check_waiters(f);

        if (fenced != f->fenced && f->c.agent) {
                f->fenced = fenced;
                log_info("fleet: %s",
                         fenced ? "cut off from etcd: pods under tend.io/node-lost-policy: "
                                  "fence stop"
                                : "back in touch with etcd: pods under fence may run");
                agent_fleet_changed(f->c.agent);
        }
        usec_t now = now_monotonic();
        size_t n = tend_hashmap_size(f->nodes), k = 0, held = 0, n_pods;
        _cleanup_free_ plan_node_state *st = new0(plan_node_state, n + 1);
        _cleanup_free_ plan_node_verdict *v = new0(plan_node_verdict, n + 1);
        _cleanup_strv_free_ char **unknown = NULL;
        const void *const *pods;
        const char *key;
        void *val;
        plan_fleet_view view;

        compact(f, now);
        if (!f->c.agent || !f->joined || !agent_leads(f) || !st || !v)
                return;
        for (size_t i = 0; tend_hashmap_next(f->nodes, &i, &key, &val) && k < n;) {
                const fnode *fn = val;
                /* a new leader starts the clocks at its takeover */
                st[k++] = (plan_node_state){ .name = fn->name,
                                             .live = fn->holder != NULL,
                                             .lost_since = MAX(fn->lost_mono, f->leading_since) };
        }
        view = plan_node_lifecycle(st, k, now, f->c.lost_after, PLAN_FLEET_DISRUPTION,
                                   f->leading_since, (usec_t) f->c.ttl * USEC_PER_SEC, v);
        for (size_t i = 0; i < k; i++)
                if (v[i] == PLAN_NODE_EVICT)
                        (void) agent_evict_node(f->c.agent, st[i].name, false,
                                                now - MIN(st[i].lost_since, now));
                else if (v[i] == PLAN_NODE_HOLD)
                        held++;
        if (view.disrupted && held && !f->disrupted)
                log_warning("fleet: %zu of %zu nodes lost their leases together (or this node "
                            "leads since less than a TTL): evicting nothing until they come back "
                            "(FleetDisruption)",
                            held, k);
        f->disrupted = view.disrupted && held;
        /* pods of a node that was deleted (no Node, no lease): removed */
        n_pods = store_list(f->store, STORE_POD, &pods);
        for (size_t i = 0; i < n_pods; i++) {
                const char *node = ((const spec_pod *) pods[i])->spec.node_name;
                if (node && !tend_hashmap_get(f->nodes, node) && !strv_contains(unknown, node))
                        (void) strv_extend(&unknown, node);
        }
        for (size_t i = 0; unknown && unknown[i]; i++)
                (void) agent_evict_node(f->c.agent, unknown[i], true, 0);
}

/* ---- life -------------------------------------------------------------------------------------
 */

/* The local copies marked (apply) become what etcd has. Returns whether
 * any was. */
static bool apply_marked(fleet *f) {
        const char *key;
        void *v;
        bool wrote = false;
        int r;

        if (f->objs_dirty && f->store) {
                f->objs_dirty = false;
                (void) store_commit(f->store, false); /* a pass's, should one be open */
                unstage(f, 0);                        /* (its changes too) */
                f->applying = true;
                for (size_t i = 0; tend_hashmap_next(f->objs, &i, &key, &v);) {
                        fobj *o = v;
                        if (!o->apply)
                                continue;
                        r = apply_local(f, o);
                        if (r < 0)
                                log_warning_errno(r, "fleet: %s: cannot apply etcd's state: %m",
                                                  key);
                        wrote = true;
                }
                r = store_commit(f->store, false);
                if (r < 0)
                        log_warning_errno(r, "fleet: cannot write the mirror to the store: %m");
                f->applying = false;
                /* entries that hold nothing any more */
                size_t n = 0, all = tend_hashmap_size(f->objs);
                _cleanup_free_ fobj **idle = new0(fobj *, all + 1);
                for (size_t i = 0; idle && tend_hashmap_next(f->objs, &i, &key, &v);) {
                        fobj *o = v;
                        if (!o->main && !o->status && !o->dirty && !o->in_flight && !o->apply &&
                            !o->gone && n < all)
                                idle[n++] = o;
                }
                for (size_t i = 0; i < n; i++)
                        fobj_maybe_forget(f, idle[i]);
        }
        return wrote;
}

void fleet__objects_settle(fleet *f) {
        bool leads = f->joined && agent_leads(f), wrote = apply_marked(f);

        if (f->c.agent && (leads != f->agent_leading || f->nodes_changed)) {
                f->agent_leading = leads;
                f->nodes_changed = false;
                agent_fleet_changed(f->c.agent);
        } else if (f->c.agent && wrote)
                agent_kick(f->c.agent);
        check_waiters(f);
}

int fleet__objects_init(fleet *f) {
        int r;

        if (!f->c.agent)
                return 0;
        f->store = agent_get_store(f->c.agent);
        f->objs = tend_hashmap_new();
        if (!f->objs)
                return -ENOMEM;
        f->staged_tail = &f->staged;
        uv_timer_start(&f->lifecycle, on_lifecycle, 500, 500);
        r = fleet__events_init(f);
        if (r < 0)
                return r;
        return store_subscribe(f->store, on_local_change, f);
}

void fleet__objects_close(fleet *f) {
        if (f->store)
                store_unsubscribe(f->store, on_local_change, f);
        f->store = NULL;
        while (f->waiters) {
                fwaiter *w = f->waiters;
                f->waiters = w->next;
                strv_free(w->keys);
                free(w);
        }
        strv_free(f->req_keys);
        f->req_keys = NULL;
}

void fleet__objects_free(fleet *f) {
        const char *key;
        void *v;

        for (size_t i = 0; f->objs && tend_hashmap_next(f->objs, &i, &key, &v);)
                fobj_free(v);
        tend_hashmap_free(f->objs);
        sched_free(f);
        fleet__events_free(f);
}
