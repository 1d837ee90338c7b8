/* SPDX-License-Identifier: MIT */
#pragma once

/* Who a session is for, as NSS knows the account: the name PAM was given
 * is only a way to find it. Two passwd entries with one uid ("alice" and
 * "Alice" in a case-insensitive directory, "nobody" and "NOBODY") are one
 * account, named by the entry getpwuid() gives for that uid. */

#include <sys/types.h>

typedef struct Who {
        const char *user;       /* PAM_USER, as the application gave it */
        const char *account;    /* the account's own name: getpwuid(uid)->pw_name */
        uid_t uid;
        gid_t gid;
        const char *group;      /* the primary group's name; NULL when it has none */
        char *storage[3];       /* NSS' buffers behind the strings above */
} Who;

/* Looks user up in NSS. -ENOENT: no such user (or no entry for its uid);
 * another -errno: NSS failed. *why says which, for the log. */
int who_lookup(const char *user, Who *ret, const char **why);
void who_done(Who *w);
