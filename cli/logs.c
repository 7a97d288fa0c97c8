/* SPDX-License-Identifier: MIT */

/*
 * tend logs POD [-f] [--previous] [--tail=N]
 * tend logs deploy/NAME [-f] [--tail=N]: every pod of the deployment, each
 * line prefixed with the pod's name (several streams at once with -f,
 * through curl's multi interface).
 */

#include <getopt.h>
#include <inttypes.h>

#include "cli.h"

typedef struct stream {
        char *pod;
        CURL *easy;
        tend_buf partial;
        tend_buf error; /* the body of an answer other than 200 (a Status) */
        bool prefix;
        char errbuf[CURL_ERROR_SIZE];
} stream;

static size_t on_data(char *p, size_t size, size_t nmemb, void *userdata) {
        stream *s = userdata;
        size_t n = size * nmemb;
        long code = 0;

        (void) curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &code);
        if (code != 200)
                return tend_buf_add(&s->error, p, n) < 0 ? 0 : n;
        if (!s->prefix) {
                fwrite(p, 1, n, stdout);
                fflush(stdout);
                return n;
        }
        for (size_t i = 0; i < n; i++) {
                if (p[i] != '\n') {
                        if (tend_buf_add(&s->partial, &p[i], 1) < 0)
                                return 0;
                        continue;
                }
                printf("[%s] %s\n", s->pod, tend_buf_str(&s->partial));
                tend_buf_reset(&s->partial);
        }
        fflush(stdout);
        return n;
}

/* extra: more query parameters ("a=b&"), from --since, --since-time,
 * --timestamps. */
static char *log_path(const char *pod, bool follow, bool previous, int64_t tail,
                      const char *extra) {
        _cleanup_buf_ tend_buf b = TEND_BUF_INIT(4096);
        _cleanup_free_ char *ens = client_escape(cli.namespace), *epod = client_escape(pod);

        (void) tend_buf_addf(&b, "http://localhost/api/v1/namespaces/%s/pods/%s/log?",
                             strempty(ens), strempty(epod));
        if (follow)
                (void) tend_buf_adds(&b, "follow=true&");
        if (previous)
                (void) tend_buf_adds(&b, "previous=true&");
        if (tail >= 0)
                (void) tend_buf_addf(&b, "tailLines=%" PRId64 "&", tail);
        (void) tend_buf_adds(&b, extra);
        return tend_buf_take(&b);
}

/* Streams the logs of several pods at once; returns 0 if every request
 * succeeded. *ret_gone: how many pods were not found (404); with
 * quiet_gone, those errors are not printed (the caller looks again). */
static int stream_logs(char **pods, bool prefix, bool follow, bool previous, int64_t tail,
                       const char *extra, bool quiet_gone, size_t *ret_gone) {
        size_t n = strv_length(pods);
        stream *ss = new0(stream, n ?: 1);
        CURLM *m = curl_multi_init();
        int running = 0, ret = 0;

        *ret_gone = 0;
        if (!ss || !m)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                _cleanup_free_ char *url = log_path(pods[i], follow, previous, tail, extra);
                ss[i].pod = pods[i];
                ss[i].prefix = prefix;
                ss[i].partial = TEND_BUF_INIT(1 << 20);
                ss[i].error = TEND_BUF_INIT(1 << 20);
                ss[i].easy = curl_easy_init();
                curl_easy_setopt(ss[i].easy, CURLOPT_ERRORBUFFER, ss[i].errbuf);
                curl_easy_setopt(ss[i].easy, CURLOPT_UNIX_SOCKET_PATH, cli.socket);
                curl_easy_setopt(ss[i].easy, CURLOPT_PRIVATE, &ss[i]);
                curl_easy_setopt(ss[i].easy, CURLOPT_URL, url);
                curl_easy_setopt(ss[i].easy, CURLOPT_WRITEFUNCTION, on_data);
                curl_easy_setopt(ss[i].easy, CURLOPT_WRITEDATA, &ss[i]);
                curl_multi_add_handle(m, ss[i].easy);
        }
        do {
                CURLMcode mc = curl_multi_perform(m, &running);
                if (mc == CURLM_OK && running)
                        mc = curl_multi_poll(m, NULL, 0, 1000, NULL);
                if (mc != CURLM_OK)
                        break;
        } while (running);

        CURLMsg *msg;
        int left;
        while ((msg = curl_multi_info_read(m, &left)))
                if (msg->msg == CURLMSG_DONE && msg->data.result != CURLE_OK) {
                        stream *s = NULL;
                        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &s);
                        client_report_failure(cli.socket, msg->easy_handle, msg->data.result,
                                              s ? s->errbuf : NULL);
                        ret = -EIO;
                }
        for (size_t i = 0; i < n; i++) {
                long code = 0;
                curl_easy_getinfo(ss[i].easy, CURLINFO_RESPONSE_CODE, &code);
                if (code != 0 && code != 200) {
                        /* The server's Status, as for every other command. */
                        json_t *j = json_loadb(ss[i].error.data ?: "", ss[i].error.len, 0, NULL);
                        *ret_gone += code == 404;
                        if (code != 404 || !quiet_gone)
                                client_print_error(code, j);
                        json_decref(j);
                        ret = -EIO;
                }
                if (ss[i].partial.len)
                        printf("[%s] %s\n", ss[i].pod, tend_buf_str(&ss[i].partial));
                curl_multi_remove_handle(m, ss[i].easy);
                curl_easy_cleanup(ss[i].easy);
                tend_buf_free(&ss[i].partial);
                tend_buf_free(&ss[i].error);
        }
        curl_multi_cleanup(m);
        free(ss);
        return ret;
}

