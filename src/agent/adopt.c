/* SPDX-License-Identifier: MIT */
/* This host's index of its leases, in Redis and in the host's own record
 * (lease-record.h), and re-adoption after an agent restart from the union
 * of the two: each entry checked against its anchor (alive, and owned by
 * the uid the index says) and against Redis (still held), handed to the
 * engine. Redis may lose its index (a DEL, an expiry) while the agent is
 * down; the record outlives the agent, and that of the slots the host
 * holds itself, in its state directory, the host's reboot too (an
 * anchored lease ends with its process: its record is in the runtime
 * directory, which a reboot empties). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-id128.h>

#include "agent.h"
#include "lease-record.h"
#include "log.h"
#include "lua-args.h"
#include "lua-replies.h"

/* One re-adoption: this host's index read once, each entry asked of Redis. */
typedef struct AdoptRound {
        Agent *agent;
        size_t pending;         /* replies still awaited, and the index itself */
        size_t count;           /* slots re-adopted */
        usec_t started;
} AdoptRound;

typedef struct Adoption {
        Agent *agent;
        AdoptRound *round;
        int watch_fd;
        uint32_t slots;
        uint32_t weight;
        bool stop_on_lost;
        bool host_held;
        char *unit;
        struct ucred owner;             /* pid: the requester's, where the record has it and it runs */
        uint64_t requester_start;       /* … its start time (0: unknown) */
        char name[NAME_MAX_LEN + 1];
        char id[LEASE_ID_LEN + 1];
} Adoption;

