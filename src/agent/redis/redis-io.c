/* SPDX-License-Identifier: MIT */
/* The agent's Redis layer put together (redis-layer.h): the topology the
 * URL names, the scripts, what the layer below reports wired to what it
 * means for the agent (Redis up or down for the engine), the tick that
 * renews and watches for a Redis that hangs, start and stop. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "lua-keys.h"
#include "redis-layer.h"

#define RENEW_ACCURACY (1 * USEC_PER_MSEC)              /* how late the renewal tick may fire */
#define POLICY_EVERY (5 * USEC_PER_SEC)                 /* each server's maxmemory-policy asked again */
#define POLICY_EVERY_EVICTING (2 * USEC_PER_SEC)        /* … while one may evict */

static const TopologyOps *topology_of(const Config *c) {
        return c->redis.cluster ? &topology_cluster : c->redis.master_name ? &topology_sentinel : &topology_single;
}

/* ---- Nothing new granted while Redis is up ------------------------------------- */

/* A server whose maxmemory-policy is not noeviction may drop a name's
 * keys at any time (their idle expiry makes volatile-* policies apply
 * too); one whose ACL refuses the check of its library (shard-setup.c)
 * may hold another text under this agent's version unseen. Nothing new is
 * granted while one of the servers that count does either. Holders keep
 * their slots (they are counted, and renewed); waiters are told, as new
 * requests are. A server's policy is asked with INFO at each connection
 * and again on the tick, its library once a renewal period. */
static void evict_text(const Shard *sh, char *buf, size_t size) {
        if (streq(sh->policy, "?"))
                snprintf(buf, size, "Redis at %s does not tell its maxmemory-policy (INFO memory), so it may evict "
                         "fleetsem's keys: nothing is granted until it tells noeviction (CONFIG SET maxmemory-policy "
                         "noeviction, and in redis.conf; its ACL must allow INFO)", sh->name);
        else
                snprintf(buf, size, "Redis at %s runs with maxmemory-policy %s, which may evict fleetsem's keys: "
                         "nothing is granted until it is noeviction (CONFIG SET maxmemory-policy noeviction, and in "
                         "redis.conf)", sh->name, sh->policy);
}

/* The first server that counts and refuses for that reason, or NULL. */
static const Shard *shard_refusing(const RedisIo *io, bool evicting) {
        for (size_t i = 0; i < io->n_shards; i++)
                if (io->topo->shard_counts(io, io->shards[i]) &&
                    (evicting ? shard_evicts(io->shards[i]) : io->shards[i]->check_refused[0] != '\0'))
                        return io->shards[i];
        return NULL;
}

static void gate_check(RedisIo *io) {
        Agent *a = io->agent;
        const Shard *evicts = shard_refusing(io, true), *unchecked = evicts ? NULL : shard_refusing(io, false);
        char text[sizeof(a->refuse_text)] = "";

        if (evicts)
                evict_text(evicts, text, sizeof(text));
        else if (unchecked)
                snprintf(text, sizeof(text), "%s", unchecked->check_refused);
        if (streq(text, a->refuse_text))
                return;
        if (a->evict_policy[0] && !evicts)
                log_notice("Redis at %s runs with maxmemory-policy " SHARD_POLICY_SAFE " now%s.", a->evict_server,
                           unchecked ? "" : ": slots are granted again");
        snprintf(a->evict_policy, sizeof(a->evict_policy), "%s", evicts ? evicts->policy : "");
        snprintf(a->evict_server, sizeof(a->evict_server), "%s", evicts ? evicts->name : "");
        snprintf(a->refuse_text, sizeof(a->refuse_text), "%s", text);
        a->refuse_state = evicts ? "eviction" : unchecked ? "NOPERM" : NULL;
        /* (The refusal of a check is said by its shard.) */
        if (evicts)
                log_warning("%s.", a->refuse_text);
        if (a->refuse_state)
                engine_fail_waiters(&a->engine, error_code_of_state(a->refuse_state), a->refuse_text, now_mono());
        a->redis_changed(a);
}

