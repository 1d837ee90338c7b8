#!/bin/bash
# The host's rolling reboot, again and again until STOP exists: `fleetsem
# reboot` waits in the line of REBOOT_NAME (limit 1: its fleet limit, and
# --slots 1, so that a Redis that lost the fleet limit does not refuse it:
# FINDINGS.md, findings 13 and 15), takes a
# slot held by the host itself, and runs reboot-job.py in place of the
# reboot; that records the grant with the fenced resource, holds, and gives
# the slot back as the host would after its boot. GEN: how many times the
# host came back (a job is HOST.rGEN.SEQ).
#   rebooter.sh FLEETSEM HOST GEN SEED STORE_IP STORE_PORT STOP LOG STATE_DIR TTL_MS REBOOT_NAME
fleetsem=$1 host=$2 gen=$3 seed=$4 store=$5 port=$6 stop=$7 log=$8 state=$9 ttl_ms=${10} name=${11}
here=$(cd "$(dirname "$0")" && pwd)
RANDOM=$seed
seq=0
mkdir -p "$state"
while [ ! -e "$stop" ]; do
        seq=$((seq + 1))
        # Held 1-3 leases: long enough for most faults to find a host holding it.
        hold=$((ttl_ms + RANDOM * (2 * ttl_ms) / 32768))
        how=release
        [ $((RANDOM % 2)) -eq 0 ] && how=done
        job=$host.r$gen.$seq
        "$fleetsem" reboot --slots 1 --wait 60s --reason chaos --state-dir "$state" --required-file "$state/required" \
                --reboot-command "python3 $here/reboot-job.py $fleetsem $host $store $port $name $job $hold $how $state $log" \
                "$name" >>"$log.err" 2>&1
        rc=$?
        echo "$job $name host $rc" >>"$log.runs"
        # Now and then a pause, so that the line moves on.
        sleep "0.$((RANDOM % 10))"      # not synchronisation: the workload's think time
        [ "$rc" -eq 0 ] || sleep 0.2    # not synchronisation: a failed round's back-off
done
