/* SPDX-License-Identifier: MIT */
#pragma once

/* Inside the agent's Redis layer (its face to the rest of the agent is in
 * agent.h). From the bottom up, each file calling only those below it;
 * what happens below is reported up through the callbacks of RedisEvents,
 * which redis-io.c sets:
 *
 *   shard.c          one server: its command and pub/sub connections,
 *                    down and the backoff, the table of servers
 *   shard-setup.c    a command connection set up: AUTH, SELECT, the
 *                    library (FUNCTION LOAD when it is missing or older),
 *                    ROLE, INFO, the epoch; its maxmemory-policy, asked
 *                    again on the tick
 *   topo-single.c    the topologies behind one interface (TopologyOps):
 *   topo-sentinel.c  which servers there are, which one holds a hash
 *   topo-cluster.c   slot, what to do when one goes
 *   calls.c          a call routed to its shard (MOVED, ASK, TRYAGAIN;
 *                    a library gone takes the shard down), the keys of a
 *                    name's script calls
 *   batch.c          group commit: one script call a turn (in a Cluster, a hash slot)
 *   redis-engine.c   the slot engine's calls (EngineOps) and wake-ups
 *   grant-wait.c     a grant told once the replicas have it (WAIT)
 *   redis-io.c       start and stop, the tick, up and down for the agent */

#include "agent.h"

/* Shards the table holds at most: a Cluster's masters (its documented
 * limit is about 1,000), and those only an ASK named. A map that names
 * more is refused whole. */
#define SHARDS_MAX 4096
#define REDIS_CONNECT_TIMEOUT (2 * USEC_PER_SEC)        /* every connection: a server, a Sentinel, a node */
#define SHARD_POLICY_SAFE "noeviction"

typedef struct RedisIo RedisIo;
typedef struct Shard Shard;
typedef struct Call Call;
typedef struct Batcher Batcher;
typedef struct Topology Topology;

/* One Redis server and what the agent knows of it. Standalone and under
 * Sentinel there is one; a Cluster has one per master, each owning the
 * hash slots the map gives it. */
struct Shard {
        RedisIo *io;
        unsigned index;                 /* in io->shards */
        char *host;                     /* cluster: the node; otherwise NULL */
        uint16_t port;
        char name[300];                 /* "host:port", or the URL without password, for logs */
        RedisConn *cmd, *sub;
        RedisState state;
        bool sub_ready;
        unsigned setup_pending;         /* replies awaited before READY */
        void (*setup_done)(Shard *sh);  /* … and what comes after them (setup_begin()) */
        bool setup_failed;
        const char *setup_refused;      /* … for a reason only an operator changes: a state of
                                         * protocol.c's table (NULL: another reason) */
        const char *refused_state;      /* the state it is refused for (shard_refuse()) */
        bool setup_changed;             /* … its library's text found changed: replaced */
        bool setup_raced;               /* … its library load lost to another agent's once already */
        bool text_read;                 /* its library's text read and found this agent's, or loaded by it */
        usec_t library_asked;           /* CLOCK_MONOTONIC: its library's version and hash last asked */
        bool library_inflight;
        sd_event_source *library_wait;  /* set-up: until another agent's load of the library is asked after */
        const char *library_fix_why;    /* up: why its changed library is replaced, once this agent has the claim */
        char error[512];
        char epoch[LEASE_ID_LEN + 1];   /* the Redis state this agent knows ("" before the first) */
        uint64_t grace_until_ms;        /* Redis clock: nobody is granted anything before */
        bool replid_fresh;              /* INFO: a replication id with no history
                                         * (master_replid2 all 0s): not a promotion */
        char master_id[81];             /* its run id and replication id (INFO): another
                                         * process, or the same one promoted again, has another */
        Call *parked;                   /* calls redirected here before it was up (calls.c) */
        size_t n_hash_slots;                 /* cluster: hash slots the map gives it */
        unsigned map_pass;              /* cluster: the last map that named it */
        int n_replicas;                 /* replicas attached, as ROLE last said (-1: not asked) */
        int epoch_hash_slot;                 /* cluster: the slot its epoch key is in (-1: none yet) */
        char model_refused[512];        /* why its data model marker is refused ("": it is not) */
        char library_refused[512];      /* why its library is refused, or cannot be loaded ("": it is not) */
        /* Why its ACL refuses the check of its library (NOPERM): its slots
         * renewed, nothing new granted (redis-io.c); "": it does not. */
        char check_refused[600];
        usec_t backoff;                 /* after it went: how long before it is tried again */
        usec_t retry_at;                /* CLOCK_MONOTONIC: not connected to before */
        /* Its maxmemory-policy, as INFO last said ("" not asked yet since
         * it connected; "?" it did not say); anything but "noeviction"
         * may evict fleetsem's keys. */
        char policy[REDIS_POLICY_MAX];
        usec_t policy_asked;            /* CLOCK_MONOTONIC: INFO memory last sent */
        bool policy_inflight;
};

