/* SPDX-License-Identifier: MIT */

/*
 * A deployment's write in two parts (create, replace, patch, server-side
 * apply; docs/architecture.md §4.7). Its pure part (the body parsed, the
 * patch applied, decoding, defaults, validation, field ownership) runs in
 * libuv's thread pool against a copy of what is stored, while the loop
 * goes on: at the manifest limits that part costs hundreds of
 * milliseconds, and the loop's budget is 50 (issue 27). Then the commit,
 * on the loop: the agent's checks against the other deployments, the
 * store, the answer.
 *
 * The copy is optimistic, as kube-apiserver's GuaranteedUpdate is: when
 * the object changed while the pure part ran, that part runs again against
 * the new version (a request conditional on a resourceVersion then fails
 * its precondition, as it must), up to MAX_RUNS times.
 *
 * The pool works on a request of its own: the connection's query and
 * headers copied (no MHD call off the loop), its body moved, its answer
 * kept as an in-memory request's and sent from the loop. The connection
 * waits, suspended (api__wait). Should it go, or tendd stop, the work runs
 * out and is thrown away; the pool's part touches nothing of the server,
 * which may be gone by then.
 *
 * An in-memory request (api_server_answer) runs both parts at once.
 */

#include <inttypes.h>

#include "api-internal.h"

#define MAX_RUNS 8

struct prep {
        uv_work_t work;
        uv_loop_t *loop;
        api_server *s;
        req *r; /* NULL: the client went, or tendd stops */
        req wr; /* the pool's request: r's copy */
        bool running;
        api_write kind;
        char *ns, *name;      /* name NULL: a create (the body names it) */
        spec_deployment *old; /* a copy of what is stored; NULL: nothing */
        uint64_t old_rv;
        bool conditional; /* the request names a resourceVersion (a precondition) */
        unsigned runs;
        char *warning; /* r's before the pure part: each run starts from it */
        /* what the pure part made: the object to store and what storing
         * it is, errors found in it, or an answer */
        spec_deployment *d;
        agent_apply_result result;
        spec_errors errs;
        unsigned ok_code;
};

static void wr_reset(req *wr) {
        free(wr->direct_body);
        wr->direct_body = NULL;
        wr->direct_code = 0;
        wr->direct_type = NULL;
        free(wr->warning);
        wr->warning = NULL;
        wr->fields_tracked = false;
        wr->conditional = false;
}

static void kv_free(char **kv, size_t n) {
        for (size_t i = 0; i < 2 * n; i++)
                free(kv[i]);
        free(kv);
}

static void prep_free_now(void *p_) {
        prep *p = p_;

        wr_reset(&p->wr);
        tend_buf_free(&p->wr.body);
        kv_free(p->wr.copied_args, p->wr.n_copied_args);
        kv_free(p->wr.copied_headers, p->wr.n_copied_headers);
        spec_deployment_free(p->old);
        spec_deployment_free(p->d);
        spec_errors_done(&p->errs);
        free(p->warning);
        free(p->ns);
        free(p->name);
        free(p);
}

/* Freed in the pool: the copy of a large object is many blocks, and the
 * last reference to its managedFields' trees (the store has the next
 * version's) — milliseconds of the loop's time at the manifest limits. */
static void prep_free(prep *p) {
        if (p)
                api__in_pool(p->loop, prep_free_now, p);
}

/* ---- the copy of the request ---- */

typedef struct kv_copy {
        char **kv;
        size_t n, alloc;
        bool oom;
} kv_copy;

static enum MHD_Result copy_one(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value) {
        kv_copy *c = cls;

        (void) kind;
        if (c->n == c->alloc) {
                size_t alloc = c->alloc ? 2 * c->alloc : 8;
                char **kv = reallocarray(c->kv, 2 * alloc, sizeof(char *));
                if (!kv) {
                        c->oom = true;
                        return MHD_NO;
                }
                c->kv = kv;
                c->alloc = alloc;
        }
        /* (a bare ?name has no value: kept so, as MHD gives it) */
        c->kv[2 * c->n] = strdup(strempty(key));
        c->kv[2 * c->n + 1] = value ? strdup(value) : NULL;
        c->n++;
        if (!c->kv[2 * c->n - 2] || (value && !c->kv[2 * c->n - 1]))
                c->oom = true;
        return c->oom ? MHD_NO : MHD_YES;
}

