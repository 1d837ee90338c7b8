/* SPDX-License-Identifier: MIT */
/* Calls: a command formatted once (its own copy of its arguments, in
 * Redis' wire format, sent as it is every time), sent to the shard
 * that holds its keys (the topology says which), and sent again where
 * Redis says: after MOVED (the slot lives elsewhere now) and ASK (one slot
 * half migrated: once, after ASKING), a little later after TRYAGAIN. A
 * library gone from a server (or replaced by a newer one) takes that
 * server down, to be set up again (shard-setup.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "lua-keys.h"
#include "redis-layer.h"
#include "hash-slot.h"
#include "script-args.h"

#define REDIRECTS_MAX 5                 /* MOVED and ASK followed for one call */
#define TRYAGAIN_DELAY (20 * USEC_PER_MSEC)     /* TRYAGAIN (a slot half migrated): again that soon */

struct Call {
        RedisIo *io;
        LIST_FIELDS(Call, parked);
        int script;                     /* a Script, or -1: a plain command */
        unsigned slot;
        Shard *ask;                     /* ASK: this once, there, after ASKING */
        unsigned redirects;
        usec_t tryagain_since;          /* the first TRYAGAIN, CLOCK_MONOTONIC (0: none) */
        sd_event_source *retry;
        redis_reply_cb cb;
        void *userdata;
        char *cmd;                      /* formatted: redis_command_format() */
        size_t cmd_len;
};

static void call_reply(RedisConn *conn, const RedisReply *reply, void *userdata);

