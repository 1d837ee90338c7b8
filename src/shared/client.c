/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <unistd.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "config.h"
#include "macro.h"

const char *client_namespace(const char *explicit_ns) {
        const char *e;

        if (explicit_ns)
                return explicit_ns;
        e = getenv("FLEETSEM_NAMESPACE");
        return e && e[0] ? e : DEFAULT_NAMESPACE;
}

/* Waits until fd (if >= 0) has events, cancel_fd (if >= 0) is readable
 * (-ECANCELED), or deadline passes (-ETIMEDOUT). */
static int wait_for(int fd, short events, usec_t deadline, int cancel_fd) {
        for (;;) {
                struct pollfd p[2] = { { .fd = fd, .events = events }, { .fd = cancel_fd, .events = POLLIN } };
                usec_t now = now_usec(CLOCK_MONOTONIC);
                int n;

                if (now >= deadline)
                        return -ETIMEDOUT;
                n = poll(p, 2, usec_to_poll_ms(now, deadline));
                if (n < 0 && errno != EINTR)
                        return -errno;
                if (n <= 0)
                        continue;
                if (p[1].revents)
                        return -ECANCELED;
                if (p[0].revents)
                        return 0;
        }
}

int usec_to_poll_ms(usec_t now, usec_t deadline) {
        usec_t ms;

        if (deadline == USEC_INFINITY)
                return -1;
        if (deadline <= now)
                return 0;
        ms = (deadline - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC;
        return ms > INT_MAX ? INT_MAX : (int) ms;
}

#define CONNECT_RETRY_MIN (5 * USEC_PER_MSEC)
#define CONNECT_RETRY_MAX (100 * USEC_PER_MSEC)

/* Root first tries its own socket (socket-util.h), where no other user's
 * connections queue before it; an agent without one (or none there) is
 * reached at @NS/agent. */
static int connect_root(const char *ns) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };

        if (geteuid() != 0 || agent_root_path(ns, sa.sun_path, sizeof(sa.sun_path)) < 0)
                return -ENOENT;
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        return TAKE_FD(fd);
}

