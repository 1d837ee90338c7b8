/* fleetsem reboot: hosts that each take slots of several names (their
 * groups, then the reboot name), held by the host itself across its
 * reboot, in one fixed order. Redis is an atomic script executor per name:
 * a FIFO line and the holders, a grant only to the head while it fits
 * (grant_next() in src/agent/library/lua/prelude/line.lua). A host-held
 * slot has no anchor: it ends by its host's release after the boot
 * (healthy, or root's revoke of an unhealthy one: the same step in
 * Redis), or by its lease running out, which happens only while its agent
 * does not renew it: the host is down and never comes back within
 * host_lease.
 *
 * Checked (model/run.sh, reboot-*): at every grant and every moment a host
 * goes down, no name has more holders than its limit and no group more
 * hosts down than its cap; no invalid end state, so no two hosts ever wait
 * for each other (every host either reboots and comes back, or is gone).
 * MUT_ANY_ORDER: host 1 takes its names in the reverse order; spin must
 * find the deadlock. MUT_SHORT_LEASE: a host's slots run out while it is
 * down and it comes back after (host_lease shorter than a reboot); spin
 * must find two hosts of a group down at once.
 *
 * RESET: once, at any time, Redis loses every holder (restarted empty or
 * from a stale snapshot, a failover). The agents of hosts that are up put
 * theirs back and queue their waiters again in their order (before any
 * grant: the reset's grace); a host that is down cannot, and its slots
 * are lost to Redis while it still counts itself down on them. No slot a
 * host holds itself is granted for host_lease after the reset
 * (acquire_call() in src/agent/library/lua/prelude/calls.lua: grants_from),
 * which every host down then outlasts: it is back by then, or gone (its
 * slots would have run out). MUT_JOB_GRACE: that grace ends at any time
 * (one lease_ttl, shorter than a reboot); spin must find two hosts down
 * at once.
 *
 * Configuration: names 0 (r1, limit 1), 1 (r2, limit 1), 2 (reboot, limit
 * LIM); host 0 in r1, host 1 in r1 and r2, host 2 in r2; the sorted order
 * is the names' order, 0, 1, 2. */

#ifndef LIM
#define LIM 1
#endif
#ifndef GONE
#define GONE 1          /* hosts that may never come back (their lease runs out) */
#endif

#define NH 3
#define NN 3
#define REBOOT 2

byte limit[NN];
byte held[NN];          /* holders, as Redis counts them */
bool holds[NN * NH];    /* name * NH + host: host holds a slot of name */
byte line[NN * NH];     /* name * NH + place: host + 1, 0 empty; the head at 0 */
byte qlen[NN];
bool down[NH];          /* rebooting: its slots held, its agent not renewing */
bool gone[NH];          /* never came back: its slots ran out */
byte n_gone = 0;
/* Scratch of the atomic steps, 0 between them (no state of their own). */
byte tk, tc, tj, tg;
#ifdef RESET
bool lost[NN * NH];     /* name * NH + host: Redis lost the slot of a host down at the reset */
bool down_at_reset[NH];
bool grace = false;     /* after the reset: nothing granted while a host down then may still be down */
#define GRANTS_OK !grace
#else
#define GRANTS_OK true
#endif

#define H(n, h) ((n) * NH + (h))

inline need(h, n, ret) {
        ret = (n == REBOOT) || (n == 0 && h <= 1) || (n == 1 && h >= 1)
}

/* The hosts of a group down at once, each believing it holds every name
 * it needs (a gone host is not rebooting). */
inline check_caps() {
        for (tk : 0 .. NN - 1) {
                assert(held[tk] <= limit[tk]);
                tc = 0;
                for (tj : 0 .. NH - 1) {
                        need(tj, tk, tg);
                        if
                        :: tg && down[tj] && !gone[tj] -> tc++
                        :: else
                        fi
                }
                tg = 0;
                assert(tc <= limit[tk])
        }
        tk = 0; tc = 0; tj = 0
}

