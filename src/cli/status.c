/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "client.h"
#include "log.h"
#include "macro.h"
#include "status-fetch.h"

static void help(void) {
        printf("Usage: fleetsem status [OPTIONS] [NAME...]\n\n"
               "Shows, for every name in use (or the ones given), the slots held with\n"
               "each holder (host, pid, user, unit or session, token, since, lease expiry)\n"
               "and the waiters in line, as Redis has them now: the first 100 of each\n"
               "at most, then how many more there are.\n\n"
               "  -j --json             JSON: {\"now_ms\", \"redis\", \"grace\", \"evicts\", \"refusing\",\n"
               "                        \"names\":[{\"name\",\n"
               "                        \"held\", \"waiting\", \"holders\", \"waiters\", \"holders_total\",\n"
               "                        \"waiters_total\", \"truncated\"}]}; see fleetsem(1)\n"
               "  -W --watch            On a terminal: show it again whenever this host's agent\n"
               "                        sees something change (its own jobs' slots, a wake\n"
               "                        message from Redis, Redis going or coming back), and\n"
               "                        every 10 s for what it cannot see; q or Ctrl-C quits\n"
               "     --namespace=NS     Agent namespace (default: $FLEETSEM_NAMESPACE or fleetsem)\n"
               "  -h --help             Show this help\n");
}

/* A JSON string that any parser takes, whatever bytes Redis or another
 * host stored: UTF-8 as it is, but control characters (C0, DEL, C1) and
 * the line and paragraph separators as \u00XX or \u20XX, and each byte
 * that is not part of valid UTF-8 as \ufffd (U+FFFD). */
static void json_string(const char *s) {
        putchar('"');
        while (*s) {
                uint32_t cp;
                size_t n = utf8_decode(s, &cp);

                if (n == 0) {
                        fputs("\\ufffd", stdout);
                        s++;
                        continue;
                }
                if (cp == '"' || cp == '\\')
                        printf("\\%c", (char) cp);
                else if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029)
                        printf("\\u%04" PRIx32, cp);
                else
                        fwrite(s, 1, n, stdout);
                s += n;
        }
        putchar('"');
}

/* An integer as JSON writes it: -?(0|[1-9][0-9]*), at most 20 digits. */
static bool json_is_integer(const char *s) {
        size_t digits;

        if (*s == '-')
                s++;
        digits = strspn(s, "0123456789");
        return digits > 0 && digits <= 20 && s[digits] == '\0' && (s[0] != '0' || digits == 1);
}

/* A value from the agent (from Redis, from other hosts): a number only
 * when it is one, a string otherwise. */
static void json_field(const char *key, const char *value, bool number, bool *first) {
        printf("%s\"%s\":", *first ? "" : ",", key);
        *first = false;
        if (!value[0])
                printf("null");
        else if (number && json_is_integer(value))
                printf("%s", value);
        else
                json_string(value);
}

static const char *const person_keys[] = { "host", "pid", "uid", "user", "slots", "weight", "comm", "unit", "session",
                                           "hold", "reason" };
static const bool person_numeric[] = { false, true, true, false, true, true, false, false, false, false, false };

static void json_entry(const Entry *e) {
        bool first = true;

        putchar('{');
        json_field("lease", status_get(e, "lease"), false, &first);
        if (streq(e->m.verb, "HOLDER")) {
                json_field("token", status_get(e, "token"), true, &first);
                json_field("since_ms", status_get(e, "since"), true, &first);
                json_field("expires_in_ms", status_get(e, "expires_in"), true, &first);
        } else
                json_field("position", status_get(e, "position"), true, &first);
        for (size_t i = 0; i < ELEMENTSOF(person_keys); i++)
                json_field(person_keys[i], status_get(e, person_keys[i]), person_numeric[i], &first);
        putchar('}');
}

