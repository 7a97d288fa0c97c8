/* SPDX-License-Identifier: MIT */

/* The shared half of the runtime tests (see rt-harness.h). */

#include <stdio.h>

#include "rt-harness.h"

/* ---- harness ------------------------------------------------------------------------ */

harness *H;
char testprog[4096];

static void on_started(rt_pod *pod, void *u) {
        harness *h = u;
        if (h->n_events < MAX_EVENTS)
                h->events[h->n_events++] = (event){ .type = EV_STARTED,
                                                    .id = rt_pod_userdata(pod),
                                                    .pod = pod,
                                                    .at = now_monotonic() };
}

static void on_exited(rt_pod *pod, const rt_exit *e, void *u) {
        harness *h = u;
        event *ev;
        h->n_exited++;
        if (h->n_events >= MAX_EVENTS)
                return;
        ev = &h->events[h->n_events++];
        *ev = (event){ .type = EV_EXITED,
                       .pod = pod,
                       .id = rt_pod_userdata(pod),
                       .exit = *e,
                       .at = now_monotonic() };
        /* The message is borrowed for the call: keep a copy. */
        snprintf(ev->message, sizeof ev->message, "%s", e->message ?: "");
        ev->exit.message = ev->message;
}

static void on_probe(rt_pod *pod, rt_probe_type t, bool ok, const char *msg, void *u) {
        harness *h = u;
        event *e;
        if (h->n_events >= MAX_EVENTS)
                return;
        e = &h->events[h->n_events++];
        *e = (event){ .type = EV_PROBE,
                      .pod = pod,
                      .id = rt_pod_userdata(pod),
                      .probe = t,
                      .ok = ok,
                      .at = now_monotonic() };
        snprintf(e->message, sizeof e->message, "%s", msg ?: "");
}

static void on_orphan_stopped(const char *unit, void *u) {
        harness *h = u;
        if (h->n_orphans < ELEMENTSOF(h->orphans))
                snprintf(h->orphans[h->n_orphans++], sizeof h->orphans[0], "%s", unit);
}

static const rt_callbacks callbacks = {
        .started = on_started,
        .exited = on_exited,
        .probe = on_probe,
        .orphan_stopped = on_orphan_stopped,
};

harness *harness_new(const rt_config *extra) {
        harness *h = calloc(1, sizeof *h);
        rt_config c = extra ? *extra : (rt_config){};

        assert_non_null(h);
        assert_int_equal(uv_loop_init(&h->loop), 0);
        snprintf(h->state_dir, sizeof h->state_dir, "/tmp/tend-rt-XXXXXX");
        assert_non_null(mkdtemp(h->state_dir));
        c.loop = &h->loop;
        c.state_dir = h->state_dir;
        c.callbacks = &callbacks;
        c.userdata = h;
        c.subreaper = true;
        /* Pods in cgroups are tests/cli/cgroups.sh's, with a real tendd
         * (which keeps a cgroup of a pod it leaves running, as these
         * tests leave some: an empty one would be left behind). */
        c.cgroups = RT_CGROUPS_OFF;
        assert_int_equal(rt_manager_new(&c, &h->m), 0);
        H = h;
        return h;
}

void harness_free(harness *h) {
        char cmd[128];

        rt_manager_close(h->m);
        uv_run(&h->loop, UV_RUN_DEFAULT);
        assert_int_equal(uv_loop_close(&h->loop), 0);
        snprintf(cmd, sizeof cmd, "rm -rf %s", h->state_dir);
        assert_int_equal(system(cmd), 0);
        free(h);
        H = NULL;
}

static void on_deadline(uv_timer_t *t) {
        *(bool *) t->data = true;
}

static void on_poll_tick(uv_timer_t *t) {
}

/* Runs the loop until pred() holds or timeout_ms passes; returns pred().
 * A 10 ms tick re-checks conditions the loop does not see (a log file). */
bool run_until(harness *h, bool (*pred)(harness *, void *), void *arg, unsigned timeout_ms) {
        uv_timer_t t, tick;
        bool expired = false;

        uv_timer_init(&h->loop, &t);
        uv_timer_init(&h->loop, &tick);
        t.data = &expired;
        uv_timer_start(&t, on_deadline, timeout_ms, 0);
        uv_timer_start(&tick, on_poll_tick, 10, 10);
        while (!pred(h, arg) && !expired)
                uv_run(&h->loop, UV_RUN_ONCE);
        uv_close((uv_handle_t *) &t, NULL);
        uv_close((uv_handle_t *) &tick, NULL);
        uv_run(&h->loop, UV_RUN_NOWAIT);
        return pred(h, arg);
}

void run_for(harness *h, unsigned ms) {
        uv_timer_t t;
        bool expired = false;

        uv_timer_init(&h->loop, &t);
        t.data = &expired;
        uv_timer_start(&t, on_deadline, ms, 0);
        while (!expired)
                uv_run(&h->loop, UV_RUN_ONCE);
        uv_close((uv_handle_t *) &t, NULL);
        uv_run(&h->loop, UV_RUN_NOWAIT);
}

event *find_event(harness *h, rt_pod *pod, int type) {
        for (size_t i = 0; i < h->n_events; i++)
                if (h->events[i].pod == pod && h->events[i].id == rt_pod_userdata(pod) &&
                    (int) h->events[i].type == type)
                        return &h->events[i];
        return NULL;
}

