/* SPDX-License-Identifier: MIT */
#pragma once

/* Minimal TAP producer: each check prints "ok N - …" or "not ok N - …" with
 * both sides on failure; tap_done() prints the plan and a summary line. */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One count for the whole program, also where its checks are in several
 * files (test-slots): each file's definition is the same weak one. */
__attribute__((weak)) unsigned tap_n, tap_failed;

#define CHECK(cond, ...)                                                         \
        do {                                                                     \
                int pass_ = !!(cond);                                            \
                tap_n++;                                                         \
                if (!pass_)                                                      \
                        tap_failed++;                                            \
                printf("%sok %u - ", pass_ ? "" : "not ", tap_n);                \
                printf(__VA_ARGS__);                                             \
                printf("\n");                                                    \
                if (!pass_)                                                      \
                        printf("# %s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
        } while (0)

#define CHECK_INT(actual, expected, what)                                        \
        do {                                                                     \
                long long a_ = (long long) (actual), e_ = (long long) (expected);\
                CHECK(a_ == e_, "%s", what);                                     \
                if (a_ != e_)                                                    \
                        printf("#   got %lld, expected %lld\n", a_, e_);         \
        } while (0)

#define CHECK_U64(actual, expected, what)                                        \
        do {                                                                     \
                uint64_t a_ = (actual), e_ = (expected);                         \
                CHECK(a_ == e_, "%s", what);                                     \
                if (a_ != e_)                                                    \
                        printf("#   got %" PRIu64 ", expected %" PRIu64 "\n", a_, e_); \
        } while (0)

#define CHECK_STR(actual, expected, what)                                        \
        do {                                                                     \
                const char *a_ = (actual), *e_ = (expected);                     \
                int same_ = a_ && e_ ? strcmp(a_, e_) == 0 : a_ == e_;           \
                CHECK(same_, "%s", what);                                        \
                if (!same_)                                                      \
                        printf("#   got \"%s\", expected \"%s\"\n", a_ ? a_ : "(null)", e_ ? e_ : "(null)"); \
        } while (0)

/* Stops the whole program: a test that cannot go on (its world has no room
 * for what the code did) says so rather than checking less than it says. */
#define TAP_BAIL(...)                                                            \
        do {                                                                     \
                printf("Bail out! ");                                            \
                printf(__VA_ARGS__);                                             \
                printf("\n");                                                    \
                fflush(stdout);                                                  \
                _Exit(1);                                                        \
        } while (0)

static inline int tap_done(void) {
        printf("1..%u\n", tap_n);
        printf("# %u passed, %u failed\n", tap_n - tap_failed, tap_failed);
        return tap_failed == 0 ? 0 : 1;
}
