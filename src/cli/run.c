/* SPDX-License-Identifier: MIT */
/* fleetsem run: the anchor, the request and its answers, the slot's
 * renewals heard from the agent and the self-fence without them, and when
 * COMMAND starts and is told to stop (run-job.c runs it). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "cli.h"
#include "client.h"
#include "log.h"
#include "macro.h"
#include "outcome.h"
#include "run-job.h"

#define KILL_AFTER (10 * USEC_PER_SEC)
#define SEND_TIMEOUT (5 * USEC_PER_SEC)
#define RECONNECT_MAX (5 * USEC_PER_SEC)
#define ANSWER_GRACE (800 * USEC_PER_MSEC)     /* past --wait, for the agent's DENIED to arrive */

typedef enum OnLost {
        ON_LOST_TERM,
        ON_LOST_KILL,
        ON_LOST_IGNORE,
} OnLost;

/* An agent (or its successor) watching the anchor: more are refused. */
#define ANCHOR_WATCHES_MAX 4

typedef struct Run {
        const char *ns;
        const char *name;
        uint32_t slots;
        uint32_t weight;
        usec_t wait;
        usec_t deadline;        /* CLOCK_MONOTONIC; USEC_INFINITY: none */
        usec_t give_up_at;      /* not granted by then: the agent did not answer */
        usec_t started;
        bool verbose;
        OnLost on_lost;
        uid_t agent_uid;

        char lease[LEASE_ID_LEN + 1];
        int anchor_fd;
        int watch_fd[ANCHOR_WATCHES_MAX];       /* the agents' connections to it, accepted */
        int agent_fd;
        int signal_fd;
        LineReader lr;
        usec_t reconnect_at;    /* CLOCK_MONOTONIC, USEC_INFINITY: none */
        usec_t backoff;
        bool reached;           /* an agent took our request, at least once */
        int connect_error;      /* why the last attempt to reach it failed */
        bool limit_told;
        bool grace_told;
        bool drain_told;

        Job job;                /* COMMAND */

        bool granted;
        bool lost;
        uint64_t token;
        uint32_t position;
        usec_t kill_at;         /* SIGKILL after a SIGTERM for a lost slot */
        usec_t term_at;         /* … that SIGTERM */
        uint64_t ttl_ms;        /* the lease TTL the agent told; 0: no self-fencing */
        usec_t lease_end;       /* the lease runs out in Redis no sooner; USEC_INFINITY: not told */
        usec_t fence_at;        /* no GRANTED or RENEWED by then: the slot is lost */
        bool fenced;            /* lost by our own clock, not by the agent's word */

        bool done;
        int exit_code;
} Run;

static void help(void) {
        printf("Usage: fleetsem run [OPTIONS] NAME -- COMMAND [ARG...]\n\n"
               "Runs COMMAND while holding one of the fleet-wide slots of NAME; waits in\n"
               "line (first come, first served) while all are in use.\n\n"
               "  -n --slots=N          At most N holders of NAME fleet-wide (default: its\n"
               "                        fleet limit, fleetsem fleet-limit; refused without)\n"
               "  -k --weight=K         Take K units of the limit (default 1): a big job\n"
               "                        counts for more; the line stays first come, first\n"
               "                        served (a heavy job at its head is not overtaken)\n"
               "  -w --wait=DURATION    Give up after DURATION without a slot: 30s, 5min,\n"
               "                        \"1h 30min\", 500ms, infinity (default)\n"
               "     --no-wait          Give up at once when no slot is free\n"
               "     --on-lost=ACTION   When the slot is lost (Redis unreachable past the\n"
               "                        lease TTL, eviction, revoked by root, or no word from\n"
               "                        the agent for 2/3 of the TTL): term (SIGTERM, SIGKILL\n"
               "                        10s later or before the slot may go to another;\n"
               "                        default), kill, ignore\n"
               "     --namespace=NS     Agent namespace (default: $FLEETSEM_NAMESPACE or fleetsem)\n"
               "  -v --verbose          Report progress on stderr even when it is not a terminal\n"
               "  -h --help             Show this help\n\n"
               "COMMAND runs in its own process group with FLEETSEM_NAME, FLEETSEM_TOKEN\n"
               "(fencing token), FLEETSEM_LEASE and FLEETSEM_ANCHOR_FD set, the signal\n"
               "dispositions and mask of the caller, and the terminal's foreground when\n"
               "run had it; SIGINT, SIGTERM and SIGHUP go to it. COMMAND inherits the\n"
               "anchor (fd FLEETSEM_ANCHOR_FD): the slot is held while run or any process\n"
               "that keeps the anchor open lives, also after run exits or is killed.\n"
               "Exit status: COMMAND's (128+N if killed by signal N); without COMMAND run:\n"
               "75 no slot within the wait, slot lost, or the agent busy; 69 agent or Redis\n"
               "unreachable; 70 a reply that cannot be decoded, or an error from Redis;\n"
               "64 usage or an invalid request; 77 not permitted; 78 no --slots and NAME has\n"
               "no fleet limit.\n");
}

