#!/bin/bash
# The agents' Redis Functions library ("fleetsem", fleetsemd(8), THE
# LIBRARY) on a real redis-server: loaded once for three agents, never
# again by an agent restarted while it is there, loaded again when it is
# deleted under running agents (which go on granting, one holder at a
# time), a newer version refused with "upgrade this agent" (nothing
# granted, requests refused as misconfigured, status says why), and a Redis user that
# may not load it refused with the way out, `fleetsemd --load-library`,
# which loads it; a server without functions (as before Redis 7.0)
# refused by name. Another text under the agents' version (its limit check
# taken out) found by its text and replaced, by an agent and by
# --load-library; another build's text under that version (its own hash)
# loaded while the agents stay connected, found by its hash within a
# renewal period and replaced, said once, no slot lost.
TTL=3s
. "$(dirname "$0")/lib.sh"

SRC=$(cd "$(dirname "$0")/../src/agent/library" && pwd)
PORT=$(free_port)
start_redis --port "$PORT" --bind 127.0.0.1
# cmdstat COMMAND: how many times Redis ran it since the last CONFIG
# RESETSTAT (0 when not at all).
cmdstat() {
        rcli INFO commandstats | tr -d '\r' |
                awk -F'[:=,]' -v c="cmdstat_$1" '$1 == c { n = $3 } END { print n + 0 }'
}
# … less those that failed (FUNCTION LOAD of a library there already:
# refused before anything is compiled).
cmdstat_ok() {
        rcli INFO commandstats | tr -d '\r' |
                awk -F'[:=,]' -v c="cmdstat_$1" '$1 == c { n = $3; for (i = 2; i < NF; i += 2) if ($i == "failed_calls") n -= $(i + 1) } END { print n + 0 }'
}
version() { rcli FCALL fleetsem_version 0 | head -1; }
is "$(rcli FUNCTION LIST LIBRARYNAME fleetsem)" "" "a fresh Redis holds no library"

# ---- Loaded once -----------------------------------------------------------------
rcli CONFIG RESETSTAT >/dev/null
start_agent a
check "agent a is up" wait_for 10 redis_state_is a up
start_agent b
start_agent c
check "agent b is up" wait_for 10 redis_state_is b up
check "agent c is up" wait_for 10 redis_state_is c up
V=$(version)
like "$V" '^[1-9][0-9]*$' "the library is there, version $V"
is "$(rcli FCALL fleetsem_version 0 | sed -n 2p)" PUBLISH "... its text for one server (wake-ups with PUBLISH)"
is "$(cmdstat 'function|load')" 1 "three agents: FUNCTION LOAD ran once"
is "$(cmdstat 'script|load') $(cmdstat evalsha) $(cmdstat eval)" "0 0 0" "... and no SCRIPT LOAD, EVALSHA or EVAL at all"
fs a run --slots 1 --no-wait once -- true
is "$?" 0 "a grants a slot"
like "$(cmdstat fcall)" '^[1-9][0-9]*$' "... through FCALL ($(cmdstat fcall) calls)"

# ---- An agent restarted while the library is there ----------------------------------
rcli CONFIG RESETSTAT >/dev/null
kill -TERM "$(agent_pid a)"; wait "$(agent_pid a)"
AGENT_HOSTS=(b c)
start_agent a
check "agent a restarted is up" wait_for 10 redis_state_is a up
fs a run --slots 1 --no-wait again -- true
is "$?" 0 "... and grants"
is "$(cmdstat 'function|load')" 0 "... having loaded nothing"
like "$(cmdstat fcall)" '^[1-9][0-9]*$' "... having asked the version and granted with FCALL"
is "$(cmdstat 'function|list')" 1 "... and read its text once, to compare it byte for byte"
# A connection lost: the version and hash asked again, the text not read.
rcli CONFIG RESETSTAT >/dev/null
declare -A r0
for h in a b c; do int_of "r0[$h]" "$(metric "$h" fleetsem_redis_reconnects_total)"; done
like "$(rcli CLIENT KILL TYPE normal SKIPME yes)" "^[1-9][0-9]*$" \
        "the agents' connections closed by Redis"
