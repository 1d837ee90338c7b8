/* SPDX-License-Identifier: MIT */
/* cluster://: a Redis Cluster's masters, one shard each, and the map of
 * which owns which hash slots: CLUSTER SLOTS, asked of a master that is up,
 * or of the nodes the URL names while none is. Asked again after MOVED, a
 * master gone, and every tick. Only nodes inside cluster_allow (or the
 * seeds' networks) are connected to. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "lua-keys.h"
#include "lua-args.h"
#include "peers.h"
#include "redis-layer.h"
#include "hash-slot.h"

#define SLOT_NONE UINT16_MAX
static_assert(SHARDS_MAX < SLOT_NONE, "a shard's place in the table fits a hash slot's entry");

struct Topology {
        uint16_t hash_slot_shard[HASH_SLOTS];       /* hash slot → its shard, SLOT_NONE unknown */
        bool map_known;
        unsigned map_pass;              /* counts the maps read */
        bool map_inflight;
        RedisConn *map_query;           /* a node asked for the map while no shard is up */
        unsigned map_next;              /* … which node next */
        unsigned map_failed;            /* … how many failed in a row */
        sd_event_source *map_source;    /* ask for the map again, soon */
        char refused[280];              /* the last node not connected to: outside cluster_allow */
};

static void map_refresh_soon(RedisIo *io) {
        int r;

        if (!io->topo_state->map_source)
                return;
        r = sd_event_source_set_enabled(io->topo_state->map_source, SD_EVENT_ONESHOT);
        if (r < 0)
                redis_io_fatal(io, r, "arm the Cluster map's refresh");
}

/* A node outside cluster_allow (or the seeds' networks) is never
 * connected to: whoever answers at an address a peer names would get the
 * password. Over TLS (cluster+tls://) the node's certificate is what
 * proves it, before the password goes out: any address is tried (so a new
 * master anywhere is reached), unless cluster_allow is set. Said once per
 * address in a row, and in status. */
static bool node_allowed(RedisIo *io, const char *host, uint16_t port) {
        Topology *t = io->topo_state;
        const Config *c = io->agent->config;
        char name[sizeof(t->refused)];

        if (peers_cluster_node_allowed(c, host))
                return true;
        redis_host_port_format(name, sizeof(name), host, port);
        if (!streq(name, t->refused))
                log_warning("Redis Cluster: not connecting to %s, which a node named: it is outside cluster_allow "
                            "(or, without it, the seed nodes' networks).", name);
        snprintf(t->refused, sizeof(t->refused), "%s", name);
        return false;
}

static Shard *shard_find(Shard *const *table, size_t n, const char *host, uint16_t port) {
        for (size_t i = 0; i < n; i++)
                if (table[i]->port == port && table[i]->host && streq(table[i]->host, host))
                        return table[i];
        return NULL;
}

/* The node at host:port that a redirect names: known, or new (and being
 * connected to); NULL when it cannot be (*ret_error -ENOENT: not allowed;
 * -E2BIG: the table is full; -ENOMEM). */
static Shard *shard_get(RedisIo *io, const char *host, uint16_t port, int *ret_error) {
        Shard *sh;

        *ret_error = -EINVAL;
        if (!redis_host_is_valid(host) || port == 0)
                return NULL;
        sh = shard_find(io->shards, io->n_shards, host, port);
        if (sh)
                return sh;
        if (!node_allowed(io, host, port)) {
                *ret_error = -ENOENT;
                return NULL;
        }
        *ret_error = io->n_shards >= SHARDS_MAX ? -E2BIG : -ENOMEM;
        sh = shard_new(io, host, port);
        if (!sh) {
                log_warning("Redis Cluster: not following a redirect to %s:%u: %s.", host, port,
                            *ret_error == -E2BIG ? "the agent already knows " STRINGIFY(SHARDS_MAX) " masters, its most"
                                                 : "out of memory");
                return NULL;
        }
        log_info("Redis Cluster: master %s is new to this agent; connecting.", sh->name);
        shard_connect(sh);
        return sh;
}

