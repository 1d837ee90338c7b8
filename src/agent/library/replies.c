/* SPDX-License-Identifier: MIT */
/* The one decoder of the scripts' replies, driven by the shapes
 * replies.list declares (lua-replies.c). */
#include <errno.h>
#include <assert.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "names.h"
#include "replies.h"

/* v at p as an integer of size bytes (4 or 8), signed or not: its range
 * was checked against the field's bounds, which its member holds
 * (lua-replies.c checks that when it compiles). */
static void int_store(void *p, size_t size, long long v) {
        if (size == sizeof(uint32_t)) {
                uint32_t x = (uint32_t) v;

                memcpy(p, &x, sizeof(x));
        } else {
                assert(size == sizeof(v));
                memcpy(p, &v, sizeof(v));
        }
}

/* Element e as field f, written at base + f->offset unless base is NULL
 * (checked only). */
static int field_decode(const ReplyField *f, const RedisReply *e, void *base) {
        const char *s;
        size_t len;
        long long v;

        switch (f->type) {
        case REPLY_INT:
                if (redis_reply_integer(e, &v) < 0 || v < f->min || v > f->max)
                        return -EBADMSG;
                if (base)
                        int_store((char *) base + f->offset, f->size, v);
                return 0;
        case REPLY_LEASE:
        case REPLY_STRING: {
                char id[LEASE_ID_LEN + 1];

                if (redis_reply_string(e, &s, &len) < 0 || memchr(s, '\0', len))
                        return -EBADMSG;
                if (f->type == REPLY_LEASE) {
                        if (len != LEASE_ID_LEN)
                                return -EBADMSG;
                        memcpy(id, s, len);
                        id[len] = '\0';
                        if (!lease_id_is_valid(id))
                                return -EBADMSG;
                } else if (len > f->max_len)
                        return -EBADMSG;
                if (base) {
                        memcpy((char *) base + f->offset, s, len);
                        ((char *) base)[f->offset + len] = '\0';
                }
                return 0;
        }
        case REPLY_LIST:
                if (!redis_reply_is_array(e))
                        return -EBADMSG;
                for (size_t i = 0; i < redis_reply_array_len(e); i++) {
                        const RedisReply *item = redis_reply_array_get(e, i);

                        if (redis_reply_array_len(item) != f->group->n_fields)
                                return -EBADMSG;
                        for (size_t j = 0; j < f->group->n_fields; j++)
                                if (field_decode(&f->group->fields[j], redis_reply_array_get(item, j), NULL) < 0)
                                        return -EBADMSG;
                }
                if (base)
                        *(ReplyList *) ((char *) base + f->offset) = (ReplyList) {
                                .array = e, .first = 0, .n = redis_reply_array_len(e), .nested = true, .group = f->group,
                        };
                return 0;
        case REPLY_REST:
                break;  /* (many elements: shape_decode()) */
        }
        return -EBADMSG;
}

/* The elements of reply from first on as shape's fields. */
static int shape_decode(const ReplyShape *shape, const RedisReply *reply, size_t first, void *ret, size_t *ret_n) {
        size_t len = redis_reply_array_len(reply), i = first, n = 0;

        for (; n < shape->n_fields; n++) {
                const ReplyField *f = &shape->fields[n];

                if (f->type == REPLY_REST) {
                        size_t k = f->group->n_fields, items = (len - i) / k;

                        if ((len - i) % k != 0)
                                return -EBADMSG;
                        for (size_t j = i; j < len; j++)
                                if (field_decode(&f->group->fields[(j - i) % k], redis_reply_array_get(reply, j), NULL) < 0)
                                        return -EBADMSG;
                        *(ReplyList *) ((char *) ret + f->offset) = (ReplyList) {
                                .array = reply, .first = i, .n = items, .group = f->group,
                        };
                        i = len;
                        n++;
                        break;
                }
                if (i == len)
                        break;
                if (field_decode(f, redis_reply_array_get(reply, i), ret) < 0)
                        return -EBADMSG;
                i++;
        }
        if (n < shape->n_required || i != len)
                return -EBADMSG;
        *ret_n = n;
        return 0;
}

