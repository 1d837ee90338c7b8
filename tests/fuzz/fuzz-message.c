/* SPDX-License-Identifier: MIT */
/* message_parse(), the line format under every request and reply: whatever
 * it accepts, the builder writes back as a line that parses to the same
 * verb and fields, is no longer than the original, and is written the same
 * way again (one canonical form). */

#include "fuzz.h"
#include "protocol.h"

static void check_same(const Message *a, const Message *b) {
        fuzz_assert(strcmp(a->verb, b->verb) == 0);
        fuzz_assert(a->n_fields == b->n_fields);
        for (size_t i = 0; i < a->n_fields; i++) {
                fuzz_assert(strcmp(a->storage + a->fields[i].key, b->storage + b->fields[i].key) == 0);
                fuzz_assert(strcmp(a->storage + a->fields[i].value, b->storage + b->fields[i].value) == 0);
        }
}

static int rebuild(const Message *m, char *buf, size_t size) {
        MessageBuilder b;

        message_start(&b, buf, size, m->verb);
        for (size_t i = 0; i < m->n_fields; i++)
                message_add(&b, m->storage + m->fields[i].key, m->storage + m->fields[i].value);
        return message_finish(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static Message m, again;
        static char line[PROTO_REPLY_MAX + 1], line2[PROTO_REPLY_MAX + 1];
        const char *s = (const char *) data;
        int r, n, n2;

        r = message_parse(s, size, PROTO_REQUEST_MAX, &m);
        fuzz_assert(size <= PROTO_REQUEST_MAX || r == -E2BIG);
        r = message_parse(s, size, PROTO_REPLY_MAX, &m);
        fuzz_assert(r == 0 || r == -EBADMSG || r == -E2BIG);
        if (r < 0)
                return 0;

        fuzz_assert(m.verb[0] && m.n_fields <= PROTO_FIELDS_MAX);
        for (size_t i = 0; i < m.n_fields; i++) {
                const char *key = m.storage + m.fields[i].key;

                fuzz_assert(key[0] && strspn(key, "abcdefghijklmnopqrstuvwxyz_") == strlen(key));
                /* Keys are unique: message_get() finds each one's own value. */
                fuzz_assert(message_get(&m, key) == m.storage + m.fields[i].value);
        }

        n = rebuild(&m, line, sizeof(line));
        fuzz_assert(n >= 0 && (size_t) n <= size);
        fuzz_assert(message_parse(line, (size_t) n, PROTO_REPLY_MAX, &again) == 0);
        check_same(&m, &again);
        n2 = rebuild(&again, line2, sizeof(line2));
        fuzz_assert(n2 == n && memcmp(line, line2, (size_t) n) == 0);
        return 0;
}