/* The first hash slot sh owns (its epoch key's), or -1. */
static int cluster_epoch_slot(const RedisIo *io, const Shard *sh) {
        for (unsigned s = 0; s < HASH_SLOTS; s++)
                if (io->topo_state->hash_slot_shard[s] == sh->index)
                        return (int) s;
        return -1;
}

/* A resharding moved the first slot of a master that is up, and its epoch
 * key with it: the epoch it had is written again in its new first slot,
 * so that whoever connects next finds it, not a loss, with the data model
 * marker beside it. (Where the old key went, the next agent to connect to
 * that master sees its own epoch replaced: another master's epoch there
 * is replaced, also there.) Compare-and-set (follow.lua): an epoch of the
 * same master that ends its grace as late or later stays, so an agent
 * that read the epoch before a reset others saw first never puts the
 * older one back. */
static void epochs_follow(RedisIo *io) {
        for (size_t i = 0; i < io->n_shards; i++) {
                Shard *sh = io->shards[i];
                const char *prefix = io->agent->config->key_prefix, *tag;
                char key[IDENT_MAX_LEN + 16], model_key[IDENT_MAX_LEN + 16], value[LEASE_ID_LEN + 128];
                int first;

                if (sh->state != REDIS_READY || !sh->epoch[0] || sh->epoch_hash_slot < 0)
                        continue;
                first = cluster_epoch_slot(io, sh);
                if (first < 0 || first == sh->epoch_hash_slot)
                        continue;
                tag = hash_slot_tag((unsigned) first);
                snprintf(key, sizeof(key), KEY_EPOCH_TAG_FMT, prefix, tag);
                snprintf(model_key, sizeof(model_key), KEY_MODEL_TAG_FMT, prefix, tag);
                snprintf(value, sizeof(value), "%s %" PRIu64 "%s%s", sh->epoch, sh->grace_until_ms,
                         sh->master_id[0] ? " " : "", sh->master_id);

                enum { HEAD = 5 };      /* FCALL FUNCTION 2 KEY MODEL_KEY */
                const char *argv[HEAD + N_FOLLOW_ARGS] = {
                        "FCALL", lua_function[SCRIPT_FOLLOW], "2", key, model_key,
                        [HEAD + ARG_FOLLOW_VALUE] = value, [HEAD + ARG_FOLLOW_MODEL] = DATA_MODEL_MARKER,
                };
                (void) redis_conn_command(sh->cmd, redis_fire_and_forget, (void *) "the epoch's move (follow.lua)",
                                          ELEMENTSOF(argv), argv, NULL);
                sh->epoch_hash_slot = first;
        }
}

/* A map being read: the table of its masters and which owns each hash
 * slot, built beside the one in force, which nothing here touches. The
 * masters it names that the agent knows are the same shards; those new to
 * it are made here (index UINT_MAX until the map is in force), not
 * connected yet. */
typedef struct MapBuild {
        Shard **shards;
        size_t n_shards, n_alloc;
        uint16_t owner[HASH_SLOTS];
} MapBuild;

/* A map not put in force: the masters it made go (they were never
 * connected, nothing waits on them). */
