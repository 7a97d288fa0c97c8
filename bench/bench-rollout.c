/* SPDX-License-Identifier: MIT */

/*
 * bench-rollout: does a rolling update drop or slow down requests? Measured
 * the way a user would see it, from a client: a load generator sends HTTP
 * requests at a steady rate (200/s, each on a new connection, 5 s timeout)
 * to the example server (tend-example-web), first for 3 s of steady state,
 * then while a child process drives 10 rolling updates of a 3-replica
 * deployment whose new pods become ready 0.5 s after they start. A request
 * fails when curl does not complete it or the status is not 200. Latencies
 * are curl's (CURLINFO_TOTAL_TIME_T: connect to last byte), p50 and p99 of
 * the requests that succeeded, those started in steady state against those
 * started while the rollouts ran. The load never skips a tick: a loop that
 * fell behind sends the missed requests at once, so the offered load stays
 * steady whatever the server does.
 *
 *   held      tend.io/listen: tendd binds the port once and every pod of
 *             every revision accepts from that one socket (fd 3, LISTEN_FDS);
 *             readiness by sd_notify READY=1 (tend.io/notify). A real tendd
 *             of its own (the release build), driven by the tend CLI:
 *             tend apply, then tend rollout status, per update.
 *   leased    the same program and deployment shape with a port leased per
 *             pod ($PORT) and a readinessProbe on /healthz. No one port to
 *             send to: the client reads the Ready pods' ports from the API
 *             every 100 ms and sends round-robin among them, as a client-side
 *             balancer with service discovery would.
 *   systemd   beside: a socket unit and a Type=notify service of the same
 *             program under a real systemd user manager, restarted with
 *             `systemctl --user restart` 10 times. Only under
 *             tests/systemd/harness.sh (scripts/bench.sh runs it so, with
 *             --only systemd); without --only, held and leased run, and
 *             systemd too when under the harness.
 *
 * Figures, not a pass/fail test.
 *
 *   bench-rollout [--quick] [--only held|leased|systemd]
 */

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "tend/base.h"

#define MS 1000000ULL /* ns */
#define RATE 200      /* requests per second */
#define REPLICAS 3
#define MAX_PODS 16                /* a rollout of 3 with maxSurge 1 has at most 4 Ready */
#define MAX_REQUESTS (RATE * 1800) /* 30 min of load: more is a hung rollout */
#define MAX_REASONS 16

static bool quick;
static char bindir[PATH_MAX], dir[64], sock[128], unitdir[PATH_MAX];
static pid_t main_pid, tendd = -1, rollouts = -1;
static bool deployed, units_written;

static uint64_t now_ns(void) {
        return bench_now_ns();
}

static void sleep_ms(unsigned ms) {
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long) (ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

static void cleanup(void);

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "bench-rollout: ");
        vfprintf(stderr, fmt, ap);
        fprintf(stderr, "\n");
        va_end(ap);
        if (getpid() == main_pid)
                cleanup();
        exit(1);
}

static void run_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void run_sh(const char *fmt, ...) {
        char cmd[4096];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(cmd, sizeof cmd, fmt, ap);
        va_end(ap);
        if (system(cmd) != 0)
                die("failed: %s", cmd);
}

/* A free TCP port on 127.0.0.1: the kernel picks one, we let it go. Another
 * program could take it before tendd or systemd binds it; on a bench
 * machine, none does. */
static int free_port(void) {
        struct sockaddr_in sa = { .sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof sa;
        _cleanup_close_ int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0 || bind(fd, (struct sockaddr *) &sa, sizeof sa) < 0 ||
            getsockname(fd, (struct sockaddr *) &sa, &len) < 0)
                die("cannot find a free port: %s", strerror(errno));
        return ntohs(sa.sin_port);
}

/* ---- tendd and its API ----------------------------------------------------------------- */

static size_t on_body(char *p, size_t size, size_t n, void *u) {
        return tend_buf_add(u, p, size * n) < 0 ? 0 : size * n;
}

static void api_setup(CURL *c, const char *path, tend_buf *body) {
        char url[512];

        snprintf(url, sizeof url, "http://localhost%s", path);
        curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, sock);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_PROXY, "");
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
}

