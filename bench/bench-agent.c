/* SPDX-License-Identifier: MIT */

/*
 * bench-agent: the agent at work, with real processes — the agent library
 * on a libuv loop (what tendd runs), its API on a socket for `tend get`.
 * Times come from the store's change notifications, i.e. the moment the
 * agent has durably recorded what happened.
 *
 *   bench-agent [--quick]                  the process runtime
 *   bench-agent --runtime systemd          kill → replacement with units, and
 *                                          systemd's own Restart=always beside it
 *                                          (under tests/systemd/harness.sh)
 *
 * Prints a table: min, median, p95 where there are trials, else the figure.
 * Figures, not a pass/fail test.
 */

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "bench.h"
#include "rt-internal.h"
#include "agent-loop.h"
#include "tend/api.h"

static char testprog[PATH_MAX], webprog[PATH_MAX], tendprog[PATH_MAX], tenddprog[PATH_MAX];
static long rss_start; /* the bench with its agent, before any pod */
static bool quick, on_systemd;
static sd_bus *bus; /* --runtime systemd: the bench's own, synchronous */

static uv_loop_t loop;
static agent_loop *al;
static api_server *api;
static char dir[64], sock[128];

/* ---- figures --------------------------------------------------------------------------- */

static void row_trials(const char *what, double *v, size_t n, const char *unit) {
        qsort(v, n, sizeof *v, bench_cmp_double);
        printf("%-58s %9.1f %9.1f %9.1f  %s (n=%zu)\n", what, v[0], v[n / 2],
               v[(size_t) (0.95 * (double) (n - 1) + 0.5)], unit, n);
        fflush(stdout);
}

static void row(const char *what, double v, const char *unit) {
        printf("%-58s %29.1f  %s\n", what, v, unit);
        fflush(stdout);
}

static double ms_since(usec_t t0) {
        return (double) (now_monotonic() - t0) / USEC_PER_MSEC;
}

/* ---- the agent ------------------------------------------------------------------------- */

static store *S(void) {
        return agent_loop_store(al);
}

static void on_deadline(uv_timer_t *t) {
        *(bool *) t->data = true;
}

static void on_tick(uv_timer_t *t) {
}

static bool run_until(bool (*pred)(void *), void *arg, unsigned timeout_ms) {
        uv_timer_t t, tick;
        bool expired = false;

        uv_timer_init(&loop, &t);
        uv_timer_init(&loop, &tick);
        t.data = &expired;
        uv_timer_start(&t, on_deadline, timeout_ms, 0);
        uv_timer_start(&tick, on_tick, 5, 5);
        while (!pred(arg) && !expired)
                uv_run(&loop, UV_RUN_ONCE);
        uv_close((uv_handle_t *) &t, NULL);
        uv_close((uv_handle_t *) &tick, NULL);
        uv_run(&loop, UV_RUN_NOWAIT);
        return pred(arg);
}

static bool never(void *arg) {
        return false;
}

static void run_for(unsigned ms) {
        (void) run_until(never, NULL, ms);
}

static void apply(const char *yaml) {
        spec_manifest m = {};
        spec_errors errs = {};

        if (spec_manifest_add_buffer(&m, "bench", yaml, strlen(yaml), &errs) < 0 ||
            agent_apply(agent_loop_agent(al), &m.items[0].deployment, 1, &errs, NULL) < 0) {
                spec_errors_print(&errs, stderr);
                fprintf(stderr, "bench-agent: bad manifest:\n%s", yaml);
                exit(1);
        }
        spec_errors_done(&errs);
        spec_manifest_done(&m);
        agent_loop_kick(al);
}

/* A deployment of testprog (sleep) or tend-example-web (with a readiness
 * probe on /healthz, ready after ready_after seconds). */
