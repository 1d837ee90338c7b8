/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "client.h"
#include "log.h"
#include "macro.h"
#include "sd-dl.h"

/* `fleetsem limit UNIT SLOTS`: writes the drop-in that makes a service take
 * a fleet slot before it starts, and reloads systemd. */

#define DROPIN_NAME "50-fleetsem.conf"

typedef struct Limit {
        char unit[UNIT_NAME_MAX + 1];
        char name[NAME_MAX_LEN + 1];
        uint32_t slots;
        uint32_t weight;
        const char *wait;
        bool skip;
        bool remove;
        bool reload;
        const char *on_lost;
        const char *on_error;
        const char *ns;
} Limit;

static void help(void) {
        printf("Usage: fleetsem limit UNIT [SLOTS] [OPTIONS]\n"
               "       fleetsem limit UNIT --remove\n"
               "(The fleet limit of a name, in Redis: fleetsem fleet-limit.)\n\n"
               "Lets at most SLOTS runs of the service UNIT run at once across the fleet, by\n"
               "writing the drop-in /etc/systemd/system/UNIT.d/" DROPIN_NAME " and reloading\n"
               "systemd. Starts beyond SLOTS wait in line (first come, first served), or with\n"
               "--skip are skipped (the unit is not marked failed). Without SLOTS, the slot\n"
               "name's fleet limit applies (fleetsem fleet-limit NAME N).\n\n"
               "UNIT is a service: \"backup\" or \"backup.service\", a template \"worker@.service\"\n"
               "(all its instances share the slots) or one instance \"worker@3.service\". For a\n"
               "timer, limit the service the timer starts.\n\n"
               "  -w --wait=DURATION    Give up after DURATION in line (default: infinity);\n"
               "                        the start then fails\n"
               "  -k --weight=K         Each run takes K units of the limit (default 1)\n"
               "     --skip             Skip this run when no slot is free (ExecCondition=)\n"
               "     --name=NAME        Slot name (default: the unit's name without\n"
               "                        \".service\"; a template's prefix)\n"
               "     --on-lost=ACTION   ignore (default) or stop: stop the unit if its slot is lost\n"
               "     --on-error=POLICY  allow (default: start without a slot when Redis is\n"
               "                        unreachable) or deny (fail the start)\n"
               "     --namespace=NS     Agent namespace, if not the default\n"
               "     --remove           Remove the drop-in\n"
               "     --no-reload        Write the drop-in but do not reload systemd\n"
               "  -h --help             Show this help\n\n"
               "Exit status: 0 done; 64 usage; 73 cannot write the drop-in; 69 systemd did\n"
               "not reload.\n");
}

static int parse_unit(Limit *l, const char *arg) {
        size_t n = strlen(arg);
        const char *at;

        if (n > 6 && streq(arg + n - 6, ".timer"))
                return log_error_errno(EINVAL, "%s is a timer: limit the service it starts (its Unit=, by default "
                                       "%.*s.service).", arg, (int) (n - 6), arg);
        if (strchr(arg, '.') && !(n > 8 && streq(arg + n - 8, ".service")))
                return log_error_errno(EINVAL, "\"%s\" is not a service; fleetsem limit works on services.", arg);
        snprintf(l->unit, sizeof(l->unit), "%s%s", arg, strchr(arg, '.') ? "" : ".service");
        if (strlen(arg) + 8 > UNIT_NAME_MAX || !service_unit_is_valid(l->unit))
                return log_error_errno(EINVAL, "Invalid unit name \"%s\".", arg);
        if (l->name[0])
                return 0;
        /* "worker@.service": all instances share the prefix's slots. */
        at = strchr(l->unit, '@');
        if (at && streq(at, "@.service"))
                snprintf(l->name, sizeof(l->name), "%.*s", (int) (at - l->unit), l->unit);
        else
                snprintf(l->name, sizeof(l->name), "%.*s", (int) (strlen(l->unit) - 8), l->unit);
        if (!name_is_valid(l->name))
                return log_error_errno(EINVAL, "The unit's name \"%s\" is not a valid slot name; give --name.", l->name);
        return 0;
}

