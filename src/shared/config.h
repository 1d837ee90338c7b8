/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "names.h"
#include "time-util.h"

#define DEFAULT_CONFIG_FILE "/etc/fleetsem/fleetsem.conf"
#define DEFAULT_NAMESPACE "fleetsem"
#define DEFAULT_KEY_PREFIX "fleetsem"
#define DEFAULT_LEASE_TTL (15 * USEC_PER_SEC)
#define LEASE_TTL_MIN (1 * USEC_PER_SEC)
#define LEASE_TTL_MAX (3600 * USEC_PER_SEC)

/* Reads "key = value" lines ('#' comments, blank lines) and hands each pair
 * to cb. cb returns <0 with *ret_why set to reject a line; the error then
 * reads "FILE:LINE: why" in ret_error (malloc'ed). */
typedef int (*conf_line_cb)(const char *key, const char *value, void *userdata, const char **ret_why);
int conf_parse_file(const char *path, conf_line_cb cb, void *userdata, char **ret_error);

typedef struct RedisHost {
        char *host;
        uint16_t port;
} RedisHost;

#define REDIS_HOSTS_MAX 16

typedef struct RedisAddress {
        char *unix_path;        /* unix:/path, or NULL for TCP */
        char *host;
        uint16_t port;
        char *master_name;      /* sentinel://: the master the Sentinels name */
        bool cluster;           /* cluster://: a Redis Cluster */
        RedisHost *hosts;       /* sentinel://: the Sentinels; cluster://: nodes to ask for the map */
        size_t n_hosts;
        char *sentinel_password;
        char *user;             /* Redis 6 ACL user, or NULL */
        char *password;         /* never logged, never in argv */
        unsigned db;
} RedisAddress;

/* "redis://[user[:password]@]host[:port][/db]", "unix:/path/to/redis.sock",
 * "sentinel://[user[:password]@]host:port[,host:port…]/MASTER" or
 * "cluster://[user[:password]@]host:port[,host:port…]". */
int redis_address_parse(const char *url, RedisAddress *ret, const char **ret_why);
void redis_address_done(RedisAddress *a);
/* For logs and status: never includes the password. */
const char *redis_address_to_string(const RedisAddress *a, char *buf, size_t size);

typedef struct AllowRule {
        char *pattern;          /* fnmatch() glob over names */
        char **principals;      /* "user" or "@group", NULL-terminated */
} AllowRule;

/* "limit = GLOB N": requests from this host for matching names ask for
 * at most N slots (the smallest matching rule wins). */
typedef struct LimitRule {
        char *pattern;
        uint32_t slots;
} LimitRule;

#define DEFAULT_MAX_PER_USER 256
#define DEFAULT_IDLE_TIME (24 * 3600 * USEC_PER_SEC)

typedef struct Config {
        RedisAddress redis;
        char *redis_password_file;
        char *sentinel_password_file;
        int min_replicas_acked;  /* -1: the default (1 with Sentinel, else 0) */
        usec_t lease_ttl;
        char namespace[IDENT_MAX_LEN + 1];
        char host_id[IDENT_MAX_LEN + 1];
        char key_prefix[IDENT_MAX_LEN + 1];
        AllowRule *allow;
        size_t n_allow;
        LimitRule *limits;
        size_t n_limits;
        unsigned max_clients;
        unsigned max_clients_per_user;  /* connections of one non-root uid, in every state */
        unsigned max_leases_per_user;   /* held and waiting leases of one non-root uid */
        usec_t idle_time;       /* a name unused this long leaves Redis */
} Config;

void config_init(Config *c);
void config_done(Config *c);
/* Sets one key; the same keys as the file. */
int config_set(Config *c, const char *key, const char *value, const char **ret_why);
int config_load_file(Config *c, const char *path, char **ret_error);
/* Fills in what was left unset (host_id from the host name) and reads the
 * password file. */
int config_finish(Config *c, char **ret_error);

/* Whether user (whose primary group is primary) is a member of group, by
 * name: its primary group or one of its supplementary groups. */
bool user_in_group(const char *user, gid_t primary, const char *group);

/* Whether uid may ask for name: root always, others when an allow rule
 * names them or one of their groups. 1 yes, 0 no, -errno when a user or
 * group could not be looked up (EMFILE, a directory that does not answer):
 * that is no answer, never a "no". */
int config_permits(const Config *c, uid_t uid, const char *name);
/* The same in two steps, for callers that cache the lookups: which allow
 * rules name uid or one of its groups (ret_match: n_allow entries; all
 * false for an unknown uid; -errno as above), then whether one of those
 * matches name. */
int config_user_rules(const Config *c, uid_t uid, bool *ret_match);
bool config_rules_permit(const Config *c, const bool *match, const char *name);

/* The most slots a request from this host for name may ask for
 * (UINT32_MAX when no limit rule matches). */
uint32_t config_limit_for(const Config *c, const char *name);
