/* SPDX-License-Identifier: MIT */
/* The library's part of a shard's set-up (shard-setup.c): its version
 * and hash asked, the load claimed, the text loaded where it is missing
 * or older, a newer or changed one refused; and asked again while the
 * shard is up (shard_library_refresh()). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "lua-keys.h"
#include "lua-args.h"
#include "redis-layer.h"
#include "hash-slot.h"
#include "shard-internal.h"

#define LIBRARY_CLAIM_MS "5000"                         /* P:loading's life: one load's, with room */
#define LIBRARY_WAIT (200 * USEC_PER_MSEC)              /* another agent loading: the version asked again after */
#define LIBRARY_REFUSED "refused NOPERM "               /* P:loading of an agent whose load Redis refused, its host id after */
#define LIBRARY_LOADED "library loaded"                 /* P:loading once the load is done, for LIBRARY_LOADED_MS */
#define LIBRARY_LOADED_MS "1000"

/* The set-up's steps' replies (setup_send()). */
static void library_version_reply(Shard *sh, const RedisReply *reply, const SetupStep *step);
static void library_claim_reply(Shard *sh, const RedisReply *reply, const SetupStep *step);
static void library_code_reply(Shard *sh, const RedisReply *reply, const SetupStep *step);
static void library_load_new_reply(Shard *sh, const RedisReply *reply, const SetupStep *step);
static void library_load_replace_reply(Shard *sh, const RedisReply *reply, const SetupStep *step);

/* ---- The library ------------------------------------------------------------- */

/* The library ("fleetsem", lua/library.version) is Redis', not a
 * connection's: loaded once, by the first agent that finds it missing or
 * older than its own, kept across restarts where Redis persists. After a
 * restart every agent of the fleet asks at once and finds none; each that
 * sent its text (80 KB) would cost Redis a query buffer of that size until
 * its cron trims it (about 2 s), and each REPLACE compiles the text anew
 * in the functions' Lua heap, which keeps the chunk it replaced until its
 * garbage collector runs (used_memory_vm_functions). So an agent claims
 * the load first (SET P:loading NX PX, keys.list): the one that gets the
 * claim sends the text, the others ask the version again every
 * LIBRARY_WAIT until the library is there, or the claim ran out (its
 * agent gone: then one of them gets it); a load refused (NOPERM) is said
 * in the claim, and they refuse as its agent did. Where there is none, without
 * REPLACE all the same: a load that races another's (the claim expired,
 * deleted or refused) hears "already exists", refused before Redis
 * compiles anything, and asks the version again; an older one is
 * REPLACEd. Its functions' names carry its version, so that an agent
 * never runs another version's function with its own arguments: one that
 * a newer agent replaced hears "Function not found" on its next call
 * (calls.c) and comes here again, where it refuses the newer one. */

/* had: what Redis holds; NULL: nothing (loaded without REPLACE). */
static void library_load(Shard *sh, const char *had) {
        log_notice("Loading fleetsem's library, version %u, into Redis at %s (it had %s).", lua_library_version,
                   sh->name, had ?: "none");
        if (had)
                setup_send(sh, "FUNCTION LOAD REPLACE", library_load_replace_reply, 4,
                           (const char *[]) { "FUNCTION", "LOAD", "REPLACE", sh->io->library_text });
        else
                setup_send(sh, "FUNCTION LOAD", library_load_new_reply, 3,
                           (const char *[]) { "FUNCTION", "LOAD", sh->io->library_text });
}

/* The library's version and hash, and its text: the requests of its
 * check, the same at connect and once a renewal period
 * (shard_library_refresh()), so that the check needs no rule of the ACL
 * that set-up does not. */
static const char *const library_version_argv[] = { "FCALL", LUA_VERSION_FUNCTION, "0" };
static const char *const library_code_argv[] = { "FUNCTION", "LIST", "LIBRARYNAME", LUA_LIBRARY_NAME, "WITHCODE" };

void library_ask_version(Shard *sh) {
        setup_send(sh, "FCALL " LUA_VERSION_FUNCTION, library_version_reply, ELEMENTSOF(library_version_argv),
                   library_version_argv);
}

