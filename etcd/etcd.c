/* SPDX-License-Identifier: MIT */

/*
 * The etcd v3 JSON gateway over libcurl (docs/fleet.md §2.2 has every request
 * and answer shape, verified on etcd 3.4). Unary calls only, so far: one
 * POST each on the shared multi handle (curl keeps the connection alive
 * between them); a call that gets no answer, a timeout or a 503 from one
 * endpoint goes to the next, each endpoint once. Answers omit fields at
 * their zero value (a failed txn has no "succeeded", an empty range no
 * "kvs"), and int64s come as strings: the parser defaults and converts.
 *
 * A txn out for a second asks its endpoint for its raft term (maintenance
 * status, answered without a leader). A term newer than the one the txn
 * was sent in means etcd's leader changed meanwhile, and a proposal made
 * to the old leader is lost: etcd would answer only at its own request
 * timeout (5 s and more; issue 29). The txn is sent again at once, to the
 * same endpoint (it answered: it is alive, and knows the new leader); the
 * first try may have been applied, so its outcome is unknown, as for a
 * try that timed out.
 */

#include <inttypes.h>
#include <stdio.h>

#include "tend/etcd.h"
#include "tend/net.h"

#define ANSWER_MAX (16 * 1024 * 1024) /* a range of a whole prefix, bounded */
#define HEDGE_AFTER_MS 1000           /* a txn out this long asks whether etcd's leader changed */
#define HEDGE_EVERY_MS 500            /* and again, this often */
#define HEDGES_MAX 3                  /* sent again at most this many times for a new term */

typedef struct request request;

struct etcd {
        uv_loop_t *loop;
        net_curl *net;
        char **endpoints;
        size_t n_endpoints, current;
        usec_t timeout;
        char *ca_file, *cert_file, *key_file;
        char *user, *password;
        char *token;       /* etcd's for user; NULL: none yet */
        bool authing;      /* asking for one */
        request *requests; /* in flight (or waiting for a token), for etcd_close() */
        etcd_watch *watches;
        int64_t raft_term; /* the newest an answer gave */
        uint64_t hedged;   /* txns sent again for a new term (etcd_hedged()) */
};

struct request {
        etcd *e;
        request *prev, *next;
        char *path, *body;
        CURL *easy;
        struct curl_slist *headers;
        tend_buf answer;
        size_t tries;
        bool is_auth;      /* asks for the token */
        bool waiting_auth; /* not started: waits for a token */
        bool reauthed;     /* refused a token once, asked for a new one */
        char *token_used;  /* the token it was sent with */
        bool unknown;      /* an attempt reached etcd, and no answer says what it did */
        etcd_cb cb;
        void *userdata;
        /* A txn's body is written in the loop's thread pool (its values
         * are a megabyte of base64): then started. */
        uv_work_t dump;
        json_t *body_json; /* until written */
        bool dumping;
        bool orphaned; /* canceled while written: freed once it is */
        /* the hedge (a txn): its timer, the term it was sent in, the probe
         * out (its parent: the txn it asks for) */
        bool hedged_call;
        uv_timer_t *hedge;
        int64_t term_sent;
        unsigned hedges;
        request *probe, *parent;
};

static void secret_free(char *s) {
        if (s)
                explicit_bzero(s, strlen(s));
        free(s);
}

static void unlink_request(request *r);

static void on_hedge_closed(uv_handle_t *h) {
        free(h);
}

static request *request_free(request *r) {
        if (!r)
                return NULL;
        if (r->hedge) {
                r->hedge->data = NULL;
                uv_close((uv_handle_t *) r->hedge, on_hedge_closed);
        }
        if (r->probe) { /* a txn's probe goes with it */
                request *p = r->probe;
                p->parent = NULL;
                net_curl_cancel(r->e->net, p->easy);
                unlink_request(p);
                request_free(p);
        }
        if (r->parent)
                r->parent->probe = NULL;
        if (r->easy)
                curl_easy_cleanup(r->easy);
        curl_slist_free_all(r->headers);
        tend_buf_free(&r->answer);
        secret_free(r->token_used);
        free(r->path);
        free(r->body);
        json_decref(r->body_json);
        free(r);
        return NULL;
}

/* Forgets a request (canceled): now, or once the pool has written its body. */
static void drop_request(request *r) {
        if (r->dumping)
                r->orphaned = true;
        else
                request_free(r);
}

static void unlink_request(request *r) {
        if (r->prev)
                r->prev->next = r->next;
        else
                r->e->requests = r->next;
        if (r->next)
                r->next->prev = r->prev;
        r->prev = r->next = NULL;
}

/* ---- values ------------------------------------------------------------------------------- */

/* int64 fields come as strings ("12"), sometimes as numbers; absent is 0. */
static int64_t int64_of(json_t *j) {
        int64_t v = 0;

        if (json_is_integer(j))
                return json_integer_value(j);
        if (json_is_string(j) && safe_atoi64(json_string_value(j), &v) >= 0)
                return v;
        return 0;
}

static json_t *b64(const void *data, size_t n) {
        _cleanup_free_ char *s = tend_base64_encode(data, n);
        /* (base64 is ASCII: no UTF-8 check, no strlen) */
        return s ? json_stringn_nocheck(s, (n + 2) / 3 * 4) : NULL;
}

static json_t *b64_str(const char *s) {
        return b64(s, strlen(s));
}

char *etcd_prefix_end(const char *prefix) {
        char *end = strdup(prefix);
        size_t n = end ? strlen(end) : 0;

        /* the last byte below 0xff, plus one; "" (all keys) is "\0" in etcd
         * terms, which is not a C string: not offered */
        while (n > 0 && (unsigned char) end[n - 1] == 0xff)
                end[--n] = 0;
        if (n == 0) {
                free(end);
                return NULL;
        }
        end[n - 1]++;
        return end;
}

