/* SPDX-License-Identifier: MIT */

/*
 * tend-chaos: a seeded chaos test of the real tendd and real processes.
 *
 * Steps drawn from a seed: applies of four deployments (templates changed so
 * that rollouts happen, replicas 0-6, maxSurge/maxUnavailable varied with
 * maxSurge 0 among them, Recreate, a readiness probe that passes after a
 * second), rollout undo, scale, hand-scaling a ReplicaSet (old or new), pod
 * deletes, pause/resume, kill -9 of one pod's process or of many, and
 * kill -9 or SIGTERM of tendd itself (one right after an acknowledged apply),
 * which is then started again on the same state dir.
 *
 * Between steps and at a steady rate (every 40 ms while the driver waits) it
 * samples the API and /proc and checks:
 *   1 ack       every write that got a 2xx is what the API shows, across
 *               restarts (replicas, template, strategy, paused);
 *   2 bound     the live bound (check_bound(): the rule being decided);
 *   3 orphan    once converged, processes and running pods are 1:1;
 *     converge  and it does converge, within a timeout;
 *   4 pid       a pod running before a restart keeps its pid after it;
 *   5 crash     tendd never exits unless the driver made it (and SIGTERM
 *               gives exit 0), and no sanitizer report in its log.
 *
 * The step sequence depends on the seed alone: step i draws its numbers from
 * a generator seeded with (seed, i) and nothing it observes changes the draws
 * (a pod "number k" is the k-th, modulo how many there are then). Timing,
 * and so what the steps meet, may differ between runs.
 *
 *   tend-chaos [--seed N] [--steps N] [--bin DIR] [--keep-going] [-v]
 *   env: CHAOS_SEED, CHAOS_STEPS, CHAOS_BOUND=warn (rule 2 reported, not
 *        failed), CHAOS_KEEP_GOING=1, CHAOS_VERBOSE=1, CHAOS_KEEP=1 (keep the
 *        temporary directory), TEND_BIN_DIR (where tendd is).
 *
 * Exit: 0 all held; 1 a violation (the seed and step that reproduce it are
 * printed, with the tail of the step log); 2 usage or set-up trouble.
 */

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tend/base.h"

#define NDEP 4
#define STEPLOG 40
#define MSEC 1000ULL /* usec */
#define SAMPLE_EVERY_MS 40
#define CONVERGE_TIMEOUT_MS 45000
#define UP_TIMEOUT_MS 30000
#define TERM_TIMEOUT_MS 20000

/* ---- violations ----------------------------------------------------------------------------- */

typedef enum vclass {
        V_ACK,
        V_BOUND,
        V_CONVERGE,
        V_ORPHAN,
        V_PID,
        V_CRASH,
        _V_MAX,
} vclass;

static const char *const vclass_name[_V_MAX] = {
        [V_ACK] = "ack",       [V_BOUND] = "bound", [V_CONVERGE] = "converge",
        [V_ORPHAN] = "orphan", [V_PID] = "pid",     [V_CRASH] = "crash",
};
static const char *const vclass_what[_V_MAX] = {
        [V_ACK] = "rule 1: an acknowledged write is not what the API shows",
        [V_BOUND] = "rule 2: the live bound",
        [V_CONVERGE] = "not converged after a quiet period",
        [V_ORPHAN] = "rule 3: processes and running pods are not 1:1",
        [V_PID] = "rule 4: a pod's pid changed across a tendd restart",
        [V_CRASH] = "rule 5: tendd exited on its own (or unclean exit, sanitizer report)",
};

static struct {
        uint64_t seed;
        unsigned steps;
        bool bound_warn, keep_going, verbose, keep_tmp;
        char bindir[PATH_MAX], testprog[PATH_MAX + 32], tendd[PATH_MAX + 32];
} opt;

static char tmpdir[64], sock[128], statedir[128], logpath[128];
static pid_t tendd = -1;
static bool tendd_asan;
static off_t tendd_log_from; /* where the running tendd's lines begin in logpath */
static unsigned step, steps_done;
static int watchdog_fd = -1;
static unsigned nviol[_V_MAX], printed_tails;
static bool failed;
static unsigned first_fail_step;
static unsigned n_kill9, n_term, n_restarts, n_samples, n_skipped, n_podkills, n_quiet;
static double conv_ms[4096], up_ms[4096];
static size_t n_conv, n_up, n_noconv;
static usec_t t_start;
static volatile sig_atomic_t interrupted;

static char steplog[STEPLOG][320];
static unsigned steplog_n;

static void log_step(const char *fmt, ...) _printf_(1, 2);
static void log_step(const char *fmt, ...) {
        char *line = steplog[steplog_n++ % STEPLOG];
        int k = snprintf(line, sizeof steplog[0], "%5u %7.2f ", step,
                         (double) (now_monotonic() - t_start) / 1e6);
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(line + k, sizeof steplog[0] - (size_t) k, fmt, ap);
        va_end(ap);
        if (opt.verbose) {
                printf("  %s\n", line);
                fflush(stdout);
        }
}

static void print_steplog_tail(unsigned n) {
        unsigned from = steplog_n > n ? steplog_n - n : 0;

        printf("  step log (last %u):\n", steplog_n - from);
        for (unsigned i = from; i < steplog_n; i++)
                printf("    %s\n", steplog[i % STEPLOG]);
}

static void finish(int code) _noreturn_;

/* A violation of class c. Rule 2 in warn mode is reported and counted,
 * and does not fail the run; any other stops the run (or, with
 * --keep-going, fails it at the end). */
static void violation(vclass c, const char *fmt, ...) _printf_(2, 3);
static void violation(vclass c, const char *fmt, ...) {
        bool warn = c == V_BOUND && opt.bound_warn;
        va_list ap;

        nviol[c]++;
        printf("%s[%s] seed %" PRIu64 " step %u: ",
               warn ? "WARNING (CHAOS_BOUND=warn) " : "VIOLATION", vclass_name[c], opt.seed, step);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
        if (!warn && !failed)
                first_fail_step = MAX(step, 1u);
        if (!warn)
                failed = true;
        if (!warn || printed_tails < 3) {
                printed_tails++;
                printf("  reproduce: tend-chaos --seed %" PRIu64 " --steps %u (%s)\n", opt.seed,
                       MAX(step, 1u), vclass_what[c]);
                print_steplog_tail(12);
        }
        fflush(stdout);
        if (!warn && !opt.keep_going)
                finish(1);
}

/* ---- time and randomness ----------------------------------------------------------------------
 */

static void sleep_ms(unsigned ms) {
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long) (ms % 1000) * 1000000L };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR && !interrupted)
                ;
}

static uint64_t splitmix(uint64_t *s) {
        uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
        return z ^ (z >> 31);
}

/* A step's numbers: drawn from (seed, step) alone, all of them whatever
 * the step turns out to use, so that no observation shifts a later draw. */
#define NDRAWS 12
typedef struct draws {
        uint64_t r[NDRAWS];
} draws;

static draws draw_step(unsigned i) {
        uint64_t s = opt.seed ^ ((uint64_t) i * 0xD1B54A32D192ED03ULL);
        draws d;

        for (size_t k = 0; k < NDRAWS; k++)
                d.r[k] = splitmix(&s);
        return d;
}

/* ---- the model: what the driver wrote and got acknowledged ------------------------------------
 */

typedef struct dspec {
        bool exists;
        int replicas;
        int ver; /* the template: CHAOS_VER (odd: sleep, even: ignore SIGTERM); 0: unknown */
        bool probe;
        bool paused;
        bool recreate;
        char surge[8], unav[8];
} dspec;

typedef struct dmodel {
        dspec cur;
        bool have_alt; /* a write whose answer was lost: either is right */
        dspec alt;
        int last_ver; /* the template to keep when an apply does not change it */
        bool last_probe;
        /* rule 2 across samples */
        bool have_prev;
        int prev_live, prev_procs, prev_b;
        int b_writes; /* the largest bound a write since the last sample asked for */
        usec_t over_since;
        long long over_gen;
} dmodel;

static dmodel model[NDEP];

/* An IntOrString of the strategy, resolved as Kubernetes does: a percentage
 * of replicas, rounded up for maxSurge and down for maxUnavailable. */
static int resolve(const char *v, int replicas, bool up) {
        size_t n = strlen(v);
        int x = atoi(v);

        if (n > 0 && v[n - 1] == '%')
                return up ? (replicas * x + 99) / 100 : replicas * x / 100;
        return x;
}

/* B: replicas + resolved maxSurge (Recreate: replicas). */
static int bound_of(const dspec *s) {
        if (!s->exists)
                return 0;
        if (s->recreate)
                return s->replicas;
        return s->replicas + resolve(s->surge, s->replicas, true);
}

/* ---- what the API shows ------------------------------------------------------------------------
 */

typedef struct dobs {
        dspec spec;
        long long gen, obs_gen;
        int st_replicas, st_updated, st_ready, st_available;
} dobs;

