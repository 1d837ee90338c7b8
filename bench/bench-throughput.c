/* SPDX-License-Identifier: MIT */
/* D: N clients on a few names through the agents, against Redis alone. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "client.h"
#include "macro.h"
#include "socket-util.h"

/* D: N clients (at most D_CLIENTS_MAX) on `names` names of 8 slots each,
 * through `agents` agents. */
#define D_CLIENTS_MAX 1000
void scenario_d(const char *id, int agents, int N, int names, double floor_rate) {
        static LineReader lr[D_CLIENTS_MAX];
        static int anchor[D_CLIENTS_MAX], fd[D_CLIENTS_MAX];
        static bool holding[D_CLIENTS_MAX];
        static struct pollfd p[D_CLIENTS_MAX];
        char name[D_CLIENTS_MAX][24];
        const char *env_ms = getenv("BENCH_D_MS");
        usec_t start, duration = 5 * USEC_PER_SEC;
        unsigned long grants = 0;
        static TimeSplit split;
        uint64_t ms;
        redisContext *rc;
        RedisUse u0, u1;
        int ok0 = -EIO, ok1 = -EIO, split_ok = -EIO;
        GrantCost cost;
        double rate;
        char what[96];

        /* BENCH_D_MS: each D run that long (a short one for the tests). */
        if (env_ms) {
                if (parse_uint64(env_ms, 100, 600000, &ms) < 0) {
                        fprintf(stderr, "fleetsem-bench: BENCH_D_MS must be 100 to 600000, not '%s'\n", env_ms);
                        exit(EXIT_USAGE);
                }
                duration = ms * USEC_PER_MSEC;
        }
        (void) files_max();
        for (int i = 0; i < N; i++)
                snprintf(name[i], sizeof(name[i]), names == 1 ? "bench-d" : "bench-d%d", i % names);

        /* Each client holds its slot only as long as it takes to notice,
         * gives it back and asks again at once, never waiting for an
         * answer: the clients keep the agent busy, not the other way. */
        for (int i = 0; i < N; i++) {
                if (send_acquire(ns[i % agents], name[i], 8, USEC_INFINITY, &anchor[i], &fd[i]) < 0)
                        return;
                line_reader_init(&lr[i], PROTO_REPLY_MAX);
                holding[i] = false;
        }
        rc = bench_redis();
        if (rc) {
                split_ok = time_split_start(rc);
                ok0 = redis_use(rc, &u0);
        }
        start = now_usec(CLOCK_MONOTONIC);
        while (now_usec(CLOCK_MONOTONIC) - start < duration) {
                for (int i = 0; i < N; i++) {
                        if (!holding[i])
                                continue;
                        grants++;
                        safe_close(fd[i]);
                        safe_close(anchor[i]);
                        if (send_acquire(ns[i % agents], name[i], 8, USEC_INFINITY, &anchor[i], &fd[i]) < 0) {
                                fprintf(stderr, "D: client %d could not ask again\n", i);
                                return;
                        }
                        line_reader_init(&lr[i], PROTO_REPLY_MAX);
                        holding[i] = false;
                }
                for (int i = 0; i < N; i++)
                        p[i] = (struct pollfd) { .fd = fd[i], .events = POLLIN };
                if (poll(p, N, 1000) < 0)
                        break;
                for (int i = 0; i < N; i++) {
                        char *line;
                        size_t len;
                        Reply rep;
                        int r;

                        if (!p[i].revents)
                                continue;
                        r = line_reader_fill(&lr[i], fd[i]);
                        if (r == -EAGAIN)
                                continue;
                        if (r <= 0) {
                                fprintf(stderr, "D: the agent closed client %d\n", i);
                                return;
                        }
                        while (line_reader_next(&lr[i], &line, &len) > 0)
                                if (reply_parse(line, len, &rep) >= 0 && rep.kind == REPLY_GRANTED)
                                        holding[i] = true;
                }
        }
        if (rc)
                ok1 = redis_use(rc, &u1);
        if (rc && split_ok == 0)
                split_ok = time_split_read(rc, NULL, &split);
        if (rc)
                redisFree(rc);
        cost = grant_cost(ok0, &u0, ok1, &u1, grants);
        for (int i = 0; i < N; i++) {
                safe_close(fd[i]);
                safe_close(anchor[i]);
        }
        if (names == 1)
                snprintf(what, sizeof(what), "throughput: %d clients, slots 8, %d agent(s)", N, agents);
        else
                snprintf(what, sizeof(what), "throughput: %d clients, %d names of 8 slots, %d agent(s)", N, names, agents);
        rate = (double) grants / ((double) duration / USEC_PER_SEC);
        /* The rate on this machine, where the clients and the agent share
         * its cores with Redis; and what each grant cost Redis itself, which
         * is what group commit saves a fleet. */
        printf("%-4s %-52s %9.0f grants/s  %.0f%% of Redis alone; Redis CPU %.1f us/grant (%.0f%% of alone's), "
               "%.2f script calls/grant (alone: 2), %.1f commands/grant (alone: %.1f)\n", id,
               what, rate, floor_rate > 0 ? 100.0 * rate / floor_rate : 0.0, cost.cpu_us,
               cost.cpu_us > 0 && floor_cost.cpu_us > 0 ? 100.0 * cost.cpu_us / floor_cost.cpu_us : 0.0, cost.scripts,
               cost.commands, floor_cost.commands);
        printf("@json {\"id\":\"%s\",\"what\":\"%s\",\"grants_per_s\":%.0f,\"of_redis_alone\":%.2f,"
               "\"redis_cpu_us_per_grant\":%.1f,\"redis_cpu_of_alone\":%.2f,\"script_calls_per_grant\":%.2f,"
               "\"redis_commands_per_grant\":%.1f}\n",
               id, what, rate, floor_rate > 0 ? rate / floor_rate : 0.0, cost.cpu_us,
               cost.cpu_us > 0 && floor_cost.cpu_us > 0 ? cost.cpu_us / floor_cost.cpu_us : 0.0, cost.scripts,
               cost.commands);
        fflush(stdout);
        /* (The agent's own ZADD of the names index, a few a second, counts
         * among the scripts' commands here.) */
        if (split_ok == 0)
                time_split_print(id, &split, grants, cost.cpu_us);
}

