/* SPDX-License-Identifier: MIT */
/* Redis for the agent: the command and pub/sub connections, script calls
 * (with a NOSCRIPT retry), the epoch that tells a Redis that lost its
 * state, and the engine's script calls with their replies checked and
 * decoded before the engine sees them. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent.h"
#include "log.h"
#include "lua-keys.h"

#define CONNECT_TIMEOUT (2 * USEC_PER_SEC)
#define COMMAND_TIMEOUT (5 * USEC_PER_SEC)
#define BACKOFF_MIN (100 * USEC_PER_MSEC)
#define BACKOFF_MAX (2 * USEC_PER_SEC)
#define IDLE_DEFAULT_MS (24ULL * 3600 * 1000)

static const char *const script_name[N_SCRIPTS] = {
        [SCRIPT_ACQUIRE] = "acquire", [SCRIPT_RELEASE] = "release", [SCRIPT_RENEW] = "renew",
        [SCRIPT_REASSERT] = "reassert", [SCRIPT_ADOPT] = "adopt", [SCRIPT_STATUS] = "status",
        [SCRIPT_EPOCH] = "epoch", [SCRIPT_BATCH] = "batch",
};

usec_t now_mono(void) {
        return now_usec(CLOCK_MONOTONIC);
}

static Agent *agent_of(void *ctx) {
        return ctx;
}

/* ---- Script calls ---------------------------------------------------------------- */

typedef struct ScriptCall {
        Agent *agent;
        Script script;
        redis_reply_cb cb;
        void *userdata;
        int argc;
        const char **argv;
        size_t *argvlen;
} ScriptCall;

static void script_reply(RedisConn *conn, const RedisReply *reply, void *userdata);

static int script_send(ScriptCall *sc, bool full_text) {
        Agent *a = sc->agent;

        sc->argv[0] = full_text ? "EVAL" : "EVALSHA";
        sc->argv[1] = full_text ? a->script_text[sc->script] : a->sha[sc->script];
        sc->argvlen[0] = strlen(sc->argv[0]);
        sc->argvlen[1] = strlen(sc->argv[1]);
        return redis_conn_command(a->cmd, script_reply, sc, sc->argc, sc->argv, sc->argvlen);
}

static void fire_and_forget_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        const char *err = redis_reply_error(reply);

        (void) conn;
        if (err)
                log_warning("Redis refused %s: %s", (const char *) userdata, err);
}

static void script_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        ScriptCall *sc = userdata;
        const char *err = redis_reply_error(reply);

        (void) conn;
        if (err && strneq(err, "NOSCRIPT", 8) && sc->argv[0][4] == 'S') {
                /* The server lost our scripts (SCRIPT FLUSH, a restart): load
                 * this one again for the calls to come, and send this call's
                 * text in full. */
                const char *load[] = { "SCRIPT", "LOAD", sc->agent->script_text[sc->script] };

                log_warning("Redis does not know the %s script any more; loading it again.",
                            script_name[sc->script]);
                (void) redis_conn_command(sc->agent->cmd, fire_and_forget_reply, (void *) "SCRIPT LOAD", 3, load, NULL);
                if (script_send(sc, true) >= 0)
                        return;
                reply = NULL;
        }
        sc->cb(sc->agent->cmd, reply, sc->userdata);
        free(sc);
}

/* EVALSHA with n_keys keys, then the other args. The call keeps its own
 * copy of everything, for a NOSCRIPT retry. */
static int script_call_argv(Agent *a, Script script, redis_reply_cb cb, void *userdata, size_t n_keys,
                            size_t n_args, const char *const *args, const size_t *arglens) {
        size_t argc = 3 + n_args, data_size = 16;
        ScriptCall *sc;
        char *p;
        int r;

        if (!a->cmd)
                return -ENOTCONN;
        for (size_t i = 0; i < n_args; i++)
                data_size += (arglens ? arglens[i] : strlen(args[i])) + 1;
        sc = malloc(sizeof(*sc) + argc * (sizeof(char *) + sizeof(size_t)) + data_size);
        if (!sc)
                return -ENOMEM;
        *sc = (ScriptCall) {
                .agent = a, .script = script, .cb = cb, .userdata = userdata, .argc = (int) argc,
                .argv = (const char **) (sc + 1),
        };
        sc->argvlen = (size_t *) (sc->argv + argc);
        p = (char *) (sc->argvlen + argc);

        sc->argv[2] = p;
        sc->argvlen[2] = (size_t) sprintf(p, "%zu", n_keys);
        p += sc->argvlen[2] + 1;
        for (size_t i = 0; i < n_args; i++) {
                size_t n = arglens ? arglens[i] : strlen(args[i]);

                memcpy(p, args[i], n);
                p[n] = '\0';
                sc->argv[3 + i] = p;
                sc->argvlen[3 + i] = n;
                p += n + 1;
        }
        r = script_send(sc, false);
        if (r < 0)
                free(sc);
        return r;
}

static int script_call_now(Agent *a, Script script, const char *name, redis_reply_cb cb, void *userdata,
                           size_t n_args, const char *const *args, const size_t *arglens) {
        /* The name's keys, then the fleet's clock key. */
        enum { K = N_KEYS + 1 };
        char keys[K][IDENT_MAX_LEN + NAME_MAX_LEN + 32];
        _cleanup_free_ const char **argv = NULL;
        _cleanup_free_ size_t *lens = NULL;

        if (a->state != REDIS_READY)
                return -ENOTCONN;
        argv = calloc(K + n_args, sizeof(char *));
        lens = calloc(K + n_args, sizeof(size_t));
        if (!argv || !lens)
                return -ENOMEM;
        for (size_t i = 0; i < K; i++) {
                int n = i < N_KEYS ? snprintf(keys[i], sizeof(keys[i]), "%s:{%s}:%s", a->config->key_prefix, name, key_suffix[i])
                                   : snprintf(keys[i], sizeof(keys[i]), "%s:clock", a->config->key_prefix);

                argv[i] = keys[i];
                lens[i] = (size_t) n;
        }
        for (size_t i = 0; i < n_args; i++) {
                argv[K + i] = args[i];
                lens[K + i] = arglens ? arglens[i] : strlen(args[i]);
        }
        return script_call_argv(a, script, cb, userdata, K, K + n_args, argv, lens);
}

/* ---- Group commit ----------------------------------------------------------------
 * Acquires, releases and renewals of one name that reach the agent in one
 * turn of its loop (every event ready at once has been handled) go to Redis
 * as one script call (batch.lua), which runs them in order and answers each
 * as its own script would: Redis runs one script, not one per request. */

#define BATCH_MAX 64            /* calls in one batch; a full one goes at once */

