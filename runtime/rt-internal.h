/* SPDX-License-Identifier: MIT */
#pragma once

/* Private to tend_runtime. */

#include <curl/curl.h>
#include <sys/resource.h>

#include "tend/net.h"
#include "tend/runtime.h"

/* A held socket's address (tend.io/listen); "" for every address. */
typedef struct rt_held_addr {
        char address[46];
        uint16_t port;
} rt_held_addr;

/* ---- backends --------------------------------------------------------------------- */

/*
 * A backend (docs/architecture.md §6, docs/conventions.md "Backends"): a
 * const table of operations, NULL where unsupported. A backend reports only
 * through rt__pod_started() and rt__pod_exited(), always from the loop. It
 * never touches probes, ports or callbacks; the manager does.
 */
typedef struct rt_ops {
        const char *name;
        /* Its own per-pod struct (rt_pod.backend), this many bytes, zeroed;
         * pod_init sets what zero does not (fds to -EBADF), pod_done frees
         * what it owns, when the pod itself is freed. NULL: nothing. */
        size_t pod_size;
        void (*pod_init)(rt_pod *pod);
        void (*pod_done)(rt_pod *pod);
        /* The manager starts and closes: the backend's own state in it.
         * NULL: nothing. */
        void (*manager_init)(rt_manager *m, const rt_config *c);
        void (*manager_close)(rt_manager *m);
        /* Start pod->argv/envp; fill pod->record (pid/unit) on success. */
        int (*start)(rt_pod *pod, char **ret_error);
        /* SIGTERM now, SIGKILL after grace; exit reported as usual. */
        int (*stop)(rt_pod *pod, usec_t grace);
        int (*signal)(rt_pod *pod, int sig);
        /* Watch the process/unit named by pod->record. */
        int (*adopt)(rt_pod *pod, char **ret_error);
        /* Stop watching (no signal); close handles. */
        void (*detach)(rt_pod *pod);
        /* At start-up, a pod whose record holds only the intent: its
         * process or unit, if one runs (-ESRCH otherwise). */
        int (*find)(rt_manager *m, const rt_pod_params *p, rt_record *ret);
        /* At the end of start-up adoption: stops what of this backend's no
         * pod adopted. NULL: nothing. */
        void (*sweep_orphans)(rt_manager *m);
        /* Why limits (memory and/or cpu) cannot be enforced for its pods
         * here (*ret, new), NULL if they can. NULL: always can. */
        const char *(*limits_problem)(rt_manager *m, bool memory, bool cpu, char **ret);
        /* The pod's main process where its record has no pid (a unit's
         * MainPID). NULL: the record's. */
        pid_t (*main_pid)(const rt_pod *pod);
        unsigned caps; /* RT_CAP_* */
} rt_ops;

extern const rt_ops rt_process_ops;
extern const rt_ops rt_systemd_ops;

/* The backends' own finders and sweeps (process.c's are env.c's and
 * reaper.c's; systemd.c's), exported for the runtime's tests. */
int rt__find_pod_process(const char *pod_uid, rt_record *ret);
void rt__sweep_orphan_processes(rt_manager *m);
int rt__find_unit(rt_manager *m, const char *namespace, const char *pod, rt_record *ret);
void rt__sweep_orphan_units(rt_manager *m);

/* The backend of a runtimeClassName; NULL if none (backends.c). */
const rt_ops *rt__backend_for(spec_runtime_class c);
/* Calls every backend's manager_init / manager_close. */
void rt__backends_init(rt_manager *m, const rt_config *c);
void rt__backends_close(rt_manager *m);

/* ---- pods ------------------------------------------------------------------------------ */

typedef enum rt_pod_state {
        RT_POD_STARTING,
        RT_POD_RUNNING,
        RT_POD_STOPPING,
        RT_POD_EXITED,
} rt_pod_state;

typedef struct rt_prober rt_prober;

/* One of a pod's volumes where its process sees it (volumes.c). */
typedef struct rt_mount {
        char *src; /* <state>/volumes/<uid>/<volume>[/<subPath>] */
        char *dst; /* mountPath */
        bool read_only;
} rt_mount;

