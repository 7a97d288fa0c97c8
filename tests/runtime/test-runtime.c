/* SPDX-License-Identifier: MIT */

/*
 * Integration tests of the runtime: real processes on a real libuv loop.
 * The pods run tend-testprog (tests/helpers/testprog.c).
 */

#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "rt-harness.h"
#include "rt-internal.h"

/* ---- exits --------------------------------------------------------------------------------- */

static void test_exit_code(void **state) {
        harness *h = harness_new(NULL);
        char *c = cmd("\"exit\", \"3\"");
        spec_pod_spec *s = pod_spec(c, NULL);
        rt_pod *pod = start(h, "exit3", s);
        event *e;

        assert_true(run_until(h, pod_exited, pod, 5000));
        assert_non_null(find_event(h, pod, EV_STARTED));
        assert_true(find_event(h, pod, EV_STARTED) < find_event(h, pod, EV_EXITED));
        e = find_event(h, pod, EV_EXITED);
        assert_int_equal(e->exit.kind, RT_EXIT_CODE);
        assert_int_equal(e->exit.code, 3);
        assert_string_equal(e->exit.reason, "Error");
        assert_true(e->exit.finished_at > 0);
        assert_false(rt_pod_is_running(pod));
        assert_non_null(strstr(rt_pod_container_id(pod), "process://"));
        rt_pod_free(pod);
        pod_spec_free(s);
        free(c);
        harness_free(h);
}

static void test_killed_by_signal(void **state) {
        harness *h = harness_new(NULL);
        char *c = cmd("\"sleep\"");
        spec_pod_spec *s = pod_spec(c, NULL);
        rt_pod *pod = start(h, "killme", s);
        event *e;

        assert_true(run_until(h, pod_started, pod, 5000));
        assert_int_equal(kill(rt_pod_record(pod)->pid, SIGKILL), 0);
        assert_true(run_until(h, pod_exited, pod, 5000));
        e = find_event(h, pod, EV_EXITED);
        assert_int_equal(e->exit.kind, RT_EXIT_SIGNAL);
        assert_int_equal(e->exit.signal, 9);
        assert_string_equal(e->exit.reason, "Killed");
        rt_pod_free(pod);
        pod_spec_free(s);
        free(c);
        harness_free(h);
}

/* ---- exec failures -------------------------------------------------------------------------- */

static void expect_start_error(harness *h, spec_pod_spec *s, int want_r, const char *want_msg) {
        rt_pod_params p = { .namespace = "default", .name = "bad", .uid = "u", .spec = s };
        rt_pod *pod = NULL;
        char *err = NULL;
        int r = rt_pod_start(h->m, &p, NULL, &pod, &err);

        if (r != want_r || !err || !strstr(err, want_msg))
                fail_msg("expected %d \"%s\", got %d \"%s\"", want_r, want_msg, r, strna(err));
        assert_null(pod);
        free(err);
}

static void test_exec_failures(void **state) {
        harness *h = harness_new(NULL);
        char noexec[128];
        spec_pod_spec *s;
        int fd;

        s = pod_spec("      containers:\n      - name: main\n        command: [/nonexistent/prog]",
                     NULL);
        expect_start_error(h, s, -ENOENT, "exec /nonexistent/prog: No such file or directory");
        pod_spec_free(s);

        s = pod_spec("      containers:\n      - name: main\n        command: [no-such-prog-xyz]",
                     NULL);
        expect_start_error(h, s, -ENOENT, "exec no-such-prog-xyz: not found in PATH");
        pod_spec_free(s);

        snprintf(noexec, sizeof noexec, "%s/noexec", h->state_dir);
        fd = open(noexec, O_CREAT | O_WRONLY, 0644);
        assert_true(fd >= 0);
        close(fd);
        char *line = strprintf("      containers:\n      - name: main\n        command: [%s]",
                               noexec);
        s = pod_spec(line, NULL);
        char *want = strprintf("exec %s: Permission denied", noexec);
        expect_start_error(h, s, -EACCES, want);
        pod_spec_free(s);
        free(line);
        free(want);

        char *c = cmd("\"sleep\"");
        s = pod_spec(c, "        workingDir: /nonexistent/dir", NULL);
        expect_start_error(h, s, -ENOENT, "workingDir /nonexistent/dir: No such file or directory");
        pod_spec_free(s);

        s = pod_spec(c, "        securityContext: {runAsUser: 4242424}", NULL);
        expect_start_error(h, s, -ESRCH, "runAsUser 4242424 has no entry in the user database");
        pod_spec_free(s);
        free(c);

        /* No failed start leaves a process or a pod behind. */
        assert_int_equal(rt_manager_n_pods(h->m), 0);
        assert_int_equal(h->n_events, 0);
        harness_free(h);
}

static void test_run_as_user(void **state) {
        harness *h;
        char *c;
        spec_pod_spec *s;
        rt_pod *pod;

        if (geteuid() != 0)
                skip();
        h = harness_new(NULL);
        /* A copy that uid 65534 can reach: the build tree may sit under a
         * directory only root may enter (a fresh clone in mktemp -d). */
        char copy[256];
        snprintf(copy, sizeof copy, "%s/testprog", h->state_dir);
        _cleanup_free_ char *sh = strprintf("cp '%s' '%s' && chmod 755 '%s' '%s'", testprog, copy,
                                            h->state_dir, copy);
        assert_int_equal(system(sh), 0);
        c = strprintf("      containers:\n      - name: main\n        command: [\"%s\", ids]",
                      copy);
        s = pod_spec(c, "        securityContext: {runAsUser: 65534, runAsGroup: 65533}", NULL);
        pod = start(h, "nobody", s);
        assert_true(wait_log(h, "nobody", "65534 65533 0 /"));
        rt_pod_stop(pod, 0);
        assert_true(run_until(h, pod_exited, pod, 5000));
        rt_pod_free(pod);
        pod_spec_free(s);
        free(c);
        harness_free(h);
}

/* ---- environment and $(VAR) --------------------------------------------------------------- */

static void test_env_and_expansion(void **state) {
        harness *h = harness_new(&(rt_config){ .port_lo = 41000, .port_hi = 41999 });
        char *c = cmd("\"argv\", \"$(GREETING)\", \"$$(GREETING)\", \"$(UNKNOWN)\", \"p=$(PORT)\"");
        spec_pod_spec *s = pod_spec(c, "        env:", "        - {name: GREETING, value: hello}",
                                    "        - {name: LISTEN, value: \"127.0.0.1:$(PORT_HTTP)\"}",
                                    "        ports: [{name: http}, {name: admin-api}]", NULL);
        char *c2 = cmd("\"env\"");
        spec_pod_spec *s2 = pod_spec(c2, "        env: [{name: GREETING, value: hi}]",
                                     "        ports: [{name: http}, {name: admin-api}, "
                                     "{name: fixed, containerPort: 8080}]",
                                     "        workingDir: /tmp", NULL);
        rt_pod *a = start(h, "argv", s), *b = start(h, "env", s2);
        const rt_record *ra = rt_pod_record(a), *rb = rt_pod_record(b);
        char expect[256];

        assert_int_equal(ra->n_ports, 2);
        assert_true(ra->ports[0].leased && ra->ports[0].port >= 41000 &&
                    ra->ports[0].port <= 41999);
        snprintf(expect, sizeof expect, "argv\nhello\n$(GREETING)\n$(UNKNOWN)\np=%u\n",
                 ra->ports[0].port);
        assert_true(wait_log(h, "argv", expect));

        assert_true(wait_log(h, "env", "GREETING=hi\n"));
        char *log = read_log(h, "env");
        assert_non_null(strstr(log, "POD_NAME=env\n"));
        assert_non_null(strstr(log, "POD_NAMESPACE=default\n"));
        assert_non_null(strstr(log, "POD_UID=uid-env\n"));
        assert_non_null(strstr(log, "PATH=/usr/local/sbin:"));
        snprintf(expect, sizeof expect, "PORT=%u\n", rb->ports[0].port);
        assert_non_null(strstr(log, expect));
        snprintf(expect, sizeof expect, "PORT_HTTP=%u\n", rb->ports[0].port);
        assert_non_null(strstr(log, expect));
        snprintf(expect, sizeof expect, "PORT_ADMIN_API=%u\n", rb->ports[1].port);
        assert_non_null(strstr(log, expect));
        assert_non_null(strstr(log, "PORT_FIXED=8080\n"));
        assert_false(rb->ports[2].leased);
        /* Nothing of the agent's environment leaks in. */
        assert_null(strstr(log, "TEND_SOURCE_DIR="));
        free(log);

        rt_pod_stop(a, 0);
        rt_pod_stop(b, 0);
        assert_true(run_until(h, pod_exited, a, 5000));
        assert_true(run_until(h, pod_exited, b, 5000));
        rt_pod_free(a);
        rt_pod_free(b);
        pod_spec_free(s);
        pod_spec_free(s2);
        free(c);
        free(c2);
        harness_free(h);
}

