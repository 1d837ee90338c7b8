/* SPDX-License-Identifier: MIT */
/* fleetsem status (what Redis says of each name, checked again here) and
 * the agent's own status line for systemd. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <systemd/sd-daemon.h>

#include "agent.h"
#include "log-limit.h"
#include "log.h"
#include "lua-replies.h"

/* ---- Status ------------------------------------------------------------------ */

/* STATUS requests of one non-root uid under way at once: each costs Redis
 * a script per name, and Redis answers renewals only after them. */
#define STATUS_PER_USER_MAX 4
/* fleetsem status without a name: the names that stay in Redis longest, at most. */
#define STATUS_NAMES_MAX 1000

typedef struct StatusItem {
        StatusJob *job;
        char name[NAME_MAX_LEN + 1];
} StatusItem;

static void status_job_done_one(StatusJob *job, long long now) {
        if (now > job->now_ms)
                job->now_ms = now;
        if (--job->pending > 0)
                return;
        if (job->client) {
                char end[1500];
                MessageBuilder b;
                Agent *a = job->agent;
                usec_t grace = engine_grace_left(&a->engine, now_mono());

                /* Which Redis answered; under Sentinel, the master and
                 * since when (a failover changes it). */
                message_start(&b, end, sizeof(end), "END");
                message_addf(&b, "now", "%lld", job->now_ms);
                message_add(&b, "redis", a->config->redis.master_name && a->master_name[0] ? a->master_name : a->redis_name);
                if (a->config->redis.master_name && a->master_since > 0)
                        message_add_u64(&b, "master_since", a->master_since / USEC_PER_MSEC);
                if (grace > 0) {
                        message_add_u64(&b, "grace", grace / USEC_PER_MSEC);
                        message_add(&b, "why", a->engine.grace_why);
                }
                /* Nothing new is granted: a Redis that may evict, one whose
                 * library cannot be checked. */
                if (a->evict_policy[0])
                        message_add(&b, "evicts", a->evict_policy);
                if (a->refuse_state) {
                        message_add(&b, "refused", a->refuse_state);
                        message_add(&b, "refusing", a->refuse_text);
                }
                client_send(job->client, end, message_finish(&b));
                client_finish(job->client);
                job->client->status = NULL;
        }
        if (job->user) {
                job->user->n_status--;
                user_use_maybe_free(job->user);
        }
        free(job);
}

static const char *const desc_keys[] = { "host", "pid", "uid", "user", "slots", "comm", "unit", "session", "hold",
                                         "reason" };

/* Copies the known fields of a description from Redis: it is data, checked
 * again here rather than passed on. */
static void add_description(MessageBuilder *b, const char *desc) {
        Message m;

        if (message_parse(desc, strlen(desc), SLOTS_DESC_MAX, &m) < 0 || !streq(m.verb, "INFO"))
                return;
        for (size_t i = 0; i < ELEMENTSOF(desc_keys); i++) {
                const char *v = message_get(&m, desc_keys[i]);

                if (v && strlen(v) <= 256)
                        message_add(b, desc_keys[i], v);
        }
}

/* A lease id names a lease, but it is not for everyone to see: root sees
 * them all, a user those of its own on this host. */
static bool may_see_lease(const StatusJob *job, const char *owner) {
        char mine[IDENT_MAX_LEN + 32];

        if (job->uid == 0)
                return true;
        snprintf(mine, sizeof(mine), "%s " UID_FMT, job->agent->config->host_id, job->uid);
        return streq(owner, mine);
}

/* What status and metrics say of every name: the NAME line's numbers. */
typedef struct NameCounts {
        uint64_t held, holders, waiting, limit;
        const char *drain, *action, *cap;
} NameCounts;

/* The NAME line; false when there is nothing to say of the name (fleetsem
 * status leaves out a name nobody uses and no operator touched). holders
 * and waiters: how many the reply listed (more than that: the NAME line
 * says how many it left out). */
