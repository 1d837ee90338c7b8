/* SPDX-License-Identifier: MIT */
/* pam_fleetsem's slot names: the encoding of values, their short form, and
 * name=TEMPLATE expanded through a real PAM handle. Whatever a value holds,
 * the name is valid; distinct values give distinct names, equal values
 * equal ones. */

#include <security/pam_appl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "pam-name.h"
#include "tap.h"

static int no_conv(int n, const struct pam_message **msg, struct pam_response **resp, void *userdata) {
        return PAM_CONV_ERR;
}

static const char *encode(const char *v) {
        static char buf[1024];

        name_value_encode(v, strlen(v), buf, sizeof(buf));
        return buf;
}

/* The inverse of the encoding, to show that it is one: -1 if s is no
 * encoding at all. */
static int decode(const char *s, char *ret, size_t *ret_n) {
        size_t n = 0;

        for (const char *p = s; *p; p++) {
                unsigned hi, lo;

                if (*p != '_') {
                        ret[n++] = *p;
                        continue;
                }
                if (!p[1] || !p[2] || !strchr("0123456789ABCDEF", p[1]) || !strchr("0123456789ABCDEF", p[2]))
                        return -1;
                hi = (unsigned) (strchr("0123456789ABCDEF", p[1]) - "0123456789ABCDEF");
                lo = (unsigned) (strchr("0123456789ABCDEF", p[2]) - "0123456789ABCDEF");
                ret[n++] = (char) (hi << 4 | lo);
                p += 2;
        }
        *ret_n = n;
        return 0;
}

static void test_encode(void) {
        char small[8];

        CHECK_STR(encode("alice"), "alice", "a plain user name stays as it is");
        CHECK_STR(encode("web-3.example.org"), "web-3.example.org", "a host name stays as it is");
        CHECK_STR(encode("2001:db8::1"), "2001:db8::1", "an IPv6 address stays as it is");
        CHECK_STR(encode("alice@EXAMPLE.ORG"), "alice@EXAMPLE.ORG", "a realm stays as it is");
        CHECK_STR(encode("build$"), "build_24", "build$: $ is encoded");
        CHECK_STR(encode("DOMAIN\\user"), "DOMAIN_5Cuser", "DOMAIN\\user: the backslash is encoded");
        CHECK_STR(encode("fe80::1%eth0"), "fe80::1_25eth0", "fe80::1%eth0: the zone's % is encoded");
        CHECK_STR(encode("_apt"), "_5Fapt", "the escape itself is encoded");
        CHECK_STR(encode("_5F"), "_5F5F", "... so an encoding never reads as another value");
        CHECK_STR(encode("a b\n{}/"), "a_20b_0A_7B_7D_2F", "space, newline, braces, slash");
        CHECK_STR(encode("caf\xc3\xa9"), "caf_C3_A9", "UTF-8 byte by byte");
        CHECK_STR(encode(""), "", "nothing is nothing");
        CHECK_INT(name_value_encode("a$$$", 4, small, sizeof(small)), 10, "the whole length, whatever the buffer");
        CHECK_STR(small, "a_24_24", "... and as much as fits, terminated");
        CHECK_INT(name_value_encode("a$", 2, NULL, 0), 4, "a length without a buffer");
}

/* Every value of one and two bytes, and random longer ones: each encoding
 * is valid, holds no "__", and decodes to the value. */
