/* SPDX-License-Identifier: MIT */
/* Redis for the agent: the servers it talks to (one, the master the
 * Sentinels name, or each master of a Cluster: a "shard" each), their
 * command and pub/sub connections, calls routed to the shard that holds
 * their keys (following MOVED and ASK), script calls (with a NOSCRIPT
 * retry), the epoch that tells a Redis that lost its state, and the
 * engine's script calls with their replies checked and decoded before the
 * engine sees them. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
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
#define IDLE_NEW_MS (10ULL * 60 * 1000)
#define REDIRECTS_MAX 5                 /* MOVED and ASK followed for one call */
#define TRYAGAIN_DELAY (20 * USEC_PER_MSEC)     /* TRYAGAIN (a slot half migrated): again that soon */
#define NO_WAIT_WAIT_TIMEOUT (500 * USEC_PER_MSEC)      /* WAIT for a request that would not wait */
#define RENEW_ACCURACY (1 * USEC_PER_MSEC)              /* how late the renewal tick may fire */
#define FAILOVER_GRACE_WAIT (500 * USEC_PER_MSEC)       /* grace after a failover, grants confirmed by WAIT */

static const char *const script_name[N_SCRIPTS] = {
        [SCRIPT_ACQUIRE] = "acquire", [SCRIPT_RELEASE] = "release", [SCRIPT_RENEW] = "renew",
        [SCRIPT_REASSERT] = "reassert", [SCRIPT_ADOPT] = "adopt", [SCRIPT_STATUS] = "status",
        [SCRIPT_EPOCH] = "epoch", [SCRIPT_BATCH] = "batch",
};

typedef struct Call Call;

/* One Redis server and what the agent knows of it. Standalone and under
 * Sentinel there is one; a Cluster has one per master, each owning the
 * hash slots the map gives it (a->slot_shard). */
typedef struct Shard {
        Agent *agent;
        uint8_t index;
        char *host;                     /* cluster: the node; otherwise unused */
        uint16_t port;
        char name[300];                 /* "host:port", for logs and status */
        RedisConn *cmd, *sub;
        RedisState state;
        bool sub_ready;
        unsigned setup_pending;         /* replies awaited before READY */
        bool setup_failed;
        char error[256];
        char epoch[LEASE_ID_LEN + 1];   /* the Redis state this agent knows ("" before the first) */
        uint64_t grace_until_ms;        /* Redis clock: nobody is granted anything before */
        char run_id[48];
        Call *parked;                   /* calls redirected here before it was up */
        size_t n_slots;                 /* cluster: hash slots the map gives it */
        int n_replicas;                 /* replicas attached, as ROLE last said (-1: not asked) */
        int epoch_slot;                 /* cluster: the slot its epoch key is in (-1: none yet) */
        usec_t backoff;                 /* after it went: how long before it is tried again */
        usec_t retry_at;                /* CLOCK_MONOTONIC: not connected to before */
        unsigned map_pass;              /* cluster: the last map that named it (a->map_pass) */
} Shard;

static Agent *agent_of(void *ctx) {
        return ctx;
}

static bool cluster_mode(const Agent *a) {
        return a->config->redis.cluster;
}

/* A host name or address as a peer may give it: what hiredis is asked to
 * connect to, nothing else. */
static bool host_is_valid(const char *host) {
        return host[0] && strlen(host) <= 253 &&
               strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:") == strlen(host);
}

static bool sentinel_mode(const Agent *a) {
        return a->config->redis.master_name != NULL;
}

static unsigned name_slot(const char *name) {
        return redis_key_slot(name, strlen(name));
}

/* The shard that holds a hash slot's keys; NULL while the map has none. */
static Shard *shard_of_slot(Agent *a, unsigned slot) {
        if (!cluster_mode(a))
                return a->shards[0];
        if (!a->slot_shard || a->slot_shard[slot] == SLOT_NONE)
                return NULL;
        return a->shards[a->slot_shard[slot]];
}

static Shard *shard_of_name(Agent *a, const char *name) {
        return shard_of_slot(a, name_slot(name));
}

uint64_t redis_grace_until(Agent *a, const char *name) {
        Shard *sh = shard_of_name(a, name);

        return sh ? sh->grace_until_ms : 0;
}

static void map_refresh_soon(Agent *a);
static Shard *shard_get(Agent *a, const char *host, uint16_t port);

/* ---- Calls ---------------------------------------------------------------------------
 * A command with its own copy of its arguments, sent to the shard that
 * holds its keys, and sent again where Redis says: after MOVED (the map
 * changed: asked for again) and ASK (one slot half migrated: once, after
 * ASKING), a little later after TRYAGAIN, and in full after NOSCRIPT. */

struct Call {
        Agent *agent;
        LIST_FIELDS(Call, parked);
        int script;                     /* a Script, or -1: a plain command */
        bool full_text;                 /* EVAL, not EVALSHA */
        unsigned slot;
        Shard *fixed;                   /* sent there whatever the map says (set-up) */
        Shard *ask;                     /* ASK: this once, there, after ASKING */
        unsigned redirects;
        usec_t tryagain_since;          /* the first TRYAGAIN, CLOCK_MONOTONIC (0: none) */
        sd_event_source *retry;
        redis_reply_cb cb;
        void *userdata;
        int argc;
        const char **argv;
        size_t *argvlen;
};

static void call_reply(RedisConn *conn, const RedisReply *reply, void *userdata);

static void call_free(Call *c) {
        sd_event_source_disable_unref(c->retry);
        free(c);
}

/* The call's answer, to its caller: NULL when Redis went before it came. */
static void call_done(Call *c, RedisConn *conn, const RedisReply *reply) {
        c->cb(conn, reply, c->userdata);
        call_free(c);
}

static void fire_and_forget_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        const char *err = redis_reply_error(reply);

        (void) conn;
        if (err)
                log_warning("Redis refused %s: %s", (const char *) userdata, err);
}

static void shard_park(Shard *sh, Call *c) {
        LIST_PREPEND(parked, sh->parked, c);
}

/* Sends c where it goes; -ENOTCONN when that shard is not up (or not
 * known), and then c is not sent. */
static int call_send(Call *c) {
        Agent *a = c->agent;
        Shard *sh = c->fixed ?: c->ask ?: shard_of_slot(a, c->slot);

        if (!sh || !sh->cmd || (!c->fixed && sh->state != REDIS_READY))
                return -ENOTCONN;
        if (c->script >= 0) {
                c->argv[0] = c->full_text ? "EVAL" : "EVALSHA";
                c->argv[1] = c->full_text ? a->script_text[c->script] : a->sha[c->script];
                c->argvlen[0] = strlen(c->argv[0]);
                c->argvlen[1] = strlen(c->argv[1]);
        }
        if (c->ask && redis_conn_command(sh->cmd, fire_and_forget_reply, (void *) "ASKING", 1,
                                         (const char *[]) { "ASKING" }, NULL) < 0)
                return -ENOTCONN;
        return redis_conn_command(sh->cmd, call_reply, c, c->argc, c->argv, c->argvlen);
}

/* Sends c again; when it cannot go, its caller hears Redis went. */
static void call_resend(Call *c, RedisConn *conn) {
        if (call_send(c) < 0)
                call_done(c, conn, NULL);
}

static int on_call_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        Call *c = userdata;

        (void) s;
        (void) usec;
        call_resend(c, NULL);
        return 0;
}

/* c again in TRYAGAIN_DELAY, on the one timer it keeps for that. */
static int call_retry_later(Call *c) {
        if (!c->retry)
                return sd_event_add_time_relative(c->agent->event, &c->retry, CLOCK_MONOTONIC, TRYAGAIN_DELAY, 0,
                                                  on_call_retry, c);
        if (sd_event_source_set_time_relative(c->retry, TRYAGAIN_DELAY) < 0)
                return -EIO;
        return sd_event_source_set_enabled(c->retry, SD_EVENT_ONESHOT);
}

/* "MOVED 3999 127.0.0.1:6381" and "ASK …": the slot and where it is now. */
static Shard *redirect_target(Agent *a, const char *err, unsigned *ret_slot) {
        char host[256], port_s[8];
        const char *sp, *colon;
        uint64_t slot, port;
        size_t hl;

        sp = strchr(err, ' ');
        if (!sp)
                return NULL;
        sp = strchr(sp + 1, ' ');
        colon = sp ? strrchr(sp + 1, ':') : NULL;
        if (!sp || !colon || (hl = (size_t) (colon - sp - 1)) == 0 || hl >= sizeof(host) || strlen(colon + 1) >= sizeof(port_s))
                return NULL;
        {
                char slot_s[8];
                const char *w = strchr(err, ' ') + 1;

                if ((size_t) (sp - w) >= sizeof(slot_s))
                        return NULL;
                memcpy(slot_s, w, (size_t) (sp - w));
                slot_s[sp - w] = '\0';
                if (parse_uint64(slot_s, 0, REDIS_CLUSTER_SLOTS - 1, &slot) < 0)
                        return NULL;
        }
        memcpy(host, sp + 1, hl);
        host[hl] = '\0';
        strcpy(port_s, colon + 1);
        if (parse_uint64(port_s, 1, 65535, &port) < 0)
                return NULL;
        *ret_slot = (unsigned) slot;
        return shard_get(a, host, (uint16_t) port);
}