static int decode_kv(json_t *j, etcd_kv *ret) {
        const char *k = json_string_value(json_object_get(j, "key"));
        const char *v = json_string_value(json_object_get(j, "value"));
        void *key = NULL, *value = NULL;
        size_t kn = 0, vn = 0;

        *ret = (etcd_kv){};
        if (!k || tend_base64_decode(k, strlen(k), &key, &kn) < 0)
                return -EPROTO;
        if (v && tend_base64_decode(v, strlen(v), &value, &vn) < 0) {
                free(key);
                return -EPROTO;
        }
        if (!value && !(value = strdup(""))) {
                free(key);
                return -ENOMEM;
        }
        *ret = (etcd_kv){
                .key = key,
                .value = value,
                .value_len = vn,
                .create_revision = int64_of(json_object_get(j, "create_revision")),
                .mod_revision = int64_of(json_object_get(j, "mod_revision")),
                .version = int64_of(json_object_get(j, "version")),
                .lease = int64_of(json_object_get(j, "lease")),
        };
        return 0;
}

json_t *etcd_kv_json(const etcd_kv *kv) {
        return kv->json ? json_incref(kv->json) : json_loadb(kv->value, kv->value_len, 0, NULL);
}

static void kv_done(etcd_kv *kv) {
        free(kv->key);
        free(kv->value);
        json_decref(kv->json);
}

static void kvs_free(etcd_kv *kvs, size_t n) {
        for (size_t i = 0; i < n; i++)
                kv_done(&kvs[i]);
        free(kvs);
}

static int decode_kvs(json_t *arr, etcd_result *res) {
        size_t n = json_array_size(arr);

        if (n == 0)
                return 0;
        res->kvs = new0(etcd_kv, n);
        if (!res->kvs)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                int r = decode_kv(json_array_get(arr, i), &res->kvs[i]);
                if (r < 0)
                        return r;
                res->n_kvs++;
        }
        return 0;
}

/* gRPC's codes, as -errno (docs/fleet.md §2.2's table). */
static int errno_of(int code) {
        switch (code) {
        case 3: /* INVALID_ARGUMENT */
                return -EINVAL;
        case 5: /* NOT_FOUND: lease not found */
                return -ENOENT;
        case 9: /* FAILED_PRECONDITION: lease exists */
                return -EEXIST;
        case 11: /* OUT_OF_RANGE: compacted */
                return -ERANGE;
        case 14: /* UNAVAILABLE: no leader, leader changed, timed out */
                return -EAGAIN;
        case 7:  /* PERMISSION_DENIED: the user's roles do not cover the key */
        case 16: /* UNAUTHENTICATED: no token, or one etcd does not know */
                return -EACCES;
        default:
                return -EIO;
        }
}

/* ---- requests -------------------------------------------------------------------------------- */

static size_t on_data(char *p, size_t size, size_t n, void *userdata) {
        request *r = userdata;

        if (r->answer.len + size * n > ANSWER_MAX || tend_buf_add(&r->answer, p, size * n) < 0)
                return 0; /* too much: the transfer fails */
        return size * n;
}

static int start(request *r);

static void finish(request *r, CURLcode code, long status) {
        etcd_result res = { .http_status = status, .unknown = r->unknown };
        _cleanup_free_ char *msg = NULL;
        json_t *j = NULL, *h, *result;

        if (code != CURLE_OK) {
                /* a certificate that does not do: not worth waiting for */
                res.error = code == CURLE_PEER_FAILED_VERIFICATION ||
                                            code == CURLE_SSL_CERTPROBLEM ||
                                            code == CURLE_SSL_CACERT_BADFILE
                                    ? -EACCES
                                    : -EIO;
                msg = strprintf("%s%s: %s", r->e->endpoints[r->e->current], r->path,
                                curl_easy_strerror(code));
        } else {
                j = json_loadb(r->answer.data ?: "", r->answer.len, 0, NULL);
                if (!j) {
                        res.error = -EPROTO;
                        /* etcd's gateway says some things in plain text (a
                         * client certificate with a CommonName, say) */
                        const char *t = r->answer.data ?: "";
                        int len = (int) MIN(strcspn(t, "\n"), (size_t) 300);
                        msg = strprintf("%s%s: HTTP %ld: %.*s", r->e->endpoints[r->e->current],
                                        r->path, status, len,
                                        len ? t : "an answer that is not JSON");
                        if (status == 400 || status == 401 || status == 403)
                                res.error = -EACCES;
                } else if (status != 200) {
                        res.grpc_code = (int) int64_of(json_object_get(j, "code"));
                        res.error = errno_of(res.grpc_code);
                        msg = strprintf("%s%s: HTTP %ld: %s", r->e->endpoints[r->e->current],
                                        r->path, status,
                                        strna(json_string_value(json_object_get(j, "error"))));
                }
        }
        if (res.error == 0) {
                /* keepalive answers {"result": {...}} */
                result = json_object_get(j, "result") ?: j;
                h = json_object_get(result, "header");
                res.body = j;
                res.revision = int64_of(json_object_get(h, "revision"));
                r->e->raft_term = MAX(r->e->raft_term, int64_of(json_object_get(h, "raft_term")));
                res.succeeded = json_is_true(json_object_get(result, "succeeded"));
                res.count = int64_of(json_object_get(result, "count"));
                res.deleted = int64_of(json_object_get(result, "deleted"));
                res.lease_id = int64_of(json_object_get(result, "ID"));
                res.ttl = int64_of(json_object_get(result, "TTL"));
                json_t *kvs = json_object_get(result, "kvs"), *all = NULL;
                if (!kvs) { /* a txn's range answers, one after the other */
                        json_t *resp, *k;
                        size_t i, m;
                        all = json_array();
                        if (!all)
                                res.error = -ENOMEM; /* not "no keys" */
                        json_array_foreach (json_object_get(result, "responses"), i, resp)
                                json_array_foreach (
                                        json_object_get(json_object_get(resp, "response_range"),
                                                        "kvs"),
                                        m, k)
                                        (void) json_array_append(all, k);
                        kvs = all;
                }
                if (res.error >= 0)
                        res.error = decode_kvs(kvs, &res);
                json_decref(all);
                if (res.error < 0)
                        msg = strprintf("%s%s: a key or value that is not base64",
                                        r->e->endpoints[r->e->current], r->path);
        }
        res.message = res.error < 0 ? (msg ?: "out of memory") : NULL;
        r->cb(&res, r->userdata);
        kvs_free(res.kvs, res.n_kvs);
        json_decref(j);
}

