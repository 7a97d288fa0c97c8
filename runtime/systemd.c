/* SPDX-License-Identifier: MIT */

/*
 * The systemd backend: a pod is a transient service unit,
 * tend-<namespace>-<pod>.service in tend.slice, started and stopped over
 * sd-bus and watched through its PropertiesChanged signals.
 *
 * The bus is driven from the libuv loop (a poll on its fd, a timer for its
 * timeouts, and a prepare hook that re-arms both right before the loop
 * blocks, so that messages queued from any callback go out), and only
 * asynchronous calls are made on it — with one exception: adoption, which
 * runs once at start-up before the API listens, takes one synchronous
 * snapshot of the tend-* units (ListUnitsByPatterns).
 *
 * One match for the whole backend, not one per pod: a bus allows a
 * connection a limited number of match rules (512 on a stock system bus),
 * and a thousand pods would exceed it. The match takes every unit's
 * PropertiesChanged; a hash map from object path to pod picks ours.
 *
 * What a unit does is read from the snapshots the signals carry (each is
 * the full set of changed-emitting properties of one interface): the
 * Service interface's (MainPID, ExecMainCode, ExecMainStatus, Result)
 * arrives before the Unit interface's (ActiveState) for the same change,
 * so when ActiveState says the unit is down, the exit status is known.
 * A failed unit is then reset (ResetFailedUnit) so that failed units do not
 * pile up; a unit that ended cleanly is collected by systemd itself.
 */

#include <poll.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>

#include "rt-internal.h"

/* A systemd pod's own state (rt_pod.backend). */
typedef struct rt_sd {
        bool registered;          /* in the manager's unit map (holds a ref) */
        bool started, up;         /* reached active; seen past inactive */
        bool job_done;            /* the start job finished */
        bool refreshing_unit;     /* a GetAll of the Unit half is in flight */
        bool refresh_after_start; /* a catch-up skipped it while its start was in flight */
        char *path;               /* the unit's object path */
        char *job;                /* the start job's object path */
        struct sd_bus_slot *call;
        char *active_state, *result;
        uint32_t main_pid;
        int exec_code, exec_status;
} rt_sd;

static rt_sd *sd_of(const rt_pod *p) {
        return p->backend;
}

static void sd_pod_done(rt_pod *p) {
        rt_sd *sd = sd_of(p);
        free(sd->path);
        free(sd->job);
        free(sd->active_state);
        free(sd->result);
}

#define SD_DEST "org.freedesktop.systemd1"
#define SD_PATH "/org/freedesktop/systemd1"
#define SD_MANAGER "org.freedesktop.systemd1.Manager"
#define SD_UNIT_IFACE "org.freedesktop.systemd1.Unit"
#define SD_SERVICE_IFACE "org.freedesktop.systemd1.Service"
#define SD_UNIT_PATH "/org/freedesktop/systemd1/unit"
#define SD_SLICE "tend.slice"
#define SD_UNIT_PREFIX "tend-"
#define SD_RECONNECT_USEC (2 * USEC_PER_SEC)

/* A unit's state in the start-up snapshot (stored as the map's value). */
#define SNAP_UP ((void *) 1)
#define SNAP_INACTIVE ((void *) 2)
#define SNAP_FAILED ((void *) 3)

/* ---- unit names ------------------------------------------------------------------------------ */

/* Namespaces and pod names are DNS labels ([a-z0-9-]). The namespace's
 * dashes are escaped as systemd does (\x2d), so the first bare dash after
 * the prefix ends it: tend-default-web-7d9f-x2c4d.service, and
 * tend-my\x2dns-web-....service for namespace my-ns. Anything else outside
 * [a-zA-Z0-9_.:] is escaped too, in case. */
static int escape_part(tend_buf *b, const char *s, bool escape_dash) {
        for (; *s; s++) {
                unsigned char c = (unsigned char) *s;
                int r;
                if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == ':' || (c == '-' && !escape_dash))
                        r = tend_buf_addf(b, "%c", c);
                else
                        r = tend_buf_addf(b, "\\x%02x", c);
                if (r < 0)
                        return r;
        }
        return 0;
}

char *rt_unit_name(const char *namespace, const char *pod) {
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(512);

        if (tend_buf_adds(&b, SD_UNIT_PREFIX) < 0 || escape_part(&b, namespace, true) < 0 ||
            tend_buf_adds(&b, "-") < 0 || escape_part(&b, pod, false) < 0 ||
            tend_buf_adds(&b, ".service") < 0)
                return NULL;
        return tend_buf_take(&b);
}

int rt_unit_parse(const char *unit, char **ret_namespace, char **ret_pod) {
        const char *s = startswith(unit, SD_UNIT_PREFIX), *dash, *end;
        _cleanup_buf_ tend_buf ns = TEND_BUF_INIT(256);
        _cleanup_free_ char *pod = NULL;

        if (!s || !(end = endswith(s, ".service")) || !(dash = strchr(s, '-')) || dash >= end)
                return -EINVAL;
        for (const char *c = s; c < dash; c++) {
                unsigned v;
                if (c[0] == '\\' && c[1] == 'x' && sscanf(c + 2, "%2x", &v) == 1 && c + 3 < dash) {
                        if (tend_buf_addf(&ns, "%c", (char) v) < 0)
                                return -ENOMEM;
                        c += 3;
                } else if (tend_buf_addf(&ns, "%c", *c) < 0)
                        return -ENOMEM;
        }
        pod = strndup(dash + 1, (size_t) (end - dash - 1));
        if (!pod || ns.len == 0 || !*pod)
                return pod ? -EINVAL : -ENOMEM;
        *ret_namespace = tend_buf_take(&ns);
        if (!*ret_namespace)
                return -ENOMEM;
        *ret_pod = TAKE_PTR(pod);
        return 0;
}

/* ---- the bus on the loop --------------------------------------------------------------------- */

static void bus_rearm(rt_manager *m);
static void bus_lost(rt_manager *m, int error);
static void refresh_pod(rt_pod *p);

static void bus_process(rt_manager *m) {
        sd_bus *bus = m->bus;
        int r;

        if (!bus)
                return;
        sd_bus_ref(bus);
        do
                r = sd_bus_process(bus, NULL);
        while (r > 0 && m->bus == bus);
        if (m->bus == bus) {
                if (r < 0)
                        bus_lost(m, r);
                else
                        bus_rearm(m);
        }
        sd_bus_unref(bus);
}

static void on_bus_poll(uv_poll_t *h, int status, int events) {
        rt_manager *m = h->data;
        if (m->bus_poll == h)
                bus_process(m);
}

static void on_bus_timer(uv_timer_t *t) {
        bus_process(t->data);
}

static void on_bus_prepare(uv_prepare_t *h) {
        bus_rearm(h->data);
}

