/* SPDX-License-Identifier: MIT */
/* The one decoder of the scripts' replies (src/agent/library/replies.c) against
 * every shape replies.list declares: each accepted with its fields in
 * range and decoded as sent, and refused with a value out of range, of
 * the wrong type, an element too many or too few, or an unknown tag; then
 * replies as the scripts send them, decoded through each script's own
 * reply_decode_<script>(). */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "lua-replies.h"
#include "macro.h"
#include "tap.h"

#define LEASE "0123456789abcdef0123456789abcdef"
#define LEASE2 "fedcba9876543210fedcba9876543210"

/* ---- RESP, written and read back through hiredis' own reader ------------------------ */

typedef struct Resp {
        char *buf;
        size_t len, size;
} Resp;

static void resp_add(Resp *r, const void *p, size_t n) {
        if (r->len + n + 1 > r->size) {
                r->size = (r->len + n + 1) * 2;
                r->buf = realloc(r->buf, r->size);
                if (!r->buf)
                        abort();
        }
        memcpy(r->buf + r->len, p, n);
        r->len += n;
        r->buf[r->len] = '\0';
}

/* "<kind>V\r\n" */
static void resp_head(Resp *r, char kind, long long v) {
        char s[64];
        int n = snprintf(s, sizeof(s), "%c%lld\r\n", kind, v);

        resp_add(r, s, (size_t) n);
}

static void resp_int(Resp *r, long long v) {
        resp_head(r, ':', v);
}

static void resp_array(Resp *r, size_t n) {
        resp_head(r, '*', (long long) n);
}

static void resp_bytes(Resp *r, const char *s, size_t n) {
        resp_head(r, '$', (long long) n);
        resp_add(r, s, n);
        resp_add(r, "\r\n", 2);
}

static void resp_str(Resp *r, const char *s) {
        resp_bytes(r, s, strlen(s));
}

/* A string of n bytes, "a"s. */
static void resp_fill(Resp *r, size_t n) {
        char *s = malloc(n + 1);

        if (!s)
                abort();
        memset(s, 'a', n);
        resp_bytes(r, s, n);
        free(s);
}

static redisReply *resp_parse(Resp *r) {
        redisReader *reader = redisReaderCreate();
        void *reply = NULL;

        if (!reader || redisReaderFeed(reader, r->buf, r->len) != REDIS_OK ||
            redisReaderGetReply(reader, &reply) != REDIS_OK || !reply)
                abort();
        redisReaderFree(reader);
        free(r->buf);
        *r = (Resp) {};
        return reply;
}

/* ---- Every declared shape, built from its declaration ------------------------------- */

/* How a field is written: a value in range (the low bound, the high one),
 * or a mistake. */
typedef enum Value {
        VALUE_LOW,
        VALUE_HIGH,
        VALUE_BELOW,            /* an integer under its range */
        VALUE_ABOVE,            /* an integer over it */
        VALUE_LONG,             /* a string one byte too long, a lease one hex digit too long */
        VALUE_TYPE,             /* a string for an integer, an integer for a string */
        VALUE_NUL,              /* a string with a NUL in it */
        VALUE_UPPER,            /* a lease in upper case */
} Value;

/* Whether v makes f wrong (in a list or a rest: one of its group's). */
static bool applies(const ReplyField *f, Value v) {
        switch (f->type) {
        case REPLY_INT:
                return (v == VALUE_BELOW && f->min != LLONG_MIN) || (v == VALUE_ABOVE && f->max != LLONG_MAX) ||
                       v == VALUE_TYPE;
        case REPLY_LEASE:
                return v == VALUE_LONG || v == VALUE_TYPE || v == VALUE_NUL || v == VALUE_UPPER;
        case REPLY_STRING:
                return v == VALUE_LONG || v == VALUE_TYPE || v == VALUE_NUL;
        case REPLY_LIST:
        case REPLY_REST:
                for (size_t j = 0; j < f->group->n_fields; j++)
                        if (applies(&f->group->fields[j], v))
                                return true;
                return f->type == REPLY_LIST && v == VALUE_TYPE;
        }
        return false;
}