/* The agents' Redis user refuses the check of sh's library (what: the
 * command, rule: the ACL's rule for it, err: Redis' NOPERM). Nothing that
 * lasts until an operator acts may take held slots away: the library
 * verified at connect (its version and hash) is kept, holders keep their
 * slots and are renewed, and nothing new is granted (the NOPERM row of
 * protocol.c's table) until the check passes; said once, with the rule to
 * add, and in status (redis-io.c); asked again once a renewal period. */
static void library_check_refused(Shard *sh, const char *what, const char *rule, const char *err) {
        const char *user = sh->io->agent->config->redis.user ?: "default";
        char why[sizeof(sh->check_refused)];

        /* (Cut short where Redis' error is long.) */
        if (snprintf(why, sizeof(why), "Redis at %s refuses this agent's check of fleetsem's library (%s: %.160s): "
                     "allow it to the agents' Redis user (ACL SETUSER %s %s, and the same in redis.conf or its ACL "
                     "file; see fleetsem.conf(5) REDIS USERS); slots held are kept and renewed, nothing new is "
                     "granted until then, whatever on_error says", sh->name, what, err, user, rule) < 0)
                why[0] = '\0';
        if (streq(why, sh->check_refused))
                return;
        log_error("%s.", why);
        memcpy(sh->check_refused, why, sizeof(why));
        sh->io->ev.gate_changed(sh);
}

/* The check passed: a refusal of it is over. */
static void library_check_passed(Shard *sh) {
        if (!sh->check_refused[0])
                return;
        log_notice("Redis at %s lets this agent check fleetsem's library again, and it is this agent's: the refusal "
                   "of its check is over.", sh->name);
        sh->check_refused[0] = '\0';
        sh->io->ev.gate_changed(sh);
}

/* A check's reply that is an ACL refusal, said as library_check_refused(). */
static bool library_check_noperm(Shard *sh, const RedisReply *reply, const char *what, const char *rule) {
        const char *err = redis_reply_error(reply), *state = redis_state_of_error(err);

        if (!state || !streq(state, "NOPERM"))
                return false;
        library_check_refused(sh, what, rule, err);
        return true;
}

/* Why a changed text that this agent may not replace (Redis said err) is
 * refused, with the way out. */
static void library_changed_refusal(Shard *sh, const char *err, char *why, size_t size) {
        /* (Cut short where Redis' error is long.) */
        if (snprintf(why, size, "Redis at %s holds another text under fleetsem library version %u than this agent's, and "
                 "this agent may not replace it (%s): load this agent's with `fleetsemd --load-library` (as a Redis "
                 "user allowed FUNCTION LOAD); see fleetsemd(8) THE LIBRARY", sh->name, lua_library_version, err) < 0)
                why[0] = '\0';
}

/* Where this agent claims the load of sh's library: P:loading, in a
 * Cluster in the first hash slot its master owns, beside its epoch;
 * -ENOENT while it owns none (loaded unclaimed). */
static int library_claim_key(Shard *sh, char *buf, size_t size) {
        RedisIo *io = sh->io;
        const char *prefix = io->agent->config->key_prefix;
        int first = io->topo->epoch_hash_slot(io, sh);

        if (first == -1)
                return -ENOENT;
        if (first >= 0)
                snprintf(buf, size, KEY_LOADING_TAG_FMT, prefix, hash_slot_tag((unsigned) first));
        else
                snprintf(buf, size, KEY_LOADING_FMT, prefix);
        return 0;
}

/* argv of the claim: SET KEY HOST_ID NX PX LIBRARY_CLAIM_MS GET, which
 * answers nil where it set the key, and the claim there where it did not. */
static int library_claim_argv(Shard *sh, char *key, size_t size, const char *argv[static 7]) {
        int r = library_claim_key(sh, key, size);

        if (r < 0)
                return r;
        argv[0] = "SET", argv[1] = key, argv[2] = sh->io->agent->config->host_id;
        argv[3] = "NX", argv[4] = "PX", argv[5] = LIBRARY_CLAIM_MS, argv[6] = "GET";
        return 7;
}

static bool library_claim_is_own(Shard *sh, const char *s, size_t len) {
        const char *host = sh->io->agent->config->host_id;

        return len == strlen(host) && memcmp(s, host, len) == 0;
}

