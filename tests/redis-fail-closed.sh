#!/bin/bash
# One contract for what takes on_error (pam_fleetsem(8), ON ERROR): a state
# of Redis or of the agent that lasts until an operator acts is refused
# whatever the caller's on-error policy says, through the real
# pam_fleetsem.so (on_error=allow), `fleetsem run` and `fleetsem acquire
# --on-error=allow` (as root), with the reason and the fix in the message,
# the journal, status and the metric fleetsem_refusing: an evicting policy
# set while agents run (a PAM session waiting and a new one refused, the
# holder kept and renewed), a newer library loaded while they run (its
# holder fenced), another text under the agent's version that the agent
# may not replace, an ACL that refuses FCALL (NOPERM), a wrong password
# (WRONGPASS) and a server without Functions. An outage (Redis gone) still
# takes on_error: allow lets the session and the unit in.
TTL=3s
. "$(dirname "$0")/lib.sh"
pam_setup
acquire_setup
ME=$(id -un)
SRC=$(cd "$(dirname "$0")/../src/agent/library" && pwd)
mkdir -p "$T/pam.d"
PORT=$(free_port)
start_redis --port "$PORT" --bind 127.0.0.1

# pam_open HOST NAME ID [wait=...]: a session of daemon through a stack with
# on_error=allow and slots=1 on HOST's agent, in the background; its
# output in $T/pam-ID.out.
pam_open() {
        local host=$1 name=$2 id=$3
        shift 3
        echo "session required $PAM_FLEETSEM namespace=$NSBASE-$host agent_user=$ME slots=1 name=$name on_error=allow $*" \
                >"$T/pam.d/fc-$id"
        (echo close | LD_PRELOAD=$PRELOAD PAM_WRAPPER=1 PAM_WRAPPER_SERVICE_DIR="$T/pam.d" PAM_WRAPPER_DEBUGLEVEL=1 \
                "$PAM_SESSION" "fc-$id" daemon) >"$T/pam-$id.out" 2>"$T/pam-$id.log"
}
pam_result() { sed -n 's/^open: \([0-9]*\) .*/\1/p' "$T/pam-$1.out"; }

# refuses HOST STATE MSG WHAT: HOST's agent refuses for STATE (a row of
# ON ERROR), whatever on_error says: the metric names STATE; a new PAM
# session (on_error=allow) gets PAM_SESSION_ERR and is told MSG; run exits
# 78 without running COMMAND (69 for an outage); acquire --on-error=allow
# exits 78; status says MSG; the journal says MSG.
n_refuses=0
refuses() {
        local host=$1 state=$2 msg=$3 what=$4 out rc
        n_refuses=$((n_refuses + 1))
        check "$what: fleetsem_refusing{state=\"$state\"} 1" \
                wait_for 10 metric_is "$host" "fleetsem_refusing{state=\"$state\"}" 1
        pam_open "$host" "fc-$n_refuses" "r$n_refuses"
        is "$(pam_result "r$n_refuses")" 14 "$what: a PAM session with on_error=allow is refused (PAM_SESSION_ERR)"
        like "$(cat "$T/pam-r$n_refuses.out")" "^error: fleetsem: session refused: $msg" "... told why and the fix"
        rm -f "$T/ran"
        fs "$host" run --slots 1 --no-wait "fc-$n_refuses" -- touch "$T/ran" 2>"$T/run.err"
        is "$? $([ -e "$T/ran" ] && echo ran || echo -)" "78 -" "$what: run exits 78 (not 69, an outage's), COMMAND not run"
        like "$(cat "$T/run.err")" "$msg" "... saying why"
        if [ "$ACQUIRE" = true ]; then
                is "$(acquire_in_unit allow "$NSBASE-$host" "fc-$n_refuses")" 78 "$what: acquire --on-error=allow exits 78"
        else
                prereq "root and a writable cgroup2 hierarchy, for acquire" false
        fi
        # (Status exits 78 where Redis is refused; 0 where it serves the
        # holders, under an evicting policy.)
        out=$(fs "$host" status 2>&1); rc=$?
        is "$rc" "$([ "$state" = eviction ] && echo 0 || echo 78)" "$what: status's exit status"
        like "$out" "$msg" "... it says why"
        check "$what: the journal says it" grep -qE "$msg" "$T/agent-$host.log"
}

