/* SPDX-License-Identifier: MIT */
/* Redis alone, for the floors, D and G: the agent's library called as the
 * agent calls it, N connections kept busy, and what Redis spent. */
#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "lua-args.h"
#include "macro.h"

/* The fleet clock key and the census the raw script calls pass after a
 * name's keys, of the same prefix as every name's (bench-raw:{NAME}:...),
 * which each script checks. */
#define BENCH_FLEET_CLOCK "bench-raw:clock"
#define BENCH_CENSUS "bench-raw:census"

usec_t saturate_for = 5 * USEC_PER_SEC;  /* bench.h */

/* FCALL of fn (one of the library's functions) on a name's keys and the
 * fleet clock key, then the n args (scripts.list gives their order):
 * appended to c. */
int append_script(redisContext *c, const char *fn, char keys[N_KEYS][96], size_t n, const char *const *args) {
        const char *argv[3 + N_SCRIPT_KEYS + 16] = { "FCALL", fn, STRINGIFY(N_SCRIPT_KEYS) };
        size_t k = 3;

        assert(n <= 16);
        for (int j = 0; j < N_KEYS; j++)
                argv[k++] = keys[j];
        argv[k++] = BENCH_FLEET_CLOCK;
        argv[k++] = BENCH_CENSUS;
        for (size_t j = 0; j < n; j++) {
                assert(args[j]);        /* every argument scripts.list names */
                argv[k++] = args[j];
        }
        return redisAppendCommandArgv(c, (int) k, argv, NULL);
}

int append_acquire(redisContext *c, const char *sha, char keys[N_KEYS][96], const char *lease, const char *slots,
                          const char *host) {
        return append_script(c, sha, keys, N_ACQUIRE_ARGS, (const char *[N_ACQUIRE_ARGS]) {
                [ARG_ACQUIRE_LEASE] = lease, [ARG_ACQUIRE_SLOTS] = slots, [ARG_ACQUIRE_TTL_MS] = "15000",
                [ARG_ACQUIRE_DESCRIPTION] = "INFO host=bench pid=1 uid=0 user=root comm=bench",
                [ARG_ACQUIRE_HOST] = host, [ARG_ACQUIRE_UID] = "0", [ARG_ACQUIRE_GRACE_UNTIL_MS] = "0",
                [ARG_ACQUIRE_IDLE_MS] = "86400000", [ARG_ACQUIRE_WEIGHT] = "1", [ARG_ACQUIRE_HOLD] = "0",
                [ARG_ACQUIRE_PROOF] = "",
        });
}

int send_script(redisContext *c, const char *sha, char keys[N_KEYS][96], char lease[LEASE_ID_LEN + 1], bool release) {
        if (!release) {
                (void) lease_id_new(lease);
                return append_acquire(c, sha, keys, lease, "8", "bench");
        }
        return append_script(c, sha, keys, N_RELEASE_ARGS, (const char *[N_RELEASE_ARGS]) {
                [ARG_RELEASE_LEASE] = lease, [ARG_RELEASE_HOST] = "bench", [ARG_RELEASE_UID] = "0",
                [ARG_RELEASE_GRACE_UNTIL_MS] = "0", [ARG_RELEASE_IDLE_MS] = "86400000",
        });
}

/* Loads the agent's library, as the agent does (the same text as the
 * agent's, loaded again: harmless); 0 or -EIO. */
int load_library(void) {
        redisContext *l = bench_redis();
        redisReply *r = NULL;
        int k = -EIO;

        /* The raw calls' Redis is new: nobody held anything before
         * (fleetsemd(8), A NEW REDIS). */
        if (l)
                freeReplyObject(redisCommand(l, "ZADD %s NX -1 .", BENCH_CENSUS));
        if (l)
                r = redisCommand(l, "FUNCTION LOAD REPLACE %s", lua_library);
        if (r && r->type == REDIS_REPLY_STRING && streq(r->str, LUA_LIBRARY_NAME))
                k = 0;
        else
                fprintf(stderr, "fleetsem-bench: Redis refused FUNCTION LOAD: %s\n",
                        r && r->type == REDIS_REPLY_ERROR ? r->str : "no answer");
        freeReplyObject(r);
        if (l)
                redisFree(l);
        return k;
}


