/* SPDX-License-Identifier: MIT */
#pragma once

/* JSON patches on jansson trees, for PATCH requests. */

#include <jansson.h>

/* RFC 7386 merge patch: objects merge recursively, null deletes, anything
 * else replaces. Returns the new document (a new reference). */
json_t *patch_merge(json_t *target, json_t *patch);

/* RFC 6902 JSON patch (add, remove, replace, move, copy, test) with RFC 6901
 * pointers. Applies to a copy; returns it, or NULL with *ret_error set
 * (new string) and nothing changed. */
json_t *patch_json(json_t *target, json_t *ops, char **ret_error);
