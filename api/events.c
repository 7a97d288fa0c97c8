/* SPDX-License-Identifier: MIT */

/*
 * The HTTP API (tend/api.h): events.k8s.io/v1, the same events as core/v1
 * in the newer group's shape, converted as kube-apiserver converts them
 * (involvedObject → regarding, message → note, source → deprecatedSource,
 * the timestamps and count → deprecated*). Where the core event has no
 * eventTime, it is the first time the event was seen: typed clients
 * require one (the official Python client refuses null).
 */

#include "api-internal.h"

/* RFC 3339 with microseconds, as a MicroTime is written. */
static json_t *micro_time(json_t *t) {
        char buf[96];
        usec_t u;
        time_t sec;
        struct tm tm;

        if (!json_is_string(t) || parse_timestamp(json_string_value(t), &u) < 0)
                return NULL;
        sec = (time_t) (u / USEC_PER_SEC);
        if (!gmtime_r(&sec, &tm))
                return NULL;
        snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06uZ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 (unsigned) (u % USEC_PER_SEC));
        return json_string(buf);
}

static int copy(json_t *to, const char *to_key, json_t *from, const char *from_key) {
        json_t *v = json_object_get(from, from_key);

        return v ? json_object_set(to, to_key, v) : 0;
}

json_t *api__event_v1(json_t *core) {
        json_t *e = json_pack("{s:s, s:s}", "kind", "Event", "apiVersion", "events.k8s.io/v1"),
               *src = json_object_get(core, "source"), *when;
        int r = 0;

        if (!e || !core) {
                json_decref(core);
                json_decref(e);
                return NULL;
        }
        r |= copy(e, "metadata", core, "metadata");
        when = micro_time(json_object_get(core, "eventTime"))
                       ?: micro_time(json_object_get(core, "firstTimestamp"))
                                  ?: micro_time(json_object_get(core, "lastTimestamp"));
        r |= json_object_set_new(e, "eventTime",
                                 when ?: json_string("1970-01-01T00:00:00.000000Z"));
        r |= copy(e, "reason", core, "reason");
        r |= copy(e, "regarding", core, "involvedObject");
        r |= copy(e, "note", core, "message");
        r |= copy(e, "type", core, "type");
        r |= copy(e, "action", core, "action");
        r |= copy(e, "related", core, "related");
        /* who reported it: core's reportingComponent, else its source */
        r |= copy(e, "reportingController", src, "component");
        r |= copy(e, "reportingController", core, "reportingComponent");
        r |= copy(e, "reportingInstance", src, "host");
        r |= copy(e, "reportingInstance", core, "reportingInstance");
        r |= json_object_set_new(e, "deprecatedSource", src ? json_incref(src) : json_object());
        r |= copy(e, "deprecatedFirstTimestamp", core, "firstTimestamp");
        r |= copy(e, "deprecatedLastTimestamp", core, "lastTimestamp");
        r |= copy(e, "deprecatedCount", core, "count");
        json_decref(core);
        if (r < 0) {
                json_decref(e);
                return NULL;
        }
        return e;
}
