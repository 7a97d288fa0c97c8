/* SPDX-License-Identifier: MIT */

/*
 * The HTTP API (tend/api.h): DELETE of one object and of a collection
 * (deletecollection: every object a selector picks, in one request).
 *
 * A dry run (?dryRun=All, or dryRun: ["All"] in the DeleteOptions) makes
 * every check the real delete makes and answers what it would answer —
 * the object with its deletionTimestamp where the real one answers so —
 * and changes nothing: no store write, no event, no process stopped
 * (docs/api.md, "A dry run changes nothing").
 */

#include <inttypes.h>

#include "api-internal.h"

typedef struct delete_opts {
        int64_t grace; /* -1: each pod's terminationGracePeriodSeconds */
        bool foreground;
        bool dry_run;
        json_t *body;         /* the DeleteOptions, if any */
        const char *uid, *rv; /* stated preconditions (borrowed from body) */
} delete_opts;

static void delete_opts_done(delete_opts *o) {
        json_decref(o->body);
        *o = (delete_opts){};
}

/*
 * DeleteOptions, from the body or the query: preconditions (uid,
 * resourceVersion: 409 if they do not hold), gracePeriodSeconds (pods),
 * propagationPolicy (Background and Foreground both cascade; Orphan is
 * refused — tend does not leave processes running unmanaged), dryRun.
 * Anything it cannot honour is an error, not ignored. -1: answered.
 */
static int delete_options_parse(req *r, const resource *res, delete_opts *o, enum MHD_Result *ret) {
        const char *policy = api__arg(r, "propagationPolicy"),
                   *q = api__arg(r, "gracePeriodSeconds");
        bool orphan = api__arg_true(r, "orphanDependents");
        json_t *pre, *g, *od;
        int dry;

        *o = (delete_opts){ .grace = -1 };
        if (r->body.len > 0) {
                o->body = api__body_json(r, ret);
                if (!o->body)
                        return -1;
                if (!json_is_object(o->body)) {
                        *ret = api__send_status(r, 400, "BadRequest",
                                                "the body of a DELETE is DeleteOptions, an object");
                        return -1;
                }
                if (json_is_string(json_object_get(o->body, "propagationPolicy")))
                        policy = json_string_value(json_object_get(o->body, "propagationPolicy"));
                od = json_object_get(o->body, "orphanDependents");
                if (json_is_true(od))
                        orphan = true;
                g = json_object_get(o->body, "gracePeriodSeconds");
                if (g && !json_is_integer(g) && !json_is_null(g)) {
                        *ret = api__send_status(r, 400, "BadRequest",
                                                "gracePeriodSeconds must be an integer");
                        return -1;
                }
                if (json_is_integer(g))
                        o->grace = json_integer_value(g);
                pre = json_object_get(o->body, "preconditions");
                o->uid = json_string_value(json_object_get(pre, "uid"));
                o->rv = json_string_value(json_object_get(pre, "resourceVersion"));
        }
        dry = api__dry_run(r, o->body, ret);
        if (dry < 0)
                return -1;
        o->dry_run = dry;
        if (q && (safe_atoi64(q, &o->grace) < 0 || o->grace < 0)) {
                *ret = api__send_status(r, 400, "BadRequest",
                                        "gracePeriodSeconds must be a non-negative integer");
                return -1;
        }
        if (o->grace < -1) {
                *ret = api__send_status(r, 422, "Invalid",
                                        "gracePeriodSeconds must not be negative");
                return -1;
        }
        if (orphan || (policy && streq(policy, "Orphan"))) {
                *ret = api__send_status(r, 422, "Invalid",
                                        "propagationPolicy Orphan is not supported: tend does not "
                                        "leave processes running unmanaged");
                return -1;
        }
        if (policy && !streq(policy, "Background") && !streq(policy, "Foreground")) {
                *ret = api__send_status(r, 422, "Invalid",
                                        "propagationPolicy must be Background or Foreground");
                return -1;
        }
        /* kubectl delete deploy --now (or --grace-period, --force): as on
         * the API server, the owner takes it, its pods keep their own. */
        if (o->grace >= 0 && (res->kind == STORE_DEPLOYMENT || res->kind == STORE_REPLICA_SET) &&
            !r->warning)
                r->warning = strprintf("299 - \"gracePeriodSeconds applies to pods: the pods of "
                                       "%s stop within their own terminationGracePeriodSeconds; "
                                       "delete a pod to shorten it\"",
                                       res->plural);
        o->foreground = streq_ptr(policy, "Foreground") && res->kind == STORE_DEPLOYMENT;
        return 0;
}

