/* SPDX-License-Identifier: MIT */

/* The store against a real SQLite file. */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "tend/store.h"

static char dir[64];
static char path[128];

static int setup(void **state) {
        snprintf(dir, sizeof dir, "/tmp/tend-store-XXXXXX");
        if (!mkdtemp(dir))
                return -1;
        snprintf(path, sizeof path, "%s/tend.db", dir);
        return 0;
}

static int teardown(void **state) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        return system(cmd);
}

static store *open_store(void) {
        store *s = NULL;
        char *err = NULL;
        int r = store_open(path, &s, &err);
        if (r < 0)
                fail_msg("store_open: %s", err);
        return s;
}

static spec_pod *pod(const char *name) {
        spec_pod *p = spec_pod_new();
        p->metadata.name = strdup(name);
        p->metadata.namespace = strdup("default");
        p->status.phase = SPEC_POD_PENDING;
        return p;
}

typedef struct seen {
        int added, modified, deleted;
        uint64_t last_rv;
} seen;

static void on_change(store_kind kind, store_change change, const void *obj, void *u) {
        seen *s = u;
        const spec_pod *p = obj;
        if (change == STORE_ADDED)
                s->added++;
        else if (change == STORE_MODIFIED)
                s->modified++;
        else
                s->deleted++;
        s->last_rv = p->metadata.resource_version;
}

static void test_put_commit_reopen(void **state) {
        store *s = open_store();
        const spec_pod *stored;
        const void *const *list;
        seen sn = {};
        uint64_t rv;

        assert_int_equal(store_subscribe(s, on_change, &sn), 0);
        assert_int_equal(store_put(s, STORE_POD, pod("a"), (const void **) &stored), 0);
        assert_non_null(stored->metadata.uid);
        assert_int_equal(strlen(stored->metadata.uid), 36);
        assert_true(stored->metadata.creation_timestamp > 0);
        assert_int_equal(stored->metadata.resource_version, 1);
        assert_int_equal(store_put(s, STORE_POD, pod("b"), NULL), 0);
        /* Nobody hears of uncommitted writes. */
        assert_int_equal(sn.added, 0);
        assert_int_equal(store_commit(s, true), 0);
        assert_int_equal(sn.added, 2);
        assert_int_equal(sn.last_rv, 2);

        /* Replace: a new version; the old pointer's replacement is visible. */
        spec_pod *b2 = spec_pod_copy(store_get(s, STORE_POD, "default", "b"));
        b2->status.phase = SPEC_POD_RUNNING;
        assert_int_equal(store_put(s, STORE_POD, b2, NULL), 0);
        assert_int_equal(store_delete(s, STORE_POD, "default", "a"), 0);
        assert_int_equal(store_delete(s, STORE_POD, "default", "a"), -ENOENT);
        assert_int_equal(store_commit(s, false), 0);
        assert_int_equal(sn.modified, 1);
        assert_int_equal(sn.deleted, 1);
        rv = store_resource_version(s);
        assert_int_equal(rv, 4);
        assert_int_equal(store_list(s, STORE_POD, &list), 1);

        json_t *rec = json_pack("{s:i}", "pid", 42);
        assert_int_equal(store_put_record(s, "uid-b", rec), 0);
        json_decref(rec);
        assert_int_equal(store_commit(s, false), 0);
        store_close(s);

        /* Everything committed is there after a reopen, at the same version. */
        s = open_store();
        assert_int_equal(store_resource_version(s), rv);
        assert_null(store_get(s, STORE_POD, "default", "a"));
        stored = store_get(s, STORE_POD, "default", "b");
        assert_non_null(stored);
        assert_int_equal(stored->status.phase, SPEC_POD_RUNNING);
        assert_int_equal(stored->metadata.resource_version, 3);
        assert_int_equal(json_integer_value(json_object_get(store_get_record(s, "uid-b"), "pid")),
                         42);
        store_close(s);
}

/* tend's annotations of Deployments and ReplicaSets, parsed as they are
 * put: a replace parses again, a delete moves the last one's view with
 * it, a rollback and a reopen have them as before. */
static spec_replica_set *rs_with(const char *name, const char *backoff, bool fence) {
        spec_replica_set *rs = spec_replica_set_new();
        rs->metadata.name = strdup(name);
        rs->metadata.namespace = strdup("default");
        if (backoff)
                assert_int_equal(
                        spec_map_set(&rs->metadata.annotations, SPEC_ANN_CRASH_BACKOFF, backoff),
                        0);
        if (fence)
                assert_int_equal(
                        spec_map_set(&rs->metadata.annotations, SPEC_ANN_NODE_LOST_POLICY, "fence"),
                        0);
        return rs;
}

