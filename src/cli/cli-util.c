/* SPDX-License-Identifier: MIT */
/* What the commands share: whom to trust, how a failed request reads, a
 * reply of several lines, and the option values every command checks
 * alike. */
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdlib.h>

#include "cli-util.h"
#include "log.h"
#include "macro.h"

/* The uid besides root whose agent we trust: $FLEETSEM_AGENT_USER, if set. */
static int agent_uid(uid_t *ret) {
        const char *user = getenv("FLEETSEM_AGENT_USER");
        struct passwd *pw;

        *ret = 0;
        if (!user || !user[0])
                return 0;
        pw = getpwnam(user);
        if (!pw)
                return log_error_errno(ENOENT, "FLEETSEM_AGENT_USER names an unknown user \"%s\".", user);
        *ret = pw->pw_uid;
        return 0;
}

int cli_agent(const char **ns, uid_t *ret_uid) {
        if (cli_parse_namespace(client_namespace(*ns), ns) < 0 || agent_uid(ret_uid) < 0)
                return EXIT_USAGE;
        return 0;
}

int cli_request_failed(const char *ns, int error) {
        char why[CLIENT_ERROR_TEXT_MAX];

        if (error == -ENOENT)
                log_error("No agent listens on @%s/agent. Is fleetsemd running (systemctl status fleetsem.socket)?", ns);
        else
                log_error("%s%s.", client_error_text(error, ns, why, sizeof(why)),
                          error == -EPERM ? "; refusing to talk to it" : "");
        return EXIT_UNAVAILABLE;
}

#define ONE_REQUEST_TIMEOUT (10 * USEC_PER_SEC)
#define ONE_REQUEST_TIMEOUT_TEXT "10 s"

int cli_one_request(const char *ns, uid_t agent_uid, const Request *req, const char *what, const char *expect,
                    Message *m) {
        _cleanup_close_ int fd = -EBADF;
        LineReader lr;
        int r;

        r = client_send_request(ns, agent_uid, ONE_REQUEST_TIMEOUT, req, &fd);
        if (r < 0)
                return cli_request_failed(ns, r);
        line_reader_init(&lr, PROTO_REPLY_MAX);
        r = cli_read_message(fd, &lr, now_usec(CLOCK_MONOTONIC) + ONE_REQUEST_TIMEOUT, what, ONE_REQUEST_TIMEOUT_TEXT,
                             m);
        if (r != 0)
                return r;
        if (!streq(m->verb, expect)) {
                log_error("Unexpected reply from the agent.");
                return EXIT_SOFTWARE;
        }
        return 0;
}

int cli_read_message(int fd, LineReader *lr, usec_t deadline, const char *what, const char *timeout_text, Message *m) {
        char *line;
        size_t len;
        int r;

        r = client_read_line(fd, lr, deadline, &line, &len);
        if (r == -ECONNRESET) {
                log_error("The agent closed the connection before the end of the %s.", what);
                return EXIT_UNAVAILABLE;
        }
        if (r == -ETIMEDOUT) {
                log_error("The agent did not send the whole %s within %s.", what, timeout_text);
                return EXIT_UNAVAILABLE;
        }
        if (r == -E2BIG || (r >= 0 && message_parse(line, len, PROTO_REPLY_MAX, m) < 0)) {
                log_error("Malformed %s from the agent.", what);
                return EXIT_UNAVAILABLE;
        }
        if (r < 0) {
                log_error_errno(r, "Failed to read the %s: %m", what);
                return EXIT_UNAVAILABLE;
        }
        if (streq(m->verb, "ERROR")) {
                log_error("%s", message_get(m, "message") ?: "");
                return exit_code_for_error(message_get(m, "code") ?: "");
        }
        return 0;
}

/* A count of slots or units, 1 to SLOTS_MAX; what: "slots", "weight". */
static int parse_count(const char *s, const char *what, uint32_t *ret) {
        uint64_t v;

        if (parse_uint64(s, 1, SLOTS_MAX, &v) < 0)
                return log_error_errno(EINVAL, "Invalid %s \"%s\": expected a number from 1 to %u.", what, s, SLOTS_MAX);
        *ret = (uint32_t) v;
        return 0;
}

int cli_parse_slots(const char *s, uint32_t *ret) {
        return parse_count(s, "slots", ret);
}

int cli_parse_weight(const char *s, uint32_t *ret) {
        return parse_count(s, "weight", ret);
}

int cli_check_weight(uint32_t slots, uint32_t weight) {
        if (slots > 0 && weight > slots)
                return log_error_errno(EINVAL, "A weight of %" PRIu32 " is above the %" PRIu32 " slot(s) asked for: it "
                                       "would never fit.", weight, slots);
        return 0;
}

int cli_parse_wait(const char *s, usec_t *ret) {
        if (parse_duration(s, ret) < 0)
                return log_error_errno(EINVAL, "Invalid --wait \"%s\": expected a duration such as 30s, "
                                       "5min, \"1h 30min\", 500ms or infinity.", s);
        return 0;
}

int cli_parse_reason(const char *s) {
        if (!drain_reason_is_valid(s))
                return log_error_errno(EINVAL, "Invalid --reason: 1 to %d bytes of printable text, on one line.",
                                       DRAIN_REASON_MAX);
        return 0;
}

int cli_parse_name(const char *s) {
        if (!name_is_valid(s))
                return log_error_errno(EINVAL, "Invalid name \"%s\": use 1-200 of A-Z a-z 0-9 _ . : @ -", s);
        return 0;
}

int cli_parse_namespace(const char *s, const char **ret) {
        if (!ident_is_valid(s))
                return log_error_errno(EINVAL, "Invalid --namespace \"%s\": use 1-64 of A-Z a-z 0-9 _ . : -", s);
        *ret = s;
        return 0;
}

int cli_getopt(int argc, char *argv[], const char *shortopts, const struct option *options, const char **ns) {
        int c;

        while ((c = getopt_long(argc, argv, shortopts, options, NULL)) == CLI_ARG_NAMESPACE)
                if (cli_parse_namespace(optarg, ns) < 0)
                        return '?';
        return c;
}
