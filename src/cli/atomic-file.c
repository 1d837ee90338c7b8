/* SPDX-License-Identifier: MIT */
/* Files written whole or not at all (unit drop-ins, metrics for a text
 * file collector). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic-file.h"
#include "log.h"

FILE *atomic_file_open(const char *path, char *tmp, size_t tmp_size) {
        const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
        int fd, n;
        FILE *f;

        /* A name of its own beside path, so that two writers at once each
         * put a whole file in place; hidden, and not ending like path, so
         * that readers of a directory (systemd's *.conf, node_exporter's
         * *.prom) skip it. */
        n = snprintf(tmp, tmp_size, "%.*s.%s.XXXXXX", (int) (base - path), path, base);
        if (n < 0 || (size_t) n >= tmp_size) {
                log_error("Cannot write %s: path too long.", path);
                return NULL;
        }
        fd = mkostemp(tmp, O_CLOEXEC);
        if (fd < 0) {
                log_error_errno(errno, "Cannot write %s: %m", tmp);
                return NULL;
        }
        (void) fchmod(fd, 0644);        /* whatever the umask */
        f = fdopen(fd, "w");
        if (!f) {
                log_error_errno(errno, "Cannot write %s: %m", tmp);
                close(fd);
                (void) unlink(tmp);
        }
        return f;
}

int atomic_file_commit(FILE *f, const char *tmp, const char *path) {
        const char *slash = strrchr(path, '/');
        char dir[PATH_MAX];
        int dfd;
        /* On disk before it has the name: after a crash, the old file or
         * the new one, never a short one. */
        bool ok = fflush(f) == 0 && fsync(fileno(f)) >= 0;

        if (fclose(f) != 0)
                ok = false;
        if (!ok || rename(tmp, path) < 0) {
                int r = log_error_errno(errno, "Cannot write %s: %m", path);

                (void) unlink(tmp);
                return r;
        }
        /* … and the rename too. */
        snprintf(dir, sizeof(dir), "%.*s", slash ? (int) (slash - path) + 1 : 1, slash ? path : ".");
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
                (void) fsync(dfd);
                close(dfd);
        }
        return 0;
}