static void test_expand_rules(void **state) {
        char *env[] = { "A=1", "B=two", "EMPTY=", NULL };
        static const struct {
                const char *in, *out;
        } cases[] = {
                { "$(A)", "1" },      { "x$(B)y", "xtwoy" },
                { "$$(A)", "$(A)" },  { "$(C)", "$(C)" },
                { "$(A", "$(A" },     { "$$", "$" },
                { "$", "$" },         { "a$b", "a$b" },
                { "$(EMPTY)x", "x" }, { "$$$(A)", "$1" },
                { "", "" },           { "$()", "$()" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                char *r = rt_expand(cases[i].in, env);
                if (!streq(r, cases[i].out))
                        fail_msg("\"%s\" → \"%s\", expected \"%s\"", cases[i].in, r, cases[i].out);
                free(r);
        }

        /* An expansion that grows past 1 MiB is refused with the reason,
         * naming the argument (not an out-of-memory). */
        tend_buf yaml = TEND_BUF_INIT(1 << 20);
        tend_buf_adds(&yaml, "      containers:\n      - name: main\n        command: [/bin/true]\n"
                             "        args: [\"");
        for (int i = 0; i < 1100; i++)
                tend_buf_adds(&yaml, "$(K)");
        tend_buf_adds(&yaml, "\"]\n        env: [{name: K, value: \"");
        for (int i = 0; i < 1000; i++)
                tend_buf_adds(&yaml, "k");
        tend_buf_adds(&yaml, "\"}]");
        harness *h = harness_new(NULL);
        spec_pod_spec *s = pod_spec(tend_buf_str(&yaml), NULL);
        rt_pod_params p = { .namespace = "default", .name = "big", .uid = "u", .spec = s };
        rt_pod *pod = NULL;
        char *err = NULL;
        assert_int_equal(rt_pod_start(h->m, &p, NULL, &pod, &err), -E2BIG);
        assert_non_null(
                strstr(strna(err), "args[0]: with $(VAR) expanded it is longer than 1 MiB"));
        free(err);
        pod_spec_free(s);
        tend_buf_free(&yaml);
        harness_free(h);
}

/* ---- stopping ------------------------------------------------------------------------------- */

static void test_grace_then_kill(void **state) {
        harness *h = harness_new(NULL);
        char *c = cmd("\"ignore-term\"");
        spec_pod_spec *s = pod_spec(c, NULL);
        rt_pod *pod = start(h, "stubborn", s);
        usec_t t0;
        event *e;

        assert_true(wait_log(h, "stubborn", "ignoring SIGTERM"));
        t0 = now_monotonic();
        assert_int_equal(rt_pod_stop(pod, 300 * USEC_PER_MSEC), 0);
        assert_true(run_until(h, pod_exited, pod, 5000));
        e = find_event(h, pod, EV_EXITED);
        assert_int_equal(e->exit.kind, RT_EXIT_SIGNAL);
        assert_int_equal(e->exit.signal, SIGKILL);
        assert_true(e->at - t0 >= 300 * USEC_PER_MSEC);
        assert_true(e->at - t0 < 1500 * USEC_PER_MSEC); /* gone right after the grace */
        rt_pod_free(pod);
        pod_spec_free(s);
        free(c);

        /* A process that honours SIGTERM is gone long before the grace. */
        c = cmd("\"sleep\"");
        s = pod_spec(c, NULL);
        pod = start(h, "polite", s);
        assert_true(run_until(h, pod_started, pod, 5000));
        t0 = now_monotonic();
        rt_pod_stop(pod, 30 * USEC_PER_SEC);
        assert_true(run_until(h, pod_exited, pod, 5000));
        e = find_event(h, pod, EV_EXITED);
        assert_int_equal(e->exit.signal, SIGTERM);
        assert_true(e->at - t0 < USEC_PER_SEC);
        rt_pod_free(pod);
        pod_spec_free(s);
        free(c);
        harness_free(h);
}

static bool pid_gone(harness *h, void *arg) {
        char path[64];
        snprintf(path, sizeof path, "/proc/%d", *(int *) arg);
        return access(path, F_OK) < 0;
}

static void test_grandchild_reaped(void **state) {
        harness *h = harness_new(NULL);
        char *c = cmd("\"grandchild\"");
        spec_pod_spec *s = pod_spec(c, NULL);
        rt_pod *pod = start(h, "forker", s);
        char *log, *p;
        int gpid;

        assert_true(run_until(h, pod_exited, pod, 5000));
        assert_true(wait_log(h, "forker", "grandchild "));
        log = read_log(h, "forker");
        p = strstr(log, "grandchild ");
        gpid = atoi(p + strlen("grandchild "));
        assert_true(gpid > 0);
        /* Killed with its group, re-parented to us, reaped: no zombie left. */
        assert_true(run_until(h, pid_gone, &gpid, 5000));
        free(log);
        rt_pod_free(pod);
        pod_spec_free(s);
        free(c);
        harness_free(h);
}

static bool pid_alive(int pid) {
        char path[64], buf[512], *p;
        FILE *f;
        bool alive = false;

        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        if (!(f = fopen(path, "r")))
                return false;
        if (fgets(buf, sizeof buf, f) && (p = strrchr(buf, ')')))
                alive = p[2] != 'Z' && p[2] != 'X';
        fclose(f);
        return alive;
}

/* A process that left the pod's group (setsid) and whose parent died is
 * the agent's child: it may stay while its pod lives, and goes with it. */
static void test_escapee_goes_with_its_pod(void **state) {
        harness *h = harness_new(NULL);
        char *c = cmd("\"escapee\""), *c2 = cmd("\"exit\", \"0\"");
        spec_pod_spec *s = pod_spec(c, "      terminationGracePeriodSeconds: 1", NULL),
                      *s2 = pod_spec(c2, NULL);
        rt_pod *pod = start(h, "escaper", s), *other;
        char *log, *p;
        int epid;

        assert_true(wait_log(h, "escaper", "escapee "));
        log = read_log(h, "escaper");
        p = strstr(log, "escapee ");
        epid = atoi(p + strlen("escapee "));
        assert_true(epid > 0);
        /* Another pod's exit makes the agent look at its children. */
        other = start(h, "other", s2);
        assert_true(run_until(h, pod_exited, other, 5000));
        run_for(h, 100);
        assert_true(pid_alive(epid));
        assert_int_equal(rt_pod_stop(pod, USEC_PER_SEC), 0);
        assert_true(run_until(h, pod_exited, pod, 5000));
        assert_true(run_until(h, pid_gone, &epid, 5000));
        free(log);
        rt_pod_free(other);
        rt_pod_free(pod);
        pod_spec_free(s);
        pod_spec_free(s2);
        free(c);
        free(c2);
        harness_free(h);
}

/* Nothing of the agent's leaks into a pod: not its SQLite or log files,
 * not libcurl's sockets (which libcurl opens without CLOEXEC), not a probe's
 * connection. */
static void on_usr1(int sig) {
}

/* A pod starts with every signal at its default and none blocked, whatever
 * the agent ignores (SIGPIPE), catches (SIGCHLD, and SIGUSR1 here) or
 * blocks. */
static void test_clean_signals(void **state) {
        harness *h = harness_new(NULL);
        char *c = cmd("\"signals\"");
        spec_pod_spec *s = pod_spec(c, NULL);
        struct sigaction old_usr1, old_usr2, sa = { .sa_handler = on_usr1 };
        sigset_t block, old_mask;
        rt_pod *pod;

        sigaction(SIGUSR1, &sa, &old_usr1);
        sa.sa_handler = SIG_IGN;
        sigaction(SIGUSR2, &sa, &old_usr2);
        sigemptyset(&block);
        sigaddset(&block, SIGWINCH);
        sigprocmask(SIG_BLOCK, &block, &old_mask);
        pod = start(h, "signals", s);
        assert_true(wait_log(h, "signals", "SigCgt:"));
        char *log = read_log(h, "signals");
        if (!strstr(log, "SigBlk:\t0000000000000000\n") ||
            !strstr(log, "SigIgn:\t0000000000000000\n") ||
            !strstr(log, "SigCgt:\t0000000000000000\n"))
                fail_msg("the pod's signals are not clean:\n%s", log);
        free(log);
        sigprocmask(SIG_SETMASK, &old_mask, NULL);
        sigaction(SIGUSR1, &old_usr1, NULL);
        sigaction(SIGUSR2, &old_usr2, NULL);
        rt_pod_stop(pod, 0);
        assert_true(run_until(h, pod_exited, pod, 5000));
        rt_pod_free(pod);
        pod_spec_free(s);
        free(c);
        harness_free(h);
}

/* A port nothing listens on, for a test's server to bind next: below the
 * kernel's ephemeral range (32768-), which the connections of other tests
 * running meanwhile draw from, and which a port bound to 0 was taken from
 * (a test's server then found it taken, now and then, under make test),
 * and below tendd's default leases (30000-32767). */
static int free_port(void) {
        for (int i = 0; i < 1000; i++) {
                struct sockaddr_in sa = { .sin_family = AF_INET };
                int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port, r;

                assert_true(fd >= 0);
                port = 20000 + (int) (random() % 10000);
                sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                sa.sin_port = htons((uint16_t) port);
                r = bind(fd, (struct sockaddr *) &sa, sizeof sa);
                close(fd);
                if (r == 0)
                        return port;
        }
        fail_msg("no free port in 20000-29999");
        return -1;
}

static void test_no_fd_leaks(void **state) {
        harness *h = harness_new(NULL);
        int port = free_port(), leaky;
        char *server_cmd, *probe, *c, *c2;
        spec_pod_spec *ss, *s, *s2;
        rt_pod *server, *probed, *pod;

        /* a descriptor of the agent without CLOEXEC */
        leaky = open("/dev/null", O_RDONLY);
        assert_true(leaky >= 3);

        /* An HTTP probe in flight while the next pod starts. */
        server_cmd = strprintf("\"http\", \"%d\", \"200\", \"500\"", port);
        c = cmd(server_cmd);
        ss = pod_spec(c, NULL);
        server = start(h, "server", ss);
        assert_true(wait_log(h, "server", "listening"));
        probe = strprintf("        readinessProbe: {httpGet: {port: %d}, periodSeconds: 1}", port);
        c2 = cmd("\"sleep\"");
        s = pod_spec(c2, probe, NULL);
        probed = start(h, "probed", s);
        run_for(h, 200); /* the probe's request is now waiting on the server */
        free(c2);
        c2 = cmd("\"fds\"");
        s2 = pod_spec(c2, NULL);
        pod = start(h, "fds", s2);
        assert_true(wait_log(h, "fds", "fds:"));
        char *log = read_log(h, "fds");
        if (!strstr(log, "fds: 0 1 2\n"))
                fail_msg("a pod inherited descriptors: %s", log);
        free(log);
        close(leaky);
        rt_pod *all[] = { server, probed, pod };
        for (int i = 0; i < 3; i++) {
                rt_pod_stop(all[i], 0);
                assert_true(run_until(h, pod_exited, all[i], 5000));
                rt_pod_free(all[i]);
        }
        pod_spec_free(ss);
        pod_spec_free(s);
        pod_spec_free(s2);
        free(c);
        free(c2);
        free(probe);
        free(server_cmd);
        harness_free(h);
}

/* Closing the manager right after a start (its `started` still queued)
 * leaves the process running and frees everything (LeakSanitizer). */
static void test_close_right_after_start(void **state) {
        harness *h = harness_new(NULL);
        char *c = cmd("\"sleep\"");
        spec_pod_spec *s = pod_spec(c, NULL);
        rt_pod *pod = start(h, "quick", s);
        pid_t pid = rt_pod_record(pod)->pid;

        harness_free(h); /* closes the manager: the pod is detached */
        assert_int_equal(kill(pid, 0), 0);
        assert_int_equal(kill(-pid, SIGKILL), 0);
        for (int i = 0; i < 100 && waitpid(pid, NULL, WNOHANG) == 0; i++)
                usleep(10000);
        pod_spec_free(s);
        free(c);
}

/* A second stop can shorten the grace period. */
static void test_stop_shortens_grace(void **state) {
        harness *h = harness_new(NULL);
        char *c = cmd("\"ignore-term\"");
        spec_pod_spec *s = pod_spec(c, NULL);
        rt_pod *pod = start(h, "stubborn2", s);
        usec_t t0;

        assert_true(wait_log(h, "stubborn2", "ignoring SIGTERM"));
        t0 = now_monotonic();
        rt_pod_stop(pod, 30 * USEC_PER_SEC);
        run_for(h, 100);
        rt_pod_stop(pod, 200 * USEC_PER_MSEC);
        assert_true(run_until(h, pod_exited, pod, 5000));
        assert_true(now_monotonic() - t0 < 2 * USEC_PER_SEC);
        rt_pod_free(pod);
        pod_spec_free(s);
        free(c);
        harness_free(h);
}

/* ---- logs ------------------------------------------------------------------------------------ */

static bool rotated(harness *h, void *arg) {
        char *path = strprintf("%s.1", (char *) arg);
        struct stat st;
        bool r = stat(path, &st) == 0 && st.st_size > 0;
        free(path);
        return r;
}

/* The truncated log starts with a later line than the first one: the
 * process went on writing into it after the rotation. Its output is fully
 * buffered (4 KiB writes), so the first write after the truncate may start
 * in the middle of a line: the first whole line is the one to read. Only
 * the head is read: the whole of a log that spews at hundreds of MB/s,
 * read on the loop each tick, kept the loop from checking (and rotating)
 * it, and grew with every read (a sanitizer build on a loaded machine
 * reached 250 MB). */
static bool written_after_truncate(harness *h, void *arg) {
        char *path = rt_log_path(h->state_dir, "default", arg, "main"), head[4097];
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, head, sizeof head - 1) : -1;
        const char *first;
        long line = -1;

        free(path);
        if (fd >= 0)
                close(fd);
        if (n <= 0)
                return false;
        head[n] = 0;
        first = strncmp(head, "line ", 5) != 0 ? strchr(head, '\n') : head;
        return first && sscanf(first + (*first == '\n'), "line %ld ", &line) == 1 && line > 0;
}

