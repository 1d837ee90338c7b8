/* SPDX-License-Identifier: MIT */
#pragma once

/* libsystemd, loaded when a command needs it (acquire, release, limit):
 * linking it would cost every `fleetsem run` the loading of libsystemd and
 * its dependencies (~0.4 ms), for functions run never calls.
 * Call sym_sd_foo() where the library's own function is sd_foo(). */

#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>
#include <systemd/sd-login.h>

#include "macro.h"

#define SD_DL_SYMBOLS(X)                        \
        X(sd_pid_get_unit)                      \
        X(sd_pid_notify_with_fds)               \
        X(sd_notify_barrier)                    \
        X(sd_bus_new)                           \
        X(sd_bus_set_address)                   \
        X(sd_bus_start)                         \
        X(sd_bus_open_system)                   \
        X(sd_bus_flush_close_unref)             \
        X(sd_bus_path_encode)                   \
        X(sd_bus_get_property_string)           \
        X(sd_bus_get_property_trivial)          \
        X(sd_bus_call_method)                   \
        X(sd_bus_message_unref)                 \
        X(sd_bus_error_free)

#define SD_DL_DECLARE(s) extern typeof(s) *sym_##s;
SD_DL_SYMBOLS(SD_DL_DECLARE)
#undef SD_DL_DECLARE

/* For _cleanup_(): each frees what it holds, where it holds anything
 * (and then the library is loaded). */
DEFINE_TRIVIAL_CLEANUP_FUNC(sd_bus *, sym_sd_bus_flush_close_unref);
DEFINE_TRIVIAL_CLEANUP_FUNC(sd_bus_message *, sym_sd_bus_message_unref);
static inline void sym_sd_bus_error_freep(sd_bus_error *e) {
        if (e->name || e->message)
                sym_sd_bus_error_free(e);
}

/* Loads libsystemd.so.0 once; logs and returns a negative errno on failure. */
int sd_dl_open(void);

/* Connects to the system's service manager: its private socket when we are
 * root (works before D-Bus is up, like systemctl), the system bus otherwise. */
int sd_dl_bus_open(sd_bus **ret);
