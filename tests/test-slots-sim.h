/* SPDX-License-Identifier: MIT */
#pragma once

/* The simulated Redis of test_random_faults() (test-slots-sim.c). */

#include "test-slots.h"

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

extern SimRedis R;
extern SimGrant sim_held_back[64];
extern size_t n_sim_held_back;
extern uint64_t sim_rng, sim_ids, sim_grants, sim_pending;

uint64_t sim_random(uint64_t n);
int sim_find(const SimEntry *v, size_t n, const char *id);
AcquireResult sim_acquire(const char *id, usec_t now);
void sim_release(const char *id, usec_t now, char *msg, size_t size);
bool sim_renew_one(const char *id, usec_t now);
void sim_answer(unsigned k, bool runs, bool told, usec_t now);
void sim_tell_held_back(unsigned answered_up_to, bool gone, usec_t now);
