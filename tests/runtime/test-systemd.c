/* SPDX-License-Identifier: MIT */

/*
 * The systemd backend against a real systemd user manager, started for
 * this test by tests/systemd/harness.sh. What the backend sets on a unit is
 * read back over the bus, as systemctl would.
 */

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <systemd/sd-bus.h>

#include "rt-harness.h"
#include "rt-internal.h"

#define DEST "org.freedesktop.systemd1"

static sd_bus *bus; /* the test's own connection, synchronous calls only */

static harness *sd_harness(void) {
        return harness_new(&(rt_config){ .systemd_bus = RT_BUS_USER });
}

static char *unit_path(const char *unit) {
        char *p = NULL;
        assert_int_equal(sd_bus_path_encode("/org/freedesktop/systemd1/unit", unit, &p), 0);
        return p;
}

static char *prop_str(const char *unit, const char *iface, const char *name) {
        _cleanup_free_ char *path = unit_path(unit);
        char *v = NULL;
        int r = sd_bus_get_property_string(bus, DEST, path, iface, name, NULL, &v);
        if (r < 0)
                fail_msg("%s %s: %s", unit, name, strerror(-r));
        return v;
}

static uint64_t prop_u64(const char *unit, const char *iface, const char *name) {
        _cleanup_free_ char *path = unit_path(unit);
        uint64_t v = 0;
        int r = sd_bus_get_property_trivial(bus, DEST, path, iface, name, NULL, 't', &v);
        if (r < 0)
                fail_msg("%s %s: %s", unit, name, strerror(-r));
        return v;
}

static uint32_t main_pid(const char *unit) {
        _cleanup_free_ char *path = unit_path(unit);
        uint32_t v = 0;
        (void) sd_bus_get_property_trivial(bus, DEST, path, "org.freedesktop.systemd1.Service",
                                           "MainPID", NULL, 'u', &v);
        return v;
}

static char **prop_strv(const char *unit, const char *iface, const char *name) {
        _cleanup_free_ char *path = unit_path(unit);
        char **v = NULL;
        int r = sd_bus_get_property_strv(bus, DEST, path, iface, name, NULL, &v);
        if (r < 0)
                fail_msg("%s %s: %s", unit, name, strerror(-r));
        return v;
}

/* ActiveState, or "gone" when the unit is no longer loaded. */
static char *active_state(const char *unit) {
        _cleanup_free_ char *load = prop_str(unit, "org.freedesktop.systemd1.Unit", "LoadState");
        if (streq(load, "not-found"))
                return strdup("gone");
        return prop_str(unit, "org.freedesktop.systemd1.Unit", "ActiveState");
}

static bool unit_gone(harness *h, void *unit) {
        _cleanup_free_ char *s = active_state(unit);
        return streq(s, "gone");
}

static spec_pod_spec *sd_spec(const char *args, const char *extra) {
        _cleanup_free_ char *c = cmd(args);
        return pod_spec("      runtimeClassName: systemd", c, extra ?: "", NULL);
}

static void test_unit_names(void **state) {
        char *u = rt_unit_name("default", "web-7d9f-x2c4d"), *ns = NULL, *pod = NULL;

        assert_string_equal(u, "tend-default-web-7d9f-x2c4d.service");
        assert_int_equal(rt_unit_parse(u, &ns, &pod), 0);
        assert_string_equal(ns, "default");
        assert_string_equal(pod, "web-7d9f-x2c4d");
        free(u), free(ns), free(pod);
        /* a dash in the namespace is escaped, so the name parses back */
        u = rt_unit_name("my-ns", "a-b");
        assert_string_equal(u, "tend-my\\x2dns-a-b.service");
        assert_int_equal(rt_unit_parse(u, &ns, &pod), 0);
        assert_string_equal(ns, "my-ns");
        assert_string_equal(pod, "a-b");
        free(u), free(ns), free(pod);
        assert_int_equal(rt_unit_parse("sshd.service", &ns, &pod), -EINVAL);
}

