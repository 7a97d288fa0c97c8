/* SPDX-License-Identifier: MIT */

/*
 * tend-example-web: the small HTTP server of the examples and the tour.
 *
 *   tend-example-web [--version=V] [--ready-after=SECONDS] [--drain=SECONDS]
 *                    [--watchdog-stop-after=SECONDS]
 *
 * Listens on 127.0.0.1:$PORT (tend leases the port and sets PORT), or on
 * the socket it is given (LISTEN_FDS: systemd's socket activation, or
 * tend's held sockets, tend.io/listen). Serves its version and pid on "/",
 * its version on "/version", and "/healthz": 503 until --ready-after
 * seconds have passed since it started, 200 after (what a readiness probe
 * asks). With NOTIFY_SOCKET (systemd's Type=notify, tend.io/notify) it
 * says READY=1 then too, and WATCHDOG=1 every half WATCHDOG_USEC — until
 * --watchdog-stop-after seconds, to show a hung server. On SIGTERM it keeps
 * serving for --drain seconds (connections in flight finish), then exits
 * 0; a given socket it stops accepting from at once, as the others that
 * share it take what comes.
 */

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>
#include <systemd/sd-daemon.h>

static const char *version = "v1";
static double ready_after, drain, watchdog_stop_after = -1;
static struct timespec started;

static double since_start(void) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        return (double) (now.tv_sec - started.tv_sec) + (now.tv_nsec - started.tv_nsec) / 1e9;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *text) {
        struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *) text,
                                                                 MHD_RESPMEM_MUST_COPY);
        enum MHD_Result ret;

        if (!r)
                return MHD_NO;
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
        ret = MHD_queue_response(c, code, r);
        MHD_destroy_response(r);
        return ret;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *v, const char *upload,
                              size_t *upload_size, void **con_cls) {
        char text[256];

        if (strcmp(url, "/healthz") == 0) {
                bool ready = since_start() >= ready_after;
                return reply(c, ready ? 200 : 503, ready ? "ok\n" : "starting\n");
        }
        if (strcmp(url, "/version") == 0) {
                snprintf(text, sizeof text, "%s\n", version);
                return reply(c, 200, text);
        }
        snprintf(text, sizeof text, "hello from tend-example-web %s (pid %d)\n", version,
                 (int) getpid());
        return reply(c, 200, text);
}

static int usage(FILE *f, int code) {
        fprintf(f, "Usage: tend-example-web [--version=V] [--ready-after=SECONDS] "
                   "[--drain=SECONDS]\n"
                   "                        [--watchdog-stop-after=SECONDS]\n\n"
                   "Serves on 127.0.0.1:$PORT: / (hello), /version, /healthz (503 until\n"
                   "--ready-after seconds have passed, then 200). On SIGTERM, serves on for\n"
                   "--drain seconds, then exits 0. Takes a socket from LISTEN_FDS, and speaks\n"
                   "to NOTIFY_SOCKET (READY=1 once ready, WATCHDOG=1, until\n"
                   "--watchdog-stop-after seconds), as a systemd service would.\n");
        return code;
}

static int number(const char *opt, const char *s, double *ret) {
        char *end;
        errno = 0;
        *ret = strtod(s, &end);
        if (errno || end == s || *end || *ret < 0) {
                fprintf(stderr, "tend-example-web: --%s %s: expected seconds, e.g. 0.5\n", opt, s);
                return -1;
        }
        return 0;
}

