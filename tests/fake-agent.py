#!/usr/bin/env python3
# fake-agent.py NAMESPACE STEP...: listens on @NAMESPACE/agent, takes one
# connection, reads the request line, then plays the steps: a reply line to
# send, "sleep:SECONDS", or "close". Afterwards it holds the connection until
# killed. For the clients' side of replies today's agent does not send yet.
import socket
import sys
import time

ns, steps = sys.argv[1], sys.argv[2:]
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind("\0" + ns + "/agent")
srv.listen(16)
print("listening", flush=True)
c, _ = srv.accept()
buf = b""
while b"\n" not in buf:
    chunk = c.recv(4096)
    if not chunk:
        break
    buf += chunk
print("request", buf.decode(errors="replace").strip(), flush=True)
for step in steps:
    if step.startswith("sleep:"):
        time.sleep(float(step[6:]))
    elif step == "close":
        c.close()
        c = None
        break
    else:
        c.sendall(step.encode() + b"\n")
while True:
    time.sleep(3600)
