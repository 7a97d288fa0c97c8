/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * Fleet membership (tendd --fleet, issue 17, docs/fleet.md
 * §3.2–3.3): one etcd session lease per tendd, the node's name claimed on
 * it, the node's Node object in etcd, and a mirror of every node of the
 * fleet (Ready while its tendd holds its lease) for the API. Cordon writes
 * the node's spec.unschedulable.
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
#include "tend/api.h"

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
/* What the API asks of the fleet (valid while f is). */
const api_fleet *fleet_api(fleet *f);
/* Leaves the fleet at once (tendd --stop-pods-on-exit, its pods stopped):
 * revokes the lease, so the name, the leadership and Ready go now rather
 * than a TTL later; done() once etcd answered (or did not). Then close. */
void fleet_leave(fleet *f, void (*done)(void *userdata), void *userdata);
/* Stops the session (no revoke: a restart within the TTL resumes it, and
 * the fleet never sees the node go) and frees f. Accepts NULL. */
void fleet_close(fleet *f);
