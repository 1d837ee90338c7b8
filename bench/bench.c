/* SPDX-License-Identifier: MIT */
/* What fleetsem-bench's families share (bench-main.c runs them): the
 * run's arguments, reporting, processes, the client and Redis
 * connections. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "bench-fleet.h"
#include "client.h"
#include "macro.h"

const char *redis_socket, *fleetsem_bin;
const char *ns[3];
int n_ns;

/* A figure of nothing is no figure: the run ends, saying which. */
_Noreturn void bench_failed(const char *id, const char *why) {
        fflush(stdout);
        fprintf(stderr, "fleetsem-bench: %s: %s; no figure is given.\n", id, why);
        exit(EXIT_FAILURE);
}

void report(const char *id, const char *what, Samples *s, double floor_us) {
        double p50, p99;

        if (s->n == 0)
                bench_failed(id, "no samples");
        p50 = samples_pct(s, 50);
        p99 = samples_pct(s, 99);

        printf("%-4s %-52s %9.1f %9.1f %8s\n", id, what, p50, p99, "");
        if (floor_us > 0)
                printf("%-4s %-52s %9.2fx %8.2fx  (of %.1f us)\n", "", "  ratio to floor", p50 / floor_us,
                       p99 / floor_us, floor_us);
        printf("@json {\"id\":\"%s\",\"what\":\"%s\",\"samples\":%zu,\"p50_us\":%.1f,\"p99_us\":%.1f,\"floor_us\":%.1f}\n",
               id, what, s->n, p50, p99, floor_us);
        fflush(stdout);
}

/* Redis' CPU a grant of a latency scenario, under its figures. */
void report_redis_cpu(const char *id, GrantCost c) {
        printf("%-4s %-52s %9.1f us, %.1f commands\n", "", "  Redis CPU a grant (both calls)", c.cpu_us, c.commands);
        printf("@json {\"id\":\"%s-redis\",\"what\":\"Redis CPU a grant\",\"redis_cpu_us_per_grant\":%.1f,"
               "\"redis_commands_per_grant\":%.1f}\n",
               id, c.cpu_us, c.commands);
        fflush(stdout);
}

pid_t spawn_quiet(char *const argv[]) {
        pid_t pid = fork();

        if (pid == 0) {
                int null = open("/dev/null", O_WRONLY | O_CLOEXEC);

                if (null >= 0) {
                        dup2(null, STDOUT_FILENO);
                        dup2(null, STDERR_FILENO);
                }
                execvp(argv[0], argv);
                _exit(127);
        }
        return pid;
}

/* Waits for pid, spawned to run argv: a command that failed was not what
 * was to be measured (a refused `fleetsem run` is no run). */
void spawn_done(pid_t pid, char *const argv[]) {
        int status = 0;

        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                char why[512];

                if (pid >= 0 && WIFSIGNALED(status))
                        snprintf(why, sizeof(why), "'%s %s' was killed by signal %d", argv[0], argv[1] ?: "",
                                 WTERMSIG(status));
                else
                        snprintf(why, sizeof(why), "'%s %s' failed (exit %d); run it by hand to see why", argv[0],
                                 argv[1] ?: "", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
                bench_failed(argv[0], why);
        }
}

double spawn_wait(char *const argv[]) {
        usec_t t0 = now_usec(CLOCK_MONOTONIC);

        spawn_done(spawn_quiet(argv), argv);
        return since_us(t0);
}

/* ---- Through fleetsem ---- */

/* Asks for a slot without waiting for an answer (D's clients all ask at
 * once); acquire() reads it. */
int send_acquire(const char *n, const char *name, uint32_t slots, usec_t wait, int *ret_anchor, int *ret_fd) {
        Request req = { .verb = REQUEST_ACQUIRE, .slots = slots, .wait = wait };

        snprintf(req.name, sizeof(req.name), "%s", name);
        if (lease_id_new(req.lease) < 0 || anchor_create(n, req.lease, ret_anchor) < 0)
                return -EIO;
        return client_send_request(n, 0, 10 * USEC_PER_SEC, &req, ret_fd);
}

