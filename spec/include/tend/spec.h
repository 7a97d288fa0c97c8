/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * tend_spec: the API objects (Deployment, ReplicaSet, Pod, Event), their
 * YAML/JSON codecs, Kubernetes defaults, validation, the pod-template hash
 * and label selectors.
 *
 * Pipeline for user input:
 *
 *   bytes ──spec_parse()──► JSON trees (one per YAML/JSON document)
 *         ──spec_decode()──► typed structs (strict: unknown fields, types)
 *         ──spec_deployment_default()──► Kubernetes defaults applied
 *         ──spec_deployment_validate()──► field-path errors, all at once
 *
 * spec_manifest_load_*() runs the whole pipeline over a file, a directory or
 * stdin and validates the set as a whole (duplicates, overlapping selectors).
 *
 * The codecs are table driven: one field table per type gives decode,
 * encode, copy, equality and free, so the five can never disagree.
 *
 * Integers: a plain int32/int64 field holds SPEC_UNSET (SPEC_UNSET64) when
 * absent; after defaulting, every defaulted field is set. Fields commented
 * "0 = absent" use 0 instead and are left out of the encoding when 0.
 * Times are wall-clock usec_t (0 = absent), shown in RFC 3339.
 * Strings are NULL when absent. Arrays are (pointer, n_count) pairs.
 *
 * Nothing here logs or prints: errors are collected in a spec_errors.
 */

#include <jansson.h>
#include <stdio.h>

#include "tend/base.h"

#define SPEC_UNSET INT32_MIN
#define SPEC_UNSET64 INT64_MIN

/* Limits on hostile input (docs/architecture.md §4.6). */
#define SPEC_MAX_INPUT_SIZE (1024 * 1024) /* bytes per file */
#define SPEC_MAX_DEPTH 64                 /* nested collections */
#define SPEC_MAX_ITEMS 10000              /* entries of one list or mapping */
#define SPEC_MAX_NODES 200000             /* values in one document */
#define SPEC_MAX_DOCUMENTS 1000           /* documents in one file */
#define SPEC_MAX_ERRORS 200               /* errors kept; more are counted */

/* A deployment name must leave room for "-<hash ≤10>-<5 chars>" in a 63-char
 * pod name (and a systemd unit name "tend-<ns>-<pod>.service"). */
#define SPEC_DEPLOYMENT_NAME_MAX 46
#define SPEC_DNS_LABEL_MAX 63

#define SPEC_LABEL_POD_TEMPLATE_HASH "pod-template-hash"
#define SPEC_ANN_REVISION "deployment.kubernetes.io/revision"
#define SPEC_ANN_REVISION_HISTORY "deployment.kubernetes.io/revision-history"
#define SPEC_ANN_DESIRED_REPLICAS "deployment.kubernetes.io/desired-replicas"
#define SPEC_ANN_MAX_REPLICAS "deployment.kubernetes.io/max-replicas"
#define SPEC_ANN_RESTARTED_AT "kubectl.kubernetes.io/restartedAt"
#define SPEC_ANN_LAST_APPLIED "kubectl.kubernetes.io/last-applied-configuration"
#define SPEC_ANN_CHANGE_CAUSE "kubernetes.io/change-cause"

/* tend's own annotations (docs/architecture.md §9: manifests stay valid Kubernetes). */
#define SPEC_ANN_PREFIX "tend.io/"
/* On a Deployment: how its replicas back off when they keep dying young. */
#define SPEC_ANN_CRASH_BACKOFF "tend.io/crash-backoff"
/* On a Deployment: the manifest file it comes from (tendd --manifests). */
#define SPEC_ANN_SOURCE "tend.io/source"
/* On a pod template: container ports whose socket tendd binds once and
 * hands to every pod of the deployment (spec_listen_parse()). */
#define SPEC_ANN_LISTEN "tend.io/listen"
/* the ports tendd leases per pod (on the pod template) */
#define SPEC_ANN_LEASE_PORTS "tend.io/lease-ports"
/* On a pod template: readiness and liveness by sd_notify (spec_notify_parse()). */
#define SPEC_ANN_NOTIFY "tend.io/notify"
/* On a Deployment: "true" rolls a failed rollout back to the last revision
 * that completed. */
#define SPEC_ANN_AUTO_ROLLBACK "tend.io/auto-rollback"
/* On a Deployment: "true" makes a change of a ConfigMap or a Secret its
 * template refers to a new revision, each revision running with a
 * snapshot of the configuration it was made with (docs/config.md). */
#define SPEC_ANN_CONFIG_ROLLOUT "tend.io/config-rollout"
/* On a ReplicaSet of such a deployment: the snapshots its revision runs
 * with ("configmap/web-config-5f7b9c8d2x,secret/db-7c4d8b6f2k"). */
#define SPEC_ANN_CONFIG "tend.io/config"
/* On a ConfigMap or a Secret tendd made as a revision's snapshot: the name
 * of the one it was taken of. */
#define SPEC_ANN_SNAPSHOT_OF "tend.io/snapshot-of"
/* On a Deployment: a new template first gets this many pods ("2", "10%"),
 * then the rollout waits for promotion (spec_canary_parse()). */
#define SPEC_ANN_CANARY "tend.io/canary"
/* On a Deployment: canaries healthy this long are promoted by themselves. */
#define SPEC_ANN_CANARY_PROMOTE_AFTER "tend.io/canary-promote-after"
/* On a Deployment: "true" (or the canaries' revision) promotes them; tendd
 * removes it once done. */
#define SPEC_ANN_PROMOTE "tend.io/promote"
/* On a Deployment, in a fleet: what becomes of its pods on a node cut off
 * from etcd (docs/fleet.md §3.10): "replace" (the default: replaced elsewhere
 * once the node is lost, running on where they are until it is back) or
 * "fence" (the node stops them before its lease can expire; the leader
 * replaces them only after the lease expired and their grace period). */
#define SPEC_ANN_NODE_LOST_POLICY "tend.io/node-lost-policy"

/* What tendd writes (the registry below says where and who). On a pod:
 * when its start may go (a restart in place's back-off), the pod it
 * replaced, its replacement, its crash streak, when its replacement may
 * come, the ports it got, its last STATUS=; the deletion cost the
 * ReplicaSet controller gives it. On a ReplicaSet: its rollout completed
 * once, why it failed, its canaries promoted, since when they are all
 * available. */
#define SPEC_ANN_START_AFTER "tend.io/start-after"
#define SPEC_ANN_PREDECESSOR "tend.io/predecessor"
#define SPEC_ANN_REPLACED "tend.io/replaced"
#define SPEC_ANN_CRASH_STREAK "tend.io/crash-streak"
#define SPEC_ANN_REPLACE_AFTER "tend.io/replace-after"
#define SPEC_ANN_PORTS "tend.io/ports"
#define SPEC_ANN_STATUS "tend.io/status"
#define SPEC_ANN_DELETION_COST "controller.kubernetes.io/pod-deletion-cost"
#define SPEC_ANN_COMPLETE "tend.io/complete"
#define SPEC_ANN_ROLLOUT_FAILED "tend.io/rollout-failed"
#define SPEC_ANN_PROMOTED "tend.io/promoted"
#define SPEC_ANN_CANARY_SINCE "tend.io/canary-ready-since"
#define SPEC_ANN_ROLLBACK_TO "deprecated.deployment.rollback.to"

