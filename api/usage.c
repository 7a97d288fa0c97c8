/* SPDX-License-Identifier: MIT */

/*
 * metrics.k8s.io/v1beta1: what `kubectl top pod` reads. A pod's CPU and
 * memory come from /proc: the CPU time of its process (with the children
 * it has reaped), as a rate between two reads of it (the first read of a
 * pod: since the process started), and its resident set; from its cgroup
 * where it has one (docs/cgroups.md: every process of the pod, its
 * memory's working set; a systemd pod's unit's cgroup, found by the
 * runtime from its main process). The host's, for NodeMetrics, from
 * /proc/stat and /proc/meminfo.
 */

#include <inttypes.h>
#include <unistd.h>

#include "api-internal.h"

typedef struct sample {
        uint64_t cpu_ns; /* CPU time */
        usec_t at;       /* monotonic */
} sample;

#define SAMPLES_MAX 4096 /* pods remembered; the rest are read as new */

/* utime + stime + cutime + cstime and starttime of pid, and its RSS. */
static int read_proc(pid_t pid, uint64_t *ret_ticks, uint64_t *ret_start, uint64_t *ret_rss) {
        unsigned long long f[9]; /* fields 14..22 */
        unsigned long long size = 0, resident = 0;
        _cleanup_free_ char *data = NULL;
        char path[64];
        size_t n;
        int r;

        r = proc_stat_fields(pid, 14, 22, f);
        if (r < 0)
                return r;
        *ret_ticks = f[0] + f[1] + f[2] + f[3];
        *ret_start = f[8];
        snprintf(path, sizeof path, "/proc/%d/statm", (int) pid);
        r = read_full_file(path, 4096, &data, &n);
        if (r < 0)
                return r;
        if (sscanf(data, "%llu %llu", &size, &resident) != 2)
                return -EBADMSG;
        *ret_rss = (uint64_t) resident * (uint64_t) sysconf(_SC_PAGESIZE);
        return 0;
}

/* Readings older than this are of pods long gone (or asked about rarely:
 * their next rate is since the process started, which is still right). */
#define SAMPLE_STALE (10 * 60 * USEC_PER_SEC)

/* Pods come and go (a crash loop makes a new one each time): when the map
 * is full, the readings nobody asked for lately go. */
static void forget_stale(tend_hashmap *h, usec_t now) {
        _cleanup_strv_free_ char **stale = new0(char *, tend_hashmap_size(h) + 1);
        size_t n = 0;
        const char *k;
        void *v;

        if (!stale)
                return;
        /* keys first: the map is not changed while it is walked */
        for (size_t i = 0; tend_hashmap_next(h, &i, &k, &v);)
                if (now - ((sample *) v)->at > SAMPLE_STALE && (stale[n] = strdup(k)))
                        n++;
        for (size_t i = 0; i < n; i++)
                free(tend_hashmap_remove(h, stale[i]));
}

/* CPU use of a pod, in nanocores, from the change since its last read. */
static uint64_t cpu_rate(api_server *s, const char *uid, uint64_t cpu_ns, uint64_t start,
                         usec_t *ret_window) {
        long hz = sysconf(_SC_CLK_TCK);
        usec_t now = now_monotonic();
        sample *prev = s->usage ? tend_hashmap_get(s->usage, uid) : NULL;
        double seconds, cpu;

        if (prev && cpu_ns >= prev->cpu_ns && now > prev->at) {
                seconds = (double) (now - prev->at) / USEC_PER_SEC;
                cpu = (double) (cpu_ns - prev->cpu_ns) / 1e9;
        } else {
                seconds = host_uptime() - (double) start / (double) hz;
                cpu = (double) cpu_ns / 1e9;
        }
        if (!s->usage)
                s->usage = tend_hashmap_new();
        if (!prev && s->usage && tend_hashmap_size(s->usage) >= SAMPLES_MAX)
                forget_stale(s->usage, now);
        if (!prev && s->usage && tend_hashmap_size(s->usage) < SAMPLES_MAX &&
            (prev = new0(sample, 1)) && tend_hashmap_put(s->usage, uid, prev, NULL) < 0) {
                free(prev);
                prev = NULL;
        }
        if (prev)
                *prev = (sample){ .cpu_ns = cpu_ns, .at = now };
        if (seconds < 0.001)
                seconds = 0.001;
        *ret_window = (usec_t) (seconds * USEC_PER_SEC);
        return (uint64_t) (cpu / seconds * 1e9);
}

static char *quantity_mem(uint64_t bytes) {
        return strprintf("%" PRIu64 "Ki", bytes / 1024);
}

