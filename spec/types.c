/* SPDX-License-Identifier: MIT */

/*
 * Field tables of every API type. Names and shapes follow Kubernetes apps/v1
 * and core/v1. A field Kubernetes has and tend does not implement is listed
 * with F_NO() and a note, so it is refused with a reason instead of being
 * reported as a typo or, worse, silently ignored.
 */

#include "spec-internal.h"

/* The tables read best one field per line, as written. */
/* clang-format off */
#define F(n, k, s, m, ...) { .name = (n), .kind = (k), .offset = offsetof(s, m), __VA_ARGS__ }
#define F_STR(n, s, m, ...) F(n, SK_STRING, s, m, __VA_ARGS__)
#define F_I32(n, s, m, ...) F(n, SK_INT32, s, m, __VA_ARGS__)
#define F_I64(n, s, m, ...) F(n, SK_INT64, s, m, __VA_ARGS__)
#define F_BOOL(n, s, m, ...) F(n, SK_BOOL, s, m, __VA_ARGS__)
#define F_TIME(n, s, m) F(n, SK_TIME, s, m)
#define F_STRV(n, s, m) F(n, SK_STRV, s, m)
#define F_MAP(n, s, m, ...) F(n, SK_MAP, s, m, __VA_ARGS__)
#define F_INTSTR(n, s, m) F(n, SK_INTSTR, s, m)
#define F_QTY(n, s, m) F(n, SK_QUANTITY, s, m)
#define F_STRUCT(n, s, m, t) F(n, SK_STRUCT, s, m, .type = &(t))
#define F_PTR(n, s, m, t) F(n, SK_PTR, s, m, .type = &(t))
#define F_ARR(n, s, m, t) F(n, SK_ARRAY, s, m, .count_offset = offsetof(s, n_##m), .type = &(t))
#define F_ENUM(n, s, m, names)                                                                   \
        F(n, SK_ENUM, s, m, .enum_names = (names), .n_enum = (int) ELEMENTSOF(names))
#define F_NO(n, why) { .name = (n), .kind = SK_UNSUPPORTED, .note = (why) }

