/* SPDX-License-Identifier: MIT */
/* fleetsemd --check-redis: the configuration's Redis looked at from the
 * command line, read-only (INFO; under Sentinel first the master the
 * Sentinels name): whether it can be reached, and whether it runs as
 * fleetsem needs it (maxmemory-policy noeviction: fleetsemd(8), SAFETY;
 * appendonly yes). fleetsemd --load-library: the library loaded there
 * (each master of a Cluster, as many as the agents follow: SHARDS_MAX)
 * where it is missing or older. Both take the master, or the masters, as
 * the agent does (peers.h): a quorum of Sentinels, a Cluster's nodes
 * inside cluster_allow; whoever else answers is sent nothing. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "check-redis.h"
#include "peers.h"
#include "redis-blocking.h"
#include "redis-layer.h"
#include "hash-slot.h"
#include "redis.h"

#define PROBE_TIMEOUT (3 * USEC_PER_SEC)

/* FIELD's value in an INFO reply ("" when it has none), at most size-1 bytes. */
static void info_field(const char *s, size_t len, const char *field, char *buf, size_t size) {
        size_t n = strlen(field), k = 0;
        const char *p = memmem(s, len, field, n);

        if (p && (p == s || p[-1] == '\n')) {
                p += n;
                while (p + k < s + len && k < size - 1 && p[k] != '\r' && p[k] != '\n')
                        k++;
                memcpy(buf, p, k);
        }
        buf[k] = '\0';
}

static void where_format(char *where, size_t size, const char *unix_path, const char *host, unsigned port) {
        if (unix_path)
                snprintf(where, size, "unix:%s", unix_path);
        else
                (void) redis_host_port_format(where, size, host, port);
}

/* Looks at one server; 0 fine, 1 a problem (said on stderr). */
static int check_server(const RedisAddress *a, const char *unix_path, const char *host, unsigned port) {
        RedisProbe p = { .unix_path = unix_path, .host = host, .port = port, .user = a->user,
                         .password = a->password, .db = a->db, .timeout = PROBE_TIMEOUT };
        char where[300], version[32], policy[64], aof[8];
        _cleanup_(redis_reply_freep) RedisReply *reply = NULL;
        const char *s;
        size_t len;
        int r;

        where_format(where, sizeof(where), unix_path, host, port);
        r = redis_probe(&p, 2, (const char *[]) { "INFO", "default" }, &reply);
        if (r < 0) {
                fprintf(stderr, "Redis at %s: cannot be reached or refused the login: %s\n", where, strerror(-r));
                return 1;
        }
        if (redis_reply_string(reply, &s, &len) < 0) {
                fprintf(stderr, "Redis at %s: refused INFO: %s\n", where, redis_reply_error(reply) ?: "no answer");
                return 1;
        }
        info_field(s, len, "redis_version:", version, sizeof(version));
        info_field(s, len, "maxmemory_policy:", policy, sizeof(policy));
        info_field(s, len, "aof_enabled:", aof, sizeof(aof));
        printf("Redis at %s: version %s, maxmemory-policy %s, appendonly %s\n", where, version[0] ? version : "?",
               policy[0] ? policy : "?", streq(aof, "1") ? "yes" : streq(aof, "0") ? "no" : "?");
        if (!streq(policy, "noeviction")) {
                fprintf(stderr, "Redis at %s runs with maxmemory-policy %s, which may evict fleetsem's keys: the agents "
                        "grant nothing until it is noeviction (CONFIG SET maxmemory-policy noeviction, and in "
                        "redis.conf).\n", where, policy[0] ? policy : "(not said)");
                return 1;
        }
        if (!streq(aof, "1"))
                fprintf(stderr, "Redis at %s runs with appendonly no: a restart loses fleetsem's state, and no slot is "
                        "granted for a lease after it (appendonly yes keeps it).\n", where);
        return 0;
}

/* The master a quorum of the Sentinels name (peers.h: as the agent takes
 * it), into host/port; <0 when no quorum does (said on stderr): nothing
 * is sent to a master one Sentinel alone names, nor the password. */