/* What one topology does; the rest of the layer asks through these. */
typedef struct TopologyOps {
        bool sharded;           /* keys, clocks and wake-ups per hash slot (SPUBLISH) */
        bool failover;          /* the server may be replaced: ROLE checked, epochs by run id */
        int (*start)(RedisIo *io);
        void (*stop)(RedisIo *io);
        /* Connects whatever is due (after a backoff, a new master, a map). */
        void (*connect)(RedisIo *io);
        RedisAddress (*address)(RedisIo *io, const Shard *sh);
        /* The shard that holds a hash slot's keys; NULL while none is known. */
        Shard *(*shard_of_hash_slot)(RedisIo *io, unsigned slot);
        /* MOVED (moved) or ASK to host:port for slot: the shard there, or
         * NULL when it cannot be followed. NULL op: redirects are errors. */
        Shard *(*redirect)(RedisIo *io, unsigned slot, const char *host, uint16_t port, bool moved);
        /* A hint that the layout may have changed (CLUSTERDOWN, MOVED). */
        void (*refresh)(RedisIo *io);
        /* sh is up (reset: it lost its state): said in the journal. */
        void (*shard_up)(RedisIo *io, Shard *sh, bool reset);
        /* sh went (after a failure, not a reconnection asked for). */
        void (*shard_lost)(RedisIo *io, Shard *sh);
        /* Whether sh counts for the engine (a Cluster's masters that own slots). */
        bool (*shard_counts)(const RedisIo *io, const Shard *sh);
        /* Whether every shard is known (a Cluster: once the map is). */
        bool (*known)(const RedisIo *io);
        /* The hash slot sh's epoch key is in: -1 none (it owns none yet),
         * -2 the one key P:epoch. */
        int (*epoch_hash_slot)(const RedisIo *io, const Shard *sh);
        /* How late an agent may hear that its master was failed over
         * (NULL: at once): the grace after a failover lasts that long. */
        usec_t (*failover_heard_within)(const RedisIo *io);
        void (*tick)(RedisIo *io, usec_t now);
        /* Drops connections to peers other than the shards (Sentinels). */
        void (*drop_peers)(RedisIo *io);
        void (*describe)(RedisIo *io, char *buf, size_t size);
} TopologyOps;

extern const TopologyOps topology_single, topology_sentinel, topology_cluster;

/* topo-single.c: what the topologies of one server share */
void topology_connect_shards(RedisIo *io);
Shard *topology_first_shard(RedisIo *io, unsigned slot);
bool topology_every_shard_counts(const RedisIo *io, const Shard *sh);
bool topology_always_known(const RedisIo *io);
int topology_one_epoch(const RedisIo *io, const Shard *sh);

