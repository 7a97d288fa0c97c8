/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * Private to the API (api/): what its files share. Each file holds one
 * concern (server.c, http.c, write.c, route.c, selectors.c, objects.c,
 * watch.c, logs.c, metrics.c; patch.c for PATCH bodies; prep.c for a
 * deployment's write, made in the thread pool); the prefix api__ marks what one file
 * offers another.
 *
 * Streams (watch, log -f) use MHD's content-reader callbacks: when there is
 * nothing to send the connection is suspended, and resumed when something
 * arrives. Suspended connections do not notice a peer going away, so idle
 * watches get a newline every heartbeat (JSON decoders skip whitespace), and
 * every second the socket of each suspended stream is peeked at: a client
 * that hung up is let go within a second.
 */

#include <microhttpd.h>

#include "tend/api.h"

#define API_ARCH SPEC_ARCH

#define MAX_WATCH_BUFFER (8u << 20) /* a slower watcher is cut off */
#define CHANGE_RING 1000            /* changes kept for ?resourceVersion= resumes */
/* ... and at most this many bytes of them (what a resumed watch may have
 * to read again, on the loop: a few tens of milliseconds) */
#define CHANGE_RING_BYTES ((size_t) 8 << 20)

typedef struct slot {
        struct MHD_Daemon *d;
        uv_poll_t poll;
        uv_timer_t timer;
        struct api_server *s;
        bool tcp;
        bool kicked; /* api__kick() since the last MHD_run() began */
        int fd;
} slot;

typedef struct change {
        uint64_t rv;
        store_kind kind;
        char *line; /* {"type":..., "object":...}\n — parsed again only to filter a
                     * resumed watch (a tree per change would cost ~10 kB each) */
} change;

/* The TCP listener's TLS material (tls.c), PEM. ca_pem: the CA that signed
 * the certificate, where tendd made it (NULL for a user's certificate). */
typedef struct api_tls {
        char *cert_pem, *key_pem, *ca_pem;
} api_tls;

int api__tls_generate(const char *state_dir, const unsigned char ip[4], api_tls *ret,
                      char **ret_error);
int api__tls_load(const char *cert_file, const char *key_file, api_tls *ret, char **ret_error);
/* STATE_DIR/tls/token: read, or made. */
int api__tls_token(const char *state_dir, char **ret, char **ret_error);
void api__tls_done(api_tls *t);
char *api__base64(const char *data, size_t len);

typedef struct watch watch;
typedef struct req req;
typedef struct prep prep;
typedef struct api_conn api_conn;
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
        api_tls tls;
        char *listen_url; /* https://HOST:PORT, where there is a TCP listener */
        char *openapi_root, *openapi_core, *openapi_apps, *openapi_v2; /* openapi.c */
        tend_hashmap *usage;    /* usage.c: pod uid → its last CPU reading */
        tend_hashmap *cpu_high; /* metrics.c: pod uid → the most CPU time it said */
        unsigned scrapes;       /* metrics.c: /metrics answered (cpu_high's ages) */
        size_t max_body;
        usec_t heartbeat_interval;
        usec_t idle_timeout;
        slot slots[2];
        size_t n_slots;
        unsigned open_handles;
        bool closing;

        change ring[CHANGE_RING];
        size_t ring_head, ring_n, ring_bytes;

        watch *watches;
        follower *followers;
        uv_timer_t heartbeat;
        uv_timer_t follow_timer;
        uv_timer_t trim; /* loop.c: api__trim_soon() */

        const api_fleet *fleet; /* NULL: single host */
        req *waiting;           /* answered later */

        api_conn *conns; /* loop.c: every connection, for its deadline */
        uv_timer_t deadlines;
        uint64_t connections_cut;
        /* prep.c: the text the store wrote of the object a commit
         * answers with (watch.c keeps it while want) */
        struct {
                bool want;
                const char *ns, *name;
                char *json;
        } written;
        uint64_t writes_made_again; /* prep.c: the object changed meanwhile */
        uint64_t writes_rebased;    /* ... its status alone */

        /* requests by status code */
        unsigned codes[16];
        uint64_t code_counts[16];
};

