/* SPDX-License-Identifier: MIT */

/* The HTTP API (tend/api.h): pod logs, with follow. */

#include "api-internal.h"

/* ---- times ------------------------------------------------------------------------------------
 */

/* A log's times as the runtime notes them (runtime/logs.c): entries of
 * (end offset, wall time), in order. */
typedef struct log_times {
        uint64_t (*e)[2];
        size_t n;
        usec_t mtime; /* the log's: the time of what no entry covers yet */
} log_times;

static void times_done(log_times *t) {
        free(t->e);
        *t = (log_times){};
}

/* At most a million entries (16 MiB); past that, the last ones. */
#define TIMES_MAX_ENTRIES (1u << 20)

static int times_load(const char *log_path, int log_fd, log_times *t) {
        struct stat st;

        *t = (log_times){};
        if (log_fd >= 0 && fstat(log_fd, &st) == 0)
                t->mtime = (usec_t) st.st_mtim.tv_sec * USEC_PER_SEC +
                           (usec_t) st.st_mtim.tv_nsec / 1000;
        return rt_log_times_load(log_path, TIMES_MAX_ENTRIES, &t->e, &t->n);
}

/* When the byte at off was written: the first entry that covers it; the
 * log's mtime for a byte past them all (or 0: unknown, then now). */
static usec_t time_at(const log_times *t, uint64_t off) {
        size_t lo = 0, hi = t->n;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (t->e[mid][0] > off)
                        hi = mid;
                else
                        lo = mid + 1;
        }
        if (lo < t->n)
                return t->e[lo][1];
        return t->mtime ?: now_realtime();
}

/* Where what was written at or after `since` begins: the end of the last
 * stretch noted before it. */
static uint64_t since_offset(const log_times *t, usec_t since) {
        uint64_t off = 0;
        size_t i;

        for (i = 0; i < t->n && t->e[i][1] < since; i++)
                off = t->e[i][0];
        /* past every entry: what follows them was written by the mtime */
        if (i == t->n && t->mtime && t->mtime < since)
                return UINT64_MAX; /* nothing since then */
        return off;
}

/* in[0..n) with each line that starts in it prefixed by its time and a
 * space, into out (at most cap bytes): as kubectl logs --timestamps. Stops
 * before a line that would not fit whole (unless nothing fits yet: then
 * as much of it as fits). Returns the bytes written; *ret_used the bytes
 * of in consumed. */
static size_t stamp_lines(const log_times *t, uint64_t at, const char *in, size_t n, char *out,
                          size_t cap, bool *line_start, size_t *ret_used) {
        size_t o = 0, i = 0;

        while (i < n) {
                const char *nl = memchr(in + i, '\n', n - i);
                size_t len = nl ? (size_t) (nl - (in + i)) + 1 : n - i;
                char stamp[TIMESTAMP_MAX + 1];
                size_t sl = 0;

                if (*line_start) {
                        format_timestamp(stamp, time_at(t, at + i + len - 1));
                        sl = strlen(stamp);
                        stamp[sl++] = ' ';
                }
                if (o + sl + len > cap) {
                        if (o > 0 || sl >= cap)
                                break;
                        len = cap - sl; /* a line longer than the buffer */
                }
                memcpy(out + o, stamp, sl);
                memcpy(out + o + sl, in + i, len);
                o += sl + len;
                i += len;
                *line_start = len > 0 && in[i - 1] == '\n';
        }
        *ret_used = i;
        return o;
}

/* ---- logs ----------------------------------------------------------------------------------- */

/* A log being sent in chunks: a follower (logs -f), or a one-shot read
 * that stamps lines (timestamps=true), which stops at `end`. */
struct follower {
        follower *prev, *next;
        api_server *s;
        slot *slot;
        struct MHD_Connection *conn;
        char *ns, *pod;
        char *path; /* opened when it appears, for a pod yet to write */
        int fd;
        off_t offset;
        uint64_t left;   /* limitBytes still to send; UINT64_MAX: no limit */
        log_times times; /* timestamps=true: each line's time from these */
        bool timestamps;
        bool line_start; /* the next byte begins a line */
        bool follow;     /* false: stop at end */
        off_t end;
        bool suspended;
        bool gone; /* the client hung up */
        bool done; /* tendd stops */
};