static int parse_argv(Run *r, int argc, char *argv[]) {
        enum { ARG_NO_WAIT = CLI_ARG_OWN, ARG_ON_LOST };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "slots", required_argument, NULL, 'n' },
                { "weight", required_argument, NULL, 'k' },
                { "wait", required_argument, NULL, 'w' },
                { "no-wait", no_argument, NULL, ARG_NO_WAIT },
                { "on-lost", required_argument, NULL, ARG_ON_LOST },
                CLI_COMMON_OPTIONS,
                { "verbose", no_argument, NULL, 'v' },
                {}
        };
        int c;

        while ((c = cli_getopt(argc, argv, "+hn:k:w:v", options, &r->ns)) >= 0) {
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case 'n':
                        if (cli_parse_slots(optarg, &r->slots) < 0)
                                return -EINVAL;
                        break;
                case 'k':
                        if (cli_parse_weight(optarg, &r->weight) < 0)
                                return -EINVAL;
                        break;
                case 'w':
                        if (cli_parse_wait(optarg, &r->wait) < 0)
                                return -EINVAL;
                        break;
                case ARG_NO_WAIT:
                        r->wait = 0;
                        break;
                case ARG_ON_LOST:
                        if (streq(optarg, "term"))
                                r->on_lost = ON_LOST_TERM;
                        else if (streq(optarg, "kill"))
                                r->on_lost = ON_LOST_KILL;
                        else if (streq(optarg, "ignore"))
                                r->on_lost = ON_LOST_IGNORE;
                        else
                                return log_error_errno(EINVAL, "Invalid --on-lost \"%s\": expected term, kill or ignore.", optarg);
                        break;
                case 'v':
                        r->verbose = true;
                        break;
                default:
                        return -EINVAL;
                }
        }

        if (cli_check_weight(r->slots, r->weight) < 0)
                return -EINVAL;
        if (optind >= argc)
                return log_error_errno(EINVAL, "Missing NAME; usage: fleetsem run [OPTIONS] NAME -- COMMAND [ARG...]");
        r->name = argv[optind++];
        if (cli_parse_name(r->name) < 0)
                return -EINVAL;
        if (optind < argc && streq(argv[optind], "--"))
                optind++;
        if (optind >= argc)
                return log_error_errno(EINVAL, "Missing COMMAND; usage: fleetsem run [OPTIONS] NAME -- COMMAND [ARG...]");
        r->job.command = argv + optind;
        return 1;
}

static void finish(Run *r, int code) {
        if (r->done)
                return;
        r->done = true;
        r->exit_code = code;
}

static void progress(Run *r, const char *format, ...) _printf_(2, 3);
static void progress(Run *r, const char *format, ...) {
        char msg[512];
        va_list ap;

        if (!r->verbose)
                return;
        va_start(ap, format);
        vsnprintf(msg, sizeof(msg), format, ap);
        va_end(ap);
        fprintf(stderr, "fleetsem: %s: %s\n", r->name, msg);
}

static const char *on_lost_to_string(OnLost o) {
        return o == ON_LOST_KILL ? "kill" : o == ON_LOST_IGNORE ? "ignore" : "term";
}

/* The slot may be granted elsewhere in free_in at the earliest: the job's
 * SIGKILL goes before (lost_kill_in(): at once when there is no time), and
 * KILL_AFTER after its SIGTERM at the latest. An earlier word moves it
 * sooner, never later. */
