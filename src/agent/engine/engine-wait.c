/* SPDX-License-Identifier: MIT */
/* Waiting for a slot: asking Redis, the line's re-checks and deadlines,
 * the requests that start it (acquire, attach, adopt), and what a client
 * is told of its place or its refusal. */
#include <errno.h>
#include <inttypes.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"
#include "engine-internal.h"

/* ---- Waiting ---------------------------------------------------------------------- */

/* A release or an expiry woke the waiters of n. Only those at the head of
 * the line can be granted, so rather than asking for all of them (one
 * call each, for every release), ask for the best placed one and for any
 * not asked for yet; a grant asks for the next (engine_acquire_done()). The
 * safety re-check keeps the others' places fresh. */
void name_recheck(Name *n, usec_t now) {
        Lease *l, *best = NULL;

        /* Oldest first (the newest heads the list): those not in line yet
         * get their tickets in the order they came. */
        for (l = n->leases; l && l->by_name_next; l = l->by_name_next)
                ;
        for (; l; l = l->by_name_prev) {
                if (!lease_state_waits(l->state))
                        continue;
                if (!l->enqueued)
                        lease_check(l, now);
                else if (!best || l->seq < best->seq)
                        best = l;
        }
        if (best)
                lease_check(best, now);
}

static void lease_deny(Lease *l, EngineDenial reason, const char *why, usec_t now) {
        l->engine->stats.denials[reason]++;
        send_denied(l, engine_denial_name[reason], now);
        lease_release_at(l, why, now);
}

void engine_lease_timer(Engine *e, Lease *l, usec_t now) {
        (void) e;
        l->timer_armed = USEC_INFINITY;
        if (!lease_state_waits(l->state))
                return;
        if (now >= l->deadline) {
                lease_deny(l, ENGINE_DENIAL_TIMEOUT, "no slot within the wait time", now);
                return;
        }
        if (now >= l->recheck_at) {
                /* And again after a while, whatever comes of this look: one
                 * that cannot go (Redis is away), that waits behind another
                 * under way, or whose answer the connection takes with it
                 * leaves no waiter without a next look. Redis' answer sets
                 * the time it calls for. */
                l->recheck_at = now + ENGINE_RECHECK_SAFETY;
                lease_check(l, now);
        }
        lease_arm(l);
}

void engine_name_timer(Engine *e, Name *n, usec_t now) {
        Lease *l;

        (void) e;
        n->positions_at = USEC_INFINITY;
        LIST_FOREACH(by_name, l, n->leases)
                if (lease_state_waits(l->state) && l->position_unsent)
                        send_queued(l, now);
}

/* Reports a waiter's new place in line now, or (when it heard of one less
 * than ENGINE_POSITION_EVERY ago) with the others due at the next report: a
 * busy line moves on every grant, and every waiter on every grant would be
 * a lot of writes for nobody to read. */
void report_position(Lease *l, usec_t now) {
        Name *n = l->name;

        if (now - l->queued_sent >= ENGINE_POSITION_EVERY) {
                send_queued(l, now);
                return;
        }
        l->position_unsent = true;
        if (n->positions_at != USEC_INFINITY)
                return;
        n->positions_at = l->queued_sent + ENGINE_POSITION_EVERY;
        l->engine->ops->name_timer(l->engine->ctx, n, n->positions_at);
}

/* What Redis said of n's drain (record, or NULL): kept for people; true
 * when it changed. */
static bool name_drained(Name *n, const char *record) {
        char text[512];
        char *d = NULL;

        if (record && engine_drain_text(record, text, sizeof(text)) >= 0)
                d = strdup(text);
        if ((!d && !n->drained) || (d && n->drained && streq(d, n->drained))) {
                free(d);
                return false;
        }
        free(n->drained);
        n->drained = d;
        return true;
}

/* Redis would not queue it (an error, no limit, too heavy) or records it
 * for someone else: the request ends here. */