typedef struct BatchCall {
        Script script;
        redis_reply_cb cb;
        void *userdata;
} BatchCall;

typedef struct Batch {
        LIST_FIELDS(struct Batch, batches);
        Agent *agent;
        char name[NAME_MAX_LEN + 1];
        BatchCall calls[BATCH_MAX];
        size_t n_calls;
        char **args;            /* for each call: its kind, its number of args, then them */
        size_t *lens;
        size_t n_args, cap_args;
} Batch;

static Batch *batch_free(Batch *b) {
        if (b) {
                for (size_t i = 0; i < b->n_args; i++)
                        free(b->args[i]);
                free(b->args);
                free(b->lens);
                free(b);
        }
        return NULL;
}

/* Each call's own callback, with its own reply; NULL to all when Redis went
 * before it answered, the whole reply to all when it is not one per call. */
static void batch_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Batch *b = userdata;
        bool each = reply && !redis_reply_error(reply) && redis_reply_array_len(reply) == b->n_calls;

        for (size_t i = 0; i < b->n_calls; i++)
                b->calls[i].cb(conn, each ? redis_reply_array_get(reply, i) : reply, b->calls[i].userdata);
        batch_free(b);
}

static void batch_send(Agent *a, Batch *b) {
        LIST_REMOVE(batches, a->batches, b);
        if (b->n_calls == 1) {
                /* Alone: its own script, args after its kind and count. */
                BatchCall *c = &b->calls[0];

                if (script_call_now(a, c->script, b->name, c->cb, c->userdata, b->n_args - 2,
                                    (const char *const *) b->args + 2, b->lens + 2) < 0)
                        c->cb(a->cmd, NULL, c->userdata);
                batch_free(b);
                return;
        }
        if (script_call_now(a, SCRIPT_BATCH, b->name, batch_reply, b, b->n_args, (const char *const *) b->args,
                            b->lens) < 0)
                batch_reply(a->cmd, NULL, b);
}

static Batch *batch_find(Agent *a, const char *name) {
        Batch *b;

        LIST_FOREACH(batches, b, a->batches)
                if (streq(b->name, name))
                        return b;
        return NULL;
}

static void batch_flush_name(Agent *a, const char *name) {
        Batch *b = batch_find(a, name);

        if (b)
                batch_send(a, b);
}

static void batch_flush_all(Agent *a) {
        while (a->batches)
                batch_send(a, a->batches);
}

static int on_batch_turn(sd_event_source *s, void *userdata) {
        (void) s;
        batch_flush_all(userdata);
        return 0;
}

static int batch_push(Batch *b, const char *arg, size_t len) {
        if (b->n_args == b->cap_args) {
                size_t cap = b->cap_args ? 2 * b->cap_args : 32;
                char **args = reallocarray(b->args, cap, sizeof(char *));

                if (!args)
                        return -ENOMEM;
                b->args = args;
                size_t *lens = reallocarray(b->lens, cap, sizeof(size_t));
                if (!lens)
                        return -ENOMEM;
                b->lens = lens;
                b->cap_args = cap;
        }
        b->args[b->n_args] = strndup(arg, len);
        if (!b->args[b->n_args])
                return -ENOMEM;
        b->lens[b->n_args++] = len;
        return 0;
}

static int batch_add(Agent *a, Script script, const char *name, redis_reply_cb cb, void *userdata, size_t n_args,
                     const char *const *args, const size_t *arglens) {
        size_t mark;
        char count[24];
        Batch *b;
        int r;

        if (a->state != REDIS_READY || !a->cmd)
                return -ENOTCONN;
        if (!a->batch_source) {
                r = sd_event_add_defer(a->event, &a->batch_source, on_batch_turn, a);
                if (r < 0)
                        return r;
                /* After every other event that is ready: the loop's turn. */
                (void) sd_event_source_set_priority(a->batch_source, SD_EVENT_PRIORITY_IDLE);
        }
        b = batch_find(a, name);
        if (!b) {
                b = calloc(1, sizeof(*b));
                if (!b)
                        return -ENOMEM;
                b->agent = a;
                snprintf(b->name, sizeof(b->name), "%s", name);
                LIST_PREPEND(batches, a->batches, b);
        }
        mark = b->n_args;
        snprintf(count, sizeof(count), "%zu", n_args);
        r = batch_push(b, script_name[script], strlen(script_name[script]));
        if (r >= 0)
                r = batch_push(b, count, strlen(count));
        for (size_t i = 0; r >= 0 && i < n_args; i++)
                r = batch_push(b, args[i], arglens ? arglens[i] : strlen(args[i]));
        if (r < 0) {
                while (b->n_args > mark)
                        free(b->args[--b->n_args]);
                if (b->n_calls == 0) {
                        LIST_REMOVE(batches, a->batches, b);
                        batch_free(b);
                }
                return r;
        }
        b->calls[b->n_calls++] = (BatchCall) { .script = script, .cb = cb, .userdata = userdata };
        if (b->n_calls == BATCH_MAX)
                batch_send(a, b);
        else
                (void) sd_event_source_set_enabled(a->batch_source, SD_EVENT_ONESHOT);
        return 0;
}

/* Acquires, releases and renewals wait for the end of the loop's turn;
 * anything else on the name goes after what waits, at once. */
int script_call(Agent *a, Script script, const char *name, redis_reply_cb cb, void *userdata,
                size_t n_args, const char *const *args, const size_t *arglens) {
        if (script == SCRIPT_ACQUIRE || script == SCRIPT_RELEASE || script == SCRIPT_RENEW)
                return batch_add(a, script, name, cb, userdata, n_args, args, arglens);
        batch_flush_name(a, name);
        return script_call_now(a, script, name, cb, userdata, n_args, args, arglens);
}

void redis_command(Agent *a, const char *what, int argc, const char *const *argv) {
        if (a->state == REDIS_READY)
                (void) redis_conn_command(a->cmd, fire_and_forget_reply, (void *) what, argc, argv, NULL);
}

/* What every script is told besides its own arguments. */
typedef struct CommonArgs {
        char ttl[24], uid[16], grace[24], idle[24];
} CommonArgs;

static void common_args(const Agent *a, uid_t uid, CommonArgs *c) {
        snprintf(c->ttl, sizeof(c->ttl), "%" PRIu64, a->config->lease_ttl / USEC_PER_MSEC);
        snprintf(c->uid, sizeof(c->uid), UID_FMT, uid);
        snprintf(c->grace, sizeof(c->grace), "%" PRIu64, a->grace_until_ms);
        snprintf(c->idle, sizeof(c->idle), "%" PRIu64, (uint64_t) (a->config->idle_time ? a->config->idle_time / USEC_PER_MSEC : IDLE_DEFAULT_MS));
}

