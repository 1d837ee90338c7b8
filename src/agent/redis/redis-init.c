/* SPDX-License-Identifier: MIT */
/* fleetsemd --redis-init, which `fleetsem redis-init` runs: a new Redis
 * declared empty, so that the agents skip the grace of its first use. Its
 * master is found as the agent finds it (check-redis.h: under Sentinel the
 * one a quorum names; in a Cluster each master CLUSTER SLOTS names, inside
 * cluster_allow) and logged in to as the agent does, with the
 * configuration's password. It must hold no key of keys.list (SCAN, on
 * each master, each key against key_globs[]); then it gets the epoch and
 * the census that a Redis nobody ever held a slot in would have: the epoch
 * "ID 0", its grace over long ago (under Sentinel and in a Cluster naming
 * the master by its run id and replication id, as the agents' epoch.lua
 * does, or the first agent would take it for another master's: a
 * failover; in a Cluster in the first hash slot the master owns, as the
 * agents put it), and the census' mark made long ago (forgot.lua; in a
 * Cluster one census a hash slot). Nothing is written anywhere until every
 * master was looked at. Each key with NX, the epoch first: an agent that
 * connected meanwhile keeps its own epoch, and its grace. What this command
 * wrote itself is no reason to refuse: run again (after one cut short
 * too), it finds its own keys, writes what is missing and says so. */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "check-redis.h"
#include "client.h"
#include "lua-keys.h"
#include "redis-blocking.h"
#include "redis-init.h"
#include "hash-slot.h"

#define INIT_TIMEOUT (3 * USEC_PER_SEC)
/* A cursor that never comes back to 0 (a hostile server) is given up
 * after this many rounds of 1000 keys. */
#define SCAN_ROUNDS_MAX 10000000

typedef struct Init {
        const Config *config;
        RedisMaster master;
        RedisBlocking *conn;
        const uint16_t *owner;          /* a Cluster's: which master owns each hash slot; NULL: one Redis */
        unsigned index;                 /* this master's, in owner[] */
        int first_slot;                 /* the first hash slot it owns (its epoch's); -1 none */
        char epoch_key[IDENT_MAX_LEN + 32];
        char master_id[81];             /* "": one Redis alone, whose epoch names no master */
        bool has_epoch;
        size_t n_census, n_census_found;
        bool *census_found;             /* each hash slot's census found (shared: each slot has one
                                         * master); one Redis: [0] */
} Init;

static Init *init_free(Init *in) {
        if (in)
                redis_blocking_free(in->conn);
        free(in);
        return NULL;
}

/* The hash slots whose census this master keeps: a Cluster's it owns, or
 * the one of one Redis (0). */
static size_t init_n_slots(const Init *in) {
        return in->owner ? HASH_SLOTS : 1;
}

static bool init_owns(const Init *in, size_t slot) {
        return in->owner ? in->owner[slot] == in->index : slot == 0;
}

static void census_key(const Init *in, size_t slot, char *buf, size_t size) {
        if (in->owner)
                snprintf(buf, size, KEY_CENSUS_TAG_FMT, in->config->key_prefix, hash_slot_tag((unsigned) slot));
        else
                snprintf(buf, size, KEY_CENSUS_FMT, in->config->key_prefix);
}

/* One command; an error reply is the caller's to read. EXIT_UNAVAILABLE
 * (said) when the connection fails. */
static int init_command(Init *in, int argc, const char *const *argv, RedisReply **ret) {
        int r = redis_blocking_command(in->conn, argc, argv, NULL, ret);

        if (r < 0) {
                fprintf(stderr, "Redis at %s: %s failed: %s; nothing more written.\n", in->master.where, argv[0],
                        strerror(-r));
                return EXIT_UNAVAILABLE;
        }
        return 0;
}

/* An error reply said, with what it means: NOPERM is the ACL's (an
 * operator's configuration is the fix), anything else Redis'. */
static int init_refused(const Init *in, const char *what, const RedisReply *reply) {
        const char *err = redis_reply_error(reply);
        char text[TEXT_ESCAPE_SIZE(200)], e[201];

        snprintf(e, sizeof(e), "%s", err ?: "an unexpected reply");
        fprintf(stderr, "Redis at %s refused %s: %s.\n", in->master.where, what, text_escape(e, text, sizeof(text)));
        if (err && strneq(err, "NOPERM", 6)) {
                char acl[16];
                size_t i;

                for (i = 0; what[i] && i < sizeof(acl) - 1; i++)
                        acl[i] = (char) tolower((unsigned char) what[i]);
                acl[i] = '\0';
                fprintf(stderr, "Its user may not %s: run with a configuration that logs in as an operator "
                        "(fleetsem redis-init --config FILE), or give the user +%s.\n", what, acl);
                return EXIT_CONFIG;
        }
        return err ? EXIT_UNAVAILABLE : EXIT_SOFTWARE;
}

