/* SPDX-License-Identifier: MIT */

/*
 * The fleet's object mirror against a fake etcd (fake-etcd.h), in virtual
 * time: a real agent and store on a real loop, one fleet member, and an
 * etcd whose answers the test holds back, whose keys it writes as another
 * node would, and whose leases it takes away. The member's clock
 * (now_monotonic, wrapped at link time) jumps when the test says, so that
 * a 10 s deadline passes in a moment.
 *
 * What an API write is promised (docs/fleet.md §3.4): it is answered once
 * etcd has it, or with why not, and a write etcd refused is undone here.
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "agent-loop.h"
#include "fake-etcd.h"
#include "fleet-internal.h"

#define MS USEC_PER_MSEC
#define KEY "/t/v1/deployments/default/web"

/* ---- virtual time --------------------------------------------------------------------------- */

static usec_t skew, frozen; /* frozen: the clock stands there (0: it runs) */

usec_t __real_now_monotonic(void);
usec_t __wrap_now_monotonic(void);

usec_t __wrap_now_monotonic(void) {
        return frozen ?: __real_now_monotonic() + skew;
}

/* The member's clock stops (the loop's timers still fire: each look then
 * sees the same time, whatever the machine's load). */
static void freeze(void) {
        frozen = __real_now_monotonic() + skew;
}

/* ---- one member ----------------------------------------------------------------------------- */

typedef struct world {
        char dir[64];
        uv_loop_t loop;
        uv_timer_t tick;
        agent_loop *al;
        fleet *f;
        int joined; /* 1: joined; < 0: failed */
} world;

static fleet *the_fleet; /* agent_fleet's userdata: a fleet ** */

static void on_joined(int error, const char *why, void *userdata) {
        world *w = userdata;

        if (error < 0)
                fprintf(stderr, "join failed: %s\n", strna(why));
        w->joined = error < 0 ? error : 1;
}

static void on_tick(uv_timer_t *t) {
        (void) t; /* a wakeup, so that a condition is looked at often */
}

/* Runs the loop until cond(w) or msec of real time went by. */
static bool run_until(world *w, bool (*cond)(world *w), unsigned msec) {
        usec_t until = __real_now_monotonic() + msec * MS;

        while (!cond(w) && __real_now_monotonic() < until)
                (void) uv_run(&w->loop, UV_RUN_ONCE);
        return cond(w);
}

static bool never(world *w) {
        (void) w;
        return false;
}

static void run_for(world *w, unsigned msec) {
        (void) run_until(w, never, msec);
}

static bool is_leading(world *w);

/* The frozen clock moves on by d. The leader then counts itself leading
 * only once a keepalive sent at the new time is answered (its lease is
 * safe until send + TTL): wait for that, then for a look of the
 * lifecycle's (every 500 ms), so that what it decided is decided as the
 * leader. */
static void jump(world *w, usec_t d) {
        frozen += d;
        assert_true(run_until(w, is_leading, 3000));
        run_for(w, 600);
}

static bool is_joined(world *w) {
        return w->joined != 0;
}

static bool is_leading(world *w) {
        return fleet_leading(w->f, NULL) && fleet__agent_leads(w->f);
}

static int setup(void **state, bool lead) {
        static const agent_fleet ops = { .leading = fleet_agent_leading,
                                         .nodes = fleet_agent_nodes,
                                         .in_etcd = fleet_agent_in_etcd,
                                         .node_lost = fleet_agent_node_lost,
                                         .fenced = fleet_agent_fenced,
                                         .userdata = &the_fleet };
        static char *const endpoints[] = { "http://fake-etcd", NULL };
        world *w = calloc(1, sizeof *w);
        _cleanup_free_ char *err = NULL, *sd = NULL;

        assert_non_null(w);
        skew = frozen = 0;
        snprintf(w->dir, sizeof w->dir, "/tmp/tend-test-fleet-XXXXXX");
        assert_non_null(mkdtemp(w->dir));
        sd = strprintf("%s/state", w->dir);
        assert_int_equal(uv_loop_init(&w->loop), 0);
        uv_timer_init(&w->loop, &w->tick);
        uv_timer_start(&w->tick, on_tick, 5, 5);
        if (agent_loop_new(
                    &w->loop,
                    &(agent_loop_config){
                            .state_dir = sd,
                            .node_name = "n1",
                            .fleet = &ops,
                            .systemd_bus = RT_BUS_NONE,
                            /* (no pod runs: no cgroups made, none left when it exits) */ .cgroups =
                                    RT_CGROUPS_OFF },
                    &w->al, &err) < 0)
                fail_msg("agent_loop_new: %s", strna(err));
        assert_int_equal(fleet_join(&(fleet_config){ .loop = &w->loop,
                                                     .endpoints = endpoints,
                                                     .prefix = "/t",
                                                     .node_name = "n1",
                                                     .ttl = 3,
                                                     .state_dir = sd,
                                                     .no_leader = !lead,
                                                     .agent = agent_loop_agent(w->al),
                                                     .lost_after = 10 * USEC_PER_SEC },
                                    on_joined, w, &w->f),
                         0);
        the_fleet = w->f;
        assert_true(run_until(w, is_joined, 5000));
        assert_int_equal(w->joined, 1);
        if (lead)
                assert_true(run_until(w, is_leading, 5000));
        *state = w;
        return 0;
}

