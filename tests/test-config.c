/* SPDX-License-Identifier: MIT */
#include <dlfcn.h>
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
                /* As fleetsemd --redis= asks, without wanting the reason. */
                CHECK(redis_address_parse(bad[i], &a, NULL) == -EINVAL, "refused without a reason asked: %s", bad[i]);
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
                          "host_lease = 2h\n"
                          "  namespace=prod  \n"
                          "host_id = web-3\n"
                          "allow = nightly-* alice @ops\n"
                          "allow = login:* bob\n", 0644);
        config_init(&c);
        CHECK_INT(config_load_file(&c, path, &err), 0, "a good file loads");
        CHECK_U64(c.lease_ttl, 30 * USEC_PER_SEC, "lease_ttl");
        CHECK_U64(c.host_lease, 2 * 3600 * USEC_PER_SEC, "host_lease");
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
        check_bad("max_names_per_user = 0\n", "bad.conf:1: max_names_per_user: expected a number from 1 to 1000000");
        check_bad("max_redis_names_per_user = 65537\n",
                  "bad.conf:1: max_redis_names_per_user: expected a number from 1 to 65536");
        check_bad("idle_time = 400d\n", "bad.conf:1: idle_time: must be between 1s and 366d");
        check_bad("host_lease = 8d\n", "bad.conf:1: host_lease: must be between 1s and 7d");
        check_bad("min_replicas_acked = 17\n", "bad.conf:1: min_replicas_acked: expected a number from 0 to 16");
}

