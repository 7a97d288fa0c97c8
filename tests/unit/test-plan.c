/* SPDX-License-Identifier: MIT */

/* Table tests of the planners against the worked examples of
 * docs/deployments.md §3-§6. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "tend/plan.h"

#define S USEC_PER_SEC
#define MS USEC_PER_MSEC

static plan_rs rs_(const char *name, usec_t created, int32_t spec, int32_t avail, bool is_new) {
        return (plan_rs){ .name = name,
                          .created = created,
                          .spec_replicas = spec,
                          .active = spec,
                          .available = avail,
                          .max_replicas_ann = -1,
                          .desired_ann = -1,
                          .is_new = is_new };
}

/* §3.2 worked example: D=10, 25%/25% (surge 3, unavailable 2), old RS at
 * 10 all available. The rollout proceeds pass by pass; new pods become
 * available one pass after they are created. */
static void test_rolling_worked_example(void **state) {
        plan_rs rss[2] = { rs_("old", 1, 10, 10, false), rs_("new", 2, 0, 0, true) };
        int32_t targets[2];

        /* pass 1: create the new RS with min(13 - 10, 10) = 3 */
        assert_int_equal(plan_new_rs_replicas(10, 3, rss, 2, 1), 3);
        rss[1].spec_replicas = rss[1].active = 3;

        /* pass 2: the new RS cannot grow (13); old: budget 13 - 8 - 3 = 2,
         * available 10 > 8 → old − 2 */
        assert_int_equal(plan_new_rs_replicas(10, 3, rss, 2, 1), 3);
        assert_true(plan_scale_down_old(10, 2, rss, 2, targets));
        assert_int_equal(targets[0], 8);
        assert_int_equal(targets[1], 3);
        rss[0].spec_replicas = rss[0].active = rss[0].available = 8;

        /* pass 3: new += min(13 - 11, 7) = 2 → 5 */
        assert_int_equal(plan_new_rs_replicas(10, 3, rss, 2, 1), 5);
        rss[1].spec_replicas = rss[1].active = 5;

        /* If the new pods never become available: 13 − 8 − 5 = 0, stalled at
         * 8 old + 5 new. */
        assert_int_equal(plan_new_rs_replicas(10, 3, rss, 2, 1), 5);
        assert_false(plan_scale_down_old(10, 2, rss, 2, targets));

        /* Drive it to the end with availability catching up each pass; the
         * bounds hold throughout. */
        for (int pass = 0; pass < 50; pass++) {
                int32_t n = plan_new_rs_replicas(10, 3, rss, 2, 1);
                rss[1].available = rss[1].spec_replicas; /* last pass's pods are up */
                if (n != rss[1].spec_replicas)
                        rss[1].spec_replicas = rss[1].active = n;
                else if (plan_scale_down_old(10, 2, rss, 2, targets)) {
                        rss[0].spec_replicas = rss[0].active = targets[0];
                        rss[0].available = MIN(rss[0].available, targets[0]);
                }
                assert_true(rss[0].spec_replicas + rss[1].spec_replicas <= 13);
                assert_true(rss[0].available + rss[1].available >= 8);
        }
        assert_int_equal(rss[0].spec_replicas, 0);
        assert_int_equal(rss[1].spec_replicas, 10);
}

/* Unhealthy old replicas go first, without touching availability. */
static void test_cleanup_unhealthy(void **state) {
        /* D=10, surge 3, unav 2; old1 has 5 (2 available), old2 5 (5), new 3 (0) */
        plan_rs rss[3] = { rs_("old1", 1, 5, 2, false), rs_("old2", 2, 5, 5, false),
                           rs_("new", 3, 3, 0, true) };
        int32_t t[3];

        /* budget 13 − 8 − 3 = 2: old1 loses 2 unhealthy ones; then
         * available 7 ≤ 8 stops the rest */
        assert_true(plan_scale_down_old(10, 2, rss, 3, t));
        assert_int_equal(t[0], 3);
        assert_int_equal(t[1], 5);
        assert_int_equal(t[2], 3);
}

/* An old RS already at 0 may still report available pods (its status is a
 * pass behind): they do not count, as in Kubernetes, or another old RS
 * would be scaled down too far. */
static void test_inactive_old_availability(void **state) {
        /* D=4, maxUnavailable 1: A{0, still 1 available}, B{2/2}, new C{2/2} */
        plan_rs rss[3] = { rs_("A", 1, 0, 1, false), rs_("B", 2, 2, 2, false),
                           rs_("C", 3, 2, 2, true) };
        int32_t t[3];

        assert_true(plan_scale_down_old(4, 1, rss, 3, t));
        assert_int_equal(t[0], 0);
        assert_int_equal(t[1], 1); /* 4 available (B + C) − 3 → one goes, not two */
        assert_int_equal(t[2], 2);
}

/* Tend's rule: terminating pods occupy room under replicas + maxSurge. */
static void test_terminating_count(void **state) {
        plan_rs rss[2] = { rs_("old", 1, 2, 2, false), rs_("new", 2, 1, 1, true) };

        /* D=3, surge 1: spec total 3 allows +1, but two old pods still
         * terminate: 2 + 2 + 1 = 5 ≥ 4, nothing new yet. */
        rss[0].terminating = 2;
        assert_int_equal(plan_new_rs_replicas(3, 1, rss, 2, 1), 1);
        rss[0].terminating = 0;
        assert_int_equal(plan_new_rs_replicas(3, 1, rss, 2, 1), 2);
        /* An RS whose pods outnumber its spec (being scaled down) counts
         * its pods. */
        rss[0].active = 3;
        assert_int_equal(plan_new_rs_replicas(3, 1, rss, 2, 1), 1);
}

