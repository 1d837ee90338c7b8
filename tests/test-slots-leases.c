/* SPDX-License-Identifier: MIT */
/* The rules of held leases and of Redis going away: renewals, a name
 * forgotten, revoked, reset; refusals, weights, counters, the gate. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "protocol.h"
#include "engine-internal.h"
#include "test-slots.h"

/* A transition lease-states.list does not have is a bug: said at error
 * level with the lease, both states and the event, and made all the same,
 * so that the counts follow what the engine does with the lease. */
void test_illegal_transition(void) {
        Client c1 = {};
        char bug[256];
        Lease *a;

        setup(0);
        a = ask(1, "x", 1, USEC_INFINITY, &c1, 0);
        CHECK_INT(a->state, LEASE_WAITING, "a request waits");
        CHECK_STR(lease_state_to_string(a->state), "waiting", "and says so by the list's name");
        CHECK_INT(lease_state_after(LEASE_WAITING, LEASE_EVENT_LOST_TOLD), N_LEASE_STATES,
                  "the list takes no waiter anywhere on lost-told");
        snprintf(bug, sizeof(bug), "3 -1 Bug: lease %s of x went from waiting to held on lost-told, which its life "
                 "does not allow.", id(1));
        CHECK(!said("3 -1 Bug: "), "no bug said before");
        lease_set_state(a, LEASE_HELD, LEASE_EVENT_LOST_TOLD, 1);
        CHECK(said(bug), "an illegal transition is said at LOG_ERR: the lease, both states, the event");
        CHECK_INT(a->state, LEASE_HELD, "and made all the same");
        CHECK_U64(e.n_held, 1, "counted as held ...");
        CHECK_U64(e.n_waiting, 0, "... and no longer as waiting");
        CHECK_U64(a->name->n_held, 1, "by its name too");
        engine_release(&e, a, "done", 2);
        CHECK_INT(a->state, LEASE_GONE, "a legal transition after it goes on as ever");
        CHECK_U64(e.n_held + e.n_waiting, 0, "every slot accounted for");
        teardown();
}

void test_lost_when_not_renewed(void) {
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
        t = engine_tick(&e, TTL / 3);
        CHECK_U64(t, TTL / 6, "looks every sixth of the lease while Redis is up");
        CHECK_STR(last_call()->what, "renew", "the tick renews");
        memcpy(one[0], id(1), sizeof(one[0]));
        engine_renew_done(&e, "x", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, 0, TTL / 3, TTL / 3 + 1);
        CHECK(has_line(&c1, "RENEWED ttl=2999"), "a confirmed renewal is passed on, with the lease left since it was sent");
        engine_renew_done(&e, "x", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, 0, TTL / 3, TTL / 3 + TTL);
        CHECK_INT(c1.n_lines, 2, "an answer that came a lease late is passed on to nobody");
        /* Exactly at two thirds since that renewal: still held. */
        engine_tick(&e, TTL / 3 + engine_lost_after(&e));
        CHECK(!has_line(&c1, "LOST"), "not lost at exactly two thirds of the lease");
        /* An agent paused past that: lost before Redis could re-grant. */
        engine_tick(&e, TTL / 3 + engine_lost_after(&e) + 1);
        CHECK(has_line(&c1, "LOST"), "lost just after two thirds of the lease without renewal");
        CHECK_STR(w.told, "", "a holder that listens hears LOST, and is told nothing else");
        CHECK(said("3 -1 LOST slot of x (token 1): "),
              "a loss is said at LOG_ERR, caused by nobody (never held back by a budget)");
        CHECK_INT(count_calls("release", id(1)), 1, "and given back");

        /* A unit's slot, re-adopted, that Redis no longer has. */
        CHECK_INT(engine_adopt(&e, &spec, 9, 1, NULL, 10 * TTL, &a), 0, "re-adopted");
        CHECK_INT(a->state, LEASE_HELD, "as a holder");
        missing = true;
        memcpy(one[0], id(3), sizeof(one[0]));
        engine_renew_done(&e, "svc", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, 0, 10 * TTL, 10 * TTL + 1);
        CHECK_STR(w.stopped, "job.service", "a unit whose slot Redis lost is stopped (on-lost=stop)");
        CHECK(w.kill_at > 10 * TTL + 1 && w.kill_at + LOST_KILL_MARGIN <= 10 * TTL + TTL,
              "... and killed before its lease's end, when the slot may go elsewhere");
        CHECK_STR(w.told, id(3), "a holder that no longer listens (a login session) is told through the adapter");
        teardown();
}

