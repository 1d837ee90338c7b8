/* SPDX-License-Identifier: MIT */
/* G: a fleet of agents on one Redis: renewals, rounds of requests, then
 * the reconnect storms (bench-storm.c). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "bench-fleet.h"
#include "client.h"
#include "lua-args.h"
#include "macro.h"
#include "socket-util.h"

/* ---- G: a fleet of agents on one Redis ---- */

/* Redis and every agent over one stretch of time. */
typedef struct Usage {
        usec_t at;
        RedisUse redis;
        double agent_cpu_s[G_AGENTS_MAX];
} Usage;

static void usage_take(redisContext *c, const pid_t *agents, int n, Usage *u) {
        u->at = now_usec(CLOCK_MONOTONIC);
        (void) redis_use(c, &u->redis);
        for (int i = 0; i < n; i++)
                u->agent_cpu_s[i] = cpu_seconds(agents[i]);
}

typedef struct UsageDelta {
        double seconds, scripts, commands, redis_cpu_s;
        double agent_cpu_s_mean, agent_cpu_s_max;
} UsageDelta;

static UsageDelta usage_delta(const Usage *a, const Usage *b, int n) {
        double sum = 0, max = 0;

        for (int i = 0; i < n; i++) {
                double t = b->agent_cpu_s[i] - a->agent_cpu_s[i];

                sum += t;
                max = t > max ? t : max;
        }
        return (UsageDelta) {
                .seconds = (double) (b->at - a->at) / USEC_PER_SEC,
                .scripts = (double) (b->redis.scripts - a->redis.scripts),
                /* Less the INFO that took a. */
                .commands = (double) (b->redis.commands - a->redis.commands - 1),
                .redis_cpu_s = b->redis.cpu_s - a->redis.cpu_s,
                .agent_cpu_s_mean = n > 0 ? sum / n : 0,
                .agent_cpu_s_max = max,
        };
}

/* One request (METRICS, or STATUS of a name) to every agent at once, each
 * read to its END. */
static int g_round(char fleet[][64], int n, const Request *req) {
        static int fd[G_AGENTS_MAX];
        static LineReader lr[G_AGENTS_MAX];
        int left = n, r = 0;

        for (int i = 0; i < n; i++) {
                if (client_send_request(fleet[i], 0, 10 * USEC_PER_SEC, req, &fd[i]) < 0)
                        return -EIO;
                line_reader_init(&lr[i], PROTO_REPLY_MAX);
        }
        while (left > 0 && r >= 0) {
                for (int i = 0; i < n && r >= 0; i++) {
                        char *line;
                        size_t len;

                        if (fd[i] < 0)
                                continue;
                        r = client_read_line(fd[i], &lr[i], now_usec(CLOCK_MONOTONIC) + 30 * USEC_PER_SEC, &line, &len);
                        if (r >= 0 && len >= 3 && strneq(line, "END", 3)) {
                                fd[i] = safe_close(fd[i]);
                                left--;
                        }
                }
        }
        for (int i = 0; i < n; i++)
                fd[i] = safe_close(fd[i]);
        return r < 0 ? r : 0;
}

/* Rounds of req from every agent; what they cost Redis and the agents. */
static int g_rounds(redisContext *rc, const pid_t *agent, char fleet[][64], int n, const Request *req, int rounds,
                    UsageDelta *ret, Samples *wall) {
        static Usage u0, u1;
        int r = 0;

        usage_take(rc, agent, n, &u0);
        for (int k = 0; k < rounds && r >= 0; k++) {
                usec_t s = now_usec(CLOCK_MONOTONIC);

                r = g_round(fleet, n, req);
                samples_add(wall, since_us(s));
        }
        usage_take(rc, agent, n, &u1);
        *ret = usage_delta(&u0, &u1, n);
        return r;
}

/* Never below 0: a cost is what is above the idle floor, or nothing. */
static double not_negative(double x) {
        return x > 0 ? x : 0;
}

