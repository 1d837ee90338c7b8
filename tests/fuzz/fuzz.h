/* SPDX-License-Identifier: MIT */
#pragma once

/* What the libFuzzer targets share: a check that aborts (libFuzzer then
 * keeps the input that broke it), the input as a C string, and the input
 * as a file for parsers that read files. */

#define _GNU_SOURCE 1
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define fuzz_assert(cond)                                                                     \
        do {                                                                                  \
                if (!(cond)) {                                                                \
                        fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
                        abort();                                                              \
                }                                                                             \
        } while (0)

/* The input NUL-terminated (cut at its first NUL byte, as a C string would
 * be); free() it. */
static inline char *fuzz_string(const uint8_t *data, size_t size) {
        char *s = malloc(size + 1);

        fuzz_assert(s);
        memcpy(s, data, size);
        s[size] = '\0';
        return s;
}

/* The bytes as the contents of a file, under a path the parser opens
 * itself: a file of this process' user, mode 0600, in a directory of its
 * own (mode 0700), as the parsers of configuration files require; in
 * /dev/shm (on a disk, ftruncate() and pwrite() cost thirty times the
 * parse), reused from run to run, removed at exit. */
#include <fcntl.h>

static char fuzz_dir[] = "/dev/shm/fleetsem-fuzz-XXXXXX";
static char fuzz_path[sizeof(fuzz_dir) + 16];

static inline void fuzz_file_remove(void) {
        (void) unlink(fuzz_path);
        (void) rmdir(fuzz_dir);
}

static inline const char *fuzz_file(const void *data, size_t size) {
        static int fd = -1;

        if (fd < 0) {
                fuzz_assert(mkdtemp(fuzz_dir));
                snprintf(fuzz_path, sizeof(fuzz_path), "%s/input", fuzz_dir);
                fd = open(fuzz_path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
                fuzz_assert(fd >= 0);
                atexit(fuzz_file_remove);
        }
        fuzz_assert(ftruncate(fd, 0) == 0);
        fuzz_assert(size == 0 || pwrite(fd, data, size, 0) == (ssize_t) size);
        return fuzz_path;
}

/* The bytes as a peer's stream read through the LineReader, as the agent
 * and the clients read it: cb sees each complete line of at most max. */
#include <errno.h>
#include <sys/socket.h>

#include "socket-util.h"

#define FUZZ_FEED_MAX 65536     /* what one socket buffer surely holds */

static inline void fuzz_lines(const uint8_t *data, size_t size, size_t max, void (*cb)(char *line, size_t len)) {
        static LineReader lr;
        int sv[2];

        if (size > FUZZ_FEED_MAX)
                return;
        fuzz_assert(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
        fuzz_assert(size == 0 || write(sv[1], data, size) == (ssize_t) size);
        close(sv[1]);

        line_reader_init(&lr, max);
        for (;;) {
                char *line;
                size_t len;
                int r;

                r = line_reader_next(&lr, &line, &len);
                if (r < 0) {
                        fuzz_assert(r == -E2BIG);
                        break;
                }
                if (r == 0) {
                        r = line_reader_fill(&lr, sv[0]);
                        if (r <= 0)
                                break;
                        continue;
                }
                fuzz_assert(len <= max && line[len] == '\0' && !memchr(line, '\n', len));
                cb(line, len);
        }
        close(sv[0]);
}
