/* SPDX-License-Identifier: MIT */

/* The backends by runtimeClassName: the one place that names them all. The
 * manager reaches a backend only through its rt_ops. */

#include "rt-internal.h"

static const rt_ops *const backends[] = {
        [SPEC_RUNTIME_PROCESS] = &rt_process_ops,
        [SPEC_RUNTIME_SYSTEMD] = &rt_systemd_ops,
};

const rt_ops *rt__backend_for(spec_runtime_class c) {
        if (c == _SPEC_RUNTIME_INVALID) /* unset: the default */
                return &rt_process_ops;
        if (c < 0 || (size_t) c >= ELEMENTSOF(backends))
                return NULL;
        return backends[c];
}

void rt__backends_init(rt_manager *m, const rt_config *c) {
        for (size_t i = 0; i < ELEMENTSOF(backends); i++)
                if (backends[i] && backends[i]->manager_init)
                        backends[i]->manager_init(m, c);
}

void rt__backends_close(rt_manager *m) {
        for (size_t i = 0; i < ELEMENTSOF(backends); i++)
                if (backends[i] && backends[i]->manager_close)
                        backends[i]->manager_close(m);
}

int rt_manager_find_pod(rt_manager *m, const rt_pod_params *p, rt_record *ret) {
        const rt_ops *ops = rt__backend_for(p->spec->runtime_class_name);

        return ops && ops->find ? ops->find(m, p, ret) : -ESRCH;
}

void rt_manager_sweep_orphans(rt_manager *m) {
        /* processes first: a unit's are the unit sweep's */
        for (size_t i = 0; i < ELEMENTSOF(backends); i++)
                if (backends[i] && backends[i]->sweep_orphans)
                        backends[i]->sweep_orphans(m);
}

unsigned rt_runtime_caps(spec_runtime_class c) {
        const rt_ops *ops = rt__backend_for(c);

        return ops ? ops->caps : 0;
}
