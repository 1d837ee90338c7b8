/* SPDX-License-Identifier: MIT */
/* fleetsem metrics: the agent's counters and gauges, and what Redis says of
 * every name in use, in the Prometheus text exposition format (0.0.4), on
 * stdout or written whole into a file for node_exporter's textfile
 * collector. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "client.h"
#include "log.h"
#include "macro.h"

#define METRICS_TIMEOUT (10 * USEC_PER_SEC)    /* for the whole answer, however many names */
#define METRICS_TIMEOUT_TEXT "10s"
#define ROWS_MAX 1000000
#define BUCKETS_MAX 32

/* One name's numbers: HOST (held, waiting), NAME (held, waiting, limit),
 * GRANTS (total). */
typedef struct Row {
        char verb[PROTO_VERB_MAX + 1];
        char name[NAME_MAX_LEN + 1];
        uint64_t held, waiting, limit, total;
        uint64_t oldest_wait;           /* HOST: ms the longest waiter here has waited (0: none) */
        uint64_t host_held;             /* HOST: slots the host holds itself (fleetsem reboot) */
        bool drained;                   /* NAME: drained fleet-wide */
} Row;

/* A histogram of times, as the agent counts it (buckets cumulative). */
typedef struct Histogram {
        bool got;
        uint64_t count, sum;
        uint64_t bounds[BUCKETS_MAX], buckets[BUCKETS_MAX + 1];
        size_t n_bounds;
} Histogram;

typedef struct Metrics {
        Message agent, releases, denials;
        bool got_agent, got_releases, got_denials;
        Histogram wait, lateness;
        Row *rows;
        size_t n_rows, size_rows;
} Metrics;

static void help(void) {
        printf("Usage: fleetsem metrics [OPTIONS]\n\n"
               "Prints what this host's agent counted (grants, releases, denials, lost\n"
               "slots, wait times, Redis) and, per name, the slots held and waiting here\n"
               "(scope=\"host\") and fleet-wide (scope=\"fleet\"), in the Prometheus text\n"
               "format. See fleetsem(1), METRICS.\n\n"
               "  -o --output=FILE      Write FILE whole (a temporary file beside it, synced,\n"
               "                        renamed into place; mode 0644) instead of stdout, in\n"
               "                        a directory of root's or this user's, not a link\n"
               "     --namespace=NS     Agent namespace (default: $FLEETSEM_NAMESPACE or fleetsem)\n"
               "  -h --help             Show this help\n");
}

static int malformed(void) {
        log_error("Malformed metrics from the agent.");
        return EXIT_UNAVAILABLE;
}

static int get_u64(const Message *m, const char *key, uint64_t *ret) {
        const char *v = message_get(m, key);

        return v ? parse_uint64(v, 0, UINT64_MAX, ret) : -EBADMSG;
}

/* "a,b,c" into v[], at most max of them. */
static int parse_list(const char *s, uint64_t *v, size_t max, size_t *ret_n) {
        size_t n = 0;

        if (!s || !*s)
                return -EBADMSG;
        for (;;) {
                char buf[24];
                size_t len = strcspn(s, ",");

                if (n >= max || len == 0 || len >= sizeof(buf))
                        return -EBADMSG;
                memcpy(buf, s, len);
                buf[len] = '\0';
                if (parse_uint64(buf, 0, UINT64_MAX, &v[n++]) < 0)
                        return -EBADMSG;
                if (!s[len])
                        break;
                s += len + 1;
        }
        *ret_n = n;
        return 0;
}

static int take_histogram(Histogram *h, const Message *m) {
        size_t n_buckets;

        if (get_u64(m, "count", &h->count) < 0 || get_u64(m, "sum", &h->sum) < 0 ||
            parse_list(message_get(m, "bounds"), h->bounds, BUCKETS_MAX, &h->n_bounds) < 0 ||
            parse_list(message_get(m, "buckets"), h->buckets, BUCKETS_MAX + 1, &n_buckets) < 0 ||
            n_buckets != h->n_bounds + 1)
                return -EBADMSG;
        for (size_t i = 1; i < h->n_bounds; i++)
                if (h->bounds[i] <= h->bounds[i - 1])
                        return -EBADMSG;
        h->got = true;
        return 0;
}