/* The same, and nothing to free when it fails (-1: answered). */
static int delete_options(req *r, const resource *res, delete_opts *o, enum MHD_Result *ret) {
        int k = delete_options_parse(r, res, o, ret);

        if (k < 0)
                delete_opts_done(o);
        return k;
}

/* What a dry run answers for obj: the object as the delete would leave it
 * (its deletionTimestamp set; a pod's deletionGracePeriodSeconds), as the
 * real delete answers a pod that is still stopping or a deployment
 * deleted in the foreground. NULL where the real delete answers a Status. */
static json_t *as_deleted(const resource *res, const void *obj, const delete_opts *o) {
        json_t *j, *m;
        char ts[TIMESTAMP_MAX];

        if (res->kind != STORE_POD && !o->foreground)
                return NULL;
        j = api__encode_obj(res->kind, obj);
        m = json_object_get(j, "metadata");
        if (!m)
                return j;
        if (!json_object_get(m, "deletionTimestamp")) {
                format_timestamp(ts, now_realtime() / USEC_PER_SEC * USEC_PER_SEC);
                (void) json_object_set_new(m, "deletionTimestamp", json_string(ts));
        }
        if (res->kind == STORE_POD) {
                const spec_pod *p = obj;
                int64_t grace = o->grace >= 0 ? o->grace : p->spec.termination_grace_period_seconds;
                json_t *had = json_object_get(m, "deletionGracePeriodSeconds");
                /* a second delete only shortens the grace period */
                if (!json_is_integer(had) || json_integer_value(had) > grace)
                        (void) json_object_set_new(m, "deletionGracePeriodSeconds",
                                                   json_integer(grace));
        }
        return j;
}

static json_t *deleted_status(const resource *res, const char *name, const char *uid) {
        return spec_status_json(200, "", NULL,
                                json_pack("{s:s, s:s, s:s, s:s}", "name", name, "group",
                                          res->row->group, "kind", res->plural, "uid", uid));
}

/* Deletes obj (or, dry, pretends to): *ret_answer is what the delete
 * answers (the object as it is now, or a Status). -1: answered. */
static int delete_one(req *r, const resource *res, const void *obj, const delete_opts *o,
                      json_t **ret_answer, enum MHD_Result *ret) {
        api_server *s = r->s;
        const spec_meta *m = spec_object_meta(obj);
        _cleanup_free_ char *ns = strdup(strempty(m->namespace)), *name = strdup(strempty(m->name)),
                            *uid = strdup(strempty(m->uid));
        int rr;

        if (!ns || !name || !uid) {
                *ret = api__send_oom(r);
                return -1;
        }
        if (!api__preconditions_hold(r, res, obj, o->uid, o->rv, true, ret))
                return -1;
        if (o->dry_run) {
                *ret_answer = as_deleted(res, obj, o) ?: deleted_status(res, name, uid);
                return 0;
        }
        switch (res->kind) {
        case STORE_DEPLOYMENT:
                rr = o->foreground ? agent_delete_deployment_foreground(s->agent, ns, name)
                                   : agent_delete_deployment(s->agent, ns, name);
                break;
        case STORE_POD:
                rr = agent_delete_pod(s->agent, ns, name, o->grace);
                break;
        case STORE_REPLICA_SET:
                rr = agent_delete_replica_set(s->agent, ns, name);
                break;
        default:
                rr = res->row->writes == SPEC_WRITES_STORED
                             ? agent_delete_object(s->agent, res->kind, ns, name)
                             : -EOPNOTSUPP;
        }
        if (rr < 0) {
                *ret = api__send_status(r, 500, NULL, "deleting %s \"%s\": %s", res->qualified,
                                        name, strerror(-rr));
                return -1;
        }
        /* A pod still stopping, or a deployment deleted in the foreground,
         * is answered with itself, its deletionTimestamp set, as the API
         * server does: kubectl delete then waits for that uid to go. */
        obj = res->kind == STORE_POD || o->foreground ? store_get(s->store, res->kind, ns, name)
                                                      : NULL;
        *ret_answer = obj ? api__encode_obj(res->kind, obj) : deleted_status(res, name, uid);
        return 0;
}

