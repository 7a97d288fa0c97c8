/* SPDX-License-Identifier: MIT */

/*
 * The controllers in virtual time: the real agent core and a real SQLite
 * store, with a fake backend whose "processes" start, become ready, and die
 * when the test says. Whole rollouts, rollbacks, pauses, crash loops and
 * deadlines run in milliseconds of real time; after every step the
 * invariants of docs/architecture.md §4.3 are checked.
 */

#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "agent-internal.h"

#define MS USEC_PER_MSEC
#define S USEC_PER_SEC
#define MAX_PROCS 20000

/* ---- allocation failures (docs/conventions.md "Memory") ------------------------------------ */

/* The binary is linked with --wrap for the allocators (CMakeLists.txt): our
 * code's calls come here. While the agent runs a pass (process()), the
 * oom_countdown-th allocation fails, once. jansson allocates through the
 * same wrappers (json_set_alloc_funcs). */
static long oom_countdown;
static bool oom_in_agent, oom_fired;

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

static bool oom_now(void) {
        if (!oom_in_agent || oom_countdown <= 0 || --oom_countdown > 0)
                return false;
        oom_fired = true;
        return true;
}

void *__wrap_malloc(size_t n) {
        return oom_now() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size) {
        return oom_now() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n) {
        return oom_now() ? NULL : __real_realloc(p, n);
}

char *__wrap_strdup(const char *s) {
        return oom_now() ? NULL : __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n) {
        return oom_now() ? NULL : __real_strndup(s, n);
}

/* ---- the fake world ---------------------------------------------------------------- */

typedef struct proc {
        int pid;
        char *pod; /* name */
        char *uid;
        void *ud;    /* the agent's pod_rt, NULL when detached */
        bool handle; /* the agent holds a handle */
        bool alive;
        bool started_sent, ready_sent;
        usec_t start_at, ready_at, exit_at;
        int exit_signal, exit_code;
        bool ignore_term;
        rt_record rec;
        char cid[32];
        char *image; /* the template's command[0], to tell versions apart */
} proc;

typedef struct world {
        store *store;
        agent *agent;
        char dir[64];
        usec_t now;       /* virtual monotonic */
        usec_t wall_base; /* wall = wall_base + now */
        usec_t deadline;  /* the agent's next deadline */
        proc *procs[MAX_PROCS];
        size_t n_procs;
        int next_pid;
        /* behaviour */
        usec_t start_latency, ready_delay, term_delay;
        usec_t crash_after; /* processes of a command ending in "crash" die after this */
        size_t starts;
        usec_t start_times[4096];
        size_t swept;      /* processes the sweep at start-up killed */
        bool check_bounds; /* assert live <= D + surge */
        /* assert no start brings live above D + surge (docs/architecture.md §4.3) */
        bool check_starts;
        size_t start_violations;
        bool check_available; /* assert available >= D - unavailable */
        /* volumes: what the last start and the last update were given
         * (the first file of the first volume, "path=content"), the uids
         * whose volumes were removed, and what mount_problem says */
        char *started_file, *updated_file;
        size_t volume_updates;
        char **removed_volumes;
        const char *mount_problem;
        /* tendd short of descriptors: starts refused with -RT_ESHORT
         * while set, counted in short_refused */
        bool short_fds;
        size_t short_refused;
} world;

static world *W;

static usec_t clk_now(void *u) {
        return ((world *) u)->now;
}

static usec_t clk_wall(void *u) {
        world *w = u;
        return w->wall_base + w->now;
}

static proc *find_proc(world *w, int pid) {
        for (size_t i = 0; i < w->n_procs; i++)
                if (w->procs[i]->pid == pid)
                        return w->procs[i];
        return NULL;
}

static bool ends_with_crash(const char *s) {
        return s && endswith(s, "crash");
}

/* The deployment a pod belongs to (through its ReplicaSet), or NULL. */
static const spec_deployment *deployment_of(world *w, const char *pod) {
        const spec_pod *p = store_get(w->store, STORE_POD, "default", pod);
        const spec_owner_ref *o = p ? spec_meta_controller(&p->metadata) : NULL;
        const spec_replica_set *rs = o ? store_get(w->store, STORE_REPLICA_SET, "default", o->name)
                                       : NULL;
        const spec_owner_ref *ro = rs ? spec_meta_controller(&rs->metadata) : NULL;
        return ro ? store_get(w->store, STORE_DEPLOYMENT, "default", ro->name) : NULL;
}

static size_t live_of(world *w, const spec_deployment *d) {
        size_t n = 0;
        for (size_t k = 0; k < w->n_procs; k++)
                if (w->procs[k]->alive && deployment_of(w, w->procs[k]->pod) == d)
                        n++;
        return n;
}

/* The live bound (docs/architecture.md §4.3), where it is decided: a start never brings
 * a deployment's live processes above replicas + maxSurge. */
static void check_start(world *w, const char *pod) {
        const spec_deployment *d = deployment_of(w, pod);
        int32_t surge, unav;
        size_t live;

        if (!w->check_starts || !d)
                return;
        spec_deployment_fenceposts(d, d->spec.replicas, &surge, &unav);
        live = live_of(w, d) + 1;
        if (live > (size_t) (d->spec.replicas + surge)) {
                w->start_violations++;
                fail_msg("t=%llu ms: starting pod/%s brings deployment/%s to %zu live processes "
                         "> %d + %d",
                         (unsigned long long) (w->now / MS), pod, d->metadata.name, live,
                         d->spec.replicas, surge);
        }
}

static int fb_start_now(void *b, const rt_pod_params *p, void *ud, void **ret, char **err) {
        world *w = b;

        check_start(w, p->name);
        if (w->short_fds) {
                w->short_refused++;
                *err = strdup("tendd is out of file descriptors (its limit 256; ...)");
                return -RT_ESHORT;
        }
        proc *pr = calloc(1, sizeof *pr);
        const spec_container *c = &p->spec->containers[0];

        assert_non_null(pr);
        assert_true(w->n_procs < MAX_PROCS);
        if (streq(c->command[0], "/eagain")) { /* the pod's own (its user's process limit) */
                *err = strdup("runAsUser 1000: Resource temporarily unavailable");
                free(pr);
                return -EAGAIN;
        }
        if (streq(c->command[0], "/nonexistent")) {
                *err = strdup("exec /nonexistent: No such file or directory");
                free(pr);
                return -ENOENT;
        }
        if (p->volumes && p->volumes[0].n) {
                free(w->started_file);
                w->started_file = strprintf("%s=%.*s", p->volumes[0].files[0].path,
                                            (int) p->volumes[0].files[0].size,
                                            (const char *) p->volumes[0].files[0].data);
        }
        pr->pid = ++w->next_pid;
        pr->pod = strdup(p->name);
        pr->uid = strdup(p->uid);
        pr->image = strdup(c->command[0]);
        pr->ud = ud;
        pr->handle = true;
        pr->alive = true;
        pr->start_at = w->now + w->start_latency;
        pr->ready_at = c->readiness_probe ? (ends_with_crash(c->command[0]) ||
                                                             streq(c->command[0], "never-ready")
                                                     ? USEC_INFINITY
                                                     : pr->start_at + w->ready_delay)
                                          : pr->start_at;
        pr->exit_at = ends_with_crash(c->command[0]) ? pr->start_at + w->crash_after
                                                     : USEC_INFINITY;
        pr->exit_code = 1;
        pr->ignore_term = c->args && streq(c->args[0], "ignore-term");
        pr->rec.backend = strdup("process");
        pr->rec.pid = pr->pid;
        pr->rec.start_time = (uint64_t) pr->pid * 7;
        snprintf(pr->cid, sizeof pr->cid, "process://%d", pr->pid);
        w->procs[w->n_procs++] = pr;
        if (w->starts < ELEMENTSOF(w->start_times))
                w->start_times[w->starts] = w->now;
        w->starts++;
        *ret = pr;
        return 0;
}

/* The fake runtime's own bookkeeping is not under test: an injected
 * allocation failure makes the start fail as a real one could (-ENOMEM),
 * and is otherwise kept out of it. */
static int fb_start(void *b, const rt_pod_params *p, void *ud, void **ret, char **err) {
        bool armed = oom_in_agent;
        int r;

        if (oom_now())
                return -ENOMEM;
        oom_in_agent = false;
        r = fb_start_now(b, p, ud, ret, err);
        oom_in_agent = armed;
        return r;
}

static int fb_adopt(void *b, const rt_pod_params *p, const rt_record *r, void *ud, void **ret,
                    char **err) {
        world *w = b;
        proc *pr = find_proc(w, r->pid);

        if (!pr || !pr->alive || pr->rec.start_time != r->start_time) {
                *err = strprintf("pid %d is gone", r->pid);
                return -ESRCH;
        }
        pr->ud = ud;
        pr->handle = true;
        pr->started_sent = false; /* adoption reports started again */
        pr->ready_sent = false;
        pr->start_at = w->now;
        if (pr->ready_at != USEC_INFINITY)
                pr->ready_at = w->now; /* probes restart; it was ready */
        *ret = pr;
        return 0;
}

/* A process that runs with this pod's uid (what a crash between spawn and
 * the record's commit leaves behind). */
static int fb_find(void *b, const rt_pod_params *p, rt_record *ret) {
        world *w = b;
        const char *uid = p->uid;
        for (size_t i = 0; i < w->n_procs; i++) {
                proc *pr = w->procs[i];
                if (pr->alive && streq(pr->uid, uid)) {
                        *ret = (rt_record){ .backend = strdup("process"),
                                            .pid = pr->pid,
                                            .start_time = pr->rec.start_time };
                        return 0;
                }
        }
        return -ESRCH;
}

static int fb_stop(void *h, usec_t grace) {
        proc *pr = h;
        usec_t at = W->now + (pr->ignore_term ? grace : MIN(W->term_delay, grace));
        if (pr->alive) {
                pr->exit_at = MIN(pr->exit_at, at);
                pr->exit_signal = pr->ignore_term ? SIGKILL : SIGTERM;
        }
        return 0;
}

static int fb_signal(void *h, int sig) {
        proc *pr = h;
        if (pr->alive && sig == SIGKILL) {
                pr->exit_at = W->now;
                pr->exit_signal = SIGKILL;
        }
        return 0;
}

static void fb_free(void *h) {
        proc *pr = h;
        pr->ud = NULL;
        pr->handle = false;
}

static const rt_record *fb_record(void *h) {
        return &((proc *) h)->rec;
}

static const char *fb_cid(void *h) {
        return ((proc *) h)->cid;
}

/* As the process runtime: a process may start before its pass is
 * committed, because a new agent kills what runs for no pod it adopted. */
static bool fb_early_start(const spec_pod_spec *s) {
        return true;
}

static void fb_sweep_orphans(void *b) {
        world *w = b;
        for (size_t i = 0; i < w->n_procs; i++)
                if (w->procs[i]->alive && !w->procs[i]->handle) {
                        w->procs[i]->exit_at = w->now;
                        w->procs[i]->exit_signal = SIGKILL;
                        w->swept++;
                }
}

static int fb_update_volumes(void *h, const rt_pod_params *p, char **err) {
        W->volume_updates++;
        free(W->updated_file);
        W->updated_file = p->volumes && p->volumes[0].n
                                  ? strprintf("%s=%.*s", p->volumes[0].files[0].path,
                                              (int) p->volumes[0].files[0].size,
                                              (const char *) p->volumes[0].files[0].data)
                                  : strdup("");
        return 1;
}

static void fb_remove_volumes(void *b, const char *uid) {
        assert_int_equal(strv_extend(&((world *) b)->removed_volumes, uid), 0);
}

static const char *fb_mount_problem(void) {
        return W->mount_problem;
}

static const agent_backend fake_backend = {
        .start = fb_start,
        .adopt = fb_adopt,
        .find = fb_find,
        .early_start = fb_early_start,
        .sweep_orphans = fb_sweep_orphans,
        .stop = fb_stop,
        .signal = fb_signal,
        .free = fb_free,
        .record = fb_record,
        .container_id = fb_cid,
        .update_volumes = fb_update_volumes,
        .remove_volumes = fb_remove_volumes,
        .mount_problem = fb_mount_problem,
};

static agent_clock vclock;

static void new_agent(world *w) {
        vclock = (agent_clock){ .now = clk_now, .wall = clk_wall, .userdata = w };
        assert_int_equal(agent_new(&(agent_config){ .store = w->store,
                                                    .backend = &fake_backend,
                                                    .backend_data = w,
                                                    .clock = &vclock,
                                                    .node_name = "box" },
                                   &w->agent),
                         0);
        assert_int_equal(agent_start(w->agent), 0);
}

static world *world_new(void) {
        world *w = calloc(1, sizeof *w);
        char *db, *err = NULL;

        assert_non_null(w);
        snprintf(w->dir, sizeof w->dir, "/tmp/tend-ctl-XXXXXX");
        assert_non_null(mkdtemp(w->dir));
        db = strprintf("%s/tend.db", w->dir);
        if (store_open(db, &w->store, &err) < 0)
                fail_msg("%s", err);
        free(db);
        w->wall_base = 1764688000ULL * S;
        w->now = 1000 * S;
        w->start_latency = 5 * MS;
        w->ready_delay = 500 * MS;
        w->term_delay = 100 * MS;
        w->crash_after = 100 * MS;
        w->deadline = USEC_INFINITY;
        w->check_starts = true;
        W = w;
        new_agent(w);
        return w;
}

static void world_free(world *w) {
        char cmd[128];

        free(w->started_file);
        free(w->updated_file);
        strv_free(w->removed_volumes);

        agent_free(w->agent);
        store_close(w->store);
        for (size_t i = 0; i < w->n_procs; i++) {
                rt_record_done(&w->procs[i]->rec);
                free(w->procs[i]->pod);
                free(w->procs[i]->uid);
                free(w->procs[i]->image);
                free(w->procs[i]);
        }
        snprintf(cmd, sizeof cmd, "rm -rf %s", w->dir);
        assert_int_equal(system(cmd), 0);
        free(w);
        W = NULL;
}

/* ---- looking at the world ----------------------------------------------------------------- */

static const spec_deployment *dep(world *w, const char *name) {
        return store_get(w->store, STORE_DEPLOYMENT, "default", name);
}

static size_t count_pods(world *w, const char *image, bool alive_only) {
        size_t n = 0;
        for (size_t i = 0; i < w->n_procs; i++)
                if (w->procs[i]->alive && (!image || streq(w->procs[i]->image, image)))
                        n++;
        (void) alive_only;
        return n;
}

/* Pods of a deployment's RSs by phase: available (ready for minReadySeconds
 * — approximated by the RS status sum), live processes. */
static void invariants(world *w) {
        const void *const *items;
        size_t nd = store_list(w->store, STORE_DEPLOYMENT, &items);

        for (size_t i = 0; i < nd; i++) {
                const spec_deployment *d = items[i];
                int32_t surge, unav;
                size_t live = 0;

                spec_deployment_fenceposts(d, d->spec.replicas, &surge, &unav);
                /* Live processes belong to pods of this deployment's RSs. */
                for (size_t k = 0; k < w->n_procs; k++) {
                        proc *pr = w->procs[k];
                        const spec_pod *p;
                        if (!pr->alive)
                                continue;
                        p = store_get(w->store, STORE_POD, "default", pr->pod);
                        if (!p || !startswith(pr->pod, d->metadata.name))
                                continue;
                        live++;
                }
                if (w->check_bounds && d->spec.strategy.type == SPEC_STRATEGY_ROLLING_UPDATE &&
                    live > (size_t) (d->spec.replicas + surge))
                        fail_msg("t=%llu ms: deployment/%s runs %zu processes > %d + %d",
                                 (unsigned long long) (w->now / MS), d->metadata.name, live,
                                 d->spec.replicas, surge);
                if (w->check_available && d->status.available_replicas < d->spec.replicas - unav)
                        fail_msg("t=%llu ms: deployment/%s has %d available < %d - %d",
                                 (unsigned long long) (w->now / MS), d->metadata.name,
                                 d->status.available_replicas, d->spec.replicas, unav);
        }
}

/* Fires every fake-process event due at w->now. */
static bool fire(world *w) {
        bool any = false;

        for (size_t i = 0; i < w->n_procs; i++) {
                proc *pr = w->procs[i];
                if (!pr->alive)
                        continue;
                if (pr->exit_at <= w->now) {
                        pr->alive = false;
                        if (pr->ud) {
                                rt_exit e = { .finished_at = clk_wall(w), .finished_mono = w->now };
                                if (pr->exit_signal) {
                                        e.kind = RT_EXIT_SIGNAL;
                                        e.signal = pr->exit_signal;
                                        e.reason = "Killed";
                                } else {
                                        e.kind = RT_EXIT_CODE;
                                        e.code = pr->exit_code;
                                        e.reason = pr->exit_code ? "Error" : "Completed";
                                }
                                agent_pod_exited(w->agent, pr->ud, &e);
                        }
                        any = true;
                        continue;
                }
                if (pr->ud && !pr->started_sent && pr->start_at <= w->now) {
                        pr->started_sent = true;
                        agent_pod_started(w->agent, pr->ud);
                        any = true;
                }
                if (pr->ud && pr->started_sent && !pr->ready_sent && pr->ready_at <= w->now) {
                        pr->ready_sent = true;
                        agent_pod_probe(w->agent, pr->ud, RT_PROBE_READINESS, true, NULL);
                        any = true;
                }
        }
        return any;
}

