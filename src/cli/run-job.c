/* SPDX-License-Identifier: MIT */
/* The command of "fleetsem run" (run-job.h). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "log.h"
#include "run-job.h"

/* The signals whose disposition run changes for itself, and gives COMMAND
 * back as its caller had them. */
static const int restored_signals[JOB_RESTORED_SIGNALS] = { SIGINT, SIGTERM, SIGPIPE };

int job_foreground_terminal(void) {
        for (int fd = STDIN_FILENO; fd <= STDERR_FILENO; fd++)
                if (isatty(fd) && tcgetpgrp(fd) == getpgrp())
                        return fd;
        return -EBADF;
}

/* SIGINT and SIGTERM reach run even when the caller ignored them (a
 * background job in a script), SIGPIPE does not kill it, SIGTTOU does not
 * stop it when it takes the terminal back. */
int job_setup_signals(Job *j, int *ret_fd) {
        sigset_t mask, block;
        int fd;

        for (size_t i = 0; i < ELEMENTSOF(restored_signals); i++)
                if (sigaction(restored_signals[i], NULL, &j->caller_action[i]) < 0)
                        return -errno;
        sigemptyset(&mask);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP);
        sigaddset(&mask, SIGCHLD);
        block = mask;
        sigaddset(&block, SIGTTOU);
        if (sigprocmask(SIG_BLOCK, &block, &j->caller_mask) < 0)
                return -errno;
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGPIPE, SIG_IGN);
        fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
        if (fd < 0)
                return -errno;
        *ret_fd = fd;
        return 0;
}

void job_signal(Job *j, int sig) {
        if (j->child > 0)
                (void) kill(-j->child, sig);
}

/* Hands the terminal's foreground to pgrp (run's back, or COMMAND's). */
static void give_terminal(const Job *j, pid_t pgrp) {
        if (j->tty_fd >= 0)
                (void) tcsetpgrp(j->tty_fd, pgrp);      /* SIGTTOU is blocked: allowed from the background */
}

void job_take_terminal(const Job *j) {
        give_terminal(j, getpgrp());
}

/* COMMAND stopped (Ctrl-Z on the terminal it had): stop as a shell job does,
 * and when our caller continues us, give COMMAND the terminal back and
 * continue it too. */
static void job_stopped(Job *j) {
        give_terminal(j, getpgrp());
        (void) raise(SIGSTOP);
        give_terminal(j, j->child);
        job_signal(j, SIGCONT);
}

int job_reap(Job *j, int *ret_code) {
        int status;

        for (;;) {
                if (j->child <= 0 || waitpid(j->child, &status, WNOHANG | (j->tty_fd >= 0 ? WUNTRACED : 0)) != j->child)
                        return 0;
                if (!WIFSTOPPED(status))
                        break;
                job_stopped(j);
        }
        *ret_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return 1;
}

typedef struct CommandEnv {
        char **env;             /* ours plus the inherited ones */
        char *ours[4];          /* FLEETSEM_NAME=, FLEETSEM_TOKEN=, FLEETSEM_LEASE=, FLEETSEM_ANCHOR_FD= */
} CommandEnv;

static void command_env_done(CommandEnv *ce) {
        for (size_t i = 0; i < ELEMENTSOF(ce->ours); i++)
                free(ce->ours[i]);
        free(ce->env);
}

/* Whether "KEY=value" sets the KEY of "KEY=...". */
static bool env_same_key(const char *assignment, const char *other) {
        return strneq(assignment, other, strcspn(other, "=") + 1);
}

/* The environment of COMMAND: ours, with FLEETSEM_NAME, FLEETSEM_TOKEN,
 * FLEETSEM_LEASE and FLEETSEM_ANCHOR_FD set. Built before vfork(), which
 * allows nothing but system calls in the child. */
static int command_env_build(const char *name, uint64_t token, const char *lease, int anchor_fd, CommandEnv *ret) {
        extern char **environ;
        CommandEnv ce = {};
        size_t n = 0, k = 0;

        while (environ[n])
                n++;
        ce.env = calloc(n + ELEMENTSOF(ce.ours) + 1, sizeof(char *));
        if (!ce.env ||
            asprintf(&ce.ours[0], "FLEETSEM_NAME=%s", name) < 0 ||
            asprintf(&ce.ours[1], "FLEETSEM_TOKEN=%" PRIu64, token) < 0 ||
            asprintf(&ce.ours[2], "FLEETSEM_LEASE=%s", lease) < 0 ||
            asprintf(&ce.ours[3], "FLEETSEM_ANCHOR_FD=%i", anchor_fd) < 0) {
                command_env_done(&ce);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                bool replaced = false;

                for (size_t j = 0; j < ELEMENTSOF(ce.ours); j++)
                        replaced = replaced || env_same_key(environ[i], ce.ours[j]);
                if (!replaced)
                        ce.env[k++] = environ[i];
        }
        for (size_t i = 0; i < ELEMENTSOF(ce.ours); i++)
                ce.env[k++] = ce.ours[i];
        *ret = ce;
        return 0;
}

static void write_str(const char *s) {
        (void) !write(STDERR_FILENO, s, strlen(s));
}

static int spawn(Job *j, const char *name, int anchor_fd, char **env) {
        pid_t parent = getpid(), pid;
        int e;

        pid = vfork();
        if (pid < 0)
                return log_error_errno(errno, "Failed to start %s: %m", j->command[0]);
        if (pid == 0) {
                /* Own process group, so signals reach the whole job, in the
                 * terminal's foreground if we had it; told when we die.
                 * The job holds a copy of the anchor (our copy of the fd
                 * table is the child's own under vfork), so the slot lives
                 * as long as any of its processes keeps it, even when we
                 * are killed. Then the caller's signal dispositions and
                 * mask, as if run were not there. */
                (void) setpgid(0, 0);
                if (j->tty_fd >= 0)
                        (void) tcsetpgrp(j->tty_fd, getpid());
                (void) prctl(PR_SET_PDEATHSIG, SIGTERM);
                if (getppid() != parent)
                        _exit(EXIT_TEMPFAIL);
                if (fcntl(anchor_fd, F_SETFD, 0) < 0)
                        _exit(EXIT_SOFTWARE);
                for (size_t i = 0; i < ELEMENTSOF(restored_signals); i++)
                        (void) sigaction(restored_signals[i], &j->caller_action[i], NULL);
                (void) sigprocmask(SIG_SETMASK, &j->caller_mask, NULL);
                execvpe(j->command[0], j->command, env);
                e = errno;
                write_str("fleetsem: ");
                write_str(name);
                write_str(": failed to run ");
                write_str(j->command[0]);
                write_str(": ");
                write_str(strerror(e));
                write_str("\n");
                _exit(e == ENOENT ? 127 : 126);
        }
        j->child = pid;
        return 0;
}

int job_spawn(Job *j, const char *name, uint64_t token, const char *lease, int anchor_fd) {
        CommandEnv ce;
        int r;

        r = command_env_build(name, token, lease, anchor_fd, &ce);
        if (r < 0)
                return log_error_errno(r, "Out of memory.");
        r = spawn(j, name, anchor_fd, ce.env);
        command_env_done(&ce);
        return r;
}
