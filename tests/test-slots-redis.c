/* SPDX-License-Identifier: MIT */
/* The Redis of the random faults: a redis-server of the test's own
 * (FLEETSEM_TEST_SERVER=valkey: valkey-server), the library loaded from
 * lua-scripts.c, and the engine's calls sent as FCALL with the keys and
 * arguments the agent builds (script-args.c), their replies decoded with
 * the agent's one decoder. Its wall clock is stopped and moved with the
 * test's (tests/chaos/clockstep.c, "=MS"), so a seed gives the same run.
 * Other hosts' leases are calls of their own agents (another host id);
 * this host's go through the engine over one connection (answers in
 * order; a grant told only after ROLE and WAIT, behind the calls sent
 * meanwhile, as with replicas) and a pub/sub one (wakes). */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "scripts.h"
#include "log.h"
#include "redis-blocking.h"
#include "script-args.h"
#include "test-slots.h"
#include "test-slots-redis.h"

#define CLOCK_BASE_MS 1700000000000ULL
#define PREFIX "fleetsem"
#define WAKE_CHANNEL PREFIX ":{x}:wake"

SimGrant sim_held_back[64];
size_t n_sim_held_back;
uint64_t sim_rng, sim_ids, sim_grants, sim_pending;
uint32_t sim_limit;

static struct {
        char dir[64], sock[96], clock[96], log[96];
        pid_t pid;
        int clock_fd;
        RedisBlocking *cmd, *sub;
        bool published;         /* calls since the last look at the wake messages */
        uint64_t grace_until_ms;
        char wakes[64][GRANTED_WAKE_MAX];
        size_t n_wakes;
} S = { .pid = -1, .clock_fd = -1 };

static Config here = { .lease_ttl = TTL, .host_lease = TTL, .host_id = "here", .key_prefix = PREFIX };
static Config there = { .lease_ttl = TTL, .host_lease = TTL, .host_id = "there", .key_prefix = PREFIX };

uint64_t sim_random(uint64_t n) {
        sim_rng = sim_rng * 6364136223846793005ULL + 1442695040888963407ULL;
        return (sim_rng >> 33) % n;
}

static _Noreturn void bail(const char *what, int r) {
        printf("Bail out! %s: %s\n", what, strerror(r < 0 ? -r : r));
        sim_redis_stop();
        exit(1);
}

/* ---- The server ---------------------------------------------------------------- */

static void clock_write(uint64_t ms) {
        char buf[32];
        int n = snprintf(buf, sizeof(buf), "=%015" PRIu64, ms);        /* one length: never read half-done */

        if (pwrite(S.clock_fd, buf, (size_t) n, 0) != n)
                bail("cannot set Redis' clock", errno);
}

void sim_clock(usec_t now) {
        clock_write(CLOCK_BASE_MS + now / USEC_PER_MSEC);
}

static RedisReply *command(RedisBlocking *b, int argc, const char *const *argv) {
        RedisReply *reply = NULL;
        int r = redis_blocking_command(b, argc, argv, NULL, &reply);

        if (r < 0)
                bail(argv[0], r);
        return reply;
}

static void command_ok(RedisBlocking *b, int argc, const char *const *argv) {
        RedisReply *reply = command(b, argc, argv);
        const char *err = redis_reply_error(reply);

        if (err) {
                printf("# %s: %s\n", argv[0], err);
                redis_reply_free(reply);
                bail(argv[0], EPROTO);
        }
        redis_reply_free(reply);
}

static const char *server_program(void) {
        const char *s = getenv("FLEETSEM_TEST_SERVER");

        return s && streq(s, "valkey") ? "valkey-server" : "redis-server";
}

