# Shared by the integration tests: TAP output, a private redis-server on a
# unix socket in a temporary directory, and agents as "hosts" (each its own
# namespace and host id). Source it; it cleans up on exit.
set -u

: "${FLEETSEM:?path to fleetsem}" "${FLEETSEMD:?path to fleetsemd}"
# python3 itself first on PATH, not a version manager's shim (pyenv's is a
# shell script that runs a score of processes a call, and the tests call
# python3 hundreds of times): the interpreter python3 names, found once.
if py=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null) && [ -x "$py" ] &&
        [ "$(command -v python3)" != "$py" ]; then
        PATH=${py%/*}:$PATH
fi
unset py
TEST_NAME=$(basename "$0" .sh)
T=$(mktemp -d "/tmp/fleetsem-$TEST_NAME.XXXXXX")
NSBASE="fst$$"
TTL=${TTL:-2s}
tap_n=0
tap_failed=0
tap_skipped=0
AGENT_HOSTS=()

kill_tree() {
        local c
        for c in $(pgrep -P "$1"); do kill_tree "$c"; done
        kill -KILL "$1" 2>/dev/null
}

cleanup() {
        local p
        # Everything the test started: agents, jobs and their commands.
        for p in $(pgrep -P $$); do kill_tree "$p"; done
        [ -f "$T/redis.pid" ] && kill -KILL "$(cat "$T/redis.pid")" 2>/dev/null
        wait 2>/dev/null
        # What the test's daemons logged: the Redis servers a test runs in
        # directories of their own (DIR/log), then agents and the rest.
        if [ "$tap_failed" -gt 0 ] || [ -n "${KEEP_TMP:-}" ]; then
                for f in "$T"/*/log "$T"/*.log "$T"/console-*.txt; do [ -f "$f" ] && { echo "# --- $f"; sed 's/^/#   /' "$f" | tail -n 40; }; done
        fi
        # KEEP_TMP=failed: a failed test's directory is kept whole, to read.
        if [ "${KEEP_TMP:-}" = failed ] && [ "$tap_failed" -gt 0 ]; then
                echo "# kept $T"
        else
                rm -rf "$T"
        fi
}
trap cleanup EXIT

ok() { tap_n=$((tap_n + 1)); echo "ok $tap_n - $*"; }
not_ok() { tap_n=$((tap_n + 1)); tap_failed=$((tap_failed + 1)); echo "not ok $tap_n - $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else not_ok "$what"; fi; }
# quiet CMD...: CMD with its output thrown away (a check that needs only its
# status prints nothing outside the TAP stream).
quiet() { "$@" >/dev/null; }
is() {
        if [ "$1" = "$2" ]; then ok "$3"; else not_ok "$3"; echo "#   got '$1', expected '$2'"; fi
}
like() {
        if printf '%s' "$1" | grep -qE -- "$2"; then ok "$3"; else
                # (Each line of what it got under a "#": TAP's own.)
                not_ok "$3"; echo "#   does not match /$2/:"; printf '%s\n' "$1" | sed 's/^/#     /'; fi
}
# Stops the agents still running with SIGTERM, as systemd would: each must
# exit 0, and no log may hold a sanitizer report. "Still running" is asked
# of the shell's own jobs, not of the pid: the pid of an agent a test killed
# may belong to another process by now (pid_max is 32768 on a small
# machine, and a test forks thousands).
stop_agents() {
        local host pid rc running
        for host in "${AGENT_HOSTS[@]}"; do
                pid=$(agent_pid "$host")
                running=" $(jobs -rp | tr '\n' ' ') "
                [[ $running == *" $pid "* ]] || continue
                kill -TERM "$pid"
                wait "$pid"
                rc=$?
                is "$rc" 0 "agent $host exits cleanly on SIGTERM"
        done
        if grep -lE 'Sanitizer|runtime error:' "$T"/*.log >/dev/null 2>&1; then
                not_ok "no sanitizer report in: $(grep -lE 'Sanitizer|runtime error:' "$T"/*.log | tr '\n' ' ')"
        fi
}

done_testing() {
        stop_agents
        if acl_audit && [ -f "$T/redis.pid" ]; then
                is "$(rcli ACL LOG)" "" "ACL audit: Redis refused the agents nothing"
        fi
        echo "1..$tap_n"
        if [ "$tap_skipped" -gt 0 ]; then
                echo "# $((tap_n - tap_failed - tap_skipped)) passed, $tap_failed failed, $tap_skipped skipped"
        else
                echo "# $((tap_n - tap_failed)) passed, $tap_failed failed"
        fi
        [ "$tap_failed" -eq 0 ]
        exit $?
}
bail() { echo "Bail out! $*"; tap_failed=$((tap_failed + 1)); exit 1; }

# Missing prerequisites, one rule everywhere: under CI=true a failure that
# says what is missing (CI skips nothing), elsewhere a skip that says it.
# prereq WHAT CMD...: true when CMD succeeds; else one TAP line for WHAT,
# and the caller leaves out what needs it. has_tool TOOL: a command on PATH
# (not "have": bash-completion has one of its own).
prereq() {
        local what=$1; shift
        "$@" >/dev/null 2>&1 && return 0
        if [ "${CI:-}" = true ]; then
                not_ok "$what is required (CI=true: nothing may be skipped)"
        else
                tap_n=$((tap_n + 1)) tap_skipped=$((tap_skipped + 1))
                echo "ok $tap_n # SKIP $what is missing"
        fi
        return 1
}
has_tool() { prereq "$1" command -v "$1"; }
# require_that WHAT CMD... / require TOOL: the same for what the rest of
# the test needs, which ends here without it (skipped whole if nothing ran).
require_that() {
        local what=$1; shift
        "$@" >/dev/null 2>&1 && return 0
        if [ "$tap_n" -gt 0 ]; then
                prereq "$what" false
                done_testing
        fi
        skip_all "$what is missing"
}
require() { require_that "$1" command -v "$1"; }
# skip_all WHY: the whole test skipped before it ran anything (TAP's own
# skip, "1..0 # SKIP", which meson reports as SKIP: it takes exit 77 from a
# TAP test for an error); under CI=true a failure instead, since CI skips
# nothing. The only skips of the tests (tests/check-tests.py holds them to
# it).
skip_all() {
        if [ "${CI:-}" = true ]; then
                echo "not ok 1 - $1 (CI=true: nothing may be skipped)"
                echo "1..1"
                exit 1
        fi
        echo "1..0 # SKIP $1"
        exit 0
}
# skip_build WHY: skipped even under CI=true, for what this build cannot do
# at all (a build without TLS); only the tests tests/check-tests.py lists,
# each with its reason, may call it.
skip_build() {
        echo "1..0 # SKIP $1"
        exit 0
}

# pam_setup: for PAM programs run under pam_wrapper: PRELOAD to put in
# LD_PRELOAD (with the sanitizer runtime first when the module is built
# with it, and pam_wrapper's deep binding off, as its manual says).
pam_setup() {
        : "${PAM_FLEETSEM:?path to pam_fleetsem.so}" "${PAM_SESSION:?path to pam-session}"
        local wrap asan
        wrap=$(ls /usr/lib/*/libpam_wrapper.so /usr/lib/libpam_wrapper.so 2>/dev/null | head -n1)
        [ -n "$wrap" ] || require libpam_wrapper.so
        asan=$(ldd "$PAM_FLEETSEM" | awk '/libasan/ { print $3 }')
        PRELOAD="${asan:+$asan }$wrap"
        [ -n "$asan" ] && export PAM_WRAPPER_DISABLE_DEEPBIND=1
        return 0
}
# The server the tests run: Redis (the default) or Valkey
# (FLEETSEM_TEST_SERVER=valkey); redis-cli talks to either.
case ${FLEETSEM_TEST_SERVER:-redis} in
redis) REDIS_SERVER=redis-server REDIS_SENTINEL=redis-sentinel ;;
valkey) REDIS_SERVER=valkey-server REDIS_SENTINEL=valkey-sentinel ;;
*) bail "FLEETSEM_TEST_SERVER is redis or valkey, not '$FLEETSEM_TEST_SERVER'" ;;
esac
require "$REDIS_SERVER"
require redis-cli
require python3

