/* SPDX-License-Identifier: MIT */

/*
 * A pod's configMap and secret volumes as files (agent-internal.h,
 * agent__pod_volumes()): every key, or the items asked for, with their
 * modes, as the kubelet makes them. A ConfigMap or a Secret that is missing
 * and not optional keeps the pod from starting (ContainerCreating, and a
 * FailedMount event, in the kubelet's words) until it is made.
 *
 * While the pod runs, an edit of what its volumes come from is written to
 * its files (ctl-pod.c, agent__refresh_volumes()): the key of what they
 * were made from — each object's resourceVersion — says when.
 *
 * A Secret's bytes go to the runtime and nowhere else.
 */

#include <inttypes.h>

#include "agent-internal.h"

void agent__pod_volumes_done(agent_volumes *v) {
        for (size_t i = 0; i < v->n_owned; i++)
                free(v->owned[i]);
        free(v->owned);
        for (size_t i = 0; i < v->n_vols; i++)
                free((void *) v->vols[i].files);
        free(v->vols);
        *v = (agent_volumes){};
}

static int own(agent_volumes *v, void *p) {
        if (!p || TEND_GROW(v->owned, v->alloc_owned, v->n_owned + 1) < 0) {
                free(p);
                return -ENOMEM;
        }
        v->owned[v->n_owned++] = p;
        return 0;
}

static const spec_object_volume *source_of(const spec_volume *vol, bool *ret_secret) {
        *ret_secret = vol->secret;
        return vol->secret ?: vol->config_map;
}

static const void *object_of(agent *a, const spec_pod *p, const spec_volume *vol) {
        bool secret;
        const spec_object_volume *o = source_of(vol, &secret);

        return o ? store_get(a->store, secret ? STORE_SECRET : STORE_CONFIG_MAP,
                             p->metadata.namespace, o->name)
                 : NULL;
}

/* A key's bytes: a ConfigMap's data as written, its binaryData and a
 * Secret's data decoded. NULL: no such key. */
static int key_bytes(agent_volumes *v, const void *obj, bool secret, const char *key,
                     const void **ret, size_t *ret_size) {
        const spec_map *text = secret ? NULL : &((const spec_config_map *) obj)->data;
        const spec_map *b64 = secret ? &((const spec_secret *) obj)->data
                                     : &((const spec_config_map *) obj)->binary_data;
        const char *s = text ? spec_map_get(text, key) : NULL;
        void *bytes = NULL;
        size_t n = 0;
        int r;

        if (s) {
                *ret = s;
                *ret_size = strlen(s);
                return 1;
        }
        s = spec_map_get(b64, key);
        if (!s) {
                *ret = NULL;
                return 0;
        }
        r = tend_base64_decode(s, strlen(s), &bytes, &n);
        if (r == -ENOMEM)
                return r;
        if (r < 0) /* (checked when stored) */
                return 0;
        r = own(v, bytes);
        if (r < 0)
                return r;
        *ret = bytes;
        *ret_size = n;
        return 1;
}

static int mode_of(int32_t mode, int32_t fallback) {
        return mode != SPEC_UNSET       ? mode
               : fallback != SPEC_UNSET ? fallback
                                        : SPEC_VOLUME_DEFAULT_MODE;
}