/* Redis forgot a name while it stayed up: a renewal says so, and the
 * holder that still believes is put back (re-asserted), not lost; one
 * whose last confirmed renewal is older than that is lost as before, and
 * so is one renewed after Redis forgot the name. */
void test_forgotten(void) {
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
        engine_renew_done(&e, "x", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, TTL, TTL / 3, TTL / 3 + 1);
        CHECK_INT(a->state, LEASE_HELD, "a holder Redis forgot still holds here");
        CHECK_INT(count_calls("reassert", id(1)), 1, "and is put back in Redis");
        CHECK(!has_line(&c1, "LOST"), "its client hears no LOST");
        CHECK(said("4 -1 Redis forgot the slot of x (token 1) while it stayed up"), "the journal says what happened");
        CHECK(!has_line(&c1, "RENEWED"), "its client hears no RENEWED while it is not back");
        reassert_done(a, 1, TTL / 3 + 2);
        CHECK(said("5 -1 Re-asserted slot of x (token 1)"), "and that it is back");
        CHECK(has_line(&c1, "RENEWED ttl=2999"),
              "and its client hears RENEWED at once, the lease left since the re-assertion went out");
        /* Renewed since, then missing while the name still grants
         * nothing (it was found forgotten at TTL / 3): released or
         * revoked since (revoke --now frees it as a release does), not
         * Redis' loss to undo. */
        missing = false;
        engine_renew_done(&e, "x", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, TTL / 3 + TTL / 3, 2 * TTL / 3,
                         2 * TTL / 3 + 1);
        missing = true;
        engine_renew_done(&e, "x", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, TTL / 3, TTL, TTL + 1);
        CHECK(has_line(&c1, "LOST"), "a holder renewed after Redis forgot its name, then missing, is lost");
        CHECK_INT(count_calls("reassert", id(1)), 1, "and not put back");
        /* One whose last renewal is older than two thirds of a lease: its
         * holder fenced itself; nothing to put back. */
        memcpy(one[0], id(2), sizeof(one[0]));
        engine_renew_done(&e, "y", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, TTL, TTL, TTL + 1);
        CHECK(has_line(&c2, "LOST"), "a holder past its fence point is lost, even when Redis forgot it");
        CHECK_INT(count_calls("reassert", id(2)), 0, "and not put back");
        teardown();
}

/* Whether c was told LOST with free_in=MS, when its slot may be granted
 * elsewhere at the earliest. */
static bool lost_free_in(const Client *c, const char *ms) {
        char want[32];

        snprintf(want, sizeof(want), " free_in=%s", ms);
        for (unsigned i = 0; i < c->n_lines; i++)
                if (strneq(c->lines[i], "LOST ", 5) && strlen(c->lines[i]) >= strlen(want) &&
                    streq(c->lines[i] + strlen(c->lines[i]) - strlen(want), want))
                        return true;
        return false;
}

/* "r LEASE" on the name's wake channel (a revoke): the holder's agent
 * renews at once, as a hint; Redis' answer makes it lost, told at once,
 * but released only when its anchor closes (the job stopped) or when its
 * lease runs out, so that its successor never runs beside it. */
