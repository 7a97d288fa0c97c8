/* SPDX-License-Identifier: MIT */

/* tendd --manifests DIR (see manifest-dir.h). */

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "agent-loop.h"
#include "manifest-dir.h"

#define DEBOUNCE_MS 200 /* editors write, rename and touch: one sync for all */

struct manifest_dir {
        uv_loop_t *loop;
        agent_loop *al;
        /* Absolute, its parents resolved, itself not: a symlink swapped to
         * a new checkout (as git-sync does) is followed to the new one. */
        char *dir;
        const char *base;           /* its last part, in dir */
        uv_fs_event_t watch;        /* the directory (its current target) */
        uv_fs_event_t parent_watch; /* its parent: the directory replaced or created */
        dev_t watched_dev;          /* what `watch` watches: re-armed when it changes */
        ino_t watched_ino;
        bool watching;
        uv_timer_t debounce, resync;
        unsigned open_handles;
        bool closing;
        int unreadable;         /* the errno last said about reading the directory; 0: none */
        tend_hashmap *reported; /* path → the errors last reported (owned) */
        /* A sync's files are read and checked in the loop's thread pool
         * (a large manifest's YAML is most of its cost), then applied on
         * the loop. One read at a time; a sync asked for meanwhile runs
         * after it. */
        struct dir_read *reading;
        bool again;
};

/* A file read and checked, not applied yet. */
typedef struct parsed {
        const char *file;
        spec_manifest mf;
        spec_errors errs;
} parsed;

/* One sync's reading of the directory. */
typedef struct dir_read {
        uv_work_t work;
        manifest_dir *m;
        const char *dir;
        int error; /* listing the directory: -errno */
        char **files;
        parsed *ps;
        size_t n;
} dir_read;

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

/* The directory's manifest files, sorted: *.yaml, *.yml, *.json, not
 * hidden (editors' swap files), regular files only. -errno when the
 * directory cannot be read. */
static int list_files(const char *dir, char ***ret) {
        _cleanup_strv_free_ char **files = NULL;
        DIR *d = opendir(dir);
        struct dirent *e;

        *ret = NULL;
        if (!d)
                return -errno;
        while ((e = readdir(d))) {
                _cleanup_free_ char *path = NULL;
                struct stat st;

                if (e->d_name[0] == '.' ||
                    !(endswith(e->d_name, ".yaml") || endswith(e->d_name, ".yml") ||
                      endswith(e->d_name, ".json")))
                        continue;
                path = strprintf("%s/%s", dir, e->d_name);
                if (!path || stat(path, &st) < 0 || !S_ISREG(st.st_mode))
                        continue;
                if (strv_push(&files, path) < 0) {
                        closedir(d);
                        return -ENOMEM;
                }
                path = NULL;
        }
        closedir(d);
        if (files)
                qsort(files, strv_length(files), sizeof(char *), cmp_str);
        *ret = TAKE_PTR(files);
        return 0;
}

/* Is this deployment one of the directory's? */
static const char *source_in(const manifest_dir *m, const spec_deployment *d) {
        const char *src = spec_map_get(&d->metadata.annotations, AGENT_ANN_SOURCE);
        const char *rest = src ? startswith(src, m->dir) : NULL;

        return rest && rest[0] == '/' && !strchr(rest + 1, '/') ? src : NULL;
}

/* An invalid file: say so once per distinct set of errors (a resync every
 * 30 s must not repeat it), in the log and as a Warning event on what the
 * file declared before (or, if nothing, on a name after the file). */