static void bus_rearm(rt_manager *m) {
        int events, uv_events = 0;
        uint64_t until;

        if (!m->bus || !m->bus_poll)
                return;
        events = sd_bus_get_events(m->bus);
        if (events < 0) {
                bus_lost(m, events);
                return;
        }
        if (events & POLLIN)
                uv_events |= UV_READABLE;
        if (events & POLLOUT)
                uv_events |= UV_WRITABLE;
        if (uv_events != m->bus_poll_events) {
                m->bus_poll_events = uv_events;
                uv_poll_start(m->bus_poll, uv_events, on_bus_poll);
        }
        if (sd_bus_get_timeout(m->bus, &until) < 0 || until == UINT64_MAX) {
                uv_timer_stop(&m->bus_timer);
                return;
        }
        /* An absolute CLOCK_MONOTONIC time; 0 means "process now". */
        usec_t now = now_monotonic();
        uint64_t ms = until > now ? (until - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC : 0;
        uv_timer_start(&m->bus_timer, on_bus_timer, ms, 0);
}

static void on_bus_handle_closed(uv_handle_t *h) {
        rt__manager_unref(h->data);
}

/* A poll handle per connection: a reconnect must not reuse one whose
 * close is still pending. */
static void on_bus_poll_closed(uv_handle_t *h) {
        rt_manager *m = h->data;
        free(h);
        rt__manager_unref(m);
}

/* The loop's handles exist once per manager; the bus may come and go. */
static void bus_handles_init(rt_manager *m) {
        if (m->bus_handles)
                return;
        m->bus_handles = true;
        uv_timer_init(m->loop, &m->bus_timer);
        m->bus_timer.data = m;
        rt__manager_ref(m);
        uv_prepare_init(m->loop, &m->bus_prepare);
        m->bus_prepare.data = m;
        rt__manager_ref(m);
        uv_prepare_start(&m->bus_prepare, on_bus_prepare);
        uv_unref((uv_handle_t *) &m->bus_prepare);
        uv_timer_init(m->loop, &m->bus_retry);
        m->bus_retry.data = m;
        rt__manager_ref(m);
        uv_unref((uv_handle_t *) &m->bus_retry);
}

static void bus_poll_close(rt_manager *m) {
        if (m->bus_poll) {
                /* Stopped before sd-bus closes the descriptor (libuv rule). */
                uv_poll_stop(m->bus_poll);
                uv_close((uv_handle_t *) m->bus_poll, on_bus_poll_closed);
                m->bus_poll = NULL;
        }
        if (m->bus_handles)
                uv_timer_stop(&m->bus_timer);
}

static void bus_slots_free(rt_manager *m) {
        m->sd_sweep = sd_bus_slot_unref(m->sd_sweep);
        m->bus_match = sd_bus_slot_unref(m->bus_match);
        m->bus_jobs = sd_bus_slot_unref(m->bus_jobs);
        m->bus_owner = sd_bus_slot_unref(m->bus_owner);
}

static void bus_close(rt_manager *m) {
        bus_poll_close(m);
        bus_slots_free(m);
        if (m->bus) {
                sd_bus_flush(m->bus);
                m->bus = sd_bus_close_unref(m->bus);
        }
}

static const char *bus_kind_name(const rt_manager *m) {
        return m->bus_kind == RT_BUS_SYSTEM ? "system" : "user";
}

static void on_bus_retry(uv_timer_t *t);

/* Whatever was missed (no bus, or systemd not answering) is read again:
 * on connect, or — the bus up — when the timer fires. */
static void bus_retry_later(rt_manager *m) {
        m->sd_stale = true;
        if (m->closing)
                return;
        bus_handles_init(m);
        if (!uv_is_active((uv_handle_t *) &m->bus_retry))
                uv_timer_start(&m->bus_retry, on_bus_retry, SD_RECONNECT_USEC / USEC_PER_MSEC, 0);
}

/* The bus went away (systemd or dbus restarted): the units keep running.
 * Reconnect, then read every watched unit's state again. */
static void bus_lost(rt_manager *m, int error) {
        log_error_errno(error, "systemd: lost the %s bus: %m; reconnecting", bus_kind_name(m));
        bus_close(m);
        bus_retry_later(m);
}

static int on_properties_changed(sd_bus_message *msg, void *userdata, sd_bus_error *error);
static int on_job_removed(sd_bus_message *msg, void *userdata, sd_bus_error *error);

/* The error says systemd is not on the bus (a bus without systemd, or one
 * that restarted before systemd joined it again): nothing to retry until
 * NameOwnerChanged says it is there. */
static bool systemd_absent(const sd_bus_error *e) {
        return sd_bus_error_has_name(e, "org.freedesktop.DBus.Error.ServiceUnknown") ||
               sd_bus_error_has_name(e, "org.freedesktop.DBus.Error.NameHasNoOwner") ||
               (e->name && startswith(e->name, "org.freedesktop.DBus.Error.Spawn."));
}

static int on_subscribed(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        rt_manager *m = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);

        if (e && systemd_absent(e)) {
                log_info("systemd: not on the %s bus; waiting for it to join", bus_kind_name(m));
                m->sd_stale = true;
                return 0;
        }
        /* Busy, refused: try again, and read what was missed. */
        if (e && !sd_bus_error_has_name(e, "org.freedesktop.systemd1.AlreadySubscribed")) {
                log_warning("systemd: Subscribe failed: %s; trying again", e->message ?: e->name);
                bus_retry_later(m);
                return 0;
        }
        m->sd_subscribed = true;
        return 0;
}

/* Without Subscribe systemd emits no unit signals at all. Not auto-started:
 * where systemd is not on the bus, D-Bus activation would hold the call
 * (or fail it, again and again); NameOwnerChanged tells when it joins. */
static void subscribe(rt_manager *m) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *msg = NULL;

        m->sd_subscribed = false;
        if (!m->bus ||
            sd_bus_message_new_method_call(m->bus, &msg, SD_DEST, SD_PATH, SD_MANAGER,
                                           "Subscribe") < 0 ||
            sd_bus_message_set_auto_start(msg, false) < 0 ||
            sd_bus_call_async(m->bus, NULL, msg, on_subscribed, m, 0) < 0) {
                log_warning("systemd: cannot subscribe to systemd's signals; trying again");
                bus_retry_later(m);
        }
}

static void bus_caught_up(rt_manager *m);

static int on_owner_changed(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        rt_manager *m = userdata;
        const char *name, *old_owner, *new_owner;

        if (sd_bus_message_read(msg, "sss", &name, &old_owner, &new_owner) < 0 ||
            !streq(name, SD_DEST))
                return 0;
        if (isempty(new_owner)) {
                log_warning("systemd: systemd left the %s bus; its units keep running",
                            bus_kind_name(m));
                m->sd_stale = true;
                return 0;
        }
        log_info("systemd: systemd is on the %s bus again; subscribing", bus_kind_name(m));
        subscribe(m);
        m->sd_stale = true;
        bus_caught_up(m);
        return 0;
}

static void bus_connected(rt_manager *m);

