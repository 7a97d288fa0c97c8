/* SPDX-License-Identifier: MIT */
#pragma once

/* JSON patches on jansson trees, for PATCH requests. */

#include <jansson.h>

/* RFC 7386 merge patch: objects merge recursively, null deletes, anything
 * else replaces. Returns the new document (a new reference), or NULL with
 * *ret_error set (new string; NULL when out of memory) when the result is
 * over the limits of a manifest (SPEC_MAX_*). */
json_t *patch_merge(json_t *target, json_t *patch, char **ret_error);

/* Kubernetes' strategic merge patch: a merge patch in which containers and
 * env merge by name, with kubectl's directives ($patch, $setElementOrder/,
 * $deleteFromPrimitiveList/, $retainKeys). As patch_merge for the result
 * and errors; an unknown directive or a list element without its merge key
 * is an error. */
json_t *patch_strategic(json_t *target, json_t *patch, char **ret_error);

/* RFC 6902 JSON patch (add, remove, replace, move, copy, test) with strict
 * RFC 6901 pointers. Applies to a copy; returns it, or NULL with *ret_error
 * set (new string; NULL when out of memory) and nothing changed. Bounded:
 * the ops add at most SPEC_MAX_NODES values in all, and the result is within
 * the limits of a manifest. */
json_t *patch_json(json_t *target, json_t *ops, char **ret_error);
