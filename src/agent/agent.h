/* SPDX-License-Identifier: MIT */
#pragma once

/* The agent's I/O around the slot engine (engine.h): clients on the
 * listening socket (server.c; their connections conn.c, requests
 * requests.c, budgets budgets.c), Redis (redis-io.c and the layer below
 * it, redis-layer.h), anchors and timers
 * (lease-io.c), descriptions of requesters (describe.c), re-adoption
 * (adopt.c), status (status-reply.c), systemd units (units.c). */

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <systemd/sd-event.h>
#include <systemd/sd-id128.h>

#include "config.h"
#include "list.h"
#include "macro.h"
#include "names.h"
#include "protocol.h"
#include "redis.h"
#include "scripts.h"
#include "engine.h"
#include "socket-util.h"
#include "time-util.h"

typedef struct Agent Agent;

#define REDIS_POLICY_MAX 32                     /* a maxmemory-policy, as INFO says it */

/* Event priorities (lower runs first). What keeps slots alive runs before
 * new work, and new work before new connections: no load of new clients,
 * however large, delays a renewal, a release or a confirmation. */
enum {
        PRIORITY_LEASES = SD_EVENT_PRIORITY_IMPORTANT,  /* Redis' replies, anchors, lease and name timers, the tick */
        PRIORITY_ROOT = SD_EVENT_PRIORITY_NORMAL - 5,   /* root's socket and root's clients (PAM, units) */
        PRIORITY_CLIENTS = SD_EVENT_PRIORITY_NORMAL,    /* requests of connected clients */
        PRIORITY_BATCH = SD_EVENT_PRIORITY_NORMAL + 10, /* group commit: once the requests ready are read */
        PRIORITY_ACCEPT = SD_EVENT_PRIORITY_NORMAL + 20,/* new connections, a bounded number a turn */
};

typedef struct Client Client;
typedef struct StatusJob StatusJob;
typedef struct UserUse UserUse;
typedef struct UserName UserName;
typedef struct Server Server;
typedef struct Conns Conns;
typedef struct StatusLine StatusLine;
typedef struct Anchors Anchors;

/* What one uid holds of the agent: connections in every state, the bytes
 * of output queued for them, STATUS requests under way; and what it may
 * still use: new connections (a rate, as a theoretical arrival time that
 * runs ahead of the clock by what the burst used) and looks by name for
 * anchors with a full backlog (each a walk of every unix socket). */
struct UserUse {
        uid_t uid;
        size_t n_clients;
        size_t out_bytes;
        size_t n_status;
        usec_t connect_tat;
        usec_t name_look;
        /* The names of this uid's requests from here whose keys may still
         * be in Redis: each until its life there ends after the uid's last
         * lease on it went here (USEC_INFINITY while one holds or waits). */
        UserName *names;
        size_t n_names, cap_names;
};


typedef enum RedisState {
        REDIS_CONNECTING,       /* first attempt (or a retry after READY) under way */
        REDIS_READY,            /* connected, authenticated, scripts loaded, epoch known */
        REDIS_DOWN,             /* the last attempt failed; retrying */
} RedisState;

struct StatusJob {
        Agent *agent;
        Client *client;         /* NULL once the client went */
        uid_t uid;              /* who asked */
        UserUse *user;          /* … and what it holds */
        unsigned pending;
        long long now_ms;
        bool summary;           /* METRICS: each name's counts only, idle names too */
};

struct Client {
        Agent *agent;
        LIST_FIELDS(Client, clients);
        LIST_FIELDS(Client, finished);  /* done, nothing left to write: freed on the next turn */
        bool in_finished;
        int fd;
        sd_event_source *io_source;
        uint32_t events;                /* what io_source waits for */
        struct ucred cred;
        UserUse *user;                  /* what its uid holds of the agent */
        int pidfd;                      /* without SO_PEERPIDFD: the client's process, from accept */
        uint64_t start_time;            /* … and when it started */
        usec_t accepted;
        usec_t out_progress;            /* the last time output pending was written, or queued */
        bool got_request;
        bool close_after_flush;
        Lease *lease;
        StatusJob *status;
        Client **op_ref;                /* DRAIN, REVOKE under way: its pointer to this client, cleared when it goes */
        Request *deferred;              /* a request that waits for Redis (requests.c), or NULL */
        bool watching;                  /* WATCH: told CHANGED until it goes */
        char *out;
        size_t out_start;       /* the output not yet written: out_len bytes from here */
        size_t out_len;
        size_t out_size;
        LineReader in;
};

