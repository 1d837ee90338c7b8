/* SPDX-License-Identifier: MIT */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <systemd/sd-daemon.h>

#include "agent.h"
#include "check-redis.h"
#include "client.h"
#include "log-journal.h"
#include "log-limit.h"
#include "redis-init.h"
#include "redis-tls.h"

static const char *arg_config = NULL;
static bool arg_config_explicit = false;
static bool arg_check_config = false;
static bool arg_check_redis = false;
static bool arg_load_library = false;
static bool arg_redis_init = false;
/* Command-line settings, applied over the file in the order given. */
static const char *arg_overrides[16][2];
static size_t arg_n_overrides = 0;
static int arg_log_level = -1;

/* Read the URL the way the configuration will: whatever the parser takes
 * for a password is one. */
static bool redis_url_has_password(const char *url) {
        RedisAddress a = {};
        bool has;

        if (redis_address_parse(url, &a, NULL) < 0)
                return false;   /* refused later, by the configuration, with the reason */
        has = a.password != NULL;
        redis_address_done(&a);
        return has;
}

static void help(void) {
        printf("Usage: fleetsemd [OPTIONS]\n\n"
               "The fleetsem agent: keeps this host's fleet-wide slots in Redis.\n"
               "Normally started by fleetsem.socket; runs in the foreground.\n\n"
               "  -h --help                   Show this help\n"
               "     --version                Show the version\n"
               "  -c --config=FILE            Configuration file (default: $FLEETSEM_CONFIG or\n"
               "                              " DEFAULT_CONFIG_FILE ")\n"
               "     --check-config           Check the configuration and exit\n"
               "     --check-redis            Check it, then look at its Redis (read-only): can it\n"
               "                              be reached, does it keep fleetsem's keys (noeviction)\n"
               "     --load-library           Check it, then load the agents' library into its Redis\n"
               "                              where it is missing or older, and exit\n"
               "     --redis-init             Check it, then declare its Redis empty (what\n"
               "                              fleetsem redis-init runs): refused where it holds\n"
               "                              any fleetsem key; exits with fleetsem(1)'s status\n"
               "     --redis=URL              redis://host[:port][/db] or unix:/path/to/redis.sock\n"
               "                              (passwords only through redis_password_file)\n"
               "     --redis-password-file=FILE\n"
               "                              Read the Redis password from FILE\n"
               "     --namespace=NS           Listen on @NS/agent (default: " DEFAULT_NAMESPACE ")\n"
               "     --host-id=ID             This host's name in Redis (default: host name)\n"
               "     --key-prefix=PREFIX      Prefix of Redis keys (default: " DEFAULT_KEY_PREFIX ")\n"
               "     --lease-ttl=DURATION     Lease lifetime without renewal (default: 15s)\n"
               "     --log-level=LEVEL        debug, info, notice, warning, err\n\n"
               "See fleetsemd(8) and fleetsem.conf(5).\n");
}

static int add_override(const char *key, const char *value) {
        if (arg_n_overrides >= ELEMENTSOF(arg_overrides))
                return log_error_errno(E2BIG, "Too many options.");
        arg_overrides[arg_n_overrides][0] = key;
        arg_overrides[arg_n_overrides][1] = value;
        arg_n_overrides++;
        return 0;
}

