/* SPDX-License-Identifier: MIT */

/* The HTTP API (tend/api.h): the resources, routing and discovery. */

#include "api-internal.h"

/* ---- resources ------------------------------------------------------------------------------ */

/* ---- discovery --------------------------------------------------------------------------------
 */

/* /api: the core group's versions, and where clients reach the server
 * (the HTTPS listener; none over the local socket alone). */
static json_t *api_versions(api_server *s) {
        const char *hostport = s->listen_url ? startswith(s->listen_url, "https://") : NULL;
        json_t *addrs = json_array();

        if (addrs && hostport &&
            json_array_append_new(addrs, json_pack("{s:s, s:s}", "clientCIDR", "0.0.0.0/0",
                                                   "serverAddress", hostport)) < 0)
                addrs = (json_decref(addrs), NULL);
        return addrs ? json_pack("{s:s, s:[s], s:o}", "kind", "APIVersions", "versions", "v1",
                                 "serverAddressByClientCIDRs", addrs)
                     : NULL;
}

#if defined(__clang__)
#define API_COMPILER "clang"
#else
#define API_COMPILER "gcc"
#endif

#define API_K8S_MAJOR "1"
#define API_K8S_MINOR "32"

/* A kubeconfig for the HTTPS listener: its URL, the CA that signed its
 * certificate (none for a user's certificate: the system's CAs then) and
 * the token. Over the local socket only — whoever may use it may use the
 * API anyway; over TCP it would hand the token to whoever has it already,
 * or to nobody. */
static enum MHD_Result handle_kubeconfig(req *r, const char *method) {
        _cleanup_free_ char *ca = NULL;
        json_t *cluster;

        if (!streq(method, "GET"))
                return api__send_status(r, 405, "MethodNotAllowed", "GET the kubeconfig");
        if (r->slot->tcp)
                return api__send_status(r, 403, "Forbidden",
                                        "the kubeconfig is given over the local socket only "
                                        "(tend kubeconfig, on the host)");
        if (!r->s->listen_url)
                return api__send_status(r, 404, "NotFound",
                                        "tendd serves no HTTPS listener: start it with --listen "
                                        "127.0.0.1:PORT, then ask again");
        if (r->s->tls.ca_pem) {
                ca = api__base64(r->s->tls.ca_pem, strlen(r->s->tls.ca_pem));
                if (!ca)
                        return api__send_oom(r);
        }
        cluster = json_pack("{s:s}", "server", r->s->listen_url);
        if (cluster && ca &&
            json_object_set_new(cluster, "certificate-authority-data", json_string(ca)) < 0)
                cluster = (json_decref(cluster), NULL);
        return api__send_json(r, 200,
                              cluster ? json_pack("{s:s, s:s, s:[{s:s, s:o}], s:[{s:s, s:{s:s}}], "
                                                  "s:[{s:s, s:{s:s, s:s, s:s}}], s:s, s:{}}",
                                                  "apiVersion", "v1", "kind", "Config", "clusters",
                                                  "name", "tend", "cluster", cluster, "users",
                                                  "name", "tend", "user", "token", r->s->token,
                                                  "contexts", "name", "tend", "context", "cluster",
                                                  "tend", "user", "tend", "namespace", "default",
                                                  "current-context", "tend", "preferences")
                                      : NULL);
}

/* ---- routing --------------------------------------------------------------------------------- */

static enum MHD_Result route(req *r, const char *url, const char *method) {
        _cleanup_free_ char *copy = strdup(url);
        char *seg[8], *save = NULL;
        size_t n = 0;

        enum MHD_Result ret;

        if (r->prep) /* back from the pool (prep.c) */
                return api__write_resume(r);
        if (!copy)
                return MHD_NO;
        if (api__check_params(r, &ret) < 0)
                return ret;
        for (char *t = strtok_r(copy, "/", &save); t && n < ELEMENTSOF(seg);
             t = strtok_r(NULL, "/", &save))
                seg[n++] = t;