void test_revoke_heard(void) {
        Client c1 = {}, c2 = {}, c3 = {};
        Lease *a, *b, *c;
        char one[1][LEASE_ID_LEN + 1], msg[64];
        bool missing = true;
        unsigned renews;

        setup(0);
        a = ask(1, "x", 1, USEC_INFINITY, &c1, 0);
        reply_granted(a, 1, 1, 0);
        renews = count_calls("renew", NULL);
        engine_wake(&e, "x", "r not-a-lease", 1);
        snprintf(msg, sizeof(msg), "r %s", id(2));
        engine_wake(&e, "x", msg, 1);
        CHECK_INT(count_calls("renew", NULL), renews, "an r message that names no holder here asks nothing");
        snprintf(msg, sizeof(msg), "r %s", id(1));
        engine_wake(&e, "y", msg, 1);
        CHECK_INT(count_calls("renew", NULL), renews, "... nor one on another name's channel");
        engine_wake(&e, "x", msg, 2);
        CHECK_INT(count_calls("renew", NULL), renews + 1, "one that names a holder here renews its name at once");
        CHECK(!has_line(&c1, "LOST"), "... and is no loss by itself (anyone may PUBLISH)");
        memcpy(one[0], id(1), sizeof(one[0]));
        engine_renew_done(&e, "x", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, 0, 2, 3);
        CHECK(has_line(&c1, "LOST"), "Redis finds it missing: the holder is told at once");
        CHECK(lost_free_in(&c1, "2999"),
              "... that its slot may go elsewhere at its lease's end (renewed at 0, a lease of 3 s), 2999 ms on");
        CHECK(c1.finished, "... and let go");
        CHECK_INT(count_calls("release", id(1)), 0, "its slot is not released while the job may still run");
        CHECK_INT(a->state, LEASE_LOST, "... it stays here until then, told it is lost");
        engine_renew_done(&e, "x", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, 0, 4, 5);
        CHECK_INT(count_calls("release", id(1)), 0, "... also when a renewal finds it missing again");
        engine_anchor_closed(&e, a, 6);
        CHECK_INT(count_calls("release", id(1)), 1, "released once its anchor closed (the job stopped)");
        CHECK_U64(e.stats.releases[ENGINE_RELEASE_LOST], 1, "counted once, as lost");
        CHECK_U64(e.stats.releases[ENGINE_RELEASE_ANCHOR_CLOSED], 0, "... not again when its anchor closed");

        /* A job that goes on: released when its lease runs out (a holder
         * that heard nothing fences itself at two thirds of it). */
        b = ask(2, "x", 1, USEC_INFINITY, &c2, 10);
        reply_granted(b, 2, 1, 10);
        snprintf(msg, sizeof(msg), "r %s", id(2));
        engine_wake(&e, "x", msg, 11);
        memcpy(one[0], id(2), sizeof(one[0]));
        engine_renew_done(&e, "x", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, 0, 11, 12);
        CHECK(has_line(&c2, "LOST"), "a second holder revoked is told");
        engine_tick(&e, 10 + engine_lost_after(&e) + 1);
        CHECK_INT(count_calls("release", id(2)), 0, "not released at its fence point");
        engine_tick(&e, 10 + TTL);
        CHECK_INT(count_calls("release", id(2)), 0, "... nor before its lease's end");
        engine_tick(&e, 10 + TTL + 1);
        CHECK_INT(count_calls("release", id(2)), 1, "released when its lease ran out");
        CHECK_INT(e.n_held, 0, "and gone from here");

        /* A login session (its client gone after GRANTED, no unit): ended
         * by the agent, killed before its fence point, and counted until
         * then whatever its anchor does. */
        w.ends_sessions = true;
        c = ask(3, "x", 1, USEC_INFINITY, &c3, 20);
        reply_granted(c, 3, 1, 20);
        engine_client_gone(&e, c, 20);
        memcpy(one[0], id(3), sizeof(one[0]));
        engine_renew_done(&e, "x", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, 0, 21, 22);
        CHECK_STR(w.told, id(3), "a revoked session is told through the adapter");
        CHECK_STR(w.stopped, id(3), "... and ended");
        CHECK(w.kill_at > 22 && w.kill_at + LOST_KILL_MARGIN <= 20 + TTL,
              "... killed half a second before its lease's end");
        CHECK_INT(c->state, LEASE_ENDING, "... ending here");
        engine_anchor_closed(&e, c, 23);
        CHECK_INT(count_calls("release", id(3)), 0, "its anchor's close (the program that opened it) releases nothing");
        engine_release(&e, c, "released on request", 23);
        CHECK_INT(count_calls("release", id(3)), 0, "... nor does its close of the session (pam_close_session)");
        engine_tick(&e, 20 + TTL + 1);
        CHECK_INT(count_calls("release", id(3)), 1, "released when its lease ran out");
        CHECK_INT(e.n_held, 0, "and gone from here");
        teardown();
}

