/* SPDX-License-Identifier: MIT */

/*
 * tend.io/config-rollout (docs/config.md): a change of a ConfigMap
 * or a Secret that a deployment's template refers to is a new revision.
 *
 * Each revision runs with a snapshot of the configuration it was made
 * with: an immutable copy named <name>-<hash of its content>, as
 * kustomize's generated ConfigMaps are named, annotated tend.io/snapshot-of
 * and owned by the deployment. The controller works on the deployment's
 * template with every reference to a ConfigMap or a Secret that exists
 * replaced by its snapshot's name (agent__config_template()): a new content
 * is a new name, so a new template, a new ReplicaSet and a rollout like any
 * other — readiness-gated, with canaries and automatic rollback. A
 * ReplicaSet's template names its snapshots, so a rollback (which copies it
 * into the deployment) brings back the old content, and `rollout history
 * --revision=N` shows which configuration a revision ran with.
 *
 * A snapshot no ReplicaSet of its deployment names any more (its history
 * pruned) goes, and so do all of a deployment's when it goes.
 */

#include "agent-internal.h"

static bool is_snapshot(const spec_meta *m) {
        return spec_map_get(&m->annotations, SPEC_ANN_SNAPSHOT_OF);
}

static int copy_map(spec_map *to, const spec_map *from) {
        int r = 0;
        for (size_t i = 0; i < from->n; i++)
                RET_GATHER(r, spec_map_set(to, from->items[i].key, from->items[i].value));
        return r;
}

/* The snapshot of obj for deployment d, made unless it is there already
 * (its name is its content's hash): immutable, its content and labels. */
static int make_snapshot(agent *a, const spec_deployment *d, store_kind kind, const void *obj,
                         const char *name) {
        const spec_meta *from = spec_object_meta(obj);
        spec_config_map *cm = NULL;
        spec_secret *sec = NULL;
        spec_owner_ref *ref = calloc(1, sizeof *ref);
        spec_meta *m;
        int r = 0;

        if (store_get(a->store, kind, d->metadata.namespace, name)) {
                free(ref);
                return 0;
        }
        if (kind == STORE_SECRET) {
                const spec_secret *x = obj;
                sec = calloc(1, sizeof *sec);
                if (sec) {
                        m = &sec->metadata;
                        sec->immutable = true;
                        RET_GATHER(r, copy_map(&sec->data, &x->data));
                        RET_GATHER_PTR(r, sec->type = strdup(strempty(x->type)));
                        RET_GATHER_PTR(r, sec->api_version = strdup("v1"));
                        RET_GATHER_PTR(r, sec->kind = strdup("Secret"));
                }
        } else {
                const spec_config_map *x = obj;
                cm = calloc(1, sizeof *cm);
                if (cm) {
                        m = &cm->metadata;
                        cm->immutable = true;
                        RET_GATHER(r, copy_map(&cm->data, &x->data));
                        RET_GATHER(r, copy_map(&cm->binary_data, &x->binary_data));
                        RET_GATHER_PTR(r, cm->api_version = strdup("v1"));
                        RET_GATHER_PTR(r, cm->kind = strdup("ConfigMap"));
                }
        }
        if (!cm && !sec) {
                free(ref);
                return -ENOMEM;
        }
        m->deletion_grace_period_seconds = SPEC_UNSET64;
        m->creation_timestamp = agent_wall(a);
        RET_GATHER_PTR(r, m->name = strdup(name));
        RET_GATHER_PTR(r, m->namespace = strdup(d->metadata.namespace));
        RET_GATHER(r, copy_map(&m->labels, &from->labels));
        RET_GATHER(r, spec_map_set(&m->annotations, SPEC_ANN_SNAPSHOT_OF, from->name));
        RET_GATHER_PTR(r, ref);
        if (ref) {
                m->owner_references = ref;
                m->n_owner_references = 1;
                RET_GATHER_PTR(r, ref->api_version = strdup("apps/v1"));
                RET_GATHER_PTR(r, ref->kind = strdup("Deployment"));
                RET_GATHER_PTR(r, ref->name = strdup(d->metadata.name));
                RET_GATHER_PTR(r, ref->uid = strdup(d->metadata.uid));
                ref->controller = ref->block_owner_deletion = true;
        }
        if (r < 0) {
                if (sec)
                        spec_free(&spec_type_secret, sec);
                else
                        spec_free(&spec_type_config_map, cm);
                return r;
        }
        log_info("deployment/%s: %s/%s: a snapshot of %s for its revisions", d->metadata.name,
                 kind == STORE_SECRET ? "secret" : "configmap", name, from->name);
        return store_put(a->store, kind, sec ? (void *) sec : (void *) cm, NULL);
}