static MapBuild *map_build_free(MapBuild *b) {
        if (!b)
                return NULL;
        for (size_t i = 0; i < b->n_shards; i++)
                if (b->shards[i]->index == UINT_MAX)
                        shard_free(b->shards[i]);
        free(b->shards);
        return mfree(b);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(MapBuild *, map_build_free);

/* host:port's place in the map being read: *ret_index. -ENOENT: not
 * allowed; -E2BIG: more masters than the table holds. */
static int map_build_node(RedisIo *io, MapBuild *b, const char *host, uint16_t port, uint16_t *ret_index) {
        Shard *sh;
        int r;

        for (size_t i = 0; i < b->n_shards; i++)
                if (b->shards[i]->port == port && streq(b->shards[i]->host, host)) {
                        *ret_index = (uint16_t) i;
                        return 0;
                }
        sh = shard_find(io->shards, io->n_shards, host, port);
        if (!sh) {
                if (!node_allowed(io, host, port))
                        return -ENOENT;
                sh = shard_new_detached(io, host, port);
                if (!sh)
                        return -ENOMEM;
        }
        r = shard_table_append(&b->shards, &b->n_shards, &b->n_alloc, sh);
        if (r < 0) {
                if (sh->index == UINT_MAX)
                        shard_free(sh);
                return r;
        }
        sh->map_pass = io->topo_state->map_pass;
        *ret_index = (uint16_t) (b->n_shards - 1);
        return 0;
}

/* [[start, end, [host, port, id, …], replica…], …] → a map built. */
static int map_build(RedisIo *io, const RedisReply *reply, MapBuild *b, size_t *ret_covered) {
        size_t n = redis_reply_array_len(reply), covered = 0;
        int r;

        if (n == 0)
                return -EBADMSG;
        for (size_t i = 0; i < n; i++) {
                const RedisReply *range = redis_reply_array_get(reply, i), *node;
                long long start, end, port;
                char host[256];
                uint16_t idx;

                node = redis_reply_array_get(range, 2);
                if (redis_reply_array_len(range) < 3 || redis_reply_array_integer(range, 0, &start) < 0 ||
                    redis_reply_array_integer(range, 1, &end) < 0 || start < 0 || end < start ||
                    end >= HASH_SLOTS || redis_reply_array_len(node) < 2 ||
                    redis_reply_array_string(node, 0, host, sizeof(host)) < 0 ||
                    redis_reply_array_integer(node, 1, &port) < 0 || port < 1 || port > 65535)
                        return -EBADMSG;
                if (!redis_host_is_valid(host))
                        continue;       /* "?": a node whose address is not known yet */
                r = map_build_node(io, b, host, (uint16_t) port, &idx);
                if (r == -ENOENT)
                        continue;       /* not allowed: its slots are unreachable, as the log and status say */
                if (r < 0)
                        return r;
                for (long long s = start; s <= end; s++)
                        b->owner[s] = idx;
                covered += (size_t) (end - start + 1);
        }
        if (covered == 0)
                return -EBADMSG;
        *ret_covered = covered;
        return 0;
}

/* Whether b gives any hash slot another master than the map in force. */
static bool map_differs(const RedisIo *io, const MapBuild *b) {
        const Topology *t = io->topo_state;

        for (unsigned s = 0; s < HASH_SLOTS; s++) {
                const Shard *was = t->hash_slot_shard[s] == SLOT_NONE ? NULL : io->shards[t->hash_slot_shard[s]];
                const Shard *now = b->owner[s] == SLOT_NONE ? NULL : b->shards[b->owner[s]];

                if (was != now)
                        return true;
        }
        return false;
}

/* b in force at once, in place of the map before: each shard's place and
 * count of slots. The table before is handed back (*ret_old, *ret_n_old). */
static void map_swap(RedisIo *io, MapBuild *b, Shard ***ret_old, size_t *ret_n_old) {
        Topology *t = io->topo_state;

        *ret_old = io->shards;
        *ret_n_old = io->n_shards;
        io->shards = TAKE_PTR(b->shards);
        io->n_shards = b->n_shards;
        io->n_shards_alloc = b->n_alloc;
        b->n_shards = b->n_alloc = 0;
        memcpy(t->hash_slot_shard, b->owner, sizeof(t->hash_slot_shard));
        for (size_t i = 0; i < io->n_shards; i++) {
                Shard *sh = io->shards[i];

                if (sh->index == UINT_MAX)
                        log_info("Redis Cluster: master %s is new to this agent; connecting.", sh->name);
                sh->index = (unsigned) i;
                sh->n_hash_slots = 0;
        }
        for (unsigned slot = 0; slot < HASH_SLOTS; slot++)
                if (t->hash_slot_shard[slot] != SLOT_NONE)
                        io->shards[t->hash_slot_shard[slot]]->n_hash_slots++;
}

/* Masters of the table before that the map now in force does not name
 * (a node that moved, was replaced, or only answered an ASK): their
 * connections closed and their calls answered as if Redis went (a
 * request asks again, a renewal goes with the next round). Nodes come and
 * go over a Cluster's life; the table holds those of one map. */
static void shards_let_go(RedisIo *io, Shard **old, size_t n_old) {
        for (size_t i = 0; i < n_old; i++)
                if (old[i]->map_pass != io->topo_state->map_pass) {
                        log_info("Redis Cluster: %s is no master of the map any more; disconnecting.", old[i]->name);
                        shard_free(old[i]);
                }
}

/* The map changed: said, the epochs follow, and a word up (subscriptions
 * follow their names' slots). */
static void map_changed(RedisIo *io, size_t covered) {
        Topology *t = io->topo_state;
        size_t masters = 0;

        for (size_t i = 0; i < io->n_shards; i++)
                masters += io->shards[i]->n_hash_slots > 0;
        log_info("Redis Cluster: %zu of %u hash slots over %zu master(s)%s.", covered, HASH_SLOTS, masters,
                 t->map_known ? " (the map changed)" : "");
        epochs_follow(io);
        io->ev.layout_changed(io);
}

/* A new map: built whole beside the one in force (which stays, untouched,
 * if it cannot be), then put in force at once; only then are the masters
 * it no longer names let go, and the new ones connected (map_reply). */
static int map_apply(RedisIo *io, const RedisReply *reply) {
        Topology *t = io->topo_state;
        _cleanup_(map_build_freep) MapBuild *b = NULL;
        _cleanup_free_ Shard **old = NULL;
        size_t covered = 0, n_old;
        bool changed;
        int r;

        b = calloc(1, sizeof(MapBuild));
        if (!b)
                return -ENOMEM;
        for (unsigned s = 0; s < HASH_SLOTS; s++)
                b->owner[s] = SLOT_NONE;
        /* A new pass for each map read, used or not: a map given up on
         * leaves no shard marked as named by the one in force. */
        t->map_pass++;
        r = map_build(io, reply, b, &covered);
        if (r < 0)
                return r;
        changed = !t->map_known || map_differs(io, b);
        map_swap(io, b, &old, &n_old);
        shards_let_go(io, old, n_old);
        if (changed)
                map_changed(io, covered);
        t->map_known = true;
        t->map_failed = 0;
        return 0;
}

static void map_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        RedisIo *io = userdata;
        int r;

        (void) conn;
        io->topo_state->map_inflight = false;
        if (!reply)
                return;         /* asked again on the next tick or reconnect */
        r = map_apply(io, reply);
        if (r == -E2BIG) {
                log_warning("Redis Cluster: the map names more than " STRINGIFY(SHARDS_MAX) " masters, more than "
                            "the agent follows; the map before stays in force.");
                return;
        }
        if (r == -ENOMEM) {
                log_warning("Redis Cluster: out of memory reading the map; the map before stays in force.");
                return;
        }
        if (r < 0) {
                log_warning("Redis Cluster: unusable answer to CLUSTER SLOTS%s%s.", redis_reply_error(reply) ? ": " : "",
                            redis_reply_error(reply) ?: "");
                return;
        }
        /* New masters at once; those that went, after their backoff. */
        shards_connect_due(io);
        /* (A master that was not up may own nothing now.) */
        io->ev.maybe_up(io);
}

