/* SPDX-License-Identifier: MIT */
/* `fleetsem redis-init [--config FILE]`: root declares a new Redis empty,
 * so that the agents grant at once instead of waiting out the grace of its
 * first use. The agent's program does it (fleetsemd --redis-init, in
 * src/agent/redis/redis-init.c): it reads the agent's configuration, with
 * its password, and finds and checks Redis as the agent does; this
 * command holds neither. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "config.h"
#include "log.h"
#include "macro.h"

static void help(void) {
        printf("Usage: fleetsem redis-init [--config FILE]\n\n"
               "Declares a new Redis empty, as root, before the first agent uses it: the agents\n"
               "then grant at once instead of waiting out the grace of its first use (one\n"
               "lease). Redis is the agent configuration's, found and logged in to as the agent\n"
               "does (under Sentinel the master a quorum names; each master of a Cluster). One\n"
               "that holds any of fleetsem's keys is refused and left as it is; one declared\n"
               "before is said so.\n\n"
               "Options:\n"
               "  -c --config=FILE  The agent's configuration (default: $FLEETSEM_CONFIG or\n"
               "                    " DEFAULT_CONFIG_FILE ")\n"
               "  -h --help         Show this help\n\n"
               "Exit codes: 0 declared (or declared already), 64 usage, 65 Redis holds\n"
               "fleetsem's keys, 69 Redis unavailable, 70 a reply that makes no sense, 77 not\n"
               "root, 78 the configuration cannot be read or used for it (TLS, a refused login\n"
               "or SCAN).\n");
}

int verb_redis_init(int argc, char *argv[]) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "config", required_argument, NULL, 'c' },
                {}
        };
        const char *config = NULL, *fleetsemd;
        int c;

        while ((c = getopt_long(argc, argv, "hc:", options, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case 'c':
                        config = optarg;
                        break;
                default:
                        return EXIT_USAGE;
                }
        }
        if (optind < argc) {
                log_error("Unexpected argument \"%s\"; see fleetsem redis-init --help.", argv[optind]);
                return EXIT_USAGE;
        }
        if (geteuid() != 0) {
                log_error("Only root may declare Redis empty (it reads the agent's configuration and password).");
                return EXIT_NOPERM;
        }

        fleetsemd = secure_getenv("FLEETSEMD");
        if (!fleetsemd || !fleetsemd[0])
                fleetsemd = FLEETSEMD_PATH;
        fflush(stdout);
        if (config)
                execv(fleetsemd, (char *[]) { (char *) "fleetsemd", (char *) "--redis-init", (char *) "--config",
                                              (char *) config, NULL });
        else
                execv(fleetsemd, (char *[]) { (char *) "fleetsemd", (char *) "--redis-init", NULL });
        log_error_errno(errno, "Cannot run the agent's program %s: %m", fleetsemd);
        return EXIT_UNAVAILABLE;
}