int api__pod_usage(api_server *s, const spec_pod *p, uint64_t *ret_cpu_ns, uint64_t *ret_begun,
                   uint64_t *ret_memory) {
        json_t *rec = store_get_record(s->store, p->metadata.uid);
        json_int_t pid = json_integer_value(json_object_get(rec, "pid")),
                   start = json_integer_value(json_object_get(rec, "startTime"));
        uint64_t ticks = 0, begun = 0, rss = 0, cpu_ns, cg_memory;
        long hz = sysconf(_SC_CLK_TCK);
        bool own = false;

        if (!spec_pod_active(p) || p->status.phase != SPEC_POD_RUNNING ||
            (p->spec.node_name && !streq(p->spec.node_name, agent_node_name(s->agent))))
                return -ENOENT; /* (another node's, in a fleet: measured there) */
        if (pid > 0) {
                if (read_proc((pid_t) pid, &ticks, &begun, &rss) < 0 ||
                    (start > 0 && (uint64_t) start != begun))
                        return -ESRCH; /* (its process gone, or a reused pid) */
                own = true;
        }
        /* its cgroup, where it has one: every process of it (a systemd
         * pod's unit: no pid of its record, the runtime knows its main) */
        if (agent_pod_usage(s->agent, p->metadata.uid, (pid_t) pid, &cpu_ns, &cg_memory) >= 0) {
                *ret_cpu_ns = cpu_ns;
                *ret_memory = cg_memory;
                if (!own) {
                        /* its start in ticks since boot, as /proc says it */
                        usec_t age = now_realtime() > p->status.start_time
                                             ? now_realtime() - p->status.start_time
                                             : 0;
                        double at = host_uptime() - (double) age / USEC_PER_SEC;
                        begun = (uint64_t) (MAX(at, 0.0) * (double) hz);
                }
        } else if (!own)
                return -ENOENT; /* no process of its own to measure */
        else {
                *ret_cpu_ns = clock_ticks_ns(ticks);
                *ret_memory = rss;
        }
        *ret_begun = begun;
        return 0;
}

static json_t *pod_metrics(api_server *s, const spec_pod *p, json_t *encoded) {
        uint64_t begun, rss, nanocores, cpu_ns;
        char ts[TIMESTAMP_MAX], created[TIMESTAMP_MAX];
        _cleanup_free_ char *cpu = NULL, *mem = NULL, *window = NULL;
        usec_t w;

        if (api__pod_usage(s, p, &cpu_ns, &begun, &rss) < 0)
                return NULL;
        nanocores = cpu_rate(s, p->metadata.uid, cpu_ns, begun, &w);
        cpu = strprintf("%" PRIu64 "n", nanocores);
        mem = quantity_mem(rss);
        window = strprintf("%.3fs", (double) w / USEC_PER_SEC);
        if (!cpu || !mem || !window)
                return NULL;
        return json_pack(
                "{s:{s:s, s:s, s:s, s:O*}, s:s, s:s, s:[{s:s, s:{s:s, s:s}}]}", "metadata", "name",
                p->metadata.name, "namespace", p->metadata.namespace, "creationTimestamp",
                format_timestamp(created, p->metadata.creation_timestamp), "labels",
                json_object_get(json_object_get(encoded, "metadata"), "labels"), "timestamp",
                format_timestamp(ts, now_realtime()), "window", window, "containers", "name",
                p->spec.n_containers ? p->spec.containers[0].name : "main", "usage", "cpu", cpu,
                "memory", mem);
}

static enum MHD_Result pods(req *r, const char *ns, const char *name) {
        _cleanup_(json_decrefp) json_t *list = json_pack(
                "{s:s, s:s, s:{}, s:[]}", "kind", "PodMetricsList", "apiVersion",
                "metrics.k8s.io/v1beta1", "metadata", "items");
        json_t *items = json_object_get(list, "items");
        const void *const *objs;
        size_t n = store_list(r->s->store, STORE_POD, &objs);
        filter f;
        char *err = NULL;

        if (!list)
                return api__send_oom(r);
        if (api__filter_parse(r, ns, "pods", &f, &err) < 0) {
                enum MHD_Result ret = api__send_status(r, 400, "BadRequest", "%s",
                                                       err ?: "out of memory");
                free(err);
                return ret;
        }
        for (size_t i = 0; i < n; i++) {
                const spec_pod *p = objs[i];
                json_t *j, *m;
                if ((ns && !streq_ptr(p->metadata.namespace, ns)) ||
                    (name && !streq_ptr(p->metadata.name, name)))
                        continue;
                j = api__encode_obj(STORE_POD, p);
                m = j && api__filter_match(&f, j) ? pod_metrics(r->s, p, j) : NULL;
                json_decref(j);
                if (m && name) {
                        api__filter_done(&f);
                        if (json_object_set_new(m, "kind", json_string("PodMetrics")) < 0 ||
                            json_object_set_new(m, "apiVersion",
                                                json_string("metrics.k8s.io/v1beta1")) < 0)
                                m = (json_decref(m), NULL);
                        return api__send_json(r, 200, m);
                }
                if (m && json_array_append_new(items, m) < 0)
                        break;
        }
        api__filter_done(&f);
        if (name)
                return api__send_status(r, 404, "NotFound",
                                        "podmetrics.metrics.k8s.io \"%s\" not found (no running "
                                        "process of its own to measure)",
                                        name);
        return api__send_json(r, 200, json_incref(list));
}

