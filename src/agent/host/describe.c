/* SPDX-License-Identifier: MIT */
/* Who asks: the description of a requester that Redis keeps beside its
 * lease, from the kernel's view of the process (never from the request). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "agent.h"
#include "cgroup-path.h"
#include "log-limit.h"
#include "log.h"
#include "names.h"

/* What NSS says of a uid — its name, and which allow rules name it or one
 * of its groups — remembered for a minute in a bounded cache: NSS can be
 * slow (LDAP), and the event loop that renews every lease waits while it
 * asks. A slow directory costs one wait per uid per minute. A failed look
 * (EMFILE, a directory that does not answer) is remembered for a few
 * seconds, as a failure, never as "no". */
#define USER_CACHE_SIZE 256
#define USER_CACHE_TTL (60 * USEC_PER_SEC)
#define USER_CACHE_ERROR_TTL (5 * USEC_PER_SEC)

typedef struct UserEntry {
        uid_t uid;
        usec_t when;            /* 0: empty */
        int error;              /* -errno of the look, or 0 */
        bool *match;            /* per allow rule */
        char name[64];
} UserEntry;

static UserEntry user_cache[USER_CACHE_SIZE];

static const UserEntry *user_lookup(Agent *a, uid_t uid) {
        usec_t now = now_usec(CLOCK_MONOTONIC);
        struct passwd pwbuf, *pw = NULL;
        char tmp[4096];
        UserEntry *e = NULL, *oldest = &user_cache[0];
        int r;

        for (size_t i = 0; i < USER_CACHE_SIZE; i++) {
                UserEntry *c = &user_cache[i];

                if (c->when > 0 && c->uid == uid) {
                        if (now - c->when < (c->error < 0 ? USER_CACHE_ERROR_TTL : USER_CACHE_TTL))
                                return c;
                        e = c;
                        break;
                }
                if (c->when < oldest->when)
                        oldest = c;
        }
        if (!e)
                e = oldest;
        free(e->match);
        *e = (UserEntry) { .uid = uid, .when = now };
        e->match = calloc(a->config->n_allow + 1, sizeof(bool));
        if (!e->match) {
                e->error = -ENOMEM;
                return e;
        }
        r = getpwuid_r(uid, &pwbuf, tmp, sizeof(tmp), &pw);
        if (pw && strlen(pw->pw_name) < sizeof(e->name))
                strcpy(e->name, pw->pw_name);
        else if (!pw && r != 0 && r != ENOENT && r != ESRCH && r != EBADF && r != EPERM)
                e->error = -r;
        if (e->error == 0 && uid != 0)
                e->error = config_user_rules(a->config, uid, e->match);
        if (e->error < 0)
                log_uid(uid, now, LOG_WARNING, "Failed to look up uid " UID_FMT ": %s; its requests are refused "
                        "as busy for %llus.", uid, strerror(-e->error),
                        (unsigned long long) (USER_CACHE_ERROR_TTL / USEC_PER_SEC));
        return e;
}

int user_permits(Agent *a, uid_t uid, const char *name) {
        const UserEntry *e;

        if (uid == 0)
                return 1;
        e = user_lookup(a, uid);
        if (e->error < 0)
                return e->error;
        return config_rules_permit(a->config, e->match, name);
}

void user_cache_clear(void) {
        for (size_t i = 0; i < USER_CACHE_SIZE; i++) {
                free(user_cache[i].match);
                user_cache[i] = (UserEntry) {};
        }
}

static const char *user_name(Agent *a, uid_t uid, char *buf, size_t size) {
        const UserEntry *e = user_lookup(a, uid);

        snprintf(buf, size, "%s", e->name);
        return buf[0] ? buf : NULL;
}

/* What /proc says of a requester — its comm, its unit or session — kept
 * for a second per pid: one look reads two files (its stat and its
 * cgroup), and a busy script asking again and again would pay them on
 * every request. It feeds the description Redis shows, never a decision
 * (a unit=1 request looks its unit up itself with sd_pid_get_unit(),
 * units.c); the uid is part of the key, and a pid comes back within the
 * second only on a host that forks pid_max processes in it. */
#define PROC_CACHE_SIZE 64
#define PROC_CACHE_TTL USEC_PER_SEC

typedef struct ProcEntry {
        pid_t pid;
        uid_t uid;
        usec_t when;            /* 0: empty */
        bool looked_unit;       /* unit and session below are known */
        uint64_t start;         /* its start time (0: unknown) */
        char comm[64];
        char unit[UNIT_NAME_MAX + 1];
        char session[64];
} ProcEntry;

static ProcEntry proc_cache[PROC_CACHE_SIZE];

static void proc_look_stat(ProcEntry *e) {
        ProcStat st;

        if (proc_stat_read(e->pid, &st) < 0)
                return;
        snprintf(e->comm, sizeof(e->comm), "%s", st.comm);
        e->start = st.start;
}

#define CGROUP_TEXT_MAX 16384

/* The text of /proc/PID/cgroup, in one read (the kernel makes the whole
 * file at the first); -E2BIG when it does not fit. */
static int proc_cgroup_read(pid_t pid, char *buf, size_t size) {
        ssize_t k = proc_file_read(pid, "cgroup", buf, size);

        if (k < 0)
                return (int) k;
        return (size_t) k == size - 1 ? -E2BIG : 0;
}