/* ---- errors ---------------------------------------------------------------- */

typedef struct spec_error {
        char *file;    /* source name as the user gave it; NULL if none */
        unsigned line; /* 1-based; 0 when the error has no position */
        unsigned column;
        char *object;  /* `deployment "web"`, or NULL for syntax errors */
        char *field;   /* K8s field path, "spec.replicas"; NULL if none */
        char *message; /* "Required value", "Invalid value: -1: must be ..." */
} spec_error;

typedef struct spec_errors {
        spec_error *items;
        size_t n;
        size_t dropped; /* errors beyond SPEC_MAX_ERRORS, counted only */
        /* Context stamped on errors added from now on (borrowed). */
        const char *file;
        const char *object;
} spec_errors;

void spec_errors_done(spec_errors *e);
/* Adds an error with the current file/object context. Returns -EINVAL (so
 * "return spec_errors_add(...)" reads well) or -ENOMEM. */
int spec_errors_add(spec_errors *e, const char *field, const char *fmt, ...) _printf_(3, 4);
int spec_errors_add_at(spec_errors *e, unsigned line, unsigned column, const char *fmt, ...)
        _printf_(4, 5);
/* "FILE:LINE:COL: message" or "FILE: object: field: message". New string. */
char *spec_error_format(const spec_error *e);
void spec_errors_print(const spec_errors *e, FILE *f);

/* ---- small value types ------------------------------------------------------ */

typedef struct spec_kv {
        char *key;
        char *value;
} spec_kv;

/* string → string, kept sorted by key, keys unique. */
typedef struct spec_map {
        spec_kv *items;
        size_t n;
} spec_map;

const char *spec_map_get(const spec_map *m, const char *key);
int spec_map_set(spec_map *m, const char *key, const char *value);
bool spec_map_remove(spec_map *m, const char *key);
void spec_map_done(spec_map *m);
bool spec_map_equal(const spec_map *a, const spec_map *b);

/* Kubernetes IntOrString: str != NULL → string ("25%"), else num
 * (SPEC_UNSET when absent). */
typedef struct spec_intstr {
        char *str;
        int32_t num;
} spec_intstr;

static inline bool spec_intstr_is_set(const spec_intstr *v) {
        return v->str || v->num != SPEC_UNSET;
}
/* Resolves an int or "N%" against total (round up or down, as
 * ResolveFenceposts). Returns 0, or -EINVAL for a malformed value. */
int spec_intstr_scaled(const spec_intstr *v, int32_t total, bool round_up, int32_t *ret);

/* A resource quantity ("500m", "2", "128Mi", "1G"): the text as written and
 * its value. text == NULL means absent. */
typedef struct spec_quantity {
        char *text;
        int64_t milli; /* value × 1000, rounded up: cpu in millicores */
        int64_t value; /* value rounded up: memory in bytes */
} spec_quantity;

/* Parses Kubernetes quantity syntax. Returns 0, -EINVAL (syntax) or -ERANGE. */
int spec_quantity_parse(const char *s, int64_t *ret_milli, int64_t *ret_value);

/* ---- metadata ----------------------------------------------------------------- */

typedef struct spec_owner_ref {
        char *api_version;
        char *kind;
        char *name;
        char *uid;
        bool controller;
        bool block_owner_deletion;
} spec_owner_ref;

/* Who set which fields (server-side apply): one manager's set, as
 * Kubernetes writes it (fieldsV1: {"f:spec": {"f:replicas": {}}}). */
typedef enum spec_manage_op {
        SPEC_MANAGE_APPLY,
        SPEC_MANAGE_UPDATE,
        _SPEC_MANAGE_OP_MAX,
        _SPEC_MANAGE_OP_INVALID = -EINVAL,
} spec_manage_op;

typedef struct spec_managed_fields {
        char *manager;
        spec_manage_op operation;
        char *api_version;
        usec_t time;
        int fields_type;   /* 0: FieldsV1, the only one */
        json_t *fields_v1; /* a JSON object, its keys sorted; shared, never changed */
        char *subresource;
} spec_managed_fields;

typedef struct spec_meta {
        char *name;
        char *namespace;
        char *uid;
        uint64_t resource_version; /* 0 = absent; a decimal string in JSON */
        int64_t generation;        /* 0 = absent */
        usec_t creation_timestamp;
        usec_t deletion_timestamp;
        int64_t deletion_grace_period_seconds; /* SPEC_UNSET64 = absent */
        spec_map labels;
        spec_map annotations;
        spec_owner_ref *owner_references;
        size_t n_owner_references;
        spec_managed_fields *managed_fields;
        size_t n_managed_fields;
} spec_meta;

/* m's managedFields replaced by the JSON array managed, decoded (errors to
 * errs, which may be NULL); m is unchanged on error. */
int spec_meta_set_managed_fields(spec_meta *m, json_t *managed, spec_errors *errs);
/* Whether a and b have the same managedFields, entry by entry. */
bool spec_meta_managed_fields_equal(const spec_meta *a, const spec_meta *b);
/* m's managedFields as JSON (a new reference; [] when none; NULL: out of
 * memory). */
json_t *spec_meta_managed_fields_json(const spec_meta *m);

/* The one ownerReference with controller: true, or NULL. */
const spec_owner_ref *spec_meta_controller(const spec_meta *m);
/* Ownership by uid, never by labels: m's controller reference names owner_uid. */
bool spec_meta_owned_by(const spec_meta *m, const char *owner_uid);
/* deployment.kubernetes.io/revision: 0 when absent, -1 when not a number. */
int64_t spec_meta_revision(const spec_meta *m);

/* ---- label selectors ------------------------------------------------------------ */

typedef enum spec_selector_op {
        SPEC_OP_IN,
        SPEC_OP_NOT_IN,
        SPEC_OP_EXISTS,
        SPEC_OP_DOES_NOT_EXIST,
        _SPEC_OP_MAX,
        _SPEC_OP_INVALID = -EINVAL,
} spec_selector_op;

typedef struct spec_requirement {
        char *key;
        int op; /* spec_selector_op */
        char **values;
} spec_requirement;

typedef struct spec_selector {
        spec_map match_labels;
        spec_requirement *match_expressions;
        size_t n_match_expressions;
} spec_selector;

/* NULL selects nothing; an empty selector selects everything. */
bool spec_selector_matches(const spec_selector *s, const spec_map *labels);
bool spec_selector_is_empty(const spec_selector *s);
/* Can one label set satisfy both? (Two deployments must never overlap.) */
bool spec_selector_overlaps(const spec_selector *a, const spec_selector *b);

/* The overlap rule over many selectors at once (a manifest directory, an
 * apply against the store), near-linear in their size: each selector is
 * normalised once and indexed by its In values, so pairs that cannot meet
 * are never compared. Ids are 0, 1, ... in the order of spec_overlaps_add. */
typedef struct spec_overlaps spec_overlaps;
spec_overlaps *spec_overlaps_new(void);
spec_overlaps *spec_overlaps_free(spec_overlaps *o);
DEFINE_TRIVIAL_CLEANUP_FUNC(spec_overlaps *, spec_overlaps_free);
/* s is borrowed until spec_overlaps_free. -ENOMEM. */
int spec_overlaps_add(spec_overlaps *o, const spec_selector *s, size_t *ret_id);
/* Calls fn(other) for each selector other < before (other != id) that
 * overlaps selector id, in order, until fn returns false. */
