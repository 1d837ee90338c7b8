#!/bin/bash
# Bash completion of fleetsem, as bash calls it: COMP_WORDS split the way
# bash splits a command line, the completion function, then COMPREPLY.
# Names come from a running agent's status, units from systemctl.
TTL=5s
. "$(dirname "$0")/lib.sh"

BASH_COMPLETION=${BASH_COMPLETION:-/usr/share/bash-completion/bash_completion}
require_that "bash-completion ($BASH_COMPLETION)" test -f "$BASH_COMPLETION"
# shellcheck disable=SC1090
. "$BASH_COMPLETION"
# shellcheck source=../src/cli/completion/fleetsem
. "$(dirname "$0")/../src/cli/completion/fleetsem"
is "$(complete -p fleetsem)" "complete -F _fleetsem fleetsem" "sourcing it registers _fleetsem for fleetsem"

# The fleetsem under test is the one the completion runs.
mkdir -p "$T/bin"
ln -s "$FLEETSEM" "$T/bin/fleetsem"
PATH=$T/bin:$PATH

# comp LINE: what completing at the end of LINE offers, sorted, on one line.
# Bash breaks words at spaces and at the characters of COMP_WORDBREAKS
# (among them = and :), each run of those a word of its own.
comp() {
        local line=$1 w
        COMP_LINE=$line
        COMP_POINT=${#line}
        COMP_WORDS=()
        for w in $line; do
                while [[ $w =~ ^([^=:]*)([=:]+)(.*)$ ]]; do
                        [ -n "${BASH_REMATCH[1]}" ] && COMP_WORDS+=("${BASH_REMATCH[1]}")
                        COMP_WORDS+=("${BASH_REMATCH[2]}")
                        w=${BASH_REMATCH[3]}
                done
                [ -n "$w" ] && COMP_WORDS+=("$w")
        done
        [[ $line == *' ' ]] && COMP_WORDS+=("")
        COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
        COMPREPLY=()
        _fleetsem fleetsem "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]:-}"
        [ ${#COMPREPLY[@]} -gt 0 ] && printf '%s\n' "${COMPREPLY[@]}" | sort | tr '\n' ' ' | sed 's/ $//'
}

# --- commands and options ----------------------------------------------------
is "$(comp 'fleetsem ')" "--help --version acquire drain fleet-limit help limit metrics reboot redis-init release revoke run status undrain" "the commands"
is "$(comp 'fleetsem rel')" "release" "a command from its start"
is "$(comp 'fleetsem run -')" "--help --namespace --no-wait --on-lost --slots --verbose --wait --weight" "run's options"
is "$(comp 'fleetsem status --')" "--help --json --namespace --watch" "status' options"
is "$(comp 'fleetsem limit --r')" "--remove" "limit's options: the drop-in's alone"
is "$(comp 'fleetsem fleet-limit --')" "--help --namespace --reason" "fleet-limit's options"
is "$(comp 'fleetsem metrics -')" "--help --namespace --output" "metrics' options"
is "$(comp 'fleetsem drain -')" "--help --namespace --reason" "drain's options"
is "$(comp 'fleetsem undrain -')" "--help --namespace" "undrain's: no --reason"
is "$(comp 'fleetsem revoke -')" "--help --host --name --namespace --now --reason" "revoke's"
is "$(comp 'fleetsem drain --reason ')" "" "nothing to offer for --reason TEXT"
mkdir -p "$T/textfile" && touch "$T/textfile/fleetsem.prom"
is "$(comp "fleetsem metrics --output $T/textfile/fl")" "$T/textfile/fleetsem.prom" "metrics --output FILE: files"
is "$(comp 'fleetsem metrics --output=/nonexistent/x')" "" "... none where there are none"
is "$(comp 'fleetsem redis-init -')" "--config --help" "redis-init's options"
is "$(comp "fleetsem redis-init --config $T/textfile/fl")" "$T/textfile/fleetsem.prom" "redis-init --config FILE: files"
is "$(comp 'fleetsem run --on-lost ')" "ignore kill term" "run --on-lost VALUE"
is "$(comp 'fleetsem run --on-lost=k')" "kill" "run --on-lost=VALUE"
is "$(comp 'fleetsem limit --on-lost ')" "ignore stop" "limit --on-lost VALUE (not run's)"
is "$(comp 'fleetsem acquire --on-error=')" "allow deny" "acquire --on-error=VALUE"
is "$(comp 'fleetsem run --slots ')" "" "nothing to offer for --slots N"
is "$(comp 'fleetsem frobnicate -')" "" "nothing for an unknown command"

# --- names, from a running agent's status --------------------------------------
start_redis
start_agent a
export FLEETSEM_NAMESPACE=$NSBASE-a
is "$(comp 'fleetsem status ')" "" "no names in use: none offered"
fs a run --slots 1 backup-db -- sleep 60 &
fs a run --slots 1 backup-web -- sleep 60 &
fs a run --slots 1 login:alice -- sleep 60 &
check "three names are held" wait_for 10 sh -c "[ \$(FLEETSEM_NAMESPACE=$NSBASE-a $FLEETSEM status --json | grep -o '\"name\":' | wc -l) -ge 3 ]"
is "$(comp 'fleetsem status ')" "backup-db backup-web login:alice" "status: the names in use"
is "$(comp 'fleetsem run backup-w')" "backup-web" "run: a name from its start"
is "$(comp 'fleetsem fleet-limit backup-w')" "backup-web" "fleet-limit: a name from its start"
is "$(comp 'fleetsem fleet-limit backup-web ')" "none" "fleet-limit NAME: none (or a number)"
is "$(comp 'fleetsem run --slots 2 --wait=5s back')" "backup-db backup-web" "run: a name after options with values"
is "$(comp 'fleetsem status login:al')" "alice" "a name with a colon: what bash puts after the colon"
is "$(comp 'fleetsem release ')" "backup-db backup-web login:alice" "release: the names"
is "$(comp 'fleetsem status backup-db ')" "backup-db backup-web login:alice" "status: more names after one"
unset FLEETSEM_NAMESPACE
is "$(comp 'fleetsem status --namespace '"$NSBASE-a"' b')" "backup-db backup-web" "--namespace NS asks that agent"
is "$(comp 'fleetsem status --namespace='"$NSBASE-a"' b')" "backup-db backup-web" "--namespace=NS too"
is "$(comp 'fleetsem status --namespace=nobody-listens b')" "" "no agent: no names, no error"

# --- run NAME -- COMMAND --------------------------------------------------------
is "$(comp 'fleetsem run backup-db -')" "--" "after NAME: --"
like "$(comp 'fleetsem run backup-db -- redis-ser')" '(^| )redis-server( |$)' "after --: commands"
is "$(comp 'fleetsem run --slots 1 backup-db -- fleetsem sta')" "status" "... and their own completion"

# --- units for limit ------------------------------------------------------------
if has_tool systemctl; then
        unit=$(systemctl list-unit-files --type=service --no-legend --no-pager | awk 'NR == 1 { print $1 }')
        socket=$(systemctl list-unit-files --type=socket --no-legend --no-pager | awk 'NR == 1 { print $1 }')
        check "systemctl lists a service unit ($unit)" [ -n "$unit" ]
        like " $(comp "fleetsem limit ${unit:0:3}") " " ${unit//./\\.} " "limit: service units from systemctl"
        like " $(comp 'fleetsem limit --skip --wait 5s '"${unit:0:3}") " " ${unit//./\\.} " "limit: a unit after options"
        if [ -n "$socket" ]; then
                check "limit: no socket units ($socket)" sh -c "! echo ' $(comp "fleetsem limit ${socket%%.*}") ' | grep -qF ' $socket '"
        fi
        is "$(comp "fleetsem limit $unit ")" "" "limit UNIT SLOTS: nothing to offer for SLOTS"
fi

done_testing
