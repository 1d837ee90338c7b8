/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <search.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "protocol.h"
#include "slots.h"

#define NAMES_IDLE_MAX 4096
#define NAME_IDLE_TIME (10 * USEC_PER_MINUTE)

typedef struct PendingRelease {
        LIST_FIELDS(struct PendingRelease, all);
        uid_t uid;
        char name[NAME_MAX_LEN + 1];
        char lease[LEASE_ID_LEN + 1];
} PendingRelease;

static void lease_check(Lease *l, usec_t now);
static void name_flush_grants(Name *n, usec_t now);
static int seq_cmp(const void *x, const void *y);

/* What the engine says goes through its ops: the agent writes it (within
 * the budget of the uid that caused it), a test reads it. */
_printf_(6, 7)
static void say(Slots *e, int level, uid_t uid, usec_t now, const LogFields *fields, const char *format, ...) {
        char message[1024];
        va_list ap;

        va_start(ap, format);
        (void) vsnprintf(message, sizeof(message), format, ap);
        va_end(ap);
        e->ops->log(e->ctx, level, uid, now, fields, message);
}

/* ---- Trees ------------------------------------------------------------------ */

static int lease_cmp(const void *x, const void *y) {
        return strcmp(((const Lease *) x)->id, ((const Lease *) y)->id);
}

static int name_cmp(const void *x, const void *y) {
        return strcmp(((const Name *) x)->name, ((const Name *) y)->name);
}

Lease *slots_lease_find(Slots *e, const char *id) {
        Lease key = {};
        void *p;

        if (strlen(id) != LEASE_ID_LEN)
                return NULL;
        memcpy(key.id, id, LEASE_ID_LEN);
        p = tfind(&key, &e->lease_tree, lease_cmp);
        return p ? *(Lease **) p : NULL;
}

Name *slots_name_find(Slots *e, const char *name) {
        Name key = { .name = (char *) name };
        void *p = tfind(&key, &e->name_tree, name_cmp);

        return p ? *(Name **) p : NULL;
}

usec_t slots_lost_after(const Slots *e) {
        /* Redis expires a lease TTL after its last renewal reached it; we
         * give up on it at two thirds of that since the last renewal we
         * sent, so its holder is told before anyone else can be granted it. */
        return e->lease_ttl * 2 / 3;
}

/* ---- Names -------------------------------------------------------------------- */

static Name *name_get(Slots *e, const char *name) {
        Name *n = slots_name_find(e, name);

        if (n)
                return n;
        n = calloc(1, sizeof(*n));
        if (!n)
                return NULL;
        n->slots_engine = e;
        n->positions_at = USEC_INFINITY;
        n->name = strdup(name);
        if (!n->name || !tsearch(n, &e->name_tree, name_cmp)) {
                free(n->name);
                free(n);
                return NULL;
        }
        LIST_PREPEND(all, e->names, n);
        e->n_names++;
        return n;
}

static void name_free(Name *n) {
        Slots *e = n->slots_engine;

        e->ops->name_drop(e->ctx, n);
        tdelete(n, &e->name_tree, name_cmp);
        LIST_REMOVE(all, e->names, n);
        e->n_names--;
        free(n->name);
        free(n);
}

/* A name without leases stays a while: asking for it again then costs no
 * new subscription. Names idle for long go on the next tick. */
static void name_maybe_free(Name *n, usec_t now) {
        if (n->leases)
                return;
        n->idle_since = now;
        if (n->slots_engine->n_names > NAMES_IDLE_MAX)
                name_free(n);
}

static void names_sweep(Slots *e, bool all, usec_t now) {
        Name *n, *next;

        LIST_FOREACH_SAFE(all, n, next, e->names)
                if (!n->leases && (all || now - n->idle_since > NAME_IDLE_TIME))
                        name_free(n);
}

/* ---- Counters ----------------------------------------------------------------- */

const char *const slots_release_cause_name[N_SLOTS_RELEASE_CAUSES] = {
        [SLOTS_RELEASE_ANCHOR_CLOSED] = "anchor_closed",
        [SLOTS_RELEASE_RELEASED] = "released",
        [SLOTS_RELEASE_LOST] = "lost",
};

const char *const slots_denial_name[N_SLOTS_DENIALS] = {
        [SLOTS_DENIAL_TIMEOUT] = "timeout",
        [SLOTS_DENIAL_FULL] = "full",
        [SLOTS_DENIAL_UNCONFIRMED] = "unconfirmed",
};

const usec_t slots_histogram_bounds[SLOTS_HISTOGRAM_BUCKETS] = {
        1 * USEC_PER_MSEC, 5 * USEC_PER_MSEC, 10 * USEC_PER_MSEC, 50 * USEC_PER_MSEC, 100 * USEC_PER_MSEC,
        500 * USEC_PER_MSEC, 1 * USEC_PER_SEC, 5 * USEC_PER_SEC, 10 * USEC_PER_SEC, 30 * USEC_PER_SEC,
        1 * USEC_PER_MINUTE, 5 * USEC_PER_MINUTE, 10 * USEC_PER_MINUTE, 30 * USEC_PER_MINUTE, 60 * USEC_PER_MINUTE,
};

static int name_stats_cmp(const void *x, const void *y) {
        return strcmp(((const NameStats *) x)->name, ((const NameStats *) y)->name);
}

static void name_stats_free(Slots *e, NameStats *s) {
        tdelete(s, &e->name_stats_tree, name_stats_cmp);
        LIST_REMOVE(lru, e->name_stats, s);
        e->n_name_stats--;
        free(s);
}

/* The counters of name, made most recently used; a new entry when it has
 * none (the least recently used one goes when the table is full). NULL
 * when out of memory: that event goes uncounted. */