static void acquire_refused(Engine *e, Lease *l, const AcquireResult *r, usec_t now) {
        LogFields f = lease_fields(l);
        char msg[160];

        switch (r->outcome) {
        case ACQUIRE_FAILED:
                engine_say(e, LOG_ERR, ENGINE_NO_UID, now, &f, "Redis refused to queue %s for %s: %s", l->id,
                    l->name->name, r->error);
                if (strneq(r->error, "OOM", 3)) {
                        /* Full (of anyone's keys): no new slot is counted, the
                         * holders' renewals and releases still run (keep.lua).
                         * Still the class of an unreachable Redis. */
                        char text[PROTO_REPLY_MAX / 2];

                        snprintf(text, sizeof(text), "Redis is full (its used memory is past its maxmemory): no new slot "
                                 "can be counted until memory is freed there, while slots held are kept (%s)", r->error);
                        lease_send_error(l, error_code_of_redis_error(r->error), text);
                } else
                        lease_send_error(l, error_code_of_redis_error(r->error), r->error);
                lease_release_at(l, "Redis error", now);
                return;
        case ACQUIRE_NO_LIMIT:
                engine_say(e, LOG_NOTICE, l->uid, now, &f, "Refused %s for %s: it asks for no number of slots and %s "
                    "has no fleet limit.", l->id, l->name->name, l->name->name);
                lease_send_error(l, ERROR_CODE_NO_LIMIT, "no fleet limit is set for this name: ask for a number "
                    "of slots, or set one (fleetsem fleet-limit NAME N)");
                lease_release_at(l, "no fleet limit", now);
                return;
        case ACQUIRE_TOO_HEAVY:
                engine_say(e, LOG_NOTICE, l->uid, now, &f, "Refused %s for %s: its weight %" PRIu32 " is above the limit "
                    "of %s (%" PRIu32 ").", l->id, l->name->name, l->weight, l->name->name, r->limit);
                snprintf(msg, sizeof(msg), "weight %" PRIu32 " is above the limit in force (%" PRIu32 "): it would never fit",
                         l->weight, r->limit);
                lease_send_error(l, ERROR_CODE_TOO_HEAVY, msg);
                lease_release_at(l, "too heavy", now);
                return;
        default:        /* ACQUIRE_REFUSED: someone else's lease id */
                /* Someone else's lease id: touch nothing of it in Redis. */
                engine_say(e, LOG_WARNING, l->uid, now, &f,
                    "Refused lease %s of %s: Redis records it for another host or user.", l->id, l->name->name);
                lease_send_error(l, ERROR_CODE_PERMISSION, "this lease belongs to another host or user");
                e->ops->index(e->ctx, l, false);
                lease_detach(l, LEASE_EVENT_REFUSED, now);
                return;
        }
}

/* Granted, but no replica confirmed it: the grant was given back, and it
 * is in line again, at the end (or denied, if it would not wait). */