/* idle: Redis' CPU with the agents connected and nothing to renew, in
 * seconds a second: what is above it is the renewals'. A host-tick: one
 * agent's renewal round (a third of the lease). A held name: one agent's
 * slot of one name; a second of it, against L5's whole grant (the peer's
 * acquire and release). */
static void g_print_renewal(const char *id, int n, const char *ttl, const UsageDelta *d, double idle) {
        double busy = not_negative(d->redis_cpu_s - idle * d->seconds),
               per_call = d->scripts > 0 ? 1e6 * busy / d->scripts : 0.0,
               tick_s = (double) atoi(ttl) / 3.0,
               per_host_tick = d->scripts / d->seconds * tick_s / n,
               per_held_s = 1e6 * busy / d->seconds / (n * G_NAMES);
        char what[96];

        snprintf(what, sizeof(what), "%d agents x %d held slots, lease %s: renewal", n, G_NAMES, ttl);
        printf("%-4s %s (%.0f s)\n", id, what, d->seconds);
        printf("%-4s   Redis script calls                                 %8.1f /s\n", "", d->scripts / d->seconds);
        printf("%-4s   Redis script calls a host-tick (%.1f s)           %8.2f\n", "", tick_s, per_host_tick);
        printf("%-4s   Redis commands, those the scripts run included     %8.1f /s\n", "", d->commands / d->seconds);
        printf("%-4s   Redis CPU                                          %8.2f %% of a core (idle: %.2f %%)\n", "",
               100.0 * d->redis_cpu_s / d->seconds, 100.0 * idle);
        printf("%-4s   Redis CPU a script call, above idle                %8.0f us\n", "", per_call);
        printf("%-4s   Redis CPU a held name a second, above idle         %8.3f us/s", "", per_held_s);
        if (peer_cost.cpu_us > 0)
                printf(" (%.4fx L5's grant, %.1f us)", per_held_s / peer_cost.cpu_us, peer_cost.cpu_us);
        printf("\n");
        printf("%-4s   agent CPU, mean / max                              %8.3f / %.3f %% of a core\n", "",
               100.0 * d->agent_cpu_s_mean / d->seconds, 100.0 * d->agent_cpu_s_max / d->seconds);
        printf("@json {\"id\":\"%s\",\"what\":\"%s\",\"agents\":%d,\"slots_per_agent\":%d,\"seconds\":%.1f,"
               "\"script_calls_per_s\":%.1f,\"script_calls_per_host_tick\":%.2f,\"commands_per_s\":%.1f,"
               "\"redis_cpu_pct\":%.3f,\"redis_idle_cpu_pct\":%.3f,\"redis_us_per_script_call\":%.1f,"
               "\"redis_us_per_held_name_s\":%.3f,\"held_name_s_over_l5_grant\":%.4f,"
               "\"agent_cpu_pct_mean\":%.4f,\"agent_cpu_pct_max\":%.4f}\n",
               id, what, n, G_NAMES, d->seconds, d->scripts / d->seconds, per_host_tick, d->commands / d->seconds,
               100.0 * d->redis_cpu_s / d->seconds, 100.0 * idle, per_call, per_held_s,
               peer_cost.cpu_us > 0 ? per_held_s / peer_cost.cpu_us : -1,
               100.0 * d->agent_cpu_s_mean / d->seconds, 100.0 * d->agent_cpu_s_max / d->seconds);
        fflush(stdout);
}

