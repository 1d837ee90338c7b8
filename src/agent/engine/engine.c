/* SPDX-License-Identifier: MIT */
/* The slot engine (engine.h): names and leases, what clients are told,
 * grants in token order, start and stop. */
#include <errno.h>
#include <inttypes.h>
#include <search.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "macro.h"
#include "protocol.h"
#include "engine-internal.h"

void engine_say(Engine *e, int level, uid_t uid, usec_t now, const LogFields *fields, const char *format, ...) {
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

Lease *engine_lease_find(Engine *e, const char *id) {
        Lease key = {};
        void *p;

        if (strlen(id) != LEASE_ID_LEN)
                return NULL;
        memcpy(key.id, id, LEASE_ID_LEN);
        p = tfind(&key, &e->lease_tree, lease_cmp);
        return p ? *(Lease **) p : NULL;
}

Name *engine_name_find(Engine *e, const char *name) {
        Name key = { .name = (char *) name };
        void *p = tfind(&key, &e->name_tree, name_cmp);

        return p ? *(Name **) p : NULL;
}

usec_t engine_lost_after(const Engine *e) {
        /* Redis expires a lease TTL after its last renewal reached it; we
         * give up on it at two thirds of that since the last renewal we
         * sent, so its holder is told before anyone else can be granted it. */
        return e->lease_ttl * 2 / 3;
}

usec_t lease_ttl(const Lease *l) {
        return l->ttl > 0 ? l->ttl : l->engine->lease_ttl;
}

usec_t lease_lost_after(const Lease *l) {
        return lease_ttl(l) * 2 / 3;
}

Lease *engine_lease_of_host(Engine *e, const char *name) {
        Name *n = engine_name_find(e, name);

        if (!n)
                return NULL;
        for (Lease *l = n->leases; l; l = l->by_name_next)
                if (l->host_held && l->state != LEASE_GONE)
                        return l;
        return NULL;
}

/* ---- Names -------------------------------------------------------------------- */

static Name *name_get(Engine *e, const char *name) {
        Name *n = engine_name_find(e, name);

        if (n)
                return n;
        n = calloc(1, sizeof(*n));
        if (!n)
                return NULL;
        n->engine = e;
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

static Name *name_free(Name *n) {
        Engine *e;

        if (!n)
                return NULL;
        e = n->engine;
        e->ops->name_drop(e->ctx, n);
        tdelete(n, &e->name_tree, name_cmp);
        LIST_REMOVE(all, e->names, n);
        e->n_names--;
        free(n->drained);
        free(n->name);
        return mfree(n);
}

/* "HOST UID MS USER REASON" for people, after PREFIX: "PREFIXby USER (uid
 * UID) on HOST WHEN_WORD YYYY-MM-DD HH:MM UTC[: REASON]". */
static int record_text(const char *record, const char *prefix, const char *when_word, char *buf, size_t size) {
        char host[IDENT_MAX_LEN + 1], user[64], when[32];
        unsigned long long uid, since;
        struct tm tm;
        time_t t;
        int off = 0;

        if (!record || sscanf(record, "%64s %llu %llu %63s %n", host, &uid, &since, user, &off) < 4 || off == 0 ||
            !ident_is_valid(host))
                return -EBADMSG;
        t = (time_t) (since / 1000);
        if (!gmtime_r(&t, &tm) || strftime(when, sizeof(when), "%Y-%m-%d %H:%M UTC", &tm) == 0)
                return -EBADMSG;
        snprintf(buf, size, "%sby %s (uid %llu) on %s %s %s%s%s", prefix, user, uid, host, when_word, when,
                 record[off] ? ": " : "", record + off);
        return 0;
}

int engine_drain_text(const char *record, char *buf, size_t size) {
        return record_text(record, "", "since", buf, size);
}

int engine_cap_text(const char *record, uint32_t *ret_n, char *buf, size_t size) {
        unsigned long long n = 0;
        int off = 0;

        if (!record || sscanf(record, "%llu %n", &n, &off) < 1 || off == 0 || n == 0 || n > SLOTS_MAX ||
            engine_drain_text(record + off, buf, size) < 0)
                return -EBADMSG;
        *ret_n = (uint32_t) n;
        return 0;
}

int engine_action_text(const char *record, char *buf, size_t size) {
        char action[16], prefix[24];
        int off = 0;

        if (!record || sscanf(record, "%15s %n", action, &off) < 1 || off == 0 ||
            (!streq(action, "drain") && !streq(action, "undrain") && !streq(action, "revoke") && !streq(action, "limit")))
                return -EBADMSG;
        snprintf(prefix, sizeof(prefix), "%s ", action);
        return record_text(record + off, prefix, "at", buf, size);
}

/* A name without leases stays a while: asking for it again then costs no
 * new subscription. Names idle for long go on the next tick. */
static void name_maybe_free(Name *n, usec_t now) {
        if (n->leases)
                return;
        n->idle_since = now;
        if (n->engine->n_names > NAMES_IDLE_MAX)
                name_free(n);
}

void names_sweep(Engine *e, bool all, usec_t now) {
        Name *n, *next;

        LIST_FOREACH_SAFE(all, n, next, e->names)
                if (!n->leases && (all || now - n->idle_since > NAME_IDLE_TIME))
                        name_free(n);
}

/* ---- Leases ------------------------------------------------------------------- */

Lease *lease_ref(Lease *l) {
        l->n_ref++;
        return l;
}

Lease *lease_unref(Lease *l) {
        if (!l || --l->n_ref > 0)
                return NULL;
        free(l->desc);
        free(l->unit);
        return mfree(l);
}

LogFields lease_fields(const Lease *l) {
        return (LogFields) { .name = l->name->name, .lease = l->id, .token = l->token, .holder = l->holder };
}

/* The one place a lease's state changes. A transition lease-states.list
 * does not have is a bug, said at error level, and made all the same:
 * the caller goes on to do what the new state means (drop the lease, tell
 * its client GRANTED), so refusing it would leave a lease counted as what
 * it no longer is, and n_waiting/n_held (status, the per-user budgets)
 * apart from the leases in the lists. */
void lease_set_state(Lease *l, LeaseState state, LeaseEvent event, usec_t now) {
        Engine *e = l->engine;
        LeaseState old = l->state;
        LogFields f = lease_fields(l);

        if (lease_state_after(old, event) != state)
                engine_say(e, LOG_ERR, ENGINE_NO_UID, now, &f,
                          "Bug: lease %s of %s went from %s to %s on %s, which its life does not allow.", l->id,
                          l->name->name, lease_state_to_string(old), lease_state_to_string(state),
                          lease_event_to_string(event));
        else
                engine_say(e, LOG_DEBUG, ENGINE_NO_UID, now, &f, "Lease %s of %s: %s -> %s (%s).", l->id, l->name->name,
                          lease_state_to_string(old), lease_state_to_string(state), lease_event_to_string(event));
        l->state = state;
        /* The host's record marks a lease HELD (before its client is told
         * GRANTED, and no more once it is told LOST), and a job being
         * stopped after a loss (LOST, ENDING: its kill, set just before). */
        if (((old == LEASE_HELD) != (state == LEASE_HELD) || state == LEASE_LOST || state == LEASE_ENDING) &&
            state != LEASE_GONE && e->ops->record)
                e->ops->record(e->ctx, l, false);
        /* What it counts as (and whom it concerns) changes only between
         * waiting, held and neither. */
        if (lease_state_waits(old) == lease_state_waits(state) && lease_state_holds(old) == lease_state_holds(state))
                return;
        if (lease_state_waits(old)) {
                l->name->n_waiting--;
                e->n_waiting--;
        } else if (lease_state_holds(old)) {
                l->name->n_held--;
                e->n_held--;
        }
        if (lease_state_waits(state)) {
                l->name->n_waiting++;
                e->n_waiting++;
        } else if (lease_state_holds(state)) {
                l->name->n_held++;
                e->n_held++;
        }
        /* Waiters hear of grants there, holders of a revoke. */
        if (state != LEASE_GONE)
                e->ops->name_waiting(e->ctx, l->name);
        e->ops->changed(e->ctx);
}

/* One timer per lease: a waiter's deadline or its next look at Redis. */
void lease_arm(Lease *l) {
        usec_t when = USEC_INFINITY;

        if (lease_state_waits(l->state))
                when = MIN(l->deadline, l->recheck_at);
        if (when == l->timer_armed)
                return;
        l->timer_armed = when;
        l->engine->ops->lease_timer(l->engine->ctx, l, when);
}

void lease_send(Lease *l, const char *line, int len) {
        if (l->client && len >= 0)
                l->engine->ops->send(l->engine->ctx, l->client, line, len);
}

/* Lets go of the lease's client: it is told nothing more. */
void lease_finish_client(Lease *l) {
        void *c = l->client;

        if (!c)
                return;
        l->client = NULL;
        l->engine->ops->finish(l->engine->ctx, c);
}

void lease_send_error(Lease *l, const char *code, const char *message) {
        char line[PROTO_REPLY_MAX];
        MessageBuilder b;

        message_start(&b, line, sizeof(line), "ERROR");
        message_add(&b, "code", code);
        message_add(&b, "message", message);
        lease_send(l, line, message_finish(&b));
        lease_finish_client(l);
}

/* Drops the lease from this host: no more watching, no client. */
void lease_detach(Lease *l, LeaseEvent event, usec_t now) {
        Engine *e = l->engine;
        Name *n = l->name;

        if (l->state == LEASE_GONE)
                return;
        lease_set_state(l, LEASE_GONE, event, now);
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

void pending_release_add(Engine *e, const char *name, const char *lease, uid_t uid) {
        PendingRelease *p = calloc(1, sizeof(*p));

        if (!p) {
                engine_say(e, LOG_ERR, ENGINE_NO_UID, 0, NULL,
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
static void release_in_redis(Engine *e, const char *name, const char *lease, uid_t uid) {
        if (!e->redis_up || e->ops->call_release(e->ctx, name, lease, uid) < 0)
                pending_release_add(e, name, lease, uid);
}

void lease_release_at(Lease *l, const char *why, usec_t now) {
        Engine *e = l->engine;
        Name *n = l->name;
        bool blocker, others;
        LogFields f;

        if (l->state == LEASE_GONE)
                return;
        /* A waiter that goes may have held back a later grant. (With no
         * other lease, the name itself may go with it.) */
        blocker = l->state == LEASE_WAITING;
        others = n->leases != l || l->by_name_next;
        f = lease_fields(l);
        if (lease_state_holds(l->state))
                engine_say(e, LOG_INFO, l->uid, now, &f, "Released slot of %s (token %" PRIu64 "): %s.", n->name,
                    l->token, why);
        else
                engine_say(e, LOG_DEBUG, ENGINE_NO_UID, now, &f, "Withdrew from the queue for %s: %s.", n->name, why);
        release_in_redis(e, n->name, l->id, l->uid);
        lease_detach(l, LEASE_EVENT_RELEASE, now);
        if (blocker && others)
                name_flush_grants(n, now);
}

bool lease_kept_ending(Lease *l, const char *what, usec_t now) {
        LogFields f;

        if (l->state != LEASE_ENDING)
                return false;
        f = lease_fields(l);
        engine_say(l->engine, LOG_DEBUG, ENGINE_NO_UID, now, &f,
                  "Lease %s of %s: %s while its session ends; kept until its lease runs out.", l->id, l->name->name, what);
        return true;
}

void engine_release(Engine *e, Lease *l, const char *why, usec_t now) {
        (void) e;
        if (lease_kept_ending(l, why, now))
                return;
        count_release(l, ENGINE_RELEASE_RELEASED);
        lease_release_at(l, why, now);
}

/* The end of l's lease in Redis at the earliest, on this agent's clock:
 * its last renewal (as this agent sent it, before Redis saw it) plus the
 * lease. A revoke keeps the slot counted until then. */
static usec_t lease_end(const Lease *l) {
        return l->renewed + lease_ttl(l);
}

void lease_lost(Lease *l, const char *why, bool reserved, usec_t now) {
        Engine *e = l->engine;
        char line[PROTO_REPLY_MAX];
        char free_in[24];
        MessageBuilder b;
        LogFields f = lease_fields(l);
        /* Given back at once: a slot the host holds (no job to fence), a
         * lease that may be gone from Redis (not renewed in time: its
         * holder fenced itself; or found missing after its lease's end). */
        bool done = l->host_held || (reserved ? now > lease_end(l) : now - l->renewed > lease_lost_after(l));
        /* When the slot may be granted elsewhere at the earliest: a revoke
         * keeps it counted in Redis until its lease's end (a holder that
         * hears nothing fences itself at two thirds of it, and has its
         * job gone by then); any other loss may have freed it already.
         * The job must be gone by then (run's SIGKILL, a unit's or a
         * session's KillUnit). */
        usec_t free_at = reserved && !done ? lease_end(l) : now;
        usec_t kill_at = now + lost_kill_in(free_at - now);
        bool ending = false;    /* a login session being ended here */

        /* Told already: released when its anchor closes (a login session
         * ended here: not then), or now that its lease ran out. */
        if (l->state == LEASE_LOST || l->state == LEASE_ENDING) {
                if (l->host_held || now > lease_end(l))
                        lease_release_at(l, "lost, its lease run out", now);
                return;
        }
        engine_say(e, LOG_ERR, ENGINE_NO_UID, now, &f, "LOST slot of %s (token %" PRIu64 "): %s.", l->name->name, l->token,
            why);
        /* A unit with on-lost=stop is stopped whatever the loss, and its
         * control group killed before its slot may go elsewhere (at once
         * when it may have gone already). */
        if (l->unit && l->stop_on_lost)
                (void) e->ops->stop_job(e->ctx, l, why, kill_at);
        else if (l->unit)
                engine_say(e, LOG_WARNING, ENGINE_NO_UID, now, &f,
                    "%s goes on running without its slot of %s (on-lost=ignore).", l->unit, l->name->name);
        if (l->client) {
                message_start(&b, line, sizeof(line), "LOST");
                message_add(&b, "reason", why);
                snprintf(free_in, sizeof(free_in), "%" PRIu64, (free_at - now) / USEC_PER_MSEC);
                message_add(&b, "free_in", free_in);
                lease_send(l, line, message_finish(&b));
        } else {
                e->ops->tell_lost(e->ctx, l, why);
                /* A login session whose slot was revoked ends before the
                 * slot moves on; one lost to an outage (the slot may be
                 * free already: nothing would keep the bound) goes on, as
                 * on_error=allow lets logins in while Redis is away. */
                if (!l->unit && !l->host_held && free_at > now)
                        ending = e->ops->stop_job(e->ctx, l, why, kill_at) > 0;
        }
        e->stats.lost++;
        count_release(l, ENGINE_RELEASE_LOST);
        /* A revoke keeps the slot counted in Redis until this release: made
         * once the job stopped (its anchor closed), so that its successor
         * never runs beside it; at its lease's end at the latest. Whether
         * or not the revoke's message came first (it is a hint, and the
         * renewal that found the lease gone may come before it on the
         * other connection): a holder told LOST before then is given back
         * only once it stopped or its lease ran out (the model's
         * unheard-releases found two believers otherwise). */
        if (!done && ending) {
                lease_set_state(l, LEASE_ENDING, LEASE_EVENT_SESSION_ENDED, now);
                lease_finish_client(l);
                return;
        }
        if (!done) {
                lease_set_state(l, LEASE_LOST, LEASE_EVENT_LOST_TOLD, now);
                lease_finish_client(l);
                return;
        }
        lease_release_at(l, "lost", now);
}

int lease_new(Engine *e, const LeaseSpec *spec, void *io, Lease **ret) {
        _cleanup_(lease_unrefp) Lease *l = NULL;
        Name *n;

        n = name_get(e, spec->name);
        if (!n)
                return -ENOMEM;
        l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        *l = (Lease) {
                .n_ref = 1, .engine = e, .name = n, .slots = spec->slots, .weight = MAX(spec->weight, 1u), .limit = spec->slots,
                .uid = spec->uid, .pid = spec->pid, .io = io, .state = LEASE_NEW, .stop_on_lost = spec->stop_on_lost,
                .host_held = spec->host_held, .ttl = spec->ttl,
                .deadline = USEC_INFINITY, .recheck_at = USEC_INFINITY, .timer_armed = USEC_INFINITY,
                .asked = USEC_INFINITY,
        };
        snprintf(l->id, sizeof(l->id), "%s", spec->id);
        l->desc = strdup(spec->desc ?: "INFO");
        l->unit = spec->unit ? strdup(spec->unit) : NULL;
        if (!l->desc || (spec->unit && !l->unit) || !tsearch(l, &e->lease_tree, lease_cmp))
                return -ENOMEM;
        snprintf(l->holder, sizeof(l->holder), "%s", spec->holder ?: "?");
        e->n_leases++;
        LIST_PREPEND(by_name, n->leases, l);
        *ret = TAKE_PTR(l);
        return 0;
}

uint64_t engine_units_of(const Engine *e, uid_t uid) {
        uint64_t k = 0;

        for (const Name *n = e->names; n; n = n->all_next)
                for (const Lease *l = n->leases; l; l = l->by_name_next)
                        if (l->uid == uid && l->state != LEASE_GONE)
                                k += l->weight;
        return k;
}

size_t engine_names_of(const Engine *e, uid_t uid, const char *but) {
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

Lease *engine_lease_of_unit(Engine *e, const char *name, const char *unit, uid_t uid) {
        Name *n = engine_name_find(e, name);
        Lease *l;

        if (!n)
                return NULL;
        LIST_FOREACH(by_name, l, n->leases)
                if (lease_state_holds(l->state) && l->unit && streq(l->unit, unit) && l->uid == uid)
                        return l;
        return NULL;
}

/* ---- Grants --------------------------------------------------------------------- */

/* The ttl a holder is told is what its lease has left, counted from the
 * last call that set its expiry in Redis, never 0 (no self-fencing). */
void send_granted(Lease *l, usec_t now) {
        usec_t ttl = lease_ttl(l), age = now > l->renewed ? now - l->renewed : 0;
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

/* renewed: when the call that set the lease's expiry in Redis was made
 * (USEC_INFINITY: now). */
static void grant(Lease *l, uint64_t token, uint64_t since, uint32_t limit, usec_t renewed, bool by_wake, usec_t now) {
        Engine *e = l->engine;
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
        lease_set_state(l, LEASE_HELD, LEASE_EVENT_GRANT_TOLD, now);
        lease_arm(l);
        if (l->asked != USEC_INFINITY)
                histogram_add(&e->stats.wait, now > l->asked ? now - l->asked : 0);
        s = name_stats_get(e, l->name->name);
        if (s)
                s->grants++;
        /* The holder first, the log (the journal, at info) after. */
        send_granted(l, now);
        f = lease_fields(l);
        engine_say(e, LOG_INFO, l->uid, now, &f, "Granted slot of %s to %s (token %" PRIu64 ")%s.", l->name->name,
            l->holder, token, by_wake ? " on the release's wake message" : "");
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
void name_flush_grants(Name *n, usec_t now) {
        for (;;) {
                Lease *p = NULL, *w;
                bool blocked = false;

                LIST_FOREACH(by_name, w, n->leases)
                        if (w->state == LEASE_GRANTED && (!p || w->seq < p->seq))
                                p = w;
                if (!p)
                        return;
                LIST_FOREACH(by_name, w, n->leases) {
                        /* Still waiting in Redis' answer to a look sent
                         * after p's grant was heard of: it holds nothing
                         * back. */
                        if (w->state != LEASE_WAITING || w->seq == 0 || w->seq > p->seq ||
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
                grant(p, p->pending_token, p->pending_since, p->pending_limit, p->pending_renewed, p->pending_by_wake,
                      now);
        }
}

void grant_in_order(Lease *l, uint64_t token, uint64_t since, uint32_t limit, usec_t renewed, bool by_wake,
                           usec_t now) {
        if (!lease_state_waits(l->state))
                return;
        /* (Heard of again, a grant is as old as when first heard of.) */
        if (l->state != LEASE_GRANTED || l->pending_token != token)
                l->pending_after = l->engine->check_counter;
        l->pending_token = token;
        l->pending_since = since;
        l->pending_limit = limit;
        l->pending_renewed = renewed;
        l->pending_heard = now;
        l->pending_by_wake = by_wake;
        if (l->state == LEASE_WAITING)
                lease_set_state(l, LEASE_GRANTED, LEASE_EVENT_GRANT_HEARD, now);
        name_flush_grants(l->name, now);
}

/* ---- Asking Redis ---------------------------------------------------------------- */

/* Calls go out in order on one connection, so the order in which leases
 * ask for a place in line is the order of their tickets. */
static void lease_join(Lease *l) {
        Engine *e = l->engine;

        l->seq = ++e->queue_seq;
        e->ops->index(e->ctx, l, true);
}

void lease_check(Lease *l, usec_t now) {
        Engine *e = l->engine;

        if (!lease_state_waits(l->state) || !e->redis_up)
                return;
        if (l->check_inflight) {
                /* Sent after it lost its place (its renewal said so): that
                 * one gives it a new one. */
                if (!l->enqueued && l->seq == 0)
                        lease_join(l);
                l->check_again = true;
                return;
        }
        /* A new proof with every call (none if the kernel gives no random
         * bytes: its grants are then asked for), not only with a new place
         * in line: a grant message of an earlier place (its grant since run
         * out, the lease queued again while this agent was paused) must
         * not match the new one. */
        if (e->ops->random_id(e->ctx, l->proof) < 0)
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

usec_t engine_grace_left(const Engine *e, usec_t now) {
        return e->grace_until > now ? e->grace_until - now : 0;
}

/* ---- Start and stop ---------------------------------------------------------------- */

void engine_init(Engine *e, const EngineOps *ops, void *ctx, usec_t lease_ttl) {
        *e = (Engine) { .ops = ops, .ctx = ctx, .lease_ttl = lease_ttl };
}

void engine_done(Engine *e) {
        PendingRelease *p;
        Name *n, *nn;

        LIST_FOREACH_SAFE(all, n, nn, e->names) {
                Lease *l, *next;

                /* Its client just goes: no ERROR, no release. */
                LIST_FOREACH_SAFE(by_name, l, next, n->leases)
                        lease_detach(l, LEASE_EVENT_FORGET, 0);
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

void engine_index_value(const Lease *l, char buf[static ENGINE_INDEX_VALUE_MAX]) {
        size_t size = ENGINE_INDEX_VALUE_MAX;
        int n = snprintf(buf, size, "%s %" PRIu32 " " UID_FMT " %s %s", l->name->name, l->slots, l->uid,
                         l->unit ?: "-", l->stop_on_lost ? "stop" : "ignore");

        if (n > 0 && (size_t) n < size && (l->weight > 1 || l->host_held))
                n += snprintf(buf + n, size - (size_t) n, " %" PRIu32, l->weight);
        if (n > 0 && (size_t) n < size && l->host_held)
                snprintf(buf + n, size - (size_t) n, " " ENGINE_INDEX_HOST_HELD);
}