static int setup_follower(void **state) {
        return setup(state, false);
}

static int setup_leader(void **state) {
        return setup(state, true);
}

static int teardown(void **state) {
        world *w = *state;
        _cleanup_free_ char *cmd = strprintf("rm -rf '%s'", w->dir);

        fleet_close(w->f);
        the_fleet = NULL;
        agent_loop_close(w->al);
        uv_close((uv_handle_t *) &w->tick, NULL);
        while (uv_run(&w->loop, UV_RUN_NOWAIT))
                ;
        assert_int_equal(uv_loop_close(&w->loop), 0);
        assert_int_equal(system(cmd), 0);
        free(w);
        return 0;
}

/* ---- writes as the API makes them ----------------------------------------------------------- */

typedef struct answer {
        bool done;
        unsigned code;
} answer;

static void on_answer(unsigned code, json_t *j, void *req) {
        answer *a = req;

        a->done = true;
        a->code = code;
        json_decref(j);
}

/* The API's frame around a write: mark, write, wait for etcd. */
static void api_write(world *w, answer *a, int (*write)(world *w, const void *arg),
                      const void *arg) {
        uint64_t mark = fleet_writes(w->f);
        int r;

        *a = (answer){};
        assert_int_equal(write(w, arg), 0);
        r = fleet_sync(w->f, mark, on_answer, a);
        fleet_writes_end(w->f);
        assert_true(r >= 0);
        if (r == 1)
                *a = (answer){ .done = true, .code = 0 };
}

/* A Deployment's JSON applied through the agent, as an API write is. */
static int apply_json(world *w, const char *text) {
        _cleanup_(json_decrefp) json_t *j = text ? json_loads(text, 0, NULL) : NULL;
        spec_errors errs = {};
        spec_deployment *d = NULL;
        int r;

        assert_non_null(j);
        if (spec_decode_new(&spec_type_deployment, j, &errs, (void **) &d) < 0) {
                _cleanup_free_ char *why = errs.n ? spec_error_format(&errs.items[0]) : NULL;
                fail_msg("the deployment: %s", strna(why));
        }
        r = agent_apply(agent_loop_agent(w->al), &d, 1, &errs, NULL);
        spec_errors_done(&errs);
        spec_free(&spec_type_deployment, d);
        return r;
}

static int create(world *w, const void *arg) {
        const char *name = arg;
        _cleanup_free_ char *text = strprintf(
                "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":"
                "\"%s\",\"namespace\":\"default\"},\"spec\":{\"replicas\":0,\"selector\":{"
                "\"matchLabels\":{\"app\":\"%s\"}},\"template\":{\"metadata\":{\"labels\":{"
                "\"app\":\"%s\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"command\":[\"/bin/"
                "sleep\",\"1000\"]}]}}}}",
                name, name, name);

        return apply_json(w, text);
}

static int scale(world *w, const void *arg) {
        return agent_scale_deployment(agent_loop_agent(w->al), "default", "web",
                                      *(const int32_t *) arg);
}

static int scale_api(world *w, const void *arg) {
        return agent_scale_deployment(agent_loop_agent(w->al), "default", "api",
                                      *(const int32_t *) arg);
}

static bool done1(answer *a) {
        return a->done;
}

static answer *waiting[4];