static void call_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Call *c = userdata;
        Agent *a = c->agent;
        const char *err = redis_reply_error(reply);
        unsigned slot;
        Shard *to;

        c->ask = NULL;
        if (!err)
                goto done;
        if (strneq(err, "NOSCRIPT", 8) && c->script >= 0 && !c->full_text) {
                /* The server lost our scripts (SCRIPT FLUSH, a restart): load
                 * this one again for the calls to come, and send this call's
                 * text in full. */
                const char *load[] = { "SCRIPT", "LOAD", a->script_text[c->script] };

                log_warning("Redis does not know the %s script any more; loading it again.", script_name[c->script]);
                (void) redis_conn_command(conn, fire_and_forget_reply, (void *) "SCRIPT LOAD", 3, load, NULL);
                c->full_text = true;
                call_resend(c, conn);
                return;
        }
        if (!cluster_mode(a) || c->fixed)
                goto done;
        if ((strneq(err, "MOVED ", 6) || strneq(err, "ASK ", 4)) && c->redirects < REDIRECTS_MAX &&
            (to = redirect_target(a, err, &slot)) && slot == c->slot) {
                c->redirects++;
                if (err[0] == 'M') {
                        /* The slot lives elsewhere now: there from now on, and
                         * the whole map asked for again. */
                        a->slot_shard[slot] = to->index;
                        map_refresh_soon(a);
                } else
                        c->ask = to;
                if (to->state == REDIS_CONNECTING && !c->ask) {
                        shard_park(to, c);      /* sent when it is up */
                        return;
                }
                call_resend(c, conn);
                return;
        }
        if (strneq(err, "TRYAGAIN", 8)) {
                /* The slot is being migrated: Redis serves a script on it
                 * once all its keys are on one node. Again and again, for
                 * a third of a lease; then as if Redis had gone (asked
                 * again later, renewed on the next round). */
                usec_t now = now_mono();

                if (c->tryagain_since == 0)
                        c->tryagain_since = now;
                if (now - c->tryagain_since < a->config->lease_ttl / 3 && call_retry_later(c) >= 0)
                        return;
                call_done(c, conn, NULL);
                return;
        }
        if (strneq(err, "CLUSTERDOWN", 11) || strneq(err, "MOVED ", 6) || strneq(err, "ASK ", 4))
                map_refresh_soon(a);
done:
        call_done(c, conn, reply);
}

/* A call with n_keys keys, then the other args (argv[0] and [1] left for
 * the script's EVALSHA and sha); the call keeps its own copy of it all. */
static Call *call_new(Agent *a, int script, redis_reply_cb cb, void *userdata, size_t n_keys, size_t n_args,
                      const char *const *args, const size_t *arglens) {
        size_t head = script >= 0 ? 3 : 0, argc = head + n_args, data_size = 16;
        Call *c;
        char *p;

        for (size_t i = 0; i < n_args; i++)
                data_size += (arglens ? arglens[i] : strlen(args[i])) + 1;
        c = malloc(sizeof(*c) + argc * (sizeof(char *) + sizeof(size_t)) + data_size);
        if (!c)
                return NULL;
        *c = (Call) {
                .agent = a, .script = script, .cb = cb, .userdata = userdata, .argc = (int) argc,
                .argv = (const char **) (c + 1),
        };
        c->argvlen = (size_t *) (c->argv + argc);
        p = (char *) (c->argvlen + argc);
        if (script >= 0) {
                c->argv[2] = p;
                c->argvlen[2] = (size_t) sprintf(p, "%zu", n_keys);
                p += c->argvlen[2] + 1;
        }
        for (size_t i = 0; i < n_args; i++) {
                size_t n = arglens ? arglens[i] : strlen(args[i]);

                memcpy(p, args[i], n);
                p[n] = '\0';
                c->argv[head + i] = p;
                c->argvlen[head + i] = n;
                p += n + 1;
        }
        /* Where its first key lives. */
        if (n_args > 0 && (script < 0 || n_keys > 0))
                c->slot = redis_key_slot(c->argv[head + (script < 0 ? 1 : 0)],
                                         c->argvlen[head + (script < 0 ? 1 : 0)]);
        return c;
}

static int call_start(Call *c) {
        int r;

        if (!c)
                return -ENOMEM;
        r = call_send(c);
        if (r < 0)
                call_free(c);
        return r;
}

/* EVALSHA with n_keys keys (all in one hash slot), then the other args. */
static int script_call_argv(Agent *a, Script script, redis_reply_cb cb, void *userdata, size_t n_keys,
                            size_t n_args, const char *const *args, const size_t *arglens) {
        return call_start(call_new(a, (int) script, cb, userdata, n_keys, n_args, args, arglens));
}

/* The same on one shard, whatever its state and the map (set-up). */
static int shard_script_call(Shard *sh, Script script, redis_reply_cb cb, void *userdata, size_t n_keys,
                             size_t n_args, const char *const *args) {
        Call *c = call_new(sh->agent, (int) script, cb, userdata, n_keys, n_args, args, NULL);

        if (c)
                c->fixed = sh;
        return call_start(c);
}

int redis_key_command(Agent *a, redis_reply_cb cb, void *userdata, int argc, const char *const *argv) {
        if (a->state != REDIS_READY || argc < 2)
                return -ENOTCONN;
        return call_start(call_new(a, -1, cb, userdata, 0, (size_t) argc, argv, NULL));
}

/* Keys of name: the name's own, then the fleet's clock key (in a Cluster,
 * one per hash slot: "P:clock:{TAG}", TAG in the name's slot). */
static int script_call_now(Agent *a, Script script, const char *name, redis_reply_cb cb, void *userdata,
                           size_t n_args, const char *const *args, const size_t *arglens) {
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
                int n;

                if (i < N_KEYS)
                        n = snprintf(keys[i], sizeof(keys[i]), "%s:{%s}:%s", a->config->key_prefix, name, key_suffix[i]);
                else if (cluster_mode(a))
                        n = snprintf(keys[i], sizeof(keys[i]), "%s:clock:{%s}", a->config->key_prefix,
                                     redis_slot_tag(name_slot(name)));
                else
                        n = snprintf(keys[i], sizeof(keys[i]), "%s:clock", a->config->key_prefix);
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
#define BATCH_WAIT_MAX (2 * USEC_PER_MSEC)

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
                        c->cb(NULL, NULL, c->userdata);
                batch_free(b);
                return;
        }
        if (script_call_now(a, SCRIPT_BATCH, b->name, batch_reply, b, b->n_args, (const char *const *) b->args,
                            b->lens) < 0)
                batch_reply(NULL, NULL, b);
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
        if (a->batch_deadline)
                (void) sd_event_source_set_enabled(a->batch_deadline, SD_EVENT_OFF);
}

static int on_batch_turn(sd_event_source *s, void *userdata) {
        (void) s;
        batch_flush_all(userdata);
        return 0;
}

static int on_batch_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s;
        (void) usec;
        batch_flush_all(userdata);
        return 0;
}

/* A batch goes once the requests ready are read (the defer runs after the
 * clients' events, before new connections), and at the latest
 * BATCH_WAIT_MAX after its first call, at the priority of renewals: a
 * client that keeps the loop busy delays no renewal or release longer. */
static int batch_sources_add(Agent *a) {
        int r;

        if (a->batch_source)
                return 0;
        r = sd_event_add_defer(a->event, &a->batch_source, on_batch_turn, a);
        if (r < 0)
                return r;
        r = sd_event_source_set_priority(a->batch_source, PRIORITY_BATCH);
        if (r >= 0)
                r = sd_event_source_set_enabled(a->batch_source, SD_EVENT_OFF);
        if (r >= 0)
                r = sd_event_add_time_relative(a->event, &a->batch_deadline, CLOCK_MONOTONIC, BATCH_WAIT_MAX, 0,
                                               on_batch_deadline, a);
        if (r >= 0)
                r = sd_event_source_set_priority(a->batch_deadline, PRIORITY_LEASES);
        if (r >= 0)
                r = sd_event_source_set_enabled(a->batch_deadline, SD_EVENT_OFF);
        if (r < 0) {
                a->batch_source = sd_event_source_disable_unref(a->batch_source);
        a->batch_deadline = sd_event_source_disable_unref(a->batch_deadline);
                a->batch_deadline = sd_event_source_disable_unref(a->batch_deadline);
        }
        return r;
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

        if (a->state != REDIS_READY)
                return -ENOTCONN;
        r = batch_sources_add(a);
        if (r < 0)
                return r;
        if (!a->batches) {
                (void) sd_event_source_set_enabled(a->batch_source, SD_EVENT_ONESHOT);
                if (sd_event_source_set_time_relative(a->batch_deadline, BATCH_WAIT_MAX) >= 0)
                        (void) sd_event_source_set_enabled(a->batch_deadline, SD_EVENT_ONESHOT);
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
        return 0;
}

/* Acquires, releases, renewals and adoptions wait for the end of the
 * loop's turn; anything else on the name goes after what waits, at once. */
int script_call(Agent *a, Script script, const char *name, redis_reply_cb cb, void *userdata,
                size_t n_args, const char *const *args, const size_t *arglens) {
        if (script == SCRIPT_ACQUIRE || script == SCRIPT_RELEASE || script == SCRIPT_RENEW || script == SCRIPT_ADOPT)
                return batch_add(a, script, name, cb, userdata, n_args, args, arglens);
        batch_flush_name(a, name);
        return script_call_now(a, script, name, cb, userdata, n_args, args, arglens);
}

void redis_command(Agent *a, const char *what, int argc, const char *const *argv) {
        (void) redis_key_command(a, fire_and_forget_reply, (void *) what, argc, argv);
}

/* What every script on name is told besides its own arguments: idle is
 * how long the name stays in Redis after a renewal (idle_time), idle_new
 * after a request or a release (IDLE_NEW_MS, at most idle_time): a name
 * nobody ever held for a third of a lease leaves Redis within minutes, so
 * names made in a loop do not pile up for a day. */
typedef struct CommonArgs {
        char ttl[24], uid[16], grace[24], idle[24], idle_new[24];
} CommonArgs;

static void common_args(Agent *a, const char *name, uid_t uid, CommonArgs *c) {
        snprintf(c->ttl, sizeof(c->ttl), "%" PRIu64, a->config->lease_ttl / USEC_PER_MSEC);
        snprintf(c->uid, sizeof(c->uid), UID_FMT, uid);
        snprintf(c->grace, sizeof(c->grace), "%" PRIu64, redis_grace_until(a, name));
        uint64_t idle = a->config->idle_time ? a->config->idle_time / USEC_PER_MSEC : IDLE_DEFAULT_MS;

        snprintf(c->idle, sizeof(c->idle), "%" PRIu64, idle);
        snprintf(c->idle_new, sizeof(c->idle_new), "%" PRIu64, MIN(idle, (uint64_t) IDLE_NEW_MS));
}

/* ---- The engine's calls: acquire ------------------------------------------------- */

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
} GrantWait;

