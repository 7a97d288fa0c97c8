/* SPDX-License-Identifier: MIT */

/* The HTTP API (tend/api.h): the object handlers: list, get, create, replace, patch, delete, scale,
 * rollback, apply. */

#include <inttypes.h>

#include "api-internal.h"
#include "patch.h"

/* ---- handlers ---------------------------------------------------------------------------- */

enum MHD_Result api__handle_collection(req *r, const resource *res, const char *ns,
                                       const char *method) {
        filter f;
        char *err = NULL;
        enum MHD_Result ret;

        if (streq(method, "GET")) {
                page pg = {};
                int q = api__filter_parse(r, ns, res->qualified, &f, &err);
                if (q < 0) {
                        ret = api__send_status(r, 400, "BadRequest", "%s", err ?: "out of memory");
                        free(err);
                        api__filter_done(&f);
                        return ret;
                }
                if (api__arg_true(r, "watch"))
                        return api__start_watch(r, res, &f); /* takes f */
                q = api__page_parse(r, &pg, &err);
                if (q < 0) {
                        ret = q == -EINVAL   ? api__send_status(r, 400, "BadRequest", "%s", err)
                              : q == -ERANGE ? api__send_status(r, 410, "Expired", "%s", err)
                              : q == -EAGAIN ? api__send_rv_too_large(r, pg.too_large, pg.rv)
                                             : api__send_oom(r);
                        free(err);
                        api__page_done(&pg);
                        api__filter_done(&f);
                        return ret;
                }
                char *body = api__wants_table(r) ? api__table_body(r, res, &f, &pg)
                                                 : api__list_body(r->s, res, &f, &pg);
                api__page_done(&pg);
                api__filter_done(&f);
                if (!body)
                        return api__send_status(r, 500, NULL, "out of memory");
                return api__queue(r, 200, "application/json", body);
        }
        if (streq(method, "DELETE"))
                return api__handle_delete_collection(r, res, ns);
        if (streq(method, "POST")) {
                if (!ns)
                        return api__send_status(r, 405, NULL,
                                                "create in a namespace: POST "
                                                "/%s/namespaces/NS/%s",
                                                res->prefix, res->plural);
                if (res->row->writes == SPEC_WRITES_NONE)
                        return api__send_status(
                                r, 405, NULL, "%s are created by tendd itself; create a Deployment",
                                res->plural);
                return api__write_start(r, res, API_WRITE_CREATE, ns, NULL);
        }
        return api__send_status(r, 405, NULL, "%s is not allowed on %s", method, res->plural);
}

/* The Scale view of a Deployment or ReplicaSet, with the object's uid and
 * resourceVersion (a PUT of it is conditional on that version). */
static json_t *scale_json(store_kind kind, const void *obj) {
        const spec_meta *m;
        const spec_selector *sel;
        int32_t spec, status;
        char rv[32];
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(4096);

        if (kind == STORE_DEPLOYMENT) {
                const spec_deployment *d = obj;
                m = &d->metadata, spec = d->spec.replicas, status = d->status.replicas;
                sel = d->spec.selector;
        } else {
                const spec_replica_set *rs = obj;
                m = &rs->metadata, spec = rs->spec.replicas, status = rs->status.replicas;
                sel = rs->spec.selector;
        }
        snprintf(rv, sizeof rv, "%" PRIu64, m->resource_version);
        for (size_t i = 0; sel && i < sel->match_labels.n; i++)
                (void) tend_buf_addf(&b, "%s%s=%s", i ? "," : "", sel->match_labels.items[i].key,
                                     sel->match_labels.items[i].value);
        return json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:s}, s:{s:i}, s:{s:i, s:s}}", "kind",
                         "Scale", "apiVersion", "autoscaling/v1", "metadata", "name", m->name,
                         "namespace", m->namespace, "uid", strempty(m->uid), "resourceVersion", rv,
                         "spec", "replicas", spec, "status", "replicas", status, "selector",
                         tend_buf_str(&b));
}

/* Those of an object written back (PUT, PATCH, a Scale). */
static bool object_preconditions_hold(req *r, const resource *res, const void *obj, json_t *j,
                                      enum MHD_Result *ret) {
        return api__preconditions_hold(r, res, obj, api__json_field(j, "metadata.uid"),
                                       api__json_field(j, "metadata.resourceVersion"), false, ret);
}

