/* SPDX-License-Identifier: MIT */
#pragma once

/* The scripts' replies, decoded in one place from the shapes replies.list
 * declares (lua-replies.h, generated from it, holds each script's shapes,
 * its outcome enum, the struct its reply decodes into and
 * reply_decode_<script>()). A reply that fits no shape is refused whole:
 * none of it is believed. */

#include <stdbool.h>
#include <stddef.h>

#include "redis.h"

typedef enum ReplyFieldType {
        REPLY_INT,              /* an integer in [min, max] */
        REPLY_LEASE,            /* a lease id */
        REPLY_STRING,           /* a string of at most max_len bytes, no NUL */
        REPLY_LIST,             /* an array of arrays, each of group's fields */
        REPLY_REST,             /* every element left, in runs of group's fields */
} ReplyFieldType;

typedef struct ReplyGroup ReplyGroup;

typedef struct ReplyField {
        const char *name;
        ReplyFieldType type;
        long long min, max;
        size_t max_len;
        const ReplyGroup *group;
        size_t offset;          /* in the struct it decodes into */
        size_t size;            /* REPLY_INT: of its member there, 4 or 8 bytes (its bound fits) */
} ReplyField;

struct ReplyGroup {
        const char *name;
        const ReplyField *fields;       /* REPLY_INT, REPLY_LEASE or REPLY_STRING only */
        size_t n_fields;
        size_t size;                    /* of the struct one decodes into */
};

typedef enum ReplyForm {
        REPLY_FORM_TAG,         /* {tag, field...} */
        REPLY_FORM_UNTAGGED,    /* {field...}: the script's only shape */
        REPLY_FORM_BARE,        /* the integer tag alone */
} ReplyForm;

typedef struct ReplyShape {
        const char *outcome;
        ReplyForm form;
        long long tag;
        const ReplyField *fields;
        size_t n_fields, n_required;
} ReplyShape;

typedef struct ReplyScript {
        const char *script;
        const ReplyShape *shapes;
        size_t n_shapes;
} ReplyScript;

/* A rest or a list of a decoded reply: n items, each checked already.
 * Valid as long as the reply it came from. */
typedef struct ReplyList {
        const RedisReply *array;        /* the items' array */
        size_t first, n;                /* a rest: n runs of the group's fields from element first */
        bool nested;                    /* a list: element first + i is item i, an array */
        const ReplyGroup *group;
} ReplyList;

/* reply as one of script's shapes: the shape's index (its outcome), its
 * fields written into ret at their offsets and how many there were in
 * *ret_n_fields; -EBADMSG when it fits none (an error reply or NULL
 * included), ret then partly written. */
int reply_decode(const ReplyScript *script, const RedisReply *reply, void *ret, size_t *ret_n_fields);

/* Item i of l into ret (a struct of l's group: ReplyGrant for a rest of
 * grants, …); -ERANGE past the end. */
int reply_list_get(const ReplyList *l, size_t i, void *ret);

/* The reply as text for a log: integers, strings quoted with their bytes
 * escaped, arrays in braces, cut short with "…" to fit buf. Returns buf. */
const char *reply_format(const RedisReply *reply, char *buf, size_t size);
#define REPLY_FORMAT_MAX 512

/* The one log line of a reply that fits no shape: "BUG: the SCRIPT
 * script answered for NAME with a reply of no known shape: REPLY; WHAT
 * HAPPENS." */
void reply_log_unknown(const char *script, const char *name, const RedisReply *reply, const char *then);
