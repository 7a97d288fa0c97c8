/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * tendd --manifests DIR: a directory whose *.yaml, *.yml and *.json files
 * are the declaration (GitOps-style). Each file is applied all or nothing;
 * its deployments carry the annotation tend.io/source (its path). A file
 * that disappears takes its deployments with it; a deployment that leaves
 * a file goes too. An invalid file changes nothing (the last good version
 * keeps running) and says why: a Warning event and a log line with
 * file:line:col. An empty file, or one declaring what an earlier file
 * (by name) declares, is refused the same way; a directory that cannot be
 * read deletes nothing. The path is followed, not resolved once: a symlink
 * swapped to another directory, or the directory made anew, is watched
 * again. The directory is synced at start, on change (inotify
 * through libuv, debounced), on SIGHUP, and every resync period — which is
 * also when a change made to one of its deployments through the API is
 * reverted.
 */

#include <uv.h>

#include "agent-loop.h"

typedef struct manifest_dir manifest_dir;

/* dir must exist. The first sync runs before this returns. */
int manifest_dir_new(uv_loop_t *loop, agent_loop *al, const char *dir, usec_t resync,
                     manifest_dir **ret, char **ret_error);
/* Reads the directory again now (SIGHUP): its files are read and checked
 * in the loop's thread pool, then applied on the loop. */
void manifest_dir_sync(manifest_dir *m);
/* Frees itself once libuv has closed its handles. Accepts NULL. */
void manifest_dir_close(manifest_dir *m);
