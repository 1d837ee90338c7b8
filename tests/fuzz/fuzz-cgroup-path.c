/* SPDX-License-Identifier: MIT */
/* The control group paths of /proc/PID/cgroup as systemd reads them
 * (cgroup-path.c), whose names whoever may make control groups chooses (a
 * delegated user): the input as the text of the file, and as a path (up to
 * its first NUL; what follows it is a root). The systemd hierarchy's path
 * is the whole path of a line of the text, "0::" on its own under cgroup
 * v2; the root of init and the path below a root are parts of the path; a
 * unit is a whole component of the path (but an escaping "_"), a valid
 * unit name by a second statement of the rule and no slice, the user
 * manager's for a user unit; a session is the ID of "session-ID.scope";
 * a unit that does not fit the buffer gives -ENOBUFS, one that fits the
 * same unit. */

#include <errno.h>

#include "cgroup-path.h"
#include "fuzz.h"
#include "names.h"

#define ALNUM "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

static bool ends_with(const char *s, const char *suffix) {
        size_t n = strlen(s), k = strlen(suffix);

        return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* A unit name: "NAME.TYPE" or "NAME@INSTANCE.TYPE", NAME and INSTANCE not
 * empty, all of unit characters, TYPE one of systemd's. */
static bool unit_ok(const char *s) {
        static const char *const types[] = {
                ".service", ".socket", ".target", ".device", ".mount", ".automount", ".swap", ".timer", ".path",
                ".slice", ".scope",
        };
        size_t n = strlen(s), name = 0;
        const char *at = strchr(s, '@');

        if (n == 0 || n > UNIT_NAME_MAX || strspn(s, ALNUM ":-_.\\@") != n)
                return false;
        for (size_t i = 0; i < ELEMENTSOF(types); i++)
                if (ends_with(s, types[i]))
                        name = n - strlen(types[i]);
        if (name == 0)
                return false;
        return !at || (at != s && (size_t) (at - s) + 1 < name);
}

/* Whether unit is a component of path, with the "_" that escapes it
 * removed. */
static bool is_component(const char *path, const char *unit) {
        size_t k = strlen(unit);

        for (const char *c = path; *c; c += strcspn(c, "/")) {
                size_t n;

                c += strspn(c, "/");
                n = strcspn(c, "/");
                if (c[0] == '_' ? n == k + 1 && strneq(c + 1, unit, k) : n == k && strneq(c, unit, k))
                        return true;
        }
        return false;
}

/* The unit, or NULL; the same in a buffer just large enough, -ENOBUFS in one
 * a byte short. */
static const char *check_unit(int (*get)(const char *, char *, size_t), const char *path, char *buf, size_t size) {
        char exact[UNIT_NAME_MAX + 1];
        size_t n;
        int r;

        r = get(path, buf, size);
        fuzz_assert(r == 0 || r == -ENXIO);     /* size holds any unit */
        if (r < 0)
                return NULL;
        n = strlen(buf);
        fuzz_assert(unit_ok(buf) && !ends_with(buf, ".slice") && is_component(path, buf));
        fuzz_assert(get(path, exact, n + 1) == 0 && streq(exact, buf));
        fuzz_assert(get(path, exact, n) == -ENOBUFS);
        return buf;
}

/* "session-ID.scope", ID of letters and digits: ID. */
static void check_session(const char *unit) {
        char id[64];
        size_t n = strlen(unit), k = n > 8 + 6 ? n - 8 - 6 : 0;
        int r;

        r = cgroup_unit_session(unit, id, sizeof(id));
        if (k == 0 || !strneq(unit, "session-", 8) || !ends_with(unit, ".scope") || strspn(unit + 8, ALNUM) != k)
                fuzz_assert(r == -ENXIO);
        else if (k >= sizeof(id))
                fuzz_assert(r == -ENOBUFS);
        else
                fuzz_assert(r == 0 && strlen(id) == k && strneq(unit + 8, id, k));
}

/* root NULL: the root of init of path itself. */
static void check_path(const char *path, const char *root) {
        char unit[UNIT_NAME_MAX + 1], user_unit[UNIT_NAME_MAX + 1], init[4096];
        size_t n = strlen(path), k;
        const char *below, *u;

        if (n >= sizeof(init))
                return;
        /* PID 1's path without its last "/init.scope", "/system.slice" or
         * "/system": a prefix of it. */
        memcpy(init, path, n + 1);
        cgroup_root_of_init(init);
        k = strlen(init);
        fuzz_assert(k <= n && strneq(init, path, k));
        if (ends_with(path, "/init.scope") || ends_with(path, "/system.slice") || ends_with(path, "/system"))
                fuzz_assert(k < n && (streq(path + k, "/init.scope") || streq(path + k, "/system.slice") ||
                                      streq(path + k, "/system")));
        else
                fuzz_assert(k == n);

        /* Below root: path without root (slashes that end root aside) in
         * front, "/" when that is all of it, else path itself. */
        root = root ?: init;
        k = strlen(root);
        while (k > 0 && root[k - 1] == '/')
                k--;
        below = cgroup_below_root(path, root);
        if (k > 0 && strneq(path, root, k) && path[k] == '\0')
                fuzz_assert(streq(below, "/"));
        else if (k > 0 && strneq(path, root, k) && path[k] == '/')
                fuzz_assert(below == path + k);
        else
                fuzz_assert(below == path);

        u = check_unit(cgroup_path_unit, path, unit, sizeof(unit));
        if (u)
                check_session(u);
        if (check_unit(cgroup_path_user_unit, path, user_unit, sizeof(user_unit))) {
                char uid[32];
                uint64_t v;

                /* Inside the user manager, which is path's unit. */
                fuzz_assert(u && strneq(u, "user@", 5) && ends_with(u, ".service"));
                k = strlen(u) - 5 - 8;
                fuzz_assert(k < sizeof(uid));
                memcpy(uid, u + 5, k);
                uid[k] = '\0';
                fuzz_assert(parse_uint64(uid, 0, (uint32_t) -2, &v) == 0);
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *s = fuzz_string(data, size), *text;
        const uint8_t *nul = memchr(data, '\0', size);
        char *root = nul ? fuzz_string(nul + 1, size - (size_t) (nul + 1 - data)) : NULL;

        check_path(s, root);
        check_session(s);

        /* The text of /proc/PID/cgroup: the systemd hierarchy's line. */
        for (int unified = 0; unified <= 1; unified++) {
                const char *p = NULL;
                size_t off;
                int r;

                text = strdup(s);
                fuzz_assert(text);
                r = cgroup_systemd_path(text, unified, &p);
                fuzz_assert(r == 0 || r == -ENOENT);
                if (r == 0) {
                        off = (size_t) (p - text);
                        fuzz_assert(p >= text && off < strlen(s) && p[0] == '/' && !strchr(p, '\n'));
                        /* A whole line's path, after "ID:CONTROLLERS:". */
                        fuzz_assert(strneq(s + off, p, strlen(p)) && (s[off + strlen(p)] == '\0' ||
                                                                       s[off + strlen(p)] == '\n'));
                        fuzz_assert(off > 0 && s[off - 1] == ':' && memchr(s, ':', off - 1));
                        if (unified)
                                fuzz_assert(off >= 3 && strneq(s + off - 3, "0::", 3) &&
                                            (off == 3 || s[off - 4] == '\n'));
                        else
                                fuzz_assert(strstr(s, "name=systemd"));
                        check_path(p, root);
                }
                free(text);
        }
        free(root);
        free(s);
        return 0;
}
