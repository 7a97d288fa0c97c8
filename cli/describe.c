/* SPDX-License-Identifier: MIT */

/* tend describe deploy/NAME|rs/NAME|pod/NAME: kubectl describe's layout. */

#include <getopt.h>
#include <inttypes.h>

#include "cli.h"

static void kv(const char *key, const char *fmt, ...) _printf_(2, 3);
static void kv(const char *key, const char *fmt, ...) {
        _cleanup_free_ char *v = NULL;
        va_list ap;
        printf("%-24s", key);
        va_start(ap, fmt);
        if (vasprintf(&v, fmt, ap) < 0)
                v = NULL;
        va_end(ap);
        cli_fputs_printable(v, stdout);
        printf("\n");
}

static void print_map(const char *key, const spec_map *m) {
        if (m->n == 0) {
                kv(key, "<none>");
                return;
        }
        for (size_t i = 0; i < m->n; i++) {
                _cleanup_free_ char *k = cli_printable(m->items[i].key),
                                    *v = cli_printable(m->items[i].value);
                printf("%-24s%s=%s\n", i ? "" : key, strempty(k), strempty(v));
        }
}

static char *time_text(usec_t t) {
        char buf[TIMESTAMP_MAX], age[40];
        if (!t)
                return strdup("<unknown>");
        format_timestamp(buf, t / USEC_PER_SEC * USEC_PER_SEC);
        if (!cli.tty)
                return strdup(buf);
        usec_t now = now_realtime();
        return strprintf("%s (%s ago)", buf, cli_human_duration(age, now > t ? now - t : 0));
}

static void print_probe(const char *what, const spec_probe *p) {
        _cleanup_free_ char *how = NULL;

        if (!p)
                return;
        if (p->http_get)
                how = p->http_get->port.str
                              ? strprintf("http-get %s:%s%s", strempty(p->http_get->host),
                                          p->http_get->port.str, strempty(p->http_get->path))
                              : strprintf("http-get %s:%d%s", strempty(p->http_get->host),
                                          p->http_get->port.num, strempty(p->http_get->path));
        else if (p->tcp_socket)
                how = p->tcp_socket->port.str
                              ? strprintf("tcp-socket :%s", p->tcp_socket->port.str)
                              : strprintf("tcp-socket :%d", p->tcp_socket->port.num);
        else if (p->exec) {
                _cleanup_buf_ tend_buf b = TEND_BUF_INIT(4096);
                for (char **a = p->exec->command; a && *a; a++)
                        (void) tend_buf_addf(&b, "%s%s", a == p->exec->command ? "" : " ", *a);
                how = strprintf("exec [%s]", tend_buf_str(&b));
        }
        printf("    %-11s %s delay=%ds timeout=%ds period=%ds #success=%d #failure=%d\n", what,
               strna(how), p->initial_delay_seconds, p->timeout_seconds, p->period_seconds,
               p->success_threshold, p->failure_threshold);
}

