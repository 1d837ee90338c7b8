/* SPDX-License-Identifier: MIT */
/* fleetsem.conf: its keys, one row each in a table (the key, its parser,
 * its field), and what is checked once the whole file is read. The file
 * format is conf-file.c's, the Redis URL redis-address.c's, the allow rules
 * and their look-ups user-rules.c's. */
#include <assert.h>
#include <errno.h>
#include <fnmatch.h>
#include <limits.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "log.h"
#include "macro.h"
#include "protocol.h"

#define ALLOW_RULES_MAX 1024
#define NET_RULES_MAX 256

typedef struct ConfigKey ConfigKey;
typedef int (*config_parser)(Config *c, const ConfigKey *k, const char *value, const char **ret_why);

struct ConfigKey {
        const char *key;
        config_parser parse;
        size_t offset;          /* of the field in Config */
        uint64_t min, max;      /* numbers and durations */
        const char *why;        /* a value out of shape */
        const char *range_why;  /* a duration out of [min, max] */
};

/* The field a row writes, checked to be of the type its parser writes. */
#define FIELD(name, type)                                                              \
        (offsetof(Config, name) +                                                      \
         0 * sizeof(char[__builtin_types_compatible_p(typeof(((Config *) NULL)->name), type) ? 1 : -1]))

static void *field(Config *c, const ConfigKey *k) {
        return (uint8_t *) c + k->offset;
}

void config_init(Config *c) {
        *c = (Config) {
                .lease_ttl = DEFAULT_LEASE_TTL,
                .host_lease = DEFAULT_HOST_LEASE,
                .max_clients = 4096,
                .max_clients_per_user = DEFAULT_MAX_PER_USER,
                .max_leases_per_user = DEFAULT_MAX_PER_USER,
                .max_names_per_user = DEFAULT_MAX_NAMES_PER_USER,
                .max_redis_names_per_user = DEFAULT_MAX_REDIS_NAMES_PER_USER,
                .max_weight_per_user = DEFAULT_MAX_WEIGHT_PER_USER,
                .idle_time = DEFAULT_IDLE_TIME,
                .min_replicas_acked = -1,
                .log_level = -1,
        };
        strcpy(c->namespace, DEFAULT_NAMESPACE);
        strcpy(c->key_prefix, DEFAULT_KEY_PREFIX);
}

void config_done(Config *c) {
        redis_address_done(&c->redis);
        free(c->redis_password_file);
        free(c->sentinel_password_file);
        free(c->tls_ca_file);
        free(c->tls_cert_file);
        free(c->tls_key_file);
        free(c->tls_server_name);
        for (size_t i = 0; i < c->n_allow; i++)
                allow_rule_done(&c->allow[i]);
        free(c->allow);
        free(c->cluster_allow);
        for (size_t i = 0; i < c->n_limits; i++)
                free(c->limits[i].pattern);
        free(c->limits);
        *c = (Config) {};
}

/* ---- One parser per kind of value ---------------------------------------------- */

static int parse_redis(Config *c, const ConfigKey *k, const char *value, const char **ret_why) {
        RedisAddress a, *dest = field(c, k);
        int r;

        r = redis_address_parse(value, &a, ret_why);
        if (r < 0)
                return r;
        redis_address_done(dest);
        *dest = a;
        return 0;
}

/* A string key: value, once `valid` says so. */
static int set_string(Config *c, const ConfigKey *k, const char *value, bool valid, const char *why,
                      const char **ret_why) {
        char **dest = field(c, k), *s;

        if (!valid)
                return conf_why(ret_why, why);
        s = strdup(value);
        if (!s)
                return -ENOMEM;
        free(*dest);
        *dest = s;
        return 0;
}

static int parse_path(Config *c, const ConfigKey *k, const char *value, const char **ret_why) {
        return set_string(c, k, value, value[0] == '/', "expected an absolute path", ret_why);
}

static int parse_host(Config *c, const ConfigKey *k, const char *value, const char **ret_why) {
        return set_string(c, k, value, redis_host_is_valid(value), "expected a host name or address", ret_why);
}

