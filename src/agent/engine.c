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

static const char *const script_name[N_SCRIPTS] = {
        [SCRIPT_ACQUIRE] = "acquire", [SCRIPT_RELEASE] = "release", [SCRIPT_RENEW] = "renew",
        [SCRIPT_REASSERT] = "reassert", [SCRIPT_ADOPT] = "adopt", [SCRIPT_STATUS] = "status",
};

/* ---- Trees ---------------------------------------------------------------- */

int lease_cmp(const void *x, const void *y) {
        return strcmp(((const Lease *) x)->id, ((const Lease *) y)->id);
}

static int name_cmp(const void *x, const void *y) {
        return strcmp(((const Name *) x)->name, ((const Name *) y)->name);
}

Lease *lease_find(Agent *a, const char *id) {
        Lease key = {};
        void *p;

        snprintf(key.id, sizeof(key.id), "%s", id);
        p = tfind(&key, &a->lease_tree, lease_cmp);
        return p ? *(Lease **) p : NULL;
}

Name *name_find(Agent *a, const char *name) {
        Name key = { .name = (char *) name };
        void *p = tfind(&key, &a->name_tree, name_cmp);

        return p ? *(Name **) p : NULL;
}

/* ---- Script calls ----------------------------------------------------------- */

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

static void script_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        ScriptCall *sc = userdata;
        const char *err = redis_reply_error(reply);

        (void) conn;
        if (err && strneq(err, "NOSCRIPT", 8) && sc->argv[0][4] == 'S') {
                /* The server lost our scripts (SCRIPT FLUSH, a failover): load
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

/* EVALSHA on the keys of name, with args. cb gets the reply (NULL when the
 * connection went); when this fails, cb is not called. The call keeps its
 * own copy of everything, for a NOSCRIPT retry. */
int script_call(Agent *a, Script script, const char *name, redis_reply_cb cb, void *userdata,
                       size_t n_args, const char *const *args, const size_t *arglens) {
        size_t prefix_len = strlen(a->config->key_prefix), name_len = strlen(name);
        size_t argc = 3 + N_KEYS + n_args, data_size = 8;
        ScriptCall *sc;
        char *p;
        int r;

        if (a->state != REDIS_READY)
                return -ENOTCONN;

        for (size_t i = 0; i < N_KEYS; i++)
                data_size += prefix_len + name_len + strlen(key_suffix[i]) + 6;
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
        sc->argvlen[2] = (size_t) sprintf(p, "%d", N_KEYS);
        p += sc->argvlen[2] + 1;
        for (size_t i = 0; i < N_KEYS; i++) {
                int n = sprintf(p, "%s:{%s}:%s", a->config->key_prefix, name, key_suffix[i]);

                sc->argv[3 + i] = p;
                sc->argvlen[3 + i] = (size_t) n;
                p += n + 1;
        }
        for (size_t i = 0; i < n_args; i++) {
                size_t n = arglens ? arglens[i] : strlen(args[i]);

                memcpy(p, args[i], n);
                p[n] = '\0';
                sc->argv[3 + N_KEYS + i] = p;
                sc->argvlen[3 + N_KEYS + i] = n;
                p += n + 1;
        }

        r = script_send(sc, false);
        if (r < 0)
                free(sc);
        return r;
}

void fire_and_forget_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        const char *err = redis_reply_error(reply);

        (void) conn;
        if (err)
                log_warning("Redis refused %s: %s", (const char *) userdata, err);
}

void redis_command(Agent *a, const char *what, int argc, const char *const *argv) {
        if (a->state == REDIS_READY)
                (void) redis_conn_command(a->cmd, fire_and_forget_reply, (void *) what, argc, argv, NULL);
}

/* ---- Names and leases ----------------------------------------------------- */

void name_subscribe(Name *n) {
        Agent *a = n->agent;
        char channel[IDENT_MAX_LEN + NAME_MAX_LEN + 16];

        if (!a->sub_ready || n->subscribed_generation == a->sub_generation)
                return;
        snprintf(channel, sizeof(channel), "%s:{%s}:wake", a->config->key_prefix, n->name);
        if (redis_conn_subscribe(a->sub, channel) >= 0)
                n->subscribed_generation = a->sub_generation;
}

static Name *name_get(Agent *a, const char *name) {
        Name *n = name_find(a, name);

        if (n)
                return n;
        n = calloc(1, sizeof(*n));
        if (!n)
                return NULL;
        n->agent = a;
        n->name = strdup(name);
        if (!n->name || !tsearch(n, &a->name_tree, name_cmp)) {
                free(n->name);
                free(n);
                return NULL;
        }
        LIST_PREPEND(all, a->names, n);
        a->n_names++;

        name_index(n);
        return n;
}

/* The index of names that "fleetsem status" lists; again on every
 * connection, for names that came while Redis was away. */
