/* SPDX-License-Identifier: MIT */

/*
 * fuzz-fleet: values read from etcd, as a fleet member mirrors them
 * (fleet/member.c fleet__mirror_apply, mirror.c, events.c), then
 * served by the API (fleet/nodes.c: the nodes) and kept in the local store.
 * A corrupted or hostile etcd may hold any bytes under any key.
 *
 * Input: one key a line, under the fleet's prefix /fz/v1/:
 *   +SUFFIX VALUE   a put (VALUE: the rest of the line, any bytes)
 *   -SUFFIX         a delete
 * e.g. "+deployments/default/web {...}", "+nodes/n1 [1]", "-nodeleases/n1",
 * "+status/pods/default/p {...}", "+leader x". Each line is a revision
 * after the one before. One tendd core (agent, store, fleet mirror, API)
 * takes every input of a run; its loop never runs, so etcd is never
 * reached and no process is started.
 *
 * Properties (a violation aborts):
 *  - the API's lists of nodes, deployments, replica sets, pods and events
 *    answer 200 with a list whose items each have a metadata.name: no
 *    value of any shape makes a read fail;
 *  - every deployment, replica set and pod in the local store has a key in
 *    etcd under its own kind, namespace and name, with a value: nothing
 *    stored is a ghost that no delete of a key reaches (but a pod of this
 *    node whose key went, which is stopped first, marked deleted);
 *  - and, from the sanitizers, no leak, no memory error, no UB.
 */

#include <jansson.h>
#include <uv.h>

#include "agent-loop.h"
#include "fleet-api.h"
#include "fleet-internal.h"
#include "fuzz.h"
#include "tend/api.h"

#define PREFIX "/fz/v1/"

static uv_loop_t loop;
static agent_loop *al;
static fleet *fl;
static api_server *api;
static api_fleet fleet_ops;
static json_t *put_keys; /* SUFFIX → true: the keys etcd holds now */
static int64_t revision;

static void on_joined(int error, const char *why, void *userdata) {
        (void) error, (void) why, (void) userdata;
}

static void setup(void) {
        static const agent_fleet ops = { .leading = fleet_agent_leading,
                                         .nodes = fleet_agent_nodes,
                                         .in_etcd = fleet_agent_in_etcd,
                                         .node_lost = fleet_agent_node_lost,
                                         .fenced = fleet_agent_fenced,
                                         .userdata = &fl };
        static char *const endpoints[] = { "http://127.0.0.1:9", NULL };
        char dir[] = "/tmp/tend-fuzz-fleet-XXXXXX";
        _cleanup_free_ char *state = NULL, *sock = NULL, *err = NULL;

        log_set_max_level(LOG_LEVEL_ERR);
        fuzz_check(mkdtemp(dir), "mkdtemp");
        state = strprintf("%s/state", dir);
        sock = strprintf("%s/tend.sock", dir);
        put_keys = json_object();
        fuzz_check(state && sock && put_keys, "out of memory");
        fuzz_check(uv_loop_init(&loop) == 0, "uv_loop_init");
        fuzz_check(
                agent_loop_new(&loop,
                               &(agent_loop_config){
                                       .state_dir = state,
                                       .node_name = "fuzz",
                                       .fleet = &ops,
                                       .systemd_bus = RT_BUS_NONE,
                                       /* (no pod runs: no cgroups made, none left when it exits) */
                                       .cgroups = RT_CGROUPS_OFF },
                               &al, &err) >= 0,
                "agent_loop_new: %s", strna(err));
        fuzz_check(fleet_join(&(fleet_config){ .loop = &loop,
                                               .endpoints = endpoints,
                                               .prefix = "/fz",
                                               .node_name = "fuzz",
                                               .state_dir = state,
                                               .agent = agent_loop_agent(al),
                                               .lost_after = 10 * USEC_PER_SEC },
                              on_joined, NULL, &fl) >= 0,
                   "fleet_join");
        fleet_ops = fleet_api(fl);
        fuzz_check(api_server_new(&(api_config){ .loop = &loop,
                                                 .agent = agent_loop_agent(al),
                                                 .state_dir = state,
                                                 .socket_path = sock,
                                                 .fleet = &fleet_ops },
                                  &api, &err) >= 0,
                   "api_server_new: %s", strna(err));
}

