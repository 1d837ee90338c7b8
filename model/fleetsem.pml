/*
 * fleetsem, second version of the slot protocol, as a Promela model.
 *
 * One name.  Redis is a set of global variables changed only inside
 * atomic blocks (a Lua script runs alone); its clock is the global tick.
 * Every host runs one agent; every job is a client (`fleetsem run`) on a
 * host that asks for one slot, holds it, and ends (its anchor closes).
 * Faults: agent crash and restart, Redis reset or failover, wake messages
 * lost or duplicated, agents paused (they simply take no step while the
 * clock runs), a stranger using another host's lease id, frozen holders,
 * Redis' wall clock stepped forward and put right again, a failover back
 * to a master that never caught up (REVERTS), root revoking a held slot
 * (REVOKES), a live Redis that loses the name's keys or all of
 * fleetsem's (FORGETS), Redis' clock stepped forward by less than a step
 * the scripts notice (USTEPS), one of the global keys lost alone: the
 * fleet clock (CLOCKLOSS), the census (CENSUSLOSS), a host's index
 * (HOSTLOSS).  An operator may
 * drain the name (no new grant) and undrain it (DRAIN).  JOBEND: a job's
 * process outlives its belief until it is killed.
 * A wake message that names a waiter with the proof its agent gave Redis
 * with its last acquire call grants it (docs/protocol.md, "Agent ⇄ agent,
 * through Redis"; grant_next() in prelude/line.lua); proofs are
 * modelled as small numbers, each new one unlike any still in the system
 * (as 128 random bits are).
 *
 * "design" below means docs/design.md (its rules: "The agent's safety
 * rules"); a script is cited by its file under src/agent/library/lua/ (the
 * shared parts in prelude/: records.lua, forgot.lua, clocks.lua, line.lua,
 * calls.lua), the agent by its file under src/agent/, `fleetsem run` by
 * src/cli/run.c.  Mutants are the same
 * model with one rule changed: -DMUT_<NAME> (see run.sh).
 *
 * Configuration (all -D on the spin command line):
 *   NJ        jobs (2 or 3), job j runs on host j % 2
 *   SL0..SL2  slots each job asks for (default N = 1)
 *   CRASHES RESETS LOSSES DUPS STRAYS STEPS REVERTS REVOKES   fault budgets
 *   REVOKE_NOW  1: a revoke frees the slot at once (fleetsem revoke --now);
 *             0 (default): it stays counted until released or fenced
 *   FREEZE    holders may freeze (miss their own timer); adds the fenced
 *             resource and turns the "at most N believers" check off
 *   SYNC      the clock waits for live agents to finish their work (no
 *             pauses): the liveness configuration
 *   GIVEUP    waiters may give up (default on, off under SYNC)
 *   NO_COUNT_CHECK  no assertion that the name's counters match its sets
 *             (for the counter mutants: they must fail the properties)
 *   DRAIN     1: an operator drains the name once and undrains it once,
 *             at any time (drain.lua); 0 (default): no operator
 *   FORGETS   keys lost while Redis stays up (one name's, or FLUSHALL)
 *   USTEPS USTEP  forward steps of Redis' clock that go unnoticed, of
 *             USTEP ticks each
 *   CLOCKLOSS CENSUSLOSS HOSTLOSS  the fleet clock key, the census, host
 *             0's index lost alone (keys.list: fleet_clock, census, host)
 *   PAM0      job 0 is a login session: it never fences itself nor asks
 *             again, and runs on when told LOST; its agent is never paused
 *             past a tick (HOSTLOSS)
 *   JOBEND    a fenced or lost job runs on until it exits or is killed
 *             (src/cli/run.c); "at most N" counts it until then
 *   TTL FENCE RENEW  the lease, the holder's fence and the renewal period
 *             in ticks (default 3, 2, 1: a tick is a third of a lease)
 */

#ifndef NJ
#define NJ 2
#endif
#define MAXJ 3
#define NH 2
#define HOST(j) ((j) % NH)
#ifndef SL0
#define SL0 1
#endif
#ifndef SL1
#define SL1 1
#endif
#ifndef SL2
#define SL2 1
#endif
#define SLOTS(j) ((j) == 0 -> SL0 : ((j) == 1 -> SL1 : SL2))
/* The units of the limit each job takes (fleetsem run --weight). */
#ifndef W0
#define W0 1
#endif
#ifndef W1
#define W1 1
#endif
#ifndef W2
#define W2 1
#endif
#define WT(j) ((j) == 0 -> W0 : ((j) == 1 -> W1 : W2))

#ifndef CRASHES
#define CRASHES 1
#endif
#ifndef RESETS
#define RESETS 1
#endif
#ifndef LOSSES
#define LOSSES 1
#endif
#ifndef DUPS
#define DUPS 1
#endif
#ifndef STRAYS
#define STRAYS 1
#endif
/* A failover back to a master that never caught up (fault harness,
 * finding 9): a master's data is kept as it is (it stops following), a
 * reset follows (another master takes over), and later the kept one is
 * master again, the same process with its old data, its epoch in it.  Its
 * promotion gave it a new replication id, which the epoch names beside
 * the run id (info_reply() in src/agent/redis/shard-setup.c), so to the
 * first agent that connects, whichever, its epoch is another master's: a
 * new epoch, with a grace, before any other script runs there.  MUT_REVERT_SAME_EPOCH: the epoch names the
 * run id only (the code before): the old epoch holds, with no grace. */
#ifndef REVERTS
#define REVERTS 0
#endif
/* Root revokes a held lease (revoke.lua).  The default (fleetsem revoke):
 * the record is marked revoked (PROOF 'revoked') and stays in holders,
 * counted in HELD, its expiry left as it is (its last renewal + TTL): the
 * sweep frees it then, as a lease that runs out, so a holder cut off from
 * its agent has the same third of a lease of margin past its fence;
 * renewals, acquires, re-assertions and adoptions find it missing, and
 * "r LEASE" on the wake channel (a hint: it may be lost) makes its agent
 * renew at once.  The agent that reads "missing" tells the holder LOST
 * and, while the lease's end (its last confirmed call + TTL) has not
 * passed, keeps the lease until the holder's anchor closes, then releases
 * it; Redis' sweep frees it at its expiry anyway.  (lease_lost() in
 * src/agent/engine/engine.c kept it only after an "r" message, before:
 * MUT_UNHEARD_RELEASES, model/FINDINGS.md.)  LOST is a message: the holder
 * believes until it acts on it (or its timer fires).  A revoked holder
 * counts among the believers.  MUT_REVOKE_AT_ONCE: the default revoke
 * frees the slot at once (the --now form) though its holder counts.
 * MUT_REVOKE_AT_FENCE: the rule before (library 13): its expiry moved to
 * its fence point (expiry - TTL/3: its last renewal + FENCE), freed at
 * once when already past it, and the agent keeping it only while its last
 * confirmed call is under FENCE ticks old.  MUT_UNHEARD_RELEASES: an agent
 * that did not hear the "r" message releases a lease its renewal finds
 * missing at once, as a lease that ran out.
 * REVOKE_NOW=1 (fleetsem revoke --now): released as its owner would, so
 * the next in line is granted with a higher token, unless drained or in a
 * grace.  Its holder may go on believing until its agent's next renewal
 * finds the lease missing, or until it fences itself: two believers for a
 * while, by design (fleetsem(1), "revoke"), so a revoked holder does not
 * count among the believers there; instead its belief must end within
 * FENCE + DRIFT ticks of the revoke (checked in both forms).
 * MUT_RENEW_MISSING_CONFIRMS: the agent takes a renewal that says the
 * lease is missing for a confirmation. */
#ifndef REVOKES
#define REVOKES 0
#endif
#ifndef REVOKE_NOW
#define REVOKE_NOW 0
#endif
#if REVOKES && !REVOKE_NOW
#define FENCED_REVOKE 1
#else
#define FENCED_REVOKE 0
#endif
/* How long the agent keeps a revoked lease found missing (its last
 * confirmed call's age under it), and LOST's free_in then: the lease's
 * end, or (MUT_REVOKE_AT_FENCE) its fence point. */
#ifdef MUT_REVOKE_AT_FENCE
#define KEPT_FOR FENCE
#else
#define KEPT_FOR TTL
#endif
/* Steps of Redis' wall clock (TIME): the scripts take them out of the
 * tokens' clock (and out of expiries); here only a mutant's tokens see
 * TIME (MUT_TOKEN_RAW_CLOCK), expiries are on the tick. */
#ifndef STEPS
#define STEPS 0
#endif
#define STEP 2
#ifdef MUT_TOKEN_RAW_CLOCK
#define RAW g_step
#else
#define RAW 0
#endif
#ifdef SYNC
#define GIVEUP 0
#endif
#ifndef GIVEUP
#define GIVEUP 1
#endif
/* A paused agent can see its waiter granted and expire again and again,
 * each time with a new token: runs are cut (the clock stops) after MAXG
 * grants, so every run explored is a prefix of a real one. */
/* WAKES=0: no pub/sub; waiters rely on the safety tick alone (a lost
 * wake costs a tick, nothing else), which keeps the state space small */
#ifndef WAKES
#define WAKES 1
#endif
#ifndef MAXG
#define MAXG 4
#endif
#ifndef DRAIN
#define DRAIN 0
#endif

/* Time, in ticks of Redis' clock.  Lease TTL = 3 ticks; the agent renews
 * every tick (TTL/3, design "Leases"); a holder that has no confirmation
 * younger than 2 ticks (2/3 of the TTL) fences itself (design "Holders
 * fence themselves"); a host clock may run up to DRIFT tick slow against
 * Redis' clock.  Grace after a reset = one TTL (epoch.lua's grace_ms: the
 * agent passes its lease, src/agent/redis/shard-setup.c). */
#ifndef TTL
#define TTL 3
#endif
#ifndef FENCE
#define FENCE 2
#endif
/* The renewal timer and the safety tick, every RENEW ticks (TTL/3): 1
 * but in the checks of clock steps, where a tick is a sixth of a lease. */
#ifndef RENEW
#define RENEW 1
#endif
#ifndef DRIFT
#define DRIFT 1
#endif
#define GRACE TTL

/* Keys lost while Redis stays up (prelude/forgot.lua): a
 * DEL or eviction of one name's keys, or FLUSHALL/FLUSHDB (the census and
 * the epoch key too).  The census (one ZSET per Redis or Cluster slot)
 * says which names should exist; with one name and no idle expiry its
 * entry for the name is there exactly when the census is, so r_census
 * stands for both; the census' own mark (the slot grace of a census made
 * again) is the name's grace when this name's call makes it.  A call that
 * finds the name's state missing marks it forgotten (a grace of one lease,
 * r_ngrace) unless the census says the name is new.  MUT_FORGET_NEW: a
 * name whose state is missing is new (the scripts before the census). */
#ifndef FORGETS
#define FORGETS 0
#endif
/* Forward steps of Redis' clock smaller than the scripts notice (more than
 * half a lease past the last call; observe() in prelude/clocks.lua): taken as
 * time, they bring every expiry and grace closer by USTEP ticks. */
