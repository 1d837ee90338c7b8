/* SPDX-License-Identifier: MIT */
/* The engine's script calls without I/O: keys, arguments and replies
 * (script-args.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "replies.h"
#include "hash-slot.h"
#include "script-args.h"

int script_key(char buf[static SCRIPT_KEY_SIZE], const char *prefix, const char *const *names, size_t n_names,
               bool sharded, unsigned slot, size_t i) {
        if (i < n_names * N_KEYS)
                return snprintf(buf, SCRIPT_KEY_SIZE, "%s:{%s}:%s", prefix, names[i / N_KEYS], key_suffix[i % N_KEYS]);
        if (sharded)
                return snprintf(buf, SCRIPT_KEY_SIZE, "%s:%s:{%s}", prefix, key_fleet[i - n_names * N_KEYS],
                                hash_slot_tag(slot));
        return snprintf(buf, SCRIPT_KEY_SIZE, "%s:%s", prefix, key_fleet[i - n_names * N_KEYS]);
}

/* idle is how long the name stays in Redis after a renewal, idle_new
 * after a request or a release: config_name_life() says why. No call
 * shortens the keys' time while the name has holders or waiters
 * (idle_due(), line.lua), so a shorter idle never cuts short another
 * lease's. */
void common_args(const Config *config, uint64_t grace_until_ms, uid_t uid, bool host_held, CommonArgs *ret) {
        uint64_t ttl = (host_held ? config->host_lease : config->lease_ttl) / USEC_PER_MSEC;
        uint64_t idle = config_name_life(config, uid, host_held, true) / USEC_PER_MSEC;
        uint64_t idle_new = config_name_life(config, uid, host_held, false) / USEC_PER_MSEC;

        snprintf(ret->ttl, sizeof(ret->ttl), "%" PRIu64, ttl);
        snprintf(ret->uid, sizeof(ret->uid), UID_FMT, uid);
        snprintf(ret->grace, sizeof(ret->grace), "%" PRIu64, grace_until_ms);
        snprintf(ret->idle, sizeof(ret->idle), "%" PRIu64, idle);
        snprintf(ret->idle_new, sizeof(ret->idle_new), "%" PRIu64, idle_new);
}

void acquire_args(const Config *config, uint64_t grace_until_ms, const Lease *l, AcquireArgs *ret) {
        common_args(config, grace_until_ms, l->uid, l->host_held, &ret->c);
        snprintf(ret->slots, sizeof(ret->slots), "%" PRIu32, l->slots);
        snprintf(ret->weight, sizeof(ret->weight), "%" PRIu32, l->weight);
        memcpy(ret->argv, (const char *[N_ACQUIRE_ARGS]) {
                        [ARG_ACQUIRE_LEASE] = l->id, [ARG_ACQUIRE_SLOTS] = ret->slots,
                        [ARG_ACQUIRE_TTL_MS] = ret->c.ttl, [ARG_ACQUIRE_DESCRIPTION] = l->desc,
                        [ARG_ACQUIRE_HOST] = config->host_id, [ARG_ACQUIRE_UID] = ret->c.uid,
                        [ARG_ACQUIRE_GRACE_UNTIL_MS] = ret->c.grace, [ARG_ACQUIRE_IDLE_MS] = ret->c.idle_new,
                        [ARG_ACQUIRE_WEIGHT] = ret->weight, [ARG_ACQUIRE_HOLD] = l->host_held ? "1" : "0",
                        [ARG_ACQUIRE_PROOF] = l->proof,
               }, sizeof(ret->argv));
}

void release_args(const Config *config, uint64_t grace_until_ms, const char *lease, uid_t uid, bool host_held,
                  ReleaseArgs *ret) {
        common_args(config, grace_until_ms, uid, host_held, &ret->c);
        memcpy(ret->argv, (const char *[N_RELEASE_ARGS]) {
                        [ARG_RELEASE_LEASE] = lease, [ARG_RELEASE_HOST] = config->host_id,
                        [ARG_RELEASE_UID] = ret->c.uid, [ARG_RELEASE_GRACE_UNTIL_MS] = ret->c.grace,
                        [ARG_RELEASE_IDLE_MS] = ret->c.idle_new,
               }, sizeof(ret->argv));
}

int renew_args(const Config *config, uint64_t grace_until_ms, const char (*ids)[LEASE_ID_LEN + 1], size_t n_ids,
               uid_t uid, bool host_held, RenewArgs *ret) {
        ret->argv = calloc(ARG_RENEW_LEASES + n_ids, sizeof(char *));
        if (!ret->argv)
                return -ENOMEM;
        ret->n = ARG_RENEW_LEASES + n_ids;
        common_args(config, grace_until_ms, uid, host_held, &ret->c);
        ret->argv[ARG_RENEW_TTL_MS] = ret->c.ttl;
        ret->argv[ARG_RENEW_HOST] = config->host_id;
        ret->argv[ARG_RENEW_GRACE_UNTIL_MS] = ret->c.grace;
        ret->argv[ARG_RENEW_IDLE_MS] = ret->c.idle;
        for (size_t i = 0; i < n_ids; i++)
                ret->argv[ARG_RENEW_LEASES + i] = ids[i];
        return 0;
}

void renew_args_free(RenewArgs *a) {
        free(a->argv);
        a->argv = NULL;
        a->n = 0;
}

