/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A network, "10.1.0.0/16", "fd00::/8", or one address (a whole prefix):
 * which addresses a peer may give for another (cluster_allow). */
typedef struct NetRule {
        int family;             /* AF_INET or AF_INET6 */
        uint8_t addr[16];
        unsigned prefix;
} NetRule;

/* Parses one CIDR or address; -EINVAL when it is neither. */
int net_rule_parse(const char *s, NetRule *ret);
/* The network around a literal address: its /24 (IPv4) or /64 (IPv6);
 * -EINVAL when host is not a literal address. */
int net_rule_around(const char *host, NetRule *ret);
/* Whether host, a literal address, is in one of the rules (a name never is). */
bool net_rules_match(const NetRule *rules, size_t n, const char *host);
/* "10.1.0.0/16", for messages. */
const char *net_rule_to_string(const NetRule *r, char *buf, size_t size);
