/* SPDX-License-Identifier: MIT */

/*
 * The manager and the backend-independent half of a pod: argv and
 * environment, ports, log files, probes, callbacks, and lifetimes. It
 * reaches a backend only through its rt_ops (backends.c picks it by
 * runtimeClassName); the reaper (reaper.c) and the log checks (logs.c) are
 * beside it.
 */

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "rt-internal.h"

/* ---- the manager's end ---------------------------------------------------------------- */

static void manager_free(rt_manager *m) {
        if (m->spawn_stack)
                munmap(m->spawn_stack, m->spawn_stack_size);
        free(m->known_pids);
        tend_hashmap_free(m->detached);
        if (m->escapees) {
                const char *k;
                void *v;
                for (size_t i = 0; tend_hashmap_next(m->escapees, &i, &k, &v);)
                        free(v);
                tend_hashmap_free(m->escapees);
        }
        rt__log_spares_free(m);
        free(m->log_active);
        rt__held_unreserve(m);
        free(m->held_lost);
        if (m->notify_stored) {
                const char *k;
                void *v;
                for (size_t i = 0; tend_hashmap_next(m->notify_stored, &i, &k, &v);)
                        safe_close((int) (intptr_t) v - 1);
                tend_hashmap_free(m->notify_stored);
        }
        free(m->state_dir);
        free(m->notify_dir);
        rt__images_free(m);
        free(m);
}

static void manager_handle_closed(uv_handle_t *h) {
        rt__manager_unref(h->data);
}

/* ---- deferred `started` ------------------------------------------------------------------- */

/* `started`, then — for a pod without a readiness probe, which is ready
 * as soon as it runs — the readiness transition. */
static void report_started(rt_pod *p) {
        rt_manager *m = p->manager;

        if (p->freed)
                return;
        if (m->cb.started)
                m->cb.started(p, m->userdata);
        rt__notify_started(p);
        if (!p->freed && (!p->probes[RT_PROBE_READINESS] || p->probe_ready) && !p->ready &&
            (!p->notify_declared_ready || p->notify_ready)) {
                p->ready = true;
                if (m->cb.probe)
                        m->cb.probe(p, RT_PROBE_READINESS, true, NULL, m->userdata);
        }
}

static void on_deferred(uv_idle_t *h) {
        rt_manager *m = h->data;

        /* Callbacks may queue more; the loop takes those too. */
        while (m->deferred) {
                rt_pod *p = m->deferred;
                bool due = p->started_queued;

                m->deferred = p->deferred_next;
                if (!m->deferred)
                        m->deferred_tail = NULL;
                p->deferred_next = NULL;
                p->started_queued = false;
                if (due && p->state != RT_POD_EXITED)
                        report_started(p);
                rt__pod_unref(p);
        }
        uv_idle_stop(h);
}

/*
 * The one place a pod's state changes, with every effect of entering it
 * (docs/conventions.md: one set_state()). STARTING → RUNNING → STOPPING → EXITED, where
 * STOPPING may come straight from STARTING and EXITED from any; EXITED is
 * final. The backends own their handles (the pidfd's poll, the unit's bus
 * calls, the grace timer) and close them as they stop watching.
 *
 *   RUNNING   nothing at once: `started` goes out from the loop (deferred)
 *   STOPPING  the liveness probe stops: no verdict on a pod being stopped
 *   EXITED    a `started` still queued goes out first; readiness ends; every
 *             probe stops; escapees are looked at; `exited` goes out with e
 */
static void pod_set_state(rt_pod *p, rt_pod_state state, const rt_exit *e) {
        rt_manager *m = p->manager;

        if (p->state == state || p->state == RT_POD_EXITED)
                return;
        p->state = state;
        switch (state) {
        case RT_POD_STARTING:
        case RT_POD_RUNNING:
                break;
        case RT_POD_STOPPING:
                /* As the kubelet: no liveness verdict on a pod being stopped. */
                rt__probes_stop_one(p, RT_PROBE_LIVENESS);
                break;
        case RT_POD_EXITED:
                /* A pod that dies before its `started` went out still reports
                 * it first: the agent sees started → exited, in that order. */
                if (p->started_queued) {
                        p->started_queued = false; /* it stays queued, as a no-op */
                        report_started(p);
                }
                p->ready = false;
                m->pods_ended = true; /* escapees of it may have to go */
                rt__probes_stop(p);
                rt__notify_close(p);
                if (!p->freed && m->cb.exited)
                        m->cb.exited(p, e, m->userdata);
                break;
        }
}

