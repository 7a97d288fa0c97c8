/* SPDX-License-Identifier: MIT */

/*
 * tend apply -f FILE|DIR|-: every manifest is checked here first (nothing
 * is sent if anything is wrong), then all objects go in one request to
 * tendd, which applies them all or none.
 */

#include <getopt.h>

#include "cli.h"

int cli_apply(int argc, char **argv) {
        static const struct option options[] = {
                { "filename", required_argument, NULL, 'f' },
                { "namespace", required_argument, NULL, 'n' },
                { "dry-run", no_argument, NULL, 'D' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        _cleanup_strv_free_ char **paths = NULL;
        _cleanup_(client_freep) client *c = NULL;
        spec_manifest m = {};
        spec_errors errs = {};
        json_t *items, *resp = NULL, *item;
        _cleanup_free_ char *body = NULL;
        bool dry_run = false;
        long code = 0;
        int opt, ret = 1;
        size_t i;

        optind = 1;
        while ((opt = getopt_long(argc, argv, "f:n:h", options, NULL)) >= 0)
                switch (opt) {
                case 'f':
                        (void) strv_extend(&paths, optarg);
                        break;
                case 'n':
                        cli.namespace = optarg;
                        break;
                case 'D':
                        dry_run = true;
                        break;
                case 'h':
                        printf("Usage: tend apply -f FILE|DIR|- [-f ...] [--dry-run]\n\n"
                               "Create the objects of the manifests (Deployments, ConfigMaps), or\n"
                               "update them to match. The input is checked as a whole first and\n"
                               "applied all or nothing. Prints KIND/NAME created|configured|"
                               "unchanged.\n\n"
                               "  -f, --filename PATH  a file, a directory (*.yaml, *.yml, "
                               "*.json),\n"
                               "                       or - for stdin; repeatable\n"
                               "  -n, --namespace NS   for objects that name no namespace\n"
                               "      --dry-run        check everything, change nothing\n");
                        return 0;
                default:
                        return 2;
                }
        if (!paths || optind < argc) {
                fprintf(stderr, "error: give the manifests with -f FILE, -f DIR or -f -\n");
                return 2;
        }

        for (char **p = paths; *p; p++)
                (void) spec_manifest_add_path(&m, *p, &errs);
        if (errs.n == 0)
                (void) spec_manifest_check(&m, &errs);
        if (errs.n > 0 || errs.dropped > 0) {
                spec_errors_print(&errs, stderr);
                fprintf(stderr, "error: nothing was applied\n");
                goto out;
        }
        if (m.n == 0) {
                fprintf(stderr, "error: no objects passed to apply\n");
                goto out;
        }

        items = json_array();
        for (i = 0; i < m.n; i++) {
                spec_manifest_item *it = &m.items[i];
                if (it->namespace_defaulted)
                        (void) free_and_strdup(&spec_object_meta(it->object)->namespace,
                                               cli.namespace);
                json_t *j = spec_encode(it->kind->type, it->object),
                       *spec = json_object_get(j, "spec");
                /* What the manifest leaves out, tendd keeps as it is (the
                 * replicas set by `tend scale`, a paused rollout). */
                if (it->deployment && !it->replicas_given)
                        (void) json_object_del(spec, "replicas");
                if (it->deployment && !it->paused_given)
                        (void) json_object_del(spec, "paused");
                json_array_append_new(items, j);
        }
        {
                json_t *list = json_pack("{s:s, s:s, s:o}", "apiVersion", "v1", "kind", "List",
                                         "items", items);
                body = json_dumps(list, JSON_COMPACT);
                json_decref(list);
        }
        c = cli_connect();
        if (!c || !body)
                goto out;
        if (client_request(c, "POST",
                           dry_run ? "/apis/tend.io/v1/apply?dryRun=All" : "/apis/tend.io/v1/apply",
                           "application/json", body, &code, &resp) < 0)
                goto out;
        if (code != 200) {
                client_print_error(code, resp);
                fprintf(stderr, "error: nothing was applied\n");
                goto out;
        }
        json_array_foreach (json_object_get(resp, "items"), i, item) {
                const spec_kind *k = spec_kind_written(
                        NULL, json_string_value(json_object_get(item, "kind")) ?: "Deployment");
                _cleanup_free_ char *what = k ? spec_kind_printed(k) : NULL;
                printf("%s/%s %s%s\n", what ?: "deployment.apps",
                       json_string_value(json_object_get(item, "name")),
                       json_string_value(json_object_get(item, "result")),
                       dry_run ? " (dry run)" : "");
        }
        ret = 0;
out:
        json_decref(resp);
        spec_manifest_done(&m);
        spec_errors_done(&errs);
        return ret;
}
