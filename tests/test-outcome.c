/* SPDX-License-Identifier: MIT */
/* The one classifier of what an ACQUIRE came to (outcome.h): every reply
 * kind the agent sends, malformed ones, and failures to reach it. */
#include <errno.h>
#include <string.h>

#include "macro.h"
#include "outcome.h"
#include "tap.h"

#define LEASE "0123456789abcdef0123456789abcdef"

static OutcomeKind of(const char *line, bool granted, Outcome *o) {
        return outcome_of_line(line, strlen(line), granted, o);
}

/* line gives kind (and refusal, and exit code), before a grant. */
static void check_line(const char *line, OutcomeKind kind, Refusal refusal, int exit_code) {
        Outcome o;

        of(line, false, &o);
        CHECK(o.kind == kind && o.refusal == refusal && outcome_exit_code(&o) == exit_code,
              "%s: %s/%s, exit %d", line, outcome_kind_to_string(kind), refusal_to_string(refusal), exit_code);
        if (o.kind != kind || o.refusal != refusal || outcome_exit_code(&o) != exit_code)
                printf("#   got %s/%s, exit %d (%s)\n", outcome_kind_to_string(o.kind), refusal_to_string(o.refusal),
                       outcome_exit_code(&o), o.text);
}

static void test_progress_and_grant(void) {
        Outcome o;

        check_line("QUEUED position=3 held=5 slots=5 limit=5", OUTCOME_QUEUED, REFUSAL_NONE, 0);
        of("QUEUED position=3 held=5 slots=5 limit=5", false, &o);
        CHECK_INT(o.reply.position, 3, "QUEUED keeps the decoded reply: position");
        check_line("GRANTED token=42 lease=" LEASE " since=1 ttl=15000 limit=5", OUTCOME_GRANTED, REFUSAL_NONE, 0);
        of("GRANTED token=42 lease=" LEASE " since=1 ttl=15000 limit=5", false, &o);
        CHECK_U64(o.reply.token, 42, "GRANTED keeps the token");
        CHECK_STR(o.reply.lease, LEASE, "... and the lease");
        check_line("GRANTED token=42 lease=nothex since=1", OUTCOME_INTERNAL, REFUSAL_NONE, EXIT_SOFTWARE);
}

static void test_after_grant(void) {
        Outcome o;

        CHECK_INT(of("RENEWED ttl=15000", true, &o), OUTCOME_RENEWED, "RENEWED after a grant");
        CHECK_INT(of("LOST reason=revoked", true, &o), OUTCOME_LOST, "LOST after a grant");
        CHECK_STR(o.text, "revoked", "... with its reason");
        CHECK_INT(outcome_exit_code(&o), EXIT_TEMPFAIL, "... exit 75");
        CHECK_U64(o.reply.free_in_ms, UINT64_MAX, "... not saying when its slot may go elsewhere (an older agent)");
        CHECK_INT(of("LOST reason=revoked free_in=1500", true, &o), OUTCOME_LOST, "LOST with free_in");
        CHECK_U64(o.reply.free_in_ms, 1500, "... the ms until its slot may go elsewhere");
        CHECK_INT(of("LOST reason=revoked free_in=0", true, &o), OUTCOME_LOST, "LOST with free_in=0");
        CHECK_U64(o.reply.free_in_ms, 0, "... at once");
        CHECK_INT(of("LOST reason=revoked free_in=soon", true, &o), OUTCOME_INTERNAL, "a free_in that is no number: a bug");
        CHECK_INT(of("LOST reason=revoked free_in=99999999999", true, &o), OUTCOME_INTERNAL,
                  "... as is one longer than any lease");
        check_line("RENEWED ttl=15000", OUTCOME_INTERNAL, REFUSAL_NONE, EXIT_SOFTWARE);
        check_line("LOST reason=revoked", OUTCOME_INTERNAL, REFUSAL_NONE, EXIT_SOFTWARE);
        check_line("RELEASED held=1", OUTCOME_INTERNAL, REFUSAL_NONE, EXIT_SOFTWARE);
        CHECK_INT(of("RELEASED held=1", true, &o), OUTCOME_INTERNAL, "RELEASED answers no ACQUIRE, granted or not");
}

