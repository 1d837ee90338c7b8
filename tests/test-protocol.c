/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "client.h"
#include "macro.h"
#include "protocol.h"
#include "tap.h"

#define LEASE "0123456789abcdef0123456789abcdef"

static void test_roundtrip(void) {
        Request in = { .verb = REQUEST_ACQUIRE, .slots = 3, .wait = 30 * USEC_PER_SEC }, out;
        char line[PROTO_REQUEST_MAX + 1];
        int n;

        strcpy(in.name, "backup:db@web-1");
        strcpy(in.lease, LEASE);
        n = request_format(&in, line, sizeof(line));
        CHECK(n > 0, "format ACQUIRE");
        CHECK_INT(request_parse(line, (size_t) n, &out, NULL), 0, "parse what was formatted");
        CHECK_STR(out.name, in.name, "name survives");
        CHECK_STR(out.lease, in.lease, "lease survives");
        CHECK_INT(out.slots, 3, "slots survive");
        CHECK_U64(out.wait, 30 * USEC_PER_SEC, "wait survives");

        in.wait = USEC_INFINITY;
        n = request_format(&in, line, sizeof(line));
        CHECK_INT(request_parse(line, (size_t) n, &out, NULL), 0, "parse wait=infinity");
        CHECK_U64(out.wait, USEC_INFINITY, "infinity survives");
        CHECK(!out.unit && !out.stop_on_lost, "not bound to a unit unless asked");

        in.unit = in.stop_on_lost = true;
        n = request_format(&in, line, sizeof(line));
        CHECK_INT(request_parse(line, (size_t) n, &out, NULL), 0, "parse unit=1 on_lost=stop");
        CHECK(out.unit && out.stop_on_lost, "unit binding and on_lost survive");

        in = (Request) { .verb = REQUEST_RELEASE, .unit = true };
        strcpy(in.name, "backup");
        n = request_format(&in, line, sizeof(line));
        CHECK_INT(request_parse(line, (size_t) n, &out, NULL), 0, "parse RELEASE name= unit=1");
        CHECK(out.verb == REQUEST_RELEASE && out.unit && streq(out.name, "backup") && !out.lease[0],
              "RELEASE by the unit's name survives");

        in = (Request) { .verb = REQUEST_ACQUIRE, .slots = 1, .weight = 1, .host_held = true };
        strcpy(in.name, "reboot");
        strcpy(in.lease, LEASE);
        strcpy(in.reason, "kernel 6.1; packages: linux-image-amd64");
        n = request_format(&in, line, sizeof(line));
        CHECK(n > 0 && strstr(line, " hold=host reason=kernel%206.1%3B%20packages:%20linux-image-amd64"),
              "ACQUIRE hold=host with its reason, encoded");
        CHECK_INT(request_parse(line, (size_t) n, &out, NULL), 0, "parse ACQUIRE hold=host");
        CHECK(out.host_held && !out.unit && streq(out.reason, in.reason), "hold=host and the reason survive");

        in = (Request) { .verb = REQUEST_RELEASE, .host_held = true };
        strcpy(in.name, "reboot");
        n = request_format(&in, line, sizeof(line));
        CHECK_STR(line, "RELEASE name=reboot hold=host", "RELEASE of the host's slot of a name");
        CHECK_INT(request_parse(line, (size_t) n, &out, NULL), 0, "parse RELEASE name= hold=host");
        CHECK(out.verb == REQUEST_RELEASE && out.host_held && !out.unit && !out.lease[0],
              "RELEASE of the host's slot survives");

        in = (Request) { .verb = REQUEST_METRICS };
        n = request_format(&in, line, sizeof(line));
        CHECK_STR(line, "METRICS", "METRICS has no fields");
        CHECK_INT(request_parse(line, (size_t) n, &out, NULL), 0, "parse METRICS");
        CHECK_INT(out.verb, REQUEST_METRICS, "METRICS survives");

        in = (Request) { .verb = REQUEST_DRAIN, .drain = true };
        strcpy(in.name, "backup");
        strcpy(in.reason, "incident 42: disk full, caf\xc3\xa9");
        n = request_format(&in, line, sizeof(line));
        CHECK_STR(line, "DRAIN name=backup on=1 reason=incident%2042:%20disk%20full,%20caf%C3%A9",
                  "DRAIN with its reason, spaces and UTF-8 encoded");
        CHECK_INT(request_parse(line, (size_t) n, &out, NULL), 0, "parse DRAIN");
        CHECK(out.verb == REQUEST_DRAIN && out.drain && streq(out.name, "backup") &&
              streq(out.reason, "incident 42: disk full, caf\xc3\xa9"), "DRAIN survives, reason and all");
        in = (Request) { .verb = REQUEST_DRAIN };
        strcpy(in.name, "backup");
        n = request_format(&in, line, sizeof(line));
        CHECK_STR(line, "DRAIN name=backup on=0", "undrain: on=0, no reason");
        CHECK(request_parse(line, (size_t) n, &out, NULL) == 0 && out.verb == REQUEST_DRAIN && !out.drain,
              "undrain survives");

        in = (Request) { .verb = REQUEST_REVOKE };
        strcpy(in.name, "backup");
        strcpy(in.lease, LEASE);
        strcpy(in.reason, "host gone");
        n = request_format(&in, line, sizeof(line));
        CHECK_STR(line, "REVOKE name=backup lease=" LEASE " reason=host%20gone", "REVOKE of a lease");
        CHECK(request_parse(line, (size_t) n, &out, NULL) == 0 && out.verb == REQUEST_REVOKE &&
              streq(out.name, "backup") && streq(out.lease, LEASE) && !out.host[0] && streq(out.reason, "host gone"),
              "REVOKE of a lease survives");
        in = (Request) { .verb = REQUEST_REVOKE };
        strcpy(in.host, "web-3");
        n = request_format(&in, line, sizeof(line));
        CHECK_STR(line, "REVOKE host=web-3", "REVOKE of a host's leases");
        CHECK(request_parse(line, (size_t) n, &out, NULL) == 0 && out.verb == REQUEST_REVOKE &&
              streq(out.host, "web-3") && !out.name[0] && !out.lease[0] && !out.revoke_now, "REVOKE of a host survives");
        in.revoke_now = true;
        n = request_format(&in, line, sizeof(line));
        CHECK_STR(line, "REVOKE host=web-3 now=1", "REVOKE now=1: a host known dead");
        CHECK(request_parse(line, (size_t) n, &out, NULL) == 0 && out.revoke_now, "now=1 survives");
        CHECK(request_parse("REVOKE host=web-3 now=0", 23, &out, NULL) < 0, "now=0 is refused");

        in = (Request) { .verb = REQUEST_LIMIT, .slots = 5 };
        strcpy(in.name, "backup");
        strcpy(in.reason, "disk slow");
        n = request_format(&in, line, sizeof(line));
        CHECK_STR(line, "LIMIT name=backup slots=5 reason=disk%20slow", "LIMIT sets a fleet limit");
        CHECK(request_parse(line, (size_t) n, &out, NULL) == 0 && out.verb == REQUEST_LIMIT && out.slots == 5 &&
              streq(out.name, "backup") && streq(out.reason, "disk slow"), "LIMIT survives");
        in = (Request) { .verb = REQUEST_LIMIT };
        strcpy(in.name, "backup");
        n = request_format(&in, line, sizeof(line));
        CHECK_STR(line, "LIMIT name=backup slots=0", "LIMIT slots=0 removes it");
        CHECK(request_parse(line, (size_t) n, &out, NULL) == 0 && out.verb == REQUEST_LIMIT && out.slots == 0,
              "... and survives");
        in = (Request) { .verb = REQUEST_ACQUIRE, .wait = 0 };
        strcpy(in.name, "backup");
        strcpy(in.lease, LEASE);
        n = request_format(&in, line, sizeof(line));
        CHECK(request_parse(line, (size_t) n, &out, NULL) == 0 && out.verb == REQUEST_ACQUIRE && out.slots == 0,
              "ACQUIRE slots=0 (the fleet limit) survives");
        CHECK_INT(out.weight, 1, "... and weighs 1 without weight=");
        in.slots = 5;
        in.weight = 3;
        n = request_format(&in, line, sizeof(line));
        CHECK_STR(line, "ACQUIRE name=backup slots=5 lease=" LEASE " wait=0 weight=3", "ACQUIRE weight=3");
        CHECK(request_parse(line, (size_t) n, &out, NULL) == 0 && out.weight == 3 && out.slots == 5,
              "... survives");

        in = (Request) { .verb = REQUEST_WATCH };
        n = request_format(&in, line, sizeof(line));
        CHECK_STR(line, "WATCH", "WATCH has no fields");
        CHECK(request_parse(line, (size_t) n, &out, NULL) == 0 && out.verb == REQUEST_WATCH, "WATCH survives");
}

