/* SPDX-License-Identifier: MIT */

/*
 * /api/v1/nodes, so that `kubectl get nodes`, `describe node` and `top
 * node` work. A single tendd: this host as the one Node (read-only): its
 * name (the agent's, as pods' spec.nodeName), labels, capacity (CPUs,
 * memory), Ready while tendd answers, addresses and system info. In fleet
 * mode: every node of the fleet, as tendd keeps them in etcd, Ready while
 * its tendd holds its lease; a PATCH of spec.unschedulable cordons one
 * (kubectl cordon, tend cordon).
 */

#include <inttypes.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "api-internal.h"

/* This host, Ready while tendd answers (a single tendd). */
static json_t *host_node(api_server *s) {
        char now[TIMESTAMP_MAX];
        json_t *node = spec_host_node(agent_node_name(s->agent), NULL);
        const char *boot = json_string_value(
                json_object_get(json_object_get(node, "metadata"), "creationTimestamp"));

        format_timestamp(now, now_realtime());
        if (node &&
            json_object_set_new(json_object_get(node, "status"), "conditions",
                                json_pack("[{s:s, s:s, s:s, s:s, s:s, s:s}]", "type", "Ready",
                                          "status", "True", "reason", "TenddReady", "message",
                                          "tendd answers on this host", "lastHeartbeatTime", now,
                                          "lastTransitionTime", boot)) < 0)
                node = (json_decref(node), NULL);
        return node;
}

/* Every node, sorted by name: a new array. */
static json_t *all_nodes(api_server *s) {
        json_t *one;

        if (s->fleet)
                return s->fleet->nodes(s->fleet->userdata);
        one = host_node(s);
        return one ? json_pack("[o]", one) : NULL;
}

static json_t *find_node(json_t *nodes, const char *name) {
        json_t *n;
        size_t i;

        json_array_foreach (nodes, i, n)
                if (streq_ptr(json_string_value(
                                      json_object_get(json_object_get(n, "metadata"), "name")),
                              name))
                        return n;
        return NULL;
}

/* kubectl's columns for nodes (-o wide: those of priority 1). */
static json_t *node_table(json_t *nodes) {
        static const struct {
                const char *name;
                int priority;
        } cols[] = {
                { "NAME", 0 },           { "STATUS", 0 },
                { "ROLES", 0 },          { "AGE", 0 },
                { "VERSION", 0 },        { "INTERNAL-IP", 1 },
                { "EXTERNAL-IP", 1 },    { "OS-IMAGE", 1 },
                { "KERNEL-VERSION", 1 }, { "CONTAINER-RUNTIME", 1 },
        };
        json_t *rows = json_array(), *defs = json_array(), *n;
        size_t i;

        if (!rows || !defs)
                goto oom;
        for (i = 0; i < ELEMENTSOF(cols); i++)
                if (json_array_append_new(defs, json_pack("{s:s, s:s, s:s, s:i}", "name",
                                                          cols[i].name, "type", "string", "format",
                                                          i == 0 ? "name" : "", "priority",
                                                          cols[i].priority)) < 0)
                        goto oom;
        json_array_foreach (nodes, i, n) {
                json_t *m = json_object_get(n, "metadata"), *st = json_object_get(n, "status"),
                       *info = json_object_get(st, "nodeInfo"), *a;
                usec_t created = 0;
                char age[32] = "<unknown>";
                const char *internal = "<none>", *external = "<none>";
                _cleanup_free_ char *status = spec_node_status(n), *roles = spec_node_roles(n);
                size_t k;

                json_array_foreach (json_object_get(st, "addresses"), k, a) {
                        const char *type = json_string_value(json_object_get(a, "type")),
                                   *addr = json_string_value(json_object_get(a, "address"));
                        if (streq_ptr(type, "InternalIP") && addr)
                                internal = addr;
                        if (streq_ptr(type, "ExternalIP") && addr)
                                external = addr;
                }
                if (parse_timestamp(json_string_value(json_object_get(m, "creationTimestamp")),
                                    &created) >= 0)
                        spec_human_duration(age, now_realtime() - MIN(created, now_realtime()));
                if (!status || !roles ||
                    json_array_append_new(
                            rows,
                            json_pack("{s:[s, s, s, s, s, s, s, s, s, s], s:{s:s, s:s, s:O}}",
                                      "cells",
                                      strempty(json_string_value(json_object_get(m, "name"))),
                                      status, roles, age,
                                      strempty(json_string_value(
                                              json_object_get(info, "kubeletVersion"))),
                                      internal, external,
                                      strempty(json_string_value(json_object_get(info, "osImage"))),
                                      strempty(json_string_value(
                                              json_object_get(info, "kernelVersion"))),
                                      strempty(json_string_value(
                                              json_object_get(info, "containerRuntimeVersion"))),
                                      "object", "kind", "PartialObjectMetadata", "apiVersion",
                                      "meta.k8s.io/v1", "metadata", m)) < 0)
                        goto oom;
        }
        return json_pack("{s:s, s:s, s:{}, s:o, s:o}", "kind", "Table", "apiVersion",
                         "meta.k8s.io/v1", "metadata", "columnDefinitions", defs, "rows", rows);
oom:
        json_decref(rows);
        json_decref(defs);
        return NULL;
}

