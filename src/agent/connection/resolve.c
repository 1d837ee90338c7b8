/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include "macro.h"
#include "resolve.h"

/* Each lookup holds a thread until the resolver answers or gives up (its
 * timeout times its attempts, 10s and more by default). Reconnections
 * to a name whose DNS is dead start new ones meanwhile: bounded, as the
 * file descriptors and memory they hold. */
#define RESOLVE_THREADS_MAX 128

static atomic_uint n_threads;

struct Resolve {
        atomic_int refs;                /* the loop's and the thread's */
        atomic_bool done;               /* gai, saved_errno and result are set */
        int fd;                         /* eventfd: the thread is done */
        char *host;
        int gai;
        int saved_errno;
        struct addrinfo *result;
        /* The loop's alone: */
        sd_event_source *source;
        resolve_cb cb;
        void *userdata;
};

static Resolve *resolve_unref(Resolve *r) {
        if (!r || atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1)
                return NULL;
        if (r->result)
                freeaddrinfo(r->result);
        safe_close(r->fd);
        free(r->host);
        return mfree(r);
}

static void *lookup_thread(void *p) {
        Resolve *r = p;
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
        uint64_t one = 1;

        r->gai = getaddrinfo(r->host, NULL, &hints, &r->result);
        r->saved_errno = errno;
        atomic_store_explicit(&r->done, true, memory_order_release);
        /* (Cannot fail: the count never nears its maximum. If it did,
         * the connect timeout of the one waiting would still end it.) */
        (void) !write(r->fd, &one, sizeof(one));
        resolve_unref(r);
        atomic_fetch_sub(&n_threads, 1);
        return NULL;
}

static int gai_errno(int gai, int saved_errno) {
        switch (gai) {
        case EAI_SYSTEM:
                return saved_errno > 0 ? -saved_errno : -EIO;
        case EAI_MEMORY:
                return -ENOMEM;
        case EAI_AGAIN:
                return -EAGAIN;
        default:
                return -EHOSTUNREACH;
        }
}

static void result_add(ResolveResult *res, const struct addrinfo *ai) {
        char buf[RESOLVE_ADDR_MAX];

        if (res->n >= RESOLVE_ADDRS_MAX ||
            getnameinfo(ai->ai_addr, ai->ai_addrlen, buf, sizeof(buf), NULL, 0, NI_NUMERICHOST) != 0)
                return;
        for (size_t i = 0; i < res->n; i++)
                if (streq(res->addr[i], buf))
                        return;
        memcpy(res->addr[res->n++], buf, sizeof(buf));
}

/* IPv4 addresses first, then IPv6 ones, each in the resolver's order: as
 * hiredis itself prefers them. */
static void result_fill(ResolveResult *res, const struct addrinfo *list) {
        static const int families[] = { AF_INET, AF_INET6 };

        for (size_t f = 0; f < ELEMENTSOF(families); f++)
                for (const struct addrinfo *ai = list; ai; ai = ai->ai_next)
                        if (ai->ai_family == families[f])
                                result_add(res, ai);
}

static int on_done(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Resolve *r = userdata;
        resolve_cb cb = r->cb;
        void *cb_userdata = r->userdata;
        ResolveResult res = {};
        char why[256] = "";
        uint64_t v;
        int error = 0;

        (void) s;
        (void) revents;
        (void) !read(fd, &v, sizeof(v));
        if (!atomic_load_explicit(&r->done, memory_order_acquire))
                return 0;
        if (r->gai != 0) {
                error = gai_errno(r->gai, r->saved_errno);
                snprintf(why, sizeof(why), "%s", r->gai == EAI_SYSTEM ? strerror(-error) : gai_strerror(r->gai));
        } else {
                result_fill(&res, r->result);
                if (res.n == 0) {
                        error = -EADDRNOTAVAIL;
                        snprintf(why, sizeof(why), "no IPv4 or IPv6 address");
                }
        }
        r->source = sd_event_source_disable_unref(r->source);
        resolve_unref(r);
        if (cb)
                cb(error, why, &res, cb_userdata);
        return 0;
}

static Resolve *resolve_free_unstarted(Resolve *r) {
        if (!r)
                return NULL;
        sd_event_source_disable_unref(r->source);
        safe_close(r->fd);
        free(r->host);
        return mfree(r);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(Resolve *, resolve_free_unstarted);

static int thread_start(Resolve *r) {
        pthread_attr_t attr;
        sigset_t all, saved;
        pthread_t t;
        int k;

        k = pthread_attr_init(&attr);
        if (k != 0)
                return -k;
        k = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (k == 0) {
                /* Every signal stays the loop's (sd-event's signalfd): the
                 * thread starts with all of them blocked. */
                sigfillset(&all);
                pthread_sigmask(SIG_SETMASK, &all, &saved);
                k = pthread_create(&t, &attr, lookup_thread, r);
                pthread_sigmask(SIG_SETMASK, &saved, NULL);
        }
        pthread_attr_destroy(&attr);
        return -k;
}

int resolve_start(sd_event *e, const char *host, resolve_cb cb, void *userdata, Resolve **ret) {
        _cleanup_(resolve_free_unstartedp) Resolve *r = NULL;
        int k;

        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->fd = -EBADF;
        r->host = strdup(host);
        if (!r->host)
                return -ENOMEM;
        r->fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (r->fd < 0)
                return -errno;
        k = sd_event_add_io(e, &r->source, r->fd, EPOLLIN, on_done, r);
        if (k < 0)
                return k;
        r->cb = cb;
        r->userdata = userdata;
        atomic_init(&r->refs, 2);

        if (atomic_fetch_add(&n_threads, 1) >= RESOLVE_THREADS_MAX) {
                atomic_fetch_sub(&n_threads, 1);
                return -EAGAIN;
        }
        k = thread_start(r);
        if (k < 0) {
                atomic_fetch_sub(&n_threads, 1);
                return k;
        }
        *ret = TAKE_PTR(r);
        return 0;
}

Resolve *resolve_cancel(Resolve *r) {
        if (!r)
                return NULL;
        r->cb = NULL;
        r->source = sd_event_source_disable_unref(r->source);
        resolve_unref(r);               /* the thread's result goes with its own */
        return NULL;
}

bool resolve_is_literal(const char *host) {
        struct addrinfo hints = { .ai_flags = AI_NUMERICHOST, .ai_socktype = SOCK_STREAM }, *list = NULL;

        if (getaddrinfo(host, NULL, &hints, &list) != 0)
                return false;
        freeaddrinfo(list);
        return true;
}
