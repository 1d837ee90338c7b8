/* SPDX-License-Identifier: MIT */
/* One Redis server, as the URL names it (redis://, unix:). */
#include "log.h"
#include "redis-layer.h"

static int single_start(RedisIo *io) {
        return shard_new(io, NULL, 0) ? 0 : -ENOMEM;
}

static void single_stop(RedisIo *io) {
        (void) io;
}

/* The one server (also the master a Sentinel named), unless connected or
 * within its backoff. */
void topology_connect_shards(RedisIo *io) {
        Agent *a = io->agent;

        if (!io->shards[0]->cmd && a->state != REDIS_DOWN)
                a->state = REDIS_CONNECTING;
        shards_connect_due(io);
}

static RedisAddress single_address(RedisIo *io, const Shard *sh) {
        (void) sh;
        return io->agent->config->redis;
}

Shard *topology_first_shard(RedisIo *io, unsigned slot) {
        (void) slot;
        return io->shards[0];
}

static void single_shard_up(RedisIo *io, Shard *sh, bool reset) {
        (void) io;
        (void) reset;
        log_info("Connected to Redis at %s.", sh->name);
}

bool topology_every_shard_counts(const RedisIo *io, const Shard *sh) {
        (void) io;
        (void) sh;
        return true;
}

bool topology_always_known(const RedisIo *io) {
        (void) io;
        return true;
}

int topology_one_epoch(const RedisIo *io, const Shard *sh) {
        (void) io;
        (void) sh;
        return -2;
}

const TopologyOps topology_single = {
        .start = single_start,
        .stop = single_stop,
        .connect = topology_connect_shards,
        .address = single_address,
        .shard_of_hash_slot = topology_first_shard,
        .shard_up = single_shard_up,
        .shard_counts = topology_every_shard_counts,
        .known = topology_always_known,
        .epoch_hash_slot = topology_one_epoch,
};
