/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * The store: every object (Deployment, ReplicaSet, Pod, Event) in memory,
 * persisted in SQLite (<state-dir>/tend.db, WAL), with a global
 * resourceVersion bumped by every write and subscribers notified of every
 * change.
 *
 * Writes are grouped: they change the objects in memory at once, and
 * store_commit() writes the batch to SQLite in one transaction, each changed
 * row once, as it then is (so a pass's writes cost it no encoding, and an
 * object written three times is written once). The controllers commit once
 * per pass (cheap: synchronous=NORMAL, no fsync); a write acknowledged to a
 * user is committed with store_commit(s, true), which fsyncs
 * (synchronous=FULL) before the acknowledgement (docs/architecture.md §4.5). In WAL mode
 * the fsync also covers every earlier NORMAL commit, so nothing a user saw
 * acknowledged is lost even on power failure, and a crash of the agent
 * alone never loses a commit.
 *
 * Two committers, and only two. The agent's entry points (tend/agent.h: a
 * pass, the user actions, start-up, drain, shutdown) commit what the core
 * decides, and whoever else changes the store (the API, the manifest
 * directory) goes through them. In a fleet, the mirror (fleet/mirror.c,
 * fleet/events.c) is the second: it puts what etcd holds, written by other
 * nodes, into the store, and commits that itself (not durably: etcd keeps
 * it; a lost commit is listed again), between the agent's passes, never
 * inside one (it commits a pass's pending writes first).
 *
 * Objects handed out are borrowed and immutable: a write replaces the
 * object, so a pointer stays valid until the next write of that same key
 * (copy what you keep across writes).
 */

#include "tend/spec.h"

typedef enum store_kind {
        STORE_DEPLOYMENT,
        STORE_REPLICA_SET,
        STORE_POD,
        STORE_EVENT,
        STORE_CONFIG_MAP,
        STORE_SECRET,
        _STORE_KIND_MAX,
        _STORE_KIND_INVALID = -EINVAL,
} store_kind;

/* Each kind's codec (the rest of what a kind is, the registry's row of
 * that codec says: spec_kind_of()). */
const char *store_kind_to_string(store_kind k); /* "Deployment", ... */
const spec_type *store_kind_type(store_kind k);

typedef enum store_change {
        STORE_ADDED,
        STORE_MODIFIED,
        STORE_DELETED,
} store_change;

typedef struct store store;

/* Called for every change, after the in-memory swap. obj is the new object
 * (the old one for DELETED), borrowed for the call. */
typedef void (*store_watch_fn)(store_kind kind, store_change change, const void *obj,
                               void *userdata);

/* Opens (creating or migrating) the database and loads every object. On
 * failure *ret_error says what is wrong with the file. */
int store_open(const char *path, store **ret, char **ret_error);
store *store_close(store *s);

/* Told of what each commit changed, once it is on disk: what a watcher of
 * the API may be shown. One call per object the commit changed, with its
 * state after the commit (an object written twice in one batch is told of
 * once, with its last resourceVersion), or DELETED with its last state. */
int store_subscribe(store *s, store_watch_fn fn, void *userdata);
/* During such a call: the object's canonical JSON as the commit wrote it
 * (NULL for DELETED), so that it need not be encoded again. */
const char *store_note_json(const store *s);
/* Told of each change as it is written, before the commit, and so of
 * changes a rollback may yet undo: for the agent's work queue, which must
 * see its own writes within one pass to decide a whole pass in one
 * transaction. */
int store_subscribe_writes(store *s, store_watch_fn fn, void *userdata);
void store_unsubscribe(store *s, store_watch_fn fn, void *userdata);

uint64_t store_resource_version(const store *s);

/* Lookups (borrowed). */
const void *store_get(const store *s, store_kind kind, const char *namespace, const char *name);
/* tend's annotations of a stored Deployment or ReplicaSet, parsed when it
 * was put (spec_tend_parse()). NULL: none stored, or a kind without them.
 * Valid until the next write of that kind (any put or delete may move
 * it): read it at once. */
const spec_tend *store_tend(const store *s, store_kind kind, const char *namespace,
                            const char *name);
/* Every object of a kind, in no particular order; *ret is borrowed until
 * the next write. */
size_t store_list(const store *s, store_kind kind, const void *const **ret);

/* Creates or replaces an object. Takes ownership of obj (freed on error).
 * Sets metadata.resourceVersion (and uid/creationTimestamp if unset). The
 * caller has done all validation. Returns the stored object, borrowed. */
int store_put(store *s, store_kind kind, void *obj, const void **ret_stored);
/* Removes an object; -ENOENT if there is none. */
int store_delete(store *s, store_kind kind, const char *namespace, const char *name);

/* Whether there are changes not yet committed. */
bool store_dirty(const store *s);
/* Writes the batch (every write since the last commit) in one transaction.
 * durable: fsync before returning (for writes acknowledged to a user).
 * No-op when nothing was written. On failure the batch is rolled back, in
 * memory too (store_rollback()). */
int store_commit(store *s, bool durable);
/* Drops every write since the last commit, in memory and on disk, and
 * tells subscribers nothing (all-or-nothing applies). */
void store_rollback(store *s);

/* ---- records: what the runtime needs to re-adopt a pod (by pod uid) --------- */

int store_put_record(store *s, const char *pod_uid, json_t *record);
json_t *store_get_record(const store *s, const char *pod_uid); /* borrowed */
int store_delete_record(store *s, const char *pod_uid);

/* ---- events ------------------------------------------------------------------------------ */

#define STORE_EVENTS_MAX 1000
#define STORE_EVENTS_MAX_AGE (3600 * USEC_PER_SEC)

/* Records an event, folded into an existing one with the same involved
 * object, reason and message (count + 1, lastTimestamp = now). Bounded:
 * beyond STORE_EVENTS_MAX the least recent go, and none older than an hour
 * stays. now is wall clock. */
int store_record_event(store *s, store_kind involved_kind, const spec_meta *involved,
                       const char *type, const char *reason, const char *message, usec_t now);

/* The pruning store_record_event() does (beyond STORE_EVENTS_MAX the
 * least recent go, and those older than an hour), for events put by other
 * means (a fleet's mirror). O(n log n). */
int store_prune_events(store *s, usec_t now);

/* The host events name as their source (default: the machine's hostname;
 * in a fleet, the node's name). Returns 0 or -EINVAL (empty or too long). */
int store_set_host(store *s, const char *host);

/* Commit durations, for /metrics. */
const tend_histogram *store_commit_histogram(const store *s);
/* The WAL's checkpoints so far: by the store's thread, and by a commit
 * (only when the WAL grew far past its bound: the thread is behind or
 * failed). */
void store_checkpoints(const store *s, uint64_t *ret_by_thread, uint64_t *ret_by_commit);

/* A new uid (RFC 4122 version 4, from getrandom). buf: 37 bytes. */
char *store_new_uid(char buf[static 37]);
