/* SPDX-License-Identifier: MIT */

/*
 * The store (see store.h). In memory: per kind, a hash map "ns/name" →
 * index into a dense array of objects (so listing is a plain array). On
 * disk: one SQLite table of canonical JSON bodies, one of runtime records,
 * and the resourceVersion counter, all written in the same transaction.
 */

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tend/store.h"

#define SCHEMA_VERSION 2

static const spec_type *const kind_types[_STORE_KIND_MAX] = {
        [STORE_DEPLOYMENT] = &spec_type_deployment,
        [STORE_REPLICA_SET] = &spec_type_replica_set,
        [STORE_POD] = &spec_type_pod,
        [STORE_EVENT] = &spec_type_event,
        [STORE_CONFIG_MAP] = &spec_type_config_map,
        [STORE_SECRET] = &spec_type_secret,
};

const char *store_kind_to_string(store_kind k) {
        return k >= 0 && k < _STORE_KIND_MAX ? spec_type_name(kind_types[k]) : NULL;
}

const spec_type *store_kind_type(store_kind k) {
        return k >= 0 && k < _STORE_KIND_MAX ? kind_types[k] : NULL;
}

/* The database (made if there is none) and its -wal and -shm files (where
 * there are) readable and writable by their owner only. */
static int owner_only(const char *path) {
        static const char *const suffixes[] = { "", "-wal", "-shm" };

        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++) {
                _cleanup_free_ char *p = strprintf("%s%s", path, suffixes[i]);
                _cleanup_close_ int fd = -EBADF;
                struct stat st;
                if (!p)
                        return -ENOMEM;
                fd = open(p, O_RDWR | O_CLOEXEC | O_NOCTTY | (i == 0 ? O_CREAT : 0), 0600);
                if (fd < 0 && errno == ENOENT && i > 0)
                        continue;
                if (fd < 0 || fstat(fd, &st) < 0)
                        return -errno;
                if ((st.st_mode & 077) && fchmod(fd, st.st_mode & 0700) < 0)
                        return -errno;
        }
        return 0;
}

/* "v1", "apps/v1": the kind's row's group and version; new string. */
static char *api_version_of(store_kind k) {
        const spec_kind *row = spec_kind_of(store_kind_type(k));

        return row ? spec_kind_api_version(row) : NULL;
}

typedef struct collection {
        tend_hashmap *index; /* "ns/name" → (index + 1) */
        void **items;
        size_t n, alloc;
        /* Deployments and ReplicaSets: tend's annotations of each item,
         * parsed as it is put (store_tend()) */
        bool with_tend;
        spec_tend *tends;
        size_t alloc_tends;
} collection;

typedef struct undo {
        store_kind kind;
        char *key;
        void *old;       /* owned; NULL if the key did not exist */
        uint64_t old_rv; /* a deleted object's version before the delete */
        bool is_record;
        json_t *old_record;
} undo;

/* A change as post-commit watchers hear of it: one per object the batch
 * changed, its final state, with the JSON the commit wrote for it. */
typedef struct note {
        store_kind kind;
        store_change change;
        const void *obj;
        char *json; /* canonical body; NULL for a deletion */
} note;

typedef struct watcher {
        store_watch_fn fn;
        void *userdata;
        bool on_write; /* told at every write, before the commit */
} watcher;

/* The WAL's checkpoints, made by a thread of the store's own (see
 * on_wal()). The lock guards wanted and stop. */
typedef struct checkpointer {
        pthread_t thread;
        pthread_mutex_t lock;
        pthread_cond_t wake;
        bool started, wanted, stop;
        char *path;
        uint64_t by_thread, by_commit; /* made (read with __atomic_load) */
} checkpointer;

struct store {
        sqlite3 *db;
        checkpointer ckpt;
        sqlite3_stmt *put_obj, *del_obj, *put_rec, *del_rec, *set_rv;
        uint64_t rv, rv_committed;
        collection coll[_STORE_KIND_MAX];
        tend_hashmap *records;    /* pod uid → json_t* */
        tend_hashmap *event_keys; /* "uid\x1freason\x1fmessage" → event name */
        undo *undo;
        size_t n_undo, alloc_undo;
        note *notes; /* of the commit being delivered */
        size_t n_notes, alloc_notes;
        const char *note_json; /* during a post-commit callback: store_note_json() */
        watcher *watchers;
        size_t n_watchers;
        tend_histogram commit_hist;
        char hostname[256];
};

/* ---- helpers -------------------------------------------------------------------------------- */

static char *obj_key(const char *ns, const char *name) {
        return strprintf("%s/%s", strempty(ns), strempty(name));
}

char *store_new_uid(char buf[static 37]) {
        uint8_t b[16];

        if (getrandom(b, sizeof b, 0) != sizeof b)
                for (size_t i = 0; i < sizeof b; i++) /* never seen; still unique enough */
                        b[i] = (uint8_t) (rand() ^ (int) now_monotonic());
        b[6] = (uint8_t) ((b[6] & 0x0f) | 0x40);
        b[8] = (uint8_t) ((b[8] & 0x3f) | 0x80);
        snprintf(buf, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
                 b[13], b[14], b[15]);
        return buf;
}

static int sql_error(store *s, int rc) {
        /* SQLITE_FULL and friends map to errnos a caller can name. */
        switch (rc & 0xff) {
        case SQLITE_FULL:
                return -ENOSPC;
        case SQLITE_IOERR:
                return -EIO;
        case SQLITE_READONLY:
        case SQLITE_PERM:
                return -EROFS;
        case SQLITE_NOMEM:
                return -ENOMEM;
        case SQLITE_CORRUPT:
        case SQLITE_NOTADB:
                return -EBADMSG;
        default:
                return -EIO;
        }
}

static int exec(store *s, const char *sql) {
        int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
        return rc == SQLITE_OK ? 0 : sql_error(s, rc);
}

static int step_reset(store *s, sqlite3_stmt *st) {
        int rc = sqlite3_step(st);
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        return rc == SQLITE_DONE ? 0 : sql_error(s, rc);
}

/* ---- collections ---------------------------------------------------------------------------- */

