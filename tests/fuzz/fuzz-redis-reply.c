/* SPDX-License-Identifier: MIT */
/* The agent's checked accessors (src/shared/redis.h) over whatever replies
 * hiredis' own reader makes of the bytes a Redis server sends: each one
 * agrees with the reply's type and never hands out a string with a NUL in
 * it or one that does not fit. */

#include <hiredis/hiredis.h>

#include "fuzz.h"
#include "redis.h"

/* hiredis 0.14 allocates an array's element pointers as soon as it reads
 * the count ("*300000000\r\n": 2.4 GB). Past 256 MB the allocator says no
 * here, which hiredis turns into an out-of-memory error (for the agent, a
 * lost connection), instead of libFuzzer calling it a crash. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
        return "allocator_may_return_null=1:max_allocation_size_mb=256";
}

static void walk(const redisReply *r, unsigned depth) {
        char small[8], big[4096];
        const char *s;
        size_t len, n;
        long long v;

        fuzz_assert(depth < 16);
        fuzz_assert((redis_reply_error(r) != NULL) == (r->type == REDIS_REPLY_ERROR));
        fuzz_assert((redis_reply_integer(r, &v) == 0) == (r->type == REDIS_REPLY_INTEGER));
        if (redis_reply_string(r, &s, &len) == 0)
                fuzz_assert((r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) && s == r->str && len == r->len);

        n = redis_reply_array_len(r);
        fuzz_assert(n == (r->type == REDIS_REPLY_ARRAY ? r->elements : 0));
        fuzz_assert(redis_reply_array_get(r, n) == NULL);
        for (size_t i = 0; i < n; i++) {
                const redisReply *e = redis_reply_array_get(r, i);

                fuzz_assert(e == r->element[i]);
                if (redis_reply_array_string(r, i, small, sizeof(small)) == 0)
                        fuzz_assert(strlen(small) == e->len && e->len < sizeof(small) && memcmp(small, e->str, e->len) == 0);
                if (redis_reply_array_string(r, i, big, sizeof(big)) == 0)
                        fuzz_assert(strlen(big) == e->len && memcmp(big, e->str, e->len) == 0);
                else if (e && (e->type == REDIS_REPLY_STRING || e->type == REDIS_REPLY_STATUS))
                        fuzz_assert(e->len >= sizeof(big) || memchr(e->str, '\0', e->len));
                if (redis_reply_array_integer(r, i, &v) == 0)
                        fuzz_assert(e->type == REDIS_REPLY_INTEGER && v == e->integer);
                if (e)
                        walk(e, depth + 1);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        redisReader *reader = redisReaderCreate();
        void *reply = NULL;

        fuzz_assert(reader);
        if (redisReaderFeed(reader, (const char *) data, size) == REDIS_OK)
                while (redisReaderGetReply(reader, &reply) == REDIS_OK && reply) {
                        walk(reply, 0);
                        freeReplyObject(reply);
                        reply = NULL;
                }
        redisReaderFree(reader);
        return 0;
}
