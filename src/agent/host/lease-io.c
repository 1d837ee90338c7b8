/* SPDX-License-Identifier: MIT */
/* A lease's and a name's I/O beside the engine: the watch on the anchor
 * (its hang-up releases the slot) and one timer each. An anchor is alive
 * until the kernel says its name is gone: when its backlog is full (anyone
 * may connect to it and never be accepted), the lease is watched by name
 * until a watch connection sticks; and when a watch ends while the name
 * still listens (the process that accepted it went, and the job it started
 * holds another copy of the anchor), the anchor is watched again. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "agent.h"
#include "log-limit.h"
#include "log.h"

/* New watches for one anchor at once, in a window; more wait for the
 * check by name at housekeeping. */
#define REWATCHES_MAX 4
#define REWATCH_WINDOW USEC_PER_SEC

/* What is kept of the anchors together: those without a watch
 * connection, looked for by name at housekeeping. */
struct Anchors {
        LeaseIo *by_name;               /* anchors alive by name only */
        size_t n_by_name;
        /* The look by name under way (one at a time): the kernel's table
         * read a batch a turn of the loop, so that a host with many unix
         * sockets (anyone can make them) delays nobody's request by more
         * than a batch; its leases held until it ends. */
        AnchorWalk *walk;
        sd_event_source *walk_source;
        Lease **walk_leases;
        const char **walk_ids;
        size_t walk_n;
        usec_t walk_since;
};

/* A look by name the kernel has not ended in this long is given up, and
 * a new one started (it never happens on a kernel that answers). */
#define WALK_MAX (10 * USEC_PER_SEC)

int lease_io_start(Agent *a) {
        a->anchors = calloc(1, sizeof(Anchors));
        if (!a->anchors)
                return log_error_errno(ENOMEM, "Out of memory.");
        return 0;
}

static void walk_done(Anchors *an) {
        an->walk_source = sd_event_source_disable_unref(an->walk_source);
        an->walk = anchor_walk_free(an->walk);
        for (size_t i = 0; i < an->walk_n; i++)
                lease_unref(an->walk_leases[i]);
        an->walk_leases = mfree(an->walk_leases);
        an->walk_ids = mfree(an->walk_ids);
        an->walk_n = 0;
}

void lease_io_stop(Agent *a) {
        if (a->anchors)
                walk_done(a->anchors);
        a->anchors = mfree(a->anchors);
}

static void watch_by_name(LeaseIo *io) {
        if (io->by_name)
                return;
        io->by_name = true;
        LIST_PREPEND(by_name, io->agent->anchors->by_name, io);
        io->agent->anchors->n_by_name++;
}

static void unwatch_by_name(LeaseIo *io) {
        if (!io->by_name)
                return;
        LIST_REMOVE(by_name, io->agent->anchors->by_name, io);
        io->agent->anchors->n_by_name--;
        io->by_name = false;
}

static int on_anchor_event(sd_event_source *s, int fd, uint32_t revents, void *userdata);

static int watch_fd_attach(LeaseIo *io) {
        /* Edge-triggered: a closed anchor stays "ready" until its source is
         * gone, and thousands closing at once (a host's sessions ending)
         * would otherwise be polled again on every turn of the loop. */
        int r = sd_event_add_io(io->agent->event, &io->watch_source, io->watch_fd, EPOLLRDHUP | EPOLLET,
                                on_anchor_event, io);

        return r < 0 ? r : sd_event_source_set_priority(io->watch_source, PRIORITY_LEASES);
}

LeaseIo *lease_io_new(Agent *a, int watch_fd) {
        LeaseIo *io = calloc(1, sizeof(*io));

        if (!io)
                return NULL;
        io->agent = a;
        io->watch_fd = watch_fd;
        if (watch_fd >= 0)
                a->n_watch_fds++;
        return io;
}

static void lease_io_close_watch(LeaseIo *io) {
        if (io->watch_fd < 0)
                return;
        io->watch_source = sd_event_source_disable_unref(io->watch_source);
        io->watch_fd = safe_close(io->watch_fd);
        io->agent->n_watch_fds--;
}

LeaseIo *lease_io_free(LeaseIo *io) {
        if (!io)
                return NULL;
        unwatch_by_name(io);
        io->timer_source = sd_event_source_disable_unref(io->timer_source);
        io->kill_source = sd_event_source_disable_unref(io->kill_source);
        free(io->kill_unit);
        lease_io_close_watch(io);
        return mfree(io);
}