/* GET path on tendd's socket; the body, or NULL. */
static char *api_get(const char *path) {
        static CURL *c;
        _cleanup_buf_ tend_buf body = TEND_BUF_INIT(4 << 20);
        long code = 0;
        CURLcode rc;

        if (!c && !(c = curl_easy_init()))
                die("curl");
        api_setup(c, path, &body);
        rc = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        if (rc != CURLE_OK || code != 200)
                return NULL;
        return tend_buf_take(&body);
}

#define PODS_PATH "/api/v1/namespaces/default/pods?labelSelector=app%3Dweb"

/* From a pod list: the "http" ports (tend.io/ports: "http=30001") of the
 * pods a balancer may send to: Running, not being deleted, Ready. Returns
 * how many, or -1 if body is not a pod list. */
static int ready_ports(const char *body, int *ports, size_t max) {
        json_t *j = json_loads(body, 0, NULL), *items = json_object_get(j, "items"), *it;
        size_t i, n = 0;

        if (!json_is_array(items)) {
                json_decref(j);
                return -1;
        }
        json_array_foreach (items, i, it) {
                json_t *meta = json_object_get(it, "metadata"),
                       *status = json_object_get(it, "status");
                const char *phase = json_string_value(json_object_get(status, "phase"));
                const char *leased = json_string_value(
                        json_object_get(json_object_get(meta, "annotations"), "tend.io/ports"));
                bool ready = false;
                json_t *cond;
                size_t k;

                json_array_foreach (json_object_get(status, "conditions"), k, cond)
                        if (streq_ptr(json_string_value(json_object_get(cond, "type")), "Ready"))
                                ready = streq_ptr(
                                        json_string_value(json_object_get(cond, "status")), "True");
                if (!streq_ptr(phase, "Running") || json_object_get(meta, "deletionTimestamp") ||
                    !ready || !leased || n >= max)
                        continue;
                /* "http=30001,metrics=9100" */
                for (const char *p = leased; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
                        if (startswith(p, "http=")) {
                                ports[n++] = atoi(p + 5);
                                break;
                        }
        }
        json_decref(j);
        return (int) n;
}

/* Pods of app=web listed by the API, whatever their state; -1 if it does not answer. */
static int pods_listed(void) {
        _cleanup_free_ char *body = api_get(PODS_PATH);
        json_t *j = body ? json_loads(body, 0, NULL) : NULL;
        int n = json_is_array(json_object_get(j, "items"))
                        ? (int) json_array_size(json_object_get(j, "items"))
                        : -1;

        json_decref(j);
        return n;
}

static void start_tendd(void) {
        tendd = bench_spawn_tendd(bindir, dir, sock, NULL);
        if (tendd < 0)
                die("fork: %s", strerror(errno));
        for (int i = 0; i < 200; i++) {
                char *b = api_get("/healthz");
                free(b);
                if (b)
                        return;
                sleep_ms(25);
        }
        die("tendd did not come up (see %s/tendd.log)", dir);
}

/* The pods outlive tendd by design: delete the deployment and wait until
 * its pods are gone (5 s grace at most, 1 s drain), then stop tendd. */
static void undeploy(void) {
        char cmd[PATH_MAX + 300];

        if (!deployed)
                return;
        deployed = false;
        snprintf(cmd, sizeof cmd, "'%s/tend' --socket '%s' delete deploy/web >/dev/null", bindir,
                 sock);
        if (system(cmd) != 0)
                fprintf(stderr, "bench-rollout: tend delete deploy/web failed\n");
        for (int i = 0; i < 300 && pods_listed() != 0; i++)
                sleep_ms(100);
        if (pods_listed() != 0)
                fprintf(stderr, "bench-rollout: pods of deploy/web left after 30 s\n");
}

static void stop_tendd(void) {
        if (tendd <= 0)
                return;
        kill(tendd, SIGTERM);
        waitpid(tendd, NULL, 0);
        tendd = -1;
}

/* The manifest of deploy/web at version v: a held socket on port, or (port 0)
 * a port leased per pod and a readiness probe. */
static void write_manifest(const char *path, int v, int port) {
        FILE *f = fopen(path, "w");

        if (!f)
                die("writing %s: %s", path, strerror(errno));
        fprintf(f,
                "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
                "spec:\n  replicas: %d\n  selector: {matchLabels: {app: web}}\n"
                "  strategy:\n    rollingUpdate: {maxSurge: 1, maxUnavailable: 0}\n"
                "  template:\n    metadata:\n      labels: {app: web}\n",
                REPLICAS);
        if (port)
                fprintf(f, "      annotations: {\"tend.io/listen\": \"http@127.0.0.1\", "
                           "\"tend.io/notify\": \"ready\"}\n");
        else
                fprintf(f, "      annotations: {\"tend.io/lease-ports\": \"http\"}\n");
        fprintf(f,
                "    spec:\n      terminationGracePeriodSeconds: 5\n"
                "      containers:\n      - name: web\n"
                "        command: [\"%s/tend-example-web\", \"--version=v%d\", "
                "\"--ready-after=0.5\", \"--drain=1\"]\n",
                bindir, v);
        if (port)
                fprintf(f, "        ports: [{name: http, containerPort: %d}]\n", port);
        else
                fprintf(f, "        readinessProbe: {httpGet: {path: /healthz, port: http}, "
                           "periodSeconds: 1}\n");
        if (fclose(f) != 0)
                die("writing %s: %s", path, strerror(errno));
}

/* ---- the load ------------------------------------------------------------------------ */

typedef struct request {
        uint64_t start; /* ns, when it was sent */
        double ms;      /* curl's total time */
        bool ok, during;
} request;

typedef struct reason {
        CURLcode code;
        long http;
        size_t n;
} reason;

typedef struct load {
        CURLM *multi;
        int port;          /* the one target; 0: balance over `ports` */
        const char *child; /* the rollouts, a shell script */
        unsigned steady_ms;

        request *reqs;
        size_t n, alloc;
        reason reasons[MAX_REASONS];
        size_t n_reasons;
        double took; /* s, the rollouts */

        /* leased: the Ready pods' ports, from the API every 100 ms, asked
         * from within the same loop so that no request waits for it */
        int ports[MAX_PODS];
        size_t n_ports, next_port;
        CURL *refresh;
        tend_buf body;
        bool refreshing;
        uint64_t refreshed;
} load;

static void count_failure(load *l, CURLcode code, long http) {
        for (size_t i = 0; i < l->n_reasons; i++)
                if (l->reasons[i].code == code && l->reasons[i].http == http) {
                        l->reasons[i].n++;
                        return;
                }
        if (l->n_reasons < MAX_REASONS)
                l->reasons[l->n_reasons++] = (reason){ .code = code, .http = http, .n = 1 };
}

static size_t discard(char *p, size_t size, size_t n, void *u) {
        (void) p;
        (void) u;
        return size * n;
}

static void send_one(load *l, bool during) {
        char url[64];
        int port = l->port;
        request *r;
        CURL *c;

        if (l->n == l->alloc) {
                if (l->alloc >= MAX_REQUESTS)
                        die("more than %d requests: a rollout that never ends?", MAX_REQUESTS);
                l->alloc = l->alloc ? l->alloc * 2 : 8192;
                l->reqs = realloc(l->reqs, l->alloc * sizeof *l->reqs);
                if (!l->reqs)
                        die("out of memory");
        }
        r = &l->reqs[l->n++];
        *r = (request){ .start = now_ns(), .during = during }; /* not ok until it is */
        if (!port && l->n_ports)
                port = l->ports[l->next_port++ % l->n_ports];
        if (!port) {
                /* a balancer that knows no endpoint fails the request */
                count_failure(l, CURLE_OK, 0);
                return;
        }
        c = curl_easy_init();
        if (!c)
                die("curl");
        snprintf(url, sizeof url, "http://127.0.0.1:%d/", port);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_PROXY, "");
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
        curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
        /* the index, not a pointer: reqs moves when it grows */
        curl_easy_setopt(c, CURLOPT_PRIVATE, (void *) (uintptr_t) (l->n - 1));
        curl_multi_add_handle(l->multi, c);
}

