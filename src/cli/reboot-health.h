/* SPDX-License-Identifier: MIT */
#pragma once

/* What `fleetsem reboot` asks systemd: the units failed before the reboot,
 * the system's state after it, and whether anything gives the slots back
 * after the boot. Each through systemctl's output, which is data: a unit
 * name is kept only when it is one. */
#include <stdbool.h>
#include <stddef.h>

#include "time-util.h"

#define FAILED_UNITS_MAX 128            /* units recorded; more are told, and count as new */
#define DONE_SERVICE "fleetsem-reboot-done.service"

typedef struct FailedUnits {
        char *names[FAILED_UNITS_MAX];
        size_t n;
        bool more;                      /* more failed than were kept */
} FailedUnits;

void failed_units_clear(FailedUnits *u);
/* name, if it is a unit name (else ignored): 0, or -E2BIG when full (more set). */
int failed_units_add(FailedUnits *u, const char *name);
/* The units failed now (systemctl list-units --state=failed): 0, <0. */
int failed_units_list(FailedUnits *ret);

/* After the boot, judged as fleetsem(1) REBOOTS says: waits at most
 * timeout while the system is initializing or starting, then counts it
 * healthy when it is running, or degraded by none but units of before
 * (failed before the reboot). Says which units it judged by. true: healthy. */
bool system_judge(usec_t timeout, const FailedUnits *before);

/* Whether DONE_SERVICE starts at the next boot (enabled, or wanted by a
 * unit that starts): 1 yes, 0 no (why, in words, the fix in them). */
int done_service_starts(char *why, size_t size);
