/* SPDX-License-Identifier: MIT */
/* Allow rules ("allow = PATTERN user @group…") and the user and group
 * look-ups (NSS) that decide whether one names a uid. */
#include <errno.h>
#include <fnmatch.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <string.h>

#include "conf-file.h"
#include "log.h"
#include "macro.h"
#include "names.h"
#include "user-rules.h"

#define PRINCIPALS_MAX 64
/* Where a group entry (all its members' names) is read: it starts at the
 * first size and doubles on ERANGE up to the last. */
#define GROUP_BUFFER_MIN 16384
#define GROUP_BUFFER_MAX (4 * 1024 * 1024)

static bool principal_is_valid(const char *s) {
        const char *n = s[0] == '@' ? s + 1 : s;
        size_t len = strlen(n);

        /* POSIX portable user and group names, plus what Debian allows. */
        return len > 0 && len <= 64 && n[0] != '-' &&
               strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-$") == len;
}

bool name_pattern_is_valid(const char *s) {
        return s[0] && strlen(s) <= NAME_MAX_LEN &&
               strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.:@-*?[]!") == strlen(s);
}

void allow_rule_done(AllowRule *r) {
        free(r->pattern);
        for (char **p = r->principals; p && *p; p++)
                free(*p);
        free(r->principals);
        *r = (AllowRule) {};
}

int allow_rule_parse(const char *value, AllowRule *ret, const char **ret_why) {
        _cleanup_free_ char *copy = strdup(value);
        AllowRule rule = {};
        size_t n = 0;
        char *save = NULL, *tok;

        if (!copy)
                return -ENOMEM;
        tok = strtok_r(copy, " \t", &save);
        if (!tok || !name_pattern_is_valid(tok))
                return conf_why(ret_why, "expected a name pattern and at least one user or @group");
        rule.pattern = strdup(tok);
        rule.principals = calloc(PRINCIPALS_MAX + 1, sizeof(char *));
        if (!rule.pattern || !rule.principals) {
                allow_rule_done(&rule);
                return -ENOMEM;
        }
        while ((tok = strtok_r(NULL, " \t", &save))) {
                if (n >= PRINCIPALS_MAX || !principal_is_valid(tok)) {
                        allow_rule_done(&rule);
                        return conf_why(ret_why, n >= PRINCIPALS_MAX ? "too many users and groups" : "invalid user or @group");
                }
                rule.principals[n] = strdup(tok);
                if (!rule.principals[n++]) {
                        allow_rule_done(&rule);
                        return -ENOMEM;
                }
        }
        if (n == 0) {
                allow_rule_done(&rule);
                return conf_why(ret_why, "expected a name pattern and at least one user or @group");
        }
        *ret = rule;
        return 0;
}

/* The error of a get*_r() call: its return value, or errno where it
 * returned -1 (as some NSS wrappers do). */
static int nss_error(int r) {
        return r >= 0 ? r : errno > 0 ? errno : EIO;
}

/* NSS answers "not found" in several ways (getpwnam(3)); anything else is
 * a failure to look (out of file descriptors, a directory that does not
 * answer), which must not read as "no". */
static int nss_result(int r, const void *found) {
        if (found)
                return 1;
        if (r == 0 || r == ENOENT || r == ESRCH || r == EBADF || r == EPERM)
                return 0;
        return -r;
}

/* The gid of group: 1, 0 when there is no such group, -errno. A group
 * entry holds all its members' names: its buffer grows until it fits. */
static int group_gid(const char *group, gid_t *ret_gid) {
        for (size_t size = GROUP_BUFFER_MIN; size <= GROUP_BUFFER_MAX; size *= 2) {
                _cleanup_free_ char *buf = malloc(size);
                struct group grbuf, *gr = NULL;
                int r;

                if (!buf)
                        return -ENOMEM;
                errno = 0;
                r = nss_error(getgrnam_r(group, &grbuf, buf, size, &gr));
                if (r == ERANGE)
                        continue;
                r = nss_result(r, gr);
                if (r > 0)
                        *ret_gid = gr->gr_gid;
                return r;
        }
        log_debug("Group %s has an entry larger than %d bytes.", group, GROUP_BUFFER_MAX);
        return -E2BIG;
}

int user_groups(const char *user, gid_t primary, size_t max, gid_t **ret_groups, size_t *ret_n) {
        _cleanup_free_ gid_t *groups = NULL;
        size_t size = MIN((size_t) 64, max);

        if (max == 0 || max > INT_MAX)
                return -EINVAL;
        for (;;) {
                gid_t *g = reallocarray(groups, size, sizeof(gid_t));
                int n = (int) size;

                if (!g)
                        return -ENOMEM;
                groups = g;
                errno = 0;
                if (getgrouplist(user, primary, groups, &n) >= 0) {
                        *ret_groups = TAKE_PTR(groups);
                        *ret_n = (size_t) n;
                        return 0;
                }
                /* Too small: n tells how many there are (more, maybe, by
                 * the time we ask again). */
                if (n < 0 || (size_t) n <= size)
                        return negative_errno();
                if ((size_t) n > max) {
                        log_debug("User %s is in %d groups, more than the %zu looked at.", user, n, max);
                        return -E2BIG;
                }
                size = (size_t) n;
        }
}

/* Whether the user is in the group gid: its primary group, or one of the
 * groups it is listed in (looked up once, into *groups, on first need). */
static int user_has_gid(const char *user, gid_t primary, gid_t gid, gid_t **groups, size_t *n_groups) {
        int r;

        if (gid == primary)
                return 1;
        if (!*groups) {
                r = user_groups(user, primary, USER_GROUPS_MAX, groups, n_groups);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < *n_groups; i++)
                if ((*groups)[i] == gid)
                        return 1;
        return 0;
}

int user_group_member(const char *user, gid_t primary, const char *group) {
        _cleanup_free_ gid_t *groups = NULL;
        size_t n_groups = 0;
        gid_t gid;
        int r;

        r = group_gid(group, &gid);
        if (r <= 0)
                return r;
        return user_has_gid(user, primary, gid, &groups, &n_groups);
}

bool user_in_group(const char *user, gid_t primary, const char *group) {
        return user_group_member(user, primary, group) > 0;
}

/* Whether principal ("user" or "@group") names pw. */
static int principal_names(const char *principal, const struct passwd *pw, gid_t **groups, size_t *n_groups) {
        gid_t gid;
        int r;

        if (principal[0] != '@')
                return streq(principal, pw->pw_name);
        r = group_gid(principal + 1, &gid);
        if (r <= 0)
                return r;
        return user_has_gid(pw->pw_name, pw->pw_gid, gid, groups, n_groups);
}

int allow_rules_match_user(const AllowRule *rules, size_t n, uid_t uid, bool *ret_match) {
        _cleanup_free_ gid_t *groups = NULL;
        struct passwd pwbuf, *pw = NULL;
        size_t n_groups = 0;
        char buf[16384];
        int r;

        errno = 0;
        r = nss_error(getpwuid_r(uid, &pwbuf, buf, sizeof(buf), &pw));
        r = nss_result(r, pw);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                ret_match[i] = false;
                for (char **p = rules[i].principals; r > 0 && *p && !ret_match[i]; p++) {
                        int k = principal_names(*p, pw, &groups, &n_groups);

                        if (k < 0)
                                return k;
                        ret_match[i] = k > 0;
                }
        }
        return 0;
}

bool allow_rules_permit(const AllowRule *rules, size_t n, const bool *match, const char *name) {
        for (size_t i = 0; i < n; i++)
                if (match[i] && fnmatch(rules[i].pattern, name, 0) == 0)
                        return true;
        return false;
}