now_ms() { date +%s%3N; }
# int_of VAR TEXT: VAR set to TEXT, a decimal integer (what shell arithmetic
# reads); anything else bails, naming it. The way a number another tool
# printed reaches shell arithmetic (tests/check-tests.py): mawk prints a
# number past 2^31 as 3.64546e+09 and clamps its printf %d there, bc and
# python may print 1.0. (awk: printf "%.0f" for a large integer.)
int_of() {
        [[ $2 =~ ^-?[0-9]+$ ]] || bail "not an integer for $1: '$2'"
        printf -v "$1" '%s' "$2"
}

# end_fifo PATH OUT: a FIFO at PATH whose reader writes to OUT when the
# last process that holds it open for writing has ended (ms since the
# epoch, the jobs' clock): a job opens it (exec 7>PATH), its process group
# inherits it, and OUT says when the whole group was gone. The reader
# waits in read() and takes the time as it returns: no process to start
# between the end and its time.
end_fifo() {
        mkfifo "$1" || bail "mkfifo $1"
        python3 -c 'import sys, time
sys.stdin.buffer.read()
t = time.time_ns() // 1000000
open(sys.argv[1], "w").write("%d\n" % t)' "$2" <"$1" &
}

# wait_for SECONDS CMD...: polls CMD every 20ms until it succeeds; fails
# when it has not within SECONDS. A wait that took more than a third of
# its SECONDS is noted as a TAP comment (its bound is too close to the
# time it takes: widen it, unless the bound is the behaviour checked).
wait_for() {
        local secs=$1 start deadline took
        start=$(now_ms)
        deadline=$((start + secs * 1000)); shift
        until "$@" >/dev/null 2>&1; do
                [ "$(now_ms)" -gt "$deadline" ] && return 1
                sleep 0.02      # not synchronisation: the poll of wait_for
        done
        took=$(($(now_ms) - start))
        [ $((took * 3)) -le $((secs * 1000)) ] ||
                echo "# wait_for $secs s took $took ms: $(echo "$*" | tr '\n' ' ' | cut -c1-160)"
        return 0
}
# still_after SECONDS CMD...: CMD holds now and at every poll (20ms) for
# SECONDS (fractions too): for what must not happen within a time, a lease
# that would run out unrenewed, a waiter that must go on waiting. Fails at
# the first poll where CMD does not hold.
still_after() {
        local deadline ms
        int_of ms "$(awk -v s="$1" 'BEGIN { printf "%.0f", s * 1000 }')"
        deadline=$(( $(now_ms) + ms )); shift
        "$@" >/dev/null 2>&1 || return 1
        while [ "$(now_ms)" -le "$deadline" ]; do
                sleep 0.02      # not synchronisation: the poll of still_after
                "$@" >/dev/null 2>&1 || return 1
        done
}

