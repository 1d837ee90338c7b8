/* SPDX-License-Identifier: MIT */
/* The slot engine's effects on Redis (EngineOps: acquire, release, renew,
 * reassert, this host's index, wake-ups), with each script's arguments
 * built here and its reply checked and decoded before the engine sees it.
 * Grants wait for the replicas where min_replicas_acked asks for it
 * (grant-wait.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "lua-args.h"
#include "lua-replies.h"
#include "redis-layer.h"
#include "replies.h"
#include "script-args.h"

static Agent *agent_of(void *ctx) {
        return ctx;
}

/* What every script on name is told besides its own arguments
 * (script-args.c), with the grace of name's shard. */
static void engine_common_args(Agent *a, const char *name, uid_t uid, bool host_held, CommonArgs *c) {
        common_args(a->config, redis_grace_until(a, name), uid, host_held, c);
}

void io_lease_args(Agent *a, bool host_held, const char *name, uid_t uid, char ttl[static 24], char idle[static 24]) {
        CommonArgs c;

        engine_common_args(a, name, uid, host_held, &c);
        memcpy(ttl, c.ttl, sizeof(c.ttl));
        memcpy(idle, c.idle, sizeof(c.idle));
}

/* ---- The engine's calls: acquire ------------------------------------------------- */

/* A grant the replicas did not confirm, given back. Not sent (Redis went),
 * it stays with the lease: the request asks again under the same id and
 * finds it (acquire.lua grants a lease its slot again), or its TTL ends it
 * when the request goes. */
static void grant_give_back(Agent *a, const Lease *l) {
        int r;

        if (l->state == LEASE_GONE)
                return;         /* its own release went after its acquire */
        r = io_call_release(a, l->name->name, l->id, l->uid);

        if (r < 0)
                log_debug_errno(r, "Failed to give back the unconfirmed grant of lease %s of %s: %m; it ends with its "
                                "lease.", l->id, l->name->name);
}

/* A lease whose client went while its call was out has left its name (the
 * engine's lease_detach()): a reply for it is only logged under its id. */
static const char *name_of(const Lease *l) {
        return l->name ? l->name->name : l->id;
}

static void acquire_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Lease *l = userdata;
        Agent *a = agent_of(l->engine->ctx);
        AcquireResult r;

        if (!reply) {
                engine_acquire_done(&a->engine, l, NULL, now_mono());
                return;
        }
        r = acquire_result(name_of(l), reply);
        if (r.outcome == ACQUIRE_GRANTED && a->config->min_replicas_acked > 0) {
                if (grant_wait_for_replicas(a, conn, l, &r, grant_give_back) >= 0)
                        return;
                grant_give_back(a, l);
                r = (AcquireResult) { .outcome = ACQUIRE_RETRY, .error = "cannot ask the replicas" };
        }
        engine_acquire_done(&a->engine, l, &r, now_mono());
}

int io_call_acquire(void *ctx, Lease *l) {
        Agent *a = agent_of(ctx);
        AcquireArgs args;

        acquire_args(a->config, redis_grace_until(a, l->name->name), l, &args);
        return script_call(a, SCRIPT_ACQUIRE, l->name->name, acquire_reply, l, N_ACQUIRE_ARGS, args.argv, NULL);
}

/* ---- release -------------------------------------------------------------------- */

typedef struct ReleaseCall {
        Agent *agent;
        uid_t uid;
        char name[NAME_MAX_LEN + 1];
        char lease[LEASE_ID_LEN + 1];
} ReleaseCall;

static void release_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        _cleanup_free_ ReleaseCall *rc = userdata;
        Agent *a = rc->agent;
        Granted g[ENGINE_GRANTS_MAX] = {};
        size_t k;

        (void) conn;
        /* Whom the release handed slots to. */
        k = release_granted(rc->name, rc->lease, reply, g);
        if (k > 0 && a->config->min_replicas_acked > 0) {
                /* Those granted here are told once WAIT confirms it: they
                 * ask Redis (and wait for the replicas) as on a wake-up. */
                char payload[GRANTED_WAKE_MAX];

                granted_wake(g, k, payload);
                engine_release_done(&a->engine, rc->name, rc->lease, rc->uid, false, NULL, 0, now_mono());
                engine_wake(&a->engine, rc->name, payload, now_mono());
                return;
        }
        engine_release_done(&a->engine, rc->name, rc->lease, rc->uid, !reply, g, k, now_mono());
}

