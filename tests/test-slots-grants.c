/* SPDX-License-Identifier: MIT */
/* The rules of granting: the limit, waiting, drains, the order of
 * grants, wake messages as hints and as grants with proof. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "test-slots.h"

/* ---- The rules ------------------------------------------------------------------------ */

void test_grant_and_limit(void) {
        Client c1 = {}, c2 = {};
        Lease *a, *b;

        setup(0);
        a = ask(1, "x", 3, USEC_INFINITY, &c1, 0);
        CHECK_STR(last_call()->what, "acquire", "a request asks Redis");
        reply_granted(a, 7, 3, 10);
        CHECK_STR(c1.lines[0], "GRANTED token=7 lease=10000000000000000000000000000000 since=1000 ttl=2999 limit=3",
                  "GRANTED carries the lease left since the call was sent (10 µs ago) and the limit in force");

        b = ask(2, "x", 3, USEC_INFINITY, &c2, 20);
        reply_queued(b, 1, 1, -1, 30);
        CHECK_STR(c2.lines[0], "QUEUED position=1 held=1 slots=3 limit=1",
                  "a waiter is told the limit in force when it is below what it asked for");
        CHECK(!c2.finished, "and keeps waiting");
        teardown();
}

void test_wait_deadline_and_no_wait(void) {
        Client c1 = {}, c2 = {};
        Lease *a, *b;

        setup(0);
        a = ask(1, "x", 1, 2 * USEC_PER_SEC, &c1, 0);
        CHECK_U64(w.lease_timer[1], 2 * USEC_PER_SEC, "a waiter's deadline is armed");
        reply_queued(a, 1, 1, 60000, 100);
        CHECK_U64(w.lease_timer[1], 2 * USEC_PER_SEC, "the deadline comes before the next look");
        engine_lease_timer(&e, a, 2 * USEC_PER_SEC);
        CHECK(has_line(&c1, "DENIED reason=timeout position=1"), "denied at its deadline");
        CHECK(c1.finished, "and let go");
        CHECK_INT(count_calls("release", id(1)), 1, "and it leaves the line in Redis");

        b = ask(2, "x", 1, 0, &c2, 3 * USEC_PER_SEC);
        reply_queued(b, 1, 1, -1, 3 * USEC_PER_SEC);
        CHECK(has_line(&c2, "DENIED reason=full"), "no wait: denied when queued");
        teardown();
}

/* The longest wait a request may give (2^64 - 2 us) ends never, not at
 * once: now + wait saturates. */
void test_huge_wait(void) {
        Client c1 = {};
        Lease *a;

        setup(0);
        a = ask(1, "x", 1, USEC_INFINITY - 1, &c1, 5 * USEC_PER_SEC);
        CHECK_U64(a->deadline, USEC_INFINITY, "the deadline of a huge wait is never");
        reply_queued(a, 1, 1, 60000, 5 * USEC_PER_SEC);
        engine_lease_timer(&e, a, 6 * USEC_PER_SEC);
        CHECK(!has_line(&c1, "DENIED reason=timeout"), "it is not denied at the next look");
        teardown();
}

/* A drained name: a waiter is told by whom and why, once it changes; one
 * that does not wait is denied as "drained"; the drain's end is told too. */
