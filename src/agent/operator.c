/* SPDX-License-Identifier: MIT */
/* Operators' requests, root on this host only, each acting fleet-wide:
 * DRAIN (no new grant of a name anywhere; holders run on, waiters keep
 * their places) or undrain, and REVOKE (a held slot freed now, whoever
 * holds it). The journal says who did it, from where and why
 * (FLEETSEM_ACTION, FLEETSEM_OPERATOR, FLEETSEM_REASON). */
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "log.h"
#include "log-limit.h"

typedef struct OpCall {
        Agent *agent;
        Client *client;                 /* NULL once it went */
        bool on;                        /* DRAIN: on */
        char name[NAME_MAX_LEN + 1];
        char lease[LEASE_ID_LEN + 1];   /* REVOKE */
        char user[64];
        char operator[IDENT_MAX_LEN + 128];
        char reason[DRAIN_REASON_MAX + 1];
} OpCall;

/* The end of a call: replies (when a reply line is given) and lets the
 * client go; frees it. */
static void op_finish(OpCall *d, const char *line, int len) {
        if (d->client) {
                if (line) {
                        client_send(d->client, line, len);
                        client_finish(d->client);
                }
                d->client->op_ref = NULL;
        }
        free(d);
}

/* A call that failed in Redis: logged and told. */
static void op_failed(OpCall *d, const LogFields *f, const RedisReply *reply, const char *what) {
        const char *why = !reply ? "Redis went before it answered" : redis_reply_error(reply) ?: "unexpected reply from Redis";

        log_internal(LOG_ERR, 0, f, "Failed to %s for %s: %s", what, d->operator, why);
        if (d->client)
                client_send_error(d->client, reply ? ERROR_CODE_REDIS : ERROR_CODE_UNAVAILABLE, "%s", why);
        op_finish(d, NULL, 0);
}

static void drain_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        OpCall *d = userdata;
        LogFields f = { .name = d->name, .action = d->on ? "drain" : "undrain", .operator = d->operator,
                        .reason = d->reason };
        char line[PROTO_REPLY_MAX], was[SLOTS_DRAIN_RECORD_MAX + 1] = "", text[512], what[NAME_MAX_LEN + 16];
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
                snprintf(what, sizeof(what), "%s %s", f.action, d->name);
                op_failed(d, &f, reply, what);
                return;
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
        message_start(&b, line, sizeof(line), d->on ? "DRAINED" : "UNDRAINED");
        message_add(&b, "name", d->name);
        message_add_u64(&b, "changed", (uint64_t) changed);
        if (!d->on)
                message_add_u64(&b, "granted", granted);
        if (was[0] && slots_drain_text(was, text, sizeof(text)) >= 0)
                message_add(&b, "was", text);
        op_finish(d, line, message_finish(&b));
}

/* {1, "HOST UID", token, granted...} revoked; {2, "HOST UID"} it waits;
 * {0} no such lease holds or waits. */
static void revoke_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        OpCall *d = userdata;
        LogFields f = { .name = d->name, .lease = d->lease, .action = "revoke", .operator = d->operator,
                        .reason = d->reason };
        char line[PROTO_REPLY_MAX], owner[IDENT_MAX_LEN + 32] = "", host[IDENT_MAX_LEN + 1], what[NAME_MAX_LEN + 64];
        long long status = -1, token = 0;
        unsigned long long uid = 0;
        size_t granted = 0;
        MessageBuilder b;

        (void) conn;
        if (reply && !redis_reply_error(reply) &&
            (redis_reply_array_integer(reply, 0, &status) < 0 || status < 0 || status > 2 ||
             (status >= 1 && (redis_reply_array_string(reply, 1, owner, sizeof(owner)) < 0 ||
                              sscanf(owner, "%64s %llu", host, &uid) != 2 || !ident_is_valid(host))) ||
             (status == 1 && (redis_reply_array_integer(reply, 2, &token) < 0 || token <= 0 ||
                              redis_reply_array_len(reply) % 3 != 0))))
                status = -1;
        if (!reply || redis_reply_error(reply) || status < 0) {
                snprintf(what, sizeof(what), "revoke lease %s of %s", d->lease, d->name);
                op_failed(d, &f, reply, what);
                return;
        }
        if (status != 1) {
                log_internal(LOG_INFO, 0, &f, "Revoke of lease %s of %s for %s: %s; nothing revoked.", d->lease, d->name,
                             d->operator, status == 2 ? "it waits, it holds no slot" : "no such lease holds a slot");
                if (d->client)
                        client_send_error(d->client, ERROR_CODE_NOT_HELD, "lease %s holds no slot of %s%s", d->lease,
                                          d->name, status == 2 ? " (it waits)" : "");
                op_finish(d, NULL, 0);
                return;
        }
        granted = (redis_reply_array_len(reply) - 3) / 3;
        f.token = (uint64_t) token;
        log_internal(LOG_NOTICE, 0, &f, "Revoked the slot of %s held by lease %s on %s (uid %llu, token %lld) for %s "
                     "(%s); %zu waiter(s) granted at once. Its holder learns it at its agent's next renewal; until "
                     "then, or its own fence, it may run on.", d->name, d->lease, host, uid, token, d->operator,
                     d->reason[0] ? d->reason : "no reason given", granted);
        message_start(&b, line, sizeof(line), "REVOKED");
        message_add(&b, "name", d->name);
        message_add(&b, "lease", d->lease);
        message_add(&b, "host", host);
        message_add_u64(&b, "uid", uid);
        message_add_u64(&b, "token", (uint64_t) token);
        message_add_u64(&b, "granted", granted);
        op_finish(d, line, message_finish(&b));
}

