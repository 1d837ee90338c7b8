/* SPDX-License-Identifier: MIT */
/* SHA-256 as FIPS 180-4 describes it, one 64-byte block at a time. */

#include <string.h>

#include "sha256.h"

static const uint32_t K[64] = {
        0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
        0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
        0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
        0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
        0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
        0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
        0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
        0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static uint32_t ror(uint32_t x, unsigned n) {
        return (x >> n) | (x << (32 - n));
}

static void compress(uint32_t h[8], const uint8_t block[64]) {
        uint32_t w[64], v[8];

        for (unsigned i = 0; i < 16; i++)
                w[i] = (uint32_t) block[4 * i] << 24 | (uint32_t) block[4 * i + 1] << 16 |
                       (uint32_t) block[4 * i + 2] << 8 | (uint32_t) block[4 * i + 3];
        for (unsigned i = 16; i < 64; i++) {
                uint32_t s0 = ror(w[i - 15], 7) ^ ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
                uint32_t s1 = ror(w[i - 2], 17) ^ ror(w[i - 2], 19) ^ (w[i - 2] >> 10);

                w[i] = w[i - 16] + s0 + w[i - 7] + s1;
        }
        memcpy(v, h, sizeof(v));
        for (unsigned i = 0; i < 64; i++) {
                uint32_t s1 = ror(v[4], 6) ^ ror(v[4], 11) ^ ror(v[4], 25);
                uint32_t ch = (v[4] & v[5]) ^ (~v[4] & v[6]);
                uint32_t t1 = v[7] + s1 + ch + K[i] + w[i];
                uint32_t s0 = ror(v[0], 2) ^ ror(v[0], 13) ^ ror(v[0], 22);
                uint32_t maj = (v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]);

                memmove(v + 1, v, 7 * sizeof(v[0]));
                v[4] += t1;
                v[0] = t1 + s0 + maj;
        }
        for (unsigned i = 0; i < 8; i++)
                h[i] += v[i];
}

void sha256_init(Sha256 *s) {
        *s = (Sha256) { .h = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                               0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 } };
}

void sha256_update(Sha256 *s, const void *data, size_t n) {
        const uint8_t *p = data;

        s->length += n;
        while (n > 0) {
                size_t k = sizeof(s->block) - s->fill;

                if (k > n)
                        k = n;
                memcpy(s->block + s->fill, p, k);
                s->fill += k;
                p += k;
                n -= k;
                if (s->fill == sizeof(s->block)) {
                        compress(s->h, s->block);
                        s->fill = 0;
                }
        }
}

void sha256_final(Sha256 *s, uint8_t ret[SHA256_DIGEST_SIZE]) {
        uint64_t bits = s->length * 8;
        uint8_t pad[72] = { 0x80 };
        size_t n = (s->fill < 56 ? 56 : 120) - s->fill;

        for (unsigned i = 0; i < 8; i++)
                pad[n + i] = (uint8_t) (bits >> (56 - 8 * i));
        sha256_update(s, pad, n + 8);
        for (unsigned i = 0; i < 8; i++) {
                ret[4 * i] = (uint8_t) (s->h[i] >> 24);
                ret[4 * i + 1] = (uint8_t) (s->h[i] >> 16);
                ret[4 * i + 2] = (uint8_t) (s->h[i] >> 8);
                ret[4 * i + 3] = (uint8_t) s->h[i];
        }
}

void sha256(const void *data, size_t n, uint8_t ret[SHA256_DIGEST_SIZE]) {
        Sha256 s;

        sha256_init(&s);
        sha256_update(&s, data, n);
        sha256_final(&s, ret);
}
