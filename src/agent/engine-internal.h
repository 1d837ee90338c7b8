/* SPDX-License-Identifier: MIT */
#pragma once

/* What the agent's engine files (engine.c, redis-link.c, renew.c, adopt.c,
 * status.c) share among themselves. */

#include "agent.h"
#include "log.h"
#include "lua-keys.h"

#define GRANTS_MAX 64            /* waiters one release may hand slots to, as parsed */
#define RENEW_BATCH 1000
#define CONNECT_TIMEOUT (2 * USEC_PER_SEC)
#define COMMAND_TIMEOUT (5 * USEC_PER_SEC)
#define BACKOFF_MIN (100 * USEC_PER_MSEC)
#define BACKOFF_MAX (2 * USEC_PER_SEC)
#define RECHECK_SAFETY (5 * USEC_PER_SEC)
#define POSITION_EVERY (1 * USEC_PER_SEC)       /* a waiter hears of its new place at most this often */
#define DESC_MAX 1024
#define NAMES_IDLE_MAX 4096
#define NAME_IDLE_TIME (10 * USEC_PER_MINUTE)

int lease_cmp(const void *x, const void *y);
Lease *lease_find(Agent *a, const char *id);
Name *name_find(Agent *a, const char *name);
void fire_and_forget_reply(RedisConn *conn, const RedisReply *reply, void *userdata);
void redis_command(Agent *a, const char *what, int argc, const char *const *argv);
int script_call(Agent *a, Script script, const char *name, redis_reply_cb cb, void *userdata, size_t n_args, const char *const *args, const size_t *arglens);
void lease_check(Lease *l);
LogFields lease_fields(const Lease *l);
void lease_lost(Lease *l, const char *why);
int lease_new(Agent *a, const char *name, const char *id, uint32_t slots, uid_t uid, pid_t pid, int watch_fd, char *desc, Lease **ret);
Lease *lease_ref(Lease *l);
void lease_release(Lease *l, const char *why);
void lease_set_state(Lease *l, LeaseState state);
void lease_unref(Lease *l);
void name_recheck(Name *n);
void name_index(Name *n);

/* A waiter granted a slot by someone's release, in Redis already. */
typedef struct Granted {
        char lease[LEASE_ID_LEN + 1];
        uint64_t token;
        uint64_t since_ms;
} Granted;
/* Grants those that wait here; move_up: the others waiting here moved up
 * in line by as many (each grant came from the head of the line). */
void name_granted(Name *n, const Granted *g, size_t k, bool move_up);
/* "LEASE TOKEN SINCE ..." (a wake message after "g ") → Granted[]; -EBADMSG. */
int granted_parse(const char *s, Granted *g, size_t max, size_t *ret_k);
void name_subscribe(Name *n);
void name_sweep(Agent *a, bool all);
void release_in_redis(Agent *a, const char *name, const char *lease);
int on_renew_tick(sd_event_source *s, uint64_t usec, void *userdata);
void renew_all(Agent *a, bool reassert);
usec_t lost_after(const Agent *a);
void adopt_start(Agent *a);
void index_add(Lease *l);
int on_status_timer(sd_event_source *s, uint64_t usec, void *userdata);
void redis_went_down(Agent *a, int error, const char *why);
void connect_all(Agent *a);
int on_reconnect(sd_event_source *s, uint64_t usec, void *userdata);