void name_index(Name *n) {
        const char *argv[] = { "SADD", n->agent->names_key, n->name };

        redis_command(n->agent, "SADD", 3, argv);
}

static void name_free(Name *n) {
        Agent *a = n->agent;

        n->positions_source = sd_event_source_disable_unref(n->positions_source);
        tdelete(n, &a->name_tree, name_cmp);
        LIST_REMOVE(all, a->names, n);
        a->n_names--;
        free(n->name);
        free(n);
}

/* A name without leases stays a while: asking for it again then costs no
 * SADD and no SUBSCRIBE. name_sweep() frees the ones idle for long. */
static void name_maybe_free(Name *n) {
        if (n->leases)
                return;
        n->idle_since = now_usec(CLOCK_MONOTONIC);
        if (n->agent->n_names > NAMES_IDLE_MAX)
                name_free(n);
}

void name_sweep(Agent *a, bool all) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        Name *n, *next;

        LIST_FOREACH_SAFE(all, n, next, a->names)
                if (!n->leases && (all || now - n->idle_since > NAME_IDLE_TIME))
                        name_free(n);
}

Lease *lease_ref(Lease *l) {
        l->n_ref++;
        return l;
}

void lease_unref(Lease *l) {
        if (!l || --l->n_ref > 0)
                return;
        free(l->desc);
        free(l->unit);
        free(l);
}

void lease_set_state(Lease *l, LeaseState state) {
        Agent *a = l->agent;

        if (l->state == LEASE_WAITING) {
                l->name->n_waiting--;
                a->n_waiting--;
        } else if (l->state == LEASE_HELD) {
                l->name->n_held--;
                a->n_held--;
        }
        l->state = state;
        if (state == LEASE_WAITING) {
                l->name->n_waiting++;
                a->n_waiting++;
                name_subscribe(l->name);
        } else if (state == LEASE_HELD) {
                l->name->n_held++;
                a->n_held++;
        }
        engine_mark_status_dirty(a);
}

LogFields lease_fields(const Lease *l) {
        return (LogFields) { .name = l->name->name, .lease = l->id, .token = l->token, .holder = l->holder };
}

/* Drops the lease from this agent: no more watching, no client. */
static void lease_detach(Lease *l) {
        Agent *a = l->agent;
        Name *n = l->name;

        if (l->state == LEASE_GONE)
                return;
        lease_set_state(l, LEASE_GONE);
        tdelete(l, &a->lease_tree, lease_cmp);
        a->n_leases--;
        LIST_REMOVE(by_name, n->leases, l);
        l->watch_source = sd_event_source_disable_unref(l->watch_source);
        l->watch_fd = safe_close(l->watch_fd);
        l->deadline_source = sd_event_source_disable_unref(l->deadline_source);
        l->recheck_source = sd_event_source_disable_unref(l->recheck_source);
        if (l->client) {
                l->client->lease = NULL;
                client_finish(l->client);
                l->client = NULL;
        }
        name_maybe_free(n);
        l->name = NULL;
        lease_unref(l);
}

static PendingRelease *pending_release_new(Agent *a, const char *name, const char *lease) {
        PendingRelease *p = calloc(1, sizeof(*p));

        if (!p) {
                log_error("Out of memory: slot %s of %s is released only when its lease expires.", lease, name);
                return NULL;
        }
        p->agent = a;
        snprintf(p->name, sizeof(p->name), "%s", name);
        snprintf(p->lease, sizeof(p->lease), "%s", lease);
        return p;
}

static void release_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        PendingRelease *p = userdata;
        const char *err = redis_reply_error(reply);

        (void) conn;
        if (!reply) {
                /* The connection went before the answer: again when it is back. */
                LIST_PREPEND(all, p->agent->pending_releases, p);
                return;
        }
        if (err)
                log_warning("Redis refused to release %s of %s: %s", p->lease, p->name, err);
        else {
                /* {held, lease, token, since, ...}: whom the release handed
                 * slots to. Those waiting here get them now; the wake
                 * message tells the other agents. */
                Name *n = name_find(p->agent, p->name);
                Granted g[GRANTS_MAX];
                size_t k = 0, len = redis_reply_array_len(reply);
                long long token, since;

                for (size_t i = 1; n && i + 2 < len && k < GRANTS_MAX; i += 3) {
                        if (redis_reply_array_string(reply, i, g[k].lease, sizeof(g[k].lease)) < 0 ||
                            redis_reply_array_integer(reply, i + 1, &token) < 0 ||
                            redis_reply_array_integer(reply, i + 2, &since) < 0 || token < 0 || since < 0)
                                break;
                        g[k].token = (uint64_t) token;
                        g[k].since_ms = (uint64_t) since;
                        k++;
                }
                if (k > 0)
                        name_granted(n, g, k, false);
        }
        free(p);
}