static void report(manifest_dir *m, const char *file, const spec_errors *errs) {
        agent *a = agent_loop_agent(m->al);
        _cleanup_buf_ tend_buf text = TEND_BUF_INIT(1 << 20);
        _cleanup_free_ char *first = NULL;
        const void *const *items;
        size_t n, hits = 0;
        char *old;

        for (size_t i = 0; i < errs->n; i++) {
                _cleanup_free_ char *line = spec_error_format(&errs->items[i]);
                if (i == 0)
                        first = strdup(strna(line));
                (void) tend_buf_addf(&text, "%s\n", strna(line));
        }
        old = tend_hashmap_get(m->reported, file);
        if (old && streq(old, tend_buf_str(&text)))
                return;
        for (size_t i = 0; i < errs->n; i++) {
                _cleanup_free_ char *line = spec_error_format(&errs->items[i]);
                log_warning("manifests: %s", strna(line));
        }
        log_warning("manifests: %s is not applied; what it declared before keeps running", file);
        old = NULL;
        if (tend_hashmap_put(m->reported, file, tend_buf_take(&text), (void **) &old) < 0)
                return;
        free(old);

        n = store_list(agent_loop_store(m->al), STORE_DEPLOYMENT, &items);
        for (size_t i = 0; i < n; i++) {
                const spec_deployment *d = items[i];
                if (!streq_ptr(source_in(m, d), file))
                        continue;
                hits++;
                _cleanup_free_ char *msg = strprintf(
                        "%s%s; the last good version keeps running", strna(first),
                        errs->n > 1 ? " (and more: see tendd's log)" : "");
                if (msg)
                        (void) agent_record_event(a, STORE_DEPLOYMENT, &d->metadata, "Warning",
                                                  "InvalidManifest", msg);
        }
        if (hits == 0) {
                const char *base = strrchr(file, '/');
                _cleanup_free_ char *name = strdup(base ? base + 1 : file);
                spec_meta meta = { .namespace = (char *) "default", .name = name };
                if (name)
                        name[strcspn(name, ".")] = 0;
                _cleanup_free_ char *msg = strprintf("%s%s; nothing applied", strna(first),
                                                     errs->n > 1 ? " (and more: see tendd's log)"
                                                                 : "");
                if (msg)
                        (void) agent_record_event(a, STORE_DEPLOYMENT, &meta, "Warning",
                                                  "InvalidManifest", msg);
        }
}

static bool parsed_ok(const parsed *p) {
        return p->errs.n == 0 && !p->errs.dropped;
}

static char *key_of(const spec_deployment *d) {
        return strprintf("%s/%s", d->metadata.namespace, d->metadata.name);
}

static bool parsed_declares(const parsed *p, const char *key) {
        for (size_t i = 0; i < p->mf.n; i++) {
                _cleanup_free_ char *k = key_of(p->mf.items[i].deployment);
                if (streq_ptr(k, key))
                        return true;
        }
        return false;
}

static void parse_file(parsed *p) {
        (void) spec_manifest_add_path(&p->mf, p->file, &p->errs);
        /* (what else tend apply takes, the directory does not yet: said,
         * and the file not applied) */
        p->errs.file = p->file;
        for (size_t i = 0; i < p->mf.n; i++)
                if (!p->mf.items[i].deployment)
                        (void) spec_errors_add_at(&p->errs, p->mf.items[i].line, 1,
                                                  "%s %s: tendd --manifests reads Deployments "
                                                  "only; apply it with tend apply -f",
                                                  p->mf.items[i].kind->kind,
                                                  spec_object_meta(p->mf.items[i].object)->name);
        p->errs.file = NULL;
        if (parsed_ok(p))
                (void) spec_manifest_check(&p->mf, &p->errs);
        /* Most often a file caught between an editor's truncate and write:
         * deleting what it declared, to create it again a moment later,
         * would restart every pod. Deleting the file deletes them. */
        if (parsed_ok(p) && p->mf.n == 0) {
                p->errs.file = p->file;
                (void) spec_errors_add(&p->errs, NULL,
                                       "declares no deployment (taken as a file being written; "
                                       "delete the file to delete what it declared)");
                p->errs.file = NULL;
        }
}

/* Which file declares each deployment ("ns/name" → file): the one it came
 * from, while that file is there and has not dropped it — an invalid or
 * empty file has not, it is being written — else the first by name. So a
 * second file declaring it never takes it over by a moment's accident. */
