/* SPDX-License-Identifier: MIT */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <search.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>

#include "agent.h"
#include "log-limit.h"
#include "log.h"
#include "protocol.h"

/* What one client, and one user, may make the agent hold. Every budget is
 * per uid: one user at every limit at once still leaves root, its PAM
 * sessions and the other users served. */
#define CLIENT_OUT_MAX_ROOT (64U * 1024 * 1024) /* a status of many holders */
#define CLIENT_OUT_MAX_USER (1U * 1024 * 1024)
#define USER_OUT_MAX (4U * 1024 * 1024)         /* all unread output of one non-root uid */
#define CLIENT_OUT_SHRINK (64U * 1024)          /* a buffer this large goes once it is written */
#define CLIENT_REQUEST_TIMEOUT (10 * USEC_PER_SEC)
#define CLIENT_SLOW_READER (10 * USEC_PER_SEC)  /* output pending this long without progress */
#define FD_RESERVE_USER 64                      /* non-root requests stop this far from the fd limit */
#define FD_RESERVE_ROOT 16
#define FD_BASE_SLACK 32                        /* Redis, Sentinel, the bus, NSS, /proc */
#define HOUSEKEEPING_EVERY USEC_PER_SEC
/* New connections of one non-root uid: CONNECT_RATE a second, in bursts of
 * up to twice max_clients_per_user (so a burst meets that cap first); past
 * it a connection is refused at once, before anything of it is read. */
#define CONNECT_RATE 100
#define CONNECT_INTERVAL (USEC_PER_SEC / CONNECT_RATE)
/* Looks by name (a full backlog) for the anchors of one uid's requests. */
#define NAME_LOOK_EVERY USEC_PER_SEC

static void *user_uses;         /* tsearch(): uid → UserUse */

static int user_use_cmp(const void *x, const void *y) {
        uid_t a = ((const UserUse *) x)->uid, b = ((const UserUse *) y)->uid;

        return a < b ? -1 : a > b;
}

static UserUse *user_use_get(uid_t uid) {
        UserUse key = { .uid = uid }, *u, **p;

        p = tfind(&key, &user_uses, user_use_cmp);
        if (p)
                return *p;
        u = calloc(1, sizeof(*u));
        if (!u)
                return NULL;
        u->uid = uid;
        if (!tsearch(u, &user_uses, user_use_cmp)) {
                free(u);
                return NULL;
        }
        return u;
}

void user_use_maybe_free(UserUse *u) {
        usec_t now;

        if (!u || u->n_clients > 0 || u->out_bytes > 0 || u->n_status > 0)
                return;
        /* What it used of its rates is kept until it is paid back: closing
         * every connection starts no new budget. */
        now = now_mono();
        if (u->connect_tat > now || (u->name_look > 0 && now - u->name_look < NAME_LOOK_EVERY))
                return;
        tdelete(u, &user_uses, user_use_cmp);
        free(u);
}

/* Whether uid may open one more connection now (root always may). */
static bool user_may_connect(UserUse *u, unsigned burst, usec_t now) {
        usec_t tat = MAX(u->connect_tat, now) + CONNECT_INTERVAL;

        if (u->uid == 0)
                return true;
        if (tat - now > (usec_t) burst * CONNECT_INTERVAL)
                return false;
        u->connect_tat = tat;
        return true;
}

/* Whether uid may have an anchor looked for by name now: one a second. */
static bool user_may_look_by_name(UserUse *u, usec_t now) {
        if (u->uid == 0)
                return true;
        if (u->name_look > 0 && now - u->name_look < NAME_LOOK_EVERY)
                return false;
        u->name_look = now;
        return true;
}

static size_t client_out_max(const Client *c) {
        return c->cred.uid == 0 ? CLIENT_OUT_MAX_ROOT : CLIENT_OUT_MAX_USER;
}

/* File descriptors left before the limit: the agent's own (counted once
 * at start, with slack), one per client, one per anchor watch. */
