/* SPDX-License-Identifier: MIT */
/* Values a client, NSS or Redis chose, where they come out: UTF-8 as
 * utf8_decode() reads it, and log lines and journal fields, which carry
 * control characters and invalid UTF-8 only as \xNN.
 * (tests/security-escape.sh drives the same through a running agent.) */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "protocol.h"
#include "tap.h"

static struct {
        unsigned n;
        int level;
        char msg[16384];
        char name[1100], lease[1100], holder[1100];
        uint64_t token;
        bool fields;
} got;

static void sink(int level, const LogFields *f, const char *msg) {
        got.n++;
        got.level = level;
        snprintf(got.msg, sizeof(got.msg), "%s", msg);
        got.fields = f;
        if (f) {
                snprintf(got.name, sizeof(got.name), "%s", f->name ?: "(null)");
                snprintf(got.lease, sizeof(got.lease), "%s", f->lease ?: "(null)");
                snprintf(got.holder, sizeof(got.holder), "%s", f->holder ?: "(null)");
                got.token = f->token;
        }
}

static void test_utf8_decode(void) {
        static const struct {
                const char *in;
                size_t len;
                uint32_t cp;
        } cases[] = {
                { "a", 1, 'a' },
                { "\x1b", 1, 0x1b },
                { "\x7f", 1, 0x7f },
                { "\xc3\xa9", 2, 0xe9 },
                { "\xc2\x9b", 2, 0x9b },                /* C1 CSI: valid UTF-8 */
                { "\xe2\x9c\x93", 3, 0x2713 },
                { "\xf0\x9f\x98\x80", 4, 0x1f600 },
                { "\xf4\x8f\xbf\xbf", 4, 0x10ffff },
                { "", 0, 0 },                           /* NUL */
                { "\x9b", 0, 0 },                       /* a stray continuation byte */
                { "\xff", 0, 0 },
                { "\xc3", 0, 0 },                       /* truncated at the end */
                { "\xc3" "a", 0, 0 },                   /* ... or by the next character */
                { "\xc0\xaf", 0, 0 },                   /* overlong '/' */
                { "\xe0\x80\xaf", 0, 0 },               /* overlong, 3 bytes */
                { "\xed\xa0\x80", 0, 0 },               /* a surrogate */
                { "\xf4\x90\x80\x80", 0, 0 },           /* past U+10FFFF */
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                uint32_t cp = 0xdead;
                size_t n = utf8_decode(cases[i].in, &cp);

                CHECK_INT(n, cases[i].len, "utf8_decode: length");
                CHECK_INT(cp, cases[i].len ? cases[i].cp : 0xdead, "utf8_decode: code point, untouched when invalid");
        }
}

static void test_message(void) {
        int r;

        errno = 42;
        log_info("Granted slot of %s to %s.", "esc", "nobody@a pid 7 (\x1b]0;pwn\x07\x7f\x9b\xff\xc3\xa9)");
        CHECK_INT(got.n, 1, "one line");
        CHECK_INT(got.level, LOG_INFO, "its level");
        CHECK_STR(got.msg, "Granted slot of esc to nobody@a pid 7 (\\x1b]0;pwn\\x07\\x7f\\x9b\\xff\xc3\xa9).",
                  "ESC, OSC, BEL, DEL, stray bytes as \\xNN; \xc3\xa9 as it is");
        CHECK_INT(errno, 42, "errno is kept");
        CHECK(!got.fields, "no fields");

        log_warning("Redis refused it: %s", "ERR line one\nline two\r\ttab \\x1b");
        CHECK_STR(got.msg, "Redis refused it: ERR line one\\nline two\\r\\ttab \\\\x1b",
                  "a newline cannot forge a second line; a backslash cannot forge an escape");

        r = log_error_errno(EACCES, "Cannot write %s: %m", "\xe2\x80\xae" "gnp.exe");
        CHECK_INT(r, -EACCES, "log_error_errno returns -errno");
        CHECK_STR(got.msg, "Cannot write \\xe2\\x80\\xaegnp.exe: Permission denied", "%m, and bidi controls escaped");

        log_debug("below the level: %s", "\x1b");
        CHECK_INT(got.n, 3, "a line below the level is not written");
}

static void test_long_message(void) {
        char *s = malloc(4096);

        memset(s, '\x1b', 4095);
        s[4095] = '\0';
        log_info("%s", s);
        /* The line is cut at 2047 bytes before it is escaped: each one is
         * there, escaped, and nothing else. */
        CHECK_INT(strlen(got.msg), 4 * 2047, "a long line of ESC: every byte of the cut line escaped");
        CHECK(strncmp(got.msg + strlen(got.msg) - 4, "\\x1b", 4) == 0, "... up to its end");
        free(s);
}

static void test_fields(void) {
        LogFields f = {
                .name = "esc",
                .lease = "0123456789abcdef0123456789abcdef",
                .token = 17,
                .holder = "nobody@a pid 7 (\x1b[2J\x07\xc3)",
        };

        log_fields(LOG_NOTICE, &f, "Granted slot of %s to %s.", f.name, f.holder);
        CHECK(got.fields, "the journal gets the fields");
        CHECK_STR(got.holder, "nobody@a pid 7 (\\x1b[2J\\x07\\xc3)", "FLEETSEM_HOLDER escaped");
        CHECK_STR(got.name, "esc", "FLEETSEM_NAME as it was");
        CHECK_STR(got.lease, "0123456789abcdef0123456789abcdef", "FLEETSEM_LEASE as it was");
        CHECK_U64(got.token, 17, "FLEETSEM_TOKEN as it was");
        CHECK_STR(got.msg, "Granted slot of esc to nobody@a pid 7 (\\x1b[2J\\x07\\xc3).", "the message too");

        f = (LogFields) { .name = "n\x01" };
        log_fields(LOG_INFO, &f, "x");
        CHECK_STR(got.name, "n\\x01", "any field");
        CHECK_STR(got.holder, "(null)", "a field left out stays out");
}

/* The same through stderr, as clients and an agent outside the journal
 * write. */
static void test_stderr(void) {
        char path[] = "/tmp/test-escape.XXXXXX", buf[512] = "";
        int fd = mkostemp(path, O_CLOEXEC), saved = dup(STDERR_FILENO);
        LogFields f = { .name = "esc", .lease = "l\x1b" };
        ssize_t n;

        CHECK(fd >= 0 && saved >= 0, "a file for stderr");
        if (fd < 0 || saved < 0)
                return;
        (void) unlink(path);
        log_setup("test-escape", LOG_TARGET_STDERR, NULL);
        fflush(stderr);
        dup2(fd, STDERR_FILENO);
        log_error("comm %s", "\x1b]0;pwn\x07\xff");
        log_fields(LOG_INFO, &f, "held by %s", "\x9b" "2J");
        fflush(stderr);
        dup2(saved, STDERR_FILENO);
        close(saved);
        n = pread(fd, buf, sizeof(buf) - 1, 0);
        close(fd);
        buf[n > 0 ? n : 0] = '\0';
        CHECK_STR(buf,
                  "test-escape: error: comm \\x1b]0;pwn\\x07\\xff\n"
                  "test-escape: held by \\x9b2J [name=esc lease=l\\x1b]\n",
                  "stderr lines escaped, fields too");
}

int main(void) {
        log_setup("test-escape", LOG_TARGET_JOURNAL, sink);
        log_set_max_level(LOG_INFO);

        test_utf8_decode();
        test_message();
        test_long_message();
        test_fields();
        test_stderr();
        return tap_done();
}
