/* SPDX-License-Identifier: MIT */
/* This host's own record of its leases (lease-record.h): a file a lease. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lease-record.h"
#include "macro.h"

int lease_record_open(const char *dir, const char *ns, const char *host, int *ret_fd) {
        char path[4096];
        int fd, n;

        n = snprintf(path, sizeof(path), "%s/%s.%s.leases", dir, ns, host);
        if (n < 0 || (size_t) n >= sizeof(path))
                return -ENAMETOOLONG;
        if (mkdir(path, 0700) < 0 && errno != EEXIST)
                return -errno;
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        *ret_fd = fd;
        return 0;
}

/* A time for utimensat(): at, or (USEC_INFINITY) now. */
static struct timespec record_time(usec_t at) {
        if (at == USEC_INFINITY)
                return (struct timespec) { .tv_nsec = UTIME_NOW };
        return (struct timespec) { .tv_sec = (time_t) (at / USEC_PER_SEC),
                                   .tv_nsec = (long) (at % USEC_PER_SEC) * 1000 };
}

/* The temporary file tmp in dir_fd holding value, modified at mtime, on
 * disk when durable. */
static int record_write_tmp(int dir_fd, const char *tmp, const char *value, usec_t mtime, bool durable) {
        _cleanup_close_ int fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
        struct timespec times[2] = { { .tv_nsec = UTIME_OMIT }, record_time(mtime) };
        size_t len = strlen(value);
        ssize_t k;

        if (fd < 0)
                return -errno;
        k = write(fd, value, len);
        if (k < 0)
                return -errno;
        if ((size_t) k != len)
                return -EIO;
        if (mtime != USEC_INFINITY && futimens(fd, times) < 0)
                return -errno;
        if (durable && fsync(fd) < 0)
                return -errno;
        return 0;
}

int lease_record_touch(int dir_fd, const char *id, usec_t mtime) {
        struct timespec times[2] = { { .tv_nsec = UTIME_OMIT }, record_time(mtime) };

        if (!lease_id_is_valid(id))
                return -EINVAL;
        return utimensat(dir_fd, id, times, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

int lease_record_put(int dir_fd, const char *id, const char *value, usec_t mtime, bool durable) {
        char tmp[LEASE_ID_LEN + 8];
        size_t len = strlen(value);
        int r;

        if (!lease_id_is_valid(id) || len >= LEASE_RECORD_VALUE_MAX || strchr(value, '\n'))
                return -EINVAL;
        snprintf(tmp, sizeof(tmp), ".%s", id);
        r = record_write_tmp(dir_fd, tmp, value, mtime, durable);
        if (r >= 0 && renameat(dir_fd, tmp, dir_fd, id) < 0)
                r = -errno;
        if (r < 0) {
                (void) unlinkat(dir_fd, tmp, 0);
                return r;
        }
        /* The rename itself, on disk. */
        if (durable && fsync(dir_fd) < 0)
                return -errno;
        return 0;
}

bool lease_record_exists(int dir_fd, const char *id) {
        return dir_fd >= 0 && lease_id_is_valid(id) && faccessat(dir_fd, id, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

int lease_record_drop(int dir_fd, const char *id, bool durable) {
        if (!lease_id_is_valid(id))
                return -EINVAL;
        if (unlinkat(dir_fd, id, 0) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (durable && fsync(dir_fd) < 0)
                return -errno;
        return 1;
}

/* The entry of name, one line without NUL of at most
 * LEASE_RECORD_VALUE_MAX - 1 bytes, into value, its modification time
 * into *ret_mtime if asked; -EBADMSG otherwise. */
static int record_read(int dir_fd, const char *name, char value[static LEASE_RECORD_VALUE_MAX], usec_t *ret_mtime) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        struct stat st;
        ssize_t k;

        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADMSG;
        k = read(fd, value, LEASE_RECORD_VALUE_MAX);
        if (k < 0)
                return -errno;
        if (k == 0 || k >= LEASE_RECORD_VALUE_MAX || memchr(value, '\0', (size_t) k) || memchr(value, '\n', (size_t) k))
                return -EBADMSG;
        value[k] = '\0';
        if (ret_mtime)
                *ret_mtime = (usec_t) st.st_mtim.tv_sec * USEC_PER_SEC + (usec_t) st.st_mtim.tv_nsec / 1000;
        return 0;
}

int lease_record_get(int dir_fd, const char *id, char value[static LEASE_RECORD_VALUE_MAX], usec_t *ret_mtime) {
        if (!lease_id_is_valid(id))
                return -EINVAL;
        return record_read(dir_fd, id, value, ret_mtime);
}

/* (Read whole before any callback, which may write or remove entries.) */
int lease_record_foreach(int dir_fd, void (*cb)(const char *id, const char *value, void *userdata), void *userdata) {
        typedef struct Entry {
                char id[LEASE_ID_LEN + 1];
                char value[LEASE_RECORD_VALUE_MAX];
        } Entry;
        _cleanup_free_ Entry *entries = NULL;
        size_t n = 0, allocated = 0;
        int fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3), r;
        struct dirent *de;
        DIR *d;

        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return -errno;
        }
        rewinddir(d);
        while ((de = readdir(d))) {
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (n == allocated) {
                        size_t more = allocated ? 2 * allocated : 16;
                        Entry *e = reallocarray(entries, more, sizeof(Entry));

                        if (!e) {
                                closedir(d);
                                return -ENOMEM;
                        }
                        entries = e;
                        allocated = more;
                }
                /* A temporary file left by a crash, or anything else: gone
                 * (one that cannot be read now stays for the next time). */
                r = lease_id_is_valid(de->d_name) ? record_read(dir_fd, de->d_name, entries[n].value, NULL) : -EBADMSG;
                if (r == -EBADMSG)
                        (void) unlinkat(dir_fd, de->d_name, 0);
                if (r < 0)
                        continue;
                memcpy(entries[n].id, de->d_name, sizeof(entries[n].id));    /* a lease id: LEASE_ID_LEN long */
                n++;
        }
        closedir(d);
        for (size_t i = 0; i < n; i++)
                cb(entries[i].id, entries[i].value, userdata);
        return 0;
}
