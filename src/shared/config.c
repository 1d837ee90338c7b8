/* SPDX-License-Identifier: MIT */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "protocol.h"
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

/* *ret becomes the message, or NULL when even that ran out of memory. */
static void error_printf(char **ret, const char *format, ...) _printf_(2, 3);
static void error_printf(char **ret, const char *format, ...) {
        va_list ap;

        va_start(ap, format);
        if (vasprintf(ret, format, ap) < 0)
                *ret = NULL;
        va_end(ap);
}

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
                error_printf(ret_error, "%s: %s", path, strerror(-r));
                return r;
        }
        if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode)) {
                error_printf(ret_error, "%s: not a regular file", path);
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
                        error_printf(ret_error, "%s:%u: file too large", path, lineno);
                        return -EFBIG;
                }
                /* fgets() reads on past a NUL byte, and strlen() stops at
                 * it: what the file position moved by tells them apart. */
                pos = ftell(f);
                if (pos < 0 || (size_t) (pos - start) != n) {
                        error_printf(ret_error, "%s:%u: NUL byte in line", path, lineno);
                        return -EINVAL;
                }
                if (n > CONF_LINE_MAX || (n > 0 && line[n - 1] != '\n' && !feof(f))) {
                        error_printf(ret_error, "%s:%u: line too long", path, lineno);
                        return -EINVAL;
                }

                key = strip(line);
                if (*key == '\0' || *key == '#')
                        continue;
                eq = strchr(key, '=');
                if (!eq) {
                        error_printf(ret_error, "%s:%u: expected \"key = value\"", path, lineno);
                        return -EINVAL;
                }
                *eq = '\0';
                key = strip(key);
                value = strip(eq + 1);
                if (cb(key, value, userdata, &why) < 0) {
                        error_printf(ret_error, "%s:%u: %s: %s", path, lineno, key, why ?: "invalid value");
                        return -EINVAL;
                }
        }
        if (ferror(f)) {
                error_printf(ret_error, "%s: read error", path);
                return -EIO;
        }
        return 0;
}