/* An integer for f: v where it applies, else in range. */
static long long int_value(const ReplyField *f, Value v) {
        long long low = f->min == LLONG_MIN ? -5 : f->min, high = f->max == LLONG_MAX ? low + 1000000 : f->max;

        if (v == VALUE_BELOW && f->min != LLONG_MIN)
                return f->min - 1;
        if (v == VALUE_ABOVE && f->max != LLONG_MAX)
                return f->max + 1;
        return v == VALUE_HIGH ? high : low;
}

static size_t rest_items = 2;   /* items of a rest shape_reply() writes */

static void field_write(Resp *r, const ReplyField *f, Value v) {
        switch (f->type) {
        case REPLY_INT:
                if (v == VALUE_TYPE)
                        resp_str(r, "1");
                else
                        resp_int(r, int_value(f, v));
                return;
        case REPLY_LEASE:
                if (v == VALUE_TYPE)
                        resp_int(r, 1);
                else if (v == VALUE_LONG)
                        resp_str(r, LEASE "0");
                else if (v == VALUE_UPPER)
                        resp_str(r, "0123456789ABCDEF0123456789ABCDEF");
                else if (v == VALUE_NUL)
                        resp_bytes(r, "0123456789abcdef\0" "123456789abcdef", LEASE_ID_LEN);
                else
                        resp_str(r, v == VALUE_HIGH ? LEASE2 : LEASE);
                return;
        case REPLY_STRING:
                if (v == VALUE_TYPE)
                        resp_int(r, 1);
                else if (v == VALUE_NUL)
                        resp_bytes(r, "a\0b", 3);
                else
                        resp_fill(r, v == VALUE_LONG ? f->max_len + 1 : v == VALUE_HIGH ? f->max_len : 0);
                return;
        case REPLY_LIST:
                if (v == VALUE_TYPE) {
                        resp_int(r, 1);
                        return;
                }
                /* Two items, each one run of the group. */
                resp_array(r, 2);
                for (size_t i = 0; i < 2; i++) {
                        resp_array(r, f->group->n_fields);
                        for (size_t j = 0; j < f->group->n_fields; j++)
                                field_write(r, &f->group->fields[j], v);
                }
                return;
        case REPLY_REST:
                for (size_t i = 0; i < rest_items; i++)
                        for (size_t j = 0; j < f->group->n_fields; j++)
                                field_write(r, &f->group->fields[j], v);
                return;
        }
}

/* The shape's reply, with its first n fields (a rest counts one) of
 * value ok but field bad (if < n) of value v, and extra more integers. */
static redisReply *shape_reply(const ReplyShape *s, size_t n, Value ok, size_t bad, Value v, size_t extra) {
        bool rest = n > 0 && s->fields[n - 1].type == REPLY_REST;
        size_t elements = (s->form == REPLY_FORM_TAG) + n - rest + extra;
        Resp r = {};

        if (rest)
                elements += rest_items * s->fields[n - 1].group->n_fields;
        if (s->form == REPLY_FORM_BARE) {
                resp_int(&r, s->tag);
                return resp_parse(&r);
        }
        resp_array(&r, elements);
        if (s->form == REPLY_FORM_TAG)
                resp_int(&r, s->tag);
        for (size_t i = 0; i < n; i++)
                field_write(&r, &s->fields[i], i == bad ? v : ok);
        for (size_t i = 0; i < extra; i++)
                resp_int(&r, 7);
        return resp_parse(&r);
}

/* Decoded into a buffer big enough for any script's struct. */
static int decode(const ReplyScript *script, const redisReply *reply, size_t *n) {
        static _Alignas(max_align_t) unsigned char buf[1 << 16];

        return reply_decode(script, reply, buf, n);
}

