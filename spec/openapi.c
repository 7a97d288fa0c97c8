/* SPDX-License-Identifier: MIT */

/*
 * OpenAPI v3 schemas of tend's objects, from the same field tables the
 * codec decodes with: what the schema says is accepted is exactly what the
 * decoder accepts. Fields tend refuses are left out (the server's strict
 * decoding names them, with the reason). containers and env merge by name,
 * ports by containerPort (spec_list_merge_key, what the server's strategic
 * merge patch does); other lists are atomic, so kubectl sends them whole.
 */

#include "spec-internal.h"

#include <jansson.h>

/* The Kubernetes definition name of a type: the API group it belongs to,
 * then its Go name. ObjectMeta comes in two cuts (an object's, a pod
 * template's): the second is named for what it is. */
static char *definition_name(const spec_type *t, json_t *schemas) {
        static const char *const apps[] = {
                "Deployment",         "DeploymentSpec",          "DeploymentStatus",
                "DeploymentStrategy", "RollingUpdateDeployment", "ReplicaSet",
                "ReplicaSetSpec",     "ReplicaSetStatus"
        };
        static const char *const meta[] = { "ObjectMeta", "LabelSelector",
                                            "LabelSelectorRequirement", "OwnerReference",
                                            "Condition" };
        const char *group = "io.k8s.api.core.v1";

        for (size_t i = 0; i < ELEMENTSOF(apps); i++)
                if (streq(t->name, apps[i]))
                        group = "io.k8s.api.apps.v1";
        for (size_t i = 0; i < ELEMENTSOF(meta); i++)
                if (streq(t->name, meta[i]))
                        group = "io.k8s.apimachinery.pkg.apis.meta.v1";
        for (unsigned n = 1;; n++) {
                char *name = n == 1 ? strprintf("%s.%s", group, t->name)
                                    : strprintf("%s.%s%u", group, t->name, n);
                json_t *have;
                if (!name)
                        return NULL;
                have = json_object_get(schemas, name);
                /* the type's own entry carries its address, to tell cuts apart */
                if (!have || json_integer_value(json_object_get(have, "x-tend-type")) ==
                                     (json_int_t) (uintptr_t) t)
                        return name;
                free(name);
        }
}

static int add_type(const spec_type *t, json_t *schemas, char **ret_name);

/* What `kubectl explain` says: the Kubernetes meaning, and what tend does
 * with it where that differs. By type, then field (NULL: the type itself). */
