/* SPDX-License-Identifier: MIT */
/* TLS to Redis, on hiredis_ssl with an OpenSSL context of our own: hiredis'
 * own context sends the server name (SNI) but checks only the chain, so
 * the name check is set on each connection here (X509_VERIFY_PARAM). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "redis-tls.h"

#if FLEETSEM_TLS
#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <hiredis/hiredis_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

static SSL_CTX *tls_ctx;
static char *tls_server_name;

bool redis_tls_available(void) {
        return true;
}

const char *redis_tls_version(void) {
        return OpenSSL_version(OPENSSL_VERSION);
}

/* "WHAT FILE: OpenSSL's reason"; clears OpenSSL's error queue. */
static int tls_error(char *err, size_t size, const char *what, const char *file) {
        unsigned long e = ERR_peek_last_error();
        const char *reason = e ? ERR_reason_error_string(e) : NULL;

        snprintf(err, size, "%s%s%s: %s", what, file ? " " : "", file ?: "", reason ?: "unknown error");
        ERR_clear_error();
        return -EINVAL;
}

int redis_tls_setup(const RedisTlsConfig *c, char *err, size_t size) {
        SSL_CTX *ctx;
        char *name = NULL;

        (void) redisInitOpenSSL();
        ctx = SSL_CTX_new(TLS_client_method());
        if (!ctx)
                return tls_error(err, size, "Cannot make a TLS context", NULL);
        (void) SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        if (c->ca_file ? SSL_CTX_load_verify_locations(ctx, c->ca_file, NULL) != 1
                       : SSL_CTX_set_default_verify_paths(ctx) != 1) {
                SSL_CTX_free(ctx);
                return tls_error(err, size, c->ca_file ? "Cannot load tls_ca_file" : "Cannot load the system's CAs",
                                 c->ca_file);
        }
        if (c->cert_file && SSL_CTX_use_certificate_chain_file(ctx, c->cert_file) != 1) {
                SSL_CTX_free(ctx);
                return tls_error(err, size, "Cannot load tls_cert_file", c->cert_file);
        }
        if (c->key_file && (SSL_CTX_use_PrivateKey_file(ctx, c->key_file, SSL_FILETYPE_PEM) != 1 ||
                            SSL_CTX_check_private_key(ctx) != 1)) {
                SSL_CTX_free(ctx);
                return tls_error(err, size, "Cannot load tls_key_file (or it does not match tls_cert_file)",
                                 c->key_file);
        }
        if (c->server_name) {
                name = strdup(c->server_name);
                if (!name) {
                        SSL_CTX_free(ctx);
                        return -ENOMEM;
                }
        }
        redis_tls_done();
        tls_ctx = ctx;
        tls_server_name = name;
        return 0;
}

void redis_tls_done(void) {
        SSL_CTX_free(tls_ctx);
        tls_ctx = NULL;
        free(tls_server_name);
        tls_server_name = NULL;
}

bool redis_tls_active(void) {
        return tls_ctx;
}

int redis_tls_start(redisContext *c, const char *host, void **ret_tls) {
        const char *name = tls_server_name ?: host;
        unsigned char addr[sizeof(struct in6_addr)];
        X509_VERIFY_PARAM *param;
        SSL *ssl;
        int ok;

        if (!tls_ctx || !name)
                return -EINVAL;
        ssl = SSL_new(tls_ctx);
        if (!ssl)
                return -ENOMEM;
        param = SSL_get0_param(ssl);
        if (inet_pton(AF_INET, name, addr) == 1 || inet_pton(AF_INET6, name, addr) == 1)
                ok = X509_VERIFY_PARAM_set1_ip_asc(param, name);
        else {
                X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
                ok = SSL_set_tlsext_host_name(ssl, name) && X509_VERIFY_PARAM_set1_host(param, name, 0);
        }
        if (!ok || redisInitiateSSL(c, ssl) != REDIS_OK) {
                SSL_free(ssl);          /* hiredis owns it only once it took it */
                ERR_clear_error();
                return -EIO;
        }
        *ret_tls = ssl;
        return 0;
}

const char *redis_tls_why(void *tls, char *buf, size_t size) {
        long v = SSL_get_verify_result(tls);
        unsigned long e = ERR_peek_last_error();

        if (v != X509_V_OK)
                snprintf(buf, size, "TLS: the server's certificate does not verify: %s (%s%s)",
                         X509_verify_cert_error_string(v),
                         tls_server_name ? "the name checked: tls_server_name " : "the name checked: the host "
                         "connected to; tls_server_name sets another", tls_server_name ?: "");
        else if (e)
                snprintf(buf, size, "TLS: %s", ERR_reason_error_string(e) ?: "handshake failed");
        else
                return NULL;
        ERR_clear_error();
        return buf;
}

#else

bool redis_tls_available(void) {
        return false;
}

const char *redis_tls_version(void) {
        return "no";
}

int redis_tls_setup(const RedisTlsConfig *c, char *err, size_t size) {
        (void) c;
        snprintf(err, size, "this build has no TLS to Redis (hiredis_ssl)");
        return -EOPNOTSUPP;
}

void redis_tls_done(void) {
}

bool redis_tls_active(void) {
        return false;
}

int redis_tls_start(struct redisContext *c, const char *host, void **ret_tls) {
        (void) c;
        (void) host;
        (void) ret_tls;
        return -EOPNOTSUPP;
}

const char *redis_tls_why(void *tls, char *buf, size_t size) {
        (void) tls;
        (void) buf;
        (void) size;
        return NULL;
}

#endif
