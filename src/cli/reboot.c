/* SPDX-License-Identifier: MIT */
/* `fleetsem reboot [NAME]`: root waits in NAME's line (and first in the
 * line of each --group, in one fixed order), takes slots the host itself
 * holds (hold=host: no anchor, kept by the agent across its restarts and
 * the reboot), records the units failed then, and reboots through logind;
 * it refuses when nothing would give the slots back after the boot.
 * `--done`, at boot (fleetsem-reboot-done.service), judges the system
 * against the units failed before (reboot-health.c), runs the health
 * command, checks in Redis that the slots are still the host's, and gives
 * them back; an unhealthy host keeps them, so that the rollout stops
 * there. What is recorded for --done (the groups, their leases, the
 * health command, the failed units) is in a root-owned state file
 * (reboot-state.c). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "log.h"
#include "macro.h"
#include "names.h"
#include "reboot-health.h"
#include "reboot.h"
#include "sd-dl.h"
#include "status-fetch.h"

static void help(void) {
        printf("Usage: fleetsem reboot [OPTIONS] [NAME]\n"
               "       fleetsem reboot --done|--release [OPTIONS] [NAME]\n\n"
               "Reboots this host when it is its turn (root only): waits in the line of\n"
               "NAME (default \"reboot\"; its fleet limit, or --slots), and first of each\n"
               "--group, takes slots held by the host itself, which outlive every process\n"
               "and the reboot, and reboots through logind; it refuses when nothing would\n"
               "give them back after the boot (" DONE_SERVICE " not enabled,\n"
               "no --reboot-command). At boot, --done (run by that service) waits for the\n"
               "system to have started, counts it healthy when it runs, or is degraded by no\n"
               "unit but those failed before the reboot, runs the health command, and gives\n"
               "the slots back; an unhealthy host keeps them, and the rollout stops there.\n"
               "See fleetsem(1), REBOOTS.\n\n"
               "  -s --slots=N           NAME's fleet-wide limit (default: its fleet limit)\n"
               "  -g --group=GROUP:M     Also at most M hosts of GROUP at once (repeatable)\n"
               "  -w --wait=DURATION     Wait at most this long for the slots (default: forever)\n"
               "     --if-required       Only if a reboot is required (/run/reboot-required)\n"
               "     --dry-run           Say what would be done; take nothing\n"
               "  -r --reason=TEXT       Why, for \"fleetsem status\" (packages that need it are\n"
               "                         added from /run/reboot-required.pkgs)\n"
               "     --health=CMD        After the reboot, --done runs CMD (sh -c): the slots\n"
               "                         are given back only if it exits 0\n"
               "     --reboot-command=CMD  Run CMD (sh -c) instead of asking logind to reboot\n"
               "     --done              After the boot: wait for the system to start, check its\n"
               "                         health and give the host's slots back\n"
               "     --release           Give the host's slots back now, without checks\n"
               "     --running-timeout=DURATION  How long --done waits while \"systemctl\n"
               "                         is-system-running\" says initializing or starting\n"
               "                         (default 10min; 0: systemd is not asked)\n"
               "     --required-file=PATH  Instead of /run/reboot-required (PATH.pkgs too)\n"
               "     --state-dir=DIR     Where the groups and health command are kept for\n"
               "                         --done (default /var/lib/fleetsem)\n"
               "     --namespace=NS      Agent namespace (default: $FLEETSEM_NAMESPACE or fleetsem)\n"
               "  -h --help              Show this help\n\n"
               "Exit codes: 0 rebooting, done, or nothing to do; --done: 1 not healthy (the\n"
               "slots are kept), 2 healthy, but a slot was no longer this host's (Redis lost it\n"
               "while the host was down, its host_lease ran out, or it was revoked), 3 both;\n"
               "64 usage, 69 agent or Redis unavailable, 70 the reboot could not be asked for,\n"
               "75 no slot within the wait, 77 not root, 78 NAME has no fleet limit and no\n"
               "--slots, or nothing would give the slots back after the boot.\n");
}

static int parse_group(Reboot *rb, const char *s) {
        const char *colon = strrchr(s, ':');
        char group[NAME_MAX_LEN + 1];
        uint64_t m;
        int k;

        if (!colon || colon == s || (size_t) (colon - s) >= sizeof(group) ||
            parse_uint64(colon + 1, 1, SLOTS_MAX, &m) < 0)
                return log_error_errno(EINVAL, "Invalid --group \"%s\": expected GROUP:M, such as rack-12:1.", s);
        if (rb->n_groups >= GROUPS_MAX)
                return log_error_errno(E2BIG, "At most %d --group.", GROUPS_MAX);
        memcpy(group, s, (size_t) (colon - s));
        group[colon - s] = '\0';
        k = snprintf(rb->groups[rb->n_groups].name, sizeof(rb->groups[0].name), "%s:%s", rb->name, group);
        if (k < 0 || (size_t) k >= sizeof(rb->groups[0].name) || !name_is_valid(rb->groups[rb->n_groups].name))
                return log_error_errno(EINVAL, "Invalid --group \"%s\": %s:GROUP must be a name "
                                       "(1-200 of A-Z a-z 0-9 _ . : @ -).", s, rb->name);
        for (size_t i = 0; i < rb->n_groups; i++)
                if (streq(rb->groups[i].name, rb->groups[rb->n_groups].name))
                        return log_error_errno(EINVAL, "--group %s given twice.", group);
        rb->groups[rb->n_groups++].slots = (uint32_t) m;
        return 0;
}

static int group_cmp(const void *x, const void *y) {
        return strcmp(((const Group *) x)->name, ((const Group *) y)->name);
}

static int parse_argv(Reboot *rb, int argc, char *argv[]) {
        enum {
                ARG_IF_REQUIRED = CLI_ARG_OWN, ARG_DRY_RUN, ARG_HEALTH, ARG_REBOOT_COMMAND, ARG_DONE,
                ARG_RELEASE, ARG_RUNNING_TIMEOUT, ARG_REQUIRED_FILE, ARG_STATE_DIR,
        };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "slots", required_argument, NULL, 's' },
                { "group", required_argument, NULL, 'g' },
                { "wait", required_argument, NULL, 'w' },
                { "reason", required_argument, NULL, 'r' },
                { "if-required", no_argument, NULL, ARG_IF_REQUIRED },
                { "dry-run", no_argument, NULL, ARG_DRY_RUN },
                { "health", required_argument, NULL, ARG_HEALTH },
                { "reboot-command", required_argument, NULL, ARG_REBOOT_COMMAND },
                { "done", no_argument, NULL, ARG_DONE },
                { "release", no_argument, NULL, ARG_RELEASE },
                { "running-timeout", required_argument, NULL, ARG_RUNNING_TIMEOUT },
                { "required-file", required_argument, NULL, ARG_REQUIRED_FILE },
                { "state-dir", required_argument, NULL, ARG_STATE_DIR },
                CLI_COMMON_OPTIONS,
                {}
        };
        const char *groups[GROUPS_MAX + 1];
        size_t n_groups = 0;
        int c;

        while ((c = cli_getopt(argc, argv, "hs:g:w:r:", options, &rb->ns)) >= 0) {
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case 's':
                        if (cli_parse_slots(optarg, &rb->slots) < 0)
                                return -EINVAL;
                        break;
                case 'g':
                        if (n_groups > GROUPS_MAX)
                                return log_error_errno(E2BIG, "At most %d --group.", GROUPS_MAX);
                        groups[n_groups++] = optarg;
                        break;
                case 'w':
                        if (cli_parse_wait(optarg, &rb->wait) < 0)
                                return -EINVAL;
                        break;
                case 'r':
                        if (cli_parse_reason(optarg) < 0)
                                return -EINVAL;
                        rb->reason = optarg;
                        break;
                case ARG_IF_REQUIRED:
                        rb->if_required = true;
                        break;
                case ARG_DRY_RUN:
                        rb->dry_run = true;
                        break;
                case ARG_HEALTH:
                        if (strlen(optarg) == 0 || strlen(optarg) > HEALTH_MAX || strchr(optarg, '\n'))
                                return log_error_errno(EINVAL, "Invalid --health: 1 to %d bytes, on one line.",
                                                       HEALTH_MAX);
                        rb->health = optarg;
                        break;
                case ARG_REBOOT_COMMAND:
                        rb->reboot_command = optarg;
                        break;
                case ARG_DONE:
                        rb->done = true;
                        break;
                case ARG_RELEASE:
                        rb->release_only = true;
                        break;
                case ARG_RUNNING_TIMEOUT:
                        if (parse_duration(optarg, &rb->running_timeout) < 0 || rb->running_timeout == USEC_INFINITY)
                                return log_error_errno(EINVAL, "Invalid --running-timeout \"%s\": expected a "
                                                       "duration such as 10min, or 0.", optarg);
                        break;
                case ARG_REQUIRED_FILE:
                        rb->required_file = optarg;
                        break;
                case ARG_STATE_DIR:
                        rb->state_dir = optarg;
                        break;
                default:
                        return -EINVAL;
                }
        }
        if (argc - optind > 1)
                return log_error_errno(EINVAL, "Too many arguments; usage: fleetsem reboot [OPTIONS] [NAME]");
        if (optind < argc) {
                if (cli_parse_name(argv[optind]) < 0)
                        return -EINVAL;
                rb->name = argv[optind];
        }
        if (rb->done && rb->release_only)
                return log_error_errno(EINVAL, "--done and --release exclude each other.");
        if ((rb->done || rb->release_only) && (rb->if_required || rb->dry_run || rb->reason || rb->reboot_command))
                return log_error_errno(EINVAL, "--done and --release take no --if-required, --dry-run, --reason "
                                       "nor --reboot-command.");
        for (size_t i = 0; i < n_groups; i++)
                if (parse_group(rb, groups[i]) < 0)
                        return -EINVAL;
        /* One order for every host: the groups by name, then the reboot
         * name; nobody holds one while it waits for an earlier one. */
        qsort(rb->groups, rb->n_groups, sizeof(Group), group_cmp);
        return 1;
}

