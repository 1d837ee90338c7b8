/* SPDX-License-Identifier: MIT */
/* fleetsem-bench REDIS_SOCKET FLEETSEM NS1 [NS2 NS3]: measures the floors
 * (unix round trip, Redis EVALSHA round trip, fork+exec) and fleetsem
 * through its client code against running agents, in the same run. Prints
 * a table and JSON lines ("@json {...}") that bench/run.sh collects. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <sched.h>
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"
#include "client.h"
#include "lua-args.h"
#include "lua-keys.h"
#include "macro.h"
#include "socket-util.h"
#include "stats.h"

extern char **environ;

static const char *redis_socket, *fleetsem_bin;
static const char *ns[3];
static int n_ns;

/* A figure of nothing is no figure: the run ends, saying which. */
static _Noreturn void bench_failed(const char *id, const char *why) {
        fflush(stdout);
        fprintf(stderr, "fleetsem-bench: %s: %s; no figure is given.\n", id, why);
        exit(EXIT_FAILURE);
}

static void report(const char *id, const char *what, Samples *s, double floor_us) {
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

/* ---- Floors ---- */

/* The unix floor's two ends run on two different CPUs, pinned: left to
 * the scheduler, they share one CPU in some runs (a few µs) and not in
 * others (tens of µs, a cross-CPU wake-up), and the floor would be
 * bimodal. The agent and its clients are separate processes, mostly on
 * different CPUs: the cross-CPU figure is the honest floor. */
static void pin_to(int cpu) {
        cpu_set_t set;

        if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
                return;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        (void) pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static void *echo_server(void *arg) {
        int lfd = (int) (intptr_t) arg, fd;
        char buf[256];
        ssize_t n;

        pin_to(1);
        fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        while (fd >= 0 && (n = read(fd, buf, sizeof(buf))) > 0)
                if (write(fd, buf, (size_t) n) != n)
                        break;
        safe_close(fd);
        return NULL;
}

static double floor_unix(void) {
        char name[64], buf[80] = "ACQUIRE name=bench slots=1 lease=0123456789abcdef0123456789abcdef wait=0\n";
        struct sockaddr_un sa;
        socklen_t len;
        pthread_t t;
        cpu_set_t saved;
        _cleanup_samples_ Samples s = {};
        int lfd, fd;

        snprintf(name, sizeof(name), "bench-%d", getpid());
        if (sockaddr_abstract(name, "echo", NULL, &sa, &len) < 0)
                return 0;
        lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (lfd < 0 || bind(lfd, (struct sockaddr *) &sa, len) < 0 || listen(lfd, 1) < 0)
                return 0;
        (void) pthread_getaffinity_np(pthread_self(), sizeof(saved), &saved);
        pin_to(0);
        pthread_create(&t, NULL, echo_server, (void *) (intptr_t) lfd);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (connect(fd, (struct sockaddr *) &sa, len) < 0)
                return 0;
        for (int i = 0; i < 20000; i++) {
                usec_t t0 = now_usec(CLOCK_MONOTONIC);

                if (write(fd, buf, sizeof(buf)) != (ssize_t) sizeof(buf) || read(fd, buf, sizeof(buf)) <= 0)
                        break;
                if (i >= 1000)
                        samples_add(&s, since_us(t0));
        }
        close(fd);
        pthread_join(t, NULL);
        close(lfd);
        (void) pthread_setaffinity_np(pthread_self(), sizeof(saved), &saved);
        report("L1", "floor: unix socket round trip (ends on 2 CPUs)", &s, 0);
        return samples_pct(&s, 50);
}

/* A script shaped like ours: TIME, a few key reads, 7 keys, 4 arguments. */
static const char floor_script[] =
        "local t = redis.call('TIME') "
        "local a = redis.call('ZSCORE', KEYS[1], ARGV[1]) "
        "local b = redis.call('ZSCORE', KEYS[2], ARGV[1]) "
        "local n = redis.call('ZCARD', KEYS[1]) "
        "return {0, tonumber(ARGV[2]), n, -1}";

static double floor_redis(void) {
        redisContext *c = redisConnectUnix(redis_socket);
        redisReply *r;
        char sha[41];
        _cleanup_samples_ Samples s = {};

        if (!c || c->err)
                return 0;
        r = redisCommand(c, "SCRIPT LOAD %s", floor_script);
        if (!r || r->type != REDIS_REPLY_STRING || r->len != 40)
                return 0;
        memcpy(sha, r->str, 41);
        freeReplyObject(r);
        for (int i = 0; i < 20000; i++) {
                usec_t t0 = now_usec(CLOCK_MONOTONIC);

                r = redisCommand(c, "EVALSHA %s 7 b:{x}:holders b:{x}:queue b:{x}:waiters b:{x}:info b:{x}:grant "
                                 "b:{x}:token b:{x}:ticket 0123456789abcdef0123456789abcdef 1 15000 %s",
                                 sha, "INFO host=bench pid=1 uid=0 user=root slots=1 comm=bench");
                if (!r)
                        break;
                freeReplyObject(r);
                if (i >= 1000)
                        samples_add(&s, since_us(t0));
        }
        redisFree(c);
        report("L2", "floor: Redis EVALSHA round trip (acquire-sized)", &s, 0);
        return samples_pct(&s, 50);
}

static pid_t spawn_quiet(char *const argv[]) {
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
static void spawn_done(pid_t pid, char *const argv[]) {
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

static double spawn_wait(char *const argv[]) {
        usec_t t0 = now_usec(CLOCK_MONOTONIC);

        spawn_done(spawn_quiet(argv), argv);
        return since_us(t0);
}

/* ---- Through fleetsem ---- */

static int acquire(const char *n, const char *name, uint32_t slots, usec_t wait, int *ret_anchor, int *ret_fd,
                   bool until_granted) {
        Request req = { .verb = REQUEST_ACQUIRE, .slots = slots, .wait = wait };
        LineReader lr;
        Reply rep;
        int r;

        snprintf(req.name, sizeof(req.name), "%s", name);
        if (lease_id_new(req.lease) < 0 || anchor_create(n, req.lease, ret_anchor) < 0)
                return -EIO;
        r = client_send_request(n, 0, 10 * USEC_PER_SEC, &req, ret_fd);
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

static void scenario_a(double floor_sum) {
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

static void scenario_b(void) {
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
static double c_p50;      /* for the comparison with etcd in F */

static void scenario_c(void) {
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

/* 64 clients in one poll loop: each holds or waits; a holder releases at
 * once and asks again, a waiter is polled for its grant. */
/* One acquire (a new lease) or release as the agent sends it. */
/* The fleet clock key the raw script calls pass after a name's keys. */
#define BENCH_FLEET_CLOCK "bench-raw:clock"
#define BENCH_CENSUS "bench-raw:census"

/* FCALL of fn (one of the library's functions) on a name's keys and the
 * fleet clock key, then the n args (args.list gives their order):
 * appended to c. */
static int append_script(redisContext *c, const char *fn, char keys[N_KEYS][96], size_t n, const char *const *args) {
        const char *argv[3 + N_SCRIPT_KEYS + 16] = { "FCALL", fn, STRINGIFY(N_SCRIPT_KEYS) };
        size_t k = 3;

        assert(n <= 16);
        for (int j = 0; j < N_KEYS; j++)
                argv[k++] = keys[j];
        argv[k++] = BENCH_FLEET_CLOCK;
        argv[k++] = BENCH_CENSUS;
        for (size_t j = 0; j < n; j++) {
                assert(args[j]);        /* every argument args.list names */
                argv[k++] = args[j];
        }
        return redisAppendCommandArgv(c, (int) k, argv, NULL);
}

static int append_acquire(redisContext *c, const char *sha, char keys[N_KEYS][96], const char *lease, const char *slots,
                          const char *host) {
        return append_script(c, sha, keys, N_ACQUIRE_ARGS, (const char *[N_ACQUIRE_ARGS]) {
                [ARG_ACQUIRE_LEASE] = lease, [ARG_ACQUIRE_SLOTS] = slots, [ARG_ACQUIRE_TTL_MS] = "15000",
                [ARG_ACQUIRE_DESCRIPTION] = "INFO host=bench pid=1 uid=0 user=root comm=bench",
                [ARG_ACQUIRE_HOST] = host, [ARG_ACQUIRE_UID] = "0", [ARG_ACQUIRE_GRACE_UNTIL_MS] = "0",
                [ARG_ACQUIRE_IDLE_MS] = "86400000", [ARG_ACQUIRE_WEIGHT] = "1", [ARG_ACQUIRE_PROOF] = "",
        });
}

static int send_script(redisContext *c, const char *sha, char keys[N_KEYS][96], char lease[LEASE_ID_LEN + 1], bool release) {
        if (!release) {
                (void) lease_id_new(lease);
                return append_acquire(c, sha, keys, lease, "8", "bench");
        }
        return append_script(c, sha, keys, N_RELEASE_ARGS, (const char *[N_RELEASE_ARGS]) {
                [ARG_RELEASE_LEASE] = lease, [ARG_RELEASE_HOST] = "bench", [ARG_RELEASE_UID] = "0",
                [ARG_RELEASE_GRACE_UNTIL_MS] = "0", [ARG_RELEASE_IDLE_MS] = "86400000",
        });
}

/* Loads the agent's library, as the agent does (the same text as the
 * agent's, loaded again: harmless); 0 or -EIO. */
static int load_library(void) {
        redisContext *l = redisConnectUnix(redis_socket);
        redisReply *r = NULL;
        int k = -EIO;

        /* The raw calls' Redis is new: nobody held anything before
         * (fleetsemd(8), A NEW REDIS). */
        if (l && !l->err)
                freeReplyObject(redisCommand(l, "ZADD %s NX -1 .", BENCH_CENSUS));
        if (l && !l->err)
                r = redisCommand(l, "FUNCTION LOAD REPLACE %s", lua_library);
        if (r && r->type == REDIS_REPLY_STRING && streq(r->str, LUA_LIBRARY_NAME))
                k = 0;
        else
                fprintf(stderr, "fleetsem-bench: Redis refused FUNCTION LOAD: %s\n",
                        r && r->type == REDIS_REPLY_ERROR ? r->str : "no answer");
        freeReplyObject(r);
        if (l)
                redisFree(l);
        return k;
}

/* Keeps N connections to Redis as busy as they can be for duration:
 * send(c, i, round, userdata) queues client i's next round of commands
 * and returns how many replies it waits for. Returns the rounds done. */
typedef int (*send_fn)(redisContext *c, int i, unsigned long round, void *userdata);
enum { SATURATE_CLIENTS = 64 };
/* How long each floor run by redis_saturate() lasts: 5 s, or
 * $BENCH_SATURATE_MS (the tests' short run of the floors). */
static usec_t saturate_for = 5 * USEC_PER_SEC;
#define SATURATE_SECONDS ((double) saturate_for / USEC_PER_SEC)

static unsigned long redis_saturate(usec_t duration, send_fn send, void *userdata) {
        enum { N = SATURATE_CLIENTS };
        redisContext *c[N];
        unsigned long rounds = 0, round[N] = {};
        int expect[N];
        usec_t start;

        for (int i = 0; i < N; i++) {
                c[i] = redisConnectUnixNonBlock(redis_socket);
                if (!c[i] || c[i]->err)
                        return 0;
                expect[i] = send(c[i], i, 0, userdata);
        }
        start = now_usec(CLOCK_MONOTONIC);
        while (now_usec(CLOCK_MONOTONIC) - start < duration) {
                struct pollfd p[N];

                for (int i = 0; i < N; i++) {
                        int done = 0;

                        (void) redisBufferWrite(c[i], &done);
                        p[i] = (struct pollfd) { .fd = c[i]->fd, .events = POLLIN | (done ? 0 : POLLOUT) };
                }
                if (poll(p, N, 1000) < 0)
                        break;
                for (int i = 0; i < N; i++) {
                        void *reply = NULL;

                        if (!(p[i].revents & POLLIN))
                                continue;
                        if (redisBufferRead(c[i]) != REDIS_OK)
                                return 0;
                        while (redisGetReplyFromReader(c[i], &reply) == REDIS_OK && reply) {
                                /* A refused call is no grant: the figures
                                 * would count errors. */
                                if (((redisReply *) reply)->type == REDIS_REPLY_ERROR) {
                                        fprintf(stderr, "fleetsem-bench: Redis refused a call: %s\n",
                                                ((redisReply *) reply)->str);
                                        exit(EXIT_FAILURE);
                                }
                                freeReplyObject(reply);
                                reply = NULL;
                                if (--expect[i] > 0)
                                        continue;
                                rounds++;
                                expect[i] = send(c[i], i, ++round[i], userdata);
                        }
                }
        }
        for (int i = 0; i < N; i++)
                redisFree(c[i]);
        return rounds;
}

/* L4's clients: acquire (granted), release, again with a new lease, each
 * on a name of its own. */
typedef struct Churn {
        char lease[SATURATE_CLIENTS][LEASE_ID_LEN + 1];
        char keys[SATURATE_CLIENTS][N_KEYS][96];
} Churn;

static int send_churn(redisContext *c, int i, unsigned long round, void *userdata) {
        Churn *ch = userdata;
        bool release = round % 2 == 1;

        if (round == 0)
                for (int k = 0; k < N_KEYS; k++)
                        snprintf(ch->keys[i][k], sizeof(ch->keys[i][k]), "bench-raw:{r%d}:%s", i, key_suffix[k]);
        (void) send_script(c, lua_function[release ? SCRIPT_RELEASE : SCRIPT_ACQUIRE], ch->keys[i], ch->lease[i],
                           release);
        return 1;
}

/* What Redis did so far, from one INFO. */
typedef struct RedisUse {
        long long scripts;      /* FCALL calls (the agent's), EVALSHA and EVAL (the peer's) */
        long long commands;     /* every command, those the scripts ran too */
        double cpu_s;           /* used_cpu_sys + used_cpu_user */
} RedisUse;

static double info_number(const char *info, const char *field) {
        const char *p = strstr(info, field);

        return p ? strtod(p + strlen(field), NULL) : 0;
}

static int redis_use(redisContext *c, RedisUse *ret) {
        redisReply *r = redisCommand(c, "INFO stats cpu commandstats");

        if (!r || r->type != REDIS_REPLY_STRING) {
                freeReplyObject(r);
                return -EIO;
        }
        *ret = (RedisUse) {
                .scripts = (long long) (info_number(r->str, "cmdstat_fcall:calls=") +
                                        info_number(r->str, "cmdstat_evalsha:calls=") +
                                        info_number(r->str, "cmdstat_eval:calls=")),
                .commands = (long long) info_number(r->str, "total_commands_processed:"),
                .cpu_s = info_number(r->str, "used_cpu_sys:") + info_number(r->str, "used_cpu_user:"),
        };
        freeReplyObject(r);
        return 0;
}

/* What the grants between two readings of redis_use() cost Redis, each;
 * -1s when a reading is missing. */
typedef struct GrantCost {
        double cpu_us, scripts, commands;
} GrantCost;

static GrantCost grant_cost(int before_ok, const RedisUse *before, int after_ok, const RedisUse *after,
                            unsigned long grants) {
        double n = (double) grants;

        if (before_ok < 0 || after_ok < 0 || grants == 0)
                return (GrantCost) { -1, -1, -1 };
        return (GrantCost) {
                .cpu_us = (after->cpu_s - before->cpu_s) * 1e6 / n,
                .scripts = (double) (after->scripts - before->scripts) / n,
                .commands = (double) (after->commands - before->commands) / n,
        };
}

static GrantCost floor_cost = { -1, -1, -1 };   /* L4's, a grant */
static GrantCost peer_cost = { -1, -1, -1 };    /* L5's, a grant (G compares with it) */

/* Where the scripts' time went, from Redis' own accounting: CONFIG
 * RESETSTAT before the loop, INFO commandstats after it. A script call's
 * time (EVALSHA, EVAL, or FCALL of a Functions library) includes the
 * commands it runs, each of which Redis also counts under its own name;
 * what is left of the call is the Lua itself. INFO and CONFIG are the
 * benchmark's own; `direct` names the commands its clients send outside a
 * script (L5's release, a ZREM), which are listed but not taken from the
 * scripts' time. */
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

static bool is_script_call(const char *name) {
        static const char *const calls[] = { "evalsha", "eval", "evalsha_ro", "eval_ro", "fcall", "fcall_ro" };

        for (size_t i = 0; i < ELEMENTSOF(calls); i++)
                if (streq(name, calls[i]))
                        return true;
        return false;
}

static int time_split_start(redisContext *c) {
        redisReply *r = redisCommand(c, "CONFIG RESETSTAT");
        int k = r && r->type == REDIS_REPLY_STATUS ? 0 : -EIO;

        freeReplyObject(r);
        return k;
}

static int time_split_read(redisContext *c, const char *direct, TimeSplit *ret) {
        redisReply *r = redisCommand(c, "INFO commandstats");
        const char *p;

        *ret = (TimeSplit) {};
        if (!r || r->type != REDIS_REPLY_STRING) {
                freeReplyObject(r);
                return -EIO;
        }
        /* cmdstat_NAME:calls=N,usec=U,... (NAME: "config|resetstat" for a
         * subcommand) */
        for (p = strstr(r->str, "cmdstat_"); p; p = strstr(p, "cmdstat_")) {
                char name[40];
                double calls, usec;
                int len;

                p += strlen("cmdstat_");
                if (sscanf(p, "%39[^:]:calls=%lf,usec=%lf%n", name, &calls, &usec, &len) != 3)
                        continue;
                p += len;
                if (is_script_call(name)) {
                        ret->script_calls += calls;
                        ret->script_usec += usec;
                } else if (!streq(name, "info") && strncmp(name, "config", 6) != 0 && ret->n < TIME_CMDS_MAX) {
                        CmdTime *t = &ret->cmd[ret->n++];

                        snprintf(t->name, sizeof(t->name), "%s", name);
                        for (char *u = t->name; *u; u++)
                                *u = (char) (*u >= 'a' && *u <= 'z' ? *u - 'a' + 'A' : *u);
                        t->calls = calls;
                        t->usec = usec;
                        t->direct = direct && streq(name, direct);
                }
        }
        freeReplyObject(r);
        return 0;
}

static int cmd_time_cmp(const void *a, const void *b) {
        const CmdTime *x = a, *y = b;

        return x->usec < y->usec ? 1 : x->usec > y->usec ? -1 : strcmp(x->name, y->name);
}

/* Prints a grant's share: the script calls, each command, the rest (the
 * Lua), and what Redis' CPU a grant spent outside the scripts (reading
 * the calls, writing the replies, the event loop). */
static void time_split_print(const char *id, TimeSplit *t, unsigned long grants, double cpu_us) {
        double n = (double) grants, in_scripts = 0;
        char json[4096];
        size_t k = 0;

        if (grants == 0 || t->script_calls == 0)
                return;
        qsort(t->cmd, t->n, sizeof(t->cmd[0]), cmd_time_cmp);
        for (size_t i = 0; i < t->n; i++)
                if (!t->cmd[i].direct)
                        in_scripts += t->cmd[i].usec;
        printf("     %s: where a grant's Redis time goes (INFO commandstats)      calls/grant   us/grant\n", id);
        printf("     %-4s   %-46s %11.2f %10.2f\n", "", "script calls, all they do included", t->script_calls / n,
               t->script_usec / n);
        /* (Commands a script runs rarely, such as the fleet clock's SET
         * once in 50 ms, are in the JSON only.) */
        for (size_t i = 0; i < t->n; i++)
                if (!t->cmd[i].direct && t->cmd[i].calls / n >= 0.005)
                        printf("     %-4s     %-44s %11.2f %10.2f\n", "", t->cmd[i].name, t->cmd[i].calls / n,
                               t->cmd[i].usec / n);
        printf("     %-4s   %-46s %11s %10.2f\n", "", "the rest of the script calls: the Lua itself", "",
               (t->script_usec - in_scripts) / n);
        for (size_t i = 0; i < t->n; i++)
                if (t->cmd[i].direct) {
                        char label[64];

                        snprintf(label, sizeof(label), "%.38s, sent outside a script", t->cmd[i].name);
                        printf("     %-4s   %-46s %11.2f %10.2f\n", "", label, t->cmd[i].calls / n, t->cmd[i].usec / n);
                }
        /* commandstats counts wall time inside Redis, INFO cpu its CPU: on
         * a loaded machine the first can exceed the second, and the
         * difference is then no cost at all, not a negative one. */
        if (cpu_us > 0 && cpu_us >= t->script_usec / n)
                printf("     %-4s   %-46s %11s %10.2f\n", "", "Redis CPU outside the script calls, all else", "",
                       cpu_us - t->script_usec / n);
        else if (cpu_us > 0)
                printf("     %-4s   %-46s %11s %10s  (the calls' wall time exceeds Redis' CPU: a loaded machine)\n", "",
                       "Redis CPU outside the script calls, all else", "", "-");
        fflush(stdout);
        for (size_t i = 0; i < t->n && k < sizeof(json) - 128; i++)
                k += (size_t) snprintf(json + k, sizeof(json) - k, "%s\"%s\":{\"calls_per_grant\":%.2f,\"us_per_grant\":%.2f%s}",
                                       i ? "," : "", t->cmd[i].name, t->cmd[i].calls / n, t->cmd[i].usec / n,
                                       t->cmd[i].direct ? ",\"direct\":true" : "");
        json[k] = 0;
        printf("@json {\"id\":\"%s-time\",\"what\":\"where a grant's Redis time goes\",\"script_calls_per_grant\":%.2f,"
               "\"script_us_per_grant\":%.2f,\"commands_us_per_grant\":%.2f,\"lua_us_per_grant\":%.2f,"
               "\"outside_scripts_us_per_grant\":%.2f,\"commands\":{%s}}\n",
               id, t->script_calls / n, t->script_usec / n, in_scripts / n, (t->script_usec - in_scripts) / n,
               cpu_us >= t->script_usec / n ? cpu_us - t->script_usec / n : -1, json);
        fflush(stdout);
}

/* The floor for D: Redis alone running the agent's acquire and release
 * scripts for 64 clients at once (each on a name of its own, so every
 * acquire is granted), as fast as it can. */
static double floor_redis_throughput(void) {
        static Churn ch;
        static TimeSplit split;
        redisContext *rc;
        unsigned long grants;
        RedisUse u0, u1;
        int ok0, ok1, split_ok;
        double rate;

        if (load_library() < 0)
                return 0;
        rc = redisConnectUnix(redis_socket);
        if (!rc || rc->err)
                return 0;
        split_ok = time_split_start(rc);
        ok0 = redis_use(rc, &u0);
        grants = redis_saturate(saturate_for, send_churn, &ch) / 2;
        ok1 = redis_use(rc, &u1);
        if (split_ok == 0)
                split_ok = time_split_read(rc, NULL, &split);
        redisFree(rc);
        floor_cost = grant_cost(ok0, &u0, ok1, &u1, grants);
        rate = (double) grants / SATURATE_SECONDS;
        printf("%-4s %-52s %9.0f grants/s  Redis CPU %.1f us/grant, %.1f commands/grant\n", "L4",
               "floor: Redis alone, acquire+release scripts, 64 clients", rate, floor_cost.cpu_us, floor_cost.commands);
        printf("@json {\"id\":\"L4\",\"what\":\"floor: Redis alone, acquire+release scripts, 64 clients\",\"grants_per_s\":%.0f,"
               "\"redis_cpu_us_per_grant\":%.1f,\"redis_commands_per_grant\":%.1f}\n", rate, floor_cost.cpu_us,
               floor_cost.commands);
        fflush(stdout);
        if (split_ok == 0)
                time_split_print("L4", &split, grants, floor_cost.cpu_us);
        return rate;
}

/* L5, the peer floor: redis-semaphore's algorithm (acquire: one script of
 * ZREMRANGEBYSCORE, ZCARD, ZADD, PEXPIRE on the caller's clock; release: a
 * ZREM), driven as L4 is: 64 clients, each on a name of its own, through
 * the same loop. */
static const char peer_acquire_script[] =
        "local expired = tonumber(ARGV[4]) - tonumber(ARGV[3]) "
        "redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', expired) "
        "if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then "
        "  redis.call('ZADD', KEYS[1], ARGV[4], ARGV[2]) "
        "  redis.call('PEXPIRE', KEYS[1], ARGV[3]) "
        "  return 1 "
        "end "
        "return 0";

typedef struct Peer {
        char sha[41];
        char lease[SATURATE_CLIENTS][LEASE_ID_LEN + 1];
        char key[SATURATE_CLIENTS][64];
} Peer;

static int send_peer(redisContext *c, int i, unsigned long round, void *userdata) {
        Peer *p = userdata;
        char now[32];

        if (round == 0)
                snprintf(p->key[i], sizeof(p->key[i]), "bench-peer:{r%d}", i);
        if (round % 2 == 1)
                return redisAppendCommand(c, "ZREM %s %s", p->key[i], p->lease[i]) == REDIS_OK ? 1 : 0;
        (void) lease_id_new(p->lease[i]);
        snprintf(now, sizeof(now), "%" PRIu64, now_usec(CLOCK_REALTIME) / USEC_PER_MSEC);
        return redisAppendCommand(c, "EVALSHA %s 1 %s 8 %s 15000 %s", p->sha, p->key[i], p->lease[i], now) ==
               REDIS_OK ? 1 : 0;
}

static void floor_peer(void) {
        static Peer p;
        static TimeSplit split;
        redisContext *rc = redisConnectUnix(redis_socket);
        redisReply *r = NULL;
        unsigned long grants;
        RedisUse u0, u1;
        int ok0, ok1, split_ok;
        GrantCost cost;

        if (rc && !rc->err)
                r = redisCommand(rc, "SCRIPT LOAD %s", peer_acquire_script);
        if (!r || r->type != REDIS_REPLY_STRING || r->len != 40) {
                freeReplyObject(r);
                if (rc)
                        redisFree(rc);
                return;
        }
        memcpy(p.sha, r->str, 41);
        freeReplyObject(r);
        split_ok = time_split_start(rc);
        ok0 = redis_use(rc, &u0);
        grants = redis_saturate(saturate_for, send_peer, &p) / 2;
        ok1 = redis_use(rc, &u1);
        if (split_ok == 0)
                split_ok = time_split_read(rc, "zrem", &split);
        redisFree(rc);
        cost = grant_cost(ok0, &u0, ok1, &u1, grants);
        peer_cost = cost;
        printf("%-4s %-52s %9.0f grants/s  Redis CPU %.1f us/grant, %.1f commands/grant\n", "L5",
               "peer floor: redis-semaphore's algorithm, 64 clients", grants / SATURATE_SECONDS, cost.cpu_us, cost.commands);
        if (cost.cpu_us > 0 && floor_cost.cpu_us > 0)
                printf("     L4 / L5: Redis CPU a grant %.2fx, commands a grant %.2fx\n", floor_cost.cpu_us / cost.cpu_us,
                       floor_cost.commands / cost.commands);
        printf("@json {\"id\":\"L5\",\"what\":\"peer floor: redis-semaphore's algorithm, 64 clients\",\"grants_per_s\":%.0f,"
               "\"redis_cpu_us_per_grant\":%.1f,\"redis_commands_per_grant\":%.1f,\"l4_over_l5_cpu\":%.2f}\n",
               grants / SATURATE_SECONDS, cost.cpu_us, cost.commands,
               cost.cpu_us > 0 && floor_cost.cpu_us > 0 ? floor_cost.cpu_us / cost.cpu_us : -1);
        fflush(stdout);
        if (split_ok == 0)
                time_split_print("L5", &split, grants, cost.cpu_us);
}

/* Asks without waiting for an answer: D's clients all ask at once. */
static int send_acquire(const char *n, const char *name, uint32_t slots, int *ret_anchor, int *ret_fd) {
        Request req = { .verb = REQUEST_ACQUIRE, .slots = slots, .wait = USEC_INFINITY };

        snprintf(req.name, sizeof(req.name), "%s", name);
        if (lease_id_new(req.lease) < 0 || anchor_create(n, req.lease, ret_anchor) < 0)
                return -EIO;
        return client_send_request(n, 0, 10 * USEC_PER_SEC, &req, ret_fd);
}

/* D: N clients (at most D_CLIENTS_MAX) on `names` names of 8 slots each,
 * through `agents` agents. */
#define D_CLIENTS_MAX 1000
static void scenario_d(const char *id, int agents, int N, int names, double floor_rate) {
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
        struct rlimit rl;

        /* BENCH_D_MS: each D run that long (a short one for the tests). */
        if (env_ms) {
                if (parse_uint64(env_ms, 100, 600000, &ms) < 0) {
                        fprintf(stderr, "fleetsem-bench: BENCH_D_MS must be 100 to 600000, not '%s'\n", env_ms);
                        exit(EXIT_USAGE);
                }
                duration = ms * USEC_PER_MSEC;
        }
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t) (2 * N + 64)) {
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }
        for (int i = 0; i < N; i++)
                snprintf(name[i], sizeof(name[i]), names == 1 ? "bench-d" : "bench-d%d", i % names);

        /* Each client holds its slot only as long as it takes to notice,
         * gives it back and asks again at once, never waiting for an
         * answer: the clients keep the agent busy, not the other way. */
        for (int i = 0; i < N; i++) {
                if (send_acquire(ns[i % agents], name[i], 8, &anchor[i], &fd[i]) < 0)
                        return;
                line_reader_init(&lr[i], PROTO_REPLY_MAX);
                holding[i] = false;
        }
        rc = redisConnectUnix(redis_socket);
        if (rc && !rc->err) {
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
                        if (send_acquire(ns[i % agents], name[i], 8, &anchor[i], &fd[i]) < 0) {
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
        if (rc && !rc->err)
                ok1 = redis_use(rc, &u1);
        if (rc && !rc->err && split_ok == 0)
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

/* ---- E: scale ---- */

/* The agent logs to a file (a pipe would fill while we are busy); with
 * ret_log, *ret_log reads it from its start. extra: more options, NULL-ended. */
static pid_t start_agent(const char *fleetsemd, const char *n, const char *host, const char *const *extra,
                         const char *log, int *ret_log) {
        char redis[300];
        const char *argv[32] = { fleetsemd, "--redis", redis, "--namespace", n, "--host-id", host };
        size_t k = 7;
        pid_t pid;
        int fd;

        snprintf(redis, sizeof(redis), "unix:%s", redis_socket);
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
static double wait_log(int fd, const char *what, usec_t start) {
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
static double cpu_seconds(pid_t pid) {
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

static void scenario_e(const char *fleetsemd) {
        double rss;
        enum { SLOTS = 10000, NAMES = 10, MEASURE = 10 };
        static int anchor[SLOTS];
        char n[64], name[64], log[96];
        struct rlimit rl;
        redisContext *rc;
        double cpu0, cpu1;
        RedisUse use0 = {}, use1 = {};
        double fill, adopt;
        usec_t t0;
        int log_fd, held = 0;
        pid_t agent;

        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }
        if (rl.rlim_cur < SLOTS + 1000) {
                printf("E    skipped: needs %d open files, the limit is %llu\n", SLOTS + 1000,
                       (unsigned long long) rl.rlim_cur);
                return;
        }
        snprintf(n, sizeof(n), "benche-%d", getpid());
        snprintf(log, sizeof(log), "/tmp/fleetsem-bench-e-%d.log", getpid());
        agent = start_agent(fleetsemd, n, "bench-e", (const char *const[]) { "--log-level", "info", NULL }, log, &log_fd);
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

        rc = redisConnectUnix(redis_socket);
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
        agent = start_agent(fleetsemd, n, "bench-e", (const char *const[]) { "--log-level", "info", NULL }, log, &log_fd);
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
        redisFree(rc);
}

/* ---- G: a fleet of agents on one Redis ---- */

enum { G_NAMES = 3, G_AGENTS_MAX = 1000 };

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

/* Every agent holds one slot of each of the G_NAMES names, through the
 * client code; the anchors stay open, the requests' connections do not. */
static int g_fill(char fleet[][64], int n, int *anchor) {
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

/* ---- G4: a reconnect storm ---- */

/* What one storm cost Redis, read from the new Redis process' INFO (its
 * counters start at the restart) less the benchmark's own polling. */
typedef struct GStorm {
        double back_s;                  /* until every holder is in Redis again (empty), or every agent is back (kept) */
        double redis_cpu_s;
        double mem_mib, mem_peak_mib;
        double commands, scripts, loads, load_calls, in_bytes, out_bytes;
        long long held, expected;
} GStorm;

static long long info_ll(redisContext *rc, const char *section, const char *field) {
        redisReply *r = redisCommand(rc, "INFO %s", section);
        long long v = -1;

        if (r && r->type == REDIS_REPLY_STRING && strstr(r->str, field))
                v = (long long) info_number(r->str, field);
        freeReplyObject(r);
        return v;
}

static int config_get(redisContext *rc, const char *key, char *buf, size_t size) {
        redisReply *r = redisCommand(rc, "CONFIG GET %s", key);
        int ret = -EIO;

        if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->type == REDIS_REPLY_STRING &&
            r->element[1]->len < size) {
                memcpy(buf, r->element[1]->str, r->element[1]->len + 1);
                ret = 0;
        }
        freeReplyObject(r);
        return ret;
}

/* Units held in Redis: the holders of the G_NAMES names under prefix. */
static long long g_held(redisContext *rc, const char *prefix) {
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

/* Stops Redis (keep: saving its data first, as a replica that has it all
 * would take over) and starts it again on the same socket, as run.sh did;
 * *rcp is connected to the new one. */
static int g_redis_restart(redisContext **rcp, bool keep, usec_t *ret_started) {
        char dir[512], logfile[600], sock[512];
        redisContext *rc = *rcp;
        pid_t pid;
        int status;

        if (config_get(rc, "dir", dir, sizeof(dir)) < 0 || config_get(rc, "logfile", logfile, sizeof(logfile)) < 0 ||
            config_get(rc, "unixsocket", sock, sizeof(sock)) < 0 || !streq(sock, redis_socket))
                return -EIO;
        freeReplyObject(redisCommand(rc, keep ? "SHUTDOWN SAVE" : "SHUTDOWN NOSAVE"));
        redisFree(rc);
        *rcp = NULL;
        /* Gone when its socket takes no connection. */
        for (usec_t until = now_usec(CLOCK_MONOTONIC) + 10 * USEC_PER_SEC;;) {
                redisContext *c = redisConnectUnix(redis_socket);
                bool up = c && !c->err;

                if (c)
                        redisFree(c);
                if (!up)
                        break;
                if (now_usec(CLOCK_MONOTONIC) > until)
                        return -ETIMEDOUT;
                usleep(1000);
        }
        *ret_started = now_usec(CLOCK_MONOTONIC);
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", redis_socket, "--dir", dir,
                       "--save", "", "--appendonly", "no", "--daemonize", "yes", "--logfile", logfile, (char *) NULL);
                _exit(127);
        }
        if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return -EIO;
        for (usec_t until = now_usec(CLOCK_MONOTONIC) + 10 * USEC_PER_SEC;;) {
                redisContext *c = redisConnectUnix(redis_socket);
                redisReply *r = c && !c->err ? redisCommand(c, "PING") : NULL;
                bool up = r && r->type == REDIS_REPLY_STATUS;

                freeReplyObject(r);
                if (up) {
                        *rcp = c;
                        break;
                }
                if (c)
                        redisFree(c);
                if (now_usec(CLOCK_MONOTONIC) > until)
                        return -ETIMEDOUT;
                usleep(1000);
        }
        if (keep) {
                char rdb[600];

                snprintf(rdb, sizeof(rdb), "%s/dump.rdb", dir);
                (void) unlink(rdb);
        }
        return 0;
}

/* Every agent loses Redis at once and finds it again: empty (every holder
 * must be re-asserted: until Redis holds what the agents hold, 2 minutes
 * at most), or with its data (until every agent is connected again, and
 * 2 s more for what they send then). */
static int g_storm(redisContext **rcp, const char *prefix, int n, bool keep, GStorm *ret) {
        long long clients = info_ll(*rcp, "clients", "connected_clients:"), polls = 0, held = -1;
        usec_t t0;
        redisReply *r;
        int k;

        *ret = (GStorm) { .expected = (long long) n * G_NAMES };
        k = g_redis_restart(rcp, keep, &t0);
        if (k < 0)
                return k;
        for (;;) {
                if (keep) {
                        polls++;
                        if (info_ll(*rcp, "clients", "connected_clients:") >= clients)
                                break;
                } else {
                        polls += G_NAMES;
                        held = g_held(*rcp, prefix);
                        if (held >= ret->expected)
                                break;
                }
                if (since_us(t0) > 120e6)
                        break;
                usleep(5000);
        }
        ret->back_s = since_us(t0) / 1e6;
        if (keep) {
                sleep(2);
                held = g_held(*rcp, prefix);
                polls += G_NAMES;
        }
        ret->held = held;
        r = redisCommand(*rcp, "INFO all");
        if (!r || r->type != REDIS_REPLY_STRING) {
                freeReplyObject(r);
                return -EIO;
        }
        /* (Less this INFO and the polls; the INFO of each poll with keep is
         * one command too.) */
        ret->redis_cpu_s = info_number(r->str, "used_cpu_sys:") + info_number(r->str, "used_cpu_user:");
        ret->mem_mib = info_number(r->str, "used_memory:") / 1048576.0;
        ret->mem_peak_mib = info_number(r->str, "used_memory_peak:") / 1048576.0;
        ret->commands = not_negative(info_number(r->str, "total_commands_processed:") - (double) polls - 2);
        ret->scripts = info_number(r->str, "cmdstat_fcall:calls=");
        /* Loads that compiled: those refused ("already exists") fail. */
        ret->loads = info_number(r->str, "cmdstat_function|load:calls=");
        ret->load_calls = ret->loads;
        if (strstr(r->str, "cmdstat_function|load:"))
                ret->loads -= info_number(strstr(r->str, "cmdstat_function|load:"), "failed_calls=");
        ret->in_bytes = info_number(r->str, "total_net_input_bytes:");
        ret->out_bytes = info_number(r->str, "total_net_output_bytes:");
        freeReplyObject(r);
        return ret->held >= ret->expected ? 0 : -ETIMEDOUT;
}

static void g_print_storm(const char *id, int n, bool keep, const GStorm *s) {
        const char *what = keep ? "Redis restarted with its data (a failover's path)" : "Redis restarted empty";

        printf("%-4s %d agents: reconnect storm, %s\n", id, n, what);
        printf("%-4s   %-50s %8.2f s (%lld of %lld held)\n", "",
               keep ? "until every agent is connected again" : "until every holder is re-asserted", s->back_s, s->held,
               s->expected);
        printf("%-4s   Redis CPU over the storm, memory after (peak)      %8.3f s, %.1f MiB (%.1f MiB)\n", "",
               s->redis_cpu_s, s->mem_mib, s->mem_peak_mib);
        printf("%-4s   per agent: script calls %.1f, commands %.1f, bytes in %.0f, out %.0f\n", "", s->scripts / n,
               s->commands / n, s->in_bytes / n, s->out_bytes / n);
        printf("%-4s   FUNCTION LOAD calls, compiled                      %8.0f, %.0f\n", "", s->load_calls, s->loads);
        printf("@json {\"id\":\"%s\",\"what\":\"reconnect storm, %s\",\"agents\":%d,\"seconds\":%.2f,\"held\":%lld,"
               "\"expected\":%lld,\"redis_cpu_s\":%.3f,\"redis_mem_mib\":%.1f,\"redis_mem_peak_mib\":%.1f,"
               "\"scripts_per_agent\":%.2f,\"commands_per_agent\":%.2f,\"bytes_in_per_agent\":%.0f,"
               "\"bytes_out_per_agent\":%.0f,\"function_load_calls\":%.0f,\"function_loads_compiled\":%.0f}\n",
               id, what, n, s->back_s, s->held, s->expected, s->redis_cpu_s, s->mem_mib, s->mem_peak_mib, s->scripts / n,
               s->commands / n, s->in_bytes / n, s->out_bytes / n, s->load_calls, s->loads);
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
 * and G2s, and the reconnect storms, G4a and G4b), lets go of the slots,
 * measures Redis idle with the agents connected, stops them. */
static int g_fleet(const char *fleetsemd, redisContext **rcp, int n, const char *ttl, const char *prefix, int seconds,
                   const char *id, bool more) {
        enum { ROUNDS = 5 };
        UsageDelta renewal = {}, metrics = {}, status = {};
        _cleanup_samples_ Samples metrics_wall = {}, status_wall = {};
        static pid_t agent[G_AGENTS_MAX];
        static int anchor[G_AGENTS_MAX * G_NAMES];
        static char fleet[G_AGENTS_MAX][64];
        static Usage u0, u1;
        char host[32], log[96], epoch[96];
        const char *extra[] = { "--lease-ttl", ttl, "--key-prefix", prefix, "--log-level", "warning", NULL };
        Request req_metrics = { .verb = REQUEST_METRICS }, req_status = { .verb = REQUEST_STATUS, .name = "bench-g-0" };
        GStorm storm[2] = {};
        int storm_r[2] = { -1, -1 };
        double idle = 0;
        usec_t t0;
        int r;

        /* A new prefix holds no state: say that nobody held anything
         * before, or the first agent would grant nothing for a lease. */
        snprintf(epoch, sizeof(epoch), "%s:epoch", prefix);
        freeReplyObject(redisCommand(*rcp, "SET %s %s NX", epoch, "0123456789abcdef0123456789abcdef 0"));
        freeReplyObject(redisCommand(*rcp, "ZADD %s:census NX -1 .", prefix));
        snprintf(log, sizeof(log), "/tmp/fleetsem-bench-g-%d.log", getpid());
        for (int i = 0; i < n * G_NAMES; i++)
                anchor[i] = -EBADF;
        t0 = now_usec(CLOCK_MONOTONIC);
        for (int i = 0; i < n; i++) {
                snprintf(fleet[i], sizeof(fleet[i]), "benchg-%d-%d", getpid(), i);
                snprintf(host, sizeof(host), "g-%d", i);
                agent[i] = start_agent(fleetsemd, fleet[i], host, extra, log, NULL);
                if (agent[i] < 0)
                        return -errno;
        }
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
                for (int k = 0; k < 2 && *rcp; k++) {
                        storm_r[k] = g_storm(rcp, prefix, n, k == 1, &storm[k]);
                        if (storm_r[k] < 0)
                                fprintf(stderr, "G: storm %s: %s (see %s)\n", k ? "b" : "a", strerror(-storm_r[k]), log);
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
        for (int k = 0; k < 2; k++)
                if (storm[k].expected > 0 && storm[k].back_s > 0)
                        g_print_storm(k ? "G4b" : "G4a", n, k == 1, &storm[k]);
        for (int i = 0; i < n; i++)
                if (agent[i] > 0)
                        kill(agent[i], SIGTERM);
        for (int i = 0; i < n; i++)
                if (agent[i] > 0)
                        waitpid(agent[i], NULL, 0);
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
        (void) redisAppendCommand(c, "ZADD bench-raw5:names %s %b", now, index + 1, strcspn(index + 1, "}"));
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
                        snprintf(rl.keys[k][j], sizeof(rl.keys[k][j]), "bench-raw5:{g%d}:%s", k, key_suffix[j]);
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
 * renewal for half as long at a short lease. L5, the peer's grant, is
 * measured first when no other scenario did. */
static void scenario_g(const char *fleetsemd) {
        const char *env_n = getenv("BENCH_G_AGENTS"), *env_s = getenv("BENCH_G_SECONDS");
        int n = env_n ? atoi(env_n) : 100, seconds = env_s ? atoi(env_s) : 30;
        char prefix[48];
        struct rlimit rl;
        redisContext *rc;

        if (n < 1 || n > G_AGENTS_MAX || seconds < 1) {
                fprintf(stderr, "G: BENCH_G_AGENTS must be 1..%d, BENCH_G_SECONDS at least 1\n", G_AGENTS_MAX);
                return;
        }
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }
        if (peer_cost.cpu_us <= 0)
                floor_peer();
        rc = redisConnectUnix(redis_socket);
        if (!rc || rc->err)
                return;
        (void) g_floor(rc, n);
        snprintf(prefix, sizeof(prefix), "benchg-%d", getpid());
        if (g_fleet(fleetsemd, &rc, n, "15s", prefix, seconds, "G1", true) >= 0 && rc) {
                snprintf(prefix, sizeof(prefix), "benchg5-%d", getpid());
                (void) g_fleet(fleetsemd, &rc, n, "5s", prefix, seconds / 2, "G3", false);
        }
        if (rc)
                redisFree(rc);
}

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

static void scenario_f(void) {
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
        agent = start_agent(fleetsemd, n, "bench-h",
                            (const char *const[]) { "--lease-ttl", "6s", "--log-level", "warning", NULL }, log, &log_fd);
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

static void scenario_h(const char *fleetsemd, double floor_us) {
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
        if (wanted('A'))
                scenario_a(f_unix + f_redis);
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
