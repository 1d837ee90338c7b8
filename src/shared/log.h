/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>
#include <syslog.h>

#include "macro.h"

typedef enum LogTarget {
        LOG_TARGET_AUTO,        /* journal when stderr is connected to it, stderr otherwise */
        LOG_TARGET_JOURNAL,
        LOG_TARGET_STDERR,
} LogTarget;

/* Optional structured fields attached to a message (journal fields FLEETSEM_*). */
typedef struct LogFields {
        const char *name;
        const char *lease;
        uint64_t token;         /* 0: none */
        const char *holder;
        /* An operator's action (drain, undrain): what, by whom, why. */
        const char *action;
        const char *operator;   /* "USER (uid N) on HOST" */
        const char *reason;
} LogFields;

/* Writes one message to the journal; see log-journal.h. Kept apart so that
 * clients need not load libsystemd to log to stderr. It gets the message
 * and fields escaped already (see log_internal()). */
typedef void (*log_sink_t)(int level, const LogFields *fields, const char *msg);

void log_setup(const char *ident, LogTarget target, log_sink_t journal);
const char *log_get_ident(void);
void log_set_max_level(int level);
int log_level_from_string(const char *s);

/* Logs and returns -abs(error) (or 0 when error is 0), so callers can write
 * "return log_error_errno(r, "…: %m");". %m expands to strerror(error).
 * The message and the fields reach stderr and the journal through
 * text_escape(): a control character, DEL or a byte of invalid UTF-8 in a
 * value a client or Redis chose comes out as \xNN (\n, \t, \r, \\ for
 * those), printable UTF-8 as it is. Pass values raw, never escaped. */
int log_internal(int level, int error, const LogFields *fields, const char *format, ...) _printf_(4, 5);

#define log_full_errno(level, error, ...) log_internal((level), (error), NULL, __VA_ARGS__)
#define log_full(level, ...) (void) log_internal((level), 0, NULL, __VA_ARGS__)
#define log_debug(...) log_full(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_full(LOG_INFO, __VA_ARGS__)
#define log_notice(...) log_full(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) log_full(LOG_WARNING, __VA_ARGS__)
#define log_error(...) log_full(LOG_ERR, __VA_ARGS__)
#define log_debug_errno(e, ...) log_full_errno(LOG_DEBUG, (e), __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, (e), __VA_ARGS__)
#define log_error_errno(e, ...) log_full_errno(LOG_ERR, (e), __VA_ARGS__)
#define log_fields(level, fields, ...) (void) log_internal((level), 0, (fields), __VA_ARGS__)