static void test_malformed(void) {
        Request r;
        const char *why = NULL;
        static const char *const bad[] = {
                "",
                " ",
                "acquire name=x",
                "HELLO",
                "ACQUIRE",
                "ACQUIRE name=x slots=1 wait=0",                                /* no lease */
                "ACQUIRE name=x slots=1 lease=" LEASE " wait=0 extra=1",
                "ACQUIRE name=x name=y slots=1 lease=" LEASE " wait=0",         /* duplicate */
                "ACQUIRE name=a%20b slots=1 lease=" LEASE " wait=0",            /* invalid name */
                "ACQUIRE name=x slots=1000001 lease=" LEASE " wait=0",
                "ACQUIRE name=x slots=-1 lease=" LEASE " wait=0",
                "ACQUIRE name=x slots=1x lease=" LEASE " wait=0",
                "ACQUIRE name=x slots=1 lease=XYZ wait=0",
                "ACQUIRE name=x slots=1 lease=" LEASE " wait=soon",
                "ACQUIRE name=x  slots=1 lease=" LEASE " wait=0",               /* double space */
                "ACQUIRE name=x slots=1 lease=" LEASE " wait=0 ",               /* trailing space */
                "ACQUIRE name=x slots=1 lease=" LEASE " =0",
                "ACQUIRE name=x slots=1 lease=" LEASE " wait",
                "ACQUIRE Name=x slots=1 lease=" LEASE " wait=0",
                "ACQUIRE name=x%0 slots=1 lease=" LEASE " wait=0",              /* truncated escape */
                "ACQUIRE name=x%00 slots=1 lease=" LEASE " wait=0",             /* encoded NUL */
                "ACQUIRE name=x\t slots=1 lease=" LEASE " wait=0",
                "RELEASE",
                "RELEASE name=x",                                               /* not bound: needs lease= */
                "RELEASE unit=1",
                "RELEASE name=x lease=" LEASE,
                "RELEASE lease=" LEASE " unit=1",
                "RELEASE name=x unit=yes",
                "ACQUIRE name=x slots=1 lease=" LEASE " wait=0 on_lost=stop",   /* on_lost needs unit=1 */
                "ACQUIRE name=x slots=1 lease=" LEASE " wait=0 unit=1 on_lost=halt",
                "ACQUIRE name=x slots=1 lease=" LEASE " wait=0 unit=0",
                "ACQUIRE name=x slots=1 lease=" LEASE " wait=0 hold=host unit=1",     /* one or the other */
                "ACQUIRE name=x slots=1 lease=" LEASE " wait=0 hold=unit",
                "ACQUIRE name=x slots=1 lease=" LEASE " wait=0 reason=why",           /* a reason goes with hold=host */
                "ACQUIRE name=x slots=1 lease=" LEASE " wait=0 hold=host reason=a%0Ab",
                "RELEASE hold=host",                                                  /* no name */
                "RELEASE name=x hold=host unit=1",
                "RELEASE lease=" LEASE " hold=host",
                "STATUS name=",
                "METRICS name=x",                                               /* no fields */
                "METRICS ",
                "METRICSX",
                "DRAIN on=1",                                                   /* no name */
                "DRAIN name=x",                                                 /* no on= */
                "DRAIN name=x on=yes",
                "DRAIN name=x on=0 reason=why",                                 /* a reason goes with on=1 */
                "DRAIN name=x on=1 reason=",                                    /* empty */
                "DRAIN name=x on=1 reason=a%0Ab",                               /* a newline */
                "DRAIN name=x on=1 reason=a%1Bb",                               /* ESC */
                "DRAIN name=x on=1 reason=%E2%80%AEevil",                       /* right-to-left override */
                "DRAIN name=x on=1 reason=%FF",                                 /* not UTF-8 */
                "DRAIN name=x on=1 lease=" LEASE,
                "DRAIN name=x on=1 reason=a%E2%80%A8b",                         /* line separator */
                "DRAIN name=x on=1 reason=%EF%BB%BFa",                          /* BOM */
                "DRAIN name=x on=1 reason=a%D8%9Cb",                            /* Arabic letter mark */
                "REVOKE lease=" LEASE,                                          /* no name */
                "REVOKE name=x",                                                /* no lease nor host */
                "REVOKE name=x lease=" LEASE " host=h",                         /* both */
                "REVOKE host=bad%20host",
                "REVOKE name=x lease=abc",
                "REVOKE name=x lease=" LEASE " reason=%0A",
                "WATCH name=x",
                "ACQUIRE name=x slots=2 lease=" LEASE " wait=0 weight=3",      /* above slots */
                "ACQUIRE name=x slots=2 lease=" LEASE " wait=0 weight=0",
                "ACQUIRE name=x slots=2 lease=" LEASE " wait=0 weight=x",
                "ACQUIRE name=x slots=2 lease=" LEASE " wait=0 weight=1000001",
                "STATUS weight=2",
                "LIMIT name=x",                                                 /* no slots */
                "LIMIT slots=3",                                                /* no name */
                "LIMIT name=x slots=1000001",
                "LIMIT name=x slots=-1",
                "LIMIT name=x slots=3 lease=" LEASE,
                "LIMIT name=x slots=3 reason=%0A",
        };

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                why = NULL;
                CHECK(request_parse(bad[i], strlen(bad[i]), &r, &why) < 0 && why, "refused with a reason: \"%s\"", bad[i]);
        }
}

