#!/bin/bash
# pam_fleetsem.so through Linux-PAM itself: pam_wrapper points PAM at a
# service directory of the test's own, and pam-session opens sessions the
# way a login program does, holding each open until told to close it. Runs
# as any user: sessions are for existing system users (daemon, bin, sys),
# and for the users of a passwd file of the test's own (nss_wrapper) whose
# names no slot name may hold as they are.
. "$(dirname "$0")/lib.sh"
require pamtester
pam_setup
NSSWRAP=$(ls /usr/lib/*/libnss_wrapper.so /usr/lib/libnss_wrapper.so 2>/dev/null | head -n1)
[ -n "$NSSWRAP" ] || require libnss_wrapper.so
ME=$(id -un)
trap '' PIPE    # telling a session that already ended to close is no error

mkdir -p "$T/pam.d"
# The agent trusts the test's user with every name (root needs no rule).
printf 'allow = * %s\n' "$ME" >"$T/agent.conf"
start_redis
start_agent h1 --config "$T/agent.conf"
NS="$NSBASE-h1"

# service NAME ARGS...: a PAM service whose session stack is pam_fleetsem.
service() {
        local name=$1; shift
        echo "session required $PAM_FLEETSEM namespace=$NS agent_user=$ME $*" >"$T/pam.d/$name"
}
pamenv() { LD_PRELOAD=$PRELOAD PAM_WRAPPER=1 PAM_WRAPPER_SERVICE_DIR="$T/pam.d" PAM_WRAPPER_DEBUGLEVEL=1 "$@"; }

# open ID SERVICE USER [pam-session options]: opens a session and keeps it
# open; waits for pam_open_session's result (start: does not wait).
open() {
        start "$@"
        wait_for 15 grep -q '^open:' "$T/out-$1" || echo "# session $1 did not answer"
}
start() {
        local id=$1 fd; shift
        mkfifo "$T/in-$id"
        # exec: $! is the session's own process, for kill -9
        (LD_PRELOAD=$PRELOAD PAM_WRAPPER=1 PAM_WRAPPER_SERVICE_DIR="$T/pam.d" PAM_WRAPPER_DEBUGLEVEL=1 exec "$PAM_SESSION" "$@") \
                <"$T/in-$id" >"$T/out-$id" 2>"$T/pam-$id.log" &
        eval "SESS_PID_$id=$!"
        exec {fd}>"$T/in-$id"
        eval "SESS_FD_$id=$fd"
}
# result ID: pam_open_session's return code (0 success, 6 PAM_PERM_DENIED, 14 PAM_SESSION_ERR)
result() { sed -n 's/^open: \([0-9]*\) .*/\1/p' "$T/out-$1"; }
said() { sed -n 's/^\(error\|info\): //p' "$T/out-$1"; }
close() {
        local fd
        fd=$(eval "echo \$SESS_FD_$1")
        echo close >&"$fd" 2>/dev/null
        exec {fd}>&-
        wait_for 5 sh -c "! kill -0 $(eval "echo \$SESS_PID_$1") 2>/dev/null"
}
# One session, opened and closed at once; its output.
once() { local id=$1; shift; open "$id" "$@"; close "$id"; }

# --- N sessions, the N+1st refused with the message ---------------------------------
service ssh slots=2
open a1 ssh daemon
open a2 ssh daemon
is "$(result a1) $(result a2)" "0 0" "two sessions for daemon open"
like "$(cat "$T/out-a1")" $'env: FLEETSEM_NAME=login:daemon' "the session's environment names the slot (pam_putenv)"
a1_lease=$(sed -n 's/^env: FLEETSEM_LEASE=//p' "$T/out-a1")
a1_token=$(record login:daemon "$a1_lease" 4)
like "$(cat "$T/out-a1")" "env: FLEETSEM_TOKEN=$a1_token"'$' "... with its fencing token, the one Redis granted"
like "$(cat "$T/out-a1")" 'env: FLEETSEM_LEASE=[0-9a-f]{32}' "... and lease"
is "$(holders login:daemon)" 2 "Redis holds 2 slots of login:daemon"
open a3 ssh daemon
is "$(result a3)" 6 "the third is refused: PAM_PERM_DENIED"
like "$(said a3)" "^fleetsem: all 2 sessions for daemon are in use \(h1 since [0-9]{2}:[0-9]{2}, h1 since [0-9]{2}:[0-9]{2}\); try again later\.$" \
        "the user is told why, and by whom"
is "$(holders login:daemon) $(waiters login:daemon)" "2 0" "the refused one left nothing in Redis"
open b1 ssh bin
is "$(result b1)" 0 "another user is not affected"
close b1

# --- closing one lets the next in ----------------------------------------------------
close a1
is "$(holders login:daemon)" 1 "close_session released at once"
open a4 ssh daemon
is "$(result a4)" 0 "the next session opens"

# --- PAM_SILENT ------------------------------------------------------------------
open a5 ssh daemon --silent
is "$(result a5) [$(said a5)]" "6 []" "PAM_SILENT: refused without a word to the user"

# --- wait= queues and succeeds when one closes ------------------------------------------
service ssh-wait slots=2 wait=10s
start w1 ssh-wait daemon
check "while full, wait= queues" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{login:daemon}:queue') = 1 ]"
like "$(said w1)" "waiting \(position 1\)" "the user is told it waits"
t0=$(now_ms)
close a2
check "it gets the session when one closes" wait_for 5 grep -q '^open: 0 ' "$T/out-w1"
is "$(result w1)" 0 "... PAM_SUCCESS after waiting"
close a4
close w1
is "$(holders login:daemon)" 0 "all released"

# --- kill -9 of the process that opened the session ------------------------------------
open k1 ssh daemon
is "$(holders login:daemon)" 1 "k1 holds"
kill -KILL "$SESS_PID_k1"
check "kill -9 of the session's process: released at once" wait_for 1 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{login:daemon}:holders') = 0 ]"

# --- exempt users and groups, root ---------------------------------------------------
service one slots=1 name=shared exempt_user=bin exempt_group=sys
open x1 one daemon
is "$(result x1)" 0 "daemon takes the only slot of shared"
once x2 one bin
is "$(result x2)" 0 "exempt_user=bin passes"
once x3 one sys
is "$(result x3)" 0 "exempt_group=sys passes (sys' primary group)"
once x4 one root
is "$(result x4)" 0 "root passes (exempt unless noexempt_root)"
is "$(holders shared)" 1 "exempt sessions take no slot"
service one-strict slots=1 name=shared noexempt_root
once x5 one-strict root
is "$(result x5)" 6 "noexempt_root: root counts like anyone"
close x1

# --- every template escape --------------------------------------------------------------
service tmpl slots=5 'name=%s.%u.%g.%h.%r'
open t1 tmpl daemon --rhost 192.0.2.7
expect="tmpl.daemon.$(id -gn daemon).$(hostname).192.0.2.7"
is "$(result t1)" 0 "name=%s.%u.%g.%h.%r opens"
is "$(holders "$expect")" 1 "the slot is $expect"
close t1
# A name that cannot be formed refuses the session, whatever on_error= says
# (it governs outages of the agent and Redis): it must not pass uncounted.
service tmpl-pct slots=5 'name=a%%b'
once t2 tmpl-pct daemon
is "$(result t2)" 14 "%% gives a percent sign, which no name may hold: refused, not another name"
service tmpl-bad slots=5 'name=x%q'
once t3 tmpl-bad daemon
is "$(result t3)" 14 "an unknown escape: refused"
like "$(cat "$T/pam-t3.log")" "refusing session of daemon: no slot name \(name=x%q\): unknown %-escape" "... logged"
service tmpl-empty slots=5 'name=%r'
once t4 tmpl-empty daemon
is "$(result t4)" 14 "an expansion that is empty (no remote host): refused with on_error=allow"
is "$(said t4)" "fleetsem: cannot name this session's slot (the name is empty); session refused." \
        "... and the user is told why"
once t5 tmpl-empty daemon --silent
is "$(result t5) [$(said t5)]" "14 []" "... PAM_SILENT: refused without a word to the user"

# --- names from what users and directories control -------------------------------
# Users of a passwd file of the test's own (nss_wrapper), with names no slot
# name holds as they are, and two entries of another case for one uid; remote
# hosts with a zone index and longer than a name. Each identity opens 3
# sessions of a 1-slot name while the others are held: exactly 1 is admitted.
cat >"$T/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
NOBODY:x:65534:65534:nobody again:/nonexistent:/usr/sbin/nologin
alice:x:5001:5000:Alice:/nonexistent:/usr/sbin/nologin
Alice:x:5001:5000:Alice, as a case-insensitive directory gives her:/nonexistent:/usr/sbin/nologin
build$:x:5002:5000:a machine account:/nonexistent:/usr/sbin/nologin
DOMAIN\user:x:5003:5000:a winbind user:/nonexistent:/usr/sbin/nologin
PASSWD
printf 'root:x:0:\ndaemon:x:1:\nnogroup:x:65534:\nfleet:x:5000:\n' >"$T/group"
PRELOAD_PLAIN=$PRELOAD
PRELOAD="$PRELOAD $NSSWRAP"
export NSS_WRAPPER_PASSWD="$T/passwd" NSS_WRAPPER_GROUP="$T/group"

# sessions PREFIX SERVICE USER [options] [-- USER [options]]...: one open
# session each, all held; prints how many were admitted.
sessions() {
        local prefix=$1 svc=$2 i=0 args=() a; shift 2
        for a in "$@" --; do
                if [ "$a" = -- ]; then
                        i=$((i + 1)); open "$prefix$i" "$svc" "${args[@]}"; args=()
                else
                        args+=("$a")
                fi
        done
        SESSIONS_OPENED=$i
}
admitted() { local i n=0; for i in $(seq 1 "$SESSIONS_OPENED"); do [ "$(result "$1$i")" = 0 ] && n=$((n + 1)); done; echo $n; }
results() { local i r=(); for i in $(seq 1 "$SESSIONS_OPENED"); do r+=("$(result "$1$i")"); done; echo "${r[*]}"; }
close_all() { local i; for i in $(seq 1 "$SESSIONS_OPENED"); do close "$1$i"; done; }

service hostile slots=1
sessions m hostile 'build$' -- 'build$' -- 'build$'
is "$(results m)" "0 6 6" "build\$: 1 of 3 sessions admitted on a 1-slot limit"
is "$(holders login:build_24)" 1 "... its name is login:build_24 ('\$' encoded)"
like "$(said m2)" "all 1 sessions for build\\\$ are in use" "... the user is told by the account's name"
close_all m
sessions w hostile 'DOMAIN\user' -- 'DOMAIN\user' -- 'DOMAIN\user'
is "$(results w)" "0 6 6" "DOMAIN\\user: 1 of 3 admitted"
is "$(holders 'login:DOMAIN_5Cuser')" 1 "... its name is login:DOMAIN_5Cuser"
close_all w
sessions c hostile alice -- Alice -- alice -- Alice
is "$(results c)" "0 6 6 6" "alice and Alice (one uid): 1 of 4 admitted"
is "$(holders login:alice) $(holders login:Alice)" "1 0" "... one name, login:alice, the uid's own entry"
close_all c
sessions n hostile NOBODY -- nobody -- NOBODY
is "$(results n)" "0 6 6" "NOBODY and nobody (one uid): 1 of 3 admitted"
is "$(holders login:nobody) $(holders login:NOBODY)" "1 0" "... as login:nobody"
close_all n
service uid slots=1 name=uid:%U
sessions i uid Alice -- alice
is "$(results i)" "0 6" "name=uid:%U: Alice and alice share uid:5001"
is "$(holders uid:5001)" 1 "... the name is the uid"
close_all i
once g1 hostile ghost
is "$(result g1)" 14 "a user NSS does not know: refused with on_error=allow"
is "$(said g1)" "fleetsem: cannot name this session's slot (no such user); session refused." "... and told why"
printf -v ghost 'gh\nost\033[2J%0300d' 0
once g2 hostile "$ghost"
like "$(cat "$T/pam-g2.log")" 'refusing session of gh\\nost\\x1b\[2J0+: no slot name' "... logged escaped and cut short"

service remote slots=1 'name=ssh:%r'
sessions r remote daemon --rhost 'fe80::1%eth0' -- daemon --rhost 'fe80::1%eth0' -- daemon --rhost 'fe80::1%eth0'
is "$(results r)" "0 6 6" "rhost fe80::1%eth0: 1 of 3 admitted"
is "$(holders 'ssh:fe80::1_25eth0')" 1 "... its name is ssh:fe80::1_25eth0"
close_all r
long=$(printf 'h%.0s' $(seq 1 299))
long1=${long}1 long2=${long}2
short1="ssh:$(printf 'h%.0s' $(seq 1 30))__$(printf '%s' "$long1" | sha256sum | cut -c1-32)"
sessions l remote daemon --rhost "$long1" -- daemon --rhost "$long1" -- daemon --rhost "$long1" -- daemon --rhost "$long2"
is "$(results l)" "0 6 6 0" "300-character rhosts: 1 of 3 alike admitted, and the one that differs in its last byte"
is "$(holders "$short1")" 1 "... named by 30 characters and the SHA-256 of the whole ($short1)"
close_all l
long216=$(printf 'x%.0s' $(seq 1 216))
sessions k remote daemon --rhost "$long216" -- daemon --rhost "$long216"
is "$(admitted k)" 1 "a 216-character rhost: 1 of 2 admitted"
close_all k
service remote-user slots=1 'name=%u@%r'
sessions b remote-user 'build$' --rhost 'fe80::1%eth0' -- 'build$' --rhost 'fe80::1%eth0'
is "$(results b)" "0 6" "name=%u@%r for build\$ from fe80::1%eth0: 1 of 2 admitted"
is "$(holders 'build_24@fe80::1_25eth0')" 1 "... as build_24@fe80::1_25eth0"
close_all b
PRELOAD=$PRELOAD_PLAIN
unset NSS_WRAPPER_PASSWD NSS_WRAPPER_GROUP

# --- unknown and malformed arguments ----------------------------------------------------
service unknown slots=1 name=unk frobnicate=yes
once u1 unknown daemon
is "$(result u1)" 0 "an unknown argument is ignored"
like "$(cat "$T/pam-u1.log")" 'unknown option "frobnicate" ignored' "... and logged"
service malformed slots=two name=mal
once u2 malformed daemon
is "$(result u2)" 14 "slots=two with on_error=allow: refused (a bad configuration is no outage)"
like "$(cat "$T/pam-u2.log")" 'bad configuration: slots=two: expected a number' "... the log says what is wrong"
service malformed-deny slots=two name=mal on_error=deny
once u3 malformed-deny daemon
is "$(result u3)" 14 "slots=two with on_error=deny: refused"
# slots= may be left out when the name has a fleet limit (fleetsem fleet-limit).
service noslots name=mal on_error=deny
once u4 noslots daemon
is "$(result u4)" 14 "slots= missing and no fleet limit: refused with on_error=deny"
like "$(cat "$T/pam-u4.log")" 'no fleet limit is set for this name' "... the log says so"
# (mal is no template: one slot name for every user.)
if prereq "root, to set a fleet limit" [ "$(id -u)" = 0 ]; then
        fs h1 fleet-limit mal 1 >/dev/null
        is "$?" 0 "root sets a fleet limit of 1 on mal"
        open u4b noslots daemon
        is "$(result u4b)" 0 "slots= missing with a fleet limit: the session opens"
        once u4c noslots daemon
        is "$(result u4c)" 6 "... and holds the one slot: another is refused (PAM_PERM_DENIED)"
        close u4b
        fs h1 fleet-limit mal none >/dev/null
fi
# weight=: each session takes that many units of the limit.
service weighted slots=3 weight=2 name=wtd
open wt1 weighted daemon
is "$(result wt1)" 0 "weight=2 of slots=3: a session opens"
once wt2 weighted daemon
is "$(result wt2)" 6 "... a second does not fit (2 + 2 > 3): refused (PAM_PERM_DENIED)"
close wt1
service heavy slots=2 weight=3 name=wtd on_error=deny
once wt3 heavy daemon
is "$(result wt3)" 14 "weight= above slots=: a configuration error, refused with on_error=deny"
like "$(cat "$T/pam-wt3.log")" 'weight=3 is above slots=2: it would never fit' "... the log says so"
service badwait slots=1 wait=soon on_error=deny
once u5 badwait daemon
like "$(cat "$T/pam-u5.log")" 'wait=soon: expected a duration' "wait=soon: a malformed duration is named"

# --- conf=FILE: the same keys in a file -----------------------------------------------
cat >"$T/fleetsem-pam.conf" <<EOF
# pam_fleetsem options
slots = 1
name = fromfile:%u
exempt_user = bin
EOF
service conf "conf=$T/fleetsem-pam.conf"
open c1 conf daemon
once c2 conf daemon
is "$(result c1) $(result c2)" "0 6" "conf=FILE: slots and name from the file"
is "$(holders fromfile:daemon)" 1 "... name=fromfile:%u"
once c3 conf bin
is "$(result c3)" 0 "... exempt_user from the file"
close c1
printf 'slots = 1\nwait = soon\n' >"$T/bad-pam.conf"
service conf-bad "conf=$T/bad-pam.conf" on_error=deny
once c4 conf-bad daemon
like "$(cat "$T/pam-c4.log")" "bad-pam.conf:2: wait: expected a duration" "a bad file is reported as FILE:LINE"
is "$(result c4)" 14 "... and refused"

# --- pamtester, unmodified --------------------------------------------------------
service ssh slots=2
out=$(pamenv pamtester -v ssh daemon open_session close_session 2>&1)
like "$out" "successfully opened a session" "pamtester opens a session through the module"
open p1 ssh daemon
open p2 ssh daemon
out=$(pamenv pamtester ssh daemon open_session 2>&1)
like "$out" "fleetsem: all 2 sessions for daemon are in use" "pamtester sees the refusal message"
close p1
close p2

# --- Redis down / agent down / agent hung, with on_error=allow and deny ---------------------
service allow slots=1 name=err
service deny slots=1 name=err on_error=deny
stop_redis
once e1 allow daemon
is "$(result e1)" 0 "Redis down, on_error=allow: the session opens"
like "$(cat "$T/pam-e1.log")" "allowing session of daemon WITHOUT a fleet slot: Redis .* unreachable" "... logged loudly"
once e2 deny daemon
is "$(result e2)" 14 "Redis down, on_error=deny: refused"
like "$(said e2)" "fleetsem: cannot check the session limit \(Redis .* unreachable" "... telling the user why"
start_redis

echo "session required $PAM_FLEETSEM namespace=$NSBASE-nobody agent_user=$ME slots=1" >"$T/pam.d/noagent"
echo "session required $PAM_FLEETSEM namespace=$NSBASE-nobody agent_user=$ME slots=1 on_error=deny" >"$T/pam.d/noagent-deny"
once n1 noagent daemon
is "$(result n1)" 0 "no agent, on_error=allow: the session opens"
like "$(cat "$T/pam-n1.log")" "WITHOUT a fleet slot: no agent on @$NSBASE-nobody/agent" "... logged"
once n2 noagent-deny daemon
is "$(result n2)" 14 "no agent, on_error=deny: refused"

# An "agent" that accepts and never answers.
python3 "$(dirname "$0")/agent-hung.py" "$NSBASE-hung" &
wait_for 5 agent_listening "$NSBASE-hung"
echo "session required $PAM_FLEETSEM namespace=$NSBASE-hung agent_user=$ME slots=1" >"$T/pam.d/hung"
echo "session required $PAM_FLEETSEM namespace=$NSBASE-hung agent_user=$ME slots=1 on_error=deny" >"$T/pam.d/hung-deny"
t0=$(now_ms); once h1 hung daemon; t1=$(now_ms)
is "$(result h1)" 0 "hung agent, on_error=allow: the session opens"
check "... within the bound ($((t1 - t0)) ms, 2 s connect timeout)" [ $((t1 - t0)) -lt 4000 ]
t0=$(now_ms); once h2 hung-deny daemon; t1=$(now_ms)
is "$(result h2)" 14 "hung agent, on_error=deny: refused"
check "... within the bound ($((t1 - t0)) ms)" [ $((t1 - t0)) -lt 4000 ]
echo "session required $PAM_FLEETSEM namespace=$NSBASE-hung agent_user=$ME slots=1 wait=1s on_error=deny" >"$T/pam.d/hung-wait"
t0=$(now_ms); open h3 hung-wait daemon; t1=$(now_ms); close h3
is "$(result h3)" 14 "hung agent, wait=1s: refused"
check "... within wait= + 2 s ($((t1 - t0)) ms)" [ $((t1 - t0)) -lt 3500 ]

# --- a stopped agent, its listen backlog filled; a squatter ------------------------------
# The PAM session has no loop of its own: it must never hang on the agent.
# Anyone may fill the backlog of a stopped agent: as nobody when we can.
NOBODY=()
[ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && id nobody >/dev/null 2>&1 &&
        NOBODY=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
PYN=$(command -v /usr/bin/python3 || command -v python3)
service stop-wait slots=1 name=stopped wait=1s on_error=deny
service stop-allow slots=1 name=stopped wait=1s
agent=$(agent_pid h1)
kill -STOP "$agent"
t0=$(now_ms); open s1 stop-wait daemon; t1=$(now_ms); close s1
is "$(result s1)" 14 "stopped agent, wait=1s, on_error=deny: refused"
check "... within wait= + 2 s ($((t1 - t0)) ms)" [ $((t1 - t0)) -lt 3500 ]
"${NOBODY[@]}" "$PYN" "$(dirname "$0")/fill-backlog.py" "$NS" >"$T/fill.out" &
filler=$!
check "${NOBODY:+nobody }fills the stopped agent's backlog" wait_for 10 grep -q '^full [0-9]' "$T/fill.out"
t0=$(now_ms); open s2 stop-wait daemon; t1=$(now_ms); close s2
is "$(result s2)" 14 "stopped agent, full backlog, on_error=deny: refused"
check "... within wait= + 2 s ($((t1 - t0)) ms)" [ $((t1 - t0)) -lt 3500 ]
# Root reaches the agent on a socket of its own, which nobody's connections
# cannot fill: there the stopped agent takes the connection and says nothing.
if [ "$(id -u)" = 0 ]; then
        like "$(cat "$T/pam-s2.log")" "the agent on @$NS/agent does not answer" "... logged with the reason (root's own socket took the connection)"
else
        like "$(cat "$T/pam-s2.log")" "takes no connections \(stopped, or its queue is full\)" "... logged with the reason"
fi
t0=$(now_ms); open s3 stop-allow daemon; t1=$(now_ms); close s3
is "$(result s3)" 0 "stopped agent, full backlog, on_error=allow: the session opens"
check "... within wait= + 2 s ($((t1 - t0)) ms)" [ $((t1 - t0)) -lt 3500 ]
kill "$filler"; wait "$filler" 2>/dev/null
kill -CONT "$agent"
if [ ${#NOBODY[@]} -gt 0 ]; then
        "${NOBODY[@]}" "$PYN" "$(dirname "$0")/agent-hung.py" "$NSBASE-squat" &
        squatter=$!
        wait_for 5 agent_listening "$NSBASE-squat"
        echo "session required $PAM_FLEETSEM namespace=$NSBASE-squat agent_user=$ME slots=1 wait=1s on_error=deny" >"$T/pam.d/squat"
        t0=$(now_ms); open q1 squat daemon; t1=$(now_ms); close q1
        is "$(result q1)" 14 "a squatter (nobody) on the agent's name, on_error=deny: refused"
        check "... at once ($((t1 - t0)) ms)" [ $((t1 - t0)) -lt 1500 ]
        like "$(cat "$T/pam-q1.log")" "not a trusted agent" "... logged: not a trusted agent"
        kill "$squatter"; wait "$squatter" 2>/dev/null
fi

# --- the limit in force, from an agent that says it -------------------------------------
python3 "$(dirname "$0")/fake-agent.py" "$NSBASE-lim" "QUEUED position=1 held=1 slots=3 limit=1" \
        "DENIED reason=timeout position=1 held=1 slots=3 limit=1" >"$T/fake.out" &
fake=$!
wait_for 5 grep -q listening "$T/fake.out"
echo "session required $PAM_FLEETSEM namespace=$NSBASE-lim agent_user=$ME slots=3 name=mixed wait=1s" >"$T/pam.d/lim"
open l1 lim daemon
close l1
kill "$fake"; wait "$fake" 2>/dev/null
is "$(result l1)" 6 "refused"
is "$(said l1 | grep -c 'limited')" 1 "the user is told the limit in force once"
like "$(said l1)" "^fleetsem: mixed is limited to 1 at once by its current holders or its fleet limit \(this service asks for 3\)\.$" \
        "... in these words"
like "$(said l1)" "fleetsem: all 1 sessions of mixed are in use" "... and the refusal counts the limit in force"

done_testing
