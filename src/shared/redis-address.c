/* SPDX-License-Identifier: MIT */
/* Where Redis is: the URL of "redis =" and --redis, parsed strictly. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf-file.h"
#include "macro.h"
#include "names.h"
#include "redis-address.h"

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


bool redis_host_is_valid(const char *host) {
        return host[0] && strlen(host) <= 253 &&
               strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:") == strlen(host);
}

int redis_host_port_format(char *buf, size_t size, const char *host, unsigned port) {
        bool v6 = strchr(host, ':');

        return snprintf(buf, size, "%s%s%s:%u", v6 ? "[" : "", host, v6 ? "]" : "", port);
}

/* "host", "host:port", "[v6]", "[v6]:port" (port unchanged when absent). */
static int parse_host_port(char *p, char **ret_host, uint16_t *ret_port, const char **ret_why) {
        char *colon;
        uint64_t v;

        if (*p == '[') {
                char *close = strchr(p, ']');

                if (!close)
                        return conf_why(ret_why, "unterminated [IPv6 address]");
                *close = '\0';
                colon = close[1] == ':' ? close + 1 : NULL;
                if (close[1] && !colon)
                        return conf_why(ret_why, "garbage after ]");
                p++;
        } else
                colon = strchr(p, ':');
        if (colon) {
                *colon = '\0';
                if (parse_uint64(colon + 1, 1, 65535, &v) < 0)
                        return conf_why(ret_why, "port must be 1-65535");
                *ret_port = (uint16_t) v;
        }
        if (!redis_host_is_valid(p))
                return conf_why(ret_why, "invalid host");
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
                        return conf_why(ret_why, streq(what, "Sentinel") ? "too many Sentinels (at most 16)"
                                                                        : "too many Cluster nodes (at most 16)");
                h->port = default_port;
                r = parse_host_port(tok, &h->host, &h->port, ret_why);
                if (r < 0)
                        return r;
                a->n_hosts++;
        }
        if (a->n_hosts == 0)
                return conf_why(ret_why, streq(what, "Sentinel") ? "expected at least one Sentinel host:port"
                                                                : "expected at least one Cluster node host:port");
        return 0;
}

/* "h1:p1,h2:p2/MASTER": the Sentinels and the name of the master they watch. */
static int parse_sentinels(char *p, RedisAddress *a, const char **ret_why) {
        char *slash = strchr(p, '/');

        if (!slash || !name_is_valid(slash + 1) || strchr(slash + 1, '/'))
                return conf_why(ret_why, "expected sentinel://host:port[,host:port...]/MASTER");
        *slash = '\0';
        a->master_name = strdup(slash + 1);
        if (!a->master_name)
                return -ENOMEM;
        return parse_hosts(p, a, 26379, "Sentinel", ret_why);
}

/* "h1:p1,h2:p2": nodes of the Cluster, any of which tells the map. */
static int parse_cluster(char *p, RedisAddress *a, const char **ret_why) {
        if (strchr(p, '/'))
                return conf_why(ret_why, "expected cluster://host:port[,host:port...] (a Cluster has no databases)");
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
                        return conf_why(ret_why, "expected unix:/absolute/path (at most 107 bytes)");
                a.unix_path = strdup(path);
                if (!a.unix_path)
                        return -ENOMEM;
                *ret = a;
                return 0;
        }
        if (strneq(url, "rediss://", 9) || strneq(url, "sentinel+tls://", 15) || strneq(url, "cluster+tls://", 14)) {
#if FLEETSEM_TLS
                /* The same, each connection in TLS: read as the plain scheme. */
                const char *rest = strstr(url, "://") + 3;

                r = asprintf(&copy, "%s://%s", strneq(url, "rediss", 6) ? "redis" : strneq(url, "sentinel", 8) ?
                             "sentinel" : "cluster", rest);
                if (r < 0)
                        return -ENOMEM;
                r = redis_address_parse(copy, ret, ret_why);
                if (r >= 0)
                        ret->tls = true;
                return r;
#else
                return conf_why(ret_why, "TLS to Redis needs hiredis 1.0 or later with TLS (hiredis_ssl), which this "
                               "build lacks (Debian 12 has hiredis 0.14): connect through a local TLS client such as "
                               "stunnel4 and point redis= at it (fleetsem.conf(5), TLS)");
#endif
        }
        sentinel = strneq(url, "sentinel://", 11);
        cluster = strneq(url, "cluster://", 10);
        if (!strneq(url, "redis://", 8) && !sentinel && !cluster)
                return conf_why(ret_why, "expected redis://[user[:password]@]host[:port][/db], "
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
                        return conf_why(ret_why, "database must be a number");
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
                size_t n = (size_t) snprintf(buf, size, "%s%s://%s%s", a->cluster ? "cluster" : "sentinel",
                                             a->tls ? "+tls" : "", a->user ?: "", a->user ? "@" : "");

                for (size_t i = 0; i < a->n_hosts && n < size; i++) {
                        if (i > 0)
                                n += (size_t) snprintf(buf + n, size - n, ",");
                        if (n < size)
                                n += (size_t) redis_host_port_format(buf + n, size - n, a->hosts[i].host, a->hosts[i].port);
                }
                if (n < size && a->master_name)
                        snprintf(buf + n, size - n, "/%s", a->master_name);
        } else if (a->unix_path)
                /* "unix://" reads as "unix:", so a path that starts with
                 * "//" needs it to read back the same. */
                snprintf(buf, size, "unix:%s%s", a->unix_path[1] == '/' ? "//" : "", a->unix_path);
        else if (!a->host)
                snprintf(buf, size, "(none)");
        else {
                char hp[300];

                redis_host_port_format(hp, sizeof(hp), a->host, a->port);
                snprintf(buf, size, "%s://%s%s%s/%u", a->tls ? "rediss" : "redis", a->user ?: "", a->user ? "@" : "", hp,
                         a->db);
        }
        return buf;
}