static void test_start_properties_logs(void **state) {
        harness *h = sd_harness();
        _cleanup_free_ char *command = strprintf(
                "        command: [\"%s\", argv, hello, \"$(FOO)\"]", testprog);
        spec_pod_spec *s = pod_spec(
                "      runtimeClassName: systemd", "      terminationGracePeriodSeconds: 7",
                "      containers:\n      - name: main", command,
                "        env: [{name: FOO, value: bar}]", "        workingDir: /tmp", NULL);
        spec_map labels = {};
        rt_pod_params p = { .namespace = "default",
                            .name = "props",
                            .uid = "u-props",
                            .spec = s,
                            .labels = &labels };
        const char *unit = "tend-default-props.service", *svc = "org.freedesktop.systemd1.Service";
        char *err = NULL, *v, **env;
        rt_pod *pod = NULL;
        _cleanup_free_ char *log = rt_log_path(h->state_dir, "default", "props", "main"), *want;

        (void) spec_map_set(&labels, "app", "web");
        assert_int_equal(rt_pod_start(h->m, &p, NULL, &pod, &err), 0);
        assert_string_equal(rt_pod_container_id(pod), "systemd://tend-default-props.service");
        assert_true(run_until(h, pod_started, pod, 10000));
        assert_true(wait_log(h, "props", "hello\nbar\n"));

        v = active_state(unit);
        assert_string_equal(v, "active");
        free(v);
        v = prop_str(unit, "org.freedesktop.systemd1.Unit", "Description");
        assert_string_equal(v, "tend pod default/props (app=web)");
        free(v);
        v = prop_str(unit, svc, "Slice");
        assert_string_equal(v, "tend.slice");
        free(v);
        v = prop_str(unit, svc, "Type");
        assert_string_equal(v, "exec");
        free(v);
        v = prop_str(unit, svc, "Restart");
        assert_string_equal(v, "no");
        free(v);
        v = prop_str(unit, svc, "KillMode");
        assert_string_equal(v, "mixed");
        free(v);
        v = prop_str(unit, svc, "WorkingDirectory");
        assert_string_equal(v, "/tmp");
        free(v);
        assert_int_equal(prop_u64(unit, svc, "TimeoutStopUSec"), 7 * USEC_PER_SEC);
        v = prop_str(unit, svc, "StandardOutput");
        want = strprintf("append:%s", log);
        assert_true(streq(v, "append") || streq(v, want));
        free(v);
        /* An explicit environment, not the manager's. */
        env = prop_strv(unit, svc, "Environment");
        assert_true(strv_contains(env, "FOO=bar"));
        assert_true(strv_contains(env, "POD_NAME=props"));
        assert_true(strv_contains(env, "POD_UID=u-props"));
        for (char **e = env; *e; e++)
                assert_null(startswith(*e, "XDG_RUNTIME_DIR="));
        strv_free(env);
        assert_int_equal(main_pid(unit) > 0, true);

        assert_int_equal(rt_pod_stop(pod, 5 * USEC_PER_SEC), 0);
        assert_true(run_until(h, pod_exited, pod, 10000));
        assert_true(run_until(h, unit_gone, (void *) unit, 5000));
        rt_pod_free(pod);
        free(err);
        spec_map_done(&labels);
        pod_spec_free(s);
        harness_free(h);
}

/* Limits: the unit's MemoryMax= and CPUQuota= where the manager enforces
 * them; elsewhere (a user manager on cgroup v1, as under the tests'
 * harness here) refused with the reason, and no unit made. */