/* Root only, Redis up: a call under way for the client, or NULL (told
 * why). what: "drain" in "Refused to drain NAME"; root_only: "drain or
 * undrain a name" in "only root may …". */
static OpCall *op_start(Agent *a, Client *c, const Request *req, const char *what, const char *root_only) {
        struct passwd pw, *p = NULL;
        char buf[1024];
        OpCall *d;

        if (c->cred.uid != 0) {
                log_uid(c->cred.uid, now_mono(), LOG_NOTICE, "Refused to %s %s for uid " UID_FMT ": root only.", what,
                        req->name, c->cred.uid);
                client_send_error(c, ERROR_CODE_PERMISSION, "only root may %s", root_only);
                return NULL;
        }
        if (a->state != REDIS_READY) {
                client_send_error(c, ERROR_CODE_UNAVAILABLE, "Redis is unavailable (%s): nothing changed",
                                  a->redis_error[0] ? a->redis_error : "not connected");
                return NULL;
        }
        d = calloc(1, sizeof(*d));
        if (!d) {
                client_send_error(c, ERROR_CODE_BUSY, "out of memory; try again");
                return NULL;
        }
        *d = (OpCall) { .agent = a, .client = c, .on = req->drain };
        snprintf(d->name, sizeof(d->name), "%s", req->name);
        snprintf(d->lease, sizeof(d->lease), "%s", req->lease);
        snprintf(d->reason, sizeof(d->reason), "%s", req->reason);
        if (getpwuid_r(c->cred.uid, &pw, buf, sizeof(buf), &p) == 0 && p && ident_is_valid(p->pw_name))
                snprintf(d->user, sizeof(d->user), "%s", p->pw_name);
        else
                snprintf(d->user, sizeof(d->user), "uid" UID_FMT, c->cred.uid);
        snprintf(d->operator, sizeof(d->operator), "%s (uid " UID_FMT ", pid " PID_FMT ") on %s", d->user,
                 c->cred.uid, c->cred.pid, a->config->host_id);
        c->op_ref = &d->client;
        return d;
}

/* The call could not be sent: told, and no longer under way. */
static void op_not_sent(Client *c, OpCall *d) {
        c->op_ref = NULL;
        client_send_error(c, ERROR_CODE_UNAVAILABLE, "Redis is unavailable: nothing changed");
        free(d);
}

void drain_request(Agent *a, Client *c, const Request *req) {
        OpCall *d = op_start(a, c, req, req->drain ? "drain" : "undrain", "drain or undrain a name");

        if (d && io_call_drain(a, d->name, d->on, c->cred.uid, d->user, d->reason, drain_reply, d) < 0)
                op_not_sent(c, d);
}

void revoke_request(Agent *a, Client *c, const Request *req) {
        OpCall *d = op_start(a, c, req, "revoke a slot of", "revoke a slot");

        if (d && io_call_revoke(a, d->name, d->lease, c->cred.uid, d->user, d->reason, revoke_reply, d) < 0)
                op_not_sent(c, d);
}
