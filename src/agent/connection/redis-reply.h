/* SPDX-License-Identifier: MIT */
#pragma once

/* Checked accessors for Redis' replies, whichever connection they came
 * on: a reply is read only through these. */

#include <stdbool.h>
#include <stddef.h>

#include "macro.h"

typedef struct redisReply RedisReply;   /* opaque outside the connection/ files */

/* The error text of an error reply, or NULL. */
const char *redis_reply_error(const RedisReply *r);
int redis_reply_integer(const RedisReply *r, long long *ret);
/* A string or status reply (binary safe: see len). */
int redis_reply_string(const RedisReply *r, const char **ret, size_t *ret_len);
size_t redis_reply_array_len(const RedisReply *r);
/* An array, if empty too (redis_reply_array_len() is 0 for any other). */
bool redis_reply_is_array(const RedisReply *r);
/* A nil reply (GET of no key, SET NX of one there). */
bool redis_reply_is_nil(const RedisReply *r);
const RedisReply *redis_reply_array_get(const RedisReply *r, size_t i);
/* A string element i of an array, copied NUL-terminated into buf; refuses
 * embedded NULs and strings that do not fit. */
int redis_reply_array_string(const RedisReply *r, size_t i, char *buf, size_t size);
int redis_reply_array_integer(const RedisReply *r, size_t i, long long *ret);
/* Accepts NULL; returns NULL. */
RedisReply *redis_reply_free(RedisReply *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(RedisReply *, redis_reply_free);
