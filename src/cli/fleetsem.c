/* SPDX-License-Identifier: MIT */
/* fleetsem: the command line, dispatched to one command's verb_*(). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "log.h"
#include "macro.h"

static void help(void) {
        printf("Usage: fleetsem COMMAND [OPTIONS]\n\n"
               "Caps how many copies of something run at once across a fleet of hosts.\n\n"
               "Commands:\n"
               "  run [--slots N] [--wait DURATION|--no-wait] NAME -- COMMAND [ARG...]\n"
               "                  Run COMMAND while holding one of N fleet-wide slots of NAME\n"
               "  status [NAME...] [--json|--watch]\n"
               "                  Show holders and waiters (all names, or the ones given)\n"
               "  acquire [--slots N] [--wait DURATION] [--skip] [NAME]\n"
               "                  From a systemd service's ExecStartPre=/ExecCondition=: wait\n"
               "                  for a slot and hand it to the service until it stops\n"
               "  release [NAME]  From ExecStopPost=: give the service's slot back now\n"
               "  limit UNIT [SLOTS] [--wait DURATION|--skip] | limit UNIT --remove\n"
               "                  Write (or remove) the drop-in that makes a service take a slot\n"
               "  fleet-limit NAME [N|none] [--reason TEXT]\n"
               "                  Show, or as root set or remove, NAME's fleet limit in Redis\n"
               "  metrics [--output FILE]\n"
               "                  Print the agent's metrics in the Prometheus text format\n"
               "  drain NAME [--reason TEXT] | undrain NAME\n"
               "                  As root: stop new grants of NAME fleet-wide, or allow them again\n"
               "  revoke [--reason TEXT] LEASE... | revoke --host HOST [NAME...]\n"
               "                  As root: free held slots now, whoever holds them\n"
               "  reboot [--group GROUP:M]... [--if-required] [--dry-run] [NAME] | reboot --done\n"
               "                  As root: reboot when it is this host's turn, holding the slot\n"
               "                  across the reboot; --done gives it back after the boot\n"
               "  redis-init [--config FILE]\n"
               "                  As root: declare a new Redis empty, so that the agents skip\n"
               "                  the grace of its first use\n\n"
               "Options common to all commands:\n"
               "  -h --help       Show help (fleetsem COMMAND --help for a command's)\n"
               "     --version    Show the version\n"
               "     --namespace=NS\n"
               "                  Talk to the agent on @NS/agent (default: $FLEETSEM_NAMESPACE\n"
               "                  or \"fleetsem\")\n\n"
               "Exit codes: 0 success (run: COMMAND's status), 1 skipped (acquire --skip),\n"
               "64 usage, 65 revoke: no such lease holds a slot (redis-init: Redis holds\n"
               "fleetsem's keys), 69 agent or Redis unavailable, 75 no slot within the wait,\n"
               "77 not permitted, 78 unit lacks the settings acquire needs.\n"
               "See fleetsem(1).\n");
}

int main(int argc, char *argv[]) {
        log_setup("fleetsem", LOG_TARGET_STDERR, NULL);

        if (argc < 2) {
                log_error("Missing command; see fleetsem --help.");
                return EXIT_USAGE;
        }
        if (streq(argv[1], "-h") || streq(argv[1], "--help") || streq(argv[1], "help")) {
                help();
                return 0;
        }
        if (streq(argv[1], "--version")) {
                printf("fleetsem %s\n", FLEETSEM_VERSION);
                return 0;
        }
        if (streq(argv[1], "run"))
                return verb_run(argc - 1, argv + 1);
        if (streq(argv[1], "status"))
                return verb_status(argc - 1, argv + 1);
        if (streq(argv[1], "acquire"))
                return verb_acquire(argc - 1, argv + 1);
        if (streq(argv[1], "release"))
                return verb_release(argc - 1, argv + 1);
        if (streq(argv[1], "limit"))
                return verb_limit(argc - 1, argv + 1);
        if (streq(argv[1], "fleet-limit"))
                return verb_fleet_limit(argc - 1, argv + 1);
        if (streq(argv[1], "metrics"))
                return verb_metrics(argc - 1, argv + 1);
        if (streq(argv[1], "drain"))
                return verb_drain(argc - 1, argv + 1);
        if (streq(argv[1], "undrain"))
                return verb_undrain(argc - 1, argv + 1);
        if (streq(argv[1], "revoke"))
                return verb_revoke(argc - 1, argv + 1);
        if (streq(argv[1], "reboot"))
                return verb_reboot(argc - 1, argv + 1);
        if (streq(argv[1], "redis-init"))
                return verb_redis_init(argc - 1, argv + 1);

        log_error("Unknown command \"%s\"; see fleetsem --help.", argv[1]);
        return EXIT_USAGE;
}