/* Each script's shapes as declared, right and wrong. */
static void test_every_shape(void) {
        for (size_t k = 0; k < N_REPLY_SCRIPTS; k++) {
                const ReplyScript *script = reply_scripts[k];

                for (size_t s = 0; s < script->n_shapes; s++) {
                        const ReplyShape *shape = &script->shapes[s];
                        size_t n = SIZE_MAX;
                        redisReply *r;

                        for (Value v = VALUE_LOW; v <= VALUE_HIGH; v++) {
                                int k_;

                                r = shape_reply(shape, shape->n_fields, v, SIZE_MAX, v, 0);
                                k_ = decode(script, r, &n);
                                CHECK(k_ == (int) s && n == shape->n_fields,
                                      "%s %s accepted, its %zu fields at their %s bound (got %d, %zu fields)",
                                      script->script, shape->outcome, shape->n_fields, v == VALUE_LOW ? "low" : "high",
                                      k_, n);
                                freeReplyObject(r);
                        }
                        /* A rest of no item. */
                        if (shape->n_fields > 0 && shape->fields[shape->n_fields - 1].type == REPLY_REST) {
                                rest_items = 0;
                                r = shape_reply(shape, shape->n_fields, VALUE_LOW, SIZE_MAX, VALUE_LOW, 0);
                                rest_items = 2;
                                CHECK(decode(script, r, &n) == (int) s, "%s %s with a rest of none: accepted",
                                      script->script, shape->outcome);
                                freeReplyObject(r);
                        }
                        /* Without each optional field, and with a field too few. */
                        for (size_t m = shape->n_fields; m-- > 0;) {
                                bool fits = m >= shape->n_required;

                                if (shape->fields[m].type == REPLY_REST)
                                        continue;       /* (a rest of none: below) */
                                r = shape_reply(shape, m, VALUE_LOW, SIZE_MAX, VALUE_LOW, 0);
                                CHECK(fits == (decode(script, r, &n) >= 0), "%s %s with %zu of its %zu fields: %s",
                                      script->script, shape->outcome, m, shape->n_fields, fits ? "accepted" : "refused");
                                freeReplyObject(r);
                        }
                        /* An element too many. */
                        if (shape->form != REPLY_FORM_BARE) {
                                r = shape_reply(shape, shape->n_fields, VALUE_LOW, SIZE_MAX, VALUE_LOW, 1);
                                CHECK(decode(script, r, &n) < 0, "%s %s with an element too many: refused",
                                      script->script, shape->outcome);
                                freeReplyObject(r);
                        }
                        /* Each field wrong in each way that applies to it. */
                        for (size_t i = 0; i < shape->n_fields; i++) {
                                const ReplyField *f = &shape->fields[i];

                                for (Value v = VALUE_BELOW; v <= VALUE_UPPER; v++) {
                                        if (!applies(f, v))
                                                continue;
                                        r = shape_reply(shape, shape->n_fields, VALUE_LOW, i, v, 0);
                                        CHECK(decode(script, r, &n) < 0, "%s %s, field %s of a wrong value (%d): refused",
                                              script->script, shape->outcome, f->name, (int) v);
                                        freeReplyObject(r);
                                }
                        }
                }
        }
}

