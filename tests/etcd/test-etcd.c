/* SPDX-License-Identifier: MIT */

/*
 * The etcd client (tend_etcd) against a real etcd: Debian's etcd-server
 * (3.4, `make deps`), one member on loopback ports of its own, a data dir
 * of its own. Skipped (77) where etcd is not installed.
 */

#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tend/etcd.h"

static uv_loop_t loop;
static pid_t etcd_pid = -1;
static char data_dir[] = "/tmp/tend-etcd-XXXXXX";
static char endpoint[64];

static int free_port(void) {
        struct sockaddr_in sa = { .sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof sa;
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port;

        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *) &sa, sizeof sa), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *) &sa, &len), 0);
        port = ntohs(sa.sin_port);
        close(fd);
        return port;
}

/* One call, run to its answer. */
typedef struct answer {
        bool done;
        int error, grpc_code;
        char message[512];
        int64_t revision, count, deleted, lease_id, ttl;
        bool succeeded, unknown;
        size_t n_kvs;
        char key[256], value[256];
        int64_t mod_revision, create_revision, lease;
} answer;

static void on_answer(const etcd_result *r, void *userdata) {
        answer *a = userdata;

        *a = (answer){
                .done = true,
                .error = r->error,
                .grpc_code = r->grpc_code,
                .revision = r->revision,
                .count = r->count,
                .deleted = r->deleted,
                .lease_id = r->lease_id,
                .ttl = r->ttl,
                .succeeded = r->succeeded,
                .unknown = r->unknown,
                .n_kvs = r->n_kvs,
        };
        snprintf(a->message, sizeof a->message, "%s", strempty(r->message));
        if (r->n_kvs) {
                snprintf(a->key, sizeof a->key, "%s", r->kvs[0].key);
                snprintf(a->value, sizeof a->value, "%.*s", (int) r->kvs[0].value_len,
                         r->kvs[0].value);
                a->mod_revision = r->kvs[0].mod_revision;
                a->create_revision = r->kvs[0].create_revision;
                a->lease = r->kvs[0].lease;
        }
}

static uint64_t bench_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ULL + (uint64_t) ts.tv_nsec;
}

static void wait_answer(answer *a) {
        while (!a->done)
                uv_run(&loop, UV_RUN_ONCE);
}

static etcd *client(char *const *endpoints) {
        etcd *e;
        assert_int_equal(etcd_new(&(etcd_config){ .loop = &loop,
                                                  .endpoints = endpoints,
                                                  .timeout = 2 * USEC_PER_SEC },
                                  &e),
                         0);
        return e;
}

static int client_port, peer_port;

/* etcd on the test's ports and data dir (again: the same member, its data
 * kept); returns once it answers. */
static int start_etcd(void) {
        char peer[64], client_url[64], initial[96], log[128];
        char *eps[] = { endpoint, NULL };

        snprintf(client_url, sizeof client_url, "http://127.0.0.1:%d", client_port);
        snprintf(peer, sizeof peer, "http://127.0.0.1:%d", peer_port);
        snprintf(initial, sizeof initial, "default=%s", peer);
        snprintf(log, sizeof log, "%s.log", data_dir);
        etcd_pid = fork();
        if (etcd_pid == 0) {
                int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                dup2(fd, 1);
                dup2(fd, 2);
                execlp("etcd", "etcd", "--data-dir", data_dir, "--listen-client-urls", client_url,
                       "--advertise-client-urls", client_url, "--listen-peer-urls", peer,
                       "--initial-advertise-peer-urls", peer, "--initial-cluster", initial,
                       (char *) NULL);
                _exit(127);
        }
        etcd *e = client(eps);
        for (int i = 0; i < 100; i++) {
                answer a = {};
                assert_int_equal(etcd_range(e, "/health", NULL, on_answer, &a), 0);
                wait_answer(&a);
                if (a.error == 0) {
                        etcd_close(e);
                        return 0;
                }
                usleep(100 * 1000);
        }
        etcd_close(e);
        fprintf(stderr, "etcd did not come up: see %s\n", log);
        return -1;
}

static void stop_etcd(void) {
        if (etcd_pid > 0) {
                kill(etcd_pid, SIGTERM);
                waitpid(etcd_pid, NULL, 0);
        }
        etcd_pid = -1;
}

