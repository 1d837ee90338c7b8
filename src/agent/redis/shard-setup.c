/* SPDX-License-Identifier: MIT */
/* A shard's connections made, and its command connection set up (AUTH,
 * SELECT, the library's version asked, and the library loaded when it is
 * missing or older (shard-library.c), ROLE where a failover may have
 * replaced it, INFO, then the epoch that tells a Redis that lost its
 * state) until the shard is ready (shard.c). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "lua-keys.h"
#include "lua-args.h"
#include "redis-layer.h"
#include "hash-slot.h"
#include "shard-internal.h"

#define FAILOVER_GRACE_WAIT (500 * USEC_PER_MSEC)       /* grace after a failover, grants confirmed by WAIT, at least */

/* ---- Set-up --------------------------------------------------------------------- */

/* The marker of a newer data model than this agent's, or one it cannot
 * read (epoch.lua): nothing granted there; connected to again after the
 * backoff, so that the marker's removal (or this agent's upgrade) is seen
 * within 2 s. Said once, and in status. */
static void model_refuse(Shard *sh, const char *marker) {
        char why[sizeof(sh->model_refused)];
        size_t n = strspn(marker, "0123456789"), v = n > 0 && marker[n] == ' ' ? strspn(marker + n + 1, "0123456789.") : 0;

        if (n > 0 && n <= 9 && v > 0 && v <= 15 && marker[n + 1 + v] == '\0')
                snprintf(why, sizeof(why), "Redis at %s holds fleetsem data model %.*s (fleetsem >= %s); this agent "
                         "speaks %d: upgrade this agent; see fleetsemd(8) UPGRADING", sh->name, (int) n, marker,
                         marker + n + 1, DATA_MODEL);
        else
                snprintf(why, sizeof(why), "Redis at %s holds a fleetsem data model marker this agent cannot read "
                         "(%s:" KEY_MODEL "); this agent speaks %d: upgrade this agent; see fleetsemd(8) UPGRADING", sh->name,
                         sh->io->agent->config->key_prefix, DATA_MODEL);
        shard_refuse(sh, sh->model_refused, sizeof(sh->model_refused), "data-model", why);
}

/* The epoch: "ID GRACE_UNTIL_MS [RUN_ID]" in P:epoch (in a Cluster one per
 * master, P:epoch:{TAG} in the first hash slot it owns), made by the first
 * agent that finds none. An id other than the one this agent knew means
 * Redis lost its state since (restarted empty, a failover that lost
 * writes). The grace lasts until Redis has been up for one lease: holders
 * from before are re-asserted or told they lost their slot by then. */
static void epoch_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Shard *sh = userdata;
        char value[160], id[LEASE_ID_LEN + 1];
        long long created = -1, now_ms = -1;
        uint64_t grace_until = 0;
        const char *why;
        bool reset;
        int n = 0;

        if (!reply || conn != sh->cmd)
                return;
        if (!redis_reply_error(reply) && redis_reply_array_len(reply) == 3 &&
            redis_reply_array_integer(reply, 0, &created) >= 0 && created == 4) {
                if (redis_reply_array_string(reply, 1, value, sizeof(value)) < 0)
                        value[0] = '\0';       /* (too long: unreadable) */
                model_refuse(sh, value);
                return;
        }
        if (sh->model_refused[0]) {
                log_notice("Redis at %s holds this agent's data model (%d) again.", sh->name, DATA_MODEL);
                sh->model_refused[0] = '\0';
        }
        if (redis_reply_error(reply) || redis_reply_array_len(reply) != 3 ||
            redis_reply_array_integer(reply, 0, &created) < 0 ||
            redis_reply_array_string(reply, 1, value, sizeof(value)) < 0 ||
            redis_reply_array_integer(reply, 2, &now_ms) < 0 || now_ms < 0 ||
            strchr(value, '-') || sscanf(value, "%32[0-9a-f] %" SCNu64 "%n", id, &grace_until, &n) != 2 ||
            (value[n] != '\0' && (value[n] != ' ' || strspn(value + n + 1, "0123456789abcdef") != strlen(value + n + 1))) ||
            !lease_id_is_valid(id)) {
                shard_down(sh, -EBADMSG, redis_reply_error(reply) ?: "unexpected reply to the epoch script");
                return;
        }
        reset = created >= 1 || (sh->epoch[0] && !streq(sh->epoch, id));
        if (created == 3)
                log_warning("Redis at %s holds older state than this agent last saw (epoch %s): a failover back to a "
                            "master that had not caught up, data restored from a copy, or two resets close together; "
                            "new epoch %s.", sh->name, sh->epoch, id);
        else if (reset)
                log_full(sh->epoch[0] ? LOG_WARNING : LOG_INFO, "Redis at %s %s (epoch %s)%s.", sh->name,
                         sh->epoch[0] ? "lost its state since this agent last saw it" : "holds no fleetsem state yet", id,
                         sh->epoch[0] ? "" : "; a new Redis declared empty before the first agent (fleetsem redis-init) "
                                             "grants at once");
        /* 2: the epoch named another master; 1: there was none, which is
         * news to an agent that knew one; 3: it was older than the one
         * this agent knew (a reset too); else this agent knows no better
         * than that Redis' state is new. */
        why = created == 2 ? GRACE_WHY_FAILOVER
              : sh->epoch[0] && (created == 1 || !streq(sh->epoch, id)) ? GRACE_WHY_RESET
              : !sh->epoch[0] ? GRACE_WHY_NEW : NULL;
        memcpy(sh->epoch, id, sizeof(sh->epoch));
        sh->grace_until_ms = grace_until;
        shard_ready(sh, reset, grace_until > (uint64_t) now_ms ? (grace_until - (uint64_t) now_ms) * USEC_PER_MSEC : 0,
                    why);
}

