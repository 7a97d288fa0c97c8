/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * tend_runtime: one pod = one process (or one systemd unit), started,
 * watched, probed and stopped on a libuv loop, reporting upward through
 * callbacks. No controller logic lives here: the runtime does what it is
 * told and says what it sees.
 *
 *   rt_manager   one per agent: the loop, the state dir (pod logs), the port
 *                range, the child-subreaper duty, log rotation.
 *   rt_pod       one per pod instance the manager runs or watches.
 *   rt_ops       a backend (process, systemd), chosen by runtimeClassName.
 *
 * Callbacks (rt_callbacks) always run from the loop, never from inside the
 * call that caused them, and never for a call that failed.
 *
 * What survives an agent restart is the pod's rt_record (pid and start time
 * or unit name, leased ports, log path): the agent persists it and hands it
 * back to rt_pod_adopt() after a restart.
 */

#include <jansson.h>
#include <sys/types.h>
#include <uv.h>

#include "tend/base.h"
#include "tend/spec.h"

#define RT_PORT_RANGE_LO 30000
#define RT_PORT_RANGE_HI 32767
#define RT_LOG_MAX_BYTES (10 * 1024 * 1024)
#define RT_MAX_PORTS 16 /* ports per pod */

typedef struct rt_manager rt_manager;
typedef struct rt_pod rt_pod;

typedef enum rt_exit_kind {
        RT_EXIT_CODE,        /* exited with a status code */
        RT_EXIT_SIGNAL,      /* killed by a signal */
        RT_EXIT_UNKNOWN,     /* gone, status unknown (an adopted process) */
        RT_EXIT_START_ERROR, /* never ran: the start failed after rt_pod_start()
                              * returned (systemd: a failed start job) */
} rt_exit_kind;

typedef struct rt_exit {
        rt_exit_kind kind;
        int code;             /* RT_EXIT_CODE */
        int signal;           /* RT_EXIT_SIGNAL */
        usec_t finished_at;   /* wall clock, for display */
        usec_t finished_mono; /* monotonic, for logic */
        const char *reason;   /* "Completed", "Error", "Killed", "Unknown", "StartError" */
        const char *message;  /* RT_EXIT_START_ERROR: what went wrong; borrowed */
} rt_exit;

typedef enum rt_probe_type {
        RT_PROBE_READINESS,
        RT_PROBE_LIVENESS,
        _RT_PROBE_TYPE_MAX,
} rt_probe_type;

typedef struct rt_callbacks {
        /* The process runs (exec succeeded) or the unit is active. */
        void (*started)(rt_pod *pod, void *userdata);
        /* The process is gone. Probes have stopped; the pod stays valid
         * until rt_pod_free(). Called once per pod. */
        void (*exited)(rt_pod *pod, const rt_exit *e, void *userdata);
        /* A probe's published result changed (only transitions are
         * reported) — and, for readiness, failures while it is not
         * passing, at most once a period (the same false again, with its
         * message). message says why on failure. */
        void (*probe)(rt_pod *pod, rt_probe_type type, bool success, const char *message,
                      void *userdata);
        /* A tend-* unit that ran with no pod was stopped by the orphan
         * sweep (rt_manager_sweep_orphans()). */
        void (*orphan_stopped)(const char *unit, void *userdata);
        /* A pod with tend.io/notify sent a new STATUS= (at most 256 bytes). */
        void (*status)(rt_pod *pod, const char *text, void *userdata);
} rt_callbacks;

/* Which bus the systemd backend talks to. AUTO: the system bus as root on
 * a host booted with systemd, else the user bus. */
typedef enum rt_bus {
        RT_BUS_AUTO,
        RT_BUS_USER,
        RT_BUS_SYSTEM,
        RT_BUS_NONE, /* no systemd backend */
} rt_bus;

/* Process pods' cgroups (runtime/cgroup.c). */
typedef enum rt_cgroups {
        RT_CGROUPS_AUTO, /* each pod in a cgroup of its own where tendd can make one */
        RT_CGROUPS_OFF,  /* none: pods that declare limits are refused */
} rt_cgroups;

/* A log's times are kept one entry a look up to this size, and past it at
 * most as large as the log itself. */
#define RT_LOG_TIMES_SLACK (4 * 1024)