/* One reference (*name, of kind) replaced by its snapshot's name, the
 * snapshot made if make. A reference to what is missing, or to a snapshot
 * (a rolled-back template names them), stays. */
static int snapshot_ref(agent *a, const spec_deployment *d, store_kind kind, char **name,
                        bool make) {
        const char *ns = d->metadata.namespace ?: "default"; /* (an apply's, not yet defaulted) */
        const void *obj = *name ? store_get(a->store, kind, ns, *name) : NULL;
        char hash[SPEC_CONFIG_HASH_LEN + 1];
        char *snap;
        int r;

        if (!obj || is_snapshot(spec_object_meta(obj)))
                return 0;
        if (!spec_config_hash(store_kind_type(kind), obj, hash))
                return -ENOMEM;
        /* (a name is at most 253 characters: room for -<hash>) */
        snap = strprintf("%.*s-%s", (int) (253 - 1 - SPEC_CONFIG_HASH_LEN), *name, hash);
        if (!snap)
                return -ENOMEM;
        if (make && (r = make_snapshot(a, d, kind, obj, snap)) < 0) {
                free(snap);
                return r;
        }
        free(*name);
        *name = snap;
        return 0;
}

/* Every reference of t to a ConfigMap or a Secret, through fn, until it
 * returns other than 0. */
static int each_ref(spec_pod_template *t, int (*fn)(store_kind kind, char **name, void *userdata),
                    void *userdata) {
        int r = 0;

        for (size_t k = 0; k < t->spec.n_containers && r == 0; k++) {
                spec_container *c = &t->spec.containers[k];
                for (size_t i = 0; i < c->n_env_from && r == 0; i++) {
                        spec_env_from *f = &c->env_from[i];
                        if (f->config_map_ref)
                                r = fn(STORE_CONFIG_MAP, &f->config_map_ref->name, userdata);
                        if (f->secret_ref && r == 0)
                                r = fn(STORE_SECRET, &f->secret_ref->name, userdata);
                }
                for (size_t i = 0; i < c->n_env && r == 0; i++) {
                        spec_env_source *s = c->env[i].value_from;
                        if (s && s->config_map_key_ref)
                                r = fn(STORE_CONFIG_MAP, &s->config_map_key_ref->name, userdata);
                        if (s && s->secret_key_ref && r == 0)
                                r = fn(STORE_SECRET, &s->secret_key_ref->name, userdata);
                }
        }
        for (size_t i = 0; i < t->spec.n_volumes && r == 0; i++) {
                spec_volume *v = &t->spec.volumes[i];
                if (v->config_map)
                        r = fn(STORE_CONFIG_MAP, &v->config_map->name, userdata);
                if (v->secret && r == 0)
                        r = fn(STORE_SECRET, &v->secret->name, userdata);
        }
        return r;
}

typedef struct snap_ctx {
        agent *a;
        const spec_deployment *d;
        bool make;
} snap_ctx;

static int snap_one(store_kind kind, char **name, void *userdata) {
        snap_ctx *c = userdata;
        return snapshot_ref(c->a, c->d, kind, name, c->make);
}

int agent__config_template(agent *a, const spec_deployment *d, bool make, spec_pod_template **ret) {
        spec_pod_template *t;
        snap_ctx c = { .a = a, .d = d, .make = make };
        int r;

        *ret = NULL;
        if (!streq_ptr(spec_map_get(&d->metadata.annotations, SPEC_ANN_CONFIG_ROLLOUT), "true"))
                return 0;
        t = spec_pod_template_copy(&d->spec.template);
        if (!t)
                return -ENOMEM;
        r = each_ref(t, snap_one, &c);
        if (r < 0) {
                spec_pod_template_free(t);
                return r;
        }
        *ret = t;
        return 1;
}

