#!/bin/bash
# Files the agent trusts must be root's: a configuration or password file
# that nobody owns, or that sits in a directory nobody may write, is refused
# by fleetsemd --check-config, at start, and at a reload, naming the file
# and the fix. The same files owned by root are taken.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-security.sh"

# check_config FILE: fleetsemd --check-config on it; its output, and $rc.
check_config() { out=$("$FLEETSEMD" --config "$1" --check-config 2>&1); rc=$?; }

start_redis
printf 'redis = unix:%s\nallow = pub-* nobody\n' "$REDIS_SOCK" >"$T/agent.conf"
chmod 644 "$T/agent.conf"

check_config "$T/agent.conf"
is "$rc" 0 "root's configuration is taken${out:+: $out}"

chown nobody "$T/agent.conf"
check_config "$T/agent.conf"
is "$rc" 1 "a configuration owned by nobody is refused by --check-config"
like "$out" "$T/agent.conf: the configuration file is owned by uid $NOBODY_UID with mode 0644; it must be owned by root" \
        "... naming the file, its owner and mode"
like "$out" "chown root $T/agent.conf" "... and the fix"
timeout 10 "$FLEETSEMD" --namespace "$NSBASE-x" --config "$T/agent.conf" >"$T/start.log" 2>&1
is "$?" 1 "the agent does not start on it"
agent_listening "$NSBASE-x"
is "$?" 1 "... and does not listen"
chown root "$T/agent.conf"

ln -s "$T/agent.conf" "$T/link.conf"
chown nobody "$T/agent.conf"
check_config "$T/link.conf"
is "$rc" 1 "a link to nobody's configuration is refused: the file opened is checked"
chown root "$T/agent.conf"
check_config "$T/link.conf"
is "$rc" 0 "a link to root's is taken${out:+: $out}"

mkdir -m 755 "$T/nobodys"
cp "$T/agent.conf" "$T/nobodys/agent.conf"
chown nobody "$T/nobodys"
check_config "$T/nobodys/agent.conf"
is "$rc" 1 "root's configuration in a directory nobody owns is refused"
like "$out" "the directory $T/nobodys of the configuration file is owned by uid $NOBODY_UID" "... naming the directory"

printf 'secret\n' >"$T/pw"
chmod 600 "$T/pw"
chown nobody "$T/pw"
printf 'redis = unix:%s\nredis_password_file = %s\n' "$REDIS_SOCK" "$T/pw" >"$T/pw.conf"
check_config "$T/pw.conf"
is "$rc" 1 "a password file owned by nobody is refused"
like "$out" "$T/pw: the Redis password file is owned by uid $NOBODY_UID with mode 0600" "... naming it"

# A reload: nobody, given the file, grants itself every name; the reload
# is refused and the rules in force stay.
start_agent a --config "$T/agent.conf"
out=$(as_nobody env FLEETSEM_NAMESPACE="$NSBASE-a" "$FLEETSEM" run --slots 1 root-only -- true 2>&1)
is "$?" 77 "nobody may not ask for root-only${out:+: $out}"
chown nobody "$T/agent.conf"
as_nobody sh -c "printf 'allow = * nobody\n' >>'$T/agent.conf'"
check "nobody has written its rule into the file" grep -qx 'allow = \* nobody' "$T/agent.conf"
kill -HUP "$(agent_pid a)"
check "the reload is refused" wait_for 10 grep -q "Reload refused" "$T/agent-a.log"
like "$(cat "$T/agent-a.log")" "$T/agent.conf: the configuration file is owned by uid $NOBODY_UID" "... saying why"
out=$(as_nobody env FLEETSEM_NAMESPACE="$NSBASE-a" "$FLEETSEM" run --slots 1 root-only -- true 2>&1)
is "$?" 77 "nobody still may not ask for root-only${out:+: $out}"
is "$(holders root-only)" 0 "... and Redis holds nothing of it"
done_testing