int io_call_release(void *ctx, const char *name, const char *lease, uid_t uid) {
        Agent *a = agent_of(ctx);
        _cleanup_free_ ReleaseCall *rc = NULL;
        const Lease *l;
        ReleaseArgs args;
        int r;

        rc = calloc(1, sizeof(*rc));
        if (!rc)
                return -ENOMEM;
        rc->agent = a;
        rc->uid = uid;
        snprintf(rc->name, sizeof(rc->name), "%s", name);
        snprintf(rc->lease, sizeof(rc->lease), "%s", lease);
        /* A host-held slot's release (after its host's boot, or a wait
         * given up) leaves the name's keys their long life: another host
         * of the name may be down, its slot unrenewed, for host_lease. */
        l = engine_lease_find(&a->engine, lease);
        release_args(a->config, redis_grace_until(a, name), lease, uid, l && l->host_held, &args);
        r = script_call(a, SCRIPT_RELEASE, name, release_reply, rc, N_RELEASE_ARGS, args.argv, NULL);
        if (r < 0)
                return r;
        TAKE_PTR(rc);           /* release_reply()'s now */
        /* Out of this host's index with it, whenever it goes out. */
        (void) redis_key_command(a, NULL, NULL, 3, (const char *[]) { "HDEL", a->host_key, lease });
        return 0;
}

/* The index of names "fleetsem status" lists (its one reader besides
 * the writers: status-reply.c), each by when its keys leave Redis as this
 * host last saw it: the call's time here and the name's life that call
 * gave it (config_name_life()). Its entries leave with the names: every
 * writer and reader trims those past (io_names_trim()), and the key itself
 * expires with its latest entry (PEXPIREAT NX for a key just made, GT to
 * move it only later). So it holds no more names than Redis does,
 * whoever made them and however fast, and none once they all left; a
 * user's names leave it minutes after their last use, not a day (an
 * entry of the time its name was last used, trimmed only by status, once
 * held every name a user ever made in idle_time). Why not the census,
 * which knows the same: in a Cluster it is one key per hash slot, and
 * status would read all 16384. A name's first lease here writes its entry
 * at once; its renewals only once the entry is NAMES_INDEX_EVERY old (a
 * quarter of idle_time, if less; never later than half the name's life),
 * not at every tick: commands that cost Redis as much as a name's renewal
 * in the script, for a time that status needs only to within a minute.
 * ZADD GT: a call with a shorter life (a user's renewal beside root's)
 * never brings the entry before its keys' time. The time is this host's
 * clock, Redis' when the scripts set the keys' own: an entry leaves early
 * or late by the hosts' skew, which status shows and nothing else reads. */
#define NAMES_INDEX_EVERY (60 * USEC_PER_SEC)
#define NAMES_TRIM_EVERY USEC_PER_SEC
static void index_name(Agent *a, Name *n, uid_t uid, bool host_held, bool renewal) {
        usec_t now = now_mono(), life = config_name_life(a->config, uid, host_held, renewal);
        usec_t every = MIN(NAMES_INDEX_EVERY, a->config->idle_time / 4);
        char score[24];

        every = MIN(every, life / 2);
        if (renewal && n->io_indexed > 0 && now - n->io_indexed < every)
                return;
        snprintf(score, sizeof(score), "%lld", (long long) ((now_usec(CLOCK_REALTIME) + life) / USEC_PER_MSEC));
        (void) redis_key_command(a, NULL, NULL, 5, (const char *[]) { "ZADD", a->names_key, "GT", score, n->name });
        (void) redis_key_command(a, NULL, NULL, 4, (const char *[]) { "PEXPIREAT", a->names_key, score, "NX" });
        (void) redis_key_command(a, NULL, NULL, 4, (const char *[]) { "PEXPIREAT", a->names_key, score, "GT" });
        n->io_indexed = now;
        io_names_trim(a, false);
}