static tend_hashmap *owners(manifest_dir *m, parsed *ps, size_t n) {
        _cleanup_(tend_hashmap_freep) tend_hashmap *own = tend_hashmap_new();
        const void *const *items;
        size_t k;

        if (!own)
                return NULL;
        k = store_list(agent_loop_store(m->al), STORE_DEPLOYMENT, &items);
        for (size_t i = 0; i < k; i++) {
                const spec_deployment *d = items[i];
                const char *src = source_in(m, d);
                _cleanup_free_ char *key = NULL;
                for (size_t f = 0; src && f < n; f++) {
                        if (!streq(ps[f].file, src))
                                continue;
                        key = key_of(d);
                        if (!key)
                                return NULL;
                        if ((!parsed_ok(&ps[f]) || parsed_declares(&ps[f], key)) &&
                            tend_hashmap_put(own, key, (void *) ps[f].file, NULL) < 0)
                                return NULL;
                        break;
                }
        }
        for (size_t f = 0; f < n; f++)
                for (size_t i = 0; parsed_ok(&ps[f]) && i < ps[f].mf.n; i++) {
                        _cleanup_free_ char *key = key_of(ps[f].mf.items[i].deployment);
                        if (!key)
                                return NULL;
                        if (!tend_hashmap_get(own, key) &&
                            tend_hashmap_put(own, key, (void *) ps[f].file, NULL) < 0)
                                return NULL;
                }
        return TAKE_PTR(own);
}

/* One file, all or nothing. Adds the "namespace/name" of what it declares
 * to *declared; returns -EINVAL if it is not applied. */
static int apply_file(manifest_dir *m, parsed *p, tend_hashmap *own, char ***declared) {
        agent *a = agent_loop_agent(m->al);
        _cleanup_free_ spec_deployment **ds = NULL;
        _cleanup_free_ agent_apply_result *res = NULL;
        spec_manifest *mf = &p->mf;
        int r;

        p->errs.file = p->file;
        for (size_t i = 0; i < mf->n && parsed_ok(p); i++) {
                _cleanup_free_ char *key = key_of(mf->items[i].deployment);
                const char *owner = key ? tend_hashmap_get(own, key) : NULL;
                if (owner && !streq(owner, p->file))
                        (void) spec_errors_add_at(&p->errs, mf->items[i].line, 1,
                                                  "deployment %s is declared by %s already; one "
                                                  "file per deployment (this file is not applied)",
                                                  key, owner);
        }
        p->errs.file = NULL;
        if (parsed_ok(p)) {
                ds = new0(spec_deployment *, mf->n);
                res = new0(agent_apply_result, mf->n);
                if (!ds || !res)
                        return -ENOMEM;
                for (size_t i = 0; i < mf->n; i++) {
                        ds[i] = mf->items[i].deployment;
                        r = spec_map_set(&ds[i]->metadata.annotations, AGENT_ANN_SOURCE, p->file);
                        if (r < 0)
                                return r;
                }
                p->errs.file = p->file;
                /* the file is declared again at each sync: an automatic
                 * rollback of its template stays until the file changes it */
                /* (validated as it was read, off the loop: spec/manifest.c) */
                r = agent_apply_ex(a, ds, mf->n, &p->errs, res,
                                   AGENT_APPLY_KEEP_ROLLBACK | AGENT_APPLY_VALIDATED);
                p->errs.file = NULL;
                if (r < 0 && r != -EINVAL)
                        return r;
        }
        if (!parsed_ok(p)) {
                report(m, p->file, &p->errs);
                return -EINVAL;
        }
        free(tend_hashmap_remove(m->reported, p->file));
        for (size_t i = 0; i < mf->n; i++) {
                const spec_deployment *d = mf->items[i].deployment;
                _cleanup_free_ char *key = key_of(d);
                if (!key || strv_extend(declared, key) < 0)
                        return -ENOMEM;
                if (res[i] == AGENT_CONFIGURED)
                        log_info("deployment/%s: now as %s declares", d->metadata.name, p->file);
                if (res[i] != AGENT_UNCHANGED && mf->items[i].legacy_lease_ports)
                        log_warning("deployment/%s: %s:%u: a port without containerPort is not "
                                    "valid Kubernetes: write the pod template's annotation "
                                    "tend.io/lease-ports: %s instead (taken so meanwhile)",
                                    d->metadata.name, p->file, mf->items[i].line,
                                    mf->items[i].legacy_lease_ports);
        }
        return 0;
}