static void kill_by(Run *r, usec_t now, usec_t free_in) {
        if (r->lease_end != USEC_INFINITY)
                free_in = usec_min(free_in, r->lease_end > now ? r->lease_end - now : 0);
        r->kill_at = usec_min(r->kill_at, now + usec_min(KILL_AFTER, lost_kill_in(free_in)));
}

static void act_on_lost(Run *r, usec_t free_in) {
        usec_t now = now_usec(CLOCK_MONOTONIC);

        r->lost = true;
        r->fence_at = USEC_INFINITY;
        switch (r->on_lost) {
        case ON_LOST_TERM:
                kill_by(r, now, free_in);
                if (r->kill_at <= now)
                        break;  /* no time for SIGTERM: on_timers() kills it now */
                job_signal(&r->job, SIGTERM);
                job_signal(&r->job, SIGCONT);
                r->term_at = now;
                break;
        case ON_LOST_KILL:
                job_signal(&r->job, SIGKILL);
                break;
        case ON_LOST_IGNORE:
                log_warning("%s: COMMAND keeps running without a slot (--on-lost=ignore).", r->name);
                break;
        }
}

/* free_in: the slot may be granted elsewhere that soon at the earliest
 * (the agent's word; KILL_AFTER from an older agent that does not say). */
static void handle_lost(Run *r, const char *reason, usec_t free_in) {
        if (r->lost && !r->fenced)
                return;
        r->fenced = false;
        log_error("%s: lost the slot (token %" PRIu64 "): %s.", r->name, r->token, reason);
        if (!r->lost)
                act_on_lost(r, free_in);
        else if (r->on_lost == ON_LOST_TERM && r->job.child > 0)
                kill_by(r, now_usec(CLOCK_MONOTONIC), free_in);   /* fenced already: the agent may know sooner */
}

/* Heard neither GRANTED nor RENEWED for 2/3 of the lease: the agent may be
 * stopped or cut off from Redis, and Redis lets the lease run out at the
 * full TTL (lease_end). Act now, before anyone else can be granted the
 * slot, and have the job gone by then. */
static void fence(Run *r) {
        char buf[FORMAT_DURATION_MAX];

        r->fence_at = USEC_INFINITY;
        if (r->lost || r->job.child <= 0)
                return;
        log_error("no word from the agent for %s: assuming the slot of %s is lost (on-lost=%s)",
                  format_duration(buf, sizeof(buf), r->ttl_ms * 2 / 3 * USEC_PER_MSEC), r->name, on_lost_to_string(r->on_lost));
        r->fenced = true;
        act_on_lost(r, KILL_AFTER);
}

/* GRANTED or RENEWED: Redis confirmed the lease just now. */
static void confirmed(Run *r, uint64_t ttl_ms) {
        if (ttl_ms > 0) {
                /* What the agent tells is what is left of the lease in
                 * Redis, counted from when it sent the renewal. */
                r->ttl_ms = ttl_ms;
                r->lease_end = now_usec(CLOCK_MONOTONIC) + ttl_ms * USEC_PER_MSEC;
        }
        if (r->ttl_ms == 0)
                return;
        if (r->fenced && r->on_lost == ON_LOST_IGNORE) {
                log_notice("%s: heard from the agent again; the slot is held.", r->name);
                r->lost = r->fenced = false;
        }
        if (!r->lost)
                r->fence_at = now_usec(CLOCK_MONOTONIC) + r->ttl_ms * 2 / 3 * USEC_PER_MSEC;
}

/* COMMAND ended, or stopped (then run stops too, as a shell job would). */
static void reap_child(Run *r) {
        int code;

        if (job_reap(&r->job, &code) <= 0)
                return;
        if (r->lost && r->on_lost != ON_LOST_IGNORE) {
                /* We exit now, so nobody would send the SIGKILL later:
                 * what remains of the job (its process group outlives its
                 * first process) goes at once. */
                job_signal(&r->job, SIGKILL);
                code = EXIT_TEMPFAIL;
        }
        r->job.child = 0;
        job_take_terminal(&r->job);
        finish(r, code);
}

