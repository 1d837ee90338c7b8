/* SPDX-License-Identifier: MIT */
/* The agent's parsers of /proc (src/agent/host/terminal.c) against what this
 * kernel writes: /proc/PID/stat of every process there is, this process'
 * status and a child of its own in its list of children; and lines the
 * kernel does not write, refused. Then terminal_tell() on a child of its
 * own: told on the pseudo-terminal the child has, nothing without one. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "agent.h"
#include "tap.h"

static int parse(const char *line, ProcStat *st) {
        char buf[1024];

        snprintf(buf, sizeof(buf), "%s", line);
        return proc_stat_parse(buf, st);
}

static void test_every_process(void) {
        unsigned seen = 0, parsed = 0;
        struct dirent *e;
        DIR *d = opendir("/proc");

        CHECK(d, "/proc can be listed");
        if (!d)
                return;
        while ((e = readdir(d))) {
                ProcStat st;
                uint64_t pid;
                int r;

                if (parse_uint64(e->d_name, 1, INT32_MAX, &pid) < 0)
                        continue;
                r = proc_stat_read((pid_t) pid, &st);
                if (r == -ENOENT || r == -ESRCH)
                        continue;       /* gone meanwhile */
                seen++;
                if (r == 0 && st.ppid >= 0)
                        parsed++;
                else
                        printf("# /proc/%s/stat: %d\n", e->d_name, r);
        }
        closedir(d);
        CHECK(seen > 1 && parsed == seen, "every process' stat parses (%u of %u)", parsed, seen);
}

static void test_self(void) {
        ProcStat st;
        uid_t uid = (uid_t) -1;
        char buf[4096];
        FILE *f;
        size_t k;

        CHECK_INT(proc_stat_read(getpid(), &st), 0, "this process' stat");
        CHECK_INT(st.ppid, getppid(), "... its parent");
        f = fopen("/proc/self/status", "re");
        k = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        if (f)
                fclose(f);
        buf[k] = '\0';
        CHECK_INT(proc_status_uid_parse(buf, &uid), 0, "this process' status");
        CHECK_INT(uid, getuid(), "... its real uid");
}

static void test_children(void) {
        char path[64], buf[512] = "";
        pid_t child, pids[4] = {};
        size_t n = 0;
        FILE *f;

        child = fork();
        if (child == 0) {
                pause();
                _exit(0);
        }
        CHECK(child > 0, "a child");
        if (child <= 0)
                return;
        snprintf(path, sizeof(path), "/proc/%i/task/%i/children", getpid(), getpid());
        f = fopen(path, "re");
        if (f) {
                n = fread(buf, 1, sizeof(buf) - 1, f);
                buf[n] = '\0';
                fclose(f);
        }
        n = proc_children_parse(buf, pids, 4);
        CHECK(n == 1 && pids[0] == child, "its list of children names it (\"%s\")", buf);
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
}

static void test_refused(void) {
        /* Each a change of one field of GOOD, which parses. */
#define GOOD "1 (x) S 1 1 1 0 1 0 0 0 0 0 0 0 0 0 20 0 1 0 5\n"
        static const char *const bad[] = {
                "",
                "1 (x S 1 1 1 0 1 0 0 0 0 0 0 0 0 0 20 0 1 0 5\n",                     /* no ")" */
                "1 (x) S 1 1 1 0 1 0 0 0 0 0 0 0 0 0 20 0 1 0\n",                       /* no STARTTIME */
                "1 (x) S 4294967296 1 1 0 1 0 0 0 0 0 0 0 0 0 20 0 1 0 5\n",            /* PPID over a pid */
                "1 (x) S -1 1 1 0 1 0 0 0 0 0 0 0 0 0 20 0 1 0 5\n",                    /* a negative PPID */
                "1 (x) S 1x 1 1 0 1 0 0 0 0 0 0 0 0 0 20 0 1 0 5\n",                    /* PPID not whole */
                "1 (x) S 1 1 1 2147483648 1 0 0 0 0 0 0 0 0 0 20 0 1 0 5\n",            /* TTY_NR over an int */
                "1 (x) S 1 1 1 - 1 0 0 0 0 0 0 0 0 0 20 0 1 0 5\n",                     /* TTY_NR "-" */
                "1 (x) S 1 1 1 0 1 0 0 0 0 0 0 0 0 0 20 0 1 0 18446744073709551616\n",  /* STARTTIME over 64 bits */
                "1 (x) S 1 1 1 0 1 0 0 0 0 0 0 0 0 0 20 0 1 0 5z\n",                    /* STARTTIME not whole */
        };
        ProcStat st = { .ppid = 77 };
        uid_t uid = 77;
        pid_t pids[4] = {};

        CHECK_INT(parse(GOOD, &st), 0, "a line as the kernel writes it parses");
        st.ppid = 77;
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                int r = parse(bad[i], &st);

                CHECK(r == -EBADMSG, "refused: \"%.*s\"", (int) strcspn(bad[i], "\n"), bad[i]);
        }
        CHECK_INT(st.ppid, 77, "... the result untouched");
        CHECK_INT(parse("1 (a) b) c) S 7 1 1 -2147483648 1 0 0 0 0 0 0 0 0 0 20 0 1 0 5\n", &st), 0,
                  "a name with \") \" and the lowest TTY_NR parse");
        CHECK(streq(st.comm, "a) b) c") && st.ppid == 7 && st.tty == 0x80000000u && st.start == 5,
              "... as the kernel meant them");
        CHECK_INT(proc_status_uid_parse("Name:\tx\nUid:\t4294967295\t0\t0\t0\n", &uid), -EBADMSG,
                  "status: uid -1 refused");
        CHECK_INT(proc_status_uid_parse("Name:\tx\nXUid:\t5\t0\t0\t0\nUid:\t5z\t0\t0\t0\n", &uid), -EBADMSG,
                  "status: only a line that starts Uid:, and its number whole");
        CHECK_INT(proc_status_uid_parse("Name:\tUid:\t5\n", &uid), -EBADMSG, "status: no Uid line");
        CHECK_INT(uid, 77, "... the result untouched");
        CHECK_INT(proc_children_parse("12 0 13 ", pids, 4), 1, "children: the list ends at pid 0");
        CHECK_INT(proc_children_parse("12 -13 ", pids, 4), 1, "... at a negative one");
        CHECK_INT(proc_children_parse("12 2147483648 ", pids, 4), 1, "... at one over a pid");
        CHECK_INT(proc_children_parse("12 13 14 15 16 ", pids, 4), 4, "... and at n");
}

