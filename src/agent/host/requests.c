/* SPDX-License-Identifier: MIT */
/* A client's one request: read, checked, and handed to the engine
 * (ACQUIRE, RELEASE) or answered (STATUS, METRICS). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/epoll.h>

#include "agent.h"
#include "lease-record.h"
#include "log-limit.h"
#include "log.h"

static void client_take_lease(Client *c, Lease *l) {
        Agent *a = c->agent;

        c->lease = l;
        engine_attach(&a->engine, l, c, now_mono());
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

/* Whether a uid's count of other names it holds or waits for here is at
 * its limit; if so, the request is refused, saying so. */
static bool past_names_limit(Client *c, const Request *req, size_t count, unsigned max) {
        if (count < max)
                return false;
        log_uid(c->cred.uid, now_mono(), LOG_WARNING, "Refused %s to uid " UID_FMT ": it holds or waits for %u other names "
                "here (max_names_per_user).", req->name, c->cred.uid, max);
        client_send_error(c, ERROR_CODE_LIMIT, "uid " UID_FMT " holds or waits for %u other names on this host already "
                          "(max_names_per_user)", c->cred.uid, max);
        return true;
}

/* Whether a non-root uid's request for a name it does not have in Redis
 * yet would take it past max_redis_names_per_user (budgets.c); if so, the
 * request is refused, saying so, and counted (names_refused). */
static bool past_redis_names_limit(Client *c, const Request *req) {
        Agent *a = c->agent;
        unsigned max = a->config->max_redis_names_per_user;
        usec_t now = now_mono();
        UserUse *u = user_use_get(c->cred.uid);
        char life[FORMAT_DURATION_MAX];

        if (!u) {
                client_send_error(c, ERROR_CODE_BUSY, "out of memory");
                return true;
        }
        if (user_may_use_name(u, req->name, max, now))
                return false;
        a->names_refused++;
        log_uid(c->cred.uid, now, LOG_WARNING, "Refused %s to uid " UID_FMT ": it has %u names in Redis from this host "
                "already (max_redis_names_per_user).", req->name, c->cred.uid, max);
        client_send_error(c, ERROR_CODE_LIMIT, "uid " UID_FMT " has %u names in Redis from this host already, each kept "
                          "there for %s after its last use (max_redis_names_per_user); use one of them, or wait",
                          c->cred.uid, max,
                          format_duration(life, sizeof(life), config_name_life(a->config, c->cred.uid, false, false)));
        return true;
}

/* Whether a non-root uid's request is past its budgets of units: its
 * weight above max_weight_per_user, or the units (weights summed) of its
 * leases here, held and waiting, with this one above max_leases_per_user;
 * if so, the request is refused, saying so. */
static bool past_units_limit(Client *c, const Request *req) {
        const Config *conf = c->agent->config;
        uint64_t units;

        if (req->weight > conf->max_weight_per_user) {
                log_uid(c->cred.uid, now_mono(), LOG_WARNING, "Refused %s to uid " UID_FMT ": weight %" PRIu32 " is above "
                        "max_weight_per_user (%u).", req->name, c->cred.uid, req->weight, conf->max_weight_per_user);
                client_send_error(c, ERROR_CODE_LIMIT, "uid " UID_FMT " may not ask for weight %" PRIu32 " on this host "
                                  "(max_weight_per_user is %u)", c->cred.uid, req->weight, conf->max_weight_per_user);
                return true;
        }
        units = engine_units_of(&c->agent->engine, c->cred.uid);
        if (units + req->weight <= conf->max_leases_per_user)
                return false;
        log_uid(c->cred.uid, now_mono(), LOG_WARNING, "Refused %s to uid " UID_FMT ": it holds or waits for %" PRIu64
                " units here, and %" PRIu32 " more would pass max_leases_per_user (%u).", req->name, c->cred.uid, units,
                req->weight, conf->max_leases_per_user);
        client_send_error(c, ERROR_CODE_LIMIT, "uid " UID_FMT " holds or waits for %" PRIu64 " units on this host already; "
                          "%" PRIu32 " more would pass max_leases_per_user (%u)", c->cred.uid, units, req->weight,
                          conf->max_leases_per_user);
        return true;
}

