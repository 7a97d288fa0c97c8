/* SPDX-License-Identifier: MIT */

/*
 * A pod's and the manager's lifetimes (reference counts: a pod lives while
 * libuv holds one of its handles or a request of it is out; the manager
 * while one of its pods or handles does), and a pod's readiness as it is
 * published. Everything else of the runtime refers to these; they call
 * nothing of it but the backend's pod_done and the manager's destroy.
 */

#include "rt-internal.h"

void rt__manager_ref(rt_manager *m) {
        m->refs++;
}

void rt__manager_unref(rt_manager *m) {
        if (--m->refs == 0)
                m->destroy(m);
}

rt_pod *rt__pod_ref(rt_pod *p) {
        p->refs++;
        return p;
}

static void pod_free_now(rt_pod *p) {
        rt_manager *m = p->manager;

        if (p->backend && p->ops->pod_done)
                p->ops->pod_done(p);
        free(p->backend);
        if (p->log_fd >= 0 && m && m->log_fds > 0)
                m->log_fds--;
        safe_close(p->log_fd);
        safe_close(p->times_fd);
        free(p->namespace);
        free(p->name);
        free(p->uid);
        free(p->container);
        free(p->container_id);
        free(p->path);
        strv_free(p->argv);
        strv_free(p->envp);
        free(p->working_dir);
        free(p->description);
        rt__mounts_free(p);
        free(p->notify_status);
        rt_record_done(&p->record);
        free(p);
        rt__manager_unref(m);
}

void rt__pod_unref(rt_pod *p) {
        if (--p->refs == 0)
                pod_free_now(p);
}

void rt__readiness_update(rt_pod *p, const char *message) {
        rt_manager *m = p->manager;
        bool ok;

        /* before `started` went out, report_started() publishes it */
        if (p->state != RT_POD_RUNNING || p->started_queued || p->freed)
                return;
        ok = (p->probes[RT_PROBE_READINESS] ? p->probe_ready : true) &&
             (!p->notify_declared_ready || p->notify_ready);
        if (ok == p->ready)
                return;
        p->ready = ok;
        if (m->cb.probe)
                m->cb.probe(p, RT_PROBE_READINESS, ok, message, m->userdata);
}