static void test_refusals(void) {
        check_line("DENIED reason=timeout position=3 held=5 slots=5 limit=5", OUTCOME_REFUSED, REFUSAL_TIMEOUT, 75);
        check_line("DENIED reason=full position=1 held=5 slots=5", OUTCOME_REFUSED, REFUSAL_FULL, 75);
        check_line("DENIED reason=drained position=1 held=0 slots=5 drained=root", OUTCOME_REFUSED, REFUSAL_DRAINED, 75);
        check_line("DENIED reason=unconfirmed", OUTCOME_REFUSED, REFUSAL_UNCONFIRMED, 75);
        check_line("ERROR code=permission message=no", OUTCOME_REFUSED, REFUSAL_PERMISSION, 77);
        check_line("ERROR code=anchor message=not%20yours", OUTCOME_REFUSED, REFUSAL_PERMISSION, 77);
        check_line("ERROR code=usage message=malformed", OUTCOME_REFUSED, REFUSAL_INVALID, 64);
        check_line("ERROR code=invalid message=bad%20name", OUTCOME_REFUSED, REFUSAL_INVALID, 64);
        check_line("ERROR code=limit message=too%20many%20leases", OUTCOME_REFUSED, REFUSAL_LIMIT, 77);
        check_line("ERROR code=too_heavy message=x", OUTCOME_REFUSED, REFUSAL_TOO_HEAVY, 64);
        check_line("ERROR code=no_limit message=x", OUTCOME_REFUSED, REFUSAL_NO_LIMIT, 78);
        check_line("ERROR code=misconfigured message=x", OUTCOME_REFUSED, REFUSAL_MISCONFIGURED, 78);
        check_line("ERROR code=busy message=try%20again", OUTCOME_REFUSED, REFUSAL_BUSY, 75);
        check_line("ERROR code=not_held message=x", OUTCOME_REFUSED, REFUSAL_NOT_HELD, 65);
        CHECK(refusal_is_configuration(REFUSAL_INVALID) && refusal_is_configuration(REFUSAL_NO_LIMIT) &&
              refusal_is_configuration(REFUSAL_TOO_HEAVY) && !refusal_is_configuration(REFUSAL_TIMEOUT) &&
              !refusal_is_configuration(REFUSAL_PERMISSION) && !refusal_is_configuration(REFUSAL_BUSY),
              "configuration refusals: invalid, no limit, too heavy");
}

static void test_unavailable_and_internal(void) {
        Outcome o;

        check_line("ERROR code=unavailable message=Redis%20at%20x%20is%20unreachable", OUTCOME_UNAVAILABLE, REFUSAL_NONE,
                   69);
        of("ERROR code=unavailable message=Redis%20at%20x%20is%20unreachable", false, &o);
        CHECK_STR(o.text, "Redis at x is unreachable", "unavailable: the agent's message, decoded");
        check_line("ERROR code=redis message=ERR%20oops", OUTCOME_INTERNAL, REFUSAL_NONE, 70);
        of("ERROR code=redis message=ERR%20oops", false, &o);
        CHECK_STR(o.text, "Redis answered the agent with an error: ERR oops", "code=redis: says what Redis said");
        check_line("ERROR code=frobnicated message=x", OUTCOME_INTERNAL, REFUSAL_NONE, 70);
        check_line("DENIED reason=sunspots", OUTCOME_INTERNAL, REFUSAL_NONE, 70);
        check_line("DENIED position=1", OUTCOME_INTERNAL, REFUSAL_NONE, 70);
        check_line("ERROR code=limit", OUTCOME_INTERNAL, REFUSAL_NONE, 70);
        check_line("ERROR message=x", OUTCOME_INTERNAL, REFUSAL_NONE, 70);
        check_line("", OUTCOME_INTERNAL, REFUSAL_NONE, 70);
        check_line("garbage", OUTCOME_INTERNAL, REFUSAL_NONE, 70);
        check_line("granted token=1", OUTCOME_INTERNAL, REFUSAL_NONE, 70);
        check_line("QUEUED position=1 limit=0", OUTCOME_INTERNAL, REFUSAL_NONE, 70);
        check_line("QUEUED position=1 limit=x", OUTCOME_INTERNAL, REFUSAL_NONE, 70);
        check_line("ERROR code=limit message=%zz", OUTCOME_INTERNAL, REFUSAL_NONE, 70);
        check_line("STATUS name=x", OUTCOME_INTERNAL, REFUSAL_NONE, 70);
        check_line("END now=5", OUTCOME_INTERNAL, REFUSAL_NONE, 70);

        of("garbage \x1b[2J", false, &o);
        CHECK_STR(o.text, "bug: a reply from the agent that this client cannot decode: \"garbage \\x1b[2J\"",
                  "an undecodable reply is shown, escaped");
        CHECK_INT(outcome_of_line("GRANTED\0token=1", 15, false, &o), OUTCOME_INTERNAL, "a NUL byte: internal");
        CHECK(strstr(o.text, "\"GRANTED\\x00token=1\"") != NULL, "... shown as \\x00 (%s)", o.text);
}

