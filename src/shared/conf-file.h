/* SPDX-License-Identifier: MIT */
#pragma once

#include "macro.h"

/* Opens path for reading (what names it in errors, e.g. "configuration
 * file") if only a trusted user can have written it: the file it leads to,
 * symbolic links followed, is a regular file owned by root or by this
 * process' user and writable by no one else (checked on the file opened),
 * and so is the directory it is in (or that one is sticky), and the
 * directory of path itself when path is a symbolic link. Returns the fd,
 * or -errno with the reason, naming the file and the fix, in ret_error. */
int conf_open_trusted(const char *path, const char *what, char **ret_error);

/* Reads "key = value" lines ('#' comments, blank lines) and hands each pair
 * to cb. cb returns <0 with *ret_why set to reject a line; the error then
 * reads "FILE:LINE: why" in ret_error (malloc'ed). The file must be one
 * conf_open_trusted() opens. */
typedef int (*conf_line_cb)(const char *key, const char *value, void *userdata, const char **ret_why);
int conf_parse_file(const char *path, conf_line_cb cb, void *userdata, char **ret_error);

/* Reads a secret (what names it in errors, e.g. "Redis password") from
 * path: one line of at most CONF_SECRET_MAX bytes, without its line end,
 * in a file conf_open_trusted() opens that others may not read. */
#define CONF_SECRET_MAX 512
int conf_read_secret_file(const char *path, const char *what, char **ret, char **ret_error);

/* Sets *ret_error to the message (or NULL when even that ran out of
 * memory) and returns error. */
int conf_error(char **ret_error, int error, const char *format, ...) _printf_(3, 4);

/* Sets *ret_why (when ret_why is not NULL) and returns -EINVAL: a value
 * rejected, with the reason. */
static inline int conf_why(const char **ret_why, const char *why) {
        if (ret_why)
                *ret_why = why;
        return -EINVAL;
}
