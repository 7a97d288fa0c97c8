/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * tend_net: libcurl's multi interface on a libuv loop, shared by what
 * talks HTTP from inside tendd — the runtime's httpGet probes, and fleet
 * mode's etcd client (issue 17). One net_curl per loop user; transfers run
 * concurrently and report once, from the loop, through their done
 * callback. Nothing here blocks.
 *
 * libcurl's rule: never call curl_multi_* from inside a curl callback. The
 * done callback runs after curl's work for the event has returned, so it
 * may start or cancel transfers.
 */

#include <curl/curl.h>
#include <uv.h>

typedef struct net_curl net_curl;

/* A new multi handle on loop (curl_global_init once per process). */
int net_curl_new(uv_loop_t *loop, net_curl **ret);
/* Stops it: transfers still running are dropped (their done is never
 * called: cancel them first); it frees itself once libuv has closed its
 * handles. Accepts NULL. */
void net_curl_close(net_curl *n);

/* done(userdata, result, HTTP status): once per transfer that was not
 * cancelled. The easy handle stays the caller's. */
typedef void (*net_curl_done)(void *userdata, CURLcode result, long status);
/* Starts easy; its sockets are opened CLOEXEC. -ENOMEM, or -EIO when curl
 * refuses it (then no callback is made). */
int net_curl_start(net_curl *n, CURL *easy, net_curl_done done, void *userdata);
/* Stops a transfer; its done is not called. A finished one: nothing. */
void net_curl_cancel(net_curl *n, CURL *easy);