void rt__pod_started(rt_pod *p) {
        rt_manager *m = p->manager;

        if (p->state == RT_POD_STARTING)
                pod_set_state(p, RT_POD_RUNNING, NULL);
        if (p->started_queued)
                return;
        p->started_queued = true;
        rt__pod_ref(p);
        /* FIFO: append at the tail (kept: a thousand starts in a row must
         * not walk the queue each). */
        if (m->deferred_tail)
                m->deferred_tail->deferred_next = p;
        else
                m->deferred = p;
        m->deferred_tail = p;
        uv_idle_start(&m->deferred_idle, on_deferred);
}

void rt__grace_arm(rt_pod *p, usec_t grace, uv_timer_cb cb) {
        usec_t at = now_monotonic() + grace;

        if (uv_is_active((uv_handle_t *) &p->grace_timer) && at >= p->kill_at)
                return;
        p->kill_at = at;
        /* the loop's clock may lag: the grace is never cut short */
        uv_update_time(p->manager->loop);
        uv_timer_start(&p->grace_timer, cb, (grace + USEC_PER_MSEC - 1) / USEC_PER_MSEC, 0);
}

bool rt__grace_not_yet(rt_pod *p, uv_timer_cb cb) {
        return rt__not_yet(&p->grace_timer, cb, p->kill_at);
}

void rt__pod_exited(rt_pod *p, const rt_exit *e) {
        pod_set_state(p, RT_POD_EXITED, e);
}

/* ---- the manager ------------------------------------------------------------------------------
 */

int rt_manager_new(const rt_config *c, rt_manager **ret) {
        rt_manager *m;
        struct rlimit rl;
        int r;

        m = new0(rt_manager, 1);
        if (!m)
                return -ENOMEM;
        m->refs = 1;
        m->destroy = manager_free;
        for (size_t i = 0; i < RT_HELD_SLOTS; i++)
                m->held_slots[i] = -EBADF;
        m->loop = c->loop;
        m->cb = *c->callbacks;
        m->userdata = c->userdata;
        m->port_lo = c->port_lo ?: RT_PORT_RANGE_LO;
        m->port_hi = c->port_hi ?: RT_PORT_RANGE_HI;
        m->port_cursor = m->port_lo;
        m->log_max_bytes = c->log_max_bytes ?: RT_LOG_MAX_BYTES;
        m->log_check_interval = c->log_check_interval ?: 5 * USEC_PER_SEC;
        m->log_times_slack = c->log_times_slack ?: RT_LOG_TIMES_SLACK;
        m->state_dir = strdup(c->state_dir);
        m->notify_dir = rt__notify_dir(c->state_dir);
        if (!m->state_dir || !m->notify_dir || m->port_lo > m->port_hi) {
                r = m->state_dir && m->notify_dir ? -EINVAL : -ENOMEM;
                goto fail;
        }

        /* Children must never inherit the agent's descriptors; and the
         * agent keeps 0-2 open so that no descriptor of ours lands there. */
        for (int fd = 0; fd < 3; fd++)
                if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) < 0) {
                        r = -errno;
                        goto fail;
                }
        rt__held_reserve(m);

        /* 1000 pods need more than the usual 1024 descriptors (a pidfd each,
         * plus probes); children get the original limit back. */
        m->nofile = UINT64_MAX;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                m->nofile_orig = rl;
                rl.rlim_cur = rl.rlim_max;
                if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                        rl = m->nofile_orig;
                if (rl.rlim_cur != RLIM_INFINITY)
                        m->nofile = (uint64_t) rl.rlim_cur;
        }

        r = net_curl_new(m->loop, &m->curl);
        if (r < 0)
                goto fail;

        uv_idle_init(m->loop, &m->deferred_idle);
        m->deferred_idle.data = m;
        rt__manager_ref(m);

        rt__logs_start(m);
        rt__backends_init(m, c);
        m->subreaper = c->subreaper;
        rt__reaper_start(m);
        if (c->subreaper && prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
                r = -errno;
                rt_manager_close(m);
                return r;
        }

        *ret = m;
        return 0;

