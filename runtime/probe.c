/* SPDX-License-Identifier: MIT */

/*
 * Probes with the kubelet's semantics (docs/deployments.md §8): one prober per
 * (pod, probe type); a tick every periodSeconds after initialDelaySeconds;
 * consecutive identical results are counted and the published result flips
 * only when a run reaches successThreshold or failureThreshold. Readiness
 * starts false, liveness true; only transitions go upward. A tick that finds
 * the previous attempt still running is skipped.
 *
 * Handlers: exec (the pod's environment, directory and identity, killed at
 * timeoutSeconds), tcpSocket (a non-blocking connect on the loop) and
 * httpGet (libcurl multi on the loop, a fresh connection each time, 200-399
 * is success; redirects to the same host followed, as the kubelet does).
 */

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "rt-internal.h"

struct rt_prober {
        rt_pod *pod;
        rt_probe_type type;
        spec_probe *spec;
        unsigned refs;
        bool stopped;
        bool result;
        bool ever_ready; /* readiness: published success at least once */
        bool excused;    /* its last attempt timed out late and was let go (rt__late) */
        uint64_t hurry_ms;
        int run_ok, run_fail;
        usec_t last_reminder; /* readiness: the last failure reported while not ready */
        char message[256];    /* the last failure, for rt_pod_probe_message() */
        unsigned unreaped;    /* exec attempts whose process is not reaped yet */
        char **exec_argv;     /* exec: the command, $(VAR)-expanded */
        char *exec_path;      /* exec: argv[0] resolved against the pod's PATH */
        uv_timer_t tick;
        struct attempt *current;
};

typedef enum attempt_kind {
        ATTEMPT_EXEC,
        ATTEMPT_TCP,
        ATTEMPT_HTTP,
} attempt_kind;

typedef struct attempt {
        rt_prober *prober;
        attempt_kind kind;
        unsigned refs;        /* the attempt itself + each open handle */
        bool done;            /* result recorded */
        size_t body;          /* http: bytes of the body read so far */
        unsigned redirects;   /* http: followed so far */
        usec_t http_deadline; /* http: monotonic, over all redirects */
        usec_t deadline;      /* exec, tcp: monotonic, when it times out */
        bool closing;
        uv_timer_t timeout;
        /* exec */
        pid_t pid;
        int pidfd;
        bool reaped;
        uv_poll_t poll;
        bool poll_init;
        /* tcp */
        uv_tcp_t tcp;
        bool tcp_init;
        uv_connect_t connect;
        uv_getaddrinfo_t gai;
        uint16_t port;
        /* http */
        CURL *easy;
        struct curl_slist *headers;
} attempt;

static void prober_unref(rt_prober *p) {
        if (--p->refs > 0)
                return;
        spec_free(&spec_type_probe, p->spec);
        strv_free(p->exec_argv);
        free(p->exec_path);
        rt__pod_unref(p->pod);
        free(p);
}

/* ---- results -------------------------------------------------------------------------- */

static void publish(rt_prober *p, bool ok, const char *message) {
        rt_pod *pod = p->pod;
        rt_manager *m = pod->manager;

        p->result = ok;
        if (p->type == RT_PROBE_READINESS) {
                pod->probe_ready = ok;
                /* tend.io/notify ready: READY=1 is needed too
                 * (rt__readiness_update() publishes once it comes) */
                if (ok && pod->notify_declared_ready && !pod->notify_ready)
                        return;
                pod->ready = ok;
        }
        if (!pod->freed && m->cb.probe)
                m->cb.probe(pod, p->type, ok, message, m->userdata);
}

static void on_tick(uv_timer_t *t);

/*
 * A pod that does not become ready must say why, as the kubelet's
 * "Readiness probe failed" events do: failures of a readiness probe that
 * is not passing are reported too (not a transition: the same false
 * again, with its message), at most once a period, and not within the
 * pod's first initialDelaySeconds + periodSeconds — the hurried attempts
 * of a starting pod fail as a matter of course, and a pod that is ready
 * within its first period has nothing to explain.
 */
