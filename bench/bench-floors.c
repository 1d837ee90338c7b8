/* SPDX-License-Identifier: MIT */
/* The floors (L): a unix socket round trip, a Redis round trip, and Redis
 * alone running the agent's scripts (L4) and a peer's algorithm (L5). */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "bench.h"
#include "lua-args.h"
#include "macro.h"
#include "socket-util.h"

/* ---- Floors ---- */

/* The unix floor's two ends run on two different CPUs, pinned: left to
 * the scheduler, they share one CPU in some runs (a few µs) and not in
 * others (tens of µs, a cross-CPU wake-up), and the floor would be
 * bimodal. The agent and its clients are separate processes, mostly on
 * different CPUs: the cross-CPU figure is the honest floor. */
static void pin_to(int cpu) {
        cpu_set_t set;

        if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
                return;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        (void) pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *echo_server(void *arg) {
        int lfd = (int) (intptr_t) arg, fd;
        char buf[256];
        ssize_t n;

        pin_to(1);
        fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        while (fd >= 0 && (n = read(fd, buf, sizeof(buf))) > 0)
                if (write(fd, buf, (size_t) n) != n)
                        break;
        safe_close(fd);
        return NULL;
}

double floor_unix(void) {
        char name[64], buf[80] = "ACQUIRE name=bench slots=1 lease=0123456789abcdef0123456789abcdef wait=0\n";
        struct sockaddr_un sa;
        socklen_t len;
        pthread_t t;
        cpu_set_t saved;
        _cleanup_samples_ Samples s = {};
        int lfd, fd;

        snprintf(name, sizeof(name), "bench-%d", getpid());
        if (sockaddr_abstract(name, "echo", NULL, &sa, &len) < 0)
                return 0;
        lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (lfd < 0 || bind(lfd, (struct sockaddr *) &sa, len) < 0 || listen(lfd, 1) < 0)
                return 0;
        (void) pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved);
        pin_to(0);
        pthread_create(&t, NULL, echo_server, (void *) (intptr_t) lfd);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (connect(fd, (struct sockaddr *) &sa, len) < 0)
                return 0;
        for (int i = 0; i < 20000; i++) {
                usec_t t0 = now_usec(CLOCK_MONOTONIC);

                if (write(fd, buf, sizeof(buf)) != (ssize_t) sizeof(buf) || read(fd, buf, sizeof(buf)) <= 0)
                        break;
                if (i >= 1000)
                        samples_add(&s, since_us(t0));
        }
        close(fd);
        pthread_join(t, NULL);
        close(lfd);
        (void) pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
        report("L1", "floor: unix socket round trip (ends on 2 CPUs)", &s, 0);
        return samples_pct(&s, 50);
}

/* A script shaped like ours: TIME, a few key reads, 7 keys, 4 arguments. */
static const char floor_script[] =
        "local t = redis.call('TIME') "
        "local a = redis.call('ZSCORE', KEYS[1], ARGV[1]) "
        "local b = redis.call('ZSCORE', KEYS[2], ARGV[1]) "
        "local n = redis.call('ZCARD', KEYS[1]) "
        "return {0, tonumber(ARGV[2]), n, -1}";

double floor_redis(void) {
        redisContext *c = bench_redis();
        redisReply *r;
        char sha[41];
        _cleanup_samples_ Samples s = {};

        if (!c)
                return 0;
        r = redisCommand(c, "SCRIPT LOAD %s", floor_script);
        if (!r || r->type != REDIS_REPLY_STRING || r->len != 40)
                return 0;
        memcpy(sha, r->str, 41);
        freeReplyObject(r);
        for (int i = 0; i < 20000; i++) {
                usec_t t0 = now_usec(CLOCK_MONOTONIC);

                r = redisCommand(c, "EVALSHA %s 7 b:{x}:holders b:{x}:queue b:{x}:waiters b:{x}:info b:{x}:grant "
                                 "b:{x}:token b:{x}:ticket 0123456789abcdef0123456789abcdef 1 15000 %s",
                                 sha, "INFO host=bench pid=1 uid=0 user=root slots=1 comm=bench");
                if (!r)
                        break;
                freeReplyObject(r);
                if (i >= 1000)
                        samples_add(&s, since_us(t0));
        }
        redisFree(c);
        report("L2", "floor: Redis EVALSHA round trip (acquire-sized)", &s, 0);
        return samples_pct(&s, 50);
}

/* L4's clients: acquire (granted), release, again with a new lease, each
 * on a name of its own. */
typedef struct Churn {
        char lease[SATURATE_CLIENTS][LEASE_ID_LEN + 1];
        char keys[SATURATE_CLIENTS][N_KEYS][96];
} Churn;

static int send_churn(redisContext *c, int i, unsigned long round, void *userdata) {
        Churn *ch = userdata;
        bool release = round % 2 == 1;

        if (round == 0)
                for (int k = 0; k < N_KEYS; k++)
                        snprintf(ch->keys[i][k], sizeof(ch->keys[i][k]), "bench-raw:{r%d}:%s", i, key_suffix[k]);
        (void) send_script(c, lua_function[release ? SCRIPT_RELEASE : SCRIPT_ACQUIRE], ch->keys[i], ch->lease[i],
                           release);
        return 1;
}

/* The floor for D: Redis alone running the agent's acquire and release
 * scripts for 64 clients at once (each on a name of its own, so every
 * acquire is granted), as fast as it can. */