/* The claim's reply: 1 this agent loads, 0 another agent does, -EPERM
 * another agent's load was refused (NOPERM) within LIBRARY_CLAIM_MS,
 * -EACCES this agent's own, -EBADMSG none of these. Refused itself (a Redis user that may not SET
 * it, say): this agent loads, unclaimed, as agents did before the claim. */
static int library_claim_parse(Shard *sh, const RedisReply *reply) {
        const char *err = redis_reply_error(reply), *s;
        size_t len;

        if (err) {
                log_debug("Redis at %s refused the claim on loading fleetsem's library (%s): loading it unclaimed.",
                          sh->name, err);
                return 1;
        }
        if (redis_reply_is_nil(reply))
                return 1;
        if (redis_reply_string(reply, &s, &len) < 0)
                return -EBADMSG;
        if (len >= strlen(LIBRARY_REFUSED) && memcmp(s, LIBRARY_REFUSED, strlen(LIBRARY_REFUSED)) == 0) {
                s += strlen(LIBRARY_REFUSED);
                len -= strlen(LIBRARY_REFUSED);
                /* (Its own too: not tried again before the mark ran out,
                 * which another agent, whose user may load, takes then.) */
                return library_claim_is_own(sh, s, len) ? -EACCES : -EPERM;
        }
        /* (This agent's own, from a connection before this one.) */
        return library_claim_is_own(sh, s, len);
}

/* What became of this agent's load, in its claim (SET XX: a claim that
 * ran out stays gone) for ms more; in_setup: a step of the set-up, so
 * that it is sent before a set-up that fails closes the connection. */
static void library_claim_say(Shard *sh, const char *value, const char *ms, bool in_setup) {
        char key[IDENT_MAX_LEN + 32];
        const char *argv[] = { "SET", key, value, "XX", "PX", ms };

        if (library_claim_key(sh, key, sizeof(key)) < 0)
                return;
        if (in_setup)
                setup_send(sh, "SET " KEY_LOADING " XX", NULL, ELEMENTSOF(argv), argv);
        else
                (void) redis_conn_command(sh->cmd, redis_fire_and_forget, (void *) "SET " KEY_LOADING " XX",
                                          ELEMENTSOF(argv), argv, NULL);
}

/* This agent's load is done: its claim kept LIBRARY_LOADED_MS more, for
 * the agents that asked the version before the load and claim after it
 * (they wait, and find the library), then gone, so that a library lost
 * again soon after is loaded again then, not once the claim ran out. */
static void library_claim_release(Shard *sh) {
        library_claim_say(sh, LIBRARY_LOADED, LIBRARY_LOADED_MS, false);
}

/* This agent's load was refused (NOPERM): said in its claim, so that the
 * agents waiting for it refuse at once, as this one, rather than claim
 * and send the text in turn; the next claim, once it ran out, tries again. */
static void library_claim_refused(Shard *sh) {
        char value[sizeof(LIBRARY_REFUSED) + IDENT_MAX_LEN];

        snprintf(value, sizeof(value), LIBRARY_REFUSED "%s", sh->io->agent->config->host_id);
        library_claim_say(sh, value, LIBRARY_CLAIM_MS, true);
}

/* Redis holds no library this agent can use, and who ("this agent",
 * "another agent") may not load its own (why: Redis' word, or the claim's):
 * refused with the way out. */
static void library_load_refused(Shard *sh, const char *who, const char *why) {
        char text[sizeof(sh->error)];

        if (sh->setup_changed) {
                library_changed_refusal(sh, why, text, sizeof(text));
                setup_fail(sh, refusing("library-changed"), "%s", text);
        } else
                setup_fail(sh, refusing("NOPERM"), "Redis at %s has no fleetsem library version %u, and %s may not load "
                           "it (%s): load it with `fleetsemd --load-library` (as a Redis user allowed FUNCTION LOAD), "
                           "or allow the agents' user function|load; see fleetsemd(8) THE LIBRARY", sh->name,
                           lua_library_version, who, why);
}

/* had as library_load() takes it: the library loaded where this agent
 * gets the claim, else the version asked again after LIBRARY_WAIT. */