/* Each key sets its own field, and only with a value in range. */
static void test_keys(void) {
        static const char *const bad_numbers[] = { "0", "1000001", "-1", "5x", " 5", "", "0x10", "99999999999999999999" };
        Config c;
        const char *why;

        config_init(&c);
        CHECK_INT(c.max_names_per_user, 64, "max_names_per_user defaults to 64");
        CHECK_INT(c.max_redis_names_per_user, 256, "max_redis_names_per_user defaults to 256");
        CHECK_INT(config_set(&c, "max_redis_names_per_user", "65536", &why), 0, "max_redis_names_per_user = 65536");
        CHECK_INT(c.max_redis_names_per_user, 65536, "max_redis_names_per_user set");
        CHECK_INT(c.max_names_per_user, 64, "... apart from max_names_per_user");
        CHECK_INT(c.max_leases_per_user, 256, "max_leases_per_user defaults to 256");
        CHECK_INT(c.max_clients_per_user, 256, "max_clients_per_user defaults to 256");
        CHECK_INT(c.max_weight_per_user, 1, "max_weight_per_user defaults to 1: non-root users ask for one unit");
        CHECK_INT(config_set(&c, "max_names_per_user", "5", &why), 0, "max_names_per_user = 5");
        CHECK_INT(config_set(&c, "max_leases_per_user", "7", &why), 0, "max_leases_per_user = 7");
        CHECK_INT(config_set(&c, "max_clients_per_user", "9", &why), 0, "max_clients_per_user = 9");
        CHECK_INT(config_set(&c, "max_clients", "11", &why), 0, "max_clients = 11");
        CHECK_INT(c.max_names_per_user, 5, "max_names_per_user set");
        CHECK_INT(c.max_leases_per_user, 7, "max_leases_per_user set, apart");
        CHECK_INT(c.max_clients_per_user, 9, "max_clients_per_user set, apart");
        CHECK_INT(c.max_clients, 11, "max_clients set, apart");
        CHECK_INT(c.max_weight_per_user, 1, "max_weight_per_user left alone");
        CHECK_INT(config_set(&c, "max_weight_per_user", "13", &why), 0, "max_weight_per_user = 13");
        CHECK_INT(c.max_weight_per_user, 13, "max_weight_per_user set");
        CHECK_INT(c.max_leases_per_user, 7, "... apart from max_leases_per_user");
        why = NULL;
        CHECK(config_set(&c, "max_weight_per_user", "0", &why) == -EINVAL && why,
              "max_weight_per_user = 0 refused: %s", why ?: "(no reason)");
        CHECK_INT(config_set(&c, "max_names_per_user", "1000000", &why), 0, "max_names_per_user = 1000000");
        CHECK_INT(c.max_names_per_user, 1000000, "the largest value");
        for (size_t i = 0; i < sizeof(bad_numbers) / sizeof(bad_numbers[0]); i++) {
                why = NULL;
                CHECK(config_set(&c, "max_names_per_user", bad_numbers[i], &why) == -EINVAL && why &&
                      streq(why, "expected a number from 1 to 1000000"),
                      "max_names_per_user = \"%s\" refused: %s", bad_numbers[i], why ?: "(no reason)");
        }
        CHECK_INT(c.max_names_per_user, 1000000, "a refused value leaves it as it was");

        CHECK_INT(config_set(&c, "min_replicas_acked", "0", &why), 0, "min_replicas_acked = 0");
        CHECK_INT(c.min_replicas_acked, 0, "min_replicas_acked set");
        CHECK_INT(config_set(&c, "idle_time", "2h", &why), 0, "idle_time = 2h");
        CHECK_U64(c.idle_time, 2 * 3600 * USEC_PER_SEC, "idle_time set");
        /* A name's life in Redis after a call: a user's minutes, root's
         * renewals idle_time, a host's own slot twice host_lease. */
        CHECK_U64(config_name_life(&c, 1000, false, true), 10 * 60 * USEC_PER_SEC, "a user's renewal: 10 min");
        CHECK_U64(config_name_life(&c, 0, false, false), 10 * 60 * USEC_PER_SEC, "root's request: 10 min");
        CHECK_U64(config_name_life(&c, 0, false, true), 2 * 3600 * USEC_PER_SEC, "root's renewal: idle_time");
        CHECK_U64(config_name_life(&c, 0, true, false), MAX(2 * 3600 * USEC_PER_SEC, 2 * c.host_lease),
                  "a host's own slot: at least twice host_lease");
        CHECK_INT(config_set(&c, "idle_time", "20s", &why), 0, "idle_time = 20s");
        CHECK_U64(config_name_life(&c, 1000, false, false), MAX(20 * USEC_PER_SEC, 2 * c.lease_ttl),
                  "a user's name: idle_time when shorter, never under two leases");
        CHECK_INT(config_set(&c, "key_prefix", "fs.test", &why), 0, "key_prefix = fs.test");
        CHECK_STR(c.key_prefix, "fs.test", "key_prefix set");
        CHECK_INT(config_set(&c, "sentinel_password_file", "/etc/s", &why), 0, "sentinel_password_file set");
        CHECK_STR(c.sentinel_password_file, "/etc/s", "sentinel_password_file");
        CHECK_INT(config_set(&c, "limit", "backup-* 2", &why), 0, "limit = backup-* 2");
        CHECK_INT(config_limit_for(&c, "backup-db"), 2, "the limit rule applies to a matching name");
        CHECK_U64(config_limit_for(&c, "other"), UINT32_MAX, "and not to another");
        CHECK_INT(config_set(&c, "nope", "1", NULL), -EINVAL, "an unknown key is refused, reason asked or not");
        config_done(&c);

        config_init(&c);
        CHECK_INT(config_load_file(&c, write_file("names.conf", "max_names_per_user = 8\n", 0644), &(char *) { NULL }), 0,
                  "max_names_per_user in a file");
        CHECK_INT(c.max_names_per_user, 8, "max_names_per_user read from the file");
        config_done(&c);
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

/* ---- Who may have written the files ----------------------------------------------- */

#define NOBODY 65534

static const char *sub_path(const char *name) {
        static char path[4][256];
        static unsigned i;

        i = (i + 1) % 4;
        snprintf(path[i], sizeof(path[i]), "%s/%s", dir, name);
        return path[i];
}

/* A directory of dir's, with mode and owner as given. */
static const char *make_dir(const char *name, mode_t mode, uid_t owner) {
        const char *path = sub_path(name);

        (void) mkdir(path, 0700);
        CHECK(chmod(path, mode) == 0 && chown(path, owner, (gid_t) -1) == 0, "made %s, mode %04o, uid %u", name,
              (unsigned) mode, (unsigned) owner);
        return path;
}

/* A file of dir's, with mode and owner as given. */
static const char *make_file(const char *name, const char *text, mode_t mode, uid_t owner) {
        const char *path = write_file(name, text, mode);

        CHECK(chown(path, owner, (gid_t) -1) == 0 && chmod(path, mode) == 0, "made %s, mode %04o, uid %u", name,
              (unsigned) mode, (unsigned) owner);
        return path;
}

/* config_load_file() of path refuses it with -EPERM and a message that
 * holds each of the words. */
static void check_untrusted(const char *path, const char *what, const char *w1, const char *w2) {
        char *err = NULL;
        Config c;
        int r;

        config_init(&c);
        r = config_load_file(&c, path, &err);
        CHECK(r == -EPERM, "%s is refused", what);
        CHECK(err && strstr(err, path) && strstr(err, w1) && strstr(err, w2),
              "... naming the file, \"%s\" and \"%s\": %s", w1, w2, err ?: "(none)");
        config_done(&c);
        free(err);
}

static void check_trusted(const char *path, const char *what) {
        char *err = NULL;
        Config c;

        config_init(&c);
        CHECK_INT(config_load_file(&c, path, &err), 0, what);
        if (err)
                printf("#   %s\n", err);
        CHECK_INT(c.max_names_per_user, 3, "... and is read");
        config_done(&c);
        free(err);
}

static const char good_conf[] = "max_names_per_user = 3\n";

/* The files any user may write (by owning them, through their mode, or
 * through a directory) are refused: their mode first, which any user can
 * check, then, as root, their owner. */
static void test_trusted_modes(void) {
        const char *good = make_file("trusted.conf", good_conf, 0644, geteuid());
        char *err = NULL;
        Config c;
        check_trusted(good, "a file of this process' user, mode 0644, in a directory of mode 0700 loads");
        check_untrusted(make_file("group-w.conf", good_conf, 0664, geteuid()), "a group-writable file",
                        "mode 0664", "chmod go-w");
        check_untrusted(make_file("other-w.conf", good_conf, 0646, geteuid()), "a world-writable file", "mode 0646",
                        "chmod go-w");

        make_dir("open-dir", 0777, geteuid());
        make_file("open-dir/in.conf", good_conf, 0644, geteuid());
        check_untrusted(sub_path("open-dir/in.conf"), "a file in a world-writable directory",
                        "open-dir of the configuration file", "chmod go-w");
        CHECK(symlink(sub_path("trusted.conf"), sub_path("open-dir/link.conf")) == 0, "a link to a good file there");
        check_untrusted(sub_path("open-dir/link.conf"), "a link in a world-writable directory to a good file",
                        "open-dir of the configuration file", "or move the file");
        CHECK(symlink(sub_path("open-dir/in.conf"), sub_path("link-in.conf")) == 0,
              "a link in a good directory to a file in the world-writable one");
        check_untrusted(sub_path("link-in.conf"), "... is refused as well", "open-dir of the configuration file",
                        "mode 0777");

        make_dir("sticky-dir", 01777, geteuid());
        make_file("sticky-dir/in.conf", good_conf, 0644, geteuid());
        check_trusted(sub_path("sticky-dir/in.conf"), "a file in a sticky world-writable directory (as /tmp) loads");

        CHECK(symlink(sub_path("group-w.conf"), sub_path("link-w.conf")) == 0, "a link to the group-writable file");
        check_untrusted(sub_path("link-w.conf"), "a link to a group-writable file: the target is checked", "mode 0664",
                        sub_path("group-w.conf"));
        CHECK(mkfifo(sub_path("fifo.conf"), 0600) == 0, "a FIFO");
        config_init(&c);
        CHECK_INT(config_load_file(&c, sub_path("fifo.conf"), &err), -EINVAL, "a FIFO is refused, not waited on");
        config_done(&c);
        err = mfree(err);
        CHECK(symlink(sub_path("trusted.conf"), sub_path("link-ok.conf")) == 0, "a link to the good file");
        check_trusted(sub_path("link-ok.conf"), "a link to a good file, in a good directory, loads");
}

static void test_trusted_owners(void) {
        const char *ci = getenv("CI");
        char *err = NULL;
        const char *pw;
        Config c;

        if (geteuid() != 0) {
                CHECK(!ci || !streq(ci, "true"),
                      "files of another user: # SKIP needs root to chown (missing under CI=true)");
                return;
        }
        check_untrusted(make_file("nobody.conf", good_conf, 0644, NOBODY), "a file owned by nobody", "uid 65534",
                        "chown root");
        CHECK(symlink(sub_path("nobody.conf"), sub_path("link-nobody.conf")) == 0, "a link to nobody's file");
        check_untrusted(sub_path("link-nobody.conf"), "a link to nobody's file: the file opened is checked",
                        "uid 65534", sub_path("nobody.conf"));
        make_dir("nobody-dir", 0755, NOBODY);
        make_file("nobody-dir/in.conf", good_conf, 0644, 0);
        check_untrusted(sub_path("nobody-dir/in.conf"), "root's file in a directory nobody owns", "uid 65534",
                        "nobody-dir");

        /* The password file: the same rules, and not readable by others. */
        pw = make_file("pw-nobody", "hunter2\n", 0600, NOBODY);
        config_init(&c);
        config_set(&c, "redis", "redis://localhost", &(const char *) { NULL });
        config_set(&c, "redis_password_file", pw, &(const char *) { NULL });
        CHECK_INT(config_finish(&c, &err), -EPERM, "a password file owned by nobody is refused");
        CHECK(err && strstr(err, pw) && strstr(err, "Redis password file") && strstr(err, "uid 65534"),
              "... naming it and its owner: %s", err ?: "(none)");
        CHECK(!c.redis.password, "... and no password is taken");
        config_done(&c);
        free(err);
        err = NULL;

        pw = make_file("pw-group-w", "hunter2\n", 0620, 0);
        config_init(&c);
        config_set(&c, "redis", "redis://localhost", &(const char *) { NULL });
        config_set(&c, "redis_password_file", pw, &(const char *) { NULL });
        CHECK_INT(config_finish(&c, &err), -EPERM, "a group-writable password file is refused");
        CHECK(err && strstr(err, "mode 0620"), "... saying its mode: %s", err ?: "(none)");
        config_done(&c);
        free(err);
}

/* ---- cluster_allow ---------------------------------------------------------------- */

static void test_cluster_allow(void) {
        static const char *const bad[] = { "10.0.0.0/33", "fd00::/129", "10.0.0/8", "host.example", "10.0.0.0/",
                                           "/8", "10.0.0.0/8x", "" };
        char *err = NULL;
        const char *why;
        Config c;

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                config_init(&c);
                CHECK(config_set(&c, "cluster_allow", bad[i], &why) < 0, "cluster_allow = \"%s\" is refused", bad[i]);
                config_done(&c);
        }

        config_init(&c);
        CHECK_INT(config_set(&c, "redis", "cluster://10.1.2.3:7000,[fd00:1::5]:7000,127.0.0.1:7001", &why), 0,
                  "a cluster URL");
        CHECK_INT(config_finish(&c, &err), 0, "a cluster URL without cluster_allow finishes");
        CHECK_U64(c.host_lease, 3600 * USEC_PER_SEC, "host_lease: 1h unless set");
        CHECK_INT((int) c.n_cluster_allow, 0, "... resolving nothing (as on a reload)");
        config_cluster_allow_derive(&c);
        CHECK((int) c.n_cluster_allow > 0, "without cluster_allow: derived from the seeds");
        CHECK(config_cluster_allows(&c, "10.1.2.200"), "a seed's /24 is allowed");
        CHECK(!config_cluster_allows(&c, "10.1.3.1"), "the next /24 is not");
        CHECK(config_cluster_allows(&c, "fd00:1::ffff:1"), "an IPv6 seed's /64 is allowed");
        CHECK(!config_cluster_allows(&c, "fd00:2::1"), "another /64 is not");
        CHECK(!config_cluster_allows(&c, "127.1.0.1"), "127.1.0.1 is not in 127.0.0.0/24");
        CHECK(!config_cluster_allows(&c, "evil.example"), "a name that is no seed's is not");
        config_done(&c);
        free(err);
        err = NULL;

        config_init(&c);
        CHECK_INT(config_set(&c, "redis", "cluster://10.1.2.3:7000", &why), 0, "a cluster URL");
        CHECK_INT(config_set(&c, "cluster_allow", "192.168.0.0/16 2001:db8::/32", &why), 0, "cluster_allow, two networks");
        CHECK_INT(config_set(&c, "cluster_allow", "172.16.5.5", &why), 0, "... and an address on a line of its own");
        CHECK_INT(config_finish(&c, &err), 0, "finishes");
        CHECK(config_cluster_allows(&c, "192.168.200.1"), "192.168.200.1 is in 192.168.0.0/16");
        CHECK(config_cluster_allows(&c, "2001:db8:ffff::1"), "2001:db8:ffff::1 is in 2001:db8::/32");
        CHECK(config_cluster_allows(&c, "172.16.5.5"), "the single address is");
        CHECK(!config_cluster_allows(&c, "172.16.5.6"), "its neighbour is not");
        CHECK(!config_cluster_allows(&c, "10.1.2.4"), "with cluster_allow, the seed's network is not added");
        config_done(&c);
        free(err);
        err = NULL;

        config_init(&c);
        CHECK_INT(config_set(&c, "redis", "redis://10.1.2.3", &why), 0, "a plain URL");
        CHECK_INT(config_set(&c, "cluster_allow", "10.0.0.0/8", &why), 0, "cluster_allow");
        CHECK(config_finish(&c, &err) < 0 && err && strstr(err, "not a cluster:// URL"),
              "cluster_allow without a Cluster is an error: %s", err ? err : "(none)");
        config_done(&c);
        free(err);
}