/* What happens below, reported up (set by redis-io.c). */
typedef struct RedisEvents {
        void (*shard_ready)(Shard *sh, bool reset, usec_t grace, const char *why);
        /* After sh's connections were dropped and it is left DOWN. */
        void (*shard_down)(Shard *sh);
        /* sh's connections dropped (calls parked on it hear Redis went). */
        void (*shard_disconnected)(Shard *sh);
        void (*sub_ready)(Shard *sh);
        /* sh's pub/sub connection went (made again on the next reconnect),
         * with Redis' word or the connection's. */
        void (*sub_lost)(Shard *sh, const char *why);
        redis_reply_cb wake;            /* a message on a pub/sub connection */
        /* The topology's layout changed: subscriptions follow it. */
        void (*layout_changed)(RedisIo *io);
        /* The topology found a shard (or the map) usable: maybe up. */
        void (*maybe_up)(RedisIo *io);
        /* Redis cannot be reached (no node, no quorum): down for the engine. */
        void (*unreachable)(RedisIo *io);
        /* The server was replaced (a failover followed): down until the new one is up. */
        void (*replaced)(RedisIo *io, const char *why);
        /* sh's maxmemory-policy (sh->policy), or the refusal of its
         * library's check (sh->check_refused), is known, or changed. */
        void (*gate_changed)(Shard *sh);
} RedisEvents;

struct RedisIo {
        Agent *agent;
        const TopologyOps *topo;
        Topology *topo_state;           /* the topology's own */
        RedisEvents ev;
        Shard **shards;                 /* grows as needed, up to SHARDS_MAX */
        size_t n_shards, n_shards_alloc;
        Batcher *batcher;
        Call *deferred;                 /* commands nobody waits for, kept for the end of the turn (batch.c) */
        /* The library as this agent loads it (lua_library; where keys are
         * sharded, with SPUBLISH: redis-io.c). */
        char *library_text;
        unsigned sub_generation;        /* any subscription connection made again, or the layout changed */
        bool watch_all;                 /* root watches: every name's wake-ups (engine_watch()) */
        bool watch_subscribed;          /* … subscribed to, on the connection of watch_generation */
        bool watch_refused;             /* Redis refused the pattern (its ACL): not asked again */
        unsigned watch_generation;
        usec_t backoff;                 /* the peers' (Sentinels, the map's nodes) */
        sd_event_source *reconnect_source;
        sd_event_source *tick_source;
        bool stopping;                  /* the agent stops: connections closed, not reset */
        bool up_reset;                  /* a shard reset before all were up */
        usec_t up_grace;
        const char *up_why;             /* GRACE_WHY_* of up_grace */
};

/* The data model of the keys these scripts keep (docs/protocol.md), and
 * the first fleetsem that speaks it: Redis' marker P:model, "N V", beside
 * each epoch key (P:model:{TAG} in a Cluster). 1 was 0.1's eleven keys a
 * name. A newer marker than this is refused at connect (shard-setup.c). */
#define DATA_MODEL 2
#define DATA_MODEL_MARKER "2 0.2"

/* shard.c */
/* A shard for host:port (NULL: the one server), at the end of io->shards
 * (NULL: no memory, or the table is full). */
Shard *shard_new(RedisIo *io, const char *host, uint16_t port);
/* A shard for host:port in no table yet (index unset), not connected. */
Shard *shard_new_detached(RedisIo *io, const char *host, uint16_t port);
/* Drops its connections (its calls hear Redis went) and frees it; it is
 * in no table any more (or is being freed with the table). */
Shard *shard_free(Shard *sh);
DEFINE_TRIVIAL_CLEANUP_FUNC(Shard *, shard_free);
/* sh at the end of *table (*n used, *n_alloc allocated), grown as needed:
 * -E2BIG past SHARDS_MAX. sh->index is left to the caller. */
int shard_table_append(Shard ***table, size_t *n, size_t *n_alloc, Shard *sh);
void shard_connect(Shard *sh);
/* Drops sh's connections and leaves it in state. */
void shard_disconnect(Shard *sh, RedisState state);
/* sh's connections are gone (or it hangs, or is not what it should be):
 * dropped, and made again after a backoff of its own. */
