/* SPDX-License-Identifier: MIT */
#pragma once

/* The client side of the agent protocol, shared by the CLI and the PAM
 * module: connect (checking who the agent is), ask, read replies. */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "protocol.h"
#include "socket-util.h"

/* sysexits.h codes, which `fleetsem` returns. */
#define EXIT_USAGE 64           /* EX_USAGE */
#define EXIT_DATAERR 65         /* EX_DATAERR: revoke: no such lease holds a slot */
#define EXIT_UNAVAILABLE 69     /* EX_UNAVAILABLE: agent or Redis unavailable */
#define EXIT_SOFTWARE 70        /* EX_SOFTWARE */
#define EXIT_CANTCREAT 73       /* EX_CANTCREAT */
#define EXIT_TEMPFAIL 75        /* EX_TEMPFAIL: no slot within the wait */
#define EXIT_NOPERM 77          /* EX_NOPERM */
#define EXIT_CONFIG 78          /* EX_CONFIG: no number of slots asked for, and no fleet limit */

#define TTL_MS_MAX (24ULL * 3600 * 1000)       /* the longest lease TTL a reply may carry */

/* poll()'s timeout from now until deadline (-1 for USEC_INFINITY). */
int usec_to_poll_ms(usec_t now, usec_t deadline);

typedef enum ReplyKind {
        REPLY_QUEUED,
        REPLY_GRANTED,
        REPLY_DENIED,
        REPLY_ERROR,
        REPLY_LOST,
        REPLY_RELEASED,
        REPLY_RENEWED,
} ReplyKind;

typedef struct Reply {
        ReplyKind kind;
        uint32_t position;
        uint32_t held;
        uint32_t slots;
        uint64_t token;
        uint64_t since_ms;
        uint32_t limit;         /* QUEUED, DENIED, GRANTED: the limit in force; 0: not said */
        uint64_t ttl_ms;        /* GRANTED, RENEWED: the lease TTL; 0: not said (no self-fencing) */
        uint64_t free_in_ms;    /* LOST: ms until the slot may be granted elsewhere at the earliest;
                                 * UINT64_MAX: not said (an older agent) */
        uint64_t grace_ms;      /* QUEUED: no slot granted for that long after a reset; 0: none */
        const char *grace_why;  /* QUEUED with grace_ms: why, in words (grace_why_text()) */
        char lease[LEASE_ID_LEN + 1];   /* GRANTED */
        char code[32];          /* ERROR code=, DENIED/LOST reason= */
        char message[512];      /* ERROR message=, DENIED/LOST reason= in full */
        char drained[512];      /* QUEUED, DENIED: the name is drained: "by WHO since WHEN: REASON"; "" not */
} Reply;

/* The namespace clients use: explicit, else $FLEETSEM_NAMESPACE, else the default. */
const char *client_namespace(const char *explicit_ns);

/* Connects to @ns/agent and checks with SO_PEERCRED that it runs as root or
 * as agent_uid, before deadline (CLOCK_MONOTONIC) whatever the agent does: a
 * full listen backlog (an agent that is stopped, or one whose backlog
 * someone filled) is tried again until the deadline. With cancel_fd >= 0 (a
 * signalfd), gives up as soon as it is readable. -ENOENT: no agent; -EPERM:
 * an untrusted process holds the name; -EAGAIN: it took no connection
 * before the deadline; -ECANCELED. The fd is non-blocking. */
int client_connect(const char *ns, uid_t agent_uid, usec_t deadline, int cancel_fd, int *ret_fd);

/* client_connect(), then sends req before deadline; -ETIMEDOUT when the
 * agent took the connection but not the request. */
int client_send_request_until(const char *ns, uid_t agent_uid, usec_t deadline, int cancel_fd, const Request *req,
                              int *ret_fd);
/* The same with a timeout from now, and no cancel_fd. */
int client_send_request(const char *ns, uid_t agent_uid, usec_t timeout, const Request *req, int *ret_fd);

/* Parses one reply line; -EBADMSG when it is not one. */
int reply_parse(const char *line, size_t len, Reply *ret);

/* Reads the next line, or reply, before deadline (CLOCK_MONOTONIC;
 * USEC_INFINITY: none).
 * -ETIMEDOUT when none came in time, -ECONNRESET when the agent closed the
 * connection. */
int client_read_line(int fd, LineReader *lr, usec_t deadline, char **ret_line, size_t *ret_len);
int client_read_reply(int fd, LineReader *lr, usec_t deadline, Reply *ret);

/* What a failure of client_connect() or of a read means, for people:
 * "no agent on @NS/agent", …. */
#define CLIENT_ERROR_TEXT_MAX 192
const char *client_error_text(int error, const char *ns, char *buf, size_t size);

/* The limit in force a reply tells (a missing limit= means the slots asked for). */
uint32_t reply_limit(const Reply *r, uint32_t asked);

/* When the limit in force is below what was asked for, writes
 * "NAME is limited to L at once by its current holders (ASKED_WHAT S)" into
 * buf and returns true; otherwise false. */
bool limit_note(const char *name, uint32_t limit, uint32_t asked, const char *asked_what, char *buf, size_t size);
/* When a QUEUED or DENIED reply says the wait, or the refusal, is the
 * grace after Redis lost or began its state (a first use: no slot is in
 * use), writes why and for how long into buf and returns true. */
bool grace_note(const char *name, const Reply *rep, char *buf, size_t size);

/* "NAME is drained by …: no new slot is granted until …" when rep says the
 * name is drained; false otherwise. */
bool drain_note(const char *name, const Reply *rep, char *buf, size_t size);
/* The exit code for an ERROR reply's code (outcome.c: the same as
 * outcome_exit_code() gives). */
int exit_code_for_error(const char *code);
