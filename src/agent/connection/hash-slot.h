/* SPDX-License-Identifier: MIT */
#pragma once

#include <stddef.h>

/* Redis Cluster: the hash slot of a key (its {tag} when it has one). */
#define HASH_SLOTS 16384
unsigned hash_slot_of_key(const char *key, size_t len);
/* A short string (at most 3 characters) whose hash slot is slot: as a
 * {tag}, it puts a key in that slot. The same on every host. */
const char *hash_slot_tag(unsigned slot);
