/* SPDX-License-Identifier: MIT */
#pragma once

/* The slot name of a session, from name=TEMPLATE and what PAM and NSS say
 * about the session. Every value an escape stands for is encoded, so that
 * whatever a remote user or a directory puts in it gives a valid name, and
 * distinct values give distinct names:
 *
 * - bytes outside [A-Za-z0-9.:@-], and the escape '_' itself, become '_'
 *   and two upper-case hex digits ("build$" → "build_24", "fe80::1%eth0"
 *   → "fe80::1_25eth0"); '_' in an encoded value is always followed by two
 *   upper-case hex digits;
 * - when the whole name would be longer than NAME_MAX_LEN, each value whose
 *   encoding is longer than NAME_VALUE_SHORT_MAX is replaced by its short
 *   form: the encoding's first characters (at most NAME_VALUE_PREFIX_MAX,
 *   never half an escape), "__", and the first 128 bits of the SHA-256 of
 *   the whole value in lower-case hex. "__" never occurs in an encoding, so
 *   a short form never equals another value's encoding. */

#include <stdbool.h>
#include <stddef.h>

#include <security/pam_modules.h>

#include "names.h"
#include "pam-who.h"

#define NAME_VALUE_PREFIX_MAX 30
#define NAME_VALUE_DIGEST_HEX 32
#define NAME_VALUE_SHORT_MAX (NAME_VALUE_PREFIX_MAX + 2 + NAME_VALUE_DIGEST_HEX)

/* Writes the encoding of the n bytes at v into buf (truncated to size - 1
 * characters and terminated when size > 0); returns its whole length. */
size_t name_value_encode(const char *v, size_t n, char *buf, size_t size);

/* The short form of the n bytes at v. */
void name_value_shorten(const char *v, size_t n, char ret[NAME_VALUE_SHORT_MAX + 1]);

/* name=TEMPLATE for w: %u the account's name (NSS, by uid), %U its uid, %g
 * its primary group, %s the PAM service, %r the remote host, %h this host,
 * %% a percent sign (which no name may hold). Writes a valid name into ret,
 * or returns <0 with *why saying why none can be formed. */
int expand_name(pam_handle_t *pamh, const char *template, const Who *w, char ret[NAME_MAX_LEN + 1], const char **why);
