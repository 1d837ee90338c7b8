/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "log.h"
#include "macro.h"
#include "redis-tls.h"
#include "redis-internal.h"
#include "redis.h"
#include "resolve.h"

typedef struct Pending {
        RedisConn *conn;
        redis_reply_cb cb;
        void *userdata;
} Pending;

struct RedisConn {
        sd_event *event;
        redisAsyncContext *ac;          /* NULL once hiredis freed it */
        sd_event_source *io;
        sd_event_source *timeout;
        sd_event_source *broken;        /* fires once the loop cannot watch the connection */
        int watch_error;                /* … why (0: it can) */
        uint32_t events;
        bool connected;
        bool dispatching;               /* inside hiredis: defer our own free */
        bool free_requested;
        bool closing;                   /* no state callbacks any more */
        bool graceful;                  /* closed, not reset: the agent stops (conn_abort()) */
        size_t pending;
        usec_t last_activity;
        redis_reply_cb message_cb;
        void *message_userdata;
        redis_state_cb state_cb;
        void *userdata;
        void *tls;                      /* the TLS connection (hiredis owns it), or NULL */
        /* A host name is looked up off the loop, then its addresses are
         * connected to one after the other until one answers. */
        char *host;                     /* as the URL or peer names it: TLS checks this name */
        uint16_t port;
        Resolve *resolve;               /* the lookup in flight, or NULL */
        ResolveResult *addrs;           /* what it found, or NULL */
        size_t next_addr;
        bool try_next;                  /* an address failed: the next, once hiredis let go of it */
        char why[256];                  /* the last failure, when no context holds it */
};

int redis_errno(int err, int saved_errno) {
        switch (err) {
        case REDIS_ERR_IO:
                return saved_errno > 0 ? -saved_errno : -EIO;
        case REDIS_ERR_EOF:
                return -ECONNRESET;
        case REDIS_ERR_PROTOCOL:
                return -EPROTO;
        case REDIS_ERR_OOM:
                return -ENOMEM;
        default:
                return -EIO;
        }
}

static void conn_destroy(RedisConn *c) {
        resolve_cancel(c->resolve);     /* its result, when it comes, reaches nobody */
        sd_event_source_disable_unref(c->io);
        sd_event_source_disable_unref(c->timeout);
        sd_event_source_disable_unref(c->broken);
        sd_event_unref(c->event);
        free(c->addrs);
        free(c->host);
        free(c);
}

static void conn_report(RedisConn *c, int error, const char *message) {
        if (c->closing || !c->state_cb)
                return;
        if (error < 0)
                c->closing = true;      /* report a loss once */
        c->state_cb(c, error, message, c->userdata);
}

/* A connect that failed before hiredis had a context to say why. The
 * message goes from the stack: the state callback may free c. c is not
 * touched after. */
_printf_(3, 4) static void conn_fail(RedisConn *c, int error, const char *format, ...) {
        char message[sizeof(c->why)];
        va_list ap;

        va_start(ap, format);
        vsnprintf(message, sizeof(message), format, ap);
        va_end(ap);
        log_debug("Redis connection failed: %s", message);
        memcpy(c->why, message, sizeof(message));
        c->timeout = sd_event_source_disable_unref(c->timeout);
        conn_report(c, error, message);
}

static void conn_try_next(RedisConn *c);

