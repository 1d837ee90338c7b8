/* SPDX-License-Identifier: MIT */
/* Redis Cluster's hash slots: a key's, and a tag that puts a key in a given one. */
#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hash-slot.h"

/* CRC16-CCITT (XMODEM), as Redis Cluster uses it. */
static uint16_t crc16(const char *p, size_t n) {
        uint16_t crc = 0;

        for (size_t i = 0; i < n; i++) {
                crc ^= (uint16_t) ((uint8_t) p[i] << 8);
                for (int b = 0; b < 8; b++)
                        crc = crc & 0x8000 ? (uint16_t) ((crc << 1) ^ 0x1021) : (uint16_t) (crc << 1);
        }
        return crc;
}

unsigned hash_slot_of_key(const char *key, size_t len) {
        const char *open = memchr(key, '{', len), *close;

        if (open) {
                close = memchr(open + 1, '}', len - (size_t) (open + 1 - key));
                if (close && close > open + 1)
                        return crc16(open + 1, (size_t) (close - open - 1)) & (HASH_SLOTS - 1);
        }
        return crc16(key, len) & (HASH_SLOTS - 1);
}

const char *hash_slot_tag(unsigned slot) {
        static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
        static char (*tags)[4];

        assert(slot < HASH_SLOTS);
        if (!tags) {
                /* 0, 1, 2, … in base 62: the first of them in each slot.
                 * All slots have one by the 65,397th (3 characters). */
                size_t filled = 0;

                tags = calloc(HASH_SLOTS, sizeof(*tags));
                if (!tags)
                        return NULL;
                for (unsigned long n = 0; filled < HASH_SLOTS && n < 62UL * 62 * 62; n++) {
                        char b[4] = {};
                        size_t k = 0;
                        unsigned s;

                        for (unsigned long m = n; k == 0 || m; m /= 62)
                                b[k++] = digits[m % 62];
                        s = crc16(b, k) & (HASH_SLOTS - 1);
                        if (!tags[s][0]) {
                                memcpy(tags[s], b, sizeof(b));
                                filled++;
                        }
                }
        }
        return tags[slot][0] ? tags[slot] : NULL;
}
