/* SPDX-License-Identifier: MIT */
#pragma once

/* The agent on a libuv loop with the real runtime (what tendd runs). */

#include "tend/agent.h"

typedef struct agent_loop agent_loop;

typedef struct agent_loop_config {
        const char *state_dir;     /* created if missing; locked for the agent's life */
        uint16_t port_lo, port_hi; /* 0: the runtime's defaults */
        uint64_t log_max_bytes;    /* 0: the runtime's default */
        usec_t resync_interval;    /* 0: 30 s */
        const char *node_name;     /* NULL: the host name */
        const agent_fleet *fleet;  /* NULL: a single host */
        rt_bus systemd_bus;        /* for runtimeClassName: systemd */
        rt_cgroups cgroups;        /* process pods' cgroups */
} agent_loop_config;

/* Locks the state dir, opens the store, starts the runtime, adopts the
 * pods. On failure *ret_error says what is wrong (a held lock names the
 * pid holding it). */
int agent_loop_new(uv_loop_t *loop, const agent_loop_config *c, agent_loop **ret, char **ret_error);
/* Commits, detaches the pods (they keep running), releases the lock;
 * frees itself once libuv has closed its handles. */
void agent_loop_close(agent_loop *l);

agent *agent_loop_agent(agent_loop *l);
store *agent_loop_store(agent_loop *l);
rt_manager *agent_loop_runtime(agent_loop *l);
/* Runs the controllers soon (after a user action). */
void agent_loop_kick(agent_loop *l);

/* <dir>/tendd.lock, flock'ed, holding our pid. -EBUSY if another tendd
 * holds it. */
int agent_lock_state_dir(const char *dir, int *ret_fd, char **ret_error);
