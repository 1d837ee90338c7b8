/* SPDX-License-Identifier: MIT */
/* What each user may make the agent hold and do: connections, their rate,
 * looks for anchors by name, names in Redis; and the file descriptors
 * left. Every budget
 * is per uid: one user at every limit at once still leaves root, its PAM
 * sessions and the other users served. */
#include <dirent.h>
#include <errno.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "agent.h"

#define FD_RESERVE_USER 64                      /* non-root requests stop this far from the fd limit */
#define FD_RESERVE_ROOT 16
#define FD_BASE_SLACK 32                        /* Redis, Sentinel, the bus, NSS, /proc */
#define CONNECT_INTERVAL (USEC_PER_SEC / CONNECT_RATE)
/* Looks by name (a full backlog) for the anchors of one uid's requests. */
#define NAME_LOOK_EVERY USEC_PER_SEC

static void *user_uses;         /* tsearch(): uid → UserUse */
static size_t fd_limit;         /* RLIMIT_NOFILE */
static size_t fd_base;          /* the agent's own (Redis, journal, …) */

static int user_use_cmp(const void *x, const void *y) {
        uid_t a = ((const UserUse *) x)->uid, b = ((const UserUse *) y)->uid;

        return a < b ? -1 : a > b;
}

UserUse *user_use_get(uid_t uid) {
        UserUse key = { .uid = uid }, *u, **p;

        p = tfind(&key, &user_uses, user_use_cmp);
        if (p)
                return *p;
        u = calloc(1, sizeof(*u));
        if (!u)
                return NULL;
        u->uid = uid;
        if (!tsearch(u, &user_uses, user_use_cmp)) {
                free(u);
                return NULL;
        }
        return u;
}

void user_use_maybe_free(UserUse *u) {
        usec_t now;

        if (!u || u->n_clients > 0 || u->out_bytes > 0 || u->n_status > 0)
                return;
        /* What it used of its rates is kept until it is paid back: closing
         * every connection starts no new budget; nor does it forget the
         * names it left in Redis. */
        now = now_mono();
        if (u->connect_tat > now || (u->name_look > 0 && now - u->name_look < NAME_LOOK_EVERY) ||
            user_names_live(u, now) > 0)
                return;
        tdelete(u, &user_uses, user_use_cmp);
        free(u->names);
        free(u);
}

/* ---- The names a user has in Redis ------------------------------------------- */

/* What one uid can make Redis hold is its names there times what a name
 * costs (fleetsemd(8), SIZING): the names it holds or waits for
 * (max_names_per_user) are not enough, since a name's keys stay in Redis
 * for their life after its last lease went (config_name_life(): minutes
 * for a user's). A user that took and released fresh names as fast as it
 * could kept tens of thousands of them there at once. So the agent keeps,
 * for each uid, the names its requests used here until their life ends,
 * at most max_redis_names_per_user, and refuses a request for another
 * name past that. A few entries, scanned in full: the cap is small. */
struct UserName {
        usec_t until;
        char name[NAME_MAX_LEN + 1];
};

static UserName *user_name_find(UserUse *u, const char *name) {
        for (size_t i = 0; i < u->n_names; i++)
                if (streq(u->names[i].name, name))
                        return &u->names[i];
        return NULL;
}

size_t user_names_live(UserUse *u, usec_t now) {
        size_t k = 0;

        for (size_t i = 0; i < u->n_names; i++)
                if (u->names[i].until > now)
                        u->names[k++] = u->names[i];
        u->n_names = k;
        if (k == 0) {
                u->names = mfree(u->names);
                u->cap_names = 0;
        }
        return k;
}

bool user_may_use_name(UserUse *u, const char *name, unsigned max, usec_t now) {
        if (u->uid == 0)
                return true;
        return user_names_live(u, now) < max || user_name_find(u, name);
}

int user_name_used(UserUse *u, const char *name, usec_t until) {
        UserName *un = user_name_find(u, name);

        if (!un) {
                if (u->n_names == u->cap_names) {
                        size_t cap = MAX(u->cap_names * 2, (size_t) 8);
                        UserName *p = reallocarray(u->names, cap, sizeof(*p));

                        if (!p)
                                return -ENOMEM;
                        u->names = p;
                        u->cap_names = cap;
                }
                un = &u->names[u->n_names++];
                snprintf(un->name, sizeof(un->name), "%s", name);
        }
        un->until = until;
        return 0;
}

/* Whether uid may open one more connection now (root always may). */
bool user_may_connect(UserUse *u, unsigned burst, usec_t now) {
        usec_t tat = MAX(u->connect_tat, now) + CONNECT_INTERVAL;

        if (u->uid == 0)
                return true;
        if (tat - now > (usec_t) burst * CONNECT_INTERVAL)
                return false;
        u->connect_tat = tat;
        return true;
}

/* Whether uid may have an anchor looked for by name now: one a second. */
bool user_may_look_by_name(UserUse *u, usec_t now) {
        if (u->uid == 0)
                return true;
        if (u->name_look > 0 && now - u->name_look < NAME_LOOK_EVERY)
                return false;
        u->name_look = now;
        return true;
}


/* File descriptors left before the limit: the agent's own (counted once
 * at start, with slack), one per client, one per anchor watch. */
static size_t fds_free(const Agent *a) {
        size_t used = fd_base + a->n_clients + a->n_watch_fds + a->n_pidfds;

        return used < fd_limit ? fd_limit - used : 0;
}

bool agent_short_of_fds(const Agent *a, uid_t uid) {
        return fds_free(a) < (uid == 0 ? FD_RESERVE_ROOT : FD_RESERVE_USER);
}

/* Too many clients of every user together: past max_clients, and a
 * sixteenth of it kept for root. */
bool agent_too_many_clients(const Agent *a, uid_t uid) {
        size_t max = a->config->max_clients;

        return a->n_clients > (uid == 0 ? max : max - max / 16);
}

/* The agent's own file descriptors now, before any client or anchor. */
static size_t count_fds(void) {
        DIR *d = opendir("/proc/self/fd");
        struct dirent *de;
        size_t n = 0;

        if (!d)
                return 64;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        n++;
        closedir(d);
        return n;
}

void fd_budget_init(void) {
        struct rlimit rl;

        fd_limit = getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY ? 1024 * 1024 : (size_t) rl.rlim_cur;
        fd_base = count_fds() + FD_BASE_SLACK;
}