static int sentinel_master(const Config *c, char *host, size_t size, unsigned *port) {
        const RedisAddress *a = &c->redis;
        char votes[REDIS_HOSTS_MAX][280] = {};
        const char *vote_of[REDIS_HOSTS_MAX], *winner;
        size_t answered, best;
        char portbuf[8];
        uint64_t v;

        assert(size >= 256);    /* the sscanf below */
        for (size_t i = 0; i < a->n_hosts; i++) {
                RedisProbe p = { .host = a->hosts[i].host, .port = a->hosts[i].port,
                                 .password = a->sentinel_password, .timeout = PROBE_TIMEOUT };
                _cleanup_(redis_reply_freep) RedisReply *reply = NULL;
                char h[256];

                vote_of[i] = votes[i];
                if (redis_probe(&p, 3, (const char *[]) { "SENTINEL", "get-master-addr-by-name", a->master_name },
                                &reply) < 0)
                        continue;
                if (redis_reply_array_len(reply) == 2 && redis_reply_array_string(reply, 0, h, sizeof(h)) >= 0 &&
                    redis_host_is_valid(h) && redis_reply_array_string(reply, 1, portbuf, sizeof(portbuf)) >= 0 &&
                    parse_uint64(portbuf, 1, 65535, &v) >= 0)
                        snprintf(votes[i], sizeof(votes[i]), "%s %" PRIu64, h, v);
        }
        best = peers_sentinel_votes(vote_of, a->n_hosts, &winner, &answered);
        if (!winner || best < peers_sentinel_quorum(c) || sscanf(winner, "%255s %7s", host, portbuf) != 2 ||
            parse_uint64(portbuf, 1, 65535, &v) < 0) {
                fprintf(stderr, "No quorum of Sentinels names the master of %s: %zu of %zu Sentinels answered, at most "
                        "%zu agree%s%s (quorum %u); nothing sent to any master.\n", a->master_name, answered,
                        a->n_hosts, best, winner ? " on " : "", winner ?: "", peers_sentinel_quorum(c));
                return -ENOENT;
        }
        *port = (unsigned) v;
        return 0;
}

int redis_master_find(const Config *c, RedisMaster *ret) {
        const RedisAddress *a = &c->redis;

        assert(!a->cluster);
        *ret = (RedisMaster) { .unix_path = a->unix_path, .port = a->port };
        if (a->master_name && !a->unix_path) {
                if (sentinel_master(c, ret->host, sizeof(ret->host), &ret->port) < 0)
                        return -ENOENT;
        } else if (!a->unix_path)
                snprintf(ret->host, sizeof(ret->host), "%s", a->host ?: "");
        where_format(ret->where, sizeof(ret->where), ret->unix_path, ret->host, ret->port);
        return 0;
}

int check_redis(const Config *config) {
        const RedisAddress *a = &config->redis;
        RedisMaster m;
        int bad = 0;

        if (a->tls) {
                printf("Redis over TLS: not looked at from the command line; the agent says what it finds "
                       "(fleetsem status).\n");
                return 0;
        }
        if (!a->cluster) {
                if (redis_master_find(config, &m) < 0)
                        return 1;
                return check_server(a, m.unix_path, m.unix_path ? NULL : m.host, m.port);
        }
        /* A Cluster: the nodes the URL names (the agent finds the others). */
        for (size_t i = 0; i < a->n_hosts; i++)
                bad |= check_server(a, NULL, a->hosts[i].host, a->hosts[i].port);
        return bad;
}

/* ---- --load-library ------------------------------------------------------------ */

/* The library loaded into one server where it is missing or older (or
 * the other text: a Cluster's, or not); 0 done or nothing to do, 1 not
 * (said on stderr). */
