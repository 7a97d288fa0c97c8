/* SPDX-License-Identifier: MIT */

/* Pure helpers: $(VAR) expansion, the pod environment, PATH lookup, process
 * identity, log paths and the record codec. */

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "rt-internal.h"

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static const char *env_lookup(char *const *env, const char *name, size_t n) {
        for (char *const *e = env; e && *e; e++)
                if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
                        return *e + n + 1;
        return NULL;
}

/* Kubernetes' expansion (third_party/forked/golang/expansion): "$$" is an
 * escaped "$", "$(NAME)" is replaced when NAME is defined and kept as
 * written when not, and a "$(" without ")" is kept as written. */
char *rt_expand(const char *s, char *const *env) {
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(1024 * 1024);
        int r = 0;

        for (const char *p = s; *p && r >= 0;) {
                if (p[0] != '$') {
                        const char *next = strchr(p, '$');
                        size_t n = next ? (size_t) (next - p) : strlen(p);
                        r = tend_buf_add(&b, p, n);
                        p += n;
                        continue;
                }
                if (p[1] == '$') {
                        r = tend_buf_adds(&b, "$");
                        p += 2;
                } else if (p[1] == '(') {
                        const char *close = strchr(p + 2, ')');
                        const char *v;
                        if (!close) {
                                r = tend_buf_adds(&b, p);
                                break;
                        }
                        v = env_lookup(env, p + 2, (size_t) (close - p - 2));
                        if (v)
                                r = tend_buf_adds(&b, v);
                        else
                                r = tend_buf_add(&b, p, (size_t) (close - p + 1));
                        p = close + 1;
                } else {
                        r = tend_buf_adds(&b, "$");
                        p++;
                }
        }
        return r < 0 ? NULL : tend_buf_take(&b);
}

/* Sets NAME=value in the vector, replacing an earlier NAME. */
int rt__env_set(char ***env, const char *name, const char *value, char **ret_entry) {
        size_t n = strlen(name);
        char *entry = strprintf("%s=%s", name, value);

        if (!entry)
                return -ENOMEM;
        if (ret_entry)
                *ret_entry = entry;
        for (char **e = *env; e && *e; e++)
                if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') {
                        free(*e);
                        *e = entry;
                        return 0;
                }
        if (strv_push(env, entry) < 0) {
                free(entry);
                return -ENOMEM;
        }
        return 0;
}

static void port_env_name(const char *name, char *out, size_t size) {
        size_t i = 0;
        for (; name[i] && i + 1 < size; i++)
                out[i] = name[i] == '-' ? '_' : (char) toupper((unsigned char) name[i]);
        out[i] = 0;
}

int rt_build_env(const rt_pod_params *p, const rt_port *ports, size_t n_ports, char ***ret) {
        const spec_container *c = &p->spec->containers[0];
        _cleanup_strv_free_ char **env = NULL;
        int r;

        /* What tend provides comes first, so the container's own values
         * can refer to it: value: "127.0.0.1:$(PORT)". */
        r = rt__env_set(&env, "PATH", DEFAULT_PATH, NULL);
        if (r >= 0)
                r = rt__env_set(&env, "POD_NAME", p->name, NULL);
        if (r >= 0)
                r = rt__env_set(&env, "POD_NAMESPACE", p->namespace, NULL);
        if (r >= 0)
                r = rt__env_set(&env, "POD_UID", strempty(p->uid), NULL);
        for (size_t i = 0; i < n_ports && r >= 0; i++) {
                char name[32], var[48], num[8];
                snprintf(num, sizeof num, "%u", ports[i].port);
                if (i == 0)
                        r = rt__env_set(&env, "PORT", num, NULL);
                if (r >= 0 && ports[i].name[0]) {
                        port_env_name(ports[i].name, name, sizeof name);
                        snprintf(var, sizeof var, "PORT_%s", name);
                        r = rt__env_set(&env, var, num, NULL);
                }
        }
        if (p->env)
                for (size_t i = 0; i < p->n_env && r >= 0; i++) {
                        const rt_env_var *e = &p->env[i];
                        _cleanup_free_ char *v = e->expand ? rt_expand(strempty(e->value), env)
                                                           : strdup(strempty(e->value));
                        r = v ? rt__env_set(&env, e->name, v, NULL) : -ENOMEM;
                }
        else
                for (size_t i = 0; i < c->n_env && r >= 0; i++) {
                        _cleanup_free_ char *v = rt_expand(strempty(c->env[i].value), env);
                        r = v ? rt__env_set(&env, c->env[i].name, v, NULL) : -ENOMEM;
                }
        if (r < 0)
                return r;
        *ret = TAKE_PTR(env);
        return 0;
}