static int setup(void **state) {
        if (!mkdtemp(data_dir))
                return -1;
        client_port = free_port();
        peer_port = free_port();
        snprintf(endpoint, sizeof endpoint, "http://127.0.0.1:%d", client_port);
        uv_loop_init(&loop);
        return start_etcd();
}

static int teardown(void **state) {
        char cmd[128];

        stop_etcd();
        uv_run(&loop, UV_RUN_DEFAULT); /* the clients' handles close */
        uv_loop_close(&loop);
        snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s.log'", data_dir, data_dir);
        return system(cmd) == 0 ? 0 : -1;
}

/* put, then range: the value and revisions come back; a prefix range
 * counts what is under it; delete says how many went. */
static void test_kv(void **state) {
        char *eps[] = { endpoint, NULL };
        etcd *e = client(eps);
        _cleanup_free_ char *end = etcd_prefix_end("/t/");
        answer put = {}, get = {}, pre = {}, del = {}, none = {};

        assert_string_equal(end, "/t0");
        assert_int_equal(etcd_put(e, "/t/a", "hello", 5, 0, on_answer, &put), 0);
        wait_answer(&put);
        assert_int_equal(put.error, 0);
        assert_true(put.revision > 1);
        assert_int_equal(etcd_range(e, "/t/a", NULL, on_answer, &get), 0);
        wait_answer(&get);
        assert_int_equal(get.n_kvs, 1);
        assert_string_equal(get.key, "/t/a");
        assert_string_equal(get.value, "hello");
        assert_int_equal(get.mod_revision, put.revision);
        answer b = {}, u = {};
        assert_int_equal(etcd_put(e, "/t/b", "\xff\x00x", 3, 0, on_answer, &b), 0);
        wait_answer(&b);
        assert_int_equal(etcd_put(e, "/u/c", "", 0, 0, on_answer, &u), 0);
        wait_answer(&u);
        assert_int_equal(etcd_range(e, "/t/", end, on_answer, &pre), 0);
        wait_answer(&pre);
        assert_int_equal(pre.count, 2);
        assert_int_equal(pre.n_kvs, 2);
        assert_int_equal(etcd_delete(e, "/t/", end, on_answer, &del), 0);
        wait_answer(&del);
        assert_int_equal(del.deleted, 2);
        assert_int_equal(etcd_range(e, "/t/a", NULL, on_answer, &none), 0);
        wait_answer(&none);
        assert_int_equal(none.error, 0);
        assert_int_equal(none.n_kvs, 0); /* absent: no "kvs" in the answer */
        etcd_close(e);
}

/* create-if-absent, then fencing on a revision: a txn that fails says so
 * and runs its failure branch. */
static void test_txn(void **state) {
        char *eps[] = { endpoint, NULL };
        etcd *e = client(eps);
        answer first = {}, second = {}, fenced = {}, moved = {};

        for (int i = 0; i < 2; i++) {
                answer *a = i == 0 ? &first : &second;
                json_t *cmp = json_pack("[o]", etcd_cmp_revision("/leader", "create", "EQUAL", 0));
                json_t *ok = json_pack("[o]", etcd_op_put("/leader", i ? "b" : "a", 1, 0));
                json_t *no = json_pack("[o]", etcd_op_range("/leader", NULL));
                assert_int_equal(etcd_txn(e, cmp, ok, no, on_answer, a), 0);
                wait_answer(a);
                assert_int_equal(a->error, 0);
        }
        assert_true(first.succeeded);
        assert_false(second.succeeded);         /* no "succeeded" in the answer */
        assert_string_equal(second.value, "a"); /* the failure branch's range */
        int64_t mine = second.create_revision;
        assert_int_equal(mine, first.revision);

        /* someone else writes it: a write fenced on the old revision fails */
        assert_int_equal(etcd_put(e, "/leader", "c", 1, 0, on_answer, &moved), 0);
        wait_answer(&moved);
        json_t *cmp = json_pack("[o]", etcd_cmp_revision("/leader", "mod", "EQUAL", mine));
        json_t *ok = json_pack("[o]", etcd_op_delete("/leader", NULL));
        assert_int_equal(etcd_txn(e, cmp, ok, json_array(), on_answer, &fenced), 0);
        wait_answer(&fenced);
        assert_int_equal(fenced.error, 0);
        assert_false(fenced.succeeded);
        /* a compare that could not be built (NULL) is not taken for none */
        assert_int_equal(etcd_txn(e, NULL, json_pack("[o]", etcd_op_delete("/leader", NULL)),
                                  json_array(), on_answer, &fenced),
                         -ENOMEM);
        etcd_close(e);
}