#define TYPE(var, goname, ctype, ...)                                                            \
        static const spec_field var##_fields[] = { __VA_ARGS__, SPEC_FIELD_END };               \
        static const spec_type var = { .name = (goname), .size = sizeof(ctype),                 \
                                       .fields = var##_fields }

#define NOT_TEND NULL

/* ---- enums ---------------------------------------------------------------------- */

static const char *const strategy_names[] = { "Recreate", "RollingUpdate" };
static const char *const restart_names[] = { "Always", "OnFailure", "Never" };
static const char *const runtime_names[] = { "process", "systemd" };
static const char *const phase_names[] = { "Pending", "Running", "Succeeded", "Failed", "Unknown" };
static const char *const op_names[] = { "In", "NotIn", "Exists", "DoesNotExist" };
static const char *const manage_op_names[] = { "Apply", "Update" };
static const char *const fields_type_names[] = { "FieldsV1" };

#define ENUM_STRING(fn, names)                                                                   \
        const char *fn(int v) {                                                                  \
                return v >= 0 && (size_t) v < ELEMENTSOF(names) ? names[v] : NULL;               \
        }
ENUM_STRING(spec_strategy_type_to_string, strategy_names)
ENUM_STRING(spec_restart_policy_to_string, restart_names)
ENUM_STRING(spec_runtime_class_to_string, runtime_names)
ENUM_STRING(spec_pod_phase_to_string, phase_names)
ENUM_STRING(spec_selector_op_to_string, op_names)

int spec_runtime_class_from_string(const char *s) {
        for (size_t i = 0; i < ELEMENTSOF(runtime_names); i++)
                if (streq_ptr(s, runtime_names[i]))
                        return (int) i;
        return -EINVAL;
}

/* ---- metadata ----------------------------------------------------------------------- */

TYPE(t_owner_ref, "OwnerReference", spec_owner_ref,
     F_STR("apiVersion", spec_owner_ref, api_version),
     F_STR("kind", spec_owner_ref, kind),
     F_STR("name", spec_owner_ref, name),
     F_STR("uid", spec_owner_ref, uid),
     F_BOOL("controller", spec_owner_ref, controller, .flags = SF_OMITEMPTY),
     F_BOOL("blockOwnerDeletion", spec_owner_ref, block_owner_deletion, .flags = SF_OMITEMPTY));

TYPE(t_managed_fields, "ManagedFieldsEntry", spec_managed_fields,
     F_STR("manager", spec_managed_fields, manager),
     F_ENUM("operation", spec_managed_fields, operation, manage_op_names),
     F_STR("apiVersion", spec_managed_fields, api_version),
     F_TIME("time", spec_managed_fields, time),
     F_ENUM("fieldsType", spec_managed_fields, fields_type, fields_type_names),
     F("fieldsV1", SK_JSON, spec_managed_fields, fields_v1),
     F_STR("subresource", spec_managed_fields, subresource));

TYPE(t_meta, "ObjectMeta", spec_meta,
     F_STR("name", spec_meta, name),
     F_STR("namespace", spec_meta, namespace),
     F_STR("uid", spec_meta, uid),
     F(  "resourceVersion", SK_RV, spec_meta, resource_version),
     F_I64("generation", spec_meta, generation, .flags = SF_OMITEMPTY),
     F_TIME("creationTimestamp", spec_meta, creation_timestamp),
     F_TIME("deletionTimestamp", spec_meta, deletion_timestamp),
     F_I64("deletionGracePeriodSeconds", spec_meta, deletion_grace_period_seconds),
     F_MAP("labels", spec_meta, labels),
     F_MAP("annotations", spec_meta, annotations),
     F_ARR("ownerReferences", spec_meta, owner_references, t_owner_ref),
     F_NO("generateName", "set metadata.name"),
     F_NO("finalizers", NOT_TEND),
     F_ARR("managedFields", spec_meta, managed_fields, t_managed_fields),
     F_NO("selfLink", NOT_TEND));

/* A pod template's metadata: only what is copied to pods. */
TYPE(t_template_meta, "ObjectMeta", spec_meta,
     F_MAP("labels", spec_meta, labels),
     F_MAP("annotations", spec_meta, annotations),
     F_TIME("creationTimestamp", spec_meta, creation_timestamp),
     F_NO("name", "pods are named <replicaset>-<5 chars>; remove it"),
     F_NO("namespace", "pods live in their deployment's namespace; remove it"),
     F_NO("generateName", "pods are named <replicaset>-<5 chars>; remove it"));

/* ---- selectors ---------------------------------------------------------------------- */

TYPE(t_requirement, "LabelSelectorRequirement", spec_requirement,
     F_STR("key", spec_requirement, key),
     F_ENUM("operator", spec_requirement, op, op_names),
     F_STRV("values", spec_requirement, values));

static const spec_field t_selector_fields[] = {
        F_MAP("matchLabels", spec_selector, match_labels),
        F_ARR("matchExpressions", spec_selector, match_expressions, t_requirement),
        SPEC_FIELD_END,
};
const spec_type spec_type_selector = {
        .name = "LabelSelector",
        .size = sizeof(spec_selector),
        .fields = t_selector_fields,
};

/* ---- containers --------------------------------------------------------------------- */

TYPE(t_key_ref, "KeySelector", spec_key_ref,
     F_STR("name", spec_key_ref, name),
     F_STR("key", spec_key_ref, key),
     F_BOOL("optional", spec_key_ref, optional, .flags = SF_OMITEMPTY));

TYPE(t_field_ref, "ObjectFieldSelector", spec_field_ref,
     F_STR("apiVersion", spec_field_ref, api_version),
     F_STR("fieldPath", spec_field_ref, field_path));

TYPE(t_resource_field_ref, "ResourceFieldSelector", spec_resource_field_ref,
     F_STR("containerName", spec_resource_field_ref, container_name),
     F_STR("resource", spec_resource_field_ref, resource),
     F_QTY("divisor", spec_resource_field_ref, divisor));

TYPE(t_env_source, "EnvVarSource", spec_env_source,
     F_PTR("configMapKeyRef", spec_env_source, config_map_key_ref, t_key_ref),
     F_PTR("secretKeyRef", spec_env_source, secret_key_ref, t_key_ref),
     F_PTR("fieldRef", spec_env_source, field_ref, t_field_ref),
     F_PTR("resourceFieldRef", spec_env_source, resource_field_ref, t_resource_field_ref),
     F_NO("fileKeyRef", "put the variables in a ConfigMap or a Secret (envFrom)"));

TYPE(t_env_var, "EnvVar", spec_env_var,
     F_STR("name", spec_env_var, name),
     F_STR("value", spec_env_var, value),
     F_PTR("valueFrom", spec_env_var, value_from, t_env_source));

TYPE(t_local_ref, "LocalObjectReference", spec_local_ref,
     F_STR("name", spec_local_ref, name),
     F_BOOL("optional", spec_local_ref, optional, .flags = SF_OMITEMPTY));

TYPE(t_env_from, "EnvFromSource", spec_env_from,
     F_STR("prefix", spec_env_from, prefix),
     F_PTR("configMapRef", spec_env_from, config_map_ref, t_local_ref),
     F_PTR("secretRef", spec_env_from, secret_ref, t_local_ref));

TYPE(t_key_to_path, "KeyToPath", spec_key_to_path,
     F_STR("key", spec_key_to_path, key),
     F_STR("path", spec_key_to_path, path),
     F_I32("mode", spec_key_to_path, mode));

#define OBJECT_VOLUME_FIELDS(name_field)                                                         \
        F_STR(name_field, spec_object_volume, name),                                             \
        F_ARR("items", spec_object_volume, items, t_key_to_path),                                \
        F_I32("defaultMode", spec_object_volume, default_mode),                                  \
        F_BOOL("optional", spec_object_volume, optional, .flags = SF_OMITEMPTY)

TYPE(t_config_map_volume, "ConfigMapVolumeSource", spec_object_volume,
     OBJECT_VOLUME_FIELDS("name"));

TYPE(t_secret_volume, "SecretVolumeSource", spec_object_volume,
     OBJECT_VOLUME_FIELDS("secretName"));

TYPE(t_empty_dir, "EmptyDirVolumeSource", spec_empty_dir,
     F_STR("medium", spec_empty_dir, medium),
     F_QTY("sizeLimit", spec_empty_dir, size_limit));

#define NO_VOLUME_TYPE "tend has configMap, secret and emptyDir volumes"
#define NO_HOST_VOLUME "a pod is a host process and sees the host's files: use the host's path " \
                       "itself"

TYPE(t_volume, "Volume", spec_volume,
     F_STR("name", spec_volume, name),
     F_PTR("configMap", spec_volume, config_map, t_config_map_volume),
     F_PTR("secret", spec_volume, secret, t_secret_volume),
     F_PTR("emptyDir", spec_volume, empty_dir, t_empty_dir),
     F_NO("hostPath", NO_HOST_VOLUME),
     F_NO("persistentVolumeClaim", NO_HOST_VOLUME),
     F_NO("local", NO_HOST_VOLUME),
     F_NO("projected", "mount each ConfigMap and Secret as a volume of its own"),
     F_NO("downwardAPI", "give the process the pod's fields in env (valueFrom.fieldRef)"),
     F_NO("ephemeral", NOT_TEND), F_NO("image", NOT_TEND), F_NO("csi", NOT_TEND),
     F_NO("nfs", NO_VOLUME_TYPE), F_NO("iscsi", NO_VOLUME_TYPE), F_NO("fc", NO_VOLUME_TYPE),
     F_NO("cephfs", NO_VOLUME_TYPE), F_NO("rbd", NO_VOLUME_TYPE),
     F_NO("glusterfs", NO_VOLUME_TYPE), F_NO("flexVolume", NO_VOLUME_TYPE),
     F_NO("gitRepo", NO_VOLUME_TYPE), F_NO("awsElasticBlockStore", NO_VOLUME_TYPE),
     F_NO("gcePersistentDisk", NO_VOLUME_TYPE), F_NO("azureDisk", NO_VOLUME_TYPE),
     F_NO("azureFile", NO_VOLUME_TYPE), F_NO("cinder", NO_VOLUME_TYPE),
     F_NO("vsphereVolume", NO_VOLUME_TYPE), F_NO("portworxVolume", NO_VOLUME_TYPE),
     F_NO("scaleIO", NO_VOLUME_TYPE), F_NO("storageos", NO_VOLUME_TYPE),
     F_NO("quobyte", NO_VOLUME_TYPE), F_NO("flocker", NO_VOLUME_TYPE),
     F_NO("photonPersistentDisk", NO_VOLUME_TYPE));

TYPE(t_volume_mount, "VolumeMount", spec_volume_mount,
     F_STR("name", spec_volume_mount, name),
     F_STR("mountPath", spec_volume_mount, mount_path),
     F_STR("subPath", spec_volume_mount, sub_path),
     F_BOOL("readOnly", spec_volume_mount, read_only, .flags = SF_OMITEMPTY),
     F_NO("subPathExpr", "use subPath (tend does not expand it)"),
     F_NO("mountPropagation", "a pod's mounts are its own (None)"),
     F_NO("recursiveReadOnly", NOT_TEND));

TYPE(t_port, "ContainerPort", spec_container_port,
     F_STR("name", spec_container_port, name),
     F_I32("containerPort", spec_container_port, container_port),
     F_STR("protocol", spec_container_port, protocol),
     F_NO("hostPort", "pods run on the host network already; leave containerPort out to "
                      "have tend lease a free port"),
     F_NO("hostIP", NOT_TEND));

TYPE(t_exec, "ExecAction", spec_exec_action,
     F_STRV("command", spec_exec_action, command));

TYPE(t_header, "HTTPHeader", spec_http_header,
     F_STR("name", spec_http_header, name),
     F_STR("value", spec_http_header, value));

TYPE(t_http_get, "HTTPGetAction", spec_http_get,
     F_STR("path", spec_http_get, path),
     F_INTSTR("port", spec_http_get, port),
     F_STR("host", spec_http_get, host),
     F_STR("scheme", spec_http_get, scheme),
     F_ARR("httpHeaders", spec_http_get, http_headers, t_header));

TYPE(t_tcp, "TCPSocketAction", spec_tcp_socket,
     F_INTSTR("port", spec_tcp_socket, port),
     F_STR("host", spec_tcp_socket, host));

static const spec_field t_probe_fields[] = {
        F_PTR("exec", spec_probe, exec, t_exec),
        F_PTR("httpGet", spec_probe, http_get, t_http_get),
        F_PTR("tcpSocket", spec_probe, tcp_socket, t_tcp),
        F_I32("initialDelaySeconds", spec_probe, initial_delay_seconds),
        F_I32("timeoutSeconds", spec_probe, timeout_seconds),
        F_I32("periodSeconds", spec_probe, period_seconds),
        F_I32("successThreshold", spec_probe, success_threshold),
        F_I32("failureThreshold", spec_probe, failure_threshold),
        F_I64("terminationGracePeriodSeconds", spec_probe, termination_grace_period_seconds),
        F_NO("grpc", "use httpGet, tcpSocket or exec"),
        SPEC_FIELD_END,
};
const spec_type spec_type_probe = {
        .name = "Probe",
        .size = sizeof(spec_probe),
        .fields = t_probe_fields,
};

static const spec_field t_resource_list_fields[] = {
        F_QTY("cpu", spec_resource_list, cpu),
        F_QTY("memory", spec_resource_list, memory),
        SPEC_FIELD_END,
};
static const spec_type t_resource_list = {
        .name = "ResourceList",
        .size = sizeof(spec_resource_list),
        .fields = t_resource_list_fields,
        .map_like = true,
        .unknown_message = "Unsupported value: tend limits \"cpu\" and \"memory\" only",
};

TYPE(t_resources, "ResourceRequirements", spec_resources,
     F_STRUCT("limits", spec_resources, limits, t_resource_list),
     F_NO("requests", "there is no scheduler to give requests a meaning; use limits"),
     F_NO("claims", NOT_TEND));

#define SECURITY_CONTEXT_NO                                                                      \
        F_NO("runAsNonRoot", "set runAsUser"),                                        \
        F_NO("seLinuxOptions", NOT_TEND), F_NO("seccompProfile", NOT_TEND),                      \
        F_NO("appArmorProfile", NOT_TEND), F_NO("windowsOptions", NOT_TEND)

TYPE(t_security_context, "SecurityContext", spec_security_context,
     F_I64("runAsUser", spec_security_context, run_as_user),
     F_I64("runAsGroup", spec_security_context, run_as_group),
     SECURITY_CONTEXT_NO,
     F_NO("privileged", NOT_TEND), F_NO("capabilities", NOT_TEND),
     F_NO("readOnlyRootFilesystem", NOT_TEND), F_NO("allowPrivilegeEscalation", NOT_TEND),
     F_NO("procMount", NOT_TEND));

TYPE(t_pod_security_context, "PodSecurityContext", spec_security_context,
     F_I64("runAsUser", spec_security_context, run_as_user),
     F_I64("runAsGroup", spec_security_context, run_as_group),
     SECURITY_CONTEXT_NO,
     F_NO("fsGroup", NOT_TEND), F_NO("fsGroupChangePolicy", NOT_TEND),
     F_NO("supplementalGroups", "pods run with runAsGroup only"),
     F_NO("supplementalGroupsPolicy", NOT_TEND), F_NO("sysctls", NOT_TEND),
     F_NO("seLinuxChangePolicy", NOT_TEND));

TYPE(t_container, "Container", spec_container,
     F_STR("name", spec_container, name),
     F_STRV("command", spec_container, command),
     F_STRV("args", spec_container, args),
     F_ARR("env", spec_container, env, t_env_var),
     F_ARR("envFrom", spec_container, env_from, t_env_from),
     F_STR("workingDir", spec_container, working_dir),
     F_ARR("ports", spec_container, ports, t_port),
     F_PTR("readinessProbe", spec_container, readiness_probe, spec_type_probe),
     F_PTR("livenessProbe", spec_container, liveness_probe, spec_type_probe),
     F_STRUCT("resources", spec_container, resources, t_resources),
     F_STRUCT("securityContext", spec_container, security_context, t_security_context),
     F_NO("image", "pods are local programs, not images: put the program's path in command"),
     F_NO("imagePullPolicy", "pods are local programs, not images; remove it"),
     F_ARR("volumeMounts", spec_container, volume_mounts, t_volume_mount),
     F_NO("volumeDevices", "pods see the host's devices already"),
     F_NO("lifecycle", "there are no postStart/preStop hooks; handle SIGTERM in the "
                       "program instead"),
     F_NO("startupProbe", "use a readinessProbe, and initialDelaySeconds on the "
                          "livenessProbe"),
     F_NO("stdin", "pods get /dev/null as stdin"), F_NO("stdinOnce", "pods get /dev/null as stdin"),
     F_NO("tty", NOT_TEND),
     F_NO("terminationMessagePath", NOT_TEND), F_NO("terminationMessagePolicy", NOT_TEND),
     F_NO("resizePolicy", NOT_TEND),
     F_NO("restartPolicy", "a pod's process is replaced, not restarted in place; remove it"));

/* ---- pod spec ------------------------------------------------------------------------ */

#define NO_SCHED "there is one node (this host) and no scheduler; remove it"

TYPE(t_pod_spec, "PodSpec", spec_pod_spec,
     F_ARR("containers", spec_pod_spec, containers, t_container),
     F_I64("terminationGracePeriodSeconds", spec_pod_spec, termination_grace_period_seconds),
     F_ENUM("restartPolicy", spec_pod_spec, restart_policy, restart_names),
     F_ENUM("runtimeClassName", spec_pod_spec, runtime_class_name, runtime_names),
     F_STRUCT("securityContext", spec_pod_spec, security_context, t_pod_security_context),
     F_STR("nodeName", spec_pod_spec, node_name),
     F_MAP("nodeSelector", spec_pod_spec, node_selector),
     F_ARR("volumes", spec_pod_spec, volumes, t_volume),
     F_NO("initContainers", "a pod is one process"),
     F_NO("ephemeralContainers", "a pod is one process"),
     F_NO("affinity", NO_SCHED), F_NO("tolerations", NO_SCHED),
     F_NO("topologySpreadConstraints", NO_SCHED), F_NO("schedulerName", NO_SCHED),
     F_NO("priorityClassName", NO_SCHED), F_NO("priority", NO_SCHED),
     F_NO("preemptionPolicy", NO_SCHED), F_NO("schedulingGates", NO_SCHED),
     F_NO("hostNetwork", "pods run on the host network already; remove it"),
     F_NO("hostPID", NOT_TEND), F_NO("hostIPC", NOT_TEND), F_NO("hostUsers", NOT_TEND),
     F_NO("shareProcessNamespace", NOT_TEND),
     F_NO("serviceAccountName", NOT_TEND), F_NO("serviceAccount", NOT_TEND),
     F_NO("automountServiceAccountToken", NOT_TEND),
     F_NO("imagePullSecrets", "pods are local programs, not images; remove it"),
     F_NO("dnsPolicy", "pods use the host's DNS; remove it"), F_NO("dnsConfig", NOT_TEND),
     F_NO("hostname", NOT_TEND), F_NO("subdomain", NOT_TEND), F_NO("hostAliases", NOT_TEND),
     F_NO("setHostnameAsFQDN", NOT_TEND), F_NO("enableServiceLinks", NOT_TEND),
     F_NO("activeDeadlineSeconds", "deployment pods run until stopped"),
     F_NO("readinessGates", NOT_TEND), F_NO("overhead", NOT_TEND), F_NO("os", NOT_TEND),
     F_NO("resourceClaims", NOT_TEND), F_NO("resources", "set "
                                                      "containers[0].resources.limits"));

static const spec_field t_pod_template_fields[] = {
        F_STRUCT("metadata", spec_pod_template, metadata, t_template_meta),
        F_STRUCT("spec", spec_pod_template, spec, t_pod_spec),
        SPEC_FIELD_END,
};
static int template_after_decode(void *p) {
        spec_pod_template *t = p;
        return spec_lift_leased_ports(&t->metadata.annotations, &t->spec);
}

const spec_type spec_type_pod_template = {
        .name = "PodTemplateSpec",
        .size = sizeof(spec_pod_template),
        .fields = t_pod_template_fields,
        .after_decode = template_after_decode,
};

/* ---- conditions ----------------------------------------------------------------------- */

TYPE(t_condition, "Condition", spec_condition,
     F_STR("type", spec_condition, type),
     F_STR("status", spec_condition, status),
     F_TIME("lastUpdateTime", spec_condition, last_update_time),
     F_TIME("lastProbeTime", spec_condition, last_probe_time),
     F_TIME("lastTransitionTime", spec_condition, last_transition_time),
     F_STR("reason", spec_condition, reason),
     F_STR("message", spec_condition, message));

/* ---- Deployment ----------------------------------------------------------------------- */

TYPE(t_rolling_update, "RollingUpdateDeployment", spec_rolling_update,
     F_INTSTR("maxUnavailable", spec_rolling_update, max_unavailable),
     F_INTSTR("maxSurge", spec_rolling_update, max_surge));

TYPE(t_strategy, "DeploymentStrategy", spec_strategy,
     F_ENUM("type", spec_strategy, type, strategy_names),
     F_PTR("rollingUpdate", spec_strategy, rolling_update, t_rolling_update));

TYPE(t_deployment_spec, "DeploymentSpec", spec_deployment_spec,
     F_I32("replicas", spec_deployment_spec, replicas),
     F_PTR("selector", spec_deployment_spec, selector, spec_type_selector),
     F_STRUCT("template", spec_deployment_spec, template, spec_type_pod_template),
     F_STRUCT("strategy", spec_deployment_spec, strategy, t_strategy),
     F_I32("minReadySeconds", spec_deployment_spec, min_ready_seconds),
     F_I32("revisionHistoryLimit", spec_deployment_spec, revision_history_limit),
     F_I32("progressDeadlineSeconds", spec_deployment_spec, progress_deadline_seconds),
     F_BOOL("paused", spec_deployment_spec, paused, .flags = SF_OMITEMPTY),
     F_NO("rollbackTo", "removed in apps/v1: use `tend rollout undo`"));

#define COUNT(n, s, m) F_I32(n, s, m, .flags = SF_OMITEMPTY)

TYPE(t_deployment_status, "DeploymentStatus", spec_deployment_status,
     F_I64("observedGeneration", spec_deployment_status, observed_generation,
           .flags = SF_OMITEMPTY),
     COUNT("replicas", spec_deployment_status, replicas),
     COUNT("updatedReplicas", spec_deployment_status, updated_replicas),
     COUNT("readyReplicas", spec_deployment_status, ready_replicas),
     COUNT("availableReplicas", spec_deployment_status, available_replicas),
     COUNT("unavailableReplicas", spec_deployment_status, unavailable_replicas),
     COUNT("terminatingReplicas", spec_deployment_status, terminating_replicas),
     F_I32("collisionCount", spec_deployment_status, collision_count),
     F_ARR("conditions", spec_deployment_status, conditions, t_condition));

static const spec_field t_deployment_fields[] = {
        F_STR("apiVersion", spec_deployment, api_version),
        F_STR("kind", spec_deployment, kind),
        F_STRUCT("metadata", spec_deployment, metadata, t_meta),
        F_STRUCT("spec", spec_deployment, spec, t_deployment_spec),
        F_STRUCT("status", spec_deployment, status, t_deployment_status),
        SPEC_FIELD_END,
};
const spec_type spec_type_deployment = {
        .name = "Deployment",
        .size = sizeof(spec_deployment),
        .fields = t_deployment_fields,
};

/* ---- ReplicaSet ---------------------------------------------------------------------- */

TYPE(t_rs_spec, "ReplicaSetSpec", spec_replica_set_spec,
     F_I32("replicas", spec_replica_set_spec, replicas),
     F_I32("minReadySeconds", spec_replica_set_spec, min_ready_seconds),
     F_PTR("selector", spec_replica_set_spec, selector, spec_type_selector),
     F_STRUCT("template", spec_replica_set_spec, template, spec_type_pod_template));

TYPE(t_rs_status, "ReplicaSetStatus", spec_replica_set_status,
     F_I64("observedGeneration", spec_replica_set_status, observed_generation,
           .flags = SF_OMITEMPTY),
     F_I32("replicas", spec_replica_set_status, replicas, .flags = SF_ZERO),
     COUNT("fullyLabeledReplicas", spec_replica_set_status, fully_labeled_replicas),
     COUNT("readyReplicas", spec_replica_set_status, ready_replicas),
     COUNT("availableReplicas", spec_replica_set_status, available_replicas),
     COUNT("terminatingReplicas", spec_replica_set_status, terminating_replicas),
     F_ARR("conditions", spec_replica_set_status, conditions, t_condition));

static const spec_field t_replica_set_fields[] = {
        F_STR("apiVersion", spec_replica_set, api_version),
        F_STR("kind", spec_replica_set, kind),
        F_STRUCT("metadata", spec_replica_set, metadata, t_meta),
        F_STRUCT("spec", spec_replica_set, spec, t_rs_spec),
        F_STRUCT("status", spec_replica_set, status, t_rs_status),
        SPEC_FIELD_END,
};
const spec_type spec_type_replica_set = {
        .name = "ReplicaSet",
        .size = sizeof(spec_replica_set),
        .fields = t_replica_set_fields,
};

/* ---- Pod -------------------------------------------------------------------------------- */

TYPE(t_waiting, "ContainerStateWaiting", spec_state_waiting,
     F_STR("reason", spec_state_waiting, reason),
     F_STR("message", spec_state_waiting, message));

TYPE(t_running, "ContainerStateRunning", spec_state_running,
     F_TIME("startedAt", spec_state_running, started_at));

TYPE(t_terminated, "ContainerStateTerminated", spec_state_terminated,
     F_I32("exitCode", spec_state_terminated, exit_code, .flags = SF_ZERO),
     F_I32("signal", spec_state_terminated, signal, .flags = SF_OMITEMPTY),
     F_STR("reason", spec_state_terminated, reason),
     F_STR("message", spec_state_terminated, message),
     F_TIME("startedAt", spec_state_terminated, started_at),
     F_TIME("finishedAt", spec_state_terminated, finished_at),
     F_STR("containerID", spec_state_terminated, container_id));

static const spec_field t_container_state_fields[] = {
        F_PTR("waiting", spec_container_state, waiting, t_waiting),
        F_PTR("running", spec_container_state, running, t_running),
        F_PTR("terminated", spec_container_state, terminated, t_terminated),
        SPEC_FIELD_END,
};
const spec_type spec_type_container_state = {
        .name = "ContainerState",
        .size = sizeof(spec_container_state),
        .fields = t_container_state_fields,
};

TYPE(t_container_status, "ContainerStatus", spec_container_status,
     F_STR("name", spec_container_status, name),
     /* what runs (command[0], as found on the PATH) and a digest of it
      * (sha256:...) once it runs: Kubernetes requires both, and "" is what
      * a kubelet says while a container is being created */
     F_STR("image", spec_container_status, image, .flags = SF_ZERO),
     F_STR("imageID", spec_container_status, image_id, .flags = SF_ZERO),
     F_STRUCT("state", spec_container_status, state, spec_type_container_state),
     F_STRUCT("lastState", spec_container_status, last_state, spec_type_container_state),
     F_BOOL("ready", spec_container_status, ready),
     F_BOOL("started", spec_container_status, started),
     F_I32("restartCount", spec_container_status, restart_count, .flags = SF_ZERO),
     F_STR("containerID", spec_container_status, container_id));

TYPE(t_pod_status, "PodStatus", spec_pod_status,
     F_ENUM("phase", spec_pod_status, phase, phase_names),
     F_ARR("conditions", spec_pod_status, conditions, t_condition),
     F_STR("reason", spec_pod_status, reason),
     F_STR("message", spec_pod_status, message),
     F_STR("hostIP", spec_pod_status, host_ip),
     F_STR("podIP", spec_pod_status, pod_ip),
     F_TIME("startTime", spec_pod_status, start_time),
     F_ARR("containerStatuses", spec_pod_status, container_statuses, t_container_status));

static const spec_field t_pod_fields[] = {
        F_STR("apiVersion", spec_pod, api_version),
        F_STR("kind", spec_pod, kind),
        F_STRUCT("metadata", spec_pod, metadata, t_meta),
        F_STRUCT("spec", spec_pod, spec, t_pod_spec),
        F_STRUCT("status", spec_pod, status, t_pod_status),
        SPEC_FIELD_END,
};
static int pod_after_decode(void *p) {
        spec_pod *pod = p;
        return spec_lift_leased_ports(&pod->metadata.annotations, &pod->spec);
}

const spec_type spec_type_pod = {
        .name = "Pod",
        .size = sizeof(spec_pod),
        .fields = t_pod_fields,
        .after_decode = pod_after_decode,
};

/* ---- Event ------------------------------------------------------------------------------ */

TYPE(t_object_ref, "ObjectReference", spec_object_ref,
     F_STR("apiVersion", spec_object_ref, api_version),
     F_STR("kind", spec_object_ref, kind),
     F_STR("namespace", spec_object_ref, namespace),
     F_STR("name", spec_object_ref, name),
     F_STR("uid", spec_object_ref, uid));

TYPE(t_event_source, "EventSource", spec_event_source,
     F_STR("component", spec_event_source, component),
     F_STR("host", spec_event_source, host));

static const spec_field t_event_fields[] = {
        F_STR("apiVersion", spec_event, api_version),
        F_STR("kind", spec_event, kind),
        F_STRUCT("metadata", spec_event, metadata, t_meta),
        F_STRUCT("involvedObject", spec_event, involved_object, t_object_ref),
        F_STR("reason", spec_event, reason),
        F_STR("message", spec_event, message),
        F_STR("type", spec_event, type),
        F_I32("count", spec_event, count, .flags = SF_OMITEMPTY),
        F_TIME("firstTimestamp", spec_event, first_timestamp),
        F_TIME("lastTimestamp", spec_event, last_timestamp),
        F_STRUCT("source", spec_event, source, t_event_source),
        SPEC_FIELD_END,
};
const spec_type spec_type_event = {
        .name = "Event",
        .size = sizeof(spec_event),
        .fields = t_event_fields,
};
/* ---- ConfigMap ----------------------------------------------------------------------- */

static const spec_field t_config_map_fields[] = {
        F_STR("apiVersion", spec_config_map, api_version),
        F_STR("kind", spec_config_map, kind),
        F_STRUCT("metadata", spec_config_map, metadata, t_meta),
        F_MAP("data", spec_config_map, data),
        F_MAP("binaryData", spec_config_map, binary_data),
        F_BOOL("immutable", spec_config_map, immutable, .flags = SF_OMITEMPTY),
        SPEC_FIELD_END,
};
const spec_type spec_type_config_map = {
        .name = "ConfigMap",
        .size = sizeof(spec_config_map),
        .fields = t_config_map_fields,
};
/* ---- Secret ---------------------------------------------------------------------------- */

static const spec_field t_secret_fields[] = {
        F_STR("apiVersion", spec_secret, api_version),
        F_STR("kind", spec_secret, kind),
        F_STRUCT("metadata", spec_secret, metadata, t_meta),
        F_MAP("data", spec_secret, data, .flags = SF_SECRET),
        F_MAP("stringData", spec_secret, string_data, .flags = SF_SECRET),
        F_STR("type", spec_secret, type),
        F_BOOL("immutable", spec_secret, immutable, .flags = SF_OMITEMPTY),
        SPEC_FIELD_END,
};
const spec_type spec_type_secret = {
        .name = "Secret",
        .size = sizeof(spec_secret),
        .fields = t_secret_fields,
};
/* clang-format on */

/* ---- managedFields ------------------------------------------------------------------ */

int spec_meta_set_managed_fields(spec_meta *m, json_t *managed, spec_errors *errs) {
        _cleanup_(json_decrefp) json_t *w = json_pack("{s:O}", "managedFields", managed);
        spec_errors local = {};
        spec_meta tmp;
        int r;

        if (!w)
                return -ENOMEM;
        spec__init(&t_meta, &tmp);
        r = spec_decode(&t_meta, w, &tmp, errs ?: &local);
        spec_errors_done(&local);
        if (r >= 0) {
                for (size_t i = 0; i < m->n_managed_fields; i++)
                        spec_done(&t_managed_fields, &m->managed_fields[i]);
                free(m->managed_fields);
                m->managed_fields = TAKE_PTR(tmp.managed_fields);
                m->n_managed_fields = tmp.n_managed_fields;
                tmp.n_managed_fields = 0;
        }
        spec_done(&t_meta, &tmp);
        return r;
}

bool spec_meta_managed_fields_equal(const spec_meta *a, const spec_meta *b) {
        if (a->n_managed_fields != b->n_managed_fields)
                return false;
        for (size_t i = 0; i < a->n_managed_fields; i++)
                if (!spec_equal(&t_managed_fields, &a->managed_fields[i], &b->managed_fields[i]))
                        return false;
        return true;
}

json_t *spec_meta_managed_fields_json(const spec_meta *m) {
        _cleanup_(json_decrefp) json_t *j = spec_encode(&t_meta, m);
        json_t *a = json_object_get(j, "managedFields");

        return a ? json_incref(a) : j ? json_array() : NULL;
}

/* spec_object_meta() reads every kind as a spec_object_head. */
#define SAME_HEAD(type)                                                                          \
        _Static_assert(offsetof(type, api_version) == offsetof(spec_object_head, api_version) && \
                               offsetof(type, kind) == offsetof(spec_object_head, kind) &&       \
                               offsetof(type, metadata) == offsetof(spec_object_head, metadata), \
                       #type " begins as every API object does")
SAME_HEAD(spec_deployment);
SAME_HEAD(spec_replica_set);
SAME_HEAD(spec_pod);
SAME_HEAD(spec_event);
SAME_HEAD(spec_config_map);
SAME_HEAD(spec_secret);