static int ask(Run *r);

static void reconnect(Run *r) {
        r->reconnect_at = USEC_INFINITY;
        if (ask(r) < 0) {
                r->backoff = r->backoff * 2 > RECONNECT_MAX ? RECONNECT_MAX : r->backoff * 2;
                r->reconnect_at = now_usec(CLOCK_MONOTONIC) + r->backoff;
        }
}

/* The agent went away (restarted): ask again with the same lease, which
 * keeps the slot, or the place in line. */
static void agent_gone(Run *r) {
        r->agent_fd = safe_close(r->agent_fd);
        if (r->lost || r->done)
                return;
        log_warning("%s: lost contact with the agent; reconnecting.", r->name);
        r->backoff = 100 * USEC_PER_MSEC;
        r->reconnect_at = now_usec(CLOCK_MONOTONIC) + r->backoff;
}

/* Once, when we first learn that the name's holders allow fewer at once
 * than we asked for. */
static void tell_limit(Run *r, const Reply *rep) {
        char note[NAME_MAX_LEN + 128];

        if (r->limit_told || !limit_note(r->name, rep->limit, r->slots, "you asked for", note, sizeof(note)))
                return;
        r->limit_told = true;
        log_notice("%s", note);
}

/* A wait that is the grace after Redis lost or began its state is told at
 * once, verbose or not: it is not a hang. */
static void tell_grace(Run *r, const Reply *rep) {
        char note[NAME_MAX_LEN + 512];

        if (r->grace_told || !grace_note(r->name, rep, note, sizeof(note)))
                return;
        r->grace_told = true;
        log_notice("%s.", note);
}

/* Once, while it waits: the name is drained, by whom and why. */
static void tell_drain(Run *r, const Reply *rep) {
        char note[NAME_MAX_LEN + 1024];

        if (!drain_note(r->name, rep, note, sizeof(note))) {
                r->drain_told = false;
                return;
        }
        if (!r->drain_told)
                log_notice("%s; waiting.", note);
        r->drain_told = true;
}

/* Before a grant, anything but progress ends run without COMMAND: a
 * refusal, an unreachable limiter (run has no on-error: COMMAND needs its
 * slot), a reply nobody can decode. */
static void failed(Run *r, const Outcome *o) {
        if (o->kind == OUTCOME_INTERNAL)
                log_error("%s: %s; not running COMMAND.", r->name, o->text);
        else
                log_error("%s: %s", r->name, o->text);
        finish(r, outcome_exit_code(o));
}