static int parse_argv(int argc, char *argv[]) {
        enum {
                ARG_VERSION = 0x100,
                ARG_CHECK_CONFIG,
                ARG_CHECK_REDIS,
                ARG_LOAD_LIBRARY,
                ARG_REDIS_INIT,
                ARG_REDIS,
                ARG_REDIS_PASSWORD_FILE,
                ARG_NAMESPACE,
                ARG_HOST_ID,
                ARG_KEY_PREFIX,
                ARG_LEASE_TTL,
                ARG_LOG_LEVEL,
        };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "config", required_argument, NULL, 'c' },
                { "check-config", no_argument, NULL, ARG_CHECK_CONFIG },
                { "check-redis", no_argument, NULL, ARG_CHECK_REDIS },
                { "load-library", no_argument, NULL, ARG_LOAD_LIBRARY },
                { "redis-init", no_argument, NULL, ARG_REDIS_INIT },
                { "redis", required_argument, NULL, ARG_REDIS },
                { "redis-password-file", required_argument, NULL, ARG_REDIS_PASSWORD_FILE },
                { "namespace", required_argument, NULL, ARG_NAMESPACE },
                { "host-id", required_argument, NULL, ARG_HOST_ID },
                { "key-prefix", required_argument, NULL, ARG_KEY_PREFIX },
                { "lease-ttl", required_argument, NULL, ARG_LEASE_TTL },
                { "log-level", required_argument, NULL, ARG_LOG_LEVEL },
                {}
        };
        int c, r = 0;

        arg_config = getenv("FLEETSEM_CONFIG");
        arg_config_explicit = arg_config && arg_config[0];
        if (!arg_config_explicit)
                arg_config = DEFAULT_CONFIG_FILE;

        while ((c = getopt_long(argc, argv, "hc:", options, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("fleetsemd %s\n%s\n", FLEETSEM_VERSION, redis_build_features());
                        return 0;
                case 'c':
                        arg_config = optarg;
                        arg_config_explicit = true;
                        break;
                case ARG_CHECK_CONFIG:
                        arg_check_config = true;
                        break;
                case ARG_CHECK_REDIS:
                        arg_check_config = arg_check_redis = true;
                        break;
                case ARG_LOAD_LIBRARY:
                        arg_check_config = arg_load_library = true;
                        break;
                case ARG_REDIS_INIT:
                        arg_check_config = arg_redis_init = true;
                        break;
                case ARG_REDIS:
                        if (redis_url_has_password(optarg))
                                return log_error_errno(EINVAL, "Refusing a password on the command line (others can read it "
                                                       "in /proc); use --redis-password-file= or redis_password_file=.");
                        r = add_override("redis", optarg);
                        break;
                case ARG_REDIS_PASSWORD_FILE:
                        r = add_override("redis_password_file", optarg);
                        break;
                case ARG_NAMESPACE:
                        r = add_override("namespace", optarg);
                        break;
                case ARG_HOST_ID:
                        r = add_override("host_id", optarg);
                        break;
                case ARG_KEY_PREFIX:
                        r = add_override("key_prefix", optarg);
                        break;
                case ARG_LEASE_TTL:
                        r = add_override("lease_ttl", optarg);
                        break;
                case ARG_LOG_LEVEL:
                        arg_log_level = log_level_from_string(optarg);
                        if (arg_log_level < 0)
                                return log_error_errno(EINVAL, "Unknown log level \"%s\".", optarg);
                        break;
                case '?':
                        return -EINVAL;
                default:
                        return log_error_errno(EINVAL, "Unhandled option.");
                }
                if (r < 0)
                        return r;
        }
        if (optind < argc)
                return log_error_errno(EINVAL, "Unexpected argument \"%s\"; see --help.", argv[optind]);
        return 1;
}

/* starting: read before the agent serves, so the seeds' names may be
 * resolved (blocking); a reload resolves nothing. */
static int load_config(Config *c, bool starting) {
        _cleanup_free_ char *error = NULL;
        int r;

        config_init(c);
        r = config_load_file(c, arg_config, &error);
        if (r == -ENOENT && !arg_config_explicit) {
                /* No file at the default place: the command line says it all. */
                error = mfree(error);
                r = 0;
        }
        if (r < 0)
                return log_error_errno(r, "%s", error ?: "Failed to read the configuration.");

        for (size_t i = 0; i < arg_n_overrides; i++) {
                const char *why = NULL;

                r = config_set(c, arg_overrides[i][0], arg_overrides[i][1], &why);
                if (r < 0)
                        return log_error_errno(r, "--%s: %s", arg_overrides[i][0], why ?: "invalid value");
        }
        r = config_finish(c, &error);
        if (r < 0)
                return log_error_errno(r, "%s", error);
        if (starting)
                config_cluster_allow_derive(c);
        return 0;
}

/* A TLS URL: the context every connection to Redis will use, made now so
 * that a file it cannot use fails the start (and --check-config). */
