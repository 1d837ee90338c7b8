/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <unistd.h>
#include <sys/stat.h>
#include <inttypes.h>
#include <fcntl.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
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

int agent_root_path(const char *ns, char *buf, size_t size) {
        struct stat st;
        int n;

        if (stat("/proc/self/ns/net", &st) < 0)
                return -errno;
        n = snprintf(buf, size, "%s/%s.%" PRIu64 ".sock", AGENT_ROOT_DIR, ns, (uint64_t) st.st_ino);
        return n < 0 || (size_t) n >= size ? -ENAMETOOLONG : 0;
}

int agent_listen_root(const char *ns, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int r;

        r = agent_root_path(ns, sa.sun_path, sizeof(sa.sun_path));
        if (r < 0)
                return r;
        if (mkdir(AGENT_ROOT_DIR, 0755) < 0 && errno != EEXIST)
                return -errno;
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        /* A socket left by an agent that went: this one takes its place. */
        if (unlink(sa.sun_path) < 0 && errno != ENOENT)
                return -errno;
        /* Made 0600 by bind() itself, never looser for a moment (Linux
         * ignores an fchmod() of the socket before bind(); the umask it
         * takes). The agent makes it at start, before any other thread
         * that could create a file meanwhile. */
        mode_t mask = umask(0177);
        r = bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 ? -errno : 0;
        (void) umask(mask);
        if (r < 0)
                return r;
        if (chmod(sa.sun_path, 0600) < 0 || listen(fd, SOMAXCONN) < 0) {
                r = -errno;
                (void) unlink(sa.sun_path);
                return r;
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
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

/* Each listening AF_UNIX socket of this network namespace with an
 * abstract name: its name (without the leading NUL) and owner. */
typedef void (*listener_cb)(const char *name, size_t len, uid_t uid, void *userdata);

/* From the kernel (sock_diag): a dump of the listening sockets asked for,
 * on a non-blocking socket. */
static int diag_ask(int *ret_fd) {
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

        fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_SOCK_DIAG);
        if (fd < 0)
                return -errno;
        if (send(fd, &msg, sizeof(msg), 0) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

/* What the kernel sent of the dump so far, one batch: 1 once it is all
 * read, 0 when more is to come, <0 on an error. */
static int diag_read(int fd, listener_cb cb, void *userdata) {
        union {
                struct nlmsghdr h;
                char buf[32768];
        } u;
        ssize_t n = recv(fd, u.buf, sizeof(u.buf), 0);

        if (n < 0)
                return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        if (n == 0)
                return -EIO;
        for (size_t off = 0; off + sizeof(struct nlmsghdr) <= (size_t) n;) {
                struct nlmsghdr *h = (struct nlmsghdr *) (u.buf + off);
                struct unix_diag_msg *m = NLMSG_DATA(h);
                const char *name = NULL;
                size_t len, name_len = 0;
                uint32_t uid = (uint32_t) -1;

                if (h->nlmsg_len < sizeof(struct nlmsghdr) || h->nlmsg_len > (size_t) n - off)
                        return -EBADMSG;
                if (h->nlmsg_type == NLMSG_DONE)
                        return 1;
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

                        if (a->nla_type == UNIX_DIAG_NAME && dlen > 1 && data[0] == '\0') {
                                name = data + 1;
                                name_len = dlen - 1;
                        } else if (a->nla_type == UNIX_DIAG_UID && dlen >= sizeof(uid))
                                memcpy(&uid, data, sizeof(uid));
                }
                if (name)
                        cb(name, name_len, (uid_t) uid, userdata);
                off += NLMSG_ALIGN(h->nlmsg_len);
        }
        return 0;
}

/* The same from /proc/self/net/unix (where netlink is not allowed): abstract
 * names show with a leading '@', listening ones with flag __SO_ACCEPTCON
 * (00010000); no owner. */
static int listeners_by_proc(listener_cb cb, void *userdata) {
        char line[512];
        FILE *f;

        f = fopen("/proc/self/net/unix", "re");
        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f)) {
                unsigned long flags;
                char path[sizeof(line)];

                if (sscanf(line, "%*s %*s %*s %lx %*s %*s %*s %511s", &flags, path) == 2 &&
                    (flags & 0x10000) && path[0] == '@')
                        cb(path + 1, strlen(path + 1), (uid_t) -1, userdata);
        }
        fclose(f);
        return 0;
}

typedef struct AnchorLook {
        const char *prefix;             /* "NS/lease/" */
        size_t prefix_len;
        const char *const *leases;
        const size_t *order;            /* indexes of leases, sorted by them */
        size_t n;
        bool *alive;
        uid_t *uid;
} AnchorLook;

static int lease_cmp(const char *name, size_t len, const char *lease) {
        size_t k = strlen(lease);
        int c = memcmp(name, lease, MIN(len, k));

        return c != 0 ? c : len < k ? -1 : len > k;
}