static void remind(rt_prober *p) {
        rt_pod *pod = p->pod;
        rt_manager *m = pod->manager;
        usec_t now = now_monotonic(), period = (usec_t) p->spec->period_seconds * USEC_PER_SEC,
               quiet = (usec_t) p->spec->initial_delay_seconds * USEC_PER_SEC + period;

        if (now < pod->started_mono + quiet ||
            (p->last_reminder && now < p->last_reminder + period))
                return;
        p->last_reminder = now;
        if (!pod->freed && m->cb.probe)
                m->cb.probe(pod, p->type, false, p->message, m->userdata);
}

/*
 * Until a readiness probe first succeeds, the next attempt comes sooner
 * than the period: 5 ms, then 1.5 times longer each time, until it
 * reaches the period — a pod is seen ready at most half again as late as
 * it became ready (doubling allowed twice as late: 775 ms for a pod ready
 * at 500), for some twenty attempts over a 10 s period. The
 * kubelet waits a whole period, so a replacement that listens 5 ms after
 * its start is seen ready up to periodSeconds later; here, within a few
 * milliseconds. Only failures hurry: a success short of successThreshold
 * is followed by the next attempt a period later, as the kubelet does —
 * the threshold asks for successes spread over periods, not a burst. And
 * once the pod has been ready the period is the period.
 */
#define PROBE_HURRY_FIRST_MS 5

static void hurry(rt_prober *p) {
        uint64_t period = (uint64_t) p->spec->period_seconds * 1000;

        if (p->type != RT_PROBE_READINESS || p->ever_ready || p->stopped)
                return;
        p->hurry_ms = p->hurry_ms ? p->hurry_ms * 3 / 2 : PROBE_HURRY_FIRST_MS;
        if (p->hurry_ms < period)
                uv_timer_start(&p->tick, on_tick, p->hurry_ms, 0);
}

static void record(rt_prober *p, bool ok, const char *message) {
        if (p->stopped)
                return;
        if (ok) {
                p->run_fail = 0;
                p->run_ok++;
                if (!p->result && p->run_ok >= p->spec->success_threshold) {
                        p->ever_ready = p->type == RT_PROBE_READINESS;
                        publish(p, true, NULL);
                }
                return;
        }
        snprintf(p->message, sizeof p->message, "%s", strna(message));
        p->run_ok = 0;
        p->run_fail++;
        if (p->result && p->run_fail >= p->spec->failure_threshold)
                publish(p, false, p->message);
        else if (!p->result && p->type == RT_PROBE_READINESS)
                remind(p);
        hurry(p);
}

/* The prober itself failed (could not spawn, no such port): as the
 * kubelet, the result is discarded, not counted; the reason is kept. */
static void record_error(rt_prober *p, const char *message) {
        if (!p->stopped)
                snprintf(p->message, sizeof p->message, "probe error: %s", strna(message));
}

/* ---- attempts --------------------------------------------------------------------------- */

static void attempt_unref(attempt *a) {
        if (--a->refs > 0)
                return;
        if (a->easy)
                curl_easy_cleanup(a->easy);
        curl_slist_free_all(a->headers);
        safe_close(a->pidfd);
        prober_unref(a->prober);
        free(a);
}

static void on_attempt_handle_closed(uv_handle_t *h) {
        attempt_unref(h->data);
}

/* Closes whatever is open; the attempt goes when the last handle has. For
 * exec, only after the probe process has been reaped. */
static void attempt_close(attempt *a) {
        if (a->closing)
                return;
        if (a->kind == ATTEMPT_EXEC && !a->reaped)
                return; /* on_exec_exit() calls us again */
        a->closing = true;
        if (a->prober->current == a)
                a->prober->current = NULL;
        if (!uv_is_closing((uv_handle_t *) &a->timeout))
                uv_close((uv_handle_t *) &a->timeout, on_attempt_handle_closed);
        if (a->poll_init)
                uv_close((uv_handle_t *) &a->poll, on_attempt_handle_closed);
        if (a->tcp_init)
                uv_close((uv_handle_t *) &a->tcp, on_attempt_handle_closed);
        if (a->easy)
                net_curl_cancel(a->prober->pod->manager->curl, a->easy);
        attempt_unref(a);
}

static void finish(attempt *a, bool ok, const char *message) {
        if (a->done)
                return;
        a->done = true;
        a->prober->excused = false;
        if (a->prober->current == a)
                a->prober->current = NULL;
        record(a->prober, ok, message);
        attempt_close(a);
}

