/* SPDX-License-Identifier: MIT */

/*
 * bench-respawn: how fast a killed replica comes back, measured the way a
 * user (or a chaos tool) kills, from outside. A real tendd runs as its own
 * process (the release build) and is driven through its API and the tend
 * CLI; replicas are killed with kill(2); and every moment after the kill is
 * timed by the kernel: the process connector (netlink) reports each exit,
 * fork and exec with its CLOCK_MONOTONIC timestamp, so the figures are the
 * kernel's, not the agent's notion of "running".
 *
 *   respawn     10 replicas of /bin/sleep; round-robin kill -9 of the oldest,
 *               kills 0.3 s apart, 30 trials: kill(2) → the replacement's exec.
 *               The replicas have run 10 s before the first kill, as those of
 *               a deployment in use have; each line of replicas then dies
 *               young (under 10 s) at most twice in 30 trials, which the
 *               crash-loop back-off replaces at once by design.
 *   breakdown   where one respawn's time goes: kill → exit (kernel), exit →
 *               noticed → pass → commit → spawn (tendd's own histograms,
 *               /metrics), fork → exec (kernel).
 *   mass        kill -9 of all 200 (then 1000) replicas → the last
 *               replacement's exec; twice, 3 s apart: the second kill finds
 *               replicas 3 s old, which must come back as fast.
 *   runit       the same two patterns under runsvdir, where it is installed.
 *   config      what a pod's configuration costs: 100 replicas with 10 env
 *               references (8 of a ConfigMap's keys, 2 of a Secret's) and
 *               2 mounted volumes (the ConfigMap's files, the Secret's on a
 *               tmpfs) against 100 with none: apply → all exec'd, a kill →
 *               the replacement's exec, tendd's memory and the files' per
 *               pod. In a mount namespace of the bench's own, so that no
 *               mount outlives it.
 *
 * Needs root (the process connector). Figures, not a pass/fail test.
 *
 *   bench-respawn [--quick] [--only respawn|mass|config|runit]
 */

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "tend/base.h"

#define MS 1000000ULL /* ns */

static bool quick;
static char bindir[PATH_MAX], dir[64], sock[128];
static pid_t tendd = -1, runsvdir_pid = -1;

static uint64_t now_ns(void) {
        return bench_now_ns();
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "bench-respawn: ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
        if (tendd > 0)
                kill(tendd, SIGTERM);
        if (runsvdir_pid > 0)
                kill(runsvdir_pid, SIGHUP);
        exit(1);
}

/* ---- the kernel's process events ---------------------------------------------------- */

/*
 * Every fork, exec and exit on the machine arrives here; we keep those of
 * the supervisor's children. A process is a child of the supervisor when
 * its fork event names the supervisor as the parent (threads, whose tgid
 * is the parent's, are not). The receive buffer is large: a mass kill of
 * a thousand makes thousands of events in a few hundred milliseconds.
 */

typedef struct child {
        pid_t pid, ppid;
        uint64_t fork_ts, exec_ts, exit_ts; /* 0: not yet */
} child;

static struct {
        int fd;
        pid_t parent; /* the supervisor: tendd, or runsv's (see on_fork) */
        child *kids;
        size_t n, alloc;
        /* exits of any process (the victims are the supervisor's children) */
        bool overrun;
} pc = { .fd = -1 };

static child *kid_find(pid_t pid) {
        /* newest first: a reused pid must find its latest process */
        for (size_t i = pc.n; i > 0; i--)
                if (pc.kids[i - 1].pid == pid)
                        return &pc.kids[i - 1];
        return NULL;
}

/* Is pid one whose children we follow? tendd itself, or (runit) one of
 * runsvdir's runsv processes. */
static bool supervised_by(pid_t parent) {
        if (parent == pc.parent)
                return true;
        if (runsvdir_pid > 0) {
                child *k = kid_find(parent);
                /* runsv is runsvdir's child; its own children are the services */
                return k && k->exec_ts && parent != runsvdir_pid;
        }
        return false;
}

