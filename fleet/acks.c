/* SPDX-License-Identifier: MIT */

/*
 * An API write is answered once etcd has it (docs/fleet.md §3.4): a request
 * marks where its writes begin, and waits until every object it wrote is
 * acknowledged by etcd, refused (409, 413), withdrawn (504) or lost with
 * the leadership (503).
 */

#include "mirror.h"

/* ---- waiting for etcd (an API write is answered once etcd has it) ------------------------- */

/* Whether o has a write of a request's (up to seq) not acknowledged. */
static bool unacknowledged(const fobj *o, uint64_t seq) {
        return (o->dirty || o->in_flight) && o->pending_from && o->pending_from <= seq;
}

void fleet__objects_failed(fleet *f, const fobj *o, unsigned code) {
        _cleanup_free_ char *key = fleet__obj_key(o->kind, o->ns, o->name);

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
                log_warning("fleet: %s/%s/%s: %s; withdrawn", fleet__kind_names[o->kind], o->ns,
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

uint64_t fleet_writes(fleet *f) {
        /* a request begins: the objects it writes are noted (on_local_change) */
        strv_free(f->req_keys);
        f->req_keys = NULL;
        f->recording = true;
        return f->seq;
}

void fleet_touch(fleet *f, store_kind kind, const char *ns, const char *name) {
        _cleanup_free_ char *key = NULL;

        /* its writes not yet in etcd, this request's or earlier ones, are
         * waited for: a write that changed nothing here was decided on them
         * (issue 29: an apply answered 0 whose state never reached etcd,
         * the earlier write it matched being refused) */
        if (!f->recording || kind >= FLEET_KINDS)
                return;
        key = fleet__obj_key(kind, ns, name);
        if (!key || (!strv_contains(f->req_keys, key) && strv_extend(&f->req_keys, key) < 0))
                log_oom();
}

void fleet_writes_end(fleet *f) {
        /* (sync() took them, when the answer waits for etcd) */
        strv_free(f->req_keys);
        f->req_keys = NULL;
        f->recording = false;
}

int fleet_sync(fleet *f, uint64_t since, void (*done)(unsigned code, json_t *answer, void *req),
               void *req) {
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

void fleet__writes_cancel(fleet *f, void *req) {
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
