#!/bin/bash
# One job under `fleetsem run`: opens its session with the fenced resource
# with its token, holds for HOLD_MS, writes, holds, and ends with DONE.
#   job.sh STORE_IP STORE_PORT NAME JOB MODE HOLD_MS
# The default SIGTERM disposition: the fence stops it at once. Only the job
# itself holds the connection (not the sleep it waits for): the session
# ends when the job does.
store=$1 port=$2 name=$3 job=$4 mode=$5 hold=$6
half=$(printf '%d.%03d' $((hold / 2000)) $((hold / 2 % 1000)))
exec 3<>"/dev/tcp/$store/$port" || exit 2
say() { echo "$1 $name $FLEETSEM_TOKEN $job${2:+ $2}" >&3 && read -r answer <&3 && [ "${answer%% *}" = OK ]; }
say BEGIN "$mode $FLEETSEM_LEASE" || exit 3
sleep "$half" 3>&-      # not synchronisation: the job's run time, first half
say WRITE
sleep "$half" 3>&-      # not synchronisation: ... and second half
say DONE
