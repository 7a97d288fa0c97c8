/* SPDX-License-Identifier: MIT */

/* tend get nodes [NAME...] [-o wide|json|yaml|name]; tend cordon|uncordon NODE. */

#include <getopt.h>

#include "cli.h"

static const char *node_name(json_t *n) {
        return json_string_value(json_object_get(json_object_get(n, "metadata"), "name"));
}

/* The labels a user gave (--node-labels), not the kubernetes.io/ ones
 * every node has. */
static char *node_labels(json_t *n) {
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(64 * 1024);
        const char *k;
        json_t *v;

        json_object_foreach (json_object_get(json_object_get(n, "metadata"), "labels"), k, v)
                if (!startswith(k, "kubernetes.io/") && !startswith(k, "node-role.kubernetes.io/"))
                        (void) tend_buf_addf(&b, "%s%s=%s", b.len ? "," : "", k,
                                             strempty(json_string_value(v)));
        return b.len ? tend_buf_take(&b) : strdup("<none>");
}

/* Pods that are not over (Succeeded, Failed), per node. */
static size_t pods_on(json_t *pods, const char *node) {
        json_t *p;
        size_t i, n = 0;

        json_array_foreach (json_object_get(pods, "items"), i, p) {
                const char *phase = json_string_value(
                        json_object_get(json_object_get(p, "status"), "phase"));
                if (streq_ptr(json_string_value(
                                      json_object_get(json_object_get(p, "spec"), "nodeName")),
                              node) &&
                    !streq_ptr(phase, "Succeeded") && !streq_ptr(phase, "Failed"))
                        n++;
        }
        return n;
}

static void print_table(json_t *items, json_t *pods, bool wide) {
        table t = {};
        json_t *n;
        size_t i;

        if (wide)
                table_init(&t, 9, "NAME", "STATUS", "ROLES", "PODS", "AGE", "VERSION", "LABELS",
                           "OS-IMAGE", "KERNEL-VERSION", NULL);
        else
                table_init(&t, 7, "NAME", "STATUS", "ROLES", "PODS", "AGE", "VERSION", "LABELS",
                           NULL);
        json_array_foreach (items, i, n) {
                json_t *info = json_object_get(json_object_get(n, "status"), "nodeInfo");
                _cleanup_free_ char *status = spec_node_status(n), *labels = node_labels(n),
                                    *roles = spec_node_roles(n);
                char age[40] = "<unknown>", count[32];
                usec_t created;

                if (parse_timestamp(json_string_value(json_object_get(
                                            json_object_get(n, "metadata"), "creationTimestamp")),
                                    &created) >= 0)
                        cli_age(age, created);
                snprintf(count, sizeof count, "%zu", pods_on(pods, node_name(n)));
                if (wide)
                        table_row(&t, strna(node_name(n)), strna(status), strna(roles), count, age,
                                  strempty(json_string_value(
                                          json_object_get(info, "kubeletVersion"))),
                                  strna(labels),
                                  strempty(json_string_value(json_object_get(info, "osImage"))),
                                  strempty(json_string_value(
                                          json_object_get(info, "kernelVersion"))));
                else
                        table_row(&t, strna(node_name(n)), strna(status), strna(roles), count, age,
                                  strempty(json_string_value(
                                          json_object_get(info, "kubeletVersion"))),
                                  strna(labels));
        }
        table_print(&t, stdout, true);
        table_done(&t);
}

/* argv: the words after "get" that name nodes ("nodes", "nodes n1 n2",
 * "node/n1 node/n2"); out: "", "wide", "json", "yaml" or "name". */
