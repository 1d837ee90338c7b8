/* SPDX-License-Identifier: MIT */
#pragma once

/* The only place that sees hiredis: an asynchronous connection driven by
 * sd-event (its replies' accessors: redis-reply.h; blocking connections
 * of their own: redis-blocking.h). Errors come back as -errno;
 * the hiredis error string is logged at debug level. */

#include <stdbool.h>
#include <stddef.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "macro.h"
#include "redis-reply.h"
#include "time-util.h"

typedef struct RedisConn RedisConn;

/* reply is NULL when the connection went away before it came. */
typedef void (*redis_reply_cb)(RedisConn *c, const RedisReply *reply, void *userdata);
/* error == 0: connected; <0: failed or lost, message says why. */
typedef void (*redis_state_cb)(RedisConn *c, int error, const char *message, void *userdata);

/* Why c failed, for a reply callback that got no reply (the connection
 * went): TLS' reason when it has one, else hiredis' words; "" when it
 * has not failed. */
const char *redis_conn_error(RedisConn *c, char *buf, size_t size);

int redis_conn_new(sd_event *e, const RedisAddress *a, usec_t connect_timeout,
                   redis_state_cb cb, void *userdata, RedisConn **ret);
/* Drops the connection (pending callbacks run with NULL, no state
 * callback) and frees it; with calls unanswered or bytes unsent, the
 * socket is reset, so that nothing of it reaches Redis after the drop.
 * Safe from inside any callback of this connection. Accepts NULL;
 * returns NULL. */
RedisConn *redis_conn_free(RedisConn *c);
/* The same, but closed as sockets are: what was sent is still delivered
 * (the agent stops: its last releases go out). */
RedisConn *redis_conn_close(RedisConn *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(RedisConn *, redis_conn_free);
bool redis_conn_is_connected(const RedisConn *c);
/* Commands sent but not answered yet, and when the last reply came. */
size_t redis_conn_pending(const RedisConn *c);
usec_t redis_conn_last_activity(const RedisConn *c);

/* A command in Redis' wire format, built once from its arguments
 * (argvlen NULL: C strings): a call that may be sent again (a redirect)
 * keeps it and is never formatted again. Freed with redis_command_free(). */
int redis_command_format(int argc, const char *const *argv, const size_t *argvlen, char **ret_cmd, size_t *ret_len);
char *redis_command_free(char *cmd);
/* Sends a command formatted already; cb hears its reply (NULL: the
 * connection went). */
int redis_conn_send_formatted(RedisConn *c, redis_reply_cb cb, void *userdata, const char *cmd, size_t len);
/* The same from arguments, for a command sent once on this connection:
 * the set-up, the topologies' own questions. (The agent's calls on names
 * and keys, routed to a server and sent again where Redis says, go through
 * its calls.c, which formats each once and uses the above.) */
int redis_conn_command(RedisConn *c, redis_reply_cb cb, void *userdata,
                       int argc, const char *const *argv, const size_t *argvlen);
/* Pub/sub: one handler per connection sees every subscription confirmation
 * and message (and NULL when the connection goes). */
void redis_conn_set_message_handler(RedisConn *c, redis_reply_cb cb, void *userdata);
int redis_conn_subscribe(RedisConn *c, const char *channel);
/* Sharded pub/sub (Redis 7): SSUBSCRIBE, its "smessage"s to the same
 * handler. (hiredis before 1.2 routes pushes by the channels it saw
 * SUBSCRIBEd, so the channel is also subscribed plainly: nothing is ever
 * PUBLISHed on it, only SPUBLISHed.) */
int redis_conn_ssubscribe(RedisConn *c, const char *channel);
/* PSUBSCRIBE (on) or PUNSUBSCRIBE a pattern: its "pmessage"s (of four
 * elements) to the same handler. */
int redis_conn_psubscribe(RedisConn *c, const char *pattern, bool on);

/* What this build can do with Redis, for --version: the hiredis it was
 * built with, and whether TLS is in ("TLS to Redis: no (…)"). */
const char *redis_build_features(void);