/* Starts watching once the engine made the lease. */
int lease_io_attach(LeaseIo *io, Lease *l) {
        io->lease = l;
        if (l->host_held)
                return 0;       /* no anchor: held until released or revoked */
        if (io->watch_fd >= 0)
                return watch_fd_attach(io);
        watch_by_name(io);
        log_notice("Anchor of lease %s (%s) does not accept a watch (its backlog is full); "
                   "watching it by name until one sticks.", l->id, l->name->name);
        return 0;
}

int anchor_probe(Agent *a, const char *lease, int *ret_fd, uid_t *ret_uid) {
        _cleanup_close_ int fd = -EBADF;
        struct ucred owner;
        int r;

        r = anchor_watch(a->config->namespace, lease, &fd);
        if (r < 0)
                return r;
        r = peer_cred(fd, &owner);
        if (r < 0)
                return r;
        *ret_fd = TAKE_FD(fd);
        *ret_uid = owner.uid;
        return 0;
}

static void release_foreign(Agent *a, Lease *l, uid_t uid) {
        log_warning("Anchor @%s/lease/%s now belongs to uid " UID_FMT ", not " UID_FMT "; releasing its slot of %s.",
                    a->config->namespace, l->id, uid, l->uid, l->name->name);
        engine_anchor_closed(&a->engine, l, now_mono());
}

/* An anchor without a watch connection (its backlog was full, or the one
 * it had ended): a new watch if one sticks now and its owner is still the
 * lease's, else alive by name until the name is gone. The lease (and io
 * with it) is released when the kernel no longer has the name. */
static void rewatch(LeaseIo *io) {
        Agent *a = io->agent;
        Lease *l = io->lease;
        uid_t uid;
        int fd, r;

        r = anchor_probe(a, l->id, &fd, &uid);
        if (r == -ENOENT) {
                engine_anchor_closed(&a->engine, l, now_mono());
                return;
        }
        if (r >= 0 && uid != l->uid) {
                safe_close(fd);
                release_foreign(a, l, uid);
                return;
        }
        if (r >= 0) {
                io->watch_fd = fd;
                a->n_watch_fds++;
                if (watch_fd_attach(io) >= 0) {
                        if (io->by_name)
                                log_info("Anchor of lease %s (%s) accepts a watch again.", l->id, l->name->name);
                        else
                                log_info("Watch on the anchor of lease %s (%s) ended, but the anchor still listens "
                                         "(its job holds it); watching it again.", l->id, l->name->name);
                        unwatch_by_name(io);
                        return;
                }
                lease_io_close_watch(io);
        }
        /* No watch now (a full backlog, or out of file descriptors):
         * alive until a look by name at housekeeping says otherwise. */
        watch_by_name(io);
}

/* The watch connection ended: the anchor closed, or the process that
 * accepted the connection went (fleetsem run killed) while other copies
 * of the anchor live on in the job it started. The kernel tells which: a
 * connection still in the anchor's backlog is reset when the last copy of
 * the anchor closes, while one that was accepted and closed reads as an
 * end of file (the agent never writes to it, so nothing unread turns its
 * close into a reset). After an end of file the name is looked at again.
 * A process that accepts and drops watches in a loop gets a few new ones
 * a second at most; past that, the anchor is checked by name at
 * housekeeping. */
