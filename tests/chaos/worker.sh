#!/bin/bash
# One worker on one host: runs jobs under `fleetsem run` one after another
# until STOP exists, each on a name picked at random, holding it for a
# random short time; IGNORE_PCT of them with --on-lost=ignore (the jobs
# the design cannot protect when their slot is lost).
#   worker.sh FLEETSEM JOB_SH HOST IDX SEED STORE_IP STORE_PORT STOP LOG IGNORE_PCT NAME:SLOTS...
fleetsem=$1 job_sh=$2 host=$3 idx=$4 seed=$5 store=$6 port=$7 stop=$8 log=$9 ignore_pct=${10}
shift 10
names=("$@")
RANDOM=$seed
seq=0
while [ ! -e "$stop" ]; do
        seq=$((seq + 1))
        pick=${names[RANDOM % ${#names[@]}]}
        name=${pick%%:*} slots=${pick#*:}
        mode=term
        [ $((RANDOM % 100)) -lt "$ignore_pct" ] && mode=ignore
        hold=$((RANDOM % 350 + 50))
        job=$host.$idx.$seq
        "$fleetsem" run --slots "$slots" --on-lost="$mode" --wait 20s "$name" -- \
                "$job_sh" "$store" "$port" "$name" "$job" "$mode" "$hold" 2>>"$log.err"
        rc=$?
        echo "$job $name $mode $rc" >>"$log"
        # Agent down or Redis unreachable: do not spin.
        [ "$rc" -eq 0 ] || sleep 0.2
done