static void on_event(const struct proc_event *ev) {
        switch (ev->what) {
        case PROC_EVENT_FORK: {
                const struct fork_proc_event *f = &ev->event_data.fork;
                if (f->child_pid != f->child_tgid)
                        return; /* a thread */
                if (!supervised_by(f->parent_tgid) && f->parent_tgid != runsvdir_pid)
                        return;
                if (pc.n == pc.alloc) {
                        pc.alloc = pc.alloc ? pc.alloc * 2 : 4096;
                        pc.kids = realloc(pc.kids, pc.alloc * sizeof *pc.kids);
                        if (!pc.kids)
                                die("out of memory");
                }
                pc.kids[pc.n++] = (child){ .pid = f->child_pid,
                                           .ppid = f->parent_tgid,
                                           .fork_ts = ev->timestamp_ns };
                break;
        }
        case PROC_EVENT_EXEC: {
                child *k = kid_find(ev->event_data.exec.process_pid);
                if (k && !k->exec_ts)
                        k->exec_ts = ev->timestamp_ns;
                break;
        }
        case PROC_EVENT_EXIT: {
                const struct exit_proc_event *x = &ev->event_data.exit;
                child *k;
                if (x->process_pid != x->process_tgid)
                        return;
                k = kid_find(x->process_pid);
                if (k && !k->exit_ts)
                        k->exit_ts = ev->timestamp_ns;
                break;
        }
        default:
                break;
        }
}

static void pc_open(void) {
        struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = CN_IDX_PROC };
        struct {
                struct nlmsghdr nl;
                struct cn_msg cn;
                enum proc_cn_mcast_op op;
        } __attribute__((packed)) msg = {};
        int size = 64 << 20;

        pc.fd = socket(PF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_CONNECTOR);
        if (pc.fd < 0)
                die("netlink connector: %s (needs root)", strerror(errno));
        (void) setsockopt(pc.fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size);
        if (bind(pc.fd, (struct sockaddr *) &sa, sizeof sa) < 0)
                die("binding the process connector: %s (needs root)", strerror(errno));
        msg.nl.nlmsg_len = sizeof msg;
        msg.nl.nlmsg_type = NLMSG_DONE;
        msg.cn.id.idx = CN_IDX_PROC;
        msg.cn.id.val = CN_VAL_PROC;
        msg.cn.len = sizeof msg.op;
        msg.op = PROC_CN_MCAST_LISTEN;
        if (send(pc.fd, &msg, sizeof msg, 0) < 0)
                die("subscribing to process events: %s", strerror(errno));
}

/* Reads what has arrived, without waiting. */
static void pc_drain(void) {
        static char buf[1 << 16] __attribute__((aligned(NLMSG_ALIGNTO)));

        for (;;) {
                ssize_t n = recv(pc.fd, buf, sizeof buf, 0);
                if (n < 0 && errno == ENOBUFS) {
                        pc.overrun = true; /* events lost: the figures would lie */
                        continue;
                }
                if (n <= 0)
                        return;
                for (struct nlmsghdr *nh = (struct nlmsghdr *) buf; NLMSG_OK(nh, (size_t) n);
                     nh = NLMSG_NEXT(nh, n)) {
                        const struct cn_msg *cn = NLMSG_DATA(nh);
                        if (nh->nlmsg_type == NLMSG_NOOP || nh->nlmsg_type == NLMSG_ERROR)
                                continue;
                        if (cn->id.idx == CN_IDX_PROC && cn->id.val == CN_VAL_PROC)
                                on_event((const struct proc_event *) cn->data);
                }
        }
}

/*
 * Sleeps, then reads what arrived meanwhile. The bench must not wake up at
 * each event while it measures: on two cores, a listener woken by the fork
 * event competes with the very child whose exec it times (measured: fork →
 * exec 0.8 ms with a quiet listener, 2 ms with a polling one). The kernel
 * stamps each event when it happens; reading it later changes nothing.
 */
static void pc_read(int ms) {
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long) (ms % 1000) * 1000000L };

        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
        pc_drain();
}

/* Children forked at or after index `from` that have exec'd. */
static size_t execs_since(size_t from) {
        size_t k = 0;
        for (size_t i = from; i < pc.n; i++)
                k += pc.kids[i].exec_ts != 0;
        return k;
}

/* Waits until `want` children forked since `from` have exec'd; returns
 * the latest exec time among the first `want`, 0 on timeout. */
static uint64_t wait_execs(size_t from, size_t want, unsigned timeout_ms) {
        uint64_t end = now_ns() + (uint64_t) timeout_ms * MS;

        while (execs_since(from) < want && now_ns() < end)
                pc_read(20);
        if (execs_since(from) < want)
                return 0;
        uint64_t last = 0;
        size_t seen = 0;
        for (size_t i = from; i < pc.n && seen < want; i++)
                if (pc.kids[i].exec_ts) {
                        last = last > pc.kids[i].exec_ts ? last : pc.kids[i].exec_ts;
                        seen++;
                }
        return last;
}