static int handle_reply(Run *r, const Outcome *o) {
        const Reply *rep = &o->reply;
        char buf[FORMAT_DURATION_MAX];

        switch (o->kind) {
        case OUTCOME_QUEUED:
                if (r->granted) {
                        /* Asked again after an agent restart, and the slot was gone. */
                        handle_lost(r, "the slot was gone when the agent came back", 0);
                        agent_gone(r);
                        return 0;
                }
                tell_limit(r, rep);
                tell_grace(r, rep);
                tell_drain(r, rep);
                if (rep->position != r->position)
                        progress(r, "waiting for a slot: position %" PRIu32 " in line, %" PRIu32 " of %" PRIu32 " in use",
                                 rep->position, rep->held, reply_limit(rep, r->slots));
                r->position = rep->position;
                return 0;
        case OUTCOME_GRANTED:
                confirmed(r, rep->ttl_ms);
                if (r->granted)
                        return 0;       /* again, after an agent restart: it still holds */
                r->granted = true;
                r->give_up_at = USEC_INFINITY;
                r->token = rep->token;
                if (r->position > 0)
                        progress(r, "got a slot (token %" PRIu64 ") after %s", r->token,
                                 format_duration(buf, sizeof(buf),
                                                 (now_usec(CLOCK_MONOTONIC) - r->started) / USEC_PER_MSEC * USEC_PER_MSEC));
                else
                        progress(r, "got a slot (token %" PRIu64 ")", r->token);
                if (job_spawn(&r->job, r->name, r->token, r->lease, r->anchor_fd) < 0)
                        finish(r, EXIT_SOFTWARE);
                return 0;
        case OUTCOME_RENEWED:
                confirmed(r, rep->ttl_ms);
                return 0;
        case OUTCOME_LOST:
                handle_lost(r, o->text[0] ? o->text : "lost",
                            rep->free_in_ms == UINT64_MAX ? KILL_AFTER : rep->free_in_ms * USEC_PER_MSEC);
                return 0;
        case OUTCOME_REFUSED:
        case OUTCOME_UNAVAILABLE:
        case OUTCOME_INTERNAL:
                if (r->granted && rep->kind == REPLY_DENIED) {
                        /* Asked again after an agent restart, and the slot was gone. */
                        handle_lost(r, "the slot was gone when the agent came back", 0);
                        agent_gone(r);
                        return 0;
                }
                if (r->granted) {
                        /* Asked again after an agent restart: the command
                         * runs on; the anchor holds the slot. */
                        log_error("%s: %s", r->name, o->text);
                        return 0;
                }
                if (o->kind != OUTCOME_REFUSED || rep->kind != REPLY_DENIED) {
                        failed(r, o);
                        return 0;
                }
                break;
        }

        /* DENIED: no slot within the wait, none free, or drained. */
        {
                char note[NAME_MAX_LEN + 1024];

                tell_limit(r, rep);
                if (drain_note(r->name, rep, note, sizeof(note)) || grace_note(r->name, rep, note, sizeof(note)))
                        log_error("%s.", note);
                else if (r->wait == 0)
                        log_error("%s: no free slot (all %" PRIu32 " in use, or others are first in line).", r->name,
                                  reply_limit(rep, r->slots));
                else
                        log_error("%s: no slot within %s (position %" PRIu32 " in line).", r->name,
                                  format_duration(buf, sizeof(buf), r->wait), rep->position);
                finish(r, outcome_exit_code(o));
                return 0;
        }
}

/* Anyone may connect to the anchor (abstract sockets have no permissions);
 * left in the backlog, such connections would fill it until the agent's
 * own could not get in. So they are taken and dropped at once, and only
 * the agent's (root's, or the trusted agent user's) are kept: the agent
 * sees the anchor close through them as through a pending connection. */
static void on_anchor(Run *r) {
        for (unsigned n = 0; n < 1024; n++) {
                _cleanup_close_ int fd = -EBADF;
                struct ucred uc;

                fd = accept4(r->anchor_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0)
                        return;         /* EAGAIN: drained */
                if (peer_cred(fd, &uc) < 0 || (uc.uid != 0 && uc.uid != r->agent_uid))
                        continue;
                /* The newest is the live agent's: when all are taken (only
                 * root can do that), the oldest goes. */
                if (r->watch_fd[ANCHOR_WATCHES_MAX - 1] >= 0) {
                        safe_close(r->watch_fd[0]);
                        memmove(r->watch_fd, r->watch_fd + 1, (ANCHOR_WATCHES_MAX - 1) * sizeof(int));
                        r->watch_fd[ANCHOR_WATCHES_MAX - 1] = -EBADF;
                }
                for (size_t i = 0; i < ANCHOR_WATCHES_MAX; i++)
                        if (r->watch_fd[i] < 0) {
                                r->watch_fd[i] = TAKE_FD(fd);
                                break;
                        }
        }
}

/* Reads what the agent sent and acts on each line; false when there was
 * nothing (more) to read. */
static bool on_agent(Run *r) {
        Outcome o;
        int k;

        k = line_reader_fill(&r->lr, r->agent_fd);
        if (k == -EAGAIN || k == -EINTR)
                return false;
        if (k <= 0) {
                agent_gone(r);
                return false;
        }
        for (;;) {
                char *line;
                size_t len;

                k = line_reader_next(&r->lr, &line, &len);
                if (k == 0)
                        break;
                if (k < 0)
                        outcome_of_error(k, r->ns, &o);
                else
                        outcome_of_line(line, len, r->granted, &o);
                if (o.kind == OUTCOME_INTERNAL) {
                        /* A bug: nothing more this connection says is
                         * trusted; before a grant, COMMAND does not run. */
                        if (r->granted)
                                log_error("%s: %s", r->name, o.text);
                        else
                                failed(r, &o);
                        agent_gone(r);
                        return false;
                }
                handle_reply(r, &o);
                if (r->agent_fd < 0 || r->done)
                        return false;
        }
        return true;
}

