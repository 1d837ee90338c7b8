/* SPDX-License-Identifier: MIT */
#pragma once

/* Inside the slot engine (engine.h): engine.c keeps names and leases and
 * hands out grants; engine-wait.c the waiting; engine-redis.c what Redis
 * says of releases, renewals and its own state; engine-stats.c counts. */

#include "engine.h"

#define NAMES_IDLE_MAX 4096
#define NAME_IDLE_TIME (10 * USEC_PER_MINUTE)

/* A release Redis has not heard yet (out of memory, Redis away): asked
 * again when it is back. */
typedef struct PendingRelease {
        LIST_FIELDS(struct PendingRelease, all);
        uid_t uid;
        char name[NAME_MAX_LEN + 1];
        char lease[LEASE_ID_LEN + 1];
} PendingRelease;

/* engine.c */
/* What the engine says goes through its ops: the agent writes it (within
 * the budget of the uid that caused it), a test reads it. */
void engine_say(Engine *e, int level, uid_t uid, usec_t now, const LogFields *fields, const char *format, ...)
        _printf_(6, 7);
void names_sweep(Engine *e, bool all, usec_t now);
LogFields lease_fields(const Lease *l);
void lease_set_state(Lease *l, LeaseState state, LeaseEvent event, usec_t now);
void lease_arm(Lease *l);
void lease_send(Lease *l, const char *line, int len);
void lease_finish_client(Lease *l);
void lease_send_error(Lease *l, const char *code, const char *message);
void lease_detach(Lease *l, LeaseEvent event, usec_t now);
void pending_release_add(Engine *e, const char *name, const char *lease, uid_t uid);
void lease_release_at(Lease *l, const char *why, usec_t now);
/* The slot is lost: its holder told (LOST, with free_in: when it may be
 * granted elsewhere at the earliest), and given back now or, before its
 * lease's end, once its job stopped. reserved: Redis keeps it counted
 * until its lease's end (a revoke); otherwise it may be free already. */
void lease_lost(Lease *l, const char *why, bool reserved, usec_t now);
/* A login session being ended here (LEASE_ENDING) stays counted until its
 * lease runs out whatever the program that opened it does: given its
 * SIGTERM, it closes the session (pam_close_session, a release) and its
 * anchor while the session's last processes may live on. true: l is
 * kept, and what (the release's cause) logged. */
bool lease_kept_ending(Lease *l, const char *what, usec_t now);
int lease_new(Engine *e, const LeaseSpec *spec, void *io, Lease **ret);
void send_granted(Lease *l, usec_t now);
void name_flush_grants(Name *n, usec_t now);
void grant_in_order(Lease *l, uint64_t token, uint64_t since, uint32_t limit, usec_t renewed, bool by_wake,
                    usec_t now);

/* Asks Redis for a waiter's place (or grant), unless an answer is awaited. */
void lease_check(Lease *l, usec_t now);

/* engine-wait.c */
void name_recheck(Name *n, usec_t now);
void report_position(Lease *l, usec_t now);
void send_queued(Lease *l, usec_t now);
void send_denied(Lease *l, const char *reason, usec_t now);

/* engine-redis.c */
int seq_cmp(const void *x, const void *y);

/* engine-stats.c */
void name_stats_free(Engine *e, NameStats *s);
NameStats *name_stats_get(Engine *e, const char *name);
void histogram_add(EngineHistogram *h, usec_t t);
void count_release(Lease *l, EngineReleaseCause cause);
