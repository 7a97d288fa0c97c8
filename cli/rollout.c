/* SPDX-License-Identifier: MIT */

/* tend rollout status|history|undo|pause|resume|restart deploy/NAME */

#include <getopt.h>
#include <inttypes.h>
#include <unistd.h>

#include "cli.h"

typedef struct status_ctx {
        int64_t revision;
        char last[512];
        int result;   /* -1 running, 0 done, 1 failed */
        bool expired; /* the watch answered 410 */
} status_ctx;

/* Prints the message when it changes; sets result when it is final. */
static void judge(status_ctx *s, const spec_deployment *d) {
        char msg[512];
        spec_rollout r = spec_rollout_status(d, s->revision, msg, sizeof msg);

        if (r == SPEC_ROLLOUT_FAILED) {
                fprintf(stderr, "error: %s\n", msg);
                s->result = 1;
                return;
        }
        if (!streq(msg, s->last)) {
                printf("%s\n", msg);
                fflush(stdout);
                snprintf(s->last, sizeof s->last, "%s", msg);
        }
        if (r == SPEC_ROLLOUT_DONE)
                s->result = 0;
}

static int on_status_line(const char *line, size_t n, void *userdata) {
        status_ctx *s = userdata;
        json_t *ev = n ? json_loadb(line, n, 0, NULL) : NULL, *obj;
        const char *type;
        spec_deployment *d;

        if (!ev)
                return 0;
        type = json_string_value(json_object_get(ev, "type"));
        obj = json_object_get(ev, "object");
        if (streq_ptr(type, "DELETED")) {
                fprintf(stderr, "error: object has been deleted\n");
                s->result = 1;
        } else if (streq_ptr(type, "ERROR")) {
                /* 410: the version is too old to resume from; list again. */
                if (json_integer_value(json_object_get(obj, "code")) == 410)
                        s->expired = true;
                else {
                        fprintf(stderr, "error: %s\n",
                                strna(json_string_value(json_object_get(obj, "message"))));
                        s->result = 1;
                }
        } else if ((d = cli_decode(&spec_type_deployment, obj))) {
                judge(s, d);
                spec_deployment_free(d);
        }
        json_decref(ev);
        return s->result >= 0 || s->expired ? -1 : 0; /* stop streaming once decided */
}

/* The deployment for `rollout status`. Once tendd has answered, a tendd
 * that cannot be reached (restarting, upgraded) is waited for, as kubectl's
 * watch waits for an API server, until the deadline; an answer (not
 * found) is final. NULL: final, or the deadline (*ret_timed_out). */
static spec_deployment *fetch_waiting(client *c, const char *name, bool reached, usec_t deadline,
                                      bool *ret_timed_out) {
        _cleanup_free_ char *path = cli_path(spec_kind_named("deployments"), cli.namespace, name);
        bool said = false;

        *ret_timed_out = false;
        if (!path)
                return NULL;
        for (;;) {
                json_t *resp = NULL;
                void *d;
                long code;
                int r;

                client_set_quiet(c, reached);
                r = client_request(c, "GET", path, NULL, NULL, &code, &resp);
                client_set_quiet(c, false);
                if (r == -ECONNREFUSED && reached) {
                        if (now_monotonic() >= deadline) {
                                *ret_timed_out = true;
                                return NULL;
                        }
                        if (!said)
                                fprintf(stderr,
                                        "tendd at %s cannot be reached; waiting for it to come "
                                        "back\n",
                                        client_socket(c));
                        said = true;
                        (void) usleep(200 * 1000);
                        continue;
                }
                if (r < 0)
                        return NULL;
                if (code != 200) {
                        client_print_error(code, resp);
                        json_decref(resp);
                        return NULL;
                }
                d = cli_decode(&spec_type_deployment, resp);
                json_decref(resp);
                return d;
        }
}

