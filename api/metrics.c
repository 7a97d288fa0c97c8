/* SPDX-License-Identifier: MIT */

/* The HTTP API (tend/api.h): /metrics. */

#include <inttypes.h>

#include "api-internal.h"

/* ---- metrics of the API itself -------------------------------------------------------- */

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

/* A counter never goes down: where a pod's CPU time is its processes'
 * summed (v1 without cpuacct), one that exits takes its time with it. The
 * most said is said again; entries of pods not seen in a scrape go. */
typedef struct cpu_high {
        uint64_t ns;
        unsigned scrape;
} cpu_high;

static uint64_t cpu_counter(api_server *s, const char *uid, uint64_t ns) {
        cpu_high *h;

        if (!s->cpu_high && !(s->cpu_high = tend_hashmap_new()))
                return ns;
        h = tend_hashmap_get(s->cpu_high, uid);
        if (!h) {
                if (!(h = new0(cpu_high, 1)) || tend_hashmap_put(s->cpu_high, uid, h, NULL) < 0) {
                        free(h);
                        return ns;
                }
        }
        h->ns = MAX(h->ns, ns);
        h->scrape = s->scrapes;
        return h->ns;
}

static void cpu_high_prune(api_server *s) {
        _cleanup_strv_free_ char **gone = NULL;
        const char *k;
        void *v;

        for (size_t i = 0; s->cpu_high && tend_hashmap_next(s->cpu_high, &i, &k, &v);)
                if (((cpu_high *) v)->scrape != s->scrapes)
                        (void) strv_extend(&gone, k);
        for (size_t i = 0; gone && gone[i]; i++)
                free(tend_hashmap_remove(s->cpu_high, gone[i]));
}

/* Each running pod's use, under cAdvisor's names (what a kubelet serves,
 * and dashboards read): from its cgroup, else its process (usage.c). */
static void pod_usage_text(api_server *s, tend_buf *b, const void *const *items, size_t n) {
        (void) tend_buf_adds(b, "# HELP container_cpu_usage_seconds_total A pod's CPU time, every "
                                "process of it (its cgroup's).\n"
                                "# TYPE container_cpu_usage_seconds_total counter\n");
        _cleanup_buf_ tend_buf mem = TEND_BUF_INIT(4096);
        (void) tend_buf_adds(&mem, "# HELP container_memory_working_set_bytes A pod's memory in "
                                   "use, less the page cache it could drop (its cgroup's).\n"
                                   "# TYPE container_memory_working_set_bytes gauge\n");
        s->scrapes++;
        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = items[i];
                uint64_t cpu_ns, begun, memory;
                if (p->status.phase != SPEC_POD_RUNNING ||
                    api__pod_usage(s, p, &cpu_ns, &begun, &memory) < 0)
                        continue;
                const char *c = p->spec.n_containers ? p->spec.containers[0].name : "main";
                (void) tend_buf_addf(b,
                                     "container_cpu_usage_seconds_total{namespace=\"%s\",pod="
                                     "\"%s\",container=\"%s\"} %.6f\n",
                                     p->metadata.namespace, p->metadata.name, c,
                                     (double) cpu_counter(s, p->metadata.uid, cpu_ns) / 1e9);
                (void) tend_buf_addf(&mem,
                                     "container_memory_working_set_bytes{namespace=\"%s\",pod="
                                     "\"%s\",container=\"%s\"} %" PRIu64 "\n",
                                     p->metadata.namespace, p->metadata.name, c, memory);
        }
        (void) tend_buf_adds(b, tend_buf_str(&mem));
        cpu_high_prune(s);
}

enum MHD_Result api__handle_metrics(req *r) {
        api_server *s = r->s;
        const agent_metrics *m = agent_get_metrics(s->agent);
        tend_buf b = TEND_BUF_INIT(1 << 20);
        const void *const *items;
        size_t n = store_list(s->store, STORE_POD, &items);
        uint64_t phases[_SPEC_POD_PHASE_MAX] = {}, by_thread, by_commit;

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
        store_checkpoints(s->store, &by_thread, &by_commit);
        (void) tend_buf_addf(&b,
                             "# HELP tend_store_checkpoints_total The WAL's checkpoints: by the "
                             "store's thread, or by a commit on the loop (the thread is behind).\n"
                             "# TYPE tend_store_checkpoints_total counter\n"
                             "tend_store_checkpoints_total{by=\"thread\"} %" PRIu64 "\n"
                             "tend_store_checkpoints_total{by=\"commit\"} %" PRIu64 "\n",
                             by_thread, by_commit);
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
        (void) tend_buf_addf(&b,
                             "# HELP tend_api_watch_history_bytes What the API keeps of the "
                             "latest changes, for watches that resume (at most %zu).\n"
                             "# TYPE tend_api_watch_history_bytes gauge\n"
                             "tend_api_watch_history_bytes %zu\n"
                             "# HELP tend_api_watch_history_changes How many changes that is.\n"
                             "# TYPE tend_api_watch_history_changes gauge\n"
                             "tend_api_watch_history_changes %zu\n",
                             CHANGE_RING_BYTES, s->ring_bytes, s->ring_n);
        (void) tend_buf_addf(&b,
                             "# HELP tend_api_connections_cut_total Connections closed for not "
                             "sending a whole request in time.\n"
                             "# TYPE tend_api_connections_cut_total counter\n"
                             "tend_api_connections_cut_total %" PRIu64 "\n",
                             s->connections_cut);
        (void) tend_buf_addf(&b,
                             "# HELP tend_api_writes_made_again_total Writes of a deployment "
                             "made again: the object changed while they were made (off the "
                             "loop).\n"
                             "# TYPE tend_api_writes_made_again_total counter\n"
                             "tend_api_writes_made_again_total %" PRIu64 "\n"
                             "# HELP tend_api_writes_rebased_total Writes of a deployment "
                             "whose object's status alone changed while they were made: "
                             "committed with the new status.\n"
                             "# TYPE tend_api_writes_rebased_total counter\n"
                             "tend_api_writes_rebased_total %" PRIu64 "\n",
                             s->writes_made_again, s->writes_rebased);
        pod_usage_text(s, &b, items, n);
        if (s->fleet && s->fleet->metrics)
                s->fleet->metrics(s->fleet->userdata, &b);
        return api__queue(r, 200, "text/plain; version=0.0.4", tend_buf_take(&b));
}
