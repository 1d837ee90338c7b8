/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "macro.h"
#include "names.h"

static bool chars_in_set(const char *s, size_t max, const char *extra) {
        size_t n;

        if (!s)
                return false;
        n = strlen(s);
        if (n == 0 || n > max)
                return false;
        for (const char *p = s; *p; p++) {
                char c = *p;

                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      strchr(extra, c)))
                        return false;
        }
        return true;
}

bool name_is_valid(const char *s) {
        return chars_in_set(s, NAME_MAX_LEN, "_.:@-");
}

bool ident_is_valid(const char *s) {
        return chars_in_set(s, IDENT_MAX_LEN, "_.:-");
}

bool service_unit_is_valid(const char *s) {
        const char *at;
        size_t n;

        if (!chars_in_set(s, UNIT_NAME_MAX, ":_.\\@-"))
                return false;
        n = strlen(s);
        if (n <= 8 || !streq(s + n - 8, ".service") || s[0] == '@' || s[0] == '.')
                return false;
        at = strchr(s, '@');
        return !at || !strchr(at + 1, '@');
}

bool lease_id_is_valid(const char *s) {
        if (!s || strlen(s) != LEASE_ID_LEN)
                return false;
        return strspn(s, "0123456789abcdef") == LEASE_ID_LEN;
}

int lease_id_new(char ret[LEASE_ID_LEN + 1]) {
        static const char hex[] = "0123456789abcdef";
        uint8_t b[LEASE_ID_LEN / 2];
        ssize_t n;

        n = getrandom(b, sizeof(b), 0);
        if (n < 0)
                return -errno;
        if ((size_t) n != sizeof(b))
                return -EIO;
        for (size_t i = 0; i < sizeof(b); i++) {
                ret[2 * i] = hex[b[i] >> 4];
                ret[2 * i + 1] = hex[b[i] & 15];
        }
        ret[LEASE_ID_LEN] = '\0';
        return 0;
}

int parse_uint64(const char *s, uint64_t min, uint64_t max, uint64_t *ret) {
        uint64_t v = 0;

        if (!s || *s == '\0' || strlen(s) > 20)
                return -EINVAL;
        for (const char *p = s; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                if (v > (UINT64_MAX - (uint64_t) (*p - '0')) / 10)
                        return -ERANGE;
                v = v * 10 + (uint64_t) (*p - '0');
        }
        if (v < min || v > max)
                return -ERANGE;
        *ret = v;
        return 0;
}