static NameStats *name_stats_get(Slots *e, const char *name) {
        union {
                NameStats s;
                char buf[sizeof(NameStats) + NAME_MAX_LEN + 1];
        } key;
        size_t len = strlen(name);
        NameStats *s, **p;

        if (len > NAME_MAX_LEN)
                return NULL;
        memcpy(key.s.name, name, len + 1);
        p = tfind(&key.s, &e->name_stats_tree, name_stats_cmp);
        if (p) {
                s = *p;
                LIST_REMOVE(lru, e->name_stats, s);
                LIST_PREPEND(lru, e->name_stats, s);
                return s;
        }
        s = malloc(sizeof(*s) + len + 1);
        if (!s)
                return NULL;
        *s = (NameStats) {};
        memcpy(s->name, name, len + 1);
        if (e->n_name_stats >= SLOTS_NAME_STATS_MAX) {
                NameStats *last = e->name_stats;

                while (last->lru_next)
                        last = last->lru_next;
                name_stats_free(e, last);
        }
        if (!tsearch(s, &e->name_stats_tree, name_stats_cmp)) {
                free(s);
                return NULL;
        }
        LIST_PREPEND(lru, e->name_stats, s);
        e->n_name_stats++;
        return s;
}

static void histogram_add(SlotsHistogram *h, usec_t t) {
        size_t i = 0;

        while (i < SLOTS_HISTOGRAM_BUCKETS && t > slots_histogram_bounds[i])
                i++;
        h->buckets[i]++;
        h->count++;
        h->sum += t;
}

static void count_release(Lease *l, SlotsReleaseCause cause) {
        if (l->state == LEASE_HELD)
                l->slots_engine->stats.releases[cause]++;
}

/* ---- Leases ------------------------------------------------------------------- */

Lease *lease_ref(Lease *l) {
        l->n_ref++;
        return l;
}

void lease_unref(Lease *l) {
        if (!l || --l->n_ref > 0)
                return;
        free(l->desc);
        free(l->unit);
        free(l);
}

static LogFields lease_fields(const Lease *l) {
        return (LogFields) { .name = l->name->name, .lease = l->id, .token = l->token, .holder = l->holder };
}

static void lease_set_state(Lease *l, LeaseState state) {
        Slots *e = l->slots_engine;

        if (l->state == LEASE_WAITING) {
                l->name->n_waiting--;
                e->n_waiting--;
        } else if (l->state == LEASE_HELD) {
                l->name->n_held--;
                e->n_held--;
        }
        l->state = state;
        if (state == LEASE_WAITING) {
                l->name->n_waiting++;
                e->n_waiting++;
                e->ops->name_waiting(e->ctx, l->name);
        } else if (state == LEASE_HELD) {
                l->name->n_held++;
                e->n_held++;
        }
        e->ops->changed(e->ctx);
}

/* One timer per lease: a waiter's deadline or its next look at Redis. */
static void lease_arm(Lease *l) {
        usec_t when = USEC_INFINITY;

        if (l->state == LEASE_WAITING)
                when = MIN(l->deadline, l->recheck_at);
        if (when == l->timer_armed)
                return;
        l->timer_armed = when;
        l->slots_engine->ops->lease_timer(l->slots_engine->ctx, l, when);
}

static void lease_send(Lease *l, const char *line, int len) {
        if (l->client && len >= 0)
                l->slots_engine->ops->send(l->slots_engine->ctx, l->client, line, len);
}

/* Lets go of the lease's client: it is told nothing more. */
static void lease_finish_client(Lease *l) {
        void *c = l->client;

        if (!c)
                return;
        l->client = NULL;
        l->slots_engine->ops->finish(l->slots_engine->ctx, c);
}

static void lease_send_error(Lease *l, const char *code, const char *message) {
        char line[PROTO_REPLY_MAX];
        MessageBuilder b;

        message_start(&b, line, sizeof(line), "ERROR");
        message_add(&b, "code", code);
        message_add(&b, "message", message);
        lease_send(l, line, message_finish(&b));
        lease_finish_client(l);
}

/* Drops the lease from this host: no more watching, no client. */
static void lease_detach(Lease *l, usec_t now) {
        Slots *e = l->slots_engine;
        Name *n = l->name;

        if (l->state == LEASE_GONE)
                return;
        lease_set_state(l, LEASE_GONE);
        tdelete(l, &e->lease_tree, lease_cmp);
        e->n_leases--;
        LIST_REMOVE(by_name, n->leases, l);
        lease_arm(l);
        e->ops->lease_drop(e->ctx, l);
        lease_finish_client(l);
        name_maybe_free(n, now);
        l->name = NULL;
        lease_unref(l);
}

static void pending_release_add(Slots *e, const char *name, const char *lease, uid_t uid) {
        PendingRelease *p = calloc(1, sizeof(*p));

        if (!p) {
                say(e, LOG_ERR, SLOTS_NO_UID, 0, NULL,
                    "Out of memory: slot %s of %s is released only when its lease expires.", lease, name);
                return;
        }
        p->uid = uid;
        snprintf(p->name, sizeof(p->name), "%s", name);
        snprintf(p->lease, sizeof(p->lease), "%s", lease);
        LIST_PREPEND(all, e->pending_releases, p);
        e->n_pending_releases++;
}

/* Releases name/lease in Redis now, or as soon as Redis is back. */
static void release_in_redis(Slots *e, const char *name, const char *lease, uid_t uid) {
        if (!e->redis_up || e->ops->call_release(e->ctx, name, lease, uid) < 0)
                pending_release_add(e, name, lease, uid);
}

static void lease_release_at(Lease *l, const char *why, usec_t now) {
        Slots *e = l->slots_engine;
        Name *n = l->name;
        bool blocker, others;
        LogFields f;

        if (l->state == LEASE_GONE)
                return;
        /* A waiter that goes may have held back a later grant. (With no
         * other lease, the name itself may go with it.) */
        blocker = l->state == LEASE_WAITING && !l->grant_pending;
        others = n->leases != l || l->by_name_next;
        f = lease_fields(l);
        if (l->state == LEASE_HELD)
                say(e, LOG_INFO, l->uid, now, &f, "Released slot of %s (token %" PRIu64 "): %s.", n->name,
                    l->token, why);
        else
                say(e, LOG_DEBUG, SLOTS_NO_UID, now, &f, "Withdrew from the queue for %s: %s.", n->name, why);
        release_in_redis(e, n->name, l->id, l->uid);
        lease_detach(l, now);
        if (blocker && others)
                name_flush_grants(n, now);
}

