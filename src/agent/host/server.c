/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <systemd/sd-daemon.h>

#include "agent.h"
#include "log-limit.h"
#include "log.h"
#include "protocol.h"

#define HOUSEKEEPING_EVERY USEC_PER_SEC

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

void server_fatal(Agent *a, int r, const char *what) {
        log_error_errno(r, "Failed to %s: %m; exiting, held slots stay anchored for the next agent.", what);
        /* (It fails only once the loop is done: it exits anyway.) */
        (void) sd_event_exit(a->event, r);
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
                                r = sd_event_source_set_enabled(s, SD_EVENT_OFF);
                                if (r < 0)
                                        server_fatal(a, r, "pause accepting clients");
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
                if (agent_too_many_clients(a, c->cred.uid))
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

/* What the listening side keeps: the two sockets, their sources and
 * housekeeping's. */
struct Server {
        int listen_fd;
        int root_fd;                    /* root's own socket (socket-util.h), or -EBADF */
        sd_event_source *listen_source;
        sd_event_source *root_source;
        sd_event_source *housekeeping_source;
};

static int on_housekeeping(sd_event_source *s, uint64_t usec, void *userdata) {
        Agent *a = userdata;
        int r;

        (void) usec;
        client_sweep(a);
        lease_io_check_names(a);
        log_limit_flush(now_mono());
        /* Accepting again after running out of file descriptors. */
        r = sd_event_source_set_enabled(a->server->listen_source, SD_EVENT_ON);
        if (r < 0) {
                server_fatal(a, r, "accept clients again");
                return 0;
        }
        r = sd_event_source_set_time_relative(s, HOUSEKEEPING_EVERY);
        if (r < 0)
                server_fatal(a, r, "arm housekeeping");
        return 0;
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

        a->server->root_fd = -EBADF;
        if (geteuid() != 0)
                return;
        r = agent_listen_root(a->config->namespace, &a->server->root_fd);
        if (r >= 0)
                r = sd_event_add_io(a->event, &a->server->root_source, a->server->root_fd, EPOLLIN, on_accept, a);
        if (r >= 0)
                r = sd_event_source_set_priority(a->server->root_source, PRIORITY_ROOT);
        if (r < 0) {
                log_full_errno(LOG_NOTICE, r, "Not listening on root's own socket in " AGENT_ROOT_DIR ": %m; root is served at @%s/agent.",
                                 a->config->namespace);
                a->server->root_source = sd_event_source_disable_unref(a->server->root_source);
                a->server->root_fd = safe_close(a->server->root_fd);
        }
}

static void root_unlisten(Agent *a) {
        char path[sizeof(((struct sockaddr_un *) NULL)->sun_path)];

        if (a->server->root_fd < 0)
                return;
        a->server->root_source = sd_event_source_disable_unref(a->server->root_source);
        a->server->root_fd = safe_close(a->server->root_fd);
        if (agent_root_path(a->config->namespace, path, sizeof(path)) >= 0)
                (void) unlink(path);
}

int server_start(Agent *a) {
        int r, n;

        a->server = calloc(1, sizeof(Server));
        if (!a->server)
                return log_error_errno(ENOMEM, "Out of memory.");
        a->server->listen_fd = a->server->root_fd = -EBADF;
        n = sd_listen_fds(true);
        if (n < 0)
                return log_error_errno(n, "Failed to read sockets passed by systemd: %m");
        if (n > 1)
                return log_error_errno(EINVAL, "Expected one socket from systemd, got %d.", n);
        if (n == 1) {
                a->server->listen_fd = SD_LISTEN_FDS_START;
                if (sd_is_socket_unix(a->server->listen_fd, SOCK_STREAM, 1, NULL, 0) <= 0)
                        return log_error_errno(EINVAL, "The socket passed by systemd is not a listening AF_UNIX stream socket.");
                r = fd_set_nonblock(a->server->listen_fd);
                if (r < 0)
                        return log_error_errno(r, "Failed to make the listening socket non-blocking: %m");
                r = namespace_from_socket(a, a->server->listen_fd);
                if (r < 0)
                        return r;
        } else {
                r = agent_listen(a->config->namespace, &a->server->listen_fd);
                if (r == -EADDRINUSE)
                        return log_error_errno(r, "Another process already listens on @%s/agent; is an agent running?",
                                               a->config->namespace);
                if (r < 0)
                        return log_error_errno(r, "Failed to listen on @%s/agent: %m", a->config->namespace);
        }

        r = sd_event_add_io(a->event, &a->server->listen_source, a->server->listen_fd, EPOLLIN, on_accept, a);
        if (r >= 0)
                r = sd_event_source_set_priority(a->server->listen_source, PRIORITY_ACCEPT);
        if (r < 0)
                return log_error_errno(r, "Failed to watch the listening socket: %m");
        r = conns_start(a);
        if (r < 0)
                return r;
        r = sd_event_add_time_relative(a->event, &a->server->housekeeping_source, CLOCK_MONOTONIC, HOUSEKEEPING_EVERY, 0,
                                       on_housekeeping, a);
        if (r >= 0)
                r = sd_event_source_set_priority(a->server->housekeeping_source, PRIORITY_LEASES);
        if (r >= 0)
                r = sd_event_source_set_enabled(a->server->housekeeping_source, SD_EVENT_ON);
        if (r < 0)
                return log_error_errno(r, "Failed to set up timers: %m");
        root_listen(a);
        fd_budget_init();
        return 0;
}

void server_stop(Agent *a) {
        if (!a->server)
                return;
        a->server->housekeeping_source = sd_event_source_disable_unref(a->server->housekeeping_source);
        while (a->clients)
                client_free(a->clients);
        conns_stop(a);
        a->server->listen_source = sd_event_source_disable_unref(a->server->listen_source);
        a->server->listen_fd = safe_close(a->server->listen_fd);
        root_unlisten(a);
        a->server = mfree(a->server);
}