static Adoption *adoption_free(Adoption *ad) {
        if (!ad)
                return NULL;
        safe_close(ad->watch_fd);
        free(ad->unit);
        return mfree(ad);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(Adoption *, adoption_free);

/* Adoption is over, done or not: the RELEASEs that waited for it look. */
static void adopt_over(Agent *a) {
        a->adopting = false;
        requests_resume_deferred(a);
}

static void adopt_done_one(AdoptRound *round) {
        char buf[FORMAT_DURATION_MAX];
        Agent *a = round->agent;

        if (--round->pending > 0)
                return;
        log_full(round->count > 0 ? LOG_INFO : LOG_DEBUG, "Re-adopted %zu held slot(s) of this host in %s.",
                 round->count, format_duration(buf, sizeof(buf), now_usec(CLOCK_MONOTONIC) - round->started));
        free(round);
        adopt_over(a);
}

/* The folder of the record of a lease: the state directory's for a slot
 * the host holds itself, the runtime directory's for an anchored one
 * (the state directory's without one). */
static int record_fd_of(Agent *a, bool host_held) {
        return host_held || a->run_record_fd < 0 ? a->record_fd : a->run_record_fd;
}

/* What is written in the state directory is on disk before the agent goes
 * on (a slot the host holds itself outlives a power loss; its release
 * too); the runtime directory, which a reboot empties with the processes
 * its leases belong to, needs no sync. */
static bool record_durable(const Agent *a, int fd) {
        return fd == a->record_fd;
}

static void record_put(Agent *a, const char *id, const char *value, usec_t mtime, bool host_held) {
        int fd = record_fd_of(a, host_held), r;

        if (fd < 0)
                return;
        r = lease_record_put(fd, id, value, mtime, record_durable(a, fd));
        if (r < 0)
                log_warning_errno(r, "Failed to record lease %s in this host's record of its leases: %m; an agent "
                                  "restart re-adopts it from Redis' index alone.", id);
}

/* Out of whichever folder holds it (the caller may not know which). */
static void record_drop(Agent *a, const char *id) {
        const int fds[] = { a->record_fd, a->run_record_fd };

        for (size_t i = 0; i < ELEMENTSOF(fds); i++) {
                int r;

                if (fds[i] < 0)
                        continue;
                r = lease_record_drop(fds[i], id, record_durable(a, fds[i]));
                if (r < 0)
                        log_warning_errno(r, "Failed to remove lease %s from this host's record of its leases: %m; "
                                          "the next re-adoption finds it gone.", id);
        }
}

static void forget_index_entry(Agent *a, const char *id) {
        const char *hdel[] = { "HDEL", a->host_key, id };

        (void) redis_key_command(a, NULL, NULL, 3, hdel);
        record_drop(a, id);
}

/* The host's record of a lease: its entry of the index; then, where this
 * agent saw the request, RECORD_BY and the requester's pid and start time
 * (an agent restarted since knows the process, and can end the login
 * session it opened, or tell its terminal, as the agent it asked would;
 * none for a slot the host holds itself, whose requester is gone); then,
 * while its job (a unit, a login session's scope) is being stopped after
 * a loss, RECORD_KILL, the unit, when it is killed (CLOCK_MONOTONIC) and
 * this boot's id (an agent restarted meanwhile kills it all the same:
 * kill_resume()); then, while the lease is HELD (granted, and not told
 * LOST since), RECORD_HELD and this boot's id, the file's modification
 * time set to when the call that last confirmed the lease went out, on
 * CLOCK_BOOTTIME (at its grant, before its client is told, and at each
 * renewal: one utimensat(), nothing written). Redis' index has neither. An adoption
 * that finds the lease's whole name forgotten in Redis tells it that the
 * lease held, when it was confirmed within the time its holder still
 * believes (lease_lost_after()) before this agent started, in this boot:
 * as a renewal would have put it back. */
#define RECORD_BY " by "
#define RECORD_KILL " kill "
#define RECORD_HELD " held "

/* How long value's entry is, without the marks after it. */
static size_t record_entry_len(const char *value) {
        static const char *const marks[] = { RECORD_BY, RECORD_KILL, RECORD_HELD };
        size_t n = strlen(value);

        for (size_t i = 0; i < ELEMENTSOF(marks); i++) {
                const char *at = strstr(value, marks[i]);

                if (at)
                        n = MIN(n, (size_t) (at - value));
        }
        return n;
}

/* When l's last confirming call went out, on CLOCK_BOOTTIME. */
static usec_t lease_confirmed_boottime(const Lease *l) {
        usec_t mono = now_usec(CLOCK_MONOTONIC), boot = now_usec(CLOCK_BOOTTIME);
        usec_t since = mono > l->renewed ? mono - l->renewed : 0;

        return boot > since ? boot - since : 0;
}

_Static_assert(LEASE_RECORD_VALUE_MAX >= ENGINE_INDEX_VALUE_MAX + sizeof(RECORD_BY "4294967295 18446744073709551615") +
               sizeof(RECORD_KILL " 18446744073709551615 ") + UNIT_NAME_MAX + 32 + sizeof(RECORD_HELD) + 32,
               "a lease's record holds its entry and every mark");

static void record_put_lease(Agent *a, const Lease *l) {
        char value[LEASE_RECORD_VALUE_MAX];
        usec_t mtime = USEC_INFINITY;
        const LeaseIo *io = l->io;

        engine_index_value(l, value);
        if (!l->host_held && l->pid > 0 && io && io->requester_start > 0) {
                size_t n = strlen(value);

                snprintf(value + n, sizeof(value) - n, RECORD_BY PID_FMT " %" PRIu64, l->pid, io->requester_start);
        }
        if (io && io->kill_unit && a->boot_known) {
                size_t n = strlen(value);

                snprintf(value + n, sizeof(value) - n, RECORD_KILL "%s %" PRIu64 " " SD_ID128_FORMAT_STR,
                         io->kill_unit, io->kill_at, SD_ID128_FORMAT_VAL(a->boot_id));
        }
        if (l->state == LEASE_HELD && a->boot_known) {
                size_t n = strlen(value);

                snprintf(value + n, sizeof(value) - n, RECORD_HELD SD_ID128_FORMAT_STR,
                         SD_ID128_FORMAT_VAL(a->boot_id));
                mtime = lease_confirmed_boottime(l);
        }
        record_put(a, l->id, value, mtime, l->host_held);
}

/* This host's record of lease id: its value and modification time. */
static int record_get(Agent *a, const char *id, char value[static LEASE_RECORD_VALUE_MAX], usec_t *ret_mtime) {
        const int fds[] = { a->run_record_fd, a->record_fd };

        for (size_t i = 0; i < ELEMENTSOF(fds); i++)
                if (fds[i] >= 0 && lease_record_get(fds[i], id, value, ret_mtime) >= 0)
                        return 0;
        return -ENOENT;
}

/* Whether a mark's boot id (its text at s) is this boot's. */
static bool record_this_boot(const Agent *a, const char *s) {
        char text[SD_ID128_STRING_MAX];
        sd_id128_t boot;

        return a->boot_known && sscanf(s, "%32s", text) == 1 && sd_id128_from_string(text, &boot) >= 0 &&
               sd_id128_equal(boot, a->boot_id);
}

/* Whether a lease was HELD, confirmed within max_age, in this boot, as
 * its record (value, mtime) says. */
static bool record_says_held(const Agent *a, const char *value, usec_t mtime, usec_t max_age) {
        const char *mark = strstr(value, RECORD_HELD);
        usec_t now = now_usec(CLOCK_BOOTTIME);

        return mark && record_this_boot(a, mark + strlen(RECORD_HELD)) && mtime <= now && now - mtime <= max_age;
}

/* The process that asked for a lease, as its record says, while it still
 * runs (its pid has that start time); else 0. */
static pid_t record_requester(const char *value, uint64_t *ret_start) {
        const char *mark = strstr(value, RECORD_BY);
        uint64_t start;
        ProcStat st;
        int pid, n = 0;

        *ret_start = 0;
        if (!mark || sscanf(mark + strlen(RECORD_BY), "%d %" SCNu64 "%n", &pid, &start, &n) != 2 || pid <= 0 ||
            start == 0 || (mark[strlen(RECORD_BY) + n] != '\0' && mark[strlen(RECORD_BY) + n] != ' ') ||
            proc_stat_read(pid, &st) < 0 || st.start != start)
                return 0;
        *ret_start = start;
        return pid;
}

/* The job being stopped when the record was written (RECORD_KILL): its
 * unit and when it is killed, in this boot; else false. */
static bool record_kill(const Agent *a, const char *value, char unit[static UNIT_NAME_MAX + 1],
                        usec_t *ret_kill_at) {
        const char *mark = strstr(value, RECORD_KILL);
        uint64_t at;
        int n = 0;

        return mark &&
               sscanf(mark + strlen(RECORD_KILL), "%" STRINGIFY(UNIT_NAME_MAX) "s %" SCNu64 " %n", unit, &at, &n) == 2 &&
               n > 0 && (service_unit_is_valid(unit) || session_scope_is_valid(unit)) &&
               record_this_boot(a, mark + strlen(RECORD_KILL) + n) && (*ret_kill_at = at, true);
}

/* The engine's index op: Redis' index and the host's record together. */
void host_index(void *ctx, const Lease *l, bool add) {
        Agent *a = ctx;

        if (add)
                record_put_lease(a, l);
        else
                record_drop(a, l->id);
        io_index(ctx, l, add);
}

/* The engine's record op: the host's record alone, of a lease it has
 * (that of a lease re-adopted is written with Redis' index, after);
 * renewed: a HELD lease confirmed again, its time alone. */
void host_record(void *ctx, const Lease *l, bool renewed) {
        Agent *a = ctx;
        int fd = record_fd_of(a, l->host_held);

        if (!renewed)
                record_put_lease(a, l);
        else if (fd >= 0)
                (void) lease_record_touch(fd, l->id, lease_confirmed_boottime(l));
}

/* The engine's release: out of the record once sent, as out of Redis'
 * index (io_call_release()); else it stays in both, released at the next
 * re-adoption. */
int host_call_release(void *ctx, const char *name, const char *lease, uid_t uid) {
        int r = io_call_release(ctx, name, lease, uid);

        if (r >= 0)
                record_drop(ctx, lease);
        return r;
}

/* One folder of this host's own record, in the directory systemd gives
 * the agent in the variable env (the first of its folders), or -EBADF. */
static int record_dir_open(Agent *a, const char *env) {
        const char *dir = getenv(env);
        char first[4096];
        int fd = -EBADF, r;

        if (!dir || !*dir)
                return -EBADF;
        snprintf(first, sizeof(first), "%.*s", (int) strcspn(dir, ":"), dir);
        r = lease_record_open(first, a->config->namespace, a->config->host_id, &fd);
        if (r < 0) {
                log_warning_errno(r, "Failed to open this host's record of its leases in %s: %m; an agent restart "
                                  "re-adopts those it would hold from Redis' index alone.", first);
                return -EBADF;
        }
        return fd;
}

/* This host's own record: of the slots it holds itself in the state
 * directory systemd gives the agent (StateDirectory=, $STATE_DIRECTORY),
 * kept across a reboot as those slots are; of its anchored leases in the
 * runtime one (RuntimeDirectory=, $RUNTIME_DIRECTORY), which a reboot
 * empties, as it ends their processes (without one, in the state
 * directory too); without either, Redis' index alone. */
/* A record an earlier agent kept in the state directory for an anchored
 * lease: moved to the runtime one, so that each lease is in one folder
 * and adopted once. */
static void record_move_anchored(const char *id, const char *value, void *userdata) {
        Agent *a = userdata;
        size_t n = record_entry_len(value), k = strlen(" " ENGINE_INDEX_HOST_HELD);

        /* (Its KIND before the mark of a held lease, if it has one.) */
        if (n >= k && strneq(value + n - k, " " ENGINE_INDEX_HOST_HELD, k))
                return;
        if (lease_record_put(a->run_record_fd, id, value, USEC_INFINITY, record_durable(a, a->run_record_fd)) >= 0)
                (void) lease_record_drop(a->record_fd, id, record_durable(a, a->record_fd));
}

/* A job the agent before this one was stopping after its slot was lost
 * (its record's RECORD_KILL), while it is still there: a unit's run that
 * lost it (its anchor alive: the unit's next run is another job), or a
 * login session's scope (whose anchor closed as its program was stopped;
 * a scope's name is never used again). Its SIGKILL is sent when that
 * agent would have sent it, before the slot may be granted elsewhere (at
 * once where that is past), and its entry is kept until then, for
 * another restart: not released meanwhile (a revoked slot stays counted
 * in Redis until its lease's end; any other loss freed it already). */
typedef struct KillWait {
        Agent *agent;
        char id[LEASE_ID_LEN + 1];
} KillWait;

static bool kill_waits(Agent *a, const char *id, const char *unit) {
        _cleanup_close_ int fd = -EBADF;
        uid_t uid;

        /* (An anchor this agent cannot tell of now, out of file
         * descriptors say, is alive, as for an adoption.) */
        return !service_unit_is_valid(unit) || anchor_probe(a, id, &fd, &uid) != -ENOENT;
}

static int kill_wait_done(sd_event_source *s, uint64_t usec, void *userdata) {
        KillWait *w = userdata;

        (void) s, (void) usec;
        forget_index_entry(w->agent, w->id);
        return 0;
}

static void kill_resume(const char *id, const char *value, void *userdata) {
        _cleanup_(sd_event_source_unrefp) sd_event_source *s = NULL;
        char unit[UNIT_NAME_MAX + 1];
        Agent *a = userdata;
        usec_t kill_at, now = now_mono();
        KillWait *w;
        int r;

        if (!lease_id_is_valid(id) || !record_kill(a, value, unit, &kill_at) || !kill_waits(a, id, unit))
                return;
        if (unit_live(a, unit) == 0)
                log_info("Lease %s was lost before this agent started, and %s was being stopped: it is.", id, unit);
        else {
                /* Stopped again (its stop may have been timed for later:
                 * a session's), and killed when the first agent would. */
                log_warning("Lease %s was lost before this agent started, and %s was being stopped: stopping it, "
                            "and sending SIGKILL to what is left of it %s.", id, unit,
                            kill_at > now ? "when its slot may be granted elsewhere" : "now");
                unit_stop(a, unit, "its slot was lost before this agent started", 0, kill_at, NULL);
        }
        w = calloc(1, sizeof(*w));
        if (!w)
                return;
        *w = (KillWait) { .agent = a };
        snprintf(w->id, sizeof(w->id), "%s", id);
        r = sd_event_add_time(a->event, &s, CLOCK_MONOTONIC, MAX(kill_at, now), 0, kill_wait_done, w);
        if (r >= 0)
                r = sd_event_source_set_destroy_callback(s, free);
        if (r < 0) {
                free(w);
                return;
        }
        (void) sd_event_source_set_floating(s, true);
}

void host_record_open(Agent *a) {
        int r = sd_id128_get_boot(&a->boot_id);

        a->boot_known = r >= 0;
        if (r < 0)
                log_warning_errno(r, "Cannot read this boot's id (/proc/sys/kernel/random/boot_id): %m; this host's "
                                  "record marks no lease held or being killed, and an agent restart neither tells "
                                  "a forgotten name which leases held nor kills a job being stopped.");
        a->record_fd = record_dir_open(a, "STATE_DIRECTORY");
        a->run_record_fd = record_dir_open(a, "RUNTIME_DIRECTORY");
        if (a->record_fd >= 0 && a->run_record_fd >= 0)
                (void) lease_record_foreach(a->record_fd, record_move_anchored, a);
        if (a->run_record_fd >= 0)
                (void) lease_record_foreach(a->run_record_fd, kill_resume, a);
        if (a->record_fd >= 0)
                (void) lease_record_foreach(a->record_fd, kill_resume, a);
        if (a->record_fd < 0)
                log_notice("No state directory ($STATE_DIRECTORY unset, or unusable): an agent restart re-adopts the "
                           "slots this host holds itself from Redis' index alone%s.",
                           a->run_record_fd < 0 ? ", and so its other leases" : "");
}

/* The description of a slot whose record Redis lost (adopt.lua's
 * forgotten, without one): made again from its anchor's owner, as at its
 * request (its pid unknown when the anchor is alive by name only). */
static char *adoption_describe(Adoption *ad) {
        struct ucred owner = ad->owner;
        char holder[LEASE_HOLDER_MAX];
        uint64_t start;

        if (ad->watch_fd >= 0 && peer_cred(ad->watch_fd, &owner) < 0)
                owner = ad->owner;
        return requester_describe(ad->agent, &owner, ad->slots, ad->unit, ad->host_held ? "" : NULL, holder, &start);
}

static void adopt_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        _cleanup_(adoption_freep) Adoption *ad = userdata;
        _cleanup_free_ char *described = NULL;
        Agent *a = ad->agent;
        ReplyAdopt d = {};
        int state = -2;         /* Redis went, or refused the call: ask again next time */
        uint64_t token = 0, since_ms = 0;
        const char *desc = NULL;
        LeaseIo *io = NULL;
        Lease *l;

        (void) conn;
        if (reply && !redis_reply_error(reply)) {
                if (reply_decode_adopt(reply, &d) < 0)
                        reply_log_unknown("adopt", ad->name, reply, "the slot is not adopted now");
                else
                        state = d.outcome == REPLY_ADOPT_HELD || d.outcome == REPLY_ADOPT_FORGOTTEN ? 1 :
                                d.outcome == REPLY_ADOPT_GONE ? -1 : 0;
        }
        if (state == 1 && d.outcome == REPLY_ADOPT_HELD) {
                token = (uint64_t) d.held.token;
                since_ms = (uint64_t) d.held.since_ms;
                desc = d.held.description;
        } else if (state == 1) {
                token = (uint64_t) d.forgotten.token;
                since_ms = (uint64_t) d.forgotten.since_ms;
                desc = d.forgotten.description;
                if (!desc[0])
                        desc = described = adoption_describe(ad);
                if (!desc)
                        state = -2;     /* out of memory: asked again at the next re-adoption */
        }

        if (state == 1 && !engine_lease_find(&a->engine, ad->id)) {
                char holder[LEASE_HOLDER_MAX];
                LeaseSpec spec = {
                        .name = ad->name, .id = ad->id, .slots = ad->slots, .weight = ad->weight, .uid = ad->owner.uid,
                        .pid = ad->owner.pid, .desc = desc, .holder = holder, .unit = ad->unit,
                        .stop_on_lost = ad->stop_on_lost, .host_held = ad->host_held,
                        .ttl = ad->host_held ? a->config->host_lease : 0,
                };

                /* Its label from what this host knows of it (the
                 * requester's pid where its record has it, and it runs). */
                holder_label(a, ad->owner.uid, ad->owner.pid, ad->host_held ? "host" : ad->unit ?: "adopted", holder,
                             sizeof(holder));
                io = lease_io_new(a, ad->watch_fd);
                if (io)
                        io->requester_start = ad->requester_start;
                if (io && engine_adopt(&a->engine, &spec, token, since_ms, io, now_mono(), &l) >= 0) {
                        ad->watch_fd = -EBADF;
                        if (lease_io_attach(io, l) < 0)
                                engine_release(&a->engine, l, "cannot watch its anchor", now_mono());
                        else {  /* in both again: either may have lost it (the
                                 * record was written as it became HELD) */
                                io_index(a, l, true);
                                /* Redis lost part of its name meanwhile: put back, as a renewal would. */
                                if (d.outcome == REPLY_ADOPT_FORGOTTEN)
                                        engine_put_back(&a->engine, l, now_mono());
                        }
                        ad->round->count++;
                } else if (io) {
                        ad->watch_fd = -EBADF;  /* closed with io */
                        lease_io_free(io);
                }
        } else if (state == -1) {
                /* Gone from Redis (revoked, or its lease ran out) while
                 * this host's agent was away, its anchor alive: a unit with
                 * on-lost=stop that runs held it (its acquire is behind it)
                 * and is stopped and killed now, as a loss heard in time
                 * would have had it; its slot may be another's already. */
                if (ad->unit && ad->stop_on_lost && unit_running(a, ad->unit) > 0) {
                        log_warning("Slot of %s held by %s (lease %s) is gone from Redis: revoked, or its lease ran "
                                    "out, while this agent was away; stopping %s (on-lost=stop).",
                                    ad->name, ad->unit, ad->id, ad->unit);
                        unit_stop(a, ad->unit, "its slot went while the agent was away", 0, now_mono(), NULL);
                }
                forget_index_entry(a, ad->id);
        }
        /* state 0: only queued; its client asks again if it still wants it. */

        adopt_done_one(ad->round);
}

