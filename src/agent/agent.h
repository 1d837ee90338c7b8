/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "macro.h"
#include "list.h"
#include "names.h"
#include "protocol.h"
#include "redis.h"
#include "socket-util.h"
#include "time-util.h"

typedef struct Agent Agent;
typedef struct Client Client;
typedef struct Lease Lease;
typedef struct Name Name;
typedef struct StatusJob StatusJob;

struct StatusJob {
        Agent *agent;
        Client *client;         /* NULL once the client went */
        unsigned pending;
        long long now_ms;
};

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
        REDIS_READY,            /* connected, authenticated, scripts loaded */
        REDIS_DOWN,             /* the last attempt failed; retrying */
} RedisState;

typedef enum LeaseState {
        LEASE_WAITING,
        LEASE_HELD,
        LEASE_GONE,             /* released or lost; only references keep it */
} LeaseState;

struct Lease {
        unsigned n_ref;
        Agent *agent;
        char id[LEASE_ID_LEN + 1];
        Name *name;
        LIST_FIELDS(Lease, by_name);
        LeaseState state;
        uint32_t slots;
        uid_t uid;
        pid_t pid;
        char *desc;             /* holder description stored in Redis */
        char holder[128];       /* the same for people: "alice@web-3 pid 42 (backup.service)" */
        char *unit;             /* the systemd service the slot is bound to, or NULL */
        bool stop_on_lost;      /* stop that unit if the slot is lost */
        uint64_t token;
        uint64_t since_ms;
        uint32_t position;      /* last known place in line */
        bool position_unsent;   /* changed since it was last reported */
        usec_t queued_sent;     /* CLOCK_MONOTONIC of the last QUEUED sent */
        int watch_fd;           /* connection to the anchor */
        sd_event_source *watch_source;
        Client *client;         /* waiting for a grant, or listening for LOST */
        sd_event_source *deadline_source;
        sd_event_source *recheck_source;
        bool no_wait;
        bool check_inflight;
        bool check_again;
        bool enqueued;          /* has a place in the Redis queue */
        uint64_t seq;           /* order of joining the queue, as its ticket (0: not yet) */
        uint64_t check_id;      /* the last acquire check sent for it */
        /* A grant learned while an earlier lease of this agent may hold one
         * with a lower token not yet heard of (see grant_in_order()). */
        bool grant_pending;
        uint64_t pending_token;
        uint64_t pending_since;
        uint64_t gate_after;    /* blocks a pending grant: cleared by a check after this one */
        bool gate_cleared;
        usec_t renewed;         /* CLOCK_MONOTONIC of the last confirmed renewal */
};

struct Name {
        Agent *agent;
        char *name;
        LIST_FIELDS(Name, all);
        Lease *leases;
        size_t n_waiting;
        size_t n_held;
        unsigned subscribed_generation; /* pub/sub connection it subscribed on */
        usec_t idle_since;              /* when its last lease went */
        sd_event_source *positions_source; /* reports moved-up places in line */
};

struct Client {
        Agent *agent;
        LIST_FIELDS(Client, clients);
        int fd;
        sd_event_source *io_source;
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

typedef struct PendingRelease PendingRelease;
struct PendingRelease {
        Agent *agent;
        LIST_FIELDS(PendingRelease, all);
        char name[NAME_MAX_LEN + 1];
        char lease[LEASE_ID_LEN + 1];
};

struct Agent {
        sd_event *event;
        Config *config;
        int listen_fd;
        sd_event_source *listen_source;

        RedisConn *cmd;
        RedisConn *sub;
        RedisState state;
        bool sub_ready;
        unsigned sub_generation;
        unsigned setup_pending;         /* replies awaited before READY */
        bool setup_failed;
        char redis_error[256];
        char redis_name[300];           /* address without password, for logs */
        usec_t backoff;
        sd_event_source *reconnect_source;
        sd_event_source *renew_source;
        sd_event_source *status_source;
        char sha[N_SCRIPTS][41];
        char *script_text[N_SCRIPTS];
        bool adopted;
        size_t adopt_pending;           /* re-adoption: replies still awaited */
        size_t adopt_count;
        usec_t adopt_started;

        void *lease_tree;               /* tsearch(): id → Lease */
        void *name_tree;                /* tsearch(): name → Name */
        Name *names;
        size_t n_names;
        uint64_t queue_seq;
        uint64_t check_counter;
        size_t n_leases;
        size_t n_held;
        size_t n_waiting;

        Client *clients;
        size_t n_clients;
        PendingRelease *pending_releases;
        char host_key[IDENT_MAX_LEN * 2 + 16];
        char names_key[IDENT_MAX_LEN + 16];
        bool status_dirty;
        sd_bus *bus;                    /* to systemd, opened when first needed */
};

/* engine.c */
int engine_start(Agent *a);
void engine_stop(Agent *a);
void engine_acquire(Agent *a, Client *c, const Request *req);
void engine_release_request(Agent *a, Client *c, const Request *req);
void engine_status(Agent *a, Client *c, const char *name);
void engine_status_deferred(Agent *a);  /* answers them once Redis is up, or down */
void engine_client_gone(Agent *a, Client *c);
void engine_mark_status_dirty(Agent *a);

/* server.c */
int server_start(Agent *a);
void server_stop(Agent *a);
void client_send(Client *c, const char *line, int len);
void client_send_error(Client *c, const char *code, const char *format, ...) _printf_(3, 4);
void client_finish(Client *c);          /* close once the output is written */
void client_sweep(Agent *a);            /* drop clients that never sent a request */

/* units.c */
int unit_of_pid(pid_t pid, char **ret);
void unit_stop(Agent *a, const char *unit, const char *why);
void units_close(Agent *a);

/* lua-scripts.c (generated) */
extern const char *const lua_prelude;
extern const char *const lua_scripts[N_SCRIPTS];