static usec_t next_event(world *w) {
        usec_t next = w->deadline;
        for (size_t i = 0; i < w->n_procs; i++) {
                proc *pr = w->procs[i];
                if (!pr->alive)
                        continue;
                next = MIN(next, pr->exit_at);
                if (pr->ud && !pr->started_sent)
                        next = MIN(next, pr->start_at);
                if (pr->ud && pr->started_sent && !pr->ready_sent)
                        next = MIN(next, pr->ready_at);
        }
        return next;
}

static void process(world *w) {
        oom_in_agent = true;
        w->deadline = agent_process(w->agent);
        oom_in_agent = false;
        invariants(w);
}

/* Advances virtual time by dt, firing events and running the agent at every
 * point where something happens. */
static void step(world *w, usec_t dt) {
        usec_t target = w->now + dt;

        process(w);
        for (int guard = 0; guard < 1000000; guard++) {
                usec_t next = next_event(w);
                if (next > target)
                        break;
                w->now = MAX(w->now, next);
                fire(w);
                process(w);
        }
        w->now = target;
        fire(w);
        process(w);
}

/* Steps until pred() holds (at most `limit` of virtual time). */
static bool step_until(world *w, bool (*pred)(world *, const char *), const char *arg,
                       usec_t limit) {
        usec_t end = w->now + limit;
        while (!pred(w, arg) && w->now < end)
                step(w, 10 * MS);
        return pred(w, arg);
}

/* Rolled out, and the old pods' processes are gone too (status counts
 * active pods only: terminating ones may still run for a moment). */
static bool settled(world *w, const char *name);

static bool rolled_out(world *w, const char *name) {
        char msg[256];
        const spec_deployment *d = dep(w, name);
        return d && spec_rollout_status(d, 0, msg, sizeof msg) == SPEC_ROLLOUT_DONE;
}

static bool settled(world *w, const char *name) {
        const spec_deployment *d = dep(w, name);
        size_t live = 0;
        if (!rolled_out(w, name))
                return false;
        for (size_t i = 0; i < w->n_procs; i++)
                live += w->procs[i]->alive && startswith(w->procs[i]->pod, name);
        return live == (size_t) d->spec.replicas;
}

/* ---- manifests ------------------------------------------------------------------------------ */

static spec_deployment *manifest(const char *name, int replicas, const char *image,
                                 const char *extra_spec, const char *extra_container) {
        char *yaml = strprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: %s}\n"
                               "spec:\n  replicas: %d\n  selector: {matchLabels: {app: %s}}\n%s"
                               "  template:\n    metadata: {labels: {app: %s}}\n    spec:\n"
                               "      terminationGracePeriodSeconds: 5\n      containers:\n"
                               "      - name: main\n        command: [\"%s\"]\n"
                               "        readinessProbe: {exec: {command: [/bin/true]}}\n%s",
                               name, replicas, name, extra_spec ?: "", name, image,
                               extra_container ?: "");
        spec_manifest m = {};
        spec_errors errs = {};
        spec_deployment *d;

        if (spec_manifest_add_buffer(&m, "test", yaml, strlen(yaml), &errs) < 0) {
                spec_errors_print(&errs, stderr);
                fail_msg("bad manifest:\n%s", yaml);
        }
        d = m.items[0].deployment;
        m.items[0].object = m.items[0].deployment = NULL;
        spec_manifest_done(&m);
        free(yaml);
        return d;
}

static void apply(world *w, spec_deployment *d) {
        spec_errors errs = {};
        int r = agent_apply(w->agent, &d, 1, &errs, NULL);
        if (r < 0) {
                spec_errors_print(&errs, stderr);
                fail_msg("apply failed: %d", r);
        }
        spec_deployment_free(d);
        spec_errors_done(&errs);
}

static size_t count_rs(world *w, const char *deployment, bool nonzero_only) {
        const void *const *items;
        size_t n = store_list(w->store, STORE_REPLICA_SET, &items), c = 0;
        const spec_deployment *d = dep(w, deployment);
        for (size_t i = 0; i < n; i++) {
                const spec_replica_set *rs = items[i];
                if (d && spec_meta_owned_by(&rs->metadata, d->metadata.uid) &&
                    (!nonzero_only || rs->spec.replicas > 0))
                        c++;
        }
        return c;
}

static const spec_event *find_event(world *w, const char *reason, const char *contains) {
        const void *const *items;
        size_t n = store_list(w->store, STORE_EVENT, &items);
        for (size_t i = 0; i < n; i++) {
                const spec_event *e = items[i];
                if (streq_ptr(e->reason, reason) && (!contains || strstr(e->message, contains)))
                        return e;
        }
        return NULL;
}

/* ---- tests -------------------------------------------------------------------------------------
 */

static void test_first_rollout(void **state) {
        world *w = world_new();
        const spec_deployment *d;
        const spec_condition *c;

        apply(w, manifest("web", 3, "web-v1", NULL, NULL));
        assert_true(step_until(w, rolled_out, "web", 10 * S));
        d = dep(w, "web");
        assert_int_equal(d->status.replicas, 3);
        assert_int_equal(d->status.ready_replicas, 3);
        assert_int_equal(d->status.available_replicas, 3);
        assert_int_equal(d->status.updated_replicas, 3);
        assert_int_equal(d->status.observed_generation, 1);
        assert_string_equal(spec_map_get(&d->metadata.annotations, SPEC_ANN_REVISION), "1");
        c = spec_get_condition(d->status.conditions, d->status.n_conditions, "Available");
        assert_string_equal(c->status, "True");
        c = spec_get_condition(d->status.conditions, d->status.n_conditions, "Progressing");
        assert_string_equal(c->reason, "NewReplicaSetAvailable");
        assert_int_equal(count_pods(w, "web-v1", true), 3);
        assert_int_equal(count_rs(w, "web", false), 1);
        assert_non_null(find_event(w, "ScalingReplicaSet", "from 0 to 3"));
        /* The pods: Running, Ready, named <rs>-<5>, owned by the RS. */
        const void *const *items;
        size_t n = store_list(w->store, STORE_POD, &items);
        assert_int_equal(n, 3);
        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                assert_int_equal(p->status.phase, SPEC_POD_RUNNING);
                assert_true(spec_pod_ready(p, NULL));
                assert_string_equal(p->spec.node_name, "box");
                assert_non_null(spec_map_get(&p->metadata.labels, SPEC_LABEL_POD_TEMPLATE_HASH));
                assert_non_null(
                        startswith(p->status.container_statuses[0].container_id, "process://"));
        }
        world_free(w);
}

static void dump(world *w) {
        const void *const *items;
        size_t n = store_list(w->store, STORE_REPLICA_SET, &items);
        for (size_t i = 0; i < n; i++) {
                const spec_replica_set *rs = items[i];
                fprintf(stderr, "rs %s %s spec=%d st=%d ready=%d avail=%d term=%d rev=%s\n",
                        rs->metadata.name, rs->spec.template.spec.containers[0].command[0],
                        rs->spec.replicas, rs->status.replicas, rs->status.ready_replicas,
                        rs->status.available_replicas, rs->status.terminating_replicas,
                        strna(spec_map_get(&rs->metadata.annotations, SPEC_ANN_REVISION)));
        }
        n = store_list(w->store, STORE_POD, &items);
        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                fprintf(stderr, "pod %s phase=%d del=%d ready=%d\n", p->metadata.name,
                        p->status.phase, p->metadata.deletion_timestamp != 0,
                        spec_pod_ready(p, NULL));
        }
        for (size_t i = 0; i < w->n_procs; i++)
                if (w->procs[i]->alive)
                        fprintf(stderr, "proc %d %s %s handle=%d\n", w->procs[i]->pid,
                                w->procs[i]->pod, w->procs[i]->image, w->procs[i]->handle);
        const spec_deployment *d = dep(w, "web");
        fprintf(stderr, "dep D=%d st=%d upd=%d avail=%d\n", d->spec.replicas, d->status.replicas,
                d->status.updated_replicas, d->status.available_replicas);
}

static bool has_failed_pod(world *w, const char *unused) {
        const void *const *items;
        size_t n = store_list(w->store, STORE_POD, &items);
        for (size_t i = 0; i < n; i++)
                if (((const spec_pod *) items[i])->status.phase == SPEC_POD_FAILED)
                        return true;
        return false;
}

/* The last termination a live pod carries on from the dead pod it replaced
 * (lastState), or NULL. */
static const spec_state_terminated *carried_death(world *w) {
        const void *const *items;
        size_t n = store_list(w->store, STORE_POD, &items);
        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                if (p->status.phase != SPEC_POD_FAILED && p->status.n_container_statuses &&
                    p->status.container_statuses[0].last_state.terminated)
                        return p->status.container_statuses[0].last_state.terminated;
        }
        return NULL;
}

static void test_kill_replaced(void **state) {
        world *w = world_new();
        proc *victim = NULL;
        const spec_pod *failed = NULL;

        apply(w, manifest("web", 3, "web-v1", NULL, NULL));
        assert_true(step_until(w, rolled_out, "web", 10 * S));
        for (size_t i = 0; i < w->n_procs; i++)
                if (w->procs[i]->alive)
                        victim = w->procs[i];
        size_t before = w->n_procs;
        fb_signal(victim, SIGKILL); /* kill -9 */
        fire(w);
        process(w);
        /* Replaced in the same pass: a new process exists already, and the
         * dead pod is gone (its replacement carries it on). */
        assert_int_equal(w->n_procs, before + 1);
        failed = store_get(w->store, STORE_POD, "default", victim->pod);
        assert_null(failed);
        assert_false(has_failed_pod(w, NULL));
        const spec_state_terminated *t = carried_death(w);
        assert_non_null(t);
        assert_int_equal(t->signal, 9);
        assert_int_equal(t->exit_code, 137);
        assert_string_equal(t->reason, "Killed");
        assert_non_null(find_event(w, "ProcessExited", "killed by signal 9"));
        /* The replacement inherits the lineage: restarts 1, lastState. */
        proc *repl = w->procs[before];
        const spec_pod *rp = store_get(w->store, STORE_POD, "default", repl->pod);
        assert_int_equal(rp->status.container_statuses[0].restart_count, 1);
        assert_non_null(rp->status.container_statuses[0].last_state.terminated);
        /* A pod that ran a long time: replaced at once, no back-off. */
        assert_null(spec_map_get(&rp->metadata.annotations, AGENT_ANN_START_AFTER));
        assert_true(step_until(w, rolled_out, "web", 10 * S));
        assert_int_equal(count_pods(w, "web-v1", true), 3);
        world_free(w);
}

static void test_rolling_update_bounds(void **state) {
        world *w = world_new();
        const spec_deployment *d;

        apply(w, manifest("web", 10, "web-v1", NULL, NULL));
        assert_true(step_until(w, rolled_out, "web", 20 * S));
        w->check_bounds = true;
        w->check_available = true;
        apply(w, manifest("web", 10, "web-v2", NULL, NULL));
        assert_true(step_until(w, rolled_out, "web", 60 * S));
        d = dep(w, "web");
        assert_string_equal(spec_map_get(&d->metadata.annotations, SPEC_ANN_REVISION), "2");
        assert_int_equal(count_pods(w, "web-v2", true), 10);
        assert_int_equal(count_pods(w, "web-v1", true), 0);
        assert_int_equal(count_rs(w, "web", false), 2);
        assert_int_equal(count_rs(w, "web", true), 1);
        assert_int_equal(d->status.updated_replicas, 10);

        /* maxSurge 0: never one process more than D, even with slow stops. */
        w->term_delay = 2 * S;
        apply(w, manifest("web", 10, "web-v3",
                          "  strategy: {rollingUpdate: {maxSurge: 0, maxUnavailable: 2}}\n", NULL));
        assert_true(step_until(w, rolled_out, "web", 120 * S));
        assert_int_equal(count_pods(w, "web-v3", true), 10);
        world_free(w);
}

static void test_rollback(void **state) {
        world *w = world_new();
        const spec_deployment *d;
        const spec_replica_set *rs;
        int64_t rev;
        char *err = NULL;

        apply(w, manifest("web", 3, "web-v1", NULL, NULL));
        assert_true(step_until(w, settled, "web", 10 * S));
        apply(w, manifest("web", 3, "web-v2", NULL, NULL));
        assert_true(step_until(w, settled, "web", 20 * S));

        /* A dry run says where it would go, and writes nothing. */
        uint64_t before = store_resource_version(w->store);
        rev = 0;
        assert_int_equal(agent_rollback(w->agent, "default", "web", 0, true, &rev, &err), 0);
        assert_int_equal(rev, 1);
        assert_int_equal(store_resource_version(w->store), before);
        assert_false(agent_has_work(w->agent));
        assert_string_equal(dep(w, "web")->spec.template.spec.containers[0].command[0], "web-v2");

        assert_int_equal(agent_rollback(w->agent, "default", "web", 0, false, &rev, &err), 0);
        assert_int_equal(rev, 1);
        assert_true(step_until(w, settled, "web", 20 * S));
        d = dep(w, "web");
        assert_string_equal(d->spec.template.spec.containers[0].command[0], "web-v1");
        assert_int_equal(count_pods(w, "web-v1", true), 3);
        assert_int_equal(count_pods(w, "web-v2", true), 0);
        /* Revision 1 was revived and renumbered to 3. */
        assert_string_equal(spec_map_get(&d->metadata.annotations, SPEC_ANN_REVISION), "3");
        assert_int_equal(count_rs(w, "web", false), 2);
        const void *const *items;
        size_t n = store_list(w->store, STORE_REPLICA_SET, &items);
        bool found = false;
        for (size_t i = 0; i < n; i++) {
                rs = items[i];
                if (rs->spec.replicas == 3) {
                        assert_string_equal(
                                spec_map_get(&rs->metadata.annotations, SPEC_ANN_REVISION), "3");
                        assert_string_equal(
                                spec_map_get(&rs->metadata.annotations, SPEC_ANN_REVISION_HISTORY),
                                "1");
                        found = true;
                }
        }
        assert_true(found);

        /* Two undos flip between the same two templates. */
        assert_int_equal(agent_rollback(w->agent, "default", "web", 0, false, &rev, &err), 0);
        assert_int_equal(rev, 2);
        assert_true(step_until(w, settled, "web", 20 * S));
        assert_int_equal(count_pods(w, "web-v2", true), 3);

        /* Errors, in kubectl's words, and nothing changes. */
        assert_int_equal(agent_rollback(w->agent, "default", "web", 9, false, &rev, &err), -ENOENT);
        assert_string_equal(err, "unable to find specified revision 9 in history");
        free(err);
        assert_int_equal(agent_rollback(w->agent, "default", "web", 4, false, &rev, &err),
                         -EALREADY);
        assert_non_null(strstr(err, "skipped rollback"));
        free(err);
        assert_int_equal(agent_pause(w->agent, "default", "web", true), 0);
        assert_int_equal(agent_rollback(w->agent, "default", "web", 0, false, &rev, &err), -EBUSY);
        assert_non_null(strstr(err, "you cannot rollback a paused deployment"));
        free(err);
        world_free(w);
}

static void test_history_limit(void **state) {
        world *w = world_new();
        char image[32];

        apply(w, manifest("web", 1, "web-0", "  revisionHistoryLimit: 10\n", NULL));
        assert_true(step_until(w, rolled_out, "web", 10 * S));
        for (int i = 1; i <= 50; i++) {
                snprintf(image, sizeof image, "web-%d", i);
                apply(w, manifest("web", 1, image, "  revisionHistoryLimit: 10\n", NULL));
                assert_true(step_until(w, rolled_out, "web", 20 * S));
        }
        step(w, 1 * S);
        /* Exactly 10 old ReplicaSets plus the current one. */
        assert_int_equal(count_rs(w, "web", false), 11);
        assert_string_equal(spec_map_get(&dep(w, "web")->metadata.annotations, SPEC_ANN_REVISION),
                            "51");
        /* The oldest surviving revision is 41. */
        char *err = NULL;
        int64_t rev;
        assert_int_equal(agent_rollback(w->agent, "default", "web", 40, false, &rev, &err),
                         -ENOENT);
        free(err);
        err = NULL;
        assert_int_equal(agent_rollback(w->agent, "default", "web", 41, false, &rev, &err), 0);
        world_free(w);
}