/* The tls_* keys: only with a TLS URL; a client key only its owner reads. */
static void test_tls(void) {
        const char *why = NULL;
        char *err = NULL;
        Config c;

        config_init(&c);
        CHECK_INT(config_set(&c, "redis", "redis://10.1.2.3", &why), 0, "a plain URL");
        CHECK_INT(config_set(&c, "tls_ca_file", "/etc/ssl/ca.crt", &why), 0, "tls_ca_file");
        CHECK(config_finish(&c, &err) < 0 && err && strstr(err, "tls_* is set, but redis is not a TLS URL"),
              "tls_* with a plain URL is an error: %s", err ? err : "(none)");
        config_done(&c);
        free(err);
        err = NULL;
        config_init(&c);
        CHECK(config_set(&c, "tls_ca_file", "relative.crt", &why) < 0 && why && strstr(why, "absolute path"),
              "a relative tls_ca_file is refused: %s", why ? why : "(none)");
        CHECK(config_set(&c, "tls_server_name", "bad name!", &why) < 0 && why && strstr(why, "host name"),
              "a tls_server_name that is no host name is refused: %s", why ? why : "(none)");
        CHECK_INT(config_set(&c, "tls_server_name", "redis.example.net", &why), 0, "a host name is taken");
#if !FLEETSEM_TLS
        CHECK(config_set(&c, "redis", "rediss://redis.example.net", &why) < 0 && why && strstr(why, "stunnel4"),
              "without TLS in the build, rediss:// is refused: %s", why ? why : "");
        config_done(&c);
        return;
#endif
        CHECK_INT(config_set(&c, "redis", "rediss://redis.example.net", &why), 0, "with TLS, rediss:// is taken");
        CHECK(c.redis.tls && c.redis.port == 6379, "... as TLS to the same host and port");
        CHECK_INT(config_set(&c, "tls_cert_file", write_file("client.crt", "x\n", 0644), &why), 0, "a cert");
        CHECK(config_finish(&c, &err) < 0 && err && strstr(err, "go together"), "a cert without its key is an error");
        free(err);
        err = NULL;
        CHECK_INT(config_set(&c, "tls_key_file", write_file("client.key", "x\n", 0640), &why), 0, "a key");
        CHECK(config_finish(&c, &err) < 0 && err && strstr(err, "chmod 600"),
              "a key its group may read is refused: %s", err ? err : "(none)");
        free(err);
        err = NULL;
        CHECK_INT(config_set(&c, "tls_key_file", write_file("client2.key", "x\n", 0600), &why), 0, "a key 0600");
        CHECK_INT(config_finish(&c, &err), 0, "mode 0600: taken");
        config_done(&c);
        free(err);
}

