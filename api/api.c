/* SPDX-License-Identifier: MIT */

/*
 * The HTTP API (see api.h). Layout of this file: the libmicrohttpd glue on
 * the libuv loop; requests (auth, body); responses (objects, Status);
 * routing; the handlers (list/get/create/replace/patch/delete, scale,
 * rollback); watch streams; pod logs; metrics; discovery.
 *
 * Streams (watch, log -f) use MHD's content-reader callbacks: when there is
 * nothing to send the connection is suspended, and resumed when something
 * arrives. Suspended connections do not notice a peer going away, so idle
 * watches get a newline every heartbeat (JSON decoders skip whitespace), and
 * every second the socket of each suspended stream is peeked at: a client
 * that hung up is let go within a second.
 */

#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <malloc.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "tend/api.h"
#include "patch.h"

#define MAX_WATCH_BUFFER (8u << 20) /* a slower watcher is cut off */
#define CHANGE_RING 1000            /* changes kept for ?resourceVersion= resumes */

typedef struct slot {
        struct MHD_Daemon *d;
        uv_poll_t poll;
        uv_timer_t timer;
        struct api_server *s;
        bool tcp;
        int fd;
} slot;

typedef struct change {
        uint64_t rv;
        store_kind kind;
        char *line; /* {"type":..., "object":...}\n — parsed again only to filter a
                     * resumed watch (a tree per change would cost ~10 kB each) */
} change;

typedef struct watch watch;
typedef struct follower follower;

struct api_server {
        uv_loop_t *loop;
        agent *agent;
        store *store;
        char *state_dir;
        char *socket_path;
        bool has_group;
        gid_t group;
        char *token;
        size_t max_body;
        usec_t heartbeat_interval;
        usec_t idle_timeout;
        slot slots[2];
        size_t n_slots;
        unsigned open_handles;
        bool closing;

        change ring[CHANGE_RING];
        size_t ring_head, ring_n;

        watch *watches;
        follower *followers;
        uv_timer_t heartbeat;
        uv_timer_t follow_timer;

        /* requests by status code */
        unsigned codes[16];
        uint64_t code_counts[16];
};

/* ---- metrics of the API itself -------------------------------------------------------- */

static void count_code(api_server *s, unsigned code) {
        for (size_t i = 0; i < ELEMENTSOF(s->codes); i++) {
                if (s->codes[i] == code || s->codes[i] == 0) {
                        s->codes[i] = code;
                        s->code_counts[i]++;
                        return;
                }
        }
}

/* ---- the MHD glue -------------------------------------------------------------------- */

static void arm(slot *sl);

static void run_slot(slot *sl) {
        if (!sl->d)
                return;
        MHD_run(sl->d);
        arm(sl);
}

static void on_slot_poll(uv_poll_t *h, int status, int events) {
        run_slot(h->data);
}

static void on_slot_timer(uv_timer_t *t) {
        run_slot(t->data);
}

/* After every run: MHD's next timeout (connection timeouts, resumed
 * connections). */
static void arm(slot *sl) {
        MHD_UNSIGNED_LONG_LONG ms;

        if (!sl->d || sl->s->closing)
                return;
        if (MHD_get_timeout(sl->d, &ms) == MHD_YES)
                uv_timer_start(&sl->timer, on_slot_timer, ms, 0);
        else
                uv_timer_stop(&sl->timer);
}

/* Resumed connections are served on the next MHD_run(). */
static void kick(slot *sl) {
        if (sl->d && !sl->s->closing)
                uv_timer_start(&sl->timer, on_slot_timer, 0, 0);
}

/* ---- requests ------------------------------------------------------------------------------ */

typedef struct req {
        api_server *s;
        slot *slot;
        struct MHD_Connection *conn; /* NULL: answered in memory */
        const api_request *direct;   /* what is asked, then */
        unsigned direct_code;        /* and the answer */
        char *direct_body;
        tend_buf body;
        bool too_large;
        unsigned deny; /* 0, 401 or 403 */
        char *deny_message;
        char *warning; /* a Warning: header for the answer (kubectl prints it) */
} req;

static void req_free(req *r) {
        if (!r)
                return;
        tend_buf_free(&r->body);
        free(r->direct_body);
        free(r->deny_message);
        free(r->warning);
        free(r);
}

/* In a key, value, ..., NULL list: the first value of key (headers: any
 * case). */
static const char *lookup(const char *const *kv, const char *key, bool any_case) {
        for (; kv && kv[0] && kv[1]; kv += 2)
                if (any_case ? strcasecmp(kv[0], key) == 0 : streq(kv[0], key))
                        return kv[1];
        return NULL;
}

