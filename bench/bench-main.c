/* SPDX-License-Identifier: MIT */
/* fleetsem-bench REDIS_SOCKET FLEETSEM NS1 [NS2 NS3]: measures the floors
 * (unix round trip, Redis round trip, fork+exec) and fleetsem through its
 * client code against running agents, in the same run. Prints a table and
 * JSON lines ("@json {...}") that bench/run.sh collects. main() runs the
 * families asked for; each lives in a file of its own, what they share in
 * bench.c and bench-redis.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "client.h"
#include "macro.h"
#include "time-util.h"

/* $BENCH_ONLY=AD runs the floors and scenarios A and D only (D with L4 and
 * L5); L: the floors only, L4 and L5 too. */
static bool wanted(char scenario) {
        const char *only = getenv("BENCH_ONLY");

        return !only || !only[0] || strchr(only, scenario);
}

int main(int argc, char *argv[]) {
        const char *env_ms = getenv("BENCH_SATURATE_MS");
        double f_unix, f_redis, floor_rate = 0;
        uint64_t ms;

        if (argc < 4) {
                fprintf(stderr, "Usage: fleetsem-bench REDIS_SOCKET FLEETSEM NAMESPACE [NAMESPACE NAMESPACE]\n");
                return EXIT_USAGE;
        }
        if (env_ms) {
                if (parse_uint64(env_ms, 1, 600000, &ms) < 0) {
                        fprintf(stderr, "fleetsem-bench: BENCH_SATURATE_MS must be 1 to 600000, not '%s'\n", env_ms);
                        return EXIT_USAGE;
                }
                saturate_for = ms * USEC_PER_MSEC;
        }
        redis_socket = argv[1];
        fleetsem_bin = argv[2];
        for (int i = 3; i < argc && n_ns < 3; i++)
                ns[n_ns++] = argv[i];

        printf("%-4s %-52s %9s %9s\n", "", "scenario", "p50 us", "p99 us");
        f_unix = floor_unix();
        f_redis = floor_redis();
        if (wanted('A')) {
                double la = floor_a(false), laf = floor_a(true);

                scenario_a(f_unix + f_redis, la, laf);
        }
        if (wanted('B'))
                scenario_b();
        if (wanted('C') && n_ns == 3)
                scenario_c();
        if (wanted('D') || wanted('L')) {
                floor_rate = floor_redis_throughput();
                floor_peer();
        }
        if (wanted('D')) {
                scenario_d("D1", 1, 64, 1, floor_rate);
                if (n_ns == 3)
                        scenario_d("D3", 3, 64, 1, floor_rate);
                scenario_d("D100", 1, 1000, 100, floor_rate);
        }
        if (wanted('E') && getenv("FLEETSEMD"))
                scenario_e(getenv("FLEETSEMD"));
        if (wanted('F'))
                scenario_f();
        if (wanted('G') && getenv("FLEETSEMD"))
                scenario_g(getenv("FLEETSEMD"));
        if (wanted('H') && getenv("FLEETSEMD"))
                scenario_h(getenv("FLEETSEMD"), f_unix + f_redis);
        return 0;
}
