/* SPDX-License-Identifier: MIT */

/* The real backend: the pod worker's view of tend_runtime. The rt_manager's
 * userdata is the agent; each rt_pod's userdata is the agent's pod_rt. */

#include <sched.h>

#include "backend-rt.h"

static int rt_start(void *b, const rt_pod_params *p, void *pod_userdata, void **ret_handle,
                    char **ret_error) {
        return rt_pod_start(b, p, pod_userdata, (rt_pod **) ret_handle, ret_error);
}

static int rt_adopt(void *b, const rt_pod_params *p, const rt_record *r, void *pod_userdata,
                    void **ret_handle, char **ret_error) {
        return rt_pod_adopt(b, p, r, pod_userdata, (rt_pod **) ret_handle, ret_error);
}

static int rt_find(void *b, const rt_pod_params *p, rt_record *ret) {
        return rt_manager_find_pod(b, p, ret);
}

static void rt_sweep_orphans(void *b) {
        rt_manager_sweep_orphans(b);
}

static bool rt_early_start(const spec_pod_spec *s) {
        return rt_runtime_caps(s->runtime_class_name) & RT_CAP_START_BEFORE_COMMIT;
}

/* After a pass's first spawn: the child has left our memory (vfork) but
 * may not have finished its exec, the kernel still loading the program; on
 * a busy core it waits for whatever we do next. Measured (bench-respawn,
 * fork → exec): 2.6 ms with 2 ms of work after clone() returned, 0.6 ms
 * with a yield. Once a pass, not per spawn: a thousand yields would give
 * each child's whole start-up our core. */
static void rt_after_starts(void *b) {
        (void) sched_yield();
}

static void rt_remove_logs(void *b, const char *ns, const char *pod) {
        rt_manager_remove_pod_logs(b, ns, pod);
}

static int rt_update_volumes(void *handle, const rt_pod_params *p, char **ret_error) {
        return rt_pod_update_volumes(handle, p, ret_error);
}

static void rt_remove_volumes(void *b, const char *uid) {
        rt_manager_remove_pod_volumes(b, uid);
}

static void rt_sweep_volumes(void *b, bool (*keep)(const char *uid, void *userdata),
                             void *userdata) {
        rt_manager_sweep_volumes(b, keep, userdata);
}

static const char *rt_limits(void *b, const spec_pod_spec *s, char **ret) {
        return rt_limits_problem(b, s, ret);
}

static int rt_usage(void *b, const char *uid, pid_t pid, uint64_t *ret_cpu_ns,
                    uint64_t *ret_memory) {
        return rt_manager_pod_usage(b, uid, pid, ret_cpu_ns, ret_memory);
}

static int rt_stop(void *handle, usec_t grace) {
        return rt_pod_stop(handle, grace);
}

static int rt_signal(void *handle, int sig) {
        return rt_pod_signal(handle, sig);
}

static void rt_free(void *handle) {
        rt_pod_free(handle);
}

static const rt_record *rt_record_of(void *handle) {
        return rt_pod_record(handle);
}

static const char *rt_container_id(void *handle) {
        return rt_pod_container_id(handle);
}

const agent_backend agent_rt_backend = {
        .start = rt_start,
        .adopt = rt_adopt,
        .find = rt_find,
        .sweep_orphans = rt_sweep_orphans,
        .early_start = rt_early_start,
        .remove_logs = rt_remove_logs,
        .update_volumes = rt_update_volumes,
        .remove_volumes = rt_remove_volumes,
        .sweep_volumes = rt_sweep_volumes,
        .mount_problem = rt_mount_problem,
        .limits_problem = rt_limits,
        .usage = rt_usage,
        .after_starts = rt_after_starts,
        .stop = rt_stop,
        .signal = rt_signal,
        .free = rt_free,
        .record = rt_record_of,
        .container_id = rt_container_id,
};

static void on_started(rt_pod *pod, void *userdata) {
        agent_pod_started(userdata, rt_pod_userdata(pod));
}

static void on_exited(rt_pod *pod, const rt_exit *e, void *userdata) {
        agent_pod_exited(userdata, rt_pod_userdata(pod), e);
}

static void on_probe(rt_pod *pod, rt_probe_type type, bool success, const char *message,
                     void *userdata) {
        agent_pod_probe(userdata, rt_pod_userdata(pod), type, success, message);
}

static void on_status(rt_pod *pod, const char *text, void *userdata) {
        agent_pod_status(userdata, rt_pod_userdata(pod), text);
}

static void on_orphan_stopped(const char *unit, void *userdata) {
        agent_orphan_stopped(userdata, unit);
}

const rt_callbacks agent_rt_callbacks = {
        .started = on_started,
        .exited = on_exited,
        .probe = on_probe,
        .orphan_stopped = on_orphan_stopped,
        .status = on_status,
};
