/* SPDX-License-Identifier: MIT */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* "allow = PATTERN PRINCIPAL…": who may ask for which names. */
typedef struct AllowRule {
        char *pattern;          /* fnmatch() glob over names */
        char **principals;      /* "user" or "@group", NULL-terminated */
} AllowRule;

/* A glob over names: the characters of names and * ? [ ] !. */
bool name_pattern_is_valid(const char *s);

/* Parses the value of an allow line, e.g. "nightly-* alice @ops". */
int allow_rule_parse(const char *value, AllowRule *ret, const char **ret_why);
void allow_rule_done(AllowRule *r);

/* The most groups of one user looked at: Linux' NGROUPS_MAX. A user the
 * directory lists in more is an error (-E2BIG), never "not a member". */
#define USER_GROUPS_MAX 65536

/* The groups of user, primary among them, as getgrouplist() lists them, in
 * an array (malloc'ed) that grows to what the directory reports: 0, or
 * -E2BIG when there are more than max, -errno when the look-up failed. */
int user_groups(const char *user, gid_t primary, size_t max, gid_t **ret_groups, size_t *ret_n);

/* Whether user (whose primary group is primary) is a member of group, by
 * name: its primary group or one of its supplementary groups. 1 yes, 0 no
 * (or no such group), -errno when the directory could not tell (EMFILE, a
 * directory that does not answer, more than USER_GROUPS_MAX groups). */
int user_group_member(const char *user, gid_t primary, const char *group);
/* The same where an error reads as "no". */
bool user_in_group(const char *user, gid_t primary, const char *group);

/* Which of the n rules name uid or one of its groups (ret_match: n
 * entries; all false for an unknown uid): 0, or -errno when a user or
 * group could not be looked up, which is no answer, never a "no". */
int allow_rules_match_user(const AllowRule *rules, size_t n, uid_t uid, bool *ret_match);
/* Whether one of the rules that match (from allow_rules_match_user())
 * matches name. */
bool allow_rules_permit(const AllowRule *rules, size_t n, const bool *match, const char *name);