/* A txn's body is written in the thread pool before it is sent: a large
 * one arrives whole; one canceled, or whose client is closed, meanwhile
 * calls nothing and is freed once written (ASan). */
static void test_txn_written_off_the_loop(void **state) {
        char *eps[] = { endpoint, NULL };
        etcd *e = client(eps);
        answer big = {}, got = {}, canceled = {};
        size_t n = 400 * 1024;
        _cleanup_free_ char *v = malloc(n + 1);

        (void) state;
        assert_non_null(v);
        for (size_t i = 0; i < n; i++)
                v[i] = (char) ('a' + i % 26);
        v[n] = 0;
        assert_int_equal(etcd_txn(e, json_array(), json_pack("[o]", etcd_op_put("/big", v, n, 0)),
                                  json_array(), on_answer, &big),
                         0);
        wait_answer(&big);
        assert_int_equal(big.error, 0);
        assert_true(big.succeeded);
        json_t *ok = json_pack("[o]", etcd_op_range("/big", NULL));
        assert_int_equal(etcd_txn(e, json_array(), ok, json_array(), on_answer, &got), 0);
        wait_answer(&got);
        assert_int_equal(got.error, 0);
        assert_int_equal(got.n_kvs, 1);
        assert_memory_equal(got.value, v, sizeof got.value - 1); /* (its first bytes) */

        /* canceled at once: no answer, ever */
        assert_int_equal(etcd_txn(e, json_array(), json_pack("[o]", etcd_op_put("/big", "x", 1, 0)),
                                  json_array(), on_answer, &canceled),
                         0);
        etcd_cancel_calls(e, &canceled);
        for (int i = 0; i < 30; i++)
                uv_run(&loop, UV_RUN_NOWAIT), usleep(5 * 1000);
        assert_false(canceled.done);
        /* the client closed with one being written */
        assert_int_equal(etcd_txn(e, json_array(), json_pack("[o]", etcd_op_put("/big", v, n, 0)),
                                  json_array(), on_answer, &canceled),
                         0);
        etcd_close(e);
        uv_run(&loop, UV_RUN_DEFAULT);
        assert_false(canceled.done);
}

/* A lease: granted, kept alive, carries a key; an unknown one is gone. */
static void test_lease(void **state) {
        char *eps[] = { endpoint, NULL };
        etcd *e = client(eps);
        answer grant = {}, ka = {}, put = {}, get = {}, gone = {}, dead = {};

        assert_int_equal(etcd_lease_grant(e, 5, on_answer, &grant), 0);
        wait_answer(&grant);
        assert_int_equal(grant.error, 0);
        assert_true(grant.lease_id != 0);
        assert_int_equal(grant.ttl, 5);
        assert_int_equal(etcd_lease_keepalive(e, grant.lease_id, on_answer, &ka), 0);
        wait_answer(&ka);
        assert_int_equal(ka.error, 0);
        assert_true(ka.ttl > 0);
        assert_int_equal(etcd_put(e, "/nodes/a", "up", 2, grant.lease_id, on_answer, &put), 0);
        wait_answer(&put);
        assert_int_equal(put.error, 0);
        assert_int_equal(etcd_range(e, "/nodes/a", NULL, on_answer, &get), 0);
        wait_answer(&get);
        assert_int_equal(get.lease, grant.lease_id);
        assert_int_equal(etcd_lease_keepalive(e, 4242, on_answer, &gone), 0);
        wait_answer(&gone);
        assert_int_equal(gone.error, 0);
        assert_int_equal(gone.ttl, 0); /* no "TTL": the lease is gone */
        assert_int_equal(etcd_put(e, "/nodes/b", "up", 2, 4242, on_answer, &dead), 0);
        wait_answer(&dead);
        assert_int_equal(dead.error, -ENOENT); /* HTTP 404, code 5 */
        assert_int_equal(dead.grpc_code, 5);
        assert_non_null(strstr(dead.message, "lease not found"));
        etcd_close(e);
}

/* A dead endpoint first: the call goes to the next. All dead: an error
 * that names the endpoint. Closed with a call in flight: no callback. */
