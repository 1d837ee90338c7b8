/* SPDX-License-Identifier: MIT */
/* Group commit: acquires, releases, renewals, re-assertions and adoptions
 * that reach the agent in one turn of its loop (every event ready at once
 * has been handled) go to Redis as one script call (batch.lua), which runs
 * them in order and answers each as its own script would: Redis runs one
 * script, not one per request. A batch spans names: all of them with one Redis
 * (or Sentinel's master); in a Redis Cluster, where a script's keys must
 * share one hash slot, one batch a slot, of the names in it. Each name's
 * calls go together, in the order they came (calls on different names do
 * not depend on each other's order, as separate calls would not).
 * Renewals and releases go in a batch of their own (keep.lua, which Redis
 * runs when it is full: they grow nothing there, and holders keep their
 * slots), sent right after the turn's other calls on the same slot: a
 * release never goes before an acquire that came before it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "redis-layer.h"
#include "hash-slot.h"

#define BATCH_MAX 64            /* calls (so names) in one batch; a full one goes at once */
#define BATCH_ARGS_MAX 4096     /* their arguments: one more that would pass it goes in the next */
#define BATCH_WAIT_MAX (2 * USEC_PER_MSEC)

typedef struct BatchCall {
        Script script;
        size_t name;            /* its name in the batch's names */
        size_t arg0, n_args;    /* its arguments, in the batch's args */
        redis_reply_cb cb;
        void *userdata;
} BatchCall;

typedef struct Batch Batch;
struct Batch {
        LIST_FIELDS(Batch, batches);
        unsigned slot;          /* its first name's (where keys are sharded, all its names') */
        bool keep;              /* renewals and releases alone */
        char names[BATCH_MAX][NAME_MAX_LEN + 1];
        size_t n_names;
        BatchCall calls[BATCH_MAX];
        size_t n_calls;
        size_t order[BATCH_MAX];        /* the calls in the order sent (by name): replies come so */
        char **args;
        size_t *lens;
        size_t n_args, cap_args;
};

struct Batcher {
        Batch *batches;                 /* calls waiting: one batch (where keys are sharded, one a slot) */
        sd_event_source *turn;          /* once the requests ready are read */
        sd_event_source *deadline;      /* … or at the latest BATCH_WAIT_MAX after the first call */
};

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

        for (size_t k = 0; k < b->n_calls; k++) {
                BatchCall *c = &b->calls[b->order[k]];

                c->cb(conn, each ? redis_reply_array_get(reply, k) : reply, c->userdata);
        }
        batch_free(b);
}

/* ARGV of batch.lua: each name's calls (name by name, each name's in the
 * order they came), each as its kind, its name's place, its number of
 * arguments, then them. */
static int batch_argv(Batch *b, const char ***ret_argv, size_t **ret_lens, size_t *ret_n,
                      char (*place)[8], char (*count)[24]) {
        size_t n = 3 * b->n_calls + b->n_args, k = 0, m = 0;
        const char **argv = calloc(n, sizeof(char *));
        size_t *lens = calloc(n, sizeof(size_t));

        if (!argv || !lens) {
                free(argv);
                free(lens);
                return -ENOMEM;
        }
        for (size_t j = 0; j < b->n_names; j++)
                for (size_t i = 0; i < b->n_calls; i++) {
                        BatchCall *c = &b->calls[i];

                        if (c->name != j)
                                continue;
                        b->order[m] = i;
                        argv[k] = script_name[c->script];
                        lens[k++] = strlen(script_name[c->script]);
                        lens[k] = (size_t) snprintf(place[m], sizeof(place[m]), "%zu", j + 1);
                        argv[k++] = place[m];
                        lens[k] = (size_t) snprintf(count[m], sizeof(count[m]), "%zu", c->n_args);
                        argv[k++] = count[m];
                        for (size_t a = 0; a < c->n_args; a++) {
                                argv[k] = b->args[c->arg0 + a];
                                lens[k++] = b->lens[c->arg0 + a];
                        }
                        m++;
                }
        *ret_argv = argv;
        *ret_lens = lens;
        *ret_n = k;
        return 0;
}

