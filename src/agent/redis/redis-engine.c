/* SPDX-License-Identifier: MIT */
/* The slot engine's effects on Redis (SlotsOps: acquire, release, renew,
 * reassert, this host's index, wake-ups), with each script's arguments
 * built here and its reply checked and decoded before the engine sees it.
 * Grants wait for the replicas where min_replicas_acked asks for it. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "lua-args.h"
#include "lua-replies.h"
#include "redis-layer.h"

#define IDLE_DEFAULT_MS (24ULL * 3600 * 1000)
#define IDLE_NEW_MS (10ULL * 60 * 1000)
#define NO_WAIT_WAIT_TIMEOUT (500 * USEC_PER_MSEC)      /* WAIT for a request that would not wait */

static Agent *agent_of(void *ctx) {
        return ctx;
}

/* What every script on name is told besides its own arguments: idle is
 * how long the name stays in Redis after a renewal (idle_time), idle_new
 * after a request or a release (IDLE_NEW_MS, at most idle_time): a name
 * nobody ever held for a third of a lease leaves Redis within minutes, so
 * names made in a loop do not pile up for a day. */
typedef struct CommonArgs {
        char ttl[24], uid[16], grace[24], idle[24], idle_new[24];
} CommonArgs;

/* A slot the host holds itself (host_held) has its own lease (host_lease),
 * and the name's keys are kept for at least twice that from its calls, so
 * that a host that reboots right after its grant finds its slot when it
 * is back. */
static void common_args(Agent *a, const char *name, uid_t uid, bool host_held, CommonArgs *c) {
        uint64_t ttl = (host_held ? a->config->host_lease : a->config->lease_ttl) / USEC_PER_MSEC;
        uint64_t idle = a->config->idle_time ? a->config->idle_time / USEC_PER_MSEC : IDLE_DEFAULT_MS;
        uint64_t idle_new = MIN(idle, (uint64_t) IDLE_NEW_MS);

        if (host_held)
                idle = idle_new = MAX(idle, 2 * ttl);
        snprintf(c->ttl, sizeof(c->ttl), "%" PRIu64, ttl);
        snprintf(c->uid, sizeof(c->uid), UID_FMT, uid);
        snprintf(c->grace, sizeof(c->grace), "%" PRIu64, redis_grace_until(a, name));
        snprintf(c->idle, sizeof(c->idle), "%" PRIu64, idle);
        snprintf(c->idle_new, sizeof(c->idle_new), "%" PRIu64, idle_new);
}

void io_lease_args(Agent *a, bool host_held, const char *name, uid_t uid, char ttl[static 24], char idle[static 24]) {
        CommonArgs c;

        common_args(a, name, uid, host_held, &c);
        memcpy(ttl, c.ttl, sizeof(c.ttl));
        memcpy(idle, c.idle, sizeof(c.idle));
}

/* ---- The engine's calls: acquire ------------------------------------------------- */

/* With replicas (Sentinel), a grant is told only once WAIT says enough
 * replicas have it: a failover cannot then lose a slot someone holds.
 * Enough: min_replicas_acked, or under Sentinel and in a Cluster all the
 * master has if it has fewer (ROLE, right after the grant). A master
 * without replicas is told at once: no failover can promote a replica
 * without the grant (one that attaches later copies it), and one that
 * restarts empty is a reset. */
typedef struct GrantWait {
        Agent *agent;
        Lease *lease;
        int need;
        AcquireResult result;
} GrantWait;

/* Well under the time after which a silent Redis counts as hung (WAIT
 * blocks the connection it is sent on). */
static usec_t wait_timeout(const Agent *a) {
        return MIN(redis_command_timeout(a->redis_io) / 2, USEC_PER_SEC);
}

/* A grant the replicas did not confirm, given back. Not sent (Redis went),
 * it stays with the lease: the request asks again under the same id and
 * finds it (acquire.lua grants a lease its slot again), or its TTL ends it
 * when the request goes. */
static void give_back(Agent *a, const Lease *l) {
        int r = io_call_release(a, l->name->name, l->id, l->uid);

        if (r < 0)
                log_debug_errno(r, "Failed to give back the unconfirmed grant of lease %s of %s: %m; it ends with its "
                                "lease.", l->id, l->name->name);
}

