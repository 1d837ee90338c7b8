/* SPDX-License-Identifier: MIT */
#pragma once

#include "config.h"

/* fleetsemd --check-redis: looks at the Redis config names, read-only, and
 * says what it finds on stdout (problems on stderr); 0 when it runs as
 * fleetsem needs, 1 when it cannot be reached or may evict fleetsem's keys. */
int check_redis(const Config *config);
