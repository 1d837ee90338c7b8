/* SPDX-License-Identifier: MIT */
/* The "key = value" file format of fleetsem.conf and of the PAM module's
 * config=, with errors that name FILE:LINE; and the secret files next to
 * it. Nothing here knows a key. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "conf-file.h"

#define CONF_LINE_MAX 4096
#define CONF_FILE_MAX (1024 * 1024)

DEFINE_TRIVIAL_CLEANUP_FUNC(FILE *, fclose);

int conf_error(char **ret_error, int error, const char *format, ...) {
        va_list ap;

        va_start(ap, format);
        if (vasprintf(ret_error, format, ap) < 0)
                *ret_error = NULL;
        va_end(ap);
        return error;
}

static char *strip(char *s) {
        char *e;

        while (isspace((unsigned char) *s))
                s++;
        e = s + strlen(s);
        while (e > s && isspace((unsigned char) e[-1]))
                *--e = '\0';
        return s;
}

/* Who may own what the agent trusts: root, or the user this process runs
 * as (the agent's dedicated user, or a test's). */
static bool owner_is_trusted(uid_t uid) {
        return uid == 0 || uid == geteuid();
}

static const char *also_trusted(char *buf, size_t size) {
        if (geteuid() == 0)
                return "";
        snprintf(buf, size, " or uid " UID_FMT " (this process)", geteuid());
        return buf;
}

/* A directory a trusted file is in: owned by a trusted user, and writable
 * by no one else unless sticky (then only a file's owner may rename or
 * remove it, as in /tmp). */
static int check_dir(const struct stat *st, const char *dir, const char *path, const char *what,
                     char **ret_error) {
        char also[64];

        if (owner_is_trusted(st->st_uid) && (!(st->st_mode & 0022) || (st->st_mode & S_ISVTX)))
                return 0;
        return conf_error(ret_error, -EPERM,
                          "%s: the directory %s of the %s is owned by uid " UID_FMT " with mode %04o; it must be owned "
                          "by root%s and writable by no one else (chown root %s; chmod go-w %s), or move the file",
                          path, dir, what, st->st_uid, (unsigned) st->st_mode & 07777, also_trusted(also, sizeof(also)),
                          dir, dir);
}

/* The directory part of path ("." for none), in buf. */
static const char *dir_of(const char *path, char *buf, size_t size) {
        const char *slash = strrchr(path, '/');

        if (!slash)
                return ".";
        if (slash == path)
                return "/";
        snprintf(buf, size, "%.*s", (int) (slash - path), path);
        return buf;
}

int conf_open_trusted(const char *path, const char *what, char **ret_error) {
        _cleanup_free_ char *real = NULL;
        _cleanup_close_ int dir_fd = -EBADF, fd = -EBADF;
        char buf[PATH_MAX], also[64];
        const char *dir, *base;
        struct stat st;
        int r;

        /* The file the path leads to, and the directory it is in: the
         * file is opened from that directory, its last step not followed
         * again, so what is checked is what is read. */
        real = realpath(path, NULL);
        if (!real) {
                r = -errno;
                return conf_error(ret_error, r, "%s: %s", path, strerror(-r));
        }
        dir = dir_of(real, buf, sizeof(buf));
        /* O_PATH: a directory the agent's user may search but not list
         * (mode 0711) serves as well. */
        dir_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dir_fd < 0 || fstat(dir_fd, &st) < 0) {
                r = -errno;
                return conf_error(ret_error, r, "%s: directory %s: %s", path, dir, strerror(-r));
        }
        r = check_dir(&st, dir, path, what, ret_error);
        if (r < 0)
                return r;
        /* A symbolic link is replaced by whoever may write its directory. */
        if (lstat(path, &st) < 0) {
                r = -errno;
                return conf_error(ret_error, r, "%s: %s", path, strerror(-r));
        }
        if (S_ISLNK(st.st_mode)) {
                char link_buf[PATH_MAX];
                const char *link_dir = dir_of(path, link_buf, sizeof(link_buf));

                if (stat(link_dir, &st) < 0) {
                        r = -errno;
                        return conf_error(ret_error, r, "%s: directory %s: %s", path, link_dir, strerror(-r));
                }
                r = check_dir(&st, link_dir, path, what, ret_error);
                if (r < 0)
                        return r;
        }

        base = real + strlen(dir) + (streq(dir, "/") ? 0 : 1);
        /* O_NONBLOCK: a FIFO in its place is refused below, not waited on. */
        fd = openat(dir_fd, base, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0) {
                r = -errno;
                return conf_error(ret_error, r, "%s: %s", path, strerror(-r));
        }
        if (fstat(fd, &st) < 0) {
                r = -errno;
                return conf_error(ret_error, r, "%s: %s", path, strerror(-r));
        }
        if (!S_ISREG(st.st_mode))
                return conf_error(ret_error, -EINVAL, "%s: not a regular file", path);
        if (!owner_is_trusted(st.st_uid) || (st.st_mode & 0022))
                return conf_error(ret_error, -EPERM,
                                  "%s: the %s%s%s is owned by uid " UID_FMT " with mode %04o; it must be owned by root%s "
                                  "and writable by no one else (chown root %s; chmod go-w %s)",
                                  path, what, streq(real, path) ? "" : " ", streq(real, path) ? "" : real, st.st_uid,
                                  (unsigned) st.st_mode & 07777, also_trusted(also, sizeof(also)), real, real);
        return TAKE_FD(fd);
}