fail:
        manager_free(m);
        return r;
}

static void detach_pod(rt_pod *p);

void rt_manager_close(rt_manager *m) {
        if (m->closing)
                return;
        m->closing = true;
        while (m->pods)
                rt_pod_free(m->pods);
        rt__times_close_dead(m);
        /* Pods still waiting for their `started` hold a reference each. */
        while (m->deferred) {
                rt_pod *p = m->deferred;
                m->deferred = p->deferred_next;
                if (!m->deferred)
                        m->deferred_tail = NULL;
                p->deferred_next = NULL;
                p->started_queued = false;
                rt__pod_unref(p);
        }
        rt__reap_orphans(m);
        rt__held_sweep(m, true);
        rt__backends_close(m);
        uv_close((uv_handle_t *) &m->deferred_idle, manager_handle_closed);
        uv_close((uv_handle_t *) &m->log_timer, manager_handle_closed);
        uv_close((uv_handle_t *) &m->sigchld, manager_handle_closed);
        uv_close((uv_handle_t *) &m->reap_timer, manager_handle_closed);
        net_curl_close(m->curl); /* the probes were cancelled with their pods */
        m->curl = NULL;
        rt__manager_unref(m);
}

void rt_manager_set_userdata(rt_manager *m, void *userdata) {
        m->userdata = userdata;
}

uv_loop_t *rt_manager_loop(rt_manager *m) {
        return m->loop;
}

size_t rt_manager_n_pods(rt_manager *m) {
        return m->n_pods;
}

/* ---- pods ---------------------------------------------------------------------------------------
 */

static rt_pod *pod_new(rt_manager *m, const rt_pod_params *p, void *userdata) {
        rt_pod *pod = new0(rt_pod, 1);
        const char *container;

        if (!pod)
                return NULL;
        pod->manager = m;
        rt__manager_ref(m);
        pod->refs = 1;
        pod->log_fd = -EBADF;
        pod->times_fd = -EBADF;
        pod->notify_fd = -EBADF;
        pod->userdata = userdata;
        container = p->spec->n_containers > 0 ? p->spec->containers[0].name : "main";
        pod->namespace = strdup(p->namespace);
        pod->name = strdup(p->name);
        pod->uid = strdup(strempty(p->uid));
        pod->container = strdup(container ?: "main");
        if (!pod->namespace || !pod->name || !pod->uid || !pod->container) {
                rt__pod_unref(pod);
                return NULL;
        }
        return pod;
}

static void pod_link(rt_pod *pod) {
        rt_manager *m = pod->manager;

        rt__log_check_soon(pod);
        pod->next = m->pods;
        if (m->pods)
                m->pods->prev = pod;
        m->pods = pod;
        m->n_pods++;
}

static void pod_unlink(rt_pod *pod) {
        rt_manager *m = pod->manager;

        rt__log_forget(pod);
        if (pod->prev)
                pod->prev->next = pod->next;
        else if (m->pods == pod)
                m->pods = pod->next;
        if (pod->next)
                pod->next->prev = pod->prev;
        pod->prev = pod->next = NULL;
        m->n_pods--;
}

