/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

/* Redis Cluster: the hash slot of a key (its {tag} when it has one). */
#define REDIS_CLUSTER_SLOTS 16384
unsigned redis_key_slot(const char *key, size_t len);
/* A short string (at most 3 characters) whose hash slot is slot: as a
 * {tag}, it puts a key in that slot. The same on every host. */
const char *redis_slot_tag(unsigned slot);