/* 1 granted, 0 queued (without until_granted), -errno. */
int acquire(const char *n, const char *name, uint32_t slots, usec_t wait, int *ret_anchor, int *ret_fd,
            bool until_granted) {
        LineReader lr;
        Reply rep;
        int r;

        r = send_acquire(n, name, slots, wait, ret_anchor, ret_fd);
        if (r < 0)
                return r;
        line_reader_init(&lr, PROTO_REPLY_MAX);
        for (;;) {
                r = client_read_reply(*ret_fd, &lr, USEC_INFINITY, &rep);
                if (r < 0)
                        return r;
                if (rep.kind == REPLY_GRANTED)
                        return 1;
                if (rep.kind != REPLY_QUEUED)
                        return -EAGAIN;
                if (!until_granted)
                        return 0;
        }
}

unsigned long timed_grants(const char *n, const char *name, Samples *s) {
        unsigned long i;

        for (i = 0; i < 5000; i++) {
                usec_t t0 = now_usec(CLOCK_MONOTONIC);
                int anchor = -EBADF, fd = -EBADF;
                LineReader lr;
                Reply rep;
                bool granted;

                line_reader_init(&lr, PROTO_REPLY_MAX);
                granted = send_acquire(n, name, SLOTS_MAX, 0, &anchor, &fd) == 0 &&
                          client_read_reply(fd, &lr, usec_add(now_usec(CLOCK_MONOTONIC), 10 * USEC_PER_SEC), &rep) >= 0 &&
                          rep.kind == REPLY_GRANTED;
                safe_close(fd);
                safe_close(anchor);
                if (!granted)
                        break;
                if (i >= 200)
                        samples_add(s, since_us(t0));
        }
        return i;
}

/* ---- Redis, agents ---- */

/* A connection to the run's Redis, or NULL. */
redisContext *bench_redis(void) {
        redisContext *c = redisConnectUnix(redis_socket);

        if (c && c->err) {
                redisFree(c);
                return NULL;
        }
        return c;
}

/* Raises the open-file limit to the hard one; returns the limit in force. */
unsigned long long files_max(void) {
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return 0;
        rl.rlim_cur = rl.rlim_max;
        (void) setrlimit(RLIMIT_NOFILE, &rl);
        return (unsigned long long) rl.rlim_cur;
}

/* The agent logs to a file (a pipe would fill while we are busy); with
 * ret_log, *ret_log reads it from its start. url: its Redis (NULL: the
 * benchmark's); extra: more options, NULL-ended. */
pid_t start_agent(const char *fleetsemd, const char *n, const char *host, const char *url,
                  const char *const *extra, const char *log, int *ret_log) {
        char redis[300];
        const char *argv[32] = { fleetsemd, "--redis", redis, "--namespace", n, "--host-id", host };
        size_t k = 7;
        pid_t pid;
        int fd;

        snprintf(redis, sizeof(redis), url ? "%s" : "unix:%s", url ? url : redis_socket);
        for (; extra && *extra && k < ELEMENTSOF(argv) - 1; extra++)
                argv[k++] = *extra;
        fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd < 0)
                return -1;
        pid = fork();
        if (pid == 0) {
                dup2(fd, STDERR_FILENO);
                execv(fleetsemd, (char **) argv);
                _exit(127);
        }
        close(fd);
        if (ret_log)
                *ret_log = open(log, O_RDONLY | O_CLOEXEC);
        return pid;
}

/* Follows the agent's log until a line containing what; returns when, in
 * us since start, or -1 after 60 s. */
double wait_log(int fd, const char *what, usec_t start) {
        char buf[65536];
        size_t len = 0;

        while (since_us(start) < 60e6) {
                ssize_t n = read(fd, buf + len, sizeof(buf) - 1 - len);

                if (n < 0)
                        return -1;
                if (n == 0) {
                        usleep(500);
                        continue;
                }
                len += (size_t) n;
                buf[len] = '\0';
                if (strstr(buf, what))
                        return since_us(start);
                if (len > sizeof(buf) / 2) {
                        size_t keep = 512;

                        memmove(buf, buf + len - keep, keep);
                        len = keep;
                }
        }
        return -1;
}