int granted_parse(const char *s, Granted *g, size_t max, size_t *ret_k) {
        size_t k = 0;

        while (*s) {
                unsigned long long token, since;
                int n = 0;

                if (k >= max)
                        return -E2BIG;
                if (sscanf(s, "%32s %llu %llu%n", g[k].lease, &token, &since, &n) != 3 || !lease_id_is_valid(g[k].lease))
                        return -EBADMSG;
                g[k].token = token;
                g[k].since_ms = since;
                k++;
                s += n;
                if (*s == ' ')
                        s++;
                else if (*s)
                        return -EBADMSG;
        }
        *ret_k = k;
        return 0;
}

/* Releases name/lease in Redis now, or as soon as Redis is back. */
void release_in_redis(Agent *a, const char *name, const char *lease) {
        const char *hdel[] = { "HDEL", a->host_key, lease };
        const char *args[] = { lease };
        PendingRelease *p = pending_release_new(a, name, lease);

        if (!p)
                return;
        if (script_call(a, SCRIPT_RELEASE, name, release_reply, p, 1, args, NULL) < 0) {
                LIST_PREPEND(all, a->pending_releases, p);
                return;
        }
        redis_command(a, "HDEL", 3, hdel);
}

static void name_flush_grants(Name *n);

void lease_release(Lease *l, const char *why) {
        Name *n = l->name;
        bool blocker, others;
        LogFields f;

        if (l->state == LEASE_GONE)
                return;
        /* A waiter that goes may have held back a later grant. (With no
         * other lease, the name itself may go with it.) */
        blocker = l->state == LEASE_WAITING && !l->grant_pending;
        others = n->leases != l || l->by_name_next;
        f = lease_fields(l);
        if (l->state == LEASE_HELD)
                log_fields(LOG_INFO, &f, "Released slot of %s (token %" PRIu64 "): %s.", l->name->name, l->token, why);
        else
                log_fields(LOG_DEBUG, &f, "Withdrew from the queue for %s: %s.", l->name->name, why);
        release_in_redis(l->agent, l->name->name, l->id);
        lease_detach(l);
        if (blocker && others)
                name_flush_grants(n);
}

void lease_lost(Lease *l, const char *why) {
        char line[PROTO_REPLY_MAX];
        MessageBuilder b;
        LogFields f = lease_fields(l);

        log_fields(LOG_ERR, &f, "LOST slot of %s (token %" PRIu64 "): %s.", l->name->name, l->token, why);
        if (l->unit && l->stop_on_lost)
                unit_stop(l->agent, l->unit, why);
        else if (l->unit)
                log_fields(LOG_WARNING, &f, "%s goes on running without its slot of %s (on-lost=ignore).",
                           l->unit, l->name->name);
        if (l->client) {
                message_start(&b, line, sizeof(line), "LOST");
                message_add(&b, "reason", why);
                client_send(l->client, line, message_finish(&b));
        }
        lease_release(l, "lost");
}

static int on_anchor_event(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Lease *l = userdata;
        char buf[64];
        ssize_t n;

        (void) s;
        (void) revents;
        /* The anchor never accepts, so never writes: any event means it closed. */
        n = read(fd, buf, sizeof(buf));
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
                return 0;
        lease_release(l, "anchor closed");
        return 0;
}

static void send_queued(Lease *l, uint32_t held) {
        char line[PROTO_REPLY_MAX];
        MessageBuilder b;

        if (!l->client)
                return;
        message_start(&b, line, sizeof(line), "QUEUED");
        message_add_u64(&b, "position", l->position);
        message_add_u64(&b, "held", held);
        message_add_u64(&b, "slots", l->slots);
        client_send(l->client, line, message_finish(&b));
        l->queued_sent = now_usec(CLOCK_MONOTONIC);
        l->position_unsent = false;
}

static void send_granted(Lease *l) {
        char line[PROTO_REPLY_MAX];
        MessageBuilder b;

        if (!l->client)
                return;
        message_start(&b, line, sizeof(line), "GRANTED");
        message_add_u64(&b, "token", l->token);
        message_add(&b, "lease", l->id);
        message_add_u64(&b, "since", l->since_ms);
        client_send(l->client, line, message_finish(&b));
}

static int on_deadline(sd_event_source *s, uint64_t usec, void *userdata) {
        Lease *l = userdata;
        char line[PROTO_REPLY_MAX];
        MessageBuilder b;

        (void) s;
        (void) usec;
        if (l->state != LEASE_WAITING)
                return 0;
        if (l->client) {
                message_start(&b, line, sizeof(line), "DENIED");
                message_add(&b, "reason", "timeout");
                message_add_u64(&b, "position", l->position);
                client_send(l->client, line, message_finish(&b));
        }
        lease_release(l, "no slot within the wait time");
        return 0;
}