for h in a b c; do
        check "agent $h connects again" until_metric "$h" fleetsem_redis_reconnects_total $((r0[$h] + 1))
        check "... and is up" wait_for 10 redis_state_is "$h" up
done
is "$(cmdstat 'function|list')" 0 "... without reading the library's text (its version and hash say it is its own)"

# ---- Deleted under running agents ------------------------------------------------
job() {
        local host=$1 name=$2
        fs "$host" run --slots 1 --wait 60s "$name" -- sh -c '
                echo "enter $0" >>"$1"
                while [ ! -f "$2" ]; do sleep 0.02; done
                echo "exit $0" >>"$1"' "$host" "$T/events-$name" "$T/go-$name-$host"
}
job a del & ja=$!
check "a's job holds the slot of 'del'" wait_for 10 grep -q '^enter a' "$T/events-del"
# Why an agent sets Redis up again: a call of its found no function, or,
# where it was connecting again meanwhile (a reply later than its command
# timeout, on a busy machine), its set-up found no library. Either is said.
WHY="it has no function fleetsem_[a-z_]+_v$V \(its fleetsem library was deleted, or replaced by another version\): setting it up again|Loading fleetsem's library, version $V, into Redis at [^ ]+ \(it had none\)\."
said_why() { cat "$T/agent-a.log" "$T/agent-b.log" "$T/agent-c.log" | grep -cE "$WHY"; }
int_of why0 "$(said_why)"
said_why_again() { [ "$(said_why)" -gt "$why0" ]; }
rcli CONFIG RESETSTAT >/dev/null
is "$(rcli FUNCTION DELETE fleetsem)" OK "the library deleted while the agents run"
# a's agent renews its holder: its next renewal finds no function.
check "the agents notice on their next call and load it again" wait_for 10 sh -c "[ \"\$(redis-cli -s $REDIS_SOCK FCALL fleetsem_version 0 2>/dev/null | head -1)\" = $V ]"
check "agent a is up again" wait_for 10 redis_state_is a up
is "$(rcli ZCARD 'fleetsem:{del}:holders')" 1 "... its job still holds the slot"
job b del & jb=$!
check "... saying why they set Redis up again" wait_for 10 said_why_again
like "$(cmdstat 'function|load')" '^[1-3]$' "... each at most once ($(cmdstat 'function|load') loads)"
is "$(cmdstat_ok 'function|load')" 1 "... and Redis compiled it once (a load that lost the race was refused: it exists)"
check "b's job waits in line" wait_for 15 sh -c "[ \"\$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{del}:queue')\" = 1 ]"
is "$(rcli ZCARD 'fleetsem:{del}:holders')" 1 "... and there is still one holder"
touch "$T/go-del-a"
check "b's job gets the slot when a's ends" wait_for 20 grep -q '^enter b' "$T/events-del"
touch "$T/go-del-b"
wait "$ja" "$jb"
is "$(tr '\n' ' ' <"$T/events-del")" "enter a exit a enter b exit b " "the jobs ran one at a time"

# ---- Another library of that name ------------------------------------------------
# One without fleetsem_version: a load without REPLACE is refused (it
# exists), the version asked again is missing still: replaced, not asked
# for ever.
rcli CONFIG RESETSTAT >/dev/null
printf '#!lua name=fleetsem\nredis.register_function("other", function() return 1 end)' |
        rcli -x FUNCTION LOAD REPLACE >/dev/null
# (Nobody holds a slot: the first call finds its function missing.)
fs a run --slots 1 --no-wait other -- true 2>/dev/null
check "an agent replaces a library of that name without the version function" \
        wait_for 10 sh -c "[ \"\$(redis-cli -s $REDIS_SOCK FCALL fleetsem_version 0 2>/dev/null | head -1)\" = $V ]"