static void deploy(const char *name, int replicas, bool web, double ready_after,
                   const char *version, const char *strategy) {
        _cleanup_free_ char *command =
                web ? strprintf("\"%s\", \"--version=%s\", \"--ready-after=%g\"", webprog, version,
                                ready_after)
                    : strprintf("\"%s\", sleep", testprog);
        _cleanup_free_ char *yaml = strprintf(
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: %s}\n"
                "spec:\n  replicas: %d\n  selector: {matchLabels: {app: %s}}\n%s"
                "  template:\n    metadata: {labels: {app: %s}%s}\n    spec:\n"
                "      runtimeClassName: %s\n      terminationGracePeriodSeconds: 2\n"
                "      containers:\n      - name: main\n        command: [%s]\n%s",
                name, replicas, name, strategy ?: "", name,
                web ? ", annotations: {tend.io/lease-ports: http}" : "",
                on_systemd ? "systemd" : "process", command,
                web ? "        readinessProbe: {httpGet: {port: http, path: /healthz}, "
                      "periodSeconds: 1}\n"
                    : "");
        apply(yaml);
}

static void scale(const char *name, int replicas) {
        if (agent_scale_deployment(agent_loop_agent(al), "default", name, replicas) < 0) {
                fprintf(stderr, "bench-agent: scale %s failed\n", name);
                exit(1);
        }
        agent_loop_kick(al);
}

static bool mine(const spec_pod *p, const char *app) {
        return streq_ptr(spec_map_get(&p->metadata.labels, "app"), app) && !spec_pod_terminal(p) &&
               !p->metadata.deletion_timestamp;
}

static size_t count(const char *app, bool want_ready) {
        const void *const *items;
        size_t n = store_list(S(), STORE_POD, &items), k = 0;

        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                if (mine(p, app) && p->status.phase == SPEC_POD_RUNNING &&
                    (!want_ready || spec_pod_ready(p, NULL)))
                        k++;
        }
        return k;
}

typedef struct want {
        const char *app;
        size_t n;
        bool ready;
} want;

static bool have(void *arg) {
        const want *w = arg;
        return count(w->app, w->ready) >= w->n;
}

static bool rolled_out(void *name) {
        const spec_deployment *d = store_get(S(), STORE_DEPLOYMENT, "default", name);
        char msg[256];
        return d && spec_rollout_status(d, 0, msg, sizeof msg) == SPEC_ROLLOUT_DONE &&
               d->status.replicas == d->spec.replicas;
}

static pid_t main_pid_of_unit(const char *unit) {
        _cleanup_free_ char *path = NULL;
        uint32_t pid = 0;

        if (sd_bus_path_encode("/org/freedesktop/systemd1/unit", unit, &path) < 0)
                return 0;
        (void) sd_bus_get_property_trivial(bus, "org.freedesktop.systemd1", path,
                                           "org.freedesktop.systemd1.Service", "MainPID", NULL, 'u',
                                           &pid);
        return (pid_t) pid;
}

static pid_t pid_of(const spec_pod *p) {
        const char *cid = p->status.n_container_statuses
                                  ? p->status.container_statuses[0].container_id
                                  : NULL;
        if (!cid)
                return 0;
        if (startswith(cid, "process://"))
                return (pid_t) atoi(cid + strlen("process://"));
        if (startswith(cid, "systemd://"))
                return main_pid_of_unit(cid + strlen("systemd://"));
        return 0;
}

/* ---- replacement after kill -9 -------------------------------------------------------- */

/* Set by the store notifications: when a pod not in `before` was first
 * seen Running, and Ready. */
static struct {
        char **before;
        const char *app;
        usec_t running, ready;
} watch;

static void on_change(store_kind kind, store_change change, const void *obj, void *u) {
        const spec_pod *p = obj;

        if (kind != STORE_POD || change == STORE_DELETED || !watch.app || !mine(p, watch.app) ||
            strv_contains(watch.before, p->metadata.name))
                return;
        if (!watch.running && p->status.phase == SPEC_POD_RUNNING)
                watch.running = now_monotonic();
        if (!watch.ready && p->status.phase == SPEC_POD_RUNNING && spec_pod_ready(p, NULL))
                watch.ready = now_monotonic();
}