static void on_fs_event(uv_fs_event_t *h, const char *name, int events, int status);

/* The directory a watch follows is the one the path names now: after a
 * symlink swap, or the directory removed and made again, the watch moves
 * to the new one. */
static void rearm_watch(manifest_dir *m) {
        struct stat st;
        int r;

        if (stat(m->dir, &st) < 0 || !S_ISDIR(st.st_mode))
                return;
        if (m->watching && st.st_dev == m->watched_dev && st.st_ino == m->watched_ino)
                return;
        if (m->watching)
                uv_fs_event_stop(&m->watch);
        m->watching = false;
        r = uv_fs_event_start(&m->watch, on_fs_event, m->dir, 0);
        if (r < 0) {
                log_warning("manifests: cannot watch %s: %s; it is read every resync period",
                            m->dir, uv_strerror(r));
                return;
        }
        if (m->watched_ino && (st.st_ino != m->watched_ino || st.st_dev != m->watched_dev))
                log_info("manifests: %s is a new directory now; watching it", m->dir);
        m->watching = true;
        m->watched_dev = st.st_dev;
        m->watched_ino = st.st_ino;
}

static void read_free(dir_read *rd) {
        for (size_t f = 0; rd && f < rd->n; f++) {
                spec_errors_done(&rd->ps[f].errs);
                spec_manifest_done(&rd->ps[f].mf);
        }
        if (rd) {
                free(rd->ps);
                strv_free(rd->files);
                free(rd);
        }
}

/* In the thread pool (or the loop, at start): the directory's files, each
 * read and checked. Touches nothing of the agent's. */
static void read_dir(uv_work_t *w) {
        dir_read *rd = w->data;

        rd->error = list_files(rd->dir, &rd->files);
        if (rd->error < 0)
                return;
        rd->n = strv_length(rd->files);
        rd->ps = new0(parsed, MAX(rd->n, (size_t) 1));
        if (!rd->ps) {
                rd->error = -ENOMEM;
                rd->n = 0;
                return;
        }
        for (size_t f = 0; f < rd->n; f++) {
                rd->ps[f].file = rd->files[f];
                parse_file(&rd->ps[f]);
        }
}

/* On the loop: what was read, applied. */
static void apply_read(manifest_dir *m, dir_read *rd) {
        agent *a = agent_loop_agent(m->al);
        _cleanup_strv_free_ char **declared = NULL, **invalid = NULL, **doomed = NULL;
        _cleanup_(tend_hashmap_freep) tend_hashmap *own = NULL;
        const void *const *items;
        size_t n;

        if (rd->error == -ENOMEM) {
                log_oom(); /* (the next sync reads it again) */
                return;
        }
        if (rd->error < 0) {
                /* Not the same as empty: a directory that went away (an
                 * unmounted share, a checkout being replaced) deletes
                 * nothing. Emptying it, or removing its files, does. */
                if (m->unreadable != -rd->error)
                        log_warning("manifests: cannot read %s: %s; its deployments keep running "
                                    "as they are",
                                    m->dir, strerror(-rd->error));
                m->unreadable = -rd->error;
                return;
        }
        if (m->unreadable) {
                log_info("manifests: %s can be read again", m->dir);
                m->unreadable = 0;
        }
        own = owners(m, rd->ps, rd->n);
        for (size_t f = 0; f < rd->n; f++)
                if (!own || apply_file(m, &rd->ps[f], own, &declared) < 0)
                        (void) strv_extend(&invalid, rd->files[f]);

        /* What came from a file that is gone, or that no longer declares
         * it, goes. An invalid file keeps what it declared before. */
        n = store_list(agent_loop_store(m->al), STORE_DEPLOYMENT, &items);
        for (size_t i = 0; i < n; i++) {
                const spec_deployment *d = items[i];
                const char *src = source_in(m, d);
                _cleanup_free_ char *key = NULL;

                if (!src || strv_contains(invalid, src) || d->metadata.deletion_timestamp)
                        continue;
                key = key_of(d);
                if (key && !strv_contains(declared, key))
                        (void) strv_extend(&doomed, key);
        }
        for (char **k = doomed; k && *k; k++) {
                char *slash = strchr(*k, '/');
                *slash = 0;
                log_info("deployment/%s: its manifest is gone from %s; deleting it", slash + 1,
                         m->dir);
                (void) agent_delete_deployment(a, *k, slash + 1);
        }
        agent_loop_kick(m->al);
}

