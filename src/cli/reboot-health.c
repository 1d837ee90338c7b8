/* SPDX-License-Identifier: MIT */
/* fleetsem reboot and systemd: the failed units recorded before the
 * reboot, the judgement of the system after it, and the service that
 * gives the slots back after the boot. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "names.h"
#include "reboot-health.h"

#define SYSTEMCTL_OUTPUT_MAX (256 * 1024)       /* bytes of systemctl's answer looked at */
#define UNITS_TEXT_MAX 2048                     /* bytes of a list of units in a message */

void failed_units_clear(FailedUnits *u) {
        for (size_t i = 0; i < u->n; i++)
                free(u->names[i]);
        *u = (FailedUnits) {};
}

/* systemd's unit names: [A-Za-z0-9:_.\@-], a type after the last dot. */
static bool unit_name_ok(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > UNIT_NAME_MAX || !strchr(s, '.') || s[0] == '.' || s[n - 1] == '.')
                return false;
        return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789:_.\\@-") == n;
}

static bool failed_units_has(const FailedUnits *u, const char *name) {
        for (size_t i = 0; i < u->n; i++)
                if (streq(u->names[i], name))
                        return true;
        return false;
}

int failed_units_add(FailedUnits *u, const char *name) {
        if (!unit_name_ok(name) || failed_units_has(u, name))
                return 0;
        if (u->n >= FAILED_UNITS_MAX) {
                u->more = true;
                return -E2BIG;
        }
        u->names[u->n] = strdup(name);
        if (!u->names[u->n])
                return -ENOMEM;
        u->n++;
        return 0;
}

/* `systemctl ARGS` (a fixed text of ours, no input in it), its output
 * into a buffer of SYSTEMCTL_OUTPUT_MAX: 0 with *ret (free it), <0. */
static int systemctl_output(const char *args, char **ret) {
        char cmd[256];
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        FILE *p;
        int status;

        snprintf(cmd, sizeof(cmd), "systemctl --no-pager %s 2>/dev/null", args);
        buf = malloc(SYSTEMCTL_OUTPUT_MAX + 1);
        if (!buf)
                return -ENOMEM;
        fflush(NULL);
        p = popen(cmd, "re");
        if (!p)
                return -errno;
        len = fread(buf, 1, SYSTEMCTL_OUTPUT_MAX, p);
        /* (What is left unread: systemctl ends on a closed pipe.) */
        status = pclose(p);
        buf[len] = '\0';
        if (status < 0)
                return -errno;
        if (!WIFEXITED(status) || WEXITSTATUS(status) == 127)
                return -ENOENT;
        *ret = TAKE_PTR(buf);
        return WEXITSTATUS(status);
}

int failed_units_list(FailedUnits *ret) {
        _cleanup_free_ char *out = NULL;
        int r;

        r = systemctl_output("list-units --state=failed --plain --no-legend --full --all", &out);
        if (r < 0)
                return r;
        if (r > 0)
                return -EIO;
        /* "UNIT LOAD ACTIVE SUB DESCRIPTION" a line. */
        for (char *line = out, *next; line && *line; line = next) {
                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                line[strcspn(line, " \t")] = '\0';
                r = failed_units_add(ret, line);
                if (r == -ENOMEM)
                        return r;
        }
        return 0;
}

/* `systemctl is-system-running`: its one word ("" when it said none). */
static void system_state(char *state, size_t size) {
        _cleanup_free_ char *out = NULL;

        state[0] = '\0';
        if (systemctl_output("is-system-running", &out) < 0)
                return;
        out[strcspn(out, "\n")] = '\0';
        if (strlen(out) < size && strspn(out, "abcdefghijklmnopqrstuvwxyz-") == strlen(out))
                snprintf(state, size, "%s", out);
}

/* The units, "a b c", cut with "..." to fit. */
static void units_text(char *const *names, size_t n, bool more, char *buf, size_t size) {
        size_t used = 0;

        buf[0] = '\0';
        for (size_t i = 0; i < n; i++) {
                size_t k = strlen(names[i]);

                if (used + k + 1 + strlen(" ...") >= size) {
                        more = true;
                        break;
                }
                used += (size_t) snprintf(buf + used, size - used, "%s%s", used ? " " : "", names[i]);
        }
        if (more)
                snprintf(buf + used, size - used, "%s...", used ? " " : "");
}