/* ---- Users and groups, from files of our own through nss_wrapper ---------------- */

#define MANY_GROUPS 300                 /* more than an array of 256 held */
/* nss_wrapper reads its files growing its copy a line at a time, and the
 * sanitizer's realloc copies every time: under it, the user in more than
 * USER_GROUPS_MAX groups (a file of 1.3 MB) would take many minutes, so
 * that case runs in the plain build only, and the large entry is smaller
 * (~5 KiB, still past the first buffer). */
#ifdef __SANITIZE_ADDRESS__
#define BIG_GROUP_MEMBERS 400
#define HUGE_GROUPS 0
#else
#define BIG_GROUP_MEMBERS 3000          /* an entry of ~40 KiB */
#define HUGE_GROUPS 1
#endif

static bool nss_wrapped(void) {
        const char *e = getenv("NSS_WRAPPER_GROUP");

        return e && e[0];
}

/* alice (4001) in a group with a large entry; many (4002) in 300 groups;
 * huge (4003) in more groups than are looked at. */
static int write_nss_files(const char *d) {
        char path[256];
        FILE *f;

        snprintf(path, sizeof(path), "%s/passwd", d);
        f = fopen(path, "we");
        if (!f)
                return -errno;
        fprintf(f, "alice:x:4001:4001::/nonexistent:/bin/false\n"
                   "many:x:4002:4002::/nonexistent:/bin/false\n"
                   "huge:x:4003:4003::/nonexistent:/bin/false\n");
        fclose(f);
        if (setenv("NSS_WRAPPER_PASSWD", path, 1) < 0)
                return -errno;

        snprintf(path, sizeof(path), "%s/group", d);
        f = fopen(path, "we");
        if (!f)
                return -errno;
        fprintf(f, "alice:x:4001:\nmany:x:4002:\nhuge:x:4003:\n");
        for (unsigned i = 1; i <= MANY_GROUPS; i++)
                fprintf(f, "g%u:x:%u:many\n", i, 5000 + i);
        fprintf(f, "bigg:x:6000:");
        for (unsigned i = 0; i < BIG_GROUP_MEMBERS; i++)
                fprintf(f, "member%06u,", i);
        fprintf(f, "alice\n");
        for (unsigned i = 1; HUGE_GROUPS && i <= USER_GROUPS_MAX; i++)
                fprintf(f, "h%u:x:%u:huge\n", i, 100000 + i);
        fclose(f);
        return setenv("NSS_WRAPPER_GROUP", path, 1) < 0 ? -errno : 0;
}