static void finish_error(attempt *a, const char *message) {
        if (a->done)
                return;
        a->done = true;
        if (a->prober->current == a)
                a->prober->current = NULL;
        record_error(a->prober, message);
        attempt_close(a);
}

static void on_exec_exit(uv_poll_t *h, int status, int events);

/* An attempt that timed out while tendd was not running (rt__late()) says
 * nothing of the pod: not counted, and made again shortly (once an exec
 * probe's process is reaped), the period starting from there. */
static void discard_late(attempt *a) {
        rt_prober *p = a->prober;

        if (a->kind == ATTEMPT_EXEC && !a->reaped)
                (void) kill(-a->pid, SIGKILL);
        a->done = true;
        p->excused = true; /* once: the next late one counts (a tendd starved for good) */
        if (p->current == a)
                p->current = NULL;
        attempt_close(a);
        if (!p->stopped)
                uv_timer_start(&p->tick, on_tick, 100, (uint64_t) p->spec->period_seconds * 1000);
}

static void on_attempt_timeout(uv_timer_t *t) {
        attempt *a = t->data;
        char msg[64];

        if (rt__not_yet(t, on_attempt_timeout, a->deadline))
                return;
        if (!a->prober->excused &&
            rt__late(a->prober->pod->manager, a->deadline, now_monotonic())) {
                /* (a probe process that ended meanwhile gives its verdict) */
                if (a->kind == ATTEMPT_EXEC && !a->reaped)
                        on_exec_exit(&a->poll, 0, 0);
                if (!a->done)
                        discard_late(a);
                return;
        }

        snprintf(msg, sizeof msg, "timed out after %ds", a->prober->spec->timeout_seconds);
        if (a->kind == ATTEMPT_EXEC && !a->reaped)
                (void) kill(-a->pid, SIGKILL);
        finish(a, false, msg);
}

/* -- exec -- */

static void mark_reaped(attempt *a) {
        rt__pid_remove(a->prober->pod->manager, a->pid);
        a->reaped = true;
        a->prober->unreaped--;
}

static void on_exec_exit(uv_poll_t *h, int status, int events) {
        attempt *a = h->data;
        siginfo_t si = {};
        char msg[64];
        int r;

        r = RET_NERRNO(waitid(P_PIDFD, (id_t) a->pidfd, &si, WEXITED | WNOHANG | WNOWAIT));
        if (r == 0 && si.si_pid == 0)
                return; /* still running */
        /* Anything the probe left behind in its group, while the zombie
         * still pins the group id; then reap. */
        (void) kill(-a->pid, SIGKILL);
        (void) waitid(P_PIDFD, (id_t) a->pidfd, &(siginfo_t){}, WEXITED | WNOHANG);
        mark_reaped(a);
        uv_poll_stop(&a->poll);
        if (si.si_code == CLD_EXITED && si.si_status == 0)
                finish(a, true, NULL);
        else {
                if (si.si_code == CLD_EXITED)
                        snprintf(msg, sizeof msg, "command exited with status %d", si.si_status);
                else
                        snprintf(msg, sizeof msg, "command killed by signal %d", si.si_status);
                finish(a, false, msg);
        }
        attempt_close(a);
}

