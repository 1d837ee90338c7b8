/* SPDX-License-Identifier: MIT */
/* sentinel://: the master that a quorum of the Sentinels name. Two kinds
 * of connection to the Sentinels: one that stays, subscribed to
 * +switch-master, so a failover is heard of the moment it is decided;
 * and one to each, made to ask for the master's address whenever it is not
 * known, one of them says it moved, and every third of a lease (a message
 * missed, or Sentinels that disagreed when asked, must not leave an agent
 * on a master the others left). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "peers.h"
#include "redis-layer.h"

/* Asking every Sentinel of the URL for the master. The address is taken
 * once a quorum of them (sentinel_quorum, by default a majority) name the
 * same: one Sentinel, or whoever answers at its address, names nothing
 * alone. A round ends once a quorum agrees or everyone answered, or after
 * REDIS_CONNECT_TIMEOUT (a stopped Sentinel accepts and never answers).
 * The connection to a Sentinel that answered is kept for the next round:
 * asking every sixth of a lease costs each Sentinel one command, not a
 * connection. */
typedef struct SentinelQuery {
        RedisIo *io;
        RedisConn *conn;                /* kept between rounds while it answers */
        bool ready;                     /* conn is connected (and AUTH sent) */
        char vote[280];                 /* "HOST PORT" it named; "" none */
        bool done;
} SentinelQuery;

struct Topology {
        RedisConn *watch;               /* subscribed to +switch-master */
        unsigned watch_next;            /* which Sentinel watches next */
        SentinelQuery q[REDIS_HOSTS_MAX];
        size_t q_pending;               /* of the round under way; 0: none */
        sd_event_source *round_timer;   /* ends the round under way */
        usec_t asked_at;                /* CLOCK_MONOTONIC: the last round began */
        RedisAddress master;            /* host and port only */
        /* A Sentinel said the master moved and no quorum agrees yet: the
         * master is not used (it may be the one the others left) and the
         * Sentinels are asked again until a quorum names one for longer
         * than their news takes to spread. */
        usec_t disputed_since;          /* CLOCK_MONOTONIC; 0: none */
        /* What the journal was last told, so that asking every quarter of a
         * lease says a Sentinel or the quorum failed once, not each time. */
        bool silent[REDIS_HOSTS_MAX];   /* the Sentinel failed its last answer */
        bool no_quorum;                 /* the last round named no master */
};

/* Sentinels tell each other of a new master every 2 s (their hello
 * messages): after a +switch-master, a quorum naming the old master for
 * longer than that means the message was wrong, not early. */
#define SENTINEL_SETTLE (3 * USEC_PER_SEC)
#define SENTINEL_DISPUTE_ASK (250 * USEC_PER_MSEC)

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

static bool master_is(const Topology *t, const char *host, const char *port_s) {
        uint64_t p;

        return t->master.host && streq(host, t->master.host) && parse_uint64(port_s, 1, 65535, &p) >= 0 &&
               p == t->master.port;
}

/* Off the master followed until the Sentinels agree where it is: granting
 * on a master the others left is two masters at once. Its holders keep
 * their slots (the lease outlasts the dispute); nothing new is granted. */
static void master_dispute(RedisIo *io) {
        Topology *t = io->topo_state;

        if (t->disputed_since)
                return;
        t->disputed_since = now_mono();
        log_warning("Sentinel: the master of %s may have moved; not using %s until a quorum of Sentinels names the "
                    "master.", io->agent->config->redis.master_name, io->agent->master_name);
        shard_disconnect(io->shards[0], REDIS_CONNECTING);
        io->ev.replaced(io, "the Sentinels disagree on the master");
}

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
        if (t->master.host && !master_is(t, newh, newp))
                master_dispute(io);
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
        if (redis_conn_subscribe(conn, "+switch-master") < 0) {
                log_debug("Failed to subscribe to +switch-master on a Sentinel; the next one is watched.");
                conn_drop(&t->watch);
                t->watch_next++;
        }
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
        return peers_sentinel_quorum(io->agent->config);
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
        io->topo_state->disputed_since = 0;
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