/* The index's entries past (their names' keys left Redis) out of it, at
 * most once a NAMES_TRIM_EVERY unless now. */
void io_names_trim(Agent *a, bool now) {
        usec_t mono = now_mono();
        char below[32];

        if (!now && a->names_trimmed > 0 && mono - a->names_trimmed < NAMES_TRIM_EVERY)
                return;
        a->names_trimmed = mono;
        snprintf(below, sizeof(below), "(%lld", (long long) (now_usec(CLOCK_REALTIME) / USEC_PER_MSEC));
        (void) redis_key_command(a, NULL, NULL, 4, (const char *[]) { "ZREMRANGEBYSCORE", a->names_key, "-inf", below });
}

/* P:host:{HOST} (keys.list): lease → engine_index_value(). It expires
 * HOST_INDEX_TTL after this agent last wrote it or looked at it (a host
 * gone for good leaves nothing behind), longer than a slot the host holds
 * itself lasts unrenewed (host_lease); re-adoption also reads the host's
 * own record (adopt.c), which outlives that. */
static void host_index_ttl(Agent *a, char ret[static 24]) {
        snprintf(ret, 24, "%" PRIu64, 2 * MAX(a->config->host_lease, a->config->lease_ttl) / USEC_PER_MSEC);
}

/* This host's index written again whole from the slots it holds (one
 * HSET), with its TTL. */
static void host_index_rewrite(Agent *a) {
        _cleanup_free_ char (*values)[ENGINE_INDEX_VALUE_MAX] = NULL;
        _cleanup_free_ const char **argv = NULL;
        size_t n = 0, max = a->engine.n_leases;
        char ttl[24];
        Name *nm;

        if (max == 0)
                return;
        values = calloc(max, sizeof(*values));
        argv = calloc(2 + 2 * max, sizeof(char *));
        if (!values || !argv) {
                log_warning("Out of memory: this host's index in Redis is written again at the next renewal.");
                return;
        }
        argv[0] = "HSET";
        argv[1] = a->host_key;
        LIST_FOREACH(all, nm, a->engine.names)
                for (Lease *l = nm->leases; l && n < max; l = l->by_name_next) {
                        if (l->state != LEASE_HELD)
                                continue;
                        engine_index_value(l, values[n]);
                        argv[2 + 2 * n] = l->id;
                        argv[3 + 2 * n] = values[n];
                        n++;
                }
        if (n == 0)
                return;
        host_index_ttl(a, ttl);
        (void) redis_key_command(a, NULL, NULL, (int) (2 + 2 * n), argv);
        (void) redis_key_command(a, NULL, NULL, 3, (const char *[]) { "PEXPIRE", a->host_key, ttl });
        log_notice("This host's index in Redis (%s) was gone; written again with its %zu held slot(s).", a->host_key,
                   n);
}

static void host_index_kept(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Agent *a = userdata;
        long long k;

        (void) conn;
        if (reply && redis_reply_integer(reply, &k) >= 0 && k == 0)
                host_index_rewrite(a);
}

/* At most once a renewal period (a third of the lease), at a renewal: the
 * host index' TTL set again, and, found gone (a DEL, an expiry, Redis
 * restarted), written again: a host index Redis lost is whole again
 * within a renewal period. */
static void host_index_keep(Agent *a) {
        usec_t now = now_mono();
        char ttl[24];

        if (a->host_index_kept > 0 && now - a->host_index_kept < a->config->lease_ttl / 3)
                return;
        a->host_index_kept = now;
        host_index_ttl(a, ttl);
        (void) redis_key_command(a, host_index_kept, a, 3, (const char *[]) { "PEXPIRE", a->host_key, ttl });
}

/* ---- renew ---------------------------------------------------------------------- */

typedef struct RenewCall {
        Agent *agent;
        usec_t sent;
        size_t n;
        char name[NAME_MAX_LEN + 1];
        char ids[][LEASE_ID_LEN + 1];
} RenewCall;

/* renew.lua's reply (script-args.c) is believed in no part when it fits
 * no shape: nothing counts as renewed (holders fence themselves if it
 * goes on), and it is logged as the bug it is. */