void slots_release(Slots *e, Lease *l, const char *why, usec_t now) {
        (void) e;
        count_release(l, SLOTS_RELEASE_RELEASED);
        lease_release_at(l, why, now);
}

static void lease_lost(Lease *l, const char *why, usec_t now) {
        Slots *e = l->slots_engine;
        char line[PROTO_REPLY_MAX];
        MessageBuilder b;
        LogFields f = lease_fields(l);

        say(e, LOG_ERR, SLOTS_NO_UID, now, &f, "LOST slot of %s (token %" PRIu64 "): %s.", l->name->name, l->token,
            why);
        if (l->unit && l->stop_on_lost)
                e->ops->stop_unit(e->ctx, l->unit, why);
        else if (l->unit)
                say(e, LOG_WARNING, SLOTS_NO_UID, now, &f,
                    "%s goes on running without its slot of %s (on-lost=ignore).", l->unit, l->name->name);
        message_start(&b, line, sizeof(line), "LOST");
        message_add(&b, "reason", why);
        lease_send(l, line, message_finish(&b));
        e->stats.lost++;
        count_release(l, SLOTS_RELEASE_LOST);
        lease_release_at(l, "lost", now);
}

/* "user@host pid N (unit)" from a description, for logs. */
static void holder_from_description(const char *desc, char *buf, size_t size) {
        Message m;
        const char *what;

        if (message_parse(desc, strlen(desc), SLOTS_DESC_MAX, &m) < 0) {
                snprintf(buf, size, "?");
                return;
        }
        what = message_get(&m, "unit") ?: message_get(&m, "session") ?: message_get(&m, "comm") ?: "?";
        snprintf(buf, size, "%s@%s pid %s (%s)", message_get(&m, "user") ?: message_get(&m, "uid") ?: "?",
                 message_get(&m, "host") ?: "?", message_get(&m, "pid") ?: "?", what);
}

static int lease_new(Slots *e, const LeaseSpec *spec, void *io, Lease **ret) {
        Lease *l;
        Name *n;

        n = name_get(e, spec->name);
        if (!n)
                return -ENOMEM;
        l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        *l = (Lease) {
                .n_ref = 1, .slots_engine = e, .name = n, .slots = spec->slots, .limit = spec->slots,
                .uid = spec->uid, .pid = spec->pid, .io = io, .state = LEASE_GONE, .stop_on_lost = spec->stop_on_lost,
                .deadline = USEC_INFINITY, .recheck_at = USEC_INFINITY, .timer_armed = USEC_INFINITY,
                .asked = USEC_INFINITY,
        };
        snprintf(l->id, sizeof(l->id), "%s", spec->id);
        l->desc = strdup(spec->desc ?: "INFO");
        l->unit = spec->unit ? strdup(spec->unit) : NULL;
        if (!l->desc || (spec->unit && !l->unit) || !tsearch(l, &e->lease_tree, lease_cmp)) {
                free(l->desc);
                free(l->unit);
                free(l);
                return -ENOMEM;
        }
        holder_from_description(l->desc, l->holder, sizeof(l->holder));
        e->n_leases++;
        LIST_PREPEND(by_name, n->leases, l);
        *ret = l;
        return 0;
}

size_t slots_leases_of(const Slots *e, uid_t uid) {
        size_t k = 0;

        for (const Name *n = e->names; n; n = n->all_next)
                for (const Lease *l = n->leases; l; l = l->by_name_next)
                        if (l->uid == uid && l->state != LEASE_GONE)
                                k++;
        return k;
}

size_t slots_names_of(const Slots *e, uid_t uid, const char *but) {
        size_t k = 0;

        for (const Name *n = e->names; n; n = n->all_next) {
                if (streq(n->name, but))
                        continue;
                for (const Lease *l = n->leases; l; l = l->by_name_next)
                        if (l->uid == uid && l->state != LEASE_GONE) {
                                k++;
                                break;
                        }
        }
        return k;
}

Lease *slots_lease_of_unit(Slots *e, const char *name, const char *unit, uid_t uid) {
        Name *n = slots_name_find(e, name);
        Lease *l;

        if (!n)
                return NULL;
        LIST_FOREACH(by_name, l, n->leases)
                if (l->state == LEASE_HELD && l->unit && streq(l->unit, unit) && l->uid == uid)
                        return l;
        return NULL;
}

/* ---- What clients are told ---------------------------------------------------- */

static void send_queued(Lease *l, usec_t now) {
        usec_t grace = slots_grace_left(l->slots_engine, now);
        char line[PROTO_REPLY_MAX];
        MessageBuilder b;

        message_start(&b, line, sizeof(line), "QUEUED");
        message_add_u64(&b, "position", l->position);
        message_add_u64(&b, "held", l->held_seen);
        message_add_u64(&b, "slots", l->slots);
        message_add_u64(&b, "limit", l->limit);
        if (grace > 0) {
                message_add_u64(&b, "grace", grace / USEC_PER_MSEC);
                message_add(&b, "why", l->slots_engine->grace_why);
        }
        lease_send(l, line, message_finish(&b));
        l->queued_sent = now;
        l->position_unsent = false;
}

/* The ttl a holder is told is what its lease has left, counted from the
 * last call that set its expiry in Redis, never 0 (no self-fencing). */
static void send_granted(Lease *l, usec_t now) {
        usec_t ttl = l->slots_engine->lease_ttl, age = now > l->renewed ? now - l->renewed : 0;
        char line[PROTO_REPLY_MAX];
        MessageBuilder b;

        message_start(&b, line, sizeof(line), "GRANTED");
        message_add_u64(&b, "token", l->token);
        message_add(&b, "lease", l->id);
        message_add_u64(&b, "since", l->since_ms);
        message_add_u64(&b, "ttl", MAX((ttl > age ? ttl - age : 0) / USEC_PER_MSEC, (usec_t) 1));
        message_add_u64(&b, "limit", l->limit);
        lease_send(l, line, message_finish(&b));
}