static void sleep_ms(unsigned ms) {
        uint64_t end = now_ns() + (uint64_t) ms * MS;
        while (now_ns() < end) /* drained every 50 ms: the buffer never fills */
                pc_read((int) MIN((end - now_ns()) / MS + 1, 50));
}

/* ---- figures ------------------------------------------------------------------------- */

static void row_trials(const char *what, double *v, size_t n, const char *unit) {
        if (n == 0) {
                printf("%-60s %29s  %s\n", what, "-", unit);
                return;
        }
        qsort(v, n, sizeof *v, bench_cmp_double);
        printf("%-60s %9.2f %9.2f %9.2f  %s (n=%zu)\n", what, v[0], v[n / 2],
               v[(size_t) (0.95 * (double) (n - 1) + 0.5)], unit, n);
        fflush(stdout);
}

static void row(const char *what, double v, const char *unit) {
        printf("%-60s %29.1f  %s\n", what, v, unit);
        fflush(stdout);
}

/* ---- tendd and its API ----------------------------------------------------------------- */

static size_t on_body(char *p, size_t size, size_t n, void *u) {
        FILE *f = u;
        return fwrite(p, size, n, f);
}

/* GET path on tendd's socket; the body, or NULL. */
static char *api_get(const char *path) {
        static CURL *c;
        char url[512], *body = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&body, &len);
        long code = 0;
        CURLcode rc;

        if (!c && !(c = curl_easy_init()))
                die("curl");
        snprintf(url, sizeof url, "http://localhost%s", path);
        curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, sock);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, f);
        rc = curl_easy_perform(c);
        fclose(f);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        if (rc != CURLE_OK || code != 200) {
                free(body);
                return NULL;
        }
        return body;
}

/* The running pods of app=NAME: their pids, oldest first. */
static size_t running_pids(const char *app, pid_t *pids, size_t max) {
        char path[256];
        _cleanup_free_ char *body = NULL;
        json_t *j, *items, *it;
        size_t n = 0, i;
        struct {
                pid_t pid;
                char start[40];
        } *v = calloc(max + 1, sizeof *v);

        snprintf(path, sizeof path, "/api/v1/namespaces/default/pods?labelSelector=app%%3D%s", app);
        body = api_get(path);
        j = body ? json_loads(body, 0, NULL) : NULL;
        items = json_object_get(j, "items");
        json_array_foreach (items, i, it) {
                const char *phase = json_string_value(
                        json_object_get(json_object_get(it, "status"), "phase"));
                json_t *cs = json_array_get(
                        json_object_get(json_object_get(it, "status"), "containerStatuses"), 0);
                const char *cid = json_string_value(json_object_get(cs, "containerID"));
                const char *start = json_string_value(json_object_get(
                        json_object_get(json_object_get(cs, "state"), "running"), "startedAt"));
                if (!phase || strcmp(phase, "Running") || !cid || strncmp(cid, "process://", 10) ||
                    !start || n >= max)
                        continue;
                v[n].pid = atoi(cid + 10);
                /* RFC 3339 with an optional fraction: pad so that strings compare */
                snprintf(v[n].start, sizeof v[n].start, "%.19s%s", start,
                         start[19] == '.' ? start + 19 : ".000000Z");
                n++;
        }
        json_decref(j);
        for (size_t a = 1; a < n; a++) /* insertion sort, oldest first */
                for (size_t b = a; b > 0 && strcmp(v[b - 1].start, v[b].start) > 0; b--) {
                        typeof(*v) t = v[b];
                        v[b] = v[b - 1];
                        v[b - 1] = t;
                }
        for (i = 0; i < n; i++)
                pids[i] = v[i].pid;
        free(v);
        return n;
}