static int bus_connect(rt_manager *m, char **ret_error) {
        _cleanup_(sd_bus_close_unrefp) sd_bus *bus = NULL;
        const char *kind = bus_kind_name(m);
        int r, fd;

        if (m->bus)
                return 0;
        if (m->closing)
                return -ESHUTDOWN;
        if (m->bus_kind == RT_BUS_NONE) {
                if (ret_error)
                        *ret_error = strdup("the systemd runtime is disabled in this agent "
                                            "(tendd --systemd-bus none)");
                return -EOPNOTSUPP;
        }
        r = m->bus_kind == RT_BUS_SYSTEM ? sd_bus_open_system(&bus) : sd_bus_open_user(&bus);
        if (r < 0) {
                if (ret_error)
                        *ret_error = strprintf("cannot reach systemd on the %s bus: %s (tendd "
                                               "--systemd-bus user|system chooses the bus)",
                                               kind, strerror(-r));
                return r;
        }
        r = sd_bus_add_match_async(bus, &m->bus_match,
                                   "type='signal',sender='" SD_DEST "',"
                                   "interface='org.freedesktop.DBus.Properties',"
                                   "member='PropertiesChanged',path_namespace='" SD_UNIT_PATH "'",
                                   on_properties_changed, NULL, m);
        if (r >= 0)
                r = sd_bus_add_match_async(bus, &m->bus_jobs,
                                           "type='signal',sender='" SD_DEST "',"
                                           "interface='" SD_MANAGER "',member='JobRemoved',"
                                           "path='" SD_PATH "'",
                                           on_job_removed, NULL, m);
        /* systemd leaving the bus and coming back (the bus restarted
         * under it) ends and needs a subscription, like a reconnect. */
        if (r >= 0)
                r = sd_bus_add_match_async(bus, &m->bus_owner,
                                           "type='signal',sender='org.freedesktop.DBus',"
                                           "interface='org.freedesktop.DBus',"
                                           "member='NameOwnerChanged',arg0='" SD_DEST "'",
                                           on_owner_changed, NULL, m);
        fd = r >= 0 ? sd_bus_get_fd(bus) : r;
        if (fd < 0) {
                bus_slots_free(m);
                if (ret_error)
                        *ret_error = strprintf("setting up the systemd %s bus: %s", kind,
                                               strerror(-fd));
                return fd;
        }
        bus_handles_init(m);
        m->bus_poll = new0(uv_poll_t, 1);
        r = m->bus_poll ? uv_poll_init(m->loop, m->bus_poll, fd) : -ENOMEM;
        if (r < 0) {
                free(m->bus_poll);
                m->bus_poll = NULL;
                bus_slots_free(m);
                return r;
        }
        m->bus_poll->data = m;
        rt__manager_ref(m);
        m->bus_poll_events = 0;
        m->bus = TAKE_PTR(bus);
        log_debug("systemd: connected to the %s bus", kind);
        bus_connected(m);
        subscribe(m);
        bus_rearm(m);
        return 0;
}

static void sweep_orphans(rt_manager *m);

/* What happened while nobody listened is read now. Not for a pod whose
 * start is still in flight: its reply (the job) is what it waits for. */
static void bus_caught_up(rt_manager *m) {
        if (m->sd_stale) {
                m->sd_stale = false;
                log_info("systemd: reached the %s bus; reading the state of the units",
                         bus_kind_name(m));
                for (rt_pod *p = m->pods; p; p = p->next) {
                        if (p->ops != &rt_systemd_ops || !sd_of(p)->registered ||
                            p->state == RT_POD_EXITED)
                                continue;
                        if (sd_of(p)->call && !sd_of(p)->started &&
                            sd_bus_slot_get_bus(sd_of(p)->call) == m->bus) {
                                sd_of(p)->refresh_after_start = true; /* on_start_reply */
                                continue;
                        }
                        refresh_pod(p);
                }
        }
        if (m->sd_sweep_pending)
                sweep_orphans(m);
}

/* Whichever call brings the bus back (the retry timer, or a pod's start). */
static void bus_connected(rt_manager *m) {
        if (m->bus_handles)
                uv_timer_stop(&m->bus_retry);
        bus_caught_up(m);
}

static void on_bus_retry(uv_timer_t *t) {
        rt_manager *m = t->data;
        _cleanup_free_ char *err = NULL;

        if (m->closing)
                return;
        if (m->bus) {
                /* Up, but something went unanswered: ask again. */
                if (!m->sd_subscribed)
                        subscribe(m);
                bus_caught_up(m);
                return;
        }
        if (bus_connect(m, &err) < 0) {
                log_debug("systemd: %s", strna(err));
                uv_timer_start(&m->bus_retry, on_bus_retry, SD_RECONNECT_USEC / USEC_PER_MSEC, 0);
        }
}

/* The bus is chosen now and connected on first use: an agent that runs no
 * systemd pods never needs one. */
static void systemd_manager_init(rt_manager *m, const rt_config *c) {
        m->bus_kind = c->systemd_bus;
        if (m->bus_kind == RT_BUS_AUTO)
                m->bus_kind = geteuid() == 0 && sd_booted() > 0 ? RT_BUS_SYSTEM : RT_BUS_USER;
}

void rt__systemd_close(rt_manager *m) {
        bus_close(m);
        m->sd_snapshot = tend_hashmap_free(m->sd_snapshot);
        if (m->bus_handles) {
                m->bus_handles = false;
                uv_close((uv_handle_t *) &m->bus_timer, on_bus_handle_closed);
                uv_close((uv_handle_t *) &m->bus_prepare, on_bus_handle_closed);
                uv_close((uv_handle_t *) &m->bus_retry, on_bus_handle_closed);
        }
        tend_hashmap_free(m->sd_units);
        m->sd_units = NULL;
}

/* ---- pods and their units ------------------------------------------------------------------- */

static int register_pod(rt_pod *p) {
        rt_manager *m = p->manager;
        int r;

        if (!m->sd_units && !(m->sd_units = tend_hashmap_new()))
                return -ENOMEM;
        r = sd_bus_path_encode(SD_UNIT_PATH, p->record.unit, &sd_of(p)->path);
        if (r < 0)
                return r;
        r = tend_hashmap_put(m->sd_units, sd_of(p)->path, p, NULL);
        if (r < 0)
                return r;
        sd_of(p)->registered = true;
        rt__pod_ref(p);
        free(p->container_id);
        p->container_id = strprintf("systemd://%s", p->record.unit);
        return p->container_id ? 0 : -ENOMEM;
}

static void on_grace_closed(uv_handle_t *h) {
        rt__pod_unref(h->data);
}

static void unregister_pod(rt_pod *p) {
        if (!sd_of(p)->registered)
                return;
        sd_of(p)->registered = false;
        if (p->grace_timer_init) {
                p->grace_timer_init = false;
                uv_close((uv_handle_t *) &p->grace_timer, on_grace_closed);
        }
        sd_of(p)->call = sd_bus_slot_unref(sd_of(p)->call);
        tend_hashmap_remove(p->manager->sd_units, sd_of(p)->path);
        rt__pod_unref(p);
}