/* The round's votes so far (peers_sentinel_votes()). */
static size_t votes_best(const RedisIo *io, const char **winner, size_t *answered) {
        const Topology *t = io->topo_state;
        const char *votes[REDIS_HOSTS_MAX];
        size_t n = io->agent->config->redis.n_hosts;

        for (size_t i = 0; i < n; i++)
                votes[i] = t->q[i].vote;
        return peers_sentinel_votes(votes, n, winner, answered);
}

static void sentinel_tally(RedisIo *io) {
        Topology *t = io->topo_state;
        const Config *c = io->agent->config;
        size_t n = c->redis.n_hosts, answered, best;
        const char *winner;
        char host[256], port[8];

        best = votes_best(io, &winner, &answered);
        if (!winner || best < sentinel_quorum(io) || sscanf(winner, "%255s %7s", host, port) != 2) {
                log_full(t->no_quorum && t->master.host ? LOG_DEBUG : LOG_WARNING,
                         "Sentinel: no quorum names the master of %s: %zu of %zu Sentinels answered, at most %zu "
                         "agree%s%s (quorum %u).", c->redis.master_name, answered, n, best,
                         winner ? " on " : "", winner ?: "", sentinel_quorum(io));
                t->no_quorum = true;
                if (!t->master.host)
                        shard_down(io->shards[0], -EHOSTUNREACH, "no quorum of Sentinels named the master");
                else if (t->disputed_since)
                        redis_reconnect_in(io, SENTINEL_DISPUTE_ASK);
                /* Otherwise the master followed stays: Sentinels out of
                 * this agent's reach move nothing. A master they failed
                 * over and can reach is made a replica, which ROLE shows
                 * (fleetsemd(8): min-replicas-to-write for one they
                 * cannot reach). */
                return;
        }
        t->no_quorum = false;
        if (!master_is(t, host, port)) {
                master_move(io, host, port, best);
                return;
        }
        /* The quorum names the master followed. */
        if (!t->disputed_since)
                return;
        if (now_mono() - t->disputed_since < SENTINEL_SETTLE) {
                redis_reconnect_in(io, SENTINEL_DISPUTE_ASK);
                return;
        }
        t->disputed_since = 0;
        log_notice("Sentinel: %zu of %zu Sentinels still name %s the master of %s; using it again.", best, n,
                   io->agent->master_name, c->redis.master_name);
        sentinel_connect(io);
}

static const RedisHost *query_host(const SentinelQuery *q) {
        return &q->io->agent->config->redis.hosts[q - q->io->topo_state->q];
}

static void query_drop(SentinelQuery *q) {
        q->ready = false;
        conn_drop(&q->conn);
}

/* A Sentinel that did not name the master: said once, until it answers. */
static void query_failed(SentinelQuery *q, const char *what, const char *why) {
        bool *silent = &q->io->topo_state->silent[q - q->io->topo_state->q];

        log_full(*silent ? LOG_DEBUG : LOG_WARNING, "Sentinel %s:%u %s%s%s", query_host(q)->host, query_host(q)->port,
                 what, why && why[0] ? ": " : ".", why ?: "");
        *silent = true;
}

/* The round ends: who has not answered names nothing. One still asked
 * when a quorum agreed answers into the void; one that hangs is dropped. */
static void round_end(RedisIo *io, bool hangs) {
        Topology *t = io->topo_state;
        int r;

        for (size_t i = 0; i < REDIS_HOSTS_MAX; i++) {
                if (!t->q[i].done && hangs)
                        query_drop(&t->q[i]);
                t->q[i].done = true;
        }
        t->q_pending = 0;
        r = sd_event_source_set_enabled(t->round_timer, SD_EVENT_OFF);
        if (r < 0)
                log_debug_errno(r, "Failed to disarm the timeout of the Sentinels' round: %m; "
                                "it finds no round under way.");
        sentinel_tally(io);
}

