/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* What systemd makes of a process' control group, from one read of
 * /proc/PID/cgroup: the unit, the user unit, the session, as
 * sd_pid_get_unit(), sd_pid_get_user_unit() and sd_pid_get_session() find
 * them (those read the file, and PID 1's, again at every call). The text
 * is the kernel's, but the names in the paths are chosen by whoever may
 * make control groups (a delegated user): every name is checked. */

/* The path of systemd's hierarchy in the text of /proc/PID/cgroup: the
 * "0::" line's where the hierarchy is unified (cgroup v2), else the
 * "name=systemd" line's. ret points into text, which is changed; -ENOENT
 * when there is no such line. */
int cgroup_systemd_path(char *text, bool unified, const char **ret);

/* The root as systemd sees it, from PID 1's path: that path without its
 * last "/init.scope" (or the older "/system.slice" or "/system"). In
 * place. */
void cgroup_root_of_init(char *path);

/* path without root in front of it ("/" when it is root), or path itself
 * when it is not below root. */
const char *cgroup_below_root(const char *path, const char *root);

/* The unit path runs in (after its slices): -ENXIO when none, -ENOBUFS
 * when it does not fit size. */
int cgroup_path_unit(const char *path, char *buf, size_t size);

/* The unit inside a user manager ("…/user@UID.service/…/UNIT/…"): -ENXIO
 * when path is not in one. */
int cgroup_path_user_unit(const char *path, char *buf, size_t size);

/* The session ID of a "session-ID.scope" unit: -ENXIO when it is not one. */
int cgroup_unit_session(const char *unit, char *buf, size_t size);
