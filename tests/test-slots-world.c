/* SPDX-License-Identifier: MIT */
/* The world around the slot engine: its ops record what it asks for and
 * says, and the tests answer for Redis, the clock and the timers. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "test-slots.h"

/* ---- The world around the engine ------------------------------------------------ */







World w;
Engine e;

static void fx_send(void *ctx, void *client, const char *line, int len) {
        Client *c = client;

        (void) ctx;
        /* Every line kept whole, or the test stops: a line dropped would
         * let a check that a line is absent (!has_line) pass unread. */
        if (c->n_lines >= ELEMENTSOF(c->lines) || len < 0 || (size_t) len >= sizeof(c->lines[0]))
                TAP_BAIL("client %s: no room for line %u (%d bytes): %.*s", c->name, c->n_lines + 1, len,
                         len > 0 ? len : 0, line);
        snprintf(c->lines[c->n_lines++], sizeof(c->lines[0]), "%.*s", len, line);
}

static void fx_finish(void *ctx, void *client) {
        (void) ctx;
        ((Client *) client)->finished = true;
}

static Call *record(const char *what, const char *name, const char *lease) {
        Call *c;

        if (w.n_calls == w.size_calls) {
                w.size_calls = w.size_calls ? w.size_calls * 2 : 64;
                w.calls = realloc(w.calls, w.size_calls * sizeof(Call));
                if (!w.calls)
                        abort();
        }
        c = &w.calls[w.n_calls++];
        *c = (Call) {};
        snprintf(c->what, sizeof(c->what), "%s", what);
        snprintf(c->name, sizeof(c->name), "%s", name);
        snprintf(c->lease, sizeof(c->lease), "%s", lease ?: "");
        return c;
}

static int fx_call_acquire(void *ctx, Lease *l) {
        (void) ctx;
        if (!w.redis_up)
                return -ENOTCONN;
        record("acquire", l->name->name, l->id)->l = l;
        return 0;
}

static int fx_call_release(void *ctx, const char *name, const char *lease, uid_t uid) {
        (void) ctx;
        if (!w.redis_up)
                return -ENOTCONN;
        record("release", name, lease)->uid = uid;
        return 0;
}

static int fx_call_renew(void *ctx, Name *n, const char (*ids)[LEASE_ID_LEN + 1], size_t n_ids, uid_t uid,
                         bool host_held) {
        Call *c;

        (void) ctx;
        (void) uid;
        if (!w.redis_up)
                return -ENOTCONN;
        c = record("renew", n->name, ids[0]);
        c->host_held = host_held;
        c->n_ids = n_ids;
        c->ids = malloc(n_ids * sizeof(*ids));
        if (!c->ids)
                abort();
        memcpy(c->ids, ids, n_ids * sizeof(*ids));
        return 0;
}

static int fx_call_reassert(void *ctx, Lease *l) {
        (void) ctx;
        if (!w.redis_up)
                return -ENOTCONN;
        record("reassert", l->name->name, l->id)->l = l;
        return 0;
}

static void fx_index(void *ctx, const Lease *l, bool add) {
        (void) ctx;
        (void) l;
        if (add)
                w.n_index_add++;
}

static void fx_lease_timer(void *ctx, Lease *l, usec_t when) {
        (void) ctx;
        w.lease_timer[(l->id[0] - '0') % 8] = when;
}

static void fx_name_timer(void *ctx, Name *n, usec_t when) {
        (void) ctx;
        (void) n;
        (void) when;
}

static void fx_nop_name(void *ctx, Name *n) {
        (void) ctx;
        (void) n;
}

static void fx_lease_drop(void *ctx, Lease *l) {
        (void) ctx;
        (void) l;
}

static int fx_stop_job(void *ctx, Lease *l, const char *why, usec_t kill_at) {
        (void) ctx;
        (void) why;
        snprintf(w.stopped, sizeof(w.stopped), "%s", l->unit ?: l->id);
        w.kill_at = kill_at;
        return l->unit ? 0 : w.ends_sessions ? 1 : -ESRCH;
}

static void fx_tell_lost(void *ctx, Lease *l, const char *why) {
        (void) ctx;
        (void) why;
        snprintf(w.told, sizeof(w.told), "%s", l->id);
}

static void fx_changed(void *ctx) {
        (void) ctx;
}

/* The engine's randomness and its words come from here: a run is the
 * same every time. */
static int fx_random_id(void *ctx, char ret[LEASE_ID_LEN + 1]) {
        (void) ctx;
        snprintf(ret, LEASE_ID_LEN + 1, "f%031u", ++w.n_ids);
        return 0;
}

static void fx_log(void *ctx, int level, uid_t uid, usec_t now, const LogFields *fields, const char *message) {
        (void) ctx;
        (void) now;
        (void) fields;
        if (level > LOG_INFO)
                return;
        /* All of them since setup(), or the test stops (as fx_send); a
         * program that never asks said() (test-slots-faults, which runs
         * the engine for long) lets them go. */
        if (w.said_unread && w.n_said >= ELEMENTSOF(w.said))
                w.n_said = 0;
        if (w.n_said >= ELEMENTSOF(w.said))
                TAP_BAIL("the engine said more than %zu lines since setup(): %s", ELEMENTSOF(w.said), message);
        snprintf(w.said[w.n_said++], sizeof(w.said[0]), "%d %d %s", level,
                 uid == ENGINE_NO_UID ? -1 : (int) uid, message);
}