static Shard *shard_of_conn(Agent *a, const RedisConn *conn) {
        for (size_t i = 0; i < a->n_shards; i++)
                if (a->shards[i]->cmd == conn)
                        return a->shards[i];
        return NULL;
}

/* Well under the time after which a silent Redis counts as hung (WAIT
 * blocks the connection it is sent on). */
static usec_t command_timeout(const Agent *a);
static usec_t wait_timeout(const Agent *a) {
        return MIN(command_timeout(a) / 2, USEC_PER_SEC);
}

/* The engine hears how the grant gw waited for ended: r (NULL: Redis went
 * before it said; asked again on the next master). */
static void grant_wait_done(GrantWait *gw, const AcquireResult *r) {
        slots_acquire_done(&gw->agent->slots, gw->lease, r, now_mono());
        free(gw);
}

/* The grant was not confirmed: given back, and the request waits again
 * (or is denied, if it would not wait). */
static void grant_give_back(GrantWait *gw, const char *why) {
        Lease *l = gw->lease;

        if (l->state != LEASE_GONE)     /* (released meanwhile: given back already) */
                (void) io_call_release(gw->agent, l->name->name, l->id, l->uid);
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
        grant_give_back(gw, why);
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

static bool role_parse(Shard *sh, const RedisReply *reply);

/* ROLE, asked right after the grant on the same connection: how many
 * replicas the master has now. Each of them may have the grant only once
 * WAIT says so; one that attaches later copies it. With none now nor at
 * the last look, the grant is told at once: no failover can then promote
 * a replica that lacks it. */
static void grant_role_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        GrantWait *gw = userdata;
        Agent *a = gw->agent;
        Shard *sh = shard_of_conn(a, conn);
        int before;

        if (!reply) {
                grant_wait_done(gw, NULL);
                return;
        }
        before = sh ? sh->n_replicas : -1;
        if (!sh || !role_parse(sh, reply)) {
                grant_give_back(gw, "the server that granted it is no master any more (ROLE)");
                return;
        }
        gw->need = MIN(a->config->min_replicas_acked, MAX(before, sh->n_replicas));
        if (gw->need <= 0) {
                grant_wait_done(gw, &gw->result);
                return;
        }
        if (wait_send(gw, conn) < 0)
                grant_give_back(gw, "cannot ask the replicas");
}

/* On conn: the connection to the master that granted it. 0: the grant is
 * told once the replicas have it (or, under Sentinel and in a Cluster,
 * once ROLE says there are none); <0: the replicas cannot be asked. */
static int wait_for_replicas(Agent *a, RedisConn *conn, Lease *l, const AcquireResult *r) {
        GrantWait *gw;
        int k;

        gw = malloc(sizeof(*gw));
        if (!gw)
                return -ENOMEM;
        *gw = (GrantWait) { .agent = a, .lease = l, .need = a->config->min_replicas_acked, .result = *r };
        if (sentinel_mode(a) || cluster_mode(a))
                k = redis_conn_command(conn, grant_role_reply, gw, 1, (const char *[]) { "ROLE" }, NULL);
        else
                k = wait_send(gw, conn);
        if (k < 0) {
                free(gw);
                return -ENOTCONN;
        }
        return 0;
}

static void acquire_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Lease *l = userdata;
        Agent *a = agent_of(l->slots_engine->ctx);
        AcquireResult r = { .outcome = ACQUIRE_FAILED, .error = "unexpected reply from Redis", .next_expiry_ms = -1 };
        long long v[5] = {};
        size_t len = redis_reply_array_len(reply);

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
                if (wait_for_replicas(a, conn, l, &r) >= 0)
                        return;
                (void) io_call_release(a, l->name->name, l->id, l->uid);
                r = (AcquireResult) { .outcome = ACQUIRE_RETRY, .error = "cannot ask the replicas" };
        }
        slots_acquire_done(&a->slots, l, &r, now_mono());
}