/* A slot the host holds itself (fleetsem reboot): renewed in calls of its
 * own, on its own lease; not lost when a job's would be; kept when its
 * client goes; given back at once when a renewal finds it revoked. */
void test_host_held(void) {
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
        CHECK_INT(engine_acquire(&e, &spec, USEC_INFINITY, &c2, NULL, 0, &b), 0, "a host-held lease accepted");
        reply_granted(b, 2, 1, 0);
        CHECK(has_line(&c2, "GRANTED token=2"), "granted");
        CHECK(has_line(&c2, "GRANTED token=2 lease=2") && strstr(c2.lines[0], " ttl=90000 "),
              "GRANTED tells its own lease (30 leases here)");
        CHECK(engine_lease_of_host(&e, "reboot") == b, "found as the host's slot of its name");
        CHECK(!engine_lease_of_host(&e, "x"), "a job's slot is none");
        /* A job's lease on the same name: a call of its own. */
        c = ask(3, "reboot", 2, USEC_INFINITY, &c3, 0);
        reply_granted(c, 3, 2, 0);
        engine_tick(&e, TTL / 3);
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
        engine_client_gone(&e, b, 1);
        CHECK_INT(b->state, LEASE_HELD, "its client gone, the slot stays held");
        /* No renewal for longer than a job may go: jobs lost, it is not. */
        engine_tick(&e, engine_lost_after(&e) + 1);
        CHECK(has_line(&c1, "LOST"), "a job's slot is lost after two thirds of the lease");
        CHECK(lost_free_in(&c1, "0"), "... and told that it may go elsewhere at once");
        CHECK_INT(b->state, LEASE_HELD, "the host's is not: its lease is its own");
        CHECK_INT(count_calls("release", id(2)), 0, "nor given back");
        lease_ref(b);
        engine_tick(&e, 20 * TTL + 1);
        CHECK_INT(b->state, LEASE_HELD,
                  "... nor after two thirds of its own lease without a renewal (a host frozen): no job to fence, "
                  "and given back early it would let another host reboot beside this one");
        CHECK_INT(count_calls("release", id(2)), 0, "... nor given back then");
        /* Its next renewal says whether Redis still has it. */
        memcpy(one[0], id(2), sizeof(one[0]));
        missing = true;
        engine_renew_done(&e, "reboot", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, 20 * TTL + 2, 1, 2);
        CHECK_INT(b->state, LEASE_GONE, "found missing by its renewal (its host_lease ran out): lost");
        lease_unref(b);
        CHECK_INT(count_calls("release", id(2)), 1, "given back then at once: no job to fence");
        teardown();

        /* Revoked: the renewal finds it missing; no anchor to wait for. */
        setup(0);
        snprintf(c2.name, sizeof(c2.name), "c2");
        c2.n_lines = 0;
        CHECK_INT(engine_acquire(&e, &spec, USEC_INFINITY, &c2, NULL, 0, &b), 0, "a host-held lease accepted");
        reply_granted(b, 2, 1, 0);
        memcpy(one[0], id(2), sizeof(one[0]));
        missing = true;
        engine_renew_done(&e, "reboot", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, 0, 1, 2);
        CHECK_INT(count_calls("release", id(2)), 1, "revoked (found missing): given back at once");
        CHECK_INT(e.n_held, 0, "and gone from here");
        teardown();
}

/* Redis lost its state: holders are re-asserted, waiters queue again and
 * look once the grace is over; a reset during a grant grants nothing. */
