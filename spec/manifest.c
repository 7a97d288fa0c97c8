/* SPDX-License-Identifier: MIT */

/* Manifests: the whole pipeline over files, directories and stdin, and the
 * checks that need the set as a whole. */

#include <dirent.h>
#include <sys/stat.h>

#include "spec-internal.h"

void spec_manifest_done(spec_manifest *m) {
        for (size_t i = 0; i < m->n; i++) {
                spec_free(m->items[i].kind->type, m->items[i].object);
                free(m->items[i].file);
                free(m->items[i].legacy_lease_ports);
        }
        free(m->items);
        *m = (spec_manifest){};
}

static int manifest_push(spec_manifest *m, const spec_kind *kind, void *obj, const char *file,
                         unsigned line, unsigned index) {
        spec_manifest_item *n = realloc(m->items, sizeof(spec_manifest_item) * (m->n + 1));
        char *f = strdup(file);

        if (!n || !f) {
                free(f);
                if (n)
                        m->items = n;
                return -ENOMEM;
        }
        m->items = n;
        m->items[m->n++] = (spec_manifest_item){
                .kind = kind,
                .object = obj,
                .deployment = kind->type == &spec_type_deployment ? obj : NULL,
                .file = f,
                .line = line,
                .index = index,
        };
        return 0;
}

/* One document: route by kind, decode strictly, default, validate. */
static int add_document(spec_manifest *m, const char *file, const spec_doc *doc,
                        spec_errors *errs) {
        json_t *meta = json_object_get(doc->root, "metadata");
        const char *kind = json_string_value(json_object_get(doc->root, "kind"));
        const char *name = json_string_value(json_object_get(meta, "name"));
        _cleanup_free_ char *label = spec_object_label(kind, name, doc->index);
        const spec_kind *row = NULL;
        void *obj = NULL;
        size_t before = errs->n;
        int r;

        if (!label)
                return -ENOMEM;
        errs->object = label;
        if (!kind) {
                r = spec_errors_add(errs, "kind",
                                    json_object_get(doc->root, "kind")
                                            ? "Invalid value: must be a string"
                                            : "Required value: must be \"Deployment\"");
                goto out;
        }
        row = spec_kind_written(NULL, kind);
        if (!row) {
                _cleanup_free_ char *repr = spec__repr_str(kind),
                                    *which = spec_kinds_written_text();
                r = spec_errors_add(errs, "kind",
                                    "Unsupported value: %s: supported values: %s (tend creates "
                                    "ReplicaSets and Pods itself)",
                                    strna(repr), strna(which));
                goto out;
        }

        r = spec_decode_new(row->type, doc->root, errs, &obj);
        if (r < 0)
                goto out;
        bool defaulted = !spec_object_meta(obj)->namespace;
        if (row->defaults)
                row->defaults(obj);
        else if (defaulted && !(spec_object_meta(obj)->namespace = strdup("default"))) {
                r = -ENOMEM;
                goto out;
        }
        r = row->validate ? row->validate(obj, errs) : 0;
        if (r < 0)
                goto out;
        r = manifest_push(m, row, obj, file, doc->line, doc->index);
        if (r >= 0) {
                json_t *spec = json_object_get(doc->root, "spec");
                spec_manifest_item *it = &m->items[m->n - 1];
                obj = NULL;
                it->namespace_defaulted = defaulted;
                it->replicas_given = json_object_get(spec, "replicas") != NULL;
                it->paused_given = json_object_get(spec, "paused") != NULL;
                if (it->deployment)
                        it->legacy_lease_ports = spec_legacy_leased_ports(doc->root);
                (void) spec_doc_position(doc, "metadata.name", &it->name_line, &it->name_column);
                (void) spec_doc_position(doc, "spec.selector", &it->selector_line,
                                         &it->selector_column);
        }
out:
        if (obj)
                spec_free(row->type, obj);
        /* Field errors get the line and column of the field (or of the
         * nearest enclosing one, for a field left out). */
        for (size_t i = before; i < errs->n; i++) {
                spec_error *e = &errs->items[i];
                if (e->line == 0 && e->field &&
                    !spec_doc_position(doc, e->field, &e->line, &e->column) && doc->positions) {
                        /* a top-level field left out: the document */
                        e->line = doc->line;
                        e->column = 1;
                }
        }
        errs->object = NULL;
        return r;
}

int spec_manifest_add_buffer(spec_manifest *m, const char *file, const char *data, size_t size,
                             spec_errors *errs) {
        spec_docs docs = {};
        const char *saved = errs->file;
        int r, ret = 0;

        r = spec_parse(file, data, size, errs, &docs);
        if (r < 0)
                return r;
        errs->file = file;
        for (size_t i = 0; i < docs.n; i++) {
                r = add_document(m, file, &docs.items[i], errs);
                if (r == -ENOMEM) {
                        ret = r;
                        break;
                }
                if (r < 0)
                        ret = r;
        }
        errs->file = saved;
        spec_docs_done(&docs);
        return ret;
}

static int add_file(spec_manifest *m, const char *path, const char *display, spec_errors *errs) {
        _cleanup_free_ char *data = NULL;
        size_t size;
        int r;

        r = read_full_file(path, SPEC_MAX_INPUT_SIZE, &data, &size);
        if (r == -EFBIG) {
                errs->file = display;
                r = spec_errors_add(errs, NULL,
                                    "input is larger than %d bytes: split it into several files",
                                    SPEC_MAX_INPUT_SIZE);
                errs->file = NULL;
                return r;
        }
        if (r < 0) {
                errs->file = display;
                spec_errors_add(errs, NULL, "cannot read: %s", errno_name(r));
                errs->file = NULL;
                return -EINVAL;
        }
        return spec_manifest_add_buffer(m, display, data, size, errs);
}

