/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <search.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-login.h>

#include "engine-internal.h"
#include "protocol.h"

/* ---- Redis connections ------------------------------------------------------------ */

int on_reconnect(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s;
        (void) usec;
        connect_all(userdata);
        return 0;
}

static void schedule_reconnect(Agent *a) {
        a->backoff = a->backoff == 0 ? BACKOFF_MIN : a->backoff * 2;
        if (a->backoff > BACKOFF_MAX)
                a->backoff = BACKOFF_MAX;
        (void) sd_event_source_set_time_relative(a->reconnect_source, a->backoff);
        (void) sd_event_source_set_enabled(a->reconnect_source, SD_EVENT_ONESHOT);
}

static void fail_unqueued(Agent *a) {
        Name *n, *nn;

        LIST_FOREACH_SAFE(all, n, nn, a->names) {
                Lease *l, *next;

                LIST_FOREACH_SAFE(by_name, l, next, n->leases)
                        if (l->state == LEASE_WAITING && !l->enqueued) {
                                if (l->client)
                                        client_send_error(l->client, ERROR_CODE_UNAVAILABLE, "Redis at %s is unreachable: %s",
                                                          a->redis_name, a->redis_error);
                                lease_release(l, "Redis unreachable");
                        }
        }
}

void redis_went_down(Agent *a, int error, const char *why) {
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
        fail_unqueued(a);
        engine_status_deferred(a);
        schedule_reconnect(a);
        engine_mark_status_dirty(a);
}

static void on_redis_ready(Agent *a) {
        PendingRelease *p;
        Name *n, *nn;

        a->state = REDIS_READY;
        a->backoff = 0;
        a->redis_error[0] = '\0';
        log_info("Connected to Redis at %s.", a->redis_name);

        while ((p = a->pending_releases)) {
                LIST_REMOVE(all, a->pending_releases, p);
                release_in_redis(a, p->name, p->lease);
                free(p);
        }
        if (!a->adopted)
                adopt_start(a);
        else
                renew_all(a, true);     /* re-assert what Redis may have lost */

        LIST_FOREACH_SAFE(all, n, nn, a->names) {
                name_index(n);
                name_recheck(n);
        }
        engine_status_deferred(a);
        engine_mark_status_dirty(a);
}

typedef struct SetupStep {
        Agent *agent;
        const char *what;
        int script;             /* -1: not a SCRIPT LOAD */
} SetupStep;

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
                on_redis_ready(a);
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
                redis_went_down(a, error, message);
                return;
        }
        a->setup_pending = 0;
        a->setup_failed = false;
        if (a->config->redis.password) {
                const char *argv[3];

                setup_send(a, "AUTH", -1, auth_argv(a, argv), argv);
        }
        if (a->config->redis.db > 0) {
                const char *argv[] = { "SELECT", db };

                snprintf(db, sizeof(db), "%u", a->config->redis.db);
                setup_send(a, "SELECT", -1, 2, argv);
        }
        for (int i = 0; i < N_SCRIPTS; i++) {
                const char *argv[] = { "SCRIPT", "LOAD", a->script_text[i] };

                setup_send(a, "SCRIPT LOAD", i, 3, argv);
        }
        if (a->setup_pending == 0)
                redis_went_down(a, -EIO, "cannot send commands");
}

static void on_wake(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Agent *a = userdata;
        char kind[16], channel[IDENT_MAX_LEN + NAME_MAX_LEN + 16];
        const char *open, *close;
        Name *n;

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
        {
                char name[NAME_MAX_LEN + 1];

                memcpy(name, open + 1, (size_t) (close - open - 1));
                name[close - open - 1] = '\0';
                n = name_find(a, name);
        }
        if (!n)
                return;
        /* "g LEASE TOKEN SINCE ...": a release handed out slots already. */
        if (streq(kind, "message")) {
                char payload[GRANTS_MAX * 80];
                Granted g[GRANTS_MAX];
                size_t k;

                if (redis_reply_array_string(reply, 2, payload, sizeof(payload)) >= 0 && strneq(payload, "g ", 2) &&
                    granted_parse(payload + 2, g, GRANTS_MAX, &k) >= 0) {
                        name_granted(n, g, k, true);
                        return;
                }
        }
        name_recheck(n);
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
        for (Name *n = a->names; n; n = n->all_next)
                if (n->n_waiting > 0)
                        name_subscribe(n);
}

void connect_all(Agent *a) {
        int r;

        if (!a->cmd) {
                if (a->state != REDIS_DOWN)
                        a->state = REDIS_CONNECTING;
                r = redis_conn_new(a->event, &a->config->redis, CONNECT_TIMEOUT, on_cmd_state, a, &a->cmd);
                if (r < 0) {
                        a->cmd = NULL;
                        redis_went_down(a, r, NULL);
                        return;
                }
        }
        if (!a->sub) {
                r = redis_conn_new(a->event, &a->config->redis, CONNECT_TIMEOUT, on_sub_state, a, &a->sub);
                if (r < 0) {
                        a->sub = NULL;
                        schedule_reconnect(a);
                }
        }
}
