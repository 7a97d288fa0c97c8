/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * tend_etcd: an etcd v3 client on the libuv loop, for fleet mode (issue 17,
 * docs/fleet.md §2). It speaks etcd's JSON gateway
 * (POST /v3/..., keys and values base64) through libcurl's multi interface
 * (tend_net): no gRPC stack, no etcdctl, no hand-written HTTP. It knows
 * nothing of tend's objects.
 *
 * Every call is asynchronous: it returns 0 and calls back once, from the
 * loop, with an etcd_result — or fails at once (-errno) and never calls
 * back. A call that fails on one endpoint (no connection, a timeout, 503:
 * no leader, leader changed) is tried on the next, each endpoint once.
 *
 * It speaks put, range, delete, txn, compaction, lease grant, keepalive and
 * revoke, and a watch (one stream, resumed where it broke); the session is
 * below, the store's mirror is tendd's (tendd/fleet-store.c; docs/fleet.md
 * §2.5, §3).
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
        /* TLS, for https:// endpoints: the CA that signed etcd's certificate
         * (NULL: the system's), a client certificate and its key (PEM). */
        const char *ca_file, *cert_file, *key_file;
        /* etcd's authentication: each call carries the token etcd gives
         * for user and password (asked again when etcd forgets it). NULL:
         * none. */
        const char *user, *password;
} etcd_config;

int etcd_new(const etcd_config *c, etcd **ret);
uv_loop_t *etcd_loop(const etcd *e);
/* Cancels what is in flight (no callbacks) and frees it. Accepts NULL. */
void etcd_close(etcd *e);

typedef struct etcd_kv {
        char *key;
        char *value; /* NUL-terminated beyond value_len */
        size_t value_len;
        /* A watch's: the value read as JSON, off the loop (NULL: a delete,
         * or not JSON); a range's: NULL, always */
        json_t *json;
        int64_t create_revision, mod_revision, version, lease;
} etcd_kv;

/* kv's value as JSON (a new reference; NULL: not JSON): a watch's was
 * read off the loop, a range's is read now. */
json_t *etcd_kv_json(const etcd_kv *kv);

typedef struct etcd_result {
        int error;           /* 0, or -errno: -EIO (transport), -EPROTO (a bad answer), ... */
        long http_status;    /* of the last endpoint tried; 0: no answer */
        int grpc_code;       /* etcd's "code" on an error answer */
        const char *message; /* what went wrong; NULL when error is 0 */
        int64_t revision;    /* the header's */
        bool succeeded;      /* txn */
        etcd_kv *kvs;        /* range; a txn's range responses, all, in order */
        size_t n_kvs;
        int64_t count, deleted;
        int64_t lease_id, ttl; /* lease grant, keepalive (ttl 0: the lease is gone) */
        json_t *body;          /* the whole answer (borrowed, for what is not above) */
        /* With error: a try of the call reached etcd (or may have), and no
         * answer says whether it was applied (a txn's outcome is unknown).
         * false: no try reached etcd, or etcd refused it. */
        bool unknown;
} etcd_result;

typedef void (*etcd_cb)(const etcd_result *r, void *userdata);

/* How many txns were sent again because etcd's leader changed while they
 * were out (etcd.c's hedge). */
uint64_t etcd_hedged(const etcd *e);

/* Cancels every call in flight made with this userdata: no callback. */
void etcd_cancel_calls(etcd *e, void *userdata);

int etcd_put(etcd *e, const char *key, const void *value, size_t len, int64_t lease, etcd_cb cb,
             void *userdata);
/* One key (range_end NULL), or [key, range_end); etcd_prefix_end() gives
 * the end of a prefix. */
int etcd_range(etcd *e, const char *key, const char *range_end, etcd_cb cb, void *userdata);
int etcd_delete(etcd *e, const char *key, const char *range_end, etcd_cb cb, void *userdata);
/* The prefix with its last byte plus one (etcd's prefix range); new string. */
char *etcd_prefix_end(const char *prefix);

/* A txn of compares and operations built with the helpers below (each
 * returns a new reference; the txn call steals all three arrays). Each
 * must be an array (json_array() for none): a NULL is taken for one that
 * could not be built, and the txn is not sent (-ENOMEM). */
int etcd_txn(etcd *e, json_t *compare, json_t *success, json_t *failure, etcd_cb cb,
             void *userdata);