/* grant_next: the head of n's line while it fits. */
inline grant_next(n) {
        do
        :: qlen[n] > 0 && held[n] < limit[n] && GRANTS_OK ->
                tg = line[H(n, 0)] - 1;
                line[H(n, 0)] = line[H(n, 1)];
                line[H(n, 1)] = line[H(n, 2)];
                line[H(n, 2)] = 0;
                qlen[n]--;
                holds[H(n, tg)] = true;
                held[n]++;
                printf("MSC: grant %d to host %d\n", n, tg);
                tg = 0;
                check_caps()
        :: else -> break
        od
}

inline acquire(h, n) {
        atomic {
                line[H(n, qlen[n])] = h + 1;
                qlen[n]++;
                printf("MSC: host %d queues for %d\n", h, n);
                grant_next(n)
        }
}

/* A release (after a healthy boot, or root's revoke) or the expiry sweep:
 * the same step in Redis. */
inline give_back(h, n) {
        atomic {
                if
                :: holds[H(n, h)] ->
                        holds[H(n, h)] = false;
#ifdef RESET
                        if
                        :: lost[H(n, h)] -> lost[H(n, h)] = false
                        :: else -> held[n]--
                        fi;
#else
                        held[n]--;
#endif
                        printf("MSC: host %d gives back %d\n", h, n);
                        grant_next(n)
                :: else
                fi
        }
}

proctype Host(byte h) {
        byte i, n;
        bool want;

        /* The fixed order: sorted groups, then the reboot name. */
        for (i : 0 .. NN - 1) {
#ifdef MUT_ANY_ORDER
                n = (h == 1 -> NN - 1 - i : i);
#else
                n = i;
#endif
                need(h, n, want);
                if
                :: want ->
                        acquire(h, n);
                        (holds[H(n, h)])        /* waits in line: renewed, never expires */
                :: else
                fi
        }
        atomic { down[h] = true; printf("MSC: host %d reboots\n", h); check_caps() }
        if
        :: true ->
                /* Back, running and healthy (or revoked): --done. */
                down[h] = false;
                for (i : 0 .. NN - 1) {
                        give_back(h, NN - 1 - i)
                }
        :: n_gone < GONE ->
                /* Never back: its slots run out after host_lease. */
                atomic { gone[h] = true; n_gone++ };
                for (i : 0 .. NN - 1) {
                        give_back(h, i)
                }
#ifdef MUT_SHORT_LEASE
        :: true ->
                /* host_lease shorter than the reboot: its slots run out
                 * while it is down, and it comes back after. */
                for (i : 0 .. NN - 1) {
                        give_back(h, i)
                }
                down[h] = false
#endif
        fi
}

#ifdef RESET
proctype Reset() {
        byte n;

        atomic {
                for (tk : 0 .. NH - 1) {
                        down_at_reset[tk] = down[tk] && !gone[tk]
                }
                for (tj : 0 .. NN * NH - 1) {
                        if
                        :: holds[tj] && down_at_reset[tj % NH] -> lost[tj] = true; held[tj / NH]--
                        :: else
                        fi
                }
                tk = 0; tj = 0;
                grace = true;
                printf("MSC: Redis reset\n")
        }
#ifdef MUT_JOB_GRACE
        skip;
#else
        (!(down_at_reset[0] && down[0] && !gone[0]) && !(down_at_reset[1] && down[1] && !gone[1]) &&
         !(down_at_reset[2] && down[2] && !gone[2]));
#endif
        atomic {
                grace = false;
                printf("MSC: the reset's grace is over\n");
                for (n : 0 .. NN - 1) {
                        grant_next(n)
                }
                n = 0
        }
}
#endif

init {
        atomic {
                limit[0] = 1;
                limit[1] = 1;
                limit[REBOOT] = LIM;
                run Host(0);
                run Host(1);
                run Host(2);
#ifdef RESET
                run Reset()
#endif
        }
}