static void on_gate_changed(Shard *sh) {
        gate_check(sh->io);
}

/* How often each server's policy is asked: while one evicts, soon enough
 * that a fixed one serves again within seconds. */
static usec_t policy_every(const RedisIo *io) {
        return io->agent->evict_policy[0] ? POLICY_EVERY_EVICTING : POLICY_EVERY;
}

/* How often each server's library is asked its version and hash: once a
 * renewal period (a third of a lease). */
static usec_t library_every(const RedisIo *io) {
        return MAX(io->agent->config->lease_ttl / 3, USEC_PER_SEC);
}

/* ---- Up and down for the engine ------------------------------------------------ */

/* Shards that count: all of them must be up before Redis counts as up the
 * first time (a Cluster's masters that own hash slots). */
static bool all_shards_ready(const RedisIo *io) {
        if (!io->topo->known(io))
                return false;
        for (size_t i = 0; i < io->n_shards; i++)
                if (io->topo->shard_counts(io, io->shards[i]) && io->shards[i]->state != REDIS_READY)
                        return false;
        return true;
}

static void subscribe_again(RedisIo *io) {
        io->sub_generation++;
        engine_subscribe_all(io);
}

/* Redis is up for the engine once every shard that counts is: whatever
 * waited looks again, holders are renewed, or re-asserted after a reset.
 * A reset of any shard until then counts. */
static void redis_maybe_up(RedisIo *io, bool reset, usec_t grace, const char *why) {
        Agent *a = io->agent;

        io->up_reset = io->up_reset || reset;
        if (grace > io->up_grace) {
                io->up_grace = grace;
                io->up_why = why;
        }
        if (a->state != REDIS_READY && !all_shards_ready(io))
                return;
        reset = io->up_reset;
        grace = io->up_grace;
        why = io->up_why;
        io->up_reset = false;
        io->up_grace = 0;
        io->up_why = NULL;
        a->state = REDIS_READY;
        a->redis_error[0] = '\0';
        a->redis_error_state = "unreachable";
        /* (Re-adoption, if not done yet, starts first.) */
        a->redis_changed(a);
        engine_redis_up(&a->engine, reset, grace, why, now_mono());
        engine_subscribe_all(io);
}

/* Calls redirected to sh while it connected are sent now, unless it lost
 * its state (they were made for the state before). */
static void on_shard_ready(Shard *sh, bool reset, usec_t grace, const char *why) {
        gate_check(sh->io);
        calls_unpark(sh, !reset);
        redis_maybe_up(sh->io, reset, grace, why);
}

/* Standalone and under Sentinel a shard gone is Redis gone for the
 * engine; in a Cluster only when no shard is left up, else only the names
 * sh holds are unreachable (their calls fail, their holders are told in
 * time when renewals fail). */
static void on_shard_down(Shard *sh) {
        RedisIo *io = sh->io;
        Agent *a = io->agent;

        if (io->topo->shard_lost)
                io->topo->shard_lost(io, sh);
        if (!io->topo->sharded || a->state != REDIS_READY || !shards_any_ready(io)) {
                a->state = REDIS_DOWN;
                engine_redis_down(&a->engine, error_code_of_state(a->redis_error_state), a->redis_error, now_mono());
        }
        redis_reconnect_in(io, sh->backoff);
        a->redis_changed(a);
}

static void on_shard_disconnected(Shard *sh) {
        calls_unpark(sh, false);
}

static void on_maybe_up(RedisIo *io) {
        if (io->agent->state != REDIS_READY && shards_any_ready(io))
                redis_maybe_up(io, false, 0, NULL);
}

/* No node, no quorum: down for the engine (requests answered
 * unavailable, not left waiting). */
static void on_unreachable(RedisIo *io) {
        Agent *a = io->agent;

        if (a->state == REDIS_DOWN)
                return;
        a->state = REDIS_DOWN;
        engine_redis_down(&a->engine, error_code_of_state(a->redis_error_state), a->redis_error, now_mono());
        a->redis_changed(a);
}