static void send_denied(Lease *l, const char *reason) {
        char line[PROTO_REPLY_MAX];
        MessageBuilder b;

        message_start(&b, line, sizeof(line), "DENIED");
        message_add(&b, "reason", reason);
        message_add_u64(&b, "position", l->position);
        message_add_u64(&b, "held", l->held_seen);
        message_add_u64(&b, "slots", l->slots);
        message_add_u64(&b, "limit", l->limit);
        lease_send(l, line, message_finish(&b));
}

/* ---- Grants --------------------------------------------------------------------- */

/* renewed: when the call that set the lease's expiry in Redis was made
 * (USEC_INFINITY: now). */
static void grant(Lease *l, uint64_t token, uint64_t since, uint32_t limit, usec_t renewed, bool by_wake, usec_t now) {
        Slots *e = l->slots_engine;
        NameStats *s;
        LogFields f;

        l->token = token;
        l->since_ms = since;
        if (limit > 0)
                l->limit = limit;
        l->enqueued = false;
        l->proof[0] = '\0';
        l->renewed = MIN(renewed, now);
        l->deadline = l->recheck_at = USEC_INFINITY;
        lease_set_state(l, LEASE_HELD);
        lease_arm(l);
        if (l->asked != USEC_INFINITY)
                histogram_add(&e->stats.wait, now > l->asked ? now - l->asked : 0);
        s = name_stats_get(e, l->name->name);
        if (s)
                s->grants++;
        f = lease_fields(l);
        say(e, LOG_INFO, l->uid, now, &f, "Granted slot of %s to %s (token %" PRIu64 ")%s.", l->name->name,
            l->holder, token, by_wake ? " on the release's wake message" : "");
        send_granted(l, now);
}

/* Grants come in the replies to this host's own calls in the order Redis
 * made them, but a lease that joined the line earlier may still be waiting
 * here for its answer (a release on another host granted it, and this
 * host only learns of it when it asks). Leases of one name join the line
 * here in the order they asked, so an earlier one still waiting may hold a
 * lower token not yet heard of: a later grant waits until each earlier
 * lease is granted too, or has answered a look sent after the grant was
 * heard of that it still waits (a look is sent to each that has none
 * under way). Every grant heard of waits for answers of its own: one that
 * let an earlier grant through says nothing of what Redis did since. */
static void name_flush_grants(Name *n, usec_t now) {
        for (;;) {
                Lease *p = NULL, *w;
                bool blocked = false;

                LIST_FOREACH(by_name, w, n->leases)
                        if (w->state == LEASE_WAITING && w->grant_pending && (!p || w->seq < p->seq))
                                p = w;
                if (!p)
                        return;
                LIST_FOREACH(by_name, w, n->leases) {
                        /* Still waiting in Redis' answer to a look sent
                         * after p's grant was heard of: it holds nothing
                         * back. */
                        if (w->state != LEASE_WAITING || w->grant_pending || w->seq == 0 || w->seq > p->seq ||
                            w->queued_answer > p->pending_after)
                                continue;
                        blocked = true;
                        w->holds_back = true;
                        /* Asked, unless a look sent late enough is under way. */
                        if (!w->check_inflight || w->check_id <= p->pending_after)
                                lease_check(w, now);
                }
                if (blocked)
                        return;
                p->grant_pending = false;
                grant(p, p->pending_token, p->pending_since, p->pending_limit, p->pending_renewed, p->pending_by_wake,
                      now);
        }
}

static void grant_in_order(Lease *l, uint64_t token, uint64_t since, uint32_t limit, usec_t renewed, bool by_wake,
                           usec_t now) {
        if (l->state != LEASE_WAITING)
                return;
        /* (Heard of again, a grant is as old as when first heard of.) */
        if (!l->grant_pending || l->pending_token != token)
                l->pending_after = l->slots_engine->check_counter;
        l->grant_pending = true;
        l->pending_token = token;
        l->pending_since = since;
        l->pending_limit = limit;
        l->pending_renewed = renewed;
        l->pending_heard = now;
        l->pending_by_wake = by_wake;
        name_flush_grants(l->name, now);
}

/* ---- Waiting ---------------------------------------------------------------------- */

/* Calls go out in order on one connection, so the order in which leases
 * ask for a place in line is the order of their tickets. */
static void lease_join(Lease *l) {
        Slots *e = l->slots_engine;

        l->seq = ++e->queue_seq;
        e->ops->index(e->ctx, l, true);
}

static void lease_check(Lease *l, usec_t now) {
        Slots *e = l->slots_engine;

        if (l->state != LEASE_WAITING || !e->redis_up)
                return;
        if (l->check_inflight) {
                /* Sent after it lost its place (its renewal said so): that
                 * one gives it a new one. */
                if (!l->enqueued && l->seq == 0)
                        lease_join(l);
                l->check_again = true;
                return;
        }
        /* A new place in line, a new proof (none if the kernel gives no
         * random bytes: its grants are then asked for). */
        if (!l->enqueued && e->ops->random_id(e->ctx, l->proof) < 0)
                l->proof[0] = '\0';
        if (e->ops->call_acquire(e->ctx, lease_ref(l)) < 0) {
                lease_unref(l);
                return;
        }
        l->check_inflight = true;
        l->check_sent = now;
        l->check_id = ++e->check_counter;
        if (!l->enqueued && l->seq == 0)
                lease_join(l);
        (void) now;
}

/* A release or an expiry woke the waiters of n. Only those at the head of
 * the line can be granted, so rather than asking for all of them (one
 * call each, for every release), ask for the best placed one and for any
 * not asked for yet; a grant asks for the next (slots_acquire_done()). The
 * safety re-check keeps the others' places fresh. */
static void name_recheck(Name *n, usec_t now) {
        Lease *l, *best = NULL;

        /* Oldest first (the newest heads the list): those not in line yet
         * get their tickets in the order they came. */
        for (l = n->leases; l && l->by_name_next; l = l->by_name_next)
                ;
        for (; l; l = l->by_name_prev) {
                if (l->state != LEASE_WAITING)
                        continue;
                if (!l->enqueued)
                        lease_check(l, now);
                else if (!best || l->seq < best->seq)
                        best = l;
        }
        if (best)
                lease_check(best, now);
}