/* The earliest of the deadlines that must not wait for a connection. */
static usec_t next_deadline(const Run *r) {
        return usec_min(usec_min(r->kill_at, r->fence_at), r->give_up_at);
}

/* Connects and asks, bounded by our own clock and interrupted by any
 * signal (the loop then handles it); -ECANCELED when a signal came. */
static int ask(Run *r) {
        Request req = { .verb = REQUEST_ACQUIRE, .slots = r->slots, .weight = r->weight };
        usec_t now = now_usec(CLOCK_MONOTONIC);
        int k;

        snprintf(req.name, sizeof(req.name), "%s", r->name);
        snprintf(req.lease, sizeof(req.lease), "%s", r->lease);
        if (r->granted || r->deadline == USEC_INFINITY)
                req.wait = USEC_INFINITY;
        else
                req.wait = r->deadline > now ? r->deadline - now : 0;

        k = client_send_request_until(r->ns, r->agent_uid, usec_min(now + SEND_TIMEOUT, next_deadline(r)), r->signal_fd,
                                      &req, &r->agent_fd);
        if (k < 0) {
                if (k != -ECANCELED)
                        r->connect_error = k;
                return k;
        }
        r->reached = true;
        line_reader_init(&r->lr, PROTO_REPLY_MAX);
        return 0;
}

static void on_signal(Run *r) {
        struct signalfd_siginfo si;

        while (read(r->signal_fd, &si, sizeof(si)) == (ssize_t) sizeof(si)) {
                if (si.ssi_signo == SIGCHLD) {
                        reap_child(r);
                        continue;
                }
                if (r->job.child > 0) {
                        job_signal(&r->job, (int) si.ssi_signo);
                        continue;
                }
                /* Still waiting: leaving closes the anchor and the connection,
                 * which takes us out of the queue at once. */
                progress(r, "interrupted while waiting; leaving the queue");
                finish(r, 128 + (int) si.ssi_signo);
        }
}

/* The agent could not be asked: UNAVAILABLE (69) when it is not there,
 * not trusted or takes no connection, INTERNAL (70) otherwise. */
static int request_failed(Run *r, int error) {
        Outcome o;

        if (outcome_of_error(error, r->ns, &o) == OUTCOME_UNAVAILABLE)
                return cli_request_failed(r->ns, error);
        log_error("%s: %s", r->name, o.text);
        return outcome_exit_code(&o);
}

/* Not granted by --wait and a little more: the agent did not answer. */
static void give_up(Run *r) {
        char buf[FORMAT_DURATION_MAX];

        r->give_up_at = USEC_INFINITY;
        if (!r->reached) {
                finish(r, request_failed(r, r->connect_error ?: -ETIMEDOUT));
                return;
        }
        log_error("%s: no slot within %s (the agent did not answer in time).", r->name,
                  format_duration(buf, sizeof(buf), r->wait));
        finish(r, EXIT_TEMPFAIL);
}

static void on_timers(Run *r) {
        usec_t now = now_usec(CLOCK_MONOTONIC);

        if (now >= r->kill_at) {
                char buf[FORMAT_DURATION_MAX];

                r->kill_at = USEC_INFINITY;
                if (r->term_at == USEC_INFINITY)
                        log_warning("%s: its slot may be granted elsewhere at once; sending SIGKILL to COMMAND.",
                                    r->name);
                else
                        log_warning("%s: COMMAND still running %s after SIGTERM; sending SIGKILL (before its slot may be "
                                    "granted elsewhere).", r->name,
                                    format_duration(buf, sizeof(buf), (now - r->term_at) / USEC_PER_MSEC * USEC_PER_MSEC));
                job_signal(&r->job, SIGKILL);
        }
        if (now >= r->fence_at) {
                /* A word may be waiting unread (we were stopped, or busy). */
                while (r->agent_fd >= 0 && !r->done && on_agent(r))
                        ;
                if (now_usec(CLOCK_MONOTONIC) >= r->fence_at)
                        fence(r);
        }
        if (now >= r->give_up_at && !r->granted && !r->done)
                give_up(r);
        if (now >= r->reconnect_at && !r->done)
                reconnect(r);
}

