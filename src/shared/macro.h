/* SPDX-License-Identifier: MIT */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _printf_(a, b) __attribute__((format(printf, a, b)))

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)
#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MIN(a, b) ({ typeof(a) min_a_ = (a); typeof(b) min_b_ = (b); min_a_ < min_b_ ? min_a_ : min_b_; })
#define MAX(a, b) ({ typeof(a) max_a_ = (a); typeof(b) max_b_ = (b); max_a_ > max_b_ ? max_a_ : max_b_; })

/* Hand ownership on: returns the value and leaves the variable empty. */
#define TAKE_PTR(p) ({ typeof(p) take_ptr_ = (p); (p) = NULL; take_ptr_; })
#define TAKE_FD(fd) ({ int take_fd_ = (fd); (fd) = -EBADF; take_fd_; })

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline void *mfree(void *p) {
        free(p);
        return NULL;
}

/* Closes fd if it is one, keeps errno, and returns -EBADF for assignment. */
static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                close(fd);
                errno = saved;
        }
        return -EBADF;
}

static inline void closep(int *fd) {
        safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

/* Defines name##p() for _cleanup_() that calls func() on a non-NULL pointer. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                 \
        static inline void func##p(type *p) {                   \
                if (*p)                                         \
                        func(*p);                               \
        }

static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}

#define SWAP_TWO(x, y)                          \
        do {                                    \
                typeof(x) swap_tmp_ = (x);      \
                (x) = (y);                      \
                (y) = swap_tmp_;                \
        } while (0)

#define streq(a, b) (strcmp((a), (b)) == 0)
#define strneq(a, b, n) (strncmp((a), (b), (n)) == 0)

#define PID_FMT "%i"
#define UID_FMT "%u"
