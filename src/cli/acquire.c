/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "client.h"
#include "log.h"
#include "macro.h"
#include "outcome.h"
#include "sd-dl.h"

/* `fleetsem acquire` and `fleetsem release`: slots for systemd services.
 * acquire runs as the unit's ExecStartPre= (or ExecCondition= with --skip),
 * waits for a slot and hands the anchor to the unit's file descriptor store:
 * systemd holds it while the unit runs and closes it when the unit stops,
 * which releases the slot. */

#define EXIT_SKIP 1             /* ExecCondition=: skip this run, not a failure */
#define EXIT_CONFIG 78          /* EX_CONFIG: the unit lacks settings we need */
#define FDNAME "fleetsem"
#define REPLY_TICK (5 * USEC_PER_SEC)           /* refresh EXTEND_TIMEOUT_USEC= this often */
#define EXTEND_BY (15 * USEC_PER_SEC)
#define FIRST_REPLY_MAX (10 * USEC_PER_SEC)     /* an agent that says nothing is a hung agent */
#define RUNTIME_DIR "/run/fleetsem"

typedef struct Acquire {
        const char *ns;
        const char *name;
        char name_buf[NAME_MAX_LEN + 1];
        uint32_t slots;
        uint32_t weight;
        usec_t wait;
        bool wait_set;
        bool skip;
        bool deny_on_error;
        bool stop_on_lost;
        char *unit;
} Acquire;

static void acquire_done(Acquire *a) {
        free(a->unit);
}

static void help_acquire(void) {
        printf("Usage: fleetsem acquire [OPTIONS] [NAME]\n\n"
               "Waits for one of the fleet-wide slots of NAME and hands it to the systemd\n"
               "service it runs in, which holds it until it stops. For ExecStartPre= (wait for\n"
               "a slot) and ExecCondition= with --skip (run only if a slot is free):\n\n"
               "  [Service]\n"
               "  NotifyAccess=all\n"
               "  FileDescriptorStoreMax=1\n"
               "  ExecStartPre=+fleetsem acquire --slots 2\n"
               "  EnvironmentFile=-/run/fleetsem/%%n.env\n\n"
               "(`fleetsem limit UNIT [SLOTS]` writes this drop-in.) NAME defaults to the unit's\n"
               "name without \".service\" (what %%N gives).\n\n"
               "  -n --slots=N          At most N holders of NAME fleet-wide (default: its\n"
               "                        fleet limit, fleetsem fleet-limit; refused without)\n"
               "  -k --weight=K         Take K units of the limit (default 1)\n"
               "  -w --wait=DURATION    Give up after DURATION without a slot (default:\n"
               "                        infinity; with --skip: 0). The unit's start timeout\n"
               "                        is extended while it waits\n"
               "     --skip             Exit 1 when no slot is free (within --wait), so that\n"
               "                        systemd skips this run without marking the unit failed\n"
               "     --on-error=POLICY  Agent or Redis unreachable: allow (start without a\n"
               "                        slot, with a warning; default) or deny (exit 69).\n"
               "                        Refusals and undecodable replies always fail\n"
               "     --on-lost=ACTION   The slot is lost while the unit runs (Redis unreachable\n"
               "                        past the lease TTL): ignore (log it; default) or stop\n"
               "                        (the agent stops the unit)\n"
               "     --namespace=NS     Agent namespace (default: $FLEETSEM_NAMESPACE or fleetsem)\n"
               "  -h --help             Show this help\n\n"
               "Writes FLEETSEM_NAME, FLEETSEM_TOKEN and FLEETSEM_LEASE to\n"
               "/run/fleetsem/UNIT.env. A unit that restarts (Restart=) keeps its slot.\n"
               "Exit status: 0 slot held (or agent or Redis unreachable with --on-error=allow);\n"
               "1 skipped (--skip); 75 no slot within --wait, or the agent busy; 69 agent or\n"
               "Redis unreachable (--on-error=deny); 70 a reply that cannot be decoded, or an\n"
               "error from Redis; 64 usage or an invalid request; 77 not permitted; 78 the unit lacks\n"
               "NotifyAccess=all or FileDescriptorStoreMax=, or no --slots and NAME has no\n"
               "fleet limit.\n");
}

