/* SPDX-License-Identifier: MIT */
#pragma once

/* Which peers may be believed and sent the password: the checks the
 * agent's topologies make (topo-sentinel.c, topo-cluster.c), and the
 * command line's looks at Redis (check-redis.c) with them. */

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/* How many Sentinels must name the same master: sentinel_quorum, by
 * default a majority of those the URL names. */
unsigned peers_sentinel_quorum(const Config *c);

/* Of n votes ("HOST PORT" each, "" for none), how many name the address
 * most of them name (that address into *ret_winner, NULL when none
 * answered), and how many answered at all (*ret_answered). */
size_t peers_sentinel_votes(const char *const *votes, size_t n, const char **ret_winner, size_t *ret_answered);

/* Whether a Cluster node at host, named by another node, may be connected
 * to: inside cluster_allow (or, without it, the seed nodes' networks), or
 * over TLS without cluster_allow, where its certificate is what proves it. */
bool peers_cluster_node_allowed(const Config *c, const char *host);