/* A node of the URL did not give the map. Once none of them did (a whole
 * round), and while no master is up, Redis is down for the engine
 * (requests answered unavailable, not left waiting). */
static void map_unreachable(RedisIo *io) {
        Topology *t = io->topo_state;

        if (++t->map_failed < io->agent->config->redis.n_hosts || (t->map_known && shards_any_ready(io)))
                return;
        io->ev.unreachable(io);
}

/* The node of the URL asked for the map now (or next). */
static const RedisHost *map_node(const RedisIo *io) {
        const RedisAddress *redis = &io->agent->config->redis;

        return &redis->hosts[io->topo_state->map_next % redis->n_hosts];
}

static void map_query_drop(RedisIo *io) {
        RedisConn *c = io->topo_state->map_query;

        io->topo_state->map_query = NULL;
        redis_conn_free(c);
}

/* The node asked for the map gave none: the next one, after a backoff. */
static void map_query_failed(RedisIo *io) {
        map_query_drop(io);
        io->topo_state->map_inflight = false;
        io->topo_state->map_next++;
        map_unreachable(io);
        redis_reconnect_later(io);
}

static void map_query_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        RedisIo *io = userdata;

        if (conn != io->topo_state->map_query)
                return;
        map_reply(conn, reply, io);
        if (io->topo_state->map_known) {
                map_query_drop(io);
                return;
        }
        log_warning("Redis Cluster node %s:%u did not give the map; asking the next one.", map_node(io)->host,
                    map_node(io)->port);
        map_query_failed(io);
}