int io_call_acquire(void *ctx, Lease *l) {
        Agent *a = agent_of(ctx);
        char slots[16];
        CommonArgs c;

        common_args(a, l->name->name, l->uid, &c);
        snprintf(slots, sizeof(slots), "%" PRIu32, l->slots);
        return script_call(a, SCRIPT_ACQUIRE, l->name->name, acquire_reply, l, 9,
                           (const char *[]) { l->id, slots, c.ttl, l->desc, a->config->host_id, c.uid, c.grace,
                                              c.idle_new, l->proof },
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
        common_args(a, name, uid, &c);
        r = script_call(a, SCRIPT_RELEASE, name, release_reply, rc, 5,
                        (const char *[]) { lease, a->config->host_id, c.uid, c.grace, c.idle_new }, NULL);
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
        common_args(a, n->name, 0, &c);
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

        common_args(a, l->name->name, l->uid, &c);
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

/* Subscribed on the pub/sub connection of the name's shard (sharded in a
 * Cluster); again whenever a subscription connection or the map changed. */
void io_name_waiting(void *ctx, Name *n) {
        Agent *a = agent_of(ctx);
        char channel[IDENT_MAX_LEN + NAME_MAX_LEN + 16];
        Shard *sh;
        int r;

        if (n->io_generation == a->sub_generation)
                return;
        sh = shard_of_name(a, n->name);
        if (!sh || !sh->sub_ready)
                return;
        snprintf(channel, sizeof(channel), "%s:{%s}:wake", a->config->key_prefix, n->name);
        r = cluster_mode(a) ? redis_conn_ssubscribe(sh->sub, channel) : redis_conn_subscribe(sh->sub, channel);
        if (r >= 0)
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
        /* "subscribe" too: a release may have come before the subscription.
         * In a Cluster, "smessage" and "ssubscribe". */
        if (!streq(kind, "message") && !streq(kind, "subscribe") && !streq(kind, "smessage") &&
            !streq(kind, "ssubscribe"))
                return;
        open = strchr(channel, '{');
        close = strrchr(channel, '}');
        if (!open || !close || close <= open + 1 || (size_t) (close - open - 1) > NAME_MAX_LEN)
                return;
        memcpy(name, open + 1, (size_t) (close - open - 1));
        name[close - open - 1] = '\0';
        if ((streq(kind, "message") || streq(kind, "smessage")) &&
            redis_reply_array_string(reply, 2, payload, sizeof(payload)) < 0)
                payload[0] = '\0';
        slots_wake(&a->slots, name, payload, now_mono());
}

/* ---- Connections ------------------------------------------------------------------ */

static usec_t backoff_next(usec_t b) {
        return b == 0 ? BACKOFF_MIN : MIN(b * 2, BACKOFF_MAX);
}

/* connect_all() in delay, or sooner if it is due sooner already. */
static void reconnect_in(Agent *a, usec_t delay) {
        uint64_t when = 0;
        int enabled = SD_EVENT_OFF;
        usec_t at = now_mono() + delay;

        (void) sd_event_source_get_enabled(a->reconnect_source, &enabled);
        if (enabled != SD_EVENT_OFF && sd_event_source_get_time(a->reconnect_source, &when) >= 0 && when <= at)
                return;
        (void) sd_event_source_set_time(a->reconnect_source, at);
        (void) sd_event_source_set_enabled(a->reconnect_source, SD_EVENT_ONESHOT);
}

/* For the Sentinels and the Cluster's map: one backoff for the agent. */
static void schedule_reconnect(Agent *a) {
        a->backoff = backoff_next(a->backoff);
        reconnect_in(a, a->backoff);
}

static void master_forget(Agent *a);

/* (In a Cluster, of those that own hash slots.) */
static bool any_shard_ready(const Agent *a) {
        for (size_t i = 0; i < a->n_shards; i++)
                if (a->shards[i]->state == REDIS_READY && (!cluster_mode(a) || a->shards[i]->n_slots > 0))
                        return true;
        return false;
}

/* Calls parked on sh hear that Redis went. */
static void shard_unpark(Shard *sh, bool send) {
        Call *c;

        while ((c = sh->parked)) {
                LIST_REMOVE(parked, sh->parked, c);
                if (send)
                        call_resend(c, sh->cmd);
                else
                        call_done(c, NULL, NULL);
        }
}

/* Drops sh's connections (their calls and the calls parked on it hear
 * Redis went) and leaves it in state. */
static void shard_disconnect(Shard *sh, RedisState state) {
        RedisConn *cmd = sh->cmd, *sub = sh->sub;

        /* Detached first: freeing runs their callbacks with NULL. */
        sh->cmd = sh->sub = NULL;
        sh->sub_ready = false;
        sh->state = state;
        redis_conn_free(cmd);
        redis_conn_free(sub);
        shard_unpark(sh, false);
}

/* sh's connections are gone (or it hangs, or it is not what it should
 * be): dropped, and made again after a backoff. Standalone and under
 * Sentinel that is Redis gone for the engine; in a Cluster only when no
 * shard is left up, else only the names sh holds are unreachable (their
 * calls fail, their holders are told in time when renewals fail). */
static void shard_down(Shard *sh, int error, const char *why) {
        Agent *a = sh->agent;
        char buf[FORMAT_DURATION_MAX];
        RedisState was = sh->state;

        snprintf(sh->error, sizeof(sh->error), "%s", why && why[0] ? why : strerror(-error));
        snprintf(a->redis_error, sizeof(a->redis_error), "%s%s%s", cluster_mode(a) ? sh->name : "",
                 cluster_mode(a) ? ": " : "", sh->error);
        shard_disconnect(sh, REDIS_DOWN);

        /* Tried again after a backoff of its own (a Cluster's other
         * masters keep theirs); the map is asked for again then too. */
        sh->backoff = backoff_next(sh->backoff);
        sh->retry_at = now_mono() + sh->backoff;
        if (was == REDIS_READY)
                log_warning("Lost connection to Redis at %s: %s; held slots stay anchored, retrying.",
                            cluster_mode(a) ? sh->name : a->redis_name, sh->error);
        else if (was == REDIS_CONNECTING || sh->backoff >= BACKOFF_MAX)
                log_warning("Failed to connect to Redis at %s: %s; retrying in %s.",
                            cluster_mode(a) ? sh->name : a->redis_name, sh->error,
                            format_duration(buf, sizeof(buf), sh->backoff));
        if (sentinel_mode(a))
                /* Ask the Sentinels again: the master may have moved. */
                master_forget(a);
        if (!cluster_mode(a) || a->state != REDIS_READY || !any_shard_ready(a)) {
                a->state = REDIS_DOWN;
                slots_redis_down(&a->slots, a->redis_error, now_mono());
        }
        reconnect_in(a, sh->backoff);
        a->redis_changed(a);
}

/* Shards that own hash slots: all of them must be up before a Cluster
 * counts as up the first time. */
static bool all_shards_ready(const Agent *a) {
        if (!cluster_mode(a))
                return a->shards[0]->state == REDIS_READY;
        if (!a->map_known)
                return false;
        for (size_t i = 0; i < a->n_shards; i++)
                if (a->shards[i]->n_slots > 0 && a->shards[i]->state != REDIS_READY)
                        return false;
        return true;
}

static void io_name_subscribe_all(Agent *a) {
        for (Name *n = a->slots.names; n; n = n->all_next)
                if (n->n_waiting > 0)
                        io_name_waiting(a, n);
}

/* Redis is up for the engine once every shard that owns hash slots is
 * (one, unless a Cluster): whatever waited looks again, holders are
 * renewed, or re-asserted after a reset. A reset of any shard until then
 * counts. */
static void redis_maybe_up(Agent *a, bool reset, usec_t grace, const char *why) {
        a->up_reset = a->up_reset || reset;
        if (grace > a->up_grace) {
                a->up_grace = grace;
                a->up_why = why;
        }
        if (a->state != REDIS_READY && !all_shards_ready(a))
                return;
        reset = a->up_reset;
        grace = a->up_grace;
        why = a->up_why;
        a->up_reset = false;
        a->up_grace = 0;
        a->up_why = NULL;
        a->state = REDIS_READY;
        a->redis_error[0] = '\0';
        /* (Re-adoption, if not done yet, starts first.) */
        a->redis_changed(a);
        slots_redis_up(&a->slots, reset, grace, why, now_mono());
        io_name_subscribe_all(a);
}

/* grace: what is left of the time after a reset in which nobody is
 * granted anything; why: a GRACE_WHY_*, NULL when this agent cannot tell. */
static void shard_ready(Shard *sh, bool reset, usec_t grace, const char *why) {
        Agent *a = sh->agent;

        sh->state = REDIS_READY;
        sh->backoff = 0;
        sh->retry_at = 0;
        a->backoff = 0;
        if (sentinel_mode(a))
                log_info("Connected to Redis master %s (%s, from the Sentinels).", a->master_name,
                         a->config->redis.master_name);
        else if (cluster_mode(a))
                log_info("Connected to Redis Cluster master %s.", sh->name);
        else
                log_info("Connected to Redis at %s.", a->redis_name);
        if (reset && a->slots.n_held > 0)
                log_notice("Re-asserting %zu held slot(s) in Redis %s.", a->slots.n_held,
                           cluster_mode(a) ? sh->name : a->redis_name);
        if (grace > 0)
                log_notice("No slot is granted through Redis %s for another %s: %s; slots held before may still be "
                           "in use until their leases run out.", cluster_mode(a) ? sh->name : a->redis_name,
                           format_duration((char[FORMAT_DURATION_MAX]) {}, FORMAT_DURATION_MAX, grace),
                           grace_why_text(why ?: GRACE_WHY_NEW));
        /* Calls redirected here while it connected: sent now, unless it
         * lost its state (they were made for the state before). */
        shard_unpark(sh, !reset);
        redis_maybe_up(a, reset, grace, why);
}

typedef struct SetupStep {
        Shard *shard;
        const char *what;
        int script;             /* -1: not a SCRIPT LOAD */
} SetupStep;

static void setup_done(Shard *sh);

static void setup_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        SetupStep *step = userdata;
        Shard *sh = step->shard;
        Agent *a = sh->agent;
        const char *err = redis_reply_error(reply), *s;
        size_t len;

        if (!reply || conn != sh->cmd)
                goto finish;    /* an old connection */
        if (err) {
                if (!sh->setup_failed)
                        snprintf(sh->error, sizeof(sh->error), "%s failed: %s", step->what, err);
                sh->setup_failed = true;
        } else if (step->script >= 0) {
                if (redis_reply_string(reply, &s, &len) < 0 || len != 40 || (a->sha[step->script][0] &&
                                                                             !strneq(a->sha[step->script], s, 40))) {
                        sh->setup_failed = true;
                        snprintf(sh->error, sizeof(sh->error), "SCRIPT LOAD gave an unexpected reply");
                } else {
                        memcpy(a->sha[step->script], s, 40);
                        a->sha[step->script][40] = '\0';
                }
        }
        if (--sh->setup_pending > 0)
                goto finish;
        if (sh->setup_failed) {
                char why[sizeof(sh->error)];

                snprintf(why, sizeof(why), "%s", sh->error);
                shard_down(sh, -EACCES, why);
        } else
                setup_done(sh);
finish:
        free(step);
}

static void setup_send(Shard *sh, const char *what, int script, int argc, const char *const *argv) {
        SetupStep *step = calloc(1, sizeof(*step));

        if (!step)
                return;
        *step = (SetupStep) { .shard = sh, .what = what, .script = script };
        if (redis_conn_command(sh->cmd, setup_reply, step, argc, argv, NULL) < 0) {
                free(step);
                return;
        }
        sh->setup_pending++;
}

/* The epoch: "ID GRACE_UNTIL_MS [RUN_ID]" in P:epoch (in a Cluster one per
 * master, P:epoch:{TAG} in the first hash slot it owns), made by the first
 * agent that finds none. An id other than the one this agent knew means
 * Redis lost its state since (restarted empty, a failover that lost
 * writes). The grace lasts until Redis has been up for one lease: holders
 * from before are re-asserted or told they lost their slot by then. */
static void epoch_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Shard *sh = userdata;
        Agent *a = sh->agent;
        char value[128], id[LEASE_ID_LEN + 1];
        long long created = -1, now_ms = -1;
        uint64_t grace_until = 0;
        const char *why;
        bool reset;
        int n = 0;

        if (!reply || conn != sh->cmd)
                return;
        if (redis_reply_error(reply) || redis_reply_array_len(reply) != 3 ||
            redis_reply_array_integer(reply, 0, &created) < 0 ||
            redis_reply_array_string(reply, 1, value, sizeof(value)) < 0 ||
            redis_reply_array_integer(reply, 2, &now_ms) < 0 || now_ms < 0 ||
            strchr(value, '-') || sscanf(value, "%32[0-9a-f] %" SCNu64 "%n", id, &grace_until, &n) != 2 ||
            (value[n] != '\0' && (value[n] != ' ' || strspn(value + n + 1, "0123456789abcdef") != strlen(value + n + 1))) ||
            !lease_id_is_valid(id)) {
                shard_down(sh, -EBADMSG, redis_reply_error(reply) ?: "unexpected reply to the epoch script");
                return;
        }
        reset = created >= 1 || (sh->epoch[0] && !streq(sh->epoch, id));
        if (reset)
                log_full(sh->epoch[0] ? LOG_WARNING : LOG_INFO, "Redis at %s %s (epoch %s).",
                         cluster_mode(a) ? sh->name : a->redis_name,
                         sh->epoch[0] ? "lost its state since this agent last saw it" : "holds no fleetsem state yet", id);
        if (reset && sentinel_mode(a))
                a->master_since = now_usec(CLOCK_REALTIME);
        /* 2: the epoch named another master; 1: there was none, which is
         * news to an agent that knew one; else this agent knows no better
         * than that Redis' state is new. */
        why = created == 2 ? GRACE_WHY_FAILOVER
              : sh->epoch[0] && (created == 1 || !streq(sh->epoch, id)) ? GRACE_WHY_RESET
              : !sh->epoch[0] ? GRACE_WHY_NEW : NULL;
        memcpy(sh->epoch, id, sizeof(sh->epoch));
        sh->grace_until_ms = grace_until;
        shard_ready(sh, reset, grace_until > (uint64_t) now_ms ? (grace_until - (uint64_t) now_ms) * USEC_PER_MSEC : 0,
                    why);
}

