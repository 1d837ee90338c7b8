/* SPDX-License-Identifier: MIT */
#pragma once

/* Between a shard's lifetime (shard.c) and its set-up (shard-setup.c). */

#include "redis-layer.h"

/* "host:port", or the one server's name, for messages. */
const char *shard_server(const Shard *sh);
/* The set-up is done: sh is ready. grace: what is left of the time after
 * a reset in which nobody is granted anything; why: a GRACE_WHY_*, NULL
 * when this agent cannot tell. */
void shard_ready(Shard *sh, bool reset, usec_t grace, const char *why);