/* What ExecMainStatus means when systemd itself could not run the
 * program (the EXIT_* codes of systemd's exit-status.h). */
static const char *exec_step(int status) {
        switch (status) {
        case 200:
                return "changing to the working directory";
        case 203:
                return "executing the program";
        case 216:
                return "setting the group";
        case 217:
                return "setting the user";
        default:
                return NULL;
        }
}

static void report_start_error(rt_pod *p, const char *why) {
        _cleanup_free_ char *msg = NULL;
        const char *step = sd_of(p)->exec_code == CLD_EXITED ? exec_step(sd_of(p)->exec_status)
                                                             : NULL;
        rt_exit e = { .kind = RT_EXIT_START_ERROR, .reason = "StartError" };

        if (step)
                msg = strprintf("systemd could not start %s (%s): %s %s failed with status "
                                "%d; see `systemctl status %s`",
                                p->record.unit, strna(sd_of(p)->result ?: why), step, p->path ?: "",
                                sd_of(p)->exec_status, p->record.unit);
        else
                msg = strprintf("systemd could not start %s: %s", p->record.unit, why);
        e.message = msg;
        e.finished_at = now_realtime();
        e.finished_mono = now_monotonic();
        unregister_pod(p);
        rt__pod_exited(p, &e);
}

static int on_reset(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return 0; /* the unit may be gone already: nothing to do either way */
}

static void collect_unit(rt_manager *m, const char *unit) {
        if (m->bus)
                (void) sd_bus_call_method_async(m->bus, NULL, SD_DEST, SD_PATH, SD_MANAGER,
                                                "ResetFailedUnit", on_reset, NULL, "s", unit);
}

/* systemd's own exit codes (200 and up) mean it could not run the
 * program: the program itself never ran. */
static bool never_ran(const rt_pod *p) {
        return sd_of(p)->exec_code == 0 ||
               (sd_of(p)->exec_code == CLD_EXITED && sd_of(p)->exec_status >= 200 &&
                sd_of(p)->exec_status < 256);
}

/* The unit is down: say how, then forget it. */
static void report_exit(rt_pod *p) {
        rt_exit e = { .kind = RT_EXIT_UNKNOWN, .reason = "Unknown" };
        rt_manager *m = p->manager;

        /* A program that exits at once can end before the unit was ever
         * seen active: it did run, so it started, then exited. */
        if (!sd_of(p)->started && !never_ran(p)) {
                sd_of(p)->started = true;
                p->started_mono = now_monotonic();
                rt__pod_started(p);
        }
        if (!sd_of(p)->started) {
                report_start_error(p, sd_of(p)->result ?: sd_of(p)->active_state ?: "failed");
                if (streq_ptr(sd_of(p)->active_state, "failed"))
                        collect_unit(m, p->record.unit);
                return;
        }
        e.finished_at = now_realtime();
        e.finished_mono = now_monotonic();
        if (sd_of(p)->exec_code == CLD_EXITED) {
                e.kind = RT_EXIT_CODE;
                e.code = sd_of(p)->exec_status;
                e.reason = e.code == 0 ? "Completed" : "Error";
        } else if (sd_of(p)->exec_code == CLD_KILLED || sd_of(p)->exec_code == CLD_DUMPED) {
                e.kind = RT_EXIT_SIGNAL;
                e.signal = sd_of(p)->exec_status;
                e.reason = "Killed";
        }
        if (streq_ptr(sd_of(p)->active_state, "failed"))
                collect_unit(m, p->record.unit);
        unregister_pod(p);
        rt__pod_exited(p, &e);
}

/* After new properties: has the unit come up, or gone down? */
static void unit_changed(rt_pod *p) {
        const char *s = sd_of(p)->active_state;

        if (p->state == RT_POD_EXITED || !s)
                return;
        if (streq(s, "active") || streq(s, "reloading") ||
            (streq(s, "deactivating") && sd_of(p)->started)) {
                sd_of(p)->up = true;
                if (!sd_of(p)->started) {
                        sd_of(p)->started = true;
                        p->started_mono = now_monotonic();
                        if (!p->record.started_at)
                                p->record.started_at = now_realtime();
                        /* Type=notify: active only once it said READY=1 */
                        p->notify_ready = p->notify_declared_ready;
                        rt__pod_started(p);
                }
                return;
        }
        if (streq(s, "activating") || streq(s, "deactivating")) {
                sd_of(p)->up = true;
                return;
        }
        /* inactive or failed. Before the start has begun, a freshly loaded
         * unit says "inactive": that is not an end. */
        if ((streq(s, "inactive") || streq(s, "failed")) && (sd_of(p)->up || sd_of(p)->job_done))
                report_exit(p);
}

static int read_properties(rt_pod *p, sd_bus_message *msg) {
        int r;

        r = sd_bus_message_enter_container(msg, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(msg, 'e', "sv")) > 0) {
                const char *key, *s;
                int32_t i;
                uint32_t u;

                r = sd_bus_message_read(msg, "s", &key);
                if (r < 0)
                        return r;
                if (streq(key, "ActiveState")) {
                        r = sd_bus_message_read(msg, "v", "s", &s);
                        if (r >= 0)
                                r = free_and_strdup(&sd_of(p)->active_state, s);
                } else if (streq(key, "Result")) {
                        r = sd_bus_message_read(msg, "v", "s", &s);
                        if (r >= 0)
                                r = free_and_strdup(&sd_of(p)->result, s);
                } else if (streq(key, "StatusText")) {
                        /* STATUS= of a Type=notify unit (tend.io/notify) */
                        r = sd_bus_message_read(msg, "v", "s", &s);
                        if (r >= 0 && *s && !streq_ptr(s, p->notify_status)) {
                                r = free_and_strdup(&p->notify_status, s);
                                if (r >= 0 && !p->freed && p->manager->cb.status)
                                        p->manager->cb.status(p, p->notify_status,
                                                              p->manager->userdata);
                        }
                } else if (streq(key, "MainPID")) {
                        r = sd_bus_message_read(msg, "v", "u", &u);
                        if (r >= 0 && u > 0)
                                sd_of(p)->main_pid = u;
                } else if (streq(key, "ExecMainCode")) {
                        r = sd_bus_message_read(msg, "v", "i", &i);
                        if (r >= 0)
                                sd_of(p)->exec_code = i;
                } else if (streq(key, "ExecMainStatus")) {
                        r = sd_bus_message_read(msg, "v", "i", &i);
                        if (r >= 0)
                                sd_of(p)->exec_status = i;
                } else
                        r = sd_bus_message_skip(msg, "v");
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(msg);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        return sd_bus_message_exit_container(msg);
}