static void test_crash_loop_backoff(void **state) {
        world *w = world_new();
        const void *const *items;
        size_t n;
        bool saw_backoff = false;

        apply(w, manifest("crashy", 1, "/bin/crash", "  progressDeadlineSeconds: 3600\n", NULL));
        step(w, 20 * S);
        /* Starts at t0, then +0 (first young death replaced at once), +1 s,
         * +2 s, +4 s, +8 s: the gaps between starts grow. */
        assert_true(w->starts >= 5);
        for (size_t i = 2; i + 1 < MIN(w->starts, (size_t) 6); i++) {
                usec_t gap = w->start_times[i + 1] - w->start_times[i];
                usec_t prev = w->start_times[i] - w->start_times[i - 1];
                if (!(gap > prev))
                        fail_msg("start %zu: gap %llu ms not longer than %llu ms", i,
                                 (unsigned long long) (gap / MS), (unsigned long long) (prev / MS));
        }
        assert_true(w->start_times[3] - w->start_times[2] >= 900 * MS);
        /* The waiting pod shows CrashLoopBackOff with the last exit. */
        n = store_list(w->store, STORE_POD, &items);
        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                const spec_state_waiting *wt = p->status.container_statuses[0].state.waiting;
                if (wt && streq_ptr(wt->reason, "CrashLoopBackOff")) {
                        saw_backoff = true;
                        assert_non_null(strstr(wt->message, "last exit: code 1"));
                        assert_true(p->status.container_statuses[0].restart_count >= 2);
                }
        }
        assert_true(saw_backoff);
        /* No dead pod is kept once replaced: the replacement carries it on
         * (a selector finds only the live pod, kubectl wait -l works). */
        size_t failed = 0;
        for (size_t i = 0; i < n; i++)
                failed += ((const spec_pod *) items[i])->status.phase == SPEC_POD_FAILED;
        assert_int_equal(failed, 0);
        assert_int_equal(n, 1);
        assert_non_null(find_event(w, "BackOff", NULL));

        /* The cap: after many deaths the delay stops at 5 minutes. */
        step(w, 3600 * S);
        assert_true(w->starts < 40);
        usec_t last_gap = w->start_times[MIN(w->starts, (size_t) 4096) - 1] -
                          w->start_times[MIN(w->starts, (size_t) 4096) - 2];
        assert_true(last_gap <= 301 * S && last_gap >= 299 * S);

        /* A fixed template that stays up: back to normal. */
        apply(w, manifest("crashy", 1, "/bin/ok", "  progressDeadlineSeconds: 3600\n", NULL));
        assert_true(step_until(w, rolled_out, "crashy", 400 * S));
        world_free(w);
}

/* ---- crash-loop back-off, per replica ----------------------------------------------------- */

static proc *proc_of_pod(world *w, const char *pod) {
        for (size_t i = 0; i < w->n_procs; i++)
                if (w->procs[i]->alive && streq(w->procs[i]->pod, pod))
                        return w->procs[i];
        return NULL;
}

/* The pod that carries the lineage of the dead pod `name` on. */
static const spec_pod *successor(world *w, const char *name) {
        const void *const *items;
        size_t n = store_list(w->store, STORE_POD, &items);
        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                if (streq_ptr(spec_map_get(&p->metadata.annotations, AGENT_ANN_PREDECESSOR), name))
                        return p;
        }
        return NULL;
}

static bool backing_off(const spec_pod *p) {
        const spec_state_waiting *wt = p->status.n_container_statuses
                                               ? p->status.container_statuses[0].state.waiting
                                               : NULL;
        return wt && streq_ptr(wt->reason, "CrashLoopBackOff");
}

static size_t count_backing_off(world *w) {
        const void *const *items;
        size_t n = store_list(w->store, STORE_POD, &items), k = 0;
        for (size_t i = 0; i < n; i++)
                k += backing_off(items[i]) && !spec_pod_terminal(items[i]);
        return k;
}

/* Kills the process of pod `name` and runs ONE pass: returns how many
 * processes that pass started. */
static size_t kill_and_pass(world *w, proc *victim) {
        size_t before = w->starts;
        fb_signal(victim, SIGKILL);
        fire(w);
        process(w);
        return w->starts - before;
}

/* A mass failure: every replica killed at once is replaced in the same pass,
 * no back-off — and again 3 s later, and again (young deaths, but each
 * replica's first and second in a row). Only a replica's own third young
 * death in a row makes it wait, and then each waits for itself: 1 s. More
 * than a burst (500) of them, so the lineage also survives the second
 * burst: every replacement has the restart count of its own line. */
static void test_mass_failure_no_backoff(void **state) {
        world *w = world_new();
        const size_t N = 600;

        apply(w, manifest("web", (int) N, "web-v1", NULL, NULL));
        assert_true(step_until(w, settled, "web", 30 * S));
        step(w, 20 * S); /* a deployment in use: its replicas have run a while */
        for (int round = 0; round < 4; round++) {
                size_t before = w->starts, killed = 0;
                for (size_t i = 0; i < w->n_procs; i++)
                        if (w->procs[i]->alive) {
                                fb_signal(w->procs[i], SIGKILL);
                                killed++;
                        }
                assert_int_equal(killed, N);
                fire(w);
                process(w); /* one pass */
                const void *const *items;
                size_t n = store_list(w->store, STORE_POD, &items), live = 0;
                for (size_t i = 0; i < n; i++) {
                        const spec_pod *p = items[i];
                        if (spec_pod_terminal(p))
                                continue;
                        live++;
                        assert_int_equal(p->status.container_statuses[0].restart_count, round + 1);
                        assert_int_equal(agent__pod_streak(p), round == 0 ? 0 : round);
                }
                assert_int_equal(live, N);
                if (round < 3) {
                        /* all N created and started in that one pass */
                        assert_int_equal(w->starts - before, N);
                        assert_int_equal(count_backing_off(w), 0);
                        step(w, 3 * S);
                        continue;
                }
                /* The fourth: each replica's third young death in a row. */
                assert_int_equal(w->starts - before, 0);
                assert_int_equal(count_backing_off(w), N);
                step(w, 900 * MS);
                assert_int_equal(w->starts - before, 0);
                step(w, 200 * MS);
                assert_int_equal(w->starts - before, N);
        }
        world_free(w);
}

/* What a chaos tool does: kill the oldest of 10 replicas every 0.3 s. Every
 * kill is replaced in its own pass; the deaths of different replicas never
 * add up to a back-off (each line dies young twice in 30 kills). */
static void test_round_robin_kills(void **state) {
        world *w = world_new();

        apply(w, manifest("web", 10, "web-v1", NULL, NULL));
        assert_true(step_until(w, settled, "web", 10 * S));
        step(w, 20 * S);
        for (int k = 0; k < 30; k++) {
                proc *oldest = NULL;
                for (size_t i = 0; i < w->n_procs; i++)
                        if (w->procs[i]->alive &&
                            (!oldest || w->procs[i]->start_at < oldest->start_at))
                                oldest = w->procs[i];
                assert_non_null(oldest);
                if (kill_and_pass(w, oldest) != 1)
                        fail_msg("kill %d: pod %s not replaced in the same pass", k, oldest->pod);
                const spec_pod *next = successor(w, oldest->pod);
                assert_non_null(next);
                assert_null(spec_map_get(&next->metadata.annotations, AGENT_ANN_START_AFTER));
                step(w, 300 * MS);
        }
        assert_int_equal(count_backing_off(w), 0);
        assert_int_equal(count_pods(w, NULL, true), 10);
        world_free(w);
}

/* One replica keeps dying young among healthy ones: it backs off alone. */
static void test_one_replica_backs_off_alone(void **state) {
        world *w = world_new();
        const spec_pod *p;
        char name[64];
        proc *line;

        apply(w, manifest("web", 5, "web-v1", NULL, NULL));
        assert_true(step_until(w, settled, "web", 10 * S));
        step(w, 20 * S);
        line = w->procs[0];
        /* An old death, then two young ones: all replaced at once. */
        for (int k = 0; k < 3; k++) {
                snprintf(name, sizeof name, "%s", line->pod);
                assert_int_equal(kill_and_pass(w, line), 1);
                step(w, 200 * MS);
                line = proc_of_pod(w, successor(w, name)->metadata.name);
                assert_non_null(line);
        }
        /* Its third young death in a row: its replacement waits 1 s... */
        snprintf(name, sizeof name, "%s", line->pod);
        assert_int_equal(kill_and_pass(w, line), 0);
        p = successor(w, name);
        assert_true(backing_off(p));
        assert_non_null(strstr(p->status.container_statuses[0].state.waiting->message,
                               "killed by signal 9"));
        assert_non_null(find_event(w, "BackOff", "next start in 1s"));
        snprintf(name, sizeof name, "%s", p->metadata.name);
        /* ... while a healthy replica killed meanwhile comes back at once. */
        for (size_t i = 0; i < w->n_procs; i++)
                if (w->procs[i]->alive) {
                        assert_int_equal(kill_and_pass(w, w->procs[i]), 1);
                        break;
                }
        assert_int_equal(count_backing_off(w), 1);
        step(w, 900 * MS);
        assert_null(proc_of_pod(w, name));
        step(w, 200 * MS);
        line = proc_of_pod(w, name);
        assert_non_null(line);
        /* The next young death waits 2 s. */
        assert_int_equal(kill_and_pass(w, line), 0);
        p = successor(w, name);
        snprintf(name, sizeof name, "%s", p->metadata.name);
        step(w, 1900 * MS);
        assert_null(proc_of_pod(w, name));
        step(w, 200 * MS);
        assert_non_null(proc_of_pod(w, name));
        assert_true(step_until(w, settled, "web", 10 * S));
        world_free(w);
}

/* A template whose every replica crashes at start: each replica backs off
 * from its own third death, not the ReplicaSet as a whole. */
static void test_crashing_template_each_backs_off(void **state) {
        world *w = world_new();
        const void *const *items;

        apply(w, manifest("crashy", 3, "/bin/crash", "  progressDeadlineSeconds: 3600\n", NULL));
        step(w, 500 * MS);
        /* start, die 0.1 s later, twice replaced at once: 3 starts a line */
        assert_int_equal(w->starts, 9);
        assert_int_equal(count_backing_off(w), 3);
        size_t n = store_list(w->store, STORE_POD, &items);
        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                if (spec_pod_terminal(p))
                        continue;
                assert_true(backing_off(p));
                assert_int_equal(agent__pod_streak(p), 3);
                assert_int_equal(p->status.container_statuses[0].restart_count, 3);
                assert_non_null(strstr(p->status.container_statuses[0].state.waiting->message,
                                       "last exit: code 1 (Error)"));
        }
        step(w, 1 * S);
        assert_int_equal(w->starts, 12); /* each line's fourth start, 1 s later */
        step(w, 20 * S);
        /* 1 + 2 + 4 + 8 s of waits: 4 more starts a line at most */
        assert_true(w->starts <= 24);
        world_free(w);
}

/* A replica that stays up a minute (ready) is forgiven its streak; one up
 * between 10 s and a minute is replaced at once but not forgiven. */
static void test_streak_cleared_after_a_minute(void **state) {
        world *w = world_new();
        char name[64];
        proc *line;
        const spec_pod *p;

        apply(w, manifest("web", 1, "web-v1", NULL, NULL));
        assert_true(step_until(w, settled, "web", 10 * S));
        line = w->procs[0];
        /* three young deaths in a row: streak 3 */
        for (int k = 0; k < 3; k++) {
                snprintf(name, sizeof name, "%s", line->pod);
                (void) kill_and_pass(w, line);
                step(w, 1500 * MS);
                line = proc_of_pod(w, successor(w, name)->metadata.name);
                assert_non_null(line);
        }
        p = store_get(w->store, STORE_POD, "default", line->pod);
        assert_int_equal(agent__pod_streak(p), 3);
        /* 30 s up: replaced at once, streak kept */
        step(w, 30 * S);
        snprintf(name, sizeof name, "%s", line->pod);
        assert_int_equal(kill_and_pass(w, line), 1);
        p = successor(w, name);
        assert_int_equal(agent__pod_streak(p), 3);
        /* 61 s up and ready: replaced at once, streak cleared */
        line = proc_of_pod(w, p->metadata.name);
        step(w, 61 * S);
        snprintf(name, sizeof name, "%s", line->pod);
        assert_int_equal(kill_and_pass(w, line), 1);
        p = successor(w, name);
        assert_int_equal(agent__pod_streak(p), 0);
        assert_null(spec_map_get(&p->metadata.annotations, AGENT_ANN_CRASH_STREAK));
        /* and two young deaths are free again */
        for (int k = 0; k < 2; k++) {
                line = proc_of_pod(w, p->metadata.name);
                step(w, 100 * MS);
                snprintf(name, sizeof name, "%s", line->pod);
                assert_int_equal(kill_and_pass(w, line), 1);
                p = successor(w, name);
        }
        world_free(w);
}

/* tend.io/crash-backoff: off switches the back-off off; tuned, it sets the
 * waits; switched off while a replica waits, the replica starts now. */
static void test_backoff_annotation(void **state) {
        world *w = world_new();
        const char *off = "  progressDeadlineSeconds: 3600\n";

        spec_deployment *d = manifest("crashy", 1, "/bin/crash", off, NULL);
        assert_int_equal(spec_map_set(&d->metadata.annotations, SPEC_ANN_CRASH_BACKOFF, "off"), 0);
        apply(w, d);
        step(w, 2 * S);
        /* every 0.1 s, never waiting: about 2 s / (0.1 s + 5 ms) */
        assert_true(w->starts >= 18);
        assert_int_equal(count_backing_off(w), 0);

        /* tuned: after=0, initial=300ms, max=600ms */
        d = manifest("crashy", 1, "/bin/crash", off, NULL);
        assert_int_equal(spec_map_set(&d->metadata.annotations, SPEC_ANN_CRASH_BACKOFF,
                                      "after=0,initial=300ms,max=600ms"),
                         0);
        apply(w, d);
        step(w, 100 * MS);
        size_t before = w->starts;
        step(w, 10 * S);
        /* at most one start each 0.1 s + 0.6 s */
        assert_true(w->starts - before <= 10 * S / (700 * MS) + 1);
        assert_true(w->starts - before >= 10 * S / (800 * MS) - 1);

        /* back to the default, until a replica waits a long time... */
        d = manifest("crashy", 1, "/bin/crash", off, NULL);
        apply(w, d);
        step(w, 60 * S);
        assert_int_equal(count_backing_off(w), 1);
        before = w->starts;
        step(w, 2 * S);
        assert_int_equal(w->starts, before); /* waits 16 s or more by now */
        /* ... then off: it starts at once */
        d = manifest("crashy", 1, "/bin/crash", off, NULL);
        assert_int_equal(spec_map_set(&d->metadata.annotations, SPEC_ANN_CRASH_BACKOFF, "off"), 0);
        apply(w, d);
        step(w, 10 * MS);
        assert_int_equal(w->starts, before + 1);
        world_free(w);
}

static void test_start_error(void **state) {
        world *w = world_new();
        const void *const *items;

        apply(w, manifest("bad", 1, "/nonexistent", NULL, NULL));
        step(w, 100 * MS);
        /* The replacement carries the start error as its last state. */
        assert_false(has_failed_pod(w, NULL));
        size_t n = store_list(w->store, STORE_POD, &items);
        assert_int_equal(n, 1);
        const spec_state_terminated *t = carried_death(w);
        assert_non_null(t);
        assert_string_equal(t->reason, "StartError");
        assert_non_null(strstr(t->message, "exec /nonexistent"));
        assert_int_equal(t->exit_code, 128);
        assert_non_null(find_event(w, "Failed", "Error: exec /nonexistent"));
        world_free(w);
}

static size_t count_waiting(world *w, const char *reason) {
        const void *const *items;
        size_t n = store_list(w->store, STORE_POD, &items), k = 0;
        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                const spec_state_waiting *wt =
                        p->status.n_container_statuses
                                ? p->status.container_statuses[0].state.waiting
                                : NULL;
                k += p->status.phase == SPEC_POD_PENDING && wt && streq_ptr(wt->reason, reason);
        }
        return k;
}

/* A start that tendd cannot make for want of its own descriptors is not
 * the pod's death: the pod waits (CreateContainerError), keeps no streak,
 * is not replaced, and is tried again every 2 s; meanwhile the other pods
 * wait without asking the host again. */