struct req {
        api_server *s;
        slot *slot;
        struct MHD_Connection *conn; /* NULL: answered in memory */
        const api_request *direct;   /* what is asked, then */
        unsigned direct_code;        /* and the answer */
        char *direct_body;
        tend_buf body;
        bool too_large;
        unsigned deny;   /* 0, 401 or 403 */
        bool peer_known; /* the local socket's peer: */
        uid_t peer_uid;
        char *deny_message;
        char *warning;       /* a Warning: header for the answer (kubectl prints it) */
        bool fields_tracked; /* managedFields already made (server-side apply) */
        bool conditional;    /* it names a resourceVersion it is conditional on */
        /* Answered later (a write to the fleet's etcd): suspended until
         * then; the answer is sent when MHD calls again. */
        bool waiting;
        void (*cancel)(void *userdata, void *req); /* the work it waits for */
        void *cancel_userdata;
        unsigned later_code;
        json_t *later;
        char *later_text; /* ... or as text (the object as the store wrote it) */
        struct req *next_waiting;
        const char *method;  /* of the request (MHD's) */
        bool synced;         /* the answer waited for the fleet's etcd already */
        uint64_t fleet_mark; /* the fleet's writes before this request's */
        unsigned held_code;  /* the answer that waits for it */
        json_t *held;
        char *held_text; /* ... or its text */
        /* A deployment write in two parts (prep.c): its state; and on the
         * pool's copy of the request (pooled), the query and headers
         * copied (name, value pairs; a value may be NULL), and the answer
         * kept in direct_code, direct_body and direct_type. */
        prep *prep;
        bool pooled;
        char **copied_args, **copied_headers;
        size_t n_copied_args, n_copied_headers;
        const char *direct_type;
};

/* The largest request body, as kube-apiserver's (MaxRequestBodyBytes): a
 * ConfigMap of 1 MiB, base64 and all, fits. */
#define API_BODY_MAX ((size_t) 3 * 1024 * 1024)

typedef struct resource {
        const char *prefix;    /* "api/v1" or "apis/apps/v1" */
        const char *plural;    /* "pods" */
        const char *qualified; /* "pods", "deployments.apps" (for messages, field selectors) */
        store_kind kind;
        const spec_kind *row;       /* the registry's */
        const char *kind_qualified; /* "Deployment.apps", "ConfigMap" (for messages) */
        const char *list_kind;
        const char *api_version;
        /* The object in this resource's shape, from the store kind's
         * encoding (takes it); NULL: that encoding as it is. */
        json_t *(*convert)(json_t *j);
} resource;

typedef struct filter {
        char *ns;
        spec_selector *labels; /* NULL: everything */
        /* field selectors: path=value (or != with negate) */
        struct {
                char *path;
                const char *absent; /* what a field left out reads as */
                char *value;
                bool negate;
        } fields[8];
        size_t n_fields;
} filter;

/* A page of a list (limit, continue): the key after which it begins
 * (NULL: the first page), at most limit items (0: all), and the list's
 * resourceVersion (a continued list keeps its first page's). */
typedef struct page {
        int64_t limit;
        char *after_ns, *after_name;
        uint64_t rv;
        uint64_t too_large; /* -EAGAIN: the version asked for */
} page;

typedef struct list_ref {
        const char *ns, *name;
        const void *obj;
} list_ref;
/* The files, lowest first: each calls only those above it in this list. */

/* loop.c: libmicrohttpd on the libuv loop: slots, kicks, gone clients */
void api__on_slot_poll(uv_poll_t *h, int status, int events);
void api__arm(slot *sl);
void api__kick(slot *sl);
bool api__client_gone(struct MHD_Connection *c);
/* Request deadlines (a byte at a time keeps no connection): */
void api__on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                        enum MHD_ConnectionNotificationCode code);
void api__on_deadlines(uv_timer_t *t);
typedef enum api_conn_phase {
        API_CONN_BODY,      /* its headers are in: the body has the idle timeout to come */
        API_CONN_ANSWERING, /* no deadline */
        API_CONN_WAITING,   /* answered: the next request has the idle timeout to come */
} api_conn_phase;
void api__conn_phase(struct MHD_Connection *c, api_conn_phase phase);
/* Freed memory back to the system soon (after a large body). */
#define TRIM_DELAY_MS 2000
void api__trim_soon(api_server *s);
/* fn(arg) in libuv's pool, where it needs nothing of the loop: the freeing
 * of a large object, say (now, if the pool cannot take it). */