static void test_log_rotation(void **state) {
        /* The check interval as tendd's (5 s): a log that fills fast is
         * checked as often as its rate asks, not every 5 s. */
        harness *h = harness_new(&(rt_config){ .log_max_bytes = 256 * 1024,
                                               .log_check_interval = 5 * USEC_PER_SEC });
        char *c = cmd("\"spew\"");
        spec_pod_spec *s = pod_spec(c, NULL);
        usec_t started = now_monotonic();
        rt_pod *pod = start(h, "spew", s);
        const char *path = rt_pod_record(pod)->log_path;
        char *one = strprintf("%s.1", path);
        struct stat st, st1;

        assert_true(run_until(h, rotated, (void *) path, 10000));
        assert_true(run_until(h, written_after_truncate, "spew", 10000));
        /* Keep writing for a while: the log stays bounded by the limit plus
         * what one check interval lets through, however long it runs. Its
         * times (logs --timestamps) start again at each rotation: offsets
         * rise within the log as it is (between two turns of the loop the
         * file only grows), times never go back, and a log written without
         * pause gets at most four a second. */
        off_t most = 0;
        size_t most_times = 0;
        for (int i = 0; i < 40; i++) {
                uint64_t(*e)[2] = NULL;
                size_t n = 0;
                run_for(h, 50);
                assert_int_equal(rt_log_times_load(path, SIZE_MAX, &e, &n), 0);
                assert_int_equal(stat(path, &st), 0);
                most = MAX(most, st.st_size);
                most_times = MAX(most_times, n);
                for (size_t k = 1; k < n; k++) {
                        assert_true(e[k][0] > e[k - 1][0]);
                        assert_true(e[k][1] >= e[k - 1][1]);
                }
                assert_true(n == 0 || e[n - 1][0] <= (uint64_t) st.st_size);
                assert_true(n <= 4 * (now_monotonic() - started) / USEC_PER_SEC + 2);
                free(e);
        }
        fprintf(stderr, "log_rotation: at most %lld bytes (limit 262144), %zu times\n",
                (long long) most, most_times);
        assert_true(most < 256 * 1024 + 64 * 1024 * 1024); /* at 5 s: gigabytes */
        assert_true(most_times > 0);
        rt_pod_stop(pod, 0);
        assert_true(run_until(h, pod_exited, pod, 5000));
        assert_int_equal(stat(one, &st1), 0);
        assert_true(st1.st_size >= 256 * 1024);
        free(one);
        rt_pod_free(pod);
        pod_spec_free(s);
        free(c);
        harness_free(h);
}