static void g_print_rounds(const char *id, const char *what, int n, int rounds, const UsageDelta *d, Samples *wall) {
        double k = (double) n * rounds;

        printf("%-4s %d agents: %s from every agent at once, %d rounds\n", id, n, what, rounds);
        printf("%-4s   a round, all %d answered: p50 / max              %8.1f / %.1f ms\n", "", n,
               samples_pct(wall, 50) / 1000.0, samples_pct(wall, 100) / 1000.0);
        printf("%-4s   per request: script calls %.1f, commands %.1f, Redis CPU %.0f us, agent CPU %.0f us\n", "",
               d->scripts / k, d->commands / k, 1e6 * d->redis_cpu_s / k, 1e6 * d->agent_cpu_s_mean * n / k);
        printf("@json {\"id\":\"%s\",\"what\":\"%s from every agent at once\",\"agents\":%d,\"rounds\":%d,"
               "\"round_p50_ms\":%.1f,\"round_max_ms\":%.1f,\"scripts_per_request\":%.2f,\"commands_per_request\":%.2f,"
               "\"redis_us_per_request\":%.1f,\"agent_us_per_request\":%.1f}\n",
               id, what, n, rounds, samples_pct(wall, 50) / 1000.0, samples_pct(wall, 100) / 1000.0, d->scripts / k,
               d->commands / k, 1e6 * d->redis_cpu_s / k, 1e6 * d->agent_cpu_s_mean * n / k);
        fflush(stdout);
}

/* Redis idle after the fleet let go: every release done (nothing held
 * under prefix), then 1 s windows until Redis' CPU stops falling (20 s at
 * most); its CPU over IDLE_SECONDS then, in seconds a second. */
static double g_idle(redisContext *rc, const char *prefix) {
        enum { IDLE_SECONDS = 3 };
        usec_t until = now_usec(CLOCK_MONOTONIC) + 60 * USEC_PER_SEC;
        double last = -1;
        RedisUse a, b;

        while (g_held(rc, prefix) != 0 && now_usec(CLOCK_MONOTONIC) < until)
                usleep(20000);
        for (int i = 0; i < 20; i++) {
                double w;

                if (redis_use(rc, &a) < 0)
                        return 0;
                sleep(1);
                if (redis_use(rc, &b) < 0)
                        return 0;
                w = b.cpu_s - a.cpu_s;
                if (last >= 0 && w >= last * 0.9)
                        break;
                last = w;
        }
        if (redis_use(rc, &a) < 0)
                return 0;
        sleep(IDLE_SECONDS);
        if (redis_use(rc, &b) < 0)
                return 0;
        return not_negative(b.cpu_s - a.cpu_s) / IDLE_SECONDS;
}

/* Starts n agents with lease ttl under key prefix, fills them, measures
 * renewal for seconds (with more_id: then METRICS and STATUS rounds, G2
 * and G2s, and the reconnect storms of the benchmark's Redis, G4a and
 * G4b), lets go of the slots, measures Redis idle with the agents
 * connected, stops them. */
