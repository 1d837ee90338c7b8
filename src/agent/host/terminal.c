/* SPDX-License-Identifier: MIT */
/* What /proc says of the process that asked (its name, terminal and start
 * time), and telling that process on its terminal that its slot is lost
 * when it no longer listens for LOST: a login session's (pam_fleetsem
 * keeps the anchor with the session, not the connection to the agent).
 *
 * The process is the one that asked, known by its pid and its start time
 * (a pid comes back; the pair does not). Its terminal is the kernel's
 * controlling terminal of it or of its first descendant that has one
 * (sshd opens the session in a process with no terminal of its own;
 * logind learns the session's terminal only later, if at all). Nothing of
 * the request names the terminal, and only a terminal is
 * written to: a character device that isatty() accepts, opened without
 * becoming anyone's controlling terminal and without blocking. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "agent.h"
#include "log.h"
#include "macro.h"

/* The word of n bytes at p as a number in [0, max], whole: digits only. */
static int proc_number(const char *p, size_t n, uint64_t max, uint64_t *ret) {
        char word[24];

        if (n >= sizeof(word))
                return -EBADMSG;
        memcpy(word, p, n);
        word[n] = '\0';
        return parse_uint64(word, 0, max, ret) < 0 ? -EBADMSG : 0;
}

int proc_stat_parse(char *buf, ProcStat *ret) {
        char *open_paren, *close_paren, *p;
        ProcStat st = {};

        /* "PID (COMM) STATE PPID PGRP SESSION TTY_NR …", COMM may hold
         * anything, ")" and spaces too: it ends at the last ")". */
        open_paren = strchr(buf, '(');
        close_paren = strrchr(buf, ')');
        if (!open_paren || !close_paren || close_paren < open_paren)
                return -EBADMSG;
        *close_paren = '\0';
        snprintf(st.comm, sizeof(st.comm), "%s", open_paren + 1);
        st.comm[strcspn(st.comm, "\n")] = '\0';
        /* Fields counted from STATE (3 in proc(5)), each a word: PPID is 4
         * (a pid), TTY_NR 7 (the device as the kernel encodes it in 32
         * bits, printed as an int: "-" for those of the top bit),
         * STARTTIME 22 (ticks); each whole and in range, or the line is not
         * one the kernel wrote. */
        p = close_paren + 1;
        for (int field = 3; field <= 22; field++) {
                uint64_t v;
                size_t n;
                bool neg;

                p += strspn(p, " ");
                n = strcspn(p, " \n");
                if (n == 0)
                        return -EBADMSG;
                neg = p[0] == '-';
                if (field == 4) {
                        if (proc_number(p, n, INT32_MAX, &v) < 0)
                                return -EBADMSG;
                        st.ppid = (pid_t) v;
                } else if (field == 7) {
                        if (proc_number(p + neg, n - neg, neg ? (uint64_t) INT32_MAX + 1 : INT32_MAX, &v) < 0)
                                return -EBADMSG;
                        st.tty = (dev_t) (uint32_t) (neg ? 0 - v : v);
                } else if (field == 22) {
                        if (proc_number(p, n, UINT64_MAX, &v) < 0)
                                return -EBADMSG;
                        st.start = v;
                }
                p += n;
        }
        *ret = st;
        return 0;
}

ssize_t proc_file_read(pid_t pid, const char *file, char *buf, size_t size) {
        char path[64];
        _cleanup_close_ int fd = -EBADF;
        ssize_t k;

        assert(size > 0);
        snprintf(path, sizeof(path), "/proc/%i/%s", pid, file);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        k = read(fd, buf, size - 1);
        if (k < 0)
                return -errno;
        buf[k] = '\0';
        return k;
}

int proc_stat_read(pid_t pid, ProcStat *ret) {
        char buf[1024];
        ssize_t k = proc_file_read(pid, "stat", buf, sizeof(buf));

        return k < 0 ? (int) k : proc_stat_parse(buf, ret);
}

int proc_status_uid_parse(const char *text, uid_t *ret) {
        for (const char *line = text; line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
                const char *p;
                uint64_t v;

                if (!strneq(line, "Uid:", 4))
                        continue;
                p = line + 4 + strspn(line + 4, "\t ");
                if (proc_number(p, strcspn(p, "\t \n"), UINT32_MAX - 1, &v) < 0)
                        return -EBADMSG;
                *ret = (uid_t) v;
                return 0;
        }
        return -EBADMSG;
}

/* The real uid of pid, from its status: who runs it, also in a set-uid
 * program (su). */
static int proc_real_uid(pid_t pid, uid_t *ret) {
        char buf[4096];
        /* The Uid line is among the first few hundred bytes. */
        ssize_t k = proc_file_read(pid, "status", buf, sizeof(buf));

        return k < 0 ? (int) k : proc_status_uid_parse(buf, ret);
}

/* A path of the terminal dev: one of the process' descriptors 0-2 that
 * is it (readable for root's own processes only: the agent may not trace
 * others), or as the kernel names pseudo-terminals. 0 when it found one. */