static void lease_deny(Lease *l, SlotsDenial reason, const char *why, usec_t now) {
        l->slots_engine->stats.denials[reason]++;
        send_denied(l, slots_denial_name[reason]);
        lease_release_at(l, why, now);
}

void slots_lease_timer(Slots *e, Lease *l, usec_t now) {
        (void) e;
        l->timer_armed = USEC_INFINITY;
        if (l->state != LEASE_WAITING)
                return;
        if (now >= l->deadline) {
                lease_deny(l, SLOTS_DENIAL_TIMEOUT, "no slot within the wait time", now);
                return;
        }
        if (now >= l->recheck_at) {
                /* And again after a while, whatever comes of this look: one
                 * that cannot go (Redis is away), that waits behind another
                 * under way, or whose answer the connection takes with it
                 * leaves no waiter without a next look. Redis' answer sets
                 * the time it calls for. */
                l->recheck_at = now + SLOTS_RECHECK_SAFETY;
                lease_check(l, now);
        }
        lease_arm(l);
}

void slots_name_timer(Slots *e, Name *n, usec_t now) {
        Lease *l;

        (void) e;
        n->positions_at = USEC_INFINITY;
        LIST_FOREACH(by_name, l, n->leases)
                if (l->state == LEASE_WAITING && l->position_unsent)
                        send_queued(l, now);
}

/* Reports a waiter's new place in line now, or (when it heard of one less
 * than SLOTS_POSITION_EVERY ago) with the others due at the next report: a
 * busy line moves on every grant, and every waiter on every grant would be
 * a lot of writes for nobody to read. */
static void report_position(Lease *l, usec_t now) {
        Name *n = l->name;

        if (now - l->queued_sent >= SLOTS_POSITION_EVERY) {
                send_queued(l, now);
                return;
        }
        l->position_unsent = true;
        if (n->positions_at != USEC_INFINITY)
                return;
        n->positions_at = l->queued_sent + SLOTS_POSITION_EVERY;
        l->slots_engine->ops->name_timer(l->slots_engine->ctx, n, n->positions_at);
}

void slots_acquire_done(Slots *e, Lease *l, const AcquireResult *r, usec_t now) {
        uint64_t check_id = l->check_id;
        LogFields f;

        l->check_inflight = false;
        if (l->state != LEASE_WAITING || !r)
                goto finish;    /* gone, or Redis went: asked again when it is back */

        switch (r->outcome) {
        case ACQUIRE_FAILED:
                f = lease_fields(l);
                say(e, LOG_ERR, SLOTS_NO_UID, now, &f, "Redis refused to queue %s for %s: %s", l->id,
                    l->name->name, r->error);
                lease_send_error(l, ERROR_CODE_REDIS, r->error);
                lease_release_at(l, "Redis error", now);
                goto finish;
        case ACQUIRE_REFUSED:
                l->grant_pending = false;
                /* Someone else's lease id: touch nothing of it in Redis. */
                f = lease_fields(l);
                say(e, LOG_WARNING, l->uid, now, &f,
                    "Refused lease %s of %s: Redis records it for another host or user.", l->id, l->name->name);
                lease_send_error(l, ERROR_CODE_PERMISSION, "this lease belongs to another host or user");
                e->ops->index(e->ctx, l, false);
                lease_detach(l, now);
                goto finish;
        case ACQUIRE_RETRY:
                l->grant_pending = false;
                /* The grant was given back: in line again, at the end. */
                f = lease_fields(l);
                say(e, LOG_WARNING, SLOTS_NO_UID, now, &f, "Slot of %s for %s not confirmed (%s); asking again.",
                    l->name->name, l->id, r->error);
                if (l->no_wait) {
                        lease_deny(l, SLOTS_DENIAL_UNCONFIRMED, "no confirmed slot and no wait", now);
                        goto finish;
                }
                l->enqueued = false;
                l->seq = 0;
                l->recheck_at = now + USEC_PER_SEC;
                lease_arm(l);
                if (l->holds_back) {
                        /* At the end of the line now: it holds nothing back. */
                        l->holds_back = false;
                        name_flush_grants(l->name, now);
                }
                goto finish;
        case ACQUIRE_GRANTED:
                l->held_seen = r->held;
                grant_in_order(l, r->token, r->since_ms, r->limit, l->check_sent, false, now);
                /* A slot was free: the next in line may find one too. */
                if (l->name && l->name->n_waiting > 0)
                        name_recheck(l->name, now);
                goto finish;
        case ACQUIRE_QUEUED:
                /* Redis' latest word: it waits. A grant heard of before this
                 * call (from before a reset) is no grant any more; one heard
                 * of since (a wake message) came after it. */
                if (l->pending_heard <= l->check_sent)
                        l->grant_pending = false;
                break;
        }

        l->enqueued = true;
        l->renewed = MIN(l->check_sent, now);
        l->held_seen = r->held;
        l->queued_answer = MAX(l->queued_answer, check_id);
        if (l->holds_back) {
                /* Still in line: the grants it held back may go. */
                l->holds_back = false;
                name_flush_grants(l->name, now);
                if (l->state != LEASE_WAITING)
                        goto finish;
        }
        if (r->position != l->position || (r->limit != l->limit && r->limit > 0)) {
                l->position = r->position;
                if (r->limit > 0)
                        l->limit = r->limit;
                send_queued(l, now);
        }
        if (l->no_wait) {
                lease_deny(l, SLOTS_DENIAL_FULL, "no slot free and no wait", now);
                goto finish;
        }
        /* Woken by pub/sub on release; besides, look again when the first
         * holder's lease runs out (its host may be dead), and now and then. */
        l->recheck_at = now + (r->next_expiry_ms >= 0 && (usec_t) r->next_expiry_ms * USEC_PER_MSEC < SLOTS_RECHECK_SAFETY
                               ? (usec_t) r->next_expiry_ms * USEC_PER_MSEC + 5 * USEC_PER_MSEC
                               : SLOTS_RECHECK_SAFETY);
        /* Nobody is granted anything during a grace: look again as it ends. */
        if (now < e->grace_until && e->grace_until + 5 * USEC_PER_MSEC < l->recheck_at)
                l->recheck_at = e->grace_until + 5 * USEC_PER_MSEC;
        lease_arm(l);
        if (l->check_again) {
                l->check_again = false;
                lease_check(l, now);
        }
finish:
        lease_unref(l);
}

