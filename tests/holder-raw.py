#!/usr/bin/env python3
# holder-raw.py NAMESPACE NAME COMM: holds a slot of NAME the way fleetsem run
# does (an anchor, then ACQUIRE), from a process whose comm is COMM (Python
# escapes allowed, e.g. \x1b). Prints "held" once granted, then holds until
# killed. For what other users can put into fleetsem status.
import ctypes
import secrets
import socket
import sys
import time

ns, name, comm = sys.argv[1:4]
PR_SET_NAME = 15
ctypes.CDLL(None).prctl(PR_SET_NAME, comm.encode().decode("unicode_escape").encode("latin-1")[:15], 0, 0, 0)
lease = secrets.token_hex(16)
anchor = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
anchor.bind("\0%s/lease/%s" % (ns, lease))
anchor.listen(128)
c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
c.connect("\0" + ns + "/agent")
c.sendall(("ACQUIRE name=%s slots=1 lease=%s wait=infinity\n" % (name, lease)).encode())
for line in c.makefile("rb"):
    if line.startswith(b"GRANTED"):
        break
    if not line.startswith(b"QUEUED"):
        sys.exit("refused: " + line.decode(errors="replace"))
else:
    sys.exit("the agent closed the connection")
print("held", flush=True)
while True:
    time.sleep(3600)