static int g_fleet(const char *fleetsemd, redisContext **rcp, int n, const char *ttl, const char *prefix, int seconds,
                   const char *id, bool more) {
        enum { ROUNDS = 5 };
        UsageDelta renewal = {}, metrics = {}, status = {};
        _cleanup_samples_ Samples metrics_wall = {}, status_wall = {};
        static pid_t agent[G_AGENTS_MAX];
        static int anchor[G_AGENTS_MAX * G_NAMES];
        static char fleet[G_AGENTS_MAX][64];
        static Usage u0, u1;
        char log[96];
        Request req_metrics = { .verb = REQUEST_METRICS }, req_status = { .verb = REQUEST_STATUS, .name = "bench-g-0" };
        GStorm storm[2] = {};
        int storm_r[2] = { -1, -1 };
        double idle = 0;
        usec_t t0;
        int r;

        g_seed(*rcp, prefix);
        snprintf(log, sizeof(log), "/tmp/fleetsem-bench-g-%d.log", getpid());
        for (int i = 0; i < n * G_NAMES; i++)
                anchor[i] = -EBADF;
        t0 = now_usec(CLOCK_MONOTONIC);
        r = g_start(fleetsemd, n, NULL, ttl, prefix, log, agent, fleet);
        if (r >= 0)
                r = g_fill(fleet, n, anchor);
        if (r < 0)
                fprintf(stderr, "G: the agents did not all grant within a minute (see %s)\n", log);
        else {
                printf("%-4s %d agents started, %d slots held, in %.1f s\n", id, n, n * G_NAMES, since_us(t0) / 1e6);
                sleep(2);
                usage_take(*rcp, agent, n, &u0);
                sleep((unsigned) seconds);
                usage_take(*rcp, agent, n, &u1);
                renewal = usage_delta(&u0, &u1, n);
        }
        if (r >= 0 && more) {
                /* What every host's metrics timer costs, then a bounded
                 * status (a page of a name held on every host). */
                r = g_rounds(*rcp, agent, fleet, n, &req_metrics, ROUNDS, &metrics, &metrics_wall);
                if (r >= 0)
                        r = g_rounds(*rcp, agent, fleet, n, &req_status, ROUNDS, &status, &status_wall);
                if (r < 0)
                        fprintf(stderr, "G: a round of METRICS or STATUS failed: %s\n", strerror(-r));
        }
        if (r >= 0 && more)
                for (StormKind k = STORM_EMPTY; k <= STORM_KEPT && *rcp; k++) {
                        storm_r[k] = g_storm(rcp, prefix, n, k, &storm[k]);
                        if (storm_r[k] < 0)
                                fprintf(stderr, "G: storm %d: %s (see %s)\n", k, strerror(-storm_r[k]), log);
                        sleep(2);
                }
        for (int i = 0; i < n * G_NAMES; i++)
                anchor[i] = safe_close(anchor[i]);
        if (*rcp)
                idle = g_idle(*rcp, prefix);
        if (renewal.seconds > 0)
                g_print_renewal(id, n, ttl, &renewal, idle);
        if (metrics.seconds > 0)
                g_print_rounds("G2", "METRICS", n, ROUNDS, &metrics, &metrics_wall);
        if (status.seconds > 0)
                g_print_rounds("G2s", "STATUS of a name all hold (a page)", n, ROUNDS, &status, &status_wall);
        for (StormKind k = STORM_EMPTY; k <= STORM_KEPT; k++)
                if (storm[k].expected > 0 && storm[k].back_s > 0)
                        g_print_storm(n, k, &storm[k]);
        g_stop(agent, n);
        if (r >= 0 && storm_r[0] >= 0 && storm_r[1] >= 0)
                unlink(log);
        return r;
}

/* G's floor: Redis alone renewing, as fast as it can, leases of names with
 * as many holders as G's, each call with the ZADD to the names index the
 * agent sends with it: what one Redis core sustains. */
typedef struct RenewLoad {
        int hosts;
        char keys[G_NAMES][N_KEYS][96];
        char lease[G_AGENTS_MAX][G_NAMES][LEASE_ID_LEN + 1];
} RenewLoad;

static int send_renew(redisContext *c, int i, unsigned long round, void *userdata) {
        RenewLoad *rl = userdata;
        int name = (int) ((round + (unsigned long) i) % G_NAMES), h = (int) ((round * 7 + (unsigned long) i) % (unsigned long) rl->hosts);
        char host[32], now[24], *index;

        snprintf(host, sizeof(host), "h%d", h);
        (void) append_script(c, lua_function[SCRIPT_RENEW], rl->keys[name], ARG_RENEW_LEASES + 1, (const char *[ARG_RENEW_LEASES + 1]) {
                [ARG_RENEW_TTL_MS] = "15000", [ARG_RENEW_HOST] = host, [ARG_RENEW_GRACE_UNTIL_MS] = "0",
                [ARG_RENEW_IDLE_MS] = "86400000", [ARG_RENEW_LEASES] = rl->lease[h][name],
        });
        snprintf(now, sizeof(now), "%lld", (long long) (now_usec(CLOCK_REALTIME) / USEC_PER_MSEC));
        index = strchr(rl->keys[name][0], '{');
        (void) redisAppendCommand(c, "ZADD bench-raw:names %s %b", now, index + 1, strcspn(index + 1, "}"));
        return 2;
}