static int io_handler(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        RedisConn *c = userdata;

        (void) s;
        (void) fd;
        c->dispatching = true;
        if (c->ac && (revents & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                redisAsyncHandleRead(c->ac);
        if (c->ac && (revents & EPOLLOUT))
                redisAsyncHandleWrite(c->ac);
        c->dispatching = false;

        if (c->free_requested)
                redis_conn_free(c);
        else if (c->try_next) {
                c->try_next = false;
                conn_try_next(c);
        }
        return 0;
}

/* The loop cannot watch the connection: it goes down, now, rather than
 * wait for replies it would never read. Out of hiredis (which called
 * ev_update()), from its own source. */
static int on_broken(sd_event_source *s, void *userdata) {
        RedisConn *c = userdata;

        (void) s;
        conn_fail(c, c->watch_error, "cannot watch the connection: %s", strerror(-c->watch_error));
        return 0;
}

static void watch_failed(RedisConn *c, int error) {
        int r;

        log_debug_errno(error, "Failed to watch Redis connection: %m");
        if (c->watch_error < 0)
                return;         /* said already */
        c->watch_error = error;
        r = sd_event_source_set_enabled(c->broken, SD_EVENT_ONESHOT);
        if (r < 0)
                /* Then what waits for a reply on it times out. */
                log_debug_errno(r, "Failed to take the Redis connection down: %m");
}

static void ev_update(RedisConn *c, uint32_t events) {
        int r;

        c->events = events;
        if (!c->ac)
                return;
        if (!c->io) {
                r = sd_event_add_io(c->event, &c->io, c->ac->c.fd, events, io_handler, c);
                /* Replies carry renewals and releases: before the work
                 * of the event loop's other sources. */
                if (r >= 0)
                        r = sd_event_source_set_priority(c->io, SD_EVENT_PRIORITY_IMPORTANT);
                if (r < 0)
                        watch_failed(c, r);
                return;
        }
        r = sd_event_source_set_io_events(c->io, events);
        if (r >= 0)
                r = sd_event_source_set_enabled(c->io, events ? SD_EVENT_ON : SD_EVENT_OFF);
        if (r < 0)
                watch_failed(c, r);
}

static void ev_add_read(void *p) { RedisConn *c = p; ev_update(c, c->events | EPOLLIN); }
static void ev_del_read(void *p) { RedisConn *c = p; ev_update(c, c->events & ~(uint32_t) EPOLLIN); }
static void ev_add_write(void *p) { RedisConn *c = p; ev_update(c, c->events | EPOLLOUT); }
static void ev_del_write(void *p) { RedisConn *c = p; ev_update(c, c->events & ~(uint32_t) EPOLLOUT); }

static void ev_cleanup(void *p) {
        RedisConn *c = p;

        c->io = sd_event_source_disable_unref(c->io);
        c->ac = NULL;
        c->connected = false;
}

static void on_connect(const redisAsyncContext *ac, int status) {
        RedisConn *c = ac->data;

        if (status != REDIS_OK) {
                int r = redis_errno(ac->err, errno);

                log_debug("Redis connection failed: %s", ac->errstr);
                c->tls = NULL;
                if (c->addrs && c->next_addr < c->addrs->n) {
                        /* hiredis frees this context when we return:
                         * the next address from io_handler(), after. */
                        snprintf(c->why, sizeof(c->why), "%s", ac->errstr);
                        c->try_next = true;
                        return;
                }
                c->timeout = sd_event_source_disable_unref(c->timeout);
                conn_report(c, r, ac->errstr);
                return;                 /* hiredis frees the context */
        }
        c->timeout = sd_event_source_disable_unref(c->timeout);
        c->why[0] = '\0';
        c->connected = true;
        c->last_activity = now_usec(CLOCK_MONOTONIC);
        conn_report(c, 0, NULL);
}

static void on_disconnect(const redisAsyncContext *ac, int status) {
        RedisConn *c = ac->data;
        char buf[512];
        const char *why = status == REDIS_OK ? "connection closed" : ac->errstr;

        c->connected = false;
        if (status != REDIS_OK && c->tls)
                why = redis_tls_why(c->tls, buf, sizeof(buf)) ?: why;
        c->tls = NULL;                  /* hiredis frees it with the context, next */
        if (status != REDIS_OK)
                log_debug("Redis connection lost: %s", why);
        conn_report(c, status == REDIS_OK ? -ECONNRESET : redis_errno(ac->err, errno), why);
}

static int on_connect_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        RedisConn *c = userdata;

        (void) s;
        (void) usec;
        if (c->resolve) {
                c->resolve = resolve_cancel(c->resolve);
                conn_fail(c, -ETIMEDOUT, "cannot resolve %s: timed out", c->host);
                return 0;
        }
        if (c->connected || !c->ac)
                return 0;
        redisAsyncFree(c->ac);          /* not connected: no disconnect callback */
        conn_report(c, -ETIMEDOUT, "connection timed out");
        return 0;
}

/* Starts hiredis' connect to unix_path, or to ip (numeric: hiredis looks
 * nothing up) at c->port. On failure c->why says why. */
static int conn_open(RedisConn *c, const char *unix_path, const char *ip) {
        redisAsyncContext *ac;
        void *tls = NULL;
        int r;

        ac = unix_path ? redisAsyncConnectUnix(unix_path) : redisAsyncConnect(ip, c->port);
        if (!ac)
                return -ENOMEM;
        if (ac->err) {
                r = redis_errno(ac->err, errno);
                log_debug("Redis connection failed: %s", ac->errstr);
                snprintf(c->why, sizeof(c->why), "%s", ac->errstr);
                redisAsyncFree(ac);
                return r;
        }
        if (!unix_path && redis_tls_active()) {
                /* Before any command is queued: nothing leaves in clear.
                 * The certificate must carry the name the URL gives (SNI
                 * too), never the address it resolved to. */
                r = redis_tls_start(&ac->c, c->host, &tls);
                if (r < 0) {
                        snprintf(c->why, sizeof(c->why), "cannot start TLS to %s: %s", c->host,
                                 ac->c.errstr[0] ? ac->c.errstr : "no TLS");
                        log_debug("%s", c->why);
                        redisAsyncFree(ac);
                        return r;
                }
        }
        /* Without keep-alive a dead peer is still found: by the hang
         * timeout of whoever waits for a reply. */
        if (!unix_path && redisEnableKeepAlive(&ac->c) != REDIS_OK)
                log_debug("Failed to enable TCP keep-alive to Redis: %s", ac->c.errstr);

        c->ac = ac;
        c->tls = tls;
        ac->data = c;
        ac->ev.data = c;
        ac->ev.addRead = ev_add_read;
        ac->ev.delRead = ev_del_read;
        ac->ev.addWrite = ev_add_write;
        ac->ev.delWrite = ev_del_write;
        ac->ev.cleanup = ev_cleanup;
        redisAsyncSetConnectCallback(ac, on_connect);
        redisAsyncSetDisconnectCallback(ac, on_disconnect);
        /* hiredis asks for write readiness to learn the connect outcome. */
        ev_add_write(c);
        return 0;
}

/* The addresses the name resolved to, in order, until one connects (its
 * outcome then comes to on_connect()) or none is left. */
static void conn_try_next(RedisConn *c) {
        int r = -EADDRNOTAVAIL;

        while (c->next_addr < c->addrs->n) {
                const char *ip = c->addrs->addr[c->next_addr++];

                r = conn_open(c, NULL, ip);
                if (r >= 0)
                        return;
                log_debug("Redis at %s (%s): %s", c->host, ip, c->why);
        }
        conn_fail(c, r, "%s", c->why);
}

static void on_resolved(int error, const char *why, const ResolveResult *result, void *userdata) {
        RedisConn *c = userdata;

        c->resolve = NULL;
        if (error < 0) {
                conn_fail(c, error, "cannot resolve %s: %s", c->host, why);
                return;
        }
        c->addrs = malloc(sizeof(*c->addrs));
        if (!c->addrs) {
                conn_fail(c, -ENOMEM, "cannot resolve %s: %s", c->host, strerror(ENOMEM));
                return;
        }
        *c->addrs = *result;
        c->next_addr = 0;
        conn_try_next(c);
}

int redis_conn_new(sd_event *e, const RedisAddress *a, usec_t connect_timeout,
                   redis_state_cb cb, void *userdata, RedisConn **ret) {
        _cleanup_(redis_conn_freep) RedisConn *c = NULL;
        int r;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->event = sd_event_ref(e);
        /* Made now: when the loop fails to watch the connection, it has
         * the source that takes it down. */
        r = sd_event_add_defer(e, &c->broken, on_broken, c);
        if (r >= 0)
                r = sd_event_source_set_enabled(c->broken, SD_EVENT_OFF);
        if (r < 0)
                return r;
        c->state_cb = cb;
        c->userdata = userdata;
        c->port = a->port;
        if (!a->unix_path && !(c->host = strdup(a->host)))
                return -ENOMEM;

        /* A name is looked up off the loop, each connect anew (a DNS
         * change is followed at the next one); the connect timeout
         * covers the lookup too. */
        if (a->unix_path || resolve_is_literal(a->host))
                r = conn_open(c, a->unix_path, a->host);
        else
                r = resolve_start(e, a->host, on_resolved, c, &c->resolve);
        if (r < 0)
                return r;

        r = sd_event_add_time_relative(e, &c->timeout, CLOCK_MONOTONIC, connect_timeout, 0,
                                       on_connect_timeout, c);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(c);
        return 0;
}

const char *redis_conn_error(RedisConn *c, char *buf, size_t size) {
        const char *why = c->tls ? redis_tls_why(c->tls, buf, size) : NULL;

        if (why)
                return why;
        return c->ac && c->ac->err ? c->ac->errstr : c->why;
}

/* A connection dropped with calls unanswered, or with bytes its socket
 * has not delivered (a subscription's), is reset, not closed: what the
 * kernel has not delivered is thrown away. Closed, its socket would go on
 * sending it after the drop, for as long as TCP retries (minutes), and
 * once a partition healed an acquire this agent had given up on arrived
 * after the release it sent on its next connection: a slot granted to
 * nobody for a lease (chaos finding 22). So what Redis receives of a
 * dropped connection, it received before the drop (docs/design.md, "A
 * connection given up on": what that does not order). The agent's own
 * stop closes them (redis_conn_close()): its last releases go out. */
static void conn_abort(RedisConn *c) {
        static const struct linger reset = { .l_onoff = 1, .l_linger = 0 };
        int fd = c->ac->c.fd, unsent = 0;

        if (fd < 0 || c->graceful)
                return;
        if (c->pending == 0 && (ioctl(fd, SIOCOUTQ, &unsent) < 0 || unsent == 0))
                return;
        if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset)) < 0)
                log_warning_errno(errno, "Failed to reset the dropped Redis connection (%zu calls unanswered): %m; "
                                  "they may still reach Redis.", c->pending);
}

