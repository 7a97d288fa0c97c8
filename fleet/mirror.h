/* SPDX-License-Identifier: MIT */
#pragma once

/* The object mirror's functions that lifecycle.c calls (mirror.c). */

#include "acks.h"

/* mirror.c */
fobj *fleet__fobj_get(fleet *f, store_kind k, const char *ns, const char *name, bool create);
/* Splits staged local changes into their keys' values, for budget at most
 * (0: all). Returns whether any is left. */
bool fleet__unstage(fleet *f, usec_t budget);
/* Takes o out of what is to be sent, and puts the local object back to
 * what etcd has; the API writes among its changes fail with code. */
void fleet__undo(fleet *f, fobj *o, unsigned code);
/* A write goes once the loop has nothing more to do at once; msec > 0: a
 * retry, that late. */
void fleet__schedule_flush(fleet *f, uint64_t msec);
/* The local copies marked (apply) become what etcd has. Returns whether
 * any was. */
bool fleet__apply_marked(fleet *f);

/* The API writes waiting for etcd: the late ones, and those of a request
 * of which one failed, withdrawn; then the waiters that can be answered
 * are. */
void fleet__check_waiters(fleet *f);
