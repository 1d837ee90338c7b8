/* SPDX-License-Identifier: MIT */
#pragma once

/* The command "fleetsem run" runs in its slot: its environment, its process
 * group and the terminal's foreground, the caller's signal dispositions and
 * mask given back to it, its end. run.c decides when; this file only does. */

#include <signal.h>
#include <stdint.h>
#include <sys/types.h>

#include "macro.h"

#define JOB_RESTORED_SIGNALS 3          /* SIGINT, SIGTERM, SIGPIPE */

typedef struct Job {
        char **command;
        int tty_fd;             /* the terminal whose foreground COMMAND gets, or -EBADF */
        sigset_t caller_mask;
        struct sigaction caller_action[JOB_RESTORED_SIGNALS];
        pid_t child;            /* 0: not running */
} Job;

/* The terminal run was started in the foreground of, if any. */
int job_foreground_terminal(void);
/* Saves what COMMAND must get back, then sets up run's own signals, which
 * arrive on the signalfd in *ret_fd. */
int job_setup_signals(Job *j, int *ret_fd);
/* COMMAND, with FLEETSEM_NAME, FLEETSEM_TOKEN, FLEETSEM_LEASE and
 * FLEETSEM_ANCHOR_FD set, and the anchor inherited. */
int job_spawn(Job *j, const char *name, uint64_t token, const char *lease, int anchor_fd);
/* sig to the whole job (its process group), while it runs. */
void job_signal(Job *j, int sig);
/* Reaps the job: 1 with its exit code (128 + signal) when it ended, 0
 * while it runs; a stop (Ctrl-Z) stops run too, as a shell job would. */
int job_reap(Job *j, int *ret_code);
/* The terminal's foreground back to run. */
void job_take_terminal(const Job *j);