static int on_recheck(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) s;
        (void) usec;
        lease_check(userdata);
        return 0;
}

static void lease_schedule_recheck(Lease *l, usec_t after) {
        Agent *a = l->agent;

        if (l->recheck_source) {
                (void) sd_event_source_set_time_relative(l->recheck_source, after);
                (void) sd_event_source_set_enabled(l->recheck_source, SD_EVENT_ONESHOT);
                return;
        }
        if (sd_event_add_time_relative(a->event, &l->recheck_source, CLOCK_MONOTONIC, after, 0, on_recheck, l) < 0)
                log_warning("Failed to arm the safety re-check of %s.", l->id);
}

static void grant(Lease *l, uint64_t token, uint64_t since) {
        LogFields f;

        l->token = token;
        l->since_ms = since;
        l->enqueued = false;
        l->renewed = now_usec(CLOCK_MONOTONIC);
        lease_set_state(l, LEASE_HELD);
        l->deadline_source = sd_event_source_disable_unref(l->deadline_source);
        l->recheck_source = sd_event_source_disable_unref(l->recheck_source);
        f = lease_fields(l);
        log_fields(LOG_INFO, &f, "Granted slot of %s to %s (token %" PRIu64 ").", l->name->name, l->holder, token);
        send_granted(l);
}

/* Grants reach an agent on two connections (the replies to its own calls,
 * and the wake messages naming whom another agent's release granted), so
 * it may hear of a later grant first. Its own leases of one name and one
 * limit are granted in the order they joined the line (first come, first
 * served), so a lease that joined earlier and still waits here holds a
 * lower token that is on its way: the later grant waits for it, and a
 * check of the earlier lease makes sure it comes. Grants to the holders
 * on this host therefore go out in rising token order. */
static void name_flush_grants(Name *n) {
        Agent *a = n->agent;

        for (;;) {
                Lease *p = NULL, *w;
                bool blocked = false;

                LIST_FOREACH(by_name, w, n->leases)
                        if (w->state == LEASE_WAITING && w->grant_pending && (!p || w->seq < p->seq))
                                p = w;
                if (!p)
                        return;
                LIST_FOREACH(by_name, w, n->leases) {
                        if (w->state != LEASE_WAITING || w->grant_pending || w->slots != p->slots ||
                            w->seq == 0 || w->seq > p->seq || w->gate_cleared)
                                continue;
                        blocked = true;
                        if (w->gate_after == 0) {
                                w->gate_after = a->check_counter;
                                lease_check(w);
                        }
                }
                if (blocked)
                        return;
                p->grant_pending = false;
                grant(p, p->pending_token, p->pending_since);
        }
}

static void grant_in_order(Lease *l, uint64_t token, uint64_t since) {
        if (l->state != LEASE_WAITING)
                return;
        l->grant_pending = true;
        l->pending_token = token;
        l->pending_since = since;
        name_flush_grants(l->name);
}

static void acquire_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Lease *l = userdata;
        uint64_t check_id = l->check_id;
        long long granted, v1, v2, v3;
        const char *err = redis_reply_error(reply);

        (void) conn;
        l->check_inflight = false;
        if (l->state != LEASE_WAITING || !reply)
                goto finish;    /* gone, or Redis went: checked again when it is back */

        if (err) {
                log_error("Redis refused to queue %s for %s: %s", l->id, l->name->name, err);
                if (l->client)
                        client_send_error(l->client, ERROR_CODE_REDIS, "Redis refused the request: %s", err);
                lease_release(l, "Redis error");
                goto finish;
        }
        if (redis_reply_array_len(reply) != 4 ||
            redis_reply_array_integer(reply, 0, &granted) < 0 ||
            redis_reply_array_integer(reply, 1, &v1) < 0 ||
            redis_reply_array_integer(reply, 2, &v2) < 0 ||
            redis_reply_array_integer(reply, 3, &v3) < 0 || v1 < 0 || v2 < 0) {
                log_error("Unexpected reply from Redis to the acquire script; refusing %s.", l->id);
                if (l->client)
                        client_send_error(l->client, ERROR_CODE_REDIS, "unexpected reply from Redis");
                lease_release(l, "unexpected reply");
                goto finish;
        }

        if (granted == 1) {
                grant_in_order(l, (uint64_t) v1, (uint64_t) v2);
                /* A slot was free: the next in line may find one too. */
                if (l->name->n_waiting > 0)
                        name_recheck(l->name);
                goto finish;
        }

        l->enqueued = true;
        l->renewed = now_usec(CLOCK_MONOTONIC);
        if (l->gate_after != 0 && check_id > l->gate_after && !l->gate_cleared) {
                /* Asked after a later lease's grant was heard of, and still
                 * in line: it holds nothing back. */
                l->gate_cleared = true;
                name_flush_grants(l->name);
        }
        if ((uint32_t) v1 != l->position) {
                l->position = (uint32_t) v1;
                send_queued(l, (uint32_t) v2);
        }
        if (l->no_wait) {
                on_deadline(NULL, 0, l);
                goto finish;
        }
        /* Woken by pub/sub on release; besides, look again when the first
         * holder's lease runs out (its host may be dead), and now and then. */
        lease_schedule_recheck(l, v3 >= 0 && (usec_t) v3 * USEC_PER_MSEC < RECHECK_SAFETY
                                          ? (usec_t) v3 * USEC_PER_MSEC + 5 * USEC_PER_MSEC
                                          : RECHECK_SAFETY);
        if (l->check_again) {
                l->check_again = false;
                lease_check(l);
        }