static int load_server(const RedisAddress *a, bool sharded, const char *unix_path, const char *host, unsigned port) {
        RedisProbe p = { .unix_path = unix_path, .host = host, .port = port, .user = a->user,
                         .password = a->password, .db = a->db, .timeout = PROBE_TIMEOUT };
        _cleanup_free_ char *text = NULL;
        _cleanup_(redis_reply_freep) RedisReply *reply = NULL;
        char where[300], had[64] = "none", hash[LUA_LIBRARY_HASH_LEN + 1] = "";
        long long version = 0;
        bool was_sharded = false;
        const char *err, *name;
        size_t len;
        int r;

        where_format(where, sizeof(where), unix_path, host, port);
        r = redis_probe(&p, 3, (const char *[]) { "FCALL", LUA_VERSION_FUNCTION, "0" }, &reply);
        if (r < 0) {
                fprintf(stderr, "Redis at %s: cannot be reached or refused the login: %s\n", where, strerror(-r));
                return 1;
        }
        r = library_version_parse(reply, &version, &was_sharded, hash);
        if (r == -EIO)
                fprintf(stderr, "Redis at %s: refused FCALL %s: %s\n", where, LUA_VERSION_FUNCTION,
                        redis_reply_error(reply) ?: "no answer");
        reply = redis_reply_free(reply);
        if (r == -EOPNOTSUPP)
                fprintf(stderr, "Redis at %s has no FCALL (Redis functions): fleetsem needs Redis 7.0 or later, or "
                        "Valkey 7.2 or later.\n", where);
        else if (r == -EBADMSG)
                fprintf(stderr, "Redis at %s holds a fleetsem library whose version this fleetsemd cannot read: "
                        "nothing done.\n", where);
        if (r < 0 && r != -ENOENT)
                return 1;
        if (r == 0 && version > (long long) lua_library_version) {
                fprintf(stderr, "Redis at %s holds fleetsem library version %lld, newer than this fleetsemd's (%u): "
                        "nothing done; this fleetsemd (and its agents) must be upgraded.\n", where, version,
                        lua_library_version);
                return 1;
        }
        r = library_text_new(sharded, &text);
        if (r < 0) {
                fprintf(stderr, "Failed to make the library's text: %s\n", library_text_error(r));
                return 1;
        }
        if (r == 0 && library_match(version, was_sharded, hash, sharded) == LIBRARY_CHANGED)
                snprintf(had, sizeof(had), "version %lld, another text", version);
        else if (r == 0 && library_match(version, was_sharded, hash, sharded) == LIBRARY_OWN) {
                /* The same version and hash: the same text? (Read whole
                 * here, once: a hand may have left the hash as it was.) */
                r = redis_probe(&p, 5, (const char *[]) { "FUNCTION", "LIST", "LIBRARYNAME", LUA_LIBRARY_NAME, "WITHCODE" },
                                &reply);
                if (r < 0 || redis_reply_error(reply)) {
                        fprintf(stderr, "Redis at %s: cannot read the library's text (FUNCTION LIST): %s\n", where,
                                r < 0 ? strerror(-r) : redis_reply_error(reply));
                        return 1;
                }
                r = library_code_parse(reply, text);
                reply = redis_reply_free(reply);
                if (r == 0) {
                        printf("Redis at %s: fleetsem library version %lld is there already, its text this "
                               "fleetsemd's; nothing done.\n", where, version);
                        return 0;
                }
                snprintf(had, sizeof(had), "version %lld, another text", version);
        } else if (version > 0)
                snprintf(had, sizeof(had), "version %lld%s", version,
                         was_sharded == sharded ? "" : was_sharded ? ", a Cluster's" : ", not a Cluster's");

        r = redis_probe(&p, 4, (const char *[]) { "FUNCTION", "LOAD", "REPLACE", text }, &reply);
        if (r < 0) {
                fprintf(stderr, "Redis at %s: cannot be reached or refused the login: %s\n", where, strerror(-r));
                return 1;
        }
        err = redis_reply_error(reply);
        if (err || redis_reply_string(reply, &name, &len) < 0 || len != strlen(LUA_LIBRARY_NAME) ||
            memcmp(name, LUA_LIBRARY_NAME, len) != 0) {
                fprintf(stderr, "Redis at %s refused FUNCTION LOAD: %s\n", where, err ?: "an unexpected reply");
                return 1;
        }
        printf("Redis at %s: fleetsem library version %u loaded (it had %s).\n", where, lua_library_version, had);
        return 0;
}