/* FCALL of the epoch script, its library looked at just before;
 * the data model marker beside the epoch key (P:epoch… → P:model…). */
static int epoch_send(Shard *sh, const char *key, const char *id, const char *grace, const char *failover) {
        RedisIo *io = sh->io;
        const char *prefix = io->agent->config->key_prefix;
        char known_until[24] = "", model_key[IDENT_MAX_LEN + 32];

        if (sh->epoch[0])
                snprintf(known_until, sizeof(known_until), "%" PRIu64, sh->grace_until_ms);
        if (!strneq(key, prefix, strlen(prefix)) || !strneq(key + strlen(prefix), ":" KEY_EPOCH, strlen(":" KEY_EPOCH)))
                return -EINVAL;
        snprintf(model_key, sizeof(model_key), "%s:" KEY_MODEL "%s", prefix, key + strlen(prefix) + strlen(":" KEY_EPOCH));

        enum { HEAD = 5 };      /* FCALL FUNCTION 2 KEY MODEL_KEY */
        const char *argv[HEAD + N_EPOCH_ARGS] = {
                "FCALL", lua_function[SCRIPT_EPOCH], "2", key, model_key,
                [HEAD + ARG_EPOCH_ID] = id, [HEAD + ARG_EPOCH_GRACE_MS] = grace,
                [HEAD + ARG_EPOCH_MASTER_ID] = io->topo->failover ? sh->master_id : "",
                [HEAD + ARG_EPOCH_FAILOVER_GRACE_MS] = failover,
                [HEAD + ARG_EPOCH_KNOWN_ID] = sh->epoch, [HEAD + ARG_EPOCH_KNOWN_GRACE_UNTIL_MS] = known_until,
                [HEAD + ARG_EPOCH_REPLID_FRESH] = sh->replid_fresh ? "1" : "0",
                [HEAD + ARG_EPOCH_MODEL] = DATA_MODEL_MARKER,
        };

        return redis_conn_command(sh->cmd, epoch_reply, sh, ELEMENTSOF(argv), argv, NULL);
}

/* info_hex40: the 40 hex digits after FIELD (with its newline before it)
 * in an INFO reply, into out[0..40]. */
static int info_hex40(const char *s, size_t len, const char *field, char out[static 41]) {
        size_t n = strlen(field);
        const char *p = memmem(s, len, field, n);

        if (!p || (size_t) (s + len - (p + n)) < 40 || strspn(p + n, "0123456789abcdef") < 40)
                return -EBADMSG;
        memcpy(out, p + n, 40);
        out[40] = '\0';
        return 0;
}

/* A server without a replication id (not Redis 6.2 or later, nor Valkey)
 * is named by its run id alone: a failover back to it with old data is
 * then no reset. */
int master_id_parse(const char *s, size_t len, char ret[static 81]) {
        ret[0] = '\0';
        if (info_hex40(s, len, "\nrun_id:", ret) < 0) {
                ret[0] = '\0';
                return -EBADMSG;
        }
        return info_hex40(s, len, "\nmaster_replid:", ret + 40) < 0 ? -ENODATA : 0;
}

