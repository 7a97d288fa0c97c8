/* SPDX-License-Identifier: MIT */

/*
 * tendd: the agent. Keeps the deployments of its store true, serves the
 * API on a unix socket (and optionally loopback TCP), and on SIGTERM or
 * SIGINT stops serving, commits, and exits leaving its pods running: the
 * next tendd adopts them.
 */

#include <getopt.h>
#include <grp.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdio.h>

#include <systemd/sd-daemon.h>

#include "agent-loop.h"
#include "tend/api.h"
#include "fleet-api.h"
#include "manifest-dir.h"

static bool stop_pods_on_exit; /* --stop-pods-on-exit */

typedef struct args {
        char *state_dir;
        char *socket;
        char *listen;
        char *token_file;
        char *tls_cert, *tls_key;
        char *socket_group;
        char *manifests;
        uint16_t port_lo, port_hi;
        usec_t resync;
        usec_t idle_timeout;
        rt_bus bus;
        rt_cgroups cgroups;
        char **fleet; /* etcd endpoints */
        char *node_name;
        json_t *node_labels;
        char *etcd_prefix;
        int64_t lease_ttl;
        usec_t lost_after;
        bool has_lost_after;
        usec_t compaction;
        bool has_compaction;
        char *etcd_ca, *etcd_cert, *etcd_key, *etcd_user, *etcd_password_file;
        bool no_leader;
} args;

/* A secret from a file only its owner may read (a token, a password),
 * without the line end; at least min characters. Says what is wrong. */
static int read_secret(const char *path, const char *flag, size_t min, char **ret) {
        _cleanup_free_ char *data = NULL;
        struct stat st;
        size_t n;
        int r;

        if (stat(path, &st) == 0 && (st.st_mode & S_IROTH)) {
                log_error("%s %s can be read by every user (mode %04o): chmod o-r %s", flag, path,
                          (unsigned) (st.st_mode & 07777), path);
                return -EACCES;
        }
        r = read_full_file(path, 4096, &data, &n);
        if (r < 0)
                return log_error_errno(r, "%s %s: %m", flag, path);
        while (n > 0 && (data[n - 1] == '\n' || data[n - 1] == '\r' || data[n - 1] == ' '))
                data[--n] = 0;
        /* What is used is the string: a NUL would cut it (a file that began
         * with one made the empty token valid), a control character would
         * not survive an HTTP header. */
        for (size_t i = 0; i < n; i++)
                if ((unsigned char) data[i] < 0x20 || data[i] == 0x7f) {
                        log_error("%s %s: byte %zu is a control character (0x%02x): a secret is "
                                  "printable text",
                                  flag, path, i, (unsigned) (unsigned char) data[i]);
                        return -EINVAL;
                }
        if (n < min) {
                log_error("%s %s: it must hold at least %zu character%s", flag, path, min,
                          min == 1 ? "" : "s");
                return -EINVAL;
        }
        *ret = TAKE_PTR(data);
        return 0;
}

static void args_done(args *a) {
        strv_free(a->fleet);
        json_decref(a->node_labels);
}

/* "http://a:2379,http://b:2379" → a NULL-terminated list. */
static int parse_endpoints(const char *s, char ***ret) {
        _cleanup_strv_free_ char **l = NULL;
        _cleanup_free_ char *copy = strdup(s);
        size_t n = 0;
        char *save = NULL;

        if (!copy)
                return -ENOMEM;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                char **nl;
                if (!startswith(t, "http://") && !startswith(t, "https://")) {
                        fprintf(stderr,
                                "tendd: --fleet %s: \"%s\" is not an etcd client URL: expected "
                                "http://HOST:PORT (or https://), e.g. "
                                "http://127.0.0.1:2379,http://10.0.0.2:2379\n",
                                s, t);
                        return -EINVAL;
                }
                nl = reallocarray(l, n + 2, sizeof(char *));
                if (!nl)
                        return -ENOMEM;
                l = nl;
                if (!(l[n] = strdup(t)))
                        return -ENOMEM;
                l[++n] = NULL;
        }
        if (n == 0) {
                fprintf(stderr, "tendd: --fleet: expected etcd client URLs, e.g. "
                                "http://127.0.0.1:2379\n");
                return -EINVAL;
        }
        strv_free(*ret);
        *ret = TAKE_PTR(l);
        return 0;
}

