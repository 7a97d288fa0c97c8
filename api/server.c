/* SPDX-License-Identifier: MIT */

/* The HTTP API (tend/api.h): the server — MHD on the loop, listeners, authorisation, setup and
 * teardown. */

#include <sys/un.h>

#include "api-internal.h"

/* Is gid one of the groups of pid? (supplementary groups from /proc.) */
static bool pid_in_group(pid_t pid, gid_t gid) {
        char path[64];
        _cleanup_free_ char *status = NULL;
        const char *g;

        snprintf(path, sizeof path, "/proc/%d/status", (int) pid);
        if (read_full_file(path, 65536, &status, NULL) < 0 || !(g = strstr(status, "\nGroups:")))
                return false;
        for (g += 8; *g && *g != '\n';) {
                char *end;
                unsigned long v = strtoul(g, &end, 10);
                if (end == g)
                        break;
                if ((gid_t) v == gid)
                        return true;
                g = end;
                while (*g == ' ' || *g == '\t')
                        g++;
        }
        return false;
}
void api__authorize(req *r) {
        api_server *s = r->s;

        if (r->slot->tcp) {
                const char *auth = api__header(r, MHD_HTTP_HEADER_AUTHORIZATION);
                const char *tok = auth ? startswith(auth, "Bearer ") : NULL;
                size_t a, b;
                unsigned diff = 0;

                if (!tok || !s->token) {
                        r->deny = 401;
                        r->deny_message = strdup("a bearer token is required (Authorization: "
                                                 "Bearer <token>)");
                        return;
                }
                /* Constant time in the token's length. */
                a = strlen(tok);
                b = strlen(s->token);
                diff = (unsigned) (a ^ b);
                for (size_t i = 0; i < b; i++)
                        diff |= (unsigned) (s->token[i] ^ (i < a ? tok[i] : 0));
                if (diff) {
                        r->deny = 401;
                        r->deny_message = strdup("the bearer token is not valid");
                }
                return;
        }

        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
                r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct ucred cred;
        socklen_t len = sizeof cred;

        if (!ci || getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
                r->deny = 403;
                r->deny_message = strdup("cannot tell who is connecting");
                return;
        }
        r->peer_known = true;
        r->peer_uid = cred.uid;
        if (cred.uid == 0 || cred.uid == geteuid())
                return;
        if (s->has_group && (cred.gid == s->group || pid_in_group(cred.pid, s->group)))
                return;
        r->deny = 403;
        r->deny_message = strprintf("uid %u may not use this socket: it is for root, uid %u%s",
                                    (unsigned) cred.uid, (unsigned) geteuid(),
                                    s->has_group ? " and the members of --socket-group" : "");
}
/* ---- setup and teardown ---------------------------------------------------------------------- */

static void on_handle_closed(uv_handle_t *h) {
        api_server *s = h->data;
        if (--s->open_handles > 0)
                return;
        for (size_t k = 0; k < s->ring_n; k++) {
                change *c = &s->ring[(s->ring_head + k) % CHANGE_RING];
                free(c->line);
        }
        free(s->state_dir);
        free(s->socket_path);
        free(s->token);
        free(s->listen_url);
        api__tls_done(&s->tls);
        api__openapi_done(s);
        api__usage_done(s);
        free(s);
}

