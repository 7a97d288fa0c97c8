/* SPDX-License-Identifier: MIT */

/*
 * libcurl's multi-socket interface on the libuv loop: one uv_poll_t per
 * socket curl asks us to watch, one uv_timer_t for curl's timeout, and the
 * finished transfers drained after every action. Nothing here blocks.
 */

#include <sys/socket.h>

#include "rt-internal.h"

typedef struct curl_sock {
        uv_poll_t poll;
        curl_socket_t fd;
        rt_manager *m;
} curl_sock;

typedef struct transfer {
        rt_curl_done done;
        void *userdata;
} transfer;

static void drain(rt_manager *m) {
        CURLMsg *msg;
        int left;

        while ((msg = curl_multi_info_read(m->curlm, &left))) {
                CURL *easy = msg->easy_handle;
                CURLcode result = msg->data.result;
                transfer *t = NULL;
                long status = 0;

                if (msg->msg != CURLMSG_DONE)
                        continue;
                (void) curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **) &t);
                (void) curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status);
                curl_multi_remove_handle(m->curlm, easy);
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
        rt_manager *m = cs->m;
        int flags = 0, running;

        if (status < 0)
                flags = CURL_CSELECT_ERR;
        if (events & UV_READABLE)
                flags |= CURL_CSELECT_IN;
        if (events & UV_WRITABLE)
                flags |= CURL_CSELECT_OUT;
        rt__manager_ref(m);
        curl_multi_socket_action(m->curlm, cs->fd, flags, &running);
        drain(m);
        rt__manager_unref(m);
}

static void on_sock_closed(uv_handle_t *h) {
        curl_sock *cs = h->data;
        rt__manager_unref(cs->m);
        free(cs);
}

static int on_socket(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp) {
        rt_manager *m = userp;
        curl_sock *cs = socketp;
        int events = 0;

        if (what == CURL_POLL_REMOVE) {
                if (cs) {
                        /* Stop and close the poll handle before curl closes
                         * the socket under it. */
                        uv_poll_stop(&cs->poll);
                        uv_close((uv_handle_t *) &cs->poll, on_sock_closed);
                        curl_multi_assign(m->curlm, s, NULL);
                }
                return 0;
        }
        if (!cs) {
                cs = new0(curl_sock, 1);
                if (!cs)
                        return -1;
                if (uv_poll_init_socket(m->loop, &cs->poll, s) < 0) {
                        free(cs);
                        return -1;
                }
                cs->fd = s;
                cs->m = m;
                cs->poll.data = cs;
                rt__manager_ref(m);
                curl_multi_assign(m->curlm, s, cs);
        }
        if (what & CURL_POLL_IN)
                events |= UV_READABLE;
        if (what & CURL_POLL_OUT)
                events |= UV_WRITABLE;
        uv_poll_start(&cs->poll, events, on_poll);
        return 0;
}

static void on_timeout(uv_timer_t *t) {
        rt_manager *m = t->data;
        int running;

        rt__manager_ref(m);
        curl_multi_socket_action(m->curlm, CURL_SOCKET_TIMEOUT, 0, &running);
        drain(m);
        rt__manager_unref(m);
}

/* Never calls curl from here (curl's rule): only arms the timer. */
static int on_timer(CURLM *multi, long timeout_ms, void *userp) {
        rt_manager *m = userp;

        if (timeout_ms < 0)
                uv_timer_stop(&m->curl_timer);
        else
                uv_timer_start(&m->curl_timer, on_timeout, (uint64_t) timeout_ms, 0);
        return 0;
}

int rt__curl_init(rt_manager *m) {
        static bool global_done = false;

        if (!global_done) {
                if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                        return -EIO;
                global_done = true;
        }
        m->curlm = curl_multi_init();
        if (!m->curlm)
                return -ENOMEM;
        curl_multi_setopt(m->curlm, CURLMOPT_SOCKETFUNCTION, on_socket);
        curl_multi_setopt(m->curlm, CURLMOPT_SOCKETDATA, m);
        curl_multi_setopt(m->curlm, CURLMOPT_TIMERFUNCTION, on_timer);
        curl_multi_setopt(m->curlm, CURLMOPT_TIMERDATA, m);
        uv_timer_init(m->loop, &m->curl_timer);
        m->curl_timer.data = m;
        rt__manager_ref(m);
        return 0;
}

void rt__curl_close(rt_manager *m) {
        if (m->curlm)
                curl_multi_cleanup(m->curlm);
        m->curlm = NULL;
}

/* Probe connections are opened CLOEXEC like everything of ours. */
static curl_socket_t open_socket(void *clientp, curlsocktype purpose, struct curl_sockaddr *a) {
        return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

int rt__curl_start(rt_manager *m, CURL *easy, rt_curl_done done, void *userdata) {
        transfer *t = new0(transfer, 1);

        if (!t)
                return -ENOMEM;
        curl_easy_setopt(easy, CURLOPT_OPENSOCKETFUNCTION, open_socket);
        t->done = done;
        t->userdata = userdata;
        curl_easy_setopt(easy, CURLOPT_PRIVATE, t);
        if (curl_multi_add_handle(m->curlm, easy) != CURLM_OK) {
                curl_easy_setopt(easy, CURLOPT_PRIVATE, NULL);
                free(t);
                return -EIO;
        }
        return 0;
}

void rt__curl_cancel(rt_manager *m, CURL *easy) {
        transfer *t = NULL;

        (void) curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **) &t);
        if (!t)
                return; /* finished already */
        curl_multi_remove_handle(m->curlm, easy);
        curl_easy_setopt(easy, CURLOPT_PRIVATE, NULL);
        free(t);
}