int reply_decode(const ReplyScript *script, const RedisReply *reply, void *ret, size_t *ret_n_fields) {
        long long tag;

        if (!reply || redis_reply_error(reply))
                return -EBADMSG;
        for (size_t s = 0; s < script->n_shapes; s++) {
                const ReplyShape *shape = &script->shapes[s];

                switch (shape->form) {
                case REPLY_FORM_BARE:
                        if (redis_reply_integer(reply, &tag) >= 0 && tag == shape->tag) {
                                *ret_n_fields = 0;
                                return (int) s;
                        }
                        break;
                case REPLY_FORM_UNTAGGED:
                        if (redis_reply_is_array(reply) && shape_decode(shape, reply, 0, ret, ret_n_fields) >= 0)
                                return (int) s;
                        break;
                case REPLY_FORM_TAG:
                        /* (Tags differ: no other shape can fit.) */
                        if (redis_reply_array_integer(reply, 0, &tag) >= 0 && tag == shape->tag)
                                return shape_decode(shape, reply, 1, ret, ret_n_fields) >= 0 ? (int) s : -EBADMSG;
                        break;
                }
        }
        return -EBADMSG;
}

int reply_list_get(const ReplyList *l, size_t i, void *ret) {
        const RedisReply *from = l->array;
        size_t first = l->first + i * l->group->n_fields;

        if (i >= l->n)
                return -ERANGE;
        if (l->nested) {
                from = redis_reply_array_get(l->array, l->first + i);
                first = 0;
        }
        for (size_t j = 0; j < l->group->n_fields; j++)
                if (field_decode(&l->group->fields[j], redis_reply_array_get(from, first + j), ret) < 0)
                        return -EBADMSG;        /* (checked when decoded: never) */
        return 0;
}

/* ---- Replies as text ----------------------------------------------------------------- */

typedef struct Text {
        char *buf;
        size_t size, len;
        bool cut;
} Text;

static void text_add(Text *t, const char *format, ...) _printf_(2, 3);
static void text_add(Text *t, const char *format, ...) {
        va_list ap;
        int k;

        if (t->cut)
                return;
        va_start(ap, format);
        k = vsnprintf(t->buf + t->len, t->size - t->len, format, ap);
        va_end(ap);
        if (k < 0 || (size_t) k >= t->size - t->len) {
                t->cut = true;
                t->buf[t->len] = '\0';
                return;
        }
        t->len += (size_t) k;
}

static void text_reply(Text *t, const RedisReply *r, unsigned depth) {
        const char *s;
        size_t len;
        long long v;

        if (redis_reply_integer(r, &v) >= 0)
                text_add(t, "%lld", v);
        else if (redis_reply_error(r))
                text_add(t, "error \"%.64s\"", redis_reply_error(r));
        else if (redis_reply_string(r, &s, &len) >= 0) {
                text_add(t, "\"");
                for (size_t i = 0; i < len && !t->cut; i++) {
                        unsigned char c = (unsigned char) s[i];

                        if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
                                text_add(t, "\\x%02x", c);
                        else
                                text_add(t, "%c", c);
                }
                text_add(t, "\"");
        } else if (redis_reply_is_array(r)) {
                if (depth >= 4) {
                        text_add(t, "{…}");
                        return;
                }
                text_add(t, "{");
                for (size_t i = 0; i < redis_reply_array_len(r) && !t->cut; i++) {
                        if (i > 0)
                                text_add(t, ", ");
                        text_reply(t, redis_reply_array_get(r, i), depth + 1);
                }
                text_add(t, "}");
        } else
                text_add(t, r ? "nil" : "none");
}

const char *reply_format(const RedisReply *reply, char *buf, size_t size) {
        Text t = { .buf = buf, .size = size };

        assert(size >= 8);
        buf[0] = '\0';
        text_reply(&t, reply, 0);
        if (t.cut) {
                /* Room for "…" (3 bytes) and the NUL. */
                t.len = MIN(t.len, size - 4);
                memcpy(buf + t.len, "…", 4);
        }
        return buf;
}

void reply_log_unknown(const char *script, const char *name, const RedisReply *reply, const char *then) {
        char text[REPLY_FORMAT_MAX];

        log_error("BUG: the %s script answered for %s with a reply of no known shape: %s; %s.", script, name,
                  reply_format(reply, text, sizeof(text)), then);
}
