/* SPDX-License-Identifier: MIT */
#pragma once

/* The only place that sees hiredis: an asynchronous connection driven by
 * sd-event, and checked accessors for replies. Errors come back as -errno;
 * the hiredis error string is logged at debug level. */

#include <stdbool.h>
#include <stddef.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "macro.h"
#include "time-util.h"

typedef struct RedisConn RedisConn;
typedef struct redisReply RedisReply;   /* opaque outside redis.c */

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
/* Closes (pending callbacks run with NULL, no state callback) and frees.
 * Safe from inside any callback of this connection. Accepts NULL;
 * returns NULL. */
RedisConn *redis_conn_free(RedisConn *c);
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

/* The error text of an error reply, or NULL. */
const char *redis_reply_error(const RedisReply *r);
int redis_reply_integer(const RedisReply *r, long long *ret);
/* A string or status reply (binary safe: see len). */
int redis_reply_string(const RedisReply *r, const char **ret, size_t *ret_len);
size_t redis_reply_array_len(const RedisReply *r);
/* An array, if empty too (redis_reply_array_len() is 0 for any other). */
bool redis_reply_is_array(const RedisReply *r);
const RedisReply *redis_reply_array_get(const RedisReply *r, size_t i);
/* A string element i of an array, copied NUL-terminated into buf; refuses
 * embedded NULs and strings that do not fit. */
int redis_reply_array_string(const RedisReply *r, size_t i, char *buf, size_t size);
int redis_reply_array_integer(const RedisReply *r, size_t i, long long *ret);

/* One command on a connection of its own, blocking, for a look from the
 * command line (fleetsemd --check-config): connect (no TLS), AUTH with
 * user and password if any, SELECT db, then argv; *ret (an error reply
 * too) for redis_reply_free(). -errno when it cannot connect, the AUTH or
 * SELECT is refused (-EACCES), or the timeout passes. */
typedef struct RedisProbe {
        const char *unix_path;          /* or NULL: host, port */
        const char *host;
        unsigned port;
        const char *user, *password;    /* NULL: no AUTH */
        unsigned db;
        usec_t timeout;
} RedisProbe;
int redis_probe(const RedisProbe *p, int argc, const char *const *argv, RedisReply **ret);
/* Accepts NULL; returns NULL. */
RedisReply *redis_reply_free(RedisReply *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(RedisReply *, redis_reply_free);

/* A blocking connection of its own, for tests that drive a real server
 * step by step (on a unix socket: redis_blocking_new()) and for the
 * command line's looks that take more than one command (logged in as
 * redis_probe() does: redis_probe_open()): commands may be pipelined
 * (append several, then take their replies in order). -errno when it
 * cannot connect or the connection failed; replies (errors too) for
 * redis_reply_free(). */
typedef struct RedisBlocking RedisBlocking;
int redis_probe_open(const RedisProbe *p, RedisBlocking **ret);
int redis_blocking_new(const char *unix_path, usec_t timeout, RedisBlocking **ret);
RedisBlocking *redis_blocking_free(RedisBlocking *b);
DEFINE_TRIVIAL_CLEANUP_FUNC(RedisBlocking *, redis_blocking_free);
int redis_blocking_append(RedisBlocking *b, int argc, const char *const *argv, const size_t *argvlen);
int redis_blocking_reply(RedisBlocking *b, RedisReply **ret);
/* append and reply in one. */
int redis_blocking_command(RedisBlocking *b, int argc, const char *const *argv, const size_t *argvlen,
                           RedisReply **ret);
