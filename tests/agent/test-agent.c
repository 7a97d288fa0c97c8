/* SPDX-License-Identifier: MIT */

/*
 * The agent with real processes: the agent library on a libuv loop with the
 * real runtime, a real SQLite file, and tend-testprog as the pods. (The
 * HTTP API arrives later; this drives the agent through its functions.)
 */

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "agent-loop.h"

static char testprog[4096];

typedef struct h {
        uv_loop_t loop;
        agent_loop *l;
        char dir[64];
} h_t;

static void open_agent(h_t *h) {
        char *err = NULL;
        int r = agent_loop_new(&h->loop,
                               &(agent_loop_config){ .state_dir = h->dir,
                                                     .port_lo = 43000,
                                                     .port_hi = 43999,
                                                     .resync_interval = 5 * USEC_PER_SEC,
                                                     /* (pods in cgroups: tests/cli/
                                                      * cgroups.sh; these tests leave
                                                      * pods running on purpose) */
                                                     .cgroups = RT_CGROUPS_OFF },
                               &h->l, &err);
        if (r < 0)
                fail_msg("agent_loop_new: %s", err);
}

static h_t *h_new(void) {
        h_t *h = calloc(1, sizeof *h);
        assert_int_equal(uv_loop_init(&h->loop), 0);
        snprintf(h->dir, sizeof h->dir, "/tmp/tend-agent-XXXXXX");
        assert_non_null(mkdtemp(h->dir));
        open_agent(h);
        return h;
}

static void close_agent(h_t *h) {
        agent_loop_close(h->l);
        h->l = NULL;
        uv_run(&h->loop, UV_RUN_NOWAIT);
        uv_run(&h->loop, UV_RUN_NOWAIT);
}

/* Stops every process the agent left (pods are detached, not stopped, when
 * an agent goes) and removes the state. */
static void h_free(h_t *h) {
        const void *const *items;
        char cmd[128];

        if (h->l) {
                store *s = agent_loop_store(h->l);
                size_t n = store_list(s, STORE_POD, &items);
                for (size_t i = 0; i < n; i++) {
                        const spec_pod *p = items[i];
                        const char *cid = p->status.n_container_statuses
                                                  ? p->status.container_statuses[0].container_id
                                                  : NULL;
                        if (cid && startswith(cid, "process://") && !spec_pod_terminal(p))
                                kill(-atoi(cid + strlen("process://")), SIGKILL);
                }
                close_agent(h);
        }
        uv_run(&h->loop, UV_RUN_DEFAULT);
        assert_int_equal(uv_loop_close(&h->loop), 0);
        snprintf(cmd, sizeof cmd, "rm -rf %s", h->dir);
        assert_int_equal(system(cmd), 0);
        free(h);
}

static void on_deadline(uv_timer_t *t) {
        *(bool *) t->data = true;
}

static void on_tick(uv_timer_t *t) {
        void (*sample)(h_t *) = ((void **) t->data)[0];
        if (sample)
                sample(((void **) t->data)[1]);
}

/* Runs the loop until pred holds; sample (if any) runs after every turn of
 * the loop and every 20 ms. */
static bool run_until(h_t *h, bool (*pred)(h_t *, const char *), const char *arg,
                      unsigned timeout_ms, void (*sample)(h_t *)) {
        uv_timer_t t, tick;
        bool expired = false;
        void *data[2] = { (void *) sample, h };

        uv_timer_init(&h->loop, &t);
        uv_timer_init(&h->loop, &tick);
        t.data = &expired;
        tick.data = data;
        uv_timer_start(&t, on_deadline, timeout_ms, 0);
        uv_timer_start(&tick, on_tick, 20, 20);
        while (!pred(h, arg) && !expired) {
                uv_run(&h->loop, UV_RUN_ONCE);
                /* After every turn of the loop too: each change is seen. */
                if (sample)
                        sample(h);
        }
        uv_close((uv_handle_t *) &t, NULL);
        uv_close((uv_handle_t *) &tick, NULL);
        uv_run(&h->loop, UV_RUN_NOWAIT);
        return pred(h, arg);
}

static store *S(h_t *h) {
        return agent_loop_store(h->l);
}

static const spec_deployment *dep(h_t *h, const char *name) {
        return store_get(S(h), STORE_DEPLOYMENT, "default", name);
}

static bool rolled_out(h_t *h, const char *name) {
        const spec_deployment *d = dep(h, name);
        char msg[256];
        return d && spec_rollout_status(d, 0, msg, sizeof msg) == SPEC_ROLLOUT_DONE;
}

/* Live pod processes of a deployment (by pod name prefix), terminating ones
 * included: the agent's view, checked against the processes themselves. */