static void print_template(const spec_pod_template *t, const char *ports_ann) {
        const spec_pod_spec *s = &t->spec;

        printf("Pod Template:\n");
        printf("  Labels:");
        if (t->metadata.labels.n == 0)
                printf("  <none>\n");
        for (size_t i = 0; i < t->metadata.labels.n; i++)
                printf("%s%s=%s\n", i ? "           " : "  ", t->metadata.labels.items[i].key,
                       t->metadata.labels.items[i].value);
        for (size_t i = 0; i < t->metadata.annotations.n; i++) {
                _cleanup_free_ char *k = cli_printable(t->metadata.annotations.items[i].key),
                                    *v = cli_printable(t->metadata.annotations.items[i].value);
                printf("%s%s: %s\n", i ? "                " : "  Annotations:  ", strempty(k),
                       strempty(v));
        }
        printf("  Runtime:      %s\n", strna(spec_runtime_class_to_string(s->runtime_class_name)));
        printf("  Containers:\n");
        for (size_t i = 0; i < s->n_containers; i++) {
                const spec_container *c = &s->containers[i];
                printf("   %s:\n", strempty(c->name));
                printf("    Command:");
                for (char **a = c->command; a && *a; a++)
                        printf("%s%s\n", a == c->command ? "     " : "                 ", *a);
                if (c->args) {
                        printf("    Args:");
                        for (char **a = c->args; *a; a++)
                                printf("%s%s\n", a == c->args ? "        " : "                 ",
                                       *a);
                }
                if (c->working_dir)
                        printf("    WorkingDir: %s\n", c->working_dir);
                if (ports_ann)
                        printf("    Ports:      %s\n", ports_ann);
                else if (c->n_ports) {
                        printf("    Ports:      ");
                        for (size_t k = 0; k < c->n_ports; k++) {
                                if (c->ports[k].container_port != SPEC_UNSET)
                                        printf("%s%s%s%d/%s", k ? ", " : "",
                                               strempty(c->ports[k].name),
                                               c->ports[k].name ? "=" : "",
                                               c->ports[k].container_port,
                                               strempty(c->ports[k].protocol));
                                else
                                        printf("%s%s (leased)", k ? ", " : "",
                                               strempty(c->ports[k].name));
                        }
                        printf("\n");
                }
                if (c->resources.limits.cpu.text || c->resources.limits.memory.text)
                        printf("    Limits:     cpu=%s memory=%s\n",
                               c->resources.limits.cpu.text ?: "-",
                               c->resources.limits.memory.text ?: "-");
                print_probe("Liveness:", c->liveness_probe);
                print_probe("Readiness:", c->readiness_probe);
                printf("    Environment:");
                if (c->n_env == 0)
                        printf("  <none>\n");
                for (size_t k = 0; k < c->n_env; k++)
                        printf("%s%s: %s\n", k ? "                  " : "  ", c->env[k].name,
                               strempty(c->env[k].value));
        }
}

static void print_conditions(const spec_condition *c, size_t n, bool reasons) {
        table t;

        printf("Conditions:\n");
        if (n == 0) {
                printf("  <none>\n");
                return;
        }
        if (reasons)
                table_init(&t, 3, "Type", "Status", "Reason");
        else
                table_init(&t, 2, "Type", "Status");
        for (size_t i = 0; i < n; i++)
                if (reasons)
                        table_row(&t, c[i].type, c[i].status, c[i].reason ?: "");
                else
                        table_row(&t, c[i].type, c[i].status);
        table_print_indented(&t, stdout, "  ", 2);
        table_done(&t);
}

/* The events of one object, folded (with counts), oldest first. */
static void print_events(client *c, const char *kind, const char *name, const char *uid) {
        _cleanup_free_ char *fs = strprintf("involvedObject.kind=%s,involvedObject.name=%s", kind,
                                            name);
        _cleanup_free_ char *efs = fs ? client_escape(fs) : NULL;
        _cleanup_free_ char *path = strprintf("/api/v1/namespaces/%s/events?fieldSelector=%s",
                                              cli.namespace, strempty(efs));
        json_t *resp = NULL, *item;
        long code;
        size_t i, n = 0;
        spec_event **evs;
        table t;

        printf("Events:\n");
        if (!path || client_request(c, "GET", path, NULL, NULL, &code, &resp) < 0 || code != 200) {
                printf("  <unknown>\n");
                json_decref(resp);
                return;
        }
        evs = new0(spec_event *, json_array_size(json_object_get(resp, "items")) + 1);
        json_array_foreach (json_object_get(resp, "items"), i, item) {
                spec_event *e = cli_decode(&spec_type_event, item);
                if (e && (!uid || streq_ptr(e->involved_object.uid, uid)))
                        evs[n++] = e;
                else
                        spec_event_free(e);
        }
        json_decref(resp);
        for (size_t a = 1; a < n; a++)
                for (size_t b = a; b > 0 && evs[b - 1]->last_timestamp > evs[b]->last_timestamp;
                     b--) {
                        spec_event *tmp = evs[b];
                        evs[b] = evs[b - 1];
                        evs[b - 1] = tmp;
                }
        if (n == 0) {
                printf("  <none>\n");
                free(evs);
                return;
        }
        table_init(&t, 5, "Type", "Reason", "Age", "From", "Message");
        for (size_t k = 0; k < n; k++) {
                char age[40], count[64];
                _cleanup_free_ char *msg = NULL, *from = NULL;
                cli_age(age, evs[k]->last_timestamp);
                if (evs[k]->count > 1) {
                        snprintf(count, sizeof count, " (x%d)", evs[k]->count);
                        msg = strprintf("%s%s", strempty(evs[k]->message), count);
                }
                /* as kubectl: the component, and the host (in a fleet, the node) */
                if (!isempty(evs[k]->source.host))
                        from = strprintf("%s, %s", evs[k]->source.component ?: "tendd",
                                         evs[k]->source.host);
                table_row(&t, evs[k]->type, evs[k]->reason, age,
                          from ?: evs[k]->source.component ?: "tendd", msg ?: evs[k]->message);
                spec_event_free(evs[k]);
        }
        free(evs);
        table_print_indented(&t, stdout, "  ", 2);
        table_done(&t);
}

