/* SPDX-License-Identifier: MIT */
/* F: peers measured alike: fleetsem, etcd and a hand-written Redis lock. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "macro.h"

/* ---- F: peers, measured alike ---- */

/* wrap(cmd) is the argv that runs cmd (a shell command) under the lock. */
typedef void (*wrap_fn)(const char *cmd, char *argv[], char *buf, size_t size);

static void wrap_fleetsem(const char *cmd, char *argv[], char *buf, size_t size) {
        (void) buf;
        (void) size;
        argv[0] = (char *) fleetsem_bin; argv[1] = "run"; argv[2] = "--slots"; argv[3] = "1"; argv[4] = "bench-f";
        argv[5] = "--"; argv[6] = "sh"; argv[7] = "-c"; argv[8] = (char *) cmd; argv[9] = NULL;
}

static void wrap_etcd(const char *cmd, char *argv[], char *buf, size_t size) {
        (void) buf;
        (void) size;
        argv[0] = "etcdctl"; argv[1] = getenv("ETCD_ENDPOINTS_ARG"); argv[2] = "lock"; argv[3] = "bench-f";
        argv[4] = "--"; argv[5] = "sh"; argv[6] = "-c"; argv[7] = (char *) cmd; argv[8] = NULL;
}

/* The hand-written Redis lock: SET NX EX in a loop, polling every second. */
static void wrap_setnx(const char *cmd, char *argv[], char *buf, size_t size) {
        (void) buf;
        (void) size;
        argv[0] = "sh"; argv[1] = "-c";
        argv[2] = "until [ \"$(redis-cli -s \"$1\" SET bench-f 1 NX EX 30)\" = OK ]; do sleep 1; done; "
                  "sh -c \"$2\"; redis-cli -s \"$1\" DEL bench-f >/dev/null";
        argv[3] = "sh"; argv[4] = (char *) redis_socket; argv[5] = (char *) cmd; argv[6] = NULL;
}

static void peer(const char *id, const char *what, wrap_fn wrap, int cycles, int handoffs) {
        char *argv[10], buf[2048], file[64], cmd[128], label[128];
        _cleanup_samples_ Samples cyc = {}, ho = {};

        for (int i = 0; i < cycles; i++) {
                wrap("true", argv, buf, sizeof(buf));
                samples_add(&cyc, spawn_wait(argv));
        }
        snprintf(label, sizeof(label), "%s: cycle (uncontended, runs true)", what);
        report(id, label, &cyc, 0);

        /* From the moment the holder's command ends (it notes the time) to
         * the moment the waiter's command runs (it notes the time): the
         * same for every tool, whatever it does before exiting. */
        snprintf(file, sizeof(file), "/tmp/fleetsem-bench-f-%d", getpid());
        for (int i = 0; i < handoffs; i++) {
                char bufh[2048], *hargv[10], hcmd[128], end[64] = "", start[64] = "", rel[80];
                pid_t holder, waiter;
                FILE *f, *g;

                snprintf(rel, sizeof(rel), "%s.end", file);
                unlink(file);
                unlink(rel);
                snprintf(hcmd, sizeof(hcmd), "sleep 0.3; date +%%s%%N > %s", rel);
                wrap(hcmd, hargv, bufh, sizeof(bufh));
                holder = spawn_quiet(hargv);
                usleep(150000);
                snprintf(cmd, sizeof(cmd), "date +%%s%%N > %s", file);
                wrap(cmd, argv, buf, sizeof(buf));
                waiter = spawn_quiet(argv);
                spawn_done(holder, hargv);
                spawn_done(waiter, argv);
                f = fopen(file, "re");
                g = fopen(rel, "re");
                if (f && g && fgets(start, sizeof(start), f) && fgets(end, sizeof(end), g))
                        samples_add(&ho, (double) (atoll(start) - atoll(end)) / 1000.0);
                if (f)
                        fclose(f);
                if (g)
                        fclose(g);
                unlink(rel);
        }
        unlink(file);
        snprintf(label, sizeof(label), "%s: hand-over, holder's command ends -> waiter's runs", what);
        report(id, label, &ho, 0);
}

/* ---- etcd's hand-over without a shell ---- */

/* An "etcdctl lock NAME" that holds the lock until SIGINT, its stdout (one
 * line once it holds) in *ret_out. */
static pid_t etcd_locker(int *ret_out) {
        char *argv[] = { "etcdctl", getenv("ETCD_ENDPOINTS_ARG"), "lock", "bench-e", NULL };
        posix_spawn_file_actions_t fa;
        int p[2];
        pid_t pid;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -1;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
        if (posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ) != 0)
                pid = -1;
        posix_spawn_file_actions_destroy(&fa);
        close(p[1]);
        *ret_out = p[0];
        return pid;
}

/* Waits up to ms for the locker's line: 1 holds, 0 not yet. */
static int etcd_holds(int fd, int ms) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        char buf[512];

        if (poll(&p, 1, ms) <= 0)
                return 0;
        return read(fd, buf, sizeof(buf)) > 0 ? 1 : -1;
}

/* etcd's hand-over with no process started in it, measured like C: the
 * holder's lock is released (SIGINT to its etcdctl, which unlocks) →
 * the waiting etcdctl holds. */
static double etcd_handover(void) {
        int h_out, w_out;
        pid_t holder, waiter;
        _cleanup_samples_ Samples s = {};

        holder = etcd_locker(&h_out);
        if (holder < 0 || etcd_holds(h_out, 10000) != 1)
                return 0;
        for (int i = 0; i < 30; i++) {
                usec_t t0;

                waiter = etcd_locker(&w_out);
                if (waiter < 0 || etcd_holds(w_out, 300) != 0)
                        break;  /* it must wait: the lock is held */
                t0 = now_usec(CLOCK_MONOTONIC);
                kill(holder, SIGINT);
                if (etcd_holds(w_out, 10000) != 1)
                        break;
                samples_add(&s, since_us(t0));
                waitpid(holder, NULL, 0);
                close(h_out);
                holder = waiter;
                h_out = w_out;
        }
        kill(holder, SIGINT);
        waitpid(holder, NULL, 0);
        close(h_out);
        report("F5", "etcd hand-over: etcdctl lock unlocks -> waiting one holds", &s, 0);
        return samples_pct(&s, 50);
}

void scenario_f(void) {
        setenv("FLEETSEM_NAMESPACE", ns[0], 1);
        peer("F1", "fleetsem run", wrap_fleetsem, 100, 10);
        if (getenv("ETCD_ENDPOINTS_ARG")) {
                double etcd = 0;

                peer("F2", "etcdctl lock", wrap_etcd, 50, 10);
                etcd = etcd_handover();
                if (etcd > 0 && c_p50 > 0) {
                        printf("%-4s %-52s %9.1fx\n", "F6", "C hand-over against etcd's (F5), p50", etcd / c_p50);
                        printf("@json {\"id\":\"F6\",\"what\":\"C hand-over against etcd's (F5), p50\",\"times_faster\":%.1f}\n",
                               etcd / c_p50);
                }
        }
        peer("F3", "SET NX EX poll loop (1 s)", wrap_setnx, 50, 5);
}

