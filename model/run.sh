#!/bin/bash
# Model-checks model/fleetsem.pml with spin.
#   model/run.sh            every property on every configuration; exit 0 when all hold
#   model/run.sh --mutants  every seeded bug; exit 0 when spin finds a violation in each
#   --ci                    CI's run: every check, but each search bounded at
#                           CI_STATES states at most (below); one that
#                           reaches it stops there, found no violation in
#                           what it searched, and passes, saying so
#   -v                      also print the events of each counterexample
#   -j N                    N searches at once (default: one a core); the
#                           output stays in the order below
#   NAME...                 only these checks (or mutants)
# Needs spin and gcc (Debian: spin, gcc).
set -u
export LC_ALL=C
# Each search runs as a job of its own process group, so that an interrupted
# run stops the verifiers it started.
set -m

here=$(cd "$(dirname "$0")" && pwd)
mode=checks
verbose=0
jobs=$(nproc)
only=()
ci=0
usage() { echo "usage: $0 [--mutants] [--ci] [-v] [-j N] [NAME...]" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--mutants) mode=mutants ;;
	--ci) ci=1 ;;
	-v) verbose=1 ;;
	-j) [ $# -ge 2 ] && [[ $2 =~ ^[1-9][0-9]*$ ]] || usage; jobs=$2; shift ;;
	-*) usage ;;
	*) only+=("$1") ;;
	esac
	shift
done
for t in spin gcc awk; do
	command -v $t >/dev/null || { echo "$0: $t is missing (apt-get install spin gcc)" >&2; exit 2; }
done

work=$(mktemp -d)
declare -A running=()   # pid of a job -> its index
trap 'for p in "${!running[@]}"; do kill -- -"$p" 2>/dev/null; done; wait; rm -rf "$work"' EXIT
trap 'exit 130' INT TERM

# Faults off unless a configuration turns them on; MAXG bounds the runs.
BASE="-DMAXG=3 -DWAKES=0 -DGIVEUP=1 -DCRASHES=0 -DRESETS=0 -DLOSSES=0 -DDUPS=0 -DSTRAYS=0 -DSTEPS=0 -DFORGETS=0 -DUSTEPS=0"

# compile NAME DEFINES CFLAGS: spin -a and gcc in $work/NAME. gcc -O2
# builds a verifier in about 8 s, -O0 in 1 s, and -O0's searches take 1.7
# times as long (crash-reset, 4.3 million states: 16.9 s at -O2, 28.3 s at
# -O0): -O2 pays for itself from a search of about 10 s at -O2, some 2.5
# million states stored (optimise). A mutant's search stops at its first
# violation: -O0.
# The model a search reads: fleetsem.pml, or reboot.pml for the reboot-*
# searches (check_reboot, mutant_reboot).
pml=fleetsem.pml
compile() {
	local dir=$work/$1 t0=$EPOCHREALTIME
	mkdir -p "$dir" && cp "$here/$pml" "$dir/" || return 1
	(cd "$dir" && spin -a $2 "$pml" >spin.log 2>&1 &&
		gcc -w -DVECTORSZ=1024 -DMEMLIM=4096 $3 -o pan pan.c >gcc.log 2>&1) || {
		echo "  cannot build: $(cat "$dir/spin.log" "$dir/gcc.log" | head -5)"
		return 1
	}
	built=$(elapsed "$t0")
}

# optimise BOUND: gcc's -O for a safety search bounded at BOUND states
# stored, three times what it stores: -O2 from 7.5 million (2.5 million
# stored), -O0 below. The same search either way, only its time differs.
optimise() { if [ "$1" -ge 7500000 ]; then echo -O2; else echo -O0; fi; }

# elapsed T0: seconds since $EPOCHREALTIME was T0, to a tenth
elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# field OUT REGEX: the first number after REGEX in pan's report
field() { sed -n "s/.*$2 *\([0-9.e+]*\).*/\1/p" "$1" | head -1; }