/* CPU time a process used so far, in seconds: from schedstat (ns), else
 * from stat (clock ticks, 10 ms: too coarse for an idle agent). */
double cpu_seconds(pid_t pid) {
        char path[64], buf[1024], *p;
        unsigned long long nsec;
        unsigned long utime = 0, stime = 0;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/schedstat", pid);
        f = fopen(path, "re");
        if (f) {
                int k = fscanf(f, "%llu", &nsec);

                fclose(f);
                if (k == 1)
                        return (double) nsec / 1e9;
        }
        snprintf(path, sizeof(path), "/proc/%d/stat", pid);
        f = fopen(path, "re");
        if (!f)
                return -1;
        p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;
        fclose(f);
        if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) != 2)
                return -1;
        return (double) (utime + stime) / (double) sysconf(_SC_CLK_TCK);
}

/* ---- G's fleets (bench-fleet.h) ---- */

/* Through the client code; the requests' connections do not stay open. */
int g_fill(char fleet[][64], int n, int *anchor) {
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + 60 * USEC_PER_SEC;

        for (int i = 0; i < n; i++)
                for (int k = 0; k < G_NAMES; k++) {
                        char name[32];
                        int fd = -EBADF, *a = &anchor[i * G_NAMES + k];

                        snprintf(name, sizeof(name), "bench-g-%d", k);
                        /* An agent just started may not listen, or reach Redis, yet. */
                        while (acquire(fleet[i], name, 1000, 0, a, &fd, true) != 1) {
                                safe_close(fd);
                                *a = safe_close(*a);
                                fd = -EBADF;
                                if (now_usec(CLOCK_MONOTONIC) > deadline)
                                        return -ETIMEDOUT;
                                usleep(20000);
                        }
                        safe_close(fd);
                }
        return 0;
}

long long g_held(redisContext *rc, const char *prefix) {
        long long sum = 0;

        for (int k = 0; k < G_NAMES; k++) {
                redisReply *r = redisCommand(rc, "ZCARD %s:{bench-g-%d}:holders", prefix, k);

                if (!r || r->type != REDIS_REPLY_INTEGER) {
                        freeReplyObject(r);
                        return -1;
                }
                sum += r->integer;
                freeReplyObject(r);
        }
        return sum;
}

void g_seed(redisContext *rc, const char *prefix) {
        freeReplyObject(redisCommand(rc, "SET %s:epoch %s NX", prefix, "0123456789abcdef0123456789abcdef 0"));
        freeReplyObject(redisCommand(rc, "ZADD %s:census NX -1 .", prefix));
}

int g_start(const char *fleetsemd, int n, const char *url, const char *ttl, const char *prefix, const char *log,
            pid_t *agent, char fleet[][64]) {
        const char *extra[] = { "--lease-ttl", ttl, "--key-prefix", prefix, "--log-level", "warning", NULL };
        char host[32];

        for (int i = 0; i < n; i++)
                agent[i] = 0;
        for (int i = 0; i < n; i++) {
                snprintf(fleet[i], sizeof(fleet[i]), "benchg-%d-%s-%d", getpid(), prefix, i);
                snprintf(host, sizeof(host), "g-%d", i);
                agent[i] = start_agent(fleetsemd, fleet[i], host, url, extra, log, NULL);
                if (agent[i] < 0)
                        return errno > 0 ? -errno : -EIO;
        }
        return 0;
}

void g_stop(pid_t *agent, int n) {
        for (int i = 0; i < n; i++)
                if (agent[i] > 0)
                        kill(agent[i], SIGTERM);
        for (int i = 0; i < n; i++)
                if (agent[i] > 0)
                        waitpid(agent[i], NULL, 0);
}