/* §3.4: D 10 → 15 with absolute surge 3, old 8 and new 5, both annotated
 * max 13: allowed 18, add 5: old round(8·18/13) = 11, new round(5·18/13) =
 * 7. */
static void test_proportional_worked_example(void **state) {
        plan_rs rss[2] = { rs_("old", 1, 8, 8, false), rs_("new", 2, 5, 0, true) };
        int32_t t[2];

        rss[0].max_replicas_ann = rss[1].max_replicas_ann = 13;
        rss[0].desired_ann = rss[1].desired_ann = 10;
        assert_true(plan_is_scaling_event(15, rss, 2));
        assert_true(plan_proportional(15, 3, true, 13, rss, 2, t));
        assert_int_equal(t[0], 11);
        assert_int_equal(t[1], 7);

        /* Scaling down 10 → 5 (surge 2 at D=5 → allowed 7, remove 6):
         * round(8·7/13) = 4 → −4; round(5·7/13) = 3 → −2 */
        assert_true(plan_proportional(5, 2, true, 13, rss, 2, t));
        assert_int_equal(t[0], 4);
        assert_int_equal(t[1], 3);

        /* To zero. */
        assert_true(plan_proportional(0, 0, true, 13, rss, 2, t));
        assert_int_equal(t[0], 0);
        assert_int_equal(t[1], 0);
}

static void test_proportional_simple_cases(void **state) {
        plan_rs one[2] = { rs_("old", 1, 0, 0, false), rs_("new", 2, 3, 3, true) };
        plan_rs none[2] = { rs_("old", 1, 0, 0, false), rs_("older", 0, 0, 0, false) };
        plan_rs sat[2] = { rs_("old", 1, 2, 2, false), rs_("new", 2, 4, 4, true) };
        int32_t t[2];

        /* one active: it gets D (a hand-scaled RS is put back) */
        assert_true(plan_proportional(5, 1, true, 3, one, 2, t));
        assert_int_equal(t[1], 5);
        assert_false(plan_proportional(3, 1, true, 3, one, 2, t));
        /* none active, no new: the newest old one */
        assert_true(plan_proportional(2, 1, true, 0, none, 2, t));
        assert_int_equal(t[0], 2);
        assert_int_equal(t[1], 0);
        /* saturated new RS: the old ones go to 0 */
        sat[1].desired_ann = 4;
        assert_true(plan_proportional(4, 1, true, 6, sat, 2, t));
        assert_int_equal(t[0], 0);
        assert_int_equal(t[1], 4);
}

static void test_availability(void **state) {
        usec_t next;

        assert_false(plan_pod_available(false, 0, 0, 100 * S, &next));
        assert_true(plan_pod_available(true, 90 * S, 0, 100 * S, &next));
        assert_false(plan_pod_available(true, 90 * S, 10, 100 * S, &next));
        assert_int_equal(next, 100 * S + 1);
        assert_true(plan_pod_available(true, 90 * S, 10, 100 * S + 1, &next));
        assert_true(plan_pod_available(true, 80 * S, 10, 100 * S, &next));
        assert_int_equal(next, USEC_INFINITY);
}

static void test_deletion_order(void **state) {
        plan_pod pods[] = {
                /* 0 */ { "a", true, SPEC_POD_RUNNING, true, 100 * S, 0, 0, 10 * S, false, 0 },
                /* 1 */ { "b", false, SPEC_POD_PENDING, false, 0, 0, 0, 50 * S, false, 0 },
                /* 2 */ { "c", true, SPEC_POD_RUNNING, false, 0, 0, 0, 20 * S, false, 0 },
                /* 3 */ { "d", true, SPEC_POD_RUNNING, true, 200 * S, 0, 0, 30 * S, false, 0 },
                /* 4 */ { "e", true, SPEC_POD_RUNNING, true, 100 * S, 0, 3, 40 * S, false, 0 },
                /* 5 */ { "f", true, SPEC_POD_RUNNING, true, 100 * S, 0, 3, 45 * S, false, 0 },
                /* 6 */ { "g", true, SPEC_POD_RUNNING, true, 50 * S, 5, 0, 5 * S, false, 0 },
                /* 7 */ { "h", true, SPEC_POD_PENDING, false, 0, 0, 0, 1 * S, false, 0 },
        };
        size_t order[ELEMENTSOF(pods)];
        /* not started < pending < not ready < lower cost < ready for less
         * time < more restarts < newer */
        static const size_t want[] = { 1, 7, 2, 3, 5, 4, 0, 6 };

        plan_deletion_order(pods, ELEMENTSOF(pods), order);
        for (size_t i = 0; i < ELEMENTSOF(want); i++)
                if (order[i] != want[i])
                        fail_msg("position %zu: pod %zu, expected %zu", i, order[i], want[i]);
}

static void test_backoff(void **state) {
        /* The default: the first two young deaths in a row are replaced at
         * once, the third waits 1 s, then 2 s, 4 s, ... up to 5 minutes. */
        static const usec_t want[] = { 0,      0,      0,      1 * S,   2 * S,   4 * S,   8 * S,
                                       16 * S, 32 * S, 64 * S, 128 * S, 256 * S, 300 * S, 300 * S };
        const spec_backoff *d = &spec_backoff_default;
        spec_backoff off = { .off = true },
                     tuned = { .after = 0, .initial = 250 * MS, .max = 2 * S };

        for (unsigned i = 0; i < ELEMENTSOF(want); i++)
                if (plan_backoff_delay(d, i) != want[i])
                        fail_msg("streak %u: %llu us, expected %llu", i,
                                 (unsigned long long) plan_backoff_delay(d, i),
                                 (unsigned long long) want[i]);
        assert_int_equal(plan_backoff_delay(d, 1000), 300 * S);
        assert_int_equal(plan_backoff_delay(d, PLAN_STREAK_MAX), 300 * S);
        for (unsigned i = 0; i < 50; i++)
                assert_int_equal(plan_backoff_delay(&off, i), 0);
        assert_int_equal(plan_backoff_delay(&tuned, 0), 0);
        assert_int_equal(plan_backoff_delay(&tuned, 1), 250 * MS);
        assert_int_equal(plan_backoff_delay(&tuned, 2), 500 * MS);
        assert_int_equal(plan_backoff_delay(&tuned, 4), 2 * S);
        assert_int_equal(plan_backoff_delay(&tuned, 5), 2 * S);
}