/* compare: "mod" or "create" revision of key, result "EQUAL", "LESS", ... */
json_t *etcd_cmp_revision(const char *key, const char *target, const char *result, int64_t rev);
json_t *etcd_op_put(const char *key, const void *value, size_t len, int64_t lease);
json_t *etcd_op_range(const char *key, const char *range_end);
/* The limit keys of [key, range_end) last written (the newest first). */
json_t *etcd_op_range_newest(const char *key, const char *range_end, int64_t limit);
json_t *etcd_op_delete(const char *key, const char *range_end);

/* Forgets the history before revision (physical: done when it answers). */
int etcd_compact(etcd *e, int64_t revision, etcd_cb cb, void *userdata);

int etcd_lease_grant(etcd *e, int64_t ttl_seconds, etcd_cb cb, void *userdata);
int etcd_lease_keepalive(etcd *e, int64_t id, etcd_cb cb, void *userdata);

/* ---- watches ----------------------------------------------------------------------------- */

typedef struct etcd_event {
        bool deleted; /* else a put */
        etcd_kv kv;   /* of a delete: the key and its mod_revision only */
} etcd_event;

typedef struct etcd_watch etcd_watch;

/* The events of one revision (one txn is one call, its events in order). */
typedef void (*etcd_watch_events)(const etcd_event *ev, size_t n, int64_t revision, void *userdata);
/* The watch ended: -ERANGE (the revision it needed was compacted:
 * relist, and watch from compact_revision on), -ECANCELED (etcd canceled
 * it), or another -errno; message says what. A broken stream (a member
 * gone, no leader) does not end it: it resumes on the next endpoint from
 * the revision after the last it saw. This is its last call: the watch
 * frees itself after it (a cancel from inside it is a no-op). */
typedef void (*etcd_watch_end)(int error, const char *message, int64_t compact_revision,
                               void *userdata);

/*
 * Watches [key, range_end) (range_end NULL: the key) from start_revision
 * (0: from now) on one long request of its own (the gateway streams one
 * JSON object per line). Events are handed over from the loop, never from
 * inside libcurl's callbacks, so a callback may call the client.
 */
int etcd_watch_start(etcd *e, const char *key, const char *range_end, int64_t start_revision,
                     etcd_watch_events on_events, etcd_watch_end on_end, void *userdata,
                     etcd_watch **ret);
/* No more callbacks; frees it (once the loop has closed its timer).
 * Accepts NULL; may be called from its own callbacks; not after its end
 * was reported. */
void etcd_watch_cancel(etcd_watch *w);

int etcd_lease_revoke(etcd *e, int64_t id, etcd_cb cb, void *userdata);

/* ---- the session: one lease, kept alive -------------------------------------------------- */

/*
 * A tendd's session in the fleet (docs/fleet.md §3.2): one lease, resumed if it
 * is still alive (a restart within the TTL is invisible to the fleet) or
 * granted anew, then kept alive every TTL/3. The lease cannot expire
 * before the last acknowledged keepalive's send time + TTL (etcd measures
 * from its receipt, later): etcd_session_safe_until(). The session is lost
 * when etcd says the lease is gone, or when no keepalive has been
 * acknowledged for a whole TTL (etcd unreachable: it may have expired).
 */
typedef struct etcd_session etcd_session;

typedef struct etcd_session_config {
        int64_t ttl;          /* seconds, at least 2 (etcd's minimum) */
        int64_t resume_lease; /* a lease of a previous run to resume; 0: none */
        /* The lease is alive (resumed: the one given). */
        void (*ready)(int64_t lease, bool resumed, void *userdata);
        /* The lease is gone (-ENOENT) or unconfirmed for a TTL (-ETIMEDOUT);
         * the last call: stop the session after it. */
        void (*lost)(int error, const char *why, void *userdata);
        void *userdata;
} etcd_session_config;

int etcd_session_start(etcd *e, const etcd_session_config *c, etcd_session **ret);
int64_t etcd_session_lease(const etcd_session *s);
/* Monotonic: until when the lease is certainly alive (0: not yet). */
usec_t etcd_session_safe_until(const etcd_session *s);
/* Stops keeping it alive (no revoke: a restart resumes it); no more
 * callbacks. Accepts NULL. */
void etcd_session_stop(etcd_session *s);
