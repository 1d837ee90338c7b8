/* SPDX-License-Identifier: MIT */
/* A client's connection: its output buffer (what it may make the agent
 * hold, per client and per uid), writing it, closing. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>

#include "agent.h"
#include "log-limit.h"
#include "log.h"

#define CLIENT_OUT_MAX_ROOT (64U * 1024 * 1024) /* a status of many holders */
#define CLIENT_OUT_MAX_USER (1U * 1024 * 1024)
#define USER_OUT_MAX (4U * 1024 * 1024)         /* all unread output of one non-root uid */
#define CLIENT_OUT_SHRINK (64U * 1024)          /* a buffer this large goes once it is written */
#define CLIENT_REQUEST_TIMEOUT (10 * USEC_PER_SEC)
#define CLIENT_SLOW_READER (10 * USEC_PER_SEC)  /* output pending this long without progress */

/* What the connections keep together: the clients done with nothing left
 * to write, and the wake-up that frees them. */
struct Conns {
        Client *finished;               /* clients to close on the next turn of the loop */
        sd_event_source *finished_source;
};

static size_t client_out_max(const Client *c) {
        return c->cred.uid == 0 ? CLIENT_OUT_MAX_ROOT : CLIENT_OUT_MAX_USER;
}

Client *client_free(Client *c) {
        Agent *a;

        if (!c)
                return NULL;
        a = c->agent;
        if (c->status)
                c->status->client = NULL;
        if (c->op_ref)
                *c->op_ref = NULL;
        free(c->deferred);
        if (c->lease) {
                Lease *l = c->lease;

                c->lease = NULL;
                engine_client_gone(&a->engine, l, now_mono());
        }
        if (c->watching && c->cred.uid == 0 && --a->n_watching == 0)
                redis_io_watch_all(a, false);
        LIST_REMOVE(clients, a->clients, c);
        if (c->in_finished)
                LIST_REMOVE(finished, a->conns->finished, c);
        a->n_clients--;
        if (c->user) {
                c->user->n_clients--;
                c->user->out_bytes -= c->out_size;
                user_use_maybe_free(c->user);
        }
        if (c->pidfd >= 0) {
                safe_close(c->pidfd);
                a->n_pidfds--;
        }
        sd_event_source_disable_unref(c->io_source);
        safe_close(c->fd);
        free(c->out);
        return mfree(c);
}

static void client_out_free(Client *c) {
        if (c->user)
                c->user->out_bytes -= c->out_size;
        c->out = mfree(c->out);
        c->out_start = c->out_len = c->out_size = 0;
}

/* What is left to write moved to the buffer's start: only when the end has
 * no room for more, so that writing stays linear in what is written. */
static void client_out_compact(Client *c) {
        if (c->out_start == 0)
                return;
        memmove(c->out, c->out + c->out_start, c->out_len);
        c->out_start = 0;
}

static void client_set_events(Client *c, uint32_t events) {
        if (sd_event_source_set_io_events(c->io_source, events) >= 0)
                c->events = events;
}

void client_update_events(Client *c) {
        /* EPOLLOUT also to close a finished client once its output is out
         * (one with nothing left to write goes with the finished ones). */
        uint32_t events = c->out_len > 0 || (c->close_after_flush && !c->in_finished) ? EPOLLOUT : 0;

        /* Keep reading: EOF from a client is how a waiter withdraws.
         * Edge-triggered: a host's thousand sessions ending at once must not
         * be polled again on every turn of the loop. */
        events |= EPOLLIN | EPOLLRDHUP | EPOLLET;
        /* Most replies go out at once: no system call to say nothing changed. */
        if (events == c->events)
                return;
        if (sd_event_source_set_io_events(c->io_source, events) >= 0)
                c->events = events;
}

int client_flush(Client *c) {
        while (c->out_len > 0) {
                ssize_t n = send(c->fd, c->out + c->out_start, c->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                break;
                        return -errno;
                }
                c->out_start += (size_t) n;
                c->out_len -= (size_t) n;
                if (c->out_len == 0)
                        c->out_start = 0;
                c->out_progress = now_mono();
        }
        if (c->out_len == 0 && c->out_size > CLIENT_OUT_SHRINK)
                client_out_free(c);
        client_update_events(c);
        if (c->out_len == 0 && c->close_after_flush)
                return -ECONNRESET;
        return 0;
}

