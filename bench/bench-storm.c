/* SPDX-License-Identifier: MIT */
/* G4: reconnect storms. Every agent of the fleet loses Redis at once and
 * finds it again: restarted empty (G4a), restarted with its data (G4b),
 * or its replica promoted by Sentinel (G4c). */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "bench-fleet.h"
#include "macro.h"
#include "socket-util.h"

static const char *const storm_id[_STORM_MAX] = { "G4a", "G4b", "G4c" };
static const char *const storm_what[_STORM_MAX] = {
        [STORM_EMPTY] = "Redis restarted empty",
        [STORM_KEPT] = "Redis restarted with its data",
        [STORM_FAILOVER] = "a failover (Sentinel promotes the replica)",
};

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

/* Waits until connect() gives a Redis that answers PING (up) or none
 * (!up), 10 s at most; *ret the connection when up. */
static int redis_wait(redisContext *(*connect)(const void *), const void *where, bool up, redisContext **ret) {
        for (usec_t until = now_usec(CLOCK_MONOTONIC) + 10 * USEC_PER_SEC;;) {
                redisContext *c = connect(where);
                redisReply *r = c ? redisCommand(c, "PING") : NULL;
                bool is_up = r && r->type == REDIS_REPLY_STATUS;

                freeReplyObject(r);
                if (is_up == up) {
                        if (up && ret)
                                *ret = c;
                        else if (c)
                                redisFree(c);
                        return 0;
                }
                if (c)
                        redisFree(c);
                if (now_usec(CLOCK_MONOTONIC) > until)
                        return -ETIMEDOUT;
                usleep(1000);
        }
}

static redisContext *connect_unix(const void *where) {
        (void) where;
        return bench_redis();
}

static redisContext *connect_port(const void *where) {
        redisContext *c = redisConnect("127.0.0.1", *(const int *) where);

        if (c && c->err) {
                redisFree(c);
                return NULL;
        }
        return c;
}

/* Runs redis-server (or Sentinel) with argv, daemonized: its exit says
 * whether it started. */
static int redis_spawn(const char *const *argv) {
        pid_t pid = fork();
        int status;

        if (pid < 0)
                return -errno;
        if (pid == 0) {
                execvp(argv[0], (char *const *) argv);
                _exit(127);
        }
        if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return -EIO;
        return 0;
}

/* Stops Redis (keep: saving its data first, as a replica that has it all
 * would take over) and starts it again on the same socket, as run.sh did;
 * *rcp is connected to the new one. */
static int g_redis_restart(redisContext **rcp, bool keep, usec_t *ret_started) {
        char dir[512], logfile[600], sock[512];
        redisContext *rc = *rcp;
        int r;

        if (config_get(rc, "dir", dir, sizeof(dir)) < 0 || config_get(rc, "logfile", logfile, sizeof(logfile)) < 0 ||
            config_get(rc, "unixsocket", sock, sizeof(sock)) < 0 || !streq(sock, redis_socket))
                return -EIO;
        freeReplyObject(redisCommand(rc, keep ? "SHUTDOWN SAVE" : "SHUTDOWN NOSAVE"));
        redisFree(rc);
        *rcp = NULL;
        r = redis_wait(connect_unix, NULL, false, NULL);
        if (r < 0)
                return r;
        *ret_started = now_usec(CLOCK_MONOTONIC);
        r = redis_spawn((const char *[]) { "redis-server", "--port", "0", "--unixsocket", redis_socket, "--dir", dir,
                                           "--save", "", "--appendonly", "no", "--daemonize", "yes", "--logfile",
                                           logfile, NULL });
        if (r >= 0)
                r = redis_wait(connect_unix, NULL, true, rcp);
        if (r >= 0 && keep) {
                char rdb[600];

                snprintf(rdb, sizeof(rdb), "%s/dump.rdb", dir);
                (void) unlink(rdb);
        }
        return r;
}

/* What the storm cost the Redis the fleet came back to, from its INFO
 * (counters from the restart, or from the CONFIG RESETSTAT before the
 * failover; its CPU less cpu0), less the benchmark's own polls. */