        if (n == 1 && (streq(seg[0], "healthz") || streq(seg[0], "livez")))
                return api__queue(r, 200, "text/plain", strdup("ok"));
        if (n == 1 && streq(seg[0], "readyz"))
                return api__queue(r, 200, "text/plain", strdup("ok"));
        /* The Kubernetes API level tend follows (kubectl checks its skew
         * against it), tend's own version beside it. */
        if (n == 1 && streq(seg[0], "version"))
                return api__send_json(
                        r, 200,
                        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}",
                                  "major", API_K8S_MAJOR, "minor", API_K8S_MINOR, "gitVersion",
                                  "v" API_K8S_MAJOR "." API_K8S_MINOR ".0+tend-" TEND_VERSION,
                                  "gitCommit", TEND_GIT_COMMIT, "gitTreeState", TEND_GIT_TREE,
                                  "buildDate", TEND_GIT_DATE,
                                  /* no Go in tend: the field is required, and empty */
                                  "goVersion", "", "compiler", API_COMPILER, "platform",
                                  "linux/" API_ARCH, "implementation", "tendd", "tendVersion",
                                  TEND_VERSION));
        if (n >= 1 && streq(seg[0], "openapi"))
                return api__handle_openapi(r, seg + 1, n - 1);
        if (n == 1 && streq(seg[0], "metrics"))
                return api__handle_metrics(r);
        if (n == 1 && streq(seg[0], "api"))
                return api__send_json(r, 200, api_versions(r->s));
        if (n == 1 && streq(seg[0], "apis"))
                return api__send_json(r, 200, api__group_list());
        if (n >= 3 && streq(seg[0], "apis") && streq(seg[1], "metrics.k8s.io") &&
            streq(seg[2], "v1beta1")) {
                if (!streq(method, "GET"))
                        return api__send_status(r, 405, "MethodNotAllowed",
                                                "metrics are read-only");
                return api__handle_usage(r, seg + 3, n - 3);
        }
        if (n >= 2 && streq(seg[0], "apis") && streq(seg[1], "autoscaling"))
                return api__send_status(r, 405, "MethodNotAllowed",
                                        "tend has no autoscaler: scale a deployment with kubectl "
                                        "scale (tend scale), or let a canary rollout "
                                        "(tend.io/canary) pace it");
        if (n == 4 && streq(seg[0], "apis") && streq(seg[1], "tend.io") && streq(seg[2], "v1") &&
            streq(seg[3], "kubeconfig"))
                return handle_kubeconfig(r, method);
        if (n == 4 && streq(seg[0], "apis") && streq(seg[1], "tend.io") && streq(seg[2], "v1") &&
            streq(seg[3], "apply"))
                return streq(method, "POST")
                               ? api__handle_apply(r)
                               : api__send_status(r, 405, NULL, "POST a List to apply");

        if (n == 7 && streq(seg[0], "apis") && streq(seg[1], "coordination.k8s.io") &&
            streq(seg[2], "v1") && streq(seg[3], "namespaces") && streq(seg[5], "leases"))
                return api__handle_node_lease(r, seg[4], seg[6], method);

        /* /api/v1/... and /apis/GROUP/VERSION/... */
        size_t base;
        const char *group, *version;
        _cleanup_free_ char *prefix = NULL;
        if (n >= 2 && streq(seg[0], "api") && streq(seg[1], "v1"))
                base = 2, group = "", version = "v1";
        else if (n >= 3 && streq(seg[0], "apis"))
                base = 3, group = seg[1], version = seg[2];
        else
                return api__send_status(r, 404, "NotFound",
                                        "the server could not find the requested resource");
        if (n == base) {
                json_t *list = api__resource_list(group, version);
                return list ? api__send_json(r, 200, list)
                            : api__send_status(r, 404, "NotFound",
                                               "the server could not find the requested "
                                               "resource");
        }

        const char *ns = NULL;
        size_t i = base;
        if (n >= i + 2 && streq(seg[i], "namespaces") && *group == 0) {
                ns = seg[i + 1];
                i += 2;
                if (i == n) /* the namespace itself */
                        return api__handle_namespaces(r, ns, method);
        } else if (n >= i + 2 && streq(seg[i], "namespaces")) {
                ns = seg[i + 1];
                i += 2;
        }
        if (i >= n)
                return api__send_status(r, 404, "NotFound",
                                        "the server could not find the requested resource");
        if (*group == 0 && !ns && streq(seg[i], "namespaces"))
                return api__handle_namespaces(r, NULL, method);
        if (*group == 0 && !ns && streq(seg[i], "nodes") && n - i <= 2)
                return api__handle_nodes(r, i + 1 < n ? seg[i + 1] : NULL, method);

        const spec_kind *k = spec_kind_find(group, version, seg[i]);
        if (k && k->absent)
                return n - i <= 2
                               ? api__handle_absent(r, k, ns, i + 1 < n ? seg[i + 1] : NULL, method)
                               : api__send_status(r, 405, "MethodNotAllowed", "%s", k->absent);
        if (k && startswith(k->kind, "SelfSubject") && i + 1 == n)
                return api__handle_review(r, k, method);

        prefix = *group ? strprintf("apis/%s/%s", group, version) : strdup("api/v1");
        if (!prefix)
                return api__send_oom(r);
        const resource *res = api__resource_at(prefix, seg[i]);
        if (!res)
                return api__send_status(r, 404, "NotFound",
                                        "the server could not find the requested resource");
        if (i + 1 == n)
                return api__handle_collection(r, res, ns, method);
        if (!ns)
                return api__send_status(r, 404, "NotFound",
                                        "name a namespace: /%s/namespaces/NS/%s/NAME", prefix,
                                        res->plural);
        if (res->kind == STORE_DEPLOYMENT && !streq(method, "GET"))
                api__warn_file_owned(r, ns, seg[i + 1]);
        return api__handle_object(r, res, ns, seg[i + 1], i + 2 < n ? seg[i + 2] : NULL, method);
}

