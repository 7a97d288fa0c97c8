/* SPDX-License-Identifier: MIT */

/*
 * A write of an object a user writes (a Deployment, a ConfigMap: its
 * kind's row says) in two parts (create, replace, patch, server-side
 * apply; docs/architecture.md §4.7). Its pure part (the body parsed, the
 * patch applied, decoding, defaults, validation, field ownership) runs in
 * libuv's thread pool against a copy of what is stored, while the loop
 * goes on: at the manifest limits that part costs hundreds of
 * milliseconds, and the loop's budget is 50 (issue 27). Then the commit,
 * on the loop: the agent's checks against the other deployments, the
 * store, the answer (agent_write_prepared()).
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
 * A List (POST /apis/tend.io/v1/apply: `tend apply`) is many such
 * writes, of any kinds users write, all or nothing: its pure part runs once to read the items
 * (which names the objects to copy), then to make each against its copy,
 * and its commit writes them all or none.
 *
 * An in-memory request (api_server_answer) runs both parts at once.
 */

#include <inttypes.h>

#include "api-internal.h"

#define MAX_RUNS 8

/* One object of the write (a List has many). */
typedef struct item {
        const resource *res;
        char *ns, *name; /* name NULL: a create (the body names it) */
        void *old;       /* a copy of what is stored; NULL: nothing */
        uint64_t old_rv;
        /* a List's: the item as read, and whether it leaves replicas and
         * paused out (then, as kubectl apply, they keep their values) */
        void *decoded;
        bool keep_replicas, keep_paused;
        /* what the pure part made: the object to store and what storing it
         * is */
        void *d;
        agent_apply_result result;
} item;

static const spec_type *type_of(const item *it) {
        return it->res->row->type;
}