report() {
	local out=$1
	local stored depth errors hf t
	stored=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$out" | head -1)
	depth=$(field "$out" "depth reached")
	errors=$(field "$out" "errors:")
	t=$(field "$out" "elapsed time")
	echo "  states stored: ${stored:-?}, depth reached: ${depth:-?}, errors: ${errors:-?}, ${t:-?} s (compiling: ${built:-?} s)"
	if grep -q "hash factor" "$out"; then
		hf=$(field "$out" "hash factor:")
		echo "  search: bitstate, hash factor ${hf} (>100: nearly every state visited)"
	fi
}

# Searches are bounded by what they explore, not by the machine's speed:
# each by a number of states stored (and pan's depth and memory bounds),
# past which it stops and fails with its figures. GUARD seconds is only
# against a verifier that hangs, far beyond any search's time.
GUARD=${MODEL_GUARD_SECONDS:-3600}

# stop_pan PID: SIGINT (pan prints its figures so far and exits), SIGKILL
# 10 s later if it has not.
stop_pan() {
	local i
	kill -INT "$1" 2>/dev/null
	for ((i = 0; i < 100; i++)); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1	# not synchronisation: the poll of a search's exit
	done
	kill -KILL "$1" 2>/dev/null
	wait "$1" 2>/dev/null
}

# run_pan DIR STATES ARGS...: ./pan ARGS in DIR (its output in DIR/pan.out),
# stopped once it has stored more than STATES states (pan's progress lines,
# one a million states) or run GUARD seconds. 0: it finished; 2: past
# STATES; 124: past GUARD.
run_pan() {
	local dir=$1 bound=$2 pid start=$SECONDS n
	shift 2
	(cd "$dir" && exec ./pan "$@" >pan.out 2>&1) &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		n=$(sed -n 's/^Depth= *[0-9]* States= *\([0-9.e+]*\) .*/\1/p' "$dir/pan.out" | tail -n 1)
		if [ -n "$n" ] && past "$n" "$bound"; then
			stop_pan "$pid"
			return 2
		fi
		if [ $((SECONDS - start)) -ge "$GUARD" ]; then
			stop_pan "$pid"
			return 124
		fi
		sleep 0.5	# not synchronisation: the poll of a search that takes seconds to minutes
	done
	wait "$pid" 2>/dev/null
	return 0
}

# past N BOUND: the number N (pan writes 1.2e+07) is above BOUND
past() { awk -v n="$1" -v b="$2" 'BEGIN { exit !(n + 0 > b + 0) }'; }

# bounded OUT RC STATES: why a search that ran with run_pan is incomplete,
# if it is (one line, and status 1); the figures are report's.
bounded() {
	local out=$1 rc=$2 bound=$3 stored
	stored=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$out" | head -1)
	if [ "$rc" = 2 ] || { [ -n "$stored" ] && past "$stored" "$bound"; }; then
		echo "  past its bound of $bound states: incomplete (the figures above are where it stopped)"
	elif [ "$rc" = 124 ]; then
		echo "  did not finish within ${GUARD} s, a guard against a hang, not its bound (the figures above are where it stopped)"
	elif grep -q "max search depth too small" "$out"; then
		echo "  search depth too small: incomplete"
	elif grep -q -e "reached -DMEMLIM bound" -e "Search not completed" "$out"; then
		echo "  out of memory (MEMLIM): incomplete"
	else
		return 0
	fi
	return 1
}

# CI's bound (--ci): no search goes past CI_STATES states (stored, or
# visited for a liveness search). Five searches are larger (FINDINGS.md,
# Timings: wakes-3, liveness, liveness-drain, revert, wakes-reset, 387 of
# the some 500 s the checks search); in CI each searches its first
# CI_STATES states, every property checked on each, in a sixth to a
# half of its time, and the whole search is model/run.sh's. Every seeded
# bug (--mutants) is caught within about a million states: a search of
# CI_STATES still finds such a violation.
CI_STATES=6000000