static const struct {
        const char *type, *field, *text;
} docs[] = {
        { "Deployment", NULL,
          "A Deployment keeps replicas of a local program running as declared, and "
          "rolls a new template out replica by replica." },
        { "Deployment", "spec", "What the deployment should be." },
        { "Deployment", "status", "What it is, as tendd last saw it." },
        { "DeploymentSpec", "replicas", "How many pods to run (default 1)." },
        { "DeploymentSpec", "selector",
          "The pods this deployment owns: it must match the "
          "template's labels, and is immutable." },
        { "DeploymentSpec", "template",
          "The pod each replica runs: a new template is a new "
          "revision, rolled out by the strategy." },
        { "DeploymentSpec", "strategy",
          "How a new template replaces the old: RollingUpdate "
          "(default) or Recreate." },
        { "DeploymentSpec", "minReadySeconds",
          "How long a new pod must be ready, without a "
          "crash, before it counts as available (default 0)." },
        { "DeploymentSpec", "revisionHistoryLimit",
          "Old ReplicaSets kept for rollback (default 10)." },
        { "DeploymentSpec", "progressDeadlineSeconds",
          "How long a rollout may make no progress "
          "before it is reported failed (default 600)." },
        { "DeploymentSpec", "paused",
          "A paused deployment starts no rollout of template changes." },
        { "DeploymentStrategy", "type", "RollingUpdate or Recreate (stop every old pod first)." },
        { "RollingUpdateDeployment", "maxSurge",
          "Pods above replicas during a rollout: a number or "
          "a percentage, rounded up (default 25%)." },
        { "RollingUpdateDeployment", "maxUnavailable",
          "Pods below replicas during a rollout: a "
          "number or a percentage, rounded down "
          "(default 25%)." },
        { "PodTemplateSpec", "metadata", "The pods' labels and annotations." },
        { "PodTemplateSpec", "spec", "The pods' program and how it is run." },
        { "PodSpec", "containers", "Exactly one: a pod is one local process." },
        { "PodSpec", "terminationGracePeriodSeconds",
          "Seconds between SIGTERM and SIGKILL when a "
          "pod stops (default 30)." },
        { "PodSpec", "restartPolicy", "Always: a pod whose process ends is replaced." },
        { "PodSpec", "runtimeClassName",
          "process (default): a child process of tendd; systemd: a "
          "transient systemd unit." },
        { "PodSpec", "nodeName", "The host that runs the pod; set by tendd." },
        { "Container", "name", "The container's name (a DNS label)." },
        { "Container", "command",
          "The program and its first arguments, run directly: no image, "
          "no shell. A relative path is resolved against tendd's working "
          "directory; $(VAR) expands from the container's environment." },
        { "Container", "args", "More arguments, after command; $(VAR) expands as in command." },
        { "Container", "env",
          "Environment variables (a strategic merge patch merges them by "
          "name)." },
        { "Container", "workingDir", "The process's working directory." },
        { "Container", "ports",
          "Fixed ports the program listens on, each as $PORT_<NAME> too. A port "
          "tendd leases from --port-range, per pod, is named in the pod "
          "template's annotation tend.io/lease-ports instead (leased ports "
          "come first: $PORT is the first of them)." },
        { "Container", "readinessProbe",
          "When the pod is ready: it counts as available, and the "
          "rollout goes on." },
        { "Container", "livenessProbe", "When the process is stuck: the pod is replaced." },
        { "Container", "resources",
          "limits.cpu and limits.memory, enforced in the pod's cgroup (a CFS quota of "
          "millicores x 100 us per 100 ms; memory with swap included); refused at apply "
          "where tendd cannot make cgroups." },
        { "Container", "securityContext", "runAsUser and runAsGroup of the process." },
        { "Container", "volumeMounts",
          "Volumes of the pod at paths of the process's own view of the host's "
          "filesystem (a mount namespace of its own; tendd runs as root)." },
        { "PodSpec", "volumes",
          "configMap, secret (on a tmpfs) and emptyDir volumes, written by "
          "tendd; a ConfigMap's or a Secret's edit updates the files in place, "
          "atomically." },
        { "VolumeMount", "mountPath",
          "Where the process sees the volume; a missing directory is made "
          "on the host, empty." },
        { "VolumeMount", "readOnly",
          "An emptyDir's mount read-only; configMap and secret volumes are "
          "read-only always." },
        { "Volume", "name", "The volume's name, as volumeMounts[].name refers to it." },
        { "EmptyDirVolumeSource", "medium",
          "\"\" (a directory on the state directory's disk) or \"Memory\" (a "
          "tmpfs of its own)." },
        { "EmptyDirVolumeSource", "sizeLimit",
          "The tmpfs's size; with medium: Memory only (tend holds a disk "
          "emptyDir to no size, and refuses one)." },
        { "ConfigMapVolumeSource", "defaultMode", "The files' mode; 0644 when unset." },
        { "SecretVolumeSource", "defaultMode",
          "The files' mode; 0644 when unset. The files are on a tmpfs." },
        { "VolumeMount", "subPath",
          "One file or directory of the volume; not updated when its "
          "ConfigMap or Secret changes, as in Kubernetes." },
        { "EnvVar", "name", "The variable's name." },
        { "EnvVar", "value", "Its value." },
        { "ContainerPort", "name", "The port's name (probes may name it): $PORT_<NAME>." },
        { "ContainerPort", "containerPort",
          "The port (1-65535); to have one leased, name it in tend.io/lease-ports." },
        { "Probe", "httpGet", "Ready or alive when a GET on the port answers 200-399." },
        { "Probe", "tcpSocket", "Ready or alive when a TCP connection to the port opens." },
        { "Probe", "exec", "Ready or alive when the command exits 0." },
        { "Probe", "initialDelaySeconds", "Seconds after the start before the first probe." },
        { "Probe", "periodSeconds", "Seconds between probes (default 10)." },
        { "Probe", "timeoutSeconds", "Seconds before a probe counts as failed (default 1)." },
        { "Probe", "failureThreshold",
          "Failures in a row that make the pod unready, or for "
          "liveness, replaced (default 3)." },
        { "Probe", "successThreshold", "Successes in a row that make it ready (default 1)." },
        { "ObjectMeta", "managedFields",
          "Who set which fields, one entry per field manager and operation "
          "(server-side apply). Written by tendd; a write that changes it is "
          "taken as given, and [] clears it." },
        { "ManagedFieldsEntry", "manager",
          "The field manager (fieldManager, else the client's name)." },
        { "ManagedFieldsEntry", "operation",
          "Apply (server-side apply) or Update (any other write)." },
        { "ManagedFieldsEntry", "fieldsV1",
          "The fields it set: f:<field>, k:<list item by key>, . for the item itself." },
        { "Pod", NULL,
          "A pod is one local process (or systemd unit) that a ReplicaSet runs; "
          "tendd makes and replaces pods, so they are not created by hand." },
        { "ReplicaSet", NULL, "The pods of one revision of a deployment; made and scaled by it." },
        { "Event", NULL, "Something that happened to an object, as tendd reported it." },
};

static const char *doc_of(const char *type, const char *field) {
        for (size_t i = 0; i < ELEMENTSOF(docs); i++)
                if (streq(docs[i].type, type) && streq_ptr(docs[i].field, field))
                        return docs[i].text;
        return NULL;
}

/* A field's description goes beside its $ref, as Kubernetes' documents
 * have it (allOf keeps the reference alone). */
static int describe(json_t *schema, const char *text) {
        return text ? json_object_set_new(schema, "description", json_string(text)) : 0;
}

const char *spec_list_merge_key(const char *field) {
        if (streq(field, "ports"))
                return "containerPort";
        if (streq(field, "volumeMounts"))
                return "mountPath";
        return streq(field, "containers") || streq(field, "env") || streq(field, "volumes") ? "name"
                                                                                            : NULL;
}