static bool quorum_agrees(const RedisIo *io) {
        const char *winner;
        size_t answered;

        return votes_best(io, &winner, &answered) >= sentinel_quorum(io);
}

static void sentinel_vote(SentinelQuery *q, const char *vote) {
        RedisIo *io = q->io;
        Topology *t = io->topo_state;

        if (q->done)
                return;
        q->done = true;
        snprintf(q->vote, sizeof(q->vote), "%s", vote);
        if (!vote[0])
                query_drop(q);
        if (--t->q_pending == 0 || quorum_agrees(io))
                round_end(io, false);
}

static int on_round_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        RedisIo *io = userdata;
        Topology *t = io->topo_state;

        (void) s;
        (void) usec;
        if (t->q_pending == 0)
                return 0;
        for (size_t i = 0; i < io->agent->config->redis.n_hosts; i++)
                if (!t->q[i].done) {
                        char what[64];

                        snprintf(what, sizeof(what), "did not answer within %s",
                                 format_duration((char[FORMAT_DURATION_MAX]) {}, FORMAT_DURATION_MAX,
                                                 REDIS_CONNECT_TIMEOUT));
                        query_failed(&t->q[i], what, NULL);
                }
        round_end(io, true);
        return 0;
}

static void sentinel_master_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        SentinelQuery *q = userdata;
        char host[256], port[8], vote[sizeof(q->vote)];
        uint64_t p;

        if (conn != q->conn)
                return;
        if (q->done) {          /* after its round: kept if it answered */
                if (!reply || redis_reply_error(reply))
                        query_drop(q);
                return;
        }
        if (!reply || redis_reply_error(reply) || redis_reply_array_len(reply) != 2 ||
            redis_reply_array_string(reply, 0, host, sizeof(host)) < 0 ||
            redis_reply_array_string(reply, 1, port, sizeof(port)) < 0 || parse_uint64(port, 1, 65535, &p) < 0 ||
            !redis_host_is_valid(host)) {
                char why[512];
                const char *e = reply ? redis_reply_error(reply) : redis_conn_error(conn, why, sizeof(why));

                char what[NAME_MAX_LEN + 32];

                snprintf(what, sizeof(what), "does not name master %s", q->io->agent->config->redis.master_name);
                query_failed(q, what, e);
                sentinel_vote(q, "");
                return;
        }
        snprintf(vote, sizeof(vote), "%s %s", host, port);
        if (q->io->topo_state->silent[q - q->io->topo_state->q])
                log_info("Sentinel %s:%u answers again.", query_host(q)->host, query_host(q)->port);
        q->io->topo_state->silent[q - q->io->topo_state->q] = false;
        sentinel_vote(q, vote);
}

static void query_send(SentinelQuery *q) {
        if (redis_conn_command(q->conn, sentinel_master_reply, q, 3,
                               (const char *[]) { "SENTINEL", "get-master-addr-by-name",
                                                  q->io->agent->config->redis.master_name },
                               NULL) < 0)
                sentinel_vote(q, "");
}

static void on_query_state(RedisConn *conn, int error, const char *message, void *userdata) {
        SentinelQuery *q = userdata;

        if (conn != q->conn)
                return;
        if (error < 0) {
                if (q->done) {          /* between rounds: made again at the next */
                        query_drop(q);
                        return;
                }
                query_failed(q, "cannot be reached", message);
                sentinel_vote(q, "");
                return;
        }
        q->ready = true;
        sentinel_auth(q->io, conn);
        query_send(q);
}

