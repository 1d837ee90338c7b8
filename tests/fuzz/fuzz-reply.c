/* SPDX-License-Identifier: MIT */
/* What the CLI and the PAM module make of the agent's lines: bytes through
 * the LineReader, each line through reply_parse(). An accepted reply is
 * one of the known kinds with the fields that kind needs, and a reply
 * written back from it reads back the same. Each line through the
 * classifier (outcome.h) too: what reply_parse() refuses is INTERNAL, only
 * a GRANTED grants, only ERROR code=unavailable is UNAVAILABLE, and the
 * text shown is bounded. */

#include "client.h"
#include "fuzz.h"
#include "macro.h"
#include "names.h"
#include "outcome.h"

static const char *const verbs[] = {
        [REPLY_QUEUED] = "QUEUED", [REPLY_GRANTED] = "GRANTED", [REPLY_DENIED] = "DENIED",
        [REPLY_ERROR] = "ERROR", [REPLY_LOST] = "LOST", [REPLY_RELEASED] = "RELEASED",
        [REPLY_RENEWED] = "RENEWED",
};

static void check_reply(const Reply *rep) {
        char line[PROTO_REPLY_MAX + 1];
        MessageBuilder b;
        Reply again;
        int n;

        fuzz_assert((size_t) rep->kind < sizeof(verbs) / sizeof(verbs[0]));
        if (rep->kind == REPLY_GRANTED)
                fuzz_assert(lease_id_is_valid(rep->lease));
        if (rep->kind == REPLY_ERROR)
                fuzz_assert(rep->code[0] && rep->message[0]);
        fuzz_assert(strlen(rep->code) < sizeof(rep->code) && strlen(rep->message) < sizeof(rep->message));

        message_start(&b, line, sizeof(line), verbs[rep->kind]);
        message_add_u64(&b, "position", rep->position);
        message_add_u64(&b, "held", rep->held);
        message_add_u64(&b, "slots", rep->slots);
        message_add_u64(&b, "token", rep->token);
        message_add_u64(&b, "since", rep->since_ms);
        message_add(&b, "lease", rep->lease);
        if (rep->limit > 0)
                message_add_u64(&b, "limit", rep->limit);
        if (rep->ttl_ms > 0)
                message_add_u64(&b, "ttl", rep->ttl_ms);
        if (rep->kind == REPLY_ERROR) {
                message_add(&b, "code", rep->code);
                message_add(&b, "message", rep->message);
        } else
                message_add(&b, "reason", rep->message);
        n = message_finish(&b);
        fuzz_assert(n > 0);
        fuzz_assert(reply_parse(line, (size_t) n, &again) == 0);
        fuzz_assert(again.kind == rep->kind && again.position == rep->position && again.held == rep->held);
        fuzz_assert(again.slots == rep->slots && again.token == rep->token && again.since_ms == rep->since_ms);
        fuzz_assert(strcmp(again.lease, rep->lease) == 0 && strcmp(again.code, rep->code) == 0);
        fuzz_assert(strcmp(again.message, rep->message) == 0);
        fuzz_assert(again.limit == rep->limit && again.ttl_ms == rep->ttl_ms);
}

static void check_outcome(const char *line, size_t len, int parsed, const Reply *rep, bool granted) {
        Outcome o;
        OutcomeKind k = outcome_of_line(line, len, granted, &o);

        fuzz_assert(k == o.kind && strnlen(o.text, sizeof(o.text)) < sizeof(o.text));
        if (parsed < 0)
                fuzz_assert(k == OUTCOME_INTERNAL);
        if (k == OUTCOME_GRANTED)
                fuzz_assert(parsed == 0 && rep->kind == REPLY_GRANTED && lease_id_is_valid(o.reply.lease));
        if (k == OUTCOME_UNAVAILABLE)
                fuzz_assert(parsed == 0 && rep->kind == REPLY_ERROR && streq(rep->code, ERROR_CODE_UNAVAILABLE));
        if (k == OUTCOME_REFUSED)
                fuzz_assert(o.refusal != REFUSAL_NONE && (rep->kind == REPLY_DENIED || rep->kind == REPLY_ERROR));
        if (k == OUTCOME_RENEWED || k == OUTCOME_LOST)
                fuzz_assert(granted);
        fuzz_assert(k == OUTCOME_GRANTED || k == OUTCOME_QUEUED || k == OUTCOME_RENEWED ||
                    outcome_exit_code(&o) != 0);
}

static void on_line(char *line, size_t len) {
        Reply rep;
        int r;

        r = reply_parse(line, len, &rep);
        fuzz_assert(r == 0 || r == -EBADMSG);
        if (r == 0)
                check_reply(&rep);
        check_outcome(line, len, r, &rep, false);
        check_outcome(line, len, r, &rep, true);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        fuzz_lines(data, size, PROTO_REPLY_MAX, on_line);
        return 0;
}