/* ---- Why: the reason and the packages ------------------------------------------- */

/* The packages that asked for the reboot, from PATH.pkgs (written by
 * packages' maintainer scripts; anything in it may be hostile): each
 * line's bytes of [A-Za-z0-9.+:_-] only, the first PKGS_READ_MAX bytes,
 * each package once, into buf as "pkg pkg …" cut to size. */
static void read_packages(const char *required_file, char *buf, size_t size) {
        char path[PATH_MAX], data[PKGS_READ_MAX + 1];
        _cleanup_close_ int fd = -EBADF;
        size_t used = 0;
        ssize_t n;

        buf[0] = '\0';
        if (snprintf(path, sizeof(path), "%s.pkgs", required_file) >= (int) sizeof(path))
                return;
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0)
                return;
        n = read(fd, data, PKGS_READ_MAX);
        if (n <= 0)
                return;
        data[n] = '\0';
        for (char *line = data, *next; line && *line; line = next) {
                char pkg[128];
                size_t k = 0;

                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                for (const char *p = line; *p && k < sizeof(pkg) - 1; p++)
                        if (strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.+:_-", *p))
                                pkg[k++] = *p;
                pkg[k] = '\0';
                if (k == 0)
                        continue;
                /* Once each: a word of buf already. */
                bool seen = false;
                for (const char *w = buf; *w && !seen; w += strcspn(w, " "), w += *w == ' ') {
                        size_t wl = strcspn(w, " ");
                        seen = wl == k && strneq(w, pkg, k);
                }
                if (seen)
                        continue;
                if (used + (used > 0) + k >= size)
                        break;
                if (used > 0)
                        buf[used++] = ' ';
                memcpy(buf + used, pkg, k + 1);
                used += k;
        }
}

