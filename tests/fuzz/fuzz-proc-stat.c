/* SPDX-License-Identifier: MIT */
/* The agent's parsers of /proc: proc_stat_parse(), a line of /proc/PID/stat,
 * whose command name is the process' own choice (any bytes but NUL, up to
 * 15, ")", "(", spaces and newlines too); proc_status_uid_parse(), the real
 * uid of /proc/PID/status; proc_children_parse(), the pids of
 * /proc/PID/task/TID/children. Any input parses or is refused with -EBADMSG
 * (the children: a list of valid pids); the name it gives is a short line,
 * the parent a pid; a line built as the kernel builds it, with a name from
 * the input, gives back its parent, terminal, start time and name (up to its
 * first newline), and a status and a list of children built from the input
 * give back their uid and pids. */

#include <errno.h>
#include <inttypes.h>

#include "agent.h"
#include "fuzz.h"

static uint64_t take(const uint8_t **data, size_t *size) {
        uint64_t v = 0;
        size_t n = *size < sizeof(v) ? *size : sizeof(v);

        memcpy(&v, *data, n);
        *data += n;
        *size -= n;
        return v;
}

/* Any text: parsed or refused, and what it gives in range. */
static void any_text(const uint8_t *data, size_t size) {
        char *s = fuzz_string(data, size);
        pid_t pids[8];
        ProcStat st;
        uid_t uid;
        size_t k;
        int r;

        r = proc_status_uid_parse(s, &uid);
        fuzz_assert(r == 0 || r == -EBADMSG);
        if (r == 0)
                fuzz_assert(uid != (uid_t) -1 && (strneq(s, "Uid:", 4) || strstr(s, "\nUid:")));
        k = proc_children_parse(s, pids, 8);
        fuzz_assert(k <= 8);
        for (size_t i = 0; i < k; i++)
                fuzz_assert(pids[i] > 0);
        r = proc_stat_parse(s, &st);
        fuzz_assert(r == 0 || r == -EBADMSG);
        if (r == 0)
                fuzz_assert(strlen(st.comm) < sizeof(st.comm) && !strchr(st.comm, '\n') && st.ppid >= 0);
        free(s);
}

/* A status and a list of children as the kernel writes them. */
static void built_lists(uint64_t a, uint64_t b) {
        char text[256];
        pid_t pids[4] = {}, want[3] = {(pid_t) (a % INT32_MAX) + 1, (pid_t) (b % INT32_MAX) + 1,
                                       (pid_t) ((a ^ b) % INT32_MAX) + 1};
        uid_t uid = (uid_t) (a % UINT32_MAX), got = 1;

        snprintf(text, sizeof(text), "Name:\tx\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t1\nNgid:\t0\n"
                 "Pid:\t1\nPPid:\t0\nTracerPid:\t0\nUid:\t%u\t%u\t%u\t%u\nGid:\t0\t0\t0\t0\n",
                 uid, (unsigned) b, (unsigned) b, (unsigned) b);
        fuzz_assert(proc_status_uid_parse(text, &got) == 0 && got == uid);
        snprintf(text, sizeof(text), "%d %d %d ", want[0], want[1], want[2]);
        fuzz_assert(proc_children_parse(text, pids, 4) == 3);
        fuzz_assert(pids[0] == want[0] && pids[1] == want[1] && pids[2] == want[2] && pids[3] == 0);
        fuzz_assert(proc_children_parse(text, pids, 2) == 2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char comm[16], line[1024], want[16];
        uint64_t ppid, tty, start;
        ProcStat st;
        size_t n;

        any_text(data, size);

        n = size > 0 ? data[0] % 16 : 0;
        if (size > 0) {
                data++;
                size--;
        }
        n = n < size ? n : size;
        for (size_t i = 0; i < n; i++)
                comm[i] = data[i] ? (char) data[i] : '.';
        comm[n] = '\0';
        data += n;
        size -= n;
        ppid = take(&data, &size) % 4194304;
        tty = (uint32_t) take(&data, &size);
        start = take(&data, &size);
        built_lists(ppid * 1000003 + start, tty);
        /* TTY_NR as the kernel prints it: an int. */
        snprintf(line, sizeof(line),
                 "4242 (%s) S %" PRIu64 " 4242 4242 %" PRId32 " 4242 4194560 107 0 0 0 0 0 0 0 20 0 1 0 %" PRIu64
                 " 9310208 1024 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n",
                 comm, ppid, (int32_t) (uint32_t) tty, start);
        fuzz_assert(proc_stat_parse(line, &st) == 0);
        snprintf(want, sizeof(want), "%.*s", (int) strcspn(comm, "\n"), comm);
        fuzz_assert(streq(st.comm, want));
        fuzz_assert((uint64_t) st.ppid == ppid);
        fuzz_assert((uint64_t) st.tty == tty);
        fuzz_assert(st.start == start);
        return 0;
}
