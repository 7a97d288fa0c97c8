/* SPDX-License-Identifier: MIT */

/* HTTP to tendd over its unix socket, through libcurl: no HTTP code of our
 * own. */

#include <ctype.h>
#include <stdio.h>
#include <strings.h>
#include <sys/stat.h>

#include "cli.h"

struct client {
        char *socket;
        CURL *curl;
        char errbuf[CURL_ERROR_SIZE];
        bool quiet; /* connection errors are the caller's to report */
};

client *client_free(client *c) {
        if (!c)
                return NULL;
        if (c->curl)
                curl_easy_cleanup(c->curl);
        free(c->socket);
        free(c);
        return NULL;
}

int client_open(const char *socket, client **ret) {
        client *c = new0(client, 1);

        if (!c)
                return -ENOMEM;
        (void) curl_global_init(CURL_GLOBAL_DEFAULT);
        c->socket = strdup(socket);
        c->curl = curl_easy_init();
        if (!c->socket || !c->curl) {
                client_free(c);
                return -ENOMEM;
        }
        *ret = c;
        return 0;
}

const char *client_socket(const client *c) {
        return c->socket;
}

typedef struct sink {
        tend_buf *buf;
        client_line_fn on_line;
        void *userdata;
        tend_buf partial;
        bool stop;
} sink;

static size_t on_write(char *p, size_t size, size_t nmemb, void *userdata) {
        sink *k = userdata;
        size_t n = size * nmemb;

        if (k->buf)
                return tend_buf_add(k->buf, p, n) < 0 ? 0 : n;
        /* streaming: one call per line */
        for (size_t i = 0; i < n; i++) {
                if (p[i] != '\n') {
                        if (tend_buf_add(&k->partial, &p[i], 1) < 0)
                                return 0;
                        continue;
                }
                if (k->on_line(tend_buf_str(&k->partial), k->partial.len, k->userdata) < 0) {
                        k->stop = true;
                        return 0; /* aborts the transfer */
                }
                tend_buf_reset(&k->partial);
        }
        return n;
}

void client_report_failure(const char *socket, CURL *easy, CURLcode code, const char *errbuf) {
        long os_errno = 0;
        struct stat st;
        char what[128];

        if (code != CURLE_COULDNT_CONNECT && code != CURLE_COULDNT_RESOLVE_HOST) {
                fprintf(stderr, "talking to tendd at %s: %s\n", socket,
                        errbuf && *errbuf ? errbuf : curl_easy_strerror(code));
                return;
        }
        /* Why the connect failed: the socket's absence, its permissions, or
         * nobody listening. */
        (void) curl_easy_getinfo(easy, CURLINFO_OS_ERRNO, &os_errno);
        if (stat(socket, &st) < 0)
                os_errno = errno;
        else if (os_errno == 0)
                os_errno = ECONNREFUSED;
        if (os_errno == EACCES || os_errno == EPERM) {
                fprintf(stderr,
                        "cannot reach tendd at %s: permission denied (the socket is for root, "
                        "tendd's user and its --socket-group)\n",
                        socket);
                return;
        }
        snprintf(what, sizeof what, "%s", strerror((int) os_errno));
        what[0] = (char) tolower((unsigned char) what[0]);
        fprintf(stderr, "cannot reach tendd at %s: %s (is tendd running?)\n", socket, what);
}

/* The reason curl failed, the way a user wants to read it. */
static int connection_error(client *c, CURLcode code) {
        if (!c->quiet)
                client_report_failure(c->socket, c->curl, code, c->errbuf);
        return -ECONNREFUSED;
}

void client_set_quiet(client *c, bool quiet) {
        c->quiet = quiet;
}

/* "Warning: 299 - \"text\"" → "Warning: text" on stderr, as kubectl. */
static size_t on_header(char *p, size_t size, size_t nmemb, void *userdata) {
        size_t n = size * nmemb;
        const char *v, *q, *end;

        if (n > 8 && strncasecmp(p, "Warning:", 8) == 0) {
                v = p + 8;
                q = memchr(v, '"', (size_t) (p + n - v));
                end = q ? memchr(q + 1, '"', (size_t) (p + n - q - 1)) : NULL;
                if (q && end)
                        fprintf(stderr, "Warning: %.*s\n", (int) (end - q - 1), q + 1);
        }
        return n;
}

