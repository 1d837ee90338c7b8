/* SPDX-License-Identifier: MIT */
/* This host's own record of its leases: a file per lease, named by its id
 * and holding its entry of the host index ("NAME SLOTS UID UNIT ON-LOST[
 * WEIGHT[ KIND]]"), and " held BOOT-ID" after it while the lease is held,
 * its modification time then when it was last confirmed (adopt.c), in a
 * folder that outlives an agent restart: of the
 * agent's runtime directory for anchored leases, of its state directory
 * for the slots the host holds itself (which outlive its reboot too).
 * Re-adoption reads it beside Redis' host index, so a host index Redis
 * lost leaves no holder of this host behind. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "names.h"
#include "time-util.h"

/* An entry's longest text, its NUL included: the index's entry (a name, a
 * unit, numbers), then the marks of adopt.c (the requester's pid and start
 * time, the unit or scope being killed and when, two boot ids). */
#define LEASE_RECORD_VALUE_MAX (NAME_MAX_LEN + 2 * UNIT_NAME_MAX + 512)

/* The folder DIR/NS.HOST.leases, made (0700) if missing; its fd in
 * *ret_fd. */
int lease_record_open(const char *dir, const char *ns, const char *host, int *ret_fd);
/* Writes (replaces) the entry of lease id, atomically (a temporary file
 * renamed); durable: on disk when it returns (the file synced before the
 * rename, the folder after it), so that a power loss right after a grant
 * keeps the record. */
int lease_record_put(int dir_fd, const char *id, const char *value, usec_t mtime, bool durable);
/* Sets the modification time of lease id's entry (USEC_INFINITY: now):
 * one call, nothing written (not made durable). */
int lease_record_touch(int dir_fd, const char *id, usec_t mtime);
/* Removes the entry of lease id, durable: the folder synced after; 0 when
 * there was none. */
int lease_record_drop(int dir_fd, const char *id, bool durable);
/* The entry of lease id into value; <0 when it has none (-ENOENT) or a
 * bad one. */
int lease_record_get(int dir_fd, const char *id, char value[static LEASE_RECORD_VALUE_MAX], usec_t *ret_mtime);
/* Whether lease id has an entry (a valid id, and a file of that name). */
bool lease_record_exists(int dir_fd, const char *id);
/* Calls cb for each entry whose name is a lease id and whose text is one
 * line of at most LEASE_RECORD_VALUE_MAX - 1 bytes; others are removed. */
int lease_record_foreach(int dir_fd, void (*cb)(const char *id, const char *value, void *userdata), void *userdata);