RedisConn *redis_conn_free(RedisConn *c) {
        if (!c)
                return NULL;
        c->closing = true;
        if (c->dispatching) {
                c->free_requested = true;
                return NULL;
        }
        if (c->ac) {
                conn_abort(c);
                redisAsyncFree(c->ac);  /* runs pending callbacks with NULL */
        }
        conn_destroy(c);
        return NULL;
}

RedisConn *redis_conn_close(RedisConn *c) {
        if (c)
                c->graceful = true;
        return redis_conn_free(c);
}

bool redis_conn_is_connected(const RedisConn *c) {
        return c && c->ac && c->connected;
}

size_t redis_conn_pending(const RedisConn *c) {
        return c ? c->pending : 0;
}

usec_t redis_conn_last_activity(const RedisConn *c) {
        return c ? c->last_activity : 0;
}

static void reply_handler(redisAsyncContext *ac, void *reply, void *privdata) {
        Pending *p = privdata;
        RedisConn *c = p->conn;

        (void) ac;
        c->pending--;
        if (reply)
                c->last_activity = now_usec(CLOCK_MONOTONIC);
        p->cb(c, reply, p->userdata);
        free(p);
}

int redis_conn_send_formatted(RedisConn *c, redis_reply_cb cb, void *userdata, const char *cmd, size_t len) {
        Pending *p;

        if (!redis_conn_is_connected(c))
                return -ENOTCONN;
        p = malloc(sizeof(*p));
        if (!p)
                return -ENOMEM;
        *p = (Pending) { .conn = c, .cb = cb, .userdata = userdata };
        if (redisAsyncFormattedCommand(c->ac, reply_handler, p, cmd, len) != REDIS_OK) {
                free(p);
                return -ENOTCONN;
        }
        if (c->pending++ == 0)
                c->last_activity = now_usec(CLOCK_MONOTONIC);
        return 0;
}

