/* SPDX-License-Identifier: MIT */
/* What `fleetsem reboot` keeps for --done: a root-owned file in its state
 * directory (reboot.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "log.h"
#include "macro.h"
#include "reboot.h"

static int state_path(const Reboot *rb, char *buf, size_t size) {
        int k = snprintf(buf, size, "%s/reboot-%s", rb->state_dir, rb->name);

        return k < 0 || (size_t) k >= size ? -ENAMETOOLONG : 0;
}

/* "group NAME SLOTS" lines, "lease NAME ID" of each name taken, "health
 * CMD", "failed UNIT" of each unit failed before the reboot; written
 * whole: it must be on disk before the reboot. */
int state_write(const Reboot *rb) {
        char path[PATH_MAX], tmp[PATH_MAX + 16];
        FILE *f;
        int r;

        r = state_path(rb, path, sizeof(path));
        if (r < 0)
                return log_error_errno(-r, "State directory %s too long.", rb->state_dir);
        if (mkdir(rb->state_dir, 0755) < 0 && errno != EEXIST)
                return log_error_errno(errno, "Failed to make %s: %m", rb->state_dir);
        f = atomic_file_open(path, tmp, sizeof(tmp));
        if (!f)
                return -EIO;
        (void) fchmod(fileno(f), 0600);
        for (size_t i = 0; i < rb->n_groups; i++)
                fprintf(f, "group %s %" PRIu32 "\n", rb->groups[i].name, rb->groups[i].slots);
        for (size_t i = 0; i < rb->n_groups; i++)
                if (rb->groups[i].lease[0])
                        fprintf(f, "lease %s %s\n", rb->groups[i].name, rb->groups[i].lease);
        if (rb->lease[0])
                fprintf(f, "lease %s %s\n", rb->name, rb->lease);
        if (rb->health)
                fprintf(f, "health %s\n", rb->health);
        for (size_t i = 0; i < rb->failed.n; i++)
                fprintf(f, "failed %s\n", rb->failed.names[i]);
        return atomic_file_commit(f, tmp, path);
}

/* The lease buffer of name, one of rb's (NULL: none). */
static char *lease_of(Reboot *rb, const char *name) {
        if (streq(name, rb->name))
                return rb->lease;
        for (size_t i = 0; i < rb->n_groups; i++)
                if (streq(rb->groups[i].name, name))
                        return rb->groups[i].lease;
        return NULL;
}

/* A "lease NAME ID" line's rest, into rb. */
static void state_read_lease(Reboot *rb, const char *rest) {
        char name[NAME_MAX_LEN + 1], id[LEASE_ID_LEN + 2], *lease;
        int k = 0;

        if (sscanf(rest, "%200s %33s%n", name, id, &k) != 2 || rest[k] != '\0' || !name_is_valid(name) ||
            !lease_id_is_valid(id))
                return;
        lease = lease_of(rb, name);
        if (lease)
                memcpy(lease, id, LEASE_ID_LEN + 1);    /* (valid: LEASE_ID_LEN bytes) */
}

/* Reads the state into rb (groups, their leases, the failed units, and
 * the health command into health unless one was given): only a regular
 * file of root's that nobody else may write, for its command runs as
 * root. 0 (none is fine too), <0. */
int state_read(Reboot *rb, char *health, size_t health_size) {
        char path[PATH_MAX];
        _cleanup_free_ char *data = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        ssize_t n;
        int r;

        r = state_path(rb, path, sizeof(path));
        if (r < 0)
                return log_error_errno(-r, "State directory %s too long.", rb->state_dir);
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 && errno == ENOENT)
                return 0;
        if (fd < 0)
                return log_error_errno(errno, "Failed to open %s: %m", path);
        if (fstat(fd, &st) < 0)
                return log_error_errno(errno, "Failed to stat %s: %m", path);
        if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 0022))
                return log_error_errno(EPERM, "%s is not a file of root's that only root may write; ignoring it.",
                                       path);
        data = malloc(STATE_MAX + 1);
        if (!data)
                return log_error_errno(ENOMEM, "Out of memory.");
        n = read(fd, data, STATE_MAX);
        if (n < 0)
                return log_error_errno(errno, "Failed to read %s: %m", path);
        data[n] = '\0';
        for (char *line = data, *next; line && *line; line = next) {
                next = strchr(line, '\n');
                if (next)
                        *next++ = '\0';
                if (strneq(line, "health ", 7)) {
                        if (!rb->health)
                                snprintf(health, health_size, "%s", line + 7);
                } else if (strneq(line, "lease ", 6))
                        state_read_lease(rb, line + 6);
                else if (strneq(line, "failed ", 7))
                        (void) failed_units_add(&rb->failed, line + 7);
                else if (strneq(line, "group ", 6) && rb->n_groups < GROUPS_MAX) {
                        char name[NAME_MAX_LEN + 1];
                        unsigned slots;
                        int k = 0;

                        if (sscanf(line + 6, "%200s %u%n", name, &slots, &k) == 2 && line[6 + k] == '\0' &&
                            name_is_valid(name)) {
                                bool dup = false;

                                for (size_t i = 0; i < rb->n_groups; i++)
                                        dup = dup || streq(rb->groups[i].name, name);
                                if (!dup) {
                                        snprintf(rb->groups[rb->n_groups].name, sizeof(rb->groups[0].name), "%s", name);
                                        rb->groups[rb->n_groups++].slots = slots;
                                }
                        }
                }
        }
        return 0;
}

void state_remove(const Reboot *rb) {
        char path[PATH_MAX];

        if (state_path(rb, path, sizeof(path)) >= 0 && unlink(path) < 0 && errno != ENOENT)
                log_warning_errno(errno, "Failed to remove %s: %m", path);
}
