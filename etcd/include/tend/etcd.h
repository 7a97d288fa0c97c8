/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * tend_etcd: an etcd v3 client on the libuv loop, for fleet mode (issue 17,
 * ../shared/reference/fleet.md §2). It speaks etcd's JSON gateway
 * (POST /v3/..., keys and values base64) through libcurl's multi interface
 * (tend_net): no gRPC stack, no etcdctl, no hand-written HTTP. It knows
 * nothing of tend's objects.
 *
 * Every call is asynchronous: it returns 0 and calls back once, from the
 * loop, with an etcd_result — or fails at once (-errno) and never calls
 * back. A call that fails on one endpoint (no connection, a timeout, 503:
 * no leader, leader changed) is tried on the next, each endpoint once.
 *
 * So far: put, range, delete, txn, lease grant and keepalive. Watches, the
 * session and the store mirror come next (fleet.md §2.5, §3).
 */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "tend/base.h"

typedef struct etcd etcd;

typedef struct etcd_config {
        uv_loop_t *loop;        /* borrowed */
        char *const *endpoints; /* "http://127.0.0.1:2379", ...; NULL-terminated */
        usec_t timeout;         /* per request and endpoint; 0: 5 s */
} etcd_config;

int etcd_new(const etcd_config *c, etcd **ret);
/* Cancels what is in flight (no callbacks) and frees it. Accepts NULL. */
void etcd_close(etcd *e);

typedef struct etcd_kv {
        char *key;
        char *value; /* NUL-terminated beyond value_len */
        size_t value_len;
        int64_t create_revision, mod_revision, version, lease;
} etcd_kv;

typedef struct etcd_result {
        int error;           /* 0, or -errno: -EIO (transport), -EPROTO (a bad answer), ... */
        long http_status;    /* of the last endpoint tried; 0: no answer */
        int grpc_code;       /* etcd's "code" on an error answer */
        const char *message; /* what went wrong; NULL when error is 0 */
        int64_t revision;    /* the header's */
        bool succeeded;      /* txn */
        etcd_kv *kvs;        /* range; a failed txn's first range response */
        size_t n_kvs;
        int64_t count, deleted;
        int64_t lease_id, ttl; /* lease grant, keepalive (ttl 0: the lease is gone) */
        json_t *body;          /* the whole answer (borrowed, for what is not above) */
} etcd_result;

typedef void (*etcd_cb)(const etcd_result *r, void *userdata);

int etcd_put(etcd *e, const char *key, const void *value, size_t len, int64_t lease, etcd_cb cb,
             void *userdata);
/* One key (range_end NULL), or [key, range_end); etcd_prefix_end() gives
 * the end of a prefix. */
int etcd_range(etcd *e, const char *key, const char *range_end, etcd_cb cb, void *userdata);
int etcd_delete(etcd *e, const char *key, const char *range_end, etcd_cb cb, void *userdata);
/* The prefix with its last byte plus one (etcd's prefix range); new string. */
char *etcd_prefix_end(const char *prefix);

/* A txn of compares and operations built with the helpers below (each
 * returns a new reference; the txn call steals all three arrays). */
int etcd_txn(etcd *e, json_t *compare, json_t *success, json_t *failure, etcd_cb cb,
             void *userdata);
/* compare: "mod" or "create" revision of key, result "EQUAL", "LESS", ... */
json_t *etcd_cmp_revision(const char *key, const char *target, const char *result, int64_t rev);
json_t *etcd_op_put(const char *key, const void *value, size_t len, int64_t lease);
json_t *etcd_op_range(const char *key, const char *range_end);
json_t *etcd_op_delete(const char *key, const char *range_end);

int etcd_lease_grant(etcd *e, int64_t ttl_seconds, etcd_cb cb, void *userdata);
int etcd_lease_keepalive(etcd *e, int64_t id, etcd_cb cb, void *userdata);