/* maxmemory_policy from an INFO reply (its memory section) into
 * sh->policy, and said up when it is news: "?" when the reply has none
 * (an error, a server that does not say), which counts as evicting. */
static void policy_parse(Shard *sh, const RedisReply *reply) {
        char policy[REDIS_POLICY_MAX] = "?";
        const char *s, *p;
        size_t len, n;

        if (redis_reply_string(reply, &s, &len) >= 0 && (p = memmem(s, len, "\nmaxmemory_policy:", 18))) {
                p += 18;
                n = 0;
                while (p + n < s + len && n < sizeof(policy) - 1 && strchr("abcdefghijklmnopqrstuvwxyz-", p[n]) &&
                       p[n] != '\0')
                        n++;
                /* The whole value, up to its line's end, or nothing. */
                if (n > 0 && p + n < s + len && (p[n] == '\r' || p[n] == '\n')) {
                        memcpy(policy, p, n);
                        policy[n] = '\0';
                }
        }
        if (streq(policy, sh->policy))
                return;
        memcpy(sh->policy, policy, sizeof(policy));
        sh->io->ev.gate_changed(sh);
}

bool shard_evicts(const Shard *sh) {
        return sh->policy[0] && !streq(sh->policy, SHARD_POLICY_SAFE);
}

static void policy_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Shard *sh = userdata;

        if (!reply || conn != sh->cmd)
                return;
        sh->policy_inflight = false;
        policy_parse(sh, reply);
}


void shard_policy_refresh(Shard *sh, usec_t every, usec_t now) {
        if (sh->state != REDIS_READY || sh->policy_inflight || now - sh->policy_asked < every)
                return;
        if (redis_conn_command(sh->cmd, policy_reply, sh, 2, (const char *[]) { "INFO", "memory" }, NULL) < 0)
                return;
        sh->policy_inflight = true;
        sh->policy_asked = now;
}

static void info_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Shard *sh = userdata;
        RedisIo *io = sh->io;
        const Config *config = io->agent->config;
        const char *s, *p;
        size_t len;
        long long uptime = 0;
        uint64_t ttl_ms = config->lease_ttl / USEC_PER_MSEC, grace_ms, failover_ms;
        char key[LEASE_ID_LEN + 1 + IDENT_MAX_LEN + 16], id[LEASE_ID_LEN + 1], grace[24], failover[24];
        int r, first;

        if (!reply || conn != sh->cmd)
                return;
        /* Known before the shard is up: nothing is granted on a server
         * that may evict before its policy was read. */
        sh->policy_asked = now_mono();
        policy_parse(sh, reply);
        sh->master_id[0] = '\0';
        sh->replid_fresh = false;
        if (redis_reply_string(reply, &s, &len) >= 0) {
                char replid2[41];

                if ((p = memmem(s, len, "uptime_in_seconds:", 18)))
                        uptime = strtoll(p + 18, NULL, 10);
                if (master_id_parse(s, len, sh->master_id) == -ENODATA && io->topo->failover)
                        log_warning("Redis at %s gives no replication id in INFO: a failover back to it with old data "
                                    "would not be seen as one.", sh->name);
                /* A master makes a new replication id, with no history,
                 * when it creates its backlog (its first replica since it
                 * started) or drops it (repl-backlog-ttl): the same data.
                 * A promotion keeps the id it followed as the history. */
                sh->replid_fresh = info_hex40(s, len, "\nmaster_replid2:", replid2) >= 0 &&
                                   strspn(replid2, "0") == 40;
        }
        /* Whole seconds, rounded down: the grace is never too short. */
        grace_ms = uptime >= 0 && (uint64_t) uptime * 1000 < ttl_ms ? ttl_ms - (uint64_t) uptime * 1000 : 0;
        /* A master other than the one the epoch names means a failover,
         * which may have lost the last writes. With WAIT, every grant told
         * to a holder while its master had a replica is on the replica that
         * took over, with an expiry no earlier than its agent stops
         * believing in it (unless the replica missed two renewals in a
         * row); what a master without one granted is re-asserted by its
         * agent once it hears of the failover, which the topology bounds
         * (failover_heard_within). Without WAIT the failover may have lost
         * any grant: a whole lease. */
        failover_ms = config->min_replicas_acked > 0
                              ? MIN(ttl_ms, MAX(FAILOVER_GRACE_WAIT, io->topo->failover_heard_within
                                                                             ? io->topo->failover_heard_within(io)
                                                                             : 0) / USEC_PER_MSEC)
                              : ttl_ms;
        /* A new master is a failover, also when the epoch is missing,
         * which is also what a master restarted empty looks like: the
         * longer of the two (the epoch script takes the longer too when
         * the epoch names another run id: the same master restarted). In
         * a Cluster an epoch key follows its master's first slot when a
         * resharding moves it, so a missing one is a loss. */
        if (io->topo->failover)
                grace_ms = MAX(grace_ms, failover_ms);
        r = lease_id_new(id);
        if (r < 0) {
                shard_down(sh, r, "cannot make an epoch id");
                return;
        }
        first = io->topo->epoch_hash_slot(io, sh);
        if (first == -1) {
                /* Only asked (ASK) while slots move to it: its epoch is
                 * looked at once it owns one and its connection is made
                 * again. */
                sh->epoch[0] = '\0';
                sh->grace_until_ms = 0;
                shard_ready(sh, false, 0, NULL);
                return;
        }
        if (first >= 0) {
                snprintf(key, sizeof(key), KEY_EPOCH_TAG_FMT, config->key_prefix, hash_slot_tag((unsigned) first));
                sh->epoch_hash_slot = first;
        } else
                snprintf(key, sizeof(key), KEY_EPOCH_FMT, config->key_prefix);
        snprintf(grace, sizeof(grace), "%" PRIu64, grace_ms);
        snprintf(failover, sizeof(failover), "%" PRIu64, failover_ms);
        /* Under Sentinel and in a Cluster the epoch belongs to one master:
         * another one (a failover) starts a new epoch, which every agent
         * takes as a reset. */
        if (epoch_send(sh, key, id, grace, failover) < 0)
                shard_down(sh, -EIO, "cannot send commands");
}