/* The ReplicaSets a deployment owns (by uid), for describe and history. */
static spec_replica_set **owned_rs(client *c, const spec_deployment *d, size_t *ret_n) {
        _cleanup_free_ char *path = strprintf("/apis/apps/v1/namespaces/%s/replicasets",
                                              d->metadata.namespace);
        json_t *resp = NULL, *item;
        spec_replica_set **out;
        long code;
        size_t i, n = 0;

        *ret_n = 0;
        if (!path || client_request(c, "GET", path, NULL, NULL, &code, &resp) < 0 || code != 200) {
                json_decref(resp);
                return NULL;
        }
        out = new0(spec_replica_set *, json_array_size(json_object_get(resp, "items")) + 1);
        json_array_foreach (json_object_get(resp, "items"), i, item) {
                spec_replica_set *rs = cli_decode(&spec_type_replica_set, item);
                const spec_owner_ref *o = rs ? spec_meta_controller(&rs->metadata) : NULL;
                if (o && streq_ptr(o->uid, d->metadata.uid))
                        out[n++] = rs;
                else
                        spec_replica_set_free(rs);
        }
        json_decref(resp);
        *ret_n = n;
        return out;
}

static void describe_deployment(client *c, const spec_deployment *d) {
        _cleanup_free_ char *created = time_text(d->metadata.creation_timestamp);
        size_t n;
        spec_replica_set **rss = owned_rs(c, d, &n);
        const spec_replica_set *newest = NULL;

        kv("Name:", "%s", d->metadata.name);
        kv("Namespace:", "%s", d->metadata.namespace);
        kv("CreationTimestamp:", "%s", created);
        print_map("Labels:", &d->metadata.labels);
        print_map("Annotations:", &d->metadata.annotations);
        {
                spec_map m = {};
                for (size_t i = 0; d->spec.selector && i < d->spec.selector->match_labels.n; i++)
                        spec_map_set(&m, d->spec.selector->match_labels.items[i].key,
                                     d->spec.selector->match_labels.items[i].value);
                print_map("Selector:", &m);
                spec_map_done(&m);
        }
        kv("Replicas:", "%d desired | %d updated | %d total | %d available | %d unavailable",
           d->spec.replicas, d->status.updated_replicas, d->status.replicas,
           d->status.available_replicas, d->status.unavailable_replicas);
        kv("StrategyType:", "%s", strna(spec_strategy_type_to_string(d->spec.strategy.type)));
        kv("MinReadySeconds:", "%d", d->spec.min_ready_seconds);
        if (d->spec.strategy.rolling_update) {
                const spec_rolling_update *ru = d->spec.strategy.rolling_update;
                char u[32], s[32];
                if (ru->max_unavailable.str)
                        snprintf(u, sizeof u, "%s", ru->max_unavailable.str);
                else
                        snprintf(u, sizeof u, "%d", ru->max_unavailable.num);
                if (ru->max_surge.str)
                        snprintf(s, sizeof s, "%s", ru->max_surge.str);
                else
                        snprintf(s, sizeof s, "%d", ru->max_surge.num);
                kv("RollingUpdateStrategy:", "%s max unavailable, %s max surge", u, s);
        }
        if (d->spec.paused)
                kv("Paused:", "true");
        print_template(&d->spec.template, NULL);
        print_conditions(d->status.conditions, d->status.n_conditions, true);
        {
                /* tend's own: the canaries a rollout waits on, an automatic rollback */
                const spec_condition *w = spec_get_condition(d->status.conditions,
                                                             d->status.n_conditions, "Progressing");
                const spec_condition *rb = spec_get_condition(d->status.conditions,
                                                              d->status.n_conditions, "RolledBack");
                if (w && streq_ptr(w->reason, "WaitingForPromotion"))
                        printf("Canaries:               %s\n", strna(w->message));
                if (rb && streq_ptr(rb->status, "True"))
                        printf("Rolled back:            %s\n", strna(rb->message));
        }
        printf("%-17s", "OldReplicaSets:");
        bool any = false;
        for (size_t i = 0; i < n; i++) {
                if (spec_template_equal(&rss[i]->spec.template, &d->spec.template)) {
                        newest = rss[i];
                        continue;
                }
                if (rss[i]->spec.replicas == 0 && rss[i]->status.replicas == 0)
                        continue;
                printf("%s%s (%d/%d replicas created)\n", any ? "                 " : "",
                       rss[i]->metadata.name, rss[i]->status.replicas, rss[i]->spec.replicas);
                any = true;
        }
        if (!any)
                printf("<none>\n");
        if (newest)
                printf("%-17s%s (%d/%d replicas created)\n",
                       "NewReplicaSet:", newest->metadata.name, newest->status.replicas,
                       newest->spec.replicas);
        else
                printf("%-17s<none>\n", "NewReplicaSet:");
        for (size_t i = 0; i < n; i++)
                spec_replica_set_free(rss[i]);
        free(rss);
        print_events(c, "Deployment", d->metadata.name, d->metadata.uid);
}

