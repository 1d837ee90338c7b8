/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "macro.h"
#include "protocol.h"

static bool char_is_plain(unsigned char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               (c != '\0' && strchr("_.:@/+,=-", c));
}

static int unhex(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -1;
}

/* Decodes [p, end) into out (NUL-terminated); refuses %00 and bad escapes. */
static char *decode_value(const char *p, const char *end, char *out) {
        while (p < end) {
                if (*p == '%') {
                        int hi, lo;

                        if (end - p < 3)
                                return NULL;
                        hi = unhex(p[1]);
                        lo = unhex(p[2]);
                        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                                return NULL;
                        *out++ = (char) (hi << 4 | lo);
                        p += 3;
                } else if (char_is_plain((unsigned char) *p))
                        *out++ = *p++;
                else
                        return NULL;
        }
        *out++ = '\0';
        return out;
}

int message_parse(const char *line, size_t len, size_t max_len, Message *ret) {
        const char *p = line, *end = line + len;
        char *out = ret->storage;
        size_t n;

        if (len > max_len || len > PROTO_REPLY_MAX)
                return -E2BIG;

        /* Verb: upper-case letters. */
        n = 0;
        while (p < end && *p >= 'A' && *p <= 'Z' && n < PROTO_VERB_MAX)
                ret->verb[n++] = *p++;
        if (n == 0 || (p < end && *p != ' '))
                return -EBADMSG;
        ret->verb[n] = '\0';
        ret->n_fields = 0;

        while (p < end) {
                const char *key, *eq, *stop;

                if (*p++ != ' ' || p >= end)
                        return -EBADMSG;
                stop = memchr(p, ' ', (size_t) (end - p)) ?: end;
                eq = memchr(p, '=', (size_t) (stop - p));
                if (!eq || eq == p || eq - p > PROTO_KEY_MAX)
                        return -EBADMSG;
                for (const char *k = p; k < eq; k++)
                        if (!((*k >= 'a' && *k <= 'z') || *k == '_'))
                                return -EBADMSG;
                if (ret->n_fields >= PROTO_FIELDS_MAX)
                        return -E2BIG;

                /* The decoded form is never longer than the encoded one, so
                 * storage (as large as the longest line) always has room. */
                key = out;
                memcpy(out, p, (size_t) (eq - p));
                out += eq - p;
                *out++ = '\0';
                for (size_t i = 0; i < ret->n_fields; i++)
                        if (streq(ret->storage + ret->fields[i].key, key))
                                return -EBADMSG;
                ret->fields[ret->n_fields].key = (uint16_t) (key - ret->storage);
                ret->fields[ret->n_fields].value = (uint16_t) (out - ret->storage);
                out = decode_value(eq + 1, stop, out);
                if (!out)
                        return -EBADMSG;
                ret->n_fields++;
                p = stop;
        }
        return 0;
}

const char *message_get(const Message *m, const char *key) {
        for (size_t i = 0; i < m->n_fields; i++)
                if (streq(m->storage + m->fields[i].key, key))
                        return m->storage + m->fields[i].value;
        return NULL;
}

static void builder_put(MessageBuilder *b, const char *s, size_t n) {
        if (b->error < 0)
                return;
        if (b->len + n + 1 > b->size) {
                b->error = -ENOBUFS;
                return;
        }
        memcpy(b->buf + b->len, s, n);
        b->len += n;
        b->buf[b->len] = '\0';
}

void message_start(MessageBuilder *b, char *buf, size_t size, const char *verb) {
        *b = (MessageBuilder) { .buf = buf, .size = size };
        builder_put(b, verb, strlen(verb));
}

void message_add(MessageBuilder *b, const char *key, const char *value) {
        static const char hex[] = "0123456789ABCDEF";

        builder_put(b, " ", 1);
        builder_put(b, key, strlen(key));
        builder_put(b, "=", 1);
        for (const unsigned char *v = (const unsigned char *) value; *v; v++) {
                char esc[3] = { '%', hex[*v >> 4], hex[*v & 15] };

                if (char_is_plain(*v))
                        builder_put(b, (const char *) v, 1);
                else
                        builder_put(b, esc, 3);
        }
}