static void help_release(void) {
        printf("Usage: fleetsem release [OPTIONS] [NAME]\n\n"
               "Gives back the slot of NAME that the systemd service it runs in holds, and\n"
               "waits until the agent confirms. For ExecStopPost=, in units that want the\n"
               "slot back before their stop completes (the slot is released anyway when the\n"
               "unit stops). Not for units with Restart=: ExecStopPost= runs before each\n"
               "restart too, and the unit would have to queue again.\n\n"
               "NAME defaults to the unit's name without \".service\".\n\n"
               "     --namespace=NS     Agent namespace (default: $FLEETSEM_NAMESPACE or fleetsem)\n"
               "  -h --help             Show this help\n\n"
               "Exit status: 0 released (or nothing was held); 69 agent unavailable;\n"
               "64 usage.\n");
}

static void notify(const char *format, ...) _printf_(1, 2);
static void notify(const char *format, ...) {
        char msg[512];
        va_list ap;

        va_start(ap, format);
        vsnprintf(msg, sizeof(msg), format, ap);
        va_end(ap);
        (void) sym_sd_pid_notify_with_fds(0, false, msg, NULL, 0);
}

/* The service we run in, from our own cgroup (sd_pid_get_unit()), never
 * from argv. NULL outside a service. */
static char *own_unit(void) {
        char *unit = NULL;

        if (sym_sd_pid_get_unit(0, &unit) < 0)
                return NULL;
        if (!service_unit_is_valid(unit) || !getenv("INVOCATION_ID")) {
                free(unit);
                return NULL;
        }
        return unit;
}

/* Resolves the unit and the name: NAME, or the unit's name without its
 * suffix. */
static int resolve_unit_and_name(Acquire *a, const char *verb, const char *arg) {
        int r = sd_dl_open();

        if (r < 0)
                return r;
        a->unit = own_unit();
        if (!a->unit)
                return log_error_errno(EINVAL, "fleetsem %s: not running in a systemd service. It belongs in a "
                                       "service's %s; outside systemd, use fleetsem run.",
                                       verb, streq(verb, "release") ? "ExecStopPost=" : "ExecStartPre= or ExecCondition=");
        if (arg) {
                if (cli_parse_name(arg) < 0)
                        return -EINVAL;
                a->name = arg;
                return 0;
        }
        snprintf(a->name_buf, sizeof(a->name_buf), "%.*s", (int) (strlen(a->unit) - strlen(".service")), a->unit);
        if (!name_is_valid(a->name_buf))
                return log_error_errno(EINVAL, "The name of %s, \"%s\", is not a valid slot name; give NAME "
                                       "(1-200 of A-Z a-z 0-9 _ . : @ -).", a->unit, a->name_buf);
        a->name = a->name_buf;
        return 0;
}

/* One property of a unit over bus: a string (type 's') into *ret_string,
 * or a uint32 (type 'u') into *ret_u32. */
static int unit_property(sd_bus *bus, const char *unit, const char *iface, const char *property, char type,
                         char **ret_string, uint32_t *ret_u32) {
        _cleanup_free_ char *path = NULL;
        _cleanup_(sym_sd_bus_error_freep) sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        r = sym_sd_bus_path_encode("/org/freedesktop/systemd1/unit", unit, &path);
        if (r >= 0 && type == 's')
                r = sym_sd_bus_get_property_string(bus, "org.freedesktop.systemd1", path, iface, property, &error, ret_string);
        else if (r >= 0)
                r = sym_sd_bus_get_property_trivial(bus, "org.freedesktop.systemd1", path, iface, property, &error, type, ret_u32);
        if (r < 0)
                log_warning("Cannot read %s of %s: %s", property, unit, error.message ?: strerror(-r));
        return r;
}

