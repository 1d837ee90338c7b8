/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "pam-who.h"

/* NSS answers fit in this; a directory entry that does not is refused,
 * never cut. */
#define NSS_BUFFER_MIN 4096
#define NSS_BUFFER_MAX (1024 * 1024)

/* One getpw*_r()/getgr*_r() call: its errno-style result; *ret the entry
 * or NULL. */
typedef int (*NssCall)(const void *key, void *entry, char *buf, size_t size, void **ret);

static int call_getpwnam(const void *key, void *entry, char *buf, size_t size, void **ret) {
        return getpwnam_r(key, entry, buf, size, (struct passwd **) ret);
}

static int call_getpwuid(const void *key, void *entry, char *buf, size_t size, void **ret) {
        return getpwuid_r(*(const uid_t *) key, entry, buf, size, (struct passwd **) ret);
}

static int call_getgrgid(const void *key, void *entry, char *buf, size_t size, void **ret) {
        return getgrgid_r(*(const gid_t *) key, entry, buf, size, (struct group **) ret);
}

/* Calls NSS with a buffer grown on ERANGE, kept in *storage: 1 found,
 * 0 no such entry, -errno NSS failed. */
static int nss_get(NssCall call, const void *key, void *entry, char **storage) {
        for (size_t size = NSS_BUFFER_MIN; size <= NSS_BUFFER_MAX; size *= 2) {
                void *found = NULL;
                char *b = realloc(*storage, size);
                int e;

                if (!b)
                        return -ENOMEM;
                *storage = b;
                e = call(key, entry, b, size, &found);
                if (found)
                        return 1;
                if (e == ERANGE)
                        continue;
                /* glibc's "not found" is 0; some modules say ENOENT, ESRCH, EBADF or EPERM. */
                if (e == 0 || e == ENOENT || e == ESRCH || e == EBADF || e == EPERM)
                        return 0;
                return -e;
        }
        return -ERANGE;
}

int who_lookup(const char *user, Who *ret, const char **why) {
        struct passwd byname, byuid;
        struct group gr;
        Who w = {};
        int r;

        r = nss_get(call_getpwnam, user, &byname, &w.storage[0]);
        if (r <= 0) {
                *why = r == 0 ? "no such user" : "NSS failed to look the user up";
                who_done(&w);
                return r == 0 ? -ENOENT : r;
        }
        /* The account's own name is the one its uid gives. */
        r = nss_get(call_getpwuid, &byname.pw_uid, &byuid, &w.storage[1]);
        if (r <= 0 || !byuid.pw_name || !byuid.pw_name[0]) {
                *why = r < 0 ? "NSS failed to look the user's uid up" : "the user's uid has no name";
                who_done(&w);
                return r < 0 ? r : -ENOENT;
        }
        /* A group that cannot be found leaves %g without a value: refused
         * where a name needs it, never guessed. */
        if (nss_get(call_getgrgid, &byuid.pw_gid, &gr, &w.storage[2]) > 0 && gr.gr_name && gr.gr_name[0])
                w.group = gr.gr_name;

        w.user = user;
        w.account = byuid.pw_name;
        w.uid = byuid.pw_uid;
        w.gid = byuid.pw_gid;
        *ret = w;
        return 0;
}

void who_done(Who *w) {
        for (size_t i = 0; i < ELEMENTSOF(w->storage); i++)
                w->storage[i] = mfree(w->storage[i]);
        w->account = w->group = NULL;
}