static uint32_t after_of(store *s, const char *name) {
        const spec_tend *t = store_tend(s, STORE_REPLICA_SET, "default", name);
        assert_non_null(t);
        return t->backoff.after;
}

static void test_tend_views(void **state) {
        store *s = open_store();

        assert_int_equal(store_put(s, STORE_REPLICA_SET,
                                   rs_with("a", "after=5,initial=1s,max=1m", true), NULL),
                         0);
        assert_int_equal(store_put(s, STORE_REPLICA_SET, rs_with("b", NULL, false), NULL), 0);
        assert_int_equal(store_put(s, STORE_REPLICA_SET,
                                   rs_with("c", "after=7,initial=1s,max=1m", false), NULL),
                         0);
        assert_int_equal(after_of(s, "a"), 5);
        assert_true(store_tend(s, STORE_REPLICA_SET, "default", "a")->fence);
        assert_int_equal(after_of(s, "b"), spec_backoff_default.after);
        assert_false(store_tend(s, STORE_REPLICA_SET, "default", "b")->fence);
        assert_int_equal(after_of(s, "c"), 7);
        /* a replace: parsed again */
        assert_int_equal(store_put(s, STORE_REPLICA_SET,
                                   rs_with("b", "after=9,initial=1s,max=1m", false), NULL),
                         0);
        assert_int_equal(after_of(s, "b"), 9);
        assert_int_equal(store_commit(s, true), 0);
        /* a delete moves the last one (c) into a's place: its view with it */
        assert_int_equal(store_delete(s, STORE_REPLICA_SET, "default", "a"), 0);
        assert_null(store_tend(s, STORE_REPLICA_SET, "default", "a"));
        assert_int_equal(after_of(s, "c"), 7);
        assert_int_equal(after_of(s, "b"), 9);
        /* rolled back: a as it was */
        store_rollback(s);
        assert_int_equal(after_of(s, "a"), 5);
        assert_int_equal(after_of(s, "c"), 7);
        /* none for a kind that keeps none, nor for what is not there */
        assert_int_equal(store_put(s, STORE_POD, pod("p"), NULL), 0);
        assert_null(store_tend(s, STORE_POD, "default", "p"));
        assert_null(store_tend(s, STORE_REPLICA_SET, "default", "nope"));
        assert_int_equal(store_commit(s, true), 0);
        store_close(s);
        /* read back from the file: parsed as they are loaded */
        s = open_store();
        assert_int_equal(after_of(s, "a"), 5);
        assert_true(store_tend(s, STORE_REPLICA_SET, "default", "a")->fence);
        assert_int_equal(after_of(s, "b"), 9);
        assert_int_equal(after_of(s, "c"), 7);
        store_close(s);
}

static void test_rollback(void **state) {
        store *s = open_store();
        seen sn = {};
        uint64_t rv = store_resource_version(s);

        store_subscribe(s, on_change, &sn);
        assert_int_equal(store_put(s, STORE_POD, pod("x"), NULL), 0);
        assert_int_equal(store_delete(s, STORE_POD, "default", "b"), 0);
        assert_int_equal(store_put(s, STORE_POD, pod("x"), NULL), 0);
        store_rollback(s);
        assert_null(store_get(s, STORE_POD, "default", "x"));
        assert_non_null(store_get(s, STORE_POD, "default", "b"));
        assert_int_equal(store_resource_version(s), rv);
        assert_int_equal(sn.added + sn.modified + sn.deleted, 0);
        /* and on disk */
        store_close(s);
        s = open_store();
        assert_null(store_get(s, STORE_POD, "default", "x"));
        assert_non_null(store_get(s, STORE_POD, "default", "b"));
        store_close(s);
}

/* What each kind of watcher hears of one batch: the agent's (write-time) every
 * write as it happens; the API's (post-commit) one note per object, its state
 * after the commit, with the JSON the commit wrote — and nothing of an object
 * that came and went within the batch. */
typedef struct heard {
        char what[32][64];
        char json[32][4096];
        size_t n;
        store *s;
} heard;