typedef struct rt_config {
        uv_loop_t *loop;           /* borrowed */
        const char *state_dir;     /* pod logs go under <state_dir>/pods/ */
        uint16_t port_lo, port_hi; /* 0: RT_PORT_RANGE_* */
        uint64_t log_max_bytes;    /* 0: RT_LOG_MAX_BYTES */
        usec_t log_check_interval; /* 0: 5 s */
        /* how far <log>.times may outgrow its log; 0: RT_LOG_TIMES_SLACK */
        uint64_t log_times_slack;
        bool subreaper;     /* become a child subreaper and reap orphans */
        rt_bus systemd_bus; /* connected on first use, not here */
        rt_cgroups cgroups;
        const rt_callbacks *callbacks;
        void *userdata;
} rt_config;

/* ---- the manager ----------------------------------------------------------------- */

int rt_manager_new(const rt_config *c, rt_manager **ret);
/* Detaches every pod (processes keep running), closes all handles; frees
 * itself once libuv has closed them (run the loop until it returns). */
void rt_manager_close(rt_manager *m);
uv_loop_t *rt_manager_loop(rt_manager *m);
/* The userdata passed to the callbacks (when it is known only later). */
void rt_manager_set_userdata(rt_manager *m, void *userdata);
size_t rt_manager_n_pods(rt_manager *m);

/* ---- records (what adoption needs) ------------------------------------------------ */

typedef struct rt_port {
        char name[16]; /* IANA_SVC_NAME, may be empty */
        uint16_t port;
        bool leased; /* from the agent's range (released when the pod goes) */
} rt_port;

typedef struct rt_record {
        char *backend;       /* "process" or "systemd" */
        pid_t pid;           /* process backend */
        uint64_t start_time; /* field 22 of /proc/<pid>/stat, clock ticks after boot */
        char *unit;          /* systemd backend */
        char *log_path;
        char *image;    /* the program run (its path, as found) */
        char *image_id; /* "sha256:<hex>" of that file; NULL: not readable */
        rt_port ports[RT_MAX_PORTS];
        size_t n_ports;
        usec_t started_at; /* wall clock */
} rt_record;

void rt_record_done(rt_record *r);
json_t *rt_record_to_json(const rt_record *r);
int rt_record_from_json(json_t *j, rt_record *ret);

/* ---- pods ----------------------------------------------------------------------- */

/* One variable of a container's environment as the agent resolved it. */
typedef struct rt_env_var {
        const char *name, *value;
        bool expand; /* a container's own value: $(VAR) of those before it expanded */
} rt_env_var;

/* One file of a configMap or a secret volume, as the agent resolved it. */
typedef struct rt_file {
        const char *path; /* in the volume: relative, validated (no "..") */
        const void *data;
        size_t size;
        mode_t mode;
} rt_file;

/* A volume's files; none for an emptyDir (and for an optional configMap
 * or secret that is missing). */
typedef struct rt_volume_files {
        const rt_file *files;
        size_t n;
} rt_volume_files;

typedef struct rt_pod_params {
        const char *namespace;
        const char *name;
        const char *uid;
        const spec_pod_spec *spec; /* borrowed for the call; containers[0] is run */
        const spec_map *labels;    /* may be NULL; for the unit's Description */
        /* The pod's annotations (may be NULL): tend.io/listen and
         * tend.io/notify are read from them. */
        const spec_map *annotations;
        /* Who holds the pod's tend.io/listen sockets ("ns/deployment"):
         * pods of one owner share them, another owner cannot have them. */
        const char *socket_owner;
        /* rt_pod_adopt() of a pod that was ready: with tend.io/notify
         * ready, it said READY=1 before (it will not again); with a
         * readiness probe, the probe starts passing (it goes unready only
         * after failureThreshold failures, as a ready pod does). */
        bool was_ready;
        /* The container's environment, in order (envFrom's, then env's;
         * a later one replaces an earlier of its name), its references to
         * ConfigMaps, Secrets and the pod resolved; NULL: containers[0].env
         * as written. After what tend sets (PATH, POD_*, PORT*). */
        const rt_env_var *env;
        size_t n_env;
        /* The files of each of spec->volumes (in its order); NULL: none
         * has files. A volume that a volumeMount names is made at the
         * start, under <state_dir>/volumes/<uid>/. */
        const rt_volume_files *volumes;
} rt_pod_params;