static int parse_number(const ConfigKey *k, const char *value, uint64_t *ret, const char **ret_why) {
        if (parse_uint64(value, k->min, k->max, ret) < 0)
                return conf_why(ret_why, k->why);
        return 0;
}

static int parse_int(Config *c, const ConfigKey *k, const char *value, const char **ret_why) {
        uint64_t v;
        int r;

        assert(k->max <= INT_MAX);
        r = parse_number(k, value, &v, ret_why);
        if (r < 0)
                return r;
        *(int *) field(c, k) = (int) v;
        return 0;
}

static int parse_unsigned(Config *c, const ConfigKey *k, const char *value, const char **ret_why) {
        uint64_t v;
        int r;

        assert(k->max <= UINT_MAX);
        r = parse_number(k, value, &v, ret_why);
        if (r < 0)
                return r;
        *(unsigned *) field(c, k) = (unsigned) v;
        return 0;
}

static int parse_usec(Config *c, const ConfigKey *k, const char *value, const char **ret_why) {
        usec_t u;

        if (parse_duration(value, &u) < 0)
                return conf_why(ret_why, k->why);
        if (u < k->min || u > k->max)
                return conf_why(ret_why, k->range_why);
        *(usec_t *) field(c, k) = u;
        return 0;
}

static int parse_ident(Config *c, const ConfigKey *k, const char *value, const char **ret_why) {
        char *dest = field(c, k);

        if (!ident_is_valid(value))
                return conf_why(ret_why, "expected 1-64 of A-Z a-z 0-9 _ . : -");
        strcpy(dest, value);
        return 0;
}

/* "allow = PATTERN PRINCIPAL…", e.g. "allow = nightly-* alice @ops". */
static int parse_allow(Config *c, const ConfigKey *k, const char *value, const char **ret_why) {
        AllowRule rule, *a;
        int r;

        if (c->n_allow >= ALLOW_RULES_MAX)
                return conf_why(ret_why, "too many allow rules");
        r = allow_rule_parse(value, &rule, ret_why);
        if (r < 0)
                return r;
        a = reallocarray(c->allow, c->n_allow + 1, sizeof(AllowRule));
        if (!a) {
                allow_rule_done(&rule);
                return -ENOMEM;
        }
        c->allow = a;
        c->allow[c->n_allow++] = rule;
        return 0;
}

/* "limit = PATTERN N", e.g. "limit = backup-* 2". */
static int parse_limit(Config *c, const ConfigKey *k, const char *value, const char **ret_why) {
        char pattern[NAME_MAX_LEN + 1], number[16], extra[2];
        uint64_t n;
        LimitRule *l;

        if (c->n_limits >= ALLOW_RULES_MAX)
                return conf_why(ret_why, "too many limit rules");
        if (sscanf(value, "%200s %15s %1s", pattern, number, extra) != 2 || !name_pattern_is_valid(pattern) ||
            parse_uint64(number, 1, SLOTS_MAX, &n) < 0)
                return conf_why(ret_why, "expected a name pattern and a number of slots from 1 to 1000000");
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

static int net_rule_add(Config *c, const NetRule *rule) {
        NetRule *n;

        if (c->n_cluster_allow >= NET_RULES_MAX)
                return -E2BIG;
        n = reallocarray(c->cluster_allow, c->n_cluster_allow + 1, sizeof(NetRule));
        if (!n)
                return -ENOMEM;
        c->cluster_allow = n;
        c->cluster_allow[c->n_cluster_allow++] = *rule;
        return 0;
}

/* "cluster_allow = 10.1.0.0/16 fd00:1::/64 10.2.3.4": networks, added to
 * those of earlier lines. */
static int parse_cluster_allow(Config *c, const ConfigKey *k, const char *value, const char **ret_why) {
        char buf[1024], *save = NULL;
        int n = 0;

        (void) k;
        if (strlen(value) >= sizeof(buf))
                return conf_why(ret_why, "too long");
        strcpy(buf, value);
        for (char *w = strtok_r(buf, " \t", &save); w; w = strtok_r(NULL, " \t", &save), n++) {
                NetRule rule;

                if (net_rule_parse(w, &rule) < 0)
                        return conf_why(ret_why, "expected networks such as 10.1.0.0/16 or fd00::/8, or addresses");
                if (net_rule_add(c, &rule) < 0)
                        return conf_why(ret_why, "too many networks (at most 256)");
        }
        if (n == 0)
                return conf_why(ret_why, "expected networks such as 10.1.0.0/16 or fd00::/8, or addresses");
        c->cluster_allow_set = true;
        return 0;
}

void config_cluster_allow_derive(Config *c) {
        if (!c->redis.cluster || c->cluster_allow_set)
                return;
        for (size_t i = 0; i < c->redis.n_hosts; i++) {
                struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res = NULL;
                NetRule rule;

                if (net_rule_around(c->redis.hosts[i].host, &rule) >= 0) {
                        (void) net_rule_add(c, &rule);
                        continue;
                }
                if (getaddrinfo(c->redis.hosts[i].host, NULL, &hints, &res) != 0)
                        continue;
                for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
                        char host[NI_MAXHOST];

                        if (getnameinfo(ai->ai_addr, ai->ai_addrlen, host, sizeof(host), NULL, 0, NI_NUMERICHOST) == 0 &&
                            net_rule_around(host, &rule) >= 0 && !net_rules_match(c->cluster_allow, c->n_cluster_allow, host))
                                (void) net_rule_add(c, &rule);
                }
                freeaddrinfo(res);
        }
}