#ifndef USTEPS
#define USTEPS 0
#endif
#ifndef USTEP
#define USTEP 1
#endif
#if FORGETS && REVERTS
#error "FORGETS with REVERTS: the kept data has no census"
#endif
/* The global keys lost alone (src/agent/library/keys.list: their LOSS).
 * CLOCKLOSS: the fleet clock key (observe() in prelude/clocks.lua).  A
 * name's expiries are on the offset its state names, of the clock whose
 * ID it names; that offset is every step and silence the clock has seen,
 * possibly more than a lease.  The key found missing is a new clock: the
 * name's offset moves by the new clock's (0: by nothing), and, since a
 * step or silence between its last call and the new key went unseen,
 * what of it would run out within a lease is given a lease from now
 * (raise()).  MUT_CLOCK_ZERO: the key read as offset 0 (the scripts
 * before), every expiry moved back by the whole offset: gone at once.
 * CENSUSLOSS (with FORGETS): the census key, its mark and every entry.
 * A call on another name makes it again (young for a lease, without this
 * name), or a renewal of this name, or a call that grants on it, does
 * (census_keep() in prelude/forgot.lua: its entry written back, the
 * census made if missing); a name whose state is missing counts as forgotten when the
 * census names it, is missing, or is younger than a lease (a grace of a
 * lease from now: forgot_left()), as new otherwise.  MUT_CENSUS_OLD: the
 * entry is written only when the name's idle expiry moves (hours: never
 * here), and a young census forgives a name only until a lease after the
 * census was made.  MUT_CENSUS_RENEW_ONLY: written back by renewals only,
 * not by grants (the scripts before: a name that went a lease without a
 * renewal, then granted, its keys lost before its holder's first
 * renewal, was taken for new).
 * HOSTLOSS: host 0's index (P:host:{HOST}), which a fresh agent reads to
 * adopt its leases (src/agent/adopt.c), lost; a renewal finds the key gone
 * and writes it again whole (host_index_keep() in
 * src/agent/redis/redis-engine.c).  The host's own record of its leases
 * (src/agent/host/lease-record.c), written and removed with each entry,
 * outlives the agent: adoption reads both.  MUT_NO_RECORD: the index
 * alone.  With PAM0 (job 0 a login session, which never asks again) the
 * lease an agent restarting does not adopt runs out under its session. */
#ifndef CLOCKLOSS
#define CLOCKLOSS 0
#endif
#ifndef CENSUSLOSS
#define CENSUSLOSS 0
#endif
#ifndef HOSTLOSS
#define HOSTLOSS 0
#endif
#if CENSUSLOSS && !FORGETS
#error "CENSUSLOSS needs FORGETS: the census matters only to a name whose keys are lost"
#endif
#ifdef PAM0
#define PAMJ(j) ((j) == 0)
#else
#define PAMJ(j) 0
#endif
/* A job's end (JOBEND; src/cli/run.c, kill_by()): a job that fenced
 * itself or was told LOST got SIGTERM and may run on (it traps it); run
 * sends SIGKILL to its process group half a second before its slot may be
 * granted elsewhere: the lease's end as the last GRANTED or RENEWED told
 * it (ttl: TTL less the confirmation's age), or LOST's free_in if sooner
 * (a revoke the agent keeps: the lease's end, TTL less the age of the
 * agent's last confirmed call; 0 for any other loss, which may have freed
 * it already).
 * The half second is below a tick: the kill comes on its tick, before
 * Redis' expiry in it (no drift: the fence's drift is the margin of a
 * third of a lease, the kill's is that half second).  Until it is gone
 * the job counts in "at most N".  MUT_JOB_OUTLIVES: SIGKILL 10 s after
 * SIGTERM whatever the slot (run before): never within the model's runs.
 * (MUT_KILL_AT_LEASE_END, LOST's free_in ignored, is gone: a revoke now
 * leaves the lease's end as it is, which free_in says.)  A revoked job whose
 * own timer fenced it before its agent told it LOST counts too: the
 * revoke leaves its expiry, which its kill comes before (under
 * MUT_REVOKE_AT_FENCE, the rule before, Redis freed it at its fence
 * point, a window docs/design.md named: there it does not count). */
#ifndef JOBEND
#define JOBEND 0
#endif
/* (JE(s), UNHEARD(j) and HX(s) are "; s" when on, nothing when off: the
 * other searches keep their states and depths) */
#if JOBEND
#define JE(s) ; s
#else
#define JE(s)
#endif
#if JOBEND && FENCED_REVOKE && defined(MUT_REVOKE_AT_FENCE)
#define UNHEARD(j) ; j_unh[j] = g_rv[j]
#else
#define UNHEARD(j)
#endif

/* Ghost variables that only the fenced resource (FREEZE) or the liveness
 * formula read: elsewhere they would only split states. */
#ifdef FREEZE
#define FR(s) s
#else
#define FR(s) skip
#endif
#ifdef LIVENESS
#define LV(s) s
#else
#define LV(s) skip
#endif

/* Redis: a lease's state */
#define ABSENT 0
#define WAITING 1
#define HOLDER 2

/* ---------------------------------------------------------------- Redis */
byte r_st[MAXJ];        /* holders / queue+waiters ZSETs */
byte r_ttl[MAXJ];       /* expiry, as ticks left */
byte r_own[MAXJ];       /* the record's host (parse_record(), records.lua) */
byte r_tok[MAXJ];       /* grant HASH: the token */
byte r_gs[MAXJ];        /* ghost: global order of the grant */
byte r_pf[MAXJ];        /* proof HASH: the waiter's agent's secret, 0 = none */
byte q[MAXJ];           /* queue in ticket order */
byte qn;
byte r_token;           /* token STRING */
bool r_token_set;
byte r_epoch;           /* P:epoch: 0 = missing, else its id */
byte r_grace;           /* ticks until grace_until */
/* The name's state in its hash (field '.'): counters kept with every
 * change to the sets, which the scripts read instead of counting.  Each
 * lease's record there holds its slots (SLOTS(lease)). */
#define L_NONE 0        /* LIMIT when nobody holds or waits */
#define L_UNKNOWN 255   /* LIMIT not known since the last lease asking it left */
byte c_held;            /* HELD: holders */
byte c_line;            /* LINE: the queue's length */
byte c_lim;             /* LIMIT: the lowest slots asked by a holder or waiter */
byte c_at;              /* AT_LIMIT: how many ask exactly LIMIT */
/* The drain record (field '!' of the name's hash): while it is there no
 * slot is handed out anew (drain.lua); a reset loses it with the rest.
 * may_grant (prelude/forgot.lua): not in the grace after a reset, not drained. */
#if DRAIN
bool r_drain;
byte op_st;             /* the operator: 0 not yet drained, 1 drained, 2 undrained */
#define DRAINED r_drain
#else
#define DRAINED 0
#endif
#if FORGETS
bool r_name;            /* the name's state (its hash's field '.') exists */
bool r_census;          /* the census, with the name in it */
byte r_ngrace;          /* ticks until the name's grace (FORGOT) ends */
byte n_forget;
#define FORGOTTEN (r_ngrace != 0)
#else
#define FORGOTTEN 0
#endif
#if CENSUSLOSS
bool r_centry;          /* the census names the name (r_census: it exists) */
byte r_cyoung;          /* ticks until the census is a lease old */
byte n_census_loss;
#define CENTRY r_centry
#else
#define CENTRY r_census
#endif
#if CLOCKLOSS
bool r_clock_gone;      /* the fleet clock key is missing: a new clock due */
byte n_clock_loss;
#endif
#if HOSTLOSS
byte r_hx0;             /* host 0's index: its leases (mask) */
byte n_host_loss;
#endif
#define MAY_GRANT (r_grace == 0 && !DRAINED && !FORGOTTEN)

#if REVERTS
byte k_st[MAXJ];        /* the kept data (k_state 1) */
byte k_own[MAXJ];
byte k_tok[MAXJ];
byte k_gs[MAXJ];
byte k_pf[MAXJ];
byte k_q[MAXJ];
byte k_qn, k_token, k_epoch, k_held, k_line, k_lim, k_at;
bool k_token_set;
#if DRAIN
bool k_drain;
#endif
byte k_ttl[MAXJ];       /* its expiries, as ticks left (they run on) */
byte k_state;           /* 0 nothing kept, 1 kept, 2 its master is back */
#endif

#if REVOKES
bool g_rv[MAXJ];        /* ghost: its held lease was revoked */
byte g_rvt[MAXJ];       /* ghost: ticks it has believed since */
byte n_revoke;
#endif
#if FENCED_REVOKE
bool r_rv[MAXJ];        /* its record says revoked (PROOF 'revoked') */
#define RV(j) r_rv[j]
#else
#define RV(j) 0
#endif

/* ghosts, not Redis state */
byte g_gen;             /* epoch ids made so far */
byte g_clock;           /* the tokens' clock in us (Redis TIME less its steps)
                         * is above every token issued from it */
byte g_step;            /* how far TIME is ahead of it while stepped */
byte g_gs;              /* grants made so far */

/* ---------------------------------------------------------------- agents */
#define K_NONE 0
#define K_WAIT 1
#define K_HOLD 2
#define K_REASSERT 3    /* held before a reset: re-assert it */
#define K_REQUEUE 4     /* waited before a reset or expired: ask again */
#define K_LOST 5        /* told LOST, kept: released when its anchor closes */
#define K_FREE 6        /* missing in Redis: released now (a revoked one is freed) */
bool a_up[NH];
bool a_conn[NH];        /* connected and the epoch read */
byte a_epoch[NH];       /* last epoch id seen, 0 = none (fresh agent) */
byte a_kn[MAXJ];        /* what the job's agent knows of its lease */
byte a_tok[MAXJ];
byte a_age[MAXJ];       /* ticks since the agent sent the call that last confirmed the lease */
byte a_gs[MAXJ];        /* ghost: grant order of that token */
byte a_pf[MAXJ];        /* the proof it gave with its last acquire call, 0 = none */
byte a_rec[MAXJ];       /* the host's record: 0, or 1 + ticks since the call that last confirmed the lease went out, when its agent crashed holding it (the record is written at each change and confirmation, and outlives the agent) */
bool a_renew[NH];       /* the renewal timer fired */
byte a_ask[NH];         /* leases to ask Redis about (wake or safety tick) */
/* one script call in flight per agent: its reply, and its age in ticks
 * counted from when the agent sent it (the agent's own clock) */
#define RP_NONE 0
#define RP_ACQ 1
#define RP_RENEW 2
#define RP_REASSERT 3
byte rp_kind[NH];
byte rp_job[NH];
byte rp_val[NH];        /* ACQ: 0 queued, 1 granted, 2 permission; REASSERT: 0 lost, 1 ok */
byte rp_tok[NH];
byte rp_gs[NH];
byte rp_ok[NH];         /* RENEW: leases renewed (bit mask) */
byte rp_miss[NH];       /* RENEW: leases missing */
byte rp_age[NH];
#if FORGETS
bool rp_fg[NH];         /* RENEW: the name is in its grace after a loss */
#endif
/* pub/sub: pending wake messages per agent: g LEASE (mask) and "1" */
byte wk_g[NH];
bool wk_1[NH];
#if FENCED_REVOKE
byte wk_r[NH];          /* r LEASE (mask): a revoke */
bool a_rh[MAXJ];        /* the agent heard its lease revoked (revoke_heard) */
bool j_lost[MAXJ];      /* told LOST: it believes until it acts on it */
#define WKR(h) (wk_r[h] != 0)
#else
#define WKR(h) 0
#endif
byte wk_seen[NH];       /* g messages delivered before, for duplicates */
/* what the g message pending for lease j (to its host) says: the proof
 * Redis had for it (0 = "-") and the token; and the last one delivered */
byte wk_pf[MAXJ];
byte wk_tok[MAXJ];
byte wk_gs[MAXJ];       /* ghost */
byte wk_spf[MAXJ];
byte wk_stok[MAXJ];
byte wk_sgs[MAXJ];

