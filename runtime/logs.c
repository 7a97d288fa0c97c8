/* SPDX-License-Identifier: MIT */

/*
 * The pods' log files kept within their size: each is checked on a timer
 * (sooner for a pod that just started, later for a quiet one) and rotated
 * off the loop when it grows past the limit. And their times: when each
 * stretch of a log was written, for logs --timestamps and --since.
 */

#include <endian.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rt-internal.h"

/* ---- logs ------------------------------------------------------------------------------------ */

static void times_look(rt_pod *p, usec_t wall, bool by_mtime);
static void on_log_timer(uv_timer_t *t);

/* The one log timer fires within `in` (µs) at the latest. */
static void log_timer_within(rt_manager *m, usec_t in) {
        uint64_t ms = (in + USEC_PER_MSEC - 1) / USEC_PER_MSEC;

        if (uv_timer_get_due_in(&m->log_timer) > ms)
                uv_timer_start(&m->log_timer, on_log_timer, ms, 0);
}

/* Into the timer's list: its log is looked at at its log_next_check. */
static void log_active_add(rt_pod *p) {
        rt_manager *m = p->manager;

        if (p->log_slot || m->log_walk_all)
                return;
        if (m->n_log_active == m->alloc_log_active) {
                size_t n = MAX(m->alloc_log_active * 2, (size_t) 64);
                rt_pod **v = reallocarray(m->log_active, n, sizeof *v);
                if (!v) {
                        m->log_walk_all = true;
                        return;
                }
                m->log_active = v;
                m->alloc_log_active = n;
        }
        m->log_active[m->n_log_active++] = p;
        p->log_slot = m->n_log_active;
}

void rt__log_forget(rt_pod *p) {
        rt_manager *m = p->manager;
        size_t i = p->log_slot;

        if (m->log_sweep == p)
                m->log_sweep = p->next;
        if (!i)
                return;
        m->log_active[i - 1] = m->log_active[--m->n_log_active];
        m->log_active[i - 1]->log_slot = i;
        p->log_slot = 0;
}

