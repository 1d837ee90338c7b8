/* SPDX-License-Identifier: MIT */
/* redis_address_parse() (redis = in fleetsem.conf, --redis): an accepted
 * address prints without its password and reads back the same; a refused
 * one says why. */

#include "config.h"
#include "fuzz.h"
#include "names.h"

static bool same(const char *a, const char *b) {
        return a && b ? strcmp(a, b) == 0 : a == b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *s = fuzz_string(data, size);
        char buf[8192];
        RedisAddress a, b;
        const char *why = NULL;
        int r;

        r = redis_address_parse(s, &a, &why);
        if (r < 0) {
                fuzz_assert(r == -EINVAL && why);
                free(s);
                return 0;
        }
        /* Exactly one of: a unix path, a host, Sentinels naming a master,
         * a Cluster's nodes. */
        fuzz_assert(!!a.unix_path + !!a.host + !!a.master_name + a.cluster == 1);
        fuzz_assert(!a.master_name || (a.n_hosts >= 1 && a.n_hosts <= REDIS_HOSTS_MAX && name_is_valid(a.master_name)));
        fuzz_assert(!a.cluster || (a.n_hosts >= 1 && a.n_hosts <= REDIS_HOSTS_MAX && a.db == 0));
        fuzz_assert(!a.unix_path || (a.unix_path[0] == '/' && strlen(a.unix_path) < 108));
        fuzz_assert(a.unix_path || a.master_name || a.cluster || (a.port >= 1 && a.db <= 65535));

        redis_address_to_string(&a, buf, sizeof(buf));
        fuzz_assert(strlen(buf) < sizeof(buf) - 1);
        fuzz_assert(redis_address_parse(buf, &b, &why) == 0);
        fuzz_assert(same(a.unix_path, b.unix_path) && same(a.host, b.host) && same(a.user, b.user));
        fuzz_assert(a.port == b.port && a.db == b.db && same(a.master_name, b.master_name) && a.cluster == b.cluster);
        fuzz_assert(a.n_hosts == b.n_hosts);
        for (size_t i = 0; i < a.n_hosts; i++)
                fuzz_assert(same(a.hosts[i].host, b.hosts[i].host) && a.hosts[i].port == b.hosts[i].port);
        fuzz_assert(b.password == NULL);        /* never printed */

        redis_address_done(&a);
        redis_address_done(&b);
        free(s);
        return 0;
}