static const char *arg(req *r, const char *name) {
        if (r->direct)
                return lookup(r->direct->args, name, false);
        return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

static const char *header(req *r, const char *name) {
        if (r->direct)
                return lookup(r->direct->headers, name, true);
        return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

static bool arg_true(req *r, const char *name) {
        const char *v = arg(r, name);
        return v && (streq(v, "true") || streq(v, "1") || streq(v, ""));
}

/* Is gid one of the groups of pid? (supplementary groups from /proc.) */
static bool pid_in_group(pid_t pid, gid_t gid) {
        char path[64];
        _cleanup_free_ char *status = NULL;
        const char *g;

        snprintf(path, sizeof path, "/proc/%d/status", (int) pid);
        if (read_full_file(path, 65536, &status, NULL) < 0 || !(g = strstr(status, "\nGroups:")))
                return false;
        for (g += 8; *g && *g != '\n';) {
                char *end;
                unsigned long v = strtoul(g, &end, 10);
                if (end == g)
                        break;
                if ((gid_t) v == gid)
                        return true;
                g = end;
                while (*g == ' ' || *g == '\t')
                        g++;
        }
        return false;
}

static void authorize(req *r) {
        api_server *s = r->s;

        if (r->slot->tcp) {
                const char *auth = header(r, MHD_HTTP_HEADER_AUTHORIZATION);
                const char *tok = auth ? startswith(auth, "Bearer ") : NULL;
                size_t a, b;
                unsigned diff = 0;

                if (!tok || !s->token) {
                        r->deny = 401;
                        r->deny_message = strdup("a bearer token is required (Authorization: "
                                                 "Bearer <token>)");
                        return;
                }
                /* Constant time in the token's length. */
                a = strlen(tok);
                b = strlen(s->token);
                diff = (unsigned) (a ^ b);
                for (size_t i = 0; i < b; i++)
                        diff |= (unsigned) (s->token[i] ^ (i < a ? tok[i] : 0));
                if (diff) {
                        r->deny = 401;
                        r->deny_message = strdup("the bearer token is not valid");
                }
                return;
        }

        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
                r->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct ucred cred;
        socklen_t len = sizeof cred;

        if (!ci || getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
                r->deny = 403;
                r->deny_message = strdup("cannot tell who is connecting");
                return;
        }
        if (cred.uid == 0 || cred.uid == geteuid())
                return;
        if (s->has_group && (cred.gid == s->group || pid_in_group(cred.pid, s->group)))
                return;
        r->deny = 403;
        r->deny_message = strprintf("uid %u may not use this socket: it is for root, uid %u%s",
                                    (unsigned) cred.uid, (unsigned) geteuid(),
                                    s->has_group ? " and the members of --socket-group" : "");
}

/* ---- responses ------------------------------------------------------------------------------ */

static enum MHD_Result queue(req *r, unsigned code, const char *type, char *body /* takes */) {
        struct MHD_Response *resp;
        enum MHD_Result ret;
        size_t n = body ? strlen(body) : 0;

        if (r->direct) {
                count_code(r->s, code);
                r->direct_code = code;
                free(r->direct_body);
                r->direct_body = body;
                return MHD_YES;
        }
        resp = MHD_create_response_from_buffer(
                n, body ?: (char *) "", body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
        if (!resp) {
                free(body);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
        if (r->warning && code < 300)
                MHD_add_response_header(resp, "Warning", r->warning);
        count_code(r->s, code);
        ret = MHD_queue_response(r->conn, code, resp);
        MHD_destroy_response(resp);
        return ret;
}

static enum MHD_Result send_json(req *r, unsigned code, json_t *j) {
        char *body = j ? json_dumps(j, JSON_COMPACT) : NULL;
        json_decref(j);
        if (!body)
                return queue(r, 500, "text/plain", strdup("out of memory\n"));
        /* a newline, like kube-apiserver, so `curl` output ends cleanly */
        char *nl = strprintf("%s\n", body);
        free(body);
        return queue(r, code, "application/json", nl);
}

static const char *reason_of(unsigned code) {
        switch (code) {
        case 400:
                return "BadRequest";
        case 401:
                return "Unauthorized";
        case 403:
                return "Forbidden";
        case 404:
                return "NotFound";
        case 405:
                return "MethodNotAllowed";
        case 409:
                return "Conflict";
        case 410:
                return "Expired";
        case 413:
                return "RequestEntityTooLarge";
        case 415:
                return "UnsupportedMediaType";
        case 422:
                return "Invalid";
        case 500:
                return "InternalError";
        default:
                return "";
        }
}

/* A Kubernetes Status object. The message may quote what a client sent:
 * bytes that are not UTF-8 are written \xNN, so that it is still JSON. */
static json_t *status_json(unsigned code, const char *reason, const char *message,
                           json_t *details) {
        _cleanup_free_ char *clean = utf8_escape_invalid(strempty(message));
        json_t *j = clean ? json_pack("{s:s, s:s, s:{}, s:s, s:s, s:s, s:i}", "kind", "Status",
                                      "apiVersion", "v1", "metadata", "status",
                                      code < 400 ? "Success" : "Failure", "message", clean,
                                      "reason", reason ?: reason_of(code), "code", (int) code)
                          : NULL;
        if (j && details)
                json_object_set_new(j, "details", details);
        else
                json_decref(details);
        return j;
}

static enum MHD_Result send_status(req *r, unsigned code, const char *reason, const char *fmt, ...)
        _printf_(4, 5);
static enum MHD_Result send_status(req *r, unsigned code, const char *reason, const char *fmt,
                                   ...) {
        _cleanup_free_ char *msg = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        return send_json(r, code, status_json(code, reason, msg, NULL));
}

/* ---- resources ------------------------------------------------------------------------------ */

typedef struct resource {
        const char *prefix;    /* "api/v1" or "apis/apps/v1" */
        const char *plural;    /* "pods" */
        const char *qualified; /* "pods", "deployments.apps" (for messages) */
        store_kind kind;
        const char *list_kind;
        const char *api_version;
} resource;

static const resource resources[] = {
        { "apis/apps/v1", "deployments", "deployments.apps", STORE_DEPLOYMENT, "DeploymentList",
          "apps/v1" },
        { "apis/apps/v1", "replicasets", "replicasets.apps", STORE_REPLICA_SET, "ReplicaSetList",
          "apps/v1" },
        { "api/v1", "pods", "pods", STORE_POD, "PodList", "v1" },
        { "api/v1", "events", "events", STORE_EVENT, "EventList", "v1" },
};

static enum MHD_Result send_oom(req *r) {
        return send_status(r, 500, NULL, "out of memory");
}

static enum MHD_Result not_found(req *r, const resource *res, const char *name) {
        _cleanup_free_ char *clean = utf8_escape_invalid(name);
        json_t *details = clean ? json_pack("{s:s, s:s}", "name", clean, "kind", res->plural)
                                : NULL;
        _cleanup_free_ char *msg = strprintf("%s \"%s\" not found", res->qualified, name);
        return send_json(r, 404, status_json(404, "NotFound", msg, details));
}

static json_t *encode_obj(store_kind k, const void *obj) {
        return spec_encode(store_kind_type(k), obj);
}

/* ---- selectors --------------------------------------------------------------------------- */

typedef struct filter {
        char *ns;
        spec_selector *labels; /* NULL: everything */
        /* field selectors: path=value (or != with negate) */
        struct {
                char *path;
                char *value;
                bool negate;
        } fields[8];
        size_t n_fields;
} filter;

static void filter_done(filter *f) {
        free(f->ns);
        spec_free(&spec_type_selector, f->labels);
        for (size_t i = 0; i < f->n_fields; i++) {
                free(f->fields[i].path);
                free(f->fields[i].value);
        }
        *f = (filter){};
}

/* labelSelector and fieldSelector from the query; *ret_error on nonsense. */
static int filter_parse(req *r, const char *ns, filter *f, char **ret_error) {
        const char *ls = arg(r, "labelSelector"), *fs = arg(r, "fieldSelector");

        *f = (filter){};
        if (ns && !(f->ns = strdup(ns)))
                return -ENOMEM;
        if (!isempty(ls)) {
                f->labels = spec_new(&spec_type_selector);
                if (!f->labels || spec_selector_parse(ls, f->labels) < 0) {
                        *ret_error = strprintf("unable to parse requirement: labelSelector \"%s\"",
                                               ls);
                        return -EINVAL;
                }
        }
        if (!isempty(fs)) {
                _cleanup_free_ char *copy = strdup(fs);
                char *save = NULL;
                if (!copy)
                        return -ENOMEM;
                for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                        char *op = strstr(t, "!=");
                        bool neg = op != NULL;
                        size_t skip = 2;
                        if (!op) {
                                op = strstr(t, "==");
                                if (!op) {
                                        op = strchr(t, '=');
                                        skip = 1;
                                }
                        }
                        if (!op || f->n_fields >= ELEMENTSOF(f->fields)) {
                                *ret_error = strprintf("invalid field selector: \"%s\"", fs);
                                return -EINVAL;
                        }
                        f->fields[f->n_fields].path = strndup(t, (size_t) (op - t));
                        f->fields[f->n_fields].value = strdup(op + skip);
                        f->fields[f->n_fields].negate = neg;
                        f->n_fields++;
                }
        }
        return 0;
}

/* A field of a JSON object by dotted path ("metadata.name"). */
static const char *json_field(json_t *j, const char *path) {
        _cleanup_free_ char *copy = strdup(path);
        char *save = NULL;
        json_t *v = j;

        if (!copy)
                return NULL;
        for (char *t = strtok_r(copy, ".", &save); t && v; t = strtok_r(NULL, ".", &save))
                v = json_object_get(v, t);
        return json_string_value(v);
}

static bool filter_match(const filter *f, json_t *obj) {
        json_t *meta = json_object_get(obj, "metadata");

        if (f->ns && !streq_ptr(json_string_value(json_object_get(meta, "namespace")), f->ns))
                return false;
        if (f->labels) {
                spec_map labels = {};
                const char *k;
                json_t *v;
                bool ok;
                json_object_foreach (json_object_get(meta, "labels"), k, v)
                        (void) spec_map_set(&labels, k, json_string_value(v) ?: "");
                ok = spec_selector_matches(f->labels, &labels);
                spec_map_done(&labels);
                if (!ok)
                        return false;
        }
        for (size_t i = 0; i < f->n_fields; i++) {
                bool eq = streq_ptr(json_field(obj, f->fields[i].path), f->fields[i].value);
                if (eq == f->fields[i].negate)
                        return false;
        }
        return true;
}

/* ---- lists --------------------------------------------------------------------------------- */

static const spec_meta *meta_of(store_kind kind, const void *obj) {
        switch (kind) {
        case STORE_DEPLOYMENT:
                return &((const spec_deployment *) obj)->metadata;
        case STORE_REPLICA_SET:
                return &((const spec_replica_set *) obj)->metadata;
        case STORE_POD:
                return &((const spec_pod *) obj)->metadata;
        default:
                return &((const spec_event *) obj)->metadata;
        }
}

typedef struct list_ref {
        const char *ns, *name;
        const void *obj;
} list_ref;

static int cmp_refs(const void *a, const void *b) {
        const list_ref *x = a, *y = b;
        int c = strcmp(strempty(x->ns), strempty(y->ns));
        return c ? c : strcmp(strempty(x->name), strempty(y->name));
}

/* The stored objects of a kind, by namespace and name (new array). */
static list_ref *sorted_refs(api_server *s, const resource *res, size_t *ret_n) {
        const void *const *items;
        size_t n = store_list(s->store, res->kind, &items);
        list_ref *refs = new0(list_ref, n ?: 1);

        if (!refs)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                const spec_meta *m = meta_of(res->kind, items[i]);
                refs[i] = (list_ref){ m->namespace, m->name, items[i] };
        }
        qsort(refs, n, sizeof *refs, cmp_refs);
        *ret_n = n;
        return refs;
}

/*
 * A list's body, item by item: each object is encoded, dumped and freed
 * before the next, so a list of a thousand pods never exists as one tree
 * (building and freeing that tree was most of the time a list took, in
 * malloc's consolidation). The items' texts go between the brackets of
 * the "items" of the list's own encoding: jansson writes every value.
 */
static char *list_body(api_server *s, const resource *res, const filter *f) {
        size_t n = 0, k = 0;
        _cleanup_free_ list_ref *refs = sorted_refs(s, res, &n);
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT((size_t) 1 << 30);
        _cleanup_free_ char *head = NULL;
        json_t *list;
        char rv[32];
        size_t cut;

        if (!refs)
                return NULL;
        snprintf(rv, sizeof rv, "%" PRIu64, store_resource_version(s->store));
        list = json_pack("{s:s, s:s, s:{s:s}, s:[]}", "kind", res->list_kind, "apiVersion",
                         res->api_version, "metadata", "resourceVersion", rv, "items");
        head = list ? json_dumps(list, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        json_decref(list);
        /* ...,"items":[]} — the items go before its last two characters. */
        if (!head || (cut = strlen(head)) < 3 || !streq(head + cut - 3, "[]}"))
                return NULL;
        if (tend_buf_add(&b, head, cut - 2) < 0)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                json_t *j = encode_obj(res->kind, refs[i].obj);
                char *text = j && filter_match(f, j) ? json_dumps(j, JSON_COMPACT) : NULL;
                json_decref(j);
                if (text &&
                    (tend_buf_adds(&b, k++ ? "," : "") < 0 || tend_buf_adds(&b, text) < 0)) {
                        free(text);
                        return NULL;
                }
                free(text);
        }
        if (tend_buf_adds(&b, "]}\n") < 0)
                return NULL;
        return tend_buf_take(&b);
}

/* ---- bodies -------------------------------------------------------------------------------- */

/* The request body as one JSON/YAML object; errors answered. */
/* The body's documents; a List is expanded into its items. */
static int body_docs(req *r, enum MHD_Result *ret, spec_docs *docs) {
        spec_errors errs = {};

        if (r->body.len == 0) {
                *ret = send_status(r, 400, "BadRequest", "the request needs a body");
                return -1;
        }
        if (spec_parse("request", tend_buf_str(&r->body), r->body.len, &errs, docs) < 0) {
                _cleanup_free_ char *msg = errs.n ? spec_error_format(&errs.items[0]) : NULL;
                *ret = send_status(r, 400, "BadRequest", "%s", msg ?: "cannot parse the body");
                spec_errors_done(&errs);
                return -1;
        }
        return 0;
}

static json_t *body_object(req *r, enum MHD_Result *ret) {
        spec_docs docs = {};
        json_t *j;

        if (body_docs(r, ret, &docs) < 0)
                return NULL;
        if (docs.n != 1) {
                *ret = send_status(r, 400, "BadRequest", "the body must hold exactly one object");
                spec_docs_done(&docs);
                return NULL;
        }
        j = json_incref(docs.items[0].root);
        spec_docs_done(&docs);
        return j;
}

/* A JSON body as it is (a JSON patch is an array, not an object; DeleteOptions),
 * within the limits of a manifest. */
static json_t *body_json(req *r, enum MHD_Result *ret) {
        _cleanup_free_ char *problem = NULL;
        json_error_t e;
        json_t *j;

        if (r->body.len == 0) {
                *ret = send_status(r, 400, "BadRequest", "the request needs a body");
                return NULL;
        }
        j = json_loadb(tend_buf_str(&r->body), r->body.len, JSON_REJECT_DUPLICATES, &e);
        if (!j) {
                *ret = send_status(r, 400, "BadRequest", "request:%d:%d: %s", e.line, e.column,
                                   e.text);
                return NULL;
        }
        if (spec_json_check_limits(j, &problem) < 0) {
                json_decref(j);
                *ret = problem ? send_status(r, 400, "BadRequest", "request: %s", problem)
                               : send_oom(r);
                return NULL;
        }
        return j;
}

/* The PATCH body applied to a copy of cur, as its Content-Type says:
 * the patched document, or NULL with the error answered. */
static json_t *apply_patch(req *r, json_t *cur, enum MHD_Result *ret) {
        const char *type = header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
        _cleanup_(json_decrefp) json_t *body = NULL;
        _cleanup_free_ char *err = NULL;
        json_t *patched;

        if (!type || (!startswith(type, "application/json-patch+json") &&
                      !startswith(type, "application/merge-patch+json") &&
                      !startswith(type, "application/strategic-merge-patch+json"))) {
                *ret = send_status(r, 415, NULL,
                                   "the PATCH body must be application/merge-patch+json, "
                                   "application/strategic-merge-patch+json (taken as a "
                                   "merge patch) or application/json-patch+json");
                return NULL;
        }
        body = body_json(r, ret);
        if (!body)
                return NULL;
        if (startswith(type, "application/json-patch+json"))
                patched = patch_json(cur, body, &err);
        else if (!json_is_object(body)) {
                *ret = send_status(r, 400, "BadRequest",
                                   "a merge patch must be a JSON object (the fields to change); "
                                   "a list of operations is application/json-patch+json");
                return NULL;
        } else
                /* strategic merge patches are taken as merge patches: lists are
                 * replaced, not merged by key */
                patched = patch_merge(cur, body, &err);
        if (!patched)
                *ret = err ? send_status(r, 422, "Invalid", "%s", err) : send_oom(r);
        return patched;
}

/* A StatusCause: the reason from the message's kind, as Kubernetes'
 * field.ErrorType names them. */
static json_t *cause_json(const spec_error *e) {
        static const struct {
                const char *prefix, *reason;
        } kinds[] = {
                { "Required value", "FieldValueRequired" },
                { "Forbidden", "FieldValueForbidden" },
                { "Unsupported value", "FieldValueNotSupported" },
                { "Duplicate value", "FieldValueDuplicate" },
                { "Too long", "FieldValueTooLong" },
                { "Too many", "FieldValueTooMany" },
        };
        const char *reason = "FieldValueInvalid";

        for (size_t i = 0; i < ELEMENTSOF(kinds); i++)
                if (startswith(e->message, kinds[i].prefix))
                        reason = kinds[i].reason;
        return json_pack("{s:s, s:s, s:s}", "reason", reason, "message", e->message, "field",
                         strempty(e->field));
}

/* 422 with every field error as a cause. */
static enum MHD_Result send_invalid(req *r, const char *qualified, const char *kind,
                                    const char *name, const spec_errors *errs) {
        _cleanup_buf_ tend_buf msg = TEND_BUF_INIT(1 << 20);
        json_t *causes = json_array(), *details;

        (void) tend_buf_addf(&msg, "%s \"%s\" is invalid: ", kind, strempty(name));
        for (size_t i = 0; i < errs->n; i++) {
                const spec_error *e = &errs->items[i];
                char *one = e->field ? strprintf("%s: %s", e->field, e->message)
                                     : strdup(e->message);
                (void) tend_buf_addf(&msg, "%s%s", i ? ", " : "", strna(one));
                free(one);
                json_array_append_new(causes, cause_json(e));
        }
        details = json_pack("{s:s, s:s, s:o}", "name", strempty(name), "kind", qualified, "causes",
                            causes);
        return send_json(r, 422, status_json(422, "Invalid", tend_buf_str(&msg), details));
}

/* Decodes, defaults and validates a Deployment from JSON. */
static spec_deployment *decode_deployment(req *r, json_t *j, const char *ns, const char *name,
                                          enum MHD_Result *ret) {
        spec_errors errs = {};
        spec_deployment *d = NULL;
        const char *kind = json_string_value(json_object_get(j, "kind"));
        const char *jname = json_field(j, "metadata.name");
        const char *jns = json_field(j, "metadata.namespace");

        if (!streq_ptr(kind, "Deployment")) {
                *ret = send_status(r, 400, "BadRequest", "the object is a %s, not a Deployment",
                                   kind ? kind : "thing without a kind");
                return NULL;
        }
        if (jns && ns && !streq(jns, ns)) {
                *ret = send_status(r, 400, "BadRequest",
                                   "the namespace of the object (%s) does not match the namespace "
                                   "on the request (%s)",
                                   jns, ns);
                return NULL;
        }
        if (name && jname && !streq(name, jname)) {
                *ret = send_status(r, 400, "BadRequest",
                                   "the name of the object (%s) does not match the name on the URL "
                                   "(%s)",
                                   jname, name);
                return NULL;
        }
        if (spec_decode_new(&spec_type_deployment, j, &errs, (void **) &d) < 0) {
                *ret = send_invalid(r, "deployments.apps", "Deployment", jname ?: name, &errs);
                spec_errors_done(&errs);
                return NULL;
        }
        if (!d->metadata.namespace && ns)
                d->metadata.namespace = strdup(ns);
        if (!d->metadata.name && name)
                d->metadata.name = strdup(name);
        spec_deployment_default(d);
        if (spec_deployment_validate(d, &errs) < 0) {
                *ret = send_invalid(r, "deployments.apps", "Deployment", d->metadata.name, &errs);
                spec_errors_done(&errs);
                spec_deployment_free(d);
                return NULL;
        }
        return d;
}

/* Writes through agent_apply(); answers with the stored object — or, for
 * dryRun=All, with the object as it would be stored (what kubectl diff
 * compares), after the same checks. */
static enum MHD_Result write_deployment(req *r, spec_deployment *d, unsigned ok_code) {
        api_server *s = r->s;
        spec_errors errs = {};
        agent_apply_result res;
        spec_deployment *preview = NULL;
        json_t *answer = NULL;
        enum MHD_Result ret;
        bool dry_run = streq_ptr(arg(r, "dryRun"), "All");
        int rr;

        rr = dry_run ? agent_apply_preview(s->agent, d, AGENT_APPLY_REPLACE, &errs, &preview)
                     : agent_apply_ex(s->agent, &d, 1, &errs, &res, AGENT_APPLY_REPLACE);
        if (rr == -EINVAL)
                ret = send_invalid(r, "deployments.apps", "Deployment", d->metadata.name, &errs);
        else if (rr < 0)
                ret = send_status(r, 500, NULL, "writing to the store: %s", strerror(-rr));
        else {
                if (!dry_run)
                        agent_kick(s->agent);
                const spec_deployment *o = dry_run ? preview
                                                   : store_get(s->store, STORE_DEPLOYMENT,
                                                               d->metadata.namespace,
                                                               d->metadata.name);
                answer = o ? encode_obj(STORE_DEPLOYMENT, o) : json_object();
                ret = send_json(r, ok_code, answer);
        }
        spec_errors_done(&errs);
        spec_deployment_free(preview);
        spec_deployment_free(d);
        return ret;
}

/* ---- handlers ---------------------------------------------------------------------------- */

static enum MHD_Result start_watch(req *r, const resource *res, filter *f);

static enum MHD_Result handle_collection(req *r, const resource *res, const char *ns,
                                         const char *method) {
        filter f;
        char *err = NULL;
        enum MHD_Result ret;

        if (streq(method, "GET")) {
                int q = filter_parse(r, ns, &f, &err);
                if (q < 0) {
                        ret = send_status(r, 400, "BadRequest", "%s", err ?: "out of memory");
                        free(err);
                        filter_done(&f);
                        return ret;
                }
                if (arg_true(r, "watch"))
                        return start_watch(r, res, &f); /* takes f */
                char *body = list_body(r->s, res, &f);
                filter_done(&f);
                if (!body)
                        return send_status(r, 500, NULL, "out of memory");
                return queue(r, 200, "application/json", body);
        }
        if (streq(method, "POST")) {
                json_t *j;
                spec_deployment *d;
                if (!ns)
                        return send_status(r, 405, NULL,
                                           "create in a namespace: POST "
                                           "/%s/namespaces/NS/%s",
                                           res->prefix, res->plural);
                if (res->kind != STORE_DEPLOYMENT)
                        return send_status(r, 405, NULL,
                                           "%s are created by tendd itself; create a Deployment",
                                           res->plural);
                j = body_object(r, &ret);
                if (!j)
                        return ret;
                d = decode_deployment(r, j, ns, NULL, &ret);
                json_decref(j);
                if (!d)
                        return ret;
                if (store_get(r->s->store, STORE_DEPLOYMENT, ns, d->metadata.name)) {
                        json_t *details = json_pack("{s:s, s:s, s:s}", "name", d->metadata.name,
                                                    "group", "apps", "kind", "deployments");
                        _cleanup_free_ char *msg = strprintf(
                                "deployments.apps \"%s\" already exists", d->metadata.name);
                        spec_deployment_free(d);
                        return send_json(r, 409, status_json(409, "AlreadyExists", msg, details));
                }
                return write_deployment(r, d, 201);
        }
        return send_status(r, 405, NULL, "%s is not allowed on %s", method, res->plural);
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

static enum MHD_Result send_conflict(req *r, const resource *res, const char *name) {
        return send_status(r, 409, "Conflict",
                           "Operation cannot be fulfilled on %s \"%s\": the object has been "
                           "modified; please apply your changes to the latest version and try "
                           "again",
                           res->qualified, name);
}

/* A uid and a resourceVersion a request is conditional on: the uid, on
 * being about the same object (not one deleted and created again under
 * its name); the version, on nothing having changed since (optimistic
 * concurrency). Stated ones (DeleteOptions.preconditions) are reported as
 * such; those of an object written back, as Kubernetes does, as the
 * object having been modified. false: answered. */
static bool preconditions_hold(req *r, const resource *res, const void *obj, const char *uid,
                               const char *rv, bool stated, enum MHD_Result *ret) {
        const spec_meta *m = meta_of(res->kind, obj);
        char now_rv[32];

        snprintf(now_rv, sizeof now_rv, "%" PRIu64, m->resource_version);
        if (uid && *uid && !streq_ptr(uid, m->uid)) {
                *ret = send_status(r, 409, "Conflict",
                                   "Operation cannot be fulfilled on %s \"%s\": Precondition "
                                   "failed: UID in precondition: %s, UID in object meta: %s",
                                   res->qualified, m->name, uid, strempty(m->uid));
                return false;
        }
        if (rv && *rv && !streq(rv, now_rv)) {
                *ret = stated ? send_status(r, 409, "Conflict",
                                            "Operation cannot be fulfilled on %s \"%s\": "
                                            "Precondition failed: ResourceVersion in "
                                            "precondition: %s, ResourceVersion in object meta: %s",
                                            res->qualified, m->name, rv, now_rv)
                              : send_conflict(r, res, m->name);
                return false;
        }
        return true;
}

/* Those of an object written back (PUT, PATCH, a Scale). */
static bool object_preconditions_hold(req *r, const resource *res, const void *obj, json_t *j,
                                      enum MHD_Result *ret) {
        return preconditions_hold(r, res, obj, json_field(j, "metadata.uid"),
                                  json_field(j, "metadata.resourceVersion"), false, ret);
}

static enum MHD_Result handle_scale(req *r, const resource *res, const char *ns, const char *name,
                                    const char *method) {
        api_server *s = r->s;
        const void *obj = store_get(s->store, res->kind, ns, name);
        enum MHD_Result ret;
        json_t *cur, *patched = NULL;
        int64_t want;
        int rr;

        if (!obj)
                return not_found(r, res, name);
        cur = scale_json(res->kind, obj);
        if (streq(method, "GET"))
                return send_json(r, 200, cur);
        if (!streq(method, "PUT") && !streq(method, "PATCH")) {
                json_decref(cur);
                return send_status(r, 405, NULL, "%s is not allowed on %s/scale", method,
                                   res->plural);
        }
        patched = streq(method, "PATCH") ? apply_patch(r, cur, &ret) : body_object(r, &ret);
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
                ret = send_invalid(r, "autoscaling", "Scale.autoscaling", name, &errs);
                spec_errors_done(&errs);
                return ret;
        }
        json_decref(patched);
        rr = res->kind == STORE_DEPLOYMENT
                     ? agent_scale_deployment(s->agent, ns, name, (int32_t) want)
                     : agent_scale_replica_set(s->agent, ns, name, (int32_t) want);
        if (rr < 0)
                return send_status(r, 500, NULL, "scaling: %s", strerror(-rr));
        agent_kick(s->agent);
        /* As stored now: the new resourceVersion. */
        obj = store_get(s->store, res->kind, ns, name);
        if (!obj)
                return not_found(r, res, name);
        return send_json(r, 200, scale_json(res->kind, obj));
}

static enum MHD_Result handle_rollback(req *r, const char *ns, const char *name) {
        api_server *s = r->s;
        enum MHD_Result ret;
        json_t *body = r->body.len ? body_object(r, &ret) : json_object();
        json_t *to;
        int64_t rev = 0, done = 0;
        char *err = NULL;
        int rr;

        if (!body)
                return ret;
        /* {"toRevision": N} or the old DeploymentRollback {"rollbackTo": {"revision": N}} */
        to = json_object_get(body, "toRevision");
        if (!to)
                to = json_object_get(json_object_get(body, "rollbackTo"), "revision");
        if (to && !json_is_integer(to)) {
                json_decref(body);
                return send_status(r, 400, "BadRequest", "toRevision must be an integer");
        }
        rev = to ? json_integer_value(to) : 0;
        json_decref(body);
        if (!store_get(s->store, STORE_DEPLOYMENT, ns, name))
                return not_found(r, &resources[0], name);
        rr = agent_rollback(s->agent, ns, name, rev, &done, &err);
        if (rr == -EALREADY) {
                /* kubectl: "deployment.apps/web skipped rollback (...)" */
                _cleanup_free_ char *msg = strprintf("deployment.apps/%s %s", name, strna(err));
                ret = send_json(r, 200,
                                status_json(200, "", msg,
                                            json_pack("{s:I}", "revision", (json_int_t) done)));
                free(err);
                return ret;
        }
        if (rr < 0) {
                unsigned code = rr == -EBUSY ? 409 : rr == -ENOENT || rr == -EINVAL ? 400 : 500;
                ret = send_status(r, code, NULL, "%s", err ?: strerror(-rr));
                free(err);
                return ret;
        }
        agent_kick(s->agent);
        _cleanup_free_ char *msg = strprintf("deployment.apps/%s rolled back", name);
        return send_json(
                r, 200,
                status_json(200, "", msg,
                            json_pack("{s:s, s:I}", "name", name, "revision", (json_int_t) done)));
}

static enum MHD_Result handle_logs(req *r, const char *ns, const char *name);
/* A change through the API to a deployment that a manifest file declares
 * is reverted at the next sync of the directory: say so (299, as
 * kube-apiserver's warnings, which kubectl prints). */
static void warn_file_owned(req *r, const char *ns, const char *name) {
        const spec_deployment *d = store_get(r->s->store, STORE_DEPLOYMENT, ns, name);
        const char *src = d ? spec_map_get(&d->metadata.annotations, AGENT_ANN_SOURCE) : NULL;

        if (!src || r->warning)
                return;
        r->warning = strprintf("299 - \"deployment %s comes from %s: tendd puts it back as "
                               "the file says at the next sync; change the file instead\"",
                               name, src);
}

/*
 * DeleteOptions, from the body or the query: preconditions (uid,
 * resourceVersion: 409 if they do not hold), gracePeriodSeconds (pods),
 * propagationPolicy (Background and Foreground both cascade; Orphan is
 * refused — tend does not leave processes running unmanaged). Anything it
 * cannot honour is an error, not ignored.
 */
static int delete_options(req *r, const resource *res, const void *obj, int64_t *ret_grace,
                          enum MHD_Result *ret) {
        _cleanup_(json_decrefp) json_t *body = NULL;
        const char *policy = arg(r, "propagationPolicy"), *q = arg(r, "gracePeriodSeconds");
        json_t *pre, *g;

        if (r->body.len > 0) {
                body = body_json(r, ret);
                if (!body)
                        return -EINVAL;
                if (json_is_string(json_object_get(body, "propagationPolicy")))
                        policy = json_string_value(json_object_get(body, "propagationPolicy"));
                g = json_object_get(body, "gracePeriodSeconds");
                if (g && !json_is_integer(g)) {
                        *ret = send_status(r, 400, "BadRequest",
                                           "gracePeriodSeconds must be an integer");
                        return -EINVAL;
                }
                if (g)
                        *ret_grace = json_integer_value(g);
                pre = json_object_get(body, "preconditions");
                if (!preconditions_hold(r, res, obj, json_string_value(json_object_get(pre, "uid")),
                                        json_string_value(json_object_get(pre, "resourceVersion")),
                                        true, ret))
                        return -EINVAL;
        }
        if (q && (safe_atoi64(q, ret_grace) < 0 || *ret_grace < 0)) {
                *ret = send_status(r, 400, "BadRequest",
                                   "gracePeriodSeconds must be a non-negative integer");
                return -EINVAL;
        }
        if (*ret_grace < -1 || (*ret_grace >= 0 && res->kind != STORE_POD)) {
                *ret = send_status(r, 422, "Invalid",
                                   *ret_grace < -1 ? "gracePeriodSeconds must not be negative"
                                                   : "gracePeriodSeconds applies to pods only "
                                                     "(a deployment's pods use their own)");
                return -EINVAL;
        }
        if (policy && !streq(policy, "Background") && !streq(policy, "Foreground")) {
                *ret = send_status(r, 422, "Invalid",
                                   streq(policy, "Orphan")
                                           ? "propagationPolicy Orphan is not supported: tend "
                                             "does not leave processes running unmanaged"
                                           : "propagationPolicy must be Background or Foreground");
                return -EINVAL;
        }
        return 0;
}

static enum MHD_Result handle_object(req *r, const resource *res, const char *ns, const char *name,
                                     const char *sub, const char *method) {
        api_server *s = r->s;
        const void *obj = store_get(s->store, res->kind, ns, name);
        enum MHD_Result ret;
        int rr;

        if (sub) {
                if (streq(sub, "scale") &&
                    (res->kind == STORE_DEPLOYMENT || res->kind == STORE_REPLICA_SET))
                        return handle_scale(r, res, ns, name, method);
                if (streq(sub, "rollback") && res->kind == STORE_DEPLOYMENT &&
                    streq(method, "POST"))
                        return handle_rollback(r, ns, name);
                if (streq(sub, "log") && res->kind == STORE_POD && streq(method, "GET"))
                        return handle_logs(r, ns, name);
                if (streq(sub, "status") && res->kind != STORE_EVENT) {
                        if (!streq(method, "GET"))
                                return send_status(r, 405, NULL,
                                                   "status is written by tendd's controllers");
                        return obj ? send_json(r, 200, encode_obj(res->kind, obj))
                                   : not_found(r, res, name);
                }
                return send_status(r, 404, "NotFound",
                                   "the server could not find the requested "
                                   "resource");
        }

        if (streq(method, "GET"))
                return obj ? send_json(r, 200, encode_obj(res->kind, obj))
                           : not_found(r, res, name);

        if (streq(method, "DELETE")) {
                int64_t grace = -1;
                if (!obj)
                        return not_found(r, res, name);
                if (delete_options(r, res, obj, &grace, &ret) < 0)
                        return ret;
                switch (res->kind) {
                case STORE_DEPLOYMENT:
                        rr = agent_delete_deployment(s->agent, ns, name);
                        break;
                case STORE_POD:
                        rr = agent_delete_pod(s->agent, ns, name, grace);
                        break;
                case STORE_REPLICA_SET:
                        rr = agent_delete_replica_set(s->agent, ns, name);
                        break;
                default:
                        return send_status(r, 405, NULL, "events are deleted by tendd as they age");
                }
                if (rr < 0)
                        return send_status(r, 500, NULL, "deleting: %s", strerror(-rr));
                agent_kick(s->agent);
                return send_json(
                        r, 200,
                        status_json(200, "", NULL,
                                    json_pack("{s:s, s:s}", "name", name, "kind", res->plural)));
        }

        if (res->kind != STORE_DEPLOYMENT)
                return send_status(r, 405, NULL,
                                   "%s is not allowed on %s: tendd manages them "
                                   "(scale ReplicaSets through /scale)",
                                   method, res->plural);
        if (!obj)
                return not_found(r, res, name);

        if (streq(method, "PUT")) {
                json_t *j = body_object(r, &ret);
                spec_deployment *d;
                if (!j)
                        return ret;
                if (!object_preconditions_hold(r, res, obj, j, &ret)) {
                        json_decref(j);
                        return ret;
                }
                d = decode_deployment(r, j, ns, name, &ret);
                json_decref(j);
                return d ? write_deployment(r, d, 200) : ret;
        }

        if (streq(method, "PATCH")) {
                json_t *cur = encode_obj(res->kind, obj), *patched;
                spec_deployment *d;

                if (!cur)
                        return send_oom(r);
                patched = apply_patch(r, cur, &ret);
                json_decref(cur);
                if (!patched)
                        return ret;
                /* A patch that names a resourceVersion is conditional on it
                 * (optimistic concurrency, as a PUT). */
                if (!object_preconditions_hold(r, res, obj, patched, &ret)) {
                        json_decref(patched);
                        return ret;
                }
                d = decode_deployment(r, patched, ns, name, &ret);
                json_decref(patched);
                return d ? write_deployment(r, d, 200) : ret;
        }
        return send_status(r, 405, NULL, "%s is not allowed here", method);
}

/* ---- watch ----------------------------------------------------------------------------------- */

struct watch {
        watch *prev, *next;
        api_server *s;
        slot *slot;
        struct MHD_Connection *conn;
        const resource *res;
        filter f;
        tend_buf out;
        size_t sent;
        bool suspended;
        bool closed;
        usec_t last_write;
        usec_t ends_at; /* timeoutSeconds, or USEC_INFINITY */
};

/* A suspended stream (a watch, a follower) writes only when there is news:
 * a client that hung up on a quiet one would go unnoticed, and keep its
 * descriptor, until the next write. Peek at the socket instead. */
static bool client_gone(struct MHD_Connection *c) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(
                c, MHD_CONNECTION_INFO_CONNECTION_FD);
        char byte;
        ssize_t n;

        if (!ci)
                return false;
        n = recv(ci->connect_fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void watch_resume(watch *w) {
        if (w->suspended) {
                w->suspended = false;
                MHD_resume_connection(w->conn);
                kick(w->slot);
        }
}

static void watch_close(watch *w) {
        w->closed = true;
        watch_resume(w);
}

static void watch_append(watch *w, const char *line) {
        if (w->closed)
                return;
        if (tend_buf_adds(&w->out, line) < 0) {
                log_warning("A watch of %s is too slow; closing it", w->res->plural);
                watch_close(w);
                return;
        }
        w->last_write = now_monotonic();
        watch_resume(w);
}

static ssize_t watch_reader(void *cls, uint64_t pos, char *buf, size_t max) {
        watch *w = cls;
        size_t n;

        if (w->sent < w->out.len) {
                n = MIN(max, w->out.len - w->sent);
                memcpy(buf, w->out.data + w->sent, n);
                w->sent += n;
                if (w->sent == w->out.len) {
                        tend_buf_reset(&w->out);
                        w->sent = 0;
                }
                return (ssize_t) n;
        }
        if (w->closed || w->s->closing ||
            (w->ends_at != USEC_INFINITY && now_monotonic() >= w->ends_at))
                return MHD_CONTENT_READER_END_OF_STREAM;
        MHD_suspend_connection(w->conn);
        w->suspended = true;
        return 0;
}

static void watch_free(void *cls) {
        watch *w = cls;
        api_server *s = w->s;

        if (w->prev)
                w->prev->next = w->next;
        else if (s->watches == w)
                s->watches = w->next;
        if (w->next)
                w->next->prev = w->prev;
        filter_done(&w->f);
        tend_buf_free(&w->out);
        free(w);
}

static char *event_line(const char *type, json_t *obj) {
        json_t *ev = json_pack("{s:s, s:O}", "type", type, "object", obj);
        char *s = ev ? json_dumps(ev, JSON_COMPACT) : NULL, *line;
        json_decref(ev);
        if (!s)
                return NULL;
        line = strprintf("%s\n", s);
        free(s);
        return line;
}

static enum MHD_Result start_watch(req *r, const resource *res, filter *f) {
        api_server *s = r->s;
        const char *rvs = arg(r, "resourceVersion"), *ts = arg(r, "timeoutSeconds");
        struct MHD_Response *resp;
        enum MHD_Result ret;
        uint64_t since = 0;
        int64_t timeout = 0;
        watch *w;

        if (!r->conn) {
                filter_done(f);
                return send_status(r, 400, "BadRequest", "a watch needs a connection");
        }
        if (arg_true(r, "sendInitialEvents")) {
                filter_done(f);
                /* WatchList is not implemented: say so, and clients fall back
                 * to list + watch (k8s-semantics §10.4). */
                return send_status(r, 400, "BadRequest",
                                   "sendInitialEvents is not supported; "
                                   "list, then watch from its resourceVersion");
        }
        if ((rvs && *rvs && safe_atou64(rvs, &since) < 0) ||
            (ts && (safe_atoi64(ts, &timeout) < 0 || timeout < 0))) {
                filter_done(f);
                return send_status(r, 400, "BadRequest",
                                   "invalid resourceVersion or timeoutSeconds");
        }
        w = new0(watch, 1);
        if (!w) {
                filter_done(f);
                return MHD_NO;
        }
        w->s = s;
        w->slot = r->slot;
        w->conn = r->conn;
        w->res = res;
        w->f = *f;
        w->out = TEND_BUF_INIT(MAX_WATCH_BUFFER);
        /* saturating: a timeout past what usec_t holds is no timeout */
        w->ends_at = timeout > 0 && (uint64_t) timeout <
                                             (USEC_INFINITY - now_monotonic()) / USEC_PER_SEC
                             ? now_monotonic() + (usec_t) timeout * USEC_PER_SEC
                             : USEC_INFINITY;
        w->last_write = now_monotonic();

        if (since == 0) {
                /* No version: the current state as ADDED events first. */
                size_t n = 0;
                _cleanup_free_ list_ref *refs = sorted_refs(s, res, &n);
                for (size_t i = 0; refs && i < n; i++) {
                        json_t *item = encode_obj(res->kind, refs[i].obj);
                        _cleanup_free_ char *line = item && filter_match(&w->f, item)
                                                            ? event_line("ADDED", item)
                                                            : NULL;
                        json_decref(item);
                        if (line)
                                (void) tend_buf_adds(&w->out, line);
                }
        } else {
                /* From the ring: every change after `since`, or 410 if the
                 * ring no longer reaches back that far. */
                uint64_t oldest = s->ring_n ? s->ring[s->ring_head].rv
                                            : store_resource_version(s->store) + 1;
                if (since + 1 < oldest && since < store_resource_version(s->store)) {
                        _cleanup_free_ char *msg = strprintf("too old resource version: %" PRIu64
                                                             " (%" PRIu64 ")",
                                                             since, oldest - 1);
                        json_t *st = status_json(410, "Expired", msg, NULL);
                        _cleanup_free_ char *line = event_line("ERROR", st);
                        json_decref(st);
                        if (line)
                                (void) tend_buf_adds(&w->out, line);
                        w->closed = true;
                } else
                        for (size_t k = 0; k < s->ring_n; k++) {
                                change *c = &s->ring[(s->ring_head + k) % CHANGE_RING];
                                json_t *ev;
                                if (c->rv <= since || c->kind != res->kind)
                                        continue;
                                ev = json_loads(c->line, 0, NULL);
                                if (ev && filter_match(&w->f, json_object_get(ev, "object")))
                                        (void) tend_buf_adds(&w->out, c->line);
                                json_decref(ev);
                        }
        }

        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, watch_reader, w,
                                                 watch_free);
        if (!resp) {
                watch_free(w);
                return MHD_NO;
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        w->next = s->watches;
        if (s->watches)
                s->watches->prev = w;
        s->watches = w;
        count_code(s, 200);
        ret = MHD_queue_response(r->conn, 200, resp);
        MHD_destroy_response(resp);
        return ret;
}

static void on_store_change(store_kind kind, store_change change_type, const void *obj, void *u) {
        api_server *s = u;
        static const char *const types[] = { "ADDED", "MODIFIED", "DELETED" };
        const char *written = store_note_json(s->store);
        json_t *j = NULL;
        char *line;
        change *c;

        /* The commit encoded the object already: that text makes the line.
         * It is parsed again only where a watcher filters this kind. */
        if (written)
                line = strprintf("{\"type\":\"%s\",\"object\":%s}\n", types[change_type], written);
        else {
                j = encode_obj(kind, obj);
                line = j ? event_line(types[change_type], j) : NULL;
        }
        if (!line) {
                json_decref(j);
                return;
        }
        /* Into the ring (the oldest goes when it is full). */
        if (s->ring_n == CHANGE_RING) {
                c = &s->ring[s->ring_head];
                free(c->line);
                s->ring_head = (s->ring_head + 1) % CHANGE_RING;
                s->ring_n--;
        }
        c = &s->ring[(s->ring_head + s->ring_n++) % CHANGE_RING];
        *c = (change){ .rv = ((const spec_deployment *) obj)->metadata.resource_version,
                       .kind = kind,
                       .line = line };
        for (watch *w = s->watches; w; w = w->next) {
                if (w->res->kind != kind)
                        continue;
                if (!j && !(j = encode_obj(kind, obj)))
                        break;
                if (filter_match(&w->f, j))
                        watch_append(w, line);
        }
        json_decref(j);
}

static void on_heartbeat(uv_timer_t *t) {
        api_server *s = t->data;
        usec_t now = now_monotonic();

        for (watch *w = s->watches; w; w = w->next) {
                if ((w->ends_at != USEC_INFINITY && now >= w->ends_at) ||
                    (w->suspended && client_gone(w->conn)))
                        watch_close(w);
                else if (now - w->last_write >= s->heartbeat_interval)
                        watch_append(w, "\n");
        }
}

/* ---- logs ----------------------------------------------------------------------------------- */

struct follower {
        follower *prev, *next;
        api_server *s;
        slot *slot;
        struct MHD_Connection *conn;
        char *ns, *pod;
        char *path; /* opened when it appears, for a pod yet to write */
        int fd;
        off_t offset;
        bool suspended;
        bool gone; /* the client hung up */
        bool done; /* tendd stops */
};

static char *pod_log_path(api_server *s, const spec_pod *p) {
        const char *c = p->spec.n_containers ? p->spec.containers[0].name : "main";
        return rt_log_path(s->state_dir, p->metadata.namespace, p->metadata.name, c);
}

/* Where the last n lines of a file begin, read backwards from its end in
 * blocks: the cost is that of the tail, not of the file. A final newline
 * ends the last line rather than starting another. n < 0: 0. */
static off_t tail_offset(int fd, off_t size, int64_t n) {
        char buf[64 * 1024];
        int64_t k = 0;

        if (n < 0)
                return 0;
        if (n == 0)
                return size;
        for (off_t end = size; end > 0;) {
                size_t len = (size_t) MIN(end, (off_t) sizeof buf);
                off_t pos = end - (off_t) len;
                ssize_t r = pread(fd, buf, len, pos);
                if (r < 0)
                        return -errno;
                if ((size_t) r != len)
                        return -EIO; /* truncated meanwhile (a rotation) */
                for (size_t i = len; i > 0; i--)
                        if (buf[i - 1] == '\n' && pos + (off_t) i != size && ++k == n)
                                return pos + (off_t) i;
                end = pos;
        }
        return 0;
}

static ssize_t follow_reader(void *cls, uint64_t pos, char *buf, size_t max) {
        follower *f = cls;
        const spec_pod *p;
        struct stat st;
        ssize_t n;

        if (f->gone)
                return MHD_CONTENT_READER_END_WITH_ERROR;
        if (f->s->closing || f->done)
                return MHD_CONTENT_READER_END_OF_STREAM;
        if (f->fd < 0)
                f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
        if (f->fd >= 0) {
                /* Copy-then-truncate rotation: a file shorter than where we
                 * are was truncated; start over from its beginning. */
                if (fstat(f->fd, &st) == 0 && st.st_size < f->offset)
                        f->offset = 0;
                n = pread(f->fd, buf, max, f->offset);
                if (n > 0) {
                        f->offset += n;
                        return n;
                }
        }
        p = store_get(f->s->store, STORE_POD, f->ns, f->pod);
        if (!p || spec_pod_terminal(p))
                return MHD_CONTENT_READER_END_OF_STREAM;
        MHD_suspend_connection(f->conn);
        f->suspended = true;
        return 0;
}

static void follow_free(void *cls) {
        follower *f = cls;
        api_server *s = f->s;

        if (f->prev)
                f->prev->next = f->next;
        else if (s->followers == f)
                s->followers = f->next;
        if (f->next)
                f->next->prev = f->prev;
        safe_close(f->fd);
        free(f->ns);
        free(f->pod);
        free(f->path);
        free(f);
}

/* Followers poll their files: a quarter second is the latency of `logs -f`. */
static void on_follow_timer(uv_timer_t *t) {
        api_server *s = t->data;
        for (follower *f = s->followers; f; f = f->next)
                if (f->suspended) {
                        f->gone = client_gone(f->conn);
                        f->suspended = false;
                        MHD_resume_connection(f->conn);
                        kick(f->slot);
                }
}

static enum MHD_Result handle_logs(req *r, const char *ns, const char *name) {
        api_server *s = r->s;
        const spec_pod *p = store_get(s->store, STORE_POD, ns, name);
        const char *tl = arg(r, "tailLines");
        int64_t tail = -1;
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct MHD_Response *resp;
        enum MHD_Result ret;
        struct stat st;
        off_t off = 0;

        if (!p)
                return not_found(r, &resources[2], name);
        if (tl && (safe_atoi64(tl, &tail) < 0 || tail < 0))
                return send_status(r, 400, "BadRequest",
                                   "tailLines must be a non-negative integer");
        if (arg_true(r, "previous")) {
                const char *pred = spec_map_get(&p->metadata.annotations, AGENT_ANN_PREDECESSOR);
                const spec_pod *pp = pred ? store_get(s->store, STORE_POD, ns, pred) : NULL;
                if (!pp)
                        return send_status(
                                r, 400, "BadRequest",
                                "previous terminated container \"%s\" in pod \"%s\" not "
                                "found",
                                p->spec.n_containers ? p->spec.containers[0].name : "main", name);
                p = pp;
        }
        path = pod_log_path(s, p);
        if (!path)
                return MHD_NO;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 && errno != ENOENT)
                return send_status(r, 500, NULL, "reading %s: %s", path, strerror(errno));
        if (fd < 0 && !arg_true(r, "previous") && !arg_true(r, "follow") &&
            p->status.phase == SPEC_POD_PENDING) {
                /* Nothing ran yet: say what it waits for, as Kubernetes
                 * (a follower waits for the first line instead). */
                const spec_container_status *cs = p->status.n_container_statuses
                                                          ? &p->status.container_statuses[0]
                                                          : NULL;
                const char *why = cs && cs->state.waiting ? cs->state.waiting->reason : NULL;
                return send_status(r, 400, "BadRequest",
                                   "container \"%s\" in pod \"%s\" is waiting to start: %s%s",
                                   p->spec.n_containers ? p->spec.containers[0].name : "main", name,
                                   why ?: "ContainerCreating",
                                   why && streq(why, "CrashLoopBackOff")
                                           ? " (--previous shows the last run)"
                                           : "");
        }
        if (fd >= 0) {
                if (fstat(fd, &st) < 0)
                        return send_status(r, 500, NULL, "reading %s: %s", path, strerror(errno));
                off = tail_offset(fd, st.st_size, tail);
                if (off < 0)
                        return send_status(r, 500, NULL, "reading %s: %s", path,
                                           strerror((int) -off));
        }

        if (arg_true(r, "follow") && !arg_true(r, "previous") && !r->conn)
                return send_status(r, 400, "BadRequest", "following a log needs a connection");
        if (arg_true(r, "follow") && !arg_true(r, "previous")) {
                follower *f = new0(follower, 1);

                if (!f)
                        return MHD_NO;
                f->s = s;
                f->slot = r->slot;
                f->conn = r->conn;
                f->ns = strdup(ns);
                f->pod = strdup(name);
                f->path = TAKE_PTR(path);
                f->fd = TAKE_FD(fd); /* -1: nothing logged yet; opened when it is */
                f->offset = off;
                resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, follow_reader,
                                                         f, follow_free);
                if (!resp) {
                        follow_free(f);
                        return MHD_NO;
                }
                f->next = s->followers;
                if (s->followers)
                        s->followers->prev = f;
                s->followers = f;
        } else if (fd < 0)
                return queue(r, 200, "text/plain", strdup(""));
        else if (!r->conn) {
                _cleanup_free_ char *text = NULL;
                size_t len = (size_t) (st.st_size - off);
                text = malloc(len + 1);
                if (!text)
                        return send_oom(r);
                len = (size_t) MAX(pread(fd, text, len, off), 0);
                text[len] = 0;
                return queue(r, 200, "text/plain", TAKE_PTR(text));
        } else {
                /* Straight from the file, whatever its size or content. */
                resp = MHD_create_response_from_fd_at_offset64((uint64_t) (st.st_size - off), fd,
                                                               (uint64_t) off);
                if (!resp)
                        return MHD_NO;
                fd = -EBADF; /* the response owns it now */
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
        count_code(s, 200);
        ret = MHD_queue_response(r->conn, 200, resp);
        MHD_destroy_response(resp);
        return ret;
}

/* ---- metrics --------------------------------------------------------------------------------- */

static void histogram_text(tend_buf *b, const char *name, const char *help,
                           const tend_histogram *h) {
        (void) tend_buf_addf(b, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
        for (size_t i = 0; i < TEND_HISTOGRAM_BUCKETS; i++)
                (void) tend_buf_addf(b, "%s_bucket{le=\"%g\"} %" PRIu64 "\n", name,
                                     tend_histogram_bounds[i], h->buckets[i]);
        (void) tend_buf_addf(
                b, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n%s_sum %.6f\n%s_count %" PRIu64 "\n", name,
                h->count, name, h->sum, name, h->count);
}

static enum MHD_Result handle_metrics(req *r) {
        api_server *s = r->s;
        const agent_metrics *m = agent_get_metrics(s->agent);
        tend_buf b = TEND_BUF_INIT(1 << 20);
        const void *const *items;
        size_t n = store_list(s->store, STORE_POD, &items);
        uint64_t phases[_SPEC_POD_PHASE_MAX] = {};

        for (size_t i = 0; i < n; i++) {
                int ph = ((const spec_pod *) items[i])->status.phase;
                if (ph >= 0 && ph < _SPEC_POD_PHASE_MAX)
                        phases[ph]++;
        }
        (void) tend_buf_adds(&b, "# HELP tend_pods Pods by phase.\n# TYPE tend_pods gauge\n");
        for (int i = 0; i < _SPEC_POD_PHASE_MAX; i++)
                (void) tend_buf_addf(&b, "tend_pods{phase=\"%s\"} %" PRIu64 "\n",
                                     spec_pod_phase_to_string(i), phases[i]);
        (void) tend_buf_addf(
                &b,
                "# HELP tend_pod_starts_total Pod processes started.\n"
                "# TYPE tend_pod_starts_total counter\ntend_pod_starts_total %" PRIu64 "\n"
                "# HELP tend_pod_start_errors_total Pods that could not be started.\n"
                "# TYPE tend_pod_start_errors_total counter\n"
                "tend_pod_start_errors_total %" PRIu64 "\n"
                "# HELP tend_pods_lost_total Pods whose process went away, by reason.\n"
                "# TYPE tend_pods_lost_total counter\n"
                "tend_pods_lost_total{reason=\"exit\"} %" PRIu64 "\n"
                "tend_pods_lost_total{reason=\"signal\"} %" PRIu64 "\n"
                "tend_pods_lost_total{reason=\"liveness\"} %" PRIu64 "\n"
                "tend_pods_lost_total{reason=\"unknown\"} %" PRIu64 "\n"
                "# HELP tend_crashloop_backoffs_total Replacements delayed by the "
                "crash-loop back-off.\n"
                "# TYPE tend_crashloop_backoffs_total counter\n"
                "tend_crashloop_backoffs_total %" PRIu64 "\n"
                "# HELP tend_rollouts_total Rollouts by outcome.\n"
                "# TYPE tend_rollouts_total counter\n"
                "tend_rollouts_total{event=\"started\"} %" PRIu64 "\n"
                "tend_rollouts_total{event=\"completed\"} %" PRIu64 "\n"
                "tend_rollouts_total{event=\"failed\"} %" PRIu64 "\n",
                m->pod_starts, m->pod_start_errors, m->lost_exit, m->lost_signal, m->lost_liveness,
                m->lost_unknown, m->backoffs, m->rollouts_started, m->rollouts_completed,
                m->rollouts_failed);
        histogram_text(&b, "tend_reconcile_pass_duration_seconds", "Duration of a controller pass.",
                       &m->pass_duration);
        histogram_text(&b, "tend_store_commit_duration_seconds", "Duration of a store commit.",
                       store_commit_histogram(s->store));
        (void) tend_buf_adds(&b, "# HELP tend_respawn_phase_seconds Where a replacement's time "
                                 "goes, from its predecessor's exit to its exec, by phase: queue "
                                 "(exit noticed to pass), pass (the controllers), spawn.\n"
                                 "# TYPE tend_respawn_phase_seconds histogram\n");
        for (int ph = 0; ph < _AGENT_RESPAWN_PHASE_MAX; ph++) {
                const tend_histogram *h = &m->respawn[ph];
                const char *name = agent_respawn_phase_names[ph];
                for (size_t i = 0; i < TEND_HISTOGRAM_BUCKETS; i++)
                        (void) tend_buf_addf(&b,
                                             "tend_respawn_phase_seconds_bucket{phase=\"%s\","
                                             "le=\"%g\"} %" PRIu64 "\n",
                                             name, tend_histogram_bounds[i], h->buckets[i]);
                (void) tend_buf_addf(&b,
                                     "tend_respawn_phase_seconds_bucket{phase=\"%s\",le=\"+Inf\"} "
                                     "%" PRIu64 "\n"
                                     "tend_respawn_phase_seconds_sum{phase=\"%s\"} %.6f\n"
                                     "tend_respawn_phase_seconds_count{phase=\"%s\"} %" PRIu64 "\n",
                                     name, h->count, name, h->sum, name, h->count);
        }
        (void) tend_buf_adds(&b, "# HELP tend_api_requests_total API requests by status code.\n"
                                 "# TYPE tend_api_requests_total counter\n");
        for (size_t i = 0; i < ELEMENTSOF(s->codes) && s->codes[i]; i++)
                (void) tend_buf_addf(&b, "tend_api_requests_total{code=\"%u\"} %" PRIu64 "\n",
                                     s->codes[i], s->code_counts[i]);
        return queue(r, 200, "text/plain; version=0.0.4", tend_buf_take(&b));
}

/* ---- discovery --------------------------------------------------------------------------------
 */

static json_t *resource_list(const char *gv) {
        json_t *a = json_array();
        if (streq(gv, "v1")) {
                json_array_append_new(a,
                                      json_pack("{s:s, s:s, s:b, s:s, s:[s,s,s,s], s:[s], s:[s]}",
                                                "name", "pods", "singularName", "pod", "namespaced",
                                                1, "kind", "Pod", "verbs", "get", "list", "watch",
                                                "delete", "shortNames", "po", "categories", "all"));
                json_array_append_new(a, json_pack("{s:s, s:s, s:b, s:s, s:[s]}", "name",
                                                   "pods/log", "singularName", "", "namespaced", 1,
                                                   "kind", "Pod", "verbs", "get"));
                json_array_append_new(a, json_pack("{s:s, s:s, s:b, s:s, s:[s,s,s], s:[s]}", "name",
                                                   "events", "singularName", "event", "namespaced",
                                                   1, "kind", "Event", "verbs", "get", "list",
                                                   "watch", "shortNames", "ev"));
        } else {
                json_array_append_new(
                        a, json_pack("{s:s, s:s, s:b, s:s, s:[s,s,s,s,s,s,s], s:[s], s:[s]}",
                                     "name", "deployments", "singularName", "deployment",
                                     "namespaced", 1, "kind", "Deployment", "verbs", "create",
                                     "delete", "get", "list", "patch", "update", "watch",
                                     "shortNames", "deploy", "categories", "all"));
                json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:s, s:b, s:s, s:[s,s,s]}",
                                                   "name", "deployments/scale", "group",
                                                   "autoscaling", "version", "v1", "singularName",
                                                   "", "namespaced", 1, "kind", "Scale", "verbs",
                                                   "get", "patch", "update"));
                json_array_append_new(a, json_pack("{s:s, s:s, s:b, s:s, s:[s]}", "name",
                                                   "deployments/status", "singularName", "",
                                                   "namespaced", 1, "kind", "Deployment", "verbs",
                                                   "get"));
                json_array_append_new(
                        a, json_pack("{s:s, s:s, s:b, s:s, s:[s,s,s,s], s:[s], s:[s]}", "name",
                                     "replicasets", "singularName", "replicaset", "namespaced", 1,
                                     "kind", "ReplicaSet", "verbs", "delete", "get", "list",
                                     "watch", "shortNames", "rs", "categories", "all"));
                json_array_append_new(a, json_pack("{s:s, s:s, s:s, s:s, s:b, s:s, s:[s,s,s]}",
                                                   "name", "replicasets/scale", "group",
                                                   "autoscaling", "version", "v1", "singularName",
                                                   "", "namespaced", 1, "kind", "Scale", "verbs",
                                                   "get", "patch", "update"));
        }
        return json_pack("{s:s, s:s, s:s, s:o}", "kind", "APIResourceList", "apiVersion", "v1",
                         "groupVersion", gv, "resources", a);
}