static int start_exec(attempt *a) {
        rt_prober *p = a->prober;
        rt_pod *pod = p->pod;
        rt_manager *m = pod->manager;
        _cleanup_free_ char *err = NULL;
        _cleanup_close_ int ns = -EBADF;
        rt_spawn s;
        int r;

        if (!p->exec_path) {
                _cleanup_free_ char *msg = strprintf("exec %s: not found in PATH", p->exec_argv[0]);
                finish_error(a, msg ?: "command not found");
                return 0;
        }
        s = (rt_spawn){
                .path = p->exec_path,
                .argv = p->exec_argv,
                .envp = pod->envp,
                .cwd = pod->working_dir,
                .set_ids = pod->set_ids,
                .uid = pod->uid_n,
                .gid = pod->gid_n,
        };
        /* A process pod with volumes: the command sees what the pod sees,
         * as a kubelet's exec probe runs in its container. */
        if (pod->own_mnt_ns && pod->record.pid > 0) {
                char path[64];
                snprintf(path, sizeof path, "/proc/%d/ns/mnt", (int) pod->record.pid);
                ns = open(path, O_RDONLY | O_CLOEXEC);
                if (ns < 0) {
                        _cleanup_free_ char *msg = strprintf("the pod's mount namespace: %s",
                                                             strerror(errno));
                        finish_error(a, msg ?: "the pod's mount namespace");
                        return 0;
                }
                s.join_mnt_ns = true;
                s.mnt_ns = ns;
        }
        r = rt__spawn(m, &s, &a->pid, &a->pidfd, &err);
        if (r < 0) {
                a->reaped = true;
                finish_error(a, err ?: "cannot run the command");
                return 0;
        }
        p->unreaped++;
        r = uv_poll_init(m->loop, &a->poll, a->pidfd);
        if (r >= 0) {
                a->poll_init = true;
                a->poll.data = a;
                a->refs++;
                r = uv_poll_start(&a->poll, UV_READABLE, on_exec_exit);
        }
        if (r < 0) {
                siginfo_t si;
                (void) kill(-a->pid, SIGKILL);
                (void) waitid(P_PIDFD, (id_t) a->pidfd, &si, WEXITED);
                mark_reaped(a);
        }
        return r;
}

/* -- tcp -- */

static void on_connected(uv_connect_t *req, int status) {
        attempt *a = req->data;
        char msg[160];

        if (status == UV_ECANCELED)
                return; /* timed out or stopped; already recorded */
        if (status == 0)
                finish(a, true, NULL);
        else {
                snprintf(msg, sizeof msg, "dial tcp port %u: %s", a->port, uv_strerror(status));
                finish(a, false, msg);
        }
}

static int tcp_connect(attempt *a, const struct sockaddr *sa) {
        rt_manager *m = a->prober->pod->manager;
        int r;

        r = uv_tcp_init(m->loop, &a->tcp);
        if (r < 0)
                return r;
        a->tcp_init = true;
        a->tcp.data = a;
        a->refs++;
        a->connect.data = a;
        return uv_tcp_connect(&a->connect, &a->tcp, sa, on_connected);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
        attempt *a = req->data;
        char msg[160];
        int r;

        if (a->done || status < 0 || !res) {
                if (!a->done) {
                        snprintf(msg, sizeof msg, "resolving the probe host: %s",
                                 uv_strerror(status < 0 ? status : UV_EAI_NONAME));
                        finish(a, false, msg);
                }
                uv_freeaddrinfo(res);
                attempt_unref(a);
                return;
        }
        if (res->ai_family == AF_INET)
                ((struct sockaddr_in *) res->ai_addr)->sin_port = htons(a->port);
        else
                ((struct sockaddr_in6 *) res->ai_addr)->sin6_port = htons(a->port);
        r = tcp_connect(a, res->ai_addr);
        uv_freeaddrinfo(res);
        if (r < 0) {
                snprintf(msg, sizeof msg, "dial tcp port %u: %s", a->port, uv_strerror(r));
                finish(a, false, msg);
        }
        attempt_unref(a);
}

static int start_tcp(attempt *a, const char *host) {
        rt_manager *m = a->prober->pod->manager;
        struct sockaddr_storage ss;
        struct addrinfo hints = { .ai_socktype = SOCK_STREAM };
        int r;

        if (!host || streq(host, "localhost"))
                host = "127.0.0.1";
        if (uv_ip4_addr(host, a->port, (struct sockaddr_in *) &ss) == 0 ||
            uv_ip6_addr(host, a->port, (struct sockaddr_in6 *) &ss) == 0)
                return tcp_connect(a, (struct sockaddr *) &ss);
        a->gai.data = a;
        a->refs++;
        r = uv_getaddrinfo(m->loop, &a->gai, on_resolved, host, NULL, &hints);
        if (r < 0)
                a->refs--;
        return r;
}

/* -- http -- */

/* As the kubelet, at most 10 KiB of the body is read: the status decides,
 * and an endpoint that streams (or a huge page) must not keep the probe
 * reading until its timeout. Returning short makes libcurl stop with
 * CURLE_WRITE_ERROR, the status already known. */
