/* SPDX-License-Identifier: MIT */
/* A to C: a grant through the client code, `fleetsem run`, a hand-over. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "macro.h"
#include "socket-util.h"

void scenario_a(double floor_sum, double la, double laf) {
        _cleanup_samples_ Samples s = {};
        redisContext *rc = bench_redis();
        RedisUse u0, u1;
        int ok0 = rc ? redis_use(rc, &u0) : -EIO, ok1;
        unsigned long n = timed_grants(ns[0], "bench-a", &s);
        double p50;

        ok1 = rc ? redis_use(rc, &u1) : -EIO;
        if (rc)
                redisFree(rc);
        report("A", "acquire -> release through the client code", &s, floor_sum);
        report_redis_cpu("A", grant_cost(ok0, &u0, ok1, &u1, n));
        /* What the floors leave the agent: A over LA, and LA alone against
         * the bound of 3 (L1 + L2). */
        p50 = samples_pct(&s, 50);
        printf("%-4s %-52s %9.2fx %9s  LA alone: %.2fx (L1 + L2)\n", "", "  ratio to LA", p50 / la, "", la / floor_sum);
        printf("%-4s %-52s %9.2fx %9s  LAf: %.2fx LA\n", "", "  ratio to LAf (the agent's own share)", p50 / laf, "",
               laf / la);
        printf("@json {\"id\":\"A/LA\",\"what\":\"A p50 over LA's\",\"ratio\":%.3f,\"la_over_floors\":%.3f}\n", p50 / la,
               la / floor_sum);
}

/* p50 over /bin/true's, as a ratio to flock's: B's figure, beside the
 * bound that the two round trips alone, as B meets them, put on it.
 * On a loaded machine a fork+exec's wait for a CPU swamps flock's own
 * work, and flock's p50 can fall below /bin/true's: no ratio then, said
 * so (null in the JSON line), rather than a negative one.
 * Returns that p50 over /bin/true's. */
static double report_over_flock(const char *id, const char *what, Samples *s, Samples *tru, Samples *flk,
                              double floors_us) {
        double t = samples_pct(tru, 50), over = samples_pct(s, 50) - t, flock_over = samples_pct(flk, 50) - t;
        char ratio[32] = "null", floors_ratio[32] = "null";

        if (flock_over > 0) {
                snprintf(ratio, sizeof(ratio), "%.3f", over / flock_over);
                snprintf(floors_ratio, sizeof(floors_ratio), "%.3f", (flock_over + floors_us) / flock_over);
                printf("%-4s %-52s %9.0f us over /bin/true: %sx flock's %.0f (L1b + L2b alone: %sx)\n", id, what, over,
                       ratio, flock_over, floors_ratio);
        } else
                printf("%-4s %-52s %9.0f us over /bin/true; flock's %.0f: no ratio (a loaded machine)\n", id, what,
                       over, flock_over);
        printf("@json {\"id\":\"%s\",\"what\":\"%s\",\"over_true_us\":%.1f,\"flock_over_true_us\":%.1f,"
               "\"ratio\":%s,\"floors_ratio\":%s}\n",
               id, what, over, flock_over, ratio, floors_ratio);
        return over;
}

/* With BENCH_B_VS_CLI (another build's fleetsem, its agent on namespace
 * BENCH_B_VS_NS), that build's run goes in the same rounds, the order of
 * the two turned each round: paired, the two ratios are comparable
 * however the machine's speed drifts during the run. */
