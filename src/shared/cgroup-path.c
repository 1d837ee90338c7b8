/* SPDX-License-Identifier: MIT */
/* A control group path read as systemd reads it (cgroup-path.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cgroup-path.h"
#include "macro.h"
#include "names.h"

#define UNIT_CHARS "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789:-_.\\@"

static bool has_suffix(const char *s, size_t n, const char *suffix) {
        size_t k = strlen(suffix);

        return n >= k && memcmp(s + n - k, suffix, k) == 0;
}

static bool unit_type_is_valid(const char *s, size_t n) {
        static const char *const types[] = {
                "service", "socket", "target", "device", "mount", "automount", "swap", "timer", "path", "slice", "scope",
        };

        for (size_t i = 0; i < ELEMENTSOF(types); i++)
                if (strlen(types[i]) == n && memcmp(types[i], s, n) == 0)
                        return true;
        return false;
}

/* A unit name of n characters, "NAME.TYPE" or (instance) "NAME@INSTANCE.TYPE",
 * as systemd's unit_name_is_valid() takes it; a leading "_" (the escape of
 * a name the kernel would take for its own) is not part of it. */
static bool unit_is_valid(const char *s, size_t n, bool instance) {
        const char *dot, *at;

        if (n > 0 && s[0] == '_')
                s++, n--;
        if (n == 0 || n > UNIT_NAME_MAX || strspn(s, UNIT_CHARS) < n)
                return false;
        dot = memrchr(s, '.', n);
        if (!dot || dot == s || !unit_type_is_valid(dot + 1, n - (size_t) (dot + 1 - s)))
                return false;
        at = memchr(s, '@', n);
        if (!at)
                return true;
        return instance && at != s && at + 1 < dot;
}

/* The part of path after the slices it is in ("a.slice/a-b.slice/…"). */
static const char *skip_slices(const char *p) {
        for (;;) {
                size_t n;

                p += strspn(p, "/");
                n = strcspn(p, "/");
                if (n < strlen("x.slice") || !has_suffix(p, n, ".slice") || !unit_is_valid(p, n, false))
                        return p;
                p += n;
        }
}

static int copy_unit(const char *s, size_t n, char *buf, size_t size) {
        if (s[0] == '_')
                s++, n--;
        if (n >= size)
                return -ENOBUFS;
        memcpy(buf, s, n);
        buf[n] = '\0';
        return 0;
}

int cgroup_path_unit(const char *path, char *buf, size_t size) {
        const char *p = skip_slices(path);
        size_t n = strcspn(p, "/");

        if (n < 3 || !unit_is_valid(p, n, true) || has_suffix(p, n, ".slice"))
                return -ENXIO;
        return copy_unit(p, n, buf, size);
}

int cgroup_path_user_unit(const char *path, char *buf, size_t size) {
        const char *p = skip_slices(path);
        size_t n = strcspn(p, "/");
        char uid[16];
        uint64_t u;

        /* "user@UID.service": never escaped, the UID in decimal. */
        if (n < strlen("user@x.service") || !strneq(p, "user@", 5) || !has_suffix(p, n, ".service") ||
            n - 5 - 8 >= sizeof(uid))
                return -ENXIO;
        memcpy(uid, p + 5, n - 5 - 8);
        uid[n - 5 - 8] = '\0';
        if (parse_uint64(uid, 0, (uint32_t) -2, &u) < 0)
                return -ENXIO;
        return cgroup_path_unit(p + n, buf, size);
}

int cgroup_unit_session(const char *unit, char *buf, size_t size) {
        size_t n = strlen(unit);

        if (!strneq(unit, "session-", 8) || !has_suffix(unit, n, ".scope"))
                return -ENXIO;
        unit += 8;
        n -= 8 + 6;
        if (n == 0 || strspn(unit, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789") != n)
                return -ENXIO;
        if (n >= size)
                return -ENOBUFS;
        memcpy(buf, unit, n);
        buf[n] = '\0';
        return 0;
}

/* Whether the comma-separated list has item. */
static bool list_has(const char *list, const char *item) {
        size_t k = strlen(item);

        for (const char *p = list;;) {
                size_t n = strcspn(p, ",");

                if (n == k && strneq(p, item, k))
                        return true;
                if (p[n] == '\0')
                        return false;
                p += n + 1;
        }
}

int cgroup_systemd_path(char *text, bool unified, const char **ret) {
        char *line = text, *next;

        for (; line && *line; line = next) {
                char *controllers, *path;

                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                /* "ID:CONTROLLERS:PATH" */
                controllers = strchr(line, ':');
                path = controllers ? strchr(controllers + 1, ':') : NULL;
                if (!path)
                        continue;
                *controllers++ = '\0';
                *path++ = '\0';
                if (path[0] != '/')
                        continue;
                if (unified ? streq(line, "0") && controllers[0] == '\0' : list_has(controllers, "name=systemd")) {
                        *ret = path;
                        return 0;
                }
        }
        return -ENOENT;
}

void cgroup_root_of_init(char *path) {
        static const char *const suffixes[] = { "/init.scope", "/system.slice", "/system" };
        size_t n = strlen(path);

        for (size_t i = 0; i < ELEMENTSOF(suffixes); i++)
                if (has_suffix(path, n, suffixes[i])) {
                        path[n - strlen(suffixes[i])] = '\0';
                        return;
                }
}

const char *cgroup_below_root(const char *path, const char *root) {
        size_t n = strlen(root);

        while (n > 0 && root[n - 1] == '/')
                n--;
        if (n == 0 || !strneq(path, root, n))
                return path;
        if (path[n] == '\0')
                return "/";
        return path[n] == '/' ? path + n : path;
}
