/* SPDX-License-Identifier: MIT */

/*
 * The kinds (see spec.h, spec_kind): one row each, read by the API's
 * discovery, routes and writes, the tables of `get`, OpenAPI, the store's
 * codecs, the CLI's names for them, and the fleet's keys. Besides the
 * kinds tend runs, the registry lists kinds tend has none of, by design or
 * not yet (Services, Jobs...): kubectl resolves
 * every kind of its default prune list (apply --prune) and lists Services
 * for cluster-info before it does anything, and fails on a kind discovery
 * lacks. Such a kind answers what is true: its lists are empty, an object
 * of it is not found, and a write is refused with the reason (docs/api.md).
 */

#include "spec-internal.h"

/* (the rows' checks, as the registry types them) */
static void deployment_defaults(void *obj) {
        spec_deployment_default(obj);
}

static int deployment_validate(const void *obj, spec_errors *errs) {
        return spec_deployment_validate(obj, errs);
}

static int deployment_validate_update(const void *old, const void *obj, spec_errors *errs) {
        return spec_deployment_validate_update(old, obj, errs);
}

static int config_map_validate(const void *obj, spec_errors *errs) {
        return spec_config_map_validate(obj, errs);
}

static int config_map_validate_update(const void *old, const void *obj, spec_errors *errs) {
        return spec_config_map_validate_update(old, obj, errs);
}

/* (a Secret's defaults fail only out of memory: then its checks say so) */
static void secret_defaults(void *obj) {
        (void) spec_secret_default(obj);
}

static int secret_validate(const void *obj, spec_errors *errs) {
        return spec_secret_validate(obj, errs);
}

static int secret_validate_update(const void *old, const void *obj, spec_errors *errs) {
        return spec_secret_validate_update(old, obj, errs);
}

/* verbs, short names: space-separated; absent: why tend has none (NULL:
 * served); type: the objects' codec (NULL: none is stored) */
