/* SPDX-License-Identifier: MIT */
/* What Redis tells the engine besides an acquire's answer: releases done,
 * wake-ups, renewals and re-assertions, Redis up and down. */
#include <errno.h>
#include <inttypes.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"
#include "engine-internal.h"

/* ---- Releases --------------------------------------------------------------------- */

void engine_release_done(Engine *e, const char *name, const char *lease, uid_t uid, bool reply_lost,
                        const Granted *g, size_t k, usec_t now) {
        Name *n;

        if (reply_lost) {
                /* The connection went before the answer: again when it is back. */
                pending_release_add(e, name, lease, uid);
                return;
        }
        /* Whom the release handed slots to, as Redis itself says. Those
         * waiting here get them now; the wake message tells the others. */
        n = engine_name_find(e, name);
        for (size_t i = 0; n && i < k; i++) {
                Lease *l = engine_lease_find(e, g[i].lease);

                if (l && l->name == n && lease_state_waits(l->state))
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

static void renew_name(Engine *e, Name *n);

/* "r LEASE [LEASE…]": holders of n revoked. Only a hint (anyone who may
 * PUBLISH can send it): this host's holders named are renewed now, and
 * Redis' answer, not the message, makes them lost. */
static void revoked_heard(Engine *e, Name *n, const char *s) {
        bool ours = false;

        while (*s) {
                char id[LEASE_ID_LEN + 1];
                Lease *l;

                if (next_word(&s, id, sizeof(id)) < 0 || !lease_id_is_valid(id))
                        break;
                l = engine_lease_find(e, id);
                if (!l || l->name != n || l->state != LEASE_HELD)
                        continue;
                ours = true;
        }
        if (ours && e->redis_up)
                renew_name(e, n);
}

/* "x LEASE HOST host": a slot host HOST held itself ran out in Redis (its
 * host did not come back within its lease): said in the journal, with
 * what the message names checked (anyone who may PUBLISH can send it). */
static void host_slot_ran_out(Engine *e, Name *n, const char *s, usec_t now) {
        char id[LEASE_ID_LEN + 1], host[IDENT_MAX_LEN + 1], kind[8];
        LogFields f = { .name = n->name };

        if (next_word(&s, id, sizeof(id)) < 0 || !lease_id_is_valid(id) || next_word(&s, host, sizeof(host)) < 0 ||
            !ident_is_valid(host) || next_word(&s, kind, sizeof(kind)) < 0 || !streq(kind, "host") || *s)
                return;
        f.lease = id;
        engine_say(e, LOG_WARNING, ENGINE_NO_UID, now, &f,
                  "Slot of %s held by host %s (lease %s) ran out: its host did not renew it within its lease "
                  "(host_lease); it is free.", n->name, host, id);
}

void engine_wake(Engine *e, const char *name, const char *payload, usec_t now) {
        Name *n = engine_name_find(e, name);
        Granted g[ENGINE_GRANTS_MAX];
        size_t k = 0;

        if (!n)
                return;
        /* Something changed (another host's hand-over, say): for whoever
         * watches (fleetsem status --watch). */
        e->ops->changed(e->ctx);
        /* Whoever sent it, the leases it names are granted only on Redis'
         * word: the proof only Redis and this host know (and only without
         * replicas to wait for), or else the answer when they ask. */
        if (payload && strneq(payload, "g ", 2) && granted_parse(payload + 2, g, ENGINE_GRANTS_MAX, &k) >= 0) {
                for (size_t i = 0; i < k; i++) {
                        Lease *l = engine_lease_find(e, g[i].lease);

                        if (!l || l->name != n || !lease_state_waits(l->state))
                                continue;
                        /* Redis' word: the proof given with its place in
                         * line, on the expiry of its last renewal, which
                         * leaves it most of a lease. */
                        if (e->wake_grants && l->enqueued && l->proof[0] && streq(g[i].proof, l->proof) &&
                            now < l->renewed + lease_ttl(l) / 3)
                                grant_in_order(l, g[i].token, g[i].since_ms, 0, l->renewed, true, now);
                        else
                                lease_check(l, now);
                }
                /* The line moved up by as many. */
                for (Lease *l = n->leases; l; l = l->by_name_next) {
                        uint32_t p;

                        if (!lease_state_waits(l->state) || !l->enqueued || l->position == 0 || l->check_inflight)
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
        if (payload && strneq(payload, "r ", 2)) {
                revoked_heard(e, n, payload + 2);
                return;
        }
        if (payload && strneq(payload, "x ", 2))
                host_slot_ran_out(e, n, payload + 2, now);
        name_recheck(n, now);
}

/* ---- Renewal and loss ----------------------------------------------------------- */

static void lease_reassert(Lease *l, usec_t now) {
        Engine *e = l->engine;

        /* (Nor one revoked, told LOST: Redis lost its record.) */
        if (l->reassert_inflight || l->state == LEASE_LOST || l->state == LEASE_ENDING)
                return;
        if (e->ops->call_reassert(e->ctx, lease_ref(l)) < 0) {
                lease_unref(l);
                return;
        }
        l->reassert_inflight = true;
        l->reassert_sent = now;
}

void engine_reassert_done(Engine *e, Lease *l, int result, usec_t now) {
        LogFields f;

        l->reassert_inflight = false;
        if (lease_state_holds(l->state)) {
                if (result == 1) {
                        /* As a renewal: counted from when it was sent, and
                         * told to the holder at once, whose last word from
                         * here is a round older than the one that found
                         * the slot missing. */
                        usec_t sent = MIN(l->reassert_sent, now);

                        l->renewed = MAX(l->renewed, sent);
                        if (now - sent < lease_ttl(l)) {
                                char line[64];
                                int len = snprintf(line, sizeof(line), "RENEWED ttl=%" PRIu64,
                                                   (lease_ttl(l) - (now - sent)) / USEC_PER_MSEC);

                                lease_send(l, line, len);
                        }
                        e->ops->index(e->ctx, l, true);
                        f = lease_fields(l);
                        engine_say(e, LOG_NOTICE, ENGINE_NO_UID, now, &f,
                            "Re-asserted slot of %s (token %" PRIu64 ") after Redis lost its state.", l->name->name,
                            l->token);
                } else if (result == 0)
                        lease_lost(l, "its slot was taken while Redis was away", false, now);
                else if (result == -1)
                        lease_lost(l, "Redis records its lease for another host or user", false, now);
                /* -2: Redis went again; asserted again when it is back. */
        }
        lease_unref(l);
}

void engine_put_back(Engine *e, Lease *l, usec_t now) {
        LogFields f = lease_fields(l);

        engine_say(e, LOG_WARNING, ENGINE_NO_UID, now, &f,
                  "Redis forgot the slot of %s (token %" PRIu64 ") while it stayed up (FLUSHALL, DEL or eviction); "
                  "putting it back.", l->name->name, l->token);
        lease_reassert(l, now);
}

/* The leases of n that the host holds itself (host_held) go in calls of
 * their own: their lease in Redis is another. */
static void renew_name_kind(Engine *e, Name *n, bool host_held) {
        Lease *l = n->leases;

        while (l) {
                _cleanup_free_ char (*ids)[LEASE_ID_LEN + 1] = malloc(ENGINE_RENEW_BATCH * sizeof(*ids));
                uid_t uid = ENGINE_NO_UID;
                size_t k = 0;

                if (!ids)
                        return;
                for (; l && k < ENGINE_RENEW_BATCH; l = l->by_name_next) {
                        /* A waiter not in line yet has nothing to renew;
                         * one with a grant on hold has (it holds in Redis). */
                        if ((l->state == LEASE_WAITING && !l->enqueued) || l->reassert_inflight ||
                            l->host_held != host_held)
                                continue;
                        memcpy(ids[k++], l->id, sizeof(l->id));
                        uid = MIN(uid, l->uid);
                }
                /* Not sent (Redis went, no memory: said where it
                 * failed): the rest of the name waits with it for the
                 * next tick, and its holders are told in time if that
                 * goes on. */
                if (k > 0 && e->ops->call_renew(e->ctx, n, (const char (*)[LEASE_ID_LEN + 1]) ids, k, uid, host_held) < 0)
                        return;
        }
}

static void renew_name(Engine *e, Name *n) {
        renew_name_kind(e, n, false);
        renew_name_kind(e, n, true);
}

/* A waiter whose place in Redis expired: in line again, at the end; a
 * grant heard of before is no grant any more. */
static void requeue(Lease *l, usec_t now) {
        l->enqueued = false;
        l->seq = 0;
        if (l->state == LEASE_GRANTED)
                lease_set_state(l, LEASE_WAITING, LEASE_EVENT_PLACE_EXPIRED, now);
        lease_check(l, now);
}

/* Whether Redis forgot l's name after l's last confirmed renewal went
 * out: it found the name forgotten a lease (l's, the call's) before the
 * end of what is left (forgot_left, as of sent, at the latest). A holder
 * renewed since, then missing, was released or revoked (revoke --now
 * frees it as a release does), or ran out: not Redis' loss to undo,
 * though the name may still grant nothing for most of a host_lease. */
static bool forgot_since_renewed(const Lease *l, usec_t forgot_left, usec_t sent) {
        return forgot_left > 0 && usec_add(l->renewed, lease_ttl(l)) < usec_add(sent, forgot_left);
}

void engine_renew_done(Engine *e, const char *name, const char (*ids)[LEASE_ID_LEN + 1], const bool *missing,
                      size_t n, usec_t forgot_left, usec_t sent, usec_t now) {
        Lease *gone[ENGINE_RENEW_BATCH];
        size_t k_gone = 0;
        (void) name;
        if (now >= sent) {
                e->stats.rtt_last = now - sent;
                e->stats.rtt_sum += now - sent;
                e->stats.rtt_count++;
        }
        /* Counted from when the renewal was sent, not from when its answer
         * came: a late answer (the agent was stopped in between) leaves the
         * holder only the time its lease really has left. */
        for (size_t i = 0; i < n; i++) {
                Lease *l = engine_lease_find(e, ids[i]);

                if (!l || l->state == LEASE_GONE)
                        continue;
                if (!missing[i]) {
                        if (sent > l->renewed) {
                                usec_t due = l->renewed + e->lease_ttl / 3, late = now > due ? now - due : 0;

                                histogram_add(&e->stats.lateness, late);
                                e->stats.lateness_max = MAX(e->stats.lateness_max, late);
                                l->renewed = sent;
                                if (l->state == LEASE_HELD && e->ops->record)
                                        e->ops->record(e->ctx, l, true);
                                if (lease_state_holds(l->state) && now - sent < lease_ttl(l)) {
                                        char line[64];
                                        int len = snprintf(line, sizeof(line), "RENEWED ttl=%" PRIu64,
                                                           (lease_ttl(l) - (now - sent)) / USEC_PER_MSEC);

                                        lease_send(l, line, len);
                                }
                        }
                        continue;
                }
                if (lease_state_waits(l->state) && k_gone < ELEMENTSOF(gone))
                        gone[k_gone++] = lease_ref(l);
                else if (lease_state_waits(l->state))
                        requeue(l, now);
                else if (forgot_since_renewed(l, forgot_left, sent) && now - l->renewed <= lease_lost_after(l))
                        /* Only while its holder still believes (a grant
                         * heard late whose lease ran out, and was granted
                         * on, before the loss is no holder to put back). */
                        engine_put_back(e, l, now);
                else
                        lease_lost(l, "its lease is gone from Redis (it ran out, was evicted, or was revoked)", true, now);
        }
        /* Waiters whose places expired (this host was away longer than a
         * lease) join the line again in the order they came: a batch lists
         * the newest first. */
        qsort(gone, k_gone, sizeof(Lease *), seq_cmp);
        for (size_t i = 0; i < k_gone; i++) {
                if (lease_state_waits(gone[i]->state))
                        requeue(gone[i], now);
                lease_unref(gone[i]);
        }
}

/* Holders whose last confirmed renewal is older than engine_lost_after():
 * Redis may let their lease run out before this agent can renew it. Not a
 * slot the host holds itself: no job of it is to stop in time, and given
 * back early it would let another host start its reboot while this one
 * may still be in its own (a host frozen past two thirds of host_lease);
 * its next renewal says whether Redis still has it. */
static void check_lost(Engine *e, usec_t now) {
        Name *n, *nn;

        LIST_FOREACH_SAFE(all, n, nn, e->names) {
                Lease *l, *next;

                /* lease_lost() may free n once its last lease goes. */
                LIST_FOREACH_SAFE(by_name, l, next, n->leases)
                        if (lease_state_holds(l->state) && !l->host_held && now - l->renewed > lease_lost_after(l))
                                lease_lost(l, e->redis_up ? "its lease was not renewed in time; it may have run out"
                                                          : "Redis unreachable for too long; the lease runs out before it can be renewed",
                                           false, now);
        }
}

usec_t engine_tick(Engine *e, usec_t now) {
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

int seq_cmp(const void *x, const void *y) {
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
                if (lease_state_waits(l->state) && !l->enqueued)
                        w[k++] = lease_ref(l);
        qsort(w, k, sizeof(Lease *), seq_cmp);
        for (size_t i = 0; i < k; i++) {
                if (lease_state_waits(w[i]->state)) {
                        w[i]->seq = 0;
                        lease_check(w[i], now);
                }
                lease_unref(w[i]);
        }
}

void engine_redis_up(Engine *e, bool reset, usec_t grace, const char *why, usec_t now) {
        PendingRelease *p;
        Name *n, *nn;

        e->redis_up = true;
        e->stats.redis_ups++;
        if (grace > 0) {
                /* (What Redis says is data: a day at most is told.) */
                e->grace_until = MAX(e->grace_until, now + MIN(grace, ENGINE_GRACE_TOLD_MAX));
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
                        if (lease_state_holds(l->state))
                                lease_reassert(l, now);
                        else if (lease_state_waits(l->state)) {
                                /* Its place in line went with the rest, and
                                 * any grant heard of: queue again (in the
                                 * order they first came, below), and look
                                 * again once the grace is over. */
                                l->enqueued = false;
                                if (l->state == LEASE_GRANTED)
                                        lease_set_state(l, LEASE_WAITING, LEASE_EVENT_REDIS_RESET, now);
                                l->holds_back = false;
                        }
                }
        }
        LIST_FOREACH_SAFE(all, n, nn, e->names) {
                if (!reset)
                        for (Lease *l = n->leases; l; l = l->by_name_next)
                                if (lease_state_holds(l->state) && !l->reassert_inflight)
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

void engine_redis_down(Engine *e, const char *code, const char *why, usec_t now) {
        Name *n, *nn;

        e->redis_up = false;
        LIST_FOREACH_SAFE(all, n, nn, e->names) {
                Lease *l, *next;

                LIST_FOREACH_SAFE(by_name, l, next, n->leases) {
                        l->check_inflight = false;
                        l->reassert_inflight = false;
                        if (lease_state_waits(l->state) && !l->enqueued) {
                                char msg[1024];

                                /* (What lasts until an operator acts says so itself.) */
                                snprintf(msg, sizeof(msg), "%s%s", streq(code, ERROR_CODE_UNAVAILABLE) ?
                                         "Redis is unreachable: " : "", why);
                                lease_send_error(l, code, msg);
                                lease_release_at(l, "Redis unreachable", now);
                        }
                }
        }
        e->ops->changed(e->ctx);
}

