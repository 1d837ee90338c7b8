/* SPDX-License-Identifier: MIT */
/* config_load_file() on fleetsem.conf: the input is the file. What it
 * accepts leaves a Config whose every field is valid; a file with a NUL
 * byte is never accepted; a refusal names the file. */

#include "config.h"
#include "fuzz.h"

static void check_config(const Config *c) {
        char buf[8192];
        RedisAddress again;
        const char *why;

        fuzz_assert(ident_is_valid(c->namespace) && ident_is_valid(c->key_prefix));
        fuzz_assert(!c->host_id[0] || ident_is_valid(c->host_id));
        fuzz_assert(c->lease_ttl >= LEASE_TTL_MIN && c->lease_ttl <= LEASE_TTL_MAX);
        fuzz_assert(c->max_clients >= 1 && c->max_clients <= 1000000);
        fuzz_assert(c->max_clients_per_user >= 1 && c->max_clients_per_user <= 1000000);
        fuzz_assert(c->max_leases_per_user >= 1 && c->max_leases_per_user <= 1000000);
        fuzz_assert(c->max_weight_per_user >= 1 && c->max_weight_per_user <= 1000000);
        fuzz_assert(c->max_names_per_user >= 1 && c->max_names_per_user <= 1000000);
        fuzz_assert(!c->redis_password_file || c->redis_password_file[0] == '/');
        for (size_t i = 0; i < c->n_allow; i++) {
                fuzz_assert(c->allow[i].pattern[0] && c->allow[i].principals[0]);
                for (char **p = c->allow[i].principals; *p; p++)
                        fuzz_assert((*p)[0] && strlen(*p) <= 65);
        }
        if (c->redis.unix_path || c->redis.host) {
                redis_address_to_string(&c->redis, buf, sizeof(buf));
                fuzz_assert(redis_address_parse(buf, &again, &why) == 0);
                redis_address_done(&again);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        const char *path = fuzz_file(data, size);
        char *error = NULL;
        Config c;
        int r;

        config_init(&c);
        r = config_load_file(&c, path, &error);
        if (r < 0) {
                fuzz_assert(error && strncmp(error, path, strlen(path)) == 0);
        } else {
                fuzz_assert(!error);
                fuzz_assert(!memchr(data, '\0', size));
                check_config(&c);
        }
        free(error);
        config_done(&c);
        return 0;
}
