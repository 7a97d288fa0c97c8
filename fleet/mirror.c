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

#include "mirror.h"

#define BATCH_MAX 60 /* objects per txn: 2 puts each, under etcd's 128 operations */
/* bytes of keys and values per txn: base64 makes them a third larger, under
 * etcd's 1.5 MiB request limit */
#define BATCH_BYTES (1024 * 1024)
#define FLUSH_HOLD (20 * USEC_PER_MSEC)    /* the longest a write waits for more to go with it */
#define UNSTAGE_SLICE (20 * USEC_PER_MSEC) /* local changes split in one turn of the loop */
/* the longest a write's flush is put off for a poll first (by later writes) */
#define FLUSH_POLL_MAX (100 * USEC_PER_MSEC)

static char *etcd_key(fleet *f, const fobj *o, bool status) {
        return strprintf("%s%s%s/%s/%s", f->p_all, status ? "status/" : "",
                         fleet__kind_name(o->kind), o->ns, o->name);
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

fobj *fleet__fobj_get(fleet *f, store_kind k, const char *ns, const char *name, bool create) {
        _cleanup_free_ char *key = fleet__obj_key(k, ns, name);
        fobj *o = key ? tend_hashmap_get(f->m.objs, key) : NULL;

        if (o || !create || !key)
                return o;
        o = new0(fobj, 1);
        if (!o)
                return NULL;
        o->kind = k;
        o->ns = strdup(strempty(ns));
        o->name = strdup(strempty(name));
        if (!o->ns || !o->name || tend_hashmap_put(f->m.objs, key, o, NULL) < 0) {
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
        key = fleet__obj_key(o->kind, o->ns, o->name);
        if (key && tend_hashmap_remove(f->m.objs, key) == o)
                fobj_free(o);
}

/* o's local copy is to follow etcd at the next settle (its list). */
static void mark_apply(fleet *f, fobj *o) {
        f->m.dirty = true;
        if (o->listed) {
                o->apply = true;
                return;
        }
        if (TEND_GROW(f->m.marked, f->m.marked_alloc, f->m.n_marked + 1) < 0) {
                log_oom();
                return; /* (not marked: applied when etcd next says it) */
        }
        o->apply = o->listed = true;
        f->m.marked[f->m.n_marked++] = o;
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
        /* (a kind without a status, a ConfigMap: an empty one) */
        st = json_object_get(j, "status")
                     ? json_pack("{s:O}", "status", json_object_get(j, "status"))
                     : json_object();
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
        if ((v = json_object_get(status, "status")) && !json_is_null(v))
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
        return store_put(f->m.store, STORE_POD, n, NULL);
}

/* The local object becomes what etcd has. */
static int apply_local(fleet *f, fobj *o) {
        const void *cur = store_get(f->m.store, o->kind, o->ns, o->name);
        const spec_type *t = store_kind_type(o->kind);
        _cleanup_(json_decrefp) json_t *j = NULL;
        spec_errors errs = {};
        void *obj = NULL;
        int r;

        o->apply = false;
        log_debug("fleet: %s/%s/%s: the local copy follows etcd", fleet__kind_name(o->kind), o->ns,
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
                return store_delete(f->m.store, o->kind, o->ns, o->name);
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
                                    fleet__kind_name(o->kind), o->ns, o->name);
                spec_errors_done(&errs);
                return r == -ENOMEM ? r : 0;
        }
        spec_errors_done(&errs);
        /* stored under the name its key says, or not at all: under another
         * (its JSON's), it would be an object no deletion of the key reaches */
        if (!streq_ptr(spec_object_meta(obj)->namespace, o->ns) ||
            !streq_ptr(spec_object_meta(obj)->name, o->name)) {
                log_warning("fleet: %s/%s/%s in etcd names itself %s/%s; skipped",
                            fleet__kind_name(o->kind), o->ns, o->name,
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
        return store_put(f->m.store, o->kind, obj, NULL);
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
                fleet__acks_fail(f, o, 409);
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
        mark_apply(f, o);
}

bool fleet__objects_key(fleet *f, const etcd_kv *kv, bool deleted) {
        const char *rest = startswith(kv->key, f->p_all), *ns, *slash;
        bool status = false;
        int k = -1;

        fleet__unstage(f, 0);

        if (!rest)
                return false;
        if (startswith(rest, "status/"))
                rest += strlen("status/"), status = true;
        for (int i = 0; i < _STORE_KIND_MAX; i++)
                if (fleet__mirrored(i) && startswith(rest, fleet__kind_name(i)) &&
                    rest[strlen(fleet__kind_name(i))] == '/') {
                        k = i;
                        break;
                }
        if (k < 0)
                return status; /* another kind of status: not ours to read */
        ns = rest + strlen(fleet__kind_name(k)) + 1;
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
                                    kv->key, fleet__kind_name(k));
                return true;
        }
        fobj *o = nsd ? fleet__fobj_get(f, (store_kind) k, nsd, slash + 1, !deleted) : NULL;
        if (o) {
                remote(f, o, status, kv, deleted);
                f->m.dirty = true;
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

        fleet__unstage(f, 0);
        if (!present)
                return;
        for (size_t i = 0; i < r->n_kvs; i++)
                (void) tend_hashmap_put(present, r->kvs[i].key, (void *) 1, NULL);
        for (size_t i = 0; tend_hashmap_next(f->m.objs, &i, &key, &v);) {
                fobj *o = v;
                for (int s = 0; s < 2; s++) {
                        _cleanup_free_ char *ek = etcd_key(f, o, s);
                        if (ek && (s ? o->status : o->main) && !tend_hashmap_get(present, ek))
                                remote(f, o, s, &(etcd_kv){ .key = ek }, true);
                }
        }
        for (int k = 0; k < _STORE_KIND_MAX; k++) {
                const void *const *items;
                if (!fleet__mirrored(k))
                        continue;
                size_t n = store_list(f->m.store, (store_kind) k, &items);
                for (size_t i = 0; i < n; i++) {
                        const spec_meta *m = spec_object_meta(items[i]);
                        fobj *o = fleet__fobj_get(f, (store_kind) k, m->namespace, m->name, true);
                        if (o && !o->main && !o->dirty && !o->in_flight)
                                mark_apply(f, o);
                }
        }
        fleet__events_relisted(f, r);
        f->m.dirty = true;
        fleet__schedule_flush(f, 0); /* what was written here before (re)joining */
}

/* ---- the local store → etcd ----------------------------------------------------------------- */

/* A write goes once the loop has nothing more to do at once (what the
 * agent's pass, a runtime's report and the next pass write go together:
 * a pod's start and its Running are one write, not two), held at most
 * FLUSH_HOLD while the loop stays busy; msec > 0: a retry, that late. */
void fleet__schedule_flush(fleet *f, uint64_t msec) {
        if (f->closing)
                return;
        if (msec) {
                if (!uv_is_active((uv_handle_t *) &f->m.flush))
                        uv_timer_start(&f->m.flush, fleet__objects_flush_cb, msec, 0);
                return;
        }
        usec_t now = now_monotonic();
        if (!uv_is_active((uv_handle_t *) &f->m.flush_idle)) {
                f->m.flush_asked = now;
                uv_prepare_start(&f->m.flush_idle, fleet__objects_flush_idle_cb);
        }
        /* a poll between this write and the flush (a write in the turn
         * that was to flush puts it off), unless it waited FLUSH_POLL_MAX */
        if (now - f->m.flush_asked < FLUSH_POLL_MAX) {
                f->m.flush_turns = 0;
                uv_idle_start(&f->m.flush_turn, fleet__objects_flush_turn_cb);
        }
}

/* (while it runs, the loop's poll does not block) */
void fleet__objects_flush_turn_cb(uv_idle_t *h) {
        fleet *f = h->data;

        if (++f->m.flush_turns >= 2)
                uv_idle_stop(h); /* a poll has come between */
}

void fleet__objects_flush_idle_cb(uv_prepare_t *h) {
        fleet *f = h->data;

        if (uv_is_active((uv_handle_t *) &f->m.flush_turn))
                return;
        /* more work queued for this turn of the loop (an idle handle, a
         * timer due): it may write more */
        if (uv_backend_timeout(h->loop) == 0) {
                usec_t now = now_monotonic();
                if (!f->m.flush_wanted)
                        f->m.flush_wanted = now;
                if (now - f->m.flush_wanted < FLUSH_HOLD)
                        return;
        }
        f->m.flush_wanted = 0;
        if (f->m.staged) {
                /* the staged changes first, in this turn; the flush in one
                 * after it (and after a poll) */
                bool more = fleet__unstage(f, UNSTAGE_SLICE);
                f->m.flush_turns = 0;
                uv_idle_start(&f->m.flush_turn, fleet__objects_flush_turn_cb);
                if (!more)
                        fleet__check_waiters(f); /* (a change that etcd has already) */
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
        const void *obj = o->staged_deleted ? NULL : store_get(f->m.store, o->kind, o->ns, o->name);
        json_t *main = NULL, *status = NULL;
        bool was_dirty = o->staged_was_dirty, node_write, deleted = !obj, same_main, same_status;
        int64_t term;

        o->staged = false;
        if (obj && split(o->kind, obj, &main, &status) < 0) {
                log_warning("fleet: %s/%s/%s: out of memory; it is sent at the next resync",
                            fleet__kind_name(o->kind), o->ns, o->name);
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
bool fleet__unstage(fleet *f, usec_t budget) {
        usec_t start = budget ? now_monotonic() : 0;

        while (f->m.staged) {
                fobj *o = f->m.staged;
                f->m.staged = o->next_staged;
                o->next_staged = NULL;
                if (!f->m.staged)
                        f->m.staged_tail = &f->m.staged;
                (void) unstage_one(f, o);
                if (budget && f->m.staged && now_monotonic() - start >= budget)
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

        if (f->m.applying)
                return;
        if (kind == STORE_EVENT) {
                fleet__events_local(f, change, obj);
                return;
        }
        if (!fleet__mirrored(kind))
                return;
        o = fleet__fobj_get(f, kind, m->namespace, m->name, true);
        if (!o) {
                log_oom();
                return;
        }
        if (o->gone) { /* etcd deleted it: nothing of it goes back */
                if (change == STORE_DELETED)
                        o->gone = false, fobj_maybe_forget(f, o);
                return;
        }
        fleet__acks_note(f, kind, o->ns, o->name); /* (of the API request being answered) */
        term = f->el.leading ? f->el.fence : 0;
        if (!o->staged) {
                o->staged = true;
                o->staged_was_dirty = o->dirty;
                o->staged_term = term;
                *f->m.staged_tail = o;
                f->m.staged_tail = &o->next_staged;
        } else
                o->staged_term = MAX(o->staged_term, term);
        o->staged_deleted = change == STORE_DELETED;
        o->dirty = true;
        o->seq = ++f->m.seq;
        if (!o->pending_from)
                o->pending_from = o->seq;
        fleet__schedule_flush(f, 0);
}

/* Takes o out of what is to be sent, and puts the local object back to
 * what etcd has. */
void fleet__undo(fleet *f, fobj *o, unsigned code) {
        if (o->dirty)
                fleet__acks_fail(f, o, code);
        o->dirty = o->dirty_main = o->dirty_status = false;
        o->pending_from = 0;
        mark_apply(f, o);
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
         * it, three times as fast; made by fleet__unstage() already) */
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
        int64_t term = f->el.leading ? f->el.fence : 0, batch_fence = -1;
        size_t room = BATCH_BYTES;
        const char *key;
        void *v;
        int rr;

        fleet__unstage(f, 0);
        if (f->m.txn_out || !f->joined || f->closing || !f->e)
                return;
        cmp = json_array();
        ops = json_array();
        fail = json_array();
        if (!cmp || !ops || !fail) {
                fleet__schedule_flush(f, 1000);
                return;
        }
        f->m.n_sent = 0;
        /* A batch is the leader's (fenced) or a node's own, never both: a
         * fence that fails must not take a node's own writes with it. They
         * take turns, so that neither waits for good. */
        for (size_t i = 0; tend_hashmap_next(f->m.objs, &i, &key, &v);) {
                const fobj *o = v;
                if (o->dirty && !o->in_flight && (!o->fence_at || o->fence_at == term) &&
                    (o->fence_at != 0) != f->m.last_fenced) {
                        batch_fence = o->fence_at;
                        break;
                }
        }
        /* deployments, then ReplicaSets, then pods: a node never sees a pod
         * before its ReplicaSet (it would take it for an orphan), so once
         * something of a kind is left for the next batch of this kind, so is
         * every later kind (both are the leader's: the same kind of batch) */
        bool left = false;
        for (int k = 0; k < _STORE_KIND_MAX && f->m.n_sent < BATCH_MAX && !left; k++)
                for (size_t i = 0;
                     fleet__mirrored(k) && tend_hashmap_next(f->m.objs, &i, &key, &v);) {
                        fobj *o = v;
                        if (f->m.n_sent >= BATCH_MAX || room == 0) {
                                left = true;
                                break;
                        }
                        if (o->kind != (store_kind) k || !o->dirty || o->in_flight)
                                continue;
                        if (o->fence_at && o->fence_at != term) {
                                /* decided as a leader that this node no longer is
                                 * (not a conflict: an API request among its
                                 * writers is answered 503) */
                                fleet__undo(f, o, 503);
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
                                            fleet__kind_name(o->kind), o->ns, o->name,
                                            BATCH_BYTES / 1024);
                                fleet__undo(f, o, 413);
                                continue;
                        }
                        if (rr < 0) {
                                fleet__schedule_flush(f, 1000); /* out of memory: later */
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
                        f->m.sent[f->m.n_sent++] = o;
                }
        if (f->m.n_sent == 0) {
                fleet__objects_settle(f);
                return;
        }
        f->m.last_fenced = batch_fence > 0;
        if (f->m.last_fenced)
                (void) json_array_append_new(
                        cmp, etcd_cmp_revision(f->el.key, "create", "EQUAL", batch_fence));
        rr = etcd_txn(f->e, TAKE_PTR(cmp), TAKE_PTR(ops), TAKE_PTR(fail), on_txn, f);
        if (rr < 0) {
                for (size_t i = 0; i < f->m.n_sent; i++)
                        f->m.sent[i]->in_flight = false;
                f->m.n_sent = 0;
                fleet__schedule_flush(f, 1000);
                return;
        }
        f->m.txn_out = true;
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
                        fleet__undo(f, o, 409);
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
        mark_apply(f, o);
        return hit;
}

static void on_txn(const etcd_result *r, void *userdata) {
        fleet *f = userdata;
        size_t n = f->m.n_sent, conflicts = 0;
        bool refused = r->error >= 0 && !r->succeeded;

        fleet__unstage(f, 0);
        f->m.txn_out = false;
        f->m.n_sent = 0;
        for (size_t i = 0; i < n; i++) {
                fobj *o = f->m.sent[i];
                bool changed = o->remote_main || o->remote_status, echoed = o->echoed;
                o->in_flight = false;
                o->echoed = false;
                /* (refused with a try unknown: a try before was applied,
                 * and the one that was refused compared against it) */
                if ((r->error < 0 || (refused && r->unknown)) && echoed) {
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
                        mark_apply(f, o);
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
                                        fleet__undo(f, o, 409);
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
                fleet__schedule_flush(f, 1000);
        } else if (refused) {
                log_info("fleet: a write of %zu object%s was refused (%s); deciding again", n,
                         n == 1 ? "" : "s",
                         conflicts ? "another node wrote one first" : "this node no longer leads");
                /* no key changed: the fence (or a compare that cannot hold) —
                 * what was decided here is undone, not sent again */
                if (!conflicts)
                        for (size_t i = 0; i < n; i++)
                                if (f->m.sent[i]->dirty)
                                        fleet__undo(f, f->m.sent[i], f->m.last_fenced ? 503 : 409);
        }
        for (size_t i = 0; i < n; i++)
                fobj_maybe_forget(f, f->m.sent[i]);
        fleet__objects_settle(f);
        if (r->error >= 0) /* else the retry, a second later */
                fleet__schedule_flush(f, 0);
}

/* ---- the API writes waiting for etcd (acks.c) ----------------------------------------------- */

/* Withdraws w's writes not yet out to etcd (undone: the local copies go
 * back to etcd's), failing the requests among them with code, or UNSURE
 * where an answer of etcd's was lost before. Returns whether any was. */
static bool withdraw(fleet *f, const fwaiter *w, unsigned code) {
        bool any = false;

        for (size_t i = 0; w->keys && w->keys[i]; i++) {
                fobj *o = tend_hashmap_get(f->m.objs, w->keys[i]);
                if (!o || o->in_flight || !fleet__acks_unacknowledged(o, w->seq))
                        continue;
                log_warning("fleet: %s/%s/%s: %s; withdrawn", fleet__kind_name(o->kind), o->ns,
                            o->name,
                            code == 504 ? "etcd has not taken it in time"
                                        : "another write of its request lost");
                fleet__undo(f, o, o->unsure ? UNSURE : code);
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

        for (fwaiter *w = f->acks.waiters; w; w = w->next)
                if (now >= w->deadline && fleet__acks_pending(f, w->keys, w->seq, false) &&
                    !fleet__acks_pending(f, w->keys, w->seq, true))
                        any |= withdraw(f, w, 504);
        return any;
}

/* A request is all or nothing: once one of its writes lost (a conflict,
 * the leader's term), the others not yet out to etcd are withdrawn too
 * (issue 29: a List applied through a node, answered 409 while the objects
 * that did not conflict were written after all). Returns whether any was. */
static bool withdraw_failed(fleet *f) {
        bool any = false;

        for (fwaiter *w = f->acks.waiters; w; w = w->next)
                if (w->failed)
                        any |= withdraw(f, w, w->failed);
        return any;
}

void fleet__check_waiters(fleet *f) {
        usec_t now;
        bool late, failed = false;

        fleet__unstage(f, 0);
        now = now_monotonic();
        late = withdraw_late(f, now);

        while (withdraw_failed(f)) /* (a withdrawal may fail other requests) */
                failed = true;

        if ((late || failed) && fleet__apply_marked(f) && f->c.agent)
                agent_kick(f->c.agent); /* it decides again on what etcd has */
        fleet__acks_answer(f);
}

/* ---- life -------------------------------------------------------------------------------------
 */

/* The local copies marked (apply) become what etcd has. Returns whether
 * any was. */
bool fleet__apply_marked(fleet *f) {
        const char *key;
        void *v;
        bool wrote = false;
        int r;

        if (f->m.dirty && f->m.store) {
                f->m.dirty = false;
                (void) store_commit(f->m.store, false); /* a pass's, should one be open */
                fleet__unstage(f, 0);                   /* (its changes too) */
                f->m.applying = true;
                /* the marked ones only: O(what etcd changed), not O(the
                 * fleet) (issue 29). apply_local() marks none. */
                for (size_t i = 0; i < f->m.n_marked; i++) {
                        fobj *o = f->m.marked[i];
                        if (!o->apply)
                                continue;
                        r = apply_local(f, o);
                        if (r < 0)
                                log_warning_errno(r,
                                                  "fleet: %s/%s/%s: cannot apply etcd's state: %m",
                                                  fleet__kind_name(o->kind), o->ns, o->name);
                        wrote = true;
                }
                r = store_commit(f->m.store, false);
                if (r < 0)
                        log_warning_errno(r, "fleet: cannot write the mirror to the store: %m");
                f->m.applying = false;
                /* entries that hold nothing any more: those just applied;
                 * now and then every one (what another path left idle) */
                size_t marked = f->m.n_marked, k = 0;
                for (size_t i = 0; i < marked; i++) {
                        fobj *o = f->m.marked[i]; /* (each once: listed) */
                        if (o->apply) {
                                f->m.marked[k++] = o; /* (marked again meanwhile: next time) */
                                f->m.dirty = true;
                                continue;
                        }
                        o->listed = false;
                        fobj_maybe_forget(f, o);
                }
                f->m.n_marked = k;
                if (++f->m.settles % 64 != 0)
                        return wrote;
                size_t n = 0, all = tend_hashmap_size(f->m.objs);
                _cleanup_free_ fobj **idle = new0(fobj *, all + 1);
                for (size_t i = 0; idle && tend_hashmap_next(f->m.objs, &i, &key, &v);) {
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
        bool leads = f->joined && fleet__agent_leads(f), wrote = fleet__apply_marked(f);

        if (f->c.agent && (leads != f->life.agent_leading || f->nd.changed)) {
                f->life.agent_leading = leads;
                f->nd.changed = false;
                agent_fleet_changed(f->c.agent);
        } else if (f->c.agent && wrote)
                agent_kick(f->c.agent);
        fleet__check_waiters(f);
}

int fleet__objects_init(fleet *f) {
        int r;

        if (!f->c.agent)
                return 0;
        f->m.store = agent_get_store(f->c.agent);
        f->m.objs = tend_hashmap_new();
        if (!f->m.objs)
                return -ENOMEM;
        f->m.staged_tail = &f->m.staged;
        r = fleet__events_init(f);
        if (r < 0)
                return r;
        return store_subscribe(f->m.store, on_local_change, f);
}

void fleet__objects_close(fleet *f) {
        if (f->m.store)
                store_unsubscribe(f->m.store, on_local_change, f);
        f->m.store = NULL;
        fleet__acks_close(f);
}

void fleet__objects_free(fleet *f) {
        const char *key;
        void *v;

        for (size_t i = 0; f->m.objs && tend_hashmap_next(f->m.objs, &i, &key, &v);)
                fobj_free(v);
        tend_hashmap_free(f->m.objs);
        free(f->m.marked);
        fleet__events_free(f);
}