/* ---------------------------------------------------------------- jobs */
#define J_IDLE 0
#define J_ASK 1         /* connected, request sent, no grant yet */
#define J_HOLD 2        /* believes it holds: the only state that counts */
#define J_FENCED 3      /* heard nothing for 2/3 TTL or LOST: acts on --on-lost */
#define J_DONE 4        /* ended: its anchor is closed */
byte j_st[MAXJ];
bool j_conn[MAXJ];      /* its connection to its host's agent */
bool j_req[MAXJ];       /* a request line the agent has not read yet */
short j_dl[MAXJ];       /* ticks left before it must fence */
byte j_tok[MAXJ];
byte j_gs[MAXJ];
bool j_frz[MAXJ];       /* frozen: its timer does not fire (FREEZE only) */
bool j_got[MAXJ];       /* ghost: has held at some time */
#if JOBEND
short j_le[MAXJ];       /* ticks until its SIGKILL (its lease's end, free_in) */
#if FENCED_REVOKE && defined(MUT_REVOKE_AT_FENCE)
bool j_unh[MAXJ];       /* ghost: revoked, fenced by its timer, not told */
#endif
#endif

/* the stranger: a user on host 1 who asks with job 0's lease id */
byte th_st;             /* 0 not yet, 1 believes, 2 done */
short th_dl;

/* the fenced resource (FREEZE): accepts a write with a token >= the last */
byte fr_last;           /* last token accepted */
byte fr_gs;             /* ghost: latest grant order among accepted writers */

/* fault budgets */
byte n_crash, n_reset, n_loss, n_dup, n_stray, n_step;
#if USTEPS
byte n_ustep;
#endif
#if RENEW > 1
byte g_phase;           /* ticks since the renewal timers last fired */
#endif

/* scratch for scripts; not part of the state */
hidden byte ri, rk, rlim, rn, rrank, rmask, rahead;
hidden byte rfreed, rwas, rpf, rc;
hidden short rdl;

#define ANY(c, h) (c(0, h) || c(1, h) || (NJ > 2 && c(2, h)))
#define MINE(j, h) ((j) < NJ && HOST(j) == (h))
#define BIT(j) (1 << (j))

/* ------------------------------------------------------- the properties */
#if REVOKES && REVOKE_NOW
#define BEL(j) ((j) < NJ && j_st[j] == J_HOLD && !g_rv[j])
#elif JOBEND && FENCED_REVOKE && defined(MUT_REVOKE_AT_FENCE)
/* The rule before: a job counts until it is gone, but for the window of
 * a revoke its host did not hear before the job's own timer fenced it,
 * at the fence point, where its slot was freed. */
#define BEL(j) ((j) < NJ && (j_st[j] == J_HOLD || j_st[j] == J_FENCED && !j_unh[j]))
#elif JOBEND
#define BEL(j) ((j) < NJ && (j_st[j] == J_HOLD || j_st[j] == J_FENCED))
#else
#define BEL(j) ((j) < NJ && j_st[j] == J_HOLD)
#endif
#define BELIEVERS (BEL(0) * W0 + BEL(1) * W1 + BEL(2) * W2 + (th_st == 1))
/* Nobody is ever more crowded than the limit it asked for (design "One
 * limit per name"); with every job asking N this is "at most N holders
 * that believe they hold".  Belief only starts where this is called.
 * Each believer counts its weight (a stranger 1). */
#define CROWD_OK(j) (!BEL(j) || BELIEVERS <= SLOTS(j))
inline check_safe() {
#if !defined(FREEZE) || defined(CHECK_CROWD)
	assert(CROWD_OK(0) && CROWD_OK(1) && CROWD_OK(2) && (th_st != 1 || BELIEVERS <= SL0))
#else
	skip
#endif
}

/* ------------------------------------------------------- Redis scripts */

/* Each step of Redis below prints one "MSC: redis: ..." line (and the
 * clock its "--- tick ---"): tests/model-replay.py replays these lines
 * against the Lua library and compares its replies with what they say.
 * A step added or a line reworded here needs its counterpart there. */

/* What the sets say (for the properties and the counters' assertion,
 * never for a script's decision): holders, waiters, the lowest slots
 * asked (255: none) and how many ask exactly that. */
#define PRES(j) ((j) < NJ && r_st[j] != ABSENT)
#define S_HELD ((r_st[0] == HOLDER) * W0 + (r_st[1] == HOLDER) * W1 + (NJ > 2 && r_st[2] == HOLDER) * W2)
#define S_WAIT ((r_st[0] == WAITING) + (r_st[1] == WAITING) + (NJ > 2 && r_st[2] == WAITING))
#define LOW(j) (PRES(j) -> SLOTS(j) : 255)
#define MIN2(a, b) ((a) < (b) -> (a) : (b))
#define S_LIM MIN2(LOW(0), MIN2(LOW(1), LOW(2)))
#define S_AT ((PRES(0) && SLOTS(0) == S_LIM) + (PRES(1) && SLOTS(1) == S_LIM) + (PRES(2) && SLOTS(2) == S_LIM))

/* The end of every script (flush): nobody left, no limit.  The counters
 * are what the sets say: the invariant the scripts rely on. */
inline r_flush() {
	if
	:: c_held + c_line == 0 -> c_lim = L_NONE; c_at = 0
	:: else
	fi;
#ifndef NO_COUNT_CHECK
	assert(c_held == S_HELD && c_line == qn && c_line == S_WAIT &&
		(c_lim == L_UNKNOWN && c_held + c_line > 0 ||
		 c_lim == L_NONE && c_held + c_line == 0 && c_at == 0 ||
		 c_lim == S_LIM && c_at == S_AT))
#else
	skip
#endif
}

/* limit_in_force() (prelude/records.lua): LIMIT, read again from the
 * records (the one scan left) when not known; `own` when nobody holds or
 * waits */
inline r_limit(own) {
	if
	:: c_lim == L_UNKNOWN ->
		c_lim = 255; c_at = 0;
		for (ri : 0 .. NJ - 1) {
			if
			:: r_st[ri] != ABSENT && SLOTS(ri) < c_lim -> c_lim = SLOTS(ri); c_at = 1
			:: r_st[ri] != ABSENT && SLOTS(ri) == c_lim -> c_at++
			:: else
			fi
		}
		if
		:: c_at == 0 -> c_lim = L_NONE
		:: else
		fi
	:: else
	fi;
	if
	:: c_lim != L_NONE -> rlim = c_lim
	:: else -> rlim = own
	fi
}

/* newcomer: a new holder or waiter asking `slots` is counted in LIMIT */
inline r_join(slots) {
	if
#ifdef MUT_COUNT_NEWCOMER
	:: c_lim == L_NONE ->                   /* not lowered by fewer slots */
#else
	:: c_lim == L_NONE || (c_lim != L_UNKNOWN && slots < c_lim) ->
#endif
		c_lim = slots; c_at = 1
	:: slots == c_lim -> c_at++
	:: else
	fi
}

inline r_rank(j) {
	rrank = 0;
	do
	:: rrank < qn && q[rrank] != j -> rrank++
	:: else -> break
	od
}

/* the units of those before j in line (rank rrank, from r_rank) */
inline r_ahead() {
	rahead = 0;
	for (ri : 0 .. MAXJ - 1) {
		if
		:: ri < rrank -> rahead = rahead + WT(q[ri])
		:: else
		fi
	}
}

inline r_dequeue(j) {
	r_rank(j);
	if
	:: rrank < qn ->
		for (ri : rrank .. qn - 2) { q[ri] = q[ri + 1] }
		qn--;
		q[qn] = 0
	:: else
	fi
}

/* forget a lease everywhere (holders, queue, waiters, its record...) */
inline r_forget(j) {
	r_dequeue(j);
	r_st[j] = ABSENT; r_ttl[j] = 0; r_own[j] = 0; r_tok[j] = 0; FR(r_gs[j] = 0); r_pf[j] = 0
#if FENCED_REVOKE
	; r_rv[j] = false
#endif
}

/* a holder or waiter leaves: HELD less its weight or LINE less one; the last one asking
 * LIMIT takes it with it (unknown, read again when next needed) */
inline r_uncount(j) {
	if
	:: r_st[j] == HOLDER -> c_held = c_held - WT(j)
	:: r_st[j] == WAITING -> c_line--
	:: else
	fi;
	if
	:: r_st[j] != ABSENT && SLOTS(j) == c_lim ->
		c_at--;
		if
		:: c_at == 0 -> c_lim = L_UNKNOWN
		:: else
		fi
	:: else
	fi
}

/* release, expiry */
inline r_leave(j) {
	r_uncount(j);
	r_forget(j)
}

/* next_token() (prelude/clocks.lua): a missing counter starts from the
 * tokens' clock (in us, above every token issued before), never from 0 */
inline next_token() {
	if
	:: !r_token_set ->
#ifdef MUT_TOKEN_RESTART
		r_token = 0;
#else
		r_token = g_clock + RAW;
#endif
		r_token_set = true
	:: else
	fi;
	r_token++;
	if
	:: r_token > g_clock + RAW -> g_clock = r_token - RAW
	:: else
	fi
}

/* census_keep() (prelude/forgot.lua, at the call's end, idle()): a name
 * with holders or waiters has its entry written back, the census made
 * again (with its mark) if gone.  A renewal looks (R_CENSUS_RENEW), and
 * so does every call that grants (R_CENSUS_GRANT: grant() in
 * prelude/line.lua, reassert_call()'s putting back; a script is one
 * step, so the look at the grant is the look at its end).
 * MUT_CENSUS_OLD: neither looks; MUT_CENSUS_RENEW_ONLY: only a renewal
 * (the scripts before: census-paused). */
#if CENSUSLOSS
inline r_census_keep() {
	if
	:: c_held + c_line > 0 && !r_centry ->
		r_centry = true;
		if
		:: !r_census -> r_census = true; r_cyoung = TTL
		:: else
		fi;
		printf("MSC: redis: the call writes the name back into the census\n")
	:: else
	fi
}
#endif
#if CENSUSLOSS && !defined(MUT_CENSUS_OLD)
#define R_CENSUS_RENEW r_census_keep();
#else
#define R_CENSUS_RENEW
#endif
#if CENSUSLOSS && !defined(MUT_CENSUS_OLD) && !defined(MUT_CENSUS_RENEW_ONLY)
#define R_CENSUS_GRANT r_census_keep();
#else
#define R_CENSUS_GRANT
#endif

/* Move a waiter to the holders: LINE less one, HELD its weight more.  No
 * overtaking (design, "The line"): whoever is granted, every lease ahead of it
 * in the queue fits too, beside the holders Redis has (its set, not the
 * counter), under the limit the script applied, each with its weight. */
inline r_grant(j) {
	r_rank(j);
	r_ahead();
	assert(rrank < qn && S_HELD + rahead + WT(j) <= rlim);
#if DRAIN
	/* No new grant while the name is drained (a re-assertion is none:
	 * s_reassert does not come here). */
	if
	:: r_drain -> printf("MSC: redis: grants lease %d while drained\n", j)
	:: else
	fi;
	assert(!r_drain);
#endif
	r_dequeue(j);
	r_st[j] = HOLDER;
	c_line--; c_held = c_held + WT(j);
	next_token();
	r_tok[j] = r_token;
	g_gs++;
	FR(r_gs[j] = g_gs);
	R_CENSUS_GRANT
}

/* publish on the wake channel: every connected agent gets it; a g
 * message names each lease granted with its token and the proof Redis
 * had for it, which it then forgets (HDEL on grant) */