# ---- An outage takes on_error --------------------------------------------------------
start_agent a
check "agent a is up" wait_for 10 redis_state_is a up
fs a run --slots 1 --no-wait warm -- true
is "$?" 0 "a grants"
is "$(metric a fleetsem_refusing)" 0 "fleetsem_refusing 0 while it serves"

# ---- An evicting policy set while the agents run ----------------------------------
fs a run --slots 1 ev -- sleep 120 >/dev/null 2>"$T/holder-ev.err" & h_ev=$!
check "a job holds the only slot of ev" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{ev}:holders') = 1 ]"
pam_open a ev waiting wait=60s & s_wait=$!
check "a PAM session waits for it" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{ev}:queue') = 1 ]"
rcli CONFIG SET maxmemory-policy allkeys-lru >/dev/null
EMSG="Redis at [^ ]+ runs with maxmemory-policy allkeys-lru, which may evict fleetsem's keys: nothing is granted until it is noeviction \(CONFIG SET maxmemory-policy noeviction"
wait "$s_wait"
is "$(pam_result waiting)" 14 "the waiting PAM session (on_error=allow) is refused: PAM_SESSION_ERR"
like "$(cat "$T/pam-waiting.out")" "^error: fleetsem: session refused: $EMSG" "... told the setting and the fix"
refuses a eviction "$EMSG" "allkeys-lru"
pam_open a ev new
is "$(pam_result new) $(holders ev) $(waiters ev)" "14 1 0" "a new session for ev is refused: Redis counts the one holder"
exp=$(rcli ZRANGE 'fleetsem:{ev}:holders' 0 -1 WITHSCORES | sed -n 2p)
check "the holder is renewed meanwhile" wait_for 10 sh -c \
        "[ \$(redis-cli -s $REDIS_SOCK ZRANGE 'fleetsem:{ev}:holders' 0 -1 WITHSCORES | sed -n 2p) -gt $exp ]"
check "... and runs on" kill -0 "$h_ev"
rcli CONFIG SET maxmemory-policy noeviction >/dev/null
check "noeviction again: fleetsem_refusing 0" wait_for 10 metric_is a fleetsem_refusing 0
kill "$h_ev"; wait "$h_ev" 2>/dev/null

# ---- A newer library loaded while the agents run -----------------------------------
V=$(rcli FCALL fleetsem_version 0 | head -1)
ours=$(python3 "$SRC/embed-lua.py" --library "$SRC/keys.list" "$SRC/scripts.list" "$SRC/replies.list" \
        "$SRC/lua/library.version" "$SRC/lua/prelude")
newer=$(printf %s "$ours" | sed -e "s/return {$V, WAKE_COMMAND/return {99, WAKE_COMMAND/" -e "s/_v$V'/_v99'/")
fs a run --slots 1 lib -- sleep 120 >/dev/null 2>"$T/holder-lib.err" & h_lib=$!
check "a job holds the only slot of lib" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{lib}:holders') = 1 ]"
printf %s "$newer" | rcli -x FUNCTION LOAD REPLACE >/dev/null
is "$(rcli FCALL fleetsem_version 0 | head -1)" 99 "a library of version 99 loaded while a runs"
NMSG="Redis at [^ ]+ holds fleetsem library version 99, newer than this agent's \($V\): this agent is older than the library there and must be upgraded; see fleetsemd\(8\) UPGRADING"
refuses a library-newer "$NMSG" "a newer library"
pam_open a lib newer
is "$(pam_result newer)" 14 "a new session for lib, whose slot a job holds, is refused"
# Its renewals call functions of version $V, which are gone: the holder
# loses its slot at the end of its lease, and run fences its command.
wait "$h_lib"
is "$?" 75 "the holder's job is fenced (run exits 75): its renewals cannot go through"
# (Told by its agent, or by its own timer first on a busy machine.)
like "$(cat "$T/holder-lib.err")" "the slot of lib is lost|lib: lost the slot \\(token [0-9]+\\): Redis unreachable for too long" \
        "... saying it lost the slot"