/* A quiet log is not looked at every interval: once two checks find it
 * the same, it waits for its watch to see a change (an idle tendd of a
 * thousand pods makes no stat() a second). It must still be rotated once
 * the pod starts to write: quiet for 2.5 s (checks at 0.1 s and 1.1 s find
 * it empty), then 600 KB against a 256 KiB limit. */
static void test_log_quiet_then_grows(void **state) {
        harness *h = harness_new(&(rt_config){ .log_max_bytes = 256 * 1024,
                                               .log_check_interval = 1 * USEC_PER_SEC });
        char *c = strdup("      containers:\n      - name: main\n        command: [\"/bin/sh\", "
                         "\"-c\", \"sleep 2.5; yes x | head -c 600000; exec sleep 100\"]");
        spec_pod_spec *s = pod_spec(c, NULL);
        rt_pod *pod = start(h, "quiet", s);
        const char *path = rt_pod_record(pod)->log_path;
        struct stat st;

        run_for(h, 2000);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_size, 0);
        assert_true(run_until(h, rotated, (void *) path, 8000));
        rt_pod_stop(pod, 0);
        assert_true(run_until(h, pod_exited, pod, 5000));
        rt_pod_free(pod);
        pod_spec_free(s);
        free(c);
        harness_free(h);
}

/* A pod that makes its log sparse (2 GiB of hole): the rotation copies what
 * was written, not gigabytes of zeros. */
static void test_log_sparse(void **state) {
        harness *h = harness_new(&(rt_config){ .log_max_bytes = 256 * 1024 });
        spec_pod_spec *s = pod_spec(
                "      containers:\n      - name: main\n"
                "        command: [\"/bin/sh\", \"-c\", \"echo before; truncate -s "
                "2G /dev/stdout; echo after; exec sleep 100\"]",
                NULL);
        rt_pod *pod = start(h, "sparse", s);
        const char *path = rt_pod_record(pod)->log_path;
        _cleanup_free_ char *one = strprintf("%s.1", path), *text = NULL;
        struct stat st;
        size_t len = 0;

        assert_true(run_until(h, rotated, (void *) path, 10000));
        assert_int_equal(stat(one, &st), 0);
        assert_true(st.st_size < 4096);
        assert_true((uint64_t) st.st_blocks * 512 < 64 * 1024);
        assert_int_equal(read_full_file(one, 4096, &text, &len), 0);
        assert_string_equal(text, "after\n"); /* the data of the last 256 KiB, its hole left out */
        assert_int_equal(stat(path, &st), 0);
        assert_true(st.st_size < 4096); /* truncated */
        rt_pod_signal(pod, SIGKILL);
        assert_true(run_until(h, pod_exited, pod, 5000));
        rt_pod_free(pod);
        pod_spec_free(s);
        harness_free(h);
}

/* A log written a hundred times a second for two seconds: its times are
 * noted at most four times a second (the gate), each on a line boundary of
 * what was written, and they cover it all by the end. The end is the last
 * line's arrival (on a loaded machine the writer takes longer than its two
 * seconds of sleeps), then a gate's period and a margin for the last note. */
static void test_log_times_gated(void **state) {
        harness *h = harness_new(NULL);
        spec_pod_spec *s = pod_spec("      containers:\n      - name: main\n"
                                    "        command: [\"/bin/sh\", \"-c\", \"i=0; while [ $i -lt "
                                    "200 ]; do echo line $i; i=$((i+1)); sleep 0.01; done; exec "
                                    "sleep 100\"]",
                                    NULL);
        usec_t started = now_monotonic();
        rt_pod *pod = start(h, "chatty", s);
        const char *path = rt_pod_record(pod)->log_path;
        uint64_t(*e)[2] = NULL;
        size_t n = 0;
        struct stat st;
        char *text = NULL;
        size_t len = 0;

        const char *last[] = { "chatty", "line 199\n" };
        assert_true(run_until(h, log_contains, last, 30000));
        run_for(h, 1000);
        assert_int_equal(rt_log_times_load(path, SIZE_MAX, &e, &n), 0);
        usec_t ran = now_monotonic() - started;
        fprintf(stderr, "log_times_gated: %zu notes in %.1f s\n", n, (double) ran / USEC_PER_SEC);
        assert_true(n >= 2);
        assert_true(n <= 4 * ran / USEC_PER_SEC + 2);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(e[n - 1][0], (uint64_t) st.st_size);
        assert_int_equal(read_full_file(path, 1 << 20, &text, &len), 0);
        for (size_t i = 0; i < n; i++)
                assert_int_equal(text[e[i][0] - 1], '\n');
        free(text);
        free(e);
        rt_pod_signal(pod, SIGKILL);
        assert_true(run_until(h, pod_exited, pod, 5000));
        rt_pod_free(pod);
        pod_spec_free(s);
        harness_free(h);
}

/* A pod that writes a byte every 0.3 s (a note each, past the gate): its
 * times stay within its log's size and the slack (they were 16 bytes a
 * byte), and still reach its end. The slack is one entry here, 4 KiB by
 * default (see verbs.sh for lines a few bytes apart keeping their times). */
static void test_log_times_bounded(void **state) {
        harness *h = harness_new(&(rt_config){ .log_times_slack = 16 });
        spec_pod_spec *s = pod_spec("      containers:\n      - name: main\n"
                                    "        command: [\"/bin/sh\", \"-c\", \"i=0; while [ $i -lt "
                                    "12 ]; do printf x; i=$((i+1)); sleep 0.3; done; printf "
                                    "'\\\\n'; exec sleep 100\"]",
                                    NULL);
        rt_pod *pod = start(h, "dribble", s);
        const char *path = rt_pod_record(pod)->log_path;
        _cleanup_free_ char *times = rt_log_times_path(path);
        uint64_t(*e)[2] = NULL;
        size_t n = 0;
        struct stat st, ts;

        const char *last[] = { "dribble", "xxxxxxxxxxxx\n" };
        assert_true(run_until(h, log_contains, last, 30000));
        run_for(h, 600);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(stat(times, &ts), 0);
        fprintf(stderr, "log_times_bounded: log %jd bytes, times %jd bytes\n",
                (intmax_t) st.st_size, (intmax_t) ts.st_size);
        assert_int_equal(st.st_size, 13);
        assert_true(ts.st_size <= st.st_size + 16 + 16);
        assert_true(ts.st_size >= 16);
        assert_int_equal(rt_log_times_load(path, SIZE_MAX, &e, &n), 0);
        assert_true(n >= 1);
        assert_int_equal(e[n - 1][0], (uint64_t) st.st_size);
        free(e);
        rt_pod_signal(pod, SIGKILL);
        assert_true(run_until(h, pod_exited, pod, 5000));
        rt_pod_free(pod);
        pod_spec_free(s);
        harness_free(h);
}

/* A pod that has written nothing has no times file (one new file per pod
 * at its start was a tenth of tendd's CPU in a burst of starts); its first
 * line, a second later, makes it, with that line's time. */