/* "zone=a,disk=ssd" → {"zone": "a", "disk": "ssd"}, each checked as
 * Kubernetes checks labels. */
static int parse_labels(const char *s, json_t **ret) {
        _cleanup_(json_decrefp) json_t *o = json_object();
        _cleanup_free_ char *copy = strdup(s);
        char *save = NULL;

        if (!o || !copy)
                return -ENOMEM;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                char *eq = strchr(t, '=');
                _cleanup_free_ char *problem = NULL;
                if (!eq) {
                        fprintf(stderr,
                                "tendd: --node-labels %s: \"%s\" is not KEY=VALUE (e.g. "
                                "zone=a,disk=ssd)\n",
                                s, t);
                        return -EINVAL;
                }
                *eq = 0;
                problem = spec_label_problem(t, eq + 1);
                if (problem) {
                        fprintf(stderr, "tendd: --node-labels %s: %s\n", s, problem);
                        return -EINVAL;
                }
                if (startswith(t, "kubernetes.io/")) {
                        fprintf(stderr,
                                "tendd: --node-labels %s: %s is tendd's to set (the node's "
                                "host name, OS and architecture)\n",
                                s, t);
                        return -EINVAL;
                }
                json_object_set_new(o, t, json_string(eq + 1));
        }
        json_decref(*ret);
        *ret = TAKE_PTR(o);
        return 0;
}

static void usage(FILE *f) {
        fprintf(f,
                "Usage: tendd [OPTIONS]\n\n"
                "The tend agent: runs the pods of the Deployments it is given as local\n"
                "processes and keeps them as declared. `tend` talks to it.\n\n"
                "Options:\n"
                "  --state-dir DIR          database and pod logs (default: /var/lib/tend as\n"
                "                           root, else $XDG_STATE_HOME/tend)\n"
                "  --socket PATH            API socket (default: /run/tend/tend.sock as root,\n"
                "                           else $XDG_RUNTIME_DIR/tend/tend.sock)\n"
                "  --socket-group GROUP     members of GROUP may use the socket too\n"
                "  --listen 127.0.0.1:PORT  also serve the API over HTTPS on TCP, to clients\n"
                "                           with the bearer token: loopback (127.0.0.0/8)\n"
                "                           with a CA and certificate tendd makes in the\n"
                "                           state dir, any address with --tls-cert/--tls-key.\n"
                "                           `tend kubeconfig` prints what kubectl needs\n"
                "  --token-file FILE        the bearer token (default: one made in\n"
                "                           STATE_DIR/tls/token)\n"
                "  --tls-cert FILE          the listener's certificate (PEM, chain allowed)\n"
                "  --tls-key FILE           and its key (PEM)\n"
                "  --manifests DIR          keep DIR's *.yaml, *.yml, *.json applied: on\n"
                "                           start, on change, on SIGHUP and every resync\n"
                "                           (30s unless --resync); the files are the\n"
                "                           declaration\n"
                "  --port-range LO-HI       leased pod ports (default %d-%d)\n"
                "  --resync DURATION        full reconcile period (default 5min)\n"
                "  --idle-timeout DURATION  close an API connection idle this long (default\n"
                "                           30s; watches and logs -f are not idle)\n"
                "  --systemd-bus BUS        user, system or none: where pods with\n"
                "                           runtimeClassName: systemd run (default: system\n"
                "                           as root on a systemd host, else user)\n"
                "  --cgroups auto|off       auto (default): each process pod in a cgroup\n"
                "                           of its own, its resources.limits enforced\n"
                "                           there, where tendd can make one (root); off:\n"
                "                           none, and pods that declare limits refused\n"
                "  --node-name NAME         this node's name: pods' spec.nodeName, and its\n"
                "                           name in a fleet (default: the host name)\n"
                "  --fleet URL[,URL...]     join the fleet kept in this etcd (its client URLs,\n"
                "                           http://HOST:PORT): the node is registered with\n"
                "                           its labels, Ready while this tendd holds its\n"
                "                           lease; `tend get nodes` lists the fleet, `tend\n"
                "                           cordon` marks a node unschedulable; the\n"
                "                           deployments are the fleet's, its leader places\n"
                "                           their pods on the nodes\n"
                "  --node-labels K=V,...    the node's labels in the fleet\n"
                "  --etcd-prefix PREFIX     the fleet's keys in etcd (default /tend)\n"
                "  --etcd-cacert FILE       the CA of etcd's certificate (https:// URLs;\n"
                "                           default: the system's CAs)\n"
                "  --etcd-cert FILE         a client certificate for etcd (PEM)\n"
                "  --etcd-key FILE          and its key (PEM)\n"
                "  --etcd-user NAME         etcd's authentication: this user, with the\n"
                "  --etcd-password-file FILE  password in FILE (not readable by others)\n"
                "  --no-leader              never lead the fleet (another node will)\n"
                "  --lease-ttl DURATION     the node's lease: it counts as gone this long\n"
                "                           after its tendd stops renewing it (default 10s,\n"
                "                           at least 2s)\n"
                "  --node-lost-after DURATION  a node without its lease this long has its\n"
                "                           pods replaced on other nodes (default 10s; the\n"
                "                           leader holds back while >= 55%% are lost at once)\n"
                "  --etcd-compaction-interval DURATION  the leader compacts etcd's history\n"
                "                           this often, to the revision of one interval\n"
                "                           ago, as kube-apiserver does (default 5m; 0:\n"
                "                           never, when something else compacts etcd)\n"
                "  --stop-pods-on-exit      on SIGTERM, stop every pod (each with its grace\n"
                "                           period) before exiting, instead of leaving them\n"
                "                           running for the next tendd to adopt\n"
                "  --log-level LEVEL        err, warning, notice, info (default), debug\n"
                "  -h, --help               this help\n"
                "      --version            the version\n\n"
                "Stopping tendd (SIGTERM, SIGINT) leaves the pods running; the next tendd\n"
                "on the same state dir adopts them. Under systemd (Type=notify) it reports\n"
                "READY=1 once the pods are adopted and the API listens, and pets the\n"
                "watchdog from its loop.\n",
                RT_PORT_RANGE_LO, RT_PORT_RANGE_HI);
}