static void renew_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        _cleanup_free_ RenewCall *rc = userdata;
        Agent *a = rc->agent;
        const char *err = redis_reply_error(reply);
        _cleanup_free_ bool *missing = NULL;
        usec_t forgot_left = 0;

        (void) conn;
        if (!reply)
                return;         /* Redis went: the next renewal goes to the next connection */
        if (err) {
                log_error("Redis refused to renew the leases of %s: %s", rc->name, err);
                return;
        }
        missing = calloc(rc->n ?: 1, sizeof(bool));
        if (!missing)
                return;
        if (renew_result((const char (*)[LEASE_ID_LEN + 1]) rc->ids, rc->n, reply, missing, &forgot_left) < 0) {
                reply_log_unknown("renew", rc->name, reply, "nothing counts as renewed");
                return;
        }
        engine_renew_done(&a->engine, rc->name, (const char (*)[LEASE_ID_LEN + 1]) rc->ids, missing, rc->n, forgot_left,
                         rc->sent, now_mono());
}

int io_call_renew(void *ctx, Name *n, const char (*ids)[LEASE_ID_LEN + 1], size_t n_ids, uid_t uid, bool host_held) {
        Agent *a = agent_of(ctx);
        _cleanup_free_ RenewCall *rc = NULL;
        RenewArgs args;
        int r;

        if (a->state != REDIS_READY)
                return -ENOTCONN;
        rc = malloc(sizeof(*rc) + n_ids * sizeof(rc->ids[0]));
        if (!rc)
                return -ENOMEM;
        *rc = (RenewCall) { .agent = a, .sent = now_mono(), .n = n_ids };
        snprintf(rc->name, sizeof(rc->name), "%s", n->name);
        memcpy(rc->ids, ids, n_ids * sizeof(rc->ids[0]));
        r = renew_args(a->config, redis_grace_until(a, n->name), (const char (*)[LEASE_ID_LEN + 1]) rc->ids, n_ids,
                       uid, host_held, &args);
        if (r < 0)
                return r;
        r = script_call(a, SCRIPT_RENEW, n->name, renew_reply, rc, args.n, args.argv, NULL);
        renew_args_free(&args);
        if (r < 0) {
                if (r != -ENOTCONN)     /* (Redis gone: said already) */
                        log_warning_errno(r, "Failed to renew the leases of %s: %m; trying again at the next tick.",
                                          n->name);
                return r;
        }
        TAKE_PTR(rc);           /* renew_reply()'s now */
        index_name(a, n, uid, host_held, true);
        host_index_keep(a);
        return 0;
}

/* ---- reassert ------------------------------------------------------------------- */

static void reassert_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Lease *l = userdata;
        Agent *a = agent_of(l->engine->ctx);

        (void) conn;
        engine_reassert_done(&a->engine, l, reassert_result(name_of(l), reply), now_mono());
}

int io_call_reassert(void *ctx, Lease *l) {
        Agent *a = agent_of(ctx);
        ReassertArgs args;

        reassert_args(a->config, redis_grace_until(a, l->name->name), l, &args);
        /* Redis lost what it had, the names index with it: the name's next
         * renewal writes its entry again. */
        l->name->io_indexed = 0;
        return script_call(a, SCRIPT_REASSERT, l->name->name, reassert_reply, l, N_REASSERT_ARGS, args.argv, NULL);
}

/* ---- An operator's drain --------------------------------------------------------- */

int io_call_drain(Agent *a, const char *name, bool on, uid_t uid, const char *user, const char *reason,
                  redis_reply_cb cb, void *userdata) {
        CommonArgs c;

        engine_common_args(a, name, uid, false, &c);
        return script_call(a, SCRIPT_DRAIN, name, cb, userdata, N_DRAIN_ARGS,
                           (const char *[N_DRAIN_ARGS]) {
                                   [ARG_DRAIN_ON] = on ? "1" : "0", [ARG_DRAIN_HOST] = a->config->host_id,
                                   [ARG_DRAIN_UID] = c.uid, [ARG_DRAIN_USER] = user, [ARG_DRAIN_REASON] = reason,
                                   [ARG_DRAIN_GRACE_UNTIL_MS] = c.grace, [ARG_DRAIN_IDLE_MS] = c.idle,
                           },
                           NULL);
}

