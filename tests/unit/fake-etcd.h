/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * A fake etcd for the fleet's unit test (test-fleet.c): tend/etcd.h's
 * functions over an in-memory etcd of one member, on the loop. Keys with
 * revisions (create, mod, version), leases, txns of compares and puts,
 * ranges and deletes, a history that watches replay, sessions. Answers
 * come from the loop, as the real client's do; the test writes as another
 * node would, holds txns back, and takes leases away.
 *
 * Linked instead of tend_etcd: it defines every function of etcd.h the
 * fleet calls (one missing would pull etcd.c in, and its duplicates fail
 * the link).
 */

#include "tend/etcd.h"

/* The etcd made last (by fleet_join's etcd_new); NULL after its close. */
etcd *fake_etcd(void);
/* Txns wait (in order) while held; ranges, puts and the rest go on. */
void fake_etcd_hold(etcd *e, bool hold);
size_t fake_etcd_held(const etcd *e);
/* Txns are applied when they come, but their answers wait while late (the
 * watch may tell of them, and of what came after, first). */
void fake_etcd_late(etcd *e, bool late);
/* Each txn is applied, its answer lost, and sent again (etcd.c's hedge
 * after a leader's change): the answer is the second try's, refused
 * against the first, with unknown set. */
void fake_etcd_retried(etcd *e, bool retried);
/* Txns answered so far, and how many of them succeeded. */
unsigned fake_etcd_txns(const etcd *e, unsigned *ret_succeeded);
/* Another node's write: the key's value now (its watchers are told from
 * the loop). Returns the revision. */
int64_t fake_etcd_put(etcd *e, const char *key, const char *value, int64_t lease);
int64_t fake_etcd_delete(etcd *e, const char *key);
/* A key's value (borrowed; NULL: none) and its mod revision. */
const char *fake_etcd_get(const etcd *e, const char *key, int64_t *ret_mod);
/* The keys under prefix, in order, with their values (borrowed): *i from
 * 0; false at the end. */
bool fake_etcd_next(const etcd *e, const char *prefix, size_t *i, const char **ret_key,
                    const char **ret_value);
/* The lease expires: its keys go, and a session on it is lost. */
void fake_etcd_expire(etcd *e, int64_t lease);