struct rt_pod {
        rt_manager *manager;
        rt_pod *prev, *next; /* manager's list */
        const rt_ops *ops;
        unsigned refs; /* the manager's + one per open handle or request */
        rt_pod_state state;
        bool freed;          /* rt_pod_free() called: report nothing more */
        bool started_queued; /* waiting in the manager's deferred queue */
        rt_pod *deferred_next;
        bool rotating;                      /* a log rotation is in flight */
        int log_fd;                         /* read-only, for fstat(): no path walk per check */
        uint64_t log_size;                  /* at the last check */
        usec_t log_checked, log_next_check; /* monotonic */
        bool log_parked; /* not grown: checked again once its watch sees a change */
        size_t log_slot; /* its index + 1 in the manager's log_active; 0: not there */
        /* The log's times (<log>.times: when each stretch of it was seen
         * written), for logs --timestamps and --since. */
        int times_fd;         /* -EBADF: not open (yet) */
        bool times_absent;    /* no times file yet: made at the log's first growth */
        uint64_t times_n;     /* entries in the file */
        uint64_t times_off;   /* the last entry's end offset */
        usec_t times_at;      /* its wall-clock time */
        usec_t times_due;     /* monotonic: a look put off (gated), 0 none */
        uv_fs_event_t *watch; /* inotify on the log, while it runs */

        char *namespace, *name, *uid, *container;
        char *container_id;
        void *userdata;
        rt_record record;

        /* What the process runs, resolved at start (also used by exec
         * probes, which run with the pod's environment and identity). */
        char *path; /* argv[0] resolved against PATH */
        char **argv;
        char **envp;
        char *working_dir;
        /* in envp: the values of LISTEN_PID= and WATCHDOG_PID=, written by
         * the child (rt_spawn.pid_slots); NULL: none */
        char *pid_slots[2];
        char *description; /* systemd: "tend pod NS/NAME (labels)" */
        rt_mount *mounts;  /* at a start: its volumes (volumes.c) */
        size_t n_mounts;
        bool own_mnt_ns; /* a process pod with volumes: a mount namespace of its own */
        usec_t grace;    /* terminationGracePeriodSeconds */
        uint64_t memory_max, cpu_milli; /* resources.limits, 0: none */
        bool cg;                        /* in a cgroup of its own (cgroup.c) */
        unsigned cg_mask;               /* the hierarchies it joined: a bit each */
        uint64_t cg_oom;                /* the OOM killer's count there at its start */
        bool set_ids;
        uid_t uid_n;
        gid_t gid_n;
        usec_t started_mono;

        rt_prober *probes[_RT_PROBE_TYPE_MAX];
        bool ready;       /* published readiness (false until a probe says so) */
        bool probe_ready; /* the readiness probe's own verdict */
        /* Adopted after a restart of tendd's, ready before it: its
         * readiness probe starts passing, as a ready pod's (issue 33). */
        bool adopted_ready;

        /* tend.io/listen: the addresses it asks for (from its annotation,
         * which a pod keeps for life: an adopted one asks the same), and
         * the sockets it got (NULL: adopted, and tendd could not get that
         * one back), fd 3 onward. */
        rt_held_addr listen[SPEC_LISTEN_MAX];
        size_t n_listen;
        struct rt_held *held[SPEC_LISTEN_MAX];
        size_t n_held;

        /* tend.io/notify (notify.c; a socket for the process backend) */
        bool notify_socket;
        bool notify_in_store; /* also in systemd's fd store */
        int notify_fd;
        uv_poll_t *notify_poll;
        uv_timer_t *watchdog_timer;
        usec_t watchdog_due;        /* monotonic: when it fires, unless WATCHDOG=1 comes */
        bool watchdog_excused;      /* its last expiry came late and was let go (rt__late) */
        bool notify_failed;         /* liveness failed by the watchdog: said once */
        bool notify_declared_ready; /* ready only after READY=1 */
        bool notify_ready;          /* READY=1 came */
        usec_t notify_watchdog;     /* 0: none */
        char *notify_status;
        unsigned notify_refused; /* messages from processes not of the pod */

        /* The stop's grace period, for either backend (rt__grace_arm). */
        uv_timer_t grace_timer;
        bool grace_timer_init;
        usec_t kill_at; /* monotonic: when the grace period ends */

        /* The backend's own state: rt_proc (process.c) or rt_sd
         * (systemd.c), ops->pod_size bytes. */
        void *backend;
};

/* pod.c: publishes readiness after READY=1 (the probe's verdict and
 * READY=1 both needed). */
void rt__readiness_update(rt_pod *p, const char *message);

/* volumes.c: at a start, the pod's volumes made and written, and where
 * its process sees them (pod->mounts); *ret_error says what failed. */
