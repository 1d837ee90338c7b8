/* SPDX-License-Identifier: MIT */
/* TLS to Redis (rediss://, sentinel+tls://, cluster+tls://): one client
 * context for the process, from fleetsem.conf's tls_* keys; every TCP
 * connection to Redis, a Sentinel or a Cluster node then speaks TLS and
 * checks the server's certificate (its chain and its name) before a byte
 * of the protocol, AUTH included, goes out. Built only with hiredis_ssl
 * (FLEETSEM_TLS); without it, redis_tls_setup() says why it cannot. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

typedef struct RedisTlsConfig {
        const char *ca_file;            /* NULL: the system's trust store */
        const char *cert_file;          /* a client certificate, with key_file, or NULL */
        const char *key_file;
        const char *server_name;        /* the name certificates must carry; NULL: the host connected to */
} RedisTlsConfig;

/* Whether this build has TLS to Redis. */
bool redis_tls_available(void);
/* Makes the context (or replaces it); TCP connections made after it use
 * TLS. On failure, why (no secret in it) in err. */
int redis_tls_setup(const RedisTlsConfig *c, char *err, size_t err_size);
void redis_tls_done(void);
bool redis_tls_active(void);
/* Starts TLS on a hiredis context just connected (non-blocking: the
 * handshake completes before its first write) to host, whose certificate
 * must name server_name, or host. */
struct redisContext;
int redis_tls_start(struct redisContext *c, const char *host, void **ret_tls);
/* Why the TLS connection ret_tls (hiredis' until the context is freed)
 * failed, when TLS knows ("TLS: certificate verify failed: ..."); else NULL. */
const char *redis_tls_why(void *tls, char *buf, size_t size);
/* "OpenSSL 3.5.1 ..." or "no". */
const char *redis_tls_version(void);