void spec_overlaps_each(spec_overlaps *o, size_t id, size_t before,
                        bool (*fn)(size_t other, void *userdata), void *userdata);
/* Parses "a=b,c!=d,e in (x,y),f notin (z),g,!h" (kubectl -l syntax). */
int spec_selector_parse(const char *s, spec_selector *ret);
void spec_selector_done(spec_selector *s);

/* ---- pod spec ----------------------------------------------------------------- */

/* A key of a ConfigMap or a Secret (configMapKeyRef, secretKeyRef). */
typedef struct spec_key_ref {
        char *name;
        char *key;
        bool optional; /* missing, the variable is left unset */
} spec_key_ref;

/* A field of the pod (fieldRef): fieldPath as Kubernetes names it. */
typedef struct spec_field_ref {
        char *api_version; /* "v1" */
        char *field_path;
} spec_field_ref;

/* A resource of the container (resourceFieldRef), in units of divisor. */
typedef struct spec_resource_field_ref {
        char *container_name;
        char *resource; /* limits.cpu, limits.memory */
        spec_quantity divisor;
} spec_resource_field_ref;

/* valueFrom: exactly one of them. */
typedef struct spec_env_source {
        spec_key_ref *config_map_key_ref;
        spec_key_ref *secret_key_ref;
        spec_field_ref *field_ref;
        spec_resource_field_ref *resource_field_ref;
} spec_env_source;

typedef struct spec_env_var {
        char *name;
        char *value;
        spec_env_source *value_from; /* a value made when the container starts */
} spec_env_var;

/* A ConfigMap or a Secret by name (envFrom). */
typedef struct spec_local_ref {
        char *name;
        bool optional;
} spec_local_ref;

/* envFrom: every key of one of them, prefix before each. */
typedef struct spec_env_from {
        char *prefix;
        spec_local_ref *config_map_ref;
        spec_local_ref *secret_ref;
} spec_env_from;

/* A key of a ConfigMap or a Secret as a file of a volume (items). */
typedef struct spec_key_to_path {
        char *key;
        char *path;   /* relative, no ".." */
        int32_t mode; /* SPEC_UNSET: the volume's defaultMode */
} spec_key_to_path;

/* A configMap or a secret volume (ConfigMapVolumeSource's name,
 * SecretVolumeSource's secretName): its keys as files. */
typedef struct spec_object_volume {
        char *name;
        spec_key_to_path *items; /* none: every key, as a file of its name */
        size_t n_items;
        int32_t default_mode; /* SPEC_UNSET: 0644 */
        bool optional;        /* missing, the volume is empty */
} spec_object_volume;

/* An emptyDir volume: a directory that lives as long as its pod. */
typedef struct spec_empty_dir {
        char *medium;             /* "" (the state dir's disk) or "Memory" (a tmpfs) */
        spec_quantity size_limit; /* medium Memory: the tmpfs's size */
} spec_empty_dir;

/* A volume: exactly one of its sources. */
typedef struct spec_volume {
        char *name;
        spec_object_volume *config_map;
        spec_object_volume *secret;
        spec_empty_dir *empty_dir;
} spec_volume;

/* The default mode of a configMap's or a secret's files (as Kubernetes). */
#define SPEC_VOLUME_DEFAULT_MODE 0644

typedef struct spec_volume_mount {
        char *name;       /* a volume of the pod */
        char *mount_path; /* absolute */
        char *sub_path;   /* a path in the volume; NULL: all of it */
        bool read_only;   /* configMap and secret volumes are read-only always */
} spec_volume_mount;

typedef struct spec_container_port {
        char *name;
        int32_t container_port; /* SPEC_UNSET (or 0) only in the old form of a leased
                                 * port, which decoding lifts (tend.io/lease-ports) */
        char *protocol;         /* "TCP" (default) or "UDP" */
} spec_container_port;

typedef struct spec_exec_action {
        char **command;
} spec_exec_action;

typedef struct spec_http_header {
        char *name;
        char *value;
} spec_http_header;

typedef struct spec_http_get {
        char *path;
        spec_intstr port; /* number or the name of a container port */
        char *host;       /* NULL: 127.0.0.1 */
        char *scheme;     /* "HTTP" or "HTTPS" */
        spec_http_header *http_headers;
        size_t n_http_headers;
} spec_http_get;

typedef struct spec_tcp_socket {
        spec_intstr port;
        char *host;
} spec_tcp_socket;

typedef struct spec_probe {
        spec_exec_action *exec;
        spec_http_get *http_get;
        spec_tcp_socket *tcp_socket;
        int32_t initial_delay_seconds;
        int32_t timeout_seconds;
        int32_t period_seconds;
        int32_t success_threshold;
        int32_t failure_threshold;
        int64_t termination_grace_period_seconds; /* SPEC_UNSET64: the pod's */
} spec_probe;

typedef struct spec_resource_list {
        spec_quantity cpu;
        spec_quantity memory;
} spec_resource_list;

typedef struct spec_resources {
        spec_resource_list limits;
} spec_resources;

typedef struct spec_security_context {
        int64_t run_as_user; /* SPEC_UNSET64 = absent */
        int64_t run_as_group;
} spec_security_context;

typedef struct spec_container {
        char *name;
        char **command;
        char **args;
        spec_env_var *env;
        size_t n_env;
        spec_env_from *env_from;
        size_t n_env_from;
        char *working_dir;
        spec_container_port *ports;
        size_t n_ports;
        spec_probe *readiness_probe;
        spec_probe *liveness_probe;
        spec_resources resources;
        spec_security_context security_context;
        spec_volume_mount *volume_mounts;
        size_t n_volume_mounts;
} spec_container;

typedef enum spec_restart_policy {
        SPEC_RESTART_ALWAYS,
        SPEC_RESTART_ON_FAILURE,
        SPEC_RESTART_NEVER,
        _SPEC_RESTART_MAX,
        _SPEC_RESTART_INVALID = -EINVAL,
} spec_restart_policy;

typedef enum spec_runtime_class {
        SPEC_RUNTIME_PROCESS,
        SPEC_RUNTIME_SYSTEMD,
        _SPEC_RUNTIME_MAX,
        _SPEC_RUNTIME_INVALID = -EINVAL,
} spec_runtime_class;

typedef struct spec_pod_spec {
        spec_container *containers;
        size_t n_containers;
        int64_t termination_grace_period_seconds;
        int restart_policy;     /* spec_restart_policy */
        int runtime_class_name; /* spec_runtime_class */
        spec_security_context security_context;
        char *node_name;        /* set on pods once the agent takes them */
        spec_map node_selector; /* fleet mode: the labels of the nodes it may run on */
        spec_volume *volumes;
        size_t n_volumes;
} spec_pod_spec;

typedef struct spec_pod_template {
        spec_meta metadata; /* labels and annotations only */
        spec_pod_spec spec;
} spec_pod_template;

/* ---- conditions (Deployment, ReplicaSet, Pod) ------------------------------------- */

typedef struct spec_condition {
        char *type;
        char *status; /* "True", "False", "Unknown" */
        char *reason;
        char *message;
        usec_t last_update_time; /* deployments only */
        usec_t last_probe_time;  /* pods only */
        usec_t last_transition_time;
} spec_condition;

/* ---- Deployment ------------------------------------------------------------------ */