typedef struct rotation {
        uv_work_t work;
        rt_manager *m;
        rt_pod *pod;
        char *path;
        uint64_t max;
        int result; /* of the copy, in the worker: 0 or -errno */
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
 * What is copied is what was written, and at most the limit of it: the
 * last max bytes of the file, its holes left out. A pod can make its log
 * sparse (ftruncate() of its stdout to 2 GiB); copying the holes would
 * write gigabytes of zeros to disk, as root, at every rotation.
 *
 * How often: each log is checked again when, at the rate it grew since
 * its last check, it would reach the limit — every check interval (5 s)
 * for a quiet pod, down to LOG_CHECK_MIN for one that spews, so a log
 * that fills at hundreds of MB/s overshoots by a few MB, not by five
 * seconds' worth.
 */
#define LOG_CHECK_MIN (10 * USEC_PER_MSEC)
/* Each parked log is looked at once in this many ticks of the log timer
 * (5 s each: half an hour), whatever its watch says (on_log_timer()). */
#define LOG_SWEEP_TICKS 360
/* A new log (or one just rotated) is looked at again soon: learn its rate. */
#define LOG_CHECK_FIRST (100 * USEC_PER_MSEC)
/* The data of [from, to) of in, appended to out; holes are skipped. */
static int copy_data(int in, int out, off_t from, off_t to) {
        static __thread char buf[64 * 1024];

        for (off_t at = from; at < to;) {
                off_t data = lseek(in, at, SEEK_DATA), hole;
                if (data < 0)
                        return errno == ENXIO ? 0 : -errno; /* only a hole is left */
                if (data >= to)
                        return 0;
                hole = lseek(in, data, SEEK_HOLE);
                if (hole < 0)
                        return -errno;
                for (at = data; at < MIN(hole, to);) {
                        ssize_t n = pread(in, buf,
                                          (size_t) MIN((off_t) sizeof buf, MIN(hole, to) - at), at);
                        if (n <= 0)
                                return n < 0 ? -errno : 0; /* shorter now: truncated */
                        for (ssize_t w = 0; w < n;) {
                                ssize_t k = write(out, buf + w, (size_t) (n - w));
                                if (k < 0)
                                        return -errno;
                                w += k;
                        }
                        at += n;
                }
        }
        return 0;
}

/* In the thread pool: the last max bytes of the log, its data only, to
 * <log>.1.tmp. */
static void rotate_copy(uv_work_t *w) {
        rotation *rot = w->data;
        _cleanup_free_ char *tmp = strprintf("%s.1.tmp", rot->path);
        _cleanup_close_ int in = -EBADF, out = -EBADF;
        struct stat st;

        rot->result = -ENOMEM;
        if (!tmp)
                return;
        in = open(rot->path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (in < 0 || fstat(in, &st) < 0) {
                rot->result = -errno;
                return;
        }
        out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (out < 0) {
                rot->result = -errno;
                return;
        }
        rot->result = copy_data(in, out,
                                st.st_size > (off_t) rot->max ? st.st_size - (off_t) rot->max : 0,
                                st.st_size);
}

static void on_rotated(uv_work_t *w, int status) {
        rotation *rot = w->data;

        _cleanup_free_ char *tmp = strprintf("%s.1.tmp", rot->path),
                            *one = strprintf("%s.1", rot->path);

        /* A freed pod's path may already belong to its replacement (names
         * repeat): leave that log alone. */
        if (tmp && one && status >= 0 && rot->result >= 0 && !rot->pod->freed &&
            rename(tmp, one) == 0) {
                (void) !truncate(rot->path, 0);
                times_look(rot->pod, now_realtime(), false); /* starts its times again */
        } else if (tmp)
                (void) unlink(tmp);
        rot->pod->rotating = false;
        rt__pod_unref(rot->pod);
        free(rot->path);
        free(rot);
}

/* ---- times ----------------------------------------------------------------------------------- */

/*
 * A pod writes its log itself (the file survives tendd), so no time is
 * known per line. tendd watches each log (inotify) and notes, in
 * <log>.times, entries of (end offset, wall time): the bytes up to that
 * offset were written by that time. Writes within TIMES_GATE of the last
 * entry join it (its time is then their earliest), and the watch pauses
 * for the rest of the gate: a pod that writes a million lines a second
 * costs at most four looks a second, and a line's time is right within
 * the gate. Written while tendd was down: the file's mtime at the next
 * start. Entries are 16 bytes, little-endian u64 pairs; a torn last entry
 * is cut off. The times never outgrow their log by more than the slack
 * (RT_LOG_TIMES_SLACK, 4 KiB: 256 entries, so a short log's lines all keep
 * their own times): a pod that writes a byte every quarter second would
 * have made them sixteen times its log. An entry that would pass that
 * joins the last one, as writes within the gate do.
 */
#define TIMES_GATE (250 * USEC_PER_MSEC)

int rt_log_times_load(const char *log_path, size_t max_entries, uint64_t (**ret)[2],
                      size_t *ret_n) {
        _cleanup_free_ char *path = rt_log_times_path(log_path);
        _cleanup_close_ int fd = -EBADF;
        uint64_t(*e)[2];
        struct stat st;
        size_t n;
        ssize_t got;

        *ret = NULL;
        *ret_n = 0;
        if (!path)
                return -ENOMEM;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0)
                return 0; /* no times (yet) */
        n = MIN((size_t) st.st_size / sizeof *e, max_entries);
        if (n == 0)
                return 0;
        e = malloc(n * sizeof *e);
        if (!e)
                return -ENOMEM;
        got = pread(fd, e, n * sizeof *e,
                    (off_t) ((size_t) st.st_size / sizeof *e - n) * (off_t) sizeof *e);
        n = got > 0 ? (size_t) got / sizeof *e : 0;
        for (size_t i = 0; i < n; i++) {
                e[i][0] = le64toh(e[i][0]);
                e[i][1] = le64toh(e[i][1]);
        }
        *ret = e;
        *ret_n = n;
        return 0;
}

static int times_put(rt_pod *p, uint64_t i, uint64_t off, usec_t at) {
        uint64_t e[2] = { htole64(off), htole64(at) };

        if (pwrite(p->times_fd, e, sizeof e, (off_t) (i * sizeof e)) != (ssize_t) sizeof e)
                return -errno ?: -EIO;
        return 0;
}

/* A look at the log's size: what grew since the last entry gets a time. */
static void times_look(rt_pod *p, usec_t wall, bool by_mtime) {
        struct stat st;

        if ((p->times_fd < 0 && !p->times_absent) || !p->record.log_path)
                return;
        if ((p->log_fd >= 0 ? fstat(p->log_fd, &st) : stat(p->record.log_path, &st)) < 0)
                return;
        if (p->times_absent) {
                if (st.st_size == 0)
                        return;
                _cleanup_free_ char *path = rt_log_times_path(p->record.log_path);
                p->times_fd = path ? open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640)
                                   : -ENOMEM;
                if (p->times_fd < 0)
                        return;
                p->times_absent = false;
        }
        if ((uint64_t) st.st_size < p->times_off) {
                /* truncated (rotated): its times start again */
                (void) !ftruncate(p->times_fd, 0);
                p->times_n = p->times_off = 0;
                p->times_at = 0;
        }
        if ((uint64_t) st.st_size == p->times_off)
                return;
        if (by_mtime)
                wall = MIN(wall, (usec_t) st.st_mtim.tv_sec * USEC_PER_SEC +
                                         (usec_t) st.st_mtim.tv_nsec / 1000);
        if (p->times_n > 0 &&
            ((wall >= p->times_at && wall - p->times_at < TIMES_GATE) ||
             (p->times_n + 1) * 16 > (uint64_t) st.st_size + p->manager->log_times_slack)) {
                if (times_put(p, p->times_n - 1, (uint64_t) st.st_size, p->times_at) >= 0)
                        p->times_off = (uint64_t) st.st_size;
                return;
        }
        if (times_put(p, p->times_n, (uint64_t) st.st_size, wall) >= 0) {
                p->times_n++;
                p->times_off = (uint64_t) st.st_size;
                p->times_at = wall;
        }
}