static int on_properties_changed(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        rt_manager *m = userdata;
        const char *path = sd_bus_message_get_path(msg), *iface;
        rt_pod *p = path && m->sd_units ? tend_hashmap_get(m->sd_units, path) : NULL;
        int r;

        if (!p)
                return 0;
        r = sd_bus_message_read(msg, "s", &iface);
        if (r < 0 || (!streq(iface, SD_UNIT_IFACE) && !streq(iface, SD_SERVICE_IFACE)))
                return 0;
        rt__pod_ref(p);
        r = read_properties(p, msg);
        if (r < 0)
                log_debug_errno(r, "systemd: %s: unreadable PropertiesChanged: %m", p->record.unit);
        else {
                log_debug("systemd: %s: %s ActiveState=%s Result=%s ExecMain=%d/%d", p->record.unit,
                          iface, strna(sd_of(p)->active_state), strna(sd_of(p)->result),
                          sd_of(p)->exec_code, sd_of(p)->exec_status);
                unit_changed(p);
        }
        rt__pod_unref(p);
        return 0;
}

/* Fills the Service half (exit status) after a job failed before the
 * properties said why; then reports. */
static int on_service_props(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        rt_pod *p = userdata;

        sd_of(p)->call = sd_bus_slot_unref(sd_of(p)->call);
        if (!sd_bus_message_is_method_error(reply, NULL))
                (void) read_properties(p, reply);
        if (p->state != RT_POD_EXITED && sd_of(p)->registered)
                report_exit(p);
        return 0;
}

static int on_job_removed(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        rt_manager *m = userdata;
        const char *job, *unit, *result;
        _cleanup_free_ char *path = NULL;
        uint32_t id;
        rt_pod *p;

        if (sd_bus_message_read(msg, "uoss", &id, &job, &unit, &result) < 0 || !m->sd_units)
                return 0;
        if (!startswith(unit, SD_UNIT_PREFIX) || sd_bus_path_encode(SD_UNIT_PATH, unit, &path) < 0)
                return 0;
        p = tend_hashmap_get(m->sd_units, path);
        if (!p || !streq_ptr(sd_of(p)->job, job))
                return 0;
        sd_of(p)->job_done = true;
        if (streq(result, "done") || p->state == RT_POD_EXITED)
                return 0;
        /* The start job failed (exec failure with Type=exec, a missing
         * user, ...). The Service properties say how; fetch them unless a
         * signal already brought them. */
        (void) free_and_strdup(&sd_of(p)->result, result);
        if (sd_of(p)->exec_code == 0 && m->bus) {
                sd_of(p)->call = sd_bus_slot_unref(sd_of(p)->call);
                if (sd_bus_call_method_async(m->bus, &sd_of(p)->call, SD_DEST, sd_of(p)->path,
                                             "org.freedesktop.DBus.Properties", "GetAll",
                                             on_service_props, p, "s", SD_SERVICE_IFACE) >= 0)
                        return 0;
        }
        report_exit(p);
        return 0;
}

/* ---- start ------------------------------------------------------------------------------------
 */

static int append_prop_s(sd_bus_message *m, const char *name, const char *v) {
        return sd_bus_message_append(m, "(sv)", name, "s", v);
}

static int append_prop_t(sd_bus_message *m, const char *name, uint64_t v) {
        return sd_bus_message_append(m, "(sv)", name, "t", v);
}

static int append_prop_strv(sd_bus_message *m, const char *name, char **l) {
        int r = sd_bus_message_open_container(m, 'r', "sv");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", name);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'v', "as");
        if (r >= 0)
                r = sd_bus_message_append_strv(m, l);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

/* The pod's volumes, at their mountPaths in the unit's own mount
 * namespace: BindReadOnlyPaths= or BindPaths=, each a(ssbt) (source,
 * destination, ignore a missing source, mount flags). */
static int append_binds(sd_bus_message *m, const rt_pod *p, bool read_only) {
        int r = sd_bus_message_open_container(m, 'r', "sv");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", read_only ? "BindReadOnlyPaths" : "BindPaths");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'v', "a(ssbt)");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "(ssbt)");
        for (size_t i = 0; i < p->n_mounts && r >= 0; i++)
                if (p->mounts[i].read_only == read_only)
                        r = sd_bus_message_append(m, "(ssbt)", p->mounts[i].src, p->mounts[i].dst,
                                                  0, (uint64_t) MS_REC);
        for (int i = 0; i < 3 && r >= 0; i++)
                r = sd_bus_message_close_container(m);
        return r;
}

static int append_exec_start(sd_bus_message *m, const char *path, char **argv) {
        int r = sd_bus_message_open_container(m, 'r', "sv");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", "ExecStart");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'v', "a(sasb)");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'a', "(sasb)");
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'r', "sasb");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", path);
        if (r >= 0)
                r = sd_bus_message_append_strv(m, argv);
        if (r >= 0)
                r = sd_bus_message_append(m, "b", 0); /* a failure is a failure */
        for (int i = 0; i < 4 && r >= 0; i++)
                r = sd_bus_message_close_container(m);
        return r;
}

static int build_start(rt_pod *p, sd_bus_message **ret) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *msg = NULL;
        char id[32];
        int r;

        r = sd_bus_message_new_method_call(p->manager->bus, &msg, SD_DEST, SD_PATH, SD_MANAGER,
                                           "StartTransientUnit");
        if (r >= 0)
                r = sd_bus_message_append(msg, "ss", p->record.unit, "fail");
        if (r >= 0)
                r = sd_bus_message_open_container(msg, 'a', "(sv)");
        if (r >= 0)
                r = append_prop_s(msg, "Description", p->description);
        /* exec: the start job fails if the program cannot be executed.
         * notify (tend.io/notify ready): the unit is active, and the pod
         * started and ready, once it says READY=1 — however long that
         * takes: the rollout's progress deadline judges that, not a start
         * timeout. */
        if (r >= 0)
                r = append_prop_s(msg, "Type", p->notify_declared_ready ? "notify" : "exec");
        if (r >= 0 && p->notify_declared_ready)
                r = append_prop_t(msg, "TimeoutStartUSec", UINT64_MAX);
        /* any process of the unit may speak for it, as a process pod's
         * session may; WATCHDOG=1 missed: systemd stops it (SIGABRT) */
        if (r >= 0 && (p->notify_declared_ready || p->notify_watchdog))
                r = append_prop_s(msg, "NotifyAccess", "all");
        if (r >= 0 && p->notify_watchdog)
                r = append_prop_t(msg, "WatchdogUSec", p->notify_watchdog);
        if (r >= 0)
                r = append_exec_start(msg, p->path, p->argv);
        /* Units inherit the manager's whole environment otherwise. */
        if (r >= 0)
                r = append_prop_strv(msg, "Environment", p->envp);
        if (r >= 0 && p->working_dir)
                r = append_prop_s(msg, "WorkingDirectory", p->working_dir);
        if (r >= 0 && p->set_ids) {
                snprintf(id, sizeof id, "%u", (unsigned) p->uid_n);
                r = append_prop_s(msg, "User", id);
                snprintf(id, sizeof id, "%u", (unsigned) p->gid_n);
                if (r >= 0)
                        r = append_prop_s(msg, "Group", id);
        }
        /* TERM to the main process, KILL to all that is left after the
         * grace period; and never a restart behind tend's back. */
        if (r >= 0)
                r = append_prop_s(msg, "KillMode", "mixed");
        if (r >= 0)
                r = append_prop_t(msg, "TimeoutStopUSec", p->grace);
        if (r >= 0)
                r = append_prop_s(msg, "Restart", "no");
        if (r >= 0)
                r = append_prop_s(msg, "StandardInput", "null");
        if (r >= 0)
                r = append_prop_s(msg, "StandardOutputFileToAppend", p->record.log_path);
        if (r >= 0)
                r = append_prop_s(msg, "StandardErrorFileToAppend", p->record.log_path);
        if (r >= 0)
                r = append_prop_s(msg, "Slice", SD_SLICE);
        if (r >= 0 && p->memory_max > 0)
                r = append_prop_t(msg, "MemoryMax", p->memory_max);
        /* millicores → CPU time per second: 500m = 0.5 s/s = 50 %. */
        if (r >= 0 && p->cpu_milli > 0)
                r = append_prop_t(msg, "CPUQuotaPerSecUSec", p->cpu_milli * USEC_PER_MSEC);
        for (int ro = 0; ro < 2 && r >= 0 && p->n_mounts > 0; ro++)
                r = append_binds(msg, p, ro);
        if (r >= 0)
                r = sd_bus_message_close_container(msg);
        if (r >= 0)
                r = sd_bus_message_append(msg, "a(sa(sv))", 0);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(msg);
        return 0;
}

