/* SPDX-License-Identifier: MIT */

/*
 * /api/v1/nodes: this host as the one Node (read-only), so that `kubectl
 * get nodes`, `describe node` and `top node` work: its name (the agent's,
 * as pods' spec.nodeName), labels, capacity (CPUs, memory), Ready while
 * tendd answers, addresses and system info.
 */

#include <inttypes.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "api-internal.h"

int api__meminfo(uint64_t *ret_total_kb, uint64_t *ret_available_kb) {
        _cleanup_free_ char *data = NULL;
        unsigned long long total = 0, avail = 0;
        const char *line;
        size_t n;
        int r = read_full_file("/proc/meminfo", 1 << 20, &data, &n);

        if (r < 0)
                return r;
        if ((line = strstr(data, "MemTotal:")))
                (void) sscanf(line, "MemTotal: %llu", &total);
        if ((line = strstr(data, "MemAvailable:")))
                (void) sscanf(line, "MemAvailable: %llu", &avail);
        *ret_total_kb = total;
        *ret_available_kb = avail;
        return 0;
}

static char *os_image(void) {
        _cleanup_free_ char *data = NULL;
        const char *p;
        size_t n;

        if (read_full_file("/etc/os-release", 1 << 16, &data, &n) < 0 ||
            !(p = strstr(data, "PRETTY_NAME=")))
                return strdup("Linux");
        p += strlen("PRETTY_NAME=");
        if (*p == '"')
                p++;
        return strndup(p, strcspn(p, "\"\n"));
}

static json_t *node_json(api_server *s) {
        const char *host = agent_node_name(s->agent);
        char ts[TIMESTAMP_MAX], boot[TIMESTAMP_MAX], cpus[16];
        _cleanup_free_ char *mem = NULL, *os = os_image();
        uint64_t total_kb = 0, avail_kb;
        struct utsname u = {};
        double up = api__uptime();

        (void) uname(&u);
        (void) api__meminfo(&total_kb, &avail_kb);
        snprintf(cpus, sizeof cpus, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
        mem = strprintf("%" PRIu64 "Ki", total_kb);
        if (!mem || !os)
                return NULL;
        format_timestamp(ts, now_realtime());
        format_timestamp(boot, now_realtime() - (usec_t) (up * USEC_PER_SEC));
        return json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:{s:s, s:s, s:s}}, s:{}, "
                         "s:{s:{s:s, s:s}, s:{s:s, s:s}, s:[{s:s, s:s, s:s, s:s, s:s, s:s}], "
                         "s:[{s:s, s:s}, {s:s, s:s}], s:{s:s, s:s, s:s, s:s, s:s, s:s, s:s}}}",
                         "kind", "Node", "apiVersion", "v1", "metadata", "name", host, "uid", host,
                         "creationTimestamp", boot, "labels", "kubernetes.io/hostname", host,
                         "kubernetes.io/os", "linux", "kubernetes.io/arch", API_ARCH, "spec",
                         "status", "capacity", "cpu", cpus, "memory", mem, "allocatable", "cpu",
                         cpus, "memory", mem, "conditions", "type", "Ready", "status", "True",
                         "reason", "TenddReady", "message", "tendd answers on this host",
                         "lastHeartbeatTime", ts, "lastTransitionTime", boot, "addresses", "type",
                         "Hostname", "address", host, "type", "InternalIP", "address", "127.0.0.1",
                         "nodeInfo", "kernelVersion", u.release, "osImage", os, "operatingSystem",
                         "linux", "architecture", API_ARCH, "kubeletVersion", "v" TEND_VERSION,
                         "containerRuntimeVersion", "tend://" TEND_VERSION, "kubeProxyVersion", "");
}

