/* SPDX-License-Identifier: MIT */
#pragma once

/* test-slots: the slot engine alone. A fake clock and an effects log stand
 * in for the agent's I/O (test-slots-world.c); the rules, each played step
 * by step (test-slots-grants.c, test-slots-leases.c); and, a program of
 * its own (test-slots-faults), random faults against a real redis-server
 * running the scripts (test-slots-redis.c, test-slots-faults.c). */

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"
#include "tap.h"

#define TTL (3 * USEC_PER_SEC)

typedef struct Client {
        char name[8];
        char lines[32][256];    /* all it was sent (more: the test bails) */
        unsigned n_lines;
        bool finished;
} Client;

typedef struct Call {
        char what[16];          /* acquire, release, renew, reassert */
        char name[NAME_MAX_LEN + 1];
        char lease[LEASE_ID_LEN + 1];
        uid_t uid;              /* release */
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
        char stopped[64];               /* stop_job: its unit, or its lease id */
        usec_t kill_at;                 /* … and when it is killed */
        bool ends_sessions;             /* stop_job finds a login session to end for a lease without a unit */
        char told[LEASE_ID_LEN + 1];    /* tell_lost: the last lease whose holder was told so */
        unsigned n_index_add;
        usec_t lease_timer[8];  /* by lease id's first digit */
        unsigned n_ids;         /* random ids made: "f000…1", "f000…2", … */
        char said[64][256];     /* the engine's lines at LOG_INFO or above since setup(), "LEVEL UID message" (more: the test bails) */
        unsigned n_said;
        bool said_unread;       /* said() is never asked: the lines are let go */
} World;

/* test-slots-world.c: the engine under test and what it did */
extern World w;
extern Engine e;

bool said(const char *start);
void calls_free(void);
void setup(usec_t now);
const char *id(int n);
Lease *ask(int n, const char *name, uint32_t slots, usec_t wait, Client *c, usec_t now);
Call *last_call(void);
bool answered(const char *what, Lease *l);
void timer_fires(Lease *l, usec_t now);
void acquire_done(Lease *l, const AcquireResult *r, usec_t now);
void reassert_done(Lease *l, int result, usec_t now);
void teardown(void);
unsigned count_calls(const char *what, const char *lease);
void reply_granted(Lease *l, uint64_t token, uint32_t limit, usec_t now);
void reply_queued(Lease *l, uint32_t position, uint32_t limit, int64_t next_expiry_ms, usec_t now);
bool has_line(const Client *c, const char *prefix);
void two_in_line(Client *c1, Client *c2, Lease **a, Lease **b);

/* test-slots-grants.c */
void test_grant_and_limit(void);
void test_wait_deadline_and_no_wait(void);
void test_huge_wait(void);
void test_drained(void);
void test_grants_in_token_order(void);
void test_stale_pending_grant(void);
void test_wake_is_a_hint(void);
void test_foreign_grant_asks_nothing(void);
void test_wake_grant_with_proof(void);
void test_wake_grant_behind_earlier(void);

/* test-slots-leases.c */
void test_illegal_transition(void);
void test_lost_when_not_renewed(void);
void test_forgotten(void);
void test_revoke_heard(void);
void test_host_held(void);
void test_reset(void);
void test_fail_waiters(void);
void test_refused_and_pending_release(void);
void test_weight_and_fleet_limit(void);
void test_unconfirmed_grant(void);
void test_counters(void);
void test_name_counters_bounded(void);
void test_gate_survives_outage(void);
void test_requeue_in_order(void);
void test_each_grant_waits_for_its_answer(void);