static void describe_replica_set(client *c, const spec_replica_set *rs) {
        const spec_owner_ref *o = spec_meta_controller(&rs->metadata);
        _cleanup_free_ char *created = time_text(rs->metadata.creation_timestamp);

        kv("Name:", "%s", rs->metadata.name);
        kv("Namespace:", "%s", rs->metadata.namespace);
        kv("CreationTimestamp:", "%s", created);
        print_map("Labels:", &rs->metadata.labels);
        print_map("Annotations:", &rs->metadata.annotations);
        if (o)
                kv("Controlled By:", "%s/%s", strna(o->kind), strna(o->name));
        else
                kv("Controlled By:", "<none>");
        kv("Replicas:", "%d current / %d desired", rs->status.replicas, rs->spec.replicas);
        kv("Pods Status:", "%d Ready / %d Available", rs->status.ready_replicas,
           rs->status.available_replicas);
        print_template(&rs->spec.template, NULL);
        print_conditions(rs->status.conditions, rs->status.n_conditions, true);
        print_events(c, "ReplicaSet", rs->metadata.name, rs->metadata.uid);
}

/* start_after: when a pod waiting out its crash-loop back-off will start
 * (tend.io/start-after), or NULL. */
static void print_state(const char *key, const spec_container_state *s, const char *start_after) {
        if (s->running) {
                _cleanup_free_ char *t = time_text(s->running->started_at);
                printf("    %-15sRunning\n      Started:      %s\n", key, t);
        } else if (s->waiting) {
                printf("    %-15sWaiting\n      Reason:       %s\n", key,
                       strna(s->waiting->reason));
                if (s->waiting->message)
                        printf("      Message:      %s\n", s->waiting->message);
                usec_t at, now = now_realtime();
                if (start_after && parse_timestamp(start_after, &at) >= 0) {
                        char left[40];
                        if (at > now)
                                printf("      Next Start:   in %s (%s)\n",
                                       cli_human_duration(left, at - now), start_after);
                        else
                                printf("      Next Start:   now (the back-off ended at %s)\n",
                                       start_after);
                }
        } else if (s->terminated) {
                const spec_state_terminated *t = s->terminated;
                _cleanup_free_ char *st = time_text(t->started_at), *fi = time_text(t->finished_at);
                printf("    %-15sTerminated\n      Reason:       %s\n      Exit Code:    %d\n", key,
                       strna(t->reason), t->exit_code);
                if (t->signal)
                        printf("      Signal:       %d\n", t->signal);
                if (t->message)
                        printf("      Message:      %s\n", t->message);
                printf("      Started:      %s\n      Finished:     %s\n", st, fi);
        }
}

