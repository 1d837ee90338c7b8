/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdlib.h>

#include "time-util.h"

/* Latency samples in microseconds. */
typedef struct Samples {
        double *v;
        size_t n;
        size_t size;
} Samples;

static inline void samples_add(Samples *s, double us) {
        if (s->n == s->size) {
                s->size = s->size ? s->size * 2 : 1024;
                s->v = realloc(s->v, s->size * sizeof(double));
                if (!s->v)
                        abort();
        }
        s->v[s->n++] = us;
}

/* Declared _cleanup_samples_: the samples are freed as it goes out of scope. */
static inline void samples_free(Samples *s) {
        free(s->v);
        *s = (Samples) {};
}
#define _cleanup_samples_ __attribute__((cleanup(samples_free)))

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;
        return x < y ? -1 : x > y;
}

static inline double samples_pct(Samples *s, double p) {
        if (s->n == 0)
                return 0;
        qsort(s->v, s->n, sizeof(double), cmp_double);
        return s->v[(size_t) (p / 100.0 * (double) (s->n - 1) + 0.5)];
}

static inline double since_us(usec_t start) {
        return (double) (now_usec(CLOCK_MONOTONIC) - start);
}