/* One loop: the agent's replies, signals (SIGCHLD among them), and the
 * deadlines (SIGKILL after SIGTERM, the self-fence, giving up on a silent
 * agent, reconnecting to it). */
static int loop(Run *r) {
        while (!r->done) {
                struct pollfd p[3 + ANCHOR_WATCHES_MAX] = {
                        { .fd = r->signal_fd, .events = POLLIN },
                        { .fd = r->agent_fd, .events = POLLIN },
                        { .fd = r->anchor_fd, .events = POLLIN },
                };
                int n;

                for (size_t i = 0; i < ANCHOR_WATCHES_MAX; i++)
                        p[3 + i] = (struct pollfd) { .fd = r->watch_fd[i], .events = POLLIN };
                n = poll(p, ELEMENTSOF(p), usec_to_poll_ms(now_usec(CLOCK_MONOTONIC), usec_min(next_deadline(r), r->reconnect_at)));
                if (n < 0 && errno != EINTR)
                        return log_error_errno(errno, "poll() failed: %m");
                if (n > 0 && p[0].revents)
                        on_signal(r);
                if (n > 0 && r->agent_fd >= 0 && p[1].revents && !r->done)
                        (void) on_agent(r);
                if (n > 0 && p[2].revents)
                        on_anchor(r);
                for (size_t i = 0; n > 0 && i < ANCHOR_WATCHES_MAX; i++)
                        if (p[3 + i].revents & (POLLHUP | POLLERR | POLLIN))
                                /* That agent went (or sent something, which
                                 * no agent does): its watch is over. */
                                r->watch_fd[i] = safe_close(r->watch_fd[i]);
                on_timers(r);
        }
        return r->exit_code;
}

int verb_run(int argc, char *argv[]) {
        Run r = {
                .wait = USEC_INFINITY,
                .anchor_fd = -EBADF,
                .watch_fd = { -EBADF, -EBADF, -EBADF, -EBADF },
                .agent_fd = -EBADF,
                .signal_fd = -EBADF,
                .reconnect_at = USEC_INFINITY,
                .kill_at = USEC_INFINITY,
                .term_at = USEC_INFINITY,
                .lease_end = USEC_INFINITY,
                .fence_at = USEC_INFINITY,
                .give_up_at = USEC_INFINITY,
                .verbose = isatty(STDERR_FILENO),
                .job.tty_fd = job_foreground_terminal(),
        };
        int k, code;

        k = parse_argv(&r, argc, argv);
        if (k <= 0)
                return k == 0 ? 0 : EXIT_USAGE;
        if (cli_agent(&r.ns, &r.agent_uid) != 0)
                return EXIT_USAGE;
        r.started = now_usec(CLOCK_MONOTONIC);
        if (r.wait != USEC_INFINITY) {
                r.deadline = usec_add(r.started, r.wait);
                r.give_up_at = usec_add(r.deadline, ANSWER_GRACE);
        } else
                r.deadline = USEC_INFINITY;

        k = job_setup_signals(&r.job, &r.signal_fd);
        if (k < 0) {
                log_error_errno(k, "Failed to set up signal handling: %m");
                return EXIT_SOFTWARE;
        }
        k = lease_id_new(r.lease);
        if (k >= 0)
                k = anchor_create(r.ns, r.lease, &r.anchor_fd);        /* non-blocking, as on_anchor() needs */
        if (k < 0) {
                log_error_errno(k, "Failed to create the anchor for %s: %m", r.name);
                return EXIT_SOFTWARE;
        }

        /* A signal while connecting is handled by the loop. */
        k = ask(&r);
        if (k < 0 && k != -ECANCELED)
                code = request_failed(&r, k);
        else {
                k = loop(&r);
                code = k < 0 ? EXIT_SOFTWARE : k;
        }

        safe_close(r.agent_fd);
        safe_close(r.anchor_fd);
        for (size_t i = 0; i < ANCHOR_WATCHES_MAX; i++)
                safe_close(r.watch_fd[i]);
        safe_close(r.signal_fd);
        return code;
}