static void test_nul_and_size(void) {
        char line[PROTO_REQUEST_MAX + 64];
        const char *good = "STATUS name=x";
        Request r;
        int k;

        memcpy(line, good, strlen(good) + 1);
        line[8] = '\0';
        CHECK(request_parse(line, strlen(good), &r, NULL) < 0, "an embedded NUL byte is refused");

        memset(line, 'a', sizeof(line));
        memcpy(line, "STATUS name=", 12);
        k = request_parse(line, PROTO_REQUEST_MAX + 1, &r, NULL);
        CHECK_INT(k, -E2BIG, "a request longer than the limit is refused as too long");
}

static void test_replies(void) {
        Reply rep;
        const char *err = "ERROR code=permission message=uid%201000%20may%20not";

        CHECK_INT(reply_parse("GRANTED token=42 lease=" LEASE " since=5", strlen("GRANTED token=42 lease=" LEASE " since=5"), &rep), 0,
                  "GRANTED parses");
        CHECK_INT(rep.kind, REPLY_GRANTED, "kind GRANTED");
        CHECK_U64(rep.token, 42, "token 42");
        CHECK_INT(reply_parse(err, strlen(err), &rep), 0, "ERROR parses");
        CHECK_STR(rep.code, "permission", "error code");
        CHECK_STR(rep.message, "uid 1000 may not", "message decoded");
        CHECK_INT(exit_code_for_error(rep.code), EXIT_NOPERM, "permission → 77");
        CHECK_INT(exit_code_for_error("unavailable"), EXIT_UNAVAILABLE, "unavailable → 69");
        CHECK_INT(exit_code_for_error("invalid"), EXIT_USAGE, "invalid → 64");
        CHECK(reply_parse("BOGUS x=1", 9, &rep) < 0, "unknown reply refused");
        CHECK(reply_parse("ERROR code=x", 12, &rep) < 0, "ERROR without message refused");
}

