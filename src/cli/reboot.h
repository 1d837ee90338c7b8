/* SPDX-License-Identifier: MIT */
/* `fleetsem reboot`'s own state (reboot.c): its options and the slots it
 * took, and what it keeps on disk for --done (reboot-state.c). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "names.h"
#include "protocol.h"
#include "reboot-health.h"
#include "time-util.h"

#define REBOOT_NAME_DEFAULT "reboot"
#define REQUIRED_FILE_DEFAULT "/run/reboot-required"
#define STATE_DIR_DEFAULT "/var/lib/fleetsem"
#define RUNNING_TIMEOUT_DEFAULT (10 * USEC_PER_MINUTE)
#define GROUPS_MAX 8
#define PKGS_READ_MAX 4096              /* bytes of reboot-required.pkgs looked at */
#define HEALTH_MAX 1024                 /* bytes of a health command */
#define REPLY_MARGIN (5 * USEC_PER_SEC) /* the agent's answer after the wait it was given */
#define STATE_MAX (GROUPS_MAX * 2 * (NAME_MAX_LEN + 48) + HEALTH_MAX + FAILED_UNITS_MAX * (UNIT_NAME_MAX + 8) + 64)

/* --done's exit codes of its own (fleetsem(1), REBOOTS). */
#define EXIT_UNHEALTHY 1                /* not healthy: the slots are kept */
#define EXIT_GONE 2                     /* healthy, but a slot was no longer the host's */
#define EXIT_UNHEALTHY_GONE 3           /* not healthy, and a slot was no longer the host's */

typedef struct Group {
        char name[NAME_MAX_LEN + 1];    /* the Redis name: REBOOT_NAME:GROUP */
        uint32_t slots;
        char lease[LEASE_ID_LEN + 1];   /* once taken ("" before, or not recorded) */
} Group;

typedef struct Reboot {
        const char *ns;
        const char *name;
        uint32_t slots;
        usec_t wait;
        bool if_required, dry_run, done, release_only;
        const char *reason;
        const char *health;
        const char *reboot_command;
        const char *required_file;
        const char *state_dir;
        usec_t running_timeout;
        Group groups[GROUPS_MAX];
        size_t n_groups;
        char lease[LEASE_ID_LEN + 1];   /* NAME's, once taken */
        FailedUnits failed;             /* before the reboot */
} Reboot;

/* What rb keeps for --done, written whole (on disk before the reboot):
 * 0, <0 (logged). */
int state_write(const Reboot *rb);
/* Reads the state into rb (groups, their leases, the failed units, and
 * the health command into health unless one was given): only a regular
 * file of root's that nobody else may write, for its command runs as
 * root. 0 (none is fine too), <0 (logged). */
int state_read(Reboot *rb, char *health, size_t health_size);
void state_remove(const Reboot *rb);