static void test_groups(void) {
        _cleanup_free_ gid_t *groups = NULL;
        size_t n = 0;
        bool found = false;

        CHECK_INT(user_group_member("alice", 4001, "alice"), 1, "alice is in her primary group");
        CHECK_INT(user_group_member("alice", 4001, "g1"), 0, "alice is not in g1");
        CHECK_INT(user_group_member("alice", 4001, "nosuchgroup"), 0, "nor in a group that does not exist");
        CHECK_INT(user_group_member("alice", 4001, "bigg"), 1, "alice is the last member of a group of " STRINGIFY(BIG_GROUP_MEMBERS) " and her");
        CHECK_INT(user_group_member("many", 4002, "g1"), 1, "many is in its first group");
        CHECK_INT(user_group_member("many", 4002, "g300"), 1, "and in its 300th");
        CHECK(user_in_group("many", 4002, "g300"), "user_in_group() says so too");
        CHECK_INT(user_group_member("huge", 4003, "huge"), 1, "huge is in its primary group (nothing to list)");
        if (HUGE_GROUPS)
                CHECK_INT(user_group_member("huge", 4003, "h1"), -E2BIG,
                          "a user in more than " STRINGIFY(USER_GROUPS_MAX) " groups is an error");
        else
                printf("# (a user in more than " STRINGIFY(USER_GROUPS_MAX) " groups: in the plain build)\n");

        CHECK_INT(user_groups("many", 4002, MANY_GROUPS + 1, &groups, &n), 0, "user_groups() of many");
        CHECK_INT(n, MANY_GROUPS + 1, "301 groups: 300 and the primary one");
        for (size_t i = 0; i < n; i++)
                found = found || groups[i] == 5000 + MANY_GROUPS;
        CHECK(found, "g300 among them");
        CHECK_INT(user_groups("many", 4002, MANY_GROUPS, &(gid_t *) { NULL }, &n), -E2BIG, "more than the most asked for");
}