static void adopt_entry(Agent *a, AdoptRound *round, const char *id, const char *entry) {
        char name[NAME_MAX_LEN + 1], unit[UNIT_NAME_MAX + 1] = "-", on_lost[8] = "ignore", kind[16] = "";
        char value[LEASE_RECORD_VALUE_MAX], record[LEASE_RECORD_VALUE_MAX], kill_unit[UNIT_NAME_MAX + 1];
        unsigned slots, uid, weight = 1;
        bool held = false, recorded;
        usec_t mtime, kill_at;
        _cleanup_close_ int watch = -EBADF;
        int n = 0, r, k;
        struct ucred owner = { .pid = 0, .gid = (gid_t) -1 };
        _cleanup_(adoption_freep) Adoption *ad = NULL;

        if (!lease_id_is_valid(id) || engine_lease_find(&a->engine, id))
                return;
        /* "NAME SLOTS UID UNIT ON-LOST[ WEIGHT[ KIND]]" (io_index());
         * older agents wrote the first three. From the record, with its
         * mark of a HELD lease after it (record_put_lease()): cut off
         * here, read below. */
        snprintf(value, sizeof(value), "%s", entry);
        value[record_entry_len(value)] = '\0';
        k = sscanf(value, "%200s %u %u%n %255s %7s%n %u%n %15s%n", name, &slots, &uid, &n, unit, on_lost, &n, &weight,
                   &n, kind, &n);
        if ((k != 3 && k != 5 && k != 6 && k != 7) || value[n] != '\0' || !name_is_valid(name) || slots > SLOTS_MAX ||
            weight < 1 || weight > SLOTS_MAX || (k == 7 && !streq(kind, ENGINE_INDEX_HOST_HELD)) ||
            (k == 7 && (uid != 0 || !streq(unit, "-"))) ||
            (!streq(unit, "-") && !service_unit_is_valid(unit)) ||
            (!streq(on_lost, "stop") && !streq(on_lost, "ignore"))) {
                log_warning("Ignoring malformed entry for lease %s in %s.", id, a->host_key);
                forget_index_entry(a, id);
                return;
        }

        recorded = record_get(a, id, record, &mtime) >= 0;
        /* A job being stopped when the agent before this one went: killed
         * (kill_resume()), not adopted. */
        if (recorded && record_kill(a, record, kill_unit, &kill_at) && kill_waits(a, id, kill_unit))
                return;
        if (k == 7) {
                /* Held by the host itself: no anchor to look for. */
                owner.uid = 0;
                r = 0;
        } else
                r = anchor_probe(a, id, &watch, &owner.uid);
        if (r < 0 && r != -ENOENT) {
                /* Cannot tell now (out of file descriptors): alive until
                 * the name says otherwise. */
                watch = -EBADF;
                owner.uid = (uid_t) -1;
                r = 0;
        }
        if (r >= 0 && owner.uid == (uid_t) -1)
                owner.uid = (uid_t) uid;        /* by name, owner unknown: the index says */
        if (r >= 0 && owner.uid != (uid_t) uid) {
                log_warning("Anchor of lease %s belongs to uid " UID_FMT ", not " UID_FMT "; releasing its slot of %s.",
                            id, owner.uid, (uid_t) uid, name);
                r = -EPERM;
        }
        if (r < 0) {
                if (r == -ENOENT)
                        log_info("Anchor of lease %s is gone; releasing its slot of %s.", id, name);
                /* Sent, it leaves the index with it; else it stays there,
                 * and the next re-adoption releases it. */
                r = host_call_release(a, name, id, (uid_t) uid);
                if (r < 0)
                        log_warning_errno(r, "Failed to release lease %s of %s: %m; it stays in %s, released at the "
                                          "next re-adoption.", id, name, a->host_key);
                return;
        }

        ad = calloc(1, sizeof(*ad));
        if (!ad)
                return;
        *ad = (Adoption) { .agent = a, .round = round, .watch_fd = TAKE_FD(watch), .slots = slots, .weight = weight,
                           .owner = owner, .stop_on_lost = streq(on_lost, "stop"), .host_held = k == 7 };
        if (recorded) {
                held = record_says_held(a, record, mtime, (k == 7 ? a->config->host_lease : a->config->lease_ttl) * 2 / 3);
                if (k != 7)
                        ad->owner.pid = record_requester(record, &ad->requester_start);
        }
        if (!streq(unit, "-") && !(ad->unit = strdup(unit)))
                return;
        snprintf(ad->name, sizeof(ad->name), "%s", name);
        snprintf(ad->id, sizeof(ad->id), "%s", id);
        {
                char ttl[24], idle[24], uid_s[16], grace[24];
                /* No idle time ("0"): adopting writes only what exists. */
                const char *args[N_ADOPT_ARGS] = {
                        [ARG_ADOPT_LEASE] = id, [ARG_ADOPT_TTL_MS] = ttl, [ARG_ADOPT_HOST] = a->config->host_id,
                        [ARG_ADOPT_UID] = uid_s, [ARG_ADOPT_GRACE_UNTIL_MS] = grace, [ARG_ADOPT_IDLE_MS] = "0",
                        [ARG_ADOPT_HELD] = held ? "1" : "0",
                };

                io_lease_args(a, ad->host_held, name, (uid_t) uid, ttl, idle);
                snprintf(uid_s, sizeof(uid_s), UID_FMT, (uid_t) uid);
                snprintf(grace, sizeof(grace), "%" PRIu64, redis_grace_until(a, name));
                if (script_call(a, SCRIPT_ADOPT, name, adopt_reply, ad, ELEMENTSOF(args), args, NULL) < 0)
                        return;
                round->pending++;
                TAKE_PTR(ad);
        }
}