static bool all_answered(world *w) {
        (void) w;
        for (size_t i = 0; i < ELEMENTSOF(waiting) && waiting[i]; i++)
                if (!done1(waiting[i]))
                        return false;
        return true;
}

static bool wait_answers(world *w, answer *a, answer *b, unsigned msec) {
        waiting[0] = a;
        waiting[1] = b;
        waiting[2] = NULL;
        return run_until(w, all_answered, msec);
}

/* j's field at a path of two keys, as a string (NULL: none). */
static const char *api_field(json_t *j, const char *a, const char *b) {
        return json_string_value(json_object_get(json_object_get(j, a), b));
}

/* spec.replicas as etcd has web (-1: no key), and as the local store has it. */
static int32_t etcd_replicas(void) {
        const char *v = fake_etcd_get(fake_etcd(), KEY, NULL);
        _cleanup_(json_decrefp) json_t *j = v ? json_loads(v, 0, NULL) : NULL;

        return v ? (int32_t) json_integer_value(
                           json_object_get(json_object_get(j, "spec"), "replicas"))
                 : -1;
}

static int32_t local_replicas(world *w) {
        const spec_deployment *d = store_get(agent_loop_store(w->al), STORE_DEPLOYMENT, "default",
                                             "web");
        return d ? d->spec.replicas : -1;
}

/* Another node writes web with replicas n (on what etcd has). */
static void remote_scale(int32_t n) {
        const char *v = fake_etcd_get(fake_etcd(), KEY, NULL);
        _cleanup_(json_decrefp) json_t *j = v ? json_loads(v, 0, NULL) : NULL;
        _cleanup_free_ char *text = NULL;

        assert_non_null(j);
        json_object_set_new(json_object_get(j, "spec"), "replicas", json_integer(n));
        text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
        assert_non_null(text);
        (void) fake_etcd_put(fake_etcd(), KEY, text, 0);
}

static bool is_in_etcd3(world *w) {
        (void) w;
        return etcd_replicas() == 3;
}

static bool is_held(world *w) {
        (void) w;
        return fake_etcd_held(fake_etcd()) > 0;
}

/* ---- the tests ---------------------------------------------------------------------------- */

/* A write is answered once etcd has it, not before. */
static void test_acknowledged(void **state) {
        world *w = *state;
        answer a;

        fake_etcd_hold(fake_etcd(), true);
        api_write(w, &a, create, "web");
        assert_false(a.done); /* nothing went to etcd yet */
        assert_true(run_until(w, is_held, 2000));
        run_for(w, 50);
        assert_false(a.done); /* out to etcd, not taken */
        assert_int_equal(etcd_replicas(), -1);
        fake_etcd_hold(fake_etcd(), false);
        assert_true(wait_answers(w, &a, NULL, 2000));
        assert_int_equal(a.code, 0);
        assert_int_equal(etcd_replicas(), 0);
        assert_int_equal(local_replicas(w), 0);
}

/* Writes made in one turn of the loop go to etcd as one txn, each answered
 * when it is in. */
static void test_one_txn(void **state) {
        world *w = *state;
        answer a, b, c;
        unsigned before = fake_etcd_txns(fake_etcd(), NULL), ok;

        api_write(w, &a, create, "a");
        api_write(w, &b, create, "b");
        api_write(w, &c, create, "c");
        waiting[0] = &a, waiting[1] = &b, waiting[2] = &c, waiting[3] = NULL;
        assert_true(run_until(w, all_answered, 2000));
        assert_int_equal(a.code, 0);
        assert_int_equal(b.code, 0);
        assert_int_equal(c.code, 0);
        assert_int_equal(fake_etcd_txns(fake_etcd(), &ok) - before, 1);
        assert_non_null(fake_etcd_get(fake_etcd(), "/t/v1/deployments/default/b", NULL));
}

/* Another node wrote the object first: the write is refused (409) and
 * undone here, the local copy etcd's again. */
static void test_refused_undone(void **state) {
        world *w = *state;
        answer a;
        int32_t three = 3;

        api_write(w, &a, create, "web");
        assert_true(wait_answers(w, &a, NULL, 2000));
        fake_etcd_hold(fake_etcd(), true);
        api_write(w, &a, scale, &three);
        assert_int_equal(local_replicas(w), 3); /* read your writes, meanwhile */
        assert_true(run_until(w, is_held, 2000));
        remote_scale(5);
        fake_etcd_hold(fake_etcd(), false);
        assert_true(wait_answers(w, &a, NULL, 2000));
        assert_int_equal(a.code, 409);
        assert_int_equal(etcd_replicas(), 5);
        run_for(w, 50);
        assert_int_equal(local_replicas(w), 5);
}