static int on_start_reply(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        rt_pod *p = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        const char *job;

        sd_of(p)->call = sd_bus_slot_unref(sd_of(p)->call);
        if (p->state == RT_POD_EXITED)
                return 0;
        if (e) {
                _cleanup_free_ char *why = strprintf(
                        "%s%s", e->message ?: e->name,
                        sd_bus_error_has_name(e, "org.freedesktop.systemd1.UnitExists")
                                ? " (a unit of that name is still loaded)"
                                : "");
                report_start_error(p, why ?: "StartTransientUnit failed");
                return 0;
        }
        if (sd_bus_message_read(reply, "o", &job) >= 0)
                (void) free_and_strdup(&sd_of(p)->job, job);
        if (sd_of(p)->refresh_after_start) {
                /* A catch-up came while the start was in flight. */
                sd_of(p)->refresh_after_start = false;
                refresh_pod(p);
        }
        return 0;
}

static pid_t systemd_main_pid(const rt_pod *p) {
        return p->backend ? (pid_t) sd_of(p)->main_pid : 0;
}

/* Whether the manager tend talks to can enforce a unit's MemoryMax= and
 * CPUQuota= on this host's cgroup layout (docs/cgroups.md): where it
 * cannot, systemd takes the properties and ignores them, as a user manager
 * does on cgroup v1 (it is given no v1 controller). Decided from the
 * layout and the manager's kind, without the bus: a pod is refused when
 * applied, not started unlimited. */
static const char *systemd_limits_problem(rt_manager *m, bool memory, bool cpu, char **ret) {
        const char *what = memory ? "memory" : "cpu";
        bool user = m->bus_kind != RT_BUS_SYSTEM;

        *ret = NULL;
        if ((!memory && !cpu) || m->bus_kind == RT_BUS_NONE)
                return NULL; /* (no systemd pod starts at all: said at start) */
        if (!rt__cgroup_v2_host()) {
                const char *missing = NULL;
                if (user) {
                        *ret = strprintf("limits.%s cannot be enforced by systemd's user manager "
                                         "on this host's cgroup v1 layout (systemd gives a user "
                                         "manager no v1 controller, and ignores MemoryMax= and "
                                         "CPUQuota= there): leave runtimeClassName unset (a "
                                         "process pod, in a cgroup of tendd's), or use the system "
                                         "manager (tendd --systemd-bus system, as root)",
                                         what);
                        return *ret;
                }
                if (memory && access("/sys/fs/cgroup/memory/memory.limit_in_bytes", F_OK) < 0)
                        missing = "memory";
                else if (cpu && access("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", F_OK) < 0)
                        missing = "cpu";
                if (missing)
                        *ret = strprintf("limits.%s cannot be enforced: no cgroup v1 hierarchy "
                                         "of the %s controller at /sys/fs/cgroup/%s",
                                         missing, missing, missing);
                return *ret;
        }
        /* v2: the controllers the manager's own cgroup has */
        _cleanup_free_ char *dir = user ? strprintf("/sys/fs/cgroup/user.slice/user-%u.slice/"
                                                    "user@%u.service",
                                                    (unsigned) geteuid(), (unsigned) geteuid())
                                        : strdup("/sys/fs/cgroup"),
                            *path = dir ? strprintf("%s/cgroup.controllers", dir) : NULL,
                            *text = NULL;
        if (!path)
                return NULL;
        if (read_full_file(path, 4096, &text, NULL) < 0) {
                *ret = strprintf("limits.%s cannot be enforced: the cgroup of systemd's %s "
                                 "manager (%s) is not there to say which controllers it has",
                                 what, user ? "user" : "system", dir);
                return *ret;
        }
        text[strcspn(text, "\n")] = 0;
        if (memory && !rt__has_word(text, "memory", ' '))
                what = "memory";
        else if (cpu && !rt__has_word(text, "cpu", ' '))
                what = "cpu";
        else
                return NULL;
        *ret = strprintf("limits.%s cannot be enforced: systemd's %s manager was not given the "
                         "%s controller (%s has \"%s\")%s",
                         what, user ? "user" : "system", what, path, text,
                         user ? ": user@.service's Delegate= gives it" : "");
        return *ret;
}

static int systemd_start(rt_pod *p, char **ret_error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *msg = NULL;
        int r;

        r = bus_connect(p->manager, ret_error);
        if (r < 0)
                return r;
        p->record.unit = rt_unit_name(p->namespace, p->name);
        if (!p->record.unit)
                return -ENOMEM;
        /* The match is in place (one for all units) before the start. */
        r = register_pod(p);
        if (r >= 0)
                r = build_start(p, &msg);
        if (r >= 0)
                r = sd_bus_call_async(p->manager->bus, &sd_of(p)->call, msg, on_start_reply, p, 0);
        if (r < 0) {
                *ret_error = strprintf("starting %s: %s", p->record.unit, strerror(-r));
                unregister_pod(p);
                return r;
        }
        p->record.started_at = now_realtime();
        /* Probes count their initial delay from here; `started` (the
         * unit active) comes a few milliseconds later. */
        p->started_mono = now_monotonic();
        return 0;
}

/* ---- adopt --------------------------------------------------------------------------------- */

/* The tend-* units and their ActiveState, from one synchronous call. Only
 * at start-up (adoption), before the API serves anyone. */
