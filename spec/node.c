/* SPDX-License-Identifier: MIT */

/* Nodes as kubectl shows them (see spec.h): the API's tables and tend get
 * nodes say the same. */

#include <inttypes.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "tend/spec.h"

char *spec_node_status(json_t *node) {
        json_t *c;
        const char *ready = "Unknown";
        size_t i;

        json_array_foreach (json_object_get(json_object_get(node, "status"), "conditions"), i, c)
                if (streq_ptr(json_string_value(json_object_get(c, "type")), "Ready"))
                        ready = streq_ptr(json_string_value(json_object_get(c, "status")), "True")
                                        ? "Ready"
                                        : "NotReady";
        return strprintf(
                "%s%s", ready,
                json_is_true(json_object_get(json_object_get(node, "spec"), "unschedulable"))
                        ? ",SchedulingDisabled"
                        : "");
}

char *spec_node_roles(json_t *node) {
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(4096);
        const char *k, *role;
        json_t *v;

        json_object_foreach (json_object_get(json_object_get(node, "metadata"), "labels"), k, v)
                if ((role = startswith(k, "node-role.kubernetes.io/")) && *role)
                        (void) tend_buf_addf(&b, "%s%s", b.len ? "," : "", role);
        return b.len ? tend_buf_take(&b) : strdup("<none>");
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

/* The first line of a file the kernel or the system keeps (machine-id,
 * boot_id, the DMI product uuid), or "" where there is none (a container,
 * a user without the right to read it): the ids a kubelet reports, which
 * typed clients require as fields. */
static char *first_line(const char *path) {
        _cleanup_free_ char *data = NULL;
        size_t n;

        if (read_full_file(path, 4096, &data, &n) < 0)
                return strdup("");
        return strndup(data, strcspn(data, "\n"));
}

json_t *spec_host_node(const char *name, json_t *labels) {
        char boot[TIMESTAMP_MAX], cpus[16];
        _cleanup_free_ char *mem = NULL, *os = os_image(), *machine = first_line("/etc/machine-id"),
                            *boot_id = first_line("/proc/sys/kernel/random/boot_id"),
                            *uuid = first_line("/sys/class/dmi/id/product_uuid");
        uint64_t total_kb = 0, avail_kb;
        struct utsname u = {};
        double up = host_uptime();
        json_t *node, *l;

        (void) uname(&u);
        (void) host_meminfo(&total_kb, &avail_kb);
        snprintf(cpus, sizeof cpus, "%ld", sysconf(_SC_NPROCESSORS_ONLN));
        mem = strprintf("%" PRIu64 "Ki", total_kb);
        if (!mem || !os || !machine || !boot_id || !uuid)
                return NULL;
        format_timestamp(boot, now_realtime() - (usec_t) (up * USEC_PER_SEC));
        node = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:{s:s, s:s, s:s}}, s:{}, "
                         "s:{s:{s:s, s:s, s:s}, s:{s:s, s:s, s:s}, "
                         "s:[{s:s, s:s}, {s:s, s:s}], "
                         "s:{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}}}",
                         "kind", "Node", "apiVersion", "v1", "metadata", "name", name, "uid", name,
                         "creationTimestamp", boot, "labels", "kubernetes.io/hostname", name,
                         "kubernetes.io/os", "linux", "kubernetes.io/arch", SPEC_ARCH, "spec",
                         "status", "capacity", "cpu", cpus, "memory", mem, "pods", "1000",
                         "allocatable", "cpu", cpus, "memory", mem, "pods", "1000", "addresses",
                         "type", "Hostname", "address", name, "type", "InternalIP", "address",
                         "127.0.0.1", "nodeInfo", "kernelVersion", u.release, "osImage", os,
                         "operatingSystem", "linux", "architecture", SPEC_ARCH, "kubeletVersion",
                         "v" TEND_VERSION, "containerRuntimeVersion", "tend://" TEND_VERSION,
                         "kubeProxyVersion", "", "machineID", machine, "bootID", boot_id,
                         "systemUUID", uuid);
        l = json_object_get(json_object_get(node, "metadata"), "labels");
        if (node && json_is_object(labels) && json_object_update(l, labels) < 0)
                node = (json_decref(node), NULL);
        return node;
}
