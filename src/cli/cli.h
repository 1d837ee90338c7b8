/* SPDX-License-Identifier: MIT */
#pragma once

#include <sys/types.h>

int verb_run(int argc, char *argv[]);
int verb_status(int argc, char *argv[]);

/* The uid besides root whose agent we trust: $FLEETSEM_AGENT_USER, if set. */
int cli_agent_uid(uid_t *ret);
/* Prints why a request failed and returns the exit code. */
int cli_request_failed(const char *ns, int error);