void reassert_args(const Config *config, uint64_t grace_until_ms, const Lease *l, ReassertArgs *ret) {
        common_args(config, grace_until_ms, l->uid, l->host_held, &ret->c);
        snprintf(ret->slots, sizeof(ret->slots), "%" PRIu32, l->slots);
        snprintf(ret->weight, sizeof(ret->weight), "%" PRIu32, l->weight);
        snprintf(ret->token, sizeof(ret->token), "%" PRIu64, l->token);
        snprintf(ret->since, sizeof(ret->since), "%" PRIu64, l->since_ms);
        memcpy(ret->argv, (const char *[N_REASSERT_ARGS]) {
                        [ARG_REASSERT_LEASE] = l->id, [ARG_REASSERT_SLOTS] = ret->slots,
                        [ARG_REASSERT_TOKEN] = ret->token, [ARG_REASSERT_SINCE_MS] = ret->since,
                        [ARG_REASSERT_TTL_MS] = ret->c.ttl, [ARG_REASSERT_DESCRIPTION] = l->desc,
                        [ARG_REASSERT_HOST] = config->host_id, [ARG_REASSERT_UID] = ret->c.uid,
                        [ARG_REASSERT_GRACE_UNTIL_MS] = ret->c.grace, [ARG_REASSERT_IDLE_MS] = ret->c.idle,
                        [ARG_REASSERT_WEIGHT] = ret->weight, [ARG_REASSERT_HOLD] = l->host_held ? "1" : "0",
               }, sizeof(ret->argv));
}

AcquireResult acquire_result(const char *name, const RedisReply *reply) {
        AcquireResult r;

        if (redis_reply_error(reply))
                return (AcquireResult) { .outcome = ACQUIRE_FAILED, .error = redis_reply_error(reply) };
        if (reply_decode_acquire(reply, &r) < 0) {
                reply_log_unknown("acquire", name, reply, "the request fails");
                return (AcquireResult) { .outcome = ACQUIRE_FAILED, .error = "unexpected reply from Redis" };
        }
        return r;
}

size_t release_granted(const char *name, const char *lease, const RedisReply *reply, Granted g[ENGINE_GRANTS_MAX]) {
        const char *err = redis_reply_error(reply);
        const ReplyList *granted = NULL;
        ReplyRelease d;
        size_t k = 0;

        if (err)
                log_warning("Redis refused to release %s of %s: %s", lease, name, err);
        else if (reply && reply_decode_release(reply, &d) < 0)
                reply_log_unknown("release", name, reply, "nobody is told of a slot it freed");
        else if (reply && d.outcome == REPLY_RELEASE_REFUSED)
                log_warning("Redis records lease %s of %s for another host or user; not released.", lease, name);
        else if (reply)
                granted = d.outcome == REPLY_RELEASE_RELEASED ? &d.released.granted : &d.not_held.granted;
        for (; granted && k < granted->n && k < ENGINE_GRANTS_MAX; k++) {
                ReplyGrant grant;

                if (reply_list_get(granted, k, &grant) < 0)
                        break;
                g[k] = (Granted) { .token = (uint64_t) grant.token, .since_ms = (uint64_t) grant.since_ms };
                memcpy(g[k].lease, grant.lease, sizeof(g[k].lease));
        }
        return k;
}

void granted_wake(const Granted *g, size_t k, char buf[static GRANTED_WAKE_MAX]) {
        size_t n = (size_t) snprintf(buf, GRANTED_WAKE_MAX, "g");

        for (size_t i = 0; i < k && n < GRANTED_WAKE_MAX; i++)
                n += (size_t) snprintf(buf + n, GRANTED_WAKE_MAX - n, " %s %" PRIu64 " %" PRIu64 " -", g[i].lease,
                                       g[i].token, g[i].since_ms);
}

int renew_result(const char (*ids)[LEASE_ID_LEN + 1], size_t n_ids, const RedisReply *reply, bool *missing,
                 usec_t *ret_forgot_left) {
        ReplyRenew d;

        if (reply_decode_renew(reply, &d) < 0 || d.renewed.missing.n > n_ids)
                return -EBADMSG;
        for (size_t j = 0; j < d.renewed.missing.n; j++) {
                ReplyMissing m;
                bool known = false;

                if (reply_list_get(&d.renewed.missing, j, &m) < 0)
                        return -EBADMSG;
                for (size_t i = 0; i < n_ids; i++)
                        if (streq(ids[i], m.lease))
                                missing[i] = known = true;
                if (!known)
                        return -EBADMSG;
        }
        *ret_forgot_left = (usec_t) MIN(d.renewed.forgot_ms, (long long) (USEC_INFINITY / USEC_PER_MSEC / 2)) * USEC_PER_MSEC;
        return 0;
}

int reassert_result(const char *name, const RedisReply *reply) {
        ReplyReassert d = {};

        if (!reply)
                return -2;
        if (redis_reply_error(reply))
                return 0;
        if (reply_decode_reassert(reply, &d) < 0) {
                reply_log_unknown("reassert", name, reply, "the slot counts as not held");
                return 0;
        }
        return d.outcome == REPLY_REASSERT_HELD ? 1 : d.outcome == REPLY_REASSERT_REFUSED ? -1 : 0;
}
