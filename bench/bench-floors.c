/* SPDX-License-Identifier: MIT */
/* The floors (L): a unix socket round trip, a Redis round trip, and Redis
 * alone running the agent's scripts (L4) and a peer's algorithm (L5). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "bench.h"
#include "client.h"
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
        Echo *e = arg;
        char buf[256];
        ssize_t n;
        int fd;

        if (e->pinned)
                pin_to(1);
        fd = accept4(e->lfd, NULL, NULL, SOCK_CLOEXEC);
        while (fd >= 0 && (n = read(fd, buf, sizeof(buf))) > 0)
                if (write(fd, buf, (size_t) n) != n)
                        break;
        safe_close(fd);
        return NULL;
}

/* An echo thread on a socket of its own, e->fd connected to it. */
static int echo_open(Echo *e, bool pinned) {
        char name[64];
        struct sockaddr_un sa;
        socklen_t len;

        *e = (Echo) { .lfd = -EBADF, .fd = -EBADF, .pinned = pinned };
        snprintf(name, sizeof(name), "bench-%d-%s", getpid(), pinned ? "pinned" : "free");
        if (sockaddr_abstract(name, "echo", NULL, &sa, &len) < 0)
                return -EINVAL;
        e->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        /* (lfd stays open only once the thread that accepts on it runs:
         * echo_close() joins it then.) */
        if (e->lfd < 0 || bind(e->lfd, (struct sockaddr *) &sa, len) < 0 || listen(e->lfd, 1) < 0 ||
            pthread_create(&e->thread, NULL, echo_server, e) != 0) {
                e->lfd = safe_close(e->lfd);
                return -EIO;
        }
        e->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (e->fd < 0 || connect(e->fd, (struct sockaddr *) &sa, len) < 0)
                return -errno;
        return 0;
}

static void echo_close(Echo *e) {
        e->fd = safe_close(e->fd);
        if (e->lfd >= 0) {
                shutdown(e->lfd, SHUT_RDWR);    /* an accept still waiting returns */
                pthread_join(e->thread, NULL);
        }
        e->lfd = safe_close(e->lfd);
}

/* One request-sized round trip; its time in µs, or -1. */
static double echo_round_trip(Echo *e) {
        char buf[80] = "ACQUIRE name=bench slots=1 lease=0123456789abcdef0123456789abcdef wait=0\n";
        usec_t t0 = now_usec(CLOCK_MONOTONIC);

        if (write(e->fd, buf, sizeof(buf)) != (ssize_t) sizeof(buf) || read(e->fd, buf, sizeof(buf)) <= 0)
                return -1;
        return since_us(t0);
}

double floor_unix(void) {
        _cleanup_samples_ Samples s = {};
        cpu_set_t saved;
        Echo e;

        (void) pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved);
        pin_to(0);
        if (echo_open(&e, true) < 0) {
                echo_close(&e);
                (void) pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
                return 0;
        }
        for (int i = 0; i < 20000; i++) {
                double us = echo_round_trip(&e);

                if (us < 0)
                        break;
                if (i >= 1000)
                        samples_add(&s, us);
        }
        echo_close(&e);
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

static int floor_script_load(redisContext *c, char sha[static 41]) {
        redisReply *r = redisCommand(c, "SCRIPT LOAD %s", floor_script);
        int k = r && r->type == REDIS_REPLY_STRING && r->len == 40 ? 0 : -EIO;

        if (k == 0)
                memcpy(sha, r->str, 41);
        freeReplyObject(r);
        return k;
}

/* An acquire-sized script call, appended to c's output (not sent). */
static int floor_script_append(redisContext *c, const char *sha) {
        return redisAppendCommand(c, "EVALSHA %s 7 b:{x}:holders b:{x}:queue b:{x}:waiters b:{x}:info b:{x}:grant "
                                  "b:{x}:token b:{x}:ticket 0123456789abcdef0123456789abcdef 1 15000 %s",
                                  sha, "INFO host=bench pid=1 uid=0 user=root slots=1 comm=bench") == REDIS_OK ? 0 : -EIO;
}