static size_t fds_free(const Agent *a) {
        size_t used = a->fd_base + a->n_clients + a->n_watch_fds + a->n_pidfds;

        return used < a->fd_limit ? a->fd_limit - used : 0;
}

bool agent_short_of_fds(const Agent *a, uid_t uid) {
        return fds_free(a) < (uid == 0 ? FD_RESERVE_ROOT : FD_RESERVE_USER);
}

static void client_free(Client *c) {
        Agent *a = c->agent;

        if (c->status)
                c->status->client = NULL;
        if (c->lease) {
                Lease *l = c->lease;

                c->lease = NULL;
                slots_client_gone(&a->slots, l, now_mono());
        }
        LIST_REMOVE(clients, a->clients, c);
        if (c->in_finished)
                LIST_REMOVE(finished, a->finished, c);
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
        free(c);
}

static void client_out_free(Client *c) {
        if (c->user)
                c->user->out_bytes -= c->out_size;
        c->out = mfree(c->out);
        c->out_len = c->out_size = 0;
}

static void client_set_events(Client *c, uint32_t events) {
        if (sd_event_source_set_io_events(c->io_source, events) >= 0)
                c->events = events;
}

static void client_update_events(Client *c) {
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

static int client_flush(Client *c) {
        while (c->out_len > 0) {
                ssize_t n = send(c->fd, c->out, c->out_len, MSG_NOSIGNAL | MSG_DONTWAIT);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        if (errno == EAGAIN)
                                break;
                        return -errno;
                }
                memmove(c->out, c->out + n, c->out_len - (size_t) n);
                c->out_len -= (size_t) n;
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
        memcpy(c->out + c->out_len, line, (size_t) len);
        c->out[c->out_len + (size_t) len] = '\n';
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

/* Clients finished with nothing left to write go on the next turn of the
 * loop, all at once: not at once (the engine may be in the middle of
 * telling it and others), and not through a wake-up of their own. */
static int on_finished(sd_event_source *s, void *userdata) {
        Agent *a = userdata;

        (void) s;
        while (a->finished)
                client_free(a->finished);
        return 0;
}

void client_finish(Client *c) {
        Agent *a = c->agent;

        c->close_after_flush = true;
        if (c->out_len > 0 || c->in_finished)
                return;         /* EPOLLOUT is on: it goes once its output is out */
        if (sd_event_source_set_enabled(a->finished_source, SD_EVENT_ONESHOT) < 0) {
                /* Then through the socket, as for output. */
                client_set_events(c, EPOLLIN | EPOLLOUT | EPOLLET);
                return;
        }
        c->in_finished = true;
        LIST_PREPEND(finished, a->finished, c);
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

static void client_take_lease(Client *c, Lease *l) {
        Agent *a = c->agent;

        c->lease = l;
        slots_attach(&a->slots, l, c, now_mono());
}

/* The unit a unit=1 request runs in, or an ERROR to the client. */
static int client_unit(Client *c, char **ret) {
        int r = unit_of_client(c, ret);

        if (r == -ESRCH)
                client_send_error(c, ERROR_CODE_INVALID, "pid " PID_FMT " exited before its unit could be read",
                                  c->cred.pid);
        else if (r < 0)
                client_send_error(c, ERROR_CODE_INVALID, "pid " PID_FMT " does not run in a systemd service",
                                  c->cred.pid);
        return r;
}

/* Whether the agent may stop unit when the client's slot is lost: root
 * may ask it of any unit, another user only of a service that runs as it
 * (User= as systemd reports it; a user's job in a root service such as
 * cron.service may not have the agent stop that service). */
static bool client_may_stop(Client *c, const char *unit) {
        uid_t uid;
        int r;

        if (c->cred.uid == 0)
                return true;
        r = unit_user(c->agent, unit, &uid);
        if (r < 0) {
                client_send_error(c, ERROR_CODE_BUSY, "cannot ask systemd which user %s runs as: %s; try again",
                                  unit, strerror(-r));
                return false;
        }
        if (uid != c->cred.uid) {
                log_uid(c->cred.uid, now_mono(), LOG_WARNING,
                        "Refused on-lost=stop of %s to uid " UID_FMT ": the service runs as uid " UID_FMT ".",
                        unit, c->cred.uid, uid);
                client_send_error(c, ERROR_CODE_PERMISSION, "uid " UID_FMT " may not have %s stopped: it runs as uid " UID_FMT,
                                  c->cred.uid, unit, uid);
                return false;
        }
        return true;
}

/* The watch on a new request's anchor, checked against the requester: a
 * connection, or -EBADF when the anchor is alive by name only (its
 * backlog is full: anyone can fill it). <0 with an ERROR sent. */
static int request_watch(Client *c, const Request *req, int *ret_fd) {
        Agent *a = c->agent;
        _cleanup_close_ int watch = -EBADF;
        uid_t owner;
        int r;

        r = anchor_probe(a, req->lease, &watch, &owner);
        if (r < 0 && r != -ENOENT) {
                /* No watch sticks (a full backlog: anyone can fill it; or
                 * out of file descriptors): the kernel's table by name
                 * decides, a walk of every unix socket: one a second for
                 * each non-root user. */
                if (!user_may_look_by_name(c->user, now_mono())) {
                        client_send_error(c, ERROR_CODE_BUSY, "anchor @%s/lease/%s accepts no watch (its backlog is full), "
                                          "and this user's look by name for this second is spent; try again",
                                          a->config->namespace, req->lease);
                        return -EAGAIN;
                }
                int alive = anchor_is_listening(a->config->namespace, req->lease, &owner);

                if (alive == 0)
                        r = -ENOENT;
                else if (alive > 0) {
                        r = 0;
                        watch = -EBADF;
                }
        }
        if (r == -ENOENT) {
                client_send_error(c, ERROR_CODE_ANCHOR, "no anchor listens on @%s/lease/%s; create it before asking",
                                  a->config->namespace, req->lease);
                return r;
        }
        if (r < 0) {
                client_send_error(c, r == -EMFILE || r == -ENFILE || r == -ENOMEM ? ERROR_CODE_BUSY : ERROR_CODE_ANCHOR,
                                  "cannot watch anchor @%s/lease/%s: %s", a->config->namespace, req->lease, strerror(-r));
                return r;
        }
        if (owner == (uid_t) -1) {
                client_send_error(c, ERROR_CODE_BUSY, "anchor @%s/lease/%s accepts no watch (its backlog is full) "
                                  "and its owner cannot be checked; try again with a new anchor",
                                  a->config->namespace, req->lease);
                return -EAGAIN;
        }
        if (owner != c->cred.uid) {
                log_uid(c->cred.uid, now_mono(), LOG_WARNING,
                        "Refused %s to uid " UID_FMT ": its anchor belongs to uid " UID_FMT ".",
                        req->name, c->cred.uid, owner);
                client_send_error(c, ERROR_CODE_ANCHOR, "anchor @%s/lease/%s does not belong to the requester",
                                  a->config->namespace, req->lease);
                return -EPERM;
        }
        *ret_fd = TAKE_FD(watch);
        return 0;
}

static void handle_acquire(Client *c, const Request *req) {
        Agent *a = c->agent;
        _cleanup_close_ int watch = -EBADF;
        _cleanup_free_ char *unit = NULL, *desc = NULL;
        LeaseIo *io;
        LeaseSpec spec;
        Lease *l;
        int r;

        if (a->state == REDIS_DOWN) {
                client_send_error(c, ERROR_CODE_UNAVAILABLE, "Redis at %s is unreachable: %s",
                                  a->redis_name, a->redis_error);
                return;
        }
        if (req->unit) {
                if (client_unit(c, &unit) < 0)
                        return;
                if (req->stop_on_lost && !client_may_stop(c, unit))
                        return;
                l = slots_lease_of_unit(&a->slots, req->name, unit, c->cred.uid);
                if (l) {
                        LogFields f = { .name = req->name, .lease = l->id, .token = l->token, .holder = l->holder };

                        log_fields(LOG_INFO, &f, "%s asked again for %s: it still holds token %" PRIu64 ".",
                                   unit, req->name, l->token);
                        client_take_lease(c, l);
                        return;
                }
        }

        l = slots_lease_find(&a->slots, req->lease);
        if (l) {
                /* Asking again with the same lease (an agent restart, or a
                 * client reconnecting). */
                if (!streq(l->name->name, req->name)) {
                        client_send_error(c, ERROR_CODE_INVALID, "lease %s is held for \"%s\", not \"%s\"",
                                          req->lease, l->name->name, req->name);
                        return;
                }
                if (l->uid != c->cred.uid) {
                        client_send_error(c, ERROR_CODE_PERMISSION, "lease %s belongs to another user", req->lease);
                        return;
                }
                client_take_lease(c, l);
                return;
        }

        /* A new lease: within its user's budget, and with a file
         * descriptor to spare for its watch. */
        if (c->cred.uid != 0 && slots_leases_of(&a->slots, c->cred.uid) >= a->config->max_leases_per_user) {
                log_uid(c->cred.uid, now_mono(), LOG_WARNING,
                        "Refused %s to uid " UID_FMT ": it holds or waits for %u leases here (max_leases_per_user).",
                        req->name, c->cred.uid, a->config->max_leases_per_user);
                client_send_error(c, ERROR_CODE_LIMIT, "uid " UID_FMT " holds or waits for %u slots on this host already "
                                  "(max_leases_per_user)", c->cred.uid, a->config->max_leases_per_user);
                return;
        }
        if (c->cred.uid != 0 && slots_names_of(&a->slots, c->cred.uid, req->name) >= a->config->max_names_per_user) {
                log_uid(c->cred.uid, now_mono(), LOG_WARNING,
                        "Refused %s to uid " UID_FMT ": it holds or waits for %u other names here (max_names_per_user).",
                        req->name, c->cred.uid, a->config->max_names_per_user);
                client_send_error(c, ERROR_CODE_LIMIT, "uid " UID_FMT " holds or waits for %u other names on this host "
                                  "already (max_names_per_user)", c->cred.uid, a->config->max_names_per_user);
                return;
        }
        if (agent_short_of_fds(a, c->cred.uid)) {
                log_uid(c->cred.uid, now_mono(), LOG_WARNING, "Refused %s to uid " UID_FMT ": short of file descriptors.",
                        req->name, c->cred.uid);
                client_send_error(c, ERROR_CODE_BUSY, "the agent is short of file descriptors; try again");
                return;
        }
        if (request_watch(c, req, &watch) < 0)
                return;

        spec = (LeaseSpec) {
                .name = req->name, .id = req->lease, .uid = c->cred.uid, .pid = c->cred.pid, .unit = unit,
                .stop_on_lost = req->stop_on_lost,
                /* This host's administrator may cap what its users ask for. */
                .slots = MIN(req->slots, config_limit_for(a->config, req->name)),
        };
        desc = describe(a, &c->cred, spec.slots, unit);
        if (!desc) {
                client_send_error(c, ERROR_CODE_BUSY, "out of memory");
                return;
        }
        io = lease_io_new(a, watch);
        if (!io) {
                client_send_error(c, ERROR_CODE_BUSY, "out of memory");
                return;
        }
        TAKE_FD(watch);
        spec.desc = desc;
        c->lease = NULL;
        r = slots_acquire(&a->slots, &spec, req->wait, c, io, now_mono(), &l);
        if (r < 0) {
                lease_io_free(io);
                client_send_error(c, ERROR_CODE_BUSY, "cannot track the request: %s", strerror(-r));
                return;
        }
        if (l->state != LEASE_GONE) {
                if (l->client == c)
                        c->lease = l;
                r = lease_io_attach(io, l);
                if (r < 0) {
                        client_send_error(c, ERROR_CODE_BUSY, "cannot watch the anchor: %s", strerror(-r));
                        slots_release(&a->slots, l, "cannot watch its anchor", now_mono());
                }
        }
}

static void handle_release(Client *c, const Request *req) {
        Agent *a = c->agent;
        _cleanup_free_ char *unit = NULL;
        bool held = false;
        Lease *l;

        if (req->unit) {
                if (client_unit(c, &unit) < 0)
                        return;
                l = slots_lease_of_unit(&a->slots, req->name, unit, c->cred.uid);
        } else
                l = slots_lease_find(&a->slots, req->lease);

        if (l && l->uid != c->cred.uid && c->cred.uid != 0) {
                client_send_error(c, ERROR_CODE_PERMISSION, "lease %s belongs to another user", req->lease);
                return;
        }
        if (l) {
                held = l->state == LEASE_HELD;
                slots_release(&a->slots, l, "released on request", now_mono());
        }
        client_send(c, held ? "RELEASED held=1" : "RELEASED held=0", 15);
        client_finish(c);
}

static void client_handle_request(Client *c, const char *line, size_t len) {
        Agent *a = c->agent;
        const char *why = NULL;
        Request req;
        int r;

        c->got_request = true;
        r = request_parse(line, len, &req, &why);
        if (r < 0) {
                log_uid(c->cred.uid, now_mono(), LOG_DEBUG, "Refused request from pid " PID_FMT ": %s", c->cred.pid, why);
                client_send_error(c, r == -EINVAL ? ERROR_CODE_INVALID : ERROR_CODE_USAGE, "%s", why);
                return;
        }

        switch (req.verb) {
        case REQUEST_ACQUIRE:
                r = user_permits(a, c->cred.uid, req.name);
                if (r < 0) {
                        /* No answer from NSS (out of file descriptors, a
                         * directory that does not answer) is not a "no". */
                        client_send_error(c, ERROR_CODE_BUSY, "cannot look up uid " UID_FMT ": %s; try again",
                                          c->cred.uid, strerror(-r));
                        return;
                }
                if (r == 0) {
                        log_uid(c->cred.uid, now_mono(), LOG_NOTICE,
                                "Refused %s to uid " UID_FMT " (pid " PID_FMT "): not permitted by configuration.",
                                req.name, c->cred.uid, c->cred.pid);
                        client_send_error(c, ERROR_CODE_PERMISSION,
                                          "uid " UID_FMT " may not ask for \"%s\" (see allow= in the agent's configuration)",
                                          c->cred.uid, req.name);
                        return;
                }
                handle_acquire(c, &req);
                return;
        case REQUEST_RELEASE:
                handle_release(c, &req);
                return;
        case REQUEST_STATUS:
                status_request(a, c, req.name, false);
                return;
        case REQUEST_METRICS:
                metrics_request(a, c);
                return;
        }
}

/* A client has one request; after it, it only listens, then closes.
 * Reads to the end (edge-triggered); anything it sends is dropped. On EOF
 * or an error a waiting client withdraws, a holder's client just stops
 * listening (the anchor keeps the slot): the client is freed, -ECONNRESET. */
static int client_drain(Client *c) {
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

static int client_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Client *c = userdata;
        char *line;
        size_t len;
        int r;

        (void) s;
        (void) fd;
        if (revents & EPOLLOUT) {
                if (client_flush(c) < 0) {
                        client_free(c);
                        return 0;
                }
        }
        if (!(revents & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)))
                return 0;

        if (c->got_request) {
                (void) client_drain(c);
                return 0;
        }

        /* Edge-triggered from the start: one read takes all there is, up
         * to a request's size (past it, the line is too long anyway). */
        r = line_reader_fill(&c->in, c->fd);
        if (r == -EAGAIN)
                return 0;
        if (r <= 0) {
                client_free(c);
                return 0;
        }
        if (c->close_after_flush)
                return 0;       /* nothing more is read from a client we are done with */

        r = line_reader_next(&c->in, &line, &len);
        if (r == -E2BIG) {
                client_send_error(c, ERROR_CODE_USAGE, "request too long (at most %d bytes)", PROTO_REQUEST_MAX);
                return 0;
        }
        if (r == 0) {
                /* Half a request, and its end: it will never be whole. */
                if (revents & (EPOLLHUP | EPOLLERR | EPOLLRDHUP))
                        client_free(c);
                return 0;
        }
        /* Whatever follows the one request is not read as another. */
        client_handle_request(c, line, len);
        /* A client that closed right after its request gives no second
         * edge: its end is taken now. */
        if ((revents & (EPOLLHUP | EPOLLERR | EPOLLRDHUP)) && client_drain(c) < 0)
                return 0;
        client_update_events(c);
        return 0;
}

/* Too many clients of every user together: past max_clients, and a
 * sixteenth of it kept for root. */
static bool too_many_clients(const Agent *a, uid_t uid) {
        size_t max = a->config->max_clients;

        return a->n_clients > (uid == 0 ? max : max - max / 16);
}

static void refuse_client(Client *c, const char *why) {
        log_uid(c->cred.uid, now_mono(), LOG_WARNING, "Refused a connection of pid " PID_FMT " (uid " UID_FMT "): %s.",
                c->cred.pid, c->cred.uid, why);
        client_send_error(c, ERROR_CODE_BUSY, "%s; try again", why);
}

/* A connection past its uid's rate: told why in one send (no buffer, no
 * watch, nothing read) and closed. */
static void refuse_fast(int fd, const struct ucred *cred) {
        char line[256];
        MessageBuilder b;
        int len;

        log_uid(cred->uid, now_mono(), LOG_WARNING,
                "Refused connections of uid " UID_FMT " (pid " PID_FMT "): more than %d a second.",
                cred->uid, cred->pid, CONNECT_RATE);
        message_start(&b, line, sizeof(line), "ERROR");
        message_add(&b, "code", ERROR_CODE_BUSY);
        message_add(&b, "message", "more than " STRINGIFY(CONNECT_RATE) " new connections a second of this user; try again");
        len = message_finish(&b);
        if (len > 0 && (size_t) len < sizeof(line) - 1) {
                line[len++] = '\n';
                (void) send(fd, line, (size_t) len, MSG_DONTWAIT | MSG_NOSIGNAL);
        }
}

/* At most ACCEPT_PER_TURN connections each time the loop comes here, and
 * it comes here last (PRIORITY_ACCEPT): renewals, replies and the requests
 * of clients already connected go first, however fast others connect. */
#define ACCEPT_PER_TURN 64

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Agent *a = userdata;

        (void) revents;
        for (unsigned i = 0; i < ACCEPT_PER_TURN; i++) {
                _cleanup_close_ int cfd = -EBADF;
                struct ucred cred;
                UserUse *u;
                Client *c;
                int r;

                cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (cfd < 0) {
                        if (errno == EMFILE || errno == ENFILE) {
                                /* The connection waits in the backlog: look
                                 * again on the next housekeeping turn rather
                                 * than at once, for ever. */
                                log_uid(0, now_mono(), LOG_WARNING, "Failed to accept a client: %m; pausing for a second.");
                                (void) sd_event_source_set_enabled(s, SD_EVENT_OFF);
                        } else if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                                log_warning_errno(errno, "Failed to accept a client: %m");
                        return 0;
                }
                r = peer_cred(cfd, &cred);
                if (r < 0) {
                        log_warning_errno(r, "Failed to read the credentials of a client: %m");
                        continue;
                }
                u = user_use_get(cred.uid);
                if (!u) {
                        /* Out of memory: refused, and accepting goes on
                         * (returning an error would turn this source off). */
                        log_error("Out of memory accepting a client.");
                        continue;
                }
                if (!user_may_connect(u, 2 * a->config->max_clients_per_user, now_mono())) {
                        refuse_fast(cfd, &cred);
                        user_use_maybe_free(u);
                        continue;
                }
                c = calloc(1, sizeof(*c));
                if (!c) {
                        log_error("Out of memory accepting a client.");
                        user_use_maybe_free(u);
                        continue;
                }
                c->agent = a;
                c->fd = TAKE_FD(cfd);
                c->cred = cred;
                c->pidfd = -EBADF;
                c->accepted = now_usec(CLOCK_MONOTONIC);
                line_reader_init(&c->in, PROTO_REQUEST_MAX);
                LIST_PREPEND(clients, a->clients, c);
                a->n_clients++;
                /* Every connection counts, whatever its state: idle,
                 * mid-request, waiting, finished with output unread. */
                c->user = u;
                c->user->n_clients++;

                c->events = EPOLLIN | EPOLLRDHUP | EPOLLET;
                r = sd_event_add_io(a->event, &c->io_source, c->fd, c->events, client_io, c);
                if (r >= 0)
                        r = sd_event_source_set_priority(c->io_source, c->cred.uid == 0 ? PRIORITY_ROOT : PRIORITY_CLIENTS);
                if (r < 0) {
                        log_warning_errno(r, "Failed to watch a client: %m");
                        client_free(c);
                        continue;
                }
                if (too_many_clients(a, c->cred.uid))
                        refuse_client(c, "the agent has too many clients");
                else if (c->cred.uid != 0 && c->user->n_clients > a->config->max_clients_per_user)
                        refuse_client(c, "too many connections of this user (max_clients_per_user)");
                else if (agent_short_of_fds(a, c->cred.uid))
                        refuse_client(c, "the agent is short of file descriptors");
                else
                        unit_peer_accepted(c);
        }
        return 0;
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

static int on_housekeeping(sd_event_source *s, uint64_t usec, void *userdata) {
        Agent *a = userdata;

        (void) usec;
        client_sweep(a);
        lease_io_check_names(a);
        log_limit_flush(now_mono());
        /* Accepting again after running out of file descriptors. */
        (void) sd_event_source_set_enabled(a->listen_source, SD_EVENT_ON);
        (void) sd_event_source_set_time_relative(s, HOUSEKEEPING_EVERY);
        return 0;
}

/* The agent's own file descriptors now, before any client or anchor. */
static size_t count_fds(void) {
        DIR *d = opendir("/proc/self/fd");
        struct dirent *de;
        size_t n = 0;

        if (!d)
                return 64;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        n++;
        closedir(d);
        return n;
}

static void fd_budget_init(Agent *a) {
        struct rlimit rl;

        a->fd_limit = getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ? 1024 * 1024 : (size_t) rl.rlim_cur;
        a->fd_base = count_fds() + FD_BASE_SLACK;
}

/* With socket activation the socket's name decides the namespace: anchors
 * are looked for next to it, whatever the configuration says. */
static int namespace_from_socket(Agent *a, int fd) {
        struct sockaddr_un sa = {};
        socklen_t len = sizeof(sa);
        size_t n;
        char name[sizeof(sa.sun_path)];

        if (getsockname(fd, (struct sockaddr *) &sa, &len) < 0)
                return -errno;
        n = len > offsetof(struct sockaddr_un, sun_path) ? len - offsetof(struct sockaddr_un, sun_path) : 0;
        if (n < 2 || sa.sun_path[0] != '\0')
                return log_error_errno(EINVAL, "The socket passed by systemd is not in the abstract namespace "
                                       "(expected ListenStream=@NAMESPACE/agent).");
        memcpy(name, sa.sun_path + 1, n - 1);
        name[n - 1] = '\0';
        n = strlen(name);
        if (n <= 6 || !streq(name + n - 6, "/agent"))
                return log_error_errno(EINVAL, "The socket passed by systemd is @%s; expected @NAMESPACE/agent.", name);
        name[n - 6] = '\0';
        if (!ident_is_valid(name))
                return log_error_errno(EINVAL, "The socket passed by systemd names an invalid namespace \"%s\".", name);
        if (!streq(name, a->config->namespace)) {
                log_warning("The configuration says namespace %s, but systemd passed @%s/agent; using %s.",
                            a->config->namespace, name, name);
                snprintf(a->config->namespace, sizeof(a->config->namespace), "%s", name);
        }
        return 0;
}

/* Root's own socket, beside @NS/agent: accepted from before new
 * connections of other users (only root can connect to it). Without it
 * (the agent not root, /run read-only) root is served at @NS/agent. */
static void root_listen(Agent *a) {
        int r;

        a->root_fd = -EBADF;
        if (geteuid() != 0)
                return;
        r = agent_listen_root(a->config->namespace, &a->root_fd);
        if (r >= 0)
                r = sd_event_add_io(a->event, &a->root_source, a->root_fd, EPOLLIN, on_accept, a);
        if (r >= 0)
                r = sd_event_source_set_priority(a->root_source, PRIORITY_ROOT);
        if (r < 0) {
                log_full_errno(LOG_NOTICE, r, "Not listening on root's own socket in " AGENT_ROOT_DIR ": %m; root is served at @%s/agent.",
                                 a->config->namespace);
                a->root_source = sd_event_source_disable_unref(a->root_source);
                a->root_fd = safe_close(a->root_fd);
        }
}

static void root_unlisten(Agent *a) {
        char path[sizeof(((struct sockaddr_un *) NULL)->sun_path)];

        if (a->root_fd < 0)
                return;
        a->root_source = sd_event_source_disable_unref(a->root_source);
        a->root_fd = safe_close(a->root_fd);
        if (agent_root_path(a->config->namespace, path, sizeof(path)) >= 0)
                (void) unlink(path);
}

int server_start(Agent *a) {
        int r, n;

        n = sd_listen_fds(true);
        if (n < 0)
                return log_error_errno(n, "Failed to read sockets passed by systemd: %m");
        if (n > 1)
                return log_error_errno(EINVAL, "Expected one socket from systemd, got %d.", n);
        if (n == 1) {
                a->listen_fd = SD_LISTEN_FDS_START;
                if (sd_is_socket_unix(a->listen_fd, SOCK_STREAM, 1, NULL, 0) <= 0)
                        return log_error_errno(EINVAL, "The socket passed by systemd is not a listening AF_UNIX stream socket.");
                r = fd_set_nonblock(a->listen_fd);
                if (r < 0)
                        return log_error_errno(r, "Failed to make the listening socket non-blocking: %m");
                r = namespace_from_socket(a, a->listen_fd);
                if (r < 0)
                        return r;
        } else {
                r = agent_listen(a->config->namespace, &a->listen_fd);
                if (r == -EADDRINUSE)
                        return log_error_errno(r, "Another process already listens on @%s/agent; is an agent running?",
                                               a->config->namespace);
                if (r < 0)
                        return log_error_errno(r, "Failed to listen on @%s/agent: %m", a->config->namespace);
        }

        r = sd_event_add_io(a->event, &a->listen_source, a->listen_fd, EPOLLIN, on_accept, a);
        if (r >= 0)
                r = sd_event_source_set_priority(a->listen_source, PRIORITY_ACCEPT);
        if (r < 0)
                return log_error_errno(r, "Failed to watch the listening socket: %m");
        r = sd_event_add_defer(a->event, &a->finished_source, on_finished, a);
        if (r >= 0)
                r = sd_event_source_set_enabled(a->finished_source, SD_EVENT_OFF);
        if (r < 0)
                return log_error_errno(r, "Failed to set up closing clients: %m");
        r = sd_event_add_time_relative(a->event, &a->housekeeping_source, CLOCK_MONOTONIC, HOUSEKEEPING_EVERY, 0,
                                       on_housekeeping, a);
        if (r >= 0)
                r = sd_event_source_set_priority(a->housekeeping_source, PRIORITY_LEASES);
        if (r >= 0)
                r = sd_event_source_set_enabled(a->housekeeping_source, SD_EVENT_ON);
        if (r < 0)
                return log_error_errno(r, "Failed to set up timers: %m");
        root_listen(a);
        fd_budget_init(a);
        return 0;
}

void server_stop(Agent *a) {
        a->housekeeping_source = sd_event_source_disable_unref(a->housekeeping_source);
        while (a->clients)
                client_free(a->clients);
        a->finished_source = sd_event_source_disable_unref(a->finished_source);
        a->listen_source = sd_event_source_disable_unref(a->listen_source);
        a->listen_fd = safe_close(a->listen_fd);
        root_unlisten(a);
}
