/* SPDX-License-Identifier: MIT */
/* Operators' requests, root on this host only, each acting fleet-wide:
 * DRAIN (no new grant of a name anywhere; holders run on, waiters keep
 * their places) or undrain, REVOKE (a held slot taken back, whoever holds
 * it: free once its holder stopped, or now=1 at once) and LIMIT (the name's fleet limit set or removed). The journal says who did it, from where and why
 * (FLEETSEM_ACTION, FLEETSEM_OPERATOR, FLEETSEM_REASON). */
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "log.h"
#include "lua-keys.h"
#include "log-limit.h"
#include "lua-replies.h"

typedef struct OpCall {
        Agent *agent;
        Client *client;                 /* NULL once it went */
        bool on;                        /* DRAIN: on */
        uint32_t slots;                 /* LIMIT: the fleet limit (0: none) */
        char name[NAME_MAX_LEN + 1];
        char lease[LEASE_ID_LEN + 1];   /* REVOKE */
        char host[IDENT_MAX_LEN + 1];   /* REVOKE host=: every lease of that host */
        size_t pending;                 /* … calls under way */
        size_t held, waiting, granted;  /* … their outcome so far */
        long long free_in;              /* … ms until the last slot revoked is free */
        bool at_once;                   /* REVOKE now=1 */
        bool failed;
        uid_t uid;
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

/* A call that failed in Redis: logged and told (why: NULL for what Redis
 * said, or that it went). */
static void op_failed(OpCall *d, const LogFields *f, const RedisReply *reply, const char *what, const char *why) {
        why = why ?: !reply ? "Redis went before it answered" : redis_reply_error(reply) ?: "unexpected reply from Redis";

        log_internal(LOG_ERR, 0, f, "Failed to %s for %s: %s", what, d->operator, why);
        if (d->client)
                client_send_error(d->client, reply ? error_code_of_redis_error(redis_reply_error(reply))
                                                   : ERROR_CODE_UNAVAILABLE, "%s", why);
        op_finish(d, NULL, 0);
}

static void drain_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        OpCall *d = userdata;
        LogFields f = { .name = d->name, .action = d->on ? "drain" : "undrain", .operator = d->operator,
                        .reason = d->reason };
        char line[PROTO_REPLY_MAX], text[512], what[NAME_MAX_LEN + 16];
        const char *was;
        ReplyDrain r = {};
        bool changed;
        size_t granted;
        MessageBuilder b;

        (void) conn;
        if (!reply || redis_reply_error(reply) || reply_decode_drain(reply, &r) < 0) {
                if (reply && !redis_reply_error(reply))
                        reply_log_unknown("drain", d->name, reply, "the operator is told it failed");
                snprintf(what, sizeof(what), "%s %s", f.action, d->name);
                op_failed(d, &f, reply, what, NULL);
                return;
        }
        changed = r.outcome == REPLY_DRAIN_CHANGED;
        was = changed ? r.changed.was : r.unchanged.was;
        granted = changed ? r.changed.granted.n : r.unchanged.granted.n;
        if (d->on)
                log_internal(LOG_NOTICE, 0, &f, "%s %s fleet-wide for %s: no new slot is granted until it is undrained "
                             "(%s).", changed ? "Drained" : "Drained again", d->name, d->operator,
                             d->reason[0] ? d->reason : "no reason given");
        else if (changed)
                log_internal(LOG_NOTICE, 0, &f, "Undrained %s for %s (drained %s); %zu waiter(s) granted at once.",
                             d->name, d->operator,
                             engine_drain_text(was, text, sizeof(text)) >= 0 ? text : "before", granted);
        else
                log_internal(LOG_INFO, 0, &f, "Undrain of %s for %s: it was not drained.", d->name, d->operator);
        message_start(&b, line, sizeof(line), d->on ? "DRAINED" : "UNDRAINED");
        message_add(&b, "name", d->name);
        message_add_u64(&b, "changed", (uint64_t) changed);
        if (!d->on)
                message_add_u64(&b, "granted", granted);
        if (was[0] && engine_drain_text(was, text, sizeof(text)) >= 0)
                message_add(&b, "was", text);
        op_finish(d, line, message_finish(&b));
}

