/* SPDX-License-Identifier: MIT */
/* Checked accessors for Redis' replies (redis-reply.h). */
#include <hiredis/hiredis.h>
#include <string.h>

#include "redis-reply.h"

const char *redis_reply_error(const RedisReply *r) {
        if (!r || r->type != REDIS_REPLY_ERROR)
                return NULL;
        return r->str ?: "unknown error";
}

int redis_reply_integer(const RedisReply *r, long long *ret) {
        if (!r || r->type != REDIS_REPLY_INTEGER)
                return -EBADMSG;
        *ret = r->integer;
        return 0;
}

int redis_reply_string(const RedisReply *r, const char **ret, size_t *ret_len) {
        if (!r || (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS) || !r->str)
                return -EBADMSG;
        *ret = r->str;
        *ret_len = r->len;
        return 0;
}

size_t redis_reply_array_len(const RedisReply *r) {
        if (!r || r->type != REDIS_REPLY_ARRAY)
                return 0;
        return r->elements;
}

bool redis_reply_is_array(const RedisReply *r) {
        return r && r->type == REDIS_REPLY_ARRAY;
}

bool redis_reply_is_nil(const RedisReply *r) {
        return r && r->type == REDIS_REPLY_NIL;
}

const RedisReply *redis_reply_array_get(const RedisReply *r, size_t i) {
        if (!r || r->type != REDIS_REPLY_ARRAY || i >= r->elements)
                return NULL;
        return r->element[i];
}

int redis_reply_array_string(const RedisReply *r, size_t i, char *buf, size_t size) {
        const char *s;
        size_t len;
        int k;

        k = redis_reply_string(redis_reply_array_get(r, i), &s, &len);
        if (k < 0)
                return k;
        if (len >= size || memchr(s, '\0', len))
                return -EBADMSG;
        memcpy(buf, s, len);
        buf[len] = '\0';
        return 0;
}

int redis_reply_array_integer(const RedisReply *r, size_t i, long long *ret) {
        return redis_reply_integer(redis_reply_array_get(r, i), ret);
}

RedisReply *redis_reply_free(RedisReply *r) {
        freeReplyObject(r);
        return NULL;
}
