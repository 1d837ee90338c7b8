/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
        bool tls;               /* rediss://, sentinel+tls://, cluster+tls://: every TCP connection speaks TLS */
} RedisAddress;

/* "redis://[user[:password]@]host[:port][/db]", "unix:/path/to/redis.sock",
 * "sentinel://[user[:password]@]host:port[,host:port…]/MASTER" or
 * "cluster://[user[:password]@]host:port[,host:port…]"; with TLS (in a
 * build that has it) "rediss://…", "sentinel+tls://…", "cluster+tls://…".
 * ret_why (may be NULL) tells why a URL is refused. */
int redis_address_parse(const char *url, RedisAddress *ret, const char **ret_why);
void redis_address_done(RedisAddress *a);
/* A host name or address as a URL or a peer may give it: what hiredis is
 * asked to connect to, nothing else. */
bool redis_host_is_valid(const char *host);
/* "host:port", "[v6]:port"; snprintf()'s count. */
int redis_host_port_format(char *buf, size_t size, const char *host, unsigned port);
/* For logs and status: never includes the password. */
const char *redis_address_to_string(const RedisAddress *a, char *buf, size_t size);