/* Output that cannot be queued: the client goes, with what it was sent. */
static void client_overflow(Client *c, const char *why) {
        log_uid(c->cred.uid, now_mono(), LOG_WARNING, "Client pid " PID_FMT " (uid " UID_FMT ") %s; disconnecting.",
                c->cred.pid, c->cred.uid, why);
        client_out_free(c);
        client_finish(c);
}

/* A reply too large for the client's budget (a status of very many
 * holders, for a user): what fits, then an ERROR that says so. */
static void client_too_large(Client *c) {
        char line[PROTO_REPLY_MAX];
        MessageBuilder b;
        int len;

        message_start(&b, line, sizeof(line), "ERROR");
        message_add(&b, "code", ERROR_CODE_BUSY);
        message_addf(&b, "message", "%s too large (more than %zu KiB for uid " UID_FMT "); ask for one name",
                     c->status ? "status" : "reply", client_out_max(c) / 1024, c->cred.uid);
        len = message_finish(&b);
        client_out_compact(c);
        if (len > 0 && c->out_len + (size_t) len + 1 <= c->out_size) {
                memcpy(c->out + c->out_len, line, (size_t) len);
                c->out[c->out_len + (size_t) len] = '\n';
                c->out_len += (size_t) len + 1;
        }
        c->close_after_flush = true;
        client_set_events(c, EPOLLIN | EPOLLOUT | EPOLLET);
}

void client_send(Client *c, const char *line, int len) {
        size_t need;

        if (len < 0 || c->close_after_flush)
                return;
        need = c->out_len + (size_t) len + 1;
        /* Room is kept for the ERROR that says the rest did not fit. */
        if (need + PROTO_REPLY_MAX + 1 > client_out_max(c)) {
                if (c->out_size < client_out_max(c)) {
                        size_t grow = client_out_max(c) - c->out_size;
                        char *p;

                        if (c->cred.uid != 0 && c->user && c->user->out_bytes + grow > USER_OUT_MAX) {
                                client_overflow(c, "leaves too much unread output");
                                return;
                        }
                        p = realloc(c->out, client_out_max(c));
                        if (!p) {
                                client_overflow(c, "cannot be answered: out of memory");
                                return;
                        }
                        c->out = p;
                        c->out_size = client_out_max(c);
                        if (c->user)
                                c->user->out_bytes += grow;
                }
                client_too_large(c);
                return;
        }
        if (c->out_start + need > c->out_size)
                client_out_compact(c);
        if (need > c->out_size) {
                size_t size = c->out_size ? c->out_size : 512, grow;
                char *p;

                while (size < need)
                        size *= 2;
                if (size > client_out_max(c))
                        size = client_out_max(c);
                grow = size - c->out_size;
                /* One user's clients together: its STATUS replies nobody
                 * reads cannot make the agent grow. */
                if (c->cred.uid != 0 && c->user && c->user->out_bytes + grow > USER_OUT_MAX) {
                        client_overflow(c, "leaves too much unread output");
                        return;
                }
                p = realloc(c->out, size);
                if (!p) {
                        client_overflow(c, "cannot be answered: out of memory");
                        return;
                }
                c->out = p;
                c->out_size = size;
                if (c->user)
                        c->user->out_bytes += grow;
        }
        if (c->out_len == 0)
                c->out_progress = now_mono();
        memcpy(c->out + c->out_start + c->out_len, line, (size_t) len);
        c->out[c->out_start + c->out_len + (size_t) len] = '\n';
        c->out_len = need;
        if (c->out_len == (size_t) len + 1 && client_flush(c) < 0)
                /* The event loop notices the error on its next turn. */
                client_set_events(c, EPOLLIN | EPOLLOUT | EPOLLET);
}

void client_send_error(Client *c, const char *code, const char *format, ...) {
        char msg[512], line[PROTO_REPLY_MAX];
        MessageBuilder b;
        va_list ap;

        va_start(ap, format);
        vsnprintf(msg, sizeof(msg), format, ap);
        va_end(ap);

        message_start(&b, line, sizeof(line), "ERROR");
        message_add(&b, "code", code);
        message_add(&b, "message", msg);
        client_send(c, line, message_finish(&b));
        client_finish(c);
}