/* GET path: 200, a list whose items have a metadata.name. */
static void check_list(const char *path) {
        static const char *const no_args[] = { NULL };
        _cleanup_free_ char *answer = NULL;
        _cleanup_(json_decrefp) json_t *j = NULL;
        unsigned code = api_server_answer(api,
                                          &(api_request){ .method = "GET",
                                                          .url = path,
                                                          .args = no_args,
                                                          .headers = no_args,
                                                          .body = "" },
                                          &answer);
        json_t *item;
        size_t i;

        if (getenv("FUZZ_VERBOSE"))
                fprintf(stderr, "fuzz-fleet: GET %s -> %u %s\n", path, code, strna(answer));
        fuzz_check(code == 200, "GET %s: HTTP %u: %s", path, code, strna(answer));
        j = json_loads(answer ?: "", 0, NULL);
        fuzz_check(json_is_array(json_object_get(j, "items")), "GET %s: not a list: %s", path,
                   strna(answer));
        json_array_foreach (json_object_get(j, "items"), i, item)
                fuzz_check(
                        json_is_string(json_object_get(json_object_get(item, "metadata"), "name")),
                        "GET %s: an item without a name: %s", path, strna(answer));
}

/* Every object of kind in the store has a key of its own in etcd. */
static void check_no_ghost(store_kind kind, const char *etcd_kind) {
        const void *const *objs;
        size_t n = store_list(agent_loop_store(al), kind, &objs);

        for (size_t i = 0; i < n; i++) {
                const spec_meta *m = spec_object_meta(objs[i]);
                _cleanup_free_ char *k = strprintf("%s/%s/%s", etcd_kind, strna(m->namespace),
                                                   strna(m->name));
                fuzz_check(k, "out of memory");
                /* (but a pod of this node that etcd no longer has: it is
                 * stopped here first, marked deleted, then goes) */
                if (kind == STORE_POD && m->deletion_timestamp &&
                    streq_ptr(((const spec_pod *) objs[i])->spec.node_name, "fuzz"))
                        continue;
                fuzz_check(json_object_get(put_keys, k), "%s is in the store, with no key in etcd",
                           k);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = fuzz_strndup(data, size);

        if (!api)
                setup();
        for (char *line = text, *nl; line && *line; line = nl) {
                _cleanup_free_ char *key = NULL;
                bool deleted;
                char *sp, *value = (char *) "";
                size_t value_len = 0;

                nl = strchr(line, '\n');
                if (nl)
                        *nl++ = 0;
                if (line[0] != '+' && line[0] != '-')
                        continue;
                deleted = line[0] == '-';
                sp = strchr(line, ' ');
                if (sp && !deleted) {
                        *sp = 0;
                        value = sp + 1;
                        value_len = strlen(value);
                }
                key = strprintf(PREFIX "%s", line + 1);
                fuzz_check(key, "out of memory");
                revision++;
                fleet__mirror_apply(fl,
                                    &(etcd_kv){ .key = key,
                                                .value = value,
                                                .value_len = value_len,
                                                .create_revision = revision,
                                                .mod_revision = revision,
                                                .version = 1 },
                                    deleted);
                /* (no object's key is other than UTF-8: such a key is not
                 * noted, and an object stored from it is a ghost) */
                if (!utf8_is_valid(line + 1))
                        continue;
                if (deleted)
                        (void) json_object_del(put_keys, line + 1);
                else
                        fuzz_check(json_object_set_new(put_keys, line + 1, json_true()) == 0,
                                   "out of memory");
        }
        fleet__objects_settle(fl);

        check_list("/api/v1/nodes");
        check_list("/apis/apps/v1/deployments");
        check_list("/apis/apps/v1/replicasets");
        check_list("/api/v1/pods");
        check_list("/api/v1/events");
        check_no_ghost(STORE_DEPLOYMENT, "deployments");
        check_no_ghost(STORE_REPLICA_SET, "replicasets");
        check_no_ghost(STORE_POD, "pods");
        return 0;
}