/* A start that failed for want of tendd's own resources, not the pod's
 * fault (its descriptors within the API's reserve, a clone the kernel
 * refused for want of processes or descriptors, a descriptor it could not
 * get to watch the process): -RT_ESHORT, the reason in *ret_error. The
 * agent makes the pod wait and tries again (ctl-pod.c), without counting
 * a death. */
#define RT_ESHORT ENOBUFS
/* Starts a pod with the backend its runtimeClassName names. On failure
 * returns -errno and, in *ret_error, a message naming the path and the
 * error ("exec /usr/bin/nope: No such file or directory"); no callback is
 * made. On success, `started` follows from the loop. */
int rt_pod_start(rt_manager *m, const rt_pod_params *p, void *pod_userdata, rt_pod **ret,
                 char **ret_error);

/* Watches a pod the agent ran before a restart. Refuses (-ESRCH) a record
 * whose process is gone and (-ESTALE) a pid that now belongs to another
 * process; *ret_error says which. An adopted process's exit status is
 * unknown (RT_EXIT_UNKNOWN). Probes restart from their initial state. */
int rt_pod_adopt(rt_manager *m, const rt_pod_params *p, const rt_record *r, void *pod_userdata,
                 rt_pod **ret, char **ret_error);

/* SIGTERM to the pod's process group, SIGKILL after grace. `exited`
 * follows. Stopping a stopped pod does nothing. */
int rt_pod_stop(rt_pod *pod, usec_t grace);
/* A signal to the pod's whole process group. */
int rt_pod_signal(rt_pod *pod, int sig);
/* Forgets the pod: probes stop, its ports are released, and nothing more is
 * reported. A live process is left running (detached). Accepts NULL. */
void rt_pod_free(rt_pod *pod);

const rt_record *rt_pod_record(const rt_pod *pod);
void *rt_pod_userdata(const rt_pod *pod);
const char *rt_pod_name(const rt_pod *pod);
/* "process://<pid>" or "systemd://<unit>"; borrowed. */
const char *rt_pod_container_id(const rt_pod *pod);
bool rt_pod_is_running(const rt_pod *pod);
bool rt_pod_ready(const rt_pod *pod);
/* The last failure of a probe ("HTTP probe failed with statuscode: 503"),
 * or NULL; borrowed, valid until the next probe result. */
const char *rt_pod_probe_message(const rt_pod *pod, rt_probe_type type);

/* ---- volumes ------------------------------------------------------------------------- */

/* Why this tendd cannot give a pod its volumes (it is not root); NULL: it
 * can. A static string. */
const char *rt_mount_problem(void);
/* Why the resources.limits of s cannot be enforced here (*ret, a new
 * string), NULL if they can (or s declares none). */
const char *rt_limits_problem(rt_manager *m, const spec_pod_spec *s, char **ret);
/* What the pod of uid, whose main process is pid, uses, read from its
 * cgroup (children included): CPU time in ns and its memory's working set
 * in bytes. A systemd pod's is its unit's cgroup, found from pid. -ENOENT:
 * it has no cgroup of its own. */
int rt_manager_pod_usage(rt_manager *m, const char *uid, pid_t pid, uint64_t *ret_cpu_ns,
                         uint64_t *ret_memory);

/* A running pod's configMap and secret volumes rewritten from p->volumes,
 * each in one step (its ..data link swapped), where their content changed;
 * subPath mounts keep what they had, as in Kubernetes. Returns how many
 * changed, or -errno (*ret_error, new, says what). */
int rt_pod_update_volumes(rt_pod *pod, const rt_pod_params *p, char **ret_error);
/* The volumes of a pod that is gone (tmpfs unmounted, files removed). */
void rt_manager_remove_pod_volumes(rt_manager *m, const char *uid);
/* At start-up: the volumes of every pod uid that keep() does not keep. */
void rt_manager_sweep_volumes(rt_manager *m, bool (*keep)(const char *uid, void *userdata),
                              void *userdata);

/* ---- held sockets --------------------------------------------------------------------- */

/* Under systemd (NOTIFY_SOCKET set): held sockets also go to the service
 * manager's file-descriptor store (FDSTORE=1), which hands them back to
 * the next tendd as LISTEN_FDS (the unit needs FileDescriptorStoreMax=). */