/* What the agent keeps of a lease beside the engine: its anchor watch and
 * its timer. An anchor whose backlog is full (anyone can fill it) is
 * watched by name until a watch connection sticks (by_name). */
typedef struct LeaseIo LeaseIo;
struct LeaseIo {
        Agent *agent;
        Lease *lease;
        int watch_fd;
        sd_event_source *watch_source;
        sd_event_source *timer_source;
        bool by_name;
        LIST_FIELDS(LeaseIo, by_name);
        usec_t rewatch_window;          /* CLOCK_MONOTONIC: when the current window began */
        unsigned rewatches;             /* watches made again in it */
        uint64_t requester_start;       /* the asking process' start time (0: unknown), for tell_lost */
        sd_event_source *kill_source;   /* its unit's SIGKILL before the slot moves on: freed with it, for a
                                         * unit whose anchor closed has stopped, and the unit's next run is
                                         * another job */
        char *kill_unit;                /* the unit or session scope being stopped, killed at kill_at
                                         * (CLOCK_MONOTONIC): in the host's record, so that an agent
                                         * restarted meanwhile still kills it */
        usec_t kill_at;
};

struct Agent {
        sd_event *event;
        Config *config;
        Server *server;                 /* the listening side's own (server.c) */
        Engine engine;

        struct RedisIo *redis_io;       /* the Redis layer's own (redis-layer.h) */
        char master_name[300];          /* sentinel: "host:port" of the master followed */
        usec_t master_since;            /* … CLOCK_REALTIME of the last change */
        RedisState state;               /* cluster: up while any shard is */
        char redis_error[900];
        /* Why Redis is down, a state of protocol.c's table ("unreachable",
         * "timeout", "library-newer", ...), whose code requests are told:
         * unavailable (on_error applies) or misconfigured (refused until
         * an operator acts). */
        const char *redis_error_state;
        char redis_name[300];           /* address without password, for logs */
        /* Redis is up, but nothing new is granted, whatever clients'
         * on_error says, until an operator acts; holders keep their slots
         * (counted, and renewed). A server that may evict fleetsem's keys
         * (a maxmemory-policy other than noeviction): its policy ("?": it
         * does not say) and its name, "" while none evicts; or one whose
         * ACL refuses the check of its library. refuse_state: why, a row
         * of protocol.c's table ("eviction", "NOPERM"), NULL while
         * nothing is refused; refuse_text: what requests are told. */
        char evict_policy[REDIS_POLICY_MAX];
        char evict_server[300];
        const char *refuse_state;
        char refuse_text[700];
        /* Redis' state changed (up, down, another master): what the rest
         * of the agent does then, set by main.c, so that redis-io.c calls
         * nothing above it. */
        void (*redis_changed)(Agent *a);
        /* A wake message of any name, heard while someone watches. */
        void (*fleet_changed)(Agent *a);
        size_t n_watching;              /* root's clients that WATCH (every name's wake-ups) */
        bool adopted;                   /* this host's leases re-adopted (adopt.c), once */
        bool adopting;                  /* … under way: a RELEASE waits for it */

        Client *clients;
        size_t n_clients;
        Conns *conns;                   /* the connections' own (conn.c) */
        StatusLine *status_line;        /* the systemd status line's own (status-reply.c) */
        char host_key[IDENT_MAX_LEN * 2 + 16];
        usec_t host_index_kept;         /* when a renewal last set its TTL (redis-engine.c) */
        int record_fd;                  /* this host's own record of the slots it holds itself (adopt.c), -EBADF none */
        int run_record_fd;              /* ... of its anchored leases (adopt.c), -EBADF: in record_fd */
        sd_id128_t boot_id;             /* this boot's, which the record's marks carry ... */
        bool boot_known;                /* ... when it could be read (none written, none believed, else) */
        char names_key[IDENT_MAX_LEN + 16];
        usec_t names_trimmed;           /* when the names index was last trimmed (redis-engine.c) */
        uint64_t names_refused;         /* requests refused past max_redis_names_per_user (requests.c) */