/* The entries of one kind (HOLDER or WAITER) that follow a NAME entry. */
static void json_entries(const StatusOutput *out, size_t name_index, const char *verb) {
        bool first = true;

        putchar('[');
        for (size_t j = name_index + 1; j < out->n && !streq(out->entries[j].m.verb, "NAME"); j++)
                if (streq(out->entries[j].m.verb, verb)) {
                        printf("%s", first ? "" : ",");
                        json_entry(&out->entries[j]);
                        first = false;
                }
        putchar(']');
}

static const char *clock_time(const char *ms, char *buf, size_t size) {
        uint64_t v;
        time_t t;
        struct tm tm;

        if (parse_uint64(ms, 1, UINT64_MAX, &v) < 0)
                return "-";
        t = (time_t) (v / 1000);
        if (!localtime_r(&t, &tm) || strftime(buf, size, "%H:%M:%S", &tm) == 0)
                return "-";
        return buf;
}

static const char *seconds(const char *ms, char *buf, size_t size) {
        uint64_t v;

        if (parse_uint64(ms, 0, UINT64_MAX, &v) < 0)
                return "-";
        snprintf(buf, size, "%" PRIu64 ".%" PRIu64 "s", v / 1000, v % 1000 / 100);
        return buf;
}

/* Which Redis answered, last: under Sentinel, the master and since when. */
static void print_redis(const StatusOutput *out) {
        char buf[TEXT_ESCAPE_SIZE(sizeof(out->redis))], since[48] = "";

        if (!out->redis[0])
                return;
        if (out->master_since_ms > 0) {
                time_t t = (time_t) (out->master_since_ms / 1000);
                struct tm tm;

                if (localtime_r(&t, &tm))
                        strftime(since, sizeof(since), ", master since %Y-%m-%d %H:%M:%S", &tm);
        }
        printf("Redis: %s%s\n", text_escape(out->redis, buf, sizeof(buf)), since);
        if (out->grace_ms > 0) {
                char d[FORMAT_DURATION_MAX], until[32], ms[32];

                format_duration(d, sizeof(d), out->grace_ms * USEC_PER_MSEC);
                /* Redis' clock comes with the names' counts: without a
                 * name, no time of day can be given. */
                snprintf(ms, sizeof(ms), "%" PRIu64, (uint64_t) out->now_ms + out->grace_ms);
                if (out->now_ms > 0)
                        printf("No slot is granted for another %s (until %s): %s.\n", d,
                               clock_time(ms, until, sizeof(until)), out->grace_why);
                else
                        printf("No slot is granted for another %s: %s.\n", d, out->grace_why);
        }
        if (out->refusing[0]) {
                char text[TEXT_ESCAPE_SIZE(sizeof(out->refusing))];

                printf("No slot is granted: %s.\n", text_escape(out->refusing, text, sizeof(text)));
        }
}

/* ,"KEY":{"FIELD":VALUE,"message":MESSAGE}, or null where VALUE is "". */
static void json_refusal(const char *key, const char *field, const char *value, const char *message) {
        printf(",\"%s\":", key);
        if (!value[0]) {
                printf("null");
                return;
        }
        printf("{\"%s\":", field);
        json_string(value);
        printf(",\"message\":");
        json_string(message);
        printf("}");
}

