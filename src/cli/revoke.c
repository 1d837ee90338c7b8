/* SPDX-License-Identifier: MIT */
/* `fleetsem revoke LEASE...` and `fleetsem revoke --host HOST [NAME...]`:
 * root frees held slots now, fleet-wide, whoever holds them (a host known
 * dead, before its leases run out). The leases are found in the agent's
 * status; the agent revokes each one, checking that the caller is root. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "log.h"
#include "macro.h"
#include "status-fetch.h"

static void help(void) {
        printf("Usage: fleetsem revoke [--reason TEXT] LEASE...\n"
               "       fleetsem revoke [--reason TEXT] --host HOST [NAME...]\n\n"
               "Frees held slots now, fleet-wide, whoever holds them (root only): those of\n"
               "the LEASEs given (\"fleetsem status\" lists them, as root), or every slot that\n"
               "HOST's leases hold (of the NAMEs given, else of every name), as for a host\n"
               "known to be dead, before its leases run out. The next waiters are granted\n"
               "at once, with higher fencing tokens. A holder whose agent still reaches\n"
               "Redis learns it at that agent's next renewal (a third of the lease) and is\n"
               "treated as having lost its slot (--on-lost; on-lost=stop units are\n"
               "stopped). A holder on a host that cannot hear it runs on until it fences\n"
               "itself, beside its successor: fencing tokens are what protect a resource\n"
               "then. A lease that only waits is not revoked.\n\n"
               "  -H --host=HOST        Every slot held by HOST's leases\n"
               "  -r --reason=TEXT      Why, for the journal and \"fleetsem status\" (up to 200\n"
               "                        bytes, one line)\n"
               "     --namespace=NS     Agent namespace (default: $FLEETSEM_NAMESPACE or fleetsem)\n"
               "  -h --help             Show this help\n\n"
               "Exit codes: 0 revoked (or HOST held nothing), 64 usage, 65 a LEASE holds no\n"
               "slot, 69 agent or Redis unavailable, 77 not root.\n");
}

/* The HOLDER line of lease, or of the i-th holder on host after *from. */
static const Entry *find_holder(const StatusOutput *out, const char *lease, const char *host, size_t *from) {
        for (size_t i = *from; i < out->n; i++) {
                const Entry *e = &out->entries[i];

                if (!streq(e->m.verb, "HOLDER") || !message_get(&e->m, "lease"))
                        continue;
                if ((lease && streq(status_get(e, "lease"), lease)) || (host && streq(status_get(e, "host"), host))) {
                        *from = i + 1;
                        return e;
                }
        }
        return NULL;
}

static bool waits(const StatusOutput *out, const char *lease) {
        for (size_t i = 0; i < out->n; i++)
                if (streq(out->entries[i].m.verb, "WAITER") && streq(status_get(&out->entries[i], "lease"), lease))
                        return true;
        return false;
}

/* REVOKE of one held lease; 0 or the exit code (said). */
static int revoke_one(const char *ns, uid_t agent_uid, const Entry *holder, const char *reason) {
        Request req = { .verb = REQUEST_REVOKE };
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
        return 0;
}

int verb_revoke(int argc, char *argv[]) {
        enum { ARG_NAMESPACE = 0x100 };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "host", required_argument, NULL, 'H' },
                { "reason", required_argument, NULL, 'r' },
                { "namespace", required_argument, NULL, ARG_NAMESPACE },
                {}
        };
        const char *ns = NULL, *reason = NULL, *host = NULL;
        StatusOutput out = {};
        uid_t agent_uid;
        usec_t deadline;
        size_t from = 0, revoked = 0;
        int c, code = 0;

        while ((c = getopt_long(argc, argv, "hH:r:", options, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case 'H':
                        host = optarg;
                        break;
                case 'r':
                        reason = optarg;
                        break;
                case ARG_NAMESPACE:
                        ns = optarg;
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
        for (int i = optind; i < argc; i++)
                if (host ? cli_parse_name(argv[i]) < 0 : !lease_id_is_valid(argv[i])) {
                        if (!host)
                                log_error("Invalid lease id \"%s\": 32 lower-case hex digits.", argv[i]);
                        return EXIT_USAGE;
                }
        if (reason && cli_parse_reason(reason) < 0)
                return EXIT_USAGE;
        if (cli_parse_namespace(client_namespace(ns), &ns) < 0 || cli_agent_uid(&agent_uid) < 0)
                return EXIT_USAGE;
        if (geteuid() != 0) {
                /* Others see only their own leases; the agent refuses them anyway. */
                log_error("Only root may revoke a slot.");
                return EXIT_NOPERM;
        }

        deadline = now_usec(CLOCK_MONOTONIC) + STATUS_TIMEOUT;
        if (!host || optind >= argc)
                code = status_fetch(ns, agent_uid, NULL, deadline, &out);
        for (int i = optind; host && i < argc && code == 0; i++)
                code = status_fetch(ns, agent_uid, argv[i], deadline, &out);
        if (code != 0)
                goto finish;

        if (host) {
                for (const Entry *e; (e = find_holder(&out, NULL, host, &from)); revoked++) {
                        int r = revoke_one(ns, agent_uid, e, reason);

                        code = MAX(code, r);
                }
                if (revoked == 0)
                        printf("%s holds no slot%s.\n", host, optind < argc ? " of those names" : "");
                goto finish;
        }
        for (int i = optind; i < argc; i++) {
                const Entry *e;

                from = 0;
                e = find_holder(&out, argv[i], NULL, &from);
                if (!e) {
                        log_error("%s holds no slot%s.", argv[i],
                                  waits(&out, argv[i]) ? " (it waits; only held slots are revoked)" :
                                  " (\"fleetsem status\" lists the leases that hold)");
                        code = MAX(code, EXIT_DATAERR);
                        continue;
                }
                code = MAX(code, revoke_one(ns, agent_uid, e, reason));
        }
finish:
        status_output_free(&out);
        return code;
}