unsigned long redis_saturate(usec_t duration, send_fn send, void *userdata) {
        enum { N = SATURATE_CLIENTS };
        redisContext *c[N];
        unsigned long rounds = 0, round[N] = {};
        int expect[N];
        usec_t start;

        for (int i = 0; i < N; i++) {
                c[i] = redisConnectUnixNonBlock(redis_socket);
                if (!c[i] || c[i]->err)
                        return 0;
                expect[i] = send(c[i], i, 0, userdata);
        }
        start = now_usec(CLOCK_MONOTONIC);
        while (now_usec(CLOCK_MONOTONIC) - start < duration) {
                struct pollfd p[N];

                for (int i = 0; i < N; i++) {
                        int done = 0;

                        (void) redisBufferWrite(c[i], &done);
                        p[i] = (struct pollfd) { .fd = c[i]->fd, .events = POLLIN | (done ? 0 : POLLOUT) };
                }
                if (poll(p, N, 1000) < 0)
                        break;
                for (int i = 0; i < N; i++) {
                        void *reply = NULL;

                        if (!(p[i].revents & POLLIN))
                                continue;
                        if (redisBufferRead(c[i]) != REDIS_OK)
                                return 0;
                        while (redisGetReplyFromReader(c[i], &reply) == REDIS_OK && reply) {
                                /* A refused call is no grant: the figures
                                 * would count errors. */
                                if (((redisReply *) reply)->type == REDIS_REPLY_ERROR) {
                                        fprintf(stderr, "fleetsem-bench: Redis refused a call: %s\n",
                                                ((redisReply *) reply)->str);
                                        exit(EXIT_FAILURE);
                                }
                                freeReplyObject(reply);
                                reply = NULL;
                                if (--expect[i] > 0)
                                        continue;
                                rounds++;
                                expect[i] = send(c[i], i, ++round[i], userdata);
                        }
                }
        }
        for (int i = 0; i < N; i++)
                redisFree(c[i]);
        return rounds;
}



double info_number(const char *info, const char *field) {
        const char *p = strstr(info, field);

        return p ? strtod(p + strlen(field), NULL) : 0;
}

int redis_use(redisContext *c, RedisUse *ret) {
        redisReply *r = c ? redisCommand(c, "INFO stats cpu commandstats") : NULL;

        if (!r || r->type != REDIS_REPLY_STRING) {
                freeReplyObject(r);
                return -EIO;
        }
        *ret = (RedisUse) {
                .scripts = (long long) (info_number(r->str, "cmdstat_fcall:calls=") +
                                        info_number(r->str, "cmdstat_evalsha:calls=") +
                                        info_number(r->str, "cmdstat_eval:calls=")),
                .commands = (long long) info_number(r->str, "total_commands_processed:"),
                .cpu_s = info_number(r->str, "used_cpu_sys:") + info_number(r->str, "used_cpu_user:"),
        };
        freeReplyObject(r);
        return 0;
}


GrantCost grant_cost(int before_ok, const RedisUse *before, int after_ok, const RedisUse *after,
                            unsigned long grants) {
        double n = (double) grants;

        if (before_ok < 0 || after_ok < 0 || grants == 0)
                return (GrantCost) { -1, -1, -1 };
        return (GrantCost) {
                .cpu_us = (after->cpu_s - before->cpu_s) * 1e6 / n,
                .scripts = (double) (after->scripts - before->scripts) / n,
                .commands = (double) (after->commands - before->commands) / n,
        };
}

GrantCost floor_cost = { -1, -1, -1 };   /* L4's, a grant */
GrantCost peer_cost = { -1, -1, -1 };    /* L5's, a grant (G compares with it) */

/* Where the scripts' time went, from Redis' own accounting: CONFIG
 * RESETSTAT before the loop, INFO commandstats after it. A script call's
 * time (EVALSHA, EVAL, or FCALL of a Functions library) includes the
 * commands it runs, each of which Redis also counts under its own name;
 * what is left of the call is the Lua itself. INFO and CONFIG are the
 * benchmark's own; `direct` names the commands its clients send outside a
 * script (L5's release, a ZREM), which are listed but not taken from the
 * scripts' time. */

static bool is_script_call(const char *name) {
        static const char *const calls[] = { "evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro" };

        for (size_t i = 0; i < ELEMENTSOF(calls); i++)
                if (streq(name, calls[i]))
                        return true;
        return false;
}

int time_split_start(redisContext *c) {
        redisReply *r = redisCommand(c, "CONFIG RESETSTAT");
        int k = r && r->type == REDIS_REPLY_STATUS ? 0 : -EIO;

        freeReplyObject(r);
        return k;
}

