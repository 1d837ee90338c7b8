/* SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "log.h"
#include "protocol.h"

static const char *log_ident = "fleetsem";
static log_sink_t journal_sink = NULL;   /* set by programs that link the journal */
static bool log_to_journal = false;
static bool stderr_level_prefix = false;   /* stderr is a journal stream: "<N>" tells the priority */
static int log_max_level = LOG_INFO;

/* Like systemd: use the native journal protocol only when our stderr is the
 * stream the journal gave us ($JOURNAL_STREAM names its device and inode). */
static bool stderr_is_journal(void) {
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;
        int n = 0;

        if (!e || sscanf(e, "%llu:%llu%n", &dev, &ino, &n) != 2 || e[n] != '\0')
                return false;
        if (fstat(STDERR_FILENO, &st) < 0)
                return false;
        return (unsigned long long) st.st_dev == dev && (unsigned long long) st.st_ino == ino;
}

void log_setup(const char *ident, LogTarget target, log_sink_t journal) {
        bool journal_stream = stderr_is_journal();

        log_ident = ident;
        journal_sink = journal;
        log_to_journal = journal && (target == LOG_TARGET_JOURNAL || (target == LOG_TARGET_AUTO && journal_stream));
        stderr_level_prefix = !log_to_journal && journal_stream;
}

const char *log_get_ident(void) {
        return log_ident;
}

void log_set_max_level(int level) {
        log_max_level = level;
}

int log_level_from_string(const char *s) {
        static const char *const names[] = {
                [LOG_EMERG] = "emerg", [LOG_ALERT] = "alert", [LOG_CRIT] = "crit",
                [LOG_ERR] = "err", [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice",
                [LOG_INFO] = "info", [LOG_DEBUG] = "debug",
        };

        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if (streq(s, names[i]))
                        return (int) i;
        if (streq(s, "error"))
                return LOG_ERR;
        return -EINVAL;
}

static void log_to_stderr(int level, const LogFields *f, const char *msg) {
        static const char *const prefix[] = {
                [LOG_EMERG] = "emergency: ", [LOG_ALERT] = "alert: ", [LOG_CRIT] = "critical: ",
                [LOG_ERR] = "error: ", [LOG_WARNING] = "warning: ",
        };
        const char *p = level >= 0 && level < (int) ELEMENTSOF(prefix) && prefix[level] ? prefix[level] : "";

        if (stderr_level_prefix)
                fprintf(stderr, "<%i>", level);
        if (f && f->name && f->action && f->lease)
                fprintf(stderr, "%s: %s%s [name=%s action=%s lease=%s token=%" PRIu64 " operator=%s reason=%s]\n",
                        log_ident, p, msg, f->name, f->action, f->lease, f->token, f->operator ?: "", f->reason ?: "");
        else if (f && f->name && f->action)
                fprintf(stderr, "%s: %s%s [name=%s action=%s operator=%s reason=%s]\n", log_ident, p, msg, f->name,
                        f->action, f->operator ?: "", f->reason ?: "");
        else if (f && f->name)
                fprintf(stderr, "%s: %s%s [name=%s%s%s]\n", log_ident, p, msg, f->name,
                        f->lease ? " lease=" : "", f->lease ?: "");
        else
                fprintf(stderr, "%s: %s%s\n", log_ident, p, msg);
}

/* Room for a field as long as a name or a holder, escaped. */
#define FIELD_ESCAPED_MAX TEXT_ESCAPE_SIZE(256)

static const char *escape_field(const char *s, char *buf) {
        return s ? text_escape(s, buf, FIELD_ESCAPED_MAX) : NULL;
}

int log_internal(int level, int error, const LogFields *fields, const char *format, ...) {
        int saved = errno;
        char raw[2048], msg[TEXT_ESCAPE_SIZE(sizeof(raw))];
        char name[FIELD_ESCAPED_MAX], lease[FIELD_ESCAPED_MAX], holder[FIELD_ESCAPED_MAX];
        char operator[FIELD_ESCAPED_MAX], reason[FIELD_ESCAPED_MAX];
        LogFields escaped;
        va_list ap;

        if (error < 0)
                error = -error;
        if (level > log_max_level)
                return -error;

        errno = error;
        va_start(ap, format);
        vsnprintf(raw, sizeof(raw), format, ap);
        va_end(ap);

        /* Messages and fields carry what clients, NSS and Redis chose (a
         * comm, a unit, a user name, an error): the terminal and the
         * journal get them as text, control characters and invalid UTF-8
         * as \xNN, here for every sink. */
        text_escape(raw, msg, sizeof(msg));
        if (fields) {
                escaped = (LogFields) {
                        .name = escape_field(fields->name, name),
                        .lease = escape_field(fields->lease, lease),
                        .token = fields->token,
                        .holder = escape_field(fields->holder, holder),
                        .action = fields->action,
                        .operator = escape_field(fields->operator, operator),
                        .reason = escape_field(fields->reason, reason),
                };
                fields = &escaped;
        }

        if (log_to_journal)
                journal_sink(level, fields, msg);
        else
                log_to_stderr(level, fields, msg);

        errno = saved;
        return -error;
}