#define HTTP_BODY_MAX (10 * 1024)

static size_t discard(char *p, size_t size, size_t n, void *userdata) {
        attempt *a = userdata;

        a->body += size * n;
        return a->body > HTTP_BODY_MAX ? 0 : size * n;
}

static void on_http_done(void *userdata, CURLcode result, long status);

static char *url_host(const char *url) {
        CURLU *u = curl_url();
        char *host = NULL, *r = NULL;

        if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
            curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK)
                r = strdup(host);
        curl_free(host);
        curl_url_cleanup(u);
        return r;
}

/*
 * Redirects as the kubelet takes them: to the same host, followed (at most
 * 10, then a failure); to another host, not followed, and the 3xx itself
 * counts (a success). Returns true if the attempt goes on to the target.
 */
static bool follow_redirect(attempt *a, long status) {
        char *target = NULL, *from = NULL;
        _cleanup_free_ char *h1 = NULL, *h2 = NULL;
        usec_t now = now_monotonic();

        if (status < 300 || status >= 400 ||
            curl_easy_getinfo(a->easy, CURLINFO_REDIRECT_URL, &target) != CURLE_OK || !target ||
            curl_easy_getinfo(a->easy, CURLINFO_EFFECTIVE_URL, &from) != CURLE_OK || !from)
                return false;
        h1 = url_host(from);
        h2 = url_host(target);
        if (!h1 || !h2 || !streq(h1, h2))
                return false;
        if (a->redirects >= 10) {
                finish(a, false, "HTTP probe failed: stopped after 10 redirects");
                return true;
        }
        if (now >= a->http_deadline) {
                finish(a, false, "HTTP probe failed: Timeout was reached");
                return true;
        }
        a->redirects++;
        a->body = 0;
        curl_easy_setopt(a->easy, CURLOPT_URL, target);
        curl_easy_setopt(a->easy, CURLOPT_TIMEOUT_MS,
                         (long) MAX((a->http_deadline - now) / USEC_PER_MSEC, (usec_t) 1));
        if (net_curl_start(a->prober->pod->manager->curl, a->easy, on_http_done, a) < 0)
                finish(a, false, "HTTP probe failed: cannot follow the redirect");
        return true;
}

static void on_http_done(void *userdata, CURLcode result, long status) {
        attempt *a = userdata;
        char msg[256];

        if (result == CURLE_WRITE_ERROR && a->body > HTTP_BODY_MAX && status > 0)
                result = CURLE_OK;
        if (result == CURLE_OK && !a->done && follow_redirect(a, status))
                return;
        if (result == CURLE_OPERATION_TIMEDOUT && !a->done && !a->prober->excused &&
            rt__late(a->prober->pod->manager, a->http_deadline, now_monotonic()))
                discard_late(a);
        else if (result != CURLE_OK) {
                snprintf(msg, sizeof msg, "HTTP probe failed: %s", curl_easy_strerror(result));
                finish(a, false, msg);
        } else if (status >= 200 && status < 400)
                finish(a, true, NULL);
        else {
                snprintf(msg, sizeof msg, "HTTP probe failed with statuscode: %ld", status);
                finish(a, false, msg);
        }
}