void scenario_b(void) {
        const char *vs_cli = getenv("BENCH_B_VS_CLI"), *vs_ns = getenv("BENCH_B_VS_NS");
        char *run[] = { (char *) fleetsem_bin, "run", "--slots", "1", "bench-b", "--", "/bin/true", NULL };
        char *vs[] = { (char *) vs_cli, "run", "--slots", "1", "bench-b", "--", "/bin/true", NULL };
        char *tru[] = { "/bin/true", NULL };
        char *flk[] = { "/usr/bin/flock", "/tmp/fleetsem-bench.lock", "/bin/true", NULL };
        _cleanup_samples_ Samples sr = {}, st = {}, sf = {}, sv = {}, su = {}, sd = {};
        bool paired = vs_cli && vs_ns;
        IdleFloors fl = {};
        double floors, over;

        if (idle_floors_open(&fl) < 0)
                bench_failed("B", "cannot set up the floors L1b and L2b");

        for (int i = 0; i < 400; i++) {
                for (int k = 0; k < (paired ? 2 : 1); k++) {
                        bool this = !paired || (i + k) % 2 == 0;

                        setenv("FLEETSEM_NAMESPACE", this ? ns[0] : vs_ns, 1);
                        samples_add(this ? &sr : &sv, spawn_wait(this ? run : vs));
                        samples_add(&st, spawn_wait(tru));
                }
                samples_add(&sf, spawn_wait(flk));
                idle_floors_sample(&fl, &su, &sd);
        }
        idle_floors_close(&fl);
        setenv("FLEETSEM_NAMESPACE", ns[0], 1);
        report("L1b", "floor: L1 as B meets it (after a round, unpinned)", &su, 0);
        report("L2b", "floor: L2 as B meets it (after a round)", &sd, 0);
        floors = samples_pct(&su, 50) + samples_pct(&sd, 50);
        report("B0", "/bin/true alone (fork+exec floor)", &st, 0);
        report("B", "fleetsem run NAME -- /bin/true", &sr, samples_pct(&st, 50));
        report("B1", "flock FILE /bin/true (peer)", &sf, samples_pct(&st, 50));
        over = report_over_flock("B2", "B: fleetsem run, over /bin/true", &sr, &st, &sf, floors);
        if (paired) {
                report("Bvs", "the same, BENCH_B_VS's build", &sv, samples_pct(&st, 50));
                printf("%-4s %-52s %9.3fx\n", "", "  B over /bin/true / Bvs's",
                       over / report_over_flock("Bvs2", "Bvs: that build's run, over /bin/true", &sv, &st, &sf, floors));
        }
}

/* Hand-over: a holder on the first agent, a waiter on each agent; close the
 * holder and time until a waiter reads GRANTED; that one closes; and so on. */
double c_p50;      /* for the comparison with etcd in F */

void scenario_c(void) {
        _cleanup_samples_ Samples s = {};

        for (int round = 0; round < 300; round++) {
                int h_anchor = -EBADF, h_fd = -EBADF, w_anchor[3], w_fd[3];
                bool waiting[3];

                if (acquire(ns[0], "bench-c", 1, USEC_INFINITY, &h_anchor, &h_fd, true) != 1)
                        return;
                for (int k = 0; k < n_ns; k++) {
                        waiting[k] = acquire(ns[k], "bench-c", 1, USEC_INFINITY, &w_anchor[k], &w_fd[k], false) == 0;
                        (void) fd_set_nonblock(w_fd[k]);
                }
                for (int h = 0; h < n_ns; h++) {
                        usec_t t0 = now_usec(CLOCK_MONOTONIC);
                        bool granted = false;

                        safe_close(h_fd);
                        safe_close(h_anchor);
                        while (!granted) {
                                struct pollfd p[3];

                                for (int k = 0; k < n_ns; k++)
                                        p[k] = (struct pollfd) { .fd = waiting[k] ? w_fd[k] : -1, .events = POLLIN };
                                if (poll(p, (nfds_t) n_ns, 5000) <= 0)
                                        return;
                                for (int k = 0; k < n_ns && !granted; k++) {
                                        char buf[4096];
                                        ssize_t n;

                                        if (!p[k].revents)
                                                continue;
                                        n = read(w_fd[k], buf, sizeof(buf) - 1);
                                        if (n <= 0)
                                                return;
                                        buf[n] = '\0';
                                        if (strstr(buf, "GRANTED")) {
                                                samples_add(&s, since_us(t0));
                                                granted = true;
                                                waiting[k] = false;
                                                h_fd = w_fd[k];
                                                h_anchor = w_anchor[k];
                                        }
                                }
                        }
                }
                safe_close(h_fd);
                safe_close(h_anchor);
        }
        report("C", "hand-over: release -> next waiter granted (slots 1, 3 agents)", &s, 0);
        c_p50 = samples_pct(&s, 50);
}