void shard_down(Shard *sh, int error, const char *why);
Shard *shard_of_conn(RedisIo *io, const RedisConn *conn);
/* Whether any shard that counts is up. */
bool shards_any_ready(const RedisIo *io);
/* Connects the shards that count and are not within their backoff. */
void shards_connect_due(RedisIo *io);
/* Calls under way and no word for longer than a silent Redis may take. */
bool redis_conn_hangs(const RedisIo *io, RedisConn *c, usec_t now);
usec_t redis_command_timeout(const RedisIo *io);
/* AUTH's argv for the configured user: its argc. */
int redis_auth_argv(const RedisIo *io, const char *argv[3]);
void redis_fire_and_forget(RedisConn *conn, const RedisReply *reply, void *userdata);
/* The peers' backoff: connect() again in delay, or as due already. */
void redis_reconnect_in(RedisIo *io, usec_t delay);
/* A timer of the Redis layer could not be armed (r): without it the agent
 * would wait for Redis forever; it exits instead, its slots anchored for
 * the next agent (systemd starts it again). */
void redis_io_fatal(RedisIo *io, int r, const char *what);
void redis_reconnect_later(RedisIo *io);
usec_t backoff_next(usec_t b);

/* shard-setup.c */
/* ROLE: whether it says master; the replicas attached are recorded. */
bool shard_role_parse(Shard *sh, const RedisReply *reply);
/* ROLE asked again (a master demoted without word goes down). */
void shard_role_refresh(Shard *sh);
/* INFO memory asked again, if sh is up, nothing is asked yet and the
 * last was asked every or longer before now: its maxmemory-policy. */
void shard_policy_refresh(Shard *sh, usec_t every, usec_t now);
/* … its library's version and hash, where asked longer than every ago. */
void shard_library_refresh(Shard *sh, usec_t every, usec_t now);
/* Whether sh runs with a policy that evicts keys (or does not say). */
bool shard_evicts(const Shard *sh);

/* calls.c */
Shard *shard_of_name(RedisIo *io, const char *name);
/* FCALL of script on the keys of n_names names (one, or a batch:
 * batch.lua), n_args args after them. slot: the first name's hash slot,
 * which the others share where keys are sharded (the caller made sure:
 * batch.c groups names by it), computed once by the caller. */
int call_script_names(RedisIo *io, Script script, unsigned slot, size_t n_names, const char *const *names,
                      redis_reply_cb cb, void *userdata, size_t n_args, const char *const *args,
                      const size_t *arglens);
/* Calls parked on sh: sent (send) or told Redis went. */
void calls_unpark(Shard *sh, bool send);
/* A plain command on the key argv[1], sent now, or (defer) kept until
 * calls_send_deferred(), which sends those in the order they came. */
int call_command(RedisIo *io, redis_reply_cb cb, void *userdata, int argc, const char *const *argv, bool defer);
void calls_send_deferred(RedisIo *io);

/* batch.c */
int batcher_new(RedisIo *io);
void batcher_free(RedisIo *io);
void batch_flush_all(RedisIo *io);

/* grant-wait.c */
/* Gives back a grant the replicas did not confirm (redis-engine.c). */
typedef void (*GiveBack)(Agent *a, const Lease *l);
/* On conn: the connection to the master that granted it. 0: the grant is
 * told once the replicas have it (or, under Sentinel and in a Cluster,
 * once ROLE says there are none), else given back with give_back; <0:
 * the replicas cannot be asked. */
int grant_wait_for_replicas(Agent *a, RedisConn *conn, Lease *l, const AcquireResult *r, GiveBack give_back);

/* redis-engine.c */
/* Every name with waiters subscribed to its wake-ups (where not yet). */
void engine_subscribe_all(RedisIo *io);
/* Every name's wake-ups while io->watch_all, or none of those the names
 * here do not follow: a pattern subscription, where channels are not
 * sharded. */
void engine_watch(RedisIo *io);
void engine_sub_lost(Shard *sh, const char *why);
void engine_wake_message(RedisConn *conn, const RedisReply *reply, void *userdata);
