#!/bin/bash
# Who holds a slot, as status shows it: the requester's pid and comm, and
# the unit and session of its control group, which the agent reads from
# the process' cgroup file itself (src/shared/cgroup-path.c), named as
# libsystemd names them for that process (sd_pid_get_unit(),
# sd_pid_get_session(), sd_pid_get_user_unit()).
. "$(dirname "$0")/lib.sh"
require_that "libsystemd for python3's ctypes" python3 -c 'import ctypes; ctypes.CDLL("libsystemd.so.0")'

start_redis
start_agent a

tagged_job a desc one --slots 1 &
check "the job holds its slot" wait_for 10 grep -q "enter one" "$T/order"

# The holder, as status --json has it: "PID COMM unit=UNIT session=SESSION".
holder=$(fs a status --json desc | python3 -c '
import json, sys
h = json.load(sys.stdin)["names"][0]["holders"][0]
print(h.get("pid"), h.get("comm"), "unit=%s session=%s" % (h.get("unit") or "", h.get("session") or ""))')
pid=${holder%% *}
rest=${holder#* }
is "${rest%% *}" fleetsem "the holder is fleetsem run"
is "$(cat "/proc/$pid/comm" 2>&1)" fleetsem "and its pid is that process'"

# What libsystemd says of that pid, chosen as the agent chooses: a login
# session's id beside its scope; inside a user manager, the user unit.
expected=$(python3 - "$pid" <<'EOF'
import ctypes, sys

lib = ctypes.CDLL("libsystemd.so.0")

def look(function, pid):
    value = ctypes.c_char_p()
    if getattr(lib, function)(ctypes.c_int(pid), ctypes.byref(value)) < 0 or not value.value:
        return ""
    return value.value.decode()

pid = int(sys.argv[1])
unit, session = look("sd_pid_get_unit", pid), ""
if unit.startswith("session-"):
    session = look("sd_pid_get_session", pid)
elif unit.startswith("user@"):
    unit = look("sd_pid_get_user_unit", pid) or unit
print("unit=%s session=%s" % (unit, session))
EOF
)
is "${rest#* }" "$expected" "its unit and session are libsystemd's for it"

touch "$T/go-one"
no_holder() { [ "$(holders desc)" = 0 ]; }
check "the job ends, its slot given back" wait_for 10 no_holder
stop_agents
done_testing
