/* SPDX-License-Identifier: MIT */
/* The peer checks of peers.h: one place for the agent and for the
 * command line, so that neither believes a peer the other would not. */
#include <string.h>

#include "macro.h"
#include "peers.h"

unsigned peers_sentinel_quorum(const Config *c) {
        return c->sentinel_quorum ?: (unsigned) (c->redis.n_hosts / 2 + 1);
}

size_t peers_sentinel_votes(const char *const *votes, size_t n, const char **ret_winner, size_t *ret_answered) {
        size_t best = 0;

        *ret_winner = NULL;
        *ret_answered = 0;
        for (size_t i = 0; i < n; i++) {
                size_t k = 0;

                if (!votes[i][0])
                        continue;
                (*ret_answered)++;
                for (size_t j = 0; j < n; j++)
                        k += streq(votes[i], votes[j]);
                if (k > best) {
                        best = k;
                        *ret_winner = votes[i];
                }
        }
        return best;
}

bool peers_cluster_node_allowed(const Config *c, const char *host) {
        return (c->redis.tls && !c->cluster_allow_set) || config_cluster_allows(c, host);
}