finish:
        lease_unref(l);
}

void lease_check(Lease *l) {
        Agent *a = l->agent;
        char slots[16], ttl[24];
        const char *args[4];
        int r;

        if (l->state != LEASE_WAITING || a->state != REDIS_READY)
                return;
        if (l->check_inflight) {
                l->check_again = true;
                return;
        }
        snprintf(slots, sizeof(slots), "%" PRIu32, l->slots);
        snprintf(ttl, sizeof(ttl), "%" PRIu64, a->config->lease_ttl / USEC_PER_MSEC);
        args[0] = l->id;
        args[1] = slots;
        args[2] = ttl;
        args[3] = l->desc;
        r = script_call(a, SCRIPT_ACQUIRE, l->name->name, acquire_reply, lease_ref(l), 4, args, NULL);
        if (r < 0) {
                lease_unref(l);
                return;
        }
        l->check_inflight = true;
        l->check_id = ++a->check_counter;
        /* Calls go out in order on one connection, so the order in which
         * leases first ask is the order of their tickets. */
        if (!l->enqueued && l->seq == 0) {
                l->seq = ++a->queue_seq;
                /* Indexed now that Redis is there: a socket-activated
                 * agent's first requests come before it is. */
                index_add(l);
        }
}

/* A release or an expiry woke the waiters of n. Only those at the head of
 * the line can be granted, so rather than asking for all of them (one
 * script call each, for every release), ask for the best placed one, and
 * for any not asked for yet; a grant asks for the next (acquire_reply()).
 * The safety re-check keeps the others' positions fresh. */
void name_recheck(Name *n) {
        Lease *l, *next, *best = NULL;

        LIST_FOREACH_SAFE(by_name, l, next, n->leases) {
                if (l->state != LEASE_WAITING)
                        continue;
                if (!l->enqueued)
                        lease_check(l);
                else if (!best || l->seq < best->seq)
                        best = l;
        }
        if (best)
                lease_check(best);
}

static int on_positions(sd_event_source *s, uint64_t usec, void *userdata) {
        Name *n = userdata;
        Lease *l;

        (void) s;
        (void) usec;
        LIST_FOREACH(by_name, l, n->leases)
                if (l->state == LEASE_WAITING && l->position_unsent)
                        send_queued(l, l->slots);
        return 0;
}

/* Reports a waiter's new place in line now, or (when it heard of one less
 * than POSITION_EVERY ago) with the others due at the next report: a busy
 * line moves on every grant, and every waiter on every grant would be a
 * lot of writes for nobody to read. */
static void report_position(Lease *l) {
        Name *n = l->name;
        usec_t now = now_usec(CLOCK_MONOTONIC);

        if (now - l->queued_sent >= POSITION_EVERY) {
                send_queued(l, l->slots);
                return;
        }
        l->position_unsent = true;
        if (n->positions_source && sd_event_source_get_enabled(n->positions_source, NULL) > 0)
                return;
        if (n->positions_source) {
                (void) sd_event_source_set_time_relative(n->positions_source, POSITION_EVERY);
                (void) sd_event_source_set_enabled(n->positions_source, SD_EVENT_ONESHOT);
        } else if (sd_event_add_time_relative(l->agent->event, &n->positions_source, CLOCK_MONOTONIC,
                                              POSITION_EVERY, 0, on_positions, n) < 0)
                send_queued(l, l->slots);
}

void name_granted(Name *n, const Granted *g, size_t k, bool move_up) {
        Agent *a = n->agent;
        Lease *l;

        for (size_t i = 0; i < k; i++) {
                l = lease_find(a, g[i].lease);
                if (l && l->name == n && l->state == LEASE_WAITING)
                        grant_in_order(l, g[i].token, g[i].since_ms);
        }
        if (!move_up)
                return;
        LIST_FOREACH(by_name, l, n->leases) {
                uint32_t p;

                if (l->state != LEASE_WAITING || !l->enqueued || l->position == 0)
                        continue;
                p = l->position > k ? l->position - (uint32_t) k : 1;
                if (p != l->position) {
                        l->position = p;
                        report_position(l);
                }
        }
}