/* A child in a session of its own, on the pseudo-terminal whose other end
 * is *ret_master (-EBADF: none); it waits for SIGKILL. */
static pid_t session_child(int *ret_master) {
        int master = -EBADF, ready[2];
        const char *slave = NULL;
        pid_t pid;
        char c;

        if (pipe2(ready, O_CLOEXEC) < 0)
                return -1;
        if (ret_master) {
                master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
                if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0 || !(slave = ptsname(master)))
                        return -1;
                /* It takes messages (mesg y), whatever devpts' mode= made it. */
                if (chmod(slave, 0620) < 0)
                        return -1;
        }
        pid = fork();
        if (pid == 0) {
                int fd;

                setsid();
                if (slave) {
                        fd = open(slave, O_RDWR);       /* its controlling terminal, as login's */
                        if (fd < 0 || ioctl(fd, TIOCSCTTY, 0) < 0 || dup2(fd, 0) < 0)
                                _exit(1);
                }
                (void) !write(ready[1], "r", 1);
                pause();
                _exit(0);
        }
        close(ready[1]);
        if (pid < 0 || read(ready[0], &c, 1) != 1)
                pid = -1;
        close(ready[0]);
        if (ret_master)
                *ret_master = master;
        return pid;
}

static void test_tell(void) {
        char path[PATH_MAX], got[256] = "";
        int master = -EBADF;
        ProcStat st;
        pid_t pid;
        ssize_t k;

        pid = session_child(&master);
        CHECK(pid > 0 && proc_stat_read(pid, &st) == 0, "a child on a pseudo-terminal of its own");
        if (pid <= 0)
                return;
        CHECK_INT(terminal_tell(pid, st.start + 1, "x", path, sizeof(path)), -ESRCH,
                  "another start time: not the process that asked, not told");
        chmod(ptsname(master), 0600);
        CHECK_INT(terminal_tell(pid, st.start, "x", path, sizeof(path)), -EACCES, "mesg n: not told");
        chmod(ptsname(master), 0620);
        CHECK_INT(terminal_tell(pid, st.start, "slot lost", path, sizeof(path)), 0, "mesg y: told");
        CHECK_STR(path, ptsname(master), "... on its terminal");
        if (poll(&(struct pollfd) { .fd = master, .events = POLLIN }, 1, 5000) == 1 &&
            (k = read(master, got, sizeof(got) - 1)) > 0)
                got[k] = '\0';
        CHECK_STR(got, "slot lost", "... which shows the text");
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close(master);

        pid = session_child(NULL);
        CHECK(pid > 0 && proc_stat_read(pid, &st) == 0, "a child without a terminal");
        if (pid <= 0)
                return;
        CHECK_INT(terminal_tell(pid, st.start, "x", path, sizeof(path)), -ENXIO, "... is told nothing (-ENXIO)");
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
}

int main(void) {
        test_every_process();
        test_self();
        test_children();
        test_refused();
        test_tell();
        return tap_done();
}