static void on_heard(store_kind kind, store_change change, const void *obj, void *u) {
        heard *h = u;
        const spec_pod *p = obj;
        static const char *const names[] = { "ADDED", "MODIFIED", "DELETED" };
        const char *json = h->s ? store_note_json(h->s) : NULL;

        if (h->n >= 32)
                return;
        snprintf(h->what[h->n], sizeof h->what[0], "%s %s %" PRIu64, names[change],
                 p->metadata.name, p->metadata.resource_version);
        snprintf(h->json[h->n], sizeof h->json[0], "%s", json ?: "");
        h->n++;
}

static void expect_heard(const heard *h, size_t i, const char *what, uint64_t rv) {
        char want[64];
        snprintf(want, sizeof want, "%s %" PRIu64, what, rv);
        assert_true(i < h->n);
        assert_string_equal(h->what[i], want);
}

static void test_batch_notes(void **state) {
        store *s = open_store();
        heard at_write = {}, at_commit = { .s = s };
        spec_pod *p;
        uint64_t rv;

        assert_int_equal(store_put(s, STORE_POD, pod("stays"), NULL), 0);
        assert_int_equal(store_put(s, STORE_POD, pod("goes"), NULL), 0);
        assert_int_equal(store_put(s, STORE_POD, pod("swapped"), NULL), 0);
        assert_int_equal(store_commit(s, false), 0);
        rv = store_resource_version(s);
        assert_int_equal(store_subscribe_writes(s, on_heard, &at_write), 0);
        assert_int_equal(store_subscribe(s, on_heard, &at_commit), 0);

        /* "stays" written twice, "goes" deleted, "new" added, "brief" added
         * and deleted, "swapped" replaced by another object (another uid). */
        p = spec_pod_copy(store_get(s, STORE_POD, "default", "stays"));
        p->status.phase = SPEC_POD_RUNNING;
        assert_int_equal(store_put(s, STORE_POD, p, NULL), 0);
        p = spec_pod_copy(store_get(s, STORE_POD, "default", "stays"));
        (void) free_and_strdup(&p->status.message, "twice");
        assert_int_equal(store_put(s, STORE_POD, p, NULL), 0);
        assert_int_equal(store_delete(s, STORE_POD, "default", "goes"), 0);
        assert_int_equal(store_put(s, STORE_POD, pod("new"), NULL), 0);
        assert_int_equal(store_put(s, STORE_POD, pod("brief"), NULL), 0);
        assert_int_equal(store_delete(s, STORE_POD, "default", "brief"), 0);
        assert_int_equal(store_delete(s, STORE_POD, "default", "swapped"), 0);
        assert_int_equal(store_put(s, STORE_POD, pod("swapped"), NULL), 0);
        /* "new" once more: its note comes last, in resourceVersion order */
        p = spec_pod_copy(store_get(s, STORE_POD, "default", "new"));
        assert_int_equal(store_put(s, STORE_POD, p, NULL), 0);

        /* The agent heard every write at once; the API nothing yet. */
        assert_int_equal(at_write.n, 9);
        expect_heard(&at_write, 0, "MODIFIED stays", rv + 1);
        expect_heard(&at_write, 5, "DELETED brief", rv + 6);
        assert_int_equal(at_commit.n, 0);

        assert_int_equal(store_commit(s, false), 0);
        assert_int_equal(store_resource_version(s), rv + 9);
        assert_int_equal(at_commit.n, 5);
        expect_heard(&at_commit, 0, "MODIFIED stays", rv + 2); /* its last version */
        expect_heard(&at_commit, 1, "DELETED goes", rv + 3);
        expect_heard(&at_commit, 2, "DELETED swapped", rv + 7);
        expect_heard(&at_commit, 3, "ADDED swapped", rv + 8);
        expect_heard(&at_commit, 4, "ADDED new", rv + 9);
        /* The JSON is what was written: the object as it now is. */
        char want[64];
        snprintf(want, sizeof want, "\"resourceVersion\":\"%" PRIu64 "\"", rv + 2);
        assert_non_null(strstr(at_commit.json[0], "\"message\":\"twice\""));
        assert_non_null(strstr(at_commit.json[0], want));
        assert_string_equal(at_commit.json[1], ""); /* a deletion has none */
        json_t *j = json_loads(at_commit.json[4], 0, NULL);
        assert_non_null(j);
        assert_string_equal(
                json_string_value(json_object_get(json_object_get(j, "metadata"), "name")), "new");
        json_decref(j);
        store_close(s);

        /* On disk: the final states, at their versions. */
        s = open_store();
        assert_int_equal(store_resource_version(s), rv + 9);
        assert_string_equal(
                ((const spec_pod *) store_get(s, STORE_POD, "default", "stays"))->status.message,
                "twice");
        assert_null(store_get(s, STORE_POD, "default", "goes"));
        assert_null(store_get(s, STORE_POD, "default", "brief"));
        assert_int_equal(((const spec_pod *) store_get(s, STORE_POD, "default", "swapped"))
                                 ->metadata.resource_version,
                         rv + 8);
        store_close(s);
}

