/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-login.h>

#include "agent.h"
#include "log.h"

/* Slots bound to systemd services: which unit a requester runs in, and
 * stopping a unit whose slot was lost. */

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77         /* Linux 6.5; missing from older headers */
#endif

static int peerpidfd_supported = -1;    /* -1 not known yet */
static sd_bus *bus;                     /* to systemd, opened when first needed */

static int peer_pidfd(int fd) {
        int pidfd;
        socklen_t len = sizeof(pidfd);

        if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0)
                return -errno;
        return pidfd;
}

void unit_peer_accepted(Client *c) {
        int r;

        if (peerpidfd_supported < 0) {
                r = peer_pidfd(c->fd);
                peerpidfd_supported = r != -ENOPROTOOPT && r != -EINVAL;
                safe_close(r);
        }
        if (peerpidfd_supported)
                return;
        /* An older kernel: hold the process now, before its pid can be
         * reused, and note when it started. */
        c->pidfd = pidfd_open(c->cred.pid, 0);
        if (c->pidfd < 0)
                c->pidfd = -EBADF;
        else {
                ProcStat st;

                c->agent->n_pidfds++;
                c->start_time = proc_stat_read(c->cred.pid, &st) >= 0 ? st.start : 0;
        }
}

/* Whether the process behind pidfd is still the one that connected: a
 * process that exited (its pid free for reuse) gives ESRCH. EPERM (no
 * right to signal it) means it is there. */
static bool pidfd_alive(int pidfd) {
        return pidfd_send_signal(pidfd, 0, NULL, 0) == 0 || errno == EPERM;
}

bool client_is_peer(Client *c, uint64_t start) {
        _cleanup_close_ int own = -EBADF;
        int pidfd;

        if (peerpidfd_supported > 0) {
                own = peer_pidfd(c->fd);
                if (own < 0)
                        return false;
                pidfd = own;
        } else if (c->pidfd >= 0)
                pidfd = c->pidfd;
        else
                return false;
        return pidfd_alive(pidfd) && (c->start_time == 0 || start == c->start_time);
}

int unit_of_client(Client *c, char **ret) {
        _cleanup_free_ char *unit = NULL;
        ProcStat st = {};
        int r;

        /* From the kernel's view of the process (its cgroup), never from
         * anything the client says; then whether that pid is still the
         * client's: the process may have exited and its pid gone to another
         * between connect() and now. */
        r = sd_pid_get_unit(c->cred.pid, &unit);
        if (r < 0)
                return r;
        (void) proc_stat_read(c->cred.pid, &st);
        if (!client_is_peer(c, st.start))
                return -ESRCH;
        if (!service_unit_is_valid(unit))
                return -ENXIO;
        *ret = TAKE_PTR(unit);
        return 0;
}

static int stop_reply(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        char *unit = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(m);

        (void) ret_error;
        if (e)
                log_error("Failed to stop %s after it lost its slot: %s", unit, e->message ?: e->name);
        else
                log_notice("Stopping %s: it lost its fleet slot (on-lost=stop).", unit);
        free(unit);
        return 0;
}

/* A look at a unit's properties stops the agent's loop: this long at most. */
#define UNIT_LOOK_TIMEOUT USEC_PER_SEC

/* The uid of a user name as systemd gives it in User= (a name, or digits). */
static int user_uid(const char *user, uid_t *ret) {
        struct passwd pw, *res = NULL;
        char buf[4096];
        uint64_t u;
        int r;

        if (parse_uint64(user, 0, (uid_t) -2, &u) >= 0) {
                *ret = (uid_t) u;
                return 0;
        }
        r = getpwnam_r(user, &pw, buf, sizeof(buf), &res);
        if (r != 0)
                return -r;
        if (!res)
                return -ESRCH;
        *ret = res->pw_uid;
        return 0;
}

/* The connection to systemd, opened when first needed. */
static int bus_get(Agent *a) {
        int r;

        if (bus)
                return 0;
        r = sd_bus_open_system(&bus);
        if (r >= 0)
                r = sd_bus_attach_event(bus, a->event, SD_EVENT_PRIORITY_NORMAL);
        /* A synchronous look (unit_user) waits this long at most. */
        if (r >= 0)
                r = sd_bus_set_method_call_timeout(bus, UNIT_LOOK_TIMEOUT);
        if (r < 0)
                bus = sd_bus_flush_close_unref(bus);
        return r;
}

int unit_user(Agent *a, const char *unit, uid_t *ret_uid) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *path = NULL, *user = NULL;
        uid_t uid;
        int r;

        r = bus_get(a);
        if (r < 0)
                return r;
        r = sd_bus_path_encode("/org/freedesktop/systemd1/unit", unit, &path);
        if (r < 0)
                return r;
        r = sd_bus_get_property_string(bus, "org.freedesktop.systemd1", path, "org.freedesktop.systemd1.Service",
                                       "User", &error, &user);
        if (r < 0)
                return r;
        if (!user || !user[0]) {
                *ret_uid = 0;           /* no User=: root */
                return 0;
        }
        r = user_uid(user, &uid);
        if (r < 0)
                return r;
        *ret_uid = uid;
        return 0;
}

void unit_stop(Agent *a, const char *unit, const char *why) {
        char *u;
        int r;

        r = bus_get(a);
        if (r < 0) {
                log_error_errno(r, "Cannot stop %s (it lost its slot: %s): no connection to systemd: %m", unit, why);
                return;
        }
        u = strdup(unit);
        if (!u) {
                log_error("Cannot stop %s (it lost its slot: %s): out of memory.", unit, why);
                return;
        }
        r = sd_bus_call_method_async(bus, NULL, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                     "org.freedesktop.systemd1.Manager", "StopUnit", stop_reply, u,
                                     "ss", unit, "replace");
        if (r < 0) {
                free(u);
                log_error_errno(r, "Cannot stop %s (it lost its slot: %s): %m", unit, why);
        }
}

void io_stop_unit(void *ctx, const char *unit, const char *why) {
        unit_stop(ctx, unit, why);
}

void units_close(void) {
        bus = sd_bus_flush_close_unref(bus);
}
