/* SPDX-License-Identifier: MIT */
#pragma once

/* The fleet's objects as etcd has them (fobj), shared by mirror.c (etcd ↔
 * the local store), acks.c (API writes waiting for etcd) and lifecycle.c
 * (the agent's view, the leader's node lifecycle). */

#include "fleet-internal.h"

/* The kinds' registry row of store kind k (NULL: none), looked up once: the
 * keys of every watch event and every object of a flush ask. */
static inline const spec_kind *fleet__kind_row(store_kind k) {
        static const spec_kind *rows[_STORE_KIND_MAX];
        static bool made;

        if (!made) {
                for (int i = 0; i < _STORE_KIND_MAX; i++)
                        rows[i] = spec_kind_of(store_kind_type((store_kind) i));
                made = true;
        }
        return k >= 0 && k < _STORE_KIND_MAX ? rows[k] : NULL;
}

/* Whether the fleet keeps objects of store kind k in etcd (the registry
 * says: spec_kind.mirrored; events are events.c's). */
static inline bool fleet__mirrored(store_kind k) {
        const spec_kind *r = fleet__kind_row(k);
        return r && r->mirrored;
}

/* A mirrored kind as etcd's keys name it: its plural. */
static inline const char *fleet__kind_name(store_kind k) {
        return fleet__kind_row(k)->plural;
}

/* An object's name in the mirror's map: "kind/ns/name"; new. */
static inline char *fleet__obj_key(store_kind k, const char *ns, const char *name) {
        return strprintf("%s/%s/%s", fleet__kind_name(k), strempty(ns), strempty(name));
}

/* A value's canonical text, made ahead (in fleet__unstage()'s slice, not the
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
        bool listed;                   /* in fleet_mirror.marked (once, whatever apply says) */
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
         * for it; the rest once fleet__unstage() has made the values. */
        bool staged;
        bool staged_deleted;   /* ... by a deletion (its last change) */
        bool staged_was_dirty; /* dirty before it was staged */
        int64_t staged_term;   /* the leader's fence over its staged changes; 0: none */
        fobj *next_staged;
};
