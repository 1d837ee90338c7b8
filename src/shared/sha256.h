/* SPDX-License-Identifier: MIT */
#pragma once

/* SHA-256 (FIPS 180-4), for digests of values that are too long to keep
 * whole. Not for secrets: nothing here is constant-time. */

#include <stddef.h>
#include <stdint.h>

#define SHA256_DIGEST_SIZE 32

typedef struct Sha256 {
        uint32_t h[8];
        uint64_t length;                /* bytes hashed so far */
        uint8_t block[64];
        size_t fill;                    /* bytes in block */
} Sha256;

void sha256_init(Sha256 *s);
void sha256_update(Sha256 *s, const void *data, size_t n);
void sha256_final(Sha256 *s, uint8_t ret[SHA256_DIGEST_SIZE]);

/* The whole of data at once. */
void sha256(const void *data, size_t n, uint8_t ret[SHA256_DIGEST_SIZE]);