rcli FUNCTION DELETE fleetsem >/dev/null
check "the newer library gone: a serves again" wait_for 10 redis_state_is a up
is "$(metric a fleetsem_refusing)" 0 "... fleetsem_refusing 0"

# ---- Another text under the agent's version, which it may not replace ---------------
acl_user noload "$T/nl.pw" '~fleetsem:*' '&fleetsem:*' '&fleetsem:{*}:wake' +@all -function '+function|list'
printf %s "${ours//and held + weight <= own_limit then/then}" | rcli -x FUNCTION LOAD REPLACE >/dev/null
run_agent c --redis "redis://noload@127.0.0.1:$PORT" --redis-password-file "$T/nl.pw"
refuses c library-changed "Redis at [^ ]+ holds another text under fleetsem library version $V than this agent's, and this agent may not replace it \(NOPERM[^)]*\): load this agent's with \`fleetsemd --load-library\`" \
        "another text under version $V"
is "$("$FLEETSEMD" --redis "unix:$REDIS_SOCK" --load-library >/dev/null 2>&1; echo $?)" 0 "fleetsemd --load-library puts it right"
check "... and c serves" wait_for 10 redis_state_is c up

# ---- The ACL refuses FCALL ---------------------------------------------------------------
acl_user nofcall "$T/nf.pw" '~fleetsem:*' '&fleetsem:*' '&fleetsem:{*}:wake' +@all -fcall
run_agent d --redis "redis://nofcall@127.0.0.1:$PORT" --redis-password-file "$T/nf.pw"
refuses d NOPERM "FCALL fleetsem_version failed: NOPERM[^:]*: give the agents' Redis user what systemd/redis-acl.conf.example grants" \
        "an ACL without FCALL"

# ---- A wrong password ----------------------------------------------------------------------
printf 'wrong\n' >"$T/wrong.pw" && chmod 600 "$T/wrong.pw"
run_agent e --redis "redis://noload@127.0.0.1:$PORT" --redis-password-file "$T/wrong.pw"
refuses e WRONGPASS "AUTH failed: WRONGPASS[^:]*: set the agents' Redis user and password" "a wrong password"

# ---- A server without Functions ----------------------------------------------------------
start_old_redis
run_agent f --redis "unix:$T/old.sock"
refuses f no-functions "Redis at [^ ]+ has no FCALL \(Redis functions\): fleetsem needs Redis 7\.0 or later" \
        "a server without FCALL"
kill "$(cat "$T/old.pid")"

# ---- Redis gone: on_error applies ---------------------------------------------------------
stop_redis
check "Redis stopped: a takes it for down" wait_for 10 redis_state_is a down
is "$(metric a fleetsem_refusing)" 0 "... an outage: fleetsem_refusing 0"
pam_open a gone gone
is "$(pam_result gone)" 0 "a PAM session with on_error=allow opens (an outage)"
like "$(cat "$T/pam-gone.log")" "allowing session of daemon WITHOUT a fleet slot: Redis at .* is unreachable" \
        "... loudly"
fs a run --slots 1 --no-wait gone -- true 2>/dev/null
is "$?" 69 "run: 69 (unavailable)"
if [ "$ACQUIRE" = true ]; then
        is "$(acquire_in_unit allow "$NSBASE-a" gone)" 0 "acquire --on-error=allow: 0 (the unit starts)"
        is "$(acquire_in_unit deny "$NSBASE-a" gone)" 69 "acquire --on-error=deny: 69"
fi
stop_agents
done_testing