static size_t live_pods(h_t *h, const char *name, size_t *ret_ready) {
        const void *const *items;
        size_t n = store_list(S(h), STORE_POD, &items), live = 0, ready = 0;
        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                const char *cid;
                if (!startswith(p->metadata.name, name) || spec_pod_terminal(p))
                        continue;
                cid = p->status.n_container_statuses ? p->status.container_statuses[0].container_id
                                                     : NULL;
                if (cid && kill(atoi(cid + strlen("process://")), 0) == 0)
                        live++;
                if (spec_pod_ready(p, NULL) && !p->metadata.deletion_timestamp)
                        ready++;
        }
        if (ret_ready)
                *ret_ready = ready;
        return live;
}

static bool settled(h_t *h, const char *name) {
        return rolled_out(h, name) &&
               live_pods(h, name, NULL) == (size_t) dep(h, name)->spec.replicas;
}

static spec_deployment *manifest(const char *name, int replicas, const char *extra) {
        char *yaml = strprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: %s}\n"
                               "spec:\n  replicas: %d\n  selector: {matchLabels: {app: %s}}\n"
                               "  strategy: {rollingUpdate: {maxSurge: 1, maxUnavailable: 0}}\n"
                               "  template:\n    metadata: {labels: {app: %s}}\n    spec:\n"
                               "      terminationGracePeriodSeconds: 5\n      containers:\n"
                               "      - name: main\n        command: [\"%s\"]\n%s",
                               name, replicas, name, name, testprog, extra);
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

/* (the old form of a leased port, a ports entry without containerPort:
 * decoding lifts it into the template's tend.io/lease-ports, and this is
 * its test through the agent and the runtime) */
#define WEB(version)                                               \
        "        args: [http, \"$(PORT)\", \"200\"]\n"             \
        "        env: [{name: VERSION, value: \"" version "\"}]\n" \
        "        ports: [{name: http}]\n"                          \
        "        readinessProbe: {httpGet: {port: http}, periodSeconds: 1}\n"

static void apply(h_t *h, spec_deployment *d) {
        spec_errors errs = {};
        if (agent_apply(agent_loop_agent(h->l), &d, 1, &errs, NULL) < 0) {
                spec_errors_print(&errs, stderr);
                fail_msg("apply failed");
        }
        spec_errors_done(&errs);
        spec_deployment_free(d);
        agent_loop_kick(h->l);
}

static const char *version_of(const spec_pod *p) {
        const spec_container *c = &p->spec.containers[0];
        for (size_t i = 0; i < c->n_env; i++)
                if (streq(c->env[i].name, "VERSION"))
                        return c->env[i].value;
        return NULL;
}

/* ---- bounds sampled during a rollout ------------------------------------------------- */

static struct { size_t max_live, min_ready, samples; } bounds;

static void sample_bounds(h_t *h) {
        size_t ready, live = live_pods(h, "web", &ready);
        bounds.max_live = MAX(bounds.max_live, live);
        bounds.min_ready = MIN(bounds.min_ready, ready);
        bounds.samples++;
}

static const spec_pod *pod_of_version(h_t *h, const char *version, bool running) {
        const void *const *items;
        size_t n = store_list(S(h), STORE_POD, &items);
        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                if (streq_ptr(version_of(p), version) &&
                    (!running ||
                     (p->status.phase == SPEC_POD_RUNNING && !p->metadata.deletion_timestamp)))
                        return p;
        }
        return NULL;
}

static int pid_of(const spec_pod *p) {
        return atoi(p->status.container_statuses[0].container_id + strlen("process://"));
}

static char victim[128];

/* The pod that carries the killed one on (its predecessor), or NULL. */
static const spec_pod *successor_of(h_t *h, const char *name) {
        const void *const *items;
        size_t n = store_list(S(h), STORE_POD, &items);
        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                if (streq_ptr(spec_map_get(&p->metadata.annotations, AGENT_ANN_PREDECESSOR), name))
                        return p;
        }
        return NULL;
}

static bool victim_replaced(h_t *h, const char *arg) {
        size_t ready;
        live_pods(h, "web", &ready);
        return successor_of(h, victim) && ready == 3;
}