typedef struct pobs {
        char name[96], uid[64];
        int dep; /* -1: not one of ours */
        char phase[16];
        bool terminating;
        pid_t pid;
        long long rv;
} pobs;

typedef struct pproc {
        pid_t pid;
        char uid[64];
        int dep;
        unsigned long long start;
} pproc;

static CURL *curl;

static void *mfree(void *p) {
        free(p);
        return NULL;
}

static size_t on_body(char *p, size_t size, size_t n, void *u) {
        return fwrite(p, size, n, u);
}

/* One request to tendd. Returns the HTTP status, 0 when there was no
 * answer (tendd away or killed meanwhile); the body as JSON in *ret. */
static long http(const char *method, const char *path, const char *ctype, const char *body,
                 json_t **ret) {
        char url[512], *out = NULL;
        size_t len = 0;
        struct curl_slist *hdr = NULL;
        FILE *f;
        long code = 0;
        CURLcode rc;

        if (ret)
                *ret = NULL;
        f = open_memstream(&out, &len);
        if (!f)
                return 0;
        snprintf(url, sizeof url, "http://localhost%s", path);
        curl_easy_reset(curl);
        curl_easy_setopt(curl, CURLOPT_UNIX_SOCKET_PATH, sock);
        curl_easy_setopt(curl, CURLOPT_URL, url);
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, f);
        curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, 15000L);
        curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
        if (body) {
                char h[128];
                snprintf(h, sizeof h, "Content-Type: %s", ctype ? ctype : "application/json");
                hdr = curl_slist_append(hdr, h);
                curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdr);
                curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
        }
        rc = curl_easy_perform(curl);
        fclose(f);
        curl_slist_free_all(hdr);
        if (rc == CURLE_OK)
                curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
        if (ret && code && out)
                *ret = json_loadb(out, len, 0, NULL);
        free(out);
        return code;
}

/* A member by dotted path ("metadata.name"), borrowed; NULL if absent. */
static json_t *jget(json_t *j, const char *path) {
        char key[64];
        const char *dot;

        while ((dot = strchr(path, '.'))) {
                snprintf(key, sizeof key, "%.*s", (int) (dot - path), path);
                j = json_object_get(j, key);
                path = dot + 1;
        }
        return json_object_get(j, path);
}

static const char *jstr(json_t *j, const char *path) {
        return json_string_value(jget(j, path));
}

static long long jint(json_t *j, const char *path) {
        json_t *v = jget(j, path);
        if (json_is_string(v))
                return atoll(json_string_value(v));
        return json_integer_value(v);
}

static int dep_index(const char *name) {
        if (name && name[0] == 'd' && name[1] >= '0' && name[1] < '0' + NDEP && !name[2])
                return name[1] - '0';
        return -1;
}

static void intstr(json_t *v, char *buf, size_t len, const char *dflt) {
        if (json_is_integer(v))
                snprintf(buf, len, "%lld", (long long) json_integer_value(v));
        else if (json_is_string(v))
                snprintf(buf, len, "%s", json_string_value(v));
        else
                snprintf(buf, len, "%s", dflt);
}

/* The template's CHAOS_VER and whether it has the probe. */
static void template_of(json_t *tmpl, int *ver, bool *probe) {
        json_t *c = json_array_get(jget(tmpl, "spec.containers"), 0), *e;
        size_t i;

        *ver = -1;
        json_array_foreach (json_object_get(c, "env"), i, e)
                if (streq_ptr(jstr(e, "name"), "CHAOS_VER"))
                        *ver = atoi(strempty(jstr(e, "value")));
        *probe = json_object_get(c, "readinessProbe") != NULL;
}

static void dobs_parse(json_t *it, dobs *d) {
        json_t *ru = jget(it, "spec.strategy.rollingUpdate");

        *d = (dobs){ .spec.exists = true };
        d->spec.replicas = (int) jint(it, "spec.replicas");
        d->spec.paused = json_is_true(jget(it, "spec.paused"));
        d->spec.recreate = streq_ptr(jstr(it, "spec.strategy.type"), "Recreate");
        intstr(json_object_get(ru, "maxSurge"), d->spec.surge, sizeof d->spec.surge, "25%");
        intstr(json_object_get(ru, "maxUnavailable"), d->spec.unav, sizeof d->spec.unav, "25%");
        template_of(jget(it, "spec.template"), &d->spec.ver, &d->spec.probe);
        d->gen = jint(it, "metadata.generation");
        d->obs_gen = jint(it, "status.observedGeneration");
        d->st_replicas = (int) jint(it, "status.replicas");
        d->st_updated = (int) jint(it, "status.updatedReplicas");
        d->st_ready = (int) jint(it, "status.readyReplicas");
        d->st_available = (int) jint(it, "status.availableReplicas");
}

/* All deployments; <0: no answer. */
static int deps_get(dobs d[NDEP]) {
        json_t *j, *it;
        size_t i;

        if (http("GET", "/apis/apps/v1/namespaces/default/deployments", NULL, NULL, &j) != 200) {
                json_decref(j);
                return -EAGAIN;
        }
        for (int k = 0; k < NDEP; k++)
                d[k] = (dobs){};
        json_array_foreach (json_object_get(j, "items"), i, it) {
                int k = dep_index(jstr(it, "metadata.name"));
                if (k >= 0)
                        dobs_parse(it, &d[k]);
        }
        json_decref(j);
        return 0;
}

static bool terminal(const pobs *p) {
        return streq(p->phase, "Succeeded") || streq(p->phase, "Failed");
}

/* All pods (a new array in *ret); <0: no answer. */
static int pods_get(pobs **ret, size_t *ret_n) {
        json_t *j, *items, *it;
        pobs *v;
        size_t i, n = 0;

        *ret = NULL;
        *ret_n = 0;
        if (http("GET", "/api/v1/namespaces/default/pods", NULL, NULL, &j) != 200) {
                json_decref(j);
                return -EAGAIN;
        }
        items = json_object_get(j, "items");
        v = calloc(json_array_size(items) + 1, sizeof *v);
        if (!v) {
                json_decref(j);
                return -ENOMEM;
        }
        json_array_foreach (items, i, it) {
                pobs *p = &v[n++];
                const char *cid = jstr(json_array_get(jget(it, "status.containerStatuses"), 0),
                                       "containerID");
                snprintf(p->name, sizeof p->name, "%s", strempty(jstr(it, "metadata.name")));
                snprintf(p->uid, sizeof p->uid, "%s", strempty(jstr(it, "metadata.uid")));
                snprintf(p->phase, sizeof p->phase, "%s", strempty(jstr(it, "status.phase")));
                p->dep = dep_index(jstr(it, "metadata.labels.app"));
                p->terminating = jget(it, "metadata.deletionTimestamp") != NULL;
                p->pid = cid && startswith(cid, "process://") ? atoi(cid + 10) : 0;
                p->rv = jint(it, "metadata.resourceVersion");
        }
        json_decref(j);
        *ret = v;
        *ret_n = n;
        return 0;
}

/* ---- /proc ---------------------------------------------------------------------------------- */

static ssize_t read_small(const char *path, char *buf, size_t size) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        size_t got = 0;

        if (fd < 0)
                return -errno;
        while (got + 1 < size) {
                ssize_t k = read(fd, buf + got, size - 1 - got);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                got += (size_t) k;
        }
        close(fd);
        buf[got] = 0;
        return (ssize_t) got;
}

/* The start time of pid (clock ticks since boot), 0 if gone or a zombie. */
static unsigned long long proc_start(pid_t pid) {
        char path[64], buf[1024], state;
        unsigned long long start = 0;
        const char *p;

        snprintf(path, sizeof path, "/proc/%d/stat", (int) pid);
        if (read_small(path, buf, sizeof buf) <= 0 || !(p = strrchr(buf, ')')))
                return 0;
        /* after ") ": state (field 3) ... starttime (field 22) */
        if (sscanf(p + 2,
                   "%c %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s %*s "
                   "%*s %*s %llu",
                   &state, &start) != 2)
                return 0;
        return state == 'Z' || state == 'X' ? 0 : start;
}

/* Live processes of our pods: tend-testprog with this run's marker in its
 * environment, sorted by pid; a new array in *ret. Zombies are not live
 * (their environ reads empty, and proc_start() says 0). */
