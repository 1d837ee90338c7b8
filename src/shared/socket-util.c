/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "socket-util.h"

int sockaddr_abstract(const char *ns, const char *suffix, const char *lease,
                      struct sockaddr_un *ret, socklen_t *ret_len) {
        int n;

        *ret = (struct sockaddr_un) { .sun_family = AF_UNIX };
        n = snprintf(ret->sun_path + 1, sizeof(ret->sun_path) - 1, "%s/%s%s%s", ns, suffix,
                     lease ? "/" : "", lease ?: "");
        if (n < 0 || (size_t) n >= sizeof(ret->sun_path) - 1)
                return -ENAMETOOLONG;
        *ret_len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + 1 + (size_t) n);
        return 0;
}

static int bind_listen(const char *ns, const char *suffix, const char *lease, int backlog, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_un sa;
        socklen_t len;
        int r;

        r = sockaddr_abstract(ns, suffix, lease, &sa, &len);
        if (r < 0)
                return r;
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (bind(fd, (struct sockaddr *) &sa, len) < 0)
                return -errno;
        if (listen(fd, backlog) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int anchor_create(const char *ns, const char *lease, int *ret_fd) {
        /* The backlog holds the agent's never-accepted watch connections; a
         * connection whose agent went away still takes a place until the
         * anchor closes, so leave room for many agent restarts. */
        return bind_listen(ns, "lease", lease, SOMAXCONN, ret_fd);
}

int agent_listen(const char *ns, int *ret_fd) {
        return bind_listen(ns, "agent", NULL, SOMAXCONN, ret_fd);
}

static int connect_abstract(const char *ns, const char *suffix, const char *lease, bool nonblock, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_un sa;
        socklen_t len;
        int r;

        r = sockaddr_abstract(ns, suffix, lease, &sa, &len);
        if (r < 0)
                return r;
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, len) < 0)
                return errno == ECONNREFUSED ? -ENOENT : -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int anchor_watch(const char *ns, const char *lease, int *ret_fd) {
        return connect_abstract(ns, "lease", lease, true, ret_fd);
}

int peer_cred(int fd, struct ucred *ret) {
        struct ucred uc;
        socklen_t len = sizeof(uc);

        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
                return -errno;
        if (len != sizeof(uc))
                return -EIO;
        *ret = uc;
        return 0;
}

int write_all(int fd, const void *buf, size_t len, usec_t timeout) {
        const char *p = buf;

        while (len > 0) {
                ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

                if (n < 0) {
                        struct pollfd pfd = { .fd = fd, .events = POLLOUT };
                        int ms = timeout == USEC_INFINITY ? -1 : (int) (timeout / USEC_PER_MSEC);

                        if (errno == EINTR)
                                continue;
                        if (errno != EAGAIN)
                                return -errno;
                        n = poll(&pfd, 1, ms);
                        if (n < 0 && errno != EINTR)
                                return -errno;
                        if (n == 0)
                                return -ETIMEDOUT;
                        continue;
                }
                p += n;
                len -= (size_t) n;
        }
        return 0;
}

void line_reader_init(LineReader *lr, size_t max) {
        lr->max = max < sizeof(lr->buf) - 1 ? max : sizeof(lr->buf) - 1;
        lr->len = lr->start = 0;
}

int line_reader_fill(LineReader *lr, int fd) {
        ssize_t n;

        if (lr->start > 0) {
                memmove(lr->buf, lr->buf + lr->start, lr->len - lr->start);
                lr->len -= lr->start;
                lr->start = 0;
        }
        if (lr->len >= sizeof(lr->buf) - 1)
                return -E2BIG;
        n = read(fd, lr->buf + lr->len, sizeof(lr->buf) - 1 - lr->len);
        if (n < 0)
                return errno == EWOULDBLOCK ? -EAGAIN : -errno;
        lr->len += (size_t) n;
        return (int) n;
}

int line_reader_next(LineReader *lr, char **ret_line, size_t *ret_len) {
        char *s = lr->buf + lr->start, *nl;
        size_t avail = lr->len - lr->start;

        nl = memchr(s, '\n', avail);
        if (!nl)
                return avail > lr->max ? -E2BIG : 0;
        if ((size_t) (nl - s) > lr->max)
                return -E2BIG;
        *nl = '\0';
        *ret_line = s;
        *ret_len = (size_t) (nl - s);
        lr->start += (size_t) (nl - s) + 1;
        return 1;
}

int fd_set_nonblock(int fd) {
        int flags = fcntl(fd, F_GETFL);

        if (flags < 0)
                return -errno;
        if (fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
                return -errno;
        return 0;
}
