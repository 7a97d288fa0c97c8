/* SPDX-License-Identifier: MIT */

/* Reading status the way kubectl does; pure. */

#include <inttypes.h>
#include <stdio.h>

#include "spec-internal.h"

const spec_condition *spec_get_condition(const spec_condition *conds, size_t n, const char *type) {
        for (size_t i = 0; i < n; i++)
                if (streq_ptr(conds[i].type, type))
                        return &conds[i];
        return NULL;
}

bool spec_volume_mounted(const spec_pod_spec *s, const char *volume) {
        const spec_container *c = s->n_containers ? &s->containers[0] : NULL;

        for (size_t i = 0; c && i < c->n_volume_mounts; i++)
                if (streq_ptr(c->volume_mounts[i].name, volume))
                        return true;
        return false;
}

bool spec_pod_terminal(const spec_pod *p) {
        return p->status.phase == SPEC_POD_FAILED || p->status.phase == SPEC_POD_SUCCEEDED;
}

bool spec_pod_active(const spec_pod *p) {
        return !spec_pod_terminal(p) && !p->metadata.deletion_timestamp;
}

bool spec_pod_ready(const spec_pod *p, usec_t *ret_since) {
        const spec_condition *c = spec_get_condition(p->status.conditions, p->status.n_conditions,
                                                     "Ready");
        bool ready = c && streq_ptr(c->status, "True");

        if (ret_since)
                *ret_since = ready ? c->last_transition_time : 0;
        return ready;
}

spec_rollout spec_rollout_status(const spec_deployment *d, int64_t revision, char *msg,
                                 size_t size) {
        const spec_deployment_status *st = &d->status;
        const char *name = strempty(d->metadata.name);
        const spec_condition *p;

        if (revision > 0) {
                const char *cur = spec_map_get(&d->metadata.annotations, SPEC_ANN_REVISION);
                int64_t r = 0;
                if (!cur || safe_atoi64(cur, &r) < 0 || r != revision) {
                        snprintf(msg, size,
                                 "desired revision (%" PRId64 ") is different from the running "
                                 "revision (%s)",
                                 revision, strna(cur));
                        return SPEC_ROLLOUT_FAILED;
                }
        }
        if (d->metadata.generation > st->observed_generation) {
                snprintf(msg, size, "Waiting for deployment spec update to be observed...");
                return SPEC_ROLLOUT_WAITING;
        }
        p = spec_get_condition(st->conditions, st->n_conditions, "RolledBack");
        if (p && streq_ptr(p->status, "True")) {
                /* tend.io/auto-rollback: the rollout asked for failed */
                snprintf(msg, size, "deployment \"%s\" was rolled back automatically: %s", name,
                         strna(p->message));
                return SPEC_ROLLOUT_FAILED;
        }
        p = spec_get_condition(st->conditions, st->n_conditions, "Progressing");
        if (p && streq_ptr(p->reason, "WaitingForPromotion")) {
                /* tend.io/canary */
                snprintf(msg, size, "Waiting for deployment \"%s\" rollout: %s", name,
                         strna(p->message));
                return SPEC_ROLLOUT_WAITING;
        }
        if (p && streq_ptr(p->reason, "ProgressDeadlineExceeded")) {
                snprintf(msg, size, "deployment \"%s\" exceeded its progress deadline", name);
                return SPEC_ROLLOUT_FAILED;
        }
        if (st->updated_replicas < d->spec.replicas) {
                snprintf(msg, size,
                         "Waiting for deployment \"%s\" rollout to finish: %d out of %d new "
                         "replicas have been updated...",
                         name, st->updated_replicas, d->spec.replicas);
                return SPEC_ROLLOUT_WAITING;
        }
        if (st->replicas > st->updated_replicas) {
                snprintf(msg, size,
                         "Waiting for deployment \"%s\" rollout to finish: %d old replicas are "
                         "pending termination...",
                         name, st->replicas - st->updated_replicas);
                return SPEC_ROLLOUT_WAITING;
        }
        if (st->available_replicas < st->updated_replicas) {
                snprintf(msg, size,
                         "Waiting for deployment \"%s\" rollout to finish: %d of %d updated "
                         "replicas are available...",
                         name, st->available_replicas, st->updated_replicas);
                return SPEC_ROLLOUT_WAITING;
        }
        snprintf(msg, size, "deployment \"%s\" successfully rolled out", name);
        return SPEC_ROLLOUT_DONE;
}

/* The reason Kubernetes gives with a code (StatusReason), "" where none. */
static const char *reason_of(unsigned code) {
        switch (code) {
        case 400:
                return "BadRequest";
        case 401:
                return "Unauthorized";
        case 403:
                return "Forbidden";
        case 404:
                return "NotFound";
        case 405:
                return "MethodNotAllowed";
        case 409:
                return "Conflict";
        case 410:
                return "Expired";
        case 413:
                return "RequestEntityTooLarge";
        case 415:
                return "UnsupportedMediaType";
        case 422:
                return "Invalid";
        case 500:
                return "InternalError";
        case 503:
                return "ServiceUnavailable";
        case 504:
                return "Timeout";
        default:
                return "";
        }
}

/* A Kubernetes Status object. The message may quote what a client sent:
 * bytes that are not UTF-8 are written \xNN, so that it is still JSON. */
json_t *spec_status_json(unsigned code, const char *reason, const char *message, json_t *details) {
        _cleanup_free_ char *clean = utf8_escape_invalid(strempty(message));
        json_t *j = clean ? json_pack("{s:s, s:s, s:{}, s:s, s:s, s:s, s:i}", "kind", "Status",
                                      "apiVersion", "v1", "metadata", "status",
                                      code < 400 ? "Success" : "Failure", "message", clean,
                                      "reason", reason ?: reason_of(code), "code", (int) code)
                          : NULL;
        /* Always a details object: kubectl reads fields of it without a
         * nil check (debug's ephemeral containers, for one). */
        if (j && json_object_set_new(j, "details", details ?: json_object()) < 0)
                j = (json_decref(j), NULL);
        else if (!j)
                json_decref(details);
        return j;
}