static void test_endpoints(void **state) {
        char dead1[64], dead2[64];
        answer a = {}, b = {}, never = {};

        snprintf(dead1, sizeof dead1, "127.0.0.1:%d", free_port()); /* no scheme: http */
        snprintf(dead2, sizeof dead2, "http://127.0.0.1:%d", free_port());
        char *some[] = { dead1, endpoint, NULL }, *none[] = { dead1, dead2, NULL };
        etcd *e = client(some), *f = client(none);

        assert_int_equal(etcd_put(e, "/x", "1", 1, 0, on_answer, &a), 0);
        wait_answer(&a);
        assert_int_equal(a.error, 0);
        assert_int_equal(etcd_put(f, "/x", "2", 1, 0, on_answer, &b), 0);
        wait_answer(&b);
        assert_int_equal(b.error, -EIO);
        assert_non_null(strstr(b.message, "/v3/kv/put"));
        assert_false(b.unknown); /* refused at connect: it reached no etcd */

        /* An endpoint that takes the request and never answers: the put
         * may have been applied (a txn's outcome is unknown). */
        struct sockaddr_in sa = { .sin_family = AF_INET,
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof sa;
        int silent = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        char url[64];
        answer c = {};
        assert_true(silent >= 0);
        assert_int_equal(bind(silent, (struct sockaddr *) &sa, sizeof sa), 0);
        assert_int_equal(listen(silent, 4), 0); /* the kernel accepts; nobody reads */
        assert_int_equal(getsockname(silent, (struct sockaddr *) &sa, &len), 0);
        snprintf(url, sizeof url, "http://127.0.0.1:%d", ntohs(sa.sin_port));
        char *mute[] = { url, NULL };
        etcd *g = client(mute);
        assert_int_equal(etcd_put(g, "/x", "3", 1, 0, on_answer, &c), 0);
        wait_answer(&c);
        assert_int_equal(c.error, -EIO);
        assert_true(c.unknown);
        etcd_close(g);
        close(silent);
        assert_int_equal(etcd_range(e, "/x", NULL, on_answer, &never), 0);
        etcd_close(e);
        etcd_close(f);
        uv_run(&loop, UV_RUN_NOWAIT);
        assert_false(never.done);
}

/* A watch of a prefix: puts and deletes in order with their revisions, a
 * txn's two puts as one call, the history from an older revision; a
 * compacted start revision ends it with -ERANGE. */
typedef struct seen {
        char log[1024];
        int calls;
        int64_t last_revision;
        bool ended;
        int end_error;
        int64_t compacted;
} seen;

static void on_events(const etcd_event *ev, size_t n, int64_t revision, void *userdata) {
        seen *s = userdata;
        size_t len = strlen(s->log);

        s->calls++;
        s->last_revision = revision;
        for (size_t i = 0; i < n; i++)
                len += (size_t) snprintf(s->log + len, sizeof s->log - len, "%s %s=%.*s;",
                                         ev[i].deleted ? "del" : "put", ev[i].kv.key,
                                         (int) ev[i].kv.value_len, ev[i].kv.value);
}

static void on_end(int error, const char *message, int64_t compacted, void *userdata) {
        seen *s = userdata;
        s->ended = true;
        s->end_error = error;
        s->compacted = compacted;
}

static void put_wait(etcd *e, const char *k, const char *v, int64_t *ret_rev) {
        answer a = {};
        assert_int_equal(etcd_put(e, k, v, strlen(v), 0, on_answer, &a), 0);
        wait_answer(&a);
        assert_int_equal(a.error, 0);
        if (ret_rev)
                *ret_rev = a.revision;
}

static void test_watch(void **state) {
        char *eps[] = { endpoint, NULL };
        etcd *e = client(eps);
        _cleanup_free_ char *end = etcd_prefix_end("/w/");
        etcd_watch *w, *h;
        seen now = {}, hist = {};
        int64_t first, last;
        answer t = {}, d = {};

        assert_int_equal(etcd_watch_start(e, "/w/", end, 0, on_events, on_end, &now, &w), 0);
        /* the stream is open once etcd says "created"; give it a moment */
        for (int i = 0; i < 20; i++)
                uv_run(&loop, UV_RUN_NOWAIT), usleep(10 * 1000);
        put_wait(e, "/w/a", "1", &first);
        put_wait(e, "/other", "x", NULL); /* not under the prefix */
        json_t *ops = json_pack("[o, o]", etcd_op_put("/w/b", "2", 1, 0),
                                etcd_op_put("/w/c", "3", 1, 0));
        assert_int_equal(etcd_txn(e, json_array(), ops, json_array(), on_answer, &t), 0);
        wait_answer(&t);
        assert_int_equal(etcd_delete(e, "/w/a", NULL, on_answer, &d), 0);
        wait_answer(&d);
        last = d.revision;
        while (now.last_revision < last)
                uv_run(&loop, UV_RUN_ONCE);
        assert_string_equal(now.log, "put /w/a=1;put /w/b=2;put /w/c=3;del /w/a=;");
        assert_int_equal(now.calls, 3); /* the txn's two puts in one call */
        etcd_watch_cancel(w);

        /* the history, from the first put on */
        assert_int_equal(etcd_watch_start(e, "/w/", end, first, on_events, on_end, &hist, &h), 0);
        while (hist.last_revision < last)
                uv_run(&loop, UV_RUN_ONCE);
        assert_string_equal(hist.log, now.log);
        etcd_watch_cancel(h);

        /* compacted past: the watch ends, saying where to relist from */
        answer c = {};
        seen old = {};
        etcd_watch *o;
        assert_int_equal(etcd_compact(e, last, on_answer, &c), 0);
        wait_answer(&c);
        assert_int_equal(c.error, 0);
        assert_int_equal(etcd_watch_start(e, "/w/", end, first, on_events, on_end, &old, &o), 0);
        while (!old.ended)
                uv_run(&loop, UV_RUN_ONCE);
        assert_int_equal(old.end_error, -ERANGE);
        assert_int_equal(old.compacted, last);
        assert_int_equal(old.calls, 0);
        etcd_close(e);
}

/* Lines are read in the loop's thread pool, several at once, and handed
 * over in etcd's order all the same; each value comes read as JSON (NULL
 * for one that is not JSON). A watch canceled while its lines are being
 * read calls nothing more, and leaves nothing behind (ASan). */
typedef struct ordered {
        int64_t last;
        size_t n, json, calls;
        bool out_of_order, bad_json, ended;
} ordered;

static void on_ordered_end(int error, const char *message, int64_t compacted, void *userdata) {
        (void) error, (void) message, (void) compacted;
        ((ordered *) userdata)->ended = true;
}

static void on_ordered(const etcd_event *ev, size_t n, int64_t revision, void *userdata) {
        ordered *o = userdata;

        (void) revision;
        o->calls++;
        for (size_t i = 0; i < n; i++, o->n++) {
                json_t *j = json_loadb(ev[i].kv.value, ev[i].kv.value_len, 0, NULL);
                if (ev[i].kv.mod_revision <= o->last)
                        o->out_of_order = true;
                o->last = ev[i].kv.mod_revision;
                if (!j != !ev[i].kv.json || (j && !json_equal(j, ev[i].kv.json)))
                        o->bad_json = true;
                o->json += j != NULL;
                json_decref(j);
        }
}

static void test_watch_read_off_the_loop(void **state) {
        char *eps[] = { endpoint, NULL };
        etcd *e = client(eps);
        _cleanup_free_ char *end = etcd_prefix_end("/o/");
        _cleanup_free_ char *big = NULL;
        ordered live = {}, hist = {}, gone = {};
        etcd_watch *w, *h, *g;
        answer puts[60] = {};
        int64_t first = 0, last = 0;
        size_t want_json = 0;

        /* a 300 KB value: long enough that a small one after it is read first */
        big = malloc(300 * 1024 + 16);
        assert_non_null(big);
        strcpy(big, "[\"");
        memset(big + 2, 'x', 300 * 1024);
        strcpy(big + 2 + 300 * 1024, "\"]");

        assert_int_equal(etcd_watch_start(e, "/o/", end, 0, on_ordered, on_ordered_end, &live, &w),
                         0);
        for (int i = 0; i < 20; i++)
                uv_run(&loop, UV_RUN_NOWAIT), usleep(10 * 1000);
        for (size_t i = 0; i < ELEMENTSOF(puts); i++) {
                char key[32], small[32];
                const char *v = i % 10 == 0 ? big : i % 3 == 0 ? "not JSON {" : small;
                snprintf(key, sizeof key, "/o/%02zu", i);
                snprintf(small, sizeof small, "{\"i\":%zu}", i);
                want_json += strcmp(v, "not JSON {") != 0;
                /* all in flight at once: many lines come together */
                assert_int_equal(etcd_put(e, key, v, strlen(v), 0, on_answer, &puts[i]), 0);
        }
        for (size_t i = 0; i < ELEMENTSOF(puts); i++) {
                wait_answer(&puts[i]);
                assert_int_equal(puts[i].error, 0);
                first = first ? MIN(first, puts[i].revision) : puts[i].revision;
                last = MAX(last, puts[i].revision);
        }
        while (live.last < last)
                uv_run(&loop, UV_RUN_ONCE);
        assert_int_equal(live.n, ELEMENTSOF(puts));
        assert_false(live.out_of_order);
        assert_false(live.bad_json);
        assert_int_equal(live.json, want_json);
        etcd_watch_cancel(w);

        /* the history: many lines at once */
        assert_int_equal(
                etcd_watch_start(e, "/o/", end, first, on_ordered, on_ordered_end, &hist, &h), 0);
        while (hist.last < last)
                uv_run(&loop, UV_RUN_ONCE);
        assert_int_equal(hist.n, ELEMENTSOF(puts));
        assert_false(hist.out_of_order);
        assert_false(hist.bad_json);
        etcd_watch_cancel(h);

        /* canceled at its first call, lines still being read: no more calls */
        assert_int_equal(
                etcd_watch_start(e, "/o/", end, first, on_ordered, on_ordered_end, &gone, &g), 0);
        while (gone.calls == 0)
                uv_run(&loop, UV_RUN_ONCE);
        etcd_watch_cancel(g);
        for (int i = 0; i < 50; i++)
                uv_run(&loop, UV_RUN_NOWAIT), usleep(2 * 1000);
        assert_int_equal(gone.calls, 1);
        assert_false(gone.ended);
        etcd_close(e);
        uv_run(&loop, UV_RUN_DEFAULT); /* what the pool still reads, then freed */
}

/* The session: a granted lease kept alive past its TTL, resumed by a
 * second session, lost (-ENOENT) once revoked behind its back. */
typedef struct sess {
        int64_t lease;
        bool ready, resumed, lost;
        int lost_error;
} sess;

static void on_ready(int64_t lease, bool resumed, void *userdata) {
        sess *s = userdata;
        s->ready = true;
        s->lease = lease;
        s->resumed = resumed;
}

static void on_lost(int error, const char *why, void *userdata) {
        sess *s = userdata;
        s->lost = true;
        s->lost_error = error;
}

/* Runs the loop for t, waking at least every 10 ms. */
static void run_for(usec_t t) {
        usec_t end = now_monotonic() + t;
        while (now_monotonic() < end) {
                uv_run(&loop, UV_RUN_NOWAIT);
                usleep(10 * 1000);
        }
}

static void test_session(void **state) {
        char *eps[] = { endpoint, NULL };
        etcd *e = client(eps);
        etcd_session *s1, *s2;
        sess a = {}, b = {};
        answer put = {}, get = {}, rev = {};

        assert_int_equal(etcd_session_start(e,
                                            &(etcd_session_config){ .ttl = 2,
                                                                    .ready = on_ready,
                                                                    .lost = on_lost,
                                                                    .userdata = &a },
                                            &s1),
                         0);
        while (!a.ready)
                uv_run(&loop, UV_RUN_ONCE);
        assert_false(a.resumed);
        assert_true(etcd_session_safe_until(s1) > now_monotonic());
        assert_int_equal(etcd_put(e, "/nodeleases/n1", "n1", 2, a.lease, on_answer, &put), 0);
        wait_answer(&put);
        assert_int_equal(put.error, 0);
        run_for(5 * USEC_PER_SEC); /* 2.5 TTLs */
        assert_false(a.lost);
        assert_int_equal(etcd_range(e, "/nodeleases/n1", NULL, on_answer, &get), 0);
        wait_answer(&get);
        assert_int_equal(get.n_kvs, 1); /* kept alive */

        assert_int_equal(etcd_session_start(e,
                                            &(etcd_session_config){ .ttl = 2,
                                                                    .resume_lease = a.lease,
                                                                    .ready = on_ready,
                                                                    .lost = on_lost,
                                                                    .userdata = &b },
                                            &s2),
                         0);
        while (!b.ready)
                uv_run(&loop, UV_RUN_ONCE);
        assert_true(b.resumed);
        assert_int_equal(b.lease, a.lease);
        etcd_session_stop(s2);

        assert_int_equal(etcd_lease_revoke(e, a.lease, on_answer, &rev), 0);
        wait_answer(&rev);
        assert_int_equal(rev.error, 0);
        usec_t t0 = now_monotonic();
        while (!a.lost && now_monotonic() < t0 + 3 * USEC_PER_SEC)
                run_for(50 * USEC_PER_MSEC);
        assert_true(a.lost);
        assert_int_equal(a.lost_error, -ENOENT);
        etcd_session_stop(s1);
        etcd_close(e);
}

/* etcd goes away and comes back under a watch: the watch resumes from the
 * revision after the last it saw — nothing missed, nothing twice. */
static void test_watch_resumes(void **state) {
        char *eps[] = { endpoint, NULL };
        etcd *e = client(eps);
        _cleanup_free_ char *end = etcd_prefix_end("/r/");
        etcd_watch *w;
        seen s = {};
        int64_t rev;

        assert_int_equal(etcd_watch_start(e, "/r/", end, 0, on_events, on_end, &s, &w), 0);
        run_for(100 * USEC_PER_MSEC); /* created */
        put_wait(e, "/r/a", "1", &rev);
        while (s.last_revision < rev)
                uv_run(&loop, UV_RUN_ONCE);
        stop_etcd();
        run_for(300 * USEC_PER_MSEC); /* the stream breaks; retries fail */
        assert_int_equal(start_etcd(), 0);
        put_wait(e, "/r/b", "2", &rev);
        usec_t t0 = now_monotonic();
        while (s.last_revision < rev && now_monotonic() < t0 + 10 * USEC_PER_SEC)
                run_for(20 * USEC_PER_MSEC);
        assert_string_equal(s.log, "put /r/a=1;put /r/b=2;");
        assert_int_equal(s.calls, 2);
        assert_false(s.ended);
        etcd_watch_cancel(w);
        etcd_close(e);
}

/* ---- a leader's change under a txn (etcd.c's hedge) ----------------------------------- */

#define MEMBERS 3

typedef struct member {
        pid_t pid;
        int client_port, peer_port;
        char endpoint[64], dir[64];
} member;

/* (static: the teardown stops them, also after a failed assertion) */
static member members[MEMBERS];

static int members_teardown(void **state) {
        for (int i = 0; i < MEMBERS; i++) {
                char cmd[160];
                if (members[i].pid > 0) {
                        kill(members[i].pid, SIGCONT);
                        kill(members[i].pid, SIGKILL);
                        waitpid(members[i].pid, NULL, 0);
                }
                members[i].pid = 0;
                if (members[i].dir[0]) {
                        snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s.log'", members[i].dir,
                                 members[i].dir);
                        if (system(cmd) != 0)
                                return -1;
                }
        }
        return 0;
}