/* As kubectl: list, then watch from that version; a watch that ends
 * before the rollout does (tendd restarted, a slow reader cut off, a
 * version too old) lists and watches again, and a tendd away is waited
 * for. Only a --timeout ends it undecided. */
static int rollout_status(client *c, const char *name, usec_t timeout, bool watch,
                          int64_t revision) {
        status_ctx s = { .revision = revision, .result = -1 };
        usec_t deadline = timeout ? now_monotonic() + timeout : USEC_INFINITY;
        bool reached = false, timed_out;
        long code;

        for (;;) {
                spec_deployment *d = fetch_waiting(c, name, reached && watch, deadline, &timed_out);
                _cleanup_free_ char *path = NULL, *fs = NULL, *efs = NULL;
                usec_t now = now_monotonic();

                if (timed_out)
                        break;
                if (!d)
                        return 1;
                reached = true;
                judge(&s, d);
                if (s.result >= 0 || !watch) {
                        spec_deployment_free(d);
                        return s.result > 0 ? 1 : 0;
                }
                if (now >= deadline) {
                        spec_deployment_free(d);
                        break;
                }
                fs = strprintf("metadata.name=%s", name);
                efs = fs ? client_escape(fs) : NULL;
                path = strprintf("/apis/apps/v1/namespaces/%s/deployments?watch=true&"
                                 "fieldSelector=%s&resourceVersion=%" PRIu64,
                                 cli.namespace, strempty(efs), d->metadata.resource_version);
                spec_deployment_free(d);
                if (path && timeout) {
                        char *with = strprintf(
                                "%s&timeoutSeconds=%" PRIu64, path,
                                (uint64_t) ((deadline - now + USEC_PER_SEC - 1) / USEC_PER_SEC));
                        free(path);
                        path = with;
                }
                if (!path)
                        return 1;
                s.expired = false;
                /* A stream cut off (tendd went away) is listed again, above. */
                client_set_quiet(c, true);
                (void) client_stream(c, path, on_status_line, &s, &code);
                client_set_quiet(c, false);
                if (s.result >= 0)
                        return s.result;
                /* never spin on a stream that keeps ending at once */
                if (now_monotonic() - now < USEC_PER_SEC)
                        (void) usleep(200 * 1000);
        }
        fprintf(stderr, "error: timed out waiting for the condition\n");
        return 1;
}

static void rollout_help(const char *sub) {
        static const struct {
                const char *sub, *what, *options;
        } helps[] = {
                { "status",
                  "Waits until the rollout is done (exit 0) or has failed: the progress\n"
                  "deadline exceeded, or the timeout reached (exit 1).",
                  "      --timeout=DURATION  give up after this long (e.g. 60s, 5m)\n"
                  "      --watch=false       print the state once and exit: 1 if the rollout\n"
                  "                          has failed, else 0 (done or still going)\n"
                  "      --revision=N        fail unless N is the running revision\n" },
                { "history", "Lists the revisions.",
                  "      --revision=N        the pod template of revision N\n" },
                { "undo", "Goes back to the previous revision (which becomes the newest).",
                  "      --to-revision=N     to revision N instead\n" },
                { "pause", "Stops rolling out template changes; scaling still works.", "" },
                { "resume", "Carries on rolling out.", "" },
                { "restart", "Replaces every pod, replica by replica, as a rollout does.", "" },
                { "promote",
                  "Promotes the canaries a rollout waits on (tend.io/canary): the rollout\n"
                  "goes on. kubectl does the same with\n"
                  "kubectl annotate deploy/NAME tend.io/promote=true.",
                  "" },
        };
        for (size_t i = 0; i < ELEMENTSOF(helps); i++)
                if (streq(sub, helps[i].sub)) {
                        printf("Usage: tend rollout %s deploy/NAME [OPTIONS]\n\n%s\n\n"
                               "Options:\n%s  -n, --namespace NS      the namespace\n",
                               sub, helps[i].what, helps[i].options);
                        return;
                }
        printf("Usage: tend rollout status|history|undo|pause|resume|restart|promote "
               "deploy/NAME\n");
}