static void test_crash_death(void **state) {
        static const struct {
                unsigned streak;
                bool ready;
                usec_t ran;
                unsigned want_streak;
                usec_t want_delay;
        } cases[] = {
                /* young: ran under 10 s, or never became ready */
                { 0, true, 9 * S, 1, 0 },
                { 1, true, 0, 2, 0 },
                { 2, true, 3 * S, 3, 1 * S }, /* the third in a row waits */
                { 3, true, 3 * S, 4, 2 * S },
                { 4, false, 3600 * S, 5, 4 * S },
                { 30, false, 0, 31, 300 * S },
                /* 10 s to a minute, ready: replaced at once, streak kept */
                { 3, true, 10 * S, 3, 0 },
                { 9, true, 59 * S, 9, 0 },
                /* a minute up and ready: forgiven */
                { 7, true, 60 * S, 0, 0 },
                { 0, true, 3600 * S, 0, 0 },
                /* saturates */
                { PLAN_STREAK_MAX, false, 0, PLAN_STREAK_MAX, 300 * S },
        };
        spec_backoff off = { .off = true };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                plan_death d = plan_crash_death(&spec_backoff_default, cases[i].streak,
                                                cases[i].ready, cases[i].ran);
                if (d.streak != cases[i].want_streak || d.delay != cases[i].want_delay)
                        fail_msg("case %zu: streak %u delay %llu us, expected %u and %llu", i,
                                 d.streak, (unsigned long long) d.delay, cases[i].want_streak,
                                 (unsigned long long) cases[i].want_delay);
                /* off: the streak is still kept, nothing waits */
                d = plan_crash_death(&off, cases[i].streak, cases[i].ready, cases[i].ran);
                assert_int_equal(d.streak, cases[i].want_streak);
                assert_int_equal(d.delay, 0);
        }
}