/* The engine hears how the grant gw waited for ended: r (NULL: Redis went
 * before it said; asked again on the next master). */
static void grant_wait_done(GrantWait *gw, const AcquireResult *r) {
        slots_acquire_done(&gw->agent->slots, gw->lease, r, now_mono());
        free(gw);
}

/* The grant was not confirmed: given back, and the request waits again
 * (or is denied, if it would not wait). */
static void grant_give_back(GrantWait *gw, const char *why) {
        Lease *l = gw->lease;

        if (l->state != LEASE_GONE)     /* (released meanwhile: given back already) */
                give_back(gw->agent, l);
        gw->result = (AcquireResult) { .outcome = ACQUIRE_RETRY, .error = why };
        grant_wait_done(gw, &gw->result);
}

static void wait_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        GrantWait *gw = userdata;
        Agent *a = gw->agent;
        long long n = -1;
        char why[256];

        (void) conn;
        if (!reply) {
                grant_wait_done(gw, NULL);
                return;
        }
        if (redis_reply_integer(reply, &n) >= 0 && n >= gw->need) {
                grant_wait_done(gw, &gw->result);
                return;
        }
        snprintf(why, sizeof(why), "the grant reached %lld of the %d replica(s) it waited for (min_replicas_acked %d); given back",
                 n < 0 ? 0 : n, gw->need, a->config->min_replicas_acked);
        grant_give_back(gw, why);
}

static int wait_send(GrantWait *gw, RedisConn *conn) {
        Agent *a = gw->agent;
        char n[16], ms[24];

        snprintf(n, sizeof(n), "%d", gw->need);
        /* A request that would not wait is answered while its client
         * still listens (it gives the agent 800 ms). */
        snprintf(ms, sizeof(ms), "%" PRIu64,
                 (gw->lease->no_wait ? MIN(wait_timeout(a), NO_WAIT_WAIT_TIMEOUT) : wait_timeout(a)) / USEC_PER_MSEC);
        return redis_conn_command(conn, wait_reply, gw, 3, (const char *[]) { "WAIT", n, ms }, NULL);
}

/* ROLE, asked right after the grant on the same connection: how many
 * replicas the master has now. Each of them may have the grant only once
 * WAIT says so; one that attaches later copies it. With none now nor at
 * the last look, the grant is told at once: no failover can then promote
 * a replica that lacks it. */
static void grant_role_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        GrantWait *gw = userdata;
        Agent *a = gw->agent;
        Shard *sh = shard_of_conn(a->redis_io, conn);
        int before;

        if (!reply) {
                grant_wait_done(gw, NULL);
                return;
        }
        before = sh ? sh->n_replicas : -1;
        if (!sh || !shard_role_parse(sh, reply)) {
                grant_give_back(gw, "the server that granted it is no master any more (ROLE)");
                return;
        }
        gw->need = MIN(a->config->min_replicas_acked, MAX(before, sh->n_replicas));
        if (gw->need <= 0) {
                grant_wait_done(gw, &gw->result);
                return;
        }
        if (wait_send(gw, conn) < 0)
                grant_give_back(gw, "cannot ask the replicas");
}

/* On conn: the connection to the master that granted it. 0: the grant is
 * told once the replicas have it (or, under Sentinel and in a Cluster,
 * once ROLE says there are none); <0: the replicas cannot be asked. */
static int wait_for_replicas(Agent *a, RedisConn *conn, Lease *l, const AcquireResult *r) {
        _cleanup_free_ GrantWait *gw = NULL;
        int k;

        gw = malloc(sizeof(*gw));
        if (!gw)
                return -ENOMEM;
        *gw = (GrantWait) { .agent = a, .lease = l, .need = a->config->min_replicas_acked, .result = *r };
        if (a->redis_io->topo->failover)
                k = redis_conn_command(conn, grant_role_reply, gw, 1, (const char *[]) { "ROLE" }, NULL);
        else
                k = wait_send(gw, conn);
        if (k < 0)
                return -ENOTCONN;
        TAKE_PTR(gw);           /* the reply's now */
        return 0;
}

/* The engine's result from acquire.lua's reply (replies.list); one that
 * fits no shape grants nothing. */
