/* SPDX-License-Identifier: MIT */
#pragma once

/* The agent's I/O around the slot engine (slots.h): clients on the
 * listening socket (server.c), Redis (redis-io.c), anchors and timers
 * (lease-io.c), descriptions of requesters (describe.c), re-adoption
 * (adopt.c), status (status.c), systemd units (units.c). */

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "list.h"
#include "macro.h"
#include "names.h"
#include "protocol.h"
#include "redis.h"
#include "slots.h"
#include "socket-util.h"
#include "time-util.h"

typedef struct Agent Agent;
typedef struct Client Client;
typedef struct StatusJob StatusJob;

typedef enum Script {
        SCRIPT_ACQUIRE,
        SCRIPT_RELEASE,
        SCRIPT_RENEW,
        SCRIPT_REASSERT,
        SCRIPT_ADOPT,
        SCRIPT_STATUS,
        SCRIPT_EPOCH,
        N_SCRIPTS,
} Script;

typedef enum RedisState {
        REDIS_CONNECTING,       /* first attempt (or a retry after READY) under way */
        REDIS_READY,            /* connected, authenticated, scripts loaded, epoch known */
        REDIS_DOWN,             /* the last attempt failed; retrying */
} RedisState;

struct StatusJob {
        Agent *agent;
        Client *client;         /* NULL once the client went */
        uid_t uid;              /* who asked */
        unsigned pending;
        long long now_ms;
};

struct Client {
        Agent *agent;
        LIST_FIELDS(Client, clients);
        int fd;
        sd_event_source *io_source;
        uint32_t events;                /* what io_source waits for */
        struct ucred cred;
        usec_t accepted;
        bool got_request;
        bool close_after_flush;
        Lease *lease;
        StatusJob *status;
        bool status_deferred;           /* STATUS asked while the first connection to Redis is made */
        char status_name[NAME_MAX_LEN + 1];
        char *out;
        size_t out_len;
        size_t out_size;
        LineReader in;
};

/* What the agent keeps of a lease beside the engine: its anchor watch and
 * its timer. */
typedef struct LeaseIo {
        Agent *agent;
        Lease *lease;
        int watch_fd;
        sd_event_source *watch_source;
        sd_event_source *timer_source;
} LeaseIo;

struct Agent {
        sd_event *event;
        Config *config;
        int listen_fd;
        sd_event_source *listen_source;
        Slots slots;

        RedisConn *cmd;
        RedisConn *sub;
        /* sentinel://: a connection to one Sentinel, first to ask for the
         * master, then to hear of +switch-master; the master it named. */
        RedisConn *sentinel;            /* subscribed to +switch-master */
        RedisConn *sentinel_query;      /* asking for the master's address */
        unsigned sentinel_next, sentinel_query_next;    /* which Sentinel next */
        bool sentinel_subscribed;
        RedisAddress master;            /* host and port only */
        char master_run_id[48];
        char master_name[300];          /* "host:port", for logs and status */
        usec_t master_since;            /* CLOCK_REALTIME of the last change */
        RedisState state;
        bool sub_ready;
        unsigned sub_generation;
        unsigned setup_pending;         /* replies awaited before READY */
        bool setup_failed;
        char redis_error[256];
        char redis_name[300];           /* address without password, for logs */
        usec_t backoff;
        sd_event_source *reconnect_source;
        sd_event_source *tick_source;
        sd_event_source *status_source;
        char sha[N_SCRIPTS][41];
        char *script_text[N_SCRIPTS];
        char epoch[LEASE_ID_LEN + 1];   /* the Redis state this agent knows ("" before the first) */
        uint64_t grace_until_ms;        /* Redis clock: nobody is granted anything before */
        bool adopted;
        size_t adopt_pending;           /* re-adoption: replies still awaited */
        size_t adopt_count;
        usec_t adopt_started;

        Client *clients;
        size_t n_clients;
        char host_key[IDENT_MAX_LEN * 2 + 16];
        char names_key[IDENT_MAX_LEN + 16];
        char owner[IDENT_MAX_LEN + 16]; /* "HOST" as scripts record it, without the uid */
        bool status_dirty;
        sd_bus *bus;                    /* to systemd, opened when first needed */
};

/* redis-io.c */
int redis_io_start(Agent *a);
void redis_io_stop(Agent *a);
/* EVALSHA of script on the keys of name (NULL: the script's own keys,
 * n_keys of them first in args). cb gets the reply (NULL when the
 * connection went); when this fails, cb is not called. */
int script_call(Agent *a, Script script, const char *name, redis_reply_cb cb, void *userdata,
                size_t n_args, const char *const *args, const size_t *arglens);
void redis_command(Agent *a, const char *what, int argc, const char *const *argv);
usec_t now_mono(void);

/* The engine's effects (SlotsOps), by the file that carries them out. */
int io_call_acquire(void *ctx, Lease *l);
int io_call_release(void *ctx, const char *name, const char *lease, uid_t uid);
int io_call_renew(void *ctx, Name *n, const char (*ids)[LEASE_ID_LEN + 1], size_t n_ids);
int io_call_reassert(void *ctx, Lease *l);
void io_index(void *ctx, const Lease *l, bool add);
void io_name_waiting(void *ctx, Name *n);
void io_lease_timer(void *ctx, Lease *l, usec_t when);
void io_name_timer(void *ctx, Name *n, usec_t when);
void io_lease_drop(void *ctx, Lease *l);
void io_name_drop(void *ctx, Name *n);
void io_send(void *ctx, void *client, const char *line, int len);
void io_finish(void *ctx, void *client);
void io_stop_unit(void *ctx, const char *unit, const char *why);
void io_changed(void *ctx);

/* lease-io.c */
LeaseIo *lease_io_new(Agent *a, int watch_fd);
void lease_io_free(LeaseIo *io);
int lease_io_attach(LeaseIo *io, Lease *l);

/* server.c */
int server_start(Agent *a);
void server_stop(Agent *a);
void client_send(Client *c, const char *line, int len);
void client_send_error(Client *c, const char *code, const char *format, ...) _printf_(3, 4);
void client_finish(Client *c);          /* close once the output is written */
void client_sweep(Agent *a);            /* drop clients that never sent a request */

/* describe.c */
char *describe(Agent *a, const struct ucred *uc, uint32_t slots, const char *known_unit);

/* adopt.c */
void adopt_start(Agent *a);

/* status.c */
void status_request(Agent *a, Client *c, const char *name);
void status_deferred(Agent *a);         /* answers them once Redis is up, or down */
void status_mark_dirty(Agent *a);
int on_status_timer(sd_event_source *s, uint64_t usec, void *userdata);

/* units.c */
int unit_of_pid(pid_t pid, char **ret);
void unit_stop(Agent *a, const char *unit, const char *why);
void units_close(Agent *a);

/* lua-scripts.c (generated) */
extern const char *const lua_prelude;
extern const char *const lua_scripts[N_SCRIPTS];