static int parse_args(int argc, char **argv, args *a) {
        enum {
                OPT_STATE = 256,
                OPT_SOCKET,
                OPT_LISTEN,
                OPT_TOKEN,
                OPT_GROUP,
                OPT_PORTS,
                OPT_RESYNC,
                OPT_LOG,
                OPT_BUS,
                OPT_CGROUPS,
                OPT_STOP_PODS,
                OPT_MANIFESTS,
                OPT_IDLE,
                OPT_TLS_CERT,
                OPT_TLS_KEY,
                OPT_FLEET,
                OPT_NODE_NAME,
                OPT_NODE_LABELS,
                OPT_ETCD_PREFIX,
                OPT_LEASE_TTL,
                OPT_NODE_LOST_AFTER,
                OPT_COMPACTION,
                OPT_ETCD_CA,
                OPT_ETCD_CERT,
                OPT_ETCD_KEY,
                OPT_ETCD_USER,
                OPT_ETCD_PASSWORD,
                OPT_NO_LEADER,
                OPT_VERSION
        };
        static const struct option options[] = {
                { "state-dir", required_argument, NULL, OPT_STATE },
                { "socket", required_argument, NULL, OPT_SOCKET },
                { "listen", required_argument, NULL, OPT_LISTEN },
                { "token-file", required_argument, NULL, OPT_TOKEN },
                { "tls-cert", required_argument, NULL, OPT_TLS_CERT },
                { "tls-key", required_argument, NULL, OPT_TLS_KEY },
                { "socket-group", required_argument, NULL, OPT_GROUP },
                { "port-range", required_argument, NULL, OPT_PORTS },
                { "resync", required_argument, NULL, OPT_RESYNC },
                { "idle-timeout", required_argument, NULL, OPT_IDLE },
                { "log-level", required_argument, NULL, OPT_LOG },
                { "systemd-bus", required_argument, NULL, OPT_BUS },
                { "cgroups", required_argument, NULL, OPT_CGROUPS },
                { "stop-pods-on-exit", no_argument, NULL, OPT_STOP_PODS },
                { "manifests", required_argument, NULL, OPT_MANIFESTS },
                { "fleet", required_argument, NULL, OPT_FLEET },
                { "node-name", required_argument, NULL, OPT_NODE_NAME },
                { "node-labels", required_argument, NULL, OPT_NODE_LABELS },
                { "etcd-prefix", required_argument, NULL, OPT_ETCD_PREFIX },
                { "lease-ttl", required_argument, NULL, OPT_LEASE_TTL },
                { "node-lost-after", required_argument, NULL, OPT_NODE_LOST_AFTER },
                { "etcd-compaction-interval", required_argument, NULL, OPT_COMPACTION },
                { "etcd-cacert", required_argument, NULL, OPT_ETCD_CA },
                { "etcd-cert", required_argument, NULL, OPT_ETCD_CERT },
                { "etcd-key", required_argument, NULL, OPT_ETCD_KEY },
                { "etcd-user", required_argument, NULL, OPT_ETCD_USER },
                { "etcd-password-file", required_argument, NULL, OPT_ETCD_PASSWORD },
                { "no-leader", no_argument, NULL, OPT_NO_LEADER },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, OPT_VERSION },
                {},
        };
        int c, level;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case OPT_STATE:
                        a->state_dir = optarg;
                        break;
                case OPT_SOCKET:
                        a->socket = optarg;
                        break;
                case OPT_LISTEN:
                        a->listen = optarg;
                        break;
                case OPT_TOKEN:
                        a->token_file = optarg;
                        break;
                case OPT_TLS_CERT:
                        a->tls_cert = optarg;
                        break;
                case OPT_TLS_KEY:
                        a->tls_key = optarg;
                        break;
                case OPT_GROUP:
                        a->socket_group = optarg;
                        break;
                case OPT_PORTS: {
                        unsigned lo, hi;
                        char end;
                        if (sscanf(optarg, "%u-%u%c", &lo, &hi, &end) != 2 || lo < 1 ||
                            hi > 65535 || lo > hi) {
                                fprintf(stderr,
                                        "tendd: --port-range %s: expected LO-HI, e.g. "
                                        "30000-32767\n",
                                        optarg);
                                return -EINVAL;
                        }
                        a->port_lo = (uint16_t) lo;
                        a->port_hi = (uint16_t) hi;
                        break;
                }
                case OPT_RESYNC:
                        if (parse_duration(optarg, &a->resync) < 0 || a->resync < USEC_PER_SEC) {
                                fprintf(stderr,
                                        "tendd: --resync %s: expected a duration of at "
                                        "least 1s, e.g. 30s or 1m\n",
                                        optarg);
                                return -EINVAL;
                        }
                        break;
                case OPT_IDLE:
                        if (parse_duration(optarg, &a->idle_timeout) < 0 ||
                            a->idle_timeout < USEC_PER_SEC ||
                            a->idle_timeout > 3600 * USEC_PER_SEC) {
                                fprintf(stderr,
                                        "tendd: --idle-timeout %s: expected a duration from 1s "
                                        "to 1h, e.g. 30s\n",
                                        optarg);
                                return -EINVAL;
                        }
                        break;
                case OPT_LOG:
                        level = log_level_from_string(optarg);
                        if (level < 0) {
                                fprintf(stderr,
                                        "tendd: --log-level %s: expected err, warning, "
                                        "notice, info or debug\n",
                                        optarg);
                                return -EINVAL;
                        }
                        log_set_max_level(level);
                        break;
                case OPT_BUS:
                        if (streq(optarg, "user"))
                                a->bus = RT_BUS_USER;
                        else if (streq(optarg, "system"))
                                a->bus = RT_BUS_SYSTEM;
                        else if (streq(optarg, "none"))
                                a->bus = RT_BUS_NONE;
                        else {
                                fprintf(stderr,
                                        "tendd: --systemd-bus %s: expected user, system or "
                                        "none\n",
                                        optarg);
                                return -EINVAL;
                        }
                        break;
                case OPT_CGROUPS:
                        if (streq(optarg, "auto"))
                                a->cgroups = RT_CGROUPS_AUTO;
                        else if (streq(optarg, "off"))
                                a->cgroups = RT_CGROUPS_OFF;
                        else {
                                fprintf(stderr, "tendd: --cgroups %s: expected auto or off\n",
                                        optarg);
                                return -EINVAL;
                        }
                        break;
                case OPT_MANIFESTS:
                        a->manifests = optarg;
                        break;
                case OPT_FLEET:
                        if (parse_endpoints(optarg, &a->fleet) < 0)
                                return -EINVAL;
                        break;
                case OPT_NODE_NAME:
                        if (!spec_is_dns_subdomain(optarg)) {
                                fprintf(stderr,
                                        "tendd: --node-name %s: a node name is a DNS subdomain: "
                                        "lowercase letters, digits, '-' and '.', at most 253 "
                                        "characters, starting and ending with a letter or digit "
                                        "(e.g. node-1)\n",
                                        optarg);
                                return -EINVAL;
                        }
                        a->node_name = optarg;
                        break;
                case OPT_NODE_LABELS:
                        if (parse_labels(optarg, &a->node_labels) < 0)
                                return -EINVAL;
                        break;
                case OPT_ETCD_PREFIX:
                        if (optarg[0] != '/' || strlen(optarg) < 2 || endswith(optarg, "/")) {
                                fprintf(stderr,
                                        "tendd: --etcd-prefix %s: expected a key prefix that "
                                        "starts with / and does not end with it, e.g. /tend\n",
                                        optarg);
                                return -EINVAL;
                        }
                        a->etcd_prefix = optarg;
                        break;
                case OPT_LEASE_TTL: {
                        usec_t ttl;
                        if (parse_duration(optarg, &ttl) < 0 || ttl < 2 * USEC_PER_SEC ||
                            ttl > 3600 * USEC_PER_SEC || ttl % USEC_PER_SEC) {
                                fprintf(stderr,
                                        "tendd: --lease-ttl %s: expected whole seconds from 2s "
                                        "to 1h, e.g. 10s\n",
                                        optarg);
                                return -EINVAL;
                        }
                        a->lease_ttl = (int64_t) (ttl / USEC_PER_SEC);
                        break;
                }
                case OPT_NODE_LOST_AFTER:
                        if (parse_duration(optarg, &a->lost_after) < 0 ||
                            a->lost_after > 24 * 3600 * USEC_PER_SEC) {
                                fprintf(stderr,
                                        "tendd: --node-lost-after %s: expected a duration up to "
                                        "24h, e.g. 10s, 0s (at once)\n",
                                        optarg);
                                return -EINVAL;
                        }
                        a->has_lost_after = true;
                        break;
                case OPT_COMPACTION:
                        if (parse_duration(optarg, &a->compaction) < 0 ||
                            a->compaction > 24 * 3600 * USEC_PER_SEC ||
                            (a->compaction > 0 && a->compaction < USEC_PER_SEC)) {
                                fprintf(stderr,
                                        "tendd: --etcd-compaction-interval %s: expected a "
                                        "duration from 1s to 24h, e.g. 5m, or 0 (never)\n",
                                        optarg);
                                return -EINVAL;
                        }
                        a->has_compaction = true;
                        break;
                case OPT_ETCD_CA:
                        a->etcd_ca = optarg;
                        break;
                case OPT_ETCD_CERT:
                        a->etcd_cert = optarg;
                        break;
                case OPT_ETCD_KEY:
                        a->etcd_key = optarg;
                        break;
                case OPT_ETCD_USER:
                        a->etcd_user = optarg;
                        break;
                case OPT_ETCD_PASSWORD:
                        a->etcd_password_file = optarg;
                        break;
                case OPT_NO_LEADER:
                        a->no_leader = true;
                        break;
                case OPT_STOP_PODS:
                        stop_pods_on_exit = true;
                        break;
                case 'h':
                        usage(stdout);
                        exit(0);
                case OPT_VERSION:
                        printf("tendd %s\n", TEND_VERSION);
                        exit(0);
                default:
                        usage(stderr);
                        return -EINVAL;
                }
        if (optind < argc) {
                fprintf(stderr, "tendd: unexpected argument \"%s\"\n", argv[optind]);
                return -EINVAL;
        }
        if (!a->fleet && (a->node_labels || a->etcd_prefix || a->lease_ttl || a->etcd_ca ||
                          a->etcd_cert || a->etcd_key || a->etcd_user || a->etcd_password_file ||
                          a->no_leader || a->has_lost_after || a->has_compaction)) {
                fprintf(stderr,
                        "tendd: --node-labels, --etcd-*, --lease-ttl, --node-lost-after and "
                        "--no-leader are for a fleet: give --fleet URL too\n");
                return -EINVAL;
        }
        if (!a->etcd_cert != !a->etcd_key) {
                fprintf(stderr, "tendd: --etcd-cert and --etcd-key go together: a client "
                                "certificate and its key\n");
                return -EINVAL;
        }
        if (!a->etcd_user != !a->etcd_password_file) {
                fprintf(stderr, "tendd: --etcd-user and --etcd-password-file go together\n");
                return -EINVAL;
        }
        return 0;
}