int main(int argc, char **argv) {
        static const struct option options[] = {
                { "version", required_argument, NULL, 'v' },
                { "ready-after", required_argument, NULL, 'r' },
                { "drain", required_argument, NULL, 'd' },
                { "watchdog-stop-after", required_argument, NULL, 'w' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        const char *port_s = getenv("PORT");
        struct MHD_Daemon *d;
        sigset_t set;
        long port;
        int opt, sig;

        clock_gettime(CLOCK_MONOTONIC, &started);
        while ((opt = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (opt) {
                case 'v':
                        version = optarg;
                        break;
                case 'r':
                        if (number("ready-after", optarg, &ready_after) < 0)
                                return 2;
                        break;
                case 'd':
                        if (number("drain", optarg, &drain) < 0)
                                return 2;
                        break;
                case 'w':
                        if (number("watchdog-stop-after", optarg, &watchdog_stop_after) < 0)
                                return 2;
                        break;
                case 'h':
                        return usage(stdout, 0);
                default:
                        return usage(stderr, 2);
                }
        port = port_s ? strtol(port_s, NULL, 10) : 8080;
        if (port < 1 || port > 65535) {
                fprintf(stderr, "tend-example-web: PORT=%s: expected a port number\n",
                        port_s ? port_s : "");
                return 2;
        }

        /* SIGTERM is taken by sigwait() below, not by a handler. */
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        sigaddset(&set, SIGINT);
        pthread_sigmask(SIG_BLOCK, &set, NULL);

        int held = sd_listen_fds(1) >= 1 ? SD_LISTEN_FDS_START : -1;
        struct sockaddr_in sa = { .sin_family = AF_INET,
                                  .sin_port = htons((uint16_t) port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        if (held >= 0)
                d = MHD_start_daemon(
                        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG, 0, NULL,
                        NULL, answer, NULL, MHD_OPTION_LISTEN_SOCKET, held, MHD_OPTION_END);
        else
                d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ITC |
                                             MHD_USE_ERROR_LOG,
                                     (uint16_t) port, NULL, NULL, answer, NULL,
                                     MHD_OPTION_SOCK_ADDR, &sa, MHD_OPTION_END);
        if (!d) {
                if (held >= 0)
                        fprintf(stderr, "tend-example-web: cannot serve on fd %d: %s\n", held,
                                strerror(errno));
                else
                        fprintf(stderr, "tend-example-web: cannot listen on 127.0.0.1:%ld: %s\n",
                                port, strerror(errno));
                return 1;
        }
        if (held >= 0)
                printf("tend-example-web %s: serving on the socket it was given (fd %d), ready "
                       "after %gs\n",
                       version, held, ready_after);
        else
                printf("tend-example-web %s: listening on 127.0.0.1:%ld, ready after %gs\n",
                       version, port, ready_after);
        fflush(stdout);

        /* Wait for a signal, saying READY=1 and WATCHDOG=1 on the way. */
        uint64_t wd_usec = 0;
        bool notified = false;
        if (sd_watchdog_enabled(0, &wd_usec) <= 0)
                wd_usec = 0;
        for (;;) {
                double now = since_start(), tick = 3600;
                struct timespec ts;
                if (!notified && now >= ready_after) {
                        sd_notifyf(0, "READY=1\nSTATUS=serving %s", version);
                        notified = true;
                }
                if (wd_usec && (watchdog_stop_after < 0 || now < watchdog_stop_after))
                        sd_notify(0, "WATCHDOG=1");
                if (!notified)
                        tick = ready_after - now;
                if (wd_usec && wd_usec / 2e6 < tick)
                        tick = wd_usec / 2e6;
                ts.tv_sec = (time_t) tick;
                ts.tv_nsec = (long) ((tick - (double) ts.tv_sec) * 1e9);
                sig = sigtimedwait(&set, NULL, &ts);
                if (sig > 0)
                        break;
        }
        printf("tend-example-web %s: %s; draining for %gs\n", version, strsignal(sig), drain);
        fflush(stdout);
        if (held >= 0) {
                /* The others that share the socket take the queue from now. */
                MHD_socket s = MHD_quiesce_daemon(d);
                if (s != MHD_INVALID_SOCKET)
                        close(s);
        }
        if (drain > 0) {
                struct timespec ts = { .tv_sec = (time_t) drain,
                                       .tv_nsec = (long) ((drain - (double) (time_t) drain) *
                                                          1e9) };
                while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                        ;
        }
        MHD_stop_daemon(d);
        printf("tend-example-web %s: bye\n", version);
        return 0;
}