static int init_connect(Init *in) {
        const RedisAddress *a = &in->config->redis;
        RedisProbe p = { .unix_path = in->master.unix_path, .host = in->master.unix_path ? NULL : in->master.host,
                         .port = in->master.port, .user = a->user, .password = a->password, .db = a->db,
                         .timeout = INIT_TIMEOUT };
        int r = redis_probe_open(&p, &in->conn);

        if (r == -EACCES) {
                fprintf(stderr, "Redis at %s refused the login (AUTH, or SELECT of db %u): check the user and "
                        "redis_password_file; nothing written.\n", in->master.where, a->db);
                return EXIT_CONFIG;
        }
        if (r < 0) {
                fprintf(stderr, "Redis at %s cannot be reached: %s; nothing written.\n", in->master.where,
                        strerror(-r));
                return EXIT_UNAVAILABLE;
        }
        return 0;
}

/* Writes go to a master; under Sentinel and in a Cluster, its id for the epoch. */
static int init_master(Init *in) {
        _cleanup_(redis_reply_freep) RedisReply *reply = NULL;
        char role[16] = "";
        const char *s;
        size_t len;
        int r;

        r = init_command(in, 1, (const char *[]) { "ROLE" }, &reply);
        if (r != 0)
                return r;
        if (redis_reply_error(reply))
                return init_refused(in, "ROLE", reply);
        (void) redis_reply_array_string(reply, 0, role, sizeof(role));
        if (!streq(role, "master")) {
                fprintf(stderr, "Redis at %s is no master (ROLE says \"%s\"); nothing written.\n", in->master.where,
                        role[0] && strspn(role, "abcdefghijklmnopqrstuvwxyz") == strlen(role) ? role : "?");
                return EXIT_UNAVAILABLE;
        }
        if (!in->config->redis.master_name && !in->owner)
                return 0;
        reply = redis_reply_free(reply);
        r = init_command(in, 2, (const char *[]) { "INFO", "default" }, &reply);
        if (r != 0)
                return r;
        if (redis_reply_string(reply, &s, &len) < 0)
                return init_refused(in, "INFO", reply);
        if (master_id_parse(s, len, in->master_id) == -EBADMSG) {
                fprintf(stderr, "Redis at %s gives no run id in INFO, by which the epoch names its master; nothing "
                        "written.\n", in->master.where);
                return EXIT_SOFTWARE;
        }
        return 0;
}

/* Whether a key SCAN found (MATCH PREFIX:*) is one of keys.list's. */
static bool key_is_fleetsems(const char *prefix, const char *key) {
        size_t n = strlen(prefix);

        if (!strneq(key, prefix, n))
                return false;
        for (size_t i = 0; i < N_KEY_GLOBS; i++)
                if (fnmatch(key_globs[i], key + n, 0) == 0)
                        return true;
        return false;
}

/* Every key under the prefix, on this master: the epoch and the census
 * noted, any other of keys.list refused (EXIT_DATAERR, said). A key that
 * cannot be read as a C string (a NUL in it, or too long) counts as one. */
