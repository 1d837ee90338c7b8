/* SPDX-License-Identifier: MIT */
#pragma once

/* The client side of the agent protocol, shared by the CLI and the PAM
 * module: connect (checking who the agent is), ask, read replies. */

#include <stdint.h>
#include <sys/types.h>

#include "protocol.h"
#include "socket-util.h"

/* sysexits.h codes, which `fleetsem` returns. */
#define EXIT_USAGE 64           /* EX_USAGE */
#define EXIT_UNAVAILABLE 69     /* EX_UNAVAILABLE: agent or Redis unavailable */
#define EXIT_SOFTWARE 70        /* EX_SOFTWARE */
#define EXIT_CANTCREAT 73       /* EX_CANTCREAT */
#define EXIT_TEMPFAIL 75        /* EX_TEMPFAIL: no slot within the wait */
#define EXIT_NOPERM 77          /* EX_NOPERM */

typedef enum ReplyKind {
        REPLY_QUEUED,
        REPLY_GRANTED,
        REPLY_DENIED,
        REPLY_ERROR,
        REPLY_LOST,
        REPLY_RELEASED,
} ReplyKind;

typedef struct Reply {
        ReplyKind kind;
        uint32_t position;
        uint32_t held;
        uint32_t slots;
        uint64_t token;
        uint64_t since_ms;
        char lease[LEASE_ID_LEN + 1];   /* GRANTED */
        char code[32];          /* ERROR code=, DENIED/LOST reason= */
        char message[512];      /* ERROR message=, DENIED/LOST reason= in full */
} Reply;

/* The namespace clients use: explicit, else $FLEETSEM_NAMESPACE, else the default. */
const char *client_namespace(const char *explicit_ns);

/* Connects to @ns/agent, trusting uid 0 or agent_uid, and sends req. */
int client_send_request(const char *ns, uid_t agent_uid, usec_t timeout, const Request *req, int *ret_fd);

/* Parses one reply line; -EBADMSG when it is not one. */
int reply_parse(const char *line, size_t len, Reply *ret);

/* Reads the next line, or reply, before deadline (CLOCK_MONOTONIC; with
 * USEC_INFINITY, bounded by the socket's own timeouts instead).
 * -ETIMEDOUT when none came in time, -ECONNRESET when the agent closed the
 * connection. */
int client_read_line(int fd, LineReader *lr, usec_t deadline, char **ret_line, size_t *ret_len);
int client_read_reply(int fd, LineReader *lr, usec_t deadline, Reply *ret);

/* The exit code for an ERROR reply's code. */
int exit_code_for_error(const char *code);
