/* SPDX-License-Identifier: MIT */
#pragma once

/* A budget of log lines per uid: what one user's requests make the agent
 * say. Past the budget of a window, lines of that uid are counted, not
 * written, and one line per window says how many were suppressed. Root is
 * never limited, and each uid only by its own lines: one user's noise
 * never silences another's grants, releases or losses. */

#include <stdbool.h>
#include <sys/types.h>

#include "log.h"
#include "time-util.h"

#define LOG_LIMIT_BURST 20
#define LOG_LIMIT_INTERVAL USEC_PER_MINUTE

/* Whether a line caused by uid may be written now. */
bool log_limit_pass(uid_t uid, usec_t now);
/* Says how many lines were suppressed in windows that ended, and forgets
 * quiet uids. Call it now and then (a timer). */
void log_limit_flush(usec_t now);
void log_limit_done(void);

#define log_uid(uid, now, level, ...)                                   \
        do {                                                            \
                if (log_limit_pass((uid), (now)))                       \
                        log_full((level), __VA_ARGS__);                 \
        } while (0)
#define log_uid_fields(uid, now, level, fields, ...)                    \
        do {                                                            \
                if (log_limit_pass((uid), (now)))                       \
                        log_fields((level), (fields), __VA_ARGS__);     \
        } while (0)