inline publish(gmask, one) {
	for (ri : 0 .. NH - 1) {
		if
		:: WAKES && a_up[ri] && a_conn[ri] -> wk_g[ri] = wk_g[ri] | gmask; wk_1[ri] = wk_1[ri] || one
		:: else
		fi
	}
	for (ri : 0 .. NJ - 1) {
		if
		:: gmask & BIT(ri) ->
			if
			:: WAKES && a_up[HOST(ri)] && a_conn[HOST(ri)] -> wk_pf[ri] = r_pf[ri]; wk_tok[ri] = r_tok[ri]; FR(wk_gs[ri] = r_gs[ri])
			:: else
			fi;
			r_pf[ri] = 0
		:: else
		fi
	}
}

/* grant_next() (prelude/line.lua): when someone is in line, the heads of
 * the line while each one's weight fits beside HELD under LIMIT; a head that does
 * not fit stops it (nobody overtakes a heavy job); only if `may` (the
 * caller's may_grant: not in grace, not drained) */
inline grant_next(may) {
	rmask = 0;
	if
	:: (may) && c_line > 0 ->
		r_limit(0);
		do
#ifdef MUT_WEIGHT_COUNTS
		:: qn > 0 && c_held < rlim ->   /* a holder counted as one, whatever its weight */
#else
		:: qn > 0 && c_held + WT(q[0]) <= rlim ->
#endif
			rk = q[0]; rmask = rmask | BIT(rk); r_grant(rk)
		:: else -> break
		od
	:: else
	fi
}

/* Every script first: the name's state missing?  The census missing
 * (FLUSHALL, or this Redis' first use): made again, and the name gets the
 * census' slot grace, one lease; the census there (it names the name):
 * forgotten, a grace of one lease; nothing is granted anew meanwhile, a
 * re-assertion is.  (No census without the name: a new name, no grace.) */
#if FORGETS
#define R_FORGOT r_named();
inline r_named() {
	if
	:: !r_name ->
		r_name = true;
#if CENSUSLOSS
		/* census_forgot(): forgotten when the census names it or is
		 * missing (made now), or lacks it while younger than a lease
		 * (forgot_left(): a lease from now); new when an older census
		 * lacks it.  Its entry is written (idle()). */
		if
		:: !r_census || r_centry -> r_ngrace = GRACE
		:: r_census && !r_centry && r_cyoung > 0 ->
#ifdef MUT_CENSUS_OLD
			r_ngrace = r_cyoung     /* a lease from the census' making */
#else
			r_ngrace = GRACE
#endif
		:: else -> r_ngrace = 0
		fi;
		if
		:: !r_census -> r_cyoung = TTL
		:: else
		fi;
		printf("MSC: redis: the name's state is missing (census %d, naming it %d): a grace of %d ticks\n", r_census, r_centry, r_ngrace);
		r_centry = true;
#elif !defined(MUT_FORGET_NEW)
		r_ngrace = GRACE;
		printf("MSC: redis: the name's state is missing (census %d): a grace of %d ticks\n", r_census, GRACE);
#else
		printf("MSC: redis: the name's state is missing: taken for new\n");
#endif
		r_census = true
	:: else
	fi
}
#else
#define R_FORGOT        /* (no step: the other searches stay as they were) */
#endif
/* observe() (prelude/clocks.lua), in every script on the name: the fleet
 * clock key found missing is made again, a new clock (CLOCKLOSS) */
#if CLOCKLOSS
#define R_CLOCK r_clock();
inline r_clock() {
	if
	:: r_clock_gone ->
		r_clock_gone = false;
		rfreed = false;
		for (rc : 0 .. NJ - 1) {
			if
#ifdef MUT_CLOCK_ZERO
			/* moved back by the lost clock's whole offset: run out */
			:: r_st[rc] != ABSENT -> r_leave(rc); rfreed = true
#else
			/* raise(): a lease from now for what would run out sooner */
			:: r_st[rc] != ABSENT && r_ttl[rc] < TTL -> r_ttl[rc] = TTL
#endif
			:: else
			fi
		}
		printf("MSC: redis: the fleet clock key is missing: a new clock\n");
		if
		:: rfreed -> publish(0, true)
		:: else
		fi
	:: else
	fi
}
#else
#define R_CLOCK
#endif
/* What every script on the name does first: state(), then observe() */
#define R_NAMED R_FORGOT R_CLOCK

/* acquire_call() (prelude/calls.lua; acquire.lua), called by agent h for
 * lease j; reply into rp_* */
inline s_acquire(h, j, slots, pf) {
	R_NAMED
	rp_kind[h] = RP_ACQ; rp_job[h] = j; rp_age[h] = 0; rp_tok[h] = 0; rp_gs[h] = 0;
	if
#ifndef MUT_NO_OWNER_ACQUIRE
	:: r_st[j] != ABSENT && (r_own[j] != h || RV(j)) -> rp_val[h] = 2
#endif
	:: else ->
		if
		:: r_st[j] == HOLDER ->                 /* idempotent: renew, same grant */
			r_ttl[j] = TTL; rp_val[h] = 1; rp_tok[h] = r_tok[j]; FR(rp_gs[h] = r_gs[j]);
			r_limit(slots)                  /* in the reply */
		:: else ->
			/* (straight in when nobody is in line: the same as
			 * queued first and granted at once) */
#ifdef MUT_DRAIN_STRAIGHT_IN
			rwas = (c_line == 0);           /* the straight-in path */
#endif
			if
			:: r_st[j] == ABSENT ->
				q[qn] = j; qn++; r_st[j] = WAITING; r_own[j] = h; c_line++; r_join(slots)
			:: else
			fi;
			r_ttl[j] = TTL;
#ifdef MUT_LIMIT_PER_REQUEST
			rlim = slots;                   /* each request's own slots */
#else
			r_limit(slots);
#endif
			r_rank(j);
			r_ahead();
			if
#ifdef MUT_NO_GRACE
			:: !DRAINED && c_held + rahead + WT(j) <= rlim ->
#elif defined(MUT_ANY_ORDER)
			:: MAY_GRANT && c_held + WT(j) <= rlim ->   /* retry until it fits */
#elif defined(MUT_DRAIN_STRAIGHT_IN)
			/* nobody in line: straight in, drained or not */
			:: r_grace == 0 && (!DRAINED || rwas) && c_held + rahead + WT(j) <= rlim ->
#else
			:: MAY_GRANT && c_held + rahead + WT(j) <= rlim ->
#endif
				r_grant(j); r_ttl[j] = TTL; r_pf[j] = 0;
				rp_val[h] = 1; rp_tok[h] = r_tok[j]; FR(rp_gs[h] = r_gs[j])
			:: else ->
				rp_val[h] = 0;
				if
				:: pf != 0 -> r_pf[j] = pf     /* kept for the grant message */
				:: else
				fi
			fi
		fi
	fi;
	r_flush();
	printf("MSC: redis: acquire(%d) by host %d -> %d (0 queued, 1 granted, 2 permission) token %d\n", j, h, rp_val[h], rp_tok[h])
}

/* release_call() (prelude/calls.lua; release.lua), fire and forget: the
 * agent needs no answer */
inline s_release(h, j) {
	R_NAMED
	if
#ifndef MUT_NO_OWNER_RELEASE
	:: r_st[j] != ABSENT && r_own[j] != h -> printf("MSC: redis: release(%d) by host %d -> -1 (permission)\n", j, h)
#endif
	:: r_st[j] == ABSENT -> printf("MSC: redis: release(%d) by host %d -> 0 (not there)\n", j, h)
	:: else ->
		rwas = (r_st[j] == WAITING);
		r_leave(j);
#ifdef MUT_DRAIN_RELEASE
		grant_next(r_grace == 0);       /* drained or not */
#else
		grant_next(MAY_GRANT);
#endif
		printf("MSC: redis: release(%d) by host %d -> %d, granted mask %d, tokens %d %d %d\n", j, h, !rwas, rmask, r_tok[0], r_tok[1], r_tok[2]);
		publish(rmask, qn > 0 || rwas)
	fi;
	r_flush()
}

/* renew_call() (prelude/calls.lua; renew.lua): all leases agent h has of
 * the name, one call */
inline s_renew(h) {
	R_NAMED
	rp_kind[h] = RP_RENEW; rp_age[h] = 0; rp_ok[h] = 0; rp_miss[h] = 0;
#if FORGETS
	rp_fg[h] = FORGOTTEN;
#endif
	for (ri : 0 .. NJ - 1) {
		if
		:: MINE(ri, h) && (a_kn[ri] == K_WAIT || a_kn[ri] == K_HOLD) ->
			if
#ifdef MUT_NO_OWNER_ACQUIRE
			:: r_st[ri] != ABSENT ->
#else
			:: r_st[ri] != ABSENT && r_own[ri] == h && !RV(ri) ->
#endif
				r_ttl[ri] = TTL; rp_ok[h] = rp_ok[h] | BIT(ri)
			:: else -> rp_miss[h] = rp_miss[h] | BIT(ri)
			fi
		:: else
		fi
	};
	R_CENSUS_RENEW
	r_flush();
	printf("MSC: redis: renew by host %d: renewed mask %d, missing mask %d\n", h, rp_ok[h], rp_miss[h])
}

/* reassert_call() (prelude/calls.lua; reassert.lua): put a holder from
 * before the reset back */
inline s_reassert(h, j, tok) {
	R_NAMED
	rp_kind[h] = RP_REASSERT; rp_job[h] = j; rp_age[h] = 0;
	if
	:: r_st[j] != ABSENT && (r_own[j] != h || RV(j)) -> rp_val[h] = 0
	:: r_st[j] == HOLDER -> r_ttl[j] = TTL; rp_val[h] = 1
	:: else ->
		r_limit(SLOTS(j));
		if
		:: SLOTS(j) < rlim -> rlim = SLOTS(j)
		:: else
		fi;
		if
		:: c_held + WT(j) <= rlim ->
			/* a waiter it was: out of the line (LINE less one, and
			 * out of LIMIT); then counted anew, as a holder */
			if
			:: r_st[j] == WAITING -> r_uncount(j); r_dequeue(j)
			:: else
			fi;
			r_join(SLOTS(j));
#ifndef MUT_COUNT_REASSERT
			c_held = c_held + WT(j);
#endif
			r_st[j] = HOLDER; r_ttl[j] = TTL; r_own[j] = h; r_tok[j] = tok;
			R_CENSUS_GRANT
			/* raise the counter to at least the token; a missing
			 * counter first starts from the clock as next_token does */
			if
			:: !r_token_set ->
#ifdef MUT_REASSERT_SETS_TOKEN
				r_token = 0;
#else
				r_token = g_clock + RAW;
#endif
				r_token_set = true
			:: else
			fi;
			if
			:: r_token < tok -> r_token = tok
			:: else
			fi;
			rp_val[h] = 1
		:: else -> rp_val[h] = 0
		fi
	fi;
	r_flush();
	printf("MSC: redis: reassert(%d) token %d by host %d -> %d\n", j, tok, h, rp_val[h])
}

#if DRAIN
/* drain (drain.lua, on = 1): the record is set; nothing else changes */
inline s_drain() {
	R_NAMED
	r_drain = true;
	r_flush();
	printf("MSC: redis: drain\n")
}

/* undrain (drain.lua, on = 0), one script: the record goes, expired
 * leases are swept (here at the tick), and unless in a reset's grace the
 * heads of the line that fit are granted, in line order, with the wake
 * message a release publishes.  A name not drained (a reset lost the
 * record): nothing. */
inline s_undrain() {
	R_NAMED
	if
	:: r_drain ->
		r_drain = false;
		grant_next(MAY_GRANT);
		printf("MSC: redis: undrain, granted mask %d, tokens %d %d %d\n", rmask, r_tok[0], r_tok[1], r_tok[2]);
		publish(rmask, false)
	:: else -> printf("MSC: redis: undrain of a name not drained\n")
	fi;
	r_flush()
}
#endif