static AcquireResult acquire_result(const Lease *l, const RedisReply *reply, ReplyAcquire *d) {
        if (redis_reply_error(reply))
                return (AcquireResult) { .outcome = ACQUIRE_FAILED, .error = redis_reply_error(reply), .next_expiry_ms = -1 };
        if (reply_decode_acquire(reply, d) < 0) {
                reply_log_unknown("acquire", l->name->name, reply, "the request fails");
                return (AcquireResult) { .outcome = ACQUIRE_FAILED, .error = "unexpected reply from Redis",
                                         .next_expiry_ms = -1 };
        }
        switch (d->outcome) {
        case REPLY_ACQUIRE_GRANTED:
                return (AcquireResult) { .outcome = ACQUIRE_GRANTED, .token = (uint64_t) d->granted.token,
                                         .since_ms = (uint64_t) d->granted.since_ms, .held = (uint32_t) d->granted.held,
                                         .limit = (uint32_t) d->granted.limit };
        case REPLY_ACQUIRE_QUEUED:
                return (AcquireResult) { .outcome = ACQUIRE_QUEUED, .position = (uint32_t) d->queued.position,
                                         .held = (uint32_t) d->queued.held, .limit = (uint32_t) d->queued.limit,
                                         .next_expiry_ms = d->queued.next_expiry_ms,
                                         .drain = d->n_fields == 5 ? d->queued.drain : NULL };
        case REPLY_ACQUIRE_REFUSED:
                return (AcquireResult) { .outcome = ACQUIRE_REFUSED, .next_expiry_ms = -1 };
        case REPLY_ACQUIRE_NO_LIMIT:
                return (AcquireResult) { .outcome = ACQUIRE_NO_LIMIT, .next_expiry_ms = -1 };
        case REPLY_ACQUIRE_TOO_HEAVY:
                return (AcquireResult) { .outcome = ACQUIRE_TOO_HEAVY, .limit = (uint32_t) d->too_heavy.limit,
                                         .next_expiry_ms = -1 };
        case N_REPLY_ACQUIRE:
                break;
        }
        return (AcquireResult) { .outcome = ACQUIRE_FAILED, .error = "unexpected reply from Redis", .next_expiry_ms = -1 };
}

static void acquire_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Lease *l = userdata;
        Agent *a = agent_of(l->slots_engine->ctx);
        ReplyAcquire d;
        AcquireResult r;

        if (!reply) {
                slots_acquire_done(&a->slots, l, NULL, now_mono());
                return;
        }
        r = acquire_result(l, reply, &d);
        if (r.outcome == ACQUIRE_GRANTED && a->config->min_replicas_acked > 0) {
                if (wait_for_replicas(a, conn, l, &r) >= 0)
                        return;
                give_back(a, l);
                r = (AcquireResult) { .outcome = ACQUIRE_RETRY, .error = "cannot ask the replicas" };
        }
        slots_acquire_done(&a->slots, l, &r, now_mono());
}

int io_call_acquire(void *ctx, Lease *l) {
        Agent *a = agent_of(ctx);
        char slots[16], weight[16];
        CommonArgs c;

        common_args(a, l->name->name, l->uid, l->host_held, &c);
        snprintf(slots, sizeof(slots), "%" PRIu32, l->slots);
        snprintf(weight, sizeof(weight), "%" PRIu32, l->weight);
        return script_call(a, SCRIPT_ACQUIRE, l->name->name, acquire_reply, l, N_ACQUIRE_ARGS,
                           (const char *[N_ACQUIRE_ARGS]) {
                                   [ARG_ACQUIRE_LEASE] = l->id, [ARG_ACQUIRE_SLOTS] = slots,
                                   [ARG_ACQUIRE_TTL_MS] = c.ttl, [ARG_ACQUIRE_DESCRIPTION] = l->desc,
                                   [ARG_ACQUIRE_HOST] = a->config->host_id, [ARG_ACQUIRE_UID] = c.uid,
                                   [ARG_ACQUIRE_GRACE_UNTIL_MS] = c.grace, [ARG_ACQUIRE_IDLE_MS] = c.idle_new,
                                   [ARG_ACQUIRE_WEIGHT] = weight, [ARG_ACQUIRE_PROOF] = l->proof,
                           },
                           NULL);
}

/* ---- release -------------------------------------------------------------------- */

