/* SPDX-License-Identifier: MIT */
/* A grant told to its holder only once the replicas have it
 * (min_replicas_acked): ROLE, then WAIT, on the connection that granted
 * it; a grant they do not confirm is given back. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "redis-layer.h"

#define NO_WAIT_WAIT_TIMEOUT (500 * USEC_PER_MSEC)      /* WAIT for a request that would not wait */

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
        GiveBack give_back;
} GrantWait;

/* Well under the time after which a silent Redis counts as hung (WAIT
 * blocks the connection it is sent on). */
static usec_t wait_timeout(const Agent *a) {
        return MIN(redis_command_timeout(a->redis_io) / 2, USEC_PER_SEC);
}

/* The engine hears how the grant gw waited for ended: r (NULL: Redis went
 * before it said; asked again on the next master). */
static void grant_wait_done(GrantWait *gw, const AcquireResult *r) {
        engine_acquire_done(&gw->agent->engine, gw->lease, r, now_mono());
        free(gw);
}

/* The grant was not confirmed: given back, and the request waits again
 * (or is denied, if it would not wait). */
static void wait_give_back(GrantWait *gw, const char *why) {
        Lease *l = gw->lease;

        if (l->state != LEASE_GONE)     /* (released meanwhile: given back already) */
                gw->give_back(gw->agent, l);
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
        wait_give_back(gw, why);
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
                wait_give_back(gw, "the server that granted it is no master any more (ROLE)");
                return;
        }
        gw->need = MIN(a->config->min_replicas_acked, MAX(before, sh->n_replicas));
        if (gw->need <= 0) {
                grant_wait_done(gw, &gw->result);
                return;
        }
        if (wait_send(gw, conn) < 0)
                wait_give_back(gw, "cannot ask the replicas");
}

int grant_wait_for_replicas(Agent *a, RedisConn *conn, Lease *l, const AcquireResult *r, GiveBack give_back) {
        _cleanup_free_ GrantWait *gw = NULL;
        int k;

        gw = malloc(sizeof(*gw));
        if (!gw)
                return -ENOMEM;
        *gw = (GrantWait) { .agent = a, .lease = l, .need = a->config->min_replicas_acked, .result = *r,
                            .give_back = give_back };
        if (a->redis_io->topo->failover)
                k = redis_conn_command(conn, grant_role_reply, gw, 1, (const char *[]) { "ROLE" }, NULL);
        else
                k = wait_send(gw, conn);
        if (k < 0)
                return -ENOTCONN;
        TAKE_PTR(gw);           /* the reply's now */
        return 0;
}
