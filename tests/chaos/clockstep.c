/* Steps the wall clock of one process, as an NTP step on its host would,
 * without touching the machine's clock: LD_PRELOAD it with CLOCKSTEP_FILE
 * naming a file that holds an offset in milliseconds ("5000", "-5000").
 * The file is read on every call, so rewriting it steps the clock of the
 * running process at once. CLOCK_REALTIME (and its coarse variant),
 * gettimeofday() and time() move; CLOCK_MONOTONIC does not, as on a real
 * host. A file that holds "=MS" stops the wall clock at MS milliseconds
 * since the epoch instead, until it is rewritten: two processes given one
 * such file read the same time, to the microsecond (lua-batch-diff).
 *
 * Debian's libfaketime would do, but it hangs at start in any program
 * linked with jemalloc, redis-server among them (libfaketime issue #130):
 * jemalloc asks for the time while libfaketime is still looking up the
 * real functions. This shim never allocates and gets the real time from
 * the kernel directly. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static int offset_fd = -1;

__attribute__((constructor)) static void clockstep_init(void) {
        const char *f = getenv("CLOCKSTEP_FILE");

        if (f)
                offset_fd = open(f, O_RDONLY | O_CLOEXEC);
}

/* The offset in ms; *fixed: the file says "=MS", the time itself. */
static long long offset_ms(int *fixed) {
        char buf[32];
        ssize_t n;

        *fixed = 0;
        if (offset_fd < 0)
                return 0;
        n = pread(offset_fd, buf, sizeof(buf) - 1, 0);
        if (n <= 0)
                return 0;
        buf[n] = '\0';
        if (buf[0] == '=') {
                *fixed = 1;
                return strtoll(buf + 1, NULL, 10);
        }
        return strtoll(buf, NULL, 10);
}

static int real_clock_gettime(clockid_t id, struct timespec *ts) {
        return (int) syscall(SYS_clock_gettime, id, ts);
}

static void shift(struct timespec *ts) {
        int fixed;
        long long off = offset_ms(&fixed), ns;

        if (fixed && off >= 0) {
                ts->tv_sec = off / 1000;
                ts->tv_nsec = (off % 1000) * 1000000;
                return;
        }
        ns = (long long) ts->tv_nsec + (off % 1000) * 1000000;

        ts->tv_sec += off / 1000;
        while (ns < 0) {
                ns += 1000000000;
                ts->tv_sec--;
        }
        while (ns >= 1000000000) {
                ns -= 1000000000;
                ts->tv_sec++;
        }
        ts->tv_nsec = ns;
}

int clock_gettime(clockid_t id, struct timespec *ts) {
        int r = real_clock_gettime(id, ts);

        if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
                shift(ts);
        return r;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
        struct timespec ts;

        (void) tz;
        if (real_clock_gettime(CLOCK_REALTIME, &ts) < 0)
                return -1;
        shift(&ts);
        tv->tv_sec = ts.tv_sec;
        tv->tv_usec = ts.tv_nsec / 1000;
        return 0;
}

time_t time(time_t *t) {
        struct timespec ts;

        if (real_clock_gettime(CLOCK_REALTIME, &ts) < 0)
                return (time_t) -1;
        shift(&ts);
        if (t)
                *t = ts.tv_sec;
        return ts.tv_sec;
}
