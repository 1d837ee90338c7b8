/* SPDX-License-Identifier: MIT */
/* The slot engine alone: a fake clock and an effects log stand in for the
 * agent's I/O, so each interleaving that integration tests only hit by
 * chance is played here on purpose, step by step. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "slots.h"
#include "tap.h"

#define TTL (3 * USEC_PER_SEC)

/* ---- The world around the engine ------------------------------------------------ */

typedef struct Client {
        char name[8];
        char lines[16][256];
        unsigned n_lines;
        bool finished;
} Client;

typedef struct Call {
        char what[16];          /* acquire, release, renew, reassert */
        char name[NAME_MAX_LEN + 1];
        char lease[LEASE_ID_LEN + 1];
        Lease *l;               /* acquire, reassert: referenced until answered */
        bool answered;
        size_t n_ids;
        char (*ids)[LEASE_ID_LEN + 1];  /* renew: all of them */
        bool host_held;                 /* renew: of slots the host holds itself */
} Call;

typedef struct World {
        bool redis_up;
        Call *calls;
        unsigned n_calls, size_calls;
        char stopped[64];
        char told[LEASE_ID_LEN + 1];    /* tell_lost: the last lease whose holder was told so */
        unsigned n_index_add;
        usec_t lease_timer[8];  /* by lease id's first digit */
        unsigned n_ids;         /* random ids made: "f000…1", "f000…2", … */
        char said[16][256];     /* the engine's last lines at LOG_INFO or above, "LEVEL UID message" */
        unsigned n_said;
} World;

static World w;
static Slots e;

static void fx_send(void *ctx, void *client, const char *line, int len) {
        Client *c = client;

        (void) ctx;
        if (c->n_lines < ELEMENTSOF(c->lines))
                snprintf(c->lines[c->n_lines++], sizeof(c->lines[0]), "%.*s", len, line);
}

static void fx_finish(void *ctx, void *client) {
        (void) ctx;
        ((Client *) client)->finished = true;
}

static Call *record(const char *what, const char *name, const char *lease) {
        Call *c;

        if (w.n_calls == w.size_calls) {
                w.size_calls = w.size_calls ? w.size_calls * 2 : 64;
                w.calls = realloc(w.calls, w.size_calls * sizeof(Call));
                if (!w.calls)
                        abort();
        }
        c = &w.calls[w.n_calls++];
        *c = (Call) {};
        snprintf(c->what, sizeof(c->what), "%s", what);
        snprintf(c->name, sizeof(c->name), "%s", name);
        snprintf(c->lease, sizeof(c->lease), "%s", lease ?: "");
        return c;
}

static int fx_call_acquire(void *ctx, Lease *l) {
        (void) ctx;
        if (!w.redis_up)
                return -ENOTCONN;
        record("acquire", l->name->name, l->id)->l = l;
        return 0;
}

static int fx_call_release(void *ctx, const char *name, const char *lease, uid_t uid) {
        (void) ctx;
        (void) uid;
        if (!w.redis_up)
                return -ENOTCONN;
        record("release", name, lease);
        return 0;
}

static int fx_call_renew(void *ctx, Name *n, const char (*ids)[LEASE_ID_LEN + 1], size_t n_ids, bool host_held) {
        Call *c;

        (void) ctx;
        if (!w.redis_up)
                return -ENOTCONN;
        c = record("renew", n->name, ids[0]);
        c->host_held = host_held;
        c->n_ids = n_ids;
        c->ids = malloc(n_ids * sizeof(*ids));
        if (!c->ids)
                abort();
        memcpy(c->ids, ids, n_ids * sizeof(*ids));
        return 0;
}

static int fx_call_reassert(void *ctx, Lease *l) {
        (void) ctx;
        if (!w.redis_up)
                return -ENOTCONN;
        record("reassert", l->name->name, l->id)->l = l;
        return 0;
}

static void fx_index(void *ctx, const Lease *l, bool add) {
        (void) ctx;
        (void) l;
        if (add)
                w.n_index_add++;
}

static void fx_lease_timer(void *ctx, Lease *l, usec_t when) {
        (void) ctx;
        w.lease_timer[(l->id[0] - '0') % 8] = when;
}

static void fx_name_timer(void *ctx, Name *n, usec_t when) {
        (void) ctx;
        (void) n;
        (void) when;
}

static void fx_nop_name(void *ctx, Name *n) {
        (void) ctx;
        (void) n;
}

static void fx_lease_drop(void *ctx, Lease *l) {
        (void) ctx;
        (void) l;
}

static void fx_stop_unit(void *ctx, const char *unit, const char *why) {
        (void) ctx;
        (void) why;
        snprintf(w.stopped, sizeof(w.stopped), "%s", unit);
}

static void fx_tell_lost(void *ctx, Lease *l, const char *why) {
        (void) ctx;
        (void) why;
        snprintf(w.told, sizeof(w.told), "%s", l->id);
}

static void fx_changed(void *ctx) {
        (void) ctx;
}

/* The engine's randomness and its words come from here: a run is the
 * same every time. */
static int fx_random_id(void *ctx, char ret[LEASE_ID_LEN + 1]) {
        (void) ctx;
        snprintf(ret, LEASE_ID_LEN + 1, "f%031u", ++w.n_ids);
        return 0;
}

static void fx_log(void *ctx, int level, uid_t uid, usec_t now, const LogFields *fields, const char *message) {
        (void) ctx;
        (void) now;
        (void) fields;
        if (level > LOG_INFO)
                return;
        snprintf(w.said[w.n_said++ % ELEMENTSOF(w.said)], sizeof(w.said[0]), "%d %d %s", level,
                 uid == SLOTS_NO_UID ? -1 : (int) uid, message);
}

/* Whether one of the engine's last lines starts so. */
static bool said(const char *start) {
        for (size_t i = 0; i < ELEMENTSOF(w.said); i++)
                if (strneq(w.said[i], start, strlen(start)))
                        return true;
        return false;
}

static const SlotsOps ops = {
        .send = fx_send, .finish = fx_finish, .call_acquire = fx_call_acquire, .call_release = fx_call_release,
        .call_renew = fx_call_renew, .call_reassert = fx_call_reassert, .index = fx_index,
        .lease_timer = fx_lease_timer, .name_timer = fx_name_timer, .name_waiting = fx_nop_name,
        .lease_drop = fx_lease_drop, .name_drop = fx_nop_name, .stop_unit = fx_stop_unit, .changed = fx_changed,
        .tell_lost = fx_tell_lost,
        .random_id = fx_random_id, .log = fx_log,
};

static void calls_free(void) {
        for (unsigned i = 0; i < w.n_calls; i++)
                free(w.calls[i].ids);
        free(w.calls);
}

static void setup(usec_t now) {
        calls_free();
        w = (World) { .redis_up = true };
        slots_init(&e, &ops, NULL, TTL);
        e.wake_grants = true;   /* as without replicas */
        slots_redis_up(&e, false, 0, NULL, now);
}

/* Lease ids: "1000…", "2000…": the first digit tells them apart. */
static const char *id(int n) {
        static char ids[10][LEASE_ID_LEN + 1];

        snprintf(ids[n], sizeof(ids[n]), "%d%031d", n, 0);
        return ids[n];
}

static Lease *ask(int n, const char *name, uint32_t slots, usec_t wait, Client *c, usec_t now) {
        LeaseSpec spec = { .name = name, .id = id(n), .slots = slots, .uid = 1000, .pid = 42,
                           .desc = "INFO host=h pid=42 uid=1000 comm=job", .unit = NULL };
        Lease *l = NULL;

        snprintf(c->name, sizeof(c->name), "c%d", n);
        CHECK_INT(slots_acquire(&e, &spec, wait, c, NULL, now, &l), 0, "lease accepted");
        return l;
}

static Call *last_call(void) {
        return w.n_calls ? &w.calls[w.n_calls - 1] : NULL;
}

/* Redis answers a call: the oldest unanswered one of that kind for l.
 * An answer to a call never made is the test's mistake. */
static bool answered(const char *what, Lease *l) {
        for (unsigned i = 0; i < w.n_calls; i++)
                if (w.calls[i].l == l && !w.calls[i].answered && streq(w.calls[i].what, what)) {
                        w.calls[i].answered = true;
                        return true;
                }
        CHECK(false, "(test) an answer to a %s call of %s that was never made", what, l->id);
        return false;
}

/* A lease's timer goes off (once, as the adapter's does). */
static void timer_fires(Lease *l, usec_t now) {
        w.lease_timer[(l->id[0] - '0') % 8] = USEC_INFINITY;
        slots_lease_timer(&e, l, now);
}

static void acquire_done(Lease *l, const AcquireResult *r, usec_t now) {
        if (answered("acquire", l))
                slots_acquire_done(&e, l, r, now);
}

static void reassert_done(Lease *l, int result, usec_t now) {
        if (answered("reassert", l))
                slots_reassert_done(&e, l, result, now);
}

/* The agent going away: the engine forgets everything, then the calls still
 * under way are answered with "the connection went", as hiredis does. */
static void teardown(void) {
        slots_done(&e);
        for (unsigned i = 0; i < w.n_calls; i++) {
                Call *c = &w.calls[i];

                if (!c->l || c->answered)
                        continue;
                c->answered = true;
                if (streq(c->what, "acquire"))
                        slots_acquire_done(&e, c->l, NULL, 0);
                else
                        slots_reassert_done(&e, c->l, -2, 0);
        }
}

static unsigned count_calls(const char *what, const char *lease) {
        unsigned k = 0;

        for (unsigned i = 0; i < w.n_calls; i++)
                if (streq(w.calls[i].what, what) && (!lease || streq(w.calls[i].lease, lease)))
                        k++;
        return k;
}