static void library_claim(Shard *sh, const char *had) {
        char key[IDENT_MAX_LEN + 32];
        const char *argv[7];
        SetupStep *step;

        if (library_claim_argv(sh, key, sizeof(key), argv) < 0) {
                library_load(sh, had);
                return;
        }
        step = setup_send(sh, "SET " KEY_LOADING " NX", library_claim_reply, ELEMENTSOF(argv), argv);
        if (step)
                snprintf(step->had, sizeof(step->had), "%s", had ?: "");
}

static int library_wait_done(sd_event_source *s, uint64_t usec, void *userdata) {
        Shard *sh = userdata;

        (void) s, (void) usec;
        if (!sh->cmd)
                return 0;       /* (gone with its connection: shard_disconnect()) */
        library_ask_version(sh);
        setup_step_done(sh);    /* (the wait's own step) */
        return 0;
}

/* Another agent loads the library: its version asked again after
 * LIBRARY_WAIT, the set-up waiting meanwhile (a step of its own, which
 * shard_disconnect() drops with the connection). */
static void library_wait(Shard *sh) {
        sd_event *e = sh->io->agent->event;
        int r;

        log_debug("Another agent loads fleetsem's library into Redis at %s; asking its version again shortly.",
                  sh->name);
        if (!sh->library_wait)
                r = sd_event_add_time_relative(e, &sh->library_wait, CLOCK_MONOTONIC, LIBRARY_WAIT, 0,
                                               library_wait_done, sh);
        else {
                r = sd_event_source_set_time_relative(sh->library_wait, LIBRARY_WAIT);
                if (r >= 0)
                        r = sd_event_source_set_enabled(sh->library_wait, SD_EVENT_ONESHOT);
        }
        if (r < 0) {
                setup_fail(sh, NULL, "cannot wait for another agent's load of the library");
                return;
        }
        sh->setup_pending++;
}

static void library_claim_reply(Shard *sh, const RedisReply *reply, const SetupStep *step) {
        const char *had = step->had;
        int r = library_claim_parse(sh, reply);

        if (r > 0)
                library_load(sh, had[0] ? had : NULL);
        else if (r == 0)
                library_wait(sh);
        else if (r == -EPERM)
                library_load_refused(sh, "another agent", "NOPERM: another agent's FUNCTION LOAD was refused a moment ago");
        else if (r == -EACCES)
                library_load_refused(sh, "this agent", "NOPERM: this agent's FUNCTION LOAD was refused a moment ago");
        else
                setup_fail(sh, NULL, "SET " KEY_LOADING " NX gave an unexpected reply");
}

static void library_newer(Shard *sh, long long version) {
        char why[sizeof(sh->library_refused)];

        snprintf(why, sizeof(why), "Redis at %s holds fleetsem library version %lld, newer than this agent's (%u): "
                 "this agent is older than the library there and must be upgraded; see fleetsemd(8) UPGRADING",
                 sh->name, version, lua_library_version);
        setup_fail(sh, refusing("library-newer"), "%s", why);
}

/* The text under this agent's version must be this agent's: one of
 * another build (another hash) or edited by hand (its limit check taken
 * out, say) is replaced, said as a warning; where the agent may not load
 * it, refused (library-changed) with the way out. The hash that
 * fleetsem_version returns is asked at each connection and every
 * LIBRARY_EVERY (shard_library_refresh()), a few bytes; the text itself,
 * whose hash a hand could leave as it was, is read and compared byte for
 * byte once, at the agent's first set-up of the server, not at each
 * reconnection (a fleet reconnecting at once would read it ten thousand
 * times). */
static void library_ask_code(Shard *sh) {
        setup_send(sh, "FUNCTION LIST", library_code_reply, ELEMENTSOF(library_code_argv), library_code_argv);
}

static void library_changed_say(Shard *sh, const char *why) {
        log_warning("Redis at %s holds another text under fleetsem library version %u than this agent's (%s): "
                    "replacing it with this agent's.", sh->name, lua_library_version, why);
}