static void test_log_times_made_at_first_write(void **state) {
        harness *h = harness_new(NULL);
        char go[64], cmd[256];
        snprintf(go, sizeof go, "/tmp/tend-times-go-%d", (int) getpid());
        (void) unlink(go);
        snprintf(cmd, sizeof cmd,
                 "      containers:\n      - name: main\n        command: [\"/bin/sh\", \"-c\", "
                 "\"while [ ! -e %s ]; do sleep 0.05; done; echo late; exec sleep 100\"]",
                 go);
        spec_pod_spec *s = pod_spec(cmd, NULL);
        rt_pod *pod = start(h, "late", s);
        const char *path = rt_pod_record(pod)->log_path;
        _cleanup_free_ char *times = rt_log_times_path(path);
        uint64_t(*e)[2] = NULL;
        size_t n = 0;
        struct stat st;

        run_for(h, 700); /* past its first log check (100 ms) */
        assert_true(stat(times, &st) < 0 && errno == ENOENT);
        usec_t said = now_realtime();
        FILE *f = fopen(go, "w");
        assert_non_null(f);
        fclose(f);
        const char *last[] = { "late", "late\n" };
        assert_true(run_until(h, log_contains, last, 30000));
        run_for(h, 600);
        assert_int_equal(rt_log_times_load(path, SIZE_MAX, &e, &n), 0);
        assert_int_equal(n, 1);
        assert_int_equal(e[0][0], 5);
        assert_true(e[0][1] >= said); /* the line's time, not the pod's start */
        free(e);
        (void) unlink(go);
        rt_pod_signal(pod, SIGKILL);
        assert_true(run_until(h, pod_exited, pod, 5000));
        rt_pod_free(pod);
        pod_spec_free(s);
        harness_free(h);
}

/* ---- adoption ----------------------------------------------------------------------------------
 */

static void test_adopt_refuses_reused_pid(void **state) {
        harness *h = harness_new(NULL);
        char *c = cmd("\"sleep\"");
        spec_pod_spec *s = pod_spec(c, NULL);
        rt_pod_params p = { .namespace = "default", .name = "adoptee", .uid = "u", .spec = s };
        rt_record r = { .backend = "process" };
        rt_pod *pod = NULL;
        char *err = NULL;
        uint64_t st;

        /* Our own pid with a different start time: another process now. */
        assert_int_equal(rt_process_start_time(getpid(), &st), 0);
        r.pid = getpid();
        r.start_time = st + 1;
        assert_int_equal(rt_pod_adopt(h->m, &p, &r, NULL, &pod, &err), -ESTALE);
        assert_non_null(strstr(err, "now belongs to another process"));
        free(err);
        err = NULL;

        /* A pid that is gone. */
        pid_t child = fork();
        if (child == 0)
                _exit(0);
        assert_int_equal(waitpid(child, NULL, 0), child);
        r.pid = child;
        assert_int_equal(rt_pod_adopt(h->m, &p, &r, NULL, &pod, &err), -ESRCH);
        assert_non_null(strstr(err, "is gone"));
        free(err);
        assert_null(pod);
        pod_spec_free(s);
        free(c);
        harness_free(h);
}

/* The helper "tend-rt-agent" runs the runtime in a separate process: run
 * once it starts a pod and exits leaving it running; run again it adopts the
 * pod from the record and reports the exit it sees. */
static char *run_helper(const char *args) {
        char *cmdline = strprintf("%s/tend-rt-agent %s", getenv("TEND_TEST_BIN_DIR"), args);
        FILE *f = popen(cmdline, "r");
        tend_buf b = TEND_BUF_INIT(1 << 16);
        char line[512];

        assert_non_null(f);
        while (fgets(line, sizeof line, f))
                tend_buf_adds(&b, line);
        pclose(f);
        free(cmdline);
        return tend_buf_take(&b);
}

/* Another member of the group that pid leads, or 0. */
static int other_in_group(int leader) {
        DIR *d = opendir("/proc");
        struct dirent *de;
        int found = 0;

        assert_non_null(d);
        while (!found && (de = readdir(d))) {
                char path[300], buf[512], *p;
                int pid = atoi(de->d_name), pgrp = 0;
                FILE *f;
                if (pid <= 0 || pid == leader)
                        continue;
                snprintf(path, sizeof path, "/proc/%d/stat", pid);
                if (!(f = fopen(path, "r")))
                        continue;
                if (fgets(buf, sizeof buf, f) && (p = strrchr(buf, ')')) &&
                    sscanf(p + 2, "%*c %*d %d", &pgrp) == 1 && pgrp == leader)
                        found = pid;
                fclose(f);
        }
        closedir(d);
        return found;
}

static void test_adopt_by_second_agent(void **state) {
        char dir[] = "/tmp/tend-adopt-XXXXXX", *out, *args;
        int pid, member = 0;

        assert_non_null(mkdtemp(dir));
        args = strprintf("start %s %s group", dir, testprog);
        out = run_helper(args);
        assert_true(sscanf(out, "started pid %d", &pid) == 1);
        free(out);
        free(args);
        /* The first agent is gone; the pod is not. */
        assert_int_equal(kill(pid, 0), 0);
        for (int i = 0; i < 100 && !(member = other_in_group(pid)); i++)
                usleep(10000);
        assert_true(member > 0);

        /* Second agent: adopts (same pid, same start time), kills the pod
         * as a user would, and sees the exit with an unknown status (the
         * process is not its child). */
        args = strprintf("adopt-and-kill %s", dir);
        out = run_helper(args);
        if (!strstr(out, "adopted pid") || !strstr(out, "exit unknown"))
                fail_msg("helper said:\n%s", out);
        free(out);
        free(args);

        /* We are a child subreaper: the orphaned pod was ours to reap. And
         * the rest of its group went with its leader, though the agent
         * that saw it die was not its parent. */
        for (int i = 0; i < 100 && waitpid(pid, NULL, WNOHANG) == 0; i++)
                usleep(10000);
        assert_int_equal(kill(pid, 0), -1);
        for (int i = 0; i < 100 && waitpid(member, NULL, WNOHANG) == 0; i++)
                usleep(10000);
        assert_int_equal(kill(member, 0), -1);

        /* A third attempt refuses the record: the process is gone. */
        args = strprintf("adopt %s", dir);
        out = run_helper(args);
        if (!strstr(out, "refused: pid") || !strstr(out, "is gone"))
                fail_msg("helper said:\n%s", out);
        free(out);
        free(args);
        char *rm = strprintf("rm -rf %s", dir);
        assert_int_equal(system(rm), 0);
        free(rm);
}

/* Gone or a zombie (whoever its parent is now: us as a subreaper, or
 * init), reaped where it is ours. */
static bool dead(int pid) {
        char path[64], *stat = NULL;
        bool zombie;

        (void) waitpid(pid, NULL, WNOHANG);
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        if (read_full_file(path, 4096, &stat, NULL) < 0)
                return true;
        zombie = strstr(stat, ") Z ") != NULL;
        free(stat);
        return zombie;
}

/* An agent killed between spawning a pod and committing it leaves a process
 * that no record names: the next agent's start-up sweep kills it, with its
 * group. A pod it adopted is spared, and so are the pods of another state
 * dir. */
static void test_sweep_orphan_processes(void **state) {
        char dir[] = "/tmp/tend-sweep-XXXXXX", other[] = "/tmp/tend-sweep-XXXXXX", *out, *args;
        int pid, member = 0, bystander;

        assert_non_null(mkdtemp(dir));
        assert_non_null(mkdtemp(other));
        args = strprintf("start %s %s group", other, testprog);
        out = run_helper(args);
        assert_true(sscanf(out, "started pid %d", &bystander) == 1);
        free(out);
        free(args);

        args = strprintf("start %s %s group", dir, testprog);
        out = run_helper(args);
        assert_true(sscanf(out, "started pid %d", &pid) == 1);
        free(out);
        free(args);
        for (int i = 0; i < 100 && !(member = other_in_group(pid)); i++)
                usleep(10000);
        assert_true(member > 0);

        /* Adopted: spared. */
        args = strprintf("adopt-and-sweep %s", dir);
        out = run_helper(args);
        if (!strstr(out, "adopted pid") || !strstr(out, "swept"))
                fail_msg("helper said:\n%s", out);
        free(out);
        free(args);
        assert_int_equal(kill(pid, 0), 0);
        assert_int_equal(kill(member, 0), 0);

        /* Not adopted (its record lost with the pass that was not
         * committed): killed, group and all; the other dir's pod is not. */
        args = strprintf("sweep %s", dir);
        out = run_helper(args);
        assert_non_null(strstr(out, "swept"));
        free(out);
        free(args);
        for (int i = 0; i < 200 && !(dead(pid) && dead(member)); i++)
                usleep(10000);
        assert_true(dead(pid));
        assert_true(dead(member));
        assert_false(dead(bystander));

        (void) kill(-bystander, SIGKILL);
        (void) waitpid(bystander, NULL, 0);
        char *rm = strprintf("rm -rf %s %s", dir, other);
        assert_int_equal(system(rm), 0);
        free(rm);
}