/* The pod worker's one step, every branch of the lifecycle. */
static void test_pod_next(void **state) {
        /* A live pod with a process, as most syncs see it. */
        const plan_pod_view live = { .grace = 30 * S,
                                     .probe_grace = 30 * S,
                                     .now = 1000 * S,
                                     .agent_started = true,
                                     .watched = true,
                                     .has_process = true };
        struct {
                const char *what;
                plan_pod_view v;
                plan_pod_action want;
                usec_t want_at, want_grace;
                bool want_first;
        } cases[32];
        size_t n = 0;
        plan_pod_view v;

#define CASE(w, setup, act, at_, grace_, first_)                                   \
        do {                                                                       \
                v = live;                                                          \
                setup;                                                             \
                cases[n++] = (typeof(cases[0])){ w, v, act, at_, grace_, first_ }; \
        } while (0)
        CASE("running: reflect what the runtime sees", (void) 0, PLAN_POD_REFLECT, 0, 0, false);
        CASE("orphan, live: its graceful deletion begins", v.orphaned = true, PLAN_POD_MARK_DELETED,
             0, 0, false);
        CASE("orphan, terminal: removed", (v.orphaned = true, v.terminal = true), PLAN_POD_REMOVE,
             0, 0, false);
        CASE("terminal, watched: forget the process", v.terminal = true, PLAN_POD_FORGET, 0, 0,
             false);
        CASE("terminal, not watched: kept as it is", (v.terminal = true, v.watched = false),
             PLAN_POD_NOTHING, 0, 0, false);
        CASE("terminal, deleted: removed", (v.terminal = true, v.deleting = true), PLAN_POD_REMOVE,
             0, 0, false);
        CASE("exited: its exit is written", v.exited = true, PLAN_POD_WRITE_EXIT, 0, 0, false);
        CASE("exited while deleted: removed", (v.exited = true, v.deleting = true), PLAN_POD_REMOVE,
             0, 0, false);
        CASE("deleted: first stop, its grace", (v.deleting = true, v.grace = 5 * S), PLAN_POD_STOP,
             0, 5 * S, true);
        CASE("deleted again, shorter grace: stopped sooner",
             (v.deleting = true, v.stopping = true, v.stop_grace = 30 * S, v.grace = 0),
             PLAN_POD_STOP, 0, 0, false);
        CASE("deleted again, longer grace: the earlier end holds",
             (v.deleting = true, v.stopping = true, v.stop_grace = 5 * S, v.grace = 30 * S),
             PLAN_POD_NOTHING, 0, 0, false);
        CASE("deleted, stopping, same grace: wait for the exit",
             (v.deleting = true, v.stopping = true, v.stop_grace = 30 * S), PLAN_POD_NOTHING, 0, 0,
             false);
        CASE("deleted, no process: removed", (v.deleting = true, v.has_process = false),
             PLAN_POD_REMOVE, 0, 0, false);
        CASE("deleted, not watched: removed",
             (v.deleting = true, v.watched = false, v.has_process = false), PLAN_POD_REMOVE, 0, 0,
             false);
        CASE("pending, not watched: started",
             (v.watched = false, v.has_process = false, v.pending = true), PLAN_POD_START, 0, 0,
             false);
        CASE("pending, start-after ahead: wait until then",
             (v.watched = false, v.has_process = false, v.pending = true, v.start_after = 1003 * S),
             PLAN_POD_WAIT_UNTIL, 1003 * S, 0, false);
        CASE("pending, start-after past: started",
             (v.watched = false, v.has_process = false, v.pending = true, v.start_after = 999 * S),
             PLAN_POD_START, 0, 0, false);
        CASE("pending while draining: none started",
             (v.watched = false, v.has_process = false, v.pending = true, v.draining = true),
             PLAN_POD_NOTHING, 0, 0, false);
        CASE("running, not watched: lost", (v.watched = false, v.has_process = false),
             PLAN_POD_MARK_LOST, 0, 0, false);
        CASE("running, not watched, during start-up: adoption first",
             (v.watched = false, v.has_process = false, v.agent_started = false), PLAN_POD_NOTHING,
             0, 0, false);
        CASE("liveness failed: stopped with the probe's grace",
             (v.liveness_failed = true, v.probe_grace = 2 * S), PLAN_POD_STOP_LIVENESS, 0, 2 * S,
             false);
        CASE("liveness failed, already stopping: reflect",
             (v.liveness_failed = true, v.stopping = true), PLAN_POD_REFLECT, 0, 0, false);
        CASE("fenced, running: stopped with its grace", v.fenced = true, PLAN_POD_FENCE, 0, 30 * S,
             false);
        CASE("fenced, liveness failed: fenced all the same",
             (v.fenced = true, v.liveness_failed = true), PLAN_POD_FENCE, 0, 30 * S, false);
        CASE("fenced, stopping already: nothing more", (v.fenced = true, v.stopping = true),
             PLAN_POD_NOTHING, 0, 0, false);
        CASE("fenced, not started: it waits for the node to be back",
             (v.fenced = true, v.watched = false, v.has_process = false, v.pending = true),
             PLAN_POD_NOTHING, 0, 0, false);
        CASE("fenced, exited: its exit is written", (v.fenced = true, v.exited = true),
             PLAN_POD_WRITE_EXIT, 0, 0, false);
        CASE("fenced, deleted, no process: removed",
             (v.fenced = true, v.deleting = true, v.has_process = false), PLAN_POD_REMOVE, 0, 0,
             false);
        CASE("fenced, terminal: its process forgotten", (v.fenced = true, v.terminal = true),
             PLAN_POD_FORGET, 0, 0, false);
#undef CASE

        for (size_t i = 0; i < n; i++) {
                plan_pod_step st = plan_pod_next(&cases[i].v);
                if (st.action != cases[i].want ||
                    (st.action == PLAN_POD_WAIT_UNTIL && st.at != cases[i].want_at) ||
                    ((st.action == PLAN_POD_STOP || st.action == PLAN_POD_STOP_LIVENESS ||
                      st.action == PLAN_POD_FENCE) &&
                     (st.grace != cases[i].want_grace || st.first != cases[i].want_first)))
                        fail_msg("%s: got %s (at %llu, grace %llu, first %d), expected %s",
                                 cases[i].what, plan_pod_action_to_string(st.action),
                                 (unsigned long long) st.at, (unsigned long long) st.grace,
                                 st.first, plan_pod_action_to_string(cases[i].want));
        }
        for (int a = 0; a < _PLAN_POD_ACTION_MAX; a++)
                assert_non_null(plan_pod_action_to_string((plan_pod_action) a));
        assert_null(plan_pod_action_to_string(_PLAN_POD_ACTION_MAX));
}

static void test_history_prune(void **state) {
        plan_old_rs old[] = {
                { "r1", 1, 0, 0, true, false, 0 },
                { "r2", 2, 0, 1, true, false, 0 }, /* pods still there: skipped */
                { "r3", 3, 0, 0, true, false, 0 },
                { "r4", 4, 0, 0, true, false, 0 },
                { "r5", 5, 2, 2, true, false, 0 },
        };
        bool del[5];

        /* limit 2: diff 3 → the oldest three are walked; r2 is skipped and
         * not replaced */
        assert_int_equal(plan_history_prune(old, 5, 2, del), 2);
        assert_true(del[0]);
        assert_false(del[1]);
        assert_true(del[2]);
        assert_false(del[3]);
        assert_false(del[4]);
        /* limit 0 removes every empty one; a negative limit keeps all */
        assert_int_equal(plan_history_prune(old, 5, 0, del), 3);
        assert_int_equal(plan_history_prune(old, 5, -1, del), 0);
        assert_int_equal(plan_history_prune(old, 5, 10, del), 0);

        /* By revision first, as Kubernetes' ReplicaSetsByRevision: r1, the
         * oldest, was revived by a rollback (revision 6) and is kept; r3
         * (revision 2) goes first; an unreadable revision counts as 0. */
        plan_old_rs byrev[] = {
                { "r1", 1, 0, 0, true, false, 6 },
                { "r3", 3, 0, 0, true, false, 2 },
                { "r4", 4, 0, 0, true, false, 4 },
                { "r9", 9, 0, 0, true, false, -1 },
        };
        bool del2[4];
        assert_int_equal(plan_history_prune(byrev, 4, 2, del2), 2);
        assert_false(del2[0]);
        assert_true(del2[1]);
        assert_false(del2[2]);
        assert_true(del2[3]);
}