static enum MHD_Result node_not_found(req *r, const char *name) {
        _cleanup_free_ char *msg =
                r->s->fleet ? strprintf("nodes \"%s\" not found: no tendd of the fleet has "
                                        "joined as %s (tend get nodes lists them)",
                                        name, name)
                            : strprintf("nodes \"%s\" not found: this tendd's node is its "
                                        "host, %s",
                                        name, agent_node_name(r->s->agent));
        return api__send_json(
                r, 404,
                spec_status_json(404, "NotFound", msg,
                                 json_pack("{s:s, s:s}", "name", name, "kind", "nodes")));
}

static enum MHD_Result wait_for_fleet(req *r, int e, const char *name);

/* PATCH /api/v1/nodes/NAME in fleet mode: only spec.unschedulable may
 * change (a node's labels are its tendd's --node-labels). */
static enum MHD_Result patch_node(req *r, json_t *nodes, const char *name) {
        json_t *cur = find_node(nodes, name), *want_spec, *want;
        _cleanup_(json_decrefp) json_t *patched = NULL, *rest_cur = NULL, *rest_new = NULL;
        enum MHD_Result ret;
        bool value;
        int e, dry_run;

        if (!cur)
                return node_not_found(r, name);
        patched = api__apply_patch(r, cur, &ret);
        if (!patched)
                return ret;
        want_spec = json_object_get(patched, "spec");
        want = json_object_get(want_spec, "unschedulable");
        if (want && !json_is_boolean(want) && !json_is_null(want))
                return api__send_status(r, 422, "Invalid",
                                        "spec.unschedulable: Invalid value: must be true or false");
        value = json_is_true(want);
        rest_cur = json_deep_copy(cur);
        rest_new = json_deep_copy(patched);
        if (!rest_cur || !rest_new)
                return api__send_oom(r);
        json_object_del(json_object_get(rest_cur, "spec"), "unschedulable");
        json_object_del(json_object_get(rest_new, "spec"), "unschedulable");
        if (!json_equal(rest_cur, rest_new))
                return api__send_status(r, 422, "Invalid",
                                        "nodes \"%s\": only spec.unschedulable can be changed "
                                        "(tend cordon / uncordon): a node's labels are its "
                                        "tendd's --node-labels, the rest is what its tendd "
                                        "reports",
                                        name);
        dry_run = api__dry_run(r, NULL, &ret);
        if (dry_run < 0)
                return ret;
        if (dry_run)
                return api__send_json(r, 200, TAKE_PTR(patched));
        e = r->s->fleet->set_unschedulable(r->s->fleet->userdata, name, value, api__later, r);
        return wait_for_fleet(r, e, name);
}

/* The fleet answers later: the connection waits, suspended. */
static enum MHD_Result wait_for_fleet(req *r, int e, const char *name) {
        if (e == -ENOENT)
                return api__send_status(r, 409, "Conflict",
                                        "node %s has no Node in etcd yet (its tendd is joining): "
                                        "try again",
                                        name);
        if (e < 0)
                return api__send_status(r, 503, "ServiceUnavailable",
                                        "cannot write node %s to etcd: %s", name, strerror(-e));
        return api__wait(r, r->s->fleet->cancel, r->s->fleet->userdata);
}

/* DELETE /api/v1/nodes/NAME in fleet mode: a node that is gone. */
static enum MHD_Result delete_node(req *r, json_t *nodes, const char *name) {
        enum MHD_Result ret;
        _cleanup_(json_decrefp) json_t *options = r->body.len ? api__body_json(r, &ret) : NULL;
        json_t *node = find_node(nodes, name);
        int dry_run;

        if (r->body.len && !options)
                return ret;
        if (!node)
                return node_not_found(r, name);
        dry_run = api__dry_run(r, options, &ret);
        if (dry_run < 0)
                return ret;
        if (dry_run)
                return api__send_json(
                        r, 200,
                        spec_status_json(200, "", NULL,
                                         json_pack("{s:s, s:s, s:s, s:s?}", "name", name, "group",
                                                   "", "kind", "nodes", "uid",
                                                   api__json_field(node, "metadata.uid"))));
        return wait_for_fleet(
                r, r->s->fleet->delete_node(r->s->fleet->userdata, name, api__later, r), name);
}

