/* SPDX-License-Identifier: MIT */
#pragma once

/* The glue between the fleet and the API: api.h's api_fleet over a fleet.
 * The only file that knows both (as backend-rt.c is for the agent and the
 * runtime). */

#include "tend/api.h"
#include "tend/fleet.h"

/* What the API asks of f (valid while f is). */
api_fleet fleet_api(fleet *f);