/* Before waiting: the unit must accept our notifications and keep one fd. */
static int check_unit_settings(const char *unit) {
        static const char *const iface = "org.freedesktop.systemd1.Service";
        _cleanup_free_ char *access = NULL;
        uint32_t store_max = 0;
        _cleanup_(sym_sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        int r;

        r = sd_dl_bus_open(&bus);
        if (r < 0)
                log_warning_errno(r, "No connection to systemd: %m");
        else {
                r = unit_property(bus, unit, iface, "NotifyAccess", 's', &access, NULL);
                if (r >= 0)
                        r = unit_property(bus, unit, iface, "FileDescriptorStoreMax", 'u', NULL, &store_max);
        }
        if (r < 0) {
                log_warning("Cannot check the settings of %s; going on.", unit);
                return 0;
        }
        if (streq(access, "all") && store_max >= 1 && getenv("NOTIFY_SOCKET"))
                return 0;

        log_error("%s cannot hold a fleet slot: its [Service] section needs%s%s (add them in a drop-in, "
                  "`systemctl edit %s`, or let `fleetsem limit %s SLOTS` write one).",
                  unit, streq(access, "all") ? "" : " NotifyAccess=all", store_max >= 1 ? "" : " FileDescriptorStoreMax=1",
                  unit, unit);
        return -ENOEXEC;
}

static void env_file_path(const char *unit, char *buf, size_t size) {
        snprintf(buf, size, RUNTIME_DIR "/%s.env", unit);
}

/* /run/fleetsem/UNIT.env for EnvironmentFile=: no secrets in it, so 0644. */
static void write_env_file(const Acquire *a, uint64_t token, const char *lease) {
        char path[sizeof(RUNTIME_DIR) + UNIT_NAME_MAX + 16], tmp[sizeof(path) + 8];
        FILE *f;

        if (mkdir(RUNTIME_DIR, 0755) < 0 && errno != EEXIST) {
                log_warning_errno(errno, "Cannot create " RUNTIME_DIR ": %m");
                return;
        }
        env_file_path(a->unit, path, sizeof(path));
        f = atomic_file_open(path, tmp, sizeof(tmp));
        if (!f)
                return;
        fprintf(f, "FLEETSEM_NAME=%s\nFLEETSEM_TOKEN=%" PRIu64 "\nFLEETSEM_LEASE=%s\n", a->name, token, lease);
        (void) atomic_file_commit(f, tmp, path);
}

static void remove_env_file(const char *unit) {
        char path[sizeof(RUNTIME_DIR) + UNIT_NAME_MAX + 16];

        env_file_path(unit, path, sizeof(path));
        if (unlink(path) < 0 && errno != ENOENT)
                log_warning_errno(errno, "Cannot remove %s: %m", path);
}

/* The anchor goes to the unit's fd store, replacing whatever anchor an
 * earlier run left there; the barrier makes sure systemd took it before we
 * exit (a notification from a process that is gone may not be matched to
 * its unit). */
static int store_anchor(int anchor_fd) {
        int r;

        (void) sym_sd_pid_notify_with_fds(0, false, "FDSTOREREMOVE=1\nFDNAME=" FDNAME, NULL, 0);
        r = sym_sd_pid_notify_with_fds(0, false, "FDSTORE=1\nFDNAME=" FDNAME, &anchor_fd, 1);
        if (r <= 0)
                return log_error_errno(r < 0 ? r : ENOTCONN, "Cannot hand the slot to the service manager: %m");
        r = sym_sd_notify_barrier(false, 5 * USEC_PER_SEC);
        if (r < 0)
                log_warning_errno(r, "The service manager did not confirm it took the slot: %m");
        return 0;
}

/* The limiter cannot be reached (outcome.h, UNAVAILABLE): the one case
 * --on-error decides. */
static int on_unavailable(const Acquire *a, const char *why) {
        if (a->deny_on_error) {
                log_error("%s: %s; refusing to start (--on-error=deny).", a->name, why);
                notify("STATUS=No fleet slot for %s: %s", a->name, why);
                return EXIT_UNAVAILABLE;
        }
        log_warning("%s: %s; starting WITHOUT a fleet slot (--on-error=allow).", a->name, why);
        notify("STATUS=Running without a fleet slot for %s: %s", a->name, why);
        remove_env_file(a->unit);
        return 0;
}

/* Anything but a grant, a refusal of no slot or an unreachable limiter:
 * the agent refused the request (not permitted, invalid, …), Redis gave
 * it an error, or its reply cannot be decoded. Never --on-error. */
static int on_failure(const Acquire *a, const Outcome *o) {
        if (o->kind == OUTCOME_INTERNAL)
                log_error("%s: %s; refusing to start (whatever --on-error says).", a->name, o->text);
        else
                log_error("%s: %s", a->name, o->text);
        notify("STATUS=No fleet slot for %s: %s", a->name, o->text);
        return outcome_exit_code(o);
}

static void extend_timeout(usec_t deadline) {
        usec_t now = now_usec(CLOCK_MONOTONIC), by = EXTEND_BY;

        /* Never past --wait (plus a little): a finite wait stays finite. */
        if (deadline != USEC_INFINITY)
                by = deadline > now && deadline - now + REPLY_TICK < EXTEND_BY ? deadline - now + REPLY_TICK : EXTEND_BY;
        notify("EXTEND_TIMEOUT_USEC=%" PRIu64, by);
}

static int parse_acquire(Acquire *a, int argc, char *argv[]) {
        enum { ARG_SKIP = CLI_ARG_OWN, ARG_ON_ERROR, ARG_ON_LOST };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "slots", required_argument, NULL, 'n' },
                { "weight", required_argument, NULL, 'k' },
                { "wait", required_argument, NULL, 'w' },
                { "skip", no_argument, NULL, ARG_SKIP },
                { "on-error", required_argument, NULL, ARG_ON_ERROR },
                { "on-lost", required_argument, NULL, ARG_ON_LOST },
                CLI_COMMON_OPTIONS,
                {}
        };
        int c;

        while ((c = cli_getopt(argc, argv, "hn:k:w:", options, &a->ns)) >= 0) {
                switch (c) {
                case 'h':
                        help_acquire();
                        return 0;
                case 'n':
                        if (cli_parse_slots(optarg, &a->slots) < 0)
                                return -EINVAL;
                        break;
                case 'k':
                        if (cli_parse_weight(optarg, &a->weight) < 0)
                                return -EINVAL;
                        break;
                case 'w':
                        if (cli_parse_wait(optarg, &a->wait) < 0)
                                return -EINVAL;
                        a->wait_set = true;
                        break;
                case ARG_SKIP:
                        a->skip = true;
                        break;
                case ARG_ON_ERROR:
                        if (!streq(optarg, "allow") && !streq(optarg, "deny"))
                                return log_error_errno(EINVAL, "Invalid --on-error \"%s\": expected allow or deny.", optarg);
                        a->deny_on_error = streq(optarg, "deny");
                        break;
                case ARG_ON_LOST:
                        if (!streq(optarg, "ignore") && !streq(optarg, "stop"))
                                return log_error_errno(EINVAL, "Invalid --on-lost \"%s\": expected ignore or stop.", optarg);
                        a->stop_on_lost = streq(optarg, "stop");
                        break;
                default:
                        return -EINVAL;
                }
        }
        if (argc - optind > 1)
                return log_error_errno(EINVAL, "Too many arguments; usage: fleetsem acquire [OPTIONS] [NAME]");
        if (cli_check_weight(a->slots, a->weight) < 0)
                return -EINVAL;
        if (a->skip && !a->wait_set)
                a->wait = 0;
        return 1;
}

