/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdarg.h>
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
                log_notice("Stopping %s: it lost its fleet slot.", unit);
        free(unit);
        return 0;
}

static int kill_reply(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        char *unit = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(m);

        (void) ret_error;
        /* Stopped by then: nothing left to kill, as it should be. */
        if (e && (sd_bus_error_has_name(e, "org.freedesktop.systemd1.NoSuchProcess") ||
                  sd_bus_error_has_name(e, "org.freedesktop.systemd1.NoSuchUnit")))
                log_debug("Nothing of %s was left to kill: %s", unit, e->message ?: e->name);
        else if (e)
                log_error("Failed to kill %s before its slot may be granted elsewhere: %s", unit, e->message ?: e->name);
        else
                log_notice("Killed what was left of %s (SIGKILL to its control group): its slot may be granted "
                           "elsewhere soon.", unit);
        free(unit);
        return 0;
}

/* Calls systemd's Manager.METHOD(unit, …) without waiting; reply gets a
 * copy of unit. */
static int unit_call(const char *method, sd_bus_message_handler_t reply, const char *unit, const char *types, ...) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        char *u;
        va_list ap;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                           "org.freedesktop.systemd1.Manager", method);
        if (r < 0)
                return r;
        va_start(ap, types);
        r = sd_bus_message_appendv(m, types, ap);
        va_end(ap);
        if (r < 0)
                return r;
        u = strdup(unit);
        if (!u)
                return -ENOMEM;
        r = sd_bus_call_async(bus, NULL, m, reply, u, 0);
        if (r < 0)
                free(u);
        return r;
}

/* SIGKILL to every process of unit (KillUnit, "all"). */
static void unit_kill(const char *unit) {
        int r;

        if (!bus) {
                log_error("Cannot kill %s before its slot may be granted elsewhere: no connection to systemd.", unit);
                return;
        }
        r = unit_call("KillUnit", kill_reply, unit, "ssi", unit, "all", (int32_t) SIGKILL);
        if (r < 0)
                log_error_errno(r, "Cannot kill %s before its slot may be granted elsewhere: %m", unit);
}

static int on_kill_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s;
        (void) usec;
        unit_kill(userdata);
        return 0;
}

/* callback(unit) at `at` (CLOCK_MONOTONIC): a timer whose end frees its
 * copy of the name; ret's to keep when given (replacing the one it held),
 * else standing on its own. */