static int take_row(Metrics *mt, const Message *m) {
        const char *name = message_get(m, "name");
        Row *r;

        if (!name || !name_is_valid(name))
                return -EBADMSG;
        if (mt->n_rows >= mt->size_rows) {
                size_t size = mt->size_rows ? mt->size_rows * 2 : 64;
                Row *p;

                if (size > ROWS_MAX || !(p = reallocarray(mt->rows, size, sizeof(Row))))
                        return -ENOMEM;
                mt->rows = p;
                mt->size_rows = size;
        }
        r = &mt->rows[mt->n_rows];
        *r = (Row) {};
        snprintf(r->verb, sizeof(r->verb), "%s", m->verb);
        snprintf(r->name, sizeof(r->name), "%s", name);
        if (streq(m->verb, "GRANTS")) {
                if (get_u64(m, "total", &r->total) < 0)
                        return -EBADMSG;
        } else if (get_u64(m, "held", &r->held) < 0 || get_u64(m, "waiting", &r->waiting) < 0 ||
                   (streq(m->verb, "NAME") && get_u64(m, "limit", &r->limit) < 0) ||
                   (streq(m->verb, "HOST") && message_get(m, "oldest_wait") &&
                    get_u64(m, "oldest_wait", &r->oldest_wait) < 0) ||
                   (streq(m->verb, "HOST") && message_get(m, "host_held") &&
                    get_u64(m, "host_held", &r->host_held) < 0))
                return -EBADMSG;
        r->drained = streq(m->verb, "NAME") && message_get(m, "drained");
        mt->n_rows++;
        return 0;
}

static int fetch(const char *ns, uid_t agent_uid, Metrics *mt) {
        _cleanup_close_ int fd = -EBADF;
        Request req = { .verb = REQUEST_METRICS };
        usec_t deadline = now_usec(CLOCK_MONOTONIC) + METRICS_TIMEOUT;
        LineReader lr;
        Message m;
        int r;

        r = client_send_request_until(ns, agent_uid, deadline, -EBADF, &req, &fd);
        if (r < 0)
                return cli_request_failed(ns, r);
        line_reader_init(&lr, PROTO_REPLY_MAX);

        for (;;) {
                r = cli_read_message(fd, &lr, deadline, "metrics", METRICS_TIMEOUT_TEXT, &m);
                if (r != 0)
                        return r;
                if (streq(m.verb, "END"))
                        break;
                if (streq(m.verb, "AGENT")) {
                        mt->agent = m;
                        mt->got_agent = true;
                } else if (streq(m.verb, "RELEASES")) {
                        mt->releases = m;
                        mt->got_releases = true;
                } else if (streq(m.verb, "DENIALS")) {
                        mt->denials = m;
                        mt->got_denials = true;
                } else if (streq(m.verb, "WAIT"))
                        r = take_histogram(&mt->wait, &m);
                else if (streq(m.verb, "LATENESS"))
                        r = take_histogram(&mt->lateness, &m);
                else if (streq(m.verb, "HOST") || streq(m.verb, "NAME") || streq(m.verb, "GRANTS"))
                        r = take_row(mt, &m);
                /* Lines of a newer agent are left out. */
                if (r == -ENOMEM) {
                        log_error("Metrics too large.");
                        return EXIT_SOFTWARE;
                }
                if (r < 0)
                        return malformed();
        }
        if (!mt->got_agent || !mt->got_releases || !mt->got_denials || !mt->wait.got || !mt->lateness.got)
                return malformed();
        return 0;
}

/* ---- The exposition format ------------------------------------------------------ */

/* A label value as the format wants it: backslash, double quote and
 * newline escaped. */
static void put_label_value(FILE *f, const char *s) {
        fputc('"', f);
        for (; *s; s++) {
                if (*s == '\\' || *s == '"')
                        fprintf(f, "\\%c", *s);
                else if (*s == '\n')
                        fputs("\\n", f);
                else
                        fputc(*s, f);
        }
        fputc('"', f);
}

/* Seconds from microseconds, exactly, without trailing zeros. */
static const char *seconds(uint64_t usec, char *buf, size_t size) {
        int n = snprintf(buf, size, "%" PRIu64 ".%06" PRIu64, usec / USEC_PER_SEC, usec % USEC_PER_SEC);

        while (n > 0 && buf[n - 1] == '0')
                buf[--n] = '\0';
        if (n > 0 && buf[n - 1] == '.')
                buf[--n] = '\0';
        return buf;
}

static void family(FILE *f, const char *metric, const char *type, const char *help_text) {
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", metric, help_text, metric, type);
}