typedef enum spec_strategy_type {
        SPEC_STRATEGY_RECREATE,
        SPEC_STRATEGY_ROLLING_UPDATE,
        _SPEC_STRATEGY_MAX,
        _SPEC_STRATEGY_INVALID = -EINVAL,
} spec_strategy_type;

typedef struct spec_rolling_update {
        spec_intstr max_unavailable;
        spec_intstr max_surge;
} spec_rolling_update;

typedef struct spec_strategy {
        int type; /* spec_strategy_type */
        spec_rolling_update *rolling_update;
} spec_strategy;

typedef struct spec_deployment_spec {
        int32_t replicas;
        spec_selector *selector;
        spec_pod_template template;
        spec_strategy strategy;
        int32_t min_ready_seconds;
        int32_t revision_history_limit;
        int32_t progress_deadline_seconds;
        bool paused;
} spec_deployment_spec;

typedef struct spec_deployment_status {
        int64_t observed_generation; /* 0 = absent, like every count below */
        int32_t replicas;
        int32_t updated_replicas;
        int32_t ready_replicas;
        int32_t available_replicas;
        int32_t unavailable_replicas;
        int32_t terminating_replicas;
        int32_t collision_count; /* SPEC_UNSET = absent (nil) */
        spec_condition *conditions;
        size_t n_conditions;
} spec_deployment_status;

typedef struct spec_deployment {
        char *api_version;
        char *kind;
        spec_meta metadata;
        spec_deployment_spec spec;
        spec_deployment_status status;
} spec_deployment;

/* ---- ReplicaSet ------------------------------------------------------------------- */

typedef struct spec_replica_set_spec {
        int32_t replicas;
        int32_t min_ready_seconds;
        spec_selector *selector;
        spec_pod_template template;
} spec_replica_set_spec;

typedef struct spec_replica_set_status {
        int64_t observed_generation;
        int32_t replicas;
        int32_t fully_labeled_replicas;
        int32_t ready_replicas;
        int32_t available_replicas;
        int32_t terminating_replicas;
        spec_condition *conditions;
        size_t n_conditions;
} spec_replica_set_status;

typedef struct spec_replica_set {
        char *api_version;
        char *kind;
        spec_meta metadata;
        spec_replica_set_spec spec;
        spec_replica_set_status status;
} spec_replica_set;

/* ---- Pod ---------------------------------------------------------------------------- */

typedef enum spec_pod_phase {
        SPEC_POD_PENDING,
        SPEC_POD_RUNNING,
        SPEC_POD_SUCCEEDED,
        SPEC_POD_FAILED,
        SPEC_POD_UNKNOWN,
        _SPEC_POD_PHASE_MAX,
        _SPEC_POD_PHASE_INVALID = -EINVAL,
} spec_pod_phase;

typedef struct spec_state_waiting {
        char *reason;
        char *message;
} spec_state_waiting;

typedef struct spec_state_running {
        usec_t started_at;
} spec_state_running;

typedef struct spec_state_terminated {
        int32_t exit_code;
        int32_t signal; /* 0 = absent */
        char *reason;
        char *message;
        usec_t started_at;
        usec_t finished_at;
        char *container_id;
} spec_state_terminated;

typedef struct spec_container_state {
        spec_state_waiting *waiting;
        spec_state_running *running;
        spec_state_terminated *terminated;
} spec_container_state;

typedef struct spec_container_status {
        char *name;
        char *image;    /* the program (command[0], resolved), "" before it starts */
        char *image_id; /* "sha256:<hex>" of that file, "" before it starts */
        spec_container_state state;
        spec_container_state last_state;
        bool ready;
        bool started;
        int32_t restart_count; /* 0 = absent, always encoded */
        char *container_id;    /* "process://<pid>" or "systemd://<unit>" */
} spec_container_status;

typedef struct spec_pod_status {
        int phase; /* spec_pod_phase */
        spec_condition *conditions;
        size_t n_conditions;
        char *reason;
        char *message;
        char *host_ip;
        char *pod_ip;
        usec_t start_time;
        spec_container_status *container_statuses;
        size_t n_container_statuses;
} spec_pod_status;

typedef struct spec_pod {
        char *api_version;
        char *kind;
        spec_meta metadata;
        spec_pod_spec spec;
        spec_pod_status status;
} spec_pod;

/* ---- Event ------------------------------------------------------------------------ */

typedef struct spec_object_ref {
        char *api_version;
        char *kind;
        char *namespace;
        char *name;
        char *uid;
} spec_object_ref;

typedef struct spec_event_source {
        char *component;
        char *host;
} spec_event_source;

typedef struct spec_event {
        char *api_version;
        char *kind;
        spec_meta metadata;
        spec_object_ref involved_object;
        char *reason;
        char *message;
        char *type; /* "Normal" or "Warning" */
        int32_t count;
        usec_t first_timestamp;
        usec_t last_timestamp;
        spec_event_source source;
} spec_event;

/* A v1 ConfigMap: values by key, as text (data) or as bytes (binaryData,
 * base64 as the API writes them). */
typedef struct spec_config_map {
        char *api_version;
        char *kind;
        spec_meta metadata;
        spec_map data;
        spec_map binary_data;
        bool immutable; /* its data can no more change, nor this go back */
} spec_config_map;

/* What one ConfigMap may hold, its data and binaryData together (decoded),
 * as on a cluster (the API server's MaxSecretSize). */
#define SPEC_CONFIG_MAP_MAX (1024 * 1024)

/* A v1 Secret: values by key, as bytes (data, base64 as the API writes
 * them). stringData, text, is written only: defaulting merges it into data
 * (spec_secret_default()), and it is never stored nor read back. */
typedef struct spec_secret {
        char *api_version;
        char *kind;
        spec_meta metadata;
        spec_map data;
        spec_map string_data;
        char *type; /* defaulted "Opaque" */
        bool immutable;
} spec_secret;

/* How every object of the API begins: apiVersion, kind, metadata (the
 * codec's tables agree, and spec/types.c checks each kind's struct at
 * compile time). */
typedef struct spec_object_head {
        char *api_version;
        char *kind;
        spec_meta metadata;
} spec_object_head;

/* The metadata of an object of any kind (as strchr(), the result is not
 * const: the caller knows whether the object is its to change). */
static inline spec_meta *spec_object_meta(const void *obj) {
        return &((spec_object_head *) obj)->metadata;
}

/* ---- the generic, table-driven codec ------------------------------------------------ */

typedef struct spec_type spec_type;

extern const spec_type spec_type_deployment;
extern const spec_type spec_type_replica_set;
extern const spec_type spec_type_pod;
extern const spec_type spec_type_event;
extern const spec_type spec_type_config_map;
extern const spec_type spec_type_secret;
extern const spec_type spec_type_pod_template;
extern const spec_type spec_type_selector;
extern const spec_type spec_type_probe;
extern const spec_type spec_type_container_state;

/* The Go-style type name ("Deployment", "PodTemplateSpec"). */
const char *spec_type_name(const spec_type *t);

/* A new, initialised (all absent) object; NULL on OOM. */
void *spec_new(const spec_type *t);
/* Frees the object and everything it owns; accepts NULL, returns NULL. */
void *spec_free(const spec_type *t, void *p);
/* Frees what the object owns and re-initialises it in place. */
void spec_done(const spec_type *t, void *p);
/* Deep copy; NULL on OOM. */
void *spec_copy(const spec_type *t, const void *p);
bool spec_equal(const spec_type *t, const void *a, const void *b);
/* Whether a and b encode alike (spec_encode(), then json_equal()), without
 * encoding them. */