void test_drained(void) {
        Client c1 = {}, c2 = {};
        AcquireResult r = { .outcome = ACQUIRE_QUEUED, .position = 1, .held = 1, .limit = 2, .next_expiry_ms = -1,
                            .drain = "h1 0 1795000000000 root incident 42: disk full", .has_drain = true };
        char text[256];
        Lease *a, *b;

        CHECK_INT(engine_drain_text(r.drain, text, sizeof(text)), 0, "a drain record reads");
        CHECK_STR(text, "by root (uid 0) on h1 since 2026-11-18 11:06 UTC: incident 42: disk full", "... for people");
        CHECK_INT(engine_drain_text("h1 0 x root why", text, sizeof(text)), -EBADMSG, "a record with no time is none");
        CHECK_INT(engine_drain_text("h!1 0 1 root why", text, sizeof(text)), -EBADMSG, "nor one with a bad host");

        setup(0);
        a = ask(1, "x", 2, 60 * USEC_PER_SEC, &c1, 0);
        acquire_done(a, &r, 100);
        CHECK(has_line(&c1, "QUEUED position=1 held=1 slots=2 limit=2 drained=by%20root%20%28uid%200%29%20on%20h1"),
              "a waiter is told the name is drained, by whom");
        engine_lease_timer(&e, a, ENGINE_RECHECK_SAFETY + 200);      /* it looks again */
        acquire_done(a, &r, ENGINE_RECHECK_SAFETY + 201);
        CHECK_INT(c1.n_lines, 1, "... once, while nothing changes");
        r.has_drain = false;
        engine_lease_timer(&e, a, 2 * ENGINE_RECHECK_SAFETY + 300);
        acquire_done(a, &r, 2 * ENGINE_RECHECK_SAFETY + 301);
        CHECK_INT(c1.n_lines, 2, "... and again when the drain ends");
        CHECK(strstr(c1.lines[1], "drained=") == NULL, "... without it");
        b = ask(2, "x", 2, 0, &c2, 2 * ENGINE_RECHECK_SAFETY + 400);
        r.has_drain = true;
        snprintf(r.drain, sizeof(r.drain), "h1 0 1795000000000 root again");
        acquire_done(b, &r, 2 * ENGINE_RECHECK_SAFETY + 500);
        CHECK(has_line(&c2, "DENIED reason=drained"), "no wait, drained: denied as drained");
        CHECK(strstr(c2.lines[c2.n_lines - 1], "again") != NULL, "... with the drain's reason");
        CHECK_U64(e.stats.denials[ENGINE_DENIAL_DRAINED], 1, "counted as a drained denial");
        teardown();
}

/* Grants reach an agent in the order Redis made them, but an earlier
 * lease may still be waiting here for its answer (another host's release
 * granted it): the later grant must not be told first. */
void test_grants_in_token_order(void) {
        Client c1 = {}, c2 = {};
        Lease *a, *b;
        unsigned before;

        two_in_line(&c1, &c2, &a, &b);
        /* Another host's release granted a (token 5); this host asks for
         * b first (its safety re-check) and hears of token 6. */
        engine_lease_timer(&e, b, ENGINE_RECHECK_SAFETY + 1);
        before = count_calls("acquire", id(1));
        reply_granted(b, 6, 2, ENGINE_RECHECK_SAFETY + 2);
        CHECK_INT(c2.n_lines, 1, "the later grant (token 6) is not told while an earlier lease waits");
        CHECK_INT(count_calls("acquire", id(1)), before + 1, "the earlier lease asks Redis at once");
        reply_granted(a, 5, 2, ENGINE_RECHECK_SAFETY + 3);
        CHECK(has_line(&c1, "GRANTED token=5"), "the earlier lease gets token 5");
        CHECK(has_line(&c2, "GRANTED token=6"), "then the later one token 6");
        teardown();
}

/* A grant held back behind an earlier lease, then Redis says the later
 * lease only waits (Redis lost it meanwhile): the old grant is no grant. */
void test_stale_pending_grant(void) {
        Client c1 = {}, c2 = {};
        Lease *a, *b;

        two_in_line(&c1, &c2, &a, &b);
        engine_lease_timer(&e, b, ENGINE_RECHECK_SAFETY + 1);
        reply_granted(b, 6, 2, ENGINE_RECHECK_SAFETY + 2);      /* held back: a may hold token 5 */
        {
                char msg[64];

                snprintf(msg, sizeof(msg), "g %s 7 1 -", id(2));        /* no proof: b asks again */
                engine_wake(&e, "x", msg, 2 * ENGINE_RECHECK_SAFETY + 3);
        }
        reply_queued(b, 2, 2, -1, 2 * ENGINE_RECHECK_SAFETY + 4); /* Redis now says: waiting */
        reply_queued(a, 1, 2, -1, 2 * ENGINE_RECHECK_SAFETY + 5); /* the gate clears */
        CHECK(!has_line(&c2, "GRANTED"), "a grant Redis no longer has is never told");
        teardown();
}

