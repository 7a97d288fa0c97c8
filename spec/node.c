/* SPDX-License-Identifier: MIT */

/* Nodes as kubectl shows them (see spec.h): the API's tables and tend get
 * nodes say the same. */

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
