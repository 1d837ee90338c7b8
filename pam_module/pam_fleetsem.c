/* SPDX-License-Identifier: MIT */
/* pam_fleetsem: a login session holds one of the fleet-wide slots of a name
 * for as long as it lasts.
 *
 *   session required pam_fleetsem.so slots=2 [name=login:%u] [wait=0] ...
 *
 * A thin client of the host's agent: open_session creates the anchor, asks
 * the agent, and keeps the anchor open in the process that opened the
 * session (PAM closes it with the handle). Inside the login process there
 * is no fork, no thread, no signal handler and no global state, and every
 * wait is bounded. */

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include <security/pam_ext.h>
#include <security/pam_modules.h>

#include "client.h"
#include "config.h"
#include "macro.h"
#include "outcome.h"
#include "pam-args.h"
#include "pam-name.h"
#include "pam-who.h"
#include "protocol.h"
#include "socket-util.h"
#include "time-util.h"

#define DATA_KEY "pam_fleetsem"
#define CONNECT_TIMEOUT (2 * USEC_PER_SEC)     /* on top of wait= */
#define HOLDERS_SHOWN 5

/* What the session holds, kept with pam_set_data() until close_session or
 * pam_end(). */
typedef struct Held {
        int anchor_fd;
        char lease[LEASE_ID_LEN + 1];
        char name[NAME_MAX_LEN + 1];
} Held;

/* ---- Who the session is for ---------------------------------------------------- */

static bool in_list(const char (*list)[64], size_t n, const char *s) {
        for (size_t i = 0; i < n; i++)
                if (streq(list[i], s))
                        return true;
        return false;
}

/* exempt_user= matches the account by its own name or by the one PAM was
 * given for it. */
static bool is_exempt(const Options *o, const Who *w) {
        if (w->uid == 0 && o->exempt_root)
                return true;
        if (in_list(o->exempt_users, o->n_exempt_users, w->account) ||
            in_list(o->exempt_users, o->n_exempt_users, w->user))
                return true;
        for (size_t i = 0; i < o->n_exempt_groups; i++)
                if (user_in_group(w->account, w->gid, o->exempt_groups[i]))
                        return true;
        return false;
}

/* ---- Talking to the agent ------------------------------------------------------ */

/* "web-3 since 09:12, web-7 since 09:40", from the agent's STATUS. */
static void describe_holders(const Options *o, const char *name, usec_t deadline, char *buf, size_t size) {
        _cleanup_close_ int fd = -EBADF;
        Request req = { .verb = REQUEST_STATUS };
        unsigned shown = 0, more = 0;
        LineReader lr;
        size_t len = 0;

        buf[0] = '\0';
        snprintf(req.name, sizeof(req.name), "%s", name);
        if (client_send_request_until(o->ns, o->agent_uid, deadline, -EBADF, &req, &fd) < 0)
                return;
        line_reader_init(&lr, PROTO_REPLY_MAX);
        for (;;) {
                const char *host, *since;
                char *line, hhmm[16] = "?", host_text[TEXT_ESCAPE_SIZE(IDENT_MAX_LEN)];
                uint64_t ms = 0;
                Message m;
                size_t n;
                int r;

                if (client_read_line(fd, &lr, deadline, &line, &n) < 0)
                        break;
                if (message_parse(line, n, PROTO_REPLY_MAX, &m) < 0 || streq(m.verb, "END") || streq(m.verb, "ERROR"))
                        break;
                if (!streq(m.verb, "HOLDER"))
                        continue;
                if (shown >= HOLDERS_SHOWN) {
                        more++;
                        continue;
                }
                host = message_get(&m, "host") ?: "?";
                since = message_get(&m, "since");
                if (since && parse_uint64(since, 1, UINT64_MAX, &ms) >= 0) {
                        time_t t = (time_t) (ms / 1000);
                        struct tm tm;

                        if (localtime_r(&t, &tm))
                                strftime(hhmm, sizeof(hhmm), "%H:%M", &tm);
                }
                r = snprintf(buf + len, size - len, "%s%s since %s", shown ? ", " : "",
                             text_escape(host, host_text, sizeof(host_text)), hhmm);
                if (r < 0 || (size_t) r >= size - len)
                        break;
                len += (size_t) r;
                shown++;
        }
        if (more > 0 && len < size)
                snprintf(buf + len, size - len, " and %u more", more);
}

static void held_free(pam_handle_t *pamh, void *data, int error_status) {
        Held *h = data;

        (void) pamh;
        (void) error_status;
        if (!h)
                return;
        safe_close(h->anchor_fd);
        free(h);
}

static bool silent(const Options *o, int flags) {
        return o->quiet || (flags & PAM_SILENT);
}

/* The limiter cannot be reached (outcome.h, UNAVAILABLE): the one case
 * on_error decides. */
