/* SPDX-License-Identifier: MIT */
#pragma once

/* What the agent's STATUS says, kept line by line: `fleetsem status`
 * prints it, `fleetsem revoke` finds leases in it. */
#include <stdint.h>
#include <sys/types.h>

#include "protocol.h"
#include "time-util.h"

#define STATUS_TIMEOUT (10 * USEC_PER_SEC)     /* for the whole status, however many names */
#define STATUS_TIMEOUT_TEXT "10s"

/* One NAME, HOLDER or WAITER line from the agent, kept as its fields. */
typedef struct Entry {
        Message m;                      /* m.verb: NAME, HOLDER or WAITER */
} Entry;

typedef struct StatusOutput {
        Entry *entries;
        size_t n;
        size_t size;
        long long now_ms;
        char redis[300];                /* which Redis answered (under Sentinel: the master) */
        uint64_t master_since_ms;       /* under Sentinel: when that master took over, 0 unknown */
        uint64_t grace_ms;              /* no slot granted for that long after a reset; 0: none */
        const char *grace_why;          /* why, in words (static), with grace_ms */
        /* Nothing new is granted, until an operator acts: refused, why (a
         * row of pam_fleetsem(8)'s ON ERROR table: eviction, NOPERM);
         * refusing, what requests are told; evicts, the maxmemory-policy of
         * a Redis that may evict ("?" unknown). "": it does not. */
        char evicts[32];
        char refused[32];
        char refusing[700];
} StatusOutput;

/* A field of a line, "" when it has none. */
const char *status_get(const Entry *e, const char *key);
/* Appends the agent's STATUS of each of the n names (n 0: of every name)
 * to out, within one STATUS_TIMEOUT for them all; 0, or the exit code of
 * what went wrong (said). */
int status_fetch_names(const char *ns, uid_t agent_uid, char *const *names, int n, StatusOutput *out);
void status_output_free(StatusOutput *out);