static int cmp_rev(const void *a, const void *b) {
        int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;
        return x < y ? -1 : x > y;
}

static int rollout_history(client *c, const char *name, int64_t revision) {
        spec_deployment *d = cli_fetch(c, spec_kind_named("deployments"), name);
        spec_replica_set **rss;
        size_t n;
        int ret = 0;

        if (!d)
                return 1;
        rss = cli_owned_replica_sets(c, d, &n);
        if (revision > 0) {
                const spec_replica_set *hit = NULL;
                for (size_t i = 0; i < n; i++) {
                        const char *v = spec_map_get(&rss[i]->metadata.annotations,
                                                     SPEC_ANN_REVISION);
                        int64_t r;
                        if (v && safe_atoi64(v, &r) >= 0 && r == revision)
                                hit = rss[i];
                }
                if (!hit) {
                        fprintf(stderr, "error: unable to find the specified revision\n");
                        ret = 1;
                } else {
                        spec_pod_template *t = spec_pod_template_copy(&hit->spec.template);
                        spec_map_remove(&t->metadata.labels, SPEC_LABEL_POD_TEMPLATE_HASH);
                        json_t *j = spec_pod_template_encode(t);
                        printf("deployment.apps/%s with revision #%" PRId64 "\nPod Template:\n",
                               name, revision);
                        cli_print_yaml(j);
                        json_decref(j);
                        spec_pod_template_free(t);
                }
        } else if (n == 0)
                printf("No rollout history found.\n");
        else {
                int64_t *revs = new0(int64_t, n * 2);
                printf("deployment.apps/%s\n", name);
                for (size_t i = 0; i < n; i++) {
                        const char *v = spec_map_get(&rss[i]->metadata.annotations,
                                                     SPEC_ANN_REVISION);
                        int64_t r = 0;
                        if (v)
                                (void) safe_atoi64(v, &r);
                        revs[2 * i] = r;
                        revs[2 * i + 1] = (int64_t) i;
                }
                qsort(revs, n, sizeof(int64_t) * 2, cmp_rev);
                table t;
                /* tend.io/config-rollout: the snapshots each revision runs with */
                bool config = false;
                for (size_t i = 0; i < n; i++)
                        config = config ||
                                 spec_map_get(&rss[i]->metadata.annotations, SPEC_ANN_CONFIG);
                if (config)
                        table_init(&t, 3, "REVISION", "CHANGE-CAUSE", "CONFIG");
                else
                        table_init(&t, 2, "REVISION", "CHANGE-CAUSE");
                for (size_t i = 0; i < n; i++) {
                        char num[32];
                        const spec_replica_set *rs = rss[revs[2 * i + 1]];
                        snprintf(num, sizeof num, "%" PRId64, revs[2 * i]);
                        /* (a table of 2 columns reads 2 of these) */
                        table_row(&t, num,
                                  spec_map_get(&rs->metadata.annotations, SPEC_ANN_CHANGE_CAUSE),
                                  spec_map_get(&rs->metadata.annotations, SPEC_ANN_CONFIG));
                }
                table_print(&t, stdout, true);
                table_done(&t);
                free(revs);
        }
        for (size_t i = 0; i < n; i++)
                spec_replica_set_free(rss[i]);
        free(rss);
        spec_deployment_free(d);
        return ret;
}

static int patch_deployment(client *c, const char *name, const char *body) {
        _cleanup_free_ char *path = cli_path(spec_kind_named("deployments"), cli.namespace, name);
        json_t *resp = NULL;
        long code;

        if (!path || client_request(c, "PATCH", path, "application/merge-patch+json", body, &code,
                                    &resp) < 0)
                return -EIO;
        if (code != 200) {
                client_print_error(code, resp);
                json_decref(resp);
                return -EIO;
        }
        json_decref(resp);
        return 0;
}

