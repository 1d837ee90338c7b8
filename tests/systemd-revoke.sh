#!/bin/bash
# A revoked job is gone before its slot is granted elsewhere, under a real
# systemd: two booted hosts, one Redis, a 6-s lease. On h1 a unit with
# `fleetsem acquire --on-lost=stop`, then an ssh login session through
# pam_fleetsem.so, each a job that traps SIGTERM (the session SIGHUP too)
# and runs on, holding a FIFO whose close the test takes as the end of its
# last process (end_fifo); on h2 its successor, a `fleetsem run` waiting
# for the same slot, which writes down when it starts. Root on h2 revokes
# the holder: the job outlives its SIGTERM, and the successor starts after
# the job's end, on the one clock the hosts share; the agent killed it
# (its journal), not the unit's TimeoutStopSec= of 90 s. Then the same of
# a unit revoked while its agent was away, and of a session whose agent
# restarted since it began, and of jobs being stopped as their agent
# restarts.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-nspawn.sh"
: "${PAM_FLEETSEM:?path to pam_fleetsem.so}"
require ssh-keygen

TTL=6s
PAMDIR=/lib/$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)/security
NS_BINDS=(--bind-ro="$PAM_FLEETSEM:$PAMDIR/pam_fleetsem.so")
start_redis
ssh-keygen -q -t ed25519 -N '' -f "$T/shared/id_test" >/dev/null || bail "ssh-keygen failed"
ns_boot h1 h2
S=/run/fleetsem-test            # $T/shared, as the hosts see it

# ordered WHAT [SECONDS]: the job trapped its SIGTERM and ran on (WHAT-term), ended
# (WHAT-end, from its FIFO) and only then its successor started
# (WHAT-succ), each in ms on the clock the hosts share; and, exactly, the
# successor found the job's lock free when it started (WHAT-lock: the job
# holds a flock(2) that its last process' end lets go, which no clock or
# reader's wake-up can blur). SECONDS: the waits for the job's end and
# its successor's start, 20 unless given (a session's SIGKILL comes at
# its lease's end).
ordered() {
        local what=$1 wait=${2:-20} term end succ
        check "$what: the job ended" wait_for "$wait" test -s "$T/$what-end"
        check "$what: its successor started" wait_for "$wait" test -s "$T/shared/$what-seen"
        if [ ! -s "$T/$what-end" ] || [ ! -s "$T/shared/$what-succ" ]; then
                not_ok "$what: the job's end and its successor's start are known"
                return
        fi
        int_of end "$(cat "$T/$what-end")"
        int_of succ "$(cat "$T/shared/$what-succ")"
        # (A LOST heard late, on a busy machine, leaves less than the job's
        # 0.2 s sleep between SIGTERM and SIGKILL: killed before its trap
        # ran, it has no SIGTERM to show. The order below is the verdict.)
        if [ -s "$T/shared/$what-term" ]; then
                int_of term "$(head -n1 "$T/shared/$what-term")"
                echo "# $what: SIGTERM trapped at $term, the job's last process gone at $end, its successor in at $succ ($((succ - end)) ms after)"
                check "$what: the job ran on past its SIGTERM ($((end - term)) ms)" [ "$end" -gt "$term" ]
        else
                echo "# $what: killed before its SIGTERM trap ran; its last process gone at $end, its successor in at $succ ($((succ - end)) ms after)"
        fi
        is "$(cat "$T/shared/$what-seen")" free "$what: its successor started after the job's last process was gone (its lock free)"
}

# cursor HOST: where HOST's journal ends now (for --after-cursor=).
cursor() { journal "$1" -n 1 --show-cursor -o cat | sed -n 's/^-- cursor: //p'; }

# successor NAME WHAT: root on h2 waits for a slot of NAME (1 at once),
# notes when it is in, and whether the job's lock was free then.
successor() {
        ns h2 fleetsem run --slots 1 "$1" -- sh -c "date +%s%3N >$S/$2-succ
                if flock -n $S/$2-lock true; then echo free; else echo busy; fi >$S/$2-seen" >"$T/$2-run.log" 2>&1 &
        check "$2: its successor waits on h2" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{$1}:queue') = 1 ]"
}

