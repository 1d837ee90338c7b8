/* SPDX-License-Identifier: MIT */
/* `fleetsem fleet-limit NAME [N|none] [--reason TEXT]`: the name's
 * fleet limit, one number in Redis that every host's callers share, set or
 * removed by root on any host, or shown to anyone. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "log.h"
#include "macro.h"
#include "status-fetch.h"

static void help(void) {
        printf("Usage: fleetsem fleet-limit NAME [N|none] [--reason TEXT]\n\n"
               "Shows, sets or removes the fleet limit of NAME: at most N holders of NAME at\n"
               "once across the fleet, kept in Redis for every host. The limit in force is\n"
               "the lowest of the fleet limit and what holders and waiters asked for (--slots,\n"
               "slots=); callers that ask for no number need a fleet limit. Setting or removing\n"
               "it takes root (on any host with an agent); showing it does not.\n\n"
               "  N      Set it: lowering it stops no holder (nothing is granted until fewer\n"
               "         hold), raising it grants the waiters that now fit at once\n"
               "  none   Remove it: callers that asked for no number are refused from then on\n"
               "  (none) Show it, who set it, from which host, when and why\n\n"
               "Options:\n"
               "  -r --reason=TEXT  Why (up to 200 bytes), kept with it and in the journal\n"
               "     --namespace=NS Talk to the agent on @NS/agent\n"
               "  -h --help         Show this help\n\n"
               "Exit codes: 0 done (or shown; also when NAME has none), 64 usage, 69 agent or\n"
               "Redis unavailable, 77 not root.\n");
}

static int show(const char *ns, uid_t agent_uid, char *name) {
        _cleanup_(status_output_free) StatusOutput out = {};
        const char *n = NULL, *set = NULL;
        char t1[TEXT_ESCAPE_SIZE(PROTO_REPLY_MAX)], t2[TEXT_ESCAPE_SIZE(PROTO_REPLY_MAX)];
        int r;

        r = status_fetch_names(ns, agent_uid, &name, 1, &out);
        if (r != 0)
                return r;
        for (size_t i = 0; i < out.n; i++)
                if (streq(out.entries[i].m.verb, "NAME") && streq(status_get(&out.entries[i], "name"), name) &&
                    message_get(&out.entries[i].m, "fleet_limit")) {
                        n = status_get(&out.entries[i], "fleet_limit");
                        set = status_get(&out.entries[i], "fleet_limit_set");
                }
        if (n)
                printf("%s: fleet limit %s, set %s\n", name, text_escape(n, t1, sizeof(t1)),
                       text_escape(set, t2, sizeof(t2)));
        else
                printf("%s: no fleet limit\n", name);
        return 0;
}

int verb_fleet_limit(int argc, char *argv[]) {
        enum { ARG_FLEET = CLI_ARG_OWN };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "fleet", no_argument, NULL, ARG_FLEET },     /* limit --fleet, the old spelling */
                { "reason", required_argument, NULL, 'r' },
                CLI_COMMON_OPTIONS,
                {}
        };
        Request req = { .verb = REQUEST_LIMIT };
        const char *ns = NULL, *reason = NULL;
        char text[TEXT_ESCAPE_SIZE(PROTO_REPLY_MAX)], was[TEXT_ESCAPE_SIZE(PROTO_REPLY_MAX)];
        uid_t agent_uid;
        Message m;
        int c, r;

        while ((c = cli_getopt(argc, argv, "hr:", options, &ns)) >= 0) {
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_FLEET:
                        break;
                case 'r':
                        reason = optarg;
                        break;
                default:
                        return EXIT_USAGE;
                }
        }
        if (optind >= argc || argc - optind > 2) {
                log_error("Expected NAME and at most a limit; see fleetsem fleet-limit --help.");
                return EXIT_USAGE;
        }
        if (cli_parse_name(argv[optind]) < 0)
                return EXIT_USAGE;
        snprintf(req.name, sizeof(req.name), "%s", argv[optind]);
        if (argc - optind == 2 && !streq(argv[optind + 1], "none") && cli_parse_slots(argv[optind + 1], &req.slots) < 0)
                return EXIT_USAGE;
        if (reason) {
                if (argc - optind == 1) {
                        log_error("--reason goes with setting or removing a limit.");
                        return EXIT_USAGE;
                }
                if (cli_parse_reason(reason) < 0)
                        return EXIT_USAGE;
                snprintf(req.reason, sizeof(req.reason), "%s", reason);
        }
        if (cli_agent(&ns, &agent_uid) != 0)
                return EXIT_USAGE;
        if (argc - optind == 1)
                return show(ns, agent_uid, argv[optind]);
        if (geteuid() != 0)
                log_notice("Only root may set or remove a fleet limit; the agent will refuse.");

        r = cli_one_request(ns, agent_uid, &req, "set the fleet limit", "LIMITED", &m);
        if (r != 0)
                return r;
        text_escape(message_get(&m, "was") ?: "none", was, sizeof(was));
        text_escape(message_get(&m, "granted") ?: "0", text, sizeof(text));
        if (req.slots > 0)
                printf("%s: fleet limit %" PRIu32 " (was %s); %s waiter(s) granted at once.\n", req.name, req.slots,
                       was, text);
        else
                printf("%s: fleet limit removed (was %s); %s waiter(s) granted at once.\n", req.name, was, text);
        return 0;
}