int cli_rollout(int argc, char **argv) {
        static const struct option options[] = {
                { "timeout", required_argument, NULL, 't' },
                { "watch", required_argument, NULL, 'w' },
                { "revision", required_argument, NULL, 'r' },
                { "to-revision", required_argument, NULL, 'R' },
                { "namespace", required_argument, NULL, 'n' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        _cleanup_(client_freep) client *c = NULL;
        const spec_kind *res;
        const char *sub, *name;
        usec_t timeout = 0;
        bool watch = true;
        int64_t revision = 0, to_revision = 0;
        int opt;

        optind = 2; /* after "rollout SUB" */
        if (argc < 2 || streq(argv[1], "--help") || streq(argv[1], "-h")) {
                printf("Usage: tend rollout SUBCOMMAND deploy/NAME [OPTIONS]\n\n"
                       "  status   wait until the rollout is done (exit 0) or failed (exit 1;\n"
                       "           a rollout rolled back automatically failed)\n"
                       "           [--timeout=DURATION] [--watch=false] [--revision=N]\n"
                       "  history  the revisions [--revision=N shows one's template]\n"
                       "  undo     back to the previous revision [--to-revision=N]\n"
                       "  pause    stop rolling out template changes (scaling still works)\n"
                       "  resume   carry on rolling out\n"
                       "  restart  replace every pod, replica by replica\n"
                       "  promote  let a rollout that waits on its canaries go on\n");
                return argc < 2 ? 2 : 0;
        }
        sub = argv[1];
        while ((opt = getopt_long(argc, argv, "n:h", options, NULL)) >= 0)
                switch (opt) {
                case 't':
                        if (parse_duration(optarg, &timeout) < 0) {
                                fprintf(stderr,
                                        "error: --timeout %s: expected a duration like 60s or 5m\n",
                                        optarg);
                                return 2;
                        }
                        break;
                case 'w':
                        watch = !streq(optarg, "false");
                        break;
                case 'r':
                case 'R':
                        if (safe_atoi64(optarg, opt == 'r' ? &revision : &to_revision) < 0) {
                                fprintf(stderr, "error: --%s %s: expected a number\n",
                                        opt == 'r' ? "revision" : "to-revision", optarg);
                                return 2;
                        }
                        break;
                case 'n':
                        cli.namespace = optarg;
                        break;
                case 'h':
                        rollout_help(sub);
                        return 0;
                default:
                        return 2;
                }
        cli_ref ref;
        size_t n_refs = 0;
        if (optind >= argc || argc - optind > 2) {
                fprintf(stderr, "error: expected tend rollout %s deploy/NAME (or deploy NAME)\n",
                        sub);
                return 2;
        }
        if (cli_parse_refs(argv + optind, (size_t) (argc - optind), false, &ref, 1, &n_refs) < 0)
                return 1;
        res = ref.res;
        name = ref.name;
        if (res->type != &spec_type_deployment) {
                fprintf(stderr, "error: rollouts are of deployments: deploy/NAME\n");
                return 1;
        }
        c = cli_connect();
        if (!c)
                return 1;

        if (streq(sub, "status"))
                return rollout_status(c, name, timeout, watch, revision);
        if (streq(sub, "history"))
                return rollout_history(c, name, revision);
        if (streq(sub, "undo")) {
                _cleanup_free_ char *base = cli_path(res, cli.namespace, name);
                _cleanup_free_ char *path = base ? strprintf("%s/rollback", base) : NULL;
                _cleanup_free_ char *body = strprintf("{\"toRevision\":%" PRId64 "}", to_revision);
                json_t *resp = NULL;
                long code;
                if (!path || !body ||
                    client_request(c, "POST", path, "application/json", body, &code, &resp) < 0)
                        return 1;
                if (code != 200) {
                        /* NotFound and the like as everywhere; a refused
                         * rollback (paused, no such revision) as kubectl. */
                        const char *msg = json_string_value(json_object_get(resp, "message"));
                        if (code == 404)
                                client_print_error(code, resp);
                        else
                                fprintf(stderr, "error: %s\n", strna(msg));
                        json_decref(resp);
                        return 1;
                }
                printf("%s\n", strna(json_string_value(json_object_get(resp, "message"))));
                json_decref(resp);
                return 0;
        }
        if (streq(sub, "pause") || streq(sub, "resume") || streq(sub, "restart")) {
                spec_deployment *d = cli_fetch(c, res, name);
                bool pause = streq(sub, "pause");
                int r;
                if (!d)
                        return 1;
                if (streq(sub, "restart")) {
                        char now[TIMESTAMP_MAX];
                        _cleanup_free_ char *body = NULL;
                        if (d->spec.paused) {
                                fprintf(stderr,
                                        "error: deployments.apps \"%s\" can't restart paused "
                                        "deployment (run rollout resume first)\n",
                                        name);
                                spec_deployment_free(d);
                                return 1;
                        }
                        format_timestamp(now, now_realtime());
                        body = strprintf("{\"spec\":{\"template\":{\"metadata\":{\"annotations\":"
                                         "{\"%s\":\"%s\"}}}}}",
                                         SPEC_ANN_RESTARTED_AT, now);
                        r = body ? patch_deployment(c, name, body) : -ENOMEM;
                        spec_deployment_free(d);
                        if (r < 0)
                                return 1;
                        printf("deployment.apps/%s restarted\n", name);
                        return 0;
                }
                if (d->spec.paused == pause) {
                        fprintf(stderr, "error: deployments.apps \"%s\" is %s\n", name,
                                pause ? "already paused" : "not paused");
                        spec_deployment_free(d);
                        return 1;
                }
                spec_deployment_free(d);
                if (patch_deployment(c, name,
                                     pause ? "{\"spec\":{\"paused\":true}}"
                                           : "{\"spec\":{\"paused\":false}}") < 0)
                        return 1;
                printf("deployment.apps/%s %s\n", name, pause ? "paused" : "resumed");
                return 0;
        }
        if (streq(sub, "promote")) {
                /* tend.io/canary: the deployment controller takes the request
                 * (tend.io/promote) and removes it; kubectl can make the same
                 * one: kubectl annotate deploy/NAME tend.io/promote=true */
                spec_deployment *d = cli_fetch(c, res, name);
                const spec_condition *p;
                const char *rev;
                _cleanup_free_ char *body = NULL;
                bool waiting;
                if (!d)
                        return 1;
                if (!spec_map_get(&d->metadata.annotations, SPEC_ANN_CANARY)) {
                        fprintf(stderr,
                                "error: deployments.apps \"%s\" has no canaries to promote (it "
                                "has no %s annotation)\n",
                                name, SPEC_ANN_CANARY);
                        spec_deployment_free(d);
                        return 1;
                }
                p = spec_get_condition(d->status.conditions, d->status.n_conditions, "Progressing");
                waiting = p && streq_ptr(p->reason, "WaitingForPromotion");
                /* the revision by number: a request that waits (a paused
                 * deployment) does not promote a revision applied after it */
                rev = spec_map_get(&d->metadata.annotations, SPEC_ANN_REVISION);
                body = strprintf("{\"metadata\":{\"annotations\":{\"%s\":\"%s\"}}}",
                                 SPEC_ANN_PROMOTE, rev ?: "true");
                spec_deployment_free(d);
                if (!body || patch_deployment(c, name, body) < 0)
                        return 1;
                printf("deployment.apps/%s promoted%s\n", name,
                       waiting ? ""
                               : " (its canaries were not all available yet: they are promoted "
                                 "as they are)");
                return 0;
        }
        fprintf(stderr,
                "error: unknown rollout subcommand \"%s\" (status, history, undo, pause, "
                "resume, restart, promote)\n",
                sub);
        return 2;
}