static int storm_cost(redisContext *rc, long long polls, double cpu0, GStorm *ret) {
        redisReply *r = redisCommand(rc, "INFO all");

        if (!r || r->type != REDIS_REPLY_STRING) {
                freeReplyObject(r);
                return -EIO;
        }
        ret->redis_cpu_s = info_number(r->str, "used_cpu_sys:") + info_number(r->str, "used_cpu_user:") - cpu0;
        ret->mem_mib = info_number(r->str, "used_memory:") / 1048576.0;
        ret->mem_peak_mib = info_number(r->str, "used_memory_peak:") / 1048576.0;
        /* (Less this INFO and the polls.) */
        ret->commands = info_number(r->str, "total_commands_processed:") - (double) polls - 2;
        ret->commands = ret->commands > 0 ? ret->commands : 0;
        ret->scripts = info_number(r->str, "cmdstat_fcall:calls=");
        /* Loads that compiled: those refused ("already exists") fail. */
        ret->loads = info_number(r->str, "cmdstat_function|load:calls=");
        ret->load_calls = ret->loads;
        if (strstr(r->str, "cmdstat_function|load:"))
                ret->loads -= info_number(strstr(r->str, "cmdstat_function|load:"), "failed_calls=");
        ret->in_bytes = info_number(r->str, "total_net_input_bytes:");
        ret->out_bytes = info_number(r->str, "total_net_output_bytes:");
        freeReplyObject(r);
        return 0;
}

/* Until the fleet is back on rc (2 minutes at most): every holder in
 * Redis again (wait_held), or every connection there was before
 * (clients), then 2 s more for what the agents send then. Counts the
 * commands it sends in *polls. */
static void storm_wait(redisContext *rc, const char *prefix, bool wait_held, long long clients, usec_t t0,
                       long long *polls, GStorm *ret) {
        long long held = -1;

        for (;;) {
                if (wait_held) {
                        *polls += G_NAMES;
                        held = g_held(rc, prefix);
                        if (held >= ret->expected)
                                break;
                } else {
                        (*polls)++;
                        if (info_ll(rc, "clients", "connected_clients:") >= clients)
                                break;
                }
                if (since_us(t0) > 120e6)
                        break;
                usleep(5000);
        }
        ret->back_s = since_us(t0) / 1e6;
        if (!wait_held) {
                sleep(2);
                held = g_held(rc, prefix);
                *polls += G_NAMES;
        }
        ret->held = held;
}

int g_storm(redisContext **rcp, const char *prefix, int n, StormKind kind, GStorm *ret) {
        long long clients = info_ll(*rcp, "clients", "connected_clients:"), polls = 0;
        usec_t t0;
        int r;

        *ret = (GStorm) { .expected = (long long) n * G_NAMES };
        r = g_redis_restart(rcp, kind == STORM_KEPT, &t0);
        if (r < 0)
                return r;
        storm_wait(*rcp, prefix, kind == STORM_EMPTY, clients, t0, &polls, ret);
        r = storm_cost(*rcp, polls, 0, ret);
        if (r < 0)
                return r;
        return ret->held >= ret->expected ? 0 : -ETIMEDOUT;
}

/* ---- G4c: a failover ---- */

static int free_port(void) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t len = sizeof(sa);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -EIO;

        if (fd < 0)
                return -errno;
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) >= 0 && getsockname(fd, (struct sockaddr *) &sa, &len) >= 0)
                port = ntohs(sa.sin_port);
        safe_close(fd);
        return port;
}

/* The three servers of G4c, in a directory of their own. */
typedef struct Trio {
        char dir[64];
        int master, replica, sentinel;  /* ports; the replica's is the master's after the failover */
} Trio;

/* keep_nothing: the directory and its logs go too (else they stay, to be read). */
static void trio_stop(Trio *t, bool keep_nothing) {
        const int ports[] = { t->sentinel, t->master, t->replica };
        char path[128];

        for (size_t i = 0; i < ELEMENTSOF(ports); i++) {
                redisContext *c = ports[i] > 0 ? connect_port(&ports[i]) : NULL;

                if (c) {
                        freeReplyObject(redisCommand(c, "SHUTDOWN NOSAVE"));
                        redisFree(c);
                        (void) redis_wait(connect_port, &ports[i], false, NULL);
                }
        }
        if (!t->dir[0] || !keep_nothing)
                return;
        /* (dump.rdb: the replica's full sync writes one, --save "" or not.) */
        for (const char *const *f = (const char *const[]) { "master.log", "replica.log", "sentinel.log",
                                                              "sentinel.conf", "dump.rdb", NULL }; *f; f++) {
                snprintf(path, sizeof(path), "%s/%s", t->dir, *f);
                (void) unlink(path);
        }
        (void) rmdir(t->dir);
}

/* Until the master has its replica in sync and the Sentinel knows the
 * replica (it finds it in the master's INFO, every 10 s): 30 s at most. */