static int copy_values(struct MHD_Connection *conn, enum MHD_ValueKind kind, char ***ret,
                       size_t *ret_n) {
        kv_copy c = {};

        (void) MHD_get_connection_values(conn, kind, copy_one, &c);
        *ret = c.kv;
        *ret_n = c.n;
        return c.oom ? -ENOMEM : 0;
}

/* ---- the two parts ---- */

/* What is stored now under the write's name (a create has none yet). */
static const spec_deployment *stored(prep *p) {
        return p->name ? store_get(p->s->store, STORE_DEPLOYMENT, p->ns, p->name) : NULL;
}

/* What is stored now, copied for the pure part. */
static int snapshot(prep *p) {
        const spec_deployment *now = stored(p);

        p->old = spec_deployment_free(p->old);
        p->old_rv = now ? now->metadata.resource_version : 0;
        if (now && !(p->old = spec_copy(&spec_type_deployment, now)))
                return -ENOMEM;
        return 0;
}

/* (a stored object's resourceVersion is never 0) */
static bool snapshot_stale(prep *p) {
        const spec_deployment *now = stored(p);

        return (now ? now->metadata.resource_version : 0) != p->old_rv;
}

/* When what changed since the copy is the status alone (the controllers'
 * writes, as pods start and become ready: often, during a rollout), the
 * pure part would make the same object but for its status and version,
 * which it takes from what is stored: those are taken now, rather than
 * the part made again. A request conditional on the version it named is
 * made again (and refused). -ESTALE: made again. */
static int rebase(prep *p) {
        const spec_deployment *now = stored(p);
        spec_deployment a, b, *copy;

        if (!now || !p->old || !p->d || p->conditional)
                return -ESTALE;
        a = *p->old, b = *now; /* shallow: only read */
        a.status = b.status = (spec_deployment_status){};
        a.metadata.resource_version = b.metadata.resource_version = 0;
        if (!spec_equal(&spec_type_deployment, &a, &b))
                return -ESTALE;
        copy = spec_deployment_copy(now);
        if (!copy)
                return -ENOMEM;
        spec_deployment_status st = p->d->status;
        p->d->status = copy->status;
        copy->status = st;
        spec_deployment_free(copy);
        p->d->metadata.resource_version = p->old_rv = now->metadata.resource_version;
        return 0;
}

/* kubectl rollout undo puts the ReplicaSet's annotations on the
 * Deployment, the controller's own among them (tend.io/complete, ...):
 * they belong to ReplicaSets, never to a Deployment, and are dropped. */
static void drop_replica_set_annotations(json_t *j) {
        json_t *ann = json_object_get(json_object_get(j, "metadata"), "annotations");
        size_t n;
        const spec_annotation *rows = spec_annotations(&n);

        for (size_t i = 0; json_is_object(ann) && i < n; i++)
                if (rows[i].writer == SPEC_ANN_BY_CONTROLLER &&
                    startswith(rows[i].key, SPEC_ANN_PREFIX) &&
                    (rows[i].where & SPEC_ANN_ON_REPLICA_SET) &&
                    !(rows[i].where & SPEC_ANN_ON_DEPLOYMENT))
                        (void) json_object_del(ann, rows[i].key);
}

/* PUT and PATCH: j (taken) replaces old, if its resourceVersion and uid
 * preconditions hold (a patch that names a resourceVersion is conditional
 * on it, as a PUT is). */
static spec_deployment *replacement(req *r, const spec_deployment *old, json_t *j, const char *ns,
                                    const char *name, enum MHD_Result *ret) {
        spec_deployment *d = NULL;

        if (api__preconditions_hold(r, api__resource(STORE_DEPLOYMENT), old,
                                    api__json_field(j, "metadata.uid"),
                                    api__json_field(j, "metadata.resourceVersion"), false, ret)) {
                drop_replica_set_annotations(j);
                d = api__decode_deployment(r, j, ns, name, ret);
        }
        json_decref(j);
        return d;
}

/* The end of the pure part: d (taken) is to be written, answered with
 * ok_code; or r has the answer. Made here, against the copy of what is
 * stored (the request's dryRun was checked before it was routed): its
 * managedFields, its validation as an update (errors kept, to be answered
 * with those of the commit's checks), and the object to store, with its
 * generation. */
static void made(prep *p, req *r, spec_deployment *d, unsigned ok_code) {
        enum MHD_Result ret;

        if (api__track_update(r, d, p->old, AGENT_APPLY_REPLACE, &ret) < 0) {
                spec_deployment_free(d);
                return;
        }
        if (p->old)
                (void) spec_deployment_validate_update(p->old, d, &p->errs);
        spec_deployment_free(p->d);
        p->d = agent_stored_form(d, p->old, AGENT_APPLY_REPLACE);
        spec_deployment_free(d);
        if (!p->d) {
                (void) api__send_oom(r);
                return;
        }
        p->result = agent_stored_generation(p->old, p->d);
        p->ok_code = ok_code;
}