static void on_watch_closed(uv_handle_t *h) {
        rt_pod *p = h->data;

        free(h);
        rt__pod_unref(p);
}

static void on_log_change(uv_fs_event_t *w, const char *file, int events, int status) {
        rt_pod *p = w->data;
        usec_t wall = now_realtime(), mono = now_monotonic();

        if (status < 0 || p->freed)
                return;
        if (p->log_parked) {
                /* it grows again: its rate learnt from now */
                p->log_parked = false;
                p->log_checked = mono;
                p->log_next_check = mono + LOG_CHECK_FIRST;
                log_active_add(p);
                log_timer_within(p->manager, LOG_CHECK_FIRST);
        }
        if (p->times_n == 0 || wall < p->times_at || wall - p->times_at >= TIMES_GATE) {
                times_look(p, wall, false);
                return;
        }
        /* Within the gate: one look when it ends, nothing until then. */
        (void) uv_fs_event_stop(w);
        p->times_due = mono + (TIMES_GATE - (wall - p->times_at));
        log_timer_within(p->manager, p->times_due - mono);
}

static int watch_start(rt_pod *p) {
        if (!p->watch) {
                p->watch = new0(uv_fs_event_t, 1);
                if (!p->watch)
                        return -ENOMEM;
                uv_fs_event_init(p->manager->loop, p->watch);
                p->watch->data = rt__pod_ref(p);
        }
        return uv_fs_event_start(p->watch, on_log_change, p->record.log_path, 0);
}

