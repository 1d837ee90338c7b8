/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "macro.h"
#include "pam-name.h"
#include "sha256.h"

#define NAME_ESCAPE '_'

/* Characters a value keeps as they are: the name alphabet but the escape. */
static bool plain(unsigned char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
               c == ':' || c == '@' || c == '-';
}

/* Appends k characters to buf as far as they fit before its last byte;
 * *len counts them all. */
static void put(char *buf, size_t size, size_t *len, const char *s, size_t k) {
        if (size > 0 && *len < size - 1)
                memcpy(buf + *len, s, MIN(k, size - 1 - *len));
        *len += k;
}

/* The encoding of one byte: itself, or '_' and two hex digits. */
static size_t encode_byte(unsigned char c, char ret[3]) {
        static const char hex[] = "0123456789ABCDEF";

        if (plain(c)) {
                ret[0] = (char) c;
                return 1;
        }
        ret[0] = NAME_ESCAPE;
        ret[1] = hex[c >> 4];
        ret[2] = hex[c & 15];
        return 3;
}

size_t name_value_encode(const char *v, size_t n, char *buf, size_t size) {
        size_t len = 0;

        for (size_t i = 0; i < n; i++) {
                char e[3];

                put(buf, size, &len, e, encode_byte((unsigned char) v[i], e));
        }
        if (size > 0)
                buf[MIN(len, size - 1)] = '\0';
        return len;
}

void name_value_shorten(const char *v, size_t n, char ret[NAME_VALUE_SHORT_MAX + 1]) {
        static const char hex[] = "0123456789abcdef";
        uint8_t digest[SHA256_DIGEST_SIZE];
        size_t len = 0;

        for (size_t i = 0; i < n; i++) {
                char e[3];
                size_t k = encode_byte((unsigned char) v[i], e);

                if (len + k > NAME_VALUE_PREFIX_MAX)
                        break;
                memcpy(ret + len, e, k);
                len += k;
        }
        ret[len++] = NAME_ESCAPE;
        ret[len++] = NAME_ESCAPE;
        sha256(v, n, digest);
        for (size_t i = 0; i < NAME_VALUE_DIGEST_HEX / 2; i++) {
                ret[len++] = hex[digest[i] >> 4];
                ret[len++] = hex[digest[i] & 15];
        }
        ret[len] = '\0';
}

/* What escape c stands for (scratch holds it when no one else does). */
static int escape_value(pam_handle_t *pamh, char c, const Who *w, char *scratch, size_t size, const char **ret,
                        const char **why) {
        const void *item = NULL;

        switch (c) {
        case 'u':
                *ret = w->account;
                return 0;
        case 'U':
                snprintf(scratch, size, UID_FMT, w->uid);
                *ret = scratch;
                return 0;
        case 'g':
                if (!w->group) {
                        *why = "%g: the user's primary group has no name in NSS";
                        return -ENOENT;
                }
                *ret = w->group;
                return 0;
        case 's':
                *ret = pam_get_item(pamh, PAM_SERVICE, &item) == PAM_SUCCESS && item ? item : "";
                return 0;
        case 'r':
                *ret = pam_get_item(pamh, PAM_RHOST, &item) == PAM_SUCCESS && item ? item : "";
                return 0;
        case 'h':
                memset(scratch, 0, size);
                if (gethostname(scratch, size - 1) < 0) {
                        *why = "%h: this host has no name";
                        return -errno;
                }
                *ret = scratch;
                return 0;
        default:
                *why = "unknown %-escape in name= (known: %u %U %g %s %r %h %%)";
                return -EINVAL;
        }
}

/* The template with every value encoded, and with the long ones in their
 * short form if shorten: into buf as far as it fits, *ret_len the whole. */
static int build(pam_handle_t *pamh, const char *template, const Who *w, bool shorten, char *buf, size_t size,
                 size_t *ret_len, const char **why) {
        size_t len = 0;

        for (const char *t = template; *t; t++) {
                char scratch[HOST_NAME_MAX + 1], short_form[NAME_VALUE_SHORT_MAX + 1];
                const char *v = NULL;
                size_t n;
                int r;

                if (*t != '%' || t[1] == '%') {
                        put(buf, size, &len, t, 1);
                        t += *t == '%';
                        continue;
                }
                r = escape_value(pamh, *++t, w, scratch, sizeof(scratch), &v, why);
                if (r < 0)
                        return r;
                n = strlen(v);
                if (shorten && name_value_encode(v, n, NULL, 0) > NAME_VALUE_SHORT_MAX) {
                        name_value_shorten(v, n, short_form);
                        put(buf, size, &len, short_form, strlen(short_form));
                } else
                        len += name_value_encode(v, n, len < size ? buf + len : NULL, len < size ? size - len : 0);
        }
        buf[MIN(len, size - 1)] = '\0';
        *ret_len = len;
        return 0;
}

int expand_name(pam_handle_t *pamh, const char *template, const Who *w, char ret[NAME_MAX_LEN + 1], const char **why) {
        char buf[NAME_MAX_LEN + 1];
        size_t len;
        int r;

        r = build(pamh, template, w, false, buf, sizeof(buf), &len, why);
        if (r >= 0 && len > NAME_MAX_LEN)
                r = build(pamh, template, w, true, buf, sizeof(buf), &len, why);
        if (r < 0)
                return r;
        if (len > NAME_MAX_LEN) {
                *why = "the name is longer than 200 characters even with long values shortened";
                return -E2BIG;
        }
        if (len == 0) {
                *why = "the name is empty";
                return -EINVAL;
        }
        if (!name_is_valid(buf)) {
                *why = "name= holds a character no name may hold (a name is A-Z a-z 0-9 _ . : @ -)";
                return -EINVAL;
        }
        memcpy(ret, buf, len + 1);
        return 0;
}