static int unit_timer(Agent *a, const char *unit, usec_t at, sd_event_time_handler_t callback, sd_event_source **ret) {
        _cleanup_(sd_event_source_unrefp) sd_event_source *s = NULL;
        char *u = strdup(unit);
        int r;

        if (!u)
                return -ENOMEM;
        r = sd_event_add_time(a->event, &s, CLOCK_MONOTONIC, at, 0, callback, u);
        if (r < 0) {
                free(u);
                return r;
        }
        r = sd_event_source_set_destroy_callback(s, free);
        if (r >= 0)
                r = sd_event_source_set_priority(s, PRIORITY_LEASES);
        if (r < 0)
                return r;
        if (ret) {
                sd_event_source_disable_unref(*ret);
                *ret = TAKE_PTR(s);
                return 0;
        }
        return sd_event_source_set_floating(s, true);
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

/* A string property of unit's, from systemd (a look that stops the loop
 * for UNIT_LOOK_TIMEOUT at most). */
static int unit_property(Agent *a, const char *unit, const char *interface, const char *property, char **ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *path = NULL;
        int r;

        r = bus_get(a);
        if (r < 0)
                return r;
        r = sd_bus_path_encode("/org/freedesktop/systemd1/unit", unit, &path);
        if (r < 0)
                return r;
        return sd_bus_get_property_string(bus, "org.freedesktop.systemd1", path, interface, property, &error, ret);
}

int unit_user(Agent *a, const char *unit, uid_t *ret_uid) {
        _cleanup_free_ char *user = NULL;
        uid_t uid;
        int r;

        r = unit_property(a, unit, "org.freedesktop.systemd1.Service", "User", &user);
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

int unit_running(Agent *a, const char *unit) {
        _cleanup_free_ char *state = NULL;
        int r;

        r = unit_property(a, unit, "org.freedesktop.systemd1.Unit", "ActiveState", &state);
        if (r < 0)
                return r;
        return streq(state, "active") || streq(state, "reloading");
}

int unit_live(Agent *a, const char *unit) {
        _cleanup_free_ char *state = NULL;
        int r;

        r = unit_property(a, unit, "org.freedesktop.systemd1.Unit", "ActiveState", &state);
        if (r == -ENOENT || r == -ENXIO)
                return 0;       /* (no such unit: a scope gone with its last process) */
        if (r < 0)
                return r;
        return !streq(state, "inactive") && !streq(state, "failed");
}

/* StopUnit: SIGTERM to unit's control group, as systemctl stop. */
static void unit_stop_now(const char *unit) {
        int r;

        if (!bus) {
                log_error("Cannot stop %s (it lost its slot): no connection to systemd.", unit);
                return;
        }
        r = unit_call("StopUnit", stop_reply, unit, "ss", unit, "replace");
        if (r < 0)
                log_error_errno(r, "Cannot stop %s (it lost its slot): %m", unit);
}

static int on_stop_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s;
        (void) usec;
        unit_stop_now(userdata);
        return 0;
}

/* Stops unit (unit_stop_now()) at stop_at, or now when it is not later,
 * and sends SIGKILL to what is left of it at kill_at, before its slot may
 * be granted elsewhere, whatever its TimeoutStopSec= says. */
void unit_stop(Agent *a, const char *unit, const char *why, usec_t stop_at, usec_t kill_at,
               sd_event_source **ret_kill) {
        usec_t now = now_mono();
        int r;

        r = bus_get(a);
        if (r < 0) {
                log_error_errno(r, "Cannot stop %s (it lost its slot: %s): no connection to systemd: %m", unit, why);
                return;
        }
        if (kill_at <= now)
                unit_kill(unit);
        else {
                r = unit_timer(a, unit, kill_at, on_kill_timer, ret_kill);
                if (r < 0) {
                        log_error_errno(r, "Cannot time the kill of %s (it lost its slot: %s), killing it now: %m",
                                        unit, why);
                        unit_kill(unit);
                }
        }
        if (stop_at <= now || stop_at >= kill_at || unit_timer(a, unit, stop_at, on_stop_timer, NULL) < 0)
                unit_stop_now(unit);
}

/* A session id as logind makes them (letters and digits: "3", "c2"). */
static bool session_id_is_valid(const char *id) {
        size_t n = strlen(id);

        return n > 0 && n <= 32 && strspn(id, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") == n;
}

bool session_scope_is_valid(const char *s) {
        char id[33];
        size_t n = strlen(s);

        if (n <= strlen("session-.scope") || n - strlen("session-.scope") >= sizeof(id) || !strneq(s, "session-", 8) ||
            !streq(s + n - 6, ".scope"))
                return false;
        snprintf(id, sizeof(id), "%.*s", (int) (n - strlen("session-.scope")), s + 8);
        return session_id_is_valid(id);
}

/* The scope of the login session l's requester leads: the process that
 * opened it (sshd's, login, su), which pam_systemd made the session's
 * leader; still the process that asked (its start time). A requester
 * that leads no session (a `fleetsem run` in a login, a program of its
 * own) has none: nothing of it is stopped. */
static int session_scope_of_lease(Agent *a, const Lease *l, char **ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_free_ char *session = NULL, *path = NULL;
        LeaseIo *io = l->io;
        LogFields f = { .name = l->name->name, .lease = l->id, .token = l->token, .holder = l->holder };
        uint32_t leader = 0;
        ProcStat st;
        int r;

        if (!io || io->requester_start == 0) {
                log_fields(LOG_WARNING, &f, "Cannot end %s, whose slot of %s is lost: this agent does not know the "
                           "process that asked (restarted since, without the host's record of it).", l->holder,
                           l->name->name);
                return -ESRCH;
        }
        r = sd_pid_get_session(l->pid, &session);
        if (r < 0)
                return log_internal(LOG_DEBUG, r, &f, "%s leads no login session to end: %m", l->holder);
        if (proc_stat_read(l->pid, &st) < 0 || st.start != io->requester_start) {
                log_fields(LOG_WARNING, &f, "Cannot end the login session of %s, whose slot of %s is lost: the process "
                           "that opened it is gone.", l->holder, l->name->name);
                return -ESRCH;
        }
        if (!session_id_is_valid(session))
                return -EBADMSG;
        r = bus_get(a);
        if (r >= 0)
                r = sd_bus_path_encode("/org/freedesktop/login1/session", session, &path);
        if (r >= 0)
                r = sd_bus_get_property_trivial(bus, "org.freedesktop.login1", path, "org.freedesktop.login1.Session",
                                                "Leader", &error, 'u', &leader);
        if (r < 0)
                return log_internal(LOG_ERR, r, &f, "Cannot end login session %s of %s, whose slot of %s is lost: no "
                                    "answer from logind: %s", session, l->holder, l->name->name,
                                    error.message ?: strerror(-r));
        if ((pid_t) leader != l->pid)
                return log_internal(LOG_DEBUG, -ESRCH, &f, "%s does not lead login session %s: not ended.", l->holder,
                                    session);
        if (asprintf(ret, "session-%s.scope", session) < 0)
                return -ENOMEM;
        log_fields(LOG_NOTICE, &f, "Ending login session %s of %s: its slot of %s is lost.", session, l->holder,
                   l->name->name);
        return 0;
}

/* What a login session's terminal is given to pass the loss on. */
#define SESSION_TELL_TIME (2 * USEC_PER_SEC)

/* l's job (unit or scope) killed at kill_at: written into its record
 * with the state it enters next (LOST, ENDING: lease_lost()), for an
 * agent restarted before then (adopt.c, kill_resume()). */
static void kill_note(Lease *l, const char *unit, usec_t kill_at) {
        LeaseIo *io = l->io;

        if (!io)
                return;
        free(io->kill_unit);
        io->kill_unit = strdup(unit);
        io->kill_at = kill_at;
}

int io_stop_job(void *ctx, Lease *l, const char *why, usec_t kill_at) {
        Agent *a = ctx;
        _cleanup_free_ char *scope = NULL;
        usec_t now;
        int r;

        /* A unit's kill goes with its lease: its anchor is in the unit's
         * file descriptor store, which systemd closes once the unit
         * stopped, and a run of it after that (a timer's, Restart=, an
         * operator's start) is not the job that lost the slot. A login
         * session's stands on its own: its anchor closes before its
         * processes end (state ending), and a scope's name is never
         * used again. */
        if (l->unit) {
                LeaseIo *io = l->io;

                unit_stop(a, l->unit, why, 0, kill_at, io ? &io->kill_source : NULL);
                kill_note(l, l->unit, kill_at);
                return 0;
        }
        r = session_scope_of_lease(a, l, &scope);
        if (r < 0)
                return r;
        /* Told on its terminal just now (io_tell_lost()): the process
         * that reads the terminal (sshd's, which sends it on) is stopped
         * with the rest of the session, and stopped at once it may not
         * have read it yet. A moment to read it first, while it is
         * early enough: half the time left before the kill at most. */
        now = now_mono();
        unit_stop(a, scope, why, kill_at > now ? now + MIN(SESSION_TELL_TIME, (kill_at - now) / 2) : 0, kill_at,
                  NULL);
        kill_note(l, scope, kill_at);
        return 1;
}

void units_close(void) {
        bus = sd_bus_flush_close_unref(bus);
}
