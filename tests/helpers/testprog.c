/* SPDX-License-Identifier: MIT */

/*
 * tend-testprog MODE [ARGS]: a small program for the runtime tests to run as
 * a pod. Modes:
 *   exit N            exit with status N
 *   sleep             sleep until killed
 *   ignore-term       ignore SIGTERM, sleep until killed
 *   grandchild        fork a child that sleeps, print its pid, exit 0
 *   group             fork a child that sleeps (in our group), print its pid, sleep
 *   escapee           fork a child that forks a daemon (setsid(), so out of our
 *                     group) and exits; print "escapee PID", sleep
 *   env               print the environment, one per line, then sleep
 *   argv              print the arguments, one per line, then sleep
 *   ids               print "uid gid ngroups cwd", then sleep
 *   fds               print the open file descriptors ("fds: 0 1 2"), then sleep
 *   signals           print SigBlk, SigIgn and SigCgt of /proc/self/status, then sleep
 *   spew              write numbered lines to stdout as fast as possible
 *   http PORT CODE [DELAY_MS]
 *                     serve every request with CODE after DELAY_MS (and, at
 *                     /stream, a body that never ends; /fail: 500;
 *                     /redirect-self → /healthz, /redirect-fail → /fail,
 *                     /redirect-loop → itself, /redirect-away → another host)
 *   tcp PORT          listen and accept, never answer
 *   tcp-full PORT     listen with a full accept queue (connects hang)
 *   now               print CLOCK_MONOTONIC in microseconds (tendd's clock) and exit
 */

#include <arpa/inet.h>
#include <dirent.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static void sleep_forever(void) {
        for (;;)
                pause();
}

static int listen_on(int port, int backlog) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t) port) };
        int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (fd < 0 || bind(fd, (struct sockaddr *) &sa, sizeof sa) < 0 || listen(fd, backlog) < 0) {
                perror("listen");
                exit(2);
        }
        return fd;
}

static unsigned http_code, http_delay_ms;

static ssize_t endless(void *cls, uint64_t pos, char *buf, size_t max) {
        memset(buf, 'x', max);
        return (ssize_t) max;
}

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **con_cls) {
        static const char body[] = "ok\n";
        struct MHD_Response *r;
        enum MHD_Result ret;

        if (!*con_cls) { /* queue on the second call (keep-alive pitfall) */
                *con_cls = c;
                return MHD_YES;
        }
        if (http_delay_ms)
                usleep(http_delay_ms * 1000);
        if (!strncmp(url, "/redirect-", 10)) {
                const char *to = !strcmp(url, "/redirect-self")   ? "/healthz"
                                 : !strcmp(url, "/redirect-fail") ? "/fail"
                                 : !strcmp(url, "/redirect-loop") ? "/redirect-loop"
                                                                  : "http://192.0.2.1:9/";
                r = MHD_create_response_from_buffer(0, (void *) "", MHD_RESPMEM_PERSISTENT);
                MHD_add_response_header(r, "Location", to);
                ret = MHD_queue_response(c, 302, r);
                MHD_destroy_response(r);
                return ret;
        }
        if (!strcmp(url, "/fail")) {
                r = MHD_create_response_from_buffer(0, (void *) "", MHD_RESPMEM_PERSISTENT);
                ret = MHD_queue_response(c, 500, r);
                MHD_destroy_response(r);
                return ret;
        }
        if (!strcmp(url, "/stream"))
                r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, endless, NULL, NULL);
        else
                r = MHD_create_response_from_buffer(sizeof body - 1, (void *) body,
                                                    MHD_RESPMEM_PERSISTENT);
        ret = MHD_queue_response(c, http_code, r);
        MHD_destroy_response(r);
        return ret;
}