int rt__volumes_prepare(rt_pod *pod, const rt_pod_params *p, char **ret_error);
void rt__mounts_free(rt_pod *pod);
/* <state>/volumes/<uid>[/<volume>] (volume NULL: the pod's); new string. */
char *rt__volume_dir(rt_manager *m, const char *uid, const char *volume);
/* The atomic writer: files as the volume's new version, unless it holds
 * them already. 1: written; 0: unchanged. */
int rt__volume_write(const char *dir, const rt_file *files, size_t n, char **ret_error);

/* logdir.c: makes the directories that will hold path (not path) */
int rt__mkdir_parents(const char *path, mode_t mode);

/* A deadline met more than RT_STALL_MIN late: tendd was not running
 * (stopped, suspended, starved of CPU, or busy), and the pod is not to
 * blame for what it could not see meanwhile. A watchdog reads what waits
 * on the pod's notify socket first, then starts its interval again from
 * now; a probe attempt that timed out late is discarded and made again
 * (issue 33: a SIGSTOP of tendd killed every watchdog pod). Returns
 * whether deadline is that late, and logs the stall once (late.c). */
#define RT_STALL_MIN (250 * USEC_PER_MSEC)
bool rt__late(rt_manager *m, usec_t deadline, usec_t now);
/* r, or -RT_ESHORT where r says tendd ran out of descriptors (its own
 * trouble, not the pod's). */
static inline int rt__fd_short(int r) {
        return r == -EMFILE || r == -ENFILE ? -RT_ESHORT : r;
}

/* notify.c */
char *rt__notify_dir(const char *state_dir);
char *rt__notify_name(rt_manager *m, const char *pod_uid);
/* Notify sockets from the fd store that no adopted pod took: closed. */
void rt__notify_sweep_stored(rt_manager *m);
/* Beside the pod's log: it said READY=1 (for a tendd after a restart). */
char *rt__notify_ready_mark(const char *log_path);
/* adopted: the pod's pid, when tendd did not start it (0: it did) */
int rt__notify_open(rt_pod *p, pid_t adopted);
void rt__notify_started(rt_pod *p);
void rt__notify_close(rt_pod *p);
/* Reads a notify socket (see notify.c): each line of a message from pid or
 * its session to on_line, which returns false to stop. */
#define NOTIFY_MESSAGE_MAX 4096
#define NOTIFY_BATCH 16 /* datagrams read a call: a flood must not hold the loop */
typedef bool (*rt__notify_line_fn)(const char *line, size_t len, void *userdata);
unsigned rt__notify_receive(int fd, pid_t pid, rt__notify_line_fn on_line, void *userdata,
                            unsigned *refused);

/* held.c */
typedef struct rt_held rt_held;
#define RT_HELD_SLOTS 16
void rt__held_reserve(rt_manager *m);
void rt__held_unreserve(rt_manager *m);
/* Gets the pod the socket of a (its index-th), bound now, or — adopt — the
 * one held already or taken back from the pod itself. */
int rt__held_acquire(rt_pod *pod, const char *owner, const rt_held_addr *a, bool adopt,
                     size_t index, char **ret_error);
void rt__held_release(rt_pod *pod);
int rt__held_fd(const rt_pod *pod, size_t i);
/* Closes held sockets unused for a while (all: every one, at close). */
void rt__held_sweep(rt_manager *m, bool all);

/* reaper.c: SIGCHLD and the reap timer; the orphans reaped now. */
void rt__reaper_start(rt_manager *m);
void rt__reap_orphans(rt_manager *m);
/* logs.c: the log size checks; a new pod's first check soon. */
void rt__logs_start(rt_manager *m);
void rt__log_check_soon(rt_pod *pod);
/* Out of the log timer's list (the pod is unlinked). */
void rt__log_forget(rt_pod *pod);
/* A pod's log times: its watch ends (rt_pod_free; closed at the next log
 * timer, or with the manager: rt__times_close_dead). */
void rt__times_stop(rt_pod *pod);
void rt__times_close_dead(rt_manager *m);

/* pod.c: reference counting keeps a pod alive while libuv still holds one
 * of its handles; the last unref frees it (docs/conventions.md: freed only
 * in the close cb). */
rt_pod *rt__pod_ref(rt_pod *p);
void rt__pod_unref(rt_pod *p);

