#!/bin/bash
# One worker on one host: runs jobs under `fleetsem run` one after another
# until STOP exists, each on a name picked at random, holding it for a
# random time: 50-400 ms, or for LONG_PCT of them 1-1.5 leases (long
# enough for a fault to catch them holding); IGNORE_PCT of them with
# --on-lost=ignore (the jobs the design cannot protect when their slot is
# lost).
#   worker.sh FLEETSEM JOB_SH HOST IDX SEED STORE_IP STORE_PORT STOP LOG IGNORE_PCT LONG_PCT TTL_MS NAME:SLOTS...
fleetsem=$1 job_sh=$2 host=$3 idx=$4 seed=$5 store=$6 port=$7 stop=$8 log=$9 ignore_pct=${10} long_pct=${11} ttl_ms=${12}
shift 12
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
        [ $((RANDOM % 100)) -lt "$long_pct" ] && hold=$((ttl_ms + RANDOM * (ttl_ms / 2) / 32768))
        job=$host.$idx.$seq
        "$fleetsem" run --slots "$slots" --on-lost="$mode" --wait 60s "$name" -- \
                "$job_sh" "$store" "$port" "$name" "$job" "$mode" "$hold" 2>>"$log.err"
        rc=$?
        echo "$job $name $mode $rc" >>"$log"
        # Agent down or Redis unreachable: do not spin.
        [ "$rc" -eq 0 ] || sleep 0.2    # not synchronisation: a failed job's back-off
done
