/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/tcp.h>
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

/* Asks the kernel (sock_diag) for the listening AF_UNIX sockets of this
 * network namespace, with their names and owners. */
static int listener_by_diag(const struct sockaddr_un *sa, socklen_t salen, uid_t *ret_uid) {
        _cleanup_close_ int fd = -EBADF;
        struct {
                struct nlmsghdr nlh;
                struct unix_diag_req req;
        } msg = {
                .nlh = { .nlmsg_len = sizeof(msg), .nlmsg_type = SOCK_DIAG_BY_FAMILY,
                         .nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP, .nlmsg_seq = 1 },
                .req = { .sdiag_family = AF_UNIX, .udiag_states = 1U << TCP_LISTEN,
                         .udiag_show = UDIAG_SHOW_NAME | UDIAG_SHOW_UID },
        };
        size_t want = (size_t) salen - offsetof(struct sockaddr_un, sun_path);
        union {
                struct nlmsghdr h;
                char buf[32768];
        } u;
        int found = 0;

        fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
        if (fd < 0)
                return -errno;
        if (send(fd, &msg, sizeof(msg), 0) < 0)
                return -errno;
        for (;;) {
                ssize_t n = recv(fd, u.buf, sizeof(u.buf), 0);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return -EIO;
                for (size_t off = 0; off + sizeof(struct nlmsghdr) <= (size_t) n;) {
                        struct nlmsghdr *h = (struct nlmsghdr *) (u.buf + off);
                        struct unix_diag_msg *m = NLMSG_DATA(h);
                        bool match = false, has_uid = false;
                        uint32_t uid = 0;
                        size_t len;

                        if (h->nlmsg_len < sizeof(struct nlmsghdr) || h->nlmsg_len > (size_t) n - off)
                                return -EBADMSG;
                        if (h->nlmsg_type == NLMSG_DONE)
                                return found;
                        if (h->nlmsg_type == NLMSG_ERROR) {
                                const struct nlmsgerr *e = NLMSG_DATA(h);

                                return e->error < 0 ? e->error : -EIO;
                        }
                        if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
                                return -EBADMSG;
                        len = h->nlmsg_len - NLMSG_LENGTH(sizeof(*m));
                        for (const char *p = (const char *) (m + 1); len >= sizeof(struct nlattr);) {
                                const struct nlattr *a = (const struct nlattr *) p;
                                size_t step = (size_t) NLA_ALIGN(a->nla_len);

                                if (a->nla_len < sizeof(*a) || a->nla_len > len)
                                        break;
                                p += MIN(step, len);
                                len -= MIN(step, len);
                                const char *data = (const char *) a + NLA_HDRLEN;
                                size_t dlen = a->nla_len - NLA_HDRLEN;

                                if (a->nla_type == UNIX_DIAG_NAME)
                                        match = dlen == want && memcmp(data, sa->sun_path, want) == 0;
                                else if (a->nla_type == UNIX_DIAG_UID && dlen >= sizeof(uid)) {
                                        memcpy(&uid, data, sizeof(uid));
                                        has_uid = true;
                                }
                        }
                        if (match && !found) {
                                found = 1;
                                if (ret_uid)
                                        *ret_uid = has_uid ? (uid_t) uid : (uid_t) -1;
                        }
                        off += NLMSG_ALIGN(h->nlmsg_len);
                }
        }
}

/* The same from /proc/self/net/unix (where netlink is not allowed): abstract
 * names show with a leading '@', listening ones with flag __SO_ACCEPTCON
 * (00010000); no owner. */
static int listener_by_proc(const struct sockaddr_un *sa, socklen_t salen) {
        char want[sizeof(sa->sun_path) + 1], line[512];
        size_t n = (size_t) salen - offsetof(struct sockaddr_un, sun_path);
        FILE *f;
        int found = 0;

        want[0] = '@';
        memcpy(want + 1, sa->sun_path + 1, n - 1);
        want[n] = '\0';
        f = fopen("/proc/self/net/unix", "re");
        if (!f)
                return -errno;
        while (!found && fgets(line, sizeof(line), f)) {
                unsigned long flags;
                char path[sizeof(line)];

                if (sscanf(line, "%*s %*s %*s %lx %*s %*s %*s %511s", &flags, path) == 2 &&
                    (flags & 0x10000) && streq(path, want))
                        found = 1;
        }
        fclose(f);
        return found;
}

int anchor_is_listening(const char *ns, const char *lease, uid_t *ret_uid) {
        struct sockaddr_un sa;
        socklen_t len;
        int r;

        r = sockaddr_abstract(ns, "lease", lease, &sa, &len);
        if (r < 0)
                return r;
        r = listener_by_diag(&sa, len, ret_uid);
        if (r != -EAFNOSUPPORT && r != -EPERM && r != -EACCES && r != -EPROTONOSUPPORT)
                return r;
        r = listener_by_proc(&sa, len);
        if (r > 0 && ret_uid)
                *ret_uid = (uid_t) -1;
        return r;
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