static void test_uncommitted_lost_on_crash(void **state) {
        /* A write that was never committed is not there after a reopen (the
         * agent commits before acknowledging). */
        store *s = open_store();
        assert_int_equal(store_put(s, STORE_POD, pod("never"), NULL), 0);
        store_rollback(s);
        store_close(s);
        s = open_store();
        assert_null(store_get(s, STORE_POD, "default", "never"));
        store_close(s);
}

static void test_events_folded_and_bounded(void **state) {
        store *s = open_store();
        spec_meta involved = { .name = "web", .namespace = "default", .uid = "dep-uid" };
        const void *const *list;
        const spec_event *e;
        usec_t t = 1764688009ULL * USEC_PER_SEC;
        size_t n;

        for (int i = 0; i < 5; i++)
                assert_int_equal(store_record_event(s, STORE_DEPLOYMENT, &involved, "Normal",
                                                    "ScalingReplicaSet",
                                                    "Scaled down replica set web-1 to 3",
                                                    t + (usec_t) i * USEC_PER_SEC),
                                 0);
        assert_int_equal(store_commit(s, false), 0);
        n = store_list(s, STORE_EVENT, &list);
        assert_int_equal(n, 1);
        e = list[0];
        assert_int_equal(e->count, 5);
        assert_int_equal(e->first_timestamp, t);
        assert_int_equal(e->last_timestamp, t + 4 * USEC_PER_SEC);
        assert_string_equal(e->involved_object.kind, "Deployment");
        assert_string_equal(e->reason, "ScalingReplicaSet");

        /* A different message is another event. */
        assert_int_equal(store_record_event(s, STORE_DEPLOYMENT, &involved, "Normal",
                                            "ScalingReplicaSet", "Scaled up replica set web-2 to 1",
                                            t + 10 * USEC_PER_SEC),
                         0);
        assert_int_equal(store_list(s, STORE_EVENT, &list), 2);

        /* A crash loop of distinct messages cannot grow the events without
         * limit... */
        for (int i = 0; i < STORE_EVENTS_MAX + 200; i++) {
                char msg[64];
                snprintf(msg, sizeof msg, "message %d", i);
                assert_int_equal(store_record_event(s, STORE_DEPLOYMENT, &involved, "Warning",
                                                    "BackOff", msg,
                                                    t + 20 * USEC_PER_SEC + (usec_t) i),
                                 0);
        }
        assert_int_equal(store_commit(s, false), 0);
        assert_int_equal(store_list(s, STORE_EVENT, &list), STORE_EVENTS_MAX);
        /* ... and the oldest went first. */
        for (size_t i = 0; i < STORE_EVENTS_MAX; i++)
                assert_true(((const spec_event *) list[i])->last_timestamp >=
                            t + 20 * USEC_PER_SEC);
        /* Events older than an hour go too. */
        assert_int_equal(store_record_event(s, STORE_DEPLOYMENT, &involved, "Normal", "Later",
                                            "an hour later", t + 2 * STORE_EVENTS_MAX_AGE),
                         0);
        assert_int_equal(store_commit(s, false), 0);
        assert_int_equal(store_list(s, STORE_EVENT, &list), 1);
        store_close(s);

        s = open_store();
        assert_int_equal(store_list(s, STORE_EVENT, &list), 1);
        /* folding still works after a reopen */
        assert_int_equal(store_record_event(s, STORE_DEPLOYMENT, &involved, "Normal", "Later",
                                            "an hour later", t + 2 * STORE_EVENTS_MAX_AGE + 1),
                         0);
        assert_int_equal(store_list(s, STORE_EVENT, &list), 1);
        assert_int_equal(((const spec_event *) list[0])->count, 2);

        /* In a fleet a repeat folds into this host's own event only: the
         * same event recorded by another node (here, under another host
         * name) is a new one, named after this host. */
        assert_int_equal(store_set_host(s, "n2"), 0);
        assert_int_equal(store_record_event(s, STORE_DEPLOYMENT, &involved, "Normal", "Later",
                                            "an hour later", t + 2 * STORE_EVENTS_MAX_AGE + 2),
                         0);
        assert_int_equal(store_commit(s, false), 0);
        assert_int_equal(store_list(s, STORE_EVENT, &list), 2);
        for (size_t i = 0; i < 2; i++) {
                e = list[i];
                if (streq_ptr(e->source.host, "n2"))
                        assert_int_equal(e->count, 1);
                else
                        assert_int_equal(e->count, 2);
        }
        store_close(s);
}