static bool is_cgroup2(const char *path) {
        struct statfs fs;

        return statfs(path, &fs) >= 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
}

/* Whether systemd's hierarchy is the unified one (cgroup v2 alone, or
 * beside v1 controllers), as libsystemd decides it; looked at once. */
static bool cgroup_unified(void) {
        static int unified = -1;

        if (unified < 0)
                unified = is_cgroup2("/sys/fs/cgroup") || is_cgroup2("/sys/fs/cgroup/unified") ||
                          is_cgroup2("/sys/fs/cgroup/systemd");
        return unified;
}

/* The root systemd counts units from: PID 1's group, without its
 * init.scope. Looked at once (libsystemd reads PID 1's file at every
 * look): systemd puts itself there at boot, before the agent starts. */
static const char *cgroup_root(void) {
        static char root[CGROUP_TEXT_MAX];
        static bool known;
        char text[CGROUP_TEXT_MAX];
        const char *path;

        if (known)
                return root;
        if (proc_cgroup_read(1, text, sizeof(text)) < 0 || cgroup_systemd_path(text, cgroup_unified(), &path) < 0)
                return NULL;
        snprintf(root, sizeof(root), "%s", path);
        cgroup_root_of_init(root);
        known = true;
        return root;
}

/* The unit, and the session or user unit where it points there, from one
 * read of the cgroup file (as sd_pid_get_unit(), sd_pid_get_session() and
 * sd_pid_get_user_unit() would find them, each with its own reads). */
static void proc_look_unit(ProcEntry *e) {
        char text[CGROUP_TEXT_MAX], unit[UNIT_NAME_MAX + 1];
        const char *path, *root;

        e->looked_unit = true;
        root = cgroup_root();
        if (!root || proc_cgroup_read(e->pid, text, sizeof(text)) < 0 ||
            cgroup_systemd_path(text, cgroup_unified(), &path) < 0)
                return;
        path = cgroup_below_root(path, root);
        if (cgroup_path_unit(path, unit, sizeof(unit)) < 0)
                return;
        if (cgroup_unit_session(unit, e->session, sizeof(e->session)) < 0 && strneq(unit, "user@", 5))
                (void) cgroup_path_user_unit(path, unit, sizeof(unit));
        snprintf(e->unit, sizeof(e->unit), "%s", unit);
}

static const ProcEntry *proc_lookup(const struct ucred *uc, bool want_unit) {
        ProcEntry *e = &proc_cache[(unsigned) uc->pid % PROC_CACHE_SIZE];
        usec_t now = now_usec(CLOCK_MONOTONIC);

        if (e->when == 0 || e->pid != uc->pid || e->uid != uc->uid || now - e->when >= PROC_CACHE_TTL) {
                *e = (ProcEntry) { .pid = uc->pid, .uid = uc->uid, .when = now };
                proc_look_stat(e);
        }
        if (want_unit && !e->looked_unit)
                proc_look_unit(e);
        return e;
}

/* known_unit: the requester's service when the caller looked it up already. */
void holder_label(Agent *a, uid_t uid, pid_t pid, const char *what, char *ret, size_t size) {
        char user[64], id[24], at[24] = "";

        snprintf(id, sizeof(id), UID_FMT, uid);
        if (pid > 0)
                snprintf(at, sizeof(at), " pid " PID_FMT, pid);
        snprintf(ret, size, "%s@%s%s (%s)", user_name(a, uid, user, sizeof(user)) ?: id, a->config->host_id,
                 at, what && what[0] ? what : "?");
}

char *requester_describe(Agent *a, const struct ucred *uc, uint32_t slots, const char *known_unit, const char *reason,
                         char ret_holder[static LEASE_HOLDER_MAX], uint64_t *ret_start) {
        char user[64], line[SLOTS_DESC_MAX];
        const ProcEntry *e = proc_lookup(uc, !known_unit);
        MessageBuilder b;

        *ret_start = e->start;
        holder_label(a, uc->uid, uc->pid, known_unit ?: (e->unit[0] ? e->unit : e->session[0] ? e->session : e->comm),
                     ret_holder, LEASE_HOLDER_MAX);
        message_start(&b, line, sizeof(line), "INFO");
        message_add(&b, "host", a->config->host_id);
        message_addf(&b, "pid", PID_FMT, uc->pid);
        message_addf(&b, "uid", UID_FMT, uc->uid);
        if (user_name(a, uc->uid, user, sizeof(user)))
                message_add(&b, "user", user);
        message_addf(&b, "slots", "%" PRIu32, slots);
        if (e->comm[0])
                message_add(&b, "comm", e->comm);
        if (known_unit)
                message_add(&b, "unit", known_unit);
        else {
                if (e->session[0])
                        message_add(&b, "session", e->session);
                if (e->unit[0])
                        message_add(&b, "unit", e->unit);
        }
        /* A slot the host holds itself, and why (checked text, bounded). */
        if (reason) {
                message_add(&b, "hold", "host");
                if (reason[0])
                        message_add(&b, "reason", reason);
        }

        if (message_finish(&b) < 0)
                return strdup("INFO");
        return strdup(line);
}
