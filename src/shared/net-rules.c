/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "net-rules.h"
#include "names.h"

static int literal(const char *host, int *ret_family, uint8_t addr[static 16]) {
        memset(addr, 0, 16);
        if (inet_pton(AF_INET, host, addr) == 1) {
                *ret_family = AF_INET;
                return 0;
        }
        if (inet_pton(AF_INET6, host, addr) == 1) {
                *ret_family = AF_INET6;
                return 0;
        }
        return -EINVAL;
}

static void mask(NetRule *r) {
        unsigned bits = r->family == AF_INET ? 32 : 128;

        for (unsigned i = r->prefix; i < bits; i++)
                r->addr[i / 8] &= (uint8_t) ~(0x80u >> (i % 8));
}

int net_rule_parse(const char *s, NetRule *ret) {
        char host[INET6_ADDRSTRLEN + 1];
        const char *slash = strchr(s, '/');
        size_t len = slash ? (size_t) (slash - s) : strlen(s);
        uint64_t prefix;
        NetRule r = {};

        if (len == 0 || len >= sizeof(host))
                return -EINVAL;
        memcpy(host, s, len);
        host[len] = '\0';
        if (literal(host, &r.family, r.addr) < 0)
                return -EINVAL;
        r.prefix = r.family == AF_INET ? 32 : 128;
        if (slash) {
                if (parse_uint64(slash + 1, 0, r.prefix, &prefix) < 0)
                        return -EINVAL;
                r.prefix = (unsigned) prefix;
        }
        mask(&r);
        *ret = r;
        return 0;
}

int net_rule_around(const char *host, NetRule *ret) {
        NetRule r = {};

        if (literal(host, &r.family, r.addr) < 0)
                return -EINVAL;
        r.prefix = r.family == AF_INET ? 24 : 64;
        mask(&r);
        *ret = r;
        return 0;
}

bool net_rules_match(const NetRule *rules, size_t n, const char *host) {
        uint8_t addr[16];
        int family;

        if (literal(host, &family, addr) < 0)
                return false;
        for (size_t i = 0; i < n; i++) {
                NetRule r = { .family = family, .prefix = rules[i].prefix };

                if (rules[i].family != family)
                        continue;
                memcpy(r.addr, addr, sizeof(addr));
                mask(&r);
                if (memcmp(r.addr, rules[i].addr, sizeof(r.addr)) == 0)
                        return true;
        }
        return false;
}

const char *net_rule_to_string(const NetRule *r, char *buf, size_t size) {
        char a[INET6_ADDRSTRLEN];

        if (!inet_ntop(r->family, r->addr, a, sizeof(a)))
                snprintf(a, sizeof(a), "?");
        snprintf(buf, size, "%s/%u", a, r->prefix);
        return buf;
}