int conf_parse_file(const char *path, conf_line_cb cb, void *userdata, char **ret_error) {
        _cleanup_(fclosep) FILE *f = NULL;
        _cleanup_close_ int fd = -EBADF;
        char line[CONF_LINE_MAX + 2];
        unsigned lineno = 0;
        size_t total = 0;
        long pos = 0;

        fd = conf_open_trusted(path, "configuration file", ret_error);
        if (fd < 0)
                return fd;
        f = fdopen(fd, "re");
        if (!f) {
                int r = -errno;

                return conf_error(ret_error, r, "%s: %s", path, strerror(-r));
        }
        TAKE_FD(fd);

        while (fgets(line, sizeof(line), f)) {
                const char *why = NULL;
                char *key, *value, *eq;
                size_t n = strlen(line);
                long start = pos;

                lineno++;
                total += n;
                if (total > CONF_FILE_MAX)
                        return conf_error(ret_error, -EFBIG, "%s:%u: file too large", path, lineno);
                /* fgets() reads on past a NUL byte, and strlen() stops at
                 * it: what the file position moved by tells them apart. */
                pos = ftell(f);
                if (pos < 0 || (size_t) (pos - start) != n)
                        return conf_error(ret_error, -EINVAL, "%s:%u: NUL byte in line", path, lineno);
                if (n > CONF_LINE_MAX || (n > 0 && line[n - 1] != '\n' && !feof(f)))
                        return conf_error(ret_error, -EINVAL, "%s:%u: line too long", path, lineno);

                key = strip(line);
                if (*key == '\0' || *key == '#')
                        continue;
                eq = strchr(key, '=');
                if (!eq)
                        return conf_error(ret_error, -EINVAL, "%s:%u: expected \"key = value\"", path, lineno);
                *eq = '\0';
                key = strip(key);
                value = strip(eq + 1);
                if (cb(key, value, userdata, &why) < 0)
                        return conf_error(ret_error, -EINVAL, "%s:%u: %s: %s", path, lineno, key,
                                          why ?: "invalid value");
        }
        if (ferror(f))
                return conf_error(ret_error, -EIO, "%s: read error", path);
        return 0;
}

int conf_read_secret_file(const char *path, const char *what, char **ret, char **ret_error) {
        _cleanup_close_ int fd = -EBADF;
        char buf[CONF_SECRET_MAX + 2];
        char what_file[128];
        struct stat st;
        ssize_t n;
        char *s;

        snprintf(what_file, sizeof(what_file), "%s file", what);
        fd = conf_open_trusted(path, what_file, ret_error);
        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0) {
                int r = -errno;

                return conf_error(ret_error, r, "Failed to read %s file %s: %s", what, path, strerror(-r));
        }
        if (st.st_mode & 0007)
                return conf_error(ret_error, -EPERM, "%s file %s is readable by others; chmod o-rwx it", what, path);
        n = read(fd, buf, sizeof(buf) - 1);
        if (n < 0) {
                int r = -errno;

                return conf_error(ret_error, r, "Failed to read %s file %s: %s", what, path, strerror(-r));
        }
        buf[n] = '\0';
        if ((size_t) n > CONF_SECRET_MAX || strlen(buf) != (size_t) n) {
                explicit_bzero(buf, sizeof(buf));
                return conf_error(ret_error, -EINVAL, "%s file %s must hold one line of at most %d bytes", what, path,
                                  CONF_SECRET_MAX);
        }
        buf[strcspn(buf, "\r\n")] = '\0';
        s = strdup(buf);
        explicit_bzero(buf, sizeof(buf));
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}