static void test_story(void **state) {
        h_t *h = h_new();
        const spec_pod *p;
        int pids_before[8], n_before = 0;
        usec_t t0;

        /* 3 replicas of an HTTP server with a readiness probe → all Ready. */
        apply(h, manifest("web", 3, WEB("1")));
        assert_true(run_until(h, settled, "web", 20000, NULL));

        /* kill -9 one → replaced; the replacement shows signal 9 as its last
         * state. */
        p = pod_of_version(h, "1", true);
        snprintf(victim, sizeof victim, "%s", p->metadata.name);
        t0 = now_monotonic();
        assert_int_equal(kill(pid_of(p), SIGKILL), 0);
        assert_true(run_until(h, victim_replaced, NULL, 10000, NULL));
        fprintf(stderr, "kill -9 → replacement ready in %.0f ms\n",
                (double) (now_monotonic() - t0) / 1000.0);
        /* The killed pod is gone; its replacement carries its end. */
        assert_null(store_get(S(h), STORE_POD, "default", victim));
        p = successor_of(h, victim);
        assert_int_equal(p->status.container_statuses[0].last_state.terminated->signal, 9);
        assert_int_equal(p->status.container_statuses[0].restart_count, 1);

        /* A new version rolls out within the bounds (3 + 1 live at most, never
         * fewer than 3 ready). */
        bounds.max_live = 0;
        bounds.min_ready = SIZE_MAX;
        bounds.samples = 0;
        apply(h, manifest("web", 3, WEB("2")));
        assert_true(run_until(h, settled, "web", 30000, sample_bounds));
        fprintf(stderr, "rollout: %zu samples, max live %zu, min ready %zu\n", bounds.samples,
                bounds.max_live, bounds.min_ready);
        assert_true(bounds.samples > 10);
        assert_true(bounds.max_live <= 4);
        assert_true(bounds.min_ready >= 3);
        assert_null(pod_of_version(h, "1", true));
        assert_string_equal(spec_map_get(&dep(h, "web")->metadata.annotations, SPEC_ANN_REVISION),
                            "2");

        /* Roll back: the old template, renumbered to revision 3. */
        int64_t rev;
        char *err = NULL;
        assert_int_equal(
                agent_rollback(agent_loop_agent(h->l), "default", "web", 0, false, &rev, &err), 0);
        assert_int_equal(rev, 1);
        agent_loop_kick(h->l);
        assert_true(run_until(h, settled, "web", 30000, NULL));
        assert_null(pod_of_version(h, "2", true));
        assert_non_null(pod_of_version(h, "1", true));
        assert_string_equal(spec_map_get(&dep(h, "web")->metadata.annotations, SPEC_ANN_REVISION),
                            "3");

        /* Mid-rollout, the agent goes away and comes back: same pids, the
         * rollout completes, nothing started twice. */
        apply(h, manifest("web", 3, WEB("4")));
        run_until(h, rolled_out, "never", 400, NULL);
        const void *const *items;
        size_t n = store_list(S(h), STORE_POD, &items);
        for (size_t i = 0; i < n && n_before < 8; i++) {
                const spec_pod *q = items[i];
                if (!spec_pod_terminal(q) && q->status.n_container_statuses &&
                    q->status.container_statuses[0].container_id)
                        pids_before[n_before++] = pid_of(q);
        }
        assert_true(n_before >= 3);
        close_agent(h);
        for (int i = 0; i < n_before; i++)
                assert_int_equal(kill(pids_before[i], 0), 0); /* still running */
        open_agent(h);
        n = store_list(S(h), STORE_POD, &items);
        for (int i = 0; i < n_before; i++) {
                bool found = false;
                for (size_t k = 0; k < n; k++) {
                        const spec_pod *q = items[k];
                        if (!spec_pod_terminal(q) && q->status.n_container_statuses &&
                            q->status.container_statuses[0].container_id &&
                            pid_of(q) == pids_before[i])
                                found = true;
                }
                if (!found)
                        fail_msg("pid %d is not a pod after the restart", pids_before[i]);
        }
        assert_true(run_until(h, settled, "web", 30000, NULL));
        assert_non_null(pod_of_version(h, "4", true));
        assert_null(pod_of_version(h, "1", true));
        h_free(h);
}

/* ---- history ------------------------------------------------------------------------------ */

static size_t owned_rs(h_t *h, const char *name) {
        const void *const *items;
        size_t n = store_list(S(h), STORE_REPLICA_SET, &items), c = 0;
        for (size_t i = 0; i < n; i++)
                if (spec_meta_owned_by(&((const spec_replica_set *) items[i])->metadata,
                                       dep(h, name)->metadata.uid))
                        c++;
        return c;
}

/* Everything but events: deployments, ReplicaSets, pods. */
static size_t objects(h_t *h) {
        const void *const *items;
        return store_list(S(h), STORE_DEPLOYMENT, &items) +
               store_list(S(h), STORE_REPLICA_SET, &items) + store_list(S(h), STORE_POD, &items);
}

static off_t db_size(h_t *h) {
        char path[128];
        struct stat st;
        snprintf(path, sizeof path, "%s/tend.db", h->dir);
        return stat(path, &st) == 0 ? st.st_size : -1;
}

