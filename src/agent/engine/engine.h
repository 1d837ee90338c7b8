/* SPDX-License-Identifier: MIT */
#pragma once

/* The slot engine: this host's side of the rules — what clients are told
 * and when (QUEUED, GRANTED, RENEWED, LOST, DENIED), holders that fence
 * themselves when renewals go unconfirmed, grants told in the order of
 * the tokens it sees, when to look at Redis again, renewals and loss,
 * re-adoption, re-assertion after a reset, wait deadlines — as a state
 * machine with no I/O of its own. The rules of the line itself are the
 * scripts' (library/lua/prelude.lua): who waits in what order, which lease
 * is whose, the limit in force, tokens, the grace after a reset and a
 * forgotten name; the engine only hears their outcomes. The Promela model
 * (model/) holds both sides, abstractly.
 *
 * Events come in as calls (a request, a script's decoded result, a wake
 * hint, an anchor closing, a timer, Redis up or down), each with the
 * time; effects go out through EngineOps (send a line to a client, call a
 * script, arm a timer, stop a unit). The agent's I/O files (server.c,
 * redis-io.c, …) adapt it to sd-event, hiredis and sockets;
 * tests/test-slots.c drives it directly, step by step, and
 * tests/test-slots-faults.c under random faults against the scripts
 * themselves in a redis-server. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lease-states.h"
#include "list.h"
#include "log.h"
#include "names.h"
#include "time-util.h"

typedef struct Engine Engine;
typedef struct Lease Lease;
typedef struct Name Name;

#define SLOTS_DESC_MAX 1024
#define LEASE_HOLDER_MAX 128     /* a holder's label in the journal, with its NUL */
#define ENGINE_RENEW_BATCH 1000
#define ENGINE_GRANTS_MAX 64             /* leases one release may hand slots to, as parsed */
#define ENGINE_RECHECK_SAFETY (5 * USEC_PER_SEC)
#define ENGINE_POSITION_EVERY (1 * USEC_PER_SEC)

/* A lease's state is its life here, one of lease-states.list's (LEASE_NEW
 * to LEASE_GONE), changed only by lease_set_state() on one of its events.
 * The booleans below are not states: each is true or false in more than
 * one state, independently of it (what was asked, a call under way, a
 * report due, Redis' line), as its comment says. */