/* LOST, or QUEUED to a job that held: it stops believing.  A session
 * (PAM0) runs on, but for a revoke under JOBEND (below).  JOBEND: run acts at once (SIGTERM),
 * its SIGKILL due by free_in: the lease's end when the agent keeps a
 * revoked lease (K_LOST: lease_lost() in src/agent/engine/engine.c,
 * reserved), else now; a job fenced already takes the sooner too. */
inline lose(j) {
	if
#if defined(PAM0) && JOBEND && !defined(MUT_SESSION_RUNS_ON)
	/* a login session whose revoked slot its agent keeps (K_LOST) is
	 * ended: its scope stopped at once, killed by the tick its slot may
	 * go elsewhere, the slot counted until it is gone (lease state
	 * ending: lease_lost() in src/agent/engine/engine.c, io_stop_job() in
	 * src/agent/host/units.c); lost otherwise (the slot may be free
	 * already) it runs on.  MUT_SESSION_RUNS_ON: never ended. */
	:: PAMJ(j) && a_kn[j] == K_LOST && j_st[j] == J_HOLD ->
		j_le[j] = KEPT_FOR - a_age[j]; j_st[j] = J_FENCED; j_dl[j] = 0;
		printf("MSC: job %d: session ended, killed within %d ticks\n", j, j_le[j])
	:: PAMJ(j) && !(a_kn[j] == K_LOST && j_st[j] == J_HOLD) -> skip
#elif defined(PAM0)
	:: PAMJ(j) -> skip
#endif
#if JOBEND
	:: !PAMJ(j) && j_conn[j] && (j_st[j] == J_HOLD || j_st[j] == J_FENCED) ->
		rc = (a_kn[j] == K_LOST -> KEPT_FOR - a_age[j] : 0);
		if
		:: rc < j_le[j] -> j_le[j] = rc
		:: else
		fi;
		if
		:: j_st[j] == J_HOLD -> j_st[j] = J_FENCED; j_dl[j] = 0
		:: else
		fi;
		printf("MSC: job %d: LOST, killed within %d ticks\n", j, j_le[j]);
		rc = 0
#elif FENCED_REVOKE
	/* a message: it believes until it acts on it */
	:: !PAMJ(j) && j_conn[j] && j_st[j] == J_HOLD -> j_lost[j] = true; printf("MSC: job %d: told LOST\n", j)
#else
	:: !PAMJ(j) && j_conn[j] && j_st[j] == J_HOLD -> j_st[j] = J_FENCED; j_dl[j] = 0; printf("MSC: job %d: LOST\n", j)
#endif
	:: else
	fi
}

/* a held lease is gone from Redis: LOST to a holder; a client that was
 * never told GRANTED is still waiting: queue it again */
inline gone(j) {
	if
	:: j_conn[j] && j_st[j] == J_ASK -> a_kn[j] = K_REQUEUE
	:: else -> a_kn[j] = K_NONE; lose(j)
	fi
}

/* ERROR code=permission: a holder stops believing, a waiter ends */
inline refuse(j) {
	if
	:: j_conn[j] && j_st[j] == J_HOLD -> j_st[j] = J_FENCED; j_dl[j] = 0
	:: j_conn[j] && j_st[j] == J_ASK -> j_st[j] = J_DONE; j_conn[j] = false; j_req[j] = false
	:: else
	fi
}

/* Host 0's index in Redis (HOSTLOSS): an entry written as a lease joins
 * the line, is re-asserted or adopted, removed at its release
 * (src/agent/adopt.c, host_index()); the key found gone at a renewal is
 * written again whole with the held leases (host_index_keep()).  Which
 * leases a fresh agent adopts: those its index or its record lists; the
 * record lists every lease it asked for and did not release, which is
 * every lease Redis has for the host (MUT_NO_RECORD: the index alone). */
#if HOSTLOSS
#ifdef MUT_NO_RECORD
#define LISTED(j, h) ((h) != 0 || (r_hx0 & BIT(j)))
#else
#define LISTED(j, h) 1
#endif
inline hx_add(h, j) {
	if
	:: h == 0 -> r_hx0 = r_hx0 | BIT(j)
	:: else
	fi
}
inline hx_del(h, j) {
	if
	:: h == 0 -> r_hx0 = r_hx0 & ~BIT(j)
	:: else
	fi
}
inline hx_keep(h) {
	if
	:: h == 0 && r_hx0 == 0 ->
		for (rc : 0 .. NJ - 1) {
			if
			:: MINE(rc, 0) && a_kn[rc] == K_HOLD -> r_hx0 = r_hx0 | BIT(rc)
			:: else
			fi
		}
	:: else
	fi
}
#define HX(s) ; s
#else
#define LISTED(j, h) 1
#define HX(s)
#endif

/* epoch.lua on every (re)connection, then adopt (a fresh agent:
 * src/agent/adopt.c, adopt_call() in prelude/calls.lua) or re-assert (the
 * epoch changed: Redis lost its state; src/agent/engine/engine-redis.c) */
inline s_connect(h) {
	if
	:: r_epoch == 0 ->
		g_gen++; r_epoch = g_gen;
#ifdef MUT_NO_GRACE
		r_grace = 0
#else
		r_grace = GRACE
#endif
	:: else
	fi;
	if
	:: a_epoch[h] == 0 ->
		/* a fresh agent lists its host's leases (its index in Redis and
		 * its own record: src/agent/adopt.c) and adopts them; it
		 * connects to a session's anchor again (PAM0) */
		for (ri : 0 .. NJ - 1) {
			if
			:: MINE(ri, h) && r_st[ri] != ABSENT && r_own[ri] == h && !RV(ri) && LISTED(ri, h) ->
				if
				:: r_st[ri] == HOLDER -> a_kn[ri] = K_HOLD; a_age[ri] = 0; a_tok[ri] = r_tok[ri]; FR(a_gs[ri] = r_gs[ri]); r_ttl[ri] = TTL
#ifdef PAM0
					;
					if
					:: PAMJ(ri) && j_st[ri] == J_HOLD -> j_conn[ri] = true
					:: else
					fi
#endif
				:: else -> a_kn[ri] = K_WAIT
				fi;
				printf("MSC: redis: adopt(%d) by host %d -> %d token %d\n", ri, h, r_st[ri] == HOLDER, r_tok[ri])
				HX(hx_add(h, ri))
#if FORGETS
			/* Redis has nothing of it (all of its name's keys went):
			 * its agent says whether the host's record marks it HELD
			 * and confirmed less than TTL - DRIFT ago, as a renewal's
			 * put-back asks (adopt's held), and one that held, of a
			 * name found forgotten, is adopted as forgotten with a
			 * new token and put back.  MUT_ADOPT_NO_MARK: gone (the
			 * record without the mark); MUT_ADOPT_STALE: the mark
			 * whatever its age */
#ifdef MUT_ADOPT_STALE
			:: MINE(ri, h) && r_st[ri] == ABSENT && a_rec[ri] > 0 ->
#else
			:: MINE(ri, h) && r_st[ri] == ABSENT && a_rec[ri] > 0 && a_rec[ri] - 1 < TTL - DRIFT ->
#endif
				R_FORGOT
				if
#ifndef MUT_ADOPT_NO_MARK
				:: FORGOTTEN ->
					next_token(); a_tok[ri] = r_token; a_kn[ri] = K_REASSERT; a_age[ri] = 0;
					printf("MSC: redis: adopt(%d) by host %d -> forgotten token %d\n", ri, h, r_token)
#ifdef PAM0
					;
					if
					:: PAMJ(ri) && j_st[ri] == J_HOLD -> j_conn[ri] = true
					:: else
					fi
#endif
#endif
				:: else
				fi
#endif
			:: else
			fi
		}
	:: a_epoch[h] != 0 && a_epoch[h] != r_epoch ->
		for (ri : 0 .. NJ - 1) {
			if
			/* only a lease confirmed less than a TTL ago (on this host's
			 * clock, minus the drift) was surely alive when Redis lost it:
			 * nobody else can have been granted its slot.  An older one
			 * may have expired and been granted on: it is lost. */
#ifdef MUT_REASSERT_STALE
			:: MINE(ri, h) && (a_kn[ri] == K_HOLD || a_kn[ri] == K_REASSERT) -> a_kn[ri] = K_REASSERT
#else
			:: MINE(ri, h) && (a_kn[ri] == K_HOLD || a_kn[ri] == K_REASSERT) && a_age[ri] < TTL - DRIFT ->
				a_kn[ri] = K_REASSERT
			:: MINE(ri, h) && (a_kn[ri] == K_HOLD || a_kn[ri] == K_REASSERT) && a_age[ri] >= TTL - DRIFT ->
				gone(ri)
#endif
			:: MINE(ri, h) && (a_kn[ri] == K_WAIT || a_kn[ri] == K_REQUEUE) -> a_kn[ri] = K_REQUEUE
			:: else
			fi
		}
	:: else
	fi;
	r_flush();
	/* (the record read: its age matters no more) */
	for (ri : 0 .. NJ - 1) {
		if
		:: MINE(ri, h) -> a_rec[ri] = 0
		:: else
		fi
	}
	a_epoch[h] = r_epoch;
	a_conn[h] = true;
	printf("MSC: agent %d: connected, epoch %d, grace %d ticks\n", h, r_epoch, r_grace)
}

/* A new acquire call, a new proof (lease_check() in src/agent/engine/engine.c):
 * unlike any the lease has anywhere (as 128 random bits would be); Redis
 * keeps the latest one given, so a g message carrying an earlier call's
 * proof grants nothing (the agent asks Redis).  MUT_PROOF_PER_PLACE: the
 * old rule, a new proof only with a new place in line.  Without wake
 * messages nobody reads a proof: none is drawn, which keeps those
 * searches as small as before. */
inline new_proof(j) {
	if
	:: WAKES ->
		rpf = 1;
		do
		:: rpf == a_pf[j] || rpf == r_pf[j] || rpf == wk_pf[j] || rpf == wk_spf[j] -> rpf++
		:: else -> break
		od;
		a_pf[j] = rpf;
		rpf = 0
	:: else
	fi
}

/* ------------------------------------------------------- agent -> job */

/* A confirmation (GRANTED, or RENEWED) carries how long it vouches for:
 * 2/3 TTL counted from when the agent SENT the call that Redis answered,
 * on the host's clock.  A confirmation older than that is not sent. */
inline confirm(j, tok, gs, age) {
	if
	:: j_conn[j] && (j_st[j] == J_ASK || j_st[j] == J_HOLD) ->
#ifdef MUT_FENCE_FROM_RECEIPT
		rdl = FENCE;                    /* 2/3 TTL from when it is heard */
#else
		rdl = FENCE - age;
#endif
		if
		:: rdl > 0 ->
			if
			:: j_st[j] == J_ASK -> printf("MSC: job %d: GRANTED, believes for %d ticks\n", j, rdl); j_st[j] = J_HOLD; j_dl[j] = rdl; FR(j_tok[j] = tok); FR(j_gs[j] = gs); LV(j_got[j] = true) JE(j_le[j] = TTL - age)
			:: j_st[j] == J_HOLD && j_dl[j] < rdl -> j_dl[j] = rdl JE(j_le[j] = TTL - age); printf("MSC: job %d: RENEWED, %d ticks\n", j, rdl)
			:: else
			fi;
			check_safe()
		:: else
		fi
	:: else
	fi
}