static void *coll_get(const collection *c, const char *key) {
        uintptr_t i = (uintptr_t) tend_hashmap_get(c->index, key);
        return i ? c->items[i - 1] : NULL;
}

/* Puts obj under key; returns the replaced object (owned by the caller). */
static int coll_put(collection *c, const char *key, void *obj, void **ret_old) {
        uintptr_t i = (uintptr_t) tend_hashmap_get(c->index, key);

        if (i) {
                *ret_old = c->items[i - 1];
                c->items[i - 1] = obj;
                if (c->with_tend)
                        spec_tend_parse(&spec_object_meta(obj)->annotations, &c->tends[i - 1]);
                return 0;
        }
        if (TEND_GROW(c->items, c->alloc, c->n + 1) < 0 ||
            (c->with_tend && TEND_GROW(c->tends, c->alloc_tends, c->n + 1) < 0))
                return -ENOMEM;
        if (tend_hashmap_put(c->index, key, (void *) (uintptr_t) (c->n + 1), NULL) < 0)
                return -ENOMEM;
        if (c->with_tend)
                spec_tend_parse(&spec_object_meta(obj)->annotations, &c->tends[c->n]);
        c->items[c->n++] = obj;
        *ret_old = NULL;
        return 0;
}

/* Removes key; returns the object (owned by the caller) or NULL. Moves the
 * last item into the hole. */
static void *coll_remove(collection *c, const char *key, const spec_type *t) {
        uintptr_t i = (uintptr_t) tend_hashmap_remove(c->index, key);
        void *obj, *last;

        if (!i)
                return NULL;
        obj = c->items[i - 1];
        last = c->items[--c->n];
        if (i - 1 != c->n) {
                _cleanup_free_ char *lk = NULL;
                spec_meta *m = spec_object_meta(last);
                c->items[i - 1] = last;
                if (c->with_tend)
                        c->tends[i - 1] = c->tends[c->n];
                lk = obj_key(m->namespace, m->name);
                if (lk)
                        (void) tend_hashmap_put(c->index, lk, (void *) (uintptr_t) i, NULL);
        }
        (void) t;
        return obj;
}

const spec_tend *store_tend(const store *s, store_kind kind, const char *namespace,
                            const char *name) {
        _cleanup_free_ char *key = NULL;
        const collection *c;
        uintptr_t i;

        if (kind < 0 || kind >= _STORE_KIND_MAX || !s->coll[kind].with_tend || !name)
                return NULL;
        c = &s->coll[kind];
        key = obj_key(namespace, name);
        i = key ? (uintptr_t) tend_hashmap_get(c->index, key) : 0;
        return i ? &c->tends[i - 1] : NULL;
}

/* ---- undo and notifications ---------------------------------------------------------------- */

/* Room for one more undo entry, reserved before a write changes anything:
 * a write that cannot be undone must not happen. */
static int reserve_undo(store *s) {
        return TEND_GROW(s->undo, s->alloc_undo, s->n_undo + 1);
}

static int push_undo(store *s, undo u) {
        int r = reserve_undo(s);
        if (r < 0)
                return r;
        s->undo[s->n_undo++] = u;
        return 0;
}

/* Write-time watchers hear of every write as it happens. */
static void tell_writers(store *s, store_kind kind, store_change change, const void *obj) {
        for (size_t w = 0; w < s->n_watchers; w++)
                if (s->watchers[w].on_write)
                        s->watchers[w].fn(kind, change, obj, s->watchers[w].userdata);
}

static int push_note(store *s, note n) {
        if (TEND_GROW(s->notes, s->alloc_notes, s->n_notes + 1) < 0)
                return -ENOMEM;
        s->notes[s->n_notes++] = n;
        return 0;
}

static void drop_notes(store *s) {
        for (size_t i = 0; i < s->n_notes; i++)
                free(s->notes[i].json);
        s->n_notes = 0;
}

static void free_undo(store *s) {
        for (size_t i = 0; i < s->n_undo; i++) {
                undo *u = &s->undo[i];
                if (u->is_record)
                        json_decref(u->old_record);
                else
                        spec_free(store_kind_type(u->kind), u->old);
                free(u->key);
        }
        s->n_undo = 0;
}

/* ---- objects -----------------------------------------------------------------------------------
 */

static void event_key_forget(store *s, const spec_event *e);
static void event_key_learn(store *s, const spec_event *e);

/* The row of key ("ns/name") as it now is in memory: written, or deleted
 * when the object is gone. *ret_json: the body written (new string). */
static int write_row(store *s, store_kind kind, const char *key, const void *obj, char **ret_json) {
        const char *slash = strchr(key, '/');
        _cleanup_free_ char *body = NULL, *ns = NULL;
        int r;

        if (!slash || !(ns = strndup(key, (size_t) (slash - key))))
                return -ENOMEM;
        if (!obj) {
                sqlite3_bind_text(s->del_obj, 1, store_kind_to_string(kind), -1, SQLITE_STATIC);
                sqlite3_bind_text(s->del_obj, 2, ns, -1, SQLITE_STATIC);
                sqlite3_bind_text(s->del_obj, 3, slash + 1, -1, SQLITE_STATIC);
                return step_reset(s, s->del_obj);
        }
        /* In the codec's order of fields: the same object is the same
         * text, and sorting a large one's keys cost more than the rest
         * of its commit. Written from the object, without a tree, and a
         * deployment's managedFields written once, not at each status
         * change (SPEC_DUMP_SHARED: the codec's SK_JSON values are never
         * changed). */
        body = spec_dump_object(store_kind_type(kind), obj, SPEC_DUMP_SHARED);
        if (!body)
                return -ENOMEM;
        sqlite3_bind_text(s->put_obj, 1, store_kind_to_string(kind), -1, SQLITE_STATIC);
        sqlite3_bind_text(s->put_obj, 2, ns, -1, SQLITE_STATIC);
        sqlite3_bind_text(s->put_obj, 3, slash + 1, -1, SQLITE_STATIC);
        sqlite3_bind_int64(s->put_obj, 4, (sqlite3_int64) spec_object_meta(obj)->resource_version);
        sqlite3_bind_text(s->put_obj, 5, body, -1, SQLITE_STATIC);
        r = step_reset(s, s->put_obj);
        if (r >= 0)
                *ret_json = TAKE_PTR(body);
        return r;
}