void test_reset(void) {
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
        engine_redis_down(&e, ERROR_CODE_UNAVAILABLE, "gone", 100);
        acquire_done(c, NULL, 100);     /* the connection went before the answer */
        CHECK(!has_line(&c3, "GRANTED"), "no grant from a reply that never came");
        CHECK(c3.finished && has_line(&c3, "ERROR code=unavailable"), "a request not yet queued fails at once");
        CHECK(!c2.finished, "a queued waiter keeps waiting while Redis is away");

        w.redis_up = true;
        before = w.n_calls;
        engine_redis_up(&e, true, 2 * USEC_PER_SEC, NULL, 200);
        CHECK_INT(count_calls("reassert", id(1)), 1, "the holder is re-asserted");
        CHECK_INT(count_calls("acquire", id(2)) >= 1 && w.n_calls > before, 1, "the waiter queues again");
        reply_queued(b, 1, 1, 60000, 210);
        CHECK_U64(w.lease_timer[2], 200 + 2 * USEC_PER_SEC + 5 * USEC_PER_MSEC,
                  "the waiter looks again as the grace ends, not later");
        reassert_done(a, 1, 220);
        CHECK(!has_line(&c1, "LOST"), "re-asserted: still held");
        engine_redis_up(&e, true, 2 * USEC_PER_SEC, NULL, 300);
        reassert_done(a, 0, 310);
        CHECK(has_line(&c1, "LOST"), "no room on a second reset: told it is lost");
        teardown();
}

/* Redis may evict: every waiter is told, with why, and leaves the line
 * (also one whose look is under way, which may have granted it); the
 * holder keeps its slot and is renewed. */
void test_fail_waiters(void) {
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
        engine_fail_waiters(&e, ERROR_CODE_MISCONFIGURED, "Redis evicts", 100);
        CHECK(c2.finished && has_line(&c2, "ERROR code=misconfigured message=Redis%20evicts"),
              "a queued waiter is told, with why");
        CHECK(c3.finished && has_line(&c3, "ERROR code=misconfigured"), "so is one whose look is under way");
        CHECK_INT(count_calls("release", id(2)) + count_calls("release", id(3)), 2, "both leave the line in Redis");
        CHECK(!c1.finished && !has_line(&c1, "ERROR"), "the holder is not told anything");
        CHECK(engine_lease_find(&e, id(1)) == a && a->state == LEASE_HELD, "and keeps its slot");
        CHECK_INT((int) e.n_waiting, 0, "nobody waits here");
        renews = count_calls("renew", NULL);
        engine_tick(&e, e.lease_ttl / 3 + 100);
        CHECK_INT(count_calls("renew", NULL), renews + 1, "the holder is renewed on");
        teardown();
}

void test_refused_and_pending_release(void) {
        Client c1 = {}, c2 = {};
        Lease *a, *b;
        AcquireResult refused = { .outcome = ACQUIRE_REFUSED };

        setup(0);
        a = ask(1, "x", 1, USEC_INFINITY, &c1, 0);
        acquire_done(a, &refused, 1);
        CHECK(has_line(&c1, "ERROR code=permission"), "a lease owned elsewhere is refused");
        CHECK_INT(count_calls("release", id(1)), 0, "and nothing of it is touched in Redis");
        CHECK(engine_lease_find(&e, id(1)) == NULL, "nor kept here");

        b = ask(2, "x", 1, USEC_INFINITY, &c2, 0);
        reply_granted(b, 3, 1, 2);
        w.redis_up = false;
        engine_redis_down(&e, ERROR_CODE_UNAVAILABLE, "gone", 3);
        engine_anchor_closed(&e, b, 4);
        CHECK_INT(count_calls("release", id(2)), 0, "released while Redis is away: not sent");
        w.redis_up = true;
        engine_redis_up(&e, false, 0, NULL, 5);
        CHECK_INT(count_calls("release", id(2)), 1, "sent as soon as Redis is back");
        teardown();
}

/* A weighted request: the call carries its weight; Redis finds it above
 * the limit in force: the client is told why and the lease leaves the
 * line. One that asks for no number where the name has no fleet limit
 * is refused alike. */