# held_unit NAME WHAT: on h1, NAME.service with --on-lost=stop, a job that
# traps SIGTERM and runs on (WHAT-term its SIGTERMs, WHAT-fifo its end,
# WHAT-lock its flock), started and holding NAME's slot.
held_unit() {
        ns_unit h1 "$1.service" <<EOF
[Service]
ExecStart=/bin/sh -c 'exec 7>$S/$2-fifo 9>$S/$2-lock; flock 9; trap "date +%%s%%3N >>$S/$2-term" TERM; while :; do sleep 0.2; done'
TimeoutStopSec=90s
EOF
        ns h1 fleetsem limit --on-lost=stop --name="$1" "$1.service" 1 >"$T/limit-$1.log" 2>&1
        is "$?" 0 "h1: fleetsem limit --on-lost=stop $1.service 1"
        end_fifo "$T/shared/$2-fifo" "$T/$2-end"
        ns h1 systemctl start "$1.service"
        is "$(holders "$1")" 1 "h1's $1.service holds the slot"
}

# --- a unit with acquire --on-lost=stop ----------------------------------------------
held_unit stubborn unit
successor stubborn unit
ns h2 fleetsem revoke --reason "unit test" "$(rcli ZRANGE 'fleetsem:{stubborn}:holders' 0 0)" >"$T/revoke-unit.log" 2>&1
is "$?" 0 "root on h2 revokes it"
sed 's/^/# revoke said: /' "$T/revoke-unit.log"
ordered unit
like "$(journal h1 -u fleetsemd.service)" "Killed what was left of stubborn.service \(SIGKILL to its control group\)" \
        "h1's agent killed the unit's control group"
result=$(ns_prop h1 stubborn.service Result)
check "... before systemd's own stop timeout (Result=$result)" [ "$result" != timeout ]
state=$(ns_prop h1 stubborn.service ActiveState)
check "... and it is stopped (ActiveState=$state)" [ "$state" != active ]

# --- a unit that stops at its SIGTERM, then runs again ------------------------------
# Its kill goes with its lease: once it stopped (its anchor closed with its
# file descriptor store) its next run is another job, which the kill timed
# for the first may not reach.
ns_unit h1 prompt.service <<EOF
[Service]
ExecStart=/bin/sh -c 'while :; do sleep 0.2; done'
EOF
ns h1 fleetsem limit --on-lost=stop --name=prompt prompt.service 1 >"$T/limit-prompt.log" 2>&1
is "$?" 0 "h1: fleetsem limit --on-lost=stop prompt.service 1"
ns h1 systemctl start prompt.service
is "$(holders prompt)" 1 "h1's prompt.service holds the slot"
int_of revoked "$(rcli TIME | head -n1)"
ns h2 fleetsem revoke --reason "unit test" "$(rcli ZRANGE 'fleetsem:{prompt}:holders' 0 0)" >"$T/revoke-prompt.log" 2>&1
is "$?" 0 "root on h2 revokes it"
# (Stopped whole: not while deactivating, when a start would wait for the
# stop and ask while the first run's lease is still here.)
inactive() { case $(ns_prop h1 "$1" ActiveState) in inactive|failed) return 0 ;; esac; return 1; }
check "prompt.service stops at its SIGTERM" wait_for 20 inactive prompt.service
ns h1 systemctl start prompt.service
check "its next run is active" wait_for 20 ns h1 systemctl -q is-active prompt.service
pid=$(ns_prop h1 prompt.service MainPID)
# The first run's lease is over (a lease after the revoke, on Redis' clock),
# and any kill timed for it with it.
check "the first run's lease is over (Redis' clock)" wait_for 30 sh -c "[ \$(redis-cli -s $REDIS_SOCK TIME | head -n1) -gt $((revoked + 8)) ]"
is "$(ns_prop h1 prompt.service MainPID)" "$pid" "its next run is the same process: not killed"
is "$(ns_prop h1 prompt.service ActiveState)" active "... and active"
journal h1 -u fleetsemd.service >"$T/journal-prompt.log"
log_lacks "$T/journal-prompt.log" "Killed what was left of prompt\.service \(SIGKILL to its control group\)" \
        "Stopping prompt\.service: it lost its fleet slot\." "h1's agent stopped the first run and killed nothing of prompt.service"
ns h1 systemctl stop prompt.service