static int run_tend(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run_tend(const char *fmt, ...) {
        char args[1024], cmd[PATH_MAX + 1300];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(args, sizeof args, fmt, ap);
        va_end(ap);
        snprintf(cmd, sizeof cmd, "'%s/tend' --socket '%s' %s >/dev/null", bindir, sock, args);
        return system(cmd);
}

static void deploy_configured(const char *app, int replicas, bool config);

static void deploy(const char *app, int replicas) {
        deploy_configured(app, replicas, false);
}

/* Waits (reading events meanwhile) until the API shows n running. */
static void wait_running(const char *app, size_t n, unsigned timeout_ms) {
        uint64_t end = now_ns() + (uint64_t) timeout_ms * MS;
        pid_t *pids = calloc(n + 1, sizeof *pids);
        size_t got = 0;

        while (now_ns() < end) {
                got = running_pids(app, pids, n + 1);
                if (got == n)
                        break;
                sleep_ms(100);
        }
        free(pids);
        if (got != n)
                die("%zu of %zu replicas of %s running after %u ms", got, n, app, timeout_ms);
}

/* extra: one more option of tendd's, or NULL */
static void start_tendd(const char *extra) {
        tendd = bench_spawn_tendd(bindir, dir, sock, extra);
        pc.parent = tendd;
        for (int i = 0; i < 200; i++) {
                char *b = api_get("/healthz");
                free(b);
                if (b)
                        return;
                usleep(25 * 1000);
        }
        die("tendd did not come up (see %s/tendd.log)", dir);
}

/* tendd's histogram sums and counts for the respawn phases (/metrics). */
typedef struct phases {
        double sum[8];
        double count[8];
} phases;

static const char *const phase_names[] = { "queue", "pass", "spawn", NULL };

static bool read_phases(phases *ret) {
        _cleanup_free_ char *m = api_get("/metrics");
        bool any = false;

        memset(ret, 0, sizeof *ret);
        for (char *line = m ? strtok(m, "\n") : NULL; line; line = strtok(NULL, "\n"))
                for (size_t i = 0; phase_names[i]; i++) {
                        char sum[128], count[128];
                        snprintf(sum, sizeof sum, "tend_respawn_phase_seconds_sum{phase=\"%s\"} ",
                                 phase_names[i]);
                        snprintf(count, sizeof count,
                                 "tend_respawn_phase_seconds_count{phase=\"%s\"} ", phase_names[i]);
                        if (startswith(line, sum)) {
                                ret->sum[i] = strtod(line + strlen(sum), NULL);
                                any = true;
                        } else if (startswith(line, count))
                                ret->count[i] = strtod(line + strlen(count), NULL);
                }
        return any;
}

/* ---- respawn: round-robin kills ---------------------------------------------------------- */

#define TRIALS_MAX 64

typedef struct trial_set {
        double total[TRIALS_MAX], kill_exit[TRIALS_MAX], exit_fork[TRIALS_MAX],
                fork_exec[TRIALS_MAX];
        double phase[3][TRIALS_MAX];
        size_t n, n_phase;
} trial_set;

/* One kill of the oldest of `pids` (the supervisor's), timed to the
 * replacement's exec. Returns false on timeout. */
static bool one_kill(pid_t victim, trial_set *t, bool with_phases) {
        size_t from = pc.n;
        phases before = {}, after = {};
        uint64_t t0, exec_ts;
        child *v, *r = NULL;

        if (with_phases)
                (void) read_phases(&before);
        sleep_ms(5); /* let the API request's aftermath settle */
        t0 = now_ns();
        if (kill(victim, SIGKILL) < 0)
                die("kill %d: %s", (int) victim, strerror(errno));
        exec_ts = wait_execs(from, 1, 15000);
        if (!exec_ts)
                return false;
        for (size_t i = from; i < pc.n && !r; i++)
                if (pc.kids[i].exec_ts)
                        r = &pc.kids[i];
        v = kid_find(victim);
        t->total[t->n] = (double) (exec_ts - t0) / MS;
        t->kill_exit[t->n] = v && v->exit_ts ? (double) (v->exit_ts - t0) / MS : 0;
        t->exit_fork[t->n] = v && v->exit_ts ? (double) (r->fork_ts - v->exit_ts) / MS : 0;
        t->fork_exec[t->n] = (double) (r->exec_ts - r->fork_ts) / MS;
        t->n++;
        if (with_phases) {
                sleep_ms(50); /* the histograms are observed once the spawn returned */
                if (read_phases(&after) && after.count[2] == before.count[2] + 1) {
                        for (size_t i = 0; i < 3; i++)
                                t->phase[i][t->n_phase] = (after.sum[i] - before.sum[i]) * 1e3;
                        t->n_phase++;
                }
        }
        return true;
}

static void bench_respawn_tendd(const char *how) {
        size_t trials = quick ? 10 : 30;
        char what[128];
        const char *app = "rr";
        pid_t pids[16];
        trial_set t = {};

        deploy(app, 10);
        wait_running(app, 10, 30000);
        sleep_ms(10500); /* replicas of a deployment in use have run a while */
        for (size_t i = 0; i < trials; i++) {
                uint64_t t0 = now_ns();
                size_t n = running_pids(app, pids, 16);
                if (n != 10)
                        die("%zu replicas running before trial %zu, not 10", n, i);
                if (!one_kill(pids[0], &t, true))
                        die("trial %zu: no replacement within 15 s", i);
                /* kills about 0.3 s apart */
                uint64_t spent = (now_ns() - t0) / MS;
                if (spent < 300)
                        sleep_ms((unsigned) (300 - spent));
        }
        snprintf(what, sizeof what, "tendd: kill -9 → replacement exec (10 replicas, %s)", how);
        row_trials(what, t.total, t.n, "ms");
        printf("  where one respawn's time goes:\n");
        row_trials("    kill(2) → exit (kernel)", t.kill_exit, t.n, "ms");
        row_trials("    exit → tendd forks the replacement", t.exit_fork, t.n, "ms");
        if (t.n_phase) {
                static const char *const label[] = {
                        "      exit noticed → its pass begins (tendd)",
                        "      pass: exit, replacement, start decided (tendd)",
                        "      spawn: prepared, cloned, exec'd (tendd)",
                };
                for (size_t i = 0; i < 3; i++)
                        row_trials(label[i], t.phase[i], t.n_phase, "ms");
        }
        row_trials("    fork → exec (kernel, the child)", t.fork_exec, t.n, "ms");
        if (run_tend("delete deploy/%s", app) != 0)
                die("tend delete failed");
        sleep_ms(1500);
}

/* ---- mass kills ------------------------------------------------------------------------ */

/* A mass kill, ms from the first kill(2): the last victim's exit, the first
 * replacement's fork, the last replacement's exec. */
typedef struct mass {
        double last_exit, first_fork, last_exec;
} mass;

/* Kills every pid, then waits for n replacements. */
static mass kill_all(const pid_t *pids, size_t n) {
        size_t from = pc.n;
        uint64_t t0 = now_ns(), last, last_exit = t0, first_fork = UINT64_MAX;

        for (size_t i = 0; i < n; i++)
                (void) kill(pids[i], SIGKILL);
        last = wait_execs(from, n, 120000);
        if (!last)
                die("%zu of %zu replacements after 120 s", execs_since(from), n);
        for (size_t i = 0; i < n; i++) {
                child *v = kid_find(pids[i]);
                if (v && v->exit_ts > last_exit)
                        last_exit = v->exit_ts;
        }
        for (size_t i = from; i < pc.n; i++)
                first_fork = MIN(first_fork, pc.kids[i].fork_ts);
        return (mass){ .last_exit = (double) (last_exit - t0) / MS,
                       .first_fork = (double) (first_fork - t0) / MS,
                       .last_exec = (double) (last - t0) / MS };
}

static void row_mass(const char *what, mass m) {
        char detail[160];
        row(what, m.last_exec, "ms");
        snprintf(detail, sizeof detail,
                 "    (the victims' exits took %.0f ms; first replacement forked at %.0f ms)",
                 m.last_exit, m.first_fork);
        printf("%s\n", detail);
}

static void bench_mass_tendd(void) {
        const char *app = "mass";
        static const size_t sizes[] = { 200, 1000 };
        pid_t *pids = calloc(1001, sizeof *pids);

        for (size_t s = 0; s < 2; s++) {
                size_t n = sizes[s];
                char what[128];
                mass first, second;

                if (s == 0)
                        deploy(app, (int) n);
                else if (run_tend("scale deploy/%s --replicas=%zu", app, n) != 0)
                        die("tend scale failed");
                wait_running(app, n, 120000);
                sleep_ms(10500); /* old enough not to count as young deaths */
                if (running_pids(app, pids, n + 1) != n)
                        die("not %zu running", n);
                first = kill_all(pids, n);
                sleep_ms(3000 - (unsigned) MIN(first.last_exec, 3000.0));
                wait_running(app, n, 30000);
                if (running_pids(app, pids, n + 1) != n)
                        die("not %zu running", n);
                second = kill_all(pids, n);
                snprintf(what, sizeof what, "tendd: kill -9 of %zu → all %zu exec'd again", n, n);
                row_mass(what, first);
                row_mass("tendd:   the same, 3 s later (replicas 3 s old)", second);
                wait_running(app, n, 60000);
        }
        free(pids);
        if (run_tend("delete deploy/%s", app) != 0)
                die("tend delete failed");
        sleep_ms(3000);
}

/* ---- a pod's configuration ------------------------------------------------------------------ */

#define CONFIG_PODS 100

/* The ConfigMap and the Secret the configured pods refer to. */
static void config_objects(void) {
        char path[128];
        FILE *f;

        snprintf(path, sizeof path, "%s/config.yaml", dir);
        f = fopen(path, "w");
        if (!f)
                die("writing %s: %s", path, strerror(errno));
        fprintf(f, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bench-config}\ndata:\n");
        for (int i = 0; i < 8; i++)
                fprintf(f, "  K%d: value-%d-of-the-config\n", i, i);
        fprintf(f, "  app.conf: |\n");
        for (int i = 0; i < 8; i++)
                fprintf(f, "    setting%d = a line of an application's configuration\n", i);
        fprintf(f, "---\napiVersion: v1\nkind: Secret\nmetadata: {name: bench-secret}\n"
                   "stringData: {user: bench, password: s3cret-passw0rd}\n");
        fclose(f);
        if (run_tend("apply -f '%s'", path) != 0)
                die("tend apply -f %s failed", path);
}

/* A deployment of /bin/sleep, with (config) or without its configuration. */
static void deploy_configured(const char *app, int replicas, bool config) {
        char path[128];
        FILE *f;

        snprintf(path, sizeof path, "%s/%s.yaml", dir, app);
        f = fopen(path, "w");
        if (!f)
                die("writing %s: %s", path, strerror(errno));
        fprintf(f,
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: %s}\n"
                "spec:\n  replicas: %d\n  selector: {matchLabels: {app: %s}}\n"
                "  template:\n    metadata: {labels: {app: %s}}\n    spec:\n"
                "      terminationGracePeriodSeconds: 1\n"
                "      containers:\n      - name: main\n        command: [/bin/sleep, infinity]\n",
                app, replicas, app, app);
        if (config) {
                fprintf(f, "        env:\n");
                for (int i = 0; i < 8; i++)
                        fprintf(f,
                                "        - {name: K%d, valueFrom: {configMapKeyRef: {name: "
                                "bench-config, key: K%d}}}\n",
                                i, i);
                fprintf(f, "        - {name: USER_NAME, valueFrom: {secretKeyRef: {name: "
                           "bench-secret, key: user}}}\n"
                           "        - {name: PASSWORD, valueFrom: {secretKeyRef: {name: "
                           "bench-secret, key: password}}}\n");
                fprintf(f,
                        "        volumeMounts:\n"
                        "        - {name: config, mountPath: %s/mnt/config}\n"
                        "        - {name: secret, mountPath: %s/mnt/secret}\n"
                        "      volumes:\n"
                        "      - {name: config, configMap: {name: bench-config, items: [{key: "
                        "app.conf, path: app.conf}]}}\n"
                        "      - {name: secret, secret: {secretName: bench-secret}}\n",
                        dir, dir);
        }
        fclose(f);
        if (run_tend("apply -f '%s'", path) != 0)
                die("tend apply -f %s failed", path);
}