bool shard_role_parse(Shard *sh, const RedisReply *reply) {
        const Config *config = sh->io->agent->config;
        char role[16] = "";
        int n, k;

        (void) redis_reply_array_string(reply, 0, role, sizeof(role));
        if (!streq(role, "master"))
                return false;
        n = (int) MIN(redis_reply_array_len(redis_reply_array_get(reply, 2)), (size_t) INT_MAX);
        k = MIN(n, config->min_replicas_acked);
        if (n != sh->n_replicas && config->min_replicas_acked > 0)
                log_full(sh->n_replicas < 0 ? LOG_INFO : LOG_NOTICE,
                         "Redis master %s has %d replica(s); grants are told once %d of them %s them (min_replicas_acked %d).",
                         shard_server(sh), n, k, k == 1 ? "has" : "have", config->min_replicas_acked);
        sh->n_replicas = n;
        return true;
}

static void role_refresh_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Shard *sh = userdata;

        if (!reply || conn != sh->cmd || redis_reply_error(reply))
                return;
        if (!shard_role_parse(sh, reply))
                /* Demoted (a failover it was not told of): calls fail, the
                 * map or the Sentinels are asked again. */
                shard_down(sh, -EAGAIN, "it is no master any more (ROLE)");
}

void shard_role_refresh(Shard *sh) {
        if (sh->state == REDIS_READY)
                (void) redis_conn_command(sh->cmd, role_refresh_reply, sh, 1, (const char *[]) { "ROLE" }, NULL);
}

static void info_send(Shard *sh) {
        if (redis_conn_command(sh->cmd, info_reply, sh, 2, (const char *[]) { "INFO", "default" }, NULL) < 0)
                shard_down(sh, -EIO, "cannot send commands");
}

static void role_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Shard *sh = userdata;
        char role[16] = "";

        if (!reply || conn != sh->cmd)
                return;
        (void) redis_reply_array_string(reply, 0, role, sizeof(role));
        if (!shard_role_parse(sh, reply)) {
                char why[400];

                snprintf(why, sizeof(why), "%s is not a master (ROLE says \"%s\")", shard_server(sh), role);
                shard_down(sh, -EAGAIN, why);
                return;
        }
        info_send(sh);
}