/*
 * Issue 29's lost update. A local write is out to etcd when another node
 * writes the same object, and a second local write is made meanwhile, on
 * the first one's state. Whether etcd refused the first write (the other
 * node's came before it: took_first false) or took it (the other node
 * wrote on top of it, and the watch tells of both before the txn's answer
 * comes), the second is refused: it never overwrites the other node's
 * write (90 of 100 acknowledged increments were kept).
 */
static void lost_update(world *w, bool took_first) {
        answer a, b;
        int32_t three = 3, four = 4;

        api_write(w, &a, create, "web");
        assert_true(wait_answers(w, &a, NULL, 2000));
        if (took_first) {
                fake_etcd_late(fake_etcd(), true);
                api_write(w, &a, scale, &three);
                assert_true(run_until(w, is_in_etcd3, 2000)); /* applied; the answer held */
        } else {
                fake_etcd_hold(fake_etcd(), true);
                api_write(w, &a, scale, &three);
                assert_true(run_until(w, is_held, 2000));
        }
        remote_scale(5);
        run_for(w, 30); /* the watch brings it while the txn's answer is out */
        api_write(w, &b, scale, &four);
        run_for(w, 30);
        fake_etcd_late(fake_etcd(), false);
        fake_etcd_hold(fake_etcd(), false);
        assert_true(wait_answers(w, &a, &b, 2000));
        assert_int_equal(a.code, took_first ? 0 : 409);
        assert_int_equal(b.code, 409);
        run_for(w, 50);
        assert_int_equal(etcd_replicas(), 5);
        assert_int_equal(local_replicas(w), 5);
}

static void test_no_lost_update(void **state) {
        lost_update(*state, false);
}

static void test_no_lost_update_after_success(void **state) {
        lost_update(*state, true);
}

/* A txn sent again after etcd's leader changed (etcd.c's hedge) when the
 * first try was applied after all: the second is refused against the
 * first, and its answer says a try before was unknown. The watch brought
 * the first try's write back as this node's own: it is acknowledged, not
 * a conflict (409) for a write that is in etcd. */
static void test_retried_applied(void **state) {
        world *w = *state;
        answer a;
        int32_t three = 3;

        api_write(w, &a, create, "web");
        assert_true(wait_answers(w, &a, NULL, 2000));
        fake_etcd_retried(fake_etcd(), true);
        fake_etcd_late(fake_etcd(), true);
        api_write(w, &a, scale, &three);
        assert_true(run_until(w, is_in_etcd3, 2000)); /* applied; the answer held */
        run_for(w, 30);                               /* the watch brings it back */
        fake_etcd_late(fake_etcd(), false);
        assert_true(wait_answers(w, &a, NULL, 2000));
        fake_etcd_retried(fake_etcd(), false);
        assert_int_equal(a.code, 0);
        run_for(w, 50);
        assert_int_equal(etcd_replicas(), 3);
        assert_int_equal(local_replicas(w), 3);
}

/* A write etcd has not taken within 10 s (virtual) is withdrawn and
 * answered 504, and undone here: nothing of it is applied later. One out
 * to etcd then is waited for, and its answer says. */
