/* SPDX-License-Identifier: MIT */

/*
 * bench-runtime: what spawning and watching pods costs the agent.
 *
 *  1. Per-spawn cost of the two spawn paths, uv_spawn (fork) and tend's
 *     clone(CLONE_VM|CLONE_VFORK), at an agent RSS of ~2 MB and ~200 MB:
 *     the time the loop is blocked by one spawn.
 *  2. 1000 pods (rt_pod_start of a sleeping process): time to spawn all,
 *     time until every exit is seen after SIGKILL to all, agent RSS per pod.
 *
 * Prints medians and p95 over several runs. Figures, not a pass/fail test.
 */

#include <signal.h>
#include <stdio.h>
#include <malloc.h>
#include <sys/wait.h>

#include "bench.h"
#include "rt-internal.h"

static int cmp_u64(const void *a, const void *b) {
        usec_t x = *(const usec_t *) a, y = *(const usec_t *) b;
        return x < y ? -1 : x > y;
}

static double pct(usec_t *v, size_t n, double p) {
        qsort(v, n, sizeof *v, cmp_u64);
        size_t i = (size_t) (p * (double) (n - 1) + 0.5);
        return (double) v[i];
}

/* ---- 1. spawn paths ------------------------------------------------------------------ */

static void on_uv_exit(uv_process_t *p, int64_t status, int sig) {
        uv_close((uv_handle_t *) p, (uv_close_cb) free);
}

static usec_t spawn_uv(uv_loop_t *loop) {
        static char *argv[] = { "/bin/true", NULL };
        uv_process_options_t o = {
                .file = argv[0], .args = argv, .exit_cb = on_uv_exit, .flags = UV_PROCESS_DETACHED
        };
        uv_process_t *p = malloc(sizeof *p);
        usec_t t0 = now_monotonic();

        if (uv_spawn(loop, p, &o) < 0) {
                free(p);
                return 0;
        }
        return now_monotonic() - t0;
}

static usec_t spawn_vfork(rt_manager *m) {
        static char *argv[] = { "/bin/true", NULL };
        static char *envp[] = { "PATH=/usr/bin:/bin", NULL };
        rt_spawn s = { .path = argv[0], .argv = argv, .envp = envp };
        usec_t t0 = now_monotonic(), dt;
        char *err = NULL;
        siginfo_t si;
        pid_t pid;
        int pidfd;

        if (rt__spawn(m, &s, &pid, &pidfd, &err) < 0) {
                fprintf(stderr, "spawn: %s\n", err);
                exit(1);
        }
        dt = now_monotonic() - t0;
        waitid(P_PIDFD, (id_t) pidfd, &si, WEXITED);
        rt__pid_remove(m, pid);
        close(pidfd);
        return dt;
}

static const rt_callbacks no_callbacks = {};

static void bench_spawn_paths(void) {
        enum { N = 200 };
        static usec_t t_uv[N], t_vf[N];
        uv_loop_t loop, uv_only;
        rt_manager *m;
        char dir[] = "/tmp/tend-bench-XXXXXX";
        char *ballast = NULL;

        uv_loop_init(&loop);
        uv_loop_init(&uv_only);
        if (!mkdtemp(dir))
                exit(1);
        rt_manager_new(&(rt_config){ .loop = &loop, .state_dir = dir, .callbacks = &no_callbacks },
                       &m);
        printf("%-34s %8s %10s %10s\n", "spawn path (one spawn, loop blocked)", "RSS MB",
               "median us", "p95 us");
        for (int round = 0; round < 2; round++) {
                if (round == 1) {
                        size_t sz = 200u << 20;
                        ballast = malloc(sz);
                        memset(ballast, 1, sz); /* touched: resident */
                }
                /* On a loop of their own: the manager reaps children it does
                 * not know when its loop sees SIGCHLD, and libuv would then
                 * never see these exit. */
                for (int i = 0; i < N; i++) {
                        t_uv[i] = spawn_uv(&uv_only);
                        uv_run(&uv_only, UV_RUN_NOWAIT);
                }
                while (uv_run(&uv_only, UV_RUN_NOWAIT))
                        ;
                for (int i = 0; i < N; i++)
                        t_vf[i] = spawn_vfork(m);
                printf("%-34s %8.0f %10.0f %10.0f\n", "uv_spawn (fork)", bench_rss_kb() / 1024.0,
                       pct(t_uv, N, 0.5), pct(t_uv, N, 0.95));
                printf("%-34s %8.0f %10.0f %10.0f\n", "tend clone(CLONE_VM|CLONE_VFORK)",
                       bench_rss_kb() / 1024.0, pct(t_vf, N, 0.5), pct(t_vf, N, 0.95));
        }
        free(ballast);
        rt_manager_close(m);
        uv_run(&loop, UV_RUN_DEFAULT);
        uv_loop_close(&loop);
        uv_loop_close(&uv_only);
        char cmd[64];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd) != 0)
                fprintf(stderr, "could not remove %s\n", dir);
}

/* ---- 2. a thousand pods ------------------------------------------------------------- */

static size_t exited;