static void test_undo_target(void **state) {
        int64_t revs[] = { 3, 1, 5, -1, 4 };
        size_t i;

        assert_int_equal(plan_undo_target(revs, 5, 0, &i), 0);
        assert_int_equal(i, 4); /* second-highest: 4 */
        assert_int_equal(plan_undo_target(revs, 5, 1, &i), 0);
        assert_int_equal(i, 1);
        assert_int_equal(plan_undo_target(revs, 5, 2, &i), -ENOENT);
        assert_int_equal(plan_undo_target(revs, 5, -1, &i), -EINVAL);
        assert_int_equal(plan_undo_target(revs, 1, 0, &i), -ENOENT); /* no history */
        assert_int_equal(plan_max_revision(revs, 5), 5);

        char *h = plan_revision_history_append(NULL, 3);
        assert_string_equal(h, "3");
        char *h2 = plan_revision_history_append(h, 7);
        assert_string_equal(h2, "3,7");
        free(h);
        free(h2);
        /* bounded at 2000 characters, oldest dropped */
        char *big = strdup("1");
        for (int k = 0; k < 800; k++) {
                char *n = plan_revision_history_append(big, 100000 + k);
                free(big);
                big = n;
        }
        assert_true(strlen(big) <= 2000);
        assert_non_null(strstr(big, "100799"));
        assert_null(strstr(big, "100000,"));
        free(big);
}

static void test_conditions(void **state) {
        spec_condition *c = NULL;
        size_t n = 0;

        assert_true(plan_set_condition(&c, &n, "Available", "True", "MinimumReplicasAvailable",
                                       "Deployment has minimum availability.", 10 * S));
        /* same status and reason: untouched */
        assert_false(plan_set_condition(&c, &n, "Available", "True", "MinimumReplicasAvailable",
                                        "other", 20 * S));
        assert_int_equal(c[0].last_update_time, 10 * S);
        /* same status, other reason: transition time kept */
        assert_true(plan_set_condition(&c, &n, "Available", "True", "Other", "x", 30 * S));
        assert_int_equal(c[0].last_transition_time, 10 * S);
        assert_int_equal(c[0].last_update_time, 30 * S);
        /* status flips: new transition time */
        assert_true(plan_set_condition(&c, &n, "Available", "False", "MinimumReplicasUnavailable",
                                       "y", 40 * S));
        assert_int_equal(c[0].last_transition_time, 40 * S);
        /* refresh rewrites the update time even with the same reason */
        assert_true(plan_refresh_condition(&c, &n, "Available", "False",
                                           "MinimumReplicasUnavailable", "y", 50 * S));
        assert_int_equal(c[0].last_update_time, 50 * S);
        assert_int_equal(c[0].last_transition_time, 40 * S);
        assert_true(plan_set_condition(&c, &n, "Progressing", "True", "NewReplicaSetCreated", "z",
                                       60 * S));
        assert_int_equal(n, 2);
        plan_remove_condition(&c, &n, "Available");
        assert_int_equal(n, 1);
        assert_string_equal(c[0].type, "Progressing");
        plan_remove_condition(&c, &n, "Progressing");
        free(c);
}

static void test_rollout_status(void **state) {
        spec_deployment *d = spec_deployment_new();
        char msg[256];

        d->metadata.name = strdup("web");
        d->metadata.generation = 2;
        d->spec.replicas = 3;
        d->status.observed_generation = 1;
        assert_int_equal(spec_rollout_status(d, 0, msg, sizeof msg), SPEC_ROLLOUT_WAITING);
        assert_string_equal(msg, "Waiting for deployment spec update to be observed...");
        d->status.observed_generation = 2;
        d->status.updated_replicas = 1;
        d->status.replicas = 4;
        assert_int_equal(spec_rollout_status(d, 0, msg, sizeof msg), SPEC_ROLLOUT_WAITING);
        assert_string_equal(msg, "Waiting for deployment \"web\" rollout to finish: 1 out of 3 "
                                 "new replicas have been updated...");
        d->status.updated_replicas = 3;
        assert_int_equal(spec_rollout_status(d, 0, msg, sizeof msg), SPEC_ROLLOUT_WAITING);
        assert_string_equal(msg, "Waiting for deployment \"web\" rollout to finish: 1 old "
                                 "replicas are pending termination...");
        d->status.replicas = 3;
        d->status.available_replicas = 2;
        assert_int_equal(spec_rollout_status(d, 0, msg, sizeof msg), SPEC_ROLLOUT_WAITING);
        assert_string_equal(msg, "Waiting for deployment \"web\" rollout to finish: 2 of 3 "
                                 "updated replicas are available...");
        d->status.available_replicas = 3;
        assert_int_equal(spec_rollout_status(d, 0, msg, sizeof msg), SPEC_ROLLOUT_DONE);
        assert_string_equal(msg, "deployment \"web\" successfully rolled out");
        assert_true(plan_deployment_complete(d));

        assert_int_equal(spec_rollout_status(d, 7, msg, sizeof msg), SPEC_ROLLOUT_FAILED);
        assert_string_equal(msg, "desired revision (7) is different from the running revision "
                                 "(n/a)");
        plan_set_condition(&d->status.conditions, &d->status.n_conditions, "Progressing", "False",
                           "ProgressDeadlineExceeded",
                           "ReplicaSet \"web-1\" has timed out "
                           "progressing.",
                           S);
        assert_int_equal(spec_rollout_status(d, 0, msg, sizeof msg), SPEC_ROLLOUT_FAILED);
        assert_string_equal(msg, "deployment \"web\" exceeded its progress deadline");
        spec_deployment_free(d);
}

/* Fleet: pods spread over ready, schedulable, matching nodes — fewest of
 * the deployment first, then fewest in all, then a stable hash; cordoned,
 * lost, full, unmatched and port-clashing nodes get none. */