static void test_permits(void) {
        Config c;
        const char *why;

        config_init(&c);
        CHECK_INT(config_set(&c, "allow", "night-* @g300", &why), 0, "allow = night-* @g300");
        CHECK_INT(config_set(&c, "allow", "day-* alice @bigg", &why), 0, "allow = day-* alice @bigg");
        CHECK_INT(config_set(&c, "allow", "huge-* @h5", &why), 0, "allow = huge-* @h5");
        CHECK_INT(config_permits(&c, 4002, "night-1"), 1, "many may ask for night-1 (its 300th group)");
        CHECK_INT(config_permits(&c, 4002, "day-1"), 0, "but not for day-1");
        CHECK_INT(config_permits(&c, 4001, "day-1"), 1, "alice may ask for day-1");
        CHECK_INT(config_permits(&c, 4001, "night-1"), 0, "but not for night-1");
        if (HUGE_GROUPS)
                CHECK_INT(config_permits(&c, 4003, "huge-1"), -E2BIG, "huge's groups are no answer, never a no");
        CHECK_INT(config_permits(&c, 9999, "night-1"), 0, "an unknown uid may ask for nothing");
        CHECK_INT(config_permits(&c, 0, "huge-1"), 1, "root may ask for anything");
        config_done(&c);
}

/* Runs this test again with nss_wrapper's users and groups; 0 when it
 * cannot, having said why. */