static void setup_done(Shard *sh) {
        sh->library_asked = now_mono();         /* (just asked) */
        /* What a Sentinel names, or a Cluster's map, may be stale: the
         * server itself says. */
        if (sh->io->topo->failover) {
                if (redis_conn_command(sh->cmd, role_reply, sh, 1, (const char *[]) { "ROLE" }, NULL) < 0)
                        shard_down(sh, -EIO, "cannot send commands");
                return;
        }
        info_send(sh);
}

static void shard_setup_start(Shard *sh) {
        const RedisAddress *redis = &sh->io->agent->config->redis;
        char db[16];

        setup_begin(sh, setup_done);
        if (redis->password) {
                const char *argv[3];

                setup_send(sh, "AUTH", NULL, redis_auth_argv(sh->io, argv), argv);
        }
        if (redis->db > 0) {
                snprintf(db, sizeof(db), "%u", redis->db);
                setup_send(sh, "SELECT", NULL, 2, (const char *[]) { "SELECT", db });
        }
        /* One round trip when the library is there already. */
        library_ask_version(sh);
        if (sh->setup_pending == 0)
                shard_down(sh, -EIO, "cannot send commands");
}

/* ---- Connecting ------------------------------------------------------------------ */

static void on_cmd_state(RedisConn *conn, int error, const char *message, void *userdata) {
        Shard *sh = userdata;

        if (conn != sh->cmd)
                return;
        if (error < 0) {
                /* A refused step of the set-up (AUTH, the library) says
                 * more than the connection Redis may close after it. */
                char why[sizeof(sh->error)];

                snprintf(why, sizeof(why), "%s", sh->setup_failed ? sh->error : message ? message : "");
                shard_down(sh, error, why);
                return;
        }
        shard_setup_start(sh);
}

static void on_sub_state(RedisConn *conn, int error, const char *message, void *userdata) {
        Shard *sh = userdata;
        RedisIo *io = sh->io;

        if (conn != sh->sub)
                return;
        if (error >= 0 && io->agent->config->redis.password) {
                const char *argv[3];

                if (redis_conn_command(sh->sub, redis_fire_and_forget, (void *) "AUTH", redis_auth_argv(io, argv),
                                       argv, NULL) < 0) {
                        error = -ENOTCONN;
                        message = "cannot send AUTH";
                }
        }
        if (error < 0) {
                log_debug("Pub/sub connection to Redis at %s lost: %s", sh->name, message);
                sh->sub = NULL;
                sh->sub_ready = false;
                redis_conn_free(conn);
                io->ev.sub_lost(sh, message);
                /* (The map is asked for again on reconnection too: an
                 * SSUBSCRIBE told MOVED closes the connection, say.) */
                if (sh->cmd)
                        redis_reconnect_later(io);
                return;
        }
        redis_conn_set_message_handler(sh->sub, io->ev.wake, io);
        sh->sub_ready = true;
        io->ev.sub_ready(sh);
}

void shard_connect(Shard *sh) {
        RedisIo *io = sh->io;
        RedisAddress addr = io->topo->address(io, sh);
        int r;

        if (!sh->cmd) {
                sh->state = REDIS_CONNECTING;
                sh->setup_failed = sh->setup_raced = sh->setup_changed = false;
                sh->setup_refused = NULL;
                r = redis_conn_new(io->agent->event, &addr, REDIS_CONNECT_TIMEOUT, on_cmd_state, sh, &sh->cmd);
                if (r < 0) {
                        sh->cmd = NULL;
                        shard_down(sh, r, NULL);
                        return;
                }
        }
        if (!sh->sub) {
                r = redis_conn_new(io->agent->event, &addr, REDIS_CONNECT_TIMEOUT, on_sub_state, sh, &sh->sub);
                if (r < 0) {
                        sh->sub = NULL;
                        redis_reconnect_later(io);
                }
        }
}

/* Connects the shards whose backoff is over; for one still in its
 * backoff the reconnect timer is armed for when it ends. Without that, a
 * connect asked for early (under Sentinel: a quorum that named the master
 * during the backoff) would leave the shard down for good. */
void shards_connect_due(RedisIo *io) {
        usec_t now = now_mono();

        for (size_t i = 0; i < io->n_shards; i++) {
                Shard *sh = io->shards[i];

                if (!io->topo->shard_counts(io, sh))
                        continue;
                if (now >= sh->retry_at)
                        shard_connect(sh);
                else
                        redis_reconnect_in(io, sh->retry_at - now);
        }
}