static bool send_name_line(StatusJob *job, const char *name, const NameCounts *n, size_t holders, size_t waiters) {
        char line[PROTO_REPLY_MAX], drained[512], last[512], cap_set[512];
        uint32_t cap_n = 0;
        MessageBuilder b;

        /* The fleet limit: "N HOST UID SINCE_MS USER REASON". */
        if (engine_cap_text(n->cap, &cap_n, cap_set, sizeof(cap_set)) < 0)
                cap_n = 0;
        if (n->holders == 0 && n->waiting == 0 && !job->summary && !n->drain[0] && !n->action[0] && !cap_n)
                return false;

        message_start(&b, line, sizeof(line), "NAME");
        message_add(&b, "name", name);
        message_add_u64(&b, "held", n->held);
        message_add_u64(&b, "waiting", n->waiting);
        message_add_u64(&b, "limit", n->limit);
        if (cap_n) {
                message_add_u64(&b, "fleet_limit", cap_n);
                message_add(&b, "fleet_limit_set", cap_set);
        }
        if (n->drain[0] && engine_drain_text(n->drain, drained, sizeof(drained)) >= 0)
                message_add(&b, "drained", drained);
        if (n->action[0] && engine_action_text(n->action, last, sizeof(last)) >= 0)
                message_add(&b, "last_action", last);
        if (!job->summary) {
                message_add_u64(&b, "holders", n->holders);
                if (n->holders > holders)
                        message_add_u64(&b, "more_holders", n->holders - holders);
                if (n->waiting > waiters)
                        message_add_u64(&b, "more_waiting", n->waiting - waiters);
        }
        client_send(job->client, line, message_finish(&b));
        return true;
}

static void send_entries(StatusJob *job, const char *name, const ReplyStatus *st) {
        char line[PROTO_REPLY_MAX];
        MessageBuilder b;

        for (size_t i = 0; i < st->name.holders.n; i++) {
                unsigned long long token = 0, since = 0;
                ReplyHolder h;

                if (reply_list_get(&st->name.holders, i, &h) < 0)
                        continue;
                if (sscanf(h.grant, "%llu %llu", &token, &since) != 2)
                        token = since = 0;
                message_start(&b, line, sizeof(line), "HOLDER");
                message_add(&b, "name", name);
                if (may_see_lease(job, h.owner))
                        message_add(&b, "lease", h.lease);
                message_add_u64(&b, "token", token);
                message_add_u64(&b, "since", since);
                message_addf(&b, "expires_in", "%lld", h.expires_in_ms);
                message_add_u64(&b, "weight", (uint64_t) h.weight);
                add_description(&b, h.description);
                client_send(job->client, line, message_finish(&b));
        }
        for (size_t i = 0; i < st->name.queue.n; i++) {
                ReplyWaiter w;

                if (reply_list_get(&st->name.queue, i, &w) < 0)
                        continue;
                message_start(&b, line, sizeof(line), "WAITER");
                message_add(&b, "name", name);
                if (may_see_lease(job, w.owner))
                        message_add(&b, "lease", w.lease);
                message_add_u64(&b, "position", i + 1);
                message_add_u64(&b, "weight", (uint64_t) w.weight);
                add_description(&b, w.description);
                client_send(job->client, line, message_finish(&b));
        }
}

/* The reply of status.lua (fleetsem status) or counts.lua (metrics). */
static void status_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        StatusItem *item = userdata;
        StatusJob *job = item->job;
        char line[PROTO_REPLY_MAX];
        long long now = 0;
        NameCounts n;
        ReplyStatus st;
        ReplyCounts ct;
        MessageBuilder b;

        (void) conn;
        if (!job->client || !reply)
                goto finish;
        if (redis_reply_error(reply)) {
                message_start(&b, line, sizeof(line), "ERROR");
                message_add(&b, "code", ERROR_CODE_REDIS);
                message_addf(&b, "message", "%s: %s", item->name, redis_reply_error(reply));
                client_send(job->client, line, message_finish(&b));
                goto finish;
        }
        if (job->summary) {
                if (reply_decode_counts(reply, &ct) < 0) {
                        reply_log_unknown("counts", item->name, reply, "the name is left out of the metrics");
                        goto finish;
                }
                now = ct.name.now_ms;
                n = (NameCounts) { .held = (uint64_t) ct.name.held, .waiting = (uint64_t) ct.name.waiting,
                                   .limit = (uint64_t) ct.name.limit, .drain = ct.name.drain,
                                   .action = ct.name.action, .cap = ct.name.cap };
                (void) send_name_line(job, item->name, &n, 0, 0);
                goto finish;
        }
        if (reply_decode_status(reply, &st) < 0) {
                reply_log_unknown("status", item->name, reply, "the name is left out of the status");
                goto finish;
        }
        now = st.name.now_ms;
        /* A page of holders and waiters, and the totals: never fewer than
         * the page holds. */
        n = (NameCounts) { .held = (uint64_t) st.name.held,
                           .holders = MAX((uint64_t) st.name.n_holders, (uint64_t) st.name.holders.n),
                           .waiting = MAX((uint64_t) st.name.waiting, (uint64_t) st.name.queue.n),
                           .limit = (uint64_t) st.name.limit, .drain = st.name.drain,
                           .action = st.name.action, .cap = st.name.cap };
        if (send_name_line(job, item->name, &n, st.name.holders.n, st.name.queue.n))
                send_entries(job, item->name, &st);