/* The pods of deployment name whose logs are read: by its selector, the
 * running ones; if none runs (all waiting out a crash-loop back-off), the
 * waiting ones, whose --previous is what one wants to read then. */
static int deployment_pods(client *c, const spec_kind *r, const char *name, char ***ret) {
        spec_deployment *d = cli_fetch(c, r, name);
        _cleanup_buf_ tend_buf sel = TEND_BUF_INIT(4096);
        _cleanup_free_ char *esel = NULL, *path = NULL;
        _cleanup_strv_free_ char **pods = NULL, **waiting = NULL;
        json_t *resp = NULL, *item;
        long code;
        size_t i;

        if (!d)
                return -ENOENT;
        for (size_t k = 0; d->spec.selector && k < d->spec.selector->match_labels.n; k++)
                (void) tend_buf_addf(&sel, "%s%s=%s", k ? "," : "",
                                     d->spec.selector->match_labels.items[k].key,
                                     d->spec.selector->match_labels.items[k].value);
        spec_deployment_free(d);
        esel = client_escape(tend_buf_str(&sel));
        path = strprintf("/api/v1/namespaces/%s/pods?labelSelector=%s", cli.namespace,
                         strempty(esel));
        if (!path || client_request(c, "GET", path, NULL, NULL, &code, &resp) < 0)
                return -EIO;
        json_array_foreach (json_object_get(resp, "items"), i, item) {
                spec_pod *p = cli_decode(&spec_type_pod, item);
                if (p && !p->metadata.deletion_timestamp && p->status.phase == SPEC_POD_RUNNING)
                        (void) strv_extend(&pods, p->metadata.name);
                else if (p && !p->metadata.deletion_timestamp &&
                         p->status.phase == SPEC_POD_PENDING)
                        (void) strv_extend(&waiting, p->metadata.name);
                spec_pod_free(p);
        }
        json_decref(resp);
        if (!pods)
                pods = TAKE_PTR(waiting);
        if (!pods) {
                fprintf(stderr, "error: deployment \"%s\" has no running pods\n", name);
                return -ENOENT;
        }
        strv_free(*ret);
        *ret = TAKE_PTR(pods);
        return 0;
}