typedef struct ReleaseCall {
        Agent *agent;
        uid_t uid;
        char name[NAME_MAX_LEN + 1];
        char lease[LEASE_ID_LEN + 1];
} ReleaseCall;

static void release_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        ReleaseCall *rc = userdata;
        Agent *a = rc->agent;
        const char *err = redis_reply_error(reply);
        Granted g[SLOTS_GRANTS_MAX] = {};
        const ReplyList *granted = NULL;
        ReplyRelease d;
        size_t k = 0;

        (void) conn;
        if (err)
                log_warning("Redis refused to release %s of %s: %s", rc->lease, rc->name, err);
        else if (reply && reply_decode_release(reply, &d) < 0)
                reply_log_unknown("release", rc->name, reply, "nobody is told of a slot it freed");
        else if (reply && d.outcome == REPLY_RELEASE_REFUSED)
                log_warning("Redis records lease %s of %s for another host or user; not released.", rc->lease, rc->name);
        else if (reply)
                /* Whom the release handed slots to. */
                granted = d.outcome == REPLY_RELEASE_RELEASED ? &d.released.granted : &d.not_held.granted;
        for (; granted && k < granted->n && k < SLOTS_GRANTS_MAX; k++) {
                ReplyGrant grant;

                if (reply_list_get(granted, k, &grant) < 0)
                        break;
                memcpy(g[k].lease, grant.lease, sizeof(g[k].lease));
                g[k].token = (uint64_t) grant.token;
                g[k].since_ms = (uint64_t) grant.since_ms;
        }
        if (k > 0 && a->config->min_replicas_acked > 0) {
                /* Those granted here are told once WAIT confirms it: they
                 * ask Redis (and wait for the replicas) as on a wake-up. */
                char payload[SLOTS_GRANTS_MAX * 80] = "g";
                size_t n = 1;

                for (size_t i = 0; i < k && n < sizeof(payload); i++)
                        n += (size_t) snprintf(payload + n, sizeof(payload) - n, " %s %" PRIu64 " %" PRIu64 " -",
                                               g[i].lease, g[i].token, g[i].since_ms);
                slots_release_done(&a->slots, rc->name, rc->lease, rc->uid, false, NULL, 0, now_mono());
                slots_wake(&a->slots, rc->name, payload, now_mono());
                free(rc);
                return;
        }
        slots_release_done(&a->slots, rc->name, rc->lease, rc->uid, !reply, g, k, now_mono());
        free(rc);
}

int io_call_release(void *ctx, const char *name, const char *lease, uid_t uid) {
        Agent *a = agent_of(ctx);
        _cleanup_free_ ReleaseCall *rc = NULL;
        const Lease *l;
        CommonArgs c;
        int r;

        rc = calloc(1, sizeof(*rc));
        if (!rc)
                return -ENOMEM;
        rc->agent = a;
        rc->uid = uid;
        snprintf(rc->name, sizeof(rc->name), "%s", name);
        snprintf(rc->lease, sizeof(rc->lease), "%s", lease);
        /* A host-held slot's release (after its host's boot, or a wait
         * given up) leaves the name's keys their long life: another host
         * of the name may be down, its slot unrenewed, for host_lease. */
        l = slots_lease_find(&a->slots, lease);
        common_args(a, name, uid, l && l->host_held, &c);
        r = script_call(a, SCRIPT_RELEASE, name, release_reply, rc, N_RELEASE_ARGS,
                        (const char *[N_RELEASE_ARGS]) {
                                [ARG_RELEASE_LEASE] = lease, [ARG_RELEASE_HOST] = a->config->host_id,
                                [ARG_RELEASE_UID] = c.uid, [ARG_RELEASE_GRACE_UNTIL_MS] = c.grace,
                                [ARG_RELEASE_IDLE_MS] = c.idle_new,
                        },
                        NULL);
        if (r < 0)
                return r;
        TAKE_PTR(rc);           /* release_reply()'s now */
        /* Out of this host's index with it, whenever it goes out. */
        redis_command(a, "HDEL", 3, (const char *[]) { "HDEL", a->host_key, lease });
        return 0;
}