/* metric{key="value",…} value: labels in pairs, NULL-terminated. */
static void sample(FILE *f, const char *metric, const char *value, ...) {
        const char *key;
        bool first = true;
        va_list ap;

        fputs(metric, f);
        va_start(ap, value);
        while ((key = va_arg(ap, const char *))) {
                fprintf(f, "%s%s=", first ? "{" : ",", key);
                put_label_value(f, va_arg(ap, const char *));
                first = false;
        }
        va_end(ap);
        fprintf(f, "%s %s\n", first ? "" : "}", value);
}

static const char *u64(uint64_t v, char *buf, size_t size) {
        snprintf(buf, size, "%" PRIu64, v);
        return buf;
}

static int row_cmp(const void *x, const void *y) {
        return strcmp(((const Row *) x)->name, ((const Row *) y)->name);
}

/* A gauge per name: HOST rows (scope host), then NAME rows (scope fleet);
 * what picks the number. */
typedef enum RowValue { ROW_HELD, ROW_WAITING, ROW_LIMIT } RowValue;

static void name_samples(FILE *f, const Metrics *mt, const char *metric, RowValue what) {
        static const char *const verbs[] = { "HOST", "NAME" }, *const scopes[] = { "host", "fleet" };
        char v[24];

        for (size_t k = 0; k < ELEMENTSOF(verbs); k++)
                for (size_t i = 0; i < mt->n_rows; i++) {
                        const Row *r = &mt->rows[i];

                        if (!streq(r->verb, verbs[k]))
                                continue;
                        if (what == ROW_LIMIT && (k == 0 || r->limit == 0))
                                continue;       /* the limit in force: fleet-wide, while anyone holds or waits */
                        u64(what == ROW_HELD ? r->held : what == ROW_WAITING ? r->waiting : r->limit, v, sizeof(v));
                        sample(f, metric, v, "name", r->name, "scope", scopes[k], NULL);
                }
}

/* Every field of m as one sample of metric with the field's key as label. */
static void field_samples(FILE *f, const Message *m, const char *metric, const char *label) {
        for (size_t i = 0; i < m->n_fields; i++) {
                const char *key = m->storage + m->fields[i].key, *value = m->storage + m->fields[i].value;
                uint64_t v;
                char buf[24];

                if (parse_uint64(value, 0, UINT64_MAX, &v) >= 0)
                        sample(f, metric, u64(v, buf, sizeof(buf)), label, key, NULL);
        }
}

static void histogram(FILE *f, const Histogram *h, const char *name, const char *text) {
        char a[32], b[32], bucket[128], sum[128], count[128];

        snprintf(bucket, sizeof(bucket), "%s_bucket", name);
        snprintf(sum, sizeof(sum), "%s_sum", name);
        snprintf(count, sizeof(count), "%s_count", name);
        family(f, name, "histogram", text);
        for (size_t i = 0; i < h->n_bounds; i++)
                sample(f, bucket, u64(h->buckets[i], a, sizeof(a)), "le", seconds(h->bounds[i], b, sizeof(b)), NULL);
        sample(f, bucket, u64(h->buckets[h->n_bounds], a, sizeof(a)), "le", "+Inf", NULL);
        sample(f, sum, seconds(h->sum, a, sizeof(a)), NULL);
        sample(f, count, u64(h->count, a, sizeof(a)), NULL);
}

