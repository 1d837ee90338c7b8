/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "macro.h"

#define CONF_LINE_MAX 4096
#define CONF_FILE_MAX (1024 * 1024)
#define ALLOW_RULES_MAX 1024
#define PRINCIPALS_MAX 64
#define PASSWORD_MAX 512

static char *strip(char *s) {
        char *e;

        while (isspace((unsigned char) *s))
                s++;
        e = s + strlen(s);
        while (e > s && isspace((unsigned char) e[-1]))
                *--e = '\0';
        return s;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(FILE *, fclose);

int conf_parse_file(const char *path, conf_line_cb cb, void *userdata, char **ret_error) {
        _cleanup_(fclosep) FILE *f = NULL;
        char line[CONF_LINE_MAX + 2];
        unsigned lineno = 0;
        size_t total = 0;
        struct stat st;
        long pos = 0;

        f = fopen(path, "re");
        if (!f) {
                int r = -errno;
                (void) asprintf(ret_error, "%s: %s", path, strerror(-r));
                return r;
        }
        if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode)) {
                (void) asprintf(ret_error, "%s: not a regular file", path);
                return -EINVAL;
        }

        while (fgets(line, sizeof(line), f)) {
                const char *why = NULL;
                char *key, *value, *eq;
                size_t n = strlen(line);
                long start = pos;

                lineno++;
                total += n;
                if (total > CONF_FILE_MAX) {
                        (void) asprintf(ret_error, "%s:%u: file too large", path, lineno);
                        return -EFBIG;
                }
                /* fgets() reads on past a NUL byte, and strlen() stops at
                 * it: what the file position moved by tells them apart. */
                pos = ftell(f);
                if (pos < 0 || (size_t) (pos - start) != n) {
                        (void) asprintf(ret_error, "%s:%u: NUL byte in line", path, lineno);
                        return -EINVAL;
                }
                if (n > CONF_LINE_MAX || (n > 0 && line[n - 1] != '\n' && !feof(f))) {
                        (void) asprintf(ret_error, "%s:%u: line too long", path, lineno);
                        return -EINVAL;
                }

                key = strip(line);
                if (*key == '\0' || *key == '#')
                        continue;
                eq = strchr(key, '=');
                if (!eq) {
                        (void) asprintf(ret_error, "%s:%u: expected \"key = value\"", path, lineno);
                        return -EINVAL;
                }
                *eq = '\0';
                key = strip(key);
                value = strip(eq + 1);
                if (cb(key, value, userdata, &why) < 0) {
                        (void) asprintf(ret_error, "%s:%u: %s: %s", path, lineno, key, why ?: "invalid value");
                        return -EINVAL;
                }
        }
        if (ferror(f)) {
                (void) asprintf(ret_error, "%s: read error", path);
                return -EIO;
        }
        return 0;
}

void redis_address_done(RedisAddress *a) {
        free(a->unix_path);
        free(a->host);
        free(a->user);
        if (a->password) {
                explicit_bzero(a->password, strlen(a->password));
                free(a->password);
        }
        *a = (RedisAddress) {};
}

static int set_why(const char **ret_why, const char *why) {
        *ret_why = why;
        return -EINVAL;
}