/* The index of names "fleetsem status" lists, by when they were last used
 * here (names idle for long leave it: status-reply.c). A name's first lease
 * here writes its entry at once; its renewals only once the entry is
 * NAMES_INDEX_EVERY old (a quarter of idle_time, if less), not at every
 * tick: a command that cost Redis as much as a name's renewal in the
 * script, for a time that status needs only to within idle_time. */
#define NAMES_INDEX_EVERY (60 * USEC_PER_SEC)
static void index_name(Agent *a, Name *n, bool renewal) {
        usec_t now = now_mono(), every = MIN(NAMES_INDEX_EVERY, a->config->idle_time / 4);
        char score[24];

        if (renewal && n->io_indexed > 0 && now - n->io_indexed < every)
                return;
        snprintf(score, sizeof(score), "%lld", (long long) (now_usec(CLOCK_REALTIME) / USEC_PER_MSEC));
        redis_command(a, "ZADD", 4, (const char *[]) { "ZADD", a->names_key, score, n->name });
        n->io_indexed = now;
}

/* ---- renew ---------------------------------------------------------------------- */

typedef struct RenewCall {
        Agent *agent;
        usec_t sent;
        size_t n;
        char name[NAME_MAX_LEN + 1];
        char ids[][LEASE_ID_LEN + 1];
} RenewCall;

/* renew.lua's reply (replies.list): how long the name still grants
 * nothing because Redis forgot it (0: it did not), then leases among
 * those sent. Anything else is believed in no part: nothing counts as
 * renewed (holders fence themselves if it goes on), and it is logged as
 * the bug it is. */
static int renew_decode(const RenewCall *rc, const RedisReply *reply, bool *missing, usec_t *ret_forgot_left) {
        ReplyRenew d;

        if (reply_decode_renew(reply, &d) < 0 || d.renewed.missing.n > rc->n)
                return -EBADMSG;
        for (size_t j = 0; j < d.renewed.missing.n; j++) {
                ReplyMissing m;
                bool known = false;

                if (reply_list_get(&d.renewed.missing, j, &m) < 0)
                        return -EBADMSG;
                for (size_t i = 0; i < rc->n; i++)
                        if (streq(rc->ids[i], m.lease))
                                missing[i] = known = true;
                if (!known)
                        return -EBADMSG;
        }
        *ret_forgot_left = (usec_t) MIN(d.renewed.forgot_ms, (long long) (USEC_INFINITY / USEC_PER_MSEC / 2)) * USEC_PER_MSEC;
        return 0;
}

static void renew_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        RenewCall *rc = userdata;
        Agent *a = rc->agent;
        const char *err = redis_reply_error(reply);
        _cleanup_free_ bool *missing = NULL;
        usec_t forgot_left = 0;

        (void) conn;
        if (!reply)
                goto finish;    /* Redis went: the next renewal goes to the next connection */
        if (err) {
                log_error("Redis refused to renew the leases of %s: %s", rc->name, err);
                goto finish;
        }
        missing = calloc(rc->n ?: 1, sizeof(bool));
        if (!missing)
                goto finish;
        if (renew_decode(rc, reply, missing, &forgot_left) < 0) {
                reply_log_unknown("renew", rc->name, reply, "nothing counts as renewed");
                goto finish;
        }
        slots_renew_done(&a->slots, rc->name, (const char (*)[LEASE_ID_LEN + 1]) rc->ids, missing, rc->n, forgot_left,
                         rc->sent, now_mono());
finish:
        free(rc);
}