int cluster_masters_find(const Config *c, RedisMaster **ret, size_t *ret_n, uint16_t *ret_owner) {
        const RedisAddress *a = &c->redis;

        for (size_t i = 0; i < a->n_hosts; i++) {
                RedisProbe p = { .host = a->hosts[i].host, .port = a->hosts[i].port, .user = a->user,
                                 .password = a->password, .timeout = PROBE_TIMEOUT };
                _cleanup_free_ RedisMaster *masters = NULL;
                size_t n = 0, n_alloc = 0, n_ranges;
                _cleanup_(redis_reply_freep) RedisReply *reply = NULL;

                if (redis_probe(&p, 2, (const char *[]) { "CLUSTER", "SLOTS" }, &reply) < 0)
                        continue;
                if (ret_owner)
                        for (size_t s = 0; s < HASH_SLOTS; s++)
                                ret_owner[s] = UINT16_MAX;
                n_ranges = redis_reply_array_len(reply);
                for (size_t k = 0; k < n_ranges; k++) {
                        const RedisReply *range = redis_reply_array_get(reply, k);
                        const RedisReply *master = redis_reply_array_get(range, 2);
                        long long port, lo, hi;
                        char host[256];
                        size_t j;

                        if (redis_reply_array_string(master, 0, host, sizeof(host)) < 0 || !redis_host_is_valid(host) ||
                            redis_reply_array_integer(master, 1, &port) < 0 || port < 1 || port > 65535 ||
                            redis_reply_array_integer(range, 0, &lo) < 0 || redis_reply_array_integer(range, 1, &hi) < 0 ||
                            lo < 0 || hi < lo || hi >= HASH_SLOTS)
                                continue;
                        for (j = 0; j < n; j++)
                                if (masters[j].port == (unsigned) port && streq(masters[j].host, host))
                                        break;
                        if (j == n) {
                                char name[300];

                                (void) redis_host_port_format(name, sizeof(name), host, (unsigned) port);
                                if (!peers_cluster_node_allowed(c, host)) {
                                        fprintf(stderr, "Redis Cluster: node %s:%u names master %s, which is outside "
                                                "cluster_allow (or, without it, the seed nodes' networks): the agents "
                                                "do not connect to it; nothing done, nothing sent to it.\n",
                                                a->hosts[i].host, a->hosts[i].port, name);
                                        return -EPERM;
                                }
                                if (n >= SHARDS_MAX) {
                                        fprintf(stderr, "Redis Cluster: the map names more than " STRINGIFY(SHARDS_MAX)
                                                " masters, more than the agents follow; nothing done.\n");
                                        return -E2BIG;
                                }
                                if (n >= n_alloc) {
                                        size_t want = MIN(MAX(n_alloc * 2, (size_t) 16), (size_t) SHARDS_MAX);
                                        RedisMaster *t = reallocarray(masters, want, sizeof(RedisMaster));

                                        if (!t) {
                                                fprintf(stderr, "Out of memory reading the Cluster's masters.\n");
                                                return -ENOMEM;
                                        }
                                        masters = t;
                                        n_alloc = want;
                                }
                                masters[n] = (RedisMaster) { .port = (unsigned) port };
                                snprintf(masters[n].host, sizeof(masters[n].host), "%s", host);
                                snprintf(masters[n].where, sizeof(masters[n].where), "%s", name);
                                n++;
                        }
                        if (ret_owner)
                                for (long long s = lo; s <= hi; s++)
                                        ret_owner[s] = (uint16_t) j;
                }
                if (n == 0)
                        continue;
                *ret = TAKE_PTR(masters);
                *ret_n = n;
                return 0;
        }
        fprintf(stderr, "No Cluster node the configuration names gave its masters (CLUSTER SLOTS).\n");
        return -ENOENT;
}

/* Each master of a Cluster (cluster_masters_find()) gets the library once. */
static int load_cluster(const Config *c) {
        _cleanup_free_ RedisMaster *masters = NULL;
        size_t n = 0;
        int bad = 0;

        if (cluster_masters_find(c, &masters, &n, NULL) < 0)
                return 1;
        for (size_t j = 0; j < n; j++)
                bad |= load_server(&c->redis, true, NULL, masters[j].host, masters[j].port);
        return bad;
}

int load_library(const Config *config) {
        const RedisAddress *a = &config->redis;
        RedisMaster m;

        if (a->tls) {
                fprintf(stderr, "Redis over TLS: the library is not loaded from the command line; load it with "
                        "redis-cli, or let the agents load it (fleetsemd(8), THE LIBRARY).\n");
                return 1;
        }
        if (a->cluster)
                return load_cluster(config);
        if (redis_master_find(config, &m) < 0)
                return 1;
        return load_server(a, false, m.unix_path, m.unix_path ? NULL : m.host, m.port);
}