static void test_start_short_of_fds(void **state) {
        world *w = world_new();
        const void *const *items;

        w->short_fds = true;
        apply(w, manifest("many", 3, "many-v1", NULL, NULL));
        step(w, 100 * MS);
        assert_int_equal(store_list(w->store, STORE_POD, &items), 3);
        assert_int_equal(count_waiting(w, "CreateContainerError"), 3);
        assert_int_equal(w->short_refused, 1); /* the others did not ask */
        assert_false(has_failed_pod(w, NULL));
        for (size_t i = 0; i < 3; i++)
                assert_null(spec_map_get(&((const spec_pod *) items[i])->metadata.annotations,
                                         SPEC_ANN_CRASH_STREAK));
        assert_non_null(find_event(w, "Failed", "Error: tendd is out of file descriptors"));

        /* paced: one try every 2 s, the same pods, said once each */
        step(w, 10 * S);
        assert_in_range(w->short_refused, 1 + 4, 1 + 6);
        assert_int_equal(store_list(w->store, STORE_POD, &items), 3);
        assert_int_equal(count_waiting(w, "CreateContainerError"), 3);
        assert_int_equal(w->starts, 0);
        size_t said = 0, n = store_list(w->store, STORE_EVENT, &items);
        for (size_t i = 0; i < n; i++)
                said += streq_ptr(((const spec_event *) items[i])->reason, "Failed");
        assert_int_equal(said, 3);

        /* room again: all three start at the next try */
        w->short_fds = false;
        step(w, 3 * S);
        assert_int_equal(w->starts, 3);
        assert_int_equal(count_waiting(w, "CreateContainerError"), 0);
        assert_int_equal(store_list(w->store, STORE_POD, &items), 3);

        /* Only what the runtime says is tendd's (RT_ESHORT) waits: an
         * EAGAIN of the pod's own is its start error, as any other. */
        apply(w, manifest("own", 1, "/eagain", NULL, NULL));
        step(w, 100 * MS);
        assert_int_equal(count_waiting(w, "CreateContainerError"), 0);
        const spec_state_terminated *t = carried_death(w);
        assert_non_null(t);
        assert_string_equal(t->reason, "StartError");
        world_free(w);
}

/* With back-off off, a program that cannot be started is replaced at once,
 * again and again: a chain with no end. Each pass still ends, commits what
 * it did and says it has more (it never committed, and never returned to
 * the loop). */
static void test_start_error_spin(void **state) {
        world *w = world_new();
        const void *const *items;
        spec_deployment *d = manifest("bad", 2, "/nonexistent", NULL, NULL);

        assert_int_equal(spec_map_set(&d->metadata.annotations, SPEC_ANN_CRASH_BACKOFF, "off"), 0);
        apply(w, d);
        for (int pass = 0; pass < 20; pass++) {
                uint64_t commits = store_commit_histogram(w->store)->count;
                process(w);
                assert_true(store_commit_histogram(w->store)->count > commits);
                assert_true(w->deadline <= w->now); /* more to do, at once */
        }
        assert_int_equal(store_list(w->store, STORE_REPLICA_SET, &items), 1);
        /* The dead do not pile up: two replicas and the last failed ones. */
        size_t n = store_list(w->store, STORE_POD, &items);
        assert_true(n <= 2 + 5);
        int32_t restarts = 0;
        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                if (p->status.n_container_statuses)
                        restarts = MAX(restarts, p->status.container_statuses[0].restart_count);
        }
        assert_true(restarts >= 20); /* each pass moved on */
        world_free(w);
}

static bool deadline_exceeded(world *w, const char *name) {
        const spec_deployment *d = dep(w, name);
        const spec_condition *c = spec_get_condition(d->status.conditions, d->status.n_conditions,
                                                     "Progressing");
        return c && streq_ptr(c->reason, "ProgressDeadlineExceeded");
}

static void test_progress_deadline(void **state) {
        world *w = world_new();
        char msg[256];

        apply(w, manifest("slow", 2, "never-ready", "  progressDeadlineSeconds: 30\n", NULL));
        step(w, 20 * S);
        assert_false(deadline_exceeded(w, "slow"));
        assert_true(step_until(w, deadline_exceeded, "slow", 20 * S));
        assert_int_equal(spec_rollout_status(dep(w, "slow"), 0, msg, sizeof msg),
                         SPEC_ROLLOUT_FAILED);
        assert_string_equal(msg, "deployment \"slow\" exceeded its progress deadline");
        /* Nothing else changes: pods keep being managed. */
        assert_int_equal(count_pods(w, "never-ready", true), 2);
        world_free(w);
}

static spec_deployment *annotated(spec_deployment *d, const char *key, const char *value) {
        assert_int_equal(spec_map_set(&d->metadata.annotations, key, value), 0);
        return d;
}

static bool waits_for_promotion(world *w, const char *name) {
        const spec_deployment *d = dep(w, name);
        const spec_condition *c = spec_get_condition(d->status.conditions, d->status.n_conditions,
                                                     "Progressing");
        return c && streq_ptr(c->reason, "WaitingForPromotion");
}

/* tend.io/canary: 20% of 10 is 2 new pods beside 8 old, the bounds held
 * at every start (check_bounds, check_available), no deadline while it
 * waits, and tend.io/promote lets it finish. */
static void test_canary(void **state) {
        world *w = world_new();
        char msg[512];

        apply(w, annotated(manifest("web", 10, "web-v1", "  progressDeadlineSeconds: 30\n", NULL),
                           SPEC_ANN_CANARY, "20%"));
        assert_true(step_until(w, rolled_out, "web", 20 * S)); /* the first: no canary step */
        w->check_bounds = true;
        w->check_available = true;
        apply(w, annotated(manifest("web", 10, "web-v2", "  progressDeadlineSeconds: 30\n", NULL),
                           SPEC_ANN_CANARY, "20%"));
        assert_true(step_until(w, waits_for_promotion, "web", 30 * S));
        step(w, 60 * S); /* twice the deadline */
        assert_true(waits_for_promotion(w, "web"));
        if (count_pods(w, "web-v2", true) != 2 || count_pods(w, "web-v1", true) != 8)
                fail_msg("v2 %zu, v1 %zu", count_pods(w, "web-v2", true),
                         count_pods(w, "web-v1", true));
        assert_int_equal(spec_rollout_status(dep(w, "web"), 0, msg, sizeof msg),
                         SPEC_ROLLOUT_WAITING);
        assert_non_null(strstr(msg, "2 of 2 canaries"));
        /* a promotion of another revision is not taken, and is consumed */
        spec_deployment *d = annotated(
                manifest("web", 10, "web-v2", "  progressDeadlineSeconds: 30\n", NULL),
                SPEC_ANN_CANARY, "20%");
        apply(w, annotated(d, SPEC_ANN_PROMOTE, "7"));
        step(w, 5 * S);
        assert_true(waits_for_promotion(w, "web"));
        assert_null(spec_map_get(&dep(w, "web")->metadata.annotations, SPEC_ANN_PROMOTE));
        d = annotated(manifest("web", 10, "web-v2", "  progressDeadlineSeconds: 30\n", NULL),
                      SPEC_ANN_CANARY, "20%");
        apply(w, annotated(d, SPEC_ANN_PROMOTE, "true"));
        assert_true(step_until(w, settled, "web", 60 * S));
        assert_int_equal(count_pods(w, "web-v2", true), 10);
        assert_int_equal(count_pods(w, "web-v1", true), 0);
        world_free(w);
}

/* With maxSurge 0 the canaries get room only as the old pods go: the old
 * ReplicaSets keep D - N, not D (which stalled the rollout). */
static void test_canary_no_surge(void **state) {
        world *w = world_new();
        const char *strategy = "  strategy: {rollingUpdate: {maxSurge: 0, maxUnavailable: 1}}\n";

        apply(w, annotated(manifest("web", 10, "web-v1", strategy, NULL), SPEC_ANN_CANARY, "3"));
        assert_true(step_until(w, rolled_out, "web", 20 * S));
        w->check_bounds = true;
        w->check_available = true;
        apply(w, annotated(manifest("web", 10, "web-v2", strategy, NULL), SPEC_ANN_CANARY, "3"));
        assert_true(step_until(w, waits_for_promotion, "web", 60 * S));
        step(w, 5 * S);
        if (count_pods(w, "web-v2", true) != 3 || count_pods(w, "web-v1", true) != 7)
                fail_msg("v2 %zu, v1 %zu", count_pods(w, "web-v2", true),
                         count_pods(w, "web-v1", true));
        world_free(w);
}

static bool rolled_back(world *w, const char *name) {
        const spec_deployment *d = dep(w, name);
        const spec_condition *c = spec_get_condition(d->status.conditions, d->status.n_conditions,
                                                     "RolledBack");
        return c && streq_ptr(c->status, "True");
}

/* tend.io/auto-rollback: a crashing revision goes back to the last one
 * that completed, once; a never-ready one after its deadline. */
static void test_auto_rollback(void **state) {
        world *w = world_new();
        const spec_deployment *d;
        char msg[512];

        apply(w, annotated(manifest("web", 3, "web-v1", "  progressDeadlineSeconds: 30\n", NULL),
                           SPEC_ANN_AUTO_ROLLBACK, "true"));
        assert_true(step_until(w, rolled_out, "web", 20 * S));
        apply(w, annotated(manifest("web", 3, "web-crash", "  progressDeadlineSeconds: 30\n", NULL),
                           SPEC_ANN_AUTO_ROLLBACK, "true"));
        assert_true(step_until(w, rolled_back, "web", 60 * S));
        d = dep(w, "web");
        assert_string_equal(d->spec.template.spec.containers[0].command[0], "web-v1");
        assert_int_equal(spec_rollout_status(d, 0, msg, sizeof msg), SPEC_ROLLOUT_FAILED);
        assert_non_null(strstr(msg, "Revision 2 failed (CrashLoopBackOff"));
        assert_non_null(strstr(msg, "rolled back to revision 1 (now revision 3)"));
        step(w, 120 * S); /* no second rollback, no loop */
        assert_string_equal(dep(w, "web")->spec.template.spec.containers[0].command[0], "web-v1");
        assert_int_equal(count_pods(w, "web-v1", true), 3);
        assert_int_equal(count_pods(w, "web-crash", true), 0);

        apply(w,
              annotated(manifest("web", 3, "never-ready", "  progressDeadlineSeconds: 30\n", NULL),
                        SPEC_ANN_AUTO_ROLLBACK, "true"));
        assert_true(step_until(w, deadline_exceeded, "web", 5 * S) == false);
        assert_true(step_until(w, rolled_back, "web", 60 * S));
        d = dep(w, "web");
        assert_string_equal(d->spec.template.spec.containers[0].command[0], "web-v1");
        assert_non_null(strstr(
                spec_get_condition(d->status.conditions, d->status.n_conditions, "RolledBack")
                        ->message,
                "ProgressDeadlineExceeded"));
        world_free(w);
}

/* After an automatic rollback, an undo to another revision that completed
 * is a new rollout, which `rollout status` follows: RolledBack goes. */
static void test_undo_after_auto_rollback(void **state) {
        world *w = world_new();
        const char *dl = "  progressDeadlineSeconds: 30\n";
        char msg[512], *err = NULL;
        int64_t rev = 0;

        apply(w, annotated(manifest("web", 3, "web-v1", dl, NULL), SPEC_ANN_AUTO_ROLLBACK, "true"));
        assert_true(step_until(w, rolled_out, "web", 20 * S));
        apply(w, annotated(manifest("web", 3, "web-v2", dl, NULL), SPEC_ANN_AUTO_ROLLBACK, "true"));
        assert_true(step_until(w, rolled_out, "web", 20 * S));
        apply(w,
              annotated(manifest("web", 3, "web-crash", dl, NULL), SPEC_ANN_AUTO_ROLLBACK, "true"));
        assert_true(step_until(w, rolled_back, "web", 60 * S));
        assert_string_equal(dep(w, "web")->spec.template.spec.containers[0].command[0], "web-v2");
        assert_int_equal(agent_rollback(w->agent, "default", "web", 1, false, &rev, &err), 0);
        assert_false(rolled_back(w, "web"));
        assert_true(step_until(w, rolled_out, "web", 20 * S));
        assert_int_equal(spec_rollout_status(dep(w, "web"), 0, msg, sizeof msg), SPEC_ROLLOUT_DONE);
        assert_int_equal(count_pods(w, "web-v1", true), 3);
        free(err);
        world_free(w);
}

static void test_pause_and_proportional(void **state) {
        world *w = world_new();
        const void *const *items;
        size_t n;

        apply(w, manifest("web", 10, "web-v1",
                          "  strategy: {rollingUpdate: {maxSurge: 3, maxUnavailable: 2}}\n", NULL));
        assert_true(step_until(w, rolled_out, "web", 20 * S));
        /* A rollout whose new pods never become ready stalls at 8 + 5. */
        apply(w, manifest("web", 10, "never-ready",
                          "  strategy: {rollingUpdate: {maxSurge: 3, maxUnavailable: 2}}\n", NULL));
        step(w, 10 * S);
        assert_int_equal(count_pods(w, "web-v1", true), 8);
        assert_int_equal(count_pods(w, "never-ready", true), 5);
        /* Scaled to 15 mid-rollout: old 8 → 11, new 5 → 7 (docs/deployments.md §3.4). */
        apply(w, manifest("web", 15, "never-ready",
                          "  strategy: {rollingUpdate: {maxSurge: 3, maxUnavailable: 2}}\n", NULL));
        step(w, 1 * S);
        n = store_list(w->store, STORE_REPLICA_SET, &items);
        for (size_t i = 0; i < n; i++) {
                const spec_replica_set *rs = items[i];
                const char *cmd = rs->spec.template.spec.containers[0].command[0];
                if (streq(cmd, "web-v1"))
                        assert_int_equal(rs->spec.replicas, 11);
                else
                        assert_int_equal(rs->spec.replicas, 7);
        }

        /* Paused: a template change makes no new ReplicaSet... */
        assert_int_equal(agent_pause(w->agent, "default", "web", true), 0);
        size_t rs_before = count_rs(w, "web", false);
        apply(w, manifest("web", 15, "web-v3",
                          "  paused: true\n  strategy: {rollingUpdate: {maxSurge: 3, "
                          "maxUnavailable: 2}}\n",
                          NULL));
        step(w, 5 * S);
        assert_int_equal(count_rs(w, "web", false), rs_before);
        const spec_condition *c = spec_get_condition(dep(w, "web")->status.conditions,
                                                     dep(w, "web")->status.n_conditions,
                                                     "Progressing");
        assert_string_equal(c->reason, "DeploymentPaused");
        /* ... and resuming rolls it out. */
        assert_int_equal(agent_pause(w->agent, "default", "web", false), 0);
        assert_true(step_until(w, rolled_out, "web", 60 * S));
        assert_int_equal(count_pods(w, "web-v3", true), 15);
        world_free(w);
}

static void test_recreate(void **state) {
        world *w = world_new();

        apply(w, manifest("db", 3, "db-v1", "  strategy: {type: Recreate}\n", NULL));
        assert_true(step_until(w, rolled_out, "db", 10 * S));
        apply(w, manifest("db", 3, "db-v2", "  strategy: {type: Recreate}\n", NULL));
        /* Never both versions at once. */
        for (int i = 0; i < 300 && !rolled_out(w, "db"); i++) {
                step(w, 10 * MS);
                assert_false(count_pods(w, "db-v1", true) > 0 && count_pods(w, "db-v2", true) > 0);
        }
        assert_true(rolled_out(w, "db"));
        assert_int_equal(count_pods(w, "db-v2", true), 3);
        world_free(w);
}

static void test_hand_scaled_rs_reverted(void **state) {
        world *w = world_new();
        const void *const *items;
        const spec_replica_set *rs;

        apply(w, manifest("web", 3, "web-v1", NULL, NULL));
        assert_true(step_until(w, rolled_out, "web", 10 * S));
        store_list(w->store, STORE_REPLICA_SET, &items);
        rs = items[0];
        _cleanup_free_ char *name = strdup(rs->metadata.name);
        for (int round = 1; round <= 3; round++) {
                assert_int_equal(agent_scale_replica_set(w->agent, "default", name, 5), 0);
                step(w, 2 * S);
                rs = store_get(w->store, STORE_REPLICA_SET, "default", name);
                assert_int_equal(rs->spec.replicas, 3);
                assert_int_equal(count_pods(w, "web-v1", true), 3);
                /* The same fix each time: one event, counted. */
                const spec_event *e = find_event(w, "ScalingReplicaSet", "from 5 to 3");
                assert_non_null(e);
                assert_int_equal(e->count, round);
        }
        world_free(w);
}

static bool all_available(world *w, const char *name) {
        return dep(w, name)->status.available_replicas == dep(w, name)->spec.replicas;
}