static void finish_one(load *l, CURL *c, CURLcode rc) {
        uintptr_t i = 0;
        curl_off_t us = 0;
        long http = 0;
        request *r;

        curl_easy_getinfo(c, CURLINFO_PRIVATE, (char **) &i);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &http);
        curl_easy_getinfo(c, CURLINFO_TOTAL_TIME_T, &us);
        r = &l->reqs[i];
        r->ms = (double) us / 1e3;
        r->ok = rc == CURLE_OK && http == 200;
        if (!r->ok)
                count_failure(l, rc, rc == CURLE_OK ? http : 0);
        curl_multi_remove_handle(l->multi, c);
        curl_easy_cleanup(c);
}

static void refresh_start(load *l) {
        if (!l->refresh && !(l->refresh = curl_easy_init()))
                die("curl");
        tend_buf_reset(&l->body);
        api_setup(l->refresh, PODS_PATH, &l->body);
        curl_multi_add_handle(l->multi, l->refresh);
        l->refreshing = true;
        l->refreshed = now_ns();
}

static void refresh_done(load *l, CURLcode rc) {
        long http = 0;
        int ports[MAX_PODS], n;

        curl_easy_getinfo(l->refresh, CURLINFO_RESPONSE_CODE, &http);
        curl_multi_remove_handle(l->multi, l->refresh);
        l->refreshing = false;
        /* tendd did not answer: the balancer keeps what it knew */
        if (rc != CURLE_OK || http != 200)
                return;
        n = ready_ports(tend_buf_str(&l->body), ports, MAX_PODS);
        if (n < 0)
                return;
        memcpy(l->ports, ports, (size_t) n * sizeof *ports);
        l->n_ports = (size_t) n;
}