/* Off the old server: holders are re-asserted on the new one. */
static void on_replaced(RedisIo *io, const char *why) {
        Agent *a = io->agent;

        if (a->state == REDIS_READY)
                engine_redis_down(&a->engine, error_code_of_state("unreachable"), why, now_mono());
        if (a->state != REDIS_DOWN)
                a->state = REDIS_CONNECTING;
        a->redis_changed(a);
}

static void on_sub_ready(Shard *sh) {
        subscribe_again(sh->io);
}

/* ---- The tick ------------------------------------------------------------------ */

static int on_reconnect(sd_event_source *s, uint64_t usec, void *userdata) {
        RedisIo *io = userdata;

        (void) s;
        (void) usec;
        io->topo->connect(io);
        return 0;
}

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        RedisIo *io = userdata;
        Agent *a = io->agent;
        usec_t now = now_mono(), next;
        int r;

        (void) usec;
        for (size_t i = 0; i < io->n_shards; i++) {
                Shard *sh = io->shards[i];

                if (redis_conn_hangs(io, sh->cmd, now)) {
                        char why[64], buf[FORMAT_DURATION_MAX];

                        snprintf(why, sizeof(why), "Redis did not answer for %s",
                                 format_duration(buf, sizeof(buf), redis_command_timeout(io)));
                        shard_down(sh, -ETIMEDOUT, why);
                }
        }
        if (io->topo->tick)
                io->topo->tick(io, now);
        for (size_t i = 0; i < io->n_shards; i++)
                if (io->topo->shard_counts(io, io->shards[i])) {
                        shard_policy_refresh(io->shards[i], policy_every(io), now);
                        shard_library_refresh(io->shards[i], library_every(io), now);
                }
        if (a->config->min_replicas_acked > 0 && io->topo->failover)
                /* How many replicas each master has (also asked after each
                 * grant), for the journal and as the count seen before. */
                for (size_t i = 0; i < io->n_shards; i++)
                        shard_role_refresh(io->shards[i]);
        next = MIN(engine_tick(&a->engine, now), policy_every(io));
        r = sd_event_source_set_time_relative(s, MIN(next, library_every(io)));
        if (r < 0)
                redis_io_fatal(io, r, "arm the renewal tick");
        return 0;
}

/* ---- Start and stop ------------------------------------------------------------ */

/* Where keys are sharded the library publishes wake-ups with SPUBLISH,
 * to the node of the name's slot only (the prelude's WAKE_COMMAND). The
 * two texts are one version: fleetsem_version returns the wake command
 * beside it, and an agent that finds the other one on its server loads its
 * own (shard-setup.c). They never take turns: a Cluster's nodes serve Cluster
 * agents only (a standalone agent cannot use one), so a server holds the
 * other text only after it changed sides. */
int library_text_new(bool sharded, char **ret) {
        static const char plain[] = LIBRARY_WAKE_LINE, spublish[] = "local WAKE_COMMAND = 'SPUBLISH'";
        const char *at = strstr(lua_library, plain);
        size_t before;
        char *text;

        if (!at)
                return -EBADMSG;
        before = sharded ? (size_t) (at - lua_library) : strlen(lua_library);
        text = malloc(strlen(lua_library) + 2);
        if (!text)
                return -ENOMEM;
        memcpy(text, lua_library, before);
        if (sharded)
                stpcpy(stpcpy(text + before, spublish), at + strlen(plain));
        else
                text[before] = '\0';
        *ret = text;
        return 0;
}

const char *library_text_error(int r) {
        return r == -EBADMSG ? "the built-in library has no line " LIBRARY_WAKE_LINE " to set the wake command in "
                               "(the build is broken)" : strerror(-r);
}

void redis_io_watch_all(Agent *a, bool on) {
        if (!a->redis_io)
                return;         /* stopped: the agent exits */
        a->redis_io->watch_all = on;
        engine_watch(a->redis_io);
}