static int parse_log_level(Config *c, const ConfigKey *k, const char *value, const char **ret_why) {
        int l = log_level_from_string(value);

        (void) k;
        if (l < 0)
                return conf_why(ret_why, "expected debug, info, notice, warning or err");
        c->log_level = l;
        return 0;
}

/* ---- The keys ------------------------------------------------------------------ */

#define KEY_PER_USER(name)                                                                   \
        { #name, parse_unsigned, FIELD(name, unsigned), 1, 1000000, "expected a number from 1 to 1000000" }

static const ConfigKey config_keys[] = {
        { "redis", parse_redis, FIELD(redis, RedisAddress) },
        { "redis_password_file", parse_path, FIELD(redis_password_file, char *) },
        { "sentinel_password_file", parse_path, FIELD(sentinel_password_file, char *) },
        { "tls_ca_file", parse_path, FIELD(tls_ca_file, char *) },
        { "tls_cert_file", parse_path, FIELD(tls_cert_file, char *) },
        { "tls_key_file", parse_path, FIELD(tls_key_file, char *) },
        { "tls_server_name", parse_host, FIELD(tls_server_name, char *) },
        { "min_replicas_acked", parse_int, FIELD(min_replicas_acked, int), 0, 16, "expected a number from 0 to 16" },
        { "sentinel_quorum", parse_unsigned, FIELD(sentinel_quorum, unsigned), 1, REDIS_HOSTS_MAX,
          "expected a number from 1 to 16" },
        { "lease_ttl", parse_usec, FIELD(lease_ttl, usec_t), LEASE_TTL_MIN, LEASE_TTL_MAX,
          "expected a duration such as 15s", "must be between 1s and 1h" },
        { "host_lease", parse_usec, FIELD(host_lease, usec_t), LEASE_TTL_MIN, HOST_LEASE_MAX,
          "expected a duration such as 1h", "must be between 1s and 7d" },
        { "namespace", parse_ident, FIELD(namespace, char[IDENT_MAX_LEN + 1]) },
        { "host_id", parse_ident, FIELD(host_id, char[IDENT_MAX_LEN + 1]) },
        { "key_prefix", parse_ident, FIELD(key_prefix, char[IDENT_MAX_LEN + 1]) },
        { "allow", parse_allow },
        { "limit", parse_limit },
        { "cluster_allow", parse_cluster_allow },
        { "log_level", parse_log_level },
        { "idle_time", parse_usec, FIELD(idle_time, usec_t), USEC_PER_SEC, 366 * 24 * 3600 * USEC_PER_SEC,
          "expected a duration such as 1d", "must be between 1s and 366d" },
        KEY_PER_USER(max_clients),
        KEY_PER_USER(max_clients_per_user),
        KEY_PER_USER(max_leases_per_user),
        KEY_PER_USER(max_names_per_user),
        /* (At most 65536: the agent looks a name up among them in full.) */
        { "max_redis_names_per_user", parse_unsigned, FIELD(max_redis_names_per_user, unsigned), 1, 65536,
          "expected a number from 1 to 65536" },
        KEY_PER_USER(max_weight_per_user),
};

int config_set(Config *c, const char *key, const char *value, const char **ret_why) {
        for (size_t i = 0; i < ELEMENTSOF(config_keys); i++)
                if (streq(key, config_keys[i].key))
                        return config_keys[i].parse(c, &config_keys[i], value, ret_why);
        return conf_why(ret_why, "unknown key");
}

static int config_set_cb(const char *key, const char *value, void *userdata, const char **ret_why) {
        return config_set(userdata, key, value, ret_why);
}

int config_load_file(Config *c, const char *path, char **ret_error) {
        return conf_parse_file(path, config_set_cb, c, ret_error);
}

/* ---- Once the whole file is read ----------------------------------------------- */

static int replace_secret(char **dest, char *secret) {
        if (*dest) {
                explicit_bzero(*dest, strlen(*dest));
                free(*dest);
        }
        *dest = secret;
        return 0;
}

/* The tls_* keys go with a TLS URL; a client key is the agent's alone. */
static int tls_finish(const Config *c, char **ret_error) {
        struct stat st;

        if (!c->redis.tls) {
                if (c->tls_ca_file || c->tls_cert_file || c->tls_key_file || c->tls_server_name)
                        return conf_error(ret_error, -EINVAL, "tls_* is set, but redis is not a TLS URL "
                                          "(rediss://, sentinel+tls://, cluster+tls://)");
                return 0;
        }
        if (!c->tls_cert_file != !c->tls_key_file)
                return conf_error(ret_error, -EINVAL, "tls_cert_file and tls_key_file go together");
        if (c->tls_key_file) {
                if (stat(c->tls_key_file, &st) < 0)
                        return conf_error(ret_error, -errno, "tls_key_file %s: %s", c->tls_key_file, strerror(errno));
                if (!S_ISREG(st.st_mode))
                        return conf_error(ret_error, -EINVAL, "tls_key_file %s is not a regular file", c->tls_key_file);
                if (st.st_mode & 0077)
                        return conf_error(ret_error, -EPERM, "tls_key_file %s is readable by others than its owner "
                                          "(mode %04o); chmod 600 it", c->tls_key_file, (unsigned) st.st_mode & 07777);
        }
        return 0;
}

int config_finish(Config *c, char **ret_error) {
        int r;

        if (!c->redis.unix_path && !c->redis.host && !c->redis.master_name && !c->redis.cluster)
                return conf_error(ret_error, -EINVAL, "No Redis server configured (redis = redis://host:6379, "
                                  "unix:/path, sentinel://… or cluster://…)");
        if (c->idle_time < 2 * c->lease_ttl)
                return conf_error(ret_error, -EINVAL, "idle_time must be at least twice lease_ttl");
        if (c->host_lease < c->lease_ttl)
                return conf_error(ret_error, -EINVAL, "host_lease must be at least lease_ttl");
        if (c->host_id[0] == '\0') {
                char host[HOST_NAME_MAX + 1] = "";

                if (gethostname(host, sizeof(host) - 1) < 0 || !ident_is_valid(host))
                        return conf_error(ret_error, -EINVAL, "Host name \"%s\" is not usable as host_id; set host_id",
                                          host);
                strcpy(c->host_id, host);
        }
        if (c->redis_password_file) {
                char *pw = NULL;

                r = conf_read_secret_file(c->redis_password_file, "Redis password", &pw, ret_error);
                if (r < 0)
                        return r;
                replace_secret(&c->redis.password, pw);
        }
        if (c->sentinel_password_file) {
                char *pw = NULL;

                if (!c->redis.master_name)
                        return conf_error(ret_error, -EINVAL,
                                          "sentinel_password_file is set, but redis is not a sentinel:// URL");
                r = conf_read_secret_file(c->sentinel_password_file, "Sentinel password", &pw, ret_error);
                if (r < 0)
                        return r;
                replace_secret(&c->redis.sentinel_password, pw);
        }
        r = tls_finish(c, ret_error);
        if (r < 0)
                return r;
        if (c->min_replicas_acked < 0)
                c->min_replicas_acked = c->redis.master_name ? 1 : 0;
        if (c->sentinel_quorum > 0 && !c->redis.master_name)
                return conf_error(ret_error, -EINVAL, "sentinel_quorum is set, but redis is not a sentinel:// URL");
        if (c->sentinel_quorum > c->redis.n_hosts && c->redis.master_name)
                return conf_error(ret_error, -EINVAL, "sentinel_quorum is %u, but the URL names %zu Sentinel(s)",
                                  c->sentinel_quorum, c->redis.n_hosts);
        if (c->cluster_allow_set && !c->redis.cluster)
                return conf_error(ret_error, -EINVAL, "cluster_allow is set, but redis is not a cluster:// URL");
        /* (Nothing is resolved here: config_cluster_allow_derive().) */
        return 0;
}

/* ---- Questions the agent asks of it -------------------------------------------- */

int config_user_rules(const Config *c, uid_t uid, bool *ret_match) {
        return allow_rules_match_user(c->allow, c->n_allow, uid, ret_match);
}

bool config_rules_permit(const Config *c, const bool *match, const char *name) {
        return allow_rules_permit(c->allow, c->n_allow, match, name);
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

bool config_cluster_allows(const Config *c, const char *host) {
        if (net_rules_match(c->cluster_allow, c->n_cluster_allow, host))
                return true;
        if (c->cluster_allow_set)
                return false;
        for (size_t i = 0; i < c->redis.n_hosts; i++)
                if (streq(c->redis.hosts[i].host, host))
                        return true;
        return false;
}

/* A name's keys stay in Redis for its life after each call: idle_time
 * after a renewal, NAME_LIFE_NEW (at most idle_time) after a request or a
 * release, and never less than twice the lease (the keys outlive every
 * renewal tick, however long the lease): a name nobody ever held for a
 * third of a lease leaves Redis within minutes. A renewal for a uid other
 * than root gives the shorter life too: the names a user makes, holds
 * across a renewal tick and lets go, as fast as it may, leave within
 * minutes, not a day (for renewals uid is root when any lease renewed is
 * root's), which is what bounds what one user keeps in Redis
 * (max_redis_names_per_user counts a user's names for that life). A slot
 * the host holds itself has its own lease (host_lease), and its name's
 * keys are kept for at least twice that from its calls, so that a host
 * that reboots right after its grant finds its slot when it is back. */
#define NAME_LIFE_NEW (10 * 60 * USEC_PER_SEC)
usec_t config_name_life(const Config *c, uid_t uid, bool host_held, bool renewal) {
        usec_t ttl = host_held ? c->host_lease : c->lease_ttl;
        usec_t idle = c->idle_time ?: DEFAULT_IDLE_TIME;

        if (host_held)
                return MAX(idle, 2 * ttl);
        if (renewal && uid == 0)
                return idle;
        return MAX(MIN(idle, NAME_LIFE_NEW), 2 * ttl);
}

uint32_t config_limit_for(const Config *c, const char *name) {
        uint32_t limit = UINT32_MAX;

        for (size_t i = 0; i < c->n_limits; i++)
                if (fnmatch(c->limits[i].pattern, name, 0) == 0 && c->limits[i].slots < limit)
                        limit = c->limits[i].slots;
        return limit;
}