/* The record of a pod as it now is in memory. */
static int write_record(store *s, const char *uid) {
        json_t *rec = tend_hashmap_get(s->records, uid);
        _cleanup_free_ char *text = NULL;

        if (!rec) {
                sqlite3_bind_text(s->del_rec, 1, uid, -1, SQLITE_STATIC);
                return step_reset(s, s->del_rec);
        }
        text = spec_json_dump_canonical(rec);
        if (!text)
                return -ENOMEM;
        sqlite3_bind_text(s->put_rec, 1, uid, -1, SQLITE_STATIC);
        sqlite3_bind_text(s->put_rec, 2, text, -1, SQLITE_STATIC);
        return step_reset(s, s->put_rec);
}

int store_put(store *s, store_kind kind, void *obj, const void **ret_stored) {
        const spec_type *t = store_kind_type(kind);
        spec_meta *m = spec_object_meta(obj);
        _cleanup_free_ char *key = NULL;
        void *old = NULL;
        char uid[37];
        int r;

        if (!t || !m->name) {
                spec_free(t, obj);
                return -EINVAL;
        }
        if (!m->namespace && !(m->namespace = strdup("default"))) {
                spec_free(t, obj);
                return -ENOMEM;
        }
        key = obj_key(m->namespace, m->name);
        if (!key || (!m->uid && !(m->uid = strdup(store_new_uid(uid))))) {
                spec_free(t, obj);
                return -ENOMEM;
        }
        /* Microseconds: objects created within one second must still sort
         * by age (history cleanup deletes the oldest first). */
        if (!m->creation_timestamp)
                m->creation_timestamp = now_realtime();
        spec_object_head *h = obj;
        if (!h->kind)
                h->kind = strdup(store_kind_to_string(kind));
        if (!h->api_version)
                h->api_version = api_version_of(kind);

        r = reserve_undo(s);
        if (r < 0) {
                spec_free(t, obj);
                return r;
        }
        m->resource_version = ++s->rv;
        r = coll_put(&s->coll[kind], key, obj, &old);
        if (r < 0) {
                spec_free(t, obj);
                return r;
        }
        r = push_undo(s, (undo){ .kind = kind, .key = TAKE_PTR(key), .old = old });
        if (r < 0)
                return r; /* in memory; the commit will carry it */
        if (kind == STORE_EVENT) {
                if (old)
                        event_key_forget(s, old);
                event_key_learn(s, obj);
        }
        tell_writers(s, kind, old ? STORE_MODIFIED : STORE_ADDED, obj);
        if (ret_stored)
                *ret_stored = obj;
        return 0;
}

int store_delete(store *s, store_kind kind, const char *namespace, const char *name) {
        _cleanup_free_ char *key = obj_key(namespace, name);
        void *old;
        int r;

        if (!key)
                return -ENOMEM;
        if (!coll_get(&s->coll[kind], key))
                return -ENOENT;
        r = reserve_undo(s);
        if (r < 0)
                return r;
        old = coll_remove(&s->coll[kind], key, store_kind_type(kind));
        uint64_t old_rv = spec_object_meta(old)->resource_version;
        spec_object_meta(old)->resource_version = ++s->rv; /* the DELETED event's version */
        if (kind == STORE_EVENT)
                event_key_forget(s, old);
        r = push_undo(s,
                      (undo){ .kind = kind, .key = TAKE_PTR(key), .old = old, .old_rv = old_rv });
        if (r < 0)
                return r;
        tell_writers(s, kind, STORE_DELETED, old);
        return 0;
}

const void *store_get(const store *s, store_kind kind, const char *namespace, const char *name) {
        char buf[512];

        if (kind < 0 || kind >= _STORE_KIND_MAX)
                return NULL;
        snprintf(buf, sizeof buf, "%s/%s", strempty(namespace), strempty(name));
        return coll_get(&s->coll[kind], buf);
}

size_t store_list(const store *s, store_kind kind, const void *const **ret) {
        *ret = (const void *const *) s->coll[kind].items;
        return s->coll[kind].n;
}

uint64_t store_resource_version(const store *s) {
        return s->rv;
}

/* ---- commit and rollback -----------------------------------------------------------------------
 */

const tend_histogram *store_commit_histogram(const store *s) {
        return &s->commit_hist;
}

/* What post-commit watchers hear of one key the batch changed: from the
 * state before the batch (the key's first undo entry) to the state now. A
 * key created and deleted within the batch is not heard of at all; one
 * replaced by an object of another uid is a deletion and an addition. */
static int note_key(store *s, size_t first, const void *now, const void *deleted, char *json) {
        const undo *u0 = &s->undo[first];
        const void *before = u0->old;
        int r = 0;

        if (before &&
            (!now || !streq_ptr(spec_object_meta(before)->uid, spec_object_meta(now)->uid)))
                r = push_note(s, (note){ u0->kind, STORE_DELETED, deleted ?: before, NULL });
        if (r >= 0 && now) {
                r = push_note(s, (note){ u0->kind,
                                         before && streq_ptr(spec_object_meta(before)->uid,
                                                             spec_object_meta(now)->uid)
                                                 ? STORE_MODIFIED
                                                 : STORE_ADDED,
                                         now, json });
                if (r >= 0)
                        json = NULL; /* the note has it; if it could not be kept, it is ours */
        }
        free(json);
        return r;
}

/* Writes every row the open batch changed, each once, as it now is: the
 * undo log names them (an object written three times in a pass is encoded
 * once, here, not on the pass's way). The notes for post-commit watchers
 * are made on the way, with the JSON just written. */