int io_call_renew(void *ctx, Name *n, const char (*ids)[LEASE_ID_LEN + 1], size_t n_ids, bool host_held) {
        Agent *a = agent_of(ctx);
        _cleanup_free_ const char **args = NULL;
        _cleanup_free_ RenewCall *rc = NULL;
        CommonArgs c;
        int r;

        if (a->state != REDIS_READY)
                return -ENOTCONN;
        rc = malloc(sizeof(*rc) + n_ids * sizeof(rc->ids[0]));
        args = calloc(ARG_RENEW_LEASES + n_ids, sizeof(char *));
        if (!rc || !args)
                return -ENOMEM;
        *rc = (RenewCall) { .agent = a, .sent = now_mono(), .n = n_ids };
        snprintf(rc->name, sizeof(rc->name), "%s", n->name);
        memcpy(rc->ids, ids, n_ids * sizeof(rc->ids[0]));
        common_args(a, n->name, 0, host_held, &c);
        args[ARG_RENEW_TTL_MS] = c.ttl;
        args[ARG_RENEW_HOST] = a->config->host_id;
        args[ARG_RENEW_GRACE_UNTIL_MS] = c.grace;
        args[ARG_RENEW_IDLE_MS] = c.idle;
        for (size_t i = 0; i < n_ids; i++)
                args[ARG_RENEW_LEASES + i] = rc->ids[i];
        r = script_call(a, SCRIPT_RENEW, n->name, renew_reply, rc, ARG_RENEW_LEASES + n_ids, args, NULL);
        if (r < 0) {
                if (r != -ENOTCONN)     /* (Redis gone: said already) */
                        log_warning_errno(r, "Failed to renew the leases of %s: %m; trying again at the next tick.",
                                          n->name);
                return r;
        }
        TAKE_PTR(rc);           /* renew_reply()'s now */
        index_name(a, n, true);
        return 0;
}

/* ---- reassert ------------------------------------------------------------------- */

static void reassert_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Lease *l = userdata;
        Agent *a = agent_of(l->slots_engine->ctx);
        ReplyReassert d = {};
        int result = -2;

        (void) conn;
        if (reply)
                result = 0;     /* an error or nonsense: do not believe it holds */
        if (reply && !redis_reply_error(reply)) {
                if (reply_decode_reassert(reply, &d) < 0)
                        reply_log_unknown("reassert", l->name->name, reply, "the slot counts as not held");
                else
                        result = d.outcome == REPLY_REASSERT_HELD ? 1 : d.outcome == REPLY_REASSERT_REFUSED ? -1 : 0;
        }
        slots_reassert_done(&a->slots, l, result, now_mono());
}

int io_call_reassert(void *ctx, Lease *l) {
        Agent *a = agent_of(ctx);
        char slots[16], weight[16], token[24], since[24];
        CommonArgs c;

        common_args(a, l->name->name, l->uid, l->host_held, &c);
        snprintf(slots, sizeof(slots), "%" PRIu32, l->slots);
        snprintf(weight, sizeof(weight), "%" PRIu32, l->weight);
        snprintf(token, sizeof(token), "%" PRIu64, l->token);
        snprintf(since, sizeof(since), "%" PRIu64, l->since_ms);
        /* Redis lost what it had, the names index with it: the name's next
         * renewal writes its entry again. */
        l->name->io_indexed = 0;
        return script_call(a, SCRIPT_REASSERT, l->name->name, reassert_reply, l, N_REASSERT_ARGS,
                           (const char *[N_REASSERT_ARGS]) {
                                   [ARG_REASSERT_LEASE] = l->id, [ARG_REASSERT_SLOTS] = slots,
                                   [ARG_REASSERT_TOKEN] = token, [ARG_REASSERT_SINCE_MS] = since,
                                   [ARG_REASSERT_TTL_MS] = c.ttl, [ARG_REASSERT_DESCRIPTION] = l->desc,
                                   [ARG_REASSERT_HOST] = a->config->host_id, [ARG_REASSERT_UID] = c.uid,
                                   [ARG_REASSERT_GRACE_UNTIL_MS] = c.grace, [ARG_REASSERT_IDLE_MS] = c.idle,
                                   [ARG_REASSERT_WEIGHT] = weight,
                           },
                           NULL);
}

/* ---- An operator's drain --------------------------------------------------------- */

int io_call_drain(Agent *a, const char *name, bool on, uid_t uid, const char *user, const char *reason,
                  redis_reply_cb cb, void *userdata) {
        CommonArgs c;

        common_args(a, name, uid, false, &c);
        return script_call(a, SCRIPT_DRAIN, name, cb, userdata, N_DRAIN_ARGS,
                           (const char *[N_DRAIN_ARGS]) {
                                   [ARG_DRAIN_ON] = on ? "1" : "0", [ARG_DRAIN_HOST] = a->config->host_id,
                                   [ARG_DRAIN_UID] = c.uid, [ARG_DRAIN_USER] = user, [ARG_DRAIN_REASON] = reason,
                                   [ARG_DRAIN_GRACE_UNTIL_MS] = c.grace, [ARG_DRAIN_IDLE_MS] = c.idle,
                           },
                           NULL);
}