# check NAME PROPERTY CONFIG DEFINES KIND STATES [DEPTH]
#   KIND: safety (exhaustive, assertions), bitstate, liveness (acceptance
#   cycles under weak fairness); STATES: the bound of the search in states
#   stored, three times what it stores (model/FINDINGS.md), or for a
#   liveness search in states visited (its nested search visits each
#   stored state again, with the fairness copies: pan's progress lines
#   count those), three times what it visits; DEPTH: pan's -m
#   (default 300000)
check() {
	local name=$1 prop=$2 conf=$3 defs=$4 kind=$5 bound=$6 depth=${7:-300000} out ok=1 rc cut=0
	echo "== $name"
	if [ $ci = 1 ] && [ "$bound" -gt $CI_STATES ]; then
		cut=$bound
		bound=$CI_STATES
	fi
	echo "  property: $prop"
	echo "  configuration: $conf"
	case $kind in
	safety) compile "$name" "$defs" "$(optimise "$6") -DSAFETY -DCOLLAPSE" || ok=0
		echo "  search: exhaustive (collapse compression)"
		args="-m$depth -w25" ;;
	bitstate) compile "$name" "$defs" "-O2 -DSAFETY -DBITSTATE" || ok=0
		args="-m$depth -w31 -k3" ;;
	liveness) compile "$name" "$defs" "-O2 -DCOLLAPSE -DNFAIR=4" || ok=0
		echo "  search: exhaustive, acceptance cycles, weak fairness (-a -f)"
		args="-a -f -N live -m$depth -w25" ;;
	esac
	out=$work/$name/pan.out
	if [ $ok = 1 ]; then
		if [ "$kind" = liveness ]; then echo "  bound: $bound states visited"; else echo "  bound: $bound states stored"; fi
		run_pan "$work/$name" "$bound" $args
		rc=$?
		report "$out"
		# A violation first: pan stops at it, "Search not completed".
		if [ -n "$(field "$out" "errors:")" ] && [ "$(field "$out" "errors:")" != 0 ]; then
			echo "  VIOLATED: $(grep -m1 -E 'assertion violated|acceptance cycle|invalid end' "$out" | cut -c1-160)"
			ok=0
		elif [ $cut != 0 ] && [ "$rc" = 2 ]; then
			echo "  CI: stopped at $bound states (--ci), no violation in them; the whole search (bound $cut): model/run.sh"
		elif ! bounded "$out" "$rc" "$bound"; then
			ok=0
		fi
	fi
	if [ $ok = 1 ]; then echo "  ok"; else echo "  FAILED"; return 1; fi
}

# mutant NAME WHAT DEFINES: spin must find a violation within
# MUTANT_STATES states (each finds its first within a million or so).
MUTANT_STATES=20000000
mutant() {
	local name=$1 what=$2 defs=$3 out steps
	echo "== mutant $name: $what"
	if compile "$name" "$defs" "-O0 -DSAFETY -DCOLLAPSE"; then
		out=$work/$name/pan.out
		run_pan "$work/$name" "$MUTANT_STATES" -m300000 -w25
		rc=$?
		report "$out"
		if [ "$(field "$out" "errors:")" != "" ] && [ "$(field "$out" "errors:")" != 0 ] &&
			[ -f "$work/$name/$pml.trail" ]; then
			steps=$(wc -l <"$work/$name/$pml.trail")
			echo "  caught: $(grep -m1 -oE 'assertion violated|acceptance cycle|invalid end state' "$out"), counterexample of $steps steps"
			(cd "$work/$name" && spin $defs -t "$pml" 2>/dev/null | sed -n 's/^ *MSC: /    /p' >events)
			echo "  $(grep -c . "$work/$name/events") protocol events; the last ones:"
			if [ $verbose = 1 ]; then cat "$work/$name/events"; else tail -6 "$work/$name/events"; fi
			return 0
		fi
		bounded "$out" "$rc" "$MUTANT_STATES"
	fi
	echo "  NOT CAUGHT"
	return 1
}

check_reboot() { pml=reboot.pml; check "$@"; }
mutant_reboot() { pml=reboot.pml; mutant "$@"; }

