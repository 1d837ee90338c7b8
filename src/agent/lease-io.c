/* SPDX-License-Identifier: MIT */
/* A lease's and a name's I/O beside the engine: the watch on the anchor
 * (its hang-up releases the slot) and one timer each. */
#include <errno.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"

static int on_anchor_event(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        LeaseIo *io = userdata;
        char buf[64];
        ssize_t n;

        (void) s;
        (void) revents;
        /* The anchor never accepts, so never writes: any event means it closed. */
        n = read(fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        if (io->lease)
                slots_anchor_closed(&io->agent->slots, io->lease, now_mono());
        return 0;
}

LeaseIo *lease_io_new(Agent *a, int watch_fd) {
        LeaseIo *io = calloc(1, sizeof(*io));

        if (!io)
                return NULL;
        io->agent = a;
        io->watch_fd = watch_fd;
        return io;
}

void lease_io_free(LeaseIo *io) {
        if (!io)
                return;
        io->watch_source = sd_event_source_disable_unref(io->watch_source);
        io->timer_source = sd_event_source_disable_unref(io->timer_source);
        safe_close(io->watch_fd);
        free(io);
}

/* Starts watching once the engine made the lease. */
int lease_io_attach(LeaseIo *io, Lease *l) {
        io->lease = l;
        /* Edge-triggered: a closed anchor stays "ready" until its source is
         * gone, and thousands closing at once (a host's sessions ending)
         * would otherwise be polled again on every turn of the loop. */
        return sd_event_add_io(io->agent->event, &io->watch_source, io->watch_fd, EPOLLRDHUP | EPOLLET,
                               on_anchor_event, io);
}

static int on_lease_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        LeaseIo *io = userdata;

        (void) s;
        (void) usec;
        if (io->lease)
                slots_lease_timer(&io->agent->slots, io->lease, now_mono());
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
        return sd_event_add_time(a->event, s, CLOCK_MONOTONIC, when, 0, cb, userdata);
}

void io_lease_timer(void *ctx, Lease *l, usec_t when) {
        Agent *a = ctx;
        LeaseIo *io = l->io;

        if (io && set_timer(a, &io->timer_source, when, on_lease_timer, io) < 0)
                log_warning("Failed to arm the timer of lease %s.", l->id);
}

void io_lease_drop(void *ctx, Lease *l) {
        (void) ctx;
        lease_io_free(l->io);
        l->io = NULL;
}

static int on_name_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Name *n = userdata;

        (void) s;
        (void) usec;
        slots_name_timer(n->slots_engine, n, now_mono());
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