/* ---- Requests ------------------------------------------------------------------- */

int slots_acquire(Slots *e, const LeaseSpec *spec, usec_t wait, void *client, void *io, usec_t now, Lease **ret) {
        Lease *l;
        int r;

        r = lease_new(e, spec, io, &l);
        if (r < 0)
                return r;
        l->client = client;
        l->no_wait = wait == 0;
        l->queued_sent = now;
        l->asked = now;
        /* Its name's counters exist from the first request: a counter that
         * starts at 0 counts its first event in Prometheus' increase(). */
        (void) name_stats_get(e, spec->name);
        if (wait != 0 && wait != USEC_INFINITY)
                l->deadline = now + wait;
        lease_set_state(l, LEASE_WAITING);
        lease_check(l, now);
        lease_arm(l);
        if (ret)
                *ret = l;
        return 0;
}

void slots_attach(Slots *e, Lease *l, void *client, usec_t now) {
        (void) e;
        lease_finish_client(l);
        l->client = client;
        if (l->state == LEASE_HELD)
                send_granted(l, now);
        else
                lease_check(l, now);
}

int slots_adopt(Slots *e, const LeaseSpec *spec, uint64_t token, uint64_t since_ms, void *io, usec_t now, Lease **ret) {
        Lease *l;
        LogFields f;
        int r;

        r = lease_new(e, spec, io, &l);
        if (r < 0)
                return r;
        l->token = token;
        l->since_ms = since_ms;
        l->renewed = now;
        lease_set_state(l, LEASE_HELD);
        (void) name_stats_get(e, spec->name);
        f = lease_fields(l);
        say(e, LOG_DEBUG, SLOTS_NO_UID, now, &f, "Re-adopted slot of %s (token %" PRIu64 ").", spec->name, token);
        if (ret)
                *ret = l;
        return 0;
}

void slots_anchor_closed(Slots *e, Lease *l, usec_t now) {
        (void) e;
        count_release(l, SLOTS_RELEASE_ANCHOR_CLOSED);
        lease_release_at(l, "anchor closed", now);
}

void slots_client_gone(Slots *e, Lease *l, usec_t now) {
        (void) e;
        l->client = NULL;
        if (l->state == LEASE_WAITING)
                lease_release_at(l, "the client went away while waiting", now);
}

/* ---- Releases --------------------------------------------------------------------- */

void slots_release_done(Slots *e, const char *name, const char *lease, uid_t uid, bool reply_lost,
                        const Granted *g, size_t k, usec_t now) {
        Name *n;

        if (reply_lost) {
                /* The connection went before the answer: again when it is back. */
                pending_release_add(e, name, lease, uid);
                return;
        }
        /* Whom the release handed slots to, as Redis itself says. Those
         * waiting here get them now; the wake message tells the others. */
        n = slots_name_find(e, name);
        for (size_t i = 0; n && i < k; i++) {
                Lease *l = slots_lease_find(e, g[i].lease);

                if (l && l->name == n && l->state == LEASE_WAITING)
                        /* On the expiry its last renewal as a waiter gave it. */
                        grant_in_order(l, g[i].token, g[i].since_ms, 0, l->renewed, false, now);
        }
}

/* The next word of *s (at most size-1 bytes, no empty one) into buf; *s
 * moves past it and its one following space, if more follows. */
static int next_word(const char **s, char *buf, size_t size) {
        size_t len = strcspn(*s, " ");

        if (len == 0 || len >= size)
                return -EBADMSG;
        memcpy(buf, *s, len);
        buf[len] = '\0';
        *s += len;
        if (**s == ' ') {
                if ((*s)[1] == '\0')
                        return -EBADMSG;
                (*s)++;
        }
        return 0;
}

int granted_parse(const char *s, Granted *g, size_t max, size_t *ret_k) {
        size_t k = 0;

        while (*s) {
                char token[21], since[21];

                if (k >= max)
                        return -E2BIG;
                if (next_word(&s, g[k].lease, sizeof(g[k].lease)) < 0 || !lease_id_is_valid(g[k].lease) ||
                    next_word(&s, token, sizeof(token)) < 0 || parse_uint64(token, 1, UINT64_MAX, &g[k].token) < 0 ||
                    next_word(&s, since, sizeof(since)) < 0 || parse_uint64(since, 0, UINT64_MAX, &g[k].since_ms) < 0 ||
                    next_word(&s, g[k].proof, sizeof(g[k].proof)) < 0)
                        return -EBADMSG;
                /* "-": none. */
                if (streq(g[k].proof, "-"))
                        g[k].proof[0] = '\0';
                else if (!lease_id_is_valid(g[k].proof))
                        return -EBADMSG;
                k++;
        }
        *ret_k = k;
        return 0;
}

