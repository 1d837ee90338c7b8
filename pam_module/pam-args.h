/* SPDX-License-Identifier: MIT */
#pragma once

/* The module's arguments (and conf=FILE, with the same keys), apart from
 * the session code so that they can be tested on their own. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <security/pam_modules.h>

#include "names.h"
#include "time-util.h"

#define EXEMPT_MAX 32
#define TEMPLATE_MAX 256

typedef struct Options {
        uint32_t slots;                 /* 0: not given (the fleet limit) */
        uint32_t weight;                /* 0: not given (1) */
        usec_t wait;
        bool deny_on_error;
        bool exempt_root;
        bool debug;
        bool quiet;
        uid_t agent_uid;
        char name_template[TEMPLATE_MAX];
        char ns[IDENT_MAX_LEN + 1];
        char exempt_users[EXEMPT_MAX][64];
        size_t n_exempt_users;
        char exempt_groups[EXEMPT_MAX][64];
        size_t n_exempt_groups;
        char error[512];                /* the first malformed option, if any */
} Options;

/* Fills o from the arguments; the first malformed one lands in o->error. */
void parse_options(pam_handle_t *pamh, int argc, const char **argv, Options *o);

