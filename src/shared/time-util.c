/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "time-util.h"

static const struct {
        const char *suffix;
        usec_t usec;
} units[] = {
        /* Longest first wherever one suffix starts another ("ms" before "m"). */
        { "seconds", USEC_PER_SEC }, { "second", USEC_PER_SEC }, { "sec", USEC_PER_SEC }, { "s", USEC_PER_SEC },
        { "minutes", USEC_PER_MINUTE }, { "minute", USEC_PER_MINUTE }, { "min", USEC_PER_MINUTE },
        { "months", 2629800ULL * USEC_PER_SEC }, { "month", 2629800ULL * USEC_PER_SEC },
        { "msec", USEC_PER_MSEC }, { "ms", USEC_PER_MSEC }, { "m", USEC_PER_MINUTE },
        { "hours", 3600ULL * USEC_PER_SEC }, { "hour", 3600ULL * USEC_PER_SEC },
        { "hr", 3600ULL * USEC_PER_SEC }, { "h", 3600ULL * USEC_PER_SEC },
        { "days", 86400ULL * USEC_PER_SEC }, { "day", 86400ULL * USEC_PER_SEC }, { "d", 86400ULL * USEC_PER_SEC },
        { "weeks", 604800ULL * USEC_PER_SEC }, { "week", 604800ULL * USEC_PER_SEC }, { "w", 604800ULL * USEC_PER_SEC },
        { "years", 31557600ULL * USEC_PER_SEC }, { "year", 31557600ULL * USEC_PER_SEC }, { "y", 31557600ULL * USEC_PER_SEC },
        { "usec", 1 }, { "us", 1 }, { "µs", 1 },
        { "M", 2629800ULL * USEC_PER_SEC },
};

/* Matches the unit at *p (a suffix must not run on into more letters). */
static int parse_unit(const char **p, usec_t *ret) {
        for (size_t i = 0; i < ELEMENTSOF(units); i++) {
                size_t n = strlen(units[i].suffix);

                if (strncmp(*p, units[i].suffix, n) != 0 || isalpha((unsigned char) (*p)[n]))
                        continue;
                *p += n;
                *ret = units[i].usec;
                return 0;
        }
        return -EINVAL;
}

static int add_checked(usec_t *sum, usec_t v) {
        if (v > USEC_INFINITY - 1 - *sum)
                return -ERANGE;
        *sum += v;
        return 0;
}

int parse_duration(const char *s, usec_t *ret) {
        usec_t total = 0;
        const char *p = s;
        bool any = false;

        if (!s)
                return -EINVAL;
        p += strspn(p, " \t");
        if (streq(p, "infinity")) {
                *ret = USEC_INFINITY;
                return 0;
        }

        for (;;) {
                usec_t whole = 0, frac = 0, frac_div = 1, mult = USEC_PER_SEC;
                bool digits = false;
                int r;

                p += strspn(p, " \t");
                if (*p == '\0')
                        break;
                if (!isdigit((unsigned char) *p) && *p != '.')
                        return -EINVAL;

                for (; isdigit((unsigned char) *p); p++) {
                        if (whole > (UINT64_MAX - 9) / 10)
                                return -ERANGE;
                        whole = whole * 10 + (usec_t) (*p - '0');
                        digits = true;
                }
                if (*p == '.') {
                        p++;
                        for (; isdigit((unsigned char) *p); p++) {
                                if (frac_div < 1000000000ULL) {
                                        frac = frac * 10 + (usec_t) (*p - '0');
                                        frac_div *= 10;
                                }
                                digits = true;
                        }
                }
                if (!digits)
                        return -EINVAL;

                p += strspn(p, " \t");
                if (isalpha((unsigned char) *p) || (unsigned char) *p >= 0x80) {
                        r = parse_unit(&p, &mult);
                        if (r < 0)
                                return r;
                } else if (any || *p != '\0')
                        /* A bare number is only allowed alone ("30" = 30s). */
                        return -EINVAL;

                if (whole > 0 && mult > (USEC_INFINITY - 1) / whole)
                        return -ERANGE;
                r = add_checked(&total, whole * mult);
                if (r < 0)
                        return r;
                r = add_checked(&total, (usec_t) ((long double) frac * (long double) mult / (long double) frac_div));
                if (r < 0)
                        return r;
                any = true;
        }

        if (!any)
                return -EINVAL;
        *ret = total;
        return 0;
}

const char *format_duration(char *buf, size_t size, usec_t u) {
        static const struct {
                const char *suffix;
                usec_t usec;
        } table[] = {
                { "d", 86400ULL * USEC_PER_SEC }, { "h", 3600ULL * USEC_PER_SEC },
                { "min", USEC_PER_MINUTE }, { "s", USEC_PER_SEC },
                { "ms", USEC_PER_MSEC }, { "us", 1 },
        };
        size_t len = 0;

        if (u == USEC_INFINITY)
                return snprintf(buf, size, "infinity"), buf;
        if (u == 0)
                return snprintf(buf, size, "0"), buf;

        buf[0] = '\0';
        for (size_t i = 0; i < ELEMENTSOF(table) && u > 0 && len < size; i++) {
                usec_t n = u / table[i].usec;

                if (n == 0)
                        continue;
                len += (size_t) snprintf(buf + len, size - len, "%s%llu%s", len > 0 ? " " : "",
                                         (unsigned long long) n, table[i].suffix);
                u -= n * table[i].usec;
        }
        return buf;
}

usec_t now_mono(void) {
        return now_usec(CLOCK_MONOTONIC);
}

usec_t now_usec(clockid_t clock) {
        struct timespec ts;

        (void) clock_gettime(clock, &ts);
        return (usec_t) ts.tv_sec * USEC_PER_SEC + (usec_t) ts.tv_nsec / 1000;
}