static void test_reply_fields(void) {
        static const char *const bad[] = {
                "QUEUED position=1 held=1 slots=3 limit=0",
                "QUEUED position=1 held=1 slots=3 limit=x",
                "QUEUED position=1 held=1 slots=3 limit=1000001",
                "GRANTED token=1 lease=" LEASE " since=5 ttl=0",
                "GRANTED token=1 lease=" LEASE " since=5 ttl=-1",
                "RENEWED ttl=15000x",
                "RENEWED ttl=86400001",
        };
        const char *q = "QUEUED position=2 held=1 slots=3 limit=1";
        const char *g = "GRANTED token=7 lease=" LEASE " since=5 ttl=15000 limit=2";
        const char *old = "QUEUED position=2 held=1 slots=3";
        char note[256];
        Reply rep;

        CHECK_INT(reply_parse(q, strlen(q), &rep), 0, "QUEUED with limit= parses");
        CHECK_INT(rep.limit, 1, "limit 1");
        CHECK_INT(reply_limit(&rep, 3), 1, "the limit in force is what the agent says");
        CHECK_INT(reply_parse(old, strlen(old), &rep), 0, "QUEUED without limit= parses");
        CHECK_INT(rep.limit, 0, "no limit said");
        CHECK_INT(reply_limit(&rep, 3), 3, "a missing limit= is the slots asked for");
        CHECK_U64(rep.ttl_ms, 0, "no ttl: no self-fencing");
        CHECK_INT(reply_parse(g, strlen(g), &rep), 0, "GRANTED with ttl= and limit= parses");
        CHECK_U64(rep.ttl_ms, 15000, "ttl 15000 ms");
        CHECK_INT(rep.limit, 2, "limit 2");
        CHECK_INT(reply_parse("RENEWED ttl=3000", 16, &rep), 0, "RENEWED parses");
        CHECK_INT(rep.kind, REPLY_RENEWED, "kind RENEWED");
        CHECK_U64(rep.ttl_ms, 3000, "RENEWED carries the ttl");
        CHECK_INT(reply_parse("RENEWED", 7, &rep), 0, "RENEWED without ttl= parses");
        CHECK_U64(rep.ttl_ms, 0, "... and says no ttl");
        for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                CHECK(reply_parse(bad[i], strlen(bad[i]), &rep) == -EBADMSG, "refused: %s", bad[i]);

        CHECK(limit_note("mixed", 1, 3, "you asked for", note, sizeof(note)), "a limit below the request is noted");
        CHECK_STR(note, "mixed is limited to 1 at once by its current holders or its fleet limit (you asked for 3)", "the note");
        CHECK(!limit_note("mixed", 3, 3, "you asked for", note, sizeof(note)), "the limit asked for: no note");
        CHECK(!limit_note("mixed", 5, 3, "you asked for", note, sizeof(note)), "a higher limit: no note");
        CHECK(!limit_note("mixed", 0, 3, "you asked for", note, sizeof(note)), "no limit said: no note");
}