static enum MHD_Result handle_scale(req *r, const resource *res, const char *ns, const char *name,
                                    const char *method) {
        api_server *s = r->s;
        const void *obj = store_get(s->store, res->kind, ns, name);
        enum MHD_Result ret;
        json_t *cur, *patched = NULL;
        int64_t want;
        int rr, dry_run;

        if (!obj)
                return api__not_found(r, res, name);
        cur = scale_json(res->kind, obj);
        if (streq(method, "GET"))
                return api__send_json(r, 200, cur);
        if (!streq(method, "PUT") && !streq(method, "PATCH")) {
                json_decref(cur);
                return api__send_status(r, 405, NULL, "%s is not allowed on %s/scale", method,
                                        res->plural);
        }
        dry_run = api__dry_run(r, NULL, &ret);
        if (dry_run < 0) {
                json_decref(cur);
                return ret;
        }
        patched = streq(method, "PATCH") ? api__apply_patch(r, cur, &ret)
                                         : api__body_object(r, &ret);
        json_decref(cur);
        if (!patched)
                return ret;
        /* Conditional on the version it names, as a PUT of the object. */
        if (!object_preconditions_hold(r, res, obj, patched, &ret)) {
                json_decref(patched);
                return ret;
        }
        json_t *rj = json_object_get(json_object_get(patched, "spec"), "replicas");
        if (!json_is_integer(rj) || (want = json_integer_value(rj)) < 0 || want > INT32_MAX) {
                spec_errors errs = {};
                _cleanup_free_ char *given = rj ? json_dumps(rj, JSON_ENCODE_ANY) : NULL;
                if (!rj)
                        (void) spec_errors_add(&errs, "spec.replicas", "Required value");
                else
                        (void) spec_errors_add(&errs, "spec.replicas",
                                               "Invalid value: %s: must be an integer from 0 to "
                                               "2147483647",
                                               strna(given));
                json_decref(patched);
                ret = api__send_invalid(r, "Scale.autoscaling", name, &errs);
                spec_errors_done(&errs);
                return ret;
        }
        json_decref(patched);
        /* spec.replicas becomes the scaler's (an Update of the scale
         * subresource), as on the API server. */
        _cleanup_(json_decrefp)
                json_t *managed = res->kind == STORE_DEPLOYMENT
                                          ? api__track_scale(r, obj, (int32_t) want, &ret)
                                          : NULL;
        if (res->kind == STORE_DEPLOYMENT && !managed)
                return ret;
        if (dry_run) {
                /* the Scale as the write would answer it, the object as it is */
                cur = scale_json(res->kind, obj);
                if (cur && json_object_set_new(json_object_get(cur, "spec"), "replicas",
                                               json_integer(want)) < 0)
                        cur = (json_decref(cur), NULL);
                return api__send_json(r, 200, cur);
        }
        rr = res->kind == STORE_DEPLOYMENT
                     ? agent_scale_deployment_managed(s->agent, ns, name, (int32_t) want, managed)
                     : agent_scale_replica_set(s->agent, ns, name, (int32_t) want);
        if (rr < 0)
                return api__send_status(r, 500, NULL, "scaling: %s", strerror(-rr));
        agent_kick(s->agent);
        /* As stored now: the new resourceVersion. */
        obj = store_get(s->store, res->kind, ns, name);
        if (!obj)
                return api__not_found(r, res, name);
        return api__send_json(r, 200, scale_json(res->kind, obj));
}

static enum MHD_Result handle_rollback(req *r, const char *ns, const char *name) {
        api_server *s = r->s;
        enum MHD_Result ret;
        int rr, dry_run = api__dry_run(r, NULL, &ret);
        json_t *body, *to;
        int64_t rev = 0, done = 0;
        char *err = NULL;

        if (dry_run < 0)
                return ret;
        body = r->body.len ? api__body_object(r, &ret) : json_object();
        if (!body)
                return ret;
        /* {"toRevision": N} or the old DeploymentRollback {"rollbackTo": {"revision": N}} */
        to = json_object_get(body, "toRevision");
        if (!to)
                to = json_object_get(json_object_get(body, "rollbackTo"), "revision");
        if (to && !json_is_integer(to)) {
                json_decref(body);
                return api__send_status(r, 400, "BadRequest", "toRevision must be an integer");
        }
        rev = to ? json_integer_value(to) : 0;
        json_decref(body);
        if (!store_get(s->store, STORE_DEPLOYMENT, ns, name))
                return api__not_found(r, api__resource(STORE_DEPLOYMENT), name);
        rr = agent_rollback(s->agent, ns, name, rev, dry_run, &done, &err);
        if (rr == -EALREADY) {
                /* kubectl: "deployment.apps/web skipped rollback (...)" */
                _cleanup_free_ char *msg = strprintf("deployment.apps/%s %s", name, strna(err));
                ret = api__send_json(
                        r, 200,
                        spec_status_json(200, "", msg,
                                         json_pack("{s:I}", "revision", (json_int_t) done)));
                free(err);
                return ret;
        }
        if (rr < 0) {
                unsigned code = rr == -EBUSY ? 409 : rr == -ENOENT || rr == -EINVAL ? 400 : 500;
                ret = api__send_status(r, code, NULL, "%s", err ?: strerror(-rr));
                free(err);
                return ret;
        }
        if (!dry_run)
                agent_kick(s->agent);
        _cleanup_free_ char *msg = strprintf("deployment.apps/%s rolled back", name);
        return api__send_json(r, 200,
                              spec_status_json(200, "", msg,
                                               json_pack("{s:s, s:I}", "name", name, "revision",
                                                         (json_int_t) done)));
}

