/* SPDX-License-Identifier: MIT */
/* A simulated Redis for the random faults: the scripts' behaviour for
 * one name, the one connection's answers and the wake messages. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "test-slots.h"
#include "test-slots-sim.h"

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











SimRedis R;
SimGrant sim_held_back[64];
size_t n_sim_held_back;
uint64_t sim_rng, sim_ids, sim_grants, sim_pending;

uint64_t sim_random(uint64_t n) {
        sim_rng = sim_rng * 6364136223846793005ULL + 1442695040888963407ULL;
        return (sim_rng >> 33) % n;
}

int sim_find(const SimEntry *v, size_t n, const char *id) {
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

AcquireResult sim_acquire(const char *id, usec_t now) {
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
void sim_release(const char *id, usec_t now, char *msg, size_t size) {
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

bool sim_renew_one(const char *id, usec_t now) {
        int i;

        if ((i = sim_find(R.held, R.n_held, id)) >= 0)
                R.held[i].expiry = now + TTL;
        else if ((i = sim_find(R.line, R.n_line, id)) >= 0)
                R.line[i].expiry = now + TTL;
        return i >= 0;
}

/* Redis runs a call (unless a partition ate it) and the engine hears the
 * answer (unless the connection went first). */
void sim_answer(unsigned k, bool runs, bool told, usec_t now) {
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
                        slots_renew_done(&e, c->name, (const char (*)[LEASE_ID_LEN + 1]) c->ids, missing, n, 0, now, now);
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
void sim_tell_held_back(unsigned answered_up_to, bool gone, usec_t now) {
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
