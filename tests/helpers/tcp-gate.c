/* SPDX-License-Identifier: MIT */

/*
 * tend-tcp-gate PORT...: a TCP relay on loopback for the fleet tests
 * (docs/fleet.md §4). For each target PORT it listens on a free loopback port,
 * prints that port (one line per target, in order, then "ready"), and
 * relays every connection to 127.0.0.1:PORT, both ways.
 *
 * It is the network between one tendd and etcd: `kill -STOP` turns it into
 * a blackhole partition (connections stay open, nothing passes, new ones
 * wait in the backlog), `kill -CONT` heals it.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

typedef struct pipe_pair {
        uv_tcp_t a, b; /* the client's, the target's */
        uv_connect_t connect;
        int open;
        int closing;
} pipe_pair;

static void on_closed(uv_handle_t *h) {
        pipe_pair *p = h->data;
        if (--p->open == 0)
                free(p);
}

static void close_pair(pipe_pair *p) {
        if (p->closing)
                return;
        p->closing = 1;
        uv_close((uv_handle_t *) &p->a, on_closed);
        uv_close((uv_handle_t *) &p->b, on_closed);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
        buf->base = malloc(65536);
        buf->len = buf->base ? 65536 : 0;
}

static void on_written(uv_write_t *w, int status) {
        free(w->data);
        free(w);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
        pipe_pair *p = s->data;
        uv_stream_t *to = s == (uv_stream_t *) &p->a ? (uv_stream_t *) &p->b
                                                     : (uv_stream_t *) &p->a;

        if (n < 0) {
                free(buf->base);
                close_pair(p);
                return;
        }
        if (n == 0) {
                free(buf->base);
                return;
        }
        uv_write_t *w = malloc(sizeof *w);
        uv_buf_t out = uv_buf_init(buf->base, (unsigned) n);
        if (!w || p->closing) {
                free(w);
                free(buf->base);
                return;
        }
        w->data = buf->base;
        if (uv_write(w, to, &out, 1, on_written) < 0) {
                free(w);
                free(buf->base);
                close_pair(p);
        }
}

static void on_target(uv_connect_t *c, int status) {
        pipe_pair *p = c->data;

        if (status < 0) {
                close_pair(p);
                return;
        }
        uv_read_start((uv_stream_t *) &p->a, on_alloc, on_read);
        uv_read_start((uv_stream_t *) &p->b, on_alloc, on_read);
}

static void on_connection(uv_stream_t *server, int status) {
        int target = (int) (intptr_t) server->data;
        struct sockaddr_in addr;
        pipe_pair *p;

        if (status < 0 || !(p = calloc(1, sizeof *p)))
                return;
        uv_tcp_init(server->loop, &p->a);
        uv_tcp_init(server->loop, &p->b);
        p->a.data = p->b.data = p->connect.data = p;
        p->open = 2;
        if (uv_accept(server, (uv_stream_t *) &p->a) < 0) {
                close_pair(p);
                return;
        }
        uv_ip4_addr("127.0.0.1", target, &addr);
        if (uv_tcp_connect(&p->connect, &p->b, (const struct sockaddr *) &addr, on_target) < 0)
                close_pair(p);
}

int main(int argc, char **argv) {
        uv_loop_t *loop = uv_default_loop();

        if (argc < 2) {
                fprintf(stderr, "usage: tend-tcp-gate PORT...\n");
                return 2;
        }
        for (int i = 1; i < argc; i++) {
                uv_tcp_t *server = malloc(sizeof *server);
                struct sockaddr_in addr;
                struct sockaddr_storage bound;
                int len = sizeof bound;

                if (!server)
                        return 1;
                uv_tcp_init(loop, server);
                server->data = (void *) (intptr_t) atoi(argv[i]);
                uv_ip4_addr("127.0.0.1", 0, &addr);
                if (uv_tcp_bind(server, (const struct sockaddr *) &addr, 0) < 0 ||
                    uv_listen((uv_stream_t *) server, 128, on_connection) < 0 ||
                    uv_tcp_getsockname(server, (struct sockaddr *) &bound, &len) < 0) {
                        fprintf(stderr, "tend-tcp-gate: cannot listen\n");
                        return 1;
                }
                printf("%d\n", ntohs(((struct sockaddr_in *) &bound)->sin_port));
        }
        printf("ready\n");
        fflush(stdout);
        return uv_run(loop, UV_RUN_DEFAULT);
}