/* A removed pod's log directory is kept, emptied, for the next pod: the new
 * pod's directory is the old one renamed (no inode allocated), and its log
 * starts empty. */
static void test_log_dirs_recycled(void **state) {
        harness *h = harness_new(NULL);
        char *c = cmd("\"exit\", \"0\""), *old_log, *new_log;
        spec_pod_spec *s = pod_spec(c, NULL);
        struct stat a, b;
        rt_pod *pod;

        pod = start(h, "first", s);
        assert_true(run_until(h, pod_exited, pod, 5000));
        rt_pod_free(pod);
        old_log = rt_log_path(h->state_dir, "default", "first", "main");
        /* something in it, and a rotated file beside */
        FILE *f = fopen(old_log, "a");
        fputs("the first pod's words\n", f);
        fclose(f);
        char *rotated = strprintf("%s.1", old_log);
        f = fopen(rotated, "w");
        fclose(f);
        char *old_dir = strndup(old_log, strrchr(old_log, '/') - old_log);
        assert_int_equal(stat(old_dir, &a), 0);
        rt_manager_remove_pod_logs(h->m, "default", "first");
        assert_int_equal(access(old_dir, F_OK), -1);

        pod = start(h, "second", s);
        assert_true(run_until(h, pod_exited, pod, 5000));
        new_log = rt_log_path(h->state_dir, "default", "second", "main");
        char *new_dir = strndup(new_log, strrchr(new_log, '/') - new_log);
        assert_int_equal(stat(new_dir, &b), 0);
        assert_int_equal(a.st_ino, b.st_ino); /* the same directory */
        assert_int_equal(stat(new_log, &b), 0);
        assert_int_equal(b.st_size, 0); /* nothing of the first pod's */
        char *rotated2 = strprintf("%s.1", new_log);
        assert_int_equal(access(rotated2, F_OK), -1);
        rt_pod_free(pod);

        /* No spare left: a plain new directory. */
        pod = start(h, "third", s);
        assert_true(run_until(h, pod_exited, pod, 5000));
        rt_pod_free(pod);
        free(rotated);
        free(rotated2);
        free(old_dir);
        free(new_dir);
        free(old_log);
        free(new_log);
        pod_spec_free(s);
        free(c);
        harness_free(h);
}

/* ---- probes ------------------------------------------------------------------------------------
 */

/* The template with each "%d" replaced by the port (no printf: the
 * templates are data). */
static char *subst_port(const char *tmpl, int port) {
        tend_buf b = TEND_BUF_INIT(1 << 16);
        for (const char *p = tmpl; *p; p++) {
                if (p[0] == '%' && p[1] == 'd') {
                        tend_buf_addf(&b, "%d", port);
                        p++;
                } else
                        tend_buf_add(&b, p, 1);
        }
        return tend_buf_take(&b);
}

typedef struct probe_case {
        const char *server; /* testprog args for the server pod, %d = port */
        const char *probe;  /* probe YAML, %d = port */
        bool want_ready;
        const char *want_message;
} probe_case;

static bool probe_settled(harness *h, void *arg) {
        rt_pod **pods = arg;
        return last_probe(h, pods[0], RT_PROBE_READINESS) != NULL;
}

static bool probe_message_is(harness *h, void *arg) {
        const void **a = arg;
        const char *msg = rt_pod_probe_message(a[0], RT_PROBE_READINESS);
        return msg && strstr(msg, a[1]);
}

static bool reminded(harness *h, void *pod) {
        return last_probe(h, pod, RT_PROBE_READINESS) != NULL;
}

static void check_probe_case(const probe_case *pc) {
        harness *h = harness_new(NULL);
        int port = free_port();
        char *server_args = subst_port(pc->server, port);
        char *server_cmd = cmd(server_args);
        spec_pod_spec *ss = pod_spec(server_cmd, NULL);
        rt_pod *server = start(h, "server", ss);
        char *probe_yaml = subst_port(pc->probe, port);
        char *c = cmd("\"sleep\"");
        spec_pod_spec *s = pod_spec(c, probe_yaml, NULL);
        rt_pod *pod;
        rt_pod *arg[1];
        event *e;

        assert_true(wait_log(h, "server", "listening"));
        pod = start(h, "probed", s);
        arg[0] = pod;
        if (pc->want_ready) {
                if (!run_until(h, probe_settled, arg, 8000))
                        fail_msg("%s: never became ready", pc->probe);
                e = last_probe(h, pod, RT_PROBE_READINESS);
                assert_true(e->ok);
                assert_true(rt_pod_ready(pod));
        } else {
                /* Readiness starts false and stays so: no transition, but the
                 * failure is recorded with its reason, and reported — not
                 * within the first period (1 s), then once a period. */
                const void *want[] = { pod, pc->want_message };
                run_until(h, probe_message_is, want, 8000);
                run_until(h, reminded, pod, 4000);
                e = last_probe(h, pod, RT_PROBE_READINESS);
                assert_non_null(e);
                assert_false(e->ok);
                if (!strstr(e->message, pc->want_message))
                        fail_msg("%s: reported \"%s\"", pc->probe, e->message);
                /* (EV_STARTED is taken a moment after the spawn) */
                assert_true(e->at - find_event(h, pod, EV_STARTED)->at >= 700 * USEC_PER_MSEC);
                size_t before = h->n_events;
                run_for(h, 500);
                for (size_t i = before; i < h->n_events; i++)
                        if (h->events[i].type == EV_PROBE && h->events[i].pod == pod &&
                            h->events[i].at - e->at < 900 * USEC_PER_MSEC)
                                fail_msg("%s: reported twice within a period", pc->probe);
                assert_false(rt_pod_ready(pod));
                const char *msg = rt_pod_probe_message(pod, RT_PROBE_READINESS);
                if (!msg || !strstr(msg, pc->want_message))
                        fail_msg("%s: message \"%s\", expected \"%s\"", pc->probe, strna(msg),
                                 pc->want_message);
        }
        rt_pod_stop(pod, 0);
        rt_pod_stop(server, 0);
        assert_true(run_until(h, pod_exited, pod, 5000));
        assert_true(run_until(h, pod_exited, server, 5000));
        rt_pod_free(pod);
        rt_pod_free(server);
        pod_spec_free(s);
        pod_spec_free(ss);
        free(c);
        free(probe_yaml);
        free(server_cmd);
        free(server_args);
        harness_free(h);
}

#define PROBE(handler)                      \
        "        readinessProbe: {" handler \
        ", periodSeconds: 1, timeoutSeconds: 1, failureThreshold: 1}"

