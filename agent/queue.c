/* SPDX-License-Identifier: MIT */

/*
 * What the pass keeps between the controllers' syncs and the commit: the
 * coalescing work queue and the delayed keys (deadlines), lookups by uid,
 * the events decided during a pass (written after its spawns) and the
 * starts kept for after the commit. It calls no controller: the
 * controllers and the pass (pass.c) call it.
 */

#include <stdio.h>

#include "agent-internal.h"

/* ---- the work queue ------------------------------------------------------------------ */

int workq_add(workq *q, const char *key) {
        if (tend_hashmap_get(q->set, key))
                return 0;
        if (q->head + q->n == q->alloc) {
                if (q->head > 0) {
                        memmove(q->keys, q->keys + q->head, sizeof(char *) * q->n);
                        q->head = 0;
                }
                if (TEND_GROW(q->keys, q->alloc, q->n + 1) < 0)
                        return -ENOMEM;
        }
        char *k = strdup(key);
        if (!k || tend_hashmap_put(q->set, key, (void *) 1, NULL) < 0) {
                free(k);
                return -ENOMEM;
        }
        q->keys[q->head + q->n++] = k;
        return 0;
}

char *workq_pop(workq *q) {
        char *k;

        if (q->n == 0)
                return NULL;
        k = q->keys[q->head++];
        q->n--;
        if (q->n == 0)
                q->head = 0;
        (void) tend_hashmap_remove(q->set, k);
        return k;
}

bool workq_empty(const workq *q) {
        return q->n == 0;
}

void workq_done(workq *q) {
        for (size_t i = 0; i < q->n; i++)
                free(q->keys[q->head + i]);
        free(q->keys);
        tend_hashmap_free(q->set);
        *q = (workq){};
}

int agent__split_key(const char *key, char **ret_ns, const char **ret_name) {
        const char *slash = strchr(key, '/');
        if (!slash)
                return -EINVAL;
        *ret_ns = strndup(key, (size_t) (slash - key));
        *ret_name = slash + 1;
        return *ret_ns ? 0 : -ENOMEM;
}

void agent__lost_key(agent *a) {
        if (!a->resync_at)
                a->resync_at = agent_now(a) + USEC_PER_SEC;
        if (!a->processing && a->wakeup)
                a->wakeup(a->wakeup_userdata);
}

void agent__enqueue(agent *a, store_kind kind, const char *ns, const char *name) {
        char key[512];

        snprintf(key, sizeof key, "%s/%s", ns, name);
        if (workq_add(&a->queues[kind], key) < 0) {
                agent__lost_key(a);
                return;
        }
        if (!a->processing && a->wakeup)
                a->wakeup(a->wakeup_userdata);
}

void agent__enqueue_at(agent *a, store_kind kind, const char *ns, const char *name, usec_t at) {
        char key[512];
        delayed *d;

        snprintf(key, sizeof key, "%s/%s", ns, name);
        d = tend_hashmap_get(a->delayed[kind], key);
        if (d) {
                d->at = MIN(d->at, at);
                return;
        }
        d = new0(delayed, 1);
        if (!d) {
                agent__lost_key(a);
                return;
        }
        d->at = at;
        d->kind = kind;
        if (tend_hashmap_put(a->delayed[kind], key, d, NULL) < 0) {
                free(d);
                agent__lost_key(a);
        }
}

void agent__enqueue_at_wall(agent *a, store_kind kind, const char *ns, const char *name,
                            usec_t wall) {
        usec_t now_wall = agent_wall(a), now = agent_now(a);
        agent__enqueue_at(a, kind, ns, name, wall > now_wall ? now + (wall - now_wall) : now);
}