static double g_floor(redisContext *rc, int hosts) {
        static RenewLoad rl;
        char host[32];
        RedisUse a, b;
        unsigned long calls;
        double rate, cpu;

        rl.hosts = hosts;
        if (load_library() < 0)
                return 0;
        for (int k = 0; k < G_NAMES; k++)
                for (int j = 0; j < N_KEYS; j++)
                        snprintf(rl.keys[k][j], sizeof(rl.keys[k][j]), "bench-raw:{g%d}:%s", k, key_suffix[j]);
        for (int h = 0; h < hosts; h++)
                for (int k = 0; k < G_NAMES; k++) {
                        redisReply *r = NULL;

                        snprintf(host, sizeof(host), "h%d", h);
                        (void) lease_id_new(rl.lease[h][k]);
                        if (append_acquire(rc, lua_function[SCRIPT_ACQUIRE], rl.keys[k], rl.lease[h][k], "1000", host) == REDIS_OK)
                                (void) redisGetReply(rc, (void **) &r);
                        freeReplyObject(r);
                }
        (void) redis_use(rc, &a);
        calls = redis_saturate(saturate_for, send_renew, &rl);
        (void) redis_use(rc, &b);
        rate = (double) calls / SATURATE_SECONDS;
        cpu = (b.cpu_s - a.cpu_s) / SATURATE_SECONDS;
        printf("%-4s %-52s %9.0f calls/s  Redis at %.0f%% of a core: %.0f calls/s a core\n", "G0",
               "floor: Redis alone, renew (+ZADD), 64 clients", rate, 100.0 * cpu, cpu > 0 ? rate / cpu : 0.0);
        printf("@json {\"id\":\"G0\",\"what\":\"floor: Redis alone, renew script and names ZADD, 64 clients\","
               "\"calls_per_s\":%.0f,\"redis_cpu_pct\":%.1f,\"calls_per_s_per_core\":%.0f,\"redis_us_per_call\":%.1f}\n",
               rate, 100.0 * cpu, cpu > 0 ? rate / cpu : 0.0, rate > 0 ? 1e6 * cpu / rate : 0.0);
        fflush(stdout);
        return rate;
}

/* $BENCH_G_AGENTS agents (default 100), each its own host, namespace and
 * three held slots; renewal for $BENCH_G_SECONDS (default 30) at the
 * default lease, then METRICS and STATUS rounds and the reconnect storms
 * (Redis restarted: G runs on the Redis of bench/run.sh only), then
 * renewal for half as long at a short lease, then the failover storm (a
 * master, replica and Sentinel of its own). L5, the peer's grant, is
 * measured first when no other scenario did. */
void scenario_g(const char *fleetsemd) {
        const char *env_n = getenv("BENCH_G_AGENTS"), *env_s = getenv("BENCH_G_SECONDS");
        int n = env_n ? atoi(env_n) : 100, seconds = env_s ? atoi(env_s) : 30;
        char prefix[48];
        redisContext *rc;

        if (n < 1 || n > G_AGENTS_MAX || seconds < 1) {
                fprintf(stderr, "G: BENCH_G_AGENTS must be 1..%d, BENCH_G_SECONDS at least 1\n", G_AGENTS_MAX);
                return;
        }
        (void) files_max();
        if (peer_cost.cpu_us <= 0)
                floor_peer();
        rc = bench_redis();
        if (!rc)
                return;
        (void) g_floor(rc, n);
        snprintf(prefix, sizeof(prefix), "benchg-%d", getpid());
        if (g_fleet(fleetsemd, &rc, n, "15s", prefix, seconds, "G1", true) >= 0 && rc) {
                GStorm failover;

                snprintf(prefix, sizeof(prefix), "benchg5-%d", getpid());
                (void) g_fleet(fleetsemd, &rc, n, "5s", prefix, seconds / 2, "G3", false);
                snprintf(prefix, sizeof(prefix), "benchgf-%d", getpid());
                if (g_failover(fleetsemd, n, prefix, &failover) >= 0 || failover.back_s > 0)
                        g_print_storm(n, STORM_FAILOVER, &failover);
        }
        if (rc)
                redisFree(rc);
}

