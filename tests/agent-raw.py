#!/usr/bin/env python3
# agent-raw.py NAMESPACE [--hold SECONDS] [--no-newline] [--want-close]
# DATA...: connects to @NAMESPACE/agent, sends DATA (Python escapes allowed,
# e.g. \x00), prints every reply line until the agent closes or the hold
# time ends. --want-close: exits 3 if the hold ended with the connection
# still open (the agent never closed it).
import socket
import sys

args = sys.argv[1:]
ns = args.pop(0)
hold = 2.0
newline = True
want_close = False
while args and args[0].startswith("--"):
    opt = args.pop(0)
    if opt == "--hold":
        hold = float(args.pop(0))
    elif opt == "--no-newline":
        newline = False
    elif opt == "--want-close":
        want_close = True
data = b"".join(a.encode().decode("unicode_escape").encode("latin-1") for a in args)
if newline:
    data += b"\n"

s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect("\0" + ns + "/agent")
s.sendall(data)
s.settimeout(hold)
buf = b""
closed = False
try:
    while True:
        chunk = s.recv(65536)
        if not chunk:
            closed = True
            break
        buf += chunk
except socket.timeout:
    pass
sys.stdout.write(buf.decode("latin-1"))
if want_close and not closed:
    sys.exit(3)