/* SIGTERM while waiting: systemctl stop (or a stop job) while the unit
 * starts. Our connection and anchor close as we exit, which takes us out
 * of the queue. A stop ends in exit 0, so that systemd records a clean stop
 * rather than a start that failed; any other SIGTERM must not look like a
 * granted slot. */
static int on_signal(const Acquire *a, int sig) {
        _cleanup_free_ char *state = NULL;
        _cleanup_(sym_sd_bus_flush_close_unrefp) sd_bus *bus = NULL;

        if (sig == SIGTERM && sd_dl_bus_open(&bus) >= 0)
                (void) unit_property(bus, a->unit, "org.freedesktop.systemd1.Unit", "ActiveState", 's', &state, NULL);
        if (state && streq(state, "deactivating")) {
                log_info("%s: %s is stopping; left the queue.", a->name, a->unit);
                return 0;
        }
        log_notice("%s: %s while waiting; left the queue.", a->name, strsignal(sig));
        return 128 + sig;
}

/* DENIED: no slot within the wait, or none free (--skip), or drained. */
static int on_denied(const Acquire *a, const Outcome *o, bool limit_told) {
        const Reply *rep = &o->reply;
        char note[TEXT_ESCAPE_SIZE(sizeof(((Reply *) NULL)->message))];

        if (drain_note(a->name, rep, note, sizeof(note))) {
                log_notice("%s.", note);
                if (a->skip) {
                        notify("STATUS=Skipped: %s", note);
                        return EXIT_SKIP;
                }
                notify("STATUS=%s", note);
                return outcome_exit_code(o);
        }
        if (limit_note(a->name, rep->limit, a->slots, "you asked for", note, sizeof(note)) && !limit_told)
                log_notice("%s.", note);
        if (grace_note(a->name, rep, note, sizeof(note))) {
                /* Not "in use": none may be. */
                log_notice("%s.", note);
                notify("STATUS=%s%s", a->skip ? "Skipped: " : "", note);
                return a->skip ? EXIT_SKIP : outcome_exit_code(o);
        }
        if (a->skip) {
                log_notice("%s: all %" PRIu32 " fleet slots in use; skipping this run.", a->name,
                           reply_limit(rep, a->slots));
                notify("STATUS=Skipped: all fleet slots of %s in use", a->name);
                return EXIT_SKIP;
        }
        log_error("%s: no fleet slot within the wait (position %" PRIu32 " in line).", a->name, rep->position);
        notify("STATUS=No fleet slot for %s within the wait", a->name);
        return outcome_exit_code(o);
}