static bool replaced(void *arg) {
        return watch.ready != 0;
}

static void snapshot(const char *app) {
        const void *const *items;
        size_t n = store_list(S(), STORE_POD, &items);

        watch.before = strv_free(watch.before);
        for (size_t i = 0; i < n; i++)
                if (mine(items[i], app))
                        (void) strv_extend(&watch.before,
                                           ((const spec_pod *) items[i])->metadata.name);
        watch.app = app;
        watch.running = watch.ready = 0;
}

/* The oldest ready replica. */
static const spec_pod *oldest_ready(const char *app) {
        const void *const *items;
        size_t n = store_list(S(), STORE_POD, &items);
        const spec_pod *best = NULL;

        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                if (mine(p, app) && spec_pod_ready(p, NULL) &&
                    (!best || p->status.start_time < best->status.start_time))
                        best = p;
        }
        return best;
}

static void bench_kill_one(void) {
        size_t trials = quick ? 10 : 30;
        double *running = new0(double, trials), *ready = new0(double, trials);
        const char *app = "one";
        want all = { app, 10, true };

        deploy(app, 10, true, 0, "v1", NULL);
        if (!run_until(have, &all, 30000)) {
                fprintf(stderr, "bench-agent: 10 replicas did not become ready\n");
                exit(1);
        }
        /* A deployment in use: its replicas have run a while. Then the
         * oldest is killed every 0.3 s, round-robin, as a chaos tool does;
         * each line dies young at most twice in 30 trials, which the
         * per-replica back-off replaces at once. */
        run_for(10500);
        for (size_t i = 0; i < trials; i++) {
                const spec_pod *victim = oldest_ready(app);
                pid_t pid = victim ? pid_of(victim) : 0;
                usec_t t0;

                if (pid <= 0) {
                        fprintf(stderr, "bench-agent: no pid to kill\n");
                        exit(1);
                }
                snapshot(app);
                t0 = now_monotonic();
                kill(pid, SIGKILL);
                if (!run_until(replaced, NULL, 10000)) {
                        fprintf(stderr, "bench-agent: not replaced within 10 s\n");
                        exit(1);
                }
                running[i] = (double) (watch.running - t0) / USEC_PER_MSEC;
                ready[i] = (double) (watch.ready - t0) / USEC_PER_MSEC;
                watch.app = NULL;
                run_until(have, &all, 10000);
                run_for(300 - (unsigned) MIN(ready[i], 250.0));
        }
        row_trials(on_systemd ? "kill -9 → replacement running (units, 10 replicas)"
                              : "kill -9 → replacement Running, as stored (10 replicas)",
                   running, trials, "ms");
        row_trials(on_systemd ? "kill -9 → replacement Ready (units, 10 replicas)"
                              : "kill -9 → replacement Ready, HTTP probe (10 replicas)",
                   ready, trials, "ms");
        scale(app, 0);
        free(running);
        free(ready);
}

/* ---- many at once ------------------------------------------------------------------------ */

/* A real tendd, idle: its own process, nothing of the bench's. */
static void bench_tendd_idle(void) {
        _cleanup_free_ char *state = strprintf("%s/real", dir), *s = strprintf("%s/real.sock", dir);
        char status[64], line[256];
        long kb = -1, anon = -1;
        pid_t pid = fork();

        if (pid == 0) {
                int null = open("/dev/null", O_WRONLY);
                dup2(null, 1);
                dup2(null, 2);
                execl(tenddprog, tenddprog, "--state-dir", state, "--socket", s, (char *) NULL);
                _exit(127);
        }
        for (int i = 0; i < 100 && access(s, F_OK) < 0; i++)
                usleep(20 * 1000);
        usleep(300 * 1000);
        snprintf(status, sizeof status, "/proc/%d/status", (int) pid);
        FILE *f = fopen(status, "r");
        while (f && fgets(line, sizeof line, f)) {
                (void) sscanf(line, "VmRSS: %ld kB", &kb);
                (void) sscanf(line, "RssAnon: %ld kB", &anon);
        }
        if (f)
                fclose(f);
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
        row("tendd RSS, idle (its own process, no pods)", (double) kb / 1024.0, "MiB");
        row("  of which its own (RssAnon; the rest: shared libraries)", (double) anon / 1024.0,
            "MiB");
}

