/* SPDX-License-Identifier: MIT */
/* The "key = value" file format of fleetsem.conf and of the PAM module's
 * config=, with errors that name FILE:LINE; and the secret files next to
 * it. Nothing here knows a key. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
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

int conf_parse_file(const char *path, conf_line_cb cb, void *userdata, char **ret_error) {
        _cleanup_(fclosep) FILE *f = NULL;
        char line[CONF_LINE_MAX + 2];
        unsigned lineno = 0;
        size_t total = 0;
        struct stat st;
        long pos = 0;

        f = fopen(path, "re");
        if (!f) {
                int r = -errno;

                return conf_error(ret_error, r, "%s: %s", path, strerror(-r));
        }
        if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode))
                return conf_error(ret_error, -EINVAL, "%s: not a regular file", path);

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
        struct stat st;
        ssize_t n;
        char *s;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                int r = -errno;

                return conf_error(ret_error, r, "Failed to open %s file %s: %s", what, path, strerror(-r));
        }
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return conf_error(ret_error, -EINVAL, "%s file %s is not a regular file", what, path);
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