static void print_json(const StatusOutput *out) {
        bool first_name = true;

        printf("{\"now_ms\":%lld,\"redis\":", out->now_ms);
        if (out->redis[0])
                json_string(out->redis);
        else
                printf("null");
        if (out->master_since_ms > 0)
                printf(",\"master_since_ms\":%" PRIu64, out->master_since_ms);
        printf(",\"grace\":");
        if (out->grace_ms > 0) {
                printf("{\"remaining_ms\":%" PRIu64 ",\"until_ms\":", out->grace_ms);
                if (out->now_ms > 0)
                        printf("%" PRIu64, (uint64_t) out->now_ms + out->grace_ms);
                else
                        printf("null");
                printf(",\"reason\":");
                json_string(out->grace_why);
                printf("}");
        } else
                printf("null");
        /* A Redis that may evict; and why nothing new is granted. */
        json_refusal("evicts", "policy", out->evicts, out->refusing);
        json_refusal("refusing", "state", out->refused, out->refusing);
        printf(",\"names\":[");
        for (size_t i = 0; i < out->n; i++) {
                const Entry *e = &out->entries[i];
                bool first = true;

                if (!streq(e->m.verb, "NAME"))
                        continue;
                printf("%s{", first_name ? "" : ",");
                first_name = false;
                json_field("name", status_get(e, "name"), false, &first);
                json_field("held", status_get(e, "held"), true, &first);
                json_field("waiting", status_get(e, "waiting"), true, &first);
                if (message_get(&e->m, "limit"))        /* the limit in force, when the agent says it */
                        json_field("limit", status_get(e, "limit"), true, &first);
                if (message_get(&e->m, "fleet_limit")) {        /* set with fleetsem fleet-limit */
                        json_field("fleet_limit", status_get(e, "fleet_limit"), true, &first);
                        json_field("fleet_limit_set", status_get(e, "fleet_limit_set"), false, &first);
                }
                if (message_get(&e->m, "drained"))      /* "by WHO since WHEN: REASON" */
                        json_field("drained", status_get(e, "drained"), false, &first);
                if (message_get(&e->m, "last_action"))  /* "ACTION by WHO at WHEN[: REASON]" */
                        json_field("last_action", status_get(e, "last_action"), false, &first);
                printf(",\"holders\":");
                json_entries(out, i, "HOLDER");
                printf(",\"waiters\":");
                json_entries(out, i, "WAITER");
                /* The totals: the lists hold a page of them at most. */
                if (message_get(&e->m, "holders"))
                        json_field("holders_total", status_get(e, "holders"), true, &first);
                json_field("waiters_total", status_get(e, "waiting"), true, &first);
                printf(",\"truncated\":%s}",
                       message_get(&e->m, "more_holders") || message_get(&e->m, "more_waiting") ? "true" : "false");
        }
        printf("]}\n");
}

#define COLUMNS 10

/* The columns text escaped for the terminal takes (one per character:
 * escapes are ASCII, and printable UTF-8 is taken as one wide). */
static size_t text_columns(const char *escaped) {
        size_t w = 0;

        for (const char *s = escaped; *s; w++) {
                uint32_t cp;
                size_t n = utf8_decode(s, &cp);

                s += n ?: 1;
        }
        return w;
}

static size_t cell_width(const char *value) {
        char buf[TEXT_ESCAPE_SIZE(PROTO_REPLY_MAX)];

        return text_columns(text_escape(value, buf, sizeof(buf)));
}

/* One row: each value escaped, padded to its column's width, the last
 * one not. */
static void print_row(const char *const cells[static COLUMNS], const size_t widths[static COLUMNS]) {
        char buf[TEXT_ESCAPE_SIZE(PROTO_REPLY_MAX)];

        printf(" ");
        for (size_t i = 0; i < COLUMNS; i++) {
                printf(" %s", text_escape(cells[i], buf, sizeof(buf)));
                if (i < COLUMNS - 1)
                        for (size_t w = text_columns(buf); w < widths[i]; w++)
                                putchar(' ');
        }
        putchar('\n');
}

static const char *const header[COLUMNS] = { "STATE", "TOKEN", "HOST", "PID", "USER", "LIMIT", "UNIT/SESSION",
                                             "SINCE", "EXPIRES", "LEASE" };