/* ---- apply: many objects, all or nothing ------------------------------------------------- */

/*
 * POST /apis/tend.io/v1/apply with a List of Deployments: what `tend apply`
 * sends, so that a file or directory of several objects is applied all or
 * nothing (one agent_apply(), one durable commit). Answers with each
 * object's result, or 422 with every error.
 */
static int apply_docs(req *r, enum MHD_Result *ret, spec_docs *docs) {
        json_t *root, *items, *item;
        json_error_t e;
        size_t i, n;

        root = r->body.len
                       ? json_loadb(tend_buf_str(&r->body), r->body.len, JSON_REJECT_DUPLICATES, &e)
                       : NULL;
        if (!root)
                return body_docs(r, ret, docs); /* YAML, or an error with its place */
        items = json_object_get(root, "items");
        if (!streq_ptr(json_string_value(json_object_get(root, "kind")), "List") ||
            !json_is_array(items))
                items = NULL;
        n = items ? json_array_size(items) : 1;
        docs->items = new0(spec_doc, n ?: 1);
        if (!docs->items) {
                json_decref(root);
                *ret = MHD_NO;
                return -ENOMEM;
        }
        if (!items)
                docs->items[docs->n++] = (spec_doc){ .root = json_incref(root),
                                                     .line = 1,
                                                     .index = 1 };
        else
                json_array_foreach (items, i, item)
                        docs->items[docs->n++] = (spec_doc){ .root = json_incref(item),
                                                             .line = 1,
                                                             .index = (unsigned) i + 1 };
        json_decref(root);
        return 0;
}