static int init_scan(Init *in) {
        const char *prefix = in->config->key_prefix;
        char match[IDENT_MAX_LEN + 3], cursor[24] = "0", first[TEXT_ESCAPE_SIZE(256)] = "";
        uint64_t found = 0, v;
        int r;

        snprintf(match, sizeof(match), "%s:*", prefix);        /* (an ident holds no glob character) */
        for (unsigned round = 0;; round++) {
                _cleanup_(redis_reply_freep) RedisReply *reply = NULL;
                const RedisReply *keys;
                size_t n;

                if (round >= SCAN_ROUNDS_MAX) {
                        fprintf(stderr, "Redis at %s: SCAN did not end after %u rounds; nothing written.\n",
                                in->master.where, round);
                        return EXIT_SOFTWARE;
                }
                r = init_command(in, 6, (const char *[]) { "SCAN", cursor, "MATCH", match, "COUNT", "1000" }, &reply);
                if (r != 0)
                        return r;
                keys = redis_reply_array_get(reply, 1);
                if (redis_reply_error(reply) || redis_reply_array_len(reply) != 2 || !redis_reply_is_array(keys) ||
                    redis_reply_array_string(reply, 0, cursor, sizeof(cursor)) < 0 ||
                    parse_uint64(cursor, 0, UINT64_MAX, &v) < 0)
                        return init_refused(in, "SCAN", reply);
                n = redis_reply_array_len(keys);
                for (size_t i = 0; i < n; i++) {
                        char key[256 + 1];

                        if (redis_reply_array_string(keys, i, key, sizeof(key)) < 0)
                                snprintf(key, sizeof(key), "%s:(a key of a NUL or over 256 bytes)", prefix);
                        else if (!key_is_fleetsems(prefix, key))
                                continue;
                        else if (streq(key, in->epoch_key)) {
                                in->has_epoch = true;
                                continue;
                        } else {
                                size_t slot = in->owner ? hash_slot_of_key(key, strlen(key)) : 0;
                                char want[IDENT_MAX_LEN + 32];

                                census_key(in, slot, want, sizeof(want));
                                if (init_owns(in, slot) && streq(key, want)) {
                                        in->n_census_found += !in->census_found[slot];
                                        in->census_found[slot] = true;
                                        continue;
                                }
                        }
                        if (found++ == 0)
                                text_escape(key, first, sizeof(first));
                }
                if (streq(cursor, "0"))
                        break;
        }
        if (found > 0) {
                fprintf(stderr, "Redis at %s holds fleetsem's keys (%s%s): it is or was in use, and agents may hold "
                        "slots in it; nothing written. A Redis that holds fleetsem's state needs no declaring; one "
                        "that lost it gets a lease of grace, which ends by itself.\n", in->master.where, first,
                        found > 1 ? ", and more" : "");
                return EXIT_DATAERR;
        }
        return 0;
}

/* A string reply into buf, NUL-terminated: -EBADMSG for any other reply,
 * one with a NUL in it, or one that does not fit. */
static int reply_text(const RedisReply *reply, char *buf, size_t size) {
        const char *s;
        size_t len;

        buf[0] = '\0';
        if (redis_reply_string(reply, &s, &len) < 0 || len >= size || memchr(s, '\0', len))
                return -EBADMSG;
        memcpy(buf, s, len);
        buf[len] = '\0';
        return 0;
}

/* The epoch found: this command's own ("ID 0", under Sentinel and in a
 * Cluster naming this master), or refused. */
static int init_epoch_found(Init *in) {
        _cleanup_(redis_reply_freep) RedisReply *reply = NULL;
        char value[160], text[TEXT_ESCAPE_SIZE(160)];
        size_t id;
        int r;

        r = init_command(in, 2, (const char *[]) { "GET", in->epoch_key }, &reply);
        if (r != 0)
                return r;
        if (redis_reply_error(reply))
                return init_refused(in, "GET", reply);
        (void) reply_text(reply, value, sizeof(value));
        id = strspn(value, "0123456789abcdef");
        if (id == LEASE_ID_LEN && strneq(value + id, " 0", 2) &&
            (in->master_id[0] ? value[id + 2] == ' ' && streq(value + id + 3, in->master_id) : value[id + 2] == '\0'))
                return 0;
        fprintf(stderr, "Redis at %s holds an epoch (%s \"%s\") that is not one of an empty Redis%s: agents have "
                "used it, or another master; nothing written.\n", in->master.where, in->epoch_key,
                text_escape(value, text, sizeof(text)), in->master_id[0] ? " declared on this master" : "");
        return EXIT_DATAERR;
}

/* Replies to n pipelined commands, in order, into replies[]; EXIT_UNAVAILABLE
 * (said) when the connection fails. */
static int init_replies(Init *in, size_t n, RedisReply **replies) {
        for (size_t i = 0; i < n; i++) {
                int r = redis_blocking_reply(in->conn, &replies[i]);

                if (r < 0) {
                        fprintf(stderr, "Redis at %s: no reply: %s; nothing more written.\n", in->master.where,
                                strerror(-r));
                        return EXIT_UNAVAILABLE;
                }
        }
        return 0;
}

/* Each census found: its mark alone, made long ago (-1), or refused.
 * Asked for all at once (a Cluster's master: up to one a hash slot), the
 * replies read in the same order. */