/* Up-calls from backends. */
void rt__pod_started(rt_pod *p);
void rt__pod_exited(rt_pod *p, const rt_exit *e);

/* Arms p->grace_timer (initialized) to fire after grace — unless it is
 * already set to fire sooner: a second stop may shorten the grace period,
 * never lengthen it. */
void rt__grace_arm(rt_pod *p, usec_t grace, uv_timer_cb cb);
/* For a grace timer's callback: libuv's clock is coarse (a jiffy) and may
 * fire a few ms before p->kill_at; then re-arm for the rest and say so. */
bool rt__grace_not_yet(rt_pod *p, uv_timer_cb cb);
/* The same for any timer t of callback cb due at `due` (monotonic): it
 * fired early (libuv's clock lagged when it was armed), so it is armed
 * again for the rest, and true says so (late.c). */
bool rt__not_yet(uv_timer_t *t, uv_timer_cb cb, usec_t due);

/* ---- cgroups -------------------------------------------------------------------------------- */

#define RT_CG_MAX 5
typedef enum rt_cg_layout { RT_CG_NONE, RT_CG_V1, RT_CG_V2 } rt_cg_layout;

/* The layout, found once and logged; the bases made. */
void rt__cgroup_init(rt_manager *m, const rt_config *c);
void rt__cgroup_close(rt_manager *m);
/* Why limits of these kinds cannot be enforced here (*ret, new string),
 * NULL if they can. */
const char *rt__cgroup_limits_problem(rt_manager *m, bool memory, bool cpu, char **ret);
/* Whether the host's cgroups are v2 (one hierarchy at /sys/fs/cgroup). */
bool rt__cgroup_v2_host(void);
/* rt_manager_pod_usage(), once a systemd pod's pid is known. */
int rt__cgroup_usage(rt_manager *m, const char *uid, pid_t pid, uint64_t *ret_cpu_ns,
                     uint64_t *ret_memory);
/* The uid of the pod whose cgroup holds pid (new), NULL if none does. */
char *rt__cgroup_uid_of(rt_manager *m, pid_t pid);
/* Whether WORD is one of LIST's words, split at SEP ("memory cpu"). */
static inline bool rt__has_word(const char *list, const char *word, char sep) {
        size_t n = strlen(word);

        for (const char *s = list; s && *s;) {
                const char *e = strchr(s, sep);
                size_t len = e ? (size_t) (e - s) : strlen(s);
                if (len == n && strncmp(s, word, n) == 0)
                        return true;
                s = e ? e + 1 : NULL;
        }
        return false;
}

/* The pod's cgroups made and limited; *ret_procs: their cgroup.procs, for
 * the child to join (NULL: none); *ret_v2_dir: on v2, the one cgroup's
 * directory, to make the child in (NULL: none). */
int rt__cgroup_prepare(rt_pod *p, char ***ret_procs, char **ret_v2_dir, char **ret_error);
/* An adopted pod's: found by its process's /proc/PID/cgroup. */
void rt__cgroup_adopt(rt_pod *p);
bool rt__cgroup_oom_killed(rt_pod *p);
/* SIGKILL to every process left in it. */
void rt__cgroup_kill(rt_pod *p);
/* Removed at a later reap or log check (rt__cgroup_tidy()). */
void rt__cgroup_remove(rt_pod *p);
/* At a reap or log check: the removals left to do, and the spares made. */
void rt__cgroup_tidy(rt_manager *m);
/* At the end of start-up: the empty cgroups no pod has, removed. */
void rt__cgroup_sweep(rt_manager *m);

/* ---- the manager ------------------------------------------------------------------------ */

#define PORT_BITMAP_SIZE (65536 / 8)

struct rt_manager {
        uv_loop_t *loop;
        char *state_dir;
        char *notify_dir;     /* notify.c: where pods' notify sockets are */
        bool notify_dir_made; /* made and checked */
        rt_callbacks cb;
        void *userdata;
        bool closing;
        unsigned refs;                  /* open handles + 1 until closed */
        void (*destroy)(rt_manager *m); /* manager.c's: frees it at the last unref */

        rt_pod *pods;
        size_t n_pods;
        rt_pod *deferred; /* pods whose `started` is still to be reported */
        rt_pod *deferred_tail;
        uv_idle_t deferred_idle;

        /* programs' digests (image.c): "dev:ino:size:mtime" → "sha256:..." */
        tend_hashmap *images;