static int bind_unix(const char *path, gid_t group, bool has_group, char **ret_error) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *dir = strdup(path);
        char *slash;
        int r;

        if (!dir)
                return -ENOMEM;
        if (strlen(path) >= sizeof sa.sun_path) {
                *ret_error = strprintf("socket path %s is too long (at most %zu bytes)", path,
                                       sizeof sa.sun_path - 1);
                return -ENAMETOOLONG;
        }
        slash = strrchr(dir, '/');
        if (slash && slash != dir) {
                *slash = 0;
                if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
                        r = -errno;
                        *ret_error = strprintf("cannot create %s: %s", dir, strerror(-r));
                        return r;
                }
        }
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        /* A leftover socket: in use by a live agent, or stale? */
        if (access(path, F_OK) == 0) {
                int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                bool live = probe >= 0 && connect(probe, (struct sockaddr *) &sa, sizeof sa) == 0;
                struct ucred peer = {};
                socklen_t len = sizeof peer;
                if (live)
                        (void) getsockopt(probe, SOL_SOCKET, SO_PEERCRED, &peer, &len);
                safe_close(probe);
                if (live) {
                        _cleanup_free_ char *comm = NULL;
                        char cpath[64];
                        snprintf(cpath, sizeof cpath, "/proc/%d/comm", (int) peer.pid);
                        if (peer.pid > 0 && read_full_file(cpath, 64, &comm, NULL) >= 0)
                                comm[strcspn(comm, "\n")] = 0;
                        char who[64] = "another process";
                        if (peer.pid > 0)
                                snprintf(who, sizeof who, "%s (pid %d)", comm ?: "a process",
                                         (int) peer.pid);
                        *ret_error = strprintf("socket %s is in use by %s; stop it first or "
                                               "choose another --socket",
                                               path, who);
                        return -EADDRINUSE;
                }
                (void) unlink(path);
        }
        if (bind(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                r = -errno;
                *ret_error = strprintf("cannot bind %s: %s", path, strerror(-r));
                return r;
        }
        if (chmod(path, 0660) < 0 || (has_group && chown(path, (uid_t) -1, group) < 0)) {
                r = -errno;
                *ret_error = strprintf("cannot set the mode of %s: %s", path, strerror(-r));
                return r;
        }
        if (listen(fd, 1024) < 0)
                return -errno;
        return TAKE_FD(fd);
}

static int bind_tcp(const char *listen_at, bool own_cert, unsigned char ret_ip[4],
                    char **ret_error) {
        _cleanup_free_ char *host = strdup(listen_at);
        struct sockaddr_in sa = { .sin_family = AF_INET };
        _cleanup_close_ int fd = -EBADF;
        char *colon;
        int64_t port;
        int one = 1, r;

        if (!host)
                return -ENOMEM;
        colon = strrchr(host, ':');
        if (!colon || safe_atoi64(colon + 1, &port) < 0 || port < 1 || port > 65535) {
                *ret_error = strprintf("--listen %s: expected 127.0.0.1:PORT", listen_at);
                return -EINVAL;
        }
        *colon = 0;
        if (uv_ip4_addr(host, (int) port, &sa) < 0) {
                *ret_error = strprintf("--listen %s: %s is not an IPv4 address", listen_at, host);
                return -EINVAL;
        }
        memcpy(ret_ip, &sa.sin_addr.s_addr, 4);
        /* The certificate tendd makes is its own CA's: fine for a client
         * that was handed that CA (tend kubeconfig), not a promise to be
         * made to a network. Anything but loopback takes the user's. */
        if ((ntohl(sa.sin_addr.s_addr) >> 24) != 127 && !own_cert) {
                *ret_error = strprintf("--listen %s: only loopback addresses (127.0.0.0/8) are "
                                       "served with the certificate tendd makes; to serve %s, "
                                       "give --tls-cert and --tls-key of a certificate for it",
                                       listen_at, host);
                return -EINVAL;
        }
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, (struct sockaddr *) &sa, sizeof sa) < 0 || listen(fd, 1024) < 0) {
                r = -errno;
                *ret_error = strprintf("cannot listen on %s: %s", listen_at, strerror(-r));
                return r;
        }
        return TAKE_FD(fd);
}

/* libmicrohttpd's own messages (a client that went away mid-answer, ...)
 * are about one connection, not tendd: debug level, in our log. */
_printf_(2, 0) static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
        char line[512];
        size_t n;

        (void) cls;
        (void) vsnprintf(line, sizeof line, fmt, ap);
        n = strlen(line);
        while (n > 0 && line[n - 1] == '\n')
                line[--n] = 0;
        /* A connection not accepted: said, at most once a minute (most
         * often tendd out of descriptors, which its pods hold). */
        if (startswith(line, "Error accepting connection") ||
            startswith(line, "Hit process or system resource limit")) {
                static usec_t said;
                usec_t now = now_monotonic();
                if (!said || now - said >= 60 * USEC_PER_SEC) {
                        said = now;
                        log_warning("http: %s (the API cannot take a connection: raise tendd's "
                                    "file descriptor limit, LimitNOFILE= or ulimit -n, or run "
                                    "fewer pods)",
                                    line);
                        return;
                }
        }
        log_debug("http: %s", line);
}

