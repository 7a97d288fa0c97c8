/* SPDX-License-Identifier: MIT */
#pragma once

/* The object mirror's insides, shared by mirror.c (etcd ↔ the local
 * store), acks.c (API writes waiting for etcd) and lifecycle.c (the
 * agent's view, the leader's node lifecycle). */

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

struct fwaiter {
        fwaiter *next;
        uint64_t from, seq; /* the request's own writes: (from, seq] */
        char **keys;        /* ... of these objects ("kind/ns/name") */
        unsigned failed;    /* 0, or the code of the answer (409, 413, 504, UNSURE) */
        usec_t deadline;
        void (*done)(unsigned code, json_t *answer, void *req);
        void *req;
};

/* The kinds the fleet mirrors (store_kind up to STORE_POD; events are
 * events.c's), as etcd's keys name them. */
#define FLEET_KINDS (STORE_POD + 1)
extern const char *const fleet__kind_names[FLEET_KINDS];

/* mirror.c */
char *fleet__obj_key(store_kind k, const char *ns, const char *name);
fobj *fleet__fobj_get(fleet *f, store_kind k, const char *ns, const char *name, bool create);
/* Splits staged local changes into their keys' values, for budget at most
 * (0: all). Returns whether any is left. */
bool fleet__unstage(fleet *f, usec_t budget);
/* Takes o out of what is to be sent, and puts the local object back to
 * what etcd has; the API writes among its changes fail with code. */
void fleet__undo(fleet *f, fobj *o, unsigned code);
/* A write goes once the loop has nothing more to do at once; msec > 0: a
 * retry, that late. */
void fleet__schedule_flush(fleet *f, uint64_t msec);
/* The local copies marked (apply) become what etcd has. Returns whether
 * any was. */
bool fleet__apply_marked(fleet *f);

/* acks.c */
/* The API writes waiting for etcd that can be answered are. */
void fleet__check_waiters(fleet *f);

/* lifecycle.c */
/* Leading, and the mirror has caught up with the win (docs/fleet.md §3.5). */
bool fleet__agent_leads(fleet *f);
void fleet__sched_free(fleet *f);
/* The leader's node lifecycle looks every 500 ms (it acts only while leading). */
void fleet__lifecycle_start(fleet *f);