struct Lease {
        unsigned n_ref;
        Engine *engine;
        char id[LEASE_ID_LEN + 1];
        Name *name;
        LIST_FIELDS(Lease, by_name);
        LeaseState state;
        uint32_t slots;         /* what it asked for (after the host's cap; 0: the fleet limit) */
        uint32_t weight;        /* the units of the limit it takes (1 or more) */
        uint32_t limit;         /* the limit in force, as Redis last said */
        uid_t uid;
        pid_t pid;
        char *desc;             /* holder description stored in Redis */
        char holder[LEASE_HOLDER_MAX];  /* its label in the journal: "alice@web-3 pid 42 (backup.service)" */
        char *unit;             /* the systemd service the slot is bound to, or NULL */
        bool stop_on_lost;      /* asked for (on-lost=stop): its unit is stopped when it is lost */
        /* Held by the host itself (fleetsem reboot): no anchor, kept across
         * agent restarts and reboots until released or revoked, on a lease
         * of its own (ttl) while nobody renews it. Asked for, in every
         * state. */
        bool host_held;
        usec_t ttl;             /* its lease in Redis (0: the engine's lease_ttl) */
        uint64_t token;
        uint64_t since_ms;
        uint32_t position;      /* last known place in line */
        uint32_t held_seen;     /* holders Redis reported with it */
        bool position_unsent;   /* a report of its place in line is due (report_position()) */
        usec_t queued_sent;     /* when the last QUEUED went out */
        usec_t held_back_until; /* Redis grants it nothing before (after a reset or a loss), 0 none */
        void *client;           /* the adapter's client: waiting, or listening for RENEWED/LOST */
        void *io;               /* the adapter's: anchor watch, timer */
        bool no_wait;           /* asked for: denied rather than queued */
        usec_t deadline;        /* a waiter is denied then (USEC_INFINITY: never) */
        usec_t recheck_at;      /* a waiter asks Redis again then */
        usec_t timer_armed;     /* what the adapter's timer was last set to */
        /* An acquire call under way, and another one due after it: calls
         * answer whatever the lease became meanwhile (even gone). */
        bool check_inflight;
        bool check_again;
        /* Redis' line, as its last answer said: it has a place there (told
         * QUEUED since it last joined). Waiting or granted, either way; a
         * grant held back here (LEASE_GRANTED) keeps what it was. */
        bool enqueued;
        /* A secret given to Redis with each place in line (new with each
         * one; "" none): a wake message that names it is Redis' word. */
        char proof[LEASE_ID_LEN + 1];
        /* A re-assertion under way (answered whatever the lease became
         * meanwhile: held, lost or gone). */
        bool reassert_inflight;
        usec_t reassert_sent;   /* when the re-assertion in flight went out */
        uint64_t seq;           /* order of joining the queue here (0: not yet) */
        uint64_t check_id;      /* the last acquire check sent for it */
        usec_t check_sent;      /* when */
        /* LEASE_GRANTED: the grant learned while an earlier lease here may
         * hold one with a lower token not yet heard of (see
         * name_flush_grants()), as it was heard of. */
        uint64_t pending_token;
        uint64_t pending_since;
        uint32_t pending_limit;
        usec_t pending_renewed;
        usec_t pending_heard;
        bool pending_by_wake;   /* told by a wake message with its proof, not an answer */
        uint64_t pending_after;         /* the last look sent when it was heard of */
        uint64_t queued_answer;         /* the last look Redis answered "waiting" to */
        /* A later lease's grant waits for its answer (a waiter's, whether
         * or not it is in line): its answer lets the name's grants go. */
        bool holds_back;
        usec_t renewed;         /* when the last confirmed renewal was sent */
        usec_t asked;           /* when it was asked for here (USEC_INFINITY: re-adopted), for the wait time */
};

struct Name {
        Engine *engine;
        char *name;
        LIST_FIELDS(Name, all);
        Lease *leases;
        size_t n_waiting;
        size_t n_held;
        usec_t idle_since;
        usec_t positions_at;    /* when moved-up places are reported (USEC_INFINITY: none due) */
        unsigned io_generation; /* the adapter's: pub/sub connection it subscribed on */
        void *io;               /* the adapter's: its timer */
        usec_t io_indexed;      /* the adapter's: when its renewal last wrote the names index (0: not since a reset) */
        /* Drained (no new grant fleet-wide), as Redis last said: "by WHO
         * since WHEN: REASON" for people; NULL: not drained. */
        char *drained;
};

#define SLOTS_DRAIN_RECORD_MAX 512
/* A drain record of Redis' ("HOST UID SINCE_MS USER REASON") for people:
 * "by USER (uid UID) on HOST since YYYY-MM-DD HH:MM UTC: REASON"; -EBADMSG
 * when it is none. */
int engine_drain_text(const char *record, char *buf, size_t size);
/* The last operator action on a name, as Redis keeps it ("ACTION HOST UID
 * AT_MS USER REASON", ACTION drain, undrain or revoke) for people: "ACTION by USER
 * (uid UID) on HOST at YYYY-MM-DD HH:MM UTC[: REASON]"; -EBADMSG when it is
 * none. */
int engine_action_text(const char *record, char *buf, size_t size);
/* A fleet limit's record ("N HOST UID SINCE_MS USER REASON"): N into
 * *ret_n and the rest for people, as engine_drain_text(); -EBADMSG when it
 * is none. */
int engine_cap_text(const char *record, uint32_t *ret_n, char *buf, size_t size);