void redis_address_done(RedisAddress *a) {
        free(a->unix_path);
        free(a->host);
        free(a->user);
        free(a->master_name);
        for (size_t i = 0; i < a->n_hosts; i++)
                free(a->hosts[i].host);
        free(a->hosts);
        if (a->sentinel_password) {
                explicit_bzero(a->sentinel_password, strlen(a->sentinel_password));
                free(a->sentinel_password);
        }
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

/* "host", "host:port", "[v6]", "[v6]:port" (port unchanged when absent). */
static int parse_host_port(char *p, char **ret_host, uint16_t *ret_port, const char **ret_why) {
        char *colon;
        uint64_t v;

        if (*p == '[') {
                char *close = strchr(p, ']');

                if (!close)
                        return set_why(ret_why, "unterminated [IPv6 address]");
                *close = '\0';
                colon = close[1] == ':' ? close + 1 : NULL;
                if (close[1] && !colon)
                        return set_why(ret_why, "garbage after ]");
                p++;
        } else
                colon = strchr(p, ':');
        if (colon) {
                *colon = '\0';
                if (parse_uint64(colon + 1, 1, 65535, &v) < 0)
                        return set_why(ret_why, "port must be 1-65535");
                *ret_port = (uint16_t) v;
        }
        if (*p == '\0' || strlen(p) > 253 || strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:") != strlen(p))
                return set_why(ret_why, "invalid host");
        *ret_host = strdup(p);
        return *ret_host ? 0 : -ENOMEM;
}

/* "h1:p1,h2:p2": the Sentinels, or the Cluster's nodes; what is the
 * default port of one. */
static int parse_hosts(char *p, RedisAddress *a, uint16_t default_port, const char *what, const char **ret_why) {
        char *save = NULL, *tok;

        a->hosts = calloc(REDIS_HOSTS_MAX, sizeof(RedisHost));
        if (!a->hosts)
                return -ENOMEM;
        for (tok = strtok_r(p, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                RedisHost *h = &a->hosts[a->n_hosts];
                int r;

                if (a->n_hosts >= REDIS_HOSTS_MAX)
                        return set_why(ret_why, streq(what, "Sentinel") ? "too many Sentinels (at most 16)"
                                                                        : "too many Cluster nodes (at most 16)");
                h->port = default_port;
                r = parse_host_port(tok, &h->host, &h->port, ret_why);
                if (r < 0)
                        return r;
                a->n_hosts++;
        }
        if (a->n_hosts == 0)
                return set_why(ret_why, streq(what, "Sentinel") ? "expected at least one Sentinel host:port"
                                                                : "expected at least one Cluster node host:port");
        return 0;
}

/* "h1:p1,h2:p2/MASTER": the Sentinels and the name of the master they watch. */
static int parse_sentinels(char *p, RedisAddress *a, const char **ret_why) {
        char *slash = strchr(p, '/');

        if (!slash || !name_is_valid(slash + 1) || strchr(slash + 1, '/'))
                return set_why(ret_why, "expected sentinel://host:port[,host:port...]/MASTER");
        *slash = '\0';
        a->master_name = strdup(slash + 1);
        if (!a->master_name)
                return -ENOMEM;
        return parse_hosts(p, a, 26379, "Sentinel", ret_why);
}

/* "h1:p1,h2:p2": nodes of the Cluster, any of which tells the map. */
static int parse_cluster(char *p, RedisAddress *a, const char **ret_why) {
        if (strchr(p, '/'))
                return set_why(ret_why, "expected cluster://host:port[,host:port...] (a Cluster has no databases)");
        a->cluster = true;
        return parse_hosts(p, a, 6379, "Cluster", ret_why);
}

int redis_address_parse(const char *url, RedisAddress *ret, const char **ret_why) {
        _cleanup_free_ char *copy = NULL;
        RedisAddress a = { .port = 6379 };
        char *p, *at, *slash, *colon;
        bool sentinel, cluster;
        uint64_t v;
        int r;

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
        sentinel = strneq(url, "sentinel://", 11);
        cluster = strneq(url, "cluster://", 10);
        if (!strneq(url, "redis://", 8) && !sentinel && !cluster)
                return set_why(ret_why, "expected redis://[user[:password]@]host[:port][/db], "
                               "sentinel://host:port[,host:port...]/MASTER, cluster://host:port[,host:port...] "
                               "or unix:/path");

        copy = strdup(url + (sentinel ? 11 : cluster ? 10 : 8));
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

        if (sentinel || cluster) {
                r = sentinel ? parse_sentinels(p, &a, ret_why) : parse_cluster(p, &a, ret_why);
                if (r < 0) {
                        redis_address_done(&a);
                        return r;
                }
                *ret = a;
                return 0;
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

        r = parse_host_port(p, &a.host, &a.port, ret_why);
        if (r < 0) {
                redis_address_done(&a);
                return r;
        }
        *ret = a;
        return 0;
}

const char *redis_address_to_string(const RedisAddress *a, char *buf, size_t size) {
        if (a->master_name || a->cluster) {
                size_t n = (size_t) snprintf(buf, size, "%s://%s%s", a->cluster ? "cluster" : "sentinel", a->user ?: "",
                                             a->user ? "@" : "");

                for (size_t i = 0; i < a->n_hosts && n < size; i++)
                        n += (size_t) snprintf(buf + n, size - n, "%s%s%s%s:%u", i ? "," : "",
                                               strchr(a->hosts[i].host, ':') ? "[" : "", a->hosts[i].host,
                                               strchr(a->hosts[i].host, ':') ? "]" : "", a->hosts[i].port);
                if (n < size && a->master_name)
                        snprintf(buf + n, size - n, "/%s", a->master_name);
        } else if (a->unix_path)
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
                .max_clients_per_user = DEFAULT_MAX_PER_USER,
                .max_leases_per_user = DEFAULT_MAX_PER_USER,
                .idle_time = DEFAULT_IDLE_TIME,
                .min_replicas_acked = -1,
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
        free(c->sentinel_password_file);
        for (size_t i = 0; i < c->n_allow; i++)
                allow_rule_done(&c->allow[i]);
        free(c->allow);
        for (size_t i = 0; i < c->n_limits; i++)
                free(c->limits[i].pattern);
        free(c->limits);
        *c = (Config) {};
}

static bool principal_is_valid(const char *s) {
        const char *n = s[0] == '@' ? s + 1 : s;
        size_t len = strlen(n);

        /* POSIX portable user and group names, plus what Debian allows. */
        return len > 0 && len <= 64 && n[0] != '-' &&
               strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-$") == len;
}

static bool pattern_is_valid(const char *s) {
        return s[0] && strlen(s) <= NAME_MAX_LEN &&
               strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:@-*?[]!") == strlen(s);
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
        if (!tok || !pattern_is_valid(tok))
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

/* "limit = PATTERN N", e.g. "limit = backup-* 2". */
static int config_add_limit(Config *c, const char *value, const char **ret_why) {
        char pattern[NAME_MAX_LEN + 1], number[16], extra[2];
        uint64_t n;
        LimitRule *l;

        if (c->n_limits >= ALLOW_RULES_MAX)
                return set_why(ret_why, "too many limit rules");
        if (sscanf(value, "%200s %15s %1s", pattern, number, extra) != 2 || !pattern_is_valid(pattern) ||
            parse_uint64(number, 1, SLOTS_MAX, &n) < 0)
                return set_why(ret_why, "expected a name pattern and a number of slots from 1 to 1000000");
        l = reallocarray(c->limits, c->n_limits + 1, sizeof(LimitRule));
        if (!l)
                return -ENOMEM;
        c->limits = l;
        l[c->n_limits].pattern = strdup(pattern);
        if (!l[c->n_limits].pattern)
                return -ENOMEM;
        l[c->n_limits++].slots = (uint32_t) n;
        return 0;
}

uint32_t config_limit_for(const Config *c, const char *name) {
        uint32_t limit = UINT32_MAX;

        for (size_t i = 0; i < c->n_limits; i++)
                if (fnmatch(c->limits[i].pattern, name, 0) == 0 && c->limits[i].slots < limit)
                        limit = c->limits[i].slots;
        return limit;
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
        if (streq(key, "sentinel_password_file")) {
                if (value[0] != '/')
                        return set_why(ret_why, "expected an absolute path");
                return set_string(&c->sentinel_password_file, value);
        }
        if (streq(key, "min_replicas_acked")) {
                if (parse_uint64(value, 0, 16, &v) < 0)
                        return set_why(ret_why, "expected a number from 0 to 16");
                c->min_replicas_acked = (int) v;
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
        if (streq(key, "limit"))
                return config_add_limit(c, value, ret_why);
        if (streq(key, "idle_time")) {
                if (parse_duration(value, &u) < 0)
                        return set_why(ret_why, "expected a duration such as 1d");
                if (u < USEC_PER_SEC || u > 366 * 24 * 3600 * USEC_PER_SEC)
                        return set_why(ret_why, "must be between 1s and 366d");
                c->idle_time = u;
                return 0;
        }
        if (streq(key, "max_clients")) {
                if (parse_uint64(value, 1, 1000000, &v) < 0)
                        return set_why(ret_why, "expected a number from 1 to 1000000");
                c->max_clients = (unsigned) v;
                return 0;
        }
        if (streq(key, "max_clients_per_user") || streq(key, "max_leases_per_user")) {
                if (parse_uint64(value, 1, 1000000, &v) < 0)
                        return set_why(ret_why, "expected a number from 1 to 1000000");
                *(streq(key, "max_clients_per_user") ? &c->max_clients_per_user : &c->max_leases_per_user) = (unsigned) v;
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
                error_printf(ret_error, "Failed to open Redis password file %s: %s", path, strerror(-r));
                return r;
        }
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                error_printf(ret_error, "Redis password file %s is not a regular file", path);
                return -EINVAL;
        }
        if (st.st_mode & 0007) {
                error_printf(ret_error, "Redis password file %s is readable by others; chmod o-rwx it", path);
                return -EPERM;
        }
        n = read(fd, buf, sizeof(buf) - 1);
        if (n < 0) {
                int r = -errno;
                error_printf(ret_error, "Failed to read Redis password file %s: %s", path, strerror(-r));
                return r;
        }
        buf[n] = '\0';
        if ((size_t) n > PASSWORD_MAX || strlen(buf) != (size_t) n) {
                explicit_bzero(buf, sizeof(buf));
                error_printf(ret_error, "Redis password file %s must hold one line of at most %d bytes", path, PASSWORD_MAX);
                return -EINVAL;
        }
        buf[strcspn(buf, "\r\n")] = '\0';
        *ret = strdup(buf);
        explicit_bzero(buf, sizeof(buf));
        return *ret ? 0 : -ENOMEM;
}

int config_finish(Config *c, char **ret_error) {
        int r;

        if (!c->redis.unix_path && !c->redis.host && !c->redis.master_name && !c->redis.cluster) {
                error_printf(ret_error, "No Redis server configured (redis = redis://host:6379, unix:/path, sentinel://… or cluster://…)");
                return -EINVAL;
        }
        if (c->idle_time < 2 * c->lease_ttl) {
                error_printf(ret_error, "idle_time must be at least twice lease_ttl");
                return -EINVAL;
        }
        if (c->host_id[0] == '\0') {
                char host[HOST_NAME_MAX + 1] = "";

                if (gethostname(host, sizeof(host) - 1) < 0 || !ident_is_valid(host)) {
                        error_printf(ret_error, "Host name \"%s\" is not usable as host_id; set host_id", host);
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
        if (c->sentinel_password_file) {
                char *pw = NULL;

                if (!c->redis.master_name) {
                        error_printf(ret_error, "sentinel_password_file is set, but redis is not a sentinel:// URL");
                        return -EINVAL;
                }
                r = read_password_file(c->sentinel_password_file, &pw, ret_error);
                if (r < 0)
                        return r;
                c->redis.sentinel_password = pw;
        }
        if (c->min_replicas_acked < 0)
                c->min_replicas_acked = c->redis.master_name ? 1 : 0;
        return 0;
}

/* NSS answers "not found" in several ways (getpwnam(3)); anything else is
 * a failure to look (out of file descriptors, a directory that does not
 * answer), which must not read as "no". */
static int nss_result(int r, const void *found) {
        if (found)
                return 1;
        if (r == 0 || r == ENOENT || r == ESRCH || r == EBADF || r == EPERM)
                return 0;
        return -r;
}

static int user_group_member(const char *user, gid_t primary, const char *group) {
        struct group grbuf, *gr = NULL;
        char buf[16384];
        gid_t groups[256];
        int n = (int) ELEMENTSOF(groups), r;

        r = getgrnam_r(group, &grbuf, buf, sizeof(buf), &gr);
        r = nss_result(r, gr);
        if (r <= 0)
                return r;
        if (gr->gr_gid == primary)
                return 1;
        errno = 0;
        if (getgrouplist(user, primary, groups, &n) < 0)
                return errno == EMFILE || errno == ENFILE || errno == ENOMEM ? -errno : 0;
        for (int i = 0; i < n; i++)
                if (groups[i] == gr->gr_gid)
                        return 1;
        return 0;
}

bool user_in_group(const char *user, gid_t primary, const char *group) {
        return user_group_member(user, primary, group) > 0;
}

int config_user_rules(const Config *c, uid_t uid, bool *ret_match) {
        struct passwd pwbuf, *pw = NULL;
        char buf[16384];
        int r;

        r = getpwuid_r(uid, &pwbuf, buf, sizeof(buf), &pw);
        r = nss_result(r, pw);
        if (r < 0)
                return r;
        for (size_t i = 0; i < c->n_allow; i++) {
                ret_match[i] = false;
                for (char **p = c->allow[i].principals; r > 0 && *p && !ret_match[i]; p++) {
                        int k = (*p)[0] == '@' ? user_group_member(pw->pw_name, pw->pw_gid, *p + 1) : streq(*p, pw->pw_name);

                        if (k < 0)
                                return k;
                        ret_match[i] = k > 0;
                }
        }
        return 0;
}

bool config_rules_permit(const Config *c, const bool *match, const char *name) {
        for (size_t i = 0; i < c->n_allow; i++)
                if (match[i] && fnmatch(c->allow[i].pattern, name, 0) == 0)
                        return true;
        return false;
}

int config_permits(const Config *c, uid_t uid, const char *name) {
        _cleanup_free_ bool *match = NULL;
        int r;

        if (uid == 0)
                return 1;
        match = calloc(c->n_allow + 1, sizeof(bool));
        if (!match)
                return -ENOMEM;
        r = config_user_rules(c, uid, match);
        if (r < 0)
                return r;
        return config_rules_permit(c, match, name);
}