/* "REASON; packages: P…" within DRAIN_REASON_MAX bytes, the packages (only
 * ASCII) cut at a word with "..." when they do not fit, left out when not
 * one fits; "" when there is neither. The reason is never cut: it may end
 * in the middle of a character. */
static void compose_reason(const Reboot *rb, char ret[static DRAIN_REASON_MAX + 1]) {
        char pkgs[PKGS_READ_MAX + 1];
        const char *reason = rb->reason ?: "", *sep = reason[0] ? "; packages: " : "packages: ";
        size_t room;

        snprintf(ret, DRAIN_REASON_MAX + 1, "%s", reason);
        read_packages(rb->required_file, pkgs, sizeof(pkgs));
        if (!pkgs[0] || strlen(reason) + strlen(sep) + strlen("x...") > DRAIN_REASON_MAX)
                return;
        room = DRAIN_REASON_MAX - strlen(reason) - strlen(sep);
        if (strlen(pkgs) > room) {
                /* The whole words that fit with "...". */
                pkgs[room - 3] = '\0';
                if (strrchr(pkgs, ' '))
                        *strrchr(pkgs, ' ') = '\0';
                strcat(pkgs, "...");
        }
        snprintf(ret + strlen(ret), DRAIN_REASON_MAX + 1 - strlen(ret), "%s%s", sep, pkgs);
}