static int on_anchor_event(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        LeaseIo *io = userdata;
        usec_t now = now_mono();
        char buf[64];
        ssize_t n;
        bool reset;

        (void) s;
        (void) revents;
        /* No anchor writes: any event means the watch ended. */
        n = read(fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        reset = n < 0 && errno == ECONNRESET;
        if (!io->lease)
                return 0;
        lease_io_close_watch(io);
        if (reset) {
                engine_anchor_closed(&io->agent->engine, io->lease, now);
                return 0;
        }
        if (now >= io->rewatch_window + REWATCH_WINDOW) {
                io->rewatch_window = now;
                io->rewatches = 0;
        }
        if (io->rewatches++ < REWATCHES_MAX)
                rewatch(io);
        else
                watch_by_name(io);
        return 0;
}

/* What a look by name found (r < 0: it failed), for the leases it looked
 * for: a name another user now listens on is that user's, not the
 * holder's; a name not seen is asked once more, by a connection, before
 * its slot is released. A dump read in batches resumes each by position:
 * sockets that close between two batches shift the others, and one of
 * them may go unseen. The connection says for sure: refused when nothing
 * listens, EAGAIN when a full backlog does (a watch when one sticks). */
static void names_found(Agent *a, Lease **leases, size_t n, int r, const bool *alive, const uid_t *uids) {
        if (r < 0)
                log_debug_errno(r, "Failed to look for anchors by name: %m");
        for (size_t i = 0; i < n && r >= 0; i++) {
                Lease *l = leases[i];

                /* Only leases still watched by name: an earlier one's
                 * release, or anything while the look went on, may have
                 * changed what the others are. */
                if (l->state != LEASE_GONE && l->io && ((LeaseIo *) l->io)->by_name) {
                        if (!alive[i])
                                rewatch(l->io);
                        else if (uids[i] != (uid_t) -1 && uids[i] != l->uid)
                                release_foreign(a, l, uids[i]);
                }
        }
}

/* The look ended with r (1: its answers are in; <0: it failed): acted on,
 * then done. Netlink refused here, at the start or on the way: the same
 * from /proc, at once. */
static void walk_end(Agent *a, int r) {
        Anchors *an = a->anchors;
        _cleanup_free_ bool *proc_alive = NULL;
        _cleanup_free_ uid_t *proc_uids = NULL;
        const bool *alive = NULL;
        const uid_t *uids = NULL;

        if (anchor_walk_refused(r)) {
                alive = proc_alive = calloc(an->walk_n ?: 1, sizeof(bool));
                uids = proc_uids = calloc(an->walk_n ?: 1, sizeof(uid_t));
                r = alive && uids ? anchors_listening(a->config->namespace, an->walk_ids, an->walk_n, proc_alive,
                                                      proc_uids)
                                  : -ENOMEM;
        } else if (r >= 0) {
                alive = anchor_walk_alive(an->walk);
                uids = anchor_walk_uid(an->walk);
        }
        names_found(a, an->walk_leases, an->walk_n, r, alive, uids);
        walk_done(an);
}

static int on_walk(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Agent *a = userdata;
        Anchors *an = a->anchors;
        int r;

        (void) s;
        (void) fd;
        (void) revents;
        r = anchor_walk_step(an->walk);
        if (r == 0)
                return 0;       /* more at the next turn */
        walk_end(a, r);
        return 0;
}

/* Every housekeeping turn: a watch for each anchor watched by name, if one
 * sticks now; then those still without one looked for by name, all in one
 * walk of the kernel's table (whatever else listens on the host, the
 * agent walks it once a turn, not once a lease), a batch at a time. */
void lease_io_check_names(Agent *a) {
        Anchors *an = a->anchors;
        LeaseIo *io, *next;
        size_t n = 0;
        int r;

        /* Releasing a lease frees its io (and takes it off the list). */
        LIST_FOREACH_SAFE(by_name, io, next, an->by_name)
                if (io->lease)
                        rewatch(io);
        if (an->walk && now_mono() - an->walk_since > WALK_MAX) {
                log_warning("The kernel did not end a look for %zu anchors by name in %s; looking again.", an->walk_n,
                            format_duration((char[FORMAT_DURATION_MAX]) {}, FORMAT_DURATION_MAX, WALK_MAX));
                walk_done(an);
        }
        if (an->n_by_name == 0 || an->walk)
                return;         /* none, or the last look still goes on */

        an->walk_leases = calloc(an->n_by_name, sizeof(Lease *));
        an->walk_ids = calloc(an->n_by_name, sizeof(char *));
        if (!an->walk_leases || !an->walk_ids) {
                walk_done(an);
                return;         /* again at the next turn */
        }
        LIST_FOREACH(by_name, io, an->by_name)
                if (io->lease && n < an->n_by_name) {
                        an->walk_leases[n] = lease_ref(io->lease);
                        an->walk_ids[n++] = io->lease->id;
                }
        an->walk_n = n;
        an->walk_since = now_mono();
        r = anchor_walk_start(a->config->namespace, an->walk_ids, n, &an->walk);
        if (r >= 0) {
                r = sd_event_add_io(a->event, &an->walk_source, anchor_walk_fd(an->walk), EPOLLIN, on_walk, a);
                /* Root's requests before it; others' share the turns. */
                if (r >= 0)
                        r = sd_event_source_set_priority(an->walk_source, PRIORITY_CLIENTS);
                if (r >= 0)
                        return;
        }
        walk_end(a, r);
}

static int on_lease_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        LeaseIo *io = userdata;

        (void) s;
        (void) usec;
        if (io->lease)
                engine_lease_timer(&io->agent->engine, io->lease, now_mono());
        return 0;
}