static void print_metrics(FILE *f, Metrics *mt) {
        const char *state = message_get(&mt->agent, "redis") ?: "";
        const char *evicts = message_get(&mt->agent, "evicts");  /* the policy of a Redis that may evict */
        const char *refusing = message_get(&mt->agent, "refusing");  /* a state that lasts until an operator acts */
        uint64_t ups = 0, lost = 0, names_refused = 0, rtt_count = 0, rtt_sum = 0, rtt_last = 0, late_max = 0, grace_ms = 0;
        char a[32];

        (void) get_u64(&mt->agent, "redis_ups", &ups);
        (void) get_u64(&mt->agent, "lost", &lost);
        (void) get_u64(&mt->agent, "rtt_count", &rtt_count);
        (void) get_u64(&mt->agent, "rtt_sum", &rtt_sum);
        if (mt->n_rows > 0) /* no rows: rows is NULL, which qsort may not take */
                qsort(mt->rows, mt->n_rows, sizeof(Row), row_cmp);

        family(f, "fleetsem_redis_up", "gauge", "Whether this host's agent is connected to Redis (1) or not (0).");
        sample(f, "fleetsem_redis_up", streq(state, "up") ? "1" : "0", NULL);
        family(f, "fleetsem_redis_reconnects_total", "counter",
               "Times the agent connected to Redis again after it lost or could not reach it.");
        sample(f, "fleetsem_redis_reconnects_total", u64(ups > 0 ? ups - 1 : 0, a, sizeof(a)), NULL);
        family(f, "fleetsem_redis_rtt_seconds", "summary", "Round trips of lease renewals to Redis, from the call to its reply.");
        sample(f, "fleetsem_redis_rtt_seconds_sum", seconds(rtt_sum, a, sizeof(a)), NULL);
        sample(f, "fleetsem_redis_rtt_seconds_count", u64(rtt_count, a, sizeof(a)), NULL);
        if (get_u64(&mt->agent, "rtt_last", &rtt_last) >= 0) {
                family(f, "fleetsem_redis_last_rtt_seconds", "gauge", "The last lease renewal's round trip to Redis.");
                sample(f, "fleetsem_redis_last_rtt_seconds", seconds(rtt_last, a, sizeof(a)), NULL);
        }

        if (get_u64(&mt->agent, "lateness_max", &late_max) >= 0) {
                family(f, "fleetsem_renewal_lateness_max_seconds", "gauge",
                       "The latest any renewal here was confirmed after it was due, since the agent started.");
                sample(f, "fleetsem_renewal_lateness_max_seconds", seconds(late_max, a, sizeof(a)), NULL);
        }
        if (get_u64(&mt->agent, "grace", &grace_ms) >= 0) {
                const char *why = message_get(&mt->agent, "why");

                family(f, "fleetsem_reset_grace_seconds", "gauge",
                       "What is left of the grace after Redis lost or began its state, in which no slot is granted "
                       "(reason: new, reset or failover).");
                sample(f, "fleetsem_reset_grace_seconds", seconds(grace_ms * USEC_PER_MSEC, a, sizeof(a)),
                       grace_ms > 0 && grace_why_text(why) ? "reason" : NULL, why, NULL);
        }

        family(f, "fleetsem_redis_evicts", "gauge",
               "Whether Redis runs with a maxmemory-policy that may evict fleetsem's keys (1: no new slot is granted "
               "until it is noeviction; policy: the one it runs with, ? when it does not tell) or not (0).");
        sample(f, "fleetsem_redis_evicts", evicts ? "1" : "0", evicts ? "policy" : NULL, evicts, NULL);
        family(f, "fleetsem_refusing", "gauge",
               "Whether the agent grants nothing new, whatever clients' on-error policy, until an operator acts (1; "
               "state: why, a row of pam_fleetsem(8)'s ON ERROR table: library-newer, eviction, NOPERM, ...) or not "
               "(0).");
        sample(f, "fleetsem_refusing", refusing ? "1" : "0", refusing ? "state" : NULL, refusing, NULL);

        family(f, "fleetsem_slots_held", "gauge",
               "Slots of a name held on this host (scope=\"host\") and across the fleet (scope=\"fleet\").");
        name_samples(f, mt, "fleetsem_slots_held", ROW_HELD);
        family(f, "fleetsem_waiters", "gauge",
               "Requests waiting in line for a name on this host (scope=\"host\") and across the fleet (scope=\"fleet\").");
        name_samples(f, mt, "fleetsem_waiters", ROW_WAITING);
        family(f, "fleetsem_limit", "gauge", "The limit in force of a name across the fleet, while anyone holds or waits.");
        name_samples(f, mt, "fleetsem_limit", ROW_LIMIT);
        family(f, "fleetsem_drained", "gauge",
               "Whether a name is drained fleet-wide (1: no new slot is granted until it is undrained) or not (0).");
        for (size_t i = 0; i < mt->n_rows; i++)
                if (streq(mt->rows[i].verb, "NAME"))
                        sample(f, "fleetsem_drained", mt->rows[i].drained ? "1" : "0", "name", mt->rows[i].name, NULL);
        family(f, "fleetsem_oldest_wait_seconds", "gauge",
               "How long the request waiting longest for a name on this host has waited so far, while one waits.");
        for (size_t i = 0; i < mt->n_rows; i++)
                if (streq(mt->rows[i].verb, "HOST") && mt->rows[i].waiting > 0)
                        sample(f, "fleetsem_oldest_wait_seconds",
                               seconds(mt->rows[i].oldest_wait * USEC_PER_MSEC, a, sizeof(a)), "name", mt->rows[i].name,
                               NULL);
        family(f, "fleetsem_host_held_slots", "gauge",
               "Slots of a name this host holds itself (fleetsem reboot): held across its reboot until released.");
        for (size_t i = 0; i < mt->n_rows; i++)
                if (streq(mt->rows[i].verb, "HOST"))
                        sample(f, "fleetsem_host_held_slots", u64(mt->rows[i].host_held, a, sizeof(a)), "name",
                               mt->rows[i].name, NULL);
        family(f, "fleetsem_grants_total", "counter", "Slots of a name granted on this host.");
        for (size_t i = 0; i < mt->n_rows; i++)
                if (streq(mt->rows[i].verb, "GRANTS"))
                        sample(f, "fleetsem_grants_total", u64(mt->rows[i].total, a, sizeof(a)), "name", mt->rows[i].name, NULL);

        family(f, "fleetsem_releases_total", "counter",
               "Held slots given back on this host, by cause: anchor_closed (the job ended), released (on request), lost.");
        field_samples(f, &mt->releases, "fleetsem_releases_total", "cause");
        family(f, "fleetsem_denials_total", "counter",
               "Requests on this host denied a slot, by reason: timeout (no slot within the wait), full (no wait).");
        field_samples(f, &mt->denials, "fleetsem_denials_total", "reason");
        family(f, "fleetsem_lost_total", "counter",
               "Held slots this host lost: not renewed in time, or gone from Redis.");
        sample(f, "fleetsem_lost_total", u64(lost, a, sizeof(a)), NULL);
        if (get_u64(&mt->agent, "names_refused", &names_refused) >= 0) {
                family(f, "fleetsem_names_refused_total", "counter",
                       "Requests of users refused on this host because the user had max_redis_names_per_user names "
                       "in Redis from it already.");
                sample(f, "fleetsem_names_refused_total", u64(names_refused, a, sizeof(a)), NULL);
        }

        histogram(f, &mt->wait, "fleetsem_wait_seconds", "Time from a request on this host to its grant.");
        histogram(f, &mt->lateness, "fleetsem_renewal_lateness_seconds",
                  "How long after it was due (a third of a lease after the last one) each renewal of a slot held "
                  "here was confirmed by Redis: a starving agent shows here before it loses slots.");
}