static int rerun_with_nss_wrapper(char *argv[]) {
        static char nss_dir[] = "/tmp/fleetsem-test-nss-XXXXXX";
        void *h = dlopen("libnss_wrapper.so", RTLD_NOW | RTLD_LOCAL);

        if (!h) {
                printf("# libnss_wrapper.so not found (package libnss-wrapper): %s\n", dlerror());
                return 0;
        }
        dlclose(h);
        if (!mkdtemp(nss_dir) || write_nss_files(nss_dir) < 0 ||
            setenv("LD_PRELOAD", "libnss_wrapper.so", 1) < 0) {
                printf("# cannot write users and groups for nss_wrapper: %m\n");
                return 0;
        }
#ifdef __SANITIZE_ADDRESS__
        /* nss_wrapper is preloaded before the sanitizer's runtime, which
         * is then not first in the list (harmless: the wrapper does not
         * replace malloc), and must not bind deep (as its manual says for
         * sanitizers). */
        (void) setenv("NSS_WRAPPER_DISABLE_DEEPBIND", "1", 1);
        {
                char opts[1024];

                snprintf(opts, sizeof(opts), "%s%sverify_asan_link_order=0", getenv("ASAN_OPTIONS") ?: "",
                         getenv("ASAN_OPTIONS") ? ":" : "");
                (void) setenv("ASAN_OPTIONS", opts, 1);
        }
#endif
        execv("/proc/self/exe", argv);
        printf("# cannot run again under nss_wrapper: %m\n");
        return 0;
}

int main(int argc, char *argv[]) {
        const char *ci = getenv("CI");

        if (argc > 0 && !nss_wrapped())
                rerun_with_nss_wrapper(argv);
        if (!mkdtemp(dir))
                return 99;
        test_urls();
        test_file();
        test_bad_files();
        test_password_file();
        test_trusted_modes();
        test_trusted_owners();
        test_keys();
        test_cluster_allow();
        test_tls();
        if (nss_wrapped()) {
                _cleanup_free_ char *nss_dir = strdup(getenv("NSS_WRAPPER_GROUP"));

                test_groups();
                test_permits();
                (void) unlink(getenv("NSS_WRAPPER_GROUP"));
                (void) unlink(getenv("NSS_WRAPPER_PASSWD"));
                if (nss_dir && strrchr(nss_dir, '/'))
                        *strrchr(nss_dir, '/') = '\0';
                (void) rmdir(nss_dir);
        } else
                CHECK(!ci || !streq(ci, "true"), "users and groups through nss_wrapper (missing under CI=true)");
        return tap_done();
}