static void on_map_query_state(RedisConn *conn, int error, const char *message, void *userdata) {
        RedisIo *io = userdata;
        Agent *a = io->agent;
        const RedisHost *h = map_node(io);

        if (conn != io->topo_state->map_query)
                return;
        if (error < 0) {
                snprintf(a->redis_error, sizeof(a->redis_error), "no Cluster node answered (%s:%u: %s)", h->host,
                         h->port, message ?: "");
                a->redis_error_state = "unreachable";
                log_warning("Failed to reach Redis Cluster node %s:%u: %s", h->host, h->port, message ?: "");
                map_query_failed(io);
                return;
        }
        if (a->config->redis.password) {
                const char *argv[3];

                (void) redis_conn_command(conn, redis_fire_and_forget, (void *) "AUTH", redis_auth_argv(io, argv), argv,
                                          NULL);
        }
        if (redis_conn_command(conn, map_query_reply, io, 2, (const char *[]) { "CLUSTER", "SLOTS" }, NULL) < 0)
                map_query_failed(io);
}

static void map_ask(RedisIo *io) {
        Topology *t = io->topo_state;
        const RedisHost *h;
        RedisAddress addr;

        if (t->map_inflight)
                return;
        for (size_t i = 0; i < io->n_shards; i++) {
                Shard *sh = io->shards[i];

                if (sh->state == REDIS_READY &&
                    redis_conn_command(sh->cmd, map_reply, io, 2, (const char *[]) { "CLUSTER", "SLOTS" }, NULL) >= 0) {
                        t->map_inflight = true;
                        return;
                }
        }
        /* No master up: one of the nodes the URL names. */
        h = map_node(io);
        addr = (RedisAddress) { .host = h->host, .port = h->port };
        if (redis_conn_new(io->agent->event, &addr, REDIS_CONNECT_TIMEOUT, on_map_query_state, io, &t->map_query) < 0) {
                t->map_query = NULL;
                t->map_next++;
                redis_reconnect_later(io);
                return;
        }
        t->map_inflight = true;
}

static int on_map_refresh(sd_event_source *s, void *userdata) {
        (void) s;
        map_ask(userdata);
        return 0;
}

/* ---- The topology's operations ----------------------------------------------------- */