static int setup_tls(const Config *c) {
        char err[512];
        int r;

        if (!c->redis.tls)
                return 0;
        r = redis_tls_setup(&(RedisTlsConfig) { .ca_file = c->tls_ca_file, .cert_file = c->tls_cert_file,
                                                .key_file = c->tls_key_file, .server_name = c->tls_server_name },
                            err, sizeof(err));
        if (r < 0)
                return log_error_errno(r, "TLS to Redis: %s", err);
        return 0;
}

/* Every held slot costs one watch fd: lift the soft limit (1024 by default,
 * under systemd too) to the hard one. */
static void raise_fd_limit(void) {
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
                return;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                log_warning_errno(errno, "Failed to raise the file descriptor limit: %m");
        else if (rl.rlim_max < 16384)
                log_notice("At most %llu open files: this agent can hold fewer than that many slots.",
                           (unsigned long long) rl.rlim_max);
}

static int on_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        (void) userdata;
        log_info("Received %s; exiting. Held slots stay anchored for the next agent.", strsignal((int) si->ssi_signo));
        (void) sd_notify(false, "STOPPING=1");
        return sd_event_exit(sd_event_source_get_event(s), 0);
}

/* --log-level, else the file's log_level, else info. */
static void apply_log_level(const Config *c) {
        log_set_max_level(arg_log_level >= 0 ? arg_log_level : c->log_level >= 0 ? c->log_level : LOG_INFO);
}

static bool str_differs(const char *x, const char *y) {
        return !x != !y || (x && !streq(x, y));
}

static void secret_take(char **dest, char **src) {
        if (*dest)
                explicit_bzero(*dest, strlen(*dest));
        free(*dest);
        *dest = *src;
        *src = NULL;
}

/* cluster_allow as configured (what the running one derived from the
 * seeds follows the URL, compared on its own, and is not derived again). */
static bool cluster_allow_differs(const Config *c, const Config *n) {
        if (c->cluster_allow_set != n->cluster_allow_set)
                return true;
        return n->cluster_allow_set && (c->n_cluster_allow != n->n_cluster_allow ||
                                        memcmp(c->cluster_allow, n->cluster_allow, c->n_cluster_allow * sizeof(NetRule)));
}

/* SIGHUP (systemctl reload): the configuration read again. What applies to
 * requests (allow, limit, the per-user budgets) takes effect at once, a new
 * password at the next connection, made now; what the agent is built on
 * (Redis' address, namespace, host id, key prefix, lease, replicas,
 * quorum, cluster_allow) keeps its old value until a restart, and the
 * reload says so. A configuration with errors is refused whole. */
