/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NAME_MAX_LEN 200
#define IDENT_MAX_LEN 64
#define LEASE_ID_LEN 32         /* 128 random bits, lower-case hex */
#define UNIT_NAME_MAX 255       /* systemd's limit, without the NUL */

/* A slot name: [A-Za-z0-9_.:@-]{1,200}. */
bool name_is_valid(const char *s);

/* Namespace, key prefix and host id: [A-Za-z0-9_.:-]{1,64}. These end up in
 * socket names and Redis keys, so they are kept short and plain. */
bool ident_is_valid(const char *s);

/* A systemd service unit name, "foo.service" or "foo@bar.service". */
bool service_unit_is_valid(const char *s);

bool lease_id_is_valid(const char *s);
int lease_id_new(char ret[LEASE_ID_LEN + 1]);

/* Strict unsigned parse: the whole string, decimal, in [min, max]. */
int parse_uint64(const char *s, uint64_t min, uint64_t max, uint64_t *ret);