static int wait_for_grant(Acquire *a, int agent_fd, int signal_fd, const char *lease, int anchor_fd) {
        usec_t started = now_usec(CLOCK_MONOTONIC), deadline = USEC_INFINITY;
        char note[TEXT_ESCAPE_SIZE(sizeof(((Reply *) NULL)->message))];
        bool replied = false, limit_told = false, grace_told = false, drain_told = false;
        LineReader lr;
        Outcome o;
        int r;

        if (a->wait != USEC_INFINITY)
                deadline = usec_add(started, a->wait);
        line_reader_init(&lr, PROTO_REPLY_MAX);
        for (;;) {
                struct pollfd p[2] = { { .fd = agent_fd, .events = POLLIN }, { .fd = signal_fd, .events = POLLIN } };
                struct signalfd_siginfo si;
                const Reply *rep = &o.reply;
                char *line;
                size_t len;

                r = line_reader_next(&lr, &line, &len);
                if (r < 0) {
                        outcome_of_error(r, a->ns, &o);
                        return on_failure(a, &o);
                }
                if (r == 0) {
                        r = poll(p, 2, (int) (REPLY_TICK / USEC_PER_MSEC));
                        if (r < 0 && errno != EINTR) {
                                log_error_errno(errno, "poll() failed: %m");
                                return EXIT_SOFTWARE;
                        }
                        if (p[1].revents & POLLIN && read(signal_fd, &si, sizeof(si)) == sizeof(si))
                                return on_signal(a, (int) si.ssi_signo);
                        if (r == 0) {
                                usec_t now = now_usec(CLOCK_MONOTONIC);

                                if ((!replied && now - started > FIRST_REPLY_MAX) ||
                                    (deadline != USEC_INFINITY && now > deadline + FIRST_REPLY_MAX)) {
                                        outcome_of_error(-ETIMEDOUT, a->ns, &o);
                                        return on_unavailable(a, o.text);
                                }
                                extend_timeout(deadline);
                                continue;
                        }
                        r = line_reader_fill(&lr, agent_fd);
                        if (r == 0 || (r < 0 && r != -EAGAIN && r != -EINTR)) {
                                if (outcome_of_error(r == 0 ? -ECONNRESET : r, a->ns, &o) == OUTCOME_UNAVAILABLE)
                                        return on_unavailable(a, o.text);
                                return on_failure(a, &o);
                        }
                        continue;
                }
                replied = true;
                switch (outcome_of_line(line, len, false, &o)) {
                case OUTCOME_QUEUED:
                        /* The note begins with the name. */
                        if (drain_note(a->name, rep, note, sizeof(note))) {
                                if (!drain_told)
                                        log_notice("%s.", note);
                                drain_told = true;
                                notify("STATUS=Waiting for fleet slot %s", note);
                        } else if (grace_note(a->name, rep, note, sizeof(note))) {
                                if (!grace_told)
                                        log_notice("%s.", note);
                                grace_told = true;
                                notify("STATUS=Waiting for fleet slot %s", note);
                        } else if (limit_note(a->name, rep->limit, a->slots, "you asked for", note, sizeof(note))) {
                                if (!limit_told)
                                        log_notice("%s.", note);
                                limit_told = true;
                                notify("STATUS=Waiting for fleet slot %s: position %" PRIu32 " in queue; %s", a->name,
                                       rep->position, note);
                        } else
                                notify("STATUS=Waiting for fleet slot %s: position %" PRIu32 " in queue, %" PRIu32 " of %" PRIu32
                                       " in use", a->name, rep->position, rep->held, reply_limit(rep, a->slots));
                        if (a->wait > 0)
                                extend_timeout(deadline);
                        continue;
                case OUTCOME_GRANTED:
                        /* Another lease than ours: the unit still holds the
                         * slot it got before a restart, its anchor still in
                         * the store. Ours is not needed. */
                        if (!streq(rep->lease, lease))
                                log_info("%s: %s still holds its slot (token %" PRIu64 ").", a->name, a->unit, rep->token);
                        else if (store_anchor(anchor_fd) < 0)
                                return EXIT_SOFTWARE;
                        write_env_file(a, rep->token, rep->lease);
                        notify("STATUS=Holding fleet slot %s (token %" PRIu64 ")", a->name, rep->token);
                        return 0;
                case OUTCOME_UNAVAILABLE:
                        return on_unavailable(a, o.text);
                case OUTCOME_REFUSED:
                        if (rep->kind == REPLY_DENIED)
                                return on_denied(a, &o, limit_told);
                        return on_failure(a, &o);
                default:
                        return on_failure(a, &o);
                }
        }
}