static long tendd_rss_kb(void) {
        return bench_rss_kb_of(tendd);
}

/* KiB under DIR/state/volumes (the files, on disk and tmpfs). */
static long volumes_kb(void) {
        char cmd[256], out[64] = "";
        long kb = 0;
        FILE *p;

        snprintf(cmd, sizeof cmd,
                 "du -sk --one-file-system '%s/state/volumes' 2>/dev/null; "
                 "du -sk '%s/state/volumes' 2>/dev/null",
                 dir, dir);
        p = popen(cmd, "r");
        /* the second line counts the tmpfs too */
        while (p && fgets(out, sizeof out, p))
                kb = strtol(out, NULL, 10);
        if (p)
                pclose(p);
        return kb;
}

static void bench_config(void) {
        static const char *const label[2] = { "none", "10 env refs + 2 files" };
        size_t trials = quick ? 10 : 20;
        pid_t *pids = calloc(CONFIG_PODS + 1, sizeof *pids);

        for (int config = 0; config < 2; config++) {
                const char *app = config ? "cfg" : "nocfg";
                char what[128];
                trial_set t = {};
                long rss0, rss1, files = 0;
                uint64_t t0, last;
                size_t from;

                /* a tendd of its own each: memory freed by the other would
                 * be reused */
                start_tendd(NULL);
                config_objects();
                sleep_ms(500);
                rss0 = tendd_rss_kb();
                from = pc.n;
                t0 = now_ns();
                deploy_configured(app, CONFIG_PODS, config);
                last = wait_execs(from, CONFIG_PODS, 60000);
                if (!last)
                        die("%d pods of %s not exec'd in 60 s", CONFIG_PODS, app);
                wait_running(app, CONFIG_PODS, 30000);
                snprintf(what, sizeof what, "apply %d pods → all exec'd: %s", CONFIG_PODS,
                         label[config]);
                row(what, (double) (last - t0) / MS, "ms");
                sleep_ms(10500); /* old enough not to count as young deaths */
                rss1 = tendd_rss_kb();
                if (config)
                        files = volumes_kb();
                /* kills of distinct replicas, oldest first: no line dies twice */
                if (running_pids(app, pids, CONFIG_PODS + 1) != CONFIG_PODS)
                        die("not %d running", CONFIG_PODS);
                for (size_t i = 0; i < trials; i++) {
                        if (!one_kill(pids[i], &t, false))
                                die("trial %zu: no replacement within 15 s", i);
                        sleep_ms(300);
                }
                snprintf(what, sizeof what, "kill -9 → replacement exec: %s", label[config]);
                row_trials(what, t.total, t.n, "ms");
                row_trials("    kill(2) → exit (kernel; a namespace is torn down)", t.kill_exit,
                           t.n, "ms");
                row_trials("    exit → tendd forks the replacement", t.exit_fork, t.n, "ms");
                row_trials("    fork → exec (kernel, the child: its mounts)", t.fork_exec, t.n,
                           "ms");
                snprintf(what, sizeof what, "tendd's RSS per pod: %s", label[config]);
                row(what, (double) (rss1 - rss0) / CONFIG_PODS, "KiB");
                if (config)
                        row("  its files per pod (a ConfigMap's on disk, a Secret's on tmpfs)",
                            (double) files / CONFIG_PODS, "KiB");
                if (run_tend("delete deploy/%s", app) != 0)
                        die("tend delete failed");
                sleep_ms(3000);
                kill(tendd, SIGTERM);
                waitpid(tendd, NULL, 0);
                tendd = -1;
        }
        free(pids);
}