# The searches, queued by `queue check|mutant ARGS...` and run by run_all.
queued=()
queue() {
	local n
	if [ ${#only[@]} -gt 0 ]; then
		for n in "${only[@]}"; do [ "$n" = "$2" ] && break; n=; done
		[ -n "$n" ] || return 0
	fi
	queued+=("$(printf '%q ' "$@")")
}

# run_all: $jobs searches at once, each one's output printed whole and in
# the order queued as soon as those before it are done; sets passed, failed.
run_all() {
	local n=${#queued[@]} next=0 shown=0 pid rc
	passed=0 failed=0
	while [ $shown -lt $n ]; do
		while [ ${#running[@]} -lt $jobs ] && [ $next -lt $n ]; do
			eval "${queued[next]}" >"$work/out.$next" 2>&1 </dev/null &
			running[$!]=$next
			next=$((next + 1))
		done
		wait -n -p pid
		rc=$?
		echo $rc >"$work/rc.${running[$pid]}"
		unset "running[$pid]"
		while [ $shown -lt $n ] && [ -f "$work/rc.$shown" ]; do
			cat "$work/out.$shown"
			if [ "$(cat "$work/rc.$shown")" = 0 ]; then passed=$((passed + 1)); else failed=$((failed + 1)); fi
			shown=$((shown + 1))
		done
	done
}

N1="N=1, 2 jobs on 2 hosts, TTL 3 ticks, fence at 2, drift 1, agents paused at will, at most 3 grants"
# Steps of Redis' clock: a tick is a sixth of a lease (TTL 6, renewals
# every 2 ticks), no drift (the step is what eats the holder's margin); one
# step of USTEP ticks that the scripts do not notice (at most half a lease);
# 2 grants (a holder cut off, and the one granted when its lease ends).
S6="N=1, 2 jobs on 2 hosts, TTL 6 ticks, renewal every 2, drift 0, agents paused at will, at most 2 grants, waiters may give up"
SBASE="$BASE -DMAXG=2 -DTTL=6 -DRENEW=2 -DDRIFT=0 -DUSTEPS=1"
if [ $mode = checks ]; then
	# The longest first, so that both cores stay busy to the end.
	queue check wakes-3 "at most N believers; no overtaking" "$N1 but 3 jobs (2 on host 0), waiters do not give up; pub/sub on (a late g message and a waiter asked again)" \
		"$BASE -DGIVEUP=0 -DNJ=3 -DWAKES=1" bitstate 115400000 1000000
	queue check liveness "every waiter eventually holds (LTL, weak fairness)" "N=1, 2 jobs, no pauses (the clock waits for live agents), holders end; one crash, one reset, one wake lost" \
		"-DLIVENESS -DSYNC -DWAKES=1 -DCRASHES=1 -DRESETS=1 -DLOSSES=1 -DDUPS=0 -DSTRAYS=0" liveness 66000000
	queue check liveness-drain "every waiter eventually holds, the operator's undrain under fairness (LTL, weak fairness)" "N=1, 2 jobs, no pauses, holders end; an operator drains once and undrains once; one reset (the drain goes with it), one wake lost" \
		"-DLIVENESS -DSYNC -DWAKES=1 -DCRASHES=0 -DRESETS=1 -DLOSSES=1 -DDUPS=0 -DSTRAYS=0 -DDRAIN=1" liveness 65000000
	queue check revert "at most N believers; no overtaking" "N=1, 2 jobs on 2 hosts, TTL 3 ticks, fence at 2, drift 1, agents paused at will, at most 2 grants, waiters do not give up; a master's data kept, one reset, then a failover back to that master (finding 9 of the fault harness)" \
		"$BASE -DMAXG=2 -DGIVEUP=0 -DRESETS=1 -DREVERTS=1" safety 34600000
	queue check crash-reset "at most N believers; no overtaking" "$N1, waiters do not give up; one crash and one reset" \
		"$BASE -DGIVEUP=0 -DCRASHES=1 -DRESETS=1" safety 13000000
	# The default revoke: the slot stays counted until its holder's agent
	# releases it (the job stopped) or its lease runs out, the holder's
	# timer a tick late or not (revoke-at-fence below: the rule before).
	queue check revoke-counted "at most N believers, a revoked holder among them; a revoked holder stops believing within the fence; no overtaking" "$N1, waiters do not give up; pub/sub on, one wake lost (the r message or another); root revokes job 0's held slot once, at any time, without --now; LOST heard late" \
		"$BASE -DGIVEUP=0 -DWAKES=1 -DLOSSES=1 -DREVOKES=1" safety 12800000
	queue check pause "at most N believers; no overtaking (asserts)" "$N1, waiters may give up" \
		"$BASE" safety 700000
	queue check crash "at most N believers; no overtaking" "$N1, waiters may give up; one agent crash, restart, re-adoption" \
		"$BASE -DCRASHES=1" safety 3500000
	queue check reset "at most N believers; no overtaking" "$N1, waiters may give up; one Redis reset or failover, re-assertion, grace" \
		"$BASE -DRESETS=1" safety 6300000
	queue check drain "no new grant while drained; at most N believers; no overtaking" "$N1, waiters do not give up; an operator drains once and undrains once, at any time; one Redis reset (the drain goes with it), re-assertion while drained" \
		"$BASE -DGIVEUP=0 -DRESETS=1 -DDRAIN=1" safety 5900000
	queue check wakes "at most N believers; no overtaking" "$N1, waiters do not give up; pub/sub on, one wake lost, one duplicated" \
		"$BASE -DGIVEUP=0 -DWAKES=1 -DLOSSES=1 -DDUPS=1" safety 4800000
	queue check wakes-reset "at most N believers; no overtaking" "$N1, waiters do not give up; pub/sub on, one wake lost, one Redis reset (the proofs go with it)" \
		"$BASE -DGIVEUP=0 -DWAKES=1 -DLOSSES=1 -DRESETS=1" bitstate 36400000
	queue check stranger "at most N believers (a stranger's grant counts)" "$N1, waiters may give up; a user on host 1 releases or asks with job 0's lease id" \
		"$BASE -DSTRAYS=1" safety 1400000
	queue check limit "nobody more crowded than the slots it asked for" "3 jobs asking 2, 1, 2 slots (2 on host 0), TTL 3, fence at 2, drift 1, agents paused at will, at most 3 grants, waiters do not give up" \
		"$BASE -DGIVEUP=0 -DNJ=3 -DSL0=2 -DSL1=1 -DSL2=2" safety 4300000
	queue check n2 "at most N believers; no overtaking" "N=2, 3 jobs (2 on host 0), TTL 3, fence at 2, drift 1, agents paused at will, at most 3 grants, waiters do not give up" \
		"$BASE -DGIVEUP=0 -DNJ=3 -DSL0=2 -DSL1=2 -DSL2=2" safety 5100000
	queue check weights "at most N units of believers (each its weight); no overtaking" "N=2, 3 jobs (2 on host 0), job 0 taking 2 units, TTL 3, fence at 2, drift 1, agents paused at will, at most 3 grants, waiters do not give up" \
		"$BASE -DGIVEUP=0 -DNJ=3 -DSL0=2 -DSL1=2 -DSL2=2 -DW0=2" safety 4200000
	queue check fenced-resource "no stale write accepted (token check downstream)" "$N1, waiters do not give up; holders freeze (timers stop), one reset" \
		"$BASE -DGIVEUP=0 -DFREEZE -DRESETS=1" safety 6200000
	queue check revoke "a revoked holder stops believing within the fence; at most N believers besides it; no overtaking; no new grant while drained" "$N1, waiters do not give up; root revokes job 0's held slot once, at any time; an operator drains once and undrains once" \
		"$BASE -DGIVEUP=0 -DREVOKES=1 -DREVOKE_NOW=1 -DDRAIN=1" safety 1200000
	queue check forget "at most N believers; no overtaking" "$N1, waiters may give up; Redis, up all along, loses the name's keys, or all of fleetsem's (FLUSHALL), once, at any time: census, grace, re-assertion" \
		"$BASE -DFORGETS=1" safety 4900000
	queue check clock-step "at most N believers; no overtaking" "$S6; fence at 3 (half a lease); Redis' clock stepped forward half a lease (3 ticks), unnoticed, once, at any time" \
		"$SBASE -DFENCE=3 -DUSTEP=3" safety 3700000
	queue check clock-step-third "at most N believers; no overtaking" "$S6; fence at 4 (2/3 of a lease, as fleetsem run); Redis' clock stepped forward a third of a lease (2 ticks), unnoticed, once, at any time" \
		"$SBASE -DFENCE=4 -DUSTEP=2" safety 4100000
	# The global keys lost alone (src/agent/library/keys.list), each once,
	# at any time, and a job's end.
	queue check clock-lost "at most N believers; no overtaking" "$N1, waiters do not give up; the fleet clock key lost once, at any time: the next script makes a new clock, and what would run out within a lease gets a lease" \
		"$BASE -DGIVEUP=0 -DCLOCKLOSS=1" safety 500000
	queue check census-lost "at most N believers; no overtaking" "$N1, waiters do not give up; the census lost once, made again by another name's call, a renewal or a grant; the name's keys, or all (FLUSHALL), lost once; each at any time" \
		"$BASE -DGIVEUP=0 -DFORGETS=1 -DCENSUSLOSS=1" safety 8800000
	queue check host-index "at most N believers (a session's among them); no overtaking" "$N1, waiters do not give up; job 0 a login session (no fence, never asks again, runs on when LOST), its agent never paused past a tick; one agent crash, restart, re-adoption; host 0's index lost once, at any time" \
		"$BASE -DGIVEUP=0 -DCRASHES=1 -DHOSTLOSS=1 -DPAM0 -DPROMPT=1" safety 460000
	queue check forget-restart "at most N believers (a session's among them); no overtaking" "$N1, waiters do not give up; job 0 a login session (no fence, never asks again, runs on when LOST), its agent never paused past a tick; Redis, up all along, loses the name's keys, or all of fleetsem's (FLUSHALL), once, at any time; one agent crash, restart, re-adoption (the host's record marks a lease held)" \
		"$BASE -DGIVEUP=0 -DCRASHES=1 -DFORGETS=1 -DPAM0 -DPROMPT=1" safety 3000000
	queue check job-end "at most N jobs running (a fenced or lost job counts until it is gone); a revoked holder stops believing within the fence; no overtaking" "$N1, waiters do not give up; root revokes job 0's held slot once, at any time, without --now; a job fenced or told LOST runs on until it exits or run kills it (LOST's free_in, the lease's end)" \
		"$BASE -DGIVEUP=0 -DREVOKES=1 -DJOBEND=1" safety 300000
	queue check job-end-session "at most N jobs running (a session ended by its agent counts until it is gone); no overtaking" "$N1, waiters do not give up; job 0 a login session (no fence, never asks again), its agent never paused past a tick; root revokes its slot once, at any time, without --now: its agent ends the session, killed before the lease's end" \
		"$BASE -DGIVEUP=0 -DREVOKES=1 -DJOBEND=1 -DPAM0 -DPROMPT=1" safety 300000
	# fleetsem reboot (reboot.pml): slots held by hosts across their
	# reboot, taken in one order across groups and the reboot name.
	RB="3 hosts, groups r1 (hosts 0, 1) and r2 (hosts 1, 2) of 1 each, each host its groups in name order then reboot; a host down keeps its slots until it is back (--done, or a revoke) or, once, never comes back (its lease runs out)"
	queue check_reboot reboot-1 "caps hold (holders, and hosts down, of every name); no deadlock (no invalid end state)" "$RB; reboot limit 1" \
		"-DLIM=1" safety 12000
	queue check_reboot reboot-2 "caps hold (holders, and hosts down, of every name); no deadlock (no invalid end state)" "$RB; reboot limit 2" \
		"-DLIM=2" safety 17000
	queue check_reboot reboot-reset "caps hold (holders, and hosts down, of every name); no deadlock (no invalid end state)" "$RB; reboot limit 1; once, at any time, Redis loses every holder: the hosts up put theirs back, a host down cannot" \
		"-DLIM=1 -DRESET" safety 100000
	queue check revoke-fenced "no stale write accepted after a revoke" "$N1, waiters do not give up; holders freeze (timers stop); root revokes job 0's held slot once" \
		"$BASE -DGIVEUP=0 -DREVOKES=1 -DREVOKE_NOW=1 -DFREEZE" safety 1900000
else
	queue mutant no-grace "no grace after a reset" "$BASE -DRESETS=1 -DMUT_NO_GRACE"
	queue mutant no-fence "holders never fence themselves" "$BASE -DMUT_NO_FENCE"
	queue mutant limit-per-request "the limit taken from each request" "$BASE -DSL1=2 -DMUT_LIMIT_PER_REQUEST"
	queue mutant release-no-owner "release without the owner check" "$BASE -DSTRAYS=1 -DMUT_NO_OWNER_RELEASE"
	queue mutant renew-no-owner "acquire/renew of a held lease without the owner check" "$BASE -DSTRAYS=1 -DMUT_NO_OWNER_ACQUIRE"
	queue mutant wake-grants "a wake message taken as a grant" "$BASE -DGIVEUP=0 -DNJ=3 -DWAKES=1 -DMUT_WAKE_GRANTS"
	queue mutant proof-per-place "a new proof only with a new place in line, not with every acquire call" "$BASE -DGIVEUP=0 -DNJ=3 -DWAKES=1 -DMUT_PROOF_PER_PLACE"
	queue mutant fence-from-receipt "RENEWED vouches 2/3 TTL from when it is heard, not from the call" "$BASE -DMUT_FENCE_FROM_RECEIPT"
	queue mutant renew-missing-confirms "a renewal that finds the lease missing taken for a confirmation (a revoke never heard)" "$BASE -DGIVEUP=0 -DREVOKES=1 -DREVOKE_NOW=1 -DMUT_RENEW_MISSING_CONFIRMS"
	R0="$BASE -DGIVEUP=0 -DDRIFT=0 -DWAKES=1 -DLOSSES=1 -DREVOKES=1"
	queue mutant revoke-at-once "fleetsem revoke frees the slot at once (the --now form), its holder still a believer" "$R0 -DMUT_REVOKE_AT_ONCE"
	queue mutant unheard-releases "an agent releases a lease its renewal finds missing at once unless it heard the r message (a revoke crossing a renewal)" "$R0 -DLOSSES=0 -DMUT_UNHEARD_RELEASES"
	queue mutant revoke-at-fence "the revoke before (library 13): a revoked slot freed at its holder's fence point, which a holder whose timer fires a tick late outlives" "$R0 -DDRIFT=1 -DMUT_REVOKE_AT_FENCE"
	queue mutant revert-same-epoch "a failover back to a master that never caught up keeps its old epoch (no reset, no grace)" "$BASE -DGIVEUP=0 -DRESETS=1 -DREVERTS=1 -DMUT_REVERT_SAME_EPOCH"
	queue mutant reassert-stale "re-assert a lease not confirmed within a TTL" "$BASE -DRESETS=1 -DMUT_REASSERT_STALE"
	queue mutant any-order "grant whoever asks when a slot is free (no FIFO)" "$BASE -DMUT_ANY_ORDER"
	queue mutant weight-counts "hand-over counts holders, not their weights" "$BASE -DGIVEUP=0 -DNJ=3 -DSL0=2 -DSL1=2 -DSL2=2 -DW0=2 -DMUT_WEIGHT_COUNTS"
	queue mutant token-restart "the token counter restarts from 0 after a reset" "$BASE -DGIVEUP=0 -DFREEZE -DRESETS=1 -DMUT_TOKEN_RESTART"
	queue mutant token-raw-clock "tokens follow Redis' TIME, steps and all, not the tokens' clock" "$BASE -DGIVEUP=0 -DFREEZE -DRESETS=1 -DSTEPS=1 -DMUT_TOKEN_RAW_CLOCK"
	queue mutant no-token-check "frozen holder, resource without the token check" "$BASE -DGIVEUP=0 -DFREEZE -DMUT_NO_TOKEN_CHECK"
	queue mutant frozen-overlap "by design: a frozen holder overlaps the next (believers > N)" "$BASE -DGIVEUP=0 -DFREEZE -DCHECK_CROWD"
	# The name's counters gone wrong: built without the assertion that they
	# match the sets (NO_COUNT_CHECK), so a property has to catch them.
	queue mutant count-reassert "a re-assertion does not count its holder in HELD" "$BASE -DRESETS=1 -DNO_COUNT_CHECK -DMUT_COUNT_REASSERT"
	queue mutant count-newcomer "LIMIT not lowered when a newcomer asks for fewer slots" "$BASE -DSL0=2 -DNO_COUNT_CHECK -DMUT_COUNT_NEWCOMER"
	# Drain: no new grant while the name is drained.
	queue mutant forget-new "a name whose keys Redis lost is new: no grace, its holders told LOST" "$BASE -DFORGETS=1 -DMUT_FORGET_NEW"
	queue mutant clock-lost-zero "the fleet clock key lost read as offset 0: every expiry moved back by the lost clock's offset" "$BASE -DGIVEUP=0 -DCLOCKLOSS=1 -DMUT_CLOCK_ZERO"
	queue mutant census-lost-old "the census written back only when a name's idle expiry moves, a young census forgiving a name only until a lease after its making" "$BASE -DGIVEUP=0 -DFORGETS=1 -DCENSUSLOSS=1 -DPROMPT=3 -DMUT_CENSUS_OLD"
	queue mutant census-paused "the census written back by renewals only, not by a grant (agents paused past a lease: a grant on a name the census lacks, its keys lost before its first renewal); 2 grants, waiters stay" "$BASE -DMAXG=2 -DGIVEUP=0 -DFORGETS=1 -DCENSUSLOSS=1 -DMUT_CENSUS_RENEW_ONLY"
	queue mutant host-index-no-record "re-adoption from Redis' host index alone, no record on the host" "$BASE -DGIVEUP=0 -DCRASHES=1 -DHOSTLOSS=1 -DPAM0 -DPROMPT=1 -DMUT_NO_RECORD"
	queue mutant adopt-no-mark "a lease of a name whose keys all went, its agent restarted, taken for gone (no mark of a grant in the host's record): its session runs on beside the next holder" "$BASE -DGIVEUP=0 -DCRASHES=1 -DFORGETS=1 -DPAM0 -DPROMPT=1 -DMUT_ADOPT_NO_MARK"
	queue mutant adopt-stale "the same, the mark taken whatever its age: a lease whose agent was paused past its lease, then crashed, put back after its name's keys went (its job told GRANTED again beside the next holder)" "$BASE -DGIVEUP=0 -DCRASHES=1 -DFORGETS=1 -DPAM0 -DPROMPT=1 -DMUT_ADOPT_STALE"
	queue mutant session-runs-on "a login session whose slot is revoked runs on (not ended by its agent): its successor runs beside it" "$BASE -DGIVEUP=0 -DREVOKES=1 -DJOBEND=1 -DPAM0 -DPROMPT=1 -DMUT_SESSION_RUNS_ON"
	queue mutant job-outlives "run's SIGKILL 10 s after SIGTERM whatever the slot: the job outlives it" "$BASE -DGIVEUP=0 -DDRIFT=0 -DREVOKES=1 -DJOBEND=1 -DMUT_JOB_OUTLIVES"
	queue mutant clock-step-fence "by design: a step of half a lease, unnoticed, with the fence at 2/3 of a lease (a lease ends a sixth of a lease before its holder fences)" "$SBASE -DFENCE=4 -DUSTEP=3"
	queue mutant drain-straight-in "acquire's straight-in path (nobody in line) ignores the drain" "$BASE -DDRAIN=1 -DMUT_DRAIN_STRAIGHT_IN"
	queue mutant drain-release "a release while drained hands the slot to the next in line" "$BASE -DDRAIN=1 -DMUT_DRAIN_RELEASE"
	queue mutant_reboot reboot-any-order "a host takes its reboot slots in the reverse order (a deadlock)" "-DLIM=1 -DMUT_ANY_ORDER"
	queue mutant_reboot reboot-short-lease "a host-held slot runs out while its host is down, and the host comes back after" "-DLIM=1 -DMUT_SHORT_LEASE"
	queue mutant_reboot reboot-job-grace "after a reset, slots hosts hold themselves are granted again after a job's grace, before a host down then is back" "-DLIM=1 -DRESET -DMUT_JOB_GRACE"
fi
if [ ${#only[@]} -gt 0 ] && [ ${#queued[@]} != ${#only[@]} ]; then
	echo "$0: ${#only[@]} names given, ${#queued[@]} of them known ($mode)" >&2; exit 2
fi
t0=$EPOCHREALTIME
run_all
echo "$passed passed, $failed failed, in $(elapsed "$t0") s with $jobs at once"
[ $failed = 0 ]
