/* SPDX-License-Identifier: MIT */

/*
 * fuzz-http: the API's whole request path, from method, path, query,
 * headers and body to the answer, without a socket (api_server_answer):
 * routing, bodies, patches, selectors, the handlers and a real store.
 *
 * Input, as an HTTP request is written:
 *   METHOD PATH[?QUERY]\n
 *   Header: value\n            (any number)
 *   \n
 *   body
 * The path and the query are percent-decoded as libmicrohttpd decodes them.
 * One tendd core (a state dir, the store, the agent, the API) serves every
 * input of a run; its loop never runs, so no process is started.
 *
 * Properties (a violation aborts):
 *  - the status is a 2xx, 3xx or 4xx: never a 5xx, which would say tendd
 *    failed where the request was at fault;
 *  - every answer is UTF-8, and an error is a JSON Status with its code;
 *  - a refused request (4xx) changed nothing in the store;
 *  - and, from the sanitizers, no leak, no memory error, no UB.
 */

#include <ctype.h>
#include <jansson.h>
#include <uv.h>

#include "agent-loop.h"
#include "tend/api.h"
#include "fuzz.h"

static uv_loop_t loop;
static agent_loop *al;
static api_server *api;

static void setup(void) {
        char dir[] = "/tmp/tend-fuzz-http-XXXXXX";
        _cleanup_free_ char *state = NULL, *sock = NULL, *err = NULL;

        log_set_max_level(LOG_LEVEL_ERR);
        fuzz_check(mkdtemp(dir), "mkdtemp");
        state = strprintf("%s/state", dir);
        sock = strprintf("%s/tend.sock", dir);
        fuzz_check(state && sock, "out of memory");
        fuzz_check(uv_loop_init(&loop) == 0, "uv_loop_init");
        fuzz_check(
                agent_loop_new(&loop,
                               &(agent_loop_config){
                                       .state_dir = state,
                                       .node_name = "fuzz",
                                       .systemd_bus = RT_BUS_NONE,
                                       /* (no pod runs: no cgroups made, none left when it exits) */
                                       .cgroups = RT_CGROUPS_OFF },
                               &al, &err) >= 0,
                "agent_loop_new: %s", strna(err));
        fuzz_check(api_server_new(&(api_config){ .loop = &loop,
                                                 .agent = agent_loop_agent(al),
                                                 .state_dir = state,
                                                 .socket_path = sock },
                                  &api, &err) >= 0,
                   "api_server_new: %s", strna(err));
}

static int hex(char c) {
        return isdigit((unsigned char) c)    ? c - '0'
               : isxdigit((unsigned char) c) ? (tolower((unsigned char) c) - 'a' + 10)
                                             : -1;
}

/* In place, as MHD: %XX decoded (a bad escape is kept), '+' a space in a
 * query. */
static void unescape(char *s, bool query) {
        char *o = s;
        for (char *p = s; *p; p++) {
                if (*p == '%' && hex(p[1]) >= 0 && hex(p[2]) >= 0) {
                        *o++ = (char) (hex(p[1]) * 16 + hex(p[2]));
                        p += 2;
                } else
                        *o++ = query && *p == '+' ? ' ' : *p;
        }
        *o = 0;
}

/* Splits "a=1&b&c=%41" into name, value pairs (NULL-terminated), in place. */
static const char **split_query(char *q) {
        size_t n = 0, cap = 2;
        const char **kv = malloc(sizeof *kv * (cap + 1));

        fuzz_check(kv, "out of memory");
        for (char *save = NULL, *part = q ? strtok_r(q, "&", &save) : NULL; part;
             part = strtok_r(NULL, "&", &save)) {
                char *eq = strchr(part, '=');
                if (n + 2 >= cap) {
                        cap *= 2;
                        kv = realloc(kv, sizeof *kv * (cap + 1));
                        fuzz_check(kv, "out of memory");
                }
                if (eq)
                        *eq = 0;
                unescape(part, true);
                if (eq)
                        unescape(eq + 1, true);
                kv[n++] = part;
                kv[n++] = eq ? eq + 1 : "";
        }
        kv[n] = NULL;
        return kv;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = fuzz_strndup(data, size), *answer = NULL;
        _cleanup_free_ const char **args = NULL, **headers = NULL;
        char *line, *end, *query, *method, *url, *p;
        size_t n_headers = 0;
        const char *body = "";
        size_t body_len = 0;
        uint64_t rv;
        unsigned code;

        if (!api)
                setup();
        /* the request line */
        end = strchr(text, '\n');
        if (!end)
                return 0;
        *end = 0;
        line = text;
        method = line;
        url = strchr(line, ' ');
        if (!url || url == method)
                return 0;
        *url++ = 0;
        query = strchr(url, '?');
        if (query)
                *query++ = 0;
        unescape(url, false);
        /* headers, up to a blank line */
        headers = calloc(2 * 64 + 1, sizeof *headers);
        fuzz_check(headers, "out of memory");
        for (p = end + 1; p < text + size;) {
                char *nl = strchr(p, '\n'), *colon;
                if (!nl)
                        nl = p + strlen(p);
                if (nl == p) { /* the blank line: the body follows */
                        p = nl + (*nl ? 1 : 0);
                        break;
                }
                *nl = 0;
                colon = strchr(p, ':');
                if (colon && n_headers < 2 * 64) {
                        *colon = 0;
                        headers[n_headers++] = p;
                        headers[n_headers++] = colon[1] == ' ' ? colon + 2 : colon + 1;
                }
                p = nl + 1;
        }
        if (p < text + size) {
                body = p;
                body_len = (size_t) (text + size - p);
        }
        args = split_query(query);

        rv = store_resource_version(agent_loop_store(al));
        code = api_server_answer(api,
                                 &(api_request){ .method = method,
                                                 .url = url,
                                                 .args = args,
                                                 .headers = headers,
                                                 .body = body,
                                                 .body_len = body_len },
                                 &answer);
        if (getenv("FUZZ_VERBOSE"))
                fprintf(stderr, "fuzz-http: %s %s -> %u\n", method, url, code);
        fuzz_check(code >= 200 && code < 500, "%s %s: HTTP %u: %s", method, url, code,
                   strna(answer));
        if (answer)
                fuzz_check(fuzz_utf8_valid(answer), "%s %s: HTTP %u: the answer is not UTF-8",
                           method, url, code);
        if (code >= 400) {
                json_error_t e;
                json_t *j = json_loads(answer ?: "", 0, &e);
                fuzz_check(j && json_is_object(j) &&
                                   streq_ptr(json_string_value(json_object_get(j, "kind")),
                                             "Status") &&
                                   json_integer_value(json_object_get(j, "code")) == code,
                           "%s %s: HTTP %u is not a Status with its code: %s", method, url, code,
                           strna(answer));
                json_decref(j);
                fuzz_check(store_resource_version(agent_loop_store(al)) == rv,
                           "%s %s: HTTP %u, but the store changed", method, url, code);
        }
        return 0;
}
