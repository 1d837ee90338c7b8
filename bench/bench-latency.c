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

void scenario_a(double floor_sum) {
        _cleanup_samples_ Samples s = {};

        for (int i = 0; i < 5000; i++) {
                usec_t t0 = now_usec(CLOCK_MONOTONIC);
                int anchor = -EBADF, fd = -EBADF;

                if (acquire(ns[0], "bench-a", SLOTS_MAX, 0, &anchor, &fd, true) != 1)
                        break;
                safe_close(fd);
                safe_close(anchor);
                if (i >= 200)
                        samples_add(&s, since_us(t0));
        }
        report("A", "acquire -> release through the client code", &s, floor_sum);
}

void scenario_b(void) {
        char *run[] = { (char *) fleetsem_bin, "run", "--slots", "1", "bench-b", "--", "/bin/true", NULL };
        char *tru[] = { "/bin/true", NULL };
        char *flk[] = { "/usr/bin/flock", "/tmp/fleetsem-bench.lock", "/bin/true", NULL };
        _cleanup_samples_ Samples sr = {}, st = {}, sf = {};

        setenv("FLEETSEM_NAMESPACE", ns[0], 1);
        for (int i = 0; i < 400; i++) {
                samples_add(&sr, spawn_wait(run));
                samples_add(&st, spawn_wait(tru));
                samples_add(&sf, spawn_wait(flk));
        }
        report("B0", "/bin/true alone (fork+exec floor)", &st, 0);
        report("B", "fleetsem run NAME -- /bin/true", &sr, samples_pct(&st, 50));
        report("B1", "flock FILE /bin/true (peer)", &sf, samples_pct(&st, 50));
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