/* forget a reply once read, so that no stale field splits states */
inline rp_clear(h) {
	rp_kind[h] = RP_NONE; rp_job[h] = 0; rp_val[h] = 0; rp_tok[h] = 0;
	rp_gs[h] = 0; rp_ok[h] = 0; rp_miss[h] = 0; rp_age[h] = 0
#if FORGETS
	; rp_fg[h] = false
#endif
}

/* Kept until its anchor closes: its lease has not ended (its last
 * confirmed call is under TTL ticks old; Redis' sweep frees it at its
 * expiry).  MUT_UNHEARD_RELEASES: only when the agent heard the "r"
 * message.  MUT_REVOKE_AT_FENCE: only while its holder has not fenced. */
#ifdef MUT_UNHEARD_RELEASES
#define DEFER(j) (a_rh[j] && a_age[j] < KEPT_FOR)
#else
#define DEFER(j) (a_age[j] < KEPT_FOR)
#endif
#if FORGETS
#define PUT_BACK(h, j) (rp_fg[h] && a_age[j] < TTL - DRIFT)
#else
#define PUT_BACK(h, j) 0
#endif
inline process_reply(h) {
	rk = rp_job[h];
	if
	:: (rp_kind[h] == RP_ACQ || rp_kind[h] == RP_REASSERT) && j_st[rk] == J_DONE && a_kn[rk] == K_NONE ->
		skip    /* released after the call: Redis has forgotten it already */
	:: rp_kind[h] == RP_ACQ ->
		if
		:: rp_val[h] == 1 ->
			a_kn[rk] = K_HOLD; a_age[rk] = rp_age[h]; a_tok[rk] = rp_tok[h]; FR(a_gs[rk] = rp_gs[h]); a_pf[rk] = 0;
			confirm(rk, rp_tok[h], rp_gs[h], rp_age[h])
		:: rp_val[h] == 0 ->
			a_kn[rk] = K_WAIT; lose(rk);
			/* a waiter's age only matters to a grant by wake message:
			 * 0, or older than a tick */
			if
			:: WAKES && rp_age[h] > 0 -> a_age[rk] = 1
			:: else -> a_age[rk] = 0
			fi
		:: else -> a_kn[rk] = K_NONE; refuse(rk)
		fi
	:: rp_kind[h] == RP_RENEW ->
		for (ri : 0 .. NJ - 1) {
			if
			:: MINE(ri, h) && (rp_ok[h] & BIT(ri)) && a_kn[ri] == K_HOLD ->
				if
				:: rp_age[h] < a_age[ri] -> a_age[ri] = rp_age[h]
				:: else
				fi;
				confirm(ri, a_tok[ri], a_gs[ri], rp_age[h])
			:: MINE(ri, h) && (rp_ok[h] & BIT(ri)) && a_kn[ri] == K_WAIT && rp_age[h] == 0 ->
				a_age[ri] = 0
#if FORGETS
			/* Redis lost it and says so (the name's grace): put it
			 * back, as after a reset, if confirmed less than a TTL
			 * ago (on this host's clock, minus the drift) */
			:: MINE(ri, h) && (rp_miss[h] & BIT(ri)) && a_kn[ri] == K_HOLD && PUT_BACK(h, ri) ->
				a_kn[ri] = K_REASSERT
#endif
			:: MINE(ri, h) && (rp_miss[h] & BIT(ri)) && a_kn[ri] == K_HOLD && !PUT_BACK(h, ri) ->
#ifdef MUT_RENEW_MISSING_CONFIRMS
				confirm(ri, a_tok[ri], a_gs[ri], rp_age[h])
#elif FENCED_REVOKE
				/* lease_lost(): told LOST; kept until its anchor
				 * closes while its lease has not ended (DEFER), else
				 * released now (a lease that ran out: nothing to free) */
				if
				:: DEFER(ri) -> a_kn[ri] = K_LOST; lose(ri)
				:: else ->
					gone(ri);
					if
					:: a_kn[ri] == K_NONE -> a_kn[ri] = K_FREE
					:: else
					fi
				fi
#else
				gone(ri)
#endif
			:: MINE(ri, h) && (rp_miss[h] & BIT(ri)) && a_kn[ri] == K_WAIT ->
				a_kn[ri] = K_REQUEUE
			:: else
			fi
		}
	:: rp_kind[h] == RP_REASSERT ->
		if
		:: rp_val[h] == 1 -> a_kn[rk] = K_HOLD; a_age[rk] = rp_age[h]; confirm(rk, a_tok[rk], a_gs[rk], rp_age[h])
		:: else -> gone(rk)
		fi
	fi;
	rp_clear(h)
}

/* ------------------------------------------------------- processes */

#define REQ(j, h) (MINE(j, h) && j_req[j] && j_conn[j])
#define GONE(j, h) (MINE(j, h) && a_kn[j] != K_NONE && (j_st[j] == J_DONE || a_kn[j] == K_FREE))
#define FIX(j, h) (MINE(j, h) && (a_kn[j] == K_REASSERT || a_kn[j] == K_REQUEUE) && j_st[j] != J_DONE)
#define ASKQ(j, h) (MINE(j, h) && (a_ask[h] & BIT(j)) && a_kn[j] == K_WAIT && j_st[j] != J_DONE)
#define LEASE(j, h) (MINE(j, h) && (a_kn[j] == K_WAIT || a_kn[j] == K_HOLD))

proctype agent(byte h)
{
	byte j;
	end:
	do
	/* crash: memory gone, connections to clients and Redis gone */
	:: atomic { a_up[h] && n_crash < CRASHES ->
		n_crash++; printf("MSC: agent %d: crash\n", h);
		a_up[h] = false; a_conn[h] = false; a_epoch[h] = 0;
		a_renew[h] = false; a_ask[h] = 0; rp_clear(h);
		wk_g[h] = 0; wk_1[h] = false; wk_seen[h] = 0;
#if FENCED_REVOKE
		wk_r[h] = 0;
#endif
		for (j : 0 .. NJ - 1) {
			if
			:: MINE(j, h) -> a_rec[j] = (a_kn[j] == K_HOLD || a_kn[j] == K_REASSERT -> a_age[j] + 1 : 0); a_kn[j] = K_NONE; a_tok[j] = 0; a_age[j] = 0; a_pf[j] = 0; j_conn[j] = false; j_req[j] = false;
				wk_pf[j] = 0; wk_tok[j] = 0; FR(wk_gs[j] = 0); wk_spf[j] = 0; wk_stok[j] = 0; FR(wk_sgs[j] = 0)
#if FENCED_REVOKE
				; a_rh[j] = false
#endif
			:: else
			fi
		}
		j = 0 }
	/* restarted (socket activation, systemd's watchdog) */
	:: atomic { !a_up[h] -> a_up[h] = true }
	/* the reply of the call in flight (a TCP connection: in order) */
	:: atomic { a_up[h] && rp_kind[h] != RP_NONE -> process_reply(h) }
	/* (re)connect: epoch, adopt or re-assert */
	:: atomic { a_up[h] && !a_conn[h] && rp_kind[h] == RP_NONE -> s_connect(h) }
	/* an anchor closed: release */
	:: atomic { a_up[h] && a_conn[h] && ANY(GONE, h) ->
		if
		:: GONE(0, h) -> j = 0
		:: GONE(1, h) -> j = 1
		:: GONE(2, h) -> j = 2
		fi;
		s_release(h, j) HX(hx_del(h, j)); a_kn[j] = K_NONE; j = 0 }
	/* a client's request */
	:: atomic { a_up[h] && a_conn[h] && rp_kind[h] == RP_NONE && ANY(REQ, h) ->
		if
		:: REQ(0, h) -> j = 0
		:: REQ(1, h) -> j = 1
		:: REQ(2, h) -> j = 2
		fi;
		j_req[j] = false;
		/* the lease is in the agent's table from now on: if the reply
		 * is lost with the connection, it is asked for again */
		if
		:: a_kn[j] == K_NONE -> a_kn[j] = K_REQUEUE
		:: else
		fi;
#ifdef MUT_PROOF_PER_PLACE
		if
		:: a_kn[j] == K_REQUEUE -> new_proof(j)
		:: else
		fi;
#else
		new_proof(j);
#endif
		s_acquire(h, j, SLOTS(j), a_pf[j]) HX(hx_add(h, j)); j = 0 }
	/* after a reset: re-assert holders, queue waiters again */
	:: atomic { a_up[h] && a_conn[h] && rp_kind[h] == RP_NONE && ANY(FIX, h) ->
		if
		:: FIX(0, h) -> j = 0
		:: FIX(1, h) -> j = 1
		:: FIX(2, h) -> j = 2
		fi;
		if
		:: a_kn[j] == K_REASSERT -> s_reassert(h, j, a_tok[j])
		:: else -> a_kn[j] = K_WAIT; new_proof(j); s_acquire(h, j, SLOTS(j), a_pf[j])
		fi
		HX(hx_add(h, j));
		j = 0 }
	/* renewal timer: one call for all leases of the name */
	:: atomic { a_up[h] && a_conn[h] && rp_kind[h] == RP_NONE && a_renew[h] ->
		a_renew[h] = false;
		if
		:: ANY(LEASE, h) -> s_renew(h) HX(hx_keep(h))
		:: else
		fi }
	/* a wake message: a grant only with the proof this agent gave with
	 * its last acquire call for the waiter, and while the waiter's last confirmation
	 * is younger than a tick (TTL/3); else a hint to ask Redis. Redis
	 * grants a waiter on the expiry of that confirmation, and the holder's
	 * belief counts from it too (confirm with its age), so the age rule is
	 * not what keeps it safe: it leaves the new holder most of a lease. */
	:: atomic { a_up[h] && (wk_g[h] != 0 || wk_1[h] || WKR(h)) ->
#if FENCED_REVOKE
		/* r LEASE (revoked_heard): a holder of this host named: renew
		 * the name now; only Redis' answer makes it lost */
		for (j : 0 .. NJ - 1) {
			if
			:: MINE(j, h) && (wk_r[h] & BIT(j)) && a_kn[j] == K_HOLD ->
				a_rh[j] = true; a_renew[h] = a_conn[h];
				printf("MSC: agent %d: hears lease %d revoked\n", h, j)
			:: else
			fi
		}
		wk_r[h] = 0;
#endif
		for (j : 0 .. NJ - 1) {
			if
			:: MINE(j, h) && a_kn[j] == K_WAIT && (wk_1[h] || (wk_g[h] & BIT(j))) ->
				if
#ifdef MUT_WAKE_GRANTS
				:: wk_g[h] & BIT(j) -> a_kn[j] = K_HOLD; confirm(j, 0, 0, 0)
#else
				:: (wk_g[h] & BIT(j)) && a_pf[j] != 0 && wk_pf[j] == a_pf[j] && a_age[j] == 0 ->
					printf("MSC: agent %d: job %d granted by wake message, token %d\n", h, j, wk_tok[j]);
					a_kn[j] = K_HOLD; a_pf[j] = 0; a_tok[j] = wk_tok[j]; FR(a_gs[j] = wk_gs[j]);
					confirm(j, wk_tok[j], wk_gs[j], a_age[j])
#endif
				:: else -> a_ask[h] = a_ask[h] | BIT(j)
				fi
			:: else
			fi;
			if
			:: MINE(j, h) && (wk_g[h] & BIT(j)) ->
				wk_spf[j] = wk_pf[j]; wk_stok[j] = wk_tok[j]; FR(wk_sgs[j] = wk_gs[j]);
				wk_pf[j] = 0; wk_tok[j] = 0; FR(wk_gs[j] = 0)
			:: else
			fi
		}
		wk_seen[h] = wk_seen[h] | wk_g[h];
		wk_g[h] = 0; wk_1[h] = false; j = 0 }
	/* ask Redis for a waiter (after a wake, or the safety tick) */
	:: atomic { a_up[h] && a_conn[h] && rp_kind[h] == RP_NONE && ANY(ASKQ, h) ->
		if
		:: ASKQ(0, h) -> j = 0
		:: ASKQ(1, h) -> j = 1
		:: ASKQ(2, h) -> j = 2
		fi;
		a_ask[h] = a_ask[h] & ~BIT(j);
#ifndef MUT_PROOF_PER_PLACE
		new_proof(j);
#endif
		s_acquire(h, j, SLOTS(j), a_pf[j]); j = 0 }
	od
}