static void acquire_unconfirmed(Engine *e, Lease *l, const AcquireResult *r, usec_t now) {
        LogFields f;

        if (l->state == LEASE_GRANTED)
                lease_set_state(l, LEASE_WAITING, LEASE_EVENT_UNCONFIRMED, now);
        f = lease_fields(l);
        engine_say(e, LOG_WARNING, ENGINE_NO_UID, now, &f, "Slot of %s for %s not confirmed (%s); asking again.",
            l->name->name, l->id, r->error);
        if (l->no_wait) {
                lease_deny(l, ENGINE_DENIAL_UNCONFIRMED, "no confirmed slot and no wait", now);
                return;
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
}

/* Redis' latest word: it waits, in line. check_id: the look it answers. */
static void acquire_queued(Engine *e, Lease *l, const AcquireResult *r, uint64_t check_id, usec_t now) {
        bool drain_changed, held_back_news;
        usec_t held_back;

        /* A grant heard of before this call (from before a reset) is no
         * grant any more; one heard of since (a wake message) came after
         * it. */
        if (l->state == LEASE_GRANTED && l->pending_heard <= l->check_sent)
                lease_set_state(l, LEASE_WAITING, LEASE_EVENT_QUEUED, now);
        drain_changed = name_drained(l->name, r->has_drain ? r->drain : NULL);
        l->enqueued = true;
        l->renewed = MIN(l->check_sent, now);
        l->held_seen = r->held;
        l->queued_answer = MAX(l->queued_answer, check_id);
        if (l->holds_back) {
                /* Still in line: the grants it held back may go. */
                l->holds_back = false;
                name_flush_grants(l->name, now);
                if (!lease_state_waits(l->state))
                        return;
        }
        /* Held back by Redis past this agent's grace (a slot a host holds
         * itself after a reset, a name Redis lost): told as it starts. */
        held_back = r->held_back_ms > 0
                            ? usec_add(now, MIN(r->held_back_ms, ENGINE_GRACE_TOLD_MAX / USEC_PER_MSEC) * USEC_PER_MSEC)
                            : 0;
        held_back_news = held_back > usec_add(e->grace_until, USEC_PER_SEC) && l->held_back_until <= now;
        l->held_back_until = held_back;
        if (r->position != l->position || (r->limit != l->limit && r->limit > 0) || drain_changed || held_back_news) {
                l->position = r->position;
                if (r->limit > 0)
                        l->limit = r->limit;
                send_queued(l, now);
        }
        if (l->no_wait) {
                if (l->name->drained)
                        lease_deny(l, ENGINE_DENIAL_DRAINED, "drained, and no wait", now);
                else
                        lease_deny(l, ENGINE_DENIAL_FULL, "no slot free and no wait", now);
                return;
        }
        /* Woken by pub/sub on release; besides, look again when the first
         * holder's lease runs out (its host may be dead), and now and then. */
        l->recheck_at = now + (r->next_expiry_ms >= 0 && (usec_t) r->next_expiry_ms * USEC_PER_MSEC < ENGINE_RECHECK_SAFETY
                               ? (usec_t) r->next_expiry_ms * USEC_PER_MSEC + 5 * USEC_PER_MSEC
                               : ENGINE_RECHECK_SAFETY);
        /* Nobody is granted anything during a grace: look again as it ends. */
        if (now < e->grace_until && e->grace_until + 5 * USEC_PER_MSEC < l->recheck_at)
                l->recheck_at = e->grace_until + 5 * USEC_PER_MSEC;
        lease_arm(l);
        if (l->check_again) {
                l->check_again = false;
                lease_check(l, now);
        }
}

/* An acquire's answer, in the lease's state: only a waiter (waiting, or
 * with a grant held back) takes it. */
void engine_acquire_done(Engine *e, Lease *l, const AcquireResult *r, usec_t now) {
        uint64_t check_id = l->check_id;

        l->check_inflight = false;
        /* (Gone, or Redis went (no r): it asks again when Redis is back.) */
        if (lease_state_waits(l->state) && r)
                switch (r->outcome) {
                case ACQUIRE_QUEUED:
                        acquire_queued(e, l, r, check_id, now);
                        break;
                case ACQUIRE_GRANTED:
                        l->held_seen = r->held;
                        grant_in_order(l, r->token, r->since_ms, r->limit, l->check_sent, false, now);
                        /* A slot was free: the next in line may find one too. */
                        if (l->name && l->name->n_waiting > 0)
                                name_recheck(l->name, now);
                        break;
                case ACQUIRE_RETRY:
                        acquire_unconfirmed(e, l, r, now);
                        break;
                case ACQUIRE_FAILED:
                case ACQUIRE_NO_LIMIT:
                case ACQUIRE_TOO_HEAVY:
                case ACQUIRE_REFUSED:
                        acquire_refused(e, l, r, now);
                        break;
                }
        lease_unref(l);
}

/* ---- Requests ------------------------------------------------------------------- */

int engine_acquire(Engine *e, const LeaseSpec *spec, usec_t wait, void *client, void *io, usec_t now, Lease **ret) {
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
                l->deadline = usec_add(now, wait);
        lease_set_state(l, LEASE_WAITING, LEASE_EVENT_REQUEST, now);
        lease_check(l, now);
        lease_arm(l);
        if (ret)
                *ret = l;
        return 0;
}

void engine_fail_waiters(Engine *e, const char *code, const char *why, usec_t now) {
        Name *n, *nn;

        LIST_FOREACH_SAFE(all, n, nn, e->names) {
                Lease *l, *next;

                LIST_FOREACH_SAFE(by_name, l, next, n->leases)
                        if (lease_state_waits(l->state)) {
                                lease_send_error(l, code, why);
                                lease_release_at(l, "nothing is granted now", now);
                        }
        }
        e->ops->changed(e->ctx);
}

void engine_attach(Engine *e, Lease *l, void *client, usec_t now) {
        (void) e;
        lease_finish_client(l);
        l->client = client;
        if (lease_state_holds(l->state))
                send_granted(l, now);
        else
                lease_check(l, now);
}

int engine_adopt(Engine *e, const LeaseSpec *spec, uint64_t token, uint64_t since_ms, void *io, usec_t now, Lease **ret) {
        Lease *l;
        LogFields f;
        int r;

        r = lease_new(e, spec, io, &l);
        if (r < 0)
                return r;
        l->token = token;
        l->since_ms = since_ms;
        l->renewed = now;
        lease_set_state(l, LEASE_HELD, LEASE_EVENT_ADOPT, now);
        (void) name_stats_get(e, spec->name);
        f = lease_fields(l);
        engine_say(e, LOG_DEBUG, ENGINE_NO_UID, now, &f, "Re-adopted slot of %s (token %" PRIu64 ").", spec->name, token);
        if (ret)
                *ret = l;
        return 0;
}

void engine_anchor_closed(Engine *e, Lease *l, usec_t now) {
        (void) e;
        if (lease_kept_ending(l, "anchor closed", now))
                return;
        count_release(l, ENGINE_RELEASE_ANCHOR_CLOSED);
        lease_release_at(l, "anchor closed", now);
}

void engine_client_gone(Engine *e, Lease *l, usec_t now) {
        (void) e;
        l->client = NULL;
        if (lease_state_waits(l->state))
                lease_release_at(l, "the client went away while waiting", now);
}

/* ---- What clients are told ---------------------------------------------------- */

/* grace=, why=: how long no slot is granted to l for a while, and why
 * (QUEUED and DENIED: a refusal in a grace is no slot in use). Redis holds
 * l back longer (its own lease after a reset, or a name Redis lost): the
 * longer wait is what it is told. */
static void add_grace(MessageBuilder *b, const Lease *l, usec_t now) {
        usec_t grace = engine_grace_left(l->engine, now);
        const char *why = l->engine->grace_why;

        if (l->held_back_until > usec_add(now, grace)) {
                grace = l->held_back_until - now;
                why = why ?: GRACE_WHY_RESET;
        }
        if (grace > 0 && why) {
                message_add_u64(b, "grace", grace / USEC_PER_MSEC);
                message_add(b, "why", why);
        }
}

/* A waiter's place: its position, the units held, its own, the limit,
 * the drain and the grace, as QUEUED and DENIED tell them. */
static void add_place(MessageBuilder *b, const Lease *l, usec_t now) {
        message_add_u64(b, "position", l->position);
        message_add_u64(b, "held", l->held_seen);
        message_add_u64(b, "slots", l->slots);
        message_add_u64(b, "limit", l->limit);
        if (l->name && l->name->drained)
                message_add(b, "drained", l->name->drained);
        add_grace(b, l, now);
}

void send_queued(Lease *l, usec_t now) {
        char line[PROTO_REPLY_MAX];
        MessageBuilder b;

        message_start(&b, line, sizeof(line), "QUEUED");
        add_place(&b, l, now);
        lease_send(l, line, message_finish(&b));
        l->queued_sent = now;
        l->position_unsent = false;
}

void send_denied(Lease *l, const char *reason, usec_t now) {
        char line[PROTO_REPLY_MAX];
        MessageBuilder b;

        message_start(&b, line, sizeof(line), "DENIED");
        message_add(&b, "reason", reason);
        add_place(&b, l, now);
        lease_send(l, line, message_finish(&b));
}