static uv_loop_t *loop;
static agent_loop *al;
static api_server *api;
static manifest_dir *mf;
static uv_signal_t sighup;
static bool stopping;
static uv_timer_t tick;  /* sd_notify WATCHDOG=1 and STATUS= */
static uv_timer_t drain; /* --stop-pods-on-exit: until the pods are gone */
static usec_t drain_until;
static uv_signal_t sigterm, sigint;
static fleet *fl;
static int join_error = 1; /* 1: joining; 0: joined; < 0: failed */
static fence_client *fc;   /* a fleet's: the fence keeper (tend/fleet.h) */
static uv_timer_t fence_tick;
static bool fence_ticking;

/* The fence keeper is told, four times a second, when this node's fenced
 * pods must stop if the lease is not renewed before, and which they are. */
static void fence_stop(void) {
        /* (the keeper keeps the last time: a tendd that is back in time
         * moves it on) */
        fence_client_free(fc);
        fc = NULL;
        if (fence_ticking)
                uv_close((uv_handle_t *) &fence_tick, NULL);
        fence_ticking = false;
}

static void on_fence_tick(uv_timer_t *t) {
        _cleanup_free_ agent_fenced *v = NULL;
        size_t n = 0;

        if (!fc || !al || agent_fenced_pods(agent_loop_agent(al), &v, &n) < 0)
                return;
        fence_client_update(fc, fleet_fence_at(fl), v, n);
}