static void free_manifest_dir(manifest_dir *m) {
        const char *k;
        void *v;

        for (size_t i = 0; tend_hashmap_next(m->reported, &i, &k, &v);)
                free(v);
        tend_hashmap_free(m->reported);
        free(m->dir);
        free(m);
}

static void on_read(uv_work_t *w, int status) {
        dir_read *rd = w->data;
        manifest_dir *m = rd->m;

        (void) status;
        m->reading = NULL;
        if (m->closing) {
                read_free(rd);
                if (m->open_handles == 0)
                        free_manifest_dir(m);
                return;
        }
        apply_read(m, rd);
        read_free(rd);
        if (m->again) {
                m->again = false;
                manifest_dir_sync(m);
        }
}

static void sync_dir(manifest_dir *m, bool now) {
        dir_read *rd;

        if (m->closing)
                return;
        if (m->reading) {
                m->again = true;
                return;
        }
        rearm_watch(m);
        rd = new0(dir_read, 1);
        if (!rd)
                return;
        rd->m = m;
        rd->dir = m->dir;
        rd->work.data = rd;
        if (!now && uv_queue_work(m->loop, &rd->work, read_dir, on_read) == 0) {
                m->reading = rd;
                return;
        }
        read_dir(&rd->work);
        apply_read(m, rd);
        read_free(rd);
}

void manifest_dir_sync(manifest_dir *m) {
        sync_dir(m, false);
}

static void on_debounce(uv_timer_t *t) {
        manifest_dir_sync(t->data);
}

static void on_fs_event(uv_fs_event_t *h, const char *name, int events, int status) {
        manifest_dir *m = h->data;

        if (status < 0) {
                /* The watch is gone with its directory: the next sync
                 * watches whatever the path names by then. */
                log_warning("manifests: watching %s: %s", m->dir, uv_strerror(status));
                m->watching = false;
                uv_fs_event_stop(h);
        }
        uv_timer_start(&m->debounce, on_debounce, DEBOUNCE_MS, 0);
}

/* In the parent, only the directory's own name matters (created, renamed
 * over, a symlink replaced). */
static void on_parent_event(uv_fs_event_t *h, const char *name, int events, int status) {
        manifest_dir *m = h->data;

        if (status >= 0 && name && !streq(name, m->base))
                return;
        /* The directory was removed, replaced or made: whatever the watch
         * followed may be gone, even where the new one got the same inode
         * number (ext4 hands a freed one out again) — watch anew. */
        if (m->watching) {
                uv_fs_event_stop(&m->watch);
                m->watching = false;
        }
        uv_timer_start(&m->debounce, on_debounce, DEBOUNCE_MS, 0);
}

static void on_resync(uv_timer_t *t) {
        manifest_dir_sync(t->data);
}

/* dir made absolute with its parents resolved, the last part kept as it
 * is (it may be a symlink to follow as it changes); "/", "." and "..",
 * which have no name of their own to follow, resolved whole. */
