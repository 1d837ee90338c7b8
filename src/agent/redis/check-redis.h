/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>

#include "config.h"

/* The one master the configuration names (not a Cluster's), found as the
 * agent finds it: its unix socket, its address, or under Sentinel the
 * master a quorum of the Sentinels names (peers.h); where: either, for
 * messages. -ENOENT when no quorum names one (said on stderr): nothing,
 * and no password, goes to a master fewer Sentinels name. */
typedef struct RedisMaster {
        const char *unix_path;          /* or NULL: host, port */
        char host[256];
        unsigned port;
        char where[300];
} RedisMaster;
int redis_master_find(const Config *c, RedisMaster *ret);

/* A Cluster's masters, from CLUSTER SLOTS of the first node the URL names
 * that answers, each once, and with ret_owner (HASH_SLOTS of
 * them) which one owns each hash slot (UINT16_MAX: none). As many as the
 * agents follow (SHARDS_MAX): a map that names more is refused whole, as
 * the agents refuse it, and so is one that names a master the agents
 * would not connect to (outside cluster_allow, peers.h): nothing, and no
 * password, goes to whoever answers there. <0 (said on stderr) when no
 * node answers, or the map is refused. */
int cluster_masters_find(const Config *c, RedisMaster **ret, size_t *ret_n, uint16_t *ret_owner);

/* fleetsemd --check-redis: looks at the Redis config names, read-only, and
 * says what it finds on stdout (problems on stderr); 0 when it runs as
 * fleetsem needs, 1 when it cannot be reached or may evict fleetsem's keys. */
int check_redis(const Config *config);

/* fleetsemd --load-library: loads the agents' library into the Redis
 * config names (each master of a Cluster) where it is missing or older,
 * saying what it did on stdout; 0 loaded or current everywhere, 1 not
 * (why on stderr: unreachable, refused, or a newer library there). */
int load_library(const Config *config);