/* uid/gid from runAsUser/runAsGroup (container over pod). */
static int resolve_ids(rt_pod *pod, const spec_pod_spec *s, char **ret_error) {
        const spec_container *c = &s->containers[0];
        int64_t uid = c->security_context.run_as_user != SPEC_UNSET64
                              ? c->security_context.run_as_user
                              : s->security_context.run_as_user;
        int64_t gid = c->security_context.run_as_group != SPEC_UNSET64
                              ? c->security_context.run_as_group
                              : s->security_context.run_as_group;

        if (uid == SPEC_UNSET64 && gid == SPEC_UNSET64)
                return 0;
        if (uid == SPEC_UNSET64)
                uid = geteuid();
        if (gid == SPEC_UNSET64) {
                struct passwd pw, *res = NULL;
                char buf[4096];
                /* The user's primary group; a uid with no entry needs an
                 * explicit group, rather than silently running as gid 0. */
                if (getpwuid_r((uid_t) uid, &pw, buf, sizeof buf, &res) != 0 || !res) {
                        *ret_error = strprintf("runAsUser %lld has no entry in the user "
                                               "database: set runAsGroup too",
                                               (long long) uid);
                        return -ESRCH;
                }
                gid = res->pw_gid;
        }
        if (geteuid() != 0 && ((uid_t) uid != geteuid() || (gid_t) gid != getegid())) {
                *ret_error = strprintf("runAsUser %lld/runAsGroup %lld need tendd to run as "
                                       "root (it runs as uid %u)",
                                       (long long) uid, (long long) gid, (unsigned) geteuid());
                return -EPERM;
        }
        pod->set_ids = geteuid() == 0;
        pod->uid_n = (uid_t) uid;
        pod->gid_n = (gid_t) gid;
        return 0;
}

/* A variable whose value the child writes: its own pid (RT_PID_SLOT
 * bytes of room). */
static int set_pid_slot(rt_pod *pod, const char *name, size_t slot, const rt_record *rec) {
        char room[RT_PID_SLOT], *entry;
        int r;

        snprintf(room, sizeof room, "%*s", RT_PID_SLOT - 1, "");
        r = rt__env_set(&pod->envp, name, room, &entry);
        if (r < 0)
                return r;
        pod->pid_slots[slot] = entry + strlen(name) + 1;
        if (rec) /* adopted: known (exec probes run with this environment) */
                snprintf(pod->pid_slots[slot], RT_PID_SLOT, "%d", (int) rec->pid);
        return 0;
}

/* tend.io/listen and tend.io/notify: what they add to the environment
 * (the sockets themselves come in pod_begin()). As systemd's socket
 * activation and Type=notify: LISTEN_FDS, LISTEN_FDNAMES, LISTEN_PID;
 * NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID — each replacing a container
 * env of the same name (a program must not be told of fds it does not
 * have). A systemd unit gets its NOTIFY_SOCKET and WATCHDOG_USEC from
 * systemd. */