static void test_limits(void **state) {
        harness *h = sd_harness();
        _cleanup_free_ char *command = strprintf("        command: [\"%s\", sleep]", testprog);
        spec_pod_spec *s = pod_spec("      runtimeClassName: systemd",
                                    "      containers:\n      - name: main", command,
                                    "        resources: {limits: {memory: 64Mi, cpu: 500m}}", NULL);
        rt_pod_params p = {
                .namespace = "default", .name = "limited", .uid = "u-limited", .spec = s
        };
        const char *unit = "tend-default-limited.service",
                   *svc = "org.freedesktop.systemd1.Service";
        char *err = NULL, *why = NULL;
        rt_pod *pod = NULL;

        if (rt_limits_problem(h->m, s, &why)) {
                print_message("  (limits refused here: %s)\n", why);
                assert_non_null(strstr(why, "limits.memory cannot be enforced"));
                assert_int_equal(rt_pod_start(h->m, &p, NULL, &pod, &err), -EOPNOTSUPP);
                assert_string_equal(err, why);
                assert_null(pod);
                assert_true(unit_gone(h, (void *) unit));
        } else {
                assert_int_equal(rt_pod_start(h->m, &p, NULL, &pod, &err), 0);
                assert_true(run_until(h, pod_started, pod, 10000));
                assert_int_equal(prop_u64(unit, svc, "MemoryMax"), 64 << 20);
                assert_int_equal(prop_u64(unit, svc, "CPUQuotaPerSecUSec"), 500000);
                assert_int_equal(rt_pod_stop(pod, 5 * USEC_PER_SEC), 0);
                assert_true(run_until(h, pod_exited, pod, 10000));
                rt_pod_free(pod);
        }
        free(why);
        free(err);
        pod_spec_free(s);
        harness_free(h);
}

static void check_exit(harness *h, rt_pod *pod, rt_exit_kind kind, int value, const char *reason) {
        event *e;
        assert_true(run_until(h, pod_exited, pod, 10000));
        e = find_event(h, pod, EV_EXITED);
        assert_non_null(find_event(h, pod, EV_STARTED));
        assert_int_equal(e->exit.kind, kind);
        assert_int_equal(kind == RT_EXIT_SIGNAL ? e->exit.signal : e->exit.code, value);
        assert_string_equal(e->exit.reason, reason);
}

static void test_exits(void **state) {
        harness *h = sd_harness();
        spec_pod_spec *s3 = sd_spec("\"exit\", \"3\"", NULL), *sl = sd_spec("\"sleep\"", NULL);
        rt_pod *a = start(h, "exit3", s3), *b = start(h, "killed", sl),
               *c = start(h, "killunit", sl);
        char cmdline[256];

        check_exit(h, a, RT_EXIT_CODE, 3, "Error");
        /* failed units are reset, not left to pile up */
        assert_true(run_until(h, unit_gone, "tend-default-exit3.service", 5000));

        assert_true(run_until(h, pod_started, b, 10000));
        assert_int_equal(kill((pid_t) main_pid("tend-default-killed.service"), SIGKILL), 0);
        check_exit(h, b, RT_EXIT_SIGNAL, 9, "Killed");
        assert_true(run_until(h, unit_gone, "tend-default-killed.service", 5000));

        assert_true(run_until(h, pod_started, c, 10000));
        snprintf(cmdline, sizeof cmdline,
                 "systemctl --user kill -s KILL tend-default-killunit.service");
        assert_int_equal(system(cmdline), 0);
        check_exit(h, c, RT_EXIT_SIGNAL, 9, "Killed");

        rt_pod_free(a), rt_pod_free(b), rt_pod_free(c);
        pod_spec_free(s3), pod_spec_free(sl);
        harness_free(h);
}