struct prep {
        uv_work_t work;
        uv_loop_t *loop;
        api_server *s;
        req *r; /* NULL: the client went, or tendd stops */
        req wr; /* the pool's request: r's copy */
        bool running;
        api_write kind;
        const resource *res; /* a List's: NULL (each item names its own) */
        item *items;
        size_t n_items;
        bool read;           /* a List: its items are known */
        bool made;           /* every item's d is made */
        bool conditional;    /* the request names a resourceVersion (a precondition) */
        const char *changed; /* the name of an item that changed meanwhile */
        unsigned runs; /* of the pure part that makes the objects (a List's reading is not one) */
        char *warning; /* r's before the pure part: each run starts from it */
        spec_errors errs; /* found in what the pure part made */
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

static void items_free(prep *p) {
        for (size_t i = 0; i < p->n_items; i++) {
                item *it = &p->items[i];
                free(it->ns);
                free(it->name);
                if (it->res) {
                        spec_free(type_of(it), it->old);
                        spec_free(type_of(it), it->decoded);
                        spec_free(type_of(it), it->d);
                }
        }
        free(p->items);
        p->items = NULL;
        p->n_items = 0;
}

static void prep_free_now(void *p_) {
        prep *p = p_;

        wr_reset(&p->wr);
        tend_buf_free(&p->wr.body);
        kv_free(p->wr.copied_args, p->wr.n_copied_args);
        kv_free(p->wr.copied_headers, p->wr.n_copied_headers);
        items_free(p);
        spec_errors_done(&p->errs);
        free(p->warning);
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

/* What is stored now under an item's name (a create has none yet). */
static const void *stored(prep *p, const item *it) {
        return it->name ? store_get(p->s->store, it->res->kind, it->ns, it->name) : NULL;
}

static uint64_t version_of(const void *obj) {
        return obj ? spec_object_meta(obj)->resource_version : 0;
}

/* What is stored now, copied for the pure part. */
static int snapshot(prep *p) {
        for (size_t i = 0; i < p->n_items; i++) {
                item *it = &p->items[i];
                const void *now = stored(p, it);

                it->old = spec_free(type_of(it), it->old);
                it->old_rv = version_of(now);
                if (now && !(it->old = spec_copy(type_of(it), now)))
                        return -ENOMEM;
        }
        return 0;
}

/* (a stored object's resourceVersion is never 0) */
static bool item_stale(prep *p, const item *it) {
        return version_of(stored(p, it)) != it->old_rv;
}

/* When what changed since the copy is the status alone (the controllers'
 * writes, as pods start and become ready: often, during a rollout), the
 * pure part would make the same object but for its status and version,
 * which it takes from what is stored: those are taken now, rather than
 * the part made again. A request conditional on the version it named is
 * made again (and refused). -ESTALE: made again. */
static int rebase(prep *p, item *it) {
        const spec_deployment *now = stored(p, it);
        spec_deployment a, b, *copy;

        /* (a kind without a status: any change is one to make again for) */
        if (it->res->kind != STORE_DEPLOYMENT || !now || !it->old || !it->d || p->conditional)
                return -ESTALE;
        a = *(const spec_deployment *) it->old, b = *now; /* shallow: only read */
        a.status = b.status = (spec_deployment_status){};
        a.metadata.resource_version = b.metadata.resource_version = 0;
        if (!spec_equal(&spec_type_deployment, &a, &b))
                return -ESTALE;
        copy = spec_deployment_copy(now);
        if (!copy)
                return -ENOMEM;
        spec_deployment *d = it->d;
        spec_deployment_status st = d->status;
        d->status = copy->status;
        copy->status = st;
        spec_deployment_free(copy);
        d->metadata.resource_version = it->old_rv = now->metadata.resource_version;
        return 0;
}

/* Whether what the pure part made is stale: an item changed meanwhile, and
 * more than its status. */
static bool stale(prep *p) {
        bool any = false;

        for (size_t i = 0; i < p->n_items; i++) {
                item *it = &p->items[i];
                if (!item_stale(p, it))
                        continue;
                if (p->made && rebase(p, it) == 0)
                        p->s->writes_rebased++;
                else {
                        any = true;
                        p->changed = it->name;
                }
        }
        if (any)
                p->s->writes_made_again++;
        return any;
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
static void *replacement(req *r, const item *it, json_t *j, enum MHD_Result *ret) {
        void *d = NULL;

        if (api__preconditions_hold(r, it->res, it->old, api__json_field(j, "metadata.uid"),
                                    api__json_field(j, "metadata.resourceVersion"), false, ret)) {
                if (it->res->kind == STORE_DEPLOYMENT)
                        drop_replica_set_annotations(j);
                d = api__decode_object(r, it->res, j, it->ns, it->name, ret);
        }
        json_decref(j);
        return d;
}

/* An item's end of the pure part: d (taken) is to be written. Made here,
 * against the copy of what is stored (the request's dryRun was checked
 * before it was routed): its managedFields, its validation as an update
 * (errors kept, to be answered with those of the commit's checks), and the
 * object to store, with its generation. false: r has the answer. */
static bool made(prep *p, req *r, item *it, void *d, unsigned apply_flags) {
        const spec_kind *row = it->res->row;
        enum MHD_Result ret;

        if (api__track_update(r, it->res, d, it->old, apply_flags, &ret) < 0) {
                spec_free(row->type, d);
                return false;
        }
        if (it->old && row->validate_update)
                (void) row->validate_update(it->old, d, &p->errs);
        spec_free(row->type, it->d);
        it->d = agent_object_stored_form(it->res->kind, d, it->old, apply_flags);
        spec_free(row->type, d);
        if (!it->d) {
                (void) api__send_oom(r);
                return false;
        }
        it->result = agent_object_generation(it->res->kind, it->old, it->d);
        return true;
}

/* ---- a List ---- */

/* A List's items as documents: JSON (what tend sends) is read as it is, up
 * to the body cap (the 1 MiB limit of a manifest file is per file, and a
 * directory is many files); YAML as a manifest is. */
static int list_docs(req *r, enum MHD_Result *ret, spec_docs *docs) {
        json_t *root, *items, *doc;
        json_error_t e;
        size_t i, n;

        root = r->body.len
                       ? json_loadb(tend_buf_str(&r->body), r->body.len, JSON_REJECT_DUPLICATES, &e)
                       : NULL;
        if (!root)
                return api__body_docs(r, ret, docs); /* YAML, or an error with its place */
        items = json_object_get(root, "items");
        if (!streq_ptr(json_string_value(json_object_get(root, "kind")), "List") ||
            !json_is_array(items))
                items = NULL;
        n = items ? json_array_size(items) : 1;
        docs->items = new0(spec_doc, n ?: 1);
        if (!docs->items) {
                json_decref(root);
                *ret = api__send_oom(r);
                return -ENOMEM;
        }
        if (!items)
                docs->items[docs->n++] = (spec_doc){ .root = json_incref(root),
                                                     .line = 1,
                                                     .index = 1 };
        else
                json_array_foreach (items, i, doc)
                        docs->items[docs->n++] = (spec_doc){ .root = json_incref(doc),
                                                             .line = 1,
                                                             .index = (unsigned) i + 1 };
        json_decref(root);
        return 0;
}

/* The pool's first run: the List's items read and decoded (each named,
 * for the copies of what is stored). false: r has the answer. */
static bool read_list(prep *p, req *r) {
        spec_docs docs = {};
        enum MHD_Result ret;
        bool ok = true;

        if (list_docs(r, &ret, &docs) < 0)
                return false;
        p->items = new0(item, docs.n ?: 1);
        if (!p->items) {
                spec_docs_done(&docs);
                (void) api__send_oom(r);
                return false;
        }
        for (size_t i = 0; ok && i < docs.n; i++) {
                json_t *root = docs.items[i].root, *spec = json_object_get(root, "spec");
                const char *ns = api__json_field(root, "metadata.namespace"),
                           *av = json_string_value(json_object_get(root, "apiVersion")),
                           *kind = json_string_value(json_object_get(root, "kind"));
                const resource *res = api__resource_written(av, kind);
                item *it = &p->items[p->n_items];

                if (!res) {
                        _cleanup_free_ char *which = api__resources_written();
                        (void) api__send_status(r, 400, "BadRequest",
                                                "item %zu of the list is a %s of %s: tend apply "
                                                "writes %s",
                                                i + 1, kind ?: "thing without a kind",
                                                av ?: "no apiVersion", strna(which));
                        ok = false;
                        break;
                }
                it->res = res;
                p->n_items++;
                it->decoded = api__decode_object(r, res, root, ns ?: "default", NULL, &ret);
                ok = it->decoded && (it->ns = strdup(spec_object_meta(it->decoded)->namespace)) &&
                     (it->name = strdup(spec_object_meta(it->decoded)->name));
                if (it->decoded && !ok)
                        (void) api__send_oom(r);
                it->keep_replicas = res->kind == STORE_DEPLOYMENT &&
                                    !json_object_get(spec, "replicas");
                it->keep_paused = res->kind == STORE_DEPLOYMENT && !json_object_get(spec, "paused");
        }
        spec_docs_done(&docs);
        return ok;
}

/* The pool's next runs: each item made against its copy. */
static bool make_list(prep *p, req *r) {
        for (size_t i = 0; i < p->n_items; i++) {
                item *it = &p->items[i];
                void *d = spec_copy(type_of(it), it->decoded);

                if (!d) {
                        (void) api__send_oom(r);
                        return false;
                }
                /* what tend apply leaves out (it sends only what the
                 * manifests declare) stays as stored */
                unsigned flags = (it->keep_replicas ? AGENT_APPLY_KEEP_REPLICAS : 0) |
                                 (it->keep_paused ? AGENT_APPLY_KEEP_PAUSED : 0);
                if (it->res->kind == STORE_DEPLOYMENT)
                        agent_apply_keep(d, it->old, flags);
                /* (its errors name it: a List's are answered together) */
                _cleanup_free_ char *label = spec_object_label(it->res->row->kind, it->name, 0);
                p->errs.object = label;
                bool ok = made(p, r, it, d, flags);
                p->errs.object = NULL;
                if (!ok)
                        return false;
        }
        return true;
}

/* ---- the pure part ---- */

/* The pure part, on r (the pool's copy, or an in-memory request), against
 * the items' copies: what to write in their d (p->made), or an answer. A
 * List's first run only reads it (p->read). */
static void run_pure(prep *p, req *r) {
        item *it = p->n_items ? &p->items[0] : NULL; /* (a List's first run has none) */
        void *d = NULL;
        enum MHD_Result ret;
        json_t *j = NULL, *cur;

        for (size_t i = 0; i < p->n_items; i++)
                p->items[i].d = spec_free(type_of(&p->items[i]), p->items[i].d);
        spec_errors_done(&p->errs);
        p->made = false;
        p->ok_code = 200;
        if (p->kind != API_WRITE_LIST || p->read)
                p->runs++;
        switch (p->kind) {
        case API_WRITE_LIST:
                if (!p->read)
                        p->read = read_list(p, r);
                else
                        p->made = make_list(p, r);
                return;
        case API_WRITE_CREATE:
                j = api__body_object(r, &ret);
                d = j ? api__decode_object(r, it->res, j, it->ns, NULL, &ret) : NULL;
                json_decref(j);
                p->ok_code = 201;
                break;
        case API_WRITE_APPLY:
                d = api__server_side_apply(r, it->res, it->old, it->ns, it->name, &p->ok_code,
                                           &ret);
                break;
        case API_WRITE_REPLACE:
        case API_WRITE_PATCH:
                if (!it->old) {
                        (void) api__not_found(r, it->res, it->name);
                        return;
                }
                if (p->kind == API_WRITE_REPLACE) {
                        j = api__body_object(r, &ret);
                        r->conditional = !isempty(api__json_field(j, "metadata.resourceVersion"));
                } else if ((cur = api__encode_obj(it->res->kind, it->old))) {
                        /* (api__apply_patch says whether the patch names one) */
                        j = api__apply_patch(r, cur, &ret);
                        json_decref(cur);
                } else
                        (void) api__send_oom(r);
                d = j ? replacement(r, it, j, &ret) : NULL;
                break;
        }
        if (d)
                p->made = made(p, r, it, d, AGENT_APPLY_REPLACE);
}

/* A change through the API to a deployment that a manifest file declares
 * is reverted at the next sync of the directory: say so (299, as
 * kube-apiserver's warnings, which kubectl prints). */
void api__warn_file_owned(req *r, const char *ns, const char *name) {
        const spec_deployment *d = store_get(r->s->store, STORE_DEPLOYMENT, ns, name);
        const char *src = d ? spec_map_get(&d->metadata.annotations, AGENT_ANN_SOURCE) : NULL;

        if (!src || r->warning)
                return;
        r->warning = strprintf("299 - \"deployment %s comes from %s: tendd puts it back as "
                               "the file says at the next sync; change the file instead\"",
                               name, src);
}

/* ---- the commit ---- */

/* The commit, on the loop: through agent_apply_prepared(); answers with
 * the stored object, or, for dryRun=All, with the object as it would be
 * stored (what kubectl diff compares), after the same checks. */
static enum MHD_Result commit(req *r, prep *p) {
        api_server *s = r->s;
        item *it = &p->items[0];
        const resource *res = it->res;
        const spec_meta *m = spec_object_meta(it->d);
        _cleanup_free_ char *ns = strdup(m->namespace), *name = strdup(m->name);
        enum MHD_Result ret;
        int dry_run = api__dry_run(r, NULL, &ret), rr;

        if (dry_run < 0)
                return ret;
        if (!ns || !name)
                return api__send_oom(r);
        /* (a create learns its name from the body: whether it is taken is
         * known only now) */
        if (p->kind == API_WRITE_CREATE && store_get(s->store, res->kind, ns, name)) {
                json_t *details = json_pack("{s:s, s:s, s:s}", "name", name, "group",
                                            res->row->group, "kind", res->row->plural);
                _cleanup_free_ char *msg = strprintf("%s \"%s\" already exists", res->qualified,
                                                     name);
                return api__send_json(r, 409, spec_status_json(409, "AlreadyExists", msg, details));
        }
        /* (in a fleet: a write that changes nothing here is acknowledged
         * only once what this node has of the object is etcd's) */
        if (!dry_run && s->fleet && s->fleet->touch)
                s->fleet->touch(s->fleet->userdata, res->kind, ns, name);
        /* The answer is the object as the store wrote it: that text is
         * kept, rather than the object encoded again (in a fleet it waits
         * for etcd, as that text). */
        s->written.want = !dry_run;
        s->written.ns = ns, s->written.name = name;
        {
                agent_write w = { .kind = res->kind, .obj = it->d, .result = it->result };
                rr = agent_write_prepared(s->agent, &w, 1, dry_run ? AGENT_APPLY_DRY_RUN : 0,
                                          &p->errs);
                it->d = w.obj; /* (NULL: taken) */
        }
        s->written.want = false;
        _cleanup_free_ char *written = TAKE_PTR(s->written.json);
        if (rr == -EINVAL)
                return api__send_invalid(r, res->kind_qualified, name, &p->errs);
        if (rr < 0)
                return api__send_status(r, 500, NULL, "writing to the store: %s", strerror(-rr));
        if (!dry_run)
                agent_kick(s->agent);
        if (written) {
                char *body = api__line(TAKE_PTR(written));
                return body ? api__send_text(r, p->ok_code, body) : api__send_oom(r);
        }
        const void *obj = dry_run ? it->d : store_get(s->store, res->kind, ns, name);
        return api__send_json(r, p->ok_code, obj ? api__encode_obj(res->kind, obj) : json_object());
}

/* A List's commit: all of it or nothing; answers with each object's
 * result, or 422 with every error. */
static enum MHD_Result commit_list(req *r, prep *p) {
        static const char *const words[] = { "created", "configured", "unchanged" };
        api_server *s = r->s;
        size_t n = p->n_items;
        _cleanup_free_ agent_write *w = new0(agent_write, n ?: 1);
        enum MHD_Result ret;
        int dry_run = api__dry_run(r, NULL, &ret), rr;
        json_t *answer;

        if (dry_run < 0)
                return ret;
        if (!w)
                return api__send_oom(r);
        for (size_t i = 0; i < n; i++) {
                item *it = &p->items[i];
                if (it->res->kind == STORE_DEPLOYMENT)
                        api__warn_file_owned(r, it->ns, it->name);
                if (!dry_run && s->fleet && s->fleet->touch)
                        s->fleet->touch(s->fleet->userdata, it->res->kind, it->ns, it->name);
                w[i] = (agent_write){ .kind = it->res->kind, .obj = it->d, .result = it->result };
        }
        rr = agent_write_prepared(s->agent, w, n, dry_run ? AGENT_APPLY_DRY_RUN : 0, &p->errs);
        for (size_t i = 0; i < n; i++)
                p->items[i].d = w[i].obj; /* (NULL: taken) */
        if (rr == -EINVAL) {
                _cleanup_buf_ tend_buf msg = TEND_BUF_INIT(1 << 20);
                json_t *causes = json_array();
                for (size_t k = 0; k < p->errs.n; k++) {
                        _cleanup_free_ char *line = spec_error_format(&p->errs.items[k]);
                        (void) tend_buf_addf(&msg, "%s%s", k ? "\n" : "", strna(line));
                        json_array_append_new(causes, api__cause_json(&p->errs.items[k]));
                }
                return api__send_json(r, 422,
                                      spec_status_json(422, "Invalid", tend_buf_str(&msg),
                                                       json_pack("{s:o}", "causes", causes)));
        }
        if (rr < 0)
                return api__send_status(r, 500, NULL, "writing to the store: %s", strerror(-rr));
        answer = json_array();
        for (size_t i = 0; answer && i < n; i++)
                json_array_append_new(answer, json_pack("{s:s, s:s, s:s, s:s}", "kind",
                                                        p->items[i].res->row->kind, "namespace",
                                                        p->items[i].ns, "name", p->items[i].name,
                                                        "result", words[w[i].result]));
        if (!dry_run)
                agent_kick(s->agent);
        return api__send_json(r, 200,
                              json_pack("{s:s, s:s, s:o}", "kind", "ApplyResult", "apiVersion",
                                        "tend.io/v1", "items", answer));
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
        p->work.data = p;
        k = uv_queue_work(r->s->loop, &p->work, on_work, on_worked);
        if (k < 0)
                return api__send_status(r, 500, NULL, "queueing the write: %s", uv_strerror(k));
        p->running = true;
        return api__wait(r, on_cancel, p);
}

/* Both parts at once, for an in-memory request. */
static enum MHD_Result run_here(req *r, prep *p) {
        if (snapshot(p) < 0)
                return api__send_oom(r);
        run_pure(p, r);
        if (p->kind == API_WRITE_LIST && p->read && p->runs == 0) {
                if (snapshot(p) < 0)
                        return api__send_oom(r);
                run_pure(p, r);
        }
        if (!p->made)
                return MHD_YES; /* (answered) */
        return p->kind == API_WRITE_LIST ? commit_list(r, p) : commit(r, p);
}

enum MHD_Result api__write_start(req *r, const resource *res, api_write kind, const char *ns,
                                 const char *name) {
        prep *p = new0(prep, 1);
        enum MHD_Result ret;

        if (!p || (r->warning && !(p->warning = strdup(r->warning)))) {
                prep_free(p);
                return api__send_oom(r);
        }
        p->s = r->s;
        p->loop = r->s->loop;
        p->kind = kind;
        p->res = res;
        p->r = r;
        r->prep = p;
        /* (a List learns its items from the body) */
        if (kind != API_WRITE_LIST) {
                p->items = new0(item, 1);
                if (p->items)
                        p->items[0].res = res;
                if (!p->items || !(p->items[0].ns = strdup(ns)) ||
                    (name && !(p->items[0].name = strdup(name)))) {
                        r->prep = NULL;
                        prep_free(p);
                        return api__send_oom(r);
                }
                p->n_items = 1;
        }
        if (r->direct) { /* in memory: both parts now */
                ret = run_here(r, p);
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
        bool again;

        /* (a List just read: now made against the copies of its objects) */
        if (p->kind == API_WRITE_LIST && p->read && p->runs == 0)
                return run_in_pool(r, p);
        /* (a List not read has no copies to be stale) */
        again = (p->kind != API_WRITE_LIST || p->read) && stale(p);
        if (again && p->runs < MAX_RUNS)
                return run_in_pool(r, p);
        if (again)
                ret = api__send_status(r, 409, "Conflict",
                                       "Operation cannot be fulfilled on %s \"%s\": the object "
                                       "changed %u times while the write was made; please try "
                                       "again",
                                       p->res ? p->res->qualified : "objects", strna(p->changed),
                                       p->runs);
        else {
                free(r->warning);
                r->warning = TAKE_PTR(p->wr.warning);
                ret = !p->made                    ? api__queue_kept(r, p->wr.direct_code ?: 500,
                                                 p->wr.direct_type ?: "application/json",
                                                                    TAKE_PTR(p->wr.direct_body))
                      : p->kind == API_WRITE_LIST ? commit_list(r, p)
                                                  : commit(r, p);
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