REDIS_SOCK=${REDIS_SOCK:-$T/redis.sock}
rcli() { redis-cli -s "$REDIS_SOCK" "$@"; }
# free_port: a TCP port nothing listens on, and one no other test of the
# run (nor of the last hours) was given: a test's agent still retries the
# port of a Redis its test stopped, and must not find another test's
# Redis or fake node there. Each port given is claimed with a mkdir in a
# directory the tests share; claims older than a day are let go.
PORTS_DIR=${TMPDIR:-/tmp}/fleetsem-test-ports
free_port() {
        python3 - "$PORTS_DIR" <<'PY'
import os, socket, sys, time
d = sys.argv[1]
try:
    os.mkdir(d)
    os.chmod(d, 0o1777)
except FileExistsError:
    pass
for _ in range(1000):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    claim = os.path.join(d, str(port))
    try:
        if time.time() - os.stat(claim).st_mtime > 86400:
            os.rmdir(claim)
    except FileNotFoundError:
        pass
    try:
        os.mkdir(claim)
    except FileExistsError:
        continue
    print(port)
    sys.exit(0)
sys.exit("free_port: no port left that no test was given")
PY
}

# FLEETSEM_TEST_ACL=1 audits the shipped Redis ACL with a whole suite: Redis
# also listens on loopback TCP with systemd/redis-acl.conf.example (its
# default user left open to the tests' own look-ups), the agents log in as
# its fleetsem user, and each test ends by checking that ACL LOG is empty:
# nothing an agent does may be refused. (A unix: URL names no user.) Tests
# of the plain password (REDIS_AUTH) keep to it.
acl_audit() { [ -n "${FLEETSEM_TEST_ACL:-}" ] && [ -z "${REDIS_AUTH:-}" ]; }
acl_audit_setup() {
        [ -n "${ACL_PORT:-}" ] && return
        ACL_PORT=$(free_port)
        acl_conf "$T/acl.conf" "$T/acl.pw"
        sed -i "s/^user default off\$/user default on nopass ~* \&* +@all/" "$T/acl.conf" ||
                bail "cannot open the default user in $T/acl.conf"
}