/* The first hash slot sh owns (its epoch key's), or -1. */
static int shard_first_slot(const Shard *sh) {
        const Agent *a = sh->agent;

        for (unsigned s = 0; s < REDIS_CLUSTER_SLOTS; s++)
                if (a->slot_shard[s] == sh->index)
                        return (int) s;
        return -1;
}

static void info_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Shard *sh = userdata;
        Agent *a = sh->agent;
        const char *s, *p;
        size_t len;
        long long uptime = 0;
        uint64_t ttl_ms = a->config->lease_ttl / USEC_PER_MSEC, grace_ms, failover_ms;
        char key[LEASE_ID_LEN + 1 + IDENT_MAX_LEN + 16], id[LEASE_ID_LEN + 1], grace[24], failover[24];
        bool by_run_id = sentinel_mode(a) || cluster_mode(a);
        int r;

        if (!reply || conn != sh->cmd)
                return;
        sh->run_id[0] = '\0';
        if (redis_reply_string(reply, &s, &len) >= 0) {
                if ((p = memmem(s, len, "uptime_in_seconds:", 18)))
                        uptime = strtoll(p + 18, NULL, 10);
                if ((p = memmem(s, len, "run_id:", 7)) && (size_t) (s + len - p) > 7 + 40 &&
                    strspn(p + 7, "0123456789abcdef") == 40) {
                        memcpy(sh->run_id, p + 7, 40);
                        sh->run_id[40] = '\0';
                }
        }
        /* Whole seconds, rounded down: the grace is never too short. */
        grace_ms = uptime >= 0 && (uint64_t) uptime * 1000 < ttl_ms ? ttl_ms - (uint64_t) uptime * 1000 : 0;
        /* A master other than the one the epoch names means a failover,
         * which may have lost the last writes. With WAIT, every grant told
         * to a holder is on the replica that took over, with an expiry no
         * earlier than its agent stops believing in it (unless the replica
         * missed two renewals in a row); agents hear of the failover at
         * once and re-assert, within milliseconds of each other: half a
         * second covers that. Without WAIT the failover may have lost
         * grants: a whole lease. */
        failover_ms = a->config->min_replicas_acked > 0 ? MIN(ttl_ms, FAILOVER_GRACE_WAIT / USEC_PER_MSEC) : ttl_ms;
        /* A new master is a failover, also when the epoch is missing,
         * which is also what a master restarted empty looks like: the
         * longer of the two (the epoch script takes the longer too when
         * the epoch names another run id: the same master restarted). In
         * a Cluster an epoch key follows its master's first slot when a
         * resharding moves it (map_apply()), so a missing one is a loss. */
        if (sentinel_mode(a) || cluster_mode(a))
                grace_ms = MAX(grace_ms, failover_ms);
        r = lease_id_new(id);
        if (r < 0) {
                shard_down(sh, r, "cannot make an epoch id");
                return;
        }
        if (cluster_mode(a)) {
                int first = shard_first_slot(sh);

                if (first < 0) {
                        /* Only asked (ASK) while slots move to it: its
                         * epoch is looked at once it owns one and its
                         * connection is made again. */
                        sh->epoch[0] = '\0';
                        sh->grace_until_ms = 0;
                        shard_ready(sh, false, 0, NULL);
                        return;
                }
                snprintf(key, sizeof(key), "%s:epoch:{%s}", a->config->key_prefix, redis_slot_tag((unsigned) first));
                sh->epoch_slot = first;
        } else
                snprintf(key, sizeof(key), "%s:epoch", a->config->key_prefix);
        snprintf(grace, sizeof(grace), "%" PRIu64, grace_ms);
        snprintf(failover, sizeof(failover), "%" PRIu64, failover_ms);
        /* Under Sentinel and in a Cluster the epoch belongs to one master:
         * another one (a failover) starts a new epoch, which every agent
         * takes as a reset. */
        if (shard_script_call(sh, SCRIPT_EPOCH, epoch_reply, sh, 1, 5,
                              (const char *[]) { key, id, grace, by_run_id ? sh->run_id : "", failover }) < 0)
                shard_down(sh, -EIO, "cannot send commands");
}

/* ROLE: "master", then the replicas attached (third element). */
static bool role_parse(Shard *sh, const RedisReply *reply) {
        Agent *a = sh->agent;
        char role[16] = "";
        int n;

        (void) redis_reply_array_string(reply, 0, role, sizeof(role));
        if (!streq(role, "master"))
                return false;
        n = (int) MIN(redis_reply_array_len(redis_reply_array_get(reply, 2)), (size_t) INT_MAX);
        if (n != sh->n_replicas && a->config->min_replicas_acked > 0)
                log_full(sh->n_replicas < 0 ? LOG_INFO : LOG_NOTICE,
                         "Redis master %s has %d replica(s); grants are told once %d of them %s them (min_replicas_acked %d).",
                         sentinel_mode(a) ? a->master_name : sh->name, n, MIN(n, a->config->min_replicas_acked),
                         MIN(n, a->config->min_replicas_acked) == 1 ? "has" : "have", a->config->min_replicas_acked);
        sh->n_replicas = n;
        return true;
}

static void role_refresh_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Shard *sh = userdata;

        if (!reply || conn != sh->cmd || redis_reply_error(reply))
                return;
        if (!role_parse(sh, reply))
                /* Demoted (a failover it was not told of): calls fail, the
                 * map or the Sentinels are asked again. */
                shard_down(sh, -EAGAIN, "it is no master any more (ROLE)");
}

static void role_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Shard *sh = userdata;
        char role[16] = "";

        if (!reply || conn != sh->cmd)
                return;
        (void) redis_reply_array_string(reply, 0, role, sizeof(role));
        if (!role_parse(sh, reply)) {
                char why[400];

                snprintf(why, sizeof(why), "%s is not a master (ROLE says \"%s\")",
                         sentinel_mode(sh->agent) ? sh->agent->master_name : sh->name, role);
                shard_down(sh, -EAGAIN, why);
                return;
        }
        if (redis_conn_command(sh->cmd, info_reply, sh, 2, (const char *[]) { "INFO", "server" }, NULL) < 0)
                shard_down(sh, -EIO, "cannot send commands");
}

static void setup_done(Shard *sh) {
        Agent *a = sh->agent;

        /* What a Sentinel names, or a Cluster's map, may be stale: the
         * server itself says. */
        if (sentinel_mode(a) || cluster_mode(a)) {
                if (redis_conn_command(sh->cmd, role_reply, sh, 1, (const char *[]) { "ROLE" }, NULL) < 0)
                        shard_down(sh, -EIO, "cannot send commands");
                return;
        }
        if (redis_conn_command(sh->cmd, info_reply, sh, 2, (const char *[]) { "INFO", "server" }, NULL) < 0)
                shard_down(sh, -EIO, "cannot send commands");
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
        Shard *sh = userdata;
        Agent *a = sh->agent;
        char db[16];

        if (conn != sh->cmd)
                return;
        if (error < 0) {
                /* A refused AUTH says more than the connection Redis then
                 * closes (it drops unauthenticated clients that send a
                 * large bulk: the scripts sent behind the AUTH). */
                char why[sizeof(sh->error)];

                snprintf(why, sizeof(why), "%s", sh->setup_failed ? sh->error : message ? message : "");
                shard_down(sh, error, why);
                return;
        }
        sh->setup_pending = 0;
        sh->setup_failed = false;
        if (a->config->redis.password) {
                const char *argv[3];

                setup_send(sh, "AUTH", -1, auth_argv(a, argv), argv);
        }
        if (a->config->redis.db > 0) {
                snprintf(db, sizeof(db), "%u", a->config->redis.db);
                setup_send(sh, "SELECT", -1, 2, (const char *[]) { "SELECT", db });
        }
        for (int i = 0; i < N_SCRIPTS; i++)
                setup_send(sh, "SCRIPT LOAD", i, 3, (const char *[]) { "SCRIPT", "LOAD", a->script_text[i] });
        if (sh->setup_pending == 0)
                shard_down(sh, -EIO, "cannot send commands");
}

static void on_sub_state(RedisConn *conn, int error, const char *message, void *userdata) {
        Shard *sh = userdata;
        Agent *a = sh->agent;

        if (conn != sh->sub)
                return;
        if (error < 0) {
                log_debug("Pub/sub connection to Redis at %s lost: %s", sh->name, message);
                sh->sub = NULL;
                sh->sub_ready = false;
                redis_conn_free(conn);
                /* (The map is asked for again on reconnection too: an
                 * SSUBSCRIBE told MOVED closes the connection, say.) */
                if (sh->cmd)
                        schedule_reconnect(a);
                return;
        }
        if (a->config->redis.password) {
                const char *argv[3];

                (void) redis_conn_command(sh->sub, fire_and_forget_reply, (void *) "AUTH", auth_argv(a, argv), argv, NULL);
        }
        redis_conn_set_message_handler(sh->sub, on_wake, a);
        sh->sub_ready = true;
        a->sub_generation++;
        io_name_subscribe_all(a);
}

/* Where sh's connections go: the configured server, the master the
 * Sentinels named, or the Cluster's node. */
static RedisAddress shard_address(const Shard *sh) {
        const Agent *a = sh->agent;

        if (cluster_mode(a))
                return (RedisAddress) { .host = sh->host, .port = sh->port };
        if (sentinel_mode(a))
                return (RedisAddress) { .host = a->master.host, .port = a->master.port };
        return a->config->redis;
}

