/* SPDX-License-Identifier: MIT */
/* A shard's connections made, and its command connection set up (AUTH,
 * SELECT, the library's version asked, and the library loaded when it is
 * missing or older, ROLE where a failover may have replaced it, INFO, then
 * the epoch that tells a Redis that lost its state) until the shard is
 * ready (shard.c). */
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

#define FAILOVER_GRACE_WAIT (500 * USEC_PER_MSEC)       /* grace after a failover, grants confirmed by WAIT, at least */
#define LIBRARY_CLAIM_MS "5000"                         /* P:loading's life: one load's, with room */
#define LIBRARY_WAIT (200 * USEC_PER_MSEC)              /* another agent loading: the version asked again after */
#define LIBRARY_REFUSED "refused NOPERM "               /* P:loading of an agent whose load Redis refused, its host id after */
#define LIBRARY_LOADED "library loaded"                 /* P:loading once the load is done, for LIBRARY_LOADED_MS */
#define LIBRARY_LOADED_MS "1000"

/* ---- Set-up --------------------------------------------------------------------- */

typedef enum SetupKind {
        SETUP_PLAIN,            /* AUTH, SELECT: an error fails the setup */
        SETUP_VERSION,          /* the library's version */
        SETUP_CLAIM,            /* SET P:loading NX: this agent loads the library, or waits for another's load */
        SETUP_CODE,             /* the library's text, where its version is this agent's */
        SETUP_LOAD,             /* FUNCTION LOAD REPLACE (an older one there) */
        SETUP_LOAD_NEW,         /* FUNCTION LOAD (none there) */
} SetupKind;

typedef struct SetupStep {
        Shard *shard;
        const char *what;
        SetupKind kind;
        char had[64];           /* SETUP_CLAIM: what Redis holds ("": nothing), as library_load() takes it */
} SetupStep;

static void setup_done(Shard *sh);
static SetupStep *setup_send(Shard *sh, const char *what, SetupKind kind, int argc, const char *const *argv);
static void setup_step_done(Shard *sh);

/* Nothing granted through sh, for a reason only an operator can change
 * (its library, its data model, its ACL: state, a row of protocol.c's
 * table that refuses): said once, and in status; connected to again after
 * the backoff, so that the change is seen within 2 s. */
static void shard_refuse(Shard *sh, char *refused, size_t size, const char *state, const char *why) {
        if (!streq(why, refused))
                log_error("%s; granting nothing through it, whatever clients' on_error says, looking again every 2 s.",
                          why);
        snprintf(refused, size, "%s", why);
        sh->refused_state = state;
        shard_down(sh, -EPROTONOSUPPORT, why);
}

/* state, a row of protocol.c's table, when it lasts until an operator acts
 * (shard_refuse()); else NULL. */
static const char *refusing(const char *state) {
        return state && streq(error_code_of_state(state), ERROR_CODE_MISCONFIGURED) ? state : NULL;
}

/* Setup failed: sh->error says why; refused: a state that lasts until an
 * operator acts (shard_refuse()), NULL for any other failure. */
static void setup_fail(Shard *sh, const char *refused, const char *fmt, ...) _printf_(3, 4);
static void setup_fail(Shard *sh, const char *refused, const char *fmt, ...) {
        va_list ap;

        if (sh->setup_failed)
                return;
        va_start(ap, fmt);
        vsnprintf(sh->error, sizeof(sh->error), fmt, ap);
        va_end(ap);
        sh->setup_failed = true;
        sh->setup_refused = refused;
}

/* A step that Redis answered with err: refused where the table says it lasts
 * until an operator acts, with the fix it gives. */
static void setup_fail_redis(Shard *sh, const char *what, const char *err) {
        const char *state = redis_state_of_error(err), *fix = state ? redis_state_fix(state) : NULL;

        setup_fail(sh, refusing(state), "%s failed: %s%s%s", what, err ?: "no answer", fix ? ": " : "", fix ?: "");
}

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
                setup_send(sh, "FUNCTION LOAD REPLACE", SETUP_LOAD, 4,
                           (const char *[]) { "FUNCTION", "LOAD", "REPLACE", sh->io->library_text });
        else
                setup_send(sh, "FUNCTION LOAD", SETUP_LOAD_NEW, 3,
                           (const char *[]) { "FUNCTION", "LOAD", sh->io->library_text });
}