/* What a pod of tend cannot do, said as such (a 404 reads as "no such
 * pod"): 405 with the reason and what to do instead. */
static enum MHD_Result pod_unsupported(req *r, const char *sub) {
        static const struct {
                const char *sub, *why;
        } table[] = {
                { "exec", "exec is not supported: a tend pod is a host process, not a container; "
                          "its pid is in status.containerStatuses[0].containerID (process://PID), "
                          "run commands on the host (nsenter -t PID for its namespaces)" },
                { "attach", "attach is not supported: a tend pod is a host process; its output "
                            "is in kubectl logs -f" },
                { "portforward", "port-forward is not needed: a tend pod listens on the host "
                                 "itself; its leased ports are in its tend.io/ports annotation" },
                { "proxy", "proxy is not supported: a tend pod listens on the host itself" },
                { "ephemeralcontainers", "ephemeral containers are not supported: a tend pod is "
                                         "a host process, not a container" },
                { "eviction", "eviction is not supported: delete the pod (kubectl delete pod) "
                              "and its ReplicaSet replaces it" },
                { "binding", "binding is not supported: tendd runs every pod on its own host" },
        };

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (streq(sub, table[i].sub))
                        return api__send_status(r, 405, "MethodNotAllowed", "%s", table[i].why);
        return api__send_status(r, 404, "NotFound", "pods have no subresource %s", sub);
}

enum MHD_Result api__handle_object(req *r, const resource *res, const char *ns, const char *name,
                                   const char *sub, const char *method) {
        api_server *s = r->s;
        const void *obj = store_get(s->store, res->kind, ns, name);

        if (sub) {
                if (streq(sub, "scale") &&
                    (res->kind == STORE_DEPLOYMENT || res->kind == STORE_REPLICA_SET))
                        return handle_scale(r, res, ns, name, method);
                if (streq(sub, "rollback") && res->kind == STORE_DEPLOYMENT &&
                    streq(method, "POST"))
                        return handle_rollback(r, ns, name);
                if (streq(sub, "log") && res->kind == STORE_POD && streq(method, "GET"))
                        return api__handle_logs(r, ns, name);
                if (streq(sub, "status") && res->kind != STORE_EVENT &&
                    res->row->writes != SPEC_WRITES_STORED) {
                        if (!streq(method, "GET"))
                                return api__send_status(r, 405, NULL,
                                                        "status is written by tendd's controllers");
                        return obj ? api__send_json(r, 200, api__encode(res, obj))
                                   : api__not_found(r, res, name);
                }
                if (res->kind == STORE_POD)
                        return pod_unsupported(r, sub);
                return api__send_status(r, 404, "NotFound",
                                        "the server could not find the requested "
                                        "resource");
        }

        if (streq(method, "GET"))
                return !obj                  ? api__not_found(r, res, name)
                       : api__wants_table(r) ? api__send_json(r, 200, api__table_of(r, res, obj))
                                             : api__send_json(r, 200, api__encode(res, obj));

        if (streq(method, "DELETE"))
                return api__handle_delete(r, res, obj, name);

        bool apply = streq(method, "PATCH") &&
                     startswith(strempty(api__header(r, MHD_HTTP_HEADER_CONTENT_TYPE)),
                                "application/apply-patch+yaml");
        if (res->row->writes == SPEC_WRITES_NONE && apply)
                return api__send_status(r, 405, NULL,
                                        "server-side apply of %s is refused: tendd makes them "
                                        "from Deployments (apply a Deployment; scale a "
                                        "ReplicaSet through /scale)",
                                        res->plural);
        if (res->row->writes == SPEC_WRITES_NONE)
                return api__send_status(r, 405, NULL,
                                        "%s is not allowed on %s: tendd manages them "
                                        "(scale ReplicaSets through /scale)",
                                        method, res->plural);
        if (apply)
                return api__write_start(r, res, API_WRITE_APPLY, ns, name);
        if (!obj)
                return api__not_found(r, res, name);
        if (streq(method, "PUT") || streq(method, "PATCH"))
                return api__write_start(r, res,
                                        streq(method, "PUT") ? API_WRITE_REPLACE : API_WRITE_PATCH,
                                        ns, name);
        return api__send_status(r, 405, NULL, "%s is not allowed here", method);
}

/* ---- apply: many objects, all or nothing ------------------------------------------------- */

/*
 * POST /apis/tend.io/v1/apply with a List of Deployments: what `tend apply`
 * sends, so that a file or directory of several objects is applied all or
 * nothing (one durable commit). Made as the writes of one deployment are,
 * off the loop (api/prep.c). Answers with each object's result, or 422
 * with every error.
 */
enum MHD_Result api__handle_apply(req *r) {
        enum MHD_Result ret;

        if (api__dry_run(r, NULL, &ret) < 0)
                return ret;
        return api__write_start(r, NULL, API_WRITE_LIST, NULL, NULL);
}
