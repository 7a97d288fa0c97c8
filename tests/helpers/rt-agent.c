/* SPDX-License-Identifier: MIT */

/*
 * tend-rt-agent: the runtime in a process of its own, to test adoption by a
 * second agent instance after the first is gone.
 *
 *   tend-rt-agent start DIR PROG [MODE]
 *                                  start PROG MODE (sleep) as a pod, write
 *                                  DIR/record.json, print "started pid N",
 *                                  exit leaving the pod running
 *   tend-rt-agent adopt-and-kill DIR
 *                                  adopt from the record, print "adopted pid
 *                                  N", kill it, print how its exit looked
 *   tend-rt-agent adopt DIR        adopt or print "refused: REASON"
 *   tend-rt-agent sweep DIR        what an agent does at start-up with no pod to
 *                                  adopt: kill the processes of DIR's pods
 *                                  (rt_manager_sweep_orphans()); "swept"
 *   tend-rt-agent adopt-and-sweep DIR
 *                                  adopt from the record, then sweep: the adopted
 *                                  pod is spared; "adopted pid N", "swept"
 */

#include <signal.h>
#include <stdio.h>

#include "tend/runtime.h"

static bool started, exited;
static rt_exit last_exit;

static void on_started(rt_pod *pod, void *u) {
        started = true;
}

static void on_exited(rt_pod *pod, const rt_exit *e, void *u) {
        exited = true;
        last_exit = *e;
}

static const rt_callbacks cbs = { .started = on_started, .exited = on_exited };

static spec_pod_spec *make_spec(const char *prog, const char *mode) {
        char *yaml = strprintf("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\n"
                               "spec:\n  selector: {matchLabels: {app: a}}\n  template:\n"
                               "    metadata: {labels: {app: a}}\n    spec:\n      containers:\n"
                               "      - {name: main, command: [\"%s\", %s]}\n",
                               prog, mode);
        spec_manifest m = {};
        spec_errors errs = {};
        spec_pod_spec *s = malloc(sizeof *s);

        if (!yaml || !s || spec_manifest_add_buffer(&m, "helper", yaml, strlen(yaml), &errs) < 0)
                exit(2);
        *s = m.items[0].deployment->spec.template.spec;
        memset(&m.items[0].deployment->spec.template.spec, 0, sizeof *s);
        m.items[0].deployment->spec.template.spec.restart_policy = -EINVAL;
        m.items[0].deployment->spec.template.spec.runtime_class_name = -EINVAL;
        spec_manifest_done(&m);
        free(yaml);
        return s;
}

int main(int argc, char **argv) {
        uv_loop_t loop;
        rt_manager *m;
        rt_pod *pod = NULL;
        char *err = NULL, *path;
        rt_config c = { .loop = &loop, .callbacks = &cbs };
        rt_pod_params p = { .namespace = "default", .name = "adoptee", .uid = "u" };
        int r;

        if (argc < 3)
                return 2;
        uv_loop_init(&loop);
        c.state_dir = argv[2];
        c.cgroups = RT_CGROUPS_OFF; /* (as rt-harness.c: pods left running) */
        if (rt_manager_new(&c, &m) < 0)
                return 2;
        path = strprintf("%s/record.json", argv[2]);
        p.spec = make_spec(argc > 3 ? argv[3] : "/bin/sleep", argc > 4 ? argv[4] : "sleep");

        if (streq(argv[1], "sweep")) {
                rt_manager_sweep_orphans(m);
                printf("swept\n");
        } else if (streq(argv[1], "start")) {
                r = rt_pod_start(m, &p, NULL, &pod, &err);
                if (r < 0) {
                        printf("failed: %s\n", err);
                        return 1;
                }
                while (!started)
                        uv_run(&loop, UV_RUN_ONCE);
                json_t *j = rt_record_to_json(rt_pod_record(pod));
                json_dump_file(j, path, 0);
                json_decref(j);
                printf("started pid %d\n", (int) rt_pod_record(pod)->pid);
        } else {
                json_error_t je;
                json_t *j = json_load_file(path, 0, &je);
                rt_record rec;
                if (!j || rt_record_from_json(j, &rec) < 0) {
                        printf("no record\n");
                        return 1;
                }
                json_decref(j);
                r = rt_pod_adopt(m, &p, &rec, NULL, &pod, &err);
                if (r < 0)
                        printf("refused: %s\n", err);
                while (pod && !started)
                        uv_run(&loop, UV_RUN_ONCE);
                if (pod)
                        printf("adopted pid %d\n", (int) rt_pod_record(pod)->pid);
                if (pod && streq(argv[1], "adopt-and-kill")) {
                        kill(rec.pid, SIGKILL);
                        while (!exited)
                                uv_run(&loop, UV_RUN_ONCE);
                        printf("exit %s\n", last_exit.kind == RT_EXIT_UNKNOWN  ? "unknown"
                                            : last_exit.kind == RT_EXIT_SIGNAL ? "signal"
                                                                               : "code");
                }
                if (pod && streq(argv[1], "adopt-and-sweep")) {
                        rt_manager_sweep_orphans(m);
                        printf("swept\n");
                }
                rt_record_done(&rec);
        }
        fflush(stdout);
        rt_manager_close(m);
        uv_run(&loop, UV_RUN_DEFAULT);
        uv_loop_close(&loop);
        free(err);
        free(path);
        spec_done(&spec_type_pod_template, &(spec_pod_template){ .spec = *p.spec });
        free((void *) p.spec);
        return 0;
}
