/* SPDX-License-Identifier: MIT */
/* proc_stat_parse(): a line of /proc/PID/stat, whose command name is the
 * process' own choice (any bytes but NUL, up to 15, ")", "(", spaces and
 * newlines too). Any input parses or is refused with -EBADMSG, and the name
 * it gives is a short line; a line built as the kernel builds it, with a
 * name from the input, gives back its parent, terminal, start time and name
 * (up to its first newline). */

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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *s = fuzz_string(data, size), comm[16], line[1024], want[16];
        uint64_t ppid, tty, start;
        ProcStat st;
        size_t n;
        int r;

        r = proc_stat_parse(s, &st);
        fuzz_assert(r == 0 || r == -EBADMSG);
        if (r == 0)
                fuzz_assert(strlen(st.comm) < sizeof(st.comm) && !strchr(st.comm, '\n'));
        free(s);

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
        snprintf(line, sizeof(line),
                 "4242 (%s) S %" PRIu64 " 4242 4242 %" PRIu64 " 4242 4194560 107 0 0 0 0 0 0 0 20 0 1 0 %" PRIu64
                 " 9310208 1024 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n",
                 comm, ppid, tty, start);
        fuzz_assert(proc_stat_parse(line, &st) == 0);
        snprintf(want, sizeof(want), "%.*s", (int) strcspn(comm, "\n"), comm);
        fuzz_assert(streq(st.comm, want));
        fuzz_assert((uint64_t) st.ppid == ppid);
        fuzz_assert((uint64_t) st.tty == tty);
        fuzz_assert(st.start == start);
        return 0;
}
