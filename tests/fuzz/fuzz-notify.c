/* SPDX-License-Identifier: MIT */

/*
 * fuzz-notify: datagrams on a pod's notify socket, with ancillary data, read
 * by the runtime's receive path (rt__notify_receive, runtime/notify.c)
 * through a real socket, as a pod or a stranger sends them.
 *
 * Input: records, one per datagram: a flags byte, a length byte (the
 * payload's, cut at the input's end), the payload. Flags:
 *   bit 0     sent with the credentials of pid 1, not the fuzzer's own (a
 *             stranger: root may name another process; the pod is the
 *             fuzzer itself)
 *   bits 1-3  descriptors sent with it: 0-7, of the kinds below
 *   bit 4     one of them is a TCP socket that lingers 5 s on close, with
 *             unsent data (closing it plainly would hold the loop 5 s)
 *   bit 5     the payload is repeated up to 5000 bytes (past the 4 KiB a
 *             message may have: it is dropped whole)
 *   bit 6     the receiving socket does not refuse descriptors (where the
 *             kernel can refuse them, Linux 6.16: SO_PASSRIGHTS; the other
 *             half of the inputs tests the kernels that cannot)
 *
 * Properties (a violation aborts):
 *  - a message from the pod, within the size, reaches on_line line by
 *    line, exactly: its bytes split at '\n', nothing added or lost;
 *  - a stranger's message, or an oversized one, gives no line; a
 *    stranger's within the size is counted as refused;
 *  - every descriptor that arrived is closed: the process has as many
 *    open as before;
 *  - no read waits: the receive of a batch takes under a second, lingering
 *    sockets included;
 *  - at most 16 datagrams per call (the loop's fairness to other work).
 */

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "fuzz.h"
#include "rt-internal.h"

typedef struct heard {
        tend_buf text; /* lines, each followed by '\n' */
        size_t lines;
} heard;

static bool on_line(const char *line, size_t len, void *userdata) {
        heard *h = userdata;

        fuzz_check(len <= NOTIFY_MESSAGE_MAX, "a line of %zu bytes", len);
        fuzz_check(tend_buf_add(&h->text, line, len) >= 0 && tend_buf_adds(&h->text, "\n") >= 0,
                   "out of memory");
        h->lines++;
        return true;
}

static unsigned open_fds(void) {
        unsigned n = 0;

        for (int fd = 0; fd < 4096; fd++)
                if (fcntl(fd, F_GETFD) >= 0)
                        n++;
        return n;
}

static usec_t now_usec(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (usec_t) ts.tv_sec * USEC_PER_SEC + (usec_t) ts.tv_nsec / 1000;
}

/* The accepted ends of lingering sockets: kept open (their windows full)
 * until the receive is over, so that a plain close() would wait. */
static int peers[8];
static unsigned n_peers;

static void close_peers(void) {
        for (unsigned i = 0; i < n_peers; i++)
                safe_close(peers[i]);
        n_peers = 0;
}

/* A connected TCP socket on loopback with data its peer does not take (the
 * peer's window is full) and SO_LINGER 5 s: its last close() would wait. */
