/* SPDX-License-Identifier: MIT */
/* One Redis server ("shard"): its command and pub/sub connections, from
 * connect to down and the backoff before the next, and the table of
 * them; the command connection's set-up is shard-setup.c's. What becomes
 * of it is reported up through io->ev; the topology says where it is and
 * how it is named. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "lua-args.h"
#include "redis-layer.h"
#include "shard-internal.h"

#define COMMAND_TIMEOUT (5 * USEC_PER_SEC)
#define BACKOFF_MIN (100 * USEC_PER_MSEC)
#define BACKOFF_MAX (2 * USEC_PER_SEC)

void redis_fire_and_forget(RedisConn *conn, const RedisReply *reply, void *userdata) {
        const char *err = redis_reply_error(reply);

        (void) conn;
        if (err)
                log_warning("Redis refused %s: %s", (const char *) userdata, err);
}

usec_t backoff_next(usec_t b) {
        return b == 0 ? BACKOFF_MIN : MIN(b * 2, BACKOFF_MAX);
}

void redis_reconnect_in(RedisIo *io, usec_t delay) {
        uint64_t when = 0;
        int enabled = SD_EVENT_OFF;
        usec_t at = usec_add(now_mono(), delay);
        int r;

        if (sd_event_source_get_enabled(io->reconnect_source, &enabled) >= 0 && enabled != SD_EVENT_OFF &&
            sd_event_source_get_time(io->reconnect_source, &when) >= 0 && when <= at)
                return;
        r = sd_event_source_set_time(io->reconnect_source, at);
        if (r >= 0)
                r = sd_event_source_set_enabled(io->reconnect_source, SD_EVENT_ONESHOT);
        if (r < 0)
                redis_io_fatal(io, r, "arm the reconnection to Redis");
}

void redis_reconnect_later(RedisIo *io) {
        io->backoff = backoff_next(io->backoff);
        redis_reconnect_in(io, io->backoff);
}

/* A Redis that hangs (stopped, swapping) counts as gone after a third of
 * the lease, within 1s to 5s: soon enough to tell holders in time. */
usec_t redis_command_timeout(const RedisIo *io) {
        usec_t t = io->agent->config->lease_ttl / 3;

        return t < USEC_PER_SEC ? USEC_PER_SEC : t > COMMAND_TIMEOUT ? COMMAND_TIMEOUT : t;
}

bool redis_conn_hangs(const RedisIo *io, RedisConn *c, usec_t now) {
        return c && redis_conn_pending(c) > 0 && now > redis_conn_last_activity(c) &&
               now - redis_conn_last_activity(c) > redis_command_timeout(io);
}

int redis_auth_argv(const RedisIo *io, const char *argv[3]) {
        const RedisAddress *r = &io->agent->config->redis;

        argv[0] = "AUTH";
        if (r->user) {
                argv[1] = r->user;
                argv[2] = r->password ?: "";
                return 3;
        }
        argv[1] = r->password;
        return 2;
}

/* How the server is named in what the journal says of its role: the
 * master a Sentinel named, else the shard's own name. */
const char *shard_server(const Shard *sh) {
        const Agent *a = sh->io->agent;

        return !sh->host && a->master_name[0] ? a->master_name : sh->name;
}

bool shards_any_ready(const RedisIo *io) {
        for (size_t i = 0; i < io->n_shards; i++)
                if (io->shards[i]->state == REDIS_READY && io->topo->shard_counts(io, io->shards[i]))
                        return true;
        return false;
}

Shard *shard_of_conn(RedisIo *io, const RedisConn *conn) {
        for (size_t i = 0; i < io->n_shards; i++)
                if (io->shards[i]->cmd == conn)
                        return io->shards[i];
        return NULL;
}

void shard_disconnect(Shard *sh, RedisState state) {
        RedisConn *cmd = sh->cmd, *sub = sh->sub;
        /* A drop resets the sockets (redis_conn_free()); the agent's stop
         * lets what it sent go out. */
        RedisConn *(*drop)(RedisConn *c) = sh->io->stopping ? redis_conn_close : redis_conn_free;

        /* Detached first: freeing runs their callbacks with NULL. */
        sh->cmd = sh->sub = NULL;
        sh->sub_ready = false;
        sh->policy_inflight = false;
        sh->library_inflight = false;
        if (sh->library_wait)
                (void) sd_event_source_set_enabled(sh->library_wait, SD_EVENT_OFF);
        sh->state = state;
        drop(cmd);
        drop(sub);
        sh->io->ev.shard_disconnected(sh);
}