/* ---- The engine's calls: acquire ------------------------------------------------- */

/* With replicas (Sentinel), a grant is told only once WAIT says enough
 * replicas have it: a failover cannot then lose a slot someone holds. */
typedef struct GrantWait {
        Agent *agent;
        Lease *lease;
        AcquireResult result;
} GrantWait;

/* Well under the time after which a silent Redis counts as hung (WAIT
 * blocks the connection it is sent on). */
static usec_t command_timeout(const Agent *a);
static usec_t wait_timeout(const Agent *a) {
        return MIN(command_timeout(a) / 2, USEC_PER_SEC);
}

static void wait_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        GrantWait *gw = userdata;
        Agent *a = gw->agent;
        Lease *l = gw->lease;
        long long n = -1;
        char why[256];

        (void) conn;
        if (!reply) {
                /* Redis went before it said: asked again on the next master. */
                slots_acquire_done(&a->slots, l, NULL, now_mono());
                free(gw);
                return;
        }
        if (redis_reply_integer(reply, &n) >= 0 && n >= a->config->min_replicas_acked) {
                slots_acquire_done(&a->slots, l, &gw->result, now_mono());
                free(gw);
                return;
        }
        snprintf(why, sizeof(why), "the grant reached %lld of the %d replica(s) min_replicas_acked asks for; given back",
                 n < 0 ? 0 : n, a->config->min_replicas_acked);
        if (l->state != LEASE_GONE)     /* (released meanwhile: given back already) */
                (void) io_call_release(a, l->name->name, l->id, l->uid);
        gw->result = (AcquireResult) { .outcome = ACQUIRE_RETRY, .error = why };
        slots_acquire_done(&a->slots, l, &gw->result, now_mono());
        free(gw);
}

static bool wait_for_replicas(Agent *a, Lease *l, const AcquireResult *r) {
        char n[16], ms[24];
        GrantWait *gw;

        if (a->config->min_replicas_acked <= 0 || r->outcome != ACQUIRE_GRANTED)
                return false;
        gw = malloc(sizeof(*gw));
        if (!gw)
                return false;
        *gw = (GrantWait) { .agent = a, .lease = l, .result = *r };
        snprintf(n, sizeof(n), "%d", a->config->min_replicas_acked);
        snprintf(ms, sizeof(ms), "%" PRIu64, wait_timeout(a) / USEC_PER_MSEC);
        if (redis_conn_command(a->cmd, wait_reply, gw, 3, (const char *[]) { "WAIT", n, ms }, NULL) < 0) {
                free(gw);
                return false;
        }
        return true;
}

static void acquire_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Lease *l = userdata;
        Agent *a = agent_of(l->slots_engine->ctx);
        AcquireResult r = { .outcome = ACQUIRE_FAILED, .error = "unexpected reply from Redis", .next_expiry_ms = -1 };
        long long v[5] = {};
        size_t len = redis_reply_array_len(reply);

        (void) conn;
        if (!reply) {
                slots_acquire_done(&a->slots, l, NULL, now_mono());
                return;
        }
        if (redis_reply_error(reply))
                r.error = redis_reply_error(reply);
        else if (len >= 1 && redis_reply_array_integer(reply, 0, &v[0]) >= 0) {
                bool ok = true;

                for (size_t i = 1; i < len && i < 5; i++)
                        ok = ok && redis_reply_array_integer(reply, i, &v[i]) >= 0;
                if (v[0] == -1 && len == 1)
                        r.outcome = ACQUIRE_REFUSED;
                else if (ok && v[0] == 1 && len == 5 && v[1] > 0 && v[2] >= 0 && v[3] >= 0 && v[4] >= 0 &&
                         v[3] <= SLOTS_MAX && v[4] <= SLOTS_MAX)
                        r = (AcquireResult) { .outcome = ACQUIRE_GRANTED, .token = (uint64_t) v[1],
                                              .since_ms = (uint64_t) v[2], .held = (uint32_t) v[3],
                                              .limit = (uint32_t) v[4] };
                else if (ok && v[0] == 0 && len == 5 && v[1] > 0 && v[2] >= 0 && v[3] >= 0 && v[4] >= -1 &&
                         v[1] <= UINT32_MAX && v[2] <= SLOTS_MAX && v[3] <= SLOTS_MAX)
                        r = (AcquireResult) { .outcome = ACQUIRE_QUEUED, .position = (uint32_t) v[1],
                                              .held = (uint32_t) v[2], .limit = (uint32_t) v[3],
                                              .next_expiry_ms = v[4] };
        }
        if (r.outcome == ACQUIRE_GRANTED && a->config->min_replicas_acked > 0) {
                if (!wait_for_replicas(a, l, &r)) {
                        (void) io_call_release(a, l->name->name, l->id, l->uid);
                        r = (AcquireResult) { .outcome = ACQUIRE_RETRY, .error = "cannot ask the replicas" };
                        slots_acquire_done(&a->slots, l, &r, now_mono());
                }
                return;
        }
        slots_acquire_done(&a->slots, l, &r, now_mono());
}