/* The pure part, on r (the pool's copy, or an in-memory request), against
 * p->old: what to write in p->d, or an answer. */
static void run_pure(prep *p, req *r) {
        const spec_deployment *old = p->old;
        spec_deployment *d = NULL;
        unsigned ok_code = 200;
        enum MHD_Result ret;
        json_t *j = NULL, *cur;

        p->d = spec_deployment_free(p->d);
        spec_errors_done(&p->errs);
        switch (p->kind) {
        case API_WRITE_CREATE:
                j = api__body_object(r, &ret);
                d = j ? api__decode_deployment(r, j, p->ns, NULL, &ret) : NULL;
                json_decref(j);
                ok_code = 201;
                break;
        case API_WRITE_APPLY:
                d = api__server_side_apply(r, old, p->ns, p->name, &ok_code, &ret);
                break;
        case API_WRITE_REPLACE:
        case API_WRITE_PATCH:
                if (!old) {
                        (void) api__not_found(r, api__resource(STORE_DEPLOYMENT), p->name);
                        return;
                }
                if (p->kind == API_WRITE_REPLACE) {
                        j = api__body_object(r, &ret);
                        r->conditional = !isempty(api__json_field(j, "metadata.resourceVersion"));
                } else if ((cur = api__encode_obj(STORE_DEPLOYMENT, old))) {
                        /* (api__apply_patch says whether the patch names one) */
                        j = api__apply_patch(r, cur, &ret);
                        json_decref(cur);
                } else
                        (void) api__send_oom(r);
                d = j ? replacement(r, old, j, p->ns, p->name, &ret) : NULL;
                break;
        }
        if (d)
                made(p, r, d, ok_code);
}

/* The commit, on the loop: through agent_apply_prepared(); answers with
 * the stored object, or, for dryRun=All, with the object as it would be
 * stored (what kubectl diff compares), after the same checks. */
static enum MHD_Result commit(req *r, prep *p) {
        api_server *s = r->s;
        const spec_deployment *d = p->d;
        _cleanup_free_ char *ns = strdup(d->metadata.namespace), *name = strdup(d->metadata.name);
        enum MHD_Result ret;
        int dry_run = api__dry_run(r, NULL, &ret), rr;

        if (dry_run < 0)
                return ret;
        if (!ns || !name)
                return api__send_oom(r);
        /* (a create learns its name from the body: whether it is taken is
         * known only now) */
        if (p->kind == API_WRITE_CREATE && store_get(s->store, STORE_DEPLOYMENT, ns, name)) {
                json_t *details = json_pack("{s:s, s:s, s:s}", "name", name, "group", "apps",
                                            "kind", "deployments");
                _cleanup_free_ char *msg = strprintf("deployments.apps \"%s\" already exists",
                                                     name);
                return api__send_json(r, 409, api__status_json(409, "AlreadyExists", msg, details));
        }
        /* (in a fleet: a write that changes nothing here is acknowledged
         * only once what this node has of the object is etcd's) */
        if (!dry_run && s->fleet && s->fleet->touch)
                s->fleet->touch(s->fleet->userdata, STORE_DEPLOYMENT, ns, name);
        /* The answer is the object as the store wrote it: that text is
         * kept, rather than the object encoded again (on a single host:
         * a fleet's answer waits for etcd, as JSON). */
        s->written.want = !dry_run && !s->fleet;
        s->written.ns = ns, s->written.name = name;
        rr = agent_apply_prepared(s->agent, &p->d, p->result, dry_run ? AGENT_APPLY_DRY_RUN : 0,
                                  &p->errs);
        s->written.want = false;
        _cleanup_free_ char *written = TAKE_PTR(s->written.json);
        if (rr == -EINVAL)
                return api__send_invalid(r, "deployments.apps", "Deployment", name, &p->errs);
        if (rr < 0)
                return api__send_status(r, 500, NULL, "writing to the store: %s", strerror(-rr));
        if (!dry_run)
                agent_kick(s->agent);
        if (written) {
                char *body = api__line(TAKE_PTR(written));
                return body ? api__queue(r, p->ok_code, "application/json", body)
                            : api__send_oom(r);
        }
        d = dry_run ? p->d : store_get(s->store, STORE_DEPLOYMENT, ns, name);
        return api__send_json(r, p->ok_code,
                              d ? api__encode_obj(STORE_DEPLOYMENT, d) : json_object());
}