/* The member that leads, by etcd's own status (etcdctl's simple output:
 * endpoint, id, version, size, is leader, ...), or -1. */
static int leader_of(const member *m) {
        int who = -1;

        for (int i = 0; i < MEMBERS && who < 0; i++) {
                char cmd[256], line[512] = "";
                FILE *p;
                snprintf(cmd, sizeof cmd,
                         "ETCDCTL_API=3 etcdctl --endpoints=%s endpoint status 2>/dev/null",
                         m[i].endpoint);
                p = popen(cmd, "r");
                if (p && fgets(line, sizeof line, p)) {
                        char *f = line;
                        for (int k = 0; k < 4 && f; k++)
                                f = strstr(f, ", ") ? strstr(f, ", ") + 2 : NULL;
                        if (f && strncmp(f, "true,", 5) == 0)
                                who = i;
                }
                if (p)
                        pclose(p);
        }
        return who;
}

/*
 * A txn sent through a follower just as etcd's leader stops (SIGSTOP: its
 * peers elect another, the proposal it was given is lost): without the
 * hedge it is answered only at the client's timeout (5 s) or etcd's own;
 * with it, once the follower is in the new term, it is sent again and
 * applied — in a second or two. Its outcome was unknown meanwhile, so the
 * answer says so.
 */