static void test_min_ready_seconds(void **state) {
        world *w = world_new();

        apply(w, manifest("web", 2, "web-v1", "  minReadySeconds: 5\n", NULL));
        step(w, 2 * S); /* ready after 0.5 s, available only after 5 s more */
        assert_int_equal(dep(w, "web")->status.ready_replicas, 2);
        assert_int_equal(dep(w, "web")->status.available_replicas, 0);
        /* No event happens in between: a timer must bring it. */
        assert_true(step_until(w, all_available, "web", 5 * S));
        assert_true(w->now >= 1000 * S + 5500 * MS);
        world_free(w);
}

static void test_restart_mid_rollout(void **state) {
        world *w = world_new();
        int pids[64];
        size_t n = 0;

        apply(w, manifest("web", 4, "web-v1", NULL, NULL));
        assert_true(step_until(w, rolled_out, "web", 10 * S));
        apply(w, manifest("web", 4, "web-v2", NULL, NULL));
        step(w, 700 * MS);
        assert_false(rolled_out(w, "web"));
        for (size_t i = 0; i < w->n_procs; i++)
                if (w->procs[i]->alive)
                        pids[n++] = w->procs[i]->pid;
        size_t procs_before = w->n_procs;

        /* The agent goes away (pods keep running) and comes back. */
        agent_free(w->agent);
        store_close(w->store);
        char *db = strprintf("%s/tend.db", w->dir), *err = NULL;
        assert_int_equal(store_open(db, &w->store, &err), 0);
        free(db);
        new_agent(w);
        /* Same processes, none started twice. */
        for (size_t i = 0; i < n; i++) {
                proc *pr = find_proc(w, pids[i]);
                assert_true(pr->alive);
                assert_true(pr->handle);
        }
        assert_int_equal(w->n_procs, procs_before);
        assert_true(step_until(w, rolled_out, "web", 20 * S));
        assert_int_equal(count_pods(w, "web-v2", true), 4);
        world_free(w);
}

static void test_lost_while_down(void **state) {
        world *w = world_new();

        apply(w, manifest("web", 2, "web-v1", NULL, NULL));
        assert_true(step_until(w, rolled_out, "web", 10 * S));
        agent_free(w->agent);
        /* A pod dies while nobody watches. */
        for (size_t i = 0; i < w->n_procs; i++)
                if (w->procs[i]->alive) {
                        w->procs[i]->alive = false;
                        break;
                }
        new_agent(w);
        process(w);
        /* Replaced, the replacement carrying the loss as its last state. */
        assert_false(has_failed_pod(w, NULL));
        assert_non_null(carried_death(w));
        assert_string_equal(carried_death(w)->reason, "ContainerStatusUnknown");
        assert_non_null(find_event(w, "Lost", "lost while the agent was down"));
        {
                /* Failed: neither ready nor with ready containers. */
                const void *const *items;
                size_t n = store_list(w->store, STORE_POD, &items);
                for (size_t i = 0; i < n; i++) {
                        const spec_pod *p = items[i];
                        if (p->status.phase != SPEC_POD_FAILED)
                                continue;
                        for (const char *const *t =
                                     (const char *const[]){ "Ready", "ContainersReady", NULL };
                             *t; t++) {
                                const spec_condition *c = spec_get_condition(
                                        p->status.conditions, p->status.n_conditions, *t);
                                assert_non_null(c);
                                assert_string_equal(c->status, "False");
                        }
                }
        }
        assert_true(step_until(w, rolled_out, "web", 10 * S));
        assert_int_equal(count_pods(w, "web-v1", true), 2);
        world_free(w);
}

static void test_selector_contract(void **state) {
        world *w = world_new();
        spec_errors errs = {};
        spec_deployment *d;

        apply(w, manifest("web", 1, "web-v1", NULL, NULL));
        /* Overlap with another deployment: refused, naming it. */
        d = manifest("web2", 1, "x", NULL, NULL);
        spec_map_set(&d->spec.selector->match_labels, "app", "web");
        spec_map_set(&d->spec.template.metadata.labels, "app", "web");
        assert_int_equal(agent_apply(w->agent, &d, 1, &errs, NULL), -EINVAL);
        assert_non_null(
                strstr(errs.items[0].message, "overlaps the selector of deployment \"web\""));
        spec_errors_done(&errs);
        assert_null(dep(w, "web2"));
        spec_deployment_free(d);
        /* A changed selector: refused as immutable. */
        d = manifest("web", 1, "web-v1", NULL, NULL);
        spec_map_set(&d->spec.selector->match_labels, "tier", "front");
        spec_map_set(&d->spec.template.metadata.labels, "tier", "front");
        assert_int_equal(agent_apply(w->agent, &d, 1, &errs, NULL), -EINVAL);
        assert_non_null(strstr(errs.items[0].message, "field is immutable"));
        spec_errors_done(&errs);
        spec_deployment_free(d);
        /* All or nothing: a good one and a bad one → neither. */
        spec_deployment *two[2] = { manifest("api", 1, "api", NULL, NULL),
                                    manifest("api2", 1, "api", NULL, NULL) };
        spec_map_set(&two[1]->spec.selector->match_labels, "app", "api");
        spec_map_set(&two[1]->spec.template.metadata.labels, "app", "api");
        assert_int_equal(agent_apply(w->agent, two, 2, &errs, NULL), -EINVAL);
        assert_null(dep(w, "api"));
        assert_null(dep(w, "api2"));
        spec_errors_done(&errs);
        spec_deployment_free(two[0]);
        spec_deployment_free(two[1]);
        /* Unchanged apply: no new generation. */
        agent_apply_result res;
        d = manifest("web", 1, "web-v1", NULL, NULL);
        assert_int_equal(agent_apply(w->agent, &d, 1, &errs, &res), 0);
        assert_int_equal(res, AGENT_UNCHANGED);
        assert_int_equal(dep(w, "web")->metadata.generation, 1);
        spec_deployment_free(d);
        world_free(w);
}

static void test_delete_cascades(void **state) {
        world *w = world_new();

        apply(w, manifest("web", 3, "web-v1", NULL, NULL));
        assert_true(step_until(w, rolled_out, "web", 10 * S));
        assert_int_equal(agent_delete_deployment(w->agent, "default", "web"), 0);
        step(w, 2 * S);
        assert_int_equal(count_pods(w, NULL, true), 0);
        const void *const *items;
        assert_int_equal(store_list(w->store, STORE_REPLICA_SET, &items), 0);
        assert_int_equal(store_list(w->store, STORE_POD, &items), 0);
        world_free(w);
}

/* propagationPolicy=Foreground: the deployment stays, with its
 * deletionTimestamp, doing nothing else, until the last of its processes
 * has exited; then it goes. */
static void test_delete_foreground(void **state) {
        world *w = world_new();
        size_t alive;

        apply(w, manifest("web", 3, "web-v1", NULL, NULL)); /* grace 5 s */
        assert_true(step_until(w, rolled_out, "web", 10 * S));
        for (size_t i = 0; i < w->n_procs; i++)
                w->procs[i]->ignore_term = true; /* killed after the 5 s grace */
        usec_t t0 = w->now;
        assert_int_equal(agent_delete_deployment_foreground(w->agent, "default", "web"), 0);
        for (int t = 0; t < 100; t++) {
                step(w, 100 * MS);
                alive = 0;
                for (size_t i = 0; i < w->n_procs; i++)
                        alive += w->procs[i]->alive;
                const spec_deployment *d = dep(w, "web");
                if (!d)
                        break;
                assert_true(d->metadata.deletion_timestamp > 0);
                assert_true(alive > 0 || t > 0); /* kept while any process lives */
        }
        assert_null(dep(w, "web"));
        assert_int_equal(alive, 0);
        assert_true(w->now - t0 >= 5 * S); /* it waited for the SIGKILL after the grace */
        const void *const *items;
        assert_int_equal(store_list(w->store, STORE_REPLICA_SET, &items), 0);
        world_free(w);
}

static void test_delete_pod_replaced(void **state) {
        world *w = world_new();
        proc *victim = NULL;

        apply(w, manifest("web", 2, "web-v1", NULL, NULL));
        assert_true(step_until(w, rolled_out, "web", 10 * S));
        victim = w->procs[0];
        assert_int_equal(agent_delete_pod(w->agent, "default", victim->pod, -1), 0);
        step(w, 50 * MS);
        /* Replacement at once, while the old one still stops (SIGTERM). */
        assert_int_equal(count_pods(w, "web-v1", true), 3);
        step(w, 1 * S);
        assert_false(victim->alive);
        assert_int_equal(victim->exit_signal, SIGTERM);
        assert_null(store_get(w->store, STORE_POD, "default", victim->pod));
        assert_true(step_until(w, rolled_out, "web", 10 * S));
        assert_int_equal(count_pods(w, "web-v1", true), 2);
        world_free(w);
}

static void test_liveness_failure(void **state) {
        world *w = world_new();
        proc *pr = NULL;
        const spec_pod *p;

        apply(w, manifest("web", 1, "web-v1", NULL, NULL));
        assert_true(step_until(w, rolled_out, "web", 10 * S));
        for (size_t i = 0; i < w->n_procs; i++)
                if (w->procs[i]->alive)
                        pr = w->procs[i];
        _cleanup_free_ char *name = strdup(pr->pod);
        agent_pod_probe(w->agent, pr->ud, RT_PROBE_LIVENESS, false,
                        "HTTP probe failed with statuscode: 500");
        step(w, 1 * S);
        /* Stopped gracefully and replaced: the dead pod gone, its
         * replacement carrying the reason Unhealthy as its last state. */
        assert_false(pr->alive);
        assert_int_equal(pr->exit_signal, SIGTERM);
        p = store_get(w->store, STORE_POD, "default", name);
        assert_null(p);
        assert_non_null(carried_death(w));
        assert_string_equal(carried_death(w)->reason, "Unhealthy");
        assert_non_null(find_event(w, "Unhealthy", "Liveness probe failed: HTTP probe failed"));
        assert_non_null(find_event(w, "Killing", "failed liveness probe, will be replaced"));
        assert_true(step_until(w, settled, "web", 10 * S));
        world_free(w);
}

static void test_rollout_restart(void **state) {
        world *w = world_new();
        const spec_deployment *d;

        apply(w, manifest("web", 2, "web-v1", NULL, NULL));
        assert_true(step_until(w, settled, "web", 10 * S));
        size_t before = w->starts;
        assert_int_equal(agent_restart_rollout(w->agent, "default", "web"), 0);
        assert_true(step_until(w, settled, "web", 20 * S));
        d = dep(w, "web");
        assert_non_null(
                spec_map_get(&d->spec.template.metadata.annotations, SPEC_ANN_RESTARTED_AT));
        assert_string_equal(spec_map_get(&d->metadata.annotations, SPEC_ANN_REVISION), "2");
        assert_int_equal(d->metadata.generation, 2);
        /* Every replica was replaced by a new process. */
        assert_int_equal(w->starts, before + 2);
        /* A second restart right away is another revision still. */
        assert_int_equal(agent_restart_rollout(w->agent, "default", "web"), 0);
        assert_true(step_until(w, settled, "web", 20 * S));
        assert_string_equal(spec_map_get(&dep(w, "web")->metadata.annotations, SPEC_ANN_REVISION),
                            "3");
        world_free(w);
}

/* A timed-out rollout that is then paused still says it timed out. */
static void test_pause_keeps_deadline(void **state) {
        world *w = world_new();
        char msg[256];

        apply(w, manifest("slow", 2, "never-ready", "  progressDeadlineSeconds: 10\n", NULL));
        assert_true(step_until(w, deadline_exceeded, "slow", 30 * S));
        assert_int_equal(agent_pause(w->agent, "default", "slow", true), 0);
        step(w, 2 * S);
        assert_true(deadline_exceeded(w, "slow"));
        assert_int_equal(spec_rollout_status(dep(w, "slow"), 0, msg, sizeof msg),
                         SPEC_ROLLOUT_FAILED);
        world_free(w);
}

/* Scaling up in the middle of a rollout, while old pods are still slow to
 * stop: the processes stay within the new replicas + maxSurge. */
static void test_scale_up_with_terminating(void **state) {
        world *w = world_new();
        const char *strat = "  strategy: {rollingUpdate: {maxSurge: 3, maxUnavailable: 2}}\n";

        apply(w, manifest("web", 10, "web-v1", strat, "        args: [ignore-term]\n"));
        assert_true(step_until(w, settled, "web", 20 * S));
        apply(w, manifest("web", 10, "never-ready", strat, "        args: [ignore-term]\n"));
        step(w, 1 * S); /* stalled at 8 old + 5 new; 2 old still stopping (5 s) */
        w->check_bounds = true;
        apply(w, manifest("web", 15, "never-ready", strat, "        args: [ignore-term]\n"));
        step(w, 20 * S); /* invariants() checks live <= 15 + 3 at every step */
        assert_true(count_pods(w, NULL, true) <= 18);
        world_free(w);
}

/* ---- the live bound (docs/architecture.md §4.3); check_start() asserts it at each start --- */

static proc *alive_proc_of(world *w, const char *image, size_t nth) {
        for (size_t i = 0; i < w->n_procs; i++)
                if (w->procs[i]->alive && streq(w->procs[i]->image, image) && nth-- == 0)
                        return w->procs[i];
        return NULL;
}

/* Deleting a pod with maxSurge 0: the replacement waits for the deleted
 * pod's process to end (Kubernetes would run replicas + 1 meanwhile). */
static void test_bound_delete_surge_0(void **state) {
        world *w = world_new();
        const char *strat = "  strategy: {rollingUpdate: {maxSurge: 0, maxUnavailable: 1}}\n";
        proc *victim;

        apply(w, manifest("web", 2, "web-v1", strat, "        args: [ignore-term]\n"));
        assert_true(step_until(w, settled, "web", 10 * S));
        victim = alive_proc_of(w, "web-v1", 0);
        assert_int_equal(agent_delete_pod(w->agent, "default", victim->pod, -1), 0);
        step(w, 4 * S); /* its grace is 5 s */
        assert_true(victim->alive);
        assert_int_equal(count_pods(w, "web-v1", true), 2);
        assert_true(step_until(w, settled, "web", 10 * S));
        assert_false(victim->alive);
        assert_int_equal(count_pods(w, "web-v1", true), 2);
        world_free(w);
}

/* A delete in the middle of a rolling update: replicas 3, maxSurge 1. */
static void test_bound_delete_mid_rollout(void **state) {
        world *w = world_new();
        const char *strat = "  strategy: {rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}\n";

        apply(w, manifest("web", 3, "web-v1", strat, "        args: [ignore-term]\n"));
        assert_true(step_until(w, settled, "web", 10 * S));
        w->ready_delay = 2 * S;
        apply(w, manifest("web", 3, "web-v2", strat, "        args: [ignore-term]\n"));
        step(w, 100 * MS);
        assert_int_equal(
                agent_delete_pod(w->agent, "default", alive_proc_of(w, "web-v1", 0)->pod, -1), 0);
        assert_int_equal(
                agent_delete_pod(w->agent, "default", alive_proc_of(w, "web-v2", 0)->pod, -1), 0);
        assert_true(step_until(w, settled, "web", 60 * S));
        assert_int_equal(count_pods(w, "web-v2", true), 3);
        world_free(w);
}

/* Scale 4 -> 1 while the three leaving take their grace, then kill -9 the
 * one left: its replacement does not wait out their grace (availability
 * first), and does not go over the bound either: the soonest due of them
 * are stopped at once to make its room. */
static void test_bound_scale_down_then_kill(void **state) {
        world *w = world_new();
        const char *strat = "  strategy: {rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}\n";
        size_t starts;
        proc *last = NULL;

        apply(w, manifest("web", 4, "web-v1", strat, "        args: [ignore-term]\n"));
        assert_true(step_until(w, settled, "web", 10 * S));
        apply(w, manifest("web", 1, "web-v1", strat, "        args: [ignore-term]\n"));
        step(w, 100 * MS);
        assert_int_equal(count_pods(w, "web-v1", true), 4); /* three stopping, for 5 s */
        for (size_t i = 0; i < w->n_procs; i++) {
                const spec_pod *p = store_get(w->store, STORE_POD, "default", w->procs[i]->pod);
                if (w->procs[i]->alive && p && !p->metadata.deletion_timestamp)
                        last = w->procs[i];
        }
        assert_non_null(last);
        starts = w->starts;
        fb_signal(last, SIGKILL);
        step(w, 10 * MS);
        /* replaced within milliseconds, with two of the three stopped */
        assert_int_equal(w->starts, starts + 1);
        assert_int_equal(count_pods(w, "web-v1", true), 2);
        assert_non_null(find_event(w, "Preempting", "needs its room"));
        assert_true(step_until(w, settled, "web", 10 * S));
        world_free(w);
}

/* Rolling v2 -> v3 (replicas 3, maxSurge 0) while an older v1 ReplicaSet is
 * hand-scaled to 1: v1 is put back to 0, never raised, and no start goes
 * over 3 live processes. */
