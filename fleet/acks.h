/* SPDX-License-Identifier: MIT */
#pragma once

/* The API writes waiting for etcd (acks.c), for the mirror (mirror.c):
 * which are still pending, which failed, and answering them. */

#include "objects.h"

#define WAIT_MAX (10 * USEC_PER_SEC) /* an API write waits this long for etcd, at most */
/* A waiter's failure: its write was withdrawn after WAIT_MAX, but an
 * answer of etcd's to it was lost before, so etcd may have it (a 504 that
 * says so). */
#define UNSURE 599

struct fwaiter {
        fwaiter *next;
        uint64_t from, seq; /* the request's own writes: (from, seq] */
        char **keys;        /* ... of these objects ("kind/ns/name") */
        unsigned failed;    /* 0, or the code of the answer (409, 413, 504, UNSURE) */
        usec_t deadline;
        void (*done)(unsigned code, json_t *answer, void *req);
        void *req;
};

/* The API request being answered wrote (or relies on) this object: its
 * answer waits for etcd to have it. */
void fleet__acks_note(fleet *f, store_kind kind, const char *ns, const char *name);
/* o's local writes did not make it to etcd: the API writes among them are
 * failed with code (409, 413, 503, 504, UNSURE). */
void fleet__acks_fail(fleet *f, const fobj *o, unsigned code);
/* Whether o has a write of a request's (up to seq) not acknowledged. */
bool fleet__acks_unacknowledged(const fobj *o, uint64_t seq);
/* Whether one of a request's writes (of keys, up to seq) is not
 * acknowledged (out_only: and out to etcd). */
bool fleet__acks_pending(fleet *f, char *const *keys, uint64_t seq, bool out_only);
/* The waiters whose writes are all acknowledged, or one failed, are
 * answered and go. */
void fleet__acks_answer(fleet *f);
/* The request req waits no more (its answer is not needed). */
void fleet__writes_cancel(fleet *f, void *req);
/* Every waiter goes, unanswered (the fleet closes). */
void fleet__acks_close(fleet *f);