/* ---- Taking and giving back ----------------------------------------------------- */

/* One slot of name the host holds: GRANTED (0, its lease in ret_lease),
 * or the exit code (said). */
static int take_one(const Reboot *rb, uid_t agent_uid, const char *name, uint32_t slots, const char *reason,
                    usec_t deadline, char ret_lease[static LEASE_ID_LEN + 1]) {
        Request req = { .verb = REQUEST_ACQUIRE, .host_held = true, .slots = slots, .weight = 1 };
        _cleanup_close_ int fd = -EBADF;
        char text[TEXT_ESCAPE_SIZE(sizeof(((Reply *) NULL)->message))];
        uint32_t told = 0;
        bool grace_told = false;
        char note[NAME_MAX_LEN + 512];
        usec_t now = now_usec(CLOCK_MONOTONIC);
        LineReader lr;
        Reply rep;
        int r;

        snprintf(req.name, sizeof(req.name), "%s", name);
        snprintf(req.reason, sizeof(req.reason), "%s", reason);
        req.wait = deadline == USEC_INFINITY ? USEC_INFINITY : deadline > now ? deadline - now : 0;
        r = lease_id_new(req.lease);
        if (r < 0)
                return log_error_errno(-r, "Failed to make a lease id: %m"), EXIT_SOFTWARE;
        r = client_send_request(rb->ns, agent_uid, REPLY_MARGIN, &req, &fd);
        if (r < 0)
                return cli_request_failed(rb->ns, r);
        line_reader_init(&lr, PROTO_REPLY_MAX);
        for (;;) {
                r = client_read_reply(fd, &lr, deadline == USEC_INFINITY ? USEC_INFINITY : usec_add(deadline, REPLY_MARGIN),
                                      &rep);
                if (r < 0)
                        return cli_request_failed(rb->ns, r);
                switch (rep.kind) {
                case REPLY_QUEUED:
                        if (rep.position != told)
                                printf("Waiting for a slot of %s: position %" PRIu32 " in line, %" PRIu32 " of %" PRIu32
                                       " held.\n", name, rep.position, rep.held, reply_limit(&rep, slots));
                        /* A wait that is Redis' (after a reset, which for
                         * a slot a host holds itself is a host_lease): told
                         * once, it is not a hang. */
                        if (!grace_told && grace_note(name, &rep, note, sizeof(note))) {
                                printf("%s.\n", note);
                                grace_told = true;
                        }
                        fflush(stdout);
                        told = rep.position;
                        continue;
                case REPLY_GRANTED:
                        printf("This host holds a slot of %s (token %" PRIu64 ", lease %s).\n", name, rep.token,
                               rep.lease);
                        snprintf(ret_lease, LEASE_ID_LEN + 1, "%s", lease_id_is_valid(rep.lease) ? rep.lease : "");
                        return 0;
                case REPLY_DENIED:
                        log_error("%s: no slot within the wait (position %" PRIu32 " in line).", name, rep.position);
                        return EXIT_TEMPFAIL;
                case REPLY_ERROR:
                        log_error("%s: %s", name, text_escape(rep.message, text, sizeof(text)));
                        return exit_code_for_error(rep.code);
                default:
                        log_error("Unexpected reply from the agent.");
                        return EXIT_SOFTWARE;
                }
        }
}