/* ---- runit, beside ------------------------------------------------------------------------ */

static bool find_runit(char *runsvdir, size_t size) {
        static const char *const where[] = { "/usr/bin/runsvdir", "/usr/sbin/runsvdir",
                                             "/sbin/runsvdir", NULL };
        for (size_t i = 0; where[i]; i++)
                if (access(where[i], X_OK) == 0) {
                        snprintf(runsvdir, size, "%s", where[i]);
                        return true;
                }
        return false;
}

/* The pids of the services' processes (runsv's children that exec'd and
 * have not exited), oldest first. */
static size_t runit_pids(pid_t *pids, size_t max) {
        size_t n = 0;
        for (size_t i = 0; i < pc.n && n < max; i++) {
                const child *k = &pc.kids[i];
                /* runsv processes are runsvdir's children: not services */
                if (!k->exec_ts || k->exit_ts || k->ppid == runsvdir_pid)
                        continue;
                if (kid_find(k->pid) != k)
                        continue;
                pids[n++] = k->pid;
        }
        return n;
}

static void runit_services(const char *svdir, size_t from, size_t to) {
        for (size_t i = from; i < to; i++) {
                char path[256];
                FILE *f;
                snprintf(path, sizeof path, "%s/s%zu", svdir, i);
                mkdir(path, 0755);
                snprintf(path, sizeof path, "%s/s%zu/run", svdir, i);
                f = fopen(path, "w");
                if (!f)
                        die("writing %s", path);
                fprintf(f, "#!/bin/sh\nexec /bin/sleep infinity\n");
                fclose(f);
                chmod(path, 0755);
        }
}

