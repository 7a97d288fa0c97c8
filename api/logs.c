/* SPDX-License-Identifier: MIT */

/* The HTTP API (tend/api.h): pod logs, with follow. */

#include "api-internal.h"

/* ---- logs ----------------------------------------------------------------------------------- */

struct follower {
        follower *prev, *next;
        api_server *s;
        slot *slot;
        struct MHD_Connection *conn;
        char *ns, *pod;
        char *path; /* opened when it appears, for a pod yet to write */
        int fd;
        off_t offset;
        uint64_t left; /* limitBytes still to send; UINT64_MAX: no limit */
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
static off_t tail_offset(int fd, off_t size, int64_t n) {
        char buf[64 * 1024];
        int64_t k = 0;

        if (n < 0)
                return 0;
        if (n == 0)
                return size;
        for (off_t end = size; end > 0;) {
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
                n = pread(f->fd, buf, max, f->offset);
                if (n > 0) {
                        f->offset += n;
                        f->left -= (uint64_t) n;
                        return n;
                }
        }
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
        free(f->ns);
        free(f->pod);
        free(f->path);
        free(f);
}

/* Followers poll their files: a quarter second is the latency of `logs -f`. */
void api__on_follow_timer(uv_timer_t *t) {
        api_server *s = t->data;
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
        const char *tl = api__arg(r, "tailLines"), *lb = api__arg(r, "limitBytes");
        int64_t tail = -1, limit = INT64_MAX;
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct MHD_Response *resp;
        enum MHD_Result ret;
        struct stat st;
        off_t off = 0;

        if (!p)
                return api__not_found(r, api__resource(STORE_POD), name);
        if (tl && (safe_atoi64(tl, &tail) < 0 || tail < 0))
                return api__send_status(r, 400, "BadRequest",
                                        "tailLines must be a non-negative integer");
        if (lb && (safe_atoi64(lb, &limit) < 0 || limit < 1))
                return api__send_status(r, 400, "BadRequest",
                                        "limitBytes must be a positive integer");
        /* Said, not silently ignored: a pod's output goes from the process
         * straight to its file (so that it survives tendd), and no time is
         * kept for each line. */
        if (api__arg(r, "sinceSeconds") || api__arg(r, "sinceTime") ||
            api__arg_true(r, "timestamps"))
                return api__send_status(r, 400, "BadRequest",
                                        "%s is not supported: tend keeps no time for each line "
                                        "of a pod's log; --tail=N and --limit-bytes=N are",
                                        api__arg_true(r, "timestamps") ? "timestamps"
                                        : api__arg(r, "sinceTime")     ? "sinceTime"
                                                                       : "sinceSeconds");
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
        }

        if (api__arg_true(r, "follow") && !api__arg_true(r, "previous") && !r->conn)
                return api__send_status(r, 400, "BadRequest", "following a log needs a connection");
        if (api__arg_true(r, "follow") && !api__arg_true(r, "previous")) {
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
                resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, follow_reader,
                                                         f, follow_free);
                if (!resp) {
                        follow_free(f);
                        return MHD_NO;
                }
                f->next = s->followers;
                if (s->followers)
                        s->followers->prev = f;
                s->followers = f;
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
