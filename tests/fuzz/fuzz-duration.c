/* SPDX-License-Identifier: MIT */
/* parse_duration() (wait=, lease_ttl=, --wait): what it accepts formats
 * and parses back to the same value; any value the input's first 8 bytes
 * make does too; a bare number is that many seconds. */

#include <ctype.h>

#include "fuzz.h"
#include "time-util.h"

static void check_round_trip(usec_t u) {
        char buf[FORMAT_DURATION_MAX];
        usec_t again = 0;

        format_duration(buf, sizeof(buf), u);
        fuzz_assert(strlen(buf) < sizeof(buf) - 1);     /* nothing cut off */
        fuzz_assert(parse_duration(buf, &again) == 0);
        fuzz_assert(again == u);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *s = fuzz_string(data, size);
        usec_t u = 0, raw = 0;
        size_t digits;
        int r;

        r = parse_duration(s, &u);
        fuzz_assert(r == 0 || r == -EINVAL || r == -ERANGE);
        if (r == 0)
                check_round_trip(u);

        digits = strspn(s, "0123456789");
        if (digits > 0 && digits <= 12 && s[digits] == '\0') {
                fuzz_assert(r == 0);
                fuzz_assert(u == strtoull(s, NULL, 10) * USEC_PER_SEC);
        }

        memcpy(&raw, data, size < sizeof(raw) ? size : sizeof(raw));
        check_round_trip(raw);
        free(s);
        return 0;
}