int io_call_acquire(void *ctx, Lease *l) {
        Agent *a = agent_of(ctx);
        char slots[16];
        CommonArgs c;

        common_args(a, l->uid, &c);
        snprintf(slots, sizeof(slots), "%" PRIu32, l->slots);
        return script_call(a, SCRIPT_ACQUIRE, l->name->name, acquire_reply, l, 9,
                           (const char *[]) { l->id, slots, c.ttl, l->desc, a->config->host_id, c.uid, c.grace, c.idle,
                                              l->proof },
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
        Granted g[SLOTS_GRANTS_MAX];
        size_t k = 0, len = redis_reply_array_len(reply);
        long long held = 0;

        (void) conn;
        if (err)
                log_warning("Redis refused to release %s of %s: %s", rc->lease, rc->name, err);
        else if (reply && redis_reply_array_integer(reply, 0, &held) >= 0 && held == -1)
                log_warning("Redis records lease %s of %s for another host or user; not released.", rc->lease, rc->name);
        else if (reply) {
                /* {held, lease, token, since, ...}: whom the release handed slots to. */
                for (size_t i = 1; i + 2 < len && k < SLOTS_GRANTS_MAX; i += 3) {
                        long long token, since;

                        if (redis_reply_array_string(reply, i, g[k].lease, sizeof(g[k].lease)) < 0 ||
                            !lease_id_is_valid(g[k].lease) ||
                            redis_reply_array_integer(reply, i + 1, &token) < 0 ||
                            redis_reply_array_integer(reply, i + 2, &since) < 0 || token <= 0 || since < 0)
                                break;
                        g[k].token = (uint64_t) token;
                        g[k].since_ms = (uint64_t) since;
                        k++;
                }
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
        ReleaseCall *rc;
        CommonArgs c;
        int r;

        rc = calloc(1, sizeof(*rc));
        if (!rc)
                return -ENOMEM;
        rc->agent = a;
        rc->uid = uid;
        snprintf(rc->name, sizeof(rc->name), "%s", name);
        snprintf(rc->lease, sizeof(rc->lease), "%s", lease);
        common_args(a, uid, &c);
        r = script_call(a, SCRIPT_RELEASE, name, release_reply, rc, 5,
                        (const char *[]) { lease, a->config->host_id, c.uid, c.grace, c.idle }, NULL);
        if (r < 0) {
                free(rc);
                return r;
        }
        /* Out of this host's index with it, whenever it goes out. */
        redis_command(a, "HDEL", 3, (const char *[]) { "HDEL", a->host_key, lease });
        return 0;
}

/* The index of names "fleetsem status" lists, by when they were last used
 * here (names idle for long leave it: status.c). */
static void index_name(Agent *a, const char *name) {
        char score[24];

        snprintf(score, sizeof(score), "%lld", (long long) (now_usec(CLOCK_REALTIME) / USEC_PER_MSEC));
        redis_command(a, "ZADD", 4, (const char *[]) { "ZADD", a->names_key, score, name });
}

/* ---- renew ---------------------------------------------------------------------- */

typedef struct RenewCall {
        Agent *agent;
        usec_t sent;
        size_t n;
        char name[NAME_MAX_LEN + 1];
        char ids[][LEASE_ID_LEN + 1];
} RenewCall;

static void renew_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        RenewCall *rc = userdata;
        Agent *a = rc->agent;
        const char *err = redis_reply_error(reply);
        size_t n_missing = redis_reply_array_len(reply);
        bool *missing = NULL;

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
        for (size_t j = 0; j < n_missing; j++) {
                char id[LEASE_ID_LEN + 1];

                if (redis_reply_array_string(reply, j, id, sizeof(id)) < 0)
                        continue;
                for (size_t i = 0; i < rc->n; i++)
                        if (streq(rc->ids[i], id))
                                missing[i] = true;
        }
        slots_renew_done(&a->slots, rc->name, (const char (*)[LEASE_ID_LEN + 1]) rc->ids, missing, rc->n,
                         rc->sent, now_mono());
finish:
        free(missing);
        free(rc);
}

int io_call_renew(void *ctx, Name *n, const char (*ids)[LEASE_ID_LEN + 1], size_t n_ids) {
        Agent *a = agent_of(ctx);
        const char **args;
        RenewCall *rc;
        CommonArgs c;
        int r;

        if (a->state != REDIS_READY)
                return -ENOTCONN;
        rc = malloc(sizeof(*rc) + n_ids * sizeof(rc->ids[0]));
        args = calloc(n_ids + 4, sizeof(char *));
        if (!rc || !args) {
                free(rc);
                free(args);
                return -ENOMEM;
        }
        *rc = (RenewCall) { .agent = a, .sent = now_mono(), .n = n_ids };
        snprintf(rc->name, sizeof(rc->name), "%s", n->name);
        memcpy(rc->ids, ids, n_ids * sizeof(rc->ids[0]));
        common_args(a, 0, &c);
        args[0] = c.ttl;
        args[1] = a->config->host_id;
        args[2] = c.idle;
        args[3] = c.grace;
        for (size_t i = 0; i < n_ids; i++)
                args[4 + i] = rc->ids[i];
        r = script_call(a, SCRIPT_RENEW, n->name, renew_reply, rc, n_ids + 4, args, NULL);
        free(args);
        if (r < 0) {
                free(rc);
                return r;
        }
        index_name(a, n->name);
        return 0;
}

/* ---- reassert ------------------------------------------------------------------- */

static void reassert_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Lease *l = userdata;
        Agent *a = agent_of(l->slots_engine->ctx);
        long long v = 0;
        int result = -2;

        (void) conn;
        if (reply) {
                if (redis_reply_integer(reply, &v) >= 0 && v >= -1 && v <= 1)
                        result = (int) v;
                else
                        result = 0;     /* an error or nonsense: do not believe it holds */
        }
        slots_reassert_done(&a->slots, l, result, now_mono());
}

int io_call_reassert(void *ctx, Lease *l) {
        Agent *a = agent_of(ctx);
        char slots[16], token[24], since[24];
        CommonArgs c;

        common_args(a, l->uid, &c);
        snprintf(slots, sizeof(slots), "%" PRIu32, l->slots);
        snprintf(token, sizeof(token), "%" PRIu64, l->token);
        snprintf(since, sizeof(since), "%" PRIu64, l->since_ms);
        return script_call(a, SCRIPT_REASSERT, l->name->name, reassert_reply, l, 10,
                           (const char *[]) { l->id, slots, token, since, c.ttl, l->desc, a->config->host_id, c.uid, c.idle,
                                              c.grace },
                           NULL);
}

/* ---- This host's index ---------------------------------------------------------- */

/* "NAME SLOTS UID UNIT ON-LOST", UNIT "-" when not bound to one. */
void io_index(void *ctx, const Lease *l, bool add) {
        Agent *a = agent_of(ctx);
        char value[NAME_MAX_LEN + UNIT_NAME_MAX + 64];

        if (!add) {
                redis_command(a, "HDEL", 3, (const char *[]) { "HDEL", a->host_key, l->id });
                return;
        }
        snprintf(value, sizeof(value), "%s %" PRIu32 " " UID_FMT " %s %s", l->name->name, l->slots, l->uid,
                 l->unit ?: "-", l->stop_on_lost ? "stop" : "ignore");
        redis_command(a, "HSET", 4, (const char *[]) { "HSET", a->host_key, l->id, value });
        /* A name's first lease here: in the names index at once, not at the
         * next renewal. */
        if (l->name->n_held + l->name->n_waiting <= 1)
                index_name(a, l->name->name);
}

/* ---- Wake-ups ------------------------------------------------------------------- */

void io_name_waiting(void *ctx, Name *n) {
        Agent *a = agent_of(ctx);
        char channel[IDENT_MAX_LEN + NAME_MAX_LEN + 16];

        if (!a->sub_ready || n->io_generation == a->sub_generation)
                return;
        snprintf(channel, sizeof(channel), "%s:{%s}:wake", a->config->key_prefix, n->name);
        if (redis_conn_subscribe(a->sub, channel) >= 0)
                n->io_generation = a->sub_generation;
}

