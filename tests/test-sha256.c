/* SPDX-License-Identifier: MIT */
/* SHA-256 against the test vectors of FIPS 180-4's examples (NIST CSRC)
 * and its padding boundaries, whole and fed in pieces. */

#include <string.h>

#include "macro.h"
#include "sha256.h"
#include "tap.h"

static const char *hex(const uint8_t d[SHA256_DIGEST_SIZE], char buf[2 * SHA256_DIGEST_SIZE + 1]) {
        for (size_t i = 0; i < SHA256_DIGEST_SIZE; i++)
                snprintf(buf + 2 * i, 3, "%02x", d[i]);
        return buf;
}

static void check_vector(const char *what, const void *data, size_t n, const char *expected) {
        uint8_t d[SHA256_DIGEST_SIZE];
        char h[2 * SHA256_DIGEST_SIZE + 1];
        Sha256 s;

        sha256(data, n, d);
        CHECK_STR(hex(d, h), expected, what);
        /* The same bytes one at a time: the block boundary falls everywhere. */
        sha256_init(&s);
        for (size_t i = 0; i < n; i++)
                sha256_update(&s, (const uint8_t *) data + i, 1);
        sha256_final(&s, d);
        CHECK_STR(hex(d, h), expected, "... fed a byte at a time");
}

static void test_vectors(void) {
        static char million[1000000];

        check_vector("empty", "", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
        check_vector("abc", "abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        check_vector("448 bits, padding in a second block",
                     "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
                     "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
        check_vector("896 bits",
                     "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
                     112, "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
        memset(million, 'a', sizeof(million));
        check_vector("a million a", million, sizeof(million),
                     "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

/* Lengths around the 55/56/64-byte padding boundaries, for that many 'x'
 * (as sha256sum gives them). */
static void test_boundaries(void) {
        static const struct {
                size_t n;
                const char *digest;
        } v[] = {
                { 55, "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072" },
                { 56, "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e" },
                { 63, "75220b47218278e656f2013bb8f0c455a25eaf01e86c64924e9d48d89776d6f2" },
                { 64, "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c" },
                { 65, "9537c5fdf120482f7d58d25e9ed583f52c02b4e304ea814db1633ad565aed7e9" },
                { 119, "000b48d4edf0fa7bee3c6236ecd2785baa5db4eeb8bb54341b029e0d9fa5fb0c" },
                { 120, "13f05a0b594787f5ecd315edc96141bd3243203d1b7d4f0836f37308b276ba98" },
                { 128, "24da1b81d0b16df6428eee73c69fcb2a93c76bc6df706f0c6670fe6bfe800464" },
        };
        char x[128], what[32];

        memset(x, 'x', sizeof(x));
        for (size_t i = 0; i < ELEMENTSOF(v); i++) {
                snprintf(what, sizeof(what), "%zu bytes", v[i].n);
                check_vector(what, x, v[i].n, v[i].digest);
        }
}

int main(void) {
        test_vectors();
        test_boundaries();
        return tap_done();
}
