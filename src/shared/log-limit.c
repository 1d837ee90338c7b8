/* SPDX-License-Identifier: MIT */
#include <search.h>
#include <stdlib.h>

#include "log-limit.h"

typedef struct UidBudget {
        uid_t uid;
        usec_t window_start;
        unsigned written;
        unsigned long long suppressed;
} UidBudget;

static void *budgets;           /* tsearch(): uid → UidBudget */
static UidBudget **flush_list;  /* scratch for log_limit_flush() */
static size_t n_budgets;

static int budget_cmp(const void *x, const void *y) {
        uid_t a = ((const UidBudget *) x)->uid, b = ((const UidBudget *) y)->uid;

        return a < b ? -1 : a > b;
}

static void budget_report(UidBudget *b) {
        if (b->suppressed == 0)
                return;
        log_warning("Suppressed %llu message(s) caused by uid " UID_FMT " in the last minute.", b->suppressed, b->uid);
        b->suppressed = 0;
}

bool log_limit_pass(uid_t uid, usec_t now) {
        UidBudget key = { .uid = uid }, *b, **p;

        if (uid == 0)
                return true;
        p = tfind(&key, &budgets, budget_cmp);
        if (p)
                b = *p;
        else {
                b = calloc(1, sizeof(*b));
                if (!b)
                        return true;
                *b = (UidBudget) { .uid = uid, .window_start = now };
                if (!tsearch(b, &budgets, budget_cmp)) {
                        free(b);
                        return true;
                }
                n_budgets++;
        }
        if (now - b->window_start >= LOG_LIMIT_INTERVAL) {
                budget_report(b);
                b->window_start = now;
                b->written = 0;
        }
        if (b->written < LOG_LIMIT_BURST) {
                b->written++;
                return true;
        }
        b->suppressed++;
        return false;
}

static size_t n_collected;

static void collect(const void *node, VISIT which, int depth) {
        (void) depth;
        if (which == postorder || which == leaf)
                flush_list[n_collected++] = *(UidBudget *const *) node;
}

void log_limit_flush(usec_t now) {
        if (n_budgets == 0)
                return;
        flush_list = calloc(n_budgets, sizeof(*flush_list));
        if (!flush_list)
                return;
        n_collected = 0;
        twalk(budgets, collect);
        for (size_t i = 0; i < n_collected; i++) {
                UidBudget *b = flush_list[i];

                if (now - b->window_start < LOG_LIMIT_INTERVAL)
                        continue;
                budget_report(b);
                /* Quiet for a whole window: forgotten. */
                tdelete(b, &budgets, budget_cmp);
                n_budgets--;
                free(b);
        }
        flush_list = mfree(flush_list);
}

void log_limit_done(void) {
        log_limit_flush(USEC_INFINITY);
}
