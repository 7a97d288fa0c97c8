/* SPDX-License-Identifier: MIT */

/*
 * The pods' log files kept within their size: each is checked on a timer
 * (sooner for a pod that just started, later for a quiet one) and rotated
 * off the loop when it grows past the limit.
 */

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include "rt-internal.h"

/* ---- logs ------------------------------------------------------------------------------------ */

typedef struct rotation {
        uv_fs_t req;
        rt_manager *m;
        rt_pod *pod;
        char *path;
} rotation;

/*
 * Rotation is copy-then-truncate: the process keeps its O_APPEND fd (we
 * cannot reopen a file behind a running process), so the log is copied
 * by libuv's thread pool to <log>.1.tmp, renamed over <log>.1 (a reader
 * sees a whole copy, never one being written) and then truncated; the
 * process's next
 * write lands at offset 0. Lines written between the copy and the truncate
 * are lost, and a log can overshoot the limit by what is written between
 * two checks. Both are the price of never blocking the loop.
 *
 * How often: each log is checked again when, at the rate it grew since
 * its last check, it would reach the limit — every check interval (5 s)
 * for a quiet pod, down to LOG_CHECK_MIN for one that spews, so a log
 * that fills at hundreds of MB/s overshoots by a few MB, not by five
 * seconds' worth.
 */
#define LOG_CHECK_MIN (10 * USEC_PER_MSEC)
/* A new log (or one just rotated) is looked at again soon: learn its rate. */
#define LOG_CHECK_FIRST (100 * USEC_PER_MSEC)
static void on_rotated(uv_fs_t *req) {
        rotation *rot = req->data;

        _cleanup_free_ char *tmp = strprintf("%s.1.tmp", rot->path),
                            *one = strprintf("%s.1", rot->path);

        /* A freed pod's path may already belong to its replacement (names
         * repeat): leave that log alone. */
        if (tmp && one && req->result >= 0 && !rot->pod->freed && rename(tmp, one) == 0)
                (void) !truncate(rot->path, 0);
        else if (tmp)
                (void) unlink(tmp);
        uv_fs_req_cleanup(req);
        rot->pod->rotating = false;
        rt__pod_unref(rot->pod);
        free(rot->path);
        free(rot);
}

/* When to look at this log again, from how fast it grew. */
static void plan_next_check(rt_manager *m, rt_pod *p, uint64_t size, usec_t now) {
        usec_t next = p->log_checked ? m->log_check_interval : LOG_CHECK_FIRST;

        if (p->log_checked && size > p->log_size && now > p->log_checked) {
                double rate = (double) (size - p->log_size) / (double) (now - p->log_checked);
                double left = size < m->log_max_bytes ? (double) (m->log_max_bytes - size) : 0;
                double until = left / rate;
                if (until < (double) next)
                        next = MAX((usec_t) until, LOG_CHECK_MIN);
        }
        p->log_size = size;
        p->log_checked = now;
        p->log_next_check = now + next;
}

static void check_log(rt_manager *m, rt_pod *p, usec_t now) {
        _cleanup_free_ char *dst = NULL;
        struct stat st;
        rotation *rot;

        if (p->rotating) {
                p->log_next_check = now + LOG_CHECK_MIN;
                return;
        }
        if (!p->record.log_path) {
                p->log_next_check = USEC_INFINITY;
                return;
        }
        /* A descriptor of the file, kept: with a thousand pods, a stat() of
         * each path every few seconds was most of an idle agent's work.
         * Copy-then-truncate keeps the inode, so the descriptor stays right. */
        if (p->log_fd < 0)
                p->log_fd = open(p->record.log_path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if ((p->log_fd >= 0 ? fstat(p->log_fd, &st) : stat(p->record.log_path, &st)) < 0) {
                p->log_next_check = now + m->log_check_interval;
                return;
        }
        plan_next_check(m, p, (uint64_t) st.st_size, now);
        if ((uint64_t) st.st_size <= m->log_max_bytes)
                return;
        /* After the truncate it starts again from 0: no rate across it. */
        p->log_checked = 0;
        dst = strprintf("%s.1.tmp", p->record.log_path);
        rot = new0(rotation, 1);
        if (!dst || !rot || !(rot->path = strdup(p->record.log_path))) {
                free(rot);
                return;
        }
        rot->m = m;
        rot->pod = rt__pod_ref(p);
        rot->req.data = rot;
        p->rotating = true;
        if (uv_fs_copyfile(m->loop, &rot->req, p->record.log_path, dst, 0, on_rotated) < 0) {
                p->rotating = false;
                rt__pod_unref(p);
                free(rot->path);
                free(rot);
        }
}

/* One timer for every log, set for the earliest next check. */
static void on_log_timer(uv_timer_t *t) {
        rt_manager *m = t->data;
        usec_t now = now_monotonic(), next = now + m->log_check_interval;

        for (rt_pod *p = m->pods; p; p = p->next) {
                if (p->freed || p->state == RT_POD_EXITED)
                        continue;
                if (p->log_next_check <= now)
                        check_log(m, p, now);
                next = MIN(next, p->log_next_check);
        }
        uv_timer_start(&m->log_timer, on_log_timer,
                       (MAX(next, now + LOG_CHECK_MIN) - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC,
                       0);
}

void rt__logs_start(rt_manager *m) {
        uv_timer_init(m->loop, &m->log_timer);
        m->log_timer.data = m;
        rt__manager_ref(m);
        uv_timer_start(&m->log_timer, on_log_timer, m->log_check_interval / USEC_PER_MSEC, 0);
        uv_unref((uv_handle_t *) &m->log_timer);
}

/* Its log's first check, soon: a pod may spew from its start. */
void rt__log_check_soon(rt_pod *pod) {
        rt_manager *m = pod->manager;

        pod->log_next_check = now_monotonic() + LOG_CHECK_FIRST;
        if (uv_timer_get_due_in(&m->log_timer) > LOG_CHECK_FIRST / USEC_PER_MSEC)
                uv_timer_start(&m->log_timer, on_log_timer, LOG_CHECK_FIRST / USEC_PER_MSEC, 0);
}