static char *pod_log_path(api_server *s, const spec_pod *p) {
        const char *c = p->spec.n_containers ? p->spec.containers[0].name : "main";
        return rt_log_path(s->state_dir, p->metadata.namespace, p->metadata.name, c);
}

/* Where the last n lines of a file begin, read backwards from its end in
 * blocks: the cost is that of the tail, not of the file. A final newline
 * ends the last line rather than starting another. n < 0: 0. */
/* How far back --tail looks for its lines: past any log tendd keeps (it
 * rotates at 10 MiB), so that a sparse log (a pod's ftruncate() of its
 * stdout to 2 GiB) costs the loop at most this much reading. */
#define TAIL_SCAN_MAX ((off_t) 16 << 20)

static off_t tail_offset(int fd, off_t size, int64_t n) {
        char buf[64 * 1024];
        int64_t k = 0;

        if (n < 0)
                return 0;
        if (n == 0)
                return size;
        for (off_t end = size; end > 0;) {
                if (size - end >= TAIL_SCAN_MAX)
                        return end;
                size_t len = (size_t) MIN(end, (off_t) sizeof buf);
                off_t pos = end - (off_t) len;
                ssize_t r = pread(fd, buf, len, pos);
                if (r < 0)
                        return -errno;
                if ((size_t) r != len)
                        return -EIO; /* truncated meanwhile (a rotation) */
                for (size_t i = len; i > 0; i--)
                        if (buf[i - 1] == '\n' && pos + (off_t) i != size && ++k == n)
                                return pos + (off_t) i;
                end = pos;
        }
        return 0;
}

static ssize_t follow_reader(void *cls, uint64_t pos, char *buf, size_t max) {
        follower *f = cls;
        const spec_pod *p;
        struct stat st;
        ssize_t n;

        if (f->gone)
                return MHD_CONTENT_READER_END_WITH_ERROR;
        if (f->s->closing || f->done || f->left == 0)
                return MHD_CONTENT_READER_END_OF_STREAM;
        max = (size_t) MIN((uint64_t) max, f->left);
        if (f->fd < 0)
                f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
        if (f->fd >= 0) {
                /* Copy-then-truncate rotation: a file shorter than where we
                 * are was truncated; start over from its beginning. */
                if (fstat(f->fd, &st) == 0 && st.st_size < f->offset)
                        f->offset = 0;
                /* stamped: half the buffer read, the rest for the stamps */
                char in[8 * 1024];
                size_t want = f->timestamps ? MIN(max / 2, sizeof in) : max, used = 0, out;
                if (!f->follow)
                        want = (size_t) MIN((off_t) want, MAX(f->end - f->offset, 0));
                n = want ? pread(f->fd, f->timestamps ? in : buf, want, f->offset) : 0;
                if (n > 0 && f->timestamps) {
                        out = stamp_lines(&f->times, (uint64_t) f->offset, in, (size_t) n, buf, max,
                                          &f->line_start, &used);
                        f->offset += (off_t) used;
                        f->left -= MIN(f->left, (uint64_t) out);
                        return (ssize_t) out;
                }
                if (n > 0) {
                        f->offset += n;
                        f->left -= (uint64_t) n;
                        return n;
                }
        }
        if (!f->follow)
                return MHD_CONTENT_READER_END_OF_STREAM;
        p = store_get(f->s->store, STORE_POD, f->ns, f->pod);
        if (!p || spec_pod_terminal(p))
                return MHD_CONTENT_READER_END_OF_STREAM;
        MHD_suspend_connection(f->conn);
        f->suspended = true;
        return 0;
}

static void follow_free(void *cls) {
        follower *f = cls;
        api_server *s = f->s;

        if (f->prev)
                f->prev->next = f->next;
        else if (s->followers == f)
                s->followers = f->next;
        if (f->next)
                f->next->prev = f->prev;
        safe_close(f->fd);
        times_done(&f->times);
        free(f->ns);
        free(f->pod);
        free(f->path);
        free(f);
}

/* Followers poll their files: a quarter second is the latency of `logs -f`. */
void api__on_follow_timer(uv_timer_t *t) {
        api_server *s = t->data;
        if (!s->followers) { /* stopped while none follows (issue 35) */
                uv_timer_stop(t);
                return;
        }
        for (follower *f = s->followers; f; f = f->next)
                if (f->suspended) {
                        f->gone = api__client_gone(f->conn);
                        f->suspended = false;
                        MHD_resume_connection(f->conn);
                        api__kick(f->slot);
                }
}