/* What a script call reported, decoded and checked by the adapter. */
typedef enum AcquireOutcome {
        ACQUIRE_GRANTED,
        ACQUIRE_QUEUED,
        ACQUIRE_REFUSED,        /* the lease is owned by another host or user */
        ACQUIRE_NO_LIMIT,       /* it asked for no number of slots, and the name has no fleet limit */
        ACQUIRE_TOO_HEAVY,      /* its weight is above the limit in force (limit): it would never fit */
        ACQUIRE_FAILED,         /* Redis answered with an error or nonsense */
        ACQUIRE_RETRY,          /* granted, but not confirmed (no replica has it): given back, ask again */
} AcquireOutcome;

/* An acquire's answer. The Redis side's decoder (replies.list: "into
 * acquire") fills it from acquire.lua's reply, each field into the member
 * of its name, with no form between. */
typedef struct AcquireResult {
        AcquireOutcome outcome;
        uint64_t token, since_ms;       /* GRANTED */
        uint32_t position;              /* QUEUED */
        uint32_t held, limit;
        int64_t next_expiry_ms;         /* QUEUED: until the first holder's lease runs out, -1 unknown */
        uint64_t held_back_ms;          /* QUEUED: how long the name grants it nothing (a reset, a loss), 0 none */
        char drain[SLOTS_DRAIN_RECORD_MAX + 1]; /* QUEUED: Redis' drain record "HOST UID SINCE_MS USER REASON" */
        bool has_drain;                 /* … when the name is drained */
        const char *error;              /* FAILED, RETRY */
} AcquireResult;

typedef struct Granted {
        char lease[LEASE_ID_LEN + 1];
        uint64_t token;
        uint64_t since_ms;
        char proof[LEASE_ID_LEN + 1];   /* "" when the message had none ("-") */
} Granted;

/* What the engine counts, from the times it is given, for `fleetsem
 * metrics`: counters since the agent started (Prometheus sees a restart as
 * a counter reset). Releases and losses are of held slots; a waiter that
 * withdraws or is denied is not released. */
typedef enum EngineReleaseCause {
        ENGINE_RELEASE_ANCHOR_CLOSED,    /* the job ended: its anchor closed */
        ENGINE_RELEASE_RELEASED,         /* given back on request (fleetsem release, ExecStopPost=) */
        ENGINE_RELEASE_LOST,             /* lost: not renewed in time, or gone from Redis */
        N_ENGINE_RELEASE_CAUSES,
} EngineReleaseCause;

typedef enum EngineDenial {
        ENGINE_DENIAL_TIMEOUT,           /* DENIED reason=timeout */
        ENGINE_DENIAL_FULL,              /* DENIED reason=full (no wait) */
        ENGINE_DENIAL_UNCONFIRMED,       /* DENIED reason=unconfirmed (no wait; no replica took the grant) */
        ENGINE_DENIAL_DRAINED,           /* DENIED reason=drained (no wait; the name is drained) */
        N_ENGINE_DENIALS,
} EngineDenial;

extern const char *const engine_release_cause_name[N_ENGINE_RELEASE_CAUSES];
extern const char *const engine_denial_name[N_ENGINE_DENIALS];

/* A histogram of times: upper bounds of its buckets 1 ms to 1 h, and one
 * more bucket for the longer ones. */
#define ENGINE_HISTOGRAM_BUCKETS 15
extern const usec_t engine_histogram_bounds[ENGINE_HISTOGRAM_BUCKETS];

typedef struct EngineHistogram {
        uint64_t buckets[ENGINE_HISTOGRAM_BUCKETS + 1];  /* each bucket alone, not cumulative */
        uint64_t count;
        usec_t sum;
} EngineHistogram;