/* kubectl's columns for nodes; AGE: since the host booted. */
static json_t *node_table(json_t *node) {
        char age[32];

        spec_human_duration(age, (usec_t) (api__uptime() * USEC_PER_SEC));
        return json_pack(
                "{s:s, s:s, s:{}, s:[{s:s, s:s, s:s, s:i}, {s:s, s:s, s:s, s:i}, "
                "{s:s, s:s, s:s, s:i}, {s:s, s:s, s:s, s:i}, {s:s, s:s, s:s, s:i}], "
                "s:[{s:[s, s, s, s, s], s:{s:s, s:s, s:O}}]}",
                "kind", "Table", "apiVersion", "meta.k8s.io/v1", "metadata", "columnDefinitions",
                "name", "NAME", "type", "string", "format", "name", "priority", 0, "name", "STATUS",
                "type", "string", "format", "", "priority", 0, "name", "ROLES", "type", "string",
                "format", "", "priority", 0, "name", "AGE", "type", "string", "format", "",
                "priority", 0, "name", "VERSION", "type", "string", "format", "", "priority", 0,
                "rows", "cells",
                json_string_value(json_object_get(json_object_get(node, "metadata"), "name")),
                "Ready", "<none>", age, "v" TEND_VERSION, "object", "kind", "PartialObjectMetadata",
                "apiVersion", "meta.k8s.io/v1", "metadata", json_object_get(node, "metadata"));
}

/* GET /api/v1/nodes[/NAME]; name NULL for the list. */
enum MHD_Result api__handle_nodes(req *r, const char *name, const char *method) {
        _cleanup_(json_decrefp) json_t *node = NULL;
        const char *host;

        if (!streq(method, "GET"))
                return api__send_status(r, 405, "MethodNotAllowed",
                                        "the node is this host: it is read-only");
        if (api__arg_true(r, "watch"))
                return api__send_status(r, 405, "MethodNotAllowed",
                                        "nodes cannot be watched: the node is this host");
        node = node_json(r->s);
        if (!node)
                return api__send_oom(r);
        host = json_string_value(json_object_get(json_object_get(node, "metadata"), "name"));
        if (name && !streq(name, host)) {
                _cleanup_free_ char *msg = strprintf("nodes \"%s\" not found: this tendd's "
                                                     "node is its host, %s",
                                                     name, host);
                return api__send_json(
                        r, 404,
                        api__status_json(404, "NotFound", msg,
                                         json_pack("{s:s, s:s}", "name", name, "kind", "nodes")));
        }
        if (api__wants_table(r))
                return api__send_json(r, 200, node_table(node));
        if (name)
                return api__send_json(r, 200, json_incref(node));
        return api__send_json(r, 200,
                              json_pack("{s:s, s:s, s:{}, s:[O]}", "kind", "NodeList", "apiVersion",
                                        "v1", "metadata", "items", node));
}

/* GET /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/NAME:
 * the node's Lease, which `kubectl describe node` shows (renewed while
 * tendd answers, as the node is Ready while it does). Read-only. */
enum MHD_Result api__handle_node_lease(req *r, const char *ns, const char *name,
                                       const char *method) {
        _cleanup_(json_decrefp) json_t *node = NULL;
        const char *host, *created;
        char now[TIMESTAMP_MAX];

        if (!streq(method, "GET"))
                return api__send_status(r, 405, "MethodNotAllowed",
                                        "the node's lease is this tendd's: it is read-only");
        node = node_json(r->s);
        if (!node)
                return api__send_oom(r);
        host = json_string_value(json_object_get(json_object_get(node, "metadata"), "name"));
        created = json_string_value(
                json_object_get(json_object_get(node, "metadata"), "creationTimestamp"));
        if (!streq(ns, "kube-node-lease") || !name || !streq(name, host))
                return api__send_json(
                        r, 404,
                        api__status_json(404, "NotFound",
                                         "leases are those of nodes, in kube-node-lease: this "
                                         "tendd's is its host's",
                                         json_pack("{s:s, s:s, s:s}", "name", strempty(name),
                                                   "group", "coordination.k8s.io", "kind",
                                                   "leases")));
        format_timestamp(now, now_realtime());
        return api__send_json(r, 200,
                              json_pack("{s:s, s:s, s:{s:s, s:s, s:s?}, s:{s:s, s:i, s:s}}",
                                        "apiVersion", "coordination.k8s.io/v1", "kind", "Lease",
                                        "metadata", "name", host, "namespace", "kube-node-lease",
                                        "creationTimestamp", created, "spec", "holderIdentity",
                                        host, "leaseDurationSeconds", 40, "renewTime", now));
}