/* Tags no shape declares, and replies that are none: refused by every script. */
static void test_unknown(void) {
        for (size_t k = 0; k < N_REPLY_SCRIPTS; k++) {
                const ReplyScript *script = reply_scripts[k];
                const ReplyShape *first = &script->shapes[0];
                size_t n;

                for (long long tag = -5; tag <= 7; tag++) {
                        bool declared = false;
                        redisReply *r;
                        Resp resp = {};

                        for (size_t s = 0; s < script->n_shapes; s++)
                                declared = declared || script->shapes[s].tag == tag;
                        if (declared || first->form == REPLY_FORM_UNTAGGED)
                                continue;
                        /* The tag alone, as an integer and as an array. */
                        resp_int(&resp, tag);
                        r = resp_parse(&resp);
                        CHECK(decode(script, r, &n) < 0, "%s: the integer %lld refused", script->script, tag);
                        freeReplyObject(r);
                        resp_array(&resp, 1);
                        resp_int(&resp, tag);
                        r = resp_parse(&resp);
                        CHECK(decode(script, r, &n) < 0, "%s: {%lld} refused", script->script, tag);
                        freeReplyObject(r);
                }
                {
                        /* A bare tag in an array, an array's tag bare. */
                        Resp resp = {};
                        redisReply *r;

                        if (first->form == REPLY_FORM_BARE) {
                                resp_array(&resp, 1);
                                resp_int(&resp, first->tag);
                        } else
                                resp_int(&resp, first->form == REPLY_FORM_TAG ? first->tag : 0);
                        r = resp_parse(&resp);
                        CHECK(decode(script, r, &n) < 0, "%s: its first shape in the wrong form refused", script->script);
                        freeReplyObject(r);
                }
                CHECK(decode(script, NULL, &n) == -EBADMSG, "%s: no reply refused", script->script);
                {
                        const char *err = "-ERR no\r\n", *nil = "$-1\r\n", *empty = "*0\r\n";
                        const char *what[] = { err, nil, empty };

                        for (size_t i = 0; i < ELEMENTSOF(what); i++) {
                                Resp resp = {};
                                redisReply *r;

                                resp_add(&resp, what[i], strlen(what[i]));
                                r = resp_parse(&resp);
                                CHECK(decode(script, r, &n) == -EBADMSG, "%s: %s refused", script->script,
                                      i == 0 ? "an error" : i == 1 ? "nil" : "an empty array");
                                freeReplyObject(r);
                        }
                }
        }
}

/* Replies as the scripts send them, through each script's own decoder. */
static void test_acquire(void) {
        AcquireResult a = { .outcome = ACQUIRE_RETRY };   /* no reply's outcome: nothing written */
        Resp r = {};
        redisReply *reply;

        resp_array(&r, 5);
        resp_int(&r, 1);
        resp_int(&r, 42);
        resp_int(&r, 1700000000000);
        resp_int(&r, 2);
        resp_int(&r, 5);
        reply = resp_parse(&r);
        CHECK_INT(reply_decode_acquire(reply, &a), REPLY_ACQUIRE_GRANTED, "acquire {1, 42, …}: granted");
        CHECK(a.outcome == ACQUIRE_GRANTED && a.token == 42 && a.since_ms == 1700000000000 && a.held == 2 && a.limit == 5,
              "... straight into the engine's result: token, since, held and limit as sent");
        freeReplyObject(reply);

        resp_array(&r, 7);
        resp_int(&r, 0);
        resp_int(&r, 3);
        resp_int(&r, 5);
        resp_int(&r, 5);
        resp_int(&r, -1);
        resp_int(&r, 3600000);
        resp_str(&r, "a 0 1 root maintenance");
        reply = resp_parse(&r);
        CHECK_INT(reply_decode_acquire(reply, &a), REPLY_ACQUIRE_QUEUED, "acquire {0, 3, …, drain}: queued");
        CHECK(a.outcome == ACQUIRE_QUEUED && a.position == 3 && a.next_expiry_ms == -1 && a.held_back_ms == 3600000 &&
              a.has_drain, "... position, expiry (-1, signed), held back");
        CHECK_STR(a.drain, "a 0 1 root maintenance", "... and the drain record");
        freeReplyObject(reply);

        /* Without the drain record (not drained): said so, not counted. */
        resp_array(&r, 6);
        resp_int(&r, 0);
        resp_int(&r, UINT32_MAX);
        resp_int(&r, 5);
        resp_int(&r, 5);
        resp_int(&r, 100);
        resp_int(&r, 0);
        reply = resp_parse(&r);
        CHECK_INT(reply_decode_acquire(reply, &a), REPLY_ACQUIRE_QUEUED, "acquire {0, UINT32_MAX, …} without a drain: queued");
        CHECK(a.position == UINT32_MAX && a.next_expiry_ms == 100 && !a.has_drain,
              "... its position whole in 32 bits, and no drain record");
        freeReplyObject(reply);

        /* Held back for a negative time: nonsense, refused. */
        resp_array(&r, 6);
        resp_int(&r, 0);
        resp_int(&r, 3);
        resp_int(&r, 5);
        resp_int(&r, 5);
        resp_int(&r, -1);
        resp_int(&r, -1);
        reply = resp_parse(&r);
        CHECK_INT(reply_decode_acquire(reply, &a), -EBADMSG, "acquire queued, held back -1 ms: refused");
        freeReplyObject(reply);

        /* A granted reply that says more held than SLOTS_MAX: nothing of it. */
        a = (AcquireResult) { .outcome = ACQUIRE_RETRY };
        resp_array(&r, 5);
        resp_int(&r, 1);
        resp_int(&r, 42);
        resp_int(&r, 0);
        resp_int(&r, SLOTS_MAX + 1LL);
        resp_int(&r, 5);
        reply = resp_parse(&r);
        CHECK_INT(reply_decode_acquire(reply, &a), -EBADMSG, "acquire granted with held SLOTS_MAX + 1: refused");
        CHECK(a.outcome == ACQUIRE_RETRY, "... and nothing written");
        freeReplyObject(reply);
}