proctype job(byte j)
{
	end:
	do
	/* ask: create the anchor, connect, send the request */
	:: atomic { j_st[j] == J_IDLE && a_up[HOST(j)] -> printf("MSC: job %d: asks\n", j); j_st[j] = J_ASK; j_conn[j] = true; j_req[j] = true }
	/* the agent went away: connect again and ask again, same lease (a
	 * login session never asks again: one waiting gives up, as
	 * pam_fleetsem's open_session fails when the agent's connection
	 * ends; its anchor closes) */
	:: atomic { (j_st[j] == J_ASK || j_st[j] == J_HOLD) && !PAMJ(j) && !j_conn[j] && !j_frz[j] && a_up[HOST(j)] ->
		j_conn[j] = true; j_req[j] = true }
	:: atomic { j_st[j] == J_ASK && PAMJ(j) && !j_conn[j] -> j_st[j] = J_DONE; j_req[j] = false }
	/* a holder ends: the anchor closes */
	:: atomic { j_st[j] == J_HOLD && !j_frz[j] -> printf("MSC: job %d: ends\n", j); j_st[j] = J_DONE; j_dl[j] = 0 JE(j_le[j] = 0); j_conn[j] = false; j_req[j] = false }
	/* its own timer (drift: it fires between the deadline and DRIFT later) */
#ifndef MUT_NO_FENCE
	:: atomic { j_st[j] == J_HOLD && !j_frz[j] && !PAMJ(j) && j_dl[j] <= 0 -> j_st[j] = J_FENCED; j_dl[j] = 0 UNHEARD(j); printf("MSC: job %d: fences itself\n", j) }
#endif
#if FENCED_REVOKE
	/* a holder told LOST acts on it (--on-lost, a unit stopped) */
	:: atomic { j_st[j] == J_HOLD && j_lost[j] && !j_frz[j] -> j_st[j] = J_FENCED; j_dl[j] = 0; printf("MSC: job %d: acts on LOST\n", j) }
#endif
	/* a fenced holder acts on --on-lost=stop: it ends (JOBEND: its
	 * process exits on SIGTERM, or later: it is killed at the tick) */
	:: atomic { j_st[j] == J_FENCED -> j_st[j] = J_DONE JE(j_le[j] = 0); j_conn[j] = false; j_req[j] = false }
	/* a waiter gives up (timeout, DENIED) */
	:: atomic { GIVEUP && j_st[j] == J_ASK -> j_st[j] = J_DONE; j_conn[j] = false; j_req[j] = false }
#ifdef FREEZE
	/* frozen holders wake up and may write before they look at the clock */
	:: atomic { j_frz[j] -> j_frz[j] = false }
	/* a holder writes to the fenced resource with its token */
	:: atomic { j_st[j] == J_HOLD && !j_frz[j] ->
#ifdef MUT_NO_TOKEN_CHECK
		if
		:: true ->
#else
		if
		:: j_tok[j] >= fr_last ->
#endif
			/* accepted: no one granted after this holder wrote before it */
			printf("MSC: resource: accepts job %d's write, token %d\n", j, j_tok[j]);
			assert(j_gs[j] >= fr_gs);
			fr_last = j_tok[j]; fr_gs = j_gs[j]
		:: else                         /* rejected: a stale token */
		fi }
#endif
	od
}

/* Redis' clock, the hosts' clocks, the renewal and safety timers */
#ifdef SYNC
#define QUIET(h) (!a_up[h] || (a_conn[h] && rp_kind[h] == RP_NONE && !a_renew[h] && !ANY(ASKQ, h) \
	&& wk_g[h] == 0 && !wk_1[h] && !ANY(REQ, h) && !ANY(GONE, h) && !ANY(FIX, h)))
#endif

/* PROMPT (a mask of hosts): those hosts' agents are never paused past a
 * tick, and restart within one (systemd's watchdog: 3 s of a 15 s lease):
 * the clock waits for their renewals, requests, releases and re-assertions.
 * PAM0 needs it of host 0 (HOSTLOSS): an agent paused or gone longer than
 * a lease leaves a session running past it whatever its index (SCOPE.md,
 * "Units and sessions whose watcher is the agent"). */
#ifndef PROMPT
#define PROMPT 0
#endif
#define PROMPT_OK(h) (!(PROMPT & BIT(h)) || a_up[h] && a_conn[h] && rp_kind[h] == RP_NONE && !a_renew[h] \
	&& !ANY(REQ, h) && !ANY(GONE, h) && !ANY(FIX, h))

proctype clock()
{
	byte h, j;
	end:
	do
	:: d_step {
#ifdef SYNC
		QUIET(0) && QUIET(1) ->
#else
		g_gs < MAXG && PROMPT_OK(0) && PROMPT_OK(1) ->  /* the bound: time stops after MAXG grants */
#endif
		printf("MSC: --- tick ---\n");
		/* holders' own timers; a frozen holder's does not run */
		for (j : 0 .. NJ - 1) {
			if
			:: j_st[j] == J_HOLD && !j_frz[j] && !PAMJ(j) ->
				j_dl[j]--;
#ifndef MUT_NO_FENCE
				if
				:: j_dl[j] <= -DRIFT -> j_st[j] = J_FENCED; j_dl[j] = 0 UNHEARD(j); printf("MSC: job %d: fences itself\n", j)
				:: else
				fi
#else
				if
				:: j_dl[j] < -DRIFT -> j_dl[j] = -DRIFT
				:: else
				fi
#endif
			:: else
			fi
		}
#if JOBEND
		/* run's SIGKILL (kill_by()): a job fenced or told LOST is gone
		 * on the tick its slot may be granted elsewhere, before Redis'
		 * expiry in it */
		for (j : 0 .. NJ - 1) {
			if
			:: j_st[j] == J_FENCED || j_st[j] == J_HOLD && !PAMJ(j) ->
				if
				:: j_le[j] > 0 -> j_le[j]--
				:: else
				fi;
#ifndef MUT_JOB_OUTLIVES
				if
				:: j_st[j] == J_FENCED && j_le[j] == 0 ->
					j_st[j] = J_DONE; j_conn[j] = false; j_req[j] = false; j_le[j] = 0; printf("MSC: job %d: killed\n", j)
				:: else
				fi
#else
				skip
#endif
			:: else
			fi
		}
#endif
		if
		:: th_st == 1 ->
			th_dl--;
			if
			:: th_dl <= -DRIFT -> th_st = 2; th_dl = 0
			:: else
			fi
		:: else
		fi;
#if REVERTS
		/* the kept data's expiries run on with the clock */
		for (j : 0 .. NJ - 1) {
			if
			:: k_state == 1 && k_ttl[j] > 0 -> k_ttl[j]--
			:: else
			fi
		}
#endif
#if REVOKES
		/* a revoked holder believes FENCE + DRIFT ticks at most (unless
		 * frozen: its own timer stops with it; FREEZE).  A session has
		 * no fence (PAM0): its agent ends it, and it counts until then
		 * (JOBEND's "at most N"). */
		for (j : 0 .. NJ - 1) {
			if
			:: g_rv[j] && j_st[j] == J_HOLD && !j_frz[j] && !PAMJ(j) -> g_rvt[j]++; assert(g_rvt[j] <= FENCE + DRIFT)
			:: else
			fi
		}
#endif
		/* Redis: expiry (design "Leases": lost after the TTL, never before) */
		rfreed = false;
		for (j : 0 .. NJ - 1) {
			if
			:: r_st[j] != ABSENT ->
				r_ttl[j]--;
				if
				:: r_ttl[j] == 0 -> r_leave(j); rfreed = true; printf("MSC: redis: lease %d expires\n", j)
				:: else
				fi
			:: else
			fi
		}
		r_flush();
		if
		:: r_grace > 0 -> r_grace--
		:: else
		fi;
#if FORGETS
		if
		:: r_ngrace > 0 -> r_ngrace--
		:: else
		fi;
#endif
#if CENSUSLOSS
		if
		:: r_cyoung > 0 -> r_cyoung--
		:: else
		fi;
#endif
		if
		:: rfreed -> publish(0, true)
		:: else
		fi;
		/* agents: the age of each held lease's last confirmation (in
		 * the host's record too, while its agent is away) */
		for (j : 0 .. NJ - 1) {
			if
			:: a_rec[j] > 0 && a_rec[j] <= TTL -> a_rec[j]++
			:: else
			fi;
			if
			:: (a_kn[j] == K_HOLD || a_kn[j] == K_REASSERT) && a_age[j] < TTL -> a_age[j]++
			:: (a_kn[j] == K_HOLD || a_kn[j] == K_REASSERT) && a_age[j] >= TTL
			:: WAKES && a_kn[j] == K_WAIT -> a_age[j] = 1
			:: else -> a_age[j] = 0
			fi
		}
		/* agents: the renewal timer (TTL/3) and the safety tick */
#if RENEW > 1
		g_phase = (g_phase + 1) % RENEW;
#define TIMERS (g_phase == 0)
#else
#define TIMERS 1
#endif
		for (h : 0 .. NH - 1) {
			if
			:: rp_kind[h] != RP_NONE && rp_age[h] < FENCE -> rp_age[h]++
			:: else
			fi;
			if
			:: TIMERS ->
				a_renew[h] = a_up[h] && ANY(LEASE, h);
				a_ask[h] = 0;
				for (j : 0 .. NJ - 1) {
					if
					:: MINE(j, h) && a_up[h] && a_kn[j] == K_WAIT -> a_ask[h] = a_ask[h] | BIT(j)
					:: else
					fi
				}
			:: else
			fi
		}
		h = 0; j = 0
	}
	od
}

#if FENCED_REVOKE
#define WKR_LOST(h) wk_r[h] = 0
#else
#define WKR_LOST(h) skip
#endif
/* the g messages pending for host h's leases are gone */
inline wake_lost(h) {
	for (ri : 0 .. NJ - 1) {
		if
		:: MINE(ri, h) -> wk_pf[ri] = 0; wk_tok[ri] = 0; FR(wk_gs[ri] = 0)
		:: else
		fi
	}
}

/* the g messages host h had for its leases come again (those with none
 * pending: a pending one stays as it is) */
inline wake_again(h) {
	for (ri : 0 .. NJ - 1) {
		if
		:: MINE(ri, h) && (wk_seen[h] & BIT(ri)) && !(wk_g[h] & BIT(ri)) ->
			wk_pf[ri] = wk_spf[ri]; wk_tok[ri] = wk_stok[ri]; FR(wk_gs[ri] = wk_sgs[ri])
		:: else
		fi
	}
}

