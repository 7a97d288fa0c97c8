/* SPDX-License-Identifier: MIT */

/*
 * The kinds (see spec.h, spec_kind): one row each, read by the API's
 * discovery and routes, the CLI's names for them, and the fleet's keys.
 * Besides the kinds tend runs, the registry lists kinds tend has none of,
 * by design or not yet (Services, ConfigMaps, Jobs...): kubectl resolves
 * every kind of its default prune list (apply --prune) and lists Services
 * for cluster-info before it does anything, and fails on a kind discovery
 * lacks. Such a kind answers what is true: its lists are empty, an object
 * of it is not found, and a write is refused with the reason (docs/api.md).
 */

#include "tend/spec.h"

/* verbs, short names: space-separated; absent: why tend has none (NULL:
 * served); type: the objects' codec (NULL: none is stored) */
static const spec_kind kinds[] = {
        /* core/v1 */
        { "", "v1", "pods", "pod", "Pod", true, "get list watch delete deletecollection", "po",
          true, NULL, &spec_type_pod, true },
        { "", "v1", "pods/log", "", "Pod", true, "get", NULL, false, NULL, NULL, false },
        { "", "v1", "nodes", "node", "Node", false, "get list", "no", false, NULL, NULL, false },
        { "", "v1", "events", "event", "Event", true, "get list watch", "ev", false, NULL,
          &spec_type_event, false },
        { "", "v1", "namespaces", "namespace", "Namespace", false, "get list", "ns", false, NULL,
          NULL, false },
        { "", "v1", "services", "service", "Service", true, "get list", "svc", false,
          "tend has no Services: a pod listens on the host itself, at its containerPort or its "
          "leased port (tend.io/lease-ports; its tend.io/ports annotation says which)",
          NULL, false },
        { "", "v1", "endpoints", "endpoints", "Endpoints", true, "get list", "ep", false,
          "tend has no Services, hence no Endpoints: a pod listens on the host itself", NULL,
          false },
        { "", "v1", "configmaps", "configmap", "ConfigMap", true, "get list", "cm", false,
          "tend has no ConfigMaps yet: put the values in the container's env", NULL, false },
        { "", "v1", "secrets", "secret", "Secret", true, "get list", NULL, false,
          "tend has no Secrets yet: put the values in the container's env", NULL, false },
        { "", "v1", "persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim",
          true, "get list", "pvc", false,
          "tend has no volumes: a pod is a host process and uses the host's files", NULL, false },
        { "", "v1", "persistentvolumes", "persistentvolume", "PersistentVolume", false, "get list",
          "pv", false, "tend has no volumes: a pod is a host process and uses the host's files",
          NULL, false },
        { "", "v1", "replicationcontrollers", "replicationcontroller", "ReplicationController",
          true, "get list", "rc", false, "tend has no ReplicationControllers: use a Deployment",
          NULL, false },
        /* apps/v1 */
        { "apps", "v1", "deployments", "deployment", "Deployment", true,
          "create delete deletecollection get list patch update watch", "deploy", true, NULL,
          &spec_type_deployment, true },
        { "apps", "v1", "deployments/scale", "", "Scale", true, "get patch update", NULL, false,
          NULL, NULL, false },
        { "apps", "v1", "deployments/status", "", "Deployment", true, "get", NULL, false, NULL,
          NULL, false },
        { "apps", "v1", "replicasets", "replicaset", "ReplicaSet", true,
          "delete deletecollection get list watch", "rs", true, NULL, &spec_type_replica_set,
          true },
        { "apps", "v1", "replicasets/scale", "", "Scale", true, "get patch update", NULL, false,
          NULL, NULL, false },
        { "apps", "v1", "daemonsets", "daemonset", "DaemonSet", true, "get list", "ds", false,
          "tend has no DaemonSets: one tendd runs one host's pods; in a fleet, a Deployment "
          "with a nodeSelector places them",
          NULL, false },
        { "apps", "v1", "statefulsets", "statefulset", "StatefulSet", true, "get list", "sts",
          false, "tend has no StatefulSets: use a Deployment", NULL, false },
        /* batch/v1 */
        { "batch", "v1", "jobs", "job", "Job", true, "get list", NULL, false,
          "tend has no Jobs yet: run work that ends as a systemd timer or a cron job", NULL,
          false },
        { "batch", "v1", "cronjobs", "cronjob", "CronJob", true, "get list", "cj", false,
          "tend has no CronJobs yet: run work that ends as a systemd timer or a cron job", NULL,
          false },
        /* networking.k8s.io/v1 */
        { "networking.k8s.io", "v1", "ingresses", "ingress", "Ingress", true, "get list", "ing",
          false, "tend has no Ingresses: put a proxy (a Deployment of one) in front of the pods",
          NULL, false },
        /* events.k8s.io/v1: the same events, in that group's shape */
        { "events.k8s.io", "v1", "events", "event", "Event", true, "get list watch", "ev", false,
          NULL, &spec_type_event, false },
        /* who may do what: whoever reaches the API may do everything */
        { "authorization.k8s.io", "v1", "selfsubjectaccessreviews", "", "SelfSubjectAccessReview",
          false, "create", NULL, false, NULL, NULL, false },
        { "authorization.k8s.io", "v1", "selfsubjectrulesreviews", "", "SelfSubjectRulesReview",
          false, "create", NULL, false, NULL, NULL, false },
        { "authentication.k8s.io", "v1", "selfsubjectreviews", "", "SelfSubjectReview", false,
          "create", NULL, false, NULL, NULL, false },
};

const spec_kind *spec_kinds(size_t *ret_n) {
        *ret_n = ELEMENTSOF(kinds);
        return kinds;
}

const spec_kind *spec_kind_find(const char *group, const char *version, const char *plural) {
        for (size_t i = 0; i < ELEMENTSOF(kinds); i++)
                if (streq(kinds[i].group, group) && streq(kinds[i].version, version) &&
                    streq(kinds[i].plural, plural))
                        return &kinds[i];
        return NULL;
}

const spec_kind *spec_kind_of(const spec_type *type) {
        for (size_t i = 0; type && i < ELEMENTSOF(kinds); i++)
                if (kinds[i].type == type)
                        return &kinds[i];
        return NULL;
}

/* Whether word is one of the space-separated words of list. */
static bool among(const char *list, const char *word, size_t n) {
        for (const char *p = list; p && *p;) {
                size_t l = strcspn(p, " ");
                if (l == n && strncmp(p, word, n) == 0)
                        return true;
                p += l + (p[l] == ' ');
        }
        return false;
}

const spec_kind *spec_kind_named(const char *word) {
        size_t n = strcspn(word, ".");
        const char *group = word[n] ? word + n + 1 : NULL;

        for (size_t i = 0; i < ELEMENTSOF(kinds); i++) {
                const spec_kind *k = &kinds[i];
                if (!k->type || (group && !streq(group, k->group)) ||
                    spec_kind_of(k->type) != k) /* the first of a type: its own group */
                        continue;
                if ((strlen(k->plural) == n && strncmp(word, k->plural, n) == 0) ||
                    (strlen(k->singular) == n && strncmp(word, k->singular, n) == 0) ||
                    among(k->short_names, word, n))
                        return k;
        }
        return NULL;
}

char *spec_kind_path(const spec_kind *k) {
        return *k->group ? strprintf("/apis/%s/%s", k->group, k->version)
                         : strprintf("/api/%s", k->version);
}