/* One configMap or secret volume's files, or why it cannot be made. */
static int volume_files(agent *a, const spec_pod *p, const spec_volume *vol, agent_volumes *v,
                        rt_volume_files *ret, char **ret_problem) {
        bool secret;
        const spec_object_volume *o = source_of(vol, &secret);
        const void *obj = object_of(a, p, vol);
        const spec_map *maps[2] = {};
        rt_file *files;
        size_t n = 0, cap;
        int r;

        *ret = (rt_volume_files){};
        if (!obj)
                return o->optional ? 0
                                   : agent__problem(ret_problem,
                                                    "MountVolume.SetUp failed for volume \"%s\" : "
                                                    "%s \"%s\" not found",
                                                    vol->name, secret ? "secret" : "configmap",
                                                    o->name);
        if (secret)
                maps[0] = &((const spec_secret *) obj)->data;
        else {
                maps[0] = &((const spec_config_map *) obj)->data;
                maps[1] = &((const spec_config_map *) obj)->binary_data;
        }
        cap = o->n_items ?: maps[0]->n + (maps[1] ? maps[1]->n : 0);
        files = new0(rt_file, cap + 1);
        if (!files)
                return -ENOMEM;
        ret->files = files;
        if (o->n_items)
                for (size_t i = 0; i < o->n_items; i++) {
                        const spec_key_to_path *k = &o->items[i];
                        rt_file *f = &files[n];
                        r = key_bytes(v, obj, secret, k->key, &f->data, &f->size);
                        if (r < 0)
                                return r;
                        if (r == 0) {
                                if (o->optional)
                                        continue;
                                return agent__problem(ret_problem,
                                                      "MountVolume.SetUp failed for volume \"%s\" "
                                                      ": %s references non-existent %s key: %s",
                                                      vol->name, secret ? "secret" : "configmap",
                                                      secret ? "secret" : "config", k->key);
                        }
                        f->path = k->path;
                        f->mode = (mode_t) mode_of(k->mode, o->default_mode);
                        n++;
                }
        else
                for (size_t m = 0; m < 2 && maps[m]; m++)
                        for (size_t i = 0; i < maps[m]->n; i++) {
                                rt_file *f = &files[n];
                                r = key_bytes(v, obj, secret, maps[m]->items[i].key, &f->data,
                                              &f->size);
                                if (r < 0)
                                        return r;
                                if (r == 0)
                                        continue;
                                f->path = maps[m]->items[i].key;
                                f->mode = (mode_t) mode_of(SPEC_UNSET, o->default_mode);
                                n++;
                        }
        ret->n = n;
        return 0;
}

bool agent__pod_has_files(const spec_pod *p) {
        for (size_t i = 0; i < p->spec.n_volumes; i++)
                if ((p->spec.volumes[i].config_map || p->spec.volumes[i].secret) &&
                    spec_volume_mounted(&p->spec, p->spec.volumes[i].name))
                        return true;
        return false;
}

int agent__pod_volumes(agent *a, const spec_pod *p, agent_volumes *ret, char **ret_problem) {
        agent_volumes v = {};
        int r = 0;

        *ret_problem = NULL;
        *ret = v;
        if (!p->spec.n_volumes)
                return 0;
        v.vols = new0(rt_volume_files, p->spec.n_volumes);
        if (!v.vols)
                return -ENOMEM;
        v.n_vols = p->spec.n_volumes;
        /* every volume, mounted or not, as the kubelet sets each one up */
        for (size_t i = 0; i < p->spec.n_volumes && r >= 0; i++)
                if (!p->spec.volumes[i].empty_dir)
                        r = volume_files(a, p, &p->spec.volumes[i], &v, &v.vols[i], ret_problem);
        if (r < 0) {
                agent__pod_volumes_done(&v);
                return r;
        }
        *ret = v;
        return 0;
}

char *agent__volumes_key(agent *a, const spec_pod *p) {
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(64 * 1024);

        for (size_t i = 0; i < p->spec.n_volumes; i++) {
                const spec_volume *vol = &p->spec.volumes[i];
                const void *obj;
                if (vol->empty_dir || !spec_volume_mounted(&p->spec, vol->name))
                        continue;
                obj = object_of(a, p, vol);
                if (obj)
                        (void) tend_buf_addf(&b, "%" PRIu64 ";",
                                             spec_object_meta(obj)->resource_version);
                else
                        (void) tend_buf_adds(&b, "-;");
        }
        return tend_buf_take(&b);
}

bool agent__pod_refers_to(const spec_pod *p, store_kind kind, const char *name) {
        for (size_t i = 0; i < p->spec.n_volumes; i++) {
                bool secret;
                const spec_object_volume *o = source_of(&p->spec.volumes[i], &secret);
                if (o && streq_ptr(o->name, name) &&
                    (secret ? kind == STORE_SECRET : kind == STORE_CONFIG_MAP))
                        return true;
        }
        return false;
}