static int init_census_found(Init *in) {
        size_t n = 0;
        int r = 0;

        for (size_t slot = 0; slot < init_n_slots(in); slot++) {
                char key[IDENT_MAX_LEN + 32];

                if (!init_owns(in, slot) || !in->census_found[slot])
                        continue;
                census_key(in, slot, key, sizeof(key));
                if (redis_blocking_append(in->conn, 2, (const char *[]) { "ZCARD", key }, NULL) < 0 ||
                    redis_blocking_append(in->conn, 3, (const char *[]) { "ZSCORE", key, "." }, NULL) < 0)
                        break;  /* (the replies say why) */
                n++;
        }
        for (size_t slot = 0; slot < init_n_slots(in); slot++) {
                _cleanup_(redis_reply_freep) RedisReply *card = NULL, *score = NULL;
                char key[IDENT_MAX_LEN + 32], mark[24];
                long long k = -1;

                if (!init_owns(in, slot) || !in->census_found[slot])
                        continue;
                if (n-- == 0) {
                        fprintf(stderr, "Redis at %s: the census could not be asked for whole.\n", in->master.where);
                        return EXIT_UNAVAILABLE;
                }
                if (r == 0)
                        r = init_replies(in, 1, &card);
                if (r == 0)
                        r = init_replies(in, 1, &score);
                if (r != 0)
                        return r;
                census_key(in, slot, key, sizeof(key));
                if (redis_reply_integer(card, &k) < 0)
                        return init_refused(in, "ZCARD", card);
                if (redis_reply_error(score))
                        return init_refused(in, "ZSCORE", score);
                (void) reply_text(score, mark, sizeof(mark));
                if (k != 1 || !streq(mark, "-1")) {
                        fprintf(stderr, "Redis at %s holds a census (%s) of %lld entries: agents have used it; nothing "
                                "written.\n", in->master.where, key, k);
                        return EXIT_DATAERR;
                }
        }
        return 0;
}

/* The epoch, then the census, each only where it is missing. */
static int init_write(Init *in) {
        _cleanup_(redis_reply_freep) RedisReply *set = NULL;
        char id[LEASE_ID_LEN + 1], value[LEASE_ID_LEN + 4 + sizeof(in->master_id)];
        const char *s;
        size_t len, n = 0;
        int r;

        if (!in->has_epoch) {
                r = lease_id_new(id);
                if (r < 0) {
                        fprintf(stderr, "Cannot make an epoch id: %s; nothing written.\n", strerror(-r));
                        return EXIT_SOFTWARE;
                }
                snprintf(value, sizeof(value), "%s 0%s%s", id, in->master_id[0] ? " " : "", in->master_id);
                r = init_command(in, 4, (const char *[]) { "SET", in->epoch_key, value, "NX" }, &set);
                if (r != 0)
                        return r;
                if (redis_reply_error(set))
                        return init_refused(in, "SET", set);
                if (redis_reply_string(set, &s, &len) < 0) {
                        /* (nil: NX found one.) */
                        fprintf(stderr, "Redis at %s: an agent wrote its epoch (%s) while this ran: it is in use now, "
                                "with the grace of its first use; nothing written.\n", in->master.where,
                                in->epoch_key);
                        return EXIT_DATAERR;
                }
        }
        /* The census keys, pipelined (a Cluster's master: one a hash slot). */
        for (size_t slot = 0; slot < init_n_slots(in); slot++) {
                char key[IDENT_MAX_LEN + 32];

                if (!init_owns(in, slot) || in->census_found[slot])
                        continue;
                census_key(in, slot, key, sizeof(key));
                if (redis_blocking_append(in->conn, 5, (const char *[]) { "ZADD", key, "NX", "-1", "." }, NULL) < 0)
                        break;
                n++;
        }
        for (size_t i = 0; i < n; i++) {
                _cleanup_(redis_reply_freep) RedisReply *reply = NULL;
                long long added;

                r = init_replies(in, 1, &reply);
                if (r != 0)
                        return r;
                if (redis_reply_integer(reply, &added) < 0)
                        return init_refused(in, "ZADD", reply);
        }
        if (n + in->n_census_found < in->n_census) {
                fprintf(stderr, "Redis at %s: the census could not be sent whole; run again.\n", in->master.where);
                return EXIT_UNAVAILABLE;
        }
        return 0;
}

