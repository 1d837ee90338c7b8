/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "outcome.h"

static const struct {
        const char *word;
        Refusal refusal;
} denied_reasons[] = {
        { "timeout", REFUSAL_TIMEOUT },
        { "full", REFUSAL_FULL },
        { "drained", REFUSAL_DRAINED },
        { "unconfirmed", REFUSAL_UNCONFIRMED },
};

static const struct {
        const char *code;
        Refusal refusal;
} error_codes[] = {
        { ERROR_CODE_PERMISSION, REFUSAL_PERMISSION },
        { ERROR_CODE_ANCHOR, REFUSAL_PERMISSION },
        { ERROR_CODE_USAGE, REFUSAL_INVALID },
        { ERROR_CODE_INVALID, REFUSAL_INVALID },
        { ERROR_CODE_LIMIT, REFUSAL_LIMIT },
        { ERROR_CODE_TOO_HEAVY, REFUSAL_TOO_HEAVY },
        { ERROR_CODE_NO_LIMIT, REFUSAL_NO_LIMIT },
        { ERROR_CODE_BUSY, REFUSAL_BUSY },
        { ERROR_CODE_NOT_HELD, REFUSAL_NOT_HELD },
        { ERROR_CODE_MISCONFIGURED, REFUSAL_MISCONFIGURED },
};

static const char *const refusal_words[] = {
        [REFUSAL_NONE] = "none",
        [REFUSAL_TIMEOUT] = "timeout",
        [REFUSAL_FULL] = "full",
        [REFUSAL_DRAINED] = "drained",
        [REFUSAL_UNCONFIRMED] = "unconfirmed",
        [REFUSAL_PERMISSION] = "permission",
        [REFUSAL_INVALID] = "invalid",
        [REFUSAL_LIMIT] = "limit",
        [REFUSAL_TOO_HEAVY] = "too_heavy",
        [REFUSAL_NO_LIMIT] = "no_limit",
        [REFUSAL_BUSY] = "busy",
        [REFUSAL_NOT_HELD] = "not_held",
        [REFUSAL_MISCONFIGURED] = "misconfigured",
};

static const char *const kind_words[] = {
        [OUTCOME_GRANTED] = "granted",
        [OUTCOME_QUEUED] = "queued",
        [OUTCOME_RENEWED] = "renewed",
        [OUTCOME_LOST] = "lost",
        [OUTCOME_REFUSED] = "refused",
        [OUTCOME_UNAVAILABLE] = "unavailable",
        [OUTCOME_INTERNAL] = "internal",
};

Refusal refusal_of_error_code(const char *code) {
        for (size_t i = 0; i < ELEMENTSOF(error_codes); i++)
                if (streq(code, error_codes[i].code))
                        return error_codes[i].refusal;
        return REFUSAL_NONE;
}

static Refusal refusal_of_denied_reason(const char *reason) {
        for (size_t i = 0; i < ELEMENTSOF(denied_reasons); i++)
                if (streq(reason, denied_reasons[i].word))
                        return denied_reasons[i].refusal;
        return REFUSAL_NONE;
}

const char *refusal_to_string(Refusal r) {
        return (size_t) r < ELEMENTSOF(refusal_words) ? refusal_words[r] : "?";
}

const char *outcome_kind_to_string(OutcomeKind k) {
        return (size_t) k < ELEMENTSOF(kind_words) ? kind_words[k] : "?";
}

bool refusal_is_configuration(Refusal r) {
        return r == REFUSAL_INVALID || r == REFUSAL_TOO_HEAVY || r == REFUSAL_NO_LIMIT || r == REFUSAL_MISCONFIGURED;
}

/* At most OUTCOME_SHOWN_MAX bytes of line, escaped (a NUL byte too), with
 * "..." when cut. */
static void show_line(const char *line, size_t len, char *buf, size_t size) {
        char part[OUTCOME_SHOWN_MAX + 1], esc[TEXT_ESCAPE_SIZE(OUTCOME_SHOWN_MAX)];
        size_t n = len < OUTCOME_SHOWN_MAX ? len : OUTCOME_SHOWN_MAX, at = 0, out = 0;

        buf[0] = '\0';
        while (at <= n && out < size) {
                size_t seg = strnlen(line + at, n - at);
                int k;

                memcpy(part, line + at, seg);
                part[seg] = '\0';
                k = snprintf(buf + out, size - out, "%s%s", text_escape(part, esc, sizeof(esc)),
                             at + seg < n ? "\\x00" : "");
                if (k < 0)
                        return;
                out += (size_t) k;
                at += seg + 1;
        }
        if (n < len && out < size)
                snprintf(buf + out, size - out, "...");
}

static OutcomeKind internal(Outcome *o, const char *why, const char *line, size_t len) {
        char shown[TEXT_ESCAPE_SIZE(OUTCOME_SHOWN_MAX) + 8];

        show_line(line, len, shown, sizeof(shown));
        *o = (Outcome) { .kind = OUTCOME_INTERNAL };
        snprintf(o->text, sizeof(o->text), "bug: %s: \"%s\"", why, shown);
        return o->kind;
}