void redis_io_reconnect(Agent *a, const char *why) {
        RedisIo *io = a->redis_io;

        /* As after a lost connection: slots kept, renewed again once the
         * connections are back (the epoch is the same: no reset). */
        if (io->topo->drop_peers)
                io->topo->drop_peers(io);
        for (size_t i = 0; i < io->n_shards; i++)
                if (io->shards[i]->state != REDIS_DOWN)
                        shard_down(io->shards[i], -ECONNRESET, why);
}

void redis_io_describe(Agent *a, char *buf, size_t size) {
        RedisIo *io = a->redis_io;

        buf[0] = '\0';
        if (io && io->topo->describe)
                io->topo->describe(io, buf, size);
}

static int timers_add(RedisIo *io) {
        sd_event *e = io->agent->event;
        int r;

        r = sd_event_add_time_relative(e, &io->reconnect_source, CLOCK_MONOTONIC, 0, 0, on_reconnect, io);
        if (r >= 0)
                r = sd_event_source_set_enabled(io->reconnect_source, SD_EVENT_OFF);
        if (r < 0)
                return r;
        /* Renewals on time to the millisecond: left to sd-event's default
         * accuracy (0), the tick may come 250 ms late on a quiet host, an
         * eighth of a 6 s lease's third. */
        r = sd_event_add_time_relative(e, &io->tick_source, CLOCK_MONOTONIC, io->agent->config->lease_ttl / 3,
                                       RENEW_ACCURACY, on_tick, io);
        if (r >= 0)
                r = sd_event_source_set_priority(io->tick_source, PRIORITY_LEASES);
        if (r >= 0)
                r = sd_event_source_set_enabled(io->tick_source, SD_EVENT_ON);
        return r;
}

int redis_io_start(Agent *a) {
        RedisIo *io;
        int r;

        snprintf(a->host_key, sizeof(a->host_key), KEY_HOST_FMT, a->config->key_prefix, a->config->host_id);
        snprintf(a->names_key, sizeof(a->names_key), KEY_NAMES_FMT, a->config->key_prefix);
        redis_address_to_string(&a->config->redis, a->redis_name, sizeof(a->redis_name));

        io = a->redis_io = calloc(1, sizeof(RedisIo));
        if (!io)
                return log_error_errno(ENOMEM, "Out of memory.");
        io->agent = a;
        io->topo = topology_of(a->config);
        io->ev = (RedisEvents) {
                .shard_ready = on_shard_ready,
                .shard_down = on_shard_down,
                .shard_disconnected = on_shard_disconnected,
                .sub_ready = on_sub_ready,
                .sub_lost = engine_sub_lost,
                .wake = engine_wake_message,
                .layout_changed = subscribe_again,
                .maybe_up = on_maybe_up,
                .unreachable = on_unreachable,
                .replaced = on_replaced,
                .gate_changed = on_gate_changed,
        };
        r = library_text_new(io->topo->sharded, &io->library_text);
        if (r < 0)
                return log_error_errno(r, "Failed to make the library's text: %s", library_text_error(r));
        r = io->topo->start(io);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the connections to Redis: %m");
        r = batcher_new(io);
        if (r >= 0)
                r = timers_add(io);
        if (r < 0)
                return log_error_errno(r, "Failed to set up timers: %m");

        a->state = REDIS_CONNECTING;
        a->redis_error_state = "unreachable";
        io->topo->connect(io);
        return 0;
}

void redis_io_stop(Agent *a) {
        RedisIo *io = a->redis_io;

        if (!io)
                return;
        a->state = REDIS_DOWN;
        io->stopping = true;            /* connections closed, not reset */
        batcher_free(io);               /* what waits hears Redis went */
        for (size_t i = 0; i < io->n_shards; i++)
                shard_free(io->shards[i]);
        io->n_shards = io->n_shards_alloc = 0;
        io->shards = mfree(io->shards);
        io->topo->stop(io);
        sd_event_source_disable_unref(io->reconnect_source);
        sd_event_source_disable_unref(io->tick_source);
        free(io->library_text);
        a->redis_io = mfree(io);
}