void rt_manager_set_fdstore(rt_manager *m, bool on);
/* Whether an fd name of LISTEN_FDNAMES is a held socket's. */
bool rt_held_fdname(const char *name);
/* At start, before adoption: a held socket from the fd store (takes fd;
 * -ENOTSOCK if it is not a listening TCP socket, -EEXIST if one of its
 * address is held already). */
int rt_manager_add_held_socket(rt_manager *m, int fd);
/* The same for pods' notify sockets (tend.io/notify; FDNAME
 * tend-notify-<pod uid>): each goes back to its pod at adoption, with what
 * the pod said meanwhile; one no pod takes is closed at the end of
 * start-up (rt_manager_sweep_orphans()). Takes fd. */
bool rt_notify_fdname(const char *name);
int rt_manager_add_notify_socket(rt_manager *m, int fd, const char *name);

/* ---- systemd units ------------------------------------------------------------------ */

/* tend-<namespace>-<pod>.service, the namespace's dashes escaped (\x2d) so
 * that the name parses back; new string. */
char *rt_unit_name(const char *namespace, const char *pod);
int rt_unit_parse(const char *unit, char **ret_namespace, char **ret_pod);

/* ---- start-up, whatever the backend ------------------------------------------------- */

/* At start-up, for a pod whose record holds only the intent (an agent that
 * died after its start and before its record): its process (by POD_UID in
 * its environment, a session leader) or its unit (by name), as its
 * runtimeClassName says; -ESRCH if none runs. Where systemd's bus cannot be
 * reached, a unit cannot be ruled out: its name is returned, for an
 * adoption that is verified once the bus is back. Scans /proc: start-up
 * only. */
int rt_manager_find_pod(rt_manager *m, const rt_pod_params *p, rt_record *ret);
/* At the end of start-up adoption, every backend stops what no pod
 * adopted: processes of ours that no watched pod accounts for (one an
 * agent started and died before recording), and running tend-* units
 * (failed ones reset), asynchronously, each reported through the
 * orphan_stopped callback (where the bus cannot be reached, once it is
 * back). */
void rt_manager_sweep_orphans(rt_manager *m);

/* What a backend can do (rt_runtime_caps()). */
enum {
        /* Its start is synchronous and its process found by the start-up
         * sweep should the agent die before recording it: a pod may be
         * started before the pass that decided it is committed. (A unit's
         * start is asynchronous, and a unit is found only by its name: its
         * intent is committed first.) */
        RT_CAP_START_BEFORE_COMMIT = 1 << 0,
};
unsigned rt_runtime_caps(spec_runtime_class c);

/* The logs of a pod that is gone: its log directory is emptied and kept
 * as a spare for the next pod (logdir.c: on ext4 that spares a burst of
 * new pods a scan past every inode freed in the last minute). */
void rt_manager_remove_pod_logs(rt_manager *m, const char *namespace, const char *pod);

/* <state_dir>/pods/<namespace>_<pod>/<container>.log; new string. */
char *rt_log_path(const char *state_dir, const char *namespace, const char *pod,
                  const char *container);
/* <log>.times beside a log: when each stretch of it was seen written, as
 * entries of (end offset, wall-clock µs), in order (runtime/logs.c). */
char *rt_log_times_path(const char *log_path);
/* The last max_entries of them (*ret: new array, NULL and 0 when there
 * are none). */
int rt_log_times_load(const char *log_path, size_t max_entries, uint64_t (**ret)[2], size_t *ret_n);

/* ---- pure helpers (exported for tests) --------------------------------------------- */

/* Kubernetes $(VAR) expansion: $(VAR) → value if VAR is in env, else kept
 * literally; $$ → $. env is a NULL-terminated "NAME=value" vector. New
 * string. */
char *rt_expand(const char *s, char *const *env);

/* The environment of a pod: PATH (when the container sets none), the
 * container's env (each value $(VAR)-expanded from the entries before it),
 * POD_NAME, POD_NAMESPACE, POD_UID, and PORT_<NAME> / PORT for its ports. */
int rt_build_env(const rt_pod_params *p, const rt_port *ports, size_t n_ports, char ***ret);

/* Identity of a live process: field 22 of /proc/<pid>/stat. */
int rt_process_start_time(pid_t pid, uint64_t *ret);