static int load_snapshot(rt_manager *m, char **ret_error) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        const char *name, *active;
        int r;

        if (m->sd_snapshot && now_monotonic() < m->sd_snapshot_at + 5 * USEC_PER_SEC)
                return 0;
        if (!m->bus && m->sd_stale && m->bus_kind != RT_BUS_NONE) {
                /* Tried already: the retry timer tries again. */
                if (ret_error)
                        *ret_error = strprintf("the systemd %s bus is not reachable",
                                               bus_kind_name(m));
                return -ENOTCONN;
        }
        r = bus_connect(m, ret_error);
        if (r < 0)
                return r;
        m->sd_snapshot = tend_hashmap_free(m->sd_snapshot);
        r = sd_bus_call_method(m->bus, SD_DEST, SD_PATH, SD_MANAGER, "ListUnitsByPatterns", &error,
                               &reply, "asas", 0, 1, SD_UNIT_PREFIX "*");
        if (r < 0) {
                if (ret_error)
                        *ret_error = strprintf("listing the tend-* units: %s",
                                               error.message ?: strerror(-r));
                return r;
        }
        m->sd_snapshot = tend_hashmap_new();
        if (!m->sd_snapshot)
                return -ENOMEM;
        r = sd_bus_message_enter_container(reply, 'a', "(ssssssouso)");
        while (r >= 0 && (r = sd_bus_message_read(reply, "(ssssssouso)", &name, NULL, NULL, &active,
                                                  NULL, NULL, NULL, NULL, NULL, NULL)) > 0) {
                void *v = streq(active, "failed")     ? SNAP_FAILED
                          : streq(active, "inactive") ? SNAP_INACTIVE
                                                      : SNAP_UP;
                if (tend_hashmap_put(m->sd_snapshot, name, v, NULL) < 0)
                        return -ENOMEM;
        }
        m->sd_snapshot_at = now_monotonic();
        bus_rearm(m);
        return r < 0 ? r : 0;
}

/* Both interfaces' properties, once: after adoption and after a
 * reconnect, what the signals would have said. */
static int on_unit_props(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        rt_pod *p = userdata;

        sd_of(p)->call = sd_bus_slot_unref(sd_of(p)->call);
        if (p->state == RT_POD_EXITED || !sd_of(p)->registered)
                return 0;
        if (sd_bus_message_is_method_error(reply, NULL)) {
                /* systemd answers for a unit that is gone (not-found,
                 * inactive); an error means systemd did not answer at all
                 * (it is not on the bus): nothing is known, so nothing
                 * changes until it is back. */
                const sd_bus_error *e = sd_bus_message_get_error(reply);
                log_debug("systemd: %s: cannot read its state: %s", p->record.unit,
                          e->message ?: e->name);
                sd_of(p)->refreshing_unit = false;
                if (systemd_absent(e))
                        p->manager->sd_stale = true; /* NameOwnerChanged brings the re-read */
                else
                        bus_retry_later(p->manager);
                return 0;
        } else
                (void) read_properties(p, reply);
        if (!sd_of(p)->refreshing_unit) {
                /* Service half read; now the Unit half, which decides. */
                sd_of(p)->refreshing_unit = true;
                if (p->manager->bus &&
                    sd_bus_call_method_async(p->manager->bus, &sd_of(p)->call, SD_DEST,
                                             sd_of(p)->path, "org.freedesktop.DBus.Properties",
                                             "GetAll", on_unit_props, p, "s", SD_UNIT_IFACE) >= 0)
                        return 0;
        }
        sd_of(p)->refreshing_unit = false;
        unit_changed(p);
        return 0;
}

static void refresh_pod(rt_pod *p) {
        sd_of(p)->call = sd_bus_slot_unref(sd_of(p)->call);
        sd_of(p)->refreshing_unit = false;
        if (!p->manager->bus) {
                p->manager->sd_stale = true; /* read on connect */
                return;
        }
        if (sd_bus_call_method_async(p->manager->bus, &sd_of(p)->call, SD_DEST, sd_of(p)->path,
                                     "org.freedesktop.DBus.Properties", "GetAll", on_unit_props, p,
                                     "s", SD_SERVICE_IFACE) < 0)
                log_warning("systemd: %s: cannot read its state", p->record.unit);
}

static int systemd_adopt(rt_pod *p, char **ret_error) {
        rt_manager *m = p->manager;
        void *state;
        int r;

        if (!p->record.unit) {
                *ret_error = strdup("the record names no unit");
                return -EINVAL;
        }
        r = load_snapshot(m, ret_error);
        if (r == -ENOMEM || r == -EOPNOTSUPP)
                return r;
        if (r < 0) {
                /* Not knowing is not knowing it is gone: a unit outlives
                 * the bus. The pod is kept and its unit read once the bus
                 * is back (a unit gone by then makes it a lost pod) —
                 * marking it lost now would run a second copy of it. */
                log_warning("systemd: %s: cannot be checked now (%s); kept, and checked once the "
                            "bus is back",
                            p->record.unit, strna(*ret_error));
                free(*ret_error);
                *ret_error = NULL;
                bus_retry_later(m);
                state = SNAP_UP;
        } else
                state = tend_hashmap_get(m->sd_snapshot, p->record.unit);
        if (!state) {
                *ret_error = strprintf("unit %s is gone", p->record.unit);
                return -ESRCH;
        }
        if (state != SNAP_UP) {
                *ret_error = strprintf("unit %s stopped (%s) while tendd was down", p->record.unit,
                                       state == SNAP_FAILED ? "failed" : "inactive");
                if (state == SNAP_FAILED) /* reset before the sweep lists the units */
                        collect_unit(m, p->record.unit);
                return -ESRCH;
        }
        r = register_pod(p);
        if (r < 0) {
                *ret_error = strprintf("watching %s: %s", p->record.unit, strerror(-r));
                unregister_pod(p);
                return r;
        }
        {
                usec_t now = now_realtime(), mono = now_monotonic();
                usec_t age = p->record.started_at && now > p->record.started_at
                                     ? now - p->record.started_at
                                     : 0;
                p->started_mono = mono > age ? mono - age : 0;
        }
        sd_of(p)->started = sd_of(p)->up = true;
        rt__pod_started(p);
        /* The match is installed: whatever happens from here is seen, and
         * this read closes the gap since the snapshot (and learns MainPID). */
        refresh_pod(p);
        return 0;
}

int rt__find_unit(rt_manager *m, const char *namespace, const char *pod, rt_record *ret) {
        _cleanup_free_ char *unit = rt_unit_name(namespace, pod);
        int r;

        if (!unit)
                return -ENOMEM;
        r = load_snapshot(m, NULL);
        if (r == -ENOMEM)
                return r;
        /* Unknown (no bus): the unit may run; adopting it by name is
         * checked later, while starting a second one could not be undone. */
        if (r == -EOPNOTSUPP || (r >= 0 && tend_hashmap_get(m->sd_snapshot, unit) != SNAP_UP))
                return -ESRCH;
        *ret = (rt_record){ .backend = strdup("systemd"), .unit = TAKE_PTR(unit) };
        if (!ret->backend) {
                rt_record_done(ret);
                return -ENOMEM;
        }
        return 0;
}

