/* SPDX-License-Identifier: MIT */
#pragma once

/* The real Redis of test_random_faults() (test-slots-redis.c): a
 * redis-server of the test's own, the scripts loaded as the agent loads
 * them, on a clock the test moves. */

#include "test-slots.h"

#define SIM_LOCAL 7
#define SIM_REMOTE 4

typedef struct SimGrant {       /* an answer held back behind ROLE and WAIT */
        Lease *l;
        AcquireResult r;
        unsigned after;         /* told once the calls before this one are answered */
} SimGrant;

extern SimGrant sim_held_back[64];
extern size_t n_sim_held_back;
extern uint64_t sim_rng, sim_ids, sim_grants, sim_pending;
extern uint32_t sim_limit;

uint64_t sim_random(uint64_t n);

/* The server: started (0), or why not (-errno, said in a TAP comment);
 * stopped and its directory removed. */
int sim_redis_start(void);
void sim_redis_stop(void);
/* A new run: everything gone, as on a new server (the census says
 * nobody held anything before), the clock at 0. */
void sim_redis_new(void);
/* Redis' clock, stopped at now (the test's clock) until moved again. */
void sim_clock(usec_t now);
/* Redis restarted empty (FLUSHALL: the census goes too). */
void sim_redis_reset(void);
/* The grace after a reset the agents pass the scripts: nobody is granted
 * anything until then (the test's clock). */
void sim_grace(usec_t until);

/* Another host's calls on name "x", as its agent makes them. */
bool sim_remote_acquire(const char *id);        /* granted */
void sim_remote_renew(const char *id);
void sim_remote_release(const char *id);

/* Redis runs call k of the engine's (unless a partition ate it) and the
 * engine hears the answer (unless the connection went first). */
void sim_answer(unsigned k, bool runs, bool told, usec_t now);
void sim_tell_held_back(unsigned answered_up_to, bool gone, usec_t now);

/* The wake messages published on "x" so far, in order: the next one
 * (false: none), or all dropped (this host's pub/sub connection went). */
bool sim_wake_next(char *buf, size_t size);
void sim_wakes_drop(void);