typedef struct EngineStats {
        uint64_t releases[N_ENGINE_RELEASE_CAUSES];
        uint64_t denials[N_ENGINE_DENIALS];
        uint64_t lost;
        /* From asking to the grant, of every grant here (not of re-adopted slots). */
        EngineHistogram wait;
        /* Of every confirmed renewal of a lease: how long after it was due
         * (a third of a lease after the last one) its confirmation came. */
        EngineHistogram lateness;
        usec_t lateness_max;
        uint64_t redis_ups;             /* the first connection and every reconnection */
        /* Renewals: from the call to its reply. */
        uint64_t rtt_count;
        usec_t rtt_sum;
        usec_t rtt_last;
} EngineStats;

/* Counters of one name, kept apart from its Name (which goes when idle) in
 * a table of at most ENGINE_NAME_STATS_MAX names: the least recently used
 * goes when a new one comes, and its counters start from 0 again if it
 * comes back. */
#define ENGINE_NAME_STATS_MAX 1024
typedef struct NameStats NameStats;
struct NameStats {
        LIST_FIELDS(NameStats, lru);    /* most recently used first */
        uint64_t grants;
        char name[];
};

#define ENGINE_NO_UID ((uid_t) -1)

typedef struct EngineOps {
        /* Replies to a client; finish: close once the output is out. */
        void (*send)(void *ctx, void *client, const char *line, int len);
        void (*finish)(void *ctx, void *client);
        /* Script calls; <0 when not sent (Redis away). Each answers with the
         * matching slots_*_done() (acquire: a NULL result when the
         * connection went before the answer). */
        int (*call_acquire)(void *ctx, Lease *l);
        int (*call_release)(void *ctx, const char *name, const char *lease, uid_t uid);
        /* (uid: root's when one of the leases is: the name's idle time.) */
        int (*call_renew)(void *ctx, Name *n, const char (*ids)[LEASE_ID_LEN + 1], size_t n_ids, uid_t uid,
                          bool host_held);
        int (*call_reassert)(void *ctx, Lease *l);
        /* This host's index of its leases in Redis, for re-adoption. */
        void (*index)(void *ctx, const Lease *l, bool add);
        /* l became HELD, or is HELD no more (and not gone), or (renewed)
         * HELD, was confirmed again: the host's own record says which, and
         * when (an adoption that finds the whole name forgotten learns
         * from it that l held). */
        void (*record)(void *ctx, const Lease *l, bool renewed);
        /* One timer per lease and per name; USEC_INFINITY disarms. */
        void (*lease_timer)(void *ctx, Lease *l, usec_t when);
        void (*name_timer)(void *ctx, Name *n, usec_t when);
        void (*name_waiting)(void *ctx, Name *n);       /* a waiter or a holder: subscribe to its wake-ups */
        void (*lease_drop)(void *ctx, Lease *l);        /* gone here: close its watch, free l->io */
        void (*name_drop)(void *ctx, Name *n);          /* gone here: free n->io */
        /* A lost slot's job stopped, and killed by kill_at (before the slot
         * may be granted elsewhere): its unit (l->unit), or else the login
         * session its requester leads. 1: a session is being ended (its
         * anchor's close is no sign of its end); 0: a unit; <0: nothing
         * to stop. */
        int (*stop_job)(void *ctx, Lease *l, const char *why, usec_t kill_at);
        /* A lost slot whose holder no longer listens for LOST (a login
         * session keeps the anchor, not the connection): tell it otherwise. */
        void (*tell_lost)(void *ctx, Lease *l, const char *why);
        void (*changed)(void *ctx);                     /* counts changed */
        /* A new random id (a waiter's proof); <0 when none can be made. */
        int (*random_id)(void *ctx, char ret[LEASE_ID_LEN + 1]);
        /* What the engine says, at level: caused by uid's request
         * (ENGINE_NO_UID: by nobody's), at now; message and fields raw. */
        void (*log)(void *ctx, int level, uid_t uid, usec_t now, const LogFields *fields, const char *message);
} EngineOps;