static Call *call_free(Call *c) {
        if (!c)
                return NULL;
        sd_event_source_disable_unref(c->retry);
        redis_command_free(c->cmd);
        return mfree(c);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(Call *, call_free);

/* The call's answer, to its caller: NULL when Redis went before it came. */
static void call_done(Call *c, RedisConn *conn, const RedisReply *reply) {
        c->cb(conn, reply, c->userdata);
        call_free(c);
}

Shard *shard_of_name(RedisIo *io, const char *name) {
        return io->topo->shard_of_hash_slot(io, hash_slot_of_key(name, strlen(name)));
}

/* Sends c where it goes; -ENOTCONN when that shard is not up (or not
 * known), and then c is not sent. */
static int call_send(Call *c) {
        RedisIo *io = c->io;
        Shard *sh = c->ask ?: io->topo->shard_of_hash_slot(io, c->slot);

        if (!sh || !sh->cmd || sh->state != REDIS_READY)
                return -ENOTCONN;
        if (c->ask && redis_conn_command(sh->cmd, redis_fire_and_forget, (void *) "ASKING", 1,
                                         (const char *[]) { "ASKING" }, NULL) < 0)
                return -ENOTCONN;
        return redis_conn_send_formatted(sh->cmd, call_reply, c, c->cmd, c->cmd_len);
}

/* Sends c again; when it cannot go, its caller hears Redis went. */
static void call_resend(Call *c, RedisConn *conn) {
        if (call_send(c) < 0)
                call_done(c, conn, NULL);
}

void calls_unpark(Shard *sh, bool send) {
        Call *c;

        while ((c = sh->parked)) {
                LIST_REMOVE(parked, sh->parked, c);
                if (send)
                        call_resend(c, sh->cmd);
                else
                        call_done(c, NULL, NULL);
        }
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
                return sd_event_add_time_relative(c->io->agent->event, &c->retry, CLOCK_MONOTONIC, TRYAGAIN_DELAY, 0,
                                                  on_call_retry, c);
        if (sd_event_source_set_time_relative(c->retry, TRYAGAIN_DELAY) < 0)
                return -EIO;
        return sd_event_source_set_enabled(c->retry, SD_EVENT_ONESHOT);
}

/* "MOVED 3999 127.0.0.1:6381" and "ASK …": the slot, and where it is now. */
static int redirect_parse(const char *err, unsigned *ret_slot, char *host, size_t host_size, uint16_t *ret_port) {
        const char *w = strchr(err, ' '), *sp, *colon;
        char slot_s[8], port_s[8];
        uint64_t slot, port;
        size_t hl;

        sp = w ? strchr(w + 1, ' ') : NULL;
        colon = sp ? strrchr(sp + 1, ':') : NULL;
        if (!sp || !colon || (hl = (size_t) (colon - sp - 1)) == 0 || hl >= host_size ||
            strlen(colon + 1) >= sizeof(port_s) || (size_t) (sp - w - 1) >= sizeof(slot_s))
                return -EBADMSG;
        memcpy(slot_s, w + 1, (size_t) (sp - w - 1));
        slot_s[sp - w - 1] = '\0';
        memcpy(host, sp + 1, hl);
        host[hl] = '\0';
        strcpy(port_s, colon + 1);
        if (parse_uint64(slot_s, 0, HASH_SLOTS - 1, &slot) < 0 || parse_uint64(port_s, 1, 65535, &port) < 0)
                return -EBADMSG;
        *ret_slot = (unsigned) slot;
        *ret_port = (uint16_t) port;
        return 0;
}

/* MOVED or ASK for c's own slot, where the topology can follow it: true
 * when c went on (sent again, or parked until its shard is up). */
static bool call_redirect(Call *c, RedisConn *conn, const char *err) {
        RedisIo *io = c->io;
        bool moved = strneq(err, "MOVED ", 6);
        char host[256];
        uint16_t port;
        unsigned slot;
        Shard *to;

        if ((!moved && !strneq(err, "ASK ", 4)) || c->redirects >= REDIRECTS_MAX ||
            redirect_parse(err, &slot, host, sizeof(host), &port) < 0 || slot != c->slot ||
            !(to = io->topo->redirect(io, slot, host, port, moved)))
                return false;
        c->redirects++;
        c->ask = moved ? NULL : to;
        if (to->state == REDIS_CONNECTING && moved)
                LIST_PREPEND(parked, to->parked, c);    /* sent when it is up */
        else
                call_resend(c, conn);
        return true;
}

/* TRYAGAIN: the slot is being migrated, and Redis serves a script on it
 * once all its keys are on one node. Again and again for a third of a
 * lease; then as if Redis had gone (asked again later, renewed on the next
 * round). */
static void call_tryagain(Call *c, RedisConn *conn) {
        usec_t now = now_mono();

        if (c->tryagain_since == 0)
                c->tryagain_since = now;
        if (now - c->tryagain_since < c->io->agent->config->lease_ttl / 3 && call_retry_later(c) >= 0)
                return;
        call_done(c, conn, NULL);
}

static void call_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Call *c = userdata;
        RedisIo *io = c->io;
        const char *err = redis_reply_error(reply);

        c->ask = NULL;
        if (!err)
                goto done;
        if (c->script >= 0 && (strneq(err, "ERR Function not found", 22) || strneq(err, "ERR Library not found", 21))) {
                /* The server lost this agent's library (FUNCTION DELETE or
                 * FLUSH, a restart without it) or holds a newer one: set up
                 * again, where it is loaded or refused; the call hears
                 * Redis went, as its other calls do. */
                Shard *sh = shard_of_conn(io, conn);
                char why[200];

                snprintf(why, sizeof(why), "it has no function %s (its fleetsem library was deleted, or replaced by "
                         "another version): setting it up again", lua_function[c->script]);
                if (sh)
                        shard_down(sh, -ENOENT, why);
                call_done(c, NULL, NULL);
                return;
        }
        if (!io->topo->redirect)
                goto done;
        if (call_redirect(c, conn, err))
                return;
        if (strneq(err, "TRYAGAIN", 8)) {
                call_tryagain(c, conn);
                return;
        }
        if (strneq(err, "CLUSTERDOWN", 11) || strneq(err, "MOVED ", 6) || strneq(err, "ASK ", 4))
                io->topo->refresh(io);
done:
        call_done(c, conn, reply);
}

