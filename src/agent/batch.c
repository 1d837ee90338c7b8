/* SPDX-License-Identifier: MIT */
/* Group commit: acquires, releases and renewals of one name that reach the
 * agent in one turn of its loop (every event ready at once has been
 * handled) go to Redis as one script call (batch.lua), which runs them in
 * order and answers each as its own script would: Redis runs one script,
 * not one per request. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis-layer.h"

#define BATCH_MAX 64            /* calls in one batch; a full one goes at once */
#define BATCH_WAIT_MAX (2 * USEC_PER_MSEC)

typedef struct BatchCall {
        Script script;
        redis_reply_cb cb;
        void *userdata;
} BatchCall;

typedef struct Batch Batch;
struct Batch {
        LIST_FIELDS(Batch, batches);
        char name[NAME_MAX_LEN + 1];
        BatchCall calls[BATCH_MAX];
        size_t n_calls;
        char **args;            /* for each call: its kind, its number of args, then them */
        size_t *lens;
        size_t n_args, cap_args;
};

struct Batcher {
        Batch *batches;                 /* calls waiting, one batch per name */
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

        for (size_t i = 0; i < b->n_calls; i++)
                b->calls[i].cb(conn, each ? redis_reply_array_get(reply, i) : reply, b->calls[i].userdata);
        batch_free(b);
}

static void batch_send(RedisIo *io, Batch *b) {
        LIST_REMOVE(batches, io->batcher->batches, b);
        if (b->n_calls == 1) {
                /* Alone: its own script, args after its kind and count. */
                BatchCall *c = &b->calls[0];

                if (call_script_now(io, c->script, b->name, c->cb, c->userdata, b->n_args - 2,
                                    (const char *const *) b->args + 2, b->lens + 2) < 0)
                        c->cb(NULL, NULL, c->userdata);
                batch_free(b);
                return;
        }
        if (call_script_now(io, SCRIPT_BATCH, b->name, batch_reply, b, b->n_args, (const char *const *) b->args,
                            b->lens) < 0)
                batch_reply(NULL, NULL, b);
}

static Batch *batch_find(RedisIo *io, const char *name) {
        Batch *b;

        LIST_FOREACH(batches, b, io->batcher->batches)
                if (streq(b->name, name))
                        return b;
        return NULL;
}

void batch_flush_name(RedisIo *io, const char *name) {
        Batch *b = batch_find(io, name);

        if (b)
                batch_send(io, b);
}

void batch_flush_all(RedisIo *io) {
        Batcher *bt = io->batcher;

        if (!bt)
                return;
        while (bt->batches)
                batch_send(io, bt->batches);
        (void) sd_event_source_set_enabled(bt->deadline, SD_EVENT_OFF);
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

int batch_add(RedisIo *io, Script script, const char *name, redis_reply_cb cb, void *userdata, size_t n_args,
              const char *const *args, const size_t *arglens) {
        Batcher *bt = io->batcher;
        size_t mark;
        char count[24];
        Batch *b;
        int r;

        if (io->agent->state != REDIS_READY)
                return -ENOTCONN;
        if (!bt->batches) {
                (void) sd_event_source_set_enabled(bt->turn, SD_EVENT_ONESHOT);
                if (sd_event_source_set_time_relative(bt->deadline, BATCH_WAIT_MAX) >= 0)
                        (void) sd_event_source_set_enabled(bt->deadline, SD_EVENT_ONESHOT);
        }
        b = batch_find(io, name);
        if (!b) {
                b = calloc(1, sizeof(*b));
                if (!b)
                        return -ENOMEM;
                snprintf(b->name, sizeof(b->name), "%s", name);
                LIST_PREPEND(batches, bt->batches, b);
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
                        LIST_REMOVE(batches, bt->batches, b);
                        batch_free(b);
                }
                return r;
        }
        b->calls[b->n_calls++] = (BatchCall) { .script = script, .cb = cb, .userdata = userdata };
        if (b->n_calls == BATCH_MAX)
                batch_send(io, b);
        return 0;
}

/* Acquires, releases, renewals and adoptions wait for the end of the
 * loop's turn; anything else on the name goes after what waits, at once. */
int script_call(Agent *a, Script script, const char *name, redis_reply_cb cb, void *userdata,
                size_t n_args, const char *const *args, const size_t *arglens) {
        RedisIo *io = a->redis_io;

        if (script == SCRIPT_ACQUIRE || script == SCRIPT_RELEASE || script == SCRIPT_RENEW || script == SCRIPT_ADOPT)
                return batch_add(io, script, name, cb, userdata, n_args, args, arglens);
        batch_flush_name(io, name);
        return call_script_now(io, script, name, cb, userdata, n_args, args, arglens);
}

