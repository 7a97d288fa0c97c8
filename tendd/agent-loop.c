/* SPDX-License-Identifier: MIT */

/*
 * The agent on a libuv loop, with the real runtime: the state-dir lock, the
 * store, the rt_manager, the agent core, and three handles — an idle that
 * runs agent_process() when work is queued, a timer for its next deadline,
 * and the periodic resync.
 */

#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <systemd/sd-daemon.h>

#include "agent-loop.h"
#include "backend-rt.h"

struct agent_loop {
        uv_loop_t *loop;
        int lock_fd;
        store *store;
        rt_manager *rt;
        agent *agent;
        uv_idle_t work;
        bool polled;      /* the loop polled for I/O since work was asked for */
        usec_t wanted_at; /* when the pass that waits was first asked for */
        uv_timer_t deadline;
        uv_timer_t resync;
        uv_timer_t trim; /* once passes stop: the heap given back */
        usec_t resync_interval;
        unsigned open_handles;
        bool closing;
};

int agent_lock_state_dir(const char *dir, int *ret_fd, char **ret_error) {
        _cleanup_free_ char *path = strprintf("%s/tendd.lock", dir);
        _cleanup_close_ int fd = -EBADF;
        char buf[32];
        int r;

        if (!path)
                return -ENOMEM;
        fd = RET_NERRNO(open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY, 0600));
        if (fd < 0) {
                *ret_error = strprintf("cannot open %s: %s (is the state dir writable?)", path,
                                       strerror(-fd));
                return fd;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
                r = -errno;
                buf[MAX(n, 0)] = 0;
                buf[strcspn(buf, "\n")] = 0;
                if (r == -EWOULDBLOCK)
                        *ret_error = strprintf("state dir %s is in use by another tendd (pid %s); "
                                               "stop it first or use another --state-dir",
                                               dir, *buf ? buf : "unknown");
                else
                        *ret_error = strprintf("cannot lock %s: %s", path, strerror(-r));
                return r == -EWOULDBLOCK ? -EBUSY : r;
        }
        snprintf(buf, sizeof buf, "%d\n", (int) getpid());
        if (ftruncate(fd, 0) < 0 || pwrite(fd, buf, strlen(buf), 0) < 0) {
                r = -errno;
                *ret_error = strprintf("cannot write %s: %s", path, strerror(-r));
                return r;
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* Under systemd, held sockets (tend.io/listen) and pods' notify sockets
 * (tend.io/notify) are kept in the service's file-descriptor store too,
 * and the previous tendd's come back here as LISTEN_FDS, before the pods
 * are adopted (runtime/held.c says why that store comes first for held
 * sockets; runtime/notify.c why notify sockets go there). Descriptors
 * that are not ours are closed. */
static void take_stored_sockets(rt_manager *rt) {
        _cleanup_strv_free_ char **names = NULL;
        int n = sd_listen_fds_with_names(true, &names);

        rt_manager_set_fdstore(rt, getenv("NOTIFY_SOCKET") != NULL);
        for (int i = 0; i < n; i++) {
                int fd = SD_LISTEN_FDS_START + i, r = -EBADMSG;
                if (names && rt_held_fdname(names[i]))
                        r = rt_manager_add_held_socket(rt, fd);
                else if (names && rt_notify_fdname(names[i]))
                        r = rt_manager_add_notify_socket(rt, fd, names[i]);
                if (r < 0) {
                        if (r != -EBADMSG)
                                log_warning_errno(r, "held socket %s from the fd store: %m",
                                                  names ? strna(names[i]) : "?");
                        (void) close(fd);
                } else if (rt_held_fdname(names[i]))
                        log_info("held socket %s: back from systemd's fd store", names[i]);
        }
}

#define WANT_POLL_MAX (100 * USEC_PER_MSEC)

static void run(agent_loop *l);
static void on_work(uv_idle_t *h);

/* A pass is asked for: it runs after the loop's next poll for I/O. The
 * idle handle runs before the poll (and keeps it from waiting), so it
 * lets one go by first: what asked (a large write the API just committed,
 * say) and the pass are two slices of the loop's time, and requests that
 * came meanwhile are answered between them (issue 27's loop budget). A
 * pass asked for again puts it off past another poll, unless it waited
 * WANT_POLL_MAX already (a loop that asks every turn starves no pass). */
static void want_work(agent_loop *l) {
        usec_t now = now_monotonic();

        if (!uv_is_active((uv_handle_t *) &l->work))
                l->wanted_at = now;
        if (now - l->wanted_at < WANT_POLL_MAX)
                l->polled = false;
        uv_idle_start(&l->work, on_work);
}

static void on_deadline(uv_timer_t *t) {
        run(t->data);
}

/* One timer for the core's earliest deadline. */
static void arm(agent_loop *l, usec_t next) {
        usec_t now = now_monotonic();

        if (l->closing)
                return;
        if (next == USEC_INFINITY) {
                uv_timer_stop(&l->deadline);
                return;
        }
        if (next <= now) {
                /* Due now (a pass that ran out of rounds, say): after the
                 * loop's I/O, not from a timer of 0 ms, which libuv before
                 * 1.45 runs again in the same timer phase, for ever, while
                 * the API, signals and exits wait. */
                uv_timer_stop(&l->deadline);
                want_work(l);
                return;
        }
        uv_timer_start(&l->deadline, on_deadline, (next - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC,
                       0);
}

/* After a burst (a thousand pods replaced), glibc keeps the freed heap:
 * given back TRIM_AFTER_MS after a pass (at most that often while passes
 * go on), so that an idle agent is small again. */
#define TRIM_AFTER_MS 10000

static void on_trim(uv_timer_t *t) {
        (void) malloc_trim(0);
}

static void run(agent_loop *l) {
        arm(l, agent_process(l->agent));
        if (!l->closing && !uv_is_active((uv_handle_t *) &l->trim))
                uv_timer_start(&l->trim, on_trim, TRIM_AFTER_MS, 0);
}

static void on_work(uv_idle_t *h) {
        agent_loop *l = h->data;

        if (!l->polled) { /* (the poll comes next) */
                l->polled = true;
                return;
        }
        uv_idle_stop(h);
        run(l);
}

static void on_resync(uv_timer_t *t) {
        agent_loop *l = t->data;
        agent_resync(l->agent);
        run(l);
}

static void wakeup(void *userdata) {
        agent_loop *l = userdata;
        if (!l->closing)
                want_work(l);
}

int agent_loop_new(uv_loop_t *loop, const agent_loop_config *c, agent_loop **ret,
                   char **ret_error) {
        agent_loop *l = new0(agent_loop, 1);
        _cleanup_free_ char *db = NULL;
        int r;

        *ret_error = NULL;
        if (!l)
                return -ENOMEM;
        l->loop = loop;
        l->lock_fd = -EBADF;
        /* A full pass over every object is a safety net (changes and
         * deadlines queue their objects themselves): at ten thousand pods
         * it costs ~60 ms, which every 30 s was most of an idle tendd's
         * CPU (issue 35). */
        l->resync_interval = c->resync_interval ?: 300 * USEC_PER_SEC;

        if (mkdir(c->state_dir, 0750) < 0 && errno != EEXIST) {
                r = -errno;
                *ret_error = strprintf("cannot create state dir %s: %s", c->state_dir,
                                       strerror(-r));
                free(l);
                return r;
        }
        r = agent_lock_state_dir(c->state_dir, &l->lock_fd, ret_error);
        if (r < 0) {
                free(l);
                return r;
        }
        db = strprintf("%s/tend.db", c->state_dir);
        if (!db) {
                r = -ENOMEM;
                goto fail;
        }
        r = store_open(db, &l->store, ret_error);
        if (r < 0)
                goto fail;
        r = rt_manager_new(&(rt_config){ .loop = loop,
                                         .state_dir = c->state_dir,
                                         .port_lo = c->port_lo,
                                         .port_hi = c->port_hi,
                                         .log_max_bytes = c->log_max_bytes,
                                         .subreaper = true,
                                         .systemd_bus = c->systemd_bus,
                                         .cgroups = c->cgroups,
                                         .callbacks = &agent_rt_callbacks,
                                         .userdata = NULL },
                           &l->rt);
        if (r < 0) {
                *ret_error = strprintf("cannot start the runtime: %s", strerror(-r));
                goto fail;
        }
        r = agent_new(&(agent_config){ .store = l->store,
                                       .backend = &agent_rt_backend,
                                       .backend_data = l->rt,
                                       .node_name = c->node_name,
                                       .fleet = c->fleet,
                                       .wakeup = wakeup,
                                       .wakeup_userdata = l },
                      &l->agent);
        if (r < 0)
                goto fail;
        /* The runtime's callbacks go to the agent. */
        rt_manager_set_userdata(l->rt, l->agent);
        take_stored_sockets(l->rt);

        uv_idle_init(loop, &l->work);
        l->work.data = l;
        uv_timer_init(loop, &l->deadline);
        l->deadline.data = l;
        uv_timer_init(loop, &l->resync);
        l->resync.data = l;
        uv_timer_init(loop, &l->trim);
        l->trim.data = l;
        uv_unref((uv_handle_t *) &l->trim);
        l->open_handles = 4;
        uv_timer_start(&l->resync, on_resync, l->resync_interval / USEC_PER_MSEC,
                       l->resync_interval / USEC_PER_MSEC);

        r = agent_start(l->agent);
        if (r < 0) {
                *ret_error = strprintf("adopting the pods: %s", strerror(-r));
                agent_loop_close(l);
                return r;
        }
        want_work(l);
        *ret = l;
        return 0;

fail:
        agent_free(l->agent);
        if (l->rt)
                rt_manager_close(l->rt);
        store_close(l->store);
        safe_close(l->lock_fd);
        free(l);
        return r;
}

static void on_closed(uv_handle_t *h) {
        agent_loop *l = h->data;
        if (--l->open_handles == 0)
                free(l);
}

void agent_loop_close(agent_loop *l) {
        if (!l || l->closing)
                return;
        l->closing = true;
        /* Pending writes are committed; pods are detached, not stopped: the
         * next tendd adopts them. */
        (void) agent_shutdown(l->agent);
        l->agent = agent_free(l->agent);
        rt_manager_close(l->rt);
        l->store = store_close(l->store);
        l->lock_fd = safe_close(l->lock_fd);
        uv_close((uv_handle_t *) &l->work, on_closed);
        uv_close((uv_handle_t *) &l->deadline, on_closed);
        uv_close((uv_handle_t *) &l->resync, on_closed);
        uv_close((uv_handle_t *) &l->trim, on_closed);
}

agent *agent_loop_agent(agent_loop *l) {
        return l->agent;
}

store *agent_loop_store(agent_loop *l) {
        return l->store;
}

rt_manager *agent_loop_runtime(agent_loop *l) {
        return l->rt;
}

void agent_loop_kick(agent_loop *l) {
        wakeup(l);
}
