/* SPDX-License-Identifier: MIT */

/*
 * Protobuf bodies (application/vnd.kubernetes.protobuf), as kubectl's
 * typed clients send them (kubectl create configmap, create secret): read
 * by protobuf-c, with the messages of api/k8s.proto, into the JSON every
 * other body is. Only the kinds k8s.proto has are read; a field it leaves
 * out is refused, never dropped: protobuf-c keeps what it does not know as
 * unknown fields, and any is an error naming it.
 */

#include <inttypes.h>
#include <time.h>

#include "api-internal.h"
#include "k8s.pb-c.h"

/* Every body begins so, then a runtime.Unknown. */
static const uint8_t magic[4] = { 'k', '8', 's', 0 };

typedef struct conv {
        char *error;      /* the first problem; new string */
        bool unsupported; /* a kind tendd reads no protobuf of */
} conv;

static void problem(conv *c, const char *fmt, ...) _printf_(2, 3);
static void problem(conv *c, const char *fmt, ...) {
        va_list ap;

        if (c->error)
                return;
        va_start(ap, fmt);
        if (vasprintf(&c->error, fmt, ap) < 0)
                c->error = NULL;
        va_end(ap);
        if (!c->error)
                c->error = strdup("out of memory");
}

/* A field of a message that k8s.proto leaves out: refused, by its name
 * where it is one of the API's. */
static void no_unknown(conv *c, const ProtobufCMessage *m, const char *what) {
        static const struct {
                const char *message;
                uint32_t tag;
                const char *name;
        } known[] = {
                { "ObjectMeta", 9, "deletionTimestamp" },
                { "ObjectMeta", 10, "deletionGracePeriodSeconds" },
                { "ObjectMeta", 13, "ownerReferences" },
                { "ObjectMeta", 14, "finalizers" },
                { "ObjectMeta", 17, "managedFields" },
        };

        if (!m || m->n_unknown_fields == 0)
                return;
        uint32_t tag = m->unknown_fields[0].tag;
        for (size_t i = 0; i < ELEMENTSOF(known); i++)
                if (streq(known[i].message, what) && known[i].tag == tag) {
                        problem(c,
                                "a protobuf body with %s.%s is not read by tendd: send the "
                                "object as JSON or YAML (kubectl create -f)",
                                what, known[i].name);
                        return;
                }
        problem(c,
                "the protobuf body has field %" PRIu32 " of %s, which tendd does not read: send "
                "the object as JSON or YAML (kubectl create -f)",
                tag, what);
}

static void set(conv *c, json_t *o, const char *key, json_t *v) {
        if (!v) {
                _cleanup_free_ char *shown = utf8_escape_invalid(key);
                problem(c, "%s: not UTF-8 text (or out of memory)", strna(shown));
        } else if (!utf8_is_valid(key)) {
                _cleanup_free_ char *shown = utf8_escape_invalid(key);
                json_decref(v);
                problem(c, "the key %s is not UTF-8 text", strna(shown));
        } else if (json_object_set_new(o, key, v) < 0)
                problem(c, "out of memory");
}

static void set_string(conv *c, json_t *o, const char *key, const char *v) {
        if (!isempty(v))
                set(c, o, key, json_string(v));
}

/* A map<string, string>'s entries (each message's: key, value), as a JSON
 * object; none: nothing set. */
#define STRING_MAP(c, o, field, entries, n)                                 \
        do {                                                                \
                json_t *_m = (n) ? json_object() : NULL;                    \
                for (size_t _i = 0; _m && _i < (n); _i++) {                 \
                        no_unknown((c), &(entries)[_i]->base, "map entry"); \
                        set((c), _m, strempty((entries)[_i]->key),          \
                            json_string(strempty((entries)[_i]->value)));   \
                }                                                           \
                if (n)                                                      \
                        set((c), (o), (field), _m);                         \
        } while (0)

/* A map<string, bytes>'s, its values base64 as JSON writes bytes. */
#define BYTES_MAP(c, o, field, entries, n)                                                        \
        do {                                                                                      \
                json_t *_m = (n) ? json_object() : NULL;                                          \
                for (size_t _i = 0; _m && _i < (n); _i++) {                                       \
                        _cleanup_free_ char *_b64 = tend_base64_encode((entries)[_i]->value.data, \
                                                                       (entries)[_i]->value.len); \
                        no_unknown((c), &(entries)[_i]->base, "map entry");                       \
                        set((c), _m, strempty((entries)[_i]->key),                                \
                            _b64 ? json_string(_b64) : NULL);                                     \
                }                                                                                 \
                if (n)                                                                            \
                        set((c), (o), (field), _m);                                               \
        } while (0)