static int write_batch(store *s) {
        _cleanup_(tend_hashmap_freep) tend_hashmap *seen = tend_hashmap_new(),
                                                   *deleted = tend_hashmap_new();
        char buf[600];
        int r;

        if (!seen || !deleted)
                return -ENOMEM;
        /* Each deleted key's last state before its deletion (for DELETED):
         * a deletion's undo entry holds it, with old_rv set. */
        for (size_t i = 0; i < s->n_undo; i++) {
                const undo *u = &s->undo[i];
                if (u->is_record || !u->old || !u->old_rv)
                        continue;
                snprintf(buf, sizeof buf, "%d\x1f%s", (int) u->kind, u->key);
                if (tend_hashmap_put(deleted, buf, u->old, NULL) < 0)
                        return -ENOMEM;
        }
        r = exec(s, "BEGIN IMMEDIATE");
        for (size_t i = 0; i < s->n_undo && r >= 0; i++) {
                const undo *u = &s->undo[i];
                snprintf(buf, sizeof buf, "%d\x1f%s", u->is_record ? -1 : (int) u->kind, u->key);
                if (tend_hashmap_get(seen, buf))
                        continue;
                r = tend_hashmap_put(seen, buf, (void *) 1, NULL);
                if (r < 0)
                        break;
                if (u->is_record)
                        r = write_record(s, u->key);
                else {
                        const void *now = coll_get(&s->coll[u->kind], u->key);
                        char *json = NULL;
                        r = write_row(s, u->kind, u->key, now, &json);
                        if (r >= 0)
                                r = note_key(s, i, now, tend_hashmap_get(deleted, buf), json);
                        else
                                free(json);
                }
        }
        if (r >= 0) {
                sqlite3_bind_int64(s->set_rv, 1, (sqlite3_int64) s->rv);
                r = step_reset(s, s->set_rv);
        }
        if (r >= 0)
                r = exec(s, "COMMIT");
        if (r < 0) {
                (void) exec(s, "ROLLBACK");
                drop_notes(s);
        }
        return r;
}

static int cmp_note(const void *x, const void *y) {
        uint64_t a = spec_object_meta(((const note *) x)->obj)->resource_version,
                 b = spec_object_meta(((const note *) y)->obj)->resource_version;
        return a < b ? -1 : a > b;
}

const char *store_note_json(const store *s) {
        return s->note_json;
}

bool store_dirty(const store *s) {
        return s->n_undo > 0;
}

int store_commit(store *s, bool durable) {
        usec_t t0 = now_monotonic();
        int r;

        if (s->n_undo == 0 && !durable)
                return 0;
        if (s->n_undo > 0) {
                r = write_batch(s);
                if (r < 0) {
                        tend_histogram_observe(&s->commit_hist, now_monotonic() - t0);
                        store_rollback(s);
                        return r;
                }
                s->rv_committed = s->rv;
        }
        if (durable) {
                /* SQLite refuses to change `synchronous` inside a transaction,
                 * so the fsync comes after: one tiny commit at FULL, which
                 * fsyncs the WAL and with it every frame before it. */
                r = exec(s, "PRAGMA synchronous=FULL");
                if (r >= 0)
                        r = exec(s,
                                 "BEGIN IMMEDIATE; UPDATE meta SET value = value WHERE key = 'rv'; "
                                 "COMMIT");
                (void) exec(s, "PRAGMA synchronous=NORMAL");
                if (r < 0) {
                        (void) exec(s, "ROLLBACK");
                        tend_histogram_observe(&s->commit_hist, now_monotonic() - t0);
                        return r; /* committed, but not known to be on disk */
                }
        }
        tend_histogram_observe(&s->commit_hist, now_monotonic() - t0);

        /* Subscribers hear of changes only once they are on disk, in the
         * order of their resourceVersions (a watch stream's versions only
         * grow). The objects the notes point to stay valid until the old
         * undo log is freed below; a subscriber that writes starts a new
         * batch. */
        if (s->n_notes > 1)
                qsort(s->notes, s->n_notes, sizeof(note), cmp_note);
        note *notes = s->notes;
        size_t n_notes = s->n_notes;
        undo *undos = s->undo;
        size_t n_undo = s->n_undo;
        s->notes = NULL;
        s->n_notes = s->alloc_notes = 0;
        s->undo = NULL;
        s->n_undo = s->alloc_undo = 0;
        for (size_t i = 0; i < n_notes; i++) {
                s->note_json = notes[i].json;
                for (size_t w = 0; w < s->n_watchers; w++)
                        if (!s->watchers[w].on_write)
                                s->watchers[w].fn(notes[i].kind, notes[i].change, notes[i].obj,
                                                  s->watchers[w].userdata);
                s->note_json = NULL;
                free(notes[i].json);
        }
        free(notes);
        for (size_t i = 0; i < n_undo; i++) {
                if (undos[i].is_record)
                        json_decref(undos[i].old_record);
                else
                        spec_free(store_kind_type(undos[i].kind), undos[i].old);
                free(undos[i].key);
        }
        free(undos);
        return 0;
}

void store_rollback(store *s) {
        /* Nothing of the batch is on disk (write_batch() rolled its own
         * transaction back): undo in memory, in reverse order. */
        for (size_t i = s->n_undo; i > 0; i--) {
                undo *u = &s->undo[i - 1];
                if (u->is_record) {
                        json_t *cur = NULL;
                        if (u->old_record)
                                (void) tend_hashmap_put(s->records, u->key, u->old_record,
                                                        (void **) &cur);
                        else
                                cur = tend_hashmap_remove(s->records, u->key);
                        json_decref(cur);
                        u->old_record = NULL;
                } else {
                        const spec_type *t = store_kind_type(u->kind);
                        void *cur = NULL;
                        if (u->old && u->old_rv)
                                spec_object_meta(u->old)->resource_version = u->old_rv;
                        if (u->old)
                                (void) coll_put(&s->coll[u->kind], u->key, u->old, &cur);
                        else
                                cur = coll_remove(&s->coll[u->kind], u->key, t);
                        if (u->kind == STORE_EVENT) {
                                if (cur)
                                        event_key_forget(s, cur);
                                if (u->old)
                                        event_key_learn(s, u->old);
                        }
                        spec_free(t, cur);
                        u->old = NULL;
                }
                free(u->key);
        }
        s->n_undo = 0;
        drop_notes(s);
        s->rv = s->rv_committed;
}

/* ---- records
 * -------------------------------------------------------------------------------------- */

