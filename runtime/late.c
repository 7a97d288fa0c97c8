/* SPDX-License-Identifier: MIT */

/*
 * tendd's own time (rt-internal.h, RT_STALL_MIN): a deadline met late
 * says tendd was stopped, suspended or starved, and no pod is blamed for
 * that time. notify.c's watchdog and probe.c's timeouts ask it. And a
 * timer that fired early: the loop's clock lags.
 */

#include "rt-internal.h"

bool rt__late(rt_manager *m, usec_t deadline, usec_t now) {
        char d[DURATION_MAX];

        if (now < deadline || now - deadline <= RT_STALL_MIN)
                return false;
        if (!m->stall_said || now - m->stall_said >= 10 * USEC_PER_SEC) {
                m->stall_said = now;
                log_warning("tendd met a deadline %s late: it was stopped, suspended or short "
                            "of CPU meanwhile; watchdogs and probes that fell due start again "
                            "from now, and no pod is blamed for that time",
                            format_duration(d, now - deadline));
        }
        return true;
}

bool rt__not_yet(uv_timer_t *t, uv_timer_cb cb, usec_t due) {
        usec_t now = now_monotonic();

        if (now >= due)
                return false;
        uv_timer_start(t, cb, (due - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC + 1, 0);
        return true;
}
