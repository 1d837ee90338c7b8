/* SPDX-License-Identifier: MIT */
/* granted_parse(): the grants in a wake message from Redis ("g LEASE TOKEN
 * SINCE PROOF ..."), as the slot engine reads them. What it accepts is at
 * most max grants of valid lease ids and proofs ("-": none), each a whole
 * word, with strictly parsed numbers, and they read back the same when
 * written out again. */

#include <inttypes.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "fuzz.h"

#define GRANTS_MAX 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *s = fuzz_string(data, size);
        char line[GRANTS_MAX * 120 + 1] = "";
        Granted g[GRANTS_MAX], again[GRANTS_MAX];
        size_t k = 0, k2 = 0, len = 0;
        int r;

        r = granted_parse(s, g, GRANTS_MAX, &k);
        fuzz_assert(r == 0 || r == -EBADMSG || r == -E2BIG);
        if (r < 0) {
                free(s);
                return 0;
        }
        fuzz_assert(k <= GRANTS_MAX);

        for (size_t i = 0; i < k; i++) {
                fuzz_assert(lease_id_is_valid(g[i].lease));
                fuzz_assert(g[i].proof[0] == '\0' || lease_id_is_valid(g[i].proof));
                len += (size_t) snprintf(line + len, sizeof(line) - len, "%s%s %" PRIu64 " %" PRIu64 " %s", i ? " " : "",
                                         g[i].lease, g[i].token, g[i].since_ms, g[i].proof[0] ? g[i].proof : "-");
        }

        fuzz_assert(granted_parse(line, again, GRANTS_MAX, &k2) == 0 && k2 == k);
        for (size_t i = 0; i < k; i++)
                fuzz_assert(strcmp(again[i].lease, g[i].lease) == 0 && again[i].token == g[i].token &&
                            again[i].since_ms == g[i].since_ms && strcmp(again[i].proof, g[i].proof) == 0);
        free(s);
        return 0;
}