finish:
        free(item);
        status_job_done_one(job, now);
}

static void status_name(Agent *a, StatusJob *job, const char *name) {
        StatusItem *item = calloc(1, sizeof(*item));

        if (!item)
                return;
        item->job = job;
        snprintf(item->name, sizeof(item->name), "%s", name);
        job->pending++;
        if (script_call(a, job->summary ? SCRIPT_COUNTS : SCRIPT_STATUS, name, status_reply, item, 0, NULL, NULL) < 0) {
                free(item);
                job->pending--;
        }
}

static int strcmp_ptr(const void *x, const void *y) {
        return strcmp(*(char *const *) x, *(char *const *) y);
}

static void names_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        StatusJob *job = userdata;
        size_t n = redis_reply_array_len(reply);
        _cleanup_free_ char **names = NULL, *storage = NULL;
        size_t k = 0;

        (void) conn;
        if (job->client && reply && n > 0) {
                names = calloc(n, sizeof(char *));
                storage = malloc(n * (NAME_MAX_LEN + 1));
                for (size_t i = 0; names && storage && i < n; i++) {
                        char *s = storage + k * (NAME_MAX_LEN + 1);

                        if (redis_reply_array_string(reply, i, s, NAME_MAX_LEN + 1) >= 0 && name_is_valid(s))
                                names[k++] = s;
                }
                if (names)
                        qsort(names, k, sizeof(char *), strcmp_ptr);
                for (size_t i = 0; i < k; i++)
                        status_name(job->agent, job, names[i]);
        }
        status_job_done_one(job, 0);
}

/* METRICS: the names this host uses (held or waited for here now, or
 * granted here lately: the engine's table of counters), each once, in
 * order; what other hosts use, they report. Its cost follows this host's
 * names, not every name in Redis. */
static void status_host_names(Agent *a, StatusJob *job) {
        _cleanup_free_ const char **names = NULL;
        size_t n = 0, k = 0;

        names = calloc(a->engine.n_names + a->engine.n_name_stats + 1, sizeof(char *));
        if (!names) {
                status_job_done_one(job, 0);
                return;
        }
        for (const Name *x = a->engine.names; x; x = x->all_next)
                names[n++] = x->name;
        for (const NameStats *s = a->engine.name_stats; s; s = s->lru_next)
                names[n++] = s->name;
        qsort(names, n, sizeof(char *), strcmp_ptr);
        for (size_t i = 0; i < n; i++)
                if (k == 0 || !streq(names[i], names[k - 1]))
                        names[k++] = names[i];
        for (size_t i = 0; i < k; i++)
                status_name(a, job, names[i]);
        status_job_done_one(job, 0);
}

void status_request(Agent *a, Client *c, const char *name, bool summary) {
        StatusJob *job;

        if (a->state != REDIS_READY) {
                client_send_redis_down(c);
                return;
        }
        if (c->cred.uid != 0 && c->user && c->user->n_status >= STATUS_PER_USER_MAX) {
                log_uid(c->cred.uid, now_mono(), LOG_NOTICE,
                        "Refused a status request of pid " PID_FMT " (uid " UID_FMT "): %d under way already.",
                        c->cred.pid, c->cred.uid, STATUS_PER_USER_MAX);
                client_send_error(c, ERROR_CODE_BUSY, "uid " UID_FMT " has %d status requests under way already; try again",
                                  c->cred.uid, STATUS_PER_USER_MAX);
                return;
        }
        job = calloc(1, sizeof(*job));
        if (!job) {
                client_send_error(c, ERROR_CODE_BUSY, "out of memory");
                return;
        }
        job->agent = a;
        job->client = c;
        job->uid = c->cred.uid;
        job->user = c->user;
        job->summary = summary;
        if (job->user)
                job->user->n_status++;
        job->pending = 1;
        c->status = job;
        if (name[0]) {
                status_name(a, job, name);
                status_job_done_one(job, 0);
        } else if (summary)
                status_host_names(a, job);
        else {
                /* Names whose keys are still in Redis (the index holds
                 * when they leave: redis-engine.c); those past go. */
                char min[32];

                snprintf(min, sizeof(min), "%lld", (long long) (now_usec(CLOCK_REALTIME) / USEC_PER_MSEC));
                io_names_trim(a, true);
                /* Those that stay longest first, STATUS_NAMES_MAX at most. */
                if (redis_key_command(a, names_reply, job, 7,
                                      (const char *[]) { "ZREVRANGEBYSCORE", a->names_key, "+inf", min,
                                                         "LIMIT", "0", STRINGIFY(STATUS_NAMES_MAX) }) < 0)
                        status_job_done_one(job, 0);
        }
}