int io_call_limit(Agent *a, const char *name, uint32_t n, uid_t uid, const char *user, const char *reason,
                  redis_reply_cb cb, void *userdata) {
        char slots[16];
        CommonArgs c;

        common_args(a, name, uid, false, &c);
        snprintf(slots, sizeof(slots), "%" PRIu32, n);
        return script_call(a, SCRIPT_LIMIT, name, cb, userdata, N_LIMIT_ARGS,
                           (const char *[N_LIMIT_ARGS]) {
                                   [ARG_LIMIT_N] = slots, [ARG_LIMIT_HOST] = a->config->host_id,
                                   [ARG_LIMIT_UID] = c.uid, [ARG_LIMIT_USER] = user, [ARG_LIMIT_REASON] = reason,
                                   [ARG_LIMIT_GRACE_UNTIL_MS] = c.grace, [ARG_LIMIT_IDLE_MS] = c.idle,
                           },
                           NULL);
}

/* ---- An operator's revoke -------------------------------------------------------- */

int io_call_revoke(Agent *a, const char *name, const char *lease, uid_t uid, const char *user, const char *reason,
                   const char *which, bool at_once, redis_reply_cb cb, void *userdata) {
        CommonArgs c;

        common_args(a, name, uid, false, &c);
        return script_call(a, SCRIPT_REVOKE, name, cb, userdata, N_REVOKE_ARGS,
                           (const char *[N_REVOKE_ARGS]) {
                                   [ARG_REVOKE_LEASE] = lease, [ARG_REVOKE_HOST] = a->config->host_id,
                                   [ARG_REVOKE_UID] = c.uid, [ARG_REVOKE_USER] = user, [ARG_REVOKE_REASON] = reason,
                                   [ARG_REVOKE_GRACE_UNTIL_MS] = c.grace, [ARG_REVOKE_IDLE_MS] = c.idle,
                                   [ARG_REVOKE_WAITERS] = which, [ARG_REVOKE_NOW] = at_once ? "1" : "0",
                           },
                           NULL);
}

/* ---- This host's index ---------------------------------------------------------- */

/* "NAME SLOTS UID UNIT ON-LOST[ WEIGHT[ KIND]]", UNIT "-" when not bound
 * to one, WEIGHT only when above 1 or a KIND follows; KIND "host-held"
 * for a slot the host holds itself (no anchor). */
void io_index(void *ctx, const Lease *l, bool add) {
        Agent *a = agent_of(ctx);
        char value[NAME_MAX_LEN + UNIT_NAME_MAX + 64];

        if (!add) {
                redis_command(a, "HDEL", 3, (const char *[]) { "HDEL", a->host_key, l->id });
                return;
        }
        snprintf(value, sizeof(value), "%s %" PRIu32 " " UID_FMT " %s %s", l->name->name, l->slots, l->uid,
                 l->unit ?: "-", l->stop_on_lost ? "stop" : "ignore");
        if (l->weight > 1 || l->host_held)
                snprintf(value + strlen(value), sizeof(value) - strlen(value), " %" PRIu32, l->weight);
        if (l->host_held)
                snprintf(value + strlen(value), sizeof(value) - strlen(value), " host-held");
        redis_command(a, "HSET", 4, (const char *[]) { "HSET", a->host_key, l->id, value });
        /* A name's first lease here: in the names index at once, not at the
         * next renewal. */
        if (l->name->n_held + l->name->n_waiting <= 1)
                index_name(a, l->name, false);
}

/* ---- Wake-ups ------------------------------------------------------------------- */

/* Subscribed on the pub/sub connection of the name's shard (sharded in a
 * Cluster); again whenever a subscription connection or the map changed. */
void io_name_waiting(void *ctx, Name *n) {
        Agent *a = agent_of(ctx);
        RedisIo *io = a->redis_io;
        char channel[IDENT_MAX_LEN + NAME_MAX_LEN + 16];
        Shard *sh;
        int r;

        if (!io)
                return;         /* stopped: the agent exits */
        if (n->io_generation == io->sub_generation)
                return;
        sh = shard_of_name(io, n->name);
        if (!sh || !sh->sub_ready)
                return;
        snprintf(channel, sizeof(channel), "%s:{%s}:wake", a->config->key_prefix, n->name);
        r = io->topo->sharded ? redis_conn_ssubscribe(sh->sub, channel) : redis_conn_subscribe(sh->sub, channel);
        if (r >= 0)
                n->io_generation = io->sub_generation;
}