int sim_redis_start(void) {
        const char *shim = getenv("FLEETSEM_CLOCKSTEP");
        usec_t deadline;
        int r;

        if (!shim) {
                printf("# FLEETSEM_CLOCKSTEP names no clock shim (meson test sets it)\n");
                return -ENOENT;
        }
        snprintf(S.dir, sizeof(S.dir), "/tmp/fleetsem-test-slots.XXXXXX");
        if (!mkdtemp(S.dir))
                return -errno;
        snprintf(S.sock, sizeof(S.sock), "%s/sock", S.dir);
        snprintf(S.clock, sizeof(S.clock), "%s/clock", S.dir);
        snprintf(S.log, sizeof(S.log), "%s/log", S.dir);
        S.clock_fd = open(S.clock, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        if (S.clock_fd < 0)
                return -errno;
        sim_clock(0);
        S.pid = fork();
        if (S.pid < 0)
                return -errno;
        if (S.pid == 0) {
                int null = open("/dev/null", O_RDWR | O_CLOEXEC);

                if (null >= 0) {
                        (void) dup2(null, STDIN_FILENO);
                        (void) dup2(null, STDOUT_FILENO);
                }
                (void) setenv("LD_PRELOAD", shim, 1);
                (void) setenv("CLOCKSTEP_FILE", S.clock, 1);
                execlp(server_program(), server_program(), "--port", "0", "--unixsocket", S.sock, "--unixsocketperm",
                       "700", "--dir", S.dir, "--save", "", "--appendonly", "no", "--logfile", S.log, (char *) NULL);
                _exit(127);
        }
        /* (Redis' wall clock stands still: this waits on the machine's.) */
        deadline = now_mono() + 10 * USEC_PER_SEC;
        while ((r = redis_blocking_new(S.sock, 5 * USEC_PER_SEC, &S.cmd)) < 0) {
                if (now_mono() > deadline || waitpid(S.pid, NULL, WNOHANG) != 0) {
                        printf("# %s did not start: %s (its log: %s)\n", server_program(), strerror(-r), S.log);
                        return r;
                }
                (void) usleep(20000);
        }
        r = redis_blocking_new(S.sock, 5 * USEC_PER_SEC, &S.sub);
        if (r < 0)
                return r;
        command_ok(S.cmd, 4, (const char *[]) { "FUNCTION", "LOAD", "REPLACE", lua_library });
        command_ok(S.sub, 2, (const char *[]) { "SUBSCRIBE", WAKE_CHANNEL });
        return 0;
}

void sim_redis_stop(void) {
        S.cmd = redis_blocking_free(S.cmd);
        S.sub = redis_blocking_free(S.sub);
        if (S.pid > 0) {
                (void) kill(S.pid, SIGTERM);
                (void) waitpid(S.pid, NULL, 0);
                S.pid = -1;
        }
        if (S.clock_fd >= 0) {
                (void) close(S.clock_fd);
                S.clock_fd = -1;
        }
        if (S.dir[0]) {
                (void) unlink(S.sock);
                (void) unlink(S.clock);
                (void) unlink(S.log);
                (void) rmdir(S.dir);
                S.dir[0] = '\0';
        }
}

/* A new server: nobody held anything before it (fleetsemd(8)). */
void sim_redis_new(void) {
        sim_clock(0);
        command_ok(S.cmd, 1, (const char *[]) { "FLUSHALL" });
        command_ok(S.cmd, 4, (const char *[]) { "ZADD", PREFIX ":census", "-1", "." });
        S.grace_until_ms = 0;
        sim_wakes_drop();
}

void sim_redis_reset(void) {
        command_ok(S.cmd, 1, (const char *[]) { "FLUSHALL" });
}

void sim_grace(usec_t until) {
        S.grace_until_ms = CLOCK_BASE_MS + until / USEC_PER_MSEC;
}

/* ---- Script calls ----------------------------------------------------------------- */

static RedisReply *fcall(Script script, size_t n_args, const char *const *args) {
        const char *names[] = { "x" };
        char keys[N_SCRIPT_KEYS][SCRIPT_KEY_SIZE], n_keys[8];
        const char *argv[3 + N_SCRIPT_KEYS + 64];

        assert(n_args <= 64);
        argv[0] = "FCALL";
        argv[1] = lua_function[script];
        snprintf(n_keys, sizeof(n_keys), "%d", N_SCRIPT_KEYS);
        argv[2] = n_keys;
        for (size_t i = 0; i < N_SCRIPT_KEYS; i++) {
                (void) script_key(keys[i], PREFIX, names, 1, false, 0, i);
                argv[3 + i] = keys[i];
        }
        memcpy(argv + 3 + N_SCRIPT_KEYS, args, n_args * sizeof(char *));
        S.published = true;
        return command(S.cmd, (int) (3 + N_SCRIPT_KEYS + n_args), argv);
}

/* Another host's lease, as its agent holds it. */
static Lease remote_lease(const char *id) {
        Lease l = { .slots = sim_limit, .weight = 1, .uid = 1000, .desc = (char *) "INFO host=there pid=7 uid=1000 comm=job" };

        snprintf(l.id, sizeof(l.id), "%s", id);
        return l;
}

bool sim_remote_acquire(const char *id) {
        Lease l = remote_lease(id);
        AcquireArgs args;
        AcquireResult r;
        RedisReply *reply;

        acquire_args(&there, S.grace_until_ms, &l, &args);
        reply = fcall(SCRIPT_ACQUIRE, N_ACQUIRE_ARGS, args.argv);
        r = acquire_result("x", reply);
        redis_reply_free(reply);
        return r.outcome == ACQUIRE_GRANTED;
}

void sim_remote_renew(const char *id) {
        char ids[1][LEASE_ID_LEN + 1];
        RenewArgs args;

        snprintf(ids[0], sizeof(ids[0]), "%s", id);
        if (renew_args(&there, S.grace_until_ms, (const char (*)[LEASE_ID_LEN + 1]) ids, 1, 0, false, &args) < 0)
                bail("renew", ENOMEM);
        redis_reply_free(fcall(SCRIPT_RENEW, args.n, args.argv));
        renew_args_free(&args);
}

void sim_remote_release(const char *id) {
        ReleaseArgs args;

        release_args(&there, S.grace_until_ms, id, 1000, false, &args);
        redis_reply_free(fcall(SCRIPT_RELEASE, N_RELEASE_ARGS, args.argv));
}

static void answer_acquire(Call *c, bool runs, bool told, usec_t now) {
        AcquireArgs args;
        AcquireResult r = {};
        RedisReply *reply = NULL;

        if (runs) {
                acquire_args(&here, S.grace_until_ms, c->l, &args);
                reply = fcall(SCRIPT_ACQUIRE, N_ACQUIRE_ARGS, args.argv);
                r = acquire_result(c->name, reply);
        }
        if (told && runs && r.outcome == ACQUIRE_GRANTED && n_sim_held_back < ELEMENTSOF(sim_held_back))
                sim_held_back[n_sim_held_back++] = (SimGrant) { .l = c->l, .r = r, .after = w.n_calls };
        else
                engine_acquire_done(&e, c->l, told && runs ? &r : NULL, now);
        redis_reply_free(reply);
}

/* As the agent's release_reply() with replicas: the slots it handed on
 * are told as a wake message, to be asked for (and waited for). */
static void answer_release(Call *c, bool runs, bool told, usec_t now) {
        Granted g[ENGINE_GRANTS_MAX] = {};
        char payload[GRANTED_WAKE_MAX];
        RedisReply *reply = NULL;
        ReleaseArgs args;
        size_t k = 0;

        if (runs) {
                release_args(&here, S.grace_until_ms, c->lease, c->uid, false, &args);
                reply = fcall(SCRIPT_RELEASE, N_RELEASE_ARGS, args.argv);
                k = release_granted(c->name, c->lease, reply, g);
        }
        engine_release_done(&e, c->name, c->lease, c->uid, !(told && runs), NULL, 0, now);
        if (told && k > 0) {
                granted_wake(g, k, payload);
                engine_wake(&e, c->name, payload, now);
        }
        redis_reply_free(reply);
}

static void answer_renew(Call *c, bool runs, bool told, usec_t now) {
        _cleanup_free_ bool *missing = NULL;
        usec_t forgot_left = 0;
        RedisReply *reply;
        RenewArgs args;
        int r;

        if (!runs)
                return;
        if (renew_args(&here, S.grace_until_ms, (const char (*)[LEASE_ID_LEN + 1]) c->ids, c->n_ids, 0, c->host_held,
                       &args) < 0)
                bail("renew", ENOMEM);
        reply = fcall(SCRIPT_RENEW, args.n, args.argv);
        renew_args_free(&args);
        missing = calloc(c->n_ids ?: 1, sizeof(bool));
        if (!missing)
                bail("renew", ENOMEM);
        r = renew_result((const char (*)[LEASE_ID_LEN + 1]) c->ids, c->n_ids, reply, missing, &forgot_left);
        if (r < 0)
                printf("# renew: a reply of no shape\n");
        else if (told)
                engine_renew_done(&e, c->name, (const char (*)[LEASE_ID_LEN + 1]) c->ids, missing, c->n_ids, forgot_left,
                                 now, now);
        redis_reply_free(reply);
}

static void answer_reassert(Call *c, bool runs, bool told, usec_t now) {
        RedisReply *reply = NULL;
        ReassertArgs args;
        int r = -2;

        if (runs) {
                reassert_args(&here, S.grace_until_ms, c->l, &args);
                reply = fcall(SCRIPT_REASSERT, N_REASSERT_ARGS, args.argv);
                r = reassert_result(c->name, reply);
        }
        engine_reassert_done(&e, c->l, told ? r : -2, now);
        redis_reply_free(reply);
}

void sim_answer(unsigned k, bool runs, bool told, usec_t now) {
        Call *c = &w.calls[k];

        c->answered = true;
        if (streq(c->what, "acquire"))
                answer_acquire(c, runs, told, now);
        else if (streq(c->what, "release"))
                answer_release(c, runs, told, now);
        else if (streq(c->what, "renew"))
                answer_renew(c, runs, told, now);
        else if (streq(c->what, "reassert"))
                answer_reassert(c, runs, told, now);
}

/* Grants held back behind ROLE and WAIT: told once the calls sent before
 * them are answered; with nothing (gone: the connection went). */
void sim_tell_held_back(unsigned answered_up_to, bool gone, usec_t now) {
        for (size_t i = 0; i < n_sim_held_back;) {
                SimGrant g = sim_held_back[i];

                if (!gone && g.after > answered_up_to) {
                        i++;
                        continue;
                }
                memmove(sim_held_back + i, sim_held_back + i + 1, (--n_sim_held_back - i) * sizeof(SimGrant));
                engine_acquire_done(&e, g.l, gone ? NULL : &g.r, now);
        }
}

/* ---- Wake messages --------------------------------------------------------------- */

/* Every message published before the calls so far answered: a PING on
 * the subscription connection comes back after them. */
static void wakes_collect(void) {
        if (!S.published)
                return;
        S.published = false;
        if (redis_blocking_append(S.sub, 1, (const char *[]) { "PING" }, NULL) < 0)
                bail("PING", EIO);
        for (;;) {
                RedisReply *m = NULL;
                char kind[16];
                int r = redis_blocking_reply(S.sub, &m);

                if (r < 0)
                        bail("the wake messages", r);
                if (redis_reply_array_string(m, 0, kind, sizeof(kind)) < 0)
                        bail("a wake message of no shape", EBADMSG);
                if (streq(kind, "pong")) {
                        redis_reply_free(m);
                        return;
                }
                if (streq(kind, "message") && S.n_wakes < ELEMENTSOF(S.wakes) &&
                    redis_reply_array_string(m, 2, S.wakes[S.n_wakes], sizeof(S.wakes[0])) >= 0)
                        S.n_wakes++;
                redis_reply_free(m);
        }
}

bool sim_wake_next(char *buf, size_t size) {
        wakes_collect();
        if (S.n_wakes == 0)
                return false;
        snprintf(buf, size, "%s", S.wakes[0]);
        memmove(S.wakes, S.wakes + 1, --S.n_wakes * sizeof(S.wakes[0]));
        return true;
}

void sim_wakes_drop(void) {
        wakes_collect();
        S.n_wakes = 0;
}