static enum MHD_Result handle_apply(req *r) {
        api_server *s = r->s;
        enum MHD_Result ret;
        spec_docs docs = {};
        json_t *results;
        spec_errors errs = {};
        spec_deployment **ds = NULL;
        agent_apply_result *res = NULL;
        size_t n, i;
        int rr;

        /* A List's items arrive as documents of their own. JSON (what tend
         * sends) is read as it is, up to the body cap: the 1 MiB limit of
         * a manifest file is per file, and a directory is many files. */
        if (apply_docs(r, &ret, &docs) < 0)
                return ret;
        n = docs.n;
        ds = new0(spec_deployment *, n ?: 1);
        res = new0(agent_apply_result, n ?: 1);
        if (!ds || !res) {
                spec_docs_done(&docs);
                free(ds);
                free(res);
                return MHD_NO;
        }
        for (i = 0; i < n; i++) {
                json_t *item = docs.items[i].root;
                const char *ns = json_field(item, "metadata.namespace");
                ds[i] = decode_deployment(r, item, ns ?: "default", NULL, &ret);
                if (ds[i])
                        warn_file_owned(r, ds[i]->metadata.namespace, ds[i]->metadata.name);
                if (ds[i]) {
                        /* As kubectl apply: fields the manifest leaves out
                         * keep their current values (replicas set by a
                         * scale, a paused rollout), not the defaults. */
                        const spec_deployment *cur = store_get(s->store, STORE_DEPLOYMENT,
                                                               ds[i]->metadata.namespace,
                                                               ds[i]->metadata.name);
                        json_t *spec = json_object_get(item, "spec");
                        if (cur && !json_object_get(spec, "replicas"))
                                ds[i]->spec.replicas = cur->spec.replicas;
                        if (cur && !json_object_get(spec, "paused"))
                                ds[i]->spec.paused = cur->spec.paused;
                }
                if (!ds[i]) {
                        for (size_t k = 0; k < i; k++)
                                spec_deployment_free(ds[k]);
                        free(ds);
                        free(res);
                        spec_docs_done(&docs);
                        return ret;
                }
        }
        spec_docs_done(&docs);
        rr = agent_apply_ex(s->agent, ds, n, &errs, res,
                            streq_ptr(arg(r, "dryRun"), "All") ? AGENT_APPLY_DRY_RUN : 0);
        if (rr == -EINVAL) {
                _cleanup_buf_ tend_buf msg = TEND_BUF_INIT(1 << 20);
                json_t *causes = json_array();
                for (size_t k = 0; k < errs.n; k++) {
                        _cleanup_free_ char *line = spec_error_format(&errs.items[k]);
                        (void) tend_buf_addf(&msg, "%s%s", k ? "\n" : "", strna(line));
                        json_array_append_new(causes, cause_json(&errs.items[k]));
                }
                ret = send_json(r, 422,
                                status_json(422, "Invalid", tend_buf_str(&msg),
                                            json_pack("{s:o}", "causes", causes)));
        } else if (rr < 0)
                ret = send_status(r, 500, NULL, "writing to the store: %s", strerror(-rr));
        else {
                static const char *const words[] = { "created", "configured", "unchanged" };
                results = json_array();
                for (size_t k = 0; k < n; k++)
                        json_array_append_new(results, json_pack("{s:s, s:s, s:s}", "namespace",
                                                                 ds[k]->metadata.namespace, "name",
                                                                 ds[k]->metadata.name, "result",
                                                                 words[res[k]]));
                agent_kick(s->agent);
                ret = send_json(r, 200,
                                json_pack("{s:s, s:s, s:o}", "kind", "ApplyResult", "apiVersion",
                                          "tend.io/v1", "items", results));
        }
        spec_errors_done(&errs);
        for (size_t k = 0; k < n; k++)
                spec_deployment_free(ds[k]);
        free(ds);
        free(res);
        return ret;
}

