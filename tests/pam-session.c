/* SPDX-License-Identifier: MIT */
/* Opens a PAM session through Linux-PAM, as a login program would, and
 * keeps it open until stdin ends (or says "close"):
 *
 *   pam-session SERVICE USER [--silent] [--rhost HOST] [--confdir DIR]
 *
 * Prints what the modules tell the user ("info: …", "error: …"), the result
 * of pam_open_session ("open: CODE TEXT"), the environment it gave the
 * session ("env: FLEETSEM_…"), then "close: CODE TEXT". With --confdir the
 * service file is read from DIR (pam_start_confdir()); otherwise from where
 * PAM reads it (under pam_wrapper: $PAM_WRAPPER_SERVICE_DIR). */

#include <security/pam_appl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int conv(int n, const struct pam_message **msg, struct pam_response **resp, void *data) {
        struct pam_response *r = calloc((size_t) n, sizeof(*r));

        (void) data;
        if (!r)
                return PAM_BUF_ERR;
        for (int i = 0; i < n; i++) {
                switch (msg[i]->msg_style) {
                case PAM_ERROR_MSG:
                        printf("error: %s\n", msg[i]->msg);
                        break;
                case PAM_TEXT_INFO:
                        printf("info: %s\n", msg[i]->msg);
                        break;
                default:
                        free(r);
                        return PAM_CONV_ERR;    /* nothing to prompt for in a session */
                }
        }
        fflush(stdout);
        *resp = r;
        return PAM_SUCCESS;
}

int main(int argc, char *argv[]) {
        struct pam_conv c = { conv, NULL };
        const char *rhost = NULL, *confdir = NULL;
        pam_handle_t *pamh = NULL;
        char line[64], **env;
        int flags = 0, r;

        if (argc < 3) {
                fprintf(stderr, "usage: %s SERVICE USER [--silent] [--rhost HOST] [--confdir DIR]\n", argv[0]);
                return 64;
        }
        for (int i = 3; i < argc; i++) {
                if (strcmp(argv[i], "--silent") == 0)
                        flags = PAM_SILENT;
                else if (strcmp(argv[i], "--rhost") == 0 && i + 1 < argc)
                        rhost = argv[++i];
                else if (strcmp(argv[i], "--confdir") == 0 && i + 1 < argc)
                        confdir = argv[++i];
                else {
                        fprintf(stderr, "unknown argument %s\n", argv[i]);
                        return 64;
                }
        }

        r = confdir ? pam_start_confdir(argv[1], argv[2], &c, confdir, &pamh) : pam_start(argv[1], argv[2], &c, &pamh);
        if (r != PAM_SUCCESS) {
                printf("start: %d %s\n", r, pam_strerror(pamh, r));
                return 1;
        }
        if (rhost)
                (void) pam_set_item(pamh, PAM_RHOST, rhost);

        r = pam_open_session(pamh, flags);
        printf("open: %d %s\n", r, pam_strerror(pamh, r));
        if (r == PAM_SUCCESS) {
                env = pam_getenvlist(pamh);
                for (char **e = env; e && *e; e++) {
                        if (strncmp(*e, "FLEETSEM_", 9) == 0)
                                printf("env: %s\n", *e);
                        free(*e);
                }
                free(env);
        }
        fflush(stdout);

        if (r == PAM_SUCCESS) {
                while (fgets(line, sizeof(line), stdin))
                        if (strncmp(line, "close", 5) == 0)
                                break;
                r = pam_close_session(pamh, flags);
                printf("close: %d %s\n", r, pam_strerror(pamh, r));
                fflush(stdout);
        }
        pam_end(pamh, r);
        return 0;
}
