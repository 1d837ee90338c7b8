#!/bin/bash
# Real logins through pam_fleetsem.so: two booted hosts, each with sshd on a
# loopback port of its own and the module in its sshd and su session
# stacks, slots=2, one Redis. alice may have 2 sessions across both hosts;
# so may users whose names no slot name holds as they are (build$,
# DOMAIN\user), and carol, whether she logs in as carol or as Carol (a
# second passwd entry with her uid, as case-insensitive directories give).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-nspawn.sh"
: "${PAM_FLEETSEM:?path to pam_fleetsem.so}"
require ssh-keygen

PAMDIR=/lib/$(gcc -dumpmachine 2>/dev/null || echo x86_64-linux-gnu)/security
NS_BINDS=(--bind-ro="$PAM_FLEETSEM:$PAMDIR/pam_fleetsem.so")
start_redis
ssh-keygen -q -t ed25519 -N '' -f "$T/shared/id_test" >/dev/null || bail "ssh-keygen failed"
ns_boot h1 h2

port() { echo $((2200 + ${1#h})); }
for h in h1 h2; do
        ns "$h" sh -c "
                useradd -m -s /bin/bash alice && useradd -m -s /bin/bash bob || exit 1
                for u in alice bob; do
                        install -d -m 700 -o \$u -g \$u /home/\$u/.ssh
                        install -m 600 -o \$u -g \$u /run/fleetsem-test/id_test.pub /home/\$u/.ssh/authorized_keys
                done
                printf 'Port $(port "$h")\nListenAddress 127.0.0.1\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM yes\n' \
                        >/etc/ssh/sshd_config.d/fleetsem-test.conf
                echo 'session required pam_fleetsem.so slots=2' >>/etc/pam.d/sshd
                echo 'session required pam_fleetsem.so slots=2' >>/etc/pam.d/su
                systemctl restart ssh.service" || bail "cannot set up logins on $h"
        ns "$h" sh -c '
                useradd --badname -m -s /bin/bash "build\$" && useradd --badname -m -s /bin/bash "DOMAIN\\user" &&
                useradd -m -s /bin/bash carol || exit 1
                useradd --badname -o -M -u "$(id -u carol)" -g carol -d /home/carol -s /bin/bash Carol || exit 1
                for u in "build\$" "DOMAIN\\user" carol; do
                        install -d -m 700 -o "$u" -g "$(id -g "$u")" "/home/$u/.ssh"
                        install -m 600 -o "$u" -g "$(id -g "$u")" /run/fleetsem-test/id_test.pub "/home/$u/.ssh/authorized_keys"
                done' || bail "cannot add the users with unusual names on $h"
done
check "h1: sshd listens on 127.0.0.1:$(port h1)" wait_for 10 ns h1 sh -c "ss -ltn 2>/dev/null | grep -q 127.0.0.1:$(port h1) || grep -qi ':$(printf %04X "$(port h1)") ' /proc/net/tcp"

# ssh_to HOST USER CMD...: an ssh session from HOST to its own sshd.
ssh_to() {
        local host=$1 user=$2; shift 2
        ns "$host" ssh -i /run/fleetsem-test/id_test -o BatchMode=yes -o StrictHostKeyChecking=no \
                -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -p "$(port "$host")" "$user@127.0.0.1" "$@"
}
# hold HOST USER MARK: a session that stays open (its command: sleep MARK).
hold() { ssh_to "$1" "$2" "echo in; exec sleep $3" >"$T/ssh-$1-$3.out" 2>&1 & }
held() { grep -q '^in$' "$T/ssh-$1-$2.out"; }
logout() { ns "$1" pkill -f "sleep $2" ; wait_for 5 sh -c "! nsenter -t $(ns_leader "$1") -a pgrep -f 'sleep $2' >/dev/null"; }

hold h1 alice 3001
check "alice's first session (h1) is in" wait_for 10 held h1 3001
hold h2 alice 3002
check "alice's second session (h2) is in" wait_for 10 held h2 3002
is "$(holders login:alice)" 2 "Redis: 2 slots of login:alice, across two hosts"

for h in h1 h2; do
        out=$(ssh_to "$h" alice 'echo in' 2>&1); rc=$?
        printf '%s\n' "$out" | sed 's/^/# ssh said: /'
        check "a third session for alice on $h is refused (ssh exit $rc)" [ "$rc" -ne 0 ]
        check "... it never ran its command" sh -c "! printf '%s' '$out' | grep -q '^in$'"
        check "... and was not told it waits (wait=0)" sh -c "! printf '%s' '$out' | grep -q 'waiting'"
        like "$out" "fleetsem: all 2 sessions for alice are in use \((h1|h2) since [0-9:]+, (h1|h2) since [0-9:]+\); try again later" \
                "... and the client sees why"
done
like "$(journal h1 -t sshd)" "pam_fleetsem\(sshd:session\): refused session of alice: all 2 sessions for alice are in use" \
        "sshd's journal has the refusal, with the same facts"
is "$(holders login:alice) $(waiters login:alice)" "2 0" "the refused ones left nothing in Redis"

out=$(ssh_to h1 bob 'echo bob in' 2>&1)
like "$out" "^bob in" "bob is not affected"

logout h1 3001
check "alice logs out on h1: her slot is free" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{login:alice}:holders') = 1 ]"
hold h2 alice 3003
check "so a new session gets in (on h2)" wait_for 10 held h2 3003

# --- names from the directory: one limit per account, whatever it is called --------
# USER holds a session on each host: a third is refused (2 of 3 admitted),
# under NAME.
limit_holds() {
        local user=$1 name=$2 mark=$3 admitted=0 out rc
        hold h1 "$user" "${mark}1"
        wait_for 10 held h1 "${mark}1" && admitted=$((admitted + 1))
        hold h2 "${4:-$user}" "${mark}2"
        wait_for 10 held h2 "${mark}2" && admitted=$((admitted + 1))
        out=$(ssh_to h1 "${5:-$user}" 'echo in' 2>&1); rc=$?
        [ "$rc" -eq 0 ] && printf '%s' "$out" | grep -q '^in$' && admitted=$((admitted + 1))
        is "$admitted" 2 "$user${4:+/$4}${5:+/$5}: 2 of 3 sessions admitted on a 2-slot limit"
        is "$(holders "$name")" 2 "... both held as $name"
        printf '%s\n' "$out" | sed 's/^/# ssh said: /'
        check "... the refused one is told by the account's name" \
                sh -c 'printf "%s" "$1" | grep -qF "$2"' _ "$out" "fleetsem: all 2 sessions for $user are in use"
        logout h1 "${mark}1"
        logout h2 "${mark}2"
        check "... all logged out: nothing held" wait_for 5 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{$name}:holders') = 0 ]"
}
limit_holds 'build$' login:build_24 310
limit_holds 'DOMAIN\user' login:DOMAIN_5Cuser 320
limit_holds carol login:carol 330 Carol Carol
is "$(holders login:Carol)" 0 "... Carol never had a name of her own"

# --- a session whose slot is revoked is told so on its terminal ------------------
# ssh with a terminal: sshd opens the session in a process with none of its
# own (and logind does not know it yet), so the agent finds it on the
# shell sshd started. su in a terminal (script(1) gives it one): its own
# controlling terminal.
# (stdin: a pipe that stays open and says nothing; /dev/zero would fill
# the terminals with its echo.)
sleep 60 | ns h1 sh -c 'ssh -tt -i /run/fleetsem-test/id_test -o BatchMode=yes -o StrictHostKeyChecking=no \
        -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -p '"$(port h1)"' bob@127.0.0.1 "echo tty-in; exec sleep 3501"' \
        >"$T/ssh-tty.out" 2>&1 &
sleep 60 | ns h1 script -qfec "su -l bob -c 'echo tty-in; exec sleep 3502'" /dev/null >"$T/su-tty.out" 2>&1 &
check "bob's ssh session with a terminal is in" wait_for 10 grep -q tty-in "$T/ssh-tty.out"
check "bob's su session in a terminal is in" wait_for 10 grep -q tty-in "$T/su-tty.out"
is "$(holders login:bob)" 2 "Redis: both hold slots of login:bob"
for lease in $(rcli ZRANGE 'fleetsem:{login:bob}:holders' 0 -1); do
        ns h2 fleetsem revoke --reason "terminal test" "$lease" >/dev/null 2>&1 || echo "# revoke of $lease failed"
done
# (h1's agent ends both sessions, kills what is left of them before their
# fence points, two thirds of a lease after their last renewals, and
# keeps their slots counted until then.)
check "both revoked from h2: free once they must have fenced themselves" \
        wait_for 15 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{login:bob}:holders') = 0 ]"
check "the ssh session is told on its terminal" \
        wait_for 10 grep -q 'fleetsem: this session no longer holds its slot of login:bob' "$T/ssh-tty.out"
check "the su session is told on its terminal" \
        wait_for 5 grep -q 'fleetsem: this session no longer holds its slot of login:bob' "$T/su-tty.out"
journal h1 -u fleetsemd.service >"$T/h1-told.log"
is "$(grep -cE 'Told root@h1 pid [0-9]+ \([^)]+\) on /dev/pts/[0-9]+ that its slot of login:bob is lost' "$T/h1-told.log")" 2 \
        "h1's journal says whom it told, on which terminal, for each"
check "both sessions are ended by h1's agent (a revoke ends a login session)" \
        wait_for 5 sh -c "! nsenter -t $(ns_leader h1) -a pgrep -f 'sleep [3]50[12]' >/dev/null"
like "$(journal h1 -u fleetsemd.service)" "Ending login session [0-9a-z]+ of root@h1 pid [0-9]+ \(session-[0-9a-z]+\.scope\): its slot of login:bob is lost" \
        "... and says so"
logout h1 3501
logout h1 3502
# A terminal that takes no messages (mesg n) is left alone; the journal says so.
sleep 60 | ns h1 sh -c 'ssh -tt -i /run/fleetsem-test/id_test -o BatchMode=yes -o StrictHostKeyChecking=no \
        -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -p '"$(port h1)"' bob@127.0.0.1 "mesg n; echo tty-in; exec sleep 3503"' \
        >"$T/ssh-mesg.out" 2>&1 &
check "bob's session with mesg n is in" wait_for 10 grep -q tty-in "$T/ssh-mesg.out"
ns h2 fleetsem revoke --reason "mesg test" "$(rcli ZRANGE 'fleetsem:{login:bob}:holders' 0 0)" >/dev/null 2>&1
check "... revoked: the agent says it did not tell it" \
        wait_for 10 sh -c "nsenter -t $(ns_leader h1) -a journalctl --no-pager -q -u fleetsemd.service | grep -q 'Did not tell root@h1 pid [0-9]* ([^)]*) on /dev/pts/[0-9]* that its slot of login:bob is lost: it takes no messages (mesg n)'"
log_lacks "$T/ssh-mesg.out" 'fleetsem: this session' tty-in "... and its terminal shows nothing of it"
logout h1 3503
check "... its slot free at its fence point" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{login:bob}:holders') = 0 ]"
# A terminal that is not its user's (as a pseudo-terminal of a user
# namespace's own devpts would be here, with the same number): left alone.
sleep 60 | ns h1 script -qfec "su -l bob -c 'echo tty-in; exec sleep 3504'" /dev/null >"$T/su-other.out" 2>&1 &
check "bob's su session in a terminal is in" wait_for 10 grep -q tty-in "$T/su-other.out"
pty=$(ns h1 sh -c 'readlink /proc/$(pgrep -f "^sleep 3504")/fd/0')
ns h1 chown alice "$pty"
ns h2 fleetsem revoke --reason "owner test" "$(rcli ZRANGE 'fleetsem:{login:bob}:holders' 0 0)" >/dev/null 2>&1
check "... revoked with its terminal given to alice: the agent does not write there, and says so" \
        wait_for 10 sh -c "nsenter -t $(ns_leader h1) -a journalctl --no-pager -q -u fleetsemd.service | grep -q 'Could not tell root@h1 pid [0-9]* ([^)]*) on $pty that its slot of login:bob is lost: Operation not permitted'"
log_lacks "$T/su-other.out" 'fleetsem: this session' tty-in "... and the terminal shows nothing of it"
logout h1 3504

# --- su -l, the same limit ------------------------------------------------------
out=$(ns h1 su -l alice -c 'echo su in' 2>&1); rc=$?
check "su -l alice with 2 sessions open: refused (exit $rc)" [ "$rc" -ne 0 ]
like "$out" "fleetsem: all 2 sessions for alice are in use" "su shows the message"
out=$(ns h1 su -l bob -c 'echo su in' 2>&1)
like "$out" "su in" "su -l bob works"
logout h2 3002
out=$(ns h1 su -l alice -c 'echo su in' 2>&1)
like "$out" "su in" "one logout later, su -l alice works"
is "$(holders login:alice)" 1 "and su's session gave its slot back when it ended"
logout h2 3003
is "$(holders login:alice)" 0 "all logged out: nothing held"

ns_done_testing
