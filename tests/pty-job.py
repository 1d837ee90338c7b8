#!/usr/bin/env python3
# pty-job.py [--expect TEXT --send KEYS]... -- COMMAND...: runs COMMAND as the
# foreground job of a minimal job-control shell on a new pseudo-terminal,
# and types KEYS (Python escapes: \x03 is Ctrl-C, \x1a Ctrl-Z) into the
# terminal once its output shows TEXT. The shell reports, on the terminal:
#   SHELL: stopped SIG     the job stopped; the shell then continues it (fg):
#   SHELL: fg
#   SHELL: exit CODE terminal=job|other   whose the terminal was at the end
# Prints everything the terminal showed; exits 1 when it took over 30 s.
import os
import pty
import select
import signal
import sys
import time

args = sys.argv[1:]
script = []
while args and args[0] != "--":
    opt, value = args.pop(0), args.pop(0).encode().decode("unicode_escape").encode("latin-1")
    script.append((opt, value))
args.pop(0)


def shell(cmd):
    signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    pid = os.fork()
    if pid == 0:
        os.setpgid(0, 0)
        os.tcsetpgrp(0, os.getpid())
        for sig in (signal.SIGTTOU, signal.SIGPIPE, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        os.execvp(cmd[0], cmd)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass
    os.tcsetpgrp(0, pid)
    while True:
        _, status = os.waitpid(pid, os.WUNTRACED)
        if os.WIFSTOPPED(status):
            os.tcsetpgrp(0, os.getpgrp())
            print("SHELL: stopped %s" % signal.Signals(os.WSTOPSIG(status)).name, flush=True)
            os.tcsetpgrp(0, pid)
            os.killpg(pid, signal.SIGCONT)
            print("SHELL: fg", flush=True)
            continue
        code = os.waitstatus_to_exitcode(status)
        owner = "job" if os.tcgetpgrp(0) == pid else "other"
        os.tcsetpgrp(0, os.getpgrp())
        print("SHELL: exit %d terminal=%s" % (code if code >= 0 else 128 - code, owner), flush=True)
        os._exit(0)


pid, master = pty.fork()
if pid == 0:
    shell(args)
out = b""
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    while script and script[0][0] == "--send":
        os.write(master, script.pop(0)[1])
    r, _, _ = select.select([master], [], [], 0.1)
    if r:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    if script and script[0][0] == "--expect" and script[0][1] in out:
        script.pop(0)
timed_out = time.monotonic() >= deadline
if timed_out:
    os.kill(pid, signal.SIGKILL)    # the terminal hangs up: its jobs get SIGHUP
os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace").replace("\r\n", "\n"))
sys.exit(1 if timed_out else 0)