/* ---- routing --------------------------------------------------------------------------------- */

static enum MHD_Result route(req *r, const char *url, const char *method) {
        _cleanup_free_ char *copy = strdup(url);
        char *seg[8], *save = NULL;
        size_t n = 0;

        if (!copy)
                return MHD_NO;
        for (char *t = strtok_r(copy, "/", &save); t && n < ELEMENTSOF(seg);
             t = strtok_r(NULL, "/", &save))
                seg[n++] = t;

        if (n == 1 && (streq(seg[0], "healthz") || streq(seg[0], "livez")))
                return queue(r, 200, "text/plain", strdup("ok"));
        if (n == 1 && streq(seg[0], "readyz"))
                return queue(r, 200, "text/plain", strdup("ok"));
        if (n == 1 && streq(seg[0], "version"))
                return send_json(r, 200,
                                 json_pack("{s:s, s:s, s:s, s:s, s:s}", "major", "0", "minor", "1",
                                           "gitVersion", "v" TEND_VERSION, "platform", "linux",
                                           "implementation", "tendd"));
        if (n == 1 && streq(seg[0], "metrics"))
                return handle_metrics(r);
        if (n == 1 && streq(seg[0], "api"))
                return send_json(
                        r, 200, json_pack("{s:s, s:[s]}", "kind", "APIVersions", "versions", "v1"));
        if (n == 1 && streq(seg[0], "apis"))
                return send_json(r, 200,
                                 json_pack("{s:s, s:s, s:[{s:s, s:[{s:s, s:s}], s:{s:s, s:s}}]}",
                                           "kind", "APIGroupList", "apiVersion", "v1", "groups",
                                           "name", "apps", "versions", "groupVersion", "apps/v1",
                                           "version", "v1", "preferredVersion", "groupVersion",
                                           "apps/v1", "version", "v1"));
        if (n == 2 && streq(seg[0], "api") && streq(seg[1], "v1"))
                return send_json(r, 200, resource_list("v1"));
        if (n == 3 && streq(seg[0], "apis") && streq(seg[1], "apps") && streq(seg[2], "v1"))
                return send_json(r, 200, resource_list("apps/v1"));