/* No pod in the userdata: a floating call may outlive it. */
static int on_stop_reply(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        const sd_bus_error *e = sd_bus_message_get_error(reply);

        if (e && !sd_bus_error_has_name(e, "org.freedesktop.systemd1.NoSuchUnit"))
                log_warning("systemd: StopUnit: %s", e->message ?: e->name);
        return 0;
}

static bool unowned(rt_manager *m, const char *name) {
        _cleanup_free_ char *path = NULL;

        if (sd_bus_path_encode(SD_UNIT_PATH, name, &path) < 0)
                return false;
        return !m->sd_units || !tend_hashmap_get(m->sd_units, path);
}

/* A unit that runs (or is coming up) with no pod to answer for it. A
 * failed one with no pod (it failed while no tendd watched, say one that
 * ignored SIGTERM after tendd --stop-pods-on-exit was told twice to go)
 * is only reset, so that failed units do not pile up. */
static bool is_orphan(rt_manager *m, const char *name, const char *active) {
        if (streq(active, "failed") && unowned(m, name)) {
                log_info("systemd: %s failed with no pod to report it; resetting it", name);
                collect_unit(m, name);
                return false;
        }
        if (!streq(active, "active") && !streq(active, "activating") && !streq(active, "reloading"))
                return false;
        return unowned(m, name);
}

static int stop_orphan(rt_manager *m, const char *name) {
        log_warning("systemd: %s runs with no pod record; stopping it", name);
        return sd_bus_call_method_async(m->bus, NULL, SD_DEST, SD_PATH, SD_MANAGER, "StopUnit",
                                        on_stop_reply, NULL, "ss", name, "replace");
}

static int on_sweep_listed(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        rt_manager *m = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        const char *name, *active;
        int r;

        m->sd_sweep = sd_bus_slot_unref(m->sd_sweep);
        if (e && systemd_absent(e))
                return 0; /* still pending: NameOwnerChanged brings it */
        if (e) {
                log_warning("systemd: listing the tend-* units: %s; trying again",
                            e->message ?: e->name);
                bus_retry_later(m);
                return 0;
        }
        m->sd_sweep_pending = false;
        r = sd_bus_message_enter_container(reply, 'a', "(ssssssouso)");
        while (r >= 0 && (r = sd_bus_message_read(reply, "(ssssssouso)", &name, NULL, NULL, &active,
                                                  NULL, NULL, NULL, NULL, NULL, NULL)) > 0)
                if (is_orphan(m, name, active) && stop_orphan(m, name) >= 0 && m->cb.orphan_stopped)
                        m->cb.orphan_stopped(name, m->userdata);
        return 0;
}

/* After start-up adoption (or, where the bus was away, once it is back):
 * every pod is registered by then, adopted ones as well as those started
 * since, which register before their start is sent. */
static void sweep_orphans(rt_manager *m) {
        if (m->sd_sweep || !m->bus)
                return;
        if (sd_bus_call_method_async(m->bus, &m->sd_sweep, SD_DEST, SD_PATH, SD_MANAGER,
                                     "ListUnitsByPatterns", on_sweep_listed, m, "asas", 0, 1,
                                     SD_UNIT_PREFIX "*") < 0)
                log_warning("systemd: cannot list the tend-* units; units with no pod are not "
                            "stopped");
}

void rt__sweep_orphan_units(rt_manager *m) {
        if (m->bus_kind == RT_BUS_NONE)
                return;
        /* Start-up is over: later adoptions (there are none) would list again. */
        m->sd_snapshot = tend_hashmap_free(m->sd_snapshot);
        m->sd_sweep_pending = true;
        if (m->bus || (!m->sd_stale && bus_connect(m, NULL) >= 0)) {
                sweep_orphans(m);
                return;
        }
        /* Later, when the bus is back — where there were units to adopt.
         * Where there were none, it is most likely a host without
         * systemd, and no unit is ours to sweep. */
        if (!m->sd_units || tend_hashmap_size(m->sd_units) == 0) {
                m->sd_sweep_pending = false;
                return;
        }
        log_warning("systemd: the %s bus is not reachable; tend-* units with no pod will be "
                    "stopped once it is",
                    bus_kind_name(m));
        bus_retry_later(m);
}

/* ---- stop, signal, detach -------------------------------------------------------------------- */

static int systemd_signal(rt_pod *p, int sig);

static void on_grace_timeout(uv_timer_t *t) {
        if (rt__grace_not_yet(t->data, on_grace_timeout))
                return;
        (void) systemd_signal(t->data, SIGKILL);
}

static int systemd_stop(rt_pod *p, usec_t grace) {
        sd_bus *bus = p->manager->bus;
        int r;

        if (!sd_of(p)->registered)
                return 0;
        if (!bus)
                return -ENOTCONN; /* retried by the caller */
        /* systemd kills after the unit's TimeoutStopUSec (the grace period
         * at start); a transient unit's cannot be changed later, so a
         * shorter grace (a deletion's) is kept by our own timer. */
        if (grace < p->grace) {
                if (!p->grace_timer_init) {
                        uv_timer_init(p->manager->loop, &p->grace_timer);
                        p->grace_timer.data = rt__pod_ref(p);
                        p->grace_timer_init = true;
                }
                rt__grace_arm(p, grace, on_grace_timeout);
        }
        r = sd_bus_call_method_async(bus, NULL, SD_DEST, SD_PATH, SD_MANAGER, "StopUnit",
                                     on_stop_reply, NULL, "ss", p->record.unit, "replace");
        return r < 0 ? r : 0;
}

static int systemd_signal(rt_pod *p, int sig) {
        sd_bus *bus = p->manager->bus;

        if (!sd_of(p)->registered)
                return -ESRCH;
        if (!bus)
                return -ENOTCONN;
        int r = sd_bus_call_method_async(bus, NULL, SD_DEST, SD_PATH, SD_MANAGER, "KillUnit",
                                         on_reset, NULL, "ssi", p->record.unit, "all", sig);
        return r < 0 ? r : 0;
}

static void systemd_detach(rt_pod *p) {
        unregister_pod(p);
}

static int systemd_find(rt_manager *m, const rt_pod_params *p, rt_record *ret) {
        return rt__find_unit(m, p->namespace, p->name, ret);
}

const rt_ops rt_systemd_ops = {
        .name = "systemd",
        .pod_size = sizeof(rt_sd),
        .pod_done = sd_pod_done,
        .manager_init = systemd_manager_init,
        .manager_close = rt__systemd_close,
        .start = systemd_start,
        .stop = systemd_stop,
        .signal = systemd_signal,
        .adopt = systemd_adopt,
        .detach = systemd_detach,
        .find = systemd_find,
        .sweep_orphans = rt__sweep_orphan_units,
        .limits_problem = systemd_limits_problem,
        .main_pid = systemd_main_pid,
};
