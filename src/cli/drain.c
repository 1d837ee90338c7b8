/* SPDX-License-Identifier: MIT */
/* `fleetsem drain NAME [--reason TEXT]` and `fleetsem undrain NAME`: root
 * stops new grants of a name across the fleet (holders run on, waiters keep
 * their places), or lets it grant again. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "log.h"
#include "macro.h"


static void help(bool on) {
        if (on)
                printf("Usage: fleetsem drain NAME [--reason TEXT]\n\n"
                       "Stops new grants of NAME across the whole fleet, as root: jobs that hold a\n"
                       "slot run on, and those waiting keep their places in line; a request that\n"
                       "does not wait is refused, saying who drained NAME and why. Lasts until\n"
                       "\"fleetsem undrain NAME\" (or Redis loses its data); a drained name does not\n"
                       "leave Redis when idle. The agent's journal records who drained it, from\n"
                       "which host, and why.\n\n"
                       "Options:\n"
                       "  -r --reason=TEXT  Why (up to 200 bytes), shown to those refused or waiting\n"
                       "     --namespace=NS Talk to the agent on @NS/agent\n"
                       "  -h --help         Show this help\n\n"
                       "Exit codes: 0 drained (or drained already), 64 usage, 69 agent or Redis\n"
                       "unavailable, 77 not root.\n");
        else
                printf("Usage: fleetsem undrain NAME\n\n"
                       "Lets NAME be granted again across the fleet, as root: the waiters that fit\n"
                       "under its limit are granted at once, in the order they came.\n\n"
                       "Options:\n"
                       "     --namespace=NS Talk to the agent on @NS/agent\n"
                       "  -h --help         Show this help\n\n"
                       "Exit codes: 0 undrained (or not drained), 64 usage, 69 agent or Redis\n"
                       "unavailable, 77 not root.\n");
}

static int drain(int argc, char *argv[], bool on) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "reason", required_argument, NULL, 'r' },
                CLI_COMMON_OPTIONS,
                {}
        };
        Request req = { .verb = REQUEST_DRAIN, .drain = on };
        const char *ns = NULL, *reason = NULL, *verb = on ? "drain" : "undrain";
        char text[TEXT_ESCAPE_SIZE(PROTO_REPLY_MAX)];
        uid_t agent_uid;
        Message m;
        int c, r;

        while ((c = cli_getopt(argc, argv, on ? "hr:" : "h", options, &ns)) >= 0) {
                switch (c) {
                case 'h':
                        help(on);
                        return 0;
                case 'r':
                        reason = optarg;
                        break;
                default:
                        return EXIT_USAGE;
                }
        }
        if (optind != argc - 1) {
                log_error("Expected one NAME; see fleetsem %s --help.", verb);
                return EXIT_USAGE;
        }
        if (cli_parse_name(argv[optind]) < 0)
                return EXIT_USAGE;
        snprintf(req.name, sizeof(req.name), "%s", argv[optind]);
        if (reason) {
                if (cli_parse_reason(reason) < 0)
                        return EXIT_USAGE;
                snprintf(req.reason, sizeof(req.reason), "%s", reason);
        }
        if (cli_agent(&ns, &agent_uid) != 0)
                return EXIT_USAGE;
        if (geteuid() != 0)
                log_notice("Only root may %s a name; the agent will refuse.", verb);

        r = cli_one_request(ns, agent_uid, &req, verb, on ? "DRAINED" : "UNDRAINED", &m);
        if (r != 0)
                return r;
        if (on)
                printf("%s is drained fleet-wide%s: no new slot is granted until \"fleetsem undrain %s\".\n",
                       req.name, streq(message_get(&m, "changed") ?: "", "1") ? "" : " (it was already)", req.name);
        else if (streq(message_get(&m, "changed") ?: "", "1"))
                printf("%s is granted again; %s waiter(s) granted at once.\n", req.name,
                       text_escape(message_get(&m, "granted") ?: "0", text, sizeof(text)));
        else
                printf("%s was not drained.\n", req.name);
        return 0;
}

int verb_drain(int argc, char *argv[]) {
        return drain(argc, argv, true);
}

int verb_undrain(int argc, char *argv[]) {
        return drain(argc, argv, false);
}