static void sentinel_ask(RedisIo *io) {
        Topology *t = io->topo_state;
        size_t n = io->agent->config->redis.n_hosts;
        int r;

        if (t->q_pending > 0)
                return;         /* a round is under way */
        t->asked_at = now_mono();
        r = sd_event_source_set_time(t->round_timer, t->asked_at + REDIS_CONNECT_TIMEOUT);
        if (r >= 0)
                r = sd_event_source_set_enabled(t->round_timer, SD_EVENT_ONESHOT);
        if (r < 0) {
                redis_io_fatal(io, r, "arm the timeout of the Sentinels' round");
                return;
        }
        t->q_pending = n;
        for (size_t i = 0; i < n; i++) {
                t->q[i].io = io;
                t->q[i].vote[0] = '\0';
                t->q[i].done = false;
        }
        for (size_t i = 0; i < n && t->q_pending > 0; i++) {
                SentinelQuery *q = &t->q[i];
                const RedisHost *h = query_host(q);
                RedisAddress addr = { .host = h->host, .port = h->port };

                if (q->ready && redis_conn_pending(q->conn) > 0)
                        query_drop(q);  /* still silent since the last round */
                if (q->ready)
                        query_send(q);
                else if (!q->conn &&
                         redis_conn_new(io->agent->event, &addr, REDIS_CONNECT_TIMEOUT, on_query_state, q, &q->conn) < 0) {
                        q->conn = NULL;
                        sentinel_vote(q, "");
                }
        }
}

/* ---- The topology's operations ----------------------------------------------------- */

static int sentinel_start(RedisIo *io) {
        int r;

        io->topo_state = calloc(1, sizeof(Topology));
        if (!io->topo_state || !shard_new(io, NULL, 0))
                return -ENOMEM;
        r = sd_event_add_time(io->agent->event, &io->topo_state->round_timer, CLOCK_MONOTONIC, USEC_INFINITY, 0,
                              on_round_timeout, io);
        if (r >= 0)
                r = sd_event_source_set_enabled(io->topo_state->round_timer, SD_EVENT_OFF);
        return r < 0 ? r : 0;
}

static void sentinel_drop_peers(RedisIo *io) {
        conn_drop(&io->topo_state->watch);
        for (size_t i = 0; i < REDIS_HOSTS_MAX; i++)
                if (io->topo_state->q[i].done)
                        query_drop(&io->topo_state->q[i]);
}

static void sentinel_stop(RedisIo *io) {
        Topology *t = io->topo_state;

        if (!t)
                return;
        conn_drop(&t->watch);
        for (size_t i = 0; i < REDIS_HOSTS_MAX; i++)
                query_drop(&t->q[i]);
        sd_event_source_disable_unref(t->round_timer);
        master_forget(io);
        io->topo_state = mfree(t);
}

static void sentinel_connect(RedisIo *io) {
        Agent *a = io->agent;

        sentinel_watch(io);
        if (!io->topo_state->master.host || io->topo_state->disputed_since) {
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

/* The Sentinels asked again at each tick, every sixth of a lease: an
 * agent that missed a +switch-master (its watching Sentinel went, or
 * learnt late) follows the quorum within that and a round; one that heard
 * it from a Sentinel the others do not yet believe stops using its master
 * at once, and moves once their news spread (SENTINEL_SETTLE). */
static void sentinel_tick(RedisIo *io, usec_t now) {
        Topology *t = io->topo_state;

        sentinel_watch(io);     /* after the watching Sentinel went */
        if (t->master.host && now - t->asked_at >= io->agent->config->lease_ttl / 8)
                sentinel_ask(io);
}

/* A sixth of a lease, a round (ms, or REDIS_CONNECT_TIMEOUT when a
 * Sentinel hangs), or the Sentinels' own news: a third of a lease covers
 * the first two with a lease of 12 s or more. */
static usec_t sentinel_failover_heard_within(const RedisIo *io) {
        return MAX(io->agent->config->lease_ttl / 3, SENTINEL_SETTLE);
}

const TopologyOps topology_sentinel = {
        .failover = true,
        .start = sentinel_start,
        .stop = sentinel_stop,
        .connect = sentinel_connect,
        .address = sentinel_address,
        .shard_of_hash_slot = topology_first_shard,
        .shard_up = sentinel_shard_up,
        .shard_lost = sentinel_shard_lost,
        .shard_counts = topology_every_shard_counts,
        .known = topology_always_known,
        .epoch_hash_slot = topology_one_epoch,
        .failover_heard_within = sentinel_failover_heard_within,
        .tick = sentinel_tick,
        .drop_peers = sentinel_drop_peers,
};