/* faults the environment causes */
proctype env()
{
	byte h;
	end:
	do
	/* Redis restarts empty, or a failover loses the last writes: one event
	 * (design, "Redis restarts"); replies in flight may be
	 * lost with the connection */
	:: atomic { n_reset < RESETS ->
		n_reset++; printf("MSC: redis: reset (all state lost)\n");
		for (h : 0 .. NJ - 1) { r_forget(h) }
		qn = 0; r_token = 0; r_token_set = false; r_epoch = 0; r_grace = 0;
		c_held = 0; c_line = 0; c_lim = L_NONE; c_at = 0;
#if DRAIN
		r_drain = false;
#endif
#if FORGETS
		r_name = false; r_census = false; r_ngrace = 0;
#endif
#if CENSUSLOSS
		r_centry = false; r_cyoung = 0;
#endif
		for (h : 0 .. NH - 1) { a_conn[h] = false }
		if
		:: rp_clear(0)
		:: skip
		fi;
		if
		:: rp_clear(1)
		:: skip
		fi;
		h = 0 }
#if REVERTS
	/* a master's data kept as it is: it stops following (a reset must
	 * come between, as another master takes over, for it to matter) */
	:: atomic { k_state == 0 && r_epoch != 0 -> k_state = 1;
		printf("MSC: redis: the master's data is kept (it will stop following)\n");
		for (h : 0 .. NJ - 1) {
			k_st[h] = r_st[h]; k_own[h] = r_own[h]; k_tok[h] = r_tok[h]; FR(k_gs[h] = r_gs[h]); k_pf[h] = r_pf[h]; k_q[h] = q[h];
			k_ttl[h] = r_ttl[h]
		}
		k_qn = qn; k_token = r_token; k_token_set = r_token_set; k_epoch = r_epoch;
		k_held = c_held; k_line = c_line; k_lim = c_lim; k_at = c_at;
#if DRAIN
		k_drain = r_drain;
#endif
		h = 0 }
	/* ... and a failover makes it master again after another one: its
	 * leases as they were, those whose expiry has passed swept (as the
	 * first script there does, granting nothing).  Tokens: the tokens'
	 * clock is above every token issued (the time since its data was
	 * written is no step in a new epoch's era); the mutant's clock went
	 * back with the data. */
	:: atomic { k_state == 1 && n_reset > 0 && r_epoch != k_epoch -> k_state = 2;
		printf("MSC: redis: a failover back to the master that never caught up\n");
		for (h : 0 .. NJ - 1) {
			r_st[h] = k_st[h]; r_own[h] = k_own[h]; r_tok[h] = k_tok[h]; FR(r_gs[h] = k_gs[h]); r_pf[h] = k_pf[h]; q[h] = k_q[h];
			r_ttl[h] = k_ttl[h]
		}
		qn = k_qn;
		c_held = k_held; c_line = k_line; c_lim = k_lim; c_at = k_at;
		for (h : 0 .. NJ - 1) {
			if
			:: r_st[h] != ABSENT && r_ttl[h] == 0 -> r_uncount(h); r_forget(h)
			:: else
			fi
		}
#if DRAIN
		r_drain = k_drain;
#endif
#ifdef MUT_REVERT_SAME_EPOCH
		r_epoch = k_epoch; r_grace = 0;
		r_token = k_token; r_token_set = k_token_set;
#else
		g_gen++; r_epoch = g_gen; r_grace = GRACE;
		r_token = (k_token > g_clock + RAW -> k_token : g_clock + RAW); r_token_set = true;
#endif
		for (h : 0 .. NH - 1) { a_conn[h] = false }
		if
		:: rp_clear(0)
		:: skip
		fi;
		if
		:: rp_clear(1)
		:: skip
		fi;
		h = 0 }
#endif
#if FORGETS
	/* Redis loses the name's keys while it stays up (a DEL, eviction):
	 * holders, queue, waiters, records, counters, token, drain; nobody's
	 * connection drops, no epoch changes.  Or FLUSHALL: the census and
	 * the epoch key (with a reset's grace) too. */
	:: atomic { n_forget < FORGETS ->
		n_forget++;
		for (h : 0 .. NJ - 1) { r_forget(h) }
		qn = 0; r_token = 0; r_token_set = false;
		c_held = 0; c_line = 0; c_lim = L_NONE; c_at = 0;
#if DRAIN
		r_drain = false;
#endif
		r_name = false; r_ngrace = 0;
		if
		:: printf("MSC: redis: the name's keys lost\n")
		:: r_census = false; r_grace = 0;
#if CENSUSLOSS
			r_centry = false; r_cyoung = 0;
#endif
#if CRASHES || RESETS
			r_epoch = 0;            /* (read only by an agent that connects) */
#endif
			printf("MSC: redis: FLUSHALL\n")
		fi;
		r_flush();
		h = 0 }
#endif
#if CLOCKLOSS
	/* the fleet clock key lost alone (a DEL, eviction) */
	:: atomic { n_clock_loss < CLOCKLOSS -> n_clock_loss++; r_clock_gone = true; printf("MSC: redis: the fleet clock key lost\n") }
#endif
#if CENSUSLOSS
	/* the census lost alone; a call on another name may make it again,
	 * young, without this name */
	:: atomic { n_census_loss < CENSUSLOSS && r_census -> n_census_loss++;
		r_census = false; r_centry = false; r_cyoung = 0; printf("MSC: redis: the census lost\n") }
	:: atomic { n_census_loss > 0 && !r_census -> r_census = true; r_cyoung = TTL;
		printf("MSC: redis: a call on another name makes the census again\n") }
#endif
#if HOSTLOSS
	/* host 0's index lost alone (a DEL, an expiry) */
	:: atomic { n_host_loss < HOSTLOSS && r_hx0 != 0 -> n_host_loss++; r_hx0 = 0; printf("MSC: redis: host 0's index lost\n") }
#endif
#if USTEPS
	/* Redis' wall clock stepped forward by less than the scripts notice:
	 * taken as time, every expiry and grace comes USTEP ticks sooner
	 * (the leases that ran out are dropped by the next script: here) */
	:: atomic { n_ustep < USTEPS ->
		n_ustep++; printf("MSC: redis: its clock stepped %d ticks forward, unnoticed\n", USTEP);
		rfreed = false;
		for (h : 0 .. NJ - 1) {
			if
			:: r_st[h] != ABSENT && r_ttl[h] <= USTEP -> r_leave(h); rfreed = true; printf("MSC: redis: lease %d expires\n", h)
			:: r_st[h] != ABSENT && r_ttl[h] > USTEP -> r_ttl[h] = r_ttl[h] - USTEP
			:: else
			fi
		}
		r_flush();
		r_grace = (r_grace > USTEP -> r_grace - USTEP : 0);
#if FORGETS
		r_ngrace = (r_ngrace > USTEP -> r_ngrace - USTEP : 0);
#endif
		if
		:: rfreed -> publish(0, true)
		:: else
		fi;
		h = 0 }
#endif
	/* Redis' wall clock stepped forward (an NTP step, a restored VM), and
	 * later put right: tokens on TIME run ahead of the tokens' clock */
	:: atomic { n_step < STEPS && g_step == 0 -> n_step++; g_step = STEP;
		printf("MSC: redis: its clock stepped %d forward\n", STEP) }
	:: atomic { g_step != 0 -> g_step = 0; printf("MSC: redis: its clock put right\n") }
	/* a wake message lost */
	:: atomic { n_loss < LOSSES && (wk_g[0] != 0 || wk_1[0] || WKR(0)) -> n_loss++; wk_g[0] = 0; wk_1[0] = false; WKR_LOST(0); wake_lost(0) }
	:: atomic { n_loss < LOSSES && (wk_g[1] != 0 || wk_1[1] || WKR(1)) -> n_loss++; wk_g[1] = 0; wk_1[1] = false; WKR_LOST(1); wake_lost(1) }
	/* a wake message delivered again (late), as it was */
	:: atomic { n_dup < DUPS && wk_seen[0] != 0 -> n_dup++; wake_again(0); wk_g[0] = wk_g[0] | wk_seen[0] }
	:: atomic { n_dup < DUPS && wk_seen[1] != 0 -> n_dup++; wake_again(1); wk_g[1] = wk_g[1] | wk_seen[1] }
#if REVOKES
	/* root (on any host) revokes job 0's held lease: released as its
	 * owner would */
	:: atomic { n_revoke < REVOKES && r_st[0] == HOLDER && j_st[0] == J_HOLD ->
		n_revoke++; g_rv[0] = true; printf("MSC: root: revokes lease 0\n");
#if !FENCED_REVOKE
		s_release(r_own[0], 0) }
#else
		h = r_own[0];
		if
#if defined(MUT_REVOKE_AT_FENCE)
		/* the rule before: its expiry moved to its fence point (its
		 * last renewal + FENCE), freed now when past it */
		:: r_ttl[0] > TTL / 3 ->
			r_ttl[0] = r_ttl[0] - TTL / 3; r_rv[0] = true; r_flush();
			printf("MSC: redis: lease 0 revoked, expires in %d ticks\n", r_ttl[0])
		:: else -> s_release(h, 0)
#elif !defined(MUT_REVOKE_AT_ONCE)
		/* taken back, counted until released or run out (its expiry
		 * as it is: its last renewal + TTL) */
		:: true ->
			r_rv[0] = true; r_flush();
			printf("MSC: redis: lease 0 revoked, expires in %d ticks\n", r_ttl[0])
#else
		:: true -> s_release(h, 0)      /* the mutant: freed now */
#endif
		fi;
		/* "r LEASE" to its agent, if subscribed */
		if
		:: WAKES && a_up[h] && a_conn[h] -> wk_r[h] = wk_r[h] | BIT(0)
		:: else
		fi;
		h = 0 }
#endif
#endif
	/* a user on host 1 names job 0's lease (seen in status): release it */
	:: atomic { n_stray < STRAYS && a_up[1] && a_conn[1] && r_st[0] != ABSENT ->
		n_stray++; s_release(1, 0) }
	/* ... or ask with it: the answer must not be a grant */
	:: atomic { n_stray < STRAYS && a_up[1] && a_conn[1] && rp_kind[1] == RP_NONE && r_st[0] != ABSENT ->
		n_stray++;
		s_acquire(1, 0, SL0, 0);
		if
		:: rp_val[1] == 1 -> th_st = 1; th_dl = FENCE; check_safe()
		:: else
		fi;
		rp_clear(1) }
#ifdef FREEZE
	/* a holder freezes (SIGSTOP, a VM paused): its timer stops with it */
	:: atomic { j_st[0] == J_HOLD && !j_frz[0] && !j_frz[1] -> j_frz[0] = true; printf("MSC: job 0: frozen\n") }
	:: atomic { j_st[1] == J_HOLD && !j_frz[0] && !j_frz[1] -> j_frz[1] = true; printf("MSC: job 1: frozen\n") }
#endif
	od
}

#if DRAIN
/* The operator (root on some host) drains the name once and undrains it
 * once, at any time, through an agent that is connected (one that has
 * read the epoch, so the grace it passes is Redis' own). */
#define OP_AGENT ((a_up[0] && a_conn[0]) || (a_up[1] && a_conn[1]))
proctype operator()
{
	end:
	do
	:: atomic { op_st == 0 && OP_AGENT -> op_st = 1; s_drain() }
	:: atomic { op_st == 1 && OP_AGENT -> op_st = 2; s_undrain() }
	od
}
#endif

init {
	atomic {
		run clock();
		run env();
		run agent(0);
		run agent(1);
		run job(0);
		run job(1);
		if
		:: NJ > 2 -> run job(2)
		:: else
		fi;
#if DRAIN
		run operator();
#endif
		a_up[0] = true; a_up[1] = true
	}
}

#ifdef LIVENESS
/* every waiter eventually gets in (holders finish, faults stop) */
ltl live { [] ((j_st[0] == J_ASK -> <> j_got[0]) && (j_st[1] == J_ASK -> <> j_got[1])
#if NJ > 2
	&& (j_st[2] == J_ASK -> <> j_got[2])
#endif
	) }
#endif