static void on_wake(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Agent *a = userdata;
        char kind[16], channel[IDENT_MAX_LEN + NAME_MAX_LEN + 16], name[NAME_MAX_LEN + 1];
        char payload[SLOTS_GRANTS_MAX * 80] = "";
        const char *open, *close;

        (void) conn;
        if (!reply || redis_reply_array_len(reply) != 3 ||
            redis_reply_array_string(reply, 0, kind, sizeof(kind)) < 0 ||
            redis_reply_array_string(reply, 1, channel, sizeof(channel)) < 0)
                return;
        /* "subscribe" too: a release may have come before the subscription. */
        if (!streq(kind, "message") && !streq(kind, "subscribe"))
                return;
        open = strchr(channel, '{');
        close = strrchr(channel, '}');
        if (!open || !close || close <= open + 1 || (size_t) (close - open - 1) > NAME_MAX_LEN)
                return;
        memcpy(name, open + 1, (size_t) (close - open - 1));
        name[close - open - 1] = '\0';
        if (streq(kind, "message") && redis_reply_array_string(reply, 2, payload, sizeof(payload)) < 0)
                payload[0] = '\0';
        slots_wake(&a->slots, name, payload, now_mono());
}

/* ---- Connections ------------------------------------------------------------------ */

static void schedule_reconnect(Agent *a) {
        a->backoff = a->backoff == 0 ? BACKOFF_MIN : a->backoff * 2;
        if (a->backoff > BACKOFF_MAX)
                a->backoff = BACKOFF_MAX;
        (void) sd_event_source_set_time_relative(a->reconnect_source, a->backoff);
        (void) sd_event_source_set_enabled(a->reconnect_source, SD_EVENT_ONESHOT);
}

static void master_forget(Agent *a);

static void redis_went_down(Agent *a, int error, const char *why) {
        char buf[FORMAT_DURATION_MAX];

        snprintf(a->redis_error, sizeof(a->redis_error), "%s", why && why[0] ? why : strerror(-error));
        redis_conn_free(a->cmd);
        a->cmd = NULL;
        redis_conn_free(a->sub);
        a->sub = NULL;
        a->sub_ready = false;

        if (a->state == REDIS_READY)
                log_warning("Lost connection to Redis at %s: %s; held slots stay anchored, retrying.",
                            a->redis_name, a->redis_error);
        else if (a->state == REDIS_CONNECTING || a->backoff >= BACKOFF_MAX)
                log_warning("Failed to connect to Redis at %s: %s; retrying in %s.", a->redis_name, a->redis_error,
                            format_duration(buf, sizeof(buf), a->backoff ? a->backoff * 2 > BACKOFF_MAX ? BACKOFF_MAX : a->backoff * 2 : BACKOFF_MIN));
        a->state = REDIS_DOWN;
        if (a->config->redis.master_name)
                /* Ask the Sentinels again: the master may have moved. */
                master_forget(a);
        slots_redis_down(&a->slots, a->redis_error, now_mono());
        status_deferred(a);
        schedule_reconnect(a);
        status_mark_dirty(a);
}

static void on_redis_ready(Agent *a, bool reset, usec_t grace) {
        Name *n;

        a->state = REDIS_READY;
        a->backoff = 0;
        a->redis_error[0] = '\0';
        if (a->config->redis.master_name)
                log_info("Connected to Redis master %s (%s, from the Sentinels).", a->master_name,
                         a->config->redis.master_name);
        else
                log_info("Connected to Redis at %s.", a->redis_name);
        if (reset && a->slots.n_leases > 0)
                log_notice("Redis lost its state since this agent last saw it; re-asserting %zu held slot(s), "
                           "no grants anywhere for another %s.", a->slots.n_held,
                           format_duration((char[FORMAT_DURATION_MAX]) {}, FORMAT_DURATION_MAX, grace));
        if (!a->adopted)
                adopt_start(a);
        slots_redis_up(&a->slots, reset, grace, now_mono());
        for (n = a->slots.names; n; n = n->all_next)
                if (n->n_waiting > 0)
                        io_name_waiting(a, n);
        status_deferred(a);
        status_mark_dirty(a);
}

typedef struct SetupStep {
        Agent *agent;
        const char *what;
        int script;             /* -1: not a SCRIPT LOAD */
} SetupStep;

static void setup_done(Agent *a);

static void setup_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        SetupStep *step = userdata;
        Agent *a = step->agent;
        const char *err = redis_reply_error(reply), *s;
        size_t len;

        if (!reply || conn != a->cmd)
                goto finish;    /* an old connection */
        if (err) {
                if (!a->setup_failed)
                        snprintf(a->redis_error, sizeof(a->redis_error), "%s failed: %s", step->what, err);
                a->setup_failed = true;
        } else if (step->script >= 0) {
                if (redis_reply_string(reply, &s, &len) < 0 || len != 40) {
                        a->setup_failed = true;
                        snprintf(a->redis_error, sizeof(a->redis_error), "SCRIPT LOAD gave an unexpected reply");
                } else {
                        memcpy(a->sha[step->script], s, 40);
                        a->sha[step->script][40] = '\0';
                }
        }
        if (--a->setup_pending > 0)
                goto finish;
        if (a->setup_failed) {
                char why[sizeof(a->redis_error)];

                snprintf(why, sizeof(why), "%s", a->redis_error);
                redis_went_down(a, -EACCES, why);
        } else
                setup_done(a);
finish:
        free(step);
}

static void setup_send(Agent *a, const char *what, int script, int argc, const char *const *argv) {
        SetupStep *step = calloc(1, sizeof(*step));

        if (!step)
                return;
        *step = (SetupStep) { .agent = a, .what = what, .script = script };
        if (redis_conn_command(a->cmd, setup_reply, step, argc, argv, NULL) < 0) {
                free(step);
                return;
        }
        a->setup_pending++;
}

/* The epoch: "ID GRACE_UNTIL_MS" in P:epoch, made by the first agent that
 * finds none. An id other than the one this agent knew means Redis lost
 * its state since (restarted empty, a failover that lost writes). The
 * grace lasts until Redis has been up for one lease: holders from before
 * are re-asserted or told they lost their slot by then. */