/* The library's version and hash, and its text: the requests of its
 * check, the same at connect and once a renewal period
 * (shard_library_refresh()), so that the check needs no rule of the ACL
 * that set-up does not. */
static const char *const library_version_argv[] = { "FCALL", LUA_VERSION_FUNCTION, "0" };
static const char *const library_code_argv[] = { "FUNCTION", "LIST", "LIBRARYNAME", LUA_LIBRARY_NAME, "WITHCODE" };

static void library_ask_version(Shard *sh) {
        setup_send(sh, "FCALL " LUA_VERSION_FUNCTION, SETUP_VERSION, ELEMENTSOF(library_version_argv),
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
                setup_send(sh, "SET " KEY_LOADING " XX", SETUP_PLAIN, ELEMENTSOF(argv), argv);
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
        step = setup_send(sh, "SET " KEY_LOADING " NX", SETUP_CLAIM, ELEMENTSOF(argv), argv);
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

static void library_claim_reply(Shard *sh, const RedisReply *reply, const char *had) {
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
        setup_send(sh, "FUNCTION LIST", SETUP_CODE, ELEMENTSOF(library_code_argv), library_code_argv);
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

static void library_code_reply(Shard *sh, const RedisReply *reply) {
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
static void library_version_reply(Shard *sh, const RedisReply *reply) {
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

static void setup_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        _cleanup_free_ SetupStep *step = userdata;
        Shard *sh = step->shard;
        const char *err = redis_reply_error(reply);

        if (!reply || conn != sh->cmd)
                return;         /* an old connection */
        /* (After a step failed, those after it are not looked at.) */
        if (sh->setup_failed)
                ;
        else if (step->kind == SETUP_VERSION)
                library_version_reply(sh, reply);
        else if (step->kind == SETUP_CLAIM)
                library_claim_reply(sh, reply, step->had);
        else if (step->kind == SETUP_CODE)
                library_code_reply(sh, reply);
        else if (step->kind == SETUP_LOAD || step->kind == SETUP_LOAD_NEW)
                library_load_reply(sh, reply, step->kind == SETUP_LOAD_NEW);
        else if (err)
                setup_fail_redis(sh, step->what, err);
        setup_step_done(sh);
}

/* A step of the set-up answered (or waited out): the set-up ends with
 * the last. */
static void setup_step_done(Shard *sh) {
        if (--sh->setup_pending > 0)
                return;
        if (sh->setup_failed) {
                char why[sizeof(sh->error)];

                snprintf(why, sizeof(why), "%s", sh->error);
                if (sh->setup_refused)
                        shard_refuse(sh, sh->library_refused, sizeof(sh->library_refused), sh->setup_refused, why);
                else
                        shard_down(sh, -EACCES, why);
        } else {
                if (sh->library_refused[0]) {
                        log_notice("Redis at %s takes this agent's set-up now (its library, version %u, its "
                                   "credentials): granting through it again.", sh->name, lua_library_version);
                        sh->library_refused[0] = '\0';
                }
                setup_done(sh);
        }
}

/* The step sent (its reply frees it), or NULL when it could not be. */
static SetupStep *setup_send(Shard *sh, const char *what, SetupKind kind, int argc, const char *const *argv) {
        SetupStep *step = calloc(1, sizeof(*step));

        if (!step) {
                setup_fail(sh, NULL, "out of memory");
                return NULL;
        }
        *step = (SetupStep) { .shard = sh, .what = what, .kind = kind };
        if (redis_conn_command(sh->cmd, setup_reply, step, argc, argv, NULL) < 0) {
                free(step);
                setup_fail(sh, NULL, "cannot send commands");
                return NULL;
        }
        sh->setup_pending++;
        return step;
}

/* The marker of a newer data model than this agent's, or one it cannot
 * read (epoch.lua): nothing granted there; connected to again after the
 * backoff, so that the marker's removal (or this agent's upgrade) is seen
 * within 2 s. Said once, and in status. */
static void model_refuse(Shard *sh, const char *marker) {
        char why[sizeof(sh->model_refused)];
        size_t n = strspn(marker, "0123456789"), v = n > 0 && marker[n] == ' ' ? strspn(marker + n + 1, "0123456789.") : 0;

        if (n > 0 && n <= 9 && v > 0 && v <= 15 && marker[n + 1 + v] == '\0')
                snprintf(why, sizeof(why), "Redis at %s holds fleetsem data model %.*s (fleetsem >= %s); this agent "
                         "speaks %d: upgrade this agent; see fleetsemd(8) UPGRADING", sh->name, (int) n, marker,
                         marker + n + 1, DATA_MODEL);
        else
                snprintf(why, sizeof(why), "Redis at %s holds a fleetsem data model marker this agent cannot read "
                         "(%s:" KEY_MODEL "); this agent speaks %d: upgrade this agent; see fleetsemd(8) UPGRADING", sh->name,
                         sh->io->agent->config->key_prefix, DATA_MODEL);
        shard_refuse(sh, sh->model_refused, sizeof(sh->model_refused), "data-model", why);
}

/* The epoch: "ID GRACE_UNTIL_MS [RUN_ID]" in P:epoch (in a Cluster one per
 * master, P:epoch:{TAG} in the first hash slot it owns), made by the first
 * agent that finds none. An id other than the one this agent knew means
 * Redis lost its state since (restarted empty, a failover that lost
 * writes). The grace lasts until Redis has been up for one lease: holders
 * from before are re-asserted or told they lost their slot by then. */
static void epoch_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Shard *sh = userdata;
        char value[160], id[LEASE_ID_LEN + 1];
        long long created = -1, now_ms = -1;
        uint64_t grace_until = 0;
        const char *why;
        bool reset;
        int n = 0;

        if (!reply || conn != sh->cmd)
                return;
        if (!redis_reply_error(reply) && redis_reply_array_len(reply) == 3 &&
            redis_reply_array_integer(reply, 0, &created) >= 0 && created == 4) {
                if (redis_reply_array_string(reply, 1, value, sizeof(value)) < 0)
                        value[0] = '\0';       /* (too long: unreadable) */
                model_refuse(sh, value);
                return;
        }
        if (sh->model_refused[0]) {
                log_notice("Redis at %s holds this agent's data model (%d) again.", sh->name, DATA_MODEL);
                sh->model_refused[0] = '\0';
        }
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
        if (created == 3)
                log_warning("Redis at %s holds older state than this agent last saw (epoch %s): a failover back to a "
                            "master that had not caught up, data restored from a copy, or two resets close together; "
                            "new epoch %s.", sh->name, sh->epoch, id);
        else if (reset)
                log_full(sh->epoch[0] ? LOG_WARNING : LOG_INFO, "Redis at %s %s (epoch %s)%s.", sh->name,
                         sh->epoch[0] ? "lost its state since this agent last saw it" : "holds no fleetsem state yet", id,
                         sh->epoch[0] ? "" : "; a new Redis declared empty before the first agent (fleetsem redis-init) "
                                             "grants at once");
        /* 2: the epoch named another master; 1: there was none, which is
         * news to an agent that knew one; 3: it was older than the one
         * this agent knew (a reset too); else this agent knows no better
         * than that Redis' state is new. */
        why = created == 2 ? GRACE_WHY_FAILOVER
              : sh->epoch[0] && (created == 1 || !streq(sh->epoch, id)) ? GRACE_WHY_RESET
              : !sh->epoch[0] ? GRACE_WHY_NEW : NULL;
        memcpy(sh->epoch, id, sizeof(sh->epoch));
        sh->grace_until_ms = grace_until;
        shard_ready(sh, reset, grace_until > (uint64_t) now_ms ? (grace_until - (uint64_t) now_ms) * USEC_PER_MSEC : 0,
                    why);
}

/* FCALL of the epoch script, its library looked at just before;
 * the data model marker beside the epoch key (P:epoch… → P:model…). */
static int epoch_send(Shard *sh, const char *key, const char *id, const char *grace, const char *failover) {
        RedisIo *io = sh->io;
        const char *prefix = io->agent->config->key_prefix;
        char known_until[24] = "", model_key[IDENT_MAX_LEN + 32];

        if (sh->epoch[0])
                snprintf(known_until, sizeof(known_until), "%" PRIu64, sh->grace_until_ms);
        if (!strneq(key, prefix, strlen(prefix)) || !strneq(key + strlen(prefix), ":" KEY_EPOCH, strlen(":" KEY_EPOCH)))
                return -EINVAL;
        snprintf(model_key, sizeof(model_key), "%s:" KEY_MODEL "%s", prefix, key + strlen(prefix) + strlen(":" KEY_EPOCH));

        enum { HEAD = 5 };      /* FCALL FUNCTION 2 KEY MODEL_KEY */
        const char *argv[HEAD + N_EPOCH_ARGS] = {
                "FCALL", lua_function[SCRIPT_EPOCH], "2", key, model_key,
                [HEAD + ARG_EPOCH_ID] = id, [HEAD + ARG_EPOCH_GRACE_MS] = grace,
                [HEAD + ARG_EPOCH_MASTER_ID] = io->topo->failover ? sh->master_id : "",
                [HEAD + ARG_EPOCH_FAILOVER_GRACE_MS] = failover,
                [HEAD + ARG_EPOCH_KNOWN_ID] = sh->epoch, [HEAD + ARG_EPOCH_KNOWN_GRACE_UNTIL_MS] = known_until,
                [HEAD + ARG_EPOCH_REPLID_FRESH] = sh->replid_fresh ? "1" : "0",
                [HEAD + ARG_EPOCH_MODEL] = DATA_MODEL_MARKER,
        };

        return redis_conn_command(sh->cmd, epoch_reply, sh, ELEMENTSOF(argv), argv, NULL);
}

/* info_hex40: the 40 hex digits after FIELD (with its newline before it)
 * in an INFO reply, into out[0..40]. */
static int info_hex40(const char *s, size_t len, const char *field, char out[static 41]) {
        size_t n = strlen(field);
        const char *p = memmem(s, len, field, n);

        if (!p || (size_t) (s + len - (p + n)) < 40 || strspn(p + n, "0123456789abcdef") < 40)
                return -EBADMSG;
        memcpy(out, p + n, 40);
        out[40] = '\0';
        return 0;
}

/* A server without a replication id (not Redis 6.2 or later, nor Valkey)
 * is named by its run id alone: a failover back to it with old data is
 * then no reset. */
int master_id_parse(const char *s, size_t len, char ret[static 81]) {
        ret[0] = '\0';
        if (info_hex40(s, len, "\nrun_id:", ret) < 0) {
                ret[0] = '\0';
                return -EBADMSG;
        }
        return info_hex40(s, len, "\nmaster_replid:", ret + 40) < 0 ? -ENODATA : 0;
}

/* maxmemory_policy from an INFO reply (its memory section) into
 * sh->policy, and said up when it is news: "?" when the reply has none
 * (an error, a server that does not say), which counts as evicting. */
static void policy_parse(Shard *sh, const RedisReply *reply) {
        char policy[REDIS_POLICY_MAX] = "?";
        const char *s, *p;
        size_t len, n;

        if (redis_reply_string(reply, &s, &len) >= 0 && (p = memmem(s, len, "\nmaxmemory_policy:", 18))) {
                p += 18;
                n = 0;
                while (p + n < s + len && n < sizeof(policy) - 1 && strchr("abcdefghijklmnopqrstuvwxyz-", p[n]) &&
                       p[n] != '\0')
                        n++;
                /* The whole value, up to its line's end, or nothing. */
                if (n > 0 && p + n < s + len && (p[n] == '\r' || p[n] == '\n')) {
                        memcpy(policy, p, n);
                        policy[n] = '\0';
                }
        }
        if (streq(policy, sh->policy))
                return;
        memcpy(sh->policy, policy, sizeof(policy));
        sh->io->ev.gate_changed(sh);
}

bool shard_evicts(const Shard *sh) {
        return sh->policy[0] && !streq(sh->policy, SHARD_POLICY_SAFE);
}

static void policy_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Shard *sh = userdata;

        if (!reply || conn != sh->cmd)
                return;
        sh->policy_inflight = false;
        policy_parse(sh, reply);
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

/* The periodic check's reply (SETUP_VERSION's or SETUP_CODE's request). */
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

void shard_policy_refresh(Shard *sh, usec_t every, usec_t now) {
        if (sh->state != REDIS_READY || sh->policy_inflight || now - sh->policy_asked < every)
                return;
        if (redis_conn_command(sh->cmd, policy_reply, sh, 2, (const char *[]) { "INFO", "memory" }, NULL) < 0)
                return;
        sh->policy_inflight = true;
        sh->policy_asked = now;
}

static void info_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Shard *sh = userdata;
        RedisIo *io = sh->io;
        const Config *config = io->agent->config;
        const char *s, *p;
        size_t len;
        long long uptime = 0;
        uint64_t ttl_ms = config->lease_ttl / USEC_PER_MSEC, grace_ms, failover_ms;
        char key[LEASE_ID_LEN + 1 + IDENT_MAX_LEN + 16], id[LEASE_ID_LEN + 1], grace[24], failover[24];
        int r, first;

        if (!reply || conn != sh->cmd)
                return;
        /* Known before the shard is up: nothing is granted on a server
         * that may evict before its policy was read. */
        sh->policy_asked = now_mono();
        policy_parse(sh, reply);
        sh->master_id[0] = '\0';
        sh->replid_fresh = false;
        if (redis_reply_string(reply, &s, &len) >= 0) {
                char replid2[41];

                if ((p = memmem(s, len, "uptime_in_seconds:", 18)))
                        uptime = strtoll(p + 18, NULL, 10);
                if (master_id_parse(s, len, sh->master_id) == -ENODATA && io->topo->failover)
                        log_warning("Redis at %s gives no replication id in INFO: a failover back to it with old data "
                                    "would not be seen as one.", sh->name);
                /* A master makes a new replication id, with no history,
                 * when it creates its backlog (its first replica since it
                 * started) or drops it (repl-backlog-ttl): the same data.
                 * A promotion keeps the id it followed as the history. */
                sh->replid_fresh = info_hex40(s, len, "\nmaster_replid2:", replid2) >= 0 &&
                                   strspn(replid2, "0") == 40;
        }
        /* Whole seconds, rounded down: the grace is never too short. */
        grace_ms = uptime >= 0 && (uint64_t) uptime * 1000 < ttl_ms ? ttl_ms - (uint64_t) uptime * 1000 : 0;
        /* A master other than the one the epoch names means a failover,
         * which may have lost the last writes. With WAIT, every grant told
         * to a holder while its master had a replica is on the replica that
         * took over, with an expiry no earlier than its agent stops
         * believing in it (unless the replica missed two renewals in a
         * row); what a master without one granted is re-asserted by its
         * agent once it hears of the failover, which the topology bounds
         * (failover_heard_within). Without WAIT the failover may have lost
         * any grant: a whole lease. */
        failover_ms = config->min_replicas_acked > 0
                              ? MIN(ttl_ms, MAX(FAILOVER_GRACE_WAIT, io->topo->failover_heard_within
                                                                             ? io->topo->failover_heard_within(io)
                                                                             : 0) / USEC_PER_MSEC)
                              : ttl_ms;
        /* A new master is a failover, also when the epoch is missing,
         * which is also what a master restarted empty looks like: the
         * longer of the two (the epoch script takes the longer too when
         * the epoch names another run id: the same master restarted). In
         * a Cluster an epoch key follows its master's first slot when a
         * resharding moves it, so a missing one is a loss. */
        if (io->topo->failover)
                grace_ms = MAX(grace_ms, failover_ms);
        r = lease_id_new(id);
        if (r < 0) {
                shard_down(sh, r, "cannot make an epoch id");
                return;
        }
        first = io->topo->epoch_hash_slot(io, sh);
        if (first == -1) {
                /* Only asked (ASK) while slots move to it: its epoch is
                 * looked at once it owns one and its connection is made
                 * again. */
                sh->epoch[0] = '\0';
                sh->grace_until_ms = 0;
                shard_ready(sh, false, 0, NULL);
                return;
        }
        if (first >= 0) {
                snprintf(key, sizeof(key), KEY_EPOCH_TAG_FMT, config->key_prefix, hash_slot_tag((unsigned) first));
                sh->epoch_hash_slot = first;
        } else
                snprintf(key, sizeof(key), KEY_EPOCH_FMT, config->key_prefix);
        snprintf(grace, sizeof(grace), "%" PRIu64, grace_ms);
        snprintf(failover, sizeof(failover), "%" PRIu64, failover_ms);
        /* Under Sentinel and in a Cluster the epoch belongs to one master:
         * another one (a failover) starts a new epoch, which every agent
         * takes as a reset. */
        if (epoch_send(sh, key, id, grace, failover) < 0)
                shard_down(sh, -EIO, "cannot send commands");
}

bool shard_role_parse(Shard *sh, const RedisReply *reply) {
        const Config *config = sh->io->agent->config;
        char role[16] = "";
        int n, k;

        (void) redis_reply_array_string(reply, 0, role, sizeof(role));
        if (!streq(role, "master"))
                return false;
        n = (int) MIN(redis_reply_array_len(redis_reply_array_get(reply, 2)), (size_t) INT_MAX);
        k = MIN(n, config->min_replicas_acked);
        if (n != sh->n_replicas && config->min_replicas_acked > 0)
                log_full(sh->n_replicas < 0 ? LOG_INFO : LOG_NOTICE,
                         "Redis master %s has %d replica(s); grants are told once %d of them %s them (min_replicas_acked %d).",
                         shard_server(sh), n, k, k == 1 ? "has" : "have", config->min_replicas_acked);
        sh->n_replicas = n;
        return true;
}

static void role_refresh_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Shard *sh = userdata;

        if (!reply || conn != sh->cmd || redis_reply_error(reply))
                return;
        if (!shard_role_parse(sh, reply))
                /* Demoted (a failover it was not told of): calls fail, the
                 * map or the Sentinels are asked again. */
                shard_down(sh, -EAGAIN, "it is no master any more (ROLE)");
}

void shard_role_refresh(Shard *sh) {
        if (sh->state == REDIS_READY)
                (void) redis_conn_command(sh->cmd, role_refresh_reply, sh, 1, (const char *[]) { "ROLE" }, NULL);
}

static void info_send(Shard *sh) {
        if (redis_conn_command(sh->cmd, info_reply, sh, 2, (const char *[]) { "INFO", "default" }, NULL) < 0)
                shard_down(sh, -EIO, "cannot send commands");
}

static void role_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Shard *sh = userdata;
        char role[16] = "";

        if (!reply || conn != sh->cmd)
                return;
        (void) redis_reply_array_string(reply, 0, role, sizeof(role));
        if (!shard_role_parse(sh, reply)) {
                char why[400];

                snprintf(why, sizeof(why), "%s is not a master (ROLE says \"%s\")", shard_server(sh), role);
                shard_down(sh, -EAGAIN, why);
                return;
        }
        info_send(sh);
}

