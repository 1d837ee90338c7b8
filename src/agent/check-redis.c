/* SPDX-License-Identifier: MIT */
/* fleetsemd --check-redis: the configuration's Redis looked at from the
 * command line, read-only (INFO; under Sentinel first the master the
 * Sentinels name): whether it can be reached, and whether it runs as
 * fleetsem needs it (maxmemory-policy noeviction: fleetsemd(8), SAFETY;
 * appendonly yes). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"
#include "check-redis.h"
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

/* Looks at one server; 0 fine, 1 a problem (said on stderr). */
static int check_server(const RedisAddress *a, const char *unix_path, const char *host, unsigned port) {
        RedisProbe p = { .unix_path = unix_path, .host = host, .port = port, .user = a->user,
                         .password = a->password, .db = a->db, .timeout = PROBE_TIMEOUT };
        char where[300], version[32], policy[64], aof[8];
        RedisReply *reply = NULL;
        const char *s;
        size_t len;
        int r;

        if (unix_path)
                snprintf(where, sizeof(where), "unix:%s", unix_path);
        else
                (void) redis_host_port_format(where, sizeof(where), host, port);
        r = redis_probe(&p, 2, (const char *[]) { "INFO", "default" }, &reply);
        if (r < 0) {
                fprintf(stderr, "Redis at %s: cannot be reached or refused the login: %s\n", where, strerror(-r));
                return 1;
        }
        if (redis_reply_string(reply, &s, &len) < 0) {
                fprintf(stderr, "Redis at %s: refused INFO: %s\n", where, redis_reply_error(reply) ?: "no answer");
                redis_reply_free(reply);
                return 1;
        }
        info_field(s, len, "redis_version:", version, sizeof(version));
        info_field(s, len, "maxmemory_policy:", policy, sizeof(policy));
        info_field(s, len, "aof_enabled:", aof, sizeof(aof));
        redis_reply_free(reply);
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

/* The master a Sentinel names, into host/port; <0 when none says. */
static int sentinel_master(const RedisAddress *a, char *host, size_t size, unsigned *port) {
        for (size_t i = 0; i < a->n_hosts; i++) {
                RedisProbe p = { .host = a->hosts[i].host, .port = a->hosts[i].port,
                                 .password = a->sentinel_password, .timeout = PROBE_TIMEOUT };
                RedisReply *reply = NULL;
                char portbuf[8];
                unsigned long v;
                char *end;

                if (redis_probe(&p, 3, (const char *[]) { "SENTINEL", "get-master-addr-by-name", a->master_name },
                                &reply) < 0)
                        continue;
                if (redis_reply_array_len(reply) == 2 && redis_reply_array_string(reply, 0, host, size) >= 0 &&
                    redis_host_is_valid(host) && redis_reply_array_string(reply, 1, portbuf, sizeof(portbuf)) >= 0) {
                        errno = 0;
                        v = strtoul(portbuf, &end, 10);
                        if (errno == 0 && *end == '\0' && v > 0 && v <= 65535) {
                                *port = (unsigned) v;
                                redis_reply_free(reply);
                                return 0;
                        }
                }
                redis_reply_free(reply);
        }
        return -ENOENT;
}

int check_redis(const Config *config) {
        const RedisAddress *a = &config->redis;
        char host[256];
        unsigned port;
        int bad = 0;

        if (a->tls) {
                printf("Redis over TLS: not looked at from the command line; the agent says what it finds "
                       "(fleetsem status).\n");
                return 0;
        }
        if (a->unix_path || (!a->master_name && !a->cluster))
                return check_server(a, a->unix_path, a->host, a->port);
        if (a->master_name) {
                if (sentinel_master(a, host, sizeof(host), &port) < 0) {
                        fprintf(stderr, "No Sentinel named master %s.\n", a->master_name);
                        return 1;
                }
                return check_server(a, NULL, host, port);
        }
        /* A Cluster: the nodes the URL names (the agent finds the others). */
        for (size_t i = 0; i < a->n_hosts; i++)
                bad |= check_server(a, NULL, a->hosts[i].host, a->hosts[i].port);
        return bad;
}