static int parse_argv(Limit *l, int argc, char *argv[]) {
        enum { ARG_SKIP = CLI_ARG_OWN, ARG_NAME, ARG_ON_LOST, ARG_ON_ERROR, ARG_REMOVE, ARG_NO_RELOAD };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "wait", required_argument, NULL, 'w' },
                { "weight", required_argument, NULL, 'k' },
                { "skip", no_argument, NULL, ARG_SKIP },
                { "name", required_argument, NULL, ARG_NAME },
                { "on-lost", required_argument, NULL, ARG_ON_LOST },
                { "on-error", required_argument, NULL, ARG_ON_ERROR },
                CLI_COMMON_OPTIONS,
                { "remove", no_argument, NULL, ARG_REMOVE },
                { "no-reload", no_argument, NULL, ARG_NO_RELOAD },
                {}
        };
        usec_t ignored;
        int c;

        while ((c = cli_getopt(argc, argv, "hw:k:", options, &l->ns)) >= 0) {
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case 'k':
                        if (cli_parse_weight(optarg, &l->weight) < 0)
                                return -EINVAL;
                        break;
                case 'w':
                        if (cli_parse_wait(optarg, &ignored) < 0)
                                return -EINVAL;
                        l->wait = optarg;
                        break;
                case ARG_SKIP:
                        l->skip = true;
                        break;
                case ARG_NAME:
                        if (cli_parse_name(optarg) < 0)
                                return -EINVAL;
                        snprintf(l->name, sizeof(l->name), "%s", optarg);
                        break;
                case ARG_ON_LOST:
                        if (!streq(optarg, "ignore") && !streq(optarg, "stop"))
                                return log_error_errno(EINVAL, "Invalid --on-lost \"%s\": expected ignore or stop.", optarg);
                        l->on_lost = optarg;
                        break;
                case ARG_ON_ERROR:
                        if (!streq(optarg, "allow") && !streq(optarg, "deny"))
                                return log_error_errno(EINVAL, "Invalid --on-error \"%s\": expected allow or deny.", optarg);
                        l->on_error = optarg;
                        break;
                case ARG_REMOVE:
                        l->remove = true;
                        break;
                case ARG_NO_RELOAD:
                        l->reload = false;
                        break;
                default:
                        return -EINVAL;
                }
        }
        if (optind >= argc)
                return log_error_errno(EINVAL, "Missing UNIT; usage: fleetsem limit UNIT SLOTS [OPTIONS]");
        if (parse_unit(l, argv[optind++]) < 0)
                return -EINVAL;
        if (l->remove) {
                if (optind < argc)
                        return log_error_errno(EINVAL, "--remove takes no SLOTS; usage: fleetsem limit UNIT --remove");
                return 1;
        }
        if (optind >= argc)
                return 1;       /* the fleet limit's */
        if (cli_parse_slots(argv[optind], &l->slots) < 0 || cli_check_weight(l->slots, l->weight) < 0)
                return -EINVAL;
        if (++optind < argc)
                return log_error_errno(EINVAL, "Too many arguments; usage: fleetsem limit UNIT SLOTS [OPTIONS]");
        return 1;
}