static int on_reload(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Agent *a = userdata;
        _cleanup_(config_done) Config n = {};
        Config *c = a->config;
        char x[300], y[300], who[64];
        bool new_password;

        (void) s;
        if (load_config(&n, false) < 0) {
                log_error("Reload refused: the configuration above has errors; the running one is kept.");
                return 0;
        }
        if (!streq(redis_address_to_string(&c->redis, x, sizeof(x)), redis_address_to_string(&n.redis, y, sizeof(y))))
                log_warning("Reload: redis changed (%s); it takes effect at the next restart.", y);
        if (str_differs(c->tls_ca_file, n.tls_ca_file) || str_differs(c->tls_cert_file, n.tls_cert_file) ||
            str_differs(c->tls_key_file, n.tls_key_file) || str_differs(c->tls_server_name, n.tls_server_name))
                log_warning("Reload: tls_* changed; it takes effect at the next restart.");
        if (!streq(c->namespace, n.namespace) || !streq(c->host_id, n.host_id) || !streq(c->key_prefix, n.key_prefix) ||
            c->lease_ttl != n.lease_ttl || c->host_lease != n.host_lease || c->min_replicas_acked != n.min_replicas_acked ||
            c->sentinel_quorum != n.sentinel_quorum || cluster_allow_differs(c, &n))
                log_warning("Reload: namespace, host_id, key_prefix, lease_ttl, host_lease, min_replicas_acked, sentinel_quorum or "
                            "cluster_allow changed; they take effect at the next restart.");

        /* What applies at once: swapped in whole. */
        SWAP_TWO(c->allow, n.allow);
        SWAP_TWO(c->n_allow, n.n_allow);
        SWAP_TWO(c->limits, n.limits);
        SWAP_TWO(c->n_limits, n.n_limits);
        c->max_clients = n.max_clients;
        c->max_clients_per_user = n.max_clients_per_user;
        c->max_leases_per_user = n.max_leases_per_user;
        c->max_names_per_user = n.max_names_per_user;
        c->max_redis_names_per_user = n.max_redis_names_per_user;
        c->max_weight_per_user = n.max_weight_per_user;
        c->idle_time = n.idle_time;
        c->log_level = n.log_level;
        apply_log_level(c);
        user_cache_clear();
        new_password = str_differs(c->redis.password, n.redis.password) ||
                       str_differs(c->redis.sentinel_password, n.redis.sentinel_password);
        secret_take(&c->redis.password, &n.redis.password);
        secret_take(&c->redis.sentinel_password, &n.redis.sentinel_password);

        /* An operator's action: who sent the signal, in the journal's fields. */
        snprintf(who, sizeof(who), "uid %u, pid %u (SIGHUP)", (unsigned) si->ssi_uid, (unsigned) si->ssi_pid);
        log_internal(LOG_NOTICE, 0, &(LogFields) { .name = "-", .action = "reload", .operator = who },
                     "Reloaded %s for %s: %zu allow and %zu limit rule(s)%s.", arg_config, who, c->n_allow, c->n_limits,
                     new_password ? "; connecting to Redis again with the new password" : "");
        if (new_password)
                redis_io_reconnect(a, "reconnecting with the new password");
        return 0;
}

/* SIGTERM, SIGINT and SIGHUP come through the event loop
 * (sd_event_add_signal() needs them blocked); a closed client costs no
 * SIGPIPE. */