static void bench_mass(void) {
        const char *app = "many";
        long rss0 = rss_start, rss1;
        struct rusage ru0, ru1;
        usec_t t0;
        want w = { app, 1000, false };

        deploy(app, 0, false, 0, NULL, NULL);
        run_for(200);
        t0 = now_monotonic();
        scale(app, 1000);
        if (!run_until(have, &w, 120000))
                fprintf(stderr, "bench-agent: only %zu of 1000 running\n", count(app, false));
        {
                /* (tendd writes its cgroups' bases there when it makes
                 * pods' cgroups: docs/cgroups.md) */
                char bases[128];
                snprintf(bases, sizeof bases, "%s/cgroups", dir);
                row(access(bases, F_OK) == 0 ? "scale 0 → 1000 running, each in a cgroup"
                                             : "scale 0 → 1000 running (no cgroups here)",
                    ms_since(t0), "ms");
        }

        rss1 = bench_rss_kb();
        row("agent RSS with 1000 pods (in this bench)", (double) rss1 / 1024.0, "MiB");
        row("agent RSS per pod (1000 pods vs at start)", (double) (rss1 - rss0) / 1000.0, "KiB");

        /* Idle: nothing to do but watch 1000 processes — once the last
         * status writes of the scale-up are done, and without the 5 ms
         * tick of run_until(), which is the bench's, not the agent's. */
        unsigned idle = quick ? 5000 : 30000;
        run_for(quick ? 3000 : 10000);
        getrusage(RUSAGE_SELF, &ru0);
        {
                uv_timer_t t;
                bool expired = false;
                uv_timer_init(&loop, &t);
                t.data = &expired;
                uv_timer_start(&t, on_deadline, idle, 0);
                while (!expired)
                        uv_run(&loop, UV_RUN_ONCE);
                uv_close((uv_handle_t *) &t, NULL);
                uv_run(&loop, UV_RUN_NOWAIT); /* t lives on this stack */
        }
        getrusage(RUSAGE_SELF, &ru1);
        double cpu = (double) (ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) * 1e6 +
                     (double) (ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) +
                     (double) (ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) * 1e6 +
                     (double) (ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec);
        row(quick ? "tendd CPU idle with 1000 pods (5 s)" : "tendd CPU idle with 1000 pods (30 s)",
            100.0 * cpu / (idle * 1000.0), "% of a core");

        /* `tend get pods` through the API: the agent serves it meanwhile. */
        {
                size_t n = quick ? 5 : 10;
                double *v = new0(double, n);
                for (size_t i = 0; i < n; i++) {
                        char *args[] = { tendprog, "--socket", sock, "get", "pods", NULL };
                        uv_process_t proc = {};
                        uv_process_options_t o = { .file = tendprog, .args = args };
                        uv_stdio_container_t stdio[3] = { { .flags = UV_IGNORE },
                                                          { .flags = UV_IGNORE },
                                                          { .flags = UV_INHERIT_FD,
                                                            .data.fd = 2 } };
                        o.stdio = stdio;
                        o.stdio_count = 3;
                        t0 = now_monotonic();
                        if (uv_spawn(&loop, &proc, &o) < 0) {
                                fprintf(stderr, "bench-agent: cannot run %s\n", tendprog);
                                break;
                        }
                        /* libuv reaps it, not the runtime's orphan reaper */
                        (void) rt__pid_add(agent_loop_runtime(al), proc.pid);
                        while (uv_is_active((uv_handle_t *) &proc))
                                uv_run(&loop, UV_RUN_ONCE);
                        v[i] = ms_since(t0);
                        rt__pid_remove(agent_loop_runtime(al), proc.pid);
                        uv_close((uv_handle_t *) &proc, NULL);
                        uv_run(&loop, UV_RUN_NOWAIT);
                }
                row_trials("tend get pods, 1000 pods", v, n, "ms");
                free(v);
        }

        /* Mass kills: bench-respawn, timed by the kernel against a tendd
         * of its own. */
        scale(app, 0);
        run_for(3000);
}