int store_put_record(store *s, const char *pod_uid, json_t *record) {
        json_t *old = NULL;
        char *key = strdup(pod_uid);
        int r;

        if (!key)
                return -ENOMEM;
        r = reserve_undo(s);
        if (r >= 0) {
                r = tend_hashmap_put(s->records, pod_uid, json_incref(record), (void **) &old);
                if (r < 0)
                        json_decref(record);
        }
        if (r < 0) {
                free(key);
                return r;
        }
        return push_undo(s, (undo){ .key = key, .is_record = true, .old_record = old });
}

json_t *store_get_record(const store *s, const char *pod_uid) {
        return tend_hashmap_get(s->records, pod_uid);
}

int store_delete_record(store *s, const char *pod_uid) {
        json_t *old;
        char *key;
        int r;

        if (!tend_hashmap_get(s->records, pod_uid))
                return -ENOENT;
        key = strdup(pod_uid);
        if (!key)
                return -ENOMEM;
        r = reserve_undo(s);
        if (r < 0) {
                free(key);
                return r;
        }
        old = tend_hashmap_remove(s->records, pod_uid);
        return push_undo(s, (undo){ .key = key, .is_record = true, .old_record = old });
}

/* ---- events
 * -------------------------------------------------------------------------------------- */

/* A repeat is one host's (in a fleet, one node's: it alone writes it). */
static char *event_fold_key(const char *host, const char *uid, const char *reason,
                            const char *message) {
        return strprintf("%s\x1f%s\x1f%s\x1f%s", strempty(host), strempty(uid), strempty(reason),
                         strempty(message));
}

static void event_key_learn(store *s, const spec_event *e) {
        _cleanup_free_ char *k = event_fold_key(e->source.host, e->involved_object.uid, e->reason,
                                                e->message);
        char *v = strprintf("%s/%s", strempty(e->metadata.namespace), e->metadata.name);
        char *old = NULL;

        if (!k || !v || tend_hashmap_put(s->event_keys, k, v, (void **) &old) < 0)
                free(v);
        free(old);
}

/* (only if the fold key names e: another of the same key may hold it) */
static void event_key_forget(store *s, const spec_event *e) {
        _cleanup_free_ char *k = event_fold_key(e->source.host, e->involved_object.uid, e->reason,
                                                e->message),
                            *v = strprintf("%s/%s", strempty(e->metadata.namespace),
                                           strempty(e->metadata.name));
        const char *cur = k ? tend_hashmap_get(s->event_keys, k) : NULL;

        if (cur && v && streq(cur, v))
                free(tend_hashmap_remove(s->event_keys, k));
}

static int cmp_last_seen(const void *a, const void *b) {
        usec_t x = (*(const spec_event *const *) a)->last_timestamp,
               y = (*(const spec_event *const *) b)->last_timestamp;
        return x < y ? -1 : x > y;
}

int store_prune_events(store *s, usec_t now) {
        collection *c = &s->coll[STORE_EVENT];
        const spec_event *oldest = NULL;
        _cleanup_free_ const spec_event **by_age = NULL;
        size_t n = c->n;
        int r;

        for (size_t i = 0; i < n; i++) {
                const spec_event *e = c->items[i];
                if (!oldest || e->last_timestamp < oldest->last_timestamp)
                        oldest = e;
        }
        if (!oldest ||
            (n <= STORE_EVENTS_MAX && oldest->last_timestamp + STORE_EVENTS_MAX_AGE >= now))
                return 0;
        /* One over the cap, the oldest not expired: the one case of a
         * steady stream (each new event past the cap). The oldest goes,
         * without a sort of them all per event (at 3,000 pods started,
         * 6 % of the leader's time was that sort). */
        if (n == STORE_EVENTS_MAX + 1 && oldest->last_timestamp + STORE_EVENTS_MAX_AGE >= now) {
                _cleanup_free_ char *ns = strdup(strempty(oldest->metadata.namespace)),
                                    *name = strdup(strempty(oldest->metadata.name));
                if (!ns || !name)
                        return -ENOMEM;
                return store_delete(s, STORE_EVENT, ns, name);
        }
        /* oldest first, sorted once: a mirror may bring thousands at a time */
        by_age = new0(const spec_event *, n);
        if (!by_age)
                return -ENOMEM;
        memcpy(by_age, c->items, sizeof *by_age * n);
        qsort(by_age, n, sizeof *by_age, cmp_last_seen);
        for (size_t i = 0; i < n; i++) {
                const spec_event *e = by_age[i];
                if (n - i <= STORE_EVENTS_MAX && e->last_timestamp + STORE_EVENTS_MAX_AGE >= now)
                        break;
                _cleanup_free_ char *ns = strdup(strempty(e->metadata.namespace)),
                                    *name = strdup(strempty(e->metadata.name));
                if (!ns || !name)
                        return -ENOMEM;
                r = store_delete(s, STORE_EVENT, ns, name);
                if (r < 0)
                        return r;
        }
        return 0;
}