static void test_long_reply(void) {
        char line[PROTO_REPLY_MAX + 100];
        Outcome o;

        memset(line, 'A', sizeof(line) - 1);
        line[sizeof(line) - 1] = '\0';
        CHECK_INT(of(line, false, &o), OUTCOME_INTERNAL, "a reply line past the limit: internal");
        CHECK(strlen(o.text) < 300, "... shown cut short (%zu bytes)", strlen(o.text));
        CHECK(strstr(o.text, "...\"") != NULL, "... and said to be cut");
        memcpy(line, "ERROR code=limit message=", 25);
        line[PROTO_REPLY_MAX - 1] = '\0';
        CHECK_INT(of(line, false, &o), OUTCOME_REFUSED, "an ERROR at the longest a line may be: still decoded");
}

static void test_transport(void) {
        static const int unavailable[] = { -ENOENT, -ECONNREFUSED, -EPERM, -EAGAIN, -ETIMEDOUT, -ECONNRESET, -EPIPE };
        Outcome o;

        for (size_t i = 0; i < ELEMENTSOF(unavailable); i++) {
                outcome_of_error(unavailable[i], "ns", &o);
                CHECK(o.kind == OUTCOME_UNAVAILABLE && outcome_exit_code(&o) == EXIT_UNAVAILABLE,
                      "%s: unavailable, exit 69 (%s)", strerror(-unavailable[i]), o.text);
        }
        outcome_of_error(-ENOENT, "ns", &o);
        CHECK_STR(o.text, "no agent on @ns/agent", "no agent: said so");
        outcome_of_error(-EPERM, "ns", &o);
        CHECK(strstr(o.text, "not a trusted agent") != NULL, "untrusted peer: said so");
        CHECK_INT(outcome_of_error(-E2BIG, "ns", &o), OUTCOME_INTERNAL, "a line too long: internal");
        CHECK_INT(outcome_of_error(-EBADMSG, "ns", &o), OUTCOME_INTERNAL, "a line that is no reply: internal");
        CHECK_INT(outcome_of_error(-EMFILE, "ns", &o), OUTCOME_INTERNAL, "no fd left here: internal");
        CHECK_INT(outcome_exit_code(&o), EXIT_SOFTWARE, "... exit 70");
}

static void test_exit_code_for_error(void) {
        CHECK_INT(exit_code_for_error("permission"), 77, "exit_code_for_error(permission)");
        CHECK_INT(exit_code_for_error("not_held"), 65, "exit_code_for_error(not_held)");
        CHECK_INT(exit_code_for_error("no_limit"), 78, "exit_code_for_error(no_limit)");
        CHECK_INT(exit_code_for_error("misconfigured"), 78, "exit_code_for_error(misconfigured)");
        CHECK_INT(exit_code_for_error("unavailable"), 69, "exit_code_for_error(unavailable)");
        CHECK_INT(exit_code_for_error("redis"), 70, "exit_code_for_error(redis)");
        CHECK_INT(exit_code_for_error("what"), 70, "exit_code_for_error(unknown)");
}

int main(void) {
        test_progress_and_grant();
        test_after_grant();
        test_refusals();
        test_unavailable_and_internal();
        test_long_reply();
        test_transport();
        test_exit_code_for_error();
        return tap_done();
}