/* SIGTERM or SIGINT while joining: stop (the pods keep running). */
static void on_signal_joining(uv_signal_t *h, int sig) {
        log_info("Received %s while joining the fleet; stopping (pods keep running).",
                 strsignal(sig));
        join_error = -EINTR;
}

static void on_joined(int error, const char *why, void *userdata) {
        join_error = error;
        if (error < 0)
                log_error("fleet: %s", why);
}

static void notify_status(void) {
        size_t running, total;

        if (!al)
                return;
        agent_pod_counts(agent_loop_agent(al), &running, &total);
        (void) sd_notifyf(0, "STATUS=%zu pod%s running (%zu in the store)", running,
                          running == 1 ? "" : "s", total);
}

/* From the loop itself: a wedged loop stops these, and systemd restarts
 * tendd (WatchdogSec=); the pods are adopted by the next one. */
static void on_tick(uv_timer_t *t) {
        (void) sd_notify(0, "WATCHDOG=1");
        notify_status();
}

static void finish(void) {
        /* The keeper is told the set once more: a pod started since its
         * last tick (250 ms) would be left running, unknown to it, should
         * no tendd come back before the lease expires (fleet-fence saw
         * one). */
        on_fence_tick(NULL);
        manifest_dir_close(mf);
        mf = NULL;
        api_server_close(api);
        api = NULL;
        fleet_close(fl);
        fl = NULL;
        fence_stop();
        agent_loop_close(al);
        al = NULL;
        uv_close((uv_handle_t *) &tick, NULL);
        uv_close((uv_handle_t *) &drain, NULL);
        uv_close((uv_handle_t *) &sigterm, NULL);
        uv_close((uv_handle_t *) &sigint, NULL);
        uv_close((uv_handle_t *) &sighup, NULL);
}