static void describe_pod(client *c, const spec_pod *p) {
        const spec_owner_ref *o = spec_meta_controller(&p->metadata);
        const spec_container_status *cs = p->status.n_container_statuses
                                                  ? &p->status.container_statuses[0]
                                                  : NULL;
        _cleanup_free_ char *start = time_text(p->status.start_time);

        kv("Name:", "%s", p->metadata.name);
        kv("Namespace:", "%s", p->metadata.namespace);
        kv("Node:", "%s", p->spec.node_name ?: "<none>");
        kv("Start Time:", "%s", start);
        print_map("Labels:", &p->metadata.labels);
        print_map("Annotations:", &p->metadata.annotations);
        kv("Status:", "%s", cli_pod_status(p));
        if (p->status.message)
                kv("Message:", "%s", p->status.message);
        if (o)
                kv("Controlled By:", "%s/%s", strna(o->kind), strna(o->name));
        else
                kv("Controlled By:", "<none>");
        printf("Containers:\n");
        if (cs) {
                printf("  %s:\n", strempty(cs->name));
                printf("    Container ID:  %s\n", cs->container_id ?: "<none>");
                print_state("State:", &cs->state,
                            spec_map_get(&p->metadata.annotations, SPEC_ANN_START_AFTER));
                if (cs->last_state.running || cs->last_state.waiting || cs->last_state.terminated)
                        print_state("Last State:", &cs->last_state, NULL);
                printf("    Ready:         %s\n    Restart Count: %d\n",
                       cs->ready ? "True" : "False", cs->restart_count);
        }
        {
                spec_pod_template t = { .metadata = p->metadata, .spec = p->spec };
                t.metadata.annotations = (spec_map){};
                print_template(&t, spec_map_get(&p->metadata.annotations, SPEC_ANN_PORTS));
        }
        print_conditions(p->status.conditions, p->status.n_conditions, false);
        print_events(c, "Pod", p->metadata.name, p->metadata.uid);
}

int cli_describe(int argc, char **argv) {
        static const struct option options[] = {
                { "namespace", required_argument, NULL, 'n' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        _cleanup_(client_freep) client *c = NULL;
        const spec_kind *res;
        const char *name;
        _cleanup_free_ char *path = NULL;
        json_t *resp = NULL;
        void *obj;
        long code;
        int opt, ret = 0;

        optind = 1;
        while ((opt = getopt_long(argc, argv, "n:h", options, NULL)) >= 0)
                switch (opt) {
                case 'n':
                        cli.namespace = optarg;
                        break;
                case 'h':
                        printf("Usage: tend describe deploy/NAME|rs/NAME|pod/NAME ...\n\n"
                               "An object in detail: spec, conditions, ReplicaSets with "
                               "revisions,\n"
                               "container states with the last termination, and its events.\n");
                        return 0;
                default:
                        return 2;
                }
        if (optind >= argc) {
                fprintf(stderr, "error: what to describe? e.g. tend describe deploy/web (or deploy "
                                "web)\n");
                return 2;
        }
        cli_ref refs[64];
        size_t n_refs;
        if (cli_parse_refs(argv + optind, (size_t) (argc - optind), false, refs, ELEMENTSOF(refs),
                           &n_refs) < 0)
                return 1;
        c = cli_connect();
        if (!c)
                return 1;
        for (size_t i = 0; i < n_refs; i++) {
                if (i > 0)
                        printf("\n\n");
                res = refs[i].res;
                name = refs[i].name;
                free(path);
                path = cli_path(res, cli.namespace, name);
                if (!path || client_request(c, "GET", path, NULL, NULL, &code, &resp) < 0)
                        return 1;
                if (code != 200) {
                        client_print_error(code, resp);
                        json_decref(resp);
                        ret = 1;
                        continue;
                }
                obj = cli_decode(res->type, resp);
                json_decref(resp);
                if (!obj)
                        return 1;
                if (res->type == &spec_type_deployment)
                        describe_deployment(c, obj);
                else if (res->type == &spec_type_replica_set)
                        describe_replica_set(c, obj);
                else if (res->type == &spec_type_pod)
                        describe_pod(c, obj);
                else {
                        json_t *j = spec_encode(res->type, obj);
                        cli_print_yaml(j);
                        json_decref(j);
                }
                spec_free(res->type, obj);
        }
        return ret;
}

spec_replica_set **cli_owned_replica_sets(client *c, const spec_deployment *d, size_t *ret_n) {
        return owned_rs(c, d, ret_n);
}
