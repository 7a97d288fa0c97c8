/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * The HTTP API: Kubernetes-shaped paths and objects (k8s-semantics §10) on
 * libmicrohttpd, run from the libuv loop (external polling on MHD's epoll
 * fd). A unix socket whose peers are checked by their credentials, and an
 * optional loopback TCP listener that wants a bearer token.
 */

#include "agent-loop.h"

typedef struct api_server api_server;

typedef struct api_config {
        uv_loop_t *loop;
        agent_loop *agent;
        const char *state_dir;   /* pod logs */
        const char *socket_path; /* created 0660; its directory too if missing */
        bool has_group;          /* members of group may connect too */
        gid_t group;
        const char *listen;  /* "127.0.0.1:PORT" or NULL */
        const char *token;   /* required for the TCP listener */
        size_t max_body;     /* 0: 2 MiB */
        usec_t heartbeat;    /* idle watch streams get a newline; 0: 15 s */
        usec_t idle_timeout; /* a connection idle this long is closed; 0: 30 s */
} api_config;

int api_server_new(const api_config *c, api_server **ret, char **ret_error);
/* Stops accepting, ends watch and log streams; frees itself once libuv has
 * closed its handles. */
void api_server_close(api_server *s);
