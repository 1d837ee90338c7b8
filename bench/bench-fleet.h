/* SPDX-License-Identifier: MIT */
#pragma once

/* What G's fleet (bench-fleet.c) and its reconnect storms
 * (bench-storm.c) share: fleets of agents (bench.c). */

#include <hiredis/hiredis.h>
#include <stdbool.h>
#include <sys/types.h>

enum { G_NAMES = 3, G_AGENTS_MAX = 1000 };

/* A fleet of n agents, each its own host and namespace, on Redis at url
 * (NULL: the benchmark's Redis), lease ttl, keys under prefix, logging to
 * log; agent[], fleet[] (their namespaces) filled. */
int g_start(const char *fleetsemd, int n, const char *url, const char *ttl, const char *prefix, const char *log,
            pid_t *agent, char fleet[][64]);
void g_stop(pid_t *agent, int n);
/* Every agent holds one slot of each of the G_NAMES names; the anchors
 * (n * G_NAMES of them) stay open. */
int g_fill(char fleet[][64], int n, int *anchor);
/* Units held in Redis: the holders of the G_NAMES names under prefix. */
long long g_held(redisContext *rc, const char *prefix);
/* Says that nobody held anything under a new prefix before, or the first
 * agent would grant nothing for a lease. */
void g_seed(redisContext *rc, const char *prefix);

/* bench-storm.c: every agent loses Redis at once, and finds it again. */
typedef enum StormKind {
        STORM_EMPTY,            /* G4a: Redis restarted empty */
        STORM_KEPT,             /* G4b: Redis restarted with its data */
        STORM_FAILOVER,         /* G4c: Sentinel promotes the replica */
        _STORM_MAX,
} StormKind;

typedef struct GStorm {
        double back_s;                  /* until every holder is in Redis again (empty), or every agent is back */
        double redis_cpu_s;
        double mem_mib, mem_peak_mib;
        double commands, scripts, loads, load_calls, in_bytes, out_bytes;
        long long held, expected;
} GStorm;

/* G4a and G4b on the benchmark's Redis (*rcp connected to the new one). */
int g_storm(redisContext **rcp, const char *prefix, int n, StormKind kind, GStorm *ret);
/* G4c: a master, its replica and a Sentinel of their own, n agents on
 * them holding G_NAMES slots each, then the failover. */
int g_failover(const char *fleetsemd, int n, const char *prefix, GStorm *ret);
void g_print_storm(int n, StormKind kind, const GStorm *s);
