/* SPDX-License-Identifier: MIT */
/* sentinel://: the master that a quorum of the Sentinels name. Two kinds
 * of connection to the Sentinels: one that stays, subscribed to
 * +switch-master, so a failover is heard of the moment it is decided;
 * and one to each, made to ask for the master's address whenever it is not
 * known or one of them says it moved. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "redis-layer.h"

/* Asking every Sentinel of the URL for the master. The address is taken
 * once a quorum of them (sentinel_quorum, by default a majority) name the
 * same: one Sentinel, or whoever answers at its address, names nothing
 * alone. Asked when no master is known, and when one Sentinel says
 * +switch-master: the agent moves only when the quorum confirms it. */
typedef struct SentinelQuery {
        RedisIo *io;
        RedisConn *conn;
        char vote[280];                 /* "HOST PORT" it named; "" none */
        bool done;
} SentinelQuery;

struct Topology {
        RedisConn *watch;               /* subscribed to +switch-master */
        unsigned watch_next;            /* which Sentinel watches next */
        SentinelQuery q[REDIS_HOSTS_MAX];
        size_t q_pending;               /* of the round under way; 0: none */
        RedisAddress master;            /* host and port only */
};

static const RedisHost *sentinel_host(const RedisIo *io, unsigned i) {
        return &io->agent->config->redis.hosts[i % io->agent->config->redis.n_hosts];
}

static void conn_drop(RedisConn **c) {
        RedisConn *old = *c;

        /* Detached first: freeing runs its callbacks with NULL. */
        *c = NULL;
        redis_conn_free(old);
}

/* Forgets the master: the next connection asks the Sentinels again. */
static void master_forget(RedisIo *io) {
        io->topo_state->master.host = mfree(io->topo_state->master.host);
}

static int master_set(RedisIo *io, const char *host, const char *port_s) {
        Topology *t = io->topo_state;
        uint64_t port;

        if (parse_uint64(port_s, 1, 65535, &port) < 0 || !redis_host_is_valid(host))
                return -EBADMSG;
        free(t->master.host);
        t->master.host = strdup(host);
        if (!t->master.host)
                return -ENOMEM;
        t->master.port = (uint16_t) port;
        redis_host_port_format(io->agent->master_name, sizeof(io->agent->master_name), host, t->master.port);
        return 0;
}

static void sentinel_auth(RedisIo *io, RedisConn *c) {
        const char *pw = io->agent->config->redis.sentinel_password;

        if (pw)
                (void) redis_conn_command(c, redis_fire_and_forget, (void *) "AUTH (Sentinel)", 2,
                                          (const char *[]) { "AUTH", pw }, NULL);
}

static void sentinel_watch(RedisIo *io);
static void sentinel_ask(RedisIo *io);

static void on_switch_master(RedisConn *conn, const RedisReply *reply, void *userdata) {
        RedisIo *io = userdata;
        Topology *t = io->topo_state;
        char kind[16], msg[600], name[NAME_MAX_LEN + 1], oldh[256], oldp[8], newh[256], newp[8];
        const RedisHost *h = sentinel_host(io, t->watch_next);

        if (conn != t->watch)
                return;
        if (!reply) {
                char why[512];
                const char *e = redis_conn_error(conn, why, sizeof(why));

                log_warning("Lost the connection to Sentinel %s:%u%s%s; watching through the next one.", h->host,
                            h->port, e[0] ? ": " : "", e);
                conn_drop(&t->watch);
                t->watch_next++;
                sentinel_watch(io);
                return;
        }
        if (redis_reply_array_len(reply) != 3 || redis_reply_array_string(reply, 0, kind, sizeof(kind)) < 0 ||
            !streq(kind, "message") || redis_reply_array_string(reply, 2, msg, sizeof(msg)) < 0)
                return;
        /* "<master-name> <old-ip> <old-port> <new-ip> <new-port>" */
        if (sscanf(msg, "%200s %255s %7s %255s %7s", name, oldh, oldp, newh, newp) != 5 ||
            !streq(name, io->agent->config->redis.master_name))
                return;
        log_notice("Sentinel %s:%u says the master %s moved from %s:%s to %s:%s; asking every Sentinel.", h->host,
                   h->port, name, oldh, oldp, newh, newp);
        sentinel_ask(io);
}

static void on_watch_state(RedisConn *conn, int error, const char *message, void *userdata) {
        RedisIo *io = userdata;
        Topology *t = io->topo_state;

        if (conn != t->watch)
                return;
        if (error < 0) {
                log_warning("Failed to reach Sentinel %s:%u: %s", sentinel_host(io, t->watch_next)->host,
                            sentinel_host(io, t->watch_next)->port, message);
                conn_drop(&t->watch);
                t->watch_next++;
                return;         /* watched again on the next reconnect or tick */
        }
        sentinel_auth(io, conn);
        redis_conn_set_message_handler(conn, on_switch_master, io);
        (void) redis_conn_subscribe(conn, "+switch-master");
}