static void test_encode_injective(void) {
        unsigned bad = 0, bad_short = 0, total = 0;
        char v[64], enc[256], back[64];
        size_t n;

        for (unsigned a = 1; a < 256; a++)
                for (unsigned b = 0; b < 256; b++) {
                        v[0] = (char) a;
                        v[1] = (char) b;
                        v[2] = '\0';
                        name_value_encode(v, b ? 2 : 1, enc, sizeof(enc));
                        total++;
                        if (!name_is_valid(enc) || strstr(enc, "__") || decode(enc, back, &n) < 0 ||
                            n != (b ? 2u : 1u) || memcmp(back, v, n) != 0)
                                bad++;
                }
        srand(1);
        for (unsigned i = 0; i < 100000; i++) {
                size_t len = 1 + (size_t) rand() % 40;

                for (size_t k = 0; k < len; k++)
                        v[k] = (char) (1 + rand() % 255);
                if (rand() % 2)         /* mostly the escape and what follows it */
                        for (size_t k = 0; k < len; k++)
                                v[k] = "_5F$"[rand() % 4];
                name_value_encode(v, len, enc, sizeof(enc));
                total++;
                if (!name_is_valid(enc) || strstr(enc, "__") || decode(enc, back, &n) < 0 || n != len ||
                    memcmp(back, v, n) != 0)
                        bad++;
                name_value_shorten(v, len, enc);
                if (!name_is_valid(enc) || strlen(enc) > NAME_VALUE_SHORT_MAX || !strstr(enc, "__") ||
                    strstr(enc, "_.") || strstr(enc, "_:") || strstr(enc, "_@") || strstr(enc, "_-"))
                        bad_short++;
        }
        CHECK(bad == 0, "%u values: every encoding is a valid name without \"__\" and decodes to its value (%u bad)",
              total, bad);
        CHECK(bad_short == 0, "... every short form is valid, holds \"__\", and no _ before . : @ - (%u bad)", bad_short);
}

static void test_shorten(void) {
        char a300[301], b300[301], dollars[101], s1[NAME_VALUE_SHORT_MAX + 1], s2[NAME_VALUE_SHORT_MAX + 1];

        memset(a300, 'a', 300);
        a300[300] = '\0';
        memcpy(b300, a300, sizeof(b300));
        b300[299] = 'b';
        memset(dollars, '$', 100);
        dollars[100] = '\0';

        name_value_shorten(a300, 300, s1);
        CHECK_STR(s1, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa__9835fa6bf4e20a9b9ea812506302e989",
                  "300 a: 30 of them, __, the first 128 bits of SHA-256 (as sha256sum gives them)");
        CHECK_INT(strlen(s1), NAME_VALUE_SHORT_MAX, "... 64 characters");
        name_value_shorten(b300, 300, s2);
        CHECK_STR(s2, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa__daf00507ddaa912f4b43713b0f4e4733",
                  "a value that differs in its last byte has another short form");
        name_value_shorten(dollars, 100, s1);
        CHECK_STR(s1, "_24_24_24_24_24_24_24_24_24_24__1d1927c0b697689639b759cb5faa9c04",
                  "the prefix is encoded, and never cut inside an escape");
        name_value_shorten("a$$$$$$$$$$$$", 13, s1);
        CHECK(strncmp(s1, "a_24_24_24_24_24_24_24_24_24__", 30) == 0, "a prefix of 28 where 31 would cut an escape: %s",
              s1);
        CHECK(name_is_valid(s1), "a short form is a valid name");
}

