/* SPDX-License-Identifier: MIT */
/* Who asks: the description of a requester that Redis keeps beside its
 * lease, from the kernel's view of the process (never from the request). */
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-login.h>

#include "agent.h"
#include "log.h"

/* uid → user name, remembered for a minute: NSS can be slow (LDAP), and
 * the same few users ask again and again. */
static const char *user_name(uid_t uid, char *buf, size_t size) {
        static struct {
                uid_t uid;
                usec_t when;
                char name[64];
        } cache[16];
        static unsigned next;
        usec_t now = now_usec(CLOCK_MONOTONIC);
        struct passwd pwbuf, *pw = NULL;
        char tmp[4096];

        for (size_t i = 0; i < ELEMENTSOF(cache); i++)
                if (cache[i].when > 0 && cache[i].uid == uid && now - cache[i].when < 60 * USEC_PER_SEC) {
                        snprintf(buf, size, "%s", cache[i].name);
                        return buf[0] ? buf : NULL;
                }
        if (getpwuid_r(uid, &pwbuf, tmp, sizeof(tmp), &pw) != 0 || !pw)
                pw = NULL;
        snprintf(buf, size, "%s", pw && strlen(pw->pw_name) < sizeof(cache[0].name) ? pw->pw_name : "");
        cache[next].uid = uid;
        cache[next].when = now;
        snprintf(cache[next].name, sizeof(cache[next].name), "%s", buf);
        next = (next + 1) % ELEMENTSOF(cache);
        return buf[0] ? buf : NULL;
}

/* known_unit: the requester's service when the caller looked it up already. */
char *describe(Agent *a, const struct ucred *uc, uint32_t slots, const char *known_unit) {
        char user[64], comm[64] = "", path[64], line[SLOTS_DESC_MAX];
        _cleanup_free_ char *unit = NULL, *inner = NULL;
        MessageBuilder b;
        FILE *f;

        message_start(&b, line, sizeof(line), "INFO");
        message_add(&b, "host", a->config->host_id);
        message_addf(&b, "pid", PID_FMT, uc->pid);
        message_addf(&b, "uid", UID_FMT, uc->uid);
        if (user_name(uc->uid, user, sizeof(user)))
                message_add(&b, "user", user);
        message_addf(&b, "slots", "%" PRIu32, slots);

        snprintf(path, sizeof(path), "/proc/%i/comm", uc->pid);
        f = fopen(path, "re");
        if (f) {
                if (fgets(comm, sizeof(comm), f)) {
                        comm[strcspn(comm, "\n")] = '\0';
                        message_add(&b, "comm", comm);
                }
                fclose(f);
        }

        /* One look at the cgroup; the session or user unit only where it
         * points there (each lookup reads /proc again). */
        if (known_unit)
                message_add(&b, "unit", known_unit);
        else if (sd_pid_get_unit(uc->pid, &unit) >= 0) {
                if (strneq(unit, "session-", 8) && sd_pid_get_session(uc->pid, &inner) >= 0)
                        message_add(&b, "session", inner);
                else if (strneq(unit, "user@", 5) && sd_pid_get_user_unit(uc->pid, &inner) >= 0) {
                        free(unit);
                        unit = TAKE_PTR(inner);
                }
                message_add(&b, "unit", unit);
        }

        if (message_finish(&b) < 0)
                return strdup("INFO");
        return strdup(line);
}