static void sentinel_watch(RedisIo *io) {
        Topology *t = io->topo_state;
        const RedisHost *h = sentinel_host(io, t->watch_next);
        RedisAddress addr = { .host = h->host, .port = h->port };

        if (t->watch)
                return;
        if (redis_conn_new(io->agent->event, &addr, REDIS_CONNECT_TIMEOUT, on_watch_state, io, &t->watch) < 0) {
                t->watch = NULL;
                t->watch_next++;
        }
}

static unsigned sentinel_quorum(const RedisIo *io) {
        const Config *c = io->agent->config;

        return c->sentinel_quorum ?: (unsigned) (c->redis.n_hosts / 2 + 1);
}

static void sentinel_connect(RedisIo *io);

/* The quorum's master differs from the one followed: off the old one (both
 * connections) and onto the new one at once. */
static void master_move(RedisIo *io, const char *host, const char *port, size_t votes) {
        Agent *a = io->agent;
        bool had = io->topo_state->master.host;
        char old[sizeof(a->master_name)];

        snprintf(old, sizeof(old), "%s", a->master_name);
        if (master_set(io, host, port) < 0)
                return;
        if (had) {
                log_warning("Sentinel: %zu of %zu Sentinels name %s the master of %s, no more %s; following it (a "
                            "failover counts as a reset: holders are re-asserted, and nobody is granted anything for a "
                            "while).", votes, a->config->redis.n_hosts, a->master_name, a->config->redis.master_name, old);
                shard_disconnect(io->shards[0], REDIS_CONNECTING);
                io->shards[0]->backoff = 0;
                io->shards[0]->retry_at = 0;
                io->ev.replaced(io, "the master changed (Sentinel failover)");
        } else
                log_info("Sentinel: %zu of %zu Sentinels name %s the master of %s.", votes, a->config->redis.n_hosts,
                         a->master_name, a->config->redis.master_name);
        io->backoff = 0;
        sentinel_connect(io);
}

static void sentinel_tally(RedisIo *io) {
        Topology *t = io->topo_state;
        const Config *c = io->agent->config;
        size_t n = c->redis.n_hosts, best = 0, answered = 0;
        const char *winner = NULL;
        char host[256], port[8];
        uint64_t p;

        for (size_t i = 0; i < n; i++) {
                size_t k = 0;

                if (!t->q[i].vote[0])
                        continue;
                answered++;
                for (size_t j = 0; j < n; j++)
                        k += streq(t->q[i].vote, t->q[j].vote);
                if (k > best) {
                        best = k;
                        winner = t->q[i].vote;
                }
        }
        if (!winner || best < sentinel_quorum(io) || sscanf(winner, "%255s %7s", host, port) != 2) {
                log_warning("Sentinel: no quorum names the master of %s: %zu of %zu Sentinels answered, at most %zu "
                            "agree%s%s (quorum %u).", c->redis.master_name, answered, n, best,
                            winner ? " on " : "", winner ?: "", sentinel_quorum(io));
                if (!t->master.host)
                        shard_down(io->shards[0], -EHOSTUNREACH, "no quorum of Sentinels named the master");
                return;
        }
        if (t->master.host && streq(host, t->master.host) && parse_uint64(port, 1, 65535, &p) >= 0 &&
            p == t->master.port)
                return;         /* the quorum names the master followed */
        master_move(io, host, port, best);
}

static void sentinel_vote(SentinelQuery *q, const char *vote) {
        Topology *t = q->io->topo_state;

        if (q->done)
                return;
        q->done = true;
        snprintf(q->vote, sizeof(q->vote), "%s", vote);
        conn_drop(&q->conn);
        if (--t->q_pending == 0)
                sentinel_tally(q->io);
}

static const RedisHost *query_host(const SentinelQuery *q) {
        return &q->io->agent->config->redis.hosts[q - q->io->topo_state->q];
}