static void test_late_withdrawn(void **state) {
        world *w = *state;
        answer a, b;
        int32_t three = 3, four = 4;

        api_write(w, &a, create, "web");
        api_write(w, &b, create, "api");
        assert_true(wait_answers(w, &a, &b, 2000));
        fake_etcd_hold(fake_etcd(), true);
        api_write(w, &a, scale, &three);
        assert_true(run_until(w, is_held, 2000));
        api_write(w, &b, scale_api, &four); /* queued behind the txn that is out */
        run_for(w, 50);
        assert_false(a.done);
        assert_false(b.done);
        skew += 11 * USEC_PER_SEC;
        waiting[0] = &b, waiting[1] = NULL;
        assert_true(run_until(w, all_answered, 2000)); /* the lifecycle's tick looks */
        assert_int_equal(b.code, 504);
        assert_false(a.done);
        fake_etcd_hold(fake_etcd(), false);
        assert_true(wait_answers(w, &a, NULL, 2000));
        assert_int_equal(a.code, 0);
        run_for(w, 100);
        assert_int_equal(etcd_replicas(), 3);
        assert_int_equal(local_replicas(w), 3);
        /* api's write never went: etcd and the local store have it as before */
        const spec_deployment *d = store_get(agent_loop_store(w->al), STORE_DEPLOYMENT, "default",
                                             "api");
        assert_non_null(d);
        assert_int_equal(d->spec.replicas, 0);
        const char *v = fake_etcd_get(fake_etcd(), "/t/v1/deployments/default/api", NULL);
        assert_non_null(v);
        assert_non_null(strstr(v, "\"replicas\":0"));
}

/* The leader's writes are fenced on its term: a write out when the term
 * ends (another node leads) is refused (503) and undone. */
static void test_fenced(void **state) {
        world *w = *state;
        answer a;
        int32_t three = 3;
        int64_t fence;

        api_write(w, &a, create, "web");
        assert_true(wait_answers(w, &a, NULL, 2000));
        assert_int_equal(a.code, 0);
        assert_true(fleet_leading(w->f, &fence));
        run_for(w, 100); /* the leader's own writes (a ReplicaSet) settle */
        fake_etcd_hold(fake_etcd(), true);
        api_write(w, &a, scale, &three);
        assert_true(run_until(w, is_held, 2000));
        /* another node leads now: the key made anew, at a later revision */
        (void) fake_etcd_delete(fake_etcd(), "/t/v1/leader");
        (void) fake_etcd_put(fake_etcd(), "/t/v1/leader", "{\"node\":\"n2\"}", 0);
        fake_etcd_hold(fake_etcd(), false);
        assert_true(wait_answers(w, &a, NULL, 2000));
        assert_int_equal(a.code, 503);
        assert_false(fleet_leading(w->f, NULL));
        run_for(w, 50);
        assert_int_equal(etcd_replicas(), 0);
        assert_int_equal(local_replicas(w), 0);
}

/* The leader's node lifecycle in virtual time: a node whose lease goes
 * keeps its pods for --node-lost-after (10 s here), then the leader evicts
 * them (deletionTimestamp, in etcd); pods under tend.io/node-lost-policy:
 * fence only once the lease is gone their grace period + 2 s, so that the
 * lost node has stopped them first (docs/fleet.md §3.10). */
static int evicted_on_n2(const char *app, int *ret_bound) {
        size_t i = 0;
        const char *key, *value;
        int bound = 0, evicted = 0;

        while (fake_etcd_next(fake_etcd(), "/t/v1/pods/", &i, &key, &value)) {
                _cleanup_(json_decrefp) json_t *p = json_loads(value, 0, NULL);
                json_t *meta = json_object_get(p, "metadata");
                if (!streq_ptr(api_field(p, "spec", "nodeName"), "n2") ||
                    !streq_ptr(json_string_value(
                                       json_object_get(json_object_get(meta, "labels"), "app")),
                               app))
                        continue;
                bound++;
                evicted += json_object_get(meta, "deletionTimestamp") != NULL;
        }
        *ret_bound = bound;
        return evicted;
}

/* ... as the leader's store has them (its decision, before etcd has it). */
static int evicted_here(world *w, const char *app) {
        const void *const *items;
        size_t n = store_list(agent_loop_store(w->al), STORE_POD, &items);
        int evicted = 0;

        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                evicted += streq_ptr(p->spec.node_name, "n2") && p->metadata.deletion_timestamp &&
                           streq_ptr(spec_map_get(&p->metadata.labels, "app"), app);
        }
        return evicted;
}

static bool all_bound(world *w) {
        int b, f;
        (void) w;
        (void) evicted_on_n2("b", &b);
        (void) evicted_on_n2("f", &f);
        return b == 2 && f == 2;
}

static bool replace_evicted(world *w) {
        int bound;
        (void) w;
        return evicted_on_n2("b", &bound) == 2 && bound == 2;
}

static bool fence_evicted(world *w) {
        int bound;
        (void) w;
        return evicted_on_n2("f", &bound) == 2 && bound == 2;
}