int rt__resolve_path(const char *cmd, char *const *envp, char **ret) {
        const char *path = env_lookup(envp, "PATH", 4) ?: DEFAULT_PATH;
        _cleanup_free_ char *copy = NULL;
        char *save = NULL;

        if (strchr(cmd, '/')) {
                *ret = strdup(cmd);
                return *ret ? 0 : -ENOMEM;
        }
        copy = strdup(path);
        if (!copy)
                return -ENOMEM;
        for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
                _cleanup_free_ char *full = strprintf("%s/%s", *dir ? dir : ".", cmd);
                struct stat st;
                if (!full)
                        return -ENOMEM;
                if (stat(full, &st) == 0 && S_ISREG(st.st_mode) && access(full, X_OK) == 0) {
                        *ret = TAKE_PTR(full);
                        return 0;
                }
        }
        return -ENOENT;
}

int rt_process_start_time(pid_t pid, uint64_t *ret) {
        unsigned long long v;
        int r = proc_stat_fields(pid, 22, 22, &v);
        if (r >= 0)
                *ret = v;
        return r;
}

int rt__process_environ(pid_t pid, char **ret, size_t *ret_size) {
        char path[64];

        snprintf(path, sizeof path, "/proc/%d/environ", (int) pid);
        return read_full_file(path, 256 * 1024, ret, ret_size);
}

char *rt__process_getenv(pid_t pid, const char *name) {
        _cleanup_free_ char *env = NULL;
        size_t n = 0, len = strlen(name);

        if (rt__process_environ(pid, &env, &n) < 0)
                return NULL;
        for (size_t off = 0; off < n; off += strlen(env + off) + 1)
                if (strncmp(env + off, name, len) == 0 && env[off + len] == '=')
                        return strdup(env + off + len + 1);
        return NULL;
}

pid_t rt__process_ppid(pid_t pid) {
        unsigned long long v;
        return proc_stat_fields(pid, 4, 4, &v) < 0 ? -1 : (pid_t) v;
}

int rt__find_pod_process(const char *pod_uid, rt_record *ret) {
        _cleanup_free_ char *want = strprintf("POD_UID=%s", pod_uid);
        DIR *d = opendir("/proc");
        struct dirent *de;
        int r = -ESRCH;

        if (!want || !d) {
                if (d)
                        closedir(d);
                return want ? -errno : -ENOMEM;
        }
        while ((de = readdir(d)) && r == -ESRCH) {
                _cleanup_free_ char *env = NULL;
                size_t n = 0;
                int64_t pid;
                uint64_t st;
                unsigned long long pgid = 0;

                if (safe_atoi64(de->d_name, &pid) < 0 || pid <= 1)
                        continue;
                if (rt__process_environ((pid_t) pid, &env, &n) < 0)
                        continue;
                for (size_t off = 0; off < n; off += strlen(env + off) + 1) {
                        if (!streq(env + off, want))
                                continue;
                        /* Its ports, from PORT_<NAME>=<n> (the inverse of
                         * port_env_name(): names are lower case, '-' for '_'). */
                        rt_record rec = {};
                        for (size_t o2 = 0; o2 < n && rec.n_ports < RT_MAX_PORTS;
                             o2 += strlen(env + o2) + 1) {
                                const char *v = startswith(env + o2, "PORT_"), *eq;
                                int64_t port;
                                if (!v || !(eq = strchr(v, '=')) ||
                                    safe_atoi64(eq + 1, &port) < 0 || port < 1 || port > 65535 ||
                                    (size_t) (eq - v) >= sizeof rec.ports[0].name)
                                        continue;
                                rt_port *rp = &rec.ports[rec.n_ports++];
                                for (size_t i = 0; i < (size_t) (eq - v); i++)
                                        rp->name[i] = v[i] == '_' ? '-'
                                                                  : (char) tolower(
                                                                            (unsigned char) v[i]);
                                rp->port = (uint16_t) port;
                                rp->leased = true;
                        }
                        /* The pod's main process leads its own group. */
                        if (proc_stat_fields((pid_t) pid, 5, 5, &pgid) < 0 ||
                            pgid != (unsigned long long) pid ||
                            rt_process_start_time((pid_t) pid, &st) < 0)
                                break;
                        rec.backend = strdup("process");
                        rec.pid = (pid_t) pid;
                        rec.start_time = st;
                        *ret = rec;
                        r = ret->backend ? 0 : -ENOMEM;
                        break;
                }
        }
        closedir(d);
        return r;
}

