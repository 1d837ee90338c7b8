/* SPDX-License-Identifier: MIT */
/* `fleetsem revoke LEASE...` and `fleetsem revoke --host HOST [NAME...]`:
 * root takes held slots back, fleet-wide, whoever holds them: each is free
 * once its holder stopped (when its lease runs out at the latest), or at once
 * with --now (a host known dead). A LEASE's name is found in the agent's
 * status; a host's leases the agent reads from the host's own index. The
 * agent checks that the caller is root. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "log.h"
#include "macro.h"
#include "status-fetch.h"

static void help(void) {
        printf("Usage: fleetsem revoke [--now] [--reason TEXT] [--name NAME] LEASE...\n"
               "       fleetsem revoke [--now] [--reason TEXT] --host HOST [NAME...]\n\n"
               "Takes held slots back, fleet-wide, whoever holds them (root only): those of\n"
               "the LEASEs given (\"fleetsem status\" lists them, as root), or every slot that\n"
               "HOST's leases hold, and its place of every lease of HOST that waits (of the\n"
               "NAMEs given, else of every name). The holder's agent hears it at once and\n"
               "treats the slot as lost (--on-lost; on-lost=stop units are stopped, login\n"
               "sessions ended). The slot goes to the next waiter, with a higher fencing\n"
               "token, once the job stopped, or at the latest when its lease runs out (a\n"
               "lease after its last renewal): never while both could run. A LEASE given\n"
               "that only waits is not revoked.\n\n"
               "  -H --host=HOST        Every lease of HOST, held or waiting\n"
               "     --now              Free the slots at once, without waiting for their\n"
               "                        holders: only for a host known to be dead. If it is\n"
               "                        alive, its job runs beside its successor until its\n"
               "                        agent hears of it\n"
               "  -N --name=NAME        The LEASEs are of NAME (else they are looked for\n"
               "                        among the 1000 names status lists)\n"
               "  -r --reason=TEXT      Why, for the journal and \"fleetsem status\" (up to 200\n"
               "                        bytes, one line)\n"
               "     --namespace=NS     Agent namespace (default: $FLEETSEM_NAMESPACE or fleetsem)\n"
               "  -h --help             Show this help\n\n"
               "Exit codes: 0 revoked (or HOST had no lease), 64 usage, 65 a LEASE holds no\n"
               "slot, 69 agent or Redis unavailable, 77 not root.\n");
}

/* The VERB (HOLDER, WAITER) line of lease. */
static const Entry *find_lease(const StatusOutput *out, const char *verb, const char *lease) {
        for (size_t i = 0; i < out->n; i++)
                if (streq(out->entries[i].m.verb, verb) && streq(status_get(&out->entries[i], "lease"), lease))
                        return &out->entries[i];
        return NULL;
}

/* Whether argv[i] was given before it, from argv[first] on. */
static bool given_before(char *argv[], int first, int i) {
        for (int k = first; k < i; k++)
                if (streq(argv[k], argv[i]))
                        return true;
        return false;
}

/* "free_in=MS" of a REVOKED reply, when above 0: what waits for the holder. */
static void free_in_say(const Message *m, const char *what) {
        const char *free_in = message_get(m, "free_in");
        uint64_t ms;

        if (free_in && parse_uint64(free_in, 1, UINT64_MAX, &ms) >= 0)
                printf("%s, in %" PRIu64 " ms at the latest (--now: at once).\n", what, ms);
}

/* REVOKE host= [name=]: every lease of the host; 0 or the exit code (said). */
static int revoke_host(const char *ns, uid_t agent_uid, const char *host, const char *name, const char *reason,
                       bool at_once) {
        Request req = { .verb = REQUEST_REVOKE, .revoke_now = at_once };
        char text[TEXT_ESCAPE_SIZE(PROTO_REPLY_MAX)];
        Message m;
        int r;

        snprintf(req.host, sizeof(req.host), "%s", host);
        snprintf(req.name, sizeof(req.name), "%s", name ?: "");
        snprintf(req.reason, sizeof(req.reason), "%s", reason ?: "");
        r = cli_one_request(ns, agent_uid, &req, "revoke", "REVOKED", &m);
        if (r != 0)
                return r;
        printf("Revoked %s held slot(s) and %s waiting lease(s) of %s%s%s; %s waiter(s) granted at once.\n",
               message_get(&m, "held") ?: "0", message_get(&m, "waiting") ?: "0", host, name ? " on " : "",
               name ? text_escape(name, text, sizeof(text)) : "", message_get(&m, "granted") ?: "0");
        free_in_say(&m, "The slots held are free once their jobs stopped");
        return 0;
}