/* Whether one of the engine's lines since setup() starts so. */
bool said(const char *start) {
        for (size_t i = 0; i < w.n_said; i++)
                if (strneq(w.said[i], start, strlen(start)))
                        return true;
        return false;
}

static const EngineOps ops = {
        .send = fx_send, .finish = fx_finish, .call_acquire = fx_call_acquire, .call_release = fx_call_release,
        .call_renew = fx_call_renew, .call_reassert = fx_call_reassert, .index = fx_index,
        .lease_timer = fx_lease_timer, .name_timer = fx_name_timer, .name_waiting = fx_nop_name,
        .lease_drop = fx_lease_drop, .name_drop = fx_nop_name, .stop_job = fx_stop_job, .changed = fx_changed,
        .tell_lost = fx_tell_lost,
        .random_id = fx_random_id, .log = fx_log,
};

void calls_free(void) {
        for (unsigned i = 0; i < w.n_calls; i++)
                free(w.calls[i].ids);
        free(w.calls);
}

void setup(usec_t now) {
        calls_free();
        w = (World) { .redis_up = true };
        engine_init(&e, &ops, NULL, TTL);
        e.wake_grants = true;   /* as without replicas */
        engine_redis_up(&e, false, 0, NULL, now);
}

/* Lease ids: "1000…", "2000…": the first digit tells them apart. */
const char *id(int n) {
        static char ids[10][LEASE_ID_LEN + 1];

        snprintf(ids[n], sizeof(ids[n]), "%d%031d", n, 0);
        return ids[n];
}

Lease *ask(int n, const char *name, uint32_t slots, usec_t wait, Client *c, usec_t now) {
        LeaseSpec spec = { .name = name, .id = id(n), .slots = slots, .uid = 1000, .pid = 42,
                           .desc = "INFO host=h pid=42 uid=1000 comm=job", .holder = "1000@h pid 42 (job)",
                           .unit = NULL };
        Lease *l = NULL;

        snprintf(c->name, sizeof(c->name), "c%d", n);
        CHECK_INT(engine_acquire(&e, &spec, wait, c, NULL, now, &l), 0, "lease accepted");
        return l;
}

Call *last_call(void) {
        return w.n_calls ? &w.calls[w.n_calls - 1] : NULL;
}

/* Redis answers a call: the oldest unanswered one of that kind for l.
 * An answer to a call never made is the test's mistake. */
bool answered(const char *what, Lease *l) {
        for (unsigned i = 0; i < w.n_calls; i++)
                if (w.calls[i].l == l && !w.calls[i].answered && streq(w.calls[i].what, what)) {
                        w.calls[i].answered = true;
                        return true;
                }
        CHECK(false, "(test) an answer to a %s call of %s that was never made", what, l->id);
        return false;
}

/* A lease's timer goes off (once, as the adapter's does). */
void timer_fires(Lease *l, usec_t now) {
        w.lease_timer[(l->id[0] - '0') % 8] = USEC_INFINITY;
        engine_lease_timer(&e, l, now);
}

void acquire_done(Lease *l, const AcquireResult *r, usec_t now) {
        if (answered("acquire", l))
                engine_acquire_done(&e, l, r, now);
}

void reassert_done(Lease *l, int result, usec_t now) {
        if (answered("reassert", l))
                engine_reassert_done(&e, l, result, now);
}

/* The agent going away: the engine forgets everything, then the calls still
 * under way are answered with "the connection went", as hiredis does. */
void teardown(void) {
        engine_done(&e);
        for (unsigned i = 0; i < w.n_calls; i++) {
                Call *c = &w.calls[i];

                if (!c->l || c->answered)
                        continue;
                c->answered = true;
                if (streq(c->what, "acquire"))
                        engine_acquire_done(&e, c->l, NULL, 0);
                else
                        engine_reassert_done(&e, c->l, -2, 0);
        }
}

unsigned count_calls(const char *what, const char *lease) {
        unsigned k = 0;

        for (unsigned i = 0; i < w.n_calls; i++)
                if (streq(w.calls[i].what, what) && (!lease || streq(w.calls[i].lease, lease)))
                        k++;
        return k;
}

void reply_granted(Lease *l, uint64_t token, uint32_t limit, usec_t now) {
        AcquireResult r = { .outcome = ACQUIRE_GRANTED, .token = token, .since_ms = 1000, .held = 1, .limit = limit };

        acquire_done(l, &r, now);
}

void reply_queued(Lease *l, uint32_t position, uint32_t limit, int64_t next_expiry_ms, usec_t now) {
        AcquireResult r = { .outcome = ACQUIRE_QUEUED, .position = position, .held = 1, .limit = limit,
                            .next_expiry_ms = next_expiry_ms };

        acquire_done(l, &r, now);
}

bool has_line(const Client *c, const char *prefix) {
        for (unsigned i = 0; i < c->n_lines; i++)
                if (strneq(c->lines[i], prefix, strlen(prefix)))
                        return true;
        return false;
}

/* A fresh engine with a and b in line for x (slots 2), in that order. */
void two_in_line(Client *c1, Client *c2, Lease **a, Lease **b) {
        setup(0);
        *a = ask(1, "x", 2, USEC_INFINITY, c1, 0);
        *b = ask(2, "x", 2, USEC_INFINITY, c2, 0);
        reply_queued(*a, 1, 2, -1, 1);
        reply_queued(*b, 2, 2, -1, 1);
}