static int set_timer(Agent *a, sd_event_source **s, usec_t when, sd_event_time_handler_t cb, void *userdata) {
        int r;

        if (when == USEC_INFINITY)
                return *s ? sd_event_source_set_enabled(*s, SD_EVENT_OFF) : 0;
        if (*s) {
                r = sd_event_source_set_time(*s, when);
                return r < 0 ? r : sd_event_source_set_enabled(*s, SD_EVENT_ONESHOT);
        }
        r = sd_event_add_time(a->event, s, CLOCK_MONOTONIC, when, 0, cb, userdata);
        return r < 0 ? r : sd_event_source_set_priority(*s, PRIORITY_LEASES);
}

void io_lease_timer(void *ctx, Lease *l, usec_t when) {
        Agent *a = ctx;
        LeaseIo *io = l->io;

        if (io && set_timer(a, &io->timer_source, when, on_lease_timer, io) < 0)
                log_warning("Failed to arm the timer of lease %s.", l->id);
}

void io_lease_drop(void *ctx, Lease *l) {
        Agent *a = ctx;

        l->io = lease_io_free(l->io);
        /* A user's last lease of the name here gone: the name counts among
         * its names in Redis for as long as its keys may stay there. */
        if (l->uid != 0 && l->name) {
                UserUse *u;

                for (const Lease *o = l->name->leases; o; o = o->by_name_next)
                        if (o->uid == l->uid && o->state != LEASE_GONE)
                                return;
                u = user_use_get(l->uid);
                if (!u || user_name_used(u, l->name->name,
                                         now_mono() + config_name_life(a->config, l->uid, false, false)) < 0)
                        log_warning("Out of memory: name %s is no longer counted among uid " UID_FMT "'s names in Redis.",
                                    l->name->name, l->uid);
        }
}

/* A login session's slot lost: the session is told on its terminal, as
 * wall(1) would, and goes on (the journal and its account decide what
 * then). Other holders that went (a unit's helper, `fleetsem acquire`)
 * have no process left to tell. */
void io_tell_lost(void *ctx, Lease *l, const char *why) {
        LeaseIo *io = l->io;
        LogFields f = { .name = l->name->name, .lease = l->id, .token = l->token, .holder = l->holder };
        char text[NAME_MAX_LEN + 512], tty[PATH_MAX];
        int r;

        (void) ctx;
        if (!io || io->requester_start == 0)
                return;
        snprintf(text, sizeof(text),
                 "\r\nfleetsem: this session no longer holds its slot of %s (token %" PRIu64 "): %s.\r\n"
                 "fleetsem: see \"fleetsem status %s\".\r\n",
                 l->name->name, l->token, why, l->name->name);
        r = terminal_tell(l->pid, io->requester_start, text, tty, sizeof(tty));
        if (r >= 0)
                log_fields(LOG_NOTICE, &f, "Told %s on %s that its slot of %s is lost.", l->holder, tty, l->name->name);
        else if (r == -EACCES)
                log_fields(LOG_NOTICE, &f, "Did not tell %s on %s that its slot of %s is lost: it takes no messages "
                           "(mesg n).", l->holder, tty, l->name->name);
        else if (r == -ENODEV)
                log_fields(LOG_NOTICE, &f, "Did not tell %s on %s that its slot of %s is lost: this agent found no "
                           "device node of that terminal (a virtual console or a serial line; PrivateDevices= leaves "
                           "it pseudo-terminals only).", l->holder, tty, l->name->name);
        else    /* -ESRCH, -ENXIO: nobody there to tell (a unit's helper, a daemon) */
                log_internal(r == -ESRCH || r == -ENXIO ? LOG_DEBUG : LOG_WARNING, r, &f,
                             "Could not tell %s on %s that its slot of %s is lost: %m", l->holder, tty, l->name->name);
}

static int on_name_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Name *n = userdata;

        (void) s;
        (void) usec;
        engine_name_timer(n->engine, n, now_mono());
        return 0;
}

void io_name_timer(void *ctx, Name *n, usec_t when) {
        Agent *a = ctx;

        if (set_timer(a, (sd_event_source **) &n->io, when, on_name_timer, n) < 0)
                log_warning("Failed to arm the timer of %s.", n->name);
}

void io_name_drop(void *ctx, Name *n) {
        (void) ctx;
        n->io = sd_event_source_disable_unref(n->io);
}

int io_random_id(void *ctx, char ret[LEASE_ID_LEN + 1]) {
        (void) ctx;
        return lease_id_new(ret);
}

/* What the engine says, to the journal: a user's requests within the
 * budget of lines of its uid (log-limit.h), everything else as it comes. */
void io_log(void *ctx, int level, uid_t uid, usec_t now, const LogFields *fields, const char *message) {
        (void) ctx;
        if (uid == ENGINE_NO_UID || log_limit_pass(uid, now))
                log_fields(level, fields, "%s", message);
}
