#!/bin/bash
# What a local user writes into its process name (its comm: prctl
# PR_SET_NAME, or the name of the file it runs) reaches the agent's log
# lines and every fleetsem status. nobody holds slots from processes whose
# comm carries ESC, an OSC title sequence, BEL, DEL, C1 and bytes that are
# not UTF-8. The agent's log holds none of them raw, only as \xNN (valid
# UTF-8 stays as it is), and status --json is valid UTF-8 JSON that keeps
# every valid character exactly.
TTL=5s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-security.sh"

printf 'allow = esc-* nobody\n' >"$T/agent.conf"
start_redis
start_agent a --config "$T/agent.conf"
log="$T/agent-a.log"

# A log line names a holder by its unit or session, by its comm only
# outside them: where the tests run in a systemd unit (not under CI), the
# lines that look for the comm in the log skip.
in_unit=false
grep -qE '^(0|[0-9]+:name=systemd):.*\.(service|scope)(/|$)' /proc/self/cgroup && [ "${CI:-}" != true ] && in_unit=true
log_check() {
        if $in_unit; then ok "$1 # SKIP the tests run in a systemd unit, which the log names instead"; else check "$@"; fi
}

# no_raw_bytes FILE: FILE is UTF-8 with no control character but newline
# (C0, DEL, C1); says what it found otherwise.
no_raw_bytes() {
        python3 - "$1" <<'EOF'
import re, sys
data = open(sys.argv[1], "rb").read()
try:
    text = data.decode("utf-8")
except UnicodeDecodeError as e:
    sys.exit("# not UTF-8: %r" % data[max(e.start - 20, 0):e.end + 20])
bad = re.search("[\x00-\x09\x0b-\x1f\x7f-\x9f]", text)
if bad:
    sys.exit("# raw control character: %r" % text[max(bad.start() - 20, 0):bad.end() + 20])
EOF
}

# 1. A comm set with prctl: ESC ] 0 ; title BEL (an OSC that retitles the
# terminal), DEL, a lone C1 CSI byte, 0xff, then é (valid UTF-8).
cp "$(dirname "$0")/holder-raw.py" "$T/holder-raw.py"
chmod 644 "$T/holder-raw.py"
as_nobody /usr/bin/python3 "$T/holder-raw.py" "$NSBASE-a" esc-prctl '\x1b]0;pwn\x07\x7f\x9b\xff\xc3\xa9' \
        >"$T/holder.out" 2>&1 &
holder=$!
check "nobody holds a slot from a process named ESC]0;pwn BEL DEL 0x9b 0xff é (prctl)" \
        wait_for 20 grep -q held "$T/holder.out"
check "the agent logs the grant" wait_for 10 grep -q "Granted slot of esc-prctl to nobody@a" "$log"
log_check "the log names it \\x1b]0;pwn\\x07\\x7f\\x9b\\xffé: escaped, é as it is" \
        grep -qF '(\x1b]0;pwn\x07\x7f\x9b\xffé)' "$log"

# 2. A comm from the name of the file run: fleetsem run itself, under a
# name that clears the screen and holds a bare ESC at its end.
mkdir -m 755 "$T/bin"
evil=$'\e[2J\e[H\a\x01\xc3\xa9\xc3\e'
cp "$FLEETSEM" "$T/bin/$evil"
chmod 755 "$T/bin/$evil"
as_nobody env FLEETSEM_NAMESPACE="$NSBASE-a" "$T/bin/$evil" run --slots 1 --wait 30s esc-exe -- \
        sh -c 'while [ ! -e "$1" ]; do sleep 0.05; done' - "$T/go" >"$T/run.out" 2>&1 &
runner=$!
check "nobody holds a slot from fleetsem run named ESC[2J ESC[H BEL SOH é 0xc3 ESC" \
        wait_for 20 sh -c "[ \"\$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{esc-exe}:holders')\" = 1 ]"
log_check "the agent logs that grant" wait_for 10 grep -qF '(\x1b[2J\x1b[H\x07\x01é\xc3\x1b)' "$log"
grep -F 'Granted slot of esc-' "$log" | cat -v | sed 's/^/# log: /'

check "the agent's log is UTF-8 without a raw control byte" no_raw_bytes "$log"

# 3. What root sees.
fs a status >"$T/status.txt"
is "$?" 0 "status exits 0"
check "status text holds no raw control byte" no_raw_bytes "$T/status.txt"
grep -F 'esc-' "$T/status.txt" | sed 's/^/# status: /'
like "$(cat "$T/status.txt")" '\\x1b\]0;pwn\\x07\\x7f\\x9b\\xffé' "... and shows the comm escaped"

fs a status --json >"$T/status.json"
is "$?" 0 "status --json exits 0"
python3 -m json.tool "$T/status.json" >/dev/null 2>"$T/json.err"
is "$?" 0 "python3 -m json.tool parses status --json$( [ -s "$T/json.err" ] && echo ": $(tail -n 1 "$T/json.err")")"
check "status --json is UTF-8 without a raw control byte" no_raw_bytes "$T/status.json"
comms=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
print(" ".join(sorted(ascii(h["comm"]) for n in d["names"] for h in n["holders"])))' "$T/status.json")
is "$comms" "'\\x1b[2J\\x1b[H\\x07\\x01\\xe9\\ufffd\\x1b' '\\x1b]0;pwn\\x07\\x7f\\ufffd\\ufffd\\xe9'" \
        "each character comes back exact, each byte that is not UTF-8 as U+FFFD"

as_nobody env FLEETSEM_NAMESPACE="$NSBASE-a" "$FLEETSEM" status --json >"$T/nobody.json"
is "$?" 0 "nobody's own status --json exits 0"
python3 -m json.tool "$T/nobody.json" >/dev/null 2>&1
is "$?" 0 "... and parses too"

# 4. The slots go back; the release lines are escaped as well.
touch "$T/go"
wait "$runner"
is "$?" 0 "the renamed fleetsem run exits 0 with its command"
kill_tree "$holder"
wait "$holder" 2>/dev/null
check "both slots go back" wait_for 20 sh -c "[ \"\$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{esc-exe}:holders')\$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{esc-prctl}:holders')\" = 00 ]"
check "after the releases, the log still has no raw control byte" no_raw_bytes "$log"
done_testing