        if (n == 4 && streq(seg[0], "apis") && streq(seg[1], "tend.io") && streq(seg[2], "v1") &&
            streq(seg[3], "apply"))
                return streq(method, "POST") ? handle_apply(r)
                                             : send_status(r, 405, NULL, "POST a List to apply");

        /* /api/v1/... and /apis/apps/v1/... */
        size_t base;
        const char *prefix;
        if (n >= 2 && streq(seg[0], "api") && streq(seg[1], "v1"))
                base = 2, prefix = "api/v1";
        else if (n >= 3 && streq(seg[0], "apis") && streq(seg[1], "apps") && streq(seg[2], "v1"))
                base = 3, prefix = "apis/apps/v1";
        else
                return send_status(r, 404, "NotFound",
                                   "the server could not find the requested resource");

        const char *ns = NULL;
        size_t i = base;
        if (n >= i + 2 && streq(seg[i], "namespaces")) {
                ns = seg[i + 1];
                i += 2;
        }
        if (i >= n)
                return send_status(r, 404, "NotFound",
                                   "the server could not find the requested resource");
        for (size_t k = 0; k < ELEMENTSOF(resources); k++) {
                const resource *res = &resources[k];
                if (!streq(res->prefix, prefix) || !streq(res->plural, seg[i]))
                        continue;
                if (i + 1 == n)
                        return handle_collection(r, res, ns, method);
                if (!ns)
                        return send_status(r, 404, "NotFound",
                                           "name a namespace: /%s/namespaces/NS/%s/NAME", prefix,
                                           res->plural);
                if (res->kind == STORE_DEPLOYMENT && !streq(method, "GET"))
                        warn_file_owned(r, ns, seg[i + 1]);
                return handle_object(r, res, ns, seg[i + 1], i + 2 < n ? seg[i + 2] : NULL, method);
        }
        return send_status(r, 404, "NotFound", "the server could not find the requested resource");
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
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
                authorize(r);
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
        if (r->deny)
                return send_json(r, r->deny, status_json(r->deny, NULL, r->deny_message, NULL));
        if (r->too_large)
                return send_status(r, 413, "RequestEntityTooLarge",
                                   "the request body is larger than %zu bytes", sl->s->max_body);
        log_debug("%s %s", method, url);
        return route(r, url, method);
}