/* ---- --output ----------------------------------------------------------------- */

/* Where --output writes: its directory, opened before the agent is asked,
 * and the file's name in it. */
typedef struct Output {
        const char *path;
        int dir_fd;
        char base[NAME_MAX + 1];
} Output;

/* The directory itself, never a symbolic link, owned by root or by the
 * user that runs this: whoever else owns it, or owns its parent and could
 * put a link or a directory of its own in its place, would choose where
 * root writes. Everything after goes through the fd. */
static int output_open(const char *path, Output *ret) {
        const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
        char dir[PATH_MAX];
        size_t dir_len = slash ? (size_t) (slash - path) : 0;
        struct stat st;
        int fd;

        /* The temporary name, "." + base + ".XXXXXX", must fit too. */
        if (!base[0] || streq(base, ".") || streq(base, "..") || strlen(base) > NAME_MAX - 8) {
                log_error("Invalid --output \"%s\": expected DIR/FILE, FILE a name of at most %d bytes.", path, NAME_MAX - 8);
                return EXIT_USAGE;
        }
        /* "a//b" is in "a", "/b" in "/", "b" in "."; no trailing slash, which
         * would follow a link after all. */
        while (dir_len > 1 && path[dir_len - 1] == '/')
                dir_len--;
        snprintf(dir, sizeof(dir), "%.*s", slash ? (int) MAX(dir_len, (size_t) 1) : 1, slash ? path : ".");

        fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
                int error = errno;

                /* A look at what it is, for the message only. */
                if ((error == ENOTDIR || error == ELOOP) && lstat(dir, &st) >= 0 && S_ISLNK(st.st_mode))
                        log_error("Refusing to write %s: %s is a symbolic link; give the directory itself.", path, dir);
                else
                        log_error_errno(error, "Cannot write %s: %s: %m", path, dir);
                return EXIT_CANTCREAT;
        }
        if (fstat(fd, &st) < 0) {
                log_error_errno(errno, "Cannot write %s: %s: %m", path, dir);
                close(fd);
                return EXIT_CANTCREAT;
        }
        if (st.st_uid != 0 && st.st_uid != geteuid()) {
                log_error("Refusing to write %s: %s belongs to uid " UID_FMT ", not to root or to uid " UID_FMT
                          " (this user).", path, dir, st.st_uid, geteuid());
                close(fd);
                return EXIT_CANTCREAT;
        }
        *ret = (Output) { .path = path, .dir_fd = fd };
        snprintf(ret->base, sizeof(ret->base), "%s", base);
        return 0;
}

