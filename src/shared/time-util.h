/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>
#include <time.h>

typedef uint64_t usec_t;

#define USEC_INFINITY ((usec_t) UINT64_MAX)

/* Deadlines: a + b without overflow (a sum past the end is USEC_INFINITY,
 * "never"), never wrapping to a time already past. */
static inline usec_t usec_add(usec_t a, usec_t b) {
        return a > USEC_INFINITY - b ? USEC_INFINITY : a + b;
}
static inline usec_t usec_min(usec_t a, usec_t b) {
        return a < b ? a : b;
}
#define USEC_PER_MSEC ((usec_t) 1000ULL)
#define USEC_PER_SEC ((usec_t) 1000000ULL)
#define USEC_PER_MINUTE (60ULL * USEC_PER_SEC)

/* Parses a duration in systemd's syntax ("30s", "5min", "1h 30min", "500ms",
 * "1.5s", "infinity"); a bare number means seconds. */
int parse_duration(const char *s, usec_t *ret);

/* Formats like systemd: "1h 30min", "500ms", "infinity". */
const char *format_duration(char *buf, size_t size, usec_t u);
#define FORMAT_DURATION_MAX 64

usec_t now_usec(clockid_t clock);
/* CLOCK_MONOTONIC: the agent's clock for leases, timers and budgets. */
usec_t now_mono(void);