static void batch_send(RedisIo *io, Batch *b) {
        char place[BATCH_MAX][8], count[BATCH_MAX][24];
        const char *names[BATCH_MAX];
        _cleanup_free_ const char **argv = NULL;
        _cleanup_free_ size_t *lens = NULL;
        size_t n;

        LIST_REMOVE(batches, io->batcher->batches, b);
        if (b->n_calls == 1) {
                /* Alone: its own script. */
                BatchCall *c = &b->calls[0];

                const char *name = b->names[0];

                if (call_script_names(io, c->script, b->slot, 1, &name, c->cb, c->userdata, c->n_args,
                                      c->n_args ? (const char *const *) b->args + c->arg0 : NULL,
                                      c->n_args ? b->lens + c->arg0 : NULL) < 0)
                        c->cb(NULL, NULL, c->userdata);
                batch_free(b);
                return;
        }
        for (size_t j = 0; j < b->n_names; j++)
                names[j] = b->names[j];
        if (batch_argv(b, &argv, &lens, &n, place, count) < 0 ||
            call_script_names(io, b->keep ? SCRIPT_KEEP : SCRIPT_BATCH, b->slot, b->n_names, names, batch_reply, b, n,
                              argv, lens) < 0)
                batch_reply(NULL, NULL, b);
}

/* The batch a name's calls join (slot: the name's; keep: renewals and
 * releases): where keys are sharded, that of its slot; else the one. */
static Batch *batch_find(RedisIo *io, unsigned slot, bool keep) {
        Batch *b;

        LIST_FOREACH(batches, b, io->batcher->batches)
                if (b->keep == keep && (!io->topo->sharded || b->slot == slot))
                        return b;
        return NULL;
}

/* The batches of a name in slot sent now, if it has any: the one that may
 * grant before the one of renewals and releases. */
static void batch_flush_slot(RedisIo *io, unsigned slot) {
        Batch *b = batch_find(io, slot, false);

        if (b)
                batch_send(io, b);
        b = batch_find(io, slot, true);
        if (b)
                batch_send(io, b);
}

void batch_flush_all(RedisIo *io) {
        Batcher *bt = io->batcher;
        int r;

        if (!bt)
                return;
        while (bt->batches)
                batch_flush_slot(io, bt->batches->slot);
        calls_send_deferred(io);
        r = sd_event_source_set_enabled(bt->deadline, SD_EVENT_OFF);
        if (r < 0)
                log_debug_errno(r, "Failed to disarm the batch deadline: %m; it fires with nothing to send.");
}

/* A command nobody waits for goes after the calls that wait for the end
 * of the turn: the turn's acquire does not wait a turn of the loop behind
 * its index entry, nor behind that entry's reply. */
