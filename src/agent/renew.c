/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <search.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-login.h>

#include "engine-internal.h"
#include "protocol.h"

/* ---- Renewal ------------------------------------------------------------------ */

/* Redis expires a lease TTL after its last renewal reached it. We give up
 * on it sooner, at two thirds of that since the last renewal we sent, so
 * that its holder is told to stop before anyone else can be granted it. */
usec_t lost_after(const Agent *a) {
        return a->config->lease_ttl * 2 / 3;
}

/* A Redis that hangs (stopped, swapping) counts as gone after a third of
 * the lease, within 1s to 5s: soon enough to tell holders in time. */
static usec_t command_timeout(const Agent *a) {
        usec_t t = a->config->lease_ttl / 3;

        return t < USEC_PER_SEC ? USEC_PER_SEC : t > COMMAND_TIMEOUT ? COMMAND_TIMEOUT : t;
}


typedef struct RenewBatch {
        Agent *agent;
        usec_t sent;
        bool reassert;
        size_t n;
        char name[NAME_MAX_LEN + 1];
        char ids[][LEASE_ID_LEN + 1];
} RenewBatch;

static void reassert_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Lease *l = userdata;
        long long ok = 0;
        LogFields f;

        (void) conn;
        if (l->state == LEASE_HELD && reply) {
                if (redis_reply_integer(reply, &ok) >= 0 && ok == 1) {
                        l->renewed = now_usec(CLOCK_MONOTONIC);
                        f = lease_fields(l);
                        log_fields(LOG_NOTICE, &f, "Re-asserted slot of %s (token %" PRIu64 ") after Redis came back without it.",
                                   l->name->name, l->token);
                } else
                        lease_lost(l, redis_reply_error(reply) ?: "its slot was taken while Redis was away");
        }
        lease_unref(l);
}

static void lease_reassert(Lease *l) {
        Agent *a = l->agent;
        char slots[16], token[24], since[24], ttl[24];
        const char *args[] = { l->id, slots, token, since, ttl, l->desc };

        snprintf(slots, sizeof(slots), "%" PRIu32, l->slots);
        snprintf(token, sizeof(token), "%" PRIu64, l->token);
        snprintf(since, sizeof(since), "%" PRIu64, l->since_ms);
        snprintf(ttl, sizeof(ttl), "%" PRIu64, a->config->lease_ttl / USEC_PER_MSEC);
        if (script_call(a, SCRIPT_REASSERT, l->name->name, reassert_reply, lease_ref(l), ELEMENTSOF(args), args, NULL) < 0)
                lease_unref(l);
}

static void renew_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        RenewBatch *batch = userdata;
        Agent *a = batch->agent;
        const char *err = redis_reply_error(reply);
        size_t n_missing = redis_reply_array_len(reply);

        (void) conn;
        if (!reply)
                goto finish;
        if (err) {
                log_error("Redis refused to renew the leases of %s: %s", batch->name, err);
                goto finish;
        }

        for (size_t i = 0; i < batch->n; i++) {
                Lease *l = lease_find(a, batch->ids[i]);
                bool missing = false;
                char id[LEASE_ID_LEN + 1];

                if (!l || l->state == LEASE_GONE)
                        continue;
                for (size_t j = 0; j < n_missing && !missing; j++)
                        missing = redis_reply_array_string(reply, j, id, sizeof(id)) >= 0 && streq(id, l->id);
                if (!missing) {
                        l->renewed = batch->sent;
                        continue;
                }
                if (l->state == LEASE_WAITING) {
                        /* Its place in line expired: queue again, at the end. */
                        l->enqueued = false;
                        l->seq = 0;
                        lease_check(l);
                } else if (batch->reassert && batch->sent - l->renewed < lost_after(a))
                        lease_reassert(l);
                else
                        lease_lost(l, "its lease expired or was evicted in Redis");
        }
finish:
        free(batch);
}

static void renew_name(Agent *a, Name *n, bool reassert) {
        Lease *l = n->leases;

        while (l) {
                RenewBatch *batch;
                const char *args[RENEW_BATCH + 1];
                char ttl[24];
                size_t k = 0;

                batch = malloc(sizeof(*batch) + RENEW_BATCH * sizeof(batch->ids[0]));
                if (!batch)
                        return;
                *batch = (RenewBatch) { .agent = a, .sent = now_usec(CLOCK_MONOTONIC), .reassert = reassert };
                snprintf(batch->name, sizeof(batch->name), "%s", n->name);
                snprintf(ttl, sizeof(ttl), "%" PRIu64, a->config->lease_ttl / USEC_PER_MSEC);
                args[k++] = ttl;
                for (; l && batch->n < RENEW_BATCH; l = l->by_name_next) {
                        if (l->state == LEASE_WAITING && !l->enqueued)
                                continue;
                        memcpy(batch->ids[batch->n], l->id, sizeof(l->id));
                        args[k++] = batch->ids[batch->n++];
                }
                if (batch->n == 0 || script_call(a, SCRIPT_RENEW, n->name, renew_reply, batch, k, args, NULL) < 0)
                        free(batch);
        }
}

void renew_all(Agent *a, bool reassert) {
        for (Name *n = a->names; n; n = n->all_next)
                renew_name(a, n, reassert);
}

static void check_lost_while_down(Agent *a) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        Name *n, *nn;

        LIST_FOREACH_SAFE(all, n, nn, a->names) {
                Lease *l, *next;

                /* lease_lost() may free n once its last lease goes. */
                LIST_FOREACH_SAFE(by_name, l, next, n->leases) {
                        if (l->state == LEASE_HELD && now - l->renewed > lost_after(a))
                                lease_lost(l, "Redis unreachable for too long; the lease runs out before it can be renewed");
                }
        }
}

int on_renew_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        Agent *a = userdata;
        usec_t now = now_usec(CLOCK_MONOTONIC);

        (void) usec;
        client_sweep(a);
        name_sweep(a, false);
        if (a->cmd && redis_conn_pending(a->cmd) > 0 &&
            now - redis_conn_last_activity(a->cmd) > command_timeout(a)) {
                char why[64], buf[FORMAT_DURATION_MAX];

                snprintf(why, sizeof(why), "Redis did not answer for %s",
                         format_duration(buf, sizeof(buf), command_timeout(a)));
                redis_went_down(a, -ETIMEDOUT, why);
        }

        if (a->state == REDIS_READY)
                renew_all(a, false);
        else
                check_lost_while_down(a);

        /* While Redis is away, look more often, to tell holders in time. */
        (void) sd_event_source_set_time_relative(s, a->state == REDIS_READY ? a->config->lease_ttl / 3
                                                                               : a->config->lease_ttl / 10);
        return 0;
}
