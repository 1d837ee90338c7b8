/* SPDX-License-Identifier: MIT */
#pragma once

#include "config.h"

/* fleetsemd --redis-init (run by `fleetsem redis-init`): declares the
 * configuration's Redis empty, where it holds no key of fleetsem's, so
 * that the agents grant at once instead of waiting out the grace of its
 * first use. Says what it did on stdout, why not on stderr; returns
 * fleetsem(1)'s exit status: 0 declared (or declared already), EXIT_DATAERR
 * it holds fleetsem's keys (nothing written), EXIT_UNAVAILABLE it cannot
 * be reached (no quorum of Sentinels, no master), EXIT_CONFIG it cannot be
 * done with this configuration (TLS, a login or a command the ACL refuses,
 * a Cluster map the agents refuse), EXIT_SOFTWARE a reply that makes no
 * sense. */
int redis_init(const Config *config);