static void epoch_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Agent *a = userdata;
        char value[128], id[LEASE_ID_LEN + 1];
        long long created = -1, now_ms = -1;
        uint64_t grace_until = 0;
        bool reset;
        int n = 0;

        if (!reply || conn != a->cmd)
                return;
        if (redis_reply_error(reply) || redis_reply_array_len(reply) != 3 ||
            redis_reply_array_integer(reply, 0, &created) < 0 ||
            redis_reply_array_string(reply, 1, value, sizeof(value)) < 0 ||
            redis_reply_array_integer(reply, 2, &now_ms) < 0 || now_ms < 0 ||
            strchr(value, '-') || sscanf(value, "%32[0-9a-f] %" SCNu64 "%n", id, &grace_until, &n) != 2 ||
            (value[n] != '\0' && (value[n] != ' ' || strspn(value + n + 1, "0123456789abcdef") != strlen(value + n + 1))) ||
            !lease_id_is_valid(id)) {
                redis_went_down(a, -EBADMSG, redis_reply_error(reply) ?: "unexpected reply to the epoch script");
                return;
        }
        reset = created == 1 || (a->epoch[0] && !streq(a->epoch, id));
        if (reset)
                log_full(a->epoch[0] ? LOG_WARNING : LOG_INFO, "Redis at %s %s (epoch %s).", a->redis_name,
                         a->epoch[0] ? "lost its state since this agent last saw it" : "holds no fleetsem state yet", id);
        if (reset && a->config->redis.master_name)
                a->master_since = now_usec(CLOCK_REALTIME);
        memcpy(a->epoch, id, sizeof(a->epoch));
        a->grace_until_ms = grace_until;
        on_redis_ready(a, reset, grace_until > (uint64_t) now_ms ? (grace_until - (uint64_t) now_ms) * USEC_PER_MSEC : 0);
}

static void info_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Agent *a = userdata;
        const char *s, *p;
        size_t len;
        long long uptime = 0;
        uint64_t ttl_ms = a->config->lease_ttl / USEC_PER_MSEC, grace_ms;
        char key[LEASE_ID_LEN + 1 + IDENT_MAX_LEN + 16], id[LEASE_ID_LEN + 1], grace[24];
        int r;

        if (!reply || conn != a->cmd)
                return;
        a->master_run_id[0] = '\0';
        if (redis_reply_string(reply, &s, &len) >= 0) {
                if ((p = memmem(s, len, "uptime_in_seconds:", 18)))
                        uptime = strtoll(p + 18, NULL, 10);
                if ((p = memmem(s, len, "run_id:", 7)) && (size_t) (s + len - p) > 7 + 40 &&
                    strspn(p + 7, "0123456789abcdef") == 40) {
                        memcpy(a->master_run_id, p + 7, 40);
                        a->master_run_id[40] = '\0';
                }
        }
        /* Whole seconds, rounded down: the grace is never too short. Under
         * Sentinel a new master means a failover, which may have lost the
         * last writes: a whole lease from now. */
        grace_ms = uptime >= 0 && (uint64_t) uptime * 1000 < ttl_ms ? ttl_ms - (uint64_t) uptime * 1000 : 0;
        if (a->config->redis.master_name)
                /* With WAIT, every grant told to a holder is on the replica
                 * that took over, with an expiry no earlier than its agent
                 * stops believing in it; agents hear of the failover at once
                 * and re-assert: a second covers that. Without WAIT the
                 * failover may have lost grants: a whole lease. */
                grace_ms = a->config->min_replicas_acked > 0 ? MIN(ttl_ms, (uint64_t) 1000) : ttl_ms;
        r = lease_id_new(id);
        if (r < 0) {
                redis_went_down(a, r, "cannot make an epoch id");
                return;
        }
        snprintf(key, sizeof(key), "%s:epoch", a->config->key_prefix);
        snprintf(grace, sizeof(grace), "%" PRIu64, grace_ms);
        /* Under Sentinel the epoch belongs to one master: another one (a
         * failover) starts a new epoch, which every agent takes as a reset. */
        if (script_call_argv(a, SCRIPT_EPOCH, epoch_reply, a, 1, 4,
                             (const char *[]) { key, id, grace, a->config->redis.master_name ? a->master_run_id : "" }, NULL) < 0)
                redis_went_down(a, -EIO, "cannot send commands");
}

static void role_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Agent *a = userdata;
        char role[16] = "";

        if (!reply || conn != a->cmd)
                return;
        (void) redis_reply_array_string(reply, 0, role, sizeof(role));
        if (!streq(role, "master")) {
                char why[400];

                snprintf(why, sizeof(why), "%s is not a master (ROLE says \"%s\")", a->master_name, role);
                redis_went_down(a, -EAGAIN, why);
                return;
        }
        if (redis_conn_command(a->cmd, info_reply, a, 2, (const char *[]) { "INFO", "server" }, NULL) < 0)
                redis_went_down(a, -EIO, "cannot send commands");
}

static void setup_done(Agent *a) {
        /* What a Sentinel names may be stale: the server itself says. */
        if (a->config->redis.master_name) {
                if (redis_conn_command(a->cmd, role_reply, a, 1, (const char *[]) { "ROLE" }, NULL) < 0)
                        redis_went_down(a, -EIO, "cannot send commands");
                return;
        }
        if (redis_conn_command(a->cmd, info_reply, a, 2, (const char *[]) { "INFO", "server" }, NULL) < 0)
                redis_went_down(a, -EIO, "cannot send commands");
}

static int auth_argv(const Agent *a, const char *argv[3]) {
        const RedisAddress *r = &a->config->redis;

        argv[0] = "AUTH";
        if (r->user) {
                argv[1] = r->user;
                argv[2] = r->password ?: "";
                return 3;
        }
        argv[1] = r->password;
        return 2;
}

static void on_cmd_state(RedisConn *conn, int error, const char *message, void *userdata) {
        Agent *a = userdata;
        char db[16];

        if (conn != a->cmd)
                return;
        if (error < 0) {
                /* A refused AUTH says more than the connection Redis then
                 * closes (it drops unauthenticated clients that send a
                 * large bulk: the scripts sent behind the AUTH). */
                char why[sizeof(a->redis_error)];

                snprintf(why, sizeof(why), "%s", a->setup_failed ? a->redis_error : message ? message : "");
                redis_went_down(a, error, why);
                return;
        }
        a->setup_pending = 0;
        a->setup_failed = false;
        if (a->config->redis.password) {
                const char *argv[3];

                setup_send(a, "AUTH", -1, auth_argv(a, argv), argv);
        }
        if (a->config->redis.db > 0) {
                snprintf(db, sizeof(db), "%u", a->config->redis.db);
                setup_send(a, "SELECT", -1, 2, (const char *[]) { "SELECT", db });
        }
        for (int i = 0; i < N_SCRIPTS; i++)
                setup_send(a, "SCRIPT LOAD", i, 3, (const char *[]) { "SCRIPT", "LOAD", a->script_text[i] });
        if (a->setup_pending == 0)
                redis_went_down(a, -EIO, "cannot send commands");
}