static void shard_connect(Shard *sh) {
        Agent *a = sh->agent;
        RedisAddress addr = shard_address(sh);
        int r;

        if (!sh->cmd) {
                sh->state = REDIS_CONNECTING;
                sh->setup_failed = false;
                r = redis_conn_new(a->event, &addr, CONNECT_TIMEOUT, on_cmd_state, sh, &sh->cmd);
                if (r < 0) {
                        sh->cmd = NULL;
                        shard_down(sh, r, NULL);
                        return;
                }
        }
        if (!sh->sub) {
                r = redis_conn_new(a->event, &addr, CONNECT_TIMEOUT, on_sub_state, sh, &sh->sub);
                if (r < 0) {
                        sh->sub = NULL;
                        schedule_reconnect(a);
                }
        }
}

/* sh as new, for host:port (NULL: the one server of a URL that is not a
 * Cluster's), keeping its place in a->shards. */
static int shard_init(Shard *sh, Agent *a, uint8_t index, const char *host, uint16_t port) {
        char *h = NULL;

        if (host && !(h = strdup(host)))
                return -ENOMEM;
        *sh = (Shard) { .agent = a, .index = index, .host = h, .port = port, .state = REDIS_DOWN, .n_replicas = -1,
                        .epoch_slot = -1 };
        if (host)
                snprintf(sh->name, sizeof(sh->name), "%s%s%s:%u", strchr(host, ':') ? "[" : "", host,
                         strchr(host, ':') ? "]" : "", port);
        else
                snprintf(sh->name, sizeof(sh->name), "%s", a->redis_name);
        return 0;
}

/* A Cluster node that owns nothing, is not up and is not named by the map
 * being read: its place is taken by a new one. Nodes come and go over a
 * Cluster's life (new addresses after a move, a replacement); the table
 * holds SHARDS_MAX at once, not in all. */
static Shard *shard_reuse(Agent *a, const char *host, uint16_t port) {
        for (size_t i = 0; i < a->n_shards; i++) {
                Shard *sh = a->shards[i];

                if (sh->n_slots > 0 || sh->state == REDIS_READY || sh->map_pass == a->map_pass)
                        continue;
                log_info("Redis Cluster: forgetting %s, which owns no hash slot, for %s:%u.", sh->name, host, port);
                shard_disconnect(sh, REDIS_DOWN);
                free(sh->host);
                if (shard_init(sh, a, sh->index, host, port) < 0) {
                        /* Out of memory: the place is kept, as a node of no address. */
                        sh->host = NULL;
                        return NULL;
                }
                return sh;
        }
        return NULL;
}

static Shard *shard_new(Agent *a, const char *host, uint16_t port) {
        Shard *sh;

        if (a->n_shards >= SHARDS_MAX)
                return host ? shard_reuse(a, host, port) : NULL;
        sh = malloc(sizeof(*sh));
        if (!sh)
                return NULL;
        if (shard_init(sh, a, (uint8_t) a->n_shards, host, port) < 0) {
                free(sh);
                return NULL;
        }
        a->shards[a->n_shards++] = sh;
        return sh;
}

static void shard_free(Shard *sh) {
        shard_disconnect(sh, REDIS_DOWN);
        free(sh->host);
        free(sh);
}

/* A node outside cluster_allow (or the seeds' networks) is never
 * connected to: whoever answers at an address a peer names would get the
 * password. Said once per address in a row, and in status. */
static bool node_allowed(Agent *a, const char *host, uint16_t port) {
        char name[sizeof(a->cluster_refused)];

        if (config_cluster_allows(a->config, host))
                return true;
        snprintf(name, sizeof(name), "%s%s%s:%u", strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", port);
        if (!streq(name, a->cluster_refused))
                log_warning("Redis Cluster: not connecting to %s, which a node named: it is outside cluster_allow "
                            "(or, without it, the seed nodes' networks).", name);
        snprintf(a->cluster_refused, sizeof(a->cluster_refused), "%s", name);
        return false;
}

/* The Cluster node at host:port: known, or new (and being connected to);
 * NULL when it cannot be (-ENOENT in *ret_error, may be NULL: not allowed;
 * -E2BIG: no room). */
static Shard *shard_get_full(Agent *a, const char *host, uint16_t port, int *ret_error) {
        Shard *sh;

        if (ret_error)
                *ret_error = -EINVAL;
        if (!host_is_valid(host) || port == 0)
                return NULL;
        for (size_t i = 0; i < a->n_shards; i++)
                if (a->shards[i]->port == port && streq(a->shards[i]->host, host))
                        return a->shards[i];
        if (!node_allowed(a, host, port)) {
                if (ret_error)
                        *ret_error = -ENOENT;
                return NULL;
        }
        if (ret_error)
                *ret_error = -E2BIG;
        sh = shard_new(a, host, port);
        if (sh) {
                log_info("Redis Cluster: master %s is new to this agent; connecting.", sh->name);
                shard_connect(sh);
        }
        return sh;
}

static Shard *shard_get(Agent *a, const char *host, uint16_t port) {
        return shard_get_full(a, host, port, NULL);
}

/* ---- The Cluster's map -------------------------------------------------------------
 * CLUSTER SLOTS, asked of a master that is up, or of the nodes the URL
 * names while none is: which master owns which hash slots. Asked again
 * after MOVED, a master gone, and every tick. */

static void map_ask(Agent *a);

/* A resharding moved the first slot of a master that is up, and its epoch
 * key with it: the epoch it had is written again in its new first slot,
 * so that whoever connects next finds it, not a loss. (Where the old key
 * went, the next agent to connect to that master sees its own epoch
 * replaced: SET, not SETNX, also there.) */
static void epochs_follow(Agent *a) {
        for (size_t i = 0; i < a->n_shards; i++) {
                Shard *sh = a->shards[i];
                char key[IDENT_MAX_LEN + 16], value[LEASE_ID_LEN + 80];
                int first;

                if (sh->state != REDIS_READY || !sh->epoch[0] || sh->epoch_slot < 0)
                        continue;
                first = shard_first_slot(sh);
                if (first < 0 || first == sh->epoch_slot)
                        continue;
                snprintf(key, sizeof(key), "%s:epoch:{%s}", a->config->key_prefix, redis_slot_tag((unsigned) first));
                snprintf(value, sizeof(value), "%s %" PRIu64 "%s%s", sh->epoch, sh->grace_until_ms,
                         sh->run_id[0] ? " " : "", sh->run_id);
                (void) redis_conn_command(sh->cmd, fire_and_forget_reply, (void *) "SET (epoch)", 3,
                                          (const char *[]) { "SET", key, value }, NULL);
                sh->epoch_slot = first;
        }
}

/* [[start, end, [host, port, id, …], replica…], …] → a->slot_shard. */
static int map_apply(Agent *a, const RedisReply *reply) {
        _cleanup_free_ uint8_t *owner = NULL;
        size_t n = redis_reply_array_len(reply), covered = 0;
        bool changed = false;
        int r;

        if (n == 0)
                return -EBADMSG;
        owner = malloc(REDIS_CLUSTER_SLOTS);
        if (!owner)
                return -ENOMEM;
        memset(owner, SLOT_NONE, REDIS_CLUSTER_SLOTS);
        a->map_pass++;
        for (size_t i = 0; i < n; i++) {
                const RedisReply *range = redis_reply_array_get(reply, i), *node;
                long long start, end, port;
                char host[256];
                Shard *sh;

                node = redis_reply_array_get(range, 2);
                if (redis_reply_array_len(range) < 3 || redis_reply_array_integer(range, 0, &start) < 0 ||
                    redis_reply_array_integer(range, 1, &end) < 0 || start < 0 || end < start ||
                    end >= REDIS_CLUSTER_SLOTS || redis_reply_array_len(node) < 2 ||
                    redis_reply_array_string(node, 0, host, sizeof(host)) < 0 ||
                    redis_reply_array_integer(node, 1, &port) < 0 || port < 1 || port > 65535)
                        return -EBADMSG;
                if (!host_is_valid(host))
                        continue;       /* "?": a node whose address is not known yet */
                sh = shard_get_full(a, host, (uint16_t) port, &r);
                if (!sh && r == -ENOENT)
                        continue;       /* not allowed: its slots are unreachable, as the log and status say */
                if (!sh)
                        return r;
                sh->map_pass = a->map_pass;
                memset(owner + start, sh->index, (size_t) (end - start + 1));
                covered += (size_t) (end - start + 1);
        }
        if (covered == 0)
                return -EBADMSG;
        changed = !a->map_known || memcmp(owner, a->slot_shard, REDIS_CLUSTER_SLOTS) != 0;
        memcpy(a->slot_shard, owner, REDIS_CLUSTER_SLOTS);
        if (changed) {
                size_t masters = 0;

                for (size_t i = 0; i < a->n_shards; i++)
                        a->shards[i]->n_slots = 0;
                for (unsigned slot = 0; slot < REDIS_CLUSTER_SLOTS; slot++)
                        if (owner[slot] != SLOT_NONE)
                                a->shards[owner[slot]]->n_slots++;
                for (size_t i = 0; i < a->n_shards; i++)
                        masters += a->shards[i]->n_slots > 0;
                log_info("Redis Cluster: %zu of %u hash slots over %zu master(s)%s.", covered, REDIS_CLUSTER_SLOTS,
                         masters, a->map_known ? " (the map changed)" : "");
                epochs_follow(a);
                /* Subscriptions follow their names' slots. */
                a->sub_generation++;
                io_name_subscribe_all(a);
        }
        a->map_known = true;
        a->map_failed = 0;
        return 0;
}

static void map_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Agent *a = userdata;
        int r;

        (void) conn;
        a->map_inflight = false;
        if (!reply)
                return;         /* asked again on the next tick or reconnect */
        r = map_apply(a, reply);
        if (r < 0) {
                log_warning("Redis Cluster: unusable answer to CLUSTER SLOTS%s%s.", redis_reply_error(reply) ? ": " : "",
                            redis_reply_error(reply) ?: "");
                return;
        }
        /* New masters at once; those that went, after their backoff. */
        for (size_t i = 0; i < a->n_shards; i++)
                if (a->shards[i]->n_slots > 0 && now_mono() >= a->shards[i]->retry_at)
                        shard_connect(a->shards[i]);
        /* (A master that was not up may own nothing now.) */
        if (a->state != REDIS_READY && any_shard_ready(a))
                redis_maybe_up(a, false, 0, NULL);
}