static void test_start_errors(void **state) {
        harness *h = sd_harness();
        char noexec[128];
        spec_pod_spec *s;
        rt_pod *pod;
        event *e;
        int fd;

        /* exists, but is not executable: systemd fails the start job */
        snprintf(noexec, sizeof noexec, "%s/noexec", h->state_dir);
        fd = open(noexec, O_CREAT | O_WRONLY, 0644);
        assert_true(fd >= 0);
        close(fd);
        _cleanup_free_ char *line = strprintf(
                "      containers:\n      - name: main\n        command: [%s]", noexec);
        s = pod_spec("      runtimeClassName: systemd", line, NULL);
        pod = start(h, "noexec", s);
        assert_true(run_until(h, pod_exited, pod, 10000));
        e = find_event(h, pod, EV_EXITED);
        assert_null(find_event(h, pod, EV_STARTED));
        assert_int_equal(e->exit.kind, RT_EXIT_START_ERROR);
        assert_string_equal(e->exit.reason, "StartError");
        if (!strstr(e->message, "executing the program") || !strstr(e->message, noexec) ||
            !strstr(e->message, "203"))
                fail_msg("message: %s", e->message);
        assert_true(run_until(h, unit_gone, "tend-default-noexec.service", 5000));
        rt_pod_free(pod);
        pod_spec_free(s);

        s = sd_spec("\"sleep\"", "        workingDir: /nonexistent/dir");
        pod = start(h, "nodir", s);
        assert_true(run_until(h, pod_exited, pod, 10000));
        e = find_event(h, pod, EV_EXITED);
        assert_int_equal(e->exit.kind, RT_EXIT_START_ERROR);
        if (!strstr(e->message, "working directory"))
                fail_msg("message: %s", e->message);
        rt_pod_free(pod);
        pod_spec_free(s);
        harness_free(h);
}

static void test_stop_grace(void **state) {
        harness *h = sd_harness();
        spec_pod_spec *sl = sd_spec("\"sleep\"", NULL), *ig = sd_spec("\"ignore-term\"", NULL);
        rt_pod *a = start(h, "term", sl), *b = start(h, "stubborn", ig);
        usec_t t0;
        event *e;

        assert_true(run_until(h, pod_started, a, 10000));
        assert_true(run_until(h, pod_started, b, 10000));
        run_for(h, 200); /* let ignore-term install its handler */
        t0 = now_monotonic();
        assert_int_equal(rt_pod_stop(a, 10 * USEC_PER_SEC), 0);
        assert_int_equal(rt_pod_stop(b, 1 * USEC_PER_SEC), 0);
        check_exit(h, a, RT_EXIT_SIGNAL, SIGTERM, "Killed");
        e = find_event(h, a, EV_EXITED);
        assert_true(e->at - t0 < 2 * USEC_PER_SEC);
        check_exit(h, b, RT_EXIT_SIGNAL, SIGKILL, "Killed");
        e = find_event(h, b, EV_EXITED);
        assert_true(e->at - t0 >= 900 * USEC_PER_MSEC);
        assert_true(e->at - t0 < 5 * USEC_PER_SEC);
        rt_pod_free(a), rt_pod_free(b);
        pod_spec_free(sl), pod_spec_free(ig);
        harness_free(h);
}

/* A second manager (an agent restart) adopts the unit: no restart, same
 * MainPID, and it sees the unit's end. Units no pod claims are orphans. */