static void library_replace_changed(Shard *sh, const char *why) {
        char had[64];

        library_changed_say(sh, why);
        snprintf(had, sizeof(had), "version %u, another text", lua_library_version);
        sh->setup_changed = true;
        library_claim(sh, had);
}

static void library_code_reply(Shard *sh, const RedisReply *reply, const SetupStep *step) {
        (void) step;
        const char *err = redis_reply_error(reply);
        int r = library_code_parse(reply, sh->io->library_text);

        if (r == 0) {
                sh->text_read = true;
                library_check_passed(sh);
                return;
        }
        if (r == -EIO && library_check_noperm(sh, reply, "FUNCTION LIST", "+function|list"))
                return;         /* (the set-up goes on) */
        if (r == -EIO) {
                setup_fail_redis(sh, "FUNCTION LIST", err);
                return;
        }
        library_replace_changed(sh, r == -EBADMSG ? "FUNCTION LIST answered in a shape this agent cannot read" :
                                "its own hash, another text: changed by hand?");
}

/* FCALL fleetsem_version: {VERSION, WAKE_COMMAND, HASH}, or no such function. */
static void library_version_reply(Shard *sh, const RedisReply *reply, const SetupStep *step) {
        (void) step;
        long long version = 0;
        bool sharded = false;
        char hash[LUA_LIBRARY_HASH_LEN + 1], had[64];
        int r = library_version_parse(reply, &version, &sharded, hash);

        if (r == -ENOENT)
                /* (Again after a lost race: a library of that name without
                 * the function, not ours; replaced.) */
                library_claim(sh, sh->setup_raced ? "one without " LUA_VERSION_FUNCTION : NULL);
        else if (r == -EOPNOTSUPP)
                setup_fail(sh, refusing("no-functions"), "Redis at %s has no FCALL (Redis functions): fleetsem needs Redis 7.0 or later, or "
                           "Valkey 7.2 or later; see fleetsemd(8)", sh->name);
        else if (r == -EBADMSG)
                setup_fail(sh, refusing("library-unknown"), "Redis at %s holds a fleetsem library whose version this agent cannot read; see "
                           "fleetsemd(8) THE LIBRARY", sh->name);
        else if (r < 0)
                setup_fail_redis(sh, "FCALL " LUA_VERSION_FUNCTION, redis_reply_error(reply));
        else switch (library_match(version, sharded, hash, sh->io->topo->sharded)) {
        case LIBRARY_NEWER:
                library_newer(sh, version);
                break;
        case LIBRARY_OLDER:
                snprintf(had, sizeof(had), "version %lld%s", version, sharded == sh->io->topo->sharded ? "" :
                         sharded ? ", a Cluster's" : ", not a Cluster's");
                library_claim(sh, had);
                break;
        case LIBRARY_CHANGED:
                library_replace_changed(sh, hash[0] ? "another hash: another build's?" : "no hash: changed by hand?");
                break;
        case LIBRARY_OWN:
                if (!sh->text_read)
                        library_ask_code(sh);
                else
                        library_check_passed(sh);
                break;
        }
}

/* new: loaded without REPLACE (there was none). */
static void library_load_reply(Shard *sh, const RedisReply *reply, bool new) {
        const char *err = redis_reply_error(reply), *name;
        size_t len;

        if (err && new && strstr(err, "already exists")) {
                /* Another agent loaded one since we asked: which version? */
                log_debug("Redis at %s has a fleetsem library now (%s); asking its version again.", sh->name, err);
                sh->setup_raced = true;
                library_ask_version(sh);
        } else if (err && strneq(err, "NOPERM", 6)) {
                library_claim_refused(sh);
                library_load_refused(sh, "this agent", err);
        } else if (err)
                setup_fail(sh, NULL, "FUNCTION LOAD of fleetsem's library failed: %s", err);
        else if (redis_reply_string(reply, &name, &len) < 0 || len != strlen(LUA_LIBRARY_NAME) ||
                 memcmp(name, LUA_LIBRARY_NAME, len) != 0)
                setup_fail(sh, NULL, "FUNCTION LOAD gave an unexpected reply");
        else {
                sh->text_read = true;   /* (its own: nothing to read) */
                library_claim_release(sh);
        }
}