int time_split_read(redisContext *c, const char *direct, TimeSplit *ret) {
        redisReply *r = redisCommand(c, "INFO commandstats");
        const char *p;

        *ret = (TimeSplit) {};
        if (!r || r->type != REDIS_REPLY_STRING) {
                freeReplyObject(r);
                return -EIO;
        }
        /* cmdstat_NAME:calls=N,usec=U,... (NAME: "config|resetstat" for a
         * subcommand) */
        for (p = strstr(r->str, "cmdstat_"); p; p = strstr(p, "cmdstat_")) {
                char name[40];
                double calls, usec;
                int len;

                p += strlen("cmdstat_");
                if (sscanf(p, "%39[^:]:calls=%lf,usec=%lf%n", name, &calls, &usec, &len) != 3)
                        continue;
                p += len;
                if (is_script_call(name)) {
                        ret->script_calls += calls;
                        ret->script_usec += usec;
                } else if (!streq(name, "info") && strncmp(name, "config", 6) != 0 && ret->n < TIME_CMDS_MAX) {
                        CmdTime *t = &ret->cmd[ret->n++];

                        snprintf(t->name, sizeof(t->name), "%s", name);
                        for (char *u = t->name; *u; u++)
                                *u = (char) (*u >= 'a' && *u <= 'z' ? *u - 'a' + 'A' : *u);
                        t->calls = calls;
                        t->usec = usec;
                        t->direct = direct && streq(name, direct);
                }
        }
        freeReplyObject(r);
        return 0;
}

static int cmd_time_cmp(const void *a, const void *b) {
        const CmdTime *x = a, *y = b;

        return x->usec < y->usec ? 1 : x->usec > y->usec ? -1 : strcmp(x->name, y->name);
}

/* Prints a grant's share: the script calls, each command, the rest (the
 * Lua), and what Redis' CPU a grant spent outside the scripts (reading
 * the calls, writing the replies, the event loop). */
void time_split_print(const char *id, TimeSplit *t, unsigned long grants, double cpu_us) {
        double n = (double) grants, in_scripts = 0;
        char json[4096];
        size_t k = 0;

        if (grants == 0 || t->script_calls == 0)
                return;
        qsort(t->cmd, t->n, sizeof(t->cmd[0]), cmd_time_cmp);
        for (size_t i = 0; i < t->n; i++)
                if (!t->cmd[i].direct)
                        in_scripts += t->cmd[i].usec;
        printf("     %s: where a grant's Redis time goes (INFO commandstats)      calls/grant   us/grant\n", id);
        printf("     %-4s   %-46s %11.2f %10.2f\n", "", "script calls, all they do included", t->script_calls / n,
               t->script_usec / n);
        /* (Commands a script runs rarely, such as the fleet clock's SET
         * once in 50 ms, are in the JSON only.) */
        for (size_t i = 0; i < t->n; i++)
                if (!t->cmd[i].direct && t->cmd[i].calls / n >= 0.005)
                        printf("     %-4s     %-44s %11.2f %10.2f\n", "", t->cmd[i].name, t->cmd[i].calls / n,
                               t->cmd[i].usec / n);
        printf("     %-4s   %-46s %11s %10.2f\n", "", "the rest of the script calls: the Lua itself", "",
               (t->script_usec - in_scripts) / n);
        for (size_t i = 0; i < t->n; i++)
                if (t->cmd[i].direct) {
                        char label[64];

                        snprintf(label, sizeof(label), "%.38s, sent outside a script", t->cmd[i].name);
                        printf("     %-4s   %-46s %11.2f %10.2f\n", "", label, t->cmd[i].calls / n, t->cmd[i].usec / n);
                }
        /* commandstats counts wall time inside Redis, INFO cpu its CPU: on
         * a loaded machine the first can exceed the second, and the
         * difference is then no cost at all, not a negative one. */
        if (cpu_us > 0 && cpu_us >= t->script_usec / n)
                printf("     %-4s   %-46s %11s %10.2f\n", "", "Redis CPU outside the script calls, all else", "",
                       cpu_us - t->script_usec / n);
        else if (cpu_us > 0)
                printf("     %-4s   %-46s %11s %10s  (the calls' wall time exceeds Redis' CPU: a loaded machine)\n", "",
                       "Redis CPU outside the script calls, all else", "", "-");
        fflush(stdout);
        for (size_t i = 0; i < t->n && k < sizeof(json) - 128; i++)
                k += (size_t) snprintf(json + k, sizeof(json) - k, "%s\"%s\":{\"calls_per_grant\":%.2f,\"us_per_grant\":%.2f%s}",
                                       i ? "," : "", t->cmd[i].name, t->cmd[i].calls / n, t->cmd[i].usec / n,
                                       t->cmd[i].direct ? ",\"direct\":true" : "");
        json[k] = 0;
        printf("@json {\"id\":\"%s-time\",\"what\":\"where a grant's Redis time goes\",\"script_calls_per_grant\":%.2f,"
               "\"script_us_per_grant\":%.2f,\"commands_us_per_grant\":%.2f,\"lua_us_per_grant\":%.2f,"
               "\"outside_scripts_us_per_grant\":%.2f,\"commands\":{%s}}\n",
               id, t->script_calls / n, t->script_usec / n, in_scripts / n, (t->script_usec - in_scripts) / n,
               cpu_us >= t->script_usec / n ? cpu_us - t->script_usec / n : -1, json);
        fflush(stdout);
}