static int trio_ready(const Trio *t) {
        redisContext *rc = connect_port(&t->replica), *sc = connect_port(&t->sentinel);
        int r = -ETIMEDOUT;

        for (usec_t until = now_usec(CLOCK_MONOTONIC) + 30 * USEC_PER_SEC;
             rc && sc && now_usec(CLOCK_MONOTONIC) < until; usleep(100000)) {
                redisReply *a = redisCommand(rc, "INFO replication"), *b = redisCommand(sc, "SENTINEL REPLICAS benchg");
                bool ok = a && a->type == REDIS_REPLY_STRING && strstr(a->str, "master_link_status:up") && b &&
                          b->type == REDIS_REPLY_ARRAY && b->elements == 1;

                freeReplyObject(a);
                freeReplyObject(b);
                if (ok) {
                        r = 0;
                        break;
                }
        }
        if (rc)
                redisFree(rc);
        if (sc)
                redisFree(sc);
        return r;
}

static int trio_start(Trio *t) {
        char p[3][12], conf[128], log[3][128];
        FILE *f;
        int r;

        snprintf(t->dir, sizeof(t->dir), "/tmp/fleetsem-bench-g4c-XXXXXX");
        if (!mkdtemp(t->dir)) {
                t->dir[0] = '\0';
                return -errno;
        }
        t->master = free_port();
        t->replica = free_port();
        t->sentinel = free_port();
        if (t->master < 0 || t->replica < 0 || t->sentinel < 0 || t->master == t->replica ||
            t->sentinel == t->master || t->sentinel == t->replica)
                return -EADDRNOTAVAIL;
        snprintf(p[0], sizeof(p[0]), "%d", t->master);
        snprintf(p[1], sizeof(p[1]), "%d", t->replica);
        snprintf(p[2], sizeof(p[2]), "%d", t->sentinel);
        snprintf(log[0], sizeof(log[0]), "%s/master.log", t->dir);
        snprintf(log[1], sizeof(log[1]), "%s/replica.log", t->dir);
        snprintf(log[2], sizeof(log[2]), "%s/sentinel.log", t->dir);
        r = redis_spawn((const char *[]) { "redis-server", "--port", p[0], "--bind", "127.0.0.1", "--dir", t->dir,
                                           "--save", "", "--appendonly", "no", "--daemonize", "yes", "--logfile",
                                           log[0], "--maxclients", "10000", NULL });
        if (r >= 0)
                r = redis_spawn((const char *[]) { "redis-server", "--port", p[1], "--bind", "127.0.0.1", "--dir",
                                                   t->dir, "--save", "", "--appendonly", "no", "--daemonize", "yes",
                                                   "--logfile", log[1], "--maxclients", "10000", "--replicaof",
                                                   "127.0.0.1", p[0], NULL });
        if (r < 0)
                return r;
        /* One Sentinel: SENTINEL FAILOVER needs no quorum, and the master
         * is never taken for down (the failover is the benchmark's). */
        snprintf(conf, sizeof(conf), "%s/sentinel.conf", t->dir);
        f = fopen(conf, "we");
        if (!f)
                return -errno;
        fprintf(f, "port %d\nbind 127.0.0.1\ndaemonize yes\nlogfile %s\ndir %s\nmaxclients 10000\n"
                "sentinel monitor benchg 127.0.0.1 %d 1\nsentinel down-after-milliseconds benchg 600000\n"
                "sentinel failover-timeout benchg 60000\n", t->sentinel, log[2], t->dir, t->master);
        if (fclose(f) != 0)
                return -EIO;
        r = redis_spawn((const char *[]) { "redis-server", conf, "--sentinel", NULL });
        /* (A daemonized server's parent exits before the server listens.) */
        for (size_t i = 0; r >= 0 && i < 3; i++)
                r = redis_wait(connect_port, i == 0 ? &t->master : i == 1 ? &t->replica : &t->sentinel, true, NULL);
        if (r < 0)
                return r;
        return trio_ready(t);
}

/* Until the replica says it is the master, a minute at most: *ret
 * connected to it. A connection each time: the Sentinel closes every
 * client's connection (CLIENT KILL TYPE normal) as it promotes it, so
 * that the clients come back to it as a master. */
