/* SPDX-License-Identifier: MIT */
/* pam_fleetsem's arguments and name template, through a real PAM handle.
 * The input is the module's argument list, one argument a line; after a
 * line "--", the rest is the file any conf= argument reads, and its first
 * line is also the remote host, the user's account name and group. Whatever
 * is accepted holds valid values, and the name a template expands to is
 * always a valid name (the template itself when it has no escape), whatever
 * the values hold. */

#include <security/pam_appl.h>

#include "fuzz.h"
#include "pam-args.h"
#include "pam-name.h"
#include "protocol.h"

#define ARGS_MAX 64

static int no_conv(int n, const struct pam_message **msg, struct pam_response **resp, void *userdata) {
        return PAM_CONV_ERR;
}

static pam_handle_t *handle(void) {
        static const struct pam_conv conv = { no_conv, NULL };
        static pam_handle_t *pamh;

        if (!pamh) {
                fuzz_assert(pam_start("fleetsem-fuzz", "alice", &conv, &pamh) == PAM_SUCCESS);
                fuzz_assert(pam_set_item(pamh, PAM_RHOST, "client.example.org") == PAM_SUCCESS);
        }
        return pamh;
}

static void check_options(const Options *o) {
        /* slots 0: not given, the fleet limit's; weight 0: not given (1) */
        fuzz_assert(o->slots <= SLOTS_MAX && o->weight <= SLOTS_MAX);
        fuzz_assert(o->slots == 0 || o->weight <= o->slots);
        fuzz_assert(o->name_template[0] && strlen(o->name_template) < TEMPLATE_MAX);
        fuzz_assert(ident_is_valid(o->ns));
        fuzz_assert(o->n_exempt_users <= EXEMPT_MAX && o->n_exempt_groups <= EXEMPT_MAX);
        for (size_t i = 0; i < o->n_exempt_users; i++)
                fuzz_assert(o->exempt_users[i][0]);
        for (size_t i = 0; i < o->n_exempt_groups; i++)
                fuzz_assert(o->exempt_groups[i][0]);
}

static void check_name(pam_handle_t *pamh, const Options *o, const char *value) {
        const Who w = { .user = value, .account = value, .uid = 1000, .gid = 1000, .group = value };
        char name[NAME_MAX_LEN + 1];
        const char *why = NULL;
        int r;

        fuzz_assert(pam_set_item(pamh, PAM_RHOST, value) == PAM_SUCCESS);
        r = expand_name(pamh, o->name_template, &w, name, &why);
        if (r < 0) {
                fuzz_assert(why);
                return;
        }
        fuzz_assert(name_is_valid(name));
        if (!strchr(o->name_template, '%'))
                fuzz_assert(strcmp(name, o->name_template) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *s = fuzz_string(data, size), *conf, *save = NULL, *line, *value;
        const char *argv[ARGS_MAX];
        char *owned[ARGS_MAX];
        static Options o;
        int argc = 0;

        conf = strstr(s, "\n--\n");
        if (conf) {
                *conf = '\0';
                conf += 4;
        }
        fuzz_assert((value = strndup(conf ?: "", strcspn(conf ?: "", "\n"))));
        for (line = strtok_r(s, "\n", &save); line && argc < ARGS_MAX; line = strtok_r(NULL, "\n", &save)) {
                /* conf=ANYTHING reads the file after "--", not a path from the input. */
                if (strncmp(line, "conf=", 5) == 0) {
                        const char *path = fuzz_file(conf ?: "", conf ? strlen(conf) : 0);

                        fuzz_assert(asprintf(&owned[argc], "conf=%s", path) > 0);
                } else
                        fuzz_assert((owned[argc] = strdup(line)));
                argv[argc] = owned[argc];
                argc++;
        }

        parse_options(handle(), argc, argv, &o);
        fuzz_assert(strlen(o.error) < sizeof(o.error));
        if (!o.error[0])
                check_options(&o);
        check_name(handle(), &o, value);

        for (int i = 0; i < argc; i++)
                free(owned[i]);
        free(value);
        free(s);
        return 0;
}