        /* ports */
        uint16_t port_lo, port_hi, port_cursor;
        uint8_t port_leased[PORT_BITMAP_SIZE];

        /* logs */
        char **spares; /* names of emptied log directories in <state>/pods/.spare (logdir.c) */
        size_t n_spares, alloc_spares;
        uint64_t spare_seq;
        bool spares_loaded;
        uint64_t log_max_bytes;
        usec_t log_check_interval;
        uint64_t log_times_slack;
        uv_timer_t log_timer;
        /* The pods whose logs the timer looks at (not parked); the rest
         * wait for their watch. walk_all: one could not be put in (out of
         * memory): every pod is looked at, as before the list. */
        rt_pod **log_active;
        size_t n_log_active, alloc_log_active;
        rt_pod *log_sweep; /* the next pod of the slow sweep of parked logs */
        bool log_walk_all;
        /* watches of freed pods, closed at the next log timer: removing an
         * inotify watch is no work for the path that replaces a pod */
        uv_fs_event_t **dead_watches;
        size_t n_dead_watches;

        /* orphans (child subreaper) and our own children */
        bool subreaper;
        uv_timer_t reap_timer; /* reap_orphans() soon (rt__manager_reap_soon()) */
        uv_signal_t sigchld;
        pid_t *known_pids; /* open-addressing set of pids we spawned */
        size_t known_alloc, known_n, known_tombstones;
        tend_hashmap *detached; /* uids of pods left running by rt_pod_free() */
        tend_hashmap *escapees; /* live children we did not spawn: pid → POD_UID ("": none) */
        bool pods_ended;        /* a pod ended since the children were last looked at */

        /* exec spawning */
        void *spawn_stack;
        size_t spawn_stack_size;
        int clone3_state;          /* 0: not tried yet; 1: works; -1: not here (a join instead) */
        uint64_t nofile;           /* tendd's descriptor limit (soft, raised to the hard one) */
        size_t log_fds;            /* pods' log files held open (rt_pod.log_fd) */
        struct rlimit nofile_orig; /* restored in children */
        usec_t stall_said;         /* monotonic: when a stall was last logged */

        /* notify sockets of the previous tendd, from the fd store: uid → fd + 1 */
        tend_hashmap *notify_stored;

        /* held sockets (held.c) */
        rt_held *held;
        bool fdstore;
        char *held_lost; /* why one could not be taken back from a pod */
        int held_slots[RT_HELD_SLOTS];
        bool held_slot_used[RT_HELD_SLOTS];

        /* HTTP probes */
        net_curl *curl;

        /* systemd */
        rt_bus bus_kind; /* resolved: USER, SYSTEM or NONE */
        struct sd_bus *bus;
        struct sd_bus_slot *bus_match, *bus_jobs, *bus_owner;
        uv_poll_t *bus_poll; /* one per connection */
        int bus_poll_events;
        bool bus_handles;
        uv_timer_t bus_timer, bus_retry;
        uv_prepare_t bus_prepare;
        tend_hashmap *sd_units;    /* object path → rt_pod */
        tend_hashmap *sd_snapshot; /* start-up: unit name → SNAP_* */
        usec_t sd_snapshot_at;
        bool sd_stale;         /* the bus was lost (or never reached): re-read on connect */
        bool sd_subscribed;    /* Subscribe answered on this connection */
        bool sd_sweep_pending; /* the orphan sweep of start-up could not run yet */
        struct sd_bus_slot *sd_sweep;

        /* cgroups (cgroup.c): per hierarchy, the directory of the pods'
         * (v2: one); the controllers' indexes in it, -1: none */
        rt_cg_layout cg_layout;
        char *cg_why;        /* RT_CG_NONE: why */
        char *cg_limits_why; /* a layout that cannot give controllers to pods: why */
        char *cg_name;       /* "tend-<hash>": each base's last part */
        char *cg_base[RT_CG_MAX];
        char cg_ctl[RT_CG_MAX][16];
        size_t cg_n;
        int cg_memory, cg_cpu;
        char **cg_trash; /* uids of pods' cgroups not yet empty: removed at a reap */
        /* v1: empty cgroups made ahead, <base>/spare-<n> for n in [lo, hi),
         * each renamed to a pod's uid in turn */
        unsigned cg_spare_lo, cg_spare_hi;
};

void rt__systemd_close(rt_manager *m);

void rt__manager_ref(rt_manager *m);
/* Look for unreaped children of ours soon (after a detach). */
void rt__manager_reap_soon(rt_manager *m);
void rt__manager_unref(rt_manager *m);