        Anchors *anchors;               /* the anchors' own (lease-io.c) */
        size_t n_watch_fds;             /* held for anchors */
        size_t n_pidfds;                /* held for clients (kernels without SO_PEERPIDFD) */
};

/* The Redis layer (redis-layer.h): redis-io.c */
int redis_io_start(Agent *a);
void redis_io_stop(Agent *a);
/* The library's text as an agent loads it (where keys are sharded, with
 * SPUBLISH); -ENOMEM, or -EBADMSG when the built-in text lacks the line
 * that says the wake command (a build that went wrong). */
#define LIBRARY_WAKE_LINE "local WAKE_COMMAND = 'PUBLISH'"
int library_text_new(bool sharded, char **ret);
/* … what its error r means, for a message. */
const char *library_text_error(int r);
/* FCALL fleetsem_version's reply: 0 and its version, whether its text is
 * the sharded one and the hash of its text (64 hex digits; "" where it
 * gives none, as before version 15, or one that is no such hash); -ENOENT
 * no library (no such function), -EOPNOTSUPP a server without FCALL
 * (before Redis 7.0, Valkey 7.2), -EBADMSG one whose version cannot be
 * read, -EIO another error (the ACL's). */
int library_version_parse(const RedisReply *reply, long long *ret_version, bool *ret_sharded, char ret_hash[static 65]);
/* What such a library is to this agent, whose text is the sharded one or
 * not: */
typedef enum LibraryMatch {
        LIBRARY_OWN,            /* its version and text */
        LIBRARY_OLDER,          /* an older version, or its version with the other wake command: replaced */
        LIBRARY_NEWER,          /* refused: this agent must be upgraded */
        LIBRARY_CHANGED,        /* its version, another text (hash): replaced, said as a warning */
} LibraryMatch;
LibraryMatch library_match(long long version, bool sharded, const char *hash, bool want_sharded);
/* How an epoch names its master (under Sentinel and in a Cluster), from
 * an INFO reply's text: its run id and replication id, 80 hex digits into
 * ret; -ENODATA when it gives a run id alone (ret holds it), -EBADMSG
 * when it gives none (ret ""). */
int master_id_parse(const char *s, size_t len, char ret[static 81]);
/* FUNCTION LIST LIBRARYNAME fleetsem WITHCODE's reply against text: 0
 * the same text, -ESTALE another text (or none), -EBADMSG a reply of
 * another shape, -EIO an error (redis_reply_error()). */
int library_code_parse(const RedisReply *reply, const char *text);
/* … batch.c: FCALL of script on the keys of name (NULL: the script's own keys,
 * n_keys of them first in args). cb gets the reply (NULL when the
 * connection went); when this fails, cb is not called. */
int script_call(Agent *a, Script script, const char *name, redis_reply_cb cb, void *userdata,
                size_t n_args, const char *const *args, const size_t *arglens);
/* … batch.c. A plain command on a key (argv[1]), sent where that key
 * lives, the one way script_call()'s calls go (routed, formatted once,
 * sent again on MOVED and ASK), but never batched; cb as above. With cb
 * NULL nobody waits for the reply (the hosts' and names' indexes): a
 * refusal is logged, naming argv[0] (a string literal), and a command issued while calls
 * wait for the end of the turn goes after them, in the same write. Such
 * commands keep their order among themselves. */
int redis_key_command(Agent *a, redis_reply_cb cb, void *userdata, int argc, const char *const *argv);
/* The Redis clock before which nobody is granted anything on name's server. */
uint64_t redis_grace_until(Agent *a, const char *name);
/* … redis-io.c: "cluster, 3 of 3 masters up" and the like, for status; "" otherwise. */
void redis_io_describe(Agent *a, char *buf, size_t size);
/* Drops every connection to Redis and the Sentinels and makes them again
 * (a new password): held slots are kept, as after a lost connection. */
void redis_io_reconnect(Agent *a, const char *why);
/* Whether every name's wake-ups are wanted (someone watches), not only
 * those of the names this host follows. */
void redis_io_watch_all(Agent *a, bool on);

