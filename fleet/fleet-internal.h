/* SPDX-License-Identifier: MIT */
#pragma once

/* The fleet's insides, shared by its parts: member.c (join, session, the
 * nodes' mirror, leaving), elect.c (the election), nodes.c (the nodes as
 * the API shows them), mirror.c, acks.c and lifecycle.c (the objects),
 * events.c (the events). */

#include "tend/fleet.h"
#include "tend/agent.h"
#include "tend/etcd.h"

#define SCHEMA_VERSION 1
#define JOIN_PATIENCE (15 * USEC_PER_SEC) /* etcd not answering at start */
#define FLEET_EV_BATCH 100                /* events per txn (etcd takes 128 operations) */
#define FLEET_EVENTS_LISTED 1000          /* events a (re)list reads: the newest */

typedef struct fnode {
        char *name;
        json_t *node; /* the stored Node; NULL: no key (a lease without one) */
        int64_t node_mod;
        json_t *holder;   /* the nodeleases value; NULL: nobody holds the name */
        usec_t since;     /* wall: when it was seen to join or to go */
        usec_t lost_mono; /* monotonic: when its lease was seen to go; 0: it holds one */
} fnode;

typedef struct op op;
typedef struct fleet fleet;
typedef struct fobj fobj;       /* objects.h: an object as etcd has it */
typedef struct fwaiter fwaiter; /* acks.h: an API write waiting for etcd */

/* A step to take again later: the join's chain and the mirror's (list,
 * watch) each have their own, so that one's retry never replaces the
 * other's (a lost session and a broken watch come together when etcd
 * restarts). */
typedef struct later {
        uv_timer_t timer;
        fleet *f;
        void (*fn)(fleet *f);
} later;

struct op {
        fleet *f;
        op *next;
        char *name;
        bool value;
        unsigned tries;
        void (*done)(unsigned code, json_t *answer, void *req);
        void *req;
};

/* The election's (elect.c; docs/fleet.md §3.5). */
typedef struct fleet_elect {
        char *key;     /* P/v1/leader */
        char *leader;  /* the node that leads, as etcd says; NULL: none */
        bool leading;  /* this node */
        int64_t fence; /* the leader key's create revision, while leading */
        usec_t since;  /* monotonic: this term's start */
        bool campaigning;
        bool again; /* a campaign asked for while one was out: once it answers */
        uv_timer_t timer;
} fleet_elect;

/* The nodes' mirror and what the API asks of them (nodes.c). */
typedef struct fleet_nodeset {
        tend_hashmap *map; /* name → fnode */
        bool changed;      /* since the agent was told */
        op *ops;           /* cordons and removals out to etcd */
} fleet_nodeset;

/* The objects' mirror (mirror.c): Deployments, ReplicaSets, Pods. */
typedef struct fleet_mirror {
        store *store;
        tend_hashmap *objs; /* "kind/ns/name" → fobj */
        bool dirty;         /* etcd changed some: the local store follows */
        /* the objects marked so (fobj.apply): what fleet__apply_marked()
         * walks, not the whole mirror */
        fobj **marked;
        size_t n_marked, marked_alloc;
        unsigned settles; /* fleet__apply_marked()'s, for its occasional full sweep */
        bool applying;    /* the local store is being put in line with etcd */
        bool txn_out;
        fobj *sent[64];
        size_t n_sent;
        uint64_t seq;     /* of the local writes */
        bool last_fenced; /* the last batch was the leader's (they take turns) */
        uv_timer_t flush;
        uv_prepare_t flush_idle; /* a write goes when the loop has nothing else to do */
        usec_t flush_wanted;     /* ... held since (0: not held) */
        /* ... and not in the turn that made it: the loop polls once between
         * (an API request that came meanwhile is answered first; the
         * write and the flush are two slices, not one). Counts turns. */
        uv_idle_t flush_turn;
        unsigned flush_turns;
        usec_t flush_asked;          /* when the flush that waits was first asked for */
        fobj *staged, **staged_tail; /* local changes not yet split into their keys */
} fleet_mirror;

/* The API writes waiting for etcd (acks.c). */
typedef struct fleet_acks {
        fwaiter *waiters;
        char **req_keys; /* the objects the API request being answered wrote */
        bool recording;
} fleet_acks;

/* The events (events.c; P/v1/events/). */
typedef struct fleet_events {
        tend_hashmap *out; /* "ns/name" → JSON: this node's, to be written */
        tend_hashmap *in;  /* "ns/name" → JSON (null: deleted): etcd's, to be applied */
        uv_timer_t timer;
        usec_t last; /* monotonic: the last write (or try) */
        bool txn_out, granting, dropping;
        uv_timer_t apply; /* in into the local store, a moment after it fills */
        bool failing;     /* the last write was refused (said once) */
        double tokens;    /* the write budget (EV_RATE a second, EV_BURST at most) */
        usec_t refilled;
        int64_t lease; /* the lease events are written on; 0: none yet */
        usec_t lease_at;
        char *sent_keys[FLEET_EV_BATCH];
        json_t *sent[FLEET_EV_BATCH];
        size_t n_sent;
} fleet_events;