bool pod_exited(harness *h, void *pod) {
        return find_event(h, pod, EV_EXITED);
}

bool pod_started(harness *h, void *pod) {
        return find_event(h, pod, EV_STARTED);
}

/* The last probe event of a type for a pod, or NULL. */
event *last_probe(harness *h, rt_pod *pod, rt_probe_type t) {
        for (size_t i = h->n_events; i > 0; i--)
                if (h->events[i - 1].pod == pod && h->events[i - 1].id == rt_pod_userdata(pod) &&
                    h->events[i - 1].type == EV_PROBE && h->events[i - 1].probe == t)
                        return &h->events[i - 1];
        return NULL;
}

/* ---- building pod specs ------------------------------------------------------------------- */

/* The pod template's annotations of each spec pod_spec() made (tend.io/
 * lease-ports, tend.io/listen...), which a pod gets from its template:
 * start() passes them on. */
static struct {
        const spec_pod_spec *spec;
        spec_map annotations;
} kept[256];

static void annotations_keep(const spec_pod_spec *s, spec_map *from) {
        for (size_t i = 0; i < ELEMENTSOF(kept); i++)
                if (!kept[i].spec) {
                        kept[i].spec = s;
                        kept[i].annotations = *from;
                        *from = (spec_map){};
                        return;
                }
        fail_msg("more than %zu pod specs at once", ELEMENTSOF(kept));
}

static void annotations_drop(const spec_pod_spec *s) {
        for (size_t i = 0; i < ELEMENTSOF(kept); i++)
                if (kept[i].spec == s) {
                        spec_map_done(&kept[i].annotations);
                        kept[i].spec = NULL;
                }
}

const spec_map *pod_annotations(const spec_pod_spec *s) {
        for (size_t i = 0; i < ELEMENTSOF(kept); i++)
                if (kept[i].spec == s)
                        return &kept[i].annotations;
        return NULL;
}

spec_pod_spec *pod_spec(const char *first, ...) {
        /* A Deployment template wrapped around one container so that the
         * spec goes through the real decoder and defaults. */
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(1 << 16);
        spec_manifest m = {};
        spec_errors errs = {};
        spec_deployment *d;
        spec_pod_spec *s;
        va_list ap;

        tend_buf_addf(&b, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: t}\n"
                          "spec:\n  selector: {matchLabels: {app: t}}\n  template:\n"
                          "    metadata: {labels: {app: t}}\n    spec:\n");
        va_start(ap, first);
        for (const char *line = first; line; line = va_arg(ap, const char *))
                tend_buf_addf(&b, "%s\n", line);
        va_end(ap);
        if (spec_manifest_add_buffer(&m, "test", b.data, b.len, &errs) < 0) {
                spec_errors_print(&errs, stderr);
                fail_msg("bad test spec:\n%s", b.data);
        }
        d = m.items[0].deployment;
        s = malloc(sizeof *s);
        *s = d->spec.template.spec;
        annotations_keep(s, &d->spec.template.metadata.annotations);
        /* steal the pod spec; free the rest */
        memset(&d->spec.template.spec, 0, sizeof d->spec.template.spec);
        d->spec.template.spec.restart_policy = -EINVAL;
        d->spec.template.spec.runtime_class_name = -EINVAL;
        d->spec.template.spec.termination_grace_period_seconds = SPEC_UNSET64;
        spec_manifest_done(&m);
        return s;
}

void pod_spec_free(spec_pod_spec *s) {
        spec_pod_template t;

        annotations_drop(s);
        memset(&t, 0, sizeof t);
        t.spec = *s;
        spec_done(&spec_type_pod_template, &t);
        free(s);
}

/* "command: [testprog, MODE, ...]" as a YAML line */
char *cmd(const char *args) {
        return strprintf("      containers:\n      - name: main\n        command: [\"%s\"%s%s]",
                         testprog, *args ? ", " : "", args);
}

rt_pod *start(harness *h, const char *name, spec_pod_spec *s) {
        char uid[128];
        rt_pod_params p = { .namespace = "default",
                            .name = name,
                            .uid = uid,
                            .spec = s,
                            .annotations = pod_annotations(s) };
        char *err = NULL;
        rt_pod *pod = NULL;
        int r;

        snprintf(uid, sizeof uid, "uid-%s", name); /* one per pod, as in the agent */
        r = rt_pod_start(h->m, &p, (void *) ++h->next_id, &pod, &err);
        if (r < 0)
                fail_msg("start %s: %s (%s)", name, strerror(-r), err);
        free(err);
        return pod;
}

char *read_log(harness *h, const char *pod) {
        char *path = rt_log_path(h->state_dir, "default", pod, "main"), *data = NULL;
        if (read_full_file(path, 64 << 20, &data, NULL) < 0)
                data = strdup("");
        free(path);
        return data;
}

bool log_contains(harness *h, void *arg) {
        const char **a = arg; /* {pod, text} */
        char *data = read_log(h, a[0]);
        bool r = strstr(data, a[1]);
        free(data);
        return r;
}

bool wait_log(harness *h, const char *pod, const char *text) {
        const char *arg[] = { pod, text };
        return run_until(h, log_contains, arg, 5000);
}
