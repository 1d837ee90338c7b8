/* SPDX-License-Identifier: MIT */
#pragma once

#include "redis-reply.h"
#include "time-util.h"

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