static int lingering_socket(void) {
        struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t al = sizeof a;
        int small = 4096;
        struct linger lg = { .l_onoff = 1, .l_linger = 5 };
        _cleanup_close_ int l = -EBADF, c = -EBADF;
        static char junk[1 << 16];
        int s;

        if (n_peers >= ELEMENTSOF(peers))
                return -EBADF;
        l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (l < 0)
                return -EBADF;
        (void) setsockopt(l, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
        if (bind(l, (struct sockaddr *) &a, sizeof a) < 0 || listen(l, 1) < 0 ||
            getsockname(l, (struct sockaddr *) &a, &al) < 0)
                return -EBADF;
        c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (c < 0)
                return -EBADF;
        (void) setsockopt(c, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
        if (connect(c, (struct sockaddr *) &a, sizeof a) < 0 && errno != EINPROGRESS)
                return -EBADF;
        s = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        if (s < 0)
                return -EBADF;
        peers[n_peers++] = s;
        while (send(c, junk, sizeof junk, MSG_NOSIGNAL) > 0) {
        }
        (void) setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        return TAKE_FD(c);
}

/* One datagram as the input describes it; false: it could not be sent
 * (the kernel refused its descriptors or its credentials). */
static bool send_one(int tx, uint8_t flags, const uint8_t *payload, size_t len, char *msg_buf,
                     size_t *ret_len) {
        int fds[8];
        size_t n_fds = (flags >> 1) & 7, n_open = 0;
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(struct ucred)) + CMSG_SPACE(sizeof fds)];
        } control = {};
        struct iovec iov;
        struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control };
        struct cmsghdr *c;
        struct ucred cred = { .pid = (flags & 1) ? 1 : getpid(), .uid = getuid(), .gid = getgid() };
        size_t size = len;
        bool sent;

        if (flags & 0x20)
                for (size = 0; len > 0 && size + len <= 5000; size += len)
                        memcpy(msg_buf + size, payload, len);
        else
                memcpy(msg_buf, payload, len);
        iov = (struct iovec){ msg_buf, size };
        *ret_len = size;

        for (size_t i = 0; i < n_fds; i++) {
                int fd = (flags & 0x10) && i == 0 ? lingering_socket()
                         : i % 2                  ? open("/dev/null", O_RDONLY | O_CLOEXEC)
                                                  : dup(tx);
                if (fd < 0)
                        break;
                fds[n_open++] = fd;
        }
        c = (struct cmsghdr *) control.buf;
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_CREDENTIALS;
        c->cmsg_len = CMSG_LEN(sizeof cred);
        memcpy(CMSG_DATA(c), &cred, sizeof cred);
        msg.msg_controllen = CMSG_SPACE(sizeof cred);
        if (n_open > 0) {
                c = (struct cmsghdr *) (control.buf + CMSG_SPACE(sizeof cred));
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(n_open * sizeof(int));
                memcpy(CMSG_DATA(c), fds, n_open * sizeof(int));
                msg.msg_controllen += CMSG_SPACE(n_open * sizeof(int));
        }
        sent = sendmsg(tx, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) >= 0;
        /* Ours. Sent, the copies in flight are the last, the receiver's to
         * close (a plain close here does not wait: it is not the last);
         * not sent, ours are the last, and are reset. */
        for (size_t i = 0; i < n_open; i++)
                if (sent)
                        safe_close(fds[i]);
                else
                        rt__close_received(fds[i]);
        return sent;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static unsigned fds_at_start;
        static char msg_buf[5000 + 256];
        int sv[2], one = 1, zero = 0;
        size_t at = 0;
        heard h = { .text = TEND_BUF_INIT(1 << 20) }, want = { .text = TEND_BUF_INIT(1 << 20) };
        unsigned refused = 0, want_refused = 0, n_sent = 0, n_read = 0;
        bool refuse_rights;

        if (size == 0)
                return 0;
        refuse_rights = !(data[0] & 0x40);
        if (!fds_at_start)
                fds_at_start = open_fds();
        fuzz_check(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sv) == 0, "socketpair: %m");
        (void) setsockopt(sv[0], SOL_SOCKET, SO_PASSCRED, &one, sizeof one);
        if (refuse_rights)
                (void) setsockopt(sv[0], SOL_SOCKET, 83 /* SO_PASSRIGHTS */, &zero, sizeof zero);
        (void) fcntl(sv[0], F_SETFL, O_NONBLOCK);

        while (at < size && n_sent < 64) {
                uint8_t flags = data[at++];
                size_t len = at < size ? MIN((size_t) data[at], size - at - 1) : 0;
                const uint8_t *payload = data + MIN(at + 1, size);
                size_t sent_len;

                at = MIN(at + 1 + len, size);
                if (!send_one(sv[1], flags, payload, len, msg_buf, &sent_len))
                        continue;
                n_sent++;
                if (sent_len > NOTIFY_MESSAGE_MAX) /* dropped, whoever sent it */
                        continue;
                if (flags & 1) {
                        want_refused++;
                        continue;
                }
                if (sent_len == 0)
                        continue;
                /* what on_line must hear: the bytes, split at '\n' */
                for (size_t i = 0; i < sent_len;) {
                        const char *nl = memchr(msg_buf + i, '\n', sent_len - i);
                        size_t l = nl ? (size_t) (nl - (msg_buf + i)) : sent_len - i;
                        fuzz_check(tend_buf_add(&want.text, msg_buf + i, l) >= 0 &&
                                           tend_buf_adds(&want.text, "\n") >= 0,
                                   "out of memory");
                        want.lines++;
                        i += l + 1;
                }
        }

        for (;;) {
                usec_t t = now_usec();
                unsigned k = rt__notify_receive(sv[0], getpid(), on_line, &h, &refused);

                t = now_usec() - t;
                fuzz_check(k <= NOTIFY_BATCH, "%u datagrams read in one call", k);
                fuzz_check(t < USEC_PER_SEC, "a receive of %u datagrams took %llu ms", k,
                           (unsigned long long) (t / USEC_PER_MSEC));
                n_read += k;
                if (k == 0)
                        break;
        }
        fuzz_check(n_read == n_sent, "%u datagrams sent, %u read", n_sent, n_read);
        fuzz_check(refused == want_refused, "%u strangers' messages, %u refused", want_refused,
                   refused);
        fuzz_check(
                h.lines == want.lines && h.text.len == want.text.len &&
                        (h.text.len == 0 || memcmp(h.text.data, want.text.data, h.text.len) == 0),
                "heard %zu lines (%zu bytes), sent %zu (%zu bytes)", h.lines, h.text.len,
                want.lines, want.text.len);
        safe_close(sv[0]);
        safe_close(sv[1]);
        close_peers();
        fuzz_check(open_fds() == fds_at_start, "descriptors open: %u, at the start %u", open_fds(),
                   fds_at_start);
        tend_buf_free(&h.text);
        tend_buf_free(&want.text);
        return 0;
}