static void handle_acquire(Client *c, const Request *req) {
        Agent *a = c->agent;
        _cleanup_close_ int watch = -EBADF;
        _cleanup_free_ char *unit = NULL, *desc = NULL;
        char holder[LEASE_HOLDER_MAX];
        LeaseIo *io;
        LeaseSpec spec;
        uint64_t start;
        Lease *l;
        int r;

        if (a->state == REDIS_DOWN) {
                client_send_redis_down(c);
                return;
        }
        if (req->host_held) {
                /* A slot that outlives every process, and the agent: the
                 * host's administrator's alone. */
                if (c->cred.uid != 0) {
                        client_send_error(c, ERROR_CODE_PERMISSION, "only root may take a slot held by the host");
                        return;
                }
                /* One a name: asking again answers with the slot (or the
                 * place in line) the host has already. */
                l = engine_lease_of_host(&a->engine, req->name);
                if (l) {
                        client_take_lease(c, l);
                        return;
                }
        }
        if (req->unit) {
                if (client_unit(c, &unit) < 0)
                        return;
                if (req->stop_on_lost && !client_may_stop(c, unit))
                        return;
                l = engine_lease_of_unit(&a->engine, req->name, unit, c->cred.uid);
                if (l) {
                        LogFields f = { .name = req->name, .lease = l->id, .token = l->token, .holder = l->holder };

                        log_fields(LOG_INFO, &f, "%s asked again for %s: it still holds token %" PRIu64 ".",
                                   unit, req->name, l->token);
                        client_take_lease(c, l);
                        return;
                }
        }

        l = engine_lease_find(&a->engine, req->lease);
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
                if (l->host_held != req->host_held) {
                        client_send_error(c, ERROR_CODE_INVALID, "lease %s is %sheld by the host", req->lease,
                                          l->host_held ? "" : "not ");
                        return;
                }
                client_take_lease(c, l);
                return;
        }

        /* Nothing new on a Redis that may evict, or whose library cannot
         * be checked (a slot held already is told again above: it is
         * counted). */
        if (a->refuse_state) {
                client_send_error(c, error_code_of_state(a->refuse_state), "%s", a->refuse_text);
                return;
        }
        /* A new lease: within its user's budgets (units, names), and with a
         * file descriptor to spare for its watch. */
        if (c->cred.uid != 0 &&
            (past_units_limit(c, req) ||
             past_names_limit(c, req, engine_names_of(&a->engine, c->cred.uid, req->name), a->config->max_names_per_user) ||
             past_redis_names_limit(c, req)))
                return;
        if (agent_short_of_fds(a, c->cred.uid)) {
                log_uid(c->cred.uid, now_mono(), LOG_WARNING, "Refused %s to uid " UID_FMT ": short of file descriptors.",
                        req->name, c->cred.uid);
                client_send_error(c, ERROR_CODE_BUSY, "the agent is short of file descriptors; try again");
                return;
        }
        if (!req->host_held && request_watch(c, req, &watch) < 0)
                return;

        spec = (LeaseSpec) {
                .name = req->name, .id = req->lease, .uid = c->cred.uid, .pid = c->cred.pid, .unit = unit,
                .stop_on_lost = req->stop_on_lost, .weight = req->weight, .host_held = req->host_held,
                .ttl = req->host_held ? a->config->host_lease : 0,
                /* This host's administrator may cap what its users ask for
                 * (also a caller that asks for none, the fleet limit's). */
                .slots = req->slots > 0                                        ? MIN(req->slots, config_limit_for(a->config, req->name))
                         : config_limit_for(a->config, req->name) <= SLOTS_MAX ? config_limit_for(a->config, req->name)
                                                                               : 0,
        };
        desc = requester_describe(a, &c->cred, spec.slots, unit, req->host_held ? req->reason : NULL, holder, &start);
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
        /* Only the process that asked is ever told (terminal.c): its pid
         * may have gone to another since it connected. */
        io->requester_start = client_is_peer(c, start) ? start : 0;
        spec.desc = desc;
        spec.holder = holder;
        c->lease = NULL;
        if (c->cred.uid != 0) {
                /* Among the user's names in Redis while its lease is here. */
                UserUse *u = user_use_get(c->cred.uid);

                r = u ? user_name_used(u, req->name, USEC_INFINITY) : -ENOMEM;
                if (r < 0) {
                        lease_io_free(io);
                        client_send_error(c, ERROR_CODE_BUSY, "out of memory");
                        return;
                }
        }
        r = engine_acquire(&a->engine, &spec, req->wait, c, io, now_mono(), &l);
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
                        engine_release(&a->engine, l, "cannot watch its anchor", now_mono());
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
                l = engine_lease_of_unit(&a->engine, req->name, unit, c->cred.uid);
        } else if (req->host_held) {
                /* The host's own slot: the host's administrator's. */
                if (c->cred.uid != 0) {
                        client_send_error(c, ERROR_CODE_PERMISSION, "only root may release a slot held by the host");
                        return;
                }
                l = engine_lease_of_host(&a->engine, req->name);
        } else
                l = engine_lease_find(&a->engine, req->lease);

        if (l && l->uid != c->cred.uid && c->cred.uid != 0) {
                client_send_error(c, ERROR_CODE_PERMISSION, "lease %s belongs to another user", req->lease);
                return;
        }
        if (l) {
                held = lease_state_holds(l->state);
                engine_release(&a->engine, l, "released on request", now_mono());
        }
        client_send(c, held ? "RELEASED held=1" : "RELEASED held=0", 15);
        client_finish(c);
}