int store_record_event(store *s, store_kind involved_kind, const spec_meta *involved,
                       const char *type, const char *reason, const char *message, usec_t now) {
        _cleanup_free_ char *k = event_fold_key(s->hostname, involved->uid, reason, message);
        const char *where = k ? tend_hashmap_get(s->event_keys, k) : NULL;
        const spec_event *cur = NULL;
        spec_event *e;
        int r;

        if (!k)
                return -ENOMEM;
        if (where) {
                const char *slash = strchr(where, '/');
                _cleanup_free_ char *ns = strndup(where, (size_t) (slash - where));
                cur = ns ? store_get(s, STORE_EVENT, ns, slash + 1) : NULL;
        }
        if (cur) {
                e = spec_event_copy(cur);
                if (!e)
                        return -ENOMEM;
                e->count = MAX(e->count, 1) + 1;
                e->last_timestamp = now;
        } else {
                char uid[37];
                e = spec_event_new();
                if (!e)
                        return -ENOMEM;
                e->metadata.namespace = strdup(strempty(involved->namespace));
                e->metadata.name = strprintf("%s.%.16s", strempty(involved->name),
                                             store_new_uid(uid) + 19);
                e->involved_object.kind = strdup(store_kind_to_string(involved_kind));
                e->involved_object.api_version = api_version_of(involved_kind);
                e->involved_object.namespace = strdup(strempty(involved->namespace));
                e->involved_object.name = strdup(strempty(involved->name));
                e->involved_object.uid = strdup(strempty(involved->uid));
                e->reason = strdup(reason);
                e->message = strdup(message);
                e->type = strdup(type);
                e->count = 1;
                e->first_timestamp = e->last_timestamp = now;
                e->metadata.creation_timestamp = now;
                e->source.component = strdup("tendd");
                e->source.host = strdup(s->hostname);
                if (!e->metadata.namespace || !e->metadata.name || !e->reason || !e->message ||
                    !e->type) {
                        spec_event_free(e);
                        return -ENOMEM;
                }
                /* Names are cosmetic; replace ':' and '/' a uid would not have. */
                for (char *c = e->metadata.name; *c; c++)
                        if (*c == '/')
                                *c = '-';
        }
        r = store_put(s, STORE_EVENT, e, NULL);
        if (r < 0)
                return r;
        return store_prune_events(s, now);
}

int store_set_host(store *s, const char *host) {
        if (isempty(host) || strlen(host) >= sizeof s->hostname)
                return -EINVAL;
        strcpy(s->hostname, host);
        return 0;
}

/* ---- open and close -------------------------------------------------------------------------- */

static int subscribe(store *s, store_watch_fn fn, void *userdata, bool on_write) {
        watcher *nw = realloc(s->watchers, sizeof(watcher) * (s->n_watchers + 1));
        if (!nw)
                return -ENOMEM;
        s->watchers = nw;
        s->watchers[s->n_watchers++] = (watcher){ fn, userdata, on_write };
        return 0;
}

int store_subscribe(store *s, store_watch_fn fn, void *userdata) {
        return subscribe(s, fn, userdata, false);
}

int store_subscribe_writes(store *s, store_watch_fn fn, void *userdata) {
        return subscribe(s, fn, userdata, true);
}

void store_unsubscribe(store *s, store_watch_fn fn, void *userdata) {
        for (size_t i = 0; i < s->n_watchers; i++)
                if (s->watchers[i].fn == fn && s->watchers[i].userdata == userdata) {
                        memmove(&s->watchers[i], &s->watchers[i + 1],
                                sizeof(watcher) * (s->n_watchers - i - 1));
                        s->n_watchers--;
                        return;
                }
}

/* ---- checkpoints ------------------------------------------------------------------ */

/*
 * SQLite copies the WAL back into the database (a checkpoint) from within
 * the commit that takes it past 1000 pages: a few MB copied and an fsync,
 * 15 ms on the loop, after every fourth write of a large deployment (issue
 * 27). Here the commit only looks at the WAL's length, and wakes a thread
 * that checkpoints on a connection of its own, PASSIVE: it never waits for
 * the writer, which goes on appending meanwhile; the next commit after a
 * whole checkpoint starts the WAL again from its beginning. Only if the WAL
 * grows far past that (the thread failed, or cannot keep up) does a commit
 * checkpoint itself, as SQLite would have.
 */
#define CHECKPOINT_PAGES 1000
#define CHECKPOINT_PAGES_MAX (16 * CHECKPOINT_PAGES)

/* Whether a checkpoint was made (not when another one runs). */
static bool checkpoint(sqlite3 *db) {
        int pages = -1;

        return sqlite3_wal_checkpoint_v2(db, NULL, SQLITE_CHECKPOINT_PASSIVE, &pages, NULL) ==
                       SQLITE_OK &&
               pages >= 0;
}

static void *checkpoint_thread(void *userdata) {
        checkpointer *c = userdata;
        sqlite3 *db = NULL;

        /* (a connection knows that the database is in WAL mode, and so has
         * something to checkpoint, only once it has read it) */
        if (sqlite3_open_v2(c->path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) !=
                    SQLITE_OK ||
            sqlite3_exec(db, "SELECT 1 FROM sqlite_master LIMIT 1", NULL, NULL, NULL) !=
                    SQLITE_OK) {
                /* (the commits checkpoint themselves past the maximum) */
                log_error("Failed to open %s for the WAL's checkpoints: %s", c->path,
                          db ? sqlite3_errmsg(db) : "out of memory");
                sqlite3_close(db);
                return NULL;
        }
        pthread_mutex_lock(&c->lock);
        for (;;) {
                while (!c->wanted && !c->stop)
                        pthread_cond_wait(&c->wake, &c->lock);
                if (c->stop)
                        break;
                c->wanted = false;
                pthread_mutex_unlock(&c->lock);
                /* (SQLITE_BUSY: a commit's own checkpoint runs; it does the work) */
                if (checkpoint(db))
                        __atomic_add_fetch(&c->by_thread, 1, __ATOMIC_RELAXED);
                pthread_mutex_lock(&c->lock);
        }
        pthread_mutex_unlock(&c->lock);
        sqlite3_close(db);
        return NULL;
}

static void checkpoint_wake(checkpointer *c) {
        pthread_mutex_lock(&c->lock);
        if (!c->started)
                c->started = pthread_create(&c->thread, NULL, checkpoint_thread, c) == 0;
        c->wanted = true;
        pthread_cond_signal(&c->wake);
        pthread_mutex_unlock(&c->lock);
}

static void checkpoint_stop(checkpointer *c) {
        pthread_mutex_lock(&c->lock);
        c->stop = true;
        pthread_cond_signal(&c->wake);
        pthread_mutex_unlock(&c->lock);
        if (c->started)
                pthread_join(c->thread, NULL);
        c->started = false;
}

/* After each commit, with the WAL's length in pages. */
static int on_wal(void *userdata, sqlite3 *db, const char *name, int pages) {
        store *s = userdata;

        (void) name;
        if (pages >= CHECKPOINT_PAGES_MAX) {
                if (checkpoint(db))
                        __atomic_add_fetch(&s->ckpt.by_commit, 1, __ATOMIC_RELAXED);
        } else if (pages >= CHECKPOINT_PAGES)
                checkpoint_wake(&s->ckpt);
        return SQLITE_OK;
}