fs a run --slots 1 --no-wait other -- true
is "$?" 0 "... and grant again"
like "$(cmdstat_ok 'function|load')" '^[1-3]$' "... having replaced it ($(cmdstat_ok 'function|load') loads)"

# ---- Another text under this version -----------------------------------------------
# The library as this build makes it, with the limit check of a grant to
# an empty line taken out, loaded by hand under the agents' own version:
# an agent that connects finds it by its text, says so and loads its own.
ours=$(python3 "$SRC/embed-lua.py" --library "$SRC/keys.list" "$SRC/scripts.list" "$SRC/replies.list" \
        "$SRC/lua/library.version" "$SRC/lua/prelude")
edited=${ours//and held + weight <= own_limit then/then}
check "a text without the limit check, under version $V" [ "$edited" != "$ours" ]
printf %s "$edited" | rcli -x FUNCTION LOAD REPLACE >/dev/null
code() { rcli FUNCTION LIST LIBRARYNAME fleetsem WITHCODE | grep -c 'held + weight <= own_limit then'; }
is "$(version) $(code)" "$V 0" "... loaded in its place"
kill -TERM "$(agent_pid a)"; wait "$(agent_pid a)"
AGENT_HOSTS=(b c)
start_agent a
check "agent a restarted is up" wait_for 10 redis_state_is a up
CMSG="Redis at [^ ]+ holds another text under fleetsem library version $V than this agent's \(its own hash, another text: changed by hand\?\): replacing it with this agent's\."
check "... its journal says it found another text under its version" grep -qE "$CMSG" "$T/agent-a.log"
is "$(version) $(code)" "$V 1" "... and Redis holds the agent's text again"
fs a run --slots 1 changed -- sleep 30 & held=$!
check "a job holds the only slot of 'changed'" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{changed}:holders') = 1 ]"
fs b run --slots 1 --no-wait changed -- true 2>/dev/null
is "$?:$(holders changed)" "75:1" "... and another is refused: one holder"
kill "$held"; wait "$held" 2>/dev/null
# ---- Another build's text under this version, loaded under running agents ------------
# The text of another build under the same version (its limit check taken
# out, its hash its own, as embed-lua.py stamps it) loaded while the agents
# stay connected and a job holds a slot: found by the version and hash
# they ask once a renewal period (a second here), replaced there and then
# (the agents stay up), said once, and the job keeps its slot.
H=$(rcli FCALL fleetsem_version 0 | sed -n 3p)
like "$H" '^[0-9a-f]{64}$' "fleetsem_version returns the text's hash third"
is "$(tail -1 "$SRC/lua/library.version")" "$V $H" "... the one lua/library.version records for version $V (the build checks it is the text's)"
other=${edited//$H/$(printf %s "$edited" | sha256sum | cut -c1-64)}
job a live & jl=$!
check "a's job holds the slot of 'live'" wait_for 10 grep -q '^enter a' "$T/events-live"
r1=$(metric a fleetsem_redis_reconnects_total)
int_of r1 "$r1"
rcli CONFIG RESETSTAT >/dev/null
is "$(printf %s "$other" | rcli -x FUNCTION LOAD REPLACE)" fleetsem \
        "another build's text loaded under version $V, the agents connected"
# headroom: found within one renewal period (1 s with a 3-s lease), 10 s given.
check "... the agents find it by its hash and put theirs back" wait_for 10 sh -c "[ \"\$(redis-cli -s $REDIS_SOCK FCALL fleetsem_version 0 | sed -n 3p)\" = $H ]"
is "$(code)" 1 "... Redis holds the agents' text again"
HMSG="Redis at [^ ]+ holds another text under fleetsem library version $V than this agent's \(another hash: another build's\?\): replacing it with this agent's\."
n=$(cat "$T/agent-a.log" "$T/agent-b.log" "$T/agent-c.log" | grep -cE "$HMSG")
like "$n" '^[1-3]$' "... said in the journal ($n agents)"
for h in a b c; do
        like "$(grep -cE "$HMSG" "$T/agent-$h.log")" '^[01]$' "... at most once by agent $h"
done
is "$(cmdstat_ok 'function|load')" "$((n + 1))" "... replaced once by each agent that said so"
is "$(redis_state a) $(metric a fleetsem_redis_reconnects_total)" "up $r1" "... agent a stayed up, connected all along"
is "$(holders live)" 1 "a's job still holds the slot of 'live'"
fs b run --slots 1 --no-wait live -- true 2>/dev/null
is "$?:$(holders live)" "75:1" "... and another is refused: one holder"
is "$(metric a fleetsem_lost_total)" 0 "... agent a lost nothing"
touch "$T/go-live-a"
wait "$jl"
is "$?" 0 "a's job ran to its end"
is "$(tr '\n' ' ' <"$T/events-live")" "enter a exit a " "... never told it lost its slot"

# fleetsemd --load-library says what it did (a text edited by hand, its
# hash left as it was: read whole).
printf %s "$edited" | rcli -x FUNCTION LOAD REPLACE >/dev/null
out=$("$FLEETSEMD" --redis "unix:$REDIS_SOCK" --load-library 2>&1); rc=$?
is "$rc" 0 "fleetsemd --load-library on another text under its version: exit 0"
like "$out" "fleetsem library version $V loaded \(it had version $V, another text\)" "... saying it replaced it"
is "$(code)" 1 "... and it did"

# ---- A newer library -----------------------------------------------------------------
# The library this build makes, as a later version would have it.
newer=$(python3 "$SRC/embed-lua.py" --library "$SRC/keys.list" "$SRC/scripts.list" "$SRC/replies.list" \
        "$SRC/lua/library.version" "$SRC/lua/prelude" |
        sed -e "s/return {$V, WAKE_COMMAND/return {99, WAKE_COMMAND/" -e "s/_v$V'/_v99'/")
like "$newer" "return \{99, WAKE_COMMAND, " "a library of version 99 made from this one"
printf %s "$newer" | rcli -x FUNCTION LOAD REPLACE >/dev/null
is "$(version)" 99 "... loaded in its place"
MSG="Redis at [^ ]+ holds fleetsem library version 99, newer than this agent's \($V\): this agent is older than the library there and must be upgraded; see fleetsemd\(8\) UPGRADING"
fs a run --slots 1 --no-wait newer -- true 2>/dev/null
check "agent a takes that Redis for down (its call found no function of its version)" wait_for 10 redis_state_is a down
# Down first for the missing function, then, once it connected again and
# read the version, for the newer library.
says_upgrade() { fs a status 2>&1 | grep -qE "$MSG"; }
check "status shows it: this agent must be upgraded" wait_for 10 says_upgrade
out=$(fs a run --slots 1 --no-wait newer -- true 2>&1); rc=$?
is "$rc" 78 "a request is refused as misconfigured (exit 78)"
like "$out" "$MSG" "... saying the agent must be upgraded"
like "$(raw a STATUS)" '^ERROR code=misconfigured ' "... with the error code misconfigured"
is "$(rcli EXISTS 'fleetsem:{newer}:holders')" 0 "nothing was granted on that Redis"
is "$(version)" 99 "the agent left the newer library alone"
check "the journal says it" grep -qE "$MSG" "$T/agent-a.log"
out=$("$FLEETSEMD" --redis "unix:$REDIS_SOCK" --load-library 2>&1); rc=$?
is "$rc" 1 "fleetsemd --load-library refuses to replace a newer library"
like "$out" "holds fleetsem library version 99, newer than this fleetsemd's \($V\): nothing done" "... saying so"
# Back to this version: the agents load their own within their backoff.
rcli FUNCTION DELETE fleetsem >/dev/null
check "the newer library gone, agent a serves again" wait_for 10 redis_state_is a up
is "$(version)" "$V" "... having loaded its own"
check "the journal says it" grep -q "takes this agent's set-up now (its library, version $V, " "$T/agent-a.log"
is "$(grep -cE "$MSG" "$T/agent-a.log")" 1 "... the refusal said once in all"
stop_agents
AGENT_HOSTS=()

# ---- Agents that may not load code -----------------------------------------------------
# refused_with HOST MSG WHAT_DOWN WHAT_STATUS: HOST's agent takes Redis for
# down, and its status and its journal say MSG.
refused_with() {
        check "$3" wait_for 10 redis_state_is "$1" down
        like "$(fs "$1" status 2>&1)" "$2" "$4"
        check "the journal says it" grep -qE "$2" "$T/agent-$1.log"
}
acl_user noload "$T/nl.pw" '~fleetsem:*' '&fleetsem:*' '&fleetsem:{*}:wake' +@all -function '+function|list'
rcli FUNCTION DELETE fleetsem >/dev/null
run_agent d --redis "redis://noload@127.0.0.1:$PORT" --redis-password-file "$T/nl.pw"
LMSG="Redis at [^ ]+ has no fleetsem library version $V, and this agent may not load it \(NOPERM[^)]*\): load it with \`fleetsemd --load-library\`"
refused_with d "$LMSG" "an agent that may not load the library takes Redis for down" \
        "status says to run fleetsemd --load-library"
out=$("$FLEETSEMD" --redis "unix:$REDIS_SOCK" --load-library 2>&1); rc=$?
is "$rc" 0 "fleetsemd --load-library, as a user that may: exit 0"
like "$out" "fleetsem library version $V loaded \(it had none\)" "... saying what it did"
check "agent d comes up" wait_for 10 redis_state_is d up
fs d run --slots 1 --no-wait loaded -- true
is "$?" 0 "... and grants"
out=$("$FLEETSEMD" --redis "unix:$REDIS_SOCK" --load-library 2>&1); rc=$?
is "$rc" 0 "fleetsemd --load-library again: exit 0"
like "$out" "fleetsem library version $V is there already, its text this fleetsemd's; nothing done" "... and nothing done"
# Another build's text under its version while it runs: found within a
# renewal period, and, since it may not replace it, refused as
# library-changed with the way out, until --load-library puts it right.
is "$(printf %s "$other" | rcli -x FUNCTION LOAD REPLACE)" fleetsem "another build's text loaded under agent d, which may not load"
KMSG="Redis at [^ ]+ holds another text under fleetsem library version $V than this agent's, and this agent may not replace it \(NOPERM[^)]*\): load this agent's with \`fleetsemd --load-library\`"
refused_with d "$KMSG" "agent d takes Redis for down" "status says to run fleetsemd --load-library"
like "$(fs d run --slots 1 --no-wait loaded -- true 2>&1)" "$KMSG" "... and a request is refused with it"
out=$("$FLEETSEMD" --redis "unix:$REDIS_SOCK" --load-library 2>&1); rc=$?
is "$rc" 0 "fleetsemd --load-library: exit 0"
like "$out" "fleetsem library version $V loaded \(it had version $V, another text\)" "... replacing it"
check "agent d comes up again" wait_for 10 redis_state_is d up

# ---- A server without functions -----------------------------------------------------------
# Redis before 7.0 (not installed here) answers FCALL as an unknown
# command; so does this one, its FCALL renamed away.
start_old_redis
run_agent e --redis "unix:$T/old.sock"
OMSG="Redis at [^ ]+ has no FCALL \(Redis functions\): fleetsem needs Redis 7\.0 or later, or Valkey 7\.2 or later"
refused_with e "$OMSG" "an agent takes a server without FCALL for down" "status names the versions needed"
out=$("$FLEETSEMD" --redis "unix:$T/old.sock" --load-library 2>&1); rc=$?
is "$rc" 1 "fleetsemd --load-library there: exit 1"
like "$out" "has no FCALL \(Redis functions\): fleetsem needs Redis 7\.0 or later, or Valkey 7\.2 or later" "... saying why"
stop_agents
AGENT_HOSTS=()
kill "$(cat "$T/old.pid")"
done_testing
