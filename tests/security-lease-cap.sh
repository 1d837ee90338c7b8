#!/bin/bash
# Leases per user: nobody, allowed one name, asks for 300 slots of it (its
# connections go once answered; the anchors hold). max_leases_per_user
# (256 by default) are granted, the rest refused with a clear error, and
# root is still served.
TTL=2s
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-security.sh"

printf 'allow = capped nobody\n' >"$T/agent.conf"
start_redis
start_agent a --config "$T/agent.conf"

coproc LEASES { attack a leases 300 capped; }
replies=$(replies "${LEASES[0]}")
is "$(printf '%s' "$replies" | grep -c '^GRANTED 256$')" 1 "256 of nobody's requests are granted"
is "$(printf '%s' "$replies" | grep -cE '^ERROR code=limit message=uid '"$NOBODY_UID"' holds or waits for 256 units on this host already; 1 more would pass max_leases_per_user \(256\) 44$')" 1 \
        "the 44 others are refused, saying why"
is "$(holders capped)" 256 "Redis holds 256 of nobody's slots"
ms=$(ms_of fs a run --slots 1 cap-root -- true)
is "$?" 0 "root is still served"
echo "# root's run took ${ms}ms"
exec {LEASES[1]}>&-
wait "$LEASES_PID"
check "nobody's slots go with its anchors" wait_for 10 sh -c "[ \$(redis-cli -s $REDIS_SOCK ZCARD 'fleetsem:{capped}:holders') = 0 ]"
done_testing