/* ---- a rolling update ----------------------------------------------------------------- */

static void bench_rollout(void) {
        const char *app = "roll";
        want all = { app, 100, true };
        usec_t t0;
        /* default strategy: 25 % surge, 25 % unavailable → 25 + 25 per wave */
        int waves = (100 + 49) / 50;
        double readiness = 0.5;

        deploy(app, 100, true, readiness, "v1", NULL);
        if (!run_until(have, &all, 60000) || !run_until(rolled_out, (void *) app, 60000)) {
                fprintf(stderr, "bench-agent: 100 replicas did not become ready\n");
                return;
        }
        t0 = now_monotonic();
        deploy(app, 100, true, readiness, "v2", NULL);
        run_for(50); /* let the new generation be observed */
        if (!run_until(rolled_out, (void *) app, 120000))
                fprintf(stderr, "bench-agent: the rollout did not finish\n");
        double wall = ms_since(t0);
        row("rolling update of 100 replicas, readiness 0.5 s", wall, "ms");
        row("  ideal: waves × readiness (2 × 500 ms)", waves * readiness * 1000, "ms");
        scale(app, 0);
        run_for(3000);
}

/* ---- systemd's own restart, beside ours --------------------------------------------------- */

static void bench_systemd_restart(void) {
        size_t trials = quick ? 10 : 30;
        double *v = new0(double, trials);
        const char *cfg = getenv("XDG_CONFIG_HOME");
        _cleanup_free_ char *unitdir = cfg ? strprintf("%s/systemd/user", cfg) : NULL;
        _cleanup_free_ char *path = unitdir ? strprintf("%s/tendbench@.service", unitdir) : NULL;
        FILE *f;

        _cleanup_free_ char *mk = unitdir ? strprintf("mkdir -p '%s'", unitdir) : NULL;
        if (!path || !mk || system(mk) != 0 || !(f = fopen(path, "w"))) {
                fprintf(stderr, "bench-agent: cannot write a template unit\n");
                return;
        }
        fprintf(f,
                "[Service]\nType=exec\nExecStart=%s sleep\nRestart=always\nRestartSec=0\n"
                "StartLimitIntervalSec=0\n",
                testprog);
        fclose(f);
        if (system("systemctl --user daemon-reload && systemctl --user start "
                   "tendbench@1 tendbench@2 tendbench@3 tendbench@4 tendbench@5 tendbench@6 "
                   "tendbench@7 tendbench@8 tendbench@9 tendbench@10") != 0) {
                fprintf(stderr, "bench-agent: cannot start the template units\n");
                return;
        }
        for (size_t i = 0; i < trials; i++) {
                char unit[32];
                pid_t old, now;
                usec_t t0;

                snprintf(unit, sizeof unit, "tendbench@%zu.service", i % 10 + 1);
                old = main_pid_of_unit(unit);
                t0 = now_monotonic();
                kill(old, SIGKILL);
                do
                        now = main_pid_of_unit(unit);
                while ((now == old || now == 0) && now_monotonic() - t0 < 10 * USEC_PER_SEC);
                v[i] = ms_since(t0);
                usleep(100 * 1000);
        }
        row_trials("  systemd Restart=always, RestartSec=0: kill → new MainPID", v, trials, "ms");
        if (system("systemctl --user stop 'tendbench@*'") != 0)
                fprintf(stderr, "bench-agent: could not stop the template units\n");
        free(v);
}