/* At each log check: the times file opened (its last entry read back) the
 * first time — not on the path that starts a pod — and the watch started,
 * or started again if it could not be (a unit's log not made yet). A pod
 * that has written nothing has no times file: it is made at the log's
 * first growth. Making a file per pod at its start was a tenth of a
 * fleet node's CPU while it started a thousand pods (a new inode; ext4
 * scans past those freed in the last minute for each). */
static void times_keep(rt_pod *p) {
        _cleanup_free_ char *path = NULL;
        struct stat st;
        uint64_t e[2];

        if (!p->record.log_path || p->state == RT_POD_EXITED)
                return;
        if (p->times_fd >= 0 || p->times_absent) {
                if (!p->times_due && (!p->watch || !uv_is_active((uv_handle_t *) p->watch)) &&
                    watch_start(p) >= 0)
                        times_look(p, now_realtime(), false);
                return;
        }
        path = rt_log_times_path(p->record.log_path);
        if (!path)
                return;
        p->times_fd = open(path, O_RDWR | O_CLOEXEC | O_NOCTTY);
        if (p->times_fd < 0 && errno != ENOENT)
                return;
        p->times_absent = p->times_fd < 0;
        if (p->times_fd >= 0) {
                if (fstat(p->times_fd, &st) < 0)
                        return;
                p->times_n = (uint64_t) st.st_size / sizeof e;
                if ((uint64_t) st.st_size % sizeof e)
                        (void) !ftruncate(p->times_fd, (off_t) (p->times_n * sizeof e));
                if (p->times_n > 0 &&
                    pread(p->times_fd, e, sizeof e, (off_t) ((p->times_n - 1) * sizeof e)) ==
                            (ssize_t) sizeof e) {
                        p->times_off = le64toh(e[0]);
                        p->times_at = le64toh(e[1]);
                }
        }
        (void) watch_start(p);
        /* what was written before: by the file's mtime (tendd was down,
         * or the pod just started) */
        times_look(p, now_realtime(), true);
}

/* A gated look that is due: taken, and the watch on again. */
static void times_due(rt_pod *p, usec_t now) {
        if (!p->times_due || p->times_due > now)
                return;
        p->times_due = 0;
        if (p->freed || p->state == RT_POD_EXITED)
                return;
        (void) watch_start(p);
        times_look(p, now_realtime(), false);
}

void rt__times_close_dead(rt_manager *m) {
        for (size_t i = 0; i < m->n_dead_watches; i++)
                uv_close((uv_handle_t *) m->dead_watches[i], on_watch_closed);
        free(m->dead_watches);
        m->dead_watches = NULL;
        m->n_dead_watches = 0;
}

