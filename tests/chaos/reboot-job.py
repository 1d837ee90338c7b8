#!/usr/bin/python3
"""What a rebooting host does short of rebooting, run by `fleetsem reboot
--reboot-command` once the host holds its slot: finds the slot's lease and
token (`fleetsem status --json`), opens a session with the fenced resource
with that token (mode "host"), holds for HOLD_MS, writes, holds, ends with
DONE, then gives the slot back as after the boot (`fleetsem reboot --done
--running-timeout 0`, or `--release`), again and again while the agent
cannot be reached (an agent the nemesis killed or stopped). Writes what it
did to LOG (JSON lines, CLOCK_MONOTONIC: the harness' clock).

    reboot-job.py FLEETSEM HOST STORE_IP STORE_PORT NAME JOB HOLD_MS done|release STATE_DIR LOG
"""
import json
import socket
import subprocess
import sys
import time


def main():
    fleetsem, host, store, port, name, job, hold, how, state, log = sys.argv[1:11]
    hold = int(hold) / 1000.0
    out = open(log, "a", buffering=1)

    def rec(**kw):
        kw["t"] = round(time.monotonic(), 6)
        out.write(json.dumps(kw, separators=(",", ":")) + "\n")

    lease = token = None
    for _ in range(50):
        try:
            st = json.loads(subprocess.run([fleetsem, "status", "--json", name], capture_output=True,
                                           text=True, timeout=10).stdout)
            for n in st.get("names", []):
                for h in n.get("holders", []) if n.get("name") == name else []:
                    if h.get("host") == host and h.get("hold") == "host":
                        lease, token = h.get("lease"), h.get("token")
        except (ValueError, subprocess.TimeoutExpired, AttributeError):
            pass
        if lease and isinstance(token, int):
            break
        time.sleep(0.2)
    rec(ev="granted", job=job, name=name, lease=lease, token=token)
    if lease and isinstance(token, int):
        try:
            s = socket.create_connection((store, int(port)), 5)
            f = s.makefile("rw")

            def say(line):
                f.write(line + "\n")
                f.flush()
                return f.readline().startswith("OK")
            if say("BEGIN %s %d %s host %s" % (name, token, job, lease)):
                time.sleep(hold / 2)
                if say("WRITE %s %d %s" % (name, token, job)):
                    time.sleep(hold / 2)
                    say("DONE %s %d %s" % (name, token, job))
            s.close()
        except OSError:
            pass
    # Given back as after the boot; the agent may be down (a fault) for a while.
    argv = [fleetsem, "reboot", "--state-dir", state, name]
    argv[2:2] = ["--done", "--running-timeout", "0"] if how == "done" else ["--release"]
    rc = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        rc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
        if rc == 0:
            break
        time.sleep(0.2)
    rec(ev="released", job=job, name=name, lease=lease, token=token, how=how, rc=rc)
    return 0 if rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