OutcomeKind outcome_of_line(const char *line, size_t len, bool granted, Outcome *ret) {
        Outcome o = {};
        char msg[TEXT_ESCAPE_SIZE(sizeof(o.reply.message))];

        assert(line || len == 0);
        if (reply_parse(line ?: "", len, &o.reply) < 0)
                return internal(ret, "a reply from the agent that this client cannot decode", line ?: "", len);

        switch (o.reply.kind) {
        case REPLY_GRANTED:
                o.kind = OUTCOME_GRANTED;
                break;
        case REPLY_QUEUED:
                o.kind = OUTCOME_QUEUED;
                break;
        case REPLY_RENEWED:
        case REPLY_LOST:
                if (!granted)
                        return internal(ret, "a reply from the agent before any grant", line, len);
                o.kind = o.reply.kind == REPLY_RENEWED ? OUTCOME_RENEWED : OUTCOME_LOST;
                text_escape(o.reply.message, o.text, sizeof(o.text));
                break;
        case REPLY_DENIED:
                o.refusal = refusal_of_denied_reason(o.reply.code);
                if (o.refusal == REFUSAL_NONE)
                        return internal(ret, "a refusal from the agent with a reason this client does not know", line,
                                        len);
                o.kind = OUTCOME_REFUSED;
                snprintf(o.text, sizeof(o.text), "no slot (%s)", refusal_to_string(o.refusal));
                break;
        case REPLY_ERROR:
                text_escape(o.reply.message, msg, sizeof(msg));
                if (streq(o.reply.code, ERROR_CODE_UNAVAILABLE)) {
                        o.kind = OUTCOME_UNAVAILABLE;
                        snprintf(o.text, sizeof(o.text), "%s", msg);
                        break;
                }
                if (streq(o.reply.code, ERROR_CODE_REDIS)) {
                        *ret = (Outcome) { .kind = OUTCOME_INTERNAL, .reply = o.reply };
                        snprintf(ret->text, sizeof(ret->text), "Redis answered the agent with an error: %s", msg);
                        return ret->kind;
                }
                o.refusal = refusal_of_error_code(o.reply.code);
                if (o.refusal == REFUSAL_NONE)
                        return internal(ret, "an error from the agent with a code this client does not know", line,
                                        len);
                o.kind = OUTCOME_REFUSED;
                snprintf(o.text, sizeof(o.text), "%s", msg);
                break;
        default:
                return internal(ret, "a reply from the agent that does not answer a request for a slot", line, len);
        }
        *ret = o;
        return o.kind;
}

OutcomeKind outcome_of_error(int error, const char *ns, Outcome *ret) {
        char why[CLIENT_ERROR_TEXT_MAX];

        *ret = (Outcome) { .kind = OUTCOME_UNAVAILABLE };
        switch (error) {
        case -ENOENT:           /* nobody listens */
        case -ECONNREFUSED:
        case -EPERM:            /* a process that is not a trusted agent */
        case -EAGAIN:           /* takes no connection: stopped, or its backlog is full */
        case -ETIMEDOUT:        /* took the request and said nothing in time */
        case -ECONNRESET:       /* closed the connection */
        case -EPIPE:
        case -ENOTCONN:
                snprintf(ret->text, sizeof(ret->text), "%s", client_error_text(error, ns, why, sizeof(why)));
                break;
        case -E2BIG:
                ret->kind = OUTCOME_INTERNAL;
                snprintf(ret->text, sizeof(ret->text), "bug: a reply line from the agent longer than %d bytes",
                         PROTO_REPLY_MAX);
                break;
        case -EBADMSG:
                ret->kind = OUTCOME_INTERNAL;
                snprintf(ret->text, sizeof(ret->text), "bug: a reply from the agent that this client cannot decode");
                break;
        default:
                ret->kind = OUTCOME_INTERNAL;
                snprintf(ret->text, sizeof(ret->text), "%s", client_error_text(error, ns, why, sizeof(why)));
        }
        return ret->kind;
}

static int refusal_exit_code(Refusal r) {
        switch (r) {
        case REFUSAL_PERMISSION:
        case REFUSAL_LIMIT:
                return EXIT_NOPERM;
        case REFUSAL_INVALID:
        case REFUSAL_TOO_HEAVY:
                return EXIT_USAGE;
        case REFUSAL_NO_LIMIT:
        case REFUSAL_MISCONFIGURED:
                return EXIT_CONFIG;
        case REFUSAL_NOT_HELD:
                return EXIT_DATAERR;
        case REFUSAL_TIMEOUT:
        case REFUSAL_FULL:
        case REFUSAL_DRAINED:
        case REFUSAL_UNCONFIRMED:
        case REFUSAL_BUSY:
                return EXIT_TEMPFAIL;
        case REFUSAL_NONE:
                break;
        }
        return EXIT_SOFTWARE;
}

int outcome_exit_code(const Outcome *o) {
        switch (o->kind) {
        case OUTCOME_GRANTED:
        case OUTCOME_QUEUED:
        case OUTCOME_RENEWED:
                return 0;
        case OUTCOME_LOST:
                return EXIT_TEMPFAIL;
        case OUTCOME_REFUSED:
                return refusal_exit_code(o->refusal);
        case OUTCOME_UNAVAILABLE:
                return EXIT_UNAVAILABLE;
        case OUTCOME_INTERNAL:
                break;
        }
        return EXIT_SOFTWARE;
}

int exit_code_for_error(const char *code) {
        Refusal r = refusal_of_error_code(code);

        if (r != REFUSAL_NONE)
                return refusal_exit_code(r);
        return streq(code, ERROR_CODE_UNAVAILABLE) ? EXIT_UNAVAILABLE : EXIT_SOFTWARE;
}