static size_t runit_live(void) {
        static pid_t buf[4096];
        return runit_pids(buf, 4096);
}

static void bench_runit(void) {
        char runsvdir[64], svdir[128];
        size_t trials = quick ? 10 : 30;
        trial_set t = {};
        pid_t *pids = calloc(1001, sizeof *pids);

        if (!find_runit(runsvdir, sizeof runsvdir)) {
                printf("runit: not installed (apt-get install runit) — no comparison\n");
                return;
        }
        snprintf(svdir, sizeof svdir, "%s/runit", dir);
        mkdir(svdir, 0755);
        runit_services(svdir, 0, 10);
        /* Its services are its runsv's children: follow runsvdir's. */
        runsvdir_pid = fork();
        if (runsvdir_pid == 0) {
                int null = open("/dev/null", O_RDWR);
                dup2(null, 1);
                dup2(null, 2);
                execl(runsvdir, runsvdir, "-P", svdir, (char *) NULL);
                _exit(127);
        }
        pc.parent = -1;
        {
                uint64_t end = now_ns() + 10000 * MS;
                while (runit_live() < 10 && now_ns() < end)
                        pc_read(50);
        }
        /* runsv children are runsvdir's: the services are theirs. A sh
         * script: the service's first exec is the shell, which then execs
         * sleep; the replacement counts from its first exec. */
        sleep_ms(10500);
        for (size_t i = 0; i < trials; i++) {
                uint64_t t0 = now_ns();
                size_t n = runit_pids(pids, 16);
                if (n < 10)
                        die("runit: %zu services running, not 10", n);
                if (!one_kill(pids[0], &t, false))
                        die("runit: no replacement within 15 s");
                uint64_t spent = (now_ns() - t0) / MS;
                if (spent < 300)
                        sleep_ms((unsigned) (300 - spent));
        }
        row_trials("runit: kill -9 → replacement exec (round-robin, 10 services)", t.total, t.n,
                   "ms");
        row_trials("    exit → runsv forks the replacement", t.exit_fork, t.n, "ms");

        runit_services(svdir, 10, 200);
        {
                /* runsvdir looks for new services every 5 s */
                uint64_t end = now_ns() + 30000 * MS;
                while (runit_live() < 200 && now_ns() < end)
                        pc_read(50);
                if (runit_live() < 200)
                        die("runit: only %zu of 200 services up", runit_live());
        }
        sleep_ms(10500);
        for (int k = 0; k < 2; k++) {
                size_t n = runit_pids(pids, 200);
                mass m = kill_all(pids, n);
                row_mass(k == 0 ? "runit: kill -9 of 200 → all 200 exec'd again"
                                : "runit:   the same, 3 s later (services 3 s old)",
                         m);
                if (k == 0)
                        sleep_ms(3000 - (unsigned) MIN(m.last_exec, 3000.0));
        }
        /* SIGHUP: runsvdir tells every runsv to stop its service and exit. */
        kill(runsvdir_pid, SIGHUP);
        waitpid(runsvdir_pid, NULL, 0);
        runsvdir_pid = -1;
        free(pids);
}