int client_connect(const char *ns, uid_t agent_uid, usec_t deadline, int cancel_fd, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        usec_t retry = CONNECT_RETRY_MIN;
        struct sockaddr_un sa;
        struct ucred uc;
        socklen_t len;
        int r;

        fd = connect_root(ns);
        if (fd >= 0)
                goto connected;

        r = sockaddr_abstract(ns, "agent", NULL, &sa, &len);
        if (r < 0)
                return r;
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;

        /* A unix socket connects at once, is refused, or finds the backlog
         * full (EAGAIN, never EINPROGRESS): then try again a little later. */
        while (connect(fd, (struct sockaddr *) &sa, len) < 0) {
                usec_t now;

                if (errno == ECONNREFUSED || errno == ENOENT)
                        return -ENOENT;
                if (errno != EAGAIN && errno != EINTR)
                        return -errno;
                now = now_usec(CLOCK_MONOTONIC);
                if (now >= deadline)
                        return -EAGAIN;
                r = wait_for(-EBADF, 0, usec_min(deadline, now + retry), cancel_fd);
                if (r == -ECANCELED)
                        return r;
                retry = retry * 2 > CONNECT_RETRY_MAX ? CONNECT_RETRY_MAX : retry * 2;
        }

connected:
        r = peer_cred(fd, &uc);
        if (r < 0)
                return r;
        if (uc.uid != 0 && uc.uid != agent_uid)
                return -EPERM;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int client_send_request_until(const char *ns, uid_t agent_uid, usec_t deadline, int cancel_fd, const Request *req,
                              int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        char line[PROTO_REQUEST_MAX + 1];
        size_t done = 0;
        int n, r;

        n = request_format(req, line, sizeof(line) - 1);
        if (n < 0)
                return n;
        line[n++] = '\n';

        r = client_connect(ns, agent_uid, deadline, cancel_fd, &fd);
        if (r < 0)
                return r;
        while (done < (size_t) n) {
                ssize_t k = send(fd, line + done, (size_t) n - done, MSG_NOSIGNAL);

                if (k >= 0) {
                        done += (size_t) k;
                        continue;
                }
                if (errno != EAGAIN && errno != EINTR)
                        return -errno;
                r = wait_for(fd, POLLOUT, deadline, cancel_fd);
                if (r < 0)
                        return r;
        }
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int client_send_request(const char *ns, uid_t agent_uid, usec_t timeout, const Request *req, int *ret_fd) {
        return client_send_request_until(ns, agent_uid, usec_add(now_usec(CLOCK_MONOTONIC), timeout), -EBADF, req, ret_fd);
}

static uint64_t field_u64(const Message *m, const char *key) {
        const char *v = message_get(m, key);
        uint64_t u = 0;

        if (v)
                (void) parse_uint64(v, 0, UINT64_MAX, &u);
        return u;
}

/* An optional number field: 0 when absent, -EBADMSG when not in [min, max]. */
static int field_opt(const Message *m, const char *key, uint64_t min, uint64_t max, uint64_t *ret) {
        const char *v = message_get(m, key);

        *ret = 0;
        if (!v)
                return 0;
        return parse_uint64(v, min, max, ret) < 0 ? -EBADMSG : 0;
}

static void field_copy(const Message *m, const char *key, char *buf, size_t size) {
        const char *v = message_get(m, key);

        snprintf(buf, size, "%s", v ?: "");
}

int reply_parse(const char *line, size_t len, Reply *ret) {
        static const struct {
                const char *verb;
                ReplyKind kind;
        } kinds[] = {
                { "QUEUED", REPLY_QUEUED }, { "GRANTED", REPLY_GRANTED }, { "DENIED", REPLY_DENIED },
                { "ERROR", REPLY_ERROR }, { "LOST", REPLY_LOST }, { "RELEASED", REPLY_RELEASED },
                { "RENEWED", REPLY_RENEWED },
        };
        uint64_t limit, ttl, grace;
        Message m;
        Reply r = {};
        size_t i;
        int k;

        k = message_parse(line, len, PROTO_REPLY_MAX, &m);
        if (k < 0)
                return -EBADMSG;
        for (i = 0; i < ELEMENTSOF(kinds); i++)
                if (streq(m.verb, kinds[i].verb))
                        break;
        if (i == ELEMENTSOF(kinds))
                return -EBADMSG;

        r.kind = kinds[i].kind;
        r.position = (uint32_t) field_u64(&m, "position");
        r.held = (uint32_t) field_u64(&m, "held");
        r.slots = (uint32_t) field_u64(&m, "slots");
        r.token = field_u64(&m, "token");
        r.since_ms = field_u64(&m, "since");
        if (field_opt(&m, "limit", 1, SLOTS_MAX, &limit) < 0 || field_opt(&m, "ttl", 1, TTL_MS_MAX, &ttl) < 0 ||
            field_opt(&m, "grace", 1, TTL_MS_MAX, &grace) < 0)
                return -EBADMSG;
        r.limit = (uint32_t) limit;
        r.ttl_ms = ttl;
        r.free_in_ms = UINT64_MAX;
        if (message_get(&m, "free_in") && parse_uint64(message_get(&m, "free_in"), 0, TTL_MS_MAX, &r.free_in_ms) < 0)
                return -EBADMSG;
        /* A reason this client does not know of is not told. */
        r.grace_why = grace > 0 ? grace_why_text(message_get(&m, "why")) : NULL;
        r.grace_ms = r.grace_why ? grace : 0;
        field_copy(&m, "lease", r.lease, sizeof(r.lease));
        field_copy(&m, "drained", r.drained, sizeof(r.drained));
        if (r.kind == REPLY_GRANTED && !lease_id_is_valid(r.lease))
                return -EBADMSG;
        field_copy(&m, r.kind == REPLY_ERROR ? "code" : "reason", r.code, sizeof(r.code));
        field_copy(&m, r.kind == REPLY_ERROR ? "message" : "reason", r.message, sizeof(r.message));
        if (r.kind == REPLY_ERROR && (!r.code[0] || !r.message[0]))
                return -EBADMSG;
        *ret = r;
        return 0;
}

int client_read_line(int fd, LineReader *lr, usec_t deadline, char **ret_line, size_t *ret_len) {
        for (;;) {
                int r;

                r = line_reader_next(lr, ret_line, ret_len);
                if (r != 0)
                        return r < 0 ? r : 0;
                r = line_reader_fill(lr, fd);
                if (r == 0)
                        return -ECONNRESET;
                if (r > 0 || r == -EINTR)
                        continue;
                if (r != -EAGAIN)
                        return r;
                r = wait_for(fd, POLLIN, deadline, -EBADF);
                if (r < 0)
                        return r;
        }
}

int client_read_reply(int fd, LineReader *lr, usec_t deadline, Reply *ret) {
        char *line;
        size_t len;
        int r;

        r = client_read_line(fd, lr, deadline, &line, &len);
        if (r < 0)
                return r;
        return reply_parse(line, len, ret);
}

const char *client_error_text(int error, const char *ns, char *buf, size_t size) {
        switch (error) {
        case -ENOENT:
                snprintf(buf, size, "no agent on @%s/agent", ns);
                break;
        case -EPERM:
                snprintf(buf, size, "the process on @%s/agent is not a trusted agent (not root or the agent user)", ns);
                break;
        case -EAGAIN:
                snprintf(buf, size, "the agent on @%s/agent takes no connections (stopped, or its queue is full)", ns);
                break;
        case -ETIMEDOUT:
                snprintf(buf, size, "the agent on @%s/agent does not answer", ns);
                break;
        case -ECONNRESET:
                snprintf(buf, size, "the agent on @%s/agent closed the connection", ns);
                break;
        default:
                snprintf(buf, size, "cannot reach the agent on @%s/agent: %s", ns, strerror(-error));
        }
        return buf;
}

uint32_t reply_limit(const Reply *r, uint32_t asked) {
        return r->limit > 0 ? r->limit : asked;
}

bool limit_note(const char *name, uint32_t limit, uint32_t asked, const char *asked_what, char *buf, size_t size) {
        if (limit == 0 || limit >= asked)
                return false;
        snprintf(buf, size, "%s is limited to %" PRIu32 " at once by its current holders or its fleet limit (%s %" PRIu32 ")",
                 name, limit, asked_what, asked);
        return true;
}

bool grace_note(const char *name, const Reply *rep, char *buf, size_t size) {
        char d[FORMAT_DURATION_MAX];

        if ((rep->kind != REPLY_QUEUED && rep->kind != REPLY_DENIED) || rep->grace_ms == 0 || !rep->grace_why)
                return false;
        snprintf(buf, size, "%s: no slot is granted for another %s: %s; slots held before may still be in use until "
                 "their leases run out", name, format_duration(d, sizeof(d), rep->grace_ms * USEC_PER_MSEC),
                 rep->grace_why);
        return true;
}

bool drain_note(const char *name, const Reply *rep, char *buf, size_t size) {
        char text[TEXT_ESCAPE_SIZE(sizeof(rep->drained))];

        if ((rep->kind != REPLY_QUEUED && rep->kind != REPLY_DENIED) || !rep->drained[0])
                return false;
        snprintf(buf, size, "%s is drained (%s); no new slot is granted until \"fleetsem undrain %s\"", name,
                 text_escape(rep->drained, text, sizeof(text)), name);
        return true;
}
