/* SPDX-License-Identifier: MIT */
#include <errno.h>

#include "tap.h"
#include "time-util.h"

static void check_parse(const char *s, usec_t expected) {
        usec_t u = 0;
        int r = parse_duration(s, &u);
        char what[128];

        snprintf(what, sizeof(what), "parse_duration(\"%s\") succeeds", s);
        CHECK_INT(r, 0, what);
        snprintf(what, sizeof(what), "parse_duration(\"%s\") value", s);
        CHECK_U64(u, expected, what);
}

static void check_invalid(const char *s) {
        usec_t u = 12345;
        int r = parse_duration(s, &u);
        char what[128];

        snprintf(what, sizeof(what), "parse_duration(\"%s\") is refused", s);
        CHECK(r < 0, "%s", what);
        CHECK_U64(u, 12345, "and leaves the output untouched");
}

static void test_parse(void) {
        check_parse("30s", 30 * USEC_PER_SEC);
        check_parse("30", 30 * USEC_PER_SEC);
        check_parse("5min", 5 * USEC_PER_MINUTE);
        check_parse("1h 30min", 90 * USEC_PER_MINUTE);
        check_parse("1h30min", 90 * USEC_PER_MINUTE);
        check_parse("500ms", 500 * USEC_PER_MSEC);
        check_parse("1.5s", 1500 * USEC_PER_MSEC);
        check_parse("0", 0);
        check_parse("0s", 0);
        check_parse(" 2 min ", 2 * USEC_PER_MINUTE);
        check_parse("1d", 86400 * USEC_PER_SEC);
        check_parse("1w", 7 * 86400 * USEC_PER_SEC);
        check_parse("10us", 10);
        check_parse("2m", 2 * USEC_PER_MINUTE);
        check_parse("infinity", USEC_INFINITY);
}

static void test_invalid(void) {
        check_invalid("");
        check_invalid("   ");
        check_invalid("-5s");
        check_invalid("5 s x");
        check_invalid("5parsecs");
        check_invalid("s");
        check_invalid("1.s.5");
        check_invalid("30 5s");
        check_invalid("5s 30");
        check_invalid("99999999999999999999999s");
        check_invalid("600000000y");
        check_invalid("infinityx");
        check_invalid("0x10s");
}

static void test_format(void) {
        char buf[FORMAT_DURATION_MAX];

        CHECK_STR(format_duration(buf, sizeof(buf), 90 * USEC_PER_MINUTE), "1h 30min", "format 1h 30min");
        CHECK_STR(format_duration(buf, sizeof(buf), 500 * USEC_PER_MSEC), "500ms", "format 500ms");
        CHECK_STR(format_duration(buf, sizeof(buf), USEC_INFINITY), "infinity", "format infinity");
        CHECK_STR(format_duration(buf, sizeof(buf), 0), "0", "format 0");
}

int main(void) {
        test_parse();
        test_invalid();
        test_format();
        return tap_done();
}
