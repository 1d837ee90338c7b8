/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>

#include <security/pam_ext.h>

#include "config.h"
#include "macro.h"
#include "pam-args.h"
#include "protocol.h"

typedef struct Parse {
        pam_handle_t *pamh;
        Options *o;
        bool in_file;
} Parse;

static int parse_bool(const char *v, bool *ret) {
        if (!v || streq(v, "yes") || streq(v, "true") || streq(v, "1") || streq(v, "on"))
                *ret = true;
        else if (streq(v, "no") || streq(v, "false") || streq(v, "0") || streq(v, "off"))
                *ret = false;
        else
                return -EINVAL;
        return 0;
}

static int add_exempt(char list[][64], size_t *n, const char *v, const char **why) {
        if (!v || !v[0] || strlen(v) >= 64) {
                *why = "expected a user or group name";
                return -EINVAL;
        }
        if (*n >= EXEMPT_MAX) {
                *why = "too many";
                return -E2BIG;
        }
        snprintf(list[(*n)++], 64, "%s", v);
        return 0;
}

/* One option, from the module's arguments or from conf=FILE: the same keys,
 * the same checks. Unknown keys are logged and ignored; a malformed value
 * is an error. */
static int option_set(const char *key, const char *value, void *userdata, const char **why) {
        Parse *p = userdata;
        Options *o = p->o;
        uint64_t v;
        bool b;

        if (streq(key, "slots")) {
                if (!value || parse_uint64(value, 1, SLOTS_MAX, &v) < 0) {
                        *why = "expected a number from 1 to 1000000";
                        return -EINVAL;
                }
                o->slots = (uint32_t) v;
        } else if (streq(key, "weight")) {
                if (!value || parse_uint64(value, 1, SLOTS_MAX, &v) < 0) {
                        *why = "expected a number from 1 to 1000000";
                        return -EINVAL;
                }
                o->weight = (uint32_t) v;
        } else if (streq(key, "name")) {
                if (!value || !value[0] || strlen(value) >= TEMPLATE_MAX) {
                        *why = "expected a name template such as login:%u";
                        return -EINVAL;
                }
                snprintf(o->name_template, sizeof(o->name_template), "%s", value);
        } else if (streq(key, "wait")) {
                if (!value || parse_duration(value, &o->wait) < 0) {
                        *why = "expected a duration such as 0, 30s or 2min";
                        return -EINVAL;
                }
        } else if (streq(key, "on_error")) {
                if (!value || (!streq(value, "allow") && !streq(value, "deny"))) {
                        *why = "expected allow or deny";
                        return -EINVAL;
                }
                o->deny_on_error = streq(value, "deny");
        } else if (streq(key, "exempt_user"))
                return add_exempt(o->exempt_users, &o->n_exempt_users, value, why);
        else if (streq(key, "exempt_group"))
                return add_exempt(o->exempt_groups, &o->n_exempt_groups, value, why);
        else if (streq(key, "namespace")) {
                if (!value || !ident_is_valid(value)) {
                        *why = "expected 1-64 of A-Z a-z 0-9 _ . : -";
                        return -EINVAL;
                }
                snprintf(o->ns, sizeof(o->ns), "%s", value);
        } else if (streq(key, "agent_user")) {
                struct passwd pwbuf, *pw = NULL;
                char buf[4096];

                if (!value || getpwnam_r(value, &pwbuf, buf, sizeof(buf), &pw) != 0 || !pw) {
                        *why = "expected an existing user";
                        return -EINVAL;
                }
                o->agent_uid = pw->pw_uid;
        } else if (streq(key, "noexempt_root")) {
                if (parse_bool(value, &b) < 0) {
                        *why = "expected yes or no";
                        return -EINVAL;
                }
                o->exempt_root = !b;
        } else if (streq(key, "debug") || streq(key, "quiet")) {
                if (parse_bool(value, &b) < 0) {
                        *why = "expected yes or no";
                        return -EINVAL;
                }
                *(streq(key, "debug") ? &o->debug : &o->quiet) = b;
        } else if (streq(key, "conf") && p->in_file) {
                *why = "conf= belongs in the module's arguments, not in a conf file";
                return -EINVAL;
        } else
                pam_syslog(p->pamh, LOG_ERR, "unknown option \"%s\" ignored", key);
        return 0;
}

static void set_error(Options *o, const char *format, ...) _printf_(2, 3);
static void set_error(Options *o, const char *format, ...) {
        va_list ap;

        if (o->error[0])
                return;
        va_start(ap, format);
        vsnprintf(o->error, sizeof(o->error), format, ap);
        va_end(ap);
}

void parse_options(pam_handle_t *pamh, int argc, const char **argv, Options *o) {
        Parse p = { .pamh = pamh, .o = o };

        *o = (Options) { .exempt_root = true, .name_template = "login:%u", .ns = DEFAULT_NAMESPACE };
        for (int i = 0; i < argc; i++) {
                char key[64];
                const char *eq = strchr(argv[i], '='), *why = NULL;
                size_t n = eq ? (size_t) (eq - argv[i]) : strlen(argv[i]);

                if (n == 0 || n >= sizeof(key)) {
                        pam_syslog(pamh, LOG_ERR, "malformed option \"%s\" ignored", argv[i]);
                        continue;
                }
                memcpy(key, argv[i], n);
                key[n] = '\0';
                if (streq(key, "conf")) {
                        _cleanup_free_ char *error = NULL;

                        p.in_file = true;
                        if (!eq || conf_parse_file(eq + 1, option_set, &p, &error) < 0)
                                set_error(o, "%s", error ?: "conf= needs a file");
                        p.in_file = false;
                        continue;
                }
                if (option_set(key, eq ? eq + 1 : NULL, &p, &why) < 0)
                        set_error(o, "%s: %s", argv[i], why ?: "invalid");
        }
        if (!o->error[0] && o->slots > 0 && o->weight > o->slots)
                set_error(o, "weight=%" PRIu32 " is above slots=%" PRIu32 ": it would never fit", o->weight, o->slots);
}