void test_wake_is_a_hint(void) {
        Client c1 = {};
        Lease *a;
        char msg[160];
        unsigned before;

        setup(0);
        a = ask(1, "x", 1, USEC_INFINITY, &c1, 0);
        reply_queued(a, 1, 1, -1, 1);
        CHECK_STR(a->proof, "f0000000000000000000000000000001",
                  "a waiter gives Redis a proof with its place in line, a random id of the agent's");
        before = count_calls("acquire", id(1));
        snprintf(msg, sizeof(msg), "g %s 999 1 -", id(1));
        engine_wake(&e, "x", msg, 2);
        CHECK_INT(c1.n_lines, 1, "a wake message naming the waiter without its proof grants nothing by itself");
        CHECK_INT(count_calls("acquire", id(1)), before + 1, "it makes the waiter ask Redis");
        reply_queued(a, 1, 1, -1, 3);
        CHECK(!has_line(&c1, "GRANTED"), "Redis says it still waits: no grant");
        snprintf(msg, sizeof(msg), "g %s 999 1 %s", id(1), "fedcba9876543210fedcba9876543210");
        engine_wake(&e, "x", msg, 4);
        CHECK(!has_line(&c1, "GRANTED"), "nor with another proof");
        CHECK_INT(count_calls("acquire", id(1)), before + 2, "it asks again");
        reply_queued(a, 1, 1, -1, 5);
        engine_wake(&e, "x", "g not-a-lease 1 2 -", 6);
        CHECK_INT(count_calls("acquire", id(1)), before + 3, "a malformed wake message is a plain wake-up");
        teardown();
}

/* Another host's grant: the line moved up, and nothing here asks Redis
 * (the release that sent it granted all it could, and sends a plain
 * wake-up when someone must look). With many hosts waiting on a name,
 * asking would cost a call per host per grant. */
void test_foreign_grant_asks_nothing(void) {
        Client c1 = {};
        char msg[160];
        Lease *a;
        unsigned before;

        setup(0);
        a = ask(1, "x", 1, USEC_INFINITY, &c1, 0);
        reply_queued(a, 3, 1, -1, 1);
        CHECK_INT(a->position, 3, "third in line");
        before = w.n_calls;
        snprintf(msg, sizeof(msg), "g %s 7 1 %s", id(9), "fedcba9876543210fedcba9876543210");
        engine_wake(&e, "x", msg, 2);
        CHECK_INT(w.n_calls, before, "another host's grant makes no call");
        CHECK_INT(a->position, 2, "the waiter moved up one place");
        CHECK(!has_line(&c1, "GRANTED"), "and is granted nothing");
        engine_wake(&e, "x", NULL, 3);
        CHECK_INT(w.n_calls, before + 1, "a plain wake-up makes the waiter ask");
        CHECK(streq(last_call()->what, "acquire") && streq(last_call()->lease, id(1)), "... for its place");
        teardown();
}

/* Redis' own grant message, with the proof the waiter gave when it
 * queued: granted without a second call, on the expiry of the call that
 * queued it; and only then. */