static void test_probe_http(void **state) {
        static const probe_case cases[] = {
                { "\"http\", \"%d\", \"200\"", PROBE("httpGet: {port: %d, path: /healthz}"), true,
                  NULL },
                { "\"http\", \"%d\", \"302\"", PROBE("httpGet: {port: %d}"), true, NULL },
                /* A body that never ends: the status decides, as soon as
                 * 10 KiB are read, not a timeout. */
                { "\"http\", \"%d\", \"200\"", PROBE("httpGet: {port: %d, path: /stream}"), true,
                  NULL },
                /* Redirects as the kubelet: followed on the same host (and
                 * the target decides), not to another host (the 3xx is a
                 * success), at most 10. */
                { "\"http\", \"%d\", \"200\"", PROBE("httpGet: {port: %d, path: /redirect-self}"),
                  true, NULL },
                { "\"http\", \"%d\", \"200\"", PROBE("httpGet: {port: %d, path: /redirect-fail}"),
                  false, "HTTP probe failed with statuscode: 500" },
                { "\"http\", \"%d\", \"200\"", PROBE("httpGet: {port: %d, path: /redirect-loop}"),
                  false, "stopped after 10 redirects" },
                { "\"http\", \"%d\", \"200\"", PROBE("httpGet: {port: %d, path: /redirect-away}"),
                  true, NULL },
                { "\"http\", \"%d\", \"503\"", PROBE("httpGet: {port: %d}"), false,
                  "HTTP probe failed with statuscode: 503" },
                { "\"http\", \"%d\", \"200\", \"3000\"", PROBE("httpGet: {port: %d}"), false,
                  "Timeout was reached" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                check_probe_case(&cases[i]);
}

static void test_probe_tcp(void **state) {
        static const probe_case cases[] = {
                { "\"tcp\", \"%d\"", PROBE("tcpSocket: {port: %d}"), true, NULL },
                { "\"tcp-full\", \"%d\"", PROBE("tcpSocket: {port: %d}"), false,
                  "timed out after 1s" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                check_probe_case(&cases[i]);

        /* Refused: nothing listens on the port. */
        harness *h = harness_new(NULL);
        char *probe = subst_port(PROBE("tcpSocket: {port: %d}"), free_port());
        char *c = cmd("\"sleep\"");
        spec_pod_spec *s = pod_spec(c, probe, NULL);
        rt_pod *pod = start(h, "refused", s);
        const void *want[] = { pod, "connection refused" };
        run_until(h, probe_message_is, want, 5000);
        assert_false(rt_pod_ready(pod));
        assert_non_null(
                strstr(strna(rt_pod_probe_message(pod, RT_PROBE_READINESS)), "connection refused"));
        rt_pod_stop(pod, 0);
        assert_true(run_until(h, pod_exited, pod, 5000));
        rt_pod_free(pod);
        pod_spec_free(s);
        free(c);
        free(probe);
        harness_free(h);
}

static void test_probe_exec(void **state) {
        static const probe_case cases[] = {
                { "\"tcp\", \"%d\"", PROBE("exec: {command: [/bin/true]}"), true, NULL },
                { "\"tcp\", \"%d\"", PROBE("exec: {command: [/bin/sh, -c, \"exit 4\"]}"), false,
                  "command exited with status 4" },
                { "\"tcp\", \"%d\"", PROBE("exec: {command: [/bin/sleep, \"5\"]}"), false,
                  "timed out after 1s" },
        };
        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                check_probe_case(&cases[i]);
}

static bool liveness_failed(harness *h, void *pod) {
        event *e = last_probe(h, pod, RT_PROBE_LIVENESS);
        return e && !e->ok;
}

static void test_probe_liveness_and_transitions(void **state) {
        harness *h = harness_new(NULL);
        char flag[128];
        snprintf(flag, sizeof flag, "%s/healthy", h->state_dir);
        int fd = open(flag, O_CREAT | O_WRONLY, 0644);
        close(fd);
        /* Liveness needs two failures more than readiness: both tick about
         * when the pod becomes ready, so a liveness attempt started before
         * the flag goes may run its test after (a loaded machine) and count
         * a failure early. */
        char *probe = strprintf("        readinessProbe: {exec: {command: [/bin/test, -e, %s]}, "
                                "periodSeconds: 1, successThreshold: 2, failureThreshold: 2}\n"
                                "        livenessProbe: {exec: {command: [/bin/test, -e, %s]}, "
                                "periodSeconds: 1, failureThreshold: 4}",
                                flag, flag);
        char *c = cmd("\"sleep\"");
        spec_pod_spec *s = pod_spec(c, probe, NULL);
        rt_pod *pod = start(h, "flappy", s);
        event *e;
        usec_t t_ready, t_unready;

        assert_true(run_until(h, probe_settled, (rt_pod *[]){ pod }, 6000));
        e = last_probe(h, pod, RT_PROBE_READINESS);
        assert_true(e->ok);
        t_ready = e->at;
        /* successThreshold 2: ready only after a second success, a period
         * (1 s) after the first — successes are not hurried. */
        assert_true(t_ready - find_event(h, pod, EV_STARTED)->at >= 900 * USEC_PER_MSEC);
        assert_true(t_ready - find_event(h, pod, EV_STARTED)->at < 2500 * USEC_PER_MSEC);
        /* Liveness starts true and reports nothing while healthy. */
        assert_null(last_probe(h, pod, RT_PROBE_LIVENESS));

        unlink(flag);
        t_unready = now_monotonic();
        assert_true(run_until(h, liveness_failed, pod, 8000));
        e = last_probe(h, pod, RT_PROBE_LIVENESS);
        assert_false(e->ok);
        assert_string_equal(e->message, "command exited with status 1");
        /* failureThreshold 4 at 1 s: not before ~2 s (one may be early). */
        assert_true(e->at - t_unready >= 1500 * USEC_PER_MSEC);
        assert_false(rt_pod_ready(pod));
        /* The runtime only reports: the pod is still running. */
        assert_true(rt_pod_is_running(pod));

        rt_pod_stop(pod, 0);
        assert_true(run_until(h, pod_exited, pod, 5000));
        /* Probes stop with the pod: nothing after its exit (before it, a
         * readiness failure may still be told, once a period). */
        size_t n = h->n_events;
        run_for(h, 1500);
        for (size_t i = n; i < h->n_events; i++)
                assert_int_not_equal(h->events[i].type, EV_PROBE);
        rt_pod_free(pod);
        pod_spec_free(s);
        free(c);
        free(probe);
        harness_free(h);
}

static bool all_exited(harness *h, void *arg) {
        return h->n_exited >= *(size_t *) arg;
}

/* ---- descriptors a stranger sends to a notify socket ---- */

/* A TCP socket with unsent data and a 20 s linger, as a datagram's
 * SCM_RIGHTS would bring it (the last reference): closed at once, the
 * peer reset, where a plain close() would wait out the linger. */
static void test_close_received(void **state) {
        int srv = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), c, acc;
        struct sockaddr_in sa = { .sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof sa;
        struct linger lg = { .l_onoff = 1, .l_linger = 20 };
        static char chunk[65536];
        usec_t t0;

        assert_int_equal(bind(srv, (struct sockaddr *) &sa, sizeof sa), 0);
        assert_int_equal(listen(srv, 1), 0);
        assert_int_equal(getsockname(srv, (struct sockaddr *) &sa, &len), 0);
        c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        assert_true(connect(c, (struct sockaddr *) &sa, sizeof sa) == 0 || errno == EINPROGRESS);
        acc = accept4(srv, NULL, NULL, SOCK_CLOEXEC); /* and never read: the data stays unsent */
        assert_true(acc >= 0);
        while (write(c, chunk, sizeof chunk) > 0)
                ;
        assert_int_equal(setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
        t0 = now_monotonic();
        rt__close_received(c);
        assert_true(now_monotonic() - t0 < 500 * USEC_PER_MSEC);
        close(acc);
        close(srv);
}

/* ---- what runs (a container status's image and imageID) ---- */

static char *sha256_of(const char *path) {
        _cleanup_free_ char *cmdline = strprintf("sha256sum '%s'", path);
        char line[256] = "";
        FILE *f = popen(cmdline, "r");

        assert_non_null(f);
        assert_non_null(fgets(line, sizeof line, f));
        pclose(f);
        line[strcspn(line, " ")] = 0;
        return strprintf("sha256:%s", line);
}

/* The program a pod runs and a digest of it: the same for a second pod of
 * the same file, another once the file is replaced in place. */
static void test_image_id(void **state) {
        harness *h = harness_new(NULL);
        _cleanup_free_ char *prog = strprintf("%s/prog", h->state_dir),
                            *cp = strprintf("cp '%s' '%s'", testprog, prog), *want = NULL,
                            *first = NULL;
        assert_int_equal(system(cp), 0);
        _cleanup_free_ char *line = strprintf(
                "      containers:\n      - name: main\n        command: [\"%s\", sleep]", prog);
        spec_pod_spec *s = pod_spec(line, NULL);
        rt_pod *a = start(h, "img-a", s), *b = start(h, "img-b", s), *c;

        want = sha256_of(prog);
        assert_string_equal(rt_pod_record(a)->image, prog);
        assert_string_equal(rt_pod_record(a)->image_id, want);
        assert_string_equal(rt_pod_record(b)->image_id, want);
        first = strdup(want);
        /* a new build of it at the same path (as a deploy puts one: renamed
         * over the old file, which its running processes keep) */
        _cleanup_free_ char *append = strprintf("cp '%s' '%s.new' && printf x >>'%s.new' && "
                                                "mv '%s.new' '%s'",
                                                prog, prog, prog, prog, prog);
        assert_int_equal(system(append), 0);
        c = start(h, "img-c", s);
        free(want);
        want = sha256_of(prog);
        assert_string_not_equal(want, first);
        assert_string_equal(rt_pod_record(c)->image_id, want);
        /* a record keeps it (an adopted pod says what it runs) */
        json_t *j = rt_record_to_json(rt_pod_record(a));
        rt_record back = {};
        assert_int_equal(rt_record_from_json(j, &back), 0);
        assert_string_equal(back.image_id, first);
        assert_string_equal(back.image, prog);
        rt_record_done(&back);
        json_decref(j);
        rt_pod_signal(a, SIGKILL);
        rt_pod_signal(b, SIGKILL);
        rt_pod_signal(c, SIGKILL);
        size_t three = 3;
        assert_true(run_until(h, all_exited, &three, 10000));
        rt_pod_free(a);
        rt_pod_free(b);
        rt_pod_free(c);
        pod_spec_free(s);
        harness_free(h);
}

/* ---- ports
 * ---------------------------------------------------------------------------------------- */

static void test_port_leases(void **state) {
        harness *h = harness_new(&(rt_config){ .port_lo = 42000, .port_hi = 42299 });
        char *c = cmd("\"sleep\"");
        spec_pod_spec *s = pod_spec(c, "        ports: [{name: http}]", NULL);
        rt_pod *pods[200];
        bool seen[300] = {};
        int blocker = socket(AF_INET, SOCK_STREAM, 0), one = 1;
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(42005) };

        /* A port someone else listens on is never leased: over IPv4, over
         * IPv6 only, or for UDP. Nor a port a live pod declares as its
         * fixed containerPort, though it does not listen (yet). */
        setsockopt(blocker, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        assert_int_equal(bind(blocker, (struct sockaddr *) &sa, sizeof sa), 0);
        assert_int_equal(listen(blocker, 1), 0);
        int blocker6 = socket(AF_INET6, SOCK_STREAM, 0), udp = socket(AF_INET, SOCK_DGRAM, 0);
        struct sockaddr_in6 sa6 = { .sin6_family = AF_INET6, .sin6_port = htons(42006) };
        struct sockaddr_in sau = { .sin_family = AF_INET, .sin_port = htons(42007) };
        bool have6 = blocker6 >= 0;
        if (have6) {
                setsockopt(blocker6, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
                have6 = bind(blocker6, (struct sockaddr *) &sa6, sizeof sa6) == 0 &&
                        listen(blocker6, 1) == 0;
        }
        assert_int_equal(bind(udp, (struct sockaddr *) &sau, sizeof sau), 0);
        char *cf = cmd("\"sleep\"");
        spec_pod_spec *sf = pod_spec(cf, "        ports: [{name: fixed, containerPort: 42008}]",
                                     NULL);
        rt_pod *fixed = start(h, "fixed", sf);

        for (int i = 0; i < 200; i++) {
                char name[32];
                snprintf(name, sizeof name, "p%d", i);
                pods[i] = start(h, name, s);
                uint16_t port = rt_pod_record(pods[i])->ports[0].port;
                assert_true(port >= 42000 && port <= 42299);
                assert_int_not_equal(port, 42005);
                if (have6)
                        assert_int_not_equal(port, 42006);
                assert_int_not_equal(port, 42007);
                assert_int_not_equal(port, 42008);
                assert_false(seen[port - 42000]);
                seen[port - 42000] = true;
        }
        /* Release 100, lease 100 more: still unique among the live ones. */
        for (int i = 0; i < 100; i++) {
                seen[rt_pod_record(pods[i])->ports[0].port - 42000] = false;
                rt_pod_stop(pods[i], 0);
                assert_true(run_until(h, pod_exited, pods[i], 5000));
                rt_pod_free(pods[i]);
        }
        for (int i = 0; i < 100; i++) {
                char name[32];
                snprintf(name, sizeof name, "q%d", i);
                pods[i] = start(h, name, s);
                uint16_t port = rt_pod_record(pods[i])->ports[0].port;
                assert_false(seen[port - 42000]);
                seen[port - 42000] = true;
        }
        for (int i = 0; i < 200; i++)
                rt_pod_stop(pods[i], 0);
        rt_pod_stop(fixed, 0);
        size_t want = 301;
        assert_true(run_until(h, all_exited, &want, 10000));
        for (int i = 0; i < 200; i++)
                rt_pod_free(pods[i]);
        rt_pod_free(fixed);
        pod_spec_free(sf);
        free(cf);
        close(blocker);
        if (blocker6 >= 0)
                close(blocker6);
        close(udp);
        pod_spec_free(s);
        free(c);
        harness_free(h);
}

/* ---- many
 * ----------------------------------------------------------------------------------------- */

static void test_thousand(void **state) {
        harness *h = harness_new(NULL);
        char *c = cmd("\"sleep\"");
        spec_pod_spec *s = pod_spec(c, NULL);
        size_t n = 1000;
        rt_pod **pods = calloc(n, sizeof *pods);
        usec_t t0 = now_monotonic(), t1, t2;

        for (size_t i = 0; i < n; i++) {
                char name[32];
                snprintf(name, sizeof name, "many-%zu", i);
                pods[i] = start(h, name, s);
        }
        t1 = now_monotonic();
        run_for(h, 200);
        for (size_t i = 0; i < n; i++)
                assert_int_equal(kill(rt_pod_record(pods[i])->pid, SIGKILL), 0);
        t2 = now_monotonic();
        assert_true(run_until(h, all_exited, &n, 20000));
        fprintf(stderr, "1000 spawns: %.1f ms; all exits seen %.1f ms after the kills\n",
                (double) (t1 - t0) / 1000.0, (double) (now_monotonic() - t2) / 1000.0);
        for (size_t i = 0; i < n; i++) {
                event *e = find_event(h, pods[i], EV_EXITED);
                assert_non_null(e);
                assert_int_equal(e->exit.signal, 9);
                rt_pod_free(pods[i]);
        }
        free(pods);
        pod_spec_free(s);
        free(c);
        harness_free(h);
}

int main(void) {
        const char *bin = getenv("TEND_TEST_BIN_DIR");
        srandom((unsigned) getpid() ^ (unsigned) time(NULL)); /* (free_port()) */
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_expand_rules),
                cmocka_unit_test(test_exit_code),
                cmocka_unit_test(test_killed_by_signal),
                cmocka_unit_test(test_exec_failures),
                cmocka_unit_test(test_run_as_user),
                cmocka_unit_test(test_env_and_expansion),
                cmocka_unit_test(test_grace_then_kill),
                cmocka_unit_test(test_grandchild_reaped),
                cmocka_unit_test(test_no_fd_leaks),
                cmocka_unit_test(test_clean_signals),
                cmocka_unit_test(test_close_right_after_start),
                cmocka_unit_test(test_stop_shortens_grace),
                cmocka_unit_test(test_log_rotation),
                cmocka_unit_test(test_log_quiet_then_grows),
                cmocka_unit_test(test_log_sparse),
                cmocka_unit_test(test_log_times_gated),
                cmocka_unit_test(test_log_times_bounded),
                cmocka_unit_test(test_log_times_made_at_first_write),
                cmocka_unit_test(test_escapee_goes_with_its_pod),
                cmocka_unit_test(test_adopt_refuses_reused_pid),
                cmocka_unit_test(test_adopt_by_second_agent),
                cmocka_unit_test(test_sweep_orphan_processes),
                cmocka_unit_test(test_log_dirs_recycled),
                cmocka_unit_test(test_probe_http),
                cmocka_unit_test(test_probe_tcp),
                cmocka_unit_test(test_probe_exec),
                cmocka_unit_test(test_probe_liveness_and_transitions),
                cmocka_unit_test(test_close_received),
                cmocka_unit_test(test_image_id),
                cmocka_unit_test(test_port_leases),
                cmocka_unit_test(test_thousand),
        };

        if (!bin) {
                fprintf(stderr, "TEND_TEST_BIN_DIR is not set\n");
                return 77;
        }
        snprintf(testprog, sizeof testprog, "%s/tend-testprog", bin);
        signal(SIGPIPE, SIG_IGN);
        if (getenv("TEST_FILTER")) /* run some: TEST_FILTER='test_probe_*' */
                cmocka_set_test_filter(getenv("TEST_FILTER"));
        return cmocka_run_group_tests(tests, NULL, NULL);
}