/* The WAL's checkpoints are the store's thread's, not the commits': past
 * 1000 pages a commit wakes it, it copies the WAL back, and the next commit
 * starts the WAL again from its beginning. */
static void test_checkpoints_off_the_commit(void **state) {
        char db_path[160], wal_path[170], *err = NULL, big[200 * 1024];
        struct stat st;
        uint64_t by_thread = 0, by_commit = 0;
        int log = -1, done = -1;
        store *s = NULL;
        sqlite3 *db;

        snprintf(db_path, sizeof db_path, "%s/checkpoints.db", dir);
        assert_int_equal(store_open(db_path, &s, &err), 0);
        memset(big, 'x', sizeof big - 1);
        big[sizeof big - 1] = 0;
        /* commits of 200 KiB until the WAL holds 1000 pages: the last one
         * wakes the thread */
        snprintf(wal_path, sizeof wal_path, "%s-wal", db_path);
        for (int i = 0; stat(wal_path, &st) < 0 || st.st_size < 1000 * (4096 + 24); i++) {
                char name[16];
                spec_pod *p;
                assert_true(i < 100);
                snprintf(name, sizeof name, "p%d", i % 5);
                p = pod(name);
                assert_int_equal(spec_map_set(&p->metadata.annotations, "big", big), 0);
                assert_int_equal(store_put(s, STORE_POD, p, NULL), 0);
                assert_int_equal(store_commit(s, false), 0);
                store_checkpoints(s, &by_thread, &by_commit);
                assert_int_equal(by_commit, 0);
        }
        for (int i = 0; i < 1000 && by_thread == 0; i++) {
                usleep(10 * 1000);
                store_checkpoints(s, &by_thread, &by_commit);
        }
        assert_true(by_thread >= 1);
        assert_int_equal(by_commit, 0);
        /* one more commit: the WAL starts over, with this commit's pages only */
        assert_int_equal(store_put(s, STORE_POD, pod("last"), NULL), 0);
        assert_int_equal(store_commit(s, false), 0);
        assert_int_equal(sqlite3_open(db_path, &db), SQLITE_OK);
        assert_int_equal(sqlite3_exec(db, "SELECT count(*) FROM objects", NULL, NULL, NULL),
                         SQLITE_OK);
        assert_int_equal(
                sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log, &done),
                SQLITE_OK);
        assert_in_range(log, 1, 100);
        sqlite3_close(db);
        store_close(s);

        /* and all of it is there */
        assert_int_equal(store_open(db_path, &s, &err), 0);
        const void *const *list;
        assert_int_equal(store_list(s, STORE_POD, &list), 6);
        assert_string_equal(
                spec_map_get(&((const spec_pod *) store_get(s, STORE_POD, "default", "p4"))
                                      ->metadata.annotations,
                             "big"),
                big);
        store_close(s);
}