void shard_down(Shard *sh, int error, const char *why) {
        RedisIo *io = sh->io;
        Agent *a = io->agent;
        char buf[FORMAT_DURATION_MAX];
        RedisState was = sh->state;

        snprintf(sh->error, sizeof(sh->error), "%s", why && why[0] ? why : strerror(-error));
        snprintf(a->redis_error, sizeof(a->redis_error), "%s%s%s", sh->host ? sh->name : "", sh->host ? ": " : "",
                 sh->error);
        /* -EPROTONOSUPPORT: refused until an operator acts (shard_refuse()). */
        a->redis_error_state = error == -EPROTONOSUPPORT && sh->refused_state ? sh->refused_state
                               : error == -ETIMEDOUT                        ? "timeout"
                                                                            : "unreachable";
        shard_disconnect(sh, REDIS_DOWN);

        /* Tried again after a backoff of its own (a Cluster's other
         * masters keep theirs). */
        sh->backoff = backoff_next(sh->backoff);
        sh->retry_at = now_mono() + sh->backoff;
        if (was == REDIS_READY)
                log_warning("Lost connection to Redis at %s: %s; held slots stay anchored, retrying.", sh->name,
                            sh->error);
        else if ((was == REDIS_CONNECTING || sh->backoff >= BACKOFF_MAX) && error != -EPROTONOSUPPORT)
                /* (A data model refused is said once: model_refuse().) */
                log_warning("Failed to connect to Redis at %s: %s; retrying in %s.", sh->name, sh->error,
                            format_duration(buf, sizeof(buf), sh->backoff));
        io->ev.shard_down(sh);
}

void shard_ready(Shard *sh, bool reset, usec_t grace, const char *why) {
        RedisIo *io = sh->io;
        Agent *a = io->agent;

        sh->state = REDIS_READY;
        sh->backoff = 0;
        sh->retry_at = 0;
        io->backoff = 0;
        io->topo->shard_up(io, sh, reset);
        if (reset && a->engine.n_held > 0)
                log_notice("Re-asserting %zu held slot(s) in Redis %s.", a->engine.n_held, sh->name);
        if (grace > 0)
                log_notice("No slot is granted through Redis %s for another %s: %s; slots held before may still be "
                           "in use until their leases run out.", sh->name,
                           format_duration((char[FORMAT_DURATION_MAX]) {}, FORMAT_DURATION_MAX, grace),
                           grace_why_text(why ?: GRACE_WHY_NEW));
        io->ev.shard_ready(sh, reset, grace, why);
}

static int shard_init(Shard *sh, RedisIo *io, const char *host, uint16_t port) {
        char *h = NULL;

        if (host && !(h = strdup(host)))
                return -ENOMEM;
        *sh = (Shard) { .io = io, .index = UINT_MAX, .host = h, .port = port, .state = REDIS_DOWN, .n_replicas = -1,
                        .epoch_hash_slot = -1 };
        if (host)
                redis_host_port_format(sh->name, sizeof(sh->name), host, port);
        else
                snprintf(sh->name, sizeof(sh->name), "%s", io->agent->redis_name);
        return 0;
}

int shard_table_append(Shard ***table, size_t *n, size_t *n_alloc, Shard *sh) {
        if (*n >= SHARDS_MAX)
                return -E2BIG;
        if (*n >= *n_alloc) {
                size_t want = MIN(MAX(*n_alloc * 2, (size_t) 4), (size_t) SHARDS_MAX);
                Shard **t = reallocarray(*table, want, sizeof(Shard *));

                if (!t)
                        return -ENOMEM;
                *table = t;
                *n_alloc = want;
        }
        (*table)[(*n)++] = sh;
        return 0;
}

Shard *shard_new_detached(RedisIo *io, const char *host, uint16_t port) {
        Shard *sh = malloc(sizeof(*sh));

        if (!sh)
                return NULL;
        if (shard_init(sh, io, host, port) < 0)
                return mfree(sh);
        return sh;
}

Shard *shard_new(RedisIo *io, const char *host, uint16_t port) {
        Shard *sh = shard_new_detached(io, host, port);

        if (!sh)
                return NULL;
        if (shard_table_append(&io->shards, &io->n_shards, &io->n_shards_alloc, sh) < 0)
                return shard_free(sh);
        sh->index = (unsigned) (io->n_shards - 1);
        return sh;
}

Shard *shard_free(Shard *sh) {
        if (!sh)
                return NULL;
        shard_disconnect(sh, REDIS_DOWN);
        sd_event_source_disable_unref(sh->library_wait);
        free(sh->host);
        return mfree(sh);
}

void redis_io_fatal(RedisIo *io, int r, const char *what) {
        log_error_errno(r, "Failed to %s: %m; exiting, held slots stay anchored for the next agent.", what);
        (void) sd_event_exit(io->agent->event, r);
}