static int block_signals(void) {
        sigset_t mask;

        if (sigemptyset(&mask) < 0 || sigaddset(&mask, SIGTERM) < 0 || sigaddset(&mask, SIGINT) < 0 ||
            sigaddset(&mask, SIGHUP) < 0 || sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return log_error_errno(errno, "Failed to block SIGTERM, SIGINT and SIGHUP: %m");
        if (signal(SIGPIPE, SIG_IGN) == SIG_ERR)
                return log_error_errno(errno, "Failed to ignore SIGPIPE: %m");
        return 0;
}

/* Without them the agent could not be stopped cleanly, or a hung agent
 * would not be restarted by systemd's watchdog well inside a lease: no
 * start-up without them. */
static int watch_signals_and_watchdog(sd_event *e, Agent *a) {
        int r;

        r = sd_event_add_signal(e, NULL, SIGTERM, on_signal, NULL);
        if (r < 0)
                return log_error_errno(r, "Failed to watch SIGTERM: %m");
        r = sd_event_add_signal(e, NULL, SIGINT, on_signal, NULL);
        if (r < 0)
                return log_error_errno(r, "Failed to watch SIGINT: %m");
        r = sd_event_add_signal(e, NULL, SIGHUP, on_reload, a);
        if (r < 0)
                return log_error_errno(r, "Failed to watch SIGHUP: %m");
        r = sd_event_set_watchdog(e, true);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the watchdog: %m");
        return 0;
}

static const EngineOps agent_engine_ops = {
        .send = io_send,
        .finish = io_finish,
        .call_acquire = io_call_acquire,
        .call_release = host_call_release,
        .call_renew = io_call_renew,
        .call_reassert = io_call_reassert,
        .index = host_index,
        .record = host_record,
        .lease_timer = io_lease_timer,
        .name_timer = io_name_timer,
        .name_waiting = io_name_waiting,
        .lease_drop = io_lease_drop,
        .name_drop = io_name_drop,
        .stop_job = io_stop_job,
        .tell_lost = io_tell_lost,
        .changed = io_changed,
        .random_id = io_random_id,
        .log = io_log,
};

/* Redis' state changed: re-adoption of the slots held before this agent
 * (once, when Redis is first up), the STATUS and METRICS that waited for
 * Redis, and STATUS= for systemd. */
static void on_redis_changed(Agent *a) {
        if (a->state == REDIS_READY && !a->adopted && !a->adopting)
                adopt_start(a);
        requests_resume_deferred(a);
        status_mark_dirty(a);
}

static int run(int argc, char *argv[]) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        _cleanup_(config_done) Config config = {};
        Agent agent = { .redis_changed = on_redis_changed, .fleet_changed = status_mark_dirty, .record_fd = -EBADF,
                         .run_record_fd = -EBADF };
        char redis[300];
        int r;

        log_setup("fleetsemd", LOG_TARGET_AUTO, log_journal_sink);
        r = parse_argv(argc, argv);
        if (r <= 0)
                return r;
        if (arg_log_level >= 0)
                log_set_max_level(arg_log_level);

        r = load_config(&config, true);
        if (r < 0)
                return r;
        apply_log_level(&config);
        r = setup_tls(&config);
        if (r < 0)
                return r;
        if (arg_check_config) {
                printf("Configuration OK: redis=%s namespace=%s host_id=%s key_prefix=%s lease_ttl=%llums%s\n",
                       redis_address_to_string(&config.redis, redis, sizeof(redis)), config.namespace,
                       config.host_id, config.key_prefix,
                       (unsigned long long) (config.lease_ttl / USEC_PER_MSEC),
                       config.redis.password ? " (password set)" : "");
                if (arg_redis_init)
                        return redis_init(&config);
                r = arg_check_redis && check_redis(&config) != 0 ? -EIO : 0;
                if (r >= 0 && arg_load_library && load_library(&config) != 0)
                        r = -EIO;
                return r;
        }

        raise_fd_limit();
        r = block_signals();
        if (r < 0)
                goto finish;
        r = sd_event_default(&e);
        if (r < 0) {
                log_error_errno(r, "Failed to allocate the event loop: %m");
                goto finish;
        }
        agent.event = e;
        agent.config = &config;
        host_record_open(&agent);
        engine_init(&agent.engine, &agent_engine_ops, &agent, config.lease_ttl);
        /* With replicas to confirm each grant, a waiter's own agent asks
         * for it (and WAITs); else Redis' wake message is enough. */
        agent.engine.wake_grants = config.min_replicas_acked <= 0;
        r = watch_signals_and_watchdog(e, &agent);
        if (r < 0)
                goto finish;

        r = lease_io_start(&agent);
        if (r < 0)
                goto finish;
        r = server_start(&agent);
        if (r < 0)
                goto finish;
        r = status_start(&agent);
        if (r < 0)
                goto finish;
        r = redis_io_start(&agent);
        if (r < 0)
                goto finish;

        log_info("fleetsemd %s listening on @%s/agent as host %s (Redis %s, lease TTL %llus).", FLEETSEM_VERSION,
                 config.namespace, config.host_id, redis_address_to_string(&config.redis, redis, sizeof(redis)),
                 (unsigned long long) (config.lease_ttl / USEC_PER_SEC));
        (void) sd_notify(false, "READY=1\nSTATUS=Connecting to Redis");
        r = sd_event_loop(e);

finish:
        /* Leaving releases nothing: the anchors live on in the sessions
         * and units, and the next agent re-adopts them. Redis' side stops
         * first: what it still holds (a batch, a reply awaited) is told to
         * the engine while the engine is there. */
        redis_io_stop(&agent);
        engine_done(&agent.engine);
        server_stop(&agent);
        status_stop(&agent);
        lease_io_stop(&agent);
        units_close();
        safe_close(agent.record_fd);
        safe_close(agent.run_record_fd);
        user_cache_clear();
        log_limit_done();
        return r;
}

int main(int argc, char *argv[]) {
        int r = run(argc, argv);

        /* --redis-init: fleetsem(1)'s exit status (a configuration that
         * cannot be read: EX_CONFIG). */
        if (arg_redis_init)
                return r < 0 ? EXIT_CONFIG : r;
        return r < 0 ? 1 : 0;
}
