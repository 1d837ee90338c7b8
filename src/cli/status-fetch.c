/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "client.h"
#include "log.h"
#include "macro.h"
#include "status-fetch.h"

#define ENTRIES_MAX 1000000

const char *status_get(const Entry *e, const char *key) {
        return message_get(&e->m, key) ?: "";
}

static int status_fetch(const char *ns, uid_t agent_uid, const char *name, usec_t deadline, StatusOutput *out) {
        _cleanup_close_ int fd = -EBADF;
        Request req = { .verb = REQUEST_STATUS };
        LineReader lr;
        int r;

        snprintf(req.name, sizeof(req.name), "%s", name ?: "");
        r = client_send_request_until(ns, agent_uid, deadline, -EBADF, &req, &fd);
        if (r < 0)
                return cli_request_failed(ns, r);
        line_reader_init(&lr, PROTO_REPLY_MAX);

        for (;;) {
                Entry *e;

                if (out->n >= out->size) {
                        size_t size = out->size ? out->size * 2 : 64;
                        Entry *p;

                        if (size > ENTRIES_MAX || !(p = reallocarray(out->entries, size, sizeof(Entry)))) {
                                log_error("Status too large.");
                                return EXIT_SOFTWARE;
                        }
                        out->entries = p;
                        out->size = size;
                }
                e = &out->entries[out->n];
                r = cli_read_message(fd, &lr, deadline, "status", STATUS_TIMEOUT_TEXT, &e->m);
                if (r != 0)
                        return r;
                if (streq(e->m.verb, "END")) {
                        const char *now = message_get(&e->m, "now");
                        uint64_t v = 0;

                        if (now && parse_uint64(now, 0, UINT64_MAX / 2, &v) >= 0 && (long long) v > out->now_ms)
                                out->now_ms = (long long) v;
                        snprintf(out->redis, sizeof(out->redis), "%s", message_get(&e->m, "redis") ?: "");
                        if (parse_uint64(message_get(&e->m, "master_since") ?: "", 1, UINT64_MAX / 2, &v) >= 0)
                                out->master_since_ms = v;
                        /* (A reason this client does not know of is not told.) */
                        if (parse_uint64(message_get(&e->m, "grace") ?: "", 1, TTL_MS_MAX, &v) >= 0 &&
                            grace_why_text(message_get(&e->m, "why"))) {
                                out->grace_ms = v;
                                out->grace_why = grace_why_text(message_get(&e->m, "why"));
                        }
                        snprintf(out->evicts, sizeof(out->evicts), "%s", message_get(&e->m, "evicts") ?: "");
                        if (message_get(&e->m, "refused") && message_get(&e->m, "refusing")) {
                                snprintf(out->refused, sizeof(out->refused), "%s", message_get(&e->m, "refused"));
                                snprintf(out->refusing, sizeof(out->refusing), "%s", message_get(&e->m, "refusing"));
                        }
                        return 0;
                }
                if (streq(e->m.verb, "NAME") || streq(e->m.verb, "HOLDER") || streq(e->m.verb, "WAITER"))
                        out->n++;
        }
}

int status_fetch_names(const char *ns, uid_t agent_uid, char *const *names, int n, StatusOutput *out) {
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + STATUS_TIMEOUT;
        int code = 0;

        if (n == 0)
                return status_fetch(ns, agent_uid, NULL, deadline, out);
        for (int i = 0; i < n && code == 0; i++)
                code = status_fetch(ns, agent_uid, names[i], deadline, out);
        return code;
}

void status_output_free(StatusOutput *out) {
        free(out->entries);
        *out = (StatusOutput) {};
}