/* "user@host pid N (unit)" from a description, for logs. */
static void holder_from_description(const char *desc, char *buf, size_t size) {
        Message m;
        const char *what;

        if (message_parse(desc, strlen(desc), DESC_MAX, &m) < 0) {
                snprintf(buf, size, "?");
                return;
        }
        what = message_get(&m, "unit") ?: message_get(&m, "session") ?: message_get(&m, "comm") ?: "?";
        snprintf(buf, size, "%s@%s pid %s (%s)", message_get(&m, "user") ?: message_get(&m, "uid") ?: "?",
                 message_get(&m, "host") ?: "?", message_get(&m, "pid") ?: "?", what);
}

int lease_new(Agent *a, const char *name, const char *id, uint32_t slots, uid_t uid, pid_t pid,
                     int watch_fd, char *desc, Lease **ret) {
        Lease *l;
        Name *n;
        int r;

        n = name_get(a, name);
        if (!n)
                return -ENOMEM;
        l = calloc(1, sizeof(*l));
        if (!l) {
                name_maybe_free(n);
                return -ENOMEM;
        }
        *l = (Lease) {
                .n_ref = 1, .agent = a, .name = n, .slots = slots, .uid = uid, .pid = pid,
                .watch_fd = watch_fd, .desc = desc, .state = LEASE_GONE,
        };
        snprintf(l->id, sizeof(l->id), "%s", id);
        holder_from_description(desc, l->holder, sizeof(l->holder));
        /* Edge-triggered: a closed anchor stays "ready" until its source is
         * gone, and thousands closing at once (a host's sessions ending)
         * would otherwise be polled again on every turn of the loop. */
        r = sd_event_add_io(a->event, &l->watch_source, watch_fd, EPOLLRDHUP | EPOLLET, on_anchor_event, l);
        if (r < 0 || !tsearch(l, &a->lease_tree, lease_cmp)) {
                sd_event_source_disable_unref(l->watch_source);
                free(l);
                name_maybe_free(n);
                return r < 0 ? r : -ENOMEM;
        }
        a->n_leases++;
        LIST_PREPEND(by_name, n->leases, l);
        *ret = l;
        return 0;
}

/* ---- Requests ---------------------------------------------------------------- */

/* uid → user name, remembered for a minute: NSS can be slow (LDAP), and
 * the same few users ask again and again. */
static const char *user_name(uid_t uid, char *buf, size_t size) {
        static struct {
                uid_t uid;
                usec_t when;
                char name[64];
        } cache[16];
        static unsigned next;
        usec_t now = now_usec(CLOCK_MONOTONIC);
        struct passwd pwbuf, *pw = NULL;
        char tmp[4096];

        for (size_t i = 0; i < ELEMENTSOF(cache); i++)
                if (cache[i].when > 0 && cache[i].uid == uid && now - cache[i].when < 60 * USEC_PER_SEC) {
                        snprintf(buf, size, "%s", cache[i].name);
                        return buf[0] ? buf : NULL;
                }
        if (getpwuid_r(uid, &pwbuf, tmp, sizeof(tmp), &pw) != 0 || !pw)
                pw = NULL;
        snprintf(buf, size, "%s", pw && strlen(pw->pw_name) < sizeof(cache[0].name) ? pw->pw_name : "");
        cache[next].uid = uid;
        cache[next].when = now;
        snprintf(cache[next].name, sizeof(cache[next].name), "%s", buf);
        next = (next + 1) % ELEMENTSOF(cache);
        return buf[0] ? buf : NULL;
}

/* known_unit: the requester's service when the caller looked it up already. */
static char *describe(Agent *a, const struct ucred *uc, uint32_t slots, const char *known_unit) {
        char user[64], comm[64] = "", path[64], line[DESC_MAX];
        _cleanup_free_ char *unit = NULL, *inner = NULL;
        MessageBuilder b;
        FILE *f;

        message_start(&b, line, sizeof(line), "INFO");
        message_add(&b, "host", a->config->host_id);
        message_addf(&b, "pid", PID_FMT, uc->pid);
        message_addf(&b, "uid", UID_FMT, uc->uid);
        if (user_name(uc->uid, user, sizeof(user)))
                message_add(&b, "user", user);
        message_addf(&b, "slots", "%" PRIu32, slots);

        snprintf(path, sizeof(path), "/proc/%i/comm", uc->pid);
        f = fopen(path, "re");
        if (f) {
                if (fgets(comm, sizeof(comm), f)) {
                        comm[strcspn(comm, "\n")] = '\0';
                        message_add(&b, "comm", comm);
                }
                fclose(f);
        }

        /* One look at the cgroup; the session or user unit only where it
         * points there (each lookup reads /proc again). */
        if (known_unit)
                message_add(&b, "unit", known_unit);
        else if (sd_pid_get_unit(uc->pid, &unit) >= 0) {
                if (strneq(unit, "session-", 8) && sd_pid_get_session(uc->pid, &inner) >= 0)
                        message_add(&b, "session", inner);
                else if (strneq(unit, "user@", 5) && sd_pid_get_user_unit(uc->pid, &inner) >= 0) {
                        free(unit);
                        unit = TAKE_PTR(inner);
                }
                message_add(&b, "unit", unit);
        }

        if (message_finish(&b) < 0)
                return strdup("INFO");
        return strdup(line);
}