static enum MHD_Result refuse_events(req *r) {
        return api__send_status(r, 405, "MethodNotAllowed",
                                "events are deleted by tendd as they age");
}

enum MHD_Result api__handle_delete(req *r, const resource *res, const void *obj, const char *name) {
        enum MHD_Result ret;
        delete_opts o;
        json_t *answer = NULL;

        if (res->kind == STORE_EVENT)
                return refuse_events(r);
        if (!obj)
                return api__not_found(r, res, name);
        if (delete_options(r, res, &o, &ret) < 0)
                return ret;
        if (delete_one(r, res, obj, &o, &answer, &ret) < 0) {
                delete_opts_done(&o);
                return ret;
        }
        if (!o.dry_run)
                agent_kick(r->s->agent);
        delete_opts_done(&o);
        return api__send_json(r, 200, answer);
}

/*
 * DELETE on a collection: every object of the namespace that the label and
 * field selectors pick, each as a DELETE of it would (its preconditions
 * cannot be stated: they name one object). Answers the List of what was
 * deleted, each as it was before, as kube-apiserver does. One commit per
 * object, as the single delete makes it; a failure stops at that object
 * and says which.
 */
enum MHD_Result api__handle_delete_collection(req *r, const resource *res, const char *ns) {
        api_server *s = r->s;
        enum MHD_Result ret;
        delete_opts o;
        filter f;
        char *err = NULL;
        size_t n = 0;
        char rv[32];
        json_t *items, *answer;
        bool any = false;

        if (res->kind == STORE_EVENT)
                return refuse_events(r);
        if (!ns)
                return api__send_status(r, 405, "MethodNotAllowed",
                                        "delete a collection in a namespace: DELETE "
                                        "/%s/namespaces/NS/%s",
                                        res->prefix, res->plural);
        if (api__filter_parse(r, ns, res->qualified, &f, &err) < 0) {
                ret = api__send_status(r, 400, "BadRequest", "%s", err ?: "out of memory");
                free(err);
                api__filter_done(&f);
                return ret;
        }
        if (delete_options(r, res, &o, &ret) < 0) {
                api__filter_done(&f);
                return ret;
        }
        if (o.uid || o.rv) {
                delete_opts_done(&o);
                api__filter_done(&f);
                return api__send_status(r, 400, "BadRequest",
                                        "preconditions name one object: a delete of a "
                                        "collection cannot have them");
        }
        /* The names first: each delete changes the store under a walk. */
        _cleanup_free_ list_ref *refs = api__sorted_refs(s, res, &n);
        char **names = new0(char *, n + 1);
        items = json_array();
        if (!refs || !names || !items) {
                free(names);
                json_decref(items);
                delete_opts_done(&o);
                api__filter_done(&f);
                return api__send_oom(r);
        }
        for (size_t i = 0, k = 0; i < n; i++) {
                json_t *j = api__encode(res, refs[i].obj);
                if (j && api__filter_match(&f, j))
                        names[k++] = strdup(strempty(refs[i].name));
                json_decref(j);
        }
        ret = MHD_YES;
        for (size_t k = 0; names[k]; k++) {
                const void *obj = store_get(s->store, res->kind, ns, names[k]);
                json_t *one = NULL, *before;
                if (!obj)
                        continue; /* gone with another (a ReplicaSet's pods) */
                before = api__encode_obj(res->kind, obj);
                if (!before || delete_one(r, res, obj, &o, &one, &ret) < 0) {
                        if (!before)
                                ret = api__send_oom(r);
                        json_decref(before);
                        items = (json_decref(items), NULL);
                        break;
                }
                any = true;
                /* listed as it was before, as kube-apiserver lists them */
                json_decref(one);
                json_array_append_new(items, before);
        }
        strv_free(names);
        if (any && !o.dry_run)
                agent_kick(s->agent);
        delete_opts_done(&o);
        api__filter_done(&f);
        if (!items)
                return ret;
        snprintf(rv, sizeof rv, "%" PRIu64, store_resource_version(s->store));
        answer = json_pack("{s:s, s:s, s:{s:s}, s:o}", "kind", res->list_kind, "apiVersion",
                           res->api_version, "metadata", "resourceVersion", rv, "items", items);
        return api__send_json(r, 200, answer);
}