static void on_sighup(uv_signal_t *h, int sig) {
        if (mf) {
                log_info("Received SIGHUP; reading the manifests again.");
                manifest_dir_sync(mf);
        } else
                log_info("Received SIGHUP; no --manifests to read.");
}

static void on_left(void *userdata) {
        finish();
}

static void on_drain(uv_timer_t *t) {
        size_t left = agent_live_pods(agent_loop_agent(al));

        if (left > 0 && now_monotonic() < drain_until) {
                (void) sd_notifyf(0, "STATUS=stopping: %zu pod%s left", left, left == 1 ? "" : "s");
                return;
        }
        if (left > 0)
                log_warning("%zu pods still running after their grace periods; exiting anyway",
                            left);
        else
                log_info("every pod stopped");
        uv_timer_stop(&drain);
        if (fl) /* the pods are gone: so is the node, now rather than a TTL later */
                fleet_leave(fl, on_left, NULL);
        else
                finish();
}

static void on_signal(uv_signal_t *h, int sig) {
        usec_t grace = 0;

        if (stopping) {
                log_info("Received %s again; exiting now.", strsignal(sig));
                finish();
                return;
        }
        stopping = true;
        (void) sd_notify(0, "STOPPING=1");
        if (!stop_pods_on_exit) {
                log_info("Received %s; stopping (pods keep running).", strsignal(sig));
                finish();
                return;
        }
        /* The API goes first (nothing new is asked of us), then every pod
         * is stopped with its grace period, none replaced. */
        log_info("Received %s; stopping every pod, then exiting.", strsignal(sig));
        manifest_dir_close(mf);
        mf = NULL;
        api_server_close(api);
        api = NULL;
        (void) agent_drain(agent_loop_agent(al), &grace);
        agent_loop_kick(al);
        drain_until = now_monotonic() + grace + 5 * USEC_PER_SEC;
        uv_timer_start(&drain, on_drain, 100, 100);
}

