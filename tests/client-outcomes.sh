#!/bin/bash
# Each kind of answer, through each front-end: the PAM module (through
# Linux-PAM under pam_wrapper), `fleetsem acquire` (in a service's cgroup of
# the test's own, root only) and `fleetsem run`, against a scripted agent
# (fake-agent.py) that sends the reply of each class: a grant, a refusal
# (DENIED, ERROR code=limit, code=invalid, code=busy), ERROR code=redis,
# garbage, ERROR code=unavailable, ERROR code=misconfigured (refused whatever
# on-error says), a closed connection, and no agent at all.
# Only the limiter that cannot be reached may take on-error=allow; everything
# else that is no grant denies, with the exit code fleetsem(1) gives.
. "$(dirname "$0")/lib.sh"
pam_setup
HERE=$(dirname "$0")
ME=$(id -un)
export FLEETSEM_AGENT_USER=$ME
L=0123456789abcdef0123456789abcdef
mkdir -p "$T/pam.d"

# fake STEP...: a scripted agent on @$NSBASE-fake/agent for one request.
fake() {
        fake_out="$T/fake.out"
        : >"$fake_out"  # emptied first: the last one's "listening" must not count
        python3 "$HERE/fake-agent.py" "$NSBASE-fake" "$@" >"$fake_out" &
        fake_pid=$!
        wait_for 30 grep -q listening "$fake_out" || echo "# the fake agent did not start"
}
unfake() { kill "$fake_pid"; wait "$fake_pid" 2>/dev/null; }

# pam POLICY NS: pam_open_session's result (0, 6 PAM_PERM_DENIED, 14
# PAM_SESSION_ERR) for daemon through a stack with on_error=POLICY; the
# module's log in $T/pam.log.
pam() {
        echo "session required $PAM_FLEETSEM namespace=$2 agent_user=$ME slots=1 name=oc on_error=$1" >"$T/pam.d/oc"
        printf 'close\n' | LD_PRELOAD=$PRELOAD PAM_WRAPPER=1 PAM_WRAPPER_SERVICE_DIR="$T/pam.d" PAM_WRAPPER_DEBUGLEVEL=1 \
                "$PAM_SESSION" oc daemon >"$T/pam.out" 2>"$T/pam.log"
        sed -n 's/^open: \([0-9]*\) .*/\1/p' "$T/pam.out"
}

# run NS: fleetsem run's exit code, and whether COMMAND ran ("ran" or "-").
run() {
        rm -f "$T/ran"
        FLEETSEM_NAMESPACE=$1 "$FLEETSEM" run --slots 1 --wait 0 oc -- touch "$T/ran" 2>"$T/run.log"
        echo "$? $([ -e "$T/ran" ] && echo ran || echo -)"
}

acquire_setup
acquire() { acquire_in_unit "$1" "$2" oc; }

# case WHAT PAM_ALLOW PAM_DENY RUN ACQUIRE_ALLOW ACQUIRE_DENY -- STEP...: the
# fake agent plays STEP... for each front-end in turn; each must come to
# what is given (the PAM result with on_error=allow and deny, run's exit
# code and whether COMMAND ran, acquire's exit code with each --on-error).
case_() {
        local what=$1 pa=$2 pd=$3 rn=$4 aa=$5 ad=$6; shift 7
        local ns="$NSBASE-fake" got
        [ "$1" = none ] && ns="$NSBASE-nobody"
        run_fake() { [ "$1" = none ] || fake "$@"; }
        stop_fake() { [ "$1" = none ] || unfake; }

        run_fake "$@"; got=$(pam allow "$ns"); stop_fake "$@"
        is "$got" "$pa" "$what: PAM, on_error=allow: $pa"
        run_fake "$@"; got=$(pam deny "$ns"); stop_fake "$@"
        is "$got" "$pd" "$what: PAM, on_error=deny: $pd"
        run_fake "$@"; got=$(run "$ns"); stop_fake "$@"
        is "$got" "$rn" "$what: run exits ${rn% *}, COMMAND ${rn#* }"
        if [ "$ACQUIRE" = true ]; then
                run_fake "$@"; got=$(acquire allow "$ns"); stop_fake "$@"
                is "$got" "$aa" "$what: acquire --on-error=allow exits $aa"
                run_fake "$@"; got=$(acquire deny "$ns"); stop_fake "$@"
                is "$got" "$ad" "$what: acquire --on-error=deny exits $ad"
        else
                prereq "root and a writable cgroup2 hierarchy, for acquire" false
        fi
}