/* The engine's effects (EngineOps), by the file that carries them out:
 * Redis' in redis-engine.c, the rest in lease-io.c. */
int io_call_acquire(void *ctx, Lease *l);
int io_call_release(void *ctx, const char *name, const char *lease, uid_t uid);
int io_call_renew(void *ctx, Name *n, const char (*ids)[LEASE_ID_LEN + 1], size_t n_ids, uid_t uid, bool host_held);
/* The ttl_ms and idle_ms a script call on a lease of name is told (a
 * slot the host holds: its own, longer). */
void io_lease_args(Agent *a, bool host_held, const char *name, uid_t uid, char ttl[static 24], char idle[static 24]);
int io_call_reassert(void *ctx, Lease *l);
/* The drain, revoke and limit scripts for root's DRAIN, REVOKE and LIMIT (operator.c). */
int io_call_drain(Agent *a, const char *name, bool on, uid_t uid, const char *user, const char *reason,
                  redis_reply_cb cb, void *userdata);
/* at_once: the slot freed now (a host known dead), else kept counted
 * until its holder releases it or must have fenced itself */
int io_call_revoke(Agent *a, const char *name, const char *lease, uid_t uid, const char *user, const char *reason,
                   const char *which, bool at_once, redis_reply_cb cb, void *userdata);
/* n 0: the fleet limit removed */
int io_call_limit(Agent *a, const char *name, uint32_t n, uid_t uid, const char *user, const char *reason,
                  redis_reply_cb cb, void *userdata);
/* which: REVOKE_HOLDERS, REVOKE_WAITERS or both (revoke.lua) */
#define REVOKE_HOLDERS "0"
#define REVOKE_WAITERS "w"
/* DRAIN name= on= [reason=], REVOKE name= lease= | host= [name=] [reason=]:
 * root only. */
void drain_request(Agent *a, Client *c, const Request *req);
void revoke_request(Agent *a, Client *c, const Request *req);
void limit_request(Agent *a, Client *c, const Request *req);
void io_index(void *ctx, const Lease *l, bool add);
/* The names index's entries whose names left Redis out of it (at most
 * once a second, unless now). */
void io_names_trim(Agent *a, bool now);
void io_name_waiting(void *ctx, Name *n);
void io_lease_timer(void *ctx, Lease *l, usec_t when);
void io_name_timer(void *ctx, Name *n, usec_t when);
void io_lease_drop(void *ctx, Lease *l);
void io_tell_lost(void *ctx, Lease *l, const char *why);
int io_random_id(void *ctx, char ret[LEASE_ID_LEN + 1]);
void io_log(void *ctx, int level, uid_t uid, usec_t now, const LogFields *fields, const char *message);
void io_name_drop(void *ctx, Name *n);
void io_send(void *ctx, void *client, const char *line, int len);
void io_finish(void *ctx, void *client);
int io_stop_job(void *ctx, Lease *l, const char *why, usec_t kill_at);
void io_changed(void *ctx);

/* lease-io.c */
/* watch_fd -EBADF: the anchor is alive by name only (its backlog is full). */
LeaseIo *lease_io_new(Agent *a, int watch_fd);
LeaseIo *lease_io_free(LeaseIo *io);
DEFINE_TRIVIAL_CLEANUP_FUNC(LeaseIo *, lease_io_free);
int lease_io_attach(LeaseIo *io, Lease *l);
/* The anchor of lease, for a watch: 0 with *ret_fd a connection and
 * *ret_uid its owner, or with *ret_fd -EBADF when it is alive by name only
 * (*ret_uid its owner, (uid_t) -1 when unknown); -ENOENT when the kernel
 * has no such name any more; other -errno when that cannot be told now. */
int anchor_probe(Agent *a, const char *lease, int *ret_fd, uid_t *ret_uid);
/* Anchors alive by name: a watch connection again, or gone by name. */
void lease_io_check_names(Agent *a);
int lease_io_start(Agent *a);
void lease_io_stop(Agent *a);

/* server.c: the listening sockets, accepting, housekeeping */
int server_start(Agent *a);
void server_stop(Agent *a);
/* A source of the host side could not be armed (r): without it clients
 * would wait for ever; the agent exits instead, its slots anchored for the
 * next agent (systemd starts it again). */