int main(int argc, char **argv) {
        _cleanup_(args_done) args a = {};
        _cleanup_free_ char *state_dir = NULL, *socket = NULL, *token = NULL, *etcd_password = NULL;
        _cleanup_free_ char *err = NULL;
        gid_t group = 0;
        int r;

        /* the fence keeper: tendd's own, started by tendd (tend/fleet.h) */
        if (argc == 3 && streq(argv[1], "--fence-keeper"))
                return fence_keeper_main(argv[2]);
        log_open("tendd");
        if (parse_args(argc, argv, &a) < 0)
                return 2;
        signal(SIGPIPE, SIG_IGN);

        state_dir = a.state_dir ? strdup(a.state_dir) : tend_default_state_dir();
        socket = a.socket ? strdup(a.socket) : tend_default_socket();
        if (!state_dir || !socket)
                return log_oom(), 1;
        if (a.socket_group) {
                struct group *g = getgrnam(a.socket_group);
                if (!g) {
                        log_error("--socket-group %s: no such group", a.socket_group);
                        return 1;
                }
                group = g->gr_gid;
        }
        if (a.token_file) {
                r = read_secret(a.token_file, "--token-file", 16, &token);
                if (r < 0)
                        return 1;
        }
        if (a.etcd_password_file) {
                r = read_secret(a.etcd_password_file, "--etcd-password-file", 1, &etcd_password);
                if (r < 0)
                        return 1;
        }
        if (!a.tls_cert != !a.tls_key) {
                log_error("--tls-cert and --tls-key go together: a certificate and its key");
                return 1;
        }
        if (a.tls_cert && !a.listen) {
                log_error("--tls-cert is for the TCP listener: give --listen ADDRESS:PORT too");
                return 1;
        }

        loop = uv_default_loop();
        /* In a fleet the agent asks it who leads and which nodes there are
         * (fl: NULL until joined). */
        static const agent_fleet agent_fleet_ops = { .leading = fleet_agent_leading,
                                                     .nodes = fleet_agent_nodes,
                                                     .in_etcd = fleet_agent_in_etcd,
                                                     .node_lost = fleet_agent_node_lost,
                                                     .fenced = fleet_agent_fenced,
                                                     .userdata = &fl };
        r = agent_loop_new(loop,
                           &(agent_loop_config){ .state_dir = state_dir,
                                                 .port_lo = a.port_lo,
                                                 .port_hi = a.port_hi,
                                                 .resync_interval = a.resync,
                                                 .node_name = a.node_name,
                                                 .fleet = a.fleet ? &agent_fleet_ops : NULL,
                                                 .systemd_bus = a.bus,
                                                 .cgroups = a.cgroups },
                           &al, &err);
        if (r < 0) {
                log_error("%s", err ?: strerror(-r));
                return 1;
        }
        if (a.fleet) {
                /* Before the API answers: its nodes are the fleet's. */
                r = fleet_join(&(fleet_config){ .loop = loop,
                                                .endpoints = a.fleet,
                                                .prefix = a.etcd_prefix,
                                                .node_name = agent_node_name(agent_loop_agent(al)),
                                                .labels = a.node_labels,
                                                .ttl = a.lease_ttl,
                                                .state_dir = state_dir,
                                                .ca_file = a.etcd_ca,
                                                .cert_file = a.etcd_cert,
                                                .key_file = a.etcd_key,
                                                .user = a.etcd_user,
                                                .password = etcd_password,
                                                .no_leader = a.no_leader,
                                                .agent = agent_loop_agent(al),
                                                .lost_after = a.has_lost_after ? a.lost_after
                                                                               : 10 * USEC_PER_SEC,
                                                .compaction = a.has_compaction
                                                                      ? a.compaction
                                                                      : 5 * 60 * USEC_PER_SEC },
                               on_joined, NULL, &fl);
                if (r < 0)
                        log_error_errno(r, "fleet: cannot join: %m");
                /* the keeper of an earlier run is told at once, even while
                 * the join waits */
                if (r >= 0 && fence_client_new(state_dir, &fc) < 0)
                        log_warning("fleet: no fence keeper: the state directory's path is too "
                                    "long for its socket; a hung tendd leaves fenced pods "
                                    "running");
                uv_timer_init(loop, &fence_tick);
                uv_timer_start(&fence_tick, on_fence_tick, 0, 250);
                fence_ticking = true;
                /* A join may wait (for etcd, for a dead tendd's lease): a
                 * stop meanwhile is a clean one. */
                uv_signal_t jterm, jint;
                uv_signal_init(loop, &jterm);
                uv_signal_init(loop, &jint);
                uv_signal_start(&jterm, on_signal_joining, SIGTERM);
                uv_signal_start(&jint, on_signal_joining, SIGINT);
                while (r >= 0 && join_error > 0)
                        (void) uv_run(loop, UV_RUN_ONCE);
                uv_close((uv_handle_t *) &jterm, NULL);
                uv_close((uv_handle_t *) &jint, NULL);
                if (r < 0 || join_error < 0) {
                        fleet_close(fl);
                        fence_stop();
                        agent_loop_close(al);
                        uv_run(loop, UV_RUN_NOWAIT);
                        return join_error == -EINTR ? 0 : 1;
                }
        }
        api_fleet fleet_ops = fl ? fleet_api(fl) : (api_fleet){};
        r = api_server_new(&(api_config){ .loop = loop,
                                          .agent = agent_loop_agent(al),
                                          .state_dir = state_dir,
                                          .socket_path = socket,
                                          .has_group = a.socket_group != NULL,
                                          .group = group,
                                          .listen = a.listen,
                                          .token = token,
                                          .tls_cert = a.tls_cert,
                                          .tls_key = a.tls_key,
                                          .idle_timeout = a.idle_timeout,
                                          .fleet = fl ? &fleet_ops : NULL },
                           &api, &err);
        if (r < 0) {
                log_error("%s", err ?: strerror(-r));
                fleet_close(fl);
                fence_stop();
                agent_loop_close(al);
                uv_run(loop, UV_RUN_NOWAIT);
                return 1;
        }
        uv_signal_init(loop, &sigterm);
        uv_signal_init(loop, &sigint);
        uv_signal_start(&sigterm, on_signal, SIGTERM);
        uv_signal_start(&sigint, on_signal, SIGINT);
        uv_signal_init(loop, &sighup);
        uv_signal_start(&sighup, on_sighup, SIGHUP);
        uv_unref((uv_handle_t *) &sighup);
        uv_timer_init(loop, &drain);
        uv_timer_init(loop, &tick);
        if (getenv("NOTIFY_SOCKET")) {
                /* Half the watchdog period, or a STATUS= every 5 s; not
                 * without a manager to tell (an idle tendd wakes for
                 * nothing, issue 35). */
                uint64_t wd = 0;
                uint64_t every = sd_watchdog_enabled(0, &wd) > 0 && wd > 0
                                         ? MAX(wd / 2 / USEC_PER_MSEC, (uint64_t) 1)
                                         : 5000;
                uv_timer_start(&tick, on_tick, every, every);
                uv_unref((uv_handle_t *) &tick);
        }
        log_info("tendd %s: state in %s, API on %s%s%s", TEND_VERSION, state_dir, socket,
                 a.listen ? " and https://" : "", a.listen ?: "");
        if (a.manifests) {
                r = manifest_dir_new(loop, al, a.manifests, a.resync, &mf, &err);
                if (r < 0) {
                        log_error("%s", err ?: strerror(-r));
                        finish();
                        uv_run(loop, UV_RUN_DEFAULT);
                        (void) uv_loop_close(loop);
                        return 1;
                }
        }
        /* Only now: the store is loaded, the pods adopted, the socket
         * listens (and the manifests are applied). */
        (void) sd_notify(0, "READY=1");
        notify_status();

        uv_run(loop, UV_RUN_DEFAULT);
        (void) uv_loop_close(loop);
        log_info("stopped");
        return 0;
}