/* The host: CPU from /proc/stat (all but idle and iowait), memory in use
 * (MemTotal - MemAvailable). */
static enum MHD_Result node(req *r, bool list) {
        _cleanup_free_ char *stat = NULL, *cpu = NULL, *used = NULL, *window = NULL;
        unsigned long long u = 0, ni = 0, sy = 0, idle = 0, io = 0, irq = 0, sirq = 0, st = 0;
        uint64_t total_kb = 0, avail_kb = 0;
        const char *host = agent_node_name(r->s->agent);
        char ts[TIMESTAMP_MAX];
        size_t n;
        usec_t w;

        if (read_full_file("/proc/stat", 1 << 20, &stat, &n) < 0 ||
            sscanf(stat, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &u, &ni, &sy, &idle, &io,
                   &irq, &sirq, &st) < 4 ||
            host_meminfo(&total_kb, &avail_kb) < 0)
                return api__send_status(r, 500, NULL, "cannot read /proc/stat or /proc/meminfo");
        cpu = strprintf("%" PRIu64 "n",
                        cpu_rate(r->s, "\x01node", u + ni + sy + irq + sirq + st, 0, &w));
        used = strprintf("%" PRIu64 "Ki", total_kb > avail_kb ? total_kb - avail_kb : 0);
        window = strprintf("%.3fs", (double) w / USEC_PER_SEC);
        if (!cpu || !used || !window)
                return api__send_oom(r);
        json_t *m = json_pack("{s:s, s:s, s:{s:s}, s:s, s:s, s:{s:s, s:s}}", "kind", "NodeMetrics",
                              "apiVersion", "metrics.k8s.io/v1beta1", "metadata", "name", host,
                              "timestamp", format_timestamp(ts, now_realtime()), "window", window,
                              "usage", "cpu", cpu, "memory", used);
        return api__send_json(r, 200,
                              list && m
                                      ? json_pack("{s:s, s:s, s:{}, s:[o]}", "kind",
                                                  "NodeMetricsList", "apiVersion",
                                                  "metrics.k8s.io/v1beta1", "metadata", "items", m)
                                      : m);
}

void api__usage_done(api_server *s) {
        const char *k;
        void *v;

        for (size_t i = 0; s->usage && tend_hashmap_next(s->usage, &i, &k, &v);)
                free(v);
        s->usage = tend_hashmap_free(s->usage);
        for (size_t i = 0; s->cpu_high && tend_hashmap_next(s->cpu_high, &i, &k, &v);)
                free(v);
        s->cpu_high = tend_hashmap_free(s->cpu_high);
}

json_t *api__usage_resources(void) {
        return json_pack("{s:s, s:s, s:s, s:[{s:s, s:s, s:b, s:s, s:[s, s]}, "
                         "{s:s, s:s, s:b, s:s, s:[s, s]}]}",
                         "kind", "APIResourceList", "apiVersion", "v1", "groupVersion",
                         "metrics.k8s.io/v1beta1", "resources", "name", "pods", "singularName", "",
                         "namespaced", true, "kind", "PodMetrics", "verbs", "get", "list", "name",
                         "nodes", "singularName", "", "namespaced", false, "kind", "NodeMetrics",
                         "verbs", "get", "list");
}

/* seg: the path after /apis/metrics.k8s.io/v1beta1 */
enum MHD_Result api__handle_usage(req *r, char **seg, size_t n) {
        if (n == 0)
                return api__send_json(r, 200, api__usage_resources());
        if (n == 1 && streq(seg[0], "pods"))
                return pods(r, NULL, NULL);
        if ((n == 3 || n == 4) && streq(seg[0], "namespaces") && streq(seg[2], "pods"))
                return pods(r, seg[1], n == 4 ? seg[3] : NULL);
        if (n == 1 && streq(seg[0], "nodes"))
                return node(r, true); /* a list of one: this host */
        if (n == 2 && streq(seg[0], "nodes"))
                return node(r, false);
        return api__send_status(r, 404, "NotFound",
                                "metrics.k8s.io serves pods and nodes: "
                                "/apis/metrics.k8s.io/v1beta1/namespaces/NS/pods[/NAME], "
                                "/apis/metrics.k8s.io/v1beta1/nodes[/NAME]");
}