/* This host's index of its leases, for re-adoption after a restart:
 * "NAME SLOTS UID UNIT ON-LOST", UNIT "-" when not bound to one. */
void index_add(Lease *l) {
        Agent *a = l->agent;
        char value[NAME_MAX_LEN + UNIT_NAME_MAX + 64];
        const char *hset[4];

        snprintf(value, sizeof(value), "%s %" PRIu32 " " UID_FMT " %s %s", l->name->name, l->slots, l->uid,
                 l->unit ?: "-", l->stop_on_lost ? "stop" : "ignore");
        hset[0] = "HSET";
        hset[1] = a->host_key;
        hset[2] = l->id;
        hset[3] = value;
        redis_command(a, "HSET", 4, (const char *const *) hset);
}

/* The slot of name that unit already holds here (a unit restarting with
 * its anchor still in its file descriptor store), or NULL. */
static Lease *lease_of_unit(Agent *a, const char *name, const char *unit, uid_t uid) {
        Name *n = name_find(a, name);
        Lease *l;

        if (!n)
                return NULL;
        LIST_FOREACH(by_name, l, n->leases)
                if (l->state == LEASE_HELD && l->unit && streq(l->unit, unit) && l->uid == uid)
                        return l;
        return NULL;
}

/* Hands an existing lease to a client asking again: the same slot, or the
 * same place in line. */
static void lease_attach_client(Lease *l, Client *c) {
        if (l->client) {
                l->client->lease = NULL;
                client_finish(l->client);
        }
        l->client = c;
        c->lease = l;
        if (l->state == LEASE_HELD)
                send_granted(l);
        else
                lease_check(l);
}

void engine_acquire(Agent *a, Client *c, const Request *req) {
        _cleanup_close_ int watch = -EBADF;
        _cleanup_free_ char *unit = NULL;
        const char *name = req->name, *id = req->lease;
        struct ucred owner;
        Lease *l;
        char *desc;
        int r;

        if (a->state == REDIS_DOWN) {
                client_send_error(c, ERROR_CODE_UNAVAILABLE, "Redis at %s is unreachable: %s",
                                  a->redis_name, a->redis_error);
                return;
        }

        if (req->unit) {
                r = unit_of_pid(c->cred.pid, &unit);
                if (r < 0) {
                        client_send_error(c, ERROR_CODE_INVALID, "pid " PID_FMT " does not run in a systemd service",
                                          c->cred.pid);
                        return;
                }
                l = lease_of_unit(a, name, unit, c->cred.uid);
                if (l) {
                        LogFields f = lease_fields(l);

                        log_fields(LOG_INFO, &f, "%s asked again for %s: it still holds token %" PRIu64 ".",
                                   unit, name, l->token);
                        lease_attach_client(l, c);
                        return;
                }
        }

        l = lease_find(a, id);
        if (l) {
                /* Asking again with the same lease (an agent restart, or a
                 * client reconnecting). */
                if (!streq(l->name->name, name)) {
                        client_send_error(c, ERROR_CODE_INVALID, "lease %s is held for \"%s\", not \"%s\"",
                                          id, l->name->name, name);
                        return;
                }
                if (l->uid != c->cred.uid) {
                        client_send_error(c, ERROR_CODE_PERMISSION, "lease %s belongs to another user", id);
                        return;
                }
                lease_attach_client(l, c);
                return;
        }

        r = anchor_watch(a->config->namespace, id, &watch);
        if (r == -ENOENT) {
                client_send_error(c, ERROR_CODE_ANCHOR, "no anchor listens on @%s/lease/%s; create it before asking",
                                  a->config->namespace, id);
                return;
        }
        if (r < 0) {
                client_send_error(c, ERROR_CODE_ANCHOR, "cannot watch anchor @%s/lease/%s: %s",
                                  a->config->namespace, id, strerror(-r));
                return;
        }
        r = peer_cred(watch, &owner);
        if (r < 0 || owner.uid != c->cred.uid) {
                log_warning("Refused %s to uid " UID_FMT ": its anchor belongs to uid " UID_FMT ".",
                            name, c->cred.uid, r < 0 ? (uid_t) -1 : owner.uid);
                client_send_error(c, ERROR_CODE_ANCHOR, "anchor @%s/lease/%s does not belong to the requester",
                                  a->config->namespace, id);
                return;
        }

        desc = describe(a, &c->cred, req->slots, unit);
        if (!desc) {
                client_send_error(c, ERROR_CODE_BUSY, "out of memory");
                return;
        }
        r = lease_new(a, name, id, req->slots, c->cred.uid, c->cred.pid, watch, desc, &l);
        if (r < 0) {
                free(desc);
                client_send_error(c, ERROR_CODE_BUSY, "cannot track the request: %s", strerror(-r));
                return;
        }
        TAKE_FD(watch);
        l->unit = TAKE_PTR(unit);
        l->stop_on_lost = req->stop_on_lost;
        l->client = c;
        c->lease = l;
        l->no_wait = req->wait == 0;
        lease_set_state(l, LEASE_WAITING);
        if (req->wait != 0 && req->wait != USEC_INFINITY &&
            sd_event_add_time_relative(a->event, &l->deadline_source, CLOCK_MONOTONIC, req->wait, 0, on_deadline, l) < 0) {
                client_send_error(c, ERROR_CODE_BUSY, "cannot arm the wait timer");
                lease_detach(l);
                return;
        }
        lease_check(l);
}

