/* SPDX-License-Identifier: MIT */

/* api_fleet's functions are tend/fleet.h's, given the fleet as userdata. */

#include "fleet-api.h"

static json_t *nodes(void *userdata) {
        return fleet_nodes(userdata);
}

static int set_unschedulable(void *userdata, const char *name, bool value,
                             void (*done)(unsigned code, json_t *answer, void *req), void *req) {
        return fleet_node_cordon(userdata, name, value, done, req);
}

static int delete_node(void *userdata, const char *name,
                       void (*done)(unsigned code, json_t *answer, void *req), void *req) {
        return fleet_node_delete(userdata, name, done, req);
}

static void cancel(void *userdata, void *req) {
        fleet_cancel(userdata, req);
}

static int sync_writes(void *userdata, uint64_t since,
                       void (*done)(unsigned code, json_t *answer, void *req), void *req) {
        return fleet_sync(userdata, since, done, req);
}

static uint64_t writes(void *userdata) {
        return fleet_writes(userdata);
}

static void writes_end(void *userdata) {
        fleet_writes_end(userdata);
}

static char *refuses_writes(void *userdata) {
        return fleet_refuses_writes(userdata);
}

static void touch(void *userdata, store_kind kind, const char *ns, const char *name) {
        fleet_touch(userdata, kind, ns, name);
}

static char *stale(void *userdata) {
        return fleet_stale(userdata);
}

static void metrics(void *userdata, tend_buf *b) {
        fleet_metrics(userdata, b);
}

api_fleet fleet_api(fleet *f) {
        return (api_fleet){ .nodes = nodes,
                            .set_unschedulable = set_unschedulable,
                            .delete_node = delete_node,
                            .cancel = cancel,
                            .sync = sync_writes,
                            .writes = writes,
                            .writes_end = writes_end,
                            .refuses_writes = refuses_writes,
                            .touch = touch,
                            .stale = stale,
                            .metrics = metrics,
                            .userdata = f };
}
