/* SPDX-License-Identifier: MIT */

/* What one sync of a deployment (dctx, ctl-sync.h) writes back, for the
 * deployment controller and its rollout extensions alike. */

#include <stdarg.h>
#include <stdio.h>

#include "ctl-sync.h"

int64_t ctl__max_old_revision(const dctx *c) {
        int64_t max = 0;
        for (size_t i = 0; i < c->n; i++)
                if ((ssize_t) i != c->new_index)
                        max = MAX(max, spec_meta_revision(&c->rss[i]->metadata));
        return max;
}

void ctl__set_progressing(dctx *c, const char *status, const char *reason, const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        if (!msg)
                RET_GATHER(c->error, -ENOMEM);
        RET_GATHER(c->error,
                   plan_set_condition(&c->nd->status.conditions, &c->nd->status.n_conditions,
                                      "Progressing", status, reason, msg, c->now));
}

int ctl__set_rs_annotation(dctx *c, size_t i, const char *key, const char *value) {
        const spec_replica_set *rs = c->rss[i];
        _cleanup_(spec_replica_set_freep) spec_replica_set *n = NULL;
        const void *stored;
        int r;

        if (streq_ptr(spec_map_get(&rs->metadata.annotations, key), value))
                return 0;
        n = spec_replica_set_copy(rs);
        if (!n)
                return -ENOMEM;
        if (value) {
                r = spec_map_set(&n->metadata.annotations, key, value);
                if (r < 0)
                        return r;
        } else
                spec_map_remove(&n->metadata.annotations, key);
        r = store_put(c->a->store, STORE_REPLICA_SET, TAKE_PTR(n), &stored);
        if (r >= 0)
                c->rss[i] = stored;
        return r;
}