static void limit_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        OpCall *d = userdata;
        LogFields f = { .name = d->name, .action = "limit", .operator = d->operator, .reason = d->reason };
        char line[PROTO_REPLY_MAX], was[SLOTS_DRAIN_RECORD_MAX + 32] = "", text[512] = "", what[NAME_MAX_LEN + 32];
        uint32_t before = 0;
        ReplyLimit r = {};
        size_t granted;
        MessageBuilder b;

        (void) conn;
        if (!reply || redis_reply_error(reply) || reply_decode_limit(reply, &r) < 0 ||
            (r.set.was[0] && engine_cap_text(r.set.was, &before, text, sizeof(text)) < 0)) {
                if (reply && !redis_reply_error(reply))
                        reply_log_unknown("limit", d->name, reply, "the operator is told it failed");
                snprintf(what, sizeof(what), "set the fleet limit of %s", d->name);
                op_failed(d, &f, reply, what, reply && !redis_reply_error(reply) ? "unexpected reply from Redis" : NULL);
                return;
        }
        granted = r.set.granted.n;
        if (before)
                snprintf(was, sizeof(was), "%" PRIu32 ", set %s", before, text);
        else
                snprintf(was, sizeof(was), "none");
        if (d->slots > 0)
                log_internal(LOG_NOTICE, 0, &f, "Set the fleet limit of %s to %" PRIu32 " for %s (%s; it was %s); %zu "
                             "waiter(s) granted at once.", d->name, d->slots, d->operator,
                             d->reason[0] ? d->reason : "no reason given", was, granted);
        else
                log_internal(LOG_NOTICE, 0, &f, "Removed the fleet limit of %s for %s (%s; it was %s); %zu waiter(s) "
                             "granted at once.", d->name, d->operator, d->reason[0] ? d->reason : "no reason given",
                             was, granted);
        message_start(&b, line, sizeof(line), "LIMITED");
        message_add(&b, "name", d->name);
        message_add_u64(&b, "slots", d->slots);
        message_add_u64(&b, "granted", granted);
        if (before) {
                message_add_u64(&b, "was", before);
                message_add(&b, "was_set", text);
        }
        op_finish(d, line, message_finish(&b));
}

/* What a revoke script's reply (replies.list) says: status, the tag
 * (REPLY_REVOKE_*), and the lease's owner; the token and the waiters
 * granted of a holder freed at once; the token and when its slot is free
 * at the latest of a holder revoked. -EBADMSG: not such a reply (logged
 * when not an error). */
typedef struct RevokeOutcome {
        ReplyRevokeOutcome status;
        long long token, free_in_ms;
        char host[IDENT_MAX_LEN + 1];
        unsigned long long uid;
        size_t granted;
} RevokeOutcome;

static int revoke_parse(const char *name, const RedisReply *reply, RevokeOutcome *o) {
        const char *owner = NULL;
        ReplyRevoke r = {};
        int n = 0;

        *o = (RevokeOutcome) {};
        if (!reply || redis_reply_error(reply))
                return -EBADMSG;
        if (reply_decode_revoke(reply, &r) < 0) {
                reply_log_unknown("revoke", name, reply, "the operator is told it may have been revoked");
                return -EBADMSG;
        }
        o->status = r.outcome;
        switch (r.outcome) {
        case REPLY_REVOKE_FREED:
                owner = r.freed.owner;
                o->token = r.freed.token;
                o->granted = r.freed.granted.n;
                break;
        case REPLY_REVOKE_FENCED:
                owner = r.fenced.owner;
                o->token = r.fenced.token;
                o->free_in_ms = r.fenced.free_in_ms;
                break;
        case REPLY_REVOKE_WAITS:
                owner = r.waits.owner;
                break;
        case REPLY_REVOKE_WAITER:
                owner = r.waiter.owner;
                break;
        case REPLY_REVOKE_HOLDS:
                owner = r.holds.owner;
                break;
        default:
                break;
        }
        /* "HOST UID" */
        if (owner && (sscanf(owner, "%64s %llu%n", o->host, &o->uid, &n) != 2 || owner[n] != '\0' ||
                      !ident_is_valid(o->host))) {
                reply_log_unknown("revoke", name, reply, "the operator is told it may have been revoked");
                return -EBADMSG;
        }
        return 0;
}

/* What a revoke that Redis did not answer as expected may have done. */
static const char *revoke_unknown(const RedisReply *reply) {
        return !reply ? "Redis went before it answered; the slot may have been revoked, see fleetsem status"
               : redis_reply_error(reply) ?: "unexpected reply from Redis; the slot may have been revoked, see fleetsem status";
}