static void test_hedge_leader_change(void **state) {
        member *m = members;
        char initial[512] = "", log[128];
        int leader = -1, via;
        etcd *e = NULL;
        answer warm = {}, a = {}, got = {};
        uint64_t t0, took;

        for (int i = 0; i < MEMBERS; i++) {
                m[i].client_port = free_port();
                m[i].peer_port = free_port();
                snprintf(m[i].endpoint, sizeof m[i].endpoint, "http://127.0.0.1:%d",
                         m[i].client_port);
                snprintf(m[i].dir, sizeof m[i].dir, "%s-m%d", data_dir, i);
                snprintf(initial + strlen(initial), sizeof initial - strlen(initial),
                         "%sm%d=http://127.0.0.1:%d", i ? "," : "", i, m[i].peer_port);
        }
        for (int i = 0; i < MEMBERS; i++) {
                char name[8], peer[64];
                snprintf(name, sizeof name, "m%d", i);
                snprintf(peer, sizeof peer, "http://127.0.0.1:%d", m[i].peer_port);
                snprintf(log, sizeof log, "%s.log", m[i].dir);
                m[i].pid = fork();
                if (m[i].pid == 0) {
                        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
                        dup2(fd, 1);
                        dup2(fd, 2);
                        execlp("etcd", "etcd", "--name", name, "--data-dir", m[i].dir,
                               "--listen-client-urls", m[i].endpoint, "--advertise-client-urls",
                               m[i].endpoint, "--listen-peer-urls", peer,
                               "--initial-advertise-peer-urls", peer, "--initial-cluster", initial,
                               (char *) NULL);
                        _exit(127);
                }
        }
        for (int i = 0; i < 200 && leader < 0; i++) {
                usleep(100 * 1000);
                leader = leader_of(m);
        }
        assert_true(leader >= 0);
        via = (leader + 1) % MEMBERS;
        {
                char *eps[] = { m[via].endpoint, NULL };
                /* the default timeout, 5 s: what tendd uses */
                assert_int_equal(etcd_new(&(etcd_config){ .loop = &loop, .endpoints = eps }, &e),
                                 0);
        }
        /* a first answer gives the term */
        for (int i = 0; i < 100; i++) {
                warm = (answer){};
                assert_int_equal(etcd_put(e, "/warm", "1", 1, 0, on_answer, &warm), 0);
                wait_answer(&warm);
                if (warm.error == 0)
                        break;
                usleep(100 * 1000);
        }
        assert_int_equal(warm.error, 0);

        kill(m[leader].pid, SIGSTOP);
        t0 = bench_ns();
        json_t *cmp = json_pack("[o]", etcd_cmp_revision("/hedged", "create", "EQUAL", 0));
        json_t *ok = json_pack("[o]", etcd_op_put("/hedged", "yes", 3, 0));
        assert_int_equal(etcd_txn(e, cmp, ok, json_array(), on_answer, &a), 0);
        wait_answer(&a);
        took = (bench_ns() - t0) / 1000000;
        kill(m[leader].pid, SIGCONT);

        if (a.error != 0 || !a.succeeded || took >= 4500 || etcd_hedged(e) < 1)
                fail_msg("the txn: error %d (%s), succeeded %d, after %llu ms, hedged %llu",
                         a.error, a.message, a.succeeded, (unsigned long long) took,
                         (unsigned long long) etcd_hedged(e));
        assert_true(a.unknown); /* a try before was sent, and lost */
        printf("the txn was answered %llu ms after the leader stopped\n",
               (unsigned long long) took);
        assert_int_equal(etcd_range(e, "/hedged", NULL, on_answer, &got), 0);
        wait_answer(&got);
        assert_string_equal(got.value, "yes");

        etcd_close(e);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_kv),
                cmocka_unit_test(test_txn),
                cmocka_unit_test(test_txn_written_off_the_loop),
                cmocka_unit_test(test_lease),
                cmocka_unit_test(test_endpoints),
                cmocka_unit_test(test_watch),
                cmocka_unit_test(test_watch_read_off_the_loop),
                cmocka_unit_test(test_session),
                cmocka_unit_test(test_watch_resumes),
                cmocka_unit_test_teardown(test_hedge_leader_change, members_teardown),
        };

        if (system("command -v etcd >/dev/null 2>&1") != 0) {
                printf("etcd is not installed (make deps installs etcd-server): skipped\n");
                return 77;
        }
        return cmocka_run_group_tests(tests, setup, teardown);
}
