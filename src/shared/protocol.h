/* SPDX-License-Identifier: MIT */
#pragma once

/* The client ⇄ agent protocol: one line per message, "VERB key=value …",
 * values percent-encoded (%XX) outside [A-Za-z0-9_.:@/+,=-]. One request per
 * connection; the agent answers with progress lines and one final line.
 *
 *   → ACQUIRE name=N slots=3 lease=<32 hex> wait=<usec|infinity> [unit=1] [on_lost=stop]
 *             [hold=host [reason=TEXT]]   (root: a slot the host holds, no anchor; docs/protocol.md)
 *   ← QUEUED position=2 held=3 slots=3 limit=1 [grace=<ms> why=new|reset|failover]
 *                         (limit: the limit in force; grace: no slot is granted
 *                         for that long after Redis lost or began its state)
 *   ← GRANTED token=42 lease=<id> since=<ms> ttl=<ms> limit=3   (connection stays open)
 *   ← RENEWED ttl=<ms>                                (each confirmed renewal)
 *   ← LOST reason=… free_in=<ms>                      (later, if ever; free_in: the slot
 *                         may be granted elsewhere that soon at the earliest: the job
 *                         must be gone by then)
 *   ← DENIED reason=timeout|full position=2 held=3 slots=3 limit=1 [grace=<ms> why=new|reset|failover]
 *                         (refused in a grace: clients tell why, not "in use")
 *   ← ERROR code=<code> message=…
 *
 *   → RELEASE lease=<id>            ← RELEASED held=0|1
 *   → RELEASE name=N unit=1         ← RELEASED held=0|1
 *   → RELEASE name=N hold=host      ← RELEASED held=0|1      (root: the slot the host holds)
 *
 * unit=1 binds the slot to the systemd service the requester runs in (the
 * agent looks it up from the peer's pid, never from the request): asking
 * again from the same unit while it holds a slot of N answers with that
 * slot (GRANTED with the lease already held), and RELEASE name= unit=1
 * gives it back. on_lost=stop: the agent stops that unit if the slot is lost.
 *   → STATUS [name=N]               ← NAME … / HOLDER … / WAITER … / END
 *
 * METRICS (any local user; no lease ids): what this agent counted, its
 * names here, then what Redis says of every name in use, for `fleetsem
 * metrics` to print in the Prometheus format:
 *   → METRICS
 *   ← AGENT redis=up|down|connecting redis_ups=N held=N waiting=N lost=N
 *           lateness_max=<usec> grace=<ms> [why=…] rtt_count=N rtt_sum=<usec> [rtt_last=<usec>]
 *   ← RELEASES anchor_closed=N released=N lost=N
 *   ← DENIALS timeout=N full=N
 *   ← WAIT count=N sum=<usec> bounds=<usec>,… buckets=N,…   (buckets: cumulative, then +Inf)
 *   ← HOST name=N held=H waiting=W oldest_wait=MS host_held=K
 *                                         (each name this agent has leases of, or had lately;
 *                                         host_held: slots of it the host holds itself)
 *   ← GRANTS name=N total=G                 (each name this agent counts grants of)
 *   → WATCH                         ← WATCHING, then CHANGED whenever the agent saw something
 *                                     change (its slots, a wake message, Redis), a quarter of a
 *                                     second after it, until the client goes
 *   ← NAME name=N held=H waiting=W limit=L  (fleet-wide, from Redis; none while Redis is away)
 *          [drained=TEXT] [last_action=TEXT]  (STATUS: the drain, the last operator action)
 *   ← END now=<ms>
 * STATUS's END also carries grace=<ms> why=… while a grace lasts.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "names.h"
#include "time-util.h"

#define PROTO_REQUEST_MAX 1024          /* a request line, without '\n' */
#define PROTO_REPLY_MAX 4096            /* a reply line, without '\n' */
#define PROTO_FIELDS_MAX 24
#define PROTO_VERB_MAX 15
#define PROTO_KEY_MAX 31

/* Offsets into Message.storage, not pointers: a Message may be copied or
 * moved (kept in an array that grows) and stays valid. */
typedef struct MessageField {
        uint16_t key;
        uint16_t value;
} MessageField;

typedef struct Message {
        char verb[PROTO_VERB_MAX + 1];
        size_t n_fields;
        MessageField fields[PROTO_FIELDS_MAX];
        char storage[PROTO_REPLY_MAX + 1];      /* decoded keys and values */
} Message;

/* Parses one line (without its '\n'; NUL bytes and control characters are
 * refused). Returns -EBADMSG on malformed input, -E2BIG when too long. */
int message_parse(const char *line, size_t len, size_t max_len, Message *ret);
const char *message_get(const Message *m, const char *key);

/* Builds a line in buf: message_start(), then message_add() for each field;
 * returns -ENOBUFS when it does not fit. The line gets no '\n'. */
typedef struct MessageBuilder {
        char *buf;
        size_t size;
        size_t len;
        int error;
} MessageBuilder;

void message_start(MessageBuilder *b, char *buf, size_t size, const char *verb);
void message_add(MessageBuilder *b, const char *key, const char *value);
void message_addf(MessageBuilder *b, const char *key, const char *format, ...)
        __attribute__((format(printf, 3, 4)));
void message_add_u64(MessageBuilder *b, const char *key, uint64_t value);
int message_finish(MessageBuilder *b);         /* length or -ENOBUFS */

typedef enum RequestVerb {
        REQUEST_ACQUIRE,
        REQUEST_RELEASE,
        REQUEST_STATUS,
        REQUEST_METRICS,
        REQUEST_DRAIN,
        REQUEST_REVOKE,
        REQUEST_LIMIT,
        REQUEST_WATCH,
} RequestVerb;