typedef struct RecordRound {
        AdoptRound *round;
        char (*ids)[LEASE_ID_LEN + 1];  /* Redis' index' ids, sorted */
        size_t n_ids;
        bool complete;                  /* ids holds every one of them */
} RecordRound;

static int id_compare(const void *x, const void *y) {
        return strcmp(x, y);
}

static void record_entry(const char *id, const char *value, void *userdata) {
        RecordRound *rr = userdata;
        Agent *a = rr->round->agent;

        if (!rr->complete || bsearch(id, rr->ids, rr->n_ids, sizeof(*rr->ids), id_compare))
                return;         /* (without the list, Redis' entries alone) */
        log_notice("Lease %s is in this host's record but not in Redis' index %s; re-adopting it from the record.",
                   id, a->host_key);
        adopt_entry(a, rr->round, id, value);
}

static void index_reply(RedisConn *conn, const RedisReply *reply, void *userdata) {
        Agent *a = userdata;
        size_t n = redis_reply_array_len(reply), n_ids = 0;
        const char *err = redis_reply_error(reply);
        _cleanup_free_ char (*ids)[LEASE_ID_LEN + 1] = NULL;
        AdoptRound *round;
        int r;

        (void) conn;
        if (!reply) {
                adopt_over(a);  /* Redis went: adoption runs again when it is back */
                return;
        }
        if (err) {
                log_error("Failed to read this host's leases from %s: %s", a->host_key, err);
                adopt_over(a);
                return;
        }
        round = calloc(1, sizeof(*round));
        if (!round) {
                log_error("Out of memory: this host's leases are re-adopted on the next connection to Redis.");
                adopt_over(a);
                return;
        }
        *round = (AdoptRound) { .agent = a, .pending = 1, .started = now_usec(CLOCK_MONOTONIC) };
        a->adopted = true;
        ids = calloc(n / 2 + 1, sizeof(*ids));
        for (size_t i = 0; i + 1 < n; i += 2) {
                char id[LEASE_ID_LEN + 1], value[ENGINE_INDEX_VALUE_MAX];

                if (redis_reply_array_string(reply, i, id, sizeof(id)) < 0 ||
                    redis_reply_array_string(reply, i + 1, value, sizeof(value)) < 0)
                        continue;
                if (ids)
                        memcpy(ids[n_ids++], id, sizeof(id));
                adopt_entry(a, round, id, value);
        }
        /* Then what the host's own record has and Redis' index lacks. */
        if (ids)
                qsort(ids, n_ids, sizeof(*ids), id_compare);
        const int fds[] = { a->record_fd, a->run_record_fd };
        for (size_t i = 0; i < ELEMENTSOF(fds); i++) {
                RecordRound rr = { .round = round, .ids = ids, .n_ids = n_ids, .complete = ids || n < 2 };

                if (fds[i] < 0)
                        continue;
                r = lease_record_foreach(fds[i], record_entry, &rr);
                if (r < 0)
                        log_warning_errno(r, "Failed to read this host's record of its leases: %m; re-adopting from "
                                          "Redis' index alone.");
        }
        adopt_done_one(round);
}

void adopt_start(Agent *a) {
        const char *argv[] = { "HGETALL", a->host_key };

        if (redis_key_command(a, index_reply, a, 2, argv) < 0) {
                log_warning("Failed to ask Redis for this host's leases; trying again on the next connection.");
                return;
        }
        a->adopting = true;
}
