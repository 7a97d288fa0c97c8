/* SPDX-License-Identifier: MIT */
#pragma once

/* The real backend: the agent core's pods on tend_runtime. The only file
 * that knows both the core and the runtime. */

#include "tend/agent.h"
#include "tend/runtime.h"

/* The agent_backend over an rt_manager (backend_data), and the
 * rt_callbacks to install in it (the rt_manager's userdata must be the
 * agent). */
extern const agent_backend agent_rt_backend;
extern const rt_callbacks agent_rt_callbacks;