#     what                      PAM a/d   run       acquire a/d
case_ "a grant"                 0 0       "0 ran"   0 0   -- "GRANTED token=7 lease=$L since=1 ttl=15000 limit=1"
case_ "DENIED reason=full"      6 6       "75 -"    75 75 -- "DENIED reason=full position=1 held=1 slots=1 limit=1"
case_ "ERROR code=limit"        6 6       "77 -"    77 77 -- "ERROR code=limit message=uid%200%20holds%2064%20leases"
case_ "ERROR code=invalid"      14 14     "64 -"    64 64 -- "ERROR code=invalid message=bad%20weight"
case_ "ERROR code=busy"         6 6       "75 -"    75 75 -- "ERROR code=busy message=try%20again"
case_ "ERROR code=redis"        14 14     "70 -"    70 70 -- "ERROR code=redis message=ERR%20Error%20running%20script"
case_ "garbage"                 14 14     "70 -"    70 70 -- $'GRANTED \x1b[2J oops'
case_ "an unknown code"         14 14     "70 -"    70 70 -- "ERROR code=sunspots message=x"
case_ "ERROR code=unavailable"  0 14      "69 -"    0 69  -- "ERROR code=unavailable message=Redis%20at%20x%20is%20unreachable"
case_ "ERROR code=misconfigured" 14 14    "78 -"    78 78 -- "ERROR code=misconfigured message=Redis%20at%20x%20holds%20a%20newer%20library"
# run asks again when the connection closes (an agent restarting keeps its
# slot or place), and exits 75 when the agent took the request but did not
# answer within the wait: fleetsem(1), EXIT STATUS.
case_ "a closed connection"     0 14      "75 -"    0 69  -- close
case_ "no agent"                0 14      "69 -"    0 69  -- none

# A reply nobody can decode is logged as a bug, with the reply escaped.
fake $'GRANTED \x1b[2J oops'
pam allow "$NSBASE-fake" >/dev/null
unfake
like "$(cat "$T/pam.log")" 'refusing session of daemon: bug: a reply from the agent that this client cannot decode: "GRANTED \\x1b\[2J oops" \(whatever on_error= says\)' \
        "PAM: the undecodable reply is logged as a bug, escaped"
fake $'GRANTED \x1b[2J oops'
run "$NSBASE-fake" >/dev/null
unfake
# (the CLI's log escapes the message once more: \x1b shows as \\x1b)
like "$(cat "$T/run.log")" 'oc: bug: a reply from the agent that this client cannot decode: "GRANTED \\\\x1b\[2J oops"; not running COMMAND' \
        "run: logged as a bug, escaped"
fake "ERROR code=redis message=ERR%20Error%20running%20script"
pam allow "$NSBASE-fake" >/dev/null
unfake
like "$(cat "$T/pam.log")" 'refusing session of daemon: Redis answered the agent with an error: ERR Error running script \(whatever on_error= says\)' \
        "PAM: code=redis is logged with what Redis said"
fake "ERROR code=unavailable message=Redis%20at%20x%20is%20unreachable"
pam allow "$NSBASE-fake" >/dev/null
unfake
like "$(cat "$T/pam.log")" 'allowing session of daemon WITHOUT a fleet slot: Redis at x is unreachable \(on_error=allow\)' \
        "PAM: an unreachable Redis is let through loudly"

# Root stays exempt whatever the agent says.
fake "ERROR code=redis message=x"
echo "session required $PAM_FLEETSEM namespace=$NSBASE-fake agent_user=$ME slots=1 name=oc on_error=deny" >"$T/pam.d/oc"
printf 'close\n' | LD_PRELOAD=$PRELOAD PAM_WRAPPER=1 PAM_WRAPPER_SERVICE_DIR="$T/pam.d" PAM_WRAPPER_DEBUGLEVEL=1 \
        "$PAM_SESSION" oc root >"$T/pam.out" 2>"$T/pam.log"
unfake
is "$(sed -n 's/^open: \([0-9]*\) .*/\1/p' "$T/pam.out")" 0 "root is exempt: passes whatever the agent answers"
grep -q '^request ' "$fake_out"
check "... without asking it" [ $? != 0 ]

done_testing
