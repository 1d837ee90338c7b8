/* SPDX-License-Identifier: MIT */
/* The steps of a shard's set-up (shard-setup.c, shard-library.c): each
 * request sent, its reply given to the step's handler, and the set-up
 * failed, refused (until an operator acts) or done with the last. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "redis-layer.h"
#include "shard-internal.h"

void setup_begin(Shard *sh, void (*done)(Shard *sh)) {
        sh->setup_pending = 0;
        sh->setup_failed = sh->setup_raced = sh->setup_changed = false;
        sh->setup_refused = NULL;
        sh->setup_done = done;
}

/* Nothing granted through sh, for a reason only an operator can change
 * (its library, its data model, its ACL: state, a row of protocol.c's
 * table that refuses): said once, and in status; connected to again after
 * the backoff, so that the change is seen within 2 s. */
void shard_refuse(Shard *sh, char *refused, size_t size, const char *state, const char *why) {
        if (!streq(why, refused))
                log_error("%s; granting nothing through it, whatever clients' on_error says, looking again every 2 s.",
                          why);
        snprintf(refused, size, "%s", why);
        sh->refused_state = state;
        shard_down(sh, -EPROTONOSUPPORT, why);
}

/* state, a row of protocol.c's table, when it lasts until an operator acts
 * (shard_refuse()); else NULL. */
const char *refusing(const char *state) {
        return state && streq(error_code_of_state(state), ERROR_CODE_MISCONFIGURED) ? state : NULL;
}

/* Setup failed: sh->error says why; refused: a state that lasts until an
 * operator acts (shard_refuse()), NULL for any other failure. */
void setup_fail(Shard *sh, const char *refused, const char *fmt, ...) {
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
void setup_fail_redis(Shard *sh, const char *what, const char *err) {
        const char *state = redis_state_of_error(err), *fix = state ? redis_state_fix(state) : NULL;

        setup_fail(sh, refusing(state), "%s failed: %s%s%s", what, err ?: "no answer", fix ? ": " : "", fix ?: "");
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
        else if (step->on_reply)
                step->on_reply(sh, reply, step);
        else if (err)
                setup_fail_redis(sh, step->what, err);
        setup_step_done(sh);
}

/* A step of the set-up answered (or waited out): the set-up ends with
 * the last. */
void setup_step_done(Shard *sh) {
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
                sh->setup_done(sh);
        }
}

/* The step sent (its reply frees it), or NULL when it could not be. */
SetupStep *setup_send(Shard *sh, const char *what, SetupReplyFn on_reply, int argc, const char *const *argv) {
        SetupStep *step = calloc(1, sizeof(*step));

        if (!step) {
                setup_fail(sh, NULL, "out of memory");
                return NULL;
        }
        *step = (SetupStep) { .shard = sh, .what = what, .on_reply = on_reply };
        if (redis_conn_command(sh->cmd, setup_reply, step, argc, argv, NULL) < 0) {
                free(step);
                setup_fail(sh, NULL, "cannot send commands");
                return NULL;
        }
        sh->setup_pending++;
        return step;
}
