/* SPDX-License-Identifier: MIT */
/* The per-uid log budget on a clock the test sets: a burst, the count of
 * what it held back once the window is over, root never held back, one
 * uid's noise never another's. (tests/security-log-flood.sh drives the
 * same through a running agent, with real minutes.) */
#include <stdio.h>
#include <string.h>

#include "log-limit.h"
#include "tap.h"

static char last[256];
static unsigned lines;

static void sink(int level, const LogFields *fields, const char *msg) {
        (void) level;
        (void) fields;
        snprintf(last, sizeof(last), "%s", msg);
        lines++;
}

/* How many of n lines caused by uid at now the budget lets through. */
static unsigned pass_n(uid_t uid, usec_t now, unsigned n) {
        unsigned k = 0;

        for (unsigned i = 0; i < n; i++)
                k += log_limit_pass(uid, now);
        return k;
}

int main(void) {
        const usec_t t0 = 1000 * USEC_PER_SEC;

        log_setup("test-log-limit", LOG_TARGET_JOURNAL, sink);

        CHECK_INT(pass_n(65534, t0, 2000), LOG_LIMIT_BURST, "a burst of 2000 lines: the first 20 pass");
        CHECK_INT(pass_n(0, t0, 500), 500, "root is never held back");
        CHECK_INT(pass_n(1000, t0, 5), 5, "another uid has a budget of its own");
        CHECK_INT(pass_n(65534, t0 + LOG_LIMIT_INTERVAL - 1, 1), 0, "still held back a microsecond before the window ends");

        lines = 0;
        log_limit_flush(t0 + LOG_LIMIT_INTERVAL - 1);
        CHECK_INT(lines, 0, "nothing reported before the window ends");
        log_limit_flush(t0 + LOG_LIMIT_INTERVAL);
        CHECK_INT(lines, 1, "one line once the window is over");
        CHECK(strstr(last, "Suppressed 1981 message(s) caused by uid 65534") != NULL,
              "it counts the 1981 lines held back (%s)", last);

        /* The flush forgot both uids (their windows are over): a new
         * window starts with a full budget, and nothing is counted twice. */
        lines = 0;
        CHECK_INT(pass_n(65534, t0 + 2 * LOG_LIMIT_INTERVAL, 25), LOG_LIMIT_BURST, "a new window, a new budget of 20");
        log_limit_flush(t0 + 2 * LOG_LIMIT_INTERVAL + LOG_LIMIT_INTERVAL / 2);
        CHECK_INT(lines, 0, "no report in the middle of a window");

        /* A line after the window ends reports the old window's count itself
         * (no flush between) and passes. */
        CHECK_INT(pass_n(65534, t0 + 3 * LOG_LIMIT_INTERVAL, 1), 1, "the first line of the next window passes");
        CHECK(strstr(last, "Suppressed 5 message(s) caused by uid 65534") != NULL,
              "and the 5 held back before are reported first (%s)", last);

        lines = 0;
        log_limit_done();
        CHECK_INT(lines, 0, "nothing left to report at the end");
        return tap_done();
}
