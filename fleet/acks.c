/* SPDX-License-Identifier: MIT */

/*
 * An API write is answered once etcd has it (docs/fleet.md §3.4): a request
 * marks where its writes begin, and waits until every object it wrote is
 * acknowledged by etcd, refused (409, 413), withdrawn (504) or lost with
 * the leadership (503).
 */

#include "acks.h"

bool fleet__acks_unacknowledged(const fobj *o, uint64_t seq) {
        return (o->dirty || o->in_flight) && o->pending_from && o->pending_from <= seq;
}

void fleet__acks_fail(fleet *f, const fobj *o, unsigned code) {
        _cleanup_free_ char *key = fleet__obj_key(o->kind, o->ns, o->name);

        for (fwaiter *w = f->acks.waiters; w; w = w->next)
                if (key && !w->failed && fleet__acks_unacknowledged(o, w->seq) &&
                    strv_contains(w->keys, key))
                        w->failed = code;
}

bool fleet__acks_pending(fleet *f, char *const *keys, uint64_t seq, bool out_only) {
        for (size_t i = 0; keys && keys[i]; i++) {
                const fobj *o = tend_hashmap_get(f->m.objs, keys[i]);
                if (o && (!out_only || o->in_flight) && fleet__acks_unacknowledged(o, seq))
                        return true;
        }
        return false;
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

void fleet__acks_answer(fleet *f) {
        for (fwaiter **p = &f->acks.waiters; *p;) {
                fwaiter *w = *p;
                if (fleet__acks_pending(f, w->keys, w->seq,
                                        false)) { /* (out to etcd: its answer says) */
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
        strv_free(f->acks.req_keys);
        f->acks.req_keys = NULL;
        f->acks.recording = true;
        return f->m.seq;
}

void fleet__acks_note(fleet *f, store_kind kind, const char *ns, const char *name) {
        _cleanup_free_ char *key = NULL;

        if (!f->acks.recording || !fleet__mirrored(kind))
                return;
        key = fleet__obj_key(kind, ns, name);
        if (!key ||
            (!strv_contains(f->acks.req_keys, key) && strv_extend(&f->acks.req_keys, key) < 0))
                log_oom(); /* its answer does not wait for this one */
}

void fleet_touch(fleet *f, store_kind kind, const char *ns, const char *name) {
        /* its writes not yet in etcd, this request's or earlier ones, are
         * waited for: a write that changed nothing here was decided on them
         * (issue 29: an apply answered 0 whose state never reached etcd,
         * the earlier write it matched being refused) */
        fleet__acks_note(f, kind, ns, name);
}

void fleet_writes_end(fleet *f) {
        /* (sync() took them, when the answer waits for etcd) */
        strv_free(f->acks.req_keys);
        f->acks.req_keys = NULL;
        f->acks.recording = false;
}

int fleet_sync(fleet *f, uint64_t since, void (*done)(unsigned code, json_t *answer, void *req),
               void *req) {
        _cleanup_strv_free_ char **keys = TAKE_PTR(f->acks.req_keys);
        fwaiter *w;

        f->acks.recording = false;
        if (!fleet__acks_pending(f, keys, f->m.seq, false))
                return 1; /* etcd has every write of the request */
        w = new0(fwaiter, 1);
        if (!w)
                return -ENOMEM;
        *w = (fwaiter){ .next = f->acks.waiters,
                        .keys = TAKE_PTR(keys),
                        .from = since,
                        .seq = f->m.seq,
                        .deadline = now_monotonic() + WAIT_MAX,
                        .done = done,
                        .req = req };
        f->acks.waiters = w;
        return 0;
}

void fleet__writes_cancel(fleet *f, void *req) {
        for (fwaiter **p = &f->acks.waiters; *p;) {
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

void fleet__acks_close(fleet *f) {
        while (f->acks.waiters) {
                fwaiter *w = f->acks.waiters;
                f->acks.waiters = w->next;
                strv_free(w->keys);
                free(w);
        }
        strv_free(f->acks.req_keys);
        f->acks.req_keys = NULL;
}
