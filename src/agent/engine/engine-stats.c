/* SPDX-License-Identifier: MIT */
/* The engine's counters: per name, and in all (EngineStats). */
#include <errno.h>
#include <inttypes.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"
#include "engine-internal.h"

/* ---- Counters ----------------------------------------------------------------- */

const char *const engine_release_cause_name[N_ENGINE_RELEASE_CAUSES] = {
        [ENGINE_RELEASE_ANCHOR_CLOSED] = "anchor_closed",
        [ENGINE_RELEASE_RELEASED] = "released",
        [ENGINE_RELEASE_LOST] = "lost",
};

const char *const engine_denial_name[N_ENGINE_DENIALS] = {
        [ENGINE_DENIAL_TIMEOUT] = "timeout",
        [ENGINE_DENIAL_FULL] = "full",
        [ENGINE_DENIAL_UNCONFIRMED] = "unconfirmed",
        [ENGINE_DENIAL_DRAINED] = "drained",
};

const usec_t engine_histogram_bounds[ENGINE_HISTOGRAM_BUCKETS] = {
        1 * USEC_PER_MSEC, 5 * USEC_PER_MSEC, 10 * USEC_PER_MSEC, 50 * USEC_PER_MSEC, 100 * USEC_PER_MSEC,
        500 * USEC_PER_MSEC, 1 * USEC_PER_SEC, 5 * USEC_PER_SEC, 10 * USEC_PER_SEC, 30 * USEC_PER_SEC,
        1 * USEC_PER_MINUTE, 5 * USEC_PER_MINUTE, 10 * USEC_PER_MINUTE, 30 * USEC_PER_MINUTE, 60 * USEC_PER_MINUTE,
};

static int name_stats_cmp(const void *x, const void *y) {
        return strcmp(((const NameStats *) x)->name, ((const NameStats *) y)->name);
}

void name_stats_free(Engine *e, NameStats *s) {
        tdelete(s, &e->name_stats_tree, name_stats_cmp);
        LIST_REMOVE(lru, e->name_stats, s);
        e->n_name_stats--;
        free(s);
}

/* The counters of name, made most recently used; a new entry when it has
 * none (the least recently used one goes when the table is full). NULL
 * when out of memory: that event goes uncounted. */
NameStats *name_stats_get(Engine *e, const char *name) {
        union {
                NameStats s;
                char buf[sizeof(NameStats) + NAME_MAX_LEN + 1];
        } key;
        size_t len = strlen(name);
        NameStats *s, **p;

        if (len > NAME_MAX_LEN)
                return NULL;
        memcpy(key.s.name, name, len + 1);
        p = tfind(&key.s, &e->name_stats_tree, name_stats_cmp);
        if (p) {
                s = *p;
                LIST_REMOVE(lru, e->name_stats, s);
                LIST_PREPEND(lru, e->name_stats, s);
                return s;
        }
        s = malloc(sizeof(*s) + len + 1);
        if (!s)
                return NULL;
        *s = (NameStats) {};
        memcpy(s->name, name, len + 1);
        if (e->n_name_stats >= ENGINE_NAME_STATS_MAX) {
                NameStats *last = e->name_stats;

                while (last->lru_next)
                        last = last->lru_next;
                name_stats_free(e, last);
        }
        if (!tsearch(s, &e->name_stats_tree, name_stats_cmp)) {
                free(s);
                return NULL;
        }
        LIST_PREPEND(lru, e->name_stats, s);
        e->n_name_stats++;
        return s;
}

void histogram_add(EngineHistogram *h, usec_t t) {
        size_t i = 0;

        while (i < ENGINE_HISTOGRAM_BUCKETS && t > engine_histogram_bounds[i])
                i++;
        h->buckets[i]++;
        h->count++;
        h->sum += t;
}

void count_release(Lease *l, EngineReleaseCause cause) {
        /* (A revoked holder told LOST was counted then.) */
        if (l->state == LEASE_HELD)
                l->engine->stats.releases[cause]++;
}