int redis_command_format(int argc, const char *const *argv, const size_t *argvlen, char **ret_cmd, size_t *ret_len) {
        char *cmd = NULL;
        int len;

        len = redisFormatCommandArgv(&cmd, argc, (const char **) argv, argvlen);
        if (len < 0)
                return -ENOMEM;
        *ret_cmd = cmd;
        *ret_len = (size_t) len;
        return 0;
}

char *redis_command_free(char *cmd) {
        redisFreeCommand(cmd);
        return NULL;
}

int redis_conn_command(RedisConn *c, redis_reply_cb cb, void *userdata,
                       int argc, const char *const *argv, const size_t *argvlen) {
        char *cmd;
        size_t len;
        int r;

        if (!redis_conn_is_connected(c))
                return -ENOTCONN;
        r = redis_command_format(argc, argv, argvlen, &cmd, &len);
        if (r < 0)
                return r;
        r = redis_conn_send_formatted(c, cb, userdata, cmd, len);
        redisFreeCommand(cmd);
        return r;
}

static void subscription_handler(redisAsyncContext *ac, void *reply, void *privdata) {
        RedisConn *c = privdata;

        (void) ac;
        if (reply)
                c->last_activity = now_usec(CLOCK_MONOTONIC);
        if (c->message_cb)
                c->message_cb(c, reply, c->message_userdata);
}