/* A new file beside the output, hidden and not ending like it (readers
 * such as node_exporter's *.prom skip it), never one that was there. */
static int output_tmp(const Output *o, char *tmp, size_t size) {
        static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

        for (int attempt = 0; attempt < 100; attempt++) {
                unsigned char rnd[6];
                int fd;

                if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t) sizeof(rnd))
                        return -errno ?: -EIO;
                snprintf(tmp, size, ".%s.%c%c%c%c%c%c", o->base, chars[rnd[0] % 62], chars[rnd[1] % 62],
                         chars[rnd[2] % 62], chars[rnd[3] % 62], chars[rnd[4] % 62], chars[rnd[5] % 62]);
                fd = openat(o->dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
                if (fd >= 0)
                        return fd;
                if (errno != EEXIST)
                        return -errno;
        }
        return -EEXIST;
}

/* The file whole or not at all: written beside it, synced, then renamed
 * over it (and the rename synced), 0644 whatever the umask. */
static int write_output(Metrics *mt, const Output *o) {
        char tmp[NAME_MAX + 16];        /* base, ".", "." and 6 more: NAME_MAX at most */
        FILE *f;
        int fd;
        bool ok;

        if (!o) {
                print_metrics(stdout, mt);
                if (fflush(stdout) != 0 || ferror(stdout))
                        return log_error_errno(errno ?: EIO, "Cannot write the metrics: %m"), EXIT_CANTCREAT;
                return 0;
        }
        fd = output_tmp(o, tmp, sizeof(tmp));
        if (fd < 0)
                return log_error_errno(fd, "Cannot write %s: a temporary file beside it: %m", o->path), EXIT_CANTCREAT;
        f = fdopen(fd, "w");
        if (!f) {
                log_error_errno(errno, "Cannot write %s: %m", o->path);
                close(fd);
                (void) unlinkat(o->dir_fd, tmp, 0);
                return EXIT_CANTCREAT;
        }
        print_metrics(f, mt);
        errno = 0;
        ok = fchmod(fd, 0644) >= 0 && fflush(f) == 0 && !ferror(f) && fsync(fd) >= 0;
        if (fclose(f) != 0)
                ok = false;
        if (!ok || renameat(o->dir_fd, tmp, o->dir_fd, o->base) < 0) {
                log_error_errno(errno ?: EIO, "Cannot write %s: %m", o->path);
                (void) unlinkat(o->dir_fd, tmp, 0);
                return EXIT_CANTCREAT;
        }
        (void) fsync(o->dir_fd);
        return 0;
}

int verb_metrics(int argc, char *argv[]) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "output", required_argument, NULL, 'o' },
                CLI_COMMON_OPTIONS,
                {}
        };
        Metrics mt = {};
        Output out = { .dir_fd = -EBADF };
        const char *ns = NULL, *output = NULL;
        uid_t agent_uid;
        int c, code;

        while ((c = cli_getopt(argc, argv, "ho:", options, &ns)) >= 0) {
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case 'o':
                        output = optarg;
                        break;
                default:
                        return EXIT_USAGE;
                }
        }
        if (optind < argc) {
                log_error("Unexpected argument \"%s\"; see fleetsem metrics --help.", argv[optind]);
                return EXIT_USAGE;
        }
        if (output && (!output[0] || strlen(output) >= PATH_MAX)) {
                log_error("Invalid --output \"%s\".", output);
                return EXIT_USAGE;
        }
        if (cli_agent(&ns, &agent_uid) != 0)
                return EXIT_USAGE;
        if (output && (code = output_open(output, &out)) != 0)
                return code;

        code = fetch(ns, agent_uid, &mt);
        if (code == 0)
                code = write_output(&mt, output ? &out : NULL);
        free(mt.rows);
        if (out.dir_fd >= 0)
                close(out.dir_fd);
        return code;
}
