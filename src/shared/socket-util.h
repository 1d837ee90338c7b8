/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include "macro.h"
#include "time-util.h"

/* "@NAMESPACE/agent" and "@NAMESPACE/lease/LEASE_ID" (abstract namespace). */
int sockaddr_abstract(const char *ns, const char *suffix, const char *lease,
                      struct sockaddr_un *ret, socklen_t *ret_len);

/* The anchor: a listening socket on @NS/lease/LEASE, never accepted, made
 * non-blocking. Whoever holds the last copy of the fd holds the slot. */
int anchor_create(const char *ns, const char *lease, int *ret_fd);

/* The agent's watch on an anchor: a non-blocking connection that sees
 * POLLHUP as soon as the anchor closes. -ENOENT when nothing listens;
 * -EAGAIN when the anchor's backlog is full (it may well be alive). */
int anchor_watch(const char *ns, const char *lease, int *ret_fd);

/* Whether the kernel still has a socket listening on @NS/lease/LEASE, by
 * name (sock_diag, or /proc/self/net/unix where netlink is not allowed):
 * 1 yes (ret_uid: its owner, (uid_t) -1 when unknown), 0 no, <0 error.
 * For anchors whose backlog is full: anyone can fill it, so a refused or
 * EAGAIN connect says nothing about whether the anchor is alive. */
int anchor_is_listening(const char *ns, const char *lease, uid_t *ret_uid);
/* The same for many anchors from one look at the kernel's table (its cost
 * is one walk of every listening unix socket, however many are asked
 * about): for each of leases[0..n), ret_alive[i] and its owner ret_uid[i]. */
int anchors_listening(const char *ns, const char *const *leases, size_t n, bool *ret_alive, uid_t *ret_uid);
/* The same look without blocking, for an event loop: started, then
 * stepped (one batch of the kernel's dump read, a few hundred sockets)
 * whenever its fd is readable, until a step returns 1 (done: the answers
 * in anchor_walk_alive() and anchor_walk_uid(), by the index of leases,
 * whose strings must outlive the walk), or <0. A start or step that
 * anchor_walk_refused() is netlink not allowed here: anchors_listening()
 * looks in /proc instead. */
typedef struct AnchorWalk AnchorWalk;
int anchor_walk_start(const char *ns, const char *const *leases, size_t n, AnchorWalk **ret);
int anchor_walk_fd(const AnchorWalk *w);
int anchor_walk_step(AnchorWalk *w);
const bool *anchor_walk_alive(const AnchorWalk *w);
const uid_t *anchor_walk_uid(const AnchorWalk *w);
bool anchor_walk_refused(int r);
AnchorWalk *anchor_walk_free(AnchorWalk *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(AnchorWalk *, anchor_walk_free);

int agent_listen(const char *ns, int *ret_fd);

/* Root's own way to the agent: a socket only root may connect to, in
 * AGENT_ROOT_DIR, named for the namespace and the network namespace (as
 * the abstract names are per network namespace). No other user's
 * connections queue before root's there, whatever they send to @NS/agent. */
#define AGENT_ROOT_DIR "/run/fleetsem"
int agent_root_path(const char *ns, char *buf, size_t size);
int agent_listen_root(const char *ns, int *ret_fd);

int peer_cred(int fd, struct ucred *ret);

/* Writes all of buf, polling on EAGAIN up to timeout. */
int write_all(int fd, const void *buf, size_t len, usec_t timeout);

/* Reads lines of bounded length from a socket. */
typedef struct LineReader {
        size_t max;             /* longest line accepted, without '\n' */
        size_t len;
        size_t start;
        char buf[8192];
} LineReader;

void line_reader_init(LineReader *lr, size_t max);
/* Reads what is there (one read()); 0 on EOF, -EAGAIN when nothing, >0 bytes. */
int line_reader_fill(LineReader *lr, int fd);
/* Next complete line (without '\n', NUL-terminated in place): 1 found,
 * 0 none yet, -E2BIG when a line is longer than max. */
int line_reader_next(LineReader *lr, char **ret_line, size_t *ret_len);

int fd_set_nonblock(int fd);