void api__followers_end(api_server *s) {
        for (follower *f = s->followers; f; f = f->next) {
                f->done = true;
                if (f->suspended) {
                        f->suspended = false;
                        MHD_resume_connection(f->conn);
                }
        }
}

enum MHD_Result api__handle_logs(req *r, const char *ns, const char *name) {
        api_server *s = r->s;
        const spec_pod *p = store_get(s->store, STORE_POD, ns, name);
        const char *tl = api__arg(r, "tailLines"), *lb = api__arg(r, "limitBytes"),
                   *ss = api__arg(r, "sinceSeconds"), *st_arg = api__arg(r, "sinceTime");
        bool timestamps = api__arg_true(r, "timestamps");
        int64_t tail = -1, limit = INT64_MAX, since_s = 0;
        usec_t since = 0;
        _cleanup_(times_done) log_times times = {};
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct MHD_Response *resp;
        enum MHD_Result ret;
        struct stat st;
        off_t off = 0;

        if (!p)
                return api__not_found(r, api__resource(STORE_POD), name);
        /* in a fleet, a pod's log is on its node */
        if (s->fleet && p->spec.node_name && !streq(p->spec.node_name, agent_node_name(s->agent)))
                return api__send_status(r, 400, "BadRequest",
                                        "pod \"%s\" runs on node %s, which keeps its log: ask "
                                        "that node's tendd (tend --socket ITS-SOCKET logs %s)",
                                        name, p->spec.node_name, name);
        if (!p->spec.node_name && s->fleet)
                return api__send_status(r, 400, "BadRequest",
                                        "pod \"%s\" is not bound to a node yet: it has no log",
                                        name);
        if (tl && (safe_atoi64(tl, &tail) < 0 || tail < 0))
                return api__send_status(r, 400, "BadRequest",
                                        "tailLines must be a non-negative integer");
        if (lb && (safe_atoi64(lb, &limit) < 0 || limit < 1))
                return api__send_status(r, 400, "BadRequest",
                                        "limitBytes must be a positive integer");
        /* Each line's time is when tendd saw it written (runtime/logs.c),
         * right within a quarter second. */
        if (ss && st_arg)
                return api__send_status(r, 422, "Invalid",
                                        "at most one of sinceTime or sinceSeconds may be "
                                        "specified");
        if (ss && (safe_atoi64(ss, &since_s) < 0 || since_s < 1))
                return api__send_status(r, 422, "Invalid",
                                        "sinceSeconds must be a positive integer");
        if (st_arg && parse_timestamp(st_arg, &since) < 0)
                return api__send_status(r, 400, "BadRequest",
                                        "sinceTime must be an RFC 3339 time, as "
                                        "2026-01-02T15:04:05Z");
        if (ss)
                since = now_realtime() - MIN((usec_t) since_s * USEC_PER_SEC, now_realtime());
        if (api__arg_true(r, "previous")) {
                /* The dead pod this one replaced: gone as an object, its
                 * log kept while this pod lives. */
                const char *pred = spec_map_get(&p->metadata.annotations, AGENT_ANN_PREDECESSOR);
                const char *c = p->spec.n_containers ? p->spec.containers[0].name : "main";
                path = pred ? rt_log_path(s->state_dir, ns, pred, c) : NULL;
                if (pred && !path)
                        return MHD_NO;
                if (!path || access(path, F_OK) < 0)
                        return api__send_status(r, 400, "BadRequest",
                                                "previous terminated container \"%s\" in pod "
                                                "\"%s\" not found",
                                                c, name);
        } else
                path = pod_log_path(s, p);
        if (!path)
                return MHD_NO;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 && errno != ENOENT)
                return api__send_status(r, 500, NULL, "reading %s: %s", path, strerror(errno));
        if (fd < 0 && !api__arg_true(r, "previous") && !api__arg_true(r, "follow") &&
            p->status.phase == SPEC_POD_PENDING) {
                /* Nothing ran yet: say what it waits for, as Kubernetes
                 * (a follower waits for the first line instead). */
                const spec_container_status *cs = p->status.n_container_statuses
                                                          ? &p->status.container_statuses[0]
                                                          : NULL;
                const char *why = cs && cs->state.waiting ? cs->state.waiting->reason : NULL;
                return api__send_status(r, 400, "BadRequest",
                                        "container \"%s\" in pod \"%s\" is waiting to start: %s%s",
                                        p->spec.n_containers ? p->spec.containers[0].name : "main",
                                        name, why ?: "ContainerCreating",
                                        why && streq(why, "CrashLoopBackOff")
                                                ? " (--previous shows the last run)"
                                                : "");
        }
        if (fd >= 0) {
                if (fstat(fd, &st) < 0)
                        return api__send_status(r, 500, NULL, "reading %s: %s", path,
                                                strerror(errno));
                off = tail_offset(fd, st.st_size, tail);
                if (off < 0)
                        return api__send_status(r, 500, NULL, "reading %s: %s", path,
                                                strerror((int) -off));
                if ((since || timestamps) && times_load(path, fd, &times) < 0)
                        return api__send_oom(r);
                if (since)
                        off = (off_t) MIN((uint64_t) st.st_size,
                                          MAX((uint64_t) off, since_offset(&times, since)));
        }

        bool follow = api__arg_true(r, "follow") && !api__arg_true(r, "previous");
        if (follow && !r->conn)
                return api__send_status(r, 400, "BadRequest", "following a log needs a connection");
        if (follow || (timestamps && fd >= 0)) {
                follower *f = new0(follower, 1);

                if (!f)
                        return MHD_NO;
                f->s = s;
                f->slot = r->slot;
                f->conn = r->conn;
                f->ns = strdup(ns);
                f->pod = strdup(name);
                f->path = TAKE_PTR(path);
                f->fd = TAKE_FD(fd); /* -1: nothing logged yet; opened when it is */
                f->offset = off;
                f->left = lb ? (uint64_t) limit : UINT64_MAX;
                f->timestamps = timestamps;
                f->line_start = true;
                f->follow = follow;
                f->end = f->fd >= 0 ? st.st_size : 0; /* (read only when not following) */
                f->times = times;
                times = (log_times){};
                /* What a follower reads past the times noted when it began
                 * is stamped with when it reads it (within its quarter
                 * second), not with the log's mtime of then. */
                if (follow)
                        f->times.mtime = 0;
                if (!follow && !r->conn) {
                        /* answered in memory: the same reader, in chunks */
                        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(SIZE_MAX);
                        char chunk[16 * 1024];
                        ssize_t n;
                        while ((n = follow_reader(f, 0, chunk, sizeof chunk)) > 0)
                                if (tend_buf_add(&b, chunk, (size_t) n) < 0) {
                                        follow_free(f);
                                        return api__send_oom(r);
                                }
                        follow_free(f);
                        return api__queue(r, 200, "text/plain", tend_buf_take(&b));
                }
                resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, follow_reader,
                                                         f, follow_free);
                if (!resp) {
                        follow_free(f);
                        return MHD_NO;
                }
                if (follow) {
                        f->next = s->followers;
                        if (s->followers)
                                s->followers->prev = f;
                        s->followers = f;
                        if (!uv_is_active((uv_handle_t *) &s->follow_timer))
                                uv_timer_start(&s->follow_timer, api__on_follow_timer, 250, 250);
                }
        } else if (fd < 0)
                return api__queue(r, 200, "text/plain", strdup(""));
        else if (!r->conn) {
                _cleanup_free_ char *text = NULL;
                size_t len = (size_t) MIN((int64_t) (st.st_size - off), limit);
                text = malloc(len + 1);
                if (!text)
                        return api__send_oom(r);
                len = (size_t) MAX(pread(fd, text, len, off), 0);
                text[len] = 0;
                return api__queue(r, 200, "text/plain", TAKE_PTR(text));
        } else {
                /* Straight from the file, whatever its size or content. */
                resp = MHD_create_response_from_fd_at_offset64(
                        (uint64_t) MIN((int64_t) (st.st_size - off), limit), fd, (uint64_t) off);
                if (!resp)
                        return MHD_NO;
                fd = -EBADF; /* the response owns it now */
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
        api__count_code(s, 200);
        ret = MHD_queue_response(r->conn, 200, resp);
        MHD_destroy_response(resp);
        return ret;
}