static void on_done(void *userdata, CURLcode code, long status) {
        request *r = userdata;
        etcd *e = r->e;
        long sent = 0;

        /* sent (not refused at connect), then no answer or etcd's own
         * failure (a timeout, no leader): it may have been applied */
        if ((code != CURLE_OK || status >= 500) &&
            curl_easy_getinfo(r->easy, CURLINFO_REQUEST_SIZE, &sent) == CURLE_OK && sent > 0)
                r->unknown = true;

        /* a token etcd no longer knows (it restarted, or the token's TTL
         * passed): a new one, once */
        if (code == CURLE_OK && status == 401 && e->user && !r->is_auth && !r->reauthed) {
                r->reauthed = true;
                if (streq_ptr(e->token, r->token_used)) { /* not a newer one */
                        secret_free(e->token);
                        e->token = NULL;
                }
                tend_buf_reset(&r->answer);
                if (start(r) >= 0)
                        return;
        }
        /* no answer, or no leader here: the next endpoint, each once */
        if ((code != CURLE_OK || status == 503) && ++r->tries < e->n_endpoints) {
                e->current = (e->current + 1) % e->n_endpoints;
                tend_buf_reset(&r->answer);
                if (start(r) >= 0)
                        return;
        }
        unlink_request(r);
        finish(r, code, status);
        request_free(r);
}

static int authenticate(etcd *e);

/* The headers of a call: JSON, and the token where etcd wants one. */
static struct curl_slist *headers(etcd *e, bool watch) {
        struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
        _cleanup_free_ char *auth = e->token ? strprintf("Authorization: %s", e->token) : NULL;

        if (h && watch)
                h = curl_slist_append(h, "Grpc-Metadata-hasleader: true");
        if (h && e->token && (!auth || !curl_slist_append(h, auth))) {
                curl_slist_free_all(h);
                return NULL;
        }
        return h;
}

static void tls_options(etcd *e, CURL *easy) {
        if (e->ca_file)
                curl_easy_setopt(easy, CURLOPT_CAINFO, e->ca_file);
        if (e->cert_file)
                curl_easy_setopt(easy, CURLOPT_SSLCERT, e->cert_file);
        if (e->key_file)
                curl_easy_setopt(easy, CURLOPT_SSLKEY, e->key_file);
}

static void on_hedge(uv_timer_t *t);

