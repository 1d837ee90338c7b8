/* SPDX-License-Identifier: MIT */
#pragma once

/* Between a shard's lifetime (shard.c) and its set-up (shard-setup.c). */

#include "redis-layer.h"

/* "host:port", or the one server's name, for messages. */
const char *shard_server(const Shard *sh);
/* The set-up is done: sh is ready. grace: what is left of the time after
 * a reset in which nobody is granted anything; why: a GRACE_WHY_*, NULL
 * when this agent cannot tell. */
void shard_ready(Shard *sh, bool reset, usec_t grace, const char *why);

/* ---- A shard's set-up: shard-setup.c, the library's part in shard-library.c, their
 * steps in shard-steps.c ---- */

typedef struct SetupStep SetupStep;
/* A step's reply, to its handler; NULL: an error fails the set-up (AUTH,
 * SELECT). */
typedef void (*SetupReplyFn)(Shard *sh, const RedisReply *reply, const SetupStep *step);

struct SetupStep {
        Shard *shard;
        const char *what;
        SetupReplyFn on_reply;
        char had[64];           /* library_claim_reply(): what Redis holds ("": nothing), as library_load() takes it */
};

/* A set-up begun: done is called once its last step is answered, none
 * having failed (shard-steps.c). */
void setup_begin(Shard *sh, void (*done)(Shard *sh));
/* The step sent (its reply frees it), or NULL when it could not be. */
SetupStep *setup_send(Shard *sh, const char *what, SetupReplyFn on_reply, int argc, const char *const *argv);
/* A step of the set-up answered (or waited out): the set-up ends with
 * the last. */
void setup_step_done(Shard *sh);
/* The set-up failed: sh->error says why; refused: a state that lasts
 * until an operator acts (shard_refuse()), NULL for any other failure. */
void setup_fail(Shard *sh, const char *refused, const char *fmt, ...) _printf_(3, 4);
/* A step's Redis error failed the set-up. */
void setup_fail_redis(Shard *sh, const char *what, const char *err);
/* Nothing granted through sh, for a reason only an operator can change:
 * said once, and in status (refused: where it is kept, of size). */
void shard_refuse(Shard *sh, char *refused, size_t size, const char *state, const char *why);
/* state, a row of protocol.c's table, when it lasts until an operator
 * acts (it refuses whatever on_error says); else NULL. */
const char *refusing(const char *state);

/* The library's steps (shard-library.c), from the first. */
void library_ask_version(Shard *sh);