int cli_get_nodes(char **words, size_t n_words, const char *out) {
        _cleanup_(client_freep) client *c = NULL;
        _cleanup_(json_decrefp) json_t *list = NULL, *pods = NULL, *items = json_array();
        const char *names[64];
        size_t n_names = 0;
        long code = 0;
        json_t *n;
        size_t i;
        int ret = 0;

        for (size_t k = 0; k < n_words && n_names < ELEMENTSOF(names); k++) {
                const char *slash = strchr(words[k], '/');
                if (slash) {
                        if (!cli_is_nodes(words[k])) {
                                fprintf(stderr, "error: one type at a time: %s\n", words[k]);
                                return 1;
                        }
                        names[n_names++] = slash + 1;
                } else if (k > 0)
                        names[n_names++] = words[k];
        }
        c = cli_connect();
        if (!c || !items)
                return 1;
        if (client_request(c, "GET", "/api/v1/nodes", NULL, NULL, &code, &list) < 0)
                return 1;
        if (code != 200) {
                client_print_error(code, list);
                return 1;
        }
        for (size_t k = 0; k < n_names; k++) {
                bool found = false;
                json_array_foreach (json_object_get(list, "items"), i, n)
                        if (streq_ptr(node_name(n), names[k])) {
                                json_array_append(items, n);
                                found = true;
                        }
                if (!found) {
                        fprintf(stderr, "Error from server (NotFound): nodes \"%s\" not found\n",
                                names[k]);
                        ret = 1;
                }
        }
        if (n_names == 0)
                json_array_extend(items, json_object_get(list, "items"));

        if (streq(out, "json") || streq(out, "yaml")) {
                json_t *j = n_names == 1 ? json_array_get(items, 0) : list;
                if (n_names > 1)
                        json_object_set(list, "items", items);
                if (!j)
                        return ret;
                if (streq(out, "json"))
                        cli_print_json(j);
                else
                        cli_print_yaml(j);
                return ret;
        }
        if (streq(out, "name")) {
                json_array_foreach (items, i, n)
                        printf("node/%s\n", strna(node_name(n)));
                return ret;
        }
        if (json_array_size(items) == 0) {
                if (n_names == 0)
                        fprintf(stderr, "No resources found\n");
                return ret;
        }
        /* The PODS column: every namespace's pods, by spec.nodeName. */
        if (client_request(c, "GET", "/api/v1/pods", NULL, NULL, &code, &pods) < 0 || code != 200) {
                json_decref(pods);
                pods = NULL;
        }
        print_table(items, pods, streq(out, "wide"));
        return ret;
}

static int cordon(int argc, char **argv, bool on) {
        const char *verb = on ? "cordon" : "uncordon";
        _cleanup_(client_freep) client *c = NULL;
        _cleanup_(json_decrefp) json_t *cur = NULL, *resp = NULL;
        _cleanup_free_ char *path = NULL, *esc = NULL;
        const char *name;
        long code = 0;

        if (argc == 2 && (streq(argv[1], "--help") || streq(argv[1], "-h"))) {
                printf("Usage: tend %s NODE\n\n%s\n", verb,
                       on ? "Marks a node of the fleet unschedulable: no new pod is placed on "
                            "it;\nthe pods it runs keep running. `tend uncordon NODE` undoes it."
                          : "Marks a cordoned node of the fleet schedulable again.");
                return 0;
        }
        if (argc != 2) {
                fprintf(stderr, "error: tend %s NODE: one node\n", verb);
                return 2;
        }
        name = startswith(argv[1], "node/") ?: startswith(argv[1], "nodes/") ?: argv[1];
        c = cli_connect();
        esc = client_escape(name);
        path = esc ? strprintf("/api/v1/nodes/%s", esc) : NULL;
        if (!c || !path || client_request(c, "GET", path, NULL, NULL, &code, &cur) < 0)
                return 1;
        if (code != 200) {
                client_print_error(code, cur);
                return 1;
        }
        if (json_is_true(json_object_get(json_object_get(cur, "spec"), "unschedulable")) == on) {
                printf("node/%s already %s\n", name, on ? "cordoned" : "uncordoned");
                return 0;
        }
        if (client_request(c, "PATCH", path, "application/strategic-merge-patch+json",
                           on ? "{\"spec\":{\"unschedulable\":true}}"
                              : "{\"spec\":{\"unschedulable\":null}}",
                           &code, &resp) < 0)
                return 1;
        if (code != 200) {
                client_print_error(code, resp);
                return 1;
        }
        printf("node/%s %s\n", name, on ? "cordoned" : "uncordoned");
        return 0;
}

int cli_cordon(int argc, char **argv) {
        return cordon(argc, argv, true);
}

int cli_uncordon(int argc, char **argv) {
        return cordon(argc, argv, false);
}