static int on_error(pam_handle_t *pamh, const Options *o, int flags, const char *user, const char *why) {
        if (o->deny_on_error) {
                pam_syslog(pamh, LOG_ERR, "refusing session of %s: %s (on_error=deny)", user, why);
                if (!silent(o, flags))
                        pam_error(pamh, "fleetsem: cannot check the session limit (%s); session refused.", why);
                return PAM_SESSION_ERR;
        }
        pam_syslog(pamh, LOG_WARNING, "allowing session of %s WITHOUT a fleet slot: %s (on_error=allow)", user, why);
        return PAM_SUCCESS;
}

/* A bad configuration, a failure here, a reply nobody can decode or an
 * error Redis gave the agent: refused whatever on_error= says, as none of
 * them is an outage that an administrator must be let in through. */
static int broken(pam_handle_t *pamh, const Options *o, int flags, const char *user, const char *why) {
        pam_syslog(pamh, LOG_ERR, "refusing session of %s: %s (whatever on_error= says)", user, why);
        if (!silent(o, flags))
                pam_error(pamh, "fleetsem: cannot check the session limit; session refused.");
        return PAM_SESSION_ERR;
}

/* The agent refused the request with an error (not permitted, past a
 * per-user budget, busy, or a request it cannot serve as configured). */
static int refused_by_error(pam_handle_t *pamh, const Options *o, int flags, const char *user, const Outcome *out) {
        pam_syslog(pamh, LOG_ERR, "refused session of %s: %s (%s)", user, out->text, refusal_to_string(out->refusal));
        if (!silent(o, flags))
                pam_error(pamh, "fleetsem: session refused: %s.", out->text);
        return refusal_is_configuration(out->refusal) ? PAM_SESSION_ERR : PAM_PERM_DENIED;
}

/* The session has no name to count it under: the PAM user is unknown to
 * NSS, or name= gives no valid name for it. Refused whatever on_error=
 * says: a session that cannot be counted must not pass uncounted. */
static int unnamed(pam_handle_t *pamh, const Options *o, int flags, const char *user, const char *why) {
        char shown[TEXT_ESCAPE_SIZE(64)];

        /* The name PAM was given may be anything: shown escaped, cut short. */
        text_escape(user, shown, sizeof(shown));
        pam_syslog(pamh, LOG_ERR, "refusing session of %s: no slot name (name=%s): %s", shown, o->name_template, why);
        if (!silent(o, flags))
                pam_error(pamh, "fleetsem: cannot name this session's slot (%s); session refused.", why);
        return PAM_SESSION_ERR;
}

/* "sessions for alice" (per-user names) or "sessions of build-hosts". */
static void sessions_of(const Options *o, const Who *w, const char *name, char *buf, size_t size) {
        if (strstr(o->name_template, "%u") || strstr(o->name_template, "%U"))
                snprintf(buf, size, "sessions for %s", w->account);
        else
                snprintf(buf, size, "sessions of %s", name);
}

/* "NAME is limited to 1 at once by its current holders (this service asks
 * for 3)", told once, when the holders allow fewer than slots=. */
static void tell_limit(pam_handle_t *pamh, const Options *o, int flags, const char *name, const Reply *rep, int style,
                       bool *told) {
        char note[NAME_MAX_LEN + 128];

        if (*told || !limit_note(name, rep->limit, o->slots, "this service asks for", note, sizeof(note)))
                return;
        *told = true;
        pam_syslog(pamh, LOG_NOTICE, "%s", note);
        if (!silent(o, flags))
                pam_prompt(pamh, style, NULL, "fleetsem: %s.", note);
}

/* That no slot is granted for a while after Redis lost or began its state,
 * and why: told once, as the wait begins. */
static void tell_grace(pam_handle_t *pamh, const Options *o, int flags, const char *name, const Reply *rep, bool *told) {
        char note[NAME_MAX_LEN + 512];

        if (*told || !grace_note(name, rep, note, sizeof(note)))
                return;
        *told = true;
        pam_syslog(pamh, LOG_NOTICE, "%s", note);
        if (!silent(o, flags))
                pam_info(pamh, "fleetsem: %s.", note);
}

/* That the name is drained (no new session is let in anywhere until an
 * operator undrains it), by whom and why: told once. */
static void tell_drain(pam_handle_t *pamh, const Options *o, int flags, const char *name, const Reply *rep, int style,
                       bool *told) {
        char note[NAME_MAX_LEN + 1024];

        if (*told || !drain_note(name, rep, note, sizeof(note)))
                return;
        *told = true;
        pam_syslog(pamh, LOG_NOTICE, "%s", note);
        if (!silent(o, flags))
                pam_prompt(pamh, style, NULL, "fleetsem: %s.", note);
}