void message_addf(MessageBuilder *b, const char *key, const char *format, ...) {
        char value[PROTO_REPLY_MAX];
        va_list ap;

        va_start(ap, format);
        vsnprintf(value, sizeof(value), format, ap);
        va_end(ap);
        message_add(b, key, value);
}

void message_add_u64(MessageBuilder *b, const char *key, uint64_t value) {
        message_addf(b, key, "%" PRIu64, value);
}

int message_finish(MessageBuilder *b) {
        return b->error < 0 ? b->error : (int) b->len;
}

static int fail_with(const char **ret_error, const char *why, int error) {
        if (ret_error)
                *ret_error = why;
        return error;
}

static int fail(const char **ret_error, const char *why) {
        return fail_with(ret_error, why, -EINVAL);
}

/* A format character that reorders or hides text: bidi controls and marks,
 * zero-width characters, line and paragraph separators, BOM. */
static bool hides_text(uint32_t cp) {
        return (cp >= 0x200b && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x206f) ||
               cp == 0xfeff || cp == 0x061c;
}

bool drain_reason_is_valid(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > DRAIN_REASON_MAX)
                return false;
        for (const char *p = s; *p;) {
                uint32_t cp;
                size_t k = utf8_decode(p, &cp);

                if (k == 0 || cp < 0x20 || (cp >= 0x7f && cp < 0xa0) || hides_text(cp))
                        return false;
                p += k;
        }
        return true;
}