static void test_schedule(void **state) {
        spec_kv ssd_items[] = { { (char *) "disk", (char *) "ssd" } },
                hdd_items[] = { { (char *) "disk", (char *) "hdd" } };
        spec_map ssd = { ssd_items, 1 }, hdd = { hdd_items, 1 };
        uint16_t taken[] = { 8080 };
        plan_node nodes[] = {
                { "a", true, false, &ssd, 0, 5, 0, NULL, 0 },
                { "b", true, false, &hdd, 0, 1, 0, NULL, 0 },
                { "c", true, false, &ssd, 0, 0, 0, NULL, 0 },
                { "cordoned", true, true, &ssd, 0, 0, 0, NULL, 0 },
                { "lost", false, false, &ssd, 0, 0, 0, NULL, 0 },
        };
        plan_new_pod pods[6] = {};
        char names[6][8];
        int where[6];

        for (int i = 0; i < 6; i++) {
                snprintf(names[i], sizeof names[i], "p%d", i);
                pods[i].name = names[i];
        }
        /* 6 pods on a, b, c: 2 each (spread wins over load); the first goes
         * to the least loaded (c), the second to b (1 pod) */
        assert_int_equal(plan_schedule(nodes, 5, pods, 6, where), 6);
        assert_int_equal(where[0], 2);
        assert_int_equal(where[1], 1);
        assert_int_equal(nodes[0].group_pods, 2);
        assert_int_equal(nodes[1].group_pods, 2);
        assert_int_equal(nodes[2].group_pods, 2);
        assert_int_equal(nodes[3].group_pods + nodes[4].group_pods, 0);
        assert_int_equal(nodes[0].pods, 7);

        /* nodeSelector: only the ssd nodes; a full node is skipped */
        plan_node sel[] = {
                { "a", true, false, &ssd, 3, 3, 0, NULL, 0 },
                { "b", true, false, &hdd, 0, 0, 0, NULL, 0 },
                { "c", true, false, &ssd, 0, 0, 0, NULL, 0 },
        };
        plan_new_pod want_ssd[3] = { { "x", &ssd, NULL, 0 },
                                     { "y", &ssd, NULL, 0 },
                                     { "z", &ssd, NULL, 0 } };
        assert_int_equal(plan_schedule(sel, 3, want_ssd, 3, where), 3);
        for (int i = 0; i < 3; i++)
                assert_int_equal(where[i], 2);

        /* a fixed port: not where it is taken; nowhere → -1 (Unschedulable) */
        uint16_t port[] = { 8080 };
        plan_node ports[] = {
                { "a", true, false, NULL, 0, 0, 0, taken, 1 },
                { "b", true, false, NULL, 0, 9, 9, NULL, 0 },
        };
        plan_new_pod web = { "web", NULL, port, 1 };
        assert_int_equal(plan_schedule(ports, 2, &web, 1, where), 1);
        assert_int_equal(where[0], 1);
        /* two replicas wanting one fixed port: one per node, the third nowhere */
        plan_node two[] = { { "a", true, false, NULL, 0, 0, 0, NULL, 0 },
                            { "b", true, false, NULL, 0, 0, 0, NULL, 0 } };
        plan_new_pod same[3] = { { "w0", NULL, port, 1 },
                                 { "w1", NULL, port, 1 },
                                 { "w2", NULL, port, 1 } };
        assert_int_equal(plan_schedule(two, 2, same, 3, where), 2);
        assert_true(where[0] >= 0 && where[1] >= 0 && where[0] != where[1]);
        assert_int_equal(where[2], -1);
        plan_new_pod nowhere = { "q", &hdd, NULL, 0 };
        assert_int_equal(plan_schedule(ports, 2, &nowhere, 1, where), 0);
        assert_int_equal(where[0], -1);

        /* ties: the same answer whatever the order of the nodes */
        plan_node t1[] = { { "m", true, false, NULL, 0, 0, 0, NULL, 0 },
                           { "n", true, false, NULL, 0, 0, 0, NULL, 0 } };
        plan_node t2[] = { t1[1], t1[0] };
        plan_new_pod one = { "pod-1", NULL, NULL, 0 };
        int w1, w2;
        plan_schedule(t1, 2, &one, 1, &w1);
        plan_schedule(t2, 2, &one, 1, &w2);
        assert_string_equal(t1[w1].name, t2[w2].name);
}

/* Fleet: lost nodes are Unknown, evicted after lost_after, unless the
 * guard holds (55 % of the nodes, at least 2, lost together; or a leader
 * younger than a TTL). */
static void test_node_lifecycle(void **state) {
        plan_node_state five[] = {
                { "a", true, 0 }, { "b", false, 100 * S }, { "c", true, 0 },
                { "d", true, 0 }, { "e", true, 0 },
        };
        plan_node_verdict v[5];
        plan_fleet_view f;

        f = plan_node_lifecycle(five, 5, 105 * S, 10 * S, PLAN_FLEET_DISRUPTION, 0, 3 * S, v);
        assert_false(f.disrupted);
        assert_int_equal(v[0], PLAN_NODE_READY);
        assert_int_equal(v[1], PLAN_NODE_UNKNOWN);
        assert_int_equal(f.next, 110 * S);
        f = plan_node_lifecycle(five, 5, 110 * S, 10 * S, PLAN_FLEET_DISRUPTION, 0, 3 * S, v);
        assert_int_equal(v[1], PLAN_NODE_EVICT);
        assert_int_equal(f.next, USEC_INFINITY);

        /* 3 of 5 lost at once (60 %): nothing evicted */
        five[2].live = five[3].live = false;
        five[2].lost_since = five[3].lost_since = 100 * S;
        f = plan_node_lifecycle(five, 5, 200 * S, 10 * S, PLAN_FLEET_DISRUPTION, 0, 3 * S, v);
        assert_true(f.disrupted);
        assert_int_equal(v[1], PLAN_NODE_HOLD);
        assert_int_equal(v[2], PLAN_NODE_HOLD);
        /* 2 of 5 (40 %): evicted */
        five[3].live = true;
        f = plan_node_lifecycle(five, 5, 200 * S, 10 * S, PLAN_FLEET_DISRUPTION, 0, 3 * S, v);
        assert_false(f.disrupted);
        assert_int_equal(v[2], PLAN_NODE_EVICT);

        /* one of two lost is 50 %, but one node alone never trips the guard */
        plan_node_state two[] = { { "a", true, 0 }, { "b", false, 0 } };
        f = plan_node_lifecycle(two, 2, 100 * S, 0, PLAN_FLEET_DISRUPTION, 0, 3 * S, v);
        assert_int_equal(v[1], PLAN_NODE_EVICT);

        /* a leader younger than a TTL evicts nothing yet, and says when */
        f = plan_node_lifecycle(two, 2, 101 * S, 0, PLAN_FLEET_DISRUPTION, 100 * S, 3 * S, v);
        assert_true(f.disrupted);
        assert_int_equal(v[1], PLAN_NODE_HOLD);
        assert_int_equal(f.next, 103 * S);
}

