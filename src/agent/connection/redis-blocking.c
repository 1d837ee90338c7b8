/* SPDX-License-Identifier: MIT */
/* Blocking connections of their own (redis-blocking.h): the command
 * line's looks at Redis and the tests' step by step. */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <string.h>

#include "log.h"
#include "redis-blocking.h"
#include "redis-internal.h"

/* ---- A blocking look, for fleetsemd --check-config --------------------------------- */

static int probe_call(redisContext *c, int argc, const char *const *argv, redisReply **ret) {
        redisReply *reply = redisCommandArgv(c, argc, (const char **) argv, NULL);

        if (!reply) {
                log_debug("Redis probe: %s", c->errstr);
                return redis_errno(c->err, errno);
        }
        if (reply->type == REDIS_REPLY_ERROR && ret == NULL) {
                log_debug("Redis probe: %s refused: %s", argv[0], reply->str);
                freeReplyObject(reply);
                return -EACCES;
        }
        if (ret)
                *ret = reply;
        else
                freeReplyObject(reply);
        return 0;
}

struct RedisBlocking {
        redisContext *c;
};

int redis_probe_open(const RedisProbe *p, RedisBlocking **ret) {
        struct timeval tv = { .tv_sec = (time_t) (p->timeout / USEC_PER_SEC),
                              .tv_usec = (suseconds_t) (p->timeout % USEC_PER_SEC) };
        _cleanup_(redis_blocking_freep) RedisBlocking *b = NULL;
        char db[16];
        int r;

        b = calloc(1, sizeof(*b));
        if (!b)
                return -ENOMEM;
        b->c = p->unix_path ? redisConnectUnixWithTimeout(p->unix_path, tv) : redisConnectWithTimeout(p->host, p->port, tv);
        if (!b->c)
                return -ENOMEM;
        if (b->c->err) {
                log_debug("Redis probe: cannot connect: %s", b->c->errstr);
                return redis_errno(b->c->err, errno);
        }
        if (redisSetTimeout(b->c, tv) != REDIS_OK)
                return -EIO;
        if (p->password) {
                const char *auth[3] = { "AUTH", p->user ?: p->password, p->password };

                r = probe_call(b->c, p->user ? 3 : 2, auth, NULL);
                if (r < 0)
                        return r;
        }
        if (p->db > 0) {
                snprintf(db, sizeof(db), "%u", p->db);
                r = probe_call(b->c, 2, (const char *[]) { "SELECT", db }, NULL);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(b);
        return 0;
}

int redis_probe(const RedisProbe *p, int argc, const char *const *argv, RedisReply **ret) {
        _cleanup_(redis_blocking_freep) RedisBlocking *b = NULL;
        int r = redis_probe_open(p, &b);

        return r < 0 ? r : probe_call(b->c, argc, argv, (redisReply **) ret);
}

/* ---- A blocking connection, for tests ------------------------------------------------ */

int redis_blocking_new(const char *unix_path, usec_t timeout, RedisBlocking **ret) {
        return redis_probe_open(&(RedisProbe) { .unix_path = unix_path, .timeout = timeout }, ret);
}

RedisBlocking *redis_blocking_free(RedisBlocking *b) {
        if (!b)
                return NULL;
        if (b->c)
                redisFree(b->c);
        free(b);
        return NULL;
}

int redis_blocking_append(RedisBlocking *b, int argc, const char *const *argv, const size_t *argvlen) {
        if (b->c->err)
                return -ENOTCONN;
        if (redisAppendCommandArgv(b->c, argc, (const char **) argv, argvlen) != REDIS_OK)
                return -ENOMEM;
        return 0;
}

int redis_blocking_reply(RedisBlocking *b, RedisReply **ret) {
        void *reply = NULL;

        if (redisGetReply(b->c, &reply) != REDIS_OK || !reply) {
                log_debug("Redis: no reply: %s", b->c->errstr);
                return redis_errno(b->c->err, errno);
        }
        *ret = reply;
        return 0;
}

int redis_blocking_command(RedisBlocking *b, int argc, const char *const *argv, const size_t *argvlen,
                           RedisReply **ret) {
        int r = redis_blocking_append(b, argc, argv, argvlen);

        return r < 0 ? r : redis_blocking_reply(b, ret);
}