static void test_bound_old_rs_hand_scaled(void **state) {
        static const usec_t when[] = { 0, 1, 100 * MS, 300 * MS, 600 * MS, 1 * S, 2 * S, 4 * S };
        const char *strat = "  strategy: {rollingUpdate: {maxSurge: 0, maxUnavailable: 1}}\n";

        for (size_t k = 0; k < ELEMENTSOF(when); k++) {
                world *w = world_new();
                const void *const *items;
                char v1[128] = "";

                w->ready_delay = 300 * MS;
                apply(w, manifest("web", 3, "web-v1", strat, NULL));
                assert_true(step_until(w, settled, "web", 10 * S));
                assert_int_equal(store_list(w->store, STORE_REPLICA_SET, &items), 1);
                snprintf(v1, sizeof v1, "%s", ((const spec_replica_set *) items[0])->metadata.name);
                apply(w, manifest("web", 3, "web-v2", strat, NULL));
                assert_true(step_until(w, settled, "web", 20 * S));
                if (when[k] == 0)
                        assert_int_equal(agent_scale_replica_set(w->agent, "default", v1, 1), 0);
                apply(w, manifest("web", 3, "web-v3", strat, NULL));
                if (when[k] > 0) {
                        step(w, when[k]);
                        assert_int_equal(agent_scale_replica_set(w->agent, "default", v1, 1), 0);
                }
                for (int i = 0; i < 200; i++) {
                        const spec_replica_set *rs = store_get(w->store, STORE_REPLICA_SET,
                                                               "default", v1);
                        if (rs && rs->spec.replicas > 1)
                                fail_msg("hand-scaled %llu ms into the rollout: t=%llu ms: the "
                                         "controller raised old %s to %d",
                                         (unsigned long long) (when[k] / MS),
                                         (unsigned long long) (w->now / MS), v1, rs->spec.replicas);
                        step(w, 50 * MS);
                }
                assert_true(step_until(w, settled, "web", 20 * S));
                assert_int_equal(count_pods(w, "web-v3", true), 3);
                world_free(w);
        }
}

/* A rollback's revived ReplicaSet never shows its old revision again once
 * renumbered (no stale copy overwrites it in the same pass). */
static char revived[128];
static int64_t revived_revs[64];
static size_t n_revived;

static void watch_rs(store_kind kind, store_change change, const void *obj, void *u) {
        const spec_replica_set *rs = obj;
        if (kind == STORE_REPLICA_SET && streq(rs->metadata.name, revived) &&
            n_revived < ELEMENTSOF(revived_revs))
                revived_revs[n_revived++] = spec_meta_revision(&rs->metadata);
}

static void test_rollback_renumber_sticks(void **state) {
        world *w = world_new();
        const void *const *items;
        char *err = NULL;
        int64_t rev;

        apply(w, manifest("web", 2, "web-v1", NULL, NULL));
        assert_true(step_until(w, settled, "web", 10 * S));
        store_list(w->store, STORE_REPLICA_SET, &items);
        snprintf(revived, sizeof revived, "%s",
                 ((const spec_replica_set *) items[0])->metadata.name);
        apply(w, manifest("web", 2, "web-v2", NULL, NULL));
        assert_true(step_until(w, settled, "web", 10 * S));
        n_revived = 0;
        store_subscribe(w->store, watch_rs, NULL);
        assert_int_equal(agent_rollback(w->agent, "default", "web", 0, false, &rev, &err), 0);
        assert_true(step_until(w, settled, "web", 10 * S));
        store_unsubscribe(w->store, watch_rs, NULL);
        assert_true(n_revived > 0);
        bool renumbered = false;
        for (size_t i = 0; i < n_revived; i++) {
                if (revived_revs[i] == 3)
                        renumbered = true;
                else if (renumbered)
                        fail_msg("revision went back to %lld after 3", (long long) revived_revs[i]);
        }
        assert_true(renumbered);
        world_free(w);
}

/* A commit that fails (the database is locked by someone else) loses no
 * pod: once the store works again the lost pod is seen and replaced. The
 * replacement the failed pass had already started (processes start before
 * their pass is committed) is killed: its pod was rolled back, and nothing
 * may run for a pod that does not exist. */
static void test_failed_commit_recovers(void **state) {
        world *w = world_new();
        sqlite3 *db;
        char *path = strprintf("%s/tend.db", w->dir);
        proc *victim = NULL, *early;
        size_t before;

        apply(w, manifest("web", 2, "web-v1", NULL, NULL));
        assert_true(step_until(w, settled, "web", 10 * S));
        for (size_t i = 0; i < w->n_procs; i++)
                if (w->procs[i]->alive)
                        victim = w->procs[i];
        assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
        assert_int_equal(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
        before = w->n_procs;
        fb_signal(victim, SIGKILL);
        fire(w);
        process(w); /* the commit fails: the database is locked */
        assert_int_equal(w->n_procs, before + 1);
        early = w->procs[before];
        assert_int_equal(early->exit_signal, SIGKILL);
        assert_false(early->handle);
        assert_int_equal(sqlite3_exec(db, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(db);
        free(path);
        step(w, 2 * S);
        assert_false(early->alive);
        assert_true(step_until(w, settled, "web", 10 * S));
        assert_int_equal(count_pods(w, "web-v1", true), 2);
        assert_non_null(carried_death(w));
        world_free(w);
}

/* The agent died after a pass spawned a process and before the pass was
 * committed: its pod was never written. The next agent's sweep kills the
 * process (a real one: test-runtime's test_sweep_orphan_processes), and the
 * lost pod is replaced once. */
static void test_crash_between_spawn_and_commit(void **state) {
        world *w = world_new();
        proc *victim = NULL;
        size_t before;

        apply(w, manifest("web", 2, "web-v1", NULL, NULL));
        assert_true(step_until(w, settled, "web", 10 * S));
        for (size_t i = 0; i < w->n_procs; i++)
                if (w->procs[i]->alive)
                        victim = w->procs[i];
        before = w->n_procs;
        /* The pass's work without its commit: the store is what the last
         * commit left, the replacement runs. */
        fb_signal(victim, SIGKILL);
        fire(w);
        assert_int_equal(store_commit(w->store, false), 0);
        agent_free(w->agent); /* before the pass: nothing of it is on disk */
        store_close(w->store);
        {
                char *db = strprintf("%s/tend.db", w->dir), *err = NULL;
                assert_int_equal(store_open(db, &w->store, &err), 0);
                free(db);
        }
        /* What the dead agent had started: a process for no known pod. */
        assert_int_equal(fb_start(w,
                                  &(rt_pod_params){ .namespace = "default",
                                                    .name = "web-gone",
                                                    .uid = "uid-of-no-pod",
                                                    .spec = &dep(w, "web")->spec.template.spec },
                                  NULL, &(void *){ NULL }, &(char *){ NULL }),
                         0);
        w->procs[w->n_procs - 1]->handle = false;
        new_agent(w);
        assert_int_equal(w->swept, 1);
        step(w, 2 * S);
        assert_true(step_until(w, settled, "web", 10 * S));
        assert_int_equal(count_pods(w, "web-v1", true), 2);
        assert_true(w->n_procs > before + 1);
        world_free(w);
}

/* The agent died between spawning a pod and committing its record: the
 * restart finds the process by its POD_UID and adopts it; nothing starts
 * twice. */
static void test_crash_between_spawn_and_record(void **state) {
        world *w = world_new();
        proc *pr = NULL;

        apply(w, manifest("web", 1, "web-v1", NULL, NULL));
        assert_true(step_until(w, settled, "web", 10 * S));
        for (size_t i = 0; i < w->n_procs; i++)
                if (w->procs[i]->alive)
                        pr = w->procs[i];
        /* What the store holds in that window: only the intent. */
        json_t *intent = json_pack("{s:b}", "intent", 1);
        assert_int_equal(store_put_record(w->store, pr->uid, intent), 0);
        json_decref(intent);
        assert_int_equal(store_commit(w->store, true), 0);
        agent_free(w->agent);
        size_t before = w->starts;
        new_agent(w);
        step(w, 2 * S);
        assert_int_equal(w->starts, before);  /* not started again */
        assert_true(pr->alive && pr->handle); /* adopted */
        assert_true(settled(w, "web"));
        world_free(w);
}

/* Seeded random sequences of kills, template changes and scale changes:
 * the deployment always converges, and the bounds hold throughout. */
/* What the store holds is whole: no object written half-built. */
static void check_whole(world *w) {
        const void *const *items;
        size_t n = store_list(w->store, STORE_POD, &items);

        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                const spec_owner_ref *o = spec_meta_controller(&p->metadata);
                assert_non_null(p->metadata.uid);
                assert_non_null(o);
                assert_string_equal(o->kind, "ReplicaSet");
                assert_non_null(o->uid);
                assert_non_null(o->name);
                assert_non_null(spec_map_get(&p->metadata.labels, SPEC_LABEL_POD_TEMPLATE_HASH));
                assert_int_equal(p->status.n_container_statuses, 1);
                assert_non_null(p->status.container_statuses[0].name);
                const spec_container_state *st = &p->status.container_statuses[0].state;
                assert_true(st->waiting || st->running || st->terminated);
                if (p->status.phase == SPEC_POD_RUNNING) {
                        assert_non_null(st->running);
                        assert_non_null(p->status.container_statuses[0].container_id);
                        assert_non_null(p->spec.node_name);
                }
                if (p->status.phase == SPEC_POD_FAILED)
                        assert_non_null(st->terminated);
                for (size_t c = 0; c < p->status.n_conditions; c++) {
                        assert_non_null(p->status.conditions[c].type);
                        assert_non_null(p->status.conditions[c].status);
                }
        }
        n = store_list(w->store, STORE_REPLICA_SET, &items);
        for (size_t i = 0; i < n; i++) {
                const spec_replica_set *rs = items[i];
                const spec_owner_ref *o = spec_meta_controller(&rs->metadata);
                assert_non_null(o);
                assert_string_equal(o->kind, "Deployment");
                assert_non_null(o->uid);
                assert_non_null(spec_map_get(&rs->metadata.annotations, SPEC_ANN_REVISION));
                assert_non_null(spec_map_get(&rs->metadata.labels, SPEC_LABEL_POD_TEMPLATE_HASH));
                assert_non_null(rs->spec.selector);
        }
        n = store_list(w->store, STORE_DEPLOYMENT, &items);
        for (size_t i = 0; i < n; i++) {
                const spec_deployment *d = items[i];
                for (size_t c = 0; c < d->status.n_conditions; c++) {
                        assert_non_null(d->status.conditions[c].type);
                        assert_non_null(d->status.conditions[c].status);
                }
        }
}

/* Out of memory at the allocations of a pass, one at a time: a kill, a
 * rollout and a crash loop under way when the k-th allocation fails. The
 * pass may fail; nothing it writes is half-built (check_whole), nothing
 * leaks (LeakSanitizer at exit), and once memory is back the deployment
 * converges as if nothing happened. The sweep ends at the first k that no
 * pass reaches, so it covers the whole scenario: every 5th allocation in
 * make test, every one with TEND_OOM_STRIDE=1 (some minutes). */
/* One run of the scenario with the countdown-th allocation of its armed
 * window failing (LONG_MAX: none). Returns the allocations the window made
 * (with none failing) or 0 once one failed. */
static long oom_run(long countdown) {
        world *w = world_new();
        long made;

        w->check_starts = false;
        apply(w, manifest("web", 3, "web-v1", NULL, NULL));
        assert_true(step_until(w, rolled_out, "web", 10 * S));
        apply(w, manifest("web", 3, "web-v2", NULL, NULL));
        apply(w, manifest("lo", 1, "lo-crash", NULL, NULL));
        w->procs[0]->exit_at = w->now; /* a kill, too */
        oom_fired = false;
        oom_countdown = countdown;
        step(w, 500 * MS);
        made = countdown - oom_countdown;
        oom_countdown = 0;
        if (oom_fired) /* what the failed pass wrote, as the next pass finds it */
                check_whole(w);
        if (!step_until(w, settled, "web", 60 * S)) {
                dump(w);
                fail_msg("allocation %ld failed: the deployment did not converge", countdown);
        }
        check_whole(w);
        world_free(w);
        return oom_fired ? 0 : made;
}

/* Out of memory at the allocations of a pass, one at a time: a kill, a
 * rollout and a crash loop under way when the k-th allocation fails. The
 * pass may fail; nothing it writes is half-built (check_whole), nothing
 * leaks (LeakSanitizer at exit), and once memory is back the deployment
 * converges as if nothing happened. The scenario's allocations are counted
 * first; make test tries 400 of them spread over the whole scenario, and
 * TEND_OOM_STRIDE=1 every one (TEND_OOM_FROM=k replays from k). */
static void test_out_of_memory(void **state) {
        const char *from = getenv("TEND_OOM_FROM"), *stride_s = getenv("TEND_OOM_STRIDE");
        long total, stride, tried = 0;

        json_set_alloc_funcs(__wrap_malloc, free);
        total = oom_run(LONG_MAX);
        assert_true(total > 100); /* the window does reach the agent's allocations */
        stride = stride_s ? MAX(atol(stride_s), 1) : MAX(total / 400, 1);
        for (long k = from ? atol(from) : 1; k <= total; k += stride, tried++) {
                oom_run(k);
                if (getenv("TEND_OOM_PROGRESS") && tried % 100 == 0)
                        fprintf(stderr, "oom: %ld of %ld\n", k, total);
        }
        json_set_alloc_funcs(malloc, free);
        fprintf(stderr,
                "out of memory at %ld of the scenario's %ld allocations (every %ld): all whole, "
                "all converged\n",
                tried, total, stride);
}

static void test_random_sequences(void **state) {
        for (unsigned seed = 1;
             seed <= (getenv("TEND_SEEDS") ? (unsigned) atoi(getenv("TEND_SEEDS")) : 12u); seed++) {
                world *w = world_new();
                unsigned x = seed * 2654435761u;
                int replicas = 5, version = 1;
                char image[32];

                w->check_bounds = true;
                apply(w, manifest("web", replicas, "v1", NULL, NULL));
                for (int op = 0; op < 40; op++) {
                        x = x * 1103515245u + 12345u;
                        switch ((x >> 16) % 4) {
                        case 0: { /* kill -9 a random live process */
                                size_t alive = count_pods(w, NULL, true),
                                       k = (x >> 8) % (alive + 1);
                                for (size_t i = 0; i < w->n_procs; i++)
                                        if (w->procs[i]->alive && k-- == 0) {
                                                fb_signal(w->procs[i], SIGKILL);
                                                break;
                                        }
                                break;
                        }
                        case 1: /* new template */
                                snprintf(image, sizeof image, "v%d", ++version);
                                apply(w, manifest("web", replicas, image, NULL, NULL));
                                break;
                        case 2: /* scale; the bound follows only after the
                                 * scale-down's terminations */
                                w->check_bounds = false;
                                replicas = 1 + (int) ((x >> 4) % 8);
                                apply(w, manifest("web", replicas, image[0] ? image : "v1", NULL,
                                                  NULL));
                                break;
                        default:
                                break;
                        }
                        step(w, (usec_t) ((x >> 10) % 800) * MS);
                        if (!w->check_bounds && count_pods(w, NULL, true) <= (size_t) replicas)
                                w->check_bounds = true;
                }
                snprintf(image, sizeof image, "v%d", version);
                if (version == 1)
                        strcpy(image, "v1");
                if (!step_until(w, settled, "web", 120 * S)) {
                        char msg[256];
                        spec_rollout_status(dep(w, "web"), 0, msg, sizeof msg);
                        dump(w);
                        fail_msg("seed %u: did not converge: %s (%zu live, want %d of %s)", seed,
                                 msg, count_pods(w, NULL, true), replicas, image);
                }
                step(w, 2 * S);
                assert_int_equal(count_pods(w, NULL, true), (size_t) replicas);
                assert_int_equal(count_pods(w, image, true), (size_t) replicas);
                world_free(w);
        }
}

/* ---- fleet mode (agent_fleet): the leader's controllers, binding, this node's pods -------- */

static bool fleet_leads;
static plan_node fleet_nodes[4];
static size_t fleet_n_nodes;

static bool fl_leading(void *u) {
        return fleet_leads;
}

static size_t fl_nodes(void *u, const plan_node **ret) {
        *ret = fleet_nodes;
        return fleet_n_nodes;
}

static bool fleet_fenced;

static bool fl_fenced(void *u) {
        return fleet_fenced;
}

static const char *fleet_lost; /* the node that is lost, or NULL */

static bool fl_node_lost(void *u, const char *node) {
        return fleet_lost && streq_ptr(node, fleet_lost);
}

static const agent_fleet test_fleet = {
        .leading = fl_leading, .nodes = fl_nodes, .node_lost = fl_node_lost, .fenced = fl_fenced
};

static size_t pods_on(world *w, const char *node) {
        const void *const *items;
        size_t n = store_list(w->store, STORE_POD, &items), c = 0;
        for (size_t i = 0; i < n; i++)
                c += streq_ptr(((const spec_pod *) items[i])->spec.node_name, node);
        return c;
}

/* w's agent made again as one node ("box") of three, on the same store
 * (n3 cordoned, if said). */
static void fleet_agent(world *w, bool n3_cordoned) {
        agent_free(w->agent);
        fleet_nodes[0] = (plan_node){ .name = "box", .ready = true };
        fleet_nodes[1] = (plan_node){ .name = "n2", .ready = true };
        fleet_nodes[2] = (plan_node){ .name = "n3", .ready = true, .unschedulable = n3_cordoned };
        fleet_n_nodes = 3;
        assert_int_equal(agent_new(&(agent_config){ .store = w->store,
                                                    .backend = &fake_backend,
                                                    .backend_data = w,
                                                    .clock = &vclock,
                                                    .node_name = "box",
                                                    .fleet = &test_fleet },
                                   &w->agent),
                         0);
        assert_int_equal(agent_start(w->agent), 0);
}

/* pods_with(w, prefix, node): the pods named prefix* bound to node (NULL: unbound). */
static size_t pods_with(world *w, const char *prefix, const char *node) {
        const void *const *items;
        size_t n = store_list(w->store, STORE_POD, &items), c = 0;
        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                c += startswith(p->metadata.name, prefix) && streq_ptr(p->spec.node_name, node);
        }
        return c;
}

/* Of pods_with(w, prefix, node): those marked deleted. */
static size_t count_deleting(world *w, const char *prefix, const char *node) {
        const void *const *items;
        size_t n = store_list(w->store, STORE_POD, &items), c = 0;
        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                c += startswith(p->metadata.name, prefix) && streq_ptr(p->spec.node_name, node) &&
                     p->metadata.deletion_timestamp;
        }
        return c;
}