void redis_conn_set_message_handler(RedisConn *c, redis_reply_cb cb, void *userdata) {
        c->message_cb = cb;
        c->message_userdata = userdata;
}

int redis_conn_subscribe(RedisConn *c, const char *channel) {
        const char *argv[] = { "SUBSCRIBE", channel };

        if (!redis_conn_is_connected(c))
                return -ENOTCONN;
        /* hiredis keeps one callback per channel; subscribing again replaces it. */
        if (redisAsyncCommandArgv(c->ac, subscription_handler, c, 2, argv, NULL) != REDIS_OK)
                return -ENOTCONN;
        return 0;
}

int redis_conn_psubscribe(RedisConn *c, const char *pattern, bool on) {
        const char *argv[] = { on ? "PSUBSCRIBE" : "PUNSUBSCRIBE", pattern };

        if (!redis_conn_is_connected(c))
                return -ENOTCONN;
        if (redisAsyncCommandArgv(c->ac, subscription_handler, c, 2, argv, NULL) != REDIS_OK)
                return -ENOTCONN;
        return 0;
}

int redis_conn_ssubscribe(RedisConn *c, const char *channel) {
        const char *argv[] = { "SSUBSCRIBE", channel };
        char *cmd = NULL;
        size_t len;
        int r;

        r = redis_conn_subscribe(c, channel);
        if (r < 0)
                return r;
        /* Sent without a callback: its confirmation and its messages go to
         * the channel's handler. (Through redisAsyncCommand, hiredis would
         * keep a callback for it that nothing ever takes.) */
        r = redis_command_format(2, argv, NULL, &cmd, &len);
        if (r < 0)
                return r;
        r = redisAppendFormattedCommand(&c->ac->c, cmd, len) == REDIS_OK ? 0 : -ENOMEM;
        redisFreeCommand(cmd);
        if (r >= 0)
                ev_add_write(c);
        return r;
}

const char *redis_build_features(void) {
        static char buf[256];

        snprintf(buf, sizeof(buf), "hiredis %d.%d.%d; TLS to Redis: %s%s", HIREDIS_MAJOR, HIREDIS_MINOR, HIREDIS_PATCH,
                 redis_tls_available() ? "yes, " : "no (through a local TLS client: fleetsem.conf(5), TLS)",
                 redis_tls_available() ? redis_tls_version() : "");
        return buf;
}