void api__in_pool(uv_loop_t *loop, void (*fn)(void *arg), void *arg);
/* The last reference to a large tree let go of in the pool (loop: the
 * uv_loop_t): what the store's row writer keeps of a deployment's
 * managedFields (spec_json_dump_shared_release_with()). */
void api__release_in_pool(json_t *tree, void *loop);

/* params.c: the request's query and headers, the query read as
 * kube-apiserver reads it (nothing is answered here) */
const char *api__arg(req *r, const char *name);
const char *api__header(req *r, const char *name);
/* Go's strconv.ParseBool, and "" (a bare ?watch) as true. -EINVAL: neither. */
int api__parse_bool(const char *v, bool *ret);
/* Whether a boolean parameter is given and true. */
bool api__arg_true(req *r, const char *name);
/* Every parameter the API reads: -EINVAL with the status code and the
 * problem (new string) of the first one that is not valid. */
int api__params_problem(req *r, unsigned *ret_code, char **ret_problem);
/* Whether the write is a dry run: ?dryRun=All, or dryRun: ["All"] in
 * options (the DeleteOptions of a body; NULL: none). 1 dry, 0 not,
 * -EINVAL with *ret_problem (a dryRun that is not a list of "All"). */
int api__dry_run_of(req *r, json_t *options, char **ret_problem);

/* http.c: requests and answers (query, headers, Status, answers held for
 * the fleet, the resources and their answers) */
/* A handler that answers later (a write to the fleet's etcd) starts the
 * work with api__later as its callback and r as its argument, then returns
 * api__wait(r, cancel, userdata): the connection waits, suspended, and
 * api__on_request sends the answer when MHD calls again. The work is
 * canceled if the client goes (api__waiting_forget) or tendd stops
 * (api__waiting_end, which answers 503). */
enum MHD_Result api__wait(req *r, void (*cancel)(void *userdata, void *req), void *userdata);
void api__later(unsigned code, json_t *answer, void *req);
/* The same with no answer: the handler is called again, and goes on. */
void api__resume(req *r);
void api__waiting_forget(req *r);
void api__waiting_end(api_server *s);
void api__req_free(req *r);
/* api__params_problem() and api__dry_run_of(), answered: -1 with a 400
 * (or the parameter's code) sent. */
int api__check_params(req *r, enum MHD_Result *ret);
int api__dry_run(req *r, json_t *options, enum MHD_Result *ret);
enum MHD_Result api__queue(req *r, unsigned code, const char *type, char *body /* takes */);
/* An answer made already (by the pool's copy of r): sent as it is. */
enum MHD_Result api__queue_kept(req *r, unsigned code, const char *type, char *body /* takes */);
enum MHD_Result api__send_json(req *r, unsigned code, json_t *j);
/* The same for an answer written already (JSON with its newline; taken):
 * a large object's text, not encoded again. */
enum MHD_Result api__send_text(req *r, unsigned code, char *body);
/* s (taken) with a newline after it (an answer's last line), without a
 * copy where realloc can grow it; NULL: out of memory. */
char *api__line(char *s);
enum MHD_Result api__send_status(req *r, unsigned code, const char *reason, const char *fmt, ...)
        _printf_(4, 5);
/* protobuf.c: a protobuf body (kubectl's typed clients: create configmap)
 * as the JSON object it says; NULL: *ret_code (415: a kind tendd reads no
 * protobuf of; 400) and *ret_error (new string) say why. */
json_t *api__protobuf_object(const void *body, size_t len, unsigned *ret_code, char **ret_error);

/* write.c: what a write sends: bodies, patches, decoding, validation and
 * its causes, preconditions. */
int api__body_docs(req *r, enum MHD_Result *ret, spec_docs *docs);
json_t *api__body_object(req *r, enum MHD_Result *ret);
int api__field_validation(req *r, const spec_type *t, json_t *j, enum MHD_Result *ret);
json_t *api__body_json(req *r, enum MHD_Result *ret);
json_t *api__apply_patch(req *r, json_t *cur, enum MHD_Result *ret);
json_t *api__cause_json(const spec_error *e);
enum MHD_Result api__send_invalid(req *r, const char *kind, const char *name,
                                  const spec_errors *errs);
void *api__decode_object(req *r, const resource *res, json_t *j, const char *ns, const char *name,
                         enum MHD_Result *ret);
/* The resources of the store's kinds, made from the kinds' registry once
 * (api_server_new() calls it; -ENOMEM). */