/* Moves due delayed keys into their queues; returns the next deadline. */
usec_t agent__promote_delayed(agent *a) {
        usec_t now = agent_now(a), next = USEC_INFINITY;

        for (int k = 0; k < _STORE_KIND_MAX; k++) {
                _cleanup_strv_free_ char **due = NULL;
                const char *key;
                delayed *d;

                for (size_t i = 0; tend_hashmap_next(a->delayed[k], &i, &key, (void **) &d);) {
                        if (d->at <= now)
                                (void) strv_extend(&due, key);
                        else
                                next = MIN(next, d->at);
                }
                for (char **p = due; p && *p; p++) {
                        free(tend_hashmap_remove(a->delayed[k], *p));
                        (void) workq_add(&a->queues[k], *p);
                }
        }
        return next;
}

/* ---- lookups ------------------------------------------------------------------------ */

static const void *find_by_uid(agent *a, store_kind kind, const char *ns, const char *uid) {
        const void *const *items;
        size_t n = store_list(a->store, kind, &items);

        if (!uid)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                const spec_meta *m = &((const spec_deployment *) items[i])->metadata;
                if (streq_ptr(m->uid, uid) && streq_ptr(m->namespace, ns))
                        return items[i];
        }
        return NULL;
}

const spec_deployment *agent__deployment_by_uid(agent *a, const char *ns, const char *uid) {
        return find_by_uid(a, STORE_DEPLOYMENT, ns, uid);
}

const spec_replica_set *agent__replica_set_by_uid(agent *a, const char *ns, const char *uid) {
        return find_by_uid(a, STORE_REPLICA_SET, ns, uid);
}

/* ---- starts and events, after the commit -------------------------------------------------- */

static int push_uid(char ***v, size_t *n, size_t *alloc, const char *uid) {
        char *u;

        if (TEND_GROW(*v, *alloc, *n + 1) < 0 || !(u = strdup(uid)))
                return -ENOMEM;
        (*v)[(*n)++] = u;
        return 0;
}

int agent__queue_start(agent *a, const char *uid) {
        return push_uid(&a->starts, &a->n_starts, &a->alloc_starts, uid);
}

int agent__note_early(agent *a, const char *uid) {
        return push_uid(&a->early, &a->n_early, &a->alloc_early, uid);
}

static void pending_event_done(pending_event *e) {
        free(e->meta.namespace);
        free(e->meta.name);
        free(e->meta.uid);
        free(e->type);
        free(e->reason);
        free(e->message);
}

void agent__flush_events(agent *a) {
        for (size_t i = 0; i < a->n_events; i++) {
                pending_event *e = &a->events[i];
                (void) store_record_event(a->store, e->kind, &e->meta, e->type, e->reason,
                                          e->message, e->at);
                pending_event_done(e);
        }
        a->n_events = 0;
}

void agent__drop_events(agent *a) {
        for (size_t i = 0; i < a->n_events; i++)
                pending_event_done(&a->events[i]);
        a->n_events = 0;
}

int agent__event(agent *a, store_kind kind, const spec_meta *m, const char *type,
                 const char *reason, const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL;
        pending_event *e;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        log_debug("%s/%s: %s: %s", store_kind_to_string(kind), m->name, reason, msg);
        if (!a->processing)
                return store_record_event(a->store, kind, m, type, reason, msg, agent_wall(a));
        /* In a pass: written after its spawns (agent_process()). */
        if (TEND_GROW(a->events, a->alloc_events, a->n_events + 1) < 0)
                return -ENOMEM;
        e = &a->events[a->n_events];
        *e = (pending_event){
                .kind = kind,
                .meta = { .namespace = strdup(strempty(m->namespace)),
                          .name = strdup(strempty(m->name)),
                          .uid = m->uid ? strdup(m->uid) : NULL },
                .type = strdup(type),
                .reason = strdup(reason),
                .message = TAKE_PTR(msg),
                .at = agent_wall(a),
        };
        if (!e->meta.namespace || !e->meta.name || (m->uid && !e->meta.uid) || !e->type ||
            !e->reason) {
                pending_event_done(e);
                return -ENOMEM;
        }
        a->n_events++;
        return 0;
}