static size_t proc_scan_ex(pproc **ret, bool any_program) {
        static char env[64 * 1024];
        char marker[128], path[64], comm[32];
        size_t n = 0, alloc = 0;
        pproc *v = NULL;
        DIR *d = opendir("/proc");
        struct dirent *de;

        snprintf(marker, sizeof marker, "CHAOS_MARKER=%s", tmpdir);
        while (d && (de = readdir(d))) {
                char *end;
                long pid = strtol(de->d_name, &end, 10);
                ssize_t len;
                pproc p = {};
                bool ours = false;

                if (*end || pid <= 0)
                        continue;
                snprintf(path, sizeof path, "/proc/%ld/environ", pid);
                len = read_small(path, env, sizeof env);
                if (len <= 0)
                        continue;
                p.dep = -1;
                for (const char *e = env; e < env + len; e += strlen(e) + 1) {
                        if (streq(e, marker))
                                ours = true;
                        else if (startswith(e, "POD_UID="))
                                snprintf(p.uid, sizeof p.uid, "%s", e + 8);
                        else if (startswith(e, "CHAOS_DEP="))
                                p.dep = dep_index(e + 10);
                }
                if (!ours)
                        continue;
                /* An exec probe runs with the pod's environment too: only
                 * the pod's own program counts. */
                snprintf(path, sizeof path, "/proc/%ld/comm", pid);
                if (!any_program && (read_small(path, comm, sizeof comm) <= 0 ||
                                     !startswith(comm, "tend-testprog")))
                        continue;
                p.pid = (pid_t) pid;
                p.start = proc_start(p.pid);
                if (!p.start)
                        continue;
                if (TEND_GROW(v, alloc, n + 1) < 0)
                        break;
                v[n++] = p;
        }
        if (d)
                closedir(d);
        for (size_t a = 1; a < n; a++) /* insertion sort by pid: the order is the draws' */
                for (size_t b = a; b > 0 && v[b - 1].pid > v[b].pid; b--) {
                        pproc t = v[b];
                        v[b] = v[b - 1];
                        v[b - 1] = t;
                }
        *ret = v;
        return n;
}

static size_t proc_scan(pproc **ret) {
        return proc_scan_ex(ret, false);
}

/* Every process with our marker, probes included: at the end. */
static unsigned kill_marked(void) {
        pproc *v;
        size_t n = proc_scan_ex(&v, true);

        for (size_t i = 0; i < n; i++)
                kill(v[i].pid, SIGKILL);
        free(v);
        return (unsigned) n;
}

/* ---- tendd ---------------------------------------------------------------------------------- */

static void watchdog_tell(pid_t pid) {
        if (watchdog_fd >= 0)
                (void) !write(watchdog_fd, &pid, sizeof pid);
}