static int tty_path(pid_t pid, dev_t dev, char *buf, size_t size) {
        for (int fd = 0; fd <= 2; fd++) {
                char link[64], target[PATH_MAX];
                struct stat st;
                ssize_t k;

                snprintf(link, sizeof(link), "/proc/%i/fd/%i", pid, fd);
                k = readlink(link, target, sizeof(target) - 1);
                if (k <= 0)
                        continue;
                target[k] = '\0';
                if (strneq(target, "/dev/", 5) && stat(target, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == dev) {
                        snprintf(buf, size, "%s", target);
                        return 0;
                }
        }
        if (major(dev) >= 136 && major(dev) <= 143) {   /* Unix98 pseudo-terminals, devices.txt */
                snprintf(buf, size, "/dev/pts/%u", (major(dev) - 136) * 256 + minor(dev));
                return 0;
        }
        return -ENOENT;
}

size_t proc_children_parse(const char *text, pid_t *ret, size_t n) {
        const char *p = text;
        size_t k = 0;

        while (k < n) {
                size_t len;
                uint64_t v;

                p += strspn(p, " ");
                len = strcspn(p, " \n");
                if (proc_number(p, len, INT32_MAX, &v) < 0 || v == 0)
                        break;
                ret[k++] = (pid_t) v;
                p += len;
        }
        return k;
}

/* Up to n children of pid, from the kernel's list of them (its main
 * thread's: the login programs that open sessions have one). */
static size_t children_of(pid_t pid, pid_t *ret, size_t n) {
        char file[32], buf[512];

        snprintf(file, sizeof(file), "task/%i/children", pid);
        if (proc_file_read(pid, file, buf, sizeof(buf)) <= 0)
                return 0;
        return proc_children_parse(buf, ret, n);
}

#define TERMINAL_LOOK_MAX 32    /* processes looked at: the requester and its first descendants */

/* The terminal of pid's session: pid's controlling terminal, or else the
 * first one among its descendants, breadth first (sshd opens the session
 * in a process without one; the shell it starts for the user has the
 * session's). A descendant can only have a terminal it could open, so
 * nothing is written where its owner could not write. On success buf has
 * the path and *ret_dev the device. */
static int terminal_of(pid_t pid, const ProcStat *st, char *buf, size_t size, dev_t *ret_dev, uid_t *ret_uid) {
        pid_t look[TERMINAL_LOOK_MAX], parent[TERMINAL_LOOK_MAX];
        size_t n = 1;

        look[0] = pid;
        parent[0] = st->ppid;
        for (size_t i = 0; i < n; i++) {
                ProcStat c;
                size_t k;

                if (i == 0)
                        c = *st;
                else if (proc_stat_read(look[i], &c) < 0 || c.ppid != parent[i])
                        continue;       /* gone, and maybe its pid another's */
                if (c.tty != 0) {
                        *ret_dev = c.tty;
                        snprintf(buf, size, "terminal %u:%u of pid %i", major(c.tty), minor(c.tty), look[i]);
                        if (proc_real_uid(look[i], ret_uid) < 0)
                                return -ESRCH;
                        return tty_path(look[i], c.tty, buf, size);
                }
                k = children_of(look[i], look + n, TERMINAL_LOOK_MAX - n);
                for (size_t j = n; j < n + k; j++)
                        parent[j] = look[i];
                n += k;
        }
        return -ENXIO;
}

/* path (or fd, when path is NULL): a terminal, dev, owned by owner, that
 * its group may write to. */
static int terminal_check(const char *path, int fd, dev_t dev, uid_t owner) {
        struct stat st;

        if ((path ? stat(path, &st) : fstat(fd, &st)) < 0)
                return -errno;
        if (!S_ISCHR(st.st_mode) || st.st_rdev != dev || (!path && !isatty(fd)))
                return -ENOTTY;
        if (st.st_uid != owner)
                return -EPERM;
        if (!(st.st_mode & S_IWGRP))
                return -EACCES;
        return 0;
}

int terminal_tell(pid_t pid, uint64_t start, const char *text, char *ret_path, size_t size) {
        _cleanup_close_ int fd = -EBADF;
        ProcStat now;
        dev_t dev = 0;
        uid_t owner = (uid_t) -1;
        size_t len = strlen(text);
        ssize_t k;
        int r;

        snprintf(ret_path, size, "the terminal of pid %i", pid);
        if (start == 0)
                return -ESRCH;
        r = proc_stat_read(pid, &now);
        if (r < 0)
                return r == -ENOENT ? -ESRCH : r;
        if (now.start != start)
                return -ESRCH;          /* gone, and the pid given to another */
        r = terminal_of(pid, &now, ret_path, size, &dev, &owner);
        if (r == -ENOENT)
                return -ENODEV;         /* one, with no device node here: a console under PrivateDevices= */
        if (r < 0)
                return r;               /* -ENXIO: none (a daemon's, ssh without a terminal) */
        /* Looked at before it is opened, and again once open (the same
         * device, the same owner). It must be the terminal of whoever
         * runs that process (a pseudo-terminal of a devpts mounted
         * elsewhere, a user namespace's, has the same number as another's
         * here), and take messages: mesg n (no group write) is kept, also
         * on root's terminals, which the agent owns. */
        r = terminal_check(ret_path, -EBADF, dev, owner);
        if (r < 0)
                return r;
        fd = open(ret_path, O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        r = terminal_check(NULL, fd, dev, owner);
        if (r < 0)
                return r;
        k = write(fd, text, len);
        if (k < 0)
                return -errno;
        return (size_t) k == len ? 0 : -EAGAIN;
}