/* Pids we spawned and reap ourselves (pods and exec probes); the orphan
 * reaper leaves them alone. */
int rt__pid_add(rt_manager *m, pid_t pid);
void rt__pid_remove(rt_manager *m, pid_t pid);
bool rt__pid_known(rt_manager *m, pid_t pid);

/* ---- spawning ------------------------------------------------------------------------------ */

typedef struct rt_spawn {
        const char *path;
        char *const *argv;
        char *const *envp;
        const char *cwd;    /* NULL: inherit */
        const char *output; /* stdout and stderr appended here (created 0640, before the
                             * ids change); NULL: /dev/null. stdin is /dev/null. */
        bool set_ids;
        uid_t uid;
        gid_t gid;
        /* Passed as fd 3, 4, ... (held sockets); at most SPEC_LISTEN_MAX. */
        const int *fds;
        size_t n_fds;
        /* Room of RT_PID_SLOT bytes where the child writes its own pid
         * (the value of LISTEN_PID=, WATCHDOG_PID=); NULL: none. */
        char *pid_slots[2];
        /* Bind mounts in a mount namespace of the child's own (its view
         * of everything else the host's, host mounts propagating in). */
        const rt_mount *mounts;
        size_t n_mounts;
        /* A mount namespace to join (an exec probe of a pod with volumes
         * sees what the pod sees). */
        bool join_mnt_ns;
        int mnt_ns;
        /* cgroup.procs of the cgroups to join before exec */
        char *const *cg_procs;
        size_t n_cg_procs;
        /* v2: the directory of cg_procs' one cgroup, to make the child in
         * (clone3's CLONE_INTO_CGROUP); where the kernel cannot, the child
         * joins it as on v1. NULL: none. */
        const char *cg_dir;
} rt_spawn;

#define RT_PID_SLOT 16

/* Descriptors no pod may take: the API's connections, the store's, a
 * probe's (a pod's start within them of tendd's limit is refused; a log
 * is kept open only outside twice as many). */
#define RT_FD_RESERVE 64

/*
 * Starts a process in its own session (pgid = pid) with clean signal state
 * and returns only once it has exec'd or failed. Exec failures come back as
 * -errno with a message naming the step and path; then no process remains.
 * On success *ret_pidfd is a pidfd (CLOEXEC) and the pid is in the known set.
 */
int rt__spawn(rt_manager *m, const rt_spawn *s, pid_t *ret_pid, int *ret_pidfd, char **ret_error);

/* ---- logs ---------------------------------------------------------------------------------- */

/* Makes the directory that holds log_path, from a spare where there is one
 * (leaving log_path there, empty), else with mkdir. */
int rt__log_dir_make(rt_manager *m, const char *log_path);
void rt__log_spares_free(rt_manager *m);

/* ---- ports ---------------------------------------------------------------------------------- */

/* notify.c: closes a descriptor a stranger sent, never waiting on it (a
 * socket is reset, not lingered on). */
void rt__close_received(int fd);

/* image.c: "sha256:<hex>" of the file at path (new string), kept per
 * file version. */
int rt__image_id(rt_manager *m, const char *path, char **ret);
void rt__images_free(rt_manager *m);

int rt__port_lease(rt_manager *m, uint16_t *ret);
void rt__port_release(rt_manager *m, uint16_t port);
void rt__port_mark(rt_manager *m, uint16_t port);

/* ---- probes -------------------------------------------------------------------------------- */

int rt__probes_start(rt_pod *p, const spec_container *c);
void rt__probes_stop(rt_pod *p);
void rt__probes_stop_one(rt_pod *p, rt_probe_type type);

/* Field 4 of /proc/<pid>/stat, or -1. */
pid_t rt__process_ppid(pid_t pid);
/* Sets NAME=value in env, replacing an entry of that name; *ret_entry
 * (may be NULL) gets the entry, owned by env. */
int rt__env_set(char ***env, const char *name, const char *value, char **ret_entry);
/* /proc/<pid>/environ (NUL-separated), and one variable of it (new string). */
int rt__process_environ(pid_t pid, char **ret, size_t *ret_size);
char *rt__process_getenv(pid_t pid, const char *name);

/* Resolve argv[0] against PATH from envp; new string or -ENOENT. */
int rt__resolve_path(const char *cmd, char *const *envp, char **ret);