static int cluster_start(RedisIo *io) {
        Topology *t;
        int r;

        if (!hash_slot_tag(0))
                return -ENOMEM;
        t = io->topo_state = malloc(sizeof(Topology));
        if (!t)
                return -ENOMEM;
        *t = (Topology) {};
        for (unsigned s = 0; s < HASH_SLOTS; s++)
                t->hash_slot_shard[s] = SLOT_NONE;
        r = sd_event_add_defer(io->agent->event, &t->map_source, on_map_refresh, io);
        if (r >= 0)
                r = sd_event_source_set_enabled(t->map_source, SD_EVENT_OFF);
        return r;
}

static void cluster_stop(RedisIo *io) {
        Topology *t = io->topo_state;

        if (!t)
                return;
        map_query_drop(io);
        t->map_source = sd_event_source_disable_unref(t->map_source);
        io->topo_state = mfree(t);
}

static void cluster_connect(RedisIo *io) {
        map_ask(io);            /* the masters may have changed meanwhile */
        if (!io->topo_state->map_known)
                return;         /* connected to once a node gave the map */
        shards_connect_due(io);
}

static RedisAddress cluster_address(RedisIo *io, const Shard *sh) {
        (void) io;
        return (RedisAddress) { .host = sh->host, .port = sh->port };
}

static Shard *cluster_shard_of_slot(RedisIo *io, unsigned slot) {
        uint16_t i = io->topo_state->hash_slot_shard[slot];

        return i == SLOT_NONE ? NULL : io->shards[i];
}

static Shard *cluster_redirect(RedisIo *io, unsigned slot, const char *host, uint16_t port, bool moved) {
        int r;
        Shard *to = shard_get(io, host, port, &r);

        if (to && moved) {
                /* The slot lives elsewhere now: there from now on, and the
                 * whole map asked for again. */
                io->topo_state->hash_slot_shard[slot] = (uint16_t) to->index;
                map_refresh_soon(io);
        }
        return to;
}

static void cluster_shard_up(RedisIo *io, Shard *sh, bool reset) {
        (void) io;
        (void) reset;
        log_info("Connected to Redis Cluster master %s.", sh->name);
}

static bool cluster_shard_counts(const RedisIo *io, const Shard *sh) {
        (void) io;
        return sh->n_hash_slots > 0;
}

static bool cluster_known(const RedisIo *io) {
        return io->topo_state->map_known;
}

static void cluster_tick(RedisIo *io, usec_t now) {
        Topology *t = io->topo_state;

        if (redis_conn_hangs(io, t->map_query, now)) {
                const RedisHost *h = map_node(io);
                Agent *a = io->agent;

                snprintf(a->redis_error, sizeof(a->redis_error), "Redis Cluster node %s:%u did not answer", h->host,
                         h->port);
                a->redis_error_state = "timeout";
                log_warning("%s; asking the next one.", a->redis_error);
                map_query_failed(io);
        }
        map_ask(io);            /* a failover or a resharding, seen without a MOVED */
}

static void cluster_describe(RedisIo *io, char *buf, size_t size) {
        Topology *t = io->topo_state;
        size_t up = 0, owning = 0;

        if (!t->map_known)
                return;
        for (size_t i = 0; i < io->n_shards; i++)
                if (io->shards[i]->n_hash_slots > 0) {
                        owning++;
                        up += io->shards[i]->state == REDIS_READY;
                }
        snprintf(buf, size, "%zu of %zu Cluster masters up%s%s%s", up, owning, t->refused[0] ? "; refused " : "",
                 t->refused, t->refused[0] ? " (not in cluster_allow)" : "");
}

const TopologyOps topology_cluster = {
        .sharded = true,
        .failover = true,
        .start = cluster_start,
        .stop = cluster_stop,
        .connect = cluster_connect,
        .address = cluster_address,
        .shard_of_hash_slot = cluster_shard_of_slot,
        .redirect = cluster_redirect,
        .refresh = map_refresh_soon,
        .shard_up = cluster_shard_up,
        .shard_counts = cluster_shard_counts,
        .known = cluster_known,
        .epoch_hash_slot = cluster_epoch_slot,
        .tick = cluster_tick,
        .describe = cluster_describe,
};