int request_parse(const char *line, size_t len, Request *ret, const char **ret_error) {
        Request r = {};
        Message m;
        const char *name, *lease, *slots, *wait, *unit, *on_lost, *on, *reason, *host, *weight, *now, *hold;
        size_t expected;
        uint64_t v;
        int k;

        k = message_parse(line, len, PROTO_REQUEST_MAX, &m);
        if (k == -E2BIG)
                return fail_with(ret_error, "request too long", -E2BIG);
        if (k < 0)
                return fail_with(ret_error, "malformed request", -EBADMSG);

        name = message_get(&m, "name");
        lease = message_get(&m, "lease");
        slots = message_get(&m, "slots");
        wait = message_get(&m, "wait");
        unit = message_get(&m, "unit");
        on_lost = message_get(&m, "on_lost");
        on = message_get(&m, "on");
        reason = message_get(&m, "reason");
        host = message_get(&m, "host");
        weight = message_get(&m, "weight");
        now = message_get(&m, "now");
        hold = message_get(&m, "hold");
        if (hold && !streq(hold, "host"))
                return fail(ret_error, "invalid hold (host)");

        if (streq(m.verb, "ACQUIRE")) {
                r.verb = REQUEST_ACQUIRE;
                if (!name || !lease || !slots || !wait)
                        return fail(ret_error, "ACQUIRE needs name=, lease=, slots= and wait=");
                expected = 4 + !!unit + !!on_lost + !!weight + !!hold + !!reason;
                if (on_lost && !unit)
                        return fail(ret_error, "on_lost= needs unit=1");
                if (hold && unit)
                        return fail(ret_error, "hold=host and unit=1 exclude each other");
                if (reason && !hold)
                        return fail(ret_error, "reason= goes with hold=host");
        } else if (streq(m.verb, "RELEASE")) {
                r.verb = REQUEST_RELEASE;
                if (!!lease == (!!unit || !!hold) || (unit && hold) || ((unit || hold) && !name) || (lease && name))
                        return fail(ret_error, "RELEASE needs lease=, or name= and unit=1 or hold=host");
                expected = lease ? 1 : 2;
        } else if (streq(m.verb, "STATUS")) {
                r.verb = REQUEST_STATUS;
                expected = name ? 1 : 0;
        } else if (streq(m.verb, "METRICS")) {
                r.verb = REQUEST_METRICS;
                expected = 0;
        } else if (streq(m.verb, "WATCH")) {
                r.verb = REQUEST_WATCH;
                expected = 0;
        } else if (streq(m.verb, "DRAIN")) {
                r.verb = REQUEST_DRAIN;
                if (!name || !on)
                        return fail(ret_error, "DRAIN needs name= and on=");
                if (!streq(on, "1") && !streq(on, "0"))
                        return fail(ret_error, "invalid on (1 or 0)");
                r.drain = streq(on, "1");
                expected = 2 + !!reason;
                if (reason && !r.drain)
                        return fail(ret_error, "reason= goes with on=1");
        } else if (streq(m.verb, "LIMIT")) {
                r.verb = REQUEST_LIMIT;
                if (!name || !slots)
                        return fail(ret_error, "LIMIT needs name= and slots=");
                expected = 2 + !!reason;
        } else if (streq(m.verb, "REVOKE")) {
                r.verb = REQUEST_REVOKE;
                if (!!lease == !!host || (lease && !name))
                        return fail(ret_error, "REVOKE needs name= and lease=, or host= [name=]");
                expected = !!name + !!lease + !!host + !!reason + !!now;
                if (now && !streq(now, "1"))
                        return fail(ret_error, "invalid now (1)");
                r.revoke_now = !!now;
                if (host && !ident_is_valid(host))
                        return fail(ret_error, "invalid host (1-64 of A-Z a-z 0-9 _ . -)");
                if (host)
                        strcpy(r.host, host);
        } else
                return fail(ret_error, "unknown request");

        if (m.n_fields != expected)
                return fail(ret_error, "unexpected field in request");

        if (unit) {
                if (!streq(unit, "1"))
                        return fail(ret_error, "invalid unit (1)");
                r.unit = true;
        }
        if (on_lost) {
                if (!streq(on_lost, "stop") && !streq(on_lost, "ignore"))
                        return fail(ret_error, "invalid on_lost (stop or ignore)");
                r.stop_on_lost = streq(on_lost, "stop");
        }

        if (name) {
                if (!name_is_valid(name))
                        return fail(ret_error, "invalid name (allowed: 1-200 of A-Z a-z 0-9 _ . : @ -)");
                strcpy(r.name, name);
        }
        if (lease) {
                if (!lease_id_is_valid(lease))
                        return fail(ret_error, "invalid lease id (32 lower-case hex digits)");
                strcpy(r.lease, lease);
        }
        r.host_held = !!hold;
        if (reason) {   /* DRAIN, REVOKE, LIMIT, ACQUIRE hold=host */
                if (!drain_reason_is_valid(reason))
                        return fail(ret_error, "invalid reason (1-200 bytes of printable UTF-8)");
                strcpy(r.reason, reason);
        }
        if (slots) {
                if (parse_uint64(slots, 0, SLOTS_MAX, &v) < 0)
                        return fail(ret_error, "invalid slots (0-1000000)");
                r.slots = (uint32_t) v;
        }
        r.weight = 1;
        if (weight) {
                if (parse_uint64(weight, 1, SLOTS_MAX, &v) < 0)
                        return fail(ret_error, "invalid weight (1-1000000)");
                if (r.slots > 0 && v > r.slots)
                        return fail(ret_error, "weight above slots: it would never fit");
                r.weight = (uint32_t) v;
        }
        if (wait) {
                if (streq(wait, "infinity"))
                        r.wait = USEC_INFINITY;
                else if (parse_uint64(wait, 0, USEC_INFINITY - 1, &v) < 0)
                        return fail(ret_error, "invalid wait (microseconds or infinity)");
                else
                        r.wait = v;
        }

        *ret = r;
        return 0;
}