static void test_newer_schema_refused(void **state) {
        store *s = open_store();
        store_close(s);
        sqlite3 *db;
        assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
        assert_int_equal(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
        sqlite3_close(db);
        char *err = NULL;
        assert_int_equal(store_open(path, &s, &err), -EPROTO);
        assert_non_null(strstr(err, "newer than this tendd understands"));
        free(err);
}

static int sql_int(sqlite3 *db, const char *sql) {
        sqlite3_stmt *st;
        int v = -1;
        assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
        if (sqlite3_step(st) == SQLITE_ROW)
                v = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
        return v;
}

/* A database of schema 1 (rows in WITHOUT ROWID tables) is carried over
 * whole to schema 2 (rowid tables with a key index), and written after. */
static void test_schema_1_migrated(void **state) {
        static const char *const files[] = { "", "-wal", "-shm" };
        char file[160];
        for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) { /* a new database */
                snprintf(file, sizeof file, "%s%s", path, files[i]);
                (void) unlink(file);
        }
        store *s = open_store();
        assert_int_equal(store_put(s, STORE_POD, pod("old"), NULL), 0);
        json_t *rec = json_pack("{s:i}", "pid", 4242);
        const spec_pod *p = store_get(s, STORE_POD, "default", "old");
        char *uid = strdup(p->metadata.uid);
        assert_int_equal(store_put_record(s, uid, rec), 0);
        json_decref(rec);
        assert_int_equal(store_commit(s, true), 0);
        store_close(s);

        /* Back to schema 1's layout, rows and all. */
        sqlite3 *db;
        assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
        assert_int_equal(
                sqlite3_exec(db,
                             "BEGIN;"
                             "CREATE TABLE o1 (kind TEXT NOT NULL, namespace TEXT NOT NULL,"
                             "  name TEXT NOT NULL, rv INTEGER NOT NULL, body TEXT NOT NULL,"
                             "  PRIMARY KEY (kind, namespace, name)) WITHOUT ROWID;"
                             "INSERT INTO o1 SELECT kind, namespace, name, rv, body FROM objects;"
                             "DROP TABLE objects; ALTER TABLE o1 RENAME TO objects;"
                             "CREATE TABLE r1 (pod_uid TEXT PRIMARY KEY, record TEXT NOT NULL)"
                             "  WITHOUT ROWID;"
                             "INSERT INTO r1 SELECT pod_uid, record FROM records;"
                             "DROP TABLE records; ALTER TABLE r1 RENAME TO records;"
                             "PRAGMA user_version = 1; COMMIT;",
                             NULL, NULL, NULL),
                SQLITE_OK);
        sqlite3_close(db);

        s = open_store();
        p = store_get(s, STORE_POD, "default", "old");
        assert_non_null(p);
        assert_string_equal(p->metadata.uid, uid);
        assert_int_equal(json_integer_value(json_object_get(store_get_record(s, uid), "pid")),
                         4242);
        /* written twice after: one row, the last */
        for (int i = 0; i < 2; i++) {
                spec_pod *q = pod("old");
                q->metadata.uid = strdup(uid);
                q->status.phase = i ? SPEC_POD_RUNNING : SPEC_POD_FAILED;
                assert_int_equal(store_put(s, STORE_POD, q, NULL), 0);
                rec = json_pack("{s:i}", "pid", 4243 + i);
                assert_int_equal(store_put_record(s, uid, rec), 0);
                json_decref(rec);
                assert_int_equal(store_commit(s, false), 0);
        }
        store_close(s);

        assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
        assert_int_equal(sql_int(db, "PRAGMA user_version"), 2);
        assert_int_equal(sql_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'objects' "
                                     "AND sql LIKE '%WITHOUT ROWID%'"),
                         0);
        assert_int_equal(sql_int(db, "SELECT count(*) FROM sqlite_master WHERE type = 'index' "
                                     "AND name IN ('objects_key', 'records_key')"),
                         2);
        assert_int_equal(sql_int(db, "SELECT count(*) FROM objects WHERE kind = 'Pod'"), 1);
        assert_int_equal(sql_int(db, "SELECT count(*) FROM records"), 1);
        sqlite3_close(db);

        s = open_store();
        p = store_get(s, STORE_POD, "default", "old");
        assert_int_equal(p->status.phase, SPEC_POD_RUNNING);
        assert_int_equal(json_integer_value(json_object_get(store_get_record(s, uid), "pid")),
                         4244);
        store_close(s);
        free(uid);
}

static void test_garbage_file(void **state) {
        char bad[160], *err = NULL;
        store *s = NULL;
        FILE *f;

        snprintf(bad, sizeof bad, "%s/garbage.db", dir);
        f = fopen(bad, "w");
        fputs("this is not a database, not at all, and long enough to have a header", f);
        fclose(f);
        assert_true(store_open(bad, &s, &err) < 0);
        assert_non_null(err);
        assert_non_null(strstr(err, "garbage.db"));
        free(err);
}

int main(void) {
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_put_commit_reopen),
                cmocka_unit_test(test_rollback),
                cmocka_unit_test(test_tend_views),
                cmocka_unit_test(test_batch_notes),
                cmocka_unit_test(test_uncommitted_lost_on_crash),
                cmocka_unit_test(test_events_folded_and_bounded),
                cmocka_unit_test(test_garbage_file),
                cmocka_unit_test(test_checkpoints_off_the_commit),
                cmocka_unit_test(test_newer_schema_refused),
                cmocka_unit_test(test_schema_1_migrated),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
