/* SPDX-License-Identifier: MIT */
#pragma once

/* What the benchmark's families share: the run's arguments, reporting,
 * processes, the client and Redis alone (bench.c, bench-redis.c). Each
 * family is a file of its own: the floors (bench-floors.c), latency A-C
 * (bench-latency.c), throughput D (bench-throughput.c), scale E
 * (bench-scale.c), peers F (bench-peers.c), a fleet of agents G
 * (bench-fleet.c), a local flood H (bench-flood.c). */

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent.h"
#include "lua-keys.h"
#include "stats.h"

/* bench.c: the run's arguments */
extern const char *redis_socket, *fleetsem_bin;
extern const char *ns[3];
extern int n_ns;

_Noreturn void bench_failed(const char *id, const char *why);
void report(const char *id, const char *what, Samples *s, double floor_us);

/* bench.c: processes */
pid_t spawn_quiet(char *const argv[]);
void spawn_done(pid_t pid, char *const argv[]);
double spawn_wait(char *const argv[]);
pid_t start_agent(const char *fleetsemd, const char *n, const char *host, const char *url, const char *const *extra,
                  const char *log, int *ret_log);
double wait_log(int fd, const char *what, usec_t start);
double cpu_seconds(pid_t pid);

/* bench.c: the client, Redis */
int send_acquire(const char *n, const char *name, uint32_t slots, usec_t wait, int *ret_anchor, int *ret_fd);
int acquire(const char *n, const char *name, uint32_t slots, usec_t wait, int *ret_anchor, int *ret_fd,
            bool until_granted);
/* A's loop, and LA's and LAf's: 5,000 grants of NAME, each released at
 * once (the anchor closed), the first 200 untimed; a reply other than
 * GRANTED, or none in 10 s, ends it. Returns the grants made. */
unsigned long timed_grants(const char *n, const char *name, Samples *s);
redisContext *bench_redis(void);
unsigned long long files_max(void);

/* bench-redis.c: Redis alone, running the agent's library */
int append_script(redisContext *c, const char *fn, char keys[N_KEYS][96], size_t n, const char *const *args);
int append_acquire(redisContext *c, const char *sha, char keys[N_KEYS][96], const char *lease, const char *slots,
                   const char *host);
int send_script(redisContext *c, const char *sha, char keys[N_KEYS][96], char lease[LEASE_ID_LEN + 1], bool release);
int load_library(void);

/* Keeps N connections to Redis as busy as they can be for duration:
 * send(c, i, round, userdata) queues client i's next round of commands
 * and returns how many replies it waits for. Returns the rounds done. */
typedef int (*send_fn)(redisContext *c, int i, unsigned long round, void *userdata);
enum { SATURATE_CLIENTS = 64 };
/* How long each floor run by redis_saturate() lasts: 5 s, or
 * $BENCH_SATURATE_MS (the tests' short run of the floors). */
extern usec_t saturate_for;
#define SATURATE_SECONDS ((double) saturate_for / USEC_PER_SEC)
unsigned long redis_saturate(usec_t duration, send_fn send, void *userdata);

/* What Redis did so far, from one INFO. */
typedef struct RedisUse {
        long long scripts;      /* FCALL calls (the agent's), EVALSHA and EVAL (the peer's) */
        long long commands;     /* every command, those the scripts ran too */
        double cpu_s;           /* used_cpu_sys + used_cpu_user */
} RedisUse;

double info_number(const char *info, const char *field);
int redis_use(redisContext *c, RedisUse *ret);

/* What the grants between two readings of redis_use() cost Redis, each;
 * -1s when a reading is missing. */
typedef struct GrantCost {
        double cpu_us, scripts, commands;
} GrantCost;

GrantCost grant_cost(int before_ok, const RedisUse *before, int after_ok, const RedisUse *after, unsigned long grants);
void report_redis_cpu(const char *id, GrantCost c);
extern GrantCost floor_cost;    /* L4's, a grant */
extern GrantCost peer_cost;     /* L5's, a grant (G compares with it) */

/* Where the scripts' time went, from Redis' own accounting
 * (bench-redis.c). */
enum { TIME_CMDS_MAX = 48 };
typedef struct CmdTime {
        char name[40];
        double calls, usec;
        bool direct;
} CmdTime;
typedef struct TimeSplit {
        double script_calls, script_usec;
        size_t n;
        CmdTime cmd[TIME_CMDS_MAX];
} TimeSplit;

int time_split_start(redisContext *c);
int time_split_read(redisContext *c, const char *direct, TimeSplit *ret);
void time_split_print(const char *id, TimeSplit *t, unsigned long grants, double cpu_us);

/* bench-floors.c */
/* An echo thread and a connection to it (the floor L1, and B's). */
typedef struct Echo {
        int lfd, fd;
        bool pinned;            /* its two ends on two CPUs */
        pthread_t thread;
} Echo;
/* The floors L1 and L2 as `fleetsem run` meets them (B). */
typedef struct IdleFloors {
        Echo echo;
        redisContext *redis;
        char sha[41];
} IdleFloors;
int idle_floors_open(IdleFloors *f);
void idle_floors_sample(IdleFloors *f, Samples *unix_rt, Samples *redis_rt);
void idle_floors_close(IdleFloors *f);
double floor_unix(void);
double floor_redis(void);
double floor_a(bool library);
double floor_redis_throughput(void);
void floor_peer(void);

/* the families */
void scenario_a(double floor_sum, double la, double laf);
void scenario_b(void);
void scenario_c(void);
extern double c_p50;    /* C's, for the comparison with etcd in F */
void scenario_d(const char *id, int agents, int N, int names, double floor_rate);
void scenario_e(const char *fleetsemd);
void scenario_f(void);
void scenario_g(const char *fleetsemd);
void scenario_h(const char *fleetsemd, double floor_us);