void engine_subscribe_all(RedisIo *io) {
        for (Name *n = io->agent->slots.names; n; n = n->all_next)
                if (n->n_waiting > 0 || n->n_held > 0)
                        io_name_waiting(io->agent, n);
        engine_watch(io);
}

/* The pattern subscribed to on the pub/sub connection there is now. */
static bool watch_on(const RedisIo *io) {
        return io->watch_subscribed && io->watch_generation == io->sub_generation;
}

void engine_watch(RedisIo *io) {
        Agent *a = io->agent;
        char pattern[IDENT_MAX_LEN + 16];
        Shard *sh = io->shards[0];
        bool on = watch_on(io);

        /* In a Cluster each name's wake-ups go to its own node (SPUBLISH),
         * and SSUBSCRIBE takes no pattern: status --watch redraws other
         * names on its own timer there. */
        if (io->topo->sharded || !sh || !sh->sub_ready || on == io->watch_all || io->watch_refused)
                return;
        snprintf(pattern, sizeof(pattern), "%s:{*}:wake", a->config->key_prefix);
        if (redis_conn_psubscribe(sh->sub, pattern, io->watch_all) >= 0) {
                io->watch_subscribed = io->watch_all;
                io->watch_generation = io->sub_generation;
        }
}

/* Redis answers a refused subscription with an error that no callback
 * waits for on a pub/sub connection, and hiredis closes the connection
 * then: a pattern the Redis user may not have is not asked for again, or
 * every watch would cut this host's wake-ups. */
void engine_sub_lost(Shard *sh, const char *why) {
        RedisIo *io = sh->io;

        if (!watch_on(io) || !why || !strneq(why, "NOPERM", 6))
                return;
        io->watch_refused = true;
        log_warning("Redis refused the subscription to every name's wake-ups (%s:{*}:wake): %s. fleetsem status "
                    "--watch draws other hosts' changes of names no job here waits for every 10 s only; the agent's "
                    "Redis user needs &%s:{*}:wake (fleetsem.conf(5), REDIS USERS). Not asked again until the agent "
                    "restarts.", io->agent->config->key_prefix, why, io->agent->config->key_prefix);
}

void engine_wake(RedisConn *conn, const RedisReply *reply, void *userdata) {
        RedisIo *io = userdata;
        Agent *a = io->agent;
        char kind[16], channel[IDENT_MAX_LEN + NAME_MAX_LEN + 16], name[NAME_MAX_LEN + 1];
        char payload[SLOTS_GRANTS_MAX * 80] = "";
        const char *open, *close;

        (void) conn;
        if (reply && redis_reply_array_len(reply) == 4 && redis_reply_array_string(reply, 0, kind, sizeof(kind)) >= 0 &&
            streq(kind, "pmessage")) {
                a->fleet_changed(a);    /* (any name's: who watches draws it again) */
                return;
        }
        if (!reply || redis_reply_array_len(reply) != 3 ||
            redis_reply_array_string(reply, 0, kind, sizeof(kind)) < 0 ||
            redis_reply_array_string(reply, 1, channel, sizeof(channel)) < 0)
                return;
        /* "subscribe" too: a release may have come before the subscription.
         * In a Cluster, "smessage" and "ssubscribe". */
        if (!streq(kind, "message") && !streq(kind, "subscribe") && !streq(kind, "smessage") &&
            !streq(kind, "ssubscribe"))
                return;
        open = strchr(channel, '{');
        close = strrchr(channel, '}');
        if (!open || !close || close <= open + 1 || (size_t) (close - open - 1) > NAME_MAX_LEN)
                return;
        memcpy(name, open + 1, (size_t) (close - open - 1));
        name[close - open - 1] = '\0';
        if ((streq(kind, "message") || streq(kind, "smessage")) &&
            redis_reply_array_string(reply, 2, payload, sizeof(payload)) < 0)
                payload[0] = '\0';
        slots_wake(&a->slots, name, payload, now_mono());
}