/* A node of the URL did not give the map. Once none of them did (a whole
 * round), and while no master is up, Redis is down for the engine
 * (requests answered unavailable, not left waiting). */
static void map_unreachable(Agent *a) {
        if (++a->map_failed < a->config->redis.n_hosts || (a->map_known && any_shard_ready(a)))
                return;
        if (a->state == REDIS_READY || a->state == REDIS_CONNECTING) {
                a->state = REDIS_DOWN;
                slots_redis_down(&a->slots, a->redis_error, now_mono());
                a->redis_changed(a);
        }
}

/* The node of the URL asked for the map now (or next). */
static const RedisHost *map_node(const Agent *a) {
        return &a->config->redis.hosts[a->map_next % a->config->redis.n_hosts];
}

static void map_query_drop(Agent *a) {
        RedisConn *c = a->map_query;

        a->map_query = NULL;
        redis_conn_free(c);
}

/* The node asked for the map gave none: the next one, after a backoff. */
static void map_query_failed(Agent *a) {
        map_query_drop(a);
        a->map_inflight = false;
        a->map_next++;
        map_unreachable(a);
        schedule_reconnect(a);
}

static void map_query_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Agent *a = userdata;

        if (conn != a->map_query)
                return;
        map_reply(conn, reply, a);
        if (a->map_known) {
                map_query_drop(a);
                return;
        }
        log_warning("Redis Cluster node %s:%u did not give the map; asking the next one.",
                    map_node(a)->host, map_node(a)->port);
        map_query_failed(a);
}

static void on_map_query_state(RedisConn *conn, int error, const char *message, void *userdata) {
        Agent *a = userdata;
        const RedisHost *h = map_node(a);

        if (conn != a->map_query)
                return;
        if (error < 0) {
                snprintf(a->redis_error, sizeof(a->redis_error), "no Cluster node answered (%s:%u: %s)", h->host,
                         h->port, message ?: "");
                log_warning("Failed to reach Redis Cluster node %s:%u: %s", h->host, h->port, message ?: "");
                map_query_failed(a);
                return;
        }
        if (a->config->redis.password) {
                const char *argv[3];

                (void) redis_conn_command(conn, fire_and_forget_reply, (void *) "AUTH", auth_argv(a, argv), argv, NULL);
        }
        if (redis_conn_command(conn, map_query_reply, a, 2, (const char *[]) { "CLUSTER", "SLOTS" }, NULL) < 0)
                map_query_failed(a);
}

static void map_ask(Agent *a) {
        const RedisHost *h;
        RedisAddress addr;

        if (a->map_inflight)
                return;
        for (size_t i = 0; i < a->n_shards; i++) {
                Shard *sh = a->shards[i];

                if (sh->state == REDIS_READY &&
                    redis_conn_command(sh->cmd, map_reply, a, 2, (const char *[]) { "CLUSTER", "SLOTS" }, NULL) >= 0) {
                        a->map_inflight = true;
                        return;
                }
        }
        /* No master up: one of the nodes the URL names. */
        h = map_node(a);
        addr = (RedisAddress) { .host = h->host, .port = h->port };
        if (redis_conn_new(a->event, &addr, CONNECT_TIMEOUT, on_map_query_state, a, &a->map_query) < 0) {
                a->map_query = NULL;
                a->map_next++;
                schedule_reconnect(a);
                return;
        }
        a->map_inflight = true;
}

static int on_map_refresh(sd_event_source *s, void *userdata) {
        (void) s;
        map_ask(userdata);
        return 0;
}

static void map_refresh_soon(Agent *a) {
        if (a->map_source)
                (void) sd_event_source_set_enabled(a->map_source, SD_EVENT_ONESHOT);
}

void redis_io_describe(Agent *a, char *buf, size_t size) {
        size_t up = 0, owning = 0;

        buf[0] = '\0';
        if (!cluster_mode(a) || !a->map_known)
                return;
        for (size_t i = 0; i < a->n_shards; i++)
                if (a->shards[i]->n_slots > 0) {
                        owning++;
                        up += a->shards[i]->state == REDIS_READY;
                }
        snprintf(buf, size, "%zu of %zu Cluster masters up%s%s%s", up, owning,
                 a->cluster_refused[0] ? "; refused " : "", a->cluster_refused,
                 a->cluster_refused[0] ? " (not in cluster_allow)" : "");
}

/* ---- Sentinel ---------------------------------------------------------------------- */

/* Two kinds of connection to the Sentinels: one that stays, subscribed to
 * +switch-master, so a failover is followed the moment it is decided; and
 * one made to ask for the master's address whenever it is not known. */

static void connect_all(Agent *a);

