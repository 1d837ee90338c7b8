/* SPDX-License-Identifier: MIT */
/* The checks on names, lease ids, unit names and numbers that arrive in
 * requests, replies, Redis entries and options, each against a second,
 * plainly written statement of the same rule. */

#include <errno.h>

#include "fuzz.h"
#include "names.h"

#define ALNUM "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

static bool all_of(const char *s, const char *set, size_t max) {
        size_t n = strlen(s);

        return n >= 1 && n <= max && strspn(s, set) == n;
}

static bool unit_ok(const char *s) {
        size_t n = strlen(s);
        const char *at = strchr(s, '@');

        return all_of(s, ALNUM ":_.\\@-", UNIT_NAME_MAX) && n > 8 && strcmp(s + n - 8, ".service") == 0 &&
               s[0] != '@' && s[0] != '.' && (!at || !strchr(at + 1, '@'));
}

static void check_uint64(const char *s, uint64_t min, uint64_t max) {
        size_t n = strlen(s);
        uint64_t v = 12345;
        int r;

        r = parse_uint64(s, min, max, &v);
        if (n == 0 || n > 20 || strspn(s, "0123456789") != n) {
                fuzz_assert(r == -EINVAL && v == 12345);
                return;
        }
        /* All digits, at most 20 of them: strtoull() says what it is. */
        errno = 0;
        unsigned long long ref = strtoull(s, NULL, 10);
        if (errno == ERANGE || ref < min || ref > max)
                fuzz_assert(r == -ERANGE && v == 12345);
        else
                fuzz_assert(r == 0 && v == ref);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *s = fuzz_string(data, size);

        fuzz_assert(name_is_valid(s) == all_of(s, ALNUM "_.:@-", NAME_MAX_LEN));
        fuzz_assert(ident_is_valid(s) == all_of(s, ALNUM "_.:-", IDENT_MAX_LEN));
        fuzz_assert(lease_id_is_valid(s) == (strlen(s) == LEASE_ID_LEN && all_of(s, "0123456789abcdef", LEASE_ID_LEN)));
        fuzz_assert(service_unit_is_valid(s) == unit_ok(s));

        check_uint64(s, 0, UINT64_MAX);
        check_uint64(s, 1, 1000000);
        if (size >= 16) {
                uint64_t a, b;

                memcpy(&a, data, 8);
                memcpy(&b, data + 8, 8);
                check_uint64(s, a < b ? a : b, a < b ? b : a);
        }
        free(s);
        return 0;
}