int api__resources_init(void);
const resource *api__resource(store_kind kind);
/* The resource served at prefix ("apis/apps/v1") as plural; NULL: none. */
const resource *api__resource_at(const char *prefix, const char *plural);
/* The resource a user writes objects of kind in apiVersion as (NULL:
 * none), and all of them, said ("Deployment (apps/v1), ConfigMap (v1)"). */
const resource *api__resource_written(const char *api_version, const char *kind);
char *api__resources_written(void);
json_t *api__encode_obj(store_kind k, const void *obj);
/* obj as res shows it (its convert applied). */
json_t *api__encode(const resource *res, const void *obj);
enum MHD_Result api__send_oom(req *r);
enum MHD_Result api__send_rv_too_large(req *r, uint64_t want, uint64_t current);
/* A uid and a resourceVersion a request is conditional on (stated: in
 * DeleteOptions.preconditions). false: answered (409). */
bool api__preconditions_hold(req *r, const resource *res, const void *obj, const char *uid,
                             const char *rv, bool stated, enum MHD_Result *ret);
enum MHD_Result api__not_found(req *r, const resource *res, const char *name);
void api__count_code(api_server *s, unsigned code);
const char *api__json_field(json_t *j, const char *path);

/* ssa.c: field managers and server-side apply. */
/* This request's field manager (new string): fieldManager, else the
 * client's product name from its User-Agent (kubectl), else "unknown".
 * NULL with the error answered when fieldManager is not valid or, for an
 * apply, missing. */
char *api__field_manager(req *r, bool apply, enum MHD_Result *ret);
/* d's managedFields made for this request's write of d over old (what is
 * stored, or a copy of it; NULL: nothing), an Update stored by
 * agent_apply_ex with apply_flags; managedFields the request changed are
 * taken as given, and [{}] clears them. Reads no store: may run in the
 * pool. -1: answered. */
int api__track_update(req *r, const resource *res, void *obj, const void *old, unsigned apply_flags,
                      enum MHD_Result *ret);
/* The managedFields (a new JSON array) after this request scales the
 * stored deployment d to replicas: the Scale subresource's Update. NULL:
 * answered. */
json_t *api__track_scale(req *r, const spec_deployment *d, int32_t replicas, enum MHD_Result *ret);
/* PATCH application/apply-patch+yaml on an object of res, against old
 * (what is stored or a copy; NULL: it creates it): the object to write, its
 * managedFields made (r->fields_tracked), answered with *ok_code; NULL:
 * answered. Reads no store: may run in the pool. */
void *api__server_side_apply(req *r, const resource *res, const void *old, const char *ns,
                             const char *name, unsigned *ok_code, enum MHD_Result *ret);

/* prep.c: a write of an object a user writes (a Deployment, a ConfigMap)
 * in two parts, its pure part in libuv's pool against a copy of what is
 * stored (see there) */
typedef enum api_write {
        API_WRITE_CREATE,  /* POST (the body names it) */
        API_WRITE_REPLACE, /* PUT */
        API_WRITE_PATCH,   /* PATCH, but an apply */
        API_WRITE_APPLY,   /* PATCH application/apply-patch+yaml */
        API_WRITE_LIST,    /* POST /apis/tend.io/v1/apply: a List, all or nothing */
} api_write;
enum MHD_Result api__write_start(req *r, const resource *res, api_write kind, const char *ns,
                                 const char *name);
/* A 299 warning when the deployment comes from a manifest file (the next
 * sync of the directory reverts a change made through the API). */
void api__warn_file_owned(req *r, const char *ns, const char *name);
/* Called again after the pool's part: the commit. */
enum MHD_Result api__write_resume(req *r);
/* r goes (its answer sent, or its client gone). */
void api__write_forget(req *r);

/* selectors.c: label and field selectors, and the sorted lists they filter */
void api__filter_done(filter *f);
/* of: the resource as qualified ("pods", "deployments.apps"), for the
 * fields it may be selected by. */
int api__filter_parse(req *r, const char *ns, const char *of, filter *f, char **ret_error);
bool api__filter_match(const filter *f, json_t *obj);
void api__page_done(page *p);
/* limit and continue from the query (*ret_error on a bad token). */
int api__page_parse(req *r, page *p, char **ret_error);
/* Calls each() for the objects of res on the page pg that f selects, in
 * order (j: the object's encoding, borrowed), and sets the list's
 * metadata in meta: resourceVersion, and continue and remainingItemCount
 * where more follow. */
