/* SPDX-License-Identifier: MIT */
#pragma once

/* Private to tend_spec: the field tables behind the generic codec, the
 * field-path builder, and helpers shared between the module's files. */

#include <stddef.h>

#include "tend/spec.h"

typedef enum spec_field_kind {
        SK_STRING,      /* char *                                        */
        SK_INT32,       /* int32_t                                       */
        SK_INT64,       /* int64_t                                       */
        SK_BOOL,        /* bool                                          */
        SK_TIME,        /* usec_t wall clock, RFC 3339 in JSON, 0 absent  */
        SK_RV,          /* uint64_t as a decimal JSON string, 0 absent    */
        SK_INTSTR,      /* spec_intstr                                   */
        SK_QUANTITY,    /* spec_quantity                                 */
        SK_STRV,        /* char ** (NULL-terminated)                     */
        SK_MAP,         /* spec_map                                      */
        SK_ENUM,        /* int, -EINVAL absent; names in enum_names      */
        SK_STRUCT,      /* embedded struct of .type; omitted when empty  */
        SK_PTR,         /* pointer to a .type, NULL absent               */
        SK_ARRAY,       /* pointer to .type elements + size_t count      */
        SK_JSON,        /* json_t *: a JSON object, its keys sorted, shared
                           by copies and encodings and never changed (an
                           encoding parsed it again each time), NULL absent */
        SK_UNSUPPORTED, /* a Kubernetes field tend refuses, with .note   */
} spec_field_kind;

enum {
        /* int/bool: absent is 0/false, and 0/false is left out of the
         * encoding (Go's omitempty). Without it an int's absence is
         * SPEC_UNSET and a bool is always encoded. */
        SF_OMITEMPTY = 1 << 0,
        /* int: absent is 0, and 0 is still encoded (restartCount); string:
         * absent is encoded "" (a field Kubernetes' schema requires). */
        SF_ZERO = 1 << 1,
        /* map: a Secret's values, never written into an error (the API
         * server's "<secret contents redacted>") */
        SF_SECRET = 1 << 2,
};

typedef struct spec_field {
        const char *name;
        spec_field_kind kind;
        unsigned flags;
        size_t offset;
        size_t count_offset;
        const spec_type *type;
        const char *const *enum_names;
        int n_enum;
        const char *note;
} spec_field;

struct spec_type {
        const char *name;
        size_t size;
        const spec_field *fields; /* terminated by an entry with name NULL */
        /* Child field paths print as "[key]" (resources.limits[cpu]). */
        bool map_like;
        /* Replaces the generic "Unknown field" message for this type. */
        const char *unknown_message;
        /* Run on each decoded value of this type (an old form brought up to
         * date): -ENOMEM, or >= 0. */
        int (*after_decode)(void *p);
};

#define SPEC_FIELD_END \
        { .name = NULL }

#define FIELD_PTR(base, f) ((void *) ((char *) (base) + (f)->offset))
#define FIELD_CPTR(base, f) ((const void *) ((const char *) (base) + (f)->offset))
#define FIELD_COUNT(base, f) ((size_t *) ((char *) (base) + (f)->count_offset))
#define FIELD_CCOUNT(base, f) ((const size_t *) ((const char *) (base) + (f)->count_offset))

/* ---- field paths ------------------------------------------------------------- */

typedef struct spec_path {
        char buf[1024];
        size_t len;
} spec_path;

/* Appends ".name" (or "name" at the root), "[index]" or "[key]"; returns the
 * previous length for spec__path_pop(). Overlong paths are truncated. */
size_t spec__path_field(spec_path *p, const char *name);
size_t spec__path_index(spec_path *p, size_t i);
size_t spec__path_key(spec_path *p, const char *key);
void spec__path_pop(spec_path *p, size_t len);
static inline const char *spec__path_str(const spec_path *p) {
        return p->buf;
}

/* ---- values in messages ------------------------------------------------------- */

/* A JSON value rendered for "Invalid value: <here>": strings quoted with
 * JSON escapes, long values cut. New string. */
char *spec__repr_json(json_t *j);
char *spec__repr_str(const char *s);

/* ---- codec internals ---------------------------------------------------------- */

void spec__init(const spec_type *t, void *p);
/* Whether the encoding writes field f of the struct at p (spec_encode(),
 * spec_dump_object()); false: it is left out (absent, empty, or zero where
 * Go's omitempty leaves it out). */
bool spec__field_written(const spec_field *f, const void *p);
int spec__copy_into(const spec_type *t, void *dst, const void *src);

/* jansson refuses strings that are not UTF-8; this replaces bad bytes with
 * U+FFFD so an odd byte in, say, an exec error message never loses a field. */
json_t *spec__json_string(const char *s);

/* YAML 1.2 core schema resolution of a plain scalar: null, bool, int,
 * float, else NULL (a string). Sets *ret_err to -ERANGE for an integer that
 * does not fit in 64 bits. */
json_t *spec__yaml_resolve_plain(const char *s, size_t n, int *ret_err);

/* Walks a tree from jansson (JSON input) applying the same limits the YAML
 * reader applies. */
int spec__check_limits(json_t *j, unsigned depth, size_t *nodes, char **ret_problem);

/* IANA_SVC_NAME (a port's name): NULL, or what is wrong with s. */
const char *spec__port_name_problem(const char *s);

/* Validation helpers shared by validate.c and manifest.c. */
int spec__validate_selector(const spec_selector *s, spec_path *p, spec_errors *errs);
char *spec__selector_repr(const spec_selector *s);

/* The kinds' tables (table.c), named by their rows (kinds.c). */
extern const spec_table spec__table_deployment;
extern const spec_table spec__table_replica_set;
extern const spec_table spec__table_pod;
extern const spec_table spec__table_event;
extern const spec_table spec__table_config_map;
extern const spec_table spec__table_secret;