static bool is_manifest_name(const char *n) {
        return n[0] != '.' && (endswith(n, ".yaml") || endswith(n, ".yml") || endswith(n, ".json"));
}

static int cmp_names(const void *a, const void *b) {
        return strcmp(*(char *const *) a, *(char *const *) b);
}

int spec_manifest_add_path(spec_manifest *m, const char *path, spec_errors *errs) {
        _cleanup_strv_free_ char **names = NULL;
        struct stat st;
        DIR *dir;
        struct dirent *de;
        int r, ret = 0;

        if (streq(path, "-"))
                return add_file(m, "-", "<stdin>", errs);
        if (stat(path, &st) < 0) {
                r = -errno;
                errs->file = path;
                spec_errors_add(errs, NULL, "cannot read: %s", errno_name(r));
                errs->file = NULL;
                return -EINVAL;
        }
        if (!S_ISDIR(st.st_mode))
                return add_file(m, path, path, errs);

        dir = opendir(path);
        if (!dir) {
                r = -errno;
                errs->file = path;
                spec_errors_add(errs, NULL, "cannot read directory: %s", errno_name(r));
                errs->file = NULL;
                return -EINVAL;
        }
        while ((de = readdir(dir)))
                if (is_manifest_name(de->d_name) && strv_extend(&names, de->d_name) < 0) {
                        closedir(dir);
                        return -ENOMEM;
                }
        closedir(dir);
        if (!names) {
                errs->file = path;
                spec_errors_add(errs, NULL,
                                "no manifests (*.yaml, *.yml, *.json) in this directory");
                errs->file = NULL;
                return -EINVAL;
        }
        qsort(names, strv_length(names), sizeof(char *), cmp_names);
        for (char **n = names; *n; n++) {
                _cleanup_free_ char *full = strprintf("%s%s%s", path,
                                                      endswith(path, "/") ? "" : "/", *n);
                if (!full)
                        return -ENOMEM;
                r = add_file(m, full, full, errs);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        ret = r;
        }
        return ret;
}

/* The error just added gets this position, if known. */
static void at(spec_errors *errs, unsigned line, unsigned column) {
        if (errs->n > 0 && line > 0 && errs->items[errs->n - 1].line == 0) {
                errs->items[errs->n - 1].line = line;
                errs->items[errs->n - 1].column = column;
        }
}

/* Where item j declares its selector: "file:line" (the overlap rule's errors). */
/* (the deployments' j-th is the manifest's items[at_item[j]]) */
typedef struct selector_ctx {
        const spec_manifest *m;
        const size_t *at_item;
} selector_ctx;

static char *selector_where(size_t j, void *userdata) {
        const selector_ctx *c = userdata;
        const spec_manifest_item *it = &c->m->items[c->at_item[j]];

        if (it->selector_line)
                return strprintf("%s:%u", it->file, it->selector_line);
        return strdup(it->file);
}

int spec_manifest_check(const spec_manifest *m, spec_errors *errs) {
        _cleanup_(spec_overlaps_freep) spec_overlaps *ov = spec_overlaps_new();
        _cleanup_free_ const spec_deployment **ds = new0(const spec_deployment *, m->n + 1);
        _cleanup_free_ size_t *at_item = new0(size_t, m->n + 1);
        size_t nd = 0;
        int ret = 0;

        if (!ov || !ds || !at_item)
                return -ENOMEM;
        /* the selector rule is between deployments: those, in order */
        for (size_t i = 0; i < m->n; i++)
                if (m->items[i].deployment) {
                        at_item[nd] = i;
                        ds[nd++] = m->items[i].deployment;
                        if (spec_overlaps_add(ov, ds[nd - 1]->spec.selector, NULL) < 0)
                                return -ENOMEM;
                }
        for (size_t i = 0, d = 0; i < m->n; i++) {
                const spec_manifest_item *it = &m->items[i];
                const spec_meta *a = spec_object_meta(it->object);
                _cleanup_free_ char *label = spec_object_label(it->kind->kind, a->name, 0);
                size_t before;

                errs->file = it->file;
                errs->object = label;
                for (size_t k = 0; k < i; k++) {
                        const spec_meta *b = spec_object_meta(m->items[k].object);
                        const char *bfile = m->items[k].file;
                        char where[32];

                        if (m->items[k].kind != it->kind || !streq(a->namespace, b->namespace) ||
                            !streq(a->name, b->name))
                                continue;
                        if (m->items[k].name_line)
                                snprintf(where, sizeof where, ":%u", m->items[k].name_line);
                        else
                                snprintf(where, sizeof where, " (document %u)", m->items[k].index);
                        ret = spec_errors_add(errs, "metadata.name",
                                              "Duplicate value: \"%s\": also defined in %s%s",
                                              a->name, bfile, where);
                        at(errs, it->name_line, it->name_column);
                }
                if (!it->deployment)
                        continue;
                before = errs->n;
                if (spec_overlaps_report(ov, ds, d++, errs, selector_where,
                                         &(selector_ctx){ m, at_item }) < 0)
                        ret = -ENOMEM;
                else if (errs->n > before)
                        ret = -EINVAL;
                for (size_t e = before; e < errs->n; e++)
                        if (errs->items[e].line == 0) {
                                errs->items[e].line = it->selector_line;
                                errs->items[e].column = it->selector_column;
                        }
                if (ret == -ENOMEM)
                        break;
        }
        errs->file = NULL;
        errs->object = NULL;
        return ret == -ENOMEM ? -ENOMEM : (ret < 0 ? -EINVAL : 0);
}