static void test_release_and_renew(void) {
        ReplyRelease rel;
        ReplyRenew ren;
        ReplyGrant g;
        ReplyMissing m;
        Resp r = {};
        redisReply *reply;

        resp_array(&r, 7);
        resp_int(&r, 1);
        resp_str(&r, LEASE);
        resp_int(&r, 7);
        resp_int(&r, 100);
        resp_str(&r, LEASE2);
        resp_int(&r, 8);
        resp_int(&r, 101);
        reply = resp_parse(&r);
        CHECK_INT(reply_decode_release(reply, &rel), REPLY_RELEASE_RELEASED, "release {1, grant, grant}: released");
        CHECK_INT(rel.released.granted.n, 2, "... two waiters granted");
        CHECK(reply_list_get(&rel.released.granted, 1, &g) == 0 && streq(g.lease, LEASE2) && g.token == 8 &&
              g.since_ms == 101, "... the second as sent");
        CHECK_INT(reply_list_get(&rel.released.granted, 2, &g), -ERANGE, "... and no third");
        freeReplyObject(reply);

        resp_array(&r, 3);
        resp_int(&r, 250);
        resp_str(&r, LEASE);
        resp_str(&r, LEASE2);
        reply = resp_parse(&r);
        CHECK_INT(reply_decode_renew(reply, &ren), REPLY_RENEW_RENEWED, "renew {250, lease, lease}");
        CHECK(ren.renewed.forgot_ms == 250 && ren.renewed.missing.n == 2 &&
              reply_list_get(&ren.renewed.missing, 0, &m) == 0 && streq(m.lease, LEASE), "... forgotten, two missing");
        freeReplyObject(reply);
}