void store_checkpoints(const store *s, uint64_t *ret_by_thread, uint64_t *ret_by_commit) {
        *ret_by_thread = __atomic_load_n(&s->ckpt.by_thread, __ATOMIC_RELAXED);
        *ret_by_commit = __atomic_load_n(&s->ckpt.by_commit, __ATOMIC_RELAXED);
}

/* Schema migrations: index = version reached. Each runs in the open
 * transaction; user_version is set after the last. */
static const char *const migrations[] = {
        [1] = "CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
              "INSERT INTO meta (key, value) VALUES ('rv', 0);"
              "CREATE TABLE objects (kind TEXT NOT NULL, namespace TEXT NOT NULL,"
              "  name TEXT NOT NULL, rv INTEGER NOT NULL, body TEXT NOT NULL,"
              "  PRIMARY KEY (kind, namespace, name)) WITHOUT ROWID;"
              "CREATE TABLE records (pod_uid TEXT PRIMARY KEY, record TEXT NOT NULL)"
              "  WITHOUT ROWID;",
        /* Rowid tables, each with an index of its key. A WITHOUT ROWID
         * table keeps whole rows in its key's B-tree: a pod's 1.5 KiB body
         * overflows the cell, and rows in the random order of pod names
         * split pages at every insert. Writing a 1.5 KiB row cost 112 µs
         * so, against 18 µs now (3,000 pods in batches of 60). */
        [2] = "CREATE TABLE objects_v2 (kind TEXT NOT NULL, namespace TEXT NOT NULL,"
              "  name TEXT NOT NULL, rv INTEGER NOT NULL, body TEXT NOT NULL);"
              "INSERT INTO objects_v2 (kind, namespace, name, rv, body)"
              "  SELECT kind, namespace, name, rv, body FROM objects;"
              "DROP TABLE objects;"
              "ALTER TABLE objects_v2 RENAME TO objects;"
              "CREATE UNIQUE INDEX objects_key ON objects (kind, namespace, name);"
              "CREATE TABLE records_v2 (pod_uid TEXT NOT NULL, record TEXT NOT NULL);"
              "INSERT INTO records_v2 (pod_uid, record) SELECT pod_uid, record FROM records;"
              "DROP TABLE records;"
              "ALTER TABLE records_v2 RENAME TO records;"
              "CREATE UNIQUE INDEX records_key ON records (pod_uid);",
};