double floor_redis_throughput(void) {
        static Churn ch;
        static TimeSplit split;
        redisContext *rc;
        unsigned long grants;
        RedisUse u0, u1;
        int ok0, ok1, split_ok;
        double rate;

        if (load_library() < 0)
                return 0;
        rc = bench_redis();
        if (!rc)
                return 0;
        split_ok = time_split_start(rc);
        ok0 = redis_use(rc, &u0);
        grants = redis_saturate(saturate_for, send_churn, &ch) / 2;
        ok1 = redis_use(rc, &u1);
        if (split_ok == 0)
                split_ok = time_split_read(rc, NULL, &split);
        redisFree(rc);
        floor_cost = grant_cost(ok0, &u0, ok1, &u1, grants);
        rate = (double) grants / SATURATE_SECONDS;
        printf("%-4s %-52s %9.0f grants/s  Redis CPU %.1f us/grant, %.1f commands/grant\n", "L4",
               "floor: Redis alone, acquire+release scripts, 64 clients", rate, floor_cost.cpu_us, floor_cost.commands);
        printf("@json {\"id\":\"L4\",\"what\":\"floor: Redis alone, acquire+release scripts, 64 clients\",\"grants_per_s\":%.0f,"
               "\"redis_cpu_us_per_grant\":%.1f,\"redis_commands_per_grant\":%.1f}\n", rate, floor_cost.cpu_us,
               floor_cost.commands);
        fflush(stdout);
        if (split_ok == 0)
                time_split_print("L4", &split, grants, floor_cost.cpu_us);
        return rate;
}

/* L5, the peer floor: redis-semaphore's algorithm (acquire: one script of
 * ZREMRANGEBYSCORE, ZCARD, ZADD, PEXPIRE on the caller's clock; release: a
 * ZREM), driven as L4 is: 64 clients, each on a name of its own, through
 * the same loop. */
static const char peer_acquire_script[] =
        "local expired = tonumber(ARGV[4]) - tonumber(ARGV[3]) "
        "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', expired) "
        "if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then "
        "  redis.call('ZADD', KEYS[1], ARGV[4], ARGV[2]) "
        "  redis.call('PEXPIRE', KEYS[1], ARGV[3]) "
        "  return 1 "
        "end "
        "return 0";

typedef struct Peer {
        char sha[41];
        char lease[SATURATE_CLIENTS][LEASE_ID_LEN + 1];
        char key[SATURATE_CLIENTS][64];
} Peer;

static int send_peer(redisContext *c, int i, unsigned long round, void *userdata) {
        Peer *p = userdata;
        char now[32];

        if (round == 0)
                snprintf(p->key[i], sizeof(p->key[i]), "bench-peer:{r%d}", i);
        if (round % 2 == 1)
                return redisAppendCommand(c, "ZREM %s %s", p->key[i], p->lease[i]) == REDIS_OK ? 1 : 0;
        (void) lease_id_new(p->lease[i]);
        snprintf(now, sizeof(now), "%" PRIu64, now_usec(CLOCK_REALTIME) / USEC_PER_MSEC);
        return redisAppendCommand(c, "EVALSHA %s 1 %s 8 %s 15000 %s", p->sha, p->key[i], p->lease[i], now) ==
               REDIS_OK ? 1 : 0;
}

void floor_peer(void) {
        static Peer p;
        static TimeSplit split;
        redisContext *rc = bench_redis();
        redisReply *r = NULL;
        unsigned long grants;
        RedisUse u0, u1;
        int ok0, ok1, split_ok;
        GrantCost cost;

        if (rc)
                r = redisCommand(rc, "SCRIPT LOAD %s", peer_acquire_script);
        if (!r || r->type != REDIS_REPLY_STRING || r->len != 40) {
                freeReplyObject(r);
                if (rc)
                        redisFree(rc);
                return;
        }
        memcpy(p.sha, r->str, 41);
        freeReplyObject(r);
        split_ok = time_split_start(rc);
        ok0 = redis_use(rc, &u0);
        grants = redis_saturate(saturate_for, send_peer, &p) / 2;
        ok1 = redis_use(rc, &u1);
        if (split_ok == 0)
                split_ok = time_split_read(rc, "zrem", &split);
        redisFree(rc);
        cost = grant_cost(ok0, &u0, ok1, &u1, grants);
        peer_cost = cost;
        printf("%-4s %-52s %9.0f grants/s  Redis CPU %.1f us/grant, %.1f commands/grant\n", "L5",
               "peer floor: redis-semaphore's algorithm, 64 clients", grants / SATURATE_SECONDS, cost.cpu_us, cost.commands);
        if (cost.cpu_us > 0 && floor_cost.cpu_us > 0)
                printf("     L4 / L5: Redis CPU a grant %.2fx, commands a grant %.2fx\n", floor_cost.cpu_us / cost.cpu_us,
                       floor_cost.commands / cost.commands);
        printf("@json {\"id\":\"L5\",\"what\":\"peer floor: redis-semaphore's algorithm, 64 clients\",\"grants_per_s\":%.0f,"
               "\"redis_cpu_us_per_grant\":%.1f,\"redis_commands_per_grant\":%.1f,\"l4_over_l5_cpu\":%.2f}\n",
               grants / SATURATE_SECONDS, cost.cpu_us, cost.commands,
               cost.cpu_us > 0 && floor_cost.cpu_us > 0 ? floor_cost.cpu_us / cost.cpu_us : -1);
        fflush(stdout);
        if (split_ok == 0)
                time_split_print("L5", &split, grants, cost.cpu_us);
}