static int reload(void) {
        _cleanup_(sym_sd_bus_error_freep) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sym_sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(sym_sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        int r;

        r = sd_dl_open();
        if (r < 0)
                return r;
        r = sd_dl_bus_open(&bus);
        if (r < 0)
                return log_error_errno(r, "Cannot reach systemd to reload it (%m); run systemctl daemon-reload.");
        r = sym_sd_bus_call_method(bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                   "org.freedesktop.systemd1.Manager", "Reload", &error, &reply, NULL);
        if (r < 0)
                log_error("systemd did not reload (%s); run systemctl daemon-reload.", error.message ?: strerror(-r));
        return r;
}

static int write_dropin(const Limit *l, const char *dir, const char *path) {
        char self[PATH_MAX], tmp[PATH_MAX + 8];
        ssize_t n;
        FILE *f;

        /* The helper by its absolute path, wherever this fleetsem lives. */
        n = readlink("/proc/self/exe", self, sizeof(self) - 1);
        if (n <= 0)
                return log_error_errno(errno, "Cannot tell where fleetsem is installed: %m");
        self[n] = '\0';
        if (strpbrk(self, " \t\n\"'\\%$"))
                return log_error_errno(EINVAL, "fleetsem is installed at a path a unit file cannot name plainly: %s", self);

        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return log_error_errno(errno, "Cannot create %s: %m", dir);
        f = atomic_file_open(path, tmp, sizeof(tmp));
        if (!f)
                return -EIO;

        fprintf(f, "# Written by `fleetsem limit`; `fleetsem limit %s --remove` takes it away.\n", l->unit);
        if (l->slots > 0)
                fprintf(f, "# At most %" PRIu32 " of \"%s\" run at once across the fleet; the rest %s.\n", l->slots,
                        l->name, l->skip ? "skip their run" : "wait in line");
        else
                fprintf(f, "# At most the fleet limit of \"%s\" (fleetsem fleet-limit) run at once across the\n"
                           "# fleet; the rest %s.\n", l->name, l->skip ? "skip their run" : "wait in line");
        fprintf(f, "[Service]\n"
                   "NotifyAccess=all\n"
                   "FileDescriptorStoreMax=1\n");
        fprintf(f, "%s=+%s acquire", l->skip ? "ExecCondition" : "ExecStartPre", self);
        if (l->slots > 0)
                fprintf(f, " --slots %" PRIu32, l->slots);
        if (l->weight > 1)
                fprintf(f, " --weight %" PRIu32, l->weight);
        if (l->skip)
                fprintf(f, " --skip");
        if (l->wait)
                fprintf(f, " --wait \"%s\"", l->wait);
        if (l->on_lost)
                fprintf(f, " --on-lost=%s", l->on_lost);
        if (l->on_error)
                fprintf(f, " --on-error=%s", l->on_error);
        if (l->ns)
                fprintf(f, " --namespace=%s", l->ns);
        fprintf(f, " %s\n"
                   "EnvironmentFile=-/run/fleetsem/%%n.env\n",
                l->name);
        return atomic_file_commit(f, tmp, path);
}

int verb_limit(int argc, char *argv[]) {
        Limit l = { .reload = true };
        char dir[sizeof("/etc/systemd/system/") + UNIT_NAME_MAX + 2], path[sizeof(dir) + sizeof(DROPIN_NAME) + 1];
        int r;

        /* "limit --fleet": the fleet limit's verb before it had its own
         * word, still served. */
        for (int i = 1; i < argc && !streq(argv[i], "--"); i++)
                if (streq(argv[i], "--fleet")) {
                        log_warning("\"fleetsem limit --fleet\" is deprecated: use \"fleetsem fleet-limit\".");
                        return verb_fleet_limit(argc, argv);
                }
        r = parse_argv(&l, argc, argv);
        if (r <= 0)
                return r < 0 ? EXIT_USAGE : 0;
        snprintf(dir, sizeof(dir), "/etc/systemd/system/%s.d", l.unit);
        snprintf(path, sizeof(path), "%s/" DROPIN_NAME, dir);

        if (l.remove) {
                if (unlink(path) < 0) {
                        if (errno != ENOENT) {
                                log_error_errno(errno, "Cannot remove %s: %m", path);
                                return EXIT_CANTCREAT;
                        }
                        printf("%s has no fleetsem drop-in (no %s).\n", l.unit, path);
                        return 0;
                }
                (void) rmdir(dir);      /* only if nothing else is in it */
                printf("Removed %s: %s runs without a fleet slot.\n", path, l.unit);
        } else {
                if (write_dropin(&l, dir, path) < 0)
                        return EXIT_CANTCREAT;
                if (l.slots > 0)
                        printf("Wrote %s: at most %" PRIu32 " of \"%s\" at once across the fleet.\n", path, l.slots,
                               l.name);
                else
                        printf("Wrote %s: at most the fleet limit of \"%s\" at once (fleetsem fleet-limit %s N).\n",
                               path, l.name, l.name);
        }
        if (!l.reload)
                return 0;
        return reload() < 0 ? EXIT_UNAVAILABLE : 0;
}