static json_t *ref(const char *name) {
        char *r = strprintf("#/components/schemas/%s", name);
        json_t *j = r ? json_pack("{s:[{s:s}]}", "allOf", "$ref", r) : NULL;
        free(r);
        return j;
}

static json_t *field_schema(const spec_field *f, json_t *schemas) {
        _cleanup_free_ char *name = NULL;
        json_t *j = NULL, *e;

        switch (f->kind) {
        case SK_STRING:
        case SK_RV:
                return json_pack("{s:s}", "type", "string");
        case SK_INT32:
                return json_pack("{s:s, s:s}", "type", "integer", "format", "int32");
        case SK_INT64:
                return json_pack("{s:s, s:s}", "type", "integer", "format", "int64");
        case SK_BOOL:
                return json_pack("{s:s}", "type", "boolean");
        case SK_TIME:
                return json_pack("{s:s, s:s}", "type", "string", "format", "date-time");
        case SK_INTSTR:
        case SK_QUANTITY:
                return json_pack("{s:b}", "x-kubernetes-int-or-string", true);
        case SK_STRV:
                return json_pack("{s:s, s:{s:s}, s:s}", "type", "array", "items", "type", "string",
                                 "x-kubernetes-list-type", "atomic");
        case SK_MAP:
                return json_pack("{s:s, s:{s:s}}", "type", "object", "additionalProperties", "type",
                                 "string");
        case SK_ENUM:
                j = json_pack("{s:s, s:[]}", "type", "string", "enum");
                e = json_object_get(j, "enum");
                for (int i = 0; e && i < f->n_enum; i++)
                        if (json_array_append_new(e, json_string(f->enum_names[i])) < 0)
                                return json_decref(j), NULL;
                return j;
        case SK_STRUCT:
        case SK_PTR:
                return add_type(f->type, schemas, &name) < 0 ? NULL : ref(name);
        case SK_ARRAY:
                if (add_type(f->type, schemas, &name) < 0)
                        return NULL;
                if (spec_list_merge_key(f->name)) {
                        /* ports: keyed by containerPort and protocol (TCP by
                         * default), merged by containerPort, as Kubernetes */
                        bool ports = streq(f->name, "ports");
                        json_t *a = json_pack(
                                "{s:s, s:o, s:s, s:[s], s:s, s:s}", "type", "array", "items",
                                ref(name), "x-kubernetes-list-type", "map",
                                "x-kubernetes-list-map-keys", spec_list_merge_key(f->name),
                                "x-kubernetes-patch-strategy", "merge",
                                "x-kubernetes-patch-merge-key", spec_list_merge_key(f->name));
                        if (a && ports &&
                            json_array_append_new(json_object_get(a, "x-kubernetes-list-map-keys"),
                                                  json_string("protocol")) < 0)
                                a = (json_decref(a), NULL);
                        return a;
                }
                return json_pack("{s:s, s:o, s:s}", "type", "array", "items", ref(name),
                                 "x-kubernetes-list-type", "atomic");
        case SK_JSON:
                return json_pack("{s:s, s:b}", "type", "object",
                                 "x-kubernetes-preserve-unknown-fields", true);
        case SK_UNSUPPORTED:
                break;
        }
        return NULL;
}

static int add_type(const spec_type *t, json_t *schemas, char **ret_name) {
        _cleanup_free_ char *name = definition_name(t, schemas);
        json_t *s, *props;

        if (!name)
                return -ENOMEM;
        if (!json_object_get(schemas, name)) {
                s = json_pack("{s:s, s:{}, s:I}", "type", "object", "properties", "x-tend-type",
                              (json_int_t) (uintptr_t) t);
                /* in place before the fields: a type that contains itself ends */
                if (!s || describe(s, doc_of(t->name, NULL)) < 0 ||
                    json_object_set_new(schemas, name, s) < 0)
                        return -ENOMEM;
                props = json_object_get(s, "properties");
                if (t->map_like) {
                        json_object_del(s, "properties");
                        if (json_object_set_new(
                                    s, "additionalProperties",
                                    json_pack("{s:b}", "x-kubernetes-int-or-string", true)) < 0)
                                return -ENOMEM;
                } else
                        for (const spec_field *f = t->fields; f->name; f++) {
                                json_t *fs;
                                if (f->kind == SK_UNSUPPORTED)
                                        continue;
                                fs = field_schema(f, schemas);
                                if (!fs || describe(fs, doc_of(t->name, f->name)) < 0 ||
                                    json_object_set_new(props, f->name, fs) < 0)
                                        return -ENOMEM;
                        }
        }
        *ret_name = TAKE_PTR(name);
        return 0;
}

int spec_openapi_schema(const spec_type *t, json_t *schemas, char **ret_name) {
        return add_type(t, schemas, ret_name);
}

void spec_openapi_strip(json_t *schemas) {
        const char *k;
        json_t *v;

        json_object_foreach (schemas, k, v)
                json_object_del(v, "x-tend-type");
}