static int start_http(attempt *a) {
        const spec_http_get *h = a->prober->spec->http_get;
        rt_manager *m = a->prober->pod->manager;
        const char *host = h->host && !streq(h->host, "localhost") ? h->host : "127.0.0.1";
        bool v6 = strchr(host, ':');
        _cleanup_free_ char *url = NULL;
        int r;

        url = strprintf("%s://%s%s%s:%u%s", streq_ptr(h->scheme, "HTTPS") ? "https" : "http",
                        v6 ? "[" : "", host, v6 ? "]" : "", a->port, h->path ?: "/");
        a->easy = curl_easy_init();
        if (!url || !a->easy)
                return -ENOMEM;
        a->headers = curl_slist_append(NULL, "User-Agent: tend-probe/" TEND_VERSION);
        a->headers = curl_slist_append(a->headers, "Accept: */*");
        for (size_t i = 0; i < h->n_http_headers; i++) {
                _cleanup_free_ char *line = strprintf("%s: %s", h->http_headers[i].name,
                                                      strempty(h->http_headers[i].value));
                if (line)
                        a->headers = curl_slist_append(a->headers, line);
        }
        curl_easy_setopt(a->easy, CURLOPT_URL, url);
        curl_easy_setopt(a->easy, CURLOPT_HTTPHEADER, a->headers);
        a->http_deadline = now_monotonic() +
                           (usec_t) a->prober->spec->timeout_seconds * USEC_PER_SEC;
        curl_easy_setopt(a->easy, CURLOPT_TIMEOUT_MS,
                         (long) a->prober->spec->timeout_seconds * 1000L);
        curl_easy_setopt(a->easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(a->easy, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(a->easy, CURLOPT_WRITEDATA, a);
        curl_easy_setopt(a->easy, CURLOPT_FORBID_REUSE, 1L);
        curl_easy_setopt(a->easy, CURLOPT_FRESH_CONNECT, 1L);
        curl_easy_setopt(a->easy, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(a->easy, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(a->easy, CURLOPT_SSL_VERIFYHOST, 0L);
        curl_easy_setopt(a->easy, CURLOPT_PROTOCOLS_STR, "http,https");
        r = net_curl_start(m->curl, a->easy, on_http_done, a);
        return r;
}

/* Resolves a probe's port: a number, or the name of one of the pod's ports
 * (leased ones included). */
static int probe_port(const rt_pod *pod, const spec_intstr *port, uint16_t *ret) {
        if (!port->str) {
                if (port->num < 1 || port->num > 65535)
                        return -EINVAL;
                *ret = (uint16_t) port->num;
                return 0;
        }
        for (size_t i = 0; i < pod->record.n_ports; i++)
                if (streq(pod->record.ports[i].name, port->str)) {
                        *ret = pod->record.ports[i].port;
                        return 0;
                }
        return -ENOENT;
}

static void run_attempt(rt_prober *p) {
        rt_manager *m = p->pod->manager;
        const spec_probe *s = p->spec;
        attempt *a;
        int r = 0;

        a = new0(attempt, 1);
        if (!a)
                return;
        a->prober = p;
        p->refs++;
        a->refs = 1;
        a->pidfd = -EBADF;
        uv_timer_init(m->loop, &a->timeout);
        a->timeout.data = a;
        a->refs++;
        p->current = a;

        if (s->exec) {
                a->kind = ATTEMPT_EXEC;
                r = start_exec(a);
        } else {
                const spec_intstr *port = s->http_get ? &s->http_get->port : &s->tcp_socket->port;
                a->kind = s->http_get ? ATTEMPT_HTTP : ATTEMPT_TCP;
                a->reaped = true;
                if (probe_port(p->pod, port, &a->port) < 0) {
                        finish_error(a, "the probe's port is not one of the pod's ports");
                        return;
                }
                r = s->http_get ? start_http(a) : start_tcp(a, s->tcp_socket->host);
        }
        if (r < 0 && !a->done) {
                a->reaped = true;
                finish_error(a, uv_strerror(r));
                return;
        }
        if (!a->done && a->kind != ATTEMPT_HTTP) {
                a->deadline = now_monotonic() + (usec_t) s->timeout_seconds * USEC_PER_SEC;
                uv_timer_start(&a->timeout, on_attempt_timeout,
                               (uint64_t) s->timeout_seconds * 1000, 0);
        }
}

/* ---- probers ------------------------------------------------------------------------------- */

static void on_tick(uv_timer_t *t) {
        rt_prober *p = t->data;
        uint64_t period = (uint64_t) p->spec->period_seconds * 1000;

        /* Not while the last attempt runs, nor while an earlier timed-out
         * probe process is still being reaped (one stuck in D state must
         * not make us spawn another every period). */
        if (!p->stopped && !p->current && p->unreaped == 0)
                run_attempt(p);
        /* After the initial delay the timer becomes periodic (libuv re-arms
         * before calling us, so the repeat must be set by a new start). */
        if (!p->stopped && uv_timer_get_repeat(t) == 0)
                uv_timer_start(t, on_tick, period, period);
}

static void on_tick_closed(uv_handle_t *h) {
        prober_unref(h->data);
}

static rt_prober *prober_new(rt_pod *pod, rt_probe_type type, const spec_probe *spec) {
        rt_manager *m = pod->manager;
        rt_prober *p = new0(rt_prober, 1);
        usec_t now = now_monotonic(), due;

        if (!p)
                return NULL;
        p->spec = spec_copy(&spec_type_probe, spec);
        if (!p->spec) {
                free(p);
                return NULL;
        }
        /* Defaults for a spec that skipped spec_deployment_default(). */
        if (p->spec->initial_delay_seconds < 0)
                p->spec->initial_delay_seconds = 0;
        if (p->spec->timeout_seconds < 1)
                p->spec->timeout_seconds = 1;
        if (p->spec->period_seconds < 1)
                p->spec->period_seconds = 10;
        if (p->spec->success_threshold < 1)
                p->spec->success_threshold = 1;
        if (p->spec->failure_threshold < 1)
                p->spec->failure_threshold = 3;
        spec = p->spec;
        if (spec->exec && spec->exec->command && spec->exec->command[0]) {
                /* The kubelet expands $(VAR) in exec probe commands too. */
                for (char **c = spec->exec->command; *c; c++) {
                        char *e = rt_expand(*c, pod->envp);
                        if (!e || strv_push(&p->exec_argv, e) < 0) {
                                free(e);
                                spec_free(&spec_type_probe, p->spec);
                                strv_free(p->exec_argv);
                                free(p);
                                return NULL;
                        }
                }
                /* Resolved once: a lookup per period would stat the PATH. */
                (void) rt__resolve_path(p->exec_argv[0], pod->envp, &p->exec_path);
        }
        p->pod = rt__pod_ref(pod);
        p->type = type;
        p->refs = 1;
        p->result = type == RT_PROBE_LIVENESS; /* kubelet's initial values */
        if (type == RT_PROBE_READINESS && pod->adopted_ready) {
                /* Ready before tendd's restart: still ready until the
                 * probe fails failureThreshold times, as any ready pod,
                 * and the Ready condition (its minReadySeconds window,
                 * the deployment's Available) does not start over. */
                p->result = p->ever_ready = true;
                pod->probe_ready = true;
        }
        uv_timer_init(m->loop, &p->tick);
        p->tick.data = p;
        p->refs++;
        due = pod->started_mono + (usec_t) spec->initial_delay_seconds * USEC_PER_SEC;
        uv_timer_start(&p->tick, on_tick, due > now ? (due - now) / USEC_PER_MSEC : 0,
                       due > now ? 0 : (uint64_t) spec->period_seconds * 1000);
        return p;
}

static void prober_stop(rt_prober *p) {
        if (!p || p->stopped)
                return;
        p->stopped = true;
        if (p->current) {
                attempt *a = p->current;
                if (a->kind == ATTEMPT_EXEC && !a->reaped)
                        (void) kill(-a->pid, SIGKILL);
                a->done = true;
                p->current = NULL;
                attempt_close(a);
        }
        uv_close((uv_handle_t *) &p->tick, on_tick_closed);
        prober_unref(p);
}

int rt__probes_start(rt_pod *pod, const spec_container *c) {
        const spec_probe *specs[_RT_PROBE_TYPE_MAX] = {
                [RT_PROBE_READINESS] = c->readiness_probe,
                [RT_PROBE_LIVENESS] = c->liveness_probe,
        };

        for (int i = 0; i < _RT_PROBE_TYPE_MAX; i++) {
                if (!specs[i])
                        continue;
                pod->probes[i] = prober_new(pod, (rt_probe_type) i, specs[i]);
                if (!pod->probes[i]) {
                        rt__probes_stop(pod);
                        return -ENOMEM;
                }
        }
        return 0;
}

void rt__probes_stop_one(rt_pod *pod, rt_probe_type type) {
        prober_stop(pod->probes[type]);
        pod->probes[type] = NULL;
}

void rt__probes_stop(rt_pod *pod) {
        for (int i = 0; i < _RT_PROBE_TYPE_MAX; i++) {
                prober_stop(pod->probes[i]);
                pod->probes[i] = NULL;
        }
}

const char *rt_pod_probe_message(const rt_pod *pod, rt_probe_type type) {
        const rt_prober *p = pod->probes[type];
        return p && p->message[0] ? p->message : NULL;
}