static void test_fence(void **state) {
        /* replace: never stops */
        assert_false(plan_fence(PLAN_LOST_REPLACE, 100 * S, 10 * S, 1000 * S));
        /* fence: a margin before the lease could expire */
        assert_false(plan_fence(PLAN_LOST_FENCE, 100 * S, 10 * S, 108 * S));
        assert_true(plan_fence(PLAN_LOST_FENCE, 100 * S, 10 * S, 109 * S));
        assert_true(plan_fence(PLAN_LOST_FENCE, 0, 10 * S, 1 * S)); /* never acknowledged */
        assert_int_equal(plan_fence_replace_at(120 * S, 30 * S), 152 * S);
}

/* Fleet: after a reconnection, keep what is still bound here, stop the
 * rest (confirming deletions), start only what etcd binds here. */
static void test_local_reconcile(void **state) {
        plan_local_pod local[] = { { "keep" }, { "moved" }, { "gone" }, { "deleting" } };
        plan_bound_pod etcd[] = {
                { "keep", "n1", false },      { "moved", "n2", false },
                { "deleting", "n1", true },   { "new-here", "n1", false },
                { "new-there", "n2", false }, { "new-deleting", "n1", true },
                { "unbound", NULL, false },
        };
        plan_local_action act[4];
        bool start[7];

        plan_local_reconcile(local, 4, etcd, 7, "n1", act, start);
        assert_int_equal(act[0], PLAN_LOCAL_KEEP);
        assert_int_equal(act[1], PLAN_LOCAL_STOP);
        assert_int_equal(act[2], PLAN_LOCAL_STOP);
        assert_int_equal(act[3], PLAN_LOCAL_STOP_CONFIRM);
        static const bool want[] = { false, false, false, true, false, false, false };
        for (int i = 0; i < 7; i++)
                assert_int_equal(start[i], want[i]);
}

/* Fleet: pods on a lost node go first (as Unknown); then, among equals,
 * those whose node runs more of the ReplicaSet. */
static void test_deletion_order_fleet(void **state) {
        plan_pod pods[] = {
                /* 0 */ { "a", true, SPEC_POD_RUNNING, true, 100 * S, 0, 0, 10 * S, false, 1 },
                /* 1 */ { "b", true, SPEC_POD_RUNNING, true, 100 * S, 0, 0, 10 * S, false, 3 },
                /* 2 */ { "c", true, SPEC_POD_RUNNING, true, 100 * S, 0, 0, 10 * S, true, 1 },
                /* 3 */ { "d", true, SPEC_POD_RUNNING, true, 100 * S, 0, 0, 10 * S, false, 2 },
        };
        size_t order[4];
        static const size_t want[] = { 2, 1, 3, 0 };

        plan_deletion_order(pods, 4, order);
        for (size_t i = 0; i < 4; i++)
                if (order[i] != want[i])
                        fail_msg("position %zu: pod %zu, expected %zu", i, order[i], want[i]);
}

/* tend.io/auto-rollback as a table: whether a rollout failed, and why. */
static void test_auto_rollback(void **state) {
        const plan_rollback_view base = { .enabled = true, .has_new = true, .now = 1000 * S };
        struct {
                const char *what;
                plan_rollback_view v;
                plan_rollback_reason want;
        } cases[16];
        size_t n = 0;
        plan_rollback_view v;

#define CASE(w, setup, r)                                   \
        do {                                                \
                v = base;                                   \
                setup;                                      \
                cases[n++] = (typeof(cases[0])){ w, v, r }; \
        } while (0)
        CASE("healthy: nothing", (void) 0, PLAN_ROLLBACK_NONE);
        CASE("deadline passed", v.deadline_exceeded = true, PLAN_ROLLBACK_DEADLINE);
        CASE("crash loop", v.crashlooping = 2, PLAN_ROLLBACK_CRASHLOOP);
        CASE("deadline and crash loop: the deadline",
             (v.deadline_exceeded = true, v.crashlooping = 1), PLAN_ROLLBACK_DEADLINE);
        CASE("not asked for", (v.enabled = false, v.crashlooping = 1), PLAN_ROLLBACK_NONE);
        CASE("paused", (v.paused = true, v.deadline_exceeded = true), PLAN_ROLLBACK_NONE);
        CASE("no new ReplicaSet", (v.has_new = false, v.crashlooping = 1), PLAN_ROLLBACK_NONE);
        CASE("rolled back from once already", (v.failed_before = true, v.crashlooping = 1),
             PLAN_ROLLBACK_NONE);
        CASE("completed, healthy", (v.complete = true, v.complete_at = 990 * S),
             PLAN_ROLLBACK_NONE);
        CASE("completed 10 s ago, crash-looping: the rollout's failure",
             (v.complete = true, v.complete_at = 990 * S, v.crashlooping = 1),
             PLAN_ROLLBACK_CRASHLOOP);
        CASE("completed 60 s ago, crash-looping: the back-off's business",
             (v.complete = true, v.complete_at = 940 * S, v.crashlooping = 1), PLAN_ROLLBACK_NONE);
        CASE("completed at a time unknown, crash-looping: not the rollout's",
             (v.complete = true, v.complete_at = 0, v.crashlooping = 1), PLAN_ROLLBACK_NONE);
#undef CASE
        (void) state;
        for (size_t i = 0; i < n; i++)
                if (plan_auto_rollback(&cases[i].v) != cases[i].want)
                        fail_msg("%s: %d, want %d", cases[i].what, plan_auto_rollback(&cases[i].v),
                                 cases[i].want);
}