unsigned api_server_answer(api_server *s, const api_request *q, char **ret_body) {
        req r = { .s = s, .slot = &s->slots[0], .direct = q };
        unsigned code;

        *ret_body = NULL;
        r.body = TEND_BUF_INIT(s->max_body);
        if (q->body_len > s->max_body)
                (void) send_status(&r, 413, "RequestEntityTooLarge",
                                   "the request body is larger than %zu bytes", s->max_body);
        else if (tend_buf_add(&r.body, q->body ?: "", q->body_len) < 0)
                (void) send_oom(&r);
        else
                (void) route(&r, q->url, q->method);
        code = r.direct_code ?: 500;
        *ret_body = TAKE_PTR(r.direct_body);
        tend_buf_free(&r.body);
        free(r.warning);
        return code;
}

/* A body this large leaves freed memory in malloc's heap (its trees and
 * positions are many small blocks): give it back to the system. */
#define TRIM_AFTER_BODY (256 * 1024)

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
        req *r = *con_cls;
        bool large = r && r->body.len >= TRIM_AFTER_BODY;

        req_free(r);
        *con_cls = NULL;
        if (large)
                (void) malloc_trim(0);
}

/* ---- setup and teardown ---------------------------------------------------------------------- */

static void on_handle_closed(uv_handle_t *h) {
        api_server *s = h->data;
        if (--s->open_handles > 0)
                return;
        for (size_t k = 0; k < s->ring_n; k++) {
                change *c = &s->ring[(s->ring_head + k) % CHANGE_RING];
                free(c->line);
        }
        free(s->state_dir);
        free(s->socket_path);
        free(s->token);
        free(s);
}