void test_weight_and_fleet_limit(void) {
        Client c1 = {}, c2 = {};
        LeaseSpec spec = { .name = "x", .id = id(1), .slots = 3, .weight = 2, .uid = 1000, .pid = 42,
                           .desc = "INFO host=h pid=42 uid=1000 comm=job" };
        AcquireResult heavy = { .outcome = ACQUIRE_TOO_HEAVY, .limit = 1 }, none = { .outcome = ACQUIRE_NO_LIMIT };
        Lease *a = NULL, *b;

        setup(0);
        CHECK_INT(engine_acquire(&e, &spec, USEC_INFINITY, &c1, NULL, 0, &a), 0, "a weighted lease accepted");
        CHECK(last_call() && last_call()->l == a && a->weight == 2, "its acquire call carries its weight (2)");
        acquire_done(a, &heavy, 1);
        CHECK(has_line(&c1, "ERROR code=too_heavy message=weight%202%20is%20above%20the%20limit%20in%20force%20%281%29"),
              "above the limit in force: told so, with the limit");
        CHECK(c1.finished, "and let go");
        CHECK_INT(count_calls("release", id(1)), 1, "and it leaves the line in Redis");
        CHECK(engine_lease_find(&e, id(1)) == NULL, "nor is it kept here");
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
void test_unconfirmed_grant(void) {
        Client c1 = {}, c2 = {};
        AcquireResult retry = { .outcome = ACQUIRE_RETRY, .error = "no replica" };
        Lease *a, *b;

        setup(0);
        a = ask(1, "x", 1, USEC_INFINITY, &c1, 0);
        acquire_done(a, &retry, 10);
        CHECK_INT(c1.n_lines, 0, "an unconfirmed grant is not told");
        CHECK(!c1.finished, "and the request goes on waiting");
        CHECK_U64(w.lease_timer[1], 10 + USEC_PER_SEC, "it asks again a second later");
        engine_lease_timer(&e, a, 10 + USEC_PER_SEC);
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
void test_counters(void) {
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
        engine_lease_timer(&e, b, 10 + 2 * USEC_PER_SEC);
        CHECK_U64(e.stats.denials[ENGINE_DENIAL_TIMEOUT], 1, "a waiter denied at its deadline: reason timeout");
        c = ask(3, "y", 1, 0, &c3, 20);
        reply_queued(c, 1, 1, -1, 21);
        CHECK_U64(e.stats.denials[ENGINE_DENIAL_FULL], 1, "no wait and no slot: reason full");
        CHECK_U64(e.stats.wait.count, 1, "denials are no waits of the histogram");
        CHECK_U64(e.stats.releases[ENGINE_RELEASE_RELEASED] + e.stats.releases[ENGINE_RELEASE_ANCHOR_CLOSED], 0,
                  "a denied waiter is no release");

        engine_anchor_closed(&e, a, 30);
        CHECK_U64(e.stats.releases[ENGINE_RELEASE_ANCHOR_CLOSED], 1, "a holder whose anchor closed: cause anchor_closed");
        d = ask(4, "z", 1, USEC_INFINITY, &c4, 40);
        reply_granted(d, 2, 1, 40 + 90 * USEC_PER_SEC);
        CHECK_U64(e.stats.wait.buckets[11], 1, "a 90 s wait lands in the bucket up to 5 min");
        memcpy(one[0], id(4), sizeof(one[0]));
        due = d->renewed + TTL / 3;
        engine_renew_done(&e, "z", (const char (*)[LEASE_ID_LEN + 1]) one, &missing, 1, 0, 100 * USEC_PER_SEC,
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
        engine_release(&e, d, "released on request", 101 * USEC_PER_SEC);
        CHECK_U64(e.stats.releases[ENGINE_RELEASE_RELEASED], 1, "given back on request: cause released");

        a = ask(5, "x", 1, USEC_INFINITY, &c5, 200 * USEC_PER_SEC);
        reply_granted(a, 3, 1, 200 * USEC_PER_SEC);
        engine_tick(&e, 200 * USEC_PER_SEC + engine_lost_after(&e) + 1);
        CHECK(has_line(&c5, "LOST"), "a holder not renewed in time is lost");
        CHECK_U64(e.stats.lost, 1, "and counted as lost");
        CHECK_U64(e.stats.releases[ENGINE_RELEASE_LOST], 1, "and as released for cause lost");
        CHECK_U64(name_stats("x")->grants, 2, "x was granted twice");
        for (size_t i = 0; i < ENGINE_HISTOGRAM_BUCKETS + 1; i++)
                sum += e.stats.wait.buckets[i];
        CHECK_U64(sum, e.stats.wait.count, "the buckets add up to the count");

        w.redis_up = false;
        engine_redis_down(&e, ERROR_CODE_UNAVAILABLE, "gone", 300 * USEC_PER_SEC);
        w.redis_up = true;
        engine_redis_up(&e, false, 0, NULL, 301 * USEC_PER_SEC);
        CHECK_U64(e.stats.redis_ups, 2, "a reconnection is counted");
        engine_done(&e);
        CHECK(e.name_stats == NULL && e.n_name_stats == 0, "the counters of names go with the engine");
}

/* At most ENGINE_NAME_STATS_MAX names are counted: the least recently used
 * one goes for a new one. */
void test_name_counters_bounded(void) {
        char name[32];

        setup(0);
        for (unsigned i = 0; i <= ENGINE_NAME_STATS_MAX; i++) {
                LeaseSpec spec = { .name = name, .id = id(1), .slots = 1, .uid = 0, .pid = 1, .desc = "INFO" };
                Lease *l = NULL;

                snprintf(name, sizeof(name), "n%u", i);
                if (engine_acquire(&e, &spec, 0, NULL, NULL, i, &l) < 0)
                        break;
                engine_release(&e, l, "test", i);
                if (i == 1) {
                        /* n0 used again: n1 is now the least recently used. */
                        spec.name = "n0";
                        if (engine_acquire(&e, &spec, 0, NULL, NULL, i, &l) >= 0)
                                engine_release(&e, l, "test", i);
                }
        }
        CHECK_U64(e.n_name_stats, ENGINE_NAME_STATS_MAX, "the table of names' counters is bounded");
        CHECK(name_stats("n0") != NULL, "a name used again stays");
        CHECK(name_stats("n1") == NULL, "the least recently used goes");
        snprintf(name, sizeof(name), "n%u", ENGINE_NAME_STATS_MAX);
        CHECK(name_stats(name) != NULL, "the newest is there");
        teardown();
}

/* A grant held back for an earlier lease here, which must then answer:
 * when its answer is lost with the connection, and its look-again timer
 * fires while Redis is away, it still answers once Redis is back, even
 * when it is not the first in line here (c is: only c is asked then). */
void test_gate_survives_outage(void) {
        Client c1 = {}, c2 = {}, c3 = {}, c4 = {};
        Lease *a, *b, *c, *d;
        usec_t t = 0, up;

        setup(0);
        c = ask(3, "x", 1, USEC_INFINITY, &c3, t);
        d = ask(4, "x", 1, USEC_INFINITY, &c4, t);
        reply_queued(c, 1, 1, -1, t += 10);
        reply_queued(d, 2, 1, -1, t += 10);
        /* d gets a slot before c: c's answer (still waiting) lets it through. */
        engine_lease_timer(&e, d, t += ENGINE_RECHECK_SAFETY);
        reply_granted(d, 5, 1, t += 10);
        reply_queued(c, 1, 1, -1, t += 10);
        CHECK(has_line(&c4, "GRANTED token=5"), "d is told once c answered");
        engine_release(&e, d, "done", t += 10);

        a = ask(1, "x", 1, USEC_INFINITY, &c1, t);
        b = ask(2, "x", 1, USEC_INFINITY, &c2, t);
        reply_queued(a, 2, 1, -1, t += 10);
        reply_queued(b, 3, 1, -1, t += 10);
        CHECK(c->seq < a->seq && a->seq < b->seq, "c, a, b joined the line here in that order");

        /* Redis has b before them (they joined its line in another order,
         * as after a reset), and b's look gets it the slot. */
        engine_lease_timer(&e, b, t += ENGINE_RECHECK_SAFETY);
        reply_granted(b, 9, 1, t += 10);
        CHECK(!has_line(&c2, "GRANTED"), "b's grant waits for a's answer");
        CHECK(a->check_inflight, "a asks");

        /* The connection goes before a's answer, and Redis stays away
         * past every waiter's look-again time. */
        w.redis_up = false;
        acquire_done(a, NULL, t += 10);
        engine_redis_down(&e, ERROR_CODE_UNAVAILABLE, "gone", t);
        t += 2 * ENGINE_RECHECK_SAFETY;
        timer_fires(a, t);
        timer_fires(c, t);
        timer_fires(b, t);
        w.redis_up = true;
        engine_redis_up(&e, false, 0, NULL, t += 10);
        up = t;
        CHECK(!a->check_inflight && c->check_inflight, "back: c, first in line here, asks (a does not)");
        reply_queued(c, 1, 1, -1, t += 10);

        /* Every waiter still looks again in time (the looks that fell
         * while Redis was away were not the last), b first: its grant,
         * heard again, has a asked at once. */
        CHECK(w.lease_timer[2] <= up + ENGINE_RECHECK_SAFETY, "b looks again within %" PRIu64 " s",
              ENGINE_RECHECK_SAFETY / USEC_PER_SEC);
        timer_fires(b, t = MAX(t, MIN(w.lease_timer[2], up + ENGINE_RECHECK_SAFETY)));
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
void test_requeue_in_order(void) {
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
        engine_renew_done(&e, "x", (const char (*)[LEASE_ID_LEN + 1]) ids, missing, 3, 0, 20, 30);
        CHECK_INT(w.n_calls - first, 3, "each asks for a place again");
        CHECK(w.n_calls - first == 3 && streq(w.calls[first].lease, id(1)) && streq(w.calls[first + 1].lease, id(2)) &&
              streq(w.calls[first + 2].lease, id(3)), "a, b, c, in the order they came");
        CHECK(a->seq < b->seq && b->seq < c->seq, "and keep that order here");
        teardown();

        /* Asked for while the agent reconnected: each asks once Redis is
         * back, in the order they came. */
        setup(0);
        w.redis_up = false;
        engine_redis_down(&e, ERROR_CODE_UNAVAILABLE, "gone", 10);
        a = ask(1, "x", 1, USEC_INFINITY, &c1, 20);
        b = ask(2, "x", 1, USEC_INFINITY, &c2, 30);
        c = ask(3, "x", 1, USEC_INFINITY, &c3, 40);
        w.redis_up = true;
        first = w.n_calls;
        engine_redis_up(&e, false, 0, NULL, 50);
        CHECK(w.n_calls - first >= 3 && streq(w.calls[first].lease, id(1)) && streq(w.calls[first + 1].lease, id(2)) &&
              streq(w.calls[first + 2].lease, id(3)), "requests made while Redis was away ask in the order they came");
        teardown();
}

/* Each grant heard of waits for an answer of the earlier waiters given
 * after it: an answer that let an earlier grant through says nothing of
 * what Redis did since. */
void test_each_grant_waits_for_its_answer(void) {
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
        timer_fires(b, t += ENGINE_RECHECK_SAFETY);
        reply_granted(b, 7, 3, t += 10);
        reply_queued(a, 1, 3, -1, t += 10);
        CHECK(has_line(&c2, "GRANTED token=7"), "b is told once a answered");
        /* Then c's look gets it one; a may have been granted meanwhile too
         * (another host's release), with a lower token. */
        timer_fires(c, t += ENGINE_RECHECK_SAFETY);
        reply_granted(c, 9, 3, t += 10);
        CHECK(!has_line(&c3, "GRANTED"), "c's grant waits for a new answer of a");
        CHECK(a->check_inflight, "which is asked for");
        reply_granted(a, 8, 3, t += 10);
        CHECK(has_line(&c1, "GRANTED token=8"), "a is told of token 8");
        CHECK(has_line(&c3, "GRANTED token=9") && c3.n_lines >= 1 && c1.n_lines >= 1, "then c of token 9");
        teardown();
}
