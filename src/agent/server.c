/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <systemd/sd-daemon.h>

#include "agent.h"
#include "log.h"
#include "protocol.h"

#define CLIENT_OUT_MAX (64U * 1024 * 1024)      /* a status of many holders */
#define CLIENT_REQUEST_TIMEOUT (10 * USEC_PER_SEC)
#define CLIENTS_PER_USER_MAX 256        /* non-root: one user cannot crowd out the rest */

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
        a->n_clients--;
        sd_event_source_disable_unref(c->io_source);
        safe_close(c->fd);
        free(c->out);
        free(c);
}

static void client_set_events(Client *c, uint32_t events) {
        if (sd_event_source_set_io_events(c->io_source, events) >= 0)
                c->events = events;
}

static void client_update_events(Client *c) {
        /* EPOLLOUT also to close a finished client once its output is out. */
        uint32_t events = c->out_len > 0 || c->close_after_flush ? EPOLLOUT : 0;

        /* Keep reading: EOF from a client is how a waiter withdraws. After
         * its request, edge-triggered: a host's thousand sessions ending at
         * once must not be polled again on every turn of the loop. */
        events |= EPOLLIN | EPOLLRDHUP | (c->got_request ? EPOLLET : 0);
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
        }
        client_update_events(c);
        if (c->out_len == 0 && c->close_after_flush)
                return -ECONNRESET;
        return 0;
}