static void sentinel_master_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        SentinelQuery *q = userdata;
        char host[256], port[8], vote[sizeof(q->vote)];
        uint64_t p;

        if (conn != q->conn)
                return;
        if (!reply || redis_reply_error(reply) || redis_reply_array_len(reply) != 2 ||
            redis_reply_array_string(reply, 0, host, sizeof(host)) < 0 ||
            redis_reply_array_string(reply, 1, port, sizeof(port)) < 0 || parse_uint64(port, 1, 65535, &p) < 0 ||
            !redis_host_is_valid(host)) {
                char why[512];
                const char *e = reply ? redis_reply_error(reply) : redis_conn_error(conn, why, sizeof(why));

                log_warning("Sentinel %s:%u does not name master %s%s%s.", query_host(q)->host, query_host(q)->port,
                            q->io->agent->config->redis.master_name, e && e[0] ? ": " : "", e ?: "");
                sentinel_vote(q, "");
                return;
        }
        snprintf(vote, sizeof(vote), "%s %s", host, port);
        sentinel_vote(q, vote);
}

static void on_query_state(RedisConn *conn, int error, const char *message, void *userdata) {
        SentinelQuery *q = userdata;

        if (conn != q->conn)
                return;
        if (error < 0) {
                log_warning("Failed to reach Sentinel %s:%u: %s", query_host(q)->host, query_host(q)->port, message);
                sentinel_vote(q, "");
                return;
        }
        sentinel_auth(q->io, conn);
        if (redis_conn_command(conn, sentinel_master_reply, q, 3,
                               (const char *[]) { "SENTINEL", "get-master-addr-by-name",
                                                  q->io->agent->config->redis.master_name },
                               NULL) < 0)
                sentinel_vote(q, "");
}

static void sentinel_ask(RedisIo *io) {
        Topology *t = io->topo_state;
        size_t n = io->agent->config->redis.n_hosts;

        if (t->q_pending > 0)
                return;         /* a round is under way */
        t->q_pending = n;
        for (size_t i = 0; i < n; i++)
                t->q[i] = (SentinelQuery) { .io = io };
        for (size_t i = 0; i < n; i++) {
                SentinelQuery *q = &t->q[i];
                const RedisHost *h = query_host(q);
                RedisAddress addr = { .host = h->host, .port = h->port };

                if (redis_conn_new(io->agent->event, &addr, REDIS_CONNECT_TIMEOUT, on_query_state, q, &q->conn) < 0) {
                        q->conn = NULL;
                        sentinel_vote(q, "");
                }
        }
}

/* ---- The topology's operations ----------------------------------------------------- */

static int sentinel_start(RedisIo *io) {
        io->topo_state = calloc(1, sizeof(Topology));
        if (!io->topo_state || !shard_new(io, NULL, 0))
                return -ENOMEM;
        return 0;
}

static void sentinel_drop_peers(RedisIo *io) {
        conn_drop(&io->topo_state->watch);
}

static void sentinel_stop(RedisIo *io) {
        Topology *t = io->topo_state;

        if (!t)
                return;
        conn_drop(&t->watch);
        for (size_t i = 0; i < REDIS_HOSTS_MAX; i++)
                conn_drop(&t->q[i].conn);
        master_forget(io);
        io->topo_state = mfree(t);
}

static void sentinel_connect(RedisIo *io) {
        Agent *a = io->agent;

        sentinel_watch(io);
        if (!io->topo_state->master.host) {
                sentinel_ask(io);
                if (a->state != REDIS_DOWN)
                        a->state = REDIS_CONNECTING;
                return;         /* connected once a quorum named it */
        }
        topology_connect_shards(io);
}

static RedisAddress sentinel_address(RedisIo *io, const Shard *sh) {
        (void) sh;
        return (RedisAddress) { .host = io->topo_state->master.host, .port = io->topo_state->master.port };
}

static void sentinel_shard_up(RedisIo *io, Shard *sh, bool reset) {
        Agent *a = io->agent;

        (void) sh;
        if (reset)
                a->master_since = now_usec(CLOCK_REALTIME);
        log_info("Connected to Redis master %s (%s, from the Sentinels).", a->master_name, a->config->redis.master_name);
}

/* The master went: the Sentinels are asked again (it may have moved). */
static void sentinel_shard_lost(RedisIo *io, Shard *sh) {
        (void) sh;
        master_forget(io);
}

static void sentinel_tick(RedisIo *io, usec_t now) {
        (void) now;
        sentinel_watch(io);     /* after the watching Sentinel went */
}

const TopologyOps topology_sentinel = {
        .failover = true,
        .start = sentinel_start,
        .stop = sentinel_stop,
        .connect = sentinel_connect,
        .address = sentinel_address,
        .shard_of_slot = topology_first_shard,
        .shard_up = sentinel_shard_up,
        .shard_lost = sentinel_shard_lost,
        .shard_counts = topology_every_shard_counts,
        .known = topology_always_known,
        .epoch_slot = topology_one_epoch,
        .tick = sentinel_tick,
        .drop_peers = sentinel_drop_peers,
};