/* ---- main ------------------------------------------------------------------------------- */

static void find_bindir(void) {
        if (bench_find_bindir(bindir, sizeof bindir) < 0)
                die("cannot find myself");
}

int main(int argc, char **argv) {
        const char *only = NULL;

        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--quick"))
                        quick = true;
                else if (!strcmp(argv[i], "--only") && i + 1 < argc)
                        only = argv[++i];
                else {
                        fprintf(stderr, "Usage: bench-respawn [--quick] [--only "
                                        "respawn|mass|config|runit]\n");
                        return 2;
                }
        }
        if (geteuid() != 0) {
                fprintf(stderr, "bench-respawn: needs root (the kernel's process connector)\n");
                return 77;
        }
        find_bindir();
        signal(SIGPIPE, SIG_IGN);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        snprintf(dir, sizeof dir, "/tmp/tend-respawn-XXXXXX");
        if (!mkdtemp(dir))
                die("mkdtemp: %s", strerror(errno));
        snprintf(sock, sizeof sock, "%s/tend.sock", dir);
        pc_open();

        printf("%-60s %9s %9s %9s\n", "measure (timed by the kernel)", "min", "median", "p95");
        if (!only || !strcmp(only, "respawn")) {
                /* without cgroups first: the same pods, each not in a cgroup
                 * of its own (issue 30's aim: with them within +10 %) */
                start_tendd("--cgroups=off");
                bench_respawn_tendd("no cgroups");
                kill(tendd, SIGTERM);
                waitpid(tendd, NULL, 0);
                tendd = -1;
        }
        if (!only || !strcmp(only, "respawn") || !strcmp(only, "mass")) {
                start_tendd(NULL);
                if (!only || !strcmp(only, "respawn"))
                        bench_respawn_tendd("each in a cgroup");
                if (!only || !strcmp(only, "mass"))
                        bench_mass_tendd();
                kill(tendd, SIGTERM);
                waitpid(tendd, NULL, 0);
                tendd = -1;
                /* tendd leaves its pods running when it stops: they were deleted above */
        }
        if (!only || !strcmp(only, "config")) {
                /* volumes mount: in a namespace of our own, which goes with us */
                if (unshare(CLONE_NEWNS) < 0 ||
                    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                        die("a mount namespace of our own: %s", strerror(errno));
                bench_config();
        }
        if (!only || !strcmp(only, "runit"))
                bench_runit();
        if (pc.overrun)
                printf("warning: the kernel dropped process events (receive buffer full): "
                       "some figures may be missing\n");
        {
                char rm[128];
                snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
                if (system(rm) != 0)
                        fprintf(stderr, "bench-respawn: could not remove %s\n", dir);
        }
        return 0;
}