void engine_release_request(Agent *a, Client *c, const Request *req) {
        _cleanup_free_ char *unit = NULL;
        bool held = false;
        Lease *l;

        if (req->unit) {
                if (unit_of_pid(c->cred.pid, &unit) < 0) {
                        client_send_error(c, ERROR_CODE_INVALID, "pid " PID_FMT " does not run in a systemd service",
                                          c->cred.pid);
                        return;
                }
                l = lease_of_unit(a, req->name, unit, c->cred.uid);
        } else
                l = lease_find(a, req->lease);

        if (l && l->uid != c->cred.uid && c->cred.uid != 0) {
                client_send_error(c, ERROR_CODE_PERMISSION, "lease %s belongs to another user", req->lease);
                return;
        }
        if (l) {
                held = l->state == LEASE_HELD;
                lease_release(l, "released on request");
        }
        client_send(c, held ? "RELEASED held=1" : "RELEASED held=0", 15);
        client_finish(c);
}

void engine_client_gone(Agent *a, Client *c) {
        Lease *l = c->lease;

        (void) a;
        if (c->status)
                c->status->client = NULL;
        if (!l)
                return;
        c->lease = NULL;
        l->client = NULL;
        if (l->state == LEASE_WAITING)
                lease_release(l, "the client went away while waiting");
}

/* ---- Start and stop ---------------------------------------------------------- */

int engine_start(Agent *a) {
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
                r = sd_event_add_time_relative(a->event, &a->renew_source, CLOCK_MONOTONIC, a->config->lease_ttl / 3, 0, on_renew_tick, a);
        if (r >= 0)
                r = sd_event_source_set_enabled(a->renew_source, SD_EVENT_ON);
        if (r >= 0)
                r = sd_event_add_time_relative(a->event, &a->status_source, CLOCK_MONOTONIC, 0, 0, on_status_timer, a);
        if (r >= 0)
                r = sd_event_source_set_enabled(a->status_source, SD_EVENT_OFF);
        if (r < 0)
                return log_error_errno(r, "Failed to set up timers: %m");

        a->state = REDIS_CONNECTING;
        connect_all(a);
        return 0;
}

void engine_stop(Agent *a) {
        PendingRelease *p;
        Name *n, *nn;

        /* Leaving does not release anything: the anchors live on in the
         * sessions and units, and the next agent re-adopts them. */
        LIST_FOREACH_SAFE(all, n, nn, a->names) {
                Lease *l, *next;

                LIST_FOREACH_SAFE(by_name, l, next, n->leases) {
                        /* The client just goes: no ERROR, no release. */
                        if (l->client) {
                                l->client->lease = NULL;
                                l->client = NULL;
                        }
                        lease_detach(l);
                }
        }
        name_sweep(a, true);
        redis_conn_free(a->cmd);
        redis_conn_free(a->sub);
        a->cmd = a->sub = NULL;
        while ((p = a->pending_releases)) {
                LIST_REMOVE(all, a->pending_releases, p);
                free(p);
        }
        a->reconnect_source = sd_event_source_disable_unref(a->reconnect_source);
        a->renew_source = sd_event_source_disable_unref(a->renew_source);
        a->status_source = sd_event_source_disable_unref(a->status_source);
        units_close(a);
        for (int i = 0; i < N_SCRIPTS; i++)
                free(a->script_text[i]);
}