/* ---- in the pool ---- */

static void on_work(uv_work_t *w) {
        prep *p = w->data;

        wr_reset(&p->wr);
        p->wr.warning = p->warning ? strdup(p->warning) : NULL;
        run_pure(p, &p->wr);
        p->conditional = p->wr.conditional;
}

static void on_worked(uv_work_t *w, int status) {
        prep *p = w->data;

        (void) status;
        p->running = false;
        if (p->r)
                api__resume(p->r); /* api__write_resume() goes on */
        else
                prep_free(p);
}

/* api__wait()'s cancel: the client went, or tendd stops. */
static void on_cancel(void *userdata, void *req_) {
        prep *p = userdata;
        req *r = req_;

        r->prep = NULL;
        p->r = NULL;
        if (!p->running)
                prep_free(p);
}

/* The pure part (again) in the pool, against what is stored now. */
static enum MHD_Result run_in_pool(req *r, prep *p) {
        int k;

        if (snapshot(p) < 0)
                return api__send_oom(r);
        p->runs++;
        p->work.data = p;
        k = uv_queue_work(r->s->loop, &p->work, on_work, on_worked);
        if (k < 0)
                return api__send_status(r, 500, NULL, "queueing the write: %s", uv_strerror(k));
        p->running = true;
        return api__wait(r, on_cancel, p);
}

enum MHD_Result api__write_start(req *r, api_write kind, const char *ns, const char *name) {
        prep *p = new0(prep, 1);
        enum MHD_Result ret;

        if (!p || !(p->ns = strdup(ns)) || (name && !(p->name = strdup(name))) ||
            (r->warning && !(p->warning = strdup(r->warning)))) {
                prep_free(p);
                return api__send_oom(r);
        }
        p->s = r->s;
        p->loop = r->s->loop;
        p->kind = kind;
        p->r = r;
        r->prep = p;
        if (r->direct) { /* in memory: both parts now */
                if (snapshot(p) < 0)
                        ret = api__send_oom(r);
                else {
                        run_pure(p, r);
                        ret = p->d ? commit(r, p) : MHD_YES;
                }
                r->prep = NULL;
                prep_free(p);
                return ret;
        }
        /* (no server: it may be gone before the pool is done) */
        p->wr = (req){ .pooled = true, .prep = p, .method = r->method };
        if (copy_values(r->conn, MHD_GET_ARGUMENT_KIND, &p->wr.copied_args, &p->wr.n_copied_args) <
                    0 ||
            copy_values(r->conn, MHD_HEADER_KIND, &p->wr.copied_headers, &p->wr.n_copied_headers) <
                    0) {
                r->prep = NULL;
                prep_free(p);
                return api__send_oom(r);
        }
        p->wr.body = r->body;
        r->body = TEND_BUF_INIT(0);
        return run_in_pool(r, p);
}

enum MHD_Result api__write_resume(req *r) {
        prep *p = r->prep;
        enum MHD_Result ret;

        bool stale = snapshot_stale(p);

        if (stale && rebase(p) == 0) {
                r->s->writes_rebased++;
                stale = false;
        } else if (stale)
                r->s->writes_made_again++;
        if (stale && p->runs < MAX_RUNS)
                return run_in_pool(r, p);
        if (stale)
                ret = api__send_status(r, 409, "Conflict",
                                       "Operation cannot be fulfilled on deployments.apps \"%s\": "
                                       "the object changed %u times while the write was made; "
                                       "please try again",
                                       strna(p->name), p->runs);
        else {
                free(r->warning);
                r->warning = TAKE_PTR(p->wr.warning);
                ret = p->d ? commit(r, p)
                           : api__queue_kept(r, p->wr.direct_code ?: 500,
                                             p->wr.direct_type ?: "application/json",
                                             TAKE_PTR(p->wr.direct_body));
        }
        /* (the body back, for what api__on_completed does after a large one) */
        tend_buf_free(&r->body);
        r->body = p->wr.body;
        p->wr.body = TEND_BUF_INIT(0);
        r->prep = NULL;
        prep_free(p);
        return ret;
}

void api__write_forget(req *r) {
        prep *p = r->prep;

        if (!p)
                return;
        r->prep = NULL;
        p->r = NULL;
        if (!p->running)
                prep_free(p);
}