static void test_text_escape(void) {
        static const struct {
                const char *in, *out;
        } cases[] = {
                { "web-1", "web-1" },
                { "\x1b[2J", "\\x1b[2J" },
                { "a\nb\tc\rd", "a\\nb\\tc\\rd" },
                { "back\\slash", "back\\\\slash" },
                { "\x7f", "\\x7f" },
                { "caf\xc3\xa9 \xe2\x9c\x93", "caf\xc3\xa9 \xe2\x9c\x93" },            /* printable UTF-8 stays */
                { "\xc2\x9b" "2J", "\\xc2\\x9b2J" },                                     /* C1 CSI */
                { "\x9b" "2J", "\\x9b2J" },                                                /* a lone 8-bit CSI */
                { "\xe2\x80\xae" "gnp.exe", "\\xe2\\x80\\xaegnp.exe" },               /* right-to-left override */
                { "\xc0\xaf", "\\xc0\\xaf" },                                            /* overlong '/' */
                { "\xed\xa0\x80", "\\xed\\xa0\\x80" },                                /* a surrogate */
                { "\xe2\x9c", "\\xe2\\x9c" },                                            /* truncated */
        };
        char buf[64], small[6];

        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                CHECK_STR(text_escape(cases[i].in, buf, sizeof(buf)), cases[i].out, "escape case");
        CHECK_STR(text_escape("\x1b\x1b", small, sizeof(small)), "\\x1b", "a short buffer truncates between escapes");
        CHECK_STR(text_escape("", buf, sizeof(buf)), "", "empty stays empty");
}

/* A listener nobody accepts from, its backlog filled: connecting gives up at
 * the deadline; a readable cancel fd stops it at once. */