struct Engine {
        const EngineOps *ops;
        void *ctx;
        usec_t lease_ttl;
        bool redis_up;
        usec_t grace_until;             /* after a reset, nobody is granted anything before */
        const char *grace_why;          /* GRACE_WHY_*: why, for the waiters */
        /* A wake message that carries a waiter's proof grants it without a
         * second call; off when replicas must confirm each grant (WAIT). */
        bool wake_grants;
        usec_t renew_sent;              /* when this host's leases were last renewed */
        void *lease_tree;               /* tsearch(): id → Lease */
        void *name_tree;                /* tsearch(): name → Name */
        Name *names;
        size_t n_names;
        size_t n_leases, n_held, n_waiting;
        uint64_t queue_seq;
        uint64_t check_counter;
        struct PendingRelease *pending_releases;
        size_t n_pending_releases;
        EngineStats stats;
        void *name_stats_tree;          /* tsearch(): name → NameStats */
        NameStats *name_stats;          /* most recently used first */
        size_t n_name_stats;
};

void engine_init(Engine *e, const EngineOps *ops, void *ctx, usec_t lease_ttl);
/* Forgets everything without releasing anything: the anchors live on in
 * the sessions and units, and the next agent re-adopts them. */
void engine_done(Engine *e);

Lease *engine_lease_find(Engine *e, const char *id);
Name *engine_name_find(Engine *e, const char *name);
/* The slot of name that unit holds here already (restarting with its
 * anchor in its file descriptor store), or NULL. */
Lease *engine_lease_of_unit(Engine *e, const char *name, const char *unit, uid_t uid);
/* Units of uid's leases here, held or waiting: each lease its weight. */
uint64_t engine_units_of(const Engine *e, uid_t uid);
/* Names other than but that uid holds or waits for here. */
size_t engine_names_of(const Engine *e, uid_t uid, const char *but);
/* Holders: how long they may keep believing without a confirmed renewal. */
usec_t engine_lost_after(const Engine *e);
/* A lease's own lease in Redis, and how long it may go without a renewal. */
usec_t lease_ttl(const Lease *l);
usec_t lease_lost_after(const Lease *l);
/* The slot of name that this host holds itself (hold=host), or NULL. */
Lease *engine_lease_of_host(Engine *e, const char *name);

typedef struct LeaseSpec {
        const char *name;
        const char *id;
        uint32_t slots;
        uint32_t weight;                /* 0 counts as 1 */
        uid_t uid;
        pid_t pid;
        const char *desc;
        const char *holder;             /* its label in the journal (holder_label()), or NULL: "?" */
        const char *unit;               /* or NULL */
        bool stop_on_lost;
        bool host_held;
        usec_t ttl;                     /* 0: the engine's lease_ttl */
} LeaseSpec;

/* A new request: a new waiter, with the adapter's io (its anchor watch).
 * wait: 0 = do not wait, USEC_INFINITY = wait for ever. -ENOMEM. */
int engine_acquire(Engine *e, const LeaseSpec *spec, usec_t wait, void *client, void *io, usec_t now, Lease **ret);
/* A client asking again for a lease that exists here: the same slot, or
 * the same place in line. */
void engine_attach(Engine *e, Lease *l, void *client, usec_t now);
/* A slot of a lease found held in Redis after this agent restarted. */
int engine_adopt(Engine *e, const LeaseSpec *spec, uint64_t token, uint64_t since_ms, void *io, usec_t now, Lease **ret);
/* A lease's entry in this host's index (Redis' and the host's own record):
 * "NAME SLOTS UID UNIT ON-LOST[ WEIGHT[ KIND]]", UNIT "-" when not bound to
 * one, WEIGHT only when above 1 or a KIND follows; KIND "host-held" for a
 * slot the host holds itself (no anchor). adopt.c reads it back. */
#define ENGINE_INDEX_VALUE_MAX (NAME_MAX_LEN + UNIT_NAME_MAX + 64)
#define ENGINE_INDEX_HOST_HELD "host-held"     /* its KIND */
void engine_index_value(const Lease *l, char buf[static ENGINE_INDEX_VALUE_MAX]);