static void test_history(void **state) {
        h_t *h = h_new();
        char extra[256];
        off_t size_at_30 = 0;
        size_t objects_at_30 = 0;

        for (int i = 1; i <= 50; i++) {
                snprintf(extra, sizeof extra,
                         "        args: [sleep]\n        env: [{name: GEN, value: \"%d\"}]\n", i);
                spec_deployment *d = manifest("worker", 1, extra);
                d->spec.revision_history_limit = 10;
                apply(h, d);
                if (!run_until(h, settled, "worker", 10000, NULL))
                        fail_msg("generation %d did not roll out", i);
                if (i == 30) {
                        /* (as at the end: the pods the rollout stopped are
                         * gone, not only stopped) */
                        run_until(h, rolled_out, "never", 300, NULL);
                        size_at_30 = db_size(h);
                        objects_at_30 = objects(h);
                }
        }
        run_until(h, rolled_out, "never", 300, NULL);
        assert_int_equal(owned_rs(h, "worker"), 11);
        /* The database stops growing: old revisions are pruned (the objects
         * are as many after 50 revisions as after 30); events are bounded by
         * count and age (test-store checks the bound). */
        fprintf(stderr,
                "tend.db: %lld bytes after 30 revisions, %lld after 50; %zu objects, "
                "then %zu\n",
                (long long) size_at_30, (long long) db_size(h), objects_at_30, objects(h));
        assert_int_equal(objects(h), objects_at_30);
        const void *const *items;
        assert_true(store_list(S(h), STORE_POD, &items) <= 3);
        assert_true(store_list(S(h), STORE_EVENT, &items) <= STORE_EVENTS_MAX);
        h_free(h);
}

/* ---- crash loop --------------------------------------------------------------------------- */

static usec_t starts[64];
static size_t n_starts;

static void on_change(store_kind kind, store_change change, const void *obj, void *u) {
        const spec_pod *p = obj;
        static char seen[64][128];
        if (kind != STORE_POD || !p->status.start_time || n_starts >= ELEMENTSOF(starts))
                return;
        for (size_t i = 0; i < n_starts; i++)
                if (streq(seen[i], p->metadata.name))
                        return;
        snprintf(seen[n_starts], sizeof seen[0], "%s", p->metadata.name);
        starts[n_starts++] = p->status.start_time;
}

static bool enough_starts(h_t *h, const char *arg) {
        return n_starts >= 7;
}

static void test_crash_loop(void **state) {
        h_t *h = h_new();

        n_starts = 0;
        store_subscribe(S(h), on_change, NULL);
        apply(h, manifest("crashy", 1, "        args: [exit, \"1\"]\n"));
        bool enough = run_until(h, enough_starts, NULL, 30000, NULL);
        /* Gaps between starts: ~0, ~0 (the first two young deaths in a
         * row), then ~1 s, ~2 s, ~4 s, ~8 s: growing. */
        for (size_t i = 1; i < n_starts; i++)
                fprintf(stderr, "start %zu: +%.2f s\n", i,
                        (double) (starts[i] - starts[i - 1]) / USEC_PER_SEC);
        assert_true(enough);
        assert_true(starts[1] - starts[0] < 800 * USEC_PER_MSEC);
        assert_true(starts[2] - starts[1] < 800 * USEC_PER_MSEC);
        assert_true(starts[3] - starts[2] >= 800 * USEC_PER_MSEC);
        assert_true(starts[4] - starts[3] > starts[3] - starts[2]);
        assert_true(starts[5] - starts[4] > starts[4] - starts[3]);
        assert_true(starts[6] - starts[5] >= 7 * USEC_PER_SEC);
        store_unsubscribe(S(h), on_change, NULL);
        h_free(h);
}

/* ---- the lock ---------------------------------------------------------------------------- */

static void test_state_dir_lock(void **state) {
        h_t *h = h_new();
        char *err = NULL, want[64];
        int fd = -1;

        /* Another agent on the same dir is refused, naming the holder. */
        assert_int_equal(agent_lock_state_dir(h->dir, &fd, &err), -EBUSY);
        snprintf(want, sizeof want, "(pid %d)", (int) getpid());
        if (!strstr(err, want) || !strstr(err, "in use by another tendd"))
                fail_msg("%s", err);
        free(err);
        h_free(h);
}

int main(void) {
        const char *bin = getenv("TEND_TEST_BIN_DIR");
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_state_dir_lock),
                cmocka_unit_test(test_story),
                cmocka_unit_test(test_history),
                cmocka_unit_test(test_crash_loop),
        };

        if (!bin)
                return 77;
        snprintf(testprog, sizeof testprog, "%s/tend-testprog", bin);
        signal(SIGPIPE, SIG_IGN);
        log_set_max_level(LOG_LEVEL_WARNING);
        if (getenv("TEST_FILTER"))
                cmocka_set_test_filter(getenv("TEST_FILTER"));
        return cmocka_run_group_tests(tests, NULL, NULL);
}
