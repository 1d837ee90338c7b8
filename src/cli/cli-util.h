/* SPDX-License-Identifier: MIT */
#pragma once

#include <getopt.h>
#include <stdint.h>
#include <sys/types.h>

#include "client.h"
#include "time-util.h"

/* The agent a command asks, the same for every command: *ns, the
 * namespace of --namespace (NULL: $FLEETSEM_NAMESPACE or the default) set
 * to the one in force, checked; *ret_uid, the uid besides root whose agent
 * we trust ($FLEETSEM_AGENT_USER, if set). 0, or EXIT_USAGE (logged). */
int cli_agent(const char **ns, uid_t *ret_uid);
/* Prints why a request failed and returns the exit code. */
int cli_request_failed(const char *ns, int error);

/* The next line of a reply of several lines (status, metrics) into m: 0,
 * or the exit code when the agent went, sent nonsense, took longer than
 * deadline or answered with an ERROR (each logged, naming what). */
int cli_read_message(int fd, LineReader *lr, usec_t deadline, const char *what, const char *timeout_text, Message *m);
/* An operator's request (drain, revoke) and its one reply line into m,
 * which must be EXPECT: 0, or the exit code (logged). */
int cli_one_request(const char *ns, uid_t agent_uid, const Request *req, const char *what, const char *expect,
                    Message *m);

/* Option values, checked alike by every command; each logs what is wrong. */
int cli_parse_slots(const char *s, uint32_t *ret);
int cli_parse_weight(const char *s, uint32_t *ret);
/* A weight above the slots asked for (0: the fleet limit's) never fits. */
int cli_check_weight(uint32_t slots, uint32_t weight);
int cli_parse_wait(const char *s, usec_t *ret);
int cli_parse_name(const char *s);
int cli_parse_reason(const char *s);          /* an operator's --reason */
int cli_parse_namespace(const char *s, const char **ret);

/* The options every verb takes, parsed in one place: a verb puts
 * CLI_COMMON_OPTIONS in its table, numbers its own long options from
 * CLI_ARG_OWN and reads its options with cli_getopt(), which takes the
 * common ones itself: --namespace checked (cli_parse_namespace()) into
 * *ns. It returns the verb's own options as getopt_long() does, -1 at the
 * end, and '?' for a common option's bad value (logged), as for an
 * unknown option, which every verb refuses with EXIT_USAGE. */
enum { CLI_ARG_NAMESPACE = 0x100, CLI_ARG_OWN };
#define CLI_COMMON_OPTIONS { "namespace", required_argument, NULL, CLI_ARG_NAMESPACE }
int cli_getopt(int argc, char *argv[], const char *shortopts, const struct option *options, const char **ns);