/* RELEASE name= hold=host: 0 (released, or not held), or the exit code. */
static int give_back(const Reboot *rb, uid_t agent_uid, const char *name) {
        Request req = { .verb = REQUEST_RELEASE, .host_held = true };
        Message m;
        int r;

        snprintf(req.name, sizeof(req.name), "%s", name);
        r = cli_one_request(rb->ns, agent_uid, &req, "release", "RELEASED", &m);
        if (r != 0)
                return r;
        if (streq(message_get(&m, "held") ?: "0", "1"))
                printf("Released this host's slot of %s.\n", name);
        else
                printf("This host held no slot of %s.\n", name);
        return 0;
}

static int give_back_all(const Reboot *rb, uid_t agent_uid) {
        int ret = give_back(rb, agent_uid, rb->name);

        /* The reverse of the order they were taken in. */
        for (size_t i = rb->n_groups; i > 0; i--) {
                int r = give_back(rb, agent_uid, rb->groups[i - 1].name);

                if (ret == 0)
                        ret = r;
        }
        return ret;
}

/* ---- The reboot ----------------------------------------------------------------- */

/* sh -c CMD; its exit status, or 128+signal, or <0. */
static int run_shell(const char *cmd) {
        pid_t pid;
        int status;

        fflush(NULL);
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                execl("/bin/sh", "sh", "-c", cmd, (char *) NULL);
                _exit(127);
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int ask_reboot(const Reboot *rb) {
        _cleanup_(sym_sd_bus_error_freep) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sym_sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sym_sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        int r;

        if (rb->reboot_command) {
                r = run_shell(rb->reboot_command);
                if (r != 0) {
                        log_error("The reboot command failed (%d); the slots stay held until --release.", r);
                        return EXIT_SOFTWARE;
                }
                return 0;
        }
        if (sd_dl_open() < 0)
                return EXIT_SOFTWARE;
        r = sym_sd_bus_open_system(&bus);
        if (r < 0) {
                log_error_errno(-r, "Failed to connect to the system bus: %m; the slots stay held until --release.");
                return EXIT_SOFTWARE;
        }
        r = sym_sd_bus_call_method(bus, "org.freedesktop.login1", "/org/freedesktop/login1",
                                   "org.freedesktop.login1.Manager", "Reboot", &error, &reply, "b", 0);
        if (r < 0)
                log_error("Failed to ask logind to reboot: %s; the slots stay held until --release.",
                          error.message ?: strerror(-r));
        return r < 0 ? EXIT_SOFTWARE : 0;
}

/* Whether something gives the slots back after the boot: the done
 * service, or (the operator's own way) a --reboot-command. 0, or
 * EXIT_CONFIG with why, and the fix, said. */
static int check_given_back(const Reboot *rb, const char *what) {
        char why[512];

        if (rb->reboot_command || done_service_starts(why, sizeof(why)) > 0)
                return 0;
        log_error("%s: %s, and no --reboot-command: after the boot nothing would give this host's slot of %s back, "
                  "and the rollout would wait for its host_lease. Enable it first: systemctl enable %s",
                  what, why, rb->name, DONE_SERVICE);
        return EXIT_CONFIG;
}

static int dry_run(const Reboot *rb, const char *reason) {
        FailedUnits now = {};
        int r;

        printf("Would wait for ");
        for (size_t i = 0; i < rb->n_groups; i++)
                printf("a slot of %s (at most %" PRIu32 " at once), then ", rb->groups[i].name, rb->groups[i].slots);
        if (rb->slots > 0)
                printf("a slot of %s (at most %" PRIu32 " at once)", rb->name, rb->slots);
        else
                printf("a slot of %s (its fleet limit)", rb->name);
        printf(", held by this host%s%s%s, then reboot %s%s.\n", reason[0] ? " (" : "", reason, reason[0] ? ")" : "",
               rb->reboot_command ? "by running: " : "through logind", rb->reboot_command ?: "");
        if (rb->health)
                printf("After the boot, --done would run: %s\n", rb->health);
        r = failed_units_list(&now);
        if (r >= 0 && now.n > 0) {
                printf("Units failed now, which --done would not count against the host:");
                for (size_t i = 0; i < now.n; i++)
                        printf(" %s", now.names[i]);
                printf("%s\n", now.more ? " ..." : "");
        }
        failed_units_clear(&now);
        return check_given_back(rb, "Would refuse");
}

static int take_and_reboot(Reboot *rb, uid_t agent_uid) {
        char reason[DRAIN_REASON_MAX + 1];
        usec_t deadline = rb->wait == USEC_INFINITY ? USEC_INFINITY : usec_add(now_usec(CLOCK_MONOTONIC), rb->wait);
        int r;

        if (rb->if_required && access(rb->required_file, F_OK) < 0) {
                printf("No reboot required (%s is absent); nothing to do.\n", rb->required_file);
                return 0;
        }
        compose_reason(rb, reason);
        if (rb->dry_run)
                return dry_run(rb, reason);
        r = check_given_back(rb, "Refusing to reboot");
        if (r != 0)
                return r;
        r = state_write(rb);
        if (r < 0)
                return EXIT_CANTCREAT;
        for (size_t i = 0; i < rb->n_groups; i++) {
                r = take_one(rb, agent_uid, rb->groups[i].name, rb->groups[i].slots, reason, deadline,
                             rb->groups[i].lease);
                if (r != 0)
                        goto failed;
        }
        r = take_one(rb, agent_uid, rb->name, rb->slots, reason, deadline, rb->lease);
        if (r != 0)
                goto failed;
        /* What is failed now is not the reboot's doing: --done does not
         * count it against the host. */
        r = failed_units_list(&rb->failed);
        if (r < 0)
                log_warning_errno(-r, "Failed to list the failed units: %m; after the boot, any failed unit counts "
                                  "against the host.");
        else if (rb->failed.more)
                log_warning("More than %d units are failed; after the boot, the others count against the host.",
                            FAILED_UNITS_MAX);
        if (state_write(rb) < 0) {
                r = EXIT_CANTCREAT;
                goto failed;
        }
        printf("Rebooting.\n");
        fflush(stdout);
        return ask_reboot(rb);
failed:
        /* Nothing held while nothing reboots: what was taken goes back. */
        (void) give_back_all(rb, agent_uid);
        state_remove(rb);
        return r;
}

/* ---- After the boot ------------------------------------------------------------- */

/* The agent runs before the checks: started by this request (socket
 * activation) if nothing else started it since the boot, it re-adopts the
 * host's slots from Redis and renews them, so that a host that fails its
 * checks keeps them until an operator acts, not only for host_lease. 0, or
 * the exit code (said). */
static int agent_start(const Reboot *rb, uid_t agent_uid) {
        Request req = { .verb = REQUEST_METRICS };
        Message m;

        return cli_one_request(rb->ns, agent_uid, &req, "agent's answer", "AGENT", &m);
}

/* Whether this host still holds the slot of name whose lease it recorded,
 * as Redis says (a HOLDER of the agent's status with that lease): 0 with
 * *ret_held (when not, said with what may have happened), or the exit
 * code (said). */
static int slot_still_held(const Reboot *rb, uid_t agent_uid, const char *name, const char *lease, bool *ret_held) {
        _cleanup_(status_output_free) StatusOutput out = {};
        const char *action = "";
        int r;

        r = status_fetch_names(rb->ns, agent_uid, (char *[]) { (char *) name }, 1, &out);
        if (r != 0)
                return r;
        for (size_t i = 0; i < out.n; i++) {
                const Entry *e = &out.entries[i];

                if (streq(e->m.verb, "HOLDER") && streq(status_get(e, "name"), name) &&
                    streq(status_get(e, "lease"), lease)) {
                        *ret_held = true;
                        return 0;
                }
                if (streq(e->m.verb, "NAME") && streq(status_get(e, "name"), name))
                        action = status_get(e, "last_action");
        }
        log_error("This host no longer holds its slot of %s (lease %s): Redis has no such holder. It went while the "
                  "host was down or since: Redis lost it (restarted empty or from an old snapshot, flushed, the "
                  "name's keys deleted), its host_lease ran out, or root revoked it%s%s%s%s.", name, lease,
                  out.grace_why ? "; Redis now: " : "", out.grace_why ?: "",
                  action[0] ? "; the last operator action on it: " : "", action);
        *ret_held = false;
        return 0;
}

/* How many of the slots whose leases were recorded are no longer the
 * host's (each said): 0 with *ret_gone, or the exit code. */
static int slots_gone(const Reboot *rb, uid_t agent_uid, size_t *ret_gone) {
        size_t gone = 0;
        bool held;
        int r;

        for (size_t i = 0; i <= rb->n_groups; i++) {
                const char *name = i < rb->n_groups ? rb->groups[i].name : rb->name;
                const char *lease = i < rb->n_groups ? rb->groups[i].lease : rb->lease;

                if (!lease[0])
                        continue;       /* (a state of an older version: not recorded) */
                r = slot_still_held(rb, agent_uid, name, lease, &held);
                if (r != 0)
                        return r;
                gone += !held;
        }
        *ret_gone = gone;
        return 0;
}

/* The system and the health command: true when healthy (what is not, said). */
static bool host_healthy(const Reboot *rb, const char *health) {
        const char *cmd = rb->health ?: health;
        int r;

        if (rb->running_timeout > 0 && !system_judge(rb->running_timeout, &rb->failed))
                return false;
        if (!cmd[0])
                return true;
        r = run_shell(cmd);
        if (r != 0) {
                log_error("The health command failed (%d): %s", r, cmd);
                return false;
        }
        return true;
}

static int done(Reboot *rb, uid_t agent_uid) {
        char health[HEALTH_MAX + 1] = "";
        size_t gone = 0;
        bool healthy;
        int r;

        if (state_read(rb, health, sizeof(health)) < 0 && !rb->release_only)
                return EXIT_CONFIG;
        if (rb->release_only) {
                r = give_back_all(rb, agent_uid);
                if (r == 0)
                        state_remove(rb);
                return r;
        }
        r = agent_start(rb, agent_uid);
        if (r != 0)
                return r;
        healthy = host_healthy(rb, health);
        /* Kept or given back, the slots must be there: Redis says. */
        r = slots_gone(rb, agent_uid, &gone);
        if (r != 0) {
                log_error("Cannot tell whether this host still holds its slots; whatever it holds stays held, and "
                          "--done may be run again.");
                return r;
        }
        if (!healthy && gone == 0) {
                log_error("This host keeps its slot of %s: the rollout waits until it is released (fleetsem reboot "
                          "--release) or revoked.", rb->name);
                return EXIT_UNHEALTHY;
        }
        if (!healthy) {
                log_error("This host is not healthy, and Redis no longer counts its slot of %s: the rollout does not "
                          "wait for it, after the wait of a host_lease that follows such a loss.", rb->name);
                return EXIT_UNHEALTHY_GONE;
        }
        r = give_back_all(rb, agent_uid);
        if (r == 0)
                state_remove(rb);
        return r != 0 ? r : gone > 0 ? EXIT_GONE : 0;
}

int verb_reboot(int argc, char *argv[]) {
        Reboot rb = {
                .name = REBOOT_NAME_DEFAULT, .wait = USEC_INFINITY, .required_file = REQUIRED_FILE_DEFAULT,
                .state_dir = STATE_DIR_DEFAULT, .running_timeout = RUNNING_TIMEOUT_DEFAULT,
        };
        uid_t agent_uid;
        int r;

        r = parse_argv(&rb, argc, argv);
        if (r <= 0)
                return r < 0 ? EXIT_USAGE : 0;
        if (geteuid() != 0 && !rb.dry_run) {
                log_error("fleetsem reboot: root only.");
                return EXIT_NOPERM;
        }
        if (cli_agent(&rb.ns, &agent_uid) != 0)
                return EXIT_USAGE;
        r = rb.done || rb.release_only ? done(&rb, agent_uid) : take_and_reboot(&rb, agent_uid);
        failed_units_clear(&rb.failed);
        return r;
}
