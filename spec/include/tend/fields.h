/* SPDX-License-Identifier: MIT */
#pragma once

/*
 * Field ownership, as Kubernetes' server-side apply keeps it: which field
 * manager set which fields of an object, in metadata.managedFields.
 *
 * Everything here is plain JSON. A "view" is the part of a Deployment that
 * is owned: {"metadata": {"labels", "annotations"}, "spec"} (status is the
 * controllers', the rest of metadata the server's). Objects merge field by
 * field, the lists with a merge key (containers, env: by name) item by item,
 * spec.selector and every other list as a whole: the schema Kubernetes
 * declares for the fields tend serves.
 *
 * managed is the metadata.managedFields array as stored: entries of
 * {manager, operation: Apply|Update, apiVersion, time, fieldsType: FieldsV1,
 * fieldsV1, subresource}. An entry is one (manager, operation, subresource).
 */

#include <jansson.h>
#include <stdbool.h>

/* The owned part of an object: its labels and annotations, and its
 * top-level fields but apiVersion, kind, metadata and status (a
 * Deployment's spec, a ConfigMap's data...). A new reference; NULL: out
 * of memory. obj NULL: an empty view. */
json_t *fields_view(json_t *obj);

/* Writes a view back into obj: its labels, annotations and owned
 * top-level fields replaced by the view's (absent ones removed). */
int fields_set_view(json_t *obj, json_t *view);

/* managed as given in a request, checked: entries' shape and fieldsV1's
 * keys (f:, k:, v:, i:, .). 0, or -EINVAL with *ret_error (new string). */
int fields_check(json_t *managed, char **ret_error);

/* (api_version: the object's, "apps/v1", written in the manager's entry) */
/* An Update (a create, replace or patch) by manager changing old_view into
 * new_view: the manager comes to own what it changed, others lose it.
 * subresource: NULL, or "scale" for the Scale. now: the RFC 3339 time, set
 * on the manager's entry when its fields change. Returns the new managed
 * array (a new reference), or NULL on out of memory. */
json_t *fields_update(json_t *managed, json_t *old_view, json_t *new_view, const char *manager,
                      const char *api_version, const char *subresource, const char *now);

/* Server-side apply of config (a view) by manager over live_view: the config
 * is merged in, what the manager applied before and no longer does is
 * removed (unless another manager owns it), and the manager owns exactly
 * what it applied. A change to a field another manager owns is a conflict:
 * without force, nothing is changed, and *ret_conflicts is a new array of
 * {manager, field} (field as Kubernetes prints it: .spec.replicas,
 * .spec.template.spec.containers[name="web"].command). With force, the
 * fields change owner. forgiven (a view, or NULL): a conflict on a field
 * whose live value is still what forgiven says is no conflict, and the
 * field changes owner as if forced: how kube-apiserver lets kubectl move
 * from client-side to server-side apply (forgiven: the last-applied
 * configuration, for the manager "kubectl" only).
 * Returns 0 with *ret_view and *ret_managed (new references), 1 on
 * conflicts, -EINVAL with *ret_error (a list item without its key), or
 * -ENOMEM. */
int fields_apply(json_t *managed, json_t *live_view, json_t *config, const char *manager,
                 const char *api_version, bool force, json_t *forgiven, const char *now,
                 json_t **ret_view, json_t **ret_managed, json_t **ret_conflicts, char **ret_error);
