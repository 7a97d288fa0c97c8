/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * The fleet (tendd --fleet, docs/fleet.md): many tendd keep one declared
 * state in etcd. Membership (§3.2–3.3): one etcd session lease per tendd, the node's name claimed
 * on it, the node's Node object in etcd, and a mirror of every node of the fleet (Ready while its
 * tendd holds its lease) for the API. Cordon writes the node's spec.unschedulable.
 *
 * Keys, under the prefix P (default /tend):
 *   P/v1/schema            {"version":1}: the layout of the keys below
 *   P/v1/nodes/NAME        the Node (labels, capacity, spec.unschedulable)
 *   P/v1/nodeleases/NAME   who holds the name: pid, host, boot id; on the
 *                          holder's session lease, so it vanishes when
 *                          that tendd is gone for a TTL
 *   P/v1/leader            the node that leads: created if absent, on the
 *                          leader's session lease
 */

#include <jansson.h>
#include <uv.h>

#include "tend/agent.h"

typedef struct fleet fleet;

typedef struct fleet_config {
        uv_loop_t *loop;
        char *const *endpoints; /* "http://127.0.0.1:2379", ...; NULL-terminated */
        const char *prefix;     /* NULL: "/tend" */
        const char *node_name;
        json_t *labels;        /* the node's own (--node-labels), an object; borrowed */
        int64_t ttl;           /* the session lease, seconds; 0: 10 */
        const char *state_dir; /* the lease of the last run: STATE_DIR/fleet.json */
        /* etcd's TLS and authentication (etcd_config's); NULL: none */
        const char *ca_file, *cert_file, *key_file;
        const char *user, *password;
        bool no_leader; /* never campaign to lead (--no-leader) */
        /* The agent whose store mirrors the fleet's objects; NULL: nodes
         * only. */
        agent *agent;
        usec_t lost_after; /* a node lost this long: its pods are replaced; 0: at once */
        usec_t compaction; /* the leader compacts etcd this often; 0: never */
} fleet_config;

/* Joins: schema, session lease (resumed when the last run's is alive),
 * the name, the Node, the mirror. joined(0) once all is done, or
 * joined(-errno, why) when it cannot be (the name is another live tendd's,
 * etcd does not answer): then close it. */
int fleet_join(const fleet_config *c, void (*joined)(int error, const char *why, void *userdata),
               void *userdata, fleet **ret);
/* Whether this node leads the fleet now, and the revision its leader
 * writes are fenced on (compare CREATE(P/v1/leader) == it). One node
 * leads at a time: the one whose lease holds the leader key. */
bool fleet_leading(const fleet *f, int64_t *ret_fence);
/* agent_fleet's functions; userdata: a fleet ** (NULL until joined). */
bool fleet_agent_leading(void *userdata);
size_t fleet_agent_nodes(void *userdata, const plan_node **ret);
bool fleet_agent_in_etcd(void *userdata, const spec_pod *p);
bool fleet_agent_node_lost(void *userdata, const char *node);
bool fleet_agent_fenced(void *userdata);
/* When this node's pods under fence must stop if nothing renews the lease
 * before (monotonic: the last acknowledged keepalive's send time + TTL −
 * PLAN_FENCE_MARGIN), for the fence keeper; 0: not known now (no session,
 * or fenced already). */
usec_t fleet_fence_at(fleet *f);

/* What the API asks of the fleet (tendd's fleet-api.c makes api.h's
 * api_fleet of these). An answer later: done(code, answer) with a Status
 * or the object (taken), or done(0, NULL) where only "etcd has it" is
 * told. */
typedef void (*fleet_done)(unsigned code, json_t *answer, void *req);
/* Every node of the fleet as a core/v1 Node, by name, its Ready condition
 * from its lease (Unknown for all while this node is cut off): new. */
json_t *fleet_nodes(fleet *f);
/* Cordons (value) or uncordons node name: done(200, the Node), or 404,
 * 409, 503. -ENOENT: no such node (done never called). */
int fleet_node_cordon(fleet *f, const char *name, bool value, fleet_done done, void *req);
/* Removes node name, which no tendd holds: done(200, a Status), or 409
 * (its tendd is alive), 503. */
int fleet_node_delete(fleet *f, const char *name, fleet_done done, void *req);
/* The request req goes (its answer is not wanted): nothing is called. */
void fleet_cancel(fleet *f, void *req);
/* An API request's writes: fleet_writes() marks where they begin (the
 * count of local writes so far) and notes the objects written from then
 * on, fleet_writes_end() when the request is handled; fleet_touch() names
 * an object the request relies on although it did not change it;
 * fleet_sync() returns 1 when etcd has every write of it already, else 0
 * and answers done(0) once etcd has them, or done(409, 413, 503, 504)
 * with why not (-errno: cannot wait). */
uint64_t fleet_writes(fleet *f);
void fleet_writes_end(fleet *f);
void fleet_touch(fleet *f, store_kind kind, const char *ns, const char *name);
int fleet_sync(fleet *f, uint64_t since, fleet_done done, void *req);
/* Cut off from etcd (docs/fleet.md §3.9): why writes are refused, and why
 * what this node shows may be stale (new strings); NULL: they are not. */
char *fleet_refuses_writes(fleet *f);
char *fleet_stale(fleet *f);
/* The fleet's lines of /metrics (Prometheus text), added to b. */
void fleet_metrics(fleet *f, tend_buf *b);
/* Leaves the fleet at once (tendd --stop-pods-on-exit, its pods stopped):
 * revokes the lease, so the name, the leadership and Ready go now rather
 * than a TTL later; done() once etcd answered (or did not). Then close. */
void fleet_leave(fleet *f, void (*done)(void *userdata), void *userdata);
/* Stops the session (no revoke: a restart within the TTL resumes it, and
 * the fleet never sees the node go) and frees f. Accepts NULL. */
void fleet_close(fleet *f);

/* ---- the fence keeper ------------------------------------------------------------------------ */

/*
 * The fence keeper (docs/fleet.md §3.10): a small process of tendd's own, one
 * per state directory, that stops this node's pods under
 * tend.io/node-lost-policy: fence when tendd itself cannot — hung, stopped
 * or gone — before etcd could expire the node's lease and the leader replace
 * them elsewhere. tendd tells it, again and again, when its lease could
 * expire (the fence time: the last acknowledged keepalive's send time + TTL
 * − PLAN_FENCE_MARGIN) and which processes to stop then, as pidfds. Past
 * that time without news, it sends each SIGTERM, then SIGKILL after the
 * pod's grace period: what tendd's own fence does. A tendd started again
 * in time connects to the same keeper (STATE_DIR/fence.sock) and moves the
 * time on, so a quick restart stops nothing.
 */

/* tendd --fence-keeper STATE_DIR (fd 3: its listening socket): the
 * keeper's main. Returns the exit code. */
int fence_keeper_main(const char *state_dir);

typedef struct fence_client fence_client;

int fence_client_new(const char *state_dir, fence_client **ret);
/* The processes to stop at fence_at (monotonic; 0: the time already told
 * stays). The keeper is started when there is one to keep and a time;
 * what cannot be told now is told at the next call. */
void fence_client_update(fence_client *c, usec_t fence_at, const agent_fenced *pods, size_t n);
/* Closes the connection (the keeper keeps the last time and processes). */
void fence_client_free(fence_client *c);