static const RedisHost *sentinel_host(const Agent *a, unsigned i) {
        return &a->config->redis.hosts[i % a->config->redis.n_hosts];
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

        if (parse_uint64(port_s, 1, 65535, &port) < 0 || !host_is_valid(host))
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
static void sentinel_ask(Agent *a);

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
        log_notice("Sentinel %s:%u says the master %s moved from %s:%s to %s:%s; asking every Sentinel.",
                   sentinel_host(a, a->sentinel_next)->host, sentinel_host(a, a->sentinel_next)->port, name, oldh, oldp,
                   newh, newp);
        sentinel_ask(a);
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

/* Asking every Sentinel of the URL for the master. The address is taken
 * once a quorum of them (sentinel_quorum, by default a majority) name the
 * same: one Sentinel, or whoever answers at its address, names nothing
 * alone. Asked when no master is known, and when one Sentinel says
 * +switch-master: the agent moves only when the quorum confirms it. */
typedef struct SentinelQuery SentinelQuery;

static unsigned sentinel_quorum(const Agent *a) {
        return a->config->sentinel_quorum ?: (unsigned) (a->config->redis.n_hosts / 2 + 1);
}

/* The quorum's master differs from the one followed: off the old one (both
 * connections) and onto the new one at once. */
static void master_move(Agent *a, const char *host, const char *port, size_t votes) {
        bool had = a->master.host;
        char old[sizeof(a->master_name)];

        snprintf(old, sizeof(old), "%s", a->master_name);
        if (master_set(a, host, port) < 0)
                return;
        if (had) {
                log_warning("Sentinel: %zu of %zu Sentinels name %s the master of %s, no more %s; following it (a "
                            "failover counts as a reset: holders are re-asserted, and nobody is granted anything for a "
                            "while).", votes, a->config->redis.n_hosts, a->master_name, a->config->redis.master_name, old);
                shard_disconnect(a->shards[0], REDIS_CONNECTING);
                a->shards[0]->backoff = 0;
                a->shards[0]->retry_at = 0;
                if (a->state == REDIS_READY)
                        slots_redis_down(&a->slots, "the master changed (Sentinel failover)", now_mono());
                if (a->state != REDIS_DOWN)
                        a->state = REDIS_CONNECTING;
                a->redis_changed(a);
        } else
                log_info("Sentinel: %zu of %zu Sentinels name %s the master of %s.", votes, a->config->redis.n_hosts,
                         a->master_name, a->config->redis.master_name);
        a->backoff = 0;
        connect_all(a);
}

static void sentinel_tally(Agent *a) {
        size_t n = a->config->redis.n_hosts, best = 0, answered = 0;
        const char *winner = NULL;
        char host[256], port[8], name[sizeof(a->master_name)];

        for (size_t i = 0; i < n; i++) {
                size_t k = 0;

                if (!a->sentinel_q[i].vote[0])
                        continue;
                answered++;
                for (size_t j = 0; j < n; j++)
                        k += streq(a->sentinel_q[i].vote, a->sentinel_q[j].vote);
                if (k > best) {
                        best = k;
                        winner = a->sentinel_q[i].vote;
                }
        }
        if (!winner || best < sentinel_quorum(a) || sscanf(winner, "%255s %7s", host, port) != 2) {
                log_warning("Sentinel: no quorum names the master of %s: %zu of %zu Sentinels answered, at most %zu "
                            "agree%s%s (quorum %u).", a->config->redis.master_name, answered, n, best,
                            winner ? " on " : "", winner ?: "", sentinel_quorum(a));
                if (!a->master.host)
                        shard_down(a->shards[0], -EHOSTUNREACH, "no quorum of Sentinels named the master");
                return;
        }
        snprintf(name, sizeof(name), "%s%s%s:%s", strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", port);
        if (a->master.host && streq(name, a->master_name))
                return;         /* the quorum names the master followed */
        master_move(a, host, port, best);
}

static void sentinel_vote(SentinelQuery *q, const char *vote) {
        Agent *a = q->agent;

        if (q->done)
                return;
        q->done = true;
        snprintf(q->vote, sizeof(q->vote), "%s", vote);
        sentinel_drop(q->agent, &q->conn);
        if (--a->sentinel_q_pending == 0)
                sentinel_tally(a);
}

static void sentinel_master_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        SentinelQuery *q = userdata;
        char host[256], port[8], vote[sizeof(q->vote)];
        uint64_t p;

        if (conn != q->conn)
                return;
        if (!reply || redis_reply_error(reply) || redis_reply_array_len(reply) != 2 ||
            redis_reply_array_string(reply, 0, host, sizeof(host)) < 0 ||
            redis_reply_array_string(reply, 1, port, sizeof(port)) < 0 || parse_uint64(port, 1, 65535, &p) < 0 ||
            !host_is_valid(host)) {
                const RedisHost *h = &q->agent->config->redis.hosts[q - q->agent->sentinel_q];

                log_warning("Sentinel %s:%u does not name master %s%s%s.", h->host, h->port,
                            q->agent->config->redis.master_name, redis_reply_error(reply) ? ": " : "",
                            redis_reply_error(reply) ?: "");
                sentinel_vote(q, "");
                return;
        }
        snprintf(vote, sizeof(vote), "%s %s", host, port);
        sentinel_vote(q, vote);
}

static void on_sentinel_query_state(RedisConn *conn, int error, const char *message, void *userdata) {
        SentinelQuery *q = userdata;
        Agent *a = q->agent;

        if (conn != q->conn)
                return;
        if (error < 0) {
                const RedisHost *h = &a->config->redis.hosts[q - a->sentinel_q];

                log_warning("Failed to reach Sentinel %s:%u: %s", h->host, h->port, message);
                sentinel_vote(q, "");
                return;
        }
        sentinel_auth(a, conn);
        if (redis_conn_command(conn, sentinel_master_reply, q, 3,
                               (const char *[]) { "SENTINEL", "get-master-addr-by-name", a->config->redis.master_name },
                               NULL) < 0)
                sentinel_vote(q, "");
}

static void sentinel_ask(Agent *a) {
        size_t n = a->config->redis.n_hosts;

        if (a->sentinel_q_pending > 0)
                return;         /* a round is under way */
        a->sentinel_q_pending = n;
        for (size_t i = 0; i < n; i++)
                a->sentinel_q[i] = (SentinelQuery) { .agent = a };
        for (size_t i = 0; i < n; i++) {
                SentinelQuery *q = &a->sentinel_q[i];
                RedisAddress addr = { .host = a->config->redis.hosts[i].host, .port = a->config->redis.hosts[i].port };

                if (redis_conn_new(a->event, &addr, CONNECT_TIMEOUT, on_sentinel_query_state, q, &q->conn) < 0) {
                        q->conn = NULL;
                        sentinel_vote(q, "");
                }
        }
}

static void connect_all(Agent *a) {
        if (sentinel_mode(a)) {
                sentinel_watch(a);
                if (!a->master.host) {
                        sentinel_ask(a);
                        if (a->state != REDIS_DOWN)
                                a->state = REDIS_CONNECTING;
                        return;         /* connect_all() again once a Sentinel named it */
                }
        }
        if (cluster_mode(a)) {
                map_ask(a);             /* the masters may have changed meanwhile */
                if (!a->map_known)
                        return;         /* connected to once a node gave the map */
        } else if (!a->shards[0]->cmd && a->state != REDIS_DOWN)
                a->state = REDIS_CONNECTING;
        for (size_t i = 0; i < a->n_shards; i++)
                if ((!cluster_mode(a) || a->shards[i]->n_slots > 0) && now_mono() >= a->shards[i]->retry_at)
                        shard_connect(a->shards[i]);
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

/* Calls under way on c and no word from it for longer than a silent
 * Redis may take. */
static bool conn_hangs(const Agent *a, RedisConn *c, usec_t now) {
        return c && redis_conn_pending(c) > 0 && now > redis_conn_last_activity(c) &&
               now - redis_conn_last_activity(c) > command_timeout(a);
}

static int on_tick(sd_event_source *s, uint64_t usec, void *userdata) {
        Agent *a = userdata;
        usec_t now = now_mono();

        (void) usec;
        if (sentinel_mode(a))
                sentinel_watch(a);      /* after the watching Sentinel went */
        for (size_t i = 0; i < a->n_shards; i++) {
                Shard *sh = a->shards[i];

                if (conn_hangs(a, sh->cmd, now)) {
                        char why[64], buf[FORMAT_DURATION_MAX];

                        snprintf(why, sizeof(why), "Redis did not answer for %s",
                                 format_duration(buf, sizeof(buf), command_timeout(a)));
                        shard_down(sh, -ETIMEDOUT, why);
                }
        }
        if (conn_hangs(a, a->map_query, now)) {
                const RedisHost *h = map_node(a);

                snprintf(a->redis_error, sizeof(a->redis_error), "Redis Cluster node %s:%u did not answer", h->host,
                         h->port);
                log_warning("%s; asking the next one.", a->redis_error);
                map_query_failed(a);
        }
        if (cluster_mode(a))
                map_ask(a);             /* a failover or a resharding, seen without a MOVED */
        if (a->config->min_replicas_acked > 0 && (sentinel_mode(a) || cluster_mode(a)))
                /* How many replicas each master has (also asked after each
                 * grant), for the journal and as the count seen before. */
                for (size_t i = 0; i < a->n_shards; i++)
                        if (a->shards[i]->state == REDIS_READY)
                                (void) redis_conn_command(a->shards[i]->cmd, role_refresh_reply, a->shards[i], 1,
                                                          (const char *[]) { "ROLE" }, NULL);
        (void) sd_event_source_set_time_relative(s, slots_tick(&a->slots, now));
        return 0;
}

/* ---- Start and stop ------------------------------------------------------------------ */

/* In a Cluster the scripts publish wake-ups with SPUBLISH, to the node of
 * the name's slot only (the prelude's WAKE_COMMAND). */
static char *script_text_new(const Agent *a, const char *script) {
        static const char plain[] = "local WAKE_COMMAND = 'PUBLISH'", sharded[] = "local WAKE_COMMAND = 'SPUBLISH'";
        const char *prelude = lua_prelude, *at = strstr(prelude, plain);
        size_t before, n = strlen(script);
        char *text;

        if (!at)
                return NULL;
        before = cluster_mode(a) ? (size_t) (at - prelude) : strlen(prelude);
        text = malloc(strlen(prelude) + 1 + n + 2);
        if (!text)
                return NULL;
        memcpy(text, prelude, before);
        if (cluster_mode(a))
                stpcpy(stpcpy(text + before, sharded), at + strlen(plain));
        else
                text[before] = '\0';
        strcat(text, "\n");
        strcat(text, script);
        return text;
}

void redis_io_reconnect(Agent *a, const char *why) {
        /* As after a lost connection: slots kept, renewed again once the
         * connections are back (the epoch is the same: no reset). */
        sentinel_drop(a, &a->sentinel);
        for (size_t i = 0; i < a->n_shards; i++)
                if (a->shards[i]->state != REDIS_DOWN)
                        shard_down(a->shards[i], -ECONNRESET, why);
}

int redis_io_start(Agent *a) {
        int r;

        for (int i = 0; i < N_SCRIPTS; i++) {
                a->script_text[i] = script_text_new(a, lua_scripts[i]);
                if (!a->script_text[i])
                        return log_error_errno(ENOMEM, "Out of memory.");
        }
        snprintf(a->host_key, sizeof(a->host_key), "%s:host:{%s}", a->config->key_prefix, a->config->host_id);
        snprintf(a->names_key, sizeof(a->names_key), "%s:names", a->config->key_prefix);
        redis_address_to_string(&a->config->redis, a->redis_name, sizeof(a->redis_name));

        if (cluster_mode(a)) {
                a->slot_shard = malloc(REDIS_CLUSTER_SLOTS);
                if (!a->slot_shard || !redis_slot_tag(0))
                        return log_error_errno(ENOMEM, "Out of memory.");
                memset(a->slot_shard, SLOT_NONE, REDIS_CLUSTER_SLOTS);
                r = sd_event_add_defer(a->event, &a->map_source, on_map_refresh, a);
                if (r >= 0)
                        r = sd_event_source_set_enabled(a->map_source, SD_EVENT_OFF);
                if (r < 0)
                        return log_error_errno(r, "Failed to set up the Cluster's map: %m");
        } else if (!shard_new(a, NULL, 0))
                return log_error_errno(ENOMEM, "Out of memory.");

        r = sd_event_add_time_relative(a->event, &a->reconnect_source, CLOCK_MONOTONIC, 0, 0, on_reconnect, a);
        if (r >= 0)
                r = sd_event_source_set_enabled(a->reconnect_source, SD_EVENT_OFF);
        if (r >= 0)
                /* Renewals on time to the millisecond: left to sd-event's
                 * default accuracy (0), the tick may come 250 ms late on a
                 * quiet host, an eighth of a 6 s lease's third. */
                r = sd_event_add_time_relative(a->event, &a->tick_source, CLOCK_MONOTONIC, a->config->lease_ttl / 3,
                                               RENEW_ACCURACY, on_tick, a);
        if (r >= 0)
                r = sd_event_source_set_priority(a->tick_source, PRIORITY_LEASES);
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
        a->batch_deadline = sd_event_source_disable_unref(a->batch_deadline);
        for (size_t i = 0; i < a->n_shards; i++)
                shard_free(a->shards[i]);
        a->n_shards = 0;
        map_query_drop(a);
        a->map_source = sd_event_source_disable_unref(a->map_source);
        a->slot_shard = mfree(a->slot_shard);
        sentinel_drop(a, &a->sentinel);
        for (size_t i = 0; i < REDIS_HOSTS_MAX; i++)
                sentinel_drop(a, &a->sentinel_q[i].conn);
        master_forget(a);
        a->reconnect_source = sd_event_source_disable_unref(a->reconnect_source);
        a->tick_source = sd_event_source_disable_unref(a->tick_source);
        for (int i = 0; i < N_SCRIPTS; i++)
                a->script_text[i] = mfree(a->script_text[i]);
}
