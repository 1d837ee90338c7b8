/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "tap.h"

static char dir[] = "/tmp/fleetsem-test-config-XXXXXX";

static const char *write_bytes(const char *name, const char *text, size_t len, mode_t mode) {
        static char path[256];
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        f = fopen(path, "we");
        fwrite(text, 1, len, f);
        fclose(f);
        chmod(path, mode);
        return path;
}

static const char *write_file(const char *name, const char *text, mode_t mode) {
        return write_bytes(name, text, strlen(text), mode);
}

static void test_urls(void) {
        RedisAddress a;
        const char *why;
        char buf[256];

        CHECK_INT(redis_address_parse("redis://localhost", &a, &why), 0, "redis://localhost");
        CHECK_STR(a.host, "localhost", "host");
        CHECK_INT(a.port, 6379, "default port");
        redis_address_done(&a);

        CHECK_INT(redis_address_parse("redis://bob:s3cret@10.0.0.5:6380/2", &a, &why), 0, "user, password, port, db");
        CHECK_STR(a.user, "bob", "user");
        CHECK_STR(a.password, "s3cret", "password");
        CHECK_INT(a.port, 6380, "port");
        CHECK_INT(a.db, 2, "db");
        redis_address_to_string(&a, buf, sizeof(buf));
        CHECK(!strstr(buf, "s3cret"), "the password never shows in the printable address (%s)", buf);
        redis_address_done(&a);

        CHECK_INT(redis_address_parse("redis://:pw@[::1]:7000", &a, &why), 0, "IPv6 with password only");
        CHECK_STR(a.host, "::1", "IPv6 host");
        CHECK_INT(a.port, 7000, "IPv6 port");
        CHECK(a.user == NULL, "no user");
        redis_address_done(&a);

        CHECK_INT(redis_address_parse("unix:/run/redis/redis.sock", &a, &why), 0, "unix:/path");
        CHECK_STR(a.unix_path, "/run/redis/redis.sock", "unix path");
        redis_address_done(&a);

        /* The printed form reads back as the same address. */
        CHECK_INT(redis_address_parse("unix:////run/redis.sock", &a, &why), 0, "unix: with a path that starts with //");
        CHECK_STR(a.unix_path, "//run/redis.sock", "unix path with //");
        redis_address_to_string(&a, buf, sizeof(buf));
        redis_address_done(&a);
        CHECK_INT(redis_address_parse(buf, &a, &why), 0, "its printed form parses");
        CHECK_STR(a.unix_path, "//run/redis.sock", "to the same path");
        redis_address_done(&a);

        static const char *const bad[] = {
                "localhost:6379", "redis://", "redis://host:0", "redis://host:65536", "redis://host:x",
                "redis://host/db", "unix:relative.sock", "http://host", "redis://[::1", "redis://ho st",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                why = NULL;
                CHECK(redis_address_parse(bad[i], &a, &why) < 0 && why, "refused: %s", bad[i]);
        }
}

static void test_file(void) {
        Config c;
        char *err = NULL;
        const char *path;

        path = write_file("good.conf",
                          "# comment\n"
                          "\n"
                          "redis = unix:/run/redis.sock\n"
                          "lease_ttl = 30s\n"
                          "  namespace=prod  \n"
                          "host_id = web-3\n"
                          "allow = nightly-* alice @ops\n"
                          "allow = login:* bob\n", 0644);
        config_init(&c);
        CHECK_INT(config_load_file(&c, path, &err), 0, "a good file loads");
        CHECK_U64(c.lease_ttl, 30 * USEC_PER_SEC, "lease_ttl");
        CHECK_STR(c.namespace, "prod", "namespace, spaces stripped");
        CHECK_STR(c.host_id, "web-3", "host_id");
        CHECK_INT(c.n_allow, 2, "two allow rules");
        CHECK_STR(c.allow[0].principals[1], "@ops", "group principal");
        CHECK(config_permits(&c, 0, "anything"), "root may ask for any name");
        config_done(&c);
        free(err);
}

static void check_bad_bytes(const char *text, size_t len, const char *expected) {
        Config c;
        char *err = NULL;
        const char *path = write_bytes("bad.conf", text, len, 0644);

        config_init(&c);
        CHECK(config_load_file(&c, path, &err) < 0, "refused: %s", expected);
        CHECK(err && strstr(err, expected), "error names the place: %s", err ? err : "(none)");
        config_done(&c);
        free(err);
}

static void check_bad(const char *text, const char *expected) {
        check_bad_bytes(text, strlen(text), expected);
}

static void test_bad_files(void) {
        check_bad("redis = unix:/x\nlease_ttl = soon\n", "bad.conf:2: lease_ttl");
        check_bad("\n\nfoo = bar\n", "bad.conf:3: foo: unknown key");
        check_bad("redis\n", "bad.conf:1: expected \"key = value\"");
        check_bad("lease_ttl = 0\n", "bad.conf:1: lease_ttl: must be between 1s and 1h");
        check_bad("namespace = a/b\n", "bad.conf:1: namespace");
        check_bad("allow = x*\n", "bad.conf:1: allow");
        check_bad("redis = mysql://x\n", "bad.conf:1: redis");
        check_bad("redis_password_file = relative\n", "bad.conf:1: redis_password_file");
        /* A NUL byte, in the last line (once read as "namespace = a") or
         * in any other. */
        check_bad_bytes("redis = unix:/x\nnamespace = a\0b", 31, "bad.conf:2: NUL byte in line");
        check_bad_bytes("namespace = a\0b\nredis = unix:/x\n", 32, "bad.conf:1: NUL byte in line");
}

static void test_password_file(void) {
        Config c;
        char *err = NULL, line[256];
        const char *pw;

        pw = write_file("pw", "hunter2\n", 0600);
        config_init(&c);
        CHECK_INT(config_set(&c, "redis", "redis://localhost", &(const char *) { NULL }), 0, "redis set");
        snprintf(line, sizeof(line), "%s", pw);
        CHECK_INT(config_set(&c, "redis_password_file", line, &(const char *) { NULL }), 0, "password file set");
        CHECK_INT(config_finish(&c, &err), 0, "finish reads the password");
        CHECK_STR(c.redis.password, "hunter2", "password read, newline stripped");
        config_done(&c);
        free(err);
        err = NULL;

        pw = write_file("pw-open", "hunter2\n", 0644);
        config_init(&c);
        config_set(&c, "redis", "redis://localhost", &(const char *) { NULL });
        config_set(&c, "redis_password_file", pw, &(const char *) { NULL });
        CHECK(config_finish(&c, &err) < 0, "a world-readable password file is refused");
        CHECK(err && strstr(err, "readable by others"), "with a reason: %s", err ? err : "(none)");
        config_done(&c);
        free(err);
}

int main(void) {
        if (!mkdtemp(dir))
                return 99;
        test_urls();
        test_file();
        test_bad_files();
        test_password_file();
        return tap_done();
}