void test_wake_grant_with_proof(void) {
        Client c1 = {}, c2 = {}, c3 = {}, c4 = {};
        char msg[160], old[LEASE_ID_LEN + 1];
        char one[1][LEASE_ID_LEN + 1];
        bool missing = true;
        Lease *a, *b, *c, *d;
        unsigned before;

        setup(0);
        a = ask(1, "x", 1, USEC_INFINITY, &c1, 100);
        reply_queued(a, 1, 1, -1, 200);
        before = count_calls("acquire", id(1));
        snprintf(msg, sizeof(msg), "g %s 42 1700 %s", id(1), a->proof);
        engine_wake(&e, "x", msg, 100 + USEC_PER_SEC / 2);
        CHECK(has_line(&c1, "GRANTED token=42 lease=10000000000000000000000000000000 since=1700 ttl=2500 limit=1"),
              "granted on Redis' word, told the lease left since it queued (0.5 s of 3 gone)");
        CHECK_INT(count_calls("acquire", id(1)), before, "without asking Redis again");
        CHECK_INT(a->state, LEASE_HELD, "it holds");
        engine_wake(&e, "x", msg, 100 + USEC_PER_SEC / 2 + 1);
        CHECK_INT(c1.n_lines, 2, "the same message again changes nothing");

        /* A proof from an earlier place in line: Redis lost that place. */
        b = ask(2, "y", 1, USEC_INFINITY, &c2, 0);
        reply_queued(b, 1, 1, -1, 1);
        memcpy(old, b->proof, sizeof(old));
        memcpy(one[0], id(2), sizeof(one[0]));
        engine_renew_done(&e, "y", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, false, 2, 3);
        CHECK(!streq(b->proof, old), "a new place in line, a new proof");
        reply_queued(b, 1, 1, -1, 4);
        before = count_calls("acquire", id(2));
        snprintf(msg, sizeof(msg), "g %s 43 1700 %s", id(2), old);
        engine_wake(&e, "y", msg, 5);
        CHECK(!has_line(&c2, "GRANTED"), "the old proof grants nothing");
        CHECK_INT(count_calls("acquire", id(2)), before + 1, "it asks Redis");
        reply_queued(b, 1, 1, -1, 6);

        /* Queued a third of a lease ago or more: asks, for a fresh expiry. */
        snprintf(msg, sizeof(msg), "g %s 44 1700 %s", id(2), b->proof);
        engine_wake(&e, "y", msg, 6 + TTL / 3);
        CHECK(!has_line(&c2, "GRANTED"), "a waiter last renewed a third of a lease ago is not granted on the message");
        CHECK_INT(count_calls("acquire", id(2)), before + 2, "it asks Redis");
        reply_granted(b, 44, 1, 7 + TTL / 3);
        CHECK(has_line(&c2, "GRANTED token=44"), "and Redis' answer grants it");

        /* Asked again while in the same place (its safety look): a new
         * proof too, so a grant message of the time before (a grant that
         * ran out while this agent was paused, the lease queued again
         * since) matches nothing. */
        d = ask(4, "w", 1, USEC_INFINITY, &c4, 0);
        reply_queued(d, 1, 1, -1, 1);
        memcpy(old, d->proof, sizeof(old));
        engine_lease_timer(&e, d, 2 + ENGINE_RECHECK_SAFETY);
        CHECK(!streq(d->proof, old), "every look at Redis, a new proof");
        reply_queued(d, 1, 1, -1, 3 + ENGINE_RECHECK_SAFETY);
        before = count_calls("acquire", id(4));
        snprintf(msg, sizeof(msg), "g %s 45 1700 %s", id(4), old);
        engine_wake(&e, "w", msg, 4 + ENGINE_RECHECK_SAFETY);
        CHECK(!has_line(&c4, "GRANTED"), "the proof of the look before grants nothing");
        CHECK_INT(count_calls("acquire", id(4)), before + 1, "it asks Redis");
        reply_queued(d, 1, 1, -1, 5 + ENGINE_RECHECK_SAFETY);

        /* With replicas to wait for, every grant is asked for. */
        c = ask(3, "z", 1, USEC_INFINITY, &c3, 0);
        reply_queued(c, 1, 1, -1, 1);
        e.wake_grants = false;
        before = count_calls("acquire", id(3));
        snprintf(msg, sizeof(msg), "g %s 45 1700 %s", id(3), c->proof);
        engine_wake(&e, "z", msg, 2);
        CHECK(!has_line(&c3, "GRANTED"), "with replicas (no wake_grants) the message grants nothing");
        CHECK_INT(count_calls("acquire", id(3)), before + 1, "it asks Redis, which WAITs for them");
        teardown();
}

/* A grant on Redis' word held back behind an earlier lease here; the
 * later lease's answer to a call sent before that grant says "waiting":
 * older news, the grant stands. */
void test_wake_grant_behind_earlier(void) {
        Client c1 = {}, c2 = {};
        char msg[160];
        Lease *a, *b;

        two_in_line(&c1, &c2, &a, &b);
        snprintf(msg, sizeof(msg), "g %s 5 1700 -", id(2));
        engine_wake(&e, "x", msg, 2);                            /* b asks (a hint) */
        snprintf(msg, sizeof(msg), "g %s 6 1700 %s", id(2), b->proof);
        engine_wake(&e, "x", msg, 3);
        CHECK(!has_line(&c2, "GRANTED"), "held back: a may hold a lower token");
        reply_queued(b, 2, 2, -1, 4);   /* the call of time 2, executed before the grant */
        reply_queued(a, 1, 2, -1, 5);   /* a still waits: the gate clears */
        CHECK(has_line(&c2, "GRANTED token=6"), "the grant heard after the call was sent stands");
        CHECK(!has_line(&c1, "GRANTED"), "a still waits");
        teardown();
}