# --- an ssh login session -------------------------------------------------------------
ns h1 sh -c "
        useradd -m -s /bin/bash alice || exit 1
        install -d -m 700 -o alice -g alice /home/alice/.ssh
        install -m 600 -o alice -g alice $S/id_test.pub /home/alice/.ssh/authorized_keys
        printf 'Port 2201\nListenAddress 127.0.0.1\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM yes\n' \
                >/etc/ssh/sshd_config.d/fleetsem-test.conf
        echo 'session required pam_fleetsem.so slots=1' >>/etc/pam.d/sshd
        systemctl restart ssh.service" || bail "cannot set up logins on h1"
check "h1: sshd listens" wait_for 10 ns h1 sh -c "ss -ltn 2>/dev/null | grep -q 127.0.0.1:2201 || grep -qi ':$(printf %04X 2201) ' /proc/net/tcp"
# login WHAT: alice logs in to h1 over ssh, her job as held_unit's (WHAT-
# files, alice's: her job writes there. Its output goes nowhere once it is
# in: a shell that reports its child's death by SIGTERM on the closed ssh
# channel dies of SIGPIPE, at once).
login() {
        end_fifo "$T/shared/$1-fifo" "$T/$1-end"
        chmod 0666 "$T/shared/$1-fifo" || bail "chmod of the session's FIFO"
        for f in "$1-term" "$1-lock"; do
                install -m 0666 /dev/null "$T/shared/$f" || bail "cannot make $f"
        done
        sleep 300 | ns h1 ssh -i $S/id_test -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
                -o LogLevel=ERROR -p 2201 alice@127.0.0.1 \
                "exec 7>$S/$1-fifo 9>>$S/$1-lock; flock 9; trap 'date +%s%3N >>$S/$1-term' TERM; trap '' HUP; echo in; exec >/dev/null 2>&1; while :; do sleep 0.2; done" \
                >"$T/ssh-$1.out" 2>&1 &
        check "$1: alice's session on h1 is in" wait_for 10 grep -q '^in$' "$T/ssh-$1.out"
        is "$(holders login:alice)" 1 "... holding the slot of login:alice"
}
login session
successor login:alice session
ns h2 fleetsem revoke --reason "session test" "$(rcli ZRANGE 'fleetsem:{login:alice}:holders' 0 0)" >"$T/revoke-session.log" 2>&1
is "$?" 0 "root on h2 revokes it"
sed 's/^/# revoke said: /' "$T/revoke-session.log"
ordered session
like "$(journal h1 -u fleetsemd.service)" "Ending login session [0-9]+ of root@h1 pid [0-9]+ \(session-[0-9]+\.scope\): its slot of login:alice is lost" \
        "h1's agent ended the session"
like "$(journal h1 -u fleetsemd.service)" "Killed what was left of session-[0-9]+\.scope \(SIGKILL to its control group\)" \
        "... and killed what was left of its scope"

# --- a unit revoked while its host's agent is away -----------------------------------
# The agent restarted within the lease finds the slot gone from Redis and
# the unit running: it stops and kills it at once, before the lease's end
# lets its successor in. (What the agent promises holds only when it is
# back within the lease: h1 takes a lease of 30 s here, over ten times
# what its restart and the kill take on a busy machine, not the 6 s of
# the sections before, last for that. The slot, revoked, stays taken to
# the lease's end: the successor is in after it.)
sed -i 's/^lease_ttl = .*/lease_ttl = 30s/' "$T/h1/etc/fleetsem.conf"
ns h1 systemctl restart fleetsemd.service || bail "cannot restart h1's agent"
held_unit away away
successor away away
ns h1 systemctl stop fleetsemd.service
ns h2 fleetsem revoke --reason "unit test" "$(rcli ZRANGE 'fleetsem:{away}:holders' 0 0)" >"$T/revoke-away.log" 2>&1
is "$?" 0 "root on h2 revokes it while h1's agent is stopped"
ns h1 systemctl start fleetsemd.service
check "away: the job ended" wait_for 20 test -s "$T/away-end"
check "away: its successor started" wait_for 60 test -s "$T/shared/away-seen"
is "$(cat "$T/shared/away-seen")" free "away: its successor started after the job's last process was gone (its lock free)"
like "$(journal h1 -u fleetsemd.service)" "Slot of away held by away\.service \(lease [0-9a-f]+\) is gone from Redis: revoked, or its lease ran out, while this agent was away; stopping away\.service" \
        "h1's agent, back, stopped the unit whose slot went while it was away"