bool system_judge(usec_t timeout, const FailedUnits *before) {
        usec_t deadline = usec_add(now_usec(CLOCK_MONOTONIC), timeout);
        char state[64], text[UNITS_TEXT_MAX];
        FailedUnits now = {};
        char *fresh[FAILED_UNITS_MAX], *old[FAILED_UNITS_MAX];
        size_t n_fresh = 0, n_old = 0;
        bool healthy;
        int r;

        /* Booting is over when systemd says anything but these (or says
         * nothing: systemctl that cannot reach it yet). */
        for (;;) {
                system_state(state, sizeof(state));
                if (state[0] && !streq(state, "initializing") && !streq(state, "starting"))
                        break;
                if (now_usec(CLOCK_MONOTONIC) >= deadline) {
                        log_error("The system is still %s after --running-timeout.", state[0] ? state : "not answering");
                        return false;
                }
                usleep(USEC_PER_SEC);   /* not synchronisation: systemd has no call to wait on this with a bound */
        }
        if (streq(state, "running")) {
                printf("The system is running: no unit failed.\n");
                return true;
        }
        if (!streq(state, "degraded")) {
                log_error("The system is %s, neither running nor degraded.", state);
                return false;
        }

        r = failed_units_list(&now);
        if (r < 0) {
                log_error_errno(-r, "The system is degraded, and its failed units cannot be listed: %m.");
                failed_units_clear(&now);
                return false;
        }
        for (size_t i = 0; i < now.n; i++) {
                if (failed_units_has(before, now.names[i]))
                        old[n_old++] = now.names[i];
                else
                        fresh[n_fresh++] = now.names[i];
        }
        /* Past what was recorded, a failed unit cannot be told old. */
        healthy = n_fresh == 0 && !now.more;
        if (n_fresh > 0 || now.more) {
                units_text(fresh, n_fresh, now.more, text, sizeof(text));
                log_error("The system is degraded by units that had not failed before the reboot: %s.", text);
        }
        if (n_old > 0) {
                units_text(old, n_old, false, text, sizeof(text));
                printf("The system is degraded by units that had failed before the reboot too (not counted): %s.\n",
                       text);
        }
        if (now.n == 0 && !now.more)
                printf("The system is degraded, but no unit is failed now.\n");
        failed_units_clear(&now);
        return healthy;
}

/* The value of KEY= in systemctl show's output ("" when absent). */
static const char *show_value(const char *out, const char *key, char *buf, size_t size) {
        size_t k = strlen(key);

        buf[0] = '\0';
        for (const char *line = out; *line; line += strcspn(line, "\n"), line += *line == '\n')
                if (strneq(line, key, k) && line[k] == '=') {
                        size_t n = strcspn(line + k + 1, "\n");

                        if (n < size) {
                                memcpy(buf, line + k + 1, n);
                                buf[n] = '\0';
                        }
                        break;
                }
        return buf;
}

int done_service_starts(char *why, size_t size) {
        _cleanup_free_ char *out = NULL;
        char load[64], file[64], wanted[1024], required[1024];
        int r;

        r = systemctl_output("show -p LoadState -p UnitFileState -p WantedBy -p RequiredBy " DONE_SERVICE, &out);
        if (r != 0) {
                snprintf(why, size, "systemd cannot be asked about %s (systemctl %s)", DONE_SERVICE,
                         r < 0 ? strerror(-r) : "failed");
                return 0;
        }
        show_value(out, "LoadState", load, sizeof(load));
        show_value(out, "UnitFileState", file, sizeof(file));
        show_value(out, "WantedBy", wanted, sizeof(wanted));
        show_value(out, "RequiredBy", required, sizeof(required));
        if (!streq(load, "loaded")) {
                snprintf(why, size, "%s is %s", DONE_SERVICE, load[0] ? load : "unknown to systemd");
                return 0;
        }
        /* Enabled, or pulled in some other way (a drop-in's Wants=, the
         * kernel's command line): some unit wants it. */
        if (wanted[0] || required[0] || streq(file, "enabled") || streq(file, "enabled-runtime"))
                return 1;
        snprintf(why, size, "%s is %s", DONE_SERVICE, file[0] ? file : "not enabled");
        return 0;
}
