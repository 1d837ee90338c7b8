/* SPDX-License-Identifier: MIT */
/* E: one agent holding many leases: its start, its CPU and memory. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "macro.h"

static long rss_kib(pid_t pid) {
        char path[64], line[256];
        long kib = -1;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", pid);
        f = fopen(path, "re");
        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
                        break;
        fclose(f);
        return kib;
}

void scenario_e(const char *fleetsemd) {
        double rss;
        unsigned long long files;
        enum { SLOTS = 10000, NAMES = 10, MEASURE = 10 };
        static int anchor[SLOTS];
        char n[64], name[64], log[96];
        redisContext *rc;
        double cpu0, cpu1;
        RedisUse use0 = {}, use1 = {};
        double fill, adopt;
        usec_t t0;
        int log_fd, held = 0;
        pid_t agent;

        files = files_max();
        if (files < SLOTS + 1000) {
                printf("E    skipped: needs %d open files, the limit is %llu\n", SLOTS + 1000, files);
                return;
        }
        snprintf(n, sizeof(n), "benche-%d", getpid());
        snprintf(log, sizeof(log), "/tmp/fleetsem-bench-e-%d.log", getpid());
        agent = start_agent(fleetsemd, n, "bench-e", NULL, (const char *const[]) { "--log-level", "info", NULL }, log, &log_fd);
        if (agent < 0 || wait_log(log_fd, "Connected to Redis", now_usec(CLOCK_MONOTONIC)) < 0)
                return;

        t0 = now_usec(CLOCK_MONOTONIC);
        for (int i = 0; i < SLOTS; i++) {
                int fd = -EBADF;

                snprintf(name, sizeof(name), "bench-e-%d", i % NAMES);
                if (acquire(n, name, SLOTS, 0, &anchor[i], &fd, true) != 1)
                        break;
                safe_close(fd);
                held++;
        }
        fill = since_us(t0);

        rc = bench_redis();
        sleep(2);
        (void) redis_use(rc, &use0);
        cpu0 = cpu_seconds(agent);
        sleep(MEASURE);
        (void) redis_use(rc, &use1);
        cpu1 = cpu_seconds(agent);

        printf("E    %d slots held on %d names through one agent (filled in %.1f s)\n", held, NAMES, fill / 1e6);
        printf("E1   agent CPU in steady state                             %8.2f %% of a core\n",
               (cpu1 - cpu0) * 100.0 / MEASURE);
        printf("E2   Redis script calls per second (renewal)               %8.1f /s\n",
               (double) (use1.scripts - use0.scripts) / MEASURE);
        rss = rss_kib(agent) / 1024.0;
        printf("E3   agent RSS                                             %8.1f MiB\n", rss);

        kill(agent, SIGTERM);
        waitpid(agent, NULL, 0);
        close(log_fd);
        t0 = now_usec(CLOCK_MONOTONIC);
        agent = start_agent(fleetsemd, n, "bench-e", NULL, (const char *const[]) { "--log-level", "info", NULL }, log, &log_fd);
        snprintf(name, sizeof(name), "Re-adopted %d held slot", held);
        adopt = agent > 0 ? wait_log(log_fd, name, t0) : -1;
        printf("E4   agent restart: re-adopting all %d slots took          %8.1f ms\n", held, adopt / 1000.0);
        printf("@json {\"id\":\"E\",\"slots\":%d,\"names\":%d,\"agent_cpu_pct\":%.2f,\"renewal_calls_per_s\":%.1f,"
               "\"agent_rss_mib\":%.1f,\"readopt_ms\":%.1f}\n",
               held, NAMES, (cpu1 - cpu0) * 100.0 / MEASURE,
               (double) (use1.scripts - use0.scripts) / MEASURE, rss, adopt / 1000.0);
        fflush(stdout);

        for (int i = 0; i < held; i++)
                safe_close(anchor[i]);
        sleep(1);
        kill(agent, SIGTERM);
        waitpid(agent, NULL, 0);
        close(log_fd);
        unlink(log);
        if (rc)
                redisFree(rc);
}