static void reply_granted(Lease *l, uint64_t token, uint32_t limit, usec_t now) {
        AcquireResult r = { .outcome = ACQUIRE_GRANTED, .token = token, .since_ms = 1000, .held = 1, .limit = limit };

        acquire_done(l, &r, now);
}

static void reply_queued(Lease *l, uint32_t position, uint32_t limit, int64_t next_expiry_ms, usec_t now) {
        AcquireResult r = { .outcome = ACQUIRE_QUEUED, .position = position, .held = 1, .limit = limit,
                            .next_expiry_ms = next_expiry_ms };

        acquire_done(l, &r, now);
}

static bool has_line(const Client *c, const char *prefix) {
        for (unsigned i = 0; i < c->n_lines; i++)
                if (strneq(c->lines[i], prefix, strlen(prefix)))
                        return true;
        return false;
}

/* A fresh engine with a and b in line for x (slots 2), in that order. */
static void two_in_line(Client *c1, Client *c2, Lease **a, Lease **b) {
        setup(0);
        *a = ask(1, "x", 2, USEC_INFINITY, c1, 0);
        *b = ask(2, "x", 2, USEC_INFINITY, c2, 0);
        reply_queued(*a, 1, 2, -1, 1);
        reply_queued(*b, 2, 2, -1, 1);
}

/* ---- The rules ------------------------------------------------------------------------ */

