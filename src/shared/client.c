/* SPDX-License-Identifier: MIT */
#include <errno.h>
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

int client_send_request(const char *ns, uid_t agent_uid, usec_t timeout, const Request *req, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        char line[PROTO_REQUEST_MAX + 1];
        int n, r;

        n = request_format(req, line, sizeof(line) - 1);
        if (n < 0)
                return n;
        line[n++] = '\n';

        r = agent_connect(ns, agent_uid, timeout, &fd);
        if (r < 0)
                return r;
        r = write_all(fd, line, (size_t) n, timeout);
        if (r < 0)
                return r;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

static uint64_t field_u64(const Message *m, const char *key) {
        const char *v = message_get(m, key);
        uint64_t u = 0;

        if (v)
                (void) parse_uint64(v, 0, UINT64_MAX, &u);
        return u;
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
        };
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
        field_copy(&m, "lease", r.lease, sizeof(r.lease));
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
                if (deadline != USEC_INFINITY) {
                        struct pollfd p = { .fd = fd, .events = POLLIN };
                        usec_t now = now_usec(CLOCK_MONOTONIC);

                        if (now >= deadline)
                                return -ETIMEDOUT;
                        r = poll(&p, 1, (int) ((deadline - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC));
                        if (r < 0 && errno != EINTR)
                                return -errno;
                        if (r <= 0)
                                continue;
                }
                r = line_reader_fill(lr, fd);
                if (r == -EINTR || (r == -EAGAIN && deadline != USEC_INFINITY))
                        continue;
                if (r == -EAGAIN)               /* the socket's own timeout ran out */
                        return -ETIMEDOUT;
                if (r < 0)
                        return r;
                if (r == 0)
                        return -ECONNRESET;
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

int exit_code_for_error(const char *code) {
        if (streq(code, ERROR_CODE_PERMISSION) || streq(code, ERROR_CODE_ANCHOR))
                return EXIT_NOPERM;
        if (streq(code, ERROR_CODE_USAGE) || streq(code, ERROR_CODE_INVALID))
                return EXIT_USAGE;
        return EXIT_UNAVAILABLE;
}