int cli_logs(int argc, char **argv) {
        static const struct option options[] = {
                { "follow", no_argument, NULL, 'f' },
                { "previous", no_argument, NULL, 'p' },
                { "tail", required_argument, NULL, 't' },
                { "since", required_argument, NULL, 's' },
                { "since-time", required_argument, NULL, 'S' },
                { "timestamps", no_argument, NULL, 'T' },
                { "namespace", required_argument, NULL, 'n' },
                { "help", no_argument, NULL, 'h' },
                {},
        };
        _cleanup_(client_freep) client *c = NULL;
        _cleanup_strv_free_ char **pods = NULL;
        const spec_kind *ref = NULL;
        const char *deployment = NULL;
        bool follow = false, previous = false, prefix = false;
        int64_t tail = -1;
        _cleanup_buf_ tend_buf extra = TEND_BUF_INIT(4096);
        int opt;

        optind = 1;
        while ((opt = getopt_long(argc, argv, "fpn:h", options, NULL)) >= 0)
                switch (opt) {
                case 'f':
                        follow = true;
                        break;
                case 'p':
                        previous = true;
                        break;
                case 't':
                        if (safe_atoi64(optarg, &tail) < 0 || tail < -1) {
                                fprintf(stderr, "error: --tail %s: expected a number of lines\n",
                                        optarg);
                                return 2;
                        }
                        break;
                case 's': {
                        usec_t d;
                        if (parse_duration(optarg, &d) < 0 || d < USEC_PER_SEC) {
                                fprintf(stderr,
                                        "error: --since %s: expected a duration of a "
                                        "second or more (30s, 5m, 1h)\n",
                                        optarg);
                                return 2;
                        }
                        (void) tend_buf_addf(&extra, "sinceSeconds=%llu&",
                                             (unsigned long long) (d / USEC_PER_SEC));
                        break;
                }
                case 'S': {
                        usec_t t;
                        _cleanup_free_ char *e = client_escape(optarg);
                        if (parse_timestamp(optarg, &t) < 0 || !e) {
                                fprintf(stderr,
                                        "error: --since-time %s: expected an RFC 3339 "
                                        "time (2026-01-02T15:04:05Z)\n",
                                        optarg);
                                return 2;
                        }
                        (void) tend_buf_addf(&extra, "sinceTime=%s&", e);
                        break;
                }
                case 'T':
                        (void) tend_buf_adds(&extra, "timestamps=true&");
                        break;
                case 'n':
                        cli.namespace = optarg;
                        break;
                case 'h':
                        printf("Usage: tend logs POD|deploy/NAME [-f] [--previous] [--tail=N] "
                               "[--since=D|--since-time=T] [--timestamps]\n\n"
                               "  -f, --follow      keep printing as the pod writes\n"
                               "  -p, --previous    the instance this pod replaced (the last "
                               "exit)\n"
                               "      --tail N      only the last N lines\n"
                               "      --since D     only lines written in the last D (30s, 5m, "
                               "1h)\n"
                               "      --since-time T  only lines written at or after T (RFC 3339)\n"
                               "      --timestamps  each line starts with when it was written\n\n"
                               "For a deployment, every pod's lines, prefixed with its name.\n"
                               "A line's time is when tendd saw it written: right within a "
                               "quarter second.\n");
                        return 0;
                default:
                        return 2;
                }
        if (optind + 1 != argc) {
                fprintf(stderr, "error: expected tend logs POD (or deploy/NAME)\n");
                return 2;
        }
        c = cli_connect();
        if (!c)
                return 1;

        if (strchr(argv[optind], '/')) {
                const spec_kind *r;
                const char *name;
                if (cli_parse_ref(argv[optind], &r, &name) < 0)
                        return 1;
                ref = r;
                if (r->type == &spec_type_pod)
                        (void) strv_extend(&pods, name);
                else if (r->type == &spec_type_deployment) {
                        deployment = name;
                        prefix = true;
                        if (deployment_pods(c, r, name, &pods) < 0)
                                return 1;
                } else {
                        fprintf(stderr, "error: logs are of pods or deployments\n");
                        return 1;
                }
        } else {
                /* A plain name: check it exists, for a clear error. */
                spec_pod *p = cli_fetch(c, spec_kind_named("pods"), argv[optind]);
                if (!p)
                        return 1;
                spec_pod_free(p);
                (void) strv_extend(&pods, argv[optind]);
        }
        /* A replica's pod is replaced at each crash (a new name): the one
         * listed may be gone when its log is asked for. Then the
         * deployment's pods are looked up again (a deployment of one pod:
         * nothing was written yet). */
        for (int attempt = 0;; attempt++) {
                bool again = deployment && attempt < 2 && strv_length(pods) == 1;
                size_t gone = 0;
                if (stream_logs(pods, prefix, follow, previous, tail, tend_buf_str(&extra), again,
                                &gone) >= 0)
                        return 0;
                if (!again || gone == 0 || deployment_pods(c, ref, deployment, &pods) < 0)
                        return 1;
        }
}