const char *agent_refusing(const Agent *a) {
        if (a->state == REDIS_DOWN && a->redis_error_state &&
            streq(error_code_of_state(a->redis_error_state), ERROR_CODE_MISCONFIGURED))
                return a->redis_error_state;
        return a->refuse_state;
}

void client_send_redis_down(Client *c) {
        const Agent *a = c->agent;
        const char *code = error_code_of_state(a->redis_error_state ?: "unreachable");

        if (streq(code, ERROR_CODE_UNAVAILABLE))
                client_send_error(c, code, "Redis at %s is unreachable: %s", a->redis_name,
                                  a->redis_error[0] ? a->redis_error : "not connected yet");
        else
                client_send_error(c, code, "%s; nothing is granted until then, whatever on_error says", a->redis_error);
}

/* Clients finished with nothing left to write go on the next turn of the
 * loop, all at once: not at once (the engine may be in the middle of
 * telling it and others), and not through a wake-up of their own. */
static int on_clients_finished(sd_event_source *s, void *userdata) {
        Agent *a = userdata;

        (void) s;
        while (a->conns->finished)
                client_free(a->conns->finished);
        return 0;
}

void client_finish(Client *c) {
        Agent *a = c->agent;

        c->close_after_flush = true;
        if (c->out_len > 0 || c->in_finished)
                return;         /* EPOLLOUT is on: it goes once its output is out */
        if (sd_event_source_set_enabled(a->conns->finished_source, SD_EVENT_ONESHOT) < 0) {
                /* Then through the socket, as for output. */
                client_set_events(c, EPOLLIN | EPOLLOUT | EPOLLET);
                return;
        }
        c->in_finished = true;
        LIST_PREPEND(finished, a->conns->finished, c);
}

int conns_start(Agent *a) {
        int r;

        a->conns = calloc(1, sizeof(Conns));
        if (!a->conns)
                return log_error_errno(ENOMEM, "Out of memory.");
        r = sd_event_add_defer(a->event, &a->conns->finished_source, on_clients_finished, a);
        if (r >= 0)
                r = sd_event_source_set_enabled(a->conns->finished_source, SD_EVENT_OFF);
        if (r < 0)
                return log_error_errno(r, "Failed to set up closing clients: %m");
        return 0;
}

void conns_stop(Agent *a) {
        if (!a->conns)
                return;
        a->conns->finished_source = sd_event_source_disable_unref(a->conns->finished_source);
        a->conns = mfree(a->conns);
}

/* The engine's effects on clients. */
void io_send(void *ctx, void *client, const char *line, int len) {
        (void) ctx;
        client_send(client, line, len);
}

void io_finish(void *ctx, void *client) {
        Client *c = client;

        (void) ctx;
        c->lease = NULL;
        client_finish(c);
}

/* A client has one request; after it, it only listens, then closes.
 * Reads to the end (edge-triggered); anything it sends is dropped. On EOF
 * or an error a waiting client withdraws, a holder's client just stops
 * listening (the anchor keeps the slot): the client is freed, -ECONNRESET. */
int client_drain(Client *c) {
        char buf[512];

        for (;;) {
                ssize_t n = read(c->fd, buf, sizeof(buf));

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return 0;
                if (n <= 0) {
                        client_free(c);
                        return -ECONNRESET;
                }
        }
}

void client_sweep(Agent *a) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        Client *c, *n;

        LIST_FOREACH_SAFE(clients, c, n, a->clients) {
                if (!c->got_request && now - c->accepted > CLIENT_REQUEST_TIMEOUT) {
                        log_uid(c->cred.uid, now, LOG_DEBUG, "Dropping client pid " PID_FMT ": no request within 10s.",
                                c->cred.pid);
                        client_free(c);
                } else if (c->out_len > 0 && now - c->out_progress > CLIENT_SLOW_READER) {
                        log_uid(c->cred.uid, now, LOG_NOTICE,
                                "Dropping client pid " PID_FMT " (uid " UID_FMT "): it read nothing of %zu bytes for 10s.",
                                c->cred.pid, c->cred.uid, c->out_len);
                        client_free(c);
                }
        }
}