static void on_sub_state(RedisConn *conn, int error, const char *message, void *userdata) {
        Agent *a = userdata;

        if (conn != a->sub)
                return;
        if (error < 0) {
                log_debug("Pub/sub connection to Redis lost: %s", message);
                redis_conn_free(a->sub);
                a->sub = NULL;
                a->sub_ready = false;
                if (a->cmd)
                        schedule_reconnect(a);
                return;
        }
        if (a->config->redis.password) {
                const char *argv[3];

                (void) redis_conn_command(a->sub, fire_and_forget_reply, (void *) "AUTH", auth_argv(a, argv), argv, NULL);
        }
        redis_conn_set_message_handler(a->sub, on_wake, a);
        a->sub_ready = true;
        a->sub_generation++;
        for (Name *n = a->slots.names; n; n = n->all_next)
                if (n->n_waiting > 0)
                        io_name_waiting(a, n);
}

/* ---- Sentinel ---------------------------------------------------------------------- */

/* Two kinds of connection to the Sentinels: one that stays, subscribed to
 * +switch-master, so a failover is followed the moment it is decided; and
 * one made to ask for the master's address whenever it is not known. */

static bool sentinel_mode(const Agent *a) {
        return a->config->redis.master_name != NULL;
}

static void connect_all(Agent *a);

static const RedisHost *sentinel_host(const Agent *a, unsigned i) {
        return &a->config->redis.sentinels[i % a->config->redis.n_sentinels];
}

static void sentinel_drop(Agent *a, RedisConn **c) {
        RedisConn *old = *c;

        /* Detached first: freeing runs its callbacks with NULL. */
        *c = NULL;
        if (c == &a->sentinel)
                a->sentinel_subscribed = false;
        redis_conn_free(old);
}

/* Forgets the master: the next connection asks the Sentinels again. */
static void master_forget(Agent *a) {
        a->master.host = mfree(a->master.host);
}

static int master_set(Agent *a, const char *host, const char *port_s) {
        uint64_t port;

        if (parse_uint64(port_s, 1, 65535, &port) < 0 || !host[0] || strlen(host) > 253 ||
            strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:") != strlen(host))
                return -EBADMSG;
        free(a->master.host);
        a->master.host = strdup(host);
        if (!a->master.host)
                return -ENOMEM;
        a->master.port = (uint16_t) port;
        snprintf(a->master_name, sizeof(a->master_name), "%s%s%s:%u", strchr(host, ':') ? "[" : "", host,
                 strchr(host, ':') ? "]" : "", a->master.port);
        return 0;
}

static void sentinel_auth(Agent *a, RedisConn *c) {
        const char *pw = a->config->redis.sentinel_password;

        if (pw)
                (void) redis_conn_command(c, fire_and_forget_reply, (void *) "AUTH (Sentinel)", 2,
                                          (const char *[]) { "AUTH", pw }, NULL);
}

static void sentinel_watch(Agent *a);

static void on_switch_master(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Agent *a = userdata;
        char kind[16], msg[600], name[NAME_MAX_LEN + 1], oldh[256], oldp[8], newh[256], newp[8];

        if (conn != a->sentinel)
                return;
        if (!reply) {
                log_warning("Lost the connection to Sentinel %s:%u; watching through the next one.",
                            sentinel_host(a, a->sentinel_next)->host, sentinel_host(a, a->sentinel_next)->port);
                sentinel_drop(a, &a->sentinel);
                a->sentinel_next++;
                sentinel_watch(a);
                return;
        }
        if (redis_reply_array_len(reply) != 3 || redis_reply_array_string(reply, 0, kind, sizeof(kind)) < 0 ||
            !streq(kind, "message") || redis_reply_array_string(reply, 2, msg, sizeof(msg)) < 0)
                return;
        /* "<master-name> <old-ip> <old-port> <new-ip> <new-port>" */
        if (sscanf(msg, "%200s %255s %7s %255s %7s", name, oldh, oldp, newh, newp) != 5 ||
            !streq(name, a->config->redis.master_name))
                return;
        if (master_set(a, newh, newp) < 0)
                return;
        log_warning("Sentinel: the master %s moved from %s:%s to %s; following it (a failover counts as a reset: "
                    "holders are re-asserted, and nobody is granted anything for a while).", name, oldh, oldp,
                    a->master_name);
        {
                RedisConn *c = a->cmd, *s = a->sub;

                /* Off the old master now (both connections), and onto the
                 * new one at once. */
                a->cmd = a->sub = NULL;
                a->sub_ready = false;
                redis_conn_free(c);
                redis_conn_free(s);
                if (a->state == REDIS_READY)
                        slots_redis_down(&a->slots, "the master changed (Sentinel failover)", now_mono());
                if (a->state != REDIS_DOWN)
                        a->state = REDIS_CONNECTING;
                status_mark_dirty(a);
        }
        a->backoff = 0;
        connect_all(a);
}

static void on_sentinel_watch_state(RedisConn *conn, int error, const char *message, void *userdata) {
        Agent *a = userdata;

        if (conn != a->sentinel)
                return;
        if (error < 0) {
                log_warning("Failed to reach Sentinel %s:%u: %s", sentinel_host(a, a->sentinel_next)->host,
                            sentinel_host(a, a->sentinel_next)->port, message);
                sentinel_drop(a, &a->sentinel);
                a->sentinel_next++;
                return;         /* watched again on the next reconnect or tick */
        }
        sentinel_auth(a, conn);
        redis_conn_set_message_handler(conn, on_switch_master, a);
        if (redis_conn_subscribe(conn, "+switch-master") >= 0)
                a->sentinel_subscribed = true;
}

static void sentinel_watch(Agent *a) {
        const RedisHost *h = sentinel_host(a, a->sentinel_next);
        RedisAddress addr = { .host = h->host, .port = h->port };

        if (a->sentinel)
                return;
        if (redis_conn_new(a->event, &addr, CONNECT_TIMEOUT, on_sentinel_watch_state, a, &a->sentinel) < 0) {
                a->sentinel = NULL;
                a->sentinel_next++;
        }
}

static void sentinel_master_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Agent *a = userdata;
        char host[256], port[8];

        if (conn != a->sentinel_query)
                return;
        if (!reply || redis_reply_error(reply) || redis_reply_array_len(reply) != 2 ||
            redis_reply_array_string(reply, 0, host, sizeof(host)) < 0 ||
            redis_reply_array_string(reply, 1, port, sizeof(port)) < 0 || master_set(a, host, port) < 0) {
                log_warning("Sentinel %s:%u does not name master %s%s%s; asking the next one.",
                            sentinel_host(a, a->sentinel_query_next)->host, sentinel_host(a, a->sentinel_query_next)->port,
                            a->config->redis.master_name, redis_reply_error(reply) ? ": " : "",
                            redis_reply_error(reply) ?: "");
                sentinel_drop(a, &a->sentinel_query);
                a->sentinel_query_next++;
                redis_went_down(a, -EHOSTUNREACH, "no Sentinel named the master");
                return;
        }
        sentinel_drop(a, &a->sentinel_query);
        connect_all(a);
}