static void setup_done(Shard *sh) {
        sh->library_asked = now_mono();         /* (just asked) */
        /* What a Sentinel names, or a Cluster's map, may be stale: the
         * server itself says. */
        if (sh->io->topo->failover) {
                if (redis_conn_command(sh->cmd, role_reply, sh, 1, (const char *[]) { "ROLE" }, NULL) < 0)
                        shard_down(sh, -EIO, "cannot send commands");
                return;
        }
        info_send(sh);
}

static void shard_setup_start(Shard *sh) {
        const RedisAddress *redis = &sh->io->agent->config->redis;
        char db[16];

        sh->setup_pending = 0;
        sh->setup_failed = sh->setup_raced = sh->setup_changed = false;
        sh->setup_refused = NULL;
        if (redis->password) {
                const char *argv[3];

                setup_send(sh, "AUTH", SETUP_PLAIN, redis_auth_argv(sh->io, argv), argv);
        }
        if (redis->db > 0) {
                snprintf(db, sizeof(db), "%u", redis->db);
                setup_send(sh, "SELECT", SETUP_PLAIN, 2, (const char *[]) { "SELECT", db });
        }
        /* One round trip when the library is there already. */
        library_ask_version(sh);
        if (sh->setup_pending == 0)
                shard_down(sh, -EIO, "cannot send commands");
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

/* ---- Connecting ------------------------------------------------------------------ */

static void on_cmd_state(RedisConn *conn, int error, const char *message, void *userdata) {
        Shard *sh = userdata;

        if (conn != sh->cmd)
                return;
        if (error < 0) {
                /* A refused step of the set-up (AUTH, the library) says
                 * more than the connection Redis may close after it. */
                char why[sizeof(sh->error)];

                snprintf(why, sizeof(why), "%s", sh->setup_failed ? sh->error : message ? message : "");
                shard_down(sh, error, why);
                return;
        }
        shard_setup_start(sh);
}

static void on_sub_state(RedisConn *conn, int error, const char *message, void *userdata) {
        Shard *sh = userdata;
        RedisIo *io = sh->io;

        if (conn != sh->sub)
                return;
        if (error >= 0 && io->agent->config->redis.password) {
                const char *argv[3];

                if (redis_conn_command(sh->sub, redis_fire_and_forget, (void *) "AUTH", redis_auth_argv(io, argv),
                                       argv, NULL) < 0) {
                        error = -ENOTCONN;
                        message = "cannot send AUTH";
                }
        }
        if (error < 0) {
                log_debug("Pub/sub connection to Redis at %s lost: %s", sh->name, message);
                sh->sub = NULL;
                sh->sub_ready = false;
                redis_conn_free(conn);
                io->ev.sub_lost(sh, message);
                /* (The map is asked for again on reconnection too: an
                 * SSUBSCRIBE told MOVED closes the connection, say.) */
                if (sh->cmd)
                        redis_reconnect_later(io);
                return;
        }
        redis_conn_set_message_handler(sh->sub, io->ev.wake, io);
        sh->sub_ready = true;
        io->ev.sub_ready(sh);
}

void shard_connect(Shard *sh) {
        RedisIo *io = sh->io;
        RedisAddress addr = io->topo->address(io, sh);
        int r;

        if (!sh->cmd) {
                sh->state = REDIS_CONNECTING;
                sh->setup_failed = sh->setup_raced = sh->setup_changed = false;
                sh->setup_refused = NULL;
                r = redis_conn_new(io->agent->event, &addr, REDIS_CONNECT_TIMEOUT, on_cmd_state, sh, &sh->cmd);
                if (r < 0) {
                        sh->cmd = NULL;
                        shard_down(sh, r, NULL);
                        return;
                }
        }
        if (!sh->sub) {
                r = redis_conn_new(io->agent->event, &addr, REDIS_CONNECT_TIMEOUT, on_sub_state, sh, &sh->sub);
                if (r < 0) {
                        sh->sub = NULL;
                        redis_reconnect_later(io);
                }
        }
}

/* Connects the shards whose backoff is over; for one still in its
 * backoff the reconnect timer is armed for when it ends. Without that, a
 * connect asked for early (under Sentinel: a quorum that named the master
 * during the backoff) would leave the shard down for good. */
void shards_connect_due(RedisIo *io) {
        usec_t now = now_mono();

        for (size_t i = 0; i < io->n_shards; i++) {
                Shard *sh = io->shards[i];

                if (!io->topo->shard_counts(io, sh))
                        continue;
                if (now >= sh->retry_at)
                        shard_connect(sh);
                else
                        redis_reconnect_in(io, sh->retry_at - now);
        }
}