/* A call of argv (script: a Script, argv FCALL of its function; -1: a
 * plain command) on keys in slot, formatted here once: its arguments are
 * not copied again, nor formatted again when it is sent again. */
static Call *call_new(RedisIo *io, int script, unsigned slot, redis_reply_cb cb, void *userdata, int argc,
                      const char *const *argv, const size_t *argvlen) {
        _cleanup_(call_freep) Call *c = malloc(sizeof(*c));

        if (!c)
                return NULL;
        *c = (Call) { .io = io, .script = script, .slot = slot, .cb = cb, .userdata = userdata };
        if (redis_command_format(argc, argv, argvlen, &c->cmd, &c->cmd_len) < 0)
                return NULL;
        return TAKE_PTR(c);
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

int call_command(RedisIo *io, redis_reply_cb cb, void *userdata, int argc, const char *const *argv, bool defer) {
        Call *c = call_new(io, -1, hash_slot_of_key(argv[1], strlen(argv[1])), cb, userdata, argc, argv, NULL);

        if (c && defer) {
                LIST_PREPEND(parked, io->deferred, c);
                return 0;
        }
        return call_start(c);
}

void calls_send_deferred(RedisIo *io) {
        Call *c, *oldest = NULL;

        /* The list holds the newest first. */
        LIST_FOREACH(parked, c, io->deferred)
                oldest = c;
        io->deferred = NULL;
        while ((c = oldest)) {
                oldest = c->parked_prev;
                c->parked_next = c->parked_prev = NULL;
                (void) call_start(c);
        }
}

uint64_t redis_grace_until(Agent *a, const char *name) {
        Shard *sh = a->redis_io ? shard_of_name(a->redis_io, name) : NULL;

        return sh ? sh->grace_until_ms : 0;
}

/* Keys of names (n_names of them, each once): each name's own, one name
 * after the other, then the fleet's clock key and the census
 * (script_key(); where keys are sharded, in the names' slot, which they
 * must all share: a script's keys are on one node). */
int call_script_names(RedisIo *io, Script script, unsigned slot, size_t n_names, const char *const *names,
                      redis_reply_cb cb, void *userdata, size_t n_args, const char *const *args,
                      const size_t *arglens) {
        enum { KEY_SIZE = SCRIPT_KEY_SIZE };
        const char *prefix = io->agent->config->key_prefix;
        size_t n_keys = n_names * N_KEYS + (N_SCRIPT_KEYS - N_KEYS), head = 3;
        char n_keys_s[24];
        _cleanup_free_ char *keys = NULL;
        _cleanup_free_ const char **argv = NULL;
        _cleanup_free_ size_t *lens = NULL;

        if (io->agent->state != REDIS_READY)
                return -ENOTCONN;
        if (n_names == 0)
                return -EINVAL;
        keys = malloc(n_keys * KEY_SIZE);
        argv = calloc(head + n_keys + n_args, sizeof(char *));
        lens = calloc(head + n_keys + n_args, sizeof(size_t));
        if (!keys || !argv || !lens)
                return -ENOMEM;
        argv[0] = "FCALL";
        lens[0] = strlen(argv[0]);
        argv[1] = lua_function[script];
        lens[1] = strlen(argv[1]);
        argv[2] = n_keys_s;
        lens[2] = (size_t) snprintf(n_keys_s, sizeof(n_keys_s), "%zu", n_keys);
        for (size_t i = 0; i < n_keys; i++) {
                char *k = keys + i * KEY_SIZE;
                int n;

                n = script_key(k, prefix, names, n_names, io->topo->sharded, slot, i);
                argv[head + i] = k;
                lens[head + i] = (size_t) n;
        }
        for (size_t i = 0; i < n_args; i++) {
                argv[head + n_keys + i] = args[i];
                lens[head + n_keys + i] = arglens ? arglens[i] : strlen(args[i]);
        }
        return call_start(call_new(io, (int) script, slot, cb, userdata, (int) (head + n_keys + n_args), argv, lens));
}