static void test_connect_bounded(void) {
        struct sockaddr_un sa;
        socklen_t len;
        int listener, fds[64], n = 0, fd = -EBADF, cancel[2], r;
        char ns[64];
        usec_t t0, took;

        snprintf(ns, sizeof(ns), "fleetsem-test-%d", (int) getpid());
        CHECK_INT(sockaddr_abstract(ns, "agent", NULL, &sa, &len), 0, "address");
        listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK(listener >= 0 && bind(listener, (struct sockaddr *) &sa, len) == 0 && listen(listener, 0) == 0, "listen, backlog 0");
        while (n < (int) ELEMENTSOF(fds)) {
                fds[n] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
                if (connect(fds[n], (struct sockaddr *) &sa, len) < 0) {
                        close(fds[n]);
                        break;
                }
                n++;
        }
        CHECK(n > 0 && n < (int) ELEMENTSOF(fds), "the backlog is full after %d connections", n);

        t0 = now_usec(CLOCK_MONOTONIC);
        r = client_connect(ns, getuid(), t0 + 300 * USEC_PER_MSEC, -EBADF, &fd);
        took = now_usec(CLOCK_MONOTONIC) - t0;
        CHECK_INT(r, -EAGAIN, "a full backlog until the deadline: -EAGAIN");
        CHECK(took >= 300 * USEC_PER_MSEC && took < 1500 * USEC_PER_MSEC, "at the deadline (%" PRIu64 " ms)", took / USEC_PER_MSEC);

        CHECK_INT(pipe(cancel), 0, "pipe");
        CHECK_INT(write(cancel[1], "x", 1), 1, "cancel");
        t0 = now_usec(CLOCK_MONOTONIC);
        r = client_connect(ns, getuid(), USEC_INFINITY, cancel[0], &fd);
        took = now_usec(CLOCK_MONOTONIC) - t0;
        CHECK_INT(r, -ECANCELED, "a readable cancel fd ends an endless wait: -ECANCELED");
        CHECK(took < 500 * USEC_PER_MSEC, "at once (%" PRIu64 " ms)", took / USEC_PER_MSEC);

        /* Closing our ends frees no place in the backlog; accepting does. */
        for (int i = 0; i < n; i++) {
                close(fds[i]);
                safe_close(accept4(listener, NULL, NULL, SOCK_CLOEXEC));
        }
        r = client_connect(ns, getuid() + 1, USEC_INFINITY, -EBADF, &fd);
        CHECK_INT(r, getuid() == 0 ? 0 : -EPERM, "the peer's uid is checked (root is always trusted)");
        if (r >= 0)
                close(fd);
        close(listener);
        r = client_connect(ns, getuid(), USEC_INFINITY, -EBADF, &fd);
        CHECK_INT(r, -ENOENT, "nobody listens: -ENOENT");
        close(cancel[0]);
        close(cancel[1]);
}

static void test_encoding(void) {
        char line[256];
        MessageBuilder b;
        Message m;
        int n;

        message_start(&b, line, sizeof(line), "NAME");
        message_add(&b, "message", "a b%c\n=d");
        n = message_finish(&b);
        CHECK(n > 0 && !memchr(line, ' ', 4) && !strchr(line, '\n'), "encoded line has no raw newline");
        CHECK_INT(message_parse(line, (size_t) n, sizeof(line), &m), 0, "encoded line parses");
        CHECK_STR(message_get(&m, "message"), "a b%c\n=d", "value round-trips");

        message_start(&b, line, 16, "NAME");
        message_add(&b, "message", "this does not fit in sixteen bytes");
        CHECK_INT(message_finish(&b), -ENOBUFS, "overflow is reported, not truncated");
}

static void test_message_moves(void) {
        const char *line = "HOLDER name=x lease=y token=7";
        Message *a = malloc(sizeof(Message)), *b;

        CHECK_INT(message_parse(line, strlen(line), PROTO_REPLY_MAX, a), 0, "parse before a move");
        b = malloc(sizeof(Message));
        memcpy(b, a, sizeof(Message));
        memset(a, 'Z', sizeof(Message));
        free(a);
        CHECK_STR(message_get(b, "token"), "7", "a copied message still reads its fields");
        free(b);
}