/* The cells of a HOLDER or WAITER entry; t1 and t2 hold those made here. */
static void entry_cells(const Entry *e, char t1[static 32], char t2[static 32], char t3[static 32],
                        const char *cells[static COLUMNS]) {
        const char *where = status_get(e, "unit")[0] ? status_get(e, "unit") : status_get(e, "session")[0] ? status_get(e, "session") : status_get(e, "comm");
        bool held = streq(e->m.verb, "HOLDER");

        if (!held)
                snprintf(t1, 32, "#%.16s", status_get(e, "position"));
        cells[0] = held ? "held" : t1;
        cells[1] = held ? status_get(e, "token") : "-";
        cells[2] = status_get(e, "host");
        cells[3] = status_get(e, "pid");
        cells[4] = status_get(e, "user");
        /* 0: it asked for no number, the fleet limit's caller; " wK": it
         * takes K units of the limit */
        cells[5] = streq(status_get(e, "slots"), "0") ? "fleet" : status_get(e, "slots");
        if (status_get(e, "weight")[0] && !streq(status_get(e, "weight"), "1")) {
                snprintf(t3, 32, "%.12s w%.12s", cells[5], status_get(e, "weight"));
                cells[5] = t3;
        }
        cells[6] = where;
        /* A slot the host holds itself (fleetsem reboot): no process
         * holds it; why it does. */
        if (streq(status_get(e, "hold"), "host")) {
                cells[3] = "-";         /* the pid that asked is long gone */
                cells[4] = "(host)";
                cells[6] = status_get(e, "reason")[0] ? status_get(e, "reason") : "-";
        }
        cells[7] = held ? clock_time(status_get(e, "since"), t1, 32) : "-";
        cells[8] = held ? seconds(status_get(e, "expires_in"), t2, 32) : "-";
        cells[9] = status_get(e, "lease");
}

/* A name's table: its holders and waiters (entries first to end), each
 * column as wide as its widest value. */
static void print_name_table(const StatusOutput *out, size_t first, size_t end) {
        size_t widths[COLUMNS];
        const char *cells[COLUMNS];
        char t1[32], t2[32], t3[32];

        for (size_t c = 0; c < COLUMNS; c++)
                widths[c] = cell_width(header[c]);
        for (size_t i = first; i < end; i++) {
                entry_cells(&out->entries[i], t1, t2, t3, cells);
                for (size_t c = 0; c < COLUMNS; c++)
                        widths[c] = MAX(widths[c], cell_width(cells[c]));
        }
        print_row(header, widths);
        for (size_t i = first; i < end; i++) {
                entry_cells(&out->entries[i], t1, t2, t3, cells);
                print_row(cells, widths);
        }
}

static void print_table(const StatusOutput *out) {
        bool any = false;

        for (size_t i = 0; i < out->n; i++) {
                const Entry *e = &out->entries[i];
                char name[TEXT_ESCAPE_SIZE(PROTO_REPLY_MAX)], held[TEXT_ESCAPE_SIZE(PROTO_REPLY_MAX)],
                        waiting[TEXT_ESCAPE_SIZE(PROTO_REPLY_MAX)], limit[TEXT_ESCAPE_SIZE(PROTO_REPLY_MAX)],
                        drained[TEXT_ESCAPE_SIZE(PROTO_REPLY_MAX)], last[TEXT_ESCAPE_SIZE(PROTO_REPLY_MAX)],
                        cap[TEXT_ESCAPE_SIZE(PROTO_REPLY_MAX)], cap_set[TEXT_ESCAPE_SIZE(PROTO_REPLY_MAX)];
                size_t end = i + 1;

                if (!streq(e->m.verb, "NAME"))
                        continue;
                while (end < out->n && !streq(out->entries[end].m.verb, "NAME"))
                        end++;
                printf("%s%s: %s held, %s waiting", any ? "\n" : "", text_escape(status_get(e, "name"), name, sizeof(name)),
                       text_escape(status_get(e, "held"), held, sizeof(held)),
                       text_escape(status_get(e, "waiting"), waiting, sizeof(waiting)));
                if (message_get(&e->m, "limit"))        /* the limit in force, when the agent says it */
                        printf(", limit %s", text_escape(status_get(e, "limit"), limit, sizeof(limit)));
                if (message_get(&e->m, "drained"))
                        printf("; DRAINED %s", text_escape(status_get(e, "drained"), drained, sizeof(drained)));
                putchar('\n');
                if (message_get(&e->m, "fleet_limit"))
                        printf("  Fleet limit: %s, set %s\n", text_escape(status_get(e, "fleet_limit"), cap, sizeof(cap)),
                               text_escape(status_get(e, "fleet_limit_set"), cap_set, sizeof(cap_set)));
                if (message_get(&e->m, "last_action"))
                        printf("  Last action: %s\n", text_escape(status_get(e, "last_action"), last, sizeof(last)));
                print_name_table(out, i + 1, end);
                /* The agent lists a page of each at most. */
                if (message_get(&e->m, "more_holders"))
                        printf("  … and %s more holders\n", text_escape(status_get(e, "more_holders"), held, sizeof(held)));
                if (message_get(&e->m, "more_waiting"))
                        printf("  … and %s more waiting\n", text_escape(status_get(e, "more_waiting"), waiting, sizeof(waiting)));
                any = true;
                i = end - 1;
        }
        if (!any)
                printf("No slots held or waited for.\n");
}