static void library_load_new_reply(Shard *sh, const RedisReply *reply, const SetupStep *step) {
        (void) step;
        library_load_reply(sh, reply, true);
}

static void library_load_replace_reply(Shard *sh, const RedisReply *reply, const SetupStep *step) {
        (void) step;
        library_load_reply(sh, reply, false);
}
/* The library's version and hash asked again on a server that is up: a
 * text replaced under the agents' version while they stay connected is
 * found within every and replaced there and then, the server kept up
 * (nobody's request fails meanwhile: the calls before the replacement ran
 * the other text, those after it run this agent's). Where this agent may
 * not load, refused (library-changed) with the way out; where the load
 * fails otherwise, the server is set up again. */
static void library_fix_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Shard *sh = userdata;
        const char *err = redis_reply_error(reply);
        char why[sizeof(sh->error)];

        if (!reply || conn != sh->cmd || sh->state != REDIS_READY)
                return;
        if (!err) {
                library_claim_release(sh);
                return;
        }
        if (strneq(err, "NOPERM", 6)) {
                library_changed_refusal(sh, err, why, sizeof(why));
                shard_refuse(sh, sh->library_refused, sizeof(sh->library_refused), refusing("library-changed"), why);
                return;
        }
        snprintf(why, sizeof(why), "FUNCTION LOAD REPLACE of its changed fleetsem library failed (%s): setting it "
                 "up again", err);
        shard_down(sh, -ESTALE, why);
}

/* A text found changed: replaced now (this agent has the claim, or none
 * can be made). */
static void library_fix_now(Shard *sh) {
        library_changed_say(sh, sh->library_fix_why);
        if (redis_conn_command(sh->cmd, library_fix_reply, sh, 4,
                               (const char *[]) { "FUNCTION", "LOAD", "REPLACE", sh->io->library_text }, NULL) < 0)
                shard_down(sh, -EIO, "cannot send commands");
}

/* The claim on replacing a text found changed under running agents: this
 * agent replaces it where it has the claim; where another agent has it,
 * that one does, and the next check here finds this agent's text. */
static void library_fix_claim_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Shard *sh = userdata;
        int r;

        if (!reply || conn != sh->cmd || sh->state != REDIS_READY)
                return;
        r = library_claim_parse(sh, reply);
        if (r == 0)
                log_debug("Another agent replaces the changed fleetsem library in Redis at %s.", sh->name);
        if (r > 0)
                library_fix_now(sh);
}

/* A text found changed (why) on a server that is up: replaced, by the
 * agent that claims it. */
static void library_fix(Shard *sh, const char *why) {
        char key[IDENT_MAX_LEN + 32];
        const char *argv[7];

        sh->library_fix_why = why;
        if (library_claim_argv(sh, key, sizeof(key), argv) < 0) {
                library_fix_now(sh);
                return;
        }
        if (redis_conn_command(sh->cmd, library_fix_claim_reply, sh, ELEMENTSOF(argv), argv, NULL) < 0)
                shard_down(sh, -EIO, "cannot send commands");
}

/* The periodic check's reply (the request of library_version_reply()'s step, or of
 * library_code_reply()'s). */
static void library_check_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Shard *sh = userdata;
        long long version = 0;
        bool sharded = false;
        char hash[LUA_LIBRARY_HASH_LEN + 1];
        int r;

        if (!reply || conn != sh->cmd)
                return;
        sh->library_inflight = false;
        if (sh->state != REDIS_READY ||
            library_check_noperm(sh, reply, sh->text_read ? "FCALL " LUA_VERSION_FUNCTION : "FUNCTION LIST",
                                 sh->text_read ? "+fcall" : "+function|list"))
                return;
        if (!sh->text_read) {
                /* The text, not read at connect (its ACL refused it). */
                r = library_code_parse(reply, sh->io->library_text);
                if (r == 0) {
                        sh->text_read = true;
                        library_check_passed(sh);
                } else if (r != -EIO)
                        library_fix(sh, r == -EBADMSG ? "FUNCTION LIST answered in a shape this agent cannot read" :
                                    "its own hash, another text: changed by hand?");
                return;
        }
        /* (No function, a newer version: the next call hears it and sets
         * the server up again, calls.c; an error is the next call's too.) */
        if (library_version_parse(reply, &version, &sharded, hash) < 0)
                return;
        switch (library_match(version, sharded, hash, sh->io->topo->sharded)) {
        case LIBRARY_CHANGED:
                library_fix(sh, hash[0] ? "another hash: another build's?" : "no hash: changed by hand?");
                break;
        case LIBRARY_OWN:
                library_check_passed(sh);
                break;
        default:
                break;
        }
}

