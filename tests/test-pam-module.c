/* SPDX-License-Identifier: MIT */
/* The built pam_fleetsem.so loads with dlopen() on its own, as PAM loads it,
 * and exports the PAM entry points and nothing else. */

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "tap.h"

int main(int argc, char *argv[]) {
        static const char *const internal[] = { "request_parse", "anchor_create", "client_send_request",
                                                "conf_parse_file", "parse_duration", "log_internal" };
        char cmd[4096], sym[512];
        unsigned others = 0, entries = 0;
        void *h;
        FILE *f;

        if (argc != 2) {
                fprintf(stderr, "usage: %s PATH/pam_fleetsem.so\n", argv[0]);
                return 64;
        }
        h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
        CHECK(h != NULL, "dlopen(RTLD_NOW) loads it: %s", h ? "ok" : dlerror());
        if (!h)
                return tap_done();
        CHECK(dlsym(h, "pam_sm_open_session") != NULL, "pam_sm_open_session is exported");
        CHECK(dlsym(h, "pam_sm_close_session") != NULL, "pam_sm_close_session is exported");
        for (size_t i = 0; i < sizeof(internal) / sizeof(internal[0]); i++)
                CHECK(dlsym(h, internal[i]) == NULL, "%s stays inside", internal[i]);
        dlclose(h);

        /* Every defined dynamic symbol, not just the ones we thought of. */
        snprintf(cmd, sizeof(cmd), "nm -D --defined-only '%s'", argv[1]);
        f = popen(cmd, "r");
        CHECK(f != NULL, "nm runs");
        while (f && fscanf(f, "%*s %*s %511s", sym) == 1) {
                if (strncmp(sym, "pam_sm_", 7) == 0)
                        entries++;
                else {
                        others++;
                        printf("# also exported: %s\n", sym);
                }
        }
        CHECK(f && pclose(f) == 0, "nm succeeds");
        CHECK(entries == 2, "nm lists the 2 pam_sm_ entry points (%u)", entries);
        CHECK(others == 0, "and no other symbol (%u)", others);
        return tap_done();
}