/* The agent's view and the leader's node lifecycle (lifecycle.c). */
typedef struct fleet_life {
        bool agent_leading;     /* what the agent was last told */
        uv_timer_t timer;       /* the leader's node lifecycle, every 500 ms */
        usec_t compact_at;      /* monotonic: the leader's next compaction; 0: none planned */
        int64_t compact_rev;    /* ... to this revision (the mirror's, an interval before) */
        bool disrupted;         /* the mass-loss guard holds (said once) */
        bool fenced;            /* fence-policy pods must stop (told to the agent) */
        plan_node *sched;       /* fleet_agent_nodes()'s answer */
        spec_map *sched_labels; /* ... its nodes' labels */
        size_t n_sched_labels;
} fleet_life;

/* A member of the fleet: its membership (member.c) and its parts. */
struct fleet {
        fleet_config c;
        char *prefix, *node_name;
        char **endpoints;
        json_t *labels;
        char *state_file;
        char hostname[256], boot_id[40];
        etcd *e;
        etcd_session *session;
        usec_t cut_since; /* monotonic: when the last session was lost */
        int64_t lease;
        bool joined, failed, closing;
        bool ever_joined; /* the first join completed */
        usec_t join_started;
        void (*on_joined)(int error, const char *why, void *userdata);
        void *userdata;
        char *k_schema, *k_node, *k_lease, *p_all, *p_nodes, *p_leases, *p_events;
        etcd_watch *watch;
        int64_t revision;                /* of the mirror */
        later retry, remirror, deadline; /* deadline: of the join as a whole */
        unsigned open_handles; /* the timers and handles below: freed when all are closed */
        char *refusal;         /* why the name is not ours */
        void (*leave_done)(void *userdata); /* fleet_leave() */
        void *leave_userdata;
        int64_t listed_lease;                  /* the lease the mirror was last listed on */
        int64_t claimed_lease, claim_revision; /* the name claimed on this lease, then */
        fleet_elect el;
        fleet_nodeset nd;
        fleet_mirror m;
        fleet_acks acks;
        fleet_events ev;
        fleet_life life;
};

/* member.c */
/* Whether f->lease is the live session's (a step of the join or the
 * election made for it may go on). */
static inline bool fleet__session_live(const fleet *f) {
        return f->session && f->lease && etcd_session_lease(f->session) == f->lease;
}
/* Applies one key of P/v1/ to the mirror (deleted: its DELETE). */
void fleet__mirror_apply(fleet *f, const etcd_kv *kv, bool deleted);

/* mirror.c */
int fleet__objects_init(fleet *f);
/* A key of P/v1/ that is an object's (false: not one): into the mirror. */
bool fleet__objects_key(fleet *f, const etcd_kv *kv, bool deleted);
/* After a relist: what the list lacks is gone. */
void fleet__objects_relisted(fleet *f, const etcd_result *r);
/* After a batch of keys: the local store follows etcd, the agent is told,
 * API writes waiting for etcd are answered. */
void fleet__objects_settle(fleet *f);
void fleet__objects_flush_cb(uv_timer_t *t);
void fleet__objects_flush_idle_cb(uv_prepare_t *h);
void fleet__objects_flush_turn_cb(uv_idle_t *h);
/* The request req waits no more (its answer is not needed). */
void fleet__writes_cancel(fleet *f, void *req);
void fleet__objects_close(fleet *f);
void fleet__objects_free(fleet *f);

/* events.c */
int fleet__events_init(fleet *f);
/* This node recorded (or pruned) an event: it goes to etcd. */
void fleet__events_local(fleet *f, store_change change, const spec_event *e);
/* A key of P/v1/events/ (false: not one): into the local store, soon. */
bool fleet__events_key(fleet *f, const etcd_kv *kv, bool deleted);
void fleet__events_apply_cb(uv_timer_t *t);
/* After a relist: another node's events the list lacks are gone. */
void fleet__events_relisted(fleet *f, const etcd_result *r);
void fleet__events_flush_cb(uv_timer_t *t);
void fleet__events_free(fleet *f);

/* elect.c */
/* Leads if nobody does (a txn; answered later). */
void fleet__campaign(fleet *f);
/* The leader key as etcd has it now (NULL: gone). */
void fleet__leader_seen(fleet *f, const etcd_kv *kv);
void fleet__stop_leading(fleet *f, const char *why);
/* Leading, and the mirror has caught up with the win (docs/fleet.md §3.5). */
bool fleet__agent_leads(fleet *f);

/* lifecycle.c */
/* The leader's node lifecycle looks every 500 ms (it acts only while leading). */
void fleet__lifecycle_start(fleet *f);
void fleet__sched_free(fleet *f);

/* nodes.c */
fnode *fleet__node(fleet *f, const char *name, bool create);
void fleet__node_free(fnode *n);
/* Every node forgotten (before a relist). */
void fleet__nodes_clear(fleet *f);
/* A key of P/v1/nodes/ or P/v1/nodeleases/ (false: not one): into the
 * mirror. */
bool fleet__nodes_key(fleet *f, const etcd_kv *kv, bool deleted);
/* Cancels what the API asked of the nodes that is still out (no answers). */
void fleet__ops_close(fleet *f);