/* What node's tendd writes of its pods: each of node's pods Running and
 * Ready (this agent runs only box's). */
static void node_runs_its_pods(world *w, const char *node) {
        const void *const *items;
        size_t n = store_list(w->store, STORE_POD, &items), k = 0;
        _cleanup_free_ const spec_pod **ps = new0(const spec_pod *, n + 1);

        assert_non_null(ps);
        for (size_t i = 0; i < n; i++)
                if (streq_ptr(((const spec_pod *) items[i])->spec.node_name, node) &&
                    !((const spec_pod *) items[i])->metadata.deletion_timestamp)
                        ps[k++] = items[i];
        for (size_t i = 0; i < k; i++) {
                spec_pod *c = spec_pod_copy(ps[i]);
                assert_non_null(c);
                c->status.phase = SPEC_POD_RUNNING;
                c->status.start_time = clk_wall(w);
                assert_true(plan_set_condition(&c->status.conditions, &c->status.n_conditions,
                                               "Ready", "True", NULL, NULL, clk_wall(w)) >= 0);
                assert_int_equal(store_put(w->store, STORE_POD, c, NULL), 0);
        }
        assert_int_equal(store_commit(w->store, false), 0);
}

/* A node lost during a rollout holds back nothing (issue 29): its evicted
 * pods are unknown, neither live nor terminating, in the Deployment's
 * rollout as in the ReplicaSet's room; with maxSurge 0 the rollout still
 * ends with every replica, all on the nodes that are left. */
static void test_fleet_lost_node_rollout(void **state) {
        world *w = world_new();
        const char *strategy = "  strategy:\n    rollingUpdate: {maxSurge: 0, maxUnavailable: 1}\n";

        fleet_leads = true;
        fleet_fenced = false;
        fleet_lost = NULL;
        fleet_agent(w, false);
        fleet_nodes[2].ready = false; /* box and n2 */
        apply(w, manifest("lost", 4, "lost-v1", strategy, NULL));
        step(w, 2 * S);
        assert_int_equal(pods_with(w, "lost-", "n2"), 2);
        node_runs_its_pods(w, "n2");
        assert_true(step_until(w, rolled_out, "lost", 10 * S));

        /* n2 is lost: its two pods are evicted (marked deleted, never gone:
         * nobody is there to stop them) and replaced on box */
        fleet_lost = "n2";
        fleet_nodes[1].ready = false;
        assert_int_equal(agent_evict_node(w->agent, "n2", false, 60 * S), 2);
        agent_fleet_changed(w->agent);
        step(w, 3 * S);
        assert_true(step_until(w, rolled_out, "lost", 10 * S));
        assert_int_equal(pods_with(w, "lost-", "box"), 4);
        assert_int_equal(count_pods(w, "lost-v1", true), 4);

        /* a rollout now: it ends, all four on box, as if n2's were gone */
        apply(w, manifest("lost", 4, "lost-v2", strategy, NULL));
        assert_true(step_until(w, settled, "lost", 30 * S));
        assert_int_equal(count_pods(w, "lost-v2", true), 4);
        assert_int_equal(count_pods(w, "lost-v1", true), 0);
        assert_int_equal(dep(w, "lost")->status.updated_replicas, 4);
        assert_int_equal(dep(w, "lost")->status.available_replicas, 4);

        fleet_lost = NULL;
        world_free(w);
}

/* A scale-down in a fleet deletes first the pods of a lost node (Unknown),
 * then those of the node that runs the most of the ReplicaSet's pods:
 * Kubernetes' ranks (§7.2), which the planner has and the controller must
 * fill in. */
static void test_fleet_scale_down_ranks(void **state) {
        world *w = world_new();

        fleet_leads = true;
        fleet_fenced = false;
        fleet_lost = NULL;
        fleet_agent(w, false);
        fleet_nodes[1].ready = fleet_nodes[2].ready = false; /* box alone */
        apply(w, manifest("rank", 4, "rank-v1", NULL, NULL));
        assert_true(step_until(w, rolled_out, "rank", 10 * S));
        assert_int_equal(pods_with(w, "rank-", "box"), 4);

        /* n2 comes; two more, both there, and running a while later than
         * box's (ready for less time: without the node rank, deleted first) */
        fleet_nodes[1].ready = true;
        agent_fleet_changed(w->agent);
        assert_int_equal(agent_scale_deployment(w->agent, "default", "rank", 6), 0);
        step(w, 2 * S);
        assert_int_equal(pods_with(w, "rank-", "n2"), 2);
        node_runs_its_pods(w, "n2");
        assert_true(step_until(w, rolled_out, "rank", 10 * S));

        /* to 4: box runs four of six, n2 two: box's go */
        assert_int_equal(agent_scale_deployment(w->agent, "default", "rank", 4), 0);
        step(w, 2 * S);
        assert_int_equal(pods_with(w, "rank-", "box") - count_deleting(w, "rank-", "box"), 2);
        assert_int_equal(pods_with(w, "rank-", "n2") - count_deleting(w, "rank-", "n2"), 2);

        /* n2 lost (not yet evicted): to 3, n2's pod goes first although box
         * runs as many */
        fleet_lost = "n2";
        assert_int_equal(agent_scale_deployment(w->agent, "default", "rank", 3), 0);
        step(w, 2 * S);
        assert_int_equal(pods_with(w, "rank-", "box") - count_deleting(w, "rank-", "box"), 2);
        assert_int_equal(pods_with(w, "rank-", "n2") - count_deleting(w, "rank-", "n2"), 1);

        fleet_lost = NULL;
        world_free(w);
}

/* Placement counts the pods that stay: a node's terminating pods are
 * going (issue 29: the leader's own leave its store at their exit, other
 * nodes' an etcd round trip later, so counting them favoured the leader's
 * node). Two pods of n2 deleted (n2 stops them; nobody here does): both
 * replacements go to n2 (counted, its terminating pods sent one of them to
 * box whatever the tie-break: 3 and 1). */
static void test_fleet_place_terminating(void **state) {
        world *w = world_new();
        const void *const *items;
        size_t n;
        char *victims[2] = {};
        size_t k = 0;

        fleet_leads = true;
        fleet_fenced = false;
        fleet_lost = NULL;
        fleet_agent(w, false);
        fleet_nodes[2].ready = false; /* box and n2 */
        /* maxSurge 2: room for both replacements while n2's pods terminate */
        apply(w,
              manifest("pl", 4, "pl-v1",
                       "  strategy:\n    rollingUpdate: {maxSurge: 2, maxUnavailable: 0}\n", NULL));
        step(w, 2 * S);
        assert_int_equal(pods_with(w, "pl-", "n2"), 2);
        node_runs_its_pods(w, "n2");
        assert_true(step_until(w, rolled_out, "pl", 10 * S));
        n = store_list(w->store, STORE_POD, &items);
        for (size_t i = 0; i < n && k < 2; i++)
                if (streq_ptr(((const spec_pod *) items[i])->spec.node_name, "n2"))
                        victims[k++] = strdup(((const spec_pod *) items[i])->metadata.name);
        assert_int_equal(k, 2);
        for (size_t i = 0; i < 2; i++) {
                assert_int_equal(agent_delete_pod(w->agent, "default", victims[i], -1), 0);
                free(victims[i]);
        }
        step(w, 2 * S);
        assert_int_equal(count_deleting(w, "pl-", "n2"), 2);
        assert_int_equal(pods_with(w, "pl-", "n2") - count_deleting(w, "pl-", "n2"), 2);
        assert_int_equal(pods_with(w, "pl-", "box"), 2);
        world_free(w);
}

/* In a fleet a fixed containerPort is the node's (pods run on the host
 * network): the leader puts no two pods taking one port on one node (as
 * Kubernetes' NodePorts filter for hostPort); ports tendd holds
 * (tend.io/listen), which a deployment's pods on a node share, do not count. */
/* The PodScheduled condition's message of the first unbound pod named prefix*. */
static const char *unscheduled_why(world *w, const char *prefix) {
        const void *const *items;
        size_t n = store_list(w->store, STORE_POD, &items);
        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                const spec_condition *c = spec_get_condition(
                        p->status.conditions, p->status.n_conditions, "PodScheduled");
                if (startswith(p->metadata.name, prefix) && !p->spec.node_name && c &&
                    streq_ptr(c->reason, "Unschedulable"))
                        return c->message;
        }
        return NULL;
}

static spec_deployment *holding(spec_deployment *d, const char *ports) {
        assert_int_equal(
                spec_map_set(&d->spec.template.metadata.annotations, SPEC_ANN_LISTEN, ports), 0);
        return d;
}

static void test_fleet_ports(void **state) {
        world *w = world_new();

        fleet_leads = true;
        fleet_fenced = false;
        fleet_agent(w, false);

        /* 4 replicas taking port 8080: one per node, the 4th waits, saying why */
        apply(w, manifest("web", 4, "web-v1", NULL,
                          "        ports: [{name: http, containerPort: 8080}]\n"));
        step(w, 3 * S);
        assert_int_equal(pods_with(w, "web-", "box"), 1);
        assert_int_equal(pods_with(w, "web-", "n2"), 1);
        assert_int_equal(pods_with(w, "web-", "n3"), 1);
        assert_int_equal(pods_with(w, "web-", NULL), 1);
        assert_non_null(find_event(w, "FailedScheduling", "fixed ports (containerPort) free"));
        assert_non_null(unscheduled_why(w, "web-"));
        assert_non_null(strstr(unscheduled_why(w, "web-"), "containerPort"));

        /* another deployment on 8080 finds no node either */
        apply(w, manifest("other", 1, "other-v1", NULL,
                          "        ports: [{containerPort: 8080}, {name: x}]\n"));
        step(w, 2 * S);
        assert_int_equal(pods_with(w, "other-", NULL), 1);

        /* a port tendd holds: shared by the deployment's pods on a node */
        apply(w, holding(manifest("held", 6, "held-v1", NULL,
                                  "        ports: [{name: http, containerPort: 9090}]\n"),
                         "http"));
        step(w, 3 * S);
        assert_int_equal(pods_with(w, "held-", "box"), 2);
        assert_int_equal(pods_with(w, "held-", "n2"), 2);
        assert_int_equal(pods_with(w, "held-", "n3"), 2);

        /* ... but not with another deployment, holding it or not */
        apply(w, manifest("fixed9", 1, "fixed9-v1", NULL,
                          "        ports: [{name: p, containerPort: 9090}]\n"));
        apply(w, holding(manifest("held2", 1, "held2-v1", NULL,
                                  "        ports: [{name: http, containerPort: 9090}]\n"),
                         "http"));
        step(w, 3 * S);
        assert_int_equal(pods_with(w, "fixed9-", NULL), 1);
        assert_int_equal(pods_with(w, "held2-", NULL), 1);

        /* a fourth node: one of the pods waiting for 8080 goes there, and
         * one of those waiting for 9090 */
        fleet_nodes[3] = (plan_node){ .name = "n4", .ready = true };
        fleet_n_nodes = 4;
        agent_fleet_changed(w->agent);
        step(w, 2 * S);
        assert_int_equal(pods_with(w, "web-", "n4") + pods_with(w, "other-", "n4"), 1);
        assert_int_equal(pods_with(w, "fixed9-", "n4") + pods_with(w, "held2-", "n4"), 1);
        assert_int_equal(pods_with(w, "web-", NULL) + pods_with(w, "other-", NULL) +
                                 pods_with(w, "fixed9-", NULL) + pods_with(w, "held2-", NULL),
                         2);
        fleet_n_nodes = 3;
        world_free(w);
}

/* One host (no --fleet): nodeSelector is refused at apply, saying why. */
static void test_node_selector_single_host(void **state) {
        world *w = world_new();
        spec_deployment *d = manifest("web", 1, "web-v1", NULL, NULL);
        spec_errors errs = {};
        char *text = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&text, &len);

        assert_int_equal(spec_map_set(&d->spec.template.spec.node_selector, "zone", "b"), 0);
        assert_true(agent_apply(w->agent, &d, 1, &errs, NULL) < 0);
        spec_errors_print(&errs, m);
        fclose(m);
        assert_non_null(strstr(text, "spec.template.spec.nodeSelector"));
        assert_non_null(strstr(text, "--fleet"));
        assert_null(dep(w, "web"));
        free(text);
        spec_errors_done(&errs);
        spec_deployment_free(d);
        world_free(w);
}

/* A ConfigMap of the default namespace, put in the store as the API would. */
static void put_config_map(world *w, const char *name, const char *key, const char *value) {
        char *yaml = strprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\n"
                               "data: {%s: \"%s\"}\n",
                               name, key, value);
        spec_manifest m = {};
        spec_errors errs = {};
        const spec_config_map *old = store_get(w->store, STORE_CONFIG_MAP, "default", name);
        spec_config_map *c;

        assert_int_equal(spec_manifest_add_buffer(&m, "cm", yaml, strlen(yaml), &errs), 0);
        c = m.items[0].object;
        m.items[0].object = NULL;
        spec_manifest_done(&m);
        free(yaml);
        if (old)
                c->metadata.uid = strdup(old->metadata.uid);
        assert_int_equal(store_put(w->store, STORE_CONFIG_MAP, c, NULL), 0);
}

static const spec_pod *first_pod(world *w) {
        const void *const *items;
        return store_list(w->store, STORE_POD, &items) ? items[0] : NULL;
}

/* Volumes: refused where tendd cannot mount them; a missing ConfigMap
 * holds the pod (ContainerCreating, FailedMount) until it is made; its
 * files go to the start, an edit to the running pod; its pod's removal
 * removes them. */
static void test_volumes(void **state) {
        world *w = world_new();
        const char *vol = "        volumeMounts: [{name: cfg, mountPath: /etc/app}]\n"
                          "      volumes: [{name: cfg, configMap: {name: app}}]\n";
        spec_deployment *d = manifest("web", 1, "web-v1", NULL, vol);
        spec_errors errs = {};
        const spec_pod *p;
        const spec_event *e;
        char *text = NULL, *uid;
        size_t len = 0;
        FILE *m = open_memstream(&text, &len);

        /* where it cannot mount, the apply is refused, and nothing made */
        w->mount_problem = "no mounts here";
        assert_true(agent_apply(w->agent, &d, 1, &errs, NULL) < 0);
        spec_errors_print(&errs, m);
        fclose(m);
        assert_non_null(strstr(text, "spec.template.spec.containers[0].volumeMounts: Forbidden: "
                                     "no mounts here"));
        assert_null(dep(w, "web"));
        free(text);
        spec_errors_done(&errs);
        w->mount_problem = NULL;

        /* missing: waits, says why, starts nothing */
        apply(w, d);
        step(w, 2 * S);
        p = first_pod(w);
        assert_non_null(p);
        assert_string_equal(p->status.container_statuses[0].state.waiting->reason,
                            "ContainerCreating");
        assert_non_null(strstr(p->status.container_statuses[0].state.waiting->message,
                               "configmap \"app\" not found"));
        e = find_event(w, "FailedMount", "MountVolume.SetUp failed for volume \"cfg\"");
        assert_non_null(e);
        assert_int_equal(w->starts, 0);

        /* made: the pod starts with its files */
        put_config_map(w, "app", "app.conf", "port=1");
        assert_true(step_until(w, rolled_out, "web", 10 * S));
        assert_int_equal(w->starts, 1);
        assert_string_equal(w->started_file, "app.conf=port=1");
        assert_int_equal(w->volume_updates, 0);

        /* an edit: the running pod's files, not a new pod */
        put_config_map(w, "app", "app.conf", "port=2");
        step(w, 1 * S);
        assert_int_equal(w->volume_updates, 1);
        assert_string_equal(w->updated_file, "app.conf=port=2");
        assert_int_equal(w->starts, 1);
        /* a ConfigMap it does not use changes nothing of it */
        put_config_map(w, "other", "x", "y");
        step(w, 1 * S);
        assert_int_equal(w->volume_updates, 1);

        /* deleted: its volumes go with its pod */
        uid = strdup(first_pod(w)->metadata.uid);
        assert_int_equal(agent_delete_deployment(w->agent, "default", "web"), 0);
        step(w, 10 * S);
        assert_null(first_pod(w));
        assert_true(strv_contains(w->removed_volumes, uid));
        free(uid);
        world_free(w);
}