/* A Deployment of 2 on nodes labelled pool=b, its grace period 15 s; arg:
 * its name, "b" (node-lost-policy replace, the default) or "f" (fence). */
static int create_on_b(world *w, const void *arg) {
        const char *name = arg;
        _cleanup_free_ char *text = strprintf(
                "{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{\"name\":\"%s\","
                "\"namespace\":\"default\",\"annotations\":{\"tend.io/node-lost-policy\":\"%s\"}},"
                "\"spec\":{\"replicas\":2,\"selector\":{\"matchLabels\":{\"app\":\"%s\"}},"
                "\"template\":{\"metadata\":{\"labels\":{\"app\":\"%s\"}},\"spec\":{"
                "\"terminationGracePeriodSeconds\":15,\"nodeSelector\":{\"pool\":\"b\"},"
                "\"containers\":[{\"name\":\"c\",\"command\":[\"/bin/sleep\",\"1000\"]}]}}}}",
                name, streq(name, "f") ? "fence" : "replace", name, name);

        return apply_json(w, text);
}

static void test_node_lost(void **state) {
        world *w = *state;
        const int64_t lease = 0x7e5700ff;
        answer a, b;
        int bound;

        /* n2: a Node labelled pool=b, its name held on a lease of its own */
        (void) fake_etcd_put(fake_etcd(), "/t/v1/nodes/n2",
                             "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":"
                             "\"n2\",\"labels\":{\"pool\":\"b\"}},\"spec\":{},\"status\":{}}",
                             0);
        (void) fake_etcd_put(fake_etcd(), "/t/v1/nodeleases/n2",
                             "{\"node\":\"n2\",\"pid\":1,\"host\":\"elsewhere\"}", lease);
        run_for(w, 100);
        api_write(w, &a, create_on_b, "b");
        api_write(w, &b, create_on_b, "f");
        assert_true(wait_answers(w, &a, &b, 2000));
        assert_int_equal(a.code, 0);
        assert_int_equal(b.code, 0);
        assert_true(run_until(w, all_bound, 3000)); /* the leader placed all four on n2 */
        /* n2's tendd gone: its lease expires */
        freeze();
        fake_etcd_expire(fake_etcd(), lease);
        run_for(w, 600); /* a look of the lifecycle's (every 500 ms): lost for 0 s */
        assert_int_equal(evicted_here(w, "b") + evicted_here(w, "f"), 0);
        assert_int_equal(evicted_on_n2("b", &bound), 0);
        assert_int_equal(bound, 2);
        jump(w, 9 * USEC_PER_SEC + 900 * USEC_PER_MSEC); /* lost for 9.9 s of 10 */
        assert_int_equal(evicted_here(w, "b") + evicted_here(w, "f"), 0);
        jump(w, 200 * USEC_PER_MSEC); /* 10.1 s: replace's pods go, fence's stay */
        assert_true(run_until(w, replace_evicted, 3000));
        assert_int_equal(evicted_here(w, "f"), 0);
        jump(w, 6 * USEC_PER_SEC + 700 * USEC_PER_MSEC); /* 16.8 s of 15 + 2 */
        assert_int_equal(evicted_here(w, "f"), 0);
        assert_int_equal(evicted_on_n2("f", &bound), 0);
        jump(w, 300 * USEC_PER_MSEC); /* 17.1 s */
        assert_true(run_until(w, fence_evicted, 3000));
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_acknowledged, setup_follower, teardown),
                cmocka_unit_test_setup_teardown(test_one_txn, setup_follower, teardown),
                cmocka_unit_test_setup_teardown(test_refused_undone, setup_follower, teardown),
                cmocka_unit_test_setup_teardown(test_no_lost_update, setup_follower, teardown),
                cmocka_unit_test_setup_teardown(test_no_lost_update_after_success, setup_follower,
                                                teardown),
                cmocka_unit_test_setup_teardown(test_retried_applied, setup_follower, teardown),
                cmocka_unit_test_setup_teardown(test_late_withdrawn, setup_follower, teardown),
                cmocka_unit_test_setup_teardown(test_fenced, setup_leader, teardown),
                cmocka_unit_test_setup_teardown(test_node_lost, setup_leader, teardown),
        };

        log_set_max_level(getenv("TEST_FLEET_DEBUG") ? LOG_LEVEL_DEBUG : LOG_LEVEL_ERR);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