/* ---- --watch -------------------------------------------------------------------- */

#define WATCH_REFRESH (10 * USEC_PER_SEC)       /* what the agent cannot see: a new holder on another host */

static volatile sig_atomic_t watch_quit;

static void on_quit_signal(int sig) {
        (void) sig;
        watch_quit = 1;
}

/* STATUS of the names (all: n_names 0), drawn over the screen. */
static int watch_draw(const char *ns, uid_t agent_uid, char **names, int n_names) {
        StatusOutput out = {};
        char when[32];
        time_t t = time(NULL);
        struct tm tm;
        int code = status_fetch_names(ns, agent_uid, names, n_names, &out);

        if (code == 0) {
                printf("\033[H\033[2J");
                print_table(&out);
                print_redis(&out);
                if (!localtime_r(&t, &tm) || strftime(when, sizeof(when), "%H:%M:%S", &tm) == 0)
                        when[0] = '\0';
                printf("\n(%s; drawn again on every change this host's agent sees; q or Ctrl-C quits)\n", when);
                fflush(stdout);
        }
        status_output_free(&out);
        return code;
}

/* A WATCH connection to the agent into *fd (closing the one before): 0 or
 * the exit code (said). */
static int watch_connect(const char *ns, uid_t agent_uid, int *fd, LineReader *lr) {
        Request req = { .verb = REQUEST_WATCH };
        Message m;
        int r;

        *fd = safe_close(*fd);
        r = client_send_request(ns, agent_uid, STATUS_TIMEOUT, &req, fd);
        if (r < 0)
                return cli_request_failed(ns, r);
        line_reader_init(lr, PROTO_REPLY_MAX);
        r = cli_read_message(*fd, lr, now_usec(CLOCK_MONOTONIC) + STATUS_TIMEOUT, "watch", STATUS_TIMEOUT_TEXT, &m);
        if (r != 0)
                return r;
        if (!streq(m.verb, "WATCHING")) {
                log_error("Unexpected reply from the agent (an agent older than this command?).");
                return EXIT_UNAVAILABLE;
        }
        return 0;
}

/* --watch: a WATCH connection to the agent, whose CHANGED lines redraw
 * (made again once if the agent closes it: a terminal suspended for long
 * reads nothing, and the agent drops readers that slow); the terminal in
 * non-canonical mode for q, as it was again at the end. */