static void revoke_log(OpCall *d, const char *name, const char *lease, const RevokeOutcome *o) {
        LogFields f = { .name = name, .lease = lease, .token = (uint64_t) o->token, .action = "revoke",
                        .operator = d->operator, .reason = d->reason };

        if (o->status == REPLY_REVOKE_FREED)
                log_internal(LOG_NOTICE, 0, &f, "Revoked the slot of %s held by lease %s on %s (uid %llu, token %lld) "
                             "for %s (%s), freed at once (now); %zu waiter(s) granted at once. If its holder still "
                             "runs, it runs beside them until its agent hears of it or it fences itself.", name, lease,
                             o->host, o->uid, o->token, d->operator, d->reason[0] ? d->reason : "no reason given",
                             o->granted);
        else if (o->status == REPLY_REVOKE_FENCED)
                log_internal(LOG_NOTICE, 0, &f, "Revoked the slot of %s held by lease %s on %s (uid %llu, token %lld) "
                             "for %s (%s); it is free once its holder stopped, in %lld ms at the latest.", name, lease,
                             o->host, o->uid, o->token, d->operator, d->reason[0] ? d->reason : "no reason given",
                             o->free_in_ms);
        else if (o->status == REPLY_REVOKE_WAITER)
                log_internal(LOG_NOTICE, 0, &f, "Revoked lease %s of %s, waiting on %s (uid %llu), for %s (%s).",
                             lease, name, o->host, o->uid, d->operator, d->reason[0] ? d->reason : "no reason given");
}

static void revoke_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        OpCall *d = userdata;
        LogFields f = { .name = d->name, .lease = d->lease, .action = "revoke", .operator = d->operator,
                        .reason = d->reason };
        char line[PROTO_REPLY_MAX], what[NAME_MAX_LEN + 64];
        RevokeOutcome o;
        MessageBuilder b;

        (void) conn;
        if (revoke_parse(d->name, reply, &o) < 0) {
                snprintf(what, sizeof(what), "revoke lease %s of %s", d->lease, d->name);
                op_failed(d, &f, reply, what, revoke_unknown(reply));
                return;
        }
        if (o.status != REPLY_REVOKE_FREED && o.status != REPLY_REVOKE_FENCED) {
                log_internal(LOG_INFO, 0, &f, "Revoke of lease %s of %s for %s: %s; nothing revoked.", d->lease, d->name,
                             d->operator,
                             o.status == REPLY_REVOKE_WAITS ? "it waits, it holds no slot" : "no such lease holds a slot");
                if (d->client)
                        client_send_error(d->client, ERROR_CODE_NOT_HELD, "lease %s holds no slot of %s%s", d->lease,
                                          d->name, o.status == REPLY_REVOKE_WAITS ? " (it waits)" : "");
                op_finish(d, NULL, 0);
                return;
        }
        revoke_log(d, d->name, d->lease, &o);
        message_start(&b, line, sizeof(line), "REVOKED");
        message_add(&b, "name", d->name);
        message_add(&b, "lease", d->lease);
        message_add(&b, "host", o.host);
        message_add_u64(&b, "uid", o.uid);
        message_add_u64(&b, "token", (uint64_t) o.token);
        message_add_u64(&b, "granted", o.granted);
        message_add_u64(&b, "free_in", (uint64_t) o.free_in_ms);
        op_finish(d, line, message_finish(&b));
}

/* ---- REVOKE host=: every lease of a host, holders and waiters --------------------- */

typedef struct HostLease {
        OpCall *op;
        char name[NAME_MAX_LEN + 1];
        char lease[LEASE_ID_LEN + 1];
} HostLease;

/* The last of a host's revokes answered: the summary. */
static void host_revoke_done(OpCall *d) {
        LogFields f = { .name = d->name[0] ? d->name : "*", .action = "revoke", .operator = d->operator,
                        .reason = d->reason };
        char line[PROTO_REPLY_MAX];
        MessageBuilder b;

        log_internal(d->failed ? LOG_WARNING : LOG_NOTICE, 0, &f,
                     "Revoked every lease of host %s%s%s for %s (%s): %zu held slot(s), %zu waiting; %zu waiter(s) "
                     "granted at once%s.", d->host, d->name[0] ? " on " : "", d->name, d->operator,
                     d->reason[0] ? d->reason : "no reason given", d->held, d->waiting, d->granted,
                     d->failed ? "; Redis did not say what became of some (see above)" : "");
        if (d->failed && d->client) {
                client_send_error(d->client, ERROR_CODE_REDIS, "Redis did not answer every revoke of %s's leases; "
                                  "%zu held slot(s) and %zu waiting revoked as far as it did (see the journal)",
                                  d->host, d->held, d->waiting);
                op_finish(d, NULL, 0);
                return;
        }
        message_start(&b, line, sizeof(line), "REVOKED");
        message_add(&b, "host", d->host);
        if (d->name[0])
                message_add(&b, "name", d->name);
        message_add_u64(&b, "held", d->held);
        message_add_u64(&b, "waiting", d->waiting);
        message_add_u64(&b, "granted", d->granted);
        message_add_u64(&b, "free_in", (uint64_t) d->free_in);
        op_finish(d, line, message_finish(&b));
}

