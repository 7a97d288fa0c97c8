/* SPDX-License-Identifier: MIT */

/*
 * tend's annotations: what tend adds to Kubernetes' shapes is written as
 * annotations under tend.io/, so that manifests stay valid Kubernetes; each
 * is parsed here, as strictly as a field.
 */

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>

#include "spec-internal.h"

const spec_backoff spec_backoff_default = {
        .after = 2,
        .initial = 1 * USEC_PER_SEC,
        .max = 300 * USEC_PER_SEC,
};

#define BACKOFF_AFTER_MAX 1000
#define BACKOFF_MAX_MAX (24 * 3600 * USEC_PER_SEC)
#define BACKOFF_FORMAT                                                                 \
        "\"off\", or key=value pairs separated by commas: after=N, initial=DURATION, " \
        "max=DURATION (as \"after=2,initial=1s,max=5m\")"

static int problem(char **ret, const char *fmt, ...) _printf_(2, 3);
static int problem(char **ret, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(ret, fmt, ap) < 0)
                *ret = NULL;
        va_end(ap);
        return *ret ? -EINVAL : -ENOMEM;
}

int spec_backoff_parse(const char *s, spec_backoff *ret, char **ret_problem) {
        spec_backoff b = spec_backoff_default;
        bool seen[3] = {};
        const char *p = s;

        *ret_problem = NULL;
        if (!s) {
                *ret = b;
                return 0;
        }
        if (streq(s, "off")) {
                b.off = true;
                *ret = b;
                return 0;
        }
        if (!*s)
                return problem(ret_problem, "must be " BACKOFF_FORMAT);
        while (*p) {
                size_t klen = strcspn(p, "=,"), vlen;
                _cleanup_free_ char *key = strndup(p, klen), *value = NULL;
                int which;

                if (!key)
                        return -ENOMEM;
                if (klen == 0)
                        return problem(ret_problem, "has an empty item: must be " BACKOFF_FORMAT);
                if (p[klen] != '=')
                        return problem(ret_problem, "\"%s\" has no value: must be " BACKOFF_FORMAT,
                                       key);
                p += klen + 1;
                vlen = strcspn(p, ",");
                value = strndup(p, vlen);
                if (!value)
                        return -ENOMEM;
                p += vlen;
                bool trailing = *p == ',' && !p[1];
                if (*p == ',')
                        p++;

                if (streq(key, "after"))
                        which = 0;
                else if (streq(key, "initial"))
                        which = 1;
                else if (streq(key, "max"))
                        which = 2;
                else
                        return problem(ret_problem,
                                       "unknown key \"%s\": must be one of after, initial, max",
                                       key);
                if (seen[which])
                        return problem(ret_problem, "%s is given twice", key);
                seen[which] = true;

                if (which == 0) {
                        int64_t n;
                        if (!*value || !isdigit((unsigned char) value[0]) ||
                            safe_atoi64(value, &n) < 0 || n > BACKOFF_AFTER_MAX)
                                return problem(ret_problem,
                                               "after=%s: must be a whole number from 0 to %d "
                                               "(young deaths in a row replaced at once)",
                                               value, BACKOFF_AFTER_MAX);
                        b.after = (uint32_t) n;
                } else {
                        usec_t d;
                        if (parse_duration(value, &d) < 0 || d > BACKOFF_MAX_MAX)
                                return problem(ret_problem,
                                               "%s=%s: must be a duration from 1ms to 24h, as "
                                               "\"500ms\", \"1s\" or \"5m\"",
                                               key, value);
                        if (d < USEC_PER_MSEC)
                                return problem(ret_problem,
                                               "%s=%s: must be at least 1ms (to switch the "
                                               "back-off off, write \"off\")",
                                               key, value);
                        if (which == 1)
                                b.initial = d;
                        else
                                b.max = d;
                }
                if (trailing)
                        return problem(ret_problem, "ends with a comma");
        }
        if (b.initial > b.max) {
                char i[DURATION_MAX], m[DURATION_MAX];
                return problem(ret_problem, "initial (%s) must not be longer than max (%s)",
                               format_duration(i, b.initial), format_duration(m, b.max));
        }
        *ret = b;
        return 0;
}

/* The annotations a user may write under tend.io/, and where. */
static const struct {
        const char *key;
        bool on_deployment, on_template;
} known[] = {
        { SPEC_ANN_CRASH_BACKOFF, true, false },
        /* set by tendd --manifests; a user may carry it over from `get -o yaml` */
        { SPEC_ANN_SOURCE, true, false },
};

int spec_tend_annotation_problem(const char *key, const char *value, bool on_template,
                                 char **ret_problem) {
        _cleanup_free_ char *krepr = NULL, *vrepr = NULL, *detail = NULL;
        bool found = false;
        int r;

        *ret_problem = NULL;
        if (!startswith(key, SPEC_ANN_PREFIX))
                return 0;
        krepr = spec__repr_str(key);
        vrepr = spec__repr_str(value);
        if (!krepr || !vrepr)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(known); i++) {
                if (!streq(known[i].key, key))
                        continue;
                found = true;
                if (on_template && !known[i].on_template)
                        return problem(ret_problem,
                                       "Forbidden: %s belongs on the Deployment's "
                                       "metadata.annotations, not on the pod template",
                                       key);
                if (!on_template && !known[i].on_deployment)
                        return problem(ret_problem,
                                       "Forbidden: %s belongs on spec.template.metadata."
                                       "annotations, not on the Deployment",
                                       key);
        }
        if (!found) {
                _cleanup_buf_ tend_buf b = TEND_BUF_INIT(1024);
                for (size_t i = 0; i < ELEMENTSOF(known); i++)
                        if (on_template ? known[i].on_template : known[i].on_deployment)
                                (void) tend_buf_addf(&b, "%s\"%s\"", b.len ? ", " : "",
                                                     known[i].key);
                if (!b.len)
                        return problem(ret_problem,
                                       "Unsupported value: %s: tend reads no annotation under "
                                       "tend.io/ here",
                                       krepr);
                return problem(ret_problem, "Unsupported value: %s: supported values: %s", krepr,
                               tend_buf_str(&b));
        }
        if (streq(key, SPEC_ANN_CRASH_BACKOFF)) {
                spec_backoff b;
                r = spec_backoff_parse(value, &b, &detail);
                if (r == -EINVAL)
                        return problem(ret_problem, "Invalid value: %s: %s", vrepr, detail);
                return r;
        }
        return 0;
}