static void check_log(const char *when) {
        static char buf[1 << 16];
        int fd = open(logpath, O_RDONLY | O_CLOEXEC);
        static const char *const bad[] = { "ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                                           "runtime error:", "UndefinedBehaviorSanitizer" };
        off_t off = tendd_log_from;
        ssize_t k;

        if (fd < 0)
                return;
        /* windows overlap by 64 bytes: a pattern cut in two is found whole */
        while ((k = pread(fd, buf, sizeof buf - 1, off)) > 0) {
                buf[k] = 0;
                for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                        if (memmem(buf, (size_t) k, bad[i], strlen(bad[i]))) {
                                close(fd);
                                violation(V_CRASH,
                                          "sanitizer report in tendd's log (%s): \"%s\"; see %s",
                                          when, bad[i], logpath);
                                return;
                        }
                if (k < (ssize_t) sizeof buf - 1)
                        break;
                off += k - 64;
        }
        close(fd);
}

static void tendd_start(void) {
        struct stat st;
        int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

        if (fd < 0) {
                printf("cannot open %s: %m\n", logpath);
                finish(2);
        }
        tendd_log_from = fstat(fd, &st) == 0 ? st.st_size : 0;
        (void) !write(fd, "---- tendd started by tend-chaos\n", 33);
        tendd = fork();
        if (tendd < 0) {
                printf("fork: %m\n");
                finish(2);
        }
        if (tendd == 0) {
                dup2(fd, 1);
                dup2(fd, 2);
                execl(opt.tendd, opt.tendd, "--state-dir", statedir, "--socket", sock,
                      "--port-range", "47000-47999", "--resync", "5s", (char *) NULL);
                _exit(127);
        }
        close(fd);
        watchdog_tell(tendd);
        n_restarts++;
}

static const char *exit_str(int st, char *buf, size_t len) {
        if (WIFEXITED(st))
                snprintf(buf, len, "exit %d", WEXITSTATUS(st));
        else if (WIFSIGNALED(st))
                snprintf(buf, len, "signal %s%s", sigabbrev_np(WTERMSIG(st)) ?: "?",
                         WCOREDUMP(st) ? " (core)" : "");
        else
                snprintf(buf, len, "status 0x%x", st);
        return buf;
}

static bool tendd_wait_up(usec_t t0);

/* Reaps what has exited: pods of a killed tendd, reparented to us (we
 * are a subreaper, as systemd is for a unit's leftovers), and tendd
 * itself when it goes by itself — a crash. */
static void reap(void) {
        int st;
        pid_t p;

        while ((p = waitpid(-1, &st, WNOHANG)) > 0) {
                char b[64];
                if (p != tendd)
                        continue;
                tendd = -1;
                watchdog_tell(0);
                log_step("tendd exited by itself: %s", exit_str(st, b, sizeof b));
                check_log("after it exited");
                violation(V_CRASH, "tendd exited without being asked to: %s; see %s",
                          exit_str(st, b, sizeof b), logpath);
                /* --keep-going: a new tendd, and on */
                tendd_start();
                (void) tendd_wait_up(now_monotonic());
        }
}

/* Waits until tendd answers; false (and a violation) if it does not. */
static bool tendd_wait_up(usec_t t0) {
        usec_t end = now_monotonic() + UP_TIMEOUT_MS * MSEC;

        while (now_monotonic() < end && !interrupted) {
                reap();
                if (tendd < 0)
                        return false;
                if (http("GET", "/healthz", NULL, NULL, NULL) == 200) {
                        if (n_up < ELEMENTSOF(up_ms))
                                up_ms[n_up++] = (double) (now_monotonic() - t0) / 1e3;
                        return true;
                }
                sleep_ms(20);
        }
        violation(V_CRASH, "tendd (pid %d) did not answer within %d s of its start", (int) tendd,
                  UP_TIMEOUT_MS / 1000);
        return false;
}

/* Stops tendd with sig and waits for it. SIGTERM must end it, with exit 0
 * (with the sanitizer build: no leak either). */
static void tendd_stop(int sig) {
        usec_t end = now_monotonic() + TERM_TIMEOUT_MS * MSEC;
        int st = 0;
        pid_t p = 0;
        char b[64];

        if (tendd < 0)
                return;
        kill(tendd, sig);
        while ((p = waitpid(tendd, &st, WNOHANG)) == 0 && now_monotonic() < end)
                sleep_ms(5);
        if (p == 0) {
                kill(tendd, SIGKILL);
                waitpid(tendd, &st, 0);
                tendd = -1;
                watchdog_tell(0);
                violation(V_CRASH, "tendd did not exit within %d s of SIG%s",
                          TERM_TIMEOUT_MS / 1000, sigabbrev_np(sig));
                return;
        }
        tendd = -1;
        watchdog_tell(0);
        if (sig == SIGTERM && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
                violation(V_CRASH, "tendd ended with %s on SIGTERM (expected exit 0); see %s",
                          exit_str(st, b, sizeof b), logpath);
        if (sig != SIGKILL)
                check_log("after SIGTERM");
}

/* ---- rule 1: nothing acknowledged is lost ---------------------------------------------------- */

static bool spec_eq(const dspec *m, const dspec *o, char *why, size_t len) {
        if (m->exists != o->exists) {
                snprintf(why, len, "%s",
                         m->exists ? "deployment missing" : "unexpected deployment");
                return false;
        }
        if (!m->exists)
                return true;
        if (m->replicas != o->replicas)
                snprintf(why, len, "replicas %d, acknowledged %d", o->replicas, m->replicas);
        else if (m->paused != o->paused)
                snprintf(why, len, "paused %d, acknowledged %d", o->paused, m->paused);
        else if (m->recreate != o->recreate)
                snprintf(why, len, "strategy %s, acknowledged %s",
                         o->recreate ? "Recreate" : "RollingUpdate",
                         m->recreate ? "Recreate" : "RollingUpdate");
        else if (!m->recreate && (!streq(m->surge, o->surge) || !streq(m->unav, o->unav)))
                snprintf(why, len, "maxSurge/maxUnavailable %s/%s, acknowledged %s/%s", o->surge,
                         o->unav, m->surge, m->unav);
        else if (m->ver && (m->ver != o->ver || m->probe != o->probe))
                snprintf(why, len, "template v%d%s, acknowledged v%d%s", o->ver,
                         o->probe ? "+probe" : "", m->ver, m->probe ? "+probe" : "");
        else
                return true;
        return false;
}

static void check_acked(int i, const dobs *o) {
        dmodel *m = &model[i];
        char why[160], why_alt[160];

        if (spec_eq(&m->cur, &o->spec, why, sizeof why)) {
                if (!m->cur.ver && o->spec.exists) /* an undo whose answer was lost: now known */
                        m->cur = o->spec;
                m->have_alt = false;
                return;
        }
        if (m->have_alt && spec_eq(&m->alt, &o->spec, why_alt, sizeof why_alt)) {
                m->cur = o->spec;
                m->have_alt = false;
                return;
        }
        violation(V_ACK, "deployment d%d: %s", i, why);
        m->cur = o->spec; /* reported once */
        m->have_alt = false;
}

/* The driver is about to write s to deployment i: the bound it asks for
 * counts until the next sample. */
static void model_writing(int i, const dspec *s) {
        model[i].b_writes = MAX(model[i].b_writes, bound_of(s));
}

/* The answer of a write: 2xx acknowledged; 0, no answer (it may or may
 * not have happened: either is right until the next look). */
static void model_answered(int i, long code, const dspec *s) {
        if (code >= 200 && code < 300) {
                model[i].cur = *s;
                model[i].have_alt = false;
        } else if (code == 0) {
                model[i].alt = *s;
                model[i].have_alt = true;
        }
}

static const char *spec_str(const dspec *s, char *buf, size_t len);

/* ---- rule 2: the live bound ------------------------------------------------------------------ */

/*
 * What one consistent sample saw of one deployment. live: its pods not
 * Succeeded/Failed, terminating ones included; nonterm: those of them not
 * terminating; procs: live processes carrying its pods (/proc).
 */
typedef struct bound_in {
        int dep;
        int b_now;   /* replicas + resolved maxSurge (Recreate: replicas), this sample */
        int b_allow; /* the largest bound in force since the previous sample */
        int replicas;
        char what[96]; /* the strategy, for the report */
        int live, nonterm, procs;
        bool have_prev;
        int prev_live, prev_procs;
        long long gen;
} bound_in;

/*
 * The rule being decided (docs/architecture.md §4.3), in one place so that it can be
 * changed: whenever live > B, live must not have risen since the previous
 * sample of that deployment — a scale-down or a delete may leave
 * terminating pods above B for their grace period, but no pod may be
 * started while live >= B. B is the largest bound in force since the
 * previous sample (a scale-down between two samples does not make pods
 * started before it violations). The same for the processes in /proc.
 * And pods not terminating stay <= B: reported when it lasts (the pass
 * that acts on a scale-down comes a moment after the write).
 */
static bool check_bound(const bound_in *in) {
        dmodel *m = &model[in->dep];
        usec_t now = now_monotonic();
        unsigned before = nviol[V_BOUND];

        if (in->have_prev && in->live > in->b_allow && in->live > in->prev_live)
                violation(V_BOUND,
                          "deployment d%d: %d pods live (%d terminating), up from %d, > B=%d "
                          "(%s): a pod was started above the bound",
                          in->dep, in->live, in->live - in->nonterm, in->prev_live, in->b_allow,
                          in->what);
        if (in->have_prev && in->procs > in->b_allow && in->procs > in->prev_procs)
                violation(V_BOUND, "deployment d%d: %d processes in /proc, up from %d, > B=%d (%s)",
                          in->dep, in->procs, in->prev_procs, in->b_allow, in->what);
        if (in->nonterm > in->b_now) {
                if (!m->over_since || m->over_gen != in->gen) {
                        m->over_since = now;
                        m->over_gen = in->gen;
                } else if (now - m->over_since > 3000 * MSEC) {
                        violation(
                                V_BOUND,
                                "deployment d%d: %d pods not terminating > B=%d (%s) for over 3 s",
                                in->dep, in->nonterm, in->b_now, in->what);
                        m->over_since = now;
                }
        } else
                m->over_since = 0;
        return nviol[V_BOUND] != before;
}

/* What the sample that broke rule 2 saw of the deployment: for the
 * diagnosis. */
static void print_bound_detail(int dep, const pobs *pods, size_t np, const pproc *procs,
                               size_t nproc) {
        printf("  d%d in that sample: pods", dep);
        for (size_t k = 0; k < np; k++)
                if (pods[k].dep == dep && !terminal(&pods[k]))
                        printf(" %s(%s%s pid %d)", pods[k].name + 3, pods[k].phase,
                               pods[k].terminating ? " terminating" : "", (int) pods[k].pid);
        printf("; processes");
        for (size_t k = 0; k < nproc; k++)
                if (procs[k].dep == dep) {
                        const pobs *pod = NULL;
                        for (size_t i = 0; i < np; i++)
                                if (streq(pods[i].uid, procs[k].uid))
                                        pod = &pods[i];
                        printf(" %d(%s%s%s)", (int) procs[k].pid, pod ? pod->name + 3 : "no pod",
                               pod && terminal(pod) ? " " : "",
                               pod && terminal(pod) ? pod->phase : "");
                }
        printf("\n");
}

/* ---- sampling ------------------------------------------------------------------------------ */

/*
 * One consistent look: the deployments, every pod once, /proc, the
 * deployments again; a deployment whose generation or replicas changed
 * meanwhile is left out of this sample. Runs rules 1 and 2. false: tendd
 * did not answer.
 */
static bool sample(void) {
        dobs a[NDEP], b[NDEP];
        _cleanup_free_ pobs *pods = NULL;
        _cleanup_free_ pproc *procs = NULL;
        size_t np = 0, nproc;

        reap();
        if (tendd < 0 || deps_get(a) < 0 || pods_get(&pods, &np) < 0)
                return false;
        nproc = proc_scan(&procs);
        if (deps_get(b) < 0)
                return false;
        n_samples++;
        for (int i = 0; i < NDEP; i++) {
                dmodel *m = &model[i];
                bound_in in = { .dep = i };

                check_acked(i, &b[i]);
                if (!a[i].spec.exists || !b[i].spec.exists || a[i].gen != b[i].gen ||
                    a[i].spec.replicas != b[i].spec.replicas) {
                        n_skipped++;
                        continue;
                }
                for (size_t k = 0; k < np; k++)
                        if (pods[k].dep == i && !terminal(&pods[k])) {
                                in.live++;
                                in.nonterm += !pods[k].terminating;
                        }
                for (size_t k = 0; k < nproc; k++)
                        in.procs += procs[k].dep == i;
                in.b_now = bound_of(&b[i].spec);
                in.b_allow = MAX(in.b_now, MAX(m->b_writes, m->have_prev ? m->prev_b : 0));
                in.replicas = b[i].spec.replicas;
                spec_str(&b[i].spec, in.what, sizeof in.what);
                in.have_prev = m->have_prev;
                in.prev_live = m->prev_live;
                in.prev_procs = m->prev_procs;
                in.gen = b[i].gen;
                if (check_bound(&in))
                        print_bound_detail(i, pods, np, procs, nproc);
                m->have_prev = true;
                m->prev_live = in.live;
                m->prev_procs = in.procs;
                m->prev_b = in.b_now;
                m->b_writes = 0;
        }
        return true;
}

/* Waits ms, sampling every SAMPLE_EVERY_MS (at least once). */
static void sample_for(unsigned ms) {
        usec_t end = now_monotonic() + ms * MSEC;

        do {
                sample();
                if (now_monotonic() + SAMPLE_EVERY_MS * MSEC > end)
                        break;
                sleep_ms(SAMPLE_EVERY_MS);
        } while (!interrupted);
        if (now_monotonic() < end)
                sleep_ms((unsigned) ((end - now_monotonic()) / MSEC));
}

/* ---- rule 3: converged, then 1:1 ------------------------------------------------------------- */

static bool dep_converged(int i, const dobs *d, const pobs *pods, size_t np, char *why,
                          size_t len) {
        int running = 0;

        if (!d->spec.exists)
                return true;
        for (size_t k = 0; k < np; k++) {
                const pobs *p = &pods[k];
                if (p->dep != i || terminal(p))
                        continue;
                if (p->terminating || !streq(p->phase, "Running") || p->pid <= 0) {
                        snprintf(why, len, "d%d: pod %s %s%s", i, p->name, p->phase,
                                 p->terminating ? " (terminating)" : "");
                        return false;
                }
                running++;
        }
        if (d->obs_gen < d->gen) {
                snprintf(why, len, "d%d: observedGeneration %lld < generation %lld", i, d->obs_gen,
                         d->gen);
                return false;
        }
        if (running != d->st_replicas) {
                snprintf(why, len, "d%d: %d running, status.replicas %d", i, running,
                         d->st_replicas);
                return false;
        }
        if (d->spec.paused)
                return true; /* a paused rollout stands where it is */
        if (d->st_replicas != d->spec.replicas || d->st_updated != d->spec.replicas ||
            d->st_available != d->spec.replicas) {
                snprintf(why, len, "d%d: replicas %d: status %d, updated %d, available %d", i,
                         d->spec.replicas, d->st_replicas, d->st_updated, d->st_available);
                return false;
        }
        return true;
}

/* Waits (sampling) until every deployment has converged. The time it
 * took, in ms, or <0 (and a violation) on timeout. */
static double converge(usec_t t0) {
        usec_t end = now_monotonic() + CONVERGE_TIMEOUT_MS * MSEC;
        char why[256] = "tendd does not answer";

        while (now_monotonic() < end && !interrupted) {
                dobs d[NDEP];
                _cleanup_free_ pobs *pods = NULL;
                size_t np = 0;
                bool all = true;

                sample();
                if (tendd < 0)
                        return -1;
                if (deps_get(d) == 0 && pods_get(&pods, &np) == 0) {
                        for (int i = 0; i < NDEP && all; i++)
                                all = dep_converged(i, &d[i], pods, np, why, sizeof why);
                        if (all)
                                return (double) (now_monotonic() - t0) / 1e3;
                }
                sleep_ms(SAMPLE_EVERY_MS);
        }
        n_noconv++;
        violation(V_CONVERGE, "not converged %d s after the last step: %s",
                  CONVERGE_TIMEOUT_MS / 1000, why);
        return -1;
}

static bool same_pods(const pobs *a, size_t na, const pobs *b, size_t nb) {
        if (na != nb)
                return false;
        for (size_t i = 0; i < na; i++)
                if (!streq(a[i].uid, b[i].uid) || a[i].rv != b[i].rv)
                        return false;
        return true;
}

#define MISMATCH(...) (void) tend_buf_addf(out, __VA_ARGS__)

/* One look for rule 3: the mismatches, one a line, into out; how many.
 * <0: no consistent look (the API changed under it, or no answer). */
static int one_to_one_pass(tend_buf *out) {
        _cleanup_free_ pobs *pods = NULL;
        _cleanup_free_ pproc *procs = NULL;
        size_t np = 0, nproc = 0;
        bool stable = false;
        int n = 0;

        for (int attempt = 0; attempt < 5 && !stable; attempt++) {
                _cleanup_free_ pobs *again = NULL;
                size_t na = 0;
                pods = mfree(pods);
                procs = mfree(procs);
                if (pods_get(&pods, &np) < 0)
                        return -EAGAIN;
                nproc = proc_scan(&procs);
                if (pods_get(&again, &na) < 0)
                        return -EAGAIN;
                stable = same_pods(pods, np, again, na);
        }
        if (!stable)
                return -EAGAIN;
        for (size_t k = 0; k < nproc; k++) {
                const pproc *pr = &procs[k];
                const pobs *pod = NULL;
                unsigned same = 0;
                for (size_t i = 0; i < np; i++)
                        if (streq(pods[i].uid, pr->uid))
                                pod = &pods[i];
                for (size_t i = 0; i < nproc; i++)
                        same += streq(procs[i].uid, pr->uid);
                if (!pod)
                        MISMATCH("pid %d (d%d, POD_UID=%s) runs for no pod the API lists\n",
                                 (int) pr->pid, pr->dep, pr->uid);
                else if (!streq(pod->phase, "Running") || pod->terminating)
                        MISMATCH("pid %d runs for pod %s, which the API shows %s%s\n",
                                 (int) pr->pid, pod->name, pod->phase,
                                 pod->terminating ? " (terminating)" : "");
                else if (pod->pid != pr->pid)
                        MISMATCH("pid %d carries pod %s, whose pid in the API is %d%s\n",
                                 (int) pr->pid, pod->name, (int) pod->pid,
                                 same > 1 ? " (a duplicate)" : "");
                else if (same > 1)
                        MISMATCH("%u processes carry pod %s\n", same, pod->name);
                else
                        continue;
                n++;
        }
        for (size_t i = 0; i < np; i++) {
                const pobs *pod = &pods[i];
                bool found = false;
                if (pod->dep < 0 || !streq(pod->phase, "Running"))
                        continue;
                for (size_t k = 0; k < nproc; k++)
                        found |= procs[k].pid == pod->pid && streq(procs[k].uid, pod->uid);
                if (!found) {
                        MISMATCH("pod %s is Running with pid %d, which is not its process\n",
                                 pod->name, (int) pod->pid);
                        n++;
                }
        }
        return n;
}

/*
 * Rule 3, on a converged tendd: every live process of ours is the process
 * of one running pod (by POD_UID and pid), and every running pod has its
 * process. A pod is Running as soon as its exec succeeded, a moment before
 * /proc shows the new program's name and environment: a mismatch counts
 * when it is still there 4 looks and half a second later.
 */
static void check_one_to_one(void) {
        _cleanup_(tend_buf_freep) tend_buf out = TEND_BUF_INIT(64 * 1024);
        int n = 0;

        for (int attempt = 0; attempt < 4; attempt++) {
                if (attempt)
                        sleep_ms(150);
                tend_buf_reset(&out);
                n = one_to_one_pass(&out);
                if (n == 0)
                        return;
        }
        if (n < 0)
                return;
        for (char *line = (char *) tend_buf_str(&out), *nl; *line; line = nl + 1) {
                nl = strchr(line, '\n');
                if (!nl)
                        break;
                *nl = 0;
                violation(V_ORPHAN, "%s", line);
        }
}

/* A quiet period, then convergence, then rule 3. */
static void quiet(unsigned ms) {
        double t;

        n_quiet++;
        sample_for(ms);
        t = converge(now_monotonic());
        log_step("converged in %.0f ms", t);
        if (t >= 0)
                check_one_to_one();
}

/* ---- rule 4: pids kept across restarts ------------------------------------------------------- */

typedef struct kept {
        char uid[64], name[96];
        pid_t pid;
        unsigned long long start;
        bool killed;
} kept;

/* The running pods, with their processes' start times: before a kill. */
static size_t kept_snapshot(kept **ret) {
        _cleanup_free_ pobs *pods = NULL;
        size_t np = 0, n = 0;
        kept *v;

        *ret = NULL;
        if (pods_get(&pods, &np) < 0 || !(v = calloc(np + 1, sizeof *v)))
                return 0;
        for (size_t i = 0; i < np; i++) {
                if (pods[i].dep < 0 || !streq(pods[i].phase, "Running") || pods[i].pid <= 0)
                        continue;
                v[n] = (kept){ .pid = pods[i].pid, .start = proc_start(pods[i].pid) };
                snprintf(v[n].uid, sizeof v[n].uid, "%s", pods[i].uid);
                snprintf(v[n].name, sizeof v[n].name, "%s", pods[i].name);
                n += v[n].start != 0;
        }
        *ret = v;
        return n;
}

static void kept_killed(kept *v, size_t n, pid_t pid) {
        for (size_t i = 0; i < n; i++)
                if (v[i].pid == pid)
                        v[i].killed = true;
}

/* After the restart: a pod whose process still runs (the same process: pid
 * and start time) shows that pid, and is not given up as lost. The API is
 * read first: a process alive after the read was alive during it. */
static void check_kept(const kept *v, size_t n) {
        _cleanup_free_ pobs *pods = NULL;
        size_t np = 0;

        if (pods_get(&pods, &np) < 0)
                return;
        for (size_t i = 0; i < n; i++) {
                const pobs *pod = NULL;
                if (v[i].killed)
                        continue;
                for (size_t k = 0; k < np; k++)
                        if (streq(pods[k].uid, v[i].uid))
                                pod = &pods[k];
                if (!pod || proc_start(v[i].pid) != v[i].start)
                        continue; /* deleted since (then rule 3 sees to its process), or gone */
                if (pod->pid != v[i].pid)
                        violation(V_PID,
                                  "pod %s ran as pid %d before the restart and still does, "
                                  "but the API shows pid %d (%s)",
                                  pod->name, (int) v[i].pid, (int) pod->pid, pod->phase);
                else if (terminal(pod))
                        violation(V_PID, "pod %s is %s after the restart, but its process %d runs",
                                  pod->name, pod->phase, (int) v[i].pid);
        }
}

/* ---- steps ---------------------------------------------------------------------------------- */

static json_t *intstr_json(const char *s) {
        size_t n = strlen(s);
        return n && s[n - 1] == '%' ? json_string(s) : json_integer(atoi(s));
}

static char *deployment_body(int i, const dspec *s) {
        char name[8], ver[16];
        json_t *env, *container, *strategy, *d;
        char *out;

        snprintf(name, sizeof name, "d%d", i);
        snprintf(ver, sizeof ver, "%d", s->ver);
        env = json_pack("[{s:s, s:s}, {s:s, s:s}, {s:s, s:s}]", "name", "CHAOS_MARKER", "value",
                        tmpdir, "name", "CHAOS_DEP", "value", name, "name", "CHAOS_VER", "value",
                        ver);
        container = json_pack("{s:s, s:[s, s], s:o}", "name", "main", "command", opt.testprog,
                              s->ver % 2 ? "sleep" : "ignore-term", "env", env);
        if (s->probe)
                json_object_set_new(container, "readinessProbe",
                                    json_pack("{s:{s:[s]}, s:i, s:i}", "exec", "command",
                                              "/bin/true", "initialDelaySeconds", 1,
                                              "periodSeconds", 1));
        strategy = s->recreate ? json_pack("{s:s}", "type", "Recreate")
                               : json_pack("{s:s, s:{s:o, s:o}}", "type", "RollingUpdate",
                                           "rollingUpdate", "maxSurge", intstr_json(s->surge),
                                           "maxUnavailable", intstr_json(s->unav));
        /* Two with the crash-loop back-off off, two with a short one: kills
         * come often, and a long back-off would outlast the quiet checks. */
        d = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:i, s:{s:{s:s}}, s:o, "
                      "s:{s:{s:{s:s}}, s:{s:i, s:[o]}}}}",
                      "apiVersion", "apps/v1", "kind", "Deployment", "metadata", "name", name,
                      "annotations", "tend.io/crash-backoff",
                      i < 2 ? "off" : "after=3,initial=1s,max=2s", "spec", "replicas", s->replicas,
                      "selector", "matchLabels", "app", name, "strategy", strategy, "template",
                      "metadata", "labels", "app", name, "spec", "terminationGracePeriodSeconds", 1,
                      "containers", container);
        out = json_dumps(d, JSON_COMPACT);
        json_decref(d);
        return out;
}

static const char *spec_str(const dspec *s, char *buf, size_t len) {
        if (s->recreate)
                snprintf(buf, len, "replicas=%d v%d%s Recreate%s", s->replicas, s->ver,
                         s->probe ? "+probe" : "", s->paused ? " paused" : "");
        else
                snprintf(buf, len, "replicas=%d v%d%s surge=%s unav=%s%s", s->replicas, s->ver,
                         s->probe ? "+probe" : "", s->surge, s->unav, s->paused ? " paused" : "");
        return buf;
}

/* The spec an apply step writes: replicas, maybe a new template, a strategy. */
static dspec apply_spec(int i, const draws *d) {
        static const char *const surges[] = { "0", "1", "2", "25%", "50%" };
        static const char *const unavs[] = { "0", "1", "25%" };
        static const char *const unavs_nz[] = { "1", "25%" };
        dspec s = model[i].cur;

        s.exists = true;
        s.replicas = (int) (d->r[2] % 7);
        if (d->r[3] % 10 < 6) {
                s.ver = 1 + (int) (d->r[4] % 4);
                s.probe = d->r[5] % 3 == 0;
        } else {
                s.ver = model[i].last_ver ?: 1;
                s.probe = model[i].last_probe;
        }
        s.recreate = d->r[6] % 10 < 2;
        snprintf(s.surge, sizeof s.surge, "%s", surges[d->r[7] % ELEMENTSOF(surges)]);
        if (streq(s.surge, "0"))
                snprintf(s.unav, sizeof s.unav, "%s", unavs_nz[d->r[8] % ELEMENTSOF(unavs_nz)]);
        else
                snprintf(s.unav, sizeof s.unav, "%s", unavs[d->r[8] % ELEMENTSOF(unavs)]);
        if (s.recreate) /* as stored: the defaults, which a Recreate does not use */
                snprintf(s.surge, sizeof s.surge, "25%%"), snprintf(s.unav, sizeof s.unav, "25%%");
        return s;
}

static long do_apply(int i, const dspec *s) {
        _cleanup_free_ char *body = deployment_body(i, s);
        char b[96];
        long code;

        model_writing(i, s);
        code = http("POST", "/apis/tend.io/v1/apply", "application/json", body, NULL);
        model_answered(i, code, s);
        if (code >= 200 && code < 300) {
                model[i].last_ver = s->ver;
                model[i].last_probe = s->probe;
        }
        log_step("apply d%d %s -> %ld", i, spec_str(s, b, sizeof b), code);
        return code;
}

static void step_scale(int i, const draws *d) {
        dspec s = model[i].cur;
        char path[128], body[64];
        long code;

        s.replicas = (int) (d->r[2] % 7);
        snprintf(path, sizeof path, "/apis/apps/v1/namespaces/default/deployments/d%d/scale", i);
        snprintf(body, sizeof body, "{\"spec\":{\"replicas\":%d}}", s.replicas);
        model_writing(i, &s);
        code = http("PATCH", path, "application/merge-patch+json", body, NULL);
        model_answered(i, code, &s);
        log_step("scale d%d --replicas=%d -> %ld", i, s.replicas, code);
}

static void step_pause(int i, const draws *d) {
        dspec s = model[i].cur;
        char path[128], body[64];
        long code;

        s.paused = d->r[2] % 2;
        snprintf(path, sizeof path, "/apis/apps/v1/namespaces/default/deployments/d%d", i);
        snprintf(body, sizeof body, "{\"spec\":{\"paused\":%s}}", s.paused ? "true" : "false");
        model_writing(i, &s);
        code = http("PATCH", path, "application/merge-patch+json", body, NULL);
        model_answered(i, code, &s);
        log_step("rollout %s d%d -> %ld", s.paused ? "pause" : "resume", i, code);
}

typedef struct rsobs {
        char name[96];
        long long revision;
        int replicas, ver;
        bool probe;
} rsobs;

/* The ReplicaSets of deployment i, by revision; a new array. */
static size_t rs_get(int i, rsobs **ret) {
        char path[160];
        json_t *j, *it;
        size_t n = 0, k;
        rsobs *v;

        *ret = NULL;
        snprintf(path, sizeof path,
                 "/apis/apps/v1/namespaces/default/replicasets?labelSelector=app%%3Dd%d", i);
        if (http("GET", path, NULL, NULL, &j) != 200 ||
            !(v = calloc(json_array_size(json_object_get(j, "items")) + 1, sizeof *v))) {
                json_decref(j);
                return 0;
        }
        json_array_foreach (json_object_get(j, "items"), k, it) {
                rsobs *r = &v[n++];
                snprintf(r->name, sizeof r->name, "%s", strempty(jstr(it, "metadata.name")));
                /* (the key has dots: not a jstr() path) */
                r->revision = atoll(strempty(json_string_value(json_object_get(
                        jget(it, "metadata.annotations"), "deployment.kubernetes.io/revision"))));
                r->replicas = (int) jint(it, "spec.replicas");
                template_of(jget(it, "spec.template"), &r->ver, &r->probe);
        }
        json_decref(j);
        for (size_t a = 1; a < n; a++)
                for (size_t b = a; b > 0 && v[b - 1].revision > v[b].revision; b--) {
                        rsobs t = v[b];
                        v[b] = v[b - 1];
                        v[b - 1] = t;
                }
        *ret = v;
        return n;
}

static void step_undo(int i) {
        _cleanup_free_ rsobs *rs = NULL;
        size_t n = rs_get(i, &rs);
        char path[128];
        json_t *j = NULL;
        dspec s = model[i].cur;
        const char *msg;
        long code;

        snprintf(path, sizeof path, "/apis/apps/v1/namespaces/default/deployments/d%d/rollback", i);
        s.ver = 0; /* the template it goes back to: from the answer's revision */
        code = http("POST", path, NULL, NULL, &j);
        msg = jstr(j, "message");
        if (code == 200 && msg && strstr(msg, "rolled back")) {
                long long rev = jint(j, "details.revision");
                for (size_t k = 0; k < n; k++)
                        if (rs[k].revision == rev)
                                s.ver = rs[k].ver, s.probe = rs[k].probe;
                model_answered(i, code, &s);
                if (s.ver)
                        model[i].last_ver = s.ver, model[i].last_probe = s.probe;
        } else if (code == 0)
                model_answered(i, code, &s);
        log_step("rollout undo d%d -> %ld %s (v%d)", i, code, strna(msg), s.ver);
        json_decref(j);
}

static void step_scale_rs(int i, const draws *d) {
        _cleanup_free_ rsobs *rs = NULL;
        size_t n = rs_get(i, &rs);
        char path[192], body[64];
        int want = (int) (d->r[3] % 4);
        const rsobs *r;
        long code;

        if (n == 0) {
                log_step("scale rs of d%d: none", i);
                return;
        }
        r = &rs[d->r[2] % n];
        snprintf(path, sizeof path, "/apis/apps/v1/namespaces/default/replicasets/%s/scale",
                 r->name);
        snprintf(body, sizeof body, "{\"spec\":{\"replicas\":%d}}", want);
        code = http("PATCH", path, "application/merge-patch+json", body, NULL);
        log_step("scale rs/%s (rev %lld of %zu, v%d, %d) --replicas=%d -> %ld", r->name,
                 r->revision, n, r->ver, r->replicas, want, code);
}

static void step_delete_pod(int i, const draws *d) {
        _cleanup_free_ pobs *pods = NULL;
        size_t np = 0, n = 0;
        char path[192];
        const pobs *pick = NULL;

        if (pods_get(&pods, &np) < 0)
                return;
        for (size_t k = 0; k < np; k++)
                n += pods[k].dep == i && !terminal(&pods[k]);
        if (n == 0) {
                log_step("delete pod of d%d: none", i);
                return;
        }
        n = d->r[2] % n;
        for (size_t k = 0; k < np && !pick; k++)
                if (pods[k].dep == i && !terminal(&pods[k]) && n-- == 0)
                        pick = &pods[k];
        if (!pick)
                return;
        snprintf(path, sizeof path, "/api/v1/namespaces/default/pods/%s", pick->name);
        log_step("delete pod/%s (%s%s) -> %ld", pick->name, pick->phase,
                 pick->terminating ? ", terminating" : "", http("DELETE", path, NULL, NULL, NULL));
}

/* kill -9 of the k-th (mod n) process of ours; dep <0: of any deployment. */
static pid_t kill_one(int dep, uint64_t k) {
        _cleanup_free_ pproc *v = NULL;
        size_t n = proc_scan(&v), m = 0;

        for (size_t i = 0; i < n; i++)
                if (dep < 0 || v[i].dep == dep)
                        v[m++] = v[i];
        if (m == 0)
                return 0;
        k %= m;
        kill(v[k].pid, SIGKILL);
        n_podkills++;
        return v[k].pid;
}

static unsigned kill_all(int dep) {
        _cleanup_free_ pproc *v = NULL;
        size_t n = proc_scan(&v);
        unsigned killed = 0;

        for (size_t i = 0; i < n; i++)
                if (dep < 0 || v[i].dep == dep) {
                        kill(v[i].pid, SIGKILL);
                        killed++;
                }
        n_podkills += killed;
        return killed;
}

/*
 * tendd is killed (SIGKILL or SIGTERM; apply_first: right after an
 * acknowledged apply), some pods die meanwhile, and tendd starts again on
 * the same state dir: rule 4 on what it adopts, sometimes a second kill
 * while it starts, then convergence, timed from the last start.
 */
static void step_tendd(int sig, bool apply_first, int dep, const draws *d) {
        _cleanup_free_ kept *v = NULL;
        size_t n;
        unsigned down_kills = d->r[2] % 5 < 3 ? 0 : (unsigned) (d->r[2] % 5) - 2;
        double t;
        usec_t t0;

        if (apply_first) {
                dspec s = apply_spec(dep, d);
                long code = do_apply(dep, &s);
                if (code < 200 || code >= 300)
                        log_step("(the apply was not acknowledged: %ld)", code);
        }
        n = kept_snapshot(&v);
        if (sig == SIGKILL)
                n_kill9++;
        else
                n_term++;
        tendd_stop(sig);
        log_step("tendd: SIG%s (%zu pods running)", sigabbrev_np(sig), n);
        for (unsigned k = 0; k < down_kills; k++) {
                pid_t p = kill_one(-1, d->r[3] + k);
                kept_killed(v, n, p);
                log_step("  while tendd is down: kill -9 %d", (int) p);
        }
        sleep_ms((unsigned) (d->r[4] % 300));
        t0 = now_monotonic();
        tendd_start();
        if (!tendd_wait_up(t0))
                return;
        log_step("tendd: up again (pid %d) in %.0f ms", (int) tendd,
                 (double) (now_monotonic() - t0) / 1e3);
        check_kept(v, n);
        if (d->r[5] % 5 == 0) {
                /* killed again while it finds its feet */
                sleep_ms((unsigned) (d->r[6] % 200));
                v = mfree(v);
                n = kept_snapshot(&v);
                n_kill9++;
                tendd_stop(SIGKILL);
                log_step("tendd: SIGKILL again, %zu pods running", n);
                t0 = now_monotonic();
                tendd_start();
                if (!tendd_wait_up(t0))
                        return;
                check_kept(v, n);
        }
        t = converge(t0);
        if (t >= 0) {
                if (n_conv < ELEMENTSOF(conv_ms))
                        conv_ms[n_conv++] = t;
                check_one_to_one();
        }
        log_step("tendd: converged %.0f ms after its start", t);
}

typedef enum skind {
        S_APPLY,
        S_SCALE,
        S_UNDO,
        S_PAUSE,
        S_SCALE_RS,
        S_DELETE_POD,
        S_KILL_POD,
        S_MASS_KILL,
        S_TENDD_KILL,
        S_TENDD_TERM,
        S_APPLY_KILL,
        S_QUIET,
        S_SLEEP,
        _S_MAX,
} skind;

static const unsigned weight[_S_MAX] = {
        [S_APPLY] = 20,     [S_SCALE] = 12,      [S_UNDO] = 5,       [S_PAUSE] = 5,
        [S_SCALE_RS] = 6,   [S_DELETE_POD] = 10, [S_KILL_POD] = 10,  [S_MASS_KILL] = 3,
        [S_TENDD_KILL] = 2, [S_TENDD_TERM] = 1,  [S_APPLY_KILL] = 1, [S_QUIET] = 2,
        [S_SLEEP] = 4,
};

static skind pick_kind(uint64_t r) {
        unsigned total = 0, x;

        for (int k = 0; k < _S_MAX; k++)
                total += weight[k];
        x = (unsigned) (r % total);
        for (int k = 0; k < _S_MAX; k++) {
                if (x < weight[k])
                        return (skind) k;
                x -= weight[k];
        }
        return S_SLEEP;
}

static void run_step(unsigned i) {
        draws d = draw_step(i);
        int dep = (int) (d.r[1] % NDEP);

        switch (pick_kind(d.r[0])) {
        case S_APPLY: {
                dspec s = apply_spec(dep, &d);
                do_apply(dep, &s);
                break;
        }
        case S_SCALE:
                step_scale(dep, &d);
                break;
        case S_UNDO:
                step_undo(dep);
                break;
        case S_PAUSE:
                step_pause(dep, &d);
                break;
        case S_SCALE_RS:
                step_scale_rs(dep, &d);
                break;
        case S_DELETE_POD:
                step_delete_pod(dep, &d);
                break;
        case S_KILL_POD: {
                pid_t p = kill_one(-1, d.r[2]);
                log_step("kill -9 %d", (int) p);
                break;
        }
        case S_MASS_KILL: {
                bool all = d.r[2] % 2;
                unsigned k = kill_all(all ? -1 : dep);
                if (all)
                        log_step("kill -9 of all %u processes of every deployment", k);
                else
                        log_step("kill -9 of all %u processes of d%d", k, dep);
                break;
        }
        case S_TENDD_KILL:
                step_tendd(SIGKILL, false, dep, &d);
                break;
        case S_TENDD_TERM:
                step_tendd(SIGTERM, false, dep, &d);
                break;
        case S_APPLY_KILL:
                step_tendd(SIGKILL, true, dep, &d);
                break;
        case S_QUIET: {
                unsigned ms = 300 + (unsigned) (d.r[2] % 1200);
                log_step("quiet %u ms, then converge", ms);
                quiet(ms);
                break;
        }
        case S_SLEEP: {
                unsigned ms = 200 + (unsigned) (d.r[2] % 800);
                log_step("sleep %u ms", ms);
                sample_for(ms);
                break;
        }
        default:
                break;
        }
        /* the pause after a step: samples at the steady rate meanwhile */
        sample_for(20 + (unsigned) (d.r[NDRAWS - 1] % 200));
}

/* ---- set-up, clean-up, summary ----------------------------------------------------------------
 */

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        (void) (flag == FTW_DP ? rmdir(path) : unlink(path));
        return 0;
}

