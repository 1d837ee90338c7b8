/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "client.h"
#include "log.h"
#include "macro.h"

static void help(void) {
        printf("Usage: fleetsem COMMAND [OPTIONS]\n\n"
               "Caps how many copies of something run at once across a fleet of hosts.\n\n"
               "Commands:\n"
               "  run [--slots N] [--wait DURATION|--no-wait] NAME -- COMMAND [ARG...]\n"
               "                  Run COMMAND while holding one of N fleet-wide slots of NAME\n"
               "  status [NAME...] [--json]\n"
               "                  Show holders and waiters (all names, or the ones given)\n\n"
               "Options common to all commands:\n"
               "  -h --help       Show help (fleetsem COMMAND --help for a command's)\n"
               "     --version    Show the version\n"
               "     --namespace=NS\n"
               "                  Talk to the agent on @NS/agent (default: $FLEETSEM_NAMESPACE\n"
               "                  or \"fleetsem\")\n\n"
               "Exit codes: 0 success (run: COMMAND's status), 64 usage, 69 agent or Redis\n"
               "unavailable, 75 no slot within the wait, 77 not permitted.\n"
               "See fleetsem(1).\n");
}

int cli_agent_uid(uid_t *ret) {
        const char *user = getenv("FLEETSEM_AGENT_USER");
        struct passwd *pw;

        *ret = 0;
        if (!user || !user[0])
                return 0;
        pw = getpwnam(user);
        if (!pw)
                return log_error_errno(ENOENT, "FLEETSEM_AGENT_USER names an unknown user \"%s\".", user);
        *ret = pw->pw_uid;
        return 0;
}

int cli_request_failed(const char *ns, int error) {
        if (error == -ENOENT)
                log_error("No agent listens on @%s/agent. Is fleetsemd running (systemctl status fleetsem.socket)?", ns);
        else if (error == -EPERM)
                log_error("The process on @%s/agent is not a trusted agent (not root); refusing to talk to it.", ns);
        else
                log_error_errno(error, "Failed to talk to the agent on @%s/agent: %m", ns);
        return EXIT_UNAVAILABLE;
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

        log_error("Unknown command \"%s\"; see fleetsem --help.", argv[1]);
        return EXIT_USAGE;
}