void client_send(Client *c, const char *line, int len) {
        size_t need;

        if (len < 0 || c->close_after_flush)
                return;
        need = c->out_len + (size_t) len + 1;
        if (need > CLIENT_OUT_MAX) {
                log_warning("Client pid " PID_FMT " does not read its replies; disconnecting.", c->cred.pid);
                c->close_after_flush = true;
                c->out_len = 0;
                return;
        }
        if (need > c->out_size) {
                size_t size = c->out_size ? c->out_size : 512;
                char *p;

                while (size < need)
                        size *= 2;
                p = realloc(c->out, size);
                if (!p) {
                        c->close_after_flush = true;
                        return;
                }
                c->out = p;
                c->out_size = size;
        }
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

void client_finish(Client *c) {
        c->close_after_flush = true;
        /* Edge-triggered: a host's thousand sessions ending at once are
         * each woken once (changing the events looks at the socket anew),
         * not re-polled on every turn of the loop until their turn comes. */
        if (c->out_len == 0)
                client_set_events(c, EPOLLIN | EPOLLOUT | EPOLLET);
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

static void handle_acquire(Client *c, const Request *req) {
        Agent *a = c->agent;
        _cleanup_close_ int watch = -EBADF;
        _cleanup_free_ char *unit = NULL, *desc = NULL;
        struct ucred owner;
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
                r = unit_of_pid(c->cred.pid, &unit);
                if (r < 0) {
                        client_send_error(c, ERROR_CODE_INVALID, "pid " PID_FMT " does not run in a systemd service",
                                          c->cred.pid);
                        return;
                }
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

        r = anchor_watch(a->config->namespace, req->lease, &watch);
        if (r == -ENOENT) {
                client_send_error(c, ERROR_CODE_ANCHOR, "no anchor listens on @%s/lease/%s; create it before asking",
                                  a->config->namespace, req->lease);
                return;
        }
        if (r < 0) {
                client_send_error(c, ERROR_CODE_ANCHOR, "cannot watch anchor @%s/lease/%s: %s",
                                  a->config->namespace, req->lease, strerror(-r));
                return;
        }
        r = peer_cred(watch, &owner);
        if (r < 0 || owner.uid != c->cred.uid) {
                log_warning("Refused %s to uid " UID_FMT ": its anchor belongs to uid " UID_FMT ".",
                            req->name, c->cred.uid, r < 0 ? (uid_t) -1 : owner.uid);
                client_send_error(c, ERROR_CODE_ANCHOR, "anchor @%s/lease/%s does not belong to the requester",
                                  a->config->namespace, req->lease);
                return;
        }

        spec = (LeaseSpec) {
                .name = req->name, .id = req->lease, .uid = c->cred.uid, .pid = c->cred.pid, .unit = unit,
                .stop_on_lost = req->stop_on_lost,
                /* This host's administrator may cap what its users ask for. */
                .slots = MIN(req->slots, config_limit_for(a->config, req->name)),
        };
        desc = describe(a, &c->cred, spec.slots, unit);
        io = lease_io_new(a, watch);
        if (!desc || !io) {
                free(io);
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
                if (unit_of_pid(c->cred.pid, &unit) < 0) {
                        client_send_error(c, ERROR_CODE_INVALID, "pid " PID_FMT " does not run in a systemd service",
                                          c->cred.pid);
                        return;
                }
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
                log_debug("Refused request from pid " PID_FMT ": %s", c->cred.pid, why);
                client_send_error(c, r == -EINVAL ? ERROR_CODE_INVALID : ERROR_CODE_USAGE, "%s", why);
                return;
        }

        switch (req.verb) {
        case REQUEST_ACQUIRE:
                if (!config_permits(a->config, c->cred.uid, req.name)) {
                        log_notice("Refused %s to uid " UID_FMT " (pid " PID_FMT "): not permitted by configuration.",
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
                status_request(a, c, req.name);
                return;
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
                /* A client has one request; after it, it only listens, then
                 * closes. Read to the end (edge-triggered); anything it
                 * sends is dropped. */
                char buf[512];

                for (;;) {
                        ssize_t n = read(c->fd, buf, sizeof(buf));

                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0 && errno == EAGAIN)
                                return 0;
                        if (n <= 0) {
                                /* EOF or error: a waiting client withdraws, a
                                 * holder's client just stops listening (the
                                 * anchor keeps the slot). */
                                client_free(c);
                                return 0;
                        }
                }
        }

        r = line_reader_fill(&c->in, c->fd);
        if (r == -EAGAIN)
                return 0;
        if (r <= 0) {
                /* EOF or error: a waiting client withdraws, a holder's client
                 * just stops listening (the anchor keeps the slot). */
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
        if (r == 0)
                return 0;
        /* Whatever follows the one request is not read as another. */
        client_handle_request(c, line, len);
        client_update_events(c);        /* edge-triggered from now on */
        return 0;
}

static size_t clients_of_user(Agent *a, uid_t uid) {
        size_t n = 0;

        for (Client *c = a->clients; c; c = c->clients_next)
                if (c->cred.uid == uid && !c->close_after_flush)
                        n++;
        return n;
}

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Agent *a = userdata;

        (void) s;
        (void) revents;
        for (unsigned i = 0; i < 64; i++) {
                _cleanup_close_ int cfd = -EBADF;
                Client *c;
                int r;

                cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (cfd < 0) {
                        if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                                log_warning_errno(errno, "Failed to accept a client: %m");
                        return 0;
                }
                c = calloc(1, sizeof(*c));
                if (!c)
                        return log_error_errno(ENOMEM, "Out of memory accepting a client.");
                c->agent = a;
                c->fd = TAKE_FD(cfd);
                c->accepted = now_usec(CLOCK_MONOTONIC);
                line_reader_init(&c->in, PROTO_REQUEST_MAX);
                LIST_PREPEND(clients, a->clients, c);
                a->n_clients++;

                c->events = EPOLLIN | EPOLLRDHUP;
                r = sd_event_add_io(a->event, &c->io_source, c->fd, c->events, client_io, c);
                if (r < 0) {
                        log_warning_errno(r, "Failed to watch a client: %m");
                        client_free(c);
                        continue;
                }
                r = peer_cred(c->fd, &c->cred);
                if (r < 0) {
                        log_warning_errno(r, "Failed to read the credentials of a client: %m");
                        client_free(c);
                        continue;
                }
                if (a->n_clients > a->config->max_clients) {
                        log_warning("Too many clients (%zu); refusing pid " PID_FMT ".", a->n_clients, c->cred.pid);
                        client_send_error(c, ERROR_CODE_BUSY, "the agent has too many clients; try again");
                } else if (c->cred.uid != 0 && clients_of_user(a, c->cred.uid) > CLIENTS_PER_USER_MAX) {
                        log_warning("uid " UID_FMT " has more than %d connections; refusing pid " PID_FMT ".",
                                    c->cred.uid, CLIENTS_PER_USER_MAX, c->cred.pid);
                        client_send_error(c, ERROR_CODE_BUSY, "too many connections from uid " UID_FMT, c->cred.uid);
                }
        }
        return 0;
}

void client_sweep(Agent *a) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        Client *c, *n;

        LIST_FOREACH_SAFE(clients, c, n, a->clients)
                if (!c->got_request && now - c->accepted > CLIENT_REQUEST_TIMEOUT) {
                        log_debug("Dropping client pid " PID_FMT ": no request within 10s.", c->cred.pid);
                        client_free(c);
                }
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
        if (r < 0)
                return log_error_errno(r, "Failed to watch the listening socket: %m");
        return 0;
}

void server_stop(Agent *a) {
        while (a->clients)
                client_free(a->clients);
        a->listen_source = sd_event_source_disable_unref(a->listen_source);
        a->listen_fd = safe_close(a->listen_fd);
}