int redis_address_parse(const char *url, RedisAddress *ret, const char **ret_why) {
        _cleanup_free_ char *copy = NULL;
        RedisAddress a = { .port = 6379 };
        char *p, *at, *slash, *colon;
        uint64_t v;

        if (strneq(url, "unix:", 5)) {
                const char *path = url + 5;

                if (strneq(path, "//", 2))
                        path += 2;
                if (path[0] != '/' || strlen(path) >= 108)
                        return set_why(ret_why, "expected unix:/absolute/path (at most 107 bytes)");
                a.unix_path = strdup(path);
                if (!a.unix_path)
                        return -ENOMEM;
                *ret = a;
                return 0;
        }
        if (!strneq(url, "redis://", 8))
                return set_why(ret_why, "expected redis://[user[:password]@]host[:port][/db] or unix:/path");

        copy = strdup(url + 8);
        if (!copy)
                return -ENOMEM;
        p = copy;

        at = strrchr(p, '@');
        if (at) {
                *at = '\0';
                colon = strchr(p, ':');
                if (colon) {
                        *colon = '\0';
                        a.password = strdup(colon + 1);
                        if (!a.password)
                                return -ENOMEM;
                }
                if (*p) {
                        a.user = strdup(p);
                        if (!a.user) {
                                redis_address_done(&a);
                                return -ENOMEM;
                        }
                }
                p = at + 1;
        }

        slash = strchr(p, '/');
        if (slash) {
                *slash = '\0';
                if (slash[1] && parse_uint64(slash + 1, 0, 65535, &v) < 0) {
                        redis_address_done(&a);
                        return set_why(ret_why, "database must be a number");
                }
                a.db = slash[1] ? (unsigned) v : 0;
        }

        if (*p == '[') {
                char *close = strchr(p, ']');

                if (!close) {
                        redis_address_done(&a);
                        return set_why(ret_why, "unterminated [IPv6 address]");
                }
                *close = '\0';
                colon = close[1] == ':' ? close + 1 : NULL;
                if (close[1] && !colon) {
                        redis_address_done(&a);
                        return set_why(ret_why, "garbage after ]");
                }
                p++;
        } else
                colon = strchr(p, ':');
        if (colon) {
                *colon = '\0';
                if (parse_uint64(colon + 1, 1, 65535, &v) < 0) {
                        redis_address_done(&a);
                        return set_why(ret_why, "port must be 1-65535");
                }
                a.port = (uint16_t) v;
        }
        if (*p == '\0' || strlen(p) > 253 || strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:") != strlen(p)) {
                redis_address_done(&a);
                return set_why(ret_why, "invalid host");
        }
        a.host = strdup(p);
        if (!a.host) {
                redis_address_done(&a);
                return -ENOMEM;
        }
        *ret = a;
        return 0;
}

const char *redis_address_to_string(const RedisAddress *a, char *buf, size_t size) {
        if (a->unix_path)
                /* "unix://" reads as "unix:", so a path that starts with
                 * "//" needs it to read back the same. */
                snprintf(buf, size, "unix:%s%s", a->unix_path[1] == '/' ? "//" : "", a->unix_path);
        else if (!a->host)
                snprintf(buf, size, "(none)");
        else
                snprintf(buf, size, "redis://%s%s%s%s%s:%u/%u", a->user ?: "", a->user ? "@" : "",
                         strchr(a->host, ':') ? "[" : "", a->host, strchr(a->host, ':') ? "]" : "",
                         a->port, a->db);
        return buf;
}

void config_init(Config *c) {
        *c = (Config) {
                .lease_ttl = DEFAULT_LEASE_TTL,
                .max_clients = 4096,
        };
        strcpy(c->namespace, DEFAULT_NAMESPACE);
        strcpy(c->key_prefix, DEFAULT_KEY_PREFIX);
}

static void allow_rule_done(AllowRule *r) {
        free(r->pattern);
        for (char **p = r->principals; p && *p; p++)
                free(*p);
        free(r->principals);
}

void config_done(Config *c) {
        redis_address_done(&c->redis);
        free(c->redis_password_file);
        for (size_t i = 0; i < c->n_allow; i++)
                allow_rule_done(&c->allow[i]);
        free(c->allow);
        *c = (Config) {};
}

static bool principal_is_valid(const char *s) {
        const char *n = s[0] == '@' ? s + 1 : s;
        size_t len = strlen(n);

        /* POSIX portable user and group names, plus what Debian allows. */
        return len > 0 && len <= 64 && n[0] != '-' &&
               strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-$") == len;
}