int io_call_limit(Agent *a, const char *name, uint32_t n, uid_t uid, const char *user, const char *reason,
                  redis_reply_cb cb, void *userdata) {
        char slots[16];
        CommonArgs c;

        engine_common_args(a, name, uid, false, &c);
        snprintf(slots, sizeof(slots), "%" PRIu32, n);
        return script_call(a, SCRIPT_LIMIT, name, cb, userdata, N_LIMIT_ARGS,
                           (const char *[N_LIMIT_ARGS]) {
                                   [ARG_LIMIT_N] = slots, [ARG_LIMIT_HOST] = a->config->host_id,
                                   [ARG_LIMIT_UID] = c.uid, [ARG_LIMIT_USER] = user, [ARG_LIMIT_REASON] = reason,
                                   [ARG_LIMIT_GRACE_UNTIL_MS] = c.grace, [ARG_LIMIT_IDLE_MS] = c.idle,
                           },
                           NULL);
}

/* ---- An operator's revoke -------------------------------------------------------- */

int io_call_revoke(Agent *a, const char *name, const char *lease, uid_t uid, const char *user, const char *reason,
                   const char *which, bool at_once, redis_reply_cb cb, void *userdata) {
        CommonArgs c;

        engine_common_args(a, name, uid, false, &c);
        return script_call(a, SCRIPT_REVOKE, name, cb, userdata, N_REVOKE_ARGS,
                           (const char *[N_REVOKE_ARGS]) {
                                   [ARG_REVOKE_LEASE] = lease, [ARG_REVOKE_HOST] = a->config->host_id,
                                   [ARG_REVOKE_UID] = c.uid, [ARG_REVOKE_USER] = user, [ARG_REVOKE_REASON] = reason,
                                   [ARG_REVOKE_GRACE_UNTIL_MS] = c.grace, [ARG_REVOKE_IDLE_MS] = c.idle,
                                   [ARG_REVOKE_WAITERS] = which, [ARG_REVOKE_NOW] = at_once ? "1" : "0",
                           },
                           NULL);
}

/* ---- This host's index ---------------------------------------------------------- */

void io_index(void *ctx, const Lease *l, bool add) {
        Agent *a = agent_of(ctx);
        char value[ENGINE_INDEX_VALUE_MAX];

        if (!add) {
                (void) redis_key_command(a, NULL, NULL, 3, (const char *[]) { "HDEL", a->host_key, l->id });
                return;
        }
        engine_index_value(l, value);
        (void) redis_key_command(a, NULL, NULL, 4, (const char *[]) { "HSET", a->host_key, l->id, value });
        /* Its TTL as at a renewal, at most once a renewal period: not a
         * command more a grant (an HSET that made the key gives it none;
         * the next renewal's look does, and finds it there). */
        host_index_keep(a);
        /* A name's first lease here: in the names index at once, not at the
         * next renewal. */
        if (l->name->n_held + l->name->n_waiting <= 1)
                index_name(a, l->name, l->uid, l->host_held, false);
}

/* ---- Wake-ups ------------------------------------------------------------------- */

/* Subscribed on the pub/sub connection of the name's shard (sharded in a
 * Cluster); again whenever a subscription connection or the map changed. */
void io_name_waiting(void *ctx, Name *n) {
        Agent *a = agent_of(ctx);
        RedisIo *io = a->redis_io;
        char channel[IDENT_MAX_LEN + NAME_MAX_LEN + 16];
        Shard *sh;
        int r;

        if (!io)
                return;         /* stopped: the agent exits */
        if (n->io_generation == io->sub_generation)
                return;
        sh = shard_of_name(io, n->name);
        if (!sh || !sh->sub_ready)
                return;
        snprintf(channel, sizeof(channel), "%s:{%s}:wake", a->config->key_prefix, n->name);
        r = io->topo->sharded ? redis_conn_ssubscribe(sh->sub, channel) : redis_conn_subscribe(sh->sub, channel);
        if (r >= 0)
                n->io_generation = io->sub_generation;
}