void rt__times_stop(rt_pod *p) {
        rt_manager *m = p->manager;
        uv_fs_event_t **w;

        p->times_due = 0;
        if (!p->watch)
                return;
        w = m->closing ? NULL : reallocarray(m->dead_watches, m->n_dead_watches + 1, sizeof *w);
        if (!w)
                uv_close((uv_handle_t *) p->watch, on_watch_closed);
        else {
                m->dead_watches = w;
                m->dead_watches[m->n_dead_watches++] = p->watch;
                log_timer_within(m, LOG_CHECK_FIRST);
        }
        p->watch = NULL;
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

/* A log held open (check_log()) for at most a quarter of tendd's
 * descriptors, and never out of what is kept for the API and the pods'
 * pidfds: twice RT_FD_RESERVE. */
static bool room_for_log_fd(rt_manager *m) {
        int in_use;

        if (m->nofile == UINT64_MAX)
                return true;
        if (m->log_fds >= m->nofile / 4)
                return false;
        in_use = fd_lowest_free();
        return in_use >= 0 && (uint64_t) in_use + 2 * RT_FD_RESERVE < m->nofile;
}

static void check_log(rt_manager *m, rt_pod *p, usec_t now) {
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
        times_keep(p);
        /* A descriptor of the file, kept: with a thousand pods, a stat() of
         * each path every few seconds was most of an idle agent's work.
         * Copy-then-truncate keeps the inode, so the descriptor stays right. */
        if (p->log_fd < 0 && room_for_log_fd(m) &&
            (p->log_fd = open(p->record.log_path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) >=
                    0)
                m->log_fds++;
        if ((p->log_fd >= 0 ? fstat(p->log_fd, &st) : stat(p->record.log_path, &st)) < 0) {
                p->log_next_check = now + m->log_check_interval;
                return;
        }
        bool same = p->log_checked && (uint64_t) st.st_size == p->log_size;
        plan_next_check(m, p, (uint64_t) st.st_size, now);
        /* Not grown, and watched: looked at again when it changes
         * (on_log_change()), not every interval — a thousand quiet pods
         * cost an idle tendd nothing. */
        if (same && p->watch && uv_is_active((uv_handle_t *) p->watch) && !p->times_due) {
                p->log_next_check = USEC_INFINITY;
                p->log_parked = true;
        }
        if ((uint64_t) st.st_size <= m->log_max_bytes)
                return;
        /* After the truncate it starts again from 0: no rate across it. */
        p->log_checked = 0;
        rot = new0(rotation, 1);
        if (!rot || !(rot->path = strdup(p->record.log_path))) {
                free(rot);
                return;
        }
        rot->m = m;
        rot->pod = rt__pod_ref(p);
        rot->work.data = rot;
        rot->max = m->log_max_bytes;
        p->rotating = true;
        if (uv_queue_work(m->loop, &rot->work, rotate_copy, on_rotated) < 0) {
                p->rotating = false;
                rt__pod_unref(p);
                free(rot->path);
                free(rot);
        }
}

/* A tick's look at p's log: its check and its times, if due; *next
 * brought down to when p wants the timer again. Returns whether it does
 * (false: exited, parked, or nothing to look at). */
static bool look(rt_manager *m, rt_pod *p, usec_t now, usec_t *next) {
        if (p->freed || p->state == RT_POD_EXITED)
                return false;
        if (p->log_next_check <= now)
                check_log(m, p, now);
        times_due(p, now);
        if (p->log_parked || (p->log_next_check == USEC_INFINITY && !p->times_due))
                return false;
        *next = MIN(*next, p->log_next_check);
        if (p->times_due)
                *next = MIN(*next, p->times_due);
        return true;
}

/* One timer for every log, set for the earliest next check. */
static void on_log_timer(uv_timer_t *t) {
        rt_manager *m = t->data;
        usec_t now = now_monotonic(), next = now + m->log_check_interval;

        rt__times_close_dead(m);
        rt__held_sweep(m, false);
        rt__cgroup_tidy(m);
        /* A slow sweep of the parked, a few each tick: inotify drops what
         * overflows its queue (thousands of logs written while tendd was
         * stopped), so each parked log is looked at once in LOG_SWEEP_TICKS
         * ticks (half an hour) anyway. */
        for (size_t k = m->n_pods / LOG_SWEEP_TICKS + 1; k > 0 && !m->log_walk_all; k--) {
                rt_pod *p = m->log_sweep ?: m->pods;
                if (!p)
                        break;
                m->log_sweep = p->next;
                if (p->log_parked) {
                        p->log_parked = false;
                        p->log_next_check = now;
                        log_active_add(p);
                }
        }
        /* The pods of the list only: a parked log costs nothing here, so
         * ten thousand quiet pods cost an idle tendd no walk (issue 35). */
        for (size_t i = 0; !m->log_walk_all && i < m->n_log_active;)
                if (look(m, m->log_active[i], now, &next))
                        i++;
                else
                        rt__log_forget(m->log_active[i]); /* (the last one comes to i) */
        for (rt_pod *p = m->log_walk_all ? m->pods : NULL; p; p = p->next) {
                if (p->log_parked) {
                        p->log_parked = false; /* (no list to wake it into) */
                        p->log_next_check = now;
                }
                (void) look(m, p, now, &next);
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
        log_active_add(pod);
        log_timer_within(m, LOG_CHECK_FIRST);
}
