/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * What the runtime tests share: a manager on a private loop that records
 * every callback as an event, loop helpers that run until a condition
 * holds, and pod specs built through the real decoder.
 */

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "tend/runtime.h"

#define MAX_EVENTS 4096

typedef struct event {
        enum { EV_STARTED, EV_EXITED, EV_PROBE } type;
        rt_pod *pod;
        /* The pod's userdata: start() gives each pod its own, so that a pod
         * allocated where a freed one was is not taken for it. */
        void *id;
        rt_exit exit;
        rt_probe_type probe;
        bool ok;
        char message[256];
        usec_t at;
} event;

typedef struct harness {
        uv_loop_t loop;
        rt_manager *m;
        char state_dir[64];
        event events[MAX_EVENTS];
        size_t n_events;
        size_t n_exited;
        uintptr_t next_id;
        char orphans[8][128]; /* orphan_stopped: the units */
        size_t n_orphans;
} harness;

extern harness *H;
extern char testprog[4096]; /* tests/tend-testprog */

harness *harness_new(const rt_config *extra);
void harness_free(harness *h);
/* Runs the loop until pred() holds or timeout_ms passes; returns pred(). */
bool run_until(harness *h, bool (*pred)(harness *, void *), void *arg, unsigned timeout_ms);
void run_for(harness *h, unsigned ms);
event *find_event(harness *h, rt_pod *pod, int type);
bool pod_exited(harness *h, void *pod);
bool pod_started(harness *h, void *pod);
event *last_probe(harness *h, rt_pod *pod, rt_probe_type t);
/* A pod spec from YAML lines of a Deployment template's spec. */
spec_pod_spec *pod_spec(const char *yaml_container_extra, ...) _sentinel_;
void pod_spec_free(spec_pod_spec *s);
/* The annotations of the pod template s came from (a pod has them). */
const spec_map *pod_annotations(const spec_pod_spec *s);
/* "command: [testprog, ARGS]" as YAML lines; new string. */
char *cmd(const char *args);
rt_pod *start(harness *h, const char *name, spec_pod_spec *s);
char *read_log(harness *h, const char *pod);
bool log_contains(harness *h, void *arg);
bool wait_log(harness *h, const char *pod, const char *text);