/* "allow = PATTERN PRINCIPAL…", e.g. "allow = nightly-* alice @ops". */
static int config_add_allow(Config *c, const char *value, const char **ret_why) {
        _cleanup_free_ char *copy = strdup(value);
        AllowRule rule = {};
        size_t n = 0;
        char *save = NULL, *tok;

        if (!copy)
                return -ENOMEM;
        if (c->n_allow >= ALLOW_RULES_MAX)
                return set_why(ret_why, "too many allow rules");

        tok = strtok_r(copy, " \t", &save);
        if (!tok || strlen(tok) > NAME_MAX_LEN || strspn(tok, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:@-*?[]!") != strlen(tok))
                return set_why(ret_why, "expected a name pattern and at least one user or @group");
        rule.pattern = strdup(tok);
        rule.principals = calloc(PRINCIPALS_MAX + 1, sizeof(char *));
        if (!rule.pattern || !rule.principals) {
                allow_rule_done(&rule);
                return -ENOMEM;
        }
        while ((tok = strtok_r(NULL, " \t", &save))) {
                if (n >= PRINCIPALS_MAX || !principal_is_valid(tok)) {
                        allow_rule_done(&rule);
                        return set_why(ret_why, n >= PRINCIPALS_MAX ? "too many users and groups" : "invalid user or @group");
                }
                rule.principals[n] = strdup(tok);
                if (!rule.principals[n++]) {
                        allow_rule_done(&rule);
                        return -ENOMEM;
                }
        }
        if (n == 0) {
                allow_rule_done(&rule);
                return set_why(ret_why, "expected a name pattern and at least one user or @group");
        }

        AllowRule *a = reallocarray(c->allow, c->n_allow + 1, sizeof(AllowRule));
        if (!a) {
                allow_rule_done(&rule);
                return -ENOMEM;
        }
        c->allow = a;
        c->allow[c->n_allow++] = rule;
        return 0;
}

static int set_ident(char dest[IDENT_MAX_LEN + 1], const char *value, const char **ret_why) {
        if (!ident_is_valid(value))
                return set_why(ret_why, "expected 1-64 of A-Z a-z 0-9 _ . : -");
        strcpy(dest, value);
        return 0;
}

static int set_string(char **dest, const char *value) {
        char *s = strdup(value);

        if (!s)
                return -ENOMEM;
        free(*dest);
        *dest = s;
        return 0;
}

int config_set(Config *c, const char *key, const char *value, const char **ret_why) {
        uint64_t v;
        usec_t u;
        int r;

        if (streq(key, "redis")) {
                RedisAddress a;

                r = redis_address_parse(value, &a, ret_why);
                if (r < 0)
                        return r;
                redis_address_done(&c->redis);
                c->redis = a;
                return 0;
        }
        if (streq(key, "redis_password_file")) {
                if (value[0] != '/')
                        return set_why(ret_why, "expected an absolute path");
                return set_string(&c->redis_password_file, value);
        }
        if (streq(key, "lease_ttl")) {
                if (parse_duration(value, &u) < 0)
                        return set_why(ret_why, "expected a duration such as 15s");
                if (u < LEASE_TTL_MIN || u > LEASE_TTL_MAX)
                        return set_why(ret_why, "must be between 1s and 1h");
                c->lease_ttl = u;
                return 0;
        }
        if (streq(key, "namespace"))
                return set_ident(c->namespace, value, ret_why);
        if (streq(key, "host_id"))
                return set_ident(c->host_id, value, ret_why);
        if (streq(key, "key_prefix"))
                return set_ident(c->key_prefix, value, ret_why);
        if (streq(key, "allow"))
                return config_add_allow(c, value, ret_why);
        if (streq(key, "max_clients")) {
                if (parse_uint64(value, 1, 1000000, &v) < 0)
                        return set_why(ret_why, "expected a number from 1 to 1000000");
                c->max_clients = (unsigned) v;
                return 0;
        }
        return set_why(ret_why, "unknown key");
}

static int config_set_cb(const char *key, const char *value, void *userdata, const char **ret_why) {
        return config_set(userdata, key, value, ret_why);
}

int config_load_file(Config *c, const char *path, char **ret_error) {
        return conf_parse_file(path, config_set_cb, c, ret_error);
}

static int read_password_file(const char *path, char **ret, char **ret_error) {
        _cleanup_close_ int fd = -EBADF;
        char buf[PASSWORD_MAX + 2];
        struct stat st;
        ssize_t n;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                int r = -errno;
                (void) asprintf(ret_error, "Failed to open Redis password file %s: %s", path, strerror(-r));
                return r;
        }
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                (void) asprintf(ret_error, "Redis password file %s is not a regular file", path);
                return -EINVAL;
        }
        if (st.st_mode & 0007) {
                (void) asprintf(ret_error, "Redis password file %s is readable by others; chmod o-rwx it", path);
                return -EPERM;
        }
        n = read(fd, buf, sizeof(buf) - 1);
        if (n < 0) {
                int r = -errno;
                (void) asprintf(ret_error, "Failed to read Redis password file %s: %s", path, strerror(-r));
                return r;
        }
        buf[n] = '\0';
        if ((size_t) n > PASSWORD_MAX || strlen(buf) != (size_t) n) {
                explicit_bzero(buf, sizeof(buf));
                (void) asprintf(ret_error, "Redis password file %s must hold one line of at most %d bytes", path, PASSWORD_MAX);
                return -EINVAL;
        }
        buf[strcspn(buf, "\r\n")] = '\0';
        *ret = strdup(buf);
        explicit_bzero(buf, sizeof(buf));
        return *ret ? 0 : -ENOMEM;
}