/* ---- main ------------------------------------------------------------------------------- */

static void find_programs(const char *self) {
        char exe[PATH_MAX - 64];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        char *slash;

        if (n <= 0) {
                fprintf(stderr, "bench-agent: cannot find myself (%s)\n", self);
                exit(1);
        }
        exe[n] = 0;
        slash = strrchr(exe, '/');
        *slash = 0; /* <build>/bench */
        slash = strrchr(exe, '/');
        *slash = 0; /* <build> */
        snprintf(testprog, sizeof testprog, "%s/tests/tend-testprog", exe);
        snprintf(webprog, sizeof webprog, "%s/bin/tend-example-web", exe);
        snprintf(tendprog, sizeof tendprog, "%s/bin/tend", exe);
        snprintf(tenddprog, sizeof tenddprog, "%s/bin/tendd", exe);
        if (access(testprog, X_OK) < 0 || access(webprog, X_OK) < 0 || access(tendprog, X_OK) < 0) {
                fprintf(stderr, "bench-agent: needs %s, %s and %s (make build)\n", testprog,
                        webprog, tendprog);
                exit(1);
        }
}

int main(int argc, char **argv) {
        char *err = NULL;

        for (int i = 1; i < argc; i++) {
                if (streq(argv[i], "--quick"))
                        quick = true;
                else if (streq(argv[i], "--runtime") && i + 1 < argc)
                        on_systemd = streq(argv[++i], "systemd");
                else {
                        fprintf(stderr,
                                "Usage: bench-agent [--quick] [--runtime process|systemd]\n");
                        return 2;
                }
        }
        find_programs(argv[0]);
        signal(SIGPIPE, SIG_IGN);
        log_set_max_level(LOG_LEVEL_WARNING);
        if (on_systemd && sd_bus_open_user(&bus) < 0) {
                fprintf(stderr, "bench-agent: no user bus (run under tests/systemd/harness.sh)\n");
                return 77;
        }

        uv_loop_init(&loop);
        snprintf(dir, sizeof dir, "/tmp/tend-bench-XXXXXX");
        if (!mkdtemp(dir))
                return 1;
        snprintf(sock, sizeof sock, "%s/tend.sock", dir);
        if (agent_loop_new(&loop,
                           &(agent_loop_config){ .state_dir = dir,
                                                 .port_lo = 47000,
                                                 .port_hi = 48999,
                                                 .systemd_bus = RT_BUS_USER },
                           &al, &err) < 0 ||
            api_server_new(&(api_config){ .loop = &loop,
                                          .agent = agent_loop_agent(al),
                                          .state_dir = dir,
                                          .socket_path = sock },
                           &api, &err) < 0) {
                fprintf(stderr, "bench-agent: %s\n", strna(err));
                return 1;
        }
        store_subscribe(S(), on_change, NULL);
        rss_start = bench_rss_kb();

        printf("%-58s %9s %9s %9s\n",
               on_systemd ? "measure (runtimeClassName: systemd)" : "measure", "min", "median",
               "p95");
        bench_kill_one();
        if (on_systemd)
                bench_systemd_restart();
        else {
                bench_tendd_idle();
                bench_mass();
                bench_rollout();
        }

        store_unsubscribe(S(), on_change, NULL);
        api_server_close(api);
        agent_loop_close(al);
        uv_run(&loop, UV_RUN_DEFAULT);
        strv_free(watch.before);
        {
                char *rm = strprintf("rm -rf %s", dir);
                if (system(rm) != 0)
                        fprintf(stderr, "bench-agent: could not remove %s\n", dir);
                free(rm);
        }
        return 0;
}
