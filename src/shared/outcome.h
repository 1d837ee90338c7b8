/* SPDX-License-Identifier: MIT */
#pragma once

/* What an ACQUIRE came to, as every front-end (the PAM module, `fleetsem
 * acquire`, `fleetsem run`) must see it: each reply line of the agent, and
 * each way of failing to reach it, is classified here and nowhere else.
 *
 *   GRANTED      the slot is held
 *   QUEUED       waiting in line (progress)
 *   RENEWED      after a grant: the agent confirmed a renewal
 *   LOST         after a grant: the slot is gone
 *   REFUSED      the limiter answered no (Refusal says why), or cannot
 *                count until an operator acts (ERROR code=misconfigured: a
 *                newer library, an evicting Redis, an ACL refusal, ...)
 *   UNAVAILABLE  the limiter cannot be reached: no agent, an agent that does
 *                not answer in time or closes the connection, a process on
 *                the agent's name that is not trusted, ERROR code=unavailable
 *                (the agent cannot reach Redis)
 *   INTERNAL     a reply nobody can decode, ERROR code=redis (Redis answered
 *                with an error or nonsense), a code or reason this client
 *                does not know, a reply out of turn: a bug, never a door
 *
 * Only UNAVAILABLE may take a caller's on-error policy; everything but
 * GRANTED (and QUEUED, RENEWED, LOST on their way) denies. */

#include <stdbool.h>
#include <stddef.h>

#include "client.h"

typedef enum OutcomeKind {
        OUTCOME_GRANTED,
        OUTCOME_QUEUED,
        OUTCOME_RENEWED,
        OUTCOME_LOST,
        OUTCOME_REFUSED,
        OUTCOME_UNAVAILABLE,
        OUTCOME_INTERNAL,
} OutcomeKind;

typedef enum Refusal {
        REFUSAL_NONE,
        REFUSAL_TIMEOUT,        /* DENIED reason=timeout: no slot within the wait */
        REFUSAL_FULL,           /* DENIED reason=full: no slot free, and no wait */
        REFUSAL_DRAINED,        /* DENIED reason=drained */
        REFUSAL_UNCONFIRMED,    /* DENIED reason=unconfirmed: a grant the replicas did not confirm */
        REFUSAL_PERMISSION,     /* ERROR code=permission|anchor: not permitted */
        REFUSAL_INVALID,        /* ERROR code=usage|invalid: the request is not valid */
        REFUSAL_LIMIT,          /* ERROR code=limit: past a per-user budget of the host */
        REFUSAL_TOO_HEAVY,      /* ERROR code=too_heavy: weight above the limit in force */
        REFUSAL_NO_LIMIT,       /* ERROR code=no_limit: no slots asked for and no fleet limit */
        REFUSAL_BUSY,           /* ERROR code=busy: the agent is short of something; try again */
        REFUSAL_NOT_HELD,       /* ERROR code=not_held: the lease holds no slot (REVOKE) */
        REFUSAL_MISCONFIGURED,  /* ERROR code=misconfigured: Redis or the agent needs an operator */
} Refusal;

/* A reply line is shown at most this many bytes of it, escaped. */
#define OUTCOME_SHOWN_MAX 200
#define OUTCOME_TEXT_MAX (TEXT_ESCAPE_SIZE(sizeof(((Reply *) NULL)->message)) + 64)

typedef struct Outcome {
        OutcomeKind kind;
        Refusal refusal;                /* REFUSED: why */
        Reply reply;                    /* the reply as decoded (zero for a transport failure or INTERNAL) */
        char text[OUTCOME_TEXT_MAX];    /* for people and logs, escaped: the agent's message, what failed, or
                                         * (INTERNAL) what is wrong with the reply and the reply, cut short */
} Outcome;

/* One reply line of an ACQUIRE (without its '\n'); granted: a GRANTED came
 * before on this request (RENEWED and LOST are INTERNAL without one).
 * Fills *ret and returns its kind; never fails. */
OutcomeKind outcome_of_line(const char *line, size_t len, bool granted, Outcome *ret);

/* A failure to connect, send or read (-errno from client.h; -E2BIG from a
 * line too long, -EBADMSG from a line that is no reply): UNAVAILABLE when
 * the agent is not there, not trusted, takes no connection, does not
 * answer in time or closes the connection; INTERNAL otherwise. */
OutcomeKind outcome_of_error(int error, const char *ns, Outcome *ret);

/* The ERROR code= of a refusal (REFUSAL_NONE when code is no refusal:
 * unavailable, redis, or unknown). */
Refusal refusal_of_error_code(const char *code);
/* "timeout", "permission", …: the reason as a word. */
const char *refusal_to_string(Refusal r);
/* The refusal is of the request or of Redis as configured (invalid, too
 * heavy, no limit, misconfigured), not of this caller now. */
bool refusal_is_configuration(Refusal r);

/* The sysexits.h code `fleetsem acquire` and `fleetsem run` exit with:
 * 0 GRANTED/QUEUED/RENEWED; REFUSED: 75 timeout, full, drained,
 * unconfirmed, busy; 77 permission, limit; 64 invalid, too heavy; 78 no
 * limit, misconfigured; 65 not held; 75 LOST; 69 UNAVAILABLE; 70 INTERNAL. */
int outcome_exit_code(const Outcome *o);

const char *outcome_kind_to_string(OutcomeKind k);