bool spec_equal_encoded(const spec_type *t, const void *a, const void *b);

/* Strict decode of a JSON tree (borrowed) into *out, which must be freshly
 * initialised. Unknown fields, fields tend does not implement and wrong types
 * are errors naming their path; decoding goes on after an error so that all
 * of them are reported. Returns 0 or -EINVAL (errors added) or -ENOMEM. */
int spec_decode(const spec_type *t, json_t *j, void *out, spec_errors *errs);
/* Canonical encoding: every set field, absent ones left out. New reference,
 * NULL on OOM. */
json_t *spec_encode(const spec_type *t, const void *p);

/* For fieldValidation=Ignore|Warn: takes out of j the keys t has no field
 * for (fields tend refuses are known, and stay, to be refused), and appends
 * each one's path ("spec.replcas") to the JSON array paths. */
int spec_drop_unknown(const spec_type *t, json_t *j, json_t *paths);

/* OpenAPI v3 (openapi.c): the schema of t and of every type it holds, from
 * the decoder's own tables, added to schemas (a components.schemas object)
 * under their Kubernetes definition names; *ret_name is t's. Then
 * spec_openapi_strip() once every type is in. */
int spec_openapi_schema(const spec_type *t, json_t *schemas, char **ret_name);
void spec_openapi_strip(json_t *schemas);
/* The merge key of a list field for strategic merge patches ("name" for
 * containers, env and volumes, "mountPath" for volumeMounts), NULL for a
 * list that is replaced whole. */
const char *spec_list_merge_key(const char *field);

#define SPEC_DEFINE_HELPERS(name, type, tbl)                            \
        static inline type *name##_new(void) {                          \
                return spec_new(&tbl);                                  \
        }                                                               \
        static inline type *name##_free(type *p) {                      \
                return spec_free(&tbl, p);                              \
        }                                                               \
        static inline type *name##_copy(const type *p) {                \
                return spec_copy(&tbl, p);                              \
        }                                                               \
        static inline bool name##_equal(const type *a, const type *b) { \
                return spec_equal(&tbl, a, b);                          \
        }                                                               \
        static inline json_t *name##_encode(const type *p) {            \
                return spec_encode(&tbl, p);                            \
        }                                                               \
        static inline void name##_freep(type **p) {                     \
                if (*p)                                                 \
                        *p = name##_free(*p);                           \
        }

SPEC_DEFINE_HELPERS(spec_deployment, spec_deployment, spec_type_deployment)
SPEC_DEFINE_HELPERS(spec_replica_set, spec_replica_set, spec_type_replica_set)
SPEC_DEFINE_HELPERS(spec_pod, spec_pod, spec_type_pod)
SPEC_DEFINE_HELPERS(spec_event, spec_event, spec_type_event)
SPEC_DEFINE_HELPERS(spec_pod_template, spec_pod_template, spec_type_pod_template)

/* Decode a JSON tree as a T, returning a new object (or NULL with errors). */
int spec_decode_new(const spec_type *t, json_t *j, spec_errors *errs, void **ret);
/* The same, for a tree its caller never changes afterwards (etcd's values
 * in a fleet's mirror, a row read back): what the object keeps as JSON
 * (SK_JSON: a deployment's managedFields) is j's own subtree, shared, when
 * its keys are sorted already, rather than a copy. A large deployment's
 * managedFields were most of its decoding's cost. */
int spec_decode_shared(const spec_type *t, json_t *j, spec_errors *errs, void **ret);

/* Enum names, as they appear in JSON. NULL for out-of-range values. */
const char *spec_strategy_type_to_string(int v);
const char *spec_restart_policy_to_string(int v);
const char *spec_runtime_class_to_string(int v);
int spec_runtime_class_from_string(const char *s);
const char *spec_pod_phase_to_string(int v);
const char *spec_selector_op_to_string(int v);

/* ---- parsing documents ------------------------------------------------------------ */

typedef struct spec_doc {
        json_t *root;   /* owned */
        unsigned line;  /* where the document starts, 1-based */
        unsigned index; /* 1-based among the file's non-empty documents */
        /* YAML only: field path ("spec.replicas", "spec.template.spec.
         * containers[0]") → where it is written; NULL for JSON. Owned. */
        tend_hashmap *positions;
} spec_doc;

/* Where in its document a field path is written (or, for a field not
 * written, the nearest enclosing one that is): false if unknown. Map keys
 * may be given as "[key]" or ".key". */
bool spec_doc_position(const spec_doc *doc, const char *field, unsigned *ret_line,
                       unsigned *ret_column);

typedef struct spec_docs {
        spec_doc *items;
        size_t n;
} spec_docs;

void spec_docs_done(spec_docs *d);

/* Splits YAML (one or many "---" documents) or JSON (one or more objects)
 * into JSON trees. Empty documents are skipped; a "kind: List" is expanded
 * into its items. YAML scalars follow the YAML 1.2 core schema. Refused:
 * aliases, input over SPEC_MAX_INPUT_SIZE, nesting over SPEC_MAX_DEPTH, more
 * than SPEC_MAX_ITEMS entries in one collection, duplicate keys, non-scalar
 * keys. Errors carry file:line:column. Returns 0 or -EINVAL/-ENOMEM; on
 * error, *ret holds nothing. */
int spec_parse(const char *file, const char *data, size_t size, spec_errors *errs, spec_docs *ret);
/* The same, input up to max bytes (an API request's body: a 1 MiB
 * ConfigMap is more than 1 MiB of JSON). */
int spec_parse_max(const char *file, const char *data, size_t size, size_t max, spec_errors *errs,
                   spec_docs *ret);

/* Whether a JSON tree is within what spec_parse admits (SPEC_MAX_DEPTH,
 * SPEC_MAX_ITEMS, SPEC_MAX_NODES, no NUL in strings): 0, or -EINVAL with
 * *ret_problem (new string, NULL when out of memory) naming the limit. */
int spec_json_check_limits(json_t *j, char **ret_problem);

/* ---- Deployment: defaults, validation, updates ----------------------------------- */

/* Kubernetes apps/v1 defaults (docs/deployments.md §1.1) plus tend's own
 * (runtimeClassName "process", probe and port defaults). Idempotent. */
void spec_deployment_default(spec_deployment *d);

/* ---- kinds (spec/kinds.c) ----------------------------------------------------------- */

typedef struct spec_table spec_table;

/* Who writes a kind's objects. */
typedef enum spec_kind_writes {
        SPEC_WRITES_NONE,       /* tendd's controllers (a user may delete, or scale, them) */
        SPEC_WRITES_CONTROLLED, /* a user, through the agent's apply: the controllers act on it */
        SPEC_WRITES_STORED,     /* a user: stored as written, once its checks pass */
} spec_kind_writes;

/* Every kind the API knows, one row each: those tend serves, and those it
 * answers for without having any (absent says why). Discovery, the API's
 * routes and writes, tables, OpenAPI, the store's codecs, the CLI's names
 * and the fleet's keys read it. */