static int absolute_dir(const char *dir, char **ret) {
        _cleanup_free_ char *copy = strdup(dir), *parent = NULL;
        const char *base;
        char *slash;
        size_t len;

        if (!copy)
                return -ENOMEM;
        len = strlen(copy);
        while (len > 1 && copy[len - 1] == '/')
                copy[--len] = 0;
        slash = strrchr(copy, '/');
        base = slash ? slash + 1 : copy;
        if (isempty(base) || streq(base, ".") || streq(base, "..")) {
                *ret = realpath(copy, NULL);
                return *ret ? 0 : -errno;
        }
        if (slash)
                *slash = 0;
        parent = realpath(slash ? (slash == copy ? "/" : copy) : ".", NULL);
        if (!parent)
                return -errno;
        *ret = strprintf("%s/%s", streq(parent, "/") ? "" : parent, base);
        return *ret ? 0 : -ENOMEM;
}

int manifest_dir_new(uv_loop_t *loop, agent_loop *al, const char *dir, usec_t resync,
                     manifest_dir **ret, char **ret_error) {
        _cleanup_free_ char *absdir = NULL, *parent = NULL;
        manifest_dir *m;
        struct stat st;
        int r;

        r = absolute_dir(dir, &absdir);
        if (r >= 0 && stat(absdir, &st) < 0)
                r = -errno;
        if (r < 0) {
                *ret_error = strprintf("--manifests %s: %s", dir, strerror(-r));
                return r;
        }
        if (!S_ISDIR(st.st_mode)) {
                *ret_error = strprintf("--manifests %s: not a directory", dir);
                return -ENOTDIR;
        }
        m = new0(manifest_dir, 1);
        if (!m)
                return -ENOMEM;
        m->loop = loop;
        m->al = al;
        m->dir = TAKE_PTR(absdir);
        m->base = strrchr(m->dir, '/') + 1;
        parent = m->base - 1 == m->dir ? strdup("/") : strndup(m->dir, m->base - 1 - m->dir);
        m->reported = tend_hashmap_new();
        if (!m->reported || !parent) {
                tend_hashmap_free(m->reported);
                free(m->dir);
                free(m);
                return -ENOMEM;
        }
        uv_timer_init(loop, &m->debounce);
        m->debounce.data = m;
        uv_timer_init(loop, &m->resync);
        m->resync.data = m;
        uv_fs_event_init(loop, &m->watch);
        m->watch.data = m;
        uv_fs_event_init(loop, &m->parent_watch);
        m->parent_watch.data = m;
        m->open_handles = 4;
        rearm_watch(m);
        if (!m->watching) {
                *ret_error = strprintf("--manifests %s: cannot watch it", dir);
                manifest_dir_close(m);
                return -EIO;
        }
        r = uv_fs_event_start(&m->parent_watch, on_parent_event, parent, 0);
        if (r < 0)
                log_warning("manifests: cannot watch %s: %s; %s replaced is seen at the next "
                            "resync",
                            parent, uv_strerror(r), m->dir);
        resync = resync ?: 30 * USEC_PER_SEC;
        uv_timer_start(&m->resync, on_resync, resync / USEC_PER_MSEC, resync / USEC_PER_MSEC);
        uv_unref((uv_handle_t *) &m->resync);
        log_info("manifests: applying %s, and again whenever it changes", m->dir);
        sync_dir(m, true); /* (applied before tendd answers: read here) */
        *ret = m;
        return 0;
}

static void on_closed(uv_handle_t *h) {
        manifest_dir *m = h->data;

        if (--m->open_handles > 0 || m->reading) /* (then freed once it is read) */
                return;
        free_manifest_dir(m);
}

void manifest_dir_close(manifest_dir *m) {
        if (!m || m->closing)
                return;
        m->closing = true;
        uv_close((uv_handle_t *) &m->watch, on_closed);
        uv_close((uv_handle_t *) &m->parent_watch, on_closed);
        uv_close((uv_handle_t *) &m->debounce, on_closed);
        uv_close((uv_handle_t *) &m->resync, on_closed);
}