/* ---- sd_notify STATUS= ---------------------------------------------------------- */

/* The agent's status line for systemd: a change marks it dirty, and it is
 * sent a quarter of a second later, with whatever else changed meanwhile;
 * so are the CHANGED lines of the clients that WATCH. */
struct StatusLine {
        sd_event_source *timer_source;
        bool dirty;
};

void io_changed(void *ctx) {
        status_mark_dirty(ctx);
}

static int on_status_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Agent *a = userdata;
        char text[2100], buf[sizeof("STATUS=") + TEXT_ESCAPE_SIZE(sizeof(text))];
        Client *c;

        (void) s;
        (void) usec;
        a->status_line->dirty = false;
        char master[440] = "";

        if (a->config->redis.master_name && a->state == REDIS_READY) {
                char since[32] = "";
                time_t t = (time_t) (a->master_since / USEC_PER_SEC);
                struct tm tm;

                if (a->master_since > 0 && localtime_r(&t, &tm))
                        strftime(since, sizeof(since), " since %H:%M:%S", &tm);
                snprintf(master, sizeof(master), " (master %s%s)", a->master_name, since);
        } else if (a->config->redis.cluster) {
                char shards[400];

                redis_io_describe(a, shards, sizeof(shards));
                if (shards[0])
                        snprintf(master, sizeof(master), " (%s)", shards);
        }
        snprintf(text, sizeof(text), "%zu slot(s) held, %zu waiting, Redis %s%s%s%s%s%s",
                 a->engine.n_held, a->engine.n_waiting,
                 a->state == REDIS_READY ? "up" : a->state == REDIS_DOWN ? "DOWN" : "connecting", master,
                 a->state == REDIS_DOWN ? ": " : "", a->state == REDIS_DOWN ? a->redis_error : "",
                 a->refuse_state ? "; GRANTING NOTHING: " : "", a->refuse_text);
        /* A master's name from the Sentinels and Redis' errors are theirs:
         * a newline would start another assignment of sd_notify's. */
        memcpy(buf, "STATUS=", 7);
        text_escape(text, buf + 7, sizeof(buf) - 7);
        (void) sd_notify(false, buf);
        /* One CHANGED unread is as good as many. */
        LIST_FOREACH(clients, c, a->clients)
                if (c->watching && c->out_len == 0)
                        client_send(c, "CHANGED", strlen("CHANGED"));
        return 0;
}

void status_mark_dirty(Agent *a) {
        StatusLine *sl = a->status_line;
        int r;

        if (!sl || sl->dirty || !sl->timer_source)
                return;
        sl->dirty = true;
        r = sd_event_source_set_time_relative(sl->timer_source, 250 * USEC_PER_MSEC);
        if (r >= 0)
                r = sd_event_source_set_enabled(sl->timer_source, SD_EVENT_ONESHOT);
        /* (-ESTALE: the loop is exiting; nobody reads a status any more.) */
        if (r < 0 && r != -ESTALE)
                server_fatal(a, r, "arm the status update");
}

int status_start(Agent *a) {
        int r;

        a->status_line = calloc(1, sizeof(StatusLine));
        if (!a->status_line)
                return log_error_errno(ENOMEM, "Out of memory.");
        r = sd_event_add_time_relative(a->event, &a->status_line->timer_source, CLOCK_MONOTONIC, 0, 0, on_status_timer, a);
        if (r >= 0)
                r = sd_event_source_set_enabled(a->status_line->timer_source, SD_EVENT_OFF);
        if (r < 0)
                return log_error_errno(r, "Failed to set up timers: %m");
        return 0;
}

void status_stop(Agent *a) {
        if (!a->status_line)
                return;
        a->status_line->timer_source = sd_event_source_disable_unref(a->status_line->timer_source);
        a->status_line = mfree(a->status_line);
}