void server_fatal(Agent *a, int r, const char *what);

/* conn.c: a client's connection and output */
void client_send(Client *c, const char *line, int len);
void client_send_error(Client *c, const char *code, const char *format, ...) _printf_(3, 4);
/* Redis is not up: why, with the code of protocol.c's table (unavailable,
 * or misconfigured until an operator acts: then the text is the fix). */
void client_send_redis_down(Client *c);
/* The state of protocol.c's table for which nothing new is granted until
 * an operator acts (Redis refused, or one that may evict); NULL: none. */
const char *agent_refusing(const Agent *a);
void client_finish(Client *c);          /* close once the output is written */
Client *client_free(Client *c);         /* close now */
DEFINE_TRIVIAL_CLEANUP_FUNC(Client *, client_free);
void client_sweep(Agent *a);            /* drop clients that never sent a request, or do not read */
/* Writes what it can of the output; -errno when the client must go. */
int client_flush(Client *c);
void client_update_events(Client *c);
/* After its request: reads to the end; -ECONNRESET when it went (freed). */
int client_drain(Client *c);
/* Clients done with nothing left to write: freed on the next turn of
 * the loop, all at once. */
int conns_start(Agent *a);
void conns_stop(Agent *a);

/* requests.c: a client's request */
int client_io(sd_event_source *s, int fd, uint32_t revents, void *userdata);
/* STATUS and METRICS asked while the first connection to Redis was made:
 * answered now that Redis is up, or down. */
void requests_resume_deferred(Agent *a);

/* budgets.c: what each uid may use, and the file descriptors left */
/* New connections of one non-root uid: CONNECT_RATE a second, in bursts of
 * up to twice max_clients_per_user (so a burst meets that cap first); past
 * it a connection is refused at once, before anything of it is read. */
#define CONNECT_RATE 100
UserUse *user_use_get(uid_t uid);       /* NULL: out of memory */
void user_use_maybe_free(UserUse *u);
/* max_redis_names_per_user: whether u may ask for name now (it has it in
 * Redis already, or fewer than max names there); whether it may, name is
 * in its names while a lease of it is here (user_name_used()). */
bool user_may_use_name(UserUse *u, const char *name, unsigned max, usec_t now);
/* … the names u has in Redis now, from here. */
size_t user_names_live(UserUse *u, usec_t now);
/* name asked for by u (until USEC_INFINITY), or its last lease of it gone
 * here (until: when its keys' life in Redis ends); -ENOMEM. */
int user_name_used(UserUse *u, const char *name, usec_t until);
/* Whether u may open one more connection now (root always may). */
bool user_may_connect(UserUse *u, unsigned burst, usec_t now);
/* Whether u may have an anchor looked for by name now: one a second. */
bool user_may_look_by_name(UserUse *u, usec_t now);
/* Too many clients of every user together: past max_clients, and a
 * sixteenth of it kept for root. */
bool agent_too_many_clients(const Agent *a, uid_t uid);
/* Whether a request of uid must be refused as busy: the agent is near its
 * file descriptor limit (a reserve is kept, a smaller one for root). */
bool agent_short_of_fds(const Agent *a, uid_t uid);
void fd_budget_init(void);

/* terminal.c */
typedef struct ProcStat {
        char comm[64];
        pid_t ppid;
        dev_t tty;              /* the controlling terminal (0: none) */
        uint64_t start;         /* clock ticks after boot: with the pid, one process */
} ProcStat;
/* One line of /proc/PID/stat (buf is changed); -EBADMSG when it is not
 * one. */
int proc_stat_parse(char *buf, ProcStat *ret);
/* One read of /proc/PID/FILE into buf, NUL-terminated (the kernel makes
 * such a file whole at its first read): its length, or -errno. */
ssize_t proc_file_read(pid_t pid, const char *file, char *buf, size_t size);
int proc_stat_read(pid_t pid, ProcStat *ret);
/* The real uid in the text of /proc/PID/status (its "Uid:" line's first
 * number); -EBADMSG without one. */
int proc_status_uid_parse(const char *text, uid_t *ret);
/* Up to n pids from the text of /proc/PID/task/TID/children (pids and
 * spaces), the list cut at the first word that is no pid. */