/* Snapshots (tend.io/snapshot-of) of the ConfigMap name, counted. */
static size_t count_snapshots(world *w, const char *of) {
        const void *const *items;
        size_t n = store_list(w->store, STORE_CONFIG_MAP, &items), c = 0;
        for (size_t i = 0; i < n; i++)
                c += streq_ptr(
                        spec_map_get(&((const spec_config_map *) items[i])->metadata.annotations,
                                     SPEC_ANN_SNAPSHOT_OF),
                        of);
        return c;
}

/* The ConfigMap that the newest ReplicaSet of deployment name runs with. */
static const char *config_of(world *w, const char *name) {
        const void *const *items;
        size_t n = store_list(w->store, STORE_REPLICA_SET, &items);
        const spec_replica_set *newest = NULL;
        for (size_t i = 0; i < n; i++) {
                const spec_replica_set *rs = items[i];
                if (startswith(rs->metadata.name, name) &&
                    (!newest ||
                     spec_meta_revision(&rs->metadata) > spec_meta_revision(&newest->metadata)))
                        newest = rs;
        }
        return newest ? newest->spec.template.spec.containers[0].env_from[0].config_map_ref->name
                      : NULL;
}

/* tend.io/config-rollout: a change of the ConfigMap is a new revision that
 * runs with a snapshot of it; a rollback brings the old snapshot back; the
 * history limit prunes snapshots with their ReplicaSets; without the
 * annotation nothing rolls; the deployment's deletion takes them all. */
static void test_config_rollout(void **state) {
        world *w = world_new();
        const char *env = "        envFrom: [{configMapRef: {name: app}}]\n";
        char *first;
        int64_t rev = 0;
        char *err = NULL;

        put_config_map(w, "app", "mode", "one");
        apply(w, annotated(manifest("web", 2, "web-v1", "  revisionHistoryLimit: 2\n", env),
                           SPEC_ANN_CONFIG_ROLLOUT, "true"));
        apply(w, manifest("plain", 1, "plain-v1", NULL, env));
        assert_true(step_until(w, settled, "web", 10 * S));
        assert_true(step_until(w, settled, "plain", 10 * S));
        assert_int_equal(count_rs(w, "web", false), 1);
        assert_int_equal(count_snapshots(w, "app"), 1);
        first = strdup(config_of(w, "web"));
        assert_true(startswith(first, "app-"));
        {
                /* the revision says what it runs with (tend rollout history) */
                const void *const *items;
                char *want = strprintf("configmap/%s", first);
                size_t n = store_list(w->store, STORE_REPLICA_SET, &items);
                bool seen = false;
                for (size_t i = 0; i < n; i++) {
                        const spec_replica_set *rs = items[i];
                        const char *v = spec_map_get(&rs->metadata.annotations, SPEC_ANN_CONFIG);
                        if (startswith(rs->metadata.name, "web-"))
                                seen = seen || streq_ptr(v, want);
                        else
                                assert_null(v); /* plain: no annotation */
                }
                assert_true(seen);
                free(want);
        }
        assert_int_equal(strlen(first), strlen("app-") + SPEC_CONFIG_HASH_LEN);
        /* the deployment itself still names app, as applied */
        assert_string_equal(
                dep(w, "web")->spec.template.spec.containers[0].env_from[0].config_map_ref->name,
                "app");
        assert_string_equal(config_of(w, "plain"), "app");

        /* an edit: a new revision, rolled out; the plain one stays */
        put_config_map(w, "app", "mode", "two");
        step(w, 100 * MS);
        assert_true(step_until(w, settled, "web", 10 * S));
        assert_int_equal(count_rs(w, "web", false), 2);
        assert_int_equal(count_rs(w, "plain", false), 1);
        assert_string_not_equal(config_of(w, "web"), first);
        assert_int_equal(count_snapshots(w, "app"), 2);
        assert_string_equal(spec_map_get(&dep(w, "web")->metadata.annotations, SPEC_ANN_REVISION),
                            "2");
        /* the same content again: no new revision */
        put_config_map(w, "app", "mode", "two");
        step(w, 1 * S);
        assert_int_equal(count_rs(w, "web", false), 2);

        /* rollback: the old content, by its snapshot */
        assert_int_equal(agent_rollback(w->agent, "default", "web", 1, false, &rev, &err), 0);
        assert_true(step_until(w, settled, "web", 10 * S));
        assert_string_equal(config_of(w, "web"), first);
        assert_string_equal(
                dep(w, "web")->spec.template.spec.containers[0].env_from[0].config_map_ref->name,
                first);
        /* the deployment names a snapshot now: an edit of app rolls nothing */
        put_config_map(w, "app", "mode", "three");
        step(w, 1 * S);
        assert_int_equal(count_rs(w, "web", false), 2);

        /* applied again, it follows app: three more edits, and the history
         * limit (2 old) prunes the snapshots of the pruned ReplicaSets */
        apply(w, annotated(manifest("web", 2, "web-v1", "  revisionHistoryLimit: 2\n", env),
                           SPEC_ANN_CONFIG_ROLLOUT, "true"));
        assert_true(step_until(w, settled, "web", 10 * S));
        put_config_map(w, "app", "mode", "four");
        step(w, 100 * MS);
        assert_true(step_until(w, settled, "web", 10 * S));
        put_config_map(w, "app", "mode", "five");
        step(w, 100 * MS);
        assert_true(step_until(w, settled, "web", 10 * S));
        step(w, 1 * S);
        assert_int_equal(count_rs(w, "web", false), 3);
        assert_int_equal(count_snapshots(w, "app"), 3);

        /* deleted: its snapshots go with it, app stays */
        assert_int_equal(agent_delete_deployment(w->agent, "default", "web"), 0);
        step(w, 10 * S);
        assert_int_equal(count_rs(w, "web", false), 0);
        assert_int_equal(count_snapshots(w, "app"), 0);
        assert_non_null(store_get(w->store, STORE_CONFIG_MAP, "default", "app"));
        free(first);
        free(err);
        world_free(w);
}

static void test_fleet_binding(void **state) {
        world *w = world_new();
        const void *const *items;
        size_t n;

        fleet_leads = false;
        fleet_agent(w, true);

        /* Not the leader: the declaration is stored, nothing is made. */
        apply(w, manifest("web", 6, "web-v1", NULL, NULL));
        step(w, 2 * S);
        assert_int_equal(count_rs(w, "web", false), 0);
        assert_int_equal(store_list(w->store, STORE_POD, &items), 0);

        /* Leading: six pods, spread over the two schedulable nodes (n3 is
         * cordoned); only this node's three run here. */
        fleet_leads = true;
        agent_fleet_changed(w->agent);
        step(w, 3 * S);
        assert_int_equal(count_rs(w, "web", false), 1);
        n = store_list(w->store, STORE_POD, &items);
        assert_int_equal(n, 6);
        assert_int_equal(pods_on(w, "box"), 3);
        assert_int_equal(pods_on(w, "n2"), 3);
        assert_int_equal(count_pods(w, "web-v1", true), 3);
        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                const spec_condition *c = spec_get_condition(
                        p->status.conditions, p->status.n_conditions, "PodScheduled");
                assert_non_null(c);
                assert_string_equal(c->status, "True");
                if (streq(p->spec.node_name, "n2")) /* n2 runs these: not started here */
                        assert_int_equal(p->status.phase, SPEC_POD_PENDING);
                else
                        assert_int_equal(p->status.phase, SPEC_POD_RUNNING);
        }
        assert_non_null(find_event(w, "Scheduled", "to n2"));

        /* No node fits: the new pods wait unbound, Unschedulable, and are
         * placed when a node comes. */
        fleet_nodes[0].ready = fleet_nodes[1].ready = false;
        apply(w, manifest("api", 2, "api-v1", NULL, NULL));
        step(w, 2 * S);
        assert_int_equal(pods_on(w, NULL), 2);
        assert_non_null(find_event(w, "FailedScheduling", "0/3 nodes are available"));
        fleet_nodes[2].unschedulable = false;
        agent_fleet_changed(w->agent);
        step(w, 2 * S);
        assert_int_equal(pods_on(w, NULL), 0);
        assert_int_equal(pods_on(w, "n3"), 2);

        /* An unbound pod being deleted is the leader's to remove. */
        fleet_nodes[2].ready = false;
        const spec_deployment *d = dep(w, "web");
        assert_int_equal(agent_scale_deployment(w->agent, "default", "web", 8), 0);
        step(w, 2 * S);
        assert_int_equal(pods_on(w, NULL), 2);
        assert_int_equal(agent_delete_deployment(w->agent, "default", "web"), 0);
        step(w, 5 * S);
        assert_int_equal(pods_on(w, NULL), 0);
        (void) d;

        /* nodeSelector: only the nodes with the labels (n2: zone=b). */
        spec_map zone_b = {};
        assert_int_equal(spec_map_set(&zone_b, "zone", "b"), 0);
        fleet_nodes[0].ready = fleet_nodes[1].ready = fleet_nodes[2].ready = true;
        fleet_nodes[1].labels = &zone_b;
        spec_deployment *sel = manifest("sel", 3, "sel-v1", NULL, NULL);
        assert_int_equal(spec_map_set(&sel->spec.template.spec.node_selector, "zone", "b"), 0);
        apply(w, sel);
        step(w, 2 * S);
        n = store_list(w->store, STORE_POD, &items);
        size_t on_b = 0, sel_pods = 0;
        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                if (!startswith(p->metadata.name, "sel-"))
                        continue;
                sel_pods++;
                on_b += streq_ptr(p->spec.node_name, "n2");
        }
        assert_int_equal(sel_pods, 3);
        assert_int_equal(on_b, 3);
        fleet_nodes[1].labels = NULL;
        spec_map_done(&zone_b);

        /* A process of this node's that dies is restarted in place: the
         * same pod, restartCount + 1, its death as lastState; no new pod. */
        fleet_nodes[0].ready = true; /* box alone */
        fleet_nodes[1].ready = fleet_nodes[2].ready = false;
        apply(w, manifest("job", 2, "job-v1", NULL, NULL));
        assert_true(step_until(w, rolled_out, "job", 10 * S));
        proc *victim = NULL;
        for (size_t i = 0; i < w->n_procs; i++)
                if (w->procs[i]->alive && streq(w->procs[i]->image, "job-v1"))
                        victim = w->procs[i];
        assert_non_null(victim);
        size_t pods_before = store_list(w->store, STORE_POD, &items);
        _cleanup_free_ char *vname = strdup(victim->pod);
        fb_signal(victim, SIGKILL);
        fire(w);
        process(w);
        const spec_pod *vp = store_get(w->store, STORE_POD, "default", vname);
        assert_non_null(vp);
        assert_int_equal(store_list(w->store, STORE_POD, &items), pods_before);
        assert_int_equal(vp->status.container_statuses[0].restart_count, 1);
        assert_non_null(vp->status.container_statuses[0].last_state.terminated);
        assert_int_equal(vp->status.container_statuses[0].last_state.terminated->signal, 9);
        assert_true(step_until(w, rolled_out, "job", 10 * S));
        vp = store_get(w->store, STORE_POD, "default", vname);
        assert_int_equal(vp->status.phase, SPEC_POD_RUNNING);
        assert_int_equal(vp->status.container_statuses[0].restart_count, 1);
        assert_false(has_failed_pod(w, NULL));

        /* Cut off from etcd: the pods under tend.io/node-lost-policy: fence
         * stop and do not start again; the others run on. Back: they do. */
        apply(w, annotated(manifest("fenced", 2, "fenced-v1", NULL, NULL),
                           SPEC_ANN_NODE_LOST_POLICY, "fence"));
        assert_true(step_until(w, rolled_out, "fenced", 10 * S));
        assert_int_equal(count_pods(w, "fenced-v1", true), 2);
        size_t job_alive = count_pods(w, "job-v1", true);
        fleet_fenced = true;
        agent_fleet_changed(w->agent);
        step(w, 10 * S);
        assert_int_equal(count_pods(w, "fenced-v1", true), 0);
        assert_int_equal(count_pods(w, "job-v1", true), job_alive);
        assert_non_null(find_event(w, "Fenced", "cut off from etcd"));
        fleet_fenced = false;
        agent_fleet_changed(w->agent);
        assert_true(step_until(w, rolled_out, "fenced", 30 * S));
        assert_int_equal(count_pods(w, "fenced-v1", true), 2);
        world_free(w);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_fleet_binding),
                cmocka_unit_test(test_fleet_ports),
                cmocka_unit_test(test_fleet_lost_node_rollout),
                cmocka_unit_test(test_fleet_scale_down_ranks),
                cmocka_unit_test(test_fleet_place_terminating),
                cmocka_unit_test(test_node_selector_single_host),
                cmocka_unit_test(test_volumes),
                cmocka_unit_test(test_config_rollout),
                cmocka_unit_test(test_undo_after_auto_rollback),
                cmocka_unit_test(test_first_rollout),
                cmocka_unit_test(test_kill_replaced),
                cmocka_unit_test(test_rolling_update_bounds),
                cmocka_unit_test(test_rollback),
                cmocka_unit_test(test_history_limit),
                cmocka_unit_test(test_crash_loop_backoff),
                cmocka_unit_test(test_mass_failure_no_backoff),
                cmocka_unit_test(test_round_robin_kills),
                cmocka_unit_test(test_one_replica_backs_off_alone),
                cmocka_unit_test(test_crashing_template_each_backs_off),
                cmocka_unit_test(test_streak_cleared_after_a_minute),
                cmocka_unit_test(test_backoff_annotation),
                cmocka_unit_test(test_start_error),
                cmocka_unit_test(test_start_short_of_fds),
                cmocka_unit_test(test_start_error_spin),
                cmocka_unit_test(test_progress_deadline),
                cmocka_unit_test(test_canary),
                cmocka_unit_test(test_canary_no_surge),
                cmocka_unit_test(test_auto_rollback),
                cmocka_unit_test(test_pause_and_proportional),
                cmocka_unit_test(test_recreate),
                cmocka_unit_test(test_hand_scaled_rs_reverted),
                cmocka_unit_test(test_min_ready_seconds),
                cmocka_unit_test(test_restart_mid_rollout),
                cmocka_unit_test(test_lost_while_down),
                cmocka_unit_test(test_selector_contract),
                cmocka_unit_test(test_delete_cascades),
                cmocka_unit_test(test_delete_foreground),
                cmocka_unit_test(test_delete_pod_replaced),
                cmocka_unit_test(test_liveness_failure),
                cmocka_unit_test(test_rollout_restart),
                cmocka_unit_test(test_pause_keeps_deadline),
                cmocka_unit_test(test_scale_up_with_terminating),
                cmocka_unit_test(test_bound_delete_surge_0),
                cmocka_unit_test(test_bound_delete_mid_rollout),
                cmocka_unit_test(test_bound_scale_down_then_kill),
                cmocka_unit_test(test_bound_old_rs_hand_scaled),
                cmocka_unit_test(test_rollback_renumber_sticks),
                cmocka_unit_test(test_failed_commit_recovers),
                cmocka_unit_test(test_crash_between_spawn_and_commit),
                cmocka_unit_test(test_crash_between_spawn_and_record),
                cmocka_unit_test(test_random_sequences),
                cmocka_unit_test(test_out_of_memory),
        };
        log_set_max_level(LOG_LEVEL_WARNING);
        if (getenv("TEST_FILTER"))
                cmocka_set_test_filter(getenv("TEST_FILTER"));
        return cmocka_run_group_tests(tests, NULL, NULL);
}