/* ... and what it goes back to: the newest that completed, not the new one. */
static void test_rollback_target(void **state) {
        const int64_t revs[] = { 3, 5, 4, 6 };
        const bool complete[] = { true, false, true, true };
        const bool none[] = { false, false, false, true };

        (void) state;
        assert_int_equal(plan_rollback_target(revs, complete, 4, 3), 2); /* 4, not 6 (new) */
        assert_int_equal(plan_rollback_target(revs, complete, 4, 1), 3);
        assert_int_equal(plan_rollback_target(revs, none, 4, 3), -1);
        assert_int_equal(plan_rollback_target(revs, complete, 0, -1), -1);
}

/* tend.io/canary: the cap, the old ReplicaSets' room, and the next step. */
static void test_canary(void **state) {
        int32_t t[4];

        (void) state;
        assert_int_equal(plan_canary_cap(2, true, false, true), 2);
        assert_int_equal(plan_canary_cap(-1, true, false, true), -1); /* no annotation */
        assert_int_equal(plan_canary_cap(2, false, false, true), -1); /* Recreate */
        assert_int_equal(plan_canary_cap(2, true, true, true), -1);   /* promoted */
        assert_int_equal(plan_canary_cap(2, true, false, false), -1); /* the first revision */

        /* 10 replicas, 2 canaries: the old keep 8, the newest old first,
         * each never above what it has */
        {
                const int32_t have[] = { 3, 6, 1 }; /* the new one last (index 2) */
                memcpy(t, (int32_t[]){ 0, 4, 0 }, 3 * sizeof(int32_t));
                plan_canary_keep_old(10, 2, have, 3, 2, t);
                assert_int_equal(t[1], 6); /* the newer old one, full */
                assert_int_equal(t[0], 2); /* then the older */
                assert_int_equal(t[2], 0); /* the new one untouched */
        }
        {
                /* the new one grew past the cap: the old keep D - its size */
                const int32_t have[] = { 8, 4 };
                memcpy(t, (int32_t[]){ 3, 4 }, 2 * sizeof(int32_t));
                plan_canary_keep_old(10, 2, have, 2, 1, t);
                assert_int_equal(t[0], 6);
        }
        {
                /* targets already at the room: nothing raised */
                const int32_t have[] = { 9, 1 };
                memcpy(t, (int32_t[]){ 8, 1 }, 2 * sizeof(int32_t));
                plan_canary_keep_old(10, 2, have, 2, 1, t);
                assert_int_equal(t[0], 8);
        }

        plan_canary_step st = plan_canary_next(2, 2, 1, 0, 0, 100 * S);
        assert_int_equal(st.action, PLAN_CANARY_GROWING); /* one not available */
        st = plan_canary_next(2, 1, 1, 50 * S, 0, 100 * S);
        assert_int_equal(st.action, PLAN_CANARY_GROWING); /* not all made */
        st = plan_canary_next(2, 2, 2, 0, 0, 100 * S);
        assert_int_equal(st.action, PLAN_CANARY_WAIT); /* waits from now, on request only */
        assert_int_equal(st.since, 100 * S);
        assert_int_equal(st.at, 0);
        st = plan_canary_next(2, 2, 2, 90 * S, 30 * S, 100 * S);
        assert_int_equal(st.action, PLAN_CANARY_WAIT); /* healthy for 10 s of 30 */
        assert_int_equal(st.since, 90 * S);
        assert_int_equal(st.at, 120 * S);
        st = plan_canary_next(2, 2, 2, 70 * S, 30 * S, 100 * S);
        assert_int_equal(st.action, PLAN_CANARY_PROMOTE); /* healthy for 30 s */
        st = plan_canary_next(2, 3, 2, 70 * S, 30 * S, 100 * S);
        assert_int_equal(st.action, PLAN_CANARY_PROMOTE); /* more made than the cap: counted */
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_rolling_worked_example),
                cmocka_unit_test(test_cleanup_unhealthy),
                cmocka_unit_test(test_terminating_count),
                cmocka_unit_test(test_inactive_old_availability),
                cmocka_unit_test(test_proportional_worked_example),
                cmocka_unit_test(test_proportional_simple_cases),
                cmocka_unit_test(test_availability),
                cmocka_unit_test(test_deletion_order),
                cmocka_unit_test(test_deletion_order_fleet),
                cmocka_unit_test(test_schedule),
                cmocka_unit_test(test_node_lifecycle),
                cmocka_unit_test(test_fence),
                cmocka_unit_test(test_local_reconcile),
                cmocka_unit_test(test_backoff),
                cmocka_unit_test(test_crash_death),
                cmocka_unit_test(test_pod_next),
                cmocka_unit_test(test_auto_rollback),
                cmocka_unit_test(test_rollback_target),
                cmocka_unit_test(test_canary),
                cmocka_unit_test(test_history_prune),
                cmocka_unit_test(test_undo_target),
                cmocka_unit_test(test_conditions),
                cmocka_unit_test(test_rollout_status),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