static void anchor_look_one(const char *name, size_t len, uid_t uid, void *userdata) {
        AnchorLook *l = userdata;
        size_t lo = 0, hi = l->n;

        if (len <= l->prefix_len || memcmp(name, l->prefix, l->prefix_len) != 0)
                return;
        name += l->prefix_len;
        len -= l->prefix_len;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2, i = l->order[mid];
                int c = lease_cmp(name, len, l->leases[i]);

                if (c == 0) {
                        l->alive[i] = true;
                        l->uid[i] = uid;
                        return;
                }
                if (c < 0)
                        hi = mid;
                else
                        lo = mid + 1;
        }
}

static int order_cmp(const void *x, const void *y, void *userdata) {
        const char *const *leases = userdata;

        return strcmp(leases[*(const size_t *) x], leases[*(const size_t *) y]);
}

struct AnchorWalk {
        int fd;                         /* the dump's netlink socket */
        struct sockaddr_un sa;          /* "@NS/lease/", the prefix looked for */
        AnchorLook look;
        size_t *order;
        bool *alive;
        uid_t *uid;
};

AnchorWalk *anchor_walk_free(AnchorWalk *w) {
        if (!w)
                return NULL;
        safe_close(w->fd);
        free(w->order);
        free(w->alive);
        free(w->uid);
        free(w);
        return NULL;
}

/* The walk set up, its dump not yet asked for. */
static int anchor_walk_new(const char *ns, const char *const *leases, size_t n, AnchorWalk **ret) {
        _cleanup_(anchor_walk_freep) AnchorWalk *w = NULL;
        socklen_t salen;
        int r;

        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->fd = -EBADF;
        r = sockaddr_abstract(ns, "lease", "", &w->sa, &salen);
        if (r < 0)
                return r;
        w->order = calloc(n ?: 1, sizeof(size_t));
        w->alive = calloc(n ?: 1, sizeof(bool));
        w->uid = calloc(n ?: 1, sizeof(uid_t));
        if (!w->order || !w->alive || !w->uid)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                w->order[i] = i;
                w->uid[i] = (uid_t) -1;
        }
        qsort_r(w->order, n, sizeof(size_t), order_cmp, (void *) leases);
        w->look = (AnchorLook) {
                .prefix = w->sa.sun_path + 1, .prefix_len = salen - offsetof(struct sockaddr_un, sun_path) - 1,
                .leases = leases, .order = w->order, .n = n, .alive = w->alive, .uid = w->uid,
        };
        *ret = TAKE_PTR(w);
        return 0;
}

int anchor_walk_start(const char *ns, const char *const *leases, size_t n, AnchorWalk **ret) {
        _cleanup_(anchor_walk_freep) AnchorWalk *w = NULL;
        int r;

        r = anchor_walk_new(ns, leases, n, &w);
        if (r < 0)
                return r;
        r = diag_ask(&w->fd);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(w);
        return 0;
}

int anchor_walk_fd(const AnchorWalk *w) {
        return w->fd;
}

int anchor_walk_step(AnchorWalk *w) {
        return diag_read(w->fd, anchor_look_one, &w->look);
}

const bool *anchor_walk_alive(const AnchorWalk *w) {
        return w->alive;
}

const uid_t *anchor_walk_uid(const AnchorWalk *w) {
        return w->uid;
}

bool anchor_walk_refused(int r) {
        return r == -EAFNOSUPPORT || r == -EPERM || r == -EACCES || r == -EPROTONOSUPPORT;
}

int anchors_listening(const char *ns, const char *const *leases, size_t n, bool *ret_alive, uid_t *ret_uid) {
        _cleanup_(anchor_walk_freep) AnchorWalk *w = NULL;
        int r;

        r = anchor_walk_start(ns, leases, n, &w);
        while (r >= 0) {
                struct pollfd p = { .fd = w->fd, .events = POLLIN };

                r = anchor_walk_step(w);
                if (r != 0)
                        break;
                if (poll(&p, 1, -1) < 0 && errno != EINTR)
                        r = -errno;
        }
        if (anchor_walk_refused(r)) {
                /* Netlink is not allowed here: the same from /proc. */
                w = anchor_walk_free(w);
                r = anchor_walk_new(ns, leases, n, &w);
                if (r >= 0)
                        r = listeners_by_proc(anchor_look_one, &w->look);
        }
        if (r >= 0) {
                memcpy(ret_alive, w->alive, n * sizeof(bool));
                memcpy(ret_uid, w->uid, n * sizeof(uid_t));
        }
        return r < 0 ? r : 0;
}

int anchor_is_listening(const char *ns, const char *lease, uid_t *ret_uid) {
        bool alive;
        uid_t uid;
        int r;

        r = anchors_listening(ns, &lease, 1, &alive, &uid);
        if (r < 0)
                return r;
        if (alive && ret_uid)
                *ret_uid = uid;
        return alive;
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