int config_finish(Config *c, char **ret_error) {
        int r;

        if (!c->redis.unix_path && !c->redis.host) {
                (void) asprintf(ret_error, "No Redis server configured (redis = redis://host:6379 or unix:/path)");
                return -EINVAL;
        }
        if (c->host_id[0] == '\0') {
                char host[HOST_NAME_MAX + 1] = "";

                if (gethostname(host, sizeof(host) - 1) < 0 || !ident_is_valid(host)) {
                        (void) asprintf(ret_error, "Host name \"%s\" is not usable as host_id; set host_id", host);
                        return -EINVAL;
                }
                strcpy(c->host_id, host);
        }
        if (c->redis_password_file) {
                char *pw = NULL;

                r = read_password_file(c->redis_password_file, &pw, ret_error);
                if (r < 0)
                        return r;
                if (c->redis.password) {
                        explicit_bzero(c->redis.password, strlen(c->redis.password));
                        free(c->redis.password);
                }
                c->redis.password = pw;
        }
        return 0;
}

bool user_in_group(const char *user, gid_t primary, const char *group) {
        struct group grbuf, *gr = NULL;
        char buf[16384];
        gid_t groups[256];
        int n = (int) ELEMENTSOF(groups);

        if (getgrnam_r(group, &grbuf, buf, sizeof(buf), &gr) != 0 || !gr)
                return false;
        if (gr->gr_gid == primary)
                return true;
        if (getgrouplist(user, primary, groups, &n) < 0)
                return false;
        for (int i = 0; i < n; i++)
                if (groups[i] == gr->gr_gid)
                        return true;
        return false;
}

bool config_permits(const Config *c, uid_t uid, const char *name) {
        struct passwd pwbuf, *pw = NULL;
        char buf[16384];

        if (uid == 0)
                return true;
        if (getpwuid_r(uid, &pwbuf, buf, sizeof(buf), &pw) != 0 || !pw)
                return false;

        for (size_t i = 0; i < c->n_allow; i++) {
                const AllowRule *rule = &c->allow[i];

                if (fnmatch(rule->pattern, name, 0) != 0)
                        continue;
                for (char **p = rule->principals; *p; p++) {
                        if ((*p)[0] == '@' ? user_in_group(pw->pw_name, pw->pw_gid, *p + 1)
                                           : streq(*p, pw->pw_name))
                                return true;
                }
        }
        return false;
}