static int notify_listen_env(rt_pod *pod, const rt_pod_params *p, const rt_record *rec,
                             char **ret_error) {
        const char *listen = p->annotations ? spec_map_get(p->annotations, SPEC_ANN_LISTEN) : NULL;
        const char *notify = p->annotations ? spec_map_get(p->annotations, SPEC_ANN_NOTIFY) : NULL;
        bool unit = p->spec->runtime_class_name == SPEC_RUNTIME_SYSTEMD;
        _cleanup_free_ char *problem = NULL;
        char num[32];
        int r;

        if (listen) {
                spec_listen l[SPEC_LISTEN_MAX];
                size_t n;
                _cleanup_buf_ tend_buf names = TEND_BUF_INIT(1024);

                if (spec_listen_parse(listen, l, &n, &problem) < 0) {
                        *ret_error = strprintf("%s: %s", SPEC_ANN_LISTEN, strna(problem));
                        return -EINVAL;
                }
                if (unit || !p->socket_owner) {
                        *ret_error = strprintf("%s: held sockets need runtimeClassName process",
                                               SPEC_ANN_LISTEN);
                        return -EOPNOTSUPP;
                }
                for (size_t i = 0; i < n; i++) {
                        const spec_container *c = &p->spec->containers[0];
                        rt_held_addr *a = &pod->listen[i];
                        int32_t port = SPEC_UNSET;
                        for (size_t k = 0; k < c->n_ports; k++)
                                if (streq_ptr(c->ports[k].name, l[i].port))
                                        port = c->ports[k].container_port;
                        if (port <= 0 || port > 65535) {
                                *ret_error = strprintf("%s: port \"%s\" has no containerPort",
                                                       SPEC_ANN_LISTEN, l[i].port);
                                return -EINVAL;
                        }
                        snprintf(a->address, sizeof a->address, "%s", l[i].address);
                        a->port = (uint16_t) port;
                        (void) tend_buf_addf(&names, "%s%s", i ? ":" : "", l[i].port);
                }
                pod->n_listen = n;
                if (!tend_buf_str(&names))
                        return -ENOMEM;
                snprintf(num, sizeof num, "%zu", n);
                r = rt__env_set(&pod->envp, "LISTEN_FDS", num, NULL);
                if (r >= 0)
                        r = rt__env_set(&pod->envp, "LISTEN_FDNAMES", tend_buf_str(&names), NULL);
                if (r >= 0)
                        r = set_pid_slot(pod, "LISTEN_PID", 0, rec);
                if (r < 0)
                        return r;
        }
        if (notify) {
                spec_notify n;
                _cleanup_free_ char *name = NULL;

                if (spec_notify_parse(notify, &n, &problem) < 0) {
                        *ret_error = strprintf("%s: %s", SPEC_ANN_NOTIFY, strna(problem));
                        return -EINVAL;
                }
                pod->notify_declared_ready = n.ready;
                pod->notify_watchdog = n.watchdog;
                /* a unit: systemd runs the protocol (Type=notify, WatchdogUSec)
                 * and gives it its NOTIFY_SOCKET and WATCHDOG_USEC */
                if (unit)
                        return 0;
                name = rt__notify_name(pod->manager, pod->uid);
                if (!name)
                        return -ENOMEM;
                pod->notify_socket = true;
                snprintf(num, sizeof num, "%llu", (unsigned long long) n.watchdog);
                r = rt__env_set(&pod->envp, "NOTIFY_SOCKET", name, NULL);
                if (r >= 0 && n.watchdog)
                        r = rt__env_set(&pod->envp, "WATCHDOG_USEC", num, NULL);
                if (r >= 0 && n.watchdog)
                        r = set_pid_slot(pod, "WATCHDOG_PID", 1, rec);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* argv and environment, expanded; ports leased (or taken from a record). */
static int pod_prepare(rt_pod *pod, const rt_pod_params *p, const rt_record *rec,
                       char **ret_error) {
        rt_manager *m = pod->manager;
        const spec_container *c;
        int r;

        if (p->spec->n_containers != 1 || strv_length(p->spec->containers[0].command) == 0) {
                *ret_error = strdup("the pod spec has no container with a command");
                return -EINVAL;
        }
        c = &p->spec->containers[0];
        /* tend.io/lease-ports: leased first, in its order ($PORT is the
         * first), then the fixed ones */
        const char *lease = p->annotations ? spec_map_get(p->annotations, SPEC_ANN_LEASE_PORTS)
                                           : NULL;
        spec_port_name leased[SPEC_LEASE_PORTS_MAX];
        size_t n_leased = 0;
        if (lease) {
                _cleanup_free_ char *problem = NULL;
                if (spec_lease_ports_parse(lease, leased, &n_leased, &problem) < 0) {
                        *ret_error = strprintf("%s: %s", SPEC_ANN_LEASE_PORTS, strna(problem));
                        return -EINVAL;
                }
        }
        if (c->n_ports + n_leased > RT_MAX_PORTS) {
                *ret_error = strprintf("more than %d ports", RT_MAX_PORTS);
                return -E2BIG;
        }

        if (rec) {
                memcpy(pod->record.ports, rec->ports, sizeof rec->ports);
                pod->record.n_ports = rec->n_ports;
                for (size_t i = 0; i < rec->n_ports; i++) {
                        rt_port *port = &pod->record.ports[i];
                        /* A fixed containerPort was never leased, whatever a
                         * reconstructed record says. */
                        for (size_t k = 0; k < c->n_ports; k++)
                                if (streq_ptr(c->ports[k].name, port->name) &&
                                    c->ports[k].container_port != SPEC_UNSET)
                                        port->leased = false;
                        if (port->leased)
                                rt__port_mark(m, port->port);
                }
        } else
                for (size_t i = 0; i < n_leased + c->n_ports; i++) {
                        rt_port *port = &pod->record.ports[pod->record.n_ports];
                        const spec_container_port *cp = i < n_leased ? NULL
                                                                     : &c->ports[i - n_leased];
                        snprintf(port->name, sizeof port->name, "%s",
                                 cp ? strempty(cp->name) : leased[i].name);
                        if (cp && cp->container_port != SPEC_UNSET && cp->container_port != 0)
                                port->port = (uint16_t) cp->container_port;
                        else {
                                r = rt__port_lease(m, &port->port);
                                if (r < 0) {
                                        *ret_error = strprintf("no free port left in %u-%u",
                                                               m->port_lo, m->port_hi);
                                        return r;
                                }
                                port->leased = true;
                        }
                        pod->record.n_ports++;
                }

        r = rt_build_env(p, pod->record.ports, pod->record.n_ports, &pod->envp);
        if (r < 0)
                return r;
        r = notify_listen_env(pod, p, rec, ret_error);
        if (r < 0)
                return r;
        for (int part = 0; part < 2; part++) {
                char **list = part == 0 ? c->command : c->args;
                for (size_t i = 0; list && list[i]; i++) {
                        _cleanup_free_ char *e = rt_expand(list[i], pod->envp);
                        if (!e) {
                                /* rt_expand() is bounded: not the machine's memory. */
                                *ret_error = strprintf("%s[%zu]: with $(VAR) expanded it is "
                                                       "longer than 1 MiB",
                                                       part == 0 ? "command" : "args", i);
                                return -E2BIG;
                        }
                        if (strv_push(&pod->argv, e) < 0)
                                return -ENOMEM;
                        e = NULL;
                }
        }
        r = rt__resolve_path(pod->argv[0], pod->envp, &pod->path);
        if (r == -ENOENT) {
                *ret_error = strprintf("exec %s: not found in PATH", pod->argv[0]);
                return r;
        }
        if (r < 0)
                return r;
        /* What runs: as recorded (an adopted pod), else the file found now;
         * an adopted pod from before records had it is read through
         * /proc (the binary it runs, whatever is on disk now). */
        if (rec && rec->image && rec->image_id) {
                if (!(pod->record.image = strdup(rec->image)) ||
                    !(pod->record.image_id = strdup(rec->image_id)))
                        return -ENOMEM;
        } else {
                _cleanup_free_ char *exe = rec && rec->pid > 0
                                                   ? strprintf("/proc/%d/exe", (int) rec->pid)
                                                   : NULL;
                if (!(pod->record.image = strdup(pod->path)))
                        return -ENOMEM;
                /* a file that cannot be read (a user's 0711 binary) has no digest */
                if (rt__image_id(m, exe ?: pod->path, &pod->record.image_id) == -ENOMEM)
                        return -ENOMEM;
        }
        if (c->working_dir && !(pod->working_dir = strdup(c->working_dir)))
                return -ENOMEM;
        pod->own_mnt_ns = c->n_volume_mounts > 0 &&
                          p->spec->runtime_class_name == SPEC_RUNTIME_PROCESS;
        r = resolve_ids(pod, p->spec, ret_error);
        if (r < 0)
                return r;
        pod->grace = usec_from_sec(p->spec->termination_grace_period_seconds);
        if (c->resources.limits.memory.text)
                pod->memory_max = (uint64_t) MAX(c->resources.limits.memory.value, (int64_t) 0);
        if (c->resources.limits.cpu.text)
                pod->cpu_milli = (uint64_t) MAX(c->resources.limits.cpu.milli, (int64_t) 0);
        /* never started unlimited (an adopted one runs as it was started) */
        const rt_ops *ops = rt__backend_for(p->spec->runtime_class_name);
        if (!rec && ops && ops->limits_problem &&
            ops->limits_problem(m, pod->memory_max > 0, pod->cpu_milli > 0, ret_error))
                return -EOPNOTSUPP;
        {
                _cleanup_buf_ tend_buf b = TEND_BUF_INIT(4096);
                (void) tend_buf_addf(&b, "tend pod %s/%s", pod->namespace, pod->name);
                for (size_t i = 0; p->labels && i < p->labels->n; i++)
                        (void) tend_buf_addf(&b, "%s%s=%s", i ? "," : " (", p->labels->items[i].key,
                                             p->labels->items[i].value);
                if (p->labels && p->labels->n)
                        (void) tend_buf_adds(&b, ")");
                pod->description = tend_buf_take(&b);
                if (!pod->description)
                        return -ENOMEM;
        }

        if (!rec || !rec->log_path) {
                pod->record.log_path = rt_log_path(m->state_dir, pod->namespace, pod->name,
                                                   pod->container);
                if (!pod->record.log_path)
                        return -ENOMEM;
                r = rt__log_dir_make(m, pod->record.log_path);
                if (r < 0) {
                        *ret_error = strprintf("creating the log directory for %s: %s",
                                               pod->record.log_path, strerror(-r));
                        return r;
                }
        } else if (!(pod->record.log_path = strdup(rec->log_path)))
                return -ENOMEM;
        return 0;
}

static void release_ports(rt_pod *pod) {
        for (size_t i = 0; i < pod->record.n_ports; i++)
                if (pod->record.ports[i].leased) {
                        rt__port_release(pod->manager, pod->record.ports[i].port);
                        pod->record.ports[i].leased = false;
                }
}

/* The pod's held sockets (before a start: they go with the spawn; after an
 * adoption: taken back from the pod if tendd has none) and its notify
 * socket (before the start: the program may speak at once). */
static int held_and_notify(rt_pod *pod, const rt_pod_params *p, const rt_record *rec,
                           char **ret_error) {
        int r;

        for (size_t i = 0; i < pod->n_listen; i++) {
                r = rt__held_acquire(pod, p->socket_owner, &pod->listen[i], !!rec, i, ret_error);
                if (r < 0)
                        return r;
        }
        if (pod->notify_socket) {
                r = rt__notify_open(pod, rec ? rec->pid : 0);
                if (r < 0) {
                        *ret_error = strprintf("binding its NOTIFY_SOCKET: %s", strerror(-r));
                        return r;
                }
                if (rec) {
                        /* it said READY=1 before the restart (and will not again) */
                        _cleanup_free_ char *mark = rt__notify_ready_mark(pod->record.log_path);
                        pod->notify_ready = p->was_ready || (mark && access(mark, F_OK) == 0);
                }
        }
        return 0;
}

static int pod_begin(rt_manager *m, const rt_pod_params *p, const rt_record *rec, void *userdata,
                     rt_pod **ret, char **ret_error) {
        _cleanup_free_ char *err = NULL;
        const rt_ops *ops;
        rt_pod *pod;
        int r;

        *ret_error = NULL;
        if (m->closing)
                return -ESHUTDOWN;
        ops = rt__backend_for(p->spec->runtime_class_name);
        if (!ops || (rec && rec->backend && !streq(rec->backend, ops->name))) {
                *ret_error = strprintf(
                        "runtimeClassName \"%s\" is not available in this agent",
                        strna(spec_runtime_class_to_string(p->spec->runtime_class_name)));
                return -EOPNOTSUPP;
        }
        pod = pod_new(m, p, userdata);
        if (!pod)
                return -ENOMEM;
        pod->ops = ops;
        pod->backend = calloc(1, ops->pod_size ?: 1);
        pod->record.backend = strdup(ops->name);
        if (!pod->backend || !pod->record.backend) {
                rt__pod_unref(pod);
                return -ENOMEM;
        }
        if (ops->pod_init)
                ops->pod_init(pod);
        if (rec) {
                pod->adopted_ready = p->was_ready;
                pod->record.pid = rec->pid;
                pod->record.start_time = rec->start_time;
                pod->record.started_at = rec->started_at;
                if (rec->unit && !(pod->record.unit = strdup(rec->unit))) {
                        rt__pod_unref(pod);
                        return -ENOMEM;
                }
        }

        r = pod_prepare(pod, p, rec, &err);
        if (r >= 0 && !rec)
                r = rt__volumes_prepare(pod, p, &err);
        if (r >= 0 && !rec)
                r = held_and_notify(pod, p, rec, &err);
        if (r >= 0)
                r = rec ? ops->adopt(pod, &err) : ops->start(pod, &err);
        if (r >= 0 && rec)
                r = held_and_notify(pod, p, rec, &err);
        if (r < 0) {
                if (rec && pod->ops->detach)
                        pod->ops->detach(pod);
                release_ports(pod);
                rt__held_release(pod);
                rt__notify_close(pod);
                rt__pod_unref(pod);
                *ret_error = TAKE_PTR(err) ?: strdup(strerror(-r));
                return r;
        }
        pod_link(pod);
        r = rt__probes_start(pod, &p->spec->containers[0]);
        if (r < 0) {
                /* Without its probes the pod cannot be judged; give it up. */
                *ret_error = strprintf("starting probes: %s", strerror(-r));
                if (!rec)
                        (void) ops->signal(pod, SIGKILL);
                rt_pod_free(pod);
                return r;
        }
        *ret = pod;
        return 0;
}

int rt_pod_start(rt_manager *m, const rt_pod_params *p, void *pod_userdata, rt_pod **ret,
                 char **ret_error) {
        return pod_begin(m, p, NULL, pod_userdata, ret, ret_error);
}

int rt_pod_adopt(rt_manager *m, const rt_pod_params *p, const rt_record *r, void *pod_userdata,
                 rt_pod **ret, char **ret_error) {
        return pod_begin(m, p, r, pod_userdata, ret, ret_error);
}

int rt_pod_stop(rt_pod *pod, usec_t grace) {
        if (pod->state == RT_POD_EXITED)
                return 0;
        pod_set_state(pod, RT_POD_STOPPING, NULL);
        return pod->ops->stop(pod, grace);
}

int rt_pod_signal(rt_pod *pod, int sig) {
        if (pod->state == RT_POD_EXITED)
                return -ESRCH;
        return pod->ops->signal(pod, sig);
}

static void detach_pod(rt_pod *p) {
        rt__probes_stop(p);
        p->ops->detach(p);
}

void rt_pod_free(rt_pod *pod) {
        if (!pod || pod->freed)
                return;
        pod->freed = true;
        if (pod->state != RT_POD_EXITED && pod->uid && !pod->manager->closing &&
            (pod->manager->detached || (pod->manager->detached = tend_hashmap_new())))
                (void) tend_hashmap_put(pod->manager->detached, pod->uid, (void *) 1, NULL);
        detach_pod(pod);
        if (pod->state == RT_POD_EXITED || pod->state == RT_POD_STARTING) {
                rt__cgroup_remove(pod); /* (one left running keeps its cgroup) */
                rt__manager_reap_soon(pod->manager);
        }
        rt__times_stop(pod);
        rt__notify_close(pod);
        rt__held_release(pod);
        release_ports(pod);
        pod_unlink(pod);
        rt__pod_unref(pod);
}

const char *rt_limits_problem(rt_manager *m, const spec_pod_spec *s, char **ret) {
        const spec_container *c = s->n_containers ? &s->containers[0] : NULL;

        *ret = NULL;
        if (!c)
                return NULL;
        bool memory = c->resources.limits.memory.text && c->resources.limits.memory.value > 0,
             cpu = c->resources.limits.cpu.text && c->resources.limits.cpu.milli > 0;
        const rt_ops *ops = rt__backend_for(s->runtime_class_name);
        return ops && ops->limits_problem ? ops->limits_problem(m, memory, cpu, ret) : NULL;
}

int rt_manager_pod_usage(rt_manager *m, const char *uid, pid_t pid, uint64_t *ret_cpu_ns,
                         uint64_t *ret_memory) {
        /* (a systemd pod's record has no pid: its unit's main process) */
        for (rt_pod *p = m->pods; pid <= 0 && uid && p; p = p->next)
                if (p->ops->main_pid && streq(p->uid, uid) && p->state != RT_POD_EXITED)
                        pid = p->ops->main_pid(p);
        return rt__cgroup_usage(m, uid, pid, ret_cpu_ns, ret_memory);
}

const rt_record *rt_pod_record(const rt_pod *pod) {
        return &pod->record;
}

void *rt_pod_userdata(const rt_pod *pod) {
        return pod->userdata;
}

const char *rt_pod_name(const rt_pod *pod) {
        return pod->name;
}

const char *rt_pod_container_id(const rt_pod *pod) {
        return pod->container_id;
}

bool rt_pod_is_running(const rt_pod *pod) {
        return pod->state == RT_POD_RUNNING || pod->state == RT_POD_STOPPING;
}

bool rt_pod_ready(const rt_pod *pod) {
        return pod->ready;
}