int api__list_walk(api_server *s, const resource *res, const filter *f, const page *pg,
                   int (*each)(void *u, const void *obj, json_t *j), void *u, json_t *meta);
/* The body of a List of res that f selects (one page of it). */
char *api__list_body(api_server *s, const resource *res, const filter *f, const page *pg);
list_ref *api__sorted_refs(api_server *s, const resource *res, size_t *ret_n);

/* watch.c: watch streams and the change ring */
/* Ends every watch stream (tendd stops). */
void api__watches_end(api_server *s);
enum MHD_Result api__start_watch(req *r, const resource *res, filter *f);
void api__on_store_change(store_kind kind, store_change change_type, const void *obj, void *u);
void api__on_heartbeat(uv_timer_t *t);

/* logs.c: pod logs, with follow */
void api__on_follow_timer(uv_timer_t *t);
/* Ends every log stream (tendd stops). */
void api__followers_end(api_server *s);
enum MHD_Result api__handle_logs(req *r, const char *ns, const char *name);

/* metrics.c: /metrics */
enum MHD_Result api__handle_metrics(req *r);
/* What a running pod uses now (usage.c): its CPU time (ns, children
 * included), its start (clock ticks since boot, as /proc says it) and its
 * memory (its cgroup's working set, else its resident set). -ENOENT: no
 * process to measure. */
int api__pod_usage(api_server *s, const spec_pod *p, uint64_t *ret_cpu_ns, uint64_t *ret_begun,
                   uint64_t *ret_memory);

/* discovery.c: the kinds tendd answers for, and those it has none of */
json_t *api__group_list(void);
/* The APIResourceList of group/version ("" for core); NULL: none. */
json_t *api__resource_list(const char *group, const char *version);
enum MHD_Result api__handle_absent(req *r, const spec_kind *k, const char *ns, const char *name,
                                   const char *method);
enum MHD_Result api__handle_namespaces(req *r, const char *name, const char *method);
/* SelfSubjectAccessReview, SelfSubjectRulesReview, SelfSubjectReview */
enum MHD_Result api__handle_review(req *r, const spec_kind *k, const char *method);

/* events.c: an events.k8s.io/v1 Event from a core one (takes it) */
json_t *api__event_v1(json_t *core);

/* delete.c: DELETE of an object (obj NULL: not found) and of a collection */
enum MHD_Result api__handle_delete(req *r, const resource *res, const void *obj, const char *name);
enum MHD_Result api__handle_delete_collection(req *r, const resource *res, const char *ns);

/* objects.c: the object handlers (list, get, create, replace, patch, delete, scale, rollback) and
 * the all-or-nothing apply */
enum MHD_Result api__handle_collection(req *r, const resource *res, const char *ns,
                                       const char *method);
enum MHD_Result api__handle_object(req *r, const resource *res, const char *ns, const char *name,
                                   const char *sub, const char *method);
enum MHD_Result api__handle_apply(req *r);

/* table.c: Table answers, when the client asks for them (kubectl) */
bool api__wants_table(req *r);
char *api__table_body(req *r, const resource *res, const filter *f, const page *pg);
json_t *api__table_of(req *r, const resource *res, const void *obj);
json_t *api__table_of_one(api_server *s, const resource *res, const void *obj, json_t *j,
                          bool whole);

/* openapi.c */
int api__openapi_init(api_server *s);
void api__openapi_done(api_server *s);
enum MHD_Result api__handle_openapi(req *r, char **seg, size_t n);

/* route.c: routing and discovery */
enum MHD_Result api__on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                const char *method, const char *version, const char *upload,
                                size_t *upload_size, void **con_cls);
void api__on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                       enum MHD_RequestTerminationCode toe);

/* server.c: listeners, authorisation, setup and teardown */
void api__authorize(req *r);

/* usage.c: metrics.k8s.io/v1beta1 (kubectl top); seg: the path after the version */
enum MHD_Result api__handle_usage(req *r, char **seg, size_t n);
json_t *api__usage_resources(void);
void api__usage_done(api_server *s);

/* node.c: this host as the one Node */
enum MHD_Result api__handle_nodes(req *r, const char *name, const char *method);

enum MHD_Result api__handle_node_lease(req *r, const char *ns, const char *name,
                                       const char *method);