int request_format(const Request *r, char *buf, size_t size) {
        MessageBuilder b;

        switch (r->verb) {
        case REQUEST_ACQUIRE:
                message_start(&b, buf, size, "ACQUIRE");
                message_add(&b, "name", r->name);
                message_add_u64(&b, "slots", r->slots);
                message_add(&b, "lease", r->lease);
                if (r->wait == USEC_INFINITY)
                        message_add(&b, "wait", "infinity");
                else
                        message_add_u64(&b, "wait", r->wait);
                if (r->unit)
                        message_add(&b, "unit", "1");
                if (r->stop_on_lost)
                        message_add(&b, "on_lost", "stop");
                if (r->weight > 1)
                        message_add_u64(&b, "weight", r->weight);
                if (r->host_held)
                        message_add(&b, "hold", "host");
                if (r->host_held && r->reason[0])
                        message_add(&b, "reason", r->reason);
                break;
        case REQUEST_RELEASE:
                message_start(&b, buf, size, "RELEASE");
                if (r->unit || r->host_held) {
                        message_add(&b, "name", r->name);
                        message_add(&b, r->unit ? "unit" : "hold", r->unit ? "1" : "host");
                } else
                        message_add(&b, "lease", r->lease);
                break;
        case REQUEST_STATUS:
                message_start(&b, buf, size, "STATUS");
                if (r->name[0])
                        message_add(&b, "name", r->name);
                break;
        case REQUEST_METRICS:
                message_start(&b, buf, size, "METRICS");
                break;
        case REQUEST_WATCH:
                message_start(&b, buf, size, "WATCH");
                break;
        case REQUEST_DRAIN:
                message_start(&b, buf, size, "DRAIN");
                message_add(&b, "name", r->name);
                message_add(&b, "on", r->drain ? "1" : "0");
                if (r->reason[0])
                        message_add(&b, "reason", r->reason);
                break;
        case REQUEST_LIMIT:
                message_start(&b, buf, size, "LIMIT");
                message_add(&b, "name", r->name);
                message_add_u64(&b, "slots", r->slots);
                if (r->reason[0])
                        message_add(&b, "reason", r->reason);
                break;
        case REQUEST_REVOKE:
                message_start(&b, buf, size, "REVOKE");
                if (r->name[0])
                        message_add(&b, "name", r->name);
                if (r->lease[0])
                        message_add(&b, "lease", r->lease);
                if (r->host[0])
                        message_add(&b, "host", r->host);
                if (r->reason[0])
                        message_add(&b, "reason", r->reason);
                if (r->revoke_now)
                        message_add(&b, "now", "1");
                break;
        default:
                return -EINVAL;
        }
        return message_finish(&b);
}

const char *grace_why_text(const char *why) {
        if (!why)
                return NULL;
        if (streq(why, GRACE_WHY_NEW))
                return "Redis holds no fleetsem state yet (its first use, or it lost its data before this host "
                       "connected)";
        if (streq(why, GRACE_WHY_RESET))
                return "Redis lost its fleetsem state (restarted empty, or its data were flushed)";
        if (streq(why, GRACE_WHY_FAILOVER))
                return "Redis' master changed (a failover, or a restart from a snapshot), and may have missed the "
                       "last grants";
        return NULL;
}

size_t utf8_decode(const char *s, uint32_t *ret_cp) {
        const unsigned char *p = (const unsigned char *) s;
        uint32_t cp;
        size_t n;

        if (p[0] >= 0x01 && p[0] <= 0x7f)
                n = 1, cp = p[0];
        else if (p[0] >= 0xc2 && p[0] <= 0xdf)
                n = 2, cp = p[0] & 0x1f;
        else if (p[0] >= 0xe0 && p[0] <= 0xef)
                n = 3, cp = p[0] & 0x0f;
        else if (p[0] >= 0xf0 && p[0] <= 0xf4)
                n = 4, cp = p[0] & 0x07;
        else
                return 0;
        for (size_t i = 1; i < n; i++) {
                if ((p[i] & 0xc0) != 0x80)
                        return 0;
                cp = cp << 6 | (p[i] & 0x3f);
        }
        if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
                return 0;
        *ret_cp = cp;
        return n;
}

/* The length of the printable UTF-8 character at p (2 to 4 bytes), or 0 when
 * p starts no such character: ASCII, a bad or overlong sequence, a
 * surrogate, a C1 control, or a format character that reorders or hides
 * text. */
static size_t utf8_printable(const unsigned char *p) {
        uint32_t cp;
        size_t n = utf8_decode((const char *) p, &cp);

        if (n < 2 || cp < 0xa0 || hides_text(cp))
                return 0;
        return n;
}

const char *text_escape(const char *s, char *buf, size_t size) {
        static const char hex[] = "0123456789abcdef";
        const unsigned char *p = (const unsigned char *) s;
        size_t len = 0;

        if (size == 0)
                return buf;
        while (*p) {
                char esc[4];
                size_t n = utf8_printable(p), k;
                const char *out = (const char *) p;

                if (n > 0)
                        k = n;
                else if (*p >= 0x20 && *p < 0x7f && *p != '\\')
                        n = k = 1;
                else {
                        out = esc;
                        esc[0] = '\\';
                        esc[1] = *p == '\n' ? 'n' : *p == '\t' ? 't' : *p == '\r' ? 'r' : *p == '\\' ? '\\' : 'x';
                        k = 2;
                        if (esc[1] == 'x') {
                                esc[2] = hex[*p >> 4];
                                esc[3] = hex[*p & 15];
                                k = 4;
                        }
                        n = 1;
                }
                if (len + k >= size)
                        break;
                memcpy(buf + len, out, k);
                len += k;
                p += n;
        }
        buf[len] = '\0';
        return buf;
}

