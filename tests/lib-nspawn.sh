# Hosts under a real systemd: Debian 12 containers booted with
# systemd-nspawn, each with its own network namespace (so its own abstract
# sockets: its own agent), all sharing the test's redis-server through a
# bind-mounted directory. Source after lib.sh.
#
# The root (debootstrap --variant=minbase) is built once and kept in
# $FLEETSEM_TEST_ROOT (default /var/cache/fleetsem-tests); containers boot
# it read-only with a tmpfs overlay, so they share it and leave it as it was.

NS_PACKAGES=systemd,systemd-sysv,dbus,libpam-systemd,libhiredis0.14,openssh-server,openssh-client,libpam-modules,libpam-runtime,procps
NS_ROOT_REV=2          # bump when ns_root() changes what it builds
NS_CACHE=${FLEETSEM_TEST_ROOT:-/var/cache/fleetsem-tests}
NS_MIRROR=${FLEETSEM_TEST_MIRROR:-$(sed -n 's/^URIs: *\(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)}
NS_MIRROR=${NS_MIRROR:-http://deb.debian.org/debian}
NS_HOSTS=()
NS_BINDS=()     # more --bind/--bind-ro options for every container
# The tests' redis-server listens where every container sees it.
mkdir -p "$T/shared"
REDIS_SOCK=$T/shared/redis.sock
SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$(cd "$(dirname "$FLEETSEM")/../.." && pwd)

[ "$(id -u)" -eq 0 ] || skip_all "needs root (systemd-nspawn)"
require systemd-nspawn
require debootstrap
require nsenter

# The root, built when missing (one build at a time: tests may race).
ns_root() {
        local key root
        key=$(echo "$NS_PACKAGES $NS_ROOT_REV" | md5sum | cut -c1-8)
        root="$NS_CACHE/bookworm-$key"
        mkdir -p "$NS_CACHE"
        (
                flock 9
                [ -x "$root/lib/systemd/systemd" ] && exit 0
                rm -rf "$root.new"
                echo "# building the container root in $root (debootstrap, about a minute)" >&2
                debootstrap --variant=minbase --include="$NS_PACKAGES" bookworm "$root.new" "$NS_MIRROR" \
                        >"$T/debootstrap.log" 2>&1 || { tail -n 20 "$T/debootstrap.log" >&2; exit 1; }
                # No getty on the console: nothing reads it. No /etc/hostname:
                # each container keeps the name nspawn gives it (--hostname).
                rm -f "$root.new/etc/systemd/system/getty.target.wants/"* "$root.new/etc/hostname"
                mv "$root.new" "$root"
        ) 9>"$NS_CACHE/.lock" || bail "cannot build the container root"
        NS_ROOT=$root
}

ns_leader() { eval "echo \${NS_LEADER_$1:-}"; }

# ns HOST CMD...: runs CMD inside HOST (all its namespaces).
ns() { local host=$1; shift; nsenter -t "$(ns_leader "$host")" -a -- "$@"; }

# The agent's configuration on HOST, bound in at /etc/fleetsem (with the
# lines of $NS_CONF, when set, at its end).
ns_config() {
        local host=$1
        mkdir -p "$T/$host/etc"
        cat >"$T/$host/etc/fleetsem.conf" <<EOF
redis = unix:/run/fleetsem-test/redis.sock
host_id = $host
lease_ttl = $TTL
${NS_CONF:-}
EOF
        chmod 0640 "$T/$host/etc/fleetsem.conf"
}

# The cgroup hierarchies systemd uses: each container gets a subtree of its
# own in them (started in a fresh cgroup), or containers booted from a host
# without systemd would all share the root cgroup and remove each other's
# units' cgroups.
ns_cgroup_dirs() {
        local d
        if [ -f /sys/fs/cgroup/cgroup.procs ]; then
                echo /sys/fs/cgroup
                return
        fi
        for d in /sys/fs/cgroup/systemd /sys/fs/cgroup/unified; do
                [ -f "$d/cgroup.procs" ] && echo "$d"
        done
}

# Removes a cgroup subtree once nothing runs in it, deepest first.
ns_cgroup_remove() {
        local d
        for d in $(ns_cgroup_dirs); do
                [ -d "$d/$1" ] && find "$d/$1" -depth -type d -exec rmdir {} + 2>/dev/null
        done
}

# ns_launch HOST [NSPAWN_OPTION...]: boots HOST in the background, with the
# shared directory bound in at /run/fleetsem-test; ns_wait_booted waits for it.
ns_launch() { ns_spawn once "$@"; }

# ns_launch_rebooting HOST [NSPAWN_OPTION...]: as ns_launch, but HOST is
# booted again each time it reboots (systemctl reboot makes nspawn exit
# with 133), until it stops otherwise; each boot appends "TIME_MS boot"
# to $T/boots-HOST. ns_wait_booted finds the boot that runs now.
ns_launch_rebooting() { ns_spawn again "$@"; }

# ns_spawn once|again HOST [NSPAWN_OPTION...]: what both do; NS_PID_HOST is
# the loop that runs HOST's nspawn (ns_leader_of finds its container).
ns_spawn() {
        local mode=$1 host=$2; shift 2
        [ -n "${NS_ROOT:-}" ] || ns_root
        mkdir -p "$T/shared"
        (
                for d in $(ns_cgroup_dirs); do
                        mkdir -p "$d/$NSBASE-$host" && echo "$BASHPID" >"$d/$NSBASE-$host/cgroup.procs"
                done
                while :; do
                        [ "$mode" = again ] && echo "$(date +%s%3N) boot" >>"$T/boots-$host"
                        systemd-nspawn -q -D "$NS_ROOT" --volatile=overlay -b -M "$NSBASE-$host" --hostname="$host" \
                                --private-network --register=no --keep-unit \
                                --bind="$T/shared:/run/fleetsem-test" "$@" "${NS_BINDS[@]}"
                        rc=$?
                        [ "$mode" = again ] && [ "$rc" = 133 ] && [ ! -e "$T/stop-$host" ] || break
                done
        ) >"$T/console-$host.txt" 2>&1 </dev/null &
        eval "NS_PID_$host=$!"
        disown
        NS_HOSTS+=("$host")
}

# ns_leader_of PID: the container's PID 1 (systemd, a child of nspawn)
# that the loop PID (ns_spawn) runs now; looked up afresh at each call (an
# nspawn that just exited for a reboot has none, the next one has it once
# it runs).
ns_leader_of() {
        local n
        for n in $(pgrep -x -P "$1" systemd-nspawn); do
                pgrep -x -P "$n" systemd | head -n1
        done | grep -m1 .
}

# ns_wait_booted HOST: until HOST's systemd has finished booting.
ns_wait_booted() {
        local host=$1 pid leader
        pid=$(eval "echo \$NS_PID_$host")
        # The container's PID 1 is nspawn's child once it runs systemd
        # (before that, a short-lived helper child of nspawn's may be
        # the one there).
        wait_for 30 ns_leader_of "$pid" || {
                ps -e -o pid=,ppid=,comm= | sed 's/^/# ps: /'
                bail "container $host did not start (no systemd under pid $pid)"
        }
        leader=$(ns_leader_of "$pid")
        eval "NS_LEADER_$host=$leader"
        wait_for 60 sh -c "nsenter -t $leader -a systemctl is-system-running --wait | grep -qE '^(running|degraded)\$'" || {
                ns "$host" systemctl --failed --no-pager >&2
                bail "container $host did not boot"
        }
}

# ns_boot HOST...: boots each HOST and installs the agent the way the README
# says: the shipped units, a config file, systemctl enable --now fleetsem.socket.
ns_boot() {
        local host unit_exec
        unit_exec=$(sed -n 's/^ExecStart=//p' "$BUILD/systemd/fleetsemd.service")
        for host in "$@"; do
                ns_config "$host"
                ns_launch "$host" \
                        --bind-ro="$FLEETSEMD:$unit_exec" \
                        --bind-ro="$FLEETSEM:/usr/local/bin/fleetsem" \
                        --bind-ro="$BUILD/systemd/fleetsemd.service:/etc/systemd/system/fleetsemd.service" \
                        --bind-ro="$SRC/systemd/fleetsem.socket:/etc/systemd/system/fleetsem.socket" \
                        --bind-ro="$T/$host/etc:/etc/fleetsem"
        done
        for host in "$@"; do
                ns_wait_booted "$host"
                ns "$host" systemctl enable --now fleetsem.socket >/dev/null 2>&1 || bail "cannot enable fleetsem.socket on $host"
        done
}

# ns_boot_rebooting HOST...: boots each HOST as ns_launch_rebooting does,
# with the shipped units as ns_boot installs them and the reboot units
# too (fleetsem-reboot.service and .timer, fleetsem-reboot-done.service),
# its /var/lib/fleetsem in $T/HOST/lib
# (kept across its reboots: fleetsem reboot's state, and what a test puts
# there for a health command); the agent's socket and the done service
# wanted on every boot (systemd.wants= on PID 1's command line: the
# overlay forgets systemctl enable). NS_REBOOT_OPTS: more nspawn options
# and units wanted (systemd.wants=...) for each; a host in NS_DONE_OFF
# boots without the done service wanted (as the package ships it).
NS_REBOOT_OPTS=()
NS_DONE_OFF=""
ns_boot_rebooting() {
        local host unit_exec done_wants
        unit_exec=$(sed -n 's/^ExecStart=//p' "$BUILD/systemd/fleetsemd.service")
        for host in "$@"; do
                ns_config "$host"
                mkdir -p "$T/$host/lib"
                done_wants=systemd.wants=fleetsem-reboot-done.service
                case " $NS_DONE_OFF " in *" $host "*) done_wants=systemd.wants=fleetsem.socket ;; esac
                ns_launch_rebooting "$host" \
                        --bind-ro="$FLEETSEMD:$unit_exec" \
                        --bind-ro="$FLEETSEM:/usr/local/bin/fleetsem" \
                        --bind-ro="$BUILD/systemd/fleetsemd.service:/etc/systemd/system/fleetsemd.service" \
                        --bind-ro="$SRC/systemd/fleetsem.socket:/etc/systemd/system/fleetsem.socket" \
                        --bind-ro="$BUILD/systemd/fleetsem-reboot-done.service:/etc/systemd/system/fleetsem-reboot-done.service" \
                        --bind-ro="$BUILD/systemd/fleetsem-reboot.service:/etc/systemd/system/fleetsem-reboot.service" \
                        --bind-ro="$SRC/systemd/fleetsem-reboot.timer:/etc/systemd/system/fleetsem-reboot.timer" \
                        --bind-ro="$T/$host/etc:/etc/fleetsem" \
                        --bind="$T/$host/lib:/var/lib/fleetsem" "${NS_REBOOT_OPTS[@]}" \
                        systemd.wants=fleetsem.socket "$done_wants"
        done
        for host in "$@"; do ns_wait_booted "$host"; done
}

# ns_sample_holders NAME &: every 20 ms until killed, "MS COUNT HOST TOKEN"
# of NAME's holders as Redis has them (HOST, TOKEN: the first holder's), appended
# to $T/held; MS is taken before Redis is read. One redis-cli a sample,
# which reads both at once: on a loaded machine a sample of several
# processes took longer than a container's reboot, between a host's grant
# and its going down (nothing then while Redis is down).
ns_sample_holders() {
        local t n rec f
        while :; do
                t=${EPOCHREALTIME//[!0-9]/}
                # (read sets n and rec empty when Redis is down and says nothing.)
                { read -r n; read -r rec; } < <(redis-cli -s "$REDIS_SOCK" EVAL \
                        "local l = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
                         return {redis.call('ZCARD', KEYS[1]), l and redis.call('HGET', KEYS[2], l) or ''}" \
                        2 "fleetsem:{$1}:holders" "fleetsem:{$1}:clock" 2>/dev/null)
                read -r -a f <<<"$rec"          # the record: HOST UID SLOTS TOKEN ...
                echo "$((t / 1000)) $n ${f[0]:-} ${f[3]:-}"
                sleep 0.02      # not synchronisation: the sampler's period
        done >>"$T/held"
}

# boots HOST: how many times HOST has booted.
boots() { grep -c ' boot$' "$T/boots-$1"; }

# ns_check_in_turn HOST...: TAP lines on $T/held (ns_sample_holders) once
# each HOST rebooted once: never two holders, each HOST went down (its
# second boot began) while it held the slot (a sample either side of that
# moment names it), and the slot went to each once, in turn.
ns_check_in_turn() {
        local host at around order
        is "$(awk '$2 > m { m = $2 } END { print m + 0 }' "$T/held")" 1 "Redis never counted two holders"
        for host in "$@"; do
                at=$(sed -n '2s/ boot$//p' "$T/boots-$host")
                # The last sample before that moment names it; or, as a
                # reboot can take less than a sample's period on a loaded
                # machine, the first one after it does, with a slot granted
                # before it (its token, µs on Redis' clock at the grant,
                # which no step moves here, at most that moment): a slot a
                # host holds itself stays its own through the reboot.
                around=$(awk -v t="$at" -v h="$host" '$1 <= t { b = $3 } $1 > t && !seen { a = $3; g = $4; seen = 1 }
                        END { print (b == h || (a == h && g != "" && g / 1000 <= t)) ? h : "before " b ", after " a " (token " g ")" }' "$T/held")
                is "$around" "$host" "$host rebooted while holding the slot"
        done
        order=$(awk '$3 != "" && $3 != last { print $3; last = $3 }' "$T/held" | tr '\n' ' ')
        is "$(tr ' ' '\n' <<<"$order" | sed '/^$/d' | sort | tr '\n' ' ')" "$(printf '%s\n' "$@" | sort | tr '\n' ' ')" \
                "the slot went to each host once, in turn ($order)"
}

# Every container goes down with the test (also on failure).
ns_cleanup() {
        local host leader pid
        for host in "${NS_HOSTS[@]}"; do
                touch "$T/stop-$host"
                leader=$(ns_leader "$host")
                [ -n "$leader" ] && kill -KILL "$leader" 2>/dev/null
        done
        for host in "${NS_HOSTS[@]}"; do
                pid=$(eval "echo \$NS_PID_$host")
                wait_for 10 sh -c "! kill -0 $pid"
                ns_cgroup_remove "$NSBASE-$host"
        done
        cleanup
}
trap ns_cleanup EXIT

# ns_unit HOST FILE: installs a unit (its text on stdin) under /etc/systemd/system.
ns_unit() { ns "$1" sh -c "mkdir -p \"\$(dirname /etc/systemd/system/$2)\" && cat >/etc/systemd/system/$2"; }

# ns_prop HOST UNIT PROPERTY: one property's value, from systemd itself.
ns_prop() { ns "$1" systemctl show -P "$3" "$2"; }

# journal HOST [ARGS...]: the container's journal.
journal() { local host=$1; shift; ns "$host" journalctl --no-pager -q "$@"; }

# Keeps each agent's journal with the test's logs (shown when a check
# failed), then finishes as done_testing does.
ns_done_testing() {
        local host
        for host in "${NS_HOSTS[@]}"; do
                journal "$host" -u fleetsemd.service >"$T/agent-$host.log" 2>&1
                [ "$tap_failed" -gt 0 ] && journal "$host" -o short-precise >"$T/journal-$host.log" 2>&1
        done
        done_testing
}