char *rt_log_path(const char *state_dir, const char *namespace, const char *pod,
                  const char *container) {
        return strprintf("%s/pods/%s_%s/%s.log", state_dir, namespace, pod, container);
}

char *rt_log_times_path(const char *log_path) {
        return strprintf("%s.times", log_path);
}

/* ---- records ------------------------------------------------------------------------------ */

void rt_record_done(rt_record *r) {
        free(r->backend);
        free(r->unit);
        free(r->log_path);
        free(r->image);
        free(r->image_id);
        *r = (rt_record){};
}

json_t *rt_record_to_json(const rt_record *r) {
        json_t *ports = json_array(), *j;

        if (!ports)
                return NULL;
        for (size_t i = 0; i < r->n_ports; i++)
                json_array_append_new(ports, json_pack("{s:s, s:i, s:b}", "name", r->ports[i].name,
                                                       "port", (int) r->ports[i].port, "leased",
                                                       r->ports[i].leased));
        j = json_pack("{s:s*, s:i, s:I, s:s*, s:s*, s:o, s:I, s:s*, s:s*}", "backend", r->backend,
                      "pid", (int) r->pid, "startTime", (json_int_t) r->start_time, "unit", r->unit,
                      "logPath", r->log_path, "ports", ports, "startedAt",
                      (json_int_t) r->started_at, "image", r->image, "imageID", r->image_id);
        return j;
}

int rt_record_from_json(json_t *j, rt_record *ret) {
        const char *backend = NULL, *unit = NULL, *log_path = NULL, *image = NULL, *image_id = NULL;
        json_int_t start_time = 0, started_at = 0;
        int pid = 0;
        json_t *ports = NULL, *e;
        json_error_t err;
        rt_record r = {};
        size_t i;

        if (json_unpack_ex(j, &err, 0, "{s?s, s?i, s?I, s?s, s?s, s?o, s?I, s?s, s?s}", "backend",
                           &backend, "pid", &pid, "startTime", &start_time, "unit", &unit,
                           "logPath", &log_path, "ports", &ports, "startedAt", &started_at, "image",
                           &image, "imageID", &image_id) < 0)
                return -EINVAL;
        r.pid = pid;
        r.start_time = (uint64_t) start_time;
        r.started_at = (usec_t) started_at;
        if ((backend && !(r.backend = strdup(backend))) || (unit && !(r.unit = strdup(unit))) ||
            (log_path && !(r.log_path = strdup(log_path))) ||
            (image && !(r.image = strdup(image))) ||
            (image_id && !(r.image_id = strdup(image_id)))) {
                rt_record_done(&r);
                return -ENOMEM;
        }
        json_array_foreach (ports, i, e) {
                const char *name = "";
                int port = 0, leased = 0;
                if (r.n_ports >= RT_MAX_PORTS ||
                    json_unpack(e, "{s?s, s:i, s?b}", "name", &name, "port", &port, "leased",
                                &leased) < 0 ||
                    port <= 0 || port > 65535) {
                        rt_record_done(&r);
                        return -EINVAL;
                }
                snprintf(r.ports[r.n_ports].name, sizeof r.ports[0].name, "%s", name);
                r.ports[r.n_ports].port = (uint16_t) port;
                r.ports[r.n_ports].leased = leased;
                r.n_ports++;
        }
        *ret = r;
        return 0;
}