size_t proc_children_parse(const char *text, pid_t *ret, size_t n);
/* Writes text to the terminal of process pid if it is still the process
 * that started at start; ret_path: the terminal, as far as it was found.
 * -ESRCH: that process is gone; -ENXIO: it has no terminal; -ENODEV: it
 * has one this agent has no device node of (a virtual console or a serial
 * line, under the unit's PrivateDevices=, which leaves it /dev/pts only);
 * -EACCES: the terminal takes no messages (mesg n); -EPERM: it is not its
 * user's. */
int terminal_tell(pid_t pid, uint64_t start, const char *text, char *ret_path, size_t size);

/* describe.c */
/* The requester's description, stored in Redis with its record and shown
 * by status; ret_holder: its label in the journal ("alice@web-3 pid 42
 * (backup.service)", LEASE_HOLDER_MAX), from the same facts, never read
 * back from the description. ret_start: the requester's start time
 * (proc(5), 0 when unknown). reason: non-NULL for a slot the host holds
 * itself ("" no reason given). */
char *requester_describe(Agent *a, const struct ucred *uc, uint32_t slots, const char *known_unit, const char *reason,
                         char ret_holder[static LEASE_HOLDER_MAX], uint64_t *ret_start);
/* A holder's label for the journal: "USER@HOST pid PID (WHAT)" (the uid
 * when the user has no name, no pid when pid <= 0, "?" for no what). */
void holder_label(Agent *a, uid_t uid, pid_t pid, const char *what, char *ret, size_t size);
/* config_permits() with NSS answers cached (see describe.c): 1 yes, 0 no,
 * -errno when the user could not be looked up (answer "busy"). */
int user_permits(Agent *a, uid_t uid, const char *name);
void user_cache_clear(void);

/* adopt.c */
void adopt_start(Agent *a);
/* The engine's index and release ops: Redis' index and this host's own
 * record (adopt.c); the record opened at start (its two folders). */
void host_index(void *ctx, const Lease *l, bool add);
void host_record(void *ctx, const Lease *l, bool renewed);
int host_call_release(void *ctx, const char *name, const char *lease, uid_t uid);
void host_record_open(Agent *a);

/* status-reply.c */
/* name "": every name in use. summary: a NAME line for each (idle ones
 * too), without holders and waiters. */
void status_request(Agent *a, Client *c, const char *name, bool summary);
void status_mark_dirty(Agent *a);
int status_start(Agent *a);
void status_stop(Agent *a);

/* metrics-reply.c */
void metrics_request(Agent *a, Client *c);

/* units.c */
/* At accept: where the kernel cannot give the peer's pidfd later
 * (SO_PEERPIDFD, Linux 6.5), holds a pidfd of the client's process now. */
void unit_peer_accepted(Client *c);
/* The service the client runs in, read race-free: -ESRCH when the process
 * that connected is gone (its pid may belong to another by now). */
int unit_of_client(Client *c, char **ret);
/* Whether the process behind c's pid is still the one that connected
 * (its pidfd alive; on kernels before SO_PEERPIDFD also started at
 * start, from proc_stat_read(), as it did when it connected). */
bool client_is_peer(Client *c, uint64_t start);
/* Stops unit and kills what is left of it at kill_at (CLOCK_MONOTONIC);
 * with ret_kill, the kill's timer is the caller's to keep (freeing it
 * cancels the kill), else it stands on its own. */
void unit_stop(Agent *a, const char *unit, const char *why, usec_t stop_at, usec_t kill_at,
               sd_event_source **ret_kill);
/* "session-ID.scope", as logind names a login session's scope. */
bool session_scope_is_valid(const char *s);
/* The uid a service runs as, from systemd (User=; root when unset). */
int unit_user(Agent *a, const char *unit, uid_t *ret_uid);
/* > 0 when unit runs (ActiveState active or reloading: past its
 * ExecStartPre=, so past its acquire), 0 when not, < 0 when systemd does
 * not say. */
int unit_running(Agent *a, const char *unit);
/* > 0 when unit has processes that may run (any ActiveState but inactive
 * and failed), 0 when not (or no such unit), < 0 when systemd does not
 * say. */
int unit_live(Agent *a, const char *unit);
void units_close(void);

