/* SPDX-License-Identifier: MIT */

/*
 * libcurl's multi-socket interface on the libuv loop: one uv_poll_t per
 * socket curl asks us to watch, one uv_timer_t for curl's timeout, and the
 * finished transfers drained after every action. Nothing here blocks.
 *
 * Lifetime: the net_curl is referenced by itself until net_curl_close(),
 * by its timer, and by each socket's poll handle; the last unref cleans
 * the multi handle up and frees it (docs/conventions.md: freed only once libuv has
 * closed every handle that points at it).
 */

#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "tend/base.h"
#include "tend/net.h"

struct net_curl {
        uv_loop_t *loop;
        CURLM *multi;
        uv_timer_t timer;
        unsigned refs;
};

typedef struct curl_sock {
        uv_poll_t poll;
        curl_socket_t fd;
        net_curl *n;
} curl_sock;

typedef struct transfer {
        net_curl_done done;
        void *userdata;
} transfer;

static net_curl *ref(net_curl *n) {
        n->refs++;
        return n;
}

static void unref(net_curl *n) {
        if (--n->refs > 0)
                return;
        if (n->multi)
                curl_multi_cleanup(n->multi);
        free(n);
}

static void drain(net_curl *n) {
        CURLMsg *msg;
        int left;

        while ((msg = curl_multi_info_read(n->multi, &left))) {
                CURL *easy = msg->easy_handle;
                CURLcode result = msg->data.result;
                transfer *t = NULL;
                long status = 0;

                if (msg->msg != CURLMSG_DONE)
                        continue;
                (void) curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **) &t);
                (void) curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
                curl_multi_remove_handle(n->multi, easy);
                curl_easy_setopt(easy, CURLOPT_PRIVATE, NULL);
                if (t) {
                        transfer copy = *t;
                        free(t);
                        copy.done(copy.userdata, result, status);
                }
        }
}

static void on_poll(uv_poll_t *h, int status, int events) {
        curl_sock *cs = h->data;
        net_curl *n = ref(cs->n);
        int flags = 0, running;

        if (status < 0)
                flags = CURL_CSELECT_ERR;
        if (events & UV_READABLE)
                flags |= CURL_CSELECT_IN;
        if (events & UV_WRITABLE)
                flags |= CURL_CSELECT_OUT;
        curl_multi_socket_action(n->multi, cs->fd, flags, &running);
        drain(n);
        unref(n);
}

static void on_sock_closed(uv_handle_t *h) {
        curl_sock *cs = h->data;
        unref(cs->n);
        free(cs);
}

static int on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp) {
        net_curl *n = userp;
        curl_sock *cs = socketp;
        int events = 0;

        if (what == CURL_POLL_REMOVE) {
                if (cs) {
                        /* Stop and close the poll handle before curl closes
                         * the socket under it. */
                        uv_poll_stop(&cs->poll);
                        uv_close((uv_handle_t *) &cs->poll, on_sock_closed);
                        curl_multi_assign(n->multi, s, NULL);
                }
                return 0;
        }
        if (!cs) {
                cs = new0(curl_sock, 1);
                if (!cs)
                        return -1;
                if (uv_poll_init_socket(n->loop, &cs->poll, s) < 0) {
                        free(cs);
                        return -1;
                }
                cs->fd = s;
                cs->n = ref(n);
                cs->poll.data = cs;
                curl_multi_assign(n->multi, s, cs);
        }
        if (what & CURL_POLL_IN)
                events |= UV_READABLE;
        if (what & CURL_POLL_OUT)
                events |= UV_WRITABLE;
        uv_poll_start(&cs->poll, events, on_poll);
        return 0;
}

static void on_timeout(uv_timer_t *t) {
        net_curl *n = ref(t->data);
        int running;

        curl_multi_socket_action(n->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        drain(n);
        unref(n);
}

/* Never calls curl from here (curl's rule): only arms the timer. */
static int on_timer(CURLM *multi, long timeout_ms, void *userp) {
        net_curl *n = userp;

        if (timeout_ms < 0)
                uv_timer_stop(&n->timer);
        else
                uv_timer_start(&n->timer, on_timeout, (uint64_t) timeout_ms, 0);
        return 0;
}

int net_curl_new(uv_loop_t *loop, net_curl **ret) {
        static bool global_done = false;
        net_curl *n;

        if (!global_done) {
                if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                        return -EIO;
                global_done = true;
        }
        n = new0(net_curl, 1);
        if (!n)
                return -ENOMEM;
        n->loop = loop;
        n->refs = 1;
        n->multi = curl_multi_init();
        if (!n->multi) {
                free(n);
                return -ENOMEM;
        }
        curl_multi_setopt(n->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
        curl_multi_setopt(n->multi, CURLMOPT_SOCKETDATA, n);
        curl_multi_setopt(n->multi, CURLMOPT_TIMERFUNCTION, on_timer);
        curl_multi_setopt(n->multi, CURLMOPT_TIMERDATA, n);
        uv_timer_init(loop, &n->timer);
        n->timer.data = ref(n);
        *ret = n;
        return 0;
}

static void on_timer_closed(uv_handle_t *h) {
        unref(h->data);
}

void net_curl_close(net_curl *n) {
        if (!n)
                return;
        uv_close((uv_handle_t *) &n->timer, on_timer_closed);
        unref(n);
}

/* Connections are opened CLOEXEC like everything of ours. */
static curl_socket_t open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *a) {
        return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

int net_curl_start(net_curl *n, CURL *easy, net_curl_done done, void *userdata) {
        transfer *t = new0(transfer, 1);

        if (!t)
                return -ENOMEM;
        curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, open_socket);
        t->done = done;
        t->userdata = userdata;
        curl_easy_setopt(easy, CURLOPT_PRIVATE, t);
        if (curl_multi_add_handle(n->multi, easy) != CURLM_OK) {
                curl_easy_setopt(easy, CURLOPT_PRIVATE, NULL);
                free(t);
                return -EIO;
        }
        return 0;
}

void net_curl_cancel(net_curl *n, CURL *easy) {
        transfer *t = NULL;

        (void) curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **) &t);
        if (!t)
                return; /* finished already */
        curl_multi_remove_handle(n->multi, easy);
        curl_easy_setopt(easy, CURLOPT_PRIVATE, NULL);
        free(t);
}