# The tests' Redis users, one way: each user's password a new random one
# in a file of its own (mode 0600), as the agents read theirs.
# secret_file FILE: such a password in FILE.
secret_file() {
        printf '%s-%s-%s\n' "$TEST_NAME" $$ "$RANDOM$RANDOM" >"$1" && chmod 600 "$1" ||
                bail "cannot write the password file $1"
}
# acl_conf OUT FLEETSEM_PW [APP_PW [ADMIN_PW]]: the shipped ACL
# (systemd/redis-acl.conf.example) in OUT (mode 0600) as an operator fills
# it in: the password of its fleetsem user that of the file FLEETSEM_PW,
# given as its SHA-256 as the example recommends, its app user's that of
# APP_PW and, with ADMIN_PW, its operator (commented out in the example)
# on with that one. A password file that does not exist is made.
acl_conf() {
        local out=$1 f sed=() users=(fleetsem app admin) i
        shift
        for f; do [ -f "$f" ] || secret_file "$f"; done
        sed+=(-e "s/^\\(user fleetsem .*\\)>CHANGE-ME-fleetsem /\\1#$(head -n 1 "$1" | tr -d '\n' | sha256sum | cut -d' ' -f1) /")
        [ $# -ge 2 ] && sed+=(-e "s/^\\(user app .*\\)>CHANGE-ME-app /\\1>$(head -n 1 "$2") /")
        [ $# -ge 3 ] && sed+=(-e "s/^# \\(user admin .*\\)>CHANGE-ME-admin /\\1>$(head -n 1 "$3") /")
        sed "${sed[@]}" "$(dirname "$0")/../systemd/redis-acl.conf.example" >"$out" && chmod 600 "$out" ||
                bail "cannot write $out"
        for ((i = 0; i < $#; i++)); do
                lacks "$out" "^user ${users[i]} .*CHANGE-ME" "^user ${users[i]} " ||
                        bail "$out: the user ${users[i]} has no password of the test's"
        done
}
# acl_user NAME PW_FILE RULE...: the user NAME on the test's Redis (rcli)
# with the password of PW_FILE (made when it does not exist) and RULEs.
acl_user() {
        local name=$1 pwf=$2
        shift 2
        [ -f "$pwf" ] || secret_file "$pwf"
        [ "$(rcli ACL SETUSER "$name" reset on ">$(head -n 1 "$pwf")" "$@")" = OK ] ||
                bail "Redis refused the user $name"
}

# notify_listen SOCKET LOG: a datagram socket in place of systemd's
# NOTIFY_SOCKET, each message one line of LOG (in the background).
notify_listen() {
        python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as out:
    while True:
        out.write(s.recv(8192).decode().replace("\n", " ") + "\n")
' "$1" "$2" &
        wait_for 5 test -S "$1"
}

# seed_redis CLI...: what `fleetsem redis-init` writes in a new Redis
# (fleetsemd(8), SAFETY): an epoch and a census that say nobody held
# anything before. (Written here directly: the tests run as other users
# than root too.)
seed_redis() {
        "$@" SET fleetsem:epoch "$(printf '%032x' $$) 0" NX >/dev/null
        "$@" ZADD fleetsem:census NX -1 . >/dev/null
}

# start_old_redis: a second redis-server on $T/old.sock (pid in $T/old.pid)
# without Redis functions, as before Redis 7.0: its FCALL renamed away, so
# that it answers FCALL as an unknown command.
start_old_redis() {
        "$REDIS_SERVER" --port 0 --unixsocket "$T/old.sock" --unixsocketperm 700 --dir "$T" --dbfilename old.rdb \
                --save '' --appendonly no --pidfile "$T/old.pid" --daemonize yes --logfile "$T/old.log" \
                --rename-command FCALL "" >/dev/null || bail "the second redis-server did not start"
        wait_for 10 redis-cli -s "$T/old.sock" ping >/dev/null || bail "the second redis-server does not answer"
        seed_redis redis-cli -s "$T/old.sock"
}

start_redis() {
        local acl=()
        if acl_audit; then
                acl_audit_setup
                acl=(--port "$ACL_PORT" --bind 127.0.0.1 --include "$T/acl.conf")
        fi
        "$REDIS_SERVER" --port 0 --unixsocket "$REDIS_SOCK" --unixsocketperm 700 --dir "$T" \
                --save '' --appendonly no --pidfile "$T/redis.pid" --daemonize yes \
                --logfile "$T/redis.log" "${acl[@]}" "$@" >/dev/null || bail "$REDIS_SERVER did not start"
        wait_for 10 rcli ${REDIS_AUTH:+-a "$REDIS_AUTH" --no-auth-warning} ping || bail "redis-server does not answer"
        # A Redis that never held fleetsem's state: agents that find no
        # epoch, and scripts that find no census, take it for one that
        # lost its data and grant nothing for a lease (see fleetsemd(8)).
        # This one is new, so say that nobody held anything before it. A
        # restart keeps whatever it has.
        if [ -z "${REDIS_SEEDED:-}" ]; then
                seed_redis rcli ${REDIS_AUTH:+-a "$REDIS_AUTH" --no-auth-warning}
                REDIS_SEEDED=1
        fi
}

stop_redis() {
        local pid
        pid=$(cat "$T/redis.pid")
        rcli ${REDIS_AUTH:+-a "$REDIS_AUTH" --no-auth-warning} shutdown ${1:-} >/dev/null 2>&1 || kill "$pid"
        wait_for 10 sh -c "! kill -0 $pid" || bail "redis-server did not stop"
        rm -f "$T/redis.pid"
}

agent_listening() { grep -q "@$1/agent" /proc/net/unix; }

# run_agent HOST fleetsemd options...: an agent for HOST (namespace
# $NSBASE-HOST), logging to $T/agent-HOST.log, stopped by done_testing;
# its state directory (as systemd's StateDirectory= gives it) $T/state-HOST,
# its runtime directory (RuntimeDirectory=) $T/run-HOST.
run_agent() {
        local host=$1; shift
        mkdir -p "$T/state-$host" "$T/run-$host"
        STATE_DIRECTORY="$T/state-$host" RUNTIME_DIRECTORY="$T/run-$host" "$FLEETSEMD" --namespace "$NSBASE-$host" --host-id "$host" \
                --lease-ttl "$TTL" "$@" >>"$T/agent-$host.log" 2>&1 &
        eval "AGENT_$(echo "$host" | tr -c 'A-Za-z0-9\n' _)=$!"
        AGENT_HOSTS+=("$host")
        wait_for 10 agent_listening "$NSBASE-$host" || bail "agent $host did not start"
}

# start_agent HOST [fleetsemd options...]: an agent on the test's Redis.
start_agent() {
        local host=$1 redis=(--redis "unix:$REDIS_SOCK"); shift
        acl_audit && redis=(--redis "redis://fleetsem@127.0.0.1:$ACL_PORT" --redis-password-file "$T/acl.pw")
        run_agent "$host" "${redis[@]}" "$@"
}
agent_pid() { eval "echo \$AGENT_$(echo "$1" | tr -c 'A-Za-z0-9\n' _)"; }

# pty_press DIR KEYS: KEYS (printf's format) typed on the terminal of
# tests/pty-screen.py DIR: its file renamed into place whole, as
# pty-screen.py reads it as soon as it is there.
pty_press() { printf "$2" >"$1/keys.new" && mv "$1/keys.new" "$1/keys"; }
# pty_end DIR PID: pty-screen.py DIR (PID) is over; a command that did not
# quit (a check before failed) is killed, not waited for.
pty_end() { [ -e "$1/rc" ] || kill_tree "$2"; wait "$2"; }

# fs HOST ARGS...: fleetsem talking to HOST's agent.
fs() { local host=$1; shift; FLEETSEM_NAMESPACE="$NSBASE-$host" "$FLEETSEM" "$@"; }
# fs_exec HOST ARGS... &: the same in the background, with $! the pid of
# fleetsem itself (for tests that signal it).
fs_exec() { export FLEETSEM_NAMESPACE="$NSBASE-$1"; shift; exec "$FLEETSEM" "$@"; }

# raw HOST LINE...: sends raw bytes to HOST's agent, prints the replies.
raw() { local host=$1; shift; python3 "$(dirname "$0")/agent-raw.py" "$NSBASE-$host" "$@"; }

# job HOST NAME [RUN OPTIONS...]: fleetsem run of a job that logs "enter
# TOKEN TIME HOST" and "exit TOKEN TIME HOST" (its own clock, in ns) in
# $T/events-NAME, and holds until $T/go-NAME exists.
job() {
        local host=$1 name=$2; shift 2
        fs "$host" run --slots 1 "$@" "$name" -- sh -c '
                echo "enter $FLEETSEM_TOKEN $(date +%s%N) $0" >>"$1"
                while [ ! -f "$2" ]; do sleep 0.02; done
                echo "exit $FLEETSEM_TOKEN $(date +%s%N) $0" >>"$1"' "$host" "$T/events-$name" "$T/go-$name"
}

# tagged_job HOST NAME TAG [RUN OPTIONS...]: fleetsem run of a job that
# notes "enter TAG" in $T/order when it gets its slot and holds until
# $T/go-TAG exists; run's stderr goes to $T/run-TAG.err.
tagged_job() {
        local host=$1 name=$2 tag=$3
        shift 3
        fs "$host" run "$@" "$name" -- sh -c "echo enter $tag >>'$T/order'; \
                while [ ! -e '$T/go-$tag' ]; do sleep 0.05; done" 2>>"$T/run-$tag.err"
}

# acquire_setup: ACQUIRE=true (root, a writable cgroup2 hierarchy) and CG,
# a service's cgroup of the test's own (fleetsem-test.slice/fsoc-PID.service),
# removed at exit; else ACQUIRE=false.
acquire_setup() {
        local cg2
        cg2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
        ACQUIRE=false
        if [ "$(id -u)" = 0 ] && [ -n "$cg2" ] && mkdir -p "$cg2/fleetsem-test-$$.slice/fsoc-$$.service" 2>/dev/null; then
                ACQUIRE=true
                CG="$cg2/fleetsem-test-$$.slice/fsoc-$$.service"
                trap 'cleanup; rmdir "$CG" "$(dirname "$CG")" 2>/dev/null; rm -f /run/fleetsem/fsoc-$$.service.env' EXIT
        fi
}
# acquire_in_unit POLICY NS NAME: fleetsem acquire's exit code for a slot of
# NAME, from a process in CG with INVOCATION_ID set, as systemd runs
# ExecStartPre=; its log in $T/acquire.log.
acquire_in_unit() {
        (echo "$BASHPID" >"$CG/cgroup.procs" &&
                INVOCATION_ID=0123456789abcdef FLEETSEM_NAMESPACE=$2 exec "$FLEETSEM" acquire --slots 1 --wait 0 \
                        --on-error="$1" "$3") 2>"$T/acquire.log"
        echo $?
}

# metric HOST SERIES: the value of SERIES (name and labels exactly as
# fleetsem metrics prints them) on HOST's agent, "" when absent.
# until_metric HOST SERIES VALUE: waits up to 10 s until it is VALUE.
metric() { fs "$1" metrics | awk -v k="$2" '$1 == k { print $2 }'; }
metric_is() { [ "$(metric "$1" "$2")" = "$3" ]; }
until_metric() { wait_for 10 metric_is "$@"; }
# redis_state HOST: what HOST's agent says of Redis: up, down (it tried and
# failed) or connecting (the METRICS reply's AGENT line, which fleetsem
# metrics shows as fleetsem_redis_up 1 or 0).
redis_state() { raw "$1" METRICS | sed -n 's/^AGENT redis=\([a-z]*\).*/\1/p'; }
redis_state_is() { [ "$(redis_state "$1")" = "$2" ]; }
# started HOST: the agent's log holds the line it writes once listening,
# so that a check that a message is absent from that log has read it.
start_line() { echo "fleetsemd .* listening on @$NSBASE-$1/agent as host $1 "; }
started() { grep -qE "$(start_line "$1")" "$T/agent-$1.log"; }
# lacks FILE PATTERN MUST: FILE exists, has a line matching MUST and none
# matching PATTERN (both grep -E). MUST is a line that is always there (an
# agent's start line, a job's first line), so that a file never written or
# a message reworded cannot pass for a message absent.
# log_lacks FILE PATTERN MUST WHAT: the same as one TAP line for WHAT, and
# agent_lacks HOST PATTERN WHAT: for HOST's agent's log, MUST its start line.
# The only way the tests check that text is absent (tests/check-tests.py).
# (Both counted: LACKS_MUST lines matching MUST, LACKS_PAT matching
# PATTERN, -1 when FILE does not exist.)
lacks() {
        LACKS_MUST=-1 LACKS_PAT=-1
        [ -f "$1" ] || return 1
        LACKS_MUST=$(grep -cE -- "$3" "$1") LACKS_PAT=$(grep -cE -- "$2" "$1")
        [ "$LACKS_MUST" -gt 0 ] && [ "$LACKS_PAT" -eq 0 ]
}
log_lacks() {
        local file=$1 pat=$2 must=$3 what=$4
        if lacks "$file" "$pat" "$must"; then
                ok "$what"
                return 0
        fi
        not_ok "$what"
        if [ "$LACKS_MUST" -lt 0 ]; then
                echo "#   $file does not exist"
        elif [ "$LACKS_MUST" -eq 0 ]; then
                echo "#   $file has no line /$must/: it proves nothing"
        else
                grep -nE -- "$pat" "$file" | head -n 3 | sed "s|^|#   $file:|"
        fi
        return 1
}
agent_lacks() { log_lacks "$T/agent-$1.log" "$2" "$(start_line "$1")" "$3"; }

# record NAME LEASE [FIELDS]: the lease's record in Redis, "HOST UID SLOTS
# TOKEN SINCE_MS PROOF DESCRIPTION" (cut -f FIELDS of it).
record() { rcli HGET "fleetsem:{$1}:clock" "$2" | cut -d' ' -f"${3:-1-}"; }
# make_cert NAME CN [CA]: $T/NAME.key and $T/NAME.crt for the name CN (a
# DNS name in it), signed by $T/CA.crt; a self-signed CA without CA.
make_cert() {
        openssl req -newkey rsa:2048 -nodes -keyout "$T/$1.key" -subj "/CN=$2" -out "$T/$1.csr" 2>/dev/null &&
        if [ -n "${3:-}" ]; then
                openssl x509 -req -in "$T/$1.csr" -CA "$T/$3.crt" -CAkey "$T/$3.key" -CAcreateserial -days 2 \
                        -extfile <(printf 'subjectAltName=DNS:%s\n' "$2") -out "$T/$1.crt" 2>/dev/null
        else
                openssl x509 -req -in "$T/$1.csr" -signkey "$T/$1.key" -days 2 \
                        -extfile <(printf 'basicConstraints=critical,CA:TRUE\n') -out "$T/$1.crt" 2>/dev/null
        fi && chmod 600 "$T/$1.key"
}
# holders NAME / waiters NAME: counts in Redis itself.
holders() { rcli ZCARD "fleetsem:{$1}:holders"; }
waiters() { rcli ZCARD "fleetsem:{$1}:queue"; }