int verb_acquire(int argc, char *argv[]) {
        _cleanup_(acquire_done) Acquire a = { .wait = USEC_INFINITY };
        _cleanup_close_ int anchor_fd = -EBADF, agent_fd = -EBADF;
        _cleanup_close_ int signal_fd = -EBADF;
        Request req = { .verb = REQUEST_ACQUIRE, .unit = true };
        uid_t agent_uid;
        sigset_t mask;
        int r;

        r = parse_acquire(&a, argc, argv);
        if (r <= 0)
                return r < 0 ? EXIT_USAGE : 0;
        r = resolve_unit_and_name(&a, "acquire", optind < argc ? argv[optind] : NULL);
        if (r < 0)
                return r == -ENOPKG ? EXIT_SOFTWARE : EXIT_USAGE;
        if (check_unit_settings(a.unit) < 0)
                return EXIT_CONFIG;
        if (cli_agent(&a.ns, &agent_uid) != 0)
                return EXIT_USAGE;

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        r = sigprocmask(SIG_BLOCK, &mask, NULL) < 0 ? -errno : 0;
        if (r >= 0)
                r = (signal_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0 ? -errno : 0;
        if (r >= 0)
                r = lease_id_new(req.lease);
        if (r >= 0)
                r = anchor_create(a.ns, req.lease, &anchor_fd);
        if (r < 0) {
                log_error_errno(r, "Cannot set up (signals, anchor): %m");
                return EXIT_SOFTWARE;
        }
        snprintf(req.name, sizeof(req.name), "%s", a.name);
        req.slots = a.slots;
        req.weight = a.weight;
        req.wait = a.wait;
        req.stop_on_lost = a.stop_on_lost;
        r = client_send_request_until(a.ns, agent_uid, now_usec(CLOCK_MONOTONIC) + FIRST_REPLY_MAX, signal_fd, &req, &agent_fd);
        if (r == -ECANCELED) {
                struct signalfd_siginfo si;

                if (read(signal_fd, &si, sizeof(si)) != sizeof(si))
                        return EXIT_SOFTWARE;
                return on_signal(&a, (int) si.ssi_signo);
        }
        if (r < 0) {
                /* An untrusted process on the agent's name is no agent
                 * either: --on-error decides, as when none is there. */
                Outcome o;

                if (outcome_of_error(r, a.ns, &o) == OUTCOME_UNAVAILABLE)
                        return on_unavailable(&a, o.text);
                return on_failure(&a, &o);
        }
        return wait_for_grant(&a, agent_fd, signal_fd, req.lease, anchor_fd);
}

int verb_release(int argc, char *argv[]) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                CLI_COMMON_OPTIONS,
                {}
        };
        _cleanup_close_ int agent_fd = -EBADF;
        Request req = { .verb = REQUEST_RELEASE, .unit = true };
        _cleanup_(acquire_done) Acquire a = {};
        LineReader lr;
        uid_t agent_uid;
        Reply rep;
        int c, r;

        while ((c = cli_getopt(argc, argv, "h", options, &a.ns)) >= 0) {
                switch (c) {
                case 'h':
                        help_release();
                        return 0;
                default:
                        return EXIT_USAGE;
                }
        }
        if (argc - optind > 1) {
                log_error("Too many arguments; usage: fleetsem release [OPTIONS] [NAME]");
                return EXIT_USAGE;
        }
        r = resolve_unit_and_name(&a, "release", optind < argc ? argv[optind] : NULL);
        if (r < 0)
                return r == -ENOPKG ? EXIT_SOFTWARE : EXIT_USAGE;
        remove_env_file(a.unit);
        if (cli_agent(&a.ns, &agent_uid) != 0)
                return EXIT_USAGE;
        snprintf(req.name, sizeof(req.name), "%s", a.name);
        r = client_send_request(a.ns, agent_uid, FIRST_REPLY_MAX, &req, &agent_fd);
        if (r < 0)
                return cli_request_failed(a.ns, r);
        line_reader_init(&lr, PROTO_REPLY_MAX);
        r = client_read_reply(agent_fd, &lr, now_usec(CLOCK_MONOTONIC) + FIRST_REPLY_MAX, &rep);
        if (r < 0)
                r = cli_request_failed(a.ns, r);
        else if (rep.kind == REPLY_RELEASED) {
                /* The stored anchor no longer holds anything. */
                (void) sym_sd_pid_notify_with_fds(0, false, "FDSTOREREMOVE=1\nFDNAME=" FDNAME, NULL, 0);
                log_info("%s: %s.", a.name, rep.held ? "released the slot" : "held no slot");
                r = 0;
        } else if (rep.kind == REPLY_ERROR) {
                log_error("%s: %s", a.name, rep.message);
                r = exit_code_for_error(rep.code);
        } else
                r = cli_request_failed(a.ns, -EBADMSG);
        return r;
}