static int promoted(const Trio *t, long long *polls, redisContext **ret) {
        for (usec_t until = now_usec(CLOCK_MONOTONIC) + 60 * USEC_PER_SEC; now_usec(CLOCK_MONOTONIC) < until;
             usleep(1000)) {
                redisContext *c = connect_port(&t->replica);
                redisReply *x = c ? redisCommand(c, "INFO replication") : NULL;
                bool master = x && x->type == REDIS_REPLY_STRING && strstr(x->str, "role:master");

                freeReplyObject(x);
                (*polls)++;
                if (master) {
                        *ret = c;
                        return 0;
                }
                if (c)
                        redisFree(c);
        }
        return -ETIMEDOUT;
}


int g_failover(const char *fleetsemd, int n, const char *prefix, GStorm *ret) {
        static pid_t agent[G_AGENTS_MAX];
        static int anchor[G_AGENTS_MAX * G_NAMES];
        static char fleet[G_AGENTS_MAX][64];
        char url[64], log[96];
        redisContext *mc = NULL, *rc = NULL, *sc = NULL;
        long long clients, polls = 0;
        Trio t = {};
        RedisUse use;
        double cpu0;
        usec_t t0;
        int r;

        *ret = (GStorm) { .expected = (long long) n * G_NAMES };
        for (int i = 0; i < n * G_NAMES; i++)
                anchor[i] = -EBADF;
        r = trio_start(&t);
        if (r < 0) {
                fprintf(stderr, "G4c: the master, replica and Sentinel did not start: %s (see %s)\n", strerror(-r),
                        t.dir);
                trio_stop(&t, false);
                return r;
        }
        mc = connect_port(&t.master);
        rc = connect_port(&t.replica);
        sc = connect_port(&t.sentinel);
        if (!mc || !rc || !sc) {
                r = -ECONNREFUSED;
                goto finish;
        }
        g_seed(mc, prefix);
        snprintf(url, sizeof(url), "sentinel://127.0.0.1:%d/benchg", t.sentinel);
        snprintf(log, sizeof(log), "/tmp/fleetsem-bench-g4c-%d.log", getpid());
        r = g_start(fleetsemd, n, url, "15s", prefix, log, agent, fleet);
        if (r >= 0)
                r = g_fill(fleet, n, anchor);
        if (r < 0) {
                fprintf(stderr, "G4c: the agents did not all grant within a minute (see %s)\n", log);
                goto finish;
        }
        /* Everything on the replica, then what the agents keep sending
         * for 2 s (renewals). */
        freeReplyObject(redisCommand(mc, "WAIT 1 5000"));
        sleep(2);
        clients = info_ll(mc, "clients", "connected_clients:");
        freeReplyObject(redisCommand(rc, "CONFIG RESETSTAT"));
        cpu0 = redis_use(rc, &use) >= 0 ? use.cpu_s : 0;
        polls++;
        t0 = now_usec(CLOCK_MONOTONIC);
        {
                redisReply *x = redisCommand(sc, "SENTINEL FAILOVER benchg");
                bool ok = x && x->type == REDIS_REPLY_STATUS;

                freeReplyObject(x);
                if (!ok) {
                        r = -EIO;
                        fprintf(stderr, "G4c: the Sentinel would not fail over (see %s)\n", t.dir);
                        goto finish;
                }
        }
        redisFree(rc);
        rc = NULL;
        r = promoted(&t, &polls, &rc);
        if (r < 0) {
                fprintf(stderr, "G4c: the replica was not promoted within a minute (see %s)\n", t.dir);
                goto finish;
        }
        storm_wait(rc, prefix, false, clients, t0, &polls, ret);
        r = storm_cost(rc, polls, cpu0, ret);
        if (r >= 0 && ret->held < ret->expected)
                r = -ETIMEDOUT;
finish:
        for (int i = 0; i < n * G_NAMES; i++)
                anchor[i] = safe_close(anchor[i]);
        g_stop(agent, n);
        if (mc)
                redisFree(mc);
        if (rc)
                redisFree(rc);
        if (sc)
                redisFree(sc);
        if (r >= 0)
                (void) unlink(log);
        trio_stop(&t, r >= 0);
        return r;
}

void g_print_storm(int n, StormKind kind, const GStorm *s) {
        const char *id = storm_id[kind], *what = storm_what[kind];
        bool held = kind == STORM_EMPTY;

        printf("%-4s %d agents: reconnect storm, %s\n", id, n, what);
        printf("%-4s   %-50s %8.2f s (%lld of %lld held)\n", "",
               held ? "until every holder is re-asserted" : "until every agent is connected again", s->back_s,
               s->held, s->expected);
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