static void on_sentinel_query_state(RedisConn *conn, int error, const char *message, void *userdata) {
        Agent *a = userdata;

        if (conn != a->sentinel_query)
                return;
        if (error < 0) {
                log_warning("Failed to reach Sentinel %s:%u: %s", sentinel_host(a, a->sentinel_query_next)->host,
                            sentinel_host(a, a->sentinel_query_next)->port, message);
                sentinel_drop(a, &a->sentinel_query);
                a->sentinel_query_next++;
                redis_went_down(a, error, "no Sentinel answered");
                return;
        }
        sentinel_auth(a, conn);
        if (redis_conn_command(conn, sentinel_master_reply, a, 3,
                               (const char *[]) { "SENTINEL", "get-master-addr-by-name", a->config->redis.master_name },
                               NULL) < 0)
                redis_went_down(a, -EIO, "cannot ask the Sentinel");
}

static void sentinel_ask(Agent *a) {
        const RedisHost *h = sentinel_host(a, a->sentinel_query_next);
        RedisAddress addr = { .host = h->host, .port = h->port };
        int k;

        if (a->sentinel_query)
                return;
        k = redis_conn_new(a->event, &addr, CONNECT_TIMEOUT, on_sentinel_query_state, a, &a->sentinel_query);
        if (k < 0) {
                a->sentinel_query = NULL;
                a->sentinel_query_next++;
                redis_went_down(a, k, "cannot connect to a Sentinel");
        }
}

/* Where the data connections go: the configured server, or the master the
 * Sentinels named. */
static const RedisAddress *data_address(Agent *a) {
        static RedisAddress addr;

        if (!sentinel_mode(a))
                return &a->config->redis;
        addr = (RedisAddress) { .host = a->master.host, .port = a->master.port };
        return &addr;
}

static void connect_all(Agent *a) {
        int r;

        if (sentinel_mode(a)) {
                sentinel_watch(a);
                if (!a->master.host) {
                        sentinel_ask(a);
                        if (a->state != REDIS_DOWN)
                                a->state = REDIS_CONNECTING;
                        return;         /* connect_all() again once a Sentinel named it */
                }
        }
        if (!a->cmd) {
                if (a->state != REDIS_DOWN)
                        a->state = REDIS_CONNECTING;
                a->setup_failed = false;
                r = redis_conn_new(a->event, data_address(a), CONNECT_TIMEOUT, on_cmd_state, a, &a->cmd);
                if (r < 0) {
                        a->cmd = NULL;
                        redis_went_down(a, r, NULL);
                        return;
                }
        }
        if (!a->sub) {
                r = redis_conn_new(a->event, data_address(a), CONNECT_TIMEOUT, on_sub_state, a, &a->sub);
                if (r < 0) {
                        a->sub = NULL;
                        schedule_reconnect(a);
                }
        }
}

static int on_reconnect(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s;
        (void) usec;
        connect_all(userdata);
        return 0;
}

/* A Redis that hangs (stopped, swapping) counts as gone after a third of
 * the lease, within 1s to 5s: soon enough to tell holders in time. */
static usec_t command_timeout(const Agent *a) {
        usec_t t = a->config->lease_ttl / 3;

        return t < USEC_PER_SEC ? USEC_PER_SEC : t > COMMAND_TIMEOUT ? COMMAND_TIMEOUT : t;
}

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        Agent *a = userdata;
        usec_t now = now_mono();

        (void) usec;
        client_sweep(a);
        if (sentinel_mode(a))
                sentinel_watch(a);      /* after the watching Sentinel went */
        if (a->cmd && redis_conn_pending(a->cmd) > 0 && now - redis_conn_last_activity(a->cmd) > command_timeout(a)) {
                char why[64], buf[FORMAT_DURATION_MAX];

                snprintf(why, sizeof(why), "Redis did not answer for %s",
                         format_duration(buf, sizeof(buf), command_timeout(a)));
                redis_went_down(a, -ETIMEDOUT, why);
        }
        (void) sd_event_source_set_time_relative(s, slots_tick(&a->slots, now));
        return 0;
}

/* ---- Start and stop ------------------------------------------------------------------ */

int redis_io_start(Agent *a) {
        size_t prelude = strlen(lua_prelude);
        int r;

        for (int i = 0; i < N_SCRIPTS; i++) {
                size_t n = strlen(lua_scripts[i]);

                a->script_text[i] = malloc(prelude + n + 2);
                if (!a->script_text[i])
                        return log_error_errno(ENOMEM, "Out of memory.");
                memcpy(a->script_text[i], lua_prelude, prelude);
                a->script_text[i][prelude] = '\n';
                memcpy(a->script_text[i] + prelude + 1, lua_scripts[i], n + 1);
        }
        snprintf(a->host_key, sizeof(a->host_key), "%s:host:{%s}", a->config->key_prefix, a->config->host_id);
        snprintf(a->names_key, sizeof(a->names_key), "%s:names", a->config->key_prefix);
        redis_address_to_string(&a->config->redis, a->redis_name, sizeof(a->redis_name));

        r = sd_event_add_time_relative(a->event, &a->reconnect_source, CLOCK_MONOTONIC, 0, 0, on_reconnect, a);
        if (r >= 0)
                r = sd_event_source_set_enabled(a->reconnect_source, SD_EVENT_OFF);
        if (r >= 0)
                r = sd_event_add_time_relative(a->event, &a->tick_source, CLOCK_MONOTONIC, a->config->lease_ttl / 3, 0, on_tick, a);
        if (r >= 0)
                r = sd_event_source_set_enabled(a->tick_source, SD_EVENT_ON);
        if (r < 0)
                return log_error_errno(r, "Failed to set up timers: %m");

        a->state = REDIS_CONNECTING;
        connect_all(a);
        return 0;
}

void redis_io_stop(Agent *a) {
        a->state = REDIS_DOWN;
        batch_flush_all(a);             /* their callbacks hear Redis went */
        a->batch_source = sd_event_source_disable_unref(a->batch_source);
        redis_conn_free(a->cmd);
        redis_conn_free(a->sub);
        a->cmd = a->sub = NULL;
        sentinel_drop(a, &a->sentinel);
        sentinel_drop(a, &a->sentinel_query);
        master_forget(a);
        a->reconnect_source = sd_event_source_disable_unref(a->reconnect_source);
        a->tick_source = sd_event_source_disable_unref(a->tick_source);
        for (int i = 0; i < N_SCRIPTS; i++)
                a->script_text[i] = mfree(a->script_text[i]);
}