int redis_key_command(Agent *a, redis_reply_cb cb, void *userdata, int argc, const char *const *argv) {
        RedisIo *io = a->redis_io;

        if (!io || a->state != REDIS_READY || argc < 2)
                return -ENOTCONN;
        if (cb)
                return call_command(io, cb, userdata, argc, argv, false);
        return call_command(io, redis_fire_and_forget, (void *) argv[0], argc, argv,
                            io->deferred || (io->batcher && io->batcher->batches));
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
int batcher_new(RedisIo *io) {
        Batcher *bt = calloc(1, sizeof(*bt));
        sd_event *e = io->agent->event;
        int r;

        if (!bt)
                return -ENOMEM;
        io->batcher = bt;
        r = sd_event_add_defer(e, &bt->turn, on_batch_turn, io);
        if (r >= 0)
                r = sd_event_source_set_priority(bt->turn, PRIORITY_BATCH);
        if (r >= 0)
                r = sd_event_source_set_enabled(bt->turn, SD_EVENT_OFF);
        if (r >= 0)
                r = sd_event_add_time_relative(e, &bt->deadline, CLOCK_MONOTONIC, BATCH_WAIT_MAX, 0, on_batch_deadline,
                                               io);
        if (r >= 0)
                r = sd_event_source_set_priority(bt->deadline, PRIORITY_LEASES);
        if (r >= 0)
                r = sd_event_source_set_enabled(bt->deadline, SD_EVENT_OFF);
        return r;
}

/* Whatever waits hears Redis went (the agent's state is down by then). */
void batcher_free(RedisIo *io) {
        Batcher *bt = io->batcher;

        if (!bt)
                return;
        batch_flush_all(io);
        sd_event_source_disable_unref(bt->turn);
        sd_event_source_disable_unref(bt->deadline);
        io->batcher = mfree(bt);
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

/* A call on name (in slot) into the batch of this turn. */
static int batch_add(RedisIo *io, Script script, unsigned slot, const char *name, redis_reply_cb cb, void *userdata,
                     size_t n_args, const char *const *args, const size_t *arglens) {
        Batcher *bt = io->batcher;
        size_t mark, j;
        bool keep;
        Batch *b;
        int r;

        if (io->agent->state != REDIS_READY)
                return -ENOTCONN;
        if (!bt->batches) {
                /* Without them the turn's calls would wait for ever. */
                r = sd_event_source_set_enabled(bt->turn, SD_EVENT_ONESHOT);
                if (r >= 0)
                        r = sd_event_source_set_time_relative(bt->deadline, BATCH_WAIT_MAX);
                if (r >= 0)
                        r = sd_event_source_set_enabled(bt->deadline, SD_EVENT_ONESHOT);
                if (r < 0) {
                        redis_io_fatal(io, r, "arm the sending of the turn's calls to Redis");
                        return r;
                }
        }
        keep = script == SCRIPT_RENEW || script == SCRIPT_RELEASE;
        b = batch_find(io, slot, keep);
        if (b && b->n_calls > 0 && b->n_args + n_args > BATCH_ARGS_MAX) {
                if (keep)
                        batch_flush_slot(io, slot);
                else
                        batch_send(io, b);
                b = NULL;
        }
        if (!b) {
                b = calloc(1, sizeof(*b));
                if (!b)
                        return -ENOMEM;
                b->slot = slot;
                b->keep = keep;
                LIST_PREPEND(batches, bt->batches, b);
        }
        for (j = 0; j < b->n_names && !streq(b->names[j], name); j++)
                ;
        mark = b->n_args;
        r = 0;
        for (size_t i = 0; r >= 0 && i < n_args; i++)
                r = batch_push(b, args[i], arglens ? arglens[i] : strlen(args[i]));
        if (r < 0) {
                while (b->n_args > mark)
                        free(b->args[--b->n_args]);
                if (b->n_calls == 0) {
                        LIST_REMOVE(batches, bt->batches, b);
                        batch_free(b);
                }
                return r;
        }
        if (j == b->n_names)
                snprintf(b->names[b->n_names++], sizeof(b->names[0]), "%s", name);
        b->calls[b->n_calls++] = (BatchCall) {
                .script = script, .name = j, .arg0 = mark, .n_args = n_args, .cb = cb, .userdata = userdata,
        };
        if (b->n_calls == BATCH_MAX) {
                if (keep)
                        batch_flush_slot(io, slot);
                else
                        batch_send(io, b);
        }
        return 0;
}

/* Acquires, releases, renewals, re-assertions (after a reset, every holder
 * of the host at once) and adoptions wait for the end of the loop's turn;
 * anything else on the name goes after what waits, at once. The name's
 * hash slot is computed here, once: the batch, the call and its keys
 * take it from here. */
int script_call(Agent *a, Script script, const char *name, redis_reply_cb cb, void *userdata,
                size_t n_args, const char *const *args, const size_t *arglens) {
        RedisIo *io = a->redis_io;
        unsigned slot;

        if (!io || a->state != REDIS_READY)
                return -ENOTCONN;       /* (stopped: the agent exits) */
        slot = hash_slot_of_key(name, strlen(name));
        if (script == SCRIPT_ACQUIRE || script == SCRIPT_RELEASE || script == SCRIPT_RENEW ||
            script == SCRIPT_REASSERT || script == SCRIPT_ADOPT)
                return batch_add(io, script, slot, name, cb, userdata, n_args, args, arglens);
        batch_flush_slot(io, slot);
        return call_script_names(io, script, slot, 1, &name, cb, userdata, n_args, args, arglens);
}