static int bind_unix(const char *path, gid_t group, bool has_group, char **ret_error) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *dir = strdup(path);
        char *slash;
        int r;

        if (!dir)
                return -ENOMEM;
        if (strlen(path) >= sizeof sa.sun_path) {
                *ret_error = strprintf("socket path %s is too long (at most %zu bytes)", path,
                                       sizeof sa.sun_path - 1);
                return -ENAMETOOLONG;
        }
        slash = strrchr(dir, '/');
        if (slash && slash != dir) {
                *slash = 0;
                if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
                        r = -errno;
                        *ret_error = strprintf("cannot create %s: %s", dir, strerror(-r));
                        return r;
                }
        }
        strcpy(sa.sun_path, path);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        /* A leftover socket: in use by a live agent, or stale? */
        if (access(path, F_OK) == 0) {
                int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                bool live = probe >= 0 && connect(probe, (struct sockaddr *) &sa, sizeof sa) == 0;
                struct ucred peer = {};
                socklen_t len = sizeof peer;
                if (live)
                        (void) getsockopt(probe, SOL_SOCKET, SO_PEERCRED, &peer, &len);
                safe_close(probe);
                if (live) {
                        _cleanup_free_ char *comm = NULL;
                        char cpath[64];
                        snprintf(cpath, sizeof cpath, "/proc/%d/comm", (int) peer.pid);
                        if (peer.pid > 0 && read_full_file(cpath, 64, &comm, NULL) >= 0)
                                comm[strcspn(comm, "\n")] = 0;
                        char who[64] = "another process";
                        if (peer.pid > 0)
                                snprintf(who, sizeof who, "%s (pid %d)", comm ?: "a process",
                                         (int) peer.pid);
                        *ret_error = strprintf("socket %s is in use by %s; stop it first or "
                                               "choose another --socket",
                                               path, who);
                        return -EADDRINUSE;
                }
                (void) unlink(path);
        }
        if (bind(fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
                r = -errno;
                *ret_error = strprintf("cannot bind %s: %s", path, strerror(-r));
                return r;
        }
        if (chmod(path, 0660) < 0 || (has_group && chown(path, (uid_t) -1, group) < 0)) {
                r = -errno;
                *ret_error = strprintf("cannot set the mode of %s: %s", path, strerror(-r));
                return r;
        }
        if (listen(fd, 1024) < 0)
                return -errno;
        return TAKE_FD(fd);
}

static int bind_tcp(const char *listen_at, char **ret_error) {
        _cleanup_free_ char *host = strdup(listen_at);
        struct sockaddr_in sa = { .sin_family = AF_INET };
        _cleanup_close_ int fd = -EBADF;
        char *colon;
        int64_t port;
        int one = 1, r;

        if (!host)
                return -ENOMEM;
        colon = strrchr(host, ':');
        if (!colon || safe_atoi64(colon + 1, &port) < 0 || port < 1 || port > 65535) {
                *ret_error = strprintf("--listen %s: expected 127.0.0.1:PORT", listen_at);
                return -EINVAL;
        }
        *colon = 0;
        if (uv_ip4_addr(host, (int) port, &sa) < 0) {
                *ret_error = strprintf("--listen %s: %s is not an IPv4 address", listen_at, host);
                return -EINVAL;
        }
        /* Plain HTTP: a bearer token sent over a network is anyone's who
         * sees the traffic. Loopback only; a TLS proxy for anything else. */
        if ((ntohl(sa.sin_addr.s_addr) >> 24) != 127) {
                *ret_error = strprintf("--listen %s: only loopback addresses (127.0.0.0/8) are "
                                       "served — the API is plain HTTP and its token would cross "
                                       "the network in clear; put a TLS proxy in front of "
                                       "127.0.0.1:%d instead",
                                       listen_at, (int) port);
                return -EINVAL;
        }
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, (struct sockaddr *) &sa, sizeof sa) < 0 || listen(fd, 1024) < 0) {
                r = -errno;
                *ret_error = strprintf("cannot listen on %s: %s", listen_at, strerror(-r));
                return r;
        }
        return TAKE_FD(fd);
}

/* libmicrohttpd's own messages (a client that went away mid-answer, ...)
 * are about one connection, not tendd: debug level, in our log. */
static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
        char line[512];
        size_t n;

        (void) cls;
        (void) vsnprintf(line, sizeof line, fmt, ap);
        n = strlen(line);
        while (n > 0 && line[n - 1] == '\n')
                line[--n] = 0;
        log_debug("http: %s", line);
}

/* Connections per listener. The local socket has a pool of its own that
 * TCP clients cannot use up, and TCP is kept well under the descriptors
 * the pods need (a pidfd and a log each). Idle connections are closed
 * after idle_timeout, so that a flood of them locks nobody out for long. */
#define UNIX_CONNECTIONS_MAX 1000
#define TCP_CONNECTIONS_MAX 256

static int start_slot(api_server *s, int fd, bool tcp, char **ret_error) {
        slot *sl = &s->slots[s->n_slots];
        const union MHD_DaemonInfo *info;
        unsigned timeout = (unsigned) MAX(s->idle_timeout / USEC_PER_SEC, 1);

        sl->s = s;
        sl->tcp = tcp;
        sl->fd = fd;
        sl->d = MHD_start_daemon(MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG, 0,
                                 NULL, NULL, on_request, sl, MHD_OPTION_LISTEN_SOCKET, fd,
                                 MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
                                 MHD_OPTION_SIGPIPE_HANDLED_BY_APP, 1, MHD_OPTION_EXTERNAL_LOGGER,
                                 on_mhd_log, NULL, MHD_OPTION_CONNECTION_LIMIT,
                                 tcp ? TCP_CONNECTIONS_MAX : UNIX_CONNECTIONS_MAX,
                                 MHD_OPTION_CONNECTION_TIMEOUT, timeout, MHD_OPTION_END);
        if (!sl->d) {
                safe_close(fd);
                *ret_error = strdup("cannot start the HTTP server");
                return -EIO;
        }
        info = MHD_get_daemon_info(sl->d, MHD_DAEMON_INFO_EPOLL_FD);
        if (!info) {
                MHD_stop_daemon(sl->d);
                sl->d = NULL;
                *ret_error = strdup("the HTTP server has no epoll descriptor");
                return -EIO;
        }
        uv_poll_init(s->loop, &sl->poll, info->epoll_fd);
        sl->poll.data = sl;
        uv_poll_start(&sl->poll, UV_READABLE, on_slot_poll);
        uv_timer_init(s->loop, &sl->timer);
        sl->timer.data = sl;
        s->open_handles += 2;
        s->n_slots++;
        arm(sl);
        return 0;
}

int api_server_new(const api_config *c, api_server **ret, char **ret_error) {
        api_server *s = new0(api_server, 1);
        int fd, r;

        *ret_error = NULL;
        if (!s)
                return -ENOMEM;
        s->loop = c->loop;
        s->agent = c->agent;
        s->store = agent_get_store(c->agent);
        s->state_dir = strdup(c->state_dir);
        s->socket_path = strdup(c->socket_path);
        s->has_group = c->has_group;
        s->group = c->group;
        s->token = c->token ? strdup(c->token) : NULL;
        s->max_body = c->max_body ?: 2 * 1024 * 1024;
        s->heartbeat_interval = c->heartbeat ?: 15 * USEC_PER_SEC;
        s->idle_timeout = c->idle_timeout ?: 30 * USEC_PER_SEC;
        if (!s->state_dir || !s->socket_path) {
                free(s);
                return -ENOMEM;
        }
        uv_timer_init(s->loop, &s->heartbeat);
        s->heartbeat.data = s;
        uv_timer_init(s->loop, &s->follow_timer);
        s->follow_timer.data = s;
        s->open_handles = 2;
        uv_timer_start(&s->heartbeat, on_heartbeat, 1000, 1000);
        uv_timer_start(&s->follow_timer, on_follow_timer, 250, 250);

        fd = bind_unix(c->socket_path, c->group, c->has_group, ret_error);
        if (fd < 0) {
                r = fd;
                goto fail;
        }
        r = start_slot(s, fd, false, ret_error);
        if (r < 0)
                goto fail;
        if (c->listen) {
                if (!c->token) {
                        *ret_error = strdup("--listen needs --token-file: the TCP listener "
                                            "requires a bearer token");
                        r = -EINVAL;
                        goto fail;
                }
                fd = bind_tcp(c->listen, ret_error);
                if (fd < 0) {
                        r = fd;
                        goto fail;
                }
                r = start_slot(s, fd, true, ret_error);
                if (r < 0)
                        goto fail;
        }
        r = store_subscribe(s->store, on_store_change, s);
        if (r < 0)
                goto fail;
        *ret = s;
        return 0;
fail:
        api_server_close(s);
        return r;
}

void api_server_close(api_server *s) {
        if (!s || s->closing)
                return;
        /* Streams end; MHD wants every connection resumed before it stops. */
        for (watch *w = s->watches; w; w = w->next)
                watch_close(w);
        for (follower *f = s->followers; f; f = f->next) {
                f->done = true;
                if (f->suspended) {
                        f->suspended = false;
                        MHD_resume_connection(f->conn);
                }
        }
        for (size_t i = 0; i < s->n_slots; i++)
                if (s->slots[i].d)
                        MHD_run(s->slots[i].d);
        s->closing = true;
        store_unsubscribe(s->store, on_store_change, s);
        for (size_t i = 0; i < s->n_slots; i++) {
                slot *sl = &s->slots[i];
                uv_poll_stop(&sl->poll);
                sl->poll.data = sl->timer.data = s;
                uv_close((uv_handle_t *) &sl->poll, on_handle_closed);
                uv_close((uv_handle_t *) &sl->timer, on_handle_closed);
                MHD_stop_daemon(sl->d); /* closes the listening socket too */
                sl->d = NULL;
        }
        if (s->socket_path && s->n_slots > 0)
                (void) unlink(s->socket_path);
        uv_close((uv_handle_t *) &s->heartbeat, on_handle_closed);
        uv_close((uv_handle_t *) &s->follow_timer, on_handle_closed);
}