typedef struct spec_kind {
        const char *group, *version; /* "" for core */
        const char *plural, *singular, *kind;
        bool namespaced;
        const char *verbs;       /* discovery's, space-separated */
        const char *short_names; /* space-separated; NULL: none */
        bool in_all;             /* in kubectl's category "all" */
        const char *absent;      /* why tend has none; NULL: served */
        const spec_type *type;   /* the objects' codec; NULL: none is stored */
        bool mirrored;           /* in a fleet, kept in etcd by every node's mirror */
        const spec_table *table; /* the columns of `get`; NULL: the name and age */
        spec_kind_writes writes;
        /* A user's object: its defaults (NULL: none), its checks (0,
         * -EINVAL with errors added, -ENOMEM), and those of its update. */
        void (*defaults)(void *obj);
        int (*validate)(const void *obj, spec_errors *errs);
        int (*validate_update)(const void *old, const void *obj, spec_errors *errs);
} spec_kind;

const spec_kind *spec_kinds(size_t *ret_n);
/* The row of a group, version and plural (a subresource's: "pods/log"). */
const spec_kind *spec_kind_find(const char *group, const char *version, const char *plural);
/* The row of the kind whose objects type encodes (its first group's). */
const spec_kind *spec_kind_of(const spec_type *type);
/* The kind users write whose objects say kind (and apiVersion: NULL, any
 * of its versions): the row whose checks decode them. NULL: none. */
const spec_kind *spec_kind_written(const char *api_version, const char *kind);
/* "Deployment", "ConfigMap": the kinds users write, quoted, for messages;
 * new string. */
char *spec_kinds_written_text(void);
/* "deployment.apps", "configmap": how kubectl names a kind's object in
 * what it prints (before "/NAME"); new string. */
char *spec_kind_printed(const spec_kind *k);
/* A kind tend stores, by a name kubectl takes: its plural, singular or a
 * short name, each with ".GROUP" or without ("deploy", "rs.apps"). */
const spec_kind *spec_kind_named(const char *word);
/* "apps/v1", "v1": the apiVersion of the kind's objects; new string. */
char *spec_kind_api_version(const spec_kind *k);
/* "/apis/GROUP/VERSION" or "/api/VERSION"; new string. */
char *spec_kind_path(const spec_kind *k);

/* A Node as the API gives it (JSON; nodes are not a spec type: tendd
 * makes them), as kubectl shows it: STATUS ("Ready", "NotReady" or
 * "Unknown", then ",SchedulingDisabled" when cordoned) and ROLES (the X of
 * each node-role.kubernetes.io/X label, or "<none>"). New strings. */
#if defined(__x86_64__)
#define SPEC_ARCH "amd64" /* the host's, as Kubernetes names it */
#elif defined(__aarch64__)
#define SPEC_ARCH "arm64"
#else
#define SPEC_ARCH "unknown"
#endif
char *spec_node_status(json_t *node);
char *spec_node_roles(json_t *node);
/* This host as a core/v1 Node named name (capacity, addresses, system
 * info; labels: the well-known ones and labels, a JSON object or NULL),
 * without status.conditions: new. */
json_t *spec_host_node(const char *name, json_t *labels);

/* A Kubernetes Status (kind Status, v1): code, reason (NULL: the one
 * Kubernetes gives with code), message, details (taken; NULL: {}); new. */
json_t *spec_status_json(unsigned code, const char *reason, const char *message, json_t *details);

/* An environment variable's name as tend takes one ([-._a-zA-Z][-._a-zA-Z0-9]*),
 * and whether tend sets it for every pod (POD_NAME, POD_NAMESPACE, POD_UID). */
bool spec_is_env_name(const char *s);
bool spec_env_reserved(const char *name);
/* A DNS-1123 subdomain (a node's name): lowercase alphanumerics, '-' and
 * '.', at most 253 characters. */
bool spec_is_dns_subdomain(const char *s);
/* A DNS-1123 label (a namespace): lowercase alphanumerics and '-', at most
 * SPEC_DNS_LABEL_MAX characters. */
bool spec_is_dns_label(const char *s);
/* What is wrong with a label (key=value), as Kubernetes says it; NULL: valid. */
char *spec_label_problem(const char *key, const char *value);
int spec_deployment_validate(const spec_deployment *d, spec_errors *errs);

/* Rules for replacing old by new (same namespace/name): the selector is
 * immutable. Returns 0 or -EINVAL with errors. */
int spec_deployment_validate_update(const spec_deployment *old_d, const spec_deployment *new_d,
                                    spec_errors *errs);
/* A ConfigMap's checks, as the API server's: its name a DNS subdomain,
 * its keys config keys ([-._a-zA-Z0-9]+, in one of data and binaryData),
 * binaryData base64, at most SPEC_CONFIG_MAP_MAX bytes; tend.io/
 * annotations refused (tend reads none there). 0, or -EINVAL (errors
 * added), or -ENOMEM. */
int spec_config_map_validate(const spec_config_map *c, spec_errors *errs);
/* ... and of its update: an immutable one keeps its data and stays so. */
int spec_config_map_validate_update(const spec_config_map *old_c, const spec_config_map *new_c,
                                    spec_errors *errs);
/* A Secret's defaults, as the API server's: stringData merged into data
 * (over a key of the same name), type "Opaque". -ENOMEM, or 0. */
int spec_secret_default(spec_secret *s);
/* Its checks, as the API server's (ValidateSecret), its values never
 * written into an error: the name, config keys, at most
 * SPEC_CONFIG_MAP_MAX bytes, what its type requires (kubernetes.io/tls:
 * tls.crt and tls.key; basic-auth, ssh-auth, dockercfg, dockerconfigjson
 * likewise); service account tokens refused (tend has no service
 * accounts). On a defaulted Secret. */
int spec_secret_validate(const spec_secret *s, spec_errors *errs);
/* ... and of its update: its type stays; an immutable one keeps its data. */
int spec_secret_validate_update(const spec_secret *old_s, const spec_secret *new_s,
                                spec_errors *errs);

/* `deployment "web"`-style label used in messages; new string. */
char *spec_object_label(const char *kind, const char *name, unsigned doc_index);

/* Resolved maxSurge / maxUnavailable for `replicas` (ResolveFenceposts:
 * surge rounds up, unavailable down, both 0 → unavailable 1; both 0 for
 * Recreate). */
void spec_deployment_fenceposts(const spec_deployment *d, int32_t replicas, int32_t *ret_surge,
                                int32_t *ret_unavailable);

/* ---- tend's annotations ----------------------------------------------------------- */

/* The crash-loop back-off of a deployment's replicas (tend.io/crash-backoff):
 * a replica's first `after` young deaths in a row are replaced at once; the
 * next waits `initial`, then twice as long each time, up to `max`. */
typedef struct spec_backoff {
        bool off; /* "off": every death is replaced at once */
        uint32_t after;
        usec_t initial, max;
} spec_backoff;

extern const spec_backoff spec_backoff_default; /* after=2,initial=1s,max=5m */

/* Parses a tend.io/crash-backoff value ("off", or "after=2,initial=1s,max=5m"
 * with any of the keys); NULL gives the default. -EINVAL with *ret_problem
 * (new string) saying what is wrong, or -ENOMEM. */
int spec_backoff_parse(const char *s, spec_backoff *ret, char **ret_problem);

/* tend.io/listen: "http", "http,metrics@127.0.0.1": the named container
 * ports (TCP, with a containerPort), each on every address or on the one
 * after '@'. */