/* Reads the reply of one call appended before; 0, or -EIO when there is
 * none or Redis refused the call. */
static int floor_script_reply(redisContext *c) {
        redisReply *r = NULL;
        int k;

        if (redisGetReply(c, (void **) &r) != REDIS_OK || !r)
                return -EIO;
        k = r->type == REDIS_REPLY_ERROR ? -EIO : 0;
        freeReplyObject(r);
        return k;
}

/* One acquire-sized script call; its time in µs, or -1. */
static double floor_script_call(redisContext *c, const char *sha) {
        usec_t t0 = now_usec(CLOCK_MONOTONIC);

        if (floor_script_append(c, sha) < 0 || floor_script_reply(c) < 0)
                return -1;
        return since_us(t0);
}

double floor_redis(void) {
        redisContext *c = bench_redis();
        char sha[41];
        _cleanup_samples_ Samples s = {};

        if (!c)
                return 0;
        if (floor_script_load(c, sha) < 0) {
                redisFree(c);
                return 0;
        }
        for (int i = 0; i < 20000; i++) {
                double us = floor_script_call(c, sha);

                if (us < 0)
                        break;
                if (i >= 1000)
                        samples_add(&s, us);
        }
        redisFree(c);
        report("L2", "floor: Redis EVALSHA round trip (acquire-sized)", &s, 0);
        return samples_pct(&s, 50);
}

/* L1 and L2 as `fleetsem run` meets them in B: one of each after each
 * round's commands, the peer idle since the round before (the echo's two
 * ends left to the scheduler, as a client and its agent are). */
int idle_floors_open(IdleFloors *f) {
        f->redis = bench_redis();
        if (!f->redis || floor_script_load(f->redis, f->sha) < 0 || echo_open(&f->echo, false) < 0)
                return -EIO;
        return 0;
}

void idle_floors_sample(IdleFloors *f, Samples *unix_rt, Samples *redis_rt) {
        double u = echo_round_trip(&f->echo), r = floor_script_call(f->redis, f->sha);

        if (u >= 0)
                samples_add(unix_rt, u);
        if (r >= 0)
                samples_add(redis_rt, r);
}

void idle_floors_close(IdleFloors *f) {
        echo_close(&f->echo);
        if (f->redis)
                redisFree(f->redis);
        f->redis = NULL;
}

/* LA, A's floor: what A does through the client code, against a server
 * that does only what no agent can leave out. The client is A's own
 * (lease, anchor, connection, request, reply); the server, a thread left
 * to the scheduler as the agent is, accepts, reads SO_PEERCRED and the
 * request, watches the anchor, makes an acquire-sized script call and
 * answers GRANTED; when the anchor closes it sends a release-sized call
 * at once, whose reply it reads with the next acquire's. Nothing else:
 * no description, no peer check, no event loop, no logging. */
typedef struct FloorA {
        char ns[64];
        int lfd;
        redisContext *redis;
        char sha[41];
        pthread_t thread;
        /* LAf: the library's acquire and release instead, on one name. */
        bool library;
        char keys[N_KEYS][96];
        char lease[LEASE_ID_LEN + 1];
} FloorA;

static int floor_a_append(FloorA *f, bool release) {
        if (!f->library)
                return floor_script_append(f->redis, f->sha);
        return send_script(f->redis, lua_function[release ? SCRIPT_RELEASE : SCRIPT_ACQUIRE], f->keys, f->lease,
                           release) == REDIS_OK ? 0 : -EIO;
}

/* One request: accepted, answered, its anchor watched until it closes;
 * *release_out: the release call sent, its reply still to come. */
