/* SPDX-License-Identifier: MIT */
#pragma once

#include "config.h"

/* fleetsemd --check-redis: looks at the Redis config names, read-only, and
 * says what it finds on stdout (problems on stderr); 0 when it runs as
 * fleetsem needs, 1 when it cannot be reached or may evict fleetsem's keys. */
int check_redis(const Config *config);

/* fleetsemd --load-library: loads the agents' library into the Redis
 * config names (each master of a Cluster) where it is missing or older,
 * saying what it did on stdout; 0 loaded or current everywhere, 1 not
 * (why on stderr: unreachable, refused, or a newer library there). */
int load_library(const Config *config);
