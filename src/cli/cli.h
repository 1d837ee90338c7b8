/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "atomic-file.h"
#include "cli-util.h"
#include "client.h"
#include "time-util.h"

/* The commands, each in its file; fleetsem.c dispatches to them. The
 * helpers they share are cli-util.c's, atomic-file.c's and
 * status-fetch.c's, and call none of them back. */
int verb_run(int argc, char *argv[]);
int verb_status(int argc, char *argv[]);
int verb_acquire(int argc, char *argv[]);
int verb_release(int argc, char *argv[]);
int verb_limit(int argc, char *argv[]);
int verb_fleet_limit(int argc, char *argv[]);       /* fleet-limit */
int verb_metrics(int argc, char *argv[]);
int verb_drain(int argc, char *argv[]);
int verb_undrain(int argc, char *argv[]);
int verb_revoke(int argc, char *argv[]);
int verb_reboot(int argc, char *argv[]);
int verb_redis_init(int argc, char *argv[]);       /* redis-init */