/* The one contract of what takes on_error (protocol.h). Each row: the
 * state, the code requests are refused with. Rows in upper case are the
 * first word of an error Redis answered. tests/check-docs.py holds
 * pam_fleetsem(8)'s table to this one: keep one row a line. */
static const struct {
        const char *state;
        const char *code;
        const char *fix;        /* refused: what an operator does, for an error Redis answered */
} redis_states[] = {
        /* The limiter cannot count right now: on_error applies. */
        { "unreachable", ERROR_CODE_UNAVAILABLE },      /* no connection, refused, reset, no quorum */
        { "timeout", ERROR_CODE_UNAVAILABLE },          /* Redis did not answer in time */
        { "LOADING", ERROR_CODE_UNAVAILABLE },          /* loading its data set */
        { "READONLY", ERROR_CODE_UNAVAILABLE },         /* a read-only replica */
        { "MASTERDOWN", ERROR_CODE_UNAVAILABLE },       /* a replica whose master is down */
        { "CLUSTERDOWN", ERROR_CODE_UNAVAILABLE },      /* the cluster is down */
        { "TRYAGAIN", ERROR_CODE_UNAVAILABLE },         /* a key moving between nodes */
        { "BUSY", ERROR_CODE_UNAVAILABLE },             /* a script runs too long */
        { "NOREPLICAS", ERROR_CODE_UNAVAILABLE },       /* too few replicas for a write */
        { "OOM", ERROR_CODE_UNAVAILABLE },              /* out of memory (noeviction: nothing is lost) */
        /* Until an operator acts: refused whatever on_error says. */
        { "library-newer", ERROR_CODE_MISCONFIGURED },  /* a newer library: this agent must be upgraded */
        { "library-unknown", ERROR_CODE_MISCONFIGURED },/* a library whose version cannot be read */
        { "library-changed", ERROR_CODE_MISCONFIGURED },/* another text under this agent's version */
        { "data-model", ERROR_CODE_MISCONFIGURED },     /* a newer data model marker */
        { "no-functions", ERROR_CODE_MISCONFIGURED },   /* a server without Redis Functions */
        { "eviction", ERROR_CODE_MISCONFIGURED },       /* a maxmemory-policy that may evict */
        { "NOPERM", ERROR_CODE_MISCONFIGURED,           /* the ACL refuses a command or key */
          "give the agents' Redis user what systemd/redis-acl.conf.example grants; see fleetsemd(8) THE LIBRARY" },
        { "WRONGPASS", ERROR_CODE_MISCONFIGURED,        /* a wrong user or password */
          "set the agents' Redis user and password (redis_password_file, fleetsem.conf(5)) to those Redis knows" },
        { "NOAUTH", ERROR_CODE_MISCONFIGURED,           /* a password needed and none given */
          "give the agents Redis' password (redis_password_file, fleetsem.conf(5))" },
};

const char *error_code_of_state(const char *state) {
        for (size_t i = 0; i < ELEMENTSOF(redis_states); i++)
                if (streq(state, redis_states[i].state))
                        return redis_states[i].code;
        assert(!"a state missing from redis_states[]");
        return ERROR_CODE_UNAVAILABLE;
}

const char *redis_state_fix(const char *state) {
        for (size_t i = 0; i < ELEMENTSOF(redis_states); i++)
                if (streq(state, redis_states[i].state))
                        return redis_states[i].fix;
        return NULL;
}

const char *redis_state_of_error(const char *error) {
        if (!error)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(redis_states); i++) {
                const char *w = redis_states[i].state;
                size_t n = strlen(w);

                if (w[0] >= 'A' && w[0] <= 'Z' && strneq(error, w, n) && (error[n] == ' ' || error[n] == '\0'))
                        return w;
        }
        return NULL;
}

const char *error_code_of_redis_error(const char *error) {
        const char *state = redis_state_of_error(error);

        return state ? error_code_of_state(state) : ERROR_CODE_REDIS;
}

usec_t lost_kill_in(usec_t free_in) {
        return free_in - usec_min(LOST_KILL_MARGIN, free_in / 2);
}