static void on_exited(rt_pod *pod, const rt_exit *e, void *u) {
        exited++;
}

static const rt_callbacks count_exits = { .exited = on_exited };

/* A pod with a leased port (the template's tend.io/lease-ports, which a
 * pod has among its annotations: *ret_annotations). */
static spec_pod_spec *sleep_spec(const spec_map **ret_annotations) {
        static const char yaml[] =
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: b}\n"
                "spec:\n  selector: {matchLabels: {app: b}}\n  template:\n"
                "    metadata: {labels: {app: b}, annotations: {tend.io/lease-ports: http}}\n"
                "    spec:\n      containers:\n"
                "      - {name: main, command: [/bin/sleep, \"3600\"]}\n";
        spec_manifest mf = {};
        spec_errors errs = {};
        spec_pod_spec *s = malloc(sizeof *s);

        if (spec_manifest_add_buffer(&mf, "bench", yaml, strlen(yaml), &errs) < 0)
                exit(1);
        *s = mf.items[0].deployment->spec.template.spec;
        memset(&mf.items[0].deployment->spec.template.spec, 0, sizeof *s);
        *ret_annotations = &mf.items[0].deployment->spec.template.metadata.annotations;
        return s; /* the rest of the manifest is leaked: a benchmark */
}

static void bench_thousand(int runs) {
        enum { N = 1000 };
        usec_t t_spawn[16], t_exits[16];
        double per_pod_kb[16], rss_first = 0;
        const spec_map *ann = NULL;
        spec_pod_spec *s = sleep_spec(&ann);

        for (int run = 0; run < runs; run++) {
                uv_loop_t loop;
                rt_manager *m;
                rt_pod **pods = calloc(N, sizeof *pods);
                char dir[] = "/tmp/tend-bench-XXXXXX", cmd[64];
                long rss0, rss1;
                size_t heap0, heap1;
                usec_t t0;

                uv_loop_init(&loop);
                if (!mkdtemp(dir))
                        exit(1);
                rt_manager_new(&(rt_config){ .loop = &loop,
                                             .state_dir = dir,
                                             .callbacks = &count_exits,
                                             .subreaper = true },
                               &m);
                uv_run(&loop, UV_RUN_NOWAIT);
                rss0 = bench_rss_kb();
                heap0 = mallinfo2().uordblks;
                exited = 0;
                t0 = now_monotonic();
                for (int i = 0; i < N; i++) {
                        char name[32], *err = NULL;
                        snprintf(name, sizeof name, "bench-%d", i);
                        rt_pod_params p = {
                                .namespace = "default", .name = name, .spec = s, .annotations = ann
                        };
                        if (rt_pod_start(m, &p, NULL, &pods[i], &err) < 0) {
                                fprintf(stderr, "start: %s\n", err);
                                exit(1);
                        }
                }
                t_spawn[run] = now_monotonic() - t0;
                uv_run(&loop, UV_RUN_NOWAIT);
                rss1 = bench_rss_kb();
                heap1 = mallinfo2().uordblks;
                per_pod_kb[run] = (double) (heap1 - heap0) / 1024.0 / N;
                if (run == 0)
                        rss_first = (double) (rss1 - rss0) / N;

                t0 = now_monotonic();
                for (int i = 0; i < N; i++)
                        kill(rt_pod_record(pods[i])->pid, SIGKILL);
                while (exited < N)
                        uv_run(&loop, UV_RUN_ONCE);
                t_exits[run] = now_monotonic() - t0;

                for (int i = 0; i < N; i++)
                        rt_pod_free(pods[i]);
                free(pods);
                rt_manager_close(m);
                uv_run(&loop, UV_RUN_DEFAULT);
                uv_loop_close(&loop);
                snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
                if (system(cmd) != 0)
                        fprintf(stderr, "could not remove %s\n", dir);
        }

        qsort(per_pod_kb, (size_t) runs, sizeof(double), bench_cmp_double);
        printf("\n%-44s %10s %10s   (%d runs)\n", "1000 pods", "median", "p95", runs);
        printf("%-44s %10.1f %10.1f\n", "spawn 1000 pods (ms)",
               pct(t_spawn, (size_t) runs, 0.5) / 1000, pct(t_spawn, (size_t) runs, 0.95) / 1000);
        printf("%-44s %10.1f %10.1f\n", "SIGKILL all → every exit seen (ms)",
               pct(t_exits, (size_t) runs, 0.5) / 1000, pct(t_exits, (size_t) runs, 0.95) / 1000);
        printf("%-44s %10.2f %10.2f\n", "agent heap per pod (kB)", per_pod_kb[runs / 2],
               per_pod_kb[(size_t) (0.95 * (runs - 1) + 0.5)]);
        printf("%-44s %10.2f\n", "agent RSS growth per pod, first run (kB)", rss_first);
}

int main(int argc, char **argv) {
        int runs = argc > 1 ? atoi(argv[1]) : 5;

        signal(SIGPIPE, SIG_IGN);
        bench_spawn_paths();
        bench_thousand(runs < 1 ? 1 : runs > 16 ? 16 : runs);
        return 0;
}