/* The rollouts, as a shell script in a child: load goes on meanwhile. The
 * child closes the descriptors it was born with (connections in flight) so
 * that none outlives its request in a process that does not own it. */
static pid_t start_child(const char *script) {
        pid_t pid = fork();

        if (pid < 0)
                die("fork: %s", strerror(errno));
        if (pid == 0) {
                close_range(3, ~0U, 0);
                execl("/bin/sh", "sh", "-ec", script, (char *) NULL);
                _exit(127);
        }
        return pid;
}

/*
 * Steady state for l->steady_ms, then the rollouts' child; requests sent
 * while it runs count as "during". Once it exits, no more are sent and those
 * in flight finish. One loop, no threads: a tick every 1/RATE s, missed
 * ticks sent at once when the loop falls behind.
 */
static void run_load(load *l) {
        const uint64_t interval = 1000000000ULL / RATE;
        uint64_t t0 = now_ns(), next = t0, steady_end = t0 + l->steady_ms * MS, forked = 0;
        bool during = false, stopped = false;
        int running = 0, status, timeout;

        l->multi = curl_multi_init();
        if (!l->multi)
                die("curl");
        for (;;) {
                uint64_t now = now_ns();
                CURLMsg *msg;
                int left;

                if (!during && !stopped && now >= steady_end) {
                        rollouts = start_child(l->child);
                        forked = now;
                        during = true;
                }
                if (!stopped && !l->port && !l->refreshing && now - l->refreshed >= 100 * MS)
                        refresh_start(l);
                for (; !stopped && next <= now; next += interval)
                        send_one(l, during);
                curl_multi_perform(l->multi, &running);
                while ((msg = curl_multi_info_read(l->multi, &left)))
                        if (msg->msg != CURLMSG_DONE)
                                continue;
                        else if (msg->easy_handle == l->refresh)
                                refresh_done(l, msg->data.result);
                        else
                                finish_one(l, msg->easy_handle, msg->data.result);
                if (during && !stopped && waitpid(rollouts, &status, WNOHANG) == rollouts) {
                        l->took = (double) (now_ns() - forked) / 1e9;
                        rollouts = -1;
                        stopped = true;
                        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                                die("the rollouts failed (%s %d)",
                                    WIFEXITED(status) ? "exit status" : "signal",
                                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
                }
                if (stopped && running == 0)
                        break;
                /* until the next tick, or a transfer has news */
                now = now_ns();
                timeout = stopped ? 50 : next <= now ? 0 : (int) ((next - now + MS - 1) / MS);
                curl_multi_poll(l->multi, NULL, 0, timeout, NULL);
        }
        if (l->refresh)
                curl_easy_cleanup(l->refresh);
        l->refresh = NULL;
        curl_multi_cleanup(l->multi);
        l->multi = NULL;
}

/* ---- figures ------------------------------------------------------------------------- */

static const char header[] = "                              requests  failed   steady p50/p99 ms"
                             "   during rollouts p50/p99 ms   rollouts took";

/* Appends text to line, right-aligned to end before column `end`, at least
 * one space after what is there. */
static void put(char *line, size_t size, size_t end, const char *text) {
        size_t len = strlen(line), w = strlen(text);
        size_t at = end >= len + 1 + w ? end - w : len + 1;

        snprintf(line + len, size - len, "%*s%s", (int) (at - len), "", text);
}

/* p50 and p99 of the requests of one phase that succeeded, right of the
 * p50 ending before the column of the header's slash. */
static void put_pair(char *line, size_t size, size_t slash, const load *l, bool during) {
        double *v = calloc(l->n + 1, sizeof *v);
        size_t n = 0;
        char p50[32], p99[32];

        if (!v)
                die("out of memory");
        for (size_t i = 0; i < l->n; i++)
                if (l->reqs[i].ok && l->reqs[i].during == during)
                        v[n++] = l->reqs[i].ms;
        if (n == 0) {
                put(line, size, slash + 1, "-");
                free(v);
                return;
        }
        qsort(v, n, sizeof *v, bench_cmp_double);
        snprintf(p50, sizeof p50, "%.2f", v[n / 2]);
        snprintf(p99, sizeof p99, "%.2f", v[(size_t) (0.99 * (double) (n - 1) + 0.5)]);
        put(line, size, slash - 1, p50);
        snprintf(line + strlen(line), size - strlen(line), " / %s", p99);
        free(v);
}

static size_t column_end(const char *word, size_t from) {
        return (size_t) (strstr(header + from, word) - header) + strlen(word);
}

static void print_header(void) {
        printf("%s\n", header);
        fflush(stdout);
}

static void print_row(const char *label, const load *l) {
        size_t failed = 0, failed_steady = 0, c_slash1 = column_end("p50/p99", 0) - 4;
        size_t c_slash2 = column_end("p50/p99", c_slash1 + 4) - 4;
        char line[512], num[32];

        for (size_t i = 0; i < l->n; i++)
                if (!l->reqs[i].ok) {
                        failed++;
                        failed_steady += !l->reqs[i].during;
                }
        snprintf(line, sizeof line, "%s", label);
        snprintf(num, sizeof num, "%zu", l->n);
        put(line, sizeof line, column_end("requests", 0), num);
        snprintf(num, sizeof num, "%zu", failed);
        put(line, sizeof line, column_end("failed", 0), num);
        put_pair(line, sizeof line, c_slash1, l, false);
        put_pair(line, sizeof line, c_slash2, l, true);
        snprintf(num, sizeof num, "%.1f s", l->took);
        put(line, sizeof line, strlen(header), num);
        printf("%s\n", line);
        if (failed) {
                printf("    failed:");
                for (size_t i = 0; i < l->n_reasons; i++)
                        if (l->reasons[i].code != CURLE_OK)
                                printf("%s %zu × %s", i ? "," : "", l->reasons[i].n,
                                       curl_easy_strerror(l->reasons[i].code));
                        else if (l->reasons[i].http)
                                printf("%s %zu × HTTP %ld", i ? "," : "", l->reasons[i].n,
                                       l->reasons[i].http);
                        else
                                printf("%s %zu × no Ready pod known", i ? "," : "",
                                       l->reasons[i].n);
                printf(" (%zu of them in steady state)\n", failed_steady);
        }
        fflush(stdout);
}

/* ---- the scenarios ---------------------------------------------------------------------- */

static unsigned n_rollouts(void) {
        return quick ? 3 : 10;
}

static unsigned steady_ms(void) {
        return quick ? 1500 : 3000;
}

/* deploy/web through tendd: v1, then the rollouts to v2.. under load. */
static void bench_tend(bool held) {
        int port = held ? free_port() : 0;
        char path[128], script[8192], tend[PATH_MAX + 200];
        size_t len;
        load l = { .port = port, .steady_ms = steady_ms(), .body = TEND_BUF_INIT(4 << 20) };

        snprintf(tend, sizeof tend, "'%s/tend' --socket '%s'", bindir, sock);
        for (unsigned v = 1; v <= n_rollouts() + 1; v++) {
                snprintf(path, sizeof path, "%s/web-v%u.yaml", dir, v);
                write_manifest(path, (int) v, port);
        }
        deployed = true;
        run_sh("%s apply -f '%s/web-v1.yaml' >/dev/null", tend, dir);
        run_sh("%s rollout status deploy/web --timeout=60s >/dev/null", tend);
        if (!held) {
                /* the balancer starts with the pods it can see */
                _cleanup_free_ char *body = NULL;
                for (int i = 0; i < 100; i++) {
                        free(body);
                        body = api_get(PODS_PATH);
                        l.n_ports = body ? (size_t) MAX(ready_ports(body, l.ports, MAX_PODS), 0)
                                         : 0;
                        if (l.n_ports == REPLICAS)
                                break;
                        sleep_ms(100);
                }
                if (l.n_ports != REPLICAS)
                        die("%zu Ready pods with a leased port, not %d", l.n_ports, REPLICAS);
                l.refreshed = now_ns();
        }
        len = (size_t) snprintf(script, sizeof script, "for v in");
        for (unsigned v = 2; v <= n_rollouts() + 1; v++)
                len += (size_t) snprintf(script + len, sizeof script - len, " %u", v);
        snprintf(script + len, sizeof script - len,
                 "; do %s apply -f '%s/web-v'$v.yaml >/dev/null; "
                 "%s rollout status deploy/web --timeout=120s >/dev/null; done",
                 tend, dir, tend);
        l.child = script;
        run_load(&l);
        print_row(held ? "tend, held socket" : "tend, leased port per pod", &l);
        tend_buf_free(&l.body);
        free(l.reqs);
        undeploy();
}

static void write_unit(const char *name, const char *text) {
        char path[PATH_MAX + 64];
        FILE *f;

        snprintf(path, sizeof path, "%s/%s", unitdir, name);
        f = fopen(path, "w");
        if (!f || fputs(text, f) < 0 || fclose(f) != 0)
                die("writing %s: %s", path, strerror(errno));
}

/* The same program as a socket-activated Type=notify service, restarted by
 * systemd: the socket is systemd's, the service restarts in place. */
static void bench_systemd(void) {
        const char *cfg = getenv("XDG_CONFIG_HOME");
        char text[PATH_MAX + 512], script[512];
        int port = free_port();
        load l = { .port = port, .steady_ms = steady_ms() };

        if (!getenv("TEND_SYSTEMD_HARNESS") || !cfg) {
                printf("%-30s skipped: needs a systemd user manager of its own, run me under "
                       "tests/systemd/harness.sh\n"
                       "%-30s (scripts/bench.sh does: --only systemd)\n",
                       "systemd, socket + restart", "");
                return;
        }
        snprintf(unitdir, sizeof unitdir, "%s/systemd/user", cfg);
        run_sh("mkdir -p '%s'", unitdir);
        units_written = true;
        snprintf(text, sizeof text,
                 "[Unit]\nDescription=bench-rollout: the example server's socket\n"
                 "[Socket]\nListenStream=127.0.0.1:%d\n",
                 port);
        write_unit("bench-web.socket", text);
        snprintf(text, sizeof text,
                 "[Unit]\nDescription=bench-rollout: the example server\n"
                 "Requires=bench-web.socket\nAfter=bench-web.socket\n"
                 /* 10 restarts in 10 s are what we ask for, not a crash loop */
                 "StartLimitIntervalSec=0\n"
                 "[Service]\nType=notify\n"
                 "ExecStart=%s/tend-example-web --version=v1 --ready-after=0.5 --drain=1\n"
                 "TimeoutStopSec=5\n",
                 bindir);
        write_unit("bench-web.service", text);
        run_sh("systemctl --user daemon-reload && systemctl --user start bench-web.socket && "
               "systemctl --user start bench-web.service && "
               "systemctl --user is-active --quiet bench-web.service");
        snprintf(script, sizeof script,
                 "for i in $(seq %u); do systemctl --user restart bench-web.service; done",
                 n_rollouts());
        l.child = script;
        run_load(&l);
        print_row("systemd, socket + restart", &l);
        free(l.reqs);
}

/* ---- main ------------------------------------------------------------------------------- */

static void cleanup(void) {
        if (rollouts > 0) {
                kill(rollouts, SIGTERM);
                waitpid(rollouts, NULL, 0);
                rollouts = -1;
        }
        if (tendd > 0) {
                undeploy();
                stop_tendd();
        }
        if (units_written) {
                units_written = false;
                if (system("systemctl --user stop bench-web.service bench-web.socket") != 0)
                        fprintf(stderr, "bench-rollout: could not stop bench-web\n");
                char rm[2 * PATH_MAX + 128];
                snprintf(rm, sizeof rm,
                         "rm -f '%s/bench-web.socket' '%s/bench-web.service' && "
                         "systemctl --user daemon-reload",
                         unitdir, unitdir);
                if (system(rm) != 0)
                        fprintf(stderr, "bench-rollout: could not remove the units\n");
        }
        if (dir[0]) {
                char rm[128];
                snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
                if (system(rm) != 0)
                        fprintf(stderr, "bench-rollout: could not remove %s\n", dir);
                dir[0] = 0;
        }
}

static void find_bindir(void) {
        if (bench_find_bindir(bindir, sizeof bindir) < 0)
                die("cannot find myself");
}

int main(int argc, char **argv) {
        const char *only = NULL;
        bool tend_too, systemd_too;

        for (int i = 1; i < argc; i++) {
                if (!strcmp(argv[i], "--quick"))
                        quick = true;
                else if (!strcmp(argv[i], "--only") && i + 1 < argc &&
                         (!strcmp(argv[i + 1], "held") || !strcmp(argv[i + 1], "leased") ||
                          !strcmp(argv[i + 1], "systemd")))
                        only = argv[++i];
                else {
                        fprintf(stderr,
                                "Usage: bench-rollout [--quick] [--only held|leased|systemd]\n");
                        return 2;
                }
        }
        main_pid = getpid();
        find_bindir();
        signal(SIGPIPE, SIG_IGN);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        snprintf(dir, sizeof dir, "/tmp/tend-rollout-XXXXXX");
        if (!mkdtemp(dir))
                die("mkdtemp: %s", strerror(errno));
        snprintf(sock, sizeof sock, "%s/tend.sock", dir);
        tend_too = !only || strcmp(only, "systemd");
        systemd_too = (!only || !strcmp(only, "systemd")) && getenv("TEND_SYSTEMD_HARNESS");

        print_header();
        if (tend_too) {
                start_tendd();
                if (!only || !strcmp(only, "held"))
                        bench_tend(true);
                if (!only || !strcmp(only, "leased"))
                        bench_tend(false);
                stop_tendd();
        }
        /* Without --only, systemd's only where it can run: make bench runs it
         * apart, under the harness. */
        if (systemd_too || (only && !strcmp(only, "systemd")))
                bench_systemd();
        if (tend_too || systemd_too)
                printf("  %d requests/s, each on a new connection, from %.1f s of steady state "
                       "to the end of\n"
                       "  the last of %u updates; latency as curl measures it, of the requests "
                       "that succeeded.\n",
                       RATE, steady_ms() / 1000.0, n_rollouts());
        if (tend_too)
                printf("  tend: rolling updates of 3 replicas (maxSurge 1, maxUnavailable 0), "
                       "new pods ready\n"
                       "  after 0.5 s, old ones drain 1 s. held: tend.io/listen, one socket "
                       "for every pod of\n"
                       "  every revision, ready by READY=1. leased: a port per pod, ready by "
                       "readinessProbe;\n"
                       "  the client reads the Ready pods from the API every 100 ms and sends "
                       "round-robin\n"
                       "  among them (client-side balancing with service discovery).\n");
        if (systemd_too)
                printf("  systemd: a socket unit and a Type=notify service of the same program "
                       "(ready after\n"
                       "  0.5 s, drain 1 s), `systemctl --user restart` %u times: each waits for "
                       "READY=1; the\n"
                       "  socket queues connections while no process accepts.\n",
                       n_rollouts());
        cleanup();
        return 0;
}