static int start(request *r) {
        etcd *e = r->e;
        _cleanup_free_ char *url = strprintf("%s%s", e->endpoints[e->current], r->path);
        long ms = (long) (e->timeout / USEC_PER_MSEC);

        if (!url)
                return -ENOMEM;
        if (e->user && !e->token && !r->is_auth) {
                r->waiting_auth = true; /* started when the token comes */
                return authenticate(e);
        }
        if (!r->easy && !(r->easy = curl_easy_init()))
                return -ENOMEM;
        curl_slist_free_all(r->headers);
        if (!(r->headers = headers(e, false)))
                return -ENOMEM;
        secret_free(r->token_used);
        r->token_used = NULL;
        if (e->token && !(r->token_used = strdup(e->token)))
                return -ENOMEM;
        tls_options(e, r->easy);
        curl_easy_setopt(r->easy, CURLOPT_URL, url);
        curl_easy_setopt(r->easy, CURLOPT_POSTFIELDS, r->body);
        curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->headers);
        curl_easy_setopt(r->easy, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(r->easy, CURLOPT_WRITEDATA, r);
        curl_easy_setopt(r->easy, CURLOPT_TIMEOUT_MS, ms);
        curl_easy_setopt(r->easy, CURLOPT_CONNECTTIMEOUT_MS, MIN(ms, 1000L));
        curl_easy_setopt(r->easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(r->easy, CURLOPT_PROTOCOLS_STR, "http,https");
        r->term_sent = e->raft_term;
        if (r->hedged_call && e->raft_term > 0) {
                if (!r->hedge) {
                        r->hedge = malloc(sizeof *r->hedge);
                        if (!r->hedge || uv_timer_init(e->loop, r->hedge) < 0) {
                                free(r->hedge);
                                r->hedge = NULL;
                        }
                }
                if (r->hedge) {
                        r->hedge->data = r;
                        (void) uv_timer_start(r->hedge, on_hedge, HEDGE_AFTER_MS, HEDGE_EVERY_MS);
                }
        }
        return net_curl_start(e->net, r->easy, on_done, r);
}

static void dump_body(uv_work_t *w) {
        request *r = w->data;

        r->body = json_dumps(r->body_json, JSON_COMPACT); /* (thread-safe since jansson 2.11) */
        json_decref(r->body_json);
        r->body_json = NULL;
}

static void on_body_dumped(uv_work_t *w, int status) {
        request *r = w->data;

        (void) status;
        r->dumping = false;
        if (r->orphaned) {
                request_free(r);
                return;
        }
        if (r->body && start(r) >= 0)
                return;
        /* (out of memory): answered as a call that never left */
        unlink_request(r);
        finish(r, CURLE_OUT_OF_MEMORY, 0);
        request_free(r);
}

/* Takes body (a new reference). pooled: its text is written in the
 * thread pool, and the request starts after. */
static int call_ex(etcd *e, const char *path, json_t *body, bool is_auth, bool pooled, etcd_cb cb,
                   void *userdata, request **ret_request) {
        request *r;
        int ret;

        if (!body)
                return -ENOMEM;
        r = new0(request, 1);
        if (!r || !(r->path = strdup(path))) {
                json_decref(body);
                request_free(r);
                return -ENOMEM;
        }
        r->e = e;
        r->is_auth = is_auth;
        tend_buf_init(&r->answer, ANSWER_MAX);
        r->cb = cb;
        r->userdata = userdata;
        r->body_json = body;
        r->dump.data = r;
        if (pooled && uv_queue_work(e->loop, &r->dump, dump_body, on_body_dumped) == 0)
                r->dumping = true;
        else {
                dump_body(&r->dump);
                ret = r->body ? start(r) : -ENOMEM;
                if (ret < 0) {
                        request_free(r);
                        return ret;
                }
        }
        r->next = e->requests;
        if (r->next)
                r->next->prev = r;
        e->requests = r;
        if (ret_request)
                *ret_request = r;
        return 0;
}

static int call(etcd *e, const char *path, json_t *body, etcd_cb cb, void *userdata) {
        return call_ex(e, path, body, false, false, cb, userdata, NULL);
}

/* ---- the hedge ------------------------------------------------------------------------------ */

static void on_probe(const etcd_result *res, void *userdata) {
        request *r = userdata; /* the txn; its probe is freed after this */
        etcd *e = r->e;

        /* unlinked both ways: the probe's free must not reach r, which
         * may be gone by then (its restart failed) */
        if (r->probe)
                r->probe->parent = NULL;
        r->probe = NULL;
        if (res->error < 0 || e->raft_term <= r->term_sent || r->dumping || r->waiting_auth ||
            r->hedges >= HEDGES_MAX)
                return;
        /* a new term since it was sent: a proposal to the old leader is
         * lost, and etcd answers only at its own timeout */
        log_debug("etcd: %s%s: sent in raft term %" PRId64 ", which is over (%" PRId64
                  "): sent again",
                  e->endpoints[e->current], r->path, r->term_sent, e->raft_term);
        net_curl_cancel(e->net, r->easy);
        r->unknown = true; /* it reached etcd: it may have been applied */
        r->hedges++;
        e->hedged++;
        tend_buf_reset(&r->answer);
        if (start(r) < 0) {
                unlink_request(r);
                finish(r, CURLE_OUT_OF_MEMORY, 0);
                request_free(r);
        }
}

static void on_hedge(uv_timer_t *t) {
        request *r = t->data;

        if (!r || r->probe || r->dumping || r->waiting_auth)
                return;
        if (call_ex(r->e, "/v3/maintenance/status", json_object(), false, false, on_probe, r,
                    &r->probe) < 0)
                r->probe = NULL;
        else
                r->probe->parent = r;
}

uint64_t etcd_hedged(const etcd *e) {
        return e->hedged;
}

/* ---- authentication ----------------------------------------------------------------------------
 */

static request *first_waiting(etcd *e) {
        for (request *r = e->requests; r; r = r->next)
                if (r->waiting_auth)
                        return r;
        return NULL;
}

/* The token came (or did not): the calls that waited for it go on (or
 * fail with why). One at a time from the list, as a callback may cancel
 * others. */
static void on_auth(const etcd_result *res, void *userdata) {
        etcd *e = userdata;
        const char *token = res->error == 0 ? json_string_value(json_object_get(res->body, "token"))
                                            : NULL;
        _cleanup_free_ char *why = NULL;
        request *r;

        e->authing = false;
        if (token && !(e->token = strdup(token)))
                token = NULL;
        /* etcd not there (or without a leader) is not a refusal */
        int error = res->error == -EIO || res->error == -EAGAIN ? res->error : -EACCES;
        if (!token)
                why = error == -EACCES ? strprintf("etcd refused user %s: %s", e->user,
                                                   res->message ?: "no token in its answer")
                                       : strprintf("asking etcd for user %s's token: %s", e->user,
                                                   strna(res->message));
        while ((r = first_waiting(e))) {
                r->waiting_auth = false;
                if (token && start(r) >= 0)
                        continue;
                etcd_result fail = { .error = token ? -ENOMEM : error,
                                     .message = token ? "out of memory" : why ?: "out of memory" };
                unlink_request(r);
                r->cb(&fail, r->userdata);
                request_free(r);
        }
}

static int authenticate(etcd *e) {
        int r;

        if (e->authing)
                return 0;
        e->authing = true;
        r = call_ex(e, "/v3/auth/authenticate",
                    json_pack("{s:s, s:s}", "name", e->user, "password", strempty(e->password)),
                    true, false, on_auth, e, NULL);
        if (r < 0)
                e->authing = false;
        return r;
}

/* ---- the calls ---------------------------------------------------------------------------------
 */

static json_t *put_body(const char *key, const void *value, size_t len, int64_t lease) {
        json_t *put = json_pack("{s:o, s:o}", "key", b64_str(key), "value", b64(value, len));

        if (put && lease && json_object_set_new(put, "lease", json_sprintf("%" PRId64, lease)) < 0)
                put = (json_decref(put), NULL);
        return put;
}

int etcd_put(etcd *e, const char *key, const void *value, size_t len, int64_t lease, etcd_cb cb,
             void *userdata) {
        return call(e, "/v3/kv/put", put_body(key, value, len, lease), cb, userdata);
}

json_t *etcd_op_put(const char *key, const void *value, size_t len, int64_t lease) {
        json_t *put = put_body(key, value, len, lease);
        return put ? json_pack("{s:o}", "request_put", put) : NULL;
}

static json_t *range_body(const char *key, const char *range_end) {
        json_t *j = json_pack("{s:o}", "key", b64_str(key));

        if (j && range_end && json_object_set_new(j, "range_end", b64_str(range_end)) < 0)
                j = (json_decref(j), NULL);
        return j;
}

json_t *etcd_op_range(const char *key, const char *range_end) {
        json_t *j = range_body(key, range_end);
        return j ? json_pack("{s:o}", "request_range", j) : NULL;
}

json_t *etcd_op_range_newest(const char *key, const char *range_end, int64_t limit) {
        json_t *j = range_body(key, range_end);
        if (j && (json_object_set_new(j, "limit", json_integer(limit)) < 0 ||
                  json_object_set_new(j, "sort_order", json_string("DESCEND")) < 0 ||
                  json_object_set_new(j, "sort_target", json_string("MOD")) < 0))
                return json_decref(j), NULL;
        return j ? json_pack("{s:o}", "request_range", j) : NULL;
}

json_t *etcd_op_delete(const char *key, const char *range_end) {
        json_t *j = range_body(key, range_end);
        return j ? json_pack("{s:o}", "request_delete_range", j) : NULL;
}

json_t *etcd_cmp_revision(const char *key, const char *target, const char *result, int64_t rev) {
        bool create = streq(target, "create");

        return json_pack("{s:o, s:s, s:s, s:o}", "key", b64_str(key), "target",
                         create ? "CREATE" : "MOD", "result", result,
                         create ? "create_revision" : "mod_revision",
                         json_sprintf("%" PRId64, rev));
}

int etcd_range(etcd *e, const char *key, const char *range_end, etcd_cb cb, void *userdata) {
        return call(e, "/v3/kv/range", range_body(key, range_end), cb, userdata);
}

int etcd_delete(etcd *e, const char *key, const char *range_end, etcd_cb cb, void *userdata) {
        return call(e, "/v3/kv/deleterange", range_body(key, range_end), cb, userdata);
}

int etcd_txn(etcd *e, json_t *compare, json_t *success, json_t *failure, etcd_cb cb,
             void *userdata) {
        /* A NULL is an array that could not be built: a txn without its
         * compares would write unguarded. */
        if (!compare || !success || !failure) {
                json_decref(compare);
                json_decref(success);
                json_decref(failure);
                return -ENOMEM;
        }
        request *r;
        int ret = call_ex(e, "/v3/kv/txn",
                          json_pack("{s:o, s:o, s:o}", "compare", compare, "success", success,
                                    "failure", failure),
                          false, true, cb, userdata, &r);
        if (ret >= 0)
                r->hedged_call = true; /* (armed at its start: written in the pool first) */
        return ret;
}

int etcd_compact(etcd *e, int64_t revision, etcd_cb cb, void *userdata) {
        return call(e, "/v3/kv/compaction",
                    json_pack("{s:o, s:b}", "revision", json_sprintf("%" PRId64, revision),
                              "physical", true),
                    cb, userdata);
}

int etcd_lease_grant(etcd *e, int64_t ttl_seconds, etcd_cb cb, void *userdata) {
        return call(e, "/v3/lease/grant", json_pack("{s:I}", "TTL", (json_int_t) ttl_seconds), cb,
                    userdata);
}

int etcd_lease_revoke(etcd *e, int64_t id, etcd_cb cb, void *userdata) {
        return call(e, "/v3/lease/revoke", json_pack("{s:o}", "ID", json_sprintf("%" PRId64, id)),
                    cb, userdata);
}

int etcd_lease_keepalive(etcd *e, int64_t id, etcd_cb cb, void *userdata) {
        return call(e, "/v3/lease/keepalive",
                    json_pack("{s:o}", "ID", json_sprintf("%" PRId64, id)), cb, userdata);
}

/* ---- the client ------------------------------------------------------------------------------ */

int etcd_new(const etcd_config *c, etcd **ret) {
        etcd *e;
        int r;

        if (!c->endpoints || !c->endpoints[0])
                return -EINVAL;
        e = new0(etcd, 1);
        if (!e)
                return -ENOMEM;
        e->loop = c->loop;
        e->timeout = c->timeout ?: 5 * USEC_PER_SEC;
        if ((c->ca_file && !(e->ca_file = strdup(c->ca_file))) ||
            (c->cert_file && !(e->cert_file = strdup(c->cert_file))) ||
            (c->key_file && !(e->key_file = strdup(c->key_file))) ||
            (c->user && !(e->user = strdup(c->user))) ||
            (c->password && !(e->password = strdup(c->password)))) {
                etcd_close(e);
                return -ENOMEM;
        }
        for (size_t i = 0; c->endpoints[i]; i++) {
                /* "host:port" means http:// */
                char *ep = strstr(c->endpoints[i], "://") ? strdup(c->endpoints[i])
                                                          : strprintf("http://%s", c->endpoints[i]);
                if (!ep || strv_push(&e->endpoints, ep) < 0) {
                        free(ep);
                        etcd_close(e);
                        return -ENOMEM;
                }
                e->n_endpoints++;
        }
        r = net_curl_new(c->loop, &e->net);
        if (r < 0) {
                etcd_close(e);
                return r;
        }
        *ret = e;
        return 0;
}

void etcd_cancel_calls(etcd *e, void *userdata) {
        /* (from the top after each: a txn's probe goes with it) */
        for (request *r = e->requests; r;) {
                if (r->userdata != userdata) {
                        r = r->next;
                        continue;
                }
                net_curl_cancel(e->net, r->easy);
                unlink_request(r);
                drop_request(r);
                r = e->requests;
        }
}

uv_loop_t *etcd_loop(const etcd *e) {
        return e->loop;
}

void etcd_close(etcd *e) {
        if (!e)
                return;
        while (e->watches)
                etcd_watch_cancel(e->watches);
        while (e->requests) {
                request *r = e->requests;
                net_curl_cancel(e->net, r->easy);
                unlink_request(r);
                drop_request(r);
        }
        net_curl_close(e->net);
        strv_free(e->endpoints);
        free(e->ca_file);
        free(e->cert_file);
        free(e->key_file);
        free(e->user);
        secret_free(e->password);
        secret_free(e->token);
        free(e);
}

/* ---- watches ----------------------------------------------------------------------------- */

#define WATCH_LINE_MAX (8 * 1024 * 1024)     /* a 128-op txn of big values is one line */
#define HAND_OVER_SLICE (10 * USEC_PER_MSEC) /* lines handed over in one turn of the loop */

/* A line of the stream, read (JSON, base64, each value's JSON) in the
 * loop's thread pool: a large object's line costs the loop nothing to
 * read. Lines are handed over in the order they came, each once it is
 * read. */
typedef struct wline wline;
struct wline {
        wline *next;
        etcd_watch *w;
        uv_work_t work;
        char *text; /* until read */
        size_t len;
        bool read;
        bool dropped; /* the stream broke, or the watch went: never handed over */
        json_t *j;    /* the line, its events taken out; NULL: not JSON */
        etcd_event *ev;
        size_t n_ev;
        int error; /* an event that cannot be read */
};

struct etcd_watch {
        etcd *e;
        etcd_watch *prev, *next;
        CURL *easy;
        struct curl_slist *headers;
        char *body;
        tend_buf line;       /* the line being received */
        wline *head, **tail; /* lines received, not yet handed over */
        unsigned reading;    /* lines in the thread pool (the watch outlives them) */
        bool closed;         /* its timer closed: freed once nothing is read */
        bool running;        /* the transfer is on the multi handle */
        bool ended;          /* the stream is over (after the lines) */
        int end_error;
        char *end_message;
        bool canceled;   /* etcd_watch_cancel(): nothing more is called */
        uv_timer_t kick; /* hands the lines over from the loop; resumes */
        /* resumption: what it watches, from where, after how long */
        char *key, *range_end;
        int64_t next_revision; /* 0: from now (not yet known) */
        bool broken;           /* the stream broke: resume it */
        bool from_now;         /* this stream was asked from now (no start revision) */
        uint64_t retry_ms;
        etcd_watch_events on_events;
        etcd_watch_end on_end;
        void *userdata;
};

static void wline_empty(wline *l) {
        free(l->text);
        json_decref(l->j);
        for (size_t i = 0; i < l->n_ev; i++)
                kv_done(&l->ev[i].kv);
        free(l->ev);
}

static void wline_free(wline *l) {
        if (!l)
                return;
        wline_empty(l);
        free(l);
}

static void empty_work(uv_work_t *work) {
        wline_empty(work->data);
}

static void empty_done(uv_work_t *work, int status) {
        (void) status;
        free(work->data);
}

/* A line handed over goes in the thread pool too: its values are trees
 * as large as the objects (what the callback kept of them holds its own
 * references; jansson counts them atomically). */
static void wline_discard(etcd *e, wline *l) {
        if (uv_queue_work(e->loop, &l->work, empty_work, empty_done) < 0)
                wline_free(l);
}

/* Forgets the lines not handed over: those read go now, those being read
 * once they are. */
static void drop_lines(etcd_watch *w) {
        wline *l = w->head, *next;

        for (; l; l = next) {
                next = l->next;
                if (l->read)
                        wline_free(l);
                else
                        l->dropped = true;
        }
        w->head = NULL;
        w->tail = &w->head;
}

static void watch_free(etcd_watch *w) {
        if (w->easy)
                curl_easy_cleanup(w->easy);
        curl_slist_free_all(w->headers);
        free(w->body);
        tend_buf_free(&w->line);
        free(w->key);
        free(w->range_end);
        free(w->end_message);
        free(w);
}

static void watch_closed(uv_handle_t *h) {
        etcd_watch *w = h->data;

        drop_lines(w);
        w->closed = true;
        if (w->reading == 0)
                watch_free(w);
}

void etcd_watch_cancel(etcd_watch *w) {
        if (!w || w->canceled)
                return;
        w->canceled = true;
        if (w->running)
                net_curl_cancel(w->e->net, w->easy);
        w->running = false;
        if (w->prev)
                w->prev->next = w->next;
        else
                w->e->watches = w->next;
        if (w->next)
                w->next->prev = w->prev;
        uv_timer_stop(&w->kick);
        uv_close((uv_handle_t *) &w->kick, watch_closed);
}

static int watch_resume(etcd_watch *w);

/* In the thread pool: the line's JSON, its events' keys and values, and
 * each value's own JSON. Nothing of the watch is touched here. */
static void read_line(uv_work_t *work) {
        wline *l = work->data;
        json_t *res, *evs;

        l->j = json_loadb(l->text, l->len, 0, NULL);
        free(l->text);
        l->text = NULL;
        res = json_object_get(l->j, "result");
        evs = json_object_get(res, "events");
        if (json_array_size(evs) == 0)
                return;
        l->ev = new0(etcd_event, json_array_size(evs));
        if (!l->ev) {
                l->error = -ENOMEM;
                return;
        }
        for (size_t i = 0; i < json_array_size(evs); i++, l->n_ev++) {
                json_t *je = json_array_get(evs, i);
                etcd_event *ev = &l->ev[i];
                ev->deleted = streq_ptr(json_string_value(json_object_get(je, "type")), "DELETE");
                l->error = decode_kv(json_object_get(je, "kv"), &ev->kv);
                if (l->error < 0)
                        break;
                if (!ev->deleted)
                        ev->kv.json = json_loadb(ev->kv.value, ev->kv.value_len, 0, NULL);
        }
        (void) json_object_del(res, "events"); /* the base64 text, freed here too */
}

static void on_kick(uv_timer_t *t);

static void on_line_read(uv_work_t *work, int status) {
        wline *l = work->data;
        etcd_watch *w = l->w;

        (void) status;
        w->reading--;
        l->read = true;
        if (l->dropped)
                wline_free(l);
        if (w->closed) {
                if (w->reading == 0)
                        watch_free(w);
                return;
        }
        /* (a broken stream's retry, pending, hands them over when it resumes) */
        if (!w->canceled && w->head && w->head->read &&
            !(w->broken && uv_is_active((uv_handle_t *) &w->kick)))
                uv_timer_start(&w->kick, on_kick, 0, 0);
}

/* Hands one line's events over; -errno if one cannot be read. */
static int hand_over(etcd_watch *w, wline *l, int64_t revision) {
        if (l->error < 0)
                return l->error;
        for (size_t i = 0; i < l->n_ev; i++)
                if (l->ev[i].kv.mod_revision + 1 > w->next_revision)
                        w->next_revision = l->ev[i].kv.mod_revision + 1;
        w->on_events(l->ev, l->n_ev, revision, w->userdata);
        return 0;
}

/* The stream is to be resumed (elsewhere), what it queued dropped;
 * forget_token: with a new token. */
static void watch_break(etcd_watch *w, bool forget_token) {
        if (forget_token) {
                secret_free(w->e->token);
                w->e->token = NULL;
        }
        drop_lines(w);
        if (w->running)
                net_curl_cancel(w->e->net, w->easy);
        w->running = false;
        w->broken = true;
}

/* Hands the lines read over, in order; then resumes a broken stream, or ends. */
static void on_kick(uv_timer_t *t) {
        etcd_watch *w = t->data;

        usec_t start = now_monotonic();

        while (!w->canceled && !w->ended && w->head && w->head->read) {
                wline *l = w->head;
                json_t *line = l->j;
                json_t *res = json_object_get(line, "result");
                int64_t h = int64_of(json_object_get(json_object_get(res, "header"), "revision"));

                if (!(w->head = l->next))
                        w->tail = &w->head;
                if (!line) {
                        /* not JSON: a stream that is not etcd's, or cut
                         * inside a line; resume elsewhere */
                        watch_break(w, false);
                } else if (json_object_get(line, "error")) {
                        /* "no leader" on this member, or (16: UNAUTHENTICATED) a token
                         * etcd forgot: resume elsewhere, with a new token */
                        watch_break(w, int64_of(json_object_get(json_object_get(line, "error"),
                                                                "grpc_code")) == 16 ||
                                               int64_of(json_object_get(line, "code")) == 16);
                } else if (json_is_true(json_object_get(res, "canceled")) &&
                           strstr(strempty(
                                          json_string_value(json_object_get(res, "cancel_reason"))),
                                  "Unauthenticated") &&
                           w->e->user) {
                        /* a token etcd forgot (it restarted): a new one, then resume */
                        watch_break(w, true);
                } else if (json_is_true(json_object_get(res, "canceled"))) {
                        int64_t compacted = int64_of(json_object_get(res, "compact_revision"));
                        w->canceled = true; /* no end twice: this is the end */
                        w->on_end(compacted ? -ERANGE : -ECANCELED,
                                  compacted ? "watch: the start revision has been compacted"
                                            : "watch: canceled by etcd",
                                  compacted, w->userdata);
                        w->canceled = false;
                        wline_discard(w->e, l);
                        etcd_watch_cancel(w);
                        return;
                } else {
                        w->retry_ms = 0; /* it answers */
                        if (l->n_ev > 0 || l->error < 0) {
                                int r = hand_over(w, l, h);
                                if (r < 0 && !w->canceled) {
                                        w->ended = true;
                                        w->end_error = r;
                                        free(w->end_message);
                                        w->end_message = strdup(
                                                "watch: an event that cannot be read");
                                }
                        } else if (h > 0 && h + 1 > w->next_revision &&
                                   (w->from_now || !json_is_true(json_object_get(res, "created"))))
                                /* a progress note (or the creation of a watch from now):
                                 * nothing before h + 1 is missed. Not the creation of a
                                 * watch from a revision: its history follows, on later
                                 * lines, and a break before them must resume from it. */
                                w->next_revision = h + 1;
                }
                wline_discard(w->e, l);
                /* the loop's other work between lines, once they took long:
                 * the rest in 1 ms, after a poll (a timer of 0 ms started
                 * here would run again in this same timer phase under
                 * libuv before 1.45, Debian 12's 1.44 among them) */
                if (w->head && now_monotonic() - start >= HAND_OVER_SLICE) {
                        if (!w->canceled && !w->ended)
                                uv_timer_start(&w->kick, on_kick, 1, 0);
                        return;
                }
        }
        if (!w->canceled && !w->ended && w->broken && !w->head) {
                int r = watch_resume(w);
                if (r < 0) {
                        w->ended = true;
                        w->end_error = r;
                }
        }
        if (!w->canceled && w->ended) {
                if (w->running) {
                        net_curl_cancel(w->e->net, w->easy);
                        w->running = false;
                }
                w->canceled = true;
                w->on_end(w->end_error ?: -EIO, w->end_message ?: "watch: the stream ended", 0,
                          w->userdata);
                w->canceled = false;
                etcd_watch_cancel(w);
        }
}

/* Inside libcurl: only queue (no client call may be made from here); each
 * line is read in the thread pool. */
static size_t on_watch_data(char *p, size_t size, size_t n, void *userdata) {
        etcd_watch *w = userdata;
        size_t len = size * n;

        for (size_t at = 0; at < len;) {
                const char *nl = memchr(p + at, '\n', len - at);
                size_t part = nl ? (size_t) (nl - (p + at)) : len - at;
                wline *l;
                if (tend_buf_add(&w->line, p + at, part) < 0)
                        return 0; /* a line too long: the transfer fails */
                at += part;
                if (!nl)
                        break;
                at++;
                if (!(l = new0(wline, 1)))
                        return 0;
                l->w = w;
                l->work.data = l;
                l->len = w->line.len;
                if (!(l->text = tend_buf_take(&w->line))) {
                        free(l);
                        return 0;
                }
                *w->tail = l;
                w->tail = &l->next;
                w->reading++;
                if (uv_queue_work(w->e->loop, &l->work, read_line, on_line_read) < 0) {
                        read_line(&l->work); /* no pool: here, then */
                        on_line_read(&l->work, 0);
                }
        }
        return len;
}

/* The stream broke (the member went, no leader, a cut): what came is
 * handed over, then it resumes on the next endpoint from the revision
 * after the last it saw — after 100 ms, twice as long each time it fails
 * again, up to 2 s. It does not end by itself for this: the session's
 * keepalive tells whether etcd is reachable at all. */
static void on_watch_done(void *userdata, CURLcode code, long status) {
        etcd_watch *w = userdata;

        w->running = false;
        w->broken = true;
        if (status == 401 && w->e->user) /* a token etcd forgot: a new one */
        {
                free(w->e->token);
                w->e->token = NULL;
        }
        w->retry_ms = w->retry_ms ? MIN(w->retry_ms * 2, (uint64_t) 2000) : 100;
        if (!w->canceled)
                uv_timer_start(&w->kick, on_kick, w->retry_ms, 0);
}

/* (Re)starts the stream on the current endpoint from next_revision. */
static int watch_begin(etcd_watch *w) {
        etcd *e = w->e;
        _cleanup_free_ char *url = strprintf("%s/v3/watch", e->endpoints[e->current]);
        json_t *create = range_body(w->key, w->range_end), *req;
        int r;

        w->from_now = w->next_revision == 0;
        if (create && w->next_revision > 0 &&
            json_object_set_new(create, "start_revision",
                                json_sprintf("%" PRId64, w->next_revision)) < 0)
                create = (json_decref(create), NULL);
        req = create ? json_pack("{s:o}", "create_request", create) : NULL;
        free(w->body);
        w->body = req ? json_dumps(req, JSON_COMPACT) : NULL;
        json_decref(req);
        if (!url || !w->body)
                return -ENOMEM;
        if (e->user && !e->token) {
                /* no token yet: ask, and try again shortly */
                r = authenticate(e);
                if (r < 0)
                        return r;
                w->broken = true;
                w->retry_ms = w->retry_ms ? MIN(w->retry_ms * 2, (uint64_t) 2000) : 100;
                uv_timer_start(&w->kick, on_kick, w->retry_ms, 0);
                return 0;
        }
        curl_slist_free_all(w->headers);
        if (!(w->headers = headers(e, true)))
                return -ENOMEM;
        tls_options(e, w->easy);
        tend_buf_reset(&w->line);
        curl_easy_setopt(w->easy, CURLOPT_URL, url);
        curl_easy_setopt(w->easy, CURLOPT_POSTFIELDS, w->body);
        curl_easy_setopt(w->easy, CURLOPT_HTTPHEADER, w->headers);
        curl_easy_setopt(w->easy, CURLOPT_WRITEFUNCTION, on_watch_data);
        curl_easy_setopt(w->easy, CURLOPT_WRITEDATA, w);
        curl_easy_setopt(w->easy, CURLOPT_CONNECTTIMEOUT_MS, 1000L);
        curl_easy_setopt(w->easy, CURLOPT_TCP_KEEPALIVE, 1L);
        curl_easy_setopt(w->easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(w->easy, CURLOPT_PROTOCOLS_STR, "http,https");
        r = net_curl_start(e->net, w->easy, on_watch_done, w);
        if (r < 0)
                return r;
        w->running = true;
        return 0;
}

static int watch_resume(etcd_watch *w) {
        etcd *e = w->e;

        w->broken = false;
        e->current = (e->current + 1) % e->n_endpoints;
        return watch_begin(w);
}

int etcd_watch_start(etcd *e, const char *key, const char *range_end, int64_t start_revision,
                     etcd_watch_events on_events, etcd_watch_end on_end, void *userdata,
                     etcd_watch **ret) {
        etcd_watch *w = new0(etcd_watch, 1);
        int r;

        if (!w)
                return -ENOMEM;
        w->e = e;
        w->on_events = on_events;
        w->on_end = on_end;
        w->userdata = userdata;
        w->next_revision = start_revision;
        tend_buf_init(&w->line, WATCH_LINE_MAX);
        uv_timer_init(e->loop, &w->kick);
        w->kick.data = w;
        w->key = strdup(key);
        w->range_end = range_end ? strdup(range_end) : NULL;
        w->tail = &w->head;
        w->easy = curl_easy_init();
        w->headers = headers(e, true);
        /* linked first, so that a failure below is undone by one cancel */
        w->next = e->watches;
        if (w->next)
                w->next->prev = w;
        e->watches = w;
        if (!w->key || (range_end && !w->range_end) || !w->easy || !w->headers) {
                etcd_watch_cancel(w);
                return -ENOMEM;
        }
        r = watch_begin(w);
        if (r < 0) {
                etcd_watch_cancel(w);
                return r;
        }
        *ret = w;
        return 0;
}