static int migrate(store *s, char **ret_error) {
        sqlite3_stmt *st = NULL;
        int version = 0, r;

        if (sqlite3_prepare_v2(s->db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
                version = sqlite3_column_int(st, 0);
        sqlite3_finalize(st);
        if (version > SCHEMA_VERSION) {
                *ret_error = strprintf("the database has schema version %d, newer than this "
                                       "tendd understands (%d): use a newer tendd",
                                       version, SCHEMA_VERSION);
                return -EPROTO;
        }
        if (version == SCHEMA_VERSION)
                return 0;
        r = exec(s, "BEGIN IMMEDIATE");
        for (int v = version + 1; r >= 0 && v <= SCHEMA_VERSION; v++)
                r = exec(s, migrations[v]);
        if (r >= 0) {
                char sql[64];
                snprintf(sql, sizeof sql, "PRAGMA user_version = %d", SCHEMA_VERSION);
                r = exec(s, sql);
        }
        if (r >= 0)
                r = exec(s, "COMMIT");
        if (r < 0) {
                (void) exec(s, "ROLLBACK");
                *ret_error = strprintf("migrating the schema to version %d: %s", SCHEMA_VERSION,
                                       sqlite3_errmsg(s->db));
        }
        return r;
}

static int load(store *s, char **ret_error) {
        sqlite3_stmt *st = NULL;
        int rc, r = 0;

        if (sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = 'rv'", -1, &st, NULL) ==
                    SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
                s->rv = (uint64_t) sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        s->rv_committed = s->rv;

        if (sqlite3_prepare_v2(s->db, "SELECT kind, namespace, name, body FROM objects", -1, &st,
                               NULL) != SQLITE_OK)
                return -EIO;
        while ((rc = sqlite3_step(st)) == SQLITE_ROW && r >= 0) {
                const char *kind = (const char *) sqlite3_column_text(st, 0);
                const char *body = (const char *) sqlite3_column_text(st, 3);
                store_kind k = _STORE_KIND_INVALID;
                spec_errors errs = {};
                json_error_t je;
                json_t *j;
                void *obj = NULL, *old = NULL;
                _cleanup_free_ char *key = NULL;

                for (int i = 0; i < _STORE_KIND_MAX; i++)
                        if (streq_ptr(kind, store_kind_to_string(i)))
                                k = (store_kind) i;
                j = body ? json_loads(body, 0, &je) : NULL;
                if (k < 0 || !j || spec_decode_shared(store_kind_type(k), j, &errs, &obj) < 0) {
                        _cleanup_free_ char *why = errs.n ? spec_error_format(&errs.items[0])
                                                          : strdup(j ? "bad kind" : je.text);
                        *ret_error = strprintf("stored %s %s/%s cannot be read: %s", strna(kind),
                                               (const char *) sqlite3_column_text(st, 1),
                                               (const char *) sqlite3_column_text(st, 2),
                                               strna(why));
                        spec_errors_done(&errs);
                        json_decref(j);
                        r = -EBADMSG;
                        break;
                }
                json_decref(j);
                key = obj_key(spec_object_meta(obj)->namespace, spec_object_meta(obj)->name);
                r = key ? coll_put(&s->coll[k], key, obj, &old) : -ENOMEM;
                if (r < 0)
                        spec_free(store_kind_type(k), obj);
                else if (k == STORE_EVENT)
                        event_key_learn(s, obj);
        }
        sqlite3_finalize(st);
        if (r < 0)
                return r;

        if (sqlite3_prepare_v2(s->db, "SELECT pod_uid, record FROM records", -1, &st, NULL) !=
            SQLITE_OK)
                return -EIO;
        while (sqlite3_step(st) == SQLITE_ROW) {
                json_t *j = json_loads((const char *) sqlite3_column_text(st, 1), 0, NULL);
                if (j && tend_hashmap_put(s->records, (const char *) sqlite3_column_text(st, 0), j,
                                          NULL) < 0)
                        json_decref(j);
        }
        sqlite3_finalize(st);
        return 0;
}

int store_open(const char *path, store **ret, char **ret_error) {
        store *s = new0(store, 1);
        int rc, r;

        *ret_error = NULL;
        if (!s)
                return -ENOMEM;
        pthread_mutex_init(&s->ckpt.lock, NULL);
        pthread_cond_init(&s->ckpt.wake, NULL);
        for (int k = 0; k < _STORE_KIND_MAX; k++)
                if (!(s->coll[k].index = tend_hashmap_new()))
                        goto oom;
        s->coll[STORE_DEPLOYMENT].with_tend = s->coll[STORE_REPLICA_SET].with_tend = true;
        if (!(s->records = tend_hashmap_new()) || !(s->event_keys = tend_hashmap_new()) ||
            !(s->ckpt.path = strdup(path)))
                goto oom;
        if (gethostname(s->hostname, sizeof s->hostname - 1) < 0)
                strcpy(s->hostname, "localhost");

        /* Owner-only: it holds Secrets (SQLite makes its -wal and -shm
         * files with the database's mode). An older store is made so. */
        r = owner_only(path);
        if (r < 0) {
                *ret_error = strprintf("making %s owner-only: %s", path, strerror(-r));
                store_close(s);
                return r;
        }
        rc = sqlite3_open_v2(path, &s->db,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                             NULL);
        if (rc != SQLITE_OK) {
                *ret_error = strprintf("opening %s: %s", path,
                                       s->db ? sqlite3_errmsg(s->db) : "out of memory");
                r = sql_error(s, rc);
                store_close(s);
                return r;
        }
        /* WAL: readers never block, commits append. NORMAL: no fsync per
         * commit (a crash of tendd loses nothing; see store_commit() for the
         * fsync of acknowledged writes). */
        /* Only tendd writes; a reader holding a lock (sqlite3 on the file)
         * gets half a second before a write fails and is retried. */
        sqlite3_busy_timeout(s->db, 500);
        r = exec(s, "PRAGMA journal_mode=WAL");
        if (r >= 0)
                r = exec(s, "PRAGMA synchronous=NORMAL");
        /* Every object lives in memory already; SQLite's page cache only
         * serves writes: 512 KiB, not the 2 MiB default. A commit larger
         * than that keeps its pages in memory until it ends, rather than
         * writing them to the WAL half-way and reading them back: a large
         * deployment's row took 5 times as long so. */
        if (r >= 0)
                r = exec(s, "PRAGMA cache_size=-512");
        if (r >= 0)
                r = exec(s, "PRAGMA cache_spill=OFF");
        if (r >= 0)
                sqlite3_wal_hook(s->db, on_wal, s); /* (replaces SQLite's checkpoints) */
        if (r >= 0)
                r = migrate(s, ret_error);
        if (r < 0) {
                if (!*ret_error)
                        *ret_error = strprintf("%s: %s", path, sqlite3_errmsg(s->db));
                store_close(s);
                return r;
        }
        if (sqlite3_prepare_v2(s->db,
                               "INSERT INTO objects (kind, namespace, name, rv, body) "
                               "VALUES (?, ?, ?, ?, ?) ON CONFLICT (kind, namespace, name) "
                               "DO UPDATE SET rv = excluded.rv, body = excluded.body",
                               -1, &s->put_obj, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(s->db,
                               "DELETE FROM objects WHERE kind = ? AND namespace = ? AND name = ?",
                               -1, &s->del_obj, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(s->db,
                               "INSERT INTO records (pod_uid, record) VALUES (?, ?) "
                               "ON CONFLICT (pod_uid) DO UPDATE SET record = excluded.record",
                               -1, &s->put_rec, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(s->db, "DELETE FROM records WHERE pod_uid = ?", -1, &s->del_rec,
                               NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(s->db, "UPDATE meta SET value = ? WHERE key = 'rv'", -1, &s->set_rv,
                               NULL) != SQLITE_OK) {
                *ret_error = strprintf("%s: %s", path, sqlite3_errmsg(s->db));
                store_close(s);
                return -EIO;
        }
        r = load(s, ret_error);
        if (r < 0) {
                store_close(s);
                return r;
        }
        *ret = s;
        return 0;

oom:
        store_close(s);
        return -ENOMEM;
}

store *store_close(store *s) {
        const char *key;
        void *v;

        if (!s)
                return NULL;
        if (s->n_undo)
                (void) store_commit(s, true);
        checkpoint_stop(&s->ckpt);
        sqlite3_finalize(s->put_obj);
        sqlite3_finalize(s->del_obj);
        sqlite3_finalize(s->put_rec);
        sqlite3_finalize(s->del_rec);
        sqlite3_finalize(s->set_rv);
        if (s->db)
                sqlite3_close(s->db);
        for (int k = 0; k < _STORE_KIND_MAX; k++) {
                for (size_t i = 0; i < s->coll[k].n; i++)
                        spec_free(store_kind_type((store_kind) k), s->coll[k].items[i]);
                free(s->coll[k].items);
                free(s->coll[k].tends);
                tend_hashmap_free(s->coll[k].index);
        }
        if (s->records)
                for (size_t i = 0; tend_hashmap_next(s->records, &i, &key, &v);)
                        json_decref(v);
        tend_hashmap_free(s->records);
        if (s->event_keys)
                for (size_t i = 0; tend_hashmap_next(s->event_keys, &i, &key, &v);)
                        free(v);
        tend_hashmap_free(s->event_keys);
        free_undo(s);
        spec_json_dump_shared_forget(); /* (what write_row() kept) */
        free(s->undo);
        free(s->notes);
        free(s->watchers);
        free(s->ckpt.path);
        pthread_cond_destroy(&s->ckpt.wake);
        pthread_mutex_destroy(&s->ckpt.lock);
        free(s);
        return NULL;
}