typedef struct names_ctx {
        agent *a;
        const char *ns;
        char **items; /* "configmap/NAME", each once */
} names_ctx;

static int add_name(store_kind kind, char **name, void *userdata) {
        names_ctx *c = userdata;
        const void *obj = *name ? store_get(c->a->store, kind, c->ns, *name) : NULL;
        _cleanup_free_ char *item = NULL;

        if (!obj || !is_snapshot(spec_object_meta(obj)))
                return 0;
        item = strprintf("%s/%s", kind == STORE_SECRET ? "secret" : "configmap", *name);
        if (!item)
                return -ENOMEM;
        if (strv_contains(c->items, item))
                return 0; /* (a name twice: once) */
        return strv_extend(&c->items, item);
}

char *agent__config_names(agent *a, const char *ns, const spec_pod_template *t) {
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(64 * 1024);
        names_ctx c = { .a = a, .ns = ns };
        int r = each_ref((spec_pod_template *) t, add_name, &c);

        for (char **i = c.items; r >= 0 && i && *i; i++)
                r = tend_buf_addf(&b, "%s%s", i == c.items ? "" : ",", *i);
        strv_free(c.items);
        if (r < 0 || !tend_buf_str(&b))
                return NULL;
        return tend_buf_take(&b);
}

typedef struct ref_want {
        store_kind kind;
        const char *name;
} ref_want;

static int refers(store_kind kind, char **name, void *userdata) {
        const ref_want *want = userdata;
        return kind == want->kind && streq_ptr(*name, want->name);
}

bool agent__template_refers_to(const spec_pod_template *t, store_kind kind, const char *name) {
        ref_want want = { kind, name };
        /* (each_ref only reads through fn: the cast is safe) */
        return each_ref((spec_pod_template *) t, refers, &want) > 0;
}

/* ---- pruning ------------------------------------------------------------------------------ */

static bool named_by_rs(agent *a, const spec_meta *snap, store_kind kind, const char *owner_uid) {
        const void *const *items;
        size_t n = store_list(a->store, STORE_REPLICA_SET, &items);

        for (size_t i = 0; i < n; i++) {
                const spec_replica_set *rs = items[i];
                if (streq_ptr(rs->metadata.namespace, snap->namespace) &&
                    spec_meta_owned_by(&rs->metadata, owner_uid) &&
                    agent__template_refers_to(&rs->spec.template, kind, snap->name))
                        return true;
        }
        return false;
}

int agent__config_prune(agent *a, const char *ns, const char *owner_uid,
                        const spec_pod_template *keep) {
        static const store_kind kinds[] = { STORE_CONFIG_MAP, STORE_SECRET };

        for (size_t k = 0; k < ELEMENTSOF(kinds); k++) {
                const void *const *items;
                size_t n = store_list(a->store, kinds[k], &items);
                _cleanup_strv_free_ char **doomed = NULL;

                for (size_t i = 0; i < n; i++) {
                        const spec_meta *m = spec_object_meta(items[i]);
                        if (!streq_ptr(m->namespace, ns) || !is_snapshot(m) ||
                            !spec_meta_owned_by(m, owner_uid) ||
                            (keep && agent__template_refers_to(keep, kinds[k], m->name)) ||
                            named_by_rs(a, m, kinds[k], owner_uid))
                                continue;
                        if (strv_extend(&doomed, m->name) < 0)
                                return -ENOMEM;
                }
                /* (deleted after the walk: a delete changes the list) */
                for (char **name = doomed; name && *name; name++) {
                        int r = store_delete(a->store, kinds[k], ns, *name);
                        if (r < 0 && r != -ENOENT)
                                return r;
                        log_debug("%s/%s: a snapshot no revision names: deleted",
                                  kinds[k] == STORE_SECRET ? "secret" : "configmap", *name);
                }
        }
        return 0;
}
