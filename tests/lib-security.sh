# For the security tests: attacks by an unprivileged local user (nobody,
# without groups) against real agents and Redis. Source after lib.sh.
# Needs root, to become nobody and to stay root for the victims.
if [ "$(id -u)" != 0 ] || ! command -v setpriv >/dev/null; then
        skip_all "the security tests need root and setpriv"
fi
id nobody >/dev/null 2>&1 || bail "no user nobody"
chmod 711 "$T"
ATTACK="$T/attack.py"
cp "$(dirname "$0")/attack.py" "$ATTACK"
chmod 644 "$ATTACK"
NOBODY_UID=$(id -u nobody)

# as_nobody CMD...: CMD as nobody:nogroup without supplementary groups.
as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
# attack HOST VERB ARGS...: tests/attack.py as nobody against HOST's agent.
attack() { local host=$1; shift; as_nobody /usr/bin/python3 "$ATTACK" "$NSBASE-$host" "$@"; }

# rss_kb PID: resident set of a process, in KiB.
rss_kb() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
# fds PID: its open file descriptors.
fds() { ls "/proc/$1/fd" | wc -l; }
# ms_of CMD...: runs CMD, prints how long it took in ms (its status: $?).
ms_of() { local t0 rc; t0=$(now_ms); "$@" >/dev/null 2>&1; rc=$?; echo $(( $(now_ms) - t0 )); return $rc; }
# replies FD: the summary lines attack.py prints before "done" (leases), also
# shown as TAP comments.
replies() {
        local line out=""
        while read -r -t 120 line <&"$1"; do
                [ "$line" = done ] && break
                out+="$line"$'\n'
        done
        printf '%s' "$out" | sed 's/^/# reply: /' >&2
        printf '%s' "$out"
}
# percentile FILE P: the P-th percentile of the numbers in FILE, one a line.
percentile() { local n; n=$(wc -l <"$1"); sort -n "$1" | sed -n "$(( (n * $2 + 99) / 100 ))p"; }
# probe CMD...: CMD timed (ms) into $T/probe, and beside it its floor, the
# start of a process of ours (fleetsem --version) timed into $T/floor, on
# the machine as it is at that moment (CMD's status: $?).
probe() {
        local rc
        ms_of "$@" >>"$T/probe"
        rc=$?
        ms_of "$FLEETSEM" --version >>"$T/floor"
        return $rc
}
# probe_verdict WHAT: the probes' p99 within PROBE_MARGIN ms of their
# floor's p99, as one TAP line, with both figures. (A request that waits
# behind an attack takes seconds; what a busy machine adds to starting a
# process is the floor's.)
# headroom: PROBE_MARGIN, 250 ms, 5.5 times the 45 ms the flood's probes
# were measured above their floor on a loaded machine (150 ms against
# 105 ms), 28 ms under tests/run.sh --busy.
PROBE_MARGIN=250
probe_verdict() {
        local p50 p99 f50 floor99
        p50=$(percentile "$T/probe" 50) p99=$(percentile "$T/probe" 99)
        f50=$(percentile "$T/floor" 50) floor99=$(percentile "$T/floor" 99)
        echo "# $1: $(wc -l <"$T/probe") runs, p50 ${p50}ms, p99 ${p99}ms (the slowest: $(sort -n "$T/probe" | tail -5 | tr '\n' ' ')ms); floor, fleetsem --version beside each: p50 ${f50}ms, p99 ${floor99}ms"
        check "$1: p99 within ${PROBE_MARGIN} ms of the floor's (${p99}ms, floor ${floor99}ms)" \
                test "$p99" -le $((floor99 + PROBE_MARGIN))
}
# ticks PID: the CPU time a process used so far, in clock ticks.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
# core_pct TICKS0 TICKS1 MS0 MS1: the percentage of a core those ticks were
# of that time.
core_pct() { echo $(( ($2 - $1) * 1000 / $(getconf CLK_TCK) * 100 / ($4 - $3) )); }
