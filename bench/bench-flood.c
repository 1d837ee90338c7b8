/* SPDX-License-Identifier: MIT */
/* H: the agent under a local flood. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "client.h"
#include "macro.h"

/* ---- H: the agent under a local flood ---- */

/* Four processes of nobody flooding the agent's socket, as the security
 * test does: two connect, send garbage and close; two send half a request
 * and stall. Each is "setpriv ... attack.py NS connflood SECONDS MODE",
 * read through a pipe for its "connections N". */
static FILE *h_flood[4];

static int h_flood_start(const char *attack, const char *n, int seconds) {
        for (int i = 0; i < 4; i++) {
                char cmd[1024];

                snprintf(cmd, sizeof(cmd),
                         "exec setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 '%s' '%s' connflood %d %s",
                         attack, n, seconds, i % 2 ? "stall" : "garbage");
                h_flood[i] = popen(cmd, "re");
                if (!h_flood[i])
                        return -errno;
        }
        return 0;
}

static unsigned long h_flood_end(void) {
        unsigned long total = 0, k;
        char line[128];

        for (int i = 0; i < 4; i++) {
                if (!h_flood[i])
                        continue;
                while (fgets(line, sizeof(line), h_flood[i]))
                        if (sscanf(line, "connections %lu", &k) == 1)
                                total += k;
                pclose(h_flood[i]);
                h_flood[i] = NULL;
        }
        return total;
}

/* The worst renewal lateness (seconds) and the renewals counted, from one
 * "fleetsem metrics". */
static void h_lateness(const char *n, double *ret_max, double *ret_count) {
        char cmd[512], line[512], k[128];
        double v;
        FILE *f;

        *ret_max = *ret_count = -1;
        snprintf(cmd, sizeof(cmd), "FLEETSEM_NAMESPACE='%s' '%s' metrics", n, fleetsem_bin);
        f = popen(cmd, "re");
        if (!f)
                return;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "%127s %lf", k, &v) == 2) {
                        if (streq(k, "fleetsem_renewal_lateness_max_seconds"))
                                *ret_max = v;
                        else if (streq(k, "fleetsem_renewal_lateness_seconds_count"))
                                *ret_count = v;
                }
        pclose(f);
}

/* One phase on an agent of its own (lease 6 s): a slot held throughout,
 * root's acquire → release every 20 ms for seconds; with flood, nobody
 * floods the agent meanwhile. Returns root's p99, in µs (-1: failed). */
static double h_phase(const char *fleetsemd, const char *attack, bool flood, int seconds, double floor_us,
                    double quiet_p99) {
        char n[64], log[96];
        const char *id = flood ? "H2" : "H1", *why = NULL;
        char hold[80];
        int r = 0, log_fd = -EBADF, hold_anchor = -EBADF, hold_fd = -EBADF;
        unsigned long conns = 0;
        double cpu0, cpu1, late_max, renewals, p50, p99;
        _cleanup_samples_ Samples s = {};
        usec_t t0, end;
        pid_t agent;

        snprintf(n, sizeof(n), "benchh%c-%d", flood ? 'f' : 'q', getpid());
        snprintf(hold, sizeof(hold), "%s-hold", n);
        snprintf(log, sizeof(log), "/tmp/fleetsem-bench-h-%d.log", getpid());
        /* Quiet as the other agents here (a log line a grant is not what
         * is measured); ready once it grants the holder. */
        agent = start_agent(fleetsemd, n, "bench-h", NULL,
                            (const char *const[]) { "--lease-ttl", "6s", "--log-level", "warning", NULL }, log,
                            &log_fd);
        t0 = now_usec(CLOCK_MONOTONIC);
        while (agent > 0 && (r = acquire(n, hold, 1, 0, &hold_anchor, &hold_fd, true)) != 1 &&
               since_us(t0) < 10e6) {
                safe_close(hold_fd);
                safe_close(hold_anchor);
                usleep(20000);
        }
        if (agent < 0)
                why = "the agent did not start";
        else if (r != 1)
                why = "the holder got no slot";
        else if (flood && (r = h_flood_start(attack, n, seconds + 2)) < 0)
                why = "the flood did not start";
        if (why) {
                printf("%-4s failed: %s (%s; log %s)\n", id, why, strerror(r < 0 ? -r : EIO), log);
                if (agent > 0)
                        kill(agent, SIGTERM);
                return -1;
        }
        safe_close(hold_fd);
        sleep(1);
        cpu0 = cpu_seconds(agent);
        t0 = now_usec(CLOCK_MONOTONIC);
        end = t0 + (usec_t) seconds * USEC_PER_SEC;
        while (now_usec(CLOCK_MONOTONIC) < end) {
                usec_t t = now_usec(CLOCK_MONOTONIC);
                int anchor = -EBADF, fd = -EBADF;

                if (acquire(n, "bench-h-probe", 1000, 0, &anchor, &fd, false) == 1)
                        samples_add(&s, since_us(t));
                else
                        samples_add(&s, 10e6);  /* not granted: counted as the worst */
                safe_close(fd);
                safe_close(anchor);
                usleep(20000);
        }
        cpu1 = cpu_seconds(agent);
        if (flood)
                conns = h_flood_end();
        h_lateness(n, &late_max, &renewals);
        p50 = samples_pct(&s, 50);
        p99 = samples_pct(&s, 99);
        report(id, flood ? "root's acquire -> release, nobody flooding the agent"
                         : "root's acquire -> release, the agent quiet", &s, floor_us);
        if (flood)
                printf("%-4s %-52s %9.2fx\n", "", "  p99 against the quiet agent's (H1)", p99 / quiet_p99);
        printf("%-4s %-52s %9.1f ms (%.0f renewals)\n", "", "  worst renewal lateness (lease 6 s)", late_max * 1e3,
               renewals);
        printf("%-4s %-52s %9.1f %% of a core\n", "", "  agent CPU", (cpu1 - cpu0) * 100.0 / since_us(t0) * 1e6);
        if (flood)
                printf("%-4s %-52s %9.0f /s%s\n", "", "  nobody's connections", (double) conns / (seconds + 1),
                       conns == 0 ? " (the flood did not run: these are no figures under a flood)" : "");
        printf("@json {\"id\":\"%s\",\"flood\":%s,\"samples\":%zu,\"p50_us\":%.1f,\"p99_us\":%.1f,"
               "\"renewal_lateness_max_ms\":%.1f,\"renewals\":%.0f,\"agent_cpu_pct\":%.1f,\"flood_connections\":%lu}\n",
               id, flood ? "true" : "false", s.n, p50, p99, late_max * 1e3, renewals,
               (cpu1 - cpu0) * 100.0 / since_us(t0) * 1e6, conns);
        fflush(stdout);
        safe_close(hold_anchor);
        kill(agent, SIGTERM);
        waitpid(agent, NULL, 0);
        safe_close(log_fd);
        unlink(log);
        return p99;
}

void scenario_h(const char *fleetsemd, double floor_us) {
        const char *attack = getenv("BENCH_ATTACK"), *env_s = getenv("BENCH_H_SECONDS");
        int seconds = env_s ? atoi(env_s) : 20;
        double quiet_p99;

        if (!attack || geteuid() != 0 || seconds < 1) {
                printf("H    skipped: needs root, $BENCH_ATTACK (tests/attack.py) and BENCH_H_SECONDS of at least 1\n");
                return;
        }
        quiet_p99 = h_phase(fleetsemd, attack, false, seconds, floor_us, 0);
        if (quiet_p99 > 0)
                (void) h_phase(fleetsemd, attack, true, seconds, floor_us, quiet_p99);
}