static void test_revoke_and_status(void) {
        ReplyRevoke rv;
        ReplyStatus st;
        ReplyCounts ct;
        ReplyHolder h;
        ReplyWaiter w;
        Resp r = {};
        redisReply *reply;

        resp_array(&r, 4);
        resp_int(&r, 5);
        resp_str(&r, "host-a 1000");
        resp_int(&r, 9);
        resp_int(&r, 3000);
        reply = resp_parse(&r);
        CHECK_INT(reply_decode_revoke(reply, &rv), REPLY_REVOKE_FENCED, "revoke {5, owner, token, ms}: fenced");
        CHECK(rv.fenced.token == 9 && rv.fenced.free_in_ms == 3000, "... token and when it is free");
        CHECK_STR(rv.fenced.owner, "host-a 1000", "... and its owner");
        freeReplyObject(reply);

        resp_array(&r, 10);
        resp_int(&r, 1700000000000);
        resp_array(&r, 1);
        resp_array(&r, 6);
        resp_str(&r, LEASE);
        resp_int(&r, 12000);
        resp_str(&r, "3 1699999999000");
        resp_str(&r, "INFO job=x");
        resp_str(&r, "a 1000");
        resp_int(&r, 2);
        resp_array(&r, 1);
        resp_array(&r, 4);
        resp_str(&r, LEASE2);
        resp_str(&r, "");
        resp_str(&r, "b 0");
        resp_int(&r, 1);
        resp_int(&r, 3);
        resp_str(&r, "");
        resp_str(&r, "");
        resp_str(&r, "");
        resp_int(&r, 2);
        resp_int(&r, 150);
        resp_int(&r, 101);
        reply = resp_parse(&r);
        CHECK_INT(reply_decode_status(reply, &st), REPLY_STATUS_NAME, "status: a holder and a waiter");
        CHECK(reply_list_get(&st.name.holders, 0, &h) == 0 && h.expires_in_ms == 12000 && h.weight == 2 &&
              streq(h.owner, "a 1000") && streq(h.grant, "3 1699999999000"), "... the holder as sent");
        CHECK(reply_list_get(&st.name.queue, 0, &w) == 0 && streq(w.lease, LEASE2) && streq(w.owner, "b 0"),
              "... the waiter as sent");
        CHECK_INT(st.name.limit, 3, "... the limit");
        CHECK(st.name.held == 2 && st.name.n_holders == 150 && st.name.waiting == 101, "... and the totals");
        freeReplyObject(reply);

        resp_array(&r, 7);
        resp_int(&r, 1700000000000);
        resp_int(&r, 250);
        resp_int(&r, 130);
        resp_int(&r, 250);
        resp_str(&r, "");
        resp_str(&r, "");
        resp_str(&r, "");
        reply = resp_parse(&r);
        CHECK_INT(reply_decode_counts(reply, &ct), REPLY_COUNTS_NAME, "counts {now, held, waiting, limit, ...}");
        CHECK(ct.name.held == 250 && ct.name.waiting == 130 && ct.name.limit == 250, "... the numbers as sent");
        freeReplyObject(reply);

        resp_array(&r, 7);
        resp_int(&r, 1700000000000);
        resp_int(&r, -1);
        resp_int(&r, 0);
        resp_int(&r, 0);
        resp_str(&r, "");
        resp_str(&r, "");
        resp_str(&r, "");
        reply = resp_parse(&r);
        CHECK_INT(reply_decode_counts(reply, &ct), -EBADMSG, "counts: held below 0 fits no shape");
        freeReplyObject(reply);
}

/* The text a reply of no known shape is logged as: escaped and bounded. */
static void test_format(void) {
        char buf[64], small[16];
        Resp r = {};
        redisReply *reply;

        resp_array(&r, 3);
        resp_int(&r, -7);
        resp_bytes(&r, "a\"\n\0\xff", 5);
        resp_array(&r, 0);
        reply = resp_parse(&r);
        CHECK_STR(reply_format(reply, buf, sizeof(buf)), "{-7, \"a\\x22\\x0a\\x00\\xff\", {}}", "a reply as text");
        reply_format(reply, small, sizeof(small));
        CHECK(strlen(small) < sizeof(small) && strstr(small, "…"), "... cut short with … to fit: %s", small);
        freeReplyObject(reply);
}

int main(void) {
        test_every_shape();
        test_unknown();
        test_acquire();
        test_release_and_renew();
        test_revoke_and_status();
        test_format();
        return tap_done();
}
