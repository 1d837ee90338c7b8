/* SPDX-License-Identifier: MIT */
#pragma once

/* A host name looked up off the event loop: getaddrinfo() in a thread of
 * its own, whose result comes back to the loop through an eventfd. A
 * lookup that hangs (a dead DNS server) holds its thread until the
 * resolver gives up, never the loop; one cancelled meanwhile is dropped
 * when its thread ends, and reaches nobody. */

#include <stdbool.h>
#include <stddef.h>
#include <systemd/sd-event.h>

#include "macro.h"

#define RESOLVE_ADDRS_MAX 16
#define RESOLVE_ADDR_MAX 64     /* an IPv6 address with its %scope */

typedef struct ResolveResult {
        size_t n;
        char addr[RESOLVE_ADDRS_MAX][RESOLVE_ADDR_MAX];  /* numeric, IPv4 ones first */
} ResolveResult;

typedef struct Resolve Resolve;

/* error == 0: result holds at least one address; < 0: why says why, in
 * the resolver's words ("Name or service not known"). Called once, from
 * the loop (never from inside resolve_start()), after the Resolve is
 * freed: forget it first. */
typedef void (*resolve_cb)(int error, const char *why, const ResolveResult *result, void *userdata);

/* -EAGAIN when too many lookups are still running. */
int resolve_start(sd_event *e, const char *host, resolve_cb cb, void *userdata, Resolve **ret);
/* Before the callback: it never comes. Accepts NULL; returns NULL. */
Resolve *resolve_cancel(Resolve *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(Resolve *, resolve_cancel);
/* host is an IPv4 or IPv6 address (nothing to look up). */
bool resolve_is_literal(const char *host);