void slots_wake(Slots *e, const char *name, const char *payload, usec_t now) {
        Name *n = slots_name_find(e, name);
        Granted g[SLOTS_GRANTS_MAX];
        size_t k = 0;

        if (!n)
                return;
        /* Whoever sent it, the leases it names are granted only on Redis'
         * word: the proof only Redis and this host know (and only without
         * replicas to wait for), or else the answer when they ask. */
        if (payload && strneq(payload, "g ", 2) && granted_parse(payload + 2, g, SLOTS_GRANTS_MAX, &k) >= 0) {
                for (size_t i = 0; i < k; i++) {
                        Lease *l = slots_lease_find(e, g[i].lease);

                        if (!l || l->name != n || l->state != LEASE_WAITING)
                                continue;
                        /* Redis' word: the proof given with its place in
                         * line, on the expiry of its last renewal, which
                         * leaves it most of a lease. */
                        if (e->wake_grants && l->enqueued && l->proof[0] && streq(g[i].proof, l->proof) &&
                            now < l->renewed + e->lease_ttl / 3)
                                grant_in_order(l, g[i].token, g[i].since_ms, 0, l->renewed, true, now);
                        else
                                lease_check(l, now);
                }
                /* The line moved up by as many. */
                for (Lease *l = n->leases; l; l = l->by_name_next) {
                        uint32_t p;

                        if (l->state != LEASE_WAITING || !l->enqueued || l->position == 0 || l->check_inflight)
                                continue;
                        p = l->position > k ? l->position - (uint32_t) k : 1;
                        if (p != l->position) {
                                l->position = p;
                                report_position(l, now);
                        }
                }
                /* Nothing more to look at: the release that sent it
                 * granted every slot it could, and sends a plain wake-up
                 * too when someone must look (a head it could not judge,
                 * a place in line given up). Asking on every grant of
                 * another host would cost Redis a call per host waiting
                 * on the name, per grant. */
                return;
        }
        name_recheck(n, now);
}

/* ---- Renewal and loss ----------------------------------------------------------- */

static void lease_reassert(Lease *l) {
        Slots *e = l->slots_engine;

        if (l->reassert_inflight)
                return;
        if (e->ops->call_reassert(e->ctx, lease_ref(l)) < 0) {
                lease_unref(l);
                return;
        }
        l->reassert_inflight = true;
}

void slots_reassert_done(Slots *e, Lease *l, int result, usec_t now) {
        LogFields f;

        l->reassert_inflight = false;
        if (l->state == LEASE_HELD) {
                if (result == 1) {
                        l->renewed = now;
                        e->ops->index(e->ctx, l, true);
                        f = lease_fields(l);
                        say(e, LOG_NOTICE, SLOTS_NO_UID, now, &f,
                            "Re-asserted slot of %s (token %" PRIu64 ") after Redis lost its state.", l->name->name,
                            l->token);
                } else if (result == 0)
                        lease_lost(l, "its slot was taken while Redis was away", now);
                else if (result == -1)
                        lease_lost(l, "Redis records its lease for another host or user", now);
                /* -2: Redis went again; asserted again when it is back. */
        }
        lease_unref(l);
}

static void renew_name(Slots *e, Name *n) {
        Lease *l = n->leases;

        while (l) {
                char (*ids)[LEASE_ID_LEN + 1] = malloc(SLOTS_RENEW_BATCH * sizeof(*ids));
                size_t k = 0;

                if (!ids)
                        return;
                for (; l && k < SLOTS_RENEW_BATCH; l = l->by_name_next) {
                        /* A waiter not in line yet has nothing to renew;
                         * one with a grant on hold has (it holds in Redis). */
                        if ((l->state == LEASE_WAITING && !l->enqueued && !l->grant_pending) || l->reassert_inflight)
                                continue;
                        memcpy(ids[k++], l->id, sizeof(l->id));
                }
                if (k > 0)
                        (void) e->ops->call_renew(e->ctx, n, (const char (*)[LEASE_ID_LEN + 1]) ids, k);
                free(ids);
        }
}

/* A waiter whose place in Redis expired: in line again, at the end; a
 * grant heard of before is no grant any more. */
static void requeue(Lease *l, usec_t now) {
        l->enqueued = false;
        l->seq = 0;
        l->grant_pending = false;
        lease_check(l, now);
}

void slots_renew_done(Slots *e, const char *name, const char (*ids)[LEASE_ID_LEN + 1], const bool *missing,
                      size_t n, usec_t sent, usec_t now) {
        Lease *gone[SLOTS_RENEW_BATCH];
        size_t k_gone = 0;
        char line[64];
        int len;

        (void) name;
        if (now >= sent) {
                e->stats.rtt_last = now - sent;
                e->stats.rtt_sum += now - sent;
                e->stats.rtt_count++;
        }
        /* Counted from when the renewal was sent, not from when its answer
         * came: a late answer (the agent was stopped in between) leaves the
         * holder only the time its lease really has left. */
        len = now - sent < e->lease_ttl
                ? snprintf(line, sizeof(line), "RENEWED ttl=%" PRIu64, (e->lease_ttl - (now - sent)) / USEC_PER_MSEC)
                : -1;
        for (size_t i = 0; i < n; i++) {
                Lease *l = slots_lease_find(e, ids[i]);

                if (!l || l->state == LEASE_GONE)
                        continue;
                if (!missing[i]) {
                        if (sent > l->renewed) {
                                usec_t due = l->renewed + e->lease_ttl / 3, late = now > due ? now - due : 0;

                                histogram_add(&e->stats.lateness, late);
                                e->stats.lateness_max = MAX(e->stats.lateness_max, late);
                                l->renewed = sent;
                                if (l->state == LEASE_HELD && len > 0)
                                        lease_send(l, line, len);
                        }
                        continue;
                }
                if (l->state == LEASE_WAITING && k_gone < ELEMENTSOF(gone))
                        gone[k_gone++] = lease_ref(l);
                else if (l->state == LEASE_WAITING)
                        requeue(l, now);
                else
                        lease_lost(l, "its lease expired or was evicted in Redis", now);
        }
        /* Waiters whose places expired (this host was away longer than a
         * lease) join the line again in the order they came: a batch lists
         * the newest first. */
        qsort(gone, k_gone, sizeof(Lease *), seq_cmp);
        for (size_t i = 0; i < k_gone; i++) {
                if (gone[i]->state == LEASE_WAITING)
                        requeue(gone[i], now);
                lease_unref(gone[i]);
        }
}

/* Holders whose last confirmed renewal is older than slots_lost_after():
 * Redis may let their lease run out before this agent can renew it. */