enum MHD_Result api__on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                const char *method, const char *version, const char *upload,
                                size_t *upload_size, void **con_cls) {
        slot *sl = cls;
        req *r = *con_cls;

        if (!r) {
                /* First call: set up; never queue here (MHD 0.9.75 would then
                 * close keep-alive connections). */
                const char *cl;
                uint64_t len;

                r = new0(req, 1);
                if (!r)
                        return MHD_NO;
                r->s = sl->s;
                r->slot = sl;
                r->conn = conn;
                r->body = TEND_BUF_INIT(sl->s->max_body);
                *con_cls = r;
                api__conn_phase(conn, API_CONN_BODY);
                api__authorize(r);
                cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
                if (cl && safe_atou64(cl, &len) >= 0 && len > sl->s->max_body)
                        r->too_large = true;
                return MHD_YES;
        }
        if (*upload_size > 0) {
                if (!r->too_large && !r->deny && tend_buf_add(&r->body, upload, *upload_size) < 0)
                        r->too_large = true;
                *upload_size = 0; /* consumed (or dropped) */
                return MHD_YES;
        }
        api__conn_phase(conn, API_CONN_ANSWERING);
        if (r->later_text) { /* ... written already */
                r->synced = true;
                return api__queue(r, r->later_code, "application/json", TAKE_PTR(r->later_text));
        }
        if (r->later) { /* the answer of api__wait()'s work */
                json_t *answer = TAKE_PTR(r->later);
                r->synced = true;
                return api__send_json(r, r->later_code, answer);
        }
        r->method = method;
        if (r->deny)
                return api__send_json(r, r->deny,
                                      spec_status_json(r->deny, NULL, r->deny_message, NULL));
        if (r->too_large)
                return api__send_status(r, 413, "RequestEntityTooLarge",
                                        "the request body is larger than %zu bytes",
                                        sl->s->max_body);
        if (!r->prep)
                log_debug("%s %s", method, url);
        /* (a node's cordon or removal goes to etcd itself, and etcd answers) */
        if (r->s->fleet && r->s->fleet->refuses_writes && !streq(method, "GET") &&
            !streq(method, "HEAD") && !streq(method, "OPTIONS") &&
            !startswith(url, "/api/v1/nodes")) {
                _cleanup_free_ char *why = r->s->fleet->refuses_writes(r->s->fleet->userdata);
                if (why)
                        return api__send_status(r, 503, "ServiceUnavailable", "%s", why);
        }
        /* a read of a node cut off from the fleet: it may be stale, said so
         * (kubectl prints a Warning) */
        if (r->s->fleet && r->s->fleet->stale && (streq(method, "GET") || streq(method, "HEAD"))) {
                _cleanup_free_ char *why = r->s->fleet->stale(r->s->fleet->userdata);
                if (why && !r->warning)
                        r->warning = strprintf("299 - \"%s\"", why);
        }
        /* the writes the request makes (its answer waits for etcd to have them) */
        const api_fleet *fl = r->s->fleet;
        if (!fl || !fl->writes)
                return route(r, url, method);
        r->fleet_mark = fl->writes(fl->userdata);
        enum MHD_Result res = route(r, url, method);
        if (fl->writes_end)
                fl->writes_end(fl->userdata);
        return res;
}

unsigned api_server_answer(api_server *s, const api_request *q, char **ret_body) {
        req r = { .s = s, .slot = &s->slots[0], .direct = q };
        unsigned code;

        *ret_body = NULL;
        r.body = TEND_BUF_INIT(s->max_body);
        if (q->body_len > s->max_body)
                (void) api__send_status(&r, 413, "RequestEntityTooLarge",
                                        "the request body is larger than %zu bytes", s->max_body);
        else if (tend_buf_add(&r.body, q->body ?: "", q->body_len) < 0)
                (void) api__send_oom(&r);
        else
                (void) route(&r, q->url, q->method);
        code = r.direct_code ?: 500;
        *ret_body = TAKE_PTR(r.direct_body);
        tend_buf_free(&r.body);
        free(r.warning);
        return code;
}

/* A body this large leaves freed memory in malloc's heap (its trees and
 * positions are many small blocks): give it back to the system, soon. */
#define TRIM_AFTER_BODY (256 * 1024)

void api__on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                       enum MHD_RequestTerminationCode toe) {
        req *r = *con_cls;
        bool large = r && r->body.len >= TRIM_AFTER_BODY;
        api_server *s = r ? r->s : NULL;

        if (r) {
                api__waiting_forget(r);
                api__write_forget(r);
        }
        api__req_free(r);
        *con_cls = NULL;
        api__conn_phase(conn, API_CONN_WAITING);
        if (large)
                api__trim_soon(s);
}
