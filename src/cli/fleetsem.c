/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
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
               "                  Show holders and waiters (all names, or the ones given)\n"
               "  acquire [--slots N] [--wait DURATION] [--skip] [NAME]\n"
               "                  From a systemd service's ExecStartPre=/ExecCondition=: wait\n"
               "                  for a slot and hand it to the service until it stops\n"
               "  release [NAME]  From ExecStopPost=: give the service's slot back now\n"
               "  limit UNIT SLOTS [--wait DURATION|--skip] | limit UNIT --remove\n"
               "                  Write (or remove) the drop-in that limits a service\n"
               "  metrics [--output FILE]\n"
               "                  Print the agent's metrics in the Prometheus text format\n\n"
               "Options common to all commands:\n"
               "  -h --help       Show help (fleetsem COMMAND --help for a command's)\n"
               "     --version    Show the version\n"
               "     --namespace=NS\n"
               "                  Talk to the agent on @NS/agent (default: $FLEETSEM_NAMESPACE\n"
               "                  or \"fleetsem\")\n\n"
               "Exit codes: 0 success (run: COMMAND's status), 1 skipped (acquire --skip),\n"
               "64 usage, 69 agent or Redis unavailable, 75 no slot within the wait,\n"
               "77 not permitted, 78 unit lacks the settings acquire needs.\n"
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
        char why[CLIENT_ERROR_TEXT_MAX];

        if (error == -ENOENT)
                log_error("No agent listens on @%s/agent. Is fleetsemd running (systemctl status fleetsem.socket)?", ns);
        else
                log_error("%s%s.", client_error_text(error, ns, why, sizeof(why)),
                          error == -EPERM ? "; refusing to talk to it" : "");
        return EXIT_UNAVAILABLE;
}

int cli_read_message(int fd, LineReader *lr, usec_t deadline, const char *what, const char *timeout_text, Message *m) {
        char *line;
        size_t len;
        int r;

        r = client_read_line(fd, lr, deadline, &line, &len);
        if (r == -ECONNRESET) {
                log_error("The agent closed the connection before the end of the %s.", what);
                return EXIT_UNAVAILABLE;
        }
        if (r == -ETIMEDOUT) {
                log_error("The agent did not send the whole %s within %s.", what, timeout_text);
                return EXIT_UNAVAILABLE;
        }
        if (r == -E2BIG || (r >= 0 && message_parse(line, len, PROTO_REPLY_MAX, m) < 0)) {
                log_error("Malformed %s from the agent.", what);
                return EXIT_UNAVAILABLE;
        }
        if (r < 0) {
                log_error_errno(r, "Failed to read the %s: %m", what);
                return EXIT_UNAVAILABLE;
        }
        if (streq(m->verb, "ERROR")) {
                char msg[TEXT_ESCAPE_SIZE(512)];

                log_error("%s", text_escape(message_get(m, "message") ?: "", msg, sizeof(msg)));
                return exit_code_for_error(message_get(m, "code") ?: "");
        }
        return 0;
}

int cli_parse_slots(const char *s, uint32_t *ret) {
        uint64_t v;

        if (parse_uint64(s, 1, SLOTS_MAX, &v) < 0)
                return log_error_errno(EINVAL, "Invalid slots \"%s\": expected a number from 1 to %u.", s, SLOTS_MAX);
        *ret = (uint32_t) v;
        return 0;
}

int cli_parse_wait(const char *s, usec_t *ret) {
        if (parse_duration(s, ret) < 0)
                return log_error_errno(EINVAL, "Invalid --wait \"%s\": expected a duration such as 30s, "
                                       "5min, \"1h 30min\", 500ms or infinity.", s);
        return 0;
}

int cli_parse_name(const char *s) {
        if (!name_is_valid(s))
                return log_error_errno(EINVAL, "Invalid name \"%s\": use 1-200 of A-Z a-z 0-9 _ . : @ -", s);
        return 0;
}

int cli_parse_namespace(const char *s, const char **ret) {
        if (!ident_is_valid(s))
                return log_error_errno(EINVAL, "Invalid --namespace \"%s\": use 1-64 of A-Z a-z 0-9 _ . : -", s);
        *ret = s;
        return 0;
}

FILE *atomic_file_open(const char *path, char *tmp, size_t tmp_size) {
        const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
        int fd, n;
        FILE *f;

        /* A name of its own beside path, so that two writers at once each
         * put a whole file in place; hidden, and not ending like path, so
         * that readers of a directory (systemd's *.conf, node_exporter's
         * *.prom) skip it. */
        n = snprintf(tmp, tmp_size, "%.*s.%s.XXXXXX", (int) (base - path), path, base);
        if (n < 0 || (size_t) n >= tmp_size) {
                log_error("Cannot write %s: path too long.", path);
                return NULL;
        }
        fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0) {
                log_error_errno(errno, "Cannot write %s: %m", tmp);
                return NULL;
        }
        (void) fchmod(fd, 0644);        /* whatever the umask */
        f = fdopen(fd, "w");
        if (!f) {
                log_error_errno(errno, "Cannot write %s: %m", tmp);
                close(fd);
                (void) unlink(tmp);
        }
        return f;
}

int atomic_file_commit(FILE *f, const char *tmp, const char *path) {
        const char *slash = strrchr(path, '/');
        char dir[PATH_MAX];
        int dfd;
        /* On disk before it has the name: after a crash, the old file or
         * the new one, never a short one. */
        bool ok = fflush(f) == 0 && fsync(fileno(f)) >= 0;

        if (fclose(f) != 0)
                ok = false;
        if (!ok || rename(tmp, path) < 0) {
                int r = log_error_errno(errno, "Cannot write %s: %m", path);

                (void) unlink(tmp);
                return r;
        }
        /* … and the rename too. */
        snprintf(dir, sizeof(dir), "%.*s", slash ? (int) (slash - path) + 1 : 1, slash ? path : ".");
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
                (void) fsync(dfd);
                close(dfd);
        }
        return 0;
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
        if (streq(argv[1], "metrics"))
                return verb_metrics(argc - 1, argv + 1);

        log_error("Unknown command \"%s\"; see fleetsem --help.", argv[1]);
        return EXIT_USAGE;
}