static void host_lease_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        HostLease *hl = userdata;
        OpCall *d = hl->op;
        RevokeOutcome o;

        (void) conn;
        if (revoke_parse(hl->name, reply, &o) < 0) {
                LogFields f = { .name = hl->name, .lease = hl->lease, .action = "revoke", .operator = d->operator,
                                .reason = d->reason };

                log_internal(LOG_ERR, 0, &f, "Failed to revoke lease %s of %s for %s: %s", hl->lease, hl->name,
                             d->operator, revoke_unknown(reply));
                d->failed = true;
        } else {
                revoke_log(d, hl->name, hl->lease, &o);
                d->held += o.status == REPLY_REVOKE_FREED || o.status == REPLY_REVOKE_FENCED;
                d->waiting += o.status == REPLY_REVOKE_WAITER;
                d->free_in = MAX(d->free_in, o.free_in_ms);
                d->granted += o.granted;
        }
        free(hl);
        if (--d->pending == 0)
                host_revoke_done(d);
}

/* The host's index (PREFIX:host:{HOST}: lease -> "NAME SLOTS UID UNIT
 * ON-LOST", kept by its agent): a revoke call for each of its leases, of
 * the name asked for or all, twice: first for those that wait, then for
 * those that hold, so that no slot the host held goes to its own waiters
 * (one connection a shard keeps the order). Leases already gone answer
 * {0}. */
static void host_index_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        OpCall *d = userdata;
        size_t n = redis_reply_array_len(reply) & ~(size_t) 1;  /* field, value, ... */

        (void) conn;
        if (!reply || redis_reply_error(reply)) {
                LogFields f = { .name = d->name[0] ? d->name : "*", .action = "revoke", .operator = d->operator,
                                .reason = d->reason };

                op_failed(d, &f, reply, "read the leases of the host to revoke", NULL);
                return;
        }
        d->pending = 1;         /* until every call is sent */
        for (size_t j = 0; j < 2 * n; j += 2) {
                size_t i = j % n;
                const char *which = j < n ? REVOKE_WAITERS : REVOKE_HOLDERS;
                char id[LEASE_ID_LEN + 1], value[NAME_MAX_LEN + UNIT_NAME_MAX + 64], name[NAME_MAX_LEN + 1];
                HostLease *hl;

                if (redis_reply_array_string(reply, i, id, sizeof(id)) < 0 || !lease_id_is_valid(id) ||
                    redis_reply_array_string(reply, i + 1, value, sizeof(value)) < 0 ||
                    sscanf(value, "%200s", name) != 1 || !name_is_valid(name) || (d->name[0] && !streq(name, d->name)))
                        continue;
                hl = calloc(1, sizeof(*hl));
                if (!hl) {
                        d->failed = true;
                        break;
                }
                *hl = (HostLease) { .op = d };
                snprintf(hl->name, sizeof(hl->name), "%s", name);
                snprintf(hl->lease, sizeof(hl->lease), "%s", id);
                if (io_call_revoke(d->agent, hl->name, hl->lease, d->uid, d->user, d->reason, which, d->at_once,
                                   host_lease_reply, hl) < 0) {
                        free(hl);
                        d->failed = true;
                        continue;
                }
                d->pending++;
        }
        if (--d->pending == 0)
                host_revoke_done(d);
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
                client_send_redis_down(c);
                return NULL;
        }
        d = calloc(1, sizeof(*d));
        if (!d) {
                client_send_error(c, ERROR_CODE_BUSY, "out of memory; try again");
                return NULL;
        }
        *d = (OpCall) { .agent = a, .client = c, .on = req->drain, .slots = req->slots, .uid = c->cred.uid,
                        .at_once = req->revoke_now };
        snprintf(d->name, sizeof(d->name), "%s", req->name);
        snprintf(d->lease, sizeof(d->lease), "%s", req->lease);
        snprintf(d->host, sizeof(d->host), "%s", req->host);
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

void limit_request(Agent *a, Client *c, const Request *req) {
        OpCall *d = op_start(a, c, req, "set the fleet limit of", "set a fleet limit");

        if (d && io_call_limit(a, d->name, d->slots, c->cred.uid, d->user, d->reason, limit_reply, d) < 0)
                op_not_sent(c, d);
}

void revoke_request(Agent *a, Client *c, const Request *req) {
        OpCall *d = op_start(a, c, req, "revoke a slot of", "revoke a slot");
        char key[IDENT_MAX_LEN * 2 + 16];

        if (!d)
                return;
        if (d->host[0]) {
                snprintf(key, sizeof(key), KEY_HOST_FMT, a->config->key_prefix, d->host);
                if (redis_key_command(a, host_index_reply, d, 2, (const char *[]) { "HGETALL", key }) < 0)
                        op_not_sent(c, d);
                return;
        }
        if (io_call_revoke(a, d->name, d->lease, c->cred.uid, d->user, d->reason, REVOKE_HOLDERS, d->at_once, revoke_reply,
                           d) < 0)
                op_not_sent(c, d);
}