/* Connections per listener. The local socket has a pool of its own that
 * TCP clients cannot use up, and TCP is kept well under the descriptors
 * the pods need (a pidfd and a log each). Idle connections are closed
 * after idle_timeout, so that a flood of them locks nobody out for long. */
/* TLS 1.2 and 1.3 only, with AEAD ciphers and forward secrecy (what Go's,
 * curl's and node's clients offer): TLS 1.0/1.1 and CBC with SHA-1 were
 * taken as long as no priority string was given. */
#define API_TLS_PRIORITIES                                                                       \
        "SECURE128:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-CIPHER-ALL:+AES-128-GCM:+AES-256-GCM:"   \
        "+CHACHA20-POLY1305:-MAC-ALL:+AEAD:-KX-ALL:+ECDHE-ECDSA:+ECDHE-RSA:-SIGN-ALL:+SIGN-ALL:" \
        "-SIGN-RSA-SHA1:-SIGN-ECDSA-SHA1"

#define UNIX_CONNECTIONS_MAX 1000
#define TCP_CONNECTIONS_MAX 256
/* ... and from one address, so that one cannot take all of TCP's */
#define TCP_PER_ADDRESS_MAX 32

static int start_slot(api_server *s, int fd, bool tcp, char **ret_error) {
        slot *sl = &s->slots[s->n_slots];
        const union MHD_DaemonInfo *info;
        unsigned timeout = (unsigned) MAX(s->idle_timeout / USEC_PER_SEC, 1);

        sl->s = s;
        sl->tcp = tcp;
        sl->fd = fd;
        struct MHD_OptionItem tls[] = {
                { MHD_OPTION_PER_IP_CONNECTION_LIMIT, TCP_PER_ADDRESS_MAX, NULL },
                { MHD_OPTION_HTTPS_MEM_KEY, 0, s->tls.key_pem },
                { MHD_OPTION_HTTPS_MEM_CERT, 0, s->tls.cert_pem },
                { MHD_OPTION_HTTPS_PRIORITIES, 0, (void *) API_TLS_PRIORITIES },
                { MHD_OPTION_END, 0, NULL },
        };

        /* TCP is HTTPS: client-go sends credentials only to https:// */
        sl->d = MHD_start_daemon(
                MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                        (tcp ? MHD_USE_TLS : 0),
                0, NULL, NULL, api__on_request, sl, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_ARRAY,
                tcp ? tls : tls + 4, MHD_OPTION_NOTIFY_COMPLETED, api__on_completed, NULL,
                MHD_OPTION_NOTIFY_CONNECTION, api__on_connection, sl,
                MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
                MHD_OPTION_CONNECTION_LIMIT, tcp ? TCP_CONNECTIONS_MAX : UNIX_CONNECTIONS_MAX,
                MHD_OPTION_CONNECTION_TIMEOUT, timeout, MHD_OPTION_END);
        if (!sl->d) {
                safe_close(fd);
                *ret_error = strdup("cannot start the HTTP server");
                return -EIO;
        }
        info = MHD_get_daemon_info(sl->d, MHD_DAEMON_INFO_EPOLL_FD);
        if (!info) {
                MHD_stop_daemon(sl->d);
                sl->d = NULL;
                *ret_error = strdup("the HTTP server has no epoll descriptor");
                return -EIO;
        }
        uv_poll_init(s->loop, &sl->poll, info->epoll_fd);
        sl->poll.data = sl;
        uv_poll_start(&sl->poll, UV_READABLE, api__on_slot_poll);
        uv_timer_init(s->loop, &sl->timer);
        sl->timer.data = sl;
        s->open_handles += 2;
        s->n_slots++;
        api__arm(sl);
        return 0;
}