static int refused(pam_handle_t *pamh, const Options *o, int flags, const Who *w, const char *name, const Reply *rep,
                   usec_t deadline) {
        char holders[512], what[NAME_MAX_LEN + 64], note[NAME_MAX_LEN + 512];
        uint32_t slots = reply_limit(rep, o->slots);

        /* In a grace (a first use of Redis, one that lost its state, a
         * failover) no slot need be in use: say what holds it back. */
        if (grace_note(name, rep, note, sizeof(note))) {
                pam_syslog(pamh, LOG_NOTICE, "refused session of %s: %s", w->account, note);
                if (!silent(o, flags))
                        pam_error(pamh, "fleetsem: %s; try again later.", note);
                return PAM_PERM_DENIED;
        }
        describe_holders(o, name, deadline, holders, sizeof(holders));
        sessions_of(o, w, name, what, sizeof(what));
        pam_syslog(pamh, LOG_NOTICE, "refused session of %s: all %" PRIu32 " %s are in use (%s)", w->account, slots, what,
                   holders[0] ? holders : "holders unknown");
        if (!silent(o, flags))
                pam_error(pamh, "fleetsem: all %" PRIu32 " %s are in use%s%s%s; try again later.", slots, what,
                          holders[0] ? " (" : "", holders, holders[0] ? ")" : "");
        return PAM_PERM_DENIED;
}

/* What the user was told already, each once. */
typedef struct Told {
        bool waiting, limit, grace, drain;
} Told;

/* Waits for the agent's answer, telling the user what the wait is about;
 * what it came to in *ret (never QUEUED). */
static void wait_for_answer(pam_handle_t *pamh, const Options *o, int flags, const Who *w, const char *name, int fd,
                            usec_t deadline, Told *told, Outcome *ret) {
        LineReader lr;

        line_reader_init(&lr, PROTO_REPLY_MAX);
        for (;;) {
                char *line;
                size_t len;
                int r;

                r = client_read_line(fd, &lr, deadline, &line, &len);
                if (r < 0) {
                        outcome_of_error(r, o->ns, ret);
                        return;
                }
                if (outcome_of_line(line, len, false, ret) != OUTCOME_QUEUED)
                        return;
                if (o->wait > 0) {
                        tell_limit(pamh, o, flags, name, &ret->reply, PAM_TEXT_INFO, &told->limit);
                        tell_grace(pamh, o, flags, name, &ret->reply, &told->grace);
                        tell_drain(pamh, o, flags, name, &ret->reply, PAM_TEXT_INFO, &told->drain);
                }
                if (!told->waiting && o->wait > 0 && !silent(o, flags)) {
                        char what[NAME_MAX_LEN + 64];

                        sessions_of(o, w, name, what, sizeof(what));
                        pam_info(pamh, "fleetsem: all %" PRIu32 " %s are in use; waiting (position %" PRIu32 ")...",
                                 reply_limit(&ret->reply, o->slots), what, ret->reply.position);
                        told->waiting = true;
                }
        }
}

/* The slot stays with the session: its anchor kept with pam_set_data(),
 * its name, token and lease in the session's environment. */
static int keep(pam_handle_t *pamh, const Options *o, int flags, const Who *w, const char *name, const Reply *rep,
                int *anchor_fd) {
        char env[NAME_MAX_LEN + 32];
        Held *h;

        h = calloc(1, sizeof(*h));
        if (!h)
                return broken(pamh, o, flags, w->account, "out of memory");
        h->anchor_fd = TAKE_FD(*anchor_fd);
        snprintf(h->lease, sizeof(h->lease), "%s", rep->lease);
        snprintf(h->name, sizeof(h->name), "%s", name);
        if (pam_set_data(pamh, DATA_KEY, h, held_free) != PAM_SUCCESS) {
                held_free(pamh, h, 0);
                return broken(pamh, o, flags, w->account, "cannot keep the slot with the session");
        }

        snprintf(env, sizeof(env), "FLEETSEM_NAME=%s", name);
        (void) pam_putenv(pamh, env);
        snprintf(env, sizeof(env), "FLEETSEM_TOKEN=%" PRIu64, rep->token);
        (void) pam_putenv(pamh, env);
        snprintf(env, sizeof(env), "FLEETSEM_LEASE=%s", rep->lease);
        (void) pam_putenv(pamh, env);
        if (o->debug)
                pam_syslog(pamh, LOG_DEBUG, "session of %s holds a slot of %s (token %" PRIu64 ")", w->account, name,
                           rep->token);
        return PAM_SUCCESS;
}

