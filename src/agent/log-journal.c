/* SPDX-License-Identifier: MIT */
#include <inttypes.h>
#include <stdio.h>
#include <systemd/sd-journal.h>

#include "log-journal.h"

void log_journal_sink(int level, const LogFields *f, const char *msg) {
        char token[32] = "";

        if (!f) {
                sd_journal_send("MESSAGE=%s", msg, "PRIORITY=%i", level,
                                "SYSLOG_IDENTIFIER=%s", log_get_ident(), NULL);
                return;
        }
        if (f->token > 0)
                snprintf(token, sizeof(token), "%" PRIu64, f->token);

        if (f->action) {
                sd_journal_send("MESSAGE=%s", msg, "PRIORITY=%i", level,
                                "SYSLOG_IDENTIFIER=%s", log_get_ident(),
                                "FLEETSEM_NAME=%s", f->name ?: "",
                                "FLEETSEM_ACTION=%s", f->action,
                                "FLEETSEM_OPERATOR=%s", f->operator ?: "",
                                "FLEETSEM_REASON=%s", f->reason ?: "",
                                "FLEETSEM_LEASE=%s", f->lease ?: "",
                                "FLEETSEM_TOKEN=%s", token,
                                NULL);
                return;
        }
        /* Empty fields are sent as empty values rather than left out, so the
         * argument list stays fixed. */
        sd_journal_send("MESSAGE=%s", msg, "PRIORITY=%i", level,
                        "SYSLOG_IDENTIFIER=%s", log_get_ident(),
                        "FLEETSEM_NAME=%s", f->name ?: "",
                        "FLEETSEM_LEASE=%s", f->lease ?: "",
                        "FLEETSEM_TOKEN=%s", token,
                        "FLEETSEM_HOLDER=%s", f->holder ?: "",
                        NULL);
}