#define SPEC_LISTEN_MAX 8
typedef struct spec_listen {
        char port[16];    /* the container port's name */
        char address[46]; /* numeric IPv4 or IPv6; "": every address */
} spec_listen;
int spec_listen_parse(const char *s, spec_listen ret[static SPEC_LISTEN_MAX], size_t *ret_n,
                      char **ret_problem);

/* tend.io/lease-ports: "http", "http,metrics": the ports tendd leases per
 * pod from its --port-range (each passed as $PORT_<NAME>, the first also
 * as $PORT), named as a container port is, so that probes can name them.
 * (A containerPort is required by Kubernetes: a leased port, which has
 * none, is declared here.) */
#define SPEC_LEASE_PORTS_MAX 16
typedef struct spec_port_name {
        char name[16];
} spec_port_name;
int spec_lease_ports_parse(const char *s, spec_port_name ret[static SPEC_LEASE_PORTS_MAX],
                           size_t *ret_n, char **ret_problem);
/* The old form of a leased port (a ports entry without containerPort, or
 * with 0), written the new way: such entries leave the container's ports
 * and their names join tend.io/lease-ports (an unnamed one is "port").
 * Run on every decode of a template or a pod (objects stored by an older
 * tendd; why this form and not another: docs/api.md). 1: it changed
 * something; 0: nothing to do; -ENOMEM. */
int spec_lift_leased_ports(spec_map *annotations, spec_pod_spec *spec);
/* The names of the old-form leased ports a Deployment's JSON has (new
 * string, "http,port"), NULL for none: to say so to who wrote it. */
char *spec_legacy_leased_ports(json_t *deployment);

/* tend.io/notify: "ready", "watchdog=10s", or both ("ready,watchdog=10s"). */
typedef struct spec_notify {
        bool ready;      /* the pod is ready once it sends READY=1 */
        usec_t watchdog; /* 0: none; else WATCHDOG=1 at least this often */
} spec_notify;
int spec_notify_parse(const char *s, spec_notify *ret, char **ret_problem);

/* tend.io/canary: a count ("2") or a percentage of replicas ("10%"). */
typedef struct spec_canary {
        int32_t count;   /* > 0, or 0 with percent */
        int32_t percent; /* 1..100, or 0 */
} spec_canary;
int spec_canary_parse(const char *s, spec_canary *ret, char **ret_problem);
/* The canaries for `replicas`: a percentage rounds up; at least 1, at most
 * replicas. */
int32_t spec_canary_count(const spec_canary *c, int32_t replicas);

/*
 * Every annotation tend reads or writes, one row each (spec/annotations.c):
 * where it may stand, who writes it, what becomes of it. The lists the
 * controllers, the API and the fleet keep are predicates over it; a new
 * annotation is a row, its behaviour and its tests.
 */
typedef enum spec_ann_where {
        SPEC_ANN_ON_DEPLOYMENT = 1 << 0,
        SPEC_ANN_ON_TEMPLATE = 1 << 1, /* a Deployment's pod template (and so its pods) */
        SPEC_ANN_ON_REPLICA_SET = 1 << 2,
        SPEC_ANN_ON_POD = 1 << 3,
        SPEC_ANN_ON_CONFIG = 1 << 4, /* a ConfigMap (tend reads none there yet) */
} spec_ann_where;

typedef enum spec_ann_writer {
        SPEC_ANN_BY_USER,       /* in a manifest, checked by its row's check */
        SPEC_ANN_BY_KUBECTL,    /* kubectl (or tend, as kubectl would) */
        SPEC_ANN_BY_MANIFESTS,  /* tendd --manifests (a user may carry it over) */
        SPEC_ANN_BY_CONTROLLER, /* the deployment or ReplicaSet controller */
        SPEC_ANN_BY_NODE,       /* the node a pod runs on (in a fleet: its status key) */
} spec_ann_writer;

typedef struct spec_annotation {
        const char *key;
        unsigned where; /* spec_ann_where bits: where it may stand */
        spec_ann_writer writer;
        /* On a Deployment: copied to its ReplicaSets (and back by a
         * rollback). Annotations with no row are. */
        bool to_replica_set;
        /* An apply of a manifest without it keeps it (kubectl's three-way
         * merge keeps what it never applied). */
        bool kept_on_apply;
        /* A user's value: 0, or -EINVAL with *ret_detail (new string: what
         * it must be), or -ENOMEM. NULL: any value. */
        int (*check)(const char *value, char **ret_detail);
} spec_annotation;

/* What the controllers read of tend's annotations on a Deployment (and on
 * its ReplicaSets, which carry them), parsed once: when the object is
 * stored (store_tend()), not at each read. A value that does not parse
 * (validated at apply: an older tendd's) counts as the default. */
typedef struct spec_tend {
        bool auto_rollback;  /* tend.io/auto-rollback: "true" */
        bool config_rollout; /* tend.io/config-rollout: "true" */
        bool has_canary;     /* tend.io/canary */
        spec_canary canary;
        usec_t canary_promote_after; /* tend.io/canary-promote-after; 0: none */
        spec_backoff backoff;        /* tend.io/crash-backoff, else spec_backoff_default */
        bool fence;                  /* tend.io/node-lost-policy: fence */
} spec_tend;
void spec_tend_parse(const spec_map *annotations, spec_tend *ret);

/* The row of key, or NULL. */
const spec_annotation *spec_annotation_find(const char *key);
/* The rows, in the registry's order. */
const spec_annotation *spec_annotations(size_t *ret_n);
/* The registry's predicates. where: a spec_ann_where bit. */
bool spec_annotation_kept_on_apply(const char *key, spec_ann_where where);
bool spec_annotation_to_replica_set(const char *key);

/* Whether key=value is a valid tend.io/ annotation where it stands (a
 * spec_ann_where bit: a Deployment, its pod template, a ConfigMap): 0, or -EINVAL with
 * *ret_problem, a new string in Kubernetes' words ("Invalid value: ...", "Unsupported value: ...",
 * "Forbidden: ..."), or -ENOMEM. Keys outside tend.io/ are not looked at. */
int spec_tend_annotation_problem(const char *key, const char *value, spec_ann_where where,
                                 char **ret_problem);

/* ---- templates ------------------------------------------------------------------ */

/* pod-template-hash: FNV-1a 32 over the canonical JSON of the template (the
 * pod-template-hash label removed) plus, when collision_count >= 0, its 8
 * bytes; printed with Kubernetes' alphabet. Writes at most 10 chars + NUL. */
#define SPEC_HASH_MAX 11
/* The hash of a ConfigMap's or a Secret's content (a ConfigMap's data and
 * binaryData, a Secret's type and data), 10 characters of the
 * pod-template-hash's alphabet: a snapshot's name is <name>-<hash>. */
#define SPEC_CONFIG_HASH_LEN 10
char *spec_config_hash(const spec_type *t, const void *obj,
                       char buf[static SPEC_CONFIG_HASH_LEN + 1]);
char *spec_template_hash(const spec_pod_template *t, int32_t collision_count,
                         char buf[static SPEC_HASH_MAX]);
/* That canonical JSON text: sorted keys, compact, the pod-template-hash
 * label left out. New string or NULL. */
char *spec_template_text(const spec_pod_template *t);
/* Equal ignoring the pod-template-hash label (how the new RS is found). */
bool spec_template_equal(const spec_pod_template *a, const spec_pod_template *b);