static int acquire(pam_handle_t *pamh, const Options *o, int flags, const Who *w, const char *name) {
        _cleanup_close_ int anchor_fd = -EBADF, fd = -EBADF;
        Request req = { .verb = REQUEST_ACQUIRE, .slots = o->slots, .weight = o->weight, .wait = o->wait };
        usec_t start = now_usec(CLOCK_MONOTONIC), deadline;
        Told told = {};
        Outcome out;
        char why[64];
        int r;

        snprintf(req.name, sizeof(req.name), "%s", name);
        r = lease_id_new(req.lease);
        if (r >= 0)
                r = anchor_create(o->ns, req.lease, &anchor_fd);
        if (r < 0) {
                snprintf(why, sizeof(why), "cannot create the anchor: %s", strerror(-r));
                return broken(pamh, o, flags, w->account, why);
        }
        /* The whole of it within wait= plus CONNECT_TIMEOUT, whatever the
         * agent, or a process in its place, does. */
        deadline = usec_add(start, usec_add(o->wait, CONNECT_TIMEOUT));
        r = client_send_request_until(o->ns, o->agent_uid, start + CONNECT_TIMEOUT, -EBADF, &req, &fd);
        if (r < 0)
                outcome_of_error(r, o->ns, &out);
        else
                wait_for_answer(pamh, o, flags, w, name, fd, deadline, &told, &out);

        switch (out.kind) {
        case OUTCOME_GRANTED:
                return keep(pamh, o, flags, w, name, &out.reply, &anchor_fd);
        case OUTCOME_UNAVAILABLE:
                return on_error(pamh, o, flags, w->account, out.text);
        case OUTCOME_REFUSED:
                if (out.reply.kind != REPLY_DENIED)
                        return refused_by_error(pamh, o, flags, w->account, &out);
                tell_limit(pamh, o, flags, name, &out.reply, PAM_ERROR_MSG, &told.limit);
                tell_drain(pamh, o, flags, name, &out.reply, PAM_ERROR_MSG, &told.drain);
                return refused(pamh, o, flags, w, name, &out.reply, deadline);
        default:
                return broken(pamh, o, flags, w->account, out.text);
        }
}

PAM_EXTERN int pam_sm_open_session(pam_handle_t *pamh, int flags, int argc, const char **argv) {
        _cleanup_(who_done) Who w = {};
        char name[NAME_MAX_LEN + 1];
        const char *user = NULL, *why = NULL;
        Options o;

        parse_options(pamh, argc, argv, &o);
        if (pam_get_item(pamh, PAM_USER, (const void **) &user) != PAM_SUCCESS || !user || !user[0])
                return unnamed(pamh, &o, flags, "?", "no user for this session");
        if (who_lookup(user, &w, &why) < 0)
                return unnamed(pamh, &o, flags, user, why);

        /* Exempt users pass whatever else is wrong: an admin must never be
         * locked out by a broken configuration or a Redis outage. */
        if (is_exempt(&o, &w)) {
                if (o.debug)
                        pam_syslog(pamh, LOG_DEBUG, "%s is exempt", w.account);
                return PAM_SUCCESS;
        }
        if (o.error[0]) {
                pam_syslog(pamh, LOG_ERR, "bad configuration: %s", o.error);
                return broken(pamh, &o, flags, w.account, "bad configuration of pam_fleetsem");
        }
        if (expand_name(pamh, o.name_template, &w, name, &why) < 0)
                return unnamed(pamh, &o, flags, user, why);
        return acquire(pamh, &o, flags, &w, name);
}

PAM_EXTERN int pam_sm_close_session(pam_handle_t *pamh, int flags, int argc, const char **argv) {
        _cleanup_close_ int fd = -EBADF;
        const void *data = NULL;
        const Held *h;
        Request req = { .verb = REQUEST_RELEASE };
        LineReader lr;
        Options o;
        Reply rep;

        (void) flags;
        if (pam_get_data(pamh, DATA_KEY, &data) != PAM_SUCCESS || !data)
                return PAM_SUCCESS;     /* exempt, or allowed without a slot */
        h = data;
        parse_options(pamh, argc, argv, &o);

        /* Confirmed with the agent when it is there; closing the anchor
         * releases the slot anyway. */
        snprintf(req.lease, sizeof(req.lease), "%s", h->lease);
        if (client_send_request(o.ns, o.agent_uid, CONNECT_TIMEOUT, &req, &fd) >= 0) {
                line_reader_init(&lr, PROTO_REPLY_MAX);
                if (client_read_reply(fd, &lr, now_usec(CLOCK_MONOTONIC) + CONNECT_TIMEOUT, &rep) < 0 || rep.kind != REPLY_RELEASED)
                        pam_syslog(pamh, LOG_WARNING, "the agent did not confirm the release of %s", h->name);
                else if (o.debug)
                        pam_syslog(pamh, LOG_DEBUG, "released the slot of %s", h->name);
        }
        (void) pam_set_data(pamh, DATA_KEY, NULL, NULL);        /* closes the anchor */
        return PAM_SUCCESS;
}