/* /api/v1/nodes[/NAME]; name NULL for the list. */
enum MHD_Result api__handle_nodes(req *r, const char *name, const char *method) {
        _cleanup_(json_decrefp) json_t *nodes = NULL;
        json_t *node;

        if (!streq(method, "GET") &&
            !(r->s->fleet && name && (streq(method, "PATCH") || streq(method, "DELETE"))))
                return api__send_status(r, 405, "MethodNotAllowed",
                                        r->s->fleet ? "a node is changed by PATCH of "
                                                      "spec.unschedulable (tend cordon), or "
                                                      "removed by DELETE once it is gone"
                                                    : "the node is this host: it is read-only "
                                                      "(cordoning is for a fleet: tendd "
                                                      "--fleet)");
        if (api__arg_true(r, "watch"))
                return api__send_status(r, 405, "MethodNotAllowed", "nodes cannot be watched");
        nodes = all_nodes(r->s);
        if (!nodes)
                return api__send_oom(r);
        if (!name && streq(method, "GET")) {
                /* the label and field selectors of a list */
                filter f;
                char *err = NULL;
                size_t i;
                json_t *n;
                if (api__filter_parse(r, NULL, "nodes", &f, &err) < 0) {
                        enum MHD_Result ret = api__send_status(r, 400, "BadRequest", "%s",
                                                               err ?: "out of memory");
                        free(err);
                        api__filter_done(&f);
                        return ret;
                }
                for (i = json_array_size(nodes); i-- > 0;)
                        if ((n = json_array_get(nodes, i)) && !api__filter_match(&f, n))
                                (void) json_array_remove(nodes, i);
                api__filter_done(&f);
        }
        if (!streq(method, "GET") && !r->conn)
                return api__send_status(r, 400, "BadRequest",
                                        "a node is written to the fleet's etcd: that needs a "
                                        "connection to answer on");
        if (streq(method, "PATCH"))
                return patch_node(r, nodes, name);
        if (streq(method, "DELETE"))
                return delete_node(r, nodes, name);
        node = name ? find_node(nodes, name) : NULL;
        if (name && !node)
                return node_not_found(r, name);
        if (api__wants_table(r)) {
                _cleanup_(json_decrefp) json_t *one = node ? json_pack("[O]", node) : NULL;
                return api__send_json(r, 200, node_table(one ?: nodes));
        }
        if (name)
                return api__send_json(r, 200, json_incref(node));
        return api__send_json(r, 200,
                              json_pack("{s:s, s:s, s:{}, s:O}", "kind", "NodeList", "apiVersion",
                                        "v1", "metadata", "items", nodes));
}

/* GET /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/NAME:
 * the node's Lease, which `kubectl describe node` shows (renewed while the
 * node is Ready). Read-only. */
enum MHD_Result api__handle_node_lease(req *r, const char *ns, const char *name,
                                       const char *method) {
        _cleanup_(json_decrefp) json_t *nodes = NULL;
        json_t *node, *c;
        const char *created, *renewed = NULL;
        char now[TIMESTAMP_MAX];
        size_t i;

        if (!streq(method, "GET"))
                return api__send_status(r, 405, "MethodNotAllowed",
                                        "a node's lease is its tendd's: it is read-only");
        nodes = all_nodes(r->s);
        if (!nodes)
                return api__send_oom(r);
        node = streq(ns, "kube-node-lease") && name ? find_node(nodes, name) : NULL;
        if (!node)
                return api__send_json(
                        r, 404,
                        spec_status_json(
                                404, "NotFound", "leases are those of nodes, in kube-node-lease",
                                json_pack("{s:s, s:s, s:s}", "name", strempty(name), "group",
                                          "coordination.k8s.io", "kind", "leases")));
        created = json_string_value(
                json_object_get(json_object_get(node, "metadata"), "creationTimestamp"));
        format_timestamp(now, now_realtime());
        json_array_foreach (json_object_get(json_object_get(node, "status"), "conditions"), i, c)
                if (streq_ptr(json_string_value(json_object_get(c, "type")), "Ready"))
                        renewed = streq_ptr(json_string_value(json_object_get(c, "status")), "True")
                                          ? now
                                          : json_string_value(
                                                    json_object_get(c, "lastHeartbeatTime"));
        return api__send_json(r, 200,
                              json_pack("{s:s, s:s, s:{s:s, s:s, s:s?}, s:{s:s, s:i, s:s?}}",
                                        "apiVersion", "coordination.k8s.io/v1", "kind", "Lease",
                                        "metadata", "name", name, "namespace", "kube-node-lease",
                                        "creationTimestamp", created, "spec", "holderIdentity",
                                        name, "leaseDurationSeconds", 40, "renewTime", renewed));
}