static void rm_tmp(void) {
        if (*tmpdir && !opt.keep_tmp)
                (void) nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A child that outlives us by a moment: when the driver is gone however it
 * went (a crash, a ctest timeout's SIGKILL), its pipe reads EOF and the
 * child kills the last tendd and every process of ours. */
static void watchdog_start(void) {
        int p[2];
        pid_t w;

        if (pipe2(p, O_CLOEXEC) < 0)
                return;
        w = fork();
        if (w < 0) {
                close(p[0]);
                close(p[1]);
                return;
        }
        if (w == 0) {
                pid_t t = 0, v;
                ssize_t k;
                close(p[1]);
                setpgid(0, 0);
                signal(SIGINT, SIG_IGN);
                signal(SIGTERM, SIG_IGN);
                while ((k = read(p[0], &v, sizeof v)) != 0) {
                        if (k == sizeof v)
                                t = v;
                        else if (k < 0 && errno != EINTR)
                                break;
                }
                if (t > 0)
                        kill(t, SIGKILL);
                for (int i = 0; i < 5 && kill_marked() > 0; i++)
                        usleep(100 * 1000);
                rm_tmp();
                _exit(0);
        }
        close(p[0]);
        watchdog_fd = p[1];
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

static void print_times(const char *what, double *v, size_t n) {
        if (n == 0) {
                printf("  %-40s -\n", what);
                return;
        }
        qsort(v, n, sizeof *v, cmp_double);
        printf("  %-40s median %.0f ms, max %.0f ms (n=%zu)\n", what, v[n / 2], v[n - 1], n);
}

/* The pods' cgroups of the run's tendd (its log names them), once their
 * processes are gone: the pods' (killed by then), then tendd's own. */
static void remove_cgroups(void) {
        _cleanup_free_ char *text = NULL;
        const char *tag = "pods' cgroups under ", *at;

        if (read_full_file(logpath, 64 << 20, &text, NULL) < 0 || !(at = strstr(text, tag)))
                return;
        at += strlen(tag);
        _cleanup_free_ char *list = strndup(at, strcspn(at, "(\n"));
        for (char *save = NULL, *base = list ? strtok_r(list, ", ", &save) : NULL; base;
             base = strtok_r(NULL, ", ", &save))
                for (int tries = 0; tries < 50 && rmdir(base) < 0 && errno == EBUSY; tries++) {
                        DIR *d = opendir(base);
                        struct dirent *de;
                        while (d && (de = readdir(d)))
                                if (de->d_type == DT_DIR && de->d_name[0] != '.')
                                        (void) unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR);
                        if (d)
                                closedir(d);
                        if (rmdir(base) == 0)
                                break;
                        sleep_ms(100);
                }
}

static void finish(int code) {
        static bool finishing;
        unsigned total = 0;

        if (finishing)
                _exit(code ?: 1);
        finishing = true;
        opt.keep_going = true; /* a violation from here on is counted, and we go on cleaning */
        /* the last tendd must stop on SIGTERM with exit 0, as every one */
        if (tendd > 0 && code != 2) {
                step = steps_done;
                tendd_stop(SIGTERM);
        } else if (tendd > 0) {
                kill(tendd, SIGKILL);
                waitpid(tendd, NULL, 0);
                tendd = -1;
        }
        for (int i = 0; i < 20 && kill_marked() > 0; i++)
                sleep_ms(50);
        while (waitpid(-1, NULL, WNOHANG) > 0)
                ;
        remove_cgroups();

        printf("\n== tend-chaos summary (seed %" PRIu64 ")\n", opt.seed);
        printf("  steps              %u of %u in %.1f s\n", steps_done, opt.steps,
               (double) (now_monotonic() - t_start) / 1e6);
        printf("  tendd kills        %u kill -9, %u SIGTERM; %u starts\n", n_kill9, n_term,
               n_restarts);
        printf("  pod kills          %u kill -9; %u quiet checks; %u samples (%u deployment "
               "samples skipped: changed meanwhile)\n",
               n_podkills, n_quiet, n_samples, n_skipped);
        print_times("tendd restart -> API answers", up_ms, n_up);
        print_times("tendd restart -> converged", conv_ms, n_conv);
        if (n_noconv)
                printf("  %zu quiet checks did not converge\n", n_noconv);
        printf("  violations:\n");
        for (int c = 0; c < _V_MAX; c++) {
                printf("    %-9s %4u  %s%s\n", vclass_name[c], nviol[c], vclass_what[c],
                       c == V_BOUND && opt.bound_warn ? " [CHAOS_BOUND=warn: reported only]" : "");
                total += nviol[c];
        }
        if (code == 0 && failed)
                code = 1;
        if (code == 1)
                printf("FAILED: reproduce with tend-chaos --seed %" PRIu64 " --steps %u\n",
                       opt.seed, first_fail_step ?: MAX(step, 1u));
        else if (code == 0)
                printf("%s\n", total ? "passed (with rule-2 warnings)" : "passed");
        if (code != 0 && access(logpath, R_OK) == 0) {
                char cmd[256];
                printf("---- tendd log (tail) ----\n");
                fflush(stdout);
                snprintf(cmd, sizeof cmd, "tail -40 '%s'", logpath);
                (void) !system(cmd);
        }
        fflush(stdout);
        rm_tmp();
        if (watchdog_fd >= 0)
                close(watchdog_fd);
        if (curl)
                curl_easy_cleanup(curl);
        curl_global_cleanup();
        exit(code);
}

static void on_signal(int sig) {
        interrupted = 1;
}

static bool env_true(const char *name) {
        const char *v = getenv(name);
        return v && *v && !streq(v, "0");
}

static void usage(void) {
        printf("tend-chaos [--seed N] [--steps N] [--bin DIR] [--keep-going] [-v]\n"
               "  env: CHAOS_SEED, CHAOS_STEPS, CHAOS_BOUND=warn, CHAOS_KEEP_GOING=1,\n"
               "       CHAOS_VERBOSE=1, CHAOS_KEEP=1, TEND_BIN_DIR\n");
}

int main(int argc, char **argv) {
        static const struct option longopts[] = {
                { "seed", required_argument, NULL, 's' },
                { "steps", required_argument, NULL, 'n' },
                { "bin", required_argument, NULL, 'b' },
                { "keep-going", no_argument, NULL, 'k' },
                { "verbose", no_argument, NULL, 'v' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *bin = getenv("TEND_BIN_DIR"), *v;
        bool have_seed = false;
        int c;

        setvbuf(stdout, NULL, _IOLBF, 0);
        opt.steps = 150;
        if ((v = getenv("CHAOS_SEED")) && *v)
                opt.seed = strtoull(v, NULL, 0), have_seed = true;
        if ((v = getenv("CHAOS_STEPS")) && *v)
                opt.steps = (unsigned) strtoul(v, NULL, 0);
        opt.bound_warn = streq_ptr(getenv("CHAOS_BOUND"), "warn");
        opt.keep_going = env_true("CHAOS_KEEP_GOING");
        opt.verbose = env_true("CHAOS_VERBOSE");
        opt.keep_tmp = env_true("CHAOS_KEEP");
        while ((c = getopt_long(argc, argv, "s:n:b:kvh", longopts, NULL)) != -1)
                switch (c) {
                case 's':
                        opt.seed = strtoull(optarg, NULL, 0), have_seed = true;
                        break;
                case 'n':
                        opt.steps = (unsigned) strtoul(optarg, NULL, 0);
                        break;
                case 'b':
                        bin = optarg;
                        break;
                case 'k':
                        opt.keep_going = true;
                        break;
                case 'v':
                        opt.verbose = true;
                        break;
                case 'h':
                        usage();
                        return 0;
                default:
                        usage();
                        return 2;
                }
        if (!have_seed)
                opt.seed = (uint64_t) time(NULL) ^ ((uint64_t) getpid() << 16);
        if (!bin) {
                printf("TEND_BIN_DIR or --bin: where tendd is\n");
                return 2;
        }
        snprintf(opt.bindir, sizeof opt.bindir, "%s", bin);
        snprintf(opt.tendd, sizeof opt.tendd, "%s/tendd", opt.bindir);
        snprintf(opt.testprog, sizeof opt.testprog, "%s/../tests/tend-testprog", opt.bindir);
        if (access(opt.tendd, X_OK) < 0 || access(opt.testprog, X_OK) < 0) {
                printf("%s or %s missing: build first\n", opt.tendd, opt.testprog);
                return 2;
        }
        if (realpath(opt.testprog, opt.bindir)) /* argv[0] of the pods: an absolute path */
                snprintf(opt.testprog, sizeof opt.testprog, "%s", opt.bindir);

        t_start = now_monotonic();
        snprintf(tmpdir, sizeof tmpdir, "/tmp/tend-chaos-XXXXXX");
        if (!mkdtemp(tmpdir)) {
                printf("mkdtemp: %m\n");
                return 2;
        }
        snprintf(sock, sizeof sock, "%s/tend.sock", tmpdir);
        snprintf(statedir, sizeof statedir, "%s/state", tmpdir);
        snprintf(logpath, sizeof logpath, "%s/tendd.log", tmpdir);
        tendd_asan = getenv("ASAN_OPTIONS") != NULL;

        signal(SIGPIPE, SIG_IGN);
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        signal(SIGHUP, on_signal);
        /* Pods of a killed tendd come to us (as to systemd for a unit
         * with KillMode=process); reap() collects them. */
        (void) prctl(PR_SET_CHILD_SUBREAPER, 1);
        watchdog_start();
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0 || !(curl = curl_easy_init())) {
                printf("curl init failed\n");
                finish(2);
        }

        printf("tend-chaos: seed %" PRIu64 ", %u steps, tendd %s, state %s, rule 2 %s\n", opt.seed,
               opt.steps, opt.tendd, tmpdir, opt.bound_warn ? "warn (CHAOS_BOUND=warn)" : "fail");
        printf("  reproduce: tend-chaos --seed %" PRIu64 " --steps %u\n", opt.seed, opt.steps);

        /* step 0: four deployments of two replicas, converged */
        tendd_start();
        if (!tendd_wait_up(t_start))
                finish(1);
        for (int i = 0; i < NDEP; i++) {
                dspec s = { .exists = true, .replicas = 2, .ver = 1 };
                snprintf(s.surge, sizeof s.surge, "1");
                snprintf(s.unav, sizeof s.unav, "0");
                if (do_apply(i, &s) != 200) {
                        printf("set-up: apply of d%d failed\n", i);
                        finish(1);
                }
        }
        quiet(0);

        for (step = 1; step <= opt.steps && !interrupted; step++) {
                run_step(step);
                steps_done = step;
                if (!opt.verbose && step % 100 == 0)
                        printf("  ... step %u, %.0f s\n", step,
                               (double) (now_monotonic() - t_start) / 1e6);
        }
        step = steps_done;
        if (interrupted) {
                printf("interrupted\n");
                finish(2);
        }
        log_step("end: quiet, then converge");
        quiet(1000);
        check_log("at the end");
        finish(0);
}
