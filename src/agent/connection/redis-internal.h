/* SPDX-License-Identifier: MIT */
#pragma once

/* Between the connections of redis.c and redis-blocking.c: a hiredis
 * error (its err, and errno as it was) as -errno. */
int redis_errno(int err, int saved_errno);