static void test_line_reader(void) {
        LineReader lr;
        int sv[2];
        char *line;
        size_t len;
        char big[PROTO_REQUEST_MAX + 10];

        CHECK_INT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0, "socketpair");
        line_reader_init(&lr, PROTO_REQUEST_MAX);

        /* Pipelined: two lines in one write. */
        CHECK_INT(write(sv[1], "ONE a=1\nTWO b=2\nTHR", 19), 19, "write pipelined lines");
        CHECK(line_reader_fill(&lr, sv[0]) > 0, "fill");
        CHECK_INT(line_reader_next(&lr, &line, &len), 1, "first line");
        CHECK_STR(line, "ONE a=1", "first line text");
        CHECK_INT(line_reader_next(&lr, &line, &len), 1, "second line");
        CHECK_STR(line, "TWO b=2", "second line text");
        CHECK_INT(line_reader_next(&lr, &line, &len), 0, "a truncated line is not returned");

        /* Oversized without newline. */
        memset(big, 'x', sizeof(big));
        CHECK_INT(write(sv[1], big, sizeof(big)), (int) sizeof(big), "write oversized");
        CHECK(line_reader_fill(&lr, sv[0]) > 0, "fill oversized");
        CHECK_INT(line_reader_next(&lr, &line, &len), -E2BIG, "oversized line refused");
        close(sv[0]);
        close(sv[1]);
}

/* Redis errors that mean "not serving for now" are the limiter being
 * unreachable (the caller's on_error); any other is an error. */
static void test_redis_error_codes(void) {
        static const char *const now[] = { "LOADING Redis is loading the dataset in memory",
                "READONLY You can't write against a read only replica.", "MASTERDOWN Link with MASTER is down",
                "CLUSTERDOWN The cluster is down", "TRYAGAIN Multiple keys request during rehashing of slot",
                "BUSY Redis is busy running a script.", "NOREPLICAS Not enough good replicas to write.",
                "OOM command not allowed when used memory > 'maxmemory'." };

        for (size_t i = 0; i < ELEMENTSOF(now); i++)
                CHECK_STR(error_code_of_redis_error(now[i]), ERROR_CODE_UNAVAILABLE, now[i]);
        CHECK_STR(error_code_of_redis_error("WRONGTYPE Operation against a key holding the wrong kind of value"),
                  ERROR_CODE_REDIS, "WRONGTYPE is an error");
        CHECK_STR(error_code_of_redis_error("ERR Error running script"), ERROR_CODE_REDIS, "a script's error is one");
        CHECK_STR(error_code_of_redis_error("BUSYKEY Target key name already exists."), ERROR_CODE_REDIS,
                  "a prefix alone is not the word (BUSYKEY)");
        CHECK_STR(error_code_of_redis_error(NULL), ERROR_CODE_REDIS, "no text: an error");
        /* What lasts until an operator acts is refused whatever on_error says. */
        CHECK_STR(error_code_of_redis_error("NOPERM User fleetsem has no permissions to run the 'fcall' command"),
                  ERROR_CODE_MISCONFIGURED, "NOPERM: misconfigured");
        CHECK_STR(error_code_of_redis_error("WRONGPASS invalid username-password pair or user is disabled."),
                  ERROR_CODE_MISCONFIGURED, "WRONGPASS: misconfigured");
        CHECK_STR(error_code_of_redis_error("NOAUTH Authentication required."), ERROR_CODE_MISCONFIGURED,
                  "NOAUTH: misconfigured");
        CHECK_STR(error_code_of_state("eviction"), ERROR_CODE_MISCONFIGURED, "an evicting policy: misconfigured");
        CHECK_STR(error_code_of_state("library-newer"), ERROR_CODE_MISCONFIGURED, "a newer library: misconfigured");
        CHECK_STR(error_code_of_state("library-changed"), ERROR_CODE_MISCONFIGURED, "a changed library: misconfigured");
        CHECK_STR(error_code_of_state("no-functions"), ERROR_CODE_MISCONFIGURED, "no Functions: misconfigured");
        CHECK_STR(error_code_of_state("timeout"), ERROR_CODE_UNAVAILABLE, "a timeout: unavailable");
        CHECK_STR(error_code_of_state("OOM"), ERROR_CODE_UNAVAILABLE, "OOM: unavailable");
        CHECK(redis_state_fix("WRONGPASS") != NULL && redis_state_fix("LOADING") == NULL, "a refused error has its fix");
}

int main(void) {
        test_roundtrip();
        test_malformed();
        test_nul_and_size();
        test_replies();
        test_reply_fields();
        test_text_escape();
        test_connect_bounded();
        test_encoding();
        test_message_moves();
        test_line_reader();
        test_redis_error_codes();
        return tap_done();
}
