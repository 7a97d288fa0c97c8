/* SPDX-License-Identifier: MIT */
#pragma once

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

#include <uv.h>

#include "tend/agent.h"

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