static int perform(client *c, const char *method, const char *path, const char *content_type,
                   const char *body, sink *k, long *ret_code) {
        _cleanup_free_ char *url = strprintf("http://localhost%s", path);
        struct curl_slist *headers = NULL;
        CURLcode code;

        if (!url)
                return -ENOMEM;
        curl_easy_reset(c->curl);
        c->errbuf[0] = 0;
        curl_easy_setopt(c->curl, CURLOPT_UNIX_SOCKET_PATH, c->socket);
        curl_easy_setopt(c->curl, CURLOPT_URL, url);
        curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, c->errbuf);
        curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(c->curl, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, k);
        curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
        headers = curl_slist_append(headers, "Accept: application/json");
        headers = curl_slist_append(headers, "User-Agent: tend/" TEND_VERSION);
        if (body) {
                _cleanup_free_ char *ct = strprintf("Content-Type: %s",
                                                    content_type ?: "application/json");
                headers = curl_slist_append(headers, ct);
                curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
                curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE, (long) strlen(body));
        }
        curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, headers);
        code = curl_easy_perform(c->curl);
        curl_slist_free_all(headers);
        if (code == CURLE_WRITE_ERROR && k->stop)
                code = CURLE_OK; /* the line callback said stop */
        if (code != CURLE_OK)
                return connection_error(c, code);
        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, ret_code);
        return 0;
}

int client_request(client *c, const char *method, const char *path, const char *content_type,
                   const char *body, long *ret_code, json_t **ret_json) {
        tend_buf buf = TEND_BUF_INIT(256u << 20);
        sink k = { .buf = &buf };
        json_error_t je;
        int r;

        r = perform(c, method, path, content_type, body, &k, ret_code);
        if (r < 0) {
                tend_buf_free(&buf);
                return r;
        }
        *ret_json = json_loadb(tend_buf_str(&buf), buf.len, 0, &je);
        tend_buf_free(&buf);
        if (!*ret_json) {
                fprintf(stderr, "tendd answered %ld with something that is not JSON\n", *ret_code);
                return -EBADMSG;
        }
        return 0;
}

int client_request_text(client *c, const char *path, long *ret_code, char **ret_text) {
        tend_buf buf = TEND_BUF_INIT(256u << 20);
        sink k = { .buf = &buf };
        int r = perform(c, "GET", path, NULL, NULL, &k, ret_code);

        if (r < 0) {
                tend_buf_free(&buf);
                return r;
        }
        *ret_text = tend_buf_take(&buf);
        return *ret_text ? 0 : -ENOMEM;
}

int client_stream(client *c, const char *path, client_line_fn on_line, void *userdata,
                  long *ret_code) {
        sink k = { .on_line = on_line, .userdata = userdata, .partial = TEND_BUF_INIT(64u << 20) };
        int r = perform(c, "GET", path, NULL, NULL, &k, ret_code);

        if (r >= 0 && k.partial.len > 0 && !k.stop)
                (void) on_line(tend_buf_str(&k.partial), k.partial.len, userdata);
        tend_buf_free(&k.partial);
        return r;
}

/* "Error from server (NotFound): deployments.apps "x" not found" */
int client_print_error(long code, json_t *j) {
        const char *reason = json_string_value(json_object_get(j, "reason"));
        const char *msg = json_string_value(json_object_get(j, "message"));

        if (!isempty(reason))
                fprintf(stderr, "Error from server (%s): %s\n", reason, strna(msg));
        else
                fprintf(stderr, "Error from server (%ld): %s\n", code, strna(msg));
        return -EIO;
}

char *client_escape(const char *s) {
        CURL *e = curl_easy_init();
        char *esc = e ? curl_easy_escape(e, s, 0) : NULL, *r = esc ? strdup(esc) : NULL;
        curl_free(esc);
        if (e)
                curl_easy_cleanup(e);
        return r;
}