/* Once every: the version and hash; the whole text instead where it was
 * not read at connect. */
void shard_library_refresh(Shard *sh, usec_t every, usec_t now) {
        if (sh->state != REDIS_READY || sh->library_inflight || now - sh->library_asked < every)
                return;
        if (redis_conn_command(sh->cmd, library_check_reply, sh,
                               sh->text_read ? ELEMENTSOF(library_version_argv) : ELEMENTSOF(library_code_argv),
                               sh->text_read ? library_version_argv : library_code_argv, NULL) < 0)
                return;
        sh->library_inflight = true;
        sh->library_asked = now;
}

int library_code_parse(const RedisReply *reply, const char *text) {
        const RedisReply *lib;
        size_t n;

        if (!reply || redis_reply_error(reply))
                return -EIO;
        if (!redis_reply_is_array(reply))
                return -EBADMSG;
        if (redis_reply_array_len(reply) == 0)
                return -ESTALE;         /* (gone since the version was read) */
        lib = redis_reply_array_get(reply, 0);
        if (redis_reply_array_len(reply) != 1 || !redis_reply_is_array(lib))
                return -EBADMSG;
        /* Its fields, name and value in turn: library_code. */
        n = redis_reply_array_len(lib);
        for (size_t i = 0; i + 1 < n; i += 2) {
                const char *key, *code;
                size_t klen, clen;

                if (redis_reply_string(redis_reply_array_get(lib, i), &key, &klen) < 0)
                        return -EBADMSG;
                if (klen != strlen("library_code") || memcmp(key, "library_code", klen) != 0)
                        continue;
                if (redis_reply_string(redis_reply_array_get(lib, i + 1), &code, &clen) < 0)
                        return -EBADMSG;
                return clen == strlen(text) && memcmp(code, text, clen) == 0 ? 0 : -ESTALE;
        }
        return -EBADMSG;
}

int library_version_parse(const RedisReply *reply, long long *ret_version, bool *ret_sharded, char ret_hash[static 65]) {
        const char *err = redis_reply_error(reply);
        long long version;
        char wake[16], hash[LUA_LIBRARY_HASH_LEN + 2];
        size_t n;

        if (err && strneq(err, "ERR Function not found", 22))
                return -ENOENT;
        if (err && strneq(err, "ERR unknown command", 19))
                return -EOPNOTSUPP;
        if (err || !reply)
                return -EIO;
        n = redis_reply_array_len(reply);
        if ((n != 2 && n != 3) || redis_reply_array_integer(reply, 0, &version) < 0 || version < 1 ||
            version > INT32_MAX || redis_reply_array_string(reply, 1, wake, sizeof(wake)) < 0 ||
            (!streq(wake, "PUBLISH") && !streq(wake, "SPUBLISH")))
                return -EBADMSG;
        /* The hash: exactly 64 lower-case hex digits, or none. */
        if (n < 3 || redis_reply_array_string(reply, 2, hash, sizeof(hash)) < 0 ||
            strlen(hash) != LUA_LIBRARY_HASH_LEN || strspn(hash, "0123456789abcdef") != LUA_LIBRARY_HASH_LEN)
                hash[0] = '\0';
        *ret_version = version;
        *ret_sharded = streq(wake, "SPUBLISH");
        memcpy(ret_hash, hash, strlen(hash) + 1);
        return 0;
}

LibraryMatch library_match(long long version, bool sharded, const char *hash, bool want_sharded) {
        if (version > (long long) lua_library_version)
                return LIBRARY_NEWER;
        if (version < (long long) lua_library_version || sharded != want_sharded)
                return LIBRARY_OLDER;
        return streq(hash, lua_library_hash) ? LIBRARY_OWN : LIBRARY_CHANGED;
}
