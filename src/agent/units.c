/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-login.h>

#include "agent.h"
#include "log.h"

/* Slots bound to systemd services: which unit a requester runs in, and
 * stopping a unit whose slot was lost. */

int unit_of_pid(pid_t pid, char **ret) {
        char *unit = NULL;
        int r;

        /* From the kernel's view of the process (its cgroup), never from
         * anything the client says. */
        r = sd_pid_get_unit(pid, &unit);
        if (r < 0)
                return r;
        if (!service_unit_is_valid(unit)) {
                free(unit);
                return -ENXIO;
        }
        *ret = unit;
        return 0;
}

static int stop_reply(sd_bus_message *m, void *userdata, sd_bus_error *ret_error) {
        char *unit = userdata;
        const sd_bus_error *e = sd_bus_message_get_error(m);

        (void) ret_error;
        if (e)
                log_error("Failed to stop %s after it lost its slot: %s", unit, e->message ?: e->name);
        else
                log_notice("Stopping %s: it lost its fleet slot (on-lost=stop).", unit);
        free(unit);
        return 0;
}

void unit_stop(Agent *a, const char *unit, const char *why) {
        char *u;
        int r;

        if (!a->bus) {
                r = sd_bus_open_system(&a->bus);
                if (r >= 0)
                        r = sd_bus_attach_event(a->bus, a->event, SD_EVENT_PRIORITY_NORMAL);
                if (r < 0) {
                        a->bus = sd_bus_flush_close_unref(a->bus);
                        log_error_errno(r, "Cannot stop %s (it lost its slot: %s): no connection to systemd: %m",
                                        unit, why);
                        return;
                }
        }
        u = strdup(unit);
        if (!u) {
                log_error("Cannot stop %s (it lost its slot: %s): out of memory.", unit, why);
                return;
        }
        r = sd_bus_call_method_async(a->bus, NULL, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                                     "org.freedesktop.systemd1.Manager", "StopUnit", stop_reply, u,
                                     "ss", unit, "replace");
        if (r < 0) {
                free(u);
                log_error_errno(r, "Cannot stop %s (it lost its slot: %s): %m", unit, why);
        }
}

void io_stop_unit(void *ctx, const char *unit, const char *why) {
        unit_stop(ctx, unit, why);
}

void units_close(Agent *a) {
        a->bus = sd_bus_flush_close_unref(a->bus);
}
