/* SPDX-License-Identifier: MIT */
#pragma once

/* The engine's script calls without I/O: each call's keys and arguments
 * as the scripts take them (keys.list, scripts.list) and each reply as the
 * engine hears it (replies.list, through the one decoder). The agent
 * (redis-engine.c, calls.c) sends them; test-slots-redis sends the same
 * to a redis-server of its own. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "lua-args.h"
#include "lua-keys.h"
#include "lua-replies.h"
#include "redis.h"
#include "engine.h"

#define SCRIPT_KEY_SIZE (IDENT_MAX_LEN + NAME_MAX_LEN + 32)

/* Key i of a script's keys on names (n_names of them): each name's own
 * (N_KEYS), one name after the other, then the fleet's clock key and the
 * census (where keys are sharded, one each per hash slot, tagged with
 * slot). Its length. */
int script_key(char buf[static SCRIPT_KEY_SIZE], const char *prefix, const char *const *names, size_t n_names,
               bool sharded, unsigned slot, size_t i);

/* What every script on a name is told besides its own arguments. */
typedef struct CommonArgs {
        char ttl[24], uid[16], grace[24], idle[24], idle_new[24];
} CommonArgs;

/* grace_until_ms: the end of the reset's grace on Redis' clock (0: none). */
void common_args(const Config *config, uint64_t grace_until_ms, uid_t uid, bool host_held, CommonArgs *ret);

/* Each call's arguments, ARGV in argv; built in place (argv points into
 * the struct and into what it was built from, which must outlive it). */
typedef struct AcquireArgs {
        CommonArgs c;
        char slots[16], weight[16];
        const char *argv[N_ACQUIRE_ARGS];
} AcquireArgs;
void acquire_args(const Config *config, uint64_t grace_until_ms, const Lease *l, AcquireArgs *ret);

typedef struct ReleaseArgs {
        CommonArgs c;
        const char *argv[N_RELEASE_ARGS];
} ReleaseArgs;
void release_args(const Config *config, uint64_t grace_until_ms, const char *lease, uid_t uid, bool host_held,
                  ReleaseArgs *ret);

typedef struct RenewArgs {
        CommonArgs c;
        size_t n;               /* of argv */
        const char **argv;      /* freed by renew_args_free() */
} RenewArgs;
int renew_args(const Config *config, uint64_t grace_until_ms, const char (*ids)[LEASE_ID_LEN + 1], size_t n_ids,
               uid_t uid, bool host_held, RenewArgs *ret);
void renew_args_free(RenewArgs *a);

typedef struct ReassertArgs {
        CommonArgs c;
        char slots[16], weight[16], token[24], since[24];
        const char *argv[N_REASSERT_ARGS];
} ReassertArgs;
void reassert_args(const Config *config, uint64_t grace_until_ms, const Lease *l, ReassertArgs *ret);

/* acquire.lua's reply as the engine's result, decoded straight into it;
 * an error, or one that fits no shape, grants nothing (FAILED, whose error
 * points into reply or is static). */
AcquireResult acquire_result(const char *name, const RedisReply *reply);
/* release.lua's reply (NULL: none came): whom it handed slots to, into g;
 * how many. Refusals and replies of no shape are logged and hand nothing. */
size_t release_granted(const char *name, const char *lease, const RedisReply *reply, Granted g[ENGINE_GRANTS_MAX]);
/* Grants a release handed out, as a wake message without proofs ("g
 * LEASE TOKEN SINCE - ..."): told to the engine when replicas must
 * confirm each grant, so that each asks Redis (and waits) as on a wake. */
#define GRANTED_WAKE_MAX (ENGINE_GRANTS_MAX * 80)
void granted_wake(const Granted *g, size_t k, char buf[static GRANTED_WAKE_MAX]);
/* renew.lua's reply to a renewal of ids: missing[i] for each the reply
 * names, and how long the name still grants nothing because Redis forgot
 * it (0: it did not); -EBADMSG when it names a lease not sent or fits no
 * shape (none of it is believed). */
int renew_result(const char (*ids)[LEASE_ID_LEN + 1], size_t n_ids, const RedisReply *reply, bool *missing,
                 usec_t *ret_forgot_left);
/* reassert.lua's reply as engine_reassert_done() takes it: 1 holds, 0 lost
 * (or an error, or nonsense: not believed to hold), -1 owned elsewhere,
 * -2 none came (NULL). */
int reassert_result(const char *name, const RedisReply *reply);