int api_server_new(const api_config *c, api_server **ret, char **ret_error) {
        api_server *s = new0(api_server, 1);
        int fd, r;

        *ret_error = NULL;
        if (!s || api__resources_init() < 0) {
                free(s);
                return -ENOMEM;
        }
        s->loop = c->loop;
        s->agent = c->agent;
        s->store = agent_get_store(c->agent);
        s->state_dir = strdup(c->state_dir);
        s->socket_path = strdup(c->socket_path);
        s->has_group = c->has_group;
        s->group = c->group;
        s->token = c->token ? strdup(c->token) : NULL;
        s->max_body = c->max_body ?: API_BODY_MAX;
        s->heartbeat_interval = c->heartbeat ?: 15 * USEC_PER_SEC;
        s->idle_timeout = c->idle_timeout ?: 30 * USEC_PER_SEC;
        s->fleet = c->fleet;
        if (!s->state_dir || !s->socket_path || (c->token && !s->token)) {
                free(s->state_dir);
                free(s->socket_path);
                free(s->token);
                free(s);
                return -ENOMEM;
        }
        uv_timer_init(s->loop, &s->heartbeat);
        s->heartbeat.data = s;
        uv_timer_init(s->loop, &s->follow_timer);
        s->follow_timer.data = s;
        uv_timer_init(s->loop, &s->deadlines);
        s->deadlines.data = s;
        uv_timer_init(s->loop, &s->trim);
        s->trim.data = s;
        s->open_handles = 4;
        /* (heartbeat and follow_timer run while a watch or a follower is
         * open: watch.c, logs.c) */

        r = api__openapi_init(s);
        if (r < 0)
                goto fail;
        fd = bind_unix(c->socket_path, c->group, c->has_group, ret_error);
        if (fd < 0) {
                r = fd;
                goto fail;
        }
        r = start_slot(s, fd, false, ret_error);
        if (r < 0)
                goto fail;
        if (c->listen) {
                unsigned char ip[4];
                fd = bind_tcp(c->listen, c->tls_cert, ip, ret_error);
                if (fd < 0) {
                        r = fd;
                        goto fail;
                }
                r = !c->token ? api__tls_token(c->state_dir, &s->token, ret_error) : 0;
                if (r >= 0)
                        r = c->tls_cert ? api__tls_load(c->tls_cert, c->tls_key, &s->tls, ret_error)
                                        : api__tls_generate(c->state_dir, ip, &s->tls, ret_error);
                if (r >= 0 && !s->token)
                        r = -ENOMEM;
                if (r >= 0) {
                        bool any = !memcmp(ip, (unsigned char[4]){}, 4);
                        s->listen_url = any ? strprintf("https://127.0.0.1%s",
                                                        strrchr(c->listen, ':'))
                                            : strprintf("https://%s", c->listen);
                        r = s->listen_url ? start_slot(s, fd, true, ret_error) : -ENOMEM;
                } else
                        safe_close(fd);
                if (r < 0)
                        goto fail;
        }
        spec_json_dump_shared_release_with(api__release_in_pool, s->loop);
        r = store_subscribe(s->store, api__on_store_change, s);
        if (r < 0)
                goto fail;
        *ret = s;
        return 0;
fail:
        api_server_close(s);
        return r;
}

void api_server_close(api_server *s) {
        if (!s || s->closing)
                return;
        /* Streams end, and answers that wait for etcd; MHD wants every
         * connection resumed before it stops. */
        api__waiting_end(s);
        api__watches_end(s);
        api__followers_end(s);
        for (size_t i = 0; i < s->n_slots; i++)
                if (s->slots[i].d)
                        MHD_run(s->slots[i].d);
        s->closing = true;
        store_unsubscribe(s->store, api__on_store_change, s);
        spec_json_dump_shared_release_with(NULL, NULL);
        for (size_t i = 0; i < s->n_slots; i++) {
                slot *sl = &s->slots[i];
                uv_poll_stop(&sl->poll);
                sl->poll.data = sl->timer.data = s;
                uv_close((uv_handle_t *) &sl->poll, on_handle_closed);
                uv_close((uv_handle_t *) &sl->timer, on_handle_closed);
                MHD_stop_daemon(sl->d); /* closes the listening socket too */
                sl->d = NULL;
        }
        if (s->socket_path && s->n_slots > 0)
                (void) unlink(s->socket_path);
        uv_close((uv_handle_t *) &s->heartbeat, on_handle_closed);
        uv_close((uv_handle_t *) &s->follow_timer, on_handle_closed);
        uv_close((uv_handle_t *) &s->deadlines, on_handle_closed);
        uv_close((uv_handle_t *) &s->trim, on_handle_closed);
}