#define DRAIN_REASON_MAX 200            /* bytes of an operator's reason (drain, revoke) */

typedef struct Request {
        RequestVerb verb;
        char name[NAME_MAX_LEN + 1];            /* ACQUIRE; STATUS: "" = all */
        char lease[LEASE_ID_LEN + 1];           /* ACQUIRE, RELEASE, REVOKE */
        char host[IDENT_MAX_LEN + 1];           /* REVOKE: every lease of that host ("" none) */
        uint32_t slots;                         /* ACQUIRE (0: the fleet limit); LIMIT (0: none) */
        uint32_t weight;                        /* ACQUIRE: units of the limit it takes (1 when absent) */
        usec_t wait;                            /* ACQUIRE: 0 = do not wait */
        bool unit;                              /* ACQUIRE, RELEASE: bound to the requester's unit */
        bool stop_on_lost;                      /* ACQUIRE: stop that unit when the slot is lost */
        bool host_held;                         /* ACQUIRE, RELEASE: hold=host, a slot the host holds, no anchor */
        bool drain;                             /* DRAIN: on (true) or off */
        bool revoke_now;                        /* REVOKE: freed at once, not at the end of the holder's lease */
        char reason[DRAIN_REASON_MAX + 1];      /* DRAIN, REVOKE, LIMIT, ACQUIRE hold=host: why ("" none) */
} Request;

#define SLOTS_MAX 1000000U

/* An operator's reason: 1 to DRAIN_REASON_MAX bytes of UTF-8 without control
 * characters or the invisible ones that reorder text. */
bool drain_reason_is_valid(const char *s);

/* Parses and validates a request; on error ret_error points to a static
 * human-readable reason. */
int request_parse(const char *line, size_t len, Request *ret, const char **ret_error);
int request_format(const Request *r, char *buf, size_t size);

/* Error codes in ERROR replies, and what clients make of them. */
#define ERROR_CODE_USAGE "usage"                /* malformed request */
#define ERROR_CODE_INVALID "invalid"            /* a field is not valid */
#define ERROR_CODE_PERMISSION "permission"
#define ERROR_CODE_ANCHOR "anchor"              /* no anchor, or not the requester's */
#define ERROR_CODE_UNAVAILABLE "unavailable"    /* the limiter cannot count right now: on_error applies */
#define ERROR_CODE_MISCONFIGURED "misconfigured" /* a state of Redis or the agent that lasts until an operator acts */
#define ERROR_CODE_REDIS "redis"                /* Redis answered with an error */
/* Which states of Redis and of the agent take a caller's on_error
 * (ERROR_CODE_UNAVAILABLE) and which are refused whatever it says
 * (ERROR_CODE_MISCONFIGURED): one table, redis_states[] in protocol.c,
 * which pam_fleetsem(8)'s ON ERROR table repeats (tests/check-docs.py).
 * A state is an agent's word ("eviction", "library-newer") or the first
 * word of an error Redis answered ("LOADING", "NOPERM"). */
const char *error_code_of_state(const char *state);
/* What an operator does about state, when the table says (NULL else). */
const char *redis_state_fix(const char *state);
/* The table's state of an error Redis answered, by its first word; NULL
 * when none fits (or error is NULL). */
const char *redis_state_of_error(const char *error);
/* The code for a request Redis answered with error: the table's, else
 * ERROR_CODE_REDIS. */
const char *error_code_of_redis_error(const char *error);
#define ERROR_CODE_BUSY "busy"                  /* too many clients */
#define ERROR_CODE_NOT_HELD "not_held"          /* REVOKE: the lease holds no slot of the name */
#define ERROR_CODE_NO_LIMIT "no_limit"          /* ACQUIRE slots=0: the name has no fleet limit */
#define ERROR_CODE_TOO_HEAVY "too_heavy"        /* ACQUIRE weight= above the limit in force */
#define ERROR_CODE_LIMIT "limit"                /* past a per-user limit of the host (max_leases_per_user, max_names_per_user) */

/* Why no slot is granted for a while (QUEUED's why=, a token of the
 * agent's): what happened to Redis, in words for a user; NULL: unknown. */
#define GRACE_WHY_NEW "new"             /* Redis holds no fleetsem state yet */
#define GRACE_WHY_RESET "reset"         /* Redis lost the state this agent knew */
#define GRACE_WHY_FAILOVER "failover"   /* another master, or one restarted from a snapshot */
const char *grace_why_text(const char *why);

/* The length (1 to 4) of the UTF-8 character at s, with its code point in
 * *ret_cp; 0 when s starts none: NUL, a stray or truncated byte, an
 * overlong form, a surrogate, or past U+10FFFF. */
size_t utf8_decode(const char *s, uint32_t *ret_cp);

/* Text for a terminal from a value a client or Redis chose (a comm, a unit,
 * a host): control characters, invalid UTF-8 and the invisible characters
 * that reorder or hide text come out as \n, \t, \r, \\ or \xNN; printable
 * UTF-8 stays as it is. Writes into buf (TEXT_ESCAPE_SIZE(strlen(s)) bytes
 * hold any s whole; a smaller buf truncates the result) and returns buf. */
#define TEXT_ESCAPE_SIZE(len) (4 * (len) + 1)
const char *text_escape(const char *s, char *buf, size_t size);

/* A lost slot's job must be gone before the slot may be granted
 * elsewhere, free_in from now (LOST's free_in): how long until its
 * SIGKILL. LOST_KILL_MARGIN before (at most half of free_in), for the
 * signal's delivery and the job's teardown; 0 when there is no time. */
#define LOST_KILL_MARGIN (500 * USEC_PER_MSEC)
usec_t lost_kill_in(usec_t free_in);
