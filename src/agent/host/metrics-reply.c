/* SPDX-License-Identifier: MIT */
/* fleetsem metrics: what the engine counted and holds here, then what Redis
 * says of every name in use (the status path, names and counts only). Any
 * local user may ask; no line names a lease. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "agent.h"

static const char *redis_state_name(RedisState s) {
        return s == REDIS_READY ? "up" : s == REDIS_DOWN ? "down" : "connecting";
}

/* "a,b,c" of n values into buf; cumulative: each the sum of those before. */
static const char *u64_list(const uint64_t *v, size_t n, bool cumulative, char *buf, size_t size) {
        uint64_t sum = 0;
        size_t len = 0;

        buf[0] = '\0';
        for (size_t i = 0; i < n && len < size; i++) {
                sum = cumulative ? sum + v[i] : v[i];
                len += (size_t) snprintf(buf + len, size - len, "%s%" PRIu64, i ? "," : "", sum);
        }
        return buf;
}

static void send_histogram(Client *c, const char *verb, const EngineHistogram *h) {
        char line[PROTO_REPLY_MAX], list[(ENGINE_HISTOGRAM_BUCKETS + 1) * 21];
        uint64_t bounds[ENGINE_HISTOGRAM_BUCKETS];
        MessageBuilder b;

        for (size_t i = 0; i < ENGINE_HISTOGRAM_BUCKETS; i++)
                bounds[i] = engine_histogram_bounds[i];
        message_start(&b, line, sizeof(line), verb);
        message_add_u64(&b, "count", h->count);
        message_add_u64(&b, "sum", h->sum);
        message_add(&b, "bounds", u64_list(bounds, ENGINE_HISTOGRAM_BUCKETS, false, list, sizeof(list)));
        message_add(&b, "buckets", u64_list(h->buckets, ENGINE_HISTOGRAM_BUCKETS + 1, true, list, sizeof(list)));
        client_send(c, line, message_finish(&b));
}

static void send_counters(Client *c, const Agent *a) {
        const EngineStats *st = &a->engine.stats;
        usec_t grace = engine_grace_left(&a->engine, now_mono());
        char line[PROTO_REPLY_MAX];
        MessageBuilder b;

        message_start(&b, line, sizeof(line), "AGENT");
        message_add(&b, "redis", redis_state_name(a->state));
        message_add_u64(&b, "redis_ups", st->redis_ups);
        message_add_u64(&b, "held", a->engine.n_held);
        message_add_u64(&b, "waiting", a->engine.n_waiting);
        message_add_u64(&b, "lost", st->lost);
        message_add_u64(&b, "lateness_max", st->lateness_max);
        message_add_u64(&b, "names_refused", a->names_refused);
        message_add_u64(&b, "grace", grace / USEC_PER_MSEC);
        if (grace > 0)
                message_add(&b, "why", a->engine.grace_why);
        if (a->evict_policy[0])
                message_add(&b, "evicts", a->evict_policy);
        if (agent_refusing(a))
                message_add(&b, "refusing", agent_refusing(a));
        message_add_u64(&b, "rtt_count", st->rtt_count);
        message_add_u64(&b, "rtt_sum", st->rtt_sum);
        if (st->rtt_count > 0)
                message_add_u64(&b, "rtt_last", st->rtt_last);
        client_send(c, line, message_finish(&b));

        message_start(&b, line, sizeof(line), "RELEASES");
        for (size_t i = 0; i < N_ENGINE_RELEASE_CAUSES; i++)
                message_add_u64(&b, engine_release_cause_name[i], st->releases[i]);
        client_send(c, line, message_finish(&b));

        message_start(&b, line, sizeof(line), "DENIALS");
        for (size_t i = 0; i < N_ENGINE_DENIALS; i++)
                message_add_u64(&b, engine_denial_name[i], st->denials[i]);
        client_send(c, line, message_finish(&b));

        send_histogram(c, "WAIT", &st->wait);
        send_histogram(c, "LATENESS", &st->lateness);
}

/* How long the request waiting longest for n here has waited, in ms; 0
 * when none waits (re-adopted waiters, whose start is unknown, count from
 * their re-adoption: never). */
static uint64_t oldest_wait_ms(const Name *n, usec_t now) {
        usec_t oldest = USEC_INFINITY;

        for (const Lease *l = n->leases; l; l = l->by_name_next)
                if (lease_state_waits(l->state) && l->asked != USEC_INFINITY && l->asked < oldest)
                        oldest = l->asked;
        return oldest == USEC_INFINITY || oldest > now ? 0 : (now - oldest) / USEC_PER_MSEC;
}

/* Slots of n this host holds itself (fleetsem reboot). */
static uint64_t host_held(const Name *n) {
        uint64_t k = 0;

        for (const Lease *l = n->leases; l; l = l->by_name_next)
                k += l->host_held && lease_state_holds(l->state);
        return k;
}

static void send_names(Client *c, const Agent *a) {
        usec_t now = now_mono();
        char line[PROTO_REPLY_MAX];
        MessageBuilder b;

        for (const Name *n = a->engine.names; n; n = n->all_next) {
                message_start(&b, line, sizeof(line), "HOST");
                message_add(&b, "name", n->name);
                message_add_u64(&b, "held", n->n_held);
                message_add_u64(&b, "waiting", n->n_waiting);
                message_add_u64(&b, "oldest_wait", oldest_wait_ms(n, now));
                message_add_u64(&b, "host_held", host_held(n));
                client_send(c, line, message_finish(&b));
        }
        for (const NameStats *s = a->engine.name_stats; s; s = s->lru_next) {
                message_start(&b, line, sizeof(line), "GRANTS");
                message_add(&b, "name", s->name);
                message_add_u64(&b, "total", s->grants);
                client_send(c, line, message_finish(&b));
        }
}

void metrics_request(Agent *a, Client *c) {
        send_counters(c, a);
        send_names(c, a);
        if (a->state == REDIS_READY) {
                status_request(a, c, "", true);
                return;
        }
        /* Redis away: this host's part only. */
        client_send(c, "END now=0", 9);
        client_finish(c);
}