void engine_subscribe_all(RedisIo *io) {
        for (Name *n = io->agent->engine.names; n; n = n->all_next)
                if (n->n_waiting > 0 || n->n_held > 0)
                        io_name_waiting(io->agent, n);
        engine_watch(io);
}

/* The pattern subscribed to on the pub/sub connection there is now. */
static bool watch_on(const RedisIo *io) {
        return io->watch_subscribed && io->watch_generation == io->sub_generation;
}

void engine_watch(RedisIo *io) {
        Agent *a = io->agent;
        char pattern[IDENT_MAX_LEN + 16];
        Shard *sh = io->shards[0];
        bool on = watch_on(io);

        /* In a Cluster each name's wake-ups go to its own node (SPUBLISH),
         * and SSUBSCRIBE takes no pattern: status --watch redraws other
         * names on its own timer there. */
        if (io->topo->sharded || !sh || !sh->sub_ready || on == io->watch_all || io->watch_refused)
                return;
        snprintf(pattern, sizeof(pattern), "%s:{*}:wake", a->config->key_prefix);
        if (redis_conn_psubscribe(sh->sub, pattern, io->watch_all) >= 0) {
                io->watch_subscribed = io->watch_all;
                io->watch_generation = io->sub_generation;
        }
}

/* Redis answers a refused subscription with an error that no callback
 * waits for on a pub/sub connection, and hiredis closes the connection
 * then: a pattern the Redis user may not have is not asked for again, or
 * every watch would cut this host's wake-ups. */
void engine_sub_lost(Shard *sh, const char *why) {
        RedisIo *io = sh->io;

        if (!watch_on(io) || !why || !strneq(why, "NOPERM", 6))
                return;
        io->watch_refused = true;
        log_warning("Redis refused the subscription to every name's wake-ups (%s:{*}:wake): %s. fleetsem status "
                    "--watch draws other hosts' changes of names no job here waits for every 10 s only; the agent's "
                    "Redis user needs &%s:{*}:wake (fleetsem.conf(5), REDIS USERS). Not asked again until the agent "
                    "restarts.", io->agent->config->key_prefix, why, io->agent->config->key_prefix);
}

void engine_wake_message(RedisConn *conn, const RedisReply *reply, void *userdata) {
        RedisIo *io = userdata;
        Agent *a = io->agent;
        char kind[16], channel[IDENT_MAX_LEN + NAME_MAX_LEN + 16], name[NAME_MAX_LEN + 1];
        char payload[ENGINE_GRANTS_MAX * 80] = "";
        const char *open, *close;

        (void) conn;
        if (reply && redis_reply_array_len(reply) == 4 && redis_reply_array_string(reply, 0, kind, sizeof(kind)) >= 0 &&
            streq(kind, "pmessage")) {
                a->fleet_changed(a);    /* (any name's: who watches draws it again) */
                return;
        }
        if (!reply || redis_reply_array_len(reply) != 3 ||
            redis_reply_array_string(reply, 0, kind, sizeof(kind)) < 0 ||
            redis_reply_array_string(reply, 1, channel, sizeof(channel)) < 0)
                return;
        /* "subscribe" too: a release may have come before the subscription.
         * In a Cluster, "smessage" and "ssubscribe". */
        if (!streq(kind, "message") && !streq(kind, "subscribe") && !streq(kind, "smessage") &&
            !streq(kind, "ssubscribe"))
                return;
        open = strchr(channel, '{');
        close = strrchr(channel, '}');
        if (!open || !close || close <= open + 1 || (size_t) (close - open - 1) > NAME_MAX_LEN)
                return;
        memcpy(name, open + 1, (size_t) (close - open - 1));
        name[close - open - 1] = '\0';
        if ((streq(kind, "message") || streq(kind, "smessage")) &&
            redis_reply_array_string(reply, 2, payload, sizeof(payload)) < 0)
                payload[0] = '\0';
        engine_wake(&a->engine, name, payload, now_mono());
}

