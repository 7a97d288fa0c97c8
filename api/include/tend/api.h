/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * The HTTP API: Kubernetes-shaped paths and objects (docs/deployments.md §10) on
 * libmicrohttpd, run from the libuv loop (external polling on MHD's epoll
 * fd). A unix socket whose peers are checked by their credentials, and an
 * optional HTTPS listener on TCP that wants a bearer token.
 */

#include <jansson.h>
#include <uv.h>

#include "tend/agent.h"

typedef struct api_server api_server;

/*
 * Fleet mode (tendd --fleet): the nodes are the fleet's, kept in etcd by
 * tendd; the API lists them and cordons them through these. NULL in the
 * config: this host is the one node.
 */
typedef struct api_fleet {
        /* Every node as a core/v1 Node (its Ready condition derived from its
         * tendd's lease), sorted by name: a new JSON array. */
        json_t *(*nodes)(void *userdata);
        /* Sets a node's spec.unschedulable (cordon). Answers later, from the
         * loop: done(code, the Node or a Status, req) — unless canceled.
         * Fails at once (< 0, no call) if it cannot begin. */
        int (*set_unschedulable)(void *userdata, const char *name, bool value,
                                 void (*done)(unsigned code, json_t *answer, void *req), void *req);
        /* Removes a node that is gone (no tendd holds its name): answers as
         * set_unschedulable does (409 while a tendd holds it). */
        int (*delete_node)(void *userdata, const char *name,
                           void (*done)(unsigned code, json_t *answer, void *req), void *req);
        void (*cancel)(void *userdata, void *req);
        /* Whether the fleet's etcd has every write made here since a mark
         * (the store is a mirror): 1 yes; 0: done(0, NULL, req) once it
         * has, or done(code, a Status, req) when a write was refused (409,
         * 413) or not acknowledged in time (504) — unless canceled; < 0:
         * cannot tell. Every write the API acknowledges waits for its own.
         * NULL: no wait. */
        int (*sync)(void *userdata, uint64_t since,
                    void (*done)(unsigned code, json_t *answer, void *req), void *req);
        /* A mark of the writes made here so far: sync(since) waits for those
         * made after it (a request's own). The request's writes are noted
         * until writes_end(), called once the request is handled (its
         * answer sent, held or refused). */
        uint64_t (*writes)(void *userdata);
        void (*writes_end)(void *userdata);
        /* Why this node takes no write now (cut off from etcd: a new
         * string), or NULL: writes are taken. NULL function: always. */
        char *(*refuses_writes)(void *userdata);
        /* A write request relies on this object as this node has it (a
         * write that changes nothing is answered at once): its answer
         * waits for the object's writes not yet in etcd too, and fails
         * with them. NULL: not needed. */
        void (*touch)(void *userdata, store_kind kind, const char *ns, const char *name);
        /* Why what this node shows may be stale (cut off from etcd: a new
         * string, sent as a Warning with every read), or NULL. */
        char *(*stale)(void *userdata);
        /* The fleet's lines of /metrics (Prometheus text), added to b. */
        void (*metrics)(void *userdata, tend_buf *b);
        void *userdata;
} api_fleet;

typedef struct api_config {
        uv_loop_t *loop;
        agent *agent;            /* borrowed; its store is the API's */
        const char *state_dir;   /* pod logs */
        const char *socket_path; /* created 0660; its directory too if missing */
        bool has_group;          /* members of group may connect too */
        gid_t group;
        const char *listen;   /* "IPV4:PORT" or NULL: HTTPS; loopback unless tls_cert */
        const char *token;    /* for the TCP listener; NULL: STATE_DIR/tls/token */
        const char *tls_cert; /* PEM files; NULL: a CA and certificate in STATE_DIR/tls */
        const char *tls_key;
        size_t max_body;        /* 0: 3 MiB, as kube-apiserver */
        usec_t heartbeat;       /* idle watch streams get a newline; 0: 15 s */
        usec_t idle_timeout;    /* a connection idle this long is closed; 0: 30 s */
        const api_fleet *fleet; /* borrowed; NULL: a single host */
} api_config;

int api_server_new(const api_config *c, api_server **ret, char **ret_error);

/* One request, answered in memory as the local socket answers root: the
 * whole request path (routing, bodies, handlers, the store) without a
 * connection. A watch or a log follow needs one, and is a 400 here. For
 * the fuzz target of the API and for tests. */
typedef struct api_request {
        const char *method;
        const char *url;            /* the path, unescaped */
        const char *const *args;    /* query: name, value, ..., NULL ("" for a bare name) */
        const char *const *headers; /* name, value, ..., NULL */
        const char *body;
        size_t body_len;
} api_request;

/* The status code; *ret_body the answer (new string, may be NULL). */
unsigned api_server_answer(api_server *s, const api_request *q, char **ret_body);
/* Stops accepting, ends watch and log streams; frees itself once libuv has
 * closed its handles. */
void api_server_close(api_server *s);