static void test_expand(void) {
        static const struct pam_conv conv = { no_conv, NULL };
        Who w = { .user = "ALICE", .account = "alice", .uid = 1000, .gid = 100, .group = "users" };
        char name[NAME_MAX_LEN + 1], rhost[400], expected[NAME_MAX_LEN + 1], host[256] = "";
        const char *why = NULL;
        pam_handle_t *pamh = NULL;

        CHECK_INT(pam_start("fleetsem-test", "ALICE", &conv, &pamh), PAM_SUCCESS, "pam_start");
        if (!pamh)
                return;

        CHECK_INT(expand_name(pamh, "login:%u", &w, name, &why), 0, "login:%u");
        CHECK_STR(name, "login:alice", "... is the account's own name, not the one PAM was given");
        CHECK_INT(expand_name(pamh, "uid:%U", &w, name, &why), 0, "uid:%U");
        CHECK_STR(name, "uid:1000", "... the uid");
        CHECK_INT(expand_name(pamh, "%s.%g", &w, name, &why), 0, "%s.%g");
        CHECK_STR(name, "fleetsem-test.users", "... the service and the group");
        gethostname(host, sizeof(host) - 1);
        CHECK_INT(expand_name(pamh, "on:%h", &w, name, &why), 0, "on:%h");
        snprintf(expected, sizeof(expected), "on:%s", encode(host));
        CHECK_STR(name, expected, "... this host");

        w.account = "build$";
        CHECK_INT(expand_name(pamh, "login:%u", &w, name, &why), 0, "login:%u for build$");
        CHECK_STR(name, "login:build_24", "... encoded");
        w.account = "DOMAIN\\user";
        CHECK_INT(expand_name(pamh, "login:%u", &w, name, &why), 0, "login:%u for DOMAIN\\user");
        CHECK_STR(name, "login:DOMAIN_5Cuser", "... encoded");
        w.account = "alice";

        CHECK_INT(expand_name(pamh, "ssh:%r", &w, name, &why), 0, "ssh:%r without a remote host");
        CHECK_STR(name, "ssh:", "... the empty value");
        pam_set_item(pamh, PAM_RHOST, "fe80::1%eth0");
        CHECK_INT(expand_name(pamh, "ssh:%r", &w, name, &why), 0, "ssh:%r for fe80::1%eth0");
        CHECK_STR(name, "ssh:fe80::1_25eth0", "... encoded");

        memset(rhost, 'a', 196);
        rhost[196] = '\0';
        pam_set_item(pamh, PAM_RHOST, rhost);
        CHECK_INT(expand_name(pamh, "ssh:%r", &w, name, &why), 0, "a 196-character rhost");
        CHECK_INT(strlen(name), 200, "... fits whole: 200 characters");
        memset(rhost, 'a', 300);
        rhost[300] = '\0';
        pam_set_item(pamh, PAM_RHOST, rhost);
        CHECK_INT(expand_name(pamh, "ssh:%r", &w, name, &why), 0, "a 300-character rhost");
        CHECK_STR(name, "ssh:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa__9835fa6bf4e20a9b9ea812506302e989", "... shortened by its digest");
        memset(rhost, '$', 67);
        rhost[67] = '\0';
        pam_set_item(pamh, PAM_RHOST, rhost);
        CHECK_INT(expand_name(pamh, "ssh:%r", &w, name, &why), 0, "67 $ (201 encoded)");
        CHECK(strstr(name, "__") && strlen(name) == 4 + 30 + 2 + 32, "... shortened: %s", name);
        CHECK_INT(expand_name(pamh, "%r:%r:%r", &w, name, &why), 0, "three long values");
        CHECK_INT(strlen(name), 3 * NAME_VALUE_SHORT_MAX + 2, "... three short forms");
        CHECK(expand_name(pamh, "%r:%r:%r:%r", &w, name, &why) == -E2BIG, "four long values cannot fit: %s", why);

        pam_set_item(pamh, PAM_RHOST, "-x");
        w.account = "a_";
        CHECK_INT(expand_name(pamh, "%u_.%r", &w, name, &why), 0, "%u_.%r for a_ from -x");
        CHECK_STR(name, "a_5F_.-x", "... the separator _. stands apart from the values");
        w.account = "alice";
        CHECK(expand_name(pamh, "x%q", &w, name, &why) == -EINVAL, "an unknown escape: %s", why);
        CHECK(expand_name(pamh, "x%", &w, name, &why) == -EINVAL, "a trailing %%: %s", why);
        CHECK(expand_name(pamh, "a%%b", &w, name, &why) == -EINVAL, "%%%% gives a %%, which no name holds: %s", why);
        CHECK(expand_name(pamh, "a b", &w, name, &why) == -EINVAL, "a space in the template: %s", why);
        pam_set_item(pamh, PAM_RHOST, NULL);
        CHECK(expand_name(pamh, "%r", &w, name, &why) == -EINVAL, "an empty name: %s", why);
        w.group = NULL;
        CHECK(expand_name(pamh, "g:%g", &w, name, &why) == -ENOENT, "%%g without a group name: %s", why);
        CHECK_INT(expand_name(pamh, "login:%u", &w, name, &why), 0, "... which only %g needs");
        pam_end(pamh, PAM_SUCCESS);
}

int main(void) {
        test_encode();
        test_encode_injective();
        test_shorten();
        test_expand();
        return tap_done();
}