/* One master: connected, looked at, its own keys checked; nothing written. */
static int init_look(Init *in) {
        int r;

        in->first_slot = -1;
        for (size_t slot = 0; slot < init_n_slots(in); slot++)
                if (init_owns(in, slot)) {
                        if (in->first_slot < 0)
                                in->first_slot = (int) slot;
                        in->n_census++;
                }
        if (in->first_slot < 0)
                return 0;       /* (a Cluster's master without hash slots: no epoch of its own) */
        if (in->owner)
                snprintf(in->epoch_key, sizeof(in->epoch_key), KEY_EPOCH_TAG_FMT, in->config->key_prefix,
                         hash_slot_tag((unsigned) in->first_slot));
        else
                snprintf(in->epoch_key, sizeof(in->epoch_key), KEY_EPOCH_FMT, in->config->key_prefix);
        r = init_connect(in);
        if (r == 0)
                r = init_master(in);
        if (r == 0)
                r = init_scan(in);
        if (r == 0 && in->has_epoch)
                r = init_epoch_found(in);
        if (r == 0 && in->n_census_found > 0)
                r = init_census_found(in);
        return r;
}

/* What was written (or found) on one master, a line. */
static void init_said(const Init *in, bool wrote) {
        char census[IDENT_MAX_LEN + 64];

        if (in->first_slot < 0)
                return;
        if (in->owner)
                snprintf(census, sizeof(census), "the census of each of its %zu hash slots", in->n_census);
        else
                census_key(in, 0, census, sizeof(census));
        if (wrote)
                printf("Redis at %s declared empty: it held no fleetsem key; %s%s and %s written.\n", in->master.where,
                       in->epoch_key, in->master_id[0] ? " (naming this master)" : "", census);
        else
                printf("Redis at %s is declared empty already (%s, %s); nothing written.\n", in->master.where,
                       in->epoch_key, census);
}

int redis_init(const Config *config) {
        const RedisAddress *a = &config->redis;
        _cleanup_free_ RedisMaster *masters = NULL;
        _cleanup_free_ uint16_t *owner = NULL;
        _cleanup_free_ Init **ins = NULL;
        _cleanup_free_ bool *found = NULL;
        size_t n = 1;
        bool wrote = false;
        int r = 0;

        if (a->tls) {
                fprintf(stderr, "Redis over TLS: not declared empty from the command line (this look at Redis speaks "
                        "no TLS); the agents' grace of its first use, one lease, ends by itself.\n");
                return EXIT_CONFIG;
        }
        if (a->cluster) {
                owner = calloc(HASH_SLOTS, sizeof(uint16_t));
                if (!owner)
                        return EXIT_SOFTWARE;
                r = cluster_masters_find(config, &masters, &n, owner);
                if (r < 0)
                        return r == -ENOENT ? EXIT_UNAVAILABLE : r == -EPERM || r == -E2BIG ? EXIT_CONFIG : EXIT_SOFTWARE;
        } else {
                masters = calloc(1, sizeof(RedisMaster));
                if (!masters)
                        return EXIT_SOFTWARE;
                if (redis_master_find(config, &masters[0]) < 0)
                        return EXIT_UNAVAILABLE;
        }
        ins = calloc(n, sizeof(Init *));
        found = calloc(HASH_SLOTS, sizeof(bool));
        if (!ins || !found)
                return EXIT_SOFTWARE;
        /* Every master looked at before anything is written anywhere. */
        for (size_t j = 0; j < n && r == 0; j++) {
                ins[j] = calloc(1, sizeof(Init));
                if (!ins[j]) {
                        r = EXIT_SOFTWARE;
                        break;
                }
                *ins[j] = (Init) { .config = config, .master = masters[j], .owner = owner, .index = (unsigned) j,
                                   .census_found = found };
                r = init_look(ins[j]);
        }
        for (size_t j = 0; j < n && r == 0; j++) {
                Init *in = ins[j];
                bool here = in->first_slot >= 0 && (!in->has_epoch || in->n_census_found < in->n_census);

                if (here)
                        r = init_write(in);
                if (r == 0)
                        init_said(in, here);
                wrote |= here;
        }
        for (size_t j = 0; j < n; j++)
                init_free(ins[j]);
        if (r != 0)
                return r;
        if (wrote)
                printf("Agents that connect to it grant at once, without the grace of its first use.\n");
        return 0;
}