/* ---- status as kubectl reads it --------------------------------------------------- */

const spec_condition *spec_get_condition(const spec_condition *conds, size_t n, const char *type);

/* Pod facts every layer reads the same way. Terminal: Failed or Succeeded,
 * its process gone for good. Active: neither terminal nor being deleted (what
 * a ReplicaSet counts). Ready: its Ready condition is True; *ret_since (may be
 * NULL) gets when it became so, 0 if not ready. */
bool spec_pod_terminal(const spec_pod *p);
bool spec_pod_active(const spec_pod *p);
bool spec_pod_ready(const spec_pod *p, usec_t *ret_since);
/* Whether the pod's container mounts the volume (a volumeMount names it). */
bool spec_volume_mounted(const spec_pod_spec *s, const char *volume);
/* kubectl's STATUS of a pod: Terminating, a waiting or terminated reason,
 * the pod's own reason, or the phase. */
const char *spec_pod_status_text(const spec_pod *p);

/* ---- the columns of `get` (table.c): the API's Table answers and the CLI ---------- */

typedef struct spec_column {
        const char *name, *type, *format, *description;
        int priority; /* 1: -o wide only */
} spec_column;

typedef struct spec_table_ctx {
        usec_t now; /* wall clock, for ages */
        bool human; /* ages as "5m"; else RFC 3339 */
        /* RESTARTS as kubectl prints it, "2 (5m ago)"; else "2", one word
         * (what a script that splits columns on spaces wants) */
        bool restarts_ago;
        /* A pod's REVISION: its ReplicaSet's (NULL: none). */
        const char *(*revision_of)(const char *ns, const char *replica_set, void *userdata);
        void *userdata;
} spec_table_ctx;

/* A kind's table: its columns, and what one object's row says (a new
 * string, or NULL: empty, per column into cells). */
typedef struct spec_table {
        const spec_column *columns;
        size_t n_columns;
        void (*row)(const void *obj, const spec_table_ctx *c, char **cells);
} spec_table;

/* The columns of t's table (its kind's row: 0 for a type without one). */
size_t spec_table_columns(const spec_type *t, const spec_column **ret);
/* One row: a new string (or NULL: empty) per column into cells. */
int spec_table_row(const spec_type *t, const void *obj, const spec_table_ctx *c, char **cells);
char *spec_human_duration(char buf[static 32], usec_t d); /* "45s", "5m30s", "3d4h" */
char *spec_selector_text(const spec_selector *s);         /* "app=web,tier in (a,b)" */

typedef enum spec_rollout {
        SPEC_ROLLOUT_WAITING,
        SPEC_ROLLOUT_DONE,
        SPEC_ROLLOUT_FAILED,
} spec_rollout;

/* `rollout status` (docs/deployments.md §5.5), with kubectl's messages. revision
 * 0: any. The message is written to msg (at most size bytes). */
spec_rollout spec_rollout_status(const spec_deployment *d, int64_t revision, char *msg,
                                 size_t size);

/* ---- manifests: files, directories, stdin ---------------------------------------- */

typedef struct spec_manifest_item {
        const spec_kind *kind;       /* its row: a kind users write (spec_kind_written()) */
        void *object;                /* owned; defaulted and validated */
        spec_deployment *deployment; /* the object, when it is a Deployment; else NULL */
        bool namespace_defaulted;    /* the manifest named no namespace */
        bool replicas_given;         /* spec.replicas was in the manifest */
        bool paused_given;           /* spec.paused was in the manifest */
        char *file;
        unsigned line;
        unsigned index;
        /* where metadata.name and spec.selector are written (YAML; else 0) */
        unsigned name_line, name_column, selector_line, selector_column;
        /* leased ports written the old way (spec_legacy_leased_ports()), or NULL */
        char *legacy_lease_ports;
} spec_manifest_item;

typedef struct spec_manifest {
        spec_manifest_item *items;
        size_t n;
} spec_manifest;

void spec_manifest_done(spec_manifest *m);

/* Parse, decode, default and validate every document of one buffer and
 * append the good ones. All errors are added; returns -EINVAL if any. The
 * caller decides whether a partly valid input is used (apply never does). */
int spec_manifest_add_buffer(spec_manifest *m, const char *file, const char *data, size_t size,
                             spec_errors *errs);
/* A file, "-" for stdin, or a directory (its *.yaml, *.yml and *.json files,
 * sorted by name, not recursive). */
int spec_manifest_add_path(spec_manifest *m, const char *path, spec_errors *errs);
/* The overlap rule itself (docs/architecture.md §4.1), for the manifest check and the
 * apply alike: ds[0..n) were added to o in order; for ds[i], every ds[j]
 * (j < i) of its namespace, other than one of its own name (what it
 * replaces), whose selector can match a pod of it adds an error at
 * spec.selector naming it, and where(j, userdata) when given (NULL or "":
 * nothing; else " (file:line)" is added after its name). Stops at the
 * error cap. -ENOMEM. */
int spec_overlaps_report(spec_overlaps *o, const spec_deployment *const *ds, size_t i,
                         spec_errors *errs, char *(*where)(size_t j, void *userdata),
                         void *userdata);

/* Checks the set as a whole: the same kind, namespace and name twice, and
 * selectors of two deployments in one namespace that could select the
 * same pod. */
int spec_manifest_check(const spec_manifest *m, spec_errors *errs);

/* ---- encoding to text -------------------------------------------------------------- */

/* YAML text of a JSON tree (block style, keys sorted, strings quoted where a
 * plain scalar would read back as another type). New string or NULL. */
char *spec_yaml_dump(json_t *j);
/* Canonical JSON: sorted keys, compact. New string or NULL. */
char *spec_json_dump_canonical(json_t *j);
/* Compact JSON in the tree's own order, as json_dumps(JSON_COMPACT) writes
 * it, made with yajl's generator: three times as fast for a large tree
 * (jansson checks every object it writes for a loop). New string or NULL. */
char *spec_json_dump(json_t *j);
/* The same, where the tree's shared parts (a node with another reference
 * than its parent's: the codec's SK_JSON values, a deployment's
 * managedFields, never changed once made) are written once and their text
 * kept, by this thread, for the next time: the store's rows, of which a
 * large deployment's managedFields are two thirds (issue 27). Only for
 * trees whose shared parts are never changed. */
char *spec_json_dump_shared(json_t *j);
/* An object's compact JSON text, the same bytes as spec_json_dump() (or
 * _canonical, _shared, as flags say) of spec_encode(t, p), written from
 * the object without making the tree: a third of the time for a large
 * one. New string or NULL. */
typedef enum spec_dump_flags {
        SPEC_DUMP_SORTED = 1 << 0, /* spec_json_dump_canonical() */
        SPEC_DUMP_SHARED = 1 << 1, /* spec_json_dump_shared() */
} spec_dump_flags;
char *spec_dump_object(const spec_type *t, const void *p, spec_dump_flags flags);
/* Lets go of the text kept (and of the trees it was written from). */
void spec_json_dump_shared_forget(void);
/* How this thread lets go of a tree it kept (its last reference, often,
 * and a large one: tendd's API frees it in libuv's pool); NULL:
 * json_decref(). */
void spec_json_dump_shared_release_with(void (*fn)(json_t *tree, void *userdata), void *userdata);