static void test_grant_and_limit(void) {
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

static void test_wait_deadline_and_no_wait(void) {
        Client c1 = {}, c2 = {};
        Lease *a, *b;

        setup(0);
        a = ask(1, "x", 1, 2 * USEC_PER_SEC, &c1, 0);
        CHECK_U64(w.lease_timer[1], 2 * USEC_PER_SEC, "a waiter's deadline is armed");
        reply_queued(a, 1, 1, 60000, 100);
        CHECK_U64(w.lease_timer[1], 2 * USEC_PER_SEC, "the deadline comes before the next look");
        slots_lease_timer(&e, a, 2 * USEC_PER_SEC);
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
static void test_huge_wait(void) {
        Client c1 = {};
        Lease *a;

        setup(0);
        a = ask(1, "x", 1, USEC_INFINITY - 1, &c1, 5 * USEC_PER_SEC);
        CHECK_U64(a->deadline, USEC_INFINITY, "the deadline of a huge wait is never");
        reply_queued(a, 1, 1, 60000, 5 * USEC_PER_SEC);
        slots_lease_timer(&e, a, 6 * USEC_PER_SEC);
        CHECK(!has_line(&c1, "DENIED reason=timeout"), "it is not denied at the next look");
        teardown();
}

/* A drained name: a waiter is told by whom and why, once it changes; one
 * that does not wait is denied as "drained"; the drain's end is told too. */
static void test_drained(void) {
        Client c1 = {}, c2 = {};
        AcquireResult r = { .outcome = ACQUIRE_QUEUED, .position = 1, .held = 1, .limit = 2, .next_expiry_ms = -1,
                            .drain = "h1 0 1795000000000 root incident 42: disk full" };
        char text[256];
        Lease *a, *b;

        CHECK_INT(slots_drain_text(r.drain, text, sizeof(text)), 0, "a drain record reads");
        CHECK_STR(text, "by root (uid 0) on h1 since 2026-11-18 11:06 UTC: incident 42: disk full", "... for people");
        CHECK_INT(slots_drain_text("h1 0 x root why", text, sizeof(text)), -EBADMSG, "a record with no time is none");
        CHECK_INT(slots_drain_text("h!1 0 1 root why", text, sizeof(text)), -EBADMSG, "nor one with a bad host");

        setup(0);
        a = ask(1, "x", 2, 60 * USEC_PER_SEC, &c1, 0);
        acquire_done(a, &r, 100);
        CHECK(has_line(&c1, "QUEUED position=1 held=1 slots=2 limit=2 drained=by%20root%20%28uid%200%29%20on%20h1"),
              "a waiter is told the name is drained, by whom");
        slots_lease_timer(&e, a, SLOTS_RECHECK_SAFETY + 200);      /* it looks again */
        acquire_done(a, &r, SLOTS_RECHECK_SAFETY + 201);
        CHECK_INT(c1.n_lines, 1, "... once, while nothing changes");
        r.drain = NULL;
        slots_lease_timer(&e, a, 2 * SLOTS_RECHECK_SAFETY + 300);
        acquire_done(a, &r, 2 * SLOTS_RECHECK_SAFETY + 301);
        CHECK_INT(c1.n_lines, 2, "... and again when the drain ends");
        CHECK(strstr(c1.lines[1], "drained=") == NULL, "... without it");
        b = ask(2, "x", 2, 0, &c2, 2 * SLOTS_RECHECK_SAFETY + 400);
        r.drain = "h1 0 1795000000000 root again";
        acquire_done(b, &r, 2 * SLOTS_RECHECK_SAFETY + 500);
        CHECK(has_line(&c2, "DENIED reason=drained"), "no wait, drained: denied as drained");
        CHECK(strstr(c2.lines[c2.n_lines - 1], "again") != NULL, "... with the drain's reason");
        CHECK_U64(e.stats.denials[SLOTS_DENIAL_DRAINED], 1, "counted as a drained denial");
        teardown();
}

/* Grants reach an agent in the order Redis made them, but an earlier
 * lease may still be waiting here for its answer (another host's release
 * granted it): the later grant must not be told first. */
static void test_grants_in_token_order(void) {
        Client c1 = {}, c2 = {};
        Lease *a, *b;
        unsigned before;

        two_in_line(&c1, &c2, &a, &b);
        /* Another host's release granted a (token 5); this host asks for
         * b first (its safety re-check) and hears of token 6. */
        slots_lease_timer(&e, b, SLOTS_RECHECK_SAFETY + 1);
        before = count_calls("acquire", id(1));
        reply_granted(b, 6, 2, SLOTS_RECHECK_SAFETY + 2);
        CHECK_INT(c2.n_lines, 1, "the later grant (token 6) is not told while an earlier lease waits");
        CHECK_INT(count_calls("acquire", id(1)), before + 1, "the earlier lease asks Redis at once");
        reply_granted(a, 5, 2, SLOTS_RECHECK_SAFETY + 3);
        CHECK(has_line(&c1, "GRANTED token=5"), "the earlier lease gets token 5");
        CHECK(has_line(&c2, "GRANTED token=6"), "then the later one token 6");
        teardown();
}

/* A grant held back behind an earlier lease, then Redis says the later
 * lease only waits (Redis lost it meanwhile): the old grant is no grant. */
static void test_stale_pending_grant(void) {
        Client c1 = {}, c2 = {};
        Lease *a, *b;

        two_in_line(&c1, &c2, &a, &b);
        slots_lease_timer(&e, b, SLOTS_RECHECK_SAFETY + 1);
        reply_granted(b, 6, 2, SLOTS_RECHECK_SAFETY + 2);      /* held back: a may hold token 5 */
        {
                char msg[64];

                snprintf(msg, sizeof(msg), "g %s 7 1 -", id(2));        /* no proof: b asks again */
                slots_wake(&e, "x", msg, 2 * SLOTS_RECHECK_SAFETY + 3);
        }
        reply_queued(b, 2, 2, -1, 2 * SLOTS_RECHECK_SAFETY + 4); /* Redis now says: waiting */
        reply_queued(a, 1, 2, -1, 2 * SLOTS_RECHECK_SAFETY + 5); /* the gate clears */
        CHECK(!has_line(&c2, "GRANTED"), "a grant Redis no longer has is never told");
        teardown();
}

static void test_wake_is_a_hint(void) {
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
        slots_wake(&e, "x", msg, 2);
        CHECK_INT(c1.n_lines, 1, "a wake message naming the waiter without its proof grants nothing by itself");
        CHECK_INT(count_calls("acquire", id(1)), before + 1, "it makes the waiter ask Redis");
        reply_queued(a, 1, 1, -1, 3);
        CHECK(!has_line(&c1, "GRANTED"), "Redis says it still waits: no grant");
        snprintf(msg, sizeof(msg), "g %s 999 1 %s", id(1), "fedcba9876543210fedcba9876543210");
        slots_wake(&e, "x", msg, 4);
        CHECK(!has_line(&c1, "GRANTED"), "nor with another proof");
        CHECK_INT(count_calls("acquire", id(1)), before + 2, "it asks again");
        reply_queued(a, 1, 1, -1, 5);
        slots_wake(&e, "x", "g not-a-lease 1 2 -", 6);
        CHECK_INT(count_calls("acquire", id(1)), before + 3, "a malformed wake message is a plain wake-up");
        teardown();
}

/* Another host's grant: the line moved up, and nothing here asks Redis
 * (the release that sent it granted all it could, and sends a plain
 * wake-up when someone must look). With many hosts waiting on a name,
 * asking would cost a call per host per grant. */
static void test_foreign_grant_asks_nothing(void) {
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
        slots_wake(&e, "x", msg, 2);
        CHECK_INT(w.n_calls, before, "another host's grant makes no call");
        CHECK_INT(a->position, 2, "the waiter moved up one place");
        CHECK(!has_line(&c1, "GRANTED"), "and is granted nothing");
        slots_wake(&e, "x", NULL, 3);
        CHECK_INT(w.n_calls, before + 1, "a plain wake-up makes the waiter ask");
        CHECK(streq(last_call()->what, "acquire") && streq(last_call()->lease, id(1)), "... for its place");
        teardown();
}

/* Redis' own grant message, with the proof the waiter gave when it
 * queued: granted without a second call, on the expiry of the call that
 * queued it; and only then. */
static void test_wake_grant_with_proof(void) {
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
        slots_wake(&e, "x", msg, 100 + USEC_PER_SEC / 2);
        CHECK(has_line(&c1, "GRANTED token=42 lease=10000000000000000000000000000000 since=1700 ttl=2500 limit=1"),
              "granted on Redis' word, told the lease left since it queued (0.5 s of 3 gone)");
        CHECK_INT(count_calls("acquire", id(1)), before, "without asking Redis again");
        CHECK_INT(a->state, LEASE_HELD, "it holds");
        slots_wake(&e, "x", msg, 100 + USEC_PER_SEC / 2 + 1);
        CHECK_INT(c1.n_lines, 2, "the same message again changes nothing");

        /* A proof from an earlier place in line: Redis lost that place. */
        b = ask(2, "y", 1, USEC_INFINITY, &c2, 0);
        reply_queued(b, 1, 1, -1, 1);
        memcpy(old, b->proof, sizeof(old));
        memcpy(one[0], id(2), sizeof(one[0]));
        slots_renew_done(&e, "y", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, false, 2, 3);
        CHECK(!streq(b->proof, old), "a new place in line, a new proof");
        reply_queued(b, 1, 1, -1, 4);
        before = count_calls("acquire", id(2));
        snprintf(msg, sizeof(msg), "g %s 43 1700 %s", id(2), old);
        slots_wake(&e, "y", msg, 5);
        CHECK(!has_line(&c2, "GRANTED"), "the old proof grants nothing");
        CHECK_INT(count_calls("acquire", id(2)), before + 1, "it asks Redis");
        reply_queued(b, 1, 1, -1, 6);

        /* Queued a third of a lease ago or more: asks, for a fresh expiry. */
        snprintf(msg, sizeof(msg), "g %s 44 1700 %s", id(2), b->proof);
        slots_wake(&e, "y", msg, 6 + TTL / 3);
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
        slots_lease_timer(&e, d, 2 + SLOTS_RECHECK_SAFETY);
        CHECK(!streq(d->proof, old), "every look at Redis, a new proof");
        reply_queued(d, 1, 1, -1, 3 + SLOTS_RECHECK_SAFETY);
        before = count_calls("acquire", id(4));
        snprintf(msg, sizeof(msg), "g %s 45 1700 %s", id(4), old);
        slots_wake(&e, "w", msg, 4 + SLOTS_RECHECK_SAFETY);
        CHECK(!has_line(&c4, "GRANTED"), "the proof of the look before grants nothing");
        CHECK_INT(count_calls("acquire", id(4)), before + 1, "it asks Redis");
        reply_queued(d, 1, 1, -1, 5 + SLOTS_RECHECK_SAFETY);

        /* With replicas to wait for, every grant is asked for. */
        c = ask(3, "z", 1, USEC_INFINITY, &c3, 0);
        reply_queued(c, 1, 1, -1, 1);
        e.wake_grants = false;
        before = count_calls("acquire", id(3));
        snprintf(msg, sizeof(msg), "g %s 45 1700 %s", id(3), c->proof);
        slots_wake(&e, "z", msg, 2);
        CHECK(!has_line(&c3, "GRANTED"), "with replicas (no wake_grants) the message grants nothing");
        CHECK_INT(count_calls("acquire", id(3)), before + 1, "it asks Redis, which WAITs for them");
        teardown();
}

/* A grant on Redis' word held back behind an earlier lease here; the
 * later lease's answer to a call sent before that grant says "waiting":
 * older news, the grant stands. */
static void test_wake_grant_behind_earlier(void) {
        Client c1 = {}, c2 = {};
        char msg[160];
        Lease *a, *b;

        two_in_line(&c1, &c2, &a, &b);
        snprintf(msg, sizeof(msg), "g %s 5 1700 -", id(2));
        slots_wake(&e, "x", msg, 2);                            /* b asks (a hint) */
        snprintf(msg, sizeof(msg), "g %s 6 1700 %s", id(2), b->proof);
        slots_wake(&e, "x", msg, 3);
        CHECK(!has_line(&c2, "GRANTED"), "held back: a may hold a lower token");
        reply_queued(b, 2, 2, -1, 4);   /* the call of time 2, executed before the grant */
        reply_queued(a, 1, 2, -1, 5);   /* a still waits: the gate clears */
        CHECK(has_line(&c2, "GRANTED token=6"), "the grant heard after the call was sent stands");
        CHECK(!has_line(&c1, "GRANTED"), "a still waits");
        teardown();
}

static void test_lost_when_not_renewed(void) {
        Client c1 = {};
        Lease *a;
        LeaseSpec spec = { .name = "svc", .id = id(3), .slots = 1, .uid = 0, .pid = 1, .desc = "INFO",
                           .unit = "job.service", .stop_on_lost = true };
        char one[1][LEASE_ID_LEN + 1];
        bool missing = false;
        usec_t t;

        setup(0);
        a = ask(1, "x", 1, USEC_INFINITY, &c1, 0);
        reply_granted(a, 1, 1, 0);
        CHECK(said("6 1000 Granted slot of x to 1000@h pid 42 (job) (token 1)."),
              "a grant is said at LOG_INFO, as caused by its user (within that uid's budget)");
        /* A renewal that Redis confirms keeps it, and the holder hears so. */
        t = slots_tick(&e, TTL / 3);
        CHECK_U64(t, TTL / 6, "looks every sixth of the lease while Redis is up");
        CHECK_STR(last_call()->what, "renew", "the tick renews");
        memcpy(one[0], id(1), sizeof(one[0]));
        slots_renew_done(&e, "x", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, false, TTL / 3, TTL / 3 + 1);
        CHECK(has_line(&c1, "RENEWED ttl=2999"), "a confirmed renewal is passed on, with the lease left since it was sent");
        slots_renew_done(&e, "x", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, false, TTL / 3, TTL / 3 + TTL);
        CHECK_INT(c1.n_lines, 2, "an answer that came a lease late is passed on to nobody");
        /* Exactly at two thirds since that renewal: still held. */
        slots_tick(&e, TTL / 3 + slots_lost_after(&e));
        CHECK(!has_line(&c1, "LOST"), "not lost at exactly two thirds of the lease");
        /* An agent paused past that: lost before Redis could re-grant. */
        slots_tick(&e, TTL / 3 + slots_lost_after(&e) + 1);
        CHECK(has_line(&c1, "LOST"), "lost just after two thirds of the lease without renewal");
        CHECK_STR(w.told, "", "a holder that listens hears LOST, and is told nothing else");
        CHECK(said("3 -1 LOST slot of x (token 1): "),
              "a loss is said at LOG_ERR, caused by nobody (never held back by a budget)");
        CHECK_INT(count_calls("release", id(1)), 1, "and given back");

        /* A unit's slot, re-adopted, that Redis no longer has. */
        CHECK_INT(slots_adopt(&e, &spec, 9, 1, NULL, 10 * TTL, &a), 0, "re-adopted");
        CHECK_INT(a->state, LEASE_HELD, "as a holder");
        missing = true;
        memcpy(one[0], id(3), sizeof(one[0]));
        slots_renew_done(&e, "svc", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, false, 10 * TTL, 10 * TTL + 1);
        CHECK_STR(w.stopped, "job.service", "a unit whose slot Redis lost is stopped (on-lost=stop)");
        CHECK_STR(w.told, id(3), "a holder that no longer listens (a login session) is told through the adapter");
        teardown();
}

/* Redis forgot a name while it stayed up: a renewal says so, and the
 * holder that still believes is put back (re-asserted), not lost; one
 * whose last confirmed renewal is older than that is lost as before. */
static void test_forgotten(void) {
        Client c1 = {}, c2 = {};
        Lease *a, *b;
        char one[1][LEASE_ID_LEN + 1];
        bool missing = true;

        setup(0);
        a = ask(1, "x", 1, USEC_INFINITY, &c1, 0);
        reply_granted(a, 1, 1, 0);
        b = ask(2, "y", 1, USEC_INFINITY, &c2, 0);
        reply_granted(b, 2, 1, 0);
        memcpy(one[0], id(1), sizeof(one[0]));
        slots_renew_done(&e, "x", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, true, TTL / 3, TTL / 3 + 1);
        CHECK_INT(a->state, LEASE_HELD, "a holder Redis forgot still holds here");
        CHECK_INT(count_calls("reassert", id(1)), 1, "and is put back in Redis");
        CHECK(!has_line(&c1, "LOST"), "its client hears no LOST");
        CHECK(said("4 -1 Redis forgot the slot of x (token 1) while it stayed up"), "the journal says what happened");
        CHECK(!has_line(&c1, "RENEWED"), "its client hears no RENEWED while it is not back");
        reassert_done(a, 1, TTL / 3 + 2);
        CHECK(said("5 -1 Re-asserted slot of x (token 1)"), "and that it is back");
        CHECK(has_line(&c1, "RENEWED ttl=2999"),
              "and its client hears RENEWED at once, the lease left since the re-assertion went out");
        /* One whose last renewal is older than two thirds of a lease: its
         * holder fenced itself; nothing to put back. */
        memcpy(one[0], id(2), sizeof(one[0]));
        slots_renew_done(&e, "y", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, true, TTL, TTL + 1);
        CHECK(has_line(&c2, "LOST"), "a holder past its fence point is lost, even when Redis forgot it");
        CHECK_INT(count_calls("reassert", id(2)), 0, "and not put back");
        teardown();
}

/* "r LEASE" on the name's wake channel (a revoke): the holder's agent
 * renews at once, as a hint; Redis' answer makes it lost, told at once,
 * but released only when its anchor closes (the job stopped) or at its
 * fence point, so that its successor never runs beside it. */
static void test_revoke_heard(void) {
        Client c1 = {}, c2 = {};
        Lease *a, *b;
        char one[1][LEASE_ID_LEN + 1], msg[64];
        bool missing = true;
        unsigned renews;

        setup(0);
        a = ask(1, "x", 1, USEC_INFINITY, &c1, 0);
        reply_granted(a, 1, 1, 0);
        renews = count_calls("renew", NULL);
        slots_wake(&e, "x", "r not-a-lease", 1);
        snprintf(msg, sizeof(msg), "r %s", id(2));
        slots_wake(&e, "x", msg, 1);
        CHECK_INT(count_calls("renew", NULL), renews, "an r message that names no holder here asks nothing");
        snprintf(msg, sizeof(msg), "r %s", id(1));
        slots_wake(&e, "y", msg, 1);
        CHECK_INT(count_calls("renew", NULL), renews, "... nor one on another name's channel");
        slots_wake(&e, "x", msg, 2);
        CHECK_INT(count_calls("renew", NULL), renews + 1, "one that names a holder here renews its name at once");
        CHECK(!has_line(&c1, "LOST"), "... and is no loss by itself (anyone may PUBLISH)");
        memcpy(one[0], id(1), sizeof(one[0]));
        slots_renew_done(&e, "x", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, false, 2, 3);
        CHECK(has_line(&c1, "LOST"), "Redis finds it missing: the holder is told at once");
        CHECK(c1.finished, "... and let go");
        CHECK_INT(count_calls("release", id(1)), 0, "its slot is not released while the job may still run");
        CHECK_INT(a->state, LEASE_HELD, "... it stays here until then");
        slots_renew_done(&e, "x", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, false, 4, 5);
        CHECK_INT(count_calls("release", id(1)), 0, "... also when a renewal finds it missing again");
        slots_anchor_closed(&e, a, 6);
        CHECK_INT(count_calls("release", id(1)), 1, "released once its anchor closed (the job stopped)");
        CHECK_U64(e.stats.releases[SLOTS_RELEASE_LOST], 1, "counted once, as lost");
        CHECK_U64(e.stats.releases[SLOTS_RELEASE_ANCHOR_CLOSED], 0, "... not again when its anchor closed");

        /* A job that goes on (a login session): released at its fence point. */
        b = ask(2, "x", 1, USEC_INFINITY, &c2, 10);
        reply_granted(b, 2, 1, 10);
        snprintf(msg, sizeof(msg), "r %s", id(2));
        slots_wake(&e, "x", msg, 11);
        memcpy(one[0], id(2), sizeof(one[0]));
        slots_renew_done(&e, "x", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, false, 11, 12);
        CHECK(has_line(&c2, "LOST"), "a second holder revoked is told");
        slots_tick(&e, 10 + slots_lost_after(&e));
        CHECK_INT(count_calls("release", id(2)), 0, "not released before its fence point");
        slots_tick(&e, 10 + slots_lost_after(&e) + 1);
        CHECK_INT(count_calls("release", id(2)), 1, "released at its fence point");
        CHECK_INT(e.n_held, 0, "and gone from here");
        teardown();
}

/* A slot the host holds itself (fleetsem reboot): renewed in calls of its
 * own, on its own lease; not lost when a job's would be; kept when its
 * client goes; given back at once when a renewal finds it revoked. */
static void test_host_held(void) {
        Client c1 = {}, c2 = {}, c3 = {};
        LeaseSpec spec = { .name = "reboot", .id = id(2), .slots = 1, .uid = 0, .pid = 7,
                           .desc = "INFO host=h hold=host", .host_held = true, .ttl = 30 * TTL };
        char one[1][LEASE_ID_LEN + 1];
        bool missing = false;
        Lease *a, *b, *c;
        unsigned host_calls = 0, job_calls = 0;

        setup(0);
        a = ask(1, "x", 1, USEC_INFINITY, &c1, 0);
        reply_granted(a, 1, 1, 0);
        snprintf(c2.name, sizeof(c2.name), "c2");
        CHECK_INT(slots_acquire(&e, &spec, USEC_INFINITY, &c2, NULL, 0, &b), 0, "a host-held lease accepted");
        reply_granted(b, 2, 1, 0);
        CHECK(has_line(&c2, "GRANTED token=2"), "granted");
        CHECK(has_line(&c2, "GRANTED token=2 lease=2") && strstr(c2.lines[0], " ttl=90000 "),
              "GRANTED tells its own lease (30 leases here)");
        CHECK(slots_lease_of_host(&e, "reboot") == b, "found as the host's slot of its name");
        CHECK(!slots_lease_of_host(&e, "x"), "a job's slot is none");
        /* A job's lease on the same name: a call of its own. */
        c = ask(3, "reboot", 2, USEC_INFINITY, &c3, 0);
        reply_granted(c, 3, 2, 0);
        slots_tick(&e, TTL / 3);
        for (unsigned i = 0; i < w.n_calls; i++)
                if (streq(w.calls[i].what, "renew") && streq(w.calls[i].name, "reboot")) {
                        if (w.calls[i].host_held) {
                                host_calls++;
                                CHECK(w.calls[i].n_ids == 1 && streq(w.calls[i].ids[0], id(2)),
                                      "the host-held call renews the host's slot alone");
                        } else
                                job_calls++;
                }
        CHECK(host_calls == 1 && job_calls == 1, "one name's host-held and other slots are renewed apart");
        /* Its client goes: it stays (nothing holds it but the host). */
        slots_client_gone(&e, b, 1);
        CHECK_INT(b->state, LEASE_HELD, "its client gone, the slot stays held");
        /* No renewal for longer than a job may go: jobs lost, it is not. */
        slots_tick(&e, slots_lost_after(&e) + 1);
        CHECK(has_line(&c1, "LOST"), "a job's slot is lost after two thirds of the lease");
        CHECK_INT(b->state, LEASE_HELD, "the host's is not: its lease is its own");
        CHECK_INT(count_calls("release", id(2)), 0, "nor given back");
        lease_ref(b);
        slots_tick(&e, 20 * TTL + 1);
        CHECK_INT(b->state, LEASE_GONE, "... until two thirds of its own lease went by without a renewal");
        lease_unref(b);
        CHECK_INT(count_calls("release", id(2)), 1, "given back then at once: no job to fence");
        teardown();

        /* Revoked: the renewal finds it missing; no anchor to wait for. */
        setup(0);
        snprintf(c2.name, sizeof(c2.name), "c2");
        c2.n_lines = 0;
        CHECK_INT(slots_acquire(&e, &spec, USEC_INFINITY, &c2, NULL, 0, &b), 0, "a host-held lease accepted");
        reply_granted(b, 2, 1, 0);
        memcpy(one[0], id(2), sizeof(one[0]));
        missing = true;
        slots_renew_done(&e, "reboot", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, false, 1, 2);
        CHECK_INT(count_calls("release", id(2)), 1, "revoked (found missing): given back at once");
        CHECK_INT(e.n_held, 0, "and gone from here");
        teardown();
}

/* Redis lost its state: holders are re-asserted, waiters queue again and
 * look once the grace is over; a reset during a grant grants nothing. */
static void test_reset(void) {
        Client c1 = {}, c2 = {}, c3 = {};
        Lease *a, *b, *c;
        unsigned before;

        setup(0);
        a = ask(1, "x", 1, USEC_INFINITY, &c1, 0);
        reply_granted(a, 1, 1, 0);
        b = ask(2, "x", 1, USEC_INFINITY, &c2, 0);
        reply_queued(b, 1, 1, -1, 0);
        c = ask(3, "x", 1, USEC_INFINITY, &c3, 0);
        CHECK(c->check_inflight, "c's first look at Redis is under way");

        w.redis_up = false;
        slots_redis_down(&e, "gone", 100);
        acquire_done(c, NULL, 100);     /* the connection went before the answer */
        CHECK(!has_line(&c3, "GRANTED"), "no grant from a reply that never came");
        CHECK(c3.finished && has_line(&c3, "ERROR code=unavailable"), "a request not yet queued fails at once");
        CHECK(!c2.finished, "a queued waiter keeps waiting while Redis is away");

        w.redis_up = true;
        before = w.n_calls;
        slots_redis_up(&e, true, 2 * USEC_PER_SEC, NULL, 200);
        CHECK_INT(count_calls("reassert", id(1)), 1, "the holder is re-asserted");
        CHECK_INT(count_calls("acquire", id(2)) >= 1 && w.n_calls > before, 1, "the waiter queues again");
        reply_queued(b, 1, 1, 60000, 210);
        CHECK_U64(w.lease_timer[2], 200 + 2 * USEC_PER_SEC + 5 * USEC_PER_MSEC,
                  "the waiter looks again as the grace ends, not later");
        reassert_done(a, 1, 220);
        CHECK(!has_line(&c1, "LOST"), "re-asserted: still held");
        slots_redis_up(&e, true, 2 * USEC_PER_SEC, NULL, 300);
        reassert_done(a, 0, 310);
        CHECK(has_line(&c1, "LOST"), "no room on a second reset: told it is lost");
        teardown();
}

/* Redis may evict: every waiter is told, with why, and leaves the line
 * (also one whose look is under way, which may have granted it); the
 * holder keeps its slot and is renewed. */
static void test_fail_waiters(void) {
        Client c1 = {}, c2 = {}, c3 = {};
        Lease *a, *b, *c;
        int renews;

        setup(0);
        a = ask(1, "x", 1, USEC_INFINITY, &c1, 0);
        reply_granted(a, 1, 1, 0);
        b = ask(2, "x", 1, USEC_INFINITY, &c2, 0);
        reply_queued(b, 1, 1, -1, 0);
        c = ask(3, "y", 1, USEC_INFINITY, &c3, 0);
        CHECK(c->check_inflight, "c's first look at Redis is under way");
        slots_fail_waiters(&e, "Redis evicts", 100);
        CHECK(c2.finished && has_line(&c2, "ERROR code=unavailable message=Redis%20evicts"),
              "a queued waiter is told, with why");
        CHECK(c3.finished && has_line(&c3, "ERROR code=unavailable"), "so is one whose look is under way");
        CHECK_INT(count_calls("release", id(2)) + count_calls("release", id(3)), 2, "both leave the line in Redis");
        CHECK(!c1.finished && !has_line(&c1, "ERROR"), "the holder is not told anything");
        CHECK(slots_lease_find(&e, id(1)) == a && a->state == LEASE_HELD, "and keeps its slot");
        CHECK_INT((int) e.n_waiting, 0, "nobody waits here");
        renews = count_calls("renew", NULL);
        slots_tick(&e, e.lease_ttl / 3 + 100);
        CHECK_INT(count_calls("renew", NULL), renews + 1, "the holder is renewed on");
        teardown();
}

static void test_refused_and_pending_release(void) {
        Client c1 = {}, c2 = {};
        Lease *a, *b;
        AcquireResult refused = { .outcome = ACQUIRE_REFUSED };

        setup(0);
        a = ask(1, "x", 1, USEC_INFINITY, &c1, 0);
        acquire_done(a, &refused, 1);
        CHECK(has_line(&c1, "ERROR code=permission"), "a lease owned elsewhere is refused");
        CHECK_INT(count_calls("release", id(1)), 0, "and nothing of it is touched in Redis");
        CHECK(slots_lease_find(&e, id(1)) == NULL, "nor kept here");

        b = ask(2, "x", 1, USEC_INFINITY, &c2, 0);
        reply_granted(b, 3, 1, 2);
        w.redis_up = false;
        slots_redis_down(&e, "gone", 3);
        slots_anchor_closed(&e, b, 4);
        CHECK_INT(count_calls("release", id(2)), 0, "released while Redis is away: not sent");
        w.redis_up = true;
        slots_redis_up(&e, false, 0, NULL, 5);
        CHECK_INT(count_calls("release", id(2)), 1, "sent as soon as Redis is back");
        teardown();
}

/* A weighted request: the call carries its weight; Redis finds it above
 * the limit in force: the client is told why and the lease leaves the
 * line. One that asks for no number where the name has no fleet limit
 * is refused alike. */
static void test_weight_and_fleet_limit(void) {
        Client c1 = {}, c2 = {};
        LeaseSpec spec = { .name = "x", .id = id(1), .slots = 3, .weight = 2, .uid = 1000, .pid = 42,
                           .desc = "INFO host=h pid=42 uid=1000 comm=job" };
        AcquireResult heavy = { .outcome = ACQUIRE_TOO_HEAVY, .limit = 1 }, none = { .outcome = ACQUIRE_NO_LIMIT };
        Lease *a = NULL, *b;

        setup(0);
        CHECK_INT(slots_acquire(&e, &spec, USEC_INFINITY, &c1, NULL, 0, &a), 0, "a weighted lease accepted");
        CHECK(last_call() && last_call()->l == a && a->weight == 2, "its acquire call carries its weight (2)");
        acquire_done(a, &heavy, 1);
        CHECK(has_line(&c1, "ERROR code=too_heavy message=weight%202%20is%20above%20the%20limit%20in%20force%20%281%29"),
              "above the limit in force: told so, with the limit");
        CHECK(c1.finished, "and let go");
        CHECK_INT(count_calls("release", id(1)), 1, "and it leaves the line in Redis");
        CHECK(slots_lease_find(&e, id(1)) == NULL, "nor is it kept here");
        CHECK(said("5 1000 Refused 10000000000000000000000000000000 for x: its weight 2 is above the limit of x (1)."),
              "the journal says why, as the user's line");

        b = ask(2, "y", 0, USEC_INFINITY, &c2, 2);
        CHECK_INT(b->weight, 1, "a lease without a weight weighs 1");
        acquire_done(b, &none, 3);
        CHECK(has_line(&c2, "ERROR code=no_limit"), "asking for no number where there is no fleet limit: refused");
        CHECK_INT(count_calls("release", id(2)), 1, "and it leaves the line in Redis");
        teardown();
}

/* A grant no replica confirmed was given back: the waiter asks again
 * later; one that would not wait is denied. */
static void test_unconfirmed_grant(void) {
        Client c1 = {}, c2 = {};
        AcquireResult retry = { .outcome = ACQUIRE_RETRY, .error = "no replica" };
        Lease *a, *b;

        setup(0);
        a = ask(1, "x", 1, USEC_INFINITY, &c1, 0);
        acquire_done(a, &retry, 10);
        CHECK_INT(c1.n_lines, 0, "an unconfirmed grant is not told");
        CHECK(!c1.finished, "and the request goes on waiting");
        CHECK_U64(w.lease_timer[1], 10 + USEC_PER_SEC, "it asks again a second later");
        slots_lease_timer(&e, a, 10 + USEC_PER_SEC);
        CHECK_STR(last_call()->what, "acquire", "and does");
        reply_granted(a, 4, 1, 20 + USEC_PER_SEC);
        CHECK(has_line(&c1, "GRANTED token=4"), "a confirmed grant is told");

        b = ask(2, "y", 1, 0, &c2, 30);
        acquire_done(b, &retry, 40);
        CHECK(has_line(&c2, "DENIED reason=unconfirmed"), "without a wait it is denied");
        teardown();
}

static const NameStats *name_stats(const char *name) {
        for (const NameStats *s = e.name_stats; s; s = s->lru_next)
                if (streq(s->name, name))
                        return s;
        return NULL;
}

/* What the engine counts for `fleetsem metrics`, from the times it is given. */
static void test_counters(void) {
        Client c1 = {}, c2 = {}, c3 = {}, c4 = {}, c5 = {};
        char one[1][LEASE_ID_LEN + 1];
        bool missing = false;
        Lease *a, *b, *c, *d;
        uint64_t sum = 0;
        usec_t due;

        setup(0);
        CHECK_U64(e.stats.redis_ups, 1, "the first connection to Redis is counted");
        a = ask(1, "x", 1, USEC_INFINITY, &c1, 0);
        CHECK(name_stats("x") && name_stats("x")->grants == 0, "a name's grants counter exists (0) from its first request");
        reply_granted(a, 1, 1, 3 * USEC_PER_MSEC);
        CHECK_U64(name_stats("x")->grants, 1, "a grant is counted for its name");
        CHECK_U64(e.stats.wait.count, 1, "its wait is observed");
        CHECK_U64(e.stats.wait.sum, 3 * USEC_PER_MSEC, "as grant time minus request time");
        CHECK_U64(e.stats.wait.buckets[1], 1, "in the bucket up to 5 ms");

        b = ask(2, "x", 1, 2 * USEC_PER_SEC, &c2, 10);
        reply_queued(b, 1, 1, -1, 11);
        slots_lease_timer(&e, b, 10 + 2 * USEC_PER_SEC);
        CHECK_U64(e.stats.denials[SLOTS_DENIAL_TIMEOUT], 1, "a waiter denied at its deadline: reason timeout");
        c = ask(3, "y", 1, 0, &c3, 20);
        reply_queued(c, 1, 1, -1, 21);
        CHECK_U64(e.stats.denials[SLOTS_DENIAL_FULL], 1, "no wait and no slot: reason full");
        CHECK_U64(e.stats.wait.count, 1, "denials are no waits of the histogram");
        CHECK_U64(e.stats.releases[SLOTS_RELEASE_RELEASED] + e.stats.releases[SLOTS_RELEASE_ANCHOR_CLOSED], 0,
                  "a denied waiter is no release");

        slots_anchor_closed(&e, a, 30);
        CHECK_U64(e.stats.releases[SLOTS_RELEASE_ANCHOR_CLOSED], 1, "a holder whose anchor closed: cause anchor_closed");
        d = ask(4, "z", 1, USEC_INFINITY, &c4, 40);
        reply_granted(d, 2, 1, 40 + 90 * USEC_PER_SEC);
        CHECK_U64(e.stats.wait.buckets[11], 1, "a 90 s wait lands in the bucket up to 5 min");
        memcpy(one[0], id(4), sizeof(one[0]));
        due = d->renewed + TTL / 3;
        slots_renew_done(&e, "z", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, false, 100 * USEC_PER_SEC,
                         100 * USEC_PER_SEC + 7 * USEC_PER_MSEC);
        CHECK_U64(e.stats.rtt_last, 7 * USEC_PER_MSEC, "a renewal's round trip: its reply's time minus its call's");
        CHECK_U64(e.stats.rtt_count, 1, "one sample");
        /* Due a third of a lease after its grant was asked for (40 µs),
         * confirmed at 100 s + 7 ms. */
        CHECK_U64(due, 40 + TTL / 3, "the first renewal is due a third of a lease after the grant's call");
        CHECK_U64(e.stats.lateness.count, 1, "a confirmed renewal's lateness is observed");
        CHECK_U64(e.stats.lateness.sum, 100 * USEC_PER_SEC + 7 * USEC_PER_MSEC - due,
                  "as the confirmation's time minus when it was due");
        CHECK_U64(e.stats.lateness_max, e.stats.lateness.sum, "and is the worst so far");
        slots_release(&e, d, "released on request", 101 * USEC_PER_SEC);
        CHECK_U64(e.stats.releases[SLOTS_RELEASE_RELEASED], 1, "given back on request: cause released");

        a = ask(5, "x", 1, USEC_INFINITY, &c5, 200 * USEC_PER_SEC);
        reply_granted(a, 3, 1, 200 * USEC_PER_SEC);
        slots_tick(&e, 200 * USEC_PER_SEC + slots_lost_after(&e) + 1);
        CHECK(has_line(&c5, "LOST"), "a holder not renewed in time is lost");
        CHECK_U64(e.stats.lost, 1, "and counted as lost");
        CHECK_U64(e.stats.releases[SLOTS_RELEASE_LOST], 1, "and as released for cause lost");
        CHECK_U64(name_stats("x")->grants, 2, "x was granted twice");
        for (size_t i = 0; i < SLOTS_HISTOGRAM_BUCKETS + 1; i++)
                sum += e.stats.wait.buckets[i];
        CHECK_U64(sum, e.stats.wait.count, "the buckets add up to the count");

        w.redis_up = false;
        slots_redis_down(&e, "gone", 300 * USEC_PER_SEC);
        w.redis_up = true;
        slots_redis_up(&e, false, 0, NULL, 301 * USEC_PER_SEC);
        CHECK_U64(e.stats.redis_ups, 2, "a reconnection is counted");
        slots_done(&e);
        CHECK(e.name_stats == NULL && e.n_name_stats == 0, "the counters of names go with the engine");
}

/* At most SLOTS_NAME_STATS_MAX names are counted: the least recently used
 * one goes for a new one. */
static void test_name_counters_bounded(void) {
        char name[32];

        setup(0);
        for (unsigned i = 0; i <= SLOTS_NAME_STATS_MAX; i++) {
                LeaseSpec spec = { .name = name, .id = id(1), .slots = 1, .uid = 0, .pid = 1, .desc = "INFO" };
                Lease *l = NULL;

                snprintf(name, sizeof(name), "n%u", i);
                if (slots_acquire(&e, &spec, 0, NULL, NULL, i, &l) < 0)
                        break;
                slots_release(&e, l, "test", i);
                if (i == 1) {
                        /* n0 used again: n1 is now the least recently used. */
                        spec.name = "n0";
                        if (slots_acquire(&e, &spec, 0, NULL, NULL, i, &l) >= 0)
                                slots_release(&e, l, "test", i);
                }
        }
        CHECK_U64(e.n_name_stats, SLOTS_NAME_STATS_MAX, "the table of names' counters is bounded");
        CHECK(name_stats("n0") != NULL, "a name used again stays");
        CHECK(name_stats("n1") == NULL, "the least recently used goes");
        snprintf(name, sizeof(name), "n%u", SLOTS_NAME_STATS_MAX);
        CHECK(name_stats(name) != NULL, "the newest is there");
        teardown();
}

/* A grant held back for an earlier lease here, which must then answer:
 * when its answer is lost with the connection, and its look-again timer
 * fires while Redis is away, it still answers once Redis is back, even
 * when it is not the first in line here (c is: only c is asked then). */
static void test_gate_survives_outage(void) {
        Client c1 = {}, c2 = {}, c3 = {}, c4 = {};
        Lease *a, *b, *c, *d;
        usec_t t = 0, up;

        setup(0);
        c = ask(3, "x", 1, USEC_INFINITY, &c3, t);
        d = ask(4, "x", 1, USEC_INFINITY, &c4, t);
        reply_queued(c, 1, 1, -1, t += 10);
        reply_queued(d, 2, 1, -1, t += 10);
        /* d gets a slot before c: c's answer (still waiting) lets it through. */
        slots_lease_timer(&e, d, t += SLOTS_RECHECK_SAFETY);
        reply_granted(d, 5, 1, t += 10);
        reply_queued(c, 1, 1, -1, t += 10);
        CHECK(has_line(&c4, "GRANTED token=5"), "d is told once c answered");
        slots_release(&e, d, "done", t += 10);

        a = ask(1, "x", 1, USEC_INFINITY, &c1, t);
        b = ask(2, "x", 1, USEC_INFINITY, &c2, t);
        reply_queued(a, 2, 1, -1, t += 10);
        reply_queued(b, 3, 1, -1, t += 10);
        CHECK(c->seq < a->seq && a->seq < b->seq, "c, a, b joined the line here in that order");

        /* Redis has b before them (they joined its line in another order,
         * as after a reset), and b's look gets it the slot. */
        slots_lease_timer(&e, b, t += SLOTS_RECHECK_SAFETY);
        reply_granted(b, 9, 1, t += 10);
        CHECK(!has_line(&c2, "GRANTED"), "b's grant waits for a's answer");
        CHECK(a->check_inflight, "a asks");

        /* The connection goes before a's answer, and Redis stays away
         * past every waiter's look-again time. */
        w.redis_up = false;
        acquire_done(a, NULL, t += 10);
        slots_redis_down(&e, "gone", t);
        t += 2 * SLOTS_RECHECK_SAFETY;
        timer_fires(a, t);
        timer_fires(c, t);
        timer_fires(b, t);
        w.redis_up = true;
        slots_redis_up(&e, false, 0, NULL, t += 10);
        up = t;
        CHECK(!a->check_inflight && c->check_inflight, "back: c, first in line here, asks (a does not)");
        reply_queued(c, 1, 1, -1, t += 10);

        /* Every waiter still looks again in time (the looks that fell
         * while Redis was away were not the last), b first: its grant,
         * heard again, has a asked at once. */
        CHECK(w.lease_timer[2] <= up + SLOTS_RECHECK_SAFETY, "b looks again within %" PRIu64 " s",
              SLOTS_RECHECK_SAFETY / USEC_PER_SEC);
        timer_fires(b, t = MAX(t, MIN(w.lease_timer[2], up + SLOTS_RECHECK_SAFETY)));
        reply_granted(b, 9, 1, t += 10);
        CHECK(a->check_inflight, "a's answer is asked for again");
        reply_queued(a, 2, 1, -1, t += 10);
        CHECK(has_line(&c2, "GRANTED token=9"), "b is told of its slot once a answered, %" PRIu64 " ms after Redis came back",
              (t - up) / USEC_PER_MSEC);
        CHECK(!has_line(&c1, "GRANTED") && !has_line(&c3, "GRANTED"), "a and c wait on");
        teardown();
}

/* This host away longer than a lease: Redis dropped its waiters' places.
 * They join the line again in the order they first came, whatever order
 * the renewal listed them in. */
static void test_requeue_in_order(void) {
        Client c1 = {}, c2 = {}, c3 = {};
        char ids[3][LEASE_ID_LEN + 1];
        bool missing[3] = { true, true, true };
        Lease *a, *b, *c;
        unsigned first;

        setup(0);
        a = ask(1, "x", 1, USEC_INFINITY, &c1, 0);
        b = ask(2, "x", 1, USEC_INFINITY, &c2, 0);
        c = ask(3, "x", 1, USEC_INFINITY, &c3, 0);
        reply_queued(a, 1, 1, -1, 10);
        reply_queued(b, 2, 1, -1, 10);
        reply_queued(c, 3, 1, -1, 10);
        memcpy(ids[0], id(3), sizeof(ids[0]));
        memcpy(ids[1], id(2), sizeof(ids[1]));
        memcpy(ids[2], id(1), sizeof(ids[2]));
        first = w.n_calls;
        slots_renew_done(&e, "x", (const char (*)[LEASE_ID_LEN + 1]) ids, missing, 3, false, 20, 30);
        CHECK_INT(w.n_calls - first, 3, "each asks for a place again");
        CHECK(w.n_calls - first == 3 && streq(w.calls[first].lease, id(1)) && streq(w.calls[first + 1].lease, id(2)) &&
              streq(w.calls[first + 2].lease, id(3)), "a, b, c, in the order they came");
        CHECK(a->seq < b->seq && b->seq < c->seq, "and keep that order here");
        teardown();

        /* Asked for while the agent reconnected: each asks once Redis is
         * back, in the order they came. */
        setup(0);
        w.redis_up = false;
        slots_redis_down(&e, "gone", 10);
        a = ask(1, "x", 1, USEC_INFINITY, &c1, 20);
        b = ask(2, "x", 1, USEC_INFINITY, &c2, 30);
        c = ask(3, "x", 1, USEC_INFINITY, &c3, 40);
        w.redis_up = true;
        first = w.n_calls;
        slots_redis_up(&e, false, 0, NULL, 50);
        CHECK(w.n_calls - first >= 3 && streq(w.calls[first].lease, id(1)) && streq(w.calls[first + 1].lease, id(2)) &&
              streq(w.calls[first + 2].lease, id(3)), "requests made while Redis was away ask in the order they came");
        teardown();
}

/* Each grant heard of waits for an answer of the earlier waiters given
 * after it: an answer that let an earlier grant through says nothing of
 * what Redis did since. */
static void test_each_grant_waits_for_its_answer(void) {
        Client c1 = {}, c2 = {}, c3 = {};
        Lease *a, *b, *c;
        usec_t t = 0;

        setup(0);
        a = ask(1, "x", 3, USEC_INFINITY, &c1, t);
        b = ask(2, "x", 3, USEC_INFINITY, &c2, t);
        c = ask(3, "x", 3, USEC_INFINITY, &c3, t);
        reply_queued(a, 1, 3, -1, t += 10);
        reply_queued(b, 2, 3, -1, t += 10);
        reply_queued(c, 3, 3, -1, t += 10);
        /* b's look gets it a slot; a, asked, still waits: b is told. */
        timer_fires(b, t += SLOTS_RECHECK_SAFETY);
        reply_granted(b, 7, 3, t += 10);
        reply_queued(a, 1, 3, -1, t += 10);
        CHECK(has_line(&c2, "GRANTED token=7"), "b is told once a answered");
        /* Then c's look gets it one; a may have been granted meanwhile too
         * (another host's release), with a lower token. */
        timer_fires(c, t += SLOTS_RECHECK_SAFETY);
        reply_granted(c, 9, 3, t += 10);
        CHECK(!has_line(&c3, "GRANTED"), "c's grant waits for a new answer of a");
        CHECK(a->check_inflight, "which is asked for");
        reply_granted(a, 8, 3, t += 10);
        CHECK(has_line(&c1, "GRANTED token=8"), "a is told of token 8");
        CHECK(has_line(&c3, "GRANTED token=9") && c3.n_lines >= 1 && c1.n_lines >= 1, "then c of token 9");
        teardown();
}

/* ---- Random faults, against a model of the scripts ---------------------------------- */

/* Redis as the scripts behave for one name (prelude.lua): a line in ticket
 * order, waiters and holders that run out unless renewed, grants to the
 * head of the line on release, nothing granted during a grace. Other
 * hosts' leases use it directly; this host's go through the engine over
 * one connection (answers in order; a grant told only after ROLE and WAIT,
 * behind the calls sent meanwhile, as with replicas) and a pub/sub one
 * (wakes). Partitions shorter and longer than the lease cut both (each
 * long enough to count as a hang), and the engine hears of them as the
 * agent does: the calls under way answered with nothing,
 * Redis down, then up with the same state. Restarts empty it: a reset with
 * a grace. Timers due at the same time fire in any order; clients give up. */
#define SIM_LOCAL 7
#define SIM_REMOTE 4
#define SIM_MAX (SIM_LOCAL + SIM_REMOTE)

typedef struct SimEntry {
        char id[LEASE_ID_LEN + 1];
        usec_t expiry;
        uint64_t token;
} SimEntry;

typedef struct SimRedis {
        SimEntry line[SIM_MAX * 2], held[SIM_MAX * 2];
        size_t n_line, n_held;
        uint32_t limit;
        usec_t grace_until;
        uint64_t token;
        char wakes[64][200];    /* pub/sub, not yet delivered */
        size_t n_wakes;
} SimRedis;

typedef struct SimGrant {       /* an answer held back behind ROLE and WAIT */
        Lease *l;
        AcquireResult r;
        unsigned after;         /* told once the calls before this one are answered */
} SimGrant;

typedef struct SimClient {
        Client c;
        Lease *l;
        Lease *held_back;       /* reported as held back too long */
        unsigned seen;          /* lines read */
        usec_t until;           /* holding until; or idle until */
        bool busy, holding;
} SimClient;

typedef struct SimRemote {
        char id[LEASE_ID_LEN + 1];
        usec_t until;           /* holding until; or idle until */
        bool busy;
} SimRemote;

static SimRedis R;
static SimGrant sim_held_back[64];
static size_t n_sim_held_back;
static uint64_t sim_rng, sim_ids, sim_grants, sim_pending;

static uint64_t sim_random(uint64_t n) {
        sim_rng = sim_rng * 6364136223846793005ULL + 1442695040888963407ULL;
        return (sim_rng >> 33) % n;
}

static int sim_find(const SimEntry *v, size_t n, const char *id) {
        for (size_t i = 0; i < n; i++)
                if (streq(v[i].id, id))
                        return (int) i;
        return -1;
}

static void sim_remove(SimEntry *v, size_t *n, size_t i) {
        memmove(v + i, v + i + 1, (*n - i - 1) * sizeof(*v));
        (*n)--;
}

static void sim_publish(const char *msg) {
        if (R.n_wakes < ELEMENTSOF(R.wakes))
                snprintf(R.wakes[R.n_wakes++], sizeof(R.wakes[0]), "%s", msg);
}

/* Drops the entries of v that ran out by now; whether any did. */
static bool sim_drop_expired(SimEntry *v, size_t *n, usec_t now) {
        bool any = false;

        for (size_t i = 0; i < *n;)
                if (v[i].expiry <= now) {
                        sim_remove(v, n, i);
                        any = true;
                } else
                        i++;
        return any;
}

static void sim_expire(usec_t now) {
        bool freed = sim_drop_expired(R.held, &R.n_held, now);

        freed = sim_drop_expired(R.line, &R.n_line, now) || freed;
        if (freed)
                sim_publish("");
}

static uint64_t sim_grant(const char *id, usec_t expiry) {
        SimEntry *h = &R.held[R.n_held++];
        char copy[LEASE_ID_LEN + 1];

        snprintf(copy, sizeof(copy), "%s", id);         /* (id may be in R) */
        memcpy(h->id, copy, sizeof(copy));
        h->expiry = expiry;
        h->token = ++R.token;
        return h->token;
}

static AcquireResult sim_granted(uint64_t token) {
        return (AcquireResult) { .outcome = ACQUIRE_GRANTED, .token = token, .since_ms = 1,
                                 .held = (uint32_t) R.n_held, .limit = R.limit };
}

static AcquireResult sim_acquire(const char *id, usec_t now) {
        bool open = now >= R.grace_until;
        int i;

        sim_expire(now);
        if ((i = sim_find(R.held, R.n_held, id)) >= 0) {
                R.held[i].expiry = now + TTL;
                return sim_granted(R.held[i].token);
        }
        if (open && R.n_line == 0 && R.n_held < R.limit)
                return sim_granted(sim_grant(id, now + TTL));
        if ((i = sim_find(R.line, R.n_line, id)) < 0) {
                i = (int) R.n_line++;
                snprintf(R.line[i].id, sizeof(R.line[i].id), "%s", id);
        }
        R.line[i].expiry = now + TTL;
        if (open && R.n_held < R.limit && (size_t) i < R.limit - R.n_held) {
                sim_remove(R.line, &R.n_line, (size_t) i);
                return sim_granted(sim_grant(id, now + TTL));
        }
        return (AcquireResult) { .outcome = ACQUIRE_QUEUED, .position = (uint32_t) i + 1,
                                 .held = (uint32_t) R.n_held, .limit = R.limit,
                                 .next_expiry_ms = R.n_held ? (int64_t) ((R.held[0].expiry - now) / USEC_PER_MSEC) : -1 };
}

/* Gives back (or leaves the line) and hands the free slots on in order;
 * msg: the wake message ("g LEASE TOKEN SINCE PROOF ...", "" for none). */
static void sim_release(const char *id, usec_t now, char *msg, size_t size) {
        bool left_line = false;
        size_t k;
        int i;

        sim_expire(now);
        msg[0] = '\0';
        if ((i = sim_find(R.held, R.n_held, id)) >= 0)
                sim_remove(R.held, &R.n_held, (size_t) i);
        else if ((i = sim_find(R.line, R.n_line, id)) >= 0) {
                sim_remove(R.line, &R.n_line, (size_t) i);
                left_line = true;
        } else
                return;
        k = (size_t) snprintf(msg, size, "g");
        while (now >= R.grace_until && R.n_line > 0 && R.n_held < R.limit && k + 60 < size) {
                uint64_t t = sim_grant(R.line[0].id, R.line[0].expiry);

                k += (size_t) snprintf(msg + k, size - k, " %s %" PRIu64 " 1 -", R.line[0].id, t);
                sim_remove(R.line, &R.n_line, 0);
        }
        /* As release.lua: the grants if any, and a plain wake-up when a
         * place in line was given up (those behind it moved up). */
        if (msg[1])
                sim_publish(msg);
        else
                msg[0] = '\0';
        if (left_line)
                sim_publish("");
}

static bool sim_renew_one(const char *id, usec_t now) {
        int i;

        if ((i = sim_find(R.held, R.n_held, id)) >= 0)
                R.held[i].expiry = now + TTL;
        else if ((i = sim_find(R.line, R.n_line, id)) >= 0)
                R.line[i].expiry = now + TTL;
        return i >= 0;
}

/* Redis runs a call (unless a partition ate it) and the engine hears the
 * answer (unless the connection went first). */
static void sim_answer(unsigned k, bool runs, bool told, usec_t now) {
        Call *c = &w.calls[k];

        c->answered = true;
        if (streq(c->what, "acquire")) {
                AcquireResult r = {};

                if (runs)
                        r = sim_acquire(c->lease, now);
                if (told && r.outcome == ACQUIRE_GRANTED && n_sim_held_back < ELEMENTSOF(sim_held_back)) {
                        sim_held_back[n_sim_held_back++] = (SimGrant) { .l = c->l, .r = r, .after = w.n_calls };
                        return;
                }
                slots_acquire_done(&e, c->l, told ? &r : NULL, now);
        } else if (streq(c->what, "release")) {
                char msg[200] = "";

                if (runs)
                        sim_release(c->lease, now, msg, sizeof(msg));
                slots_release_done(&e, c->name, c->lease, 0, !told, NULL, 0, now);
                if (told && msg[0] == 'g' && msg[1])
                        slots_wake(&e, c->name, msg, now);      /* as with replicas */
        } else if (streq(c->what, "renew")) {
                bool missing[SIM_MAX * 4] = {};
                size_t n = MIN(c->n_ids, ELEMENTSOF(missing));

                if (runs)
                        sim_expire(now);
                for (size_t i = 0; runs && i < n; i++)
                        missing[i] = !sim_renew_one(c->ids[i], now);
                if (told && runs)
                        slots_renew_done(&e, c->name, (const char (*)[LEASE_ID_LEN + 1]) c->ids, missing, n, false, now, now);
        } else if (streq(c->what, "reassert")) {
                int r = -2;

                /* Back in, if there is room (reassert.lua). */
                if (runs && sim_find(R.held, R.n_held, c->lease) >= 0)
                        r = 1;
                else if (runs && R.n_held < R.limit) {
                        (void) sim_grant(c->lease, now + TTL);
                        r = 1;
                } else if (runs)
                        r = 0;
                slots_reassert_done(&e, c->l, told ? r : -2, now);
        }
}

/* Grants held back behind ROLE and WAIT: told once the calls sent before
 * them are answered; with nothing (all = connection gone). */
static void sim_tell_held_back(unsigned answered_up_to, bool gone, usec_t now) {
        for (size_t i = 0; i < n_sim_held_back;) {
                SimGrant g = sim_held_back[i];

                if (!gone && g.after > answered_up_to) {
                        i++;
                        continue;
                }
                memmove(sim_held_back + i, sim_held_back + i + 1, (--n_sim_held_back - i) * sizeof(SimGrant));
                slots_acquire_done(&e, g.l, gone ? NULL : &g.r, now);
        }
}

static void sim_new_id(char *id, int who) {
        snprintf(id, LEASE_ID_LEN + 1, "%d%031" PRIu64, who, ++sim_ids);
}

/* Its request is over: the lease (kept while it was asked for, as the
 * agent's client does) is let go. */
static void sim_done(SimClient *s) {
        s->busy = false;
        lease_unref(s->l);
        s->l = NULL;
}

/* A client here: asks, holds when told, gives up now and then. */
static void sim_local(SimClient *s, int who, usec_t now) {
        for (; s->busy && s->seen < s->c.n_lines; s->seen++) {
                const char *line = s->c.lines[s->seen];

                if (strneq(line, "GRANTED", 7) && !s->holding) {
                        s->holding = true;
                        sim_grants++;
                        s->until = now + sim_random(TTL / 2);
                } else if (strneq(line, "DENIED", 6) || strneq(line, "ERROR", 5) || strneq(line, "LOST", 4))
                        sim_done(s);
        }
        if (s->busy && s->c.finished)
                sim_done(s);
        if (s->busy && s->holding && now >= s->until) {
                slots_release(&e, s->l, "done", now);
                sim_done(s);
        } else if (s->busy && !s->holding && s->l->state == LEASE_WAITING && sim_random(20000) == 0) {
                slots_client_gone(&e, s->l, now);
                sim_done(s);
        }
        if (!s->busy && now >= s->until) {
                LeaseSpec spec = { .name = "x", .slots = R.limit, .uid = 1000, .pid = 42, .desc = "INFO" };
                char lid[LEASE_ID_LEN + 1];

                sim_new_id(lid, who);
                spec.id = lid;
                s->c = (Client) {};
                s->seen = 0;
                s->holding = false;
                s->held_back = NULL;
                if (slots_acquire(&e, &spec, 60 * USEC_PER_SEC, &s->c, NULL, now, &s->l) >= 0) {
                        lease_ref(s->l);
                        s->busy = true;
                }
                s->until = now + 50 * USEC_PER_MSEC;
        }
}

/* Another host: in line, asks again now and then, holds a while. */
static void sim_remote(SimRemote *r, int who, usec_t now) {
        int i;

        if (!r->busy) {
                if (now < r->until)
                        return;
                sim_new_id(r->id, who);
                r->busy = true;
                r->until = 0;
        }
        if ((i = sim_find(R.held, R.n_held, r->id)) >= 0) {
                char msg[200];

                if (r->until == 0)
                        r->until = now + sim_random(TTL / 2);
                if (now < r->until) {
                        R.held[i].expiry = now + TTL;
                        return;
                }
                sim_release(r->id, now, msg, sizeof(msg));
                r->busy = false;
                r->until = now + sim_random(TTL / 4);
                return;
        }
        if (sim_find(R.line, R.n_line, r->id) >= 0 && sim_random(10) != 0)
                (void) sim_renew_one(r->id, now);
        else
                (void) sim_acquire(r->id, now);
}

static void test_random_faults(uint64_t seed) {
        const usec_t step = 10 * USEC_PER_MSEC, end = 1200 * USEC_PER_SEC;
        SimClient lc[SIM_LOCAL] = {};
        SimRemote rc[SIM_REMOTE] = {};
        uint64_t stuck = 0, idle = 0, outages = 0, resets = 0;
        usec_t tick = 0, cut_at = 20 * USEC_PER_SEC, heal_at = USEC_INFINITY, down_at = USEC_INFINITY, calm_from = 0;
        unsigned next_call = 0;
        bool reset = false;

        setup(0);
        e.wake_grants = false;          /* as with replicas: grants only on Redis' answer */
        sim_rng = seed;
        sim_ids = sim_grants = sim_pending = 0;
        n_sim_held_back = 0;
        R = (SimRedis) { .limit = 1 + (uint32_t) (seed % 2) };
        for (usec_t now = step; now < end; now += step) {
                bool cut = now >= cut_at && now < heal_at;
                int first = (int) sim_random(SIM_LOCAL);

                for (int i = 0; i < SIM_REMOTE; i++)
                        sim_remote(&rc[i], 5 + i, now);
                /* The connection: answers in order, a step after the call. */
                for (unsigned sent = w.n_calls; !cut && next_call < sent;) {
                        sim_answer(next_call, true, true, now);
                        sim_tell_held_back(++next_call, false, now);
                }
                if (!cut && R.n_wakes > 0) {
                        char msg[200];

                        snprintf(msg, sizeof(msg), "%s", R.wakes[0]);
                        memmove(R.wakes, R.wakes + 1, --R.n_wakes * sizeof(R.wakes[0]));
                        slots_wake(&e, "x", msg[0] ? msg : NULL, now);
                }
                /* A partition, or a restart: seen as a hang a third of a
                 * lease in, or at once. */
                if (cut && down_at == USEC_INFINITY && (reset || now >= cut_at + TTL / 3)) {
                        for (; next_call < w.n_calls; next_call++)
                                sim_answer(next_call, !reset && sim_random(2) == 0, false, now);
                        sim_tell_held_back(next_call, true, now);
                        R.n_wakes = 0;
                        if (reset)
                                R = (SimRedis) { .limit = R.limit, .token = R.token };
                        w.redis_up = false;
                        slots_redis_down(&e, "gone", now);
                        down_at = now;
                        outages++;
                }
                if (cut && heal_at == USEC_INFINITY)
                        heal_at = reset ? cut_at + TTL / 10
                                : sim_random(2) ? cut_at + TTL * 3 / 2 + sim_random(TTL * 3 / 2)       /* past the lease */
                                : cut_at + TTL / 3 + step + sim_random(TTL / 2);                        /* within it */
                if (!cut && down_at != USEC_INFINITY) {
                        w.redis_up = true;
                        if (reset)
                                R.grace_until = now + TTL;
                        slots_redis_up(&e, reset, reset ? TTL : 0, NULL, now);
                        resets += reset;
                        down_at = USEC_INFINITY;
                        calm_from = now + (reset ? TTL : 0);
                        cut_at = now + 10 * USEC_PER_SEC + sim_random(20 * USEC_PER_SEC);
                        heal_at = USEC_INFINITY;
                        reset = sim_random(3) == 0;
                }
                for (int k = 0; k < SIM_LOCAL; k++) {
                        int i = (first + k) % SIM_LOCAL;
                        SimClient *s = &lc[i];

                        if (s->busy && s->l->state == LEASE_WAITING && w.lease_timer[(i + 1) % 8] <= now)
                                timer_fires(s->l, now);
                        sim_local(s, i + 1, now);
                        if (!s->busy || s->l->state != LEASE_WAITING)
                                continue;
                        /* With Redis up, nobody waits without a look at it
                         * under way or to come. */
                        if (e.redis_up && !s->l->check_inflight && s->l->recheck_at == USEC_INFINITY && idle++ == 0)
                                printf("# seed %" PRIu64 ": a waiter with no look to come at %" PRIu64 " ms\n", seed,
                                       now / USEC_PER_MSEC);
                        if (!s->l->grant_pending)
                                continue;
                        sim_pending++;
                        /* Told within a re-check and a lease of hearing of it
                         * (all the more with Redis up and calm). */
                        if (down_at == USEC_INFINITY && now > calm_from + 2 * TTL &&
                            now - s->l->pending_heard > SLOTS_RECHECK_SAFETY + TTL && s->held_back != s->l) {
                                s->held_back = s->l;
                                if (stuck++ == 0)
                                        printf("# seed %" PRIu64 ": a grant held back %" PRIu64 " ms at %" PRIu64 " ms\n",
                                               seed, (now - s->l->pending_heard) / USEC_PER_MSEC, now / USEC_PER_MSEC);
                        }
                }
                if (now >= tick)
                        tick = slots_tick(&e, now);
        }
        printf("# seed %" PRIu64 ": limit %" PRIu32 ", %" PRIu64 " grants here, %" PRIu64 " steps with one held back, "
               "%" PRIu64 " outages (%" PRIu64 " resets)\n", seed, R.limit, sim_grants, sim_pending, outages, resets);
        CHECK(outages >= 20 && resets >= 2 && sim_grants >= 500,
              "seed %" PRIu64 ": partitions and restarts, and grants (%" PRIu64 ", %" PRIu64 ", %" PRIu64 ")", seed,
              outages, resets, sim_grants);
        CHECK(idle == 0, "seed %" PRIu64 ": every waiter had a look at Redis under way or to come", seed);
        CHECK(stuck == 0, "seed %" PRIu64 ": no grant held back longer than a re-check and a lease", seed);
        teardown();
        /* (Answers still held back behind WAIT: the connection went.) */
        for (size_t i = 0; i < n_sim_held_back; i++)
                slots_acquire_done(&e, sim_held_back[i].l, NULL, 0);
        n_sim_held_back = 0;
        for (int i = 0; i < SIM_LOCAL; i++)
                if (lc[i].busy)
                        sim_done(&lc[i]);
}

int main(void) {
        log_setup("test-slots", LOG_TARGET_STDERR, NULL);
        log_set_max_level(LOG_EMERG);
        test_grant_and_limit();
        test_weight_and_fleet_limit();
        test_wait_deadline_and_no_wait();
        test_huge_wait();
        test_fail_waiters();
        test_drained();
        test_grants_in_token_order();
        test_wake_is_a_hint();
        test_foreign_grant_asks_nothing();
        test_wake_grant_with_proof();
        test_wake_grant_behind_earlier();
        test_stale_pending_grant();
        test_gate_survives_outage();
        test_requeue_in_order();
        test_each_grant_waits_for_its_answer();
        test_lost_when_not_renewed();
        test_forgotten();
        test_revoke_heard();
        test_host_held();
        test_reset();
        test_refused_and_pending_release();
        test_unconfirmed_grant();
        test_counters();
        test_name_counters_bounded();
        /* More with TEST_SLOTS_SEEDS=N. */
        for (uint64_t seed = 1; seed <= (getenv("TEST_SLOTS_SEEDS") ? strtoull(getenv("TEST_SLOTS_SEEDS"), NULL, 10) : 8); seed++)
                test_random_faults(seed);
        calls_free();
        return tap_done();
}