static int floor_a_serve(FloorA *f, bool *release_out) {
        _cleanup_close_ int fd = -EBADF, watch = -EBADF;
        char buf[PROTO_REQUEST_MAX + 1], reply[256], *lease;
        struct ucred cred;
        socklen_t cl = sizeof(cred);
        size_t got = 0;
        int done = 0;

        fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0)
                return -errno;
        while (got < sizeof(buf) - 1 && !memchr(buf, '\n', got)) {
                ssize_t n = read(fd, buf + got, sizeof(buf) - 1 - got);

                if (n <= 0)
                        return -EIO;
                got += (size_t) n;
        }
        buf[got] = '\0';
        lease = strstr(buf, " lease=");
        if (!lease || strlen(lease) < 7 + LEASE_ID_LEN)
                return -EINVAL;
        lease[7 + LEASE_ID_LEN] = '\0';
        lease += 7;
        if (anchor_watch(f->ns, lease, &watch) < 0 || floor_a_append(f, false) < 0)
                return -EIO;
        if (*release_out && floor_script_reply(f->redis) < 0)
                return -EIO;
        *release_out = false;
        if (floor_script_reply(f->redis) < 0)
                return -EIO;
        snprintf(reply, sizeof(reply), "GRANTED token=1 lease=%s since=1 ttl=15000 limit=%u\n", lease, SLOTS_MAX);
        if (write(fd, reply, strlen(reply)) != (ssize_t) strlen(reply))
                return -EIO;
        if (poll(&(struct pollfd) { .fd = watch, .events = POLLIN }, 1, 10000) <= 0)
                return -ETIMEDOUT;
        if (floor_a_append(f, true) < 0)
                return -EIO;
        while (!done)
                if (redisBufferWrite(f->redis, &done) != REDIS_OK)
                        return -EIO;
        *release_out = true;
        return 0;
}

/* Until the listener is shut down, or a request fails: its client then
 * reads no reply, or the next one none within its deadline. */
static void *floor_a_server(void *arg) {
        FloorA *f = arg;
        bool release = false;

        while (floor_a_serve(f, &release) == 0)
                ;
        return NULL;
}

/* LA; with library, LAf (not a floor: the scripts' share of A, beside
 * the agent's). */
double floor_a(bool library) {
        _cleanup_samples_ Samples s = {};
        struct sockaddr_un sa;
        socklen_t len;
        FloorA f = { .lfd = -EBADF, .library = library };
        bool started = false;
        redisContext *rc = bench_redis();      /* Redis' readings */
        RedisUse u0, u1;
        int ok0, ok1;
        unsigned long n;

        snprintf(f.ns, sizeof(f.ns), "bench-%d-la%s", getpid(), library ? "f" : "");
        for (int k = 0; k < N_KEYS; k++)
                snprintf(f.keys[k], sizeof(f.keys[k]), "bench-raw:{la}:%s", key_suffix[k]);
        f.redis = bench_redis();
        if (library && load_library() < 0)
                bench_failed("LAf", "cannot load the library");
        if (f.redis && floor_script_load(f.redis, f.sha) == 0 && sockaddr_abstract(f.ns, "agent", NULL, &sa, &len) == 0) {
                f.lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
                started = f.lfd >= 0 && bind(f.lfd, (struct sockaddr *) &sa, len) == 0 && listen(f.lfd, 64) == 0 &&
                          pthread_create(&f.thread, NULL, floor_a_server, &f) == 0;
        }
        ok0 = rc ? redis_use(rc, &u0) : -EIO;
        n = started ? timed_grants(f.ns, "bench-la", &s) : 0;
        if (started) {
                shutdown(f.lfd, SHUT_RDWR);     /* its accept returns */
                pthread_join(f.thread, NULL);
        }
        safe_close(f.lfd);
        ok1 = rc ? redis_use(rc, &u1) : -EIO;
        if (rc)
                redisFree(rc);
        if (f.redis)
                redisFree(f.redis);
        if (library)
                report("LAf", "LA with the library's acquire and release", &s, 0);
        else
                report("LA", "floor: A's sockets and 2 script calls, nothing else", &s, 0);
        report_redis_cpu(library ? "LAf" : "LA", grant_cost(ok0, &u0, ok1, &u1, n));
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

