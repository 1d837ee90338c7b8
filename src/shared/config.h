/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "conf-file.h"
#include "names.h"
#include "net-rules.h"
#include "redis-address.h"
#include "time-util.h"
#include "user-rules.h"

#define DEFAULT_CONFIG_FILE "/etc/fleetsem/fleetsem.conf"
#define DEFAULT_NAMESPACE "fleetsem"
#define DEFAULT_KEY_PREFIX "fleetsem"
#define DEFAULT_LEASE_TTL (15 * USEC_PER_SEC)
#define LEASE_TTL_MIN (1 * USEC_PER_SEC)
#define LEASE_TTL_MAX (3600 * USEC_PER_SEC)
/* A slot the host holds (fleetsem reboot): how long it stays counted after
 * its last renewal, while the host reboots or never comes back. */
#define DEFAULT_HOST_LEASE (3600 * USEC_PER_SEC)
#define HOST_LEASE_MAX (7 * 24 * 3600 * USEC_PER_SEC)

/* "limit = GLOB N": requests from this host for matching names ask for
 * at most N slots (the smallest matching rule wins). */
typedef struct LimitRule {
        char *pattern;
        uint32_t slots;
} LimitRule;

#define DEFAULT_MAX_PER_USER 256
#define DEFAULT_MAX_NAMES_PER_USER 64
#define DEFAULT_MAX_REDIS_NAMES_PER_USER 256
#define DEFAULT_MAX_WEIGHT_PER_USER 1
#define DEFAULT_IDLE_TIME (24 * 3600 * USEC_PER_SEC)

typedef struct Config {
        RedisAddress redis;
        char *redis_password_file;
        char *sentinel_password_file;
        /* TLS (a TLS URL only): the CAs, the client's certificate and key,
         * the name servers' certificates must carry; NULL: none given. */
        char *tls_ca_file;
        char *tls_cert_file;
        char *tls_key_file;
        char *tls_server_name;
        int min_replicas_acked;  /* -1: the default (1 with Sentinel, else 0) */
        unsigned sentinel_quorum; /* Sentinels that must name a master; 0: a majority of the URL's */
        int log_level;          /* LOG_*; -1: unset (info, or --log-level) */
        usec_t lease_ttl;
        usec_t host_lease;      /* of a slot the host holds (hold=host); at least lease_ttl */
        char namespace[IDENT_MAX_LEN + 1];
        char host_id[IDENT_MAX_LEN + 1];
        char key_prefix[IDENT_MAX_LEN + 1];
        AllowRule *allow;
        size_t n_allow;
        LimitRule *limits;
        size_t n_limits;
        unsigned max_clients;
        unsigned max_clients_per_user;  /* connections of one non-root uid, in every state */
        unsigned max_leases_per_user;   /* units (weights summed) of one non-root uid's held and waiting leases */
        unsigned max_weight_per_user;   /* the weight one request of a non-root uid may ask for */
        unsigned max_names_per_user;    /* distinct names one non-root uid holds or waits for */
        unsigned max_redis_names_per_user; /* … has in Redis: those, and those it left whose keys are still there */
        usec_t idle_time;       /* a name unused this long leaves Redis */
        /* cluster://: the networks a Cluster node may be in for the agent to
         * connect to it (and send it the password), as cluster_allow says or,
         * without it, those of the seed nodes (see config_cluster_allows()). */
        NetRule *cluster_allow;
        size_t n_cluster_allow;
        bool cluster_allow_set;         /* cluster_allow given, not derived */
} Config;

void config_init(Config *c);
void config_done(Config *c);
/* Sets one key; the same keys as the file. */
int config_set(Config *c, const char *key, const char *value, const char **ret_why);
int config_load_file(Config *c, const char *path, char **ret_error);
/* Fills in what was left unset (host_id from the host name) and reads the
 * password file. */
int config_finish(Config *c, char **ret_error);
/* Without cluster_allow, for a cluster:// URL: the network of each seed
 * node (its /24, or /64), and those of a seed's name's addresses as the
 * resolver gives them now (a name it cannot resolve yet is allowed as
 * that name). The resolver is asked and waited for: only for a
 * configuration read before the agent serves (its start,
 * --check-config), never on a reload, where nothing may block the event
 * loop (and the rules in force stay until a restart anyway). */
void config_cluster_allow_derive(Config *c);

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
/* Whether a Cluster node at host (as CLUSTER SLOTS, MOVED or ASK give it)
 * may be connected to: in a cluster_allow network, or a seed node's own
 * network or name. */
bool config_cluster_allows(const Config *c, const char *host);
uint32_t config_limit_for(const Config *c, const char *name);

/* How long a name's keys stay in Redis after a call (usec): a renewal's
 * (renewal) or a request's or release's, of uid, for a slot the host
 * holds itself (host_held) or not (config.c says why). */
usec_t config_name_life(const Config *c, uid_t uid, bool host_held, bool renewal);