static int watch(const char *ns, uid_t agent_uid, char **names, int n_names) {
        _cleanup_close_ int fd = -EBADF;
        struct sigaction sa = { .sa_handler = on_quit_signal };
        static const int quit[] = { SIGINT, SIGTERM, SIGHUP };
        sigset_t quit_signals, saved_mask, waiting_mask;
        struct termios saved, raw;
        bool tty = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0;
        usec_t next = 0;
        LineReader lr;
        int r, code = 0;

        if (!isatty(STDOUT_FILENO)) {
                log_error("--watch needs a terminal; without it, run fleetsem status again when needed.");
                return EXIT_USAGE;
        }
        code = watch_connect(ns, agent_uid, &fd, &lr);
        if (code != 0)
                return code;
        /* The quit signals come in only while it waits (ppoll()): one
         * between the look at watch_quit and the wait would wait out a
         * whole refresh. */
        sigemptyset(&quit_signals);
        for (size_t i = 0; i < ELEMENTSOF(quit); i++)
                sigaddset(&quit_signals, quit[i]);
        (void) sigprocmask(SIG_BLOCK, &quit_signals, &saved_mask);
        waiting_mask = saved_mask;
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < ELEMENTSOF(quit); i++) {
                sigdelset(&waiting_mask, quit[i]);
                (void) sigaction(quit[i], &sa, NULL);
        }
        if (tty) {
                raw = saved;
                raw.c_lflag &= ~(tcflag_t) (ICANON | ECHO);
                raw.c_cc[VMIN] = 1;
                raw.c_cc[VTIME] = 0;
                (void) tcsetattr(STDIN_FILENO, TCSANOW, &raw);
        }

        while (!watch_quit) {
                struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = tty ? STDIN_FILENO : -1, .events = POLLIN } };
                usec_t now = now_usec(CLOCK_MONOTONIC);

                if (now >= next) {
                        code = watch_draw(ns, agent_uid, names, n_names);
                        if (code != 0)
                                break;
                        next = now + WATCH_REFRESH;
                        continue;
                }
                r = ppoll(p, 2, &(struct timespec) { .tv_sec = (time_t) ((next - now) / USEC_PER_SEC),
                                                     .tv_nsec = (long) ((next - now) % USEC_PER_SEC * 1000) },
                          &waiting_mask);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0) {
                        log_error_errno(errno, "poll() failed: %m");
                        code = EXIT_SOFTWARE;
                        break;
                }
                if (p[1].revents & POLLIN) {
                        char ch;

                        if (read(STDIN_FILENO, &ch, 1) == 1 && (ch == 'q' || ch == 'Q'))
                                break;
                }
                if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
                        /* Every CHANGED that came: one redraw for them all. */
                        r = client_read_line(fd, &lr, now_usec(CLOCK_MONOTONIC) + STATUS_TIMEOUT, &(char *) { NULL },
                                             &(size_t) { 0 });
                        if (r < 0 && r != -ETIMEDOUT) {
                                code = watch_connect(ns, agent_uid, &fd, &lr);
                                if (code != 0)
                                        break;
                        }
                        next = 0;
                }
        }
        if (tty)
                (void) tcsetattr(STDIN_FILENO, TCSANOW, &saved);
        (void) sigprocmask(SIG_SETMASK, &saved_mask, NULL);
        return code;
}

int verb_status(int argc, char *argv[]) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "json", no_argument, NULL, 'j' },
                { "watch", no_argument, NULL, 'W' },
                CLI_COMMON_OPTIONS,
                {}
        };
        StatusOutput out = {};
        const char *ns = NULL;
        bool json = false, watching = false;
        uid_t agent_uid;
        int c, code = 0;

        while ((c = cli_getopt(argc, argv, "hjW", options, &ns)) >= 0) {
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case 'j':
                        json = true;
                        break;
                case 'W':
                        watching = true;
                        break;
                default:
                        return EXIT_USAGE;
                }
        }
        for (int i = optind; i < argc; i++)
                if (cli_parse_name(argv[i]) < 0)
                        return EXIT_USAGE;
        if (cli_agent(&ns, &agent_uid) != 0)
                return EXIT_USAGE;
        if (watching && json) {
                log_error("--watch and --json do not go together.");
                return EXIT_USAGE;
        }
        if (watching)
                return watch(ns, agent_uid, argv + optind, argc - optind);

        code = status_fetch_names(ns, agent_uid, argv + optind, argc - optind, &out);

        if (code == 0) {
                if (json)
                        print_json(&out);
                else {
                        print_table(&out);
                        print_redis(&out);
                }
        }
        status_output_free(&out);
        return code;
}