void engine_release(Engine *e, Lease *l, const char *why, usec_t now);
void engine_anchor_closed(Engine *e, Lease *l, usec_t now);
void engine_client_gone(Engine *e, Lease *l, usec_t now);
void engine_lease_timer(Engine *e, Lease *l, usec_t now);
void engine_name_timer(Engine *e, Name *n, usec_t now);
/* Every renewal interval (and more often while Redis is away): renews,
 * and tells holders whose lease may have run out that it is lost. Returns
 * when to tick again, relative. */
usec_t engine_tick(Engine *e, usec_t now);

/* Redis is there (again). reset: it lost its state since this agent last
 * saw it (restarted empty, or a failover lost writes): holders are
 * re-asserted and waiters queue again. grace: what is left of the time
 * after a reset (this agent's or another's) in which nobody is granted
 * anything (the scripts enforce it; waiters are told why, a GRACE_WHY_*,
 * and look again when it ends). */
void engine_redis_up(Engine *e, bool reset, usec_t grace, const char *why, usec_t now);
#define ENGINE_GRACE_TOLD_MAX (24ULL * 3600 * USEC_PER_SEC)   /* the longest grace waiters are told of */
/* What is left of the grace at now; 0: none. */
usec_t engine_grace_left(const Engine *e, usec_t now);
/* Redis went away: requests not yet queued fail with code (an ERROR_CODE_*:
 * unavailable, or misconfigured when it lasts until an operator acts);
 * holders keep their slots until engine_lost_after() without renewal. why:
 * for the clients. */
void engine_redis_down(Engine *e, const char *code, const char *why, usec_t now);

/* Nothing new may be granted (Redis may evict its keys): every waiter
 * here is answered ERROR with code and why and leaves the queue; holders
 * keep their slots and are renewed as before. New requests are the
 * adapter's to refuse while it lasts. */
void engine_fail_waiters(Engine *e, const char *code, const char *why, usec_t now);

void engine_acquire_done(Engine *e, Lease *l, const AcquireResult *r, usec_t now);
/* reply_lost: the connection went before the answer (sent again later). */
void engine_release_done(Engine *e, const char *name, const char *lease, uid_t uid, bool reply_lost,
                        const Granted *g, size_t k, usec_t now);
/* missing[i]: Redis has no such lease (any more); forgot_left: how long
 * the name still grants nothing because Redis lost its keys (the scripts
 * found them gone while it stayed up; 0: it did not), a lease of the
 * call's own after it found so: the missing holders whose last renewal
 * went out before that are put back (re-asserted) rather than lost; sent:
 * when the call went out. */
void engine_renew_done(Engine *e, const char *name, const char (*ids)[LEASE_ID_LEN + 1], const bool *missing,
                      size_t n, usec_t forgot_left, usec_t sent, usec_t now);
/* result: 1 holds again, 0 lost (no room), -1 owned elsewhere, -2 Redis went. */
void engine_reassert_done(Engine *e, Lease *l, int result, usec_t now);
/* Redis lost l's slot while it stayed up (a renewal, or an adoption,
 * found its name forgotten: it grants nothing on it for a lease): l is
 * put back (reassert), as after a reset. */
void engine_put_back(Engine *e, Lease *l, usec_t now);
/* A wake message on name's channel: "g LEASE TOKEN SINCE PROOF …" or
 * anything else. A waiter it names with the proof this host gave Redis is
 * granted (if wake_grants); any other it names asks Redis. */
void engine_wake(Engine *e, const char *name, const char *payload, usec_t now);

/* "LEASE TOKEN SINCE PROOF ..." → Granted[]; -EBADMSG, -E2BIG. */
int granted_parse(const char *s, Granted *g, size_t max, size_t *ret_k);

Lease *lease_ref(Lease *l);
/* Accepts NULL; returns NULL. */
Lease *lease_unref(Lease *l);
DEFINE_TRIVIAL_CLEANUP_FUNC(Lease *, lease_unref);
