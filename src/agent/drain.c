/* SPDX-License-Identifier: MIT */
/* DRAIN: root on this host drains a name fleet-wide (no new grant
 * anywhere; holders run on, waiters keep their places) or lets it grant
 * again. The journal says who did it, from where and why (FLEETSEM_ACTION,
 * FLEETSEM_OPERATOR, FLEETSEM_REASON). */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "log.h"
#include "log-limit.h"

typedef struct DrainCall {
        Agent *agent;
        Client *client;                 /* NULL once it went */
        bool on;
        char name[NAME_MAX_LEN + 1];
        char user[64];
        char operator[IDENT_MAX_LEN + 128];
        char reason[DRAIN_REASON_MAX + 1];
} DrainCall;

static void drain_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        DrainCall *d = userdata;
        LogFields f = { .name = d->name, .action = d->on ? "drain" : "undrain", .operator = d->operator,
                        .reason = d->reason };
        char line[PROTO_REPLY_MAX], was[SLOTS_DRAIN_RECORD_MAX + 1] = "", text[512];
        long long changed = -1;
        size_t granted;
        MessageBuilder b;

        (void) conn;
        if (reply && !redis_reply_error(reply) &&
            (redis_reply_array_integer(reply, 0, &changed) < 0 || (changed != 0 && changed != 1) ||
             redis_reply_array_string(reply, 1, was, sizeof(was)) < 0 || redis_reply_array_len(reply) % 3 != 2))
                changed = -1;
        granted = redis_reply_array_len(reply) >= 2 ? (redis_reply_array_len(reply) - 2) / 3 : 0;
        if (!reply || redis_reply_error(reply) || changed < 0) {
                const char *why = !reply ? "Redis went before it answered" :
                                  redis_reply_error(reply) ?: "unexpected reply from Redis";

                log_internal(LOG_ERR, 0, &f, "Failed to %s %s for %s: %s", f.action, d->name, d->operator, why);
                if (d->client)
                        client_send_error(d->client, reply ? ERROR_CODE_REDIS : ERROR_CODE_UNAVAILABLE, "%s", why);
                goto finish;
        }
        if (d->on)
                log_internal(LOG_NOTICE, 0, &f, "%s %s fleet-wide for %s: no new slot is granted until it is undrained "
                             "(%s).", changed ? "Drained" : "Drained again", d->name, d->operator,
                             d->reason[0] ? d->reason : "no reason given");
        else if (changed)
                log_internal(LOG_NOTICE, 0, &f, "Undrained %s for %s (drained %s); %zu waiter(s) granted at once.",
                             d->name, d->operator,
                             slots_drain_text(was, text, sizeof(text)) >= 0 ? text : "before", granted);
        else
                log_internal(LOG_INFO, 0, &f, "Undrain of %s for %s: it was not drained.", d->name, d->operator);
        if (d->client) {
                message_start(&b, line, sizeof(line), d->on ? "DRAINED" : "UNDRAINED");
                message_add(&b, "name", d->name);
                message_add_u64(&b, "changed", (uint64_t) changed);
                if (!d->on)
                        message_add_u64(&b, "granted", granted);
                if (was[0] && slots_drain_text(was, text, sizeof(text)) >= 0)
                        message_add(&b, "was", text);
                client_send(d->client, line, message_finish(&b));
                client_finish(d->client);
        }
finish:
        if (d->client)
                d->client->drain_ref = NULL;
        free(d);
}

void drain_request(Agent *a, Client *c, const Request *req) {
        struct passwd pw, *p = NULL;
        char buf[1024];
        DrainCall *d;

        if (c->cred.uid != 0) {
                log_uid(c->cred.uid, now_mono(), LOG_NOTICE, "Refused to %s %s for uid " UID_FMT ": root only.",
                        req->drain ? "drain" : "undrain", req->name, c->cred.uid);
                client_send_error(c, ERROR_CODE_PERMISSION, "only root may drain or undrain a name");
                return;
        }
        if (a->state != REDIS_READY) {
                client_send_error(c, ERROR_CODE_UNAVAILABLE, "Redis is unavailable (%s): nothing changed",
                                  a->redis_error[0] ? a->redis_error : "not connected");
                return;
        }
        d = calloc(1, sizeof(*d));
        if (!d) {
                client_send_error(c, ERROR_CODE_BUSY, "out of memory; try again");
                return;
        }
        *d = (DrainCall) { .agent = a, .client = c, .on = req->drain };
        snprintf(d->name, sizeof(d->name), "%s", req->name);
        snprintf(d->reason, sizeof(d->reason), "%s", req->reason);
        if (getpwuid_r(c->cred.uid, &pw, buf, sizeof(buf), &p) == 0 && p && ident_is_valid(p->pw_name))
                snprintf(d->user, sizeof(d->user), "%s", p->pw_name);
        else
                snprintf(d->user, sizeof(d->user), "uid" UID_FMT, c->cred.uid);
        snprintf(d->operator, sizeof(d->operator), "%s (uid " UID_FMT ", pid " PID_FMT ") on %s", d->user,
                 c->cred.uid, c->cred.pid, a->config->host_id);
        if (io_call_drain(a, d->name, d->on, c->cred.uid, d->user, d->reason, drain_reply, d) < 0) {
                client_send_error(c, ERROR_CODE_UNAVAILABLE, "Redis is unavailable: nothing changed");
                free(d);
                return;
        }
        c->drain_ref = &d->client;
}