state=$(ns_prop h1 away.service ActiveState)
check "... and it is stopped (ActiveState=$state)" [ "$state" != active ]

# --- a login session whose host's agent restarted since it began ---------------------
# The agent that re-adopts the session's slot knows the process that
# opened it from its host's record (its pid and start time, still those of
# a running process), and ends the session as the agent it asked would.
# (h1's 30-s lease, as above: the restart takes a few seconds on a busy
# machine. The revoked slot stays counted to its lease's end.)
login restarted
# The record, under the shipped unit's sandbox: the session's requester
# (pid, start time) and its mark of a held lease with a boot id (the one
# the agent reads, which the container's own processes are shown another
# of: systemd-nspawn's, mounted over it).
rec=$(ns h1 sh -c 'grep -h "^login:alice " /run/fleetsem/*.leases/*')
like "$rec" "^login:alice 1 0 - ignore by [0-9]+ [0-9]+ held [0-9a-f]{32}\$" \
        "restarted: h1's record of the session names its requester and marks it held"
cursor=$(cursor h1)
[ -n "$cursor" ] || bail "no cursor of h1's journal"
ns h1 systemctl restart fleetsemd.service || bail "cannot restart h1's agent"
readopted() { journal h1 -u fleetsemd.service --after-cursor="$cursor" | grep -q 'Re-adopted 1 held slot(s) of this host'; }
check "restarted: h1's agent, started again, re-adopts the session's slot" wait_for 30 readopted
successor login:alice restarted
ns h2 fleetsem revoke --reason "session test" "$(rcli ZRANGE 'fleetsem:{login:alice}:holders' 0 0)" >"$T/revoke-restarted.log" 2>&1
is "$?" 0 "root on h2 revokes it"
ordered restarted 90    # headroom: the 30-s lease's end, three times
like "$(journal h1 -u fleetsemd.service --after-cursor="$cursor")" \
        "Ending login session [0-9]+ of [a-z]+@h1 pid [0-9]+ \(adopted\): its slot of login:alice is lost" \
        "h1's agent, restarted since the session began, ended it"

# --- jobs being stopped when their host's agent restarts ------------------------------
# Revoked, each told its SIGTERM and running on past it, then h1's agent
# restarted before the SIGKILL it set: the agent that starts sends it
# when the first would have (the host's record of the lease names the
# unit or scope and the time), before the slot may be granted elsewhere.
# stopping WHAT: a revoke of login:alice's or WHAT's holder, then h1's
# agent restarted once the job is being stopped (STOPPED: a command true
# then), and the job gone before its successor starts.
stopping() {
        local what=$1 name=$2 stopped=$3
        successor "$name" "$what"
        ns h2 fleetsem revoke --reason "$what test" "$(rcli ZRANGE "fleetsem:{$name}:holders" 0 0)" >"$T/revoke-$what.log" 2>&1
        is "$?" 0 "$what: root on h2 revokes it"
        check "$what: h1 is stopping the job" wait_for 30 $stopped
        cursor=$(cursor h1)
        [ -n "$cursor" ] || bail "no cursor of h1's journal"
        ns h1 systemctl restart fleetsemd.service || bail "cannot restart h1's agent"
        ordered "$what" 90     # headroom: the 30-s lease's end, three times
        journal h1 -u fleetsemd.service --after-cursor="$cursor" >"$T/journal-$what.log"
        like "$(cat "$T/journal-$what.log")" "Lease [0-9a-f]{32} was lost before this agent started, and $4 was being stopped: stopping it, and sending SIGKILL to what is left of it" \
                "$what: h1's agent, restarted, takes over the kill"
        like "$(cat "$T/journal-$what.log")" "Killed what was left of $4 \(SIGKILL to its control group\)" \
                "... and kills what was left of the job"
}
ending() { journal h1 -u fleetsemd.service --after-cursor="$1" | grep -q "Ending login session [0-9]* of .*: its slot of login:alice is lost"; }
login killed
cursor0=$(cursor h1)
stopping killed login:alice "ending $cursor0" "session-[0-9]+\.scope"
deactivating() { [ "$(ns_prop h1 slow.service ActiveState)" = deactivating ]; }
held_unit slow slow
stopping slow slow deactivating "slow\.service"

ns_done_testing