/* REVOKE of one held lease; 0 or the exit code (said). */
static int revoke_one(const char *ns, uid_t agent_uid, const Entry *holder, const char *reason, bool at_once) {
        Request req = { .verb = REQUEST_REVOKE, .revoke_now = at_once };
        char host[TEXT_ESCAPE_SIZE(PROTO_REPLY_MAX)];
        Message m;
        int r;

        snprintf(req.name, sizeof(req.name), "%s", status_get(holder, "name"));
        snprintf(req.lease, sizeof(req.lease), "%s", status_get(holder, "lease"));
        snprintf(req.reason, sizeof(req.reason), "%s", reason ?: "");
        r = cli_one_request(ns, agent_uid, &req, "revoke", "REVOKED", &m);
        if (r != 0)
                return r;
        printf("Revoked %s of %s (held on %s, uid %s, token %s); %s waiter(s) granted at once.\n", req.lease, req.name,
               text_escape(message_get(&m, "host") ?: "?", host, sizeof(host)), message_get(&m, "uid") ?: "?",
               message_get(&m, "token") ?: "?", message_get(&m, "granted") ?: "0");
        free_in_say(&m, "Its slot is free once the job stopped");
        return 0;
}

int verb_revoke(int argc, char *argv[]) {
        enum { ARG_NOW = CLI_ARG_OWN };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "host", required_argument, NULL, 'H' },
                { "name", required_argument, NULL, 'N' },
                { "reason", required_argument, NULL, 'r' },
                CLI_COMMON_OPTIONS,
                { "now", no_argument, NULL, ARG_NOW },
                {}
        };
        const char *ns = NULL, *reason = NULL, *host = NULL, *name = NULL;
        _cleanup_(status_output_free) StatusOutput out = {};
        uid_t agent_uid;
        bool at_once = false;
        int c, code = 0;

        while ((c = cli_getopt(argc, argv, "hH:N:r:", options, &ns)) >= 0) {
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case 'H':
                        host = optarg;
                        break;
                case 'N':
                        name = optarg;
                        break;
                case 'r':
                        reason = optarg;
                        break;
                case ARG_NOW:
                        at_once = true;
                        break;
                default:
                        return EXIT_USAGE;
                }
        }
        if (host && !ident_is_valid(host)) {
                log_error("Invalid --host \"%s\": use 1-64 of A-Z a-z 0-9 _ . -", host);
                return EXIT_USAGE;
        }
        if (!host && optind >= argc) {
                log_error("Expected a LEASE, or --host HOST; see fleetsem revoke --help.");
                return EXIT_USAGE;
        }
        if (host && name) {
                log_error("--name goes with LEASEs; with --host, give the NAMEs after it.");
                return EXIT_USAGE;
        }
        if (name && cli_parse_name(name) < 0)
                return EXIT_USAGE;
        for (int i = optind; i < argc; i++)
                if (host ? cli_parse_name(argv[i]) < 0 : !lease_id_is_valid(argv[i])) {
                        if (!host)
                                log_error("Invalid lease id \"%s\": 32 lower-case hex digits.", argv[i]);
                        return EXIT_USAGE;
                }
        if (reason && cli_parse_reason(reason) < 0)
                return EXIT_USAGE;
        if (cli_agent(&ns, &agent_uid) != 0)
                return EXIT_USAGE;
        if (geteuid() != 0) {
                /* Others see only their own leases; the agent refuses them anyway. */
                log_error("Only root may revoke a slot.");
                return EXIT_NOPERM;
        }

        if (host) {
                if (optind >= argc)
                        return revoke_host(ns, agent_uid, host, NULL, reason, at_once);
                for (int i = optind; i < argc; i++)
                        if (!given_before(argv, optind, i))
                                code = MAX(code, revoke_host(ns, agent_uid, host, argv[i], reason, at_once));
                return code;
        }

        code = status_fetch_names(ns, agent_uid, (char *[]) { (char *) name }, name ? 1 : 0, &out);
        if (code != 0)
                return code;
        for (int i = optind; i < argc; i++) {
                const Entry *e = find_lease(&out, "HOLDER", argv[i]);

                if (given_before(argv, optind, i))
                        continue;
                if (!e) {
                        log_error("%s holds no slot%s.", argv[i],
                                  find_lease(&out, "WAITER", argv[i]) ? " (it waits; only held slots are revoked)" :
                                  name ? "" : " among the 1000 names status lists (give its name with --name)");
                        code = MAX(code, EXIT_DATAERR);
                        continue;
                }
                code = MAX(code, revoke_one(ns, agent_uid, e, reason, at_once));
        }
        return code;
}