static const spec_kind kinds[] = {
        /* core/v1 */
        { .group = "",
          .version = "v1",
          .plural = "pods",
          .singular = "pod",
          .kind = "Pod",
          .namespaced = true,
          .verbs = "get list watch delete deletecollection",
          .short_names = "po",
          .in_all = true,
          .type = &spec_type_pod,
          .mirrored = true,
          .table = &spec__table_pod },
        { .group = "",
          .version = "v1",
          .plural = "pods/log",
          .singular = "",
          .kind = "Pod",
          .namespaced = true,
          .verbs = "get" },
        { .group = "",
          .version = "v1",
          .plural = "nodes",
          .singular = "node",
          .kind = "Node",
          .verbs = "get list",
          .short_names = "no" },
        { .group = "",
          .version = "v1",
          .plural = "events",
          .singular = "event",
          .kind = "Event",
          .namespaced = true,
          .verbs = "get list watch",
          .short_names = "ev",
          .type = &spec_type_event,
          .table = &spec__table_event },
        { .group = "",
          .version = "v1",
          .plural = "namespaces",
          .singular = "namespace",
          .kind = "Namespace",
          .verbs = "get list",
          .short_names = "ns" },
        { .group = "",
          .version = "v1",
          .plural = "services",
          .singular = "service",
          .kind = "Service",
          .namespaced = true,
          .verbs = "get list",
          .short_names = "svc",
          .absent = "tend has no Services: a pod listens on the host itself, at its containerPort "
                    "or its leased port (tend.io/lease-ports; its tend.io/ports annotation says "
                    "which)" },
        { .group = "",
          .version = "v1",
          .plural = "endpoints",
          .singular = "endpoints",
          .kind = "Endpoints",
          .namespaced = true,
          .verbs = "get list",
          .short_names = "ep",
          .absent = "tend has no Services, hence no Endpoints: a pod listens on the host itself" },
        { .group = "",
          .version = "v1",
          .plural = "configmaps",
          .singular = "configmap",
          .kind = "ConfigMap",
          .namespaced = true,
          .verbs = "create delete deletecollection get list patch update watch",
          .short_names = "cm",
          .type = &spec_type_config_map,
          .mirrored = true,
          .table = &spec__table_config_map,
          .writes = SPEC_WRITES_STORED,
          .validate = config_map_validate,
          .validate_update = config_map_validate_update },
        { .group = "",
          .version = "v1",
          .plural = "secrets",
          .singular = "secret",
          .kind = "Secret",
          .namespaced = true,
          .verbs = "create delete deletecollection get list patch update watch",
          .type = &spec_type_secret,
          .mirrored = true,
          .table = &spec__table_secret,
          .writes = SPEC_WRITES_STORED,
          .defaults = secret_defaults,
          .validate = secret_validate,
          .validate_update = secret_validate_update },
        { .group = "",
          .version = "v1",
          .plural = "persistentvolumeclaims",
          .singular = "persistentvolumeclaim",
          .kind = "PersistentVolumeClaim",
          .namespaced = true,
          .verbs = "get list",
          .short_names = "pvc",
          .absent = "tend has no volumes: a pod is a host process and uses the host's files" },
        { .group = "",
          .version = "v1",
          .plural = "persistentvolumes",
          .singular = "persistentvolume",
          .kind = "PersistentVolume",
          .verbs = "get list",
          .short_names = "pv",
          .absent = "tend has no volumes: a pod is a host process and uses the host's files" },
        { .group = "",
          .version = "v1",
          .plural = "replicationcontrollers",
          .singular = "replicationcontroller",
          .kind = "ReplicationController",
          .namespaced = true,
          .verbs = "get list",
          .short_names = "rc",
          .absent = "tend has no ReplicationControllers: use a Deployment" },
        /* apps/v1 */
        { .group = "apps",
          .version = "v1",
          .plural = "deployments",
          .singular = "deployment",
          .kind = "Deployment",
          .namespaced = true,
          .verbs = "create delete deletecollection get list patch update watch",
          .short_names = "deploy",
          .in_all = true,
          .type = &spec_type_deployment,
          .mirrored = true,
          .table = &spec__table_deployment,
          .writes = SPEC_WRITES_CONTROLLED,
          .defaults = deployment_defaults,
          .validate = deployment_validate,
          .validate_update = deployment_validate_update },
        { .group = "apps",
          .version = "v1",
          .plural = "deployments/scale",
          .singular = "",
          .kind = "Scale",
          .namespaced = true,
          .verbs = "get patch update" },
        { .group = "apps",
          .version = "v1",
          .plural = "deployments/status",
          .singular = "",
          .kind = "Deployment",
          .namespaced = true,
          .verbs = "get" },
        { .group = "apps",
          .version = "v1",
          .plural = "replicasets",
          .singular = "replicaset",
          .kind = "ReplicaSet",
          .namespaced = true,
          .verbs = "delete deletecollection get list watch",
          .short_names = "rs",
          .in_all = true,
          .type = &spec_type_replica_set,
          .mirrored = true,
          .table = &spec__table_replica_set },
        { .group = "apps",
          .version = "v1",
          .plural = "replicasets/scale",
          .singular = "",
          .kind = "Scale",
          .namespaced = true,
          .verbs = "get patch update" },
        { .group = "apps",
          .version = "v1",
          .plural = "daemonsets",
          .singular = "daemonset",
          .kind = "DaemonSet",
          .namespaced = true,
          .verbs = "get list",
          .short_names = "ds",
          .absent = "tend has no DaemonSets: one tendd runs one host's pods; in a fleet, a "
                    "Deployment with a nodeSelector places them" },
        { .group = "apps",
          .version = "v1",
          .plural = "statefulsets",
          .singular = "statefulset",
          .kind = "StatefulSet",
          .namespaced = true,
          .verbs = "get list",
          .short_names = "sts",
          .absent = "tend has no StatefulSets: use a Deployment" },
        /* batch/v1 */
        { .group = "batch",
          .version = "v1",
          .plural = "jobs",
          .singular = "job",
          .kind = "Job",
          .namespaced = true,
          .verbs = "get list",
          .absent = "tend has no Jobs yet: run work that ends as a systemd timer or a cron job" },
        { .group = "batch",
          .version = "v1",
          .plural = "cronjobs",
          .singular = "cronjob",
          .kind = "CronJob",
          .namespaced = true,
          .verbs = "get list",
          .short_names = "cj",
          .absent =
                  "tend has no CronJobs yet: run work that ends as a systemd timer or a cron job" },
        /* networking.k8s.io/v1 */
        { .group = "networking.k8s.io",
          .version = "v1",
          .plural = "ingresses",
          .singular = "ingress",
          .kind = "Ingress",
          .namespaced = true,
          .verbs = "get list",
          .short_names = "ing",
          .absent =
                  "tend has no Ingresses: put a proxy (a Deployment of one) in front of the pods" },
        /* events.k8s.io/v1: the same events, in that group's shape */
        { .group = "events.k8s.io",
          .version = "v1",
          .plural = "events",
          .singular = "event",
          .kind = "Event",
          .namespaced = true,
          .verbs = "get list watch",
          .short_names = "ev",
          .type = &spec_type_event,
          .table = &spec__table_event },
        /* who may do what: whoever reaches the API may do everything */
        { .group = "authorization.k8s.io",
          .version = "v1",
          .plural = "selfsubjectaccessreviews",
          .singular = "",
          .kind = "SelfSubjectAccessReview",
          .verbs = "create" },
        { .group = "authorization.k8s.io",
          .version = "v1",
          .plural = "selfsubjectrulesreviews",
          .singular = "",
          .kind = "SelfSubjectRulesReview",
          .verbs = "create" },
        { .group = "authentication.k8s.io",
          .version = "v1",
          .plural = "selfsubjectreviews",
          .singular = "",
          .kind = "SelfSubjectReview",
          .verbs = "create" },
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

char *spec_kind_api_version(const spec_kind *k) {
        return *k->group ? strprintf("%s/%s", k->group, k->version) : strdup(k->version);
}

const spec_kind *spec_kind_written(const char *api_version, const char *kind) {
        for (size_t i = 0; kind && i < ELEMENTSOF(kinds); i++) {
                const spec_kind *k = &kinds[i];
                _cleanup_free_ char *av = NULL;
                if (k->writes == SPEC_WRITES_NONE || !streq(k->kind, kind))
                        continue;
                if (!api_version)
                        return k;
                av = spec_kind_api_version(k);
                if (streq_ptr(av, api_version))
                        return k;
        }
        return NULL;
}

char *spec_kinds_written_text(void) {
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(128);

        for (size_t i = 0; i < ELEMENTSOF(kinds); i++)
                if (kinds[i].writes != SPEC_WRITES_NONE)
                        (void) tend_buf_addf(&b, "%s\"%s\"", b.len ? ", " : "", kinds[i].kind);
        return tend_buf_take(&b);
}

char *spec_kind_printed(const spec_kind *k) {
        return *k->group ? strprintf("%s.%s", k->singular, k->group) : strdup(k->singular);
}