int main(int argc, char **argv) {
        const char *mode = argc > 1 ? argv[1] : "sleep";

        setvbuf(stdout, NULL, _IOLBF, 0);
        if (!strcmp(mode, "now")) {
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                printf("%lld\n", (long long) ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
                return 0;
        }
        if (!strcmp(mode, "exit"))
                return argc > 2 ? atoi(argv[2]) : 0;
        if (!strcmp(mode, "sleep"))
                sleep_forever();
        if (!strcmp(mode, "ignore-term")) {
                signal(SIGTERM, SIG_IGN);
                printf("ignoring SIGTERM\n");
                sleep_forever();
        }
        if (!strcmp(mode, "group")) {
                pid_t pid = fork();
                if (pid == 0)
                        sleep_forever();
                printf("member %d\n", (int) pid);
                sleep_forever();
        }
        if (!strcmp(mode, "escapee")) {
                int fds[2];
                pid_t mid, d = 0;
                if (pipe(fds) < 0)
                        return 1;
                mid = fork();
                if (mid == 0) {
                        d = fork();
                        if (d == 0) {
                                setsid();
                                sleep_forever();
                        }
                        (void) !write(fds[1], &d, sizeof d);
                        _exit(0);
                }
                if (read(fds[0], &d, sizeof d) != sizeof d)
                        return 1;
                waitpid(mid, NULL, 0);
                printf("escapee %d\n", (int) d);
                sleep_forever();
        }
        if (!strcmp(mode, "grandchild")) {
                pid_t pid = fork();
                if (pid == 0)
                        sleep_forever();
                printf("grandchild %d\n", (int) pid);
                return 0;
        }
        if (!strcmp(mode, "env")) {
                for (char **e = environ; *e; e++)
                        printf("%s\n", *e);
                sleep_forever();
        }
        if (!strcmp(mode, "argv")) {
                for (int i = 0; i < argc; i++)
                        printf("%s\n", argv[i]);
                sleep_forever();
        }
        if (!strcmp(mode, "ids")) {
                char cwd[4096];
                printf("%u %u %d %s\n", (unsigned) getuid(), (unsigned) getgid(),
                       getgroups(0, NULL), getcwd(cwd, sizeof cwd) ? cwd : "?");
                sleep_forever();
        }
        if (!strcmp(mode, "fds")) {
                DIR *d = opendir("/proc/self/fd");
                struct dirent *de;
                int self = dirfd(d);
                printf("fds:");
                while ((de = readdir(d)))
                        if (de->d_name[0] != '.' && atoi(de->d_name) != self)
                                printf(" %s", de->d_name);
                printf("\n");
                closedir(d);
                sleep_forever();
        }
        if (!strcmp(mode, "signals")) {
                /* what the agent left it: ignored, blocked, caught */
                FILE *f = fopen("/proc/self/status", "r");
                char line[256];
                while (f && fgets(line, sizeof line, f))
                        if (!strncmp(line, "SigBlk:", 7) || !strncmp(line, "SigIgn:", 7) ||
                            !strncmp(line, "SigCgt:", 7))
                                fputs(line, stdout);
                if (f)
                        fclose(f);
                fflush(stdout);
                sleep_forever();
        }
        if (!strcmp(mode, "spew")) {
                for (unsigned long i = 0;; i++)
                        printf("line %lu 0123456789012345678901234567890123456789\n", i);
        }
        if (!strcmp(mode, "http") && argc > 3) {
                struct MHD_Daemon *d;
                http_code = (unsigned) atoi(argv[3]);
                http_delay_ms = argc > 4 ? (unsigned) atoi(argv[4]) : 0;
                d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD |
                                             MHD_USE_THREAD_PER_CONNECTION,
                                     (uint16_t) atoi(argv[2]), NULL, NULL, answer, NULL,
                                     MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024, MHD_OPTION_END);
                if (!d) {
                        perror("MHD_start_daemon");
                        return 2;
                }
                printf("listening on %s\n", argv[2]);
                sleep_forever();
        }
        if (!strcmp(mode, "tcp") && argc > 2) {
                int fd = listen_on(atoi(argv[2]), 1024);
                printf("listening on %s\n", argv[2]);
                for (;;) {
                        int c = accept(fd, NULL, NULL);
                        if (c >= 0)
                                close(c);
                }
        }
        if (!strcmp(mode, "tcp-full") && argc > 2) {
                int fd = listen_on(atoi(argv[2]), 0);
                struct sockaddr_in sa = { .sin_family = AF_INET,
                                          .sin_port = htons((uint16_t) atoi(argv[2])) };
                sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
                /* Fill the accept queue ourselves; later SYNs are dropped. */
                for (int i = 0; i < 4; i++) {
                        int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
                        connect(c, (struct sockaddr *) &sa, sizeof sa);
                }
                (void) fd;
                printf("listening on %s (full)\n", argv[2]);
                sleep_forever();
        }
        fprintf(stderr, "tend-testprog: unknown mode %s\n", mode);
        return 2;
}