static json_t *meta_json(conv *c, const Tend__K8s__ObjectMeta *m) {
        json_t *o = json_object();

        if (!o) {
                problem(c, "out of memory");
                return NULL;
        }
        if (!m)
                return o;
        no_unknown(c, &m->base, "ObjectMeta");
        set_string(c, o, "name", m->name);
        /* (what the decoder refuses it refuses here too: passed on) */
        set_string(c, o, "generateName", m->generatename);
        set_string(c, o, "selfLink", m->selflink);
        set_string(c, o, "namespace", m->namespace_);
        set_string(c, o, "uid", m->uid);
        set_string(c, o, "resourceVersion", m->resourceversion);
        if (m->has_generation && m->generation)
                set(c, o, "generation", json_integer(m->generation));
        /* (a Go client sends the zero time for none: creationTimestamp null) */
        if (m->creationtimestamp &&
            (m->creationtimestamp->seconds || m->creationtimestamp->nanos)) {
                char buf[TIMESTAMP_MAX];
                no_unknown(c, &m->creationtimestamp->base, "Time");
                set(c, o, "creationTimestamp",
                    json_string(format_timestamp(buf, (usec_t) m->creationtimestamp->seconds *
                                                              USEC_PER_SEC)));
        }
        STRING_MAP(c, o, "labels", m->labels, m->n_labels);
        STRING_MAP(c, o, "annotations", m->annotations, m->n_annotations);
        return o;
}

static json_t *config_map_json(conv *c, const ProtobufCBinaryData *raw) {
        Tend__K8s__ConfigMap *cm = tend__k8s__config_map__unpack(NULL, raw->len, raw->data);
        json_t *o;

        if (!cm) {
                problem(c, "the protobuf body is not a ConfigMap");
                return NULL;
        }
        o = json_pack("{s:s, s:s}", "apiVersion", "v1", "kind", "ConfigMap");
        if (!o)
                problem(c, "out of memory");
        else {
                no_unknown(c, &cm->base, "ConfigMap");
                set(c, o, "metadata", meta_json(c, cm->metadata));
                STRING_MAP(c, o, "data", cm->data, cm->n_data);
                BYTES_MAP(c, o, "binaryData", cm->binarydata, cm->n_binarydata);
                if (cm->has_immutable)
                        set(c, o, "immutable", json_boolean(cm->immutable));
        }
        tend__k8s__config_map__free_unpacked(cm, NULL);
        return o;
}

static json_t *secret_json(conv *c, const ProtobufCBinaryData *raw) {
        Tend__K8s__Secret *sec = tend__k8s__secret__unpack(NULL, raw->len, raw->data);
        json_t *o;

        if (!sec) {
                problem(c, "the protobuf body is not a Secret");
                return NULL;
        }
        o = json_pack("{s:s, s:s}", "apiVersion", "v1", "kind", "Secret");
        if (!o)
                problem(c, "out of memory");
        else {
                no_unknown(c, &sec->base, "Secret");
                set(c, o, "metadata", meta_json(c, sec->metadata));
                BYTES_MAP(c, o, "data", sec->data, sec->n_data);
                STRING_MAP(c, o, "stringData", sec->stringdata, sec->n_stringdata);
                set_string(c, o, "type", sec->type);
                if (sec->has_immutable)
                        set(c, o, "immutable", json_boolean(sec->immutable));
        }
        tend__k8s__secret__free_unpacked(sec, NULL);
        return o;
}

json_t *api__protobuf_object(const void *body, size_t len, unsigned *ret_code, char **ret_error) {
        static const struct {
                const char *api_version, *kind;
                json_t *(*convert)(conv *c, const ProtobufCBinaryData *raw);
        } kinds[] = {
                { "v1", "ConfigMap", config_map_json },
                { "v1", "Secret", secret_json },
        };
        Tend__K8s__Unknown *u = NULL;
        const char *av = NULL, *kind = NULL;
        conv c = {};
        json_t *j = NULL;

        *ret_code = 400;
        *ret_error = NULL;
        if (len < sizeof magic || memcmp(body, magic, sizeof magic) != 0) {
                *ret_error = strdup("the body is not Kubernetes protobuf (it begins without "
                                    "\"k8s\\0\")");
                return NULL;
        }
        u = tend__k8s__unknown__unpack(NULL, len - sizeof magic, (const uint8_t *) body + 4);
        if (!u) {
                *ret_error = strdup("the protobuf body does not decode");
                return NULL;
        }
        no_unknown(&c, &u->base, "Unknown");
        if (u->typemeta) {
                no_unknown(&c, &u->typemeta->base, "TypeMeta");
                av = u->typemeta->apiversion;
                kind = u->typemeta->kind;
        }
        if (!isempty(u->contentencoding)) {
                _cleanup_free_ char *shown = utf8_escape_invalid(u->contentencoding);
                problem(&c, "the protobuf body's contentEncoding %s is not read by tendd",
                        strna(shown));
        }
        for (size_t i = 0; i < ELEMENTSOF(kinds) && !c.error; i++)
                if (streq_ptr(av, kinds[i].api_version) && streq_ptr(kind, kinds[i].kind)) {
                        j = kinds[i].convert(&c, &u->raw);
                        break;
                }
        if (!j && !c.error) {
                _cleanup_free_ char *sav = utf8_escape_invalid(strempty(av)),
                                    *skind = kind ? utf8_escape_invalid(kind) : NULL;
                c.unsupported = true;
                problem(&c,
                        "tendd reads protobuf bodies of ConfigMaps and Secrets (v1), not of "
                        "%s %s: send it as JSON or YAML (kubectl create -f)",
                        strna(sav), skind ?: "an object without a kind");
        }
        tend__k8s__unknown__free_unpacked(u, NULL);
        if (c.error) {
                json_decref(j);
                *ret_code = c.unsupported ? 415 : 400;
                *ret_error = c.error;
                return NULL;
        }
        return j;
}