/* A request that needs Redis, read while the agent makes its connection
 * (a socket-activated agent's first client comes before it): kept, and
 * handled once Redis is up or known down, a bound the connection's
 * timeouts set, as for an acquire (the engine keeps those). A RELEASE
 * also waits for this host's leases to be re-adopted: until then it
 * would find none. */
static bool request_waits(const Agent *a, const Request *req) {
        switch (req->verb) {
        case REQUEST_ACQUIRE:
                /* A lease this host's record holds (its job reconnecting
                 * after an agent restart) is that slot, counted: it waits
                 * for the re-adoption too, so that no refusal of new
                 * slots (shard_refuse(), an evicting Redis) takes it for
                 * one before then. */
                return !a->adopted && !req->host_held &&
                       (lease_record_exists(a->run_record_fd, req->lease) || lease_record_exists(a->record_fd, req->lease));
        case REQUEST_STATUS:
        case REQUEST_METRICS:
        case REQUEST_DRAIN:
        case REQUEST_REVOKE:
        case REQUEST_LIMIT:
                return a->state == REDIS_CONNECTING;
        case REQUEST_RELEASE:
                return (a->state == REDIS_CONNECTING && !a->adopted) || (a->state == REDIS_READY && a->adopting);
        default:
                return false;
        }
}

static void client_dispatch(Client *c, const Request *req) {
        Agent *a = c->agent;
        int r;

        switch (req->verb) {
        case REQUEST_ACQUIRE:
                r = user_permits(a, c->cred.uid, req->name);
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
                                req->name, c->cred.uid, c->cred.pid);
                        client_send_error(c, ERROR_CODE_PERMISSION,
                                          "uid " UID_FMT " may not ask for \"%s\" (see allow= in the agent's configuration)",
                                          c->cred.uid, req->name);
                        return;
                }
                handle_acquire(c, req);
                return;
        case REQUEST_RELEASE:
                handle_release(c, req);
                return;
        case REQUEST_STATUS:
                status_request(a, c, req->name, false);
                return;
        case REQUEST_WATCH:
                /* Every name's wake-ups cost Redis a copy of each name's
                 * traffic to this agent: for root's watches only. Others
                 * are told the changes this host sees, and redraw on
                 * their own timer. */
                if (!c->watching && c->cred.uid == 0 && a->n_watching++ == 0)
                        redis_io_watch_all(a, true);
                c->watching = true;
                client_send(c, "WATCHING", strlen("WATCHING"));
                return;
        case REQUEST_METRICS:
                metrics_request(a, c);
                return;
        case REQUEST_DRAIN:
                drain_request(a, c, req);
                return;
        case REQUEST_REVOKE:
                revoke_request(a, c, req);
                return;
        case REQUEST_LIMIT:
                limit_request(a, c, req);
                return;
        }
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

        if (request_waits(a, &req)) {
                c->deferred = malloc(sizeof(Request));
                if (!c->deferred) {
                        client_send_error(c, ERROR_CODE_BUSY, "out of memory; try again");
                        return;
                }
                *c->deferred = req;
                return;
        }
        client_dispatch(c, &req);
}

int client_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
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

void requests_resume_deferred(Agent *a) {
        Client *c, *next;

        LIST_FOREACH_SAFE(clients, c, next, a->clients)
                if (c->deferred && !request_waits(a, c->deferred)) {
                        _cleanup_free_ Request *req = TAKE_PTR(c->deferred);

                        client_dispatch(c, req);
                        client_update_events(c);
                }
}
