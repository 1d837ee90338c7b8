/* SPDX-License-Identifier: MIT */
/* The agent's checked accessors (src/agent/connection/redis-reply.h) over whatever replies
 * hiredis' own reader makes of the bytes a Redis server sends: each one
 * agrees with the reply's type and never hands out a string with a NUL in
 * it or one that does not fit. And the decoder of the scripts' replies
 * (src/agent/library/replies.c) over the same: a reply it takes for a shape of
 * replies.list has that shape's tag, its fields in range and every item
 * of its lists readable; its text for the log always fits. */

#include <errno.h>
#include <hiredis/hiredis.h>
#include <limits.h>

#include "fuzz.h"
#include "lua-replies.h"
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

static void check_fields(const ReplyShape *shape, size_t n, const unsigned char *d) {
        static _Alignas(max_align_t) unsigned char item[1 << 14];

        fuzz_assert(n >= shape->n_required && n <= shape->n_fields);
        for (size_t i = 0; i < n; i++) {
                const ReplyField *f = &shape->fields[i];
                const ReplyList *l = (const ReplyList *) (d + f->offset);
                long long v;

                switch (f->type) {
                case REPLY_INT:
                        /* At its member's width (4 bytes: signed when it may be negative). */
                        fuzz_assert(f->size == sizeof(uint32_t) || f->size == sizeof(v));
                        if (f->size == sizeof(uint32_t)) {
                                uint32_t u;

                                memcpy(&u, d + f->offset, sizeof(u));
                                v = f->min < 0 ? (long long) (int32_t) u : (long long) u;
                        } else
                                memcpy(&v, d + f->offset, sizeof(v));
                        fuzz_assert(v >= f->min && v <= f->max);
                        break;
                case REPLY_LEASE:
                        fuzz_assert(lease_id_is_valid((const char *) d + f->offset));
                        break;
                case REPLY_STRING:
                        fuzz_assert(strlen((const char *) d + f->offset) <= f->max_len);
                        break;
                case REPLY_LIST:
                case REPLY_REST:
                        fuzz_assert(l->group == f->group && l->group->size <= sizeof(item));
                        for (size_t j = 0; j < l->n; j++)
                                fuzz_assert(reply_list_get(l, j, item) == 0);
                        fuzz_assert(reply_list_get(l, l->n, item) == -ERANGE);
                        break;
                }
        }
}

/* Each script's decoder over r. */
static void decode_all(const redisReply *r) {
        static _Alignas(max_align_t) unsigned char d[1 << 16];
        char text[REPLY_FORMAT_MAX];

        for (size_t k = 0; k < N_REPLY_SCRIPTS; k++) {
                const ReplyScript *script = reply_scripts[k];
                const ReplyShape *shape;
                size_t n = SIZE_MAX;
                int s;

                memset(d, 0, sizeof(d));
                s = reply_decode(script, r, d, &n);
                fuzz_assert(s == -EBADMSG || (s >= 0 && (size_t) s < script->n_shapes));
                if (s < 0)
                        continue;
                shape = &script->shapes[s];
                if (shape->form == REPLY_FORM_BARE)
                        fuzz_assert(r->type == REDIS_REPLY_INTEGER && r->integer == shape->tag);
                else
                        fuzz_assert(r->type == REDIS_REPLY_ARRAY);
                if (shape->form == REPLY_FORM_TAG)
                        fuzz_assert(r->elements >= 1 && r->element[0]->type == REDIS_REPLY_INTEGER &&
                                    r->element[0]->integer == shape->tag);
                check_fields(shape, n, d);
        }
        fuzz_assert(strlen(reply_format(r, text, sizeof(text))) < sizeof(text));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        redisReader *reader = redisReaderCreate();
        void *reply = NULL;

        fuzz_assert(reader);
        if (redisReaderFeed(reader, (const char *) data, size) == REDIS_OK)
                while (redisReaderGetReply(reader, &reply) == REDIS_OK && reply) {
                        walk(reply, 0);
                        decode_all(reply);
                        freeReplyObject(reply);
                        reply = NULL;
                }
        redisReaderFree(reader);
        return 0;
}