static void check_lost(Slots *e, usec_t now) {
        Name *n, *nn;

        LIST_FOREACH_SAFE(all, n, nn, e->names) {
                Lease *l, *next;

                /* lease_lost() may free n once its last lease goes. */
                LIST_FOREACH_SAFE(by_name, l, next, n->leases)
                        if (l->state == LEASE_HELD && now - l->renewed > slots_lost_after(e))
                                lease_lost(l, e->redis_up ? "its lease was not renewed in time; it may have run out"
                                                          : "Redis unreachable for too long; the lease runs out before it can be renewed",
                                           now);
        }
}

usec_t slots_tick(Slots *e, usec_t now) {
        names_sweep(e, false, now);
        /* First who is too late: a paused agent wakes up here. Looked at
         * every sixth of a lease, so a holder hears it at most that late:
         * well before Redis could let the lease go. */
        check_lost(e, now);
        /* Renewals every third of a lease (every other tick). */
        if (e->redis_up && now - e->renew_sent + e->lease_ttl / 12 >= e->lease_ttl / 3) {
                e->renew_sent = now;
                for (Name *n = e->names; n; n = n->all_next)
                        renew_name(e, n);
        }
        /* While Redis is away, look more often, to tell holders in time. */
        return e->redis_up ? e->lease_ttl / 6 : e->lease_ttl / 10;
}

/* ---- Redis up and down -------------------------------------------------------------- */

static int seq_cmp(const void *x, const void *y) {
        const Lease *a = *(Lease *const *) x, *b = *(Lease *const *) y;

        return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* After a reset: this host's waiters of n join the new line in the order
 * they first came (they get new tickets as they ask). */
static void name_requeue(Name *n, usec_t now) {
        _cleanup_free_ Lease **w = NULL;
        size_t k = 0;

        w = calloc(n->n_waiting ?: 1, sizeof(Lease *));
        if (!w) {
                name_recheck(n, now);
                return;
        }
        for (Lease *l = n->leases; l && k < n->n_waiting; l = l->by_name_next)
                if (l->state == LEASE_WAITING && !l->enqueued)
                        w[k++] = lease_ref(l);
        qsort(w, k, sizeof(Lease *), seq_cmp);
        for (size_t i = 0; i < k; i++) {
                if (w[i]->state == LEASE_WAITING) {
                        w[i]->seq = 0;
                        lease_check(w[i], now);
                }
                lease_unref(w[i]);
        }
}

usec_t slots_grace_left(const Slots *e, usec_t now) {
        return e->grace_until > now ? e->grace_until - now : 0;
}

void slots_redis_up(Slots *e, bool reset, usec_t grace, const char *why, usec_t now) {
        PendingRelease *p;
        Name *n, *nn;

        e->redis_up = true;
        e->stats.redis_ups++;
        if (grace > 0) {
                /* (What Redis says is data: a day at most is told.) */
                e->grace_until = MAX(e->grace_until, now + MIN(grace, SLOTS_GRACE_TOLD_MAX));
                e->grace_why = why ?: e->grace_why ?: GRACE_WHY_NEW;
        }
        while ((p = e->pending_releases)) {
                LIST_REMOVE(all, e->pending_releases, p);
                e->n_pending_releases--;
                if (e->ops->call_release(e->ctx, p->name, p->lease, p->uid) < 0) {
                        LIST_PREPEND(all, e->pending_releases, p);
                        e->n_pending_releases++;
                        break;
                }
                free(p);
        }

        check_lost(e, now);
        LIST_FOREACH_SAFE(all, n, nn, e->names) {
                Lease *l, *next;

                LIST_FOREACH_SAFE(by_name, l, next, n->leases) {
                        if (!reset)
                                continue;
                        if (l->state == LEASE_HELD)
                                lease_reassert(l);
                        else if (l->state == LEASE_WAITING) {
                                /* Its place in line went with the rest, and
                                 * any grant heard of: queue again (in the
                                 * order they first came, below), and look
                                 * again once the grace is over. */
                                l->enqueued = false;
                                l->grant_pending = false;
                                l->holds_back = false;
                        }
                }
        }
        LIST_FOREACH_SAFE(all, n, nn, e->names) {
                if (!reset)
                        for (Lease *l = n->leases; l; l = l->by_name_next)
                                if (l->state == LEASE_HELD && !l->reassert_inflight)
                                        e->ops->index(e->ctx, l, true);
                if (reset)
                        name_requeue(n, now);
                else
                        name_recheck(n, now);
        }
        if (!reset)
                for (n = e->names; n; n = n->all_next)
                        renew_name(e, n);
        e->ops->changed(e->ctx);
}

void slots_redis_down(Slots *e, const char *why, usec_t now) {
        Name *n, *nn;

        e->redis_up = false;
        LIST_FOREACH_SAFE(all, n, nn, e->names) {
                Lease *l, *next;

                LIST_FOREACH_SAFE(by_name, l, next, n->leases) {
                        l->check_inflight = false;
                        l->reassert_inflight = false;
                        if (l->state == LEASE_WAITING && !l->enqueued) {
                                char msg[512];

                                snprintf(msg, sizeof(msg), "Redis is unreachable: %s", why);
                                lease_send_error(l, ERROR_CODE_UNAVAILABLE, msg);
                                lease_release_at(l, "Redis unreachable", now);
                        }
                }
        }
        e->ops->changed(e->ctx);
}

/* ---- Start and stop ---------------------------------------------------------------- */

void slots_init(Slots *e, const SlotsOps *ops, void *ctx, usec_t lease_ttl) {
        *e = (Slots) { .ops = ops, .ctx = ctx, .lease_ttl = lease_ttl };
}

void slots_done(Slots *e) {
        PendingRelease *p;
        Name *n, *nn;

        LIST_FOREACH_SAFE(all, n, nn, e->names) {
                Lease *l, *next;

                /* Its client just goes: no ERROR, no release. */
                LIST_FOREACH_SAFE(by_name, l, next, n->leases)
                        lease_detach(l, 0);
        }
        names_sweep(e, true, 0);
        while ((p = e->pending_releases)) {
                LIST_REMOVE(all, e->pending_releases, p);
                free(p);
        }
        e->n_pending_releases = 0;
        while (e->name_stats)
                name_stats_free(e, e->name_stats);
}
