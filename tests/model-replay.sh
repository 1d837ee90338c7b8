#!/bin/bash
# The model checked against the scripts: runs of model/fleetsem.pml under
# spin, a seed each, their Redis-side steps replayed on a real
# redis-server with the agent's library, on a clock the test moves; the
# same grants, refusals and tokens in both, step by step
# (tests/model-replay.py says how). A configuration is the model's -D
# defines, as model/run.sh's checks; then a seeded bug of the model (one
# rule changed there, not in the library) must differ from Redis.
# MODEL_REPLAY_SEEDS=N runs N seeds a configuration (6); MODEL_REPLAY_FIRST=S
# starts at seed S (1); MODEL_REPLAY_DEFINES="-D..." adds defines to every
# configuration but the seeded bug's (a mutant of model/run.sh's: the
# test must fail).
. "$(dirname "$0")/lib.sh"

require spin
require cc
cc -O2 -Wall -Wextra -Werror -shared -fPIC -o "$T/clockstep.so" "$(dirname "$0")/chaos/clockstep.c" ||
        bail "cannot build the clock-step shim"
# Redis' wall clock stands still at the time this file says ("=MS", the
# same length each time), which the replay writes.
printf '=%015d' 1800000000000 >"$T/clock"
LD_PRELOAD=$T/clockstep.so CLOCKSTEP_FILE=$T/clock start_redis
SRC=$(cd "$(dirname "$0")/../src/agent/library" && pwd)
LIBRARY=$(python3 "$SRC/embed-lua.py" --library "$SRC/keys.list" "$SRC/scripts.list" "$SRC/replies.list" \
        "$SRC/lua/library.version" "$SRC/lua/prelude" && echo .) || bail "embed-lua.py makes no library"
v=$(printf %s "${LIBRARY%.}" | rcli -x FUNCTION LOAD REPLACE)
[ "$v" = fleetsem ] || bail "the library does not load: $v"

SEEDS=${MODEL_REPLAY_SEEDS:-6}
FIRST=${MODEL_REPLAY_FIRST:-1}
EXTRA=${MODEL_REPLAY_DEFINES:-}
[[ $SEEDS =~ ^[1-9][0-9]*$ && $FIRST =~ ^[1-9][0-9]*$ ]] || bail "MODEL_REPLAY_SEEDS and _FIRST are numbers"
# Faults off unless a configuration turns them on (model/run.sh's BASE),
# waiters wait; MAXG high: a random run is one path, not a search.
BASE="-DMAXG=40 -DWAKES=1 -DGIVEUP=0 -DCRASHES=0 -DRESETS=0 -DLOSSES=0 -DDUPS=0 -DSTRAYS=0 -DSTEPS=0 -DFORGETS=0 -DUSTEPS=0"

# NAME:DEFINES, a configuration of the model a line; "!NAME": a seeded bug
# (one rule changed in the model, not in the library) that must differ.
CONFIGS=(
        # Two jobs on two hosts, the clock waiting for the agents (no
        # pauses): crashes, resets, wake messages lost and duplicated, a
        # stranger with another's lease.
        "faults:$BASE -DSYNC -DCRASHES=2 -DRESETS=2 -DLOSSES=1 -DDUPS=1 -DSTRAYS=2 $EXTRA"
        # Three jobs asking 2, 1 and 2 slots (the limit in force), agents
        # paused at will (leases run out), resets.
        "limit:$BASE -DNJ=3 -DSL0=2 -DSL1=1 -DSL2=2 -DRESETS=2 $EXTRA"
        # N=2, job 0 taking 2 units, crashes and resets.
        "weights:$BASE -DNJ=3 -DSL0=2 -DSL1=2 -DSL2=2 -DW0=2 -DCRASHES=2 -DRESETS=2 $EXTRA"
        # Three jobs; an operator's drain and undrain, root's revoke (counted until
        # released or run out), a reset.
        "drain-revoke:$BASE -DNJ=3 -DDRAIN=1 -DREVOKES=1 -DRESETS=2 $EXTRA"
        # revoke --now, a drain, crashes, no pauses.
        "revoke-now:$BASE -DSYNC -DDRAIN=1 -DREVOKES=1 -DREVOKE_NOW=1 -DCRASHES=2 $EXTRA"
        # The limit taken from each request instead of the one in force.
        "!mutant-limit-per-request:$BASE -DNJ=3 -DSL0=2 -DSL1=1 -DSL2=2 -DMUT_LIMIT_PER_REQUEST"
        # The revoke before: the revoked slot freed at its holder's fence point.
        "!mutant-revoke-at-fence:$BASE -DNJ=3 -DREVOKES=1 -DMUT_REVOKE_AT_FENCE"
)
# (Without meson's MALLOC_PERTURB_, meant for the project's C: the replay
# and spin read and free menus of kilobytes a step, each free a memset
# with it, which makes the test take three to seven times as long.)
out=$(env -u MALLOC_PERTURB_ python3 "$(dirname "$0")/model-replay.py" "$REDIS_SOCK" "$T/clock" "$FIRST" "$SEEDS" "${CONFIGS[@]}" 2>&1)
rc=$?
while IFS= read -r line; do
        case $line in
        "ok "*) ok "${line#ok }" ;;
        "not_ok "*) not_ok "${line#not_ok }" ;;
        "#"*) echo "$line" ;;
        *) echo "# $line" ;;
        esac
done <<<"$out"
is "$rc" 0 "the replay ran to its end"
done_testing