static void test_adopt_and_orphans(void **state) {
        harness *h = sd_harness(), *h2;
        spec_pod_spec *sl = sd_spec("\"sleep\"", NULL);
        rt_pod_params p = { .namespace = "default", .name = "kept", .uid = "u", .spec = sl };
        rt_pod *a = start(h, "kept", sl), *o = start(h, "orphan", sl), *b = NULL;
        rt_record rec = {};
        char *err = NULL;
        uint32_t pid;

        assert_true(run_until(h, pod_started, a, 10000));
        assert_true(run_until(h, pod_started, o, 10000));
        pid = main_pid("tend-default-kept.service");
        json_t *j = rt_record_to_json(rt_pod_record(a));
        assert_int_equal(rt_record_from_json(j, &rec), 0);
        json_decref(j);
        assert_string_equal(rec.unit, "tend-default-kept.service");
        rt_pod_free(a), rt_pod_free(o);
        harness_free(h); /* detaches: the units keep running */

        h2 = sd_harness();
        assert_int_equal(rt_pod_adopt(h2->m, &p, &rec, NULL, &b, &err), 0);
        assert_true(run_until(h2, pod_started, b, 5000));
        assert_int_equal(main_pid("tend-default-kept.service"), pid);

        rt__sweep_orphan_units(h2->m);
        assert_true(run_until(h2, unit_gone, "tend-default-orphan.service", 10000));
        assert_int_equal(h2->n_orphans, 1);
        assert_string_equal(h2->orphans[0], "tend-default-orphan.service");
        run_for(h2, 200);
        assert_null(find_event(h2, b, EV_EXITED)); /* the adopted one still runs */

        assert_int_equal(kill((pid_t) pid, SIGKILL), 0);
        assert_true(run_until(h2, pod_exited, b, 10000));
        assert_int_equal(find_event(h2, b, EV_EXITED)->exit.kind, RT_EXIT_SIGNAL);
        rt_pod_free(b);

        /* a record whose unit is gone */
        b = NULL;
        assert_int_equal(rt_pod_adopt(h2->m, &p, &rec, NULL, &b, &err), -ESRCH);
        assert_non_null(strstr(err, "tend-default-kept.service"));
        free(err);
        rt_record_done(&rec);
        pod_spec_free(sl);
        harness_free(h2);
}

/* No bus: a clear error for systemd pods, processes still fine. */
static void test_bus_unreachable(void **state) {
        _cleanup_free_ char *saved = strdup(getenv("DBUS_SESSION_BUS_ADDRESS"));
        harness *h;
        spec_pod_spec *s = sd_spec("\"sleep\"", NULL);
        _cleanup_free_ char *c = cmd("\"sleep\"");
        spec_pod_spec *ps = pod_spec(c, NULL);
        rt_pod_params p = { .namespace = "default", .name = "nobus", .uid = "u", .spec = s };
        rt_pod *pod = NULL, *proc;
        char *err = NULL;

        setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus", 1);
        h = sd_harness();
        assert_true(rt_pod_start(h->m, &p, NULL, &pod, &err) < 0);
        assert_null(pod);
        if (!strstr(err, "cannot reach systemd on the user bus"))
                fail_msg("error: %s", err);
        free(err);
        proc = start(h, "proc", ps);
        assert_true(run_until(h, pod_started, proc, 5000));
        assert_int_equal(rt_pod_stop(proc, 0), 0);
        assert_true(run_until(h, pod_exited, proc, 5000));
        rt_pod_free(proc);
        setenv("DBUS_SESSION_BUS_ADDRESS", saved, 1);
        pod_spec_free(s), pod_spec_free(ps);
        harness_free(h);
}

int main(void) {
        const char *bin = getenv("TEND_TEST_BIN_DIR");
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_unit_names),
                cmocka_unit_test(test_start_properties_logs),
                cmocka_unit_test(test_limits),
                cmocka_unit_test(test_exits),
                cmocka_unit_test(test_start_errors),
                cmocka_unit_test(test_stop_grace),
                cmocka_unit_test(test_adopt_and_orphans),
                cmocka_unit_test(test_bus_unreachable),
        };
        int r;

        if (!getenv("TEND_SYSTEMD_HARNESS")) {
                fprintf(stderr, "run me under tests/systemd/harness.sh\n");
                return 77;
        }
        if (!bin) {
                fprintf(stderr, "TEND_TEST_BIN_DIR is not set\n");
                return 77;
        }
        snprintf(testprog, sizeof testprog, "%s/tend-testprog", bin);
        signal(SIGPIPE, SIG_IGN);
        if (getenv("TEND_DEBUG"))
                log_set_max_level(LOG_LEVEL_DEBUG);
        if (sd_bus_open_user(&bus) < 0) {
                fprintf(stderr, "cannot open the user bus\n");
                return 1;
        }
        if (getenv("TEST_FILTER"))
                cmocka_set_test_filter(getenv("TEST_FILTER"));
        r = cmocka_run_group_tests(tests, NULL, NULL);
        sd_bus_flush_close_unref(bus);
        return r;
}
